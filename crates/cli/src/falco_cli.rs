//! Falco's command line: `vigil` without a subcommand takes the flags a Falco user's scripts
//! and units pass to `falco` and does what Falco does with them — `-L`, `-l RULE`, `--list`,
//! `-V FILE`, `--support`, `--dry-run` print or check and exit; `-e FILE` evaluates a capture;
//! otherwise Vigil watches the host (`vigil watch`), with `-M`, `-s FILE`, `--stats-interval`
//! (the same flags as `vigil watch`'s) and `-U`. Rule selection (`-r`, `-t`, `-T`, `-D`) and configuration
//! (`-c`, `-o`) are the same flags every subcommand takes.
//!
//! Flags Falco has and Vigil does not need (drivers, plugins, gVisor, CRI sockets…) are not
//! accepted: clap names them, so a script that relies on one fails loudly rather than running
//! with a different meaning.
//!
//! This module only translates: [`translate`] turns the flags into a [`FalcoCommand`], which
//! the command line runs as it runs its subcommands.

use std::path::PathBuf;

use clap::Args;

use crate::error::InvalidInput;
use crate::flags::{DurationArgs, LiveArgs, StatsFileArgs};
use crate::replay::ReplayArgs;
use crate::selection::RulesSelection;
use crate::watch::WatchArgs;

#[derive(Args)]
pub struct FalcoArgs {
    #[command(flatten)]
    pub selection: RulesSelection,
    /// Show the name and description of every rule and exit (Falco `-L`; JSON lines with
    /// `json_output`).
    #[arg(short = 'L')]
    pub list_rules: bool,
    /// Show the name and description of rule RULE and exit (Falco `-l`).
    #[arg(short = 'l', value_name = "RULE")]
    pub describe_rule: Option<String>,
    /// List every supported field and exit (Falco `--list`; SOURCE: `syscall`, the only
    /// source Vigil has).
    #[arg(long = "list", value_name = "SOURCE", num_args = 0..=1, default_missing_value = "")]
    pub list_fields: Option<String>,
    /// With --list: print only the field names (Falco `-N`).
    #[arg(short = 'N', requires = "list_fields")]
    pub names_only: bool,
    /// Load the rules file(s) and report every problem, then exit (Falco `-V`,
    /// repeatable).
    #[arg(short = 'V', long = "validate", value_name = "RULES_FILE")]
    pub validate: Vec<PathBuf>,
    /// Print support information (version, system, command line, configuration, rules
    /// files) as JSON and exit (Falco `--support`).
    #[arg(long)]
    pub support: bool,
    /// Load the configuration and rules, then exit without capturing (Falco `--dry-run`).
    #[arg(long)]
    pub dry_run: bool,
    /// Evaluate the capture FILE instead of watching the host (Falco `-e`; Vigil's capture
    /// formats, see `vigil replay`).
    #[arg(short = 'e', value_name = "EVENTS_FILE")]
    pub events_file: Option<PathBuf>,
    #[command(flatten)]
    pub duration: DurationArgs,
    /// Flush every alert to the outputs as it is emitted (Falco `-U`; sets
    /// `buffered_outputs: false`).
    #[arg(short = 'U', long = "unbuffered")]
    pub unbuffered: bool,
    #[command(flatten)]
    pub stats_file: StatsFileArgs,
    /// Print Falco's version block (Vigil's version, the Falco engine version whose rules
    /// language it implements, its driver) and exit; one JSON object with
    /// `-o json_output=true` (Falco `--version`).
    #[arg(long)]
    pub version: bool,
}

/// What a Falco command line asks for, in Vigil's terms.
pub enum FalcoCommand {
    /// `--version`: the configuration decides text or JSON.
    Version(crate::selection::ConfigArgs),
    /// `--support`.
    Support(RulesSelection),
    /// `-V FILE…`: as `vigil rules validate`.
    Validate(Vec<PathBuf>),
    /// `--list [-N]`: as `vigil fields`.
    Fields { names_only: bool },
    /// `-L`: as `vigil rules list`, JSON lines with `json_output`.
    ListRules(RulesSelection),
    /// `-l RULE`.
    Describe {
        selection: RulesSelection,
        rule: String,
    },
    /// `--dry-run`.
    DryRun(RulesSelection),
    /// `-e FILE`: as `vigil replay`.
    Replay(ReplayArgs),
    /// Otherwise: as `vigil watch`.
    Watch(WatchArgs),
}

/// The Vigil command a Falco command line stands for (the first of Falco's exiting flags
/// that is given wins, in Falco's order).
pub fn translate(mut args: FalcoArgs) -> Result<FalcoCommand, InvalidInput> {
    if args.version {
        return Ok(FalcoCommand::Version(args.selection.config));
    }
    if args.unbuffered {
        args.selection
            .config
            .options
            .push("buffered_outputs=false".to_owned());
    }
    if args.support {
        return Ok(FalcoCommand::Support(args.selection));
    }
    if !args.validate.is_empty() {
        return Ok(FalcoCommand::Validate(args.validate));
    }
    if let Some(source) = &args.list_fields {
        if !(source.is_empty() || source == "syscall") {
            return Err(InvalidInput(format!(
                "unknown event source `{source}` (Vigil has `syscall`)"
            )));
        }
        return Ok(FalcoCommand::Fields {
            names_only: args.names_only,
        });
    }
    if args.list_rules {
        return Ok(FalcoCommand::ListRules(args.selection));
    }
    if let Some(rule) = args.describe_rule {
        return Ok(FalcoCommand::Describe {
            selection: args.selection,
            rule,
        });
    }
    if args.dry_run {
        return Ok(FalcoCommand::DryRun(args.selection));
    }
    if let Some(file) = args.events_file {
        return Ok(FalcoCommand::Replay(ReplayArgs::falco(
            file,
            args.selection,
            LiveArgs::stats_file_only(args.stats_file),
        )));
    }
    Ok(FalcoCommand::Watch(WatchArgs::falco(
        args.selection,
        args.duration,
        LiveArgs::stats_file_only(args.stats_file),
    )))
}

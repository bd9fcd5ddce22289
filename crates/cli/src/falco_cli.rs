//! Falco's command line: `vigil` without a subcommand takes the flags a Falco user's scripts
//! and units pass to `falco` and does what Falco does with them — `-L`, `-l RULE`, `--list`,
//! `-V FILE`, `--support`, `--dry-run` print or check and exit; `-e FILE` evaluates a capture;
//! otherwise Vigil watches the host (`vigil watch`), with `-M SECS`, `-s FILE`,
//! `--stats-interval MS` and `-U`. Rule selection (`-r`, `-t`, `-T`, `-D`) and configuration
//! (`-c`, `-o`) are the same flags every subcommand takes.
//!
//! Flags Falco has and Vigil does not need (drivers, plugins, gVisor, CRI sockets…) are not
//! accepted: clap names them, so a script that relies on one fails loudly rather than running
//! with a different meaning.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use vigil_engine::RulesText;

use crate::{fields, list, load_selection, replay, validate, watch, RulesSelection};

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
    /// Stop after SECS seconds (Falco `-M`).
    #[arg(short = 'M', value_name = "SECS")]
    pub duration: Option<f64>,
    /// Flush every alert to the outputs as it is emitted (Falco `-U`; sets
    /// `buffered_outputs: false`).
    #[arg(short = 'U', long = "unbuffered")]
    pub unbuffered: bool,
    /// Write Falco-style statistics to FILE (Falco `-s`).
    #[arg(short = 's', value_name = "STATS_FILE")]
    pub stats_file: Option<PathBuf>,
    /// Interval of the statistics lines, in milliseconds (Falco `--stats-interval`).
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    pub stats_interval: u64,
    /// Print the version and exit.
    #[arg(long)]
    pub version: bool,
}

/// Runs a Falco-style invocation.
pub fn run(mut args: FalcoArgs) -> Result<ExitCode> {
    if args.version {
        // One line, as scripts read it (`--support` has the rules engine version too).
        println!("vigil {}", env!("CARGO_PKG_VERSION"));
        return Ok(ExitCode::SUCCESS);
    }
    if args.unbuffered {
        args.selection
            .config
            .options
            .push("buffered_outputs=false".to_owned());
    }
    if args.support {
        return support(&args.selection);
    }
    if !args.validate.is_empty() {
        return validate(&args.validate);
    }
    if let Some(source) = &args.list_fields {
        if !(source.is_empty() || source == "syscall") {
            return Err(crate::InvalidInput(format!(
                "unknown event source `{source}` (Vigil has `syscall`)"
            ))
            .into());
        }
        return fields(false, args.names_only);
    }
    if args.list_rules {
        let json = args.selection.config.load()?.json_output;
        return list(&args.selection, json);
    }
    if let Some(rule) = &args.describe_rule {
        return describe(&args.selection, rule);
    }
    if args.dry_run {
        let config = args.selection.config.load()?;
        load_selection(&args.selection, &config)?;
        eprintln!("vigil: --dry-run: configuration and rules loaded");
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(file) = args.events_file {
        return replay(crate::ReplayArgs::falco(
            file,
            args.selection,
            args.stats_file,
            args.stats_interval,
        ));
    }
    watch::watch(watch::WatchArgs::falco(
        args.selection,
        args.duration,
        args.stats_file,
        args.stats_interval,
    ))
}

/// The rules engine version Vigil matches (`required_engine_version` it accepts).
fn engine_version() -> String {
    let (major, minor, patch) = vigil_rules::ENGINE_VERSION;
    format!("{major}.{minor}.{patch}")
}

/// Falco `-l RULE`: the rule's name and description (JSON with `json_output`).
fn describe(selection: &RulesSelection, name: &str) -> Result<ExitCode> {
    let config = selection.config.load()?;
    let ruleset = load_selection(selection, &config)?;
    let Some(rule) = ruleset.rules().iter().find(|r| r.name == name) else {
        return Err(crate::InvalidInput(format!("no rule named `{name}`")).into());
    };
    let mut out = io::stdout().lock();
    if config.json_output {
        let line = serde_json::json!({
            "rule": rule.name,
            "desc": rule.desc,
            "priority": rule.priority.as_str(),
            "source": rule.source,
            "tags": rule.tags,
        });
        writeln!(out, "{line}")?;
    } else {
        writeln!(out, "{:<60} Description", "Rule")?;
        writeln!(out, "{:<60} -----------", "----")?;
        writeln!(out, "{:<60} {}", rule.name, rule.desc.trim())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Falco `--support`: what a bug report needs, as one JSON object.
fn support(selection: &RulesSelection) -> Result<ExitCode> {
    let config = selection.config.load()?;
    let paths = if selection.rules.is_empty() {
        &config.rules_files
    } else {
        &selection.rules
    };
    let files = if paths.is_empty() {
        vec![RulesText::embedded_default()]
    } else {
        vigil_engine::read_rules_paths(paths).map_err(|e| crate::InvalidInput(format!("{e:#}")))?
    };
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let cmdline: Vec<String> = std::env::args().collect();
    let report = serde_json::json!({
        "version": env!("CARGO_PKG_VERSION"),
        "engine_info": { "engine_version": engine_version() },
        "system_info": {
            "sysname": read("ostype"),
            "nodename": vigil_state::procfs::host_name(),
            "release": read("osrelease"),
            "version": read("version"),
            "machine": std::env::consts::ARCH,
        },
        "cmdline": cmdline.join(" "),
        "config": config.to_yaml(),
        "rules_files": files
            .iter()
            .map(|f| serde_json::json!({ "name": f.name, "content": f.text }))
            .collect::<Vec<_>>(),
    });
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &report)?;
    writeln!(out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

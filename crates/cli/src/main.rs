//! `vigil`: the command-line interface. The only crate that knows flags, exit codes and where
//! text goes; everything else is in the library crates.
//!
//! Exit codes: `0` success, `1` runtime failure, `2` invalid input (rules, capture, arguments).
//! A closed stdout (`vigil … | head`) ends quietly with `0`.
// The binary is where output goes: the print lints guard the libraries.
#![allow(clippy::print_stdout, clippy::print_stderr)]

//!
//! This file only parses and dispatches: the flags of each command live with it
//! (`selection`: rules and configuration; `watch`, `run`, `replay`; `inspect`: the commands
//! that print and exit; `falco_cli`: Falco's flags translated), the live agent in
//! `vigil-agent`.

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod error;
mod falco_cli;
mod flags;
mod generate;
mod inspect;
mod live;
mod replay;
mod run;
mod selection;
mod watch;

use error::{EXIT_FAILURE, EXIT_INVALID};
use falco_cli::FalcoCommand;
use inspect::CaptureForm;
use selection::{ConfigArgs, RulesSelection};

#[derive(Parser)]
#[command(
    name = "vigil",
    about = "Linux runtime security agent with Falco-compatible rules",
    long_about = "Linux runtime security agent with Falco-compatible rules.\n\nWithout a subcommand, \
                  `vigil` takes Falco's command line (`-c`, `-o`, `-r`, `-t`, `-T`, `-D`, `-L`, `-l`, \
                  `--list`, `-V`, `--support`, `-M`, `-U`, `-s`, `-e`, `--dry-run`) and does what \
                  `falco` does with it: by default, watch this host (as `vigil watch`).",
    args_conflicts_with_subcommands = true,
    after_help = "Examples:\n  vigil -c /etc/falco/falco.yaml -r /etc/falco/falco_rules.yaml\n  vigil -L -r rules.yaml\n  vigil replay capture.jsonl --json\n  vigil rules validate /etc/falco/falco_rules.yaml rules.d/\n  vigil fields | grep ^proc."
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    falco: falco_cli::FalcoArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Evaluate a recorded capture (binary or JSON lines) and print the alerts.
    #[command(
        after_help = "Example:\n  vigil replay testdata/demo/events.jsonl -r /etc/falco/falco_rules.yaml --json"
    )]
    Replay(replay::ReplayArgs),
    /// Run a workload under the kernel-less tracer: alerts, enforcement, seccomp profiles.
    #[command(
        after_help = "Alerts go to stderr (or --alerts FILE); Vigil exits as the workload did.\nExample:\n  vigil run -r /etc/falco/falco_rules.yaml -- cat /etc/shadow"
    )]
    Run(run::RunArgs),
    /// Watch every process on this host with eBPF (root) and print alerts as they happen.
    #[command(
        after_help = "Examples:\n  vigil watch -r /etc/falco/falco_rules.yaml --json\n  vigil watch -w capture.vcap --duration 60 --stats"
    )]
    Watch(watch::WatchArgs),
    /// Validate, list and inspect rules files.
    #[command(subcommand)]
    Rules(RulesCommand),
    /// Work with capture files.
    #[command(subcommand)]
    Capture(CaptureCommand),
    /// Show the effective configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
    /// Benchmarks: agent overhead, exec-rate CPU, capacity (reports in target/bench/).
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// List every supported field with its type and meaning.
    Fields {
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Perform real suspicious system calls that the rules detect; `generate bench` counts the
    /// alerts an agent raises for them (Falco event-generator's capacity method).
    #[command(subcommand)]
    Generate(generate::GenerateCommand),
}

#[derive(Subcommand)]
enum RulesCommand {
    /// Load rules files and report every problem, with counts per file.
    #[command(after_help = "Exits 0 when the files load, 2 when any error is found.")]
    Validate {
        /// Rules files or directories.
        #[arg(required = true, value_name = "FILE|DIR")]
        paths: Vec<PathBuf>,
    },
    /// List the rules a selection loads.
    List {
        #[command(flatten)]
        selection: RulesSelection,
        /// Print JSON lines instead of a table.
        #[arg(long)]
        json: bool,
        /// For each rule, what it costs a workload started here with `vigil run`: the
        /// syscalls that stop the tracer for it, or that it cannot match this workload (its
        /// container and host are fixed for the run).
        #[arg(long)]
        explain_run: bool,
    },
    /// Replay a capture and print the rules, and the comparisons in them, that cost the
    /// most evaluation time.
    #[command(
        after_help = "Every event is timed (twice: rules, then the comparisons in them).\nExample:\n  vigil rules profile capture.vcap -r /etc/falco/falco_rules.yaml --top 5"
    )]
    Profile(inspect::ProfileArgs),
}

#[derive(Subcommand)]
enum ConfigCommand {
    /// Print the effective configuration (file or embedded default, then `-o` overrides).
    #[command(
        after_help = "Example:\n  vigil config show -c /etc/falco/falco.yaml -o json_output=true"
    )]
    Show {
        #[command(flatten)]
        config: ConfigArgs,
    },
}

#[derive(Subcommand)]
enum CaptureCommand {
    /// Convert a capture between the binary and the JSON-lines form.
    #[command(
        after_help = "Example:\n  vigil capture convert --to binary scenario.jsonl scenario.vcap"
    )]
    Convert {
        /// The capture to read (either form).
        input: PathBuf,
        /// Where to write the converted capture.
        output: PathBuf,
        /// The form to write.
        #[arg(long, value_enum)]
        to: CaptureForm,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => falco_cli::translate(cli.falco)
            .map_err(anyhow::Error::from)
            .and_then(falco),
        Some(Command::Replay(args)) => replay::replay(args),
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Watch(args)) => watch::watch(args),
        Some(Command::Rules(RulesCommand::Validate { paths })) => inspect::validate(&paths),
        Some(Command::Rules(RulesCommand::List {
            selection,
            json,
            explain_run: false,
        })) => inspect::list(&selection, json),
        Some(Command::Rules(RulesCommand::List {
            selection,
            json,
            explain_run: true,
        })) => inspect::explain_run(&selection, json),
        Some(Command::Rules(RulesCommand::Profile(args))) => inspect::profile(&args),
        Some(Command::Capture(CaptureCommand::Convert { input, output, to })) => {
            inspect::convert(&input, &output, to)
        }
        Some(Command::Config(ConfigCommand::Show { config })) => inspect::config_show(&config),
        Some(Command::Fields { json }) => inspect::fields(json, false),
        Some(Command::Bench(command)) => bench::run(command),
        Some(Command::Generate(command)) => generate::generate(command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            if is_broken_pipe(&err) {
                return ExitCode::SUCCESS;
            }
            eprintln!("vigil: {err:#}");
            if error::is_invalid_input(&err) {
                ExitCode::from(EXIT_INVALID)
            } else {
                ExitCode::from(EXIT_FAILURE)
            }
        }
    }
}

/// Runs what a Falco command line asks for.
fn falco(command: FalcoCommand) -> anyhow::Result<ExitCode> {
    match command {
        FalcoCommand::Version(config) => inspect::version(&config),
        FalcoCommand::Support(selection) => inspect::support(&selection),
        FalcoCommand::Validate(paths) => inspect::validate(&paths),
        FalcoCommand::Fields { names_only } => inspect::fields(false, names_only),
        FalcoCommand::ListRules(selection) => inspect::list_rules(&selection),
        FalcoCommand::Describe { selection, rule } => inspect::describe(&selection, &rule),
        FalcoCommand::DryRun(selection) => inspect::dry_run(&selection),
        FalcoCommand::Replay(args) => replay::replay(args),
        FalcoCommand::Watch(args) => watch::watch(args),
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

//! `vigil`: the command-line interface. The only crate that knows flags, exit codes and where
//! text goes; everything else is in the library crates.
//!
//! Exit codes: `0` success, `1` runtime failure, `2` invalid input (rules, capture, arguments).
//! A closed stdout (`vigil … | head`) ends quietly with `0`.
// The binary is where output goes: the print lints guard the libraries.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};
use vigil_config::{Config, RuleMatch, RuleSelector};
use vigil_engine::{Engine, RulesText};
use vigil_fields::Catalog;
use vigil_rules::{
    Diagnostic, LoadOptions, LoadResult, Priority, RuleMatching, Selection, Severity,
};
use vigil_state::StateConfig;

mod bench;
mod capture_out;
mod falco_cli;
mod generate;
mod outputs;
mod run;
mod run_reload;
mod watch;

/// Exit code for invalid input: rules, captures, arguments.
const EXIT_INVALID: u8 = 2;
/// Exit code for a runtime failure.
const EXIT_FAILURE: u8 = 1;

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
    Replay(ReplayArgs),
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

/// The configuration file and its command-line overrides (Falco's `-c` and `-o`).
#[derive(Args)]
struct ConfigArgs {
    /// Configuration file (falco.yaml key names; default: the embedded configuration).
    #[arg(short = 'c', long = "config", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Override a configuration key (repeatable), e.g. `-o json_output=true`.
    #[arg(short = 'o', long = "option", value_name = "KEY=VALUE")]
    options: Vec<String>,
}

impl ConfigArgs {
    /// The effective configuration: the file (or the embedded default), then each override.
    /// Ignored Falco-only settings are reported on stderr; errors are invalid input (exit 2).
    fn load(&self) -> Result<Config> {
        let loaded = match &self.config {
            Some(path) => Config::load(path).map_err(|e| InvalidInput(e.to_string()))?,
            None => Config::from_yaml_str(vigil_config::DEFAULT_CONFIG, "<embedded config>")
                .map_err(|e| InvalidInput(e.to_string()))?,
        };
        let mut config = loaded.config;
        let mut warnings = loaded.warnings;
        for option in &self.options {
            warnings.extend(
                config
                    .apply_override(option)
                    .map_err(|e| InvalidInput(e.to_string()))?,
            );
        }
        for warning in warnings {
            eprintln!("vigil: warning: {warning}");
        }
        Ok(config)
    }
}

#[derive(Args)]
struct RulesSelection {
    #[command(flatten)]
    config: ConfigArgs,
    /// Rules file or directory (repeatable; replaces the configuration's `rules_files`;
    /// default: the embedded Vigil ruleset).
    #[arg(short = 'r', long = "rules", value_name = "PATH")]
    rules: Vec<PathBuf>,
    /// Minimum priority of rules to load (default: the configuration's `priority`).
    #[arg(long, value_name = "PRIORITY")]
    min_priority: Option<String>,
    /// Run only rules carrying this tag (repeatable; Falco `-t`). `*` wildcards allowed.
    #[arg(short = 't', long, value_name = "TAG")]
    enable_tag: Vec<String>,
    /// Disable rules carrying this tag (repeatable; Falco `-T`). Applied after --enable-tag.
    #[arg(short = 'T', long, value_name = "TAG")]
    disable_tag: Vec<String>,
    /// Disable rules whose name matches (repeatable; `*` wildcards). Applied last.
    #[arg(long, value_name = "RULE")]
    disable: Vec<String>,
    /// Disable rules whose name contains SUBSTRING (repeatable; Falco `-D`). Applied last.
    #[arg(short = 'D', value_name = "SUBSTRING")]
    disable_substring: Vec<String>,
}

impl RulesSelection {
    /// Where the files a reload reads come from: `-c FILE`, and the `-r` paths (which
    /// replace the configuration's `rules_files`).
    fn watch_sources(&self) -> vigil_agent::WatchSources {
        vigil_agent::WatchSources {
            config_file: self.config.config.clone(),
            rules_override: self.rules.clone(),
        }
    }

    /// The enable/disable selection: the configuration's `rules:` entries in order, then these
    /// flags in Falco's order (`-t` narrows to tags, then `-T` and rule names disable).
    fn selection(&self, config: &Config) -> Selection {
        let mut selection = Selection::default();
        for selector in &config.rules {
            selection = match selector {
                RuleSelector::Enable(RuleMatch::Rule(r)) => selection.enable_rule(r),
                RuleSelector::Enable(RuleMatch::Tag(t)) => selection.enable_tag(t),
                RuleSelector::Disable(RuleMatch::Rule(r)) => selection.disable_rule(r),
                RuleSelector::Disable(RuleMatch::Tag(t)) => selection.disable_tag(t),
            };
        }
        if !self.enable_tag.is_empty() {
            selection = selection.disable_rule("*");
            for tag in &self.enable_tag {
                selection = selection.enable_tag(tag);
            }
        }
        for tag in &self.disable_tag {
            selection = selection.disable_tag(tag);
        }
        for rule in &self.disable {
            selection = selection.disable_rule(rule);
        }
        for part in &self.disable_substring {
            selection = selection.disable_rule(&format!("*{part}*"));
        }
        selection
    }
}

#[derive(Args)]
struct ReplayArgs {
    /// The capture file.
    file: PathBuf,
    #[command(flatten)]
    selection: RulesSelection,
    /// Print alerts as Falco JSON objects, one per line (or set `json_output`).
    #[arg(long)]
    json: bool,
    /// Report every matching rule per event, or only the first (default: the configuration's
    /// `rule_matching`).
    #[arg(long, value_enum)]
    rule_matching: Option<Matching>,
    /// Print the run's counters to stderr at the end.
    #[arg(long)]
    stats: bool,
    /// Write Falco-style statistics to FILE: one JSON line per interval (`cur`, `delta`,
    /// `drop_pct`) and one at the end.
    #[arg(short = 's', long = "stats-file", value_name = "FILE")]
    stats_file: Option<PathBuf>,
    /// Interval of the stats file lines, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    stats_interval: u64,
    /// Keep reading the (JSON lines) capture as it grows until SIGTERM/SIGINT, like a live
    /// agent: web server, SIGHUP reload, SIGUSR1 reopen. For tests and demos.
    #[arg(long, hide = true)]
    follow: bool,
}

impl ReplayArgs {
    /// Falco's `-e FILE` with its `-s`/`--stats-interval`.
    fn falco(
        file: PathBuf,
        selection: RulesSelection,
        stats_file: Option<PathBuf>,
        stats_interval: u64,
    ) -> ReplayArgs {
        ReplayArgs {
            file,
            selection,
            json: false,
            rule_matching: None,
            stats: false,
            stats_file,
            stats_interval,
            follow: false,
        }
    }
}

#[derive(Clone, Copy, ValueEnum)]
enum Matching {
    First,
    All,
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

#[derive(Clone, Copy, ValueEnum)]
enum CaptureForm {
    Binary,
    Jsonl,
}

/// An error that maps to exit code 2 (bad input) rather than 1.
#[derive(Debug)]
struct InvalidInput(String);

impl std::fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidInput {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => falco_cli::run(cli.falco),
        Some(Command::Replay(args)) => replay(args),
        Some(Command::Run(args)) => run::run(args),
        Some(Command::Watch(args)) => watch::watch(args),
        Some(Command::Rules(RulesCommand::Validate { paths })) => validate(&paths),
        Some(Command::Rules(RulesCommand::List {
            selection,
            json,
            explain_run: false,
        })) => list(&selection, json),
        Some(Command::Rules(RulesCommand::List {
            selection,
            json,
            explain_run: true,
        })) => explain_run(&selection, json),
        Some(Command::Capture(CaptureCommand::Convert { input, output, to })) => {
            convert(&input, &output, to)
        }
        Some(Command::Config(ConfigCommand::Show { config })) => config_show(&config),
        Some(Command::Fields { json }) => fields(json, false),
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
            if err
                .chain()
                .any(|e| e.downcast_ref::<InvalidInput>().is_some())
                || err
                    .chain()
                    .any(|e| e.downcast_ref::<vigil_capture::SourceError>().is_some())
            {
                ExitCode::from(EXIT_INVALID)
            } else {
                ExitCode::from(EXIT_FAILURE)
            }
        }
    }
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

fn print_diagnostics(diagnostics: &[Diagnostic]) {
    for diagnostic in diagnostics {
        eprintln!("{diagnostic}");
    }
}

fn error_count(result: &LoadResult) -> usize {
    result
        .diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count()
}

/// Loads the selection's rules — `-r` paths, else the configuration's `rules_files`, else the
/// embedded default — failing with exit code 2 on errors.
fn load_selection(selection: &RulesSelection, config: &Config) -> Result<vigil_rules::Ruleset> {
    let paths = if selection.rules.is_empty() {
        &config.rules_files
    } else {
        &selection.rules
    };
    let files = if paths.is_empty() {
        vec![RulesText::embedded_default()]
    } else {
        vigil_engine::read_rules_paths(paths).map_err(|e| InvalidInput(format!("{e:#}")))?
    };
    let min_priority = match &selection.min_priority {
        Some(text) => Priority::parse(text)
            .ok_or_else(|| InvalidInput(format!("unknown priority `{text}`")))?,
        None => config.priority,
    };
    let result = vigil_engine::load_rules(&files, &LoadOptions::default());
    print_diagnostics(&result.diagnostics);
    let errors = error_count(&result);
    match result.ruleset {
        Some(mut ruleset) if errors == 0 => {
            ruleset.select(&selection.selection(config));
            ruleset.set_min_priority(min_priority);
            Ok(ruleset)
        }
        _ => Err(InvalidInput(format!("rules failed to load: {errors} error(s)")).into()),
    }
}

fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let configure = |args: &ReplayArgs| -> Result<(Config, vigil_rules::Ruleset)> {
        let mut config = args.selection.config.load()?;
        let mut ruleset = load_selection(&args.selection, &config)?;
        ruleset.set_rule_matching(match args.rule_matching {
            Some(Matching::First) => RuleMatching::First,
            Some(Matching::All) => RuleMatching::All,
            None => config.rule_matching,
        });
        config.json_output |= args.json;
        Ok((config, ruleset))
    };
    let (config, ruleset) = configure(&args)?;
    let flags = outputs::RunFlags {
        stats_file: args.stats_file.clone(),
        stats_interval: std::time::Duration::from_millis(args.stats_interval.max(1)),
        follow: args.follow,
        print_stats: args.stats,
        watch: args.selection.watch_sources(),
    };
    let engine_for = |ruleset| {
        let hostname = outputs::host_name();
        Engine::new(ruleset, system_state_config(&hostname), hostname)
    };
    outputs::run(
        &args.file,
        config,
        ruleset,
        &engine_for,
        &flags,
        &mut || configure(&args),
    )
}

/// State configuration for this host: its user database (an unreadable one is reported and
/// replaced by an empty one, so names print as `<NA>`) and hostname.
fn system_state_config(hostname: &str) -> StateConfig {
    let user_db: Box<dyn vigil_state::UserDb> = match vigil_state::FileUserDb::system() {
        Ok(db) => Box::new(db),
        Err(err) => {
            eprintln!("vigil: warning: {err}; user and group names will be unknown");
            Box::new(vigil_state::MemUserDb::default())
        }
    };
    StateConfig {
        hostname: hostname.as_bytes().to_vec(),
        user_db,
        ..StateConfig::default()
    }
}

/// State configuration for live capture on this host (`watch`, `run`): users and groups are
/// followed as they change — the host's `/etc/passwd` and `/etc/group`, and each container's
/// own files through `/proc/PID/root` — instead of read once.
fn live_state_config(hostname: &str) -> StateConfig {
    let live_users = vigil_state::LiveUsers::system();
    if let Some(err) = live_users.start_error() {
        let cause = std::error::Error::source(err).map_or(String::new(), |e| format!(": {e}"));
        eprintln!(
            "vigil: warning: {err}{cause}; user and group names stay unknown until it can be read"
        );
    }
    StateConfig {
        hostname: hostname.as_bytes().to_vec(),
        live_users: Some(live_users),
        ..StateConfig::default()
    }
}

fn validate(paths: &[PathBuf]) -> Result<ExitCode> {
    let files =
        vigil_engine::read_rules_paths(paths).map_err(|e| InvalidInput(format!("{e:#}")))?;
    let result = vigil_engine::load_rules(&files, &LoadOptions::default());
    print_diagnostics(&result.diagnostics);
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for stats in &result.stats {
        writeln!(
            out,
            "{}: {} rules, {} macros, {} lists",
            stats.name, stats.rules, stats.macros, stats.lists
        )?;
    }
    let count = |code: &str| result.diagnostics.iter().filter(|d| d.code == code).count();
    let errors = error_count(&result);
    let warnings = result.diagnostics.len() - errors;
    writeln!(
        out,
        "unsupported fields: {}, unsupported operators: {}",
        count("E_UNKNOWN_FIELD"),
        count("E_BAD_OPERATOR")
    )?;
    writeln!(out, "{errors} error(s), {warnings} warning(s)")?;
    out.flush()?;
    Ok(if errors == 0 && result.ruleset.is_some() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_INVALID)
    })
}

fn list(selection: &RulesSelection, json: bool) -> Result<ExitCode> {
    let config = selection.config.load()?;
    let ruleset = load_selection(selection, &config)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    for (index, rule) in ruleset.rules().iter().enumerate() {
        if json {
            let line = serde_json::json!({
                "rule": rule.name,
                "priority": rule.priority.as_str(),
                "enabled": ruleset.is_enabled(index),
                "source": rule.source,
                "tags": rule.tags,
            });
            writeln!(out, "{line}")?;
        } else {
            writeln!(
                out,
                "{:<60} {:<13} {:<8} {}",
                rule.name,
                rule.priority.as_str(),
                if ruleset.is_enabled(index) {
                    "enabled"
                } else {
                    "disabled"
                },
                rule.tags.join(",")
            )?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `rules list --explain-run`: per rule, the syscalls that stop a workload's tracer for it
/// under `vigil run` started here, or why it costs nothing.
fn explain_run(selection: &RulesSelection, json: bool) -> Result<ExitCode> {
    let config = selection.config.load()?;
    let mut ruleset = load_selection(selection, &config)?;
    let identity = vigil_procfs::identity_is_fixed();
    let hostname = outputs::host_name();
    // Where the identity is fixed the rules that cannot match here are disabled; where it
    // may change they stop only in the processes that enter new namespaces.
    let (folded, elsewhere_only) = if identity.is_ok() {
        (run::fold_as_here(&mut ruleset, &hostname), Vec::new())
    } else {
        let mut here = load_selection(selection, &config)?;
        (Vec::new(), run::fold_as_here(&mut here, &hostname))
    };
    let filter = vigil_engine::KernelFilter::derive(&ruleset, None, false)
        .map_err(|e| InvalidInput(e.to_string()))?;
    let name_of = |id: u16| {
        vigil_event::table::events()
            .get(usize::from(id))
            .map_or("?", |s| s.name)
    };
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    for (index, rule) in ruleset.rules().iter().enumerate() {
        let (status, syscalls): (&str, Vec<String>) = if folded.contains(&index) {
            ("cannot match this workload", Vec::new())
        } else if !ruleset.is_enabled(index) {
            ("disabled", Vec::new())
        } else {
            match rule.event_types() {
                None => ("every syscall", vec!["*".to_owned()]),
                Some(types) => {
                    let names = types
                        .iter()
                        .filter_map(|&id| {
                            let nr = vigil_event::table::events().get(usize::from(id))?.nr?;
                            let name = name_of(id);
                            Some(if filter.report.contains(&nr) {
                                match filter.report_when.iter().find(|(n, _)| *n == nr) {
                                    Some((_, cond)) => format!("{name}({cond})"),
                                    None => name.to_owned(),
                                }
                            } else {
                                format!("{name}(exec event only)")
                            })
                        })
                        .collect();
                    if elsewhere_only.contains(&index) {
                        ("watched in new namespaces", names)
                    } else {
                        ("watched", names)
                    }
                }
            }
        };
        if json {
            let line = serde_json::json!({
                "rule": rule.name,
                "status": status,
                "syscalls": syscalls,
            });
            writeln!(out, "{line}")?;
        } else {
            writeln!(
                out,
                "{:<60} {:<28} {}",
                rule.name,
                status,
                syscalls.join(" ")
            )?;
        }
    }
    if !json {
        if let Err(why) = identity {
            writeln!(
                out,
                "no rule is folded: a workload started here may change its container identity \
                 ({why})"
            )?;
            if !elsewhere_only.is_empty() {
                writeln!(
                    out,
                    "{} rule(s) cannot match here: their syscalls stop only in processes that \
                     enter new namespaces (\"watched in new namespaces\")",
                    elsewhere_only.len()
                )?;
            }
        }
        let names: Vec<&str> = filter
            .report
            .iter()
            .filter_map(|&nr| vigil_event::table::by_syscall_nr(nr).map(|t| name_of(t.0)))
            .collect();
        writeln!(
            out,
            "vigil run here stops for {} syscall(s): {}",
            names.len(),
            names.join(", ")
        )?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Streams a capture from one form to the other: the snapshot, then event by event.
fn convert(input: &std::path::Path, output: &std::path::Path, to: CaptureForm) -> Result<ExitCode> {
    use vigil_event::codec::{binary, jsonl, open_any};
    let file =
        std::fs::File::open(input).with_context(|| format!("cannot open `{}`", input.display()))?;
    let mut reader = open_any(io::BufReader::new(file))
        .map_err(|e| InvalidInput(format!("cannot read `{}`: {e}", input.display())))?;
    let out = vigil_output::files::create(output)
        .with_context(|| format!("cannot create `{}`", output.display()))?;
    let out = io::BufWriter::new(out);
    let invalid = |e: vigil_event::codec::CaptureError| {
        InvalidInput(format!("cannot convert `{}`: {e}", input.display()))
    };
    let mut n_events = 0u64;
    let out = match to {
        CaptureForm::Binary => {
            let mut writer = binary::Writer::new(out);
            writer.write_snapshot(reader.snapshot()).map_err(invalid)?;
            while let Some(event) = reader.next_event().map_err(invalid)? {
                writer.write_event(&event).map_err(invalid)?;
                n_events += 1;
            }
            writer.finish().map_err(invalid)?
        }
        CaptureForm::Jsonl => {
            let mut writer = jsonl::Writer::new(out);
            writer.write_snapshot(reader.snapshot()).map_err(invalid)?;
            while let Some(event) = reader.next_event().map_err(invalid)? {
                writer.write_event(&event).map_err(invalid)?;
                n_events += 1;
            }
            writer.finish().map_err(invalid)?
        }
    };
    out.into_inner()
        .map_err(|e| e.into_error())
        .with_context(|| format!("cannot write `{}`", output.display()))?
        .sync_all()
        .with_context(|| format!("cannot write `{}`", output.display()))?;
    eprintln!("converted {n_events} events to `{}`", output.display());
    Ok(ExitCode::SUCCESS)
}

fn config_show(args: &ConfigArgs) -> Result<ExitCode> {
    let config = args.load()?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    out.write_all(config.to_yaml().as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Every field (`names_only`: one name per line, Falco's `--list -N`).
fn fields(json: bool, names_only: bool) -> Result<ExitCode> {
    let catalog = vigil_state::catalog();
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    // Names with `(` are internal variants (the typed forms of `evt.rawarg`), not fields.
    let mut defs: Vec<_> = catalog
        .fields()
        .iter()
        .filter(|d| !d.name.contains('('))
        .cloned()
        .collect();
    defs.sort_by_key(|d| d.name);
    for def in defs {
        let arg = match def.arg {
            vigil_fields::ArgKind::None => "",
            vigil_fields::ArgKind::Index => "[N]",
            vigil_fields::ArgKind::OptionalIndex => "[N]?",
            vigil_fields::ArgKind::Key => "[KEY]",
            vigil_fields::ArgKind::OptionalKey => "[KEY]?",
        };
        if names_only {
            writeln!(out, "{}", def.name)?;
        } else if json {
            let line = serde_json::json!({
                "name": def.name,
                "type": def.ty.name(),
                "arg": arg,
                "list": def.is_list,
                "desc": def.desc,
            });
            writeln!(out, "{line}")?;
        } else {
            let name = format!("{}{arg}", def.name);
            writeln!(out, "{name:<36} {:<8} {}", def.ty.name(), def.desc)?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

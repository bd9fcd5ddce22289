//! The commands that inspect and exit: `rules validate`, `rules list` (and `--explain-run`),
//! `rules profile`, `fields`, `config show`, `capture convert`, and Falco's `-l RULE`,
//! `--support` and `--version`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::ValueEnum;
use vigil_engine::RulesText;
use vigil_fields::Catalog;
use vigil_rules::LoadOptions;

use crate::error::{InvalidInput, EXIT_INVALID};
use crate::live::{host_name, notice};
use crate::selection::{
    error_count, load_selection, load_selection_with, print_diagnostics, ConfigArgs, RulesSelection,
};
use vigil_agent::run::RunError;

#[derive(Clone, Copy, ValueEnum)]
/// The form `capture convert` writes.
pub enum CaptureForm {
    Binary,
    Jsonl,
}

pub fn validate(paths: &[PathBuf]) -> Result<ExitCode> {
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

pub fn list(selection: &RulesSelection, json: bool) -> Result<ExitCode> {
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
pub fn explain_run(selection: &RulesSelection, json: bool) -> Result<ExitCode> {
    let config = selection.config.load()?;
    let ruleset = load_selection(selection, &config)?;
    let again = || load_selection(selection, &config).map_err(Into::into);
    let explained =
        vigil_agent::run::explain(ruleset, &again, &host_name()).map_err(|e| match e {
            RunError::Configure(e) => anyhow::Error::from_boxed(e),
            RunError::Invalid(text) => InvalidInput(text).into(),
            e => e.into(),
        })?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    for (rule, status, syscalls) in &explained.rules {
        if json {
            let line = serde_json::json!({ "rule": rule, "status": status, "syscalls": syscalls });
            writeln!(out, "{line}")?;
        } else {
            writeln!(out, "{rule:<60} {status:<28} {}", syscalls.join(" "))?;
        }
    }
    if !json {
        if let Some(why) = &explained.not_folded {
            writeln!(
                out,
                "no rule is folded: a workload started here may change its container identity \
                 ({why})"
            )?;
            if explained.elsewhere_only > 0 {
                writeln!(
                    out,
                    "{} rule(s) cannot match here: their syscalls stop only in processes that \
                     enter new namespaces (\"watched in new namespaces\")",
                    explained.elsewhere_only
                )?;
            }
        }
        let names = &explained.stops;
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
pub fn convert(
    input: &std::path::Path,
    output: &std::path::Path,
    to: CaptureForm,
) -> Result<ExitCode> {
    use vigil_agent::{CaptureOut, CaptureOutError};
    let file =
        std::fs::File::open(input).with_context(|| format!("cannot open `{}`", input.display()))?;
    let mut reader = vigil_event::codec::open_any(io::BufReader::new(file))
        .map_err(|e| InvalidInput(format!("cannot read `{}`: {e}", input.display())))?;
    let out = vigil_output::files::create(output)
        .with_context(|| format!("cannot create `{}`", output.display()))?;
    let invalid = |e: vigil_event::codec::CaptureError| {
        InvalidInput(format!("cannot convert `{}`: {e}", input.display()))
    };
    let mut writer = CaptureOut::new(out, matches!(to, CaptureForm::Jsonl));
    writer.snapshot(reader.snapshot()).map_err(invalid)?;
    let mut n_events = 0u64;
    while let Some(event) = reader.next_event().map_err(invalid)? {
        writer.event(&event).map_err(invalid)?;
        n_events += 1;
    }
    match writer.finish() {
        Ok(()) => {}
        Err(CaptureOutError::Finish(e)) => Err(invalid(e))?,
        Err(CaptureOutError::Flush(e) | CaptureOutError::Create { source: e, .. }) => {
            Err(e).with_context(|| format!("cannot write `{}`", output.display()))?
        }
    }
    eprintln!("converted {n_events} events to `{}`", output.display());
    Ok(ExitCode::SUCCESS)
}

pub fn config_show(args: &ConfigArgs) -> Result<ExitCode> {
    let config = args.load()?;
    let stdout = io::stdout();
    let mut out = stdout.lock();
    out.write_all(config.to_yaml().as_bytes())?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Every field (`names_only`: one name per line, Falco's `--list -N`).
pub fn fields(json: bool, names_only: bool) -> Result<ExitCode> {
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
        let arg = def.arg.suffix();
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

/// Falco `-l RULE`: the rule's name and description (JSON with `json_output`).
pub fn describe(selection: &RulesSelection, name: &str) -> Result<ExitCode> {
    let config = selection.config.load()?;
    let ruleset = load_selection(selection, &config)?;
    let Some(rule) = ruleset.rules().iter().find(|r| r.name == name) else {
        return Err(InvalidInput(format!("no rule named `{name}`")).into());
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
pub fn support(selection: &RulesSelection) -> Result<ExitCode> {
    let config = selection.config.load()?;
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
    let report = vigil_agent::Versions::current().support_report(&config.to_yaml(), &files);
    let mut out = io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, &report)?;
    writeln!(out)?;
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Falco's `-L`: `rules list`, JSON lines with `json_output`.
pub fn list_rules(selection: &RulesSelection) -> Result<ExitCode> {
    let json = selection.config.load()?.json_output;
    list(selection, json)
}

/// Falco's `--dry-run`: the configuration and rules load.
pub fn dry_run(selection: &RulesSelection) -> Result<ExitCode> {
    let config = selection.config.load()?;
    load_selection(selection, &config)?;
    eprintln!("vigil: --dry-run: configuration and rules loaded");
    Ok(ExitCode::SUCCESS)
}

/// Falco's `--version`: its version block, or with `json_output` the object `/versions`
/// serves (`vigil_agent::Versions`).
pub fn version(config: &ConfigArgs) -> Result<ExitCode> {
    let json = config.load()?.json_output;
    let versions = vigil_agent::Versions::current();
    let mut out = io::stdout().lock();
    if json {
        writeln!(out, "{}", versions.to_json())?;
    } else {
        out.write_all(versions.text_block().as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// `vigil rules profile`'s flags.
#[derive(clap::Args)]
pub struct ProfileArgs {
    /// The capture (binary or JSON lines).
    capture: PathBuf,
    #[command(flatten)]
    selection: RulesSelection,
    /// How many rules to print, costliest first.
    #[arg(long, default_value_t = 10)]
    top: usize,
    /// How many comparisons to print under each rule, costliest first.
    #[arg(long, default_value_t = 3)]
    conditions: usize,
    /// Print one JSON object (every rule, every comparison) instead of the table.
    #[arg(long)]
    json: bool,
}

/// `vigil rules profile CAPTURE`: the capture replayed with every rule evaluation timed
/// (`vigil_engine::profile`).
pub fn profile(args: &ProfileArgs) -> Result<ExitCode> {
    let config = args.selection.config.load()?;
    let options = LoadOptions {
        condition_texts: true,
        ..LoadOptions::default()
    };
    let mut ruleset = load_selection_with(&args.selection, &config, &options)?;
    ruleset.set_rule_matching(config.rule_matching);
    let path = &args.capture;
    let open = || {
        vigil_capture::ReplaySource::open(path)
            .map(|s| Box::new(s) as Box<dyn vigil_capture::Source>)
    };
    let hostname = host_name();
    let state = || vigil_agent::system_state_config(&hostname, notice);
    let profile = vigil_engine::profile::profile(ruleset, &open, &state)
        .map_err(|e| InvalidInput(format!("{}: {e}", path.display())))?;
    let mut out = io::stdout().lock();
    if args.json {
        let rules: Vec<serde_json::Value> = profile
            .rules
            .iter()
            .map(|r| {
                serde_json::json!({
                    "rule": r.rule,
                    "evaluations": r.evaluations,
                    "nanos": r.nanos,
                    "conditions": r.conditions.iter().map(|c| serde_json::json!({
                        "condition": c.text,
                        "evaluations": c.evaluations,
                        "nanos": c.nanos,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        let report = serde_json::json!({
            "capture": path.display().to_string(),
            "events": profile.events,
            "clock_read_nanos": profile.clock_nanos,
            "rules": rules,
        });
        writeln!(out, "{report}")?;
    } else {
        out.write_all(profile.to_text(args.top, args.conditions).as_bytes())?;
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

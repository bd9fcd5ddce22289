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
use crate::live::host_name;
use crate::selection::{
    error_count, load_selection, load_selection_with, print_diagnostics, system_state_config,
    ConfigArgs, RulesSelection,
};
use vigil_agent::run::fold_as_here;
use vigil_agent::run::reload::RunningFilter;

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
    let mut ruleset = load_selection(selection, &config)?;
    let identity = vigil_procfs::identity_is_fixed();
    let hostname = host_name();
    // Where the identity is fixed the rules that cannot match here are disabled; where it
    // may change they stop only in the processes that enter new namespaces.
    let (folded, elsewhere_only) = if identity.is_ok() {
        (fold_as_here(&mut ruleset, &hostname), Vec::new())
    } else {
        let mut here = load_selection(selection, &config)?;
        (Vec::new(), fold_as_here(&mut here, &hostname))
    };
    let filter =
        RunningFilter::derive(None, false, &ruleset).map_err(|e| InvalidInput(e.to_string()))?;
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
pub fn convert(
    input: &std::path::Path,
    output: &std::path::Path,
    to: CaptureForm,
) -> Result<ExitCode> {
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
    let read = |name: &str| {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .map(|s| s.trim().to_owned())
            .unwrap_or_default()
    };
    let cmdline: Vec<String> = std::env::args().collect();
    let versions = vigil_agent::Versions::current();
    let report = serde_json::json!({
        "version": versions.falco_version,
        "engine_info": versions.to_json(),
        "system_info": {
            "sysname": read("ostype"),
            "nodename": host_name(),
            "release": read("osrelease"),
            "version": read("version"),
            "machine": std::env::consts::ARCH,
        },
        "cmdline": cmdline.join(" "),
        "config": config.to_yaml(),
        // Falco's shape: each file's text under `variants` (one variant per file).
        "rules_files": files
            .iter()
            .map(|f| serde_json::json!({ "name": f.name, "variants": [{ "content": f.text }] }))
            .collect::<Vec<_>>(),
    });
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
    let state = || system_state_config(&hostname);
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

//! `vigil run -- CMD ARGS…`: the kernel-less mode. Launches the workload under the ptrace
//! driver (`vigil-ptrace`), runs its events through state and rules, optionally blocks
//! enforced rules' syscalls before they run, learns or applies a seccomp profile, and exits
//! exactly as the workload did.
//!
//! Alerts go to stderr by default so that the workload's stdout stays its own (`vigil run`
//! wraps entrypoints whose stdout is data); `--alerts FILE` (or the configuration's enabled
//! `file_output`) sends them to a file instead.
//!
//! Privileges: the files (`--alerts`, `-w`, `--learn`) are opened first; the workload is
//! forked with the privileges Vigil was started with; then the tracer drops all but
//! [`vigil_ptrace::privs::TRACER`] and sets `no_new_privs` before the workload runs, and only
//! then starts the configured remote outputs' threads ([`Handler::attached`]).

use std::ffi::OsString;

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use vigil_event::{Event, Param, Snapshot};
use vigil_fields::Value;
use vigil_output::{Alert, JsonOptions, Outputs};
use vigil_ptrace::{Handler, Mechanism, Profile, RunSpec, Verdict};
use vigil_rules::eval::EvalCtx;
use vigil_rules::ruleset::wildcard_match;
use vigil_rules::{RuleMatching, Ruleset};
use vigil_state::State;

use crate::capture_out::CaptureOut;

use super::{load_selection, system_state_config, InvalidInput, Matching, RulesSelection};

/// The rule tag that marks a rule for enforcement when `--enforce` is given without
/// `--enforce-rule`/`--enforce-tag` (Falco ignores unknown tags, so such files still load).
pub const ENFORCE_TAG: &str = "vigil.enforce";

const EPERM: i32 = 1;
const ENOENT: i64 = 2;

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    selection: RulesSelection,
    /// Print alerts as Falco JSON objects, one per line (or set `json_output`).
    #[arg(long)]
    json: bool,
    /// Report every matching rule per event, or only the first.
    #[arg(long, value_enum)]
    rule_matching: Option<Matching>,
    /// Write alerts to FILE instead of stderr (default: the configuration's `file_output`
    /// when enabled, else stderr).
    #[arg(long = "alerts", value_name = "FILE")]
    alerts: Option<PathBuf>,
    /// Block the syscalls that match enforced rules, before they run.
    #[arg(long)]
    enforce: bool,
    /// Enforce rules whose name matches (repeatable, `*` wildcards). Without any
    /// --enforce-rule/--enforce-tag, rules tagged `vigil.enforce` are enforced.
    #[arg(long, value_name = "RULE", requires = "enforce")]
    enforce_rule: Vec<String>,
    /// Enforce rules carrying a matching tag (repeatable, `*` wildcards).
    #[arg(long, value_name = "TAG", requires = "enforce")]
    enforce_tag: Vec<String>,
    /// What blocking does: fail the syscall with EPERM, or kill the process.
    #[arg(long, value_enum, default_value = "deny", requires = "enforce")]
    enforce_action: EnforceAction,
    /// Record every syscall the workload makes and write an OCI/Docker seccomp profile
    /// allowing exactly those to FILE.
    #[arg(long, value_name = "FILE")]
    learn: Option<PathBuf>,
    /// Apply an OCI/Docker seccomp profile (names and actions; no argument conditions).
    #[arg(long, value_name = "FILE")]
    seccomp_profile: Option<PathBuf>,
    /// Write a capture of the events (`.jsonl`/`.json`: JSON lines; otherwise binary).
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    write: Option<PathBuf>,
    /// Interception mechanism: ptrace (default), or the seccomp user-notify prototype (no
    /// syscall results, no learning; see crates/ptrace/README.md).
    #[arg(long, value_enum, default_value = "ptrace")]
    mechanism: MechanismArg,
    /// Print the tracer's and the pipeline's counters to stderr at the end.
    #[arg(long)]
    stats: bool,
    /// The workload and its arguments (after `--`).
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MechanismArg {
    Ptrace,
    Notify,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum EnforceAction {
    Deny,
    Kill,
}

/// State + rules over the tracer's events, with the enforcement decision.
struct Pipeline {
    state: State,
    ruleset: Ruleset,
    ctx: EvalCtx,
    matches: Vec<usize>,
    /// Per rule index: blocks when it matches.
    enforced: Vec<bool>,
    action: EnforceAction,
    hostname: String,
    alerts_out: Box<dyn Write>,
    /// The configuration's network and process outputs (syslog, program, HTTP), with their
    /// queues and spools; stdout and file are `alerts_out` (stderr by default). Started once
    /// the tracer has dropped its privileges ([`Handler::attached`]), from `config`.
    remote: Option<Outputs>,
    config: vigil_config::Config,
    /// Why [`Handler::attached`] failed, with its exit-code class kept.
    attach_error: Option<anyhow::Error>,
    json: Option<JsonOptions>,
    capture: Option<CaptureOut>,
    error: Option<anyhow::Error>,
    alerts: u64,
    blocked: u64,
    events: u64,
}

impl Pipeline {
    fn fail(&mut self, err: anyhow::Error) {
        if self.error.is_none() {
            self.error = Some(err);
        }
    }

    fn record(&mut self, event: &Event) {
        if let Some(capture) = self.capture.as_mut() {
            if let Err(e) = capture.event(event) {
                let err = anyhow::anyhow!("cannot write the capture: {e}");
                self.capture = None;
                self.fail(err);
            }
        }
    }

    /// Evaluates the ruleset on `event` (already applied to state) and returns its alerts.
    fn alerts_for(&mut self, event: &Event, also: Option<usize>) -> Vec<Alert> {
        self.matches.clear();
        let view = self.state.view(event);
        let mut ctx = self.ctx.event();
        self.ruleset
            .evaluate_event(&view, &mut ctx, &mut self.matches);
        if let Some(i) = also {
            if !self.matches.contains(&i) {
                self.matches.push(i);
            }
        }
        let mut out = Vec::with_capacity(self.matches.len());
        for &index in &self.matches {
            let rule = &self.ruleset.rules()[index];
            let rendered = rule.output.render(&view, &mut ctx);
            out.push(Alert {
                time: event.ts,
                rule: rule.name.clone(),
                priority: rule.priority.as_str().into(),
                source: rule.source.clone().into(),
                tags: rule.tags.clone(),
                hostname: self.hostname.clone(),
                output: rendered.text,
                output_fields: rendered.fields,
            });
        }
        out
    }

    fn deliver(&mut self, alerts: Vec<Alert>) {
        for alert in alerts {
            self.alerts += 1;
            if let Some(remote) = self.remote.as_mut() {
                remote.emit(&alert);
            }
            let line = match &self.json {
                Some(options) => alert.json_line(options),
                None => alert.text_line(),
            };
            if let Err(e) =
                writeln!(self.alerts_out, "{line}").and_then(|()| self.alerts_out.flush())
            {
                self.fail(anyhow::Error::new(e).context("cannot write alerts"));
            }
        }
    }

    /// Undoes the descriptor a judged, not (yet) executed open-like call added to the state.
    fn forget_predicted_fd(&mut self, event: &Event) {
        if event.etype.spec().res_kind != vigil_event::ParamKind::Fd || event.res < 0 {
            return;
        }
        let Some(close) = vigil_event::table::by_name("close") else {
            return;
        };
        let undo = Event {
            num: event.num,
            ts: event.ts,
            tid: event.tid,
            pid: event.pid,
            etype: close,
            res: 0,
            params: vec![Param::Int(event.res)],
            truncated: 0,
        };
        self.state.apply(&undo);
        self.state.finish(&undo);
    }
}

impl Handler for Pipeline {
    fn attached(
        &mut self,
        privileges: Option<&vigil_ptrace::privs::Dropped>,
    ) -> Result<(), String> {
        if let Some(dropped) = privileges {
            log::info!(
                "tracer privileges dropped: kept capabilities {}; no_new_privs set",
                dropped.describe()
            );
        }
        match remote_outputs(&self.config, &self.hostname) {
            Ok(remote) => {
                self.remote = remote;
                Ok(())
            }
            Err(e) => {
                let text = format!("{e:#}");
                self.attach_error = Some(e);
                Err(text)
            }
        }
    }

    fn start(&mut self, snapshot: &Snapshot) {
        self.state.load_snapshot(snapshot);
        if let Some(capture) = self.capture.as_mut() {
            if let Err(e) = capture.snapshot(snapshot) {
                let err = anyhow::anyhow!("cannot write the capture: {e}");
                self.capture = None;
                self.fail(err);
            }
        }
    }

    fn judge(&mut self, event: &Event) -> Verdict {
        self.state.apply(event);
        let hit = {
            let view = self.state.view(event);
            let mut ctx = self.ctx.event();
            self.ruleset
                .candidates(event.etype.0)
                .iter()
                .map(|&i| i as usize)
                .find(|&i| {
                    self.enforced.get(i).copied().unwrap_or(false)
                        && self.ruleset.rules()[i].filter().eval(&view, &mut ctx)
                })
        };
        let Some(rule) = hit else {
            self.forget_predicted_fd(event);
            return Verdict::Allow;
        };
        // Blocked: this entry event is the only one this syscall produces.
        self.events += 1;
        self.blocked += 1;
        self.record(event);
        let (word, suffix) = match self.action {
            EnforceAction::Deny => ("blocked", " (blocked)"),
            EnforceAction::Kill => ("killed", " (killed)"),
        };
        let mut alerts = self.alerts_for(event, Some(rule));
        for alert in &mut alerts {
            alert.output.push_str(suffix);
            alert.output_fields.push((
                "vigil.action".into(),
                Some(Value::Str(word.as_bytes().to_vec().into())),
            ));
        }
        self.deliver(alerts);
        self.state.finish(event);
        self.forget_predicted_fd(event);
        match self.action {
            EnforceAction::Deny => Verdict::Deny(EPERM),
            EnforceAction::Kill => Verdict::Kill,
        }
    }

    /// Skips the exit of a call no rule could match whatever it returns — unless a capture
    /// is written (it records every event of the interest set). `dup2`/`dup3` succeed with
    /// `newfd`, a result known now: judged exactly as that success (which the state keeps,
    /// as the call will most likely have it; the fd ledger corrects it on the next use if
    /// not) unless some rule could match a failure. Others are judged as a failed call,
    /// whose view names the path from the arguments without adding a descriptor, by the
    /// rules' entry filters.
    fn wants_result(&mut self, entry: &Event) -> bool {
        if self.capture.is_some() {
            return true;
        }
        if matches!(entry.etype.spec().name, "dup2" | "dup3") {
            let newfd = match entry.param_by_name("newfd") {
                Param::Int(v) => *v,
                Param::Uint(v) => i64::try_from(*v).unwrap_or(-1),
                _ => -1,
            };
            if newfd < 0 || self.ruleset.may_match_failure(entry.etype.0) {
                return true;
            }
            let mut success = entry.clone();
            success.res = newfd;
            self.state.apply(&success);
            self.matches.clear();
            {
                let view = self.state.view(&success);
                self.ruleset
                    .evaluate(&view, &mut self.ctx, &mut self.matches);
            }
            self.state.finish(&success);
            return !self.matches.is_empty();
        }
        let mut probe = entry.clone();
        probe.res = -ENOENT;
        self.state.apply(&probe);
        let may = {
            let view = self.state.view(&probe);
            self.ruleset.may_match_before_result(&view, &mut self.ctx)
        };
        self.state.finish(&probe);
        may
    }

    fn learn_fd(&mut self, pid: i64, info: &vigil_event::FdInfo) {
        self.state.learn_fd(pid, info);
    }

    fn event(&mut self, event: &Event) {
        self.events += 1;
        self.record(event);
        self.state.apply(event);
        let alerts = self.alerts_for(event, None);
        self.deliver(alerts);
        self.state.finish(event);
    }
}

/// The syscall numbers of the event types `ruleset`'s enabled rules watch.
fn report_syscalls(ruleset: &Ruleset) -> (Vec<u16>, bool) {
    let types = ruleset.event_types();
    let all = types.is_all();
    let mut nrs: Vec<u16> = types
        .ids()
        .filter_map(|id| {
            vigil_event::table::events()
                .get(usize::from(id))
                .and_then(|s| s.nr)
        })
        .collect();
    nrs.sort_unstable();
    nrs.dedup();
    (nrs, all)
}

/// Whether `field` of an exec event is known only at the syscall's entry: the file name as
/// passed (the exec event alone gives the resolved executable), `execveat`'s directory
/// descriptor, path and flags, and the renderings of every argument.
fn exec_entry_field(field: &vigil_fields::FieldRef) -> bool {
    use vigil_fields::{Catalog, FieldArg};
    let name = vigil_state::catalog().def(field.id).name;
    match name {
        "evt.arg" => match &field.arg {
            FieldArg::Key(k) => matches!(k.as_str(), "filename" | "pathname" | "dirfd" | "flags"),
            _ => true,
        },
        "evt.args" | "evt.info" => true,
        _ => name.starts_with("evt.abspath") || name.starts_with("fs.path"),
    }
}

/// `report` without `execve` when no enabled rule needs its entry (a rule that may match a
/// failed exec, or reads [`exec_entry_field`]s): a successful exec is reported by the
/// tracer's exec event whatever the filter says, so each exec then costs one stop instead
/// of two. `execveat` keeps its entry stop when watched: at the exec event the registers no
/// longer tell it from `execve` (the kernel reports a successful `execveat` as syscall 59
/// there), and an exec event without entry arguments is an `execve`.
fn without_exec_entry(ruleset: &Ruleset, report: Vec<u16>) -> Vec<u16> {
    let Some(execve) = vigil_event::table::by_name("execve") else {
        return report;
    };
    if ruleset.needs_entry(execve.0, &exec_entry_field) {
        return report;
    }
    report
        .into_iter()
        .filter(|&nr| Some(nr) != execve.spec().nr)
        .collect()
}

/// Seccomp conditions for syscalls whose successful result is one of their arguments
/// (`dup2`/`dup3` return `newfd`, the second argument): when every enabled rule watching
/// one requires `evt.rawres` to be one of some non-negative numbers, only calls with that
/// argument stop (`dup2(sock, 0..=2)` for a redirection rule; `close(dup2(0, 9))` loops run
/// free). A negative value (an errno) would make failures of any call match: no condition.
fn result_arg_conditions(ruleset: &Ruleset) -> Vec<(u16, vigil_ptrace::ArgIn)> {
    use vigil_fields::Catalog;
    let Ok(rawres) = vigil_state::catalog().lookup("evt.rawres", None) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (name, arg) in [("dup2", 1u8), ("dup3", 1)] {
        let Some(etype) = vigil_event::table::by_name(name) else {
            continue;
        };
        let (Some(nr), Some(values)) = (etype.spec().nr, ruleset.required_values(etype.0, &rawres))
        else {
            continue;
        };
        let values: Option<Vec<u32>> = values.iter().map(|&v| u32::try_from(v).ok()).collect();
        if let Some(values) = values.filter(|v| !v.is_empty()) {
            out.push((nr, vigil_ptrace::ArgIn { arg, values }));
        }
    }
    out
}

/// Which enabled rules block, and the syscalls they judge at entry.
fn enforced_rules(ruleset: &Ruleset, args: &RunArgs) -> Result<(Vec<bool>, Vec<u16>)> {
    let mut enforced = vec![false; ruleset.rules().len()];
    if !args.enforce {
        return Ok((enforced, Vec::new()));
    }
    let default_tag = [ENFORCE_TAG.to_string()];
    let tags: &[String] = if args.enforce_rule.is_empty() && args.enforce_tag.is_empty() {
        &default_tag
    } else {
        &args.enforce_tag
    };
    let mut judged = Vec::new();
    for (i, rule) in ruleset.rules().iter().enumerate() {
        if !ruleset.is_enabled(i) {
            continue;
        }
        let by_name = args
            .enforce_rule
            .iter()
            .any(|p| wildcard_match(p, &rule.name));
        let by_tag = tags
            .iter()
            .any(|p| rule.tags.iter().any(|t| wildcard_match(p, t)));
        if !(by_name || by_tag) {
            continue;
        }
        let Some(types) = rule.event_types() else {
            return Err(InvalidInput(format!(
                "rule `{}` cannot be enforced: its condition does not restrict evt.type",
                rule.name
            ))
            .into());
        };
        enforced[i] = true;
        judged.extend(types.iter().filter_map(|&id| {
            vigil_event::table::events()
                .get(usize::from(id))
                .and_then(|s| s.nr)
        }));
    }
    if !enforced.iter().any(|&e| e) {
        eprintln!("vigil: warning: --enforce: no enabled rule is selected for enforcement");
    }
    judged.sort_unstable();
    judged.dedup();
    Ok((enforced, judged))
}

/// The configuration's syslog, program and HTTP outputs, when any is enabled. Alerts of a
/// wrapped workload go to stderr (or `--alerts`/`file_output`) so the workload's stdout stays
/// its own; these outputs carry them further (Falcosidekick, a log pipeline).
fn remote_outputs(config: &vigil_config::Config, hostname: &str) -> Result<Option<Outputs>> {
    let mut config = config.clone();
    config.stdout_output.enabled = false;
    config.file_output.enabled = false;
    // A wrapped container entrypoint usually has no syslog socket: skipped without the
    // warning `vigil watch` gives.
    if config.syslog_output.enabled && !config.syslog_output.socket.exists() {
        config.syslog_output.enabled = false;
    }
    if !(config.syslog_output.enabled
        || config.program_output.enabled
        || config.http_output.enabled)
    {
        return Ok(None);
    }
    let metrics = vigil_output::Metrics::new();
    let outputs = crate::outputs::start_outputs(&config, &metrics, hostname)?;
    Ok((!outputs.names().is_empty()).then_some(outputs))
}

pub fn run(args: RunArgs) -> Result<std::process::ExitCode> {
    crate::outputs::init_logging();
    let config = args.selection.config.load()?;
    let mut ruleset = load_selection(&args.selection, &config)?;
    ruleset.set_rule_matching(match args.rule_matching {
        Some(Matching::First) => RuleMatching::First,
        Some(Matching::All) => RuleMatching::All,
        None => config.rule_matching,
    });
    let (enforced, judged) = enforced_rules(&ruleset, &args)?;
    let (report, all) = report_syscalls(&ruleset);
    let (report, report_when) = if args.write.is_some() {
        // A capture records every event of the interest set, failures included.
        (report, Vec::new())
    } else {
        (
            without_exec_entry(&ruleset, report),
            result_arg_conditions(&ruleset),
        )
    };
    if all {
        eprintln!(
            "vigil: warning: a rule does not restrict evt.type: every syscall of the workload \
             will stop the tracer"
        );
    }
    let profile = match &args.seccomp_profile {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read `{}`", path.display()))?;
            Some(
                Profile::parse(&text)
                    .map_err(|e| InvalidInput(format!("`{}`: {e}", path.display())))?,
            )
        }
        None => None,
    };
    let alerts_path = args.alerts.clone().or_else(|| {
        (config.file_output.enabled && !config.file_output.filename.as_os_str().is_empty())
            .then(|| config.file_output.filename.clone())
    });
    // Files are opened before the tracer gives up its privileges (a directory only root's
    // CAP_DAC_OVERRIDE may write to stays writable), owner-only.
    let alerts_out: Box<dyn Write> = match &alerts_path {
        Some(path) => Box::new(BufWriter::new(
            vigil_output::files::append(path)
                .with_context(|| format!("cannot open `{}`", path.display()))?,
        )),
        None => Box::new(io::stderr()),
    };
    let capture = match &args.write {
        Some(path) => Some(CaptureOut::create(path)?),
        None => None,
    };
    let json = (args.json || config.json_output).then_some(JsonOptions {
        include_output: config.json_include_output_property,
        include_tags: config.json_include_tags_property,
        include_output_fields: config.json_include_output_fields_property,
    });
    let hostname = crate::outputs::host_name();
    let ctx = ruleset.new_ctx();
    let mut pipeline = Pipeline {
        state: State::new(system_state_config(&hostname)),
        ruleset,
        ctx,
        matches: Vec::new(),
        enforced,
        action: args.enforce_action,
        hostname,
        alerts_out,
        remote: None,
        config,
        attach_error: None,
        json,
        capture,
        error: None,
        alerts: 0,
        blocked: 0,
        events: 0,
    };
    let mut command = args.command.into_iter();
    let spec = RunSpec {
        program: command.next().unwrap_or_default(),
        args: command.collect(),
        report_when,
        report,
        judged,
        learn: args.learn.is_some(),
        profile,
        mechanism: match args.mechanism {
            MechanismArg::Ptrace => Mechanism::Ptrace,
            MechanismArg::Notify => Mechanism::Notify,
        },
        drop_privileges: true,
    };
    let traced = vigil_ptrace::traced_syscalls(&spec).len();
    // Opened now (the tracer will not be allowed to create it later), written when the
    // workload has ended: an existing profile is replaced only then, and one created here
    // is removed again if the workload never ran.
    let mut learn_out = match &args.learn {
        Some(path) => {
            let existed = path.exists();
            let file = vigil_output::files::append(path)
                .with_context(|| format!("cannot create `{}`", path.display()))?;
            Some((file, existed))
        }
        None => None,
    };
    let outcome = match vigil_ptrace::run(&spec, &mut pipeline) {
        Ok(outcome) => outcome,
        Err(e) => {
            if let (Some(path), Some((_, false))) = (&args.learn, &learn_out) {
                let _ = std::fs::remove_file(path);
            }
            return Err(match (e, pipeline.attach_error.take()) {
                // The remote outputs' own error (invalid configuration is invalid input).
                (vigil_ptrace::RunError::Handler(_), Some(err)) => err,
                (e, _) => e.into(),
            });
        }
    };
    if let Some(capture) = pipeline.capture.take() {
        if let Err(e) = capture.finish() {
            pipeline.fail(e);
        }
    }
    if let (Some(path), Some((file, _))) = (&args.learn, learn_out.as_mut()) {
        let text = vigil_ptrace::learned_profile(&outcome.used_syscalls);
        // Appending to an emptied file writes from its start.
        if let Err(e) = file
            .set_len(0)
            .and_then(|()| file.write_all(text.as_bytes()))
            .and_then(|()| file.sync_all())
        {
            pipeline
                .fail(anyhow::Error::new(e).context(format!("cannot write `{}`", path.display())));
        }
    }
    if args.stats {
        let s = &outcome.stats;
        eprintln!(
            "vigil: traced_syscalls={} stops={} seccomp_stops={} exit_stops={} tasks={} \
             skipped_exits={} events={} alerts={} judged={} blocked={} killed={} \
             read_faults={}",
            traced,
            s.stops,
            s.seccomp_stops,
            s.exit_stops,
            s.tasks,
            s.skipped_exits,
            pipeline.events,
            pipeline.alerts,
            s.judged,
            pipeline.blocked,
            s.killed,
            s.read_faults
        );
    }
    let _ = pipeline.alerts_out.flush();
    if let Some(remote) = pipeline.remote.take() {
        // Pending alerts get the delivery deadline; what is left stays in a configured spool.
        let report = remote.shutdown(Instant::now() + crate::outputs::SHUTDOWN_DEADLINE);
        if report.dropped_total() > 0 {
            for line in report.summary() {
                eprintln!("vigil: output {line}");
            }
        }
    }
    if let Some(err) = pipeline.error.take() {
        // The workload ran to its end; Vigil's own failure is reported, its status kept.
        eprintln!("vigil: {err:#}");
    }
    vigil_ptrace::exit_like(outcome.status)
}

//! `vigil run -- CMD ARGS…`: the kernel-less mode. Launches the workload under the ptrace
//! driver (`vigil-ptrace`), runs its events through state and rules, optionally blocks
//! enforced rules' syscalls before they run, learns or applies a seccomp profile, and exits
//! exactly as the workload did.
//!
//! Alerts go to stderr by default so that the workload's stdout stays its own (`vigil run`
//! wraps entrypoints whose stdout is data); `--alerts FILE` (or the configuration's enabled
//! `file_output`) sends them to a file instead.
//!
//! Privileges: the capture and `--learn` files are opened first; the workload is forked with
//! the privileges Vigil was started with; then the tracer drops all but
//! [`vigil_privs::TRACER`] and sets `no_new_privs` before the workload runs, and only
//! then starts the agent's threads (outputs, web server) in [`Handler::attached`]: a
//! configuration they refuse still stops the run before the workload's first instruction.
//!
//! SIGHUP is the workload's: rules and configuration reload when their files change
//! (`watch_config_files`), within what the seccomp filter installed at the start lets the
//! tracer see ([`crate::run_reload`]).

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use vigil_capture::SourceStats;
use vigil_config::Config;
use vigil_engine::{EnforceSelection, Engine, KernelFilter};
use vigil_event::{Event, Snapshot};
use vigil_fields::Value;
use vigil_output::sinks::Console;
use vigil_ptrace::{Handler, Mechanism, Profile, RunSpec, Verdict};
use vigil_rules::Ruleset;

use vigil_agent::{Agent, AgentFlags};

use crate::capture_out::CaptureOut;
use crate::error::InvalidInput;
use crate::flags::{LiveArgs, WriteArgs};
use crate::live::{host_name, init_logging, notice};
use crate::run_reload::{self, RunningFilter};
use crate::selection::{self, live_state_config, RulesSelection};

const EPERM: i32 = 1;

/// Without a stop for this long, the tracer runs the agent's housekeeping anyway.
const IDLE_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    rules: RunSelection,
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
    /// allowing exactly those (plus what --learn-for's runtime needs) to FILE.
    #[arg(long, value_name = "FILE")]
    learn: Option<PathBuf>,
    /// The runtime that will apply the learned profile: `runc` (Docker, containerd,
    /// Kubernetes) adds the few syscalls runc itself makes after installing it; `none` keeps
    /// exactly the workload's (for --seccomp-profile).
    #[arg(
        long,
        value_enum,
        value_name = "RUNTIME",
        default_value = "runc",
        requires = "learn"
    )]
    learn_for: LearnFor,
    /// Apply an OCI/Docker seccomp profile (names and actions; no argument conditions).
    #[arg(long, value_name = "FILE")]
    seccomp_profile: Option<PathBuf>,
    #[command(flatten)]
    write: WriteArgs,
    /// Interception mechanism: `auto` is ptrace, or seccomp user notification where ptrace
    /// is refused (with a warning); `ptrace` alone; `notify`, the user-notify mechanism (no
    /// syscall results, no learning; see crates/ptrace/README.md).
    #[arg(long, value_enum, default_value = "auto")]
    mechanism: MechanismArg,
    /// How to read the workload's memory: `auto` probes process_vm_readv, /proc/PID/mem and
    /// ptrace (PTRACE_PEEKDATA, no capability needed) and uses the cheapest that works, the
    /// others as fallbacks (`VIGIL_LOG=info` names them); the others force one.
    #[arg(long, value_enum, value_name = "HOW", default_value = "auto")]
    memory_access: MemoryAccessArg,
    /// The workload and its arguments (after `--`).
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Rules, configuration and the flags that shape alerts: what a reload reads again.
#[derive(Args)]
struct RunSelection {
    #[command(flatten)]
    selection: RulesSelection,
    #[command(flatten)]
    live: LiveArgs,
    /// Write alerts to FILE instead of stderr (default: the configuration's `file_output`
    /// when enabled, else stderr; the configuration's syslog, program and HTTP outputs
    /// receive them too).
    #[arg(long = "alerts", value_name = "FILE")]
    alerts: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LearnFor {
    Runc,
    None,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MechanismArg {
    Auto,
    Ptrace,
    Notify,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MemoryAccessArg {
    Auto,
    #[value(name = "process_vm_readv")]
    VmReadv,
    Ptrace,
    ProcMem,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum EnforceAction {
    Deny,
    Kill,
}

/// The tracer's events through the same engine and outputs as `vigil watch`, with the
/// enforcement decision at judged entries.
struct Pipeline {
    engine: Engine,
    /// Started in [`Handler::attached`], once the tracer's privileges are dropped.
    agent: Option<Agent>,
    /// What [`Handler::attached`] starts the agent with.
    pending: Option<PendingAgent>,
    /// Why [`Handler::attached`] failed, with its exit-code class kept.
    attach_error: Option<anyhow::Error>,
    /// Per rule index: blocks when it matches.
    enforced: Vec<bool>,
    action: EnforceAction,
    capture: Option<CaptureOut>,
    error: Option<anyhow::Error>,
    blocked: u64,
    /// Re-reads rules and configuration when a watched file changes (SIGHUP is the
    /// workload's under `vigil run`).
    configure: Box<dyn FnMut() -> Result<(Config, Ruleset)>>,
    /// The seccomp filter in force, to check reloaded rules against.
    running: Option<RunningFilter>,
    /// Enabled rules of the last reload that the running filter leaves (partly) blind.
    blind_rules: usize,
    /// How the workload's memory is read (known once attached).
    memory: Option<vigil_ptrace::MemoryAccess>,
}

/// The agent's start-up parameters, kept until the tracer is ready for threads.
struct PendingAgent {
    config: Config,
    hostname: String,
    stats_file: Option<(PathBuf, Duration)>,
    watch: vigil_agent::WatchSources,
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

    /// The stats file, metrics snapshots, drop and read-fault alerts when due (cheap when
    /// not).
    fn housekeeping(&mut self) {
        let Some(agent) = self.agent.as_mut() else {
            return;
        };
        if let Some(memory) = self.memory {
            agent.read_faults(vigil_ptrace::read_faults(), memory.name(), false);
        }
        let configure = &mut self.configure;
        match agent.housekeeping(&mut self.engine, &SourceStats::default, &mut || {
            configure().map_err(Into::into)
        }) {
            Ok(Some(_)) => self.reloaded(),
            Ok(None) => {}
            Err(e) => self.fail(e.into()),
        }
    }

    /// New rules are in the engine: the per-rule enforcement table follows their indices,
    /// and the rules the running seccomp filter leaves blind are named.
    fn reloaded(&mut self) {
        let Some(running) = &self.running else {
            return;
        };
        match running.reloaded(self.engine.ruleset()) {
            Ok(reloaded) => {
                self.enforced = reloaded.enforced;
                self.blind_rules = reloaded.blind.len();
                if !reloaded.blind.is_empty() {
                    eprintln!("vigil: warning: {}", run_reload::describe(&reloaded.blind));
                }
            }
            // Checked before the rules were accepted ([`run`]'s `configure`); should it
            // fail anyway, nothing enforces rather than the wrong rules.
            Err(e) => {
                eprintln!("vigil: warning: reload: {e}; enforcement is off");
                self.enforced = vec![false; self.engine.ruleset().rules().len()];
            }
        }
    }
}

impl Handler for Pipeline {
    fn fallback(&mut self, why: &str) {
        log::warn!(
            "{why}: running the workload under seccomp user notification instead (no syscall \
             results, no failed calls, processes seen at their first watched syscall; see \
             crates/ptrace/README.md)"
        );
    }

    fn memory_access(&mut self, probe: &vigil_ptrace::MemoryProbe) {
        log::info!("reading the workload's memory with {}", probe.describe());
        self.memory = Some(probe.chosen);
    }

    fn attached(&mut self, privileges: Option<&vigil_privs::Dropped>) -> Result<(), String> {
        if let Some(dropped) = privileges {
            log::info!(
                "tracer privileges dropped: kept capabilities {}; no_new_privs set",
                dropped.describe()
            );
        }
        let Some(mut pending) = self.pending.take() else {
            return Ok(());
        };
        let watch = std::mem::take(&mut pending.watch);
        let flags = AgentFlags {
            stats_file: pending
                .stats_file
                .as_ref()
                .map(|(path, every)| (path.as_path(), *every)),
            live: true,
            signals: false,
            console: Console::Stderr,
            engine: "ptrace",
            // Already dropped by the tracer, for every thread started from here on.
            privileges: None,
            notice,
        };
        match Agent::start(pending.config, &pending.hostname, &flags, &mut self.engine) {
            Ok(mut agent) => {
                agent.watch_files(watch);
                self.agent = Some(agent);
                Ok(())
            }
            Err(e) => {
                let e = anyhow::Error::from(e);
                let text = format!("{e:#}");
                self.attach_error = Some(e);
                Err(text)
            }
        }
    }
    fn start(&mut self, snapshot: &Snapshot) {
        self.engine.load_snapshot(snapshot);
        if let Some(capture) = self.capture.as_mut() {
            if let Err(e) = capture.snapshot(snapshot) {
                let err = anyhow::anyhow!("cannot write the capture: {e}");
                self.capture = None;
                self.fail(err);
            }
        }
    }

    fn judge(&mut self, event: &Event) -> Verdict {
        let (word, suffix) = match self.action {
            EnforceAction::Deny => ("blocked", " (blocked)"),
            EnforceAction::Kill => ("killed", " (killed)"),
        };
        let agent = &mut self.agent;
        let blocked = self.engine.judge(event, &self.enforced, &mut |mut alert| {
            alert.output.push_str(suffix);
            alert.output_fields.push((
                "vigil.action".into(),
                Some(Value::Str(word.as_bytes().to_vec().into())),
            ));
            if let Some(agent) = agent.as_mut() {
                agent.emit(&alert);
            }
        });
        if blocked.is_none() {
            return Verdict::Allow;
        }
        // Blocked: this entry event is the only one this syscall produces.
        self.blocked += 1;
        self.record(event);
        self.housekeeping();
        match self.action {
            EnforceAction::Deny => Verdict::Deny(EPERM),
            EnforceAction::Kill => Verdict::Kill,
        }
    }

    /// Skips the exit of a call no rule could match whatever it returns — unless a capture
    /// is written (it records every event of the interest set).
    fn wants_result(&mut self, entry: &Event) -> bool {
        self.capture.is_some() || self.engine.may_need_result(entry)
    }

    fn learn_fd(&mut self, pid: i64, info: &vigil_event::FdInfo) {
        self.engine.learn_fd(pid, info);
    }

    fn idle(&mut self) {
        self.housekeeping();
    }

    fn widening_failed(&mut self, pid: i64, why: &str) {
        log::warn!(
            "process {pid} entered new namespaces, but the rules that cannot match where Vigil \
             runs could not be armed in it ({why}): their syscalls are not seen there"
        );
    }

    fn event(&mut self, event: &Event) {
        self.record(event);
        match self.agent.as_mut() {
            Some(agent) => agent.process(&mut self.engine, std::slice::from_ref(event)),
            None => self.engine.process(event, &mut |_| {}),
        }
        self.housekeeping();
    }
}

/// The configuration and rules of a run; `--alerts FILE` (or an enabled `file_output`)
/// takes the place of the console output, as before outputs were unified.
fn configure(args: &RunSelection) -> Result<(Config, Ruleset)> {
    let (mut config, ruleset) =
        selection::configure(&args.selection, args.live.rule_matching, args.live.json)?;
    // A wrapped workload usually has no syslog daemon (containers): a missing socket is
    // the normal case here, not worth a warning on the workload's stderr.
    if config.syslog_output.enabled && !config.syslog_output.socket.exists() {
        config.syslog_output.enabled = false;
    }
    // The embedded default serves /healthz and /metrics for `vigil watch`; a wrapper starts
    // the web server only when asked (a configuration file, or `-o webserver.…`), so that
    // several wrapped workloads on one host do not contend for its port.
    let configured = args.selection.config.config.is_some()
        || args
            .selection
            .config
            .options
            .iter()
            .any(|o| o.starts_with("webserver."));
    if !configured {
        config.webserver.enabled = false;
    }
    if let Some(path) = &args.alerts {
        config.file_output.enabled = true;
        config.file_output.filename = path.clone();
    }
    if config.file_output.enabled && !config.file_output.filename.as_os_str().is_empty() {
        config.stdout_output.enabled = false;
    }
    Ok((config, ruleset))
}

/// Disables the rules of `ruleset` that cannot match a process with this process's
/// container, Kubernetes fields and host name
/// ([`vigil_engine::fold_workload_constants`]); returns their indices. Where
/// [`vigil_procfs::identity_is_fixed`], those fields stay this process's for a whole run started here.
pub fn fold_as_here(ruleset: &mut Ruleset, hostname: &str) -> Vec<usize> {
    let mut state = vigil_state::State::new(vigil_state::StateConfig {
        hostname: hostname.as_bytes().to_vec(),
        ..vigil_state::StateConfig::default()
    });
    state.load_snapshot(&vigil_ptrace::own_snapshot());
    let me = i64::from(std::process::id());
    let probe = Event {
        num: 0,
        ts: 0,
        tid: me,
        pid: me,
        etype: vigil_event::EventType(0),
        res: 0,
        params: Vec::new(),
        truncated: 0,
        cpu: None,
    };
    let view = state.view(&probe);
    vigil_engine::fold_workload_constants(ruleset, &view)
}

/// Where the workload may change its identity ([`vigil_procfs::identity_is_fixed`] does not
/// hold): the
/// narrower interest of the processes that stay where Vigil is — the filter of a copy of the
/// rules folded as here — and the names of the rules it leaves out, or `None` when it would
/// trace the same. Processes that enter new namespaces get the full filter (see
/// [`vigil_ptrace::RunSpec::in_place`]); the engine still evaluates every rule.
fn in_place_interest(
    rules: &RunSelection,
    hostname: &str,
    full: &KernelFilter,
    everything: bool,
) -> Result<Option<(vigil_ptrace::Interest, Vec<String>)>> {
    let (_, mut here) = configure(rules)?;
    let folded = fold_as_here(&mut here, hostname);
    if folded.is_empty() {
        return Ok(None);
    }
    let narrow =
        RunningFilter::derive(None, everything, &here).map_err(|e| InvalidInput(e.to_string()))?;
    if narrow.report == full.report && narrow.report_when == full.report_when {
        return Ok(None);
    }
    let names = folded
        .iter()
        .map(|&i| here.rules()[i].name.clone())
        .collect();
    Ok(Some((
        vigil_ptrace::Interest {
            report: narrow.report,
            report_when: narrow.report_when,
        },
        names,
    )))
}

pub fn run(args: RunArgs) -> Result<std::process::ExitCode> {
    // Before the agent starts: the start-up lines come from the tracer first.
    init_logging();
    let (config, mut ruleset) = configure(&args.rules)?;
    let hostname = host_name();
    let folds = vigil_procfs::identity_is_fixed().is_ok();
    let folded = if folds {
        fold_as_here(&mut ruleset, &hostname)
    } else {
        Vec::new()
    };
    if !folded.is_empty() {
        log::info!(
            "{} rule(s) cannot match this workload (its container and host are fixed) and cost \
             nothing: {}",
            folded.len(),
            folded
                .iter()
                .map(|&i| ruleset.rules()[i].name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let enforce = args.enforce.then(|| EnforceSelection {
        rules: args.enforce_rule.clone(),
        tags: args.enforce_tag.clone(),
    });
    let filter = RunningFilter::derive(enforce.as_ref(), args.write.is_some(), &ruleset)
        .map_err(|e| InvalidInput(e.to_string()))?;
    let in_place = if folds || args.learn.is_some() {
        None
    } else {
        in_place_interest(&args.rules, &hostname, &filter, args.write.is_some())?
    };
    if let Some((_, names)) = &in_place {
        log::info!(
            "{} rule(s) cannot match where Vigil runs; their syscalls stop only in processes              that enter new namespaces (containers): {}",
            names.len(),
            names.join(", ")
        );
    }
    if args.enforce && !filter.enforces() {
        eprintln!("vigil: warning: --enforce: no enabled rule is selected for enforcement");
    }
    if filter.watches_all {
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
    let capture = match args.write.as_ref() {
        Some(path) => Some(CaptureOut::create(path)?),
        None => None,
    };
    let engine = Engine::new(ruleset, live_state_config(&hostname), hostname.clone());
    let pending = PendingAgent {
        config,
        hostname,
        stats_file: args
            .rules
            .live
            .stats_file
            .for_agent()
            .map(|(path, every)| (path.to_path_buf(), every)),
        watch: args.rules.selection.watch_sources(),
    };
    let stats_interval = args.rules.live.stats_file.stats_interval;
    let print_stats = args.rules.live.stats;
    let selection = args.rules;
    // A reload gets what the start did to the rules (folded for a fixed identity, decided
    // before the privileges dropped), and is refused when the start would have refused it.
    let reload_hostname = pending.hostname.clone();
    let reload_enforce = enforce.clone();
    let everything = args.write.is_some();
    let configure_again = move || -> Result<(Config, Ruleset)> {
        let (config, mut ruleset) = configure(&selection)?;
        if folds {
            fold_as_here(&mut ruleset, &reload_hostname);
        }
        RunningFilter::derive(reload_enforce.as_ref(), everything, &ruleset)
            .map_err(|e| InvalidInput(e.to_string()))?;
        Ok((config, ruleset))
    };
    let mut pipeline = Pipeline {
        engine,
        agent: None,
        pending: Some(pending),
        attach_error: None,
        enforced: filter.enforced,
        action: args.enforce_action,
        capture,
        error: None,
        blocked: 0,
        configure: Box::new(configure_again),
        running: None,
        blind_rules: 0,
        memory: None,
    };
    let allow_privilege_gain = vigil_privs::may_allow_privilege_gain();
    if !allow_privilege_gain {
        log::warn!(
            "setuid and setgid programs and file capabilities will not gain privileges in this \
             workload (no_new_privs: starting it without needs CAP_SYS_ADMIN and CAP_SYS_PTRACE)"
        );
    }
    let mut command = args.command.into_iter();
    let spec = RunSpec {
        program: command.next().unwrap_or_default(),
        args: command.collect(),
        report_when: filter.report_when,
        report: filter.report,
        judged: filter.judged,
        in_place: in_place.map(|(interest, _)| interest),
        learn: args.learn.is_some(),
        profile,
        mechanism: match args.mechanism {
            MechanismArg::Auto | MechanismArg::Ptrace => Mechanism::Ptrace,
            MechanismArg::Notify => Mechanism::Notify,
        },
        notify_fallback: args.mechanism == MechanismArg::Auto,
        drop_privileges: true,
        memory: match args.memory_access {
            MemoryAccessArg::Auto => None,
            MemoryAccessArg::VmReadv => Some(vigil_ptrace::MemoryAccess::VmReadv),
            MemoryAccessArg::Ptrace => Some(vigil_ptrace::MemoryAccess::Ptrace),
            MemoryAccessArg::ProcMem => Some(vigil_ptrace::MemoryAccess::ProcMem),
        },
        allow_privilege_gain,
        // Housekeeping (stats file, metrics, drop alerts) also while the workload is idle;
        // at least as often as the stats lines are due.
        idle_interval: Some(IDLE_INTERVAL.min(stats_interval.max(Duration::from_millis(10)))),
    };
    let traced = vigil_ptrace::traced_syscalls(&spec).len();
    pipeline.running = Some(RunningFilter::new(&spec, enforce, args.write.is_some()));
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
                // The agent's own error (invalid configuration is invalid input).
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
        let runtime = match args.learn_for {
            LearnFor::Runc => vigil_ptrace::Runtime::Runc,
            LearnFor::None => vigil_ptrace::Runtime::None,
        };
        let text = vigil_ptrace::learned_profile(&outcome.used_syscalls, runtime);
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
    if print_stats {
        let s = &outcome.stats;
        let engine_stats = pipeline.engine.stats();
        eprintln!(
            "vigil: traced_syscalls={} stops={} seccomp_stops={} exit_stops={} tasks={} \
             skipped_exits={} events={} alerts={} judged={} blocked={} killed={} \
             read_faults={} memory_access={} widened={} widen_failures={} \
             reload_blind_rules={}",
            traced,
            s.stops,
            s.seccomp_stops,
            s.exit_stops,
            s.tasks,
            s.skipped_exits,
            engine_stats.processed,
            engine_stats.alerts,
            s.judged,
            pipeline.blocked,
            s.killed,
            s.read_faults,
            pipeline.memory.map_or("none", |m| m.name()),
            s.widened,
            s.widen_failures,
            pipeline.blind_rules
        );
    }
    // Pending alerts get the delivery deadline; what is left stays in a configured spool.
    let Pipeline {
        engine,
        mut agent,
        error,
        memory,
        ..
    } = pipeline;
    if let (Some(agent), Some(memory)) = (agent.as_mut(), memory) {
        agent.read_faults(vigil_ptrace::read_faults(), memory.name(), true);
    }
    let finished = match agent {
        Some(agent) => agent
            .finish(&engine, &SourceStats::default(), false)
            .map_err(anyhow::Error::from),
        None => Ok(()),
    };
    if let Some(err) = error.or(finished.err()) {
        // The workload ran to its end; Vigil's own failure is reported, its status kept.
        eprintln!("vigil: {err:#}");
    }
    vigil_ptrace::exit_like(outcome.status)
}

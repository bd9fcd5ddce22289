//! `vigil run`'s pipeline: the workload under the ptrace driver (`vigil-ptrace`), its events
//! through state and rules, optionally its enforced rules' syscalls blocked before they run,
//! a seccomp profile learned or applied, and the workload's exit status kept.
//!
//! Entry point: [`run`], with the rules and configuration the command line read and a
//! `configure` that reads them again (reloads). `Pipeline` is the driver's
//! [`vigil_ptrace::Handler`].
//!
//! Privileges: the capture and `--learn` files are opened first; the workload is forked with
//! the privileges Vigil was started with; then the tracer drops all but
//! [`vigil_privs::TRACER`] and sets `no_new_privs` before the workload runs, and only then
//! starts the agent's threads (outputs, web server) in [`Handler::attached`]: a configuration
//! they refuse still stops the run before the workload's first instruction.
//!
//! SIGHUP is the workload's: rules and configuration reload when their files change
//! (`watch_config_files`), within what the seccomp filter installed at the start lets the
//! tracer see ([`reload`]).

pub mod reload;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use vigil_capture::SourceStats;
use vigil_config::Config;
use vigil_engine::{EnforceSelection, Engine, KernelFilter};
use vigil_event::{Event, Snapshot};
use vigil_fields::Value;
use vigil_output::sinks::Console;
use vigil_ptrace::{Handler, Mechanism, MemoryAccess, Profile, RunSpec, Runtime, Verdict};
use vigil_rules::Ruleset;

use crate::capture_out::{CaptureOut, CaptureOutError};
use crate::filewatch::WatchSources;
use crate::live::{with_causes, Agent, AgentError, AgentFlags, ReloadError};
use reload::RunningFilter;

const EPERM: i32 = 1;

/// Without a stop for this long, the tracer runs the agent's housekeeping anyway.
const IDLE_INTERVAL: Duration = Duration::from_secs(1);

/// Why a run cannot start (once the workload ran, Vigil's own failures are reported and the
/// workload's status kept).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The rules or configuration, read again (the caller's error, kept whole).
    #[error(transparent)]
    Configure(ReloadError),
    /// The rules cannot be enforced or traced as asked, or the seccomp profile is invalid
    /// (invalid input).
    #[error("{0}")]
    Invalid(String),
    #[error("cannot read `{}`", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot create `{}`", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Capture(#[from] CaptureOutError),
    /// The agent refused to start (its own error, with its exit-code class).
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error(transparent)]
    Trace(#[from] vigil_ptrace::RunError),
}

/// Vigil's own failure after the workload ran (reported, the workload's status kept).
#[derive(Debug, thiserror::Error)]
enum AfterError {
    #[error("cannot write the capture: {0}")]
    WriteCapture(vigil_event::codec::CaptureError),
    #[error(transparent)]
    Capture(#[from] CaptureOutError),
    #[error("cannot write `{}`", path.display())]
    Learn {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Agent(#[from] AgentError),
}

/// What blocking does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnforceAction {
    /// The syscall fails with EPERM.
    Deny,
    /// The process is killed.
    Kill,
}

/// A run as the command line asked for it.
pub struct RunOptions {
    /// The workload and its arguments.
    pub command: Vec<OsString>,
    /// `--enforce` with its rule and tag selection.
    pub enforce: Option<EnforceSelection>,
    pub action: EnforceAction,
    /// `--learn FILE` and the runtime that will apply the profile.
    pub learn: Option<(PathBuf, Runtime)>,
    pub seccomp_profile: Option<PathBuf>,
    /// `-w FILE`.
    pub write: Option<PathBuf>,
    pub mechanism: Mechanism,
    /// Fall back to user notification where ptrace is refused.
    pub notify_fallback: bool,
    /// Forced memory access, or `None` to probe.
    pub memory: Option<MemoryAccess>,
    /// The statistics file and its interval.
    pub stats_file: Option<(PathBuf, Duration)>,
    /// `--stats-interval` (housekeeping runs at least this often while the workload idles).
    pub stats_interval: Duration,
    /// Print the counters line at the end (`--stats`).
    pub print_stats: bool,
    /// The rules and configuration files watched for a reload.
    pub watch: WatchSources,
    /// The stderr line for Vigil's own messages.
    pub notice: fn(&str),
}

/// The tracer's events through the same engine and outputs as `vigil watch`, with the
/// enforcement decision at judged entries.
struct Pipeline<'a> {
    engine: Engine,
    /// Started in [`Handler::attached`], once the tracer's privileges are dropped.
    agent: Option<Agent>,
    /// What [`Handler::attached`] starts the agent with.
    pending: Option<PendingAgent>,
    /// Why [`Handler::attached`] failed, with its exit-code class kept.
    attach_error: Option<AgentError>,
    /// Per rule index: blocks when it matches.
    enforced: Vec<bool>,
    action: EnforceAction,
    capture: Option<CaptureOut>,
    error: Option<AfterError>,
    blocked: u64,
    /// Re-reads rules and configuration when a watched file changes (SIGHUP is the
    /// workload's under `vigil run`).
    configure: Box<dyn FnMut() -> Result<(Config, Ruleset), ReloadError> + 'a>,
    /// The seccomp filter in force, to check reloaded rules against.
    running: Option<RunningFilter>,
    /// Enabled rules of the last reload that the running filter leaves (partly) blind.
    blind_rules: usize,
    /// How the workload's memory is read (known once attached).
    memory: Option<MemoryAccess>,
    notice: fn(&str),
}

/// The agent's start-up parameters, kept until the tracer is ready for threads.
struct PendingAgent {
    config: Config,
    hostname: String,
    stats_file: Option<(PathBuf, Duration)>,
    watch: WatchSources,
}

impl Pipeline<'_> {
    fn fail(&mut self, err: AfterError) {
        if self.error.is_none() {
            self.error = Some(err);
        }
    }

    fn record(&mut self, event: &Event) {
        if let Some(capture) = self.capture.as_mut() {
            if let Err(e) = capture.event(event) {
                self.capture = None;
                self.fail(AfterError::WriteCapture(e));
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
        match agent.housekeeping(&mut self.engine, &SourceStats::default, &mut || configure()) {
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
                    (self.notice)(&format!("warning: {}", reload::describe(&reloaded.blind)));
                }
            }
            // Checked before the rules were accepted ([`run`]'s `configure`); should it
            // fail anyway, nothing enforces rather than the wrong rules.
            Err(e) => {
                (self.notice)(&format!("warning: reload: {e}; enforcement is off"));
                self.enforced = vec![false; self.engine.ruleset().rules().len()];
            }
        }
    }
}

impl Handler for Pipeline<'_> {
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
            notice: self.notice,
        };
        match Agent::start(pending.config, &pending.hostname, &flags, &mut self.engine) {
            Ok(mut agent) => {
                agent.watch_files(watch);
                self.agent = Some(agent);
                Ok(())
            }
            Err(e) => {
                let text = with_causes(&e);
                self.attach_error = Some(e);
                Err(text)
            }
        }
    }
    fn start(&mut self, snapshot: &Snapshot) {
        self.engine.load_snapshot(snapshot);
        if let Some(capture) = self.capture.as_mut() {
            if let Err(e) = capture.snapshot(snapshot) {
                self.capture = None;
                self.fail(AfterError::WriteCapture(e));
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
    configure: &dyn Fn() -> Result<(Config, Ruleset), ReloadError>,
    hostname: &str,
    full: &KernelFilter,
    everything: bool,
) -> Result<Option<(vigil_ptrace::Interest, Vec<String>)>, RunError> {
    let (_, mut here) = configure().map_err(RunError::Configure)?;
    let folded = fold_as_here(&mut here, hostname);
    if folded.is_empty() {
        return Ok(None);
    }
    let narrow = RunningFilter::derive(None, everything, &here)
        .map_err(|e| RunError::Invalid(e.to_string()))?;
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

/// What `vigil run` started here would do with each rule (`rules list --explain-run`).
pub struct Explained {
    /// Per rule, in order: its name, its status (`cannot match this workload`, `disabled`,
    /// `every syscall`, `watched in new namespaces`, `watched`) and the syscalls that stop for
    /// it (`name(condition)` when only some argument values stop, `name(exec event only)`
    /// when the filter does not stop it).
    pub rules: Vec<(String, &'static str, Vec<String>)>,
    /// Why no rule is folded: the identity of a workload started here may change.
    pub not_folded: Option<String>,
    /// Rules that stop only in processes that enter new namespaces.
    pub elsewhere_only: usize,
    /// The syscalls the run's seccomp filter stops for.
    pub stops: Vec<&'static str>,
}

/// Explains `ruleset` under `vigil run` started here; `again` loads the same rules again (a
/// copy to fold where the identity may change).
pub fn explain(
    mut ruleset: Ruleset,
    again: &dyn Fn() -> Result<Ruleset, ReloadError>,
    hostname: &str,
) -> Result<Explained, RunError> {
    let identity = vigil_procfs::identity_is_fixed();
    // Where the identity is fixed the rules that cannot match here are disabled; where it
    // may change they stop only in the processes that enter new namespaces.
    let (folded, elsewhere_only) = if identity.is_ok() {
        (fold_as_here(&mut ruleset, hostname), Vec::new())
    } else {
        let mut here = again().map_err(RunError::Configure)?;
        (Vec::new(), fold_as_here(&mut here, hostname))
    };
    let filter = RunningFilter::derive(None, false, &ruleset)
        .map_err(|e| RunError::Invalid(e.to_string()))?;
    let name_of = |id: u16| {
        vigil_event::table::events()
            .get(usize::from(id))
            .map_or("?", |s| s.name)
    };
    let mut rules = Vec::new();
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
        rules.push((rule.name.clone(), status, syscalls));
    }
    Ok(Explained {
        rules,
        not_folded: identity.err().map(|why| why.to_string()),
        elsewhere_only: elsewhere_only.len(),
        stops: filter
            .report
            .iter()
            .filter_map(|&nr| vigil_event::table::by_syscall_nr(nr).map(|t| name_of(t.0)))
            .collect(),
    })
}

/// Runs the workload of `options` under the tracer with `config` and `ruleset` (what
/// `configure` returned at the start); `configure` reads them again for a reload. Once the
/// workload ran, exits as it did ([`vigil_ptrace::exit_like`]).
pub fn run(
    options: RunOptions,
    (config, mut ruleset): (Config, Ruleset),
    configure: &dyn Fn() -> Result<(Config, Ruleset), ReloadError>,
) -> Result<ExitCode, RunError> {
    let notice = options.notice;
    let hostname = vigil_state::procfs::host_name();
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
    let enforce = options.enforce.clone();
    let everything = options.write.is_some();
    let filter = RunningFilter::derive(enforce.as_ref(), everything, &ruleset)
        .map_err(|e| RunError::Invalid(e.to_string()))?;
    let in_place = if folds || options.learn.is_some() {
        None
    } else {
        in_place_interest(configure, &hostname, &filter, everything)?
    };
    if let Some((_, names)) = &in_place {
        log::info!(
            "{} rule(s) cannot match where Vigil runs; their syscalls stop only in processes              that enter new namespaces (containers): {}",
            names.len(),
            names.join(", ")
        );
    }
    if enforce.is_some() && !filter.enforces() {
        notice("warning: --enforce: no enabled rule is selected for enforcement");
    }
    if filter.watches_all {
        notice(
            "warning: a rule does not restrict evt.type: every syscall of the workload will \
             stop the tracer",
        );
    }
    let profile = match &options.seccomp_profile {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|source| RunError::Read {
                path: path.clone(),
                source,
            })?;
            Some(
                Profile::parse(&text)
                    .map_err(|e| RunError::Invalid(format!("`{}`: {e}", path.display())))?,
            )
        }
        None => None,
    };
    let capture = match options.write.as_ref() {
        Some(path) => Some(CaptureOut::create(path)?),
        None => None,
    };
    let engine = Engine::new(
        ruleset,
        crate::host::live_state_config(&hostname, notice),
        hostname.clone(),
    );
    let pending = PendingAgent {
        config,
        hostname,
        stats_file: options.stats_file,
        watch: options.watch,
    };
    let stats_interval = options.stats_interval;
    // A reload gets what the start did to the rules (folded for a fixed identity, decided
    // before the privileges dropped), and is refused when the start would have refused it.
    let reload_hostname = pending.hostname.clone();
    let reload_enforce = enforce.clone();
    let configure_again = move || -> Result<(Config, Ruleset), ReloadError> {
        let (config, mut ruleset) = configure()?;
        if folds {
            fold_as_here(&mut ruleset, &reload_hostname);
        }
        RunningFilter::derive(reload_enforce.as_ref(), everything, &ruleset)
            .map_err(|e| Box::new(RunError::Invalid(e.to_string())))?;
        Ok((config, ruleset))
    };
    let mut pipeline = Pipeline {
        engine,
        agent: None,
        pending: Some(pending),
        attach_error: None,
        enforced: filter.enforced,
        action: options.action,
        capture,
        error: None,
        blocked: 0,
        configure: Box::new(configure_again),
        running: None,
        blind_rules: 0,
        memory: None,
        notice,
    };
    let allow_privilege_gain = vigil_privs::may_allow_privilege_gain();
    if !allow_privilege_gain {
        log::warn!(
            "setuid and setgid programs and file capabilities will not gain privileges in this \
             workload (no_new_privs: starting it without needs CAP_SYS_ADMIN and CAP_SYS_PTRACE)"
        );
    }
    let mut command = options.command.into_iter();
    let spec = RunSpec {
        program: command.next().unwrap_or_default(),
        args: command.collect(),
        report_when: filter.report_when,
        report: filter.report,
        judged: filter.judged,
        in_place: in_place.map(|(interest, _)| interest),
        learn: options.learn.is_some(),
        profile,
        mechanism: options.mechanism,
        notify_fallback: options.notify_fallback,
        drop_privileges: true,
        memory: options.memory,
        allow_privilege_gain,
        // Housekeeping (stats file, metrics, drop alerts) also while the workload is idle;
        // at least as often as the stats lines are due.
        idle_interval: Some(IDLE_INTERVAL.min(stats_interval.max(Duration::from_millis(10)))),
    };
    let traced = vigil_ptrace::traced_syscalls(&spec).len();
    pipeline.running = Some(RunningFilter::new(&spec, enforce, everything));
    // Opened now (the tracer will not be allowed to create it later), written when the
    // workload has ended: an existing profile is replaced only then, and one created here
    // is removed again if the workload never ran.
    let mut learn_out = match &options.learn {
        Some((path, _)) => {
            let existed = path.exists();
            let file = vigil_output::files::append(path).map_err(|source| RunError::Create {
                path: path.clone(),
                source,
            })?;
            Some((file, existed))
        }
        None => None,
    };
    let outcome = match vigil_ptrace::run(&spec, &mut pipeline) {
        Ok(outcome) => outcome,
        Err(e) => {
            if let (Some((path, _)), Some((_, false))) = (&options.learn, &learn_out) {
                let _ = std::fs::remove_file(path);
            }
            return Err(match (e, pipeline.attach_error.take()) {
                // The agent's own error (invalid configuration is invalid input).
                (vigil_ptrace::RunError::Handler(_), Some(err)) => err.into(),
                (e, _) => e.into(),
            });
        }
    };
    if let Some(capture) = pipeline.capture.take() {
        if let Err(e) = capture.finish() {
            pipeline.fail(e.into());
        }
    }
    if let (Some((path, runtime)), Some((file, _))) = (&options.learn, learn_out.as_mut()) {
        let text = vigil_ptrace::learned_profile(&outcome.used_syscalls, *runtime);
        // Appending to an emptied file writes from its start.
        if let Err(source) = file
            .set_len(0)
            .and_then(|()| file.write_all(text.as_bytes()))
            .and_then(|()| file.sync_all())
        {
            pipeline.fail(AfterError::Learn {
                path: path.clone(),
                source,
            });
        }
    }
    if options.print_stats {
        let s = &outcome.stats;
        let engine_stats = pipeline.engine.stats();
        notice(&format!(
            "traced_syscalls={} stops={} seccomp_stops={} exit_stops={} tasks={} \
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
        ));
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
            .map_err(AfterError::from),
        None => Ok(()),
    };
    if let Some(err) = error.or(finished.err()) {
        // The workload ran to its end; Vigil's own failure is reported, its status kept.
        notice(&with_causes(&err));
    }
    vigil_ptrace::exit_like(outcome.status)
}

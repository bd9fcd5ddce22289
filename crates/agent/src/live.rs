//! [`Agent`]: the live agent assembled around an engine — the configured outputs, the metrics
//! registry and its web server, Falco's stats file and metrics snapshots, the drop alert, the
//! signals (SIGTERM/SIGINT stop, SIGHUP reload, SIGUSR1 reopen), the reload when watched
//! files change, the privilege drop before any thread starts, and the summary at exit.
//!
//! The command that owns the event source calls in: [`Agent::process`] for each batch, then
//! [`Agent::housekeeping`]; [`Agent::drive`] is that loop, for any [`Source`], with the
//! [`Drive`] options a driver needs (drain at the stop, capture copy, narrowing after a
//! reload). The periodic
//! work runs on the agent's timers ([`crate::timers`]): a loop that blocks in its source blocks
//! until [`Agent::next_due`] at most, and [`Agent::wake_on_signals`] makes a stop signal end
//! the wait at once. Messages for
//! the operator (the web server's address, reloads, the exit summary) go to
//! [`AgentFlags::notice`], so this crate prints nothing itself.

use std::error::Error;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use vigil_capture::{Source, SourceError, SourceStats, Waker};
use vigil_config::{BindFailure, Config};
use vigil_engine::{AlertDecorator, Engine};
use vigil_event::Event;
use vigil_output::sinks::Console;
use vigil_output::{Formatter, Metrics, Outputs, OutputsError};
use vigil_privs::Capability;
use vigil_rules::Ruleset;

use crate::capture_out::CaptureOut;
use crate::filewatch::{self, ConfigWatcher, WatchSources};
use crate::signals::SignalWake;
use crate::timers::{Job, Timers, METRICS_EVERY};
use crate::{
    AgentServer, AppendError, Appender, BoundServer, ServerError, Signals, Tick, TickCounts,
};

/// How long outputs may take to deliver what is pending at exit (SIGTERM, end of replay) and
/// on a reload; what remains then stays in the spool (or is dropped and counted without one).
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// A reload's error, with its causes.
pub type ReloadError = Box<dyn Error + Send + Sync>;

/// Reloads configuration and rules (SIGHUP, a watched file changed); errors keep the running
/// ones.
pub type Reload<'a> = dyn FnMut() -> Result<(Config, Ruleset), ReloadError> + 'a;

/// Why the agent cannot start or go on.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// The configured outputs refuse their settings (invalid input).
    #[error(transparent)]
    Outputs(#[from] OutputsError),
    /// `append_output` is invalid (invalid input).
    #[error(transparent)]
    AppendOutput(#[from] AppendError),
    #[error("cannot create the stats file")]
    StatsFile(#[source] std::io::Error),
    #[error("cannot write the stats file")]
    WriteStats(#[source] std::io::Error),
    #[error("cannot open metrics.output_file")]
    MetricsFile(#[source] std::io::Error),
    #[error("cannot install signal handlers")]
    Signals(#[source] std::io::Error),
    #[error("cannot drop privileges")]
    Privileges(#[source] vigil_privs::PrivError),
    /// A bad certificate or key for `webserver.ssl_enabled`.
    #[error(transparent)]
    WebserverConfig(ServerError),
    /// The address cannot be bound while `webserver.bind_failure` is `exit`.
    #[error("{0}")]
    Bind(String),
    #[error("cannot start the webserver")]
    Serve(#[source] ServerError),
    #[error("cannot start the outputs")]
    StartOutputs(#[source] std::io::Error),
    /// The event source failed.
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The source's last events could not be read at the stop ([`Drive::drain`]).
    #[error(transparent)]
    Drain(StepError),
    /// The capture of the drive ([`Drive::capture`]) cannot be written.
    #[error("cannot write the capture")]
    WriteCapture(#[source] vigil_event::codec::CaptureError),
    /// The source cannot narrow itself to the reloaded rules ([`Drive::reapply`]).
    #[error("cannot apply the reloaded rules' event types")]
    Reapply(#[source] StepError),
}

/// The error of a step a command adds to the drive ([`Drive`]), with its causes.
pub type StepError = Box<dyn Error + Send + Sync>;

/// What [`Drive::reapply`] did: the number of syscalls the source captures now, and lines
/// for the operator after the one that says so.
pub struct Reapplied {
    pub syscalls: usize,
    pub notes: Vec<String>,
}

/// What a command adds to [`Agent::drive`]'s loop; [`Drive::default`] adds nothing (batches
/// of 1024 until the source ends or a stop).
#[allow(clippy::type_complexity)]
pub struct Drive<'a, S: ?Sized> {
    /// Events asked of the source per batch.
    pub batch: usize,
    /// Stops at this instant as a stop signal would (`vigil watch -M`).
    pub until: Option<Instant>,
    /// At a stop (signal or `until`): the events the source still holds (committed by the
    /// kernel, held back for reordering) are evaluated before the drive ends, so that the
    /// last events before the signal are not lost. Without it, the drive ends after the batch
    /// in hand.
    pub drain: Option<fn(&mut S, &mut Vec<Event>) -> Result<(), StepError>>,
    /// Every event is also written to this capture, before it is evaluated.
    pub capture: Option<&'a mut CaptureOut>,
    /// After a reload, before the next batch: narrows the source to what the new rules
    /// watch (its kernel side). Once it returns, the notice `watching N syscalls after the
    /// reload` says the kernel captures what the new rules watch (a user testing a new rule
    /// waits for it), then its notes follow.
    pub reapply: Option<&'a mut dyn FnMut(&mut S, &Ruleset) -> Result<Reapplied, StepError>>,
}

impl<S: ?Sized> Default for Drive<'_, S> {
    fn default() -> Self {
        Drive {
            batch: 1024,
            until: None,
            drain: None,
            capture: None,
            reapply: None,
        }
    }
}

impl AgentError {
    /// Whether the error is in what the user gave (the configuration), rather than at run
    /// time: the command line exits 2 for these.
    pub fn is_invalid_input(&self) -> bool {
        matches!(self, AgentError::Outputs(_) | AgentError::AppendOutput(_))
    }
}

/// What [`Agent::start`] needs besides the configuration.
pub struct AgentFlags<'a> {
    /// Falco's `-s FILE` with `--stats-interval`.
    pub stats_file: Option<(&'a Path, Duration)>,
    /// A run that lasts: start the web server.
    pub live: bool,
    /// Install the signal handlers (stop, SIGHUP reload, SIGUSR1 reopen). Off under `vigil
    /// run`, whose tracer forwards the signals Vigil receives to the workload.
    pub signals: bool,
    /// Where `stdout_output` writes.
    pub console: Console,
    /// The capture engine, as `falcosecurity_scap_engine_name_info{engine_name}` names it:
    /// Falco's `modern_bpf` (CO-RE eBPF) and `savefile` (a capture file), or `ptrace`.
    pub engine: &'static str,
    /// Drop every capability but these once the files are open and the web server's socket
    /// is bound, before any thread starts ([`vigil_privs::drop_to`]).
    pub privileges: Option<&'a [Capability]>,
    /// Where messages for the operator go (one line each, without a prefix).
    pub notice: fn(&str),
}

/// The long-running side of an evaluation, shared by `vigil replay`, `vigil watch` and `vigil
/// run`: the configured outputs, the metrics registry and its web server, the stats file and
/// Falco's metrics snapshots, the drop alert, the signals (stop, SIGHUP reload, SIGUSR1
/// reopen), and the reload when watched files change ([`Agent::watch_files`]).
pub struct Agent {
    metrics: Metrics,
    outputs: Outputs,
    /// The web server serves `/metrics` (decides the per-rule cost accounting).
    serves_metrics: bool,
    _server: Option<AgentServer>,
    tick: Tick,
    /// When the metrics, stats file, snapshot and file checks are due.
    timers: Timers,
    signals: Signals,
    config: Config,
    hostname: String,
    console: Console,
    notice: fn(&str),
    eval: Duration,
    /// Where the watched files come from ([`Agent::watch_files`]).
    watch_sources: Option<WatchSources>,
    /// Watches them while the configuration's `watch_config_files` is on.
    watcher: Option<ConfigWatcher>,
}

/// The alert decorator for `append_output` (none when the list is empty).
fn decorator(config: &Config) -> Result<Option<Box<dyn AlertDecorator>>, AgentError> {
    let appender = Appender::new(&config.append_output, vigil_state::catalog())?;
    Ok(appender.map(|a| Box::new(a) as Box<dyn AlertDecorator>))
}

/// Starts the outputs, skipping a syslog output whose socket does not exist (containers
/// usually have none), with a warning; `stdout_output` writes to `console`.
pub fn start_outputs(
    config: &Config,
    metrics: &Metrics,
    hostname: &str,
    console: Console,
) -> Result<Outputs, AgentError> {
    let mut config = config.clone();
    if config.syslog_output.enabled && !config.syslog_output.socket.exists() {
        log::warn!(
            "syslog_output: `{}` does not exist; syslog output disabled",
            config.syslog_output.socket.display()
        );
        config.syslog_output.enabled = false;
    }
    Ok(Outputs::from_config_to(
        &config.output_settings(),
        metrics,
        hostname,
        console,
    )?)
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The counters of a tick: the engine's, the state's and the source's.
pub fn counts(engine: &Engine, source: &SourceStats, eval: Duration) -> TickCounts {
    let processed = engine.stats().processed;
    let dropped: Vec<(String, u64)> = source
        .dropped
        .iter()
        .map(|(reason, n)| (reason.to_string(), *n))
        .collect();
    let dropped_total: u64 = dropped.iter().map(|(_, n)| n).sum();
    let state = engine.state().stats();
    TickCounts {
        events_in: processed + dropped_total,
        processed,
        dropped,
        filtered_failed: source.filtered_failed,
        folded_state: source.folded_state,
        kernel_records: source.kernel_records,
        eval_seconds: eval.as_secs_f64(),
        threads: state.threads as u64,
        fds: state.fds as u64,
        containers: state.containers as u64,
        dropped_threads: state.dropped_threads,
        container_lookups: state.container_lookups.lookups,
        container_lookup_misses: state.container_lookups.misses,
        container_lookup_seconds: state.container_lookups.total_ns as f64 / 1e9,
        container_lookup_max_seconds: state.container_lookups.max_ns as f64 / 1e9,
        rule_costs: crate::tick::rule_costs(engine),
    }
}

/// Events per timed one in the per-rule cost accounting (`vigil_rule_eval_seconds_total`):
/// chosen so that accounting stays within 2% of evaluation time (BENCHMARKS.md, "Per-rule
/// cost accounting").
pub const RULE_COST_STRIDE: u32 = 256;

/// Whether the engine accounts for per-rule costs: only when something shows them — the
/// agent's web server serves `/metrics` and `config` has Falco's `rules_counters_enabled`.
fn rule_cost_stride(serves_metrics: bool, config: &Config) -> Option<u32> {
    (serves_metrics && config.metrics.rules_counters_enabled).then_some(RULE_COST_STRIDE)
}

/// `events in 10, processed 8, dropped 2 (buffer_full=2)`: the exit summary's event line.
fn events_summary(c: &TickCounts) -> String {
    let reasons: Vec<String> = c
        .dropped
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(reason, n)| format!("{reason}={n}"))
        .collect();
    format!(
        "events in {}, processed {}, dropped {}{}",
        c.events_in,
        c.processed,
        c.dropped_total(),
        if reasons.is_empty() {
            String::new()
        } else {
            format!(" ({})", reasons.join(", "))
        }
    )
}

/// `error: cause: cause`, as the command line prints an error with its causes.
pub(crate) fn with_causes(err: &(dyn Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

impl Agent {
    /// Starts outputs, metrics and (for a live run) the signal handlers and the web server;
    /// installs `append_output` on `engine`. What may need privileges comes first (the stats
    /// and metrics files, binding the web server), then `flags.privileges` are dropped, then
    /// the threads start (output workers, the web server's), inheriting the reduced set.
    pub fn start(
        config: Config,
        hostname: &str,
        flags: &AgentFlags<'_>,
        engine: &mut Engine,
    ) -> Result<Agent, AgentError> {
        let metrics = Metrics::new();
        metrics.set(
            vigil_output::metrics::names::ENGINE_NAME_INFO,
            &[("engine_name", flags.engine), ("evt_source", "syscall")],
            1.0,
        );
        engine.set_decorator(decorator(&config)?);
        let tick = Tick::new(&metrics, flags.stats_file)
            .map_err(AgentError::StatsFile)?
            .with_snapshots(&config.metrics)
            .map_err(AgentError::MetricsFile)?;
        let bound = if flags.live && config.webserver.enabled {
            bind_webserver(&config, &metrics, flags.notice)?
        } else {
            None
        };
        let signals = if flags.signals {
            Signals::install().map_err(AgentError::Signals)?
        } else {
            Signals::detached()
        };
        if let Some(keep) = flags.privileges {
            let dropped = vigil_privs::drop_to(keep).map_err(AgentError::Privileges)?;
            log::info!(
                "privileges dropped: kept capabilities {}; no_new_privs set",
                dropped.describe()
            );
        }
        let outputs = start_outputs(&config, &metrics, hostname, flags.console)?;
        tick.seed(&outputs, engine.ruleset());
        let server = match bound {
            Some(bound) => {
                let server = bound.serve().map_err(AgentError::Serve)?;
                (flags.notice)(&format!(
                    "webserver listening on {}://{}",
                    server.scheme(),
                    server.addr()
                ));
                Some(server)
            }
            None => None,
        };
        let serves_metrics = server.is_some() && config.webserver.prometheus_metrics_enabled;
        engine.set_rule_costs(rule_cost_stride(serves_metrics, &config));
        let now = Instant::now();
        let mut timers = Timers::new(now);
        // At once: the counters are published with the first event (a traced workload may go
        // idle right after it).
        timers.set(Job::Metrics, Some(METRICS_EVERY), now, true);
        timers.set(Job::StatsFile, tick.stats_interval(), now, false);
        timers.set(Job::Snapshot, tick.snapshot_interval(), now, false);
        Ok(Agent {
            metrics,
            outputs,
            serves_metrics,
            _server: server,
            tick,
            timers,
            signals,
            config,
            hostname: hostname.to_string(),
            console: flags.console,
            notice: flags.notice,
            eval: Duration::ZERO,
            watch_sources: None,
            watcher: None,
        })
    }

    /// Reloads (as SIGHUP does) when the configuration file or a rules file or directory in
    /// use changes, while the configuration's `watch_config_files` is on. `sources` tells
    /// where the command line took them from; after each reload the set follows the new
    /// configuration's `rules_files`.
    pub fn watch_files(&mut self, sources: WatchSources) {
        self.watch_sources = Some(sources);
        self.rewatch();
    }

    /// Starts, updates or stops the watcher for the running configuration.
    fn rewatch(&mut self) {
        let Some(sources) = &self.watch_sources else {
            return;
        };
        let set = sources.set(&self.config.rules_files);
        if !self.config.watch_config_files || set.is_empty() {
            self.watcher = None;
            self.timers
                .set(Job::ConfigFiles, None, Instant::now(), false);
            return;
        }
        if self.watcher.is_none() {
            self.timers.set(
                Job::ConfigFiles,
                Some(filewatch::READ_EVERY),
                Instant::now(),
                false,
            );
        }
        match self.watcher.as_mut() {
            Some(watcher) => watcher.replace(set),
            None => self.watcher = Some(ConfigWatcher::new(set, filewatch::QUIET)),
        }
        if let Some(watcher) = &self.watcher {
            for dir in watcher.missing() {
                (self.notice)(&format!(
                    "warning: watch_config_files: cannot read `{}`; changes there are not \
                     seen until a reload",
                    dir.display()
                ));
            }
            log::info!(
                "watch_config_files: watching {} directories for changes",
                watcher.set().dirs().count()
            );
        }
    }

    /// The configuration in force (the last one a reload accepted).
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The metrics registry (what `/metrics` serves).
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The signal flags (stop, reload, reopen), to set by hand in tests or by a command.
    pub fn signals(&self) -> &Signals {
        &self.signals
    }

    /// The stop flag, shared: set by SIGTERM/SIGINT (or [`Signals::request_stop`]), for a
    /// source that waits to stop waiting ([`vigil_capture::FollowSource::open`]).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.signals.stop_flag()
    }

    /// Delivers an alert made outside [`Agent::process`] (an enforcement decision).
    pub fn emit(&mut self, alert: &vigil_output::Alert) {
        self.outputs.emit(alert);
    }

    /// Raises the internal alert for failed reads of a traced workload's memory (`total` so
    /// far, read with `method`) when there are new ones, rate-limited like the drop alert;
    /// `last` (at exit) reports whatever is left.
    pub fn read_faults(&mut self, total: u64, method: &str, last: bool) {
        self.outputs
            .check_read_faults(total, method, now_ns(), last);
    }

    /// SIGINT/SIGTERM arrived.
    pub fn stop_requested(&self) -> bool {
        self.signals.stop_requested()
    }

    /// When the next periodic job is due: how long a loop may block in its source
    /// ([`Source::next_batch_until`]) before it must call [`Agent::housekeeping`].
    pub fn next_due(&self) -> Instant {
        self.timers
            .next_due()
            .unwrap_or_else(|| Instant::now() + METRICS_EVERY)
    }

    /// Makes SIGTERM/SIGINT (and SIGHUP, SIGUSR1) also wake a source blocked in its wait
    /// ([`Source::waker`]), while the guard is kept; nothing without signal handlers or a
    /// waker.
    pub fn wake_on_signals(&self, waker: Option<Waker>) -> Result<SignalWake, AgentError> {
        match waker {
            Some(waker) => self
                .signals
                .wake_on_signal(&waker)
                .map_err(AgentError::Signals),
            None => Ok(SignalWake::default()),
        }
    }

    /// Runs `events` through `engine`, delivering alerts to the outputs.
    pub fn process(&mut self, engine: &mut Engine, events: &[Event]) {
        let start = Instant::now();
        let outputs = &mut self.outputs;
        for event in events {
            engine.process(event, &mut |alert| outputs.emit(&alert));
        }
        self.eval += start.elapsed();
    }

    /// Between batches: SIGUSR1 reopens the outputs, SIGHUP or a change of a watched file
    /// ([`Agent::watch_files`], looked at when its timer is due) reloads configuration and
    /// rules through `reload` (returning the new configuration; errors keep the running one),
    /// and the metrics, the stats file and metrics snapshots are updated when their timers are
    /// due (`source` gives the source's counters; it is only asked then, since reading them
    /// may cost a system call). Cheap when nothing is due: a clock read.
    pub fn housekeeping(
        &mut self,
        engine: &mut Engine,
        source: &dyn Fn() -> SourceStats,
        reload: &mut Reload<'_>,
    ) -> Result<Option<Config>, AgentError> {
        if self.signals.take_reopen() {
            (self.notice)("SIGUSR1: reopening outputs");
            self.outputs.reopen();
        }
        let mut reloaded = None;
        let now = Instant::now();
        let due = self.timers.take_due(now);
        let changed =
            due.contains(Job::ConfigFiles) && self.watcher.as_mut().is_some_and(|w| w.check(now));
        // SIGHUP first: it is consumed even when files changed too (one reload for both).
        let cause = match (self.signals.take_reload(), changed) {
            (true, _) => Some("SIGHUP"),
            (false, true) => Some("files changed"),
            (false, false) => None,
        };
        if let Some(cause) = cause {
            match reload_all(reload, engine) {
                Ok(new_config) => {
                    let old = std::mem::replace(
                        &mut self.outputs,
                        Outputs::with_sinks(Formatter::default(), Vec::new(), &self.metrics)
                            .map_err(AgentError::StartOutputs)?,
                    );
                    old.shutdown(Instant::now() + SHUTDOWN_DEADLINE);
                    let started =
                        start_outputs(&new_config, &self.metrics, &self.hostname, self.console);
                    self.outputs = match started {
                        Ok(o) => {
                            self.config = new_config.clone();
                            reloaded = Some(new_config);
                            o
                        }
                        Err(e) => {
                            (self.notice)(&format!(
                                "reload: outputs failed ({}); keeping the previous outputs",
                                with_causes(&e)
                            ));
                            start_outputs(
                                &self.config,
                                &self.metrics,
                                &self.hostname,
                                self.console,
                            )?
                        }
                    };
                    self.metrics.set_flags(self.config.metrics.flags());
                    engine.set_rule_costs(rule_cost_stride(self.serves_metrics, &self.config));
                    self.tick.seed(&self.outputs, engine.ruleset());
                    (self.notice)(&format!(
                        "{cause}: reloaded configuration and {} rules",
                        engine.ruleset().rules().len()
                    ));
                }
                Err(e) => (self.notice)(&format!(
                    "{cause}: reload failed, keeping the running configuration: {}",
                    with_causes(&*e)
                )),
            }
            // The configuration may name other rules files, or turn watching off; a
            // failed reload keeps watching the same set (the fix comes as another change).
            self.rewatch();
        }
        if [Job::Metrics, Job::StatsFile, Job::Snapshot]
            .into_iter()
            .any(|job| due.contains(job))
        {
            let c = counts(engine, &source(), self.eval);
            self.tick
                .run(&c, &mut self.outputs, now_ns(), due)
                .map_err(AgentError::WriteStats)?;
        }
        Ok(reloaded)
    }

    /// Runs `source` through `engine` until it ends, a stop is requested or `options.until`
    /// passes: each batch is evaluated (after [`Drive::capture`] recorded it), then
    /// [`Agent::housekeeping`] runs (also after an empty batch, which a source that waits
    /// returns when the next timer is due or a signal woke it), then [`Drive::reapply`] after
    /// a reload. With [`Drive::drain`], a stop evaluates the drained events before the end.
    /// The snapshot must already be loaded; a late one ([`Source::late_snapshot`]) is loaded
    /// before the events that follow it.
    pub fn drive<S: Source + ?Sized>(
        &mut self,
        engine: &mut Engine,
        source: &mut S,
        reload: &mut Reload<'_>,
        mut options: Drive<'_, S>,
    ) -> Result<(), AgentError> {
        let _wake = self.wake_on_signals(source.waker())?;
        let mut batch = Vec::with_capacity(options.batch);
        let until = options.until;
        let stop = |agent: &Agent| {
            agent.stop_requested() || until.is_some_and(|end| Instant::now() >= end)
        };
        loop {
            batch.clear();
            let more = match options.drain {
                Some(drain) if stop(self) => {
                    drain(source, &mut batch).map_err(AgentError::Drain)?;
                    false
                }
                // Blocks until events come, the agent's next timer, or `until`.
                _ => {
                    let due = self.next_due();
                    let deadline = until.map_or(due, |end| end.min(due));
                    source.next_batch_until(&mut batch, options.batch, deadline)?
                }
            };
            if let Some(snapshot) = source.late_snapshot() {
                engine.load_snapshot(&snapshot);
            }
            if let Some(capture) = options.capture.as_deref_mut() {
                for event in &batch {
                    capture.event(event).map_err(AgentError::WriteCapture)?;
                }
            }
            self.process(engine, &batch);
            let reloaded = self.housekeeping(engine, &|| source.stats(), reload)?;
            if let (Some(_), Some(reapply)) = (reloaded, options.reapply.as_deref_mut()) {
                let done = reapply(source, engine.ruleset()).map_err(AgentError::Reapply)?;
                (self.notice)(&format!(
                    "watching {} syscalls after the reload",
                    done.syscalls
                ));
                for note in &done.notes {
                    (self.notice)(note);
                }
            }
            if !more || (options.drain.is_none() && stop(self)) {
                return Ok(());
            }
        }
    }

    /// Writes the last stats line, reports the drops not yet reported and drains the
    /// outputs (within [`SHUTDOWN_DEADLINE`]; with a spool, not waiting for an output that
    /// is down); reports the summary of events and alerts lost when something was lost or
    /// left in a spool, or `summary` is set.
    pub fn finish(
        mut self,
        engine: &Engine,
        source: &SourceStats,
        summary: bool,
    ) -> Result<(), AgentError> {
        let c = counts(engine, source, self.eval);
        let finished = self.tick.finish(&c, &mut self.outputs, now_ns());
        let report = self.outputs.shutdown(Instant::now() + SHUTDOWN_DEADLINE);
        finished.map_err(AgentError::WriteStats)?;
        // Alerts left in a spool are named too: the next start delivers them.
        let spooled = report.sinks.iter().any(|s| s.spooled_at_exit > 0);
        if c.dropped_total() > 0 || report.dropped_total() > 0 || spooled || summary {
            (self.notice)(&format!("at exit: {}", events_summary(&c)));
            for line in report.summary() {
                (self.notice)(&format!("output {line}"));
            }
        }
        Ok(())
    }
}

/// Binds the configured web server (serving starts later, [`BoundServer::serve`]). A bad
/// certificate stops the start; so does an address that cannot be bound, unless
/// `webserver.bind_failure` is `continue`.
fn bind_webserver(
    config: &Config,
    metrics: &Metrics,
    notice: fn(&str),
) -> Result<Option<BoundServer>, AgentError> {
    let webserver = &config.webserver;
    match AgentServer::bind(webserver, metrics, config.metrics.libbpf_stats_enabled) {
        Ok(bound) => Ok(Some(bound)),
        // A bad certificate is a configuration error: serving the endpoints without the TLS
        // the user asked for (or not at all, silently) is worse than stopping.
        Err(e) if e.is_config() => Err(AgentError::WebserverConfig(e)),
        // Health checks and scrapes that find nothing (or another process) would report a
        // healthy agent as down, or a different one as this one: stop unless told otherwise.
        Err(e) => match webserver.bind_failure {
            BindFailure::Exit => Err(AgentError::Bind(format!(
                "{e} (set `webserver.bind_failure: continue` to run without /healthz and \
                     /metrics, or `webserver.enabled: false`)"
            ))),
            BindFailure::Continue => {
                notice(&format!(
                    "warning: webserver not started: {e}; running without /healthz and \
                     /metrics (webserver.bind_failure: continue)"
                ));
                Ok(None)
            }
        },
    }
}

/// Reloads rules and configuration into `engine`; returns the new configuration.
fn reload_all(reload: &mut Reload<'_>, engine: &mut Engine) -> Result<Config, ReloadError> {
    let (config, ruleset) = reload()?;
    let decorator = decorator(&config)?;
    engine.set_ruleset(ruleset);
    engine.set_decorator(decorator);
    Ok(config)
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::path::PathBuf;

    use vigil_capture::{DropReason, ScriptedSource};
    use vigil_config::AppendOutput;
    use vigil_engine::RulesText;
    use vigil_event::Snapshot;

    use super::*;

    thread_local! {
        /// What the agent under test told the operator (the agent runs on the test's thread).
        static NOTICES: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }

    fn record(line: &str) {
        NOTICES.with(|n| n.borrow_mut().push(line.to_owned()));
    }

    fn notices() -> Vec<String> {
        NOTICES.with(|n| std::mem::take(&mut *n.borrow_mut()))
    }

    /// `n` rules on `kill`, each alerting on every kill.
    fn rules(n: usize) -> Ruleset {
        let text: String = (0..n)
            .map(|i| {
                format!(
                    "- rule: Kill {i}\n  desc: d\n  condition: evt.type = kill\n  \
                     output: kill {i}\n  priority: WARNING\n"
                )
            })
            .collect();
        let result = vigil_engine::load_rules(
            &[RulesText {
                name: "rules.yaml".into(),
                text,
            }],
            &Default::default(),
        );
        result
            .ruleset
            .unwrap_or_else(|| panic!("rules do not load: {:?}", result.diagnostics))
    }

    fn kill(num: u64) -> Event {
        Event {
            num,
            ts: num,
            tid: 1,
            pid: 1,
            etype: vigil_event::table::by_name("kill").expect("kill"),
            res: 0,
            params: Vec::new(),
            truncated: 0,
            cpu: None,
        }
    }

    /// A directory of its own for each test.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("vigil-agent-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create the scratch directory");
            Scratch(dir)
        }

        /// The configuration of a test: JSON alerts to `alerts.jsonl` only.
        fn config(&self) -> Config {
            let mut config =
                Config::from_yaml_str(vigil_config::DEFAULT_CONFIG, "<embedded config>")
                    .expect("the embedded configuration loads")
                    .config;
            for option in [
                "stdout_output.enabled=false".to_owned(),
                "syslog_output.enabled=false".to_owned(),
                "json_output=true".to_owned(),
                "file_output.enabled=true".to_owned(),
                format!("file_output.filename={}", self.alerts().display()),
            ] {
                config.apply_override(&option).expect(&option);
            }
            config
        }

        fn alerts(&self) -> PathBuf {
            self.0.join("alerts.jsonl")
        }

        /// The rules of the alerts written so far.
        fn alerted(&self) -> Vec<String> {
            std::fs::read_to_string(self.alerts())
                .unwrap_or_default()
                .lines()
                .map(|l| {
                    let v: serde_json::Value = serde_json::from_str(l).expect("a JSON alert");
                    v["rule"].as_str().expect("a rule name").to_owned()
                })
                .collect()
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn flags(stats_file: Option<(&Path, Duration)>) -> AgentFlags<'_> {
        AgentFlags {
            stats_file,
            live: false,
            signals: false,
            console: Console::Stderr,
            engine: "savefile",
            privileges: None,
            notice: record,
        }
    }

    fn engine(rules: Ruleset) -> Engine {
        Engine::new(rules, vigil_state::StateConfig::default(), "host".into())
    }

    fn no_reload() -> Result<(Config, Ruleset), ReloadError> {
        Err("no reload in this test".into())
    }

    #[test]
    fn drive_delivers_every_event_to_the_outputs_and_finish_reports() {
        let scratch = Scratch::new("drive");
        let stats = scratch.0.join("stats.jsonl");
        let mut engine = engine(rules(1));
        let mut agent = Agent::start(
            scratch.config(),
            "host",
            &flags(Some((&stats, Duration::from_secs(3600)))),
            &mut engine,
        )
        .expect("the agent starts");
        let mut source = ScriptedSource::new(Snapshot::default(), (1..=5).map(kill).collect())
            .with_batch_limit(2);
        engine.load_snapshot(&source.snapshot().unwrap());
        agent
            .drive(&mut engine, &mut source, &mut no_reload, Drive::default())
            .expect("the source plays to its end");
        assert_eq!(
            agent.metrics().get(
                vigil_output::metrics::names::ENGINE_NAME_INFO,
                &[("engine_name", "savefile"), ("evt_source", "syscall")]
            ),
            1.0
        );
        agent
            .finish(&engine, &source.stats(), true)
            .expect("the agent finishes");
        assert_eq!(scratch.alerted(), vec!["Kill 0"; 5]);
        assert_eq!(
            notices(),
            [
                "at exit: events in 5, processed 5, dropped 0",
                "output file: delivered 5, failed attempts 0, dropped 0, left in spool 0"
            ],
            "the summary asked for"
        );
        let last = std::fs::read_to_string(&stats).expect("the stats file");
        assert!(last.lines().count() >= 1, "a last stats line: {last:?}");
    }

    /// Rules on `kill` whose names are user text: a quote, a backslash, a newline, UTF-8.
    const COSTED_RULES: &str = "\
- rule: \"never \\\"quoted\\\", a=b \\\\ back\\nslash\"
  desc: d
  condition: evt.type = kill and proc.name = nothing
  output: o
  priority: WARNING
- rule: Kill é
  desc: d
  condition: evt.type = kill
  output: kill
  priority: WARNING
- rule: After the match
  desc: d
  condition: evt.type = kill
  output: after
  priority: WARNING
";

    /// Runs five kills through an agent whose configuration has `options` on top of the
    /// test configuration's; returns the `/metrics` exposition and whether the engine
    /// accounted for rule costs.
    fn costed_run(name: &str, live: bool, options: &[&str]) -> (String, bool) {
        let scratch = Scratch::new(name);
        let mut config = scratch.config();
        for option in options {
            config.apply_override(option).expect(option);
        }
        let result = vigil_engine::load_rules(
            &[RulesText {
                name: "rules.yaml".into(),
                text: COSTED_RULES.into(),
            }],
            &Default::default(),
        );
        let mut engine = engine(result.ruleset.expect("the rules load"));
        let mut agent_flags = flags(None);
        agent_flags.live = live;
        let mut agent = Agent::start(config, "host", &agent_flags, &mut engine).unwrap();
        let accounted = engine.rule_costs().is_some();
        let mut source = ScriptedSource::new(Snapshot::default(), (1..=5).map(kill).collect());
        agent
            .drive(&mut engine, &mut source, &mut no_reload, Drive::default())
            .unwrap();
        let metrics = agent.metrics().clone();
        agent.finish(&engine, &source.stats(), false).unwrap();
        (metrics.render(), accounted)
    }

    /// The first rule's name.
    const HOSTILE: &str = "never \"quoted\", a=b \\ back\nslash";

    const SERVE_METRICS: [&str; 3] = [
        "webserver.enabled=true",
        "webserver.listen_port=0",
        "webserver.prometheus_metrics_enabled=true",
    ];

    /// The samples of `metric` with one label `rule`, read from a Prometheus text exposition
    /// as the format defines it (a quoted value; `\\`, `\"` and `\n` escaped), so a rule name
    /// holding `,`, `=`, quotes or a newline comes back whole.
    fn rule_samples(text: &str, metric: &str) -> Vec<(String, f64)> {
        let prefix = format!("{metric}{{rule=\"");
        text.lines()
            .filter_map(|line| line.strip_prefix(&prefix))
            .map(|rest| {
                let mut name = String::new();
                let mut chars = rest.chars();
                loop {
                    match chars.next().expect("a closing quote") {
                        '"' => break,
                        '\\' => match chars.next().expect("an escaped character") {
                            'n' => name.push('\n'),
                            c @ ('\\' | '"') => name.push(c),
                            c => panic!("`\\{c}` is not an escape of the text format: {rest}"),
                        },
                        c => name.push(c),
                    }
                }
                let value = chars.as_str().strip_prefix("} ").expect("`} VALUE`");
                (name, value.parse().expect("a number"))
            })
            .collect()
    }

    /// `/metrics` has each enabled rule's evaluations (exact: under `rule_matching: first`
    /// the rule after the one that matches is never evaluated) and evaluation time, its name
    /// escaped as Prometheus text wants it, so a parser gets the rule's name back.
    #[test]
    fn metrics_carry_each_rules_evaluations_and_time() {
        let (text, accounted) = costed_run("rule-costs", true, &SERVE_METRICS);
        assert!(accounted, "accounting on when /metrics is served");
        let mut evaluations = rule_samples(&text, vigil_output::metrics::names::RULE_EVALUATIONS);
        evaluations.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            evaluations,
            [
                ("After the match".to_owned(), 0.0),
                ("Kill é".to_owned(), 5.0),
                (HOSTILE.to_owned(), 5.0),
            ],
            "{text}"
        );
        let seconds = rule_samples(&text, vigil_output::metrics::names::RULE_EVAL_SECONDS);
        assert_eq!(seconds.len(), 3, "{text}");
        // Timed: one event in RULE_COST_STRIDE on average (five events may have none); never
        // evaluated, never timed.
        assert!(seconds.iter().all(|(_, s)| *s >= 0.0));
        assert!(seconds.contains(&("After the match".to_owned(), 0.0)));
        assert!(
            text.contains(
                r#"vigil_rule_evaluations_total{rule="never \"quoted\", a=b \\ back\nslash"} 5"#
            ),
            "{text}"
        );
        // The whole exposition still parses.
        let lines = text.lines().map(|l| Ok(l.to_owned()));
        prometheus_parse::Scrape::parse(lines).expect("valid exposition");
    }

    /// Nothing shows the costs without `/metrics` or with Falco's `rules_counters_enabled`
    /// off: no accounting then.
    #[test]
    fn rule_costs_are_accounted_only_when_metrics_show_them() {
        let (text, accounted) = costed_run("rule-costs-replay", false, &SERVE_METRICS);
        assert!(!accounted, "not live: no web server");
        // The series exist from the start (seeded at 0) and stay there.
        let evaluations = rule_samples(&text, vigil_output::metrics::names::RULE_EVALUATIONS);
        assert_eq!(evaluations.len(), 3, "{text}");
        assert!(evaluations.iter().all(|(_, n)| *n == 0.0), "{text}");
        let mut off = SERVE_METRICS.to_vec();
        off.push("metrics.rules_counters_enabled=false");
        let (_, accounted) = costed_run("rule-costs-off", true, &off);
        assert!(!accounted, "rules_counters_enabled: false");
        let (_, accounted) = costed_run("rule-costs-no-prometheus", true, &SERVE_METRICS[..2]);
        assert!(!accounted, "prometheus_metrics_enabled: false");
    }

    #[test]
    fn drops_are_summarised_at_exit_without_being_asked() {
        let scratch = Scratch::new("drops");
        let mut engine = engine(rules(1));
        let mut agent = Agent::start(scratch.config(), "host", &flags(None), &mut engine).unwrap();
        let mut source = ScriptedSource::new(Snapshot::default(), vec![kill(1)])
            .with_drops(vec![(DropReason::BufferFull, 2)]);
        agent
            .drive(&mut engine, &mut source, &mut no_reload, Drive::default())
            .unwrap();
        agent.finish(&engine, &source.stats(), false).unwrap();
        // The drop alert is delivered too.
        assert_eq!(
            notices(),
            [
                "at exit: events in 3, processed 1, dropped 2 (buffer_full=2)",
                "output file: delivered 2, failed attempts 0, dropped 0, left in spool 0"
            ]
        );
    }

    #[test]
    fn a_stop_ends_the_drive_after_the_batch_in_hand() {
        let scratch = Scratch::new("stop");
        let mut engine = engine(rules(1));
        let mut agent = Agent::start(scratch.config(), "host", &flags(None), &mut engine).unwrap();
        let mut source = ScriptedSource::new(Snapshot::default(), (1..=5).map(kill).collect())
            .with_batch_limit(1);
        agent.signals().request_stop();
        assert!(agent.stop_flag().load(std::sync::atomic::Ordering::SeqCst));
        agent
            .drive(&mut engine, &mut source, &mut no_reload, Drive::default())
            .unwrap();
        assert_eq!(engine.stats().processed, 1);
        agent.finish(&engine, &source.stats(), false).unwrap();
        assert_eq!(scratch.alerted(), ["Kill 0"]);
    }

    /// Plays its events one per batch and, after the last one, asks the agent to stop (a
    /// signal arriving while events flow); holds `held` back for [`Drive::drain`].
    struct Holding {
        events: std::collections::VecDeque<Event>,
        held: Vec<Event>,
        stop: Arc<AtomicBool>,
    }

    impl Holding {
        fn new(agent: &Agent, events: Vec<Event>, held: Vec<Event>) -> Holding {
            Holding {
                events: events.into(),
                held,
                stop: agent.stop_flag(),
            }
        }

        fn drain(&mut self, out: &mut Vec<Event>) -> Result<(), StepError> {
            out.append(&mut self.held);
            Ok(())
        }
    }

    impl Source for Holding {
        fn snapshot(&mut self) -> Result<Snapshot, SourceError> {
            Ok(Snapshot::default())
        }
        fn next_batch(&mut self, out: &mut Vec<Event>, _max: usize) -> Result<bool, SourceError> {
            out.extend(self.events.pop_front());
            if self.events.is_empty() {
                self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
            }
            Ok(true)
        }
        fn stats(&self) -> SourceStats {
            SourceStats::default()
        }
    }

    #[test]
    fn a_drain_at_the_stop_evaluates_what_the_source_held_and_the_capture_records_all() {
        let scratch = Scratch::new("drain");
        let path = scratch.0.join("capture.jsonl");
        let mut capture = CaptureOut::create(&path).expect("create the capture");
        capture.snapshot(&Snapshot::default()).unwrap();
        let mut engine = engine(rules(1));
        let mut agent = Agent::start(scratch.config(), "host", &flags(None), &mut engine).unwrap();
        let mut source = Holding::new(&agent, (1..=3).map(kill).collect(), vec![kill(4), kill(5)]);
        let options = Drive {
            drain: Some(Holding::drain),
            capture: Some(&mut capture),
            ..Drive::default()
        };
        agent
            .drive(&mut engine, &mut source, &mut no_reload, options)
            .expect("the drive ends at the stop");
        assert_eq!(
            engine.stats().processed,
            5,
            "three batches and the drained two"
        );
        agent.finish(&engine, &source.stats(), false).unwrap();
        assert_eq!(scratch.alerted(), vec!["Kill 0"; 5]);
        capture.finish().expect("the capture ends");
        let mut replay = vigil_capture::ReplaySource::open(&path).expect("the capture reads");
        replay.snapshot().unwrap();
        let mut recorded = Vec::new();
        while replay.next_batch(&mut recorded, 100).unwrap() {}
        let nums: Vec<u64> = recorded.iter().map(|e| e.num).collect();
        assert_eq!(
            nums,
            [1, 2, 3, 4, 5],
            "every evaluated event is in the capture"
        );

        // Without a drain, the stop ends the drive after the batch in hand; `until` stops
        // it as a signal would.
        let mut engine = super::tests::engine(rules(1));
        let mut agent = Agent::start(scratch.config(), "host", &flags(None), &mut engine).unwrap();
        let mut source = Holding::new(&agent, (1..=3).map(kill).collect(), vec![kill(4)]);
        agent
            .drive(&mut engine, &mut source, &mut no_reload, Drive::default())
            .unwrap();
        assert_eq!(engine.stats().processed, 3);
        let mut source = ScriptedSource::new(Snapshot::default(), (1..=5).map(kill).collect())
            .with_batch_limit(1);
        let options = Drive {
            until: Some(Instant::now()),
            ..Drive::default()
        };
        agent
            .drive(&mut engine, &mut source, &mut no_reload, options)
            .unwrap();
        assert_eq!(
            engine.stats().processed,
            4,
            "one batch, then `until` had passed"
        );
        agent.finish(&engine, &source.stats(), false).unwrap();
    }

    #[test]
    fn the_source_is_narrowed_after_a_reload_before_the_watching_notice() {
        let scratch = Scratch::new("reapply");
        let mut engine = engine(rules(1));
        let mut agent = Agent::start(scratch.config(), "host", &flags(None), &mut engine).unwrap();
        notices();
        let mut reload =
            || -> Result<(Config, Ruleset), ReloadError> { Ok((scratch.config(), rules(2))) };
        let mut applied = Vec::new();
        let mut reapply =
            |source: &mut Holding, ruleset: &Ruleset| -> Result<Reapplied, StepError> {
                applied.push((source.events.len(), ruleset.rules().len()));
                Ok(Reapplied {
                    syscalls: 7,
                    notes: vec!["a note".into()],
                })
            };
        // A reload asked before the first batch is taken after it.
        agent.signals().request_reload();
        let mut source = Holding::new(&agent, (1..=2).map(kill).collect(), Vec::new());
        let options = Drive {
            batch: 1,
            reapply: Some(&mut reapply),
            ..Drive::default()
        };
        agent
            .drive(&mut engine, &mut source, &mut reload, options)
            .unwrap();
        assert_eq!(
            applied,
            [(1, 2)],
            "once, after the first batch, with the new rules"
        );
        assert_eq!(
            notices(),
            [
                "SIGHUP: reloaded configuration and 2 rules",
                "watching 7 syscalls after the reload",
                "a note"
            ]
        );
        // A failed reload narrows nothing; a source that cannot be narrowed ends the drive.
        agent
            .signals()
            .stop_flag()
            .store(false, std::sync::atomic::Ordering::SeqCst);
        agent.signals().request_reload();
        let mut source = Holding::new(&agent, vec![kill(3)], Vec::new());
        let mut reapply = |_: &mut Holding, _: &Ruleset| -> Result<Reapplied, StepError> {
            panic!("no reload, nothing to narrow")
        };
        let options = Drive {
            reapply: Some(&mut reapply),
            ..Drive::default()
        };
        agent
            .drive(&mut engine, &mut source, &mut no_reload, options)
            .unwrap();
        agent
            .signals()
            .stop_flag()
            .store(false, std::sync::atomic::Ordering::SeqCst);
        agent.signals().request_reload();
        let mut source = Holding::new(&agent, vec![kill(4)], Vec::new());
        let mut reapply = |_: &mut Holding, _: &Ruleset| -> Result<Reapplied, StepError> {
            Err("the map is full".into())
        };
        let options = Drive {
            reapply: Some(&mut reapply),
            ..Drive::default()
        };
        let err = agent
            .drive(&mut engine, &mut source, &mut reload, options)
            .expect_err("the source cannot be narrowed");
        assert_eq!(
            with_causes(&err),
            "cannot apply the reloaded rules' event types: the map is full"
        );
        agent
            .finish(&engine, &SourceStats::default(), false)
            .unwrap();
    }

    #[test]
    fn a_reload_replaces_the_rules_and_a_failed_one_keeps_them() {
        let scratch = Scratch::new("reload");
        let mut engine = engine(rules(1));
        let mut agent = Agent::start(scratch.config(), "host", &flags(None), &mut engine).unwrap();
        // Nothing asked: no reload.
        let mut calls = 0;
        let mut reload = || -> Result<(Config, Ruleset), ReloadError> {
            calls += 1;
            Ok((scratch.config(), rules(2)))
        };
        assert!(agent
            .housekeeping(&mut engine, &SourceStats::default, &mut reload)
            .unwrap()
            .is_none());
        agent.signals().request_reload();
        let reloaded = agent
            .housekeeping(&mut engine, &SourceStats::default, &mut reload)
            .unwrap();
        assert!(reloaded.is_some());
        assert_eq!(calls, 1);
        assert_eq!(engine.ruleset().rules().len(), 2);
        assert_eq!(notices(), ["SIGHUP: reloaded configuration and 2 rules"]);
        agent.process(&mut engine, &[kill(1)]);
        // A failed reload: the message with its causes, the two rules stay.
        let mut failing = || -> Result<(Config, Ruleset), ReloadError> {
            let cause = std::io::Error::other("rules.yaml: bad indentation");
            Err(Box::new(AgentError::StatsFile(cause)))
        };
        agent.signals().request_reload();
        assert!(agent
            .housekeeping(&mut engine, &SourceStats::default, &mut failing)
            .unwrap()
            .is_none());
        assert_eq!(
            notices(),
            [
                "SIGHUP: reload failed, keeping the running configuration: cannot create the \
              stats file: rules.yaml: bad indentation"
            ]
        );
        agent.process(&mut engine, &[kill(2)]);
        agent
            .finish(&engine, &SourceStats::default(), false)
            .unwrap();
        // The first matching rule alerts (`rule_matching: first`), through the new outputs.
        assert_eq!(scratch.alerted(), ["Kill 0", "Kill 0"]);
    }

    #[test]
    fn a_configuration_the_outputs_refuse_is_invalid_input() {
        let scratch = Scratch::new("invalid");
        let mut config = scratch.config();
        config.append_output = vec![AppendOutput {
            extra_output: Some("%no.such.field".into()),
            ..AppendOutput::default()
        }];
        let mut engine = engine(rules(1));
        let err = Agent::start(config, "host", &flags(None), &mut engine)
            .err()
            .expect("an unknown field in append_output is refused");
        assert!(err.is_invalid_input(), "{err}");
        assert!(err.to_string().contains("no.such.field"), "{err}");
        assert!(notices().is_empty());
    }

    /// A source whose snapshot comes with its first batch, as a capture still being written.
    struct LateSnapshot {
        snapshot: Option<Snapshot>,
        events: Vec<Event>,
    }

    impl Source for LateSnapshot {
        fn snapshot(&mut self) -> Result<Snapshot, SourceError> {
            Ok(Snapshot::default())
        }
        fn next_batch(&mut self, out: &mut Vec<Event>, _max: usize) -> Result<bool, SourceError> {
            out.append(&mut self.events);
            Ok(false)
        }
        fn stats(&self) -> SourceStats {
            SourceStats::default()
        }
        fn late_snapshot(&mut self) -> Option<Snapshot> {
            self.snapshot.take()
        }
    }

    #[test]
    fn a_late_snapshot_is_loaded_before_the_events_that_follow_it() {
        let scratch = Scratch::new("late");
        // The rule needs the process's name, which only the snapshot knows.
        let text = "- rule: Kill by init\n  desc: d\n  condition: evt.type = kill and \
                    proc.name = init\n  output: o\n  priority: WARNING\n";
        let ruleset = vigil_engine::load_rules(
            &[RulesText {
                name: "rules.yaml".into(),
                text: text.into(),
            }],
            &Default::default(),
        )
        .ruleset
        .expect("rules load");
        let mut engine = engine(ruleset);
        let mut agent = Agent::start(scratch.config(), "host", &flags(None), &mut engine).unwrap();
        let init = vigil_event::ThreadInfo {
            tid: 1,
            pid: 1,
            comm: b"init".to_vec(),
            ..vigil_event::ThreadInfo::default()
        };
        let mut source = LateSnapshot {
            snapshot: Some(Snapshot {
                threads: vec![init],
                ..Snapshot::default()
            }),
            events: vec![kill(1)],
        };
        engine.load_snapshot(&source.snapshot().unwrap());
        agent
            .drive(&mut engine, &mut source, &mut no_reload, Drive::default())
            .unwrap();
        agent.finish(&engine, &source.stats(), false).unwrap();
        assert_eq!(scratch.alerted(), ["Kill by init"]);
    }

    /// A source with nothing to deliver that blocks until the deadline it is given, as the
    /// eBPF source does on an idle host, for `calls` calls; it keeps the deadlines.
    struct IdleSource {
        deadlines: Vec<Instant>,
        calls: usize,
    }

    impl Source for IdleSource {
        fn snapshot(&mut self) -> Result<Snapshot, SourceError> {
            Ok(Snapshot::default())
        }
        fn next_batch(&mut self, _out: &mut Vec<Event>, _max: usize) -> Result<bool, SourceError> {
            panic!("a loop with timers passes its deadline (next_batch_until)")
        }
        fn next_batch_until(
            &mut self,
            _out: &mut Vec<Event>,
            _max: usize,
            deadline: Instant,
        ) -> Result<bool, SourceError> {
            self.deadlines.push(deadline);
            std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
            self.calls -= 1;
            Ok(self.calls > 0)
        }
        fn stats(&self) -> SourceStats {
            SourceStats::default()
        }
    }

    #[test]
    fn an_idle_drive_blocks_until_the_next_timer_and_each_job_keeps_its_schedule() {
        let scratch = Scratch::new("idle");
        let stats = scratch.0.join("stats.jsonl");
        let mut engine = engine(rules(1));
        let every = Duration::from_millis(200);
        let mut agent = Agent::start(
            scratch.config(),
            "host",
            &flags(Some((&stats, every))),
            &mut engine,
        )
        .unwrap();
        let mut source = IdleSource {
            deadlines: Vec::new(),
            calls: 6,
        };
        agent
            .drive(&mut engine, &mut source, &mut no_reload, Drive::default())
            .unwrap();
        // The metrics are due at once; then the stats file's 200 ms and the metrics' 1 s fall
        // on one grid from the start: every wait ends on a grid point, never more than the
        // metrics' second later.
        let d = &source.deadlines;
        assert_eq!(d.len(), 6);
        for pair in d.windows(2) {
            let step = pair[1] - pair[0];
            assert!(
                step > Duration::ZERO && step <= Duration::from_secs(1),
                "{step:?}"
            );
        }
        for later in &d[1..] {
            let since = (*later - d[0]).as_nanos();
            assert_eq!(since % every.as_nanos(), 0, "{since} ns: off the grid");
        }
        // Every wait after the first ended at a stats point: a line each, and the last one.
        assert_eq!(
            agent
                .metrics()
                .get(vigil_output::metrics::names::N_EVTS, &[]),
            0.0,
            "the metrics were published"
        );
        agent.finish(&engine, &source.stats(), false).unwrap();
        let lines = std::fs::read_to_string(&stats).unwrap().lines().count();
        assert_eq!(lines, 6, "5 on the timer, 1 at the end");
    }

    #[test]
    fn a_busy_drive_does_not_run_the_jobs_more_often() {
        let scratch = Scratch::new("busy");
        let stats = scratch.0.join("stats.jsonl");
        let mut engine = engine(rules(1));
        let every = Duration::from_millis(200);
        let mut agent = Agent::start(
            scratch.config(),
            "host",
            &flags(Some((&stats, every))),
            &mut engine,
        )
        .unwrap();
        // A batch (and a housekeeping call) per event.
        let mut source = ScriptedSource::new(Snapshot::default(), (1..=3000).map(kill).collect())
            .with_batch_limit(1);
        let start = Instant::now();
        agent
            .drive(&mut engine, &mut source, &mut no_reload, Drive::default())
            .unwrap();
        let periods = (start.elapsed().as_nanos() / every.as_nanos()) as usize;
        agent.finish(&engine, &source.stats(), false).unwrap();
        let lines = std::fs::read_to_string(&stats).unwrap().lines().count();
        assert!(
            lines <= periods + 2,
            "{lines} stats lines in {periods} periods of 3000 batches"
        );
        assert_eq!(engine.stats().processed, 3000);
    }
}

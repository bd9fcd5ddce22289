//! Alert delivery for the commands that evaluate events: the configured outputs (stdout, file,
//! syslog, program, HTTP) with their queues and spools, the metrics registry, the web server,
//! Falco's stats file, the drop alert, `append_output`, and the signals of a long-running
//! agent (SIGTERM/SIGINT drain and stop, SIGHUP reload, SIGUSR1 reopen), and the reload when
//! the configuration or rules files change (`watch_config_files`).
//!
//! `vigil replay` runs a capture through [`run`]; `vigil replay --follow` keeps tailing a JSON
//! lines capture as it grows (a stand-in for a live source, for tests and demos). The live
//! commands reuse the same pieces from `vigil_output` and `vigil_agent`.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use vigil_agent::filewatch::{self, ConfigWatcher, WatchSources};
use vigil_agent::{AgentServer, Appender, BoundServer, Signals, Tick, TickCounts};
use vigil_capture::{ReplaySource, Source, SourceStats};
use vigil_config::{BindFailure, Config};
use vigil_engine::{AlertDecorator, Engine};
use vigil_event::{Event, Snapshot};
use vigil_output::sinks::Console;
use vigil_output::{Formatter, Metrics, Outputs};
use vigil_ptrace::privs::Capability;
use vigil_rules::Ruleset;

use crate::InvalidInput;

/// How long outputs may take to deliver what is pending at exit (SIGTERM, end of replay) and
/// on a reload; what remains then stays in the spool (or is dropped and counted without one).
pub const SHUTDOWN_DEADLINE: Duration = Duration::from_secs(10);

/// The agent-side flags of a run.
pub struct RunFlags {
    /// Falco's `-s FILE`.
    pub stats_file: Option<PathBuf>,
    /// Falco's `--stats-interval` in milliseconds.
    pub stats_interval: Duration,
    /// Keep reading the capture as it grows, until SIGTERM/SIGINT.
    pub follow: bool,
    /// Print the run's counters to stderr at the end.
    pub print_stats: bool,
    /// With `follow`: the files whose change reloads ([`Agent::watch_files`]).
    pub watch: WatchSources,
}

/// Reloads configuration and rules (SIGHUP); errors keep the running ones.
pub type Reload<'a> = dyn FnMut() -> Result<(Config, Ruleset)> + 'a;

/// A minimal `log` backend on stderr: `VIGIL_LOG` = error, warn (default), info or debug.
struct StderrLogger;

static LOGGER: StderrLogger = StderrLogger;

impl log::Log for StderrLogger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }
    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let level = record.level().as_str().to_ascii_lowercase();
            eprintln!("vigil: {level}: {}", record.args());
        }
    }
    fn flush(&self) {}
}

/// Installs the stderr logger once.
pub fn init_logging() {
    let level = match std::env::var("VIGIL_LOG").as_deref() {
        Ok("error") => log::LevelFilter::Error,
        Ok("info") => log::LevelFilter::Info,
        Ok("debug") => log::LevelFilter::Debug,
        Ok("off") => log::LevelFilter::Off,
        _ => log::LevelFilter::Warn,
    };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}

/// The alert decorator for `append_output` (none when the list is empty).
fn decorator(config: &Config) -> Result<Option<Box<dyn AlertDecorator>>> {
    let appender = Appender::new(&config.append_output, vigil_state::catalog())
        .map_err(|e| InvalidInput(e.to_string()))?;
    Ok(appender.map(|a| Box::new(a) as Box<dyn AlertDecorator>))
}

/// Starts the outputs, skipping a syslog output whose socket does not exist (containers
/// usually have none), with a warning; `stdout_output` writes to `console`.
pub fn start_outputs(
    config: &Config,
    metrics: &Metrics,
    hostname: &str,
    console: Console,
) -> Result<Outputs> {
    let mut config = config.clone();
    if config.syslog_output.enabled && !config.syslog_output.socket.exists() {
        log::warn!(
            "syslog_output: `{}` does not exist; syslog output disabled",
            config.syslog_output.socket.display()
        );
        config.syslog_output.enabled = false;
    }
    Outputs::from_config_to(&config.output_settings(), metrics, hostname, console)
        .map_err(|e| InvalidInput(e.to_string()).into())
}

fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Where events come from: the whole capture, or a capture being appended to.
enum Feed {
    File(Box<ReplaySource>),
    Follow {
        rx: mpsc::Receiver<Msg>,
        stop: Arc<AtomicBool>,
        stats: SourceStats,
    },
}

enum Msg {
    Snapshot(Box<Snapshot>),
    Event(Box<Event>),
    End(Result<SourceStats, String>),
}

enum Step {
    More,
    Idle,
    End,
}

/// `Read` over a growing file: at its end, waits for more instead of returning 0 until
/// `stop` is set.
struct Tail {
    file: File,
    stop: Arc<AtomicBool>,
}

impl Read for Tail {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.file.read(buf)?;
            if n > 0 || buf.is_empty() || self.stop.load(Ordering::SeqCst) {
                return Ok(n);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn follow(path: &Path) -> Result<Feed> {
    let file = File::open(path).with_context(|| format!("cannot open `{}`", path.display()))?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::sync_channel(4096);
    let name = path.display().to_string();
    let tail = Tail {
        file,
        stop: Arc::clone(&stop),
    };
    std::thread::Builder::new()
        .name("vigil-follow".into())
        .spawn(move || {
            let result = (|| {
                let mut source = ReplaySource::from_reader(name, BufReader::new(tail))?;
                let snapshot = source.snapshot()?;
                if tx.send(Msg::Snapshot(Box::new(snapshot))).is_err() {
                    return Ok(source.stats());
                }
                let mut batch = Vec::with_capacity(1);
                loop {
                    batch.clear();
                    let more = source.next_batch(&mut batch, 1)?;
                    for event in batch.drain(..) {
                        if tx.send(Msg::Event(Box::new(event))).is_err() {
                            return Ok(source.stats());
                        }
                    }
                    if !more {
                        return Ok(source.stats());
                    }
                }
            })();
            let _ = tx.send(Msg::End(
                result.map_err(|e: vigil_capture::SourceError| e.to_string()),
            ));
        })
        .context("cannot start the follow thread")?;
    Ok(Feed::Follow {
        rx,
        stop,
        stats: SourceStats::default(),
    })
}

impl Feed {
    fn next(&mut self, engine: &mut Engine, batch: &mut Vec<Event>) -> Result<Step> {
        match self {
            Feed::File(source) => {
                let more = source.next_batch(batch, 1024)?;
                Ok(if more { Step::More } else { Step::End })
            }
            Feed::Follow { rx, stats, .. } => {
                let first = match rx.recv_timeout(Duration::from_millis(100)) {
                    Ok(m) => m,
                    Err(RecvTimeoutError::Timeout) => return Ok(Step::Idle),
                    Err(RecvTimeoutError::Disconnected) => return Ok(Step::End),
                };
                let mut next = Some(first);
                while let Some(msg) = next.take() {
                    match msg {
                        Msg::Snapshot(s) => engine.load_snapshot(&s),
                        Msg::Event(e) => batch.push(*e),
                        Msg::End(Ok(s)) => {
                            *stats = s;
                            return Ok(Step::End);
                        }
                        Msg::End(Err(e)) => {
                            return Err(InvalidInput(format!("cannot follow capture: {e}")).into())
                        }
                    }
                    if batch.len() < 1024 {
                        next = rx.try_recv().ok();
                    }
                }
                Ok(Step::More)
            }
        }
    }

    fn stats(&self) -> SourceStats {
        match self {
            Feed::File(source) => source.stats(),
            Feed::Follow { stats, .. } => stats.clone(),
        }
    }

    fn stop(&self) {
        if let Feed::Follow { stop, .. } = self {
            stop.store(true, Ordering::SeqCst);
        }
    }
}

fn counts(engine: &Engine, source: &SourceStats, eval: Duration) -> TickCounts {
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
        eval_seconds: eval.as_secs_f64(),
        threads: state.threads as u64,
        fds: state.fds as u64,
        containers: state.containers as u64,
        dropped_threads: state.dropped_threads,
        container_lookups: state.container_lookups.lookups,
        container_lookup_misses: state.container_lookups.misses,
        container_lookup_seconds: state.container_lookups.total_ns as f64 / 1e9,
        container_lookup_max_seconds: state.container_lookups.max_ns as f64 / 1e9,
    }
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

/// The long-running side of an evaluation, shared by `vigil replay` and `vigil watch`: the
/// configured outputs, the metrics registry and its web server, the stats file and Falco's
/// metrics snapshots, the drop alert, the signals (stop, SIGHUP reload, SIGUSR1 reopen), and
/// the reload when watched files change ([`Agent::watch_files`]).
pub struct Agent {
    metrics: Metrics,
    outputs: Outputs,
    _server: Option<AgentServer>,
    tick: Tick,
    signals: Signals,
    config: Config,
    hostname: String,
    console: Console,
    eval: Duration,
    /// Where the watched files come from ([`Agent::watch_files`]).
    watch_sources: Option<WatchSources>,
    /// Watches them while the configuration's `watch_config_files` is on.
    watcher: Option<ConfigWatcher>,
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
    /// is bound, before any thread starts ([`vigil_ptrace::privs::drop_to`]).
    pub privileges: Option<&'a [Capability]>,
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
    ) -> Result<Agent> {
        init_logging();
        let metrics = Metrics::new();
        metrics.set(
            vigil_output::metrics::names::ENGINE_NAME_INFO,
            &[("engine_name", flags.engine), ("evt_source", "syscall")],
            1.0,
        );
        engine.set_decorator(decorator(&config)?);
        let tick = Tick::new(&metrics, flags.stats_file)
            .context("cannot create the stats file")?
            .with_snapshots(&config.metrics)
            .context("cannot open metrics.output_file")?;
        let bound = if flags.live && config.webserver.enabled {
            bind_webserver(&config, &metrics)?
        } else {
            None
        };
        let signals = if flags.signals {
            Signals::install().context("cannot install signal handlers")?
        } else {
            Signals::detached()
        };
        if let Some(keep) = flags.privileges {
            let dropped = vigil_ptrace::privs::drop_to(keep).context("cannot drop privileges")?;
            log::info!(
                "privileges dropped: kept capabilities {}; no_new_privs set",
                dropped.describe()
            );
        }
        let outputs = start_outputs(&config, &metrics, hostname, flags.console)?;
        tick.seed(&outputs, engine.ruleset());
        let server = match bound {
            Some(bound) => {
                let server = bound.serve().context("cannot start the webserver")?;
                eprintln!(
                    "vigil: webserver listening on {}://{}",
                    server.scheme(),
                    server.addr()
                );
                Some(server)
            }
            None => None,
        };
        Ok(Agent {
            metrics,
            outputs,
            _server: server,
            tick,
            signals,
            config,
            hostname: hostname.to_string(),
            console: flags.console,
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
            return;
        }
        match self.watcher.as_mut() {
            Some(watcher) => watcher.replace(set),
            None => self.watcher = Some(ConfigWatcher::new(set, filewatch::QUIET)),
        }
        if let Some(watcher) = &self.watcher {
            for dir in watcher.missing() {
                eprintln!(
                    "vigil: warning: watch_config_files: cannot read `{}`; changes there \
                     are not seen until a reload",
                    dir.display()
                );
            }
            log::info!(
                "watch_config_files: watching {} directories for changes",
                watcher.set().dirs().count()
            );
        }
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
    /// ([`Agent::watch_files`]) reloads configuration and rules through `reload` (returning
    /// the new configuration; errors keep the running one), and
    /// the stats file and metrics snapshots are written when due (`source` gives the source's
    /// counters; it is only asked then, since reading them may cost a system call).
    pub fn housekeeping(
        &mut self,
        engine: &mut Engine,
        source: &dyn Fn() -> SourceStats,
        reload: &mut Reload<'_>,
    ) -> Result<Option<Config>> {
        if self.signals.take_reopen() {
            eprintln!("vigil: SIGUSR1: reopening outputs");
            self.outputs.reopen();
        }
        let mut reloaded = None;
        let changed = self
            .watcher
            .as_mut()
            .is_some_and(|w| w.poll(Instant::now()));
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
                        Outputs::with_sinks(Formatter::default(), Vec::new(), &self.metrics)?,
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
                            eprintln!(
                                "vigil: reload: outputs failed ({e:#}); keeping the previous outputs"
                            );
                            start_outputs(
                                &self.config,
                                &self.metrics,
                                &self.hostname,
                                self.console,
                            )?
                        }
                    };
                    self.metrics.set_flags(self.config.metrics.flags());
                    self.tick.seed(&self.outputs, engine.ruleset());
                    eprintln!(
                        "vigil: {cause}: reloaded configuration and {} rules",
                        engine.ruleset().rules().len()
                    );
                }
                Err(e) => eprintln!(
                    "vigil: {cause}: reload failed, keeping the running configuration: {e:#}"
                ),
            }
            // The configuration may name other rules files, or turn watching off; a
            // failed reload keeps watching the same set (the fix comes as another change).
            self.rewatch();
        }
        if self.tick.due() {
            let c = counts(engine, &source(), self.eval);
            self.tick
                .run(&c, &mut self.outputs, now_ns())
                .context("cannot write the stats file")?;
        }
        Ok(reloaded)
    }

    /// Writes the last stats line, reports the drops not yet reported and drains the
    /// outputs (within [`SHUTDOWN_DEADLINE`]); prints the summary of events and alerts lost
    /// when something was lost or `summary` is set.
    pub fn finish(mut self, engine: &Engine, source: &SourceStats, summary: bool) -> Result<()> {
        let c = counts(engine, source, self.eval);
        let finished = self.tick.finish(&c, &mut self.outputs, now_ns());
        let report = self.outputs.shutdown(Instant::now() + SHUTDOWN_DEADLINE);
        finished.context("cannot write the stats file")?;
        if c.dropped_total() > 0 || report.dropped_total() > 0 || summary {
            eprintln!("vigil: at exit: {}", events_summary(&c));
            for line in report.summary() {
                eprintln!("vigil: output {line}");
            }
        }
        Ok(())
    }
}

/// Binds the configured web server (serving starts later, [`BoundServer::serve`]). A bad
/// certificate stops the start; so does an address that cannot be bound, unless
/// `webserver.bind_failure` is `continue`.
fn bind_webserver(config: &Config, metrics: &Metrics) -> Result<Option<BoundServer>> {
    let webserver = &config.webserver;
    match AgentServer::bind(webserver, metrics, config.metrics.libbpf_stats_enabled) {
        Ok(bound) => Ok(Some(bound)),
        // A bad certificate is a configuration error: serving the endpoints without the TLS
        // the user asked for (or not at all, silently) is worse than stopping.
        Err(e) if e.is_config() => Err(e.into()),
        // Health checks and scrapes that find nothing (or another process) would report a
        // healthy agent as down, or a different one as this one: stop unless told otherwise.
        Err(e) => match webserver.bind_failure {
            BindFailure::Exit => Err(anyhow::anyhow!(
                "{e} (set `webserver.bind_failure: continue` to run without /healthz and \
                 /metrics, or `webserver.enabled: false`)"
            )),
            BindFailure::Continue => {
                eprintln!(
                    "vigil: warning: webserver not started: {e}; running without /healthz and \
                     /metrics (webserver.bind_failure: continue)"
                );
                Ok(None)
            }
        },
    }
}

/// Evaluates the capture at `path` and delivers alerts through the configured outputs.
pub fn run(
    path: &Path,
    config: Config,
    ruleset: Ruleset,
    engine_for: &dyn Fn(Ruleset) -> Engine,
    flags: &RunFlags,
    reload: &mut Reload<'_>,
) -> Result<ExitCode> {
    let mut engine = engine_for(ruleset);
    let hostname = vigil_state::procfs::host_name();
    let stats_file = flags
        .stats_file
        .as_deref()
        .map(|p| (p, flags.stats_interval));
    let mut agent = Agent::start(
        config,
        &hostname,
        &AgentFlags {
            stats_file,
            live: flags.follow,
            signals: flags.follow,
            console: Console::Stdout,
            engine: "savefile",
            // Not a live capture: a replay runs as it was started.
            privileges: None,
        },
        &mut engine,
    )?;
    if flags.follow {
        agent.watch_files(flags.watch.clone());
    }
    let mut feed = if flags.follow {
        follow(path)?
    } else {
        let mut source = ReplaySource::open(path)
            .with_context(|| format!("cannot replay `{}`", path.display()))?;
        let snapshot = source.snapshot()?;
        engine.load_snapshot(&snapshot);
        Feed::File(Box::new(source))
    };
    let mut batch = Vec::with_capacity(1024);
    let result = (|| -> Result<()> {
        loop {
            batch.clear();
            let step = feed
                .next(&mut engine, &mut batch)
                .with_context(|| format!("cannot replay `{}`", path.display()))?;
            agent.process(&mut engine, &batch);
            agent.housekeeping(&mut engine, &|| feed.stats(), reload)?;
            if agent.stop_requested() {
                feed.stop();
                break;
            }
            if matches!(step, Step::End) {
                break;
            }
        }
        Ok(())
    })();
    feed.stop();
    let source_stats = feed.stats();
    let c = counts(&engine, &source_stats, Duration::ZERO);
    // Alerts produced before an error are still delivered.
    let finished = agent.finish(&engine, &source_stats, flags.follow);
    result?;
    finished?;
    if flags.print_stats {
        let stats = engine.stats();
        eprintln!(
            "events_in={} processed={} dropped={} alerts={}",
            c.events_in,
            stats.processed,
            c.dropped_total(),
            stats.alerts
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// Reloads rules and configuration into `engine`; returns the new configuration.
fn reload_all(reload: &mut Reload<'_>, engine: &mut Engine) -> Result<Config> {
    let (config, ruleset) = reload()?;
    let decorator = decorator(&config)?;
    engine.set_ruleset(ruleset);
    engine.set_decorator(decorator);
    Ok(config)
}

//! The long-running parts of the agent shared by every live command (`vigil watch`, `vigil
//! run`, `vigil replay --follow`), assembled by [`Agent`] (start, privilege drop,
//! housekeeping, reload, finish): the embedded web server (`/metrics`, `/healthz`, over HTTPS
//! with `webserver.ssl_enabled`), signal handling (SIGTERM/SIGINT stop, SIGHUP reload, SIGUSR1
//! reopen), Falco's `append_output` as an engine [`vigil_engine::AlertDecorator`], the
//! rules and configuration files watched for changes (`watch_config_files`, [`filewatch`]), the
//! statistics of the agent's own BPF programs (`metrics.libbpf_stats_enabled`, from procfs),
//! and the periodic agent tick that feeds the metrics registry, the stats file and the drop
//! alert from the engine's counters, on the agent's timers ([`timers`]: each job at its own
//! period, on one grid, so that a loop blocking in its source wakes only for them).
//!
//! The commands' assemblies live here too: [`watch`] (the eBPF driver through
//! [`Agent::drive`]), [`run`] (the ptrace driver's `Handler`, enforcement, learning, reloads
//! under the seccomp filter in force), [`host`] (the state engine's configuration for this
//! host) and [`CaptureOut`] (`-w`). Knows no flags: the command line maps them onto
//! [`AgentFlags`], [`run::RunOptions`], [`watch::WatchOptions`] and [`Drive`], and calls in.
//!
//! # The parts
//!
//! The long-running parts every live command shares: `AgentServer` (std::net HTTP server for
//! `/healthz`, `/versions` — `Versions`, Falco's version object, also what `--version` and
//! `--support` print — and `/metrics`, loopback by default; HTTPS only with
//! `webserver.ssl_enabled`, rustls with the certificate and key of Falco's one-file
//! `ssl_certificate`; a bad certificate stops the agent with exit code 1; `AgentServer::bind` takes the socket before the agent drops its
//! privileges, `BoundServer::serve` starts the serving thread after), `bpf` (Falco's
//! `metrics.libbpf_stats_enabled`: run count and run time of each BPF program the process holds,
//! from `/proc/self/fdinfo`, into `/metrics` at each scrape and into the metrics snapshot; the
//! kernel counts only with `kernel.bpf_stats_enabled=1`), `Signals` (SIGTERM/SIGINT, SIGHUP,
//! SIGUSR1 as flags the event loop reads between batches, and a write to a blocked source's
//! `Waker`), `filewatch` (Falco's `watch_config_files`: a `WatchSet`
//! of directories and entry names — every watched path through its parent directory, so a rename
//! over it, `mv` or delete-and-recreate is seen, a rules directory also for its `*.yaml`/`*.yml`
//! entries, a symlink also at its target — a `ConfigWatcher` the agent's timer checks (every
//! 250 ms it `stat`s the watched names and compares identity, size and times with the last look; no
//! thread, and no inotify, whose marks would make the host's file I/O on that filesystem pay
//! fsnotify checks) and a `Debounce` that makes a burst of writes one reload after 200 ms of
//! quiet), `Appender` (Falco's `append_output` as an engine `AlertDecorator`: extra output text,
//! `extra_fields` such as `proc.env`) and `Tick` (engine and source counters → metrics, the stats
//! file, the drop alert and Falco's `metrics` snapshot alert/file, when their timers are due
//! (`Timers`: metrics every second, the stats file and snapshot at their intervals); it maps Vigil's
//! drop reasons onto Falco's drop series and seeds the zero-valued series — every drop kind at
//! `Tick::new`, a match counter per enabled rule and the hostname at `Tick::seed`, called at start
//! and after a reload).
#![forbid(unsafe_code)]

pub mod append;
pub mod bpf;
pub mod capture_out;
pub mod filewatch;
pub mod host;
pub mod live;
pub mod run;
pub mod server;
pub mod signals;
pub mod tick;
pub mod timers;
pub mod versions;
pub mod watch;

pub use append::{AppendError, Appender};
pub use capture_out::{CaptureOut, CaptureOutError};
pub use filewatch::{ConfigWatcher, WatchSet, WatchSources};
pub use host::{live_state_config, system_state_config};
pub use live::{
    Agent, AgentError, AgentFlags, Drive, Reapplied, Reload, ReloadError, StepError,
    SHUTDOWN_DEADLINE,
};
pub use server::{AgentServer, BoundServer, ServerError};
pub use signals::{SignalWake, Signals};
pub use tick::{Tick, TickCounts};
pub use timers::{Job, Timers};
pub use versions::Versions;

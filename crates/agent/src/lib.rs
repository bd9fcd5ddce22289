//! The long-running agent every live command shares (`vigil watch`, `vigil run`, `vigil replay
//! --follow`), and those commands' assemblies.
//!
//! [`Agent`] is start, privilege drop, evaluation ([`Agent::process`]), housekeeping, reload and
//! finish; [`Agent::drive`] is the one event loop of `watch` and `replay` (`run`'s loop is the
//! ptrace tracer's, which needs a verdict per stop: its [`run`] pipeline calls the same
//! `process` and `housekeeping`). Around it: the web server ([`server`]: `/metrics`,
//! `/healthz`, `/versions`), signals ([`signals`]), `watch_config_files` ([`filewatch`]),
//! Falco's `append_output` ([`append`]), the BPF programs' own statistics ([`bpf`]) and the
//! periodic jobs ([`tick`] on [`timers`]). The assemblies: [`watch`] (the eBPF driver),
//! [`run`] (the ptrace driver, enforcement, learning), [`host`] (the state engine's
//! configuration for this host), [`CaptureOut`] (`-w`).
//!
//! Invariants: knows no flags (the command line maps them onto [`AgentFlags`],
//! [`run::RunOptions`], [`watch::WatchOptions`] and [`Drive`]); the drivers do not know the
//! agent; privileges are dropped before the first thread starts (`vigil-privs`); periodic work
//! runs on timers, never on the loop's clock, so an idle agent sleeps in its source.
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

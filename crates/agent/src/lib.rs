//! The long-running parts of the agent shared by every live command (`vigil watch`, `vigil
//! run`, `vigil replay --follow`), assembled by [`Agent`] (start, privilege drop,
//! housekeeping, reload, finish): the embedded web server (`/metrics`, `/healthz`, over HTTPS
//! with `webserver.ssl_enabled`), signal handling (SIGTERM/SIGINT stop, SIGHUP reload, SIGUSR1
//! reopen), Falco's `append_output` as an engine [`vigil_engine::AlertDecorator`], the
//! rules and configuration files watched for changes (`watch_config_files`, [`filewatch`]), the
//! statistics of the agent's own BPF programs (`metrics.libbpf_stats_enabled`, from procfs),
//! and the periodic agent tick that feeds the metrics registry, the stats file and the drop
//! alert from the engine's counters.
//!
//! Knows nothing about drivers or flags: the command that runs the event loop calls in.
#![forbid(unsafe_code)]

pub mod append;
pub mod bpf;
pub mod filewatch;
pub mod live;
pub mod server;
pub mod signals;
pub mod tick;

pub use append::{AppendError, Appender};
pub use filewatch::{ConfigWatcher, WatchSet, WatchSources};
pub use live::{Agent, AgentError, AgentFlags, Reload, ReloadError, SHUTDOWN_DEADLINE};
pub use server::{AgentServer, BoundServer, ServerError};
pub use signals::Signals;
pub use tick::{Tick, TickCounts};

//! What every live command (`watch`, `run`, `replay --follow`) shares on the command line's
//! side: the stderr logger, the stderr line for the agent's notices, the agent's start-up
//! flags, this host's name.

use vigil_agent::AgentFlags;
use vigil_output::sinks::Console;

use crate::flags::StatsFileArgs;

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

/// The agent's notices ([`vigil_agent::AgentFlags::notice`]): one stderr line each.
pub fn notice(line: &str) {
    eprintln!("vigil: {line}");
}

/// The agent's start-up flags of `vigil watch` and `vigil replay`: the statistics file of the
/// command line, alerts to stdout, notices to stderr, privileges kept; a `live` command (a
/// watch, a replay that follows its capture) starts the web server and installs the signal
/// handlers. `engine`: the capture engine, as Falco's metrics name it.
pub fn agent_flags<'a>(
    stats_file: &'a StatsFileArgs,
    engine: &'static str,
    live: bool,
) -> AgentFlags<'a> {
    AgentFlags {
        stats_file: stats_file.for_agent(),
        live,
        signals: live,
        console: Console::Stdout,
        engine,
        privileges: None,
        notice,
    }
}

pub use vigil_state::procfs::host_name;

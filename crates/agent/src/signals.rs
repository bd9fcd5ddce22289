//! Signals as flags the main loop polls between batches: SIGTERM/SIGINT (stop, drain outputs
//! within a deadline), SIGHUP (reload rules and configuration), SIGUSR1 (reopen output files).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};

/// Flags set by the signal handlers.
#[derive(Clone, Debug, Default)]
pub struct Signals {
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    reopen: Arc<AtomicBool>,
}

impl Signals {
    /// Installs the handlers (process-wide; call once).
    pub fn install() -> io::Result<Signals> {
        let s = Signals::default();
        signal_hook::flag::register(SIGTERM, Arc::clone(&s.stop))?;
        signal_hook::flag::register(SIGINT, Arc::clone(&s.stop))?;
        signal_hook::flag::register(SIGHUP, Arc::clone(&s.reload))?;
        signal_hook::flag::register(SIGUSR1, Arc::clone(&s.reopen))?;
        Ok(s)
    }

    /// Flags without handlers (tests; commands that never run long).
    pub fn detached() -> Signals {
        Signals::default()
    }

    /// SIGTERM or SIGINT arrived (stays set).
    pub fn stop_requested(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }

    /// Consumes a pending SIGHUP.
    pub fn take_reload(&self) -> bool {
        self.reload.swap(false, Ordering::SeqCst)
    }

    /// Consumes a pending SIGUSR1.
    pub fn take_reopen(&self) -> bool {
        self.reopen.swap(false, Ordering::SeqCst)
    }

    /// The stop flag itself, shared with whoever waits and should stop waiting.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Sets the flags by hand (tests, or a command-driven stop).
    pub fn request_stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }
    pub fn request_reload(&self) {
        self.reload.store(true, Ordering::SeqCst);
    }
    pub fn request_reopen(&self) {
        self.reopen.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_signals_set_flags() {
        let s = Signals::install().unwrap();
        assert!(!s.take_reload() && !s.take_reopen() && !s.stop_requested());
        signal_hook::low_level::raise(SIGHUP).unwrap();
        assert!(s.take_reload());
        assert!(!s.take_reload(), "consumed");
        signal_hook::low_level::raise(SIGUSR1).unwrap();
        assert!(s.take_reopen());
        let d = Signals::detached();
        d.request_stop();
        assert!(d.stop_requested());
    }
}

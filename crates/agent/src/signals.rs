//! Signals as flags the main loop polls between batches: SIGTERM/SIGINT (stop, drain outputs
//! within a deadline), SIGHUP (reload rules and configuration), SIGUSR1 (reopen output files).
//! A loop that blocks in its source ([`vigil_capture::Source::next_batch_until`]) has the
//! handlers also wake the source ([`Signals::wake_on_signal`]), so that it sees a flag at once.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
use signal_hook::SigId;
use vigil_capture::Waker;

/// The signals that set a flag.
const FLAGGED: [i32; 4] = [SIGTERM, SIGINT, SIGHUP, SIGUSR1];

/// Flags set by the signal handlers.
#[derive(Clone, Debug, Default)]
pub struct Signals {
    stop: Arc<AtomicBool>,
    reload: Arc<AtomicBool>,
    reopen: Arc<AtomicBool>,
    /// The handlers are installed ([`Signals::install`]).
    installed: bool,
}

/// While kept, the signal handlers also wake a source ([`Signals::wake_on_signal`]).
#[derive(Debug, Default)]
#[must_use = "the handlers stop waking the source when this is dropped"]
pub struct SignalWake {
    ids: Vec<SigId>,
}

impl Drop for SignalWake {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}

impl Signals {
    /// Installs the handlers (process-wide; call once).
    pub fn install() -> io::Result<Signals> {
        let s = Signals {
            installed: true,
            ..Signals::default()
        };
        signal_hook::flag::register(SIGTERM, Arc::clone(&s.stop))?;
        signal_hook::flag::register(SIGINT, Arc::clone(&s.stop))?;
        signal_hook::flag::register(SIGHUP, Arc::clone(&s.reload))?;
        signal_hook::flag::register(SIGUSR1, Arc::clone(&s.reopen))?;
        Ok(s)
    }

    /// Makes each signal that sets a flag also wake `waker` (one byte to its socket, which a
    /// signal handler may write), until the returned guard is dropped. signal-hook runs a
    /// signal's actions in the order they were registered, so the flag is set before the
    /// source wakes and the loop sees it. Nothing for detached flags (no handlers).
    pub fn wake_on_signal(&self, waker: &Waker) -> io::Result<SignalWake> {
        let mut wake = SignalWake::default();
        if !self.installed {
            return Ok(wake);
        }
        for signal in FLAGGED {
            let id = signal_hook::low_level::pipe::register(signal, waker.try_clone_stream()?)?;
            wake.ids.push(id);
        }
        Ok(wake)
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

        // A signal also wakes a waiting source, after its flag is set. (In this test: the
        // handlers are process-wide, and another test raising one would disturb the first
        // assertions above.)
        let (waker, receiver) = Waker::pair().unwrap();
        let wake = s.wake_on_signal(&waker).unwrap();
        signal_hook::low_level::raise(SIGUSR1).unwrap();
        assert!(receiver.clear(), "woken");
        assert!(s.take_reopen(), "and the flag is set");
        drop(wake);
        signal_hook::low_level::raise(SIGUSR1).unwrap();
        assert!(!receiver.clear(), "no longer once the guard is dropped");
        assert!(s.take_reopen());
        // Without handlers, nothing to register.
        let detached = Signals::detached().wake_on_signal(&waker).unwrap();
        assert!(detached.ids.is_empty());
    }
}

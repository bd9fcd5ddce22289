//! Waking the tracer when the workload is idle, without a stop: a helper thread watches the
//! tracer's stop counter and, after a whole interval without a stop, interrupts the tracer's
//! `waitpid` with a signal ([`sys::wakeup_signal`]); the tracer then calls
//! [`crate::Handler::idle`]. While stops keep coming the thread sends nothing: the handler's
//! periodic work runs at those stops already.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::sys;

/// The helper thread; [`IdleWaker::stop`] ends it.
pub(crate) struct IdleWaker {
    stopping: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl IdleWaker {
    /// Starts waking the calling thread (the tracer) after each `interval` in which
    /// `activity` (incremented by the tracer at every stop) did not change.
    pub(crate) fn start(interval: Duration, activity: Arc<AtomicU64>) -> std::io::Result<Self> {
        sys::install_wakeup()?;
        let tracer = sys::gettid();
        let stopping = Arc::new((Mutex::new(false), Condvar::new()));
        let shared = Arc::clone(&stopping);
        let thread = std::thread::Builder::new()
            .name("vigil-idle".into())
            .spawn(move || {
                let (lock, cvar) = &*shared;
                let mut seen = activity.load(Ordering::Relaxed);
                let mut stop = lock.lock().unwrap_or_else(|e| e.into_inner());
                loop {
                    stop = cvar
                        .wait_timeout(stop, interval)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                    if *stop {
                        return;
                    }
                    let now = activity.load(Ordering::Relaxed);
                    if now == seen {
                        let _ = sys::wake(tracer);
                    }
                    seen = now;
                }
            })?;
        Ok(IdleWaker {
            stopping,
            thread: Some(thread),
        })
    }

    /// Ends the helper thread (at once) and waits for it: no wake-up signal comes after.
    pub(crate) fn stop(mut self) {
        let (lock, cvar) = &*self.stopping;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cvar.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

//! [`Waker`]: ends a wait of [`crate::Source::next_batch_until`] early, from another thread or
//! from a signal handler.
//!
//! A connected pair of Unix stream sockets: the waker writes a byte, the source keeps the
//! other end in the set it blocks on (an epoll set with its ring buffers) and empties it
//! before it returns. A byte written while nobody waits stays until the next wait, which then
//! returns at once: a wakeup is never lost. A socket rather than an eventfd because a signal
//! handler's write of one byte (signal-hook's `pipe::register`) suits it.

use std::io::{self, Read, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// Wakes the source it came from ([`crate::Source::waker`]). Cheap to clone; every clone
/// writes to the same socket.
#[derive(Clone, Debug)]
pub struct Waker {
    stream: Arc<UnixStream>,
}

/// The end a waiting source watches: readable once some [`Waker`] woke it.
#[derive(Debug)]
pub struct WakeReceiver {
    stream: UnixStream,
}

impl Waker {
    /// A waker and the receiving end a source waits on. Both ends are non-blocking.
    pub fn pair() -> io::Result<(Waker, WakeReceiver)> {
        let (tx, rx) = UnixStream::pair()?;
        tx.set_nonblocking(true)?;
        rx.set_nonblocking(true)?;
        Ok((
            Waker {
                stream: Arc::new(tx),
            },
            WakeReceiver { stream: rx },
        ))
    }

    /// Ends the source's current or next wait. Never blocks: a full socket already holds
    /// an unread wakeup.
    pub fn wake(&self) {
        let _ = (&*self.stream).write(&[1]);
    }

    /// Another descriptor of the sending end, for a signal handler to write to
    /// (`signal_hook::low_level::pipe::register` takes one it may close).
    pub fn try_clone_stream(&self) -> io::Result<UnixStream> {
        self.stream.try_clone()
    }
}

impl WakeReceiver {
    /// Reads every pending wakeup; true if there was any.
    pub fn clear(&self) -> bool {
        let mut buf = [0u8; 64];
        let mut woken = false;
        loop {
            match (&self.stream).read(&mut buf) {
                Ok(0) => return woken,
                Ok(_) => woken = true,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return woken,
            }
        }
    }
}

impl AsFd for WakeReceiver {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.stream.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wake_is_kept_until_cleared_and_never_blocks() {
        let (waker, receiver) = Waker::pair().expect("a socket pair");
        assert!(!receiver.clear(), "nothing yet");
        waker.wake();
        waker.clone().wake();
        assert!(receiver.clear(), "woken (twice, read as one)");
        assert!(!receiver.clear(), "cleared");
        // A full socket (a few hundred one-byte writes fill one): wake() returns at once, and
        // the receiver sees a wakeup.
        for _ in 0..10_000 {
            waker.wake();
        }
        assert!(receiver.clear());
        let clone = waker.try_clone_stream().expect("dup");
        (&clone).write_all(&[7]).expect("a handler's byte");
        assert!(receiver.clear(), "through the cloned descriptor");
    }
}

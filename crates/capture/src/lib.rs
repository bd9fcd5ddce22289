//! Event sources: the one [`Source`] interface every driver implements (eBPF, ptrace, replay),
//! the [`ReplaySource`] that plays a capture file, the [`FollowSource`] that reads one as it
//! grows, the [`ScriptedSource`] tests use, and the
//! [`InterestSet`] of event types that drivers push down to the kernel side.
//!
//! This crate knows events and snapshots (`vigil-event`) and nothing after them: no state, no
//! rules, no outputs. Kernel mechanisms live in the driver crates that implement [`Source`].

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use vigil_event::{Event, Snapshot};

mod follow;
mod interest;
mod replay;
mod scripted;
mod wake;

pub use follow::FollowSource;
pub use interest::{ArgIn, InterestSet};
pub use replay::ReplaySource;
pub use scripted::ScriptedSource;
pub use wake::{WakeReceiver, Waker};

/// A stream of events with the process-table snapshot they start from.
///
/// Usage: call [`Source::snapshot`] once, then [`Source::next_batch`] until it returns
/// `Ok(false)`. Every event the source produced is either delivered or counted in
/// [`Source::stats`] as dropped, by reason.
pub trait Source {
    /// Process-table snapshot taken when the source started (replay: the capture's).
    fn snapshot(&mut self) -> Result<Snapshot, SourceError>;

    /// Appends the next batch of events (at most `max`) to `out`. `Ok(true)`: more may follow;
    /// `Ok(false)`: end of stream (`out` may still have received a last batch).
    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, SourceError>;

    /// [`Source::next_batch`] for a caller with work of its own due at `deadline` (its next
    /// timer): a source that blocks until events come returns by then, with an empty batch if
    /// none came, or earlier when its [`Source::waker`] is woken. The default is
    /// [`Source::next_batch`] (sources that wait briefly or not at all).
    fn next_batch_until(
        &mut self,
        out: &mut Vec<Event>,
        max: usize,
        deadline: Instant,
    ) -> Result<bool, SourceError> {
        let _ = deadline;
        self.next_batch(out, max)
    }

    /// A handle that ends a wait in [`Source::next_batch_until`] early (a stop signal, from
    /// a handler or another thread); `None` for sources that never wait long.
    fn waker(&self) -> Option<Waker> {
        None
    }

    /// Counters: events delivered, events lost before delivery by reason.
    fn stats(&self) -> SourceStats;

    /// The snapshot, when it became known only after [`Source::snapshot`] was answered (a
    /// capture still being written: its snapshot ends where its first event starts), to load
    /// before the events of the batch [`Source::next_batch`] just returned. Sources that know
    /// theirs at the start return `None`.
    fn late_snapshot(&mut self) -> Option<Snapshot> {
        None
    }

    /// Narrows the stream to the event types in `interest`, where the source can filter at its
    /// origin (a BPF map, a seccomp filter). Sources that cannot, keep delivering everything:
    /// the interest set is a cost optimisation, never a filter consumers may rely on.
    fn set_interest(&mut self, interest: &InterestSet) -> Result<(), SourceError> {
        let _ = interest;
        Ok(())
    }
}

/// Why an event was lost before it reached [`Source::next_batch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DropReason {
    /// The kernel-side buffer was full (Falco's `n_drops_buffer`).
    BufferFull,
    /// An argument could not be read from the process's memory (Falco's `n_drops_pf`).
    ReadFault,
    /// A record from the driver could not be decoded.
    Malformed,
    /// The source's own queue toward the consumer overflowed.
    QueueFull,
}

impl DropReason {
    /// Every reason, in a stable order (for metrics).
    pub const ALL: [DropReason; 4] = [
        DropReason::BufferFull,
        DropReason::ReadFault,
        DropReason::Malformed,
        DropReason::QueueFull,
    ];

    /// The metric label: `buffer_full`, `read_fault`, `malformed`, `queue_full`.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::BufferFull => "buffer_full",
            DropReason::ReadFault => "read_fault",
            DropReason::Malformed => "malformed",
            DropReason::QueueFull => "queue_full",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A source's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// Events delivered through [`Source::next_batch`].
    pub events_in: u64,
    /// Events lost before delivery, per reason (reasons with no drops may be absent).
    pub dropped: Vec<(DropReason, u64)>,
    /// Failed calls the source filtered out by design because nothing could use them (the
    /// eBPF driver's kernel-side filter): neither delivered nor lost, so outside
    /// `events_in` and `dropped`.
    pub filtered_failed: u64,
    /// State-only records the source's kernel side folded into a later one that leaves user
    /// space's tables the same (the eBPF driver's held close/dup: `bpf/README.md`): neither
    /// delivered nor lost, so outside `events_in` and `dropped`.
    pub folded_state: u64,
    /// Records the source's kernel side committed for user space (the eBPF driver's ring
    /// buffers; `None` for a source without one). Counted where they are written, not where
    /// they are read, so `events_in + malformed drops + records not yet consumed` equals it and
    /// a record lost on the way without being counted shows as a difference.
    pub kernel_records: Option<u64>,
}

impl SourceStats {
    /// All drops, whatever the reason.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }

    /// Counts `n` more drops for `reason`.
    pub fn add_dropped(&mut self, reason: DropReason, n: u64) {
        match self.dropped.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, count)) => *count += n,
            None => self.dropped.push((reason, n)),
        }
    }
}

/// Why a source cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("cannot open capture `{}`", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot read capture `{name}`")]
    Capture {
        /// The file's path, or the name given to [`ReplaySource::from_reader`].
        name: String,
        #[source]
        source: vigil_event::codec::CaptureError,
    },
    /// A driver failure; `driver` names it (`ebpf`, `ptrace`, `scripted` …).
    #[error("the {driver} source failed")]
    Driver {
        driver: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl SourceError {
    /// A driver failure from a message.
    pub fn driver(driver: &'static str, message: impl Into<String>) -> SourceError {
        SourceError::Driver {
            driver,
            source: message.into().into(),
        }
    }

    /// The path a capture error is about, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            SourceError::Open { path, .. } => Some(path),
            SourceError::Capture { name, .. } => Some(Path::new(name)),
            SourceError::Driver { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_accumulate_drops_by_reason() {
        let mut stats = SourceStats::default();
        stats.add_dropped(DropReason::BufferFull, 3);
        stats.add_dropped(DropReason::Malformed, 1);
        stats.add_dropped(DropReason::BufferFull, 2);
        assert_eq!(
            stats.dropped,
            vec![(DropReason::BufferFull, 5), (DropReason::Malformed, 1)]
        );
        assert_eq!(stats.dropped_total(), 6);
    }

    #[test]
    fn drop_reasons_have_distinct_labels() {
        let mut labels: Vec<String> = DropReason::ALL.iter().map(|r| r.to_string()).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), DropReason::ALL.len());
        assert_eq!(DropReason::BufferFull.to_string(), "buffer_full");
    }

    #[test]
    fn errors_keep_their_cause() {
        use std::error::Error as _;
        let err = SourceError::driver("ptrace", "tracee vanished");
        assert_eq!(err.to_string(), "the ptrace source failed");
        assert_eq!(err.source().unwrap().to_string(), "tracee vanished");
        assert!(err.path().is_none());
    }

    #[test]
    fn source_is_object_safe() {
        let mut scripted = ScriptedSource::new(Snapshot::default(), Vec::new());
        let source: &mut dyn Source = &mut scripted;
        assert!(source.set_interest(&InterestSet::all()).is_ok());
        assert_eq!(source.snapshot().unwrap(), Snapshot::default());
    }
}

//! A source that plays a fixed list of events: for tests of everything downstream.

use vigil_event::{Event, Snapshot};

use crate::{DropReason, Source, SourceError, SourceStats};

/// Plays `events` after `snapshot`, in batches of at most `max` (and at most
/// [`ScriptedSource::with_batch_limit`]), reports scripted drops, and can end with an error.
pub struct ScriptedSource {
    snapshot: Snapshot,
    events: std::vec::IntoIter<Event>,
    batch_limit: usize,
    stats: SourceStats,
    /// Counted into `stats` once every event is delivered.
    drops: Vec<(DropReason, u64)>,
    error: Option<String>,
    done: bool,
}

impl ScriptedSource {
    pub fn new(snapshot: Snapshot, events: Vec<Event>) -> ScriptedSource {
        ScriptedSource {
            snapshot,
            events: events.into_iter(),
            batch_limit: usize::MAX,
            stats: SourceStats::default(),
            drops: Vec::new(),
            error: None,
            done: false,
        }
    }

    /// Delivers at most `limit` events per batch (at least one), to exercise batch boundaries.
    pub fn with_batch_limit(mut self, limit: usize) -> ScriptedSource {
        self.batch_limit = limit.max(1);
        self
    }

    /// Reports these drops in [`Source::stats`] once every event has been delivered.
    pub fn with_drops(mut self, drops: Vec<(DropReason, u64)>) -> ScriptedSource {
        self.drops = drops;
        self
    }

    /// Fails with a `scripted` driver error after the last event instead of ending cleanly.
    pub fn with_error_at_end(mut self, message: impl Into<String>) -> ScriptedSource {
        self.error = Some(message.into());
        self
    }
}

impl Source for ScriptedSource {
    fn snapshot(&mut self) -> Result<Snapshot, SourceError> {
        Ok(self.snapshot.clone())
    }

    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, SourceError> {
        if self.done {
            return Ok(false);
        }
        let n = max.min(self.batch_limit);
        let before = out.len();
        out.extend(self.events.by_ref().take(n));
        let delivered = out.len() - before;
        self.stats.events_in += delivered as u64;
        if self.events.len() > 0 {
            return Ok(true);
        }
        if self.error.is_some() {
            // Hand out this last batch first: a caller drops the batch of a failing call.
            if delivered > 0 {
                return Ok(true);
            }
            self.done = true;
            let message = self.error.take().unwrap_or_default();
            return Err(SourceError::driver("scripted", message));
        }
        self.done = true;
        for (reason, count) in std::mem::take(&mut self.drops) {
            self.stats.add_dropped(reason, count);
        }
        Ok(false)
    }

    fn stats(&self) -> SourceStats {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_event::table;

    fn events(n: u64) -> Vec<Event> {
        let close = table::by_name("close").unwrap();
        (1..=n)
            .map(|num| Event {
                num,
                ts: num * 1000,
                tid: 1,
                pid: 1,
                etype: close,
                res: 0,
                params: Vec::new(),
                truncated: 0,
                cpu: None,
            })
            .collect()
    }

    fn drain(source: &mut dyn Source, max: usize) -> (Vec<usize>, Result<(), SourceError>) {
        let mut sizes = Vec::new();
        let mut batch = Vec::new();
        loop {
            batch.clear();
            match source.next_batch(&mut batch, max) {
                Ok(more) => {
                    sizes.push(batch.len());
                    if !more {
                        return (sizes, Ok(()));
                    }
                }
                Err(e) => return (sizes, Err(e)),
            }
        }
    }

    #[test]
    fn delivers_in_batches_then_ends() {
        let mut source = ScriptedSource::new(Snapshot::default(), events(10));
        let (sizes, result) = drain(&mut source, 4);
        assert!(result.is_ok());
        assert_eq!(sizes.iter().sum::<usize>(), 10);
        assert!(sizes.iter().all(|&s| s <= 4), "{sizes:?}");
        assert_eq!(source.stats().events_in, 10);
        let mut batch = Vec::new();
        assert!(!source.next_batch(&mut batch, 4).unwrap(), "stays at end");
        assert!(batch.is_empty());
    }

    #[test]
    fn batch_limit_and_drops() {
        let mut source = ScriptedSource::new(Snapshot::default(), events(5))
            .with_batch_limit(2)
            .with_drops(vec![(DropReason::BufferFull, 7)]);
        let (sizes, result) = drain(&mut source, 1024);
        assert!(result.is_ok());
        assert_eq!(sizes, vec![2, 2, 1]);
        let stats = source.stats();
        assert_eq!(stats.events_in, 5);
        assert_eq!(stats.dropped, vec![(DropReason::BufferFull, 7)]);
    }

    #[test]
    fn empty_source_ends_at_once() {
        let mut source = ScriptedSource::new(Snapshot::default(), Vec::new());
        let (sizes, result) = drain(&mut source, 8);
        assert!(result.is_ok());
        assert_eq!(sizes, vec![0]);
    }

    #[test]
    fn error_at_end_follows_every_event() {
        let mut source =
            ScriptedSource::new(Snapshot::default(), events(4)).with_error_at_end("lost it");
        let (sizes, result) = drain(&mut source, 2);
        assert_eq!(sizes.iter().sum::<usize>(), 4);
        let err = result.err().unwrap();
        assert_eq!(err.to_string(), "the scripted source failed");
        let mut batch = Vec::new();
        assert!(!source.next_batch(&mut batch, 2).unwrap());
    }
}

//! [`FollowSource`]: a capture file that is still being written, read as it grows until told
//! to stop — a stand-in for a live source (`vigil replay --follow`, for tests and demos).

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::Duration;

use vigil_event::{Event, Snapshot};

use crate::{ReplaySource, Source, SourceError, SourceStats};

/// How long [`Source::next_batch`] waits for an event before it returns an empty batch, so
/// that the caller's housekeeping runs while the file does not grow.
const IDLE_WAIT: Duration = Duration::from_millis(100);
/// How often the reader looks for more at the end of the file.
const POLL: Duration = Duration::from_millis(20);
/// Events read ahead of the consumer.
const QUEUE: usize = 4096;

enum Msg {
    Snapshot(Box<Snapshot>),
    Event(Box<Event>),
    End(Result<SourceStats, SourceError>),
}

/// A capture read on a thread as it grows: at the end of the file the reader waits for more
/// instead of ending, until the `stop` flag given to [`FollowSource::open`] is set; then what
/// was written is delivered and the stream ends.
///
/// [`Source::snapshot`] does not wait: the capture's snapshot when it is already read, else an
/// empty one and the capture's later from [`Source::late_snapshot`] (the snapshot is complete
/// only once the first event is written). [`Source::next_batch`] returns an empty batch with
/// `Ok(true)` after a short wait without events, so that the caller's housekeeping runs.
pub struct FollowSource {
    name: String,
    rx: Receiver<Msg>,
    stop: Arc<AtomicBool>,
    /// Events read before [`Source::snapshot`] was asked for.
    early: Vec<Event>,
    /// The capture's snapshot, read before [`Source::snapshot`] was asked for.
    snapshot: Option<Snapshot>,
    /// [`Source::snapshot`] was answered (without the capture's snapshot if `snapshot` was
    /// empty then).
    snapshot_given: bool,
    /// The capture's snapshot, read after [`Source::snapshot`] was answered.
    late: Option<Snapshot>,
    stats: SourceStats,
    ended: bool,
}

/// `Read` over a growing file: at its end, waits for more instead of returning 0 until
/// `stop` is set.
struct Tail {
    file: File,
    stop: Arc<AtomicBool>,
}

impl Read for Tail {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let n = self.file.read(buf)?;
            if n > 0 || buf.is_empty() || self.stop.load(Ordering::SeqCst) {
                return Ok(n);
            }
            std::thread::sleep(POLL);
        }
    }
}

impl FollowSource {
    /// Opens `path` (either capture form) and starts its reader thread; setting `stop` ends
    /// the stream once what is written has been read.
    pub fn open(
        path: impl AsRef<Path>,
        stop: Arc<AtomicBool>,
    ) -> Result<FollowSource, SourceError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| SourceError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        let name = path.display().to_string();
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let tail = Tail {
            file,
            stop: Arc::clone(&stop),
        };
        let reader_name = name.clone();
        std::thread::Builder::new()
            .name("vigil-follow".into())
            .spawn(move || {
                let result = (|| {
                    let mut source = ReplaySource::from_reader(reader_name, BufReader::new(tail))?;
                    let snapshot = source.snapshot()?;
                    if tx.send(Msg::Snapshot(Box::new(snapshot))).is_err() {
                        return Ok(source.stats());
                    }
                    let mut batch = Vec::with_capacity(1);
                    loop {
                        batch.clear();
                        let more = source.next_batch(&mut batch, 1)?;
                        for event in batch.drain(..) {
                            if tx.send(Msg::Event(Box::new(event))).is_err() {
                                return Ok(source.stats());
                            }
                        }
                        if !more {
                            return Ok(source.stats());
                        }
                    }
                })();
                let _ = tx.send(Msg::End(result));
            })
            .map_err(|e| SourceError::driver("follow", format!("cannot start its thread: {e}")))?;
        Ok(FollowSource {
            name,
            rx,
            stop,
            early: Vec::new(),
            snapshot: None,
            snapshot_given: false,
            late: None,
            stats: SourceStats::default(),
            ended: false,
        })
    }

    /// The capture's path, as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Ends the stream once what is written has been read (as setting the `stop` flag does).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// Takes one message into the source's state; `Err` ends the stream with the reader's
    /// error.
    fn take(&mut self, msg: Msg, out: &mut Vec<Event>) -> Result<(), SourceError> {
        match msg {
            Msg::Snapshot(s) if self.snapshot_given => self.late = Some(*s),
            Msg::Snapshot(s) => self.snapshot = Some(*s),
            Msg::Event(e) => out.push(*e),
            Msg::End(end) => {
                self.ended = true;
                self.stats = end?;
            }
        }
        Ok(())
    }
}

impl Source for FollowSource {
    fn snapshot(&mut self) -> Result<Snapshot, SourceError> {
        // What the reader has already sent, without waiting.
        while self.snapshot.is_none() && !self.ended {
            let Ok(msg) = self.rx.try_recv() else {
                break;
            };
            let mut early = std::mem::take(&mut self.early);
            let taken = self.take(msg, &mut early);
            self.early = early;
            taken?;
        }
        self.snapshot_given = true;
        Ok(self.snapshot.take().unwrap_or_default())
    }

    fn late_snapshot(&mut self) -> Option<Snapshot> {
        self.late.take()
    }

    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, SourceError> {
        out.append(&mut self.early);
        if self.ended {
            return Ok(false);
        }
        let first = match self.rx.recv_timeout(IDLE_WAIT) {
            Ok(msg) => msg,
            Err(RecvTimeoutError::Timeout) => return Ok(true),
            Err(RecvTimeoutError::Disconnected) => {
                self.ended = true;
                return Ok(false);
            }
        };
        let mut next = Some(first);
        while let Some(msg) = next.take() {
            self.take(msg, out)?;
            if self.ended {
                return Ok(false);
            }
            if out.len() < max {
                next = self.rx.try_recv().ok();
            }
        }
        Ok(true)
    }

    fn stats(&self) -> SourceStats {
        self.stats.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Instant;
    use vigil_event::codec::jsonl;

    fn snapshot() -> Snapshot {
        Snapshot {
            start_ts: 7,
            ..Snapshot::default()
        }
    }

    fn capture_text(events: &[Event]) -> Vec<u8> {
        let mut w = jsonl::Writer::new(Vec::new());
        w.write_snapshot(&snapshot()).unwrap();
        for e in events {
            w.write_event(e).unwrap();
        }
        w.finish().unwrap()
    }

    fn event(num: u64) -> Event {
        Event {
            num,
            ts: num,
            tid: 1,
            pid: 1,
            etype: vigil_event::EventType(0),
            res: 0,
            params: Vec::new(),
            truncated: 0,
            cpu: None,
        }
    }

    /// Reads batches until `want` events arrived (or a few seconds passed).
    fn read(source: &mut FollowSource, want: usize) -> Vec<u64> {
        let mut got = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while got.len() < want && Instant::now() < deadline {
            let mut batch = Vec::new();
            assert!(source.next_batch(&mut batch, 16).unwrap(), "ended early");
            got.extend(batch.iter().map(|e| e.num));
        }
        got
    }

    #[test]
    fn events_appended_later_are_delivered_until_stopped() {
        let dir = std::env::temp_dir().join(format!("vigil-follow-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("capture.jsonl");
        let text = capture_text(&[event(1), event(2), event(3)]);
        // The snapshot line and one event first; the rest is appended while following.
        let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
        let (head, tail) = lines.split_at(lines.len() - 2);
        std::fs::write(&path, head.concat()).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut source = FollowSource::open(&path, Arc::clone(&stop)).unwrap();
        assert_eq!(source.name(), path.display().to_string());
        // The snapshot now (already read) or with the first batch.
        let first = source.snapshot().unwrap();
        assert_eq!(read(&mut source, 1), [1]);
        let late = source.late_snapshot();
        assert!(
            (first == snapshot() && late.is_none()) || late == Some(snapshot()),
            "{first:?} {late:?}"
        );
        // Nothing new: an empty batch, not the end.
        let mut batch = Vec::new();
        assert!(source.next_batch(&mut batch, 16).unwrap() && batch.is_empty());
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        file.write_all(&tail.concat()).unwrap();
        assert_eq!(read(&mut source, 2), [2, 3]);
        source.stop();
        let deadline = Instant::now() + Duration::from_secs(10);
        while source.next_batch(&mut batch, 16).unwrap() {
            assert!(
                Instant::now() < deadline,
                "the stream does not end after stop"
            );
        }
        assert_eq!(source.stats().events_in, 3);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_capture_without_a_snapshot_gives_an_empty_one_and_ends_when_stopped() {
        let dir = std::env::temp_dir().join(format!("vigil-follow-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("capture.jsonl");
        std::fs::write(&path, b"").unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut source = FollowSource::open(&path, Arc::clone(&stop)).unwrap();
        stop.store(true, Ordering::SeqCst);
        assert_eq!(source.snapshot().unwrap(), Snapshot::default());
        let mut batch = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Ok(true) = source.next_batch(&mut batch, 16) {
            assert!(
                Instant::now() < deadline,
                "the stream does not end after stop"
            );
        }
        assert!(batch.is_empty());
        assert!(FollowSource::open(dir.join("missing"), stop).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}

//! Replays a capture file (binary or JSON lines) as a [`Source`].

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use vigil_event::codec::{open_any, CaptureError, EventReader};
use vigil_event::{Event, Snapshot};

use crate::{Source, SourceError, SourceStats};

/// Reads ahead this much of a capture file at a time.
const READ_BUFFER: usize = 256 * 1024;

/// A capture file played back: its snapshot, then its events in file order.
pub struct ReplaySource {
    name: String,
    reader: Box<dyn EventReader>,
    stats: SourceStats,
    /// An error met while filling a batch, reported by the next call so that the events read
    /// before it are delivered first.
    pending_error: Option<CaptureError>,
    done: bool,
}

impl ReplaySource {
    /// Opens the capture at `path`, of either encoding, and reads its snapshot.
    pub fn open(path: impl AsRef<Path>) -> Result<ReplaySource, SourceError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| SourceError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        ReplaySource::from_reader(
            path.display().to_string(),
            BufReader::with_capacity(READ_BUFFER, file),
        )
    }

    /// Replays a capture from any reader (standard input, memory); `name` appears in errors.
    pub fn from_reader<R: BufRead + 'static>(
        name: impl Into<String>,
        input: R,
    ) -> Result<ReplaySource, SourceError> {
        let name = name.into();
        let reader = open_any(input).map_err(|source| SourceError::Capture {
            name: name.clone(),
            source,
        })?;
        Ok(ReplaySource {
            name,
            reader,
            stats: SourceStats::default(),
            pending_error: None,
            done: false,
        })
    }

    /// The file's path or the name it was given.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Source for ReplaySource {
    fn snapshot(&mut self) -> Result<Snapshot, SourceError> {
        Ok(self.reader.snapshot().clone())
    }

    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, SourceError> {
        if let Some(source) = self.pending_error.take() {
            self.done = true;
            return Err(SourceError::Capture {
                name: self.name.clone(),
                source,
            });
        }
        if self.done {
            return Ok(false);
        }
        for _ in 0..max {
            match self.reader.next_event() {
                Ok(Some(event)) => {
                    out.push(event);
                    self.stats.events_in += 1;
                }
                Ok(None) => {
                    self.done = true;
                    return Ok(false);
                }
                Err(source) => {
                    self.pending_error = Some(source);
                    return Ok(true);
                }
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
    use std::error::Error as _;
    use std::io::Cursor;
    use std::path::PathBuf;

    use vigil_event::codec::Capture;
    use vigil_event::{table, Param, ThreadInfo};

    use super::*;

    fn capture(n: u64) -> Capture {
        let openat = table::by_name("openat").unwrap();
        Capture {
            snapshot: Snapshot {
                hostname: b"replay-test".to_vec(),
                start_ts: 1_000_000,
                threads: vec![ThreadInfo {
                    tid: 42,
                    pid: 42,
                    comm: b"sh".to_vec(),
                    ..ThreadInfo::default()
                }],
                ..Snapshot::default()
            },
            events: (1..=n)
                .map(|num| Event {
                    num,
                    ts: 1_000_000 + num * 1000,
                    tid: 42,
                    pid: 42,
                    etype: openat,
                    res: 3,
                    params: vec![
                        Param::Int(-100),
                        Param::Bytes(format!("/tmp/{num}").into_bytes()),
                        Param::Uint(0o101),
                    ],
                    truncated: 0,
                    cpu: None,
                })
                .collect(),
        }
    }

    /// A file in the temporary directory, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str, contents: &[u8]) -> TempFile {
            let path =
                std::env::temp_dir().join(format!("vigil-capture-{}-{name}", std::process::id()));
            std::fs::write(&path, contents).unwrap();
            TempFile(path)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn drain(source: &mut dyn Source, max: usize) -> (Vec<Event>, Result<(), SourceError>) {
        let mut all = Vec::new();
        loop {
            let mut batch = Vec::new();
            let result = source.next_batch(&mut batch, max);
            assert!(batch.len() <= max, "batch of {} over {max}", batch.len());
            all.extend(batch);
            match result {
                Ok(true) => {}
                Ok(false) => return (all, Ok(())),
                Err(e) => return (all, Err(e)),
            }
        }
    }

    #[test]
    fn replays_both_encodings_from_files() {
        let capture = capture(25);
        let binary = TempFile::new("a.vcap", &capture.write_binary(Vec::new()).unwrap());
        let jsonl = TempFile::new("a.jsonl", &capture.write_jsonl(Vec::new()).unwrap());
        for file in [&binary, &jsonl] {
            let mut source = ReplaySource::open(&file.0).unwrap();
            assert_eq!(source.name(), file.0.display().to_string());
            assert_eq!(source.snapshot().unwrap(), capture.snapshot);
            let (events, result) = drain(&mut source, 7);
            assert!(result.is_ok());
            assert_eq!(events, capture.events);
            assert_eq!(source.stats().events_in, 25);
            assert_eq!(source.stats().dropped_total(), 0);
            let mut batch = Vec::new();
            assert!(!source.next_batch(&mut batch, 7).unwrap(), "stays at end");
        }
    }

    #[test]
    fn missing_file_names_the_path() {
        let err = ReplaySource::open("/nonexistent/vigil.vcap").err().unwrap();
        assert_eq!(
            err.to_string(),
            "cannot open capture `/nonexistent/vigil.vcap`"
        );
        assert!(err.source().is_some());
        assert_eq!(err.path(), Some(Path::new("/nonexistent/vigil.vcap")));
    }

    #[test]
    fn not_a_capture_is_an_error_at_open() {
        let err = ReplaySource::from_reader("junk", Cursor::new(b"\x7fELF".to_vec()))
            .err()
            .unwrap();
        assert_eq!(err.to_string(), "cannot read capture `junk`");
        let cause = err.source().unwrap().to_string();
        assert!(
            cause.starts_with("not a capture file at offset 0"),
            "{cause}"
        );
    }

    #[test]
    fn events_before_corruption_are_delivered_then_the_error() {
        let capture = capture(10);
        let mut bytes = capture.write_binary(Vec::new()).unwrap();
        bytes.truncate(bytes.len() - 3);
        let mut source = ReplaySource::from_reader("cut", Cursor::new(bytes)).unwrap();
        let (events, result) = drain(&mut source, 1024);
        assert_eq!(events, capture.events[..9]);
        let err = result.err().unwrap();
        let cause = err.source().unwrap().to_string();
        assert!(
            cause.starts_with("truncated event record at offset"),
            "{cause}"
        );
        let mut batch = Vec::new();
        assert!(
            !source.next_batch(&mut batch, 8).unwrap(),
            "ends after the error"
        );
    }

    #[test]
    fn zero_max_reads_nothing() {
        let capture = capture(2);
        let bytes = capture.write_jsonl(Vec::new()).unwrap();
        let mut source = ReplaySource::from_reader("mem", Cursor::new(bytes)).unwrap();
        let mut batch = Vec::new();
        assert!(source.next_batch(&mut batch, 0).unwrap());
        assert!(batch.is_empty());
        let (events, result) = drain(&mut source, 1);
        assert!(result.is_ok());
        assert_eq!(events.len(), 2);
    }
}

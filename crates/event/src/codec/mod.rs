//! Capture-file codecs: a process-table [`Snapshot`] followed by [`Event`]s, in a compact
//! binary form ([`binary`]) or as JSON lines ([`jsonl`]). `docs/capture-format.md` is the
//! specification; this module implements exactly that.
//!
//! Capture files are untrusted input: readers never panic, never allocate more than the input
//! actually holds (lengths are bounded by what has been read and by [`MAX_RECORD_LEN`] /
//! [`MAX_LINE_LEN`]), and report every problem with the byte offset (binary) or line and column
//! (JSON lines) where it was found. After an error a reader is at end of stream.
//!
//! Readers return events *normalized*: `params` ends at the last parameter that is present
//! (trailing [`Param::None`]s are dropped), so `read(write(e)) == normalized(e)`.

use std::fmt;
use std::io::BufRead;

use crate::{Event, Param, ParamKind, Snapshot};

pub mod binary;
pub mod jsonl;
mod text;

#[cfg(test)]
mod testutil;

/// The largest binary record a reader accepts (a snapshot with thousands of threads fits well).
pub const MAX_RECORD_LEN: u64 = 256 << 20;
/// The longest JSON line a reader accepts.
pub const MAX_LINE_LEN: u64 = 64 << 20;

/// Where in a capture something happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Position {
    /// A byte offset from the start of a binary capture.
    Offset(u64),
    /// A 1-based line and column (in bytes) of a JSON lines capture.
    Line { line: u64, column: u64 },
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Position::Offset(offset) => write!(f, "offset {offset}"),
            Position::Line { line, column } => write!(f, "line {line}:{column}"),
        }
    }
}

/// Everything that can go wrong reading or writing a capture.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("failed to {action} capture at {at}")]
    Io {
        /// `read` or `write`.
        action: &'static str,
        at: Position,
        #[source]
        source: std::io::Error,
    },
    #[error("not a capture file at {at}: {reason}")]
    NotACapture { at: Position, reason: String },
    #[error("unsupported capture version {version} at {at} (this build reads version 1)")]
    UnsupportedVersion { at: Position, version: u64 },
    #[error("truncated {what} at {at}: expected {expected} bytes, found {found}")]
    Truncated {
        /// The structure that was cut short (`event record`, `file header` …).
        what: &'static str,
        at: Position,
        expected: u64,
        found: u64,
    },
    #[error("corrupt {what} at {at}: {message}")]
    Corrupt {
        what: &'static str,
        at: Position,
        message: String,
    },
    #[error("invalid JSON at {at}: {message}")]
    Json { at: Position, message: String },
    #[error("invalid {what} at {at}: {message}")]
    Invalid {
        /// `header`, `thread`, `event` …
        what: &'static str,
        at: Position,
        message: String,
    },
    #[error("unknown event type `{name}` at {at}")]
    UnknownEventType { at: Position, name: String },
    #[error("unknown parameter `{param}` of event type `{event_type}` at {at}")]
    UnknownParam {
        at: Position,
        event_type: String,
        param: String,
    },
    /// A writer was handed something the format cannot hold (an event that does not match its
    /// schema, an event before the snapshot …).
    #[error("cannot write {what} at {at}: {message}")]
    Unencodable {
        what: &'static str,
        at: Position,
        message: String,
    },
}

impl CaptureError {
    /// Where the problem is.
    pub fn position(&self) -> Position {
        match self {
            CaptureError::Io { at, .. }
            | CaptureError::NotACapture { at, .. }
            | CaptureError::UnsupportedVersion { at, .. }
            | CaptureError::Truncated { at, .. }
            | CaptureError::Corrupt { at, .. }
            | CaptureError::Json { at, .. }
            | CaptureError::Invalid { at, .. }
            | CaptureError::UnknownEventType { at, .. }
            | CaptureError::UnknownParam { at, .. }
            | CaptureError::Unencodable { at, .. } => *at,
        }
    }
}

/// A capture reader of either encoding.
pub trait EventReader {
    /// The process-table snapshot recorded before the first event.
    fn snapshot(&self) -> &Snapshot;
    /// The next event, or `None` at the end of the capture (and after any error).
    fn next_event(&mut self) -> Result<Option<Event>, CaptureError>;
}

/// What each encoding's reader decodes; [`EventReader`] ends the stream for both, at its end
/// and at its first error.
trait Decode {
    fn snapshot(&self) -> &Snapshot;
    /// The next event, or `None` at the end; not called again once it returned anything else.
    fn decode_event(&mut self) -> Result<Option<Event>, CaptureError>;
    /// Whether the stream has ended.
    fn ended(&mut self) -> &mut bool;
}

impl<D: Decode> EventReader for D {
    fn snapshot(&self) -> &Snapshot {
        Decode::snapshot(self)
    }

    fn next_event(&mut self) -> Result<Option<Event>, CaptureError> {
        if *self.ended() {
            return Ok(None);
        }
        let result = self.decode_event();
        *self.ended() = !matches!(result, Ok(Some(_)));
        result
    }
}

/// Opens a capture of either encoding, telling them apart by the first byte: the binary magic
/// `VIGILCAP`, or a JSON lines file (`{`, `#` or white space).
pub fn open_any<'a, R: BufRead + 'a>(
    mut input: R,
) -> Result<Box<dyn EventReader + 'a>, CaptureError> {
    let first = loop {
        match input.fill_buf() {
            Ok(buf) => break buf.first().copied(),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => {
                return Err(CaptureError::Io {
                    action: "read",
                    at: Position::Offset(0),
                    source,
                })
            }
        }
    };
    match first {
        Some(b'V') => Ok(Box::new(binary::Reader::new(input)?)),
        Some(b'{' | b'#' | b' ' | b'\t' | b'\r' | b'\n') => {
            Ok(Box::new(jsonl::Reader::new(input)?))
        }
        Some(other) => Err(CaptureError::NotACapture {
            at: Position::Offset(0),
            reason: format!(
                "starts with byte {other:#04x}, expected the `VIGILCAP` magic or a JSON header line"
            ),
        }),
        None => Err(CaptureError::NotACapture {
            at: Position::Offset(0),
            reason: "the input is empty".to_string(),
        }),
    }
}

/// A whole capture in memory (tests, small tools).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Capture {
    pub snapshot: Snapshot,
    pub events: Vec<Event>,
}

impl Capture {
    /// Reads a whole capture of either encoding.
    pub fn read<R: BufRead>(input: R) -> Result<Capture, CaptureError> {
        let mut reader = open_any(input)?;
        let mut events = Vec::new();
        while let Some(event) = reader.next_event()? {
            events.push(event);
        }
        Ok(Capture {
            snapshot: reader.snapshot().clone(),
            events,
        })
    }

    /// Writes the capture as JSON lines.
    pub fn write_jsonl<W: std::io::Write>(&self, out: W) -> Result<W, CaptureError> {
        let mut writer = jsonl::Writer::new(out);
        writer.write_snapshot(&self.snapshot)?;
        for event in &self.events {
            writer.write_event(event)?;
        }
        writer.finish()
    }

    /// Writes the capture in the binary encoding.
    pub fn write_binary<W: std::io::Write>(&self, out: W) -> Result<W, CaptureError> {
        let mut writer = binary::Writer::new(out);
        writer.write_snapshot(&self.snapshot)?;
        for event in &self.events {
            writer.write_event(event)?;
        }
        writer.finish()
    }
}

/// `event` as a reader returns it: without trailing [`Param::None`]s.
pub fn normalized(event: &Event) -> Event {
    let mut event = event.clone();
    normalize_params(&mut event.params);
    event
}

fn normalize_params(params: &mut Vec<Param>) {
    while params.last() == Some(&Param::None) {
        params.pop();
    }
}

/// How a parameter kind is represented, which is also how both encodings store it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Repr {
    Int,
    Uint,
    Bytes,
    List,
    Addr,
    Tuple,
}

fn repr(kind: ParamKind) -> Repr {
    match kind {
        ParamKind::Fd | ParamKind::Int | ParamKind::Pid => Repr::Int,
        ParamKind::Uint
        | ParamKind::Uid
        | ParamKind::Gid
        | ParamKind::Flags(_)
        | ParamKind::AbsTime => Repr::Uint,
        ParamKind::Path | ParamKind::Str | ParamKind::Buf => Repr::Bytes,
        ParamKind::StrList => Repr::List,
        ParamKind::SockAddr => Repr::Addr,
        ParamKind::SockTuple => Repr::Tuple,
    }
}

fn param_repr(param: &Param) -> Option<Repr> {
    match param {
        Param::None => None,
        Param::Int(_) => Some(Repr::Int),
        Param::Uint(_) => Some(Repr::Uint),
        Param::Bytes(_) => Some(Repr::Bytes),
        Param::List(_) => Some(Repr::List),
        Param::Addr(_) => Some(Repr::Addr),
        Param::Tuple(_) => Some(Repr::Tuple),
    }
}

/// Checks that `event` can be written: no more parameters than its schema, each of the
/// representation its kind calls for, truncation bits only for schema positions.
fn check_encodable(event: &Event) -> Result<(), String> {
    let spec = event.etype.spec();
    if event.params.len() > spec.params.len() {
        return Err(format!(
            "event {} of type `{}` has {} parameters, its schema has {}",
            event.num,
            spec.name,
            event.params.len(),
            spec.params.len()
        ));
    }
    for (param, ps) in event.params.iter().zip(spec.params) {
        if let Some(r) = param_repr(param) {
            if r != repr(ps.kind) {
                return Err(format!(
                    "parameter `{}` of event {} (`{}`) is {r:?} but its kind {:?} needs {:?}",
                    ps.name,
                    event.num,
                    spec.name,
                    ps.kind,
                    repr(ps.kind)
                ));
            }
        }
    }
    let n = spec.params.len();
    if n < 64 && event.truncated >> n != 0 {
        return Err(format!(
            "event {} (`{}`) marks parameter positions beyond its schema as truncated ({:#x})",
            event.num, spec.name, event.truncated
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::testutil::Gen;
    use super::*;

    #[test]
    fn open_any_sniffs_both_encodings() {
        let mut gen = Gen::new(7);
        let capture = gen.capture(20);
        let expected = Capture {
            snapshot: capture.snapshot.clone(),
            events: capture.events.iter().map(normalized).collect(),
        };
        let bin = capture.write_binary(Vec::new()).unwrap();
        let text = capture.write_jsonl(Vec::new()).unwrap();
        assert_eq!(Capture::read(&bin[..]).unwrap(), expected, "binary");
        assert_eq!(Capture::read(&text[..]).unwrap(), expected, "jsonl");
        let commented = [b"# a comment\n\n".as_slice(), &text].concat();
        assert_eq!(
            Capture::read(&commented[..]).unwrap(),
            expected,
            "jsonl with comment"
        );
    }

    #[test]
    fn open_any_rejects_other_input() {
        let err = open_any(&b""[..]).err().unwrap();
        assert!(err.to_string().contains("empty"), "{err}");
        let err = open_any(&b"\x7fELF"[..]).err().unwrap();
        assert_eq!(
            err.to_string(),
            "not a capture file at offset 0: starts with byte 0x7f, expected the `VIGILCAP` magic or a JSON header line"
        );
        let err = open_any(&b"VIGILCAX\x01\x00"[..]).err().unwrap();
        assert!(err.to_string().contains("magic"), "{err}");
    }

    #[test]
    fn generated_events_cover_every_kind_and_flag_table() {
        let mut gen = Gen::new(1);
        let capture = gen.capture(3000);
        let mut kinds = Vec::new();
        let mut truncated = false;
        for event in &capture.events {
            truncated |= event.truncated != 0;
            for (param, spec) in event.params.iter().zip(event.etype.spec().params) {
                if *param != Param::None && !kinds.contains(&spec.kind) {
                    kinds.push(spec.kind);
                }
            }
        }
        assert!(truncated);
        // 13 plain kinds plus Flags once per table.
        assert_eq!(
            kinds.len(),
            13 + crate::flags::ALL_TABLES.len(),
            "{kinds:?}"
        );
        // And all of it survives both encodings.
        let expected: Vec<Event> = capture.events.iter().map(normalized).collect();
        for bytes in [
            capture.write_binary(Vec::new()).unwrap(),
            capture.write_jsonl(Vec::new()).unwrap(),
        ] {
            let back = Capture::read(&bytes[..]).unwrap();
            assert_eq!(back.events, expected);
            assert_eq!(back.snapshot, capture.snapshot);
        }
    }

    #[test]
    fn mutated_captures_never_panic_and_what_reads_re_encodes() {
        let mut gen = Gen::new(11);
        let capture = gen.capture(8);
        let inputs = [
            capture.write_binary(Vec::new()).unwrap(),
            capture.write_jsonl(Vec::new()).unwrap(),
        ];
        for input in &inputs {
            for _ in 0..3000 {
                let mut bytes = input.clone();
                for _ in 0..gen.below(4) + 1 {
                    let i = gen.below(bytes.len() as u64) as usize;
                    match gen.below(3) {
                        0 => bytes[i] = gen.next() as u8,
                        1 => {
                            bytes.remove(i);
                        }
                        _ => {
                            let alphabet = b"{}[]\":,0-9\\\n\xff";
                            bytes.insert(i, alphabet[gen.below(alphabet.len() as u64) as usize]);
                        }
                    }
                }
                // Errors are expected; panics and hangs are the failures. What reads must
                // re-encode in both encodings and read back the same (the fuzz target's check).
                if let Ok(capture) = Capture::read(&bytes[..]) {
                    let binary = capture.write_binary(Vec::new()).unwrap();
                    assert_eq!(Capture::read(&binary[..]).unwrap(), capture);
                    let jsonl = capture.write_jsonl(Vec::new()).unwrap();
                    assert_eq!(Capture::read(&jsonl[..]).unwrap(), capture);
                }
            }
        }
    }

    #[test]
    fn writers_reject_events_that_do_not_match_their_schema() {
        let openat = crate::table::by_name("openat").unwrap();
        let mut event = Event {
            num: 1,
            ts: 1,
            tid: 1,
            pid: 1,
            etype: openat,
            res: 3,
            params: vec![Param::Bytes(b"oops".to_vec())],
            truncated: 0,
            cpu: None,
        };
        let snapshot = Snapshot::default();
        for binary in [false, true] {
            let capture = Capture {
                snapshot: snapshot.clone(),
                events: vec![event.clone()],
            };
            let err = if binary {
                capture.write_binary(Vec::new()).err().unwrap()
            } else {
                capture.write_jsonl(Vec::new()).err().unwrap()
            };
            assert!(err.to_string().contains("parameter `dirfd`"), "{err}");
        }
        event.params = vec![Param::Int(-100)];
        event.truncated = 1 << 40;
        let err = check_encodable(&event).err().unwrap();
        assert!(err.contains("beyond its schema"), "{err}");
        event.truncated = 0;
        event.params = vec![Param::None; 7];
        assert!(check_encodable(&event).is_err());
    }
}

//! A bounded on-disk FIFO of alert records, written ahead of delivery: numbered segment files
//! of checksummed, sequence-numbered frames, and an acknowledgement cursor.
//!
//! **Layout.** The directory (created `0700`, tightened if group or others can enter it) holds
//! segment files `NNNNNNNNNNNNNNNN.spool` (`0600`) and the cursor file `ack`. A segment starts
//! with an 8-byte header, `VGSP`, the format version (2) and three zero bytes, then frames:
//!
//! ```text
//! u32 body length | u64 sequence | u8 severity | u32 CRC-32 | body (UTF-8)
//! ```
//!
//! all little-endian; the CRC covers the 13 header bytes before it and the body. Sequence
//! numbers grow by one per record, per spool, across restarts (the next one continues after the
//! highest found in the segments or in the cursor). The cursor file holds `VGAK`, the highest
//! acknowledged sequence (`u64`) and a CRC-32 of those 12 bytes.
//!
//! **Writing.** `append` writes a whole frame with one `write(2)` to the newest segment (a new
//! one past the segment size) before it returns, so the record survives a crash or `kill -9`
//! of the agent from then on. Whether it survives power loss is [`SpoolSync`]'s business:
//! by default a background thread `fdatasync`s written segments and the cursor once a second.
//!
//! **Reading.** The reader walks the oldest segment from its recorded length (never past what
//! was written), hands out one record at a time (`peek`) and moves past it on `ack`, which also
//! rewrites the cursor (one `pwrite`); a sealed segment read to its end is deleted. Records at
//! or below the cursor (delivered before a restart) are passed over. A frame whose checksum
//! fails, or that is torn (cut short by a crash during the write), is never handed out: the
//! reader looks for the next valid frame byte by byte and counts the damage in
//! [`Losses::corrupt`]; sequence numbers missing between two valid records without damage in
//! between (a deleted segment) are counted in [`Losses::gap`]. Damage counts the unacknowledged
//! records the damaged bytes held (from the sequence numbers around it), at least one.
//! Records appended while the reader keeps up (the usual case when the output is healthy) are
//! also kept in memory, up to 1024, and handed out from there instead of being read back; the
//! file stays the record of what is pending.
//!
//! **Earlier formats.** Segments without the header come from builds before format 2 (frames
//! `u32 length | u8 severity | body`, no sequence, no checksum): they are read in that format,
//! with a warning, before the newer ones. A segment of an unknown version is renamed aside
//! (`.spool.unknown`), counted as one corrupt record and left for a newer build.
//!
//! **Budget.** `max_bytes` counts the segment files on disk (headers and delivered records of
//! a segment still in use included); `append` refuses what does not fit. Memory stays bounded
//! by one read buffer (64 KiB, or one record when larger) and the 1024 records kept for a
//! reader that keeps up.
//!
//! Delivery is at-least-once across a crash: a record sent but not yet acknowledged when the
//! agent dies is sent again at restart (one record: the cursor is written at every ack).

use std::collections::VecDeque;
use std::fs::{self, DirBuilder, File, OpenOptions, Permissions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::sinks::Record;

/// The largest record the spool accepts (bigger ones are refused, and skipped as corrupt on
/// read).
pub const MAX_RECORD: usize = 16 * 1024 * 1024;
const EXT: &str = "spool";
const ACK_FILE: &str = "ack";
const MAGIC: [u8; 4] = *b"VGSP";
const VERSION: u8 = 2;
const SEGMENT_HEADER: u64 = 8;
/// Frame header: body length, sequence, severity, CRC-32.
const FRAME_HEADER: usize = 17;
/// The frame header of format 1: body length, severity.
const LEGACY_HEADER: usize = 5;
const ACK_MAGIC: [u8; 4] = *b"VGAK";
const ACK_LEN: usize = 16;
/// Bytes the reader loads at a time.
const CHUNK: usize = 64 * 1024;
/// Records kept in memory for a reader that keeps up with the writer.
const TAIL_MAX: usize = 1024;
/// Damage warnings logged in full before only every 100th is.
const LOGGED_WARNINGS: u64 = 10;

/// When spool writes are forced to stable storage.
///
/// Every record is written to the file (the page cache) before `append` returns, which is
/// what survives a crash or `kill -9` of the agent. Surviving power loss or a kernel crash
/// needs `fdatasync`, which costs a disk flush (milliseconds on most disks; see
/// `BENCHMARKS.md`), so by default it is batched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpoolSync {
    /// Never forced: the kernel writes back when it likes (typically within 30 s).
    Never,
    /// Segments written since the last sync, the directory and the cursor are synced by a
    /// background thread at this interval: power loss loses at most about this much.
    Every(Duration),
    /// `fdatasync` after every record, inside `append` (the caller waits for the disk).
    EachRecord,
}

impl Default for SpoolSync {
    fn default() -> Self {
        SpoolSync::Every(Duration::from_secs(1))
    }
}

/// Records the spool found unreadable or missing, so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Losses {
    /// Records in damaged frames (checksum mismatch, torn, unreadable segment): skipped.
    pub corrupt: u64,
    /// Records whose sequence numbers are missing between two valid records.
    pub gap: u64,
}

/// The on-disk queue of one output.
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    segment_bytes: u64,
    sync: SpoolSync,
    /// Segments, oldest first. The reader works on the front one, the writer (when open)
    /// appends to the back one.
    segments: VecDeque<Segment>,
    writer: Option<File>,
    /// The open file of the segment being read.
    reader: Option<SegmentReader>,
    /// The segment being read and its next unread offset (`None`, or another id than the
    /// front's: the front segment is read from its start).
    read: Option<(u64, u64)>,
    peeked: Option<Peeked>,
    /// Records appended while the reader had read everything before them, in order: `peek`
    /// hands them out without reading them back (at most [`TAIL_MAX`]).
    tail: VecDeque<Tail>,
    next_id: u64,
    next_seq: u64,
    bytes: u64,
    records: u64,
    ack: Option<File>,
    /// The highest acknowledged sequence number (0: none).
    acked: u64,
    /// `acked` moved past what the cursor file holds ([`Spool::advance`] without a commit).
    uncommitted: bool,
    /// Segments read to their end while records were uncommitted: `(id, bytes)`, deleted at
    /// the next commit.
    doomed: Vec<(u64, u64)>,
    /// Whether `acked` is trustworthy (false when the cursor file was damaged).
    acked_known: bool,
    /// The last valid sequence number read.
    last: Option<u64>,
    /// Damage seen since the last valid record: how many records it was already counted as.
    damage: Option<u64>,
    losses: Losses,
    /// Sealed segments written since the last sync.
    unsynced: Vec<File>,
    dirty: bool,
    ack_dirty: bool,
    dir_dirty: bool,
    warnings: u64,
    frame: Vec<u8>,
    #[cfg(test)]
    fail_appends: bool,
}

struct Segment {
    id: u64,
    /// Bytes written (the file's length, unless a crash tore it).
    bytes: u64,
    format: Format,
    /// Records in it not yet acknowledged.
    pending: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// Before format 2: no header, no sequence, no checksum.
    Legacy,
    V2,
}

impl Format {
    fn start(self) -> u64 {
        match self {
            Format::Legacy => 0,
            Format::V2 => SEGMENT_HEADER,
        }
    }
}

struct Peeked {
    record: Record,
    seq: Option<u64>,
    next: u64,
}

/// A record just appended: its frame spans `[at, next)` of the newest segment.
struct Tail {
    record: Record,
    seq: u64,
    at: u64,
    next: u64,
}

/// A read buffer over one segment file: holds the bytes `[at, at + buf.len())`.
struct SegmentReader {
    id: u64,
    file: File,
    buf: Vec<u8>,
    at: u64,
}

impl SegmentReader {
    fn new(id: u64, file: File) -> SegmentReader {
        SegmentReader {
            id,
            file,
            buf: Vec::new(),
            at: 0,
        }
    }

    /// The bytes `[pos, pos + len)`, when they lie before `end` and the file has them.
    fn get(&mut self, pos: u64, len: usize, end: u64) -> io::Result<Option<&[u8]>> {
        let Some(stop) = pos.checked_add(len as u64).filter(|s| *s <= end) else {
            return Ok(None);
        };
        if pos < self.at || stop > self.at + self.buf.len() as u64 {
            let n = (end - pos).min(len.max(CHUNK) as u64) as usize;
            if self.buf.capacity() > 4 * CHUNK && n <= CHUNK {
                // Give back the room a huge record took.
                self.buf = Vec::new();
            }
            self.buf.resize(n, 0);
            let got = read_full_at(&self.file, &mut self.buf, pos)?;
            self.buf.truncate(got);
            self.at = pos;
            if got < len {
                // The file is shorter than recorded (cut behind our back): what is missing
                // reads as a torn frame.
                return Ok(None);
            }
        }
        let start = (pos - self.at) as usize;
        Ok(Some(&self.buf[start..start + len]))
    }
}

fn read_full_at(file: &File, buf: &mut [u8], mut pos: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], pos) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                pos += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// One step of reading a segment.
enum Parsed {
    Frame(Frame),
    /// A damaged or torn frame starts here.
    Bad(&'static str),
    End,
}

struct Frame {
    seq: Option<u64>,
    severity: u8,
    body_at: u64,
    body_len: usize,
    next: u64,
}

fn frame_crc(header: &[u8], body: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(header);
    hasher.update(body);
    hasher.finalize()
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

fn le_u64(b: &[u8]) -> u64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&b[..8]);
    u64::from_le_bytes(bytes)
}

/// The frame at `pos` of a segment of `format` whose data ends at `end`.
fn parse_at(reader: &mut SegmentReader, format: Format, pos: u64, end: u64) -> io::Result<Parsed> {
    if pos >= end {
        return Ok(Parsed::End);
    }
    let header_len = match format {
        Format::V2 => FRAME_HEADER,
        Format::Legacy => LEGACY_HEADER,
    };
    let Some(header) = reader.get(pos, header_len, end)? else {
        return Ok(Parsed::Bad("torn frame header"));
    };
    let len = le_u32(header) as usize;
    if len > MAX_RECORD {
        return Ok(Parsed::Bad("impossible record length"));
    }
    let Some(frame) = reader.get(pos, header_len + len, end)? else {
        return Ok(Parsed::Bad("torn record"));
    };
    let (seq, severity) = match format {
        Format::V2 => {
            let (header, body) = frame.split_at(FRAME_HEADER);
            if frame_crc(&header[..13], body) != le_u32(&header[13..]) {
                return Ok(Parsed::Bad("checksum mismatch"));
            }
            if std::str::from_utf8(body).is_err() {
                return Ok(Parsed::Bad("record is not UTF-8"));
            }
            (Some(le_u64(&header[4..])), header[12])
        }
        Format::Legacy => (None, frame[4]),
    };
    Ok(Parsed::Frame(Frame {
        seq,
        severity,
        body_at: pos + header_len as u64,
        body_len: len,
        next: pos + (header_len + len) as u64,
    }))
}

/// The offset of the next valid frame after damage at `pos` (`end` when there is none).
fn resync(reader: &mut SegmentReader, pos: u64, end: u64) -> io::Result<u64> {
    let mut candidate = pos + 1;
    while candidate < end {
        if let Parsed::Frame(_) = parse_at(reader, Format::V2, candidate, end)? {
            return Ok(candidate);
        }
        candidate += 1;
    }
    Ok(end)
}

fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016}.{EXT}"))
}

/// Creates `dir` (and missing parents) `0700`, or tightens an existing one that group or
/// others can use; warns when another user owns it.
fn prepare_dir(dir: &Path) -> io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    let meta = fs::metadata(dir)?;
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 || mode & 0o700 != 0o700 {
        match fs::set_permissions(dir, Permissions::from_mode(0o700)) {
            Ok(()) => log::warn!(
                "spool directory `{}` had mode {mode:04o}; set to 0700 (alerts can carry \
                 sensitive data)",
                dir.display()
            ),
            Err(e) => log::warn!(
                "spool directory `{}` has mode {mode:04o} and cannot be set to 0700: {e}",
                dir.display()
            ),
        }
    }
    // The owner of /proc/self is this process's effective user.
    if let Ok(me) = fs::metadata("/proc/self").map(|m| m.uid()) {
        if meta.uid() != me {
            log::warn!(
                "spool directory `{}` is owned by uid {}, not by this process (uid {me}): that \
                 user can read and alter queued alerts",
                dir.display(),
                meta.uid()
            );
        }
    }
    Ok(())
}

/// Sets a file that group or others can access to `0600`.
fn tighten_file(path: &Path, file: &File) -> io::Result<()> {
    let mode = file.metadata()?.mode() & 0o7777;
    if mode & 0o077 != 0 {
        file.set_permissions(Permissions::from_mode(0o600))?;
        log::warn!(
            "spool file `{}` had mode {mode:04o}; set to 0600",
            path.display()
        );
    }
    Ok(())
}

/// The acknowledged sequence from the cursor file: `(sequence, trustworthy)`.
fn read_ack(dir: &Path) -> io::Result<(u64, bool)> {
    let path = dir.join(ACK_FILE);
    let data = match fs::read(&path) {
        Ok(data) => data,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((0, true)),
        Err(e) => return Err(e),
    };
    if data.len() == ACK_LEN
        && data[..4] == ACK_MAGIC
        && crc32fast::hash(&data[..12]) == le_u32(&data[12..])
    {
        return Ok((le_u64(&data[4..]), true));
    }
    log::warn!(
        "spool cursor `{}` is damaged; records are delivered from the oldest segment (some \
         may be sent twice)",
        path.display()
    );
    Ok((0, false))
}

/// A segment's format from its first bytes; `None` for a file cut before its header was
/// complete (a crash right after creating it).
fn sniff(head: &[u8], len: u64) -> Option<Result<Format, u8>> {
    let expected = [MAGIC[0], MAGIC[1], MAGIC[2], MAGIC[3], VERSION];
    if (len as usize) < SEGMENT_HEADER as usize && expected.starts_with(&head[..head.len().min(5)])
    {
        return None;
    }
    if head.len() >= 5 && head[..4] == MAGIC {
        return Some(if head[4] == VERSION {
            Ok(Format::V2)
        } else {
            Err(head[4])
        });
    }
    Some(Ok(Format::Legacy))
}

/// Files to sync, taken from the spool under its lock and synced outside it.
pub struct SyncJob {
    files: Vec<File>,
    dir: Option<PathBuf>,
}

impl SyncJob {
    pub fn is_empty(&self) -> bool {
        self.files.is_empty() && self.dir.is_none()
    }

    /// `fdatasync` of every file, then `fsync` of the directory (new and deleted segments).
    pub fn run(self) -> io::Result<()> {
        for file in &self.files {
            file.sync_data()?;
        }
        if let Some(dir) = self.dir {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    }
}

impl Spool {
    /// Opens (creating) `dir`, adopting the segments and the cursor a previous run left there.
    pub fn open(dir: &Path, max_bytes: u64, sync: SpoolSync) -> io::Result<Spool> {
        prepare_dir(dir)?;
        let (acked, acked_known) = read_ack(dir)?;
        let ack_path = dir.join(ACK_FILE);
        if let Ok(file) = File::open(&ack_path) {
            tighten_file(&ack_path, &file)?;
        }
        let mut ids = Vec::new();
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some(EXT) {
                continue;
            }
            if let Some(id) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u64>().ok())
            {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        let mut spool = Spool {
            dir: dir.to_owned(),
            max_bytes,
            // Small segments for small budgets, so the budget is usable; at most 1 MiB.
            segment_bytes: (max_bytes / 8).clamp(4096, 1024 * 1024),
            sync,
            segments: VecDeque::new(),
            writer: None,
            reader: None,
            read: None,
            peeked: None,
            tail: VecDeque::new(),
            next_id: ids.last().map_or(0, |id| id + 1),
            next_seq: 1,
            bytes: 0,
            records: 0,
            ack: None,
            acked,
            uncommitted: false,
            doomed: Vec::new(),
            acked_known,
            last: None,
            damage: None,
            losses: Losses::default(),
            unsynced: Vec::new(),
            dirty: false,
            ack_dirty: false,
            dir_dirty: false,
            warnings: 0,
            frame: Vec::new(),
            #[cfg(test)]
            fail_appends: false,
        };
        let mut max_seq = acked;
        let mut legacy = 0;
        for id in ids {
            if let Some((segment, seq)) = spool.adopt(id)? {
                max_seq = max_seq.max(seq);
                legacy += u64::from(segment.format == Format::Legacy);
                spool.bytes += segment.bytes;
                spool.records += segment.pending;
                spool.segments.push_back(segment);
            }
        }
        if legacy > 0 {
            log::warn!(
                "spool `{}`: {legacy} segment(s) in the format of an earlier version (no \
                 checksums): delivered as read, before newer records",
                dir.display()
            );
        }
        spool.next_seq = max_seq + 1;
        Ok(spool)
    }

    /// Checks one segment left by a previous run: its format, its unacknowledged records and
    /// its highest sequence number. `None` when there is nothing to read in it.
    fn adopt(&mut self, id: u64) -> io::Result<Option<(Segment, u64)>> {
        let path = segment_path(&self.dir, id);
        let file = match File::open(&path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        tighten_file(&path, &file)?;
        let len = file.metadata()?.len();
        let mut head = [0; SEGMENT_HEADER as usize];
        let n = read_full_at(&file, &mut head, 0)?;
        let format = match sniff(&head[..n], len) {
            None => {
                fs::remove_file(&path)?;
                return Ok(None);
            }
            Some(Ok(format)) => format,
            Some(Err(version)) => {
                let aside = path.with_extension("spool.unknown");
                fs::rename(&path, &aside)?;
                self.losses.corrupt += 1;
                log::warn!(
                    "spool segment `{}` has format version {version}, which this build cannot \
                     read: moved to `{}` and counted as one corrupt record",
                    path.display(),
                    aside.display()
                );
                return Ok(None);
            }
        };
        let mut reader = SegmentReader::new(id, file);
        let mut pos = format.start();
        let mut pending = 0;
        let mut max_seq = 0;
        loop {
            match parse_at(&mut reader, format, pos, len)? {
                Parsed::End => break,
                Parsed::Frame(frame) => {
                    match frame.seq {
                        Some(seq) if seq <= self.acked => {}
                        _ => pending += 1,
                    }
                    max_seq = max_seq.max(frame.seq.unwrap_or(0));
                    pos = frame.next;
                }
                Parsed::Bad(_) => match format {
                    Format::V2 => pos = resync(&mut reader, pos, len)?,
                    Format::Legacy => break,
                },
            }
        }
        let segment = Segment {
            id,
            bytes: len,
            format,
            pending,
        };
        Ok(Some((segment, max_seq)))
    }

    /// Bytes on disk.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Records not yet acknowledged.
    pub fn len(&self) -> u64 {
        self.records
    }

    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// Records found damaged or missing so far.
    pub fn losses(&self) -> Losses {
        self.losses
    }

    /// The sequence number the next record gets.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Makes `append` fail as a full disk would.
    #[cfg(test)]
    pub(crate) fn fail_appends(&mut self, on: bool) {
        self.fail_appends = on;
    }

    /// Appends a record (one `write(2)`); `Ok(false)` when the byte budget has no room for it.
    /// On an error nothing of the record stays in the spool.
    pub fn append(&mut self, record: &Record) -> io::Result<bool> {
        let body = record.body.as_bytes();
        if body.len() > MAX_RECORD {
            return Ok(false);
        }
        let size = (FRAME_HEADER + body.len()) as u64;
        let rotate = match (&self.writer, self.segments.back()) {
            (Some(_), Some(back)) => {
                back.bytes > SEGMENT_HEADER && back.bytes + size > self.segment_bytes
            }
            _ => true,
        };
        if rotate {
            self.seal()?;
        }
        let extra = if self.writer.is_none() {
            SEGMENT_HEADER
        } else {
            0
        };
        if self.bytes + extra + size > self.max_bytes {
            return Ok(false);
        }
        #[cfg(test)]
        if self.fail_appends {
            return Err(io::Error::from_raw_os_error(28));
        }
        if self.writer.is_none() {
            self.create_segment()?;
        }
        let seq = self.next_seq;
        self.frame.clear();
        self.frame
            .extend_from_slice(&(body.len() as u32).to_le_bytes());
        self.frame.extend_from_slice(&seq.to_le_bytes());
        self.frame.push(record.severity);
        let crc = frame_crc(&self.frame, body);
        self.frame.extend_from_slice(&crc.to_le_bytes());
        self.frame.extend_from_slice(body);
        let back = self
            .segments
            .back_mut()
            .expect("the writer's segment is the newest");
        let file = self.writer.as_mut().expect("a writer was just ensured");
        if let Err(e) = file.write_all(&self.frame) {
            // Cut off what part of the frame got written; if even that fails, write no more
            // to this segment (the reader stops at its recorded length anyway).
            if file.set_len(back.bytes).is_err() {
                self.writer = None;
            }
            return Err(e);
        }
        // The record is written; a failed sync only leaves its durability against power loss
        // in doubt.
        let synced = match self.sync {
            SpoolSync::EachRecord => file.sync_data(),
            _ => Ok(()),
        };
        let at = back.bytes;
        back.bytes += size;
        back.pending += 1;
        let next = back.bytes;
        // Keep the record for a reader that has read (or is delivering) everything before it.
        let caught_up = match (self.tail.back(), &self.peeked) {
            (Some(last), _) => last.next == at,
            (None, Some(peeked)) => self.segments.len() == 1 && peeked.next == at,
            (None, None) => self.segments.len() == 1 && self.read_pos() == at,
        };
        if caught_up && self.tail.len() < TAIL_MAX {
            self.tail.push_back(Tail {
                record: record.clone(),
                seq,
                at,
                next,
            });
        } else {
            self.tail.clear();
        }
        self.bytes += size;
        self.records += 1;
        self.next_seq += 1;
        self.dirty = true;
        if let Err(e) = synced {
            self.warn(format!("cannot sync spool segment: {e}"));
        }
        Ok(true)
    }

    fn create_segment(&mut self) -> io::Result<()> {
        let id = self.next_id;
        let path = segment_path(&self.dir, id);
        let mut file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(&path)?;
        self.next_id += 1;
        let mut header = [0; SEGMENT_HEADER as usize];
        header[..4].copy_from_slice(&MAGIC);
        header[4] = VERSION;
        if let Err(e) = file.write_all(&header) {
            let _ = fs::remove_file(&path);
            return Err(e);
        }
        if self.sync == SpoolSync::EachRecord {
            File::open(&self.dir)?.sync_all()?;
        }
        self.segments.push_back(Segment {
            id,
            bytes: SEGMENT_HEADER,
            format: Format::V2,
            pending: 0,
        });
        self.bytes += SEGMENT_HEADER;
        self.writer = Some(file);
        self.dir_dirty = true;
        Ok(())
    }

    /// Stops writing to the newest segment; deletes it when it is already read to its end.
    fn seal(&mut self) -> io::Result<()> {
        let Some(file) = self.writer.take() else {
            return Ok(());
        };
        self.tail.clear();
        if self.dirty && matches!(self.sync, SpoolSync::Every(_)) {
            self.unsynced.push(file);
        }
        if self.segments.len() == 1 && self.front_consumed() {
            self.remove_front()?;
        }
        Ok(())
    }

    /// Whether every record of the front segment was acknowledged (or skipped).
    fn front_consumed(&self) -> bool {
        let Some(front) = self.segments.front() else {
            return false;
        };
        self.peeked.is_none() && self.read_pos() >= front.bytes
    }

    /// The next unread offset of the front segment.
    fn read_pos(&self) -> u64 {
        match (self.segments.front(), self.read) {
            (Some(front), Some((id, pos))) if id == front.id => pos,
            (Some(front), _) => front.format.start(),
            (None, _) => 0,
        }
    }

    fn set_read_pos(&mut self, pos: u64) {
        if let Some(front) = self.segments.front() {
            self.read = Some((front.id, pos));
        }
    }

    /// The oldest unacknowledged record, without removing it. Damaged frames on the way are
    /// skipped and counted in [`Spool::losses`].
    pub fn peek(&mut self) -> io::Result<Option<Record>> {
        loop {
            if let Some(p) = &self.peeked {
                return Ok(Some(p.record.clone()));
            }
            let Some(front) = self.segments.front() else {
                self.settle_damage();
                return Ok(None);
            };
            let (id, end, format) = (front.id, front.bytes, front.format);
            let writing = self.writer.is_some() && self.segments.len() == 1;
            let pos = self.read_pos();
            if let Some(tail) = self.tail.pop_front() {
                if writing && tail.at == pos {
                    self.account(tail.seq);
                    self.peeked = Some(Peeked {
                        record: tail.record,
                        seq: Some(tail.seq),
                        next: tail.next,
                    });
                    continue;
                }
                // Out of step (appends and reads should never leave it so): read the file.
                self.tail.clear();
            }
            if writing && pos >= end {
                // Read up to the writer.
                self.settle_damage();
                return Ok(None);
            }
            if self.reader.as_ref().is_none_or(|r| r.id != id) {
                match File::open(segment_path(&self.dir, id)) {
                    Ok(file) => self.reader = Some(SegmentReader::new(id, file)),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        // Deleted behind our back: the sequence gap counts what it held.
                        self.warn(format!("spool segment {id} disappeared"));
                        self.remove_front()?;
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            let reader = self.reader.as_mut().expect("a reader was just ensured");
            match parse_at(reader, format, pos, end)? {
                Parsed::End => {
                    if writing {
                        self.settle_damage();
                        return Ok(None);
                    }
                    self.remove_front()?;
                }
                Parsed::Bad(why) => {
                    let resume = match format {
                        Format::V2 => resync(reader, pos, end)?,
                        // Without checksums there is no telling where valid data resumes.
                        Format::Legacy => end,
                    };
                    self.set_read_pos(resume);
                    self.damaged(format);
                    let path = segment_path(&self.dir, id);
                    self.warn(format!(
                        "spool segment `{}`: {why} at offset {pos}; {} byte(s) skipped, never \
                         delivered",
                        path.display(),
                        resume - pos
                    ));
                }
                Parsed::Frame(frame) => {
                    let body = reader
                        .get(frame.body_at, frame.body_len, end)?
                        .map(|b| String::from_utf8_lossy(b).into_owned());
                    let Some(body) = body else {
                        // parse_at just read these bytes; only a file cut meanwhile gets here.
                        self.set_read_pos(end);
                        self.damaged(format);
                        continue;
                    };
                    self.set_read_pos(frame.next);
                    if let Some(seq) = frame.seq {
                        self.account(seq);
                        if seq <= self.acked {
                            // Delivered before a restart.
                            continue;
                        }
                    }
                    self.peeked = Some(Peeked {
                        record: Record {
                            severity: frame.severity,
                            body: Arc::from(body),
                        },
                        seq: frame.seq,
                        next: frame.next,
                    });
                }
            }
        }
    }

    /// Damaged bytes at the read position: counted as one record now when they lie past the
    /// acknowledged records, otherwise when the next valid record shows what they held.
    fn damaged(&mut self, format: Format) {
        if format == Format::Legacy {
            self.losses.corrupt += 1;
            return;
        }
        if self.damage.is_none() {
            let past_acked = match self.last {
                Some(last) => last >= self.acked,
                None => self.acked_known && self.acked == 0,
            };
            let counted = u64::from(past_acked);
            self.losses.corrupt += counted;
            self.damage = Some(counted);
        }
    }

    /// The end of the data with damage not counted yet because the cursor was unknown: no
    /// later record can tell how many it held, so it counts as one.
    fn settle_damage(&mut self) {
        if self.damage == Some(0) && !self.acked_known {
            self.losses.corrupt += 1;
            self.damage = Some(1);
        }
    }

    /// A valid record `seq` was read: counts the records missing before it.
    fn account(&mut self, seq: u64) {
        let floor = match self.last {
            Some(last) => Some(last.max(self.acked)),
            None => self.acked_known.then_some(self.acked),
        };
        // Unacknowledged sequence numbers between the previous record and this one.
        let missing = floor.map_or(0, |f| seq.saturating_sub(f.saturating_add(1)));
        match self.damage.take() {
            // Damage of unknown extent: at least one record.
            Some(0) if floor.is_none() => self.losses.corrupt += 1,
            Some(counted) => self.losses.corrupt += missing.saturating_sub(counted),
            None if missing > 0 => {
                self.losses.gap += missing;
                let message = format!(
                    "spool `{}`: {missing} record(s) missing before sequence {seq} (deleted \
                     or lost segment)",
                    self.dir.display()
                );
                self.warn(message);
            }
            None => {}
        }
        self.last = Some(self.last.map_or(seq, |l| l.max(seq)));
    }

    /// Removes the record `peek` returned (peeking first if needed) and records the new
    /// position in the cursor file: [`Spool::advance`] then [`Spool::commit`].
    pub fn ack(&mut self) -> io::Result<()> {
        self.advance()?;
        self.commit()
    }

    /// Moves past the record `peek` returned (peeking first if needed) without recording it
    /// in the cursor file: the next `peek` returns the record after it, so a caller can take
    /// several records for one delivery. Until [`Spool::commit`], a crash or a new `open`
    /// starts again at the first record moved past (its segment files are kept until then).
    pub fn advance(&mut self) -> io::Result<()> {
        if self.peeked.is_none() && self.peek()?.is_none() {
            return Ok(());
        }
        let Some(peeked) = self.peeked.take() else {
            return Ok(());
        };
        self.set_read_pos(peeked.next);
        if let Some(front) = self.segments.front_mut() {
            front.pending = front.pending.saturating_sub(1);
        }
        self.records = self.records.saturating_sub(1);
        // Until the commit, the segment files stay (a legacy record without a sequence
        // number too: its file is its only copy).
        self.uncommitted = true;
        if let Some(seq) = peeked.seq.filter(|s| *s > self.acked) {
            self.acked = seq;
            self.acked_known = true;
        }
        let sealed = !(self.writer.is_some() && self.segments.len() == 1);
        if sealed && self.front_consumed() {
            self.remove_front()?;
        }
        Ok(())
    }

    /// Records every record moved past ([`Spool::advance`]) as delivered: the cursor file is
    /// rewritten (one `pwrite`) and the segments read to their end are deleted.
    pub fn commit(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.uncommitted) {
            if let Err(e) = self.write_ack() {
                self.uncommitted = true;
                return Err(e);
            }
        }
        while let Some((id, bytes)) = self.doomed.pop() {
            self.bytes = self.bytes.saturating_sub(bytes);
            match fs::remove_file(segment_path(&self.dir, id)) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                _ => {}
            }
        }
        Ok(())
    }

    fn write_ack(&mut self) -> io::Result<()> {
        let mut data = [0; ACK_LEN];
        data[..4].copy_from_slice(&ACK_MAGIC);
        data[4..12].copy_from_slice(&self.acked.to_le_bytes());
        let crc = crc32fast::hash(&data[..12]);
        data[12..].copy_from_slice(&crc.to_le_bytes());
        if self.ack.is_none() {
            let path = self.dir.join(ACK_FILE);
            let file = OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .mode(0o600)
                .open(&path)?;
            tighten_file(&path, &file)?;
            self.ack = Some(file);
        }
        let file = self.ack.as_ref().expect("the cursor file was just opened");
        file.write_all_at(&data, 0)?;
        self.ack_dirty = true;
        Ok(())
    }

    /// Drops the front segment and deletes its file.
    fn remove_front(&mut self) -> io::Result<()> {
        let Some(front) = self.segments.pop_front() else {
            return Ok(());
        };
        if self.segments.is_empty() {
            self.writer = None;
        }
        self.reader = None;
        self.read = None;
        self.peeked = None;
        self.tail.clear();
        // Records of a segment that vanished (or whose end was unreadable) are no longer
        // pending; the damage or gap counts say what became of them.
        self.records = self.records.saturating_sub(front.pending);
        self.dir_dirty = true;
        if self.uncommitted {
            // Records moved past but not yet committed may live in it: deleted at `commit`.
            self.doomed.push((front.id, front.bytes));
            return Ok(());
        }
        self.bytes = self.bytes.saturating_sub(front.bytes);
        match fs::remove_file(segment_path(&self.dir, front.id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    /// What a sync pass has to flush now (see [`SpoolSync::Every`]).
    pub fn sync_job(&mut self) -> io::Result<SyncJob> {
        let mut files = std::mem::take(&mut self.unsynced);
        if std::mem::take(&mut self.dirty) {
            if let Some(writer) = &self.writer {
                files.push(writer.try_clone()?);
            }
        }
        if std::mem::take(&mut self.ack_dirty) {
            if let Some(ack) = &self.ack {
                files.push(ack.try_clone()?);
            }
        }
        let dir = std::mem::take(&mut self.dir_dirty).then(|| self.dir.clone());
        Ok(SyncJob { files, dir })
    }

    /// A rate-limited warning: the first few in full, then every 100th.
    fn warn(&mut self, message: String) {
        self.warnings += 1;
        if self.warnings <= LOGGED_WARNINGS || self.warnings.is_multiple_of(100) {
            log::warn!("{message} ({} spool warning(s) so far)", self.warnings);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: usize) -> Record {
        Record {
            severity: (i % 8) as u8,
            body: format!("alert number {i}").into(),
        }
    }

    fn open(dir: &Path, max: u64) -> Spool {
        Spool::open(dir, max, SpoolSync::Never).unwrap()
    }

    /// Peeks and acks everything: the records, with their sequence numbers.
    fn drain(s: &mut Spool) -> Vec<(Record, Option<u64>)> {
        let mut out = Vec::new();
        while let Some(r) = s.peek().unwrap() {
            out.push((r, s.peeked.as_ref().unwrap().seq));
            s.ack().unwrap();
        }
        out
    }

    fn segments(dir: &Path) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == EXT))
            .collect();
        v.sort();
        v
    }

    /// The byte offset of the body of record `i` (as written by `rec`) in `data`.
    fn body_offset(data: &[u8], i: usize) -> usize {
        let needle = format!("alert number {i}");
        let mut at = 0;
        loop {
            let pos = data[at..]
                .windows(needle.len())
                .position(|w| w == needle.as_bytes())
                .expect("record body in the segment")
                + at;
            // Not a prefix of a longer number.
            if !data.get(pos + needle.len()).is_some_and(u8::is_ascii_digit) {
                return pos;
            }
            at = pos + 1;
        }
    }

    #[test]
    fn advanced_records_come_back_after_a_crash_until_committed() {
        // Small segments: a batch of 300 records spans several of them.
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), 32 * 1024);
        for i in 0..300 {
            assert!(s.append(&rec(i)).unwrap());
        }
        let files = segments(dir.path()).len();
        assert!(files > 2, "{files} segment(s)");
        // Take the first 250 without committing: the spool moves on, nothing is deleted.
        for i in 0..250 {
            assert_eq!(s.peek().unwrap(), Some(rec(i)));
            s.advance().unwrap();
        }
        assert_eq!(s.peek().unwrap(), Some(rec(250)));
        assert_eq!(s.len(), 50);
        assert_eq!(
            segments(dir.path()).len(),
            files,
            "deleted before the commit"
        );
        // A crash: the next run starts again at the first uncommitted record.
        drop(s);
        let mut s = open(dir.path(), 32 * 1024);
        let again: Vec<Record> = drain(&mut s).into_iter().map(|(r, _)| r).collect();
        assert_eq!(again, (0..300).map(rec).collect::<Vec<_>>());
        // Advance and commit: the cursor moves, read segments go.
        let mut s = open(dir.path(), 32 * 1024);
        assert_eq!(s.peek().unwrap(), None);
        for i in 300..400 {
            assert!(s.append(&rec(i)).unwrap());
        }
        for i in 300..350 {
            assert_eq!(s.peek().unwrap(), Some(rec(i)));
            s.advance().unwrap();
        }
        s.commit().unwrap();
        drop(s);
        let mut s = open(dir.path(), 32 * 1024);
        let rest: Vec<Record> = drain(&mut s).into_iter().map(|(r, _)| r).collect();
        assert_eq!(rest, (350..400).map(rec).collect::<Vec<_>>());
    }

    #[test]
    fn fifo_across_segments_and_budget() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), 64 * 1024);
        let mut pushed = 0;
        while s.append(&rec(pushed)).unwrap() {
            pushed += 1;
        }
        assert!(pushed > 100, "pushed {pushed}");
        assert!(s.bytes() <= 64 * 1024);
        assert!(segments(dir.path()).len() > 1, "several segments");
        assert_eq!(s.len(), pushed as u64);
        for i in 0..pushed {
            // Interleave writes after reads start: they must come after the older ones.
            let got = s.peek().unwrap().expect("a record");
            assert_eq!(got, rec(i));
            s.ack().unwrap();
            if i == pushed / 2 {
                assert!(s.append(&rec(pushed)).unwrap());
            }
        }
        assert_eq!(s.peek().unwrap(), Some(rec(pushed)));
        s.ack().unwrap();
        assert_eq!(s.peek().unwrap(), None);
        assert!(s.is_empty());
        // Only the segment being written stays, read to its end.
        assert!(segments(dir.path()).len() <= 1);
        assert!(s.bytes() <= s.segment_bytes);
        assert_eq!(s.losses(), Losses::default());
    }

    #[test]
    fn steady_delivery_stays_within_a_small_budget() {
        // Append one, deliver one, many times the budget over: consumed segments are retired
        // (the one being written too), so the budget never runs out.
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), 4096);
        for i in 0..5000 {
            assert!(s.append(&rec(i)).unwrap(), "record {i} refused");
            assert_eq!(s.peek().unwrap(), Some(rec(i)));
            s.ack().unwrap();
        }
        assert!(s.bytes() <= 4096);
        assert_eq!(s.next_seq(), 5001);
        assert!(
            s.reader.is_none(),
            "records handed out from memory, not read back"
        );
    }

    #[test]
    fn records_appended_during_a_delivery_are_handed_out_from_memory_in_order() {
        // The worker's pattern under load: a record is out for delivery while more arrive.
        let dir = tempfile::tempdir().unwrap();
        let mut s = open(dir.path(), 1 << 20);
        assert!(s.append(&rec(0)).unwrap());
        let mut next = 1;
        for i in 0..500 {
            assert_eq!(s.peek().unwrap(), Some(rec(i)));
            for _ in 0..(i % 3) {
                assert!(s.append(&rec(next)).unwrap());
                next += 1;
            }
            s.ack().unwrap();
            if s.peek().unwrap().is_none() {
                assert!(s.append(&rec(next)).unwrap());
                next += 1;
            }
        }
        assert!(s.reader.is_none(), "nothing read back from the file");
        // A reopen reads the same records from the file.
        drop(s);
        let mut s = open(dir.path(), 1 << 20);
        let rest: Vec<Record> = drain(&mut s).into_iter().map(|(r, _)| r).collect();
        let want: Vec<Record> = (500..next).map(rec).collect();
        assert_eq!(rest, want);
    }

    #[test]
    fn sequence_numbers_and_the_cursor_survive_reopen() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = open(dir.path(), 1 << 20);
            for i in 0..10 {
                assert!(s.append(&rec(i)).unwrap());
            }
            for _ in 0..3 {
                s.peek().unwrap();
                s.ack().unwrap();
            }
            // Dropped without any shutdown, as a crash would.
        }
        let mut s = open(dir.path(), 1 << 20);
        assert_eq!(s.len(), 7, "the acknowledged three are not pending");
        assert_eq!(s.next_seq(), 11);
        assert!(s.append(&rec(10)).unwrap());
        let got = drain(&mut s);
        let want: Vec<(Record, Option<u64>)> =
            (3..11).map(|i| (rec(i), Some(i as u64 + 1))).collect();
        assert_eq!(got, want);
        drop(s);
        // Everything delivered: the segments are gone, the cursor keeps the numbering going.
        let mut s = open(dir.path(), 1 << 20);
        assert!(s.is_empty());
        assert_eq!(s.next_seq(), 12);
        assert!(s.append(&rec(11)).unwrap());
        assert_eq!(drain(&mut s), vec![(rec(11), Some(12))]);
        assert_eq!(s.losses(), Losses::default());
    }

    #[test]
    fn flipped_byte_in_a_middle_record_is_skipped_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = open(dir.path(), 1 << 20);
            for i in 0..5 {
                assert!(s.append(&rec(i)).unwrap());
            }
        }
        let seg = &segments(dir.path())[0];
        let mut data = fs::read(seg).unwrap();
        // "alert number 2" → "alert number 7": still valid text, caught by the checksum.
        let at = body_offset(&data, 2) + "alert number ".len();
        data[at] = b'7';
        fs::write(seg, &data).unwrap();
        let mut s = open(dir.path(), 1 << 20);
        let got: Vec<Record> = drain(&mut s).into_iter().map(|(r, _)| r).collect();
        assert_eq!(got, [rec(0), rec(1), rec(3), rec(4)]);
        assert_eq!(s.losses(), Losses { corrupt: 1, gap: 0 });
    }

    #[test]
    fn flipped_length_field_resynchronises_on_the_next_frame() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = open(dir.path(), 1 << 20);
            for i in 0..6 {
                assert!(s.append(&rec(i)).unwrap());
            }
        }
        let seg = &segments(dir.path())[0];
        let mut data = fs::read(seg).unwrap();
        // The top byte of record 1's length: a length no frame can have.
        let at = body_offset(&data, 1) - FRAME_HEADER + 3;
        data[at] ^= 0x40;
        // And a small change to record 3's (14 → 30 bytes): it now runs into record 4.
        let at = body_offset(&data, 3) - FRAME_HEADER;
        data[at] ^= 0x10;
        fs::write(seg, &data).unwrap();
        let mut s = open(dir.path(), 1 << 20);
        let got: Vec<Record> = drain(&mut s).into_iter().map(|(r, _)| r).collect();
        assert_eq!(got, [rec(0), rec(2), rec(4), rec(5)]);
        assert_eq!(s.losses(), Losses { corrupt: 2, gap: 0 });
    }

    #[test]
    fn a_deleted_segment_is_counted_as_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let per_segment;
        {
            // 4 KiB segments.
            let mut s = open(dir.path(), 32 * 1024);
            let mut i = 0;
            while segments(dir.path()).len() < 4 {
                assert!(s.append(&rec(i)).unwrap());
                i += 1;
            }
            per_segment = s.segments[1].pending;
        }
        let segs = segments(dir.path());
        fs::remove_file(&segs[1]).unwrap();
        let mut s = open(dir.path(), 32 * 1024);
        let got = drain(&mut s);
        // Strictly increasing, with exactly one hole of the deleted segment's size.
        let seqs: Vec<u64> = got.iter().map(|(_, q)| q.unwrap()).collect();
        let holes: Vec<u64> = seqs.windows(2).map(|w| w[1] - w[0] - 1).collect();
        assert_eq!(holes.iter().filter(|h| **h > 0).count(), 1, "{holes:?}");
        assert_eq!(holes.iter().sum::<u64>(), per_segment);
        assert_eq!(
            s.losses(),
            Losses {
                corrupt: 0,
                gap: per_segment
            }
        );
    }

    #[test]
    fn a_deleted_oldest_segment_is_a_gap_after_the_cursor() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = open(dir.path(), 32 * 1024);
            while segments(dir.path()).len() < 3 {
                assert!(s.append(&rec(0)).unwrap());
            }
            s.peek().unwrap();
            s.ack().unwrap();
        }
        let segs = segments(dir.path());
        let in_first = {
            let s = open(dir.path(), 32 * 1024);
            s.segments[0].pending
        };
        fs::remove_file(&segs[0]).unwrap();
        let mut s = open(dir.path(), 32 * 1024);
        drain(&mut s);
        assert_eq!(
            s.losses().gap,
            in_first,
            "the unacknowledged records it held"
        );
        assert_eq!(s.losses().corrupt, 0);
    }

    #[test]
    fn torn_tail_is_counted_once_and_numbering_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = open(dir.path(), 1 << 20);
            for i in 0..5 {
                assert!(s.append(&rec(i)).unwrap());
            }
        }
        // Tear the last frame as a crash mid-write would.
        let seg = &segments(dir.path())[0];
        let mut data = fs::read(seg).unwrap();
        data.truncate(data.len() - 3);
        fs::write(seg, data).unwrap();
        let mut s = open(dir.path(), 1 << 20);
        assert_eq!(s.len(), 4);
        // The torn record's number is given again: it was never complete.
        assert_eq!(s.next_seq(), 5);
        for i in 0..4 {
            assert_eq!(s.peek().unwrap(), Some(rec(i)));
            s.ack().unwrap();
        }
        assert_eq!(s.peek().unwrap(), None);
        assert_eq!(s.losses(), Losses { corrupt: 1, gap: 0 });
        // New records after recovery go to a fresh segment and are not counted again.
        assert!(s.append(&rec(9)).unwrap());
        assert_eq!(drain(&mut s), vec![(rec(9), Some(5))]);
        assert_eq!(s.losses(), Losses { corrupt: 1, gap: 0 });
    }

    #[test]
    fn garbage_files_do_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        // Headerless junk reads as the old format: one unreadable record.
        fs::write(dir.path().join("0000000000000001.spool"), [0xff; 64]).unwrap();
        // A current header followed by junk.
        let mut junk = b"VGSP\x02\0\0\0".to_vec();
        junk.extend((0..4000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8));
        fs::write(dir.path().join("0000000000000002.spool"), &junk).unwrap();
        // Cut inside its header (a crash right after creating it): nothing, removed.
        fs::write(dir.path().join("0000000000000003.spool"), b"VGS").unwrap();
        fs::write(dir.path().join("0000000000000004.spool"), b"").unwrap();
        // A future format: moved aside, counted.
        fs::write(
            dir.path().join("0000000000000005.spool"),
            b"VGSP\x09\0\0\0data",
        )
        .unwrap();
        fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        fs::write(dir.path().join(ACK_FILE), b"short").unwrap();
        let mut s = open(dir.path(), 1 << 20);
        assert_eq!(s.peek().unwrap(), None);
        assert_eq!(s.losses(), Losses { corrupt: 3, gap: 0 });
        assert!(dir.path().join("0000000000000005.spool.unknown").exists());
        assert!(!dir.path().join("0000000000000003.spool").exists());
        // And the spool works on.
        assert!(s.append(&rec(1)).unwrap());
        assert_eq!(drain(&mut s), vec![(rec(1), Some(1))]);
    }

    #[test]
    fn segments_of_the_earlier_format_are_delivered_first() {
        let dir = tempfile::tempdir().unwrap();
        let mut old = Vec::new();
        for i in 0..3 {
            let r = rec(i);
            old.extend_from_slice(&(r.body.len() as u32).to_le_bytes());
            old.push(r.severity);
            old.extend_from_slice(r.body.as_bytes());
        }
        fs::write(dir.path().join("0000000000000007.spool"), &old).unwrap();
        let mut s = open(dir.path(), 1 << 20);
        assert_eq!(s.len(), 3);
        assert!(s.append(&rec(3)).unwrap());
        let got = drain(&mut s);
        assert_eq!(
            got,
            vec![
                (rec(0), None),
                (rec(1), None),
                (rec(2), None),
                (rec(3), Some(1))
            ]
        );
        assert_eq!(s.losses(), Losses::default());
    }

    #[test]
    fn modes_are_tightened_whatever_was_there() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        {
            let mut s = open(&spool, 1 << 20);
            assert!(s.append(&rec(0)).unwrap());
            assert!(s.append(&rec(1)).unwrap());
            s.peek().unwrap();
            s.ack().unwrap();
        }
        let mode = |p: &Path| fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(mode(&spool), 0o700);
        assert_eq!(mode(&segments(&spool)[0]), 0o600);
        assert_eq!(mode(&spool.join(ACK_FILE)), 0o600);
        // Loosened by someone: tightened at the next start.
        fs::set_permissions(&spool, Permissions::from_mode(0o777)).unwrap();
        fs::set_permissions(&segments(&spool)[0], Permissions::from_mode(0o666)).unwrap();
        fs::set_permissions(spool.join(ACK_FILE), Permissions::from_mode(0o644)).unwrap();
        let mut s = open(&spool, 1 << 20);
        assert_eq!(mode(&spool), 0o700);
        assert_eq!(mode(&segments(&spool)[0]), 0o600);
        assert_eq!(drain(&mut s), vec![(rec(1), Some(2))]);
        assert_eq!(mode(&spool.join(ACK_FILE)), 0o600);
    }

    #[test]
    fn sync_jobs_cover_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 64 * 1024, SpoolSync::Every(Duration::ZERO)).unwrap();
        assert!(s.sync_job().unwrap().is_empty());
        // Enough for a rotation: the sealed segment and the current one.
        while segments(dir.path()).len() < 2 {
            assert!(s.append(&rec(0)).unwrap());
        }
        let job = s.sync_job().unwrap();
        assert_eq!(job.files.len(), 2);
        assert!(job.dir.is_some());
        job.run().unwrap();
        assert!(s.sync_job().unwrap().is_empty());
        s.peek().unwrap();
        s.ack().unwrap();
        let job = s.sync_job().unwrap();
        assert_eq!(job.files.len(), 1, "the cursor");
        job.run().unwrap();
        // Each-record sync works the same way, minus the jobs.
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 64 * 1024, SpoolSync::EachRecord).unwrap();
        assert!(s.append(&rec(0)).unwrap());
        assert_eq!(drain(&mut s), vec![(rec(0), Some(1))]);
    }
}

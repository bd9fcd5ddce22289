//! A bounded on-disk FIFO of alert records: numbered segment files of length-prefixed frames.
//!
//! Frame: `u32` little-endian body length, one severity byte, the body. The writer appends to
//! the newest segment; the reader loads the oldest sealed segment into memory (at most one
//! segment, so memory stays bounded whatever the outage) and deletes it once every record in
//! it is acknowledged. The byte budget counts segment files on disk. Segments left by a previous
//! run are picked up in order at start (delivery is at-least-once across a crash: the records
//! of a partly acknowledged segment are sent again).

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use crate::delivery::Record;

/// The largest record the spool accepts (bigger ones are dropped as corrupt on read).
pub const MAX_RECORD: usize = 16 * 1024 * 1024;
const HEADER: usize = 5;
const EXT: &str = "spool";

/// The on-disk queue of one output.
pub struct Spool {
    dir: PathBuf,
    max_bytes: u64,
    segment_bytes: u64,
    /// Sealed or open segments, oldest first: (id, bytes).
    segments: VecDeque<(u64, u64)>,
    writer: Option<(u64, File)>,
    reader: Option<Reader>,
    next_id: u64,
    bytes: u64,
    records: u64,
    /// Records found unreadable (truncated by a crash) and skipped.
    corrupt: u64,
}

struct Reader {
    id: u64,
    data: Vec<u8>,
    pos: usize,
}

fn segment_path(dir: &Path, id: u64) -> PathBuf {
    dir.join(format!("{id:016}.{EXT}"))
}

fn count_records(data: &[u8]) -> u64 {
    let mut pos = 0;
    let mut n = 0;
    while let Some(len) = frame_len(data, pos) {
        pos += HEADER + len;
        n += 1;
    }
    n
}

fn frame_len(data: &[u8], pos: usize) -> Option<usize> {
    let header = data.get(pos..pos + HEADER)?;
    let len = u32::from_le_bytes([header[0], header[1], header[2], header[3]]) as usize;
    if len > MAX_RECORD || data.len() < pos + HEADER + len {
        return None;
    }
    Some(len)
}

impl Spool {
    /// Opens (creating) `dir`, adopting segments a previous run left there.
    pub fn open(dir: &Path, max_bytes: u64) -> io::Result<Spool> {
        fs::create_dir_all(dir)?;
        let mut found = Vec::new();
        for entry in fs::read_dir(dir)? {
            let path = entry?.path();
            if path.extension().and_then(|e| e.to_str()) != Some(EXT) {
                continue;
            }
            let Some(id) = path
                .file_stem()
                .and_then(|s| s.to_str())
                .and_then(|s| s.parse::<u64>().ok())
            else {
                continue;
            };
            found.push((id, fs::metadata(&path)?.len()));
        }
        found.sort_unstable();
        let mut records = 0;
        for (id, _) in &found {
            records += count_records(&fs::read(segment_path(dir, *id))?);
        }
        let bytes = found.iter().map(|(_, b)| b).sum();
        let next_id = found.last().map_or(0, |(id, _)| id + 1);
        Ok(Spool {
            dir: dir.to_owned(),
            max_bytes,
            // Small segments for small budgets, so the budget is usable; at most 1 MiB.
            segment_bytes: (max_bytes / 8).clamp(4096, 1024 * 1024),
            segments: found.into(),
            writer: None,
            reader: None,
            next_id,
            bytes,
            records,
            corrupt: 0,
        })
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

    /// Records skipped because they were unreadable.
    pub fn corrupt(&self) -> u64 {
        self.corrupt
    }

    /// Appends a record; `Ok(false)` when the byte budget has no room for it.
    pub fn push(&mut self, record: &Record) -> io::Result<bool> {
        let body = record.body.as_bytes();
        if body.len() > MAX_RECORD {
            return Ok(false);
        }
        let size = (HEADER + body.len()) as u64;
        if self.bytes + size > self.max_bytes {
            return Ok(false);
        }
        let need_new = match (&self.writer, self.segments.back()) {
            (Some((id, _)), Some((last, used))) => {
                *id != *last || (*used > 0 && used + size > self.segment_bytes)
            }
            _ => true,
        };
        if need_new {
            let id = self.next_id;
            self.next_id += 1;
            let file = OpenOptions::new()
                .create_new(true)
                .append(true)
                .open(segment_path(&self.dir, id))?;
            self.writer = Some((id, file));
            self.segments.push_back((id, 0));
        }
        let (_, file) = self.writer.as_mut().expect("a writer was just ensured");
        let mut frame = Vec::with_capacity(HEADER + body.len());
        frame.extend_from_slice(&(body.len() as u32).to_le_bytes());
        frame.push(record.severity);
        frame.extend_from_slice(body);
        file.write_all(&frame)?;
        if let Some(last) = self.segments.back_mut() {
            last.1 += size;
        }
        self.bytes += size;
        self.records += 1;
        Ok(true)
    }

    /// The oldest record, without removing it.
    pub fn peek(&mut self) -> io::Result<Option<Record>> {
        loop {
            if self.reader.is_none() {
                let Some(&(id, _)) = self.segments.front() else {
                    return Ok(None);
                };
                if self.writer.as_ref().is_some_and(|(w, _)| *w == id) {
                    // Seal the segment being written: new records go to a fresh one.
                    self.writer = None;
                }
                let data = fs::read(segment_path(&self.dir, id))?;
                self.reader = Some(Reader { id, data, pos: 0 });
            }
            let reader = self.reader.as_mut().expect("a reader was just ensured");
            match frame_len(&reader.data, reader.pos) {
                Some(len) => {
                    let start = reader.pos + HEADER;
                    let body = String::from_utf8_lossy(&reader.data[start..start + len]);
                    return Ok(Some(Record {
                        severity: reader.data[reader.pos + 4],
                        body: body.into_owned().into(),
                    }));
                }
                None => {
                    // End of the segment; anything left over is a torn frame.
                    if reader.pos < reader.data.len() {
                        self.corrupt += 1;
                        self.records = self.records.saturating_sub(1);
                    }
                    self.remove_head()?;
                }
            }
        }
    }

    /// Removes the record `peek` returned.
    pub fn ack(&mut self) -> io::Result<()> {
        if self.reader.is_none() && self.peek()?.is_none() {
            return Ok(());
        }
        let Some(reader) = self.reader.as_mut() else {
            return Ok(());
        };
        if let Some(len) = frame_len(&reader.data, reader.pos) {
            reader.pos += HEADER + len;
            self.records = self.records.saturating_sub(1);
        }
        if reader.pos >= reader.data.len() {
            self.remove_head()?;
        }
        Ok(())
    }

    fn remove_head(&mut self) -> io::Result<()> {
        let id = match self.reader.take() {
            Some(r) => r.id,
            None => return Ok(()),
        };
        if let Some(pos) = self.segments.iter().position(|(s, _)| *s == id) {
            if let Some((_, bytes)) = self.segments.remove(pos) {
                self.bytes = self.bytes.saturating_sub(bytes);
            }
        }
        match fs::remove_file(segment_path(&self.dir, id)) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
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

    #[test]
    fn fifo_across_segments_and_budget() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Spool::open(dir.path(), 64 * 1024).unwrap();
        let mut pushed = 0;
        while s.push(&rec(pushed)).unwrap() {
            pushed += 1;
        }
        assert!(pushed > 100, "pushed {pushed}");
        assert!(s.bytes() <= 64 * 1024);
        assert_eq!(s.len(), pushed as u64);
        for i in 0..pushed {
            // Interleave writes after reads start: they must come after the older ones.
            let got = s.peek().unwrap().expect("a record");
            assert_eq!(got, rec(i));
            s.ack().unwrap();
            if i == pushed / 2 {
                assert!(s.push(&rec(pushed)).unwrap());
            }
        }
        assert_eq!(s.peek().unwrap(), Some(rec(pushed)));
        s.ack().unwrap();
        assert_eq!(s.peek().unwrap(), None);
        assert!(s.is_empty());
        assert_eq!(s.bytes(), 0);
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn reopen_recovers_and_skips_torn_tail() {
        let dir = tempfile::tempdir().unwrap();
        {
            let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
            for i in 0..5 {
                assert!(s.push(&rec(i)).unwrap());
            }
        }
        // Tear the last frame as a crash mid-write would.
        let seg = fs::read_dir(dir.path())
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let mut data = fs::read(&seg).unwrap();
        data.truncate(data.len() - 3);
        fs::write(&seg, data).unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(s.len(), 4);
        for i in 0..4 {
            assert_eq!(s.peek().unwrap(), Some(rec(i)));
            s.ack().unwrap();
        }
        assert_eq!(s.peek().unwrap(), None);
        assert_eq!(s.corrupt(), 1);
        // New records after recovery get fresh segment ids.
        assert!(s.push(&rec(9)).unwrap());
        assert_eq!(s.peek().unwrap(), Some(rec(9)));
    }

    #[test]
    fn garbage_files_do_not_panic() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("0000000000000001.spool"), [0xff; 64]).unwrap();
        fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        let mut s = Spool::open(dir.path(), 1 << 20).unwrap();
        assert_eq!(s.peek().unwrap(), None);
    }
}

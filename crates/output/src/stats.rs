//! Falco's stats file (`-s FILE --stats-interval MS`): one JSON object per line and interval,
//! `{"sample": N, "cur": {"events", "drops", "preemptions"}, "delta": {…}, "drop_pct": P}`,
//! where `cur` holds the totals so far, `delta` the change since the previous line and
//! `drop_pct` the share of this interval's events that were dropped, in percent.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// Counters at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Events seen, processed or dropped.
    pub events: u64,
    pub drops: u64,
    /// Always 0 for Vigil's drivers (kept for Falco compatibility).
    pub preemptions: u64,
}

/// Builds the stats lines.
#[derive(Debug, Default)]
pub struct StatsLines {
    sample: u64,
    previous: Counts,
}

impl StatsLines {
    /// The next line for the totals `cur`.
    pub fn line(&mut self, cur: Counts) -> serde_json::Value {
        self.sample += 1;
        let delta = Counts {
            events: cur.events.saturating_sub(self.previous.events),
            drops: cur.drops.saturating_sub(self.previous.drops),
            preemptions: cur.preemptions.saturating_sub(self.previous.preemptions),
        };
        self.previous = cur;
        let drop_pct = if delta.events == 0 {
            0.0
        } else {
            delta.drops as f64 * 100.0 / delta.events as f64
        };
        let counts = |c: Counts| serde_json::json!({"events": c.events, "drops": c.drops, "preemptions": c.preemptions});
        serde_json::json!({
            "sample": self.sample,
            "cur": counts(cur),
            "delta": counts(delta),
            "drop_pct": drop_pct,
        })
    }
}

/// The stats file: a line per call to [`StatsFile::write`], flushed each time.
pub struct StatsFile {
    out: BufWriter<File>,
    lines: StatsLines,
}

impl StatsFile {
    /// Creates (truncates) the file, owner-only ([`crate::files`]).
    pub fn create(path: &Path) -> io::Result<StatsFile> {
        Ok(StatsFile {
            out: BufWriter::new(crate::files::create(path)?),
            lines: StatsLines::default(),
        })
    }

    pub fn write(&mut self, cur: Counts) -> io::Result<()> {
        let line = self.lines.line(cur);
        writeln!(self.out, "{line}")?;
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_cur_delta_and_drop_pct() {
        let mut s = StatsLines::default();
        let a = s.line(Counts {
            events: 100,
            drops: 10,
            preemptions: 0,
        });
        assert_eq!(
            a,
            serde_json::json!({"sample": 1, "cur": {"events": 100, "drops": 10, "preemptions": 0},
                "delta": {"events": 100, "drops": 10, "preemptions": 0}, "drop_pct": 10.0})
        );
        let b = s.line(Counts {
            events: 300,
            drops: 10,
            preemptions: 0,
        });
        assert_eq!(b["delta"]["events"], 200);
        assert_eq!(b["delta"]["drops"], 0);
        assert_eq!(b["drop_pct"], 0.0);
        let c = s.line(Counts {
            events: 300,
            drops: 10,
            preemptions: 0,
        });
        assert_eq!(c["drop_pct"], 0.0, "no events, no division by zero");
        assert_eq!(c["sample"], 3);
    }

    #[test]
    fn file_gets_one_line_per_write() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("stats.jsonl");
        let mut f = StatsFile::create(&path).unwrap();
        f.write(Counts {
            events: 1,
            drops: 0,
            preemptions: 0,
        })
        .unwrap();
        f.write(Counts {
            events: 2,
            drops: 1,
            preemptions: 0,
        })
        .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[1]["cur"]["events"], 2);
        assert_eq!(lines[1]["drop_pct"], 100.0);
    }
}

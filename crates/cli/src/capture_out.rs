//! Writing a capture (`-w FILE`) from a live command: the binary form, or JSON lines when the
//! name ends in `.jsonl` or `.json`. `vigil replay FILE` reads either.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

use anyhow::{Context, Result};
use vigil_event::codec::{binary, jsonl, CaptureError};
use vigil_event::{Event, Snapshot};

/// The capture being written, in either form.
pub enum CaptureOut {
    Binary(binary::Writer<BufWriter<File>>),
    Jsonl(jsonl::Writer<BufWriter<File>>),
}

impl CaptureOut {
    /// Creates `path`, owner-only (a capture holds whole process environments); the form
    /// follows its extension.
    pub fn create(path: &Path) -> Result<CaptureOut> {
        let file = vigil_output::files::create(path)
            .with_context(|| format!("cannot create `{}`", path.display()))?;
        let out = BufWriter::new(file);
        let jsonl = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("jsonl" | "json")
        );
        Ok(if jsonl {
            CaptureOut::Jsonl(jsonl::Writer::new(out))
        } else {
            CaptureOut::Binary(binary::Writer::new(out))
        })
    }

    pub fn snapshot(&mut self, snapshot: &Snapshot) -> Result<(), CaptureError> {
        match self {
            CaptureOut::Binary(w) => w.write_snapshot(snapshot),
            CaptureOut::Jsonl(w) => w.write_snapshot(snapshot),
        }
    }

    pub fn event(&mut self, event: &Event) -> Result<(), CaptureError> {
        match self {
            CaptureOut::Binary(w) => w.write_event(event),
            CaptureOut::Jsonl(w) => w.write_event(event),
        }
    }

    /// Ends the capture and flushes it to disk.
    pub fn finish(self) -> Result<()> {
        let out = match self {
            CaptureOut::Binary(w) => w.finish(),
            CaptureOut::Jsonl(w) => w.finish(),
        }
        .map_err(|e| anyhow::anyhow!("cannot write the capture: {e}"))?;
        out.into_inner()
            .map_err(|e| e.into_error())
            .context("cannot write the capture")?
            .sync_all()
            .context("cannot write the capture")?;
        Ok(())
    }
}

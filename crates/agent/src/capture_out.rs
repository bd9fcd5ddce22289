//! Writing a capture (`-w FILE`) from a live command: the binary form, or JSON lines when the
//! name ends in `.jsonl` or `.json`. `vigil replay FILE` reads either.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use vigil_event::codec::{binary, jsonl, CaptureError};
use vigil_event::{Event, Snapshot};

/// Why a capture cannot be created or ended.
#[derive(Debug, thiserror::Error)]
pub enum CaptureOutError {
    #[error("cannot create `{}`", path.display())]
    Create {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The writer's last records (the codec's message, as the command line printed it).
    #[error("cannot write the capture: {0}")]
    Finish(CaptureError),
    #[error("cannot write the capture")]
    Flush(#[source] std::io::Error),
}

/// The capture being written, in either form.
pub enum CaptureOut {
    Binary(binary::Writer<BufWriter<File>>),
    Jsonl(jsonl::Writer<BufWriter<File>>),
}

impl CaptureOut {
    /// Creates `path`, owner-only (a capture holds whole process environments); the form
    /// follows its extension.
    pub fn create(path: &Path) -> Result<CaptureOut, CaptureOutError> {
        let file = vigil_output::files::create(path).map_err(|source| CaptureOutError::Create {
            path: path.to_path_buf(),
            source,
        })?;
        let jsonl = matches!(
            path.extension().and_then(|e| e.to_str()),
            Some("jsonl" | "json")
        );
        Ok(CaptureOut::new(file, jsonl))
    }

    /// A capture written to `file`, as JSON lines or in the binary form.
    pub fn new(file: File, jsonl: bool) -> CaptureOut {
        let out = BufWriter::new(file);
        if jsonl {
            CaptureOut::Jsonl(jsonl::Writer::new(out))
        } else {
            CaptureOut::Binary(binary::Writer::new(out))
        }
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
    pub fn finish(self) -> Result<(), CaptureOutError> {
        let out = match self {
            CaptureOut::Binary(w) => w.finish(),
            CaptureOut::Jsonl(w) => w.finish(),
        }
        .map_err(CaptureOutError::Finish)?;
        out.into_inner()
            .map_err(|e| CaptureOutError::Flush(e.into_error()))?
            .sync_all()
            .map_err(CaptureOutError::Flush)
    }
}

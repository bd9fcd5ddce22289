//! Opening the files the agent writes: alert files, captures (which hold whole process
//! environments), Falco's stats file, the metrics file, learned profiles. They are the
//! owner's only — created with mode 0600 whatever the umask (the mode given to `open` can only
//! lose bits to the umask, never gain them).
//!
//! An existing regular file that group or others may read is about to receive the same data,
//! so it is tightened to its owner bits (`fchmod`, allowed to its owner) with a warning, once
//! per path. One the agent may not change (another user's) is written as it is, with a
//! warning: its owner chose that mode. Anything else (`/dev/stdout`, a FIFO) is left alone.
//! The owner of an existing file never changes.

use std::collections::HashSet;
use std::fs::{File, OpenOptions, Permissions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The mode of files the agent creates.
pub const FILE_MODE: u32 = 0o600;

/// Creates `path` (or truncates it) for writing, owner-only.
pub fn create(path: &Path) -> io::Result<File> {
    open(
        path,
        OpenOptions::new().write(true).create(true).truncate(true),
    )
}

/// Opens `path` for appending, creating it owner-only.
pub fn append(path: &Path) -> io::Result<File> {
    open(path, OpenOptions::new().append(true).create(true))
}

fn open(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    let file = options.mode(FILE_MODE).open(path)?;
    match tighten(&file) {
        Tightened::Private => {}
        Tightened::Done { from, to } => warn_once(path, || {
            format!(
                "`{}` was readable by group or others (mode {from:03o}); tightened to {to:03o}",
                path.display()
            )
        }),
        Tightened::Refused { mode, error } => warn_once(path, || {
            format!(
                "`{}` is readable by group or others (mode {mode:03o}) and cannot be \
                 tightened ({error}); writing to it as it is",
                path.display()
            )
        }),
    }
    Ok(file)
}

/// What [`tighten`] found or did.
#[derive(Debug)]
enum Tightened {
    /// Owner-only already, or not a regular file.
    Private,
    Done {
        from: u32,
        to: u32,
    },
    Refused {
        mode: u32,
        error: io::Error,
    },
}

/// Removes the group and other bits of an open regular file.
fn tighten(file: &File) -> Tightened {
    let meta = match file.metadata() {
        Ok(m) => m,
        Err(error) => {
            return Tightened::Refused { mode: 0, error };
        }
    };
    let mode = meta.permissions().mode() & 0o7777;
    if !meta.file_type().is_file() || mode & 0o077 == 0 {
        return Tightened::Private;
    }
    let to = mode & 0o700;
    match file.set_permissions(Permissions::from_mode(to)) {
        Ok(()) => Tightened::Done { from: mode, to },
        Err(error) => Tightened::Refused { mode, error },
    }
}

/// Logs `message` unless a warning about `path` was logged before (a file opened per alert
/// would otherwise repeat it per alert).
fn warn_once(path: &Path, message: impl FnOnce() -> String) {
    static WARNED: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned
        .get_or_insert_with(HashSet::new)
        .insert(path.to_owned())
    {
        log::warn!("{}", message());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn new_files_are_owner_only() {
        let dir = tempfile::tempdir().unwrap();
        let created = dir.path().join("capture.vcap");
        create(&created).unwrap().write_all(b"x").unwrap();
        assert_eq!(mode(&created), 0o600, "create");
        let appended = dir.path().join("alerts.txt");
        append(&appended).unwrap().write_all(b"x").unwrap();
        assert_eq!(mode(&appended), 0o600, "append");
    }

    #[test]
    fn an_existing_readable_file_is_tightened_and_keeps_its_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("alerts.txt");
        std::fs::write(&path, b"old\n").unwrap();
        std::fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
        append(&path).unwrap().write_all(b"new\n").unwrap();
        assert_eq!(mode(&path), 0o600);
        assert_eq!(std::fs::read(&path).unwrap(), b"old\nnew\n");
        // Owner bits are kept as they were.
        std::fs::set_permissions(&path, Permissions::from_mode(0o444)).unwrap();
        let file = File::open(&path).unwrap();
        assert!(
            matches!(
                tighten(&file),
                Tightened::Done {
                    from: 0o444,
                    to: 0o400
                }
            ),
            "read-only for everyone becomes read-only for the owner"
        );
        assert_eq!(mode(&path), 0o400);
        std::fs::set_permissions(&path, Permissions::from_mode(0o600)).unwrap();
        create(&path).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"", "create truncates");
    }

    #[test]
    fn other_kinds_of_files_are_left_alone() {
        // A FIFO stands for `/dev/stdout` and friends (whose mode must never change).
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe");
        let made = std::process::Command::new("mkfifo")
            .arg("-m")
            .arg("666")
            .arg(&fifo)
            .status()
            .expect("run mkfifo");
        assert!(made.success(), "mkfifo failed");
        let reader_path = fifo.clone();
        // Opening a FIFO for writing waits for a reader.
        let reader = std::thread::spawn(move || std::fs::read(reader_path).unwrap());
        append(&fifo).unwrap().write_all(b"x").unwrap();
        assert_eq!(reader.join().unwrap(), b"x");
        assert_eq!(mode(&fifo), 0o666, "the FIFO keeps its mode");
    }
}

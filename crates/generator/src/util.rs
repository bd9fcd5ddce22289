//! Helpers shared by actions: temporary directories removed on drop, copies of real binaries
//! under chosen names, and running a child to completion.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::Error;

/// A directory removed (recursively) when dropped.
#[derive(Debug)]
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// A fresh `vigil-generator.XXXXXX` directory below `parent`.
    pub(crate) fn new_in(action: &'static str, parent: &Path) -> Result<TempDir, Error> {
        let template = parent.join("vigil-generator.XXXXXX");
        let path = nix::unistd::mkdtemp(&template).map_err(|source| Error::Sys {
            action,
            what: format!("creating a directory in {}", parent.display()),
            source,
        })?;
        Ok(TempDir { path })
    }

    /// A fresh directory below the system temporary directory.
    pub(crate) fn new(action: &'static str) -> Result<TempDir, Error> {
        TempDir::new_in(action, &std::env::temp_dir())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    pub(crate) fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// A file removed when dropped (for files created in system directories).
#[derive(Debug)]
pub(crate) struct TempFile(pub(crate) PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// The first of `/usr/bin`, `/bin`, `/usr/sbin`, `/sbin` that holds `name`.
pub(crate) fn which(action: &'static str, name: &str) -> Result<PathBuf, Error> {
    ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| Error::Failed {
            action,
            what: format!("`{name}` is not installed"),
        })
}

/// Copies the installed binary `src` (a name looked up with [`which`]) to `dir/name`, mode 0755.
/// Waits (at most `limit`) until process `pid` sleeps in `nanosleep`/`clock_nanosleep`, as
/// `/proc/PID/syscall` shows it (readable by a process allowed to ptrace it); returns whether
/// it got there.
pub(crate) fn wait_until_sleeping(pid: i32, limit: std::time::Duration) -> bool {
    use std::os::unix::fs::FileExt as _;
    let sleeping = [nix::libc::SYS_nanosleep, nix::libc::SYS_clock_nanosleep];
    let deadline = std::time::Instant::now() + limit;
    // Opened once and read again from offset 0 (a seq_file shows anew then): the action's
    // events do not depend on how many polls it took.
    let Ok(file) = fs::File::open(format!("/proc/{pid}/syscall")) else {
        return false;
    };
    let mut buf = [0u8; 64];
    loop {
        let nr = file
            .read_at(&mut buf, 0)
            .ok()
            .and_then(|n| std::str::from_utf8(&buf[..n]).ok())
            .and_then(|s| s.split_whitespace().next()?.parse::<i64>().ok());
        if nr.is_some_and(|nr| sleeping.contains(&nr)) {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

pub(crate) fn copy_exe(
    action: &'static str,
    src: &str,
    dir: &Path,
    name: &str,
) -> Result<PathBuf, Error> {
    let from = which(action, src)?;
    let to = dir.join(name);
    let io = |what: String| {
        move |source| Error::Io {
            action,
            what,
            source,
        }
    };
    fs::copy(&from, &to).map_err(io(format!(
        "copying {} to {}",
        from.display(),
        to.display()
    )))?;
    fs::set_permissions(&to, fs::Permissions::from_mode(0o755))
        .map_err(io(format!("making {} executable", to.display())))?;
    Ok(to)
}

/// Runs `cmd` with no input and discarded output; returns its exit code (`128 + signal` when
/// killed). The exit code is the action's business: `grep` finding nothing exits 1.
pub(crate) fn status(action: &'static str, cmd: &mut Command) -> Result<i32, Error> {
    let desc = format!("{cmd:?}");
    let status = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|source| Error::Io {
            action,
            what: format!("running {desc}"),
            source,
        })?;
    use std::os::unix::process::ExitStatusExt;
    Ok(status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1))
}

/// Runs `cmd` and fails unless it exits 0.
pub(crate) fn run_ok(action: &'static str, cmd: &mut Command) -> Result<(), Error> {
    let desc = format!("{cmd:?}");
    match status(action, cmd)? {
        0 => Ok(()),
        code => Err(Error::Failed {
            action,
            what: format!("{desc} exited with {code}"),
        }),
    }
}

/// Maps an I/O error of `action` with a description.
pub(crate) fn io_err(
    action: &'static str,
    what: impl Into<String>,
) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io {
        action,
        what,
        source,
    }
}

/// Maps a system-call error of `action` with a description.
pub(crate) fn sys_err(
    action: &'static str,
    what: impl Into<String>,
) -> impl FnOnce(nix::Error) -> Error {
    let what = what.into();
    move |source| Error::Sys {
        action,
        what,
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sleeping_child_is_seen_sleeping() {
        let mut child = Command::new(which("test", "sleep").unwrap())
            .arg("30")
            .spawn()
            .unwrap();
        let pid = i32::try_from(child.id()).unwrap();
        let seen = wait_until_sleeping(pid, std::time::Duration::from_secs(20));
        let _ = child.kill();
        let _ = child.wait();
        assert!(seen, "sleep {pid} was never seen in nanosleep");
        // A process that never sleeps there: this one, running the test.
        assert!(!wait_until_sleeping(
            i32::try_from(std::process::id()).unwrap(),
            std::time::Duration::from_millis(50)
        ));
    }

    #[test]
    fn temp_dir_is_removed_on_drop() {
        let _serial = crate::TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = TempDir::new("test").unwrap();
        let path = dir.path().to_path_buf();
        fs::write(dir.join("f"), b"x").unwrap();
        assert!(path.is_dir());
        drop(dir);
        assert!(!path.exists(), "{} left behind", path.display());
    }

    #[test]
    fn copies_run_under_their_new_name() {
        let _serial = crate::TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        let dir = TempDir::new("test").unwrap();
        let exe = copy_exe("test", "true", dir.path(), "nginx").unwrap();
        assert_eq!(status("test", &mut Command::new(&exe)).unwrap(), 0);
        assert!(matches!(
            which("test", "no-such-binary-here"),
            Err(Error::Failed { .. })
        ));
    }
}

//! The tracing filesystem where tracepoint ids are read: the host's mount, or a private
//! instance mounted nowhere.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use crate::EbpfError;

/// The tracing filesystem the syscall tracepoints are looked up in: the host's mount when
/// there is one, else a private instance that is never attached to any path (`fsopen` +
/// `fsmount`, Linux 5.2), so the agent starts on a host where nobody mounted tracefs and
/// leaves no mount behind. Tracepoint ids are the same in every instance (tracefs has one
/// superblock, `fs/tracefs/inode.c`).
pub struct Tracefs {
    /// `…/events`: a path under the mount, or under `/proc/self/fd/N` of the private one.
    events: PathBuf,
    /// The private instance's mount fd; `None` for the host's mount.
    private: Option<OwnedFd>,
}

/// Mount points where a host usually has tracefs (the second through debugfs).
const TRACEFS_MOUNTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

impl Tracefs {
    /// The host's tracefs if mounted with syscall tracepoints, else a private instance.
    pub fn open() -> Result<Tracefs, EbpfError> {
        if let Some(root) = TRACEFS_MOUNTS
            .iter()
            .map(Path::new)
            .find(|root| root.join("events/syscalls").is_dir())
        {
            return Ok(Tracefs {
                events: root.join("events"),
                private: None,
            });
        }
        let fd = private_tracefs().map_err(|e| EbpfError::NoTracefs {
            // fsopen(2) wants CAP_SYS_ADMIN over the mount namespace (`fs/fsopen.c`).
            message: if e.raw_os_error() == Some(libc::EPERM) {
                format!("{e}: creating one needs CAP_SYS_ADMIN")
            } else {
                e.to_string()
            },
            fexit_refused: None,
        })?;
        let events = PathBuf::from(format!("/proc/self/fd/{}/events", fd.as_raw_fd()));
        if !events.join("syscalls").is_dir() {
            return Err(EbpfError::NoTracefs {
                message: "the kernel has no syscall tracepoints (CONFIG_FTRACE_SYSCALLS)".into(),
                fexit_refused: None,
            });
        }
        Ok(Tracefs {
            events,
            private: Some(fd),
        })
    }

    /// The `events` directory (`events/syscalls/sys_enter_openat/…`).
    pub fn events(&self) -> &Path {
        &self.events
    }

    /// Whether this is a private instance (the host has no tracefs mounted).
    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }

    /// The id of tracepoint `category/name`.
    pub(super) fn id(&self, category: &str, name: &str) -> std::io::Result<u64> {
        let text = std::fs::read_to_string(self.events.join(category).join(name).join("id"))?;
        text.trim()
            .parse()
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad tracepoint id"))
    }
}

/// A tracefs instance mounted nowhere: the fd of its root.
fn private_tracefs() -> std::io::Result<OwnedFd> {
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    let fstype = CString::new("tracefs").expect("no NUL in a literal");
    // SAFETY: fsopen takes a NUL-terminated string that outlives the call and flags.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) };
    if fs < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fs` is a new fd that nothing else owns.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as RawFd) };
    // SAFETY: FSCONFIG_CMD_CREATE takes no key, value or aux argument.
    let created = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    };
    if created < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fsmount on the configured context fd, with flags and no mount attributes.
    let mnt = unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, 0) };
    if mnt < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `mnt` is a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(mnt as RawFd) })
}

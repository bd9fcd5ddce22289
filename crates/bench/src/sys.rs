//! The crate's only unsafe code: thin wrappers over the libc calls the workloads measure
//! (UnixBench's syscall mix, fork-and-reap) and the few process controls std lacks.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `getpid(2)`: a real system call on glibc ≥ 2.25 (no caching).
pub fn getpid() -> i32 {
    // SAFETY: getpid has no preconditions and cannot fail.
    unsafe { libc::getpid() }
}

/// `getuid(2)`.
pub fn getuid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// `umask(2)`, returning the previous mask.
pub fn umask(mask: u32) -> u32 {
    // SAFETY: umask has no preconditions and cannot fail.
    unsafe { libc::umask(mask as libc::mode_t) }
}

/// `dup(0)`: the returned descriptor closes on drop (`close(dup(0))` in UnixBench's mix).
pub fn dup_stdin() -> io::Result<OwnedFd> {
    // SAFETY: dup on any integer is memory-safe; a failure returns -1.
    let fd = unsafe { libc::dup(0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor returned by dup that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `pipe2(O_CLOEXEC)`: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints that pipe2 fills.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created by pipe2 and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// UnixBench's process creation unit: `fork()`, the child `_exit(0)`s at once, the parent
/// reaps it.
pub fn fork_exit_wait() -> io::Result<()> {
    // SAFETY: the child calls only the async-signal-safe `_exit`, so forking a possibly
    // multi-threaded process is sound.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: _exit never returns and runs no atexit handlers.
        unsafe { libc::_exit(0) }
    }
    let mut status: libc::c_int = 0;
    loop {
        // SAFETY: status is a valid out-pointer; pid is our own child.
        let rc = unsafe { libc::waitpid(pid, &mut status, 0) };
        if rc == pid {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Sends `SIGTERM` to a process.
pub fn terminate(pid: i32) -> io::Result<()> {
    send(pid, libc::SIGTERM)
}

/// Sends `SIGKILL` to a process.
pub fn kill(pid: i32) -> io::Result<()> {
    send(pid, libc::SIGKILL)
}

fn send(pid: i32, signal: libc::c_int) -> io::Result<()> {
    // SAFETY: kill has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid, signal) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Clock ticks per second, the unit of `utime`/`stime` in `/proc/<pid>/stat`.
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// Pins the calling thread to `cpu` and gives it `SCHED_IDLE` (it runs only when the CPU
/// would otherwise be idle).
pub fn pin_idle_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET bounds-checks `cpu` against
    // the set's size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t owned by this frame.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is valid for its size.
    if unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Waits until `dir` itself (not a file inside it) is opened, at most `timeout`: inotify's
/// `IN_OPEN` on it. True if it was. For the tests of agents that act on what they see.
#[cfg(test)]
pub fn wait_dir_opened(dir: &std::path::Path, timeout: std::time::Duration) -> io::Result<bool> {
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: inotify_init1 takes flags only; a failure returns -1.
    let raw = unsafe { libc::inotify_init1(libc::IN_CLOEXEC | libc::IN_NONBLOCK) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `raw` is a new descriptor that nothing else owns.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: `path` is a NUL-terminated string that outlives the call.
    if unsafe { libc::inotify_add_watch(fd.as_raw_fd(), path.as_ptr(), libc::IN_OPEN) } < 0 {
        return Err(io::Error::last_os_error());
    }
    let deadline = std::time::Instant::now() + timeout;
    let mut buf = [0u8; 4096];
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Ok(false);
        }
        let mut pfd = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(left.as_millis().max(1)).unwrap_or(libc::c_int::MAX);
        // SAFETY: `pfd` is one valid pollfd owned by this frame.
        if unsafe { libc::poll(&mut pfd, 1, ms) } <= 0 {
            continue;
        }
        // SAFETY: `buf` is writable for its whole length.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        let Ok(n) = usize::try_from(n) else {
            continue;
        };
        // Each event: wd, mask, cookie, len (4 bytes each), then `len` bytes of name; an
        // event about the watched directory itself has no name.
        let mut at = 0;
        while at + 16 <= n {
            let word = |i: usize| u32::from_ne_bytes(buf[at + i..at + i + 4].try_into().unwrap());
            let (mask, len) = (word(4), word(12) as usize);
            if mask & libc::IN_ISDIR != 0 && len == 0 {
                return Ok(true);
            }
            at += 16 + len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_work() {
        assert_eq!(getpid() as u32, std::process::id(), "getpid matches std");
        let old = umask(0o22);
        umask(old);
        let (r, w) = pipe().expect("pipe");
        drop((r, w));
        fork_exit_wait().expect("fork and reap");
        assert!(clock_ticks() > 0, "clock ticks positive");
        let _ = getuid();
    }
}

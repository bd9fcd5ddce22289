//! The only module with `unsafe`: `fork` for actions whose child must do something the standard
//! library cannot express (`PTRACE_TRACEME`, `execveat` of a memfd), and the `bpf` system call,
//! which `nix` does not wrap. Everything a forked child runs is prepared before the fork, and the
//! child only makes raw system calls and `_exit`s (async-signal-safe, no allocation), so the
//! callers may be multi-threaded (the test harness is).
#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr;

use nix::errno::Errno;
use nix::sys::wait::{waitpid, WaitStatus};
use nix::unistd::{fork, ForkResult};

/// Forks; the child runs `child` (which must only make raw system calls) and `_exit`s with its
/// return value; the parent waits for it.
fn fork_wait(child: impl FnOnce() -> i32) -> nix::Result<WaitStatus> {
    // SAFETY: the child runs only `child`, which by this module's contract makes raw system
    // calls on data prepared before the fork, then `_exit`s without unwinding or running
    // destructors (no allocation or lock in the child).
    match unsafe { fork() }? {
        ForkResult::Child => {
            let code = child();
            // SAFETY: `_exit` ends the child immediately; always sound.
            unsafe { libc::_exit(code) }
        }
        ForkResult::Parent { child } => waitpid(child, None),
    }
}

/// A child calls `ptrace(PTRACE_TRACEME)` (the anti-debugging idiom) and exits; `Ok(errno)` is
/// the call's result in the child (0 on success).
pub fn child_traceme() -> nix::Result<i32> {
    let status = fork_wait(|| {
        // SAFETY: PTRACE_TRACEME ignores the other arguments; a raw system call with integer
        // arguments has no memory-safety requirement.
        let r = unsafe {
            libc::ptrace(
                libc::PTRACE_TRACEME,
                0,
                ptr::null_mut::<libc::c_void>(),
                ptr::null_mut::<libc::c_void>(),
            )
        };
        if r == 0 {
            0
        } else {
            Errno::last_raw()
        }
    })?;
    exit_code(status)
}

/// A child runs `execveat(fd, "", argv, envp, AT_EMPTY_PATH)`: it executes the file open at
/// `fd` (a memfd for fileless execution). Returns the child's exit code (127 when the
/// `execveat` itself failed).
pub fn child_execveat(fd: BorrowedFd<'_>, argv: &[CString], env: &[CString]) -> nix::Result<i32> {
    // Pointer arrays built before the fork: the child must not allocate.
    let argv_ptrs: Vec<*const c_char> = argv
        .iter()
        .map(|a| a.as_ptr())
        .chain(Some(ptr::null()))
        .collect();
    let env_ptrs: Vec<*const c_char> = env
        .iter()
        .map(|a| a.as_ptr())
        .chain(Some(ptr::null()))
        .collect();
    let empty: &CStr = c"";
    let raw_fd = fd.as_raw_fd();
    let status = fork_wait(|| {
        // SAFETY: every pointer refers to a NUL-terminated string or a NULL-terminated array
        // that the parent built before the fork and that stays alive in the child's copy of
        // the address space until `execveat` replaces it or the child `_exit`s.
        unsafe {
            libc::syscall(
                libc::SYS_execveat,
                raw_fd,
                empty.as_ptr(),
                argv_ptrs.as_ptr(),
                env_ptrs.as_ptr(),
                libc::AT_EMPTY_PATH,
            );
        }
        127
    })?;
    exit_code(status)
}

fn exit_code(status: WaitStatus) -> nix::Result<i32> {
    match status {
        WaitStatus::Exited(_, code) => Ok(code),
        WaitStatus::Signaled(_, sig, _) => Ok(128 + sig as i32),
        _ => Err(Errno::ECHILD),
    }
}

/// `bpf(BPF_PROG_LOAD, attr, size)` with an all-zero attribute block: the kernel rejects it
/// (`EINVAL`, or `EPERM` without privilege) after the syscall has been made and seen. Returns
/// the errno (0 would mean the kernel loaded something, which a zero block cannot be).
pub fn bpf_prog_load_invalid() -> i32 {
    /// `BPF_PROG_LOAD` from `linux/bpf.h`.
    const BPF_PROG_LOAD: libc::c_long = 5;
    let attr = [0u8; 128];
    // SAFETY: `attr` is a valid, readable 128-byte buffer for the duration of the call and the
    // kernel only reads it (for PROG_LOAD with a zero program it fails before writing any log).
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_PROG_LOAD,
            attr.as_ptr(),
            attr.len() as libc::c_long,
        )
    };
    if r < 0 {
        Errno::last_raw()
    } else {
        // Cannot happen with a zero block; close what we got so nothing leaks.
        let _ = nix::unistd::close(r as i32);
        0
    }
}

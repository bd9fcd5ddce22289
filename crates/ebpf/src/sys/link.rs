//! BPF links: what a watched syscall's attachment holds, and their teardown without waiting for
//! the kernel's grace periods (a forked releaser, else parallel detaches).

use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::rc::Rc;

use libbpf_rs::{Link, MapHandle};

/// One watched syscall's attachment.
pub(super) enum SyscallLinks {
    /// Enter and exit tracepoints.
    Tracepoint(Link, Link),
    /// The fexit stub on `__x64_sys_X`, and its object's `sys_progs` (a program array is
    /// emptied by the kernel when user space holds no reference to it any more: kept while a
    /// stub of the object is attached).
    Fexit(Link, Rc<MapHandle>),
    /// Marked in `hooked_nrs` for the shared `sys_exit` program (for execveat, also the
    /// entry tracepoint that keeps its pathname for the exec record).
    Raw(Option<Link>),
    /// The exit tracepoint (and for execveat the entry one).
    Exit(Link, Option<Link>),
}

impl SyscallLinks {
    /// Moves the links into `links` and what must outlive them (a stub object's slot map)
    /// into `slots`.
    pub(super) fn take_into(self, links: &mut Vec<Link>, slots: &mut Vec<Rc<MapHandle>>) {
        match self {
            SyscallLinks::Tracepoint(enter, exit) => links.extend([enter, exit]),
            SyscallLinks::Fexit(link, slot) => {
                links.push(link);
                slots.push(slot);
            }
            SyscallLinks::Raw(link) => links.extend(link),
            SyscallLinks::Exit(exit, enter) => links.extend(std::iter::once(exit).chain(enter)),
        }
    }
}

/// Detaches `links` without waiting for the kernel's teardown when it can (a [`Releaser`]
/// does it), else in parallel threads.
///
/// `slots` (the fexit stubs' program arrays) outlive the links: the kernel empties a program
/// array when user space lets go of it, which rewrites the tail call in each stub's code,
/// and that must not happen while a stub is still attached and running (under emulation it
/// crashed a guest kernel in the stub: `int3`).
pub(super) fn release(links: Vec<Link>, slots: Vec<Rc<MapHandle>>) {
    if links.is_empty() {
        return;
    }
    let fds: Vec<RawFd> = links.iter().map(|l| l.as_fd().as_raw_fd()).collect();
    let slot_fds: Vec<RawFd> = slots.iter().map(|m| m.as_fd().as_raw_fd()).collect();
    match Releaser::start(&fds, &slot_fds) {
        // The releaser holds the last references: dropping ours only disables the events.
        Some(releaser) => {
            drop(links);
            drop(slots);
            drop(releaser);
        }
        None => {
            detach_all(links);
            drop(slots);
        }
    }
}

/// A detached process (a grandchild, reparented to init) that holds copies of the link fds
/// and closes them once this process has let go of its own (its end of a pipe closes): the
/// kernel then tears the tracepoints down in that process, and this one is not held up by the
/// grace periods (~35 ms per syscall tracepoint, seconds with the default interest set).
struct Releaser {
    /// Write end of the pipe the releaser waits on; closing it lets the releaser go.
    go: libc::c_int,
}

impl Releaser {
    /// Forks the releaser holding `fds` and `after`; once let go it closes `fds` (the links)
    /// one by one, then exits (closing `after`). `None` if it cannot fork (the caller
    /// detaches itself).
    fn start(fds: &[RawFd], after: &[RawFd]) -> Option<Releaser> {
        let mut pipe = [-1 as libc::c_int; 2];
        // SAFETY: `pipe` is a valid array of two ints for pipe2 to fill.
        if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        let [wait_fd, go] = pipe;
        let mut keep: Vec<RawFd> = fds.iter().chain(after).copied().collect();
        keep.push(wait_fd);
        let links: Vec<libc::c_int> = fds.to_vec();
        // Computed before forking: the child only makes system calls.
        let gaps = close_gaps(&keep);
        // SAFETY: fork in a possibly multi-threaded process; both children below only make
        // async-signal-safe system calls (fork, close_range, setsid, read, close, _exit) on
        // memory prepared before the fork, and never return into Rust code.
        let child = unsafe { libc::fork() };
        if child < 0 {
            // SAFETY: closing the two pipe fds this function created.
            unsafe {
                libc::close(wait_fd);
                libc::close(go);
            }
            return None;
        }
        if child == 0 {
            // SAFETY: see the fork above: system calls on plain integers, then _exit.
            unsafe {
                if libc::fork() != 0 {
                    libc::_exit(0);
                }
                for &(first, last) in &gaps {
                    libc::syscall(libc::SYS_close_range, first, last, 0);
                }
                libc::setsid();
                let mut byte = 0u8;
                loop {
                    let n = libc::read(wait_fd, (&raw mut byte).cast(), 1);
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        break;
                    }
                }
                for &fd in &links {
                    libc::close(fd);
                }
                libc::_exit(0);
            }
        }
        // SAFETY: reaping the intermediate child (it exits at once) and closing our copy of
        // the pipe's read end.
        unsafe {
            let mut status = 0;
            while libc::waitpid(child, &mut status, 0) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            libc::close(wait_fd);
        }
        Some(Releaser { go })
    }
}

impl Drop for Releaser {
    fn drop(&mut self) {
        // SAFETY: `go` is the pipe write end this releaser owns; closed once.
        unsafe {
            libc::close(self.go);
        }
    }
}

/// The inclusive fd ranges to close to keep exactly `keep` open (the last range is open-ended).
fn close_gaps(keep: &[RawFd]) -> Vec<(libc::c_uint, libc::c_uint)> {
    let mut keep: Vec<libc::c_uint> = keep
        .iter()
        .filter_map(|&fd| libc::c_uint::try_from(fd).ok())
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut gaps = Vec::with_capacity(keep.len() + 1);
    let mut next: libc::c_uint = 0;
    for fd in keep {
        if fd > next {
            gaps.push((next, fd - 1));
        }
        next = fd + 1;
    }
    gaps.push((next, libc::c_uint::MAX));
    gaps
}

/// Detaches links in parallel (when no [`Releaser`] can be started). Removing the last
/// program of a syscall tracepoint waits for RCU grace periods (the kernel's
/// `perf_trace_event_unreg`), serialized by the kernel: ~35 ms per tracepoint here, so closing
/// a source with the default interest set takes ~3 s (5.5 s one by one).
fn detach_all(links: Vec<Link>) {
    if links.len() <= 1 {
        drop(links);
        return;
    }
    std::thread::scope(|scope| {
        for link in links {
            scope.spawn(move || drop(link));
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_gaps_keep_exactly_the_given_fds() {
        assert_eq!(
            close_gaps(&[7, 3, 4, 7, -1]),
            vec![(0, 2), (5, 6), (8, libc::c_uint::MAX)]
        );
        assert_eq!(close_gaps(&[0]), vec![(1, libc::c_uint::MAX)]);
        assert_eq!(close_gaps(&[]), vec![(0, libc::c_uint::MAX)]);
    }
}

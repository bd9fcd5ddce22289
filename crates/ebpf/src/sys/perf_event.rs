//! Tracepoint perf events: a BPF program attached to a tracepoint whose id comes from
//! [`Tracefs`].

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use libbpf_rs::Link;

use super::Tracefs;
use crate::EbpfError;

/// The start of `struct perf_event_attr` (`PERF_ATTR_SIZE_VER0`, 64 bytes), which is all a
/// tracepoint event needs; the kernel zero-extends a short attr (`perf_copy_attr`).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// Attaches `prog` to tracepoint `category/name` found in `tracefs`: a perf event for the
/// tracepoint (any process, CPU 0: a BPF program on a tracepoint runs on every CPU), then
/// a BPF link on it, as libbpf's own tracepoint attach does, but with the id read from
/// `tracefs` (libbpf only looks in the two usual mount points).
pub(super) fn attach_tracepoint(
    tracefs: &Tracefs,
    prog: &libbpf_rs::ProgramMut<'static>,
    category: &str,
    name: &str,
) -> Result<Link, EbpfError> {
    let fail = |message: String| EbpfError::Attach {
        name: format!("{category}/{name}"),
        message,
    };
    let id = tracefs
        .id(category, name)
        .map_err(|e| fail(format!("no tracepoint id: {e}")))?;
    const PERF_TYPE_TRACEPOINT: u32 = 2;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
    let attr = PerfEventAttr {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        sample_period: 1,
        wakeup_events: 1,
        ..PerfEventAttr::default()
    };
    // SAFETY: `attr` is a valid perf_event_attr prefix whose `size` says how much of it
    // there is; pid -1 with cpu 0 and no group.
    let pfd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &raw const attr,
            -1 as libc::pid_t,
            0 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if pfd < 0 {
        let err = std::io::Error::last_os_error();
        return Err(fail(format!(
            "perf_event_open: {err}{}",
            crate::seccomp_hint(&err)
        )));
    }
    // SAFETY: `pfd` is a new fd that nothing else owns.
    let pfd = unsafe { OwnedFd::from_raw_fd(pfd as RawFd) };
    // On success the link owns the perf event fd (libbpf closes it on detach).
    let link = prog
        .attach_perf_event(pfd.as_raw_fd())
        .map_err(|e| fail(e.to_string()))?;
    std::mem::forget(pfd);
    Ok(link)
}

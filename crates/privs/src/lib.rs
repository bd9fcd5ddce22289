//! `vigil-privs`: least privilege for the live commands, used by the tracer of `vigil run`
//! (`vigil-ptrace`) and the agent of `vigil watch` (`vigil-agent`). Once set-up is done, a
//! command keeps only the capabilities it still uses, clears its inheritable and ambient sets
//! and its bounding set, and sets `no_new_privs`. The user id is not changed (root stays uid
//! 0): capabilities are what grant the power, and files the agent created as root stay its own
//! to reopen.
//!
//! The kept sets, and why each capability is there (everything else is dropped):
//!
//! - **`vigil watch`** ([`WATCH`]), dropped once the BPF programs are loaded, the `/proc`
//!   snapshot read, the capture, stats and metrics files opened and the web server's socket
//!   bound — before any thread starts:
//!   - `CAP_PERFMON`: SIGHUP attaches the syscall tracepoints of the reloaded rules' event
//!     types (`--raw-fallback`: also `raw_syscalls`), each a `perf_event_open` of a tracepoint,
//!     which fails with `EACCES` without it (`perf_event_paranoid` ≥ 1).
//!   - `CAP_BPF`: the `bpf()` calls after start — attaching a program to those perf events,
//!     updating the capture-spec maps, reading the drop counters. Linux 6.5 moved the
//!     unprivileged-BPF check into map creation and program loading ("bpf: move unprivileged
//!     checks into map_create() and bpf_prog_load()"), so a reload works without it there;
//!     before 6.5 every `bpf()` command needs it when `kernel.unprivileged_bpf_disabled` is set
//!     (the default on current distributions).
//!   - `CAP_SYS_PTRACE`: the state engine reads `/proc/PID/{exe,cwd,root,fd/N,environ}` of any
//!     process lazily; the kernel allows that for another user's process, or one holding
//!     capabilities the agent no longer has, only with it (`ptrace_may_access`).
//!   - `CAP_DAC_READ_SEARCH`: `/proc/PID/fd` and `/proc/PID/environ` belong to the process's
//!     user with mode 0500/0400, and files inside containers are read through
//!     `/proc/PID/root` (a container's `/etc/passwd`, runtime state in rootless storage).
//!     Reading needs only this read-only bypass; `CAP_DAC_OVERRIDE` (write anywhere) is
//!     dropped, so outputs opened after start (SIGHUP reload, SIGUSR1 reopen, `keep_alive:
//!     false`) must be writable by uid 0 through ordinary permissions.
//!   - Not kept: `CAP_NET_BIND_SERVICE` (the web server binds once, at start; a reload does
//!     not rebind), `CAP_SYS_ADMIN` (tracefs is looked up through what was opened at start),
//!     unless the process was given it instead of `CAP_BPF` or `CAP_PERFMON`
//!     ([`watch_keeps`]: Docker before 23 does not know their names), `CAP_SYS_RESOURCE`
//!     (BPF memory is charged to the memory cgroup since Linux 5.11).
//! - **`vigil run`** ([`TRACER`]), dropped by the tracer right after the workload is forked
//!   and attached, before the workload runs its first instruction (the workload is a fork
//!   made before the drop: it keeps exactly the privileges it would have without Vigil):
//!   - `CAP_SYS_PTRACE`: `process_vm_readv`, `pidfd_getfd` and `/proc/PID/{exe,cwd,fd}` of
//!     tracees that changed user or hold capabilities the tracer dropped (a root workload
//!     keeps all of its own).
//!   - `CAP_KILL`: forwarding signals to, and `--enforce-action kill` of, a workload that
//!     changed user.
//!   - `CAP_DAC_READ_SEARCH`: `/proc/PID/fd` and `/proc/PID/environ` of such tracees.
//!
//!   Without `CAP_SYS_PTRACE` (a container with Docker's default capabilities), the tracer
//!   keeps every capability it has ([`tracer_keeps`]): the kernel then lets it read the
//!   workload's `/proc` entries and memory only while the workload's capabilities are a
//!   subset of its own, and the workload has them all.
//!
//! The bounding set is emptied (when the process may: `CAP_SETPCAP`) and the inheritable and
//! ambient sets cleared, so a program the agent starts (`program_output`'s `sh -c`) gets no
//! capability at all, even as uid 0; `no_new_privs` keeps it from gaining any through a
//! setuid or file-capability binary. A command started without privileges (`vigil run` as a
//! user) has nothing to drop and only sets `no_new_privs`.
//!
//! Capabilities and `no_new_privs` belong to each thread, not to the process, so
//! [`drop_to`] refuses to run once a second thread exists: callers drop before starting
//! output workers or the web server's thread, which then inherit the reduced sets.
//!
//! Entry points: [`drop_to`] with [`watch_keeps`] or [`tracer_keeps`];
//! [`may_allow_privilege_gain`] for a workload started without `no_new_privs` (setuid programs
//! under `vigil run`, `crates/cli/tests/e2e/identity.rs`). Tests of the kept sets:
//! `crates/cli/tests/e2e/privileges.rs`.

use std::collections::HashSet;
use std::io;

use caps::CapSet;
pub use caps::Capability;
use thiserror::Error;

/// What `vigil watch` keeps after set-up (see the module documentation for why).
pub const WATCH: &[Capability] = &[
    Capability::CAP_BPF,
    Capability::CAP_PERFMON,
    Capability::CAP_SYS_PTRACE,
    Capability::CAP_DAC_READ_SEARCH,
];

/// What `vigil watch` keeps, of what this process has: [`WATCH`], and `CAP_SYS_ADMIN` in
/// place of `CAP_BPF` or `CAP_PERFMON` when it was given instead of them (a container runtime
/// that does not know their names, as Docker before 23: the kernel and the runtimes' seccomp
/// profiles let `CAP_SYS_ADMIN` do what they do). Without it the agent would lose `bpf()` and
/// `perf_event_open()` with the drop.
pub fn watch_keeps() -> Vec<Capability> {
    let permitted = caps::read(None, CapSet::Permitted).unwrap_or_default();
    let mut keep = WATCH.to_vec();
    let substitute = [Capability::CAP_BPF, Capability::CAP_PERFMON]
        .iter()
        .any(|c| !permitted.contains(c));
    if substitute && permitted.contains(&Capability::CAP_SYS_ADMIN) {
        keep.push(Capability::CAP_SYS_ADMIN);
    }
    keep
}

/// What the tracer of `vigil run` keeps once the workload is attached.
pub const TRACER: &[Capability] = &[
    Capability::CAP_SYS_PTRACE,
    Capability::CAP_KILL,
    Capability::CAP_DAC_READ_SEARCH,
];

/// What the tracer of `vigil run` keeps, of what this process has: [`TRACER`] when it has
/// `CAP_SYS_PTRACE`. Without it, everything it has: the kernel lets a process read another's
/// `/proc/PID/{exe,cwd,fd,environ,mem}` and memory only when the other's permitted
/// capabilities are a subset of its own (`cap_ptrace_access_check`: the effective set for
/// `/proc`, the permitted set for `process_vm_readv`), and the workload, forked before the
/// drop, keeps all of them (root in a container with Docker's default capabilities).
pub fn tracer_keeps() -> Vec<Capability> {
    let permitted = caps::read(None, CapSet::Permitted).unwrap_or_default();
    if permitted.contains(&Capability::CAP_SYS_PTRACE) {
        TRACER.to_vec()
    } else {
        let mut all: Vec<Capability> = permitted.into_iter().collect();
        all.sort_by_key(|c| c.index());
        all
    }
}

/// Whether a workload started from here may run without `no_new_privs`, so that setuid and
/// setgid programs and file capabilities take effect under the tracer: installing a seccomp
/// filter without `no_new_privs` needs `CAP_SYS_ADMIN` (`seccomp(2)`), and an exec by a
/// traced process gains privileges only when its tracer had `CAP_SYS_PTRACE` when it attached
/// (`ptracer_capable`, checked in `cap_bprm_creds_from_file`). Both effective here.
pub fn may_allow_privilege_gain() -> bool {
    let effective = caps::read(None, CapSet::Effective).unwrap_or_default();
    effective.contains(&Capability::CAP_SYS_ADMIN)
        && effective.contains(&Capability::CAP_SYS_PTRACE)
}

/// Why privileges could not be dropped.
#[derive(Debug, Error)]
pub enum PrivError {
    #[error(
        "cannot drop privileges with {threads} threads running (capabilities belong to each \
         thread; the drop must come before any thread starts)"
    )]
    Threads { threads: usize },
    #[error("cannot {what}: {message}")]
    Caps { what: &'static str, message: String },
    #[error("cannot set no_new_privs")]
    NoNewPrivs(#[source] io::Error),
}

fn caps_err(what: &'static str) -> impl FnOnce(caps::errors::CapsError) -> PrivError {
    move |e| PrivError::Caps {
        what,
        message: e.to_string(),
    }
}

/// What [`drop_to`] left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dropped {
    /// The capabilities still effective and permitted, ascending.
    pub kept: Vec<Capability>,
    /// Whether the bounding set was emptied (needs `CAP_SETPCAP`; without it the process had
    /// no privilege to give away there, and `no_new_privs` keeps children from gaining any).
    pub bounding_cleared: bool,
}

impl Dropped {
    /// The kept capabilities as text: `CAP_KILL, CAP_SYS_PTRACE`, or `none`.
    pub fn describe(&self) -> String {
        describe(&self.kept)
    }
}

/// `caps` as text, ascending: `CAP_KILL, CAP_SYS_PTRACE`, or `none`.
pub fn describe(caps: &[Capability]) -> String {
    let mut sorted: Vec<Capability> = caps.to_vec();
    sorted.sort_by_key(|c| c.index());
    sorted.dedup();
    if sorted.is_empty() {
        return "none".to_owned();
    }
    sorted
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The capability bit mask of `caps` (as `/proc/PID/status` prints `CapEff`).
pub fn mask(caps: &[Capability]) -> u64 {
    caps.iter().fold(0, |m, c| m | c.bitmask())
}

/// The number of threads of this process (`None` when `/proc` cannot tell).
fn threads() -> Option<usize> {
    vigil_procfs::own_status().ok()?.threads
}

/// Keeps only the capabilities in `keep` that the process has (effective and permitted), empties
/// the inheritable, ambient and (with `CAP_SETPCAP`) bounding sets, and sets `no_new_privs`.
/// Refuses, changing nothing, when the process has more than one thread.
pub fn drop_to(keep: &[Capability]) -> Result<Dropped, PrivError> {
    if let Some(n) = threads().filter(|&n| n > 1) {
        return Err(PrivError::Threads { threads: n });
    }
    let permitted = caps::read(None, CapSet::Permitted).map_err(caps_err("read capabilities"))?;
    let kept: HashSet<Capability> = keep
        .iter()
        .copied()
        .filter(|c| permitted.contains(c))
        .collect();
    caps::clear(None, CapSet::Ambient).map_err(caps_err("clear the ambient capabilities"))?;
    // Emptying the bounding set needs CAP_SETPCAP in the effective set, so it comes before
    // the effective set shrinks.
    let bounding_cleared = permitted.contains(&Capability::CAP_SETPCAP);
    if bounding_cleared {
        caps::raise(None, CapSet::Effective, Capability::CAP_SETPCAP)
            .map_err(caps_err("raise CAP_SETPCAP"))?;
        for cap in caps::all() {
            // A capability this kernel does not know is refused by PR_CAPBSET_READ: skip it.
            if caps::has_cap(None, CapSet::Bounding, cap).unwrap_or(false) {
                caps::drop(None, CapSet::Bounding, cap)
                    .map_err(caps_err("drop from the bounding set"))?;
            }
        }
    }
    caps::clear(None, CapSet::Inheritable)
        .map_err(caps_err("clear the inheritable capabilities"))?;
    // Effective first: it must stay a subset of permitted at every step.
    caps::set(None, CapSet::Effective, &kept)
        .map_err(caps_err("set the effective capabilities"))?;
    caps::set(None, CapSet::Permitted, &kept)
        .map_err(caps_err("set the permitted capabilities"))?;
    set_no_new_privs().map_err(PrivError::NoNewPrivs)?;
    let mut kept: Vec<Capability> = kept.into_iter().collect();
    kept.sort_by_key(|c| c.index());
    Ok(Dropped {
        kept,
        bounding_cleared,
    })
}

/// Sets `no_new_privs` on the calling thread (inherited by threads and children it creates
/// later): no exec can grant privileges from now on (setuid bits and file capabilities are
/// ignored). It cannot be unset.
#[allow(unsafe_code)]
fn set_no_new_privs() -> io::Result<()> {
    // SAFETY: prctl with integer arguments only.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_match_the_kernel_bit_numbers() {
        // include/uapi/linux/capability.h: DAC_READ_SEARCH 2, KILL 5, SYS_PTRACE 19,
        // PERFMON 38, BPF 39.
        assert_eq!(mask(WATCH), (1 << 2) | (1 << 19) | (1 << 38) | (1 << 39));
        assert_eq!(mask(TRACER), (1 << 2) | (1 << 5) | (1 << 19));
        assert_eq!(mask(&[]), 0);
    }

    #[test]
    fn describe_sorts_and_names() {
        assert_eq!(describe(&[]), "none");
        assert_eq!(
            describe(TRACER),
            "CAP_DAC_READ_SEARCH, CAP_KILL, CAP_SYS_PTRACE"
        );
    }

    #[test]
    fn drop_is_refused_with_threads_running_and_changes_nothing() {
        let before = std::fs::read_to_string("/proc/self/status").expect("read status");
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let _ = rx.recv();
        });
        // The test harness runs tests on threads of their own: at least two threads exist
        // here (this one and `other`), whatever else runs.
        let err = drop_to(&[]).expect_err("a multi-threaded process cannot drop");
        assert!(
            matches!(err, PrivError::Threads { threads } if threads >= 2),
            "{err}"
        );
        assert!(err.to_string().contains("threads"), "{err}");
        drop(tx);
        other.join().expect("helper thread");
        let after = std::fs::read_to_string("/proc/self/status").expect("read status");
        let caps = |s: &str| -> Vec<String> {
            s.lines()
                .filter(|l| l.starts_with("Cap") || l.starts_with("NoNewPrivs"))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(caps(&before), caps(&after), "nothing changed");
    }
}

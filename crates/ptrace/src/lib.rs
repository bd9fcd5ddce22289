//! `vigil-ptrace`: the kernel-less driver behind `vigil run -- CMD`. It launches a workload
//! under a seccomp filter that stops it (`SECCOMP_RET_TRACE`) only on the syscalls someone
//! needs, and turns those stops into [`vigil_event::Event`]s with the schemas the eBPF driver
//! produces; it knows nothing about rules, alerts or outputs.
//!
//! Entry points: [`run`] with a [`RunSpec`] (what to stop on, at entry or exit, the
//! [`Mechanism`], enforcement, learning) and a caller's [`Handler`], which receives the events
//! and may veto a syscall before it runs ([`Verdict`]); `filter.rs` builds the seccomp programs,
//! [`profile`] reads and learns OCI seccomp profiles; the tracer drops its capabilities with
//! `vigil-privs` ([`vigil_privs::TRACER`]).
//!
//! Invariants: the workload behaves as without Vigil (exit status and signals propagate,
//! `PTRACE_O_EXITKILL` kills it if the tracer dies); a stop is taken only where a rule may need
//! it (exit stops only for results a rule reads; descriptors, cwd and exe come from `/proc`
//! while the tracee is stopped); failed reads of the workload's memory are counted
//! ([`read_faults`]); events carry no CPU (a tracer is not told it); `sys.rs`
//! holds every `unsafe`. The design, its measured costs and its documented choices (memory
//! access, the user-notify fallback, `in_place` filters widened on namespace entry, privilege
//! gain): `crates/ptrace/README.md`.

use std::ffi::{CString, OsString};
use std::os::unix::ffi::OsStrExt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use thiserror::Error;
use vigil_event::{Event, Snapshot};

mod decode;
mod fds;
mod filter;
mod idle;
mod notify;
mod procinfo;
pub mod profile;
mod sys;
mod tracer;

pub use filter::ArgIn;
pub use sys::MemoryAccess;

impl MemoryAccess {
    /// The name the start-up line and `--memory-access` use.
    pub fn name(self) -> &'static str {
        match self {
            MemoryAccess::VmReadv => "process_vm_readv",
            MemoryAccess::Ptrace => "ptrace",
            MemoryAccess::ProcMem => "proc-mem",
        }
    }
}

/// What the start-up probe found: the method chosen to read the workload's memory (the
/// cheapest that works), the others that work (tried in turn when it fails for a read), and
/// why the rest were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryProbe {
    pub chosen: MemoryAccess,
    /// Other methods that work, cheapest first.
    pub also: Vec<MemoryAccess>,
    /// `(method, error)` of each method that does not.
    pub refused: Vec<(MemoryAccess, String)>,
}

impl MemoryProbe {
    /// `proc-mem, then ptrace (process_vm_readv: operation not permitted)`.
    pub fn describe(&self) -> String {
        let mut text = self.chosen.name().to_owned();
        for m in &self.also {
            text.push_str(", then ");
            text.push_str(m.name());
        }
        if !self.refused.is_empty() {
            text.push_str(&format!(" ({})", describe_refusals(&self.refused)));
        }
        text
    }
}

/// An I/O error as text for a one-line message: lower-case, without `(os error N)`.
fn describe_io(e: &std::io::Error) -> String {
    let text = e.to_string().to_lowercase();
    match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    }
}

fn describe_refusals(refused: &[(MemoryAccess, String)]) -> String {
    refused
        .iter()
        .map(|(m, e)| format!("{}: {e}", m.name()))
        .collect::<Vec<_>>()
        .join("; ")
}

/// Failed reads of the workload's memory so far in this process (an argument left empty):
/// what a handler raises its read-fault alert from while the run goes on.
pub fn read_faults() -> u64 {
    sys::read_faults()
}

/// The process table of this process and its ancestors (no descriptors): what a workload
/// started from here inherits, e.g. its container, before it exists.
pub fn own_snapshot() -> Snapshot {
    procinfo::snapshot_of(&procinfo::ancestry(i64::from(std::process::id())), false)
}
pub use profile::{learned_profile, Profile, ProfileError, Runtime};

/// What to run and what to watch.
#[derive(Clone, Debug, Default)]
pub struct RunSpec {
    /// The program (looked up in `PATH` like a shell does) and its arguments (`argv[1..]`).
    pub program: OsString,
    pub args: Vec<OsString>,
    /// x86-64 syscall numbers whose completed events the handler receives.
    pub report: Vec<u16>,
    /// Syscall numbers the handler judges at entry, before they run ([`Handler::judge`]).
    pub judged: Vec<u16>,
    /// A narrower interest for the processes that stay where Vigil is: the workload starts
    /// under a filter tracing only these (with [`RunSpec::judged`] and the state's syscalls),
    /// and a process that enters new namespaces (a clone with `CLONE_NEW*` or
    /// `CLONE_INTO_CGROUP`, `unshare`, `setns`) — as a container runtime does — gets the
    /// full filter ([`RunSpec::report`], [`RunSpec::report_when`]) added before it runs on
    /// (a `seccomp(2)` call injected by the tracer; children inherit it). `None`: the full
    /// filter from the start. Ignored when learning and with the user-notify mechanism.
    pub in_place: Option<Interest>,
    /// Reported syscalls that only matter when an argument register has one of some values
    /// (decided in the seccomp filter: the others never stop). Ignored for judged and state
    /// syscalls, and when learning.
    pub report_when: Vec<(u16, ArgIn)>,
    /// Learning mode: every syscall stops once at entry and is recorded in
    /// [`Outcome::used_syscalls`].
    pub learn: bool,
    /// A seccomp profile enforced on the workload in addition to the tracing filter.
    pub profile: Option<Profile>,
    /// How syscalls are intercepted.
    pub mechanism: Mechanism,
    /// With [`Mechanism::Ptrace`]: when the kernel refuses to let Vigil trace the workload
    /// (`PTRACE_SEIZE` fails: a seccomp policy denying `ptrace`, Yama `ptrace_scope` 3), run
    /// it under [`Mechanism::Notify`] instead ([`Handler::fallback`] says why). Not when
    /// learning.
    pub notify_fallback: bool,
    /// Once the workload is forked and attached (before it runs), reduce the tracer to
    /// [`vigil_privs::tracer_keeps`] and set `no_new_privs` ([`vigil_privs::drop_to`]; the
    /// process must still be single-threaded then). The workload keeps the privileges it was forked with.
    pub drop_privileges: bool,
    /// How to read the workload's memory; `None`: the cheapest of `process_vm_readv`,
    /// `/proc/PID/mem` and ptrace (`PTRACE_PEEKDATA`) that works, found by a probe before
    /// the workload runs, the others that work as fallbacks per read (the user-notify
    /// mechanism has no ptrace attachment to read through).
    pub memory: Option<MemoryAccess>,
    /// Start the workload without `no_new_privs`, so setuid/setgid programs and file
    /// capabilities take effect as without Vigil. Installing a seccomp filter without it
    /// needs `CAP_SYS_ADMIN`, and the kernel lets a traced exec gain privileges only when the
    /// tracer had `CAP_SYS_PTRACE` when it attached
    /// ([`vigil_privs::may_allow_privilege_gain`]).
    pub allow_privilege_gain: bool,
    /// Call [`Handler::idle`] after each such period without a ptrace stop, so the
    /// handler's periodic work (statistics, metrics) also runs while the workload is idle.
    /// Costs the workload nothing: a helper thread wakes the tracer's wait with a signal
    /// (ptrace mechanism only).
    pub idle_interval: Option<std::time::Duration>,
}

/// Syscalls a filter stops for: numbers, and conditions on an argument for some of them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Interest {
    pub report: Vec<u16>,
    pub report_when: Vec<(u16, ArgIn)>,
}

/// The interception mechanism.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mechanism {
    /// `SECCOMP_RET_TRACE` + ptrace: results, process events, full transparency.
    #[default]
    Ptrace,
    /// `SECCOMP_RET_USER_NOTIF`. One notification per traced syscall, no results (events
    /// carry the predicted result), the lifecycle from exec/exit notifications and `/proc`
    /// (forks and images seen at a process's next notification), no learning mode,
    /// `read`/`write`/`close` never notified. Leaves ptrace to the workload.
    Notify,
}

/// The decision on a syscall judged at entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Let it run.
    Allow,
    /// Skip it; it returns `-errno` to the workload.
    Deny(i32),
    /// Kill the calling process (`SIGKILL`) before the syscall runs.
    Kill,
}

/// Where the tracer delivers what it sees. Called on the tracer's thread, with the tracee
/// stopped: time spent here is time the workload waits.
pub trait Handler {
    /// ptrace was refused (`why`); the workload is started again, under the user-notify
    /// mechanism ([`RunSpec::notify_fallback`]). Nothing of the first attempt ran.
    fn fallback(&mut self, why: &str) {
        let _ = why;
    }
    /// Once the workload is attached, before [`Handler::attached`]: how its memory will be
    /// read ([`RunSpec::memory`]).
    fn memory_access(&mut self, probe: &MemoryProbe) {
        let _ = probe;
    }
    /// Once the workload is attached and the tracer's privileges are dropped (`privileges`
    /// says what was kept, `None` when [`RunSpec::drop_privileges`] is off), before
    /// [`Handler::start`]: the place to start threads, which inherit the reduced privileges.
    /// An error kills the workload before it runs and ends [`run`] with
    /// [`RunError::Handler`].
    fn attached(&mut self, privileges: Option<&vigil_privs::Dropped>) -> Result<(), String> {
        let _ = privileges;
        Ok(())
    }
    /// Once, before the workload's first instruction: its process and Vigil's ancestry.
    fn start(&mut self, snapshot: &Snapshot);
    /// A judged syscall at entry, built as if it succeeded (`res` 0, or the descriptor the
    /// call would get for descriptor-returning calls). A syscall allowed here and also
    /// reported arrives again, completed, at [`Handler::event`]; a denied one does not.
    fn judge(&mut self, event: &Event) -> Verdict;
    /// A completed event: a reported syscall, a clone/fork/vfork (in the parent), an exec
    /// (a failed one only when exec is reported), or a thread's exit (`procexit`).
    fn event(&mut self, event: &Event);
    /// A reported syscall whose exit would add only its result (the open family, `dup`,
    /// `dup2`, `dup3`, the link/rename/unlink/mkdir/rmdir path calls) at entry, built from its
    /// arguments (`res` is meaningless): `false` when no result could make it matter, so the
    /// tracer lets it run without its exit stop and delivers no event for it. Also asked at a
    /// reported `execve`/`execveat` entry (the entry arguments, the image parameters empty):
    /// `false` when a failure could not matter (a success is still reported by the exec
    /// event). The default keeps every event.
    fn wants_result(&mut self, entry: &Event) -> bool {
        let _ = entry;
        true
    }
    /// Process `pid` entered new namespaces but the full filter could not be added to it
    /// (`why`): the syscalls only [`RunSpec::report`] traces are not seen in it. Counted in
    /// [`RunStats::widen_failures`] too.
    fn widening_failed(&mut self, pid: i64, why: &str) {
        let _ = (pid, why);
    }
    /// No stop came for [`RunSpec::idle_interval`]: the place for periodic work while the
    /// workload is idle (on the tracer's thread, with no tracee stopped).
    fn idle(&mut self) {}
    /// Process `pid` has descriptor `info.fd` (read from `/proc`), whose creating call was
    /// not delivered: the state should describe it so.
    fn learn_fd(&mut self, pid: i64, info: &vigil_event::FdInfo) {
        let _ = (pid, info);
    }
}

/// How the workload ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadStatus {
    Exited(i32),
    Signaled { signal: i32, core_dumped: bool },
}

/// Counters of one run.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Every ptrace stop handled.
    pub stops: u64,
    pub seccomp_stops: u64,
    pub exit_stops: u64,
    /// Events delivered to [`Handler::event`].
    pub events: u64,
    /// Syscalls judged at entry, denied, and processes killed.
    pub judged: u64,
    pub denied: u64,
    pub killed: u64,
    /// Threads and processes traced.
    pub tasks: u64,
    /// Reported open-like syscalls let run without their exit stop because no result could
    /// make a rule match ([`Handler::wants_result`]); they produce no event. Also execs
    /// whose failure could not matter (a success is still reported).
    pub skipped_exits: u64,
    /// Reads of the workload's memory that failed (the parameter is left empty).
    pub read_faults: u64,
    /// Processes given the full filter on entering new namespaces ([`RunSpec::in_place`]),
    /// and the attempts that failed (see [`Handler::widening_failed`]).
    pub widened: u64,
    pub widen_failures: u64,
}

/// The result of [`run`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The status of the process `run` started (not of its descendants).
    pub status: WorkloadStatus,
    pub stats: RunStats,
    /// Learning mode: every syscall number the workload used, ascending.
    pub used_syscalls: Vec<u16>,
}

/// Why the workload could not be run or traced.
#[derive(Debug, Error)]
pub enum RunError {
    #[error("the workload name or an argument contains a NUL byte")]
    NulByte,
    #[error("cannot start the workload")]
    Spawn(#[source] std::io::Error),
    #[error("cannot trace the workload (is ptrace allowed here? a container needs CAP_SYS_PTRACE or a permissive ptrace_scope)")]
    Attach(#[source] std::io::Error),
    #[error("waiting for the workload failed")]
    Wait(#[source] std::io::Error),
    #[error("the workload vanished without an exit status")]
    NoStatus,
    #[error("{0} is not supported with the user-notify mechanism")]
    NotifyUnsupported(&'static str),
    #[error("cannot start the tracer's idle wake-ups")]
    Idle(#[source] std::io::Error),
    #[error("the tracer cannot drop its privileges")]
    Privileges(#[source] vigil_privs::PrivError),
    #[error(
        "cannot read the workload's memory ({0}); give Vigil CAP_SYS_PTRACE (docker run \
         --cap-add SYS_PTRACE, a task definition's linuxParameters.capabilities.add) or allow \
         process_vm_readv or ptrace in the seccomp profile"
    )]
    Memory(String),
    #[error("{0}")]
    Handler(String),
}

/// Syscalls the state engine needs whatever the rules watch: the working directory (relative
/// paths) and credentials. They are rare, so tracing them costs little. Process creation and
/// exec come from ptrace events, not from the filter.
pub const STATE_SYSCALLS: &[u16] = &[
    80,  // chdir
    81,  // fchdir
    105, // setuid
    106, // setgid
    112, // setsid
    109, // setpgid
    113, // setreuid
    114, // setregid
    117, // setresuid
    119, // setresgid
    126, // capset
    272, // unshare: `CLONE_NEWPID` moves later children to a new pid namespace
    308, // setns: likewise
];

/// Syscalls whose successes ptrace events (clone/fork/vfork/exec) report whatever the filter
/// says. They stop at the filter only when the rules watch them (the entry arguments and the
/// failures are then known too); the user-notify mechanism never gets them.
const EVENT_SYSCALLS: &[u16] = &[56, 57, 58, 435, 59, 322];

/// The syscall numbers the tracing filter returns `SECCOMP_RET_TRACE` for.
pub fn traced_syscalls(spec: &RunSpec) -> Vec<u16> {
    traced_set(&spec.report, &spec.judged)
}

fn traced_set(report: &[u16], judged: &[u16]) -> Vec<u16> {
    let mut out: Vec<u16> = report
        .iter()
        .chain(STATE_SYSCALLS)
        .chain(judged.iter())
        .copied()
        .collect();
    // Descriptor-creating socket calls keep the fd table right for network rules.
    if out
        .iter()
        .any(|nr| matches!(nr, 42 | 43 | 44 | 45 | 46 | 47 | 49 | 50 | 288))
    {
        out.extend([41, 53]);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The argument conditions of the tracing filter `spec` installs for the processes that get
/// the full filter ([`RunSpec::report_when`]): none when learning (every syscall stops) or
/// under the user-notify mechanism (no tracing filter), never on judged or state syscalls
/// (they always stop).
pub fn traced_conditions(spec: &RunSpec) -> Vec<(u16, ArgIn)> {
    if spec.learn || spec.mechanism != Mechanism::Ptrace {
        return Vec::new();
    }
    conditions(spec, &spec.report_when)
}

/// `report_when` without the judged and state syscalls, which always stop.
fn conditions(spec: &RunSpec, report_when: &[(u16, ArgIn)]) -> Vec<(u16, ArgIn)> {
    report_when
        .iter()
        .filter(|(nr, _)| !spec.judged.contains(nr) && !STATE_SYSCALLS.contains(nr))
        .cloned()
        .collect()
}

/// Runs the workload to completion under the tracer, delivering events to `handler`.
/// Returns when every traced task has exited (orphaned descendants included), with the status
/// of the process it started.
pub fn run(spec: &RunSpec, handler: &mut dyn Handler) -> Result<Outcome, RunError> {
    match run_once(spec, handler) {
        // The workload was killed at its gate: it never ran.
        Err(RunError::Attach(e))
            if spec.notify_fallback && spec.mechanism == Mechanism::Ptrace && !spec.learn =>
        {
            handler.fallback(&format!("ptrace is refused ({})", describe_io(&e)));
            let notify = RunSpec {
                mechanism: Mechanism::Notify,
                ..spec.clone()
            };
            run_once(&notify, handler)
        }
        other => other,
    }
}

fn run_once(spec: &RunSpec, handler: &mut dyn Handler) -> Result<Outcome, RunError> {
    let program = CString::new(spec.program.as_bytes().to_vec()).map_err(|_| RunError::NulByte)?;
    let mut argv = vec![program.clone()];
    for a in &spec.args {
        argv.push(CString::new(a.as_bytes().to_vec()).map_err(|_| RunError::NulByte)?);
    }
    let traced = traced_syscalls(spec);
    let notify = spec.mechanism == Mechanism::Notify;
    if notify && spec.learn {
        return Err(RunError::NotifyUnsupported("learning"));
    }
    let tracing_filter = |interest_traced: &[u16], report_when: &[(u16, ArgIn)]| {
        filter::trace_where(interest_traced, &conditions(spec, report_when))
    };
    let mut filters = Vec::new();
    // The full filter, for processes that enter new namespaces, when they start narrower.
    let mut widening = None;
    if !notify {
        filters.push(if spec.learn {
            filter::trace_all()
        } else if let Some(narrow) = &spec.in_place {
            widening = Some(tracing_filter(&traced, &spec.report_when));
            tracing_filter(
                &traced_set(&narrow.report, &spec.judged),
                &narrow.report_when,
            )
        } else {
            filter::trace_where(&traced, &traced_conditions(spec))
        });
    }
    if let Some(p) = &spec.profile {
        filters.push(p.to_filter());
    }
    let (gate_read, gate_write) = sys::pipe().map_err(RunError::Spawn)?;
    let (report_read, report_write) = if notify {
        sys::socketpair().map_err(RunError::Spawn)?
    } else {
        (-1, -1)
    };
    let mut notified: Vec<u16> = traced
        .iter()
        .copied()
        .filter(|nr| {
            !notify::HANDSHAKE.contains(nr)
                && (!EVENT_SYSCALLS.contains(nr) || spec.judged.contains(nr))
        })
        .collect();
    if notify {
        // Exec and exit, which ptrace reports as events: the process's new image is read
        // at its next notification, its end at the exit call.
        notified.extend(notify::LIFECYCLE);
        notified.sort_unstable();
        notified.dedup();
    }
    let plan = sys::ChildPlan {
        program,
        argv,
        filters,
        gate_read,
        gate_write,
        notify: notify.then(|| (filter::notify_only(&notified), report_write)),
        no_new_privs: !spec.allow_privilege_gain,
    };
    let child = sys::spawn_gated(&plan);
    sys::close(gate_read);
    if notify {
        sys::close(report_write);
        let child = match child {
            Ok(pid) => pid,
            Err(e) => {
                sys::close(gate_write);
                sys::close(report_read);
                return Err(RunError::Spawn(e));
            }
        };
        return run_notify(spec, handler, child, gate_write, report_read, &notified);
    }
    let child = match child {
        Ok(pid) => pid,
        Err(e) => {
            sys::close(gate_write);
            return Err(RunError::Spawn(e));
        }
    };
    if let Err(e) = sys::seize(child) {
        let _ = sys::kill(child, libc::SIGKILL);
        sys::close(gate_write);
        let _ = sys::wait_any();
        return Err(RunError::Attach(e));
    }
    if let Err(e) = prepare(spec, handler, child, true) {
        // Killed while waiting at the gate (PTRACE_O_EXITKILL would do it too, later).
        let _ = sys::kill(child, libc::SIGKILL);
        sys::close(gate_write);
        let _ = sys::wait_any();
        return Err(e);
    }
    // Started once the privileges are dropped (threads inherit them), on this thread (the
    // tracer's), before the workload runs.
    let waker = match spec.idle_interval {
        Some(interval) => {
            let activity = Arc::new(AtomicU64::new(0));
            match idle::IdleWaker::start(interval, Arc::clone(&activity)) {
                Ok(waker) => Some((waker, activity)),
                Err(e) => {
                    let _ = sys::kill(child, libc::SIGKILL);
                    sys::close(gate_write);
                    let _ = sys::wait_any();
                    return Err(RunError::Idle(e));
                }
            }
        }
        None => None,
    };
    let _ = sys::forward_signals_to(child);
    let snapshot = procinfo::snapshot_of(&procinfo::ancestry(i64::from(child)), true);
    handler.start(&snapshot);
    // Release the child: it installs the filters and execs.
    sys::close(gate_write);
    let faults_before = sys::read_faults();
    let mut tracer = tracer::Tracer::new(child, spec, handler);
    tracer.widening = widening;
    let waker = waker.map(|(waker, activity)| {
        tracer.activity = Some(activity);
        waker
    });
    let status = tracer.run();
    if let Some(waker) = waker {
        waker.stop();
    }
    let status = status?;
    let mut used: Vec<u16> = tracer.used.iter().copied().collect();
    used.sort_unstable();
    let mut stats = tracer.stats.clone();
    stats.read_faults = sys::read_faults() - faults_before;
    Ok(Outcome {
        status: status.ok_or(RunError::NoStatus)?,
        stats,
        used_syscalls: used,
    })
}

/// With the workload attached and waiting at its gate: drops the tracer's privileges (when
/// asked), finds how to read the workload's memory with what is left ([`probe_memory`]) and
/// lets the handler start what it needs ([`Handler::attached`]).
fn prepare(
    spec: &RunSpec,
    handler: &mut dyn Handler,
    child: i32,
    ptrace: bool,
) -> Result<(), RunError> {
    let dropped = if spec.drop_privileges {
        Some(vigil_privs::drop_to(&vigil_privs::tracer_keeps()).map_err(RunError::Privileges)?)
    } else {
        None
    };
    let probe = probe_memory(child, spec.memory, ptrace)?;
    let mut working = vec![probe.chosen];
    working.extend(&probe.also);
    sys::set_memory_access(&working);
    handler.memory_access(&probe);
    handler
        .attached(dropped.as_ref())
        .map_err(RunError::Handler)
}

/// Bytes the probe reads back from the workload: the child is a fork of this process, so
/// this static sits at the same address, with the same contents, in both.
static PROBE: [u8; 16] = *b"vigil memory ok\0";

/// Tries each way of reading the workload's memory (only `forced` when given) on the child
/// waiting at its gate; those that read [`PROBE`] back work, and the cheapest is chosen.
/// Through ptrace the child must be in a ptrace-stop: it is interrupted for the probe
/// (`PTRACE_INTERRUPT`; its `read` of the gate restarts) and resumed after. `ptrace` is
/// `false` for the user-notify mechanism, which has no attachment to read through.
fn probe_memory(
    child: i32,
    forced: Option<MemoryAccess>,
    ptrace: bool,
) -> Result<MemoryProbe, RunError> {
    let candidates: Vec<MemoryAccess> = match forced {
        Some(m) => vec![m],
        None => sys::MEMORY_ACCESS
            .iter()
            .copied()
            .filter(|m| ptrace || *m != MemoryAccess::Ptrace)
            .collect(),
    };
    let mut refused = Vec::new();
    if !ptrace && candidates.contains(&MemoryAccess::Ptrace) {
        return Err(RunError::Memory(
            "ptrace: the user-notify mechanism has no ptrace attachment".into(),
        ));
    }
    if ptrace {
        sys::interrupt(child).map_err(RunError::Attach)?;
        let st = sys::wait_tid(child).map_err(RunError::Wait)?;
        if !sys::status::stopped(st) {
            return Err(RunError::Spawn(std::io::Error::other(
                "the workload ended before it was released",
            )));
        }
    }
    let address = PROBE.as_ptr() as u64;
    let mut working = Vec::new();
    for method in candidates {
        let mut buf = [0u8; 16];
        match sys::read_mem_with(method, child, address, &mut buf) {
            Ok(16) if buf == PROBE => working.push(method),
            Ok(n) => refused.push((method, format!("read {n} wrong or missing bytes"))),
            Err(e) => refused.push((method, describe_io(&e))),
        }
    }
    if ptrace {
        sys::cont(child, 0).map_err(RunError::Attach)?;
    }
    let mut working = working.into_iter();
    match working.next() {
        Some(chosen) => Ok(MemoryProbe {
            chosen,
            also: working.collect(),
            refused,
        }),
        None => Err(RunError::Memory(describe_refusals(&refused))),
    }
}

fn run_notify(
    spec: &RunSpec,
    handler: &mut dyn Handler,
    child: i32,
    gate_write: i32,
    report_read: i32,
    notified: &[u16],
) -> Result<Outcome, RunError> {
    let received = sys::recv_fd(report_read);
    sys::close(report_read);
    let listener = received.and_then(|listener| match sys::pidfd_open(child) {
        Ok(pidfd) => Ok((pidfd, listener)),
        Err(e) => {
            sys::close(listener);
            Err(e)
        }
    });
    let (pidfd, listener) = match listener {
        Ok(v) => v,
        Err(e) => {
            let _ = sys::kill(child, libc::SIGKILL);
            sys::close(gate_write);
            let _ = sys::wait_child(child);
            return Err(RunError::Attach(e));
        }
    };
    if let Err(e) = prepare(spec, handler, child, false) {
        let _ = sys::kill(child, libc::SIGKILL);
        sys::close(gate_write);
        sys::close(listener);
        sys::close(pidfd);
        let _ = sys::wait_child(child);
        return Err(e);
    }
    let _ = sys::forward_signals_to(child);
    let snapshot = procinfo::snapshot_of(&procinfo::ancestry(i64::from(child)), true);
    handler.start(&snapshot);
    sys::close(gate_write);
    let flags = |nrs: &[u16]| {
        let mut v = vec![false; 512];
        for &nr in nrs {
            if let Some(s) = v.get_mut(usize::from(nr)) {
                *s = true;
            }
        }
        v
    };
    let mut sup = notify::Supervisor::new(
        child,
        pidfd,
        listener,
        flags(notified),
        flags(&spec.judged),
        handler,
    );
    let faults_before = sys::read_faults();
    let status = sup.run();
    sys::close(listener);
    sys::close(pidfd);
    let mut stats = sup.stats.clone();
    stats.read_faults = sys::read_faults() - faults_before;
    Ok(Outcome {
        status: status?,
        stats,
        used_syscalls: Vec::new(),
    })
}

/// Ends the calling process the way the workload ended: `exit(code)`, or the same signal
/// re-raised with its default disposition (so Vigil's parent sees the same wait status).
pub fn exit_like(status: WorkloadStatus) -> ! {
    match status {
        WorkloadStatus::Exited(code) => std::process::exit(code),
        WorkloadStatus::Signaled { signal, .. } => {
            sys::die_by_signal(signal);
            std::process::exit(128 + signal)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_syscalls_stop_only_when_watched() {
        let watched = RunSpec {
            report: vec![59, 56, 2],
            ..RunSpec::default()
        };
        let traced = traced_syscalls(&watched);
        for nr in [59, 56, 2] {
            assert!(traced.contains(&nr), "{nr} is watched: {traced:?}");
        }
        let unwatched = RunSpec {
            report: vec![2],
            ..RunSpec::default()
        };
        let traced = traced_syscalls(&unwatched);
        assert!(
            EVENT_SYSCALLS.iter().all(|nr| !traced.contains(nr)),
            "ptrace events report them without a filter stop: {traced:?}"
        );
        assert!(STATE_SYSCALLS.iter().all(|nr| traced.contains(nr)));
    }

    #[test]
    fn conditions_apply_only_to_plain_reported_syscalls_under_ptrace() {
        let when = |nr| (nr, ArgIn::equal(1, vec![0]));
        // openat (257) conditional; kill (62) judged, setuid (105) state: they always stop.
        let spec = RunSpec {
            report: vec![257, 62, 105],
            judged: vec![62],
            report_when: vec![when(257), when(62), when(105)],
            mechanism: Mechanism::Ptrace,
            ..RunSpec::default()
        };
        assert_eq!(traced_conditions(&spec), [when(257)]);
        let learning = RunSpec {
            learn: true,
            ..spec.clone()
        };
        assert!(
            traced_conditions(&learning).is_empty(),
            "learning stops everything"
        );
        let notify = RunSpec {
            mechanism: Mechanism::Notify,
            ..spec
        };
        assert!(traced_conditions(&notify).is_empty(), "no tracing filter");
    }
}

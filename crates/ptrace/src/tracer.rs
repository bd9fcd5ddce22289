//! The stop loop: one `waitpid(-1, __WALL)` per ptrace stop, dispatched by stop kind.
//!
//! Stops taken, and nothing else:
//! - the seccomp stop of a traced syscall (arguments read, the judge consulted);
//! - its syscall-exit stop, only when the syscall is reported (its result is in the event);
//! - clone/fork/vfork/exec event stops (process tree and new images, whether or not those
//!   syscalls are filtered; when the rules watch them they also stop at the filter, for the
//!   entry arguments, and at their exit, for failures);
//! - signal-delivery stops (the signal is passed on unchanged) and group-stops
//!   (`PTRACE_LISTEN`, so job control behaves as without a tracer).

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use vigil_event::{table, Event, EventType, Param};

use crate::decode;
use crate::fds::{Fix, Ledger};
use crate::procinfo;
use crate::sys::{self, status, Regs, Wait};
use crate::{Handler, RunError, RunSpec, RunStats, Verdict, WorkloadStatus};

const CLONE_THREAD: u64 = 0x0001_0000;
const CLONE_VM: u64 = 0x0000_0100;
const CLONE_VFORK: u64 = 0x0000_4000;
const CLONE_NEWPID: u64 = 0x2000_0000;
const SIGCHLD: u64 = 17;
/// The clone flags that put a child in new namespaces or another cgroup: what a container
/// runtime does (`CLONE_NEWNS`, `NEWCGROUP`, `NEWUTS`, `NEWIPC`, `NEWUSER`, `NEWPID`,
/// `NEWNET`, `NEWTIME`, `CLONE_INTO_CGROUP`).
const ENTERS_ELSEWHERE: u64 = 0x0002_0000
    | 0x0200_0000
    | 0x0400_0000
    | 0x0800_0000
    | 0x1000_0000
    | CLONE_NEWPID
    | 0x4000_0000
    | 0x80
    | 0x2_0000_0000;
const SYS_UNSHARE: u64 = 272;
const SYS_SETNS: u64 = 308;
/// `seccomp`, by the kernel's number (the injected call; everything else here is numbered
/// as events are: x86-64's).
#[cfg(target_arch = "x86_64")]
const NATIVE_SYS_SECCOMP: u64 = 317;
#[cfg(target_arch = "aarch64")]
const NATIVE_SYS_SECCOMP: u64 = 277;
const SECCOMP_SET_MODE_FILTER: u64 = 1;
const SECCOMP_FILTER_FLAG_TSYNC: u64 = 1;

/// Why a `seccomp(2)` call could not be run in a tracee.
enum Injection {
    /// The thread exited or was killed (its status is deferred).
    Gone,
    Failed(String),
}

/// A syscall waiting for its exit stop.
struct Pending {
    event: Event,
    regs: Regs,
}

/// One traced thread.
#[derive(Default)]
pub(crate) struct Task {
    tgid: i32,
    pending: Option<Pending>,
    /// Entry arguments of the last exec this thread started: `(event type, head params)`.
    exec_head: Option<(EventType, Vec<Param>)>,
}

pub(crate) struct Tracer<'a> {
    main: i32,
    learn: bool,
    /// Per syscall number: reported (exit stop taken) / judged at entry.
    report: Vec<bool>,
    judged: Vec<bool>,
    handler: &'a mut dyn Handler,
    tasks: HashMap<i32, Task>,
    num: u64,
    pub(crate) used: HashSet<u16>,
    pub(crate) stats: RunStats,
    main_status: Option<WorkloadStatus>,
    fds: Ledger,
    /// New children whose first stop came before their parent's clone event: held stopped
    /// until the event has described them, so none of their syscalls is seen from a process
    /// the state does not know yet.
    early: HashSet<i32>,
    /// Processes whose new children may live in a pid namespace other than Vigil's: they
    /// called `unshare(CLONE_NEWPID)` or `setns`, or live in another one themselves. Only
    /// their children's namespace ids are read from `/proc`; everyone else's are the ids
    /// Vigil sees, which saves a `readlink` on every fork.
    foreign_ns: HashSet<i32>,
    /// Counts stops for the idle waker ([`crate::idle`]), when there is one: waits are then
    /// interruptible and an interruption calls [`Handler::idle`].
    pub(crate) activity: Option<Arc<AtomicU64>>,
    /// `chdir`, `fchdir` stop only for the state (no rule watches them): their exit may be
    /// skipped, the process's new working directory then read from `/proc` before its next
    /// event ([`Tracer::flush_cwd`]).
    cwd_state_only: [bool; 2],
    /// Processes whose working directory may have changed since the state was told.
    cwd_dirty: HashSet<i32>,
    /// The full tracing filter, when the workload started under a narrower one
    /// ([`RunSpec::in_place`]): added to a process that enters new namespaces.
    pub(crate) widening: Option<Vec<sys::SockFilter>>,
    /// Processes that have the full filter (inherited by their children).
    widened: HashSet<i32>,
    /// Threads to widen at their first stop (cloned into new namespaces) or after the exit
    /// of their `unshare`/`setns`.
    widen_at_first_stop: HashSet<i32>,
    widen_after_exit: HashSet<i32>,
    /// Status changes seen while waiting for one tracee (a widening), handled next.
    deferred: Vec<(i32, i32)>,
}

fn flags_of(numbers: &[u16]) -> Vec<bool> {
    let mut v = vec![false; 512];
    for &nr in numbers {
        if let Some(slot) = v.get_mut(usize::from(nr)) {
            *slot = true;
        }
    }
    v
}

fn is_exec(nr: u64) -> bool {
    nr == 59 || nr == 322
}

/// Syscalls whose exit adds nothing the arguments did not already say but the result (and,
/// for the open family and the `dup` family, the identity of the descriptor made, which the
/// fd ledger learns from `/proc` when it is used): the handler is asked whether it needs the
/// result at all. `open`, `openat`, `openat2`, `creat`, `dup`, `dup2`, `dup3`, and the path
/// calls `link`, `linkat`, `symlink`, `symlinkat`, `rename`, `renameat`, `renameat2`,
/// `unlink`, `unlinkat`, `mkdir`, `mkdirat`, `rmdir`.
fn may_skip_exit(nr: u64) -> bool {
    const SKIPPABLE: &[u64] = &[
        2, 257, 437, 85, // open, openat, openat2, creat
        32, 33, 292, // dup, dup2, dup3
        86, 265, 88, 266, // link, linkat, symlink, symlinkat
        82, 264, 316, // rename, renameat, renameat2
        87, 263, 83, 258, 84, // unlink, unlinkat, mkdir, mkdirat, rmdir
    ];
    SKIPPABLE.contains(&nr)
}

const CHDIR: u16 = 80;
const FCHDIR: u16 = 81;

fn is_clone(nr: u64) -> bool {
    matches!(nr, 56 | 57 | 58 | 435)
}

impl<'a> Tracer<'a> {
    pub(crate) fn new(main: i32, spec: &RunSpec, handler: &'a mut dyn Handler) -> Tracer<'a> {
        let mut tasks = HashMap::new();
        tasks.insert(
            main,
            Task {
                tgid: main,
                ..Task::default()
            },
        );
        Tracer {
            main,
            learn: spec.learn,
            report: flags_of(&crate::traced_syscalls(spec)),
            judged: flags_of(&spec.judged),
            cwd_state_only: [
                !spec.report.contains(&CHDIR) && !spec.learn,
                !spec.report.contains(&FCHDIR) && !spec.learn,
            ],
            cwd_dirty: HashSet::new(),
            widening: None,
            widened: HashSet::new(),
            widen_at_first_stop: HashSet::new(),
            widen_after_exit: HashSet::new(),
            deferred: Vec::new(),
            handler,
            tasks,
            num: 0,
            used: HashSet::new(),
            stats: RunStats {
                tasks: 1,
                ..RunStats::default()
            },
            main_status: None,
            early: HashSet::new(),
            foreign_ns: HashSet::new(),
            activity: None,
            fds: {
                let mut l = Ledger::default();
                l.record_all(i64::from(main));
                l
            },
        }
    }

    pub(crate) fn run(&mut self) -> Result<Option<WorkloadStatus>, RunError> {
        loop {
            if let Some((tid, st)) = self.deferred.pop() {
                self.dispatch(tid, st);
                continue;
            }
            let waited = match &self.activity {
                Some(_) => sys::wait_any_interruptible(),
                None => sys::wait_any(),
            };
            match waited.map_err(RunError::Wait)? {
                Wait::NoChildren => return Ok(self.main_status),
                Wait::Status(tid, st) => {
                    if let Some(activity) = &self.activity {
                        activity.fetch_add(1, Ordering::Relaxed);
                    }
                    self.dispatch(tid, st);
                }
                Wait::Interrupted => self.handler.idle(),
            }
        }
    }

    /// Delivers `event`, preceded by the fixes of any stale or unknown descriptor it uses.
    fn emit_checked(&mut self, event: Event) {
        self.fix_fds(&event);
        self.emit(event);
    }

    /// Brings the state's view of the descriptors `event` uses (and of its process's working
    /// directory) up to date.
    fn fix_fds(&mut self, event: &Event) {
        self.flush_cwd(event.tid, event.pid);
        for fix in self.fds.stale_before(event) {
            match fix {
                Fix::Close(close) => self.emit(close),
                Fix::Learn(pid, info) => self.handler.learn_fd(pid, &info),
            }
        }
    }

    /// A process whose `chdir`/`fchdir` ran without its exit stop: its working directory, read
    /// from `/proc` now, is delivered as a `chdir` to the absolute path before its next event
    /// (no rule watches these calls, so only the state sees it).
    fn flush_cwd(&mut self, tid: i64, pid: i64) {
        if self.cwd_dirty.is_empty() {
            return;
        }
        let Ok(process) = i32::try_from(pid) else {
            return;
        };
        if !self.cwd_dirty.remove(&process) {
            return;
        }
        let Ok(cwd) = std::fs::read_link(format!("/proc/{process}/cwd")) else {
            return;
        };
        let chdir = table::by_name("chdir").expect("chdir is in the event table");
        self.emit(Event {
            num: 0,
            ts: decode::now_ns(),
            tid,
            pid,
            etype: chdir,
            res: 0,
            params: vec![Param::Bytes(std::os::unix::ffi::OsStringExt::into_vec(
                cwd.into_os_string(),
            ))],
            truncated: 0,
            cpu: None,
        });
    }

    fn emit(&mut self, mut event: Event) {
        self.flush_cwd(event.tid, event.pid);
        self.fds.after(&event);
        self.num += 1;
        event.num = self.num;
        self.stats.events += 1;
        self.handler.event(&event);
    }

    fn tgid(&mut self, tid: i32) -> i32 {
        if let Some(t) = self.tasks.get(&tid) {
            return t.tgid;
        }
        let tgid = procinfo::tgid_of(tid).unwrap_or(tid);
        self.tasks.insert(
            tid,
            Task {
                tgid,
                ..Task::default()
            },
        );
        self.stats.tasks += 1;
        tgid
    }

    fn dispatch(&mut self, tid: i32, st: i32) {
        if status::exited(st) || status::signaled(st) {
            self.task_exit(tid, st);
            return;
        }
        if !status::stopped(st) {
            return;
        }
        self.stats.stops += 1;
        let sig = status::stop_sig(st);
        let event = st >> 16;
        if event == sys::EVENT_STOP && sig == libc::SIGTRAP && !self.tasks.contains_key(&tid) {
            // An auto-attached child's first stop, before its parent's clone event: resumed
            // by `clone_event`.
            self.early.insert(tid);
            return;
        }
        let tgid = self.tgid(tid);
        if sig == (libc::SIGTRAP | 0x80) {
            self.stats.exit_stops += 1;
            self.syscall_exit(tid);
            if self.widen_after_exit.remove(&tid) && !self.widen(tid, tgid, true) {
                return;
            }
            let _ = sys::cont(tid, 0);
            return;
        }
        match event {
            sys::EVENT_SECCOMP => {
                self.stats.seccomp_stops += 1;
                self.seccomp_stop(tid, tgid);
            }
            sys::EVENT_FORK | sys::EVENT_VFORK | sys::EVENT_CLONE => {
                self.clone_event(tid, tgid);
                let _ = sys::cont(tid, 0);
            }
            sys::EVENT_EXEC => {
                self.exec_event(tid);
                let _ = sys::cont(tid, 0);
            }
            sys::EVENT_STOP => {
                if sig == libc::SIGTRAP
                    && self.widen_at_first_stop.remove(&tid)
                    && !self.widen(tid, tgid, false)
                {
                    return;
                }
                if matches!(
                    sig,
                    libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
                ) {
                    // Group-stop: stay stopped until SIGCONT, as without a tracer.
                    let _ = sys::listen(tid);
                } else {
                    let _ = sys::cont(tid, 0);
                }
            }
            0 => {
                // Signal-delivery stop: deliver it unchanged.
                let _ = sys::cont(tid, sig);
            }
            _ => {
                let _ = sys::cont(tid, 0);
            }
        }
    }

    fn task_exit(&mut self, tid: i32, st: i32) {
        // Its `/proc/TID/mem` stays bound to its process's memory: a reused tid must not
        // read through it.
        sys::forget_memory(tid);
        // A held child killed before its clone event (a fatal signal to its whole process).
        self.early.remove(&tid);
        self.widen_at_first_stop.remove(&tid);
        self.widen_after_exit.remove(&tid);
        if self.tasks.get(&tid).is_some_and(|t| t.tgid == tid) {
            // The pid may be reused by a process that does not have the full filter.
            self.widened.remove(&tid);
        }
        let Some(task) = self.tasks.remove(&tid) else {
            self.release_orphaned_early();
            return;
        };
        self.release_orphaned_early();
        let (ret, sig, core) = if status::exited(st) {
            (status::exit_code(st), 0, false)
        } else {
            (0, status::term_sig(st), status::core_dumped(st))
        };
        if tid == task.tgid {
            self.fds.exit(i64::from(tid));
            self.foreign_ns.remove(&tid);
        }
        if tid == self.main {
            sys::stop_forwarding();
            self.main_status = Some(if status::exited(st) {
                WorkloadStatus::Exited(ret)
            } else {
                WorkloadStatus::Signaled {
                    signal: sig,
                    core_dumped: core,
                }
            });
        }
        let procexit = table::by_name("procexit").expect("procexit is in the event table");
        self.emit(Event {
            num: 0,
            ts: decode::now_ns(),
            tid: i64::from(tid),
            pid: i64::from(task.tgid),
            etype: procexit,
            res: 0,
            params: vec![
                Param::Int(i64::from(st)),
                Param::Int(i64::from(ret)),
                Param::Uint(u64::try_from(sig).unwrap_or(0)),
                Param::Uint(u64::from(core)),
            ],
            truncated: 0,
            cpu: None,
        });
    }

    /// A creator killed between making a child and reporting it never sends the clone event:
    /// held children whose creator (the process of a new thread, the parent of a new process)
    /// is no longer a live traced task are let go rather than kept stopped for ever.
    fn release_orphaned_early(&mut self) {
        if self.early.is_empty() {
            return;
        }
        let gone: Vec<i32> = self
            .early
            .iter()
            .copied()
            .filter(|&child| {
                !procinfo::tgid_ppid(child).is_some_and(|(tgid, ppid)| {
                    (tgid != child && self.tasks.contains_key(&tgid))
                        || self.tasks.contains_key(&ppid)
                })
            })
            .collect();
        for child in gone {
            self.early.remove(&child);
            let _ = sys::cont(child, 0);
        }
    }

    fn seccomp_stop(&mut self, tid: i32, tgid: i32) {
        let Ok(mut regs) = sys::get_regs(tid) else {
            return;
        };
        let nr = regs.nr();
        let Ok(nr16) = u16::try_from(nr) else {
            let _ = sys::cont(tid, 0);
            return;
        };
        if self.learn {
            self.used.insert(nr16);
        }
        // `unshare(CLONE_NEWPID)`, `setns`: later children may be elsewhere (whether or not
        // the call succeeds, which only makes the check at the next fork unneeded).
        if (nr == SYS_UNSHARE && decode::arg(&regs, 0) & CLONE_NEWPID != 0) || nr == SYS_SETNS {
            self.foreign_ns.insert(tgid);
        }
        // Entering new namespaces: the full filter once the call has succeeded (both are
        // always traced and reported, so their exit stop comes).
        if self.widening.is_some()
            && !self.widened.contains(&tgid)
            && ((nr == SYS_UNSHARE && decode::arg(&regs, 0) & ENTERS_ELSEWHERE != 0)
                || nr == SYS_SETNS)
        {
            self.widen_after_exit.insert(tid);
        }
        let slot = usize::from(nr16);
        let report = self.report.get(slot).copied().unwrap_or(false);
        let judged = self.judged.get(slot).copied().unwrap_or(false);
        let Some(etype) = table::by_syscall_nr(nr16).filter(|_| report || judged) else {
            let _ = sys::cont(tid, 0);
            return;
        };
        if is_exec(nr) {
            let head = self.exec_head(tid, etype, &regs);
            if judged {
                let predicted = self.predicted_exec(tid, tgid, etype, &head, &regs);
                if self.judge(tid, tgid, &mut regs, predicted) {
                    return;
                }
            }
            // A success arrives as the exec event whatever happens here; the exit stop only
            // reports a failure, which the handler may rule out now.
            let failure_matters = report && {
                let mut params = head.clone();
                params.resize(etype.spec().params.len(), Param::None);
                let probe = Event {
                    // Numbered like the event it would become (never 0 in a stream).
                    num: self.num + 1,
                    ts: decode::now_ns(),
                    tid: i64::from(tid),
                    pid: i64::from(tgid),
                    etype,
                    res: 0,
                    params,
                    truncated: 0,
                    cpu: None,
                };
                self.fix_fds(&probe);
                let wanted = self.handler.wants_result(&probe);
                if !wanted {
                    self.stats.skipped_exits += 1;
                }
                wanted
            };
            if let Some(t) = self.tasks.get_mut(&tid) {
                t.exec_head = Some((etype, head));
                if failure_matters {
                    // A success arrives as the exec event (which drops this); a failure at
                    // the exit stop.
                    t.pending = Some(Pending {
                        event: Event {
                            num: 0,
                            ts: 0,
                            tid: i64::from(tid),
                            pid: i64::from(tgid),
                            etype,
                            res: 0,
                            params: Vec::new(),
                            truncated: 0,
                            cpu: None,
                        },
                        regs,
                    });
                    let _ = sys::resume_to_exit(tid);
                    return;
                }
            }
            let _ = sys::cont(tid, 0);
            return;
        }
        let mut event = decode::entry_event(tid, tid, tgid, etype, &regs);
        if judged {
            let mut predicted = event.clone();
            if etype.spec().res_kind == vigil_event::ParamKind::Fd {
                predicted.res = procinfo::lowest_free_fd(tgid);
            }
            if self.judge(tid, tgid, &mut regs, predicted) {
                return;
            }
        }
        let cwd_call = match nr16 {
            CHDIR => Some(0),
            FCHDIR => Some(1),
            _ => None,
        };
        if cwd_call.is_some_and(|i| self.cwd_state_only[i]) {
            // Only the state needs it, and only its effect: read from `/proc` before this
            // process's next event, unless the handler wants the event itself (a capture).
            self.fix_fds(&event);
            event.num = self.num + 1;
            if !self.handler.wants_result(&event) {
                self.stats.skipped_exits += 1;
                self.cwd_dirty.insert(tgid);
                let _ = sys::cont(tid, 0);
                return;
            }
        }
        if report && may_skip_exit(nr) {
            self.fix_fds(&event);
            // Numbered like the event it would become (`evt.num` is never 0 in a stream).
            event.num = self.num + 1;
            if !self.handler.wants_result(&event) {
                self.stats.skipped_exits += 1;
                let _ = sys::cont(tid, 0);
                return;
            }
        }
        if report {
            event.tid = i64::from(tid);
            if let Some(t) = self.tasks.get_mut(&tid) {
                t.pending = Some(Pending { event, regs });
            }
            let _ = sys::resume_to_exit(tid);
        } else {
            let _ = sys::cont(tid, 0);
        }
    }

    /// Consults the handler; `true` when the syscall was denied or the process killed (the
    /// tracee has been dealt with).
    fn judge(&mut self, tid: i32, tgid: i32, regs: &mut Regs, mut predicted: Event) -> bool {
        self.fix_fds(&predicted);
        self.stats.judged += 1;
        self.num += 1;
        predicted.num = self.num;
        match self.handler.judge(&predicted) {
            Verdict::Allow => false,
            Verdict::Deny(errno) => {
                self.stats.denied += 1;
                // Syscall number -1 skips the call; the result register is its result.
                regs.skip_call(-i64::from(errno));
                let _ = sys::set_regs(tid, regs);
                let _ = sys::cont(tid, 0);
                true
            }
            Verdict::Kill => {
                self.stats.killed += 1;
                let _ = sys::kill(tgid, libc::SIGKILL);
                true
            }
        }
    }

    fn exec_head(&mut self, tid: i32, etype: EventType, regs: &Regs) -> Vec<Param> {
        let spec = etype.spec();
        let n_head = spec.params.len() - 23;
        let mut head = Vec::with_capacity(n_head);
        // An unreadable name is counted by `sys::read_mem` (`read_faults`).
        let path_arg = |i: usize| match decode::read_cstr(tid, decode::arg(regs, i)) {
            Some((s, _)) => Param::Bytes(s),
            None => Param::None,
        };
        if spec.name == "execveat" {
            let dirfd = Param::Int(i64::from(decode::arg(regs, 0) as u32 as i32));
            let path = path_arg(1);
            head.extend([dirfd, path, Param::Uint(decode::arg(regs, 4))]);
        } else {
            head.push(path_arg(0));
        }
        head
    }

    /// The exec event as it would be if the exec succeeded: the current process with the new
    /// file name, argv and comm.
    fn predicted_exec(
        &mut self,
        tid: i32,
        tgid: i32,
        etype: EventType,
        head: &[Param],
        regs: &Regs,
    ) -> Event {
        let mut event = procinfo::exec_event(tgid, etype, Some(head.to_vec()));
        event.tid = i64::from(tid);
        let spec = etype.spec();
        let argv_reg = if spec.name == "execveat" { 2 } else { 1 };
        let (mut argv, _) = decode::read_str_array(tid, decode::arg(regs, argv_reg));
        let (envp, _) = decode::read_str_array(tid, decode::arg(regs, argv_reg + 1));
        let filename = match head.get(if spec.name == "execveat" { 1 } else { 0 }) {
            Some(Param::Bytes(b)) => b.clone(),
            _ => Vec::new(),
        };
        let exe = if argv.is_empty() {
            filename.clone()
        } else {
            argv.remove(0)
        };
        let comm: Vec<u8> = {
            let base = filename.rsplit(|&c| c == b'/').next().unwrap_or(&filename);
            base[..base.len().min(15)].to_vec()
        };
        let mut set = |name: &str, value: Param| {
            if let Some(i) = spec.param_index(name) {
                event.params[i] = value;
            }
        };
        set("exe", Param::Bytes(exe));
        set("args", Param::List(argv));
        set("env", Param::List(envp));
        set("comm", Param::Bytes(comm));
        // Resolved by the state engine from the raw path and the cwd.
        set("trusted_exepath", Param::None);
        event
    }

    fn syscall_exit(&mut self, tid: i32) {
        let Some(Pending { mut event, regs }) =
            self.tasks.get_mut(&tid).and_then(|t| t.pending.take())
        else {
            return;
        };
        let Ok(now) = sys::get_regs(tid) else {
            return;
        };
        let res = now.ret();
        // Interrupted, to be restarted: the restart stops at the filter again.
        if (-516..=-512).contains(&res) {
            return;
        }
        if is_exec(regs.nr()) {
            // A successful exec was reported by its exec event (which dropped the pending
            // entry); this is a failure: the caller's unchanged image with the new name.
            let head = self
                .tasks
                .get_mut(&tid)
                .and_then(|t| t.exec_head.take())
                .map(|(_, h)| h);
            if res >= 0 {
                return;
            }
            let mut failed =
                procinfo::exec_event(i32::try_from(event.pid).unwrap_or(tid), event.etype, head);
            failed.tid = i64::from(tid);
            failed.res = res;
            self.emit_checked(failed);
            return;
        }
        if is_clone(regs.nr()) {
            // Successes are reported by the clone event stop (which dropped the pending
            // entry), except for `CLONE_UNTRACED` children; a failure only here.
            let n = event.etype.spec().params.len();
            event.params.resize(n, Param::None);
            if res > 0 && n >= 2 {
                let (vtid, vpid) = procinfo::ns_ids(res).unwrap_or((Param::None, Param::None));
                event.params[n - 2] = vtid;
                event.params[n - 1] = vpid;
            }
            event.res = res;
            event.ts = decode::now_ns();
            self.emit(event);
            return;
        }
        decode::finish(&mut event, tid, &regs, res);
        self.emit_checked(event);
    }

    fn clone_event(&mut self, tid: i32, tgid: i32) {
        let Ok(child) = sys::event_msg(tid) else {
            return;
        };
        let Ok(child) = i32::try_from(child) else {
            return;
        };
        // The entry stop's pending event (when clone is reported) is superseded by this one.
        if let Some(t) = self.tasks.get_mut(&tid) {
            t.pending = None;
        }
        let regs = sys::get_regs(tid).ok();
        let nr = regs.map_or(56, |r| r.nr());
        let (name, flags) = match nr {
            57 => ("fork", SIGCHLD),
            58 => ("vfork", CLONE_VM | CLONE_VFORK | SIGCHLD),
            435 => (
                "clone3",
                regs.and_then(|r| {
                    let mut b = [0u8; 8];
                    match sys::read_mem(tid, r.arg(0), &mut b) {
                        Ok(8) => Some(u64::from_ne_bytes(b)),
                        _ => None,
                    }
                })
                .unwrap_or(0),
            ),
            _ => ("clone", regs.map_or(0, |r| r.arg(0))),
        };
        let child_tgid = if flags & CLONE_THREAD != 0 {
            tgid
        } else {
            child
        };
        if !self.tasks.contains_key(&child) {
            self.stats.tasks += 1;
        }
        self.tasks.entry(child).or_default().tgid = child_tgid;
        if child_tgid != tgid {
            self.fds.fork(i64::from(tgid), i64::from(child_tgid));
        }
        // The full filter: inherited from a widened parent; added at the first stop of a
        // child cloned into new namespaces or another cgroup.
        let mut widen_child = false;
        if self.widened.contains(&tgid) {
            self.widened.insert(child_tgid);
        } else if self.widening.is_some() && flags & ENTERS_ELSEWHERE != 0 {
            widen_child = true;
        }
        let etype = table::by_name(name).expect("clone-family events are in the table");
        // The child's ids in its own pid namespace: the global ones unless it may be in
        // another one.
        let may_be_elsewhere = self.foreign_ns.contains(&tgid) || flags & CLONE_NEWPID != 0;
        let (vtid, vpid) = if may_be_elsewhere && !procinfo::in_vigil_pid_ns(i64::from(child)) {
            self.foreign_ns.insert(child_tgid);
            procinfo::ns_ids(i64::from(child)).unwrap_or((Param::None, Param::None))
        } else {
            (
                Param::Int(i64::from(child)),
                Param::Int(i64::from(child_tgid)),
            )
        };
        let params = match name {
            "fork" | "vfork" => vec![vtid, vpid],
            _ => vec![Param::Uint(flags), vtid, vpid],
        };
        self.emit(Event {
            num: 0,
            ts: decode::now_ns(),
            tid: i64::from(tid),
            pid: i64::from(tgid),
            etype,
            res: i64::from(child),
            params,
            truncated: 0,
            cpu: None,
        });
        if self.early.remove(&child) {
            if widen_child && !self.widen(child, child_tgid, false) {
                return;
            }
            let _ = sys::cont(child, 0);
        } else if widen_child {
            self.widen_at_first_stop.insert(child);
        }
    }

    /// Adds the full filter ([`Tracer::widening`]) to stopped thread `tid` of process `tgid`
    /// by running a `seccomp(2)` call in it: at a syscall-exit stop (`after_syscall`: only if
    /// that call succeeded) or at a new child's first stop, both of which leave the thread
    /// just past a `syscall` instruction. The program goes below the thread's stack red
    /// zone; the registers are restored after. Signals that arrive meanwhile are sent again.
    /// `false` when the thread is gone (its status is handled next): do not resume it.
    fn widen(&mut self, tid: i32, tgid: i32, after_syscall: bool) -> bool {
        let Some(prog) = self.widening.clone() else {
            return true;
        };
        let Ok(regs) = sys::get_regs(tid) else {
            return true;
        };
        if after_syscall && regs.ret() < 0 {
            return true;
        }
        let threads = self.tasks.values().filter(|t| t.tgid == tgid).count();
        let flags = if threads > 1 {
            SECCOMP_FILTER_FLAG_TSYNC
        } else {
            0
        };
        let outcome = self.inject_seccomp(tid, tgid, &regs, &prog, flags);
        let outcome = match outcome {
            // A thread that cannot synchronise: this thread and its future children at least.
            Ok(r) if r > 0 && flags != 0 => self.inject_seccomp(tid, tgid, &regs, &prog, 0),
            other => other,
        };
        match outcome {
            Ok(0) => {
                self.widened.insert(tgid);
                self.stats.widened += 1;
                true
            }
            Ok(r) => {
                self.stats.widen_failures += 1;
                let why = format!("seccomp(2) in the process returned {r}");
                self.handler.widening_failed(i64::from(tgid), &why);
                true
            }
            Err(Injection::Gone) => false,
            Err(Injection::Failed(why)) => {
                self.stats.widen_failures += 1;
                let _ = sys::set_regs(tid, &regs);
                self.handler.widening_failed(i64::from(tgid), &why);
                true
            }
        }
    }

    /// Runs `seccomp(SECCOMP_SET_MODE_FILTER, flags, prog)` in stopped thread `tid`, whose
    /// registers are `regs` (restored afterwards); returns the call's result.
    fn inject_seccomp(
        &mut self,
        tid: i32,
        tgid: i32,
        regs: &Regs,
        prog: &[sys::SockFilter],
        flags: u64,
    ) -> Result<i64, Injection> {
        let failed = |what: &str, e: std::io::Error| Injection::Failed(format!("{what}: {e}"));
        let insn_len = sys::SYSCALL_INSN.len();
        let at = regs.pc().wrapping_sub(insn_len as u64);
        let mut insn = [0u8; 4];
        let insn = &mut insn[..insn_len];
        match sys::read_mem(tid, at, insn) {
            Ok(n) if n == insn_len && insn == sys::SYSCALL_INSN => {}
            Ok(_) => {
                return Err(Injection::Failed(
                    "the thread is not just past a syscall instruction".into(),
                ))
            }
            Err(e) => return Err(failed("cannot read its code", e)),
        }
        // Below the 128-byte red zone, 16-byte aligned.
        let size = 16 + 8 * prog.len() as u64;
        let addr = regs.sp().wrapping_sub(128 + size) & !15;
        let image = crate::filter::fprog_image(prog, addr);
        match sys::write_mem(tid, addr, &image) {
            Ok(n) if n == image.len() => {}
            Ok(_) => return Err(Injection::Failed("its stack is too small".into())),
            Err(e) => return Err(failed("cannot write to its stack", e)),
        }
        let mut call = *regs;
        call.set_call_at(at, NATIVE_SYS_SECCOMP);
        call.set_arg(0, SECCOMP_SET_MODE_FILTER);
        call.set_arg(1, flags);
        call.set_arg(2, addr);
        sys::set_regs(tid, &call).map_err(|e| failed("cannot set its registers", e))?;
        sys::resume_to_exit(tid).map_err(|e| failed("cannot resume it", e))?;
        let mut entered = false;
        let mut signals = Vec::new();
        let result = loop {
            let st = match sys::wait_tid(tid) {
                Ok(st) => st,
                Err(e) => return Err(failed("cannot wait for it", e)),
            };
            if status::exited(st) || status::signaled(st) {
                self.deferred.push((tid, st));
                return Err(Injection::Gone);
            }
            if !status::stopped(st) {
                continue;
            }
            let sig = status::stop_sig(st);
            let event = st >> 16;
            if sig == (libc::SIGTRAP | 0x80) {
                if entered {
                    break sys::get_regs(tid)
                        .map(|r| r.ret())
                        .map_err(|e| failed("cannot read its registers", e))?;
                }
                entered = true;
            } else if event == 0 {
                // A signal for the thread: held back, sent again once it is restored.
                signals.push(sig);
            }
            sys::resume_to_exit(tid).map_err(|e| failed("cannot resume it", e))?;
        };
        sys::set_regs(tid, regs).map_err(|e| failed("cannot restore its registers", e))?;
        for sig in signals {
            let _ = sys::tgkill(tgid, tid, sig);
        }
        Ok(result)
    }

    fn exec_event(&mut self, tid: i32) {
        // After exec the thread has the process's id; the message is its former tid.
        let former = sys::event_msg(tid)
            .ok()
            .and_then(|m| i32::try_from(m).ok())
            .unwrap_or(tid);
        // A new image, perhaps new credentials: what worked for its memory is found again.
        sys::forget_memory(tid);
        sys::forget_memory(former);
        let mut head = None;
        if former != tid {
            if let Some(t) = self.tasks.remove(&former) {
                head = t.exec_head;
            }
        }
        let task = self.tasks.entry(tid).or_default();
        task.tgid = tid;
        task.pending = None;
        if let Some(h) = task.exec_head.take() {
            head = head.or(Some(h));
        }
        let (etype, params) = match head {
            Some((etype, params)) => (etype, Some(params)),
            None => (
                table::by_name("execve").expect("execve is in the event table"),
                None,
            ),
        };
        let event = procinfo::exec_event(tid, etype, params);
        // The new image's event carries its working directory, read from `/proc`.
        self.cwd_dirty.remove(&tid);
        self.emit(event);
    }
}

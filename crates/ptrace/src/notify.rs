//! Prototype of the seccomp user-notify mechanism (`Mechanism::Notify`).
//!
//! The filter returns `SECCOMP_RET_USER_NOTIF` for the traced syscalls; the supervisor
//! receives each one on the listener fd, reads the arguments, may refuse it (`-EPERM`) and
//! otherwise lets it run (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). There are no exit stops, so
//! events carry the predicted result (as judged entry events do), and no ptrace events:
//! a process is described from `/proc` the first time it makes a notified syscall (an exec
//! event built from its current image), exec without fork and thread exits are not seen.
//! Arguments are read while the task waits, but other threads of the same process could
//! change them before the syscall runs (the usual user-notify TOCTOU caveat).
//! It leaves ptrace free for the workload's own debuggers.

use std::collections::{HashMap, HashSet};

use vigil_event::{table, Event, Param};

use crate::sys::{self, status};
use crate::{decode, procinfo, Handler, RunError, RunStats, Verdict, WorkloadStatus};

/// Syscalls the child itself makes between installing the filter and exec (`read`, `write`,
/// `close` of the handshake): never notified, or the handshake would wait for itself.
pub(crate) const HANDSHAKE: &[u16] = &[0, 1, 3];

pub(crate) struct Supervisor<'a> {
    pub(crate) child: i32,
    pub(crate) pidfd: i32,
    pub(crate) listener: i32,
    pub(crate) report: Vec<bool>,
    pub(crate) judged: Vec<bool>,
    pub(crate) handler: &'a mut dyn Handler,
    pub(crate) stats: RunStats,
    num: u64,
    /// tid → tgid of tasks seen.
    known: HashMap<i32, i32>,
    /// Processes already described to the handler.
    described: HashSet<i32>,
}

impl<'a> Supervisor<'a> {
    pub(crate) fn new(
        child: i32,
        pidfd: i32,
        listener: i32,
        report: Vec<bool>,
        judged: Vec<bool>,
        handler: &'a mut dyn Handler,
    ) -> Supervisor<'a> {
        let mut known = HashMap::new();
        known.insert(child, child);
        Supervisor {
            child,
            pidfd,
            listener,
            report,
            judged,
            handler,
            stats: RunStats {
                tasks: 1,
                ..RunStats::default()
            },
            num: 0,
            known,
            described: HashSet::new(),
        }
    }

    fn emit(&mut self, mut event: Event) {
        self.num += 1;
        event.num = self.num;
        self.stats.events += 1;
        self.handler.event(&event);
    }

    pub(crate) fn run(&mut self) -> Result<WorkloadStatus, RunError> {
        let mut main_status = None;
        let mut listening = true;
        loop {
            let mut fds = Vec::with_capacity(2);
            if listening {
                fds.push(self.listener);
            }
            if main_status.is_none() {
                fds.push(self.pidfd);
            }
            if fds.is_empty() {
                break;
            }
            let revents = sys::poll_in(&fds).map_err(RunError::Wait)?;
            let mut i = 0;
            if listening {
                let r = revents[0];
                if r & libc::POLLIN != 0 {
                    if let Some(n) = sys::notif_recv(self.listener).map_err(RunError::Wait)? {
                        self.notification(&n);
                    }
                } else if r & (libc::POLLHUP | libc::POLLERR) != 0 {
                    // Every task using the filter is gone.
                    listening = false;
                }
                i = 1;
            }
            if main_status.is_none() && revents.get(i).is_some_and(|&r| r != 0) {
                let st = sys::wait_child(self.child).map_err(RunError::Wait)?;
                sys::stop_forwarding();
                main_status = Some(if status::exited(st) {
                    WorkloadStatus::Exited(status::exit_code(st))
                } else {
                    WorkloadStatus::Signaled {
                        signal: status::term_sig(st),
                        core_dumped: status::core_dumped(st),
                    }
                });
                let procexit = table::by_name("procexit").expect("procexit is in the table");
                let (ret, sig) = if status::exited(st) {
                    (status::exit_code(st), 0)
                } else {
                    (0, status::term_sig(st))
                };
                self.emit(Event {
                    num: 0,
                    ts: decode::now_ns(),
                    tid: i64::from(self.child),
                    pid: i64::from(self.child),
                    etype: procexit,
                    res: 0,
                    params: vec![
                        Param::Int(i64::from(st)),
                        Param::Int(i64::from(ret)),
                        Param::Uint(u64::try_from(sig).unwrap_or(0)),
                        Param::Uint(u64::from(status::core_dumped(st))),
                    ],
                    truncated: 0,
                    cpu: None,
                });
            }
        }
        main_status.ok_or(RunError::NoStatus)
    }

    fn notification(&mut self, n: &sys::Notif) {
        self.stats.stops += 1;
        self.stats.seccomp_stops += 1;
        let tid = n.tid;
        let tgid = match self.known.get(&tid) {
            Some(&g) => g,
            None => {
                let g = procinfo::tgid_of(tid).unwrap_or(tid);
                self.known.insert(tid, g);
                self.stats.tasks += 1;
                g
            }
        };
        if self.described.insert(tgid) {
            // A process not seen yet: describe its current image.
            let execve = table::by_name("execve").expect("execve is in the table");
            let mut e = procinfo::exec_event(tgid, execve, None);
            e.tid = i64::from(tid);
            self.emit(e);
        }
        let Ok(nr) = u16::try_from(n.nr) else {
            sys::notif_send(self.listener, n.id, 0);
            return;
        };
        let slot = usize::from(nr);
        let report = self.report.get(slot).copied().unwrap_or(false);
        let judged = self.judged.get(slot).copied().unwrap_or(false);
        let Some(etype) = table::by_syscall_nr(nr).filter(|_| report || judged) else {
            sys::notif_send(self.listener, n.id, 0);
            return;
        };
        let mut regs = sys::zero_regs();
        regs.orig_rax = u64::from(nr);
        regs.rdi = n.args[0];
        regs.rsi = n.args[1];
        regs.rdx = n.args[2];
        regs.r10 = n.args[3];
        regs.r8 = n.args[4];
        regs.r9 = n.args[5];
        let mut event = decode::entry_event(tid, tid, tgid, etype, &regs);
        if etype.spec().res_kind == vigil_event::ParamKind::Fd {
            event.res = procinfo::lowest_free_fd(tgid);
        }
        if judged {
            self.stats.judged += 1;
            self.num += 1;
            event.num = self.num;
            match self.handler.judge(&event) {
                Verdict::Allow => {}
                Verdict::Deny(errno) => {
                    self.stats.denied += 1;
                    sys::notif_send(self.listener, n.id, errno);
                    return;
                }
                Verdict::Kill => {
                    self.stats.killed += 1;
                    let _ = sys::kill(tgid, libc::SIGKILL);
                    sys::notif_send(self.listener, n.id, libc::EPERM);
                    return;
                }
            }
        }
        // Answer first: the workload runs on while the event is processed.
        sys::notif_send(self.listener, n.id, 0);
        if report {
            self.emit(event);
        }
    }
}

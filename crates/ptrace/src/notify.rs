//! The seccomp user-notify mechanism (`Mechanism::Notify`).
//!
//! The filter returns `SECCOMP_RET_USER_NOTIF` for the traced syscalls; the supervisor
//! receives each one on the listener fd, reads the arguments, may refuse it (`-EPERM`) and
//! otherwise lets it run (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`). There are no exit stops, so
//! events carry the predicted result (as judged entry events do), and no ptrace events; the
//! process lifecycle comes from notifications ([`LIFECYCLE`]) and `/proc`:
//! - a process is first seen at its first notified syscall: a fork of a process already seen
//!   (its parent, with the same executable and command line) is reported as a `fork` from the
//!   parent, and anything else as an `execve` event built from its current image;
//! - an `execve`/`execveat` marks the process, whose image is read again at its next
//!   notification (or exit) and reported as an `execve` event if it changed (a failed exec
//!   changes nothing);
//! - `exit`/`exit_group` give a `procexit` with the status the call passes (a death by signal
//!   is seen only for the process Vigil started, through its pidfd).
//!
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

/// Always notified: `execve`, `execveat`, `exit`, `exit_group` (see the module
/// documentation).
pub(crate) const LIFECYCLE: [u16; 4] = [59, 322, 60, 231];

const SYS_EXECVE: i32 = 59;
const SYS_EXECVEAT: i32 = 322;
const SYS_EXIT: i32 = 60;
const SYS_EXIT_GROUP: i32 = 231;

/// What identifies a process's image: its executable's path and its command line.
type Image = Option<(std::path::PathBuf, Vec<u8>)>;

fn image_of(pid: i32) -> Image {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some((exe, cmdline))
}

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
    /// Processes already described to the handler, with their image then.
    described: HashMap<i32, Image>,
    /// Processes that called `execve`/`execveat` since their image was last read.
    exec_pending: HashSet<i32>,
    /// Processes whose exit was reported (their `exit_group`).
    exited: HashSet<i32>,
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
            described: HashMap::new(),
            exec_pending: HashSet::new(),
            exited: HashSet::new(),
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
                if self.exited.contains(&self.child) {
                    // Reported at its exit_group already.
                    continue;
                }
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
        let exec = matches!(n.nr, SYS_EXECVE | SYS_EXECVEAT);
        // A process first seen at an exec is described after it (its next notification),
        // not as the image it is leaving.
        if !exec || self.described.contains_key(&tgid) {
            self.observe(tid, tgid);
        }
        if exec && !self.judged_nr(n.nr) {
            self.exec_pending.insert(tgid);
            sys::notif_send(self.listener, n.id, 0);
            return;
        }
        if matches!(n.nr, SYS_EXIT | SYS_EXIT_GROUP) {
            let code = n.args[0] as i32 & 0xff;
            sys::notif_send(self.listener, n.id, 0);
            self.exit(tid, tgid, code, n.nr == SYS_EXIT_GROUP);
            return;
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
        let regs = sys::Regs::of_call(nr, n.args);
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
        if matches!(n.nr, SYS_EXECVE | SYS_EXECVEAT) {
            // Judged and allowed: the new image is read at the next notification.
            self.exec_pending.insert(tgid);
            sys::notif_send(self.listener, n.id, 0);
            return;
        }
        // Answer first: the workload runs on while the event is processed.
        sys::notif_send(self.listener, n.id, 0);
        if report {
            self.emit(event);
        }
    }

    fn judged_nr(&self, nr: i32) -> bool {
        usize::try_from(nr)
            .ok()
            .and_then(|slot| self.judged.get(slot).copied())
            .unwrap_or(false)
    }

    /// Reports what changed about process `tgid` since its last notification: its first
    /// appearance (a fork of its parent, or an image), or a new image after an exec.
    fn observe(&mut self, tid: i32, tgid: i32) {
        let execve = table::by_name("execve").expect("execve is in the table");
        if !self.described.contains_key(&tgid) {
            let image = image_of(tgid);
            let parent = procinfo::tgid_ppid(tgid).map(|(_, ppid)| ppid);
            let parent_image = parent.and_then(|p| self.described.get(&p).map(|i| (p, i)));
            let mut same_as_parent = false;
            if let Some((ppid, pimage)) = parent_image {
                same_as_parent = pimage.is_some() && *pimage == image;
                let fork = table::by_name("fork").expect("fork is in the table");
                self.emit(Event {
                    num: 0,
                    ts: decode::now_ns(),
                    tid: i64::from(ppid),
                    pid: i64::from(ppid),
                    etype: fork,
                    res: i64::from(tgid),
                    params: vec![Param::Int(i64::from(tgid)), Param::Int(i64::from(tgid))],
                    truncated: 0,
                    cpu: None,
                });
            }
            if !same_as_parent {
                let mut e = procinfo::exec_event(tgid, execve, None);
                e.tid = i64::from(tid);
                self.emit(e);
            }
            self.described.insert(tgid, image);
            self.exec_pending.remove(&tgid);
        } else if self.exec_pending.remove(&tgid) {
            let image = image_of(tgid);
            if self.described.get(&tgid) != Some(&image) {
                let mut e = procinfo::exec_event(tgid, execve, None);
                e.tid = i64::from(tid);
                self.emit(e);
                self.described.insert(tgid, image);
            }
        }
    }

    /// Thread `tid` of process `tgid` calls `exit` (`group`: `exit_group`) with `code`.
    fn exit(&mut self, tid: i32, tgid: i32, code: i32, group: bool) {
        // Kept `/proc/TID/mem` files stay bound to this process's memory: reused tids must
        // not read through them.
        sys::forget_memory(tid);
        if group {
            sys::forget_memory(tgid);
        }
        let procexit = table::by_name("procexit").expect("procexit is in the table");
        let who = if group { tgid } else { tid };
        self.emit(Event {
            num: 0,
            ts: decode::now_ns(),
            tid: i64::from(who),
            pid: i64::from(tgid),
            etype: procexit,
            res: 0,
            params: vec![
                Param::Int(i64::from(code << 8)),
                Param::Int(i64::from(code)),
                Param::Uint(0),
                Param::Uint(0),
            ],
            truncated: 0,
            cpu: None,
        });
        if group {
            self.described.remove(&tgid);
            self.exec_pending.remove(&tgid);
            self.known.retain(|_, g| *g != tgid);
            self.exited.insert(tgid);
        } else {
            self.known.remove(&tid);
        }
    }
}

//! Keeping the state engine's descriptor table honest without tracing `close`/`dup`/`fcntl`.
//!
//! The ledger remembers, per process and descriptor, the object (device, inode) the driver
//! last told the state engine about. Before an event that *uses* a descriptor (an fd or dirfd
//! argument) is delivered, the descriptor's current object is read from `/proc/PID/fd/N`
//! while the tracee is stopped; if it is not the remembered one (the fd was closed and
//! reused by an untraced call), a synthetic `close` of it is delivered first, so the state
//! forgets the stale entry: `fd.*` fields then read as unknown instead of describing the
//! wrong object. The new object is then read from `/proc` ([`Fix::Learn`]), so the state
//! engine knows descriptors whose creating call it never saw (an open whose exit stop was
//! not needed, an untraced `dup`) the way a `/proc` snapshot describes them.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;

use vigil_event::{table, Event, FdInfo, Param, ParamKind};

/// What to tell the state engine before an event, so its descriptor table is right.
pub(crate) enum Fix {
    /// Forget the descriptor (a synthetic `close`).
    Close(Event),
    /// Process `.0` has this descriptor now (read from `/proc`).
    Learn(i64, FdInfo),
}

/// `(process, fd)` → `(dev, ino)` of the object the state engine knows for it.
#[derive(Default)]
pub(crate) struct Ledger {
    known: HashMap<(i64, i64), (u64, u64)>,
}

fn object(pid: i64, fd: i64) -> Option<(u64, u64)> {
    std::fs::metadata(format!("/proc/{pid}/fd/{fd}"))
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Parameters that name a descriptor the call uses (not one it creates or overwrites).
fn used_fds(event: &Event) -> impl Iterator<Item = i64> + '_ {
    let spec = event.etype.spec();
    spec.params
        .iter()
        .enumerate()
        .filter(|(_, p)| p.kind == ParamKind::Fd && !matches!(p.name, "fd1" | "fd2" | "newfd"))
        .filter_map(|(i, _)| match event.param(i) {
            Param::Int(fd) if *fd >= 0 => Some(*fd),
            _ => None,
        })
}

impl Ledger {
    /// Records every descriptor process `pid` has now (the start of tracing).
    pub(crate) fn record_all(&mut self, pid: i64) {
        let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
            return;
        };
        for entry in dir.flatten() {
            if let Some(fd) = entry.file_name().to_str().and_then(|s| s.parse().ok()) {
                if let Some(obj) = object(pid, fd) {
                    self.known.insert((pid, fd), obj);
                }
            }
        }
    }

    /// The fixes to deliver before `event`: for each descriptor it uses that is not the
    /// object last told, a synthetic `close`, then (when it is open) the object it is now —
    /// for a socket, read through a copy of it ([`crate::decode::describe_socket`]: a socket
    /// made by an untraced `accept`, dup'ed onto stdout, is a socket to the rules).
    pub(crate) fn stale_before(&mut self, event: &Event) -> Vec<Fix> {
        let mut out = Vec::new();
        let Some(close) = table::by_name("close") else {
            return out;
        };
        let fds: Vec<i64> = used_fds(event).collect();
        for fd in fds {
            let now = object(event.pid, fd);
            let before = self.known.get(&(event.pid, fd)).copied();
            if now.is_some() && now == before {
                continue;
            }
            match now {
                Some(obj) => {
                    self.known.insert((event.pid, fd), obj);
                }
                None => {
                    self.known.remove(&(event.pid, fd));
                }
            }
            out.push(Fix::Close(Event {
                num: 0,
                ts: event.ts,
                tid: event.tid,
                pid: event.pid,
                etype: close,
                res: 0,
                params: vec![Param::Int(fd)],
                truncated: 0,
                cpu: None,
            }));
            if now.is_some() {
                if let Some(mut info) = vigil_procfs::read_fd(event.pid, fd) {
                    if info.name.starts_with(b"socket:") {
                        // A socket whose creating call was not traced (`accept`, …).
                        if let Some((kind, tuple, name)) =
                            crate::decode::describe_socket(event.pid, fd)
                        {
                            info.kind = kind;
                            info.tuple = tuple;
                            info.name = name;
                            out.push(Fix::Learn(event.pid, info));
                        }
                    } else {
                        out.push(Fix::Learn(event.pid, info));
                    }
                }
            }
        }
        out
    }

    /// Records the descriptors a delivered, successful event created.
    pub(crate) fn after(&mut self, event: &Event) {
        if event.res < 0 {
            return;
        }
        let spec = event.etype.spec();
        let mut created = Vec::new();
        if spec.res_kind == ParamKind::Fd {
            // Opens carry the object's identity already (read at the exit stop).
            if let (Param::Uint(dev), Param::Uint(ino)) =
                (event.param_by_name("dev"), event.param_by_name("ino"))
            {
                self.known.insert((event.pid, event.res), (*dev, *ino));
                return;
            }
            created.push(event.res);
        }
        for name in ["fd1", "fd2"] {
            if let Param::Int(fd) = event.param_by_name(name) {
                created.push(*fd);
            }
        }
        if matches!(spec.name, "dup" | "dup2" | "dup3") {
            created.push(event.res);
        }
        if spec.name == "fcntl" && event.res > 0 {
            created.push(event.res);
        }
        for fd in created {
            match object(event.pid, fd) {
                Some(obj) => {
                    self.known.insert((event.pid, fd), obj);
                }
                None => {
                    self.known.remove(&(event.pid, fd));
                }
            }
        }
    }

    /// A new process inherits its parent's descriptors.
    pub(crate) fn fork(&mut self, parent: i64, child: i64) {
        let inherited: Vec<(i64, (u64, u64))> = self
            .known
            .iter()
            .filter(|((p, _), _)| *p == parent)
            .map(|((_, fd), obj)| (*fd, *obj))
            .collect();
        for (fd, obj) in inherited {
            self.known.insert((child, fd), obj);
        }
    }

    /// A process is gone.
    pub(crate) fn exit(&mut self, pid: i64) {
        self.known.retain(|(p, _), _| *p != pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    fn ev(name: &str, pid: i64, res: i64, params: Vec<Param>) -> Event {
        Event {
            num: 1,
            ts: 1,
            tid: pid,
            pid,
            etype: table::by_name(name).unwrap(),
            res,
            params,
            truncated: 0,
            cpu: None,
        }
    }

    #[test]
    fn reused_descriptors_are_closed_first() {
        let me = i64::from(std::process::id());
        let mut ledger = Ledger::default();
        // A number from 900 up, which no other test thread's lowest-free open reaches (the tests
        // of this crate run in parallel and open files too): only this test changes it.
        let a = std::fs::File::open("/proc/self/stat").unwrap();
        let held = crate::sys::dup_from(&a, 900).expect("dup to 900 and up");
        drop(a);
        let fd = i64::from(held.as_raw_fd());
        // Known after its open was delivered: no synthetic close.
        ledger.after(&ev("openat", me, fd, vec![]));
        let use_it = ev("fchdir", me, 0, vec![Param::Int(fd)]);
        assert!(ledger.stale_before(&use_it).is_empty());
        // Closed and reused by an untraced call (a different object under the same number).
        let b = std::fs::File::open("/etc/hostname").unwrap();
        crate::sys::dup_onto(&b, &held).expect("dup3 onto the number");
        drop(b);
        let fixes = ledger.stale_before(&use_it);
        assert_eq!(fixes.len(), 2, "a close, then the new object");
        let Fix::Close(close) = &fixes[0] else {
            panic!("the stale entry is closed first")
        };
        assert_eq!(close.etype.name(), "close");
        assert_eq!(close.params, vec![Param::Int(fd)]);
        let Fix::Learn(pid, info) = &fixes[1] else {
            panic!("then the descriptor is described from /proc")
        };
        assert_eq!((*pid, info.fd), (me, fd));
        assert_eq!(info.name, b"/etc/hostname".to_vec());
        // Once reported, the new object is the known one.
        assert!(ledger.stale_before(&use_it).is_empty());
        // AT_FDCWD and results are not "used" descriptors.
        let at = ev("openat", me, fd, vec![Param::Int(-100)]);
        assert!(ledger.stale_before(&at).is_empty());
        // An open's own dev/ino are taken as the object's identity (no extra stat).
        let mut params = vec![Param::None; 6];
        params[4] = Param::Uint(1);
        params[5] = Param::Uint(2);
        ledger.after(&ev("openat", me, fd, params));
        assert_eq!(ledger.known.get(&(me, fd)), Some(&(1, 2)));
        assert_eq!(
            ledger.stale_before(&use_it).len(),
            2,
            "(1, 2) is not the real object"
        );
        // A descriptor the ledger never heard of is described, not only closed.
        let unknown = ev("fchdir", me, 0, vec![Param::Int(fd)]);
        ledger.known.clear();
        assert!(matches!(
            ledger.stale_before(&unknown).as_slice(),
            [Fix::Close(_), Fix::Learn(..)]
        ));
        ledger.fork(me, me + 1_000_000);
        ledger.exit(me);
        assert!(ledger.known.keys().all(|(p, _)| *p != me));
        drop(held);
    }
}

//! Per-event-type facts the state engine and the field extractors need, resolved once from the
//! event table (`vigil_event::table::events()`) so the hot path indexes a vector instead of
//! comparing names.

use std::sync::OnceLock;

use vigil_event::table::{self, EventSpec};

use vigil_event::{Event, FdType, Param};

/// "No such parameter": [`vigil_event::Event::param`] returns `Param::None` for it.
pub(crate) const NONE: u8 = u8::MAX;

/// The integer parameter at position `i` as signed (an unsigned one above `i64::MAX` is
/// `None`).
pub(crate) fn param_i64(evt: &Event, i: u8) -> Option<i64> {
    match evt.param(usize::from(i)) {
        Param::Int(v) => Some(*v),
        Param::Uint(v) => i64::try_from(*v).ok(),
        _ => None,
    }
}

/// The integer parameter at position `i` as unsigned (a negative one keeps its bits, as a
/// flag word passed in a signed register).
pub(crate) fn param_u64(evt: &Event, i: u8) -> Option<u64> {
    match evt.param(usize::from(i)) {
        Param::Uint(v) => Some(*v),
        Param::Int(v) => Some(*v as u64),
        _ => None,
    }
}

/// How an event type changes state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    Nothing,
    Open {
        dirfd: u8,
        name: u8,
        flags: u8,
        dev: u8,
        ino: u8,
        creat: bool,
    },
    Close,
    Dup {
        old: u8,
        new: u8,
        flags: u8,
    },
    Fcntl {
        fd: u8,
        cmd: u8,
    },
    Pipe {
        fd1: u8,
        fd2: u8,
        ino: u8,
        flags: u8,
    },
    Memfd {
        name: u8,
        flags: u8,
    },
    Socket {
        domain: u8,
        ty: u8,
        proto: u8,
    },
    Socketpair {
        domain: u8,
        ty: u8,
        proto: u8,
        fd1: u8,
        fd2: u8,
    },
    Connect {
        fd: u8,
        addr: u8,
        tuple: u8,
    },
    Accept {
        tuple: u8,
        flags: u8,
    },
    Bind {
        fd: u8,
        addr: u8,
    },
    Listen {
        fd: u8,
    },
    Transfer {
        fd: u8,
        tuple: u8,
        send: bool,
    },
    Clone {
        flags: u8,
        default_flags: u64,
        /// The child's ids in its own pid namespace, when the driver sends them.
        vtid: u8,
        vpid: u8,
    },
    Exec {
        dirfd: u8,
        path: u8,
        flags: u8,
        tail: u8,
    },
    Chdir {
        path: u8,
    },
    Fchdir {
        fd: u8,
    },
    SetIds {
        gid: bool,
        real: u8,
        effective: u8,
    },
    Setsid,
    Setpgid {
        pid: u8,
        pgid: u8,
    },
    Capset {
        inheritable: u8,
        permitted: u8,
        effective: u8,
    },
    Prctl {
        option: u8,
        arg2: u8,
    },
    Unshare {
        flags: u8,
    },
    Bpf {
        cmd: u8,
    },
    NewFd(FdType),
    Procexit,
}

/// Where the event's descriptor (the one `fd.*` fields describe) comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FdRef {
    None,
    /// The return value, when non-negative.
    Res,
    /// A parameter of kind `Fd`.
    Param(u8),
}

/// A filesystem path argument: which parameter, resolved against which dirfd parameter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PathRef {
    pub path: u8,
    /// [`NONE`] = relative to the cwd; [`RAW`] = not a path to resolve (a symlink's content).
    pub dirfd: u8,
}

pub(crate) const RAW: u8 = u8::MAX - 1;

/// Everything known about one event type.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TypeInfo {
    pub op: Op,
    pub fd: FdRef,
    /// `fs.path.name` (single-path calls) and `fs.path.source`/`target` (two-path calls).
    pub path: Option<PathRef>,
    pub source: Option<PathRef>,
    pub target: Option<PathRef>,
    /// Index of the `flags` and `mode` parameters (for `evt.is_open_*`).
    pub open_flags: u8,
    pub open_mode: u8,
    pub category: &'static str,
    /// Index of the `data` buffer parameter.
    pub data: u8,
    /// 1 = reads from an fd, 2 = writes to one (`evt.is_io_*`).
    pub io: u8,
}

fn idx(spec: &EventSpec, name: &str) -> u8 {
    spec.param_index(name)
        .and_then(|i| u8::try_from(i).ok())
        .filter(|&i| i < RAW)
        .unwrap_or(NONE)
}

fn path(spec: &EventSpec, path: &str, dirfd: Option<&str>) -> Option<PathRef> {
    let path = idx(spec, path);
    (path != NONE).then(|| PathRef {
        path,
        dirfd: dirfd.map_or(NONE, |d| idx(spec, d)),
    })
}

// Linux clone(2) flags for fork and vfork (SIGCHLD; CLONE_VM|CLONE_VFORK|SIGCHLD).
const SIGCHLD: u64 = 17;
pub(crate) const CLONE_VM: u64 = 0x100;
pub(crate) const CLONE_VFORK: u64 = 0x4000;

fn build(spec: &EventSpec) -> TypeInfo {
    let i = |n: &str| idx(spec, n);
    let fd_param = if i("fd") != NONE {
        FdRef::Param(i("fd"))
    } else {
        FdRef::None
    };
    let mut info = TypeInfo {
        op: Op::Nothing,
        fd: fd_param,
        path: None,
        source: None,
        target: None,
        open_flags: NONE,
        open_mode: NONE,
        category: "other",
        data: i("data"),
        io: match spec.name {
            "read" | "pread64" | "readv" | "preadv" | "recvfrom" | "recvmsg" | "recvmmsg" => 1,
            "write" | "pwrite64" | "writev" | "pwritev" | "sendto" | "sendmsg" | "sendmmsg" => 2,
            _ => 0,
        },
    };
    let open = |dirfd: u8, name: &str, creat: bool| Op::Open {
        dirfd,
        name: i(name),
        flags: i("flags"),
        dev: i("dev"),
        ino: i("ino"),
        creat,
    };
    info.op = match spec.name {
        "open" | "openat" | "openat2" | "creat" => {
            let creat = spec.name == "creat";
            let dirfd = i("dirfd");
            info.fd = FdRef::Res;
            info.path = path(spec, "name", (dirfd != NONE).then_some("dirfd"));
            info.open_flags = i("flags");
            info.open_mode = i("mode");
            info.category = "file";
            open(dirfd, "name", creat)
        }
        "close" => Op::Close,
        "dup" | "dup2" | "dup3" => {
            info.fd = FdRef::Res;
            Op::Dup {
                old: i("oldfd"),
                new: i("newfd"),
                flags: i("flags"),
            }
        }
        "fcntl" => Op::Fcntl {
            fd: i("fd"),
            cmd: i("cmd"),
        },
        "pipe" | "pipe2" => {
            info.fd = FdRef::Param(i("fd1"));
            info.category = "ipc";
            Op::Pipe {
                fd1: i("fd1"),
                fd2: i("fd2"),
                ino: i("ino"),
                flags: i("flags"),
            }
        }
        "memfd_create" => {
            info.fd = FdRef::Res;
            Op::Memfd {
                name: i("name"),
                flags: i("flags"),
            }
        }
        "socket" => {
            info.fd = FdRef::Res;
            Op::Socket {
                domain: i("domain"),
                ty: i("type"),
                proto: i("proto"),
            }
        }
        "socketpair" => {
            info.fd = FdRef::Param(i("fd1"));
            Op::Socketpair {
                domain: i("domain"),
                ty: i("type"),
                proto: i("proto"),
                fd1: i("fd1"),
                fd2: i("fd2"),
            }
        }
        "connect" => Op::Connect {
            fd: i("fd"),
            addr: i("addr"),
            tuple: i("tuple"),
        },
        "accept" | "accept4" => {
            info.fd = FdRef::Res;
            Op::Accept {
                tuple: i("tuple"),
                flags: i("flags"),
            }
        }
        "bind" => Op::Bind {
            fd: i("fd"),
            addr: i("addr"),
        },
        "listen" => Op::Listen { fd: i("fd") },
        "sendto" | "sendmsg" | "recvfrom" | "recvmsg" => Op::Transfer {
            fd: i("fd"),
            tuple: i("tuple"),
            send: spec.name.starts_with("send"),
        },
        "clone" | "clone3" => Op::Clone {
            flags: i("flags"),
            default_flags: SIGCHLD,
            vtid: i("vtid"),
            vpid: i("vpid"),
        },
        "fork" => Op::Clone {
            flags: NONE,
            default_flags: SIGCHLD,
            vtid: i("vtid"),
            vpid: i("vpid"),
        },
        "vfork" => Op::Clone {
            flags: NONE,
            default_flags: CLONE_VM | CLONE_VFORK | SIGCHLD,
            vtid: i("vtid"),
            vpid: i("vpid"),
        },
        "execve" | "execveat" => {
            let (p, d) = if spec.name == "execve" {
                ("filename", NONE)
            } else {
                ("pathname", i("dirfd"))
            };
            info.fd = FdRef::None;
            Op::Exec {
                dirfd: d,
                path: i(p),
                flags: i("flags"),
                tail: i("exe"),
            }
        }
        "chdir" => Op::Chdir { path: i("path") },
        "fchdir" => Op::Fchdir { fd: i("fd") },
        "setuid" => Op::SetIds {
            gid: false,
            real: i("uid"),
            effective: i("uid"),
        },
        "setgid" => Op::SetIds {
            gid: true,
            real: i("gid"),
            effective: i("gid"),
        },
        "setreuid" | "setresuid" => Op::SetIds {
            gid: false,
            real: i("ruid"),
            effective: i("euid"),
        },
        "setregid" | "setresgid" => Op::SetIds {
            gid: true,
            real: i("rgid"),
            effective: i("egid"),
        },
        "setsid" => Op::Setsid,
        "setpgid" => Op::Setpgid {
            pid: i("pid"),
            pgid: i("pgid"),
        },
        "capset" => Op::Capset {
            inheritable: i("cap_inheritable"),
            permitted: i("cap_permitted"),
            effective: i("cap_effective"),
        },
        "prctl" => Op::Prctl {
            option: i("option"),
            arg2: i("arg2"),
        },
        "unshare" => Op::Unshare { flags: i("flags") },
        "bpf" => {
            info.fd = FdRef::Res;
            Op::Bpf { cmd: i("cmd") }
        }
        "procexit" => Op::Procexit,
        name => match new_fd_type(name) {
            Some(ty) => {
                info.fd = FdRef::Res;
                Op::NewFd(ty)
            }
            None => Op::Nothing,
        },
    };
    match spec.name {
        "mkdir" | "rmdir" => info.path = path(spec, "path", None),
        "mkdirat" => info.path = path(spec, "path", Some("dirfd")),
        "unlink" => info.path = path(spec, "path", None),
        "unlinkat" => info.path = path(spec, "name", Some("dirfd")),
        "chmod" => info.path = path(spec, "filename", None),
        "fchmodat" => info.path = path(spec, "filename", Some("dirfd")),
        "rename" | "link" => {
            info.source = path(spec, "oldpath", None);
            info.target = path(spec, "newpath", None);
        }
        "renameat" | "renameat2" => {
            info.source = path(spec, "oldpath", Some("olddirfd"));
            info.target = path(spec, "newpath", Some("newdirfd"));
        }
        "linkat" => {
            info.source = path(spec, "oldpath", Some("olddir"));
            info.target = path(spec, "newpath", Some("newdir"));
        }
        "symlink" | "symlinkat" => {
            info.source = path(spec, "target", None).map(|p| PathRef { dirfd: RAW, ..p });
            info.target = path(
                spec,
                "linkpath",
                (spec.name == "symlinkat").then_some("linkdirfd"),
            );
        }
        _ => {}
    }
    info.category = category(spec.name, info.category);
    info
}

fn new_fd_type(name: &str) -> Option<FdType> {
    Some(match name {
        "eventfd" | "eventfd2" => FdType::Event,
        "epoll_create" | "epoll_create1" => FdType::Eventpoll,
        "inotify_init" | "inotify_init1" => FdType::Inotify,
        "timerfd_create" => FdType::Timerfd,
        "signalfd" | "signalfd4" => FdType::Signalfd,
        "io_uring_setup" => FdType::IoUring,
        "userfaultfd" => FdType::Userfaultfd,
        "pidfd_open" | "perf_event_open" | "fanotify_init" | "open_tree" | "fsopen" => {
            FdType::Other
        }
        _ => return None,
    })
}

fn category(name: &str, default: &'static str) -> &'static str {
    match name {
        "open" | "openat" | "openat2" | "creat" | "close" | "read" | "write" | "link"
        | "linkat" | "symlink" | "symlinkat" | "rename" | "renameat" | "renameat2" | "unlink"
        | "unlinkat" | "mkdir" | "mkdirat" | "rmdir" | "chmod" | "fchmod" | "fchmodat" | "dup"
        | "dup2" | "dup3" | "fcntl" | "memfd_create" => "file",
        "socket" | "socketpair" | "connect" | "accept" | "accept4" | "bind" | "listen"
        | "sendto" | "sendmsg" | "recvfrom" | "recvmsg" => "net",
        "clone" | "clone3" | "fork" | "vfork" | "execve" | "execveat" | "procexit" | "chdir"
        | "fchdir" | "setuid" | "setgid" | "setreuid" | "setregid" | "setresuid" | "setresgid"
        | "setsid" | "setpgid" | "capset" | "prctl" | "setns" | "unshare" => "process",
        "kill" | "tgkill" => "signal",
        "pipe" | "pipe2" => "ipc",
        _ => default,
    }
}

/// The [`TypeInfo`] of every event type, indexed by [`vigil_event::EventType`] id.
pub(crate) fn types() -> &'static [TypeInfo] {
    static TYPES: OnceLock<Vec<TypeInfo>> = OnceLock::new();
    TYPES.get_or_init(|| table::events().iter().map(build).collect())
}

/// The [`TypeInfo`] of `etype` (an out-of-range id gets a do-nothing entry).
pub(crate) fn type_info(etype: vigil_event::EventType) -> &'static TypeInfo {
    static NOTHING: TypeInfo = TypeInfo {
        op: Op::Nothing,
        fd: FdRef::None,
        path: None,
        source: None,
        target: None,
        open_flags: NONE,
        open_mode: NONE,
        category: "other",
        data: NONE,
        io: 0,
    };
    types().get(usize::from(etype.0)).unwrap_or(&NOTHING)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str) -> &'static TypeInfo {
        type_info(table::by_name(name).unwrap())
    }

    #[test]
    fn every_detailed_schema_resolves_its_parameters() {
        assert!(matches!(
            info("openat").op,
            Op::Open {
                dirfd: 0,
                name: 1,
                flags: 2,
                ..
            }
        ));
        assert!(matches!(
            info("open").op,
            Op::Open {
                dirfd: NONE,
                name: 0,
                ..
            }
        ));
        assert_eq!(info("openat").fd, FdRef::Res);
        assert_eq!(info("read").fd, FdRef::Param(0));
        assert!(matches!(
            info("execveat").op,
            Op::Exec {
                dirfd: 0,
                path: 1,
                flags: 2,
                tail: 3
            }
        ));
        assert!(matches!(
            info("execve").op,
            Op::Exec {
                dirfd: NONE,
                path: 0,
                tail: 1,
                ..
            }
        ));
        assert_eq!(info("unlinkat").path, Some(PathRef { path: 1, dirfd: 0 }));
        assert_eq!(info("symlinkat").source.unwrap().dirfd, RAW);
        assert_eq!(info("epoll_create1").op, Op::NewFd(FdType::Eventpoll));
        assert_eq!(info("connect").category, "net");
        // Every op's indices exist in its schema (NONE only where documented optional).
        for (spec, t) in table::events().iter().zip(types()) {
            if let Op::Open { name, .. } = t.op {
                assert_ne!(name, NONE, "{}", spec.name);
            }
        }
    }
}

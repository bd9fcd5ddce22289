//! Event types ([`EventType`]) and their parameter schemas: names, kinds ([`ParamKind`]) and
//! the symbol tables flag-like parameters render with ([`FlagTable`]). It imports nothing
//! else of this crate but the syscall numbers: the model, the flag tables and the codecs
//! read it.
//!
//! Parameter names follow Falco's event table (`evt.arg.NAME` in rules), so Falco rules that
//! name arguments work unchanged. Because a Vigil event is one *completed* syscall, a schema holds
//! the entry arguments and the exit values together; the return value itself is
//! [`crate::Event::res`], and [`EventSpec::res_name`] says what Falco calls it (`fd` for calls
//! that return a descriptor, `res` otherwise) so that `evt.arg.fd` of an `openat` is its result.
//!
//! [`events()`] lists every event type: first the ones with detailed schemas below, then every
//! other x86-64 syscall by name (no parameters captured), then nothing else. Ids are positions in
//! that list ([`EventType`]).

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::syscalls_x86_64::SYSCALLS;

/// Identifies an event type: an index into [`events()`]. Stable within one build; capture
/// files store event type *names*, not these ids, so the table may grow between versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EventType(pub u16);

impl EventType {
    /// The schema of this event type.
    pub fn spec(self) -> &'static EventSpec {
        &events()[usize::from(self.0)]
    }

    /// Falco's `evt.type` name.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// How a parameter is to be understood (the value's representation is [`crate::Param`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// A file descriptor number ([`crate::Param::Int`]); `-100` is `AT_FDCWD` where a dirfd.
    Fd,
    /// A signed integer ([`crate::Param::Int`]).
    Int,
    /// An unsigned integer ([`crate::Param::Uint`]).
    Uint,
    /// A process or thread id ([`crate::Param::Int`]).
    Pid,
    /// A user id ([`crate::Param::Uint`]).
    Uid,
    /// A group id ([`crate::Param::Uint`]).
    Gid,
    /// A bit set or enumeration rendered with a symbol table ([`crate::Param::Uint`]).
    Flags(FlagTable),
    /// A path exactly as the process passed it ([`crate::Param::Bytes`]).
    Path,
    /// A NUL-free string such as a name ([`crate::Param::Bytes`]).
    Str,
    /// A data buffer ([`crate::Param::Bytes`]).
    Buf,
    /// A list of strings, such as argv or the environment ([`crate::Param::List`]).
    StrList,
    /// A socket address ([`crate::Param::Addr`]).
    SockAddr,
    /// A connection tuple ([`crate::Param::Tuple`]).
    SockTuple,
    /// A time in nanoseconds since the epoch ([`crate::Param::Uint`]).
    AbsTime,
}

/// The symbol tables that flag-like parameters render with (see [`crate::flags`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagTable {
    /// `open(2)` flags: `O_RDONLY|O_CREAT|…` (Falco renders its own `O_*` set).
    Open,
    /// File mode bits: `S_IRUSR|S_IXUSR|S_ISUID…`.
    Mode,
    /// `clone(2)` flags: `CLONE_VM|CLONE_THREAD|…`.
    Clone,
    /// `ptrace(2)` requests: `PTRACE_ATTACH`, `PTRACE_TRACEME` … (an enumeration).
    PtraceRequest,
    /// `bpf(2)` commands: `BPF_PROG_LOAD` … (an enumeration).
    BpfCmd,
    /// Socket address families: `AF_INET`, `AF_PACKET` … (an enumeration).
    SocketFamily,
    /// Socket types: `SOCK_STREAM`, `SOCK_RAW` … with `SOCK_NONBLOCK|SOCK_CLOEXEC`.
    SocketType,
    /// `fcntl(2)` commands: `F_DUPFD`, `F_DUPFD_CLOEXEC` … (an enumeration).
    FcntlCmd,
    /// `*at(2)` flags: `AT_SYMLINK_FOLLOW`, `AT_REMOVEDIR` ….
    At,
    /// `setns(2)`/`unshare(2)` namespace types: `CLONE_NEWNS|CLONE_NEWNET|…`.
    Namespace,
    /// `mount(2)` flags: `MS_RDONLY|MS_BIND|…`.
    Mount,
    /// `memfd_create(2)` flags: `MFD_CLOEXEC|MFD_ALLOW_SEALING|…`.
    Memfd,
    /// `execveat(2)`/`renameat2(2)` and other plain flags without a symbol table: rendered as a
    /// number.
    None,
    /// Signal numbers: `SIGKILL` … (an enumeration).
    Signal,
}

/// One parameter of an event type's schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub kind: ParamKind,
}

/// The schema of one event type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventSpec {
    /// Falco's `evt.type` name.
    pub name: &'static str,
    /// The x86-64 syscall number, or `None` for non-syscall events (`procexit`).
    pub nr: Option<u16>,
    /// What Falco calls the return value: `"fd"`, `"res"`, or `""` for non-syscall events.
    pub res_name: &'static str,
    /// How the return value is understood (`Fd` for descriptor-returning calls).
    pub res_kind: ParamKind,
    pub params: &'static [ParamSpec],
}

impl EventSpec {
    /// The position of the parameter called `name`.
    pub fn param_index(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }
}

const fn p(name: &'static str, kind: ParamKind) -> ParamSpec {
    ParamSpec { name, kind }
}

use FlagTable as F;
use ParamKind::{
    AbsTime, Buf, Fd, Flags, Gid, Int, Path, Pid, SockAddr, SockTuple, Str, StrList, Uid, Uint,
};

/// The process attributes an `execve`/`execveat` exit carries after the new image is in place
/// (Falco's execve exit event carries the same set).
const EXEC_TAIL: [ParamSpec; 23] = [
    p("exe", Path),
    p("args", StrList),
    p("env", StrList),
    p("comm", Str),
    p("trusted_exepath", Path),
    p("cwd", Path),
    p("tid", Pid),
    p("pid", Pid),
    p("ptid", Pid),
    p("uid", Uid),
    p("gid", Gid),
    p("euid", Uid),
    p("egid", Gid),
    p("loginuid", Uid),
    p("tty", Uint),
    p("cap_inheritable", Uint),
    p("cap_permitted", Uint),
    p("cap_effective", Uint),
    p("cgroups", Str),
    p("exe_flags", Uint),
    p("exe_ino", Uint),
    p("exe_ino_ctime", AbsTime),
    p("exe_ino_mtime", AbsTime),
];

/// Bits of the `exe_flags` parameter of exec events.
pub mod exe_flags {
    /// The executable file is writable by the process's user.
    pub const WRITABLE: u64 = 1;
    /// The executable lives in an overlayfs upper layer (written after the container started).
    pub const UPPER_LAYER: u64 = 2;
    /// The executable is an anonymous memory file (`memfd_create`).
    pub const FROM_MEMFD: u64 = 4;
}

macro_rules! exec_params {
    ($($head:expr),*) => {{
        const HEAD: &[ParamSpec] = &[$($head),*];
        const ALL: [ParamSpec; HEAD.len() + EXEC_TAIL.len()] = {
            let mut out = [p("", Int); HEAD.len() + EXEC_TAIL.len()];
            let mut i = 0;
            while i < HEAD.len() {
                out[i] = HEAD[i];
                i += 1;
            }
            let mut j = 0;
            while j < EXEC_TAIL.len() {
                out[HEAD.len() + j] = EXEC_TAIL[j];
                j += 1;
            }
            out
        };
        &ALL
    }};
}

const fn sys(
    name: &'static str,
    nr: u16,
    res_name: &'static str,
    params: &'static [ParamSpec],
) -> EventSpec {
    let res_kind = if res_name.len() == 2 { Fd } else { Int };
    EventSpec {
        name,
        nr: Some(nr),
        res_name,
        res_kind,
        params,
    }
}

/// Event types with detailed schemas: everything the rules and the state engine use.
pub const DETAILED: &[EventSpec] = &[
    // Files.
    sys(
        "open",
        2,
        "fd",
        &[
            p("name", Path),
            p("flags", Flags(F::Open)),
            p("mode", Flags(F::Mode)),
            p("dev", Uint),
            p("ino", Uint),
        ],
    ),
    sys(
        "openat",
        257,
        "fd",
        &[
            p("dirfd", Fd),
            p("name", Path),
            p("flags", Flags(F::Open)),
            p("mode", Flags(F::Mode)),
            p("dev", Uint),
            p("ino", Uint),
        ],
    ),
    sys(
        "openat2",
        437,
        "fd",
        &[
            p("dirfd", Fd),
            p("name", Path),
            p("flags", Flags(F::Open)),
            p("mode", Flags(F::Mode)),
            p("resolve", Uint),
            p("dev", Uint),
            p("ino", Uint),
        ],
    ),
    sys(
        "creat",
        85,
        "fd",
        &[
            p("name", Path),
            p("mode", Flags(F::Mode)),
            p("dev", Uint),
            p("ino", Uint),
        ],
    ),
    sys("close", 3, "res", &[p("fd", Fd)]),
    sys("dup", 32, "res", &[p("oldfd", Fd)]),
    sys("dup2", 33, "res", &[p("oldfd", Fd), p("newfd", Fd)]),
    sys(
        "dup3",
        292,
        "res",
        &[p("oldfd", Fd), p("newfd", Fd), p("flags", Flags(F::Open))],
    ),
    sys(
        "fcntl",
        72,
        "res",
        &[p("fd", Fd), p("cmd", Flags(F::FcntlCmd))],
    ),
    sys(
        "pipe",
        22,
        "res",
        &[p("fd1", Fd), p("fd2", Fd), p("ino", Uint)],
    ),
    sys(
        "pipe2",
        293,
        "res",
        &[
            p("fd1", Fd),
            p("fd2", Fd),
            p("ino", Uint),
            p("flags", Flags(F::Open)),
        ],
    ),
    sys(
        "memfd_create",
        319,
        "fd",
        &[p("name", Str), p("flags", Flags(F::Memfd))],
    ),
    sys("link", 86, "res", &[p("oldpath", Path), p("newpath", Path)]),
    sys(
        "linkat",
        265,
        "res",
        &[
            p("olddir", Fd),
            p("oldpath", Path),
            p("newdir", Fd),
            p("newpath", Path),
            p("flags", Flags(F::At)),
        ],
    ),
    sys(
        "symlink",
        88,
        "res",
        &[p("target", Path), p("linkpath", Path)],
    ),
    sys(
        "symlinkat",
        266,
        "res",
        &[p("target", Path), p("linkdirfd", Fd), p("linkpath", Path)],
    ),
    sys(
        "rename",
        82,
        "res",
        &[p("oldpath", Path), p("newpath", Path)],
    ),
    sys(
        "renameat",
        264,
        "res",
        &[
            p("olddirfd", Fd),
            p("oldpath", Path),
            p("newdirfd", Fd),
            p("newpath", Path),
        ],
    ),
    sys(
        "renameat2",
        316,
        "res",
        &[
            p("olddirfd", Fd),
            p("oldpath", Path),
            p("newdirfd", Fd),
            p("newpath", Path),
            p("flags", Flags(F::None)),
        ],
    ),
    sys("unlink", 87, "res", &[p("path", Path)]),
    sys(
        "unlinkat",
        263,
        "res",
        &[p("dirfd", Fd), p("name", Path), p("flags", Flags(F::At))],
    ),
    sys(
        "mkdir",
        83,
        "res",
        &[p("path", Path), p("mode", Flags(F::Mode))],
    ),
    sys(
        "mkdirat",
        258,
        "res",
        &[p("dirfd", Fd), p("path", Path), p("mode", Flags(F::Mode))],
    ),
    sys("rmdir", 84, "res", &[p("path", Path)]),
    sys(
        "chmod",
        90,
        "res",
        &[p("filename", Path), p("mode", Flags(F::Mode))],
    ),
    sys(
        "fchmod",
        91,
        "res",
        &[p("fd", Fd), p("mode", Flags(F::Mode))],
    ),
    sys(
        "fchmodat",
        268,
        "res",
        &[
            p("dirfd", Fd),
            p("filename", Path),
            p("mode", Flags(F::Mode)),
        ],
    ),
    sys("chdir", 80, "res", &[p("path", Path)]),
    sys("fchdir", 81, "res", &[p("fd", Fd)]),
    sys(
        "read",
        0,
        "res",
        &[p("fd", Fd), p("size", Uint), p("data", Buf)],
    ),
    sys(
        "write",
        1,
        "res",
        &[p("fd", Fd), p("size", Uint), p("data", Buf)],
    ),
    sys(
        "mount",
        165,
        "res",
        &[
            p("dev", Path),
            p("dir", Path),
            p("type", Str),
            p("flags", Flags(F::Mount)),
        ],
    ),
    sys("umount2", 166, "res", &[p("name", Path), p("flags", Uint)]),
    // Processes.
    // `vtid`/`vpid`: the child's ids in its own pid namespace (Falco's clone exit carries them);
    // appended last so that captures made before they existed keep their meaning.
    sys(
        "clone",
        56,
        "res",
        &[p("flags", Flags(F::Clone)), p("vtid", Pid), p("vpid", Pid)],
    ),
    sys(
        "clone3",
        435,
        "res",
        &[p("flags", Flags(F::Clone)), p("vtid", Pid), p("vpid", Pid)],
    ),
    sys("fork", 57, "res", &[p("vtid", Pid), p("vpid", Pid)]),
    sys("vfork", 58, "res", &[p("vtid", Pid), p("vpid", Pid)]),
    sys("execve", 59, "res", exec_params!(p("filename", Path))),
    sys(
        "execveat",
        322,
        "res",
        exec_params!(
            p("dirfd", Fd),
            p("pathname", Path),
            p("flags", Flags(F::At))
        ),
    ),
    sys(
        "kill",
        62,
        "res",
        &[p("pid", Pid), p("sig", Flags(F::Signal))],
    ),
    sys(
        "tgkill",
        234,
        "res",
        &[p("pid", Pid), p("tid", Pid), p("sig", Flags(F::Signal))],
    ),
    sys(
        "ptrace",
        101,
        "res",
        &[
            p("request", Flags(F::PtraceRequest)),
            p("pid", Pid),
            p("addr", Uint),
            p("data", Uint),
        ],
    ),
    sys("setuid", 105, "res", &[p("uid", Uid)]),
    sys("setgid", 106, "res", &[p("gid", Gid)]),
    sys("setreuid", 113, "res", &[p("ruid", Uid), p("euid", Uid)]),
    sys("setregid", 114, "res", &[p("rgid", Gid), p("egid", Gid)]),
    sys(
        "setresuid",
        117,
        "res",
        &[p("ruid", Uid), p("euid", Uid), p("suid", Uid)],
    ),
    sys(
        "setresgid",
        119,
        "res",
        &[p("rgid", Gid), p("egid", Gid), p("sgid", Gid)],
    ),
    sys("setsid", 112, "res", &[]),
    sys("setpgid", 109, "res", &[p("pid", Pid), p("pgid", Pid)]),
    sys(
        "capset",
        126,
        "res",
        &[
            p("cap_inheritable", Uint),
            p("cap_permitted", Uint),
            p("cap_effective", Uint),
        ],
    ),
    sys(
        "setns",
        308,
        "res",
        &[p("fd", Fd), p("nstype", Flags(F::Namespace))],
    ),
    sys("unshare", 272, "res", &[p("flags", Flags(F::Namespace))]),
    sys("prctl", 157, "res", &[p("option", Int), p("arg2", Uint)]),
    sys(
        "init_module",
        175,
        "res",
        &[p("len", Uint), p("uargs", Str)],
    ),
    sys(
        "finit_module",
        313,
        "res",
        &[p("fd", Fd), p("uargs", Str), p("flags", Uint)],
    ),
    sys(
        "delete_module",
        176,
        "res",
        &[p("name", Str), p("flags", Uint)],
    ),
    sys("bpf", 321, "fd", &[p("cmd", Flags(F::BpfCmd))]),
    sys("userfaultfd", 323, "fd", &[p("flags", Flags(F::Open))]),
    // Network.
    sys(
        "socket",
        41,
        "fd",
        &[
            p("domain", Flags(F::SocketFamily)),
            p("type", Flags(F::SocketType)),
            p("proto", Uint),
        ],
    ),
    sys(
        "socketpair",
        53,
        "res",
        &[
            p("domain", Flags(F::SocketFamily)),
            p("type", Flags(F::SocketType)),
            p("proto", Uint),
            p("fd1", Fd),
            p("fd2", Fd),
        ],
    ),
    sys(
        "connect",
        42,
        "res",
        &[p("fd", Fd), p("addr", SockAddr), p("tuple", SockTuple)],
    ),
    sys(
        "accept",
        43,
        "fd",
        &[p("tuple", SockTuple), p("queuepct", Uint)],
    ),
    sys(
        "accept4",
        288,
        "fd",
        &[
            p("tuple", SockTuple),
            p("queuepct", Uint),
            p("flags", Flags(F::SocketType)),
        ],
    ),
    sys("bind", 49, "res", &[p("fd", Fd), p("addr", SockAddr)]),
    sys("listen", 50, "res", &[p("fd", Fd), p("backlog", Int)]),
    sys(
        "sendto",
        44,
        "res",
        &[
            p("fd", Fd),
            p("size", Uint),
            p("tuple", SockTuple),
            p("data", Buf),
        ],
    ),
    sys(
        "sendmsg",
        46,
        "res",
        &[
            p("fd", Fd),
            p("size", Uint),
            p("tuple", SockTuple),
            p("data", Buf),
        ],
    ),
    sys(
        "recvfrom",
        45,
        "res",
        &[
            p("fd", Fd),
            p("size", Uint),
            p("tuple", SockTuple),
            p("data", Buf),
        ],
    ),
    sys(
        "recvmsg",
        47,
        "res",
        &[
            p("fd", Fd),
            p("size", Uint),
            p("tuple", SockTuple),
            p("data", Buf),
        ],
    ),
    // Non-syscall events.
    EventSpec {
        name: "procexit",
        nr: None,
        res_name: "",
        res_kind: Int,
        params: &[
            p("status", Int),
            p("ret", Int),
            p("sig", Flags(F::Signal)),
            p("core", Uint),
        ],
    },
];

struct Tables {
    events: Vec<EventSpec>,
    by_name: HashMap<&'static str, u16>,
    by_nr: HashMap<u16, u16>,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut events: Vec<EventSpec> = DETAILED.to_vec();
        for &(nr, name) in SYSCALLS {
            if !events.iter().any(|e| e.name == name) {
                events.push(EventSpec {
                    name,
                    nr: Some(nr),
                    res_name: "res",
                    res_kind: Int,
                    params: &[],
                });
            }
        }
        let mut by_name = HashMap::new();
        let mut by_nr = HashMap::new();
        for (i, e) in events.iter().enumerate() {
            let id = u16::try_from(i).expect("fewer than 65536 event types");
            by_name.insert(e.name, id);
            if let Some(nr) = e.nr {
                by_nr.insert(nr, id);
            }
        }
        Tables {
            events,
            by_name,
            by_nr,
        }
    })
}

/// Every event type; [`EventType`] ids index this slice.
pub fn events() -> &'static [EventSpec] {
    &tables().events
}

/// The event type named `name` (Falco's `evt.type` spelling).
pub fn by_name(name: &str) -> Option<EventType> {
    tables().by_name.get(name).copied().map(EventType)
}

/// The event type of x86-64 syscall number `nr`.
pub fn by_syscall_nr(nr: u16) -> Option<EventType> {
    tables().by_nr.get(&nr).copied().map(EventType)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_numbers_are_unique_and_consistent() {
        let events = events();
        for (i, e) in events.iter().enumerate() {
            assert_eq!(
                by_name(e.name).map(|t| usize::from(t.0)),
                Some(i),
                "{}",
                e.name
            );
            if let Some(nr) = e.nr {
                assert_eq!(
                    by_syscall_nr(nr).map(|t| usize::from(t.0)),
                    Some(i),
                    "{}",
                    e.name
                );
                let listed = SYSCALLS
                    .iter()
                    .find(|(_, n)| *n == e.name)
                    .map(|(nr, _)| *nr);
                assert_eq!(
                    listed,
                    Some(nr),
                    "{} number disagrees with the x86-64 table",
                    e.name
                );
            }
        }
        assert!(by_name("procexit").is_some());
        assert_eq!(by_syscall_nr(257).map(|t| t.name()), Some("openat"));
    }

    #[test]
    fn clone_family_ends_with_the_childs_namespace_ids() {
        for name in ["clone", "clone3", "fork", "vfork"] {
            let spec = by_name(name).unwrap().spec();
            let n = spec.params.len();
            assert!(n >= 2, "{name}");
            assert_eq!(spec.params[n - 2], p("vtid", Pid), "{name}");
            assert_eq!(spec.params[n - 1], p("vpid", Pid), "{name}");
        }
        // `flags` keeps position 0 where it was before `vtid`/`vpid` were added.
        assert_eq!(
            by_name("clone").unwrap().spec().param_index("flags"),
            Some(0)
        );
    }

    #[test]
    fn exec_schema_has_head_then_tail() {
        let execve = by_name("execve").unwrap().spec();
        assert_eq!(execve.params[0].name, "filename");
        assert_eq!(execve.params[1].name, "exe");
        assert_eq!(execve.params.len(), 1 + EXEC_TAIL.len());
        let execveat = by_name("execveat").unwrap().spec();
        assert_eq!(execveat.param_index("pathname"), Some(1));
    }
}

//! The event model shared by every driver, the state engine and the capture codecs.
//!
//! One [`Event`] per *completed* system call: the entry arguments and the return value travel
//! together (the model Falco 0.42 moved to). Process lifecycle is carried by the syscalls that
//! cause it (`clone`, `fork`, `vfork`, `clone3`, `execve`, `execveat`) and by the non-syscall
//! `procexit` event. Parameters are positional, in the order of the event type's schema
//! ([`crate::table::EventSpec::params`]), and typed by that schema ([`crate::ParamKind`]).

use std::net::IpAddr;

use crate::table::EventType;

/// One parameter value. Its meaning comes from the schema's [`crate::ParamKind`].
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Param {
    /// The driver did not provide this parameter (Falco `<NA>`).
    #[default]
    None,
    Int(i64),
    Uint(u64),
    /// Arbitrary bytes: monitored processes choose them (not necessarily UTF-8).
    Bytes(Vec<u8>),
    List(Vec<Vec<u8>>),
    Addr(SockAddr),
    Tuple(SockTuple),
}

/// A socket address as passed to `connect`, `bind`, `sendto` ….
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SockAddr {
    Inet {
        ip: IpAddr,
        port: u16,
    },
    Unix {
        path: Vec<u8>,
    },
    /// Any other family, by number (`AF_NETLINK`, `AF_PACKET` …).
    Other {
        family: u16,
    },
}

/// The endpoints of a socket: for TCP/UDP, local (`src` for an outbound connection) and remote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SockTuple {
    Inet {
        /// Transport protocol: 6 = TCP, 17 = UDP, 1 = ICMP, 255 = raw.
        l4proto: u8,
        src_ip: IpAddr,
        src_port: u16,
        dst_ip: IpAddr,
        dst_port: u16,
    },
    Unix {
        path: Vec<u8>,
    },
}

/// One completed system call, or one non-syscall event (`procexit`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Sequence number within its source (Falco `evt.num`).
    pub num: u64,
    /// Completion time, nanoseconds since the Unix epoch.
    pub ts: u64,
    /// Thread id (host pid namespace).
    pub tid: i64,
    /// Process id (thread-group id, host pid namespace).
    pub pid: i64,
    pub etype: EventType,
    /// The raw return value (`evt.rawres`): a negative errno on failure. `0` for `procexit`.
    pub res: i64,
    /// Parameters in schema order; may be shorter than the schema (missing = [`Param::None`]).
    pub params: Vec<Param>,
    /// Bit `i` set: `params[i]` was cut at the driver's size bound.
    pub truncated: u64,
    /// The CPU the event completed on (Falco `evt.cpu`); `None` where the driver does not
    /// know it (the ptrace driver, captures written without it).
    pub cpu: Option<u32>,
}

impl Event {
    /// The parameter at schema position `index`, or [`Param::None`].
    pub fn param(&self, index: usize) -> &Param {
        self.params.get(index).unwrap_or(&Param::None)
    }

    /// The parameter named `name` in this event type's schema, or [`Param::None`].
    pub fn param_by_name(&self, name: &str) -> &Param {
        match self.etype.spec().param_index(name) {
            Some(i) => self.param(i),
            None => &Param::None,
        }
    }

    /// Whether the parameter at `index` was truncated by the driver.
    pub fn is_truncated(&self, index: usize) -> bool {
        index < 64 && self.truncated & (1 << index) != 0
    }
}

/// What a file descriptor refers to, as Falco types it (`fd.type`, `fd.typechar`): the one
/// fd-type enum of the workspace (snapshots, capture files and the state's fd tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FdType {
    /// A regular file or device (`file`, `f`).
    File,
    /// A directory (`directory`, `d`).
    Directory,
    /// An IPv4 socket (`ipv4`, `4`).
    Ipv4,
    /// An IPv6 socket (`ipv6`, `6`).
    Ipv6,
    /// A Unix socket (`unix`, `u`).
    Unix,
    /// A pipe or FIFO (`pipe`, `p`).
    Pipe,
    /// An anonymous memory file from `memfd_create` (`memfd`, `m`).
    Memfd,
    /// `eventfd` (`event`, `e`).
    Event,
    /// `signalfd` (`signalfd`, `s`).
    Signalfd,
    /// `epoll` (`eventpoll`, `l`).
    Eventpoll,
    /// `inotify` (`inotify`, `i`).
    Inotify,
    /// `timerfd` (`timerfd`, `t`).
    Timerfd,
    /// A netlink socket (`netlink`, `n`).
    Netlink,
    /// A BPF object (`bpf`, `b`).
    Bpf,
    /// `userfaultfd` (`userfaultfd`, `u`).
    Userfaultfd,
    /// `io_uring` (`io_uring`, `r`).
    IoUring,
    /// Anything else, e.g. a packet socket (`<NA>`, `o`, as Falco names its unknown type).
    Other,
}

impl FdType {
    /// Falco's `fd.type` string.
    pub fn name(self) -> &'static str {
        match self {
            FdType::File => "file",
            FdType::Directory => "directory",
            FdType::Ipv4 => "ipv4",
            FdType::Ipv6 => "ipv6",
            FdType::Unix => "unix",
            FdType::Pipe => "pipe",
            FdType::Memfd => "memfd",
            FdType::Event => "event",
            FdType::Signalfd => "signalfd",
            FdType::Eventpoll => "eventpoll",
            FdType::Inotify => "inotify",
            FdType::Timerfd => "timerfd",
            FdType::Netlink => "netlink",
            FdType::Bpf => "bpf",
            FdType::Userfaultfd => "userfaultfd",
            FdType::IoUring => "io_uring",
            // Falco's type string for descriptors it cannot classify (a packet socket …).
            FdType::Other => "<NA>",
        }
    }

    /// Falco's `fd.typechar`.
    pub fn typechar(self) -> &'static str {
        match self {
            FdType::File => "f",
            FdType::Directory => "d",
            FdType::Ipv4 => "4",
            FdType::Ipv6 => "6",
            FdType::Unix => "u",
            FdType::Pipe => "p",
            FdType::Memfd => "m",
            FdType::Event => "e",
            FdType::Signalfd => "s",
            FdType::Eventpoll => "l",
            FdType::Inotify => "i",
            FdType::Timerfd => "t",
            FdType::Netlink => "n",
            FdType::Bpf => "b",
            FdType::Userfaultfd => "u",
            FdType::IoUring => "r",
            FdType::Other => "o",
        }
    }

    /// An IPv4 or IPv6 socket.
    pub fn is_inet(self) -> bool {
        matches!(self, FdType::Ipv4 | FdType::Ipv6)
    }
}

/// One open file descriptor in a process-table snapshot.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FdInfo {
    pub fd: i64,
    pub kind: FdType,
    /// An inet socket's tuple once known (always `None` for other types).
    pub tuple: Option<SockTuple>,
    /// The name Falco shows as `fd.name`: the absolute path for files, directories, memfds
    /// (`memfd:NAME`) and Unix sockets; empty where the tuple names the socket.
    pub name: Vec<u8>,
    /// `open(2)` flags as far as known.
    pub flags: u32,
}

/// One thread in a process-table snapshot (the start of a capture, or a `/proc` bootstrap).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ThreadInfo {
    pub tid: i64,
    pub pid: i64,
    /// Parent process id.
    pub ppid: i64,
    /// Ids inside the thread's own pid namespace (equal to the host ids outside containers).
    pub vtid: i64,
    pub vpid: i64,
    /// Session id and process-group id (host and namespace-local).
    pub sid: i64,
    pub vpgid: i64,
    pub pgid: i64,
    /// `comm` (at most 15 bytes in the kernel).
    pub comm: Vec<u8>,
    /// `argv[0]` as the process was started (Falco `proc.exe`).
    pub exe: Vec<u8>,
    /// The resolved path of the executable (Falco `proc.exepath`).
    pub exepath: Vec<u8>,
    /// `argv[1..]`.
    pub args: Vec<Vec<u8>>,
    /// The environment, `NAME=value` entries.
    pub env: Vec<Vec<u8>>,
    pub cwd: Vec<u8>,
    pub uid: u32,
    pub gid: u32,
    pub euid: u32,
    pub egid: u32,
    /// Audit login uid; `u32::MAX` (shown as -1) when unset.
    pub loginuid: u32,
    /// Controlling terminal device number; 0 when none.
    pub tty: u32,
    /// Thread start time, nanoseconds since the epoch.
    pub start_ts: u64,
    pub cap_inheritable: u64,
    pub cap_permitted: u64,
    pub cap_effective: u64,
    /// The cgroup path (unified hierarchy, or the first v1 hierarchy that names a container).
    pub cgroup: Vec<u8>,
    /// Executable properties used by drift rules.
    pub exe_writable: bool,
    pub exe_upper_layer: bool,
    pub exe_from_memfd: bool,
    pub exe_ino: u64,
    pub exe_ino_ctime: u64,
    pub exe_ino_mtime: u64,
    /// Open file descriptors (only on the thread-group leader; threads share them).
    pub fds: Vec<FdInfo>,
}

/// A user account, from the system's passwd database or a capture's snapshot of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserInfo {
    pub uid: u32,
    pub gid: u32,
    pub name: Vec<u8>,
    pub home: Vec<u8>,
    pub shell: Vec<u8>,
}

/// A group, from the system's group database or a capture's snapshot of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupInfo {
    pub gid: u32,
    pub name: Vec<u8>,
}

/// What a capture records before its first event: enough to reproduce state on replay.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Snapshot {
    /// The host the capture was taken on (Falco `evt.hostname`).
    pub hostname: Vec<u8>,
    /// Capture start time, nanoseconds since the epoch.
    pub start_ts: u64,
    /// Users and groups; empty means "use the replaying system's databases".
    pub users: Vec<UserInfo>,
    pub groups: Vec<GroupInfo>,
    /// Containers known to the runtime at capture start (metadata the cgroup path cannot give).
    pub containers: Vec<ContainerInfo>,
    pub threads: Vec<ThreadInfo>,
    /// Domain names the host resolved at capture time (Falco `fd.*ip.name`); live drivers will
    /// fill it from a resolver later. A name may appear once with several addresses.
    pub dns: Vec<DnsName>,
}

/// One domain name and the addresses it resolved to (Falco resolves the names rules mention
/// and compares `fd.sip.name` and friends by address).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct DnsName {
    /// The name as rules spell it, e.g. `kubernetes.default.svc.cluster.local`.
    pub name: String,
    pub addrs: Vec<IpAddr>,
}

/// What a container runtime tells about one container (Falco `container.*`, `k8s.*` fields).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ContainerInfo {
    /// The short (12 hex digit) id, as Falco's `container.id`.
    pub id: String,
    /// `docker`, `containerd`, `cri-o`, `podman`, `runc` ….
    pub runtime: String,
    pub name: String,
    /// The full image reference, e.g. `docker.io/library/nginx:1.25`.
    pub image: String,
    pub image_repository: String,
    pub image_tag: String,
    pub image_digest: String,
    pub privileged: bool,
    /// Container start time, nanoseconds since the epoch.
    pub start_ts: u64,
    pub mounts: Vec<MountInfo>,
    /// Runtime labels; Kubernetes pod name and namespace come from
    /// `io.kubernetes.pod.name` / `io.kubernetes.pod.namespace`.
    pub labels: Vec<(String, String)>,
}

/// One mount of a container (Falco `container.mount*`).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct MountInfo {
    pub source: String,
    pub dest: String,
    pub mode: String,
    pub rdwr: bool,
    pub propagation: String,
}

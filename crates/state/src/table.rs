//! The records of the state tables: threads, processes (thread groups), fd tables.
//!
//! Threads are small ([`Thread`]): everything Falco calls process-level (image, cwd, creds, fd
//! table) lives in the thread-group leader's [`Process`], found by `pid`. The executable image
//! ([`Image`]) is behind an `Arc` so a fork shares it until `execve` replaces it; fd tables are
//! stored by id so `CLONE_FILES` children can share one.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use rustc_hash::FxHashMap;

/// Value of ids we do not know (`vpid` of a child forked inside a foreign pid namespace).
pub(crate) const UNKNOWN_ID: i64 = -1;

/// One thread.
#[derive(Clone, Debug)]
pub(crate) struct Thread {
    /// Thread-group id: the key of the [`Process`].
    pub pid: i64,
    /// Thread id in its pid namespace, or [`UNKNOWN_ID`].
    pub vtid: i64,
}

/// What `execve` sets: shared by a fork until it executes something else.
#[derive(Clone, Debug, Default)]
pub(crate) struct Image {
    /// Whether this image was learned (snapshot or exec); `false` for placeholder processes
    /// made from an event of an unknown thread.
    pub known: bool,
    pub comm: Vec<u8>,
    pub exe: Vec<u8>,
    pub exepath: Vec<u8>,
    pub args: Vec<Vec<u8>>,
    pub env: Vec<Vec<u8>>,
    /// `comm` + ` ` + args joined by spaces (Falco `proc.cmdline`); `proc.args` is the tail
    /// from `args_start`.
    pub cmdline: Vec<u8>,
    pub args_start: usize,
    pub cgroup: Vec<u8>,
    /// Short container id; empty on the host.
    pub container_id: Vec<u8>,
    pub exe_writable: bool,
    pub exe_upper_layer: bool,
    pub exe_from_memfd: bool,
    pub exe_ino: u64,
    pub exe_ino_ctime: u64,
    pub exe_ino_mtime: u64,
}

impl Image {
    /// Recomputes `cmdline`/`args_start` and `container_id` after fields changed.
    pub fn finish(&mut self) {
        let mut cmdline = Vec::with_capacity(
            self.comm.len() + self.args.iter().map(|a| a.len() + 1).sum::<usize>(),
        );
        cmdline.extend_from_slice(&self.comm);
        let mut args_start = cmdline.len();
        if !self.args.is_empty() {
            cmdline.push(b' ');
            args_start = cmdline.len();
            for (i, arg) in self.args.iter().enumerate() {
                if i > 0 {
                    cmdline.push(b' ');
                }
                cmdline.extend_from_slice(arg);
            }
        }
        self.cmdline = cmdline;
        self.args_start = args_start;
        self.container_id = crate::container::container_id_from_cgroup(&self.cgroup)
            .map(<[u8]>::to_vec)
            .unwrap_or_default();
    }

    pub fn args_joined(&self) -> &[u8] {
        &self.cmdline[self.args_start.min(self.cmdline.len())..]
    }
}

/// One process (thread group), keyed by its pid.
#[derive(Clone, Debug)]
pub(crate) struct Process {
    pub pid: i64,
    pub ppid: i64,
    pub vpid: i64,
    pub sid: i64,
    pub vpgid: i64,
    pub pgid: i64,
    pub image: Arc<Image>,
    /// Absolute, normalised; empty when unknown.
    pub cwd: Vec<u8>,
    /// Whether uids/gids/caps/loginuid/tty are known.
    pub creds_known: bool,
    pub uid: u32,
    pub gid: u32,
    pub euid: u32,
    pub egid: u32,
    pub loginuid: u32,
    pub tty: u32,
    pub cap_inheritable: u64,
    pub cap_permitted: u64,
    pub cap_effective: u64,
    /// Nanoseconds since the epoch; 0 when unknown.
    pub start_ts: u64,
    pub fd_table: u64,
    pub nthreads: u32,
    /// `prctl(PR_SET_CHILD_SUBREAPER)` was set: orphans are reparented here.
    pub subreaper: bool,
    /// `unshare(CLONE_NEWPID)` succeeded: the next child is pid 1 of a new namespace.
    pub pending_newpid: bool,
}

impl Process {
    /// A placeholder for a process we learn about from an event of an unknown thread.
    pub fn placeholder(pid: i64, fd_table: u64) -> Self {
        Process {
            pid,
            ppid: 0,
            vpid: UNKNOWN_ID,
            sid: UNKNOWN_ID,
            vpgid: UNKNOWN_ID,
            pgid: UNKNOWN_ID,
            image: Arc::new(Image::default()),
            cwd: Vec::new(),
            creds_known: false,
            uid: 0,
            gid: 0,
            euid: 0,
            egid: 0,
            loginuid: u32::MAX,
            tty: 0,
            cap_inheritable: 0,
            cap_permitted: 0,
            cap_effective: 0,
            start_ts: 0,
            fd_table,
            nthreads: 0,
            subreaper: false,
            pending_newpid: false,
        }
    }
}

/// Falco's fd types (`fd.type`, `fd.typechar`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FdType {
    File,
    Directory,
    Ipv4,
    Ipv6,
    Unix,
    Pipe,
    Memfd,
    Event,
    Signalfd,
    Eventpoll,
    Inotify,
    Timerfd,
    Netlink,
    Bpf,
    Userfaultfd,
    IoUring,
    Other,
}

impl FdType {
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

    pub fn is_inet(self) -> bool {
        matches!(self, FdType::Ipv4 | FdType::Ipv6)
    }
}

/// The endpoints of an inet socket, stored client → server (Falco's convention).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Net {
    /// 6 tcp, 17 udp, 1/58 icmp, 255 raw, 0 unknown.
    pub l4proto: u8,
    pub cip: IpAddr,
    pub cport: u16,
    pub sip: IpAddr,
    pub sport: u16,
    /// Whether this process is the server end (then local = server).
    pub is_server: bool,
    pub connected: bool,
}

impl Net {
    pub fn unconnected(l4proto: u8, ipv6: bool) -> Self {
        let any = if ipv6 {
            IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        };
        Net {
            l4proto,
            cip: any,
            cport: 0,
            sip: any,
            sport: 0,
            is_server: false,
            connected: false,
        }
    }

    pub fn local(&self) -> (IpAddr, u16) {
        if self.is_server {
            (self.sip, self.sport)
        } else {
            (self.cip, self.cport)
        }
    }

    pub fn remote(&self) -> (IpAddr, u16) {
        if self.is_server {
            (self.cip, self.cport)
        } else {
            (self.sip, self.sport)
        }
    }
}

/// The object an fd refers to (shared by `dup`s of it).
#[derive(Clone, Debug)]
pub(crate) struct FdObj {
    pub ty: FdType,
    /// Falco's `fd.name`: resolved path, `memfd:NAME`, the connection tuple, the unix path.
    pub name: Vec<u8>,
    /// The path as the process passed it (files and directories only).
    pub nameraw: Vec<u8>,
    /// `open(2)` flags as far as known.
    pub flags: u32,
    pub net: Option<Net>,
    pub dev: u64,
    pub ino: u64,
}

impl FdObj {
    pub fn new(ty: FdType, name: Vec<u8>) -> Self {
        FdObj {
            ty,
            name,
            nameraw: Vec::new(),
            flags: 0,
            net: None,
            dev: 0,
            ino: 0,
        }
    }
}

/// One descriptor slot: the object and the per-descriptor close-on-exec flag.
#[derive(Clone, Debug)]
pub(crate) struct FdEntry {
    pub obj: Arc<FdObj>,
    pub cloexec: bool,
}

/// The fd table of one or more processes (`CLONE_FILES` shares it).
#[derive(Clone, Debug, Default)]
pub(crate) struct FdTable {
    pub fds: FxHashMap<i64, FdEntry>,
    /// Number of processes using this table.
    pub refs: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_cmdline_and_args() {
        let mut img = Image {
            comm: b"bash".to_vec(),
            args: vec![b"-c".to_vec(), b"ls -l".to_vec()],
            ..Image::default()
        };
        img.finish();
        assert_eq!(img.cmdline, b"bash -c ls -l");
        assert_eq!(img.args_joined(), b"-c ls -l");
        img.args.clear();
        img.finish();
        assert_eq!(img.cmdline, b"bash");
        assert_eq!(img.args_joined(), b"");
    }

    #[test]
    fn net_local_and_remote_follow_role() {
        let mut net = Net::unconnected(6, false);
        net.cip = "10.0.0.2".parse().unwrap();
        net.cport = 40000;
        net.sip = "10.0.0.1".parse().unwrap();
        net.sport = 443;
        assert_eq!(net.local().1, 40000);
        net.is_server = true;
        assert_eq!(net.local().1, 443);
        assert_eq!(net.remote().1, 40000);
    }
}

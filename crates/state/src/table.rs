//! The records of the state tables: threads, processes (thread groups), fd tables.
//!
//! Threads are small ([`Thread`]): everything Falco calls process-level (image, cwd, creds, fd
//! table) lives in the thread-group leader's [`Process`], found by `pid`. The executable image
//! ([`Image`]) is behind an `Arc` so a fork shares it until `execve` replaces it; fd tables are
//! stored by id so `CLONE_FILES` children can share one.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use rustc_hash::FxHashMap;
use vigil_event::FdType;

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
///
/// The arguments and the environment are kept flat (one buffer each, no vector per string):
/// argv lives only inside `cmdline`, the environment as its space-joined text plus the end
/// offset of each variable. Exec and snapshot loading overwrite a recycled image in place
/// ([`Image::set`]) so a steady stream of `execve` reuses its buffers.
#[derive(Clone, Debug, Default)]
pub(crate) struct Image {
    /// Whether this image was learned (snapshot or exec); `false` for placeholder processes
    /// made from an event of an unknown thread.
    pub known: bool,
    pub comm: Vec<u8>,
    pub exe: Vec<u8>,
    pub exepath: Vec<u8>,
    /// `comm` + ` ` + args joined by spaces (Falco `proc.cmdline`); `proc.args` is the tail
    /// from `args_start`.
    pub cmdline: Vec<u8>,
    pub args_start: usize,
    /// Number of arguments (argv[1..]).
    pub nargs: usize,
    /// The environment joined by spaces (Falco `proc.env`).
    pub env: Vec<u8>,
    /// End offset in `env` of each variable.
    pub env_ends: Vec<usize>,
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

/// Buffers beyond this many bytes are not worth keeping in a recycling pool.
pub(crate) const MAX_RECYCLED_BYTES: usize = 16 * 1024;

fn set_bytes(dst: &mut Vec<u8>, src: &[u8]) {
    dst.clear();
    dst.extend_from_slice(src);
}

/// What [`Image::set`] writes; `None` for `cgroup` keeps the current one.
pub(crate) struct ImageParts<'e> {
    pub comm: &'e [u8],
    pub exe: &'e [u8],
    pub exepath: &'e [u8],
    pub args: &'e [Vec<u8>],
    pub env: &'e [Vec<u8>],
    pub cgroup: Option<&'e [u8]>,
}

impl Image {
    /// Overwrites the strings of a known image (reusing its buffers) and derives `cmdline`,
    /// `args_start` and `container_id`; the exe flags and inode fields are left to the caller.
    pub fn set(&mut self, parts: &ImageParts<'_>) {
        self.known = true;
        set_bytes(&mut self.comm, parts.comm);
        set_bytes(&mut self.exe, parts.exe);
        set_bytes(&mut self.exepath, parts.exepath);
        self.set_args(parts.args);
        self.env.clear();
        self.env_ends.clear();
        for (i, var) in parts.env.iter().enumerate() {
            if i > 0 {
                self.env.push(b' ');
            }
            self.env.extend_from_slice(var);
            self.env_ends.push(self.env.len());
        }
        if let Some(cgroup) = parts.cgroup {
            set_bytes(&mut self.cgroup, cgroup);
        }
        self.container_id.clear();
        if let Some(id) = vigil_procfs::container_id_from_cgroup(&self.cgroup) {
            self.container_id.extend_from_slice(id);
        }
    }

    /// Rebuilds `cmdline` from `comm` and `args`.
    fn set_args(&mut self, args: &[Vec<u8>]) {
        let cmdline = &mut self.cmdline;
        cmdline.clear();
        cmdline.extend_from_slice(&self.comm);
        let mut args_start = cmdline.len();
        if !args.is_empty() {
            cmdline.push(b' ');
            args_start = cmdline.len();
            for (i, arg) in args.iter().enumerate() {
                if i > 0 {
                    cmdline.push(b' ');
                }
                cmdline.extend_from_slice(arg);
            }
        }
        self.args_start = args_start;
        self.nargs = args.len();
    }

    pub fn args_joined(&self) -> &[u8] {
        &self.cmdline[self.args_start.min(self.cmdline.len())..]
    }

    /// Total length of the arguments (without the separating spaces).
    pub fn args_len(&self) -> usize {
        if self.nargs == 0 {
            return 0;
        }
        (self.args_joined().len() + 1).saturating_sub(self.nargs)
    }

    /// The environment variables, `NAME=value` each.
    pub fn env_vars(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let mut start = 0;
        self.env_ends.iter().map(move |&end| {
            let var = self.env.get(start..end).unwrap_or_default();
            start = end + 1;
            var
        })
    }

    /// Whether this image's buffers are small enough to keep for reuse.
    pub fn recyclable(&self) -> bool {
        self.comm.capacity()
            + self.exe.capacity()
            + self.exepath.capacity()
            + self.cmdline.capacity()
            + self.env.capacity()
            + self.env_ends.capacity() * std::mem::size_of::<usize>()
            + self.cgroup.capacity()
            + self.container_id.capacity()
            <= 4 * MAX_RECYCLED_BYTES
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
    /// A placeholder for a process we learn about from an event of an unknown thread; `image`
    /// is an unknown (default) image, usually shared.
    pub fn placeholder(pid: i64, fd_table: u64, image: Arc<Image>) -> Self {
        Process {
            pid,
            ppid: 0,
            vpid: UNKNOWN_ID,
            sid: UNKNOWN_ID,
            vpgid: UNKNOWN_ID,
            pgid: UNKNOWN_ID,
            image,
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
    /// Changed through [`FdObj::set_name`] (which keeps `fd.nameraw` right).
    pub name: Vec<u8>,
    /// The path as the process passed it (files and directories only), unless it is the same
    /// as `name` (`raw_is_name`, the usual case: not copied). Read with [`FdObj::nameraw`].
    raw: Vec<u8>,
    raw_is_name: bool,
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
            raw: Vec::new(),
            raw_is_name: false,
            flags: 0,
            net: None,
            dev: 0,
            ino: 0,
        }
    }

    /// Makes this a fresh object of type `ty` (as [`FdObj::new`] with an empty name), keeping
    /// the buffers.
    pub fn reset(&mut self, ty: FdType) {
        self.ty = ty;
        self.name.clear();
        self.raw.clear();
        self.raw_is_name = false;
        self.flags = 0;
        self.net = None;
        self.dev = 0;
        self.ino = 0;
    }

    /// Whether this object's buffers are small enough to keep for reuse.
    pub fn recyclable(&self) -> bool {
        self.name.capacity() + self.raw.capacity() <= MAX_RECYCLED_BYTES
    }

    /// Falco's `fd.nameraw`.
    pub fn nameraw(&self) -> &[u8] {
        if self.raw_is_name {
            &self.name
        } else {
            &self.raw
        }
    }

    pub fn set_nameraw(&mut self, raw: &[u8]) {
        self.raw.clear();
        self.raw_is_name = raw == self.name.as_slice();
        if !self.raw_is_name {
            self.raw.extend_from_slice(raw);
        }
    }

    /// Sets `fd.name` to the path `resolved` (taking its buffer and leaving this object's old
    /// one in its place) and `fd.nameraw` to `raw`.
    pub fn set_path(&mut self, resolved: &mut Vec<u8>, raw: &[u8]) {
        std::mem::swap(&mut self.name, resolved);
        self.set_nameraw(raw);
    }

    /// Sets `fd.name` (`fd.nameraw` is unchanged).
    pub fn set_name(&mut self, name: &[u8]) {
        if self.raw_is_name {
            self.raw_is_name = false;
            self.raw.clear();
            self.raw.extend_from_slice(&self.name);
        }
        self.name.clear();
        self.name.extend_from_slice(name);
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
    fn image_cmdline_args_and_env() {
        let mut img = Image::default();
        let args = [b"-c".to_vec(), b"ls -l".to_vec()];
        let env = [b"A=1".to_vec(), b"B=x y".to_vec()];
        img.set(&ImageParts {
            comm: b"bash",
            exe: b"bash",
            exepath: b"/bin/bash",
            args: &args,
            env: &env,
            cgroup: None,
        });
        assert_eq!(img.cmdline, b"bash -c ls -l");
        assert_eq!(img.args_joined(), b"-c ls -l");
        assert_eq!((img.nargs, img.args_len()), (2, 7));
        assert_eq!(img.env, b"A=1 B=x y");
        let vars: Vec<&[u8]> = img.env_vars().collect();
        assert_eq!(vars, [&b"A=1"[..], b"B=x y"]);
        // Reused in place: nothing of the previous image leaks through.
        let cgroup = format!("0::/docker/{}", "0123456789abcdef".repeat(4));
        img.set(&ImageParts {
            comm: b"sh",
            exe: b"sh",
            exepath: b"/bin/sh",
            args: &[],
            env: &[b"".to_vec(), b"C=2".to_vec()],
            cgroup: Some(cgroup.as_bytes()),
        });
        assert_eq!(img.cmdline, b"sh");
        assert_eq!(img.args_joined(), b"");
        assert_eq!((img.nargs, img.args_len()), (0, 0));
        let vars: Vec<&[u8]> = img.env_vars().collect();
        assert_eq!(vars, [&b""[..], b"C=2"]);
        assert_eq!(img.container_id, b"0123456789ab");
        // An absent cgroup keeps the current one.
        img.set(&ImageParts {
            comm: b"x",
            exe: b"",
            exepath: b"",
            args: &[b"".to_vec(), b"".to_vec()],
            env: &[],
            cgroup: None,
        });
        assert_eq!(img.container_id, b"0123456789ab");
        assert_eq!(
            (img.nargs, img.args_len(), img.args_joined()),
            (2, 0, &b" "[..])
        );
        assert_eq!(img.env_vars().count(), 0);
    }

    #[test]
    fn nameraw_shared_with_name_until_renamed() {
        let mut obj = FdObj::new(FdType::File, Vec::new());
        let mut resolved = b"/etc/passwd".to_vec();
        obj.set_path(&mut resolved, b"/etc/passwd");
        assert!(resolved.is_empty());
        assert_eq!(
            (&obj.name[..], obj.nameraw()),
            (&b"/etc/passwd"[..], &b"/etc/passwd"[..])
        );
        obj.set_name(b"10.0.0.1:1->10.0.0.2:2");
        assert_eq!(obj.nameraw(), b"/etc/passwd");
        let mut resolved = b"/home/u/x".to_vec();
        obj.set_path(&mut resolved, b"x");
        assert_eq!(
            (&obj.name[..], obj.nameraw()),
            (&b"/home/u/x"[..], &b"x"[..])
        );
        obj.reset(FdType::Pipe);
        assert_eq!((&obj.name[..], obj.nameraw()), (&b""[..], &b""[..]));
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

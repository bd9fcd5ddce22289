//! Reading the host's process table (`/proc`) into a [`vigil_event::Snapshot`].
//!
//! Whoever attaches to a running system (`vigil watch` once the eBPF programs are attached,
//! the ptrace runner) calls [`read_snapshot`] once so that processes started before the agent
//! have a known image, credentials, cgroup and open files; the ptrace driver also reads a
//! stopped tracee's new image and descriptors with it. `/proc` is read through the [`ProcSource`] trait:
//! [`RealProc`] reads a real procfs mount, [`FakeProc`] is an in-memory table for tests.
//!
//! Processes and threads exit while the table is read: a file that vanished only skips that
//! process or thread, and everything skipped, cut or denied is counted in [`SnapshotStats`].
//!
//! The same trait reaches user databases (`vigil_state::LiveUsers`): [`ProcSource::stamp`] and
//! [`ProcSource::read_stamped`] on the host's `etc/passwd` (a [`RealProc`] rooted at `/`) and
//! on a container's `PID/root/etc/passwd`, where no symbolic link is followed.
//!
//! It knows only the event model: the drivers (`vigil-ebpf`'s caller, `vigil-ptrace`) and the
//! state engine use it without knowing each other.
#![forbid(unsafe_code)]

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use vigil_event::{FdInfo, FdType, Snapshot, SockTuple, ThreadInfo};

mod cgroup;
mod status;

pub use cgroup::{container_id_from_cgroup, SHORT_ID_LEN};
pub use status::{identity_is_fixed, own_status, parse_status, status_of, Status};

/// The smallest `argv`/environment budget [`SnapshotOptions`] accepts.
pub const MIN_ARG_BYTES: usize = 4096;

/// Kernel clock ticks per second as exposed to user space (`USER_HZ`). The `starttime` field
/// of `/proc/<pid>/stat` is in these ticks. `USER_HZ` is 100 on every architecture Linux
/// supports for user-visible interfaces (`include/asm-generic/param.h`); we assume it rather
/// than calling `sysconf(_SC_CLK_TCK)`, which would need `libc`.
const USER_HZ: u64 = 100;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// `ESRCH`: what reading a file of a process that is being reaped may fail with.
const ESRCH: i32 = 3;

/// Reading `/proc` as a whole failed.
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("failed to list processes in `{dir}`")]
    ListProcesses {
        dir: String,
        #[source]
        source: io::Error,
    },
}

/// The few operations [`read_snapshot`] needs from procfs. Paths are relative to the procfs
/// root, e.g. `123/task/124/stat`; the empty path is the root itself.
pub trait ProcSource {
    /// The numeric entries of a directory (pids in the root, tids in `PID/task`, fds in
    /// `PID/fd`), in any order.
    fn list(&self, dir: &str) -> io::Result<Vec<i64>>;
    /// At most `max` bytes of a file.
    fn read(&self, path: &str, max: usize) -> io::Result<Vec<u8>>;
    /// The target of a symbolic link.
    fn read_link(&self, path: &str) -> io::Result<Vec<u8>>;
    /// The [`FileStamp`] of the regular file at `path` (user databases are re-read when it
    /// changes). Below a process's root (`PID/root/…`) no symbolic link is followed: a
    /// container's link would resolve against the agent's root, not the container's.
    fn stamp(&self, path: &str) -> io::Result<FileStamp> {
        let _ = path;
        Err(io::ErrorKind::Unsupported.into())
    }
    /// At most `max` bytes of the regular file at `path`, with the stamp of the file read
    /// (the same rule for links as [`ProcSource::stamp`]).
    fn read_stamped(&self, path: &str, max: usize) -> io::Result<(FileStamp, Vec<u8>)> {
        let _ = (path, max);
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// What tells one version of a file from another without reading it: device, inode, size and
/// modification and change times. An editor or `useradd` replacing the file changes the
/// inode; an in-place rewrite changes the times (at the file system's timestamp granularity:
/// two same-size rewrites within one clock tick look alike).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileStamp {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl FileStamp {
    fn of(meta: &std::fs::Metadata) -> FileStamp {
        use std::os::unix::fs::MetadataExt;
        FileStamp {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
        }
    }
}

/// Whether `rel` goes through a process's root (`PID/root/…`): the rest of the path belongs
/// to another mount namespace and must not be resolved through symbolic links.
fn below_process_root(rel: &str) -> Option<(&str, &str)> {
    let (pid, rest) = rel.split_once('/')?;
    parse_id(pid)?;
    let inside = rest.strip_prefix("root/")?;
    Some((&rel[..rel.len() - inside.len()], inside))
}

/// A real procfs mount.
#[derive(Clone, Debug)]
pub struct RealProc {
    pub root: PathBuf,
}

impl Default for RealProc {
    fn default() -> Self {
        RealProc {
            root: PathBuf::from("/proc"),
        }
    }
}

impl RealProc {
    fn path(&self, rel: &str) -> PathBuf {
        if rel.is_empty() {
            self.root.clone()
        } else {
            self.root.join(rel)
        }
    }
}

impl ProcSource for RealProc {
    fn list(&self, dir: &str) -> io::Result<Vec<i64>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(self.path(dir))? {
            let entry = entry?;
            if let Some(n) = entry.file_name().to_str().and_then(parse_id) {
                out.push(n);
            }
        }
        Ok(out)
    }

    fn read(&self, path: &str, max: usize) -> io::Result<Vec<u8>> {
        let file = std::fs::File::open(self.path(path))?;
        // procfs reports a size of 0, so `read_to_end` would start with 32-byte probes and
        // double from there: eight reads for a `status`, each of `cmdline`/`environ` costing
        // a walk of the process's memory. One page covers most files in one read.
        let mut buf = Vec::with_capacity(max.clamp(1, 4096));
        file.take(u64::try_from(max).unwrap_or(u64::MAX))
            .read_to_end(&mut buf)?;
        Ok(buf)
    }

    fn read_link(&self, path: &str) -> io::Result<Vec<u8>> {
        use std::os::unix::ffi::OsStringExt;
        Ok(std::fs::read_link(self.path(path))?
            .into_os_string()
            .into_vec())
    }

    fn stamp(&self, path: &str) -> io::Result<FileStamp> {
        let meta = match below_process_root(path) {
            Some((root, inside)) => {
                // Every directory on the way must be a real directory, the file a real file.
                let mut at = root.trim_end_matches('/').to_owned();
                let mut parts = inside.split('/').filter(|c| !c.is_empty()).peekable();
                let mut meta = None;
                while let Some(part) = parts.next() {
                    if part == ".." {
                        return Err(io::ErrorKind::InvalidInput.into());
                    }
                    at.push('/');
                    at.push_str(part);
                    let m = std::fs::symlink_metadata(self.path(&at))?;
                    if parts.peek().is_some() && !m.is_dir() {
                        return Err(io::ErrorKind::InvalidData.into());
                    }
                    meta = Some(m);
                }
                meta.ok_or(io::ErrorKind::InvalidInput)?
            }
            None => std::fs::metadata(self.path(path))?,
        };
        if !meta.is_file() {
            return Err(io::ErrorKind::InvalidData.into());
        }
        Ok(FileStamp::of(&meta))
    }

    fn read_stamped(&self, path: &str, max: usize) -> io::Result<(FileStamp, Vec<u8>)> {
        let checked = self.stamp(path)?;
        let file = std::fs::File::open(self.path(path))?;
        let stamp = FileStamp::of(&file.metadata()?);
        // What was opened must be what was checked (not a link swapped in between).
        if (stamp.dev, stamp.ino) != (checked.dev, checked.ino) {
            return Err(io::ErrorKind::InvalidData.into());
        }
        let mut buf = Vec::with_capacity(max.min(usize::try_from(stamp.size).unwrap_or(max)));
        file.take(u64::try_from(max).unwrap_or(u64::MAX))
            .read_to_end(&mut buf)?;
        Ok((stamp, buf))
    }
}

/// One entry of a [`FakeProc`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FakeEntry {
    File(Vec<u8>),
    Link(Vec<u8>),
    /// Reading or following it fails with `EACCES`.
    Denied,
}

/// An in-memory procfs for tests: a map of relative paths to entries. Directories exist
/// implicitly: `list("12/fd")` yields every numeric `N` with some path `12/fd/N[/…]`.
#[derive(Clone, Debug, Default)]
pub struct FakeProc {
    pub entries: BTreeMap<String, FakeEntry>,
}

impl FakeProc {
    pub fn new() -> Self {
        FakeProc::default()
    }

    pub fn file(&mut self, path: &str, contents: impl Into<Vec<u8>>) -> &mut Self {
        self.entries
            .insert(path.to_owned(), FakeEntry::File(contents.into()));
        self
    }

    pub fn link(&mut self, path: &str, target: impl Into<Vec<u8>>) -> &mut Self {
        self.entries
            .insert(path.to_owned(), FakeEntry::Link(target.into()));
        self
    }

    pub fn deny(&mut self, path: &str) -> &mut Self {
        self.entries.insert(path.to_owned(), FakeEntry::Denied);
        self
    }

    /// Removes `path` and everything under it (a process or thread exiting).
    pub fn remove(&mut self, path: &str) -> &mut Self {
        let prefix = format!("{path}/");
        self.entries
            .retain(|k, _| k != path && !k.starts_with(&prefix));
        self
    }

    fn get(&self, path: &str) -> io::Result<&FakeEntry> {
        match self.entries.get(path) {
            Some(FakeEntry::Denied) => Err(io::ErrorKind::PermissionDenied.into()),
            Some(e) => Ok(e),
            None => Err(io::ErrorKind::NotFound.into()),
        }
    }
}

impl ProcSource for FakeProc {
    fn list(&self, dir: &str) -> io::Result<Vec<i64>> {
        let prefix = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let mut out: Vec<i64> = self
            .entries
            .keys()
            .filter_map(|k| k.strip_prefix(prefix.as_str()))
            .filter_map(|rest| parse_id(rest.split('/').next().unwrap_or("")))
            .collect();
        if out.is_empty() && !dir.is_empty() {
            return Err(io::ErrorKind::NotFound.into());
        }
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }

    fn read(&self, path: &str, max: usize) -> io::Result<Vec<u8>> {
        match self.get(path)? {
            FakeEntry::File(data) => Ok(data[..data.len().min(max)].to_vec()),
            _ => Err(io::Error::from_raw_os_error(22)),
        }
    }

    fn read_link(&self, path: &str) -> io::Result<Vec<u8>> {
        match self.get(path)? {
            FakeEntry::Link(target) => Ok(target.clone()),
            _ => Err(io::Error::from_raw_os_error(22)),
        }
    }

    /// The fake's stamp: the contents' length and a hash of them as the inode, so replacing
    /// a file's contents changes its stamp. A link is refused as the real one refuses it
    /// below a process root.
    fn stamp(&self, path: &str) -> io::Result<FileStamp> {
        match self.get(path)? {
            FakeEntry::File(data) => {
                let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
                for &b in data {
                    hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
                }
                Ok(FileStamp {
                    ino: hash,
                    size: data.len() as u64,
                    ..FileStamp::default()
                })
            }
            _ => Err(io::ErrorKind::InvalidData.into()),
        }
    }

    fn read_stamped(&self, path: &str, max: usize) -> io::Result<(FileStamp, Vec<u8>)> {
        Ok((self.stamp(path)?, self.read(path, max)?))
    }
}

/// Limits for [`read_snapshot`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotOptions {
    /// A process (thread group) left out, with all its threads: the agent never captures
    /// itself. Defaults to the calling process.
    pub exclude_pid: Option<i64>,
    /// Processes beyond this many are dropped (counted in [`SnapshotStats::processes_dropped`]).
    pub max_processes: usize,
    /// Fds beyond this many per process are dropped (counted in [`SnapshotStats::fds_dropped`]).
    pub max_fds_per_process: usize,
    /// Bytes of `cmdline` / `environ` kept per process; raised to [`MIN_ARG_BYTES`] if lower.
    pub max_argv_bytes: usize,
    pub max_env_bytes: usize,
    /// Whether to read open file descriptors at all.
    pub read_fds: bool,
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        SnapshotOptions {
            exclude_pid: Some(i64::from(std::process::id())),
            max_processes: 65_536,
            max_fds_per_process: 4096,
            max_argv_bytes: 64 * 1024,
            max_env_bytes: 64 * 1024,
            read_fds: true,
        }
    }
}

/// What [`read_snapshot`] read, skipped and cut.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SnapshotStats {
    pub processes: u64,
    pub threads: u64,
    pub fds: u64,
    /// The excluded process was seen (and left out).
    pub excluded: u64,
    /// Processes / threads that exited (or became unreadable) while being read.
    pub vanished_processes: u64,
    pub vanished_threads: u64,
    /// Processes over [`SnapshotOptions::max_processes`].
    pub processes_dropped: u64,
    /// Fds over [`SnapshotOptions::max_fds_per_process`].
    pub fds_dropped: u64,
    /// Processes whose `argv` / environment was cut to the byte limit.
    pub argv_truncated: u64,
    pub env_truncated: u64,
    /// Reads or link lookups refused with `EACCES` (other users' `environ`, `exe`, `fd`…).
    pub permission_denied: u64,
    /// Processes with at least one such refusal.
    pub denied_processes: u64,
}

/// Reads the process table into a [`Snapshot`] (users and groups left empty: a live state
/// engine follows the host's and containers' databases itself, `vigil_state::LiveUsers`). Fails
/// only when the process list itself cannot be read.
pub fn read_snapshot(
    src: &dyn ProcSource,
    opts: &SnapshotOptions,
) -> Result<(Snapshot, SnapshotStats), ProcError> {
    let mut stats = SnapshotStats::default();
    let mut pids = src.list("").map_err(|source| ProcError::ListProcesses {
        dir: String::new(),
        source,
    })?;
    pids.sort_unstable();
    pids.dedup();

    let mut snap = Snapshot {
        hostname: hostname(src)
            .map_err(|e| classify(&e, &mut stats))
            .unwrap_or_default(),
        start_ts: now_ns(),
        ..Snapshot::default()
    };
    let btime = read_small(src, "stat", &mut stats).and_then(|s| parse_btime(&s));

    let mut reader = Reader {
        src,
        opts,
        btime,
        argv_max: opts.max_argv_bytes.max(MIN_ARG_BYTES),
        env_max: opts.max_env_bytes.max(MIN_ARG_BYTES),
        stats: &mut stats,
        net: HashMap::new(),
    };
    let mut taken = 0usize;
    for pid in pids {
        if Some(pid) == opts.exclude_pid {
            reader.stats.excluded += 1;
            continue;
        }
        if taken >= opts.max_processes {
            reader.stats.processes_dropped += 1;
            continue;
        }
        let denied_before = reader.stats.permission_denied;
        let taken_now = reader.process(pid, &mut snap.threads);
        if reader.stats.permission_denied > denied_before {
            reader.stats.denied_processes += 1;
        }
        if taken_now {
            taken += 1;
            reader.stats.processes += 1;
        } else {
            reader.stats.vanished_processes += 1;
        }
    }
    Ok((snap, stats))
}

struct Reader<'a> {
    src: &'a dyn ProcSource,
    opts: &'a SnapshotOptions,
    btime: Option<u64>,
    argv_max: usize,
    env_max: usize,
    stats: &'a mut SnapshotStats,
    /// Socket tables per network namespace (keyed by the `ns/net` link target).
    net: HashMap<Vec<u8>, NetTable>,
}

/// Process-wide data, read once from the leader's directory.
#[derive(Default)]
struct ProcessInfo {
    exe: Vec<u8>,
    args: Vec<Vec<u8>>,
    env: Vec<Vec<u8>>,
    exepath: Vec<u8>,
    exe_from_memfd: bool,
    cwd: Vec<u8>,
    loginuid: u32,
    cgroup: Vec<u8>,
}

/// Everything else is small: `stat`, `status`, `comm`, `cgroup`, `loginuid`, `fdinfo/N`.
const SMALL_FILE: usize = 64 * 1024;

/// How a failed read of one file is taken.
enum Miss {
    /// The process or thread is gone.
    Vanished,
    /// Denied or otherwise unreadable: leave the field empty.
    Unreadable,
}

fn classify(err: &io::Error, stats: &mut SnapshotStats) -> Miss {
    if err.kind() == io::ErrorKind::NotFound || err.raw_os_error() == Some(ESRCH) {
        Miss::Vanished
    } else {
        if err.kind() == io::ErrorKind::PermissionDenied {
            stats.permission_denied += 1;
        }
        Miss::Unreadable
    }
}

/// Reads an optional small file; `None` when missing or unreadable (denials counted).
fn read_small(src: &dyn ProcSource, path: &str, stats: &mut SnapshotStats) -> Option<Vec<u8>> {
    match src.read(path, SMALL_FILE) {
        Ok(data) => Some(data),
        Err(e) => {
            classify(&e, stats);
            None
        }
    }
}

impl Reader<'_> {
    fn opt_read(&mut self, path: &str, max: usize) -> Option<Vec<u8>> {
        match self.src.read(path, max) {
            Ok(data) => Some(data),
            Err(e) => {
                classify(&e, self.stats);
                None
            }
        }
    }

    fn opt_link(&mut self, path: &str) -> Option<Vec<u8>> {
        match self.src.read_link(path) {
            Ok(data) => Some(data),
            Err(e) => {
                classify(&e, self.stats);
                None
            }
        }
    }

    /// Appends the threads of `pid`; false when the process vanished before its leader or any
    /// thread could be read.
    fn process(&mut self, pid: i64, out: &mut Vec<ThreadInfo>) -> bool {
        let mut tids = match self.src.list(&format!("{pid}/task")) {
            Ok(t) => t,
            Err(e) => {
                classify(&e, self.stats);
                return false;
            }
        };
        // The leader first: it carries the fds.
        tids.sort_unstable_by_key(|&t| (t != pid, t));
        tids.dedup();
        let info = self.process_info(pid);
        let start = out.len();
        for tid in tids {
            match self.thread(pid, tid, &info) {
                Some(t) => {
                    out.push(t);
                    self.stats.threads += 1;
                }
                None => self.stats.vanished_threads += 1,
            }
        }
        if out.len() == start {
            return false;
        }
        if self.opts.read_fds && out[start].tid == pid {
            out[start].fds = self.fds(pid);
        }
        true
    }

    fn process_info(&mut self, pid: i64) -> ProcessInfo {
        let mut info = ProcessInfo {
            loginuid: u32::MAX,
            ..ProcessInfo::default()
        };
        let argv_max = self.argv_max;
        if let Some(raw) = self.opt_read(&format!("{pid}/cmdline"), argv_max + 1) {
            let (mut args, cut) = split_nul_list(&raw, argv_max);
            if cut {
                self.stats.argv_truncated += 1;
            }
            if !args.is_empty() {
                info.exe = args.remove(0);
            }
            info.args = args;
        }
        let env_max = self.env_max;
        if let Some(raw) = self.opt_read(&format!("{pid}/environ"), env_max + 1) {
            let (env, cut) = split_nul_list(&raw, env_max);
            if cut {
                self.stats.env_truncated += 1;
            }
            info.env = env;
        }
        if let Some(target) = self.opt_link(&format!("{pid}/exe")) {
            let (path, from_memfd) = parse_exe_link(&target);
            info.exepath = path;
            info.exe_from_memfd = from_memfd;
        }
        if let Some(cwd) = self.opt_link(&format!("{pid}/cwd")) {
            info.cwd = cwd;
        }
        if let Some(raw) = self.opt_read(&format!("{pid}/loginuid"), SMALL_FILE) {
            info.loginuid = parse_num::<u32>(trim_newline(&raw)).unwrap_or(u32::MAX);
        }
        if let Some(raw) = self.opt_read(&format!("{pid}/cgroup"), SMALL_FILE) {
            info.cgroup = pick_cgroup(&raw);
        }
        info
    }

    fn thread(&mut self, pid: i64, tid: i64, info: &ProcessInfo) -> Option<ThreadInfo> {
        let dir = format!("{pid}/task/{tid}");
        let stat = self.required(&format!("{dir}/stat"))?;
        let status = self.required(&format!("{dir}/status"))?;
        let stat = parse_stat(&stat)?;
        let status = parse_status(&status);
        let comm = match self.opt_read(&format!("{dir}/comm"), SMALL_FILE) {
            Some(c) => trim_newline(&c).to_vec(),
            None => stat.comm.clone(),
        };
        let start_ts = self.btime.map_or(0, |b| {
            b.saturating_mul(NANOS_PER_SEC)
                .saturating_add(stat.starttime.saturating_mul(NANOS_PER_SEC / USER_HZ))
        });
        Some(ThreadInfo {
            tid,
            pid: status.tgid.unwrap_or(pid),
            ppid: status.ppid.unwrap_or(stat.ppid),
            vtid: status.vtid.unwrap_or(tid),
            vpid: status.vpid.unwrap_or(pid),
            sid: stat.session,
            vpgid: status.vpgid.unwrap_or(stat.pgrp),
            pgid: stat.pgrp,
            comm,
            exe: info.exe.clone(),
            exepath: info.exepath.clone(),
            args: info.args.clone(),
            env: info.env.clone(),
            cwd: info.cwd.clone(),
            uid: status.uid,
            gid: status.gid,
            euid: status.euid,
            egid: status.egid,
            loginuid: info.loginuid,
            // tty_nr is a dev_t encoded in an int; keep its bit pattern.
            tty: stat.tty_nr as u32,
            start_ts,
            cap_inheritable: status.cap_inh,
            cap_permitted: status.cap_prm,
            cap_effective: status.cap_eff,
            cgroup: info.cgroup.clone(),
            exe_from_memfd: info.exe_from_memfd,
            ..ThreadInfo::default()
        })
    }

    /// A file a thread cannot be described without; `None` (thread skipped) when unreadable.
    fn required(&mut self, path: &str) -> Option<Vec<u8>> {
        match self.src.read(path, SMALL_FILE) {
            Ok(data) if !data.is_empty() => Some(data),
            Ok(_) => None,
            Err(e) => {
                classify(&e, self.stats);
                None
            }
        }
    }

    /// The socket table of `pid`'s network namespace, read once per namespace.
    fn net_table(&mut self, pid: i64) -> Option<&NetTable> {
        let key = self.opt_link(&format!("{pid}/ns/net")).unwrap_or_default();
        if !self.net.contains_key(&key) {
            let mut table = NetTable::default();
            let read = |file: &str| self.src.read(&format!("{pid}/net/{file}"), NET_FILE).ok();
            for (file, l4proto, ipv6) in [
                ("tcp", 6, false),
                ("tcp6", 6, true),
                ("udp", 17, false),
                ("udp6", 17, true),
            ] {
                if let Some(raw) = read(file) {
                    table.add_inet(&raw, l4proto, ipv6);
                }
            }
            if let Some(raw) = read("unix") {
                table.add_unix(&raw);
            }
            if let Some(raw) = read("netlink") {
                table.add_netlink(&raw);
            }
            self.net.insert(key.clone(), table);
        }
        self.net.get(&key)
    }

    fn fds(&mut self, pid: i64) -> Vec<FdInfo> {
        let mut nums = match self.src.list(&format!("{pid}/fd")) {
            Ok(n) => n,
            Err(e) => {
                classify(&e, self.stats);
                return Vec::new();
            }
        };
        nums.sort_unstable();
        nums.dedup();
        if nums.len() > self.opts.max_fds_per_process {
            self.stats.fds_dropped += (nums.len() - self.opts.max_fds_per_process) as u64;
            nums.truncate(self.opts.max_fds_per_process);
        }
        let mut out = Vec::with_capacity(nums.len());
        for fd in nums {
            // An fd closed since the listing is simply not there any more.
            let Some(target) = self.opt_link(&format!("{pid}/fd/{fd}")) else {
                continue;
            };
            let (mut kind, mut name) = classify_fd_target(&target);
            let mut tuple = None;
            if let Some(ino) = socket_inode(&target) {
                if let Some(socket) = self.net_table(pid).and_then(|t| t.sockets.get(&ino)) {
                    kind = socket.kind;
                    tuple = socket.tuple.clone();
                    name = socket.name.clone();
                }
            }
            let flags = self
                .opt_read(&format!("{pid}/fdinfo/{fd}"), SMALL_FILE)
                .and_then(|i| parse_fdinfo_flags(&i))
                .unwrap_or(0);
            out.push(FdInfo {
                fd,
                kind,
                tuple,
                name,
                flags,
            });
            self.stats.fds += 1;
        }
        out
    }
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

fn parse_id(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

pub(crate) fn parse_num<T: std::str::FromStr>(b: &[u8]) -> Option<T> {
    std::str::from_utf8(b).ok()?.trim().parse().ok()
}

fn trim_newline(b: &[u8]) -> &[u8] {
    b.strip_suffix(b"\n").unwrap_or(b)
}

/// This host's name as the kernel has it (`sys/kernel/hostname`: the UTS namespace's nodename,
/// what `gethostname(2)` returns), without the newline — the one reader of the host name.
pub fn hostname(src: &dyn ProcSource) -> io::Result<Vec<u8>> {
    src.read("sys/kernel/hostname", SMALL_FILE)
        .map(|h| trim_newline(&h).to_vec())
}

/// The live host's [`hostname`] as text (invalid UTF-8 replaced), empty when unreadable.
pub fn host_name() -> String {
    hostname(&RealProc::default())
        .map(|h| String::from_utf8_lossy(&h).into_owned())
        .unwrap_or_default()
}

/// `btime` (boot time, seconds since the epoch) from `/proc/stat`.
fn parse_btime(stat: &[u8]) -> Option<u64> {
    stat.split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"btime "))
        .and_then(parse_num)
}

/// Splits a NUL-separated list (`cmdline`, `environ`) cut to `max` bytes; the flag says
/// whether it was cut. A trailing NUL ends the last entry; empty entries in between are kept
/// (`argv` may hold empty strings).
fn split_nul_list(raw: &[u8], max: usize) -> (Vec<Vec<u8>>, bool) {
    let cut = raw.len() > max;
    let data = &raw[..raw.len().min(max)];
    if data.is_empty() {
        return (Vec::new(), cut);
    }
    let data = data.strip_suffix(b"\0").unwrap_or(data);
    (data.split(|&b| b == 0).map(<[u8]>::to_vec).collect(), cut)
}

/// The `exe` link target: the path without ` (deleted)`, and whether it is a memfd.
fn parse_exe_link(target: &[u8]) -> (Vec<u8>, bool) {
    let path = target.strip_suffix(b" (deleted)").unwrap_or(target);
    // A memfd's link reads `/memfd:NAME (deleted)`; the live drivers name it `memfd:NAME`
    // (the memfd's own name, as its `fd.name`), and so does the snapshot.
    match path.strip_prefix(b"/") {
        Some(name) if name.starts_with(b"memfd:") => (name.to_vec(), true),
        _ => (path.to_vec(), false),
    }
}

/// The fields of `/proc/<pid>/stat` we use.
#[derive(Debug, Default, PartialEq, Eq)]
struct Stat {
    comm: Vec<u8>,
    ppid: i64,
    pgrp: i64,
    session: i64,
    tty_nr: i64,
    /// Clock ticks after boot.
    starttime: u64,
}

/// Parses `/proc/<pid>/stat`. `comm` may contain spaces and parentheses, so it is everything
/// between the first `(` and the *last* `)`; the numeric fields follow.
fn parse_stat(raw: &[u8]) -> Option<Stat> {
    let open = memchr::memchr(b'(', raw)?;
    let close = memchr::memrchr(b')', raw)?;
    if close < open {
        return None;
    }
    let comm = raw[open + 1..close].to_vec();
    // Field 3 (`state`) is index 0 here: field N is at index N - 3.
    let rest: Vec<&[u8]> = raw[close + 1..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
        .collect();
    let field = |n: usize| rest.get(n - 3).and_then(|f| parse_num::<i64>(f));
    Some(Stat {
        comm,
        ppid: field(4)?,
        pgrp: field(5)?,
        session: field(6)?,
        tty_nr: field(7)?,
        starttime: rest.get(22 - 3).and_then(|f| parse_num(f))?,
    })
}

/// Picks one path from `/proc/<pid>/cgroup` (`hierarchy:controllers:path` lines): the first
/// line whose path names a container (so a v1 hierarchy that shows the container wins over a
/// hybrid system's `0::/` line), else the unified `0::` line, else the first line.
fn pick_cgroup(raw: &[u8]) -> Vec<u8> {
    let paths: Vec<(&[u8], bool)> = raw
        .split(|&b| b == b'\n')
        .filter_map(|line| {
            let mut parts = line.splitn(3, |&b| b == b':');
            let hier = parts.next()?;
            let ctrl = parts.next()?;
            let path = parts.next()?;
            Some((path, hier == b"0" && ctrl.is_empty()))
        })
        .collect();
    paths
        .iter()
        .find(|(p, _)| container_id_from_cgroup(p).is_some())
        .or_else(|| paths.iter().find(|(_, unified)| *unified))
        .or_else(|| paths.first())
        .map(|(p, _)| p.to_vec())
        .unwrap_or_default()
}

/// `/proc/<pid>/net/*` tables can be large on busy hosts; beyond this, sockets stay `<NA>`.
const NET_FILE: usize = 8 << 20;

/// One socket of a network namespace's tables: its type, tuple (inet, once connected) and
/// `fd.name` (a Unix socket's path).
#[derive(Debug)]
struct Socket {
    kind: FdType,
    tuple: Option<SockTuple>,
    name: Vec<u8>,
}

/// The sockets of one network namespace by inode, from `/proc/<pid>/net/{tcp,udp,unix,…}`.
#[derive(Debug, Default)]
struct NetTable {
    sockets: HashMap<u64, Socket>,
}

/// The inode of a `socket:[N]` fd link target.
fn socket_inode(target: &[u8]) -> Option<u64> {
    let inner = target.strip_prefix(b"socket:[")?.strip_suffix(b"]")?;
    parse_num(inner)
}

/// An address of `/proc/net/tcp*`: the IPv4 word or four IPv6 words, each in host (little-
/// endian) byte order, in hex.
fn parse_net_addr(hex: &[u8], ipv6: bool) -> Option<IpAddr> {
    let word = |i: usize| -> Option<[u8; 4]> {
        let s = std::str::from_utf8(hex.get(i * 8..i * 8 + 8)?).ok()?;
        Some(u32::from_str_radix(s, 16).ok()?.to_le_bytes())
    };
    if ipv6 {
        if hex.len() != 32 {
            return None;
        }
        let mut b = [0u8; 16];
        for i in 0..4 {
            b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
        }
        Some(IpAddr::V6(Ipv6Addr::from(b)))
    } else {
        if hex.len() != 8 {
            return None;
        }
        Some(IpAddr::V4(Ipv4Addr::from(word(0)?)))
    }
}

/// `ADDR:PORT` of `/proc/net/tcp*`.
fn parse_endpoint(field: &[u8], ipv6: bool) -> Option<(IpAddr, u16)> {
    let colon = memchr::memrchr(b':', field)?;
    let ip = parse_net_addr(&field[..colon], ipv6)?;
    let port = u16::from_str_radix(std::str::from_utf8(&field[colon + 1..]).ok()?, 16).ok()?;
    Some((ip, port))
}

/// TCP state `0A`: listening.
const TCP_LISTEN: &[u8] = b"0A";

impl NetTable {
    /// `/proc/net/{tcp,tcp6,udp,udp6}`: established and connected sockets get their tuple
    /// (client → server: a socket whose local port is a listening port of the table is the
    /// server side), listening and unconnected ones none.
    fn add_inet(&mut self, raw: &[u8], l4proto: u8, ipv6: bool) {
        struct Row {
            local: (IpAddr, u16),
            remote: (IpAddr, u16),
            listening: bool,
            inode: u64,
        }
        let rows: Vec<Row> = raw
            .split(|&b| b == b'\n')
            .skip(1)
            .filter_map(|line| {
                let f: Vec<&[u8]> = line
                    .split(|b| b.is_ascii_whitespace())
                    .filter(|w| !w.is_empty())
                    .collect();
                Some(Row {
                    local: parse_endpoint(f.get(1)?, ipv6)?,
                    remote: parse_endpoint(f.get(2)?, ipv6)?,
                    listening: *f.get(3)? == TCP_LISTEN && l4proto == 6,
                    inode: parse_num(f.get(9)?)?,
                })
            })
            .collect();
        let listen_ports: Vec<u16> = rows
            .iter()
            .filter(|r| r.listening)
            .map(|r| r.local.1)
            .collect();
        for row in rows {
            if row.inode == 0 {
                continue;
            }
            let connected = !row.listening && row.remote.1 != 0;
            let tuple = connected.then(|| {
                let server = l4proto == 6 && listen_ports.contains(&row.local.1);
                let (client, srv) = if server {
                    (row.remote, row.local)
                } else {
                    (row.local, row.remote)
                };
                SockTuple::Inet {
                    l4proto,
                    src_ip: client.0,
                    src_port: client.1,
                    dst_ip: srv.0,
                    dst_port: srv.1,
                }
            });
            let kind = if ipv6 { FdType::Ipv6 } else { FdType::Ipv4 };
            self.sockets.insert(
                row.inode,
                Socket {
                    kind,
                    tuple,
                    name: Vec::new(),
                },
            );
        }
    }

    /// `/proc/net/unix`: `Num RefCount Protocol Flags Type St Inode [Path]`.
    fn add_unix(&mut self, raw: &[u8]) {
        for line in raw.split(|&b| b == b'\n').skip(1) {
            let f: Vec<&[u8]> = line
                .split(|b| b.is_ascii_whitespace())
                .filter(|w| !w.is_empty())
                .collect();
            let Some(inode) = f.get(6).and_then(|i| parse_num::<u64>(i)) else {
                continue;
            };
            let path = f.get(7).map(|p| p.to_vec()).unwrap_or_default();
            self.sockets.insert(
                inode,
                Socket {
                    kind: FdType::Unix,
                    tuple: None,
                    name: path,
                },
            );
        }
    }

    /// `/proc/net/netlink`: the inode is the last column.
    fn add_netlink(&mut self, raw: &[u8]) {
        for line in raw.split(|&b| b == b'\n').skip(1) {
            let inode = line
                .split(|b| b.is_ascii_whitespace())
                .rfind(|w| !w.is_empty())
                .and_then(parse_num::<u64>);
            if let Some(inode) = inode.filter(|&i| i != 0) {
                self.sockets.insert(
                    inode,
                    Socket {
                        kind: FdType::Netlink,
                        tuple: None,
                        name: Vec::new(),
                    },
                );
            }
        }
    }
}

/// One descriptor of a live process, read from `/proc/<pid>/fd/<fd>` and its `fdinfo` (as the
/// snapshot describes descriptors; sockets are not resolved to their tuples here). `None` when
/// the descriptor is not open (or the process is gone).
pub fn read_fd(pid: i64, fd: i64) -> Option<FdInfo> {
    use std::os::unix::ffi::OsStrExt;
    let target = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let (kind, name) = classify_fd_target(target.as_os_str().as_bytes());
    let flags = std::fs::read(format!("/proc/{pid}/fdinfo/{fd}"))
        .ok()
        .and_then(|i| parse_fdinfo_flags(&i))
        .unwrap_or(0);
    Some(FdInfo {
        fd,
        kind,
        tuple: None,
        name,
        flags,
    })
}

/// The kind and `fd.name` of an fd from its `/proc/<pid>/fd/N` link target.
fn classify_fd_target(target: &[u8]) -> (FdType, Vec<u8>) {
    if let Some(rest) = target.strip_prefix(b"/memfd:") {
        let name = rest.strip_suffix(b" (deleted)").unwrap_or(rest);
        let mut out = b"memfd:".to_vec();
        out.extend_from_slice(name);
        return (FdType::Memfd, out);
    }
    if target.starts_with(b"/") {
        return (FdType::File, target.to_vec());
    }
    let kind = if target.starts_with(b"pipe:") {
        FdType::Pipe
    } else if let Some(anon) = target.strip_prefix(b"anon_inode:") {
        match anon {
            b"[eventfd]" => FdType::Event,
            b"[eventpoll]" => FdType::Eventpoll,
            b"[signalfd]" => FdType::Signalfd,
            b"[timerfd]" => FdType::Timerfd,
            b"inotify" => FdType::Inotify,
            b"[userfaultfd]" => FdType::Userfaultfd,
            b"[io_uring]" => FdType::IoUring,
            a if a.starts_with(b"bpf") => FdType::Bpf,
            _ => FdType::Other,
        }
    } else {
        // `socket:[ino]`: the family needs `/proc/net/*` lookups, not done here.
        FdType::Other
    };
    (kind, target.to_vec())
}

/// The `flags:` line of `/proc/<pid>/fdinfo/N` (octal `open(2)` flags).
fn parse_fdinfo_flags(raw: &[u8]) -> Option<u32> {
    let line = raw
        .split(|&b| b == b'\n')
        .find_map(|l| l.strip_prefix(b"flags:"))?;
    let s = std::str::from_utf8(line).ok()?.trim();
    u32::from_str_radix(s, 8).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat_line(
        pid: i64,
        comm: &str,
        ppid: i64,
        pgrp: i64,
        sid: i64,
        tty: i64,
        start: u64,
    ) -> String {
        // Fields 3..=22; starttime is field 22.
        format!(
            "{pid} ({comm}) S {ppid} {pgrp} {sid} {tty} -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 {start} 1000 200 18446744073709551615\n"
        )
    }

    fn status_text(tgid: i64, ppid: i64, nspid: &str, nstgid: &str) -> String {
        format!(
            "Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t{tgid}\nNgid:\t0\nPid:\t0\nPPid:\t{ppid}\n\
             Uid:\t1000\t1001\t1002\t1003\nGid:\t2000\t2001\t2002\t2003\n\
             NStgid:\t{nstgid}\nNSpid:\t{nspid}\nNSpgid:\t{nstgid}\nNSsid:\t{nstgid}\n\
             CapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t00000000a80425fb\n"
        )
    }

    /// A process `pid` with one thread (the leader) and the usual files.
    fn add_process(p: &mut FakeProc, pid: i64, comm: &str) {
        let task = format!("{pid}/task/{pid}");
        p.file(
            &format!("{task}/stat"),
            stat_line(pid, comm, 1, pid, pid, 34816, 250),
        );
        p.file(
            &format!("{task}/status"),
            status_text(pid, 1, &pid.to_string(), &pid.to_string()),
        );
        p.file(&format!("{task}/comm"), format!("{comm}\n"));
        p.file(
            &format!("{pid}/cmdline"),
            b"/bin/sh\0-c\0echo hi\0".to_vec(),
        );
        p.file(
            &format!("{pid}/environ"),
            b"HOME=/root\0PATH=/bin\0".to_vec(),
        );
        p.link(&format!("{pid}/exe"), "/usr/bin/dash");
        p.link(&format!("{pid}/cwd"), "/tmp");
        p.file(&format!("{pid}/loginuid"), "1000");
        p.file(&format!("{pid}/cgroup"), "0::/user.slice/session-1.scope\n");
    }

    #[test]
    fn hostname_is_the_kernels_without_its_newline() {
        assert_eq!(hostname(&base()).unwrap(), b"box");
        assert!(hostname(&FakeProc::new()).is_err(), "unreadable");
        let live = host_name();
        assert!(!live.is_empty() && !live.ends_with('\n'), "{live:?}");
    }

    fn base() -> FakeProc {
        let mut p = FakeProc::new();
        p.file("sys/kernel/hostname", "box\n");
        p.file("stat", "cpu  1 2 3\nbtime 1700000000\nprocesses 5\n");
        p
    }

    fn opts() -> SnapshotOptions {
        SnapshotOptions {
            exclude_pid: None,
            ..SnapshotOptions::default()
        }
    }

    fn thread(snap: &Snapshot, tid: i64) -> &ThreadInfo {
        snap.threads
            .iter()
            .find(|t| t.tid == tid)
            .unwrap_or_else(|| panic!("thread {tid} missing from {:?}", snap.threads))
    }

    #[test]
    fn stat_comm_with_spaces_and_parentheses() {
        let raw = stat_line(42, "a) (b c) d", 7, 8, 9, 34817, 12345);
        let st = parse_stat(raw.as_bytes()).expect("stat parses");
        assert_eq!(st.comm, b"a) (b c) d");
        assert_eq!((st.ppid, st.pgrp, st.session, st.tty_nr), (7, 8, 9, 34817));
        assert_eq!(st.starttime, 12345);
        assert_eq!(parse_stat(b"42 (x) S 1 2"), None, "short stat is rejected");
        assert_eq!(parse_stat(b"no parens at all"), None);
        assert_eq!(parse_stat(b") 1 2 3 ("), None);
    }

    #[test]
    fn status_ids_credentials_and_capabilities() {
        let st = parse_status(status_text(100, 5, "101\t7", "100\t3").as_bytes());
        assert_eq!(st.tgid, Some(100));
        assert_eq!(st.ppid, Some(5));
        assert_eq!(st.vtid, Some(7), "last NSpid entry");
        assert_eq!(st.vpid, Some(3), "last NStgid entry");
        assert_eq!(st.vpgid, Some(3));
        assert_eq!((st.uid, st.euid, st.gid, st.egid), (1000, 1001, 2000, 2001));
        assert_eq!(st.cap_inh, 0);
        assert_eq!(st.cap_prm, 0x1ff_ffff_ffff);
        assert_eq!(st.cap_eff, 0xa804_25fb);
        let empty = parse_status(b"garbage\n\xff\xfe:\n");
        assert_eq!(empty, Status::default());
    }

    #[test]
    fn cmdline_non_utf8_and_empty_args() {
        let (args, cut) = split_nul_list(b"/bin/x\0\0\xff\xfe\0last\0", 4096);
        assert!(!cut);
        assert_eq!(
            args,
            vec![
                b"/bin/x".to_vec(),
                Vec::new(),
                b"\xff\xfe".to_vec(),
                b"last".to_vec()
            ]
        );
        assert_eq!(split_nul_list(b"", 4096), (Vec::new(), false));
        // No trailing NUL (a process that rewrote its argv).
        assert_eq!(
            split_nul_list(b"a\0b", 4096).0,
            vec![b"a".to_vec(), b"b".to_vec()]
        );
        // Cut: the partial last entry stays, the flag is set.
        assert_eq!(
            split_nul_list(b"abc\0defg\0", 6),
            (vec![b"abc".to_vec(), b"de".to_vec()], true)
        );
    }

    #[test]
    fn cgroup_v1_and_v2() {
        assert_eq!(
            pick_cgroup(b"0::/system.slice/sshd.service\n"),
            b"/system.slice/sshd.service"
        );
        let id = "3f4c1a2b5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708";
        let v1 = format!("12:pids:/\n11:memory:/docker/{id}\n0::/\n");
        assert_eq!(
            pick_cgroup(v1.as_bytes()),
            format!("/docker/{id}").into_bytes()
        );
        assert_eq!(
            pick_cgroup(b"5:cpu,cpuacct:/user.slice\n0::/init.scope\n"),
            b"/init.scope"
        );
        assert_eq!(
            pick_cgroup(b"5:cpu,cpuacct:/user.slice\n4:pids:/x\n"),
            b"/user.slice"
        );
        assert_eq!(pick_cgroup(b""), b"");
        assert_eq!(pick_cgroup(b"\xff\xff"), b"");
    }

    #[test]
    fn fd_link_kinds() {
        let cases: &[(&[u8], FdType, &[u8])] = &[
            (b"/etc/passwd", FdType::File, b"/etc/passwd"),
            (b"/memfd:payload (deleted)", FdType::Memfd, b"memfd:payload"),
            (b"/memfd:x", FdType::Memfd, b"memfd:x"),
            (b"pipe:[1234]", FdType::Pipe, b"pipe:[1234]"),
            (b"socket:[99]", FdType::Other, b"socket:[99]"),
            (
                b"anon_inode:[eventfd]",
                FdType::Event,
                b"anon_inode:[eventfd]",
            ),
            (
                b"anon_inode:[eventpoll]",
                FdType::Eventpoll,
                b"anon_inode:[eventpoll]",
            ),
            (
                b"anon_inode:[signalfd]",
                FdType::Signalfd,
                b"anon_inode:[signalfd]",
            ),
            (
                b"anon_inode:[timerfd]",
                FdType::Timerfd,
                b"anon_inode:[timerfd]",
            ),
            (
                b"anon_inode:inotify",
                FdType::Inotify,
                b"anon_inode:inotify",
            ),
            (b"anon_inode:bpf-map", FdType::Bpf, b"anon_inode:bpf-map"),
            (b"anon_inode:bpf-prog", FdType::Bpf, b"anon_inode:bpf-prog"),
            (
                b"anon_inode:[userfaultfd]",
                FdType::Userfaultfd,
                b"anon_inode:[userfaultfd]",
            ),
            (
                b"anon_inode:[io_uring]",
                FdType::IoUring,
                b"anon_inode:[io_uring]",
            ),
            (b"anon_inode:[pidfd]", FdType::Other, b"anon_inode:[pidfd]"),
            (b"", FdType::Other, b""),
        ];
        for (target, kind, name) in cases {
            let got = classify_fd_target(target);
            assert_eq!(
                got,
                (*kind, name.to_vec()),
                "target {:?}",
                String::from_utf8_lossy(target)
            );
        }
        assert_eq!(
            parse_fdinfo_flags(b"pos:\t0\nflags:\t02100002\nmnt_id:\t25\n"),
            Some(0o2100002)
        );
        assert_eq!(parse_fdinfo_flags(b"pos:\t0\n"), None);
        assert_eq!(parse_fdinfo_flags(b"flags:\t9\n"), None);
    }

    #[test]
    fn exe_link_deleted_and_memfd() {
        assert_eq!(
            parse_exe_link(b"/usr/bin/x (deleted)"),
            (b"/usr/bin/x".to_vec(), false)
        );
        assert_eq!(
            parse_exe_link(b"/memfd:run (deleted)"),
            (b"memfd:run".to_vec(), true)
        );
        assert_eq!(
            parse_exe_link(b"/usr/bin/x"),
            (b"/usr/bin/x".to_vec(), false)
        );
    }

    #[test]
    fn socket_fds_resolve_through_the_net_tables() {
        let mut p = base();
        add_process(&mut p, 100, "srv");
        add_process(&mut p, 200, "other-ns");
        p.link("100/ns/net", "net:[4026531840]");
        p.link("200/ns/net", "net:[4026532000]");
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        p.file(
            "100/net/tcp",
            format!(
                "{header}   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 501 1\n\
                 1: 0100007F:1F90 0100007F:9C40 01 00000000:00000000 00:00000000 00000000     0        0 502 1\n\
                 2: 0100007F:9C41 0200007F:0050 01 00000000:00000000 00:00000000 00000000     0        0 503 1\n"
            ),
        );
        p.file(
            "100/net/tcp6",
            format!(
                "{header}   0: 00000000000000000000000001000000:0016 00000000000000000000000001000000:D431 01 00000000:00000000 00:00000000 00000000     0        0 504 1\n"
            ),
        );
        p.file(
            "100/net/unix",
            "Num       RefCount Protocol Flags    Type St Inode Path\n\
             0000000000000000: 00000002 00000000 00010000 0001 01 505 /run/x.sock\n\
             0000000000000000: 00000002 00000000 00000000 0001 03 506\n",
        );
        p.file(
            "100/net/netlink",
            "sk               Eth Pid        Groups   Rmem     Wmem     Dump  Locks    Drops    Inode\n\
             0000000000000000 0   1          00000000 0        0        0     2        0        507\n",
        );
        for (fd, ino) in [
            (3, 501),
            (4, 502),
            (5, 503),
            (6, 504),
            (7, 505),
            (8, 506),
            (9, 507),
        ] {
            p.link(&format!("100/fd/{fd}"), format!("socket:[{ino}]"));
        }
        // Another namespace's table does not know inode 503.
        p.file("200/net/tcp", header);
        p.link("200/fd/3", "socket:[503]");

        let (snap, _) = read_snapshot(&p, &opts()).unwrap();
        let fds = &thread(&snap, 100).fds;
        let kind = |fd: i64| {
            let f = fds.iter().find(|f| f.fd == fd).unwrap();
            (f.kind, f.tuple.clone())
        };
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let inet = |src: (IpAddr, u16), dst: (IpAddr, u16), ipv6| {
            let tuple = Some(SockTuple::Inet {
                l4proto: 6,
                src_ip: src.0,
                src_port: src.1,
                dst_ip: dst.0,
                dst_port: dst.1,
            });
            (if ipv6 { FdType::Ipv6 } else { FdType::Ipv4 }, tuple)
        };
        assert_eq!(kind(3), (FdType::Ipv4, None), "listening");
        assert_eq!(kind(4), inet((lo, 40000), (lo, 8080), false), "server side");
        assert_eq!(
            kind(5),
            inet((lo, 40001), ("127.0.0.2".parse().unwrap(), 80), false),
            "client side"
        );
        let lo6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        assert_eq!(kind(6), inet((lo6, 22), (lo6, 54321), true));
        assert_eq!(kind(7), (FdType::Unix, None));
        assert_eq!(fds.iter().find(|f| f.fd == 7).unwrap().name, b"/run/x.sock");
        assert_eq!(kind(8), (FdType::Unix, None));
        assert_eq!(kind(9), (FdType::Netlink, None));
        let other = &thread(&snap, 200).fds;
        assert_eq!(other[0].kind, FdType::Other, "another namespace");
        assert_eq!(socket_inode(b"socket:[12]"), Some(12));
        assert_eq!(socket_inode(b"pipe:[12]"), None);
        assert_eq!(parse_endpoint(b"zz:1", false), None);
    }

    #[test]
    fn full_process_from_fake_proc() {
        let mut p = base();
        add_process(&mut p, 100, "my (odd) comm");
        // A second thread in a pid namespace.
        p.file(
            "100/task/105/stat",
            stat_line(105, "worker", 1, 100, 100, 0, 300),
        );
        p.file(
            "100/task/105/status",
            status_text(100, 1, "105\t6", "100\t1"),
        );
        p.file("100/task/105/comm", "worker\n");
        p.link("100/exe", "/memfd:stage2 (deleted)");
        p.link("100/fd/0", "/dev/pts/0");
        p.file("100/fdinfo/0", "pos:\t0\nflags:\t0100002\n");
        p.link("100/fd/3", "socket:[777]");
        p.link("100/fd/4", "/memfd:blob (deleted)");
        p.deny("100/environ");

        let (snap, stats) = read_snapshot(&p, &opts()).unwrap();
        assert_eq!(snap.hostname, b"box");
        assert!(
            snap.start_ts > 1_700_000_000 * NANOS_PER_SEC,
            "snapshot time is now"
        );
        assert!(snap.users.is_empty() && snap.groups.is_empty());
        assert_eq!(snap.threads.len(), 2);
        assert_eq!(snap.threads[0].tid, 100, "leader first");

        let leader = thread(&snap, 100);
        assert_eq!(
            (leader.pid, leader.ppid, leader.vtid, leader.vpid),
            (100, 1, 100, 100)
        );
        assert_eq!((leader.sid, leader.pgid), (100, 100));
        assert_eq!(leader.comm, b"my (odd) comm");
        assert_eq!(leader.exe, b"/bin/sh");
        assert_eq!(leader.args, vec![b"-c".to_vec(), b"echo hi".to_vec()]);
        assert!(leader.env.is_empty(), "denied environ stays empty");
        assert_eq!(leader.exepath, b"memfd:stage2");
        assert!(leader.exe_from_memfd);
        assert_eq!(leader.cwd, b"/tmp");
        assert_eq!(
            (leader.uid, leader.euid, leader.gid, leader.egid),
            (1000, 1001, 2000, 2001)
        );
        assert_eq!(leader.loginuid, 1000);
        assert_eq!(leader.tty, 34816);
        assert_eq!(
            leader.start_ts,
            1_700_000_000 * NANOS_PER_SEC + 2_500_000_000
        );
        assert_eq!(leader.cap_effective, 0xa804_25fb);
        assert_eq!(leader.cgroup, b"/user.slice/session-1.scope");
        assert_eq!(
            leader.fds,
            vec![
                FdInfo {
                    fd: 0,
                    kind: FdType::File,
                    tuple: None,
                    name: b"/dev/pts/0".to_vec(),
                    flags: 0o100002
                },
                FdInfo {
                    fd: 3,
                    kind: FdType::Other,
                    tuple: None,
                    name: b"socket:[777]".to_vec(),
                    flags: 0
                },
                FdInfo {
                    fd: 4,
                    kind: FdType::Memfd,
                    tuple: None,
                    name: b"memfd:blob".to_vec(),
                    flags: 0
                },
            ]
        );

        let worker = thread(&snap, 105);
        assert_eq!(
            (worker.pid, worker.vtid, worker.vpid, worker.tty),
            (100, 6, 1, 0)
        );
        assert_eq!(worker.comm, b"worker");
        assert_eq!(worker.exe, b"/bin/sh", "process data shared with threads");
        assert!(worker.fds.is_empty(), "fds only on the leader");
        assert_eq!(worker.start_ts, 1_700_000_003 * NANOS_PER_SEC);

        assert_eq!(stats.processes, 1);
        assert_eq!(stats.threads, 2);
        assert_eq!(stats.fds, 3);
        assert_eq!(stats.permission_denied, 1);
        assert_eq!(stats.denied_processes, 1);
    }

    #[test]
    fn missing_optional_files_use_defaults() {
        let mut p = base();
        add_process(&mut p, 2, "kthreadd");
        p.remove("2/loginuid")
            .remove("2/cmdline")
            .remove("2/exe")
            .remove("2/task/2/comm");
        p.remove("stat");
        let (snap, stats) = read_snapshot(&p, &opts()).unwrap();
        let t = thread(&snap, 2);
        assert_eq!(t.loginuid, u32::MAX);
        assert!(t.exe.is_empty() && t.args.is_empty() && t.exepath.is_empty());
        assert_eq!(t.comm, b"kthreadd", "comm falls back to stat");
        assert_eq!(t.start_ts, 0, "no btime, no start time");
        assert_eq!(stats.processes, 1);
    }

    #[test]
    fn vanished_process_and_thread_are_skipped_and_counted() {
        let mut p = base();
        add_process(&mut p, 10, "a");
        add_process(&mut p, 11, "b");
        add_process(&mut p, 12, "c");
        // 11 exited after the listing: only a stale directory entry is left.
        p.remove("11/task/11/stat").remove("11/task/11/status");
        // 12 has a second thread that exited.
        p.file("12/task/13/comm", "gone\n");
        let (snap, stats) = read_snapshot(&p, &opts()).unwrap();
        let tids: Vec<i64> = snap.threads.iter().map(|t| t.tid).collect();
        assert_eq!(tids, vec![10, 12]);
        assert_eq!(stats.processes, 2);
        assert_eq!(stats.vanished_processes, 1);
        assert_eq!(stats.vanished_threads, 2, "11's leader and 12's thread 13");
    }

    #[test]
    fn truncation_and_limits_are_counted() {
        let mut p = base();
        add_process(&mut p, 20, "big");
        let mut cmd = b"/bin/big\0".to_vec();
        cmd.extend(vec![b'a'; 5000]);
        cmd.push(0);
        p.file("20/cmdline", cmd);
        let env: Vec<u8> = (0..2000)
            .flat_map(|i| format!("V{i}=x\0").into_bytes())
            .collect();
        p.file("20/environ", env);
        for fd in 0..5 {
            p.link(&format!("20/fd/{fd}"), format!("/f{fd}"));
        }
        add_process(&mut p, 21, "x");
        add_process(&mut p, 22, "y");
        let o = SnapshotOptions {
            max_processes: 2,
            max_fds_per_process: 3,
            max_argv_bytes: 10, // raised to MIN_ARG_BYTES
            max_env_bytes: 0,
            ..opts()
        };
        let (snap, stats) = read_snapshot(&p, &o).unwrap();
        let t = thread(&snap, 20);
        assert_eq!(t.exe, b"/bin/big");
        assert_eq!(t.args.len(), 1);
        assert_eq!(t.args[0].len(), MIN_ARG_BYTES - b"/bin/big\0".len());
        let env_bytes: usize = t.env.iter().map(|e| e.len() + 1).sum();
        assert!(
            env_bytes <= MIN_ARG_BYTES + 1,
            "env cut to the limit, got {env_bytes}"
        );
        assert!(t.env.len() > 100);
        assert_eq!(
            t.fds.iter().map(|f| f.fd).collect::<Vec<_>>(),
            vec![0, 1, 2]
        );
        assert_eq!(stats.argv_truncated, 1);
        assert_eq!(stats.env_truncated, 1);
        assert_eq!(stats.fds_dropped, 2);
        assert_eq!(stats.processes, 2);
        assert_eq!(stats.processes_dropped, 1);
        assert!(snap.threads.iter().all(|t| t.tid != 22));
    }

    #[test]
    fn own_process_is_excluded() {
        let mut p = base();
        add_process(&mut p, 30, "agent");
        p.file("30/task/31/stat", stat_line(31, "agent-w", 1, 30, 30, 0, 1));
        p.file("30/task/31/status", status_text(30, 1, "31", "30"));
        add_process(&mut p, 40, "other");
        let o = SnapshotOptions {
            exclude_pid: Some(30),
            ..opts()
        };
        let (snap, stats) = read_snapshot(&p, &o).unwrap();
        assert!(
            snap.threads.iter().all(|t| t.pid != 30),
            "{:?}",
            snap.threads
        );
        assert_eq!(thread(&snap, 40).comm, b"other");
        assert_eq!(stats.excluded, 1);
        assert_eq!(stats.processes, 1);
    }

    #[test]
    fn unreadable_root_is_an_error() {
        let src = RealProc {
            root: PathBuf::from("/nonexistent/vigil-procfs-test"),
        };
        let err = read_snapshot(&src, &opts()).expect_err("missing root must fail");
        assert!(
            err.to_string().contains("failed to list processes"),
            "{err}"
        );
    }

    #[test]
    fn real_proc_finds_this_process() {
        use std::os::unix::ffi::OsStrExt;
        let me = i64::from(std::process::id());
        let src = RealProc::default();
        let (snap, stats) = read_snapshot(&src, &opts()).unwrap();
        let t = thread(&snap, me);
        assert_eq!(t.pid, me);
        let exe = std::env::current_exe().unwrap();
        assert_eq!(t.exepath, exe.as_os_str().as_bytes());
        assert!(!t.comm.is_empty());
        assert_eq!(
            t.cwd,
            std::env::current_dir().unwrap().as_os_str().as_bytes()
        );
        assert!(t.start_ts > 0, "start time from btime and starttime");
        assert!(!t.fds.is_empty(), "a test process has open fds");
        assert!(stats.processes >= 1 && stats.threads >= 1);

        let excluded = SnapshotOptions {
            exclude_pid: Some(me),
            ..opts()
        };
        let (snap, stats) = read_snapshot(&src, &excluded).unwrap();
        assert!(
            snap.threads.iter().all(|t| t.pid != me),
            "own process excluded"
        );
        assert_eq!(stats.excluded, 1);
    }
}

//! [`State`]: the tables, and how events change them.

use std::collections::hash_map::Entry;
use std::net::IpAddr;
use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};
use vigil_container::{ContainerTable, LookupStats, RuntimeDirs, RuntimeReader};
use vigil_event::{
    ContainerInfo, Event, FdInfo, FdType, GroupInfo, Param, Snapshot, SockAddr, SockTuple,
    ThreadInfo, UserInfo,
};

use crate::path;
use crate::schema::{self, param_i64, param_u64, Op, NONE};
use crate::table::{FdEntry, FdObj, FdTable, Image, ImageParts, Net, Process, Thread, UNKNOWN_ID};
use crate::users::{LiveUsers, LiveUsersStats, MemUserDb, UserDb};

/// Bound on ancestor walks (`proc.aname`, reaper search, session leader search).
pub const MAX_ANCESTORS: usize = 64;

pub(crate) const AT_FDCWD: i64 = -100;
/// Live: the container table is swept of containers without processes at most this often
/// (event time, ns), at a process exit.
const CONTAINER_SWEEP_NS: u64 = 5_000_000_000;
const O_WRONLY: u64 = 1;
const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;
const O_DIRECTORY: u64 = 0o200000;
pub(crate) const O_CLOEXEC: u64 = 0o2000000;
const SOCK_CLOEXEC: u64 = 0o2000000;
const MFD_CLOEXEC: u64 = 1;
const CLONE_FILES: u64 = 0x400;
const CLONE_PARENT: u64 = 0x8000;
const CLONE_THREAD: u64 = 0x10000;
const CLONE_NEWPID: u64 = 0x2000_0000;
const F_DUPFD: i64 = 0;
const F_DUPFD_CLOEXEC: i64 = 1030;
const PR_SET_CHILD_SUBREAPER: i64 = 36;
const EINPROGRESS: i64 = 115;
const EBADF: i64 = 9;
const AF_UNIX: u64 = 1;
const AF_INET: u64 = 2;
const AF_INET6: u64 = 10;
const AF_NETLINK: u64 = 16;
/// How many unshared fd objects and images are kept for reuse (with the size bounds of
/// `FdObj::recyclable` and `Image::recyclable`, at most about 1 MiB and 1 MiB).
const MAX_SPARE_OBJS: usize = 64;
const MAX_SPARE_IMAGES: usize = 16;

/// How a [`State`] is set up.
pub struct StateConfig {
    /// Falco `evt.hostname` (a snapshot's non-empty hostname replaces it).
    pub hostname: Vec<u8>,
    /// Users and groups when a snapshot brings none.
    pub user_db: Box<dyn UserDb>,
    /// Live capture: users and groups from the host's files as they change and from each
    /// container's own files. When set, it answers every lookup (snapshot users and
    /// `user_db` are not used). `None` (the default): a replay, answered by the capture's
    /// tables or `user_db`, which never change.
    pub live_users: Option<LiveUsers>,
    /// Threads beyond this are not tracked (counted in [`StateStats::dropped_threads`]).
    pub max_threads: usize,
    /// Descriptors per fd table beyond this are not tracked (counted).
    pub max_fds_per_table: usize,
    /// Read container metadata (name, image, Kubernetes pod) from the runtimes' state in
    /// these directories when a new container id appears (live capture). `None` (the
    /// default): only what snapshots bring.
    pub container_runtime: Option<RuntimeDirs>,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            hostname: Vec::new(),
            user_db: Box::new(MemUserDb::default()),
            live_users: None,
            max_threads: 1 << 20,
            max_fds_per_table: 1 << 16,
            container_runtime: None,
        }
    }
}

/// Counters of the state engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StateStats {
    pub threads: usize,
    pub processes: usize,
    pub fds: usize,
    pub containers: usize,
    /// Events of a thread the tables did not know (a placeholder entry was made).
    pub unknown_thread_events: u64,
    /// Events whose content made no sense (bad tid, missing required parameters…).
    pub malformed_events: u64,
    /// Threads and fds not tracked because a table bound was reached.
    pub dropped_threads: u64,
    pub dropped_fds: u64,
    /// Live: container metadata lookups in the runtimes' state (see
    /// [`LookupStats`]).
    pub container_lookups: LookupStats,
}

/// One descriptor slot of a process as it was ([`State::save_fd`]).
#[derive(Debug)]
pub struct SavedFd(Option<FdEntry>);

/// Process, fd, user and container tables, kept current by [`State::apply`] and
/// [`State::finish`], read through [`State::view`].
pub struct State {
    pub(crate) hostname: Vec<u8>,
    pub(crate) threads: FxHashMap<i64, Thread>,
    pub(crate) procs: FxHashMap<i64, Process>,
    /// Children per process: only used to skip the reparenting scan for childless exits.
    children: FxHashMap<i64, u32>,
    pub(crate) fd_tables: FxHashMap<u64, FdTable>,
    next_fd_table: u64,
    pub(crate) containers: ContainerTable,
    runtime: Option<RuntimeReader>,
    /// Event time after which the next process exit sweeps the container table (live).
    next_container_sweep: u64,
    sys_users: Box<dyn UserDb>,
    live_users: Option<LiveUsers>,
    snap_users: Option<MemUserDb>,
    snap_groups: Option<MemUserDb>,
    pub(crate) start_ts: u64,
    /// Address → the domain names that resolved to it (a snapshot's `dns`), for `fd.*ip.name`.
    pub(crate) dns: FxHashMap<IpAddr, Vec<String>>,
    /// Set by `apply` when the current event renamed its fd (`fd.name_changed`).
    pub(crate) name_changed: bool,
    max_threads: usize,
    max_fds: usize,
    stats: StateStats,
    /// Unshared fd objects and images of removed descriptors and replaced images, reused (with
    /// their buffers) for new ones so a steady event stream does not allocate.
    spare_objs: Vec<Arc<FdObj>>,
    spare_images: Vec<Arc<Image>>,
    /// The image of every placeholder process (unknown), shared.
    unknown_image: Arc<Image>,
    /// Stands in for an fd object being moved out of a table entry.
    blank_obj: Arc<FdObj>,
    /// Scratch buffer for resolving paths (swapped with the buffer of the object that keeps
    /// the result).
    path_buf: Vec<u8>,
    /// Scratch buffer for rendering descriptor names.
    text_buf: String,
}

/// Keeps `obj` for reuse when nothing else refers to it and there is room.
fn recycle_obj(spare: &mut Vec<Arc<FdObj>>, mut obj: Arc<FdObj>) {
    if spare.len() < MAX_SPARE_OBJS && Arc::get_mut(&mut obj).is_some_and(|o| o.recyclable()) {
        spare.push(obj);
    }
}

/// Keeps `image` for reuse when nothing else refers to it and there is room.
fn recycle_image(spare: &mut Vec<Arc<Image>>, mut image: Arc<Image>) {
    if spare.len() < MAX_SPARE_IMAGES && Arc::get_mut(&mut image).is_some_and(|i| i.recyclable()) {
        spare.push(image);
    }
}

fn param_u32(evt: &Event, i: u8) -> Option<u32> {
    param_u64(evt, i).and_then(|v| u32::try_from(v).ok())
}

/// A pid-namespace id parameter (`vtid`/`vpid` of clone events): present and positive.
fn ns_id(evt: &Event, i: u8) -> Option<i64> {
    param_i64(evt, i).filter(|&v| v > 0)
}

/// What a clone event says about the child's ids in its own pid namespace.
#[derive(Clone, Copy, Debug, Default)]
struct ChildNsIds {
    vtid: Option<i64>,
    vpid: Option<i64>,
}

fn param_bytes(evt: &Event, i: u8) -> Option<&[u8]> {
    match evt.param(usize::from(i)) {
        Param::Bytes(b) => Some(b),
        _ => None,
    }
}

fn l4proto_for(sock_type: u64, proto: u64) -> u8 {
    match sock_type & 0xf {
        1 => 6,
        2 if proto == 1 || proto == 58 => proto as u8,
        2 => 17,
        3 => 255,
        _ => 0,
    }
}

/// Net info and `fd.name` for a tuple stored client → server.
fn net_from_tuple(
    l4proto: u8,
    src_ip: IpAddr,
    src_port: u16,
    dst_ip: IpAddr,
    dst_port: u16,
    is_server: bool,
) -> (Net, Vec<u8>) {
    let net = Net {
        l4proto,
        cip: src_ip,
        cport: src_port,
        sip: dst_ip,
        sport: dst_port,
        is_server,
        connected: true,
    };
    let mut name = String::new();
    crate::render::tuple_name(&net, &mut name);
    (net, name.into_bytes())
}

impl State {
    pub fn new(config: StateConfig) -> Self {
        State {
            hostname: config.hostname,
            threads: FxHashMap::default(),
            procs: FxHashMap::default(),
            children: FxHashMap::default(),
            fd_tables: FxHashMap::default(),
            next_fd_table: 1,
            containers: ContainerTable::default(),
            runtime: config.container_runtime.map(RuntimeReader::new),
            next_container_sweep: 0,
            sys_users: config.user_db,
            live_users: config.live_users,
            snap_users: None,
            snap_groups: None,
            start_ts: 0,
            dns: FxHashMap::default(),
            name_changed: false,
            max_threads: config.max_threads,
            max_fds: config.max_fds_per_table,
            stats: StateStats::default(),
            spare_objs: Vec::new(),
            spare_images: Vec::new(),
            unknown_image: Arc::new(Image::default()),
            blank_obj: Arc::new(FdObj::new(FdType::Other, Vec::new())),
            path_buf: Vec::new(),
            text_buf: String::new(),
        }
    }

    /// The host's user `uid`: live, the host's current table; else the snapshot's users when
    /// it had any, else the configured database.
    pub fn user(&self, uid: u32) -> Option<&UserInfo> {
        self.user_in(b"", uid)
    }

    /// The host's group `gid` (same precedence as [`State::user`]).
    pub fn group(&self, gid: u32) -> Option<&GroupInfo> {
        self.group_in(b"", gid)
    }

    /// The user `uid` as a process in `container` (a `container.id`; empty: the host) sees
    /// it. Live, a container has its own table (no answer until it is read, never the
    /// host's); a replay has only the capture's one table for every process.
    pub fn user_in(&self, container: &[u8], uid: u32) -> Option<&UserInfo> {
        match (&self.live_users, &self.snap_users) {
            (Some(live), _) => live.user(container, uid),
            (None, Some(db)) => db.user(uid),
            (None, None) => self.sys_users.user(uid),
        }
    }

    /// The group `gid` as a process in `container` sees it (as [`State::user_in`]).
    pub fn group_in(&self, container: &[u8], gid: u32) -> Option<&GroupInfo> {
        match (&self.live_users, &self.snap_groups) {
            (Some(live), _) => live.group(container, gid),
            (None, Some(db)) => db.group(gid),
            (None, None) => self.sys_users.group(gid),
        }
    }

    /// Counters of the live user tables (`None` in a replay).
    pub fn live_users_stats(&self) -> Option<LiveUsersStats> {
        self.live_users.as_ref().map(LiveUsers::stats)
    }

    /// Live: makes sure the user tables answer for process `pid`'s credentials (its
    /// container's table read, a missing id looked for again; see [`LiveUsers::resolve`]).
    fn resolve_users(&mut self, pid: i64, ts: u64) {
        let (Some(live), Some(p)) = (self.live_users.as_mut(), self.procs.get(&pid)) else {
            return;
        };
        if !p.creds_known {
            return;
        }
        let loginuid = if p.loginuid == u32::MAX {
            p.euid
        } else {
            p.loginuid
        };
        // A container's files are read through this process or, when it has already exited,
        // its nearest ancestors in the same container.
        let mut pids = [pid; crate::users::MAX_ROOT_PIDS];
        let mut n = 1;
        if !p.image.container_id.is_empty() {
            let mut at = p;
            while n < pids.len() {
                match self.procs.get(&at.ppid) {
                    Some(parent)
                        if parent.pid != at.pid
                            && parent.image.container_id == p.image.container_id =>
                    {
                        pids[n] = parent.pid;
                        n += 1;
                        at = parent;
                    }
                    _ => break,
                }
            }
        }
        live.resolve(
            &p.image.container_id,
            &pids[..n],
            &[p.euid, loginuid],
            &[p.egid],
            ts,
        );
    }

    /// The domain names known to have resolved to `addr` (Falco `fd.sip.name` and friends).
    pub fn dns_names(&self, addr: &IpAddr) -> &[String] {
        self.dns.get(addr).map_or(&[], Vec::as_slice)
    }

    pub fn stats(&self) -> StateStats {
        StateStats {
            threads: self.threads.len(),
            processes: self.procs.len(),
            fds: self.fd_tables.values().map(|t| t.fds.len()).sum(),
            containers: self.containers.len(),
            container_lookups: self
                .runtime
                .as_ref()
                .map(RuntimeReader::stats)
                .unwrap_or_default(),
            ..self.stats
        }
    }

    // ----- snapshot -----

    /// Loads a capture's (or a `/proc` bootstrap's) process table, users, groups, containers
    /// and DNS names (added to those already known; an address may have several names, kept
    /// sorted).
    pub fn load_snapshot(&mut self, snap: &Snapshot) {
        if !snap.hostname.is_empty() {
            self.hostname.clone_from(&snap.hostname);
        }
        if snap.start_ts != 0 {
            self.start_ts = snap.start_ts;
        }
        if !snap.users.is_empty() {
            self.snap_users = Some(MemUserDb::new(snap.users.iter().cloned(), []));
        }
        if !snap.groups.is_empty() {
            self.snap_groups = Some(MemUserDb::new([], snap.groups.iter().cloned()));
        }
        for c in &snap.containers {
            self.containers.insert(ContainerInfo::clone(c));
        }
        if !snap.dns.is_empty() {
            for entry in &snap.dns {
                for addr in &entry.addrs {
                    self.dns.entry(*addr).or_default().push(entry.name.clone());
                }
            }
            // Sorted and unique per address (sorting keeps huge tables out of quadratic time).
            for names in self.dns.values_mut() {
                names.sort_unstable();
                names.dedup();
            }
        }
        for t in &snap.threads {
            self.load_thread(t);
        }
        if self.live_users.is_some() {
            let pids: Vec<i64> = self.procs.keys().copied().collect();
            for pid in pids {
                self.resolve_users(pid, snap.start_ts);
            }
        }
        if let Some(rt) = self.runtime.as_mut() {
            for p in self.procs.values() {
                rt.resolve(&p.image.container_id, snap.start_ts, &mut self.containers);
            }
        }
    }

    fn load_thread(&mut self, t: &ThreadInfo) {
        if t.tid <= 0 {
            self.stats.malformed_events += 1;
            return;
        }
        let pid = if t.pid > 0 { t.pid } else { t.tid };
        self.remove_thread_entry(t.tid);
        if !self.procs.contains_key(&pid) || t.tid == pid {
            let mut image = Image {
                exe_writable: t.exe_writable,
                exe_upper_layer: t.exe_upper_layer,
                exe_from_memfd: t.exe_from_memfd,
                exe_ino: t.exe_ino,
                exe_ino_ctime: t.exe_ino_ctime,
                exe_ino_mtime: t.exe_ino_mtime,
                ..Image::default()
            };
            image.set(&ImageParts {
                comm: &t.comm,
                exe: &t.exe,
                exepath: &t.exepath,
                args: &t.args,
                env: &t.env,
                cgroup: Some(&t.cgroup),
            });
            let existing = self.procs.remove(&pid);
            let (fd_table, nthreads) = match &existing {
                Some(p) => (p.fd_table, p.nthreads),
                None => (self.new_fd_table(), 0),
            };
            if existing.is_none() && t.ppid > 0 {
                *self.children.entry(t.ppid).or_default() += 1;
            }
            let cwd = if t.cwd.first() == Some(&b'/') {
                dir_with_slash(path::normalize(&t.cwd))
            } else {
                Vec::new()
            };
            self.procs.insert(
                pid,
                Process {
                    pid,
                    ppid: t.ppid,
                    vpid: if t.vpid > 0 { t.vpid } else { pid },
                    sid: t.sid,
                    vpgid: t.vpgid,
                    pgid: t.pgid,
                    image: Arc::new(image),
                    cwd,
                    creds_known: true,
                    uid: t.uid,
                    gid: t.gid,
                    euid: t.euid,
                    egid: t.egid,
                    loginuid: t.loginuid,
                    tty: t.tty,
                    cap_inheritable: t.cap_inheritable,
                    cap_permitted: t.cap_permitted,
                    cap_effective: t.cap_effective,
                    start_ts: if t.start_ts != 0 {
                        t.start_ts
                    } else {
                        self.start_ts
                    },
                    fd_table,
                    nthreads,
                    subreaper: false,
                    pending_newpid: false,
                },
            );
        }
        if !self.insert_thread(t.tid, pid, if t.vtid > 0 { t.vtid } else { t.tid }) {
            return;
        }
        for fd in &t.fds {
            let (obj, cloexec) = fd_from_info(fd);
            self.insert_fd(pid, fd.fd, obj, cloexec);
        }
    }

    /// Records descriptor `info.fd` of process `pid` as described (a driver that did not see
    /// the call creating it read it from `/proc` when the process used it). Replaces what
    /// the table had for that number; ignored for an unknown process.
    pub fn learn_fd(&mut self, pid: i64, info: &FdInfo) {
        if !self.procs.contains_key(&pid) || info.fd < 0 {
            return;
        }
        let (obj, cloexec) = fd_from_info(info);
        self.insert_fd(pid, info.fd, obj, cloexec);
    }

    // ----- table helpers -----

    fn new_fd_table(&mut self) -> u64 {
        let id = self.next_fd_table;
        self.next_fd_table += 1;
        self.fd_tables.insert(
            id,
            FdTable {
                fds: FxHashMap::default(),
                refs: 1,
            },
        );
        id
    }

    fn release_fd_table(&mut self, id: u64) {
        if let Some(t) = self.fd_tables.get_mut(&id) {
            t.refs = t.refs.saturating_sub(1);
            if t.refs == 0 {
                if let Some(mut t) = self.fd_tables.remove(&id) {
                    for (_, e) in t.fds.drain() {
                        recycle_obj(&mut self.spare_objs, e.obj);
                    }
                }
            }
        }
    }

    /// Adds thread `tid` to process `pid` (which must exist). False when the bound is hit.
    fn insert_thread(&mut self, tid: i64, pid: i64, vtid: i64) -> bool {
        if self.threads.len() >= self.max_threads {
            self.stats.dropped_threads += 1;
            if let Some(p) = self.procs.get(&pid) {
                if p.nthreads == 0 {
                    self.remove_process(pid);
                }
            }
            return false;
        }
        self.threads.insert(tid, Thread { pid, vtid });
        if let Some(p) = self.procs.get_mut(&pid) {
            p.nthreads += 1;
        }
        true
    }

    /// Removes a thread and, with its last thread, its process.
    fn remove_thread_entry(&mut self, tid: i64) {
        let Some(thread) = self.threads.remove(&tid) else {
            return;
        };
        let last = match self.procs.get_mut(&thread.pid) {
            Some(p) => {
                p.nthreads = p.nthreads.saturating_sub(1);
                p.nthreads == 0
            }
            None => false,
        };
        if last {
            self.remove_process(thread.pid);
        }
    }

    fn remove_process(&mut self, pid: i64) {
        let Some(mut p) = self.procs.remove(&pid) else {
            return;
        };
        self.release_fd_table(p.fd_table);
        let image = std::mem::replace(&mut p.image, Arc::clone(&self.unknown_image));
        recycle_image(&mut self.spare_images, image);
        if let Some(n) = self.children.get_mut(&p.ppid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.children.remove(&p.ppid);
            }
        }
        if let Some(n) = self.children.remove(&pid) {
            if n > 0 {
                self.reparent_children(&p);
            }
        }
    }

    /// Orphans go to the nearest subreaper or pid-namespace init among the ancestors, else 1.
    fn reparent_children(&mut self, dead: &Process) {
        let mut reaper = 1;
        let mut cur = dead.ppid;
        for _ in 0..MAX_ANCESTORS {
            match self.procs.get(&cur) {
                Some(p) if p.subreaper || p.vpid == 1 => {
                    reaper = p.pid;
                    break;
                }
                Some(p) if p.ppid != cur => cur = p.ppid,
                _ => break,
            }
        }
        let mut moved = 0;
        for p in self.procs.values_mut() {
            if p.ppid == dead.pid {
                p.ppid = reaper;
                moved += 1;
            }
        }
        if moved > 0 {
            *self.children.entry(reaper).or_default() += moved;
        }
    }

    fn table_of(&self, pid: i64) -> Option<&FdTable> {
        self.procs
            .get(&pid)
            .and_then(|p| self.fd_tables.get(&p.fd_table))
    }

    fn table_mut(&mut self, pid: i64) -> Option<&mut FdTable> {
        let id = self.procs.get(&pid)?.fd_table;
        self.fd_tables.get_mut(&id)
    }

    /// What descriptor `fd` of process `pid` is now, to be put back by
    /// [`State::restore_fd`] after a trial event (a kernel-less driver asking "would this
    /// call, returning `fd`, match a rule?" before the call has run).
    pub fn save_fd(&self, pid: i64, fd: i64) -> SavedFd {
        SavedFd(self.fd_entry(pid, fd).cloned())
    }

    /// Puts descriptor `fd` of process `pid` back as [`State::save_fd`] found it (absent
    /// if it was absent).
    pub fn restore_fd(&mut self, pid: i64, fd: i64, saved: SavedFd) {
        let Some(table) = self.table_mut(pid) else {
            return;
        };
        match saved.0 {
            Some(entry) => {
                table.fds.insert(fd, entry);
            }
            None => {
                table.fds.remove(&fd);
            }
        }
    }

    pub(crate) fn fd_entry(&self, pid: i64, fd: i64) -> Option<&FdEntry> {
        self.table_of(pid)?.fds.get(&fd)
    }

    fn insert_fd(&mut self, pid: i64, fd: i64, obj: FdObj, cloexec: bool) {
        self.insert_fd_with(pid, fd, cloexec, obj.ty, |o| *o = obj);
    }

    /// Sets descriptor `fd` of `pid` to a new object of type `ty` (with an empty name) as
    /// `fill` completes it. The object replaced, when nothing else shares it, or else a spare
    /// one is reused with its buffers.
    fn insert_fd_with(
        &mut self,
        pid: i64,
        fd: i64,
        cloexec: bool,
        ty: FdType,
        fill: impl FnOnce(&mut FdObj),
    ) {
        let table = match self.procs.get(&pid) {
            Some(p) if fd >= 0 => self.fd_tables.get_mut(&p.fd_table),
            _ => None,
        };
        let Some(table) = table else {
            return;
        };
        let spare = &mut self.spare_objs;
        let mut fresh = || {
            spare
                .pop()
                .unwrap_or_else(|| Arc::new(FdObj::new(ty, Vec::new())))
        };
        let len = table.fds.len();
        let obj = match table.fds.entry(fd) {
            Entry::Occupied(slot) => {
                let e = slot.into_mut();
                e.cloexec = cloexec;
                if !Arc::get_mut(&mut e.obj).is_some_and(|o| o.recyclable()) {
                    e.obj = fresh();
                }
                Arc::make_mut(&mut e.obj)
            }
            Entry::Vacant(_) if len >= self.max_fds => {
                self.stats.dropped_fds += 1;
                return;
            }
            Entry::Vacant(slot) => Arc::make_mut(
                &mut slot
                    .insert(FdEntry {
                        obj: fresh(),
                        cloexec,
                    })
                    .obj,
            ),
        };
        obj.reset(ty);
        fill(obj);
    }

    fn remove_fd(&mut self, pid: i64, fd: i64) {
        let table = match self.procs.get(&pid) {
            Some(p) => self.fd_tables.get_mut(&p.fd_table),
            None => None,
        };
        if let Some(e) = table.and_then(|t| t.fds.remove(&fd)) {
            recycle_obj(&mut self.spare_objs, e.obj);
        }
    }

    /// Resolves a path argument of process `pid`: absolute paths are normalised; relative ones
    /// are resolved against `dirfd` (an open directory) or, for `None`/`AT_FDCWD`, the cwd.
    /// When the base is unknown the raw path is returned as it is.
    pub(crate) fn resolve_path(&self, pid: i64, dirfd: Option<i64>, raw: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(raw.len() + 1);
        self.resolve_path_into(pid, dirfd, raw, &mut out);
        out
    }

    /// [`State::resolve_path`] into `out` (cleared first).
    fn resolve_path_into(&self, pid: i64, dirfd: Option<i64>, raw: &[u8], out: &mut Vec<u8>) {
        if raw.first() == Some(&b'/') {
            path::resolve_into(b"/", raw, out);
            return;
        }
        let base: &[u8] = match dirfd {
            Some(fd) if fd != AT_FDCWD => self
                .fd_entry(pid, fd)
                .map(|e| e.obj.name.as_slice())
                .unwrap_or(b""),
            _ => self
                .procs
                .get(&pid)
                .map(|p| p.cwd.as_slice())
                .unwrap_or(b""),
        };
        if base.first() != Some(&b'/') {
            out.clear();
            out.extend_from_slice(raw);
            return;
        }
        path::resolve_into(base, raw, out);
    }

    // ----- applying events -----

    /// Updates state for `evt` before rules see it.
    pub fn apply(&mut self, evt: &Event) {
        self.name_changed = false;
        if evt.tid <= 0 || usize::from(evt.etype.0) >= vigil_event::table::events().len() {
            self.stats.malformed_events += 1;
            return;
        }
        if let Some(live) = self.live_users.as_mut() {
            live.tick(evt.ts);
        }
        let info = schema::type_info(evt.etype);
        if let Op::Clone {
            flags,
            default_flags,
            vtid,
            vpid,
        } = info.op
        {
            if evt.res == 0 && !self.threads.contains_key(&evt.tid) {
                // The child's own return from clone, its parent's event unseen.
                let flags = param_u64(evt, flags).unwrap_or(default_flags);
                self.adopt_child_event(evt, flags);
                self.set_own_ns_ids(evt, vtid, vpid);
                return;
            }
        }
        let pid = self.ensure_thread(evt);
        let res = evt.res;
        match info.op {
            Op::Nothing | Op::Close | Op::Procexit => {}
            Op::Open {
                dirfd,
                name,
                flags,
                dev,
                ino,
                creat,
            } => {
                if res < 0 {
                    return;
                }
                let Some(raw) = param_bytes(evt, name) else {
                    self.stats.malformed_events += 1;
                    return;
                };
                let flags = if creat {
                    O_CREAT | O_WRONLY | O_TRUNC
                } else {
                    param_u64(evt, flags).unwrap_or(0)
                };
                let dirfd = (dirfd != NONE).then(|| param_i64(evt, dirfd)).flatten();
                let mut resolved = std::mem::take(&mut self.path_buf);
                self.resolve_path_into(pid, dirfd.or(Some(AT_FDCWD)), raw, &mut resolved);
                let ty = if flags & O_DIRECTORY != 0 {
                    FdType::Directory
                } else {
                    FdType::File
                };
                let (dev, ino) = (param_u64(evt, dev), param_u64(evt, ino));
                self.insert_fd_with(pid, res, flags & O_CLOEXEC != 0, ty, |obj| {
                    // The object's (empty) buffer becomes the next scratch buffer.
                    obj.set_path(&mut resolved, raw);
                    obj.flags = flags as u32;
                    obj.dev = dev.unwrap_or(0);
                    obj.ino = ino.unwrap_or(0);
                });
                self.path_buf = resolved;
            }
            Op::Dup { old, new, flags } => {
                let Some(oldfd) = param_i64(evt, old) else {
                    self.stats.malformed_events += 1;
                    return;
                };
                let newfd = if res >= 0 { res } else { return };
                let _ = new;
                let cloexec = param_u64(evt, flags).unwrap_or(0) & O_CLOEXEC != 0;
                self.dup_fd(pid, oldfd, newfd, cloexec);
            }
            Op::Fcntl { fd, cmd } => {
                let cmd = param_i64(evt, cmd);
                if res >= 0 && matches!(cmd, Some(F_DUPFD) | Some(F_DUPFD_CLOEXEC)) {
                    if let Some(fd) = param_i64(evt, fd) {
                        self.dup_fd(pid, fd, res, cmd == Some(F_DUPFD_CLOEXEC));
                    }
                }
            }
            Op::Pipe {
                fd1,
                fd2,
                ino,
                flags,
            } => {
                if res < 0 {
                    return;
                }
                let cloexec = param_u64(evt, flags).unwrap_or(0) & O_CLOEXEC != 0;
                let ino = param_u64(evt, ino).unwrap_or(0);
                let name = if ino > 0 {
                    format!("pipe:[{ino}]").into_bytes()
                } else {
                    Vec::new()
                };
                for i in [fd1, fd2] {
                    if let Some(fd) = param_i64(evt, i) {
                        let mut obj = FdObj::new(FdType::Pipe, name.clone());
                        obj.ino = ino;
                        self.insert_fd(pid, fd, obj, cloexec);
                    }
                }
            }
            Op::Memfd { name, flags } => {
                if res < 0 {
                    return;
                }
                let mut fdname = b"memfd:".to_vec();
                fdname.extend_from_slice(param_bytes(evt, name).unwrap_or(b""));
                let cloexec = param_u64(evt, flags).unwrap_or(0) & MFD_CLOEXEC != 0;
                self.insert_fd(pid, res, FdObj::new(FdType::Memfd, fdname), cloexec);
            }
            Op::Socket { domain, ty, proto } => {
                if res < 0 {
                    return;
                }
                let ty = param_u64(evt, ty).unwrap_or(0);
                let (fd_type, net) = socket_kind(
                    param_u64(evt, domain).unwrap_or(0),
                    ty,
                    param_u64(evt, proto).unwrap_or(0),
                );
                self.insert_fd_with(pid, res, ty & SOCK_CLOEXEC != 0, fd_type, |o| o.net = net);
            }
            Op::Socketpair {
                domain,
                ty,
                proto,
                fd1,
                fd2,
            } => {
                if res < 0 {
                    return;
                }
                let ty = param_u64(evt, ty).unwrap_or(0);
                let obj = socket_obj(
                    param_u64(evt, domain).unwrap_or(0),
                    ty,
                    param_u64(evt, proto).unwrap_or(0),
                );
                for i in [fd1, fd2] {
                    if let Some(fd) = param_i64(evt, i) {
                        self.insert_fd(pid, fd, obj.clone(), ty & SOCK_CLOEXEC != 0);
                    }
                }
            }
            Op::Connect { fd, addr, tuple } => {
                if res < 0 && res != -EINPROGRESS {
                    return;
                }
                let Some(fd) = param_i64(evt, fd) else {
                    self.stats.malformed_events += 1;
                    return;
                };
                let tuple = evt.param(usize::from(tuple));
                let addr = evt.param(usize::from(addr));
                self.set_endpoint(pid, fd, tuple, addr, false);
            }
            Op::Accept { tuple, flags } => {
                if res < 0 {
                    return;
                }
                let cloexec = param_u64(evt, flags).unwrap_or(0) & SOCK_CLOEXEC != 0;
                let obj = match evt.param(usize::from(tuple)) {
                    Param::Tuple(SockTuple::Inet {
                        l4proto,
                        src_ip,
                        src_port,
                        dst_ip,
                        dst_port,
                    }) => {
                        let ty = if dst_ip.is_ipv6() {
                            FdType::Ipv6
                        } else {
                            FdType::Ipv4
                        };
                        let (net, name) =
                            net_from_tuple(*l4proto, *src_ip, *src_port, *dst_ip, *dst_port, true);
                        let mut obj = FdObj::new(ty, name);
                        obj.net = Some(net);
                        obj
                    }
                    Param::Tuple(SockTuple::Unix { path }) => {
                        FdObj::new(FdType::Unix, path.clone())
                    }
                    _ => FdObj::new(FdType::Other, Vec::new()),
                };
                self.insert_fd(pid, res, obj, cloexec);
            }
            Op::Bind { fd, addr } => {
                if res < 0 {
                    return;
                }
                let Some(fd) = param_i64(evt, fd) else {
                    self.stats.malformed_events += 1;
                    return;
                };
                match evt.param(usize::from(addr)) {
                    Param::Addr(SockAddr::Inet { ip, port }) => {
                        let (ip, port) = (*ip, *port);
                        self.update_fd(pid, fd, |obj| {
                            let mut net =
                                obj.net.unwrap_or_else(|| Net::unconnected(0, ip.is_ipv6()));
                            net.sip = ip;
                            net.sport = port;
                            net.is_server = true;
                            obj.net = Some(net);
                        });
                    }
                    Param::Addr(SockAddr::Unix { path }) => {
                        self.update_fd(pid, fd, |obj| obj.set_name(path));
                    }
                    _ => {}
                }
            }
            Op::Listen { fd } => {
                if res < 0 {
                    return;
                }
                if let Some(fd) = param_i64(evt, fd) {
                    self.update_fd(pid, fd, |obj| {
                        if let Some(net) = obj.net.as_mut() {
                            net.is_server = true;
                        }
                    });
                }
            }
            Op::Transfer { fd, tuple, send } => {
                if res < 0 {
                    return;
                }
                let (Some(fd), Param::Tuple(t @ SockTuple::Inet { .. })) =
                    (param_i64(evt, fd), evt.param(usize::from(tuple)))
                else {
                    return;
                };
                let is_inet = self.fd_entry(pid, fd).is_some_and(|e| e.obj.ty.is_inet());
                if is_inet {
                    let t = Param::Tuple(t.clone());
                    self.set_endpoint(pid, fd, &t, &Param::None, !send);
                }
            }
            Op::Clone {
                flags,
                default_flags,
                vtid,
                vpid,
            } => {
                if res > 0 {
                    let flags = param_u64(evt, flags).unwrap_or(default_flags);
                    let ns_ids = ChildNsIds {
                        vtid: ns_id(evt, vtid),
                        vpid: ns_id(evt, vpid),
                    };
                    self.clone_child(pid, evt, res, flags, ns_ids);
                } else if res == 0 {
                    self.set_own_ns_ids(evt, vtid, vpid);
                }
            }
            Op::Exec {
                dirfd,
                path,
                flags: _,
                tail,
            } => {
                if res == 0 {
                    self.exec(pid, evt, dirfd, path, tail);
                }
            }
            Op::Chdir { path } => {
                if res < 0 {
                    return;
                }
                if let Some(raw) = param_bytes(evt, path) {
                    let cwd = self.resolve_path(pid, None, raw);
                    if cwd.first() == Some(&b'/') {
                        if let Some(p) = self.procs.get_mut(&pid) {
                            p.cwd = dir_with_slash(cwd);
                        }
                    }
                }
            }
            Op::Fchdir { fd } => {
                if res < 0 {
                    return;
                }
                let cwd = param_i64(evt, fd)
                    .and_then(|fd| self.fd_entry(pid, fd))
                    .map(|e| e.obj.name.clone())
                    .filter(|n| n.first() == Some(&b'/'));
                if let (Some(cwd), Some(p)) = (cwd, self.procs.get_mut(&pid)) {
                    p.cwd = dir_with_slash(cwd);
                }
            }
            Op::SetIds {
                gid,
                real,
                effective,
            } => {
                if res < 0 {
                    return;
                }
                let r = param_u32(evt, real).filter(|&v| v != u32::MAX);
                let e = param_u32(evt, effective).filter(|&v| v != u32::MAX);
                if let Some(p) = self.procs.get_mut(&pid) {
                    let (pr, pe) = if gid {
                        (&mut p.gid, &mut p.egid)
                    } else {
                        (&mut p.uid, &mut p.euid)
                    };
                    if let Some(r) = r {
                        *pr = r;
                    }
                    if let Some(e) = e {
                        *pe = e;
                    }
                }
                self.resolve_users(pid, evt.ts);
            }
            Op::Setsid => {
                if res < 0 {
                    return;
                }
                if let Some(p) = self.procs.get_mut(&pid) {
                    p.sid = res;
                    p.vpgid = res;
                    p.pgid = p.pid;
                }
            }
            Op::Setpgid { pid: target, pgid } => {
                if res < 0 {
                    return;
                }
                self.setpgid(
                    pid,
                    param_i64(evt, target).unwrap_or(0),
                    param_i64(evt, pgid).unwrap_or(0),
                );
            }
            Op::Capset {
                inheritable,
                permitted,
                effective,
            } => {
                if res < 0 {
                    return;
                }
                let (i, pm, e) = (
                    param_u64(evt, inheritable),
                    param_u64(evt, permitted),
                    param_u64(evt, effective),
                );
                if let Some(p) = self.procs.get_mut(&pid) {
                    if let Some(v) = i {
                        p.cap_inheritable = v;
                    }
                    if let Some(v) = pm {
                        p.cap_permitted = v;
                    }
                    if let Some(v) = e {
                        p.cap_effective = v;
                    }
                }
            }
            Op::Prctl { option, arg2 } => {
                if res >= 0 && param_i64(evt, option) == Some(PR_SET_CHILD_SUBREAPER) {
                    let on = param_u64(evt, arg2).unwrap_or(0) != 0;
                    if let Some(p) = self.procs.get_mut(&pid) {
                        p.subreaper = on;
                    }
                }
            }
            Op::Unshare { flags } => {
                if res == 0 && param_u64(evt, flags).unwrap_or(0) & CLONE_NEWPID != 0 {
                    if let Some(p) = self.procs.get_mut(&pid) {
                        p.pending_newpid = true;
                    }
                }
            }
            Op::Bpf { cmd } => {
                // Commands that return a new descriptor (BPF_MAP_CREATE, BPF_PROG_LOAD,
                // BPF_OBJ_GET, *_GET_FD_BY_ID, BPF_RAW_TRACEPOINT_OPEN, BPF_BTF_LOAD,
                // BPF_LINK_CREATE, BPF_ENABLE_STATS, BPF_ITER_CREATE …).
                let creates = matches!(
                    param_u64(evt, cmd),
                    Some(0 | 5 | 7 | 13 | 14 | 17 | 18 | 19 | 28 | 30 | 32 | 33)
                );
                if res >= 0 && creates {
                    self.insert_fd(pid, res, FdObj::new(FdType::Bpf, Vec::new()), true);
                }
            }
            Op::NewFd(ty) => {
                if res >= 0 {
                    self.insert_fd(pid, res, FdObj::new(ty, Vec::new()), false);
                }
            }
        }
    }

    /// Updates state after rules saw `evt`: `close` removes the fd, `procexit` the thread.
    pub fn finish(&mut self, evt: &Event) {
        if evt.tid <= 0 {
            return;
        }
        match schema::type_info(evt.etype).op {
            // Linux releases the descriptor even when close reports EINTR/EIO.
            Op::Close if evt.res != -EBADF => {
                let pid = self.threads.get(&evt.tid).map_or(evt.pid, |t| t.pid);
                if let Some(fd) = param_i64(evt, 0) {
                    self.remove_fd(pid, fd);
                }
            }
            Op::Procexit => {
                self.remove_thread_entry(evt.tid);
                if (self.runtime.is_some() || self.live_users.is_some())
                    && evt.ts >= self.next_container_sweep
                {
                    self.next_container_sweep = evt.ts.saturating_add(CONTAINER_SWEEP_NS);
                    self.sweep_containers();
                }
            }
            _ => {}
        }
    }

    /// Live: forgets the containers no process of the table runs in any more, and their user
    /// tables (container churn must not grow them; a container seen again is looked up and
    /// read again).
    fn sweep_containers(&mut self) {
        let live: FxHashSet<&[u8]> = self
            .procs
            .values()
            .map(|p| p.image.container_id.as_slice())
            .filter(|id| !id.is_empty())
            .collect();
        self.containers.retain(|id| live.contains(id));
        if let Some(users) = self.live_users.as_mut() {
            users.retain_containers(|id| live.contains(id));
        }
    }

    /// Makes sure `evt.tid` has a thread entry; returns its process id.
    fn ensure_thread(&mut self, evt: &Event) -> i64 {
        let event_pid = if evt.pid > 0 { evt.pid } else { evt.tid };
        match self.threads.get(&evt.tid) {
            Some(t) if t.pid == event_pid || evt.pid <= 0 => return t.pid,
            Some(_) => {
                // The tid was reused by another process (we missed an exit).
                self.remove_thread_entry(evt.tid);
            }
            None => {}
        }
        self.stats.unknown_thread_events += 1;
        if !self.procs.contains_key(&event_pid) {
            let table = self.new_fd_table();
            let mut p = Process::placeholder(event_pid, table, Arc::clone(&self.unknown_image));
            if evt.tid == event_pid {
                p.vpid = UNKNOWN_ID;
            }
            self.procs.insert(event_pid, p);
        }
        self.insert_thread(evt.tid, event_pid, UNKNOWN_ID);
        event_pid
    }

    fn adopt_child_event(&mut self, evt: &Event, flags: u64) {
        let pid = if evt.pid > 0 { evt.pid } else { evt.tid };
        if flags & CLONE_THREAD != 0 && self.procs.contains_key(&pid) && pid != evt.tid {
            self.insert_thread(evt.tid, pid, UNKNOWN_ID);
            return;
        }
        self.ensure_thread(evt);
    }

    /// The child's own clone return: its namespace ids, when the event carries them, are
    /// authoritative (they fill in what a parent in a foreign pid namespace could not tell).
    fn set_own_ns_ids(&mut self, evt: &Event, vtid: u8, vpid: u8) {
        let (vtid, vpid) = (ns_id(evt, vtid), ns_id(evt, vpid));
        let Some(thread) = self.threads.get_mut(&evt.tid) else {
            return;
        };
        if let Some(v) = vtid {
            thread.vtid = v;
        }
        let pid = thread.pid;
        if let (Some(v), Some(p)) = (vpid, self.procs.get_mut(&pid)) {
            p.vpid = v;
        }
    }

    fn clone_child(
        &mut self,
        parent_pid: i64,
        evt: &Event,
        child_tid: i64,
        flags: u64,
        ns_ids: ChildNsIds,
    ) {
        if self.threads.contains_key(&child_tid) {
            // A stale entry under a reused id, or the child's event came first.
            let same_group = self.threads.get(&child_tid).map(|t| t.pid);
            let expected = if flags & CLONE_THREAD != 0 {
                parent_pid
            } else {
                child_tid
            };
            if same_group == Some(expected) {
                return;
            }
            self.remove_thread_entry(child_tid);
        }
        let Some(parent) = self.procs.get(&parent_pid) else {
            return;
        };
        let host_ns = parent.vpid == parent.pid;
        if flags & CLONE_THREAD != 0 {
            let vtid = ns_ids
                .vtid
                .unwrap_or(if host_ns { child_tid } else { UNKNOWN_ID });
            self.insert_thread(child_tid, parent_pid, vtid);
            return;
        }
        let vpid = match ns_ids.vpid {
            Some(vpid) => vpid,
            None if flags & CLONE_NEWPID != 0 || parent.pending_newpid => 1,
            None if host_ns => child_tid,
            None => UNKNOWN_ID,
        };
        // A new process's only thread is its leader: vtid = vpid unless told otherwise.
        let vtid = ns_ids.vtid.unwrap_or(vpid);
        let ppid = if flags & CLONE_PARENT != 0 {
            parent.ppid
        } else {
            parent.pid
        };
        let mut child = Process {
            pid: child_tid,
            ppid,
            vpid,
            start_ts: evt.ts,
            nthreads: 0,
            subreaper: false,
            pending_newpid: false,
            ..parent.clone()
        };
        let parent_table = parent.fd_table;
        if flags & CLONE_FILES != 0 {
            if let Some(t) = self.fd_tables.get_mut(&parent_table) {
                t.refs += 1;
            }
        } else {
            let copy = self
                .fd_tables
                .get(&parent_table)
                .map(|t| t.fds.clone())
                .unwrap_or_default();
            let id = self.new_fd_table();
            if let Some(t) = self.fd_tables.get_mut(&id) {
                t.fds = copy;
            }
            child.fd_table = id;
        }
        if let Some(p) = self.procs.get_mut(&parent_pid) {
            p.pending_newpid = false;
        }
        *self.children.entry(ppid).or_default() += 1;
        self.procs.insert(child_tid, child);
        self.insert_thread(child_tid, child_tid, vtid);
    }

    fn exec(&mut self, pid: i64, evt: &Event, dirfd: u8, path_idx: u8, tail: u8) {
        // Exec from a non-leader thread: the thread takes over the leader's id; the other
        // threads are gone.
        if evt.tid != pid || self.procs.get(&pid).is_some_and(|p| p.nthreads > 1) {
            let others: Vec<i64> = self
                .threads
                .iter()
                .filter(|(&tid, t)| t.pid == pid && tid != pid)
                .map(|(&tid, _)| tid)
                .collect();
            let vpid = self.procs.get(&pid).map_or(UNKNOWN_ID, |p| p.vpid);
            for tid in others {
                self.threads.remove(&tid);
            }
            self.threads
                .entry(pid)
                .or_insert(Thread { pid, vtid: vpid });
            if let Some(p) = self.procs.get_mut(&pid) {
                p.nthreads = 1;
            }
        }
        let t = |k: u8| {
            if tail == NONE {
                NONE
            } else {
                tail.saturating_add(k)
            }
        };
        // EXEC_TAIL order: exe args env comm trusted_exepath cwd tid pid ptid uid gid euid egid
        // loginuid tty cap_inheritable cap_permitted cap_effective cgroups exe_flags exe_ino
        // exe_ino_ctime exe_ino_mtime.
        let list = |i: u8| match evt.param(usize::from(i)) {
            Param::List(l) => l.as_slice(),
            _ => &[],
        };
        let raw_path = param_bytes(evt, path_idx).unwrap_or(b"");
        let dirfd_val = (dirfd != NONE).then(|| param_i64(evt, dirfd)).flatten();
        let mut exepath = std::mem::take(&mut self.path_buf);
        exepath.clear();
        match param_bytes(evt, t(4)).filter(|p| !p.is_empty()) {
            Some(p) => exepath.extend_from_slice(p),
            None if raw_path.is_empty() => {
                if let Some(e) = dirfd_val.and_then(|fd| self.fd_entry(pid, fd)) {
                    exepath.extend_from_slice(&e.obj.name);
                }
            }
            None => {
                self.resolve_path_into(pid, dirfd_val.or(Some(AT_FDCWD)), raw_path, &mut exepath)
            }
        }
        let exe = param_bytes(evt, t(0)).unwrap_or(raw_path);
        let comm = match param_bytes(evt, t(3)) {
            Some(c) => c,
            None => {
                let base = path::basename(if exepath.is_empty() {
                    raw_path
                } else {
                    &exepath
                });
                &base[..base.len().min(15)]
            }
        };
        let exe_flags = param_u64(evt, t(19)).unwrap_or(0);
        let Some(p) = self.procs.get_mut(&pid) else {
            self.path_buf = exepath;
            return;
        };
        let mut image = self
            .spare_images
            .pop()
            .unwrap_or_else(|| Arc::new(Image::default()));
        let img = Arc::make_mut(&mut image);
        img.set(&ImageParts {
            comm,
            exe,
            exepath: &exepath,
            args: list(t(1)),
            env: list(t(2)),
            cgroup: Some(param_bytes(evt, t(18)).unwrap_or(&p.image.cgroup)),
        });
        img.exe_writable = exe_flags & vigil_event::table::exe_flags::WRITABLE != 0;
        img.exe_upper_layer = exe_flags & vigil_event::table::exe_flags::UPPER_LAYER != 0;
        img.exe_from_memfd = exe_flags & vigil_event::table::exe_flags::FROM_MEMFD != 0;
        img.exe_ino = param_u64(evt, t(20)).unwrap_or(0);
        img.exe_ino_ctime = param_u64(evt, t(21)).unwrap_or(0);
        img.exe_ino_mtime = param_u64(evt, t(22)).unwrap_or(0);
        self.path_buf = exepath;
        let old = std::mem::replace(&mut p.image, image);
        recycle_image(&mut self.spare_images, old);
        if let Some(cwd) = param_bytes(evt, t(5)).filter(|c| c.first() == Some(&b'/')) {
            path::resolve_into(b"/", cwd, &mut p.cwd);
            if p.cwd.last() != Some(&b'/') {
                p.cwd.push(b'/');
            }
        }
        let ptid = param_i64(evt, t(8)).filter(|&v| v > 0);
        let u = |k: u8| param_u32(evt, t(k));
        let caps = |k: u8| param_u64(evt, t(k));
        let old_ppid = p.ppid;
        if let Some(ptid) = ptid {
            p.ppid = ptid;
        }
        let creds = [u(9), u(10), u(11), u(12)];
        if let [Some(uid), Some(gid), Some(euid), Some(egid)] = creds {
            p.uid = uid;
            p.gid = gid;
            p.euid = euid;
            p.egid = egid;
            p.creds_known = true;
        } else {
            // Partial credentials: take what is there.
            let [uid, gid, euid, egid] = creds;
            p.uid = uid.unwrap_or(p.uid);
            p.gid = gid.unwrap_or(p.gid);
            p.euid = euid.or(uid).unwrap_or(p.euid);
            p.egid = egid.or(gid).unwrap_or(p.egid);
            p.creds_known |= uid.is_some() || euid.is_some();
        }
        if let Some(v) = u(13) {
            p.loginuid = v;
        }
        if let Some(v) = u(14) {
            p.tty = v;
        }
        if let Some(v) = caps(15) {
            p.cap_inheritable = v;
        }
        if let Some(v) = caps(16) {
            p.cap_permitted = v;
        }
        if let Some(v) = caps(17) {
            p.cap_effective = v;
        }
        if p.start_ts == 0 {
            p.start_ts = evt.ts;
        }
        let table_id = p.fd_table;
        let new_ppid = p.ppid;
        if new_ppid != old_ppid {
            if let Some(n) = self.children.get_mut(&old_ppid) {
                *n = n.saturating_sub(1);
            }
            *self.children.entry(new_ppid).or_default() += 1;
        }
        // A shared table is unshared at exec; then close-on-exec descriptors go.
        let shared = self.fd_tables.get(&table_id).is_some_and(|t| t.refs > 1);
        if shared {
            let copy = self
                .fd_tables
                .get(&table_id)
                .map(|t| t.fds.clone())
                .unwrap_or_default();
            self.release_fd_table(table_id);
            let id = self.new_fd_table();
            if let Some(t) = self.fd_tables.get_mut(&id) {
                t.fds = copy;
            }
            if let Some(p) = self.procs.get_mut(&pid) {
                p.fd_table = id;
            }
        }
        let table = match self.procs.get(&pid) {
            Some(p) => self.fd_tables.get_mut(&p.fd_table),
            None => None,
        };
        if let Some(t) = table {
            let (spare, blank) = (&mut self.spare_objs, &self.blank_obj);
            t.fds.retain(|_, e| {
                if e.cloexec {
                    recycle_obj(spare, std::mem::replace(&mut e.obj, Arc::clone(blank)));
                }
                !e.cloexec
            });
        }
        if let (Some(rt), Some(p)) = (self.runtime.as_mut(), self.procs.get(&pid)) {
            rt.resolve(&p.image.container_id, evt.ts, &mut self.containers);
        }
        self.resolve_users(pid, evt.ts);
    }

    fn dup_fd(&mut self, pid: i64, oldfd: i64, newfd: i64, cloexec: bool) {
        if oldfd == newfd {
            return;
        }
        let Some(table) = self.table_mut(pid) else {
            return;
        };
        match table.fds.get(&oldfd).map(|e| Arc::clone(&e.obj)) {
            Some(obj) => {
                table.fds.insert(newfd, FdEntry { obj, cloexec });
            }
            None => {
                table.fds.remove(&newfd);
            }
        }
    }

    fn update_fd(&mut self, pid: i64, fd: i64, f: impl FnOnce(&mut FdObj)) {
        if let Some(e) = self.table_mut(pid).and_then(|t| t.fds.get_mut(&fd)) {
            f(Arc::make_mut(&mut e.obj));
        }
    }

    /// Sets the endpoints of socket `fd` from a tuple (preferred) or a destination address.
    fn set_endpoint(&mut self, pid: i64, fd: i64, tuple: &Param, addr: &Param, is_server: bool) {
        let mut text = std::mem::take(&mut self.text_buf);
        text.clear();
        let (ty, net, name) = match (tuple, addr) {
            (
                Param::Tuple(SockTuple::Inet {
                    l4proto,
                    src_ip,
                    src_port,
                    dst_ip,
                    dst_port,
                }),
                _,
            ) => {
                let ty = if dst_ip.is_ipv6() {
                    FdType::Ipv6
                } else {
                    FdType::Ipv4
                };
                let net = Net {
                    l4proto: *l4proto,
                    cip: *src_ip,
                    cport: *src_port,
                    sip: *dst_ip,
                    sport: *dst_port,
                    is_server,
                    connected: true,
                };
                crate::render::tuple_name(&net, &mut text);
                (ty, Some(net), text.as_bytes())
            }
            (Param::Tuple(SockTuple::Unix { path }), _)
            | (_, Param::Addr(SockAddr::Unix { path })) => (FdType::Unix, None, path.as_slice()),
            (_, Param::Addr(SockAddr::Inet { ip, port })) => {
                let ty = if ip.is_ipv6() {
                    FdType::Ipv6
                } else {
                    FdType::Ipv4
                };
                let l4 = self
                    .fd_entry(pid, fd)
                    .and_then(|e| e.obj.net)
                    .map_or(0, |n| n.l4proto);
                let mut net = Net::unconnected(l4, ip.is_ipv6());
                net.sip = *ip;
                net.sport = *port;
                net.connected = true;
                crate::render::tuple_name(&net, &mut text);
                (ty, Some(net), text.as_bytes())
            }
            _ => {
                self.text_buf = text;
                return;
            }
        };
        if self.fd_entry(pid, fd).is_none() {
            self.insert_fd_with(pid, fd, false, ty, |obj| {
                obj.name.extend_from_slice(name);
                obj.net = net;
            });
        } else {
            let mut changed = false;
            self.update_fd(pid, fd, |obj| {
                changed = obj.name != name;
                if let Some(mut n) = net {
                    if let Some(old) = obj.net {
                        if n.l4proto == 0 {
                            n.l4proto = old.l4proto;
                        }
                        n.is_server |= old.is_server && is_server;
                    }
                    obj.net = Some(n);
                }
                if obj.ty == FdType::Other || (obj.ty.is_inet() && ty.is_inet()) {
                    obj.ty = ty;
                }
                obj.set_name(name);
            });
            self.name_changed = changed;
        }
        self.text_buf = text;
    }

    fn setpgid(&mut self, caller: i64, target: i64, pgid: i64) {
        let (caller_vpid, host_ns) = match self.procs.get(&caller) {
            Some(p) => (p.vpid, p.vpid == p.pid),
            None => return,
        };
        let target_pid = if target == 0 || target == caller_vpid {
            caller
        } else if host_ns {
            target
        } else {
            return;
        };
        if let Some(p) = self.procs.get_mut(&target_pid) {
            let new = if pgid == 0 { p.vpid } else { pgid };
            p.vpgid = new;
            if host_ns {
                p.pgid = new;
            }
        }
    }
}

/// Falco prints `proc.cwd` with a trailing slash; keeping it stored that way lets the field
/// borrow. Path resolution ignores the extra slash.
fn dir_with_slash(mut dir: Vec<u8>) -> Vec<u8> {
    if dir.last() != Some(&b'/') {
        dir.push(b'/');
    }
    dir
}

/// The type and (for inet) endpoints of a new socket.
fn socket_kind(domain: u64, ty: u64, proto: u64) -> (FdType, Option<Net>) {
    match domain {
        AF_INET | AF_INET6 => {
            let ipv6 = domain == AF_INET6;
            let net = Net::unconnected(l4proto_for(ty, proto), ipv6);
            (if ipv6 { FdType::Ipv6 } else { FdType::Ipv4 }, Some(net))
        }
        AF_UNIX => (FdType::Unix, None),
        AF_NETLINK => (FdType::Netlink, None),
        _ => (FdType::Other, None),
    }
}

fn socket_obj(domain: u64, ty: u64, proto: u64) -> FdObj {
    let (fd_type, net) = socket_kind(domain, ty, proto);
    let mut obj = FdObj::new(fd_type, Vec::new());
    obj.net = net;
    obj
}

/// Converts a snapshot descriptor. Inet tuples are taken as client → server with this process
/// the client (a snapshot does not say which end it is).
fn fd_from_info(fd: &FdInfo) -> (FdObj, bool) {
    let cloexec = u64::from(fd.flags) & O_CLOEXEC != 0;
    let mut obj = match fd.kind {
        FdType::File | FdType::Directory => {
            let mut obj = FdObj::new(fd.kind, fd.name.clone());
            obj.set_nameraw(&fd.name);
            obj
        }
        FdType::Ipv4 | FdType::Ipv6 => match &fd.tuple {
            Some(SockTuple::Inet {
                l4proto,
                src_ip,
                src_port,
                dst_ip,
                dst_port,
            }) => {
                let (net, name) =
                    net_from_tuple(*l4proto, *src_ip, *src_port, *dst_ip, *dst_port, false);
                let mut obj = FdObj::new(fd.kind, name);
                obj.net = Some(net);
                obj
            }
            _ => {
                let mut obj = FdObj::new(fd.kind, fd.name.clone());
                obj.net = Some(Net::unconnected(0, fd.kind == FdType::Ipv6));
                obj
            }
        },
        kind => FdObj::new(kind, fd.name.clone()),
    };
    obj.flags = fd.flags;
    (obj, cloexec)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_types_map_to_l4proto() {
        assert_eq!(l4proto_for(1 | SOCK_CLOEXEC, 0), 6);
        assert_eq!(l4proto_for(2, 0), 17);
        assert_eq!(l4proto_for(2, 1), 1);
        assert_eq!(l4proto_for(3, 255), 255);
        assert_eq!(socket_obj(AF_UNIX, 1, 0).ty, FdType::Unix);
        assert_eq!(socket_obj(AF_INET6, 1, 0).ty, FdType::Ipv6);
        assert_eq!(socket_obj(17, 3, 0).ty, FdType::Other);
    }
}

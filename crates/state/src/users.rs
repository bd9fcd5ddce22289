//! User and group databases (`user.*`, `group.*` fields, uid rendering in `evt.arg.uid`).
//!
//! [`UserDb`] is the role; [`FileUserDb`] reads `/etc/passwd` + `/etc/group` (or any files of
//! that shape) once, and [`MemUserDb`] holds a list handed to it (a capture's snapshot, tests).
//! [`LiveUsers`] is what live capture uses: the host's files followed as they change, and one
//! table per container read from the container's own files through `/proc/PID/root`.
//! Parsing is forgiving: a malformed line is skipped and counted, never an error; files are
//! read up to a size bound ([`MAX_DB_BYTES`], [`MAX_CONTAINER_DB_BYTES`] for a container's,
//! whose tables together are bounded too: [`LiveUsersConfig`]).
//!
//! How [`LiveUsers`] stays current without costing events anything: the files' [`FileStamp`]s
//! (device, inode, size, times) are compared at most every
//! [`LiveUsersConfig::check_interval_ns`] of event time, and when a process gets credentials
//! (exec, set*id, the start snapshot) whose uid or gid its table lacks — a user added after
//! the agent started — at most every [`LiveUsersConfig::miss_retry_ns`] per missing id. A
//! file is read again only when its stamp changed. A container's table is read when one of
//! its processes is first seen with credentials (as Falco reads a container's `/etc/passwd`
//! through `/proc/PID/root`), and follows changes the same way; a container process is never
//! answered from the host's table.
//!
//! # Where the tables come from
//!
//! Users and groups (`users.rs`) come from one of two places, chosen by `StateConfig::live_users`.
//! Live (`vigil watch`, `vigil run`: `LiveUsers`): the host's `/etc/passwd` and `/etc/group`,
//! followed by `FileStamp` (device, inode, size, mtime, ctime) — compared at most once a second of
//! event time, and when a process gets credentials (exec, set*id, the start snapshot) whose uid or
//! gid its table lacks (at most every 100 ms per missing id); a file is read again only when its
//! stamp changed, so events cost one comparison. A process in a container is named from that
//! container's own files, read through `/proc/PID/root/etc/{passwd,group}` of the process or its
//! nearest ancestors in the container, cached per container id and followed the same way; links
//! below the container's root are not followed, a container's files are read up to 1 MiB each (16
//! MiB over all containers, past which their tables are dropped and read again; the host's up to 16
//! MiB), malformed lines are skipped and counted; a container whose files cannot be read gets no
//! names, never the host's. Replay (`live_users: None`): the capture's tables when its header has
//! any, else the replaying machine's files read once; one table for every process, container or
//! not, never re-read.
//!
//! **Limitation:** captures (`-w`) record no user tables (the header's are empty, so a replay uses
//! the replaying machine's files); names of users created during the capture, removed since, or
//! defined only inside a container can differ between the live alert and the replay.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use vigil_event::{GroupInfo, UserInfo};

use crate::procfs::{FileStamp, ProcSource, RealProc};

/// A passwd or group file larger than this is read only this far (the last, cut line is
/// dropped and the file counted as truncated).
pub const MAX_DB_BYTES: usize = 16 << 20;
/// The same bound for a container's files: an image may carry anything, and there may be
/// thousands of containers.
pub const MAX_CONTAINER_DB_BYTES: usize = 1 << 20;

/// Looks up users and groups by id.
pub trait UserDb: Send + Sync {
    fn user(&self, uid: u32) -> Option<&UserInfo>;
    fn group(&self, gid: u32) -> Option<&GroupInfo>;
}

/// Why a user database could not be read.
#[derive(Debug, thiserror::Error)]
pub enum UserDbError {
    #[error("failed to read user database `{path}`")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// An in-memory database (first entry wins on duplicate ids, as `getpwuid` does).
#[derive(Clone, Debug, Default)]
pub struct MemUserDb {
    users: FxHashMap<u32, UserInfo>,
    groups: FxHashMap<u32, GroupInfo>,
}

impl MemUserDb {
    pub fn new(
        users: impl IntoIterator<Item = UserInfo>,
        groups: impl IntoIterator<Item = GroupInfo>,
    ) -> Self {
        let mut db = MemUserDb::default();
        for u in users {
            db.users.entry(u.uid).or_insert(u);
        }
        for g in groups {
            db.groups.entry(g.gid).or_insert(g);
        }
        db
    }

    pub fn n_users(&self) -> usize {
        self.users.len()
    }

    pub fn n_groups(&self) -> usize {
        self.groups.len()
    }
}

impl UserDb for MemUserDb {
    fn user(&self, uid: u32) -> Option<&UserInfo> {
        self.users.get(&uid)
    }

    fn group(&self, gid: u32) -> Option<&GroupInfo> {
        self.groups.get(&gid)
    }
}

/// A database read from passwd/group files.
#[derive(Clone, Debug, Default)]
pub struct FileUserDb {
    db: MemUserDb,
    /// Lines that were neither blank, comments, nor well-formed entries.
    pub malformed_lines: usize,
}

impl FileUserDb {
    /// Reads the system's `/etc/passwd` and `/etc/group`.
    pub fn system() -> Result<Self, UserDbError> {
        Self::load(Path::new("/etc/passwd"), Path::new("/etc/group"))
    }

    /// Reads the two files. A missing or unreadable file is an error; malformed lines are not.
    pub fn load(passwd: &Path, group: &Path) -> Result<Self, UserDbError> {
        let read = |path: &Path| {
            let mut buf = Vec::new();
            std::fs::File::open(path)
                .and_then(|f| {
                    use std::io::Read;
                    f.take(MAX_DB_BYTES as u64).read_to_end(&mut buf)
                })
                .map_err(|source| UserDbError::Read {
                    path: path.to_path_buf(),
                    source,
                })?;
            Ok::<_, UserDbError>(complete_lines(&buf, MAX_DB_BYTES).0.to_vec())
        };
        Ok(Self::parse(&read(passwd)?, &read(group)?))
    }

    /// Parses passwd (`name:pw:uid:gid:gecos:home:shell`) and group (`name:pw:gid:members`)
    /// contents.
    pub fn parse(passwd: &[u8], group: &[u8]) -> Self {
        let (users, bad_users) = parse_passwd(passwd);
        let (groups, bad_groups) = parse_group(group);
        FileUserDb {
            db: MemUserDb::new(users, groups),
            malformed_lines: bad_users + bad_groups,
        }
    }

    pub fn n_users(&self) -> usize {
        self.db.n_users()
    }

    pub fn n_groups(&self) -> usize {
        self.db.n_groups()
    }
}

impl UserDb for FileUserDb {
    fn user(&self, uid: u32) -> Option<&UserInfo> {
        self.db.user(uid)
    }

    fn group(&self, gid: u32) -> Option<&GroupInfo> {
        self.db.group(gid)
    }
}

/// The entries of passwd contents, and how many lines were malformed.
fn parse_passwd(passwd: &[u8]) -> (Vec<UserInfo>, usize) {
    let mut malformed = 0;
    let mut users = Vec::new();
    for line in passwd.split(|&b| b == b'\n') {
        let line = trim_cr(line);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let f: Vec<&[u8]> = line.split(|&b| b == b':').collect();
        let parsed = (f.len() == 7)
            .then(|| Some((parse_id(f[2])?, parse_id(f[3])?)))
            .flatten()
            .filter(|_| !f[0].is_empty());
        match parsed {
            Some((uid, gid)) => users.push(UserInfo {
                uid,
                gid,
                name: f[0].to_vec(),
                home: f[5].to_vec(),
                shell: f[6].to_vec(),
            }),
            None => malformed += 1,
        }
    }
    (users, malformed)
}

/// The entries of group contents, and how many lines were malformed.
fn parse_group(group: &[u8]) -> (Vec<GroupInfo>, usize) {
    let mut malformed = 0;
    let mut groups = Vec::new();
    for line in group.split(|&b| b == b'\n') {
        let line = trim_cr(line);
        if line.is_empty() || line[0] == b'#' {
            continue;
        }
        let f: Vec<&[u8]> = line.split(|&b| b == b':').collect();
        match (f.len() == 4 && !f[0].is_empty())
            .then(|| parse_id(f[2]))
            .flatten()
        {
            Some(gid) => groups.push(GroupInfo {
                gid,
                name: f[0].to_vec(),
            }),
            None => malformed += 1,
        }
    }
    (groups, malformed)
}

/// `data` read with a bound of `max` bytes: when the bound was reached the file may go on, so
/// everything after the last newline (a line possibly cut short) is dropped. The flag says
/// whether the bound was reached.
fn complete_lines(data: &[u8], max: usize) -> (&[u8], bool) {
    if data.len() < max {
        return (data, false);
    }
    let end = data.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    (&data[..end], true)
}

/// How [`LiveUsers`] paces its checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveUsersConfig {
    /// Stamps of loaded files are compared at most this often (event time, nanoseconds).
    pub check_interval_ns: u64,
    /// A uid or gid missing from its table triggers a stamp comparison at most this often
    /// per id (the first miss of an id always does).
    pub miss_retry_ns: u64,
    /// Bytes read of one of the host's passwd or group files.
    pub max_file_bytes: usize,
    /// Bytes read of one of a container's files.
    pub max_container_file_bytes: usize,
    /// Container tables kept, and the bytes of their files all together; past either, all
    /// are dropped and read again when needed.
    pub max_containers: usize,
    pub max_container_bytes: usize,
}

impl Default for LiveUsersConfig {
    fn default() -> Self {
        LiveUsersConfig {
            check_interval_ns: 1_000_000_000,
            miss_retry_ns: 100_000_000,
            max_file_bytes: MAX_DB_BYTES,
            max_container_file_bytes: MAX_CONTAINER_DB_BYTES,
            max_containers: 4096,
            max_container_bytes: 16 << 20,
        }
    }
}

/// Counters of [`LiveUsers`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveUsersStats {
    /// Stamp comparisons (each costs a `stat` of passwd and of group).
    pub checks: u64,
    /// Files read (at start, and after their stamp changed).
    pub reads: u64,
    /// Files that could not be stamped or read (the previous table is kept).
    pub read_errors: u64,
    /// Malformed lines skipped, over every read.
    pub malformed_lines: u64,
    /// Files cut at their size bound ([`LiveUsersConfig::max_file_bytes`] and
    /// [`LiveUsersConfig::max_container_file_bytes`]).
    pub truncated_files: u64,
    /// Container tables now held.
    pub container_tables: usize,
}

/// Missing ids remembered per table (then the memory is cleared).
const MAX_MISSES: usize = 1024;

/// One passwd/group pair being followed.
#[derive(Debug, Default)]
struct Watched {
    users: MemUserDb,
    groups: MemUserDb,
    /// Stamps of the files the tables were read from (`None`: never read), and their sizes.
    passwd: Option<FileStamp>,
    group: Option<FileStamp>,
    passwd_bytes: usize,
    group_bytes: usize,
    /// Event time of the last stamp comparison.
    checked_at: Option<u64>,
    /// Missing ids (uids as is, gids with bit 32 set) → event time of their last check.
    misses: FxHashMap<u64, u64>,
}

/// Processes of one container tried in turn to reach its files (the first may have exited
/// by the time its event is processed; its ancestors in the container often have not).
pub const MAX_ROOT_PIDS: usize = 4;

/// Where a table's files are.
#[derive(Clone, Copy)]
enum Place {
    Host,
    /// Read through the root of the first of these processes that can be read.
    Container([i64; MAX_ROOT_PIDS], usize),
}

/// Users and groups of a live system: the host's files followed as they change, and one
/// table per container (see the module documentation).
pub struct LiveUsers {
    /// The host's file system (`etc/passwd`, `etc/group`).
    host_fs: Box<dyn ProcSource + Send + Sync>,
    /// procfs (`PID/root/etc/passwd`).
    proc_fs: Box<dyn ProcSource + Send + Sync>,
    config: LiveUsersConfig,
    host: Watched,
    /// By container id (as in `container.id`).
    containers: FxHashMap<Vec<u8>, Watched>,
    /// Bytes of the files the container tables were read from.
    container_bytes: usize,
    next_check: u64,
    stats: LiveUsersStats,
    /// Why the host's files could not be read at start, if so.
    start_error: Option<UserDbError>,
}

impl LiveUsers {
    /// This machine: `/etc/passwd` and `/etc/group`, containers through `/proc`.
    pub fn system() -> LiveUsers {
        LiveUsers::new(
            Box::new(RealProc {
                root: PathBuf::from("/"),
            }),
            Box::new(RealProc::default()),
            LiveUsersConfig::default(),
        )
    }

    /// `host_fs` holds the host's `etc/passwd` and `etc/group`; `proc_fs` is procfs. The
    /// host's files are read now.
    pub fn new(
        host_fs: Box<dyn ProcSource + Send + Sync>,
        proc_fs: Box<dyn ProcSource + Send + Sync>,
        config: LiveUsersConfig,
    ) -> LiveUsers {
        let mut live = LiveUsers {
            host_fs,
            proc_fs,
            next_check: config.check_interval_ns,
            config,
            host: Watched::default(),
            containers: FxHashMap::default(),
            container_bytes: 0,
            stats: LiveUsersStats::default(),
            start_error: None,
        };
        let mut host = std::mem::take(&mut live.host);
        if let Err(err) = live.refresh(&mut host, Place::Host, 0) {
            live.start_error = Some(err);
        }
        live.host = host;
        live
    }

    /// Why the host's files could not be read at start (names are then unknown until they
    /// can be).
    pub fn start_error(&self) -> Option<&UserDbError> {
        self.start_error.as_ref()
    }

    /// Forgets the tables of the containers `keep` says are gone (container churn must not
    /// grow the cache until its bound).
    pub fn retain_containers(&mut self, mut keep: impl FnMut(&[u8]) -> bool) {
        self.containers.retain(|id, _| keep(id));
    }

    pub fn stats(&self) -> LiveUsersStats {
        LiveUsersStats {
            container_tables: self.containers.len(),
            ..self.stats
        }
    }

    /// The user `uid` of a process in `container` (empty: the host).
    pub fn user(&self, container: &[u8], uid: u32) -> Option<&UserInfo> {
        self.table(container)?.users.user(uid)
    }

    /// The group `gid` of a process in `container` (empty: the host).
    pub fn group(&self, container: &[u8], gid: u32) -> Option<&GroupInfo> {
        self.table(container)?.groups.group(gid)
    }

    fn table(&self, container: &[u8]) -> Option<&Watched> {
        if container.is_empty() {
            Some(&self.host)
        } else {
            self.containers.get(container)
        }
    }

    /// Called for every event: compares the host's stamps when the interval has passed.
    #[inline]
    pub fn tick(&mut self, ts: u64) {
        if ts >= self.next_check {
            self.tick_due(ts);
        }
    }

    #[cold]
    fn tick_due(&mut self, ts: u64) {
        self.next_check = ts.saturating_add(self.config.check_interval_ns);
        let mut host = std::mem::take(&mut self.host);
        let _ = self.refresh(&mut host, Place::Host, ts);
        self.host = host;
    }

    /// A process in `container` (empty: the host) has these credentials (at most four ids in
    /// all are looked at): make sure its table is loaded, current within the check interval,
    /// and compared again when it lacks one of the ids. A container's files are reached
    /// through the root of the first of `pids` (that process, then others of the container,
    /// at most [`MAX_ROOT_PIDS`]) that can be read.
    pub fn resolve(&mut self, container: &[u8], pids: &[i64], uids: &[u32], gids: &[u32], ts: u64) {
        let (mut table, place) = if container.is_empty() {
            (std::mem::take(&mut self.host), Place::Host)
        } else {
            let table = match self.containers.remove(container) {
                Some(t) => {
                    self.container_bytes -= t.passwd_bytes + t.group_bytes;
                    t
                }
                None => {
                    if self.containers.len() >= self.config.max_containers
                        || self.container_bytes >= self.config.max_container_bytes
                    {
                        self.containers.clear();
                        self.container_bytes = 0;
                    }
                    Watched::default()
                }
            };
            let mut roots = [0; MAX_ROOT_PIDS];
            let n = pids.len().min(MAX_ROOT_PIDS);
            roots[..n].copy_from_slice(&pids[..n]);
            (table, Place::Container(roots, n))
        };
        let loaded = table.passwd.is_some() || table.group.is_some();
        let since = |at: Option<u64>| at.map_or(u64::MAX, |at| ts.saturating_sub(at));
        // A table never read is tried again at the miss pace; a container's loaded table is
        // compared at the check interval (the host's is, by `tick`).
        let due = if loaded {
            matches!(place, Place::Container(..))
                && since(table.checked_at) >= self.config.check_interval_ns
        } else {
            since(table.checked_at) >= self.config.miss_retry_ns
        };
        if due {
            let _ = self.refresh(&mut table, place, ts);
        }
        let mut checked = due;
        let is_missing = |table: &Watched, key: u64| {
            if key >> 32 == 0 {
                table.users.user(key as u32).is_none()
            } else {
                table.groups.group(key as u32).is_none()
            }
        };
        let keys = uids
            .iter()
            .map(|&uid| u64::from(uid))
            .chain(gids.iter().map(|&gid| 1 << 32 | u64::from(gid)));
        let mut missing = [0u64; 4];
        let mut n_missing = 0;
        for key in keys {
            if n_missing < missing.len() && is_missing(&table, key) {
                missing[n_missing] = key;
                n_missing += 1;
            }
        }
        let missing = &missing[..n_missing];
        let retry = missing
            .iter()
            .any(|key| since(table.misses.get(key).copied()) >= self.config.miss_retry_ns);
        if retry && !checked {
            let _ = self.refresh(&mut table, place, ts);
            checked = true;
        }
        if checked {
            if table.misses.len() + missing.len() > MAX_MISSES {
                table.misses.clear();
            }
            // Ids still missing after this check wait for the retry interval.
            for &key in missing {
                if is_missing(&table, key) {
                    table.misses.insert(key, ts);
                }
            }
        }
        match place {
            Place::Host => self.host = table,
            Place::Container(..) => {
                self.container_bytes += table.passwd_bytes + table.group_bytes;
                self.containers.insert(container.to_vec(), table);
            }
        }
    }

    /// Compares the stamps of `table`'s files with the files' and reads those that changed.
    fn refresh(&mut self, table: &mut Watched, place: Place, ts: u64) -> Result<(), UserDbError> {
        self.stats.checks += 1;
        table.checked_at = Some(ts);
        let result = match place {
            Place::Host => self.refresh_from(table, false, ""),
            Place::Container(pids, n) => {
                let mut result = Ok(());
                for pid in &pids[..n.max(1)] {
                    result = self.refresh_from(table, true, &format!("{pid}/root/"));
                    if result.is_ok() {
                        break;
                    }
                }
                result
            }
        };
        if result.is_err() {
            // The previous table is kept: a container process may have exited, a file may
            // be between an editor's unlink and rename.
            self.stats.read_errors += 1;
        }
        result
    }

    /// [`LiveUsers::refresh`] of the files below `prefix` of the host's file system or procfs.
    fn refresh_from(
        &mut self,
        table: &mut Watched,
        in_proc: bool,
        prefix: &str,
    ) -> Result<(), UserDbError> {
        let (fs, shown) = if in_proc {
            (&*self.proc_fs, "/proc/")
        } else {
            (&*self.host_fs, "/")
        };
        let passwd = format!("{prefix}etc/passwd");
        let group = format!("{prefix}etc/group");
        let max = if in_proc {
            self.config.max_container_file_bytes
        } else {
            self.config.max_file_bytes
        }
        .max(1);
        let mut result = Ok(());
        let mut changed = false;
        for (path, is_group) in [(passwd, false), (group, true)] {
            let known = if is_group { table.group } else { table.passwd };
            let fresh = fs.stamp(&path).and_then(|stamp| {
                if known == Some(stamp) {
                    Ok(None)
                } else {
                    fs.read_stamped(&path, max).map(Some)
                }
            });
            match fresh {
                Ok(None) => {}
                Ok(Some((stamp, data))) => {
                    self.stats.reads += 1;
                    let (data, cut) = complete_lines(&data, max);
                    self.stats.truncated_files += u64::from(cut);
                    if is_group {
                        let (groups, bad) = parse_group(data);
                        self.stats.malformed_lines += bad as u64;
                        table.groups = MemUserDb::new([], groups);
                        table.group = Some(stamp);
                        table.group_bytes = data.len();
                    } else {
                        let (users, bad) = parse_passwd(data);
                        self.stats.malformed_lines += bad as u64;
                        table.users = MemUserDb::new(users, []);
                        table.passwd = Some(stamp);
                        table.passwd_bytes = data.len();
                    }
                    changed = true;
                }
                Err(source) => {
                    if result.is_ok() {
                        result = Err(UserDbError::Read {
                            path: PathBuf::from(format!("{shown}{path}")),
                            source,
                        });
                    }
                }
            }
        }
        if changed {
            table.misses.clear();
        }
        result
    }
}

fn trim_cr(line: &[u8]) -> &[u8] {
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn parse_id(text: &[u8]) -> Option<u32> {
    if text.is_empty() || text.len() > 10 || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_passwd_and_group_skipping_malformed_lines() {
        let passwd = b"root:x:0:0:root:/root:/bin/bash\r\n\
            # comment\n\
            \n\
            daemon:x:1:1::/usr/sbin:/usr/sbin/nologin\n\
            broken line without colons\n\
            bad:x:notanumber:1::/:/bin/sh\n\
            toolong:x:1:1:::/:/bin/sh:extra\n\
            dup:x:0:0::/dup:/bin/sh\n\
            \xff\xfe:x:7:7::/:/bin/sh\n";
        let group = b"root:x:0:\nwheel:x:10:alice,bob\nnogid:x::\n";
        let db = FileUserDb::parse(passwd, group);
        assert_eq!(db.malformed_lines, 4, "broken, bad uid, toolong, nogid");
        assert_eq!(
            db.user(0).unwrap().name,
            b"root",
            "first entry wins over dup"
        );
        assert_eq!(db.user(0).unwrap().shell, b"/bin/bash", "CRLF trimmed");
        assert_eq!(db.user(1).unwrap().home, b"/usr/sbin");
        assert_eq!(
            db.user(7).unwrap().name,
            b"\xff\xfe",
            "non-UTF-8 names are kept as bytes"
        );
        assert_eq!(db.group(10).unwrap().name, b"wheel");
        assert!(db.user(4242).is_none());
        assert_eq!(db.n_users(), 3);
        assert_eq!(db.n_groups(), 2);
    }

    #[test]
    fn load_reports_missing_file_by_path() {
        let err = FileUserDb::load(
            Path::new("/nonexistent/passwd"),
            Path::new("/nonexistent/group"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("/nonexistent/passwd"), "{err}");
    }

    use crate::testutil::SharedFake;

    const ROOT: &str = "root:x:0:0:root:/root:/bin/bash\n";
    const ROOT_GROUP: &str = "root:x:0:\n";
    const MS: u64 = 1_000_000;
    /// Event time well after start.
    const T: u64 = 1_700_000_000_000_000_000;

    fn live(host: &SharedFake, procfs: &SharedFake) -> LiveUsers {
        LiveUsers::new(
            Box::new(host.clone()),
            Box::new(procfs.clone()),
            LiveUsersConfig::default(),
        )
    }

    fn name(live: &LiveUsers, container: &str, uid: u32) -> Option<String> {
        live.user(container.as_bytes(), uid)
            .map(|u| String::from_utf8_lossy(&u.name).into_owned())
    }

    #[test]
    fn live_host_user_added_after_start_resolves_once_the_file_changed() {
        let host = SharedFake::with(&[("etc/passwd", ROOT), ("etc/group", ROOT_GROUP)]);
        let mut users = live(&host, &SharedFake::default());
        assert_eq!(users.start_error().map(ToString::to_string), None);
        assert_eq!(host.reads(), 2, "both files read at start");
        assert_eq!(name(&users, "", 0).as_deref(), Some("root"));
        assert_eq!(name(&users, "", 101), None);

        // `useradd sshd`, then a process runs as it: the first sight of the new uid finds
        // the changed stamp and reads passwd (only the file that changed).
        host.set(
            "etc/passwd",
            &format!("{ROOT}sshd:x:101:65534::/run/sshd:/usr/sbin/nologin\n"),
        );
        users.resolve(b"", &[4242], &[101, 101], &[65534], T);
        assert_eq!(name(&users, "", 101).as_deref(), Some("sshd"));
        assert_eq!(users.user(b"", 101).unwrap().home, b"/run/sshd");
        assert_eq!(host.reads(), 3, "passwd read again, group unchanged");

        // Known ids and ticks within the interval cost no file access at all (the first
        // tick compares: start had no event time).
        users.tick(T);
        let stamps = host.stamps();
        for i in 0..1000 {
            users.tick(T + i);
            users.resolve(b"", &[4242], &[101, 0], &[0], T + i);
        }
        assert_eq!(host.stamps(), stamps, "no stat on the hot path");
        assert_eq!(host.reads(), 3);
    }

    #[test]
    fn live_host_missing_ids_are_retried_at_the_miss_pace_and_ticks_follow_renames() {
        let host = SharedFake::with(&[("etc/passwd", ROOT), ("etc/group", ROOT_GROUP)]);
        let mut users = live(&host, &SharedFake::default());
        users.tick(T);
        // A uid that has no entry: the first sighting compares stamps, later ones only after
        // the retry interval.
        users.resolve(b"", &[1], &[5000], &[], T);
        let stamps = host.stamps();
        for i in 1..100 {
            users.resolve(b"", &[1], &[5000], &[], T + i * MS / 2);
        }
        assert_eq!(
            host.stamps(),
            stamps,
            "misses within the retry interval: no stat"
        );
        host.set(
            "etc/passwd",
            &format!("{ROOT}late:x:5000:5000::/:/bin/sh\n"),
        );
        users.resolve(b"", &[1], &[5000], &[], T + 99 * MS);
        assert_eq!(
            name(&users, "", 5000),
            None,
            "still inside the retry interval"
        );
        users.resolve(b"", &[1], &[5000], &[], T + 101 * MS);
        assert_eq!(name(&users, "", 5000).as_deref(), Some("late"));

        // A renamed user (same uid) is seen at the next due tick, not before.
        host.set("etc/passwd", "admin:x:0:0:root:/root:/bin/bash\n");
        let due = T + LiveUsersConfig::default().check_interval_ns;
        users.tick(due - 1);
        assert_eq!(
            name(&users, "", 0).as_deref(),
            Some("root"),
            "before the interval"
        );
        let reads = host.reads();
        users.tick(due);
        assert_eq!(name(&users, "", 0).as_deref(), Some("admin"));
        assert_eq!(host.reads(), reads + 1);
        users.tick(due + LiveUsersConfig::default().check_interval_ns);
        assert_eq!(host.reads(), reads + 1, "unchanged stamps: not read again");
    }

    #[test]
    fn live_tables_skip_malformed_lines_and_keep_the_last_good_table_on_errors() {
        let host = SharedFake::with(&[
            (
                "etc/passwd",
                "root:x:0:0:root:/root:/bin/bash\nno colons\n::::\nx:x:-1:0::/:/bin/sh\n\
                 ok:x:7:7::/:/bin/sh\n",
            ),
            ("etc/group", "root:x:0:\nbroken\n"),
        ]);
        let mut users = live(&host, &SharedFake::default());
        assert_eq!(users.stats().malformed_lines, 4);
        assert_eq!(name(&users, "", 7).as_deref(), Some("ok"));
        assert_eq!(users.group(b"", 0).unwrap().name, b"root");
        // The file vanishes (between an editor's unlink and rename): the table stays.
        host.remove("etc/passwd");
        users.tick(T);
        assert_eq!(name(&users, "", 7).as_deref(), Some("ok"));
        assert_eq!(users.stats().read_errors, 1);
    }

    #[test]
    fn live_host_files_missing_at_start_are_reported_and_read_when_they_appear() {
        let host = SharedFake::default();
        let mut users = live(&host, &SharedFake::default());
        let err = users.start_error().expect("missing files are reported");
        assert!(err.to_string().contains("/etc/passwd"), "{err}");
        host.set("etc/passwd", ROOT);
        host.set("etc/group", ROOT_GROUP);
        users.resolve(b"", &[1], &[0], &[0], T);
        assert_eq!(name(&users, "", 0).as_deref(), Some("root"));
    }

    #[test]
    fn live_container_tables_are_the_containers_own() {
        let host = SharedFake::with(&[
            (
                "etc/passwd",
                "root:x:0:0:root:/root:/bin/bash\nbin:x:2:2:bin:/bin:/usr/sbin/nologin\n\
                 www-data:x:33:33::/var/www:/usr/sbin/nologin\n",
            ),
            ("etc/group", "root:x:0:\nbin:x:2:\n"),
        ]);
        let procfs = SharedFake::with(&[
            (
                "700/root/etc/passwd",
                "root:x:0:0:root:/root:/bin/ash\nctruser:x:2:2::/home/c:/bin/sh\n",
            ),
            ("700/root/etc/group", "root:x:0:\nctrgroup:x:2:\n"),
        ]);
        let mut users = live(&host, &procfs);
        let cid = b"3ad7b26ded6d";
        assert_eq!(
            users.user(cid, 2),
            None,
            "not read before a process is seen"
        );
        users.resolve(cid, &[700], &[2, 2], &[2], T);
        assert_eq!(name(&users, "3ad7b26ded6d", 2).as_deref(), Some("ctruser"));
        assert_eq!(users.group(cid, 2).unwrap().name, b"ctrgroup");
        assert_eq!(users.user(cid, 0).unwrap().shell, b"/bin/ash");
        assert_eq!(
            name(&users, "", 2).as_deref(),
            Some("bin"),
            "the host keeps its own"
        );
        assert_eq!(
            users.user(cid, 33),
            None,
            "a host-only uid does not leak in"
        );
        assert_eq!(users.stats().container_tables, 1);

        // The container's file changes; a later process (the first one gone) brings it in,
        // through an ancestor when it has exited itself.
        procfs.remove("700");
        procfs.set(
            "701/root/etc/passwd",
            "root:x:0:0:root:/root:/bin/ash\nctruser:x:2:2::/home/c:/bin/sh\nnew:x:9:9::/:/bin/sh\n",
        );
        procfs.set("701/root/etc/group", "root:x:0:\nctrgroup:x:2:\n");
        users.resolve(cid, &[702, 701], &[9, 9], &[2], T + MS);
        assert_eq!(name(&users, "3ad7b26ded6d", 9).as_deref(), Some("new"));

        // A container whose files cannot be read answers nothing (never the host's table).
        users.resolve(b"0123456789ab", &[999], &[0, 0], &[0], T);
        assert_eq!(users.user(b"0123456789ab", 0), None);
        assert_eq!(
            users.stats().read_errors,
            1,
            "only the unreadable container"
        );
    }

    #[test]
    fn live_container_links_are_refused() {
        let procfs = SharedFake::default();
        procfs
            .fake
            .lock()
            .unwrap()
            .link("700/root/etc/passwd", "/etc/passwd");
        let host = SharedFake::with(&[("etc/passwd", ROOT), ("etc/group", ROOT_GROUP)]);
        let mut users = live(&host, &procfs);
        users.resolve(b"3ad7b26ded6d", &[700], &[0, 0], &[0], T);
        assert_eq!(users.user(b"3ad7b26ded6d", 0), None);
    }

    #[test]
    fn live_files_are_read_up_to_the_bound_and_cut_lines_dropped() {
        let mut passwd = String::from(ROOT);
        for i in 0..100 {
            passwd.push_str(&format!(
                "user{i}:x:{}:100::/home/user{i}:/bin/sh\n",
                1000 + i
            ));
        }
        let host = SharedFake::with(&[("etc/passwd", &passwd), ("etc/group", ROOT_GROUP)]);
        let bound = ROOT.len() + 10 * "user0:x:1000:100::/home/user0:/bin/sh\n".len() + 5;
        let users = LiveUsers::new(
            Box::new(host.clone()),
            Box::new(SharedFake::default()),
            LiveUsersConfig {
                max_file_bytes: bound,
                ..LiveUsersConfig::default()
            },
        );
        assert_eq!(users.stats().truncated_files, 1);
        assert_eq!(
            users.stats().malformed_lines,
            0,
            "the cut line is dropped, not parsed"
        );
        assert_eq!(name(&users, "", 1009).as_deref(), Some("user9"));
        assert_eq!(name(&users, "", 1010), None);
        assert_eq!(complete_lines(b"a\nb", 3), (&b"a\n"[..], true));
        assert_eq!(complete_lines(b"abc", 3), (&b""[..], true));
        assert_eq!(complete_lines(b"a\nb", 4), (&b"a\nb"[..], false));
    }

    #[test]
    fn live_container_tables_are_bounded_in_size_and_number() {
        let host = SharedFake::with(&[("etc/passwd", ROOT), ("etc/group", ROOT_GROUP)]);
        let procfs = SharedFake::default();
        let big: String = (0..100)
            .map(|i| format!("u{i}:x:{i}:0::/:/bin/sh\n"))
            .collect();
        for pid in 1..=3 {
            procfs.set(&format!("{pid}/root/etc/passwd"), &big);
            procfs.set(&format!("{pid}/root/etc/group"), ROOT_GROUP);
        }
        let mut users = LiveUsers::new(
            Box::new(host),
            Box::new(procfs),
            LiveUsersConfig {
                max_container_file_bytes: 200,
                max_container_bytes: 300,
                ..LiveUsersConfig::default()
            },
        );
        users.resolve(b"c1", &[1], &[0], &[0], T);
        assert_eq!(
            users.stats().truncated_files,
            1,
            "the container's passwd is cut"
        );
        assert_eq!(name(&users, "c1", 0).as_deref(), Some("u0"));
        assert_eq!(name(&users, "c1", 99), None, "beyond the bound");
        users.resolve(b"c2", &[2], &[0], &[0], T);
        assert_eq!(users.stats().container_tables, 2);
        // Over the byte budget: the tables are dropped, to be read again when needed.
        users.resolve(b"c3", &[3], &[0], &[0], T);
        assert_eq!(users.stats().container_tables, 1);
        assert_eq!(users.user(b"c1", 0), None);
        assert_eq!(name(&users, "c3", 0).as_deref(), Some("u0"));
        users.resolve(b"c1", &[1], &[0], &[0], T + MS);
        assert_eq!(name(&users, "c1", 0).as_deref(), Some("u0"), "read again");
    }

    #[test]
    fn real_proc_stamps_refuse_links_below_a_process_root() {
        let dir = std::env::temp_dir().join(format!("vigil-users-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("12/root/etc")).unwrap();
        std::fs::create_dir_all(dir.join("13/root")).unwrap();
        std::fs::write(dir.join("outside"), ROOT).unwrap();
        std::fs::write(dir.join("12/root/etc/passwd"), ROOT).unwrap();
        std::os::unix::fs::symlink(dir.join("outside"), dir.join("12/root/etc/group")).unwrap();
        std::os::unix::fs::symlink(dir.join("12/root/etc"), dir.join("13/root/etc")).unwrap();
        let fs = RealProc { root: dir.clone() };
        let (stamp, data) = fs.read_stamped("12/root/etc/passwd", 1 << 20).unwrap();
        assert_eq!(data, ROOT.as_bytes());
        assert_eq!(stamp.size, ROOT.len() as u64);
        assert_eq!(fs.stamp("12/root/etc/passwd").unwrap(), stamp);
        assert!(fs.stamp("12/root/etc/group").is_err(), "a linked file");
        assert!(fs.read_stamped("12/root/etc/group", 100).is_err());
        assert!(
            fs.stamp("13/root/etc/passwd").is_err(),
            "a linked directory"
        );
        assert!(fs.stamp("12/root/etc/../etc/passwd").is_err(), "no `..`");
        assert!(fs.stamp("12/root/etc").is_err(), "not a regular file");
        // Outside a process root, links are followed (the host's own files).
        std::os::unix::fs::symlink(dir.join("outside"), dir.join("hostlink")).unwrap();
        assert_eq!(fs.stamp("hostlink").unwrap().size, ROOT.len() as u64);
        std::fs::write(dir.join("12/root/etc/passwd"), "root:x:0:0::/:/bin/sh\n").unwrap();
        assert_ne!(
            fs.stamp("12/root/etc/passwd").unwrap(),
            stamp,
            "a rewrite changes it"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn huge_ids_are_rejected_not_wrapped() {
        let db = FileUserDb::parse(b"big:x:99999999999:0::/:/bin/sh\n", b"");
        assert_eq!(db.malformed_lines, 1);
    }
}

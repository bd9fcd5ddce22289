//! What `/proc` tells about a stopped tracee: the starting snapshot and the process image an
//! `execve` produced. Reads go through `vigil_procfs` restricted to the processes asked
//! for, so the snapshot has the same shape as the eBPF driver's host bootstrap.

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

use vigil_event::table::exe_flags;
use vigil_event::{Event, EventType, Param, Snapshot, ThreadInfo};
use vigil_procfs::{read_snapshot, ProcSource, RealProc, SnapshotOptions};

/// A procfs whose root lists only the chosen processes. Host-wide files (`stat` for the boot
/// time, the host name) are read once per Vigil process, not on every exec; with
/// `leader_only`, a process's task list is just its leader (right after an exec, which leaves
/// one thread).
struct Only {
    inner: RealProc,
    pids: Vec<i64>,
    leader_only: bool,
}

impl ProcSource for Only {
    fn list(&self, dir: &str) -> io::Result<Vec<i64>> {
        if dir.is_empty() {
            return Ok(self.pids.clone());
        }
        if self.leader_only {
            if let Some(pid) = dir
                .strip_suffix("/task")
                .and_then(|p| p.parse::<i64>().ok())
                .filter(|p| self.pids.contains(p))
            {
                return Ok(vec![pid]);
            }
        }
        self.inner.list(dir)
    }
    fn read(&self, path: &str, max: usize) -> io::Result<Vec<u8>> {
        static STAT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        static HOSTNAME: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
        let cache = match path {
            "stat" => &STAT,
            "sys/kernel/hostname" => &HOSTNAME,
            _ => return self.inner.read(path, max),
        };
        if let Some(v) = cache.get() {
            return Ok(v.clone());
        }
        let v = self.inner.read(path, max)?;
        Ok(cache.get_or_init(|| v).clone())
    }
    fn read_link(&self, path: &str) -> io::Result<Vec<u8>> {
        self.inner.read_link(path)
    }
}

/// A snapshot of `pids` (any order; vanished ones are skipped).
pub fn snapshot_of(pids: &[i64], read_fds: bool) -> Snapshot {
    snapshot_from(
        Only {
            inner: RealProc::default(),
            pids: pids.to_vec(),
            leader_only: false,
        },
        read_fds,
    )
}

fn snapshot_from(src: Only, read_fds: bool) -> Snapshot {
    let opts = SnapshotOptions {
        exclude_pid: None,
        read_fds,
        ..SnapshotOptions::default()
    };
    match read_snapshot(&src, &opts) {
        Ok((snap, _)) => snap,
        Err(_) => Snapshot::default(),
    }
}

/// `pid`, its parent, grandparent … up to pid 1, read from `/proc/<pid>/stat`.
pub fn ancestry(pid: i64) -> Vec<i64> {
    let mut out = vec![pid];
    let mut cur = pid;
    while cur > 1 && out.len() < 64 {
        let Ok(stat) = std::fs::read(format!("/proc/{cur}/stat")) else {
            break;
        };
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses; ppid follows the
        // last `)`.
        let Some(close) = stat.iter().rposition(|&b| b == b')') else {
            break;
        };
        let rest = String::from_utf8_lossy(&stat[close + 1..]).into_owned();
        let Some(ppid) = rest
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse::<i64>().ok())
        else {
            break;
        };
        if ppid <= 0 || out.contains(&ppid) {
            break;
        }
        out.push(ppid);
        cur = ppid;
    }
    out
}

/// The thread-group id of `tid`, from `/proc/<tid>/status`.
pub fn tgid_of(tid: i32) -> Option<i32> {
    tgid_ppid(tid).map(|(tgid, _)| tgid)
}

/// `(Tgid, PPid)` of thread `tid` (for a thread, `PPid` is its process's parent).
pub fn tgid_ppid(tid: i32) -> Option<(i32, i32)> {
    let status = vigil_procfs::status_of(i64::from(tid))?;
    Some((
        i32::try_from(status.tgid?).ok()?,
        i32::try_from(status.ppid?).ok()?,
    ))
}

/// Whether thread `tid` lives in Vigil's own pid namespace (then its ids there are the ones
/// Vigil sees): one `readlink`, compared with Vigil's own link read once. `false` when it
/// cannot be told.
pub fn in_vigil_pid_ns(tid: i64) -> bool {
    static OURS: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    let ours = OURS.get_or_init(|| std::fs::read_link("/proc/self/ns/pid").ok());
    match (ours, std::fs::read_link(format!("/proc/{tid}/ns/pid"))) {
        (Some(ours), Ok(theirs)) => *ours == theirs,
        _ => false,
    }
}

/// The ids of thread `tid` in its innermost pid namespace, `(vtid, vpid)`, from the last
/// numbers of `NSpid:` and `NStgid:` in `/proc/<tid>/status` (the global ids when the thread
/// is in the initial namespace).
pub fn ns_ids(tid: i64) -> Option<(Param, Param)> {
    ns_ids_of(&vigil_procfs::status_of(tid)?)
}

fn ns_ids_of(status: &vigil_procfs::Status) -> Option<(Param, Param)> {
    Some((Param::Int(status.vtid?), Param::Int(status.vpid?)))
}

/// The completed `execve`/`execveat` event of process `pid` (now running its new image),
/// built from `/proc`. `head` holds the entry arguments if they were read at the seccomp
/// stop; otherwise the filename is the new executable's path.
pub fn exec_event(pid: i32, etype: EventType, head: Option<Vec<Param>>) -> Event {
    // Called at the exec event (one thread left) or for a failed exec (the caller's image;
    // only its leader's data is used).
    let snap = snapshot_from(
        Only {
            inner: RealProc::default(),
            pids: vec![i64::from(pid)],
            leader_only: true,
        },
        false,
    );
    let leader = snap
        .threads
        .into_iter()
        .find(|t| t.tid == i64::from(pid))
        .unwrap_or_else(|| ThreadInfo {
            tid: i64::from(pid),
            pid: i64::from(pid),
            ..ThreadInfo::default()
        });
    let spec = etype.spec();
    let n_head = spec.params.len() - 23;
    let mut params = match head {
        Some(mut h) => {
            h.resize(n_head, Param::None);
            h
        }
        None => {
            let mut h = vec![Param::None; n_head];
            if let Some(i) = spec.param_index("filename") {
                h[i] = Param::Bytes(leader.exepath.clone());
            }
            h
        }
    };
    let (mut flags, mut ino, mut ctime, mut mtime) = (0u64, 0u64, 0u64, 0u64);
    if leader.exe_from_memfd {
        flags |= exe_flags::FROM_MEMFD;
    }
    if let Ok(meta) = std::fs::metadata(format!("/proc/{pid}/exe")) {
        ino = meta.ino();
        let ns = |s: i64, n: i64| {
            u64::try_from(s)
                .unwrap_or(0)
                .saturating_mul(1_000_000_000)
                .saturating_add(u64::try_from(n).unwrap_or(0))
        };
        ctime = ns(meta.ctime(), meta.ctime_nsec());
        mtime = ns(meta.mtime(), meta.mtime_nsec());
        let mode = meta.permissions().mode();
        let writable = if leader.euid == 0 {
            true
        } else if meta.uid() == leader.euid {
            mode & 0o200 != 0
        } else if meta.gid() == leader.egid {
            mode & 0o020 != 0
        } else {
            mode & 0o002 != 0
        };
        if writable {
            flags |= exe_flags::WRITABLE;
        }
    }
    let t = leader;
    params.extend([
        Param::Bytes(t.exe),
        Param::List(t.args),
        Param::List(t.env),
        Param::Bytes(t.comm),
        Param::Bytes(t.exepath),
        Param::Bytes(t.cwd),
        Param::Int(t.tid),
        Param::Int(t.pid),
        Param::Int(t.ppid),
        Param::Uint(t.uid.into()),
        Param::Uint(t.gid.into()),
        Param::Uint(t.euid.into()),
        Param::Uint(t.egid.into()),
        Param::Uint(t.loginuid.into()),
        Param::Uint(t.tty.into()),
        Param::Uint(t.cap_inheritable),
        Param::Uint(t.cap_permitted),
        Param::Uint(t.cap_effective),
        Param::Bytes(t.cgroup),
        Param::Uint(flags),
        Param::Uint(ino),
        Param::Uint(ctime),
        Param::Uint(mtime),
    ]);
    Event {
        num: 0,
        ts: crate::decode::now_ns(),
        tid: i64::from(pid),
        pid: i64::from(pid),
        etype,
        res: 0,
        params,
        truncated: 0,
        cpu: None,
    }
}

/// The lowest descriptor number free in process `pid`: what a successful open would return.
pub fn lowest_free_fd(pid: i32) -> i64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return 0;
    };
    let mut used: Vec<i64> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    used.sort_unstable();
    let mut want = 0;
    for fd in used {
        if fd == want {
            want += 1;
        } else if fd > want {
            break;
        }
    }
    want
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_reads() {
        let me = i64::from(std::process::id());
        let chain = ancestry(me);
        assert_eq!(chain[0], me);
        assert!(chain.len() >= 2, "a test process has a parent: {chain:?}");
        assert_eq!(tgid_of(me as i32), Some(me as i32));
        let snap = snapshot_of(&[me], false);
        assert!(snap.threads.iter().any(|t| t.tid == me && t.pid == me));
        // fds 0..2 are normally open; the answer is a free number in any case.
        let free = lowest_free_fd(me as i32);
        assert!(std::fs::read_link(format!("/proc/{me}/fd/{free}")).is_err());
    }

    #[test]
    fn namespace_ids_are_the_innermost() {
        let status = "Name:\tx\nTgid:\t900\nPid:\t901\nNStgid:\t900\t1\nNSpid:\t901\t2\n";
        let ids = |text: &str| ns_ids_of(&vigil_procfs::parse_status(text.as_bytes()));
        assert_eq!(ids(status), Some((Param::Int(2), Param::Int(1))));
        assert_eq!(ids("Name:\tx\n"), None);
        let me = i64::from(std::process::id());
        let (vtid, vpid) = ns_ids(me).unwrap();
        assert!(in_vigil_pid_ns(me), "a test runs in Vigil's own namespace");
        assert_eq!((&vtid, &vpid), (&Param::Int(me), &Param::Int(me)));
        assert!(matches!(vtid, Param::Int(n) if n > 0), "{vtid:?}");
        assert!(matches!(vpid, Param::Int(n) if n > 0), "{vpid:?}");
    }

    #[test]
    fn exec_event_matches_the_schema() {
        let me = std::process::id() as i32;
        let etype = vigil_event::table::by_name("execve").unwrap();
        let e = exec_event(me, etype, None);
        assert_eq!(e.params.len(), etype.spec().params.len());
        let Param::Bytes(exepath) = e.param_by_name("trusted_exepath") else {
            panic!("no exepath");
        };
        assert!(exepath.starts_with(b"/"), "{exepath:?}");
        assert_eq!(
            e.param_by_name("filename"),
            e.param_by_name("trusted_exepath")
        );
        assert_eq!(e.param_by_name("pid"), &Param::Int(i64::from(me)));
    }
}

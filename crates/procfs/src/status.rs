//! `/proc/PID/status`, read one way for everyone: the snapshot's threads, the drivers'
//! privilege checks, the tracer's thread count, and whether a workload started from here keeps
//! this process's container identity ([`identity_is_fixed`]).

use std::io;

use crate::parse_num;

/// The fields of `/proc/<pid>/status` Vigil uses. A field the file lacks keeps its default
/// (`None`, or 0).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Status {
    pub tgid: Option<i64>,
    pub ppid: Option<i64>,
    /// `TracerPid`: the pid tracing this process (0: none).
    pub tracer_pid: Option<i64>,
    /// Last entries of `NSpid` / `NStgid` / `NSpgid`: the ids in the innermost pid namespace.
    pub vtid: Option<i64>,
    pub vpid: Option<i64>,
    pub vpgid: Option<i64>,
    pub uid: u32,
    pub euid: u32,
    pub gid: u32,
    pub egid: u32,
    /// Whether the file has `Uid:` and `Gid:` lines (else the ids above are defaults).
    pub has_ids: bool,
    pub cap_inh: u64,
    pub cap_prm: u64,
    pub cap_eff: u64,
    /// `Threads`: the number of threads of the process.
    pub threads: Option<usize>,
    /// `VmRSS` and `VmHWM` (resident set now and at its peak), in KiB.
    pub vm_rss_kib: Option<u64>,
    pub vm_hwm_kib: Option<u64>,
}

/// Parses the text of a `status` file; lines it does not know or cannot read are skipped.
pub fn parse_status(raw: &[u8]) -> Status {
    let mut st = Status::default();
    for line in raw.split(|&b| b == b'\n') {
        let Some(colon) = memchr::memchr(b':', line) else {
            continue;
        };
        let (key, value) = (&line[..colon], &line[colon + 1..]);
        let mut words = value
            .split(|b| b.is_ascii_whitespace())
            .filter(|w| !w.is_empty());
        let last = || {
            value
                .split(|b| b.is_ascii_whitespace())
                .rfind(|w| !w.is_empty())
                .and_then(parse_num::<i64>)
        };
        let hex = |v: &[u8]| {
            std::str::from_utf8(v)
                .ok()
                .and_then(|s| u64::from_str_radix(s.trim(), 16).ok())
                .unwrap_or(0)
        };
        match key {
            b"Tgid" => st.tgid = parse_num(value),
            b"PPid" => st.ppid = parse_num(value),
            b"TracerPid" => st.tracer_pid = parse_num(value),
            b"NSpid" => st.vtid = last(),
            b"NStgid" => st.vpid = last(),
            b"NSpgid" => st.vpgid = last(),
            b"Uid" => {
                st.uid = words.next().and_then(parse_num).unwrap_or(0);
                st.euid = words.next().and_then(parse_num).unwrap_or(0);
                st.has_ids = true;
            }
            b"Gid" => {
                st.gid = words.next().and_then(parse_num).unwrap_or(0);
                st.egid = words.next().and_then(parse_num).unwrap_or(0);
            }
            b"CapInh" => st.cap_inh = hex(value),
            b"CapPrm" => st.cap_prm = hex(value),
            b"CapEff" => st.cap_eff = hex(value),
            b"Threads" => st.threads = parse_num(value),
            b"VmRSS" => st.vm_rss_kib = kib(value),
            b"VmHWM" => st.vm_hwm_kib = kib(value),
            _ => {}
        }
    }
    st
}

/// A `N kB` value, in KiB.
fn kib(value: &[u8]) -> Option<u64> {
    let text = std::str::from_utf8(value).ok()?.trim();
    text.strip_suffix("kB").unwrap_or(text).trim().parse().ok()
}

/// This process's status (`/proc/self/status`).
pub fn own_status() -> io::Result<Status> {
    std::fs::read("/proc/self/status").map(|raw| parse_status(&raw))
}

/// The status of thread or process `tid` (`/proc/TID/status`), `None` when it cannot be read.
pub fn status_of(tid: i64) -> Option<Status> {
    std::fs::read(format!("/proc/{tid}/status"))
        .ok()
        .map(|raw| parse_status(&raw))
}

const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_SYS_ADMIN: u32 = 21;

/// Whether a workload started from here keeps this process's container identity for the
/// whole run: it cannot move itself to another cgroup (that needs a writable cgroup mount
/// and root's file access, or `CAP_SYS_ADMIN` to mount one) — as in a container of a Fargate
/// task, or for an unprivileged user. `Err` says why not.
pub fn identity_is_fixed() -> Result<(), &'static str> {
    let status = own_status().ok();
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    identity_fixed(status.as_ref(), &mountinfo)
}

/// [`identity_is_fixed`] for this status (`None`: unreadable, assumed all-powerful) and
/// mount table.
fn identity_fixed(status: Option<&Status>, mountinfo: &str) -> Result<(), &'static str> {
    let cap_eff = status.map_or(u64::MAX, |s| s.cap_eff);
    if cap_eff & (1 << CAP_SYS_ADMIN) != 0 {
        return Err("it may mount a cgroup filesystem (CAP_SYS_ADMIN)");
    }
    let root_like =
        status.is_some_and(|s| s.has_ids && s.euid == 0) || cap_eff & (1 << CAP_DAC_OVERRIDE) != 0;
    // mountinfo: `… mount-point options … - fstype source super-options`.
    let writable_cgroup = mountinfo.lines().any(|line| {
        let Some((left, right)) = line.split_once(" - ") else {
            return false;
        };
        let fstype = right.split_whitespace().next().unwrap_or("");
        let options = left.split_whitespace().nth(5).unwrap_or("");
        matches!(fstype, "cgroup" | "cgroup2") && options.split(',').any(|o| o == "rw")
    });
    if writable_cgroup && root_like {
        return Err("it may move itself to another cgroup (a writable cgroup mount, as root)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CGROUP_RW: &str = "35 24 0:30 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 \
                             - cgroup2 cgroup2 rw,nsdelegate\n";
    const CGROUP_RO: &str = "35 24 0:30 / /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - \
                             cgroup2 cgroup2 ro\n";

    fn status(text: &str) -> Status {
        parse_status(text.as_bytes())
    }

    #[test]
    fn the_fields_of_a_status_file() {
        let st = status(
            "Name:\tsh\nTgid:\t7\nPPid:\t1\nTracerPid:\t42\nUid:\t1000\t0\t0\t0\n\
             Gid:\t5\t6\t6\t6\nThreads:\t3\nCapEff:\t0000000000200000\n\
             VmHWM:\t    2048 kB\nVmRSS:\t  1024 kB\n",
        );
        assert_eq!((st.vm_rss_kib, st.vm_hwm_kib), (Some(1024), Some(2048)));
        assert_eq!(
            (st.tgid, st.ppid, st.tracer_pid, st.threads),
            (Some(7), Some(1), Some(42), Some(3))
        );
        assert_eq!((st.uid, st.euid, st.gid, st.egid), (1000, 0, 5, 6));
        assert!(st.has_ids);
        assert_eq!(st.cap_eff, 1 << CAP_SYS_ADMIN);
        assert!(!status("Name:\tsh\n").has_ids);
    }

    #[test]
    fn identity_is_fixed_without_sys_admin_or_a_writable_cgroup_as_root() {
        let root = status("Uid:\t0\t0\t0\t0\nCapEff:\t0000000000000000\n");
        let user = status("Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000000\n");
        let admin = status("Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000200000\n");
        let dac = status("Uid:\t1000\t1000\t1000\t1000\nCapEff:\t0000000000000002\n");
        assert!(identity_fixed(Some(&admin), "")
            .unwrap_err()
            .contains("CAP_SYS_ADMIN"));
        assert!(
            identity_fixed(None, "").is_err(),
            "unreadable: assume the worst"
        );
        assert!(identity_fixed(Some(&root), CGROUP_RW)
            .unwrap_err()
            .contains("another cgroup"));
        assert!(identity_fixed(Some(&dac), CGROUP_RW).is_err());
        assert_eq!(identity_fixed(Some(&root), CGROUP_RO), Ok(()));
        assert_eq!(identity_fixed(Some(&user), CGROUP_RW), Ok(()));
    }

    #[test]
    fn this_process_has_a_status() {
        let st = own_status().expect("/proc/self/status");
        assert_eq!(st.tgid, Some(i64::from(std::process::id())));
        assert!(st.has_ids && st.threads.is_some_and(|n| n >= 1));
    }
}

//! What the reports state about the machine, and `/proc` readers: per-process CPU ticks, memory
//! high-water marks, processes by name.

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use serde::Serialize;

/// The machine a bench ran on.
#[derive(Clone, Debug, Serialize)]
pub struct SystemInfo {
    pub cpu_model: String,
    pub cores: usize,
    pub ram_mib: u64,
    pub kernel: String,
    pub audit: AuditState,
}

/// Whether Linux audit is active. The signals, in the order they are trusted: `auditctl -s`
/// (`enabled 1|2`) when the tool exists; else a running `auditd` process. The `audit=` kernel
/// parameter is recorded as given. `kauditd` is not a signal: the kernel thread exists whenever
/// audit is compiled in.
#[derive(Clone, Debug, Serialize)]
pub struct AuditState {
    pub active: Option<bool>,
    pub auditd_running: bool,
    pub auditctl_enabled: Option<u32>,
    pub kernel_param: Option<String>,
    pub how: String,
}

impl SystemInfo {
    pub fn collect() -> SystemInfo {
        let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpuinfo
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                (k.trim() == "model name").then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| "unknown".into());
        let cores = cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count()
            .max(1);
        let ram_mib = fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| status_kib(&m, "MemTotal:"))
            .map_or(0, |k| k / 1024);
        let release = read_trim("/proc/sys/kernel/osrelease");
        let version = read_trim("/proc/sys/kernel/version");
        SystemInfo {
            cpu_model,
            cores,
            ram_mib,
            kernel: format!("{release} {version}").trim().to_string(),
            audit: AuditState::collect(),
        }
    }

    /// The report's Markdown lines about the machine.
    pub fn markdown(&self) -> String {
        let audit = match self.audit.active {
            Some(true) => "active",
            Some(false) => "not active",
            None => "unknown",
        };
        format!(
            "- machine: {} × `{}`, {} MiB RAM\n- kernel: `{}`\n- audit: **{audit}** ({})\n",
            self.cores, self.cpu_model, self.ram_mib, self.kernel, self.audit.how
        )
    }
}

impl AuditState {
    fn collect() -> AuditState {
        let auditd_running = !pids_by_comm("auditd").is_empty();
        let kernel_param = read_trim("/proc/cmdline")
            .split_whitespace()
            .find_map(|w| w.strip_prefix("audit=").map(str::to_string));
        let auditctl_enabled = Command::new("auditctl")
            .arg("-s")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| parse_auditctl_enabled(&String::from_utf8_lossy(&o.stdout)));
        let (active, source) = match auditctl_enabled {
            Some(e) => (Some(e != 0), format!("auditctl -s: enabled {e}")),
            None => (
                Some(auditd_running),
                format!(
                    "no auditctl; auditd process {}",
                    if auditd_running { "running" } else { "absent" }
                ),
            ),
        };
        let how = format!(
            "{source}; kernel audit= {}",
            kernel_param.as_deref().unwrap_or("not set")
        );
        AuditState {
            active,
            auditd_running,
            auditctl_enabled,
            kernel_param,
            how,
        }
    }
}

/// The `enabled N` value of `auditctl -s` output.
pub fn parse_auditctl_enabled(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("enabled ")?.trim().parse().ok())
}

fn read_trim(path: &str) -> String {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}

/// A `Key:  N kB` value of `/proc/meminfo`, in KiB.
pub fn status_kib(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// The fields of `/proc/<pid>/stat` the benches use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProcStat {
    pub ppid: i32,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
    /// cutime + cstime (waited-for children), in clock ticks.
    pub children_ticks: u64,
    pub rss_pages: u64,
    pub vsize: u64,
}

/// Parses a `/proc/<pid>/stat` line: (comm, fields). The comm may hold spaces and parentheses,
/// so the fields start after the last `)`.
pub fn parse_stat(text: &str) -> Option<(String, ProcStat)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let fields: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    // fields[0] is the state (field 3 of proc(5)); field N is fields[N - 3].
    let num = |n: usize| -> Option<u64> { fields.get(n - 3)?.parse().ok() };
    let ppid: i32 = fields.get(4 - 3)?.parse().ok()?;
    Some((
        comm,
        ProcStat {
            ppid,
            cpu_ticks: num(14)? + num(15)?,
            children_ticks: num(16)?.saturating_add(num(17)?),
            vsize: num(23)?,
            rss_pages: num(24)?,
        },
    ))
}

/// Processes named `comm` (all with `None`), this one excepted (`vigil watch` leaves its
/// tracepoints to a background releaser of its own name, which detaches them after the agent
/// has exited).
pub fn processes_named(comm: Option<&str>) -> Vec<i32> {
    let me = std::process::id() as i32;
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|&pid| {
            pid != me && comm.is_none_or(|want| proc_stat(pid).is_some_and(|(c, _)| c == want))
        })
        .collect()
}

/// `/proc/<pid>/stat` of one process.
pub fn proc_stat(pid: i32) -> Option<(String, ProcStat)> {
    parse_stat(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// `VmHWM` (peak RSS) of a process, in KiB.
pub fn vm_hwm_kib(pid: i32) -> Option<u64> {
    vigil_procfs::status_of(i64::from(pid))?.vm_hwm_kib
}

/// `VmRSS` of a process, in KiB.
pub fn vm_rss_kib(pid: i32) -> Option<u64> {
    vigil_procfs::status_of(i64::from(pid))?.vm_rss_kib
}

/// Every process: (pid, comm, stat).
pub fn all_processes() -> Vec<(i32, String, ProcStat)> {
    let Ok(dir) = fs::read_dir(Path::new("/proc")) else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let (comm, stat) = proc_stat(pid)?;
        Some((pid, comm, stat))
    })
    .collect()
}

/// Pids whose comm is exactly `name`.
pub fn pids_by_comm(name: &str) -> Vec<i32> {
    all_processes()
        .into_iter()
        .filter(|(_, comm, _)| comm == name)
        .map(|(pid, _, _)| pid)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_stat_with_odd_comm() {
        let line = "1234 (my (odd) prog) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    7 5 2 3 20 0 1 0 100 1048576 300 18446744073709551615";
        let (comm, s) = parse_stat(line).expect("parses");
        assert_eq!(comm, "my (odd) prog", "comm with parentheses");
        assert_eq!(s.ppid, 1, "ppid");
        assert_eq!(s.cpu_ticks, 12, "utime + stime");
        assert_eq!(s.children_ticks, 5, "cutime + cstime");
        assert_eq!(s.vsize, 1_048_576, "vsize");
        assert_eq!(s.rss_pages, 300, "rss");
        assert_eq!(parse_stat("garbage"), None, "garbage");
        assert_eq!(parse_stat("1 (x) S"), None, "truncated");
    }

    #[test]
    fn processes_are_found_by_name() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep");
        let pid = child.id() as i32;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while !processes_named(Some("sleep")).contains(&pid) {
            assert!(std::time::Instant::now() < deadline, "{pid} never seen");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(!processes_named(Some("no-such-comm")).contains(&pid));
        assert!(processes_named(None).contains(&pid));
        let me = std::process::id() as i32;
        let (my_comm, _) = proc_stat(me).expect("own stat");
        assert!(
            !processes_named(Some(&my_comm)).contains(&me),
            "this process is left out"
        );
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn own_process_is_readable() {
        let pid = std::process::id() as i32;
        let (_, stat) = proc_stat(pid).expect("own stat");
        assert!(stat.ppid > 0, "has a parent");
        assert!(vm_hwm_kib(pid).unwrap_or(0) > 0, "VmHWM");
        assert!(vm_rss_kib(pid).unwrap_or(0) > 0, "VmRSS");
    }

    #[test]
    fn status_and_auditctl_parsing() {
        assert_eq!(
            status_kib("VmHWM:\t  2048 kB\n", "VmHWM:"),
            Some(2048),
            "kib"
        );
        assert_eq!(status_kib("VmRSS: 1 kB\n", "VmHWM:"), None, "missing");
        assert_eq!(
            parse_auditctl_enabled("enabled 1\nfailure 1\npid 99\n"),
            Some(1),
            "enabled"
        );
        assert_eq!(parse_auditctl_enabled("nothing"), None, "absent");
    }

    #[test]
    fn system_info_has_content() {
        let info = SystemInfo::collect();
        assert!(info.cores >= 1, "cores");
        assert!(!info.kernel.is_empty(), "kernel");
        assert!(info.markdown().contains("audit"), "markdown names audit");
    }
}

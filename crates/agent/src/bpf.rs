//! Falco's `metrics.libbpf_stats_enabled`: statistics of each BPF program this process holds,
//! as `bpftool prog show` prints them: how many times it ran and the time spent in it. Read
//! from `/proc/self/fdinfo` of every BPF program descriptor (no system call, nothing to load).
//!
//! As in Falco, the kernel counts only while BPF statistics are enabled (kernel ≥ 5.1, the
//! sysctl `kernel.bpf_stats_enabled = 1`, or a BPF_ENABLE_STATS descriptor held by some
//! process); otherwise the counters read 0. The fdinfo of a program carries no name, so a
//! program is identified by its kernel id and tag (the ids `bpftool prog show` lists).

use std::fs;
use std::path::Path;

use vigil_output::metrics::names;
use vigil_output::Metrics;

/// One BPF program's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramStats {
    /// The kernel's program id.
    pub id: u32,
    /// The program's tag (hash of its instructions), as hex.
    pub tag: String,
    /// `BPF_PROG_TYPE_*` number.
    pub prog_type: u32,
    /// Runs counted while statistics were enabled.
    pub run_cnt: u64,
    /// Nanoseconds spent in the program while statistics were enabled.
    pub run_time_ns: u64,
}

impl ProgramStats {
    /// The program type's name (`tracepoint`, `raw_tracepoint`, …), or its number.
    pub fn type_name(&self) -> String {
        let name = match self.prog_type {
            1 => "socket_filter",
            2 => "kprobe",
            5 => "tracepoint",
            7 => "xdp",
            8 => "perf_event",
            17 => "raw_tracepoint",
            24 => "raw_tracepoint_writable",
            26 => "tracing",
            29 => "lsm",
            _ => return self.prog_type.to_string(),
        };
        name.to_owned()
    }
}

/// The statistics in the fdinfo text of a BPF program descriptor; `None` for any other
/// descriptor (maps and links carry no `run_cnt`).
pub fn parse_fdinfo(text: &str) -> Option<ProgramStats> {
    let mut stats = ProgramStats::default();
    let (mut id, mut runs) = (false, false);
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "prog_id" => {
                stats.id = value.parse().ok()?;
                id = true;
            }
            "prog_tag" => stats.tag = value.to_owned(),
            "prog_type" => stats.prog_type = value.parse().ok()?,
            "run_cnt" => {
                stats.run_cnt = value.parse().ok()?;
                runs = true;
            }
            "run_time_ns" => stats.run_time_ns = value.parse().ok()?,
            // A link names the program it runs but has no counters of its own.
            "link_type" => return None,
            _ => {}
        }
    }
    (id && runs).then_some(stats)
}

/// The BPF programs held by the process whose `/proc/PID` is `proc_dir`, by id (a program
/// open through several descriptors is listed once). Unreadable entries are skipped.
pub fn programs_in(proc_dir: &Path) -> Vec<ProgramStats> {
    let Ok(entries) = fs::read_dir(proc_dir.join("fd")) else {
        return Vec::new();
    };
    let mut programs: Vec<ProgramStats> = Vec::new();
    for entry in entries.flatten() {
        let is_prog = fs::read_link(entry.path())
            .is_ok_and(|target| target.as_os_str() == "anon_inode:bpf-prog");
        if !is_prog {
            continue;
        }
        let info = proc_dir.join("fdinfo").join(entry.file_name());
        if let Some(stats) = fs::read_to_string(info)
            .ok()
            .as_deref()
            .and_then(parse_fdinfo)
        {
            if !programs.iter().any(|p| p.id == stats.id) {
                programs.push(stats);
            }
        }
    }
    programs.sort_by_key(|p| p.id);
    programs
}

/// The BPF programs this process holds.
pub fn own_programs() -> Vec<ProgramStats> {
    programs_in(Path::new("/proc/self"))
}

/// Copies `programs`' counters into the registry: `vigil_bpf_program_runs_total` and
/// `vigil_bpf_program_run_seconds_total`, labelled `prog_id`, `prog_tag`, `prog_type`.
pub fn publish(metrics: &Metrics, programs: &[ProgramStats]) {
    for p in programs {
        let id = p.id.to_string();
        let kind = p.type_name();
        let labels = [
            ("prog_id", id.as_str()),
            ("prog_tag", p.tag.as_str()),
            ("prog_type", kind.as_str()),
        ];
        metrics.set(names::BPF_RUNS, &labels, p.run_cnt as f64);
        metrics.set(names::BPF_RUN_SECONDS, &labels, p.run_time_ns as f64 / 1e9);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROG: &str = "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t26\nprog_type:\t5\n\
        prog_jited:\t1\nprog_tag:\t7c3f4bfd63efe44b\nmemlock:\t20480\nprog_id:\t3786\n\
        run_time_ns:\t123456789\nrun_cnt:\t4242\nrecursion_misses:\t0\nverified_insns:\t10144\n";
    const LINK: &str = "pos:\t0\nflags:\t02000000\nmnt_id:\t17\nino:\t26\nlink_type:\tperf\n\
        link_id:\t26791\nprog_tag:\t7c3f4bfd63efe44b\nprog_id:\t3786\ntp_name:\tsys_exit_unlink\n";
    const MAP: &str = "pos:\t0\nflags:\t02000002\nmap_type:\t6\nkey_size:\t4\nmap_id:\t3989\n";

    #[test]
    fn parses_program_fdinfo_and_ignores_links_and_maps() {
        let p = parse_fdinfo(PROG).expect("a program");
        assert_eq!(
            p,
            ProgramStats {
                id: 3786,
                tag: "7c3f4bfd63efe44b".into(),
                prog_type: 5,
                run_cnt: 4242,
                run_time_ns: 123_456_789,
            }
        );
        assert_eq!(p.type_name(), "tracepoint");
        assert_eq!(parse_fdinfo(LINK), None);
        assert_eq!(parse_fdinfo(MAP), None);
        // Adversarial text: no panic, no program.
        for junk in [
            "",
            "prog_id:\tx\nrun_cnt:\t1\n",
            "prog_id:\n",
            "\u{0}:::",
            "run_cnt: 99999999999999999999999",
        ] {
            assert_eq!(parse_fdinfo(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn publishes_per_program_series() {
        let metrics = Metrics::new();
        let p = parse_fdinfo(PROG).unwrap();
        publish(&metrics, &[p]);
        let labels = [
            ("prog_id", "3786"),
            ("prog_tag", "7c3f4bfd63efe44b"),
            ("prog_type", "tracepoint"),
        ];
        assert_eq!(metrics.get("vigil_bpf_program_runs_total", &labels), 4242.0);
        let secs = metrics.get("vigil_bpf_program_run_seconds_total", &labels);
        assert!((secs - 0.123_456_789).abs() < 1e-12, "{secs}");
        let text = metrics.render();
        assert!(
            text.contains("vigil_bpf_program_runs_total{prog_id=\"3786\",prog_tag=\"7c3f4bfd63efe44b\",prog_type=\"tracepoint\"} 4242"),
            "{text}"
        );
    }

    #[test]
    fn a_process_without_bpf_programs_has_none() {
        assert!(own_programs().is_empty());
        assert!(programs_in(Path::new("/nonexistent")).is_empty());
    }
}

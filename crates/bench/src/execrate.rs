//! `vigil bench exec-rate`: `/bin/true` at fixed exec rates, agent off then on at each rate;
//! the CPU of named processes (the agent, or auditd/kauditd/laurel/… for comparison) and the
//! extra CPU charged to the workload (its waited-for children, wrapper/tracer included).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::agent::{AgentLaunch, AgentSpec, BackgroundAgent};
use crate::overhead::WorkerLaunch;
use crate::plots;
use crate::report::{self, cell};
use crate::system::{self, SystemInfo};
use crate::{sys, BenchError, Progress};

/// Settings of an exec-rate run.
#[derive(Clone, Debug)]
pub struct ExecRateOptions {
    pub rates: Vec<f64>,
    pub duration: Duration,
    pub watch_procs: Vec<String>,
    pub agent: AgentSpec,
    pub wrap: Vec<String>,
    pub program: PathBuf,
    pub workers: WorkerLaunch,
    pub launch: AgentLaunch,
    pub out: PathBuf,
}

/// CPU ticks of every process at one instant: pid → (comm, ppid, ticks).
pub type Snapshot = HashMap<i32, (String, i32, u64)>;

pub fn snapshot() -> Snapshot {
    system::all_processes()
        .into_iter()
        .map(|(pid, comm, s)| (pid, (comm, s.ppid, s.cpu_ticks)))
        .collect()
}

/// Whether `pid` is `ancestor` or descends from it (by the ppid links of `snap`).
pub fn descends_from(snap: &Snapshot, mut pid: i32, ancestor: i32) -> bool {
    for _ in 0..64 {
        if pid == ancestor {
            return true;
        }
        match snap.get(&pid) {
            Some((_, ppid, _)) if *ppid > 0 && *ppid != pid => pid = *ppid,
            _ => return false,
        }
    }
    false
}

/// CPU ticks used between two snapshots by processes named in `names`, per name. The bench's
/// own process tree is excluded except the agent's (`keep`), so a `vigil` worker does not count
/// as the `vigil` agent. Processes born during the interval count from zero.
pub fn ticks_by_name(
    before: &Snapshot,
    after: &Snapshot,
    names: &[String],
    own: i32,
    keep: Option<i32>,
) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = names.iter().map(|n| (n.clone(), 0)).collect();
    for (pid, (comm, _, ticks)) in after {
        let Some(slot) = out.get_mut(comm) else {
            continue;
        };
        let kept = keep.is_some_and(|k| descends_from(after, *pid, k));
        if !kept && descends_from(after, *pid, own) {
            continue;
        }
        let start = before
            .get(pid)
            .filter(|(c, _, _)| c == comm)
            .map_or(0, |(_, _, t)| *t);
        *slot += ticks.saturating_sub(start);
    }
    out
}

/// One phase (agent off or on) at one rate.
#[derive(Clone, Debug, Default)]
pub struct Phase {
    pub achieved: Option<f64>,
    pub execs: u64,
    pub wall_s: f64,
    /// Waited-for children CPU (workload + wrapper), % of one CPU.
    pub workload_cpu_pct: f64,
    /// CPU % of one CPU per watched name.
    pub procs_cpu_pct: BTreeMap<String, f64>,
    pub agent_cpu_pct: Option<f64>,
    pub error: Option<String>,
}

fn children_ticks() -> u64 {
    system::proc_stat(std::process::id() as i32).map_or(0, |(_, s)| s.children_ticks)
}

fn run_phase(opts: &ExecRateOptions, rate: f64, on: bool, name: &str, progress: Progress) -> Phase {
    let hz = sys::clock_ticks() as f64;
    let mut phase = Phase::default();
    let agent = if on && opts.agent.is_background() {
        match BackgroundAgent::start(&opts.agent, &opts.launch, None, name) {
            Ok(a) => Some(a),
            Err(e) => {
                phase.error = Some(e.to_string());
                return phase;
            }
        }
    } else {
        None
    };
    let mut prefix = Vec::new();
    if on {
        prefix.extend(opts.wrap.iter().cloned());
        prefix.extend(opts.agent.prefix(&opts.workers.exe));
    }
    let own = std::process::id() as i32;
    let keep = agent.as_ref().map(|a| a.pid as i32);
    let agent_before = agent.as_ref().and_then(BackgroundAgent::cpu_ticks);
    let before = snapshot();
    let children_before = children_ticks();
    let start = Instant::now();
    let args = vec![
        "--rate".to_string(),
        rate.to_string(),
        "--duration".to_string(),
        opts.duration.as_secs_f64().to_string(),
        "--program".to_string(),
        opts.program.display().to_string(),
    ];
    let timeout = opts.duration * 10 + Duration::from_secs(60);
    let result = opts.workers.run(&prefix, "exec-rate", &args, timeout);
    let wall = start.elapsed().as_secs_f64().max(1e-9);
    let after = snapshot();
    let children = children_ticks().saturating_sub(children_before);
    let agent_after = agent.as_ref().and_then(BackgroundAgent::cpu_ticks);
    if let Some(a) = agent {
        let _ = a.stop();
    }
    phase.wall_s = wall;
    phase.workload_cpu_pct = children as f64 / hz / wall * 100.0;
    phase.procs_cpu_pct = ticks_by_name(&before, &after, &opts.watch_procs, own, keep)
        .into_iter()
        .map(|(n, t)| (n, t as f64 / hz / wall * 100.0))
        .collect();
    if let (Some(b), Some(a)) = (agent_before, agent_after) {
        phase.agent_cpu_pct = Some(a.saturating_sub(b) as f64 / hz / wall * 100.0);
    }
    match result {
        Ok(r) => {
            phase.achieved = Some(r.score);
            phase.execs = r.iterations;
        }
        Err(e) => {
            progress(&format!("  {e}"));
            phase.error = Some(e.to_string());
        }
    }
    phase
}

/// Runs every rate (off then on) and writes the report.
pub fn run(
    opts: &ExecRateOptions,
    progress: Progress,
) -> Result<Vec<(f64, Phase, Phase)>, BenchError> {
    let started = report::now_epoch();
    let info = SystemInfo::collect();
    let mut rows = Vec::new();
    for (i, rate) in opts.rates.iter().copied().enumerate() {
        progress(&format!("rate {rate}/s · agent off"));
        let off = run_phase(opts, rate, false, &format!("agent-{i}-off"), progress);
        progress(&format!(
            "  achieved {}/s, workload CPU {:.1}%",
            cell(off.achieved),
            off.workload_cpu_pct
        ));
        progress(&format!("rate {rate}/s · {}", on_label(opts)));
        let on = run_phase(opts, rate, true, &format!("agent-{i}-on"), progress);
        progress(&format!(
            "  achieved {}/s, workload CPU {:.1}%, watched: {}",
            cell(on.achieved),
            on.workload_cpu_pct,
            on.procs_cpu_pct
                .iter()
                .map(|(n, c)| format!("{n} {c:.1}%"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
        rows.push((rate, off, on));
    }
    let (md, json) = render(opts, &info, started, &rows);
    report::write_report(&opts.out, &md, &json)?;
    plots::from_report(&json, &opts.out)?;
    Ok(rows)
}

fn on_label(opts: &ExecRateOptions) -> String {
    if opts.wrap.is_empty() {
        format!("agent {}", opts.agent.label())
    } else {
        format!(
            "agent {} + wrap `{}`",
            opts.agent.label(),
            opts.wrap.join(" ")
        )
    }
}

fn render(
    opts: &ExecRateOptions,
    info: &SystemInfo,
    started: u64,
    rows: &[(f64, Phase, Phase)],
) -> (String, serde_json::Value) {
    let mut md = report::header(
        "vigil bench exec-rate",
        info,
        started,
        &[
            (
                "pinning",
                opts.workers
                    .pin
                    .as_ref()
                    .map_or("not pinned".into(), |c| format!("workload pinned with `taskset -c {c}`")),
            ),
            ("agent on", on_label(opts)),
            (
                "background agent pinning",
                opts.launch
                    .pin
                    .as_ref()
                    .map_or("not pinned".into(), |c| format!("`taskset -c {c}`")),
            ),
            (
                "workload",
                format!(
                    "paced loop of spawn + wait of `{}` (std::process, posix_spawn/vfork + exec), {} s per phase, agent off then on at each rate",
                    opts.program.display(),
                    opts.duration.as_secs_f64()
                ),
            ),
            ("watched processes", opts.watch_procs.join(", ")),
            (
                "CPU",
                "utime+stime from /proc/<pid>/stat over the phase's wall time, % of one CPU; workload = waited-for children of the bench (worker, its /bin/true children, and any wrapper or tracer)".into(),
            ),
        ],
    );
    md.push_str("| target/s | achieved off | achieved on | workload CPU off | workload CPU on | extra CPU | extra µs/exec | agent CPU |");
    for n in &opts.watch_procs {
        md.push_str(&format!(" {n} CPU on |"));
    }
    md.push_str("\n|---|---|---|---|---|---|---|---|");
    md.push_str(&"---|".repeat(opts.watch_procs.len()));
    md.push('\n');
    let mut rows_json = Vec::new();
    for (rate, off, on) in rows {
        let extra = on.workload_cpu_pct - off.workload_cpu_pct;
        let per_exec = on
            .achieved
            .filter(|a| *a > 0.0)
            .map(|a| extra / 100.0 / a * 1e6);
        md.push_str(&format!(
            "| {rate} | {} | {} | {:.1}% | {:.1}% | {extra:+.1}% | {} | {} |",
            cell(off.achieved),
            cell(on.achieved),
            off.workload_cpu_pct,
            on.workload_cpu_pct,
            cell(per_exec),
            on.agent_cpu_pct.map_or("-".into(), |c| format!("{c:.1}%")),
        ));
        for n in &opts.watch_procs {
            md.push_str(&format!(
                " {} |",
                on.procs_cpu_pct
                    .get(n)
                    .map_or("-".into(), |c| format!("{c:.1}%"))
            ));
        }
        md.push('\n');
        let phase_json = |p: &Phase| {
            json!({
                "achieved_per_s": p.achieved, "execs": p.execs, "wall_s": p.wall_s,
                "workload_cpu_pct": p.workload_cpu_pct, "procs_cpu_pct": p.procs_cpu_pct,
                "agent_cpu_pct": p.agent_cpu_pct, "error": p.error,
            })
        };
        rows_json.push(json!({
            "target_per_s": rate,
            "off": phase_json(off),
            "on": phase_json(on),
            "extra_workload_cpu_pct": extra,
            "extra_us_per_exec": per_exec,
        }));
    }
    let errors: Vec<String> = rows
        .iter()
        .flat_map(|(r, off, on)| {
            [("off", off), ("on", on)]
                .into_iter()
                .filter_map(move |(w, p)| p.error.as_ref().map(|e| format!("{r}/s {w}: {e}")))
        })
        .collect();
    if !errors.is_empty() {
        md.push_str("\n## Failures\n\n");
        for e in &errors {
            md.push_str(&format!("- {e}\n"));
        }
    }
    md.push_str("\nPlot: `exec-rate-cpu.svg`.\n");
    let json = json!({
        "bench": "exec-rate",
        "started": started,
        "system": info,
        "pinning": opts.workers.pin,
        "agent": on_label(opts),
        "program": opts.program,
        "duration_s": opts.duration.as_secs_f64(),
        "watch_procs": opts.watch_procs,
        "rates": rows_json,
        "errors": errors,
    });
    (md, json)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(entries: &[(i32, &str, i32, u64)]) -> Snapshot {
        entries
            .iter()
            .map(|(pid, comm, ppid, t)| (*pid, (comm.to_string(), *ppid, *t)))
            .collect()
    }

    #[test]
    fn ticks_exclude_own_tree_but_keep_agent() {
        let before = snap(&[
            (1, "init", 0, 0),
            (10, "vigil", 1, 100),
            (20, "vigil", 10, 50),
            (30, "auditd", 1, 7),
        ]);
        let after = snap(&[
            (1, "init", 0, 0),
            (10, "vigil", 1, 120),  // the bench itself
            (20, "vigil", 10, 80),  // the agent, child of the bench
            (21, "vigil", 10, 500), // a worker: excluded
            (30, "auditd", 1, 10),
            (31, "auditd", 1, 4), // born during the interval
        ]);
        let names = vec![
            "vigil".to_string(),
            "auditd".to_string(),
            "falco".to_string(),
        ];
        let t = ticks_by_name(&before, &after, &names, 10, Some(20));
        assert_eq!(t["vigil"], 30, "only the agent's 30 ticks");
        assert_eq!(t["auditd"], 3 + 4, "existing + new process");
        assert_eq!(t["falco"], 0, "absent name is zero");
        assert!(descends_from(&after, 21, 10), "worker descends from bench");
        assert!(!descends_from(&after, 30, 10), "auditd does not");
    }
}

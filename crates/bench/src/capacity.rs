//! `vigil bench capacity`: a paced ramp of a watched syscall (`openat` + `close` of a harmless
//! temporary file, from several worker processes) while the agent runs under a CPU budget,
//! until the agent reports drops; the highest zero-drop rate per budget, the drop rate above
//! it, agent CPU and RSS idle and under load.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::agent::{
    other_cpus, release_budget, AgentLaunch, AgentSpec, BackgroundAgent, CpuBudget, WatchStats,
};
use crate::overhead::WorkerLaunch;
use crate::plots;
use crate::report::{self, cell};
use crate::stats::Step;
use crate::system::SystemInfo;
use crate::{sys, BenchError, Progress};

/// Settings of a capacity run.
#[derive(Clone, Debug)]
pub struct CapacityOptions {
    pub budgets: Vec<f64>,
    pub start: f64,
    pub step: Step,
    pub max_rate: f64,
    pub max_steps: usize,
    pub duration: Duration,
    /// Load worker processes (the rate is split evenly).
    pub load_workers: usize,
    pub agent: AgentSpec,
    pub path: PathBuf,
    pub workers: WorkerLaunch,
    pub launch: AgentLaunch,
    pub out: PathBuf,
}

/// One step of a ramp.
#[derive(Clone, Debug, Default)]
pub struct StepResult {
    pub target: f64,
    /// open+close pairs per second the load achieved (all workers).
    pub achieved: f64,
    /// Wall time of the load, seconds.
    pub wall_s: f64,
    pub stats: Option<WatchStats>,
    pub agent_cpu_pct: Option<f64>,
    pub hwm_idle_kib: Option<u64>,
    pub hwm_load_kib: Option<u64>,
    pub error: Option<String>,
}

impl StepResult {
    /// Events the agent took in per second (host-wide, everything it captured).
    pub fn events_per_s(&self) -> Option<f64> {
        let s = self.stats.as_ref()?;
        (self.wall_s > 0.0).then(|| s.events_in as f64 / self.wall_s)
    }

    /// Dropped / events_in, percent.
    pub fn drop_pct(&self) -> Option<f64> {
        let s = self.stats.as_ref()?;
        Some(if s.events_in == 0 {
            0.0
        } else {
            s.dropped_total() as f64 / s.events_in as f64 * 100.0
        })
    }
}

/// One budget's ramp.
#[derive(Clone, Debug)]
pub struct BudgetResult {
    pub cpus: f64,
    pub method: String,
    /// The CPUs the load was pinned to (those the agent does not have), if any.
    pub load_cpus: Option<String>,
    pub steps: Vec<StepResult>,
    pub note: Option<String>,
}

/// The highest achieved rate with stats and zero drops, and the drop % of the first dropping
/// step above it.
pub fn summarize(steps: &[StepResult]) -> (Option<f64>, Option<f64>) {
    let mut best = None;
    let mut above = None;
    for s in steps {
        match s.stats.as_ref() {
            Some(st) if st.dropped_total() == 0 => {
                best = Some(best.map_or(s.achieved, |b: f64| b.max(s.achieved)));
            }
            Some(_) if above.is_none() => above = s.drop_pct(),
            _ => {}
        }
    }
    (best, above)
}

fn run_step(
    opts: &CapacityOptions,
    workers: &WorkerLaunch,
    rate: f64,
    budget: Option<(&[String], &crate::agent::BudgetMethod)>,
    name: &str,
) -> StepResult {
    let hz = sys::clock_ticks() as f64;
    let mut step = StepResult {
        target: rate,
        ..StepResult::default()
    };
    let agent = if opts.agent.is_background() {
        match BackgroundAgent::start(&opts.agent, &opts.launch, budget, name) {
            Ok(a) => Some(a),
            Err(e) => {
                step.error = Some(e.to_string());
                return step;
            }
        }
    } else {
        None
    };
    if let Some(a) = &agent {
        std::thread::sleep(Duration::from_millis(300));
        step.hwm_idle_kib = a.vm_hwm_kib();
    }
    let ticks_before = agent.as_ref().and_then(BackgroundAgent::cpu_ticks);
    let start = Instant::now();
    let n = opts.load_workers.max(1);
    let per = rate / n as f64;
    let args = vec![
        "--rate".to_string(),
        per.to_string(),
        "--duration".to_string(),
        opts.duration.as_secs_f64().to_string(),
        "--path".to_string(),
        opts.path.display().to_string(),
    ];
    let timeout = opts.duration * 10 + Duration::from_secs(60);
    let results: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| scope.spawn(|| workers.run(&[], "open-load", &args, timeout)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::Worker {
                        test: "open-load".into(),
                        detail: "worker thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    let wall = start.elapsed().as_secs_f64().max(1e-9);
    step.wall_s = wall;
    for r in results {
        match r {
            Ok(r) => step.achieved += r.score,
            Err(e) => step.error = Some(e.to_string()),
        }
    }
    if let Some(a) = agent {
        step.hwm_load_kib = a.vm_hwm_kib();
        if let (Some(b), Some(t)) = (ticks_before, a.cpu_ticks()) {
            step.agent_cpu_pct = Some(t.saturating_sub(b) as f64 / hz / wall * 100.0);
        }
        let exit = a.stop();
        if opts.agent.is_watch() && exit.stats.is_none() && step.error.is_none() {
            step.error = Some(format!("no --stats line at exit: {}", exit.stderr_tail));
        }
        step.stats = exit.stats;
    }
    step
}

/// Runs the ramp for every budget and writes the report.
pub fn run(opts: &CapacityOptions, progress: Progress) -> Result<Vec<BudgetResult>, BenchError> {
    if matches!(opts.agent, AgentSpec::Run { .. }) {
        return Err(BenchError::Invalid {
            what: "agent".into(),
            detail: "capacity measures a background agent (watch, a command, or none)".into(),
        });
    }
    let started = report::now_epoch();
    let info = SystemInfo::collect();
    let rates = opts.step.ramp(opts.start, opts.max_rate, opts.max_steps);
    let mut budgets = Vec::new();
    for (bi, cpus) in opts.budgets.iter().copied().enumerate() {
        let budget = CpuBudget { cpus };
        let (prefix, method) = budget.prepare(&format!("{}-{bi}", std::process::id()));
        let online = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut workers = opts.workers.clone();
        workers.pin = other_cpus(budget.whole_cpus(), online);
        progress(&format!(
            "budget {cpus} CPU: {}; load on {}",
            method.describe(),
            workers
                .pin
                .as_ref()
                .map_or("any CPU".to_string(), |c| format!("CPUs {c}"))
        ));
        let mut result = BudgetResult {
            cpus,
            method: method.describe(),
            load_cpus: workers.pin.clone(),
            steps: Vec::new(),
            note: None,
        };
        for (si, rate) in rates.iter().copied().enumerate() {
            let step = run_step(
                opts,
                &workers,
                rate,
                Some((&prefix, &method)),
                &format!("agent-{bi}-{si}"),
            );
            progress(&format!(
                "  target {rate:.0}/s achieved {:.0}/s events_in={} dropped={} agent CPU={} VmHWM={} KiB{}",
                step.achieved,
                step.stats.as_ref().map_or("-".into(), |s| s.events_in.to_string()),
                step.stats.as_ref().map_or("-".into(), |s| s.dropped_total().to_string()),
                step.agent_cpu_pct.map_or("-".into(), |c| format!("{c:.1}%")),
                step.hwm_load_kib.map_or("-".into(), |k| k.to_string()),
                step.error.as_ref().map_or(String::new(), |e| format!(" ({e})")),
            ));
            let dropped = step.stats.as_ref().is_some_and(|s| s.dropped_total() > 0);
            let saturated = step.achieved < rate * 0.8;
            let failed = step.error.is_some();
            result.steps.push(step);
            if dropped {
                break;
            }
            if saturated {
                result.note = Some(format!(
                    "the load generator reached only {:.0}/s of {rate:.0}/s: add --load-workers or use a release build",
                    result.steps.last().map_or(0.0, |s| s.achieved)
                ));
                break;
            }
            if failed {
                break;
            }
        }
        let clean_to_the_end = result
            .steps
            .last()
            .is_some_and(|s| s.stats.as_ref().is_some_and(|st| st.dropped_total() == 0));
        if result.note.is_none() && clean_to_the_end {
            result.note = Some("no drops up to the highest rate tried: raise --max-rate".into());
        }
        release_budget(&method);
        budgets.push(result);
    }
    let (md, json) = render(opts, &info, started, &budgets);
    report::write_report(&opts.out, &md, &json)?;
    plots::from_report(&json, &opts.out)?;
    Ok(budgets)
}

fn render(
    opts: &CapacityOptions,
    info: &SystemInfo,
    started: u64,
    budgets: &[BudgetResult],
) -> (String, serde_json::Value) {
    let mut md = report::header(
        "vigil bench capacity",
        info,
        started,
        &[
            ("agent", opts.agent.label()),
            (
                "load",
                format!(
                    "openat+close of `{}` from {} worker processes, paced, {} s per step; rates are open+close pairs/s, events/s is everything the agent took in (host-wide)",
                    opts.path.display(),
                    opts.load_workers,
                    opts.duration.as_secs_f64()
                ),
            ),
            (
                "pinning",
                "the agent is restricted to its CPU budget (CPUs 0..n); the load runs on the other CPUs when there are any, else unpinned".into(),
            ),
        ],
    );
    md.push_str("## Summary\n\n| CPU budget | how | load CPUs | highest zero-drop rate/s | agent events/s there | drop % above it | VmHWM idle | VmHWM under load | note |\n|---|---|---|---|---|---|---|---|---|\n");
    let mut budgets_json = Vec::new();
    for b in budgets {
        let (best, above) = summarize(&b.steps);
        let best_eps = best.and_then(|r| {
            b.steps
                .iter()
                .find(|s| s.achieved == r)
                .and_then(StepResult::events_per_s)
        });
        let idle = b.steps.first().and_then(|s| s.hwm_idle_kib);
        let load = b.steps.iter().filter_map(|s| s.hwm_load_kib).max();
        let kib =
            |k: Option<u64>| k.map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            b.cpus,
            b.method,
            b.load_cpus.as_deref().unwrap_or("any"),
            cell(best),
            cell(best_eps),
            above.map_or("-".into(), |p| format!("{p:.3}%")),
            kib(idle),
            kib(load),
            b.note.as_deref().unwrap_or(if opts.agent.is_watch() {
                ""
            } else {
                "no drop counters from this agent"
            }),
        ));
        budgets_json.push(json!({
            "cpus": b.cpus,
            "method": b.method,
            "load_cpus": b.load_cpus,
            "highest_zero_drop_rate": best,
            "events_per_s_at_highest": best_eps,
            "drop_pct_above": above,
            "vm_hwm_idle_kib": idle,
            "vm_hwm_load_kib": load,
            "note": b.note,
            "steps": b.steps.iter().map(|s| json!({
                "target_per_s": s.target,
                "achieved_per_s": s.achieved,
                "wall_s": s.wall_s,
                "events_per_s": s.events_per_s(),
                "stats": s.stats,
                "dropped_total": s.stats.as_ref().map(WatchStats::dropped_total),
                "drop_pct": s.drop_pct(),
                "agent_cpu_pct": s.agent_cpu_pct,
                "vm_hwm_idle_kib": s.hwm_idle_kib,
                "vm_hwm_load_kib": s.hwm_load_kib,
                "error": s.error,
            })).collect::<Vec<_>>(),
        }));
    }
    for b in budgets {
        md.push_str(&format!(
            "\n## {} CPU\n\n| target/s | achieved/s | events_in | events/s | processed | dropped | drop % | agent CPU | VmHWM |\n|---|---|---|---|---|---|---|---|---|\n",
            b.cpus
        ));
        for s in &b.steps {
            let st = s.stats.as_ref();
            md.push_str(&format!(
                "| {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {} |\n",
                s.target,
                s.achieved,
                st.map_or("-".into(), |s| s.events_in.to_string()),
                cell(s.events_per_s()),
                st.map_or("-".into(), |s| s.processed.to_string()),
                st.map_or("-".into(), |s| s.dropped_total().to_string()),
                s.drop_pct().map_or("-".into(), |p| format!("{p:.3}%")),
                s.agent_cpu_pct.map_or("-".into(), |c| format!("{c:.1}%")),
                s.hwm_load_kib.map_or("-".into(), |k| format!("{k} KiB")),
            ));
            if let Some(e) = &s.error {
                md.push_str(&format!("\n  failure: {e}\n\n"));
            }
        }
    }
    md.push_str("\nPlots: `capacity-drops.svg`, `capacity-cpu.svg`.\n");
    let json = json!({
        "bench": "capacity",
        "started": started,
        "system": info,
        "agent": opts.agent.label(),
        "path": opts.path,
        "load_workers": opts.load_workers,
        "duration_s": opts.duration.as_secs_f64(),
        "budgets": budgets_json,
    });
    (md, json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn step(achieved: f64, events: u64, dropped: Option<u64>) -> StepResult {
        StepResult {
            target: achieved,
            achieved,
            stats: dropped.map(|d| WatchStats {
                events_in: events,
                processed: events - d,
                dropped: d,
                dropped_by_reason: BTreeMap::from([("ring_full".to_string(), d)]),
                alerts: 0,
            }),
            ..StepResult::default()
        }
    }

    #[test]
    fn summary_finds_highest_clean_rate_and_drop_above() {
        let steps = [
            step(100.0, 100, Some(0)),
            step(200.0, 200, Some(0)),
            step(400.0, 400, Some(40)),
        ];
        let (best, above) = summarize(&steps);
        assert_eq!(best, Some(200.0), "highest zero-drop");
        assert_eq!(above, Some(10.0), "40 of 400 dropped");
        let (best, above) = summarize(&[step(100.0, 0, None)]);
        assert_eq!((best, above), (None, None), "no stats → nothing claimed");
    }
}

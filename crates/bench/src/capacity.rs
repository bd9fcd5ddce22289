//! `vigil bench capacity`: a paced ramp of a watched syscall (`openat` + `close` of a harmless
//! temporary file, from several worker processes) while the agent runs under a CPU budget,
//! until the agent reports drops; the highest zero-drop rate per budget, the drop rate above
//! it, agent CPU and RSS idle and under load.
//!
//! Several agents (e.g. Falco and `vigil watch`) run in one invocation, interleaved: at each
//! budget and rate, each agent whose ramp goes on takes its step in turn, so they meet the same
//! machine. An agent that dies stops its ramp and the summary says "died"; with `canary`, each
//! step also opens `/etc/shadow` that many times from a tagged process in the middle of the
//! load, and counts the agent's alerts naming the tag.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::agent::{
    other_cpus, release_budget, tail, AgentLaunch, AgentSpec, BackgroundAgent, CpuBudget,
    WatchStats,
};
use crate::overhead::{canary_tag, canary_worker, WorkerLaunch};
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
    /// The agents, interleaved at every step.
    pub agents: Vec<AgentSpec>,
    /// What the report calls each agent (its label when missing).
    pub labels: Vec<String>,
    /// Opens of the canary file in the middle of each step's load (0: none).
    pub canary: u64,
    /// Facts for the report's header, e.g. the agents' versions.
    pub notes: Vec<(String, String)>,
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
    /// How the agent exited if it died during the step.
    pub died: Option<String>,
    pub canary: Option<crate::agent::Canary>,
    /// Starts of the agent that never became ready before the one measured.
    pub stalled_starts: Vec<String>,
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

/// One agent's ramp at one budget.
#[derive(Clone, Debug)]
pub struct BudgetResult {
    pub cpus: f64,
    /// The agent's label.
    pub agent: String,
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
    spec: &AgentSpec,
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
    let mut agent = if spec.is_background() {
        match BackgroundAgent::start(spec, &opts.launch, budget, name) {
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
    let canary_tag = match agent.as_mut() {
        Some(a) if opts.canary > 0 => {
            let tag = canary_tag();
            a.expect_alerts(&tag, opts.canary);
            Some(tag)
        }
        _ => None,
    };
    let (results, canary_result): (Vec<_>, _) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..n)
            .map(|_| scope.spawn(|| workers.run(&[], "open-load", &args, timeout)))
            .collect();
        // The canary runs in the middle of the load, from the load's CPUs.
        let canary = canary_tag.as_deref().map(|tag| {
            scope.spawn(move || {
                std::thread::sleep(opts.duration / 2);
                canary_worker(workers, tag, opts.canary)
            })
        });
        let results = handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(BenchError::Worker {
                        test: "open-load".into(),
                        detail: "worker thread panicked".into(),
                    })
                })
            })
            .collect();
        let canary = canary.map(|h| {
            h.join().unwrap_or_else(|_| {
                Err(BenchError::Worker {
                    test: "canary".into(),
                    detail: "canary thread panicked".into(),
                })
            })
        });
        (results, canary)
    });
    let wall = start.elapsed().as_secs_f64().max(1e-9);
    step.wall_s = wall;
    for r in results {
        match r {
            Ok(r) => step.achieved += r.score,
            Err(e) => step.error = Some(e.to_string()),
        }
    }
    if let Some(Err(e)) = canary_result {
        step.error = Some(format!("canary: {e}"));
    }
    if let Some(mut a) = agent {
        step.hwm_load_kib = a.vm_hwm_kib();
        if let (Some(b), Some(t)) = (ticks_before, a.cpu_ticks()) {
            step.agent_cpu_pct = Some(t.saturating_sub(b) as f64 / hz / wall * 100.0);
        }
        a.wait_alerts(Duration::from_secs(5));
        let exit = a.stop();
        if let Some(how) = &exit.died {
            step.error = Some(format!(
                "the agent died during the step ({how}): {}",
                tail(&exit.stderr_tail, 600)
            ));
        } else if spec.has_counters() && exit.stats.is_none() && step.error.is_none() {
            step.error = Some(format!("no counters at exit: {}", exit.stderr_tail));
        }
        step.died = exit.died;
        step.canary = exit.canary;
        step.stalled_starts = exit.stalled_starts;
        step.stats = exit.stats;
    }
    step
}

/// Runs the ramp for every budget, the agents interleaved, and writes the report.
pub fn run(opts: &CapacityOptions, progress: Progress) -> Result<Vec<BudgetResult>, BenchError> {
    if opts.agents.is_empty() {
        return Err(BenchError::Invalid {
            what: "agent".into(),
            detail: "no agent given".into(),
        });
    }
    if let Some(run) = opts
        .agents
        .iter()
        .find(|a| matches!(a, AgentSpec::Run { .. }))
    {
        return Err(BenchError::Invalid {
            what: "agent".into(),
            detail: format!(
                "capacity measures a background agent (watch, falco, a command, or none), not `{}`",
                run.label()
            ),
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
        let mut results: Vec<BudgetResult> = opts
            .agents
            .iter()
            .enumerate()
            .map(|(ai, _)| BudgetResult {
                cpus,
                agent: label_of(opts, ai),
                method: method.describe(),
                load_cpus: workers.pin.clone(),
                steps: Vec::new(),
                note: None,
            })
            .collect();
        let mut active = vec![true; opts.agents.len()];
        for (si, rate) in rates.iter().copied().enumerate() {
            if !active.iter().any(|a| *a) {
                break;
            }
            for (ai, spec) in opts.agents.iter().enumerate() {
                if !active[ai] {
                    continue;
                }
                let step = run_step(
                    opts,
                    spec,
                    &workers,
                    rate,
                    Some((&prefix, &method)),
                    &format!("agent-{bi}-{si}-{ai}"),
                );
                progress(&format!(
                    "  {} · target {rate:.0}/s achieved {:.0}/s events_in={} dropped={} agent CPU={} VmHWM={} KiB{}{}",
                    label_of(opts, ai),
                    step.achieved,
                    step.stats.as_ref().map_or("-".into(), |s| s.events_in.to_string()),
                    step.stats.as_ref().map_or("-".into(), |s| s.dropped_total().to_string()),
                    step.agent_cpu_pct.map_or("-".into(), |c| format!("{c:.1}%")),
                    step.hwm_load_kib.map_or("-".into(), |k| k.to_string()),
                    step.canary.as_ref().map_or(String::new(), |c| format!(
                        " canary alerts {}/{}",
                        c.received, c.expected
                    )),
                    step.error.as_ref().map_or(String::new(), |e| format!(" ({e})")),
                ));
                let (go_on, note) = after_step(&step, rate);
                let result = &mut results[ai];
                result.steps.push(step);
                if !go_on {
                    active[ai] = false;
                    result.note = note;
                }
            }
        }
        for result in &mut results {
            let clean_to_the_end = result
                .steps
                .last()
                .is_some_and(|s| s.stats.as_ref().is_some_and(|st| st.dropped_total() == 0));
            if result.note.is_none() && clean_to_the_end {
                result.note =
                    Some("no drops up to the highest rate tried: raise --max-rate".into());
            }
        }
        release_budget(&method);
        budgets.extend(results);
    }
    let (md, json) = render(opts, &info, started, &budgets);
    report::write_report(&opts.out, &md, &json)?;
    plots::from_report(&json, &opts.out)?;
    Ok(budgets)
}

/// Whether an agent's ramp goes on after `step` (which aimed at `rate`), and when it does not,
/// the note saying why. Drops end it (the table shows them). A failed step ends it on that
/// failure: an agent that did not start or died leaves the load at 0/s, and that is not the
/// load generator's fault. A load short of its target without a failure is the load
/// generator's ceiling.
fn after_step(step: &StepResult, rate: f64) -> (bool, Option<String>) {
    if step.stats.as_ref().is_some_and(|s| s.dropped_total() > 0) {
        return (false, None);
    }
    if let Some(e) = &step.error {
        return (
            false,
            Some(format!(
                "the ramp ended at {rate:.0}/s on a failed step, not on drops (the steps' \
                 failures): {}",
                crate::agent::head(e, 160)
            )),
        );
    }
    if step.achieved < rate * 0.8 {
        return (
            false,
            Some(format!(
                "the load generator reached only {:.0}/s of {rate:.0}/s: add --load-workers or use a release build",
                step.achieved
            )),
        );
    }
    (true, None)
}

/// The report's name of agent `ai`.
fn label_of(opts: &CapacityOptions, ai: usize) -> String {
    opts.labels
        .get(ai)
        .cloned()
        .unwrap_or_else(|| opts.agents[ai].label())
}

/// What replaces a budget's zero-drop rate when there is none: the agent died, or dropped
/// from its first step on.
pub fn flag(b: &BudgetResult) -> Option<String> {
    if let Some(s) = b.steps.iter().find(|s| s.died.is_some()) {
        return Some(format!("died at {:.0}/s", s.target));
    }
    let (best, _) = summarize(&b.steps);
    match (best, b.steps.first().and_then(|s| s.stats.as_ref())) {
        (None, Some(st)) if st.dropped_total() > 0 => Some(format!(
            "dropped {} at the first step ({:.0}/s)",
            st.dropped_total(),
            b.steps[0].achieved
        )),
        _ => None,
    }
}

fn render(
    opts: &CapacityOptions,
    info: &SystemInfo,
    started: u64,
    budgets: &[BudgetResult],
) -> (String, serde_json::Value) {
    let labels: Vec<String> = (0..opts.agents.len())
        .map(|ai| label_of(opts, ai))
        .collect();
    let mut settings: Vec<(&str, String)> = vec![
        (
            if labels.len() > 1 { "agents" } else { "agent" },
            labels.join(" · "),
        ),
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
    ];
    if labels.len() > 1 {
        settings.push((
            "order",
            "interleaved: at each budget and rate, each agent whose ramp goes on takes its step in turn, each with a freshly started agent".into(),
        ));
    }
    if opts.canary > 0 {
        settings.push((
            "alerts expected",
            format!(
                "{} opens of `{}` by a tagged `vigil bench worker canary` in the middle of each step's load; received = lines of the agent's stdout holding the tag",
                opts.canary,
                crate::overhead::CANARY_FILE
            ),
        ));
    }
    for (k, v) in &opts.notes {
        settings.push((k.as_str(), v.clone()));
    }
    let mut md = report::header("vigil bench capacity", info, started, &settings);
    if labels.len() > 1 {
        md.push_str(&side_by_side(&labels, budgets));
    }
    md.push_str("## Summary\n\n| CPU budget | agent | how | load CPUs | highest zero-drop rate/s | agent events/s there | agent CPU there | drop % above it | VmHWM idle | VmHWM under load | alerts expected / received | note |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    let mut budgets_json = Vec::new();
    for b in budgets {
        let (best, above) = summarize(&b.steps);
        let best_step = best.and_then(|r| b.steps.iter().find(|s| s.achieved == r));
        let best_eps = best_step.and_then(StepResult::events_per_s);
        let best_cpu = best_step.and_then(|s| s.agent_cpu_pct);
        let idle = b.steps.first().and_then(|s| s.hwm_idle_kib);
        let load = b.steps.iter().filter_map(|s| s.hwm_load_kib).max();
        let (expected, received) = b
            .steps
            .iter()
            .filter_map(|s| s.canary.as_ref())
            .fold((0, 0), |(e, r), c| (e + c.expected, r + c.received));
        let has_canary = b.steps.iter().any(|s| s.canary.is_some());
        let kib =
            |k: Option<u64>| k.map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0));
        let counters = labels
            .iter()
            .position(|l| *l == b.agent)
            .is_some_and(|ai| opts.agents[ai].has_counters());
        md.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            b.cpus,
            b.agent,
            b.method,
            b.load_cpus.as_deref().unwrap_or("any"),
            flag(b).unwrap_or_else(|| cell(best)),
            cell(best_eps),
            best_cpu.map_or("-".into(), |c| format!("{c:.1}%")),
            above.map_or("-".into(), |p| format!("{p:.3}%")),
            kib(idle),
            kib(load),
            if has_canary {
                format!("{expected} / {received}")
            } else {
                "-".into()
            },
            b.note.as_deref().unwrap_or(if counters {
                ""
            } else {
                "no drop counters from this agent"
            }),
        ));
        budgets_json.push(json!({
            "cpus": b.cpus,
            "agent": b.agent,
            "method": b.method,
            "load_cpus": b.load_cpus,
            "highest_zero_drop_rate": best,
            "flag": flag(b),
            "events_per_s_at_highest": best_eps,
            "agent_cpu_pct_at_highest": best_cpu,
            "drop_pct_above": above,
            "vm_hwm_idle_kib": idle,
            "vm_hwm_load_kib": load,
            "alerts_expected": has_canary.then_some(expected),
            "alerts_received": has_canary.then_some(received),
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
                "died": s.died,
                "canary": s.canary,
                "stalled_starts": s.stalled_starts,
                "error": s.error,
            })).collect::<Vec<_>>(),
        }));
    }
    for b in budgets {
        md.push_str(&format!(
            "\n## {} CPU · {}\n\n| target/s | achieved/s | events_in | events/s | processed | dropped | drop % | agent CPU | VmHWM | alerts expected / received |\n|---|---|---|---|---|---|---|---|---|---|\n",
            b.cpus, b.agent
        ));
        for s in &b.steps {
            let st = s.stats.as_ref();
            md.push_str(&format!(
                "| {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                s.target,
                s.achieved,
                st.map_or("-".into(), |s| s.events_in.to_string()),
                cell(s.events_per_s()),
                st.map_or("-".into(), |s| s.processed.to_string()),
                match (&s.died, st) {
                    (Some(_), _) => "died".to_string(),
                    (None, Some(s)) => s.dropped_total().to_string(),
                    (None, None) => "-".into(),
                },
                s.drop_pct().map_or("-".into(), |p| format!("{p:.3}%")),
                s.agent_cpu_pct.map_or("-".into(), |c| format!("{c:.1}%")),
                s.hwm_load_kib.map_or("-".into(), |k| format!("{k} KiB")),
                s.canary
                    .as_ref()
                    .map_or("-".into(), |c| format!("{} / {}", c.expected, c.received)),
            ));
            if let Some(e) = &s.error {
                md.push_str(&format!("\n  failure: {e}\n\n"));
            }
            for why in &s.stalled_starts {
                md.push_str(&format!("\n  stalled start (started again): {why}\n\n"));
            }
        }
    }
    md.push_str("\nPlots: `capacity-drops.svg`, `capacity-cpu.svg`.\n");
    let json = json!({
        "bench": "capacity",
        "started": started,
        "system": info,
        "agent": labels.join(" · "),
        "agents": labels,
        "path": opts.path,
        "load_workers": opts.load_workers,
        "duration_s": opts.duration.as_secs_f64(),
        "canary": opts.canary,
        "notes": opts.notes.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
        "budgets": budgets_json,
    });
    (md, json)
}

/// Per budget, each agent's highest zero-drop rate (or what replaced it), and each agent's
/// ratio to the first agent's.
fn side_by_side(labels: &[String], budgets: &[BudgetResult]) -> String {
    let mut md = String::from(
        "## Side by side: highest zero-drop rate (open+close pairs/s)\n\n| CPU budget |",
    );
    for l in labels {
        md.push_str(&format!(" {l} |"));
    }
    for l in &labels[1..] {
        md.push_str(&format!(" {l} ÷ {} |", labels[0]));
    }
    md.push_str("\n|---|");
    for _ in 0..(labels.len() * 2 - 1) {
        md.push_str("---|");
    }
    md.push('\n');
    let mut cpus_seen: Vec<f64> = Vec::new();
    for b in budgets {
        if cpus_seen.contains(&b.cpus) {
            continue;
        }
        cpus_seen.push(b.cpus);
        let of = |label: &String| {
            budgets
                .iter()
                .find(|x| x.cpus == b.cpus && &x.agent == label)
        };
        let rate = |label: &String| -> Option<f64> {
            let x = of(label)?;
            if flag(x).is_some() {
                return None;
            }
            summarize(&x.steps).0
        };
        md.push_str(&format!("| {} |", b.cpus));
        for l in labels {
            let shown = match of(l) {
                Some(x) => flag(x).unwrap_or_else(|| cell(summarize(&x.steps).0)),
                None => "-".into(),
            };
            md.push_str(&format!(" {shown} |"));
        }
        for l in &labels[1..] {
            let ratio = match (rate(l), rate(&labels[0])) {
                (Some(a), Some(f)) if f > 0.0 => format!("{:.2}×", a / f),
                _ => "-".into(),
            };
            md.push_str(&format!(" {ratio} |"));
        }
        md.push('\n');
    }
    md.push_str("\nA ramp that ends without drops (see the notes) is a lower bound.\n\n");
    md
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
    fn a_failed_step_ends_the_ramp_on_its_failure_not_on_the_load() {
        // The agent did not start: the load never ran (0/s), and the note says so.
        let mut failed = step(0.0, 0, None);
        // As the bench writes it: what failed first, then the agent's stderr.
        failed.error = Some(format!(
            "agent: falco -r rules.yaml did not write `m.jsonl` within 60s: {}",
            "libpman: failure while attaching TOCTOU mitigation program | ".repeat(8)
        ));
        let (go_on, note) = after_step(&failed, 126_562.0);
        let note = note.expect("a note");
        assert!(!go_on);
        assert!(
            note.contains("failed step") && note.contains("did not write `m.jsonl` within 60s"),
            "{note}"
        );
        assert!(!note.contains("load generator"), "{note}");
        // A load short of its target, nothing failed: the load generator's ceiling.
        let (go_on, note) = after_step(&step(100_000.0, 100_000, Some(0)), 150_000.0);
        assert!(!go_on);
        assert!(note
            .expect("a note")
            .contains("load generator reached only 100000/s"));
        // Drops end the ramp without a note; a clean step goes on.
        assert_eq!(
            after_step(&step(150_000.0, 10, Some(3)), 150_000.0),
            (false, None)
        );
        assert_eq!(
            after_step(&step(150_000.0, 10, Some(0)), 150_000.0),
            (true, None)
        );
    }

    #[test]
    fn flag_names_death_or_first_step_drops_instead_of_a_rate() {
        let mut b = BudgetResult {
            cpus: 1.0,
            agent: "falco".into(),
            method: String::new(),
            load_cpus: None,
            steps: vec![step(100.0, 100, Some(5))],
            note: None,
        };
        assert_eq!(
            flag(&b).as_deref(),
            Some("dropped 5 at the first step (100/s)"),
            "no zero-drop rate"
        );
        b.steps = vec![step(100.0, 100, Some(0)), step(200.0, 200, Some(3))];
        assert_eq!(flag(&b), None, "a zero-drop rate exists");
        b.steps[1].died = Some("signal: 9 (SIGKILL)".into());
        assert_eq!(flag(&b).as_deref(), Some("died at 200/s"), "death wins");
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

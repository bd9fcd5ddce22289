//! `vigil bench overhead`: every test with the agent off and with each agent configuration on,
//! interleaved (off, on, off, on, …), medians, UnixBench indices and their geometric mean, and
//! the change against agent-off.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::agent::{tail, AgentExit, AgentLaunch, AgentSpec, BackgroundAgent};
use crate::plots;
use crate::report::{self, cell, pct};
use crate::stats::{geometric_mean, interleaved_schedule, median, percent_change, unixbench_index};
use crate::system::SystemInfo;
use crate::workload::{Test, WorkerResult};
use crate::{BenchError, Progress};

/// One "on" configuration: an agent and/or a wrapper prefix.
#[derive(Clone, Debug)]
pub struct Variant {
    pub label: String,
    pub agent: AgentSpec,
    pub wrap: Vec<String>,
}

impl Variant {
    /// Agent off: no agent, no wrapper.
    pub fn off() -> Variant {
        Variant {
            label: "agent off".into(),
            agent: AgentSpec::None,
            wrap: Vec::new(),
        }
    }
}

/// How to launch workers: the binary, pinning and the scratch directory.
#[derive(Clone, Debug)]
pub struct WorkerLaunch {
    pub exe: PathBuf,
    /// `taskset -c CPUS` around the whole command (wrapper or tracer included).
    pub pin: Option<String>,
    /// Scratch directory for the tests' files and the result files.
    pub scratch: PathBuf,
}

impl WorkerLaunch {
    /// The argv of `[taskset -c CPU] PREFIX… exe bench worker ARGS…`.
    pub fn argv(&self, prefix: &[String], args: &[String]) -> Vec<String> {
        let mut argv = Vec::new();
        if let Some(cpus) = &self.pin {
            argv.extend(["taskset".into(), "-c".into(), cpus.clone()]);
        }
        argv.extend(prefix.iter().cloned());
        argv.extend([
            self.exe.display().to_string(),
            "bench".into(),
            "worker".into(),
        ]);
        argv.extend(args.iter().cloned());
        argv
    }

    /// Runs one worker to completion (killed after `timeout`) and reads its result file.
    pub fn run(
        &self,
        prefix: &[String],
        name: &str,
        args: &[String],
        timeout: Duration,
    ) -> Result<WorkerResult, BenchError> {
        static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let result_path = self.scratch.join(format!("result-{n}.json"));
        let stderr_path = self.scratch.join(format!("worker-{n}.stderr"));
        let worker_err = |detail: String| BenchError::Worker {
            test: name.to_string(),
            detail,
        };
        fs::create_dir_all(&self.scratch)
            .map_err(|e| worker_err(format!("scratch directory: {e}")))?;
        let mut full_args = vec![name.to_string()];
        full_args.extend(args.iter().cloned());
        full_args.extend([
            "--dir".into(),
            self.scratch.display().to_string(),
            "--result".into(),
            result_path.display().to_string(),
        ]);
        let argv = self.argv(prefix, &full_args);
        let stderr =
            fs::File::create(&stderr_path).map_err(|e| worker_err(format!("stderr file: {e}")))?;
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| worker_err(format!("cannot start `{}`: {e}", argv.join(" "))))?;
        let start = Instant::now();
        let status = loop {
            if let Ok(Some(status)) = child.try_wait() {
                break Some(status);
            }
            if start.elapsed() > timeout {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        let err_text = fs::read_to_string(&stderr_path).unwrap_or_default();
        let _ = fs::remove_file(&stderr_path);
        let result = fs::read_to_string(&result_path);
        let _ = fs::remove_file(&result_path);
        match (status, result) {
            (None, _) => Err(worker_err(format!("timed out after {timeout:?}"))),
            (Some(_), Ok(text)) => {
                serde_json::from_str(&text).map_err(|e| worker_err(format!("bad result file: {e}")))
            }
            (Some(status), Err(_)) => Err(worker_err(format!(
                "no result ({status}): {}",
                tail(&err_text, 600)
            ))),
        }
    }
}

/// Settings of an overhead run.
#[derive(Clone, Debug)]
pub struct OverheadOptions {
    pub tests: Vec<Test>,
    pub iterations: usize,
    pub duration: Duration,
    pub variants: Vec<Variant>,
    pub workers: WorkerLaunch,
    pub agent: AgentLaunch,
    pub out: PathBuf,
    /// CPUs kept from idling by `SCHED_IDLE` spinners in every configuration (`--busy`).
    pub busy: Vec<usize>,
}

/// Scores of one configuration for one test, across iterations.
#[derive(Clone, Debug, Default)]
pub struct Cell {
    pub scores: Vec<f64>,
    pub errors: Vec<String>,
}

/// The outcome of an overhead run (also written as `report.json`).
#[derive(Clone, Debug)]
pub struct OverheadResult {
    /// `configs[0]` is agent off.
    pub configs: Vec<Variant>,
    /// `cells[config][test]`.
    pub cells: Vec<Vec<Cell>>,
    pub agent_exits: Vec<(usize, usize, AgentExit)>,
    pub json: serde_json::Value,
}

/// Runs the interleaved schedule and writes the report into `opts.out`.
pub fn run(opts: &OverheadOptions, progress: Progress) -> Result<OverheadResult, BenchError> {
    let started = report::now_epoch();
    let info = SystemInfo::collect();
    let mut configs = vec![Variant::off()];
    configs.extend(opts.variants.iter().cloned());
    let mut cells = vec![vec![Cell::default(); opts.tests.len()]; configs.len()];
    let mut agent_exits = Vec::new();
    let schedule = interleaved_schedule(opts.iterations, configs.len());
    let timeout = opts.duration * 10 + Duration::from_secs(60);
    let secs = format!("{}", opts.duration.as_secs_f64());
    let _busy = if opts.busy.is_empty() {
        None
    } else {
        Some(crate::busy::Busy::start(&opts.busy)?)
    };
    for slot in &schedule {
        let config = &configs[slot.config];
        progress(&format!(
            "iteration {}/{} · {}",
            slot.iteration + 1,
            opts.iterations,
            config.label
        ));
        let agent = if config.agent.is_background() {
            progress(&format!("  starting {}", config.agent.label()));
            match BackgroundAgent::start(
                &config.agent,
                &opts.agent,
                None,
                &format!("agent-{}-{}", slot.iteration, slot.config),
            ) {
                Ok(a) => Some(a),
                Err(e) => {
                    progress(&format!("  {e}"));
                    for cell in cells[slot.config].iter_mut() {
                        cell.errors.push(e.to_string());
                    }
                    continue;
                }
            }
        } else {
            None
        };
        let mut prefix = config.wrap.clone();
        prefix.extend(config.agent.prefix(&opts.workers.exe));
        let block_start = Instant::now();
        let ticks_before = agent.as_ref().and_then(BackgroundAgent::cpu_ticks);
        for (ti, test) in opts.tests.iter().enumerate() {
            let args = vec!["--duration".to_string(), secs.clone()];
            match opts.workers.run(&prefix, test.name(), &args, timeout) {
                Ok(r) => {
                    progress(&format!(
                        "  {:<10} {:>14.1} {}",
                        test.name(),
                        r.score,
                        test.unit().as_str()
                    ));
                    cells[slot.config][ti].scores.push(r.score);
                }
                Err(e) => {
                    progress(&format!("  {:<10} failed: {e}", test.name()));
                    cells[slot.config][ti].errors.push(e.to_string());
                }
            }
        }
        if let Some(agent) = agent {
            let ticks_after = agent.cpu_ticks();
            let wall = block_start.elapsed().as_secs_f64().max(1e-9);
            let mut exit = agent.stop();
            if let (Some(b), Some(a)) = (ticks_before, ticks_after) {
                exit.cpu_pct = Some(
                    a.saturating_sub(b) as f64 / crate::sys::clock_ticks() as f64 / wall * 100.0,
                );
            }
            if let Some(s) = &exit.stats {
                progress(&format!(
                    "  agent stats: events_in={} processed={} dropped={} alerts={}",
                    s.events_in,
                    s.processed,
                    s.dropped_total(),
                    s.alerts
                ));
            }
            agent_exits.push((slot.iteration, slot.config, exit));
        }
    }
    let (markdown, json) = render(opts, &info, started, &configs, &cells, &agent_exits);
    report::write_report(&opts.out, &markdown, &json)?;
    plots::from_report(&json, &opts.out)?;
    Ok(OverheadResult {
        configs,
        cells,
        agent_exits,
        json,
    })
}

fn index_of(test: Test, score: Option<f64>) -> Option<f64> {
    Some(unixbench_index(score?, test.baseline()?))
}

/// Geometric mean of the UnixBench indices of one configuration (`None` if any is missing).
fn geomean(tests: &[Test], row: &[Cell]) -> Option<f64> {
    let indices: Vec<f64> = tests
        .iter()
        .zip(row)
        .filter(|(t, _)| t.baseline().is_some())
        .map(|(t, c)| index_of(*t, median(&c.scores)))
        .collect::<Option<Vec<_>>>()?;
    geometric_mean(&indices)
}

fn render(
    opts: &OverheadOptions,
    info: &SystemInfo,
    started: u64,
    configs: &[Variant],
    cells: &[Vec<Cell>],
    agent_exits: &[(usize, usize, AgentExit)],
) -> (String, serde_json::Value) {
    let pinning = opts
        .workers
        .pin
        .as_ref()
        .map_or("not pinned".to_string(), |c| {
            format!("workload pinned with `taskset -c {c}` (wrapper/tracer included)")
        });
    let mut md = report::header(
        "vigil bench overhead",
        info,
        started,
        &[
            ("pinning", pinning.clone()),
            (
                "background agent pinning",
                opts.agent
                    .pin
                    .as_ref()
                    .map_or("not pinned".into(), |c| format!("`taskset -c {c}`")),
            ),
            (
                "idle CPUs",
                if opts.busy.is_empty() {
                    "not equalised: an agent that keeps another vCPU awake raises context1/pipe scores".into()
                } else {
                    format!(
                        "CPUs {:?} kept awake by `SCHED_IDLE` spinners in every configuration (agent off included)",
                        opts.busy
                    )
                },
            ),
            (
                "iterations",
                format!(
                    "{} × {} s per test and configuration, interleaved (off, on, off, on, …); medians",
                    opts.iterations,
                    opts.duration.as_secs_f64()
                ),
            ),
            (
                "configurations",
                configs
                    .iter()
                    .map(|c| c.label.clone())
                    .collect::<Vec<_>>()
                    .join(" · "),
            ),
            (
                "index",
                "score / UnixBench baseline × 10 (baselines: UnixBench 5.1.3 `pgms/index.base`, \"George\", SPARCstation 20-61)".into(),
            ),
        ],
    );
    md.push_str("## Per test (medians)\n\n| test | unit |");
    for c in configs {
        md.push_str(&format!(" {} | index |", c.label));
        if !std::ptr::eq(c, &configs[0]) {
            md.push_str(" change |");
        }
    }
    md.push_str("\n|---|---|");
    for (i, _) in configs.iter().enumerate() {
        md.push_str(if i == 0 { "---|---|" } else { "---|---|---|" });
    }
    md.push('\n');
    let mut tests_json = Vec::new();
    for (ti, test) in opts.tests.iter().enumerate() {
        let off = median(&cells[0][ti].scores);
        md.push_str(&format!("| {} | {} |", test.title(), test.unit().as_str()));
        let mut results = Vec::new();
        for (ci, _) in configs.iter().enumerate() {
            let cell_ = &cells[ci][ti];
            let m = median(&cell_.scores);
            let idx = index_of(*test, m);
            let change = match (off, m) {
                (Some(o), Some(v)) if ci > 0 => percent_change(o, v),
                _ => None,
            };
            md.push_str(&format!(" {} | {} |", cell(m), cell(idx)));
            if ci > 0 {
                let extra = match (off, m, test.unit().higher_is_better()) {
                    (Some(o), Some(v), false) => format!(" ({:+.1} ns)", v - o),
                    _ => String::new(),
                };
                md.push_str(&format!(" {}{extra} |", pct(change)));
            }
            results.push(json!({
                "config": ci,
                "scores": cell_.scores,
                "errors": cell_.errors,
                "median": m,
                "min": cell_.scores.iter().copied().reduce(f64::min),
                "max": cell_.scores.iter().copied().reduce(f64::max),
                "index": idx,
                "change_pct": change,
                "added_ns": match (off, m, test.unit().higher_is_better()) {
                    (Some(o), Some(v), false) if ci > 0 => Some(v - o),
                    _ => None,
                },
            }));
        }
        md.push('\n');
        tests_json.push(json!({
            "name": test.name(),
            "title": test.title(),
            "unit": test.unit().as_str(),
            "higher_is_better": test.unit().higher_is_better(),
            "baseline": test.baseline(),
            "results": results,
        }));
    }
    md.push_str("\n## Overall (geometric mean of the UnixBench indices)\n\n| configuration | index | change vs off |\n|---|---|---|\n");
    let off_g = geomean(&opts.tests, &cells[0]);
    let mut geo_json = Vec::new();
    for (ci, c) in configs.iter().enumerate() {
        let g = geomean(&opts.tests, &cells[ci]);
        let change = match (off_g, g) {
            (Some(o), Some(v)) if ci > 0 => percent_change(o, v),
            _ => None,
        };
        md.push_str(&format!(
            "| {} | {} | {} |\n",
            c.label,
            cell(g),
            pct(change)
        ));
        geo_json.push(json!({"config": ci, "index": g, "change_pct": change}));
    }
    if !opts.tests.iter().any(|t| t.baseline().is_some()) {
        md.push_str("\n(no UnixBench test selected: no index)\n");
    }
    let errors: Vec<String> = cells
        .iter()
        .enumerate()
        .flat_map(|(ci, row)| {
            row.iter().enumerate().flat_map(move |(ti, c)| {
                c.errors
                    .iter()
                    .map(move |e| format!("{} · {}: {e}", configs[ci].label, opts.tests[ti].name()))
            })
        })
        .collect();
    if !errors.is_empty() {
        md.push_str("\n## Failures\n\n");
        for e in &errors {
            md.push_str(&format!("- {e}\n"));
        }
    }
    if !agent_exits.is_empty() {
        md.push_str("\n## Agent runs\n\n| iteration | configuration | exit | agent CPU | VmHWM | events_in | processed | dropped | alerts |\n|---|---|---|---|---|---|---|---|---|\n");
        for (it, ci, exit) in agent_exits {
            let s = exit.stats.as_ref();
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                it + 1,
                configs[*ci].label,
                exit.exit,
                exit.cpu_pct.map_or("-".into(), |c| format!("{c:.1}%")),
                exit.vm_hwm_kib
                    .map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
                s.map_or("-".into(), |s| s.events_in.to_string()),
                s.map_or("-".into(), |s| s.processed.to_string()),
                s.map_or("-".into(), |s| s.dropped_total().to_string()),
                s.map_or("-".into(), |s| s.alerts.to_string()),
            ));
        }
    }
    md.push_str("\nPlots: `overhead-index.svg` (UnixBench indices), `overhead-change.svg` (speed change vs agent off, negative = slower), `overhead-ns.svg` (ns per loop).\n");
    let json = json!({
        "bench": "overhead",
        "started": started,
        "system": info,
        "pinning": opts.workers.pin,
        "iterations": opts.iterations,
        "duration_s": opts.duration.as_secs_f64(),
        "configs": configs.iter().map(|c| json!({
            "label": c.label, "agent": c.agent.label(), "wrap": c.wrap,
        })).collect::<Vec<_>>(),
        "tests": tests_json,
        "geomean": geo_json,
        "agent_runs": agent_exits.iter().map(|(it, ci, e)| json!({
            "iteration": it, "config": ci, "exit": e.exit, "stats": e.stats,
            "cpu_pct": e.cpu_pct, "vm_hwm_kib": e.vm_hwm_kib, "stderr_tail": e.stderr_tail,
        })).collect::<Vec<_>>(),
        "errors": errors,
    });
    (md, json)
}

/// Removes a scratch directory made for a run.
pub fn clean_scratch(dir: &Path) {
    let _ = fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_puts_taskset_then_prefix_then_worker() {
        let w = WorkerLaunch {
            exe: PathBuf::from("/v"),
            pin: Some("1".into()),
            scratch: PathBuf::from("/tmp/x"),
        };
        let argv = w.argv(&["strace".into(), "-f".into()], &["pipe".into()]);
        assert_eq!(
            argv,
            ["taskset", "-c", "1", "strace", "-f", "/v", "bench", "worker", "pipe"],
            "argv order"
        );
    }

    #[test]
    fn geomean_needs_every_index() {
        let tests = [Test::Pipe, Test::Getpid, Test::Spawn];
        let full = vec![
            Cell {
                scores: vec![12_440.0],
                errors: vec![],
            },
            Cell {
                scores: vec![],
                errors: vec![],
            },
            Cell {
                scores: vec![1260.0, 126.0, 12_600.0],
                errors: vec![],
            },
        ];
        let g = geomean(&tests, &full).unwrap();
        assert!(
            (g - 31.622_776_6).abs() < 1e-6,
            "sqrt(10 * 100) ignoring getpid: {g}"
        );
        let missing = vec![Cell::default(), Cell::default(), full[2].clone()];
        assert_eq!(geomean(&tests, &missing), None, "a missing index → no mean");
    }
}

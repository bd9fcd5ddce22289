//! `vigil bench overhead`: every test with the agent off and with each agent configuration on,
//! interleaved (off, on, off, on, …), medians, UnixBench indices and their geometric mean, and
//! the change against agent-off.
//!
//! A background agent runs for one iteration's block of tests, or, with `agent_per_test`, for
//! one test (started before it, stopped after it), so that its CPU, peak RSS, drops and alerts
//! belong to one row. An agent that exits before it is stopped has died: its test's score is
//! dropped and the tables say "died"; one that counted drops shows "dropped N" instead of its
//! change. With `canary`, each agent run ends with that many opens of `/etc/shadow` by a tagged
//! process (`vigil bench worker canary`), and the alerts naming the tag are counted: alerts
//! expected vs received. `redis` and `nginx` are servers the bench starts itself
//! ([`crate::servers`]).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;

use crate::agent::{tail, AgentExit, AgentLaunch, AgentSpec, BackgroundAgent};
use crate::plots;
use crate::report::{self, cell, pct};
use crate::servers::{self, Server};
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
    /// Start a background agent for each test instead of each iteration's block of tests.
    pub agent_per_test: bool,
    /// Opens of the canary file at the end of each background agent's run (0: none).
    pub canary: u64,
    /// Facts for the report's header (`(name, value)`), e.g. the agents' versions.
    pub notes: Vec<(String, String)>,
}

/// The file the canary opens: a sensitive file that Falco's stable rules report on every read
/// by an untrusted program (`Read sensitive file untrusted`).
pub const CANARY_FILE: &str = "/etc/shadow";

/// A tag for one canary, unique in this process, that no other tag contains.
pub fn canary_tag() -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("vigil-canary-{}-{n}-", std::process::id())
}

/// Runs the canary: `count` opens of [`CANARY_FILE`], 20 ms apart, from a worker whose
/// command line holds `tag`; tells `agent` to expect them.
pub fn run_canary(
    workers: &WorkerLaunch,
    agent: &mut BackgroundAgent,
    count: u64,
) -> Result<(), BenchError> {
    let tag = canary_tag();
    agent.expect_alerts(&tag, count);
    canary_worker(workers, &tag, count)
}

/// The canary's worker alone (the agent told beforehand with `expect_alerts`).
pub fn canary_worker(workers: &WorkerLaunch, tag: &str, count: u64) -> Result<(), BenchError> {
    let args = [
        "--count".to_string(),
        count.to_string(),
        "--path".into(),
        CANARY_FILE.into(),
        "--tag".into(),
        tag.to_string(),
    ];
    workers.run(&[], "canary", &args, Duration::from_secs(60))?;
    Ok(())
}

/// One background agent's run: which iteration and configuration, the test it ran for (with
/// `agent_per_test`; else the iteration's block), and what it left.
#[derive(Clone, Debug)]
pub struct AgentRun {
    pub iteration: usize,
    pub config: usize,
    pub test: Option<usize>,
    pub exit: AgentExit,
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
    pub agent_runs: Vec<AgentRun>,
    pub json: serde_json::Value,
}

/// One unit of the schedule: an iteration, a configuration, and the tests it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Block {
    iteration: usize,
    config: usize,
    /// Indices into the tests; one with `agent_per_test`.
    tests: Vec<usize>,
    /// Whether the block's agent ran for one test only.
    per_test: bool,
}

/// The order of a run: per iteration, every configuration's block of all tests
/// (off, on₁, on₂…), or with `per_test`, per iteration and test, every configuration in turn.
fn blocks(iterations: usize, configs: usize, tests: usize, per_test: bool) -> Vec<Block> {
    if !per_test {
        return interleaved_schedule(iterations, configs)
            .into_iter()
            .map(|slot| Block {
                iteration: slot.iteration,
                config: slot.config,
                tests: (0..tests).collect(),
                per_test: false,
            })
            .collect();
    }
    let mut out = Vec::new();
    for iteration in 0..iterations {
        for test in 0..tests {
            for config in 0..configs {
                out.push(Block {
                    iteration,
                    config,
                    tests: vec![test],
                    per_test: true,
                });
            }
        }
    }
    out
}

/// Runs the interleaved schedule and writes the report into `opts.out`.
pub fn run(opts: &OverheadOptions, progress: Progress) -> Result<OverheadResult, BenchError> {
    let started = report::now_epoch();
    let info = SystemInfo::collect();
    let mut configs = vec![Variant::off()];
    configs.extend(opts.variants.iter().cloned());
    let mut cells = vec![vec![Cell::default(); opts.tests.len()]; configs.len()];
    let mut agent_runs: Vec<AgentRun> = Vec::new();
    let schedule = blocks(
        opts.iterations,
        configs.len(),
        opts.tests.len(),
        opts.agent_per_test,
    );
    let timeout = opts.duration * 10 + Duration::from_secs(60);
    let secs = format!("{}", opts.duration.as_secs_f64());
    let _busy = if opts.busy.is_empty() {
        None
    } else {
        Some(crate::busy::Busy::start(&opts.busy)?)
    };
    for block in &schedule {
        let config = &configs[block.config];
        progress(&format!(
            "iteration {}/{} · {}{}",
            block.iteration + 1,
            opts.iterations,
            config.label,
            if block.per_test {
                format!(" · {}", opts.tests[block.tests[0]].name())
            } else {
                String::new()
            }
        ));
        let mut agent = if config.agent.is_background() {
            progress(&format!("  starting {}", config.agent.label()));
            match BackgroundAgent::start(
                &config.agent,
                &opts.agent,
                None,
                &format!(
                    "agent-{}-{}{}",
                    block.iteration,
                    block.config,
                    if block.per_test {
                        format!("-{}", opts.tests[block.tests[0]].name())
                    } else {
                        String::new()
                    }
                ),
            ) {
                Ok(a) => Some(a),
                Err(e) => {
                    progress(&format!("  {e}"));
                    for &ti in &block.tests {
                        cells[block.config][ti].errors.push(e.to_string());
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
        for &ti in &block.tests {
            let test = opts.tests[ti];
            if let Some(a) = agent.as_mut() {
                if !a.alive() {
                    let e = format!(
                        "the agent had died before the test ({})",
                        a.died().unwrap_or("?")
                    );
                    progress(&format!("  {:<10} skipped: {e}", test.name()));
                    cells[block.config][ti].errors.push(e);
                    continue;
                }
            }
            let result = match Server::of(test) {
                Some(server) => servers::run(
                    server,
                    opts.workers.pin.as_deref(),
                    &prefix,
                    &opts.workers.scratch,
                    opts.duration,
                ),
                None => {
                    let args = vec!["--duration".to_string(), secs.clone()];
                    opts.workers.run(&prefix, test.name(), &args, timeout)
                }
            };
            let died = agent.as_mut().is_some_and(|a| !a.alive());
            match result {
                Ok(_) if died => {
                    let e = format!(
                        "the agent died during the test ({}): score not counted",
                        agent
                            .as_ref()
                            .and_then(BackgroundAgent::died)
                            .unwrap_or("?")
                    );
                    progress(&format!("  {:<10} {e}", test.name()));
                    cells[block.config][ti].errors.push(e);
                }
                Ok(r) => {
                    progress(&format!(
                        "  {:<10} {:>14.1} {}",
                        test.name(),
                        r.score,
                        test.unit().as_str()
                    ));
                    cells[block.config][ti].scores.push(r.score);
                }
                Err(e) => {
                    progress(&format!("  {:<10} failed: {e}", test.name()));
                    cells[block.config][ti].errors.push(e.to_string());
                }
            }
        }
        if let Some(mut agent) = agent {
            let ticks_after = agent.cpu_ticks();
            let wall = block_start.elapsed().as_secs_f64().max(1e-9);
            if opts.canary > 0 && agent.alive() {
                if let Err(e) = run_canary(&opts.workers, &mut agent, opts.canary) {
                    progress(&format!("  canary failed: {e}"));
                    for &ti in &block.tests {
                        cells[block.config][ti].errors.push(format!("canary: {e}"));
                    }
                }
                agent.wait_alerts(Duration::from_secs(5));
            }
            let mut exit = agent.stop();
            if let (Some(b), Some(a)) = (ticks_before, ticks_after) {
                exit.cpu_pct = Some(
                    a.saturating_sub(b) as f64 / crate::sys::clock_ticks() as f64 / wall * 100.0,
                );
            }
            if let Some(s) = &exit.stats {
                progress(&format!(
                    "  agent stats: events_in={} processed={} dropped={} alerts={}{}",
                    s.events_in,
                    s.processed,
                    s.dropped_total(),
                    s.alerts,
                    exit.canary.as_ref().map_or(String::new(), |c| format!(
                        " canary alerts {}/{}",
                        c.received, c.expected
                    ))
                ));
            }
            if let Some(how) = &exit.died {
                progress(&format!("  the agent died: {how}"));
            }
            agent_runs.push(AgentRun {
                iteration: block.iteration,
                config: block.config,
                test: block.per_test.then(|| block.tests[0]),
                exit,
            });
        }
    }
    let (markdown, json) = render(opts, &info, started, &configs, &cells, &agent_runs);
    report::write_report(&opts.out, &markdown, &json)?;
    plots::from_report(&json, &opts.out)?;
    Ok(OverheadResult {
        configs,
        cells,
        agent_runs,
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
    agent_runs: &[AgentRun],
) -> (String, serde_json::Value) {
    let pinning = opts
        .workers
        .pin
        .as_ref()
        .map_or("not pinned".to_string(), |c| {
            format!("workload pinned with `taskset -c {c}` (wrapper/tracer included)")
        });
    let mut settings: Vec<(&str, String)> = vec![
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
            (
                "background agents",
                if opts.agent_per_test {
                    "started for each test and stopped after it: CPU, VmHWM, drops and alerts are the test's own".into()
                } else {
                    "started for each iteration's block of tests: CPU, VmHWM, drops and alerts are the block's".into()
                },
            ),
    ];
    if opts.canary > 0 {
        settings.push((
            "alerts expected",
            format!(
                "each background agent run ends with {} opens of `{CANARY_FILE}` by `vigil bench worker canary --tag TAG` (20 ms apart); received = lines of the agent's stdout holding TAG",
                opts.canary
            ),
        ));
    }
    if opts.tests.iter().any(|t| Server::of(*t).is_some()) {
        settings.push((
            "servers",
            format!(
                "on loopback, started by the bench under the configuration's prefix (`vigil run --` for run), pinned with --pin, stopped after each test; clients unwrapped and unpinned: `redis-benchmark -c 50 -n {} -t set,get` ({} req/s sizing), `wrk -t 1 -c 16 -d {} s` on a 4 KiB file",
                servers::redis_requests(opts.duration),
                servers::REDIS_REQUESTS_PER_SECOND,
                opts.duration.as_secs_f64().ceil().max(1.0)
            ),
        ));
    }
    for (k, v) in &opts.notes {
        settings.push((k.as_str(), v.clone()));
    }
    let mut md = report::header("vigil bench overhead", info, started, &settings);
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
                let agg = RowAgent::of(agent_runs, ci, Some(ti));
                match agg.flag() {
                    Some(flag) => md.push_str(&format!(" {flag} |")),
                    None => md.push_str(&format!(" {}{extra} |", pct(change))),
                }
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
    let (side_md, side_json) = side_by_side(opts, configs, cells, agent_runs);
    md.push_str(&side_md);
    if !agent_runs.is_empty() {
        md.push_str("\n## Agent runs\n\n| iteration | configuration | test | exit | agent CPU | VmHWM | events_in | processed | dropped | alerts | canary alerts |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
        for run in agent_runs {
            let exit = &run.exit;
            let s = exit.stats.as_ref();
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                run.iteration + 1,
                configs[run.config].label,
                run.test.map_or("all", |t| opts.tests[t].name()),
                exit.exit,
                exit.cpu_pct.map_or("-".into(), |c| format!("{c:.1}%")),
                exit.vm_hwm_kib
                    .map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
                s.map_or("-".into(), |s| s.events_in.to_string()),
                s.map_or("-".into(), |s| s.processed.to_string()),
                s.map_or("-".into(), |s| s.dropped_total().to_string()),
                s.map_or("-".into(), |s| s.alerts.to_string()),
                exit.canary
                    .as_ref()
                    .map_or("-".into(), |c| format!("{} / {}", c.received, c.expected)),
            ));
        }
    }
    let stalled: Vec<String> = agent_runs
        .iter()
        .flat_map(|run| {
            run.exit.stalled_starts.iter().map(move |why| {
                format!(
                    "iteration {} · {} · {}: {why}",
                    run.iteration + 1,
                    configs[run.config].label,
                    run.test.map_or("all", |t| opts.tests[t].name())
                )
            })
        })
        .collect();
    if !stalled.is_empty() {
        md.push_str("\n## Stalled starts (the agent was started again; its figures come from the next start)\n\n");
        for s in &stalled {
            md.push_str(&format!("- {s}\n"));
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
        "agent_per_test": opts.agent_per_test,
        "canary": opts.canary,
        "notes": opts.notes.iter().map(|(k, v)| json!({"name": k, "value": v})).collect::<Vec<_>>(),
        "agent_runs": agent_runs.iter().map(|r| json!({
            "iteration": r.iteration, "config": r.config,
            "test": r.test.map(|t| opts.tests[t].name()),
            "exit": r.exit.exit, "died": r.exit.died, "stats": r.exit.stats,
            "canary": r.exit.canary,
            "cpu_pct": r.exit.cpu_pct, "vm_hwm_kib": r.exit.vm_hwm_kib,
            "stderr_tail": r.exit.stderr_tail,
            "stalled_starts": r.exit.stalled_starts,
        })).collect::<Vec<_>>(),
        "side_by_side": side_json,
        "errors": errors,
    });
    (md, json)
}

/// What the background agent runs of one configuration left, over the runs that covered one
/// test (`Some(ti)`: its own runs, or the blocks it was part of) or all tests (`None`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RowAgent {
    pub runs: usize,
    pub died: usize,
    pub dropped: u64,
    pub events_in: u64,
    /// Runs that gave event counters.
    pub counted: usize,
    pub cpu_pct: Vec<f64>,
    pub vm_hwm_kib: Option<u64>,
    pub alerts_expected: u64,
    pub alerts_received: u64,
    pub canaries: usize,
}

impl RowAgent {
    pub fn of(runs: &[AgentRun], config: usize, test: Option<usize>) -> RowAgent {
        let mut agg = RowAgent::default();
        for r in runs.iter().filter(|r| {
            r.config == config && (test.is_none() || r.test.is_none() || r.test == test)
        }) {
            agg.runs += 1;
            agg.died += usize::from(r.exit.died.is_some());
            agg.dropped += r.exit.dropped();
            if let Some(s) = &r.exit.stats {
                agg.counted += 1;
                agg.events_in += s.events_in;
            }
            agg.cpu_pct.extend(r.exit.cpu_pct);
            agg.vm_hwm_kib = agg.vm_hwm_kib.max(r.exit.vm_hwm_kib);
            if let Some(c) = &r.exit.canary {
                agg.canaries += 1;
                agg.alerts_expected += c.expected;
                agg.alerts_received += c.received;
            }
        }
        agg
    }

    /// What replaces a figure: `died (N of M runs)` or `dropped N`; `None` when neither.
    pub fn flag(&self) -> Option<String> {
        if self.died > 0 {
            Some(format!("died ({} of {} runs)", self.died, self.runs))
        } else if self.dropped > 0 {
            Some(format!("dropped {}", self.dropped))
        } else {
            None
        }
    }

    fn status(&self) -> &'static str {
        if self.died > 0 {
            "died"
        } else if self.dropped > 0 {
            "dropped"
        } else {
            "ok"
        }
    }

    fn cells(&self) -> [String; 5] {
        if self.runs == 0 {
            return ["-".into(), "-".into(), "-".into(), "-".into(), "-".into()];
        }
        [
            median(&self.cpu_pct).map_or("-".into(), |c| format!("{c:.1}%")),
            self.vm_hwm_kib
                .map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
            if self.counted == 0 {
                "-".into()
            } else {
                self.events_in.to_string()
            },
            if self.counted == 0 {
                "no counters".into()
            } else {
                self.dropped.to_string()
            },
            if self.canaries == 0 {
                "-".into()
            } else {
                format!("{} / {}", self.alerts_expected, self.alerts_received)
            },
        ]
    }
}

/// The side-by-side table: per test and configuration, the workload's change vs agent off
/// (speed: negative = slower, whatever the unit) or what replaced it, and what the agent
/// used; then every configuration over all tests (geometric mean of the UnixBench indices).
fn side_by_side(
    opts: &OverheadOptions,
    configs: &[Variant],
    cells: &[Vec<Cell>],
    agent_runs: &[AgentRun],
) -> (String, serde_json::Value) {
    let mut md = String::from(
        "\n## Side by side\n\nChange = speed vs agent off (negative = slower, whatever the unit); \
         \"died\" or \"dropped N\" replace it when the agent died or counted drops. Agent CPU: \
         median of its runs, % of one CPU; VmHWM: the highest; events and drops: summed; alerts: \
         canary alerts expected / received, summed.\n\n\
         | test | configuration | median | change vs off | agent CPU | VmHWM | events in | dropped | alerts expected / received |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut rows = Vec::new();
    for (ti, test) in opts.tests.iter().enumerate() {
        let off = median(&cells[0][ti].scores);
        for (ci, c) in configs.iter().enumerate() {
            let m = median(&cells[ci][ti].scores);
            let change = match (off, m) {
                (Some(o), Some(v)) if ci > 0 => {
                    plots::speed_change(test.unit().higher_is_better(), o, v)
                }
                _ => None,
            };
            let agg = RowAgent::of(agent_runs, ci, Some(ti));
            let shown = match (ci, agg.flag()) {
                (0, _) => "-".to_string(),
                (_, Some(flag)) => flag,
                (_, None) => pct(change),
            };
            let [cpu, hwm, events, dropped, alerts] = agg.cells();
            md.push_str(&format!(
                "| {} | {} | {} {} | {shown} | {cpu} | {hwm} | {events} | {dropped} | {alerts} |\n",
                test.name(),
                c.label,
                cell(m),
                test.unit().as_str(),
            ));
            rows.push(row_json(Some(test.name()), ci, m, change, &agg));
        }
    }
    let off_g = geomean(&opts.tests, &cells[0]);
    for (ci, c) in configs.iter().enumerate() {
        let g = geomean(&opts.tests, &cells[ci]);
        let change = match (off_g, g) {
            (Some(o), Some(v)) if ci > 0 => percent_change(o, v),
            _ => None,
        };
        let agg = RowAgent::of(agent_runs, ci, None);
        let shown = match (ci, agg.flag()) {
            (0, _) => "-".to_string(),
            (_, Some(flag)) => flag,
            (_, None) => pct(change),
        };
        let [cpu, hwm, events, dropped, alerts] = agg.cells();
        md.push_str(&format!(
            "| **all** (geo-mean index) | {} | {} | {shown} | {cpu} | {hwm} | {events} | {dropped} | {alerts} |\n",
            c.label,
            cell(g),
        ));
        rows.push(row_json(None, ci, g, change, &agg));
    }
    (md, serde_json::Value::Array(rows))
}

fn row_json(
    test: Option<&str>,
    config: usize,
    value: Option<f64>,
    change: Option<f64>,
    agg: &RowAgent,
) -> serde_json::Value {
    json!({
        "test": test,
        "config": config,
        "value": value,
        "change_pct": change,
        "status": agg.status(),
        "agent_runs": agg.runs,
        "died": agg.died,
        "dropped": if agg.counted > 0 { Some(agg.dropped) } else { None },
        "events_in": if agg.counted > 0 { Some(agg.events_in) } else { None },
        "agent_cpu_pct_median": median(&agg.cpu_pct),
        "vm_hwm_kib_max": agg.vm_hwm_kib,
        "alerts_expected": if agg.canaries > 0 { Some(agg.alerts_expected) } else { None },
        "alerts_received": if agg.canaries > 0 { Some(agg.alerts_received) } else { None },
    })
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
    fn per_test_blocks_interleave_the_configurations_within_each_test() {
        let b = blocks(2, 3, 2, true);
        assert_eq!(b.len(), 12, "iterations × tests × configurations");
        let order: Vec<(usize, usize, usize)> = b
            .iter()
            .map(|b| (b.iteration, b.tests[0], b.config))
            .collect();
        assert_eq!(
            order[..6],
            [
                (0, 0, 0),
                (0, 0, 1),
                (0, 0, 2),
                (0, 1, 0),
                (0, 1, 1),
                (0, 1, 2)
            ],
            "test by test, every configuration in turn"
        );
        assert!(b.iter().all(|b| b.per_test && b.tests.len() == 1));
        let whole = blocks(1, 2, 3, false);
        assert_eq!(whole.len(), 2, "one block per configuration");
        assert_eq!(whole[1].tests, vec![0, 1, 2], "every test in a block");
    }

    fn run(config: usize, test: Option<usize>, dropped: u64, died: bool) -> AgentRun {
        AgentRun {
            iteration: 0,
            config,
            test,
            exit: AgentExit {
                stats: Some(crate::agent::WatchStats {
                    events_in: 100,
                    processed: 100 - dropped,
                    dropped,
                    ..Default::default()
                }),
                cpu_pct: Some(10.0 + dropped as f64),
                vm_hwm_kib: Some(1000 + dropped),
                died: died.then(|| "signal: 11 (SIGSEGV)".to_string()),
                canary: Some(crate::agent::Canary {
                    expected: 3,
                    received: 3 - u64::from(died),
                }),
                ..Default::default()
            },
        }
    }

    #[test]
    fn an_agents_row_sums_its_runs_and_flags_death_before_drops() {
        let runs = [
            run(1, Some(0), 5, false),
            run(1, Some(1), 0, true),
            run(1, None, 1, false),
            run(2, Some(0), 0, false),
        ];
        let first = RowAgent::of(&runs, 1, Some(0));
        assert_eq!(first.runs, 2, "its own run and the block that covered it");
        assert_eq!(first.dropped, 6, "drops summed");
        assert_eq!(first.flag().as_deref(), Some("dropped 6"), "drops shown");
        assert_eq!(
            (first.alerts_expected, first.alerts_received),
            (6, 6),
            "canary alerts summed"
        );
        assert_eq!(first.vm_hwm_kib, Some(1005), "the highest VmHWM");
        let second = RowAgent::of(&runs, 1, Some(1));
        assert_eq!(
            second.flag().as_deref(),
            Some("died (1 of 2 runs)"),
            "death shown before drops"
        );
        assert_eq!(RowAgent::of(&runs, 1, None).runs, 3, "all runs");
        let clean = RowAgent::of(&runs, 2, None);
        assert_eq!(clean.flag(), None, "no flag: the figure stays");
        let none = RowAgent::of(&runs, 3, None);
        assert_eq!(none.cells(), ["-", "-", "-", "-", "-"].map(String::from));
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

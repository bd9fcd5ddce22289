//! `vigil bench idle`: what an agent costs on a host with nothing for it to do — CPU and
//! wakeups per second over a window, from `/proc`: `utime`+`stime` (`/proc/PID/stat`, the
//! whole process, exited threads included) and, per thread (`/proc/PID/task/TID/`),
//! `utime`+`stime`, the time on CPU in nanoseconds (`schedstat`) and
//! `voluntary_ctxt_switches` (each one a sleep that ended in a wakeup) and
//! `nonvoluntary_ctxt_switches`. Each agent is started, left to settle, then measured; with
//! several agents (e.g. two builds) and rounds, the runs are interleaved.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::json;

use crate::agent::{AgentLaunch, AgentSpec, BackgroundAgent};
use crate::report::{self, cell};
use crate::system::{self, SystemInfo};
use crate::{sys, BenchError, Progress};

/// The web server's thread name in `vigil watch` (reported apart: the goal leaves it
/// aside).
pub const WEB_THREAD: &str = "vigil-web";

/// Settings of an idle run.
#[derive(Clone, Debug)]
pub struct IdleOptions {
    pub agents: Vec<AgentSpec>,
    /// The measured window.
    pub duration: Duration,
    /// How long each agent runs before the window opens (start-up work is not idle work).
    pub settle: Duration,
    pub rounds: usize,
    pub launch: AgentLaunch,
    pub out: PathBuf,
}

/// One thread's counters at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadSample {
    pub tid: i32,
    pub name: String,
    /// utime + stime, clock ticks.
    pub cpu_ticks: u64,
    /// Time on CPU (`schedstat`), nanoseconds.
    pub run_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

/// A thread's use of the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThreadUse {
    pub tid: i32,
    pub name: String,
    pub cpu_ticks: u64,
    pub run_ns: u64,
    pub voluntary: u64,
    pub involuntary: u64,
}

/// `voluntary_ctxt_switches` and `nonvoluntary_ctxt_switches` of a `status` file.
pub fn parse_ctxt_switches(status: &str) -> Option<(u64, u64)> {
    let field = |key: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.trim().parse().ok())
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

/// The first field of a `schedstat` file: nanoseconds on CPU.
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Every thread of `pid` now (threads that vanish while being read are left out).
pub fn threads_of(pid: i32) -> Vec<ThreadSample> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut threads: Vec<ThreadSample> = dir
        .flatten()
        .filter_map(|entry| {
            let tid: i32 = entry.file_name().to_str()?.parse().ok()?;
            let path = entry.path();
            let (name, stat) = system::parse_stat(&fs::read_to_string(path.join("stat")).ok()?)?;
            let (voluntary, involuntary) =
                parse_ctxt_switches(&fs::read_to_string(path.join("status")).ok()?)?;
            let run_ns = fs::read_to_string(path.join("schedstat"))
                .ok()
                .as_deref()
                .and_then(parse_schedstat)
                .unwrap_or(0);
            Some(ThreadSample {
                tid,
                name,
                cpu_ticks: stat.cpu_ticks,
                run_ns,
                voluntary,
                involuntary,
            })
        })
        .collect();
    threads.sort_by_key(|t| t.tid);
    threads
}

/// What each thread alive at the end used since `before` (a thread born during the window
/// counts from zero; one that ended is gone, its CPU still in the process's total).
pub fn usage(before: &[ThreadSample], after: &[ThreadSample]) -> Vec<ThreadUse> {
    after
        .iter()
        .map(|a| {
            let b = before
                .iter()
                .find(|b| b.tid == a.tid)
                .cloned()
                .unwrap_or_default();
            ThreadUse {
                tid: a.tid,
                name: a.name.clone(),
                cpu_ticks: a.cpu_ticks.saturating_sub(b.cpu_ticks),
                run_ns: a.run_ns.saturating_sub(b.run_ns),
                voluntary: a.voluntary.saturating_sub(b.voluntary),
                involuntary: a.involuntary.saturating_sub(b.involuntary),
            }
        })
        .collect()
}

/// One agent's window.
#[derive(Clone, Debug, Default, Serialize)]
pub struct IdleRun {
    pub agent: String,
    pub round: usize,
    pub seconds: f64,
    /// utime+stime of the whole process over the window, % of one CPU.
    pub cpu_pct: Option<f64>,
    pub threads: Vec<ThreadUse>,
    /// `/proc/loadavg` at the start and the end of the window (how idle the host was).
    pub loadavg: (String, String),
    pub error: Option<String>,
}

impl IdleRun {
    /// Voluntary context switches per second of the threads `keep` selects.
    pub fn wakeups_per_s(&self, keep: impl Fn(&ThreadUse) -> bool) -> f64 {
        let n: u64 = self
            .threads
            .iter()
            .filter(|t| keep(t))
            .map(|t| t.voluntary)
            .sum();
        n as f64 / self.seconds.max(1e-9)
    }

    /// Time on CPU (schedstat) of the threads `keep` selects, % of one CPU.
    pub fn run_pct(&self, keep: impl Fn(&ThreadUse) -> bool) -> f64 {
        let ns: u64 = self
            .threads
            .iter()
            .filter(|t| keep(t))
            .map(|t| t.run_ns)
            .sum();
        ns as f64 / 1e9 / self.seconds.max(1e-9) * 100.0
    }
}

fn loadavg() -> String {
    fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn measure(opts: &IdleOptions, spec: &AgentSpec, round: usize, progress: Progress) -> IdleRun {
    let mut run = IdleRun {
        agent: spec.label(),
        round,
        ..IdleRun::default()
    };
    let name = format!("idle-{round}-{}", run.agent.replace(['/', ' '], "_"));
    let agent = match BackgroundAgent::start(spec, &opts.launch, None, &name) {
        Ok(agent) => agent,
        Err(e) => {
            run.error = Some(e.to_string());
            return run;
        }
    };
    std::thread::sleep(opts.settle);
    let pid = agent.pid as i32;
    let hz = sys::clock_ticks() as f64;
    let load_before = loadavg();
    let before = threads_of(pid);
    let ticks_before = agent.cpu_ticks();
    let start = Instant::now();
    std::thread::sleep(opts.duration);
    let after = threads_of(pid);
    let ticks_after = agent.cpu_ticks();
    run.seconds = start.elapsed().as_secs_f64();
    run.loadavg = (load_before, loadavg());
    let exit = agent.stop();
    if after.is_empty() {
        run.error = Some(format!("the agent had exited: {}", exit.stderr_tail));
        return run;
    }
    run.threads = usage(&before, &after);
    if let (Some(b), Some(a)) = (ticks_before, ticks_after) {
        run.cpu_pct = Some(a.saturating_sub(b) as f64 / hz / run.seconds * 100.0);
    }
    progress(&format!(
        "  CPU {}% (utime+stime), wakeups {:.1}/s ({:.1}/s without {WEB_THREAD}), load {} → {}",
        cell(run.cpu_pct),
        run.wakeups_per_s(|_| true),
        run.wakeups_per_s(|t| t.name != WEB_THREAD),
        run.loadavg.0,
        run.loadavg.1,
    ));
    run
}

/// Measures every agent `rounds` times, interleaved, and writes the report.
pub fn run(opts: &IdleOptions, progress: Progress) -> Result<Vec<IdleRun>, BenchError> {
    let started = report::now_epoch();
    let info = SystemInfo::collect();
    let mut runs = Vec::new();
    for round in 0..opts.rounds.max(1) {
        for spec in &opts.agents {
            progress(&format!(
                "round {} · {} · settle {:?}, measure {:?}",
                round + 1,
                spec.label(),
                opts.settle,
                opts.duration
            ));
            runs.push(measure(opts, spec, round, progress));
        }
    }
    let (md, json) = render(opts, &info, started, &runs);
    report::write_report(&opts.out, &md, &json)?;
    plots(&json, &opts.out)?;
    Ok(runs)
}

fn render(
    opts: &IdleOptions,
    info: &SystemInfo,
    started: u64,
    runs: &[IdleRun],
) -> (String, serde_json::Value) {
    let mut md = report::header(
        "vigil bench idle",
        info,
        started,
        &[
            (
                "agents",
                opts.agents
                    .iter()
                    .map(AgentSpec::label)
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            (
                "window",
                format!(
                    "{} s after {} s of settling, {} round(s), agents interleaved",
                    opts.duration.as_secs_f64(),
                    opts.settle.as_secs_f64(),
                    opts.rounds.max(1)
                ),
            ),
            (
                "CPU",
                "utime+stime of the process (/proc/PID/stat, exited threads included) over the window, % of one CPU; `on CPU` is the threads' schedstat time (ns resolution)".into(),
            ),
            (
                "wakeups",
                format!("voluntary context switches per second of every thread (/proc/PID/task/TID/status), and without the web server's thread `{WEB_THREAD}`"),
            ),
        ],
    );
    md.push_str("| agent | round | CPU (utime+stime) | on CPU (schedstat) | wakeups/s | wakeups/s without web | involuntary/s | load avg start → end |\n|---|---|---|---|---|---|---|---|\n");
    for r in runs {
        let involuntary: u64 = r.threads.iter().map(|t| t.involuntary).sum();
        md.push_str(&format!(
            "| {} | {} | {} | {:.3}% | {:.1} | {:.1} | {:.1} | {} → {} |\n",
            r.agent,
            r.round + 1,
            r.cpu_pct.map_or("-".into(), |c| format!("{c:.3}%")),
            r.run_pct(|_| true),
            r.wakeups_per_s(|_| true),
            r.wakeups_per_s(|t| t.name != WEB_THREAD),
            involuntary as f64 / r.seconds.max(1e-9),
            r.loadavg.0,
            r.loadavg.1,
        ));
    }
    md.push_str("\n## Threads\n\n| agent | round | thread | CPU ticks | on CPU | wakeups/s | involuntary/s |\n|---|---|---|---|---|---|---|\n");
    for r in runs {
        for t in &r.threads {
            md.push_str(&format!(
                "| {} | {} | {} ({}) | {} | {:.3}% | {:.2} | {:.2} |\n",
                r.agent,
                r.round + 1,
                t.name,
                t.tid,
                t.cpu_ticks,
                t.run_ns as f64 / 1e9 / r.seconds.max(1e-9) * 100.0,
                t.voluntary as f64 / r.seconds.max(1e-9),
                t.involuntary as f64 / r.seconds.max(1e-9),
            ));
        }
    }
    let errors: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.error
                .as_ref()
                .map(|e| format!("{} round {}: {e}", r.agent, r.round + 1))
        })
        .collect();
    if !errors.is_empty() {
        md.push_str("\n## Failures\n\n");
        for e in &errors {
            md.push_str(&format!("- {e}\n"));
        }
    }
    let runs_json: Vec<serde_json::Value> = runs
        .iter()
        .map(|r| {
            json!({
                "agent": r.agent,
                "round": r.round + 1,
                "seconds": r.seconds,
                "cpu_pct": r.cpu_pct,
                "on_cpu_pct": r.run_pct(|_| true),
                "wakeups_per_s": r.wakeups_per_s(|_| true),
                "wakeups_per_s_without_web": r.wakeups_per_s(|t| t.name != WEB_THREAD),
                "threads": r.threads,
                "loadavg": [r.loadavg.0, r.loadavg.1],
                "error": r.error,
            })
        })
        .collect();
    let json = json!({
        "bench": "idle",
        "started": started,
        "system": info,
        "duration_s": opts.duration.as_secs_f64(),
        "settle_s": opts.settle.as_secs_f64(),
        "agents": opts.agents.iter().map(AgentSpec::label).collect::<Vec<_>>(),
        "runs": runs_json,
        "errors": errors,
    });
    (md, json)
}

/// The plot of an idle report: wakeups per second per agent and round.
pub fn plots(
    report: &serde_json::Value,
    dir: &std::path::Path,
) -> Result<Vec<PathBuf>, BenchError> {
    let runs = report
        .get("runs")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| BenchError::Invalid {
            what: "report".into(),
            detail: "`runs` is not a list".into(),
        })?;
    let label = |r: &serde_json::Value| {
        format!(
            "{} #{}",
            r.get("agent").and_then(|v| v.as_str()).unwrap_or("?"),
            r.get("round").and_then(|v| v.as_u64()).unwrap_or(0)
        )
    };
    let categories: Vec<String> = runs.iter().map(label).collect();
    let values = |key: &str| -> Vec<Option<f64>> {
        runs.iter()
            .map(|r| r.get(key).and_then(serde_json::Value::as_f64))
            .collect()
    };
    let path = dir.join("idle-wakeups.svg");
    report::bar_chart(
        &path,
        "Idle agent: wakeups per second",
        "voluntary context switches / s",
        &categories,
        &[
            ("every thread".into(), values("wakeups_per_s")),
            (
                format!("without {WEB_THREAD}"),
                values("wakeups_per_s_without_web"),
            ),
        ],
    )?;
    Ok(vec![path])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_context_switches_and_schedstat() {
        let status = "Name:\tvigil\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t1234\n\
                      nonvoluntary_ctxt_switches:\t56\n";
        assert_eq!(parse_ctxt_switches(status), Some((1234, 56)));
        assert_eq!(parse_ctxt_switches("Name:\tx\n"), None);
        assert_eq!(parse_schedstat("4242 17 3\n"), Some(4242));
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn usage_counts_new_threads_from_zero() {
        let t = |tid, name: &str, ticks, vol| ThreadSample {
            tid,
            name: name.into(),
            cpu_ticks: ticks,
            run_ns: ticks * 10_000_000,
            voluntary: vol,
            involuntary: 1,
        };
        let before = [
            t(10, "vigil", 100, 1000),
            t(11, "vigil-web", 5, 500),
            t(12, "gone", 9, 9),
        ];
        let after = [
            t(10, "vigil", 103, 1060),
            t(11, "vigil-web", 5, 3500),
            t(13, "new", 2, 4),
        ];
        let used = usage(&before, &after);
        assert_eq!(used.len(), 3, "threads alive at the end");
        assert_eq!((used[0].cpu_ticks, used[0].voluntary), (3, 60));
        assert_eq!(
            (used[2].cpu_ticks, used[2].voluntary),
            (2, 4),
            "born in the window"
        );
        let run = IdleRun {
            seconds: 60.0,
            threads: used,
            ..IdleRun::default()
        };
        assert_eq!(run.wakeups_per_s(|_| true), (60.0 + 3000.0 + 4.0) / 60.0);
        assert_eq!(run.wakeups_per_s(|t| t.name != WEB_THREAD), 64.0 / 60.0);
        // 5 ticks of 10 ms on CPU in 60 s.
        assert!((run.run_pct(|_| true) - 0.05 / 60.0 * 100.0).abs() < 1e-9);
    }

    #[test]
    fn this_process_has_threads_with_counters() {
        let me = threads_of(std::process::id() as i32);
        assert!(!me.is_empty(), "at least the test's thread");
        assert!(
            me.iter()
                .any(|t| t.run_ns > 0 && t.voluntary + t.involuntary > 0),
            "{me:?}"
        );
    }
}

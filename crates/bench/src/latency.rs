//! `vigil bench latency`: the time from a syscall to its alert on the agent's stdout, at fixed
//! rates of alert-worthy events.
//!
//! The bench writes a one-rule file (`trigger.yaml`: an `openat` of a file under its own
//! directory whose name starts with `trigger-`) and starts the agent with it (`vigil watch …
//! -r trigger.yaml`; a command agent finds its path in `$VIGIL_BENCH_TRIGGER_RULES`), its stdout
//! a pipe. At each rate it creates `trigger-N` files, paced, noting the wall-clock time just
//! before each `openat`; a thread reads the agent's stdout and notes when each line naming
//! `trigger-N` arrives. Latency = arrival − trigger, per alert: median, p90, p99, max, and the
//! alerts that never came.

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant, SystemTime};

use serde::Serialize;
use serde_json::json;

use crate::agent::{tail, AgentLaunch, AgentSpec, WATCH_READY};
use crate::report::{self, cell};
use crate::stats::Pacer;
use crate::system::SystemInfo;
use crate::{sys, BenchError, Progress};

/// The environment variable that gives a command agent the trigger rule's path.
pub const RULES_ENV: &str = "VIGIL_BENCH_TRIGGER_RULES";
/// The alert text the trigger rule prints before the file's name.
const MARK: &str = "vigil-bench-latency";
/// How long alerts may still come after a rate's last trigger.
const GRACE: Duration = Duration::from_secs(3);

/// Settings of a latency run.
#[derive(Clone, Debug)]
pub struct LatencyOptions {
    pub agents: Vec<AgentSpec>,
    /// Alert-worthy events per second.
    pub rates: Vec<f64>,
    /// How long each rate lasts.
    pub duration: Duration,
    /// How long the agent runs before the first rate.
    pub settle: Duration,
    pub launch: AgentLaunch,
    pub out: PathBuf,
}

/// The latencies of one rate.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RateResult {
    pub target_per_s: f64,
    pub achieved_per_s: f64,
    pub triggers: u64,
    pub alerts: u64,
    pub missing: u64,
    pub median_ms: Option<f64>,
    pub p90_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub max_ms: Option<f64>,
}

/// One agent's rates.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AgentResult {
    pub agent: String,
    pub rates: Vec<RateResult>,
    pub error: Option<String>,
}

/// The value at quantile `q` (0..=1) of `sorted` (ascending), by nearest rank.
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    Some(sorted[rank.clamp(1, sorted.len()) - 1])
}

/// The trigger number in an alert line (`… vigil-bench-latency /dir/trigger-42 …`).
pub fn trigger_of(line: &str) -> Option<u64> {
    let rest = &line[line.find(MARK)? + MARK.len()..];
    let rest = &rest[rest.find("/trigger-")? + "/trigger-".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The trigger rule for files created under `dir`.
pub fn trigger_rules(dir: &Path) -> String {
    format!(
        "- rule: Vigil bench latency trigger\n  desc: a file created by vigil bench latency, \
         whose alert's latency is measured\n  condition: evt.type in (open, openat, openat2, \
         creat) and fd.name startswith \"{}/trigger-\"\n  output: {MARK} %fd.name\n  \
         priority: WARNING\n",
        dir.display()
    )
}

/// The statistics of one rate from the trigger times and the arrivals.
pub fn summarize(
    target: f64,
    wall_s: f64,
    sent: &[(u64, SystemTime)],
    arrived: &HashMap<u64, SystemTime>,
) -> RateResult {
    let mut ms: Vec<f64> = sent
        .iter()
        .filter_map(|(n, t0)| {
            let t1 = arrived.get(n)?;
            Some(
                t1.duration_since(*t0)
                    .unwrap_or(Duration::ZERO)
                    .as_secs_f64()
                    * 1e3,
            )
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    RateResult {
        target_per_s: target,
        achieved_per_s: sent.len() as f64 / wall_s.max(1e-9),
        triggers: sent.len() as u64,
        alerts: ms.len() as u64,
        missing: (sent.len() - ms.len()) as u64,
        median_ms: quantile(&ms, 0.5),
        p90_ms: quantile(&ms, 0.9),
        p99_ms: quantile(&ms, 0.99),
        max_ms: ms.last().copied(),
    }
}

/// The agent under measurement, its stdout read by a thread.
struct Agent {
    child: Child,
    arrivals: Receiver<(u64, SystemTime)>,
}

impl Agent {
    fn start(
        spec: &AgentSpec,
        launch: &AgentLaunch,
        rules: &Path,
        name: &str,
    ) -> Result<Agent, BenchError> {
        let mut argv: Vec<String> = match &launch.pin {
            Some(cpus) => vec!["taskset".into(), "-c".into(), cpus.clone()],
            None => Vec::new(),
        };
        let ready = match spec {
            AgentSpec::Watch { args } => {
                match &launch.watch_cmd {
                    Some(cmd) => argv.extend(cmd.iter().cloned()),
                    None => argv.extend([launch.exe.display().to_string(), "watch".into()]),
                }
                argv.extend(launch.watch_args.iter().cloned());
                argv.extend(args.iter().cloned());
                argv.extend(["-r".into(), rules.display().to_string()]);
                Some(WATCH_READY.to_string())
            }
            AgentSpec::Cmd(cmd) => {
                argv.extend(["sh".into(), "-c".into(), format!("exec {cmd}")]);
                launch.ready_line.clone()
            }
            _ => {
                return Err(BenchError::Agent(format!(
                    "{} does not run in the background",
                    spec.label()
                )))
            }
        };
        fs::create_dir_all(&launch.log_dir).map_err(|source| BenchError::Io {
            what: format!("create `{}`", launch.log_dir.display()),
            source,
        })?;
        let stderr_path = launch.log_dir.join(format!("{name}.stderr"));
        let stderr = File::create(&stderr_path).map_err(|source| BenchError::Io {
            what: format!("create `{}`", stderr_path.display()),
            source,
        })?;
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .env(RULES_ENV, rules)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|e| BenchError::Agent(format!("cannot start `{}`: {e}", argv.join(" "))))?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, arrivals) = mpsc::channel();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout);
            let mut line = String::new();
            while lines.read_line(&mut line).is_ok_and(|n| n > 0) {
                let now = SystemTime::now();
                if let Some(n) = trigger_of(&line) {
                    if tx.send((n, now)).is_err() {
                        return;
                    }
                }
                line.clear();
            }
        });
        let mut agent = Agent { child, arrivals };
        let start = Instant::now();
        let limit = if ready.is_some() {
            launch.ready_timeout
        } else {
            launch.warmup
        };
        loop {
            let text = read_lossy(&stderr_path);
            if ready.as_deref().is_some_and(|r| text.contains(r)) {
                return Ok(agent);
            }
            if let Ok(Some(status)) = agent.child.try_wait() {
                return Err(BenchError::Agent(format!(
                    "{} exited before it was ready ({status}): {}",
                    spec.label(),
                    tail(&text, 800)
                )));
            }
            if start.elapsed() >= limit {
                if ready.is_none() {
                    return Ok(agent);
                }
                agent.stop();
                return Err(BenchError::Agent(format!(
                    "{} was not ready within {limit:?}: {}",
                    spec.label(),
                    tail(&text, 800)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn stop(&mut self) {
        let pid = self.child.id() as i32;
        let _ = sys::terminate(pid);
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = sys::kill(pid);
        let _ = self.child.wait();
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            self.stop();
        }
    }
}

fn read_lossy(path: &Path) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// One rate: paced triggers for `duration`, then the alerts that come within [`GRACE`].
fn run_rate(
    agent: &Agent,
    dir: &Path,
    rate: f64,
    duration: Duration,
    next: &mut u64,
) -> Result<RateResult, BenchError> {
    let pacer = Pacer::new(rate);
    let mut sent = Vec::new();
    let mut arrived: HashMap<u64, SystemTime> = HashMap::new();
    let take = |arrived: &mut HashMap<u64, SystemTime>, (n, t): (u64, SystemTime)| {
        arrived.entry(n).or_insert(t);
    };
    let start = Instant::now();
    while start.elapsed() < duration {
        let wait = pacer.wait(sent.len() as u64, start.elapsed());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        let n = *next;
        *next += 1;
        let path = dir.join(format!("trigger-{n}"));
        let t0 = SystemTime::now();
        File::create(&path).map_err(|source| BenchError::Io {
            what: format!("create `{}`", path.display()),
            source,
        })?;
        sent.push((n, t0));
        while let Ok(a) = agent.arrivals.try_recv() {
            take(&mut arrived, a);
        }
    }
    let wall = start.elapsed().as_secs_f64();
    let grace_end = Instant::now() + GRACE;
    while sent.iter().any(|(n, _)| !arrived.contains_key(n)) {
        let left = grace_end.saturating_duration_since(Instant::now());
        match agent.arrivals.recv_timeout(left) {
            Ok(a) => take(&mut arrived, a),
            Err(_) => break,
        }
    }
    for (n, _) in &sent {
        let _ = fs::remove_file(dir.join(format!("trigger-{n}")));
    }
    Ok(summarize(rate, wall, &sent, &arrived))
}

fn measure(opts: &LatencyOptions, spec: &AgentSpec, i: usize, progress: Progress) -> AgentResult {
    let mut result = AgentResult {
        agent: spec.label(),
        ..AgentResult::default()
    };
    let dir = std::env::temp_dir().join(format!("vigil-bench-latency-{}-{i}", std::process::id()));
    let rules = opts.out.join(format!("trigger-{i}.yaml"));
    let prepared = fs::create_dir_all(&dir)
        .and_then(|()| fs::create_dir_all(&opts.out))
        .and_then(|()| fs::write(&rules, trigger_rules(&dir)));
    if let Err(e) = prepared {
        result.error = Some(format!("cannot prepare `{}`: {e}", dir.display()));
        return result;
    }
    let mut agent = match Agent::start(spec, &opts.launch, &rules, &format!("latency-{i}")) {
        Ok(agent) => agent,
        Err(e) => {
            result.error = Some(e.to_string());
            let _ = fs::remove_dir_all(&dir);
            return result;
        }
    };
    std::thread::sleep(opts.settle);
    let mut next = 0;
    for &rate in &opts.rates {
        progress(&format!(
            "{} · {rate}/s for {:?}",
            spec.label(),
            opts.duration
        ));
        match run_rate(&agent, &dir, rate, opts.duration, &mut next) {
            Ok(r) => {
                progress(&format!(
                    "  {} triggers ({:.1}/s), {} alerts, median {} ms, p99 {} ms, max {} ms",
                    r.triggers,
                    r.achieved_per_s,
                    r.alerts,
                    cell(r.median_ms),
                    cell(r.p99_ms),
                    cell(r.max_ms)
                ));
                result.rates.push(r);
            }
            Err(e) => {
                result.error = Some(e.to_string());
                break;
            }
        }
    }
    agent.stop();
    let _ = fs::remove_dir_all(&dir);
    result
}

/// Measures each agent at every rate and writes the report.
pub fn run(opts: &LatencyOptions, progress: Progress) -> Result<Vec<AgentResult>, BenchError> {
    let started = report::now_epoch();
    let info = SystemInfo::collect();
    let results: Vec<AgentResult> = opts
        .agents
        .iter()
        .enumerate()
        .map(|(i, spec)| measure(opts, spec, i, progress))
        .collect();
    let (md, json) = render(opts, &info, started, &results);
    report::write_report(&opts.out, &md, &json)?;
    plots(&json, &opts.out)?;
    Ok(results)
}

fn render(
    opts: &LatencyOptions,
    info: &SystemInfo,
    started: u64,
    results: &[AgentResult],
) -> (String, serde_json::Value) {
    let mut md = report::header(
        "vigil bench latency",
        info,
        started,
        &[
            (
                "agents",
                results
                    .iter()
                    .map(|r| r.agent.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            (
                "method",
                format!(
                    "paced creation of `trigger-N` files (one `openat` each) matched by a one-rule file added with `-r` ({RULES_ENV} for a command agent); latency = the alert line's arrival on the agent's stdout (a pipe) − the wall-clock time just before the `openat`; {} s per rate after {} s of settling; alerts later than {} s after a rate's end count as missing",
                    opts.duration.as_secs_f64(),
                    opts.settle.as_secs_f64(),
                    GRACE.as_secs()
                ),
            ),
        ],
    );
    md.push_str("| agent | target/s | achieved/s | triggers | alerts | missing | median ms | p90 ms | p99 ms | max ms |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for a in results {
        for r in &a.rates {
            md.push_str(&format!(
                "| {} | {} | {:.1} | {} | {} | {} | {} | {} | {} | {} |\n",
                a.agent,
                r.target_per_s,
                r.achieved_per_s,
                r.triggers,
                r.alerts,
                r.missing,
                cell(r.median_ms),
                cell(r.p90_ms),
                cell(r.p99_ms),
                cell(r.max_ms),
            ));
        }
    }
    let errors: Vec<String> = results
        .iter()
        .filter_map(|a| a.error.as_ref().map(|e| format!("{}: {e}", a.agent)))
        .collect();
    if !errors.is_empty() {
        md.push_str("\n## Failures\n\n");
        for e in &errors {
            md.push_str(&format!("- {e}\n"));
        }
    }
    md.push_str("\nPlot: `latency.svg`.\n");
    let json = json!({
        "bench": "latency",
        "started": started,
        "system": info,
        "duration_s": opts.duration.as_secs_f64(),
        "settle_s": opts.settle.as_secs_f64(),
        "agents": results,
        "errors": errors,
    });
    (md, json)
}

/// The plot of a latency report: median and p99 against the rate, per agent.
pub fn plots(report: &serde_json::Value, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let agents = report
        .get("agents")
        .and_then(serde_json::Value::as_array)
        .ok_or_else(|| BenchError::Invalid {
            what: "report".into(),
            detail: "`agents` is not a list".into(),
        })?;
    let mut series = Vec::new();
    for a in agents {
        let name = a.get("agent").and_then(|v| v.as_str()).unwrap_or("?");
        let rates = a
            .get("rates")
            .and_then(serde_json::Value::as_array)
            .cloned()
            .unwrap_or_default();
        for (key, what) in [("median_ms", "median"), ("p99_ms", "p99")] {
            let points: Vec<(f64, f64)> = rates
                .iter()
                .filter_map(|r| Some((r.get("target_per_s")?.as_f64()?, r.get(key)?.as_f64()?)))
                .collect();
            series.push((format!("{name} {what}"), points));
        }
    }
    let path = dir.join("latency.svg");
    report::line_chart(
        &path,
        "Syscall to alert on stdout",
        "alert-worthy events / s",
        "ms",
        &series,
    )?;
    Ok(vec![path])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&v, 0.5), Some(50.0));
        assert_eq!(quantile(&v, 0.99), Some(99.0));
        assert_eq!(quantile(&v, 1.0), Some(100.0));
        assert_eq!(quantile(&[7.0], 0.99), Some(7.0));
        // A rank between two values takes the higher (p99 of 50 values is the 50th).
        let fifty: Vec<f64> = (1..=50).map(f64::from).collect();
        assert_eq!(quantile(&fifty, 0.99), Some(50.0));
        assert_eq!(quantile(&fifty, 0.5), Some(25.0));
        assert_eq!(quantile(&[], 0.5), None);
    }

    #[test]
    fn alert_lines_name_their_trigger() {
        let line = "01:02:03.456789012: Warning vigil-bench-latency /tmp/vigil-bench-latency-9-0/trigger-1234\n";
        assert_eq!(trigger_of(line), Some(1234));
        assert_eq!(trigger_of("vigil-bench-latency /tmp/x/trigger-"), None);
        assert_eq!(trigger_of("/tmp/x/trigger-5 without the mark"), None);
        let rules = trigger_rules(Path::new("/tmp/d"));
        assert!(rules.contains("startswith \"/tmp/d/trigger-\""), "{rules}");
        assert!(rules.contains(MARK));
    }

    #[test]
    fn summary_counts_missing_alerts_and_measures_the_rest() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let sent: Vec<(u64, SystemTime)> = (0..4)
            .map(|n| (n, t0 + Duration::from_millis(n * 100)))
            .collect();
        let mut arrived = HashMap::new();
        arrived.insert(0, t0 + Duration::from_millis(2));
        arrived.insert(1, t0 + Duration::from_millis(104));
        arrived.insert(3, t0 + Duration::from_millis(310));
        arrived.insert(99, t0);
        let r = summarize(10.0, 0.4, &sent, &arrived);
        assert_eq!((r.triggers, r.alerts, r.missing), (4, 3, 1));
        assert_eq!(r.median_ms.map(|m| m.round()), Some(4.0));
        assert_eq!(r.max_ms.map(|m| m.round()), Some(10.0));
        assert_eq!(r.achieved_per_s, 10.0);
    }
}

//! `vigil watch` end to end (root, eBPF): SIGHUP reloads a rewritten rules file while
//! capturing (the new rule alerts on the next action; no event is lost or dropped across the
//! reload, per the stats file and `--stats`), SIGUSR1 reopens `file_output` after the file was
//! rotated away, a rules file saved by an editor reloads by itself (`watch_config_files`), and
//! `metrics.libbpf_stats_enabled` exposes the agent's BPF program counters
//! (checked against `bpftool`). Not root → prints `skipping …` and passes, unless
//! `VIGIL_TEST_STRICT=1`, where it fails.
// Tests print why they skip.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::{host, is_root, VIGIL};

/// How long `vigil watch` may take to start (rules, attach, `/proc`) on a busy machine.
const START_WAIT: Duration = Duration::from_secs(180);
/// How long an expected alert or message may take.
const WAIT: Duration = Duration::from_secs(60);

/// One agent at a time: two captures on a 2-core machine only slow each other down.
static LIVE: Mutex<()> = Mutex::new(());

/// Skips (prints why) or, under `VIGIL_TEST_STRICT=1`, fails.
fn skip_or_fail(reason: &str) {
    if std::env::var("VIGIL_TEST_STRICT").as_deref() == Ok("1") {
        panic!("VIGIL_TEST_STRICT=1 and `vigil watch` cannot run: {reason}");
    }
    eprintln!("skipping vigil watch signal test: {reason}");
}

/// Two rules on opens below `dir`: a sentinel on `dir/sentinel` (the same in both versions),
/// and the probe, on `dir/<probe_target>`.
fn rules(dir: &Path, probe_target: &str) -> String {
    let d = dir.display();
    format!(
        "- rule: Reload sentinel\n  desc: test\n  condition: evt.type in (open, openat, openat2) \
         and fd.name = {d}/sentinel\n  output: \"sentinel %proc.cmdline\"\n  priority: WARNING\n\
         - rule: Reload probe\n  desc: test\n  condition: evt.type in (open, openat, openat2) \
         and fd.name = {d}/{probe_target}\n  output: \"probe %proc.cmdline\"\n  priority: WARNING\n"
    )
}

/// Lines of a shared, growing log, with a condition variable to wait on.
type Lines = Arc<(Mutex<Vec<String>>, Condvar)>;

fn collect(pipe: impl Read + Send + 'static) -> Lines {
    let lines: Lines = Arc::default();
    let sink = Arc::clone(&lines);
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            let (list, cv) = &*sink;
            list.lock().unwrap().push(line);
            cv.notify_all();
        }
    });
    lines
}

/// Waits until a line satisfies `pred`; the line.
fn wait_line(lines: &Lines, limit: Duration, pred: impl Fn(&str) -> bool) -> Option<String> {
    let deadline = Instant::now() + limit;
    let (list, cv) = &**lines;
    let mut guard = list.lock().unwrap();
    loop {
        if let Some(l) = guard.iter().find(|l| pred(l)) {
            return Some(l.clone());
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        guard = cv.wait_timeout(guard, deadline - now).unwrap().0;
    }
}

fn text(lines: &Lines) -> String {
    lines.0.lock().unwrap().join("\n")
}

/// A running `vigil watch`.
/// Stops `watch` with SIGTERM (it must exit successfully) and returns its `--stats` line.
fn stop_for_stats(watch: &mut Watch) -> Value {
    watch.signal("TERM");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = watch.child.try_wait().unwrap() {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "vigil watch did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    // The stats line is the last thing on stderr; the reader thread gets it once the pipe
    // closes.
    let stats_line = wait_line(&watch.stderr, WAIT, |l| {
        serde_json::from_str::<Value>(l).is_ok_and(|v| v.get("events_in").is_some())
    });
    let err = text(&watch.stderr);
    assert!(status.success(), "vigil watch exit {status}:\n{err}");
    stats_line
        .and_then(|l| serde_json::from_str(&l).ok())
        .unwrap_or_else(|| panic!("no --stats line:\n{err}"))
}

struct Watch {
    child: Child,
    stdout: Lines,
    stderr: Lines,
}

impl Watch {
    fn signal(&self, name: &str) {
        let ok = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill")
            .success();
        assert!(ok, "kill -{name}");
    }

    fn wait_stderr(&self, needle: &str) {
        if wait_line(&self.stderr, WAIT, |l| l.contains(needle)).is_none() {
            panic!("no `{needle}` on stderr:\n{}", text(&self.stderr));
        }
    }

    /// Waits for the JSON alert of `rule` whose command line is `cmdline`.
    fn wait_alert(&self, rule: &str, cmdline: &str) -> Value {
        let found = wait_line(&self.stdout, WAIT, |l| is_alert(l, rule, cmdline));
        let line = found.unwrap_or_else(|| {
            panic!(
                "no `{rule}` alert for `{cmdline}`; stdout:\n{}\nstderr:\n{}",
                text(&self.stdout),
                text(&self.stderr)
            )
        });
        serde_json::from_str(&line).expect("a JSON alert")
    }

    fn alerts_of(&self, rule: &str) -> Vec<String> {
        self.stdout
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["rule"] == rule))
            .cloned()
            .collect()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn is_alert(line: &str, rule: &str, cmdline: &str) -> bool {
    serde_json::from_str::<Value>(line)
        .is_ok_and(|v| v["rule"] == rule && v["output_fields"]["proc.cmdline"] == cmdline)
}

/// Runs `cmd path` (a read of `path`), which must succeed.
fn read_with(cmd: &str, path: &Path) -> String {
    let ok = Command::new(cmd)
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"))
        .success();
    assert!(ok, "{cmd} {}", path.display());
    format!("{cmd} {}", path.display())
}

fn file_text(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

#[test]
fn sighup_reloads_rewritten_rules_without_losing_events_and_sigusr1_reopens_file_output() {
    let _host = host::alone(module_path!());
    if !is_root() {
        skip_or_fail("not root");
        return;
    }
    let _live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("vigil-watch-signals-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (sentinel, probe) = (dir.join("sentinel"), dir.join("probe"));
    std::fs::write(&sentinel, "s\n").unwrap();
    std::fs::write(&probe, "p\n").unwrap();
    let rules_file = dir.join("rules.yaml");
    // Version A: the probe rule watches a file nobody opens.
    std::fs::write(&rules_file, rules(&dir, "never")).unwrap();
    let alerts_file = dir.join("alerts.json");
    let stats_file = dir.join("stats.jsonl");

    let mut child = Command::new(VIGIL)
        .arg("watch")
        .arg("-r")
        .arg(&rules_file)
        .args(["--json", "--stats", "--stats-interval", "1", "-s"])
        .arg(&stats_file)
        .args([
            "-o",
            "syslog_output.enabled=false",
            "-o",
            "webserver.enabled=false",
            // Reloads by SIGHUP alone (the rewritten rules file would reload by itself).
            "-o",
            "watch_config_files=false",
        ])
        .args([
            "-o",
            "file_output.enabled=true",
            "-o",
            "file_output.keep_alive=true",
        ])
        .arg("-o")
        .arg(format!("file_output.filename={}", alerts_file.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vigil watch");
    let stdout = collect(child.stdout.take().expect("stdout"));
    let stderr = collect(child.stderr.take().expect("stderr"));
    let watch = Watch {
        child,
        stdout,
        stderr,
    };
    if wait_line(&watch.stderr, START_WAIT, |l| l.contains("watching")).is_none() {
        panic!("vigil watch did not start:\n{}", text(&watch.stderr));
    }

    // Before the reload: the probe file is read, then the sentinel. The sentinel's alert
    // means the earlier probe read was evaluated too, and rule A did not match it.
    let probe_before = read_with("cat", &probe);
    let sentinel_before = read_with("cat", &sentinel);
    watch.wait_alert("Reload sentinel", &sentinel_before);
    assert!(
        watch.alerts_of("Reload probe").is_empty(),
        "rule A matched `{probe_before}`: {:?}",
        watch.alerts_of("Reload probe")
    );

    // A stats line before the reload, so that the stats file spans it.
    let deadline = Instant::now() + WAIT;
    while file_text(&stats_file).lines().count() == 0 {
        assert!(Instant::now() < deadline, "no stats line before the reload");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Rewrite the rules file (version B: the probe rule watches the probe file), SIGHUP.
    std::fs::write(&rules_file, rules(&dir, "probe")).unwrap();
    watch.signal("HUP");
    watch.wait_stderr("SIGHUP: reloaded configuration and 2 rules");
    let probe_after = read_with("head", &probe);
    let alert = watch.wait_alert("Reload probe", &probe_after);
    assert!(
        alert["output"]
            .as_str()
            .is_some_and(|o| o.contains(&format!("probe {probe_after}"))),
        "{alert}"
    );
    // The sentinel rule still alerts after the reload.
    let sentinel_after = read_with("head", &sentinel);
    watch.wait_alert("Reload sentinel", &sentinel_after);

    // SIGUSR1 under watch: rotate the alerts file away; new alerts go to a new file.
    let rotated = dir.join("alerts.json.1");
    let deadline = Instant::now() + WAIT;
    while !file_text(&alerts_file).contains(&sentinel_after) {
        assert!(
            Instant::now() < deadline,
            "file_output never got `{sentinel_after}`"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::fs::rename(&alerts_file, &rotated).unwrap();
    watch.signal("USR1");
    watch.wait_stderr("SIGUSR1: reopening outputs");
    let sentinel_rotated = read_with("tail", &sentinel);
    watch.wait_alert("Reload sentinel", &sentinel_rotated);
    let deadline = Instant::now() + WAIT;
    while !file_text(&alerts_file).contains(&sentinel_rotated) {
        assert!(
            Instant::now() < deadline,
            "no reopened file_output with `{sentinel_rotated}`; stderr:\n{}",
            text(&watch.stderr)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let old = file_text(&rotated);
    assert!(
        old.contains(&sentinel_before) && old.contains(&probe_after),
        "the rotated file keeps the earlier alerts:\n{old}"
    );
    assert!(
        !old.contains(&sentinel_rotated),
        "written after the rotation:\n{old}"
    );
    assert!(!file_text(&alerts_file).contains(&sentinel_before));

    // Stop; the counters across the reload: nothing dropped, in == processed + dropped.
    let mut watch = watch;
    let stats = stop_for_stats(&mut watch);
    let err = text(&watch.stderr);
    let n = |k: &str| {
        stats[k]
            .as_u64()
            .unwrap_or_else(|| panic!("stats.{k}: {stats}"))
    };
    assert_eq!(n("events_in"), n("processed") + n("dropped"), "{stats}");
    assert_eq!(n("dropped"), 0, "events dropped across the reload: {stats}");
    assert!(n("alerts") >= 4, "{stats}");
    assert!(
        !err.lines()
            .any(|l| !l.starts_with('{') && l.contains("dropped")),
        "a drop was reported:\n{err}"
    );
    assert!(
        watch.alerts_of("Vigil dropped events").is_empty()
            && watch.alerts_of("Vigil dropped alerts").is_empty(),
        "drop alerts: {}",
        text(&watch.stdout)
    );
    // The stats file: no drop in any interval, and the event count never goes back (the
    // reload keeps the counters).
    let lines: Vec<Value> = file_text(&stats_file)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a stats JSON line"))
        .collect();
    assert!(lines.len() >= 2, "stats lines: {lines:?}");
    let mut previous = 0;
    for line in &lines {
        assert_eq!(line["cur"]["drops"], 0, "{line}");
        let events = line["cur"]["events"].as_u64().expect("cur.events");
        assert!(events >= previous, "events went back: {lines:?}");
        previous = events;
    }
    assert_eq!(
        previous,
        n("events_in"),
        "the last stats line has every event"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `cmd path` on a missing `path` (an `openat` that fails with ENOENT).
fn fail_with(cmd: &str, path: &Path) -> String {
    let ok = Command::new(cmd)
        .arg(path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap_or_else(|e| panic!("run {cmd}: {e}"))
        .success();
    assert!(!ok, "{cmd} {} succeeded", path.display());
    format!("{cmd} {}", path.display())
}

/// Version A: one rule on successful opens of `dir/sentinel` (no rule may match a failed
/// open); version B adds one on failed opens of `dir/missing`.
fn failure_rules(dir: &Path, with_failure_rule: bool) -> String {
    let d = dir.display();
    let mut text = format!(
        "- rule: Open sentinel\n  desc: test\n  condition: evt.type in (open, openat, openat2) \
         and evt.res = SUCCESS and fd.name = {d}/sentinel\n  output: \"sentinel %proc.cmdline\"\n  \
         priority: WARNING\n"
    );
    if with_failure_rule {
        text.push_str(&format!(
            "- rule: Failed open\n  desc: test\n  condition: evt.type in (open, openat, openat2) \
             and evt.res != SUCCESS and fd.name = {d}/missing\n  output: \"failed %proc.cmdline\"\n  \
             priority: WARNING\n"
        ));
    }
    text
}

/// Failed calls no rule may match are filtered out in the kernel (named at start, counted as
/// `filtered_failed`), and a SIGHUP that loads a rule on failed opens pushes the change: the
/// next failed open alerts.
#[test]
fn sighup_pushes_which_failed_calls_the_kernel_filters_out() {
    let _host = host::alone(module_path!());
    if !is_root() {
        skip_or_fail("not root");
        return;
    }
    let _live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("vigil-watch-failures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (sentinel, missing) = (dir.join("sentinel"), dir.join("missing"));
    std::fs::write(&sentinel, "s\n").unwrap();
    let rules_file = dir.join("rules.yaml");
    std::fs::write(&rules_file, failure_rules(&dir, false)).unwrap();
    let mut child = Command::new(VIGIL)
        .arg("watch")
        .arg("-r")
        .arg(&rules_file)
        .args(["--json", "--stats", "-v"])
        .args([
            "-o",
            "syslog_output.enabled=false",
            "-o",
            "webserver.enabled=false",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vigil watch");
    let stdout = collect(child.stdout.take().expect("stdout"));
    let stderr = collect(child.stderr.take().expect("stderr"));
    let mut watch = Watch {
        child,
        stdout,
        stderr,
    };
    if wait_line(&watch.stderr, START_WAIT, |l| l.contains("watching")).is_none() {
        panic!("vigil watch did not start:\n{}", text(&watch.stderr));
    }
    let filtered = |lines: &[String]| -> Vec<Vec<String>> {
        lines
            .iter()
            .filter_map(|l| l.split_once("filtered out in the kernel").map(|(_, r)| r))
            .map(|r| {
                let list = r.rsplit_once("): ").map_or("", |(_, l)| l);
                list.split(", ").map(str::to_owned).collect()
            })
            .collect()
    };
    let at_start = filtered(&watch.stderr.0.lock().unwrap());
    assert!(
        at_start
            .first()
            .is_some_and(|l| l.iter().any(|n| n == "openat")),
        "openat's failures filtered at start: {at_start:?}\n{}",
        text(&watch.stderr)
    );
    // Version A: the failed open is filtered; the sentinel's alert shows it was passed.
    let failed_before = fail_with("cat", &missing);
    let sentinel_before = read_with("cat", &sentinel);
    watch.wait_alert("Open sentinel", &sentinel_before);

    std::fs::write(&rules_file, failure_rules(&dir, true)).unwrap();
    watch.signal("HUP");
    watch.wait_stderr("SIGHUP: reloaded configuration and 2 rules");
    // The filter is pushed with the reloaded interest set, which is then logged again.
    let pushed = (0..WAIT.as_millis() / 10).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        filtered(&watch.stderr.0.lock().unwrap()).len() >= 2
    });
    assert!(
        pushed,
        "no filter line after the reload:\n{}",
        text(&watch.stderr)
    );
    let failed_after = fail_with("head", &missing);
    watch.wait_alert("Failed open", &failed_after);
    let after_reload = filtered(&watch.stderr.0.lock().unwrap());
    assert!(
        after_reload.len() >= 2
            && after_reload
                .last()
                .is_some_and(|l| !l.contains(&"openat".to_owned())),
        "openat's failures are delivered after the reload: {after_reload:?}"
    );
    let stats = stop_for_stats(&mut watch);
    let n = |k: &str| {
        stats[k]
            .as_u64()
            .unwrap_or_else(|| panic!("stats.{k}: {stats}"))
    };
    assert!(
        n("filtered_failed") >= 1,
        "`{failed_before}` counted: {stats}"
    );
    assert_eq!(n("events_in"), n("processed") + n("dropped"), "{stats}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Turns the kernel's BPF run-time statistics on for a test (`kernel.bpf_stats_enabled`, what
/// Falco's `libbpf_stats_enabled` documents as required), and back to what it was when dropped.
struct BpfStatsOn {
    previous: String,
}

const BPF_STATS_SYSCTL: &str = "/proc/sys/kernel/bpf_stats_enabled";

impl BpfStatsOn {
    fn enable() -> Option<BpfStatsOn> {
        let previous = std::fs::read_to_string(BPF_STATS_SYSCTL).ok()?;
        std::fs::write(BPF_STATS_SYSCTL, "1").ok()?;
        Some(BpfStatsOn { previous })
    }
}

impl Drop for BpfStatsOn {
    fn drop(&mut self) {
        let _ = std::fs::write(BPF_STATS_SYSCTL, self.previous.trim());
    }
}

/// One HTTP GET on loopback; the response body.
fn http_get(port: u16, path: &str) -> String {
    use std::io::Write;
    let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return String::new();
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default()
}

/// `vigil_bpf_program_runs_total` samples: (prog_id, prog_tag, prog_type, runs).
fn bpf_runs(metrics: &str) -> Vec<(u32, String, String, f64)> {
    metrics
        .lines()
        .filter_map(|l| l.strip_prefix("vigil_bpf_program_runs_total{"))
        .filter_map(|l| {
            let (labels, value) = l.split_once("} ")?;
            let label = |k: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(&format!("{k}=\"")))
                    .map(|v| v.trim_end_matches('"').to_owned())
            };
            Some((
                label("prog_id")?.parse().ok()?,
                label("prog_tag")?,
                label("prog_type")?,
                value.parse().ok()?,
            ))
        })
        .collect()
}

#[test]
fn watch_exposes_its_bpf_program_stats_with_libbpf_stats_enabled() {
    let _host = host::alone(module_path!());
    if !is_root() {
        skip_or_fail("not root");
        return;
    }
    let _live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let Some(_stats_on) = BpfStatsOn::enable() else {
        skip_or_fail("cannot set kernel.bpf_stats_enabled");
        return;
    };
    let dir = std::env::temp_dir().join(format!("vigil-watch-bpfstats-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let sentinel = dir.join("sentinel");
    std::fs::write(&sentinel, "s\n").unwrap();
    let rules_file = dir.join("rules.yaml");
    std::fs::write(&rules_file, rules(&dir, "never")).unwrap();
    let snapshots = dir.join("metrics.jsonl");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port");
    let mut child = Command::new(VIGIL)
        .arg("watch")
        .arg("-r")
        .arg(&rules_file)
        .args(["--json", "-o", "syslog_output.enabled=false"])
        .args(["-o", "webserver.prometheus_metrics_enabled=true", "-o"])
        .arg(format!("webserver.listen_port={port}"))
        .args(["-o", "metrics.enabled=true", "-o", "metrics.interval=100ms"])
        .args(["-o", "metrics.output_rule=false", "-o"])
        .arg(format!("metrics.output_file={}", snapshots.display()))
        .args(["-o", "metrics.libbpf_stats_enabled=true"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vigil watch");
    let stdout = collect(child.stdout.take().expect("stdout"));
    let stderr = collect(child.stderr.take().expect("stderr"));
    let mut watch = Watch {
        child,
        stdout,
        stderr,
    };
    if wait_line(&watch.stderr, START_WAIT, |l| l.contains("watching")).is_none() {
        panic!("vigil watch did not start:\n{}", text(&watch.stderr));
    }
    // Work for the programs: reads the rules watch.
    let cmd = read_with("cat", &sentinel);
    watch.wait_alert("Reload sentinel", &cmd);
    let deadline = Instant::now() + WAIT;
    let runs = loop {
        let runs = bpf_runs(&http_get(port, "/metrics"));
        if runs.iter().any(|(_, _, _, n)| *n > 0.0) {
            break runs;
        }
        assert!(
            Instant::now() < deadline,
            "no BPF program with runs in /metrics: {runs:?}\n{}",
            http_get(port, "/metrics")
        );
        read_with("cat", &sentinel);
        std::thread::sleep(Duration::from_millis(100));
    };
    // Every exposed program is one the kernel has loaded, with the same tag and type, and the
    // kernel's own count is at least what was exposed (it only grows).
    for (id, tag, kind, n) in &runs {
        let out = Command::new("bpftool")
            .args(["prog", "show", "id", &id.to_string(), "-j"])
            .output()
            .expect("run bpftool (apt package bpftool)");
        assert!(out.status.success(), "bpftool prog show id {id}");
        let info: Value = serde_json::from_slice(&out.stdout).expect("bpftool JSON");
        assert_eq!(info["tag"], tag.as_str(), "{info}");
        assert_eq!(info["type"], kind.as_str(), "{info}");
        let kernel = info["run_cnt"].as_f64().unwrap_or(0.0);
        assert!(
            kernel >= *n,
            "bpftool run_cnt {kernel} < exposed {n}: {info}"
        );
    }
    // The metrics snapshot carries the same per-program counters.
    let deadline = Instant::now() + WAIT;
    loop {
        let found = file_text(&snapshots).lines().any(|l| {
            serde_json::from_str::<Value>(l).is_ok_and(|v| {
                v["output_fields"].as_object().is_some_and(|fields| {
                    fields.iter().any(|(k, v)| {
                        k.starts_with("scap.bpf_prog_")
                            && k.ends_with(".run_cnt")
                            && v.as_u64().is_some_and(|n| n > 0)
                    })
                })
            })
        });
        if found {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no per-program counters in the metrics snapshots:\n{}",
            file_text(&snapshots)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    watch.signal("TERM");
    let deadline = Instant::now() + WAIT;
    while watch.child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "vigil watch did not stop on SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `watch_config_files` (on by default): a rules file saved the way editors do (a new file
/// renamed over it) reloads without a signal, and the new rule alerts; a malformed save is
/// refused with its position and the running rules go on.
#[test]
fn a_saved_rules_file_reloads_without_a_signal() {
    let _host = host::alone(module_path!());
    if !is_root() {
        skip_or_fail("not root");
        return;
    }
    let _live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("vigil-watch-saved-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (sentinel, probe) = (dir.join("sentinel"), dir.join("probe"));
    std::fs::write(&sentinel, "s\n").unwrap();
    std::fs::write(&probe, "p\n").unwrap();
    let rules_file = dir.join("rules.yaml");
    std::fs::write(&rules_file, rules(&dir, "never")).unwrap();
    let save = |text: &str| {
        let tmp = dir.join("rules.yaml.new");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &rules_file).unwrap();
    };
    let mut child = Command::new(VIGIL)
        .arg("watch")
        .arg("-r")
        .arg(&rules_file)
        .args(["--json", "-o", "syslog_output.enabled=false"])
        .args(["-o", "webserver.enabled=false"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vigil watch");
    let stdout = collect(child.stdout.take().expect("stdout"));
    let stderr = collect(child.stderr.take().expect("stderr"));
    let watch = Watch {
        child,
        stdout,
        stderr,
    };
    if wait_line(&watch.stderr, START_WAIT, |l| l.contains("watching")).is_none() {
        panic!("vigil watch did not start:\n{}", text(&watch.stderr));
    }
    let probe_before = read_with("cat", &probe);
    watch.wait_alert("Reload sentinel", &read_with("cat", &sentinel));
    assert!(
        watch.alerts_of("Reload probe").is_empty(),
        "the first rules matched `{probe_before}`"
    );

    save(&rules(&dir, "probe"));
    watch.wait_stderr("files changed: reloaded configuration and 2 rules");
    watch.wait_alert("Reload probe", &read_with("head", &probe));

    // Broken: both conditions open a parenthesis they never close (the probe's is line 8).
    save(&rules(&dir, "probe").replace(
        "condition: evt.type in (open, openat, openat2) \
         and fd.name = ",
        "condition: (evt.type in (open, openat, openat2) and fd.name = ",
    ));
    watch.wait_stderr("files changed: reload failed, keeping the running configuration");
    let position = format!("{}:8:", rules_file.display());
    watch.wait_stderr(&position);
    watch.wait_alert("Reload probe", &read_with("tail", &probe));
    drop(watch);
    let _ = std::fs::remove_dir_all(&dir);
}

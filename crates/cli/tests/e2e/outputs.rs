//! End-to-end tests of alert delivery through the `vigil` binary: the HTTP output surviving a
//! 30-second outage with every alert delivered once and in order, a `kill -9` of the agent
//! during an outage losing nothing (write-ahead spool; modes under umask 000), damaged spool
//! records counted and never delivered, a spool budget running out
//! (loss counted in `/metrics`, logged and raised as an internal alert), the stats file, SIGHUP
//! reload and SIGUSR1 reopen on a long-running `vigil replay --follow`, and the Falco output
//! settings (`json_*`, `time_format_iso_8601`, `append_output`, `program_output`).
//!
//! The long-running tests drive the agent with a JSON lines capture that the test keeps
//! appending to, and wait (with generous deadlines that fail with a message) for effects.

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::receiver::Receiver;
use crate::support::{host, scratch};

const RULES: &str = r#"
- rule: Seq tool
  desc: test rule, one alert per seqtool execve
  condition: evt.type = execve and proc.name = seqtool
  output: "seq n=%proc.args"
  priority: WARNING
  tags: [test]
"#;

/// The labels of `Seq tool`'s `falcosecurity_falco_rules_matches_total` series (Falco's:
/// the priority as its number, one `tag_<tag>` label per tag).
const SEQ_TOOL_LABELS: &[(&str, &str)] = &[
    ("priority", "4"),
    ("rule_name", "Seq tool"),
    ("source", "syscall"),
    ("tag_test", "true"),
];

fn capture_header() -> String {
    let header = serde_json::json!({"vigil_capture": 1, "hostname": "t", "start_ts": 1_700_000_000_000_000_000u64});
    let init = serde_json::json!({"thread": {"tid": 1, "pid": 1, "ppid": 0, "comm": "init",
        "exe": "/sbin/init", "exepath": "/sbin/init", "args": [], "cwd": "/", "uid": 0, "gid": 0,
        "euid": 0, "egid": 0, "loginuid": 4_294_967_295u64, "tty": 0, "cgroup": "/"}});
    format!("{header}\n{init}\n")
}

/// An execve of `seqtool N` by a fresh process: one alert `seq n=N`.
fn event(n: u64) -> String {
    let pid = 1000 + n;
    let line = serde_json::json!({"ts": 1_700_000_000_000_000_000u64 + 1000 * (n + 1), "tid": pid,
        "pid": pid, "type": "execve", "res": 0, "args": {"filename": "/usr/bin/seqtool",
        "exe": "seqtool", "args": [n.to_string()], "env": [format!("SEQ={n}"), "HOME=/root"],
        "comm": "seqtool", "trusted_exepath": "/usr/bin/seqtool", "cwd": "/", "tid": pid,
        "pid": pid, "ptid": 1, "uid": 0, "gid": 0, "euid": 0, "egid": 0,
        "loginuid": 4_294_967_295u64, "tty": 0, "cgroups": "/"}});
    format!("{line}\n")
}

fn append_events(capture: &Path, range: std::ops::Range<u64>) {
    let mut f = OpenOptions::new()
        .append(true)
        .open(capture)
        .expect("open capture");
    let text: String = range.map(event).collect();
    f.write_all(text.as_bytes()).expect("append events");
}

/// Polls `check` until it holds, failing with `what` after `limit`.
fn wait_for(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running `vigil replay --follow`, its stderr collected line by line.
struct Agent {
    child: Child,
    stderr: Arc<Mutex<Vec<String>>>,
}

impl Agent {
    fn start(dir: &Path, config: &str) -> Agent {
        Agent::launch(dir, config, &dir.join("capture.jsonl"), None)
    }

    /// Follows `capture` (created with its header when missing); with `umask`, started
    /// through `sh -c 'umask …; exec vigil …'` (the agent keeps the shell's pid).
    fn launch(dir: &Path, config: &str, capture: &Path, umask: Option<&str>) -> Agent {
        fs::write(dir.join("rules.yaml"), RULES).unwrap();
        fs::write(dir.join("config.yaml"), config).unwrap();
        if !capture.exists() {
            fs::write(capture, capture_header()).unwrap();
        }
        let mut command = match umask {
            Some(mask) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(format!("umask {mask}; exec \"$0\" \"$@\""))
                    .arg(env!("CARGO_BIN_EXE_vigil"));
                c
            }
            None => Command::new(env!("CARGO_BIN_EXE_vigil")),
        };
        let mut child = command
            .args(["replay", "--follow"])
            .arg(capture)
            .arg("-c")
            .arg(dir.join("config.yaml"))
            .arg("-r")
            .arg(dir.join("rules.yaml"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start vigil");
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let lines = Arc::clone(&stderr);
        let pipe = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines() {
                let Ok(line) = line else { break };
                lines.lock().unwrap().push(line);
            }
        });
        Agent { child, stderr }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    fn stderr_has(&self, needle: &str) -> bool {
        self.stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }

    fn wait_stderr(&self, needle: &str) {
        wait_for(
            &format!("`{needle}` on stderr"),
            Duration::from_secs(60),
            || self.stderr_has(needle),
        );
    }

    /// The web server's address, from the line the agent prints at start.
    fn web_addr(&self) -> String {
        self.wait_stderr("webserver listening on http://");
        let lines = self.stderr.lock().unwrap();
        let line = lines
            .iter()
            .find(|l| l.contains("webserver listening on http://"))
            .unwrap();
        line.rsplit("http://").next().unwrap().to_owned()
    }

    /// SIGKILL, as a crash would; waits for the process to be gone.
    fn kill(mut self) {
        self.child.kill().expect("kill -9 vigil");
        self.child.wait().expect("reap vigil");
    }

    /// SIGTERM, then the exit status and the whole stderr.
    fn stop(mut self) -> String {
        self.signal("TERM");
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "vigil exited with {status}");
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "vigil did not stop on SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        // The reader thread finishes once the pipe closes.
        std::thread::sleep(Duration::from_millis(100));
        self.stderr.lock().unwrap().join("\n")
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// GET `path` from the agent's web server.
fn http_get(addr: &str, path: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("connect to the agent's web server");
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP response");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_owned()
}

/// Scraped samples: (name, sorted labels) → value.
type Samples = HashMap<(String, Vec<(String, String)>), f64>;

/// `/metrics` parsed with a Prometheus text parser: (name, labels) → value.
fn scrape(addr: &str) -> Samples {
    let body = http_get(addr, "/metrics");
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("valid Prometheus text");
    scrape
        .samples
        .into_iter()
        .map(|s| {
            let mut labels: Vec<(String, String)> = s
                .labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            labels.sort();
            let value = match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            };
            ((s.metric, labels), value)
        })
        .collect()
}

fn metric(m: &Samples, name: &str, labels: &[(&str, &str)]) -> f64 {
    let mut key: Vec<(String, String)> = labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    key.sort();
    m.get(&(name.to_owned(), key)).copied().unwrap_or(0.0)
}

fn seq_of(body: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(body).expect("a JSON alert");
    assert_eq!(v["rule"], "Seq tool", "{body}");
    v["output_fields"]["proc.args"]
        .as_str()
        .expect("proc.args")
        .parse()
        .expect("a number")
}

fn agent_config(extra: &str) -> String {
    format!(
        "stdout_output: {{enabled: false}}\nsyslog_output: {{enabled: false}}\njson_output: true\n\
         webserver: {{enabled: true, listen_port: 0, prometheus_metrics_enabled: true}}\n{extra}"
    )
}

#[test]
fn http_outage_of_30s_delivers_every_alert_once_in_order() {
    let _host = host::shared();
    let dir = scratch("outage");
    let mut receiver = Receiver::start();
    let config = agent_config(&format!(
        "outputs_queue: {{capacity: 100}}\nhttp_output:\n  enabled: true\n  url: http://{}/\n  \
         spool_dir: {}\n  retry_max_backoff: 1s\n",
        receiver.addr,
        dir.join("spool").display()
    ));
    let agent = Agent::start(&dir, &config);
    let capture = dir.join("capture.jsonl");
    let web = agent.web_addr();
    append_events(&capture, 0..50);
    wait_for("the first 50 alerts", Duration::from_secs(60), || {
        receiver.count() == 50
    });

    // Down for 30 seconds while alerts keep coming: 10 per second.
    receiver.down();
    let outage = Instant::now();
    let mut next = 50;
    while outage.elapsed() < Duration::from_secs(30) {
        append_events(&capture, next..next + 10);
        next += 10;
        std::thread::sleep(Duration::from_secs(1));
    }
    let during = scrape(&web);
    assert!(
        metric(
            &during,
            "vigil_output_delivery_failures_total",
            &[("sink", "http")]
        ) > 0.0,
        "the outage was noticed"
    );
    assert_eq!(receiver.count(), 50, "nothing delivered while down");
    receiver.up();
    append_events(&capture, next..next + 50);
    let total = next + 50;
    wait_for(
        "every alert after the outage",
        Duration::from_secs(120),
        || receiver.count() as u64 >= total,
    );
    let after = scrape(&web);
    let stderr = agent.stop();
    let seqs: Vec<u64> = receiver.bodies().iter().map(|b| seq_of(b)).collect();
    let want: Vec<u64> = (0..total).collect();
    assert_eq!(seqs.len(), want.len(), "exactly once");
    assert!(seqs == want, "in order: {seqs:?}");
    assert_eq!(
        metric(&after, "vigil_output_delivered_total", &[("sink", "http")]),
        total as f64
    );
    assert_eq!(
        metric(&after, "vigil_events_processed_total", &[]),
        total as f64
    );
    assert_eq!(
        metric(
            &after,
            "falcosecurity_falco_rules_matches_total",
            SEQ_TOOL_LABELS
        ),
        total as f64
    );
    assert!(stderr.contains("delivery failed, retrying"), "{stderr}");
    assert!(stderr.contains("http: delivered"), "{stderr}");
    assert!(!stderr.contains("dropped 1"), "nothing dropped: {stderr}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn exhausted_spool_budget_is_counted_reported_and_alerted() {
    let _host = host::shared();
    let dir = scratch("budget");
    // A port nobody listens on.
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = agent_config(&format!(
        "outputs_queue: {{capacity: 4}}\nhttp_output:\n  enabled: true\n  url: http://{closed}/\n  \
         spool_dir: {}\n  spool_max_bytes: 4096\n  retry_max_backoff: 200ms\n\
         file_output: {{enabled: true, filename: {}, spool_dir: {}}}\n",
        dir.join("spool").display(),
        dir.join("alerts.jsonl").display(),
        dir.join("file-spool").display()
    ));
    let agent = Agent::start(&dir, &config);
    let web = agent.web_addr();
    append_events(&dir.join("capture.jsonl"), 0..200);
    wait_for("200 processed events", Duration::from_secs(60), || {
        metric(&scrape(&web), "vigil_events_processed_total", &[]) == 200.0
    });
    wait_for("the drop alert", Duration::from_secs(60), || {
        metric(
            &scrape(&web),
            "vigil_internal_alerts_total",
            &[("rule", "Vigil dropped alerts")],
        ) >= 1.0
    });
    wait_for(
        "the file output to deliver every alert",
        Duration::from_secs(60),
        || {
            let m = scrape(&web);
            let n = metric(&m, "vigil_output_delivered_total", &[("sink", "file")]);
            assert!(n <= 201.0, "too many alerts in the file: {m:?}");
            n == 201.0
        },
    );
    let m = scrape(&web);
    let dropped = metric(
        &m,
        "vigil_output_dropped_total",
        &[("sink", "http"), ("reason", "spool_full")],
    );
    assert!(dropped > 0.0, "loss counted per sink and reason");
    assert!(metric(&m, "vigil_output_spool_bytes", &[("sink", "http")]) <= 4096.0);
    assert!(metric(&m, "vigil_output_queue_depth", &[("sink", "http")]) <= 5.0);
    assert_eq!(
        metric(&m, "vigil_output_delivered_total", &[("sink", "http")]),
        0.0
    );
    let stderr = agent.stop();
    assert!(
        stderr.contains("output `http`: dropped 1 alert(s) so far (latest reason: spool_full)"),
        "{stderr}"
    );
    assert!(stderr.contains("Vigil dropped "), "{stderr}");
    // The file output carries the internal alert, in Falco's JSON shape.
    let file = fs::read_to_string(dir.join("alerts.jsonl")).unwrap();
    let internal: Vec<serde_json::Value> = file
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["rule"] == "Vigil dropped alerts")
        .collect();
    // One while running (rate-limited to one per minute), and at exit one more for the
    // drops since, carrying the final running total.
    assert_eq!(internal.len(), 2, "{internal:?}");
    assert_eq!(internal[0]["priority"], "Critical");
    assert!(
        internal[0]["output_fields"]["vigil.alerts_dropped"]
            .as_u64()
            .unwrap()
            > 0
    );
    assert_eq!(
        internal[1]["output_fields"]["vigil.alerts_dropped_total"].as_u64(),
        Some(dropped as u64),
        "the last drop alert's total is every alert lost before it: {internal:?}"
    );
    // The exit summary counts the final drop alert too (the full spool took it as well).
    assert!(
        stderr.contains("output http: delivered 0, failed attempts")
            && stderr.contains(&format!("spool_full={}", dropped as u64 + 1)),
        "{stderr}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// The spool's segment files.
fn spool_segments(spool: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir(spool)
        .expect("read the spool directory")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "spool"))
        .collect();
    files.sort();
    files
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

#[test]
fn kill_9_during_an_outage_loses_no_spooled_alert() {
    let _host = host::shared();
    // The agent runs with a spool against a receiver that is down, gets every alert into the
    // spool and is killed with SIGKILL; restarted with the receiver up, it delivers all of
    // them, in order, once. Started under umask 000: the spool is 0700 and its files 0600.
    let dir = scratch("kill9");
    // A port nobody listens on until the second run.
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let spool = dir.join("spool");
    let config = agent_config(&format!(
        "http_output:\n  enabled: true\n  url: http://{addr}/\n  spool_dir: {}\n  \
         retry_max_backoff: 200ms\n",
        spool.display()
    ));
    let capture = dir.join("capture.jsonl");
    let agent = Agent::launch(&dir, &config, &capture, Some("000"));
    let web = agent.web_addr();
    let n = 3000u64;
    append_events(&capture, 0..n);
    // Events are counted processed after their alerts were handed to the outputs.
    wait_for("every event processed", Duration::from_secs(120), || {
        metric(&scrape(&web), "vigil_events_processed_total", &[]) == n as f64
    });
    let during = scrape(&web);
    assert_eq!(
        metric(
            &during,
            "falcosecurity_falco_rules_matches_total",
            SEQ_TOOL_LABELS
        ),
        n as f64
    );
    assert_eq!(
        metric(&during, "vigil_output_delivered_total", &[("sink", "http")]),
        0.0
    );
    assert!(
        metric(
            &during,
            "vigil_output_delivery_failures_total",
            &[("sink", "http")]
        ) > 0.0,
        "the outage was noticed"
    );
    agent.kill();
    assert_eq!(mode(&spool), 0o700, "spool directory under umask 000");
    let files: Vec<PathBuf> = fs::read_dir(&spool)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!spool_segments(&spool).is_empty(), "alerts on disk");
    for file in &files {
        assert_eq!(mode(file), 0o600, "{} under umask 000", file.display());
    }

    let receiver = Receiver::start_on(addr);
    let agent = Agent::launch(&dir, &config, &dir.join("capture-2.jsonl"), None);
    let web = agent.web_addr();
    wait_for(
        "every alert after the restart",
        Duration::from_secs(120),
        || receiver.count() as u64 >= n,
    );
    let after = scrape(&web);
    let stderr = agent.stop();
    let seqs: Vec<u64> = receiver.bodies().iter().map(|b| seq_of(b)).collect();
    assert_eq!(seqs.len() as u64, n, "exactly once: {stderr}");
    assert!(seqs.iter().copied().eq(0..n), "in order: {seqs:?}");
    assert_eq!(
        metric(&after, "vigil_output_delivered_total", &[("sink", "http")]),
        n as f64
    );
    for reason in ["spool_corrupt", "spool_gap"] {
        assert_eq!(
            metric(
                &after,
                "vigil_output_dropped_total",
                &[("sink", "http"), ("reason", reason)]
            ),
            0.0,
            "{reason}"
        );
    }
    assert!(
        stderr.contains(&format!("http: delivered {n}, ")),
        "{stderr}"
    );
    assert!(stderr.contains("dropped 0, left in spool 0"), "{stderr}");
    assert!(
        spool_segments(&spool).len() <= 1,
        "delivered segments deleted"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn damaged_spool_records_are_counted_and_never_delivered() {
    let _host = host::shared();
    let dir = scratch("damaged");
    let addr = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let spool = dir.join("spool");
    let config = agent_config(&format!(
        "http_output:\n  enabled: true\n  url: http://{addr}/\n  spool_dir: {}\n  \
         retry_max_backoff: 200ms\n",
        spool.display()
    ));
    let capture = dir.join("capture.jsonl");
    let agent = Agent::launch(&dir, &config, &capture, None);
    let web = agent.web_addr();
    append_events(&capture, 0..20);
    wait_for("20 processed events", Duration::from_secs(60), || {
        metric(&scrape(&web), "vigil_events_processed_total", &[]) == 20.0
    });
    agent.kill();

    // Between the runs, damage two records on disk: alert 5's text (`seq n=5` → `seq n=7`,
    // still valid JSON, so only the checksum can tell), and the length field of alert 12's
    // frame (its top byte: the frame header is 17 bytes, the length its first 4).
    let find = |data: &[u8], needle: &str| {
        data.windows(needle.len())
            .position(|w| w == needle.as_bytes())
    };
    let mut damaged = 0;
    for segment in spool_segments(&spool) {
        let mut data = fs::read(&segment).unwrap();
        if let Some(at) = find(&data, "seq n=5\"") {
            data[at + "seq n=".len()] = b'7';
            damaged += 1;
        }
        if let Some(at) = find(&data, "seq n=12\"") {
            let body = data[..at]
                .windows(b"{\"hostname\"".len())
                .rposition(|w| w == b"{\"hostname\"")
                .expect("the alert's JSON object");
            data[body - 17 + 3] ^= 0x40;
            damaged += 1;
        }
        fs::write(&segment, data).unwrap();
    }
    assert_eq!(damaged, 2, "both records found in the spool");

    let receiver = Receiver::start_on(addr);
    let agent = Agent::launch(&dir, &config, &dir.join("capture-2.jsonl"), None);
    let web = agent.web_addr();
    let internal = |bodies: &[String]| -> Vec<serde_json::Value> {
        bodies
            .iter()
            .map(|b| serde_json::from_str::<serde_json::Value>(b).unwrap())
            .filter(|v| v["rule"] == "Vigil lost spooled alerts")
            .collect()
    };
    wait_for(
        "18 alerts and the spool-loss alert",
        Duration::from_secs(60),
        || {
            let bodies = receiver.bodies();
            let alerts = bodies.iter().filter(|b| b.contains("\"Seq tool\"")).count();
            alerts >= 18 && !internal(&bodies).is_empty()
        },
    );
    let after = scrape(&web);
    let stderr = agent.stop();
    let bodies = receiver.bodies();
    let seqs: Vec<u64> = bodies
        .iter()
        .filter(|b| b.contains("\"Seq tool\""))
        .map(|b| seq_of(b))
        .collect();
    let want: Vec<u64> = (0..20).filter(|n| *n != 5 && *n != 12).collect();
    assert_eq!(seqs, want, "the damaged records never reach the receiver");
    assert_eq!(
        metric(
            &after,
            "vigil_output_dropped_total",
            &[("sink", "http"), ("reason", "spool_corrupt")]
        ),
        2.0
    );
    assert_eq!(
        metric(
            &after,
            "vigil_output_dropped_total",
            &[("sink", "http"), ("reason", "spool_gap")]
        ),
        0.0
    );
    let alerts = internal(&bodies);
    let total = alerts.last().unwrap()["output_fields"]["vigil.spool_corrupt_total"]
        .as_u64()
        .expect("a running total");
    assert!((1..=2).contains(&total), "{alerts:?}");
    assert!(stderr.contains("dropped 2 (spool_corrupt=2)"), "{stderr}");
    assert!(stderr.contains("checksum mismatch"), "{stderr}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn stats_file_lines_match_event_counts() {
    let _host = host::shared();
    let dir = scratch("stats");
    fs::write(dir.join("rules.yaml"), RULES).unwrap();
    let capture = dir.join("capture.jsonl");
    let mut text = capture_header();
    for n in 0..3000 {
        text.push_str(&event(n));
    }
    fs::write(&capture, text).unwrap();
    let stats = dir.join("stats.jsonl");
    let out = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args([
            "replay",
            "--stats-interval",
            "1",
            "-o",
            "syslog_output.enabled=false",
            "-s",
        ])
        .arg(&stats)
        .arg(&capture)
        .arg("-r")
        .arg(dir.join("rules.yaml"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 3000);
    let lines: Vec<serde_json::Value> = fs::read_to_string(&stats)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert!(!lines.is_empty());
    let mut sum = 0;
    for (i, line) in lines.iter().enumerate() {
        assert_eq!(line["sample"], i as u64 + 1);
        sum += line["delta"]["events"].as_u64().unwrap();
        assert_eq!(
            line["cur"]["events"].as_u64().unwrap(),
            sum,
            "cur is the sum of deltas"
        );
        assert_eq!(line["cur"]["drops"], 0);
        assert_eq!(line["drop_pct"], 0.0);
    }
    assert_eq!(sum, 3000, "the last line has every event of the capture");
    let _ = fs::remove_dir_all(&dir);
}

fn file_lines(path: &Path) -> Vec<String> {
    fs::read_to_string(path)
        .map(|t| t.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[test]
fn sigusr1_reopens_files_and_sighup_reloads_rules_and_config() {
    let _host = host::shared();
    let dir = scratch("signals");
    let out = dir.join("alerts.txt");
    // Reloads by SIGHUP alone: the files rewritten below would reload by themselves too.
    let config = format!(
        "stdout_output: {{enabled: false}}\nsyslog_output: {{enabled: false}}\nwebserver: {{enabled: false}}\n\
         watch_config_files: false\n\
         file_output: {{enabled: true, keep_alive: true, filename: {}}}\n",
        out.display()
    );
    let agent = Agent::start(&dir, &config);
    let capture = dir.join("capture.jsonl");
    append_events(&capture, 0..5);
    wait_for("5 alerts in the file", Duration::from_secs(60), || {
        file_lines(&out).len() == 5
    });

    // Log rotation: move the file away, SIGUSR1, new alerts go to a new file.
    fs::rename(&out, dir.join("alerts.txt.1")).unwrap();
    agent.signal("USR1");
    agent.wait_stderr("SIGUSR1: reopening outputs");
    append_events(&capture, 5..10);
    wait_for("5 alerts in the new file", Duration::from_secs(60), || {
        file_lines(&out).len() == 5
    });
    let rotated = file_lines(&dir.join("alerts.txt.1"));
    assert_eq!(rotated.len(), 5);
    assert!(rotated.iter().all(|l| l.contains("Warning seq n=")));

    // Reload: new rule output and JSON alerts; events keep flowing, none lost.
    fs::write(
        dir.join("rules.yaml"),
        RULES.replace("seq n=", "reloaded n="),
    )
    .unwrap();
    fs::write(
        dir.join("config.yaml"),
        format!("{config}json_output: true\n"),
    )
    .unwrap();
    agent.signal("HUP");
    agent.wait_stderr("SIGHUP: reloaded configuration and 1 rules");
    append_events(&capture, 10..15);
    wait_for("5 reloaded alerts", Duration::from_secs(60), || {
        file_lines(&out).len() == 10
    });
    let lines = file_lines(&out);
    for (i, line) in lines[5..].iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line).expect("JSON after the reload");
        assert!(
            v["output"]
                .as_str()
                .unwrap()
                .ends_with(&format!("Warning reloaded n={}", 10 + i)),
            "{line}"
        );
    }
    // A broken rules file is refused; the running rules stay.
    fs::write(dir.join("rules.yaml"), "- rule: [broken").unwrap();
    agent.signal("HUP");
    agent.wait_stderr("SIGHUP: reload failed, keeping the running configuration");
    append_events(&capture, 15..16);
    wait_for(
        "an alert after the failed reload",
        Duration::from_secs(60),
        || file_lines(&out).len() == 11,
    );
    assert!(file_lines(&out)[10].contains("reloaded n=15"));
    let stderr = agent.stop();
    // The outputs restarted with the reload: 5 reloaded alerts and the last one.
    assert!(
        stderr.contains("file: delivered 6, failed attempts 0, dropped 0"),
        "{stderr}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Stderr lines of `agent` containing `needle`.
fn stderr_count(agent: &Agent, needle: &str) -> usize {
    agent
        .stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(needle))
        .count()
}

#[test]
fn changed_files_reload_rules_and_config_without_a_signal() {
    let _host = host::shared();
    let dir = scratch("watch-files");
    let out = dir.join("alerts.txt");
    // The alerts file is in the watched directory: writing it must not reload.
    let config = format!(
        "stdout_output: {{enabled: false}}\nsyslog_output: {{enabled: false}}\nwebserver: {{enabled: false}}\n\
         file_output: {{enabled: true, keep_alive: true, filename: {}}}\n",
        out.display()
    );
    let agent = Agent::start(&dir, &config);
    let capture = dir.join("capture.jsonl");
    let rules = dir.join("rules.yaml");
    append_events(&capture, 0..3);
    wait_for("3 alerts", Duration::from_secs(60), || {
        file_lines(&out).len() == 3
    });

    // An editor's save: a new file renamed over the rules file.
    let replace = |text: &str| {
        let tmp = dir.join(".rules.yaml.swp");
        fs::write(&tmp, text).unwrap();
        fs::rename(&tmp, &rules).unwrap();
    };
    replace(&RULES.replace("seq n=", "renamed n="));
    agent.wait_stderr("files changed: reloaded configuration and 1 rules");
    append_events(&capture, 3..6);
    wait_for("3 alerts of the new rules", Duration::from_secs(60), || {
        file_lines(&out).len() == 6
    });
    let lines = file_lines(&out);
    assert!(lines[..3].iter().all(|l| l.contains("seq n=")), "{lines:?}");
    assert!(
        lines[3..].iter().all(|l| l.contains("renamed n=")),
        "{lines:?}"
    );

    // The configuration file written in place: JSON alerts from now on.
    fs::write(
        dir.join("config.yaml"),
        format!("{config}json_output: true\n"),
    )
    .unwrap();
    wait_for("a second reload", Duration::from_secs(60), || {
        stderr_count(&agent, "files changed: reloaded configuration") == 2
    });
    append_events(&capture, 6..7);
    wait_for("a JSON alert", Duration::from_secs(60), || {
        file_lines(&out).len() == 7
    });
    let v: serde_json::Value = serde_json::from_str(&file_lines(&out)[6]).expect("JSON alert");
    assert!(
        v["output"].as_str().unwrap().ends_with("renamed n=6"),
        "{v}"
    );

    // A malformed rules file is refused with its position; the running rules stay, and the
    // rules file is still watched (renamed over again).
    replace(
        "- rule: Seq tool\n  desc: d\n  output: o\n  condition: evt.type = execve and (proc.name = seqtool\n  priority: WARNING\n",
    );
    agent.wait_stderr("files changed: reload failed, keeping the running configuration");
    let position = format!("{}:4:", rules.display());
    assert!(
        agent
            .stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.starts_with(&position) && l.contains("error[")),
        "no diagnostic at `{position}`: {:?}",
        agent.stderr.lock().unwrap()
    );
    append_events(&capture, 7..8);
    wait_for(
        "an alert after the failed reload",
        Duration::from_secs(60),
        || file_lines(&out).len() == 8,
    );
    assert!(file_lines(&out)[7].contains("renamed n=7"));
    replace(&RULES.replace("seq n=", "fixed n="));
    wait_for("the fixed rules reloaded", Duration::from_secs(60), || {
        stderr_count(&agent, "files changed: reloaded configuration") == 3
    });
    append_events(&capture, 8..9);
    wait_for(
        "an alert of the fixed rules",
        Duration::from_secs(60),
        || file_lines(&out).len() == 9,
    );
    assert!(file_lines(&out)[8].contains("fixed n=8"));
    let stderr = agent.stop();
    // One reload per save; the alerts file and the capture never caused one.
    assert_eq!(stderr.matches("files changed:").count(), 4, "{stderr}");
    let _ = fs::remove_dir_all(&dir);
}

/// `vigil replay` of three seqtool events with the given options; stdout lines.
fn replay(dir: &Path, args: &[&str]) -> Vec<String> {
    fs::write(dir.join("rules.yaml"), RULES).unwrap();
    let capture = dir.join("capture.jsonl");
    let text = format!("{}{}{}{}", capture_header(), event(0), event(1), event(2));
    fs::write(&capture, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .arg("replay")
        .arg(&capture)
        .arg("-r")
        .arg(dir.join("rules.yaml"))
        .args(["-o", "syslog_output.enabled=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn falco_output_settings_change_the_alerts() {
    let _host = host::shared();
    let dir = scratch("settings");
    // Text: time of day, or ISO 8601 with time_format_iso_8601.
    let text = replay(&dir, &[]);
    assert_eq!(text[0], "22:13:20.000001000: Warning seq n=0");
    let iso = replay(&dir, &["-o", "time_format_iso_8601=true"]);
    assert_eq!(
        iso[0],
        "2023-11-14T22:13:20.000001000+0000: Warning seq n=0"
    );
    // JSON with and without the optional properties.
    let json = replay(
        &dir,
        &[
            "-o",
            "json_output=true",
            "-o",
            "json_include_message_property=true",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&json[1]).unwrap();
    assert_eq!(v["output"], "22:13:20.000002000: Warning seq n=1");
    assert_eq!(v["message"], "seq n=1");
    assert_eq!(v["tags"], serde_json::json!(["test"]));
    assert_eq!(v["output_fields"]["proc.args"], "1");
    let bare = replay(
        &dir,
        &[
            "-o",
            "json_output=true",
            "-o",
            "json_include_output_property=false",
            "-o",
            "json_include_tags_property=false",
            "-o",
            "json_include_output_fields_property=false",
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&bare[0]).unwrap();
    let mut keys: Vec<&String> = v.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["hostname", "priority", "rule", "source", "time"]);
    // append_output: text after the output, extra fields (proc.env, formats) in output_fields.
    let appended = replay(
        &dir,
        &[
            "-o",
            "json_output=true",
            "-o",
            r#"append_output[0]={match: {tags: [test], source: syscall}, extra_output: "seq=%proc.env[SEQ]", extra_fields: [proc.env, {home: "%proc.env[HOME]"}, {team: blue}]}"#,
            "-o",
            r#"append_output[1]={match: {rule: Other}, extra_output: never}"#,
        ],
    );
    let v: serde_json::Value = serde_json::from_str(&appended[2]).unwrap();
    assert_eq!(v["output"], "22:13:20.000003000: Warning seq n=2 seq=2");
    assert_eq!(v["output_fields"]["proc.env"], "SEQ=2 HOME=/root");
    assert_eq!(v["output_fields"]["home"], "/root");
    assert_eq!(v["output_fields"]["team"], "blue");
    // stdout_output disabled, program_output piping one alert per line.
    let piped = dir.join("piped.txt");
    let program = format!(
        "program_output={{enabled: true, keep_alive: true, program: \"cat >> {}\"}}",
        piped.display()
    );
    let none = replay(&dir, &["-o", "stdout_output.enabled=false", "-o", &program]);
    assert!(none.is_empty());
    assert_eq!(
        file_lines(&piped),
        [
            "22:13:20.000001000: Warning seq n=0",
            "22:13:20.000002000: Warning seq n=1",
            "22:13:20.000003000: Warning seq n=2"
        ]
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn bad_output_settings_fail_with_the_key_path() {
    let _host = host::shared();
    let dir = scratch("bad");
    fs::write(dir.join("rules.yaml"), RULES).unwrap();
    let capture = dir.join("capture.jsonl");
    fs::write(&capture, format!("{}{}", capture_header(), event(0))).unwrap();
    let run = |opts: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_vigil"))
            .arg("replay")
            .arg(&capture)
            .arg("-r")
            .arg(dir.join("rules.yaml"))
            .args(opts.iter().flat_map(|o| ["-o", o]))
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let cases: &[(&[&str], &str)] = &[
        (
            &["http_output.spool_max_bytes=lots"],
            "`http_output.spool_max_bytes`: expected a non-negative integer",
        ),
        (
            &["http_output.retry_max_backoff=soon"],
            "`http_output.retry_max_backoff`: invalid duration `soon`",
        ),
        (
            &["drop_alert.priority=loud"],
            "`drop_alert.priority`: unknown priority `loud`",
        ),
        (
            &["http_output.enabled=true"],
            "http_output: http_output.url is empty",
        ),
        (
            &["http_output.enabled=true", "http_output.url=ftp://x"],
            "not an http:// or https:// URL",
        ),
        (
            &["append_output[0]={extra_fields: [no.such.field]}"],
            "append_output[0].extra_fields[0]: E_UNKNOWN_FIELD",
        ),
    ];
    for (opts, want) in cases {
        let (code, stderr) = run(opts);
        assert_eq!(code, Some(2), "{opts:?}: {stderr}");
        assert!(
            stderr.contains(want),
            "{opts:?}: wanted `{want}` in:\n{stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let _ = fs::remove_dir_all(&dir);
}

/// A loopback HTTP endpoint that accepts connections and never answers; counts connections.
struct Silent {
    addr: SocketAddr,
    accepted: Arc<Mutex<usize>>,
}

impl Silent {
    fn start() -> Silent {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(Mutex::new(0));
        let count = Arc::clone(&accepted);
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                *count.lock().unwrap() += 1;
                held.push(stream);
            }
        });
        Silent { addr, accepted }
    }

    fn accepted(&self) -> usize {
        *self.accepted.lock().unwrap()
    }
}

#[test]
fn http_timeouts_give_up_alerts_after_max_consecutive_timeouts_counted() {
    let _host = host::shared();
    let dir = scratch("timeouts");
    let silent = Silent::start();
    let snapshots = dir.join("metrics.jsonl");
    let config = agent_config(&format!(
        "http_output:\n  enabled: true\n  url: http://{}/\n  timeout: 200ms\n  \
         max_consecutive_timeouts: 1\n\
         metrics: {{enabled: true, interval: 100ms, output_rule: false, output_file: {}}}\n",
        silent.addr,
        snapshots.display()
    ));
    let agent = Agent::start(&dir, &config);
    let web = agent.web_addr();
    append_events(&dir.join("capture.jsonl"), 0..3);
    // Each alert: the first attempt times out, the one ignored timeout is retried at once, then
    // the alert is given up (no spool is configured: Falco's meaning of the setting; with a
    // spool the output would count as down and keep it, see `delivery.rs`'s tests). The
    // loss raises the internal drop alert (one per minute), which meets the same fate: 4
    // alerts given up in all, 8 attempts. At exit, the drop not yet reported (that alert)
    // raises a last one, given up too: 5 and 10.
    wait_for("the drop alert", Duration::from_secs(60), || {
        metric(
            &scrape(&web),
            "vigil_internal_alerts_total",
            &[("rule", "Vigil dropped alerts")],
        ) >= 1.0
    });
    wait_for("4 alerts given up", Duration::from_secs(60), || {
        let m = scrape(&web);
        metric(
            &m,
            "vigil_output_dropped_total",
            &[("sink", "http"), ("reason", "timeout")],
        ) == 4.0
    });
    let m = scrape(&web);
    assert_eq!(
        metric(&m, "vigil_output_timeouts_total", &[("sink", "http")]),
        8.0
    );
    assert_eq!(
        metric(&m, "vigil_output_delivered_total", &[("sink", "http")]),
        0.0
    );
    assert_eq!(
        metric(
            &m,
            "vigil_internal_alerts_total",
            &[("rule", "Vigil dropped alerts")]
        ),
        1.0,
        "rate-limited"
    );
    // The server thread may not have taken the last connection off the backlog yet.
    wait_for("8 connections", Duration::from_secs(30), || {
        silent.accepted() >= 8
    });
    assert_eq!(silent.accepted(), 8, "two attempts per alert");
    wait_for(
        "a metrics snapshot counting the drops",
        Duration::from_secs(60),
        || {
            file_lines(&snapshots).iter().any(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .is_ok_and(|v| v["output_fields"]["falco.outputs_queue_num_drops"] == 4)
            })
        },
    );
    let stderr = agent.stop();
    assert!(
        stderr.contains("output `http`: giving up 1 alert(s) after 2 consecutive timeout(s)"),
        "{stderr}"
    );
    assert!(
        stderr.contains(
            "output http: delivered 0, failed attempts 10 (10 timed out), dropped 5 (timeout=5)"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("vigil: at exit: events in 3, processed 3, dropped 0"),
        "{stderr}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Waits for `child` to exit (killing it after `limit`); its exit code and stderr.
fn exit_within(mut child: Child, limit: Duration) -> (Option<i32>, String) {
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("vigil did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        let _ = pipe.read_to_string(&mut stderr);
    }
    (status.code(), stderr)
}

/// Runs a tool the test needs (from the Makefile's APT_PACKAGES), failing clearly without it.
fn tool(name: &str, args: &[&str]) -> std::process::Output {
    Command::new(name)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{name}` (apt package `{name}`): {e}"))
}

#[test]
fn webserver_ssl_serves_https_only_and_a_bad_certificate_exits_1() {
    let _host = host::shared();
    let dir = scratch("tls");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let out = tool(
        "openssl",
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            &key.display().to_string(),
            "-out",
            &cert.display().to_string(),
        ],
    );
    assert!(
        out.status.success(),
        "openssl: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Falco's format: certificate and key in one PEM file.
    let pem = dir.join("falco.pem");
    fs::write(
        &pem,
        format!(
            "{}{}",
            fs::read_to_string(&cert).unwrap(),
            fs::read_to_string(&key).unwrap()
        ),
    )
    .unwrap();
    let config = format!(
        "stdout_output: {{enabled: false}}\nsyslog_output: {{enabled: false}}\n\
         webserver: {{enabled: true, listen_port: 0, prometheus_metrics_enabled: true, \
         ssl_enabled: true, ssl_certificate: {}}}\n",
        pem.display()
    );
    let agent = Agent::start(&dir, &config);
    agent.wait_stderr("webserver listening on https://");
    let addr = {
        let lines = agent.stderr.lock().unwrap();
        let line = lines
            .iter()
            .find(|l| l.contains("webserver listening on https://"))
            .unwrap();
        line.rsplit("https://").next().unwrap().to_owned()
    };
    let cacert = cert.display().to_string();
    let url = format!("https://{addr}/healthz");
    let out = tool(
        "curl",
        &["-sS", "--max-time", "30", "--cacert", &cacert, &url],
    );
    assert!(
        out.status.success(),
        "curl over TLS: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "{\"status\": \"ok\"}");
    let url = format!("https://{addr}/metrics");
    let out = tool(
        "curl",
        &["-sS", "--max-time", "30", "--cacert", &cacert, &url],
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("vigil_up 1"));
    // Plain HTTP on the same port is not served.
    let url = format!("http://{addr}/healthz");
    let out = tool("curl", &["-sS", "--max-time", "30", &url]);
    assert!(
        !out.status.success() && !String::from_utf8_lossy(&out.stdout).contains("ok"),
        "plain HTTP served: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    agent.stop();

    // A missing certificate and a PEM without its key: a clear error and exit code 1.
    let no_key = dir.join("no-key.pem");
    fs::copy(&cert, &no_key).unwrap();
    for (path, want) in [
        (dir.join("missing.pem"), "No such file"),
        (no_key, "no private key found"),
    ] {
        let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
            .args(["replay", "--follow"])
            .arg(dir.join("capture.jsonl"))
            .arg("-r")
            .arg(dir.join("rules.yaml"))
            .args(["-o", "syslog_output.enabled=false", "-o"])
            .args([
                "webserver.listen_port=0",
                "-o",
                "webserver.ssl_enabled=true",
            ])
            .arg("-o")
            .arg(format!("webserver.ssl_certificate={}", path.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (code, stderr) = exit_within(child, Duration::from_secs(60));
        assert_eq!(code, Some(1), "{stderr}");
        let named = format!("webserver.ssl_certificate `{}`", path.display());
        assert!(stderr.contains(&named) && stderr.contains(want), "{stderr}");
    }
    let _ = fs::remove_dir_all(&dir);
}

/// `/metrics` under Falco's names: zero-valued series for every drop kind and every loaded
/// rule before the first event, then the event, drop and match counters with the right
/// values; the `metrics:` block's flags hide their categories.
#[test]
fn metrics_use_falcos_names_with_zero_series_from_the_start() {
    let _host = host::shared();
    let dir = scratch("falco-names");
    let agent = Agent::start(&dir, &agent_config(""));
    let web = agent.web_addr();
    let before = scrape(&web);
    let has = |m: &Samples, name: &str, labels: &[(&str, &str)]| {
        let mut key: Vec<(String, String)> = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        key.sort();
        m.contains_key(&(name.to_owned(), key))
    };
    for (dir_label, drop) in [
        ("enter", "clone_fork"),
        ("exit", "clone_fork"),
        ("exit", "execve"),
        ("exit", "connect"),
        ("exit", "open"),
        ("exit", "dir_file"),
        ("exit", "other_interest"),
        ("exit", "close"),
        ("exit", "proc"),
    ] {
        let labels = [("dir", dir_label), ("drop", drop)];
        assert!(
            has(&before, "falcosecurity_scap_n_drops_buffer_total", &labels),
            "zero-valued n_drops_buffer{{{dir_label},{drop}}} before any drop: {before:?}"
        );
        assert_eq!(
            metric(&before, "falcosecurity_scap_n_drops_buffer_total", &labels),
            0.0
        );
    }
    for name in [
        "falcosecurity_scap_n_drops_total",
        "falcosecurity_scap_n_drops_scratch_map_total",
        "falcosecurity_scap_n_drops_page_faults_total",
        "falcosecurity_scap_n_drops_bug_total",
        "vigil_source_queue_drops_total",
        "vigil_source_filtered_failed_total",
        "falcosecurity_falco_outputs_queue_num_drops_total",
    ] {
        assert!(has(&before, name, &[]), "{name} exported before any drop");
        assert_eq!(metric(&before, name, &[]), 0.0, "{name}");
    }
    assert!(
        has(
            &before,
            "falcosecurity_falco_rules_matches_total",
            SEQ_TOOL_LABELS
        ),
        "a zero-valued match counter per loaded rule: {before:?}"
    );
    assert!(has(
        &before,
        "falcosecurity_falco_version_info",
        &[("version", env!("CARGO_PKG_VERSION"))]
    ));
    assert!(has(
        &before,
        "falcosecurity_scap_engine_name_info",
        &[("engine_name", "savefile"), ("evt_source", "syscall")]
    ));
    assert!(has(
        &before,
        "falcosecurity_falco_evt_source_info",
        &[("evt_source", "syscall")]
    ));
    assert!(
        before
            .keys()
            .any(|(name, _)| name == "falcosecurity_evt_hostname_info"),
        "hostname info"
    );
    assert!(metric(&before, "falcosecurity_falco_memory_rss_bytes", &[]) > 0.0);
    assert!(metric(&before, "falcosecurity_falco_host_num_cpus_total", &[]) >= 1.0);
    for (name, _) in before.keys() {
        assert!(
            !name.starts_with("process_") && name != "vigil_events_in_total",
            "renamed series still exported: {name}"
        );
    }

    append_events(&dir.join("capture.jsonl"), 0..25);
    wait_for("25 processed events", Duration::from_secs(60), || {
        metric(&scrape(&web), "vigil_events_processed_total", &[]) == 25.0
    });
    let after = scrape(&web);
    assert_eq!(metric(&after, "falcosecurity_scap_n_evts_total", &[]), 25.0);
    assert_eq!(
        metric(
            &after,
            "falcosecurity_falco_rules_matches_total",
            SEQ_TOOL_LABELS
        ),
        25.0
    );
    // events in = delivered + dropped = processed + dropped.
    let drops = metric(&after, "falcosecurity_scap_n_drops_total", &[]);
    assert_eq!(drops, 0.0);
    assert_eq!(
        metric(&after, "falcosecurity_scap_n_evts_total", &[]) + drops,
        metric(&after, "vigil_events_processed_total", &[]) + drops
    );
    agent.kill();

    // The `metrics:` flags gate their categories, as in Falco.
    let dir = scratch("falco-names-gated");
    let agent = Agent::start(
        &dir,
        &agent_config(
            "metrics: {kernel_event_counters_enabled: false, rules_counters_enabled: false, \
             resource_utilization_enabled: false}\n",
        ),
    );
    let gated = scrape(&agent.web_addr());
    for (name, _) in gated.keys() {
        assert!(
            !(name.starts_with("falcosecurity_scap_n_drops")
                && name != "falcosecurity_scap_n_drops_full_threadtable_total")
                && name != "falcosecurity_scap_n_evts_total"
                && name != "falcosecurity_falco_rules_matches_total"
                && name != "falcosecurity_falco_memory_rss_bytes",
            "{name} exported though its category is off"
        );
    }
    assert!(gated
        .keys()
        .any(|(name, _)| name == "falcosecurity_scap_n_threads_total"));
    assert!(gated
        .keys()
        .any(|(name, _)| name == "falcosecurity_falco_version_info"));
    agent.kill();
}

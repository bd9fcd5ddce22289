//! `vigil generate bench`: Falco event-generator's capacity method over `vigil generate`
//! actions. Rounds of actions separated by a sleep; after each round a rest, then the alerts
//! received per action are counted against the runs (expected); a clean round (no alert beyond
//! the expected) halves the sleep when looping. Alerts come from a local HTTP endpoint
//! receiving Falco-format JSON POSTs (any agent with `http_output`), or from a JSON-lines file
//! (`vigil watch --json > FILE`).

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use regex::Regex;
use serde::Serialize;
use serde_json::json;

use crate::plots;
use crate::report::{self, cell};
use crate::stats::{lost_percent, next_sleep};
use crate::system::{self, SystemInfo};
use crate::{sys, BenchError, Progress};

/// An action as `vigil generate list --json` describes it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Action {
    pub name: String,
    pub rules_stable: Vec<String>,
    pub rules_default: Vec<String>,
}

/// Which rule list counts an alert for an action.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleSet {
    /// Vigil's default rules (`rules_default`).
    Default,
    /// Falco's upstream stable rules (`rules_stable`).
    Stable,
}

/// Parses the action list: a JSON array of objects, or one object per line.
pub fn parse_actions(text: &str) -> Result<Vec<Action>, BenchError> {
    let invalid = |detail: String| BenchError::Invalid {
        what: "action list".into(),
        detail,
    };
    let values: Vec<serde_json::Value> = match serde_json::from_str::<serde_json::Value>(text) {
        Ok(serde_json::Value::Array(items)) => items,
        Ok(v @ serde_json::Value::Object(_)) => vec![v],
        _ => text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| invalid(format!("{e} in `{l}`"))))
            .collect::<Result<_, _>>()?,
    };
    let strings = |v: &serde_json::Value, key: &str| -> Vec<String> {
        v.get(key)
            .and_then(serde_json::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|s| s.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    };
    values
        .iter()
        .map(|v| {
            let name = v
                .get("name")
                .and_then(serde_json::Value::as_str)
                .ok_or_else(|| invalid(format!("an action without `name`: {v}")))?;
            Ok(Action {
                name: name.to_string(),
                rules_stable: strings(v, "rules_stable"),
                rules_default: strings(v, "rules_default"),
            })
        })
        .collect()
}

/// Rule name → index of the first action listing it.
pub fn rule_map(actions: &[Action], set: RuleSet) -> HashMap<String, usize> {
    let mut map = HashMap::new();
    for (i, a) in actions.iter().enumerate() {
        let rules = match set {
            RuleSet::Default => &a.rules_default,
            RuleSet::Stable => &a.rules_stable,
        };
        for r in rules {
            map.entry(r.clone()).or_insert(i);
        }
    }
    map
}

/// The `rule` of every alert in a body: one JSON object, an array of them, or JSON lines.
/// Unparsable parts are skipped.
pub fn alert_rules(body: &str) -> Vec<String> {
    fn rule_of(v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Array(items) => items.iter().for_each(|i| rule_of(i, out)),
            serde_json::Value::Object(map) => {
                if let Some(r) = map.get("rule").and_then(serde_json::Value::as_str) {
                    out.push(r.to_string());
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(body) {
        rule_of(&v, &mut out);
        return out;
    }
    for line in body.lines() {
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
            rule_of(&v, &mut out);
        }
    }
    out
}

/// Counts alerts per action; returns (per-action counts, alerts of no listed rule).
pub fn count_alerts(rules: &[String], map: &HashMap<String, usize>, n: usize) -> (Vec<u64>, u64) {
    let mut counts = vec![0u64; n];
    let mut other = 0;
    for r in rules {
        match map.get(r) {
            Some(&i) if i < n => counts[i] += 1,
            _ => other += 1,
        }
    }
    (counts, other)
}

/// A minimal HTTP/1.1 endpoint collecting POST bodies (Falco's `http_output`).
pub struct HttpReceiver {
    pub addr: String,
    rules: Arc<Mutex<Vec<String>>>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// Longest header line accepted.
const MAX_HEADER_LINE: u64 = 16 * 1024;

/// Largest request body accepted (bigger ones are answered 413 and dropped).
const MAX_BODY: usize = 4 << 20;

fn serve(mut stream: TcpStream, rules: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    loop {
        let mut length = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            // Header lines are bounded: a longer one ends the connection.
            match (&mut reader).take(MAX_HEADER_LINE).read_line(&mut line) {
                Ok(n) if n as u64 == MAX_HEADER_LINE => return,
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
            if first {
                first = false;
                continue;
            }
            if let Some((k, v)) = line.split_once(':') {
                if k.trim().eq_ignore_ascii_case("content-length") {
                    length = v.trim().parse().unwrap_or(0);
                }
            }
        }
        if length > MAX_BODY {
            let _ = stream.write_all(
                b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            return;
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let found = alert_rules(&String::from_utf8_lossy(&body));
        if let Ok(mut r) = rules.lock() {
            r.extend(found);
        }
        if stream
            .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            .is_err()
        {
            return;
        }
    }
}

impl HttpReceiver {
    /// Listens on `addr` (e.g. `127.0.0.1:2801`; port 0 picks one).
    pub fn start(addr: &str) -> Result<HttpReceiver, BenchError> {
        let listener = TcpListener::bind(addr).map_err(|source| BenchError::Io {
            what: format!("listen on `{addr}`"),
            source,
        })?;
        let local = listener.local_addr().map_err(|source| BenchError::Io {
            what: "read the listening address".into(),
            source,
        })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| BenchError::Io {
                what: "configure the listener".into(),
                source,
            })?;
        let rules = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (r, s) = (Arc::clone(&rules), Arc::clone(&stop));
        let handle = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = stream.set_nonblocking(false);
                        let r = Arc::clone(&r);
                        std::thread::spawn(move || serve(stream, &r));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        Ok(HttpReceiver {
            addr: local.to_string(),
            rules,
            stop,
            handle: Some(handle),
        })
    }

    /// The rules of the alerts received since the last call.
    pub fn drain(&self) -> Vec<String> {
        self.rules
            .lock()
            .map(|mut r| std::mem::take(&mut *r))
            .unwrap_or_default()
    }
}

impl Drop for HttpReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Reads the lines appended to a JSON-lines alerts file since the last call.
pub struct FileTail {
    path: PathBuf,
    offset: u64,
}

impl FileTail {
    /// Starts at the file's current end (alerts from before the bench do not count).
    pub fn new(path: PathBuf) -> FileTail {
        let offset = std::fs::metadata(&path).map_or(0, |m| m.len());
        FileTail { path, offset }
    }

    pub fn drain(&mut self) -> Vec<String> {
        let Ok(mut f) = File::open(&self.path) else {
            return Vec::new();
        };
        if f.seek(SeekFrom::Start(self.offset)).is_err() {
            return Vec::new();
        }
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        // Only whole lines; a partial last line waits for the next drain.
        let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |p| p + 1);
        self.offset += end as u64;
        let text = String::from_utf8_lossy(&bytes[..end]);
        alert_rules(&text)
    }
}

/// Where alerts come from.
pub enum AlertSource {
    Http(HttpReceiver),
    File(FileTail),
}

impl AlertSource {
    fn drain(&mut self) -> Vec<String> {
        match self {
            AlertSource::Http(h) => h.drain(),
            AlertSource::File(f) => f.drain(),
        }
    }

    fn describe(&self) -> String {
        match self {
            AlertSource::Http(h) => format!("HTTP POSTs on http://{}/", h.addr),
            AlertSource::File(f) => format!("JSON lines appended to `{}`", f.path.display()),
        }
    }
}

/// Settings of a generator bench.
pub struct GenBenchOptions {
    /// The generator command (default `[vigil, "generate"]`): `… list --json` and
    /// `… run --exact NAME` are appended.
    pub generator: Vec<String>,
    pub regex: String,
    pub looping: bool,
    pub round_duration: Duration,
    pub sleep: Duration,
    pub rounds: usize,
    pub pid: Option<i32>,
    pub rule_set: RuleSet,
    pub source: AlertSource,
    pub out: PathBuf,
}

/// One round's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Round {
    pub round: usize,
    pub sleep_ms: f64,
    pub expected: Vec<u64>,
    pub actual: Vec<u64>,
    pub other_alerts: u64,
    pub eps: f64,
    pub cpu_pct: Option<f64>,
    pub rss_kib: Option<u64>,
    pub vsize_kib: Option<u64>,
    pub dirty: bool,
}

impl Round {
    pub fn totals(&self) -> (u64, u64) {
        (self.expected.iter().sum(), self.actual.iter().sum())
    }
}

/// Lists the actions matching the regex.
pub fn list_actions(generator: &[String], regex: &str) -> Result<Vec<Action>, BenchError> {
    if generator.is_empty() {
        return Err(BenchError::Invalid {
            what: "generator command".into(),
            detail: "empty".into(),
        });
    }
    let re = Regex::new(regex).map_err(|e| BenchError::Invalid {
        what: "action regex".into(),
        detail: e.to_string(),
    })?;
    let out = Command::new(&generator[0])
        .args(&generator[1..])
        .args(["list", "--json"])
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|source| BenchError::Io {
            what: format!("run `{} list --json`", generator.join(" ")),
            source,
        })?;
    if !out.status.success() {
        return Err(BenchError::Invalid {
            what: "action list".into(),
            detail: format!(
                "`{} list --json` exited with {}",
                generator.join(" "),
                out.status
            ),
        });
    }
    let actions: Vec<Action> = parse_actions(&String::from_utf8_lossy(&out.stdout))?
        .into_iter()
        .filter(|a| re.is_match(&a.name))
        .collect();
    if actions.is_empty() {
        return Err(BenchError::Invalid {
            what: "action regex".into(),
            detail: format!("no action matches `{regex}`"),
        });
    }
    Ok(actions)
}

/// Runs the rounds, printing them like Falco's tool, and writes the report.
pub fn run(opts: &mut GenBenchOptions, progress: Progress) -> Result<Vec<Round>, BenchError> {
    let started = report::now_epoch();
    let info = SystemInfo::collect();
    let actions = list_actions(&opts.generator, &opts.regex)?;
    let map = rule_map(&actions, opts.rule_set);
    progress(&format!(
        "{} action(s); alerts from {}",
        actions.len(),
        opts.source.describe()
    ));
    let hz = sys::clock_ticks() as f64;
    let page_kib = 4u64;
    let mut sleep = opts.sleep;
    let mut rounds = Vec::new();
    let mut last_cpu = opts
        .pid
        .and_then(system::proc_stat)
        .map(|(_, s)| s.cpu_ticks);
    let _ = opts.source.drain();
    for round in 1..=opts.rounds.max(1) {
        progress(&format!("round #{round} sleep={sleep:?}"));
        let round_start = Instant::now();
        let mut expected = vec![0u64; actions.len()];
        let mut ran = 0u64;
        'running: loop {
            for (i, a) in actions.iter().enumerate() {
                if round_start.elapsed() >= opts.round_duration {
                    break 'running;
                }
                if !sleep.is_zero() {
                    std::thread::sleep(sleep);
                }
                let status = Command::new(&opts.generator[0])
                    .args(&opts.generator[1..])
                    .args(["run", "--exact", &a.name])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
                ran += 1;
                match status {
                    Ok(s) if s.success() => expected[i] += 1,
                    Ok(s) => progress(&format!("  action {} exited with {s}", a.name)),
                    Err(e) => progress(&format!("  action {} failed to start: {e}", a.name)),
                }
            }
        }
        let elapsed = round_start.elapsed().as_secs_f64().max(1e-9);
        progress("resting...");
        std::thread::sleep(opts.round_duration);
        progress("collecting...");
        std::thread::sleep(Duration::from_millis(200).min(opts.round_duration));
        let (actual, other) = count_alerts(&opts.source.drain(), &map, actions.len());
        let now_wall = round_start.elapsed().as_secs_f64().max(1e-9);
        let stat = opts.pid.and_then(system::proc_stat).map(|(_, s)| s);
        let cpu_pct = match (stat, last_cpu) {
            (Some(s), Some(prev)) => {
                Some(s.cpu_ticks.saturating_sub(prev) as f64 / hz / now_wall * 100.0)
            }
            _ => None,
        };
        last_cpu = stat.map(|s| s.cpu_ticks);
        for (i, a) in actions.iter().enumerate() {
            let ratio = if expected[i] == 0 {
                0.0
            } else {
                actual[i] as f64 / expected[i] as f64
            };
            progress(&format!(
                "{} expected={} actual={} ratio={ratio:.2} ({:.0}% lost)",
                a.name,
                expected[i],
                actual[i],
                lost_percent(expected[i], actual[i])
            ));
        }
        for (i, a) in actions.iter().enumerate() {
            if expected[i] == 0 {
                progress(&format!(
                    "{}: cannot generate events (too slow for this round?)",
                    a.name
                ));
            }
        }
        let dirty = actual.iter().zip(&expected).any(|(a, e)| a > e);
        let r = Round {
            round,
            sleep_ms: sleep.as_secs_f64() * 1000.0,
            expected,
            actual,
            other_alerts: other,
            eps: ran as f64 / elapsed,
            cpu_pct,
            rss_kib: stat.map(|s| s.rss_pages * page_kib),
            vsize_kib: stat.map(|s| s.vsize / 1024),
            dirty,
        };
        progress(&format!(
            "statistics cpu={} res_mem={} virt_mem={} sleep={sleep:?} throughput={:.1} EPS",
            r.cpu_pct.map_or("-".into(), |c| format!("{c:.1}%")),
            r.rss_kib
                .map_or("-".into(), |k| format!("{:.1} MB", k as f64 / 1024.0)),
            r.vsize_kib
                .map_or("-".into(), |k| format!("{:.1} MB", k as f64 / 1024.0)),
            r.eps
        ));
        if dirty {
            progress(&format!(
                "unexpected events received, retrying with sleep={sleep:?}"
            ));
        }
        sleep = next_sleep(sleep, opts.looping, dirty);
        rounds.push(r);
        progress("");
    }
    let (md, json) = render(opts, &info, started, &actions, &rounds);
    report::write_report(&opts.out, &md, &json)?;
    plots::from_report(&json, &opts.out)?;
    Ok(rounds)
}

fn render(
    opts: &GenBenchOptions,
    info: &SystemInfo,
    started: u64,
    actions: &[Action],
    rounds: &[Round],
) -> (String, serde_json::Value) {
    let mut md = report::header(
        "vigil generate bench",
        info,
        started,
        &[
            (
                "actions",
                format!(
                    "`{}` → {}",
                    opts.regex,
                    actions
                        .iter()
                        .map(|a| a.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            (
                "rules counted",
                match opts.rule_set {
                    RuleSet::Default => "rules_default".into(),
                    RuleSet::Stable => "rules_stable".to_string(),
                },
            ),
            ("alerts from", opts.source.describe()),
            (
                "rounds",
                format!(
                    "{} × {} s, rest {} s, loop (halving sleep) {}",
                    rounds.len(),
                    opts.round_duration.as_secs_f64(),
                    opts.round_duration.as_secs_f64(),
                    opts.looping
                ),
            ),
            (
                "monitored pid",
                opts.pid.map_or("none".into(), |p| p.to_string()),
            ),
        ],
    );
    md.push_str("| round | sleep | expected | actual | ratio | lost | EPS | CPU | RSS |\n|---|---|---|---|---|---|---|---|---|\n");
    for r in rounds {
        let (e, a) = r.totals();
        md.push_str(&format!(
            "| {} | {:.1} ms | {e} | {a} | {} | {:.1}% | {:.1} | {} | {} |\n",
            r.round,
            r.sleep_ms,
            cell((e > 0).then(|| a as f64 / e as f64)),
            lost_percent(e, a),
            r.eps,
            r.cpu_pct.map_or("-".into(), |c| format!("{c:.1}%")),
            r.rss_kib
                .map_or("-".into(), |k| format!("{:.1} MiB", k as f64 / 1024.0)),
        ));
    }
    md.push_str(
        "\n## Per action\n\n| round | action | expected | actual | lost |\n|---|---|---|---|---|\n",
    );
    for r in rounds {
        for (i, a) in actions.iter().enumerate() {
            md.push_str(&format!(
                "| {} | {} | {} | {} | {:.0}% |\n",
                r.round,
                a.name,
                r.expected[i],
                r.actual[i],
                lost_percent(r.expected[i], r.actual[i])
            ));
        }
    }
    md.push_str("\nPlot: `generate-bench.svg`.\n");
    let json = json!({
        "bench": "generate-bench",
        "started": started,
        "system": info,
        "regex": opts.regex,
        "actions": actions,
        "round_duration_s": opts.round_duration.as_secs_f64(),
        "looping": opts.looping,
        "pid": opts.pid,
        "alerts_from": opts.source.describe(),
        "rounds": rounds.iter().map(|r| {
            let (e, a) = r.totals();
            json!({
                "round": r.round, "sleep_ms": r.sleep_ms, "expected": e, "actual": a,
                "ratio": (e > 0).then(|| a as f64 / e as f64), "lost_pct": lost_percent(e, a),
                "eps": r.eps, "cpu_pct": r.cpu_pct, "rss_kib": r.rss_kib, "vsize_kib": r.vsize_kib,
                "dirty": r.dirty, "other_alerts": r.other_alerts,
                "per_action": actions.iter().enumerate().map(|(i, ac)| json!({
                    "action": ac.name, "expected": r.expected[i], "actual": r.actual[i],
                })).collect::<Vec<_>>(),
            })
        }).collect::<Vec<_>>(),
    });
    (md, json)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIST: &str = r#"[{"name":"syscall.ReadSensitiveFileUntrusted","rules_stable":["Read sensitive file untrusted"],"rules_default":["Sensitive file read"]},
        {"name":"syscall.WriteBelowBinaryDir","rules_stable":["Write below binary dir"],"rules_default":[]}]"#;

    #[test]
    fn actions_from_array_or_lines() {
        let a = parse_actions(LIST).unwrap();
        assert_eq!(a.len(), 2, "array");
        assert_eq!(
            a[0].rules_default,
            vec!["Sensitive file read"],
            "default rules"
        );
        let lines = "{\"name\":\"a\",\"rules_stable\":[\"R\"]}\n\n{\"name\":\"b\"}\n";
        let b = parse_actions(lines).unwrap();
        assert_eq!(b.len(), 2, "lines");
        assert!(b[1].rules_stable.is_empty(), "missing lists are empty");
        assert!(parse_actions("{\"x\":1}").is_err(), "no name");
        assert!(parse_actions("not json").is_err(), "garbage");
    }

    #[test]
    fn alerts_counted_per_action() {
        let actions = parse_actions(LIST).unwrap();
        let map = rule_map(&actions, RuleSet::Stable);
        let body = "{\"rule\":\"Read sensitive file untrusted\",\"priority\":\"Warning\"}\n\
                    {\"rule\":\"Write below binary dir\"}\n{\"rule\":\"Something else\"}\nbroken\n\
                    {\"rule\":\"Read sensitive file untrusted\"}\n";
        let rules = alert_rules(body);
        assert_eq!(rules.len(), 4, "four alerts parsed, garbage skipped");
        let (counts, other) = count_alerts(&rules, &map, actions.len());
        assert_eq!(counts, vec![2, 1], "per action");
        assert_eq!(other, 1, "unlisted rule");
        let map = rule_map(&actions, RuleSet::Default);
        let (counts, other) = count_alerts(
            &alert_rules("[{\"rule\":\"Sensitive file read\"}]"),
            &map,
            2,
        );
        assert_eq!((counts, other), (vec![1, 0], 0), "array body, default set");
    }

    #[test]
    fn http_receiver_collects_posts() {
        let rx = HttpReceiver::start("127.0.0.1:0").unwrap();
        let mut s = TcpStream::connect(&rx.addr).unwrap();
        for rule in ["A", "B"] {
            let body = format!("{{\"rule\":\"{rule}\",\"output\":\"x\"}}");
            write!(
                s,
                "POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            let mut reply = [0u8; 38];
            s.read_exact(&mut reply).unwrap();
            assert!(reply.starts_with(b"HTTP/1.1 200"), "200 reply");
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while got.len() < 2 && Instant::now() < deadline {
            got.extend(rx.drain());
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(got, vec!["A", "B"], "both alerts, in order");
    }

    #[test]
    fn list_actions_rejects_bad_input() {
        assert!(list_actions(&[], ".").is_err(), "empty generator");
        assert!(list_actions(&["true".into()], "(").is_err(), "bad regex");
        assert!(
            list_actions(&["true".into()], ".").is_err(),
            "no actions listed"
        );
    }

    #[test]
    fn file_tail_reads_only_new_whole_lines() {
        let path = std::env::temp_dir().join(format!("vigil-bench-tail-{}", std::process::id()));
        std::fs::write(&path, "{\"rule\":\"old\"}\n").unwrap();
        let mut tail = FileTail::new(path.clone());
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        f.write_all(b"{\"rule\":\"new\"}\n{\"rule\":\"par").unwrap();
        assert_eq!(tail.drain(), vec!["new"], "old skipped, partial held");
        f.write_all(b"tial\"}\n").unwrap();
        assert_eq!(tail.drain(), vec!["partial"], "completed line");
        let _ = std::fs::remove_file(&path);
    }
}

//! `vigil generate bench` against a real `vigil watch` (root, eBPF; skipped with a reason when
//! not root, a failure under `VIGIL_TEST_STRICT=1`), in a short mode: two one-second rounds of
//! two generator actions. The bench must print its rounds like Falco's event-generator
//! (`expected=… actual=… (…% lost)`, `statistics cpu=… res_mem=… throughput=… EPS`), write a
//! report with expected/actual/ratio/lost %/EPS/CPU/RSS per round, and the alerts it received
//! per action must agree with the agent's own counters: `falcosecurity_falco_rules_matches_total{rule_name=…}` on the
//! agent's `/metrics`, summed over the rules the generator lists for each action
//! (`rules_default` of `vigil generate list --json`), between a scrape before the bench and one
//! after it. No timing assertions.
//!
//! Other processes on the machine may trigger the same rules meanwhile (other live tests): the
//! agent counts them in its window, the bench only in its rounds, so a disagreement is retried
//! up to three times before the test fails with every attempt's figures.

// Tests report skips and progress on stderr.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::support::live::*;
use crate::support::{free_port, host, scratch, VIGIL};

/// The actions benchmarked: fast, unprivileged, each with its own rule in Vigil's default rules.
const REGEX: &str = "^syscall\\.(DeleteShellHistory|FilelessExecutionViaMemfd)$";
const ATTEMPTS: usize = 3;

/// `falcosecurity_falco_rules_matches_total` per rule from the agent's `/metrics` (rules
/// without a match, exported at 0, are left out).
fn alert_counters(port: u16) -> BTreeMap<String, f64> {
    let body = http_get(port, "/metrics").expect("/metrics answers");
    let scrape = prometheus_parse::Scrape::parse(body.lines().map(|l| Ok(l.to_owned())))
        .expect("valid Prometheus text");
    let mut out = BTreeMap::new();
    for s in scrape.samples {
        if s.metric != "falcosecurity_falco_rules_matches_total" {
            continue;
        }
        let value = match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
            _ => continue,
        };
        if value == 0.0 {
            continue;
        }
        if let Some(rule) = s.labels.get("rule_name") {
            *out.entry(rule.to_string()).or_default() += value;
        }
    }
    out
}

/// `vigil watch --json` (Vigil's default rules) with its alerts on stdout into `alerts` and
/// `/metrics` on `port`; killed on drop.
struct Agent(Child);

impl Agent {
    fn start(alerts: &Path, port: u16) -> Agent {
        let out = std::fs::File::create(alerts).expect("create the alerts file");
        let mut child = Command::new(VIGIL)
            .args(["watch", "--json"])
            .args(["-o", "webserver.enabled=true"])
            .args(["-o", "webserver.prometheus_metrics_enabled=true", "-o"])
            .arg(format!("webserver.listen_port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::piped())
            .spawn()
            .expect("start vigil watch");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut agent = Agent(child);
        let mut lines = Vec::new();
        while let Ok(line) = rx.recv_timeout(Duration::from_secs(180)) {
            let watching = line.contains("watching");
            lines.push(line);
            if watching {
                return agent;
            }
        }
        let status = agent.0.try_wait().ok().flatten();
        panic!(
            "vigil watch did not report it was watching (exit {status:?}):\n{}",
            lines.join("\n")
        );
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One bench run and the agent's counters around it.
struct Attempt {
    report: Value,
    stderr: String,
    /// Per action: (alerts the bench received over all rounds, the agent's count of the
    /// action's rules over the same run, runs over all rounds).
    per_action: BTreeMap<String, (u64, u64, u64)>,
}

impl Attempt {
    fn agrees(&self) -> bool {
        self.per_action
            .values()
            .all(|(bench, agent, _)| bench == agent)
    }
}

fn bench_once(dir: &Path, attempt: usize, alerts: &Path, port: u16, agent_pid: u32) -> Attempt {
    let out_dir = dir.join(format!("report-{attempt}"));
    let before = alert_counters(port);
    let out = Command::new(VIGIL)
        .args(["generate", "bench", REGEX])
        .args(["--rounds", "2", "--round-duration", "1", "--sleep", "50ms"])
        .arg("--alerts-file")
        .arg(alerts)
        .args(["--pid", &agent_pid.to_string()])
        .arg("--out")
        .arg(&out_dir)
        .stdin(Stdio::null())
        .output()
        .expect("run vigil generate bench");
    // Alerts are counted when the agent emits them, before they are written: one more
    // housekeeping period lets a straggler reach both.
    std::thread::sleep(Duration::from_millis(500));
    let after = alert_counters(port);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "vigil generate bench: {}\nstderr:\n{stderr}",
        out.status
    );
    let report: Value = serde_json::from_str(
        &std::fs::read_to_string(out_dir.join("report.json")).expect("report.json written"),
    )
    .expect("report.json parses");
    // The bench counts an alert for the first action that lists its rule.
    let actions = report["actions"].as_array().expect("actions");
    let mut owner: HashMap<&str, &str> = HashMap::new();
    for a in actions {
        for r in a["rules_default"].as_array().expect("rules_default") {
            owner
                .entry(r.as_str().unwrap())
                .or_insert(a["name"].as_str().unwrap());
        }
    }
    let mut per_action: BTreeMap<String, (u64, u64, u64)> = BTreeMap::new();
    for a in actions {
        per_action.insert(a["name"].as_str().unwrap().to_string(), (0, 0, 0));
    }
    for r in report["rounds"].as_array().expect("rounds") {
        for p in r["per_action"].as_array().expect("per_action") {
            let e = per_action
                .get_mut(p["action"].as_str().unwrap())
                .expect("a listed action");
            e.0 += p["actual"].as_u64().unwrap();
            e.2 += p["expected"].as_u64().unwrap();
        }
    }
    for (rule, action) in &owner {
        let delta =
            after.get(*rule).copied().unwrap_or(0.0) - before.get(*rule).copied().unwrap_or(0.0);
        per_action.get_mut(*action).expect("a listed action").1 += delta as u64;
    }
    Attempt {
        report,
        stderr,
        per_action,
    }
}

/// The printed rounds and the report carry Falco's figures.
fn check_output(a: &Attempt) {
    let stderr = &a.stderr;
    for needle in [
        "round #1",
        "round #2",
        "expected=",
        "actual=",
        " ratio=",
        "% lost)",
        "statistics cpu=",
        "res_mem=",
        "throughput=",
        " EPS",
    ] {
        assert!(
            stderr.contains(needle),
            "`{needle}` printed by the bench:\n{stderr}"
        );
    }
    let rounds = a.report["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 2, "two rounds: {}", a.report);
    for r in rounds {
        for key in [
            "expected", "actual", "ratio", "lost_pct", "eps", "cpu_pct", "rss_kib",
        ] {
            assert!(
                !r[key].is_null(),
                "round figure `{key}` (the agent's pid is monitored): {r}"
            );
        }
    }
    let listed: Vec<&str> = a.report["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    let wanted: Vec<&str> = vigil_generator::select(REGEX)
        .unwrap()
        .iter()
        .map(|x| x.name)
        .collect();
    assert_eq!(listed, wanted, "the bench runs the selected actions");
    // Its rule lists are the generator's own expectations.
    for x in a.report["actions"].as_array().unwrap() {
        let action = vigil_generator::find(x["name"].as_str().unwrap()).unwrap();
        let rules: Vec<&str> = action
            .all_expects()
            .iter()
            .filter(|e| e.ruleset == vigil_generator::Ruleset::Vigil)
            .map(|e| e.rule)
            .collect();
        let listed: Vec<&str> = x["rules_default"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap())
            .collect();
        assert_eq!(listed, rules, "{}", action.name);
    }
}

#[test]
fn generate_bench_against_vigil_watch_agrees_with_its_metrics() {
    let _host = host::alone(module_path!());
    if skip_or_fail("generate_bench_against_vigil_watch_agrees_with_its_metrics") {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("watch");
    let alerts = dir.join("alerts.jsonl");
    let port = free_port();
    let agent = Agent::start(&alerts, port);
    let mut attempts = Vec::new();
    for attempt in 1..=ATTEMPTS {
        let a = bench_once(&dir, attempt, &alerts, port, agent.0.id());
        check_output(&a);
        eprintln!(
            "attempt {attempt}: per action (bench received, agent counted, runs): {:?}",
            a.per_action
        );
        let agrees = a.agrees();
        attempts.push(a);
        if agrees {
            break;
        }
    }
    let last = attempts.last().expect("one attempt");
    eprintln!("the bench's output (last attempt):\n{}", last.stderr);
    assert!(
        last.agrees(),
        "the bench's received alerts never agreed with vigil watch's falcosecurity_falco_rules_matches_total: {:?}",
        attempts.iter().map(|a| &a.per_action).collect::<Vec<_>>()
    );
    for (action, (bench, _, runs)) in &last.per_action {
        assert!(*runs > 0, "{action}: the bench ran it");
        assert!(*bench > 0, "{action}: the agent alerted on it");
    }
    drop(agent);
    let _ = std::fs::remove_dir_all(&dir);
}

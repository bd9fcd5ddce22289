//! `vigil run` as a complete agent: the same engine and outputs as `vigil watch`. Falco's
//! event-generator way of testing (alerts over HTTP, matched by `proc.env` from
//! `append_output`), every output kind with the stats file and `/metrics`, and a 30 s HTTP
//! outage with a spool. `vigil run` needs no root; where ptrace is not allowed the tests skip
//! with a printed reason, and fail under `VIGIL_TEST_STRICT=1`.
// Tests print why they skip.

use std::os::unix::net::UnixDatagram;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use vigil_generator::UnderRun;

use crate::support::receiver::Receiver;
use crate::support::{can_trace, falco_rules, host, is_root, scratch, VIGIL};

/// A rule on opening files whose name starts with `prefix`, printing the file name.
fn open_rule(prefix: &Path) -> String {
    format!(
        "- rule: Run output probe\n  desc: d\n  condition: evt.type in (open, openat) and fd.name \
         startswith {}\n  output: \"probe file=%fd.name\"\n  priority: WARNING\n",
        prefix.display()
    )
}

fn json_lines(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Falco's event-generator suite under `vigil run`: each action runs as the workload, alerts
/// go to an HTTP endpoint only, and each expected rule's alert carries the workload's
/// environment (`append_output` `extra_fields: [proc.env]`), by which the suite matches
/// alerts to the test that caused them.
#[test]
fn generator_actions_reach_http_with_append_output_extra_fields() {
    let _host = host::shared();
    let _port = host::default_port();
    const TEST: &str = "generator_actions_reach_http_with_append_output_extra_fields";
    if !can_trace(TEST) {
        return;
    }
    let rules = falco_rules();
    assert!(rules.exists(), "{}", rules.display());
    let dir = scratch("eventgen");
    let receiver = Receiver::start();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "json_output: true\nstdout_output: {{enabled: false}}\n\
             http_output: {{enabled: true, url: \"http://{}/\"}}\n\
             append_output:\n  - extra_fields: [proc.env]\n",
            receiver.addr
        ),
    )
    .expect("config");
    let root = is_root();
    let actions: Vec<_> = vigil_generator::registry()
        .iter()
        .filter(|a| {
            a.under_run == UnderRun::Same
                && !a.needs_runc()
                && !a.slow
                && (root || !a.needs_root)
                && a.expected()
                    .iter()
                    .any(|e| e.ruleset == vigil_generator::Ruleset::FalcoStable)
        })
        .take(4)
        .collect();
    assert!(actions.len() >= 2, "generator actions to run: {actions:?}");
    let mut failures = Vec::new();
    for action in &actions {
        let marker = format!("eventgen-{}-{}", std::process::id(), action.name);
        let out = Command::new(VIGIL)
            .args(["run", "-c"])
            .arg(&config)
            .arg("-r")
            .arg(&rules)
            .args(["--", VIGIL, "generate", "run", "--exact", action.name])
            .env("VIGIL_EVENTGEN_TEST", &marker)
            .stdin(Stdio::null())
            .output()
            .expect("run vigil run");
        assert!(
            out.status.success(),
            "{}: {}",
            action.name,
            String::from_utf8_lossy(&out.stderr)
        );
        let alerts: Vec<Value> = receiver
            .bodies()
            .iter()
            .filter_map(|b| serde_json::from_str(b).ok())
            .filter(|a: &Value| {
                a["output_fields"]["proc.env"]
                    .as_str()
                    .is_some_and(|env| env.contains(&marker))
            })
            .collect();
        for expected in action
            .expected()
            .iter()
            .filter(|e| e.ruleset == vigil_generator::Ruleset::FalcoStable)
        {
            if !alerts.iter().any(|a| a["rule"] == expected.rule) {
                failures.push(format!(
                    "{}: no `{}` alert with the marker over HTTP (got {:?})",
                    action.name,
                    expected.rule,
                    alerts.iter().map(|a| a["rule"].clone()).collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn scrape(port: u16) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

fn sample(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Every output kind at once under `vigil run`: file, program, syslog (a socket the test
/// binds), HTTP; the `-s` stats file; `/metrics` from the configured web server while the
/// workload runs, where events in = processed + dropped.
#[test]
fn every_output_kind_stats_file_and_metrics_under_run() {
    let _host = host::shared();
    const TEST: &str = "every_output_kind_stats_file_and_metrics_under_run";
    if !can_trace(TEST) {
        return;
    }
    let dir = scratch("kinds");
    let probe = dir.join("probe-");
    for i in 0..3 {
        std::fs::write(format!("{}{i}", probe.display()), "x").expect("probe file");
    }
    let rules = dir.join("rules.yaml");
    std::fs::write(&rules, open_rule(&probe)).expect("rules");
    let receiver = Receiver::start();
    let socket_path = dir.join("syslog.sock");
    let syslog = UnixDatagram::bind(&socket_path).expect("bind syslog socket");
    syslog
        .set_read_timeout(Some(Duration::from_millis(200)))
        .expect("socket timeout");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        l.local_addr().expect("addr").port()
    };
    let (alerts_file, program_file, stats_file) = (
        dir.join("alerts.jsonl"),
        dir.join("program.jsonl"),
        dir.join("stats.jsonl"),
    );
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "json_output: true\n\
             file_output: {{enabled: true, filename: {alerts}}}\n\
             program_output: {{enabled: true, program: \"cat >> {program}\"}}\n\
             syslog_output: {{enabled: true, socket: {socket}}}\n\
             http_output: {{enabled: true, url: \"http://{http}/\", spool_dir: {spool}}}\n\
             webserver: {{enabled: true, listen_port: {port}, prometheus_metrics_enabled: true}}\n",
            alerts = alerts_file.display(),
            program = program_file.display(),
            socket = socket_path.display(),
            http = receiver.addr,
            spool = dir.join("spool").display(),
        ),
    )
    .expect("config");
    let script = format!(
        "for i in 0 1 2; do cat {p}$i > /dev/null; done; sleep 3",
        p = probe.display()
    );
    let child = Command::new(VIGIL)
        .args(["run", "-c"])
        .arg(&config)
        .arg("-r")
        .arg(&rules)
        .arg("-s")
        .arg(&stats_file)
        .args(["--stats-interval", "100", "--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vigil run");
    // While the workload sleeps, the web server answers with consistent counters.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut metrics = String::new();
    while Instant::now() < deadline {
        if let Some(text) = scrape(port) {
            if sample(&text, "vigil_events_processed_total") > 0.0 {
                metrics = text;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out: Output = child.wait_with_output().expect("vigil run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !metrics.is_empty(),
        "no /metrics answer while the workload ran: {stderr}"
    );
    // Falco's scap.n_evts excludes drops: events in = n_evts + n_drops = processed + n_drops.
    assert_eq!(
        sample(&metrics, "falcosecurity_scap_n_evts_total")
            + sample(&metrics, "falcosecurity_scap_n_drops_total"),
        sample(&metrics, "vigil_events_processed_total")
            + sample(&metrics, "falcosecurity_scap_n_drops_total"),
        "events in = processed + dropped:\n{metrics}"
    );
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("falcosecurity_scap_n_drops_total ")),
        "the drop series is exported, zero or not:\n{metrics}"
    );
    let files = |path: &Path| -> Vec<Value> {
        json_lines(&std::fs::read_to_string(path).unwrap_or_default())
    };
    let probes = |alerts: &[Value]| -> usize {
        alerts
            .iter()
            .filter(|a| a["rule"] == "Run output probe")
            .count()
    };
    assert_eq!(probes(&files(&alerts_file)), 3, "file output");
    assert_eq!(probes(&files(&program_file)), 3, "program output");
    let http: Vec<Value> = receiver
        .bodies()
        .iter()
        .filter_map(|b| serde_json::from_str(b).ok())
        .collect();
    assert_eq!(probes(&http), 3, "HTTP output");
    let mut datagrams = 0;
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = syslog.recv(&mut buf) {
        if String::from_utf8_lossy(&buf[..n]).contains("Run output probe") {
            datagrams += 1;
        }
    }
    assert_eq!(datagrams, 3, "syslog output");
    // Falco's stats lines, the last one at exit.
    let stats = files(&stats_file);
    assert!(!stats.is_empty(), "stats file lines");
    assert!(
        stats.iter().all(|l| l["cur"]["events"].is_u64()),
        "{stats:?}"
    );
    assert!(
        !stderr.contains("Run output probe"),
        "alerts went to the file, not stderr"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The HTTP receiver is down for 30 s while the workload raises alerts: with a spool, every
/// alert arrives once it is back, in order, and nothing is counted lost.
#[test]
fn http_outage_of_30s_under_run_loses_nothing_with_a_spool() {
    let _host = host::shared();
    let _port = host::default_port();
    const TEST: &str = "http_outage_of_30s_under_run_loses_nothing_with_a_spool";
    if !can_trace(TEST) {
        return;
    }
    let dir = scratch("outage");
    let probe = dir.join("probe-");
    let n = 20;
    for i in 0..n {
        std::fs::write(format!("{}{i:02}", probe.display()), "x").expect("probe file");
    }
    let rules = dir.join("rules.yaml");
    std::fs::write(&rules, open_rule(&probe)).expect("rules");
    let mut receiver = Receiver::start();
    receiver.down();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "json_output: true\nstdout_output: {{enabled: false}}\n\
             http_output: {{enabled: true, url: \"http://{}/\", spool_dir: {}, \
             retry_max_backoff: 1s}}\n",
            receiver.addr,
            dir.join("spool").display()
        ),
    )
    .expect("config");
    let script = format!(
        "for i in $(seq -w 0 {last}); do cat {p}$i > /dev/null; done; sleep 33",
        last = n - 1,
        p = probe.display()
    );
    let child = Command::new(VIGIL)
        .args(["run", "-c"])
        .arg(&config)
        .arg("-r")
        .arg(&rules)
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start vigil run");
    std::thread::sleep(Duration::from_secs(30));
    assert!(receiver.bodies().is_empty(), "the receiver was down");
    receiver.up();
    let out = child.wait_with_output().expect("vigil run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let files: Vec<String> = receiver
        .bodies()
        .iter()
        .filter_map(|b| serde_json::from_str::<Value>(b).ok())
        .filter(|a| a["rule"] == "Run output probe")
        .filter_map(|a| a["output_fields"]["fd.name"].as_str().map(str::to_owned))
        .collect();
    let expected: Vec<String> = (0..n)
        .map(|i| format!("{}{i:02}", probe.display()))
        .collect();
    assert_eq!(files, expected, "every alert once, in order\n{stderr}");
    assert!(
        !stderr.contains("dropped"),
        "nothing counted lost: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rules that cannot match the workload (its container and host fixed for the run) cost no
/// stop: with Falco's stable rules, as a user who cannot move the workload to another
/// cgroup, on a host `dup` loops run free (the redirection rule is `container`-guarded), and
/// `rules list --explain-run` says so per rule; in a container the same rule stays watched.
/// As root on a host (the workload may start containers of its own) nothing is folded.
#[test]
fn rules_that_cannot_match_the_workload_cost_no_stop() {
    let _host = host::shared();
    const TEST: &str = "rules_that_cannot_match_the_workload_cost_no_stop";
    if !can_trace(TEST) {
        return;
    }
    // As root, the test drops to nobody for the folded case (setpriv, util-linux).
    let as_user: Vec<&str> = if is_root() {
        vec![
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
            "--bounding-set=-all",
        ]
    } else {
        Vec::new()
    };
    let vigil = |args: &[&str]| -> Command {
        let mut cmd = match as_user.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(VIGIL);
                c
            }
            None => Command::new(VIGIL),
        };
        cmd.args(args);
        cmd
    };
    let rules = falco_rules();
    let out = vigil(&["rules", "list", "--explain-run", "--json", "-r"])
        .arg(&rules)
        .output()
        .expect("rules list");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let explained = json_lines(&String::from_utf8_lossy(&out.stdout));
    let status = |name: &str| {
        explained
            .iter()
            .find(|r| r["rule"] == name)
            .map(|r| r["status"].as_str().unwrap_or_default().to_owned())
            .unwrap_or_else(|| panic!("{name} listed: {explained:?}"))
    };
    let redirect = "Redirect STDOUT/STDIN to Network Connection in Container";
    let on_host = status("Terminal shell in container") == "cannot match this workload";
    assert_eq!(
        status(redirect) == "cannot match this workload",
        on_host,
        "container-guarded rules fold together"
    );
    assert_eq!(status("Read sensitive file untrusted"), "watched");
    // The same decision in the tracer: the stops of 200 more dup/close pairs.
    let stops = |n: u32| -> u64 {
        let script =
            format!("i=0; while [ $i -lt {n} ]; do exec 5<&0; exec 5<&-; i=$((i+1)); done");
        let out = vigil(&["run", "--stats", "-r"])
            .arg(&rules)
            .args(["--", "sh", "-c", &script])
            .stdin(Stdio::null())
            .output()
            .expect("vigil run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        stderr
            .split_whitespace()
            .find_map(|w| w.strip_prefix("stops="))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("stops in --stats: {stderr}"))
    };
    let extra = stops(400).saturating_sub(stops(200));
    if on_host {
        assert!(
            extra < 20,
            "dup runs free on a host workload: {extra} more stops"
        );
    } else {
        assert!(
            extra >= 200,
            "dup stops in a container workload: {extra} more stops"
        );
    }
}

/// Housekeeping (the stats file, metrics, drop alerts) also runs while the workload is idle:
/// a helper thread wakes the tracer's wait after an interval without a stop. A workload that
/// sleeps 2 s gets a stats line about every 100 ms, and not one stop more than the same
/// workload sleeping 0.1 s (the wake-up goes to the tracer, never to the workload).
#[test]
fn housekeeping_runs_while_the_workload_is_idle() {
    let _host = host::shared();
    if !can_trace("idle_housekeeping") {
        return;
    }
    let dir = scratch("idle_housekeeping");
    let run = |seconds: &str| -> (usize, u64) {
        let stats_file = dir.join(format!("stats-{seconds}.jsonl"));
        let out: Output = Command::new(VIGIL)
            .args(["run", "--stats", "-s"])
            .arg(&stats_file)
            .args(["--stats-interval", "100", "--", "sleep", seconds])
            .stdin(Stdio::null())
            .output()
            .expect("vigil run");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let stops = stderr
            .lines()
            .find(|l| l.starts_with("vigil: traced_syscalls="))
            .and_then(|l| {
                l.split_whitespace()
                    .find_map(|kv| kv.strip_prefix("stops="))
                    .and_then(|v| v.parse().ok())
            })
            .unwrap_or_else(|| panic!("no stops in the stats line: {stderr}"));
        let lines = std::fs::read_to_string(&stats_file)
            .unwrap_or_default()
            .lines()
            .count();
        (lines, stops)
    };
    let (short_lines, short_stops) = run("0.1");
    let (long_lines, long_stops) = run("2");
    assert!(
        long_lines >= 8,
        "{long_lines} stats lines in 2 s of an idle workload at a 100 ms interval \
         ({short_lines} in 0.1 s)"
    );
    assert!(
        long_stops <= short_stops + 2,
        "idle wake-ups must not stop the workload: {short_stops} stops in 0.1 s, \
         {long_stops} in 2 s"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

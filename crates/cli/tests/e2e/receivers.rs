//! Alerts delivered to real receivers by `vigil replay`:
//!
//! - syslog: an rsyslogd that the test starts with a private configuration (an imuxsock input
//!   on a socket in a scratch directory, never `/dev/log`; a log file beside it), killed at the
//!   end. Every alert is logged exactly once, one line each, at the syslog severity of its Falco
//!   priority, facility `user`, with its text (or JSON object) intact. Requires `rsyslogd`
//!   (Debian package `rsyslog`, installed by `make deps`); without it the tests skip with the
//!   reason, and fail under `VIGIL_TEST_STRICT=1`. No root needed.
//! - HTTP: a loopback receiver that checks every request against Falcosidekick's input
//!   contract (`support/receivers.rs`: method, path, content type, each field and its type).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::receivers::{
    contract_violations, replay, rfc3339_nanos, rsyslogd, severity_of, write_capture, Logged,
    Rsyslog, SidekickReceiver, PRIORITIES,
};
use crate::support::{host, scratch, skip};

/// Alerts per test: every priority several times.
const ALERTS: u64 = 40;
/// How long rsyslog may take to log what it received (a busy machine).
const LOG_WAIT: Duration = Duration::from_secs(60);

fn setup(test: &str) -> std::path::PathBuf {
    let dir = scratch(test);
    fs::write(dir.join("rules.yaml"), crate::support::receivers::rules()).expect("write rules");
    write_capture(&dir.join("capture.jsonl"), ALERTS);
    dir
}

fn lines(bytes: &[u8]) -> Vec<String> {
    String::from_utf8(bytes.to_vec())
        .expect("utf-8 output")
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The alerts as `vigil replay` prints them on stdout (text, or JSON with `--json`).
fn reference(dir: &Path, json: bool) -> Vec<String> {
    let mut args = vec!["-o", "stdout_output.enabled=true"];
    if json {
        args.push("--json");
    }
    let out = replay(dir, &args);
    let alerts = lines(&out.stdout);
    assert_eq!(alerts.len() as u64, ALERTS, "reference run: {alerts:?}");
    alerts
}

/// The priority word of a text alert line: `HH:MM:SS.nnnnnnnnn: Priority ...`.
fn text_priority(line: &str) -> &str {
    line.split_once(": ")
        .and_then(|(_, rest)| rest.split(' ').next())
        .unwrap_or_else(|| panic!("no priority in {line:?}"))
}

/// Runs `vigil replay` into an rsyslogd and returns what it logged.
fn through_rsyslog(bin: &Path, dir: &Path, parser_chain: bool, json: bool) -> Vec<Logged> {
    let rsyslog = Rsyslog::start(bin, dir, parser_chain);
    let socket = rsyslog.socket.display().to_string();
    let mut args = vec![
        "-o".to_owned(),
        format!("syslog_output={{enabled: true, socket: {socket}}}"),
    ];
    if json {
        args.extend(["-o".to_owned(), "json_output=true".to_owned()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = replay(dir, &args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stderr_rsyslog = rsyslog.stderr_text();
    let mut logged = rsyslog.collect(ALERTS as usize, LOG_WAIT);
    // rsyslog's %msg% keeps the space that follows the tag's colon (`vigil[PID]: MSG`), as
    // for every `syslog(3)` message.
    for l in &mut logged {
        if let Some(msg) = l.msg.strip_prefix(' ') {
            l.msg = msg.to_owned();
        }
    }
    assert_eq!(
        logged.len() as u64,
        ALERTS,
        "rsyslog logged {} of {ALERTS} alerts (vigil stderr: {stderr}; rsyslogd: {stderr_rsyslog})",
        logged.len()
    );
    logged
}

#[test]
fn syslog_alerts_reach_rsyslog_once_at_their_severity_with_the_message_intact() {
    let _host = host::shared();
    const TEST: &str = "syslog_alerts_reach_rsyslog_once_at_their_severity_with_the_message_intact";
    let Some(bin) = rsyslogd() else {
        return skip(
            TEST,
            "rsyslogd is not installed (`make deps` installs rsyslog)",
        );
    };
    let dir = setup("stock");
    let text = reference(&dir, false);
    let json = reference(&dir, true);
    // The host name is the one rsyslog gives local messages: this host's.
    let hostname: String = fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("read hostname")
        .trim()
        .to_owned();

    // Text alerts into a stock imuxsock input (its special parser, as Debian's configuration
    // has on `/dev/log`): rsyslog reads the `syslog(3)` header Vigil sends (tag `vigil`,
    // its pid) and %msg% is the alert line, byte for byte.
    let logged = through_rsyslog(&bin, &dir, false, false);
    let mut seen = BTreeMap::new();
    for l in &logged {
        assert_eq!(l.facility, "user", "{l:?}");
        assert_eq!(l.app_name, "vigil", "{l:?}");
        assert!(l.procid.parse::<u32>().is_ok(), "{l:?}");
        assert_eq!(l.hostname, hostname, "{l:?}");
        assert!(text.contains(&l.msg), "message changed on the way: {l:?}");
        assert_eq!(
            l.severity,
            severity_of(text_priority(&l.msg)),
            "severity of {l:?}"
        );
        *seen.entry(l.msg.clone()).or_insert(0) += 1;
    }
    for alert in &text {
        assert_eq!(seen.get(alert), Some(&1), "{alert:?} logged {seen:?}");
    }
    for p in PRIORITIES {
        assert!(
            logged.iter().any(|l| l.severity == severity_of(p)),
            "no alert of priority {p} logged"
        );
    }

    // JSON alerts: the message is the JSON object, equal to the one `--json` prints.
    let logged = through_rsyslog(&bin, &dir, false, true);
    let expected: Vec<Value> = json
        .iter()
        .map(|l| serde_json::from_str(l).expect("json alert"))
        .collect();
    let mut got: Vec<Value> = Vec::new();
    for l in &logged {
        let v: Value = serde_json::from_str(&l.msg)
            .unwrap_or_else(|e| panic!("syslog JSON message does not parse ({e}): {l:?}"));
        let priority = v["priority"].as_str().expect("priority");
        assert_eq!(l.severity, severity_of(priority), "{l:?}");
        got.push(v);
    }
    let key = |v: &Value| v["time"].as_str().unwrap_or_default().to_owned();
    got.sort_by_key(key);
    let mut expected = expected;
    expected.sort_by_key(key);
    assert_eq!(got, expected, "JSON alerts differ after rsyslog");
    let _ = fs::remove_dir_all(&dir);
}

/// An imuxsock input handing messages to rsyslog's parser chain (`UseSpecialParser="off"`)
/// reads the same header: tag `vigil`, its pid, the alert intact.
#[test]
fn rsyslog_parser_chain_reads_the_same_header() {
    let _host = host::shared();
    const TEST: &str = "rsyslog_parser_chain_reads_the_same_header";
    let Some(bin) = rsyslogd() else {
        return skip(
            TEST,
            "rsyslogd is not installed (`make deps` installs rsyslog)",
        );
    };
    let dir = setup("chain");
    let text = reference(&dir, false);
    let logged = through_rsyslog(&bin, &dir, true, false);
    let mut seen = BTreeMap::new();
    for l in &logged {
        assert_eq!(l.facility, "user", "{l:?}");
        assert_eq!(l.app_name, "vigil", "{l:?}");
        assert!(l.procid.parse::<u32>().is_ok(), "{l:?}");
        assert!(text.contains(&l.msg), "message changed on the way: {l:?}");
        assert_eq!(l.severity, severity_of(text_priority(&l.msg)), "{l:?}");
        *seen.entry(l.msg.clone()).or_insert(0) += 1;
    }
    for alert in &text {
        assert_eq!(seen.get(alert), Some(&1), "{alert:?} logged {seen:?}");
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn http_alerts_keep_falcosidekick_input_contract() {
    let _host = host::shared();
    let dir = setup("http");
    let json = reference(&dir, true);
    let receiver = SidekickReceiver::start();
    let url = receiver.url();
    replay(
        &dir,
        &[
            "-o",
            "json_output=true",
            "-o",
            "json_include_output_property=true",
            "-o",
            "http_output.enabled=true",
            "-o",
            &format!("http_output.url={url}"),
        ],
    );
    let start = std::time::Instant::now();
    while (receiver.count() as u64) < ALERTS && start.elapsed() < LOG_WAIT {
        std::thread::sleep(Duration::from_millis(50));
    }
    let requests = receiver.take();
    assert_eq!(requests.len() as u64, ALERTS, "one POST per alert");
    let connections = receiver
        .connections
        .load(std::sync::atomic::Ordering::SeqCst) as u64;
    assert!(
        (1..=ALERTS).contains(&connections),
        "{connections} connections for {ALERTS} POSTs (at most one connection per POST)"
    );
    let mut got = Vec::new();
    for r in &requests {
        assert!(
            r.violations.is_empty(),
            "request breaks Falcosidekick's contract: {:?}\nbody: {}",
            r.violations,
            String::from_utf8_lossy(&r.body)
        );
        got.push(serde_json::from_slice::<Value>(&r.body).expect("checked JSON"));
    }
    let mut expected: Vec<Value> = json
        .iter()
        .map(|l| serde_json::from_str(l).expect("json alert"))
        .collect();
    let key = |v: &Value| v["time"].as_str().unwrap_or_default().to_owned();
    got.sort_by_key(key);
    expected.sort_by_key(key);
    assert_eq!(got, expected, "HTTP bodies differ from the --json alerts");
    for p in PRIORITIES {
        assert!(
            got.iter().any(|v| v["priority"] == p),
            "no alert of priority {p} posted"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// The contract check itself rejects what Falcosidekick would reject or misread.
#[test]
fn falcosidekick_contract_check_catches_broken_requests() {
    let _host = host::shared();
    let good = serde_json::json!({"output": "x", "priority": "Warning", "rule": "r",
        "time": "2023-11-14T22:13:20.000001000Z", "output_fields": {"proc.name": "sh",
        "evt.num": 3, "fd.name": null}, "source": "syscall", "tags": ["a"], "hostname": "h"});
    let mut headers = BTreeMap::new();
    headers.insert("content-type".to_owned(), "application/json".to_owned());
    let check = |method: &str, path: &str, h: &BTreeMap<String, String>, v: &Value| {
        contract_violations(method, path, h, v.to_string().as_bytes())
    };
    assert_eq!(check("POST", "/", &headers, &good), Vec::<String>::new());

    let mut broken: Vec<(&str, Value)> = Vec::new();
    for key in ["output", "priority", "rule", "time", "output_fields"] {
        let mut v = good.clone();
        v.as_object_mut().unwrap().remove(key);
        broken.push((key, v));
    }
    for (key, bad) in [
        ("output", serde_json::json!("")),
        ("priority", serde_json::json!("Info")),
        ("priority", serde_json::json!(4)),
        ("time", serde_json::json!("2023-11-14T22:13:20Z")),
        ("time", serde_json::json!("2023-11-14 22:13:20.000001000Z")),
        ("time", serde_json::json!(1_700_000_000)),
        ("output_fields", serde_json::json!(["a"])),
        ("output_fields", serde_json::json!({"a": {"b": 1}})),
        ("tags", serde_json::json!("a,b")),
        ("tags", serde_json::json!([1])),
        ("hostname", serde_json::json!(7)),
        ("source", serde_json::json!(null)),
        ("extra", serde_json::json!(1)),
    ] {
        let mut v = good.clone();
        v[key] = bad;
        broken.push((key, v));
    }
    for (key, v) in &broken {
        assert!(
            !check("POST", "/", &headers, v).is_empty(),
            "broken `{key}` passed: {v}"
        );
    }
    assert!(!check("PUT", "/", &headers, &good).is_empty());
    assert!(!check("POST", "/alerts", &headers, &good).is_empty());
    let mut text = headers.clone();
    text.insert("content-type".into(), "text/plain".into());
    assert!(!check("POST", "/", &text, &good).is_empty());
    assert!(!contract_violations("POST", "/", &headers, b"not json").is_empty());

    assert!(rfc3339_nanos("2023-11-14T22:13:20.000001000Z"));
    assert!(rfc3339_nanos("2023-11-14T22:13:20.000001000+02:00"));
    assert!(!rfc3339_nanos("2023-13-14T22:13:20.000001000Z"));
    assert!(!rfc3339_nanos("2023-11-14T22:13:20.000001Z"));
    assert!(!rfc3339_nanos("2023-11-14T22:13:20.000001000"));
}

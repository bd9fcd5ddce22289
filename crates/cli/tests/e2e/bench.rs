//! End-to-end tests of `vigil bench …` and `vigil generate bench` in a short mode: each bench
//! runs with `--agent none`, with an strace wrapper where the bench has wrappers, and with a
//! stand-in agent or generator (a shell script speaking the documented contracts), and the
//! report files must exist, parse and name every test. No timing assertions.
//!
//! Requirements: `strace` for the wrapper tests (skipped with a reason when missing; a failure
//! under `VIGIL_TEST_STRICT=1`).
// Tests report skipped requirements on stderr.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::{host, scratch, text};

const ALL_TESTS: [&str; 11] = [
    "syscall",
    "getpid",
    "openclose",
    "pipe",
    "context1",
    "spawn",
    "execl",
    "fsbuffer",
    "fstime",
    "fsdisk",
    "shell1",
];

fn vigil(args: &[&str]) -> Output {
    vigil_env(args, &[])
}

fn vigil_env(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vigil"));
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run vigil")
}

fn ok(out: &Output, what: &str) {
    assert!(
        out.status.success(),
        "{what}: exit {:?}\nstdout: {}\nstderr: {}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The report directory's `report.json`, after checking `report.md` and the plots exist.
fn report(dir: &Path, plots: &[&str]) -> serde_json::Value {
    let md = fs::read_to_string(dir.join("report.md")).expect("report.md");
    assert!(
        md.contains("audit:") && md.contains("kernel:"),
        "header states machine facts:\n{md}"
    );
    for plot in plots {
        let svg = fs::read_to_string(dir.join(plot)).unwrap_or_else(|e| panic!("{plot}: {e}"));
        assert!(svg.starts_with("<svg"), "{plot} is an SVG");
    }
    let json = fs::read_to_string(dir.join("report.json")).expect("report.json");
    serde_json::from_str(&json).expect("report.json parses")
}

fn have_strace(test: &str) -> bool {
    let found = Command::new("strace")
        .arg("-V")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        let strict = std::env::var("VIGIL_TEST_STRICT").is_ok_and(|v| v == "1");
        assert!(!strict, "{test}: strace is not installed");
        eprintln!("skipping {test}: strace is not installed");
    }
    found
}

/// Checks an overhead report: every test, with a median score for every configuration.
fn check_overhead(json: &serde_json::Value, tests: &[&str], configs: usize) {
    assert_eq!(json["bench"], "overhead", "bench name");
    assert_eq!(
        json["configs"].as_array().map(Vec::len),
        Some(configs),
        "configurations"
    );
    let names: Vec<&str> = json["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .map(|t| t["name"].as_str().expect("name"))
        .collect();
    assert_eq!(names, tests, "every test in order");
    for t in json["tests"].as_array().unwrap() {
        for r in t["results"].as_array().unwrap() {
            assert!(
                r["median"].as_f64().is_some_and(|m| m > 0.0),
                "{} config {}: a positive median, errors {}",
                t["name"],
                r["config"],
                r["errors"]
            );
            if t["baseline"].is_number() {
                assert!(r["index"].as_f64().is_some(), "{}: an index", t["name"]);
            }
        }
    }
    let geo = json["geomean"].as_array().expect("geomean");
    assert_eq!(geo.len(), configs, "a geometric mean per configuration");
    assert!(geo[0]["index"].as_f64().is_some(), "off index");
    assert!(geo[1]["change_pct"].as_f64().is_some(), "change vs off");
}

#[test]
fn overhead_pinned_and_unpinned_in_one_invocation_with_busy_cpus() {
    let _host = host::alone(module_path!());
    let dir = scratch("overhead-both");
    let out = vigil(&[
        "bench",
        "overhead",
        "--agent",
        "none",
        "--tests",
        "getpid,pipe",
        "--iterations",
        "1",
        "--duration",
        "0.1",
        "--pin",
        "1",
        "--also-unpinned",
        "--busy",
        "0",
        "--out",
        dir.to_str().unwrap(),
    ]);
    ok(&out, "overhead --also-unpinned");
    let stdout = text(&out.stdout);
    for pass in ["pinned", "unpinned"] {
        let sub = dir.join(pass);
        assert!(
            stdout.contains(&sub.join("report.md").display().to_string()),
            "prints the {pass} report path: {stdout}"
        );
        let json = report(&sub, &[]);
        check_overhead(&json, &["getpid", "pipe"], 2);
        let md = fs::read_to_string(sub.join("report.md")).unwrap();
        assert!(
            md.contains("kept awake by `SCHED_IDLE` spinners"),
            "the {pass} report says the idle CPUs were equalised"
        );
        assert_eq!(
            md.contains("workload pinned with `taskset -c 1`"),
            pass == "pinned",
            "{pass} report's pinning"
        );
    }
    // --also-unpinned without --pin, and a bad CPU list, are refused.
    let bad = vigil(&["bench", "overhead", "--agent", "none", "--also-unpinned"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad.stderr));
    let bad = vigil(&["bench", "overhead", "--agent", "none", "--busy", "9-1"]);
    assert_ne!(bad.status.code(), Some(0), "{}", text(&bad.stderr));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn overhead_agent_none_runs_every_test() {
    let _host = host::alone(module_path!());
    let dir = scratch("overhead-none");
    let out = vigil(&[
        "bench",
        "overhead",
        "--agent",
        "none",
        "--iterations",
        "1",
        "--duration",
        "0.1",
        "--out",
        dir.to_str().unwrap(),
    ]);
    ok(&out, "overhead --agent none");
    assert!(
        text(&out.stdout).contains("report.md"),
        "prints the report path"
    );
    assert!(
        text(&out.stderr).contains("iteration 1/1"),
        "progress on stderr"
    );
    let json = report(
        &dir,
        &[
            "overhead-index.svg",
            "overhead-change.svg",
            "overhead-ns.svg",
        ],
    );
    check_overhead(&json, &ALL_TESTS, 2);
    let md = fs::read_to_string(dir.join("report.md")).unwrap();
    for title in [
        "System Call Overhead",
        "Execl Throughput",
        "Shell Scripts (1 concurrent)",
    ] {
        assert!(md.contains(title), "report.md names {title}");
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn overhead_under_strace_pinned() {
    let _host = host::alone(module_path!());
    if !have_strace("overhead_under_strace_pinned") {
        return;
    }
    let dir = scratch("overhead-strace");
    let out = vigil(&[
        "bench",
        "overhead",
        "--wrap",
        "strace -f -o /dev/null",
        "--iterations",
        "1",
        "--duration",
        "0.1",
        "--pin",
        "0",
        "--out",
        dir.to_str().unwrap(),
    ]);
    ok(&out, "overhead --wrap strace");
    let json = report(&dir, &["overhead-index.svg"]);
    check_overhead(&json, &ALL_TESTS, 2);
    assert_eq!(json["pinning"], "0", "pinning recorded");
    assert!(
        json["configs"][1]["wrap"][0] == "strace",
        "the wrapper is recorded: {}",
        json["configs"][1]
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A stand-in for `vigil watch --stats`: the readiness line, then the stats line at SIGTERM.
fn fake_watch(dir: &Path, dropped: u64) -> PathBuf {
    let path = dir.join("fake-watch.sh");
    fs::write(
        &path,
        format!(
            "trap 'echo \"{{\\\"events_in\\\":1000,\\\"processed\\\":{},\\\"dropped\\\":{dropped},\\\"dropped_by_reason\\\":{{\\\"ring_full\\\":{dropped}}},\\\"alerts\\\":2}}\" >&2; exit 0' TERM\n\
             echo 'vigil: watching' >&2\nwhile :; do sleep 0.05; done\n",
            1000 - dropped
        ),
    )
    .unwrap();
    path
}

#[test]
fn overhead_with_watch_contract() {
    let _host = host::alone(module_path!());
    let dir = scratch("overhead-watch");
    let agent = fake_watch(&dir, 0);
    let watch_cmd = format!("sh {}", agent.display());
    let out_dir = dir.join("out");
    let out = vigil(&[
        "bench",
        "overhead",
        "--agent",
        "watch",
        "--watch-cmd",
        &watch_cmd,
        "--tests",
        "getpid,openclose,syscall",
        "--iterations",
        "2",
        "--duration",
        "0.05",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    ok(&out, "overhead --agent watch (stand-in)");
    let json = report(&out_dir, &["overhead-index.svg"]);
    check_overhead(&json, &["getpid", "openclose", "syscall"], 2);
    let runs = json["agent_runs"].as_array().expect("agent runs");
    assert_eq!(runs.len(), 2, "one agent run per iteration");
    assert_eq!(
        runs[0]["stats"]["events_in"], 1000,
        "stats parsed: {}",
        runs[0]
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn exec_rate_none_and_strace() {
    let _host = host::alone(module_path!());
    let dir = scratch("exec-rate");
    let out = vigil(&[
        "bench",
        "exec-rate",
        "--agent",
        "none",
        "--rates",
        "20,40",
        "--duration",
        "0.2",
        "--watch-proc",
        "vigil",
        "--watch-proc",
        "kauditd",
        "--out",
        dir.to_str().unwrap(),
    ]);
    ok(&out, "exec-rate --agent none");
    let json = report(&dir, &["exec-rate-cpu.svg"]);
    assert_eq!(json["bench"], "exec-rate", "bench name");
    let rates = json["rates"].as_array().expect("rates");
    assert_eq!(rates.len(), 2, "both rates");
    for r in rates {
        for phase in ["off", "on"] {
            assert!(
                r[phase]["achieved_per_s"].as_f64().is_some_and(|a| a > 0.0),
                "{phase}: achieved rate reported: {r}"
            );
            assert!(
                r[phase]["procs_cpu_pct"]["kauditd"].is_number(),
                "watched process sampled"
            );
        }
    }
    if have_strace("exec_rate_none_and_strace") {
        let dir2 = dir.join("strace");
        let out = vigil(&[
            "bench",
            "exec-rate",
            "--agent",
            "none",
            "--wrap",
            "strace -f -o /dev/null",
            "--rates",
            "20",
            "--duration",
            "0.2",
            "--out",
            dir2.to_str().unwrap(),
        ]);
        ok(&out, "exec-rate --wrap strace");
        let json = report(&dir2, &["exec-rate-cpu.svg"]);
        assert!(
            json["rates"][0]["on"]["achieved_per_s"].as_f64().is_some(),
            "{json}"
        );
        assert!(
            json["agent"].as_str().unwrap().contains("strace"),
            "wrapper named"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn capacity_none_and_watch_contract() {
    let _host = host::alone(module_path!());
    let dir = scratch("capacity");
    let out_none = dir.join("none");
    let out = vigil(&[
        "bench",
        "capacity",
        "--agent",
        "none",
        "--cpus",
        "1",
        "--start",
        "500",
        "--step",
        "x2",
        "--max-rate",
        "1000",
        "--duration",
        "0.2",
        "--out",
        out_none.to_str().unwrap(),
    ]);
    ok(&out, "capacity --agent none");
    let json = report(&out_none, &["capacity-drops.svg", "capacity-cpu.svg"]);
    assert_eq!(
        json["budgets"][0]["steps"].as_array().map(Vec::len),
        Some(2),
        "two steps: {json}"
    );
    assert!(
        json["budgets"][0]["highest_zero_drop_rate"].is_null(),
        "no stats, no claim"
    );

    // The stand-in drops 1% at every step: the ramp stops at the first step.
    let agent = fake_watch(&dir, 10);
    let watch_cmd = format!("sh {}", agent.display());
    let out_watch = dir.join("watch");
    let out = vigil(&[
        "bench",
        "capacity",
        "--agent",
        "watch",
        "--watch-cmd",
        &watch_cmd,
        "--cpus",
        "0.5,1",
        "--start",
        "500",
        "--step",
        "x2",
        "--max-rate",
        "2000",
        "--duration",
        "0.2",
        "--out",
        out_watch.to_str().unwrap(),
    ]);
    ok(&out, "capacity --agent watch (stand-in)");
    let json = report(&out_watch, &["capacity-drops.svg"]);
    let budgets = json["budgets"].as_array().expect("budgets");
    assert_eq!(budgets.len(), 2, "both budgets");
    for b in budgets {
        assert_eq!(
            b["steps"].as_array().map(Vec::len),
            Some(1),
            "stops at the first drop: {b}"
        );
        assert_eq!(b["steps"][0]["dropped_total"], 10, "drops parsed");
        assert!(
            (b["drop_pct_above"].as_f64().unwrap() - 1.0).abs() < 1e-9,
            "1% dropped"
        );
        assert!(b["vm_hwm_load_kib"].as_u64().is_some(), "agent RSS sampled");
        assert!(
            b["method"].as_str().is_some_and(|m| m.contains("taskset")),
            "budget method"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn generate_bench_counts_alerts_from_a_file() {
    let _host = host::alone(module_path!());
    let dir = scratch("generate-bench");
    let alerts = dir.join("alerts.jsonl");
    fs::write(&alerts, "{\"rule\":\"Rule A\"}\n").unwrap();
    let generator = dir.join("gen.sh");
    fs::write(
        &generator,
        "case \"$1\" in\n\
         list) echo '[{\"name\":\"syscall.A\",\"rules_stable\":[\"Rule A\"],\"rules_default\":[\"Rule A\"]},\
         {\"name\":\"syscall.B\",\"rules_stable\":[\"Rule B\"],\"rules_default\":[\"Rule B\"]},\
         {\"name\":\"other.C\",\"rules_stable\":[],\"rules_default\":[]}]' ;;\n\
         run) [ \"$3\" = syscall.A ] && echo '{\"rule\":\"Rule A\",\"output\":\"x\"}' >> \"$ALERTS\"; exit 0 ;;\n\
         esac\n",
    )
    .unwrap();
    let gen_cmd = format!("sh {}", generator.display());
    let out_dir = dir.join("out");
    let pid = std::process::id().to_string();
    let out = vigil_env(
        &[
            "generate",
            "bench",
            "^syscall\\.",
            "--loop",
            "--round-duration",
            "0.2",
            "--rounds",
            "2",
            "--generator-cmd",
            &gen_cmd,
            "--alerts-file",
            alerts.to_str().unwrap(),
            "--pid",
            &pid,
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[("ALERTS", &alerts)],
    );
    ok(&out, "generate bench");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("round #1") && stderr.contains("round #2"),
        "rounds printed:\n{stderr}"
    );
    assert!(
        stderr.contains("ratio=0.00 (100% lost)") && stderr.contains("ratio=1.00 (0% lost)"),
        "per action:\n{stderr}"
    );
    let json = report(&out_dir, &["generate-bench.svg"]);
    let names: Vec<&str> = json["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["syscall.A", "syscall.B"], "regex filters actions");
    let rounds = json["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 2, "two rounds");
    for r in rounds {
        let per = r["per_action"].as_array().unwrap();
        assert_eq!(
            per[0]["actual"], per[0]["expected"],
            "A alerts every run: {r}"
        );
        assert_eq!(per[1]["actual"], 0, "B never alerts: {r}");
        assert!(r["rss_kib"].as_u64().is_some(), "monitored pid sampled");
    }
    assert!(
        rounds[1]["sleep_ms"].as_f64() < rounds[0]["sleep_ms"].as_f64(),
        "sleep halves after a clean round: {json}"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn invalid_arguments_exit_2() {
    let _host = host::alone(module_path!());
    for args in [
        &["bench", "overhead", "--tests", "nope", "--agent", "none"][..],
        &["bench", "worker", "no-such-worker", "--duration", "0.01"][..],
        &["bench", "capacity", "--agent", "none", "--step", "x0.5"][..],
        &["bench", "capacity", "--agent", "run"][..],
    ] {
        let out = vigil(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

#[test]
fn worker_prints_a_result_line() {
    let _host = host::alone(module_path!());
    let out = vigil(&["bench", "worker", "getpid", "--duration", "0.01"]);
    ok(&out, "worker getpid");
    let v: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).expect("JSON line");
    assert_eq!(v["test"], "getpid", "test name");
    assert_eq!(v["unit"], "ns/loop", "unit");
    assert!(
        v["iterations"].as_u64().is_some_and(|n| n > 0),
        "iterations"
    );
}

#[test]
fn agent_that_never_gets_ready_is_a_reported_failure() {
    let _host = host::alone(module_path!());
    let dir = scratch("agent-fails");
    let out = vigil(&[
        "bench",
        "overhead",
        "--agent",
        "watch",
        "--watch-cmd",
        "false",
        "--tests",
        "getpid",
        "--iterations",
        "1",
        "--duration",
        "0.05",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "failure exit: {}",
        text(&out.stderr)
    );
    let json = report(&dir, &[]);
    let errors = json["errors"].as_array().expect("errors");
    assert_eq!(errors.len(), 1, "one failure listed: {json}");
    assert!(
        errors[0].as_str().unwrap().contains("before it was ready"),
        "{}",
        errors[0]
    );
    let md = fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("## Failures"), "report.md lists failures");
    let _ = fs::remove_dir_all(&dir);
}

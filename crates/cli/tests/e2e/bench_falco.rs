//! End-to-end tests of Falco as an agent of `vigil bench overhead` and `vigil bench capacity`
//! (`--agent falco`), against a stand-in: a shell script installed as `bin/falco` beside an
//! `etc/falco/falco.yaml`, speaking the contracts the bench assumes of Falco
//! (`crates/bench/src/falco.rs`): it writes a first metrics snapshot into the file named by
//! `-o metrics.output_file=` once "ready", prints one JSON alert per canary open it sees (it
//! finds the canary process in /proc by its tag: ten opens, 20 ms apart, keep it there long
//! enough for a shell loop to see), and at SIGTERM prints `Driver Events:N` and
//! `Driver Drops:N`. `FAKE_FALCO_MODE` makes it drop (`drop`) or die after it is ready (`die`).
//! Also the real workloads' plumbing: `redis` and `nginx` started, loaded and stopped by the
//! bench. No timing assertions.
//!
//! Requirements: root for the canary (it opens /etc/shadow); redis-server, redis-benchmark,
//! nginx and wrk for the servers test (`make test` installs them). Skipped with a reason when
//! missing; a failure under `VIGIL_TEST_STRICT=1`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use crate::support::{falco_rules, host, is_root, scratch, skip, text};

fn vigil_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_vigil"));
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run vigil")
}

/// A stand-in Falco install under `dir`: `bin/falco` and `etc/falco/falco.yaml`.
fn fake_falco(dir: &Path) -> PathBuf {
    let prefix = dir.join("falco");
    fs::create_dir_all(prefix.join("bin")).unwrap();
    fs::create_dir_all(prefix.join("etc/falco")).unwrap();
    fs::write(
        prefix.join("etc/falco/falco.yaml"),
        "engine:\n  kind: modern_ebpf\n",
    )
    .unwrap();
    let bin = prefix.join("bin/falco");
    fs::write(
        &bin,
        r#"#!/bin/sh
# Stand-in for Falco (see crates/cli/tests/e2e/bench_falco.rs).
if [ "$1" = --version ]; then echo "Falco version: 0.0.0-fake (x86_64)"; exit 0; fi
metrics=""; prev=""
for a in "$@"; do
  if [ "$prev" = -o ]; then
    case "$a" in metrics.output_file=*) metrics="${a#metrics.output_file=}" ;; esac
  fi
  prev="$a"
done
[ -n "$metrics" ] || { echo "fake falco: no metrics.output_file" >&2; exit 9; }
printf '%s\n' "$*" > "$metrics.argv"
drops=0; [ "$FAKE_FALCO_MODE" = drop ] && drops=7
events=0
trap 'echo "Driver Events:$events" >&2; echo "Driver Drops:$drops" >&2; exit 0' TERM
echo "Opening 'syscall' source with modern BPF probe." >&2
sleep 0.2
echo '{"output_fields":{"scap.n_evts":0,"scap.n_drops":0}}' >> "$metrics"
seen=""; ticks=0
while :; do
  for f in $(grep -l -a -e 'vigil-canar[y]-' /proc/[0-9]*/cmdline 2>/dev/null); do
    pid=${f#/proc/}; pid=${pid%/cmdline}
    case " $seen " in *" $pid "*) continue ;; esac
    cmd=$(tr '\000' ' ' < "$f" 2>/dev/null) || continue
    case "$cmd" in *"worker canary"*) ;; *) continue ;; esac
    seen="$seen $pid"
    count=$(printf '%s\n' "$cmd" | sed -n 's/.*--count \([0-9]*\).*/\1/p')
    i=0
    while [ "$i" -lt "${count:-0}" ]; do
      echo "{\"rule\":\"Read sensitive file untrusted\",\"priority\":\"Warning\",\"output\":\"Sensitive file opened for reading by non-trusted program | file=/etc/shadow command=$cmd\"}"
      i=$((i + 1))
    done
  done
  events=$((events + 100))
  ticks=$((ticks + 1))
  if [ "$FAKE_FALCO_MODE" = die ] && [ "$ticks" -ge 3 ]; then echo "fake falco: crashing" >&2; exit 3; fi
  sleep 0.01
done
"#,
    )
    .unwrap();
    fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
    prefix
}

/// `--canary` opens /etc/shadow: root only.
fn can_canary(test: &str) -> bool {
    if is_root() {
        return true;
    }
    skip(test, "the canary opens /etc/shadow, which needs root");
    false
}

fn report_json(dir: &Path) -> serde_json::Value {
    let json = fs::read_to_string(dir.join("report.json")).expect("report.json");
    serde_json::from_str(&json).expect("report.json parses")
}

/// The side-by-side rows of configuration `config`, by test name.
fn rows(json: &serde_json::Value, config: u64) -> Vec<&serde_json::Value> {
    json["side_by_side"]
        .as_array()
        .expect("side_by_side")
        .iter()
        .filter(|r| r["config"] == config)
        .collect()
}

#[test]
fn overhead_with_falco_per_test_counts_canary_alerts_and_names_the_install() {
    let _host = host::alone(module_path!());
    let test = "overhead_with_falco_per_test_counts_canary_alerts_and_names_the_install";
    if !can_canary(test) {
        return;
    }
    let dir = scratch("falco-overhead");
    let falco = fake_falco(&dir);
    let rules = falco_rules();
    let out_dir = dir.join("out");
    let out = vigil_env(
        &[
            "bench",
            "overhead",
            "--falco",
            falco.to_str().unwrap(),
            "--agent",
            "falco",
            "--agent",
            "falco:-o engine.kind=modern_ebpf",
            "-r",
            rules.to_str().unwrap(),
            "--tests",
            "getpid,pipe",
            "--iterations",
            "1",
            "--duration",
            "0.1",
            "--agent-per-test",
            "--canary",
            "10",
            "--note",
            "machine=test",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "exit {:?}\n{}",
        out.status,
        text(&out.stderr)
    );
    let json = report_json(&out_dir);
    let runs = json["agent_runs"].as_array().expect("agent runs");
    assert_eq!(
        runs.len(),
        4,
        "two agents × two tests, one run each: {json}"
    );
    for run in runs {
        assert!(
            run["test"].is_string(),
            "a per-test run names its test: {run}"
        );
        assert!(run["died"].is_null(), "nothing died: {run}");
        assert!(
            run["stats"]["events_in"].as_u64().is_some_and(|n| n > 0),
            "driver events read at exit: {run}"
        );
        assert_eq!(run["canary"]["expected"], 10, "ten canary opens: {run}");
        assert_eq!(
            run["canary"]["received"], 10,
            "an alert per open, counted by tag: {run}"
        );
        assert!(run["vm_hwm_kib"].as_u64().is_some(), "RSS sampled: {run}");
    }
    for config in [1, 2] {
        let r = rows(&json, config);
        assert_eq!(r.len(), 3, "two tests and the overall row: {r:?}");
        for row in r {
            assert_eq!(row["status"], "ok", "{row}");
            assert_eq!(row["dropped"], 0, "{row}");
        }
    }
    let all = rows(&json, 1)
        .into_iter()
        .find(|r| r["test"].is_null())
        .expect("overall row");
    assert_eq!(
        (&all["alerts_expected"], &all["alerts_received"]),
        (&serde_json::json!(20), &serde_json::json!(20)),
        "summed over the two tests: {all}"
    );
    // How it was started: the install's configuration, the bench's rules, the outputs, the
    // agent's own arguments last.
    let logs = out_dir.join("agent-logs");
    let argv = fs::read_to_string(logs.join("agent-0-2-pipe.metrics.jsonl.argv")).expect("argv");
    let config = falco.join("etc/falco/falco.yaml");
    for part in [
        format!("-c {}", config.display()),
        format!("-r {}", rules.display()),
        "-o json_output=true".to_string(),
        "-o stdout_output.enabled=true".to_string(),
        "-o engine.kind=modern_ebpf".to_string(),
    ] {
        assert!(argv.contains(&part), "`{part}` in {argv}");
    }
    let md = fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("## Side by side"), "side-by-side table");
    assert!(
        md.contains("Falco version: 0.0.0-fake"),
        "the Falco version in the header"
    );
    assert!(md.contains("- machine: "), "machine facts");
    assert!(md.contains("- machine: test"), "the note");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn overhead_reports_a_falco_that_drops_or_dies_instead_of_a_figure() {
    let _host = host::alone(module_path!());
    let dir = scratch("falco-bad");
    let falco = fake_falco(&dir);
    for (mode, flag, status) in [("drop", "dropped 7", "dropped"), ("die", "died", "died")] {
        let out_dir = dir.join(mode);
        let out = vigil_env(
            &[
                "bench",
                "overhead",
                "--falco",
                falco.join("bin/falco").to_str().unwrap(),
                "--agent",
                "falco",
                "--tests",
                "syscall",
                "--iterations",
                "1",
                "--duration",
                "1",
                "--out",
                out_dir.to_str().unwrap(),
            ],
            &[("FAKE_FALCO_MODE", mode)],
        );
        let json = report_json(&out_dir);
        let row = rows(&json, 1)
            .into_iter()
            .find(|r| r["test"] == "syscall")
            .expect("syscall row");
        assert_eq!(row["status"], status, "{mode}: {row}");
        let md = fs::read_to_string(out_dir.join("report.md")).unwrap();
        let line = md
            .lines()
            .find(|l| l.starts_with("| syscall | falco |"))
            .unwrap_or_else(|| panic!("{mode}: no side-by-side row:\n{md}"));
        let change = line.split('|').nth(4).unwrap_or_default().trim();
        assert!(
            change.starts_with(flag),
            "{mode}: `{flag}` instead of the change figure: {line}"
        );
        if mode == "die" {
            assert_eq!(out.status.code(), Some(1), "a died agent fails the run");
            assert!(
                json["errors"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|e| e.as_str().unwrap().contains("died"))),
                "listed among the failures: {}",
                json["errors"]
            );
        } else {
            assert!(out.status.success(), "{}", text(&out.stderr));
            assert_eq!(row["dropped"], 7, "{row}");
        }
    }
    let _ = fs::remove_dir_all(&dir);
}

/// A stand-in for `vigil watch --stats` that never drops.
fn fake_watch(dir: &Path) -> PathBuf {
    let path = dir.join("fake-watch.sh");
    fs::write(
        &path,
        "trap 'echo \"{\\\"events_in\\\":1000,\\\"processed\\\":1000,\\\"dropped\\\":0,\\\"alerts\\\":0}\" >&2; exit 0' TERM\n\
         echo 'vigil: watching' >&2\nwhile :; do sleep 0.05; done\n",
    )
    .unwrap();
    path
}

#[test]
fn capacity_interleaves_falco_and_watch_and_compares_them() {
    let _host = host::alone(module_path!());
    let dir = scratch("falco-capacity");
    let falco = fake_falco(&dir);
    let watch_cmd = format!("sh {}", fake_watch(&dir).display());
    let out_dir = dir.join("out");
    let out = vigil_env(
        &[
            "bench",
            "capacity",
            "--falco",
            falco.to_str().unwrap(),
            "--agent",
            "falco",
            "--agent",
            "watch",
            "--watch-cmd",
            &watch_cmd,
            "--cpus",
            "1",
            "--start",
            "500",
            "--step",
            "x2",
            "--max-rate",
            "1000",
            "--duration",
            "0.3",
            "--out",
            out_dir.to_str().unwrap(),
        ],
        &[("FAKE_FALCO_MODE", "drop")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json = report_json(&out_dir);
    let budgets = json["budgets"].as_array().expect("budgets");
    assert_eq!(budgets.len(), 2, "one ramp per agent: {json}");
    let falco_ramp = budgets
        .iter()
        .find(|b| b["agent"] == "falco")
        .expect("falco");
    let watch_ramp = budgets
        .iter()
        .find(|b| b["agent"] == "vigil watch")
        .expect("watch");
    assert_eq!(
        falco_ramp["steps"].as_array().map(Vec::len),
        Some(1),
        "Falco dropped at its first step and stopped there: {falco_ramp}"
    );
    assert_eq!(falco_ramp["steps"][0]["dropped_total"], 7, "{falco_ramp}");
    assert!(
        falco_ramp["flag"]
            .as_str()
            .is_some_and(|f| f.starts_with("dropped 7")),
        "no zero-drop rate, the drops instead: {falco_ramp}"
    );
    assert_eq!(
        watch_ramp["steps"].as_array().map(Vec::len),
        Some(2),
        "watch went on alone: {watch_ramp}"
    );
    assert!(watch_ramp["highest_zero_drop_rate"].as_f64().is_some());
    let md = fs::read_to_string(out_dir.join("report.md")).unwrap();
    assert!(md.contains("## Side by side"), "side by side:\n{md}");
    let row = md
        .lines()
        .find(|l| l.starts_with("| 1 | dropped 7"))
        .unwrap_or_else(|| panic!("budget row with Falco's drops:\n{md}"));
    assert!(row.contains(" - |"), "no ratio without Falco's rate: {row}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn a_missing_falco_install_is_invalid_input() {
    let _host = host::alone(module_path!());
    let dir = scratch("falco-missing");
    let out = vigil_env(
        &[
            "bench",
            "overhead",
            "--agent",
            "falco",
            "--falco",
            dir.join("nowhere").to_str().unwrap(),
            "--tests",
            "getpid",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("docs/bench/README.md"),
        "says where the build is described: {}",
        text(&out.stderr)
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn servers_are_started_loaded_and_stopped_by_the_bench() {
    let _host = host::alone(module_path!());
    let test = "servers_are_started_loaded_and_stopped_by_the_bench";
    let missing: Vec<&str> = ["redis-server", "redis-benchmark", "nginx", "wrk"]
        .into_iter()
        .filter(|p| {
            !["/usr/bin", "/usr/sbin", "/bin", "/sbin"]
                .iter()
                .any(|d| Path::new(d).join(p).is_file())
        })
        .collect();
    if !missing.is_empty() {
        skip(test, &format!("not installed: {}", missing.join(", ")));
        return;
    }
    let dir = scratch("servers");
    let before = servers_running();
    let out = vigil_env(
        &[
            "bench",
            "overhead",
            "--agent",
            "none",
            "--tests",
            "redis,nginx",
            "--iterations",
            "1",
            "--duration",
            "1",
            "--out",
            dir.to_str().unwrap(),
        ],
        &[],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json = report_json(&dir);
    for t in json["tests"].as_array().expect("tests") {
        assert_eq!(t["unit"], "req/s", "{t}");
        for r in t["results"].as_array().unwrap() {
            assert!(
                r["median"].as_f64().is_some_and(|m| m > 0.0),
                "{}: requests per second: {r}",
                t["name"]
            );
        }
    }
    let leftovers: Vec<i32> = servers_running()
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert!(leftovers.is_empty(), "servers left running: {leftovers:?}");
    let _ = fs::remove_dir_all(&dir);
}

/// Processes named `redis-server` or `nginx`.
fn servers_running() -> Vec<i32> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let comm = fs::read_to_string(e.path().join("comm")).ok()?;
            matches!(comm.trim(), "redis-server" | "nginx").then_some(pid)
        })
        .collect()
}

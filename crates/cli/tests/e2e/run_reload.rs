//! `vigil run` reloads its rules when the rules file changes (`watch_config_files`; SIGHUP
//! belongs to the workload): a rule added by an editor-style save (a new file renamed over
//! the old) alerts from then on and not before, a rule on a syscall the running seccomp
//! filter does not stop is named in a warning, and a malformed save is refused with its
//! position while the running rules go on.
//!
//! Requirements: ptrace of a child process (absent in some sandboxes). A missing requirement
//! skips with a reason and fails under `VIGIL_TEST_STRICT=1`.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{can_trace, host, scratch, vigil_cmd};

const WAIT: Duration = Duration::from_secs(60);

fn rule(name: &str, condition: &str, output: &str) -> String {
    format!(
        "- rule: {name}\n  desc: reload test\n  condition: {condition}\n  output: \"{output}\"\n  \
         priority: WARNING\n"
    )
}

fn marker_rule(letter: &str) -> String {
    rule(
        &format!("Marker {letter}"),
        &format!("evt.type in (open, openat) and fd.name endswith /{letter}.marker"),
        &format!("saw {letter} %fd.name"),
    )
}

/// Writes `text` to a new file and renames it over `path`, as editors save.
fn save(path: &Path, text: &str) {
    let tmp = path.with_extension("yaml.tmp");
    fs::write(&tmp, text).unwrap();
    fs::rename(&tmp, path).unwrap();
}

fn lines_with(path: &Path, needle: &str) -> Vec<usize> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i)
        .collect()
}

fn wait_until(what: &str, stderr: &Mutex<Vec<String>>, mut check: impl FnMut() -> bool) {
    let start = Instant::now();
    while !check() {
        assert!(
            start.elapsed() < WAIT,
            "timed out waiting for {what}; vigil's stderr:\n{}",
            stderr.lock().unwrap().join("\n")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills `vigil run` (and so its workload) when the test fails before stopping it.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

#[test]
fn a_saved_rules_file_reloads_under_run() {
    let _host = host::shared();
    let _port = host::default_port();
    if !can_trace("run_reload") {
        return;
    }
    let dir = scratch("rules");
    fs::write(dir.join("a.marker"), "a\n").unwrap();
    fs::write(dir.join("b.marker"), "b\n").unwrap();
    let rules = dir.join("rules.yaml");
    let config = dir.join("vigil.yaml");
    let alerts = dir.join("alerts.log");
    fs::write(&rules, marker_rule("a")).unwrap();
    fs::write(
        &config,
        "watch_config_files: true\nsyslog_output: {enabled: false}\n",
    )
    .unwrap();
    // Opens both markers until told to stop.
    let workload = "while [ ! -e stop ]; do : < a.marker; : < b.marker; sleep 0.05; done";
    let mut child = Running(
        vigil_cmd()
            .current_dir(&dir)
            .args(["run", "--stats"])
            .arg("-c")
            .arg(&config)
            .arg("-r")
            .arg(&rules)
            .arg("--alerts")
            .arg(&alerts)
            .args(["--", "sh", "-c", workload])
            .stderr(Stdio::piped())
            .spawn()
            .expect("start vigil run"),
    );
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let lines = Arc::clone(&stderr);
    let pipe = child.0.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            lines.lock().unwrap().push(line);
        }
    });
    let stderr_has = |needle: &str| stderr.lock().unwrap().iter().any(|l| l.contains(needle));

    // Before: only the first marker alerts.
    wait_until("3 alerts of the first marker", &stderr, || {
        lines_with(&alerts, "saw a").len() >= 3
    });
    assert!(
        lines_with(&alerts, "saw b").is_empty(),
        "the second rule is not loaded yet"
    );
    let before = lines_with(&alerts, "saw a").len();

    // Saved with the second marker's rule and a rule on mkdir, which the workload's seccomp
    // filter (installed for opens) does not stop.
    let mkdir = rule(
        "Made dir",
        "evt.type in (mkdir, mkdirat) and evt.arg.path contains made",
        "made %evt.arg.path",
    );
    save(
        &rules,
        &format!("{}{}{mkdir}", marker_rule("a"), marker_rule("b")),
    );
    wait_until("the reload", &stderr, || {
        stderr_has("files changed: reloaded configuration and 3 rules")
    });
    wait_until("alerts of the second marker", &stderr, || {
        lines_with(&alerts, "saw b").len() >= 3
    });
    let first_b = lines_with(&alerts, "saw b")[0];
    assert!(
        first_b >= before,
        "the second marker alerted before the reload (line {first_b} of {before} earlier alerts)"
    );
    assert!(
        stderr_has("1 reloaded rule(s) will not see these syscalls until the workload restarts")
            && stderr_has("`Made dir` (misses mkdir, mkdirat)"),
        "no warning about the unseen mkdir: {:?}",
        stderr.lock().unwrap()
    );
    assert!(
        !stderr_has("`Marker b`"),
        "opens are stopped: the new open rule is not blind"
    );

    // A malformed save is refused with its position; the running rules go on.
    save(
        &rules,
        &format!(
            "{}- rule: Broken\n  desc: d\n  condition: evt.type = openat and (fd.name = x\n  \
             output: o\n  priority: WARNING\n",
            marker_rule("a")
        ),
    );
    wait_until("the refused reload", &stderr, || {
        stderr_has("files changed: reload failed, keeping the running configuration")
    });
    // `Marker a` takes 5 lines: the broken condition is on line 8.
    let position = format!("{}:8:", rules.display());
    assert!(
        stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.starts_with(&position) && l.contains("error[")),
        "no diagnostic at `{position}`: {:?}",
        stderr.lock().unwrap()
    );
    let b_now = lines_with(&alerts, "saw b").len();
    wait_until("more alerts of the kept rules", &stderr, || {
        lines_with(&alerts, "saw b").len() >= b_now + 3
    });

    fs::write(dir.join("stop"), "").unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < WAIT, "the workload did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    reader.join().unwrap();
    assert!(
        status.success(),
        "vigil run exited with {status}: {:?}",
        stderr.lock().unwrap()
    );
    let stats = stderr.lock().unwrap().join("\n");
    assert!(
        stats.contains(" reload_blind_rules=1"),
        "the last reload's blind rule is counted: {stats}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Alert lines of `path` containing `needle`.
fn alert_lines(path: &Path, needle: &str) -> Vec<(usize, String)> {
    fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, l)| (i, l.to_owned()))
        .collect()
}

/// Enforcement follows the reloaded rules: a rule inserted before the enforced one moves it
/// to another index, and the tracer's entry-time decision must still block the enforced
/// rule's opens and let the new rule's through.
#[test]
fn enforcement_follows_reloaded_rules() {
    let _host = host::shared();
    if !can_trace("run_reload_enforce") {
        return;
    }
    let dir = scratch("enforce");
    fs::write(dir.join("a.marker"), "a\n").unwrap();
    fs::write(dir.join("b.marker"), "b\n").unwrap();
    let rules = dir.join("rules.yaml");
    let alerts = dir.join("alerts.log");
    let block_a = format!("{}  tags: [vigil.enforce]\n", marker_rule("a"));
    fs::write(&rules, &block_a).unwrap();
    // `read` is a regular builtin: a refused open fails it, not the shell.
    let workload =
        "exec 2>/dev/null; while [ ! -e stop ]; do read x < a.marker; read x < b.marker; \
                    sleep 0.05; done";
    let mut child = Running(
        vigil_cmd()
            .current_dir(&dir)
            .args(["run", "--enforce", "-r"])
            .arg(&rules)
            .arg("--alerts")
            .arg(&alerts)
            .args(["--", "sh", "-c", workload])
            .stderr(Stdio::piped())
            .spawn()
            .expect("start vigil run"),
    );
    let stderr = Arc::new(Mutex::new(Vec::new()));
    let lines = Arc::clone(&stderr);
    let pipe = child.0.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { break };
            lines.lock().unwrap().push(line);
        }
    });
    let stderr_has = |needle: &str| stderr.lock().unwrap().iter().any(|l| l.contains(needle));
    wait_until("3 blocked opens of the first marker", &stderr, || {
        alert_lines(&alerts, "saw a").len() >= 3
    });
    let before = alert_lines(&alerts, "saw a");
    assert!(
        before.iter().all(|(_, l)| l.ends_with("(blocked)")),
        "{before:?}"
    );

    // The new, not enforced rule comes first: `Marker a` is now the second rule.
    save(&rules, &format!("{}{block_a}", marker_rule("b")));
    wait_until("the reload", &stderr, || {
        stderr_has("files changed: reloaded configuration and 2 rules")
    });
    wait_until("alerts of the new rule", &stderr, || {
        alert_lines(&alerts, "saw b").len() >= 3
    });
    let first_b = alert_lines(&alerts, "saw b")[0].0;
    wait_until("blocked opens after the reload", &stderr, || {
        alert_lines(&alerts, "saw a")
            .iter()
            .filter(|(i, _)| *i > first_b)
            .count()
            >= 3
    });
    let b = alert_lines(&alerts, "saw b");
    assert!(
        b.iter().all(|(_, l)| !l.contains("(blocked)")),
        "the new rule is not enforced: {b:?}"
    );
    let a_after: Vec<_> = alert_lines(&alerts, "saw a")
        .into_iter()
        .filter(|(i, _)| *i > first_b)
        .collect();
    assert!(
        a_after.iter().all(|(_, l)| l.ends_with("(blocked)")),
        "the enforced rule still blocks: {a_after:?}"
    );
    assert!(!stderr_has("will not see"), "opens are judged already");

    fs::write(dir.join("stop"), "").unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break status;
        }
        assert!(start.elapsed() < WAIT, "the workload did not stop");
        std::thread::sleep(Duration::from_millis(50));
    };
    reader.join().unwrap();
    assert!(
        status.success(),
        "vigil run exited with {status}: {:?}",
        stderr.lock().unwrap()
    );
    let _ = fs::remove_dir_all(&dir);
}

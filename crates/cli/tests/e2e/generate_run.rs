//! Live detection under `vigil run` (issue 6: "the same under `vigil run`"): every action of the
//! generator runs as `vigil run --json --alerts FILE [-r RULES] -- vigil generate run --exact
//! NAME`, and each rule the action is expected to trigger (the generator's own per-action data)
//! must be in FILE with the expected `output_fields` (the matching of `live_rules.rs`).
//!
//! Once with Falco's stable rules loaded unchanged (`-r ../shared/falco-rules/falco_rules.yaml`)
//! and once with Vigil's embedded default rules. `vigil run` needs no root, so these tests run
//! everywhere; actions that need root are skipped with a printed reason when not root, and fail
//! the test under `VIGIL_TEST_STRICT=1` (CI). Container actions need runc and the root
//! filesystem (built here when missing, as `tests/e2e/container.rs` does): without them they
//! are reported as not checked, and under `VIGIL_TEST_STRICT=1` they fail. Kernel-capture checks (`syscall.KernelModuleLoad` on a kernel without module
//! support) do not apply: the tracer sees the attempt at syscall entry.
//!
//! The per-action expectation under the tracer is [`vigil_generator::UnderRun`]: `Same` actions
//! must succeed; `RefusedButAlerts` actions (ptrace of an already traced task) must fail, so the
//! documented difference stays true, and still alert.

// Tests report skips and progress on stderr.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use vigil_generator::{Action, Ruleset, UnderRun};

use crate::support::live::*;
use crate::support::rootfs::ensure_rootfs;
use crate::support::{falco_rules, host, is_root, scratch, strict, VIGIL};

/// How long one action under `vigil run` may take (rules loading in a debug build, a 6 s
/// action, a busy machine).
const ACTION_TIMEOUT: Duration = Duration::from_secs(180);

/// Runs `cmd` to completion, killing it after [`ACTION_TIMEOUT`].
fn output_with_timeout(cmd: &mut Command) -> Result<Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start vigil run: {e}"))?;
    let deadline = Instant::now() + ACTION_TIMEOUT;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("timed out after {ACTION_TIMEOUT:?}"));
            }
            Err(e) => return Err(format!("waiting for vigil run: {e}")),
        }
    }
    child
        .wait_with_output()
        .map_err(|e| format!("collecting vigil run's output: {e}"))
}

/// `vigil run --json --alerts ALERTS [-r RULES]… -- vigil generate run ARGS…`.
fn vigil_run(rules: &[PathBuf], alerts: &Path, generate_args: &[&str]) -> Result<Output, String> {
    let mut cmd = Command::new(VIGIL);
    cmd.args(["run", "--json", "--alerts"]).arg(alerts);
    for r in rules {
        cmd.arg("-r").arg(r);
    }
    cmd.args(["--", VIGIL, "generate", "run"])
        .args(generate_args);
    output_with_timeout(&mut cmd)
}

fn alerts_in(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// The name of this process's effective user (what `user.name` reads for its actions).
fn current_user() -> String {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        })
        .unwrap_or_default();
    std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
        .find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 2 && f[2] == uid).then(|| f[0].to_string())
        })
        .unwrap_or(uid)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).trim().to_string()
}

/// Checks one alert list against the rules `action` must raise; returns the failures.
fn check_alerts(
    action: &Action,
    ruleset: Ruleset,
    alerts: &[Value],
    user: &'static str,
    outputs: &RuleOutputs,
) -> Vec<String> {
    let mut failures = Vec::new();
    let mut fields = expected_fields(action.name);
    if action.needs_runc() {
        // Container actions: the host action's fields describe a host process; inside, only
        // the rule and a container identity are checked (tests/e2e/container.rs checks the rest).
        fields.clear();
    } else if user != "root" {
        // Not root: the actions run as this user (root-only actions are skipped).
        for (k, m) in fields.iter_mut() {
            if *k == "user.name" {
                *m = M::Eq(user);
            }
        }
    }
    for e in action.expected().iter().filter(|e| e.ruleset == ruleset) {
        // In a container: a container's short id, where the rule's output names the field
        // (alert_matches holds every named field to be there).
        let names_container = outputs
            .fields(e.rule)
            .is_some_and(|f| f.contains("container.id"));
        let hit = alerts.iter().find(|a| {
            alert_matches(a, e.rule, &fields, outputs)
                && (!action.needs_runc()
                    || !names_container
                    || output_field(a, "container.id")
                        .is_some_and(|id| id != "host" && id.len() == 12))
        });
        if hit.is_none() {
            failures.push(format!(
                "{}: no `{}` alert with {:?} under vigil run; its alerts: {:?}",
                action.name,
                e.rule,
                fields,
                alerts
                    .iter()
                    .map(|a| (a["rule"].clone(), a["output_fields"].clone()))
                    .collect::<Vec<_>>()
            ));
        }
    }
    failures
}

/// Runs every action expected to raise a rule of `ruleset` under `vigil run` and checks the
/// alerts. Returns the failures, one line each.
fn check_ruleset(test: &str, ruleset: Ruleset, rules: &[PathBuf]) -> Vec<String> {
    let dir = scratch(test);
    let mut ctx = vigil_generator::Context::from_env();
    ctx.exe = PathBuf::from(VIGIL);
    let user: &'static str = current_user().leak();
    let outputs = RuleOutputs::of(ruleset);
    let mut failures = Vec::new();
    // The container actions' root filesystem, built when missing (root only: a failure to
    // build it is reported by the actions below).
    if is_root() {
        if let Err(e) = ensure_rootfs(&ctx) {
            eprintln!("{test}: the runc root filesystem: {e}");
        }
    }
    let mut fired: BTreeMap<&str, usize> = BTreeMap::new();
    let mut not_checked = Vec::new();
    for action in vigil_generator::registry() {
        let expected: Vec<_> = action
            .expected()
            .into_iter()
            .filter(|e| e.ruleset == ruleset)
            .collect();
        if expected.is_empty() {
            continue;
        }
        if let Some(why) = action.unavailable_under_run(&ctx) {
            // Not root, no runc, no root filesystem: whatever keeps it from running.
            if strict() {
                failures.push(format!(
                    "{}: VIGIL_TEST_STRICT=1 but the action cannot run: {why}",
                    action.name
                ));
            } else {
                eprintln!("{test}: {}: not checked: {why}", action.name);
                not_checked.push(action.name);
            }
            continue;
        }
        let alerts_file = dir.join(format!("{}.jsonl", action.name));
        let out = match vigil_run(rules, &alerts_file, &["--exact", action.name]) {
            Ok(out) => out,
            Err(e) => {
                failures.push(format!("{}: {e}", action.name));
                continue;
            }
        };
        match (action.under_run, out.status.success()) {
            (UnderRun::Same, false) => failures.push(format!(
                "{}: failed under vigil run ({}): {}",
                action.name,
                out.status,
                text(&out.stderr)
            )),
            (UnderRun::RefusedButAlerts(why), true) => failures.push(format!(
                "{}: succeeded under vigil run, but the generator's data says it is refused \
                 there ({why}); update `under_run`. Output: {}",
                action.name,
                text(&out.stdout)
            )),
            _ => {}
        }
        let alerts = alerts_in(&alerts_file);
        let missed = check_alerts(action, ruleset, &alerts, user, &outputs);
        if missed.is_empty() {
            for e in &expected {
                *fired.entry(e.rule).or_default() += 1;
            }
        }
        failures.extend(missed);
    }
    eprintln!("{test}: rules seen firing under vigil run: {fired:?}; not checked: {not_checked:?}");
    assert!(
        !fired.is_empty() || !failures.is_empty(),
        "{test}: no action was checked (not checked: {not_checked:?})"
    );
    let _ = std::fs::remove_dir_all(&dir);
    failures
}

#[test]
fn falco_stable_rules_fire_on_generator_actions_under_vigil_run() {
    let _host = host::alone(module_path!());
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let failures = check_ruleset("falco-under-run", Ruleset::FalcoStable, &[falco_rules()]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn vigil_default_rules_fire_on_generator_actions_under_vigil_run() {
    let _host = host::alone(module_path!());
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let failures = check_ruleset("vigil-under-run", Ruleset::Vigil, &[]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `vigil run -- vigil generate run REGEX` as a whole: the runner knows it is traced and counts
/// the documented refusals as run, so it exits 0; the attempts alert.
#[test]
fn generate_run_under_vigil_run_counts_documented_refusals() {
    let _host = host::alone(module_path!());
    let refused: Vec<&Action> = vigil_generator::registry()
        .iter()
        .filter(|a| a.under_run != UnderRun::Same)
        .collect();
    assert!(
        !refused.is_empty(),
        "the ptrace actions differ under vigil run"
    );
    // Actions a kernel driver cannot capture here but a tracer can (init_module without module
    // support): the traced runner runs them instead of skipping them.
    let ctx = vigil_generator::Context::from_env();
    let capture_only: Vec<&Action> = vigil_generator::registry()
        .iter()
        .filter(|a| a.unavailable(&ctx).is_some() && a.unavailable_under_run(&ctx).is_none())
        .collect();
    eprintln!(
        "checking the traced runner on {:?} and {:?}",
        refused.iter().map(|a| a.name).collect::<Vec<_>>(),
        capture_only.iter().map(|a| a.name).collect::<Vec<_>>()
    );
    let pattern = format!(
        "^({})$",
        refused
            .iter()
            .chain(&capture_only)
            .map(|a| a.name.replace('.', "\\."))
            .collect::<Vec<_>>()
            .join("|")
    );
    let dir = scratch("whole-runner");
    let alerts = dir.join("alerts.jsonl");
    let out = vigil_run(&[], &alerts, &[&pattern, "--sleep", "0s"]).unwrap();
    let stdout = text(&out.stdout);
    assert!(
        out.status.success(),
        "vigil run -- vigil generate run {pattern}: {}\nstdout: {stdout}\nstderr: {}",
        out.status,
        text(&out.stderr)
    );
    for a in &refused {
        assert!(
            stdout.contains(&format!("ok    {}: refused under a tracer", a.name)),
            "{}: reported as a documented refusal:\n{stdout}",
            a.name
        );
    }
    for a in &capture_only {
        assert!(
            stdout.contains(&format!("ok    {}: ", a.name)),
            "{}: run under the tracer:\n{stdout}",
            a.name
        );
    }
    let got = alerts_in(&alerts);
    let outputs = RuleOutputs::of(Ruleset::Vigil);
    for a in refused.iter().chain(&capture_only) {
        let missed = check_alerts(a, Ruleset::Vigil, &got, current_user().leak(), &outputs);
        assert!(missed.is_empty(), "{}", missed.join("\n"));
    }
    // Outside a tracer the refused actions succeed.
    let pattern = format!(
        "^({})$",
        refused
            .iter()
            .map(|a| a.name.replace('.', "\\."))
            .collect::<Vec<_>>()
            .join("|")
    );
    let direct = Command::new(VIGIL)
        .args(["generate", "run", &pattern, "--sleep", "0s"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        direct.status.success() && !text(&direct.stdout).contains("refused"),
        "untraced run of {pattern}: {}\nstdout: {}\nstderr: {}",
        direct.status,
        text(&direct.stdout),
        text(&direct.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `vigil generate list --json` states every action's expectation under `vigil run`.
#[test]
fn list_json_shows_the_expectation_under_vigil_run() {
    let _host = host::alone(module_path!());
    let out = Command::new(VIGIL)
        .args(["generate", "list", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), vigil_generator::registry().len());
    let ctx = vigil_generator::Context::from_env();
    for (line, action) in listed.iter().zip(vigil_generator::registry()) {
        assert_eq!(line["name"], action.name);
        assert_eq!(
            line["unavailable_under_run"].as_str().map(str::to_string),
            action.unavailable_under_run(&ctx),
            "{line}"
        );
        assert_eq!(
            line["under_run"]["outcome"],
            action.under_run.outcome(),
            "{line}"
        );
        assert_eq!(
            line["under_run"]["reason"].as_str(),
            action.under_run.reason(),
            "{line}"
        );
    }
    let text_list = Command::new(VIGIL)
        .args(["generate", "list", "Ptrace"])
        .output()
        .unwrap();
    assert!(
        text(&text_list.stdout).contains("under `vigil run`: the action fails"),
        "{}",
        text(&text_list.stdout)
    );
}

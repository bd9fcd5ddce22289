//! Live detection tests (root, eBPF): start `vigil watch --json`, perform every host action of
//! the generator (`vigil generate run --exact NAME`, each in its own process) and assert that
//! each rule the action is expected to trigger fired, with the expected `output_fields`.
//!
//! Once with Falco's stable rules loaded unchanged (`-r ../shared/falco-rules/falco_rules.yaml`)
//! and once with Vigil's embedded default rules. Not root or no `vigil watch` support → the
//! tests print `skipping …` and pass, unless `VIGIL_TEST_STRICT=1` (CI), where they fail.
//!
//! Alerts are matched by content (rule name and fields such as `proc.cmdline`), not by time:
//! other processes on the machine may trigger the same rules meanwhile.

// Tests report skips and progress on stderr.

use std::collections::HashMap;
use std::path::PathBuf;

use vigil_generator::{Action, Ruleset};

use crate::support::live::*;
use crate::support::{falco_rules, host, VIGIL};

/// Starts an agent, proves it sees events (a canary symlink over /etc/shadow must alert), runs
/// every host action expected to fire a rule of `ruleset` and checks the alerts. Returns the
/// failures, one line each.
fn check_ruleset(ruleset: Ruleset, rules: &[PathBuf]) -> Vec<String> {
    let outputs = RuleOutputs::of(ruleset);
    let watch = Watch::start(rules);
    let canary_rule = match ruleset {
        Ruleset::FalcoStable => "Create Symlink Over Sensitive Files",
        Ruleset::Vigil => "Link Created to Sensitive File",
    };
    let canary = "syscall.CreateSymlinkOverSensitiveFiles";
    let ready = (0..10).any(|_| {
        let from = watch.cursor();
        run_action(canary).is_ok()
            && watch
                .wait_for(from, |a| {
                    alert_matches(a, canary_rule, &expected_fields(canary), &outputs)
                })
                .is_some()
    });
    assert!(
        ready,
        "the canary action never raised `{canary_rule}`; vigil watch stderr:\n{}",
        watch.stderr()
    );

    let ctx = vigil_generator::Context::from_env();
    let mut failures = Vec::new();
    let actions: Vec<&Action> = vigil_generator::registry()
        .iter()
        .filter(|a| !a.needs_runc())
        .collect();
    let mut checked: HashMap<&str, usize> = HashMap::new();
    for action in actions {
        let expected: Vec<_> = action
            .expected()
            .into_iter()
            .filter(|e| e.ruleset == ruleset)
            .collect();
        if expected.is_empty() {
            continue;
        }
        if let Some(why) = action.unavailable(&ctx) {
            // Root is checked above: what is left is a property of this kernel or machine.
            eprintln!("{}: not checked: {why}", action.name);
            continue;
        }
        let from = watch.cursor();
        if let Err(e) = run_action(action.name) {
            failures.push(format!("{}: the action failed: {e}", action.name));
            continue;
        }
        let fields = expected_fields(action.name);
        for e in expected {
            match watch.wait_for(from, |a| alert_matches(a, e.rule, &fields, &outputs)) {
                Some(_) => *checked.entry(e.rule).or_default() += 1,
                None => failures.push(format!(
                    "{}: no `{}` alert with {:?}; alerts of that rule seen: {:?}",
                    action.name,
                    e.rule,
                    fields,
                    watch
                        .alerts_of(from, e.rule)
                        .iter()
                        .map(|a| a["output_fields"].clone())
                        .collect::<Vec<_>>()
                )),
            }
        }
    }
    eprintln!("{ruleset}: rules seen firing: {checked:?}");
    failures
}

#[test]
fn falco_stable_rules_fire_on_generator_actions() {
    let _host = host::alone(module_path!());
    if skip_or_fail("falco_stable_rules_fire_on_generator_actions") {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let failures = check_ruleset(Ruleset::FalcoStable, &[falco_rules()]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn vigil_default_rules_fire_on_generator_actions() {
    let _host = host::alone(module_path!());
    if skip_or_fail("vigil_default_rules_fire_on_generator_actions") {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let failures = check_ruleset(Ruleset::Vigil, &[]);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn field_matching_rules() {
    let _host = host::alone(module_path!());
    // The matcher itself (runs everywhere).
    let alert = serde_json::json!({
        "rule": "R",
        "output_fields": {"proc.name": "cat", "fd.name": "/etc/shadow", "user.uid": 0, "proc.tty": null}
    });
    let mut outputs = RuleOutputs::default();
    outputs.add_yaml(
        "- rule: R\n  output: a %proc.name on %fd.name (%user.uid %proc.tty).\n\
         - rule: S\n  output: '%proc.name'\n",
        "test rules",
    );
    let fields = [
        ("proc.name", M::Eq("cat")),
        ("fd.name", M::Prefix("/etc/")),
        ("proc.pname", M::Eq("x")),
    ];
    assert!(
        alert_matches(&alert, "R", &fields, &outputs),
        "fields the rule's output does not name are not checked"
    );
    assert!(!alert_matches(&alert, "S", &fields, &outputs));
    assert!(!alert_matches(
        &alert,
        "R",
        &[("proc.name", M::Eq("dog"))],
        &outputs
    ));
    // A field the rule's output names must be in the alert, expected or not.
    let mut lost = alert.clone();
    lost["output_fields"]
        .as_object_mut()
        .unwrap()
        .remove("fd.name");
    assert!(!alert_matches(&lost, "R", &fields, &outputs), "a lost key");
    let mut lost = alert.clone();
    lost["output_fields"]
        .as_object_mut()
        .unwrap()
        .remove("user.uid");
    assert!(!alert_matches(&lost, "R", &[], &outputs), "a lost key");
    assert!(
        !alert_matches(&alert, "T", &[], &outputs),
        "a rule the files do not define"
    );
    assert_eq!(
        output_template_fields("x=%proc.aname[2] %evt.arg.target, at %fd.name. 100%"),
        ["evt.arg.target", "fd.name", "proc.aname[2]"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    for ruleset in [Ruleset::Vigil, Ruleset::FalcoStable] {
        let outputs = RuleOutputs::of(ruleset);
        for a in vigil_generator::registry() {
            for e in a.all_expects().iter().filter(|e| e.ruleset == ruleset) {
                assert!(
                    outputs.fields(e.rule).is_some_and(|f| !f.is_empty()),
                    "{ruleset}: the rule {} of {} has no output in {}",
                    e.rule,
                    a.name,
                    ruleset_file(ruleset).display()
                );
            }
        }
    }
    assert_eq!(output_field(&alert, "user.uid").as_deref(), Some("0"));
    assert_eq!(output_field(&alert, "proc.tty").as_deref(), Some("<NA>"));
    for a in vigil_generator::registry() {
        if !a.needs_runc() && !a.expected().is_empty() {
            assert!(
                expected_fields(a.name).len() > 2,
                "{}: no expected fields",
                a.name
            );
        }
    }
}

/// Falco's multivalue transformers live under `vigil watch`: a rule whose condition uses
/// `concat`, `join` and `getopt(…)[c]` alerts on `cat` opening a file and not on `head`
/// opening it, and the alert's `output_fields` carry the transformed values.
#[test]
fn multivalue_transformers_alert_under_watch() {
    let _host = host::alone(module_path!());
    if skip_or_fail("multivalue_transformers_alert_under_watch") {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("vigil-mv-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let dir = dir.canonicalize().expect("canonical scratch dir");
    let target = dir.join("mv-watch-target.txt");
    std::fs::write(&target, "x\n").expect("target file");
    let rules = dir.join("mv.yaml");
    std::fs::write(
        &rules,
        r#"- rule: Multivalue open
  desc: t
  condition: >
    evt.type in (open, openat, openat2) and basename(fd.name) = mv-watch-target.txt
    and concat(proc.name, "@", basename(fd.name)) = "cat@mv-watch-target.txt"
    and join("+", (proc.name, basename(fd.name))) = "cat+mv-watch-target.txt"
    and getopt(("-e", proc.name), "e:")[e] = cat
  output: 'mv j=%join("+", (proc.name, fd.name)) g=%getopt(("-e", proc.name), "e:")'
  priority: NOTICE
"#,
    )
    .expect("rules file");
    let watch = Watch::start(&[rules]);
    let joined = format!("cat+{}", target.display());
    let from = watch.cursor();
    let seen = (0..10).find_map(|_| {
        for prog in ["head", "cat"] {
            let status = std::process::Command::new(prog)
                .arg(&target)
                .stdout(std::process::Stdio::null())
                .status()
                .expect("run the reader");
            assert!(status.success(), "{prog} failed");
        }
        watch.wait_for(from, |a| {
            a["rule"] == "Multivalue open"
                && output_field(a, "join(\"+\", (proc.name, fd.name))").as_deref()
                    == Some(joined.as_str())
        })
    });
    assert!(
        seen.is_some(),
        "no `Multivalue open` alert for cat; alerts: {:?}\nstderr:\n{}",
        watch.since(from),
        watch.stderr()
    );
    for alert in watch.alerts_of(from, "Multivalue open") {
        assert_eq!(
            output_field(&alert, "getopt((\"-e\", proc.name), \"e:\")").as_deref(),
            Some("(e,cat)"),
            "only cat's open matches: {alert}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `evt.cpu` live under `vigil watch`: `cat` pinned with `taskset -c N` opens a file, and the
/// alert of a rule testing `evt.cpu >= 0` prints `evt.cpu=N` for each of the machine's first two
/// CPUs (one when it has one); the capture written with `-w` replays to the same CPUs.
#[test]
fn evt_cpu_is_the_cpu_the_open_ran_on_live_and_in_replay() {
    let _host = host::alone(module_path!());
    if skip_or_fail("evt_cpu_is_the_cpu_the_open_ran_on_live_and_in_replay") {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("vigil-cpu-watch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let dir = dir.canonicalize().expect("canonical scratch dir");
    let target = dir.join("cpu-watch-target.txt");
    std::fs::write(&target, "x\n").expect("target file");
    let rules = dir.join("cpu.yaml");
    std::fs::write(
        &rules,
        r#"- rule: Open on a cpu
  desc: t
  condition: >
    evt.type in (open, openat, openat2) and proc.name = cat
    and basename(fd.name) = cpu-watch-target.txt and evt.cpu >= 0
  output: "cpu open evt.cpu=%evt.cpu"
  priority: NOTICE
"#,
    )
    .expect("rules file");
    let capture = dir.join("cpu.vcap");
    let watch = Watch::start_with_args(&[
        "-r".into(),
        rules.clone().into_os_string(),
        "-w".into(),
        capture.clone().into_os_string(),
    ]);
    let n_cpus = std::thread::available_parallelism().map_or(1, |n| n.get().min(2));
    let from = watch.cursor();
    let mut live = Vec::new();
    for cpu in 0..n_cpus {
        let want = cpu.to_string();
        let seen = (0..10).find_map(|_| {
            let status = std::process::Command::new("taskset")
                .args(["-c", &want, "cat"])
                .arg(&target)
                .stdout(std::process::Stdio::null())
                .status()
                .expect("run taskset");
            assert!(status.success(), "taskset -c {cpu} cat failed");
            watch.wait_for(from, |a| {
                a["rule"] == "Open on a cpu"
                    && output_field(a, "evt.cpu").as_deref() == Some(want.as_str())
            })
        });
        assert!(
            seen.is_some(),
            "no alert with evt.cpu={cpu} for `taskset -c {cpu} cat`; alerts: {:?}\nstderr:\n{}",
            watch.alerts_of(from, "Open on a cpu"),
            watch.stderr()
        );
        live.push(want);
    }
    let mut live_cpus: Vec<String> = watch
        .since(from)
        .iter()
        .filter(|a| a["rule"] == "Open on a cpu")
        .filter_map(|a| output_field(a, "evt.cpu"))
        .collect();
    live_cpus.sort();
    live_cpus.dedup();
    assert_eq!(live_cpus, live, "only the pinned CPUs");
    let stderr = watch.stderr();
    let exit = watch.stop();
    assert!(exit.success(), "vigil watch exit {exit}: {stderr}");

    let out = std::process::Command::new(VIGIL)
        .arg("replay")
        .arg(&capture)
        .arg("-r")
        .arg(&rules)
        .arg("--json")
        .output()
        .expect("run vigil replay");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut replayed: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|a| a["rule"] == "Open on a cpu")
        .filter_map(|a| output_field(&a, "evt.cpu"))
        .collect();
    replayed.sort();
    replayed.dedup();
    assert_eq!(replayed, live, "the replay gives the same evt.cpu");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Falco's `Directory traversal monitored file read` also takes failed opens, but only of a
/// path with `../` in it: `vigil watch` has the kernel search each failed open's path for
/// `../` and deliver only those (`BpfOptions::failure_needles`). The failed traversal still
/// alerts, with the path as passed; the failures without `../` are filtered and counted.
#[test]
fn a_failed_traversal_open_still_alerts_under_falco_rules() {
    let _host = host::alone(module_path!());
    if skip_or_fail("a_failed_traversal_open_still_alerts_under_falco_rules") {
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let pid = std::process::id();
    // Resolves (lexically, as Falco does) to /etc/…, which does not exist: ENOENT.
    let missing = format!("/tmp/vigil-traversal-{pid}/../../etc/vigil-missing-{pid}");
    let watch = Watch::start(&[falco_rules()]);
    let from = watch.cursor();
    let seen = (0..10).find_map(|_| {
        let status = std::process::Command::new("cat")
            .arg(&missing)
            .arg(format!("/etc/vigil-missing-direct-{pid}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("run cat");
        assert_eq!(status.code(), Some(1), "cat: both files are missing");
        watch.wait_for(from, |a| {
            a["rule"] == "Directory traversal monitored file read"
                && output_field(a, "fd.nameraw").as_deref() == Some(missing.as_str())
        })
    });
    let Some(alert) = seen else {
        panic!(
            "no alert for the failed open of {missing}; alerts: {:?}\nstderr:\n{}",
            watch.alerts_of(from, "Directory traversal monitored file read"),
            watch.stderr()
        );
    };
    assert_eq!(
        output_field(&alert, "fd.name").as_deref(),
        Some(format!("/etc/vigil-missing-{pid}").as_str()),
        "{alert}"
    );
    assert_eq!(output_field(&alert, "evt.type").as_deref(), Some("openat"));
    watch.stop();
}

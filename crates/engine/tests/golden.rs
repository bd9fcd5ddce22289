//! Golden captures: every `testdata/<suite>/<scenario>/events.jsonl` is replayed through the
//! whole pipeline (capture reader → state → rules → alert rendering) with the suite's rules and
//! `rule_matching: all`; the alerts must equal `expected.jsonl` (rule, priority, output_fields).
//!
//! Suites: `falco-stable` runs the upstream stable Falco rules, read unchanged from
//! `../shared/falco-rules/falco_rules.yaml` beside the repository; `vigil-default` runs the
//! embedded default ruleset. `VIGIL_BLESS=1` rewrites `expected.jsonl` from the current output
//! (review the diff before committing it).
//!
//! Requirements: the upstream rules directory for `falco-stable`. Without it the suite is skipped
//! with a reason, and fails under `VIGIL_TEST_STRICT=1`.
// Tests report skipped requirements on stderr.
#![allow(clippy::print_stderr)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value as Json;
use vigil_capture::ReplaySource;
use vigil_engine::{load_rules, read_rules_paths, Engine, RulesText};
use vigil_output::Alert;
use vigil_rules::{LoadOptions, RuleMatching};
use vigil_state::StateConfig;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn strict() -> bool {
    std::env::var("VIGIL_TEST_STRICT").is_ok_and(|v| v == "1")
}

fn bless() -> bool {
    std::env::var("VIGIL_BLESS").is_ok_and(|v| v == "1")
}

/// An error with its causes, `a: b: c`.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut cause = err.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// The comparable part of an alert.
fn alert_json(alert: &Alert) -> Json {
    serde_json::json!({
        "rule": alert.rule,
        "priority": alert.priority,
        "output_fields": alert.fields_json(),
    })
}

fn replay(rules: &[RulesText], capture: &Path) -> Vec<Json> {
    let result = load_rules(rules, &LoadOptions::default());
    let mut ruleset = result.ruleset.unwrap_or_else(|| {
        let diagnostics: Vec<String> = result.diagnostics.iter().map(|d| d.to_string()).collect();
        panic!("suite rules failed to load:\n{}", diagnostics.join("\n"))
    });
    ruleset.set_rule_matching(RuleMatching::All);
    let mut engine = Engine::new(ruleset, StateConfig::default(), "vigil-test".into());
    let mut source = ReplaySource::open(capture)
        .unwrap_or_else(|e| panic!("cannot open {}: {}", capture.display(), chain(&e)));
    let mut alerts = Vec::new();
    let stats = engine
        .run(&mut source, &mut |alert| alerts.push(alert_json(&alert)))
        .unwrap_or_else(|e| panic!("cannot replay {}: {}", capture.display(), chain(&e)));
    assert_eq!(
        stats.events_in,
        stats.processed + stats.dropped_total(),
        "event accounting broken for {}",
        capture.display()
    );
    alerts
}

fn read_expected(path: &Path) -> Vec<Json> {
    let text = fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}:{}: invalid JSON: {e}", path.display(), i + 1))
        })
        .collect()
}

/// Replays one scenario and compares (or, when blessing, rewrites) its `expected.jsonl`.
/// Returns a description of the difference, if any.
fn check_scenario(scenario: &Path, rules: &[RulesText]) -> Option<String> {
    let actual = replay(rules, &scenario.join("events.jsonl"));
    let expected_path = scenario.join("expected.jsonl");
    if bless() {
        let mut text = String::new();
        for alert in &actual {
            text.push_str(&alert.to_string());
            text.push('\n');
        }
        fs::write(&expected_path, text).expect("write expected.jsonl");
        return None;
    }
    let expected = read_expected(&expected_path);
    if actual == expected {
        return None;
    }
    let show = |alerts: &[Json]| {
        alerts
            .iter()
            .map(|a| format!("    {a}"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    Some(format!(
        "{}:\n  expected:\n{}\n  actual:\n{}",
        scenario.display(),
        show(&expected),
        show(&actual)
    ))
}

/// Runs every scenario of a suite; returns the number of scenarios.
fn run_suite(suite: &str, rules: &[RulesText]) -> usize {
    let dir = repo_root().join("testdata").join(suite);
    let mut scenarios: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("events.jsonl").is_file())
        .collect();
    scenarios.sort();
    let failures: Vec<String> = scenarios
        .iter()
        .filter_map(|scenario| check_scenario(scenario, rules))
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} scenarios in {suite} differ (VIGIL_BLESS=1 rewrites them; review the diff):\n{}",
        failures.len(),
        scenarios.len(),
        failures.join("\n")
    );
    scenarios.len()
}

/// The capture `make run` replays alerts as its README says.
#[test]
fn demo_capture_golden() {
    let demo = repo_root().join("testdata/demo");
    let failure = check_scenario(&demo, &[RulesText::embedded_default()]);
    assert!(failure.is_none(), "{}", failure.unwrap_or_default());
    assert!(!read_expected(&demo.join("expected.jsonl")).is_empty());
}

#[test]
fn falco_stable_rules_golden() {
    let upstream = repo_root().join("../shared/falco-rules/falco_rules.yaml");
    if !upstream.is_file() {
        let reason = format!("{} not found", upstream.display());
        assert!(!strict(), "falco_stable_rules_golden: {reason}");
        eprintln!("skipping falco_stable_rules_golden: {reason}");
        return;
    }
    let rules = read_rules_paths(&[upstream]).expect("read upstream rules");
    let n = run_suite("falco-stable", &rules);
    // One alerting scenario and one near-miss for each of the 25 stable rules.
    assert!(n >= 50, "expected at least 50 scenarios, found {n}");
}

#[test]
fn vigil_default_rules_golden() {
    let n = run_suite("vigil-default", &[RulesText::embedded_default()]);
    assert!(
        n >= 2,
        "expected scenarios for the default rules, found {n}"
    );
}

#[test]
fn every_stable_rule_alerts_in_some_scenario() {
    let upstream = repo_root().join("../shared/falco-rules/falco_rules.yaml");
    if !upstream.is_file() {
        assert!(
            !strict(),
            "every_stable_rule_alerts_in_some_scenario: {} not found",
            upstream.display()
        );
        eprintln!("skipping every_stable_rule_alerts_in_some_scenario: upstream rules not found");
        return;
    }
    let rules = read_rules_paths(&[upstream]).expect("read upstream rules");
    let ruleset = load_rules(&rules, &LoadOptions::default())
        .ruleset
        .expect("upstream rules load");
    let dir = repo_root().join("testdata/falco-stable");
    let mut alerted = std::collections::BTreeSet::new();
    for entry in fs::read_dir(&dir).expect("list falco-stable").flatten() {
        for alert in read_expected(&entry.path().join("expected.jsonl")) {
            if let Some(rule) = alert["rule"].as_str() {
                alerted.insert(rule.to_string());
            }
        }
    }
    let missing: Vec<&str> = ruleset
        .rules()
        .iter()
        .map(|r| r.name.as_str())
        .filter(|name| !alerted.contains(*name))
        .collect();
    assert!(
        missing.is_empty(),
        "stable rules without an alerting scenario: {missing:?}"
    );
}

/// The benchmark corpus claims that each of its events is of a type a stable rule watches, or
/// one the state engine needs (`clone`, `close`, `procexit`); keep that claim true.
#[test]
fn benchmark_corpus_holds_only_watched_or_state_event_types() {
    let upstream = repo_root().join("../shared/falco-rules/falco_rules.yaml");
    if !upstream.is_file() {
        assert!(
            !strict(),
            "benchmark corpus check: {} not found",
            upstream.display()
        );
        eprintln!("skipping benchmark_corpus_holds_only_watched_or_state_event_types: upstream rules not found");
        return;
    }
    let rules = read_rules_paths(&[upstream]).expect("read upstream rules");
    let interest = load_rules(&rules, &LoadOptions::default())
        .ruleset
        .expect("upstream rules load")
        .event_types();
    let mut unwatched = std::collections::BTreeSet::new();
    for event in vigil_engine::corpus::events(10_000) {
        let name = event.etype.name();
        if !interest.contains(event.etype.0) && !matches!(name, "clone" | "close" | "procexit") {
            unwatched.insert(name);
        }
    }
    assert!(
        unwatched.is_empty(),
        "corpus event types no rule watches: {unwatched:?}"
    );
}

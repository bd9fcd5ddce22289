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

use std::collections::{BTreeMap, BTreeSet};
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

// ---------------------------------------------------------------------------------------------
// What the expected alerts must be whatever Vigil produces: derived from Falco's documented
// alert format and from the rules files and scenario tables themselves, read here without
// Vigil's loader or renderer, so a bless cannot make a Vigil bug the expected answer there.

/// Falco's JSON alert spells a rule's priority with the names of its documentation
/// (`falco_common::format_priority`: `Emergency` … `Debug`; a rules file may write any case,
/// and `info` for `Informational`).
fn falco_priority(priority: &str) -> Option<&'static str> {
    Some(match priority.to_ascii_lowercase().as_str() {
        "emergency" => "Emergency",
        "alert" => "Alert",
        "critical" => "Critical",
        "error" => "Error",
        "warning" => "Warning",
        "notice" => "Notice",
        "informational" | "info" => "Informational",
        "debug" => "Debug",
        _ => return None,
    })
}

/// Fields whose Falco type is numeric (Falco's field list: `UINT32`/`INT64`/`PORT`/`ABSTIME`/
/// `RELTIME`), which its JSON output writes as numbers; `BOOL` ones as `true`/`false`. Every
/// other field of these outputs is a string. Any field may be `null` (`<NA>`).
const NUMERIC_FIELDS: &[&str] = &[
    "user.uid",
    "user.loginuid",
    "group.gid",
    "proc.tty",
    "proc.pid",
    "proc.ppid",
    "proc.vpid",
    "thread.tid",
    "thread.vtid",
    "evt.rawres",
    "fd.num",
    "fd.sport",
    "fd.cport",
    "fd.lport",
    "fd.rport",
    "container.start_ts",
    "proc.exe_ino.ctime",
    "proc.exe_ino.mtime",
    "proc.exe_ino.ctime_duration_proc_start",
];
const BOOL_FIELDS: &[&str] = &["container.privileged"];

/// The `%field` references of an output template (a dotted name, an optional `[argument]`).
fn template_fields(output: &str) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    let mut rest = output;
    while let Some(at) = rest.find('%') {
        rest = &rest[at + 1..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        let mut name = rest[..len].trim_end_matches('.').to_owned();
        let mut taken = len;
        if name.len() == len && rest[len..].starts_with('[') {
            if let Some(close) = rest[len..].find(']') {
                name.push_str(&rest[len..=len + close]);
                taken = len + close + 1;
            }
        }
        if name.contains('.') {
            fields.insert(name);
        }
        rest = &rest[taken..];
    }
    fields
}

/// Each rule of a rules file: Falco's spelling of its priority, the fields its output names.
fn rules_of(file: &Path) -> BTreeMap<String, (&'static str, BTreeSet<String>)> {
    let text = fs::read_to_string(file).unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
    let items: Vec<Json> = serde_saphyr::from_str(&text)
        .unwrap_or_else(|e| panic!("{}: not a YAML list: {e}", file.display()));
    let mut rules = BTreeMap::new();
    for item in items {
        let (Some(name), Some(output), Some(priority)) = (
            item["rule"].as_str(),
            item["output"].as_str(),
            item["priority"].as_str(),
        ) else {
            continue;
        };
        let priority = falco_priority(priority)
            .unwrap_or_else(|| panic!("{}: {name}: priority {priority}", file.display()));
        rules.insert(name.to_owned(), (priority, template_fields(output)));
    }
    rules
}

/// The scenario table of a suite's README: `(rule, scenario directory, alerts of the rule if
/// the row gives their number)` for every directory a row links.
fn scenario_table(readme: &Path) -> Vec<(String, String, Option<usize>)> {
    let text = fs::read_to_string(readme).unwrap_or_default();
    let mut rows = Vec::new();
    for line in text.lines().filter(|l| l.starts_with('|')) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        let count = cells.get(2).and_then(|c| c.parse().ok());
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            let dir = rest.split(['/', ')']).next().unwrap_or("");
            if !dir.is_empty() && !dir.starts_with('.') {
                let n = if dir.ends_with("near-miss") {
                    None
                } else {
                    count
                };
                rows.push((cells[0].to_owned(), dir.to_owned(), n));
            }
        }
    }
    rows
}

/// One `expected.jsonl` against Falco's alert format: each alert names a rule of `rules` with
/// its priority as Falco spells it, and `output_fields` holds exactly the fields the rule's
/// output names, with values of their Falco types. Returns the problems.
fn check_alert_format(
    alerts: &[Json],
    scenario: &str,
    rules: &BTreeMap<String, (&'static str, BTreeSet<String>)>,
    rules_file: &Path,
) -> Vec<String> {
    let mut problems = Vec::new();
    for (i, alert) in alerts.iter().enumerate() {
        let at = format!("{scenario}/expected.jsonl:{}", i + 1);
        let rule = alert["rule"].as_str().unwrap_or_default();
        let Some((priority, fields)) = rules.get(rule) else {
            problems.push(format!(
                "{at}: no rule {rule:?} in {}",
                rules_file.display()
            ));
            continue;
        };
        if alert["priority"] != *priority {
            problems.push(format!(
                "{at}: priority {} where Falco prints {priority}",
                alert["priority"]
            ));
        }
        let Some(values) = alert["output_fields"].as_object() else {
            problems.push(format!("{at}: no output_fields object"));
            continue;
        };
        let keys: BTreeSet<String> = values.keys().cloned().collect();
        if &keys != fields {
            problems.push(format!(
                "{at}: output_fields {:?} where the output names {:?}",
                keys.difference(fields).collect::<Vec<_>>(),
                fields.difference(&keys).collect::<Vec<_>>()
            ));
        }
        for (field, value) in values {
            let base = field.split('[').next().unwrap_or(field);
            let typed = if NUMERIC_FIELDS.contains(&base) {
                value.is_number()
            } else if BOOL_FIELDS.contains(&base) {
                value.is_boolean()
            } else {
                value.is_string()
            };
            if !(typed || value.is_null()) {
                problems.push(format!("{at}: {field} = {value}: not of its Falco type"));
            }
        }
    }
    problems
}

/// Every `expected.jsonl` of `suite` against what is known without Vigil: each alert names a
/// rule of `rules_file` with its priority as Falco spells it, `output_fields` holds exactly
/// the fields the rule's output names (Falco's JSON alert: `output_fields`, one entry per
/// `%field`) with values of the JSON type of each field's Falco type; every scenario is in
/// the README's table, a near miss expects no alert, and a scenario expects at least one
/// alert of the rule its row names (as many as the row says, where it says). Returns the
/// problems.
fn check_expectations(suite: &str, rules_file: &Path) -> Vec<String> {
    let rules = rules_of(rules_file);
    let dir = repo_root().join("testdata").join(suite);
    let table = scenario_table(&dir.join("README.md"));
    let mut problems = Vec::new();
    let mut scenarios: Vec<PathBuf> = fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("events.jsonl").is_file())
        .collect();
    scenarios.sort();
    for scenario in &scenarios {
        let name = scenario
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let alerts = read_expected(&scenario.join("expected.jsonl"));
        problems.extend(check_alert_format(
            &alerts,
            &format!("{suite}/{name}"),
            &rules,
            rules_file,
        ));
        let rows: Vec<&(String, String, Option<usize>)> =
            table.iter().filter(|(_, d, _)| *d == name).collect();
        if rows.is_empty() {
            problems.push(format!(
                "{suite}/{name}: not in the README's scenario table"
            ));
        }
        for (rule, _, count) in rows {
            let of_rule = alerts.iter().filter(|a| a["rule"] == rule.as_str()).count();
            if !rules.contains_key(rule) {
                problems.push(format!("{suite}/README.md: no rule {rule:?} in the rules"));
            } else if name.ends_with("near-miss") {
                if !alerts.is_empty() {
                    problems.push(format!(
                        "{suite}/{name}: a near miss expects {} alerts",
                        alerts.len()
                    ));
                }
            } else if of_rule == 0 || count.is_some_and(|n| n != of_rule) {
                problems.push(format!(
                    "{suite}/{name}: {of_rule} alerts of `{rule}` (the README's table: {})",
                    count.map_or("at least one".to_owned(), |n| n.to_string())
                ));
            }
        }
    }
    problems
}

#[test]
fn falco_stable_expectations_follow_falcos_alert_format() {
    let upstream = repo_root().join("../shared/falco-rules/falco_rules.yaml");
    if !upstream.is_file() {
        let reason = format!("{} not found", upstream.display());
        assert!(
            !strict(),
            "falco_stable_expectations_follow_falcos_alert_format: {reason}"
        );
        eprintln!("skipping falco_stable_expectations_follow_falcos_alert_format: {reason}");
        return;
    }
    let problems = check_expectations("falco-stable", &upstream);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn vigil_default_expectations_follow_falcos_alert_format() {
    let problems = check_expectations("vigil-default", &repo_root().join("rules/vigil_rules.yaml"));
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn demo_expectations_follow_falcos_alert_format() {
    let rules_file = repo_root().join("rules/vigil_rules.yaml");
    let alerts = read_expected(&repo_root().join("testdata/demo/expected.jsonl"));
    let problems = check_alert_format(&alerts, "demo", &rules_of(&rules_file), &rules_file);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn expectation_checks_catch_what_they_claim() {
    assert_eq!(
        template_fields("a %proc.aname[2] on %fd.name. (%user.uid) 100%"),
        ["fd.name", "proc.aname[2]", "user.uid"]
            .map(String::from)
            .into_iter()
            .collect()
    );
    assert_eq!(falco_priority("WARNING"), Some("Warning"));
    assert_eq!(falco_priority("INFO"), Some("Informational"));
    assert_eq!(falco_priority("loud"), None);
    let dir = std::env::temp_dir().join(format!("vigil-golden-table-{}", std::process::id()));
    fs::create_dir_all(&dir).unwrap();
    let readme = dir.join("README.md");
    fs::write(
        &readme,
        "| Rule | Must alert | Alerts | Near miss |\n|---|---|---|---|\n\
         | R one | [`r-one/`](r-one/README.md) | 3 | [`r-one-near-miss/`](r-one-near-miss/README.md) |\n\
         | R two | [`r-two`](r-two/) | [`near-miss`](r-two-near-miss/) | text |\n",
    )
    .unwrap();
    assert_eq!(
        scenario_table(&readme),
        vec![
            ("R one".into(), "r-one".into(), Some(3)),
            ("R one".into(), "r-one-near-miss".into(), None),
            ("R two".into(), "r-two".into(), None),
            ("R two".into(), "r-two-near-miss".into(), None),
        ]
    );
    let _ = fs::remove_dir_all(&dir);
}

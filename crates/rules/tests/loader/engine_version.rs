//! `vigil_rules::ENGINE_VERSION` tied to what Vigil implements: one probe per Falco engine
//! version Vigil claims, each a rule using what that engine added to the language, loaded
//! under `required_engine_version: <that version>` and evaluated on an event it must match
//! and one it must not. Raising `ENGINE_VERSION` without a probe for the new version, or
//! claiming a version whose probe does not hold, fails here.
//!
//! Falco's versions are in `userspace/engine/falco_engine_version.h` (falco 0.42.0: 0.57.0,
//! 0.43.0: 0.58.0, 0.44.0 and 0.44.1: 0.62.0, 65273dae on the way to 0.45: 0.63.0); the
//! messages are Falco's
//! (`rule_loader_collector.cpp`, `rule_loader_reader.cpp`).

use std::borrow::Cow;

use vigil_fields::Value;
use vigil_rules::testcatalog::TestEvent;
use vigil_rules::{engine_compatible_with, version_text, ENGINE_VERSION};

use crate::common::{briefs, load, matching, ruleset};

/// What one Falco engine version added that a rules file can use, and a probe of it.
struct Step {
    version: (u64, u64, u64),
    /// The Falco release that shipped this engine version, and what it added.
    what: &'static str,
    /// A condition using it.
    condition: &'static str,
    /// An event the condition matches, and one it does not.
    matches: fn() -> TestEvent,
    misses: fn() -> TestEvent,
}

fn open_of(name: &[u8], file: &[u8]) -> TestEvent {
    let mut e = TestEvent::new("openat");
    e.set_values("proc.name", vec![Value::Str(Cow::Owned(name.to_vec()))]);
    e.set_values("fd.name", vec![Value::Str(Cow::Owned(file.to_vec()))]);
    e
}

const STEPS: &[Step] = &[
    Step {
        version: (0, 57, 0),
        what: "Falco 0.42: the language Vigil first implemented (the stable rules of that release)",
        condition:
            "evt.type in (open, openat) and fd.name pmatch (/etc) and not proc.name in (sshd)",
        matches: || open_of(b"cat", b"/etc/shadow"),
        misses: || open_of(b"sshd", b"/etc/shadow"),
    },
    Step {
        version: (0, 59, 0),
        what: "Falco 0.44 development (libs transformer_list_expr): the multivalue transformers \
               join, concat and getopt",
        condition: "evt.type = openat and concat(proc.name, \":\", fd.name) = \"cat:/etc/shadow\"",
        matches: || open_of(b"cat", b"/etc/shadow"),
        misses: || open_of(b"cat", b"/etc/hosts"),
    },
    Step {
        version: (0, 62, 0),
        what: "Falco 0.44.0/0.44.1: the string operator modifiers oneof, anyof, allof",
        condition: "evt.type = openat and fd.name startswith anyof (/etc/sh, /root) \
                    and proc.name != allof (sshd, login)",
        matches: || open_of(b"cat", b"/etc/shadow"),
        misses: || open_of(b"login", b"/etc/shadow"),
    },
    Step {
        version: (0, 63, 0),
        what: "Falco 0.45 (falco 65273dae, \"improve invalid UTF-8 sequence handling\"): \
               conditions compare raw bytes (`\\xHH` matches an invalid byte), `regex` sees \
               each invalid sequence as U+FFFD",
        condition: r#"evt.type = openat and fd.name contains "\xff" and fd.name regex "/tmp/a.""#,
        matches: || open_of(b"cat", b"/tmp/a\xff"),
        misses: || open_of(b"cat", "/tmp/a\u{fffd}".as_bytes()),
    },
];

fn rules_requiring(version: &str, condition: &str) -> String {
    format!(
        "- required_engine_version: {version}\n- rule: probe\n  desc: d\n  condition: {condition}\n  output: o\n  priority: INFO\n"
    )
}

#[test]
fn the_newest_probe_is_the_engine_version() {
    let newest = STEPS.last().expect("at least one step").version;
    assert_eq!(
        newest,
        ENGINE_VERSION,
        "ENGINE_VERSION is {} but the newest probe is for {}: add the probe of what the new \
         engine version brings, or do not raise it",
        version_text(ENGINE_VERSION),
        version_text(newest)
    );
    assert!(
        STEPS.windows(2).all(|w| w[0].version < w[1].version),
        "steps in ascending order"
    );
}

/// Each probe loads under its own `required_engine_version`, in the semver form and in the
/// integer form Falco still reads (`N` is `0.N.0`), and matches as it should.
#[test]
fn every_claimed_version_loads_and_its_probe_holds() {
    for step in STEPS {
        let semver = version_text(step.version);
        let integer = step.version.1.to_string();
        for form in [semver.as_str(), integer.as_str()] {
            let text = rules_requiring(form, step.condition);
            let r = load(&[("rules.yaml", &text)]);
            assert!(
                r.ruleset.is_some() && r.warnings().next().is_none(),
                "{} ({}): required_engine_version {form}:\n{}",
                semver,
                step.what,
                briefs(&r)
            );
            let rs = ruleset(&[("rules.yaml", &text)]);
            assert_eq!(
                matching(&rs, &(step.matches)()),
                ["probe"],
                "{semver}: {}",
                step.what
            );
            assert!(
                matching(&rs, &(step.misses)()).is_empty(),
                "{semver}: {}",
                step.what
            );
        }
    }
}

/// A file requiring a newer engine (next minor, next patch, another major, or the integer
/// form of a newer minor) is refused with Falco's message, at the version's position.
#[test]
fn a_file_requiring_more_is_refused_with_falcos_message() {
    let (major, minor, patch) = ENGINE_VERSION;
    let ours = version_text(ENGINE_VERSION);
    for (text, shown) in [
        (
            version_text((major, minor + 1, 0)),
            version_text((major, minor + 1, 0)),
        ),
        (
            version_text((major, minor, patch + 1)),
            version_text((major, minor, patch + 1)),
        ),
        (
            version_text((major + 1, 0, 0)),
            version_text((major + 1, 0, 0)),
        ),
        ((minor + 1).to_string(), version_text((0, minor + 1, 0))),
    ] {
        let rules = rules_requiring(&text, "evt.type = openat");
        let r = load(&[("rules.yaml", &rules)]);
        assert!(r.ruleset.is_none(), "{text} must be refused");
        assert_eq!(
            briefs(&r),
            format!(
                "E_ENGINE_VERSION: Rules require engine version {shown}, but engine version is {ours} @ 1:28"
            ),
            "{text}"
        );
    }
    // Older and equal versions are fine; another major never is (libsinsp's
    // `compatible_with`: same major, at least the version required).
    assert!(engine_compatible_with((major, 0, 0)));
    assert!(engine_compatible_with(ENGINE_VERSION));
    assert!(!engine_compatible_with((major + 1, 0, 0)));
}

//! What a reload can change under `vigil run`. The rules, outputs and configuration are
//! replaced, and so are the per-event decisions the tracer asks the pipeline for (which exits
//! matter, which entries are blocked: they read the engine's rules, and the per-rule
//! enforcement table is derived again here). The seccomp filter installed in the workload at
//! its start is not: a syscall it does not stop never reaches Vigil, so a reloaded rule that
//! watches one (or that enforces on a syscall the start did not judge) is blind to it until
//! the workload restarts. [`RunningFilter::reloaded`] names those rules.

use std::collections::{BTreeMap, BTreeSet};

use vigil_capture::ArgIn;
use vigil_engine::{EnforceSelection, FilterError, KernelFilter};
use vigil_ptrace::RunSpec;
use vigil_rules::Ruleset;

/// The filter installed in the workload, and how the start derived it.
pub struct RunningFilter {
    /// Syscalls that stop the workload ([`vigil_ptrace::traced_syscalls`]).
    traced: BTreeSet<u16>,
    /// Traced syscalls that stop only when an argument has some values.
    when: BTreeMap<u16, ArgIn>,
    /// Syscalls judged at entry.
    judged: BTreeSet<u16>,
    enforce: Option<EnforceSelection>,
    everything: bool,
}

/// An enabled rule of a reloaded ruleset that the running filter leaves (partly) blind.
#[derive(Debug, PartialEq, Eq)]
pub struct Blind {
    pub rule: String,
    /// Syscalls it watches that never (or only for some argument values) stop the workload.
    pub unseen: Vec<&'static str>,
    /// Syscalls it would block that are not judged at entry.
    pub unenforced: Vec<&'static str>,
}

/// The reloaded rules under the running filter.
#[derive(Debug)]
pub struct Reloaded {
    /// Per rule of the reloaded ruleset: whether it enforces.
    pub enforced: Vec<bool>,
    pub blind: Vec<Blind>,
}

impl RunningFilter {
    /// The filter `spec` installs; `enforce` and `everything` as given to
    /// [`KernelFilter::derive`] at the start.
    pub fn new(spec: &RunSpec, enforce: Option<EnforceSelection>, everything: bool) -> Self {
        RunningFilter {
            traced: vigil_ptrace::traced_syscalls(spec).into_iter().collect(),
            when: vigil_ptrace::traced_conditions(spec).into_iter().collect(),
            judged: spec.judged.iter().copied().collect(),
            enforce,
            everything,
        }
    }

    /// The filter of `ruleset`: what the start installs ([`RunningFilter::new`] of the
    /// [`RunSpec`] made from it) and a reload checks against (an error refuses the reload).
    pub fn derive(
        enforce: Option<&EnforceSelection>,
        everything: bool,
        ruleset: &Ruleset,
    ) -> Result<KernelFilter, FilterError> {
        KernelFilter::derive(ruleset, enforce, everything)
    }

    /// The enforcement table of `ruleset`, and its rules the running filter leaves blind.
    pub fn reloaded(&self, ruleset: &Ruleset) -> Result<Reloaded, FilterError> {
        let wanted = Self::derive(self.enforce.as_ref(), self.everything, ruleset)?;
        let wanted_when: BTreeMap<u16, &ArgIn> =
            wanted.report_when.iter().map(|(nr, c)| (*nr, c)).collect();
        // Reported syscalls the workload does not stop for (all of them, or some values).
        let unseen: BTreeSet<u16> = wanted
            .report
            .iter()
            .copied()
            .filter(|nr| {
                !self.traced.contains(nr)
                    || self
                        .when
                        .get(nr)
                        .is_some_and(|running| wanted_when.get(nr) != Some(&running))
            })
            .collect();
        let unjudged: BTreeSet<u16> = wanted
            .judged
            .iter()
            .copied()
            .filter(|nr| !self.judged.contains(nr))
            .collect();
        let mut blind = Vec::new();
        for (i, rule) in ruleset.rules().iter().enumerate() {
            if !ruleset.is_enabled(i) {
                continue;
            }
            let nrs: BTreeSet<u16> = match rule.event_types() {
                Some(types) => types.iter().filter_map(|&id| syscall_nr(id)).collect(),
                // Every event type: every syscall.
                None => unseen.iter().copied().collect(),
            };
            let names = |set: &BTreeSet<u16>| -> Vec<&'static str> {
                nrs.intersection(set).map(|&nr| syscall_name(nr)).collect()
            };
            let enforcing = wanted.enforced.get(i).copied().unwrap_or(false);
            let b = Blind {
                rule: rule.name.clone(),
                unseen: names(&unseen),
                unenforced: if enforcing {
                    names(&unjudged)
                } else {
                    Vec::new()
                },
            };
            if !b.unseen.is_empty() || !b.unenforced.is_empty() {
                blind.push(b);
            }
        }
        Ok(Reloaded {
            enforced: wanted.enforced,
            blind,
        })
    }
}

/// The warning for the rules the running filter leaves blind.
pub fn describe(blind: &[Blind]) -> String {
    let rules: Vec<String> = blind
        .iter()
        .map(|b| {
            let mut parts = Vec::new();
            if !b.unseen.is_empty() {
                parts.push(format!("misses {}", b.unseen.join(", ")));
            }
            if !b.unenforced.is_empty() {
                parts.push(format!("cannot block {}", b.unenforced.join(", ")));
            }
            format!("`{}` ({})", b.rule, parts.join("; "))
        })
        .collect();
    format!(
        "{} reloaded rule(s) will not see these syscalls until the workload restarts (the \
         seccomp filter installed at its start does not stop them): {}",
        blind.len(),
        rules.join(", ")
    )
}

fn syscall_nr(id: u16) -> Option<u16> {
    vigil_event::table::events()
        .get(usize::from(id))
        .and_then(|s| s.nr)
}

fn syscall_name(nr: u16) -> &'static str {
    vigil_event::table::events()
        .iter()
        .find(|s| s.nr == Some(nr))
        .map_or("?", |s| s.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_engine::{load_rules, RulesText};
    use vigil_ptrace::Mechanism;
    use vigil_rules::LoadOptions;

    fn ruleset(rules: &[(&str, &str, &str)]) -> Ruleset {
        let text: String = rules
            .iter()
            .map(|(name, condition, tags)| {
                format!(
                    "- rule: {name}\n  desc: d\n  condition: {condition}\n  output: o\n  \
                     priority: WARNING\n  tags: [{tags}]\n"
                )
            })
            .collect();
        load_rules(
            &[RulesText {
                name: "rules.yaml".into(),
                text,
            }],
            &LoadOptions::default(),
        )
        .ruleset
        .expect("rules load")
    }

    fn spec_for(rules: &Ruleset, enforce: Option<&EnforceSelection>) -> RunSpec {
        let f = KernelFilter::derive(rules, enforce, false).unwrap();
        RunSpec {
            program: "true".into(),
            args: Vec::new(),
            report: f.report,
            judged: f.judged,
            report_when: f.report_when,
            in_place: None,
            learn: false,
            profile: None,
            mechanism: Mechanism::Ptrace,
            drop_privileges: false,
            idle_interval: None,
            ..RunSpec::default()
        }
    }

    const OPEN_SHADOW: (&str, &str, &str) = (
        "Open shadow",
        "evt.type = openat and fd.name = /etc/shadow",
        "a",
    );

    #[test]
    fn covered_rules_are_not_blind_and_new_syscalls_are_named() {
        let start = ruleset(&[OPEN_SHADOW]);
        let running = RunningFilter::new(&spec_for(&start, None), None, false);
        // The same rules, and a rule on the same syscall: covered.
        let r = running
            .reloaded(&ruleset(&[
                OPEN_SHADOW,
                (
                    "Open passwd",
                    "evt.type = openat and fd.name = /etc/passwd",
                    "b",
                ),
            ]))
            .unwrap();
        assert!(r.blind.is_empty(), "{:?}", r.blind);
        assert_eq!(r.enforced, [false, false]);
        // A rule on a syscall the filter does not stop.
        let r = running
            .reloaded(&ruleset(&[
                OPEN_SHADOW,
                (
                    "Mkdir",
                    "evt.type in (mkdir, mkdirat) and proc.name = x",
                    "b",
                ),
            ]))
            .unwrap();
        assert_eq!(
            r.blind,
            [Blind {
                rule: "Mkdir".into(),
                unseen: vec!["mkdir", "mkdirat"],
                unenforced: Vec::new(),
            }]
        );
        let text = describe(&r.blind);
        assert!(
            text.starts_with("1 reloaded rule(s)")
                && text.contains("`Mkdir` (misses mkdir, mkdirat)"),
            "{text}"
        );
        // A rule on every event type misses whatever is not stopped.
        let r = running
            .reloaded(&ruleset(&[("Any", "proc.name = x", "b")]))
            .unwrap();
        assert_eq!(r.blind.len(), 1);
        assert!(r.blind[0].unseen.contains(&"mkdir"), "{:?}", r.blind);
        // A disabled rule is not reported.
        let mut rs = ruleset(&[OPEN_SHADOW, ("Mkdir", "evt.type = mkdir", "b")]);
        rs.select(&vigil_rules::Selection::default().disable_rule("Mkdir"));
        assert!(running.reloaded(&rs).unwrap().blind.is_empty());
    }

    #[test]
    fn an_argument_condition_in_force_leaves_other_values_unseen() {
        // Started with only write opens stopping.
        let start = ruleset(&[(
            "Write etc",
            "evt.type = openat and evt.is_open_write = true and fd.name startswith /etc",
            "a",
        )]);
        let spec = spec_for(&start, None);
        assert!(
            !spec.report_when.is_empty(),
            "the start has a write-only condition"
        );
        let running = RunningFilter::new(&spec, None, false);
        assert!(running.reloaded(&start).unwrap().blind.is_empty());
        // A reloaded rule on read opens: openat stops only for writes.
        let r = running.reloaded(&ruleset(&[OPEN_SHADOW])).unwrap();
        assert_eq!(r.blind.len(), 1, "{:?}", r.blind);
        assert_eq!(r.blind[0].unseen, ["openat"]);
    }

    #[test]
    fn enforcement_follows_the_reloaded_rule_indices() {
        let enforce = EnforceSelection::default();
        let start = ruleset(&[(
            "Block shadow",
            "evt.type = openat and fd.name = /etc/shadow",
            "vigil.enforce",
        )]);
        let running = RunningFilter::new(&spec_for(&start, Some(&enforce)), Some(enforce), false);
        // A new rule first: the enforcing rule moves to index 1.
        let r = running
            .reloaded(&ruleset(&[
                (
                    "Log passwd",
                    "evt.type = openat and fd.name = /etc/passwd",
                    "b",
                ),
                (
                    "Block shadow",
                    "evt.type = openat and fd.name = /etc/shadow",
                    "vigil.enforce",
                ),
                ("Block mkdir", "evt.type = mkdir", "vigil.enforce"),
            ]))
            .unwrap();
        assert_eq!(r.enforced, [false, true, true]);
        assert_eq!(
            r.blind,
            [Blind {
                rule: "Block mkdir".into(),
                unseen: vec!["mkdir"],
                unenforced: vec!["mkdir"],
            }]
        );
        assert!(describe(&r.blind).contains("(misses mkdir; cannot block mkdir)"));
        // An enforced rule without an event type is refused, as at the start.
        assert!(running
            .reloaded(&ruleset(&[("Block all", "proc.name = x", "vigil.enforce")]))
            .is_err());
    }
}

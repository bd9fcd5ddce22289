//! `vigil rules profile CAPTURE`: which rules, and which comparisons in them, cost the most
//! evaluation time on a capture.
//!
//! The capture is replayed twice through the same state and rules as `vigil replay`, every
//! event timed ([`RuleCosts`] with stride 1): the first pass times each rule's condition with
//! one clock read per rule (the rules' times); the second also times each comparison inside
//! the conditions (clock reads around every comparison would inflate the rules' own times, so
//! those come from the first pass). The cost of the clock reads themselves, measured before
//! the passes, is taken out of every time. A comparison answered by a shared macro's memo or
//! skipped by a short circuit costs nothing and is not counted: the times are what the
//! evaluator spent, in the order it spends it, field extraction included where a comparison
//! is the first to read a field in that event.

use std::fmt::Write as _;
use std::time::Instant;

use vigil_capture::{Source, SourceError};
use vigil_rules::ruleset::RuleCosts;
use vigil_rules::Ruleset;
use vigil_state::StateConfig;

use crate::Engine;

/// One comparison of one rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionProfile {
    /// Its canonical text (`fd.name startswith /etc`); `#ID` when the rules were loaded
    /// without [`vigil_rules::LoadOptions::condition_texts`].
    pub text: String,
    pub evaluations: u64,
    pub nanos: u64,
}

/// One rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleProfile {
    pub rule: String,
    pub evaluations: u64,
    pub nanos: u64,
    /// Its comparisons, costliest first.
    pub conditions: Vec<ConditionProfile>,
}

/// A profile of every enabled rule on one capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    /// Events replayed.
    pub events: u64,
    /// The cost of one clock read, taken out of every time.
    pub clock_nanos: u64,
    /// Every enabled rule, costliest first (ties by name).
    pub rules: Vec<RuleProfile>,
}

impl Profile {
    /// Time in all rules.
    pub fn total_nanos(&self) -> u64 {
        self.rules.iter().map(|r| r.nanos).sum()
    }

    /// Evaluations of all rules.
    pub fn total_evaluations(&self) -> u64 {
        self.rules.iter().map(|r| r.evaluations).sum()
    }

    /// The report `vigil rules profile` prints: the `top` costliest rules, each with its
    /// `conditions` costliest comparisons.
    pub fn to_text(&self, top: usize, conditions: usize) -> String {
        let total = self.total_nanos();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} events, {} rules evaluated {} times, {} in rule conditions (clock reads of {} ns \
             taken out)",
            self.events,
            self.rules.len(),
            self.total_evaluations(),
            duration(total),
            self.clock_nanos
        );
        let _ = writeln!(
            out,
            "{:>4}  {:>10}  {:>6}  {:>11}  {:>8}  rule",
            "rank", "time", "share", "evaluations", "ns/eval"
        );
        for (rank, rule) in self.rules.iter().take(top).enumerate() {
            let _ = writeln!(
                out,
                "{:>4}  {:>10}  {:>6}  {:>11}  {:>8}  {}",
                rank + 1,
                duration(rule.nanos),
                share(rule.nanos, total),
                rule.evaluations,
                per(rule.nanos, rule.evaluations),
                rule.rule
            );
            for c in rule.conditions.iter().take(conditions) {
                let _ = writeln!(
                    out,
                    "{:>4}  {:>10}  {:>6}  {:>11}  {:>8}    {}",
                    "",
                    duration(c.nanos),
                    "",
                    c.evaluations,
                    per(c.nanos, c.evaluations),
                    shorten(&c.text, 120)
                );
            }
        }
        if self.rules.len() > top {
            let _ = writeln!(out, "… {} more rules", self.rules.len() - top);
        }
        out
    }
}

fn duration(nanos: u64) -> String {
    if nanos >= 10_000_000 {
        format!("{:.1} ms", nanos as f64 / 1e6)
    } else if nanos >= 10_000 {
        format!("{:.1} µs", nanos as f64 / 1e3)
    } else {
        format!("{nanos} ns")
    }
}

fn share(nanos: u64, total: u64) -> String {
    if total == 0 {
        return "-".into();
    }
    format!("{:.1}%", nanos as f64 * 100.0 / total as f64)
}

fn per(nanos: u64, n: u64) -> String {
    if n == 0 {
        return "-".into();
    }
    (nanos / n).to_string()
}

/// `text` cut to `max` characters (long lists), marked with `…`.
fn shorten(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// What one clock read costs here: the median gap between back-to-back reads.
pub fn clock_read_nanos() -> u64 {
    let mut gaps: Vec<u64> = (0..2001)
        .map(|_| Instant::now())
        .collect::<Vec<_>>()
        .windows(2)
        .map(|w| u64::try_from(w[1].duration_since(w[0]).as_nanos()).unwrap_or(u64::MAX))
        .collect();
    gaps.sort_unstable();
    gaps[gaps.len() / 2]
}

/// One pass of `ruleset` over the capture `open` gives, accounting with `costs`.
fn pass(
    ruleset: Ruleset,
    open: &dyn Fn() -> Result<Box<dyn Source>, SourceError>,
    state: &dyn Fn() -> StateConfig,
    costs: &dyn Fn(&Ruleset) -> RuleCosts,
) -> Result<(Engine, u64), SourceError> {
    let mut engine = Engine::new(ruleset, state(), String::new());
    let accounting = costs(engine.ruleset());
    engine.set_rule_costs_to(accounting);
    let mut source = open()?;
    let stats = engine.run(source.as_mut(), &mut |_| {})?;
    Ok((engine, stats.processed))
}

/// Profiles `ruleset` (loaded with [`vigil_rules::LoadOptions::condition_texts`] to name the
/// comparisons) on the capture `open` reads (called once per pass), with the state
/// configuration `state` gives.
pub fn profile(
    ruleset: Ruleset,
    open: &dyn Fn() -> Result<Box<dyn Source>, SourceError>,
    state: &dyn Fn() -> StateConfig,
) -> Result<Profile, SourceError> {
    let clock = clock_read_nanos();
    let (engine, events) = pass(ruleset, open, state, &|rs| rs.new_costs(1))?;
    let ruleset = engine.ruleset();
    let costs = engine.rule_costs().expect("the pass accounted");
    let evaluations = ruleset.rule_evaluations(costs);
    let mut rules: Vec<(usize, RuleProfile)> = ruleset
        .rules()
        .iter()
        .enumerate()
        .filter(|(i, _)| ruleset.is_enabled(*i))
        .map(|(i, rule)| {
            let n = evaluations[i];
            let profile = RuleProfile {
                rule: rule.name.clone(),
                evaluations: n,
                nanos: costs.nanos()[i].saturating_sub(n.saturating_mul(clock)),
                conditions: Vec::new(),
            };
            (i, profile)
        })
        .collect();
    let (engine, _) = pass(engine.into_ruleset(), open, state, &|rs| {
        rs.new_costs(1).with_conditions()
    })?;
    let ruleset = engine.ruleset();
    for (i, leaf, cost) in engine
        .rule_costs()
        .expect("the pass accounted")
        .conditions()
    {
        let Some((_, rule)) = rules.iter_mut().find(|(r, _)| *r == i) else {
            continue;
        };
        rule.conditions.push(ConditionProfile {
            text: ruleset
                .condition_text(leaf)
                .map_or_else(|| format!("#{leaf}"), str::to_owned),
            evaluations: cost.evaluations,
            nanos: cost
                .nanos
                .saturating_sub(cost.evaluations.saturating_mul(clock)),
        });
    }
    let mut rules: Vec<RuleProfile> = rules.into_iter().map(|(_, r)| r).collect();
    for rule in &mut rules {
        rule.conditions
            .sort_by(|a, b| b.nanos.cmp(&a.nanos).then_with(|| a.text.cmp(&b.text)));
    }
    rules.sort_by(|a, b| b.nanos.cmp(&a.nanos).then_with(|| a.rule.cmp(&b.rule)));
    Ok(Profile {
        events,
        clock_nanos: clock,
        rules,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_capture::ScriptedSource;
    use vigil_event::{table, Event, Param, Snapshot, ThreadInfo};
    use vigil_rules::LoadOptions;

    use crate::{load_rules, RulesText};

    /// A rule whose condition scans a long list with a regex: far costlier per event than
    /// the plain equality of the other rule, on the same events.
    const RULES: &str = "\
- rule: Cheap
  desc: d
  condition: evt.type = openat and proc.name = nothing
  output: o
  priority: INFO
- rule: Costly
  desc: d
  condition: >
    evt.type = openat and fd.name regex '(/[a-z]+)*/x[0-9]+(a|b|c)*q' and proc.name = nothing
  output: o
  priority: INFO
";

    fn load() -> Ruleset {
        let r = load_rules(
            &[RulesText {
                name: "rules.yaml".into(),
                text: RULES.into(),
            }],
            &LoadOptions {
                condition_texts: true,
                ..LoadOptions::default()
            },
        );
        r.ruleset.expect("rules load")
    }

    fn open() -> Result<Box<dyn Source>, SourceError> {
        let snapshot = Snapshot {
            threads: vec![ThreadInfo {
                tid: 1,
                pid: 1,
                comm: b"cat".to_vec(),
                ..ThreadInfo::default()
            }],
            ..Snapshot::default()
        };
        let etype = table::by_name("openat").expect("openat");
        let events = (0..2000)
            .map(|n| Event {
                num: n + 1,
                ts: n + 1,
                tid: 1,
                pid: 1,
                etype,
                res: 3,
                params: vec![
                    Param::Int(-100),
                    Param::Bytes(
                        format!("/usr/share/lib/some/deep/path/x{n}aabbccaabbcc").into_bytes(),
                    ),
                    Param::Uint(0),
                ],
                truncated: 0,
                cpu: None,
            })
            .collect();
        Ok(Box::new(ScriptedSource::new(snapshot, events)))
    }

    #[test]
    fn the_costliest_rule_and_condition_come_first() {
        let profile = profile(load(), &open, &StateConfig::default).expect("profiles");
        assert_eq!(profile.events, 2000);
        let names: Vec<&str> = profile.rules.iter().map(|r| r.rule.as_str()).collect();
        assert_eq!(names, ["Costly", "Cheap"], "{profile:?}");
        let costly = &profile.rules[0];
        assert_eq!(costly.evaluations, 2000);
        assert_eq!(profile.rules[1].evaluations, 2000);
        assert!(costly.nanos > profile.rules[1].nanos);
        // Its comparisons: the regex costliest; `proc.name = nothing` is never reached (the
        // regex fails first); evt.type is a bit test, not a comparison.
        let first = &costly.conditions[0];
        assert!(first.text.starts_with("fd.name regex"), "{costly:?}");
        assert_eq!(first.evaluations, 2000);
        assert_eq!(costly.conditions.len(), 1, "{costly:?}");
        let text = profile.to_text(10, 3);
        let costly_line = text.lines().position(|l| l.ends_with("  Costly"));
        let cheap_line = text.lines().position(|l| l.ends_with("  Cheap"));
        assert!(costly_line < cheap_line && costly_line.is_some(), "{text}");
        assert!(text.contains("fd.name regex"), "{text}");
        assert!(
            text.starts_with("2000 events, 2 rules evaluated 4000 times"),
            "{text}"
        );
    }
}

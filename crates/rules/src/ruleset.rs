//! The compiled ruleset: rules in load order, an index from event type to the enabled rules
//! that can match it, rule selection (Falco's `rules:` enable/disable config), a priority
//! threshold and `rule_matching`.
//!
//! Evaluation visits only the rules indexed under the event's type, in load order, and does
//! not allocate once `out` and the [`EvalCtx`] have grown to their working size (owned values
//! an extractor computes, such as rendered strings, are the extractor's allocations).

use crate::eval::{EvalCtx, EventCtx, FieldSlots, Filter};
use crate::priority::Priority;
use crate::template::Template;
use vigil_fields::{Extract, FieldRef};

/// One compiled rule.
#[derive(Debug)]
pub struct Rule {
    pub name: String,
    pub desc: String,
    pub priority: Priority,
    pub tags: Vec<String>,
    /// Always `syscall` today: rules of other sources are skipped at load.
    pub source: String,
    /// Enabled in the rules files (before [`Ruleset::select`]).
    pub enabled: bool,
    pub output: Template,
    pub capture: bool,
    pub capture_duration: Option<u64>,
    /// Where the rule was (last) defined.
    pub file: String,
    pub line: u32,
    pub col: u32,
    pub(crate) filter: Filter,
    /// Event types the condition can match; `None` for all.
    pub(crate) event_types: Option<Vec<u16>>,
}

impl Rule {
    /// The compiled condition.
    pub fn filter(&self) -> &Filter {
        &self.filter
    }

    /// The event type ids the condition can match, ascending; `None` when unrestricted.
    pub fn event_types(&self) -> Option<&[u16]> {
        self.event_types.as_deref()
    }
}

/// Falco's `rule_matching`: stop at the first matching rule, or report every match.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum RuleMatching {
    #[default]
    First,
    All,
}

/// What one selection entry matches: a rule name or a tag, with `*` wildcards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectionTarget {
    Rule(String),
    Tag(String),
}

/// One entry of Falco's `rules:` configuration (`- enable: {rule: "…"}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectionEntry {
    pub enable: bool,
    pub target: SelectionTarget,
}

/// An ordered rule selection; later entries win.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selection {
    pub entries: Vec<SelectionEntry>,
}

impl Selection {
    pub fn enable_rule(mut self, pattern: &str) -> Self {
        self.entries.push(SelectionEntry {
            enable: true,
            target: SelectionTarget::Rule(pattern.to_string()),
        });
        self
    }
    pub fn disable_rule(mut self, pattern: &str) -> Self {
        self.entries.push(SelectionEntry {
            enable: false,
            target: SelectionTarget::Rule(pattern.to_string()),
        });
        self
    }
    pub fn enable_tag(mut self, pattern: &str) -> Self {
        self.entries.push(SelectionEntry {
            enable: true,
            target: SelectionTarget::Tag(pattern.to_string()),
        });
        self
    }
    pub fn disable_tag(mut self, pattern: &str) -> Self {
        self.entries.push(SelectionEntry {
            enable: false,
            target: SelectionTarget::Tag(pattern.to_string()),
        });
        self
    }

    /// The selection's verdict for `rule`, starting from `initial`.
    fn apply(&self, rule: &Rule, initial: bool) -> bool {
        let mut on = initial;
        for e in &self.entries {
            let hit = match &e.target {
                SelectionTarget::Rule(p) => wildcard_match(p, &rule.name),
                SelectionTarget::Tag(p) => rule.tags.iter().any(|t| wildcard_match(p, t)),
            };
            if hit {
                on = e.enable;
            }
        }
        on
    }
}

/// Matches `text` against `pattern` where `*` stands for any run of characters (Falco's rule
/// selection wildcards). Iterative with backtracking to the last star: linear-ish, no recursion.
pub fn wildcard_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && p[pi] == t[ti] {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// The event types that enabled rules watch: what drivers should capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterestTypes {
    bits: Vec<bool>,
}

impl InterestTypes {
    /// Whether event type `id` is watched.
    pub fn contains(&self, id: u16) -> bool {
        self.bits.get(usize::from(id)).copied().unwrap_or(false)
    }
    /// The watched ids, ascending.
    pub fn ids(&self) -> impl Iterator<Item = u16> + '_ {
        self.bits
            .iter()
            .enumerate()
            .filter(|(_, &b)| b)
            .filter_map(|(i, _)| u16::try_from(i).ok())
    }
    /// Number of watched types.
    pub fn count(&self) -> usize {
        self.bits.iter().filter(|&&b| b).count()
    }
    /// Whether every event type is watched (some enabled rule is unrestricted).
    pub fn is_all(&self) -> bool {
        self.bits.iter().all(|&b| b)
    }
    /// One flag per event type id.
    pub fn as_slice(&self) -> &[bool] {
        &self.bits
    }
}

/// A compiled, indexed ruleset.
#[derive(Debug)]
pub struct Ruleset {
    rules: Vec<Rule>,
    slots: FieldSlots,
    n_event_types: usize,
    /// Selection verdict per rule (starts as the files' `enabled`).
    selected: Vec<bool>,
    min_priority: Priority,
    matching: RuleMatching,
    /// Per event type id: enabled rules (ascending indices) that can match it.
    index: Vec<Vec<u32>>,
    /// Enabled rules with no event type restriction, for event type ids out of range.
    unrestricted: Vec<u32>,
}

impl Ruleset {
    pub(crate) fn new(mut rules: Vec<Rule>, slots: FieldSlots, n_event_types: usize) -> Ruleset {
        let mut filters: Vec<&mut Filter> = rules.iter_mut().map(|r| &mut r.filter).collect();
        crate::eval::keep_shared_memos(&mut filters);
        let selected = rules.iter().map(|r| r.enabled).collect();
        let mut rs = Ruleset {
            rules,
            slots,
            n_event_types,
            selected,
            min_priority: Priority::Debug,
            matching: RuleMatching::First,
            index: Vec::new(),
            unrestricted: Vec::new(),
        };
        rs.rebuild_index();
        rs
    }

    /// Every loaded rule, in load order (indices match [`Ruleset::evaluate`]'s output).
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The field slots of the ruleset, for building contexts elsewhere.
    pub fn slots(&self) -> &FieldSlots {
        &self.slots
    }

    /// Applies Falco's `rules:` selection on top of the files' `enabled` values (it replaces
    /// any earlier selection: calling it twice with the same selection is idempotent).
    pub fn select(&mut self, sel: &Selection) {
        for (i, rule) in self.rules.iter().enumerate() {
            self.selected[i] = sel.apply(rule, rule.enabled);
        }
        self.rebuild_index();
    }

    /// Only rules at least as severe as `p` are evaluated (Falco's `priority` config).
    pub fn set_min_priority(&mut self, p: Priority) {
        self.min_priority = p;
        self.rebuild_index();
    }

    pub fn set_rule_matching(&mut self, m: RuleMatching) {
        self.matching = m;
    }

    /// Whether rule `i` is currently evaluated (selected and above the priority threshold).
    pub fn is_enabled(&self, i: usize) -> bool {
        self.selected.get(i).copied().unwrap_or(false)
            && self.rules[i].priority.at_least(self.min_priority)
    }

    /// Number of rules currently evaluated.
    pub fn n_enabled(&self) -> usize {
        (0..self.rules.len())
            .filter(|&i| self.is_enabled(i))
            .count()
    }

    /// A fresh per-event context sized for this ruleset.
    pub fn new_ctx(&self) -> EvalCtx {
        EvalCtx::new(&self.slots)
    }

    /// The enabled rules that can match events of type `event_type`, in load order.
    pub fn candidates(&self, event_type: u16) -> &[u32] {
        self.index
            .get(usize::from(event_type))
            .map_or(&self.unrestricted[..], Vec::as_slice)
    }

    /// The values `field` must take for some enabled rule to match an event of type
    /// `event_type` (the union of every candidate rule's [`Filter::required_values`]), sorted;
    /// `None` when some candidate rule does not constrain the field that way.
    pub fn required_values(
        &self,
        event_type: u16,
        field: &vigil_fields::FieldRef,
    ) -> Option<Vec<i128>> {
        let mut out = Vec::new();
        for &i in self.candidates(event_type) {
            out.extend_from_slice(self.rules[i as usize].filter.required_values(field)?);
        }
        out.sort_unstable();
        out.dedup();
        Some(out)
    }

    /// Whether some enabled rule watching `event_type` may match a failed call of it
    /// ([`Filter::may_match_failure`]).
    pub fn may_match_failure(&self, event_type: u16) -> bool {
        self.candidates(event_type)
            .iter()
            .any(|&i| self.rules[i as usize].filter.may_match_failure(event_type))
    }

    /// Whether some enabled rule watching `event_type` may need to see the syscall's entry:
    /// it may match a failed call (see [`Filter::may_match_failure`]), or its condition or
    /// output reads a field `entry_only` names (what only the entry arguments carry). When
    /// not, a driver that learns of successful calls another way (a kernel-less tracer's exec
    /// event) need not stop at the entry.
    pub fn needs_entry(
        &self,
        event_type: u16,
        entry_only: &dyn Fn(&vigil_fields::FieldRef) -> bool,
    ) -> bool {
        self.candidates(event_type).iter().any(|&i| {
            let rule = &self.rules[i as usize];
            rule.filter.may_match_failure(event_type)
                || rule.filter.fields().iter().any(entry_only)
                || rule.output.field_refs().any(entry_only)
        })
    }

    /// Whether some enabled rule may match `ex` once its syscall has returned, judged at the
    /// syscall's entry ([`Filter::eval_before_result`]): `false` means no result can make
    /// any rule match. Starts a new event of `ctx`.
    pub fn may_match_before_result(&self, ex: &dyn Extract, ctx: &mut EvalCtx) -> bool {
        let mut ev = ctx.event();
        self.candidates(ex.event_type()).iter().any(|&i| {
            self.rules[i as usize]
                .filter
                .eval_before_result(ex, &mut ev)
        })
    }

    /// Appends the indices of matching enabled rules (at most one for
    /// [`RuleMatching::First`], the first in load order), as a new event of `ctx`.
    pub fn evaluate(&self, ex: &dyn Extract, ctx: &mut EvalCtx, out: &mut Vec<usize>) {
        self.evaluate_event(ex, &mut ctx.event(), out);
    }

    /// [`Ruleset::evaluate`] within an event the caller started ([`EvalCtx::event`]), so that
    /// the matching rules' output templates can reuse the values the conditions extracted.
    pub fn evaluate_event<'a>(
        &self,
        ex: &'a dyn Extract,
        ctx: &mut EventCtx<'_, 'a>,
        out: &mut Vec<usize>,
    ) {
        for &i in self.candidates(ex.event_type()) {
            let i = i as usize;
            if self.rules[i].filter.eval(ex, ctx) {
                out.push(i);
                if self.matching == RuleMatching::First {
                    return;
                }
            }
        }
    }

    /// Disables every enabled rule whose condition can never hold given the fields that are
    /// constant for this capture ([`Filter::fold`]: `is_const`, values from `ex`), so it costs
    /// nothing, in the kernel filter either. Returns the indices of the rules disabled.
    pub fn fold_constants(
        &mut self,
        is_const: &dyn Fn(&FieldRef) -> bool,
        ex: &dyn Extract,
    ) -> Vec<usize> {
        let mut ctx = self.new_ctx();
        let mut folded = Vec::new();
        for i in 0..self.rules.len() {
            if !self.is_enabled(i) {
                continue;
            }
            let mut event = ctx.event();
            if self.rules[i].filter.fold(is_const, ex, &mut event) == Some(false) {
                folded.push(i);
            }
        }
        if !folded.is_empty() {
            for &i in &folded {
                self.selected[i] = false;
            }
            self.rebuild_index();
        }
        folded
    }

    /// The event types any enabled rule watches.
    pub fn event_types(&self) -> InterestTypes {
        InterestTypes {
            bits: self.index.iter().map(|rules| !rules.is_empty()).collect(),
        }
    }

    fn rebuild_index(&mut self) {
        let mut index = vec![Vec::new(); self.n_event_types];
        let mut unrestricted = Vec::new();
        for (i, rule) in self.rules.iter().enumerate() {
            if !self.is_enabled(i) {
                continue;
            }
            let Ok(id) = u32::try_from(i) else { break };
            match &rule.event_types {
                None => {
                    unrestricted.push(id);
                    index.iter_mut().for_each(|v: &mut Vec<u32>| v.push(id));
                }
                Some(types) => {
                    for &t in types {
                        if let Some(v) = index.get_mut(usize::from(t)) {
                            v.push(id);
                        }
                    }
                }
            }
        }
        self.index = index;
        self.unrestricted = unrestricted;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_like_falco_selection() {
        assert!(wildcard_match("*", "anything"));
        assert!(wildcard_match("*", ""));
        assert!(wildcard_match("Write below *", "Write below etc"));
        assert!(wildcard_match("*shell*", "Terminal shell in container"));
        assert!(wildcard_match("a*b*c", "aXXbYYc"));
        assert!(!wildcard_match("a*b*c", "aXXbYY"));
        assert!(wildcard_match("exact", "exact"));
        assert!(!wildcard_match("exact", "exactly"));
        assert!(wildcard_match("*ab", "aab"));
    }
}

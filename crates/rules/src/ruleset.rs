//! The compiled ruleset: rules in load order, an index from event type to the enabled rules
//! that can match it, rule selection (Falco's `rules:` enable/disable config), a priority
//! threshold and `rule_matching`.
//!
//! Evaluation visits only the rules indexed under the event's type, in load order, and does
//! not allocate once `out` and the [`EvalCtx`] have grown to their working size (owned values
//! an extractor computes, such as rendered strings, are the extractor's allocations).

use std::time::Instant;

use rustc_hash::FxHashMap;

use crate::eval::{EvalCtx, EventCtx, FieldSlots, Filter, LeafProbe, Node};
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
    /// The text of each comparison by leaf id, when loaded with
    /// [`crate::LoadOptions::condition_texts`] (empty otherwise).
    condition_texts: FxHashMap<u32, Box<str>>,
}

/// What one comparison of one rule cost on the timed events of a [`RuleCosts`] with
/// conditions ([`RuleCosts::with_conditions`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ConditionCost {
    /// Times it was evaluated (not answered by a memo of another rule or a short circuit).
    pub evaluations: u64,
    /// Time spent in those evaluations, field extraction included.
    pub nanos: u64,
}

/// Per-rule evaluation accounting: how many times each rule was evaluated, exactly, and an
/// estimate of the time spent in it, for `/metrics` and `vigil rules profile`.
///
/// Built to cost at most a few per cent of evaluation (`BENCHMARKS.md`, "Per-rule cost"):
/// - **counts without a counter per rule**: one increment per event, on its event type;
///   a rule's evaluations are the events of the types it is indexed under
///   ([`Ruleset::rule_evaluations`]), less the ones a match skipped under
///   `rule_matching: first` (recorded only when a rule matches, which is rare);
/// - **a sampled clock**: one event in `stride` on average (the gaps drawn at random, so a
///   periodic workload cannot hide from it) has each of its candidate rules timed with one
///   clock read per rule; each measurement counts `stride` times, an unbiased estimate of the
///   total. `stride` 1 times every evaluation (a profile);
/// - plain `u64`s owned by the single thread that evaluates: no lock, no atomic. Readers get
///   a copy between batches ([`Ruleset::rule_evaluations`], [`RuleCosts::nanos`]).
///
/// Valid for the ruleset that made it ([`Ruleset::new_costs`]) while its selection does not
/// change.
#[derive(Clone, Debug)]
pub struct RuleCosts {
    /// Events evaluated, per event type id of the index; the last slot for the other ids.
    events_by_type: Vec<u64>,
    /// Per rule: evaluations a match made unnecessary (`rule_matching: first`).
    skipped: Vec<u64>,
    /// Per rule: estimated nanoseconds of evaluation.
    nanos: Vec<u64>,
    stride: u32,
    /// Events until the next timed one (at least 1).
    countdown: u32,
    /// xorshift32 state for the gaps.
    rng: u32,
    /// Per (rule, leaf id): what each comparison cost on the timed events.
    conditions: Option<FxHashMap<(u32, u32), ConditionCost>>,
}

impl RuleCosts {
    /// Also times each comparison of the timed events' rules (a profile: the clock reads
    /// around every comparison make the rules' own times larger, so take those from a run
    /// without).
    pub fn with_conditions(mut self) -> RuleCosts {
        self.conditions = Some(FxHashMap::default());
        self
    }

    /// Estimated nanoseconds of evaluation per rule, indexed like [`Ruleset::rules`].
    pub fn nanos(&self) -> &[u64] {
        &self.nanos
    }

    /// The mean number of events per timed one.
    pub fn stride(&self) -> u32 {
        self.stride
    }

    /// What each (rule index, leaf id) cost, when timed with conditions.
    pub fn conditions(&self) -> impl Iterator<Item = (usize, u32, ConditionCost)> + '_ {
        self.conditions
            .iter()
            .flatten()
            .map(|(&(rule, leaf), &cost)| (rule as usize, leaf, cost))
    }

    /// The next gap, uniform in `1..=2*stride-1` (mean `stride`).
    fn next_gap(&mut self) -> u32 {
        if self.stride <= 1 {
            return 1;
        }
        // xorshift32 (Marsaglia): cheap, and good enough to break periodic patterns.
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        1 + x % (2 * self.stride - 1)
    }

    /// Records that `rules` (the candidates after a match) were not evaluated.
    fn skip(&mut self, rules: &[u32]) {
        for &r in rules {
            if let Some(n) = self.skipped.get_mut(r as usize) {
                *n += 1;
            }
        }
    }
}

/// Times each comparison of one rule into a profile.
struct TimedLeaves<'m> {
    rule: u32,
    costs: &'m mut FxHashMap<(u32, u32), ConditionCost>,
}

impl LeafProbe for TimedLeaves<'_> {
    fn leaf(&mut self, node: &Node, eval: impl FnOnce() -> bool) -> bool {
        let Some(id) = node.leaf_id() else {
            return eval();
        };
        let start = Instant::now();
        let hit = eval();
        let spent = nanos_since(start);
        let cost = self.costs.entry((self.rule, id)).or_default();
        cost.evaluations += 1;
        cost.nanos += spent;
        hit
    }
}

fn nanos_since(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
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
            condition_texts: FxHashMap::default(),
        };
        rs.rebuild_index();
        rs
    }

    pub(crate) fn set_condition_texts(&mut self, texts: FxHashMap<u32, Box<str>>) {
        self.condition_texts = texts;
    }

    /// The text of comparison `leaf` (a leaf id of [`RuleCosts::conditions`]), when the
    /// rules were loaded with [`crate::LoadOptions::condition_texts`].
    pub fn condition_text(&self, leaf: u32) -> Option<&str> {
        self.condition_texts.get(&leaf).map(|t| &**t)
    }

    /// Fresh cost accounting for this ruleset, timing one event in `stride` on average
    /// (`stride` 0 is taken as 1: every event).
    pub fn new_costs(&self, stride: u32) -> RuleCosts {
        let stride = stride.max(1);
        let mut costs = RuleCosts {
            events_by_type: vec![0; self.index.len() + 1],
            skipped: vec![0; self.rules.len()],
            nanos: vec![0; self.rules.len()],
            stride,
            countdown: 1,
            rng: 0x9e37_79b9,
            conditions: None,
        };
        costs.countdown = costs.next_gap();
        costs
    }

    /// How many times each rule was evaluated under `costs` (indexed like
    /// [`Ruleset::rules`]): the events of every type it is indexed under, less the
    /// evaluations a match skipped.
    pub fn rule_evaluations(&self, costs: &RuleCosts) -> Vec<u64> {
        let mut out = vec![0u64; self.rules.len()];
        let n_indexed = self.index.len();
        for (t, &events) in costs.events_by_type.iter().enumerate() {
            if events == 0 {
                continue;
            }
            let rules = if t < n_indexed {
                &self.index[t]
            } else {
                &self.unrestricted
            };
            for &r in rules {
                if let Some(n) = out.get_mut(r as usize) {
                    *n += events;
                }
            }
        }
        for (n, skipped) in out.iter_mut().zip(&costs.skipped) {
            *n = n.saturating_sub(*skipped);
        }
        out
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

    /// A byte string that `field` must contain for any enabled rule watching `event_type` to
    /// match a failed call of it: one that every such rule that may match a failure
    /// ([`Ruleset::may_match_failure`]) requires ([`Filter::required_substrings`]; the
    /// longest when several are shared). `None` when no rule may match a failure (the
    /// failures are unused altogether), or when one of them requires no such string, or when
    /// they share none.
    pub fn failure_substring(
        &self,
        event_type: u16,
        field: &vigil_fields::FieldRef,
    ) -> Option<Vec<u8>> {
        let mut shared: Option<Vec<&[u8]>> = None;
        for &i in self.candidates(event_type) {
            let filter = &self.rules[i as usize].filter;
            if !filter.may_match_failure(event_type) {
                continue;
            }
            let own: Vec<&[u8]> = filter
                .required_substrings(field)
                .filter(|s| !s.is_empty())
                .collect();
            shared = Some(match shared {
                None => own,
                Some(mut common) => {
                    common.retain(|s| own.contains(s));
                    common
                }
            });
        }
        shared?
            .into_iter()
            .max_by_key(|s| s.len())
            .map(<[u8]>::to_vec)
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

    /// [`Ruleset::evaluate_event`] with per-rule accounting into `costs` (see [`RuleCosts`]):
    /// the same matches, in the same order.
    pub fn evaluate_event_costed<'a>(
        &self,
        ex: &'a dyn Extract,
        ctx: &mut EventCtx<'_, 'a>,
        out: &mut Vec<usize>,
        costs: &mut RuleCosts,
    ) {
        let event_type = ex.event_type();
        let slot = usize::from(event_type).min(self.index.len());
        if let Some(n) = costs.events_by_type.get_mut(slot) {
            *n += 1;
        }
        costs.countdown -= 1;
        if costs.countdown == 0 {
            costs.countdown = costs.next_gap();
            self.evaluate_timed(ex, ctx, out, costs);
            return;
        }
        let candidates = self.candidates(event_type);
        for (k, &i) in candidates.iter().enumerate() {
            let i = i as usize;
            if self.rules[i].filter.eval(ex, ctx) {
                out.push(i);
                if self.matching == RuleMatching::First {
                    costs.skip(&candidates[k + 1..]);
                    return;
                }
            }
        }
    }

    /// The timed evaluation of one event: one clock read before the candidates and one after
    /// each, each rule's time weighted by the stride.
    fn evaluate_timed<'a>(
        &self,
        ex: &'a dyn Extract,
        ctx: &mut EventCtx<'_, 'a>,
        out: &mut Vec<usize>,
        costs: &mut RuleCosts,
    ) {
        let weight = u64::from(costs.stride);
        let candidates = self.candidates(ex.event_type());
        let mut start = Instant::now();
        for (k, &i) in candidates.iter().enumerate() {
            let filter = &self.rules[i as usize].filter;
            let hit = match costs.conditions.as_mut() {
                None => filter.eval(ex, ctx),
                Some(map) => filter.eval_probed(
                    ex,
                    ctx,
                    &mut TimedLeaves {
                        rule: i,
                        costs: map,
                    },
                ),
            };
            let now = Instant::now();
            let spent = u64::try_from(now.duration_since(start).as_nanos()).unwrap_or(u64::MAX);
            start = now;
            if let Some(n) = costs.nanos.get_mut(i as usize) {
                *n = n.saturating_add(spent.saturating_mul(weight));
            }
            if hit {
                out.push(i as usize);
                if self.matching == RuleMatching::First {
                    costs.skip(&candidates[k + 1..]);
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
    use crate::testcatalog::{TestCatalog, TestEvent};
    use crate::{LoadOptions, RulesLoader};

    fn load(text: &str, options: &LoadOptions) -> Ruleset {
        let mut loader = RulesLoader::new();
        loader.add_source("rules.yaml", text);
        let r = loader.load(&TestCatalog::new(), options);
        r.ruleset.unwrap_or_else(|| panic!("{:?}", r.diagnostics))
    }

    const COSTED: &str = "\
- rule: a
  desc: d
  condition: evt.type = openat and proc.name = a
  output: o
  priority: INFO
- rule: b
  desc: d
  condition: evt.type in (openat, execve) and proc.name startswith b
  output: o
  priority: INFO
- rule: any open
  desc: d
  condition: evt.type = openat and fd.name contains x
  output: o
  priority: INFO
- rule: exec
  desc: d
  condition: evt.type = execve
  output: o
  priority: INFO
";

    fn events() -> Vec<TestEvent> {
        let ev = |ty: &str, name: &str, file: &str| {
            let mut e = TestEvent::new(ty);
            e.set("proc.name", name).set("fd.name", file);
            e
        };
        let mut out = Vec::new();
        for i in 0..50 {
            out.push(ev("openat", "a", "/x"));
            out.push(ev("openat", "bee", "/x"));
            out.push(ev("openat", "z", "/y"));
            out.push(ev("execve", if i % 2 == 0 { "bee" } else { "z" }, ""));
            out.push(ev("close", "a", ""));
        }
        out
    }

    /// Runs `events` with accounting; returns the matches and the costs.
    fn run(rs: &Ruleset, costs: &mut RuleCosts, events: &[TestEvent]) -> Vec<Vec<usize>> {
        let mut ctx = rs.new_ctx();
        let mut all = Vec::new();
        for e in events {
            let mut out = Vec::new();
            rs.evaluate_event_costed(e, &mut ctx.event(), &mut out, costs);
            all.push(out);
        }
        all
    }

    /// The evaluations of each rule counted one by one, as the plain loop makes them.
    fn counted(rs: &Ruleset, events: &[TestEvent]) -> Vec<u64> {
        let mut ctx = rs.new_ctx();
        let mut n = vec![0u64; rs.rules().len()];
        for e in events {
            let mut ev = ctx.event();
            for &i in rs.candidates(e.event_type()) {
                n[i as usize] += 1;
                if rs.rules()[i as usize].filter().eval(e, &mut ev)
                    && rs.matching == RuleMatching::First
                {
                    break;
                }
            }
        }
        n
    }

    #[test]
    fn costs_count_every_evaluation_exactly_and_change_no_match() {
        for matching in [RuleMatching::First, RuleMatching::All] {
            let mut rs = load(COSTED, &LoadOptions::default());
            rs.set_rule_matching(matching);
            let events = events();
            let mut plain_ctx = rs.new_ctx();
            let plain: Vec<Vec<usize>> = events
                .iter()
                .map(|e| {
                    let mut out = Vec::new();
                    rs.evaluate(e, &mut plain_ctx, &mut out);
                    out
                })
                .collect();
            for stride in [1, 7, 64] {
                let mut costs = rs.new_costs(stride);
                assert_eq!(
                    run(&rs, &mut costs, &events),
                    plain,
                    "{matching:?} {stride}"
                );
                let evaluations = rs.rule_evaluations(&costs);
                assert_eq!(evaluations, counted(&rs, &events), "{matching:?} {stride}");
                // `a` meets every openat; under `first` its 50 matches skip `b` and `any
                // open`, `b`'s 50 on openat skip `any open`, its 25 on execve skip `exec`.
                let want = match matching {
                    RuleMatching::First => [150, 150, 50, 25],
                    RuleMatching::All => [150, 200, 150, 50],
                };
                assert_eq!(evaluations, want, "{matching:?}");
            }
        }
    }

    #[test]
    fn every_evaluated_rule_is_timed_with_stride_one_and_a_sample_estimates_it() {
        let rs = load(COSTED, &LoadOptions::default());
        let events = events();
        let mut costs = rs.new_costs(1);
        run(&rs, &mut costs, &events);
        let nanos = costs.nanos();
        assert!(nanos.iter().all(|&n| n > 0), "{nanos:?}");
        // A rule never evaluated has no time.
        let mut idle = rs.new_costs(1);
        let closes: Vec<TestEvent> = (0..10).map(|_| TestEvent::new("close")).collect();
        run(&rs, &mut idle, &closes);
        assert!(idle.nanos().iter().all(|&n| n == 0), "{:?}", idle.nanos());
        assert!(rs.rule_evaluations(&idle).iter().all(|&n| n == 0));
        // Sampled: fewer timed events, each weighted by the stride.
        let mut sampled = rs.new_costs(4);
        let many: Vec<TestEvent> = (0..40).flat_map(|_| events.clone()).collect();
        run(&rs, &mut sampled, &many);
        assert_eq!(sampled.stride(), 4);
        assert!(sampled.nanos().iter().all(|&n| n > 0 && n % 4 == 0));
    }

    #[test]
    fn conditions_are_timed_by_their_text() {
        let rs = load(
            COSTED,
            &LoadOptions {
                condition_texts: true,
                ..LoadOptions::default()
            },
        );
        let mut costs = rs.new_costs(1).with_conditions();
        run(&rs, &mut costs, &events());
        let mut seen: Vec<(String, String, u64)> = costs
            .conditions()
            .map(|(rule, leaf, cost)| {
                (
                    rs.rules()[rule].name.clone(),
                    rs.condition_text(leaf).expect("a text").to_owned(),
                    cost.evaluations,
                )
            })
            .collect();
        seen.sort();
        assert_eq!(
            seen,
            [
                ("a".into(), "proc.name = a".into(), 150),
                ("any open".into(), "fd.name contains x".into(), 50),
                ("b".into(), "proc.name startswith b".into(), 150),
            ]
        );
        // Without the option, no text is kept.
        let bare = load(COSTED, &LoadOptions::default());
        assert!(costs
            .conditions()
            .all(|(_, leaf, _)| bare.condition_text(leaf).is_none()));
    }

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

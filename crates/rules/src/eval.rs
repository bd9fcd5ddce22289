//! The evaluator: compiled conditions ([`Filter`]), the per-event field cache ([`EvalCtx`]) and
//! the operators and transformers of Falco's condition language.
//!
//! Everything that can be decided at compile time is: literals are parsed into their field's
//! type, lists become hash sets, `pmatch` lists a prefix set, `glob`/`regex` patterns are compiled,
//! `contains` uses a prebuilt substring finder. `evt.type` tests become bit tests on the event's
//! type id. Evaluation short-circuits, and children of `and`/`or` are ordered cheapest first.
//!
//! Semantics (Falco's, documented at falco.org "Condition Syntax"):
//! - a field without a value ([`Extract::extract`] returns `false`) makes every comparison on it
//!   false, so `not` of such a comparison is true and `exists` is false;
//! - a field that yields several values matches when **any** value matches, except `in` on a
//!   list field ([`vigil_fields::FieldDef::is_list`]), which holds when **every** value is in the
//!   set (Falco: "the first set is completely contained in the second set"; an empty list value is
//!   contained in any set); `intersects` holds when any value is in the set. Falco itself rejects
//!   scalar operators on list fields; we apply them per value, which is also Falco's behaviour for
//!   the "any ancestor" fields `proc.aname`/`proc.apid` without an index — a catalog should
//!   therefore declare those `is_list: false` so that `proc.aname in (…)` means "any ancestor";
//! - string operators work on bytes; `icontains`, `iglob` and `tolower`/`toupper` fold ASCII case;
//! - `glob`/`iglob`: `*`, `?` and `[…]` (with `!`/`^` negation and ranges), `\` escapes; the
//!   whole value must match and wildcards match `/` too: libsinsp implements `glob` with
//!   `fnmatch(pattern, value, 0)` (no `FNM_PATHNAME`), whatever its docs say, and the stable
//!   rules rely on it (`directory_traversal`: `fd.nameraw glob '*../*../*'`);
//! - `regex`: Rust `regex` syntax, matched against the **whole** value (Falco uses RE2's full
//!   match), invalid UTF-8 in the value replaced by U+FFFD first;
//! - `pmatch`: true when the value equals an item or lies below it (`/usr/bin` matches
//!   `/usr/bin/ls`, not `/usr/binx`); items may hold glob wildcards, matched per path component.

use crate::ast::{CmpOp, Transformer};
use crate::compile::CompileError;
use aho_corasick::AhoCorasick;
use base64::Engine as _;
use memchr::memmem;
use rustc_hash::{FxHashMap, FxHashSet};
use std::borrow::Cow;
use std::net::IpAddr;
use vigil_fields::{Extract, FieldRef, IpNet, Value};

/// The field references of one ruleset, in slot order. Every condition and template compiled by
/// one [`crate::compile::Compiler`] shares them, so an event extracts each at most once.
#[derive(Clone, Debug, Default)]
pub struct FieldSlots {
    pub(crate) refs: Vec<FieldRef>,
    /// Number of memoized subtrees ([`Node::Memo`]) across the ruleset.
    pub(crate) n_memos: usize,
}

impl FieldSlots {
    /// Number of distinct field references.
    pub fn len(&self) -> usize {
        self.refs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.refs.is_empty()
    }

    /// The distinct field references, in slot order.
    pub fn refs(&self) -> &[FieldRef] {
        &self.refs
    }
}

/// A cached value; strings live in a byte arena.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CVal {
    Str { start: usize, len: usize },
    I64(i64),
    U64(u64),
    Bool(bool),
    Ip(IpAddr),
    Net(IpNet),
}

/// A value as operators see it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum V<'x> {
    Str(&'x [u8]),
    I64(i64),
    U64(u64),
    Bool(bool),
    Ip(IpAddr),
    Net(IpNet),
}

impl V<'_> {
    fn number(self) -> Option<i128> {
        match self {
            V::I64(v) => Some(i128::from(v)),
            V::U64(v) => Some(i128::from(v)),
            _ => None,
        }
    }

    pub(crate) fn to_value(self) -> Value<'static> {
        match self {
            V::Str(s) => Value::Str(Cow::Owned(s.to_vec())),
            V::I64(v) => Value::I64(v),
            V::U64(v) => Value::U64(v),
            V::Bool(v) => Value::Bool(v),
            V::Ip(v) => Value::Ip(v),
            V::Net(v) => Value::Net(v),
        }
    }
}

/// Where the values of an operand are: the slot cache or the transformer scratch area.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Src {
    Cache(usize, usize),
    Temp(usize, usize),
}

/// A run of values with the arena their strings live in.
#[derive(Clone, Copy)]
pub(crate) struct Vals<'x> {
    vals: &'x [CVal],
    bytes: &'x [u8],
}

impl<'x> Vals<'x> {
    pub(crate) fn iter(self) -> impl Iterator<Item = V<'x>> {
        self.vals.iter().map(move |v| match *v {
            CVal::Str { start, len } => V::Str(&self.bytes[start..start + len]),
            CVal::I64(v) => V::I64(v),
            CVal::U64(v) => V::U64(v),
            CVal::Bool(v) => V::Bool(v),
            CVal::Ip(v) => V::Ip(v),
            CVal::Net(v) => V::Net(v),
        })
    }
}

/// A resolved operand: a field slot and the transformers to apply, innermost first.
#[derive(Clone, Debug)]
pub(crate) struct COperand {
    pub slot: u32,
    pub field: FieldRef,
    /// `(transformer, aggregate)`: `aggregate` is set for `len` applied to a whole list.
    pub transformers: Box<[(Transformer, bool)]>,
}

const MISSING: usize = usize::MAX;

/// Keep arenas from holding on to memory after one huge event.
const ARENA_KEEP: usize = 1 << 20;

/// The per-event evaluation state: a cache of extracted field values, so that each field slot is
/// extracted at most once per event across all filters and templates of a ruleset.
///
/// Call [`EvalCtx::reset`] before evaluating the filters of each new event. Steady-state
/// evaluation does not allocate: the cache and scratch buffers keep their capacity.
#[derive(Debug)]
pub struct EvalCtx {
    generation: u32,
    fetched: Vec<u32>,
    /// Per memoized subtree: the generation its result was computed in, and the result.
    memo: Vec<(u32, bool)>,
    ranges: Vec<(usize, usize)>,
    vals: Vec<CVal>,
    bytes: Vec<u8>,
    recv: Vec<Value<'static>>,
    tvals: Vec<CVal>,
    tbytes: Vec<u8>,
    scratch: Vec<u8>,
}

/// Reuses a vector's allocation for values of another lifetime (empty vector in, empty vector
/// out; the standard library collects in place for same-layout items).
#[allow(clippy::unnecessary_filter_map)] // `filter` cannot change the item's lifetime
fn recycle<'a, 'b>(mut v: Vec<Value<'a>>) -> Vec<Value<'b>> {
    v.clear();
    v.into_iter().filter_map(|_| None).collect()
}

impl EvalCtx {
    pub fn new(slots: &FieldSlots) -> Self {
        let n = slots.len();
        EvalCtx {
            generation: 1,
            fetched: vec![0; n],
            memo: vec![(0, false); slots.n_memos],
            ranges: vec![(MISSING, MISSING); n],
            vals: Vec::new(),
            bytes: Vec::new(),
            recv: Vec::new(),
            tvals: Vec::new(),
            tbytes: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Forgets the cached values of the previous event.
    pub fn reset(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.fetched.iter_mut().for_each(|g| *g = 0);
            self.memo.iter_mut().for_each(|m| m.0 = 0);
            self.generation = 1;
        }
        self.vals.clear();
        self.bytes.clear();
        if self.bytes.capacity() > ARENA_KEEP {
            self.bytes.shrink_to(ARENA_KEEP);
        }
        self.begin_temp();
    }

    /// Starts a comparison: transformer output of the previous one is no longer needed.
    pub(crate) fn begin_temp(&mut self) {
        self.tvals.clear();
        self.tbytes.clear();
        if self.tbytes.capacity() > ARENA_KEEP {
            self.tbytes.shrink_to(ARENA_KEEP);
        }
    }

    /// The cached range of a slot's values; extracts on the first use in an event.
    #[inline]
    fn fetch(&mut self, ex: &dyn Extract, slot: u32, field: &FieldRef) -> Option<(usize, usize)> {
        let i = slot as usize;
        let (start, end) = match self.fetched.get(i) {
            Some(&g) if g == self.generation => self.ranges[i],
            _ => self.extract_slot(ex, i, field),
        };
        (start != MISSING).then_some((start, end))
    }

    /// Cache miss: extracts the field's values into the arena (kept out of line so that the
    /// hit path above stays small enough to inline into the evaluator).
    #[inline(never)]
    fn extract_slot(&mut self, ex: &dyn Extract, i: usize, field: &FieldRef) -> (usize, usize) {
        if i >= self.fetched.len() {
            // A filter compiled against more slots than this context was built for.
            self.fetched.resize(i + 1, 0);
            self.ranges.resize(i + 1, (MISSING, MISSING));
        }
        self.fetched[i] = self.generation;
        let mut recv: Vec<Value<'_>> = recycle(std::mem::take(&mut self.recv));
        let start = self.vals.len();
        if ex.extract(field, &mut recv) {
            for value in recv.drain(..) {
                let cval = match value {
                    Value::Str(s) => {
                        let start = self.bytes.len();
                        self.bytes.extend_from_slice(&s);
                        CVal::Str {
                            start,
                            len: s.len(),
                        }
                    }
                    Value::I64(v) => CVal::I64(v),
                    Value::U64(v) => CVal::U64(v),
                    Value::Bool(v) => CVal::Bool(v),
                    Value::Ip(v) => CVal::Ip(v),
                    Value::Net(v) => CVal::Net(v),
                };
                self.vals.push(cval);
            }
            self.ranges[i] = (start, self.vals.len());
        } else {
            self.ranges[i] = (MISSING, MISSING);
        }
        self.recv = recycle(recv);
        self.ranges[i]
    }

    /// The values of an operand (field, then transformers), or `None` when the field has none.
    #[inline]
    pub(crate) fn load(&mut self, ex: &dyn Extract, op: &COperand) -> Option<Src> {
        let (start, end) = self.fetch(ex, op.slot, &op.field)?;
        let mut src = Src::Cache(start, end);
        for &(t, aggregate) in op.transformers.iter() {
            src = self.apply(t, aggregate, src);
        }
        Some(src)
    }

    #[inline]
    pub(crate) fn vals(&self, src: Src) -> Vals<'_> {
        match src {
            Src::Cache(s, e) => Vals {
                vals: &self.vals[s..e],
                bytes: &self.bytes,
            },
            Src::Temp(s, e) => Vals {
                vals: &self.tvals[s..e],
                bytes: &self.tbytes,
            },
        }
    }

    /// Applies one transformer to every value of `src`, appending the results to the scratch
    /// area. Values the transformer cannot handle (wrong type, bad base64) are dropped.
    fn apply(&mut self, t: Transformer, aggregate: bool, src: Src) -> Src {
        let out_start = self.tvals.len();
        let (in_start, in_end, from_cache) = match src {
            Src::Cache(s, e) => (s, e, true),
            Src::Temp(s, e) => (s, e, false),
        };
        if aggregate {
            let count = i64::try_from(in_end - in_start).unwrap_or(i64::MAX);
            self.tvals.push(CVal::I64(count));
            return Src::Temp(out_start, self.tvals.len());
        }
        for i in in_start..in_end {
            let v = if from_cache {
                self.vals[i]
            } else {
                self.tvals[i]
            };
            let CVal::Str { start, len } = v else {
                continue;
            };
            // Copy the input to scratch so that output may go to the same arena.
            self.scratch.clear();
            let arena = if from_cache {
                &self.bytes
            } else {
                &self.tbytes
            };
            self.scratch.extend_from_slice(&arena[start..start + len]);
            let input = &self.scratch;
            let out = match t {
                Transformer::Len => CVal::I64(i64::try_from(input.len()).unwrap_or(i64::MAX)),
                Transformer::ToLower | Transformer::ToUpper | Transformer::Basename => {
                    let start = self.tbytes.len();
                    match t {
                        Transformer::ToLower => self
                            .tbytes
                            .extend(input.iter().map(|b| b.to_ascii_lowercase())),
                        Transformer::ToUpper => self
                            .tbytes
                            .extend(input.iter().map(|b| b.to_ascii_uppercase())),
                        _ => {
                            let base = match memchr::memrchr(b'/', input) {
                                Some(p) => &input[p + 1..],
                                None => &input[..],
                            };
                            self.tbytes.extend_from_slice(base);
                        }
                    }
                    CVal::Str {
                        start,
                        len: self.tbytes.len() - start,
                    }
                }
                Transformer::B64 => {
                    let start = self.tbytes.len();
                    let trimmed = input.trim_ascii();
                    if BASE64.decode_vec(trimmed, &mut self.tbytes).is_err() {
                        self.tbytes.truncate(start);
                        continue;
                    }
                    CVal::Str {
                        start,
                        len: self.tbytes.len() - start,
                    }
                }
            };
            self.tvals.push(out);
        }
        Src::Temp(out_start, self.tvals.len())
    }
}

const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// A compiled condition.
#[derive(Debug)]
pub struct Filter {
    pub(crate) root: Node,
    pub(crate) event_types: Option<Vec<u16>>,
    pub(crate) warnings: Vec<CompileError>,
}

impl Filter {
    /// The event type ids this filter can match, ascending; `None` when it is not restricted
    /// by `evt.type` (it may match every type). `Some(vec![])` means it never matches.
    pub fn event_types(&self) -> Option<Vec<u16>> {
        self.event_types.clone()
    }

    /// Non-fatal findings of compilation (`W_UNKNOWN_EVENT_TYPE`: an `evt.type` value the
    /// catalog does not know; the comparison never matches).
    pub fn warnings(&self) -> &[CompileError] {
        &self.warnings
    }

    /// Evaluates the condition for the current event. Call [`EvalCtx::reset`] between events.
    pub fn eval(&self, ex: &dyn Extract, ctx: &mut EvalCtx) -> bool {
        eval_node(&self.root, ex, ctx)
    }
}

/// The evaluation tree.
#[derive(Debug)]
pub(crate) enum Node {
    Const(bool),
    And(Box<[Node]>),
    Or(Box<[Node]>),
    Not(Box<Node>),
    /// The event's type id is in the bit set.
    EvtType(Box<[u64]>),
    Exists(COperand),
    /// `lhs OP literal`: `all` for `in` on a list field.
    Test {
        lhs: COperand,
        test: Test,
        all: bool,
    },
    /// `lhs OP val(rhs)`: true when any pair of values satisfies `op`.
    Fields {
        lhs: COperand,
        op: CmpOp,
        rhs: COperand,
    },
    /// A subtree whose result is computed at most once per event. The compiler gives the same
    /// slot to structurally identical subtrees across all rules of a ruleset (typically one
    /// macro expanded into several rules: `open_read`, `spawned_process and container` …).
    Memo {
        slot: u32,
        inner: Box<Node>,
    },
}

impl Node {
    /// A rough relative cost, used to evaluate cheap children of `and`/`or` first.
    pub(crate) fn cost(&self) -> u32 {
        match self {
            Node::Const(_) => 0,
            Node::EvtType(_) => 1,
            Node::Exists(op) => 2 + op.transformers.len() as u32,
            Node::Test { lhs, test, .. } => test.cost() + 2 * lhs.transformers.len() as u32,
            Node::Fields { .. } => 8,
            Node::Not(inner) | Node::Memo { inner, .. } => inner.cost(),
            Node::And(items) | Node::Or(items) => items
                .iter()
                .map(Node::cost)
                .max()
                .unwrap_or(0)
                .saturating_add(1),
        }
    }
}

/// Unwraps the memo nodes whose slot occurs only once across `filters`: the compiler memoizes
/// every sizeable group because it cannot know which ones later rules will repeat, and a memo
/// that nothing shares only costs a check and a store per event. Iterative (trees may be deep).
pub(crate) fn keep_shared_memos(filters: &mut [&mut Filter]) {
    let mut counts: FxHashMap<u32, u32> = FxHashMap::default();
    for filter in filters.iter() {
        let mut stack: Vec<&Node> = vec![&filter.root];
        while let Some(node) = stack.pop() {
            match node {
                Node::Memo { slot, inner } => {
                    *counts.entry(*slot).or_default() += 1;
                    stack.push(inner);
                }
                Node::And(items) | Node::Or(items) => stack.extend(items.iter()),
                Node::Not(inner) => stack.push(inner),
                _ => {}
            }
        }
    }
    let shared = |slot: &u32| counts.get(slot).is_some_and(|&n| n >= 2);
    for filter in filters.iter_mut() {
        let mut stack: Vec<&mut Node> = vec![&mut filter.root];
        while let Some(node) = stack.pop() {
            while matches!(node, Node::Memo { slot, .. } if !shared(slot)) {
                if let Node::Memo { inner, .. } = std::mem::replace(node, Node::Const(false)) {
                    *node = *inner;
                }
            }
            match node {
                Node::Memo { inner, .. } | Node::Not(inner) => stack.push(inner),
                Node::And(items) | Node::Or(items) => stack.extend(items.iter_mut()),
                _ => {}
            }
        }
    }
}

fn bit_test(bits: &[u64], id: u16) -> bool {
    let id = usize::from(id);
    bits.get(id / 64)
        .is_some_and(|w| w & (1u64 << (id % 64)) != 0)
}

/// Recursion depth is bounded by the compiler ([`crate::compile::MAX_TREE_DEPTH`]); leaves are
/// evaluated in [`eval_leaf`] so that this frame stays small.
fn eval_node(node: &Node, ex: &dyn Extract, ctx: &mut EvalCtx) -> bool {
    match node {
        Node::And(items) => {
            for item in items.iter() {
                if !eval_node(item, ex, ctx) {
                    return false;
                }
            }
            true
        }
        Node::Or(items) => {
            for item in items.iter() {
                if eval_node(item, ex, ctx) {
                    return true;
                }
            }
            false
        }
        Node::Not(inner) => !eval_node(inner, ex, ctx),
        Node::Memo { slot, inner } => {
            let i = *slot as usize;
            if i >= ctx.memo.len() {
                // A filter compiled after this context was built.
                ctx.memo.resize(i + 1, (0, false));
            }
            let (generation, result) = ctx.memo[i];
            if generation == ctx.generation {
                return result;
            }
            let result = eval_node(inner, ex, ctx);
            ctx.memo[i] = (ctx.generation, result);
            result
        }
        leaf => eval_leaf(leaf, ex, ctx),
    }
}

fn eval_leaf(node: &Node, ex: &dyn Extract, ctx: &mut EvalCtx) -> bool {
    match node {
        Node::Const(v) => *v,
        Node::EvtType(bits) => bit_test(bits, ex.event_type()),
        Node::Exists(op) => {
            ctx.begin_temp();
            ctx.load(ex, op).is_some()
        }
        Node::Test { lhs, test, all } => {
            ctx.begin_temp();
            let Some(src) = ctx.load(ex, lhs) else {
                return false;
            };
            let mut values = ctx.vals(src).iter();
            if *all {
                values.all(|v| test.matches(v))
            } else {
                values.any(|v| test.matches(v))
            }
        }
        Node::Fields { lhs, op, rhs } => {
            ctx.begin_temp();
            let Some(l) = ctx.load(ex, lhs) else {
                return false;
            };
            let Some(r) = ctx.load(ex, rhs) else {
                return false;
            };
            let (l, r) = (ctx.vals(l), ctx.vals(r));
            l.iter()
                .any(|a| r.iter().any(|b| compare_values(*op, a, b)))
        }
        Node::And(_) | Node::Or(_) | Node::Not(_) | Node::Memo { .. } => eval_node(node, ex, ctx),
    }
}

/// `a OP b` for two extracted values (`val()` comparisons).
fn compare_values(op: CmpOp, a: V<'_>, b: V<'_>) -> bool {
    if let (Some(x), Some(y)) = (a.number(), b.number()) {
        return match op {
            CmpOp::Eq => x == y,
            CmpOp::Ne => x != y,
            CmpOp::Lt => x < y,
            CmpOp::Le => x <= y,
            CmpOp::Gt => x > y,
            CmpOp::Ge => x >= y,
            _ => false,
        };
    }
    match (a, b) {
        (V::Str(x), V::Str(y)) => match op {
            CmpOp::Eq => x == y,
            CmpOp::Ne => x != y,
            CmpOp::Contains => memmem::find(x, y).is_some(),
            CmpOp::IContains => icontains(x, y),
            CmpOp::StartsWith => x.starts_with(y),
            CmpOp::EndsWith => x.ends_with(y),
            _ => false,
        },
        (V::Bool(x), V::Bool(y)) => match op {
            CmpOp::Eq => x == y,
            CmpOp::Ne => x != y,
            _ => false,
        },
        (V::Ip(x), V::Ip(y)) => match op {
            CmpOp::Eq => x == y,
            CmpOp::Ne => x != y,
            _ => false,
        },
        (V::Net(x), V::Net(y)) => match op {
            CmpOp::Eq => x == y,
            CmpOp::Ne => x != y,
            _ => false,
        },
        _ => false,
    }
}

fn icontains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || hay
            .windows(needle.len())
            .any(|w| w.eq_ignore_ascii_case(needle))
}

/// A test of one value against compiled literal(s).
#[derive(Debug)]
pub(crate) enum Test {
    StrEq(Box<[u8]>),
    StrNe(Box<[u8]>),
    Contains(Box<memmem::Finder<'static>>),
    IContains(AhoCorasick),
    StartsWith(Box<[u8]>),
    EndsWith(Box<[u8]>),
    Glob(Glob),
    Regex(regex::Regex),
    StrSet(StrSet),
    Pmatch(PathSet),
    Num(CmpOp, i128),
    NumSet(FxHashSet<i128>),
    Bool(CmpOp, bool),
    BoolSet(bool, bool),
    IpEq(IpAddr),
    IpNe(IpAddr),
    /// For address fields: the value lies in one of the networks.
    IpIn(Box<[IpNet]>),
    /// For network fields (`fd.net`): the address or network lies in the literal network.
    NetEq(IpNet),
    NetNe(IpNet),
    NetIn(Box<[IpNet]>),
}

impl Test {
    fn cost(&self) -> u32 {
        match self {
            Test::Num(..)
            | Test::NumSet(_)
            | Test::Bool(..)
            | Test::BoolSet(..)
            | Test::IpEq(_)
            | Test::IpNe(_)
            | Test::NetEq(_)
            | Test::NetNe(_) => 3,
            Test::StrEq(_) | Test::StrNe(_) | Test::StartsWith(_) | Test::EndsWith(_) => 4,
            Test::StrSet(_) | Test::IpIn(_) | Test::NetIn(_) => 5,
            Test::Pmatch(_) | Test::Contains(_) | Test::IContains(_) => 6,
            Test::Glob(_) => 7,
            Test::Regex(_) => 10,
        }
    }

    pub(crate) fn matches(&self, v: V<'_>) -> bool {
        match (self, v) {
            (Test::StrEq(want), V::Str(s)) => **want == *s,
            (Test::StrNe(want), V::Str(s)) => **want != *s,
            (Test::Contains(finder), V::Str(s)) => finder.find(s).is_some(),
            (Test::IContains(ac), V::Str(s)) => ac.is_match(s),
            (Test::StartsWith(p), V::Str(s)) => s.starts_with(p),
            (Test::EndsWith(p), V::Str(s)) => s.ends_with(p),
            (Test::Glob(g), V::Str(s)) => g.matches(s),
            (Test::Regex(re), V::Str(s)) => match std::str::from_utf8(s) {
                Ok(text) => re.is_match(text),
                Err(_) => re.is_match(&String::from_utf8_lossy(s)),
            },
            (Test::StrSet(set), V::Str(s)) => set.contains(s),
            (Test::Pmatch(set), V::Str(s)) => set.matches(s),
            (Test::Num(op, want), v) => v.number().is_some_and(|x| match op {
                CmpOp::Eq => x == *want,
                CmpOp::Ne => x != *want,
                CmpOp::Lt => x < *want,
                CmpOp::Le => x <= *want,
                CmpOp::Gt => x > *want,
                CmpOp::Ge => x >= *want,
                _ => false,
            }),
            (Test::NumSet(set), v) => v.number().is_some_and(|x| set.contains(&x)),
            (Test::Bool(op, want), V::Bool(b)) => match op {
                CmpOp::Ne => b != *want,
                _ => b == *want,
            },
            (Test::BoolSet(t, f), V::Bool(b)) => (b && *t) || (!b && *f),
            (Test::IpEq(want), V::Ip(ip)) => ip == *want,
            (Test::IpNe(want), V::Ip(ip)) => ip != *want,
            (Test::IpIn(nets), V::Ip(ip)) => nets.iter().any(|n| n.contains(&ip)),
            (Test::IpIn(nets), V::Net(net)) => nets.iter().any(|n| net_within(&net, n)),
            (Test::NetEq(n), V::Ip(ip)) => n.contains(&ip),
            (Test::NetEq(n), V::Net(net)) => net_within(&net, n),
            (Test::NetNe(n), V::Ip(ip)) => !n.contains(&ip),
            (Test::NetNe(n), V::Net(net)) => !net_within(&net, n),
            (Test::NetIn(nets), V::Ip(ip)) => nets.iter().any(|n| n.contains(&ip)),
            (Test::NetIn(nets), V::Net(net)) => nets.iter().any(|n| net_within(&net, n)),
            _ => false,
        }
    }
}

/// Whether network `inner` lies within `outer`.
fn net_within(inner: &IpNet, outer: &IpNet) -> bool {
    inner.prefix_len >= outer.prefix_len && outer.contains(&inner.addr)
}

/// A compiled shell glob over bytes.
#[derive(Debug, Clone)]
pub(crate) struct Glob {
    tokens: Box<[GlobToken]>,
    case_insensitive: bool,
}

#[derive(Debug, Clone)]
enum GlobToken {
    Byte(u8),
    Any,
    Star,
    Class {
        negated: bool,
        ranges: Box<[(u8, u8)]>,
    },
}

impl Glob {
    /// Compiles `pattern`; `Err` names the problem (an unclosed `[`).
    pub(crate) fn new(pattern: &[u8], case_insensitive: bool) -> Result<Glob, String> {
        let fold = |b: u8| {
            if case_insensitive {
                b.to_ascii_lowercase()
            } else {
                b
            }
        };
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < pattern.len() {
            let b = pattern[i];
            i += 1;
            match b {
                b'*' => {
                    if !matches!(tokens.last(), Some(GlobToken::Star)) {
                        tokens.push(GlobToken::Star);
                    }
                }
                b'?' => tokens.push(GlobToken::Any),
                b'\\' => {
                    let lit = pattern.get(i).copied().unwrap_or(b'\\');
                    i = (i + 1).min(pattern.len());
                    tokens.push(GlobToken::Byte(fold(lit)));
                }
                b'[' => {
                    let open = i - 1;
                    let mut negated = false;
                    if matches!(pattern.get(i), Some(b'!' | b'^')) {
                        negated = true;
                        i += 1;
                    }
                    let mut ranges = Vec::new();
                    let mut first = true;
                    loop {
                        let Some(&c) = pattern.get(i) else {
                            return Err(format!("unclosed `[` at byte {open} of the glob"));
                        };
                        if c == b']' && !first {
                            i += 1;
                            break;
                        }
                        first = false;
                        let lo = if c == b'\\' && i + 1 < pattern.len() {
                            i += 1;
                            pattern[i]
                        } else {
                            c
                        };
                        i += 1;
                        if pattern.get(i) == Some(&b'-')
                            && pattern.get(i + 1).is_some_and(|&h| h != b']')
                        {
                            let hi = pattern[i + 1];
                            i += 2;
                            ranges.push((lo.min(hi), lo.max(hi)));
                        } else {
                            ranges.push((lo, lo));
                        }
                    }
                    tokens.push(GlobToken::Class {
                        negated,
                        ranges: ranges.into_boxed_slice(),
                    });
                }
                _ => tokens.push(GlobToken::Byte(fold(b))),
            }
        }
        Ok(Glob {
            tokens: tokens.into_boxed_slice(),
            case_insensitive,
        })
    }

    fn token_matches(&self, token: &GlobToken, c: u8) -> bool {
        match token {
            GlobToken::Byte(b) => {
                if self.case_insensitive {
                    c.to_ascii_lowercase() == *b
                } else {
                    c == *b
                }
            }
            GlobToken::Any => true,
            GlobToken::Class { negated, ranges } => {
                let in_class = |x: u8| ranges.iter().any(|&(lo, hi)| lo <= x && x <= hi);
                let hit = in_class(c)
                    || (self.case_insensitive
                        && (in_class(c.to_ascii_lowercase()) || in_class(c.to_ascii_uppercase())));
                hit != *negated
            }
            GlobToken::Star => false,
        }
    }

    /// Whether the whole of `text` matches. One backtracking point (the last `*`) suffices for
    /// patterns whose only variable-length token is `*`.
    pub(crate) fn matches(&self, text: &[u8]) -> bool {
        let (mut p, mut t) = (0usize, 0usize);
        let mut star: Option<(usize, usize)> = None;
        while t < text.len() {
            match self.tokens.get(p) {
                Some(GlobToken::Star) => {
                    star = Some((p, t));
                    p += 1;
                }
                Some(token) if self.token_matches(token, text[t]) => {
                    p += 1;
                    t += 1;
                }
                _ => match star {
                    Some((sp, st)) => {
                        star = Some((sp, st + 1));
                        p = sp + 1;
                        t = st + 1;
                    }
                    _ => return false,
                },
            }
        }
        self.tokens[p..]
            .iter()
            .all(|tok| matches!(tok, GlobToken::Star))
    }
}

/// A set of byte strings that rejects most non-members by length before hashing.
#[derive(Debug, Default)]
pub(crate) struct StrSet {
    items: FxHashSet<Box<[u8]>>,
    /// Bit `n` is set when an item is `n` bytes long (`n < 128`).
    short_lens: u128,
    /// Whether some item is 128 bytes or longer.
    has_long: bool,
}

impl StrSet {
    pub(crate) fn insert(&mut self, item: &[u8]) {
        match item.len() {
            n if n < 128 => self.short_lens |= 1u128 << n,
            _ => self.has_long = true,
        }
        self.items.insert(item.into());
    }

    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    #[inline]
    pub(crate) fn contains(&self, value: &[u8]) -> bool {
        let possible = match value.len() {
            n if n < 128 => self.short_lens & (1u128 << n) != 0,
            _ => self.has_long,
        };
        possible && self.items.contains(value)
    }
}

impl<'i> FromIterator<&'i [u8]> for StrSet {
    fn from_iter<T: IntoIterator<Item = &'i [u8]>>(iter: T) -> Self {
        let mut set = StrSet::default();
        iter.into_iter().for_each(|item| set.insert(item));
        set
    }
}

/// The item set of a `pmatch` operator.
#[derive(Debug, Default)]
pub(crate) struct PathSet {
    exact: StrSet,
    /// `/` is an item: every absolute path matches.
    root: bool,
    /// Items with wildcards, as per-component globs.
    globs: Vec<Box<[Glob]>>,
}

impl PathSet {
    pub(crate) fn new<'i>(items: impl IntoIterator<Item = &'i [u8]>) -> Result<PathSet, String> {
        let mut set = PathSet::default();
        for item in items {
            let mut item = item;
            while item.len() > 1 && item.ends_with(b"/") {
                item = &item[..item.len() - 1];
            }
            if item == b"/" {
                set.root = true;
            } else if item.iter().any(|b| matches!(b, b'*' | b'?' | b'[')) {
                let comps = item
                    .split(|&b| b == b'/')
                    .map(|c| Glob::new(c, false))
                    .collect::<Result<Vec<_>, _>>()?;
                set.globs.push(comps.into_boxed_slice());
            } else {
                set.exact.insert(item);
            }
        }
        Ok(set)
    }

    pub(crate) fn matches(&self, path: &[u8]) -> bool {
        if self.root && path.starts_with(b"/") {
            return true;
        }
        if !self.exact.is_empty() {
            if self.exact.contains(path) {
                return true;
            }
            for pos in memchr::memchr_iter(b'/', path) {
                if pos > 0 && self.exact.contains(&path[..pos]) {
                    return true;
                }
            }
        }
        self.globs.iter().any(|comps| {
            let mut parts = path.split(|&b| b == b'/');
            comps
                .iter()
                .all(|g| parts.next().is_some_and(|part| g.matches(part)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_values_like_fnmatch_without_pathname() {
        let cases: &[(&str, &str, bool)] = &[
            ("/home/*/.ssh/*", "/home/bob/.ssh/id_rsa", true),
            ("/home/*/.ssh/*", "/home/bob/x/.ssh/id_rsa", true),
            ("/var/*", "/var/run/file.txt", true),
            ("*../*../*", "/var/www/html/../../../etc/passwd", true),
            ("*../*../*", "/var/www/html/../etc/passwd", false),
            ("/home/*/.ssh/*", "/root/.ssh/id_rsa", false),
            ("/var/*", "/var/run", true),
            ("*.txt", "a.txt", true),
            ("*.txt", "a.txt.bak", false),
            ("a?c", "abc", true),
            ("a?c", "a/c", true),
            ("a[/]c", "a/c", true),
            ("[ab]x", "bx", true),
            ("[!ab]x", "bx", false),
            ("[^ab]x", "cx", true),
            ("[a-c]*", "cat", true),
            ("[]]", "]", true),
            ("\\*", "*", true),
            ("\\*", "x", false),
            ("*", "", true),
            ("", "", true),
            ("", "x", false),
            ("**a", "bba", true),
            ("*a*b*c", "xaybzc", true),
            ("*a*b*c", "xaybzcd", false),
        ];
        for (pattern, text, want) in cases {
            let g = Glob::new(pattern.as_bytes(), false).unwrap();
            assert_eq!(g.matches(text.as_bytes()), *want, "{pattern} vs {text}");
        }
        let g = Glob::new(b"*.PEM", true).unwrap();
        assert!(g.matches(b"key.pem"));
        let g = Glob::new(b"[A-C]x", true).unwrap();
        assert!(g.matches(b"bX"));
        assert!(Glob::new(b"[abc", false).is_err());
    }

    #[test]
    fn pmatch_is_a_path_prefix_match() {
        let items: [&[u8]; 4] = [b"/usr/bin", b"/etc/", b"/var/*/*.txt", b"/opt/x"];
        let set = PathSet::new(items).unwrap();
        assert!(set.matches(b"/usr/bin"));
        assert!(set.matches(b"/usr/bin/ls"));
        assert!(!set.matches(b"/usr/binx"));
        assert!(!set.matches(b"/usr"));
        assert!(set.matches(b"/etc"));
        assert!(set.matches(b"/etc/passwd"));
        assert!(set.matches(b"/var/run/a.txt"));
        assert!(set.matches(b"/var/run/a.txt/more"));
        assert!(!set.matches(b"/var/run/a.log"));
        assert!(!set.matches(b"/var/a.txt"));
        let root = PathSet::new([&b"/"[..]]).unwrap();
        assert!(root.matches(b"/anything"));
        assert!(!root.matches(b"relative"));
    }

    #[test]
    fn recycled_vectors_keep_their_allocation() {
        let mut v: Vec<Value<'static>> = Vec::with_capacity(16);
        v.push(Value::I64(1));
        let text = String::from("borrowed");
        let mut w: Vec<Value<'_>> = recycle(v);
        assert!(w.is_empty());
        w.push(Value::Str(Cow::Borrowed(text.as_bytes())));
        let back: Vec<Value<'static>> = recycle(w);
        assert!(back.is_empty());
        assert!(back.capacity() >= 16, "capacity {}", back.capacity());
    }
}

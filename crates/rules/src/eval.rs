//! The evaluator: compiled conditions ([`Filter`]), the per-event field cache ([`EvalCtx`],
//! [`EventCtx`]) and the operators and transformers of Falco's condition language.
//!
//! Everything that can be decided at compile time is: literals are parsed into their field's
//! type, lists become hash sets, `pmatch` lists a prefix set, `glob`/`regex` patterns are compiled,
//! `contains` uses a prebuilt substring finder. `evt.type` tests become bit tests on the event's
//! type id. The condition tree (`Node`) is lowered to a flat program (`Op`s): leaves fused
//! with the short-circuit jumps of their group, shared subtrees memoized per event. Extracted
//! values are cached once per event and slot, with strings borrowed from the event and the state
//! (no copy).
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
//! - `fd.ip`, `fd.port` and `fd.net` stand for both endpoints of a connection
//!   ([`vigil_fields::Catalog::is_endpoint_pair`]): every operator holds when either endpoint
//!   satisfies it, except `!=`, which holds only when no endpoint equals (libsinsp's
//!   `compare_ip`/`compare_port`/`compare_net`), so `fd.ip != 0.0.0.0` excludes a connection to
//!   0.0.0.0; the "any ancestor" fields keep the per-value `!=` (some ancestor differs);
//! - string operators work on bytes; `icontains`, `iglob` and `tolower`/`toupper` fold ASCII case;
//! - `glob`/`iglob`: `*`, `?` and `[…]` (with `!`/`^` negation and ranges), `\` escapes; the
//!   whole value must match and wildcards match `/` too: libsinsp implements `glob` with
//!   `fnmatch(pattern, value, 0)` (no `FNM_PATHNAME`), whatever its docs say, and the stable
//!   rules rely on it (`directory_traversal`: `fd.nameraw glob '*../*../*'`);
//! - `regex`: Rust `regex` syntax, matched against the **whole** value (Falco uses RE2's full
//!   match), invalid UTF-8 in the value replaced by U+FFFD first;
//! - `pmatch`: true when the value equals an item or lies below it (`/usr/bin` matches
//!   `/usr/bin/ls`, not `/usr/binx`); items may hold glob wildcards, matched per path component.

use crate::ast::{CmpOp, Modifier, MultiFn, Transformer};
use crate::diag::CompileError;
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

/// A transformer output (a string or a length); strings live in the scratch byte arena.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CVal {
    Str { start: usize, len: usize },
    I64(i64),
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

impl<'x> V<'x> {
    /// The operator view of an extracted value (strings stay borrowed).
    #[inline(always)]
    fn of(v: &'x Value<'_>) -> V<'x> {
        match v {
            Value::Str(s) => V::Str(s),
            Value::I64(v) => V::I64(*v),
            Value::U64(v) => V::U64(*v),
            Value::Bool(v) => V::Bool(*v),
            Value::Ip(v) => V::Ip(*v),
            Value::Net(v) => V::Net(*v),
        }
    }

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

/// A run of values: extracted ones (borrowed from the event and state), or transformer output
/// with the arena its strings live in.
#[derive(Clone, Copy)]
pub(crate) enum Vals<'x> {
    Cache(&'x [Value<'x>]),
    Temp(&'x [CVal], &'x [u8]),
}

impl<'x> Vals<'x> {
    pub(crate) fn iter(self) -> ValsIter<'x> {
        ValsIter {
            vals: self,
            next: 0,
        }
    }
}

/// The values of a [`Vals`], as operators see them.
pub(crate) struct ValsIter<'x> {
    vals: Vals<'x>,
    next: usize,
}

impl<'x> Iterator for ValsIter<'x> {
    type Item = V<'x>;

    #[inline]
    fn next(&mut self) -> Option<V<'x>> {
        let i = self.next;
        self.next += 1;
        match self.vals {
            Vals::Cache(vals) => vals.get(i).map(V::of),
            Vals::Temp(vals, bytes) => vals.get(i).map(|v| match *v {
                CVal::Str { start, len } => V::Str(bytes.get(start..start + len).unwrap_or(&[])),
                CVal::I64(v) => V::I64(v),
            }),
        }
    }
}

/// A resolved operand: a field slot (or a multivalue transformer) and the transformers to
/// apply, innermost first.
#[derive(Clone, Debug)]
pub(crate) struct COperand {
    pub base: CBase,
    /// `(transformer, aggregate)`: `aggregate` is set for `len` applied to a whole list.
    pub transformers: Box<[(Transformer, bool)]>,
}

/// Where an operand's values come from.
#[derive(Clone, Debug)]
pub(crate) enum CBase {
    Field { slot: u32, field: FieldRef },
    Multi(Box<CMulti>),
}

/// A compiled multivalue transformer (`join`, `concat`, `getopt`).
#[derive(Clone, Debug)]
pub(crate) struct CMulti {
    pub func: MultiFn,
    pub args: Box<[CArg]>,
    /// `getopt(…)[c]`: the option whose value is wanted.
    pub selector: Option<u8>,
}

/// A compiled argument of a multivalue transformer.
#[derive(Clone, Debug)]
pub(crate) enum CArg {
    Operand(COperand),
    Const(Box<[u8]>),
    /// `(a, b …)`: every value of every item, in order; no value if any item has none.
    List(Box<[CArg]>),
}

impl COperand {
    /// The field, when the operand is a field (transformed or not).
    pub(crate) fn plain_field(&self) -> Option<&FieldRef> {
        match &self.base {
            CBase::Field { field, .. } => Some(field),
            CBase::Multi(_) => None,
        }
    }

    /// The slot and field of an untransformed field operand.
    #[inline(always)]
    fn direct(&self) -> Option<(u32, &FieldRef)> {
        match &self.base {
            CBase::Field { slot, field } if self.transformers.is_empty() => Some((*slot, field)),
            _ => None,
        }
    }

    /// Every field the operand reads.
    pub(crate) fn for_each_field<'s>(&'s self, f: &mut dyn FnMut(&'s FieldRef)) {
        match &self.base {
            CBase::Field { field, .. } => f(field),
            CBase::Multi(m) => m.args.iter().for_each(|a| a.for_each_field(f)),
        }
    }

    /// Whether `pred` holds for every field the operand reads.
    pub(crate) fn all_fields(&self, pred: &dyn Fn(&FieldRef) -> bool) -> bool {
        let mut all = true;
        self.for_each_field(&mut |f| all &= pred(f));
        all
    }

    /// Whether `pred` holds for some field the operand reads.
    pub(crate) fn any_field(&self, pred: &dyn Fn(&FieldRef) -> bool) -> bool {
        let mut any = false;
        self.for_each_field(&mut |f| any |= pred(f));
        any
    }

    /// Every field the operand reads, in order.
    pub(crate) fn fields(&self) -> Vec<&FieldRef> {
        let mut out = Vec::new();
        self.for_each_field(&mut |f| out.push(f));
        out
    }

    fn cost(&self) -> u32 {
        let base = match &self.base {
            CBase::Field { .. } => 0,
            CBase::Multi(m) => 8 * (m.args.len() as u32 + 1),
        };
        base + 2 * self.transformers.len() as u32
    }
}

impl CArg {
    fn for_each_field<'s>(&'s self, f: &mut dyn FnMut(&'s FieldRef)) {
        match self {
            CArg::Operand(o) => o.for_each_field(f),
            CArg::Const(_) => {}
            CArg::List(items) => items.iter().for_each(|i| i.for_each_field(f)),
        }
    }
}

const MISSING: u32 = u32::MAX;

/// What the current event knows of one field slot (see [`EvalCtx`]).
#[derive(Clone, Copy, Debug, Default)]
struct SlotState {
    generation: u32,
    start: u32,
    end: u32,
}

/// Keep arenas from holding on to memory after one huge event.
const ARENA_KEEP: usize = 1 << 20;

/// Keep the value cache from holding on to memory after one event with huge list fields.
const VALS_KEEP: usize = 1 << 14;

/// The evaluation state that outlives events: which slots and memos the current event has
/// filled (by generation), the transformer scratch areas, and the allocation of the per-event
/// value cache. [`EvalCtx::event`] starts an event.
///
/// Steady-state evaluation does not allocate: the cache and scratch buffers keep their capacity.
#[derive(Debug)]
pub struct EvalCtx {
    generation: u32,
    /// Per field slot: the generation its values were extracted in, and their range in the
    /// event's value cache (`start == MISSING`: the field has no value).
    slots: Vec<SlotState>,
    /// Per memoized subtree: the generation its result was computed in, and the result.
    memo: Vec<(u32, bool)>,
    /// The value cache's allocation between events.
    spare: Vec<Value<'static>>,
    tvals: Vec<CVal>,
    tbytes: Vec<u8>,
    scratch: Vec<u8>,
}

/// The per-event evaluation state: a cache of extracted field values, so that each field slot is
/// extracted at most once per event across all filters and templates of a ruleset. Extracted
/// strings stay borrowed from the event and the state (`'a`) instead of being copied.
///
/// Made by [`EvalCtx::event`]; dropping it ends the event (its values are forgotten, the
/// allocation goes back to the [`EvalCtx`]).
#[derive(Debug)]
pub struct EventCtx<'c, 'a> {
    ctx: &'c mut EvalCtx,
    vals: Vec<Value<'a>>,
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
            slots: vec![SlotState::default(); n],
            memo: vec![(0, false); slots.n_memos],
            spare: Vec::new(),
            tvals: Vec::new(),
            tbytes: Vec::new(),
            scratch: Vec::new(),
        }
    }

    /// Starts a new event: the values and memos of the previous one are forgotten. The values
    /// extracted during the event borrow from the extractor for `'a`.
    pub fn event<'a>(&mut self) -> EventCtx<'_, 'a> {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.slots.iter_mut().for_each(|s| s.generation = 0);
            self.memo.iter_mut().for_each(|m| m.0 = 0);
            self.generation = 1;
        }
        if self.spare.capacity() > VALS_KEEP {
            self.spare.shrink_to(VALS_KEEP);
        }
        let vals = recycle(std::mem::take(&mut self.spare));
        self.begin_temp();
        EventCtx { ctx: self, vals }
    }

    /// Starts a comparison: transformer output of the previous one is no longer needed.
    pub(crate) fn begin_temp(&mut self) {
        self.tvals.clear();
        self.tbytes.clear();
        if self.tbytes.capacity() > ARENA_KEEP {
            self.tbytes.shrink_to(ARENA_KEEP);
        }
    }
}

impl Drop for EventCtx<'_, '_> {
    fn drop(&mut self) {
        self.ctx.spare = recycle(std::mem::take(&mut self.vals));
    }
}

impl<'a> EventCtx<'_, 'a> {
    /// The cached range of a slot's values; extracts on the first use in an event.
    #[inline]
    pub(crate) fn fetch(
        &mut self,
        ex: &'a dyn Extract,
        slot: u32,
        field: &FieldRef,
    ) -> Option<(usize, usize)> {
        let i = slot as usize;
        let (start, end) = match self.ctx.slots.get(i) {
            Some(s) if s.generation == self.ctx.generation => (s.start, s.end),
            _ => self.extract_slot(ex, i, field),
        };
        (start != MISSING).then_some((start as usize, end as usize))
    }

    /// Cache miss: extracts the field's values into the cache (kept out of line so that the
    /// hit path above stays small enough to inline into the evaluator).
    #[inline(never)]
    fn extract_slot(&mut self, ex: &'a dyn Extract, i: usize, field: &FieldRef) -> (u32, u32) {
        let ctx = &mut *self.ctx;
        if i >= ctx.slots.len() {
            // A filter compiled against more slots than this context was built for.
            ctx.slots.resize(i + 1, SlotState::default());
        }
        let start = self.vals.len();
        let range = if ex.extract(field, &mut self.vals) {
            match (u32::try_from(start), u32::try_from(self.vals.len())) {
                (Ok(s), Ok(e)) if e != MISSING => (s, e),
                // Billions of values in one event: treat the field as missing.
                _ => (MISSING, MISSING),
            }
        } else {
            (MISSING, MISSING)
        };
        if range.0 == MISSING {
            // The contract says "left as it was"; do not trust it.
            self.vals.truncate(start);
        }
        ctx.slots[i] = SlotState {
            generation: ctx.generation,
            start: range.0,
            end: range.1,
        };
        range
    }

    /// The extracted values of a slot range.
    #[inline]
    pub(crate) fn cached(&self, start: usize, end: usize) -> &[Value<'a>] {
        self.vals.get(start..end).unwrap_or(&[])
    }

    /// Starts a comparison that applies transformers.
    pub(crate) fn begin_temp(&mut self) {
        self.ctx.begin_temp();
    }

    /// The values of an operand (field, then transformers), or `None` when the field has none.
    #[inline]
    pub(crate) fn load(&mut self, ex: &'a dyn Extract, op: &COperand) -> Option<Src> {
        let mut src = match &op.base {
            CBase::Field { slot, field } => {
                let (start, end) = self.fetch(ex, *slot, field)?;
                Src::Cache(start, end)
            }
            CBase::Multi(m) => self.multi(ex, m)?,
        };
        for &(t, aggregate) in op.transformers.iter() {
            src = self.apply(t, aggregate, src);
        }
        Some(src)
    }

    /// The bytes of a string in the scratch arena.
    fn temp_str(&self, v: CVal) -> Option<(usize, usize)> {
        match v {
            CVal::Str { start, len } => Some((start, start + len)),
            CVal::I64(_) => None,
        }
    }

    /// Appends the values of `src` to the scratch area as strings (numbers in decimal,
    /// addresses as printed), returning their range in `tvals`.
    fn push_strings(&mut self, src: Src) -> (usize, usize) {
        let out_start = self.ctx.tvals.len();
        let (s, e) = match src {
            Src::Cache(s, e) | Src::Temp(s, e) => (s, e),
        };
        for i in s..e {
            let ctx = &mut *self.ctx;
            let start = ctx.tbytes.len();
            match src {
                Src::Cache(..) => match self.vals.get(i) {
                    Some(Value::Str(b)) => ctx.tbytes.extend_from_slice(b),
                    Some(other) => push_text(V::of(other), &mut ctx.tbytes),
                    None => continue,
                },
                Src::Temp(..) => match ctx.tvals.get(i).copied() {
                    Some(CVal::Str { start: from, len }) => {
                        if from + len <= start {
                            ctx.tbytes.extend_from_within(from..from + len);
                        }
                    }
                    Some(CVal::I64(v)) => push_text(V::I64(v), &mut ctx.tbytes),
                    None => continue,
                },
            }
            let len = ctx.tbytes.len() - start;
            ctx.tvals.push(CVal::Str { start, len });
        }
        (out_start, self.ctx.tvals.len())
    }

    /// The values of one argument as strings in the scratch area (a contiguous range of
    /// `tvals`), or `None` when a field in it has no value (libsinsp: the extraction fails).
    fn arg_strings(&mut self, ex: &'a dyn Extract, arg: &CArg) -> Option<(usize, usize)> {
        match arg {
            CArg::Const(bytes) => {
                let ctx = &mut *self.ctx;
                let start = ctx.tbytes.len();
                ctx.tbytes.extend_from_slice(bytes);
                let at = ctx.tvals.len();
                ctx.tvals.push(CVal::Str {
                    start,
                    len: bytes.len(),
                });
                Some((at, at + 1))
            }
            CArg::Operand(op) => {
                let src = self.load(ex, op)?;
                Some(self.push_strings(src))
            }
            CArg::List(items) => {
                // Items may leave intermediate values between their results: collect the
                // results' ranges first, then copy the entries (not the bytes) together.
                let mut ranges: Vec<(usize, usize)> = Vec::with_capacity(items.len());
                for item in items.iter() {
                    ranges.push(self.arg_strings(ex, item)?);
                }
                let ctx = &mut *self.ctx;
                let at = ctx.tvals.len();
                for (s, e) in ranges {
                    ctx.tvals.extend_from_within(s..e);
                }
                Some((at, ctx.tvals.len()))
            }
        }
    }

    /// Evaluates a multivalue transformer into the scratch area (libsinsp's
    /// `sinsp_filter_multivalue_transformer_{join,concat,getopt}::extract`).
    fn multi(&mut self, ex: &'a dyn Extract, m: &CMulti) -> Option<Src> {
        match m.func {
            MultiFn::Join => {
                let (ss, se) = self.arg_strings(ex, m.args.first()?)?;
                let sep = self.temp_str(*self.ctx.tvals.get(ss).filter(|_| ss < se)?)?;
                let (ls, le) = self.arg_strings(ex, m.args.get(1)?)?;
                let ctx = &mut *self.ctx;
                let start = ctx.tbytes.len();
                for i in ls..le {
                    if let Some(CVal::Str { start: from, len }) = ctx.tvals.get(i).copied() {
                        ctx.tbytes.extend_from_within(from..from + len);
                    }
                    if i + 1 < le {
                        ctx.tbytes.extend_from_within(sep.0..sep.1);
                    }
                }
                Some(self.push_result(start))
            }
            MultiFn::Concat => {
                let mut parts: Vec<(usize, usize)> = Vec::with_capacity(m.args.len());
                for arg in m.args.iter() {
                    let (s, e) = self.arg_strings(ex, arg)?;
                    // The first value of each argument (libsinsp appends `values[0]`).
                    parts.push(self.temp_str(*self.ctx.tvals.get(s).filter(|_| s < e)?)?);
                }
                let ctx = &mut *self.ctx;
                let start = ctx.tbytes.len();
                for (s, e) in parts {
                    ctx.tbytes.extend_from_within(s..e);
                }
                Some(self.push_result(start))
            }
            MultiFn::Getopt => {
                let (os, oe) = self.arg_strings(ex, m.args.get(1)?)?;
                let optstring = self.temp_str(*self.ctx.tvals.get(os).filter(|_| os < oe)?)?;
                let (as_, ae) = self.arg_strings(ex, m.args.first()?)?;
                self.getopt(optstring, (as_, ae), m.selector)
            }
        }
    }

    /// Pushes the bytes from `start` to the end of the arena as one string value.
    fn push_result(&mut self, start: usize) -> Src {
        let ctx = &mut *self.ctx;
        let at = ctx.tvals.len();
        ctx.tvals.push(CVal::Str {
            start,
            len: ctx.tbytes.len() - start,
        });
        Src::Temp(at, at + 1)
    }

    /// getopt(3)'s reading of an argv list, as libsinsp's `getopt` transformer does it: a bare
    /// `--` ends the options, long options (`--x`) are skipped, the first non-option (or `-`)
    /// ends the scan, clusters (`-abc`) expand; an option letter not in the optstring yields
    /// `?`; an option taking a value takes the rest of its token or the next one, an empty
    /// value when there is none. Without a selector: the letters and values in order; with
    /// one: the value (or letter) of the last occurrence of that option, none if absent.
    /// Follows libsinsp's code, not its older unit tests (which expected GNU getopt's
    /// permutation past non-options and `?`/`:` for a missing value).
    fn getopt(
        &mut self,
        optstring: (usize, usize),
        argv: (usize, usize),
        selector: Option<u8>,
    ) -> Option<Src> {
        let ctx = &mut *self.ctx;
        let mut valid = [false; 256];
        let mut takes_arg = [false; 256];
        {
            let opts = ctx.tbytes.get(optstring.0..optstring.1)?;
            let mut i = usize::from(opts.first() == Some(&b':'));
            while i < opts.len() {
                let c = opts[i];
                if c != b':' {
                    valid[usize::from(c)] = true;
                    if opts.get(i + 1) == Some(&b':') {
                        takes_arg[usize::from(c)] = true;
                        i += 1;
                    }
                }
                i += 1;
            }
        }
        // Results as (start, end) ranges of the arena; new text (letters, `?`) is appended.
        let mut results: Vec<(usize, usize)> = Vec::new();
        let mut selected: Option<(usize, usize)> = None;
        let push_text = |tbytes: &mut Vec<u8>, text: &[u8]| {
            let start = tbytes.len();
            tbytes.extend_from_slice(text);
            (start, tbytes.len())
        };
        let mut idx = argv.0;
        while idx < argv.1 {
            let Some((a0, a1)) = ctx.tvals.get(idx).and_then(|v| match *v {
                CVal::Str { start, len } => Some((start, start + len)),
                CVal::I64(_) => None,
            }) else {
                idx += 1;
                continue;
            };
            let arg = ctx.tbytes.get(a0..a1)?;
            if arg == b"--" {
                break;
            }
            if arg.len() > 2 && arg.starts_with(b"--") {
                idx += 1;
                continue;
            }
            if arg.len() < 2 || arg[0] != b'-' {
                break;
            }
            let mut i = 1;
            while i < a1 - a0 {
                let opt = ctx.tbytes[a0 + i];
                if opt == b':' || !valid[usize::from(opt)] {
                    if selector.is_none() {
                        results.push(push_text(&mut ctx.tbytes, b"?"));
                    }
                    i += 1;
                    continue;
                }
                let matches = selector.is_none_or(|s| s == opt);
                if !takes_arg[usize::from(opt)] {
                    if matches {
                        let r = push_text(&mut ctx.tbytes, &[opt]);
                        match selector {
                            Some(_) => selected = Some(r),
                            None => results.push(r),
                        }
                    }
                    i += 1;
                    continue;
                }
                // The value: the rest of this token, or the next token.
                let value = if a0 + i + 1 < a1 {
                    Some((a0 + i + 1, a1))
                } else if idx + 1 < argv.1 {
                    idx += 1;
                    match ctx.tvals.get(idx).copied() {
                        Some(CVal::Str { start, len }) => Some((start, start + len)),
                        _ => Some((0, 0)),
                    }
                } else {
                    None
                };
                if matches {
                    match (selector, value) {
                        (Some(_), Some(v)) => selected = Some(v),
                        (Some(_), None) | (None, None) => {
                            let empty = (ctx.tbytes.len(), ctx.tbytes.len());
                            match selector {
                                Some(_) => selected = Some(empty),
                                None => results.push(empty),
                            }
                        }
                        (None, Some(v)) => {
                            results.push(push_text(&mut ctx.tbytes, &[opt]));
                            results.push(v);
                        }
                    }
                }
                break;
            }
            idx += 1;
        }
        if selector.is_some() {
            results.clear();
            results.push(selected?);
        }
        let at = ctx.tvals.len();
        for (s, e) in results {
            ctx.tvals.push(CVal::Str {
                start: s,
                len: e - s,
            });
        }
        Some(Src::Temp(at, ctx.tvals.len()))
    }

    #[inline]
    pub(crate) fn vals(&self, src: Src) -> Vals<'_> {
        match src {
            Src::Cache(s, e) => Vals::Cache(self.cached(s, e)),
            Src::Temp(s, e) => {
                Vals::Temp(self.ctx.tvals.get(s..e).unwrap_or(&[]), &self.ctx.tbytes)
            }
        }
    }

    /// Applies one transformer to every value of `src`, appending the results to the scratch
    /// area. Values the transformer cannot handle (wrong type, bad base64) are dropped.
    fn apply(&mut self, t: Transformer, aggregate: bool, src: Src) -> Src {
        let ctx = &mut *self.ctx;
        let out_start = ctx.tvals.len();
        let (in_start, in_end, from_cache) = match src {
            Src::Cache(s, e) => (s, e, true),
            Src::Temp(s, e) => (s, e, false),
        };
        if aggregate {
            let count = i64::try_from(in_end - in_start).unwrap_or(i64::MAX);
            ctx.tvals.push(CVal::I64(count));
            return Src::Temp(out_start, ctx.tvals.len());
        }
        for i in in_start..in_end {
            // Copy the input to scratch so that output may go to the same arena.
            ctx.scratch.clear();
            if from_cache {
                match self.vals.get(i) {
                    Some(Value::Str(s)) => ctx.scratch.extend_from_slice(s),
                    _ => continue,
                }
            } else {
                match ctx.tvals.get(i) {
                    Some(&CVal::Str { start, len }) => ctx
                        .scratch
                        .extend_from_slice(ctx.tbytes.get(start..start + len).unwrap_or(&[])),
                    _ => continue,
                }
            }
            let input = &ctx.scratch;
            let out = match t {
                Transformer::Len => CVal::I64(i64::try_from(input.len()).unwrap_or(i64::MAX)),
                Transformer::ToLower | Transformer::ToUpper | Transformer::Basename => {
                    let start = ctx.tbytes.len();
                    match t {
                        Transformer::ToLower => ctx
                            .tbytes
                            .extend(input.iter().map(|b| b.to_ascii_lowercase())),
                        Transformer::ToUpper => ctx
                            .tbytes
                            .extend(input.iter().map(|b| b.to_ascii_uppercase())),
                        _ => {
                            let base = match memchr::memrchr(b'/', input) {
                                Some(p) => &input[p + 1..],
                                None => &input[..],
                            };
                            ctx.tbytes.extend_from_slice(base);
                        }
                    }
                    CVal::Str {
                        start,
                        len: ctx.tbytes.len() - start,
                    }
                }
                Transformer::B64 => {
                    let start = ctx.tbytes.len();
                    let trimmed = input.trim_ascii();
                    if BASE64.decode_vec(trimmed, &mut ctx.tbytes).is_err() {
                        ctx.tbytes.truncate(start);
                        continue;
                    }
                    CVal::Str {
                        start,
                        len: ctx.tbytes.len() - start,
                    }
                }
            };
            ctx.tvals.push(out);
        }
        Src::Temp(out_start, ctx.tvals.len())
    }
}

/// A non-string value as text, the way libsinsp prints it into a multivalue transformer's
/// string arguments.
fn push_text(v: V<'_>, out: &mut Vec<u8>) {
    use std::io::Write as _;
    let _ = match v {
        V::Str(s) => {
            out.extend_from_slice(s);
            Ok(())
        }
        V::I64(n) => write!(out, "{n}"),
        V::U64(n) => write!(out, "{n}"),
        V::Bool(b) => write!(out, "{b}"),
        V::Ip(ip) => write!(out, "{ip}"),
        V::Net(net) => write!(out, "{net}"),
    };
}

const BASE64: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// A compiled condition: the evaluation tree lowered to a flat program of short-circuit jumps.
#[derive(Debug)]
pub struct Filter {
    /// The condition as compiled, before lowering: what [`Filter::fold`] walks (`None` for
    /// a tree too deep to walk recursively; it is then never folded).
    pub(crate) tree: Option<Node>,
    pub(crate) code: Box<[Op]>,
    /// The condition with every test of a result-dependent field
    /// ([`vigil_fields::Catalog::depends_on_result`]) replaced by "could be either": true
    /// where a true test helps the condition match, false under a `not`. `None` when the
    /// condition tests no such field (then it is `code` itself).
    pub(crate) entry_code: Option<Box<[Op]>>,
    /// Necessary conditions of the form `field = N` / `field in (N, …)`: conjuncts of the
    /// top-level `and` (the condition cannot hold unless the field takes one of the values).
    pub(crate) required: Vec<(FieldRef, Box<[i128]>)>,
    /// Necessary conditions of the form `field contains 'S'`: conjuncts of the top-level
    /// `and` (the condition cannot hold unless the field contains `S`).
    pub(crate) required_substrings: Vec<(FieldRef, Box<[u8]>)>,
    pub(crate) event_types: Option<Vec<u16>>,
    /// Bit set of the event types for which the condition may hold on a failed call (one
    /// whose result is an error): clear where a test such as `evt.res = SUCCESS` rules
    /// every failure out.
    pub(crate) failure_types: Box<[u64]>,
    /// Every field the condition reads.
    pub(crate) fields: Vec<FieldRef>,
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

    /// Partial evaluation against fields that are constant for a whole capture (`is_const`;
    /// their values come from `ex`, e.g. the container of a traced workload): `Some(v)` when
    /// the condition is `v` whatever the other fields, `None` when it depends on them. A test
    /// reading any non-constant field (or the event type) is unknown; `and`, `or` and `not`
    /// combine in three-valued logic, so `Some(false)` means no event can ever match.
    pub fn fold<'a>(
        &self,
        is_const: &dyn Fn(&FieldRef) -> bool,
        ex: &'a dyn Extract,
        ctx: &mut EventCtx<'_, 'a>,
    ) -> Option<bool> {
        fold_node(self.tree.as_ref()?, is_const, ex, ctx)
    }

    /// Evaluates the condition for the current event (the values it extracts stay cached in
    /// `ctx` for the other filters and templates of the event).
    pub fn eval<'a>(&self, ex: &'a dyn Extract, ctx: &mut EventCtx<'_, 'a>) -> bool {
        run(&self.code, ex, ctx)
    }

    /// [`Filter::eval`] with each leaf evaluation observed by `probe`.
    pub(crate) fn eval_probed<'a, P: LeafProbe>(
        &self,
        ex: &'a dyn Extract,
        ctx: &mut EventCtx<'_, 'a>,
        probe: &mut P,
    ) -> bool {
        run_with(&self.code, ex, ctx, probe)
    }

    /// Evaluates the condition on a syscall's entry, before its result exists: `false`
    /// means no result can make the condition true (given the arguments and the state the
    /// event shows), `true` that some result may. Exact when the condition tests no
    /// result-dependent field. Uses no memo slot, so it may share `ctx` with nothing else
    /// than other `eval_before_result` calls on the same event.
    pub fn eval_before_result<'a>(&self, ex: &'a dyn Extract, ctx: &mut EventCtx<'_, 'a>) -> bool {
        run(self.entry_code.as_deref().unwrap_or(&self.code), ex, ctx)
    }

    /// The numbers `field` must equal for the condition to hold, when a top-level conjunct
    /// says so (`evt.rawres in (0, 1, 2) and …`; a boolean test `= true` / `= false` gives
    /// 1 / 0); `None` when no conjunct constrains it so.
    /// Lets a driver filter before capture (a seccomp filter on a register).
    pub fn required_values(&self, field: &FieldRef) -> Option<&[i128]> {
        self.required
            .iter()
            .find(|(f, _)| f == field)
            .map(|(_, values)| &values[..])
    }

    /// The byte strings `field` must contain for the condition to hold, as top-level
    /// conjuncts say (`fd.nameraw contains '../' and …`): case-sensitive `contains` tests on
    /// the untransformed field. Lets a driver filter before delivery (a kernel-side search).
    pub fn required_substrings<'s>(
        &'s self,
        field: &'s FieldRef,
    ) -> impl Iterator<Item = &'s [u8]> + 's {
        self.required_substrings
            .iter()
            .filter(move |(f, _)| f == field)
            .map(|(_, s)| &s[..])
    }

    /// Whether the condition may hold for a failed call of `event_type` (`false`: some test
    /// such as `evt.res = SUCCESS`, `evt.rawres >= 0` or `evt.failed = false` excludes
    /// every error on each path that can match the type). Lets a driver skip what it would
    /// only need to see failures.
    pub fn may_match_failure(&self, event_type: u16) -> bool {
        let i = usize::from(event_type);
        self.failure_types
            .get(i / 64)
            .is_some_and(|w| w & (1u64 << (i % 64)) != 0)
    }

    /// The fields the condition reads.
    pub fn fields(&self) -> &[FieldRef] {
        &self.fields
    }

    /// Whether the condition tests a result-dependent field.
    pub fn depends_on_result(&self) -> bool {
        self.entry_code.is_some()
    }
}

/// The evaluation tree.
#[derive(Clone, Debug)]
pub(crate) enum Node {
    Const(bool),
    And(Box<[Node]>),
    Or(Box<[Node]>),
    Not(Box<Node>),
    /// The event's type id is in the bit set.
    EvtType(Box<[u64]>),
    /// `id` (in these three leaves): the leaf's structural key, the same for the same
    /// comparison text in every rule ([`NO_LEAF`] until the compiler sets it); what a
    /// profile ([`crate::ruleset::RuleCosts`]) names a condition by.
    Exists {
        op: COperand,
        id: u32,
    },
    /// `lhs OP literal`: `all` for `in` on a list field.
    Test {
        lhs: COperand,
        test: Test,
        all: bool,
        id: u32,
    },
    /// `lhs OP val(rhs)`: true when any pair of values satisfies `op`; with `all` (`in` on a
    /// list field), every value of `lhs` must be among those of `rhs`.
    Fields {
        lhs: COperand,
        op: CmpOp,
        rhs: COperand,
        all: bool,
        id: u32,
    },
    /// A subtree whose result is computed at most once per event. The compiler gives the same
    /// slot to structurally identical subtrees across all rules of a ruleset (typically one
    /// macro expanded into several rules: `open_read`, `spawned_process and container` …).
    Memo {
        slot: u32,
        inner: Box<Node>,
    },
}

/// The id of a leaf the compiler has not named.
pub(crate) const NO_LEAF: u32 = u32::MAX;

impl Node {
    /// Names a leaf (`Exists`, `Test`, `Fields`) by its structural key; other nodes keep none.
    pub(crate) fn set_leaf_id(&mut self, key: u32) {
        match self {
            Node::Exists { id, .. } | Node::Test { id, .. } | Node::Fields { id, .. } => *id = key,
            _ => {}
        }
    }

    /// The structural key of a named leaf.
    pub(crate) fn leaf_id(&self) -> Option<u32> {
        match self {
            Node::Exists { id, .. } | Node::Test { id, .. } | Node::Fields { id, .. } => {
                (*id != NO_LEAF).then_some(*id)
            }
            _ => None,
        }
    }

    /// A rough relative cost, used to evaluate cheap children of `and`/`or` first.
    pub(crate) fn cost(&self) -> u32 {
        match self {
            Node::Const(_) => 0,
            Node::EvtType(_) => 1,
            Node::Exists { op, .. } => 2 + op.cost() / 2,
            Node::Test { lhs, test, .. } => test.cost() + lhs.cost(),
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

/// One instruction of a lowered condition. The program computes one boolean, the accumulator:
/// a leaf sets it, `and`/`or` become forward jumps that skip the rest of a group once its
/// result is known (short-circuit), `not` flips it. Jump targets are indices into the program;
/// the program's length is "done".
#[derive(Debug)]
pub(crate) enum Op {
    /// Evaluates a leaf node ([`Node::Const`], [`Node::EvtType`], [`Node::Exists`],
    /// [`Node::Test`], [`Node::Fields`]) into the accumulator.
    Leaf(Node),
    /// A leaf followed by its group's short-circuit jump, in one instruction: evaluates `node`,
    /// then jumps to `to` when the result is `when`.
    LeafJump {
        node: Node,
        when: bool,
        to: u32,
    },
    JumpIfFalse(u32),
    JumpIfTrue(u32),
    Not,
    /// When memo `slot` was computed in this event: load it and jump to `end` (just past the
    /// subtree's [`Op::MemoStore`]).
    MemoLoad {
        slot: u32,
        end: u32,
    },
    /// Records the accumulator as memo `slot`'s result for this event.
    MemoStore {
        slot: u32,
    },
}

/// Lowers an evaluation tree to a program. Iterative (an explicit work stack): trees may be as
/// deep as [`crate::compile::MAX_TREE_DEPTH`] and their nodes are moved, not borrowed.
pub(crate) fn lower(root: Node) -> Box<[Op]> {
    enum Work {
        Visit(Node),
        /// After a group's child other than the last: the short-circuit jump.
        Jump {
            is_and: bool,
        },
        /// After a group's last child: point its `n` pending jumps here.
        GroupEnd {
            n: usize,
        },
        Not,
        /// After a memoized subtree: store it, and point the load at `at` past the store.
        MemoEnd {
            at: usize,
            slot: u32,
        },
    }
    let mut code = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut work = vec![Work::Visit(root)];
    while let Some(item) = work.pop() {
        match item {
            Work::Visit(node @ (Node::And(_) | Node::Or(_))) if matches!(&node, Node::And(items) | Node::Or(items) if items.is_empty()) =>
            {
                // Not built by the compiler (it folds empty groups): the neutral element.
                code.push(Op::Leaf(Node::Const(matches!(node, Node::And(_)))));
            }
            Work::Visit(node @ (Node::And(_) | Node::Or(_))) => {
                let is_and = matches!(node, Node::And(_));
                let (Node::And(items) | Node::Or(items)) = node else {
                    continue;
                };
                let n = items.len();
                work.push(Work::GroupEnd { n: n - 1 });
                for (k, item) in items.into_vec().into_iter().enumerate().rev() {
                    if k + 1 < n {
                        work.push(Work::Jump { is_and });
                    }
                    work.push(Work::Visit(item));
                }
            }
            Work::Visit(Node::Not(inner)) => {
                work.push(Work::Not);
                work.push(Work::Visit(*inner));
            }
            Work::Visit(Node::Memo { slot, inner }) => {
                work.push(Work::MemoEnd {
                    at: code.len(),
                    slot,
                });
                code.push(Op::MemoLoad { slot, end: 0 });
                work.push(Work::Visit(*inner));
            }
            Work::Visit(leaf) => code.push(Op::Leaf(leaf)),
            Work::Jump { is_and } => {
                pending.push(code.len());
                code.push(if is_and {
                    Op::JumpIfFalse(0)
                } else {
                    Op::JumpIfTrue(0)
                });
            }
            Work::GroupEnd { n } => {
                let end = target(code.len());
                for at in pending.split_off(pending.len() - n) {
                    if let Some(Op::JumpIfFalse(t) | Op::JumpIfTrue(t)) = code.get_mut(at) {
                        *t = end;
                    }
                }
            }
            Work::Not => code.push(Op::Not),
            Work::MemoEnd { at, slot } => {
                code.push(Op::MemoStore { slot });
                let end = target(code.len());
                if let Some(Op::MemoLoad { end: e, .. }) = code.get_mut(at) {
                    *e = end;
                }
            }
        }
    }
    thread_jumps(&mut code);
    fuse_leaf_jumps(code).into_boxed_slice()
}

/// Removes the instructions flagged in `remove`, retargeting every jump: a target that was
/// removed becomes the next instruction kept.
fn compact(code: Vec<Op>, remove: &[bool]) -> Vec<Op> {
    let mut map = Vec::with_capacity(remove.len() + 1);
    let mut next = 0u32;
    for &r in remove {
        map.push(next);
        next += u32::from(!r);
    }
    map.push(next);
    let mut code: Vec<Op> = code
        .into_iter()
        .zip(remove)
        .filter(|(_, &r)| !r)
        .map(|(op, _)| op)
        .collect();
    for op in code.iter_mut() {
        if let Op::JumpIfFalse(t)
        | Op::JumpIfTrue(t)
        | Op::MemoLoad { end: t, .. }
        | Op::LeafJump { to: t, .. } = op
        {
            *t = map.get(*t as usize).copied().unwrap_or(next);
        }
    }
    code
}

/// Merges each leaf with the jump right after it ([`Op::LeafJump`]), unless something jumps to
/// that jump itself (then it must stay an instruction of its own).
fn fuse_leaf_jumps(code: Vec<Op>) -> Vec<Op> {
    let mut targeted = vec![false; code.len() + 1];
    for op in &code {
        if let Op::JumpIfFalse(t)
        | Op::JumpIfTrue(t)
        | Op::MemoLoad { end: t, .. }
        | Op::LeafJump { to: t, .. } = op
        {
            if let Some(flag) = targeted.get_mut(*t as usize) {
                *flag = true;
            }
        }
    }
    let mut remove = vec![false; code.len()];
    let mut code = code;
    for i in 1..code.len() {
        let (when, to) = match code[i] {
            Op::JumpIfFalse(t) => (false, t),
            Op::JumpIfTrue(t) => (true, t),
            _ => continue,
        };
        if targeted[i] || !matches!(code[i - 1], Op::Leaf(_)) {
            continue;
        }
        let Op::Leaf(node) = std::mem::replace(&mut code[i - 1], Op::Not) else {
            continue;
        };
        code[i - 1] = Op::LeafJump { node, when, to };
        remove[i] = true;
    }
    compact(code, &remove)
}

fn target(index: usize) -> u32 {
    u32::try_from(index).expect("a program is shorter than 2^32 instructions")
}

/// Jump threading: a jump that lands on another jump whose outcome it already knows goes
/// straight to that jump's destination (`a and b or c`: when `a` is false, skip to `c`).
/// Jumps only go forward, so this terminates.
fn thread_jumps(code: &mut [Op]) {
    for i in 0..code.len() {
        let (mut t, acc) = match code[i] {
            Op::JumpIfFalse(t) => (t, false),
            Op::JumpIfTrue(t) => (t, true),
            Op::LeafJump { when, to, .. } => (to, when),
            _ => continue,
        };
        loop {
            t = match code.get(t as usize) {
                Some(Op::JumpIfFalse(u)) if !acc => *u,
                Some(Op::JumpIfTrue(u)) if acc => *u,
                Some(Op::JumpIfFalse(_) | Op::JumpIfTrue(_)) => t + 1,
                _ => break,
            };
        }
        if let Op::JumpIfFalse(old) | Op::JumpIfTrue(old) | Op::LeafJump { to: old, .. } =
            &mut code[i]
        {
            *old = t;
        }
    }
}

/// Removes the memo instructions whose slot occurs only once across `filters`: the compiler
/// memoizes every sizeable group because it cannot know which ones later rules will repeat, and
/// a memo that nothing shares only costs a check and a store per event.
pub(crate) fn keep_shared_memos(filters: &mut [&mut Filter]) {
    let mut counts: FxHashMap<u32, u32> = FxHashMap::default();
    for filter in filters.iter() {
        for op in filter.code.iter() {
            if let Op::MemoLoad { slot, .. } = op {
                *counts.entry(*slot).or_default() += 1;
            }
        }
    }
    let unshared = |slot: &u32| counts.get(slot).is_none_or(|&n| n < 2);
    for filter in filters.iter_mut() {
        let remove: Vec<bool> = filter
            .code
            .iter()
            .map(|op| match op {
                Op::MemoLoad { slot, .. } | Op::MemoStore { slot } => unshared(slot),
                _ => false,
            })
            .collect();
        if !remove.contains(&true) {
            continue;
        }
        let mut code = compact(std::mem::take(&mut filter.code).into_vec(), &remove);
        thread_jumps(&mut code);
        let code = fuse_leaf_jumps(code);
        filter.code = code.into_boxed_slice();
    }
}

fn bit_test(bits: &[u64], id: u16) -> bool {
    let id = usize::from(id);
    bits.get(id / 64)
        .is_some_and(|w| w & (1u64 << (id % 64)) != 0)
}

/// Watches the leaf evaluations of a condition (a profile's per-condition timing). The plain
/// evaluator runs with [`NoProbe`], which compiles to the bare call.
pub(crate) trait LeafProbe {
    /// Evaluates leaf `node` by calling `eval`, observing it.
    fn leaf(&mut self, node: &Node, eval: impl FnOnce() -> bool) -> bool;
}

/// The probe of every ordinary evaluation: nothing observed.
pub(crate) struct NoProbe;

impl LeafProbe for NoProbe {
    #[inline(always)]
    fn leaf(&mut self, _node: &Node, eval: impl FnOnce() -> bool) -> bool {
        eval()
    }
}

/// Runs a lowered condition.
fn run<'a>(code: &[Op], ex: &'a dyn Extract, ctx: &mut EventCtx<'_, 'a>) -> bool {
    run_with(code, ex, ctx, &mut NoProbe)
}

/// Runs a lowered condition, each leaf evaluated through `probe`.
#[inline(always)]
fn run_with<'a, P: LeafProbe>(
    code: &[Op],
    ex: &'a dyn Extract,
    ctx: &mut EventCtx<'_, 'a>,
    probe: &mut P,
) -> bool {
    let mut acc = false;
    let mut pc = 0usize;
    while let Some(op) = code.get(pc) {
        pc += 1;
        match op {
            Op::LeafJump { node, when, to } => {
                acc = probe.leaf(node, || eval_leaf(node, ex, ctx));
                if acc == *when {
                    pc = *to as usize;
                }
            }
            Op::Leaf(node) => acc = probe.leaf(node, || eval_leaf(node, ex, ctx)),
            Op::JumpIfFalse(t) => {
                if !acc {
                    pc = *t as usize;
                }
            }
            Op::JumpIfTrue(t) => {
                if acc {
                    pc = *t as usize;
                }
            }
            Op::Not => acc = !acc,
            Op::MemoLoad { slot, end } => {
                let i = *slot as usize;
                let memo = &mut ctx.ctx.memo;
                if i >= memo.len() {
                    // A filter compiled after this context was built.
                    memo.resize(i + 1, (0, false));
                }
                let (generation, result) = memo[i];
                if generation == ctx.ctx.generation {
                    acc = result;
                    pc = *end as usize;
                }
            }
            Op::MemoStore { slot } => {
                let generation = ctx.ctx.generation;
                if let Some(m) = ctx.ctx.memo.get_mut(*slot as usize) {
                    *m = (generation, acc);
                }
            }
        }
    }
    acc
}

/// [`Filter::fold`] over one node.
fn fold_node<'a>(
    node: &Node,
    is_const: &dyn Fn(&FieldRef) -> bool,
    ex: &'a dyn Extract,
    ctx: &mut EventCtx<'_, 'a>,
) -> Option<bool> {
    let operand_const = |op: &COperand| op.all_fields(is_const);
    match node {
        Node::Const(v) => Some(*v),
        Node::EvtType(_) => None,
        Node::Exists { op, .. } | Node::Test { lhs: op, .. } => {
            operand_const(op).then(|| eval_leaf(node, ex, ctx))
        }
        Node::Fields { lhs, rhs, .. } => {
            (operand_const(lhs) && operand_const(rhs)).then(|| eval_leaf(node, ex, ctx))
        }
        Node::Not(inner) => fold_node(inner, is_const, ex, ctx).map(|v| !v),
        Node::Memo { inner, .. } => fold_node(inner, is_const, ex, ctx),
        Node::And(items) => {
            let mut all_true = true;
            for item in items.iter() {
                match fold_node(item, is_const, ex, ctx) {
                    Some(false) => return Some(false),
                    Some(true) => {}
                    None => all_true = false,
                }
            }
            all_true.then_some(true)
        }
        Node::Or(items) => {
            let mut all_false = true;
            for item in items.iter() {
                match fold_node(item, is_const, ex, ctx) {
                    Some(true) => return Some(true),
                    Some(false) => {}
                    None => all_false = false,
                }
            }
            all_false.then_some(false)
        }
    }
}

#[inline(always)]
fn eval_leaf<'a>(node: &Node, ex: &'a dyn Extract, ctx: &mut EventCtx<'_, 'a>) -> bool {
    match node {
        Node::Const(v) => *v,
        Node::EvtType(bits) => bit_test(bits, ex.event_type()),
        Node::Exists { op, .. } => {
            if let Some((slot, field)) = op.direct() {
                return ctx.fetch(ex, slot, field).is_some();
            }
            ctx.begin_temp();
            ctx.load(ex, op).is_some()
        }
        Node::Test { lhs, test, all, .. } => {
            if let Some((slot, field)) = lhs.direct() {
                // The common case: test the extracted values where they are.
                let Some((start, end)) = ctx.fetch(ex, slot, field) else {
                    return false;
                };
                return match ctx.cached(start, end) {
                    [one] => test.matches(V::of(one)),
                    many if *all => many.iter().all(|v| test.matches(V::of(v))),
                    many => many.iter().any(|v| test.matches(V::of(v))),
                };
            }
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
        Node::Fields {
            lhs, op, rhs, all, ..
        } => {
            ctx.begin_temp();
            let Some(l) = ctx.load(ex, lhs) else {
                return false;
            };
            let Some(r) = ctx.load(ex, rhs) else {
                return false;
            };
            let (l, r) = (ctx.vals(l), ctx.vals(r));
            let hit = |a| r.iter().any(|b| compare_values(*op, a, b));
            if *all {
                l.iter().all(hit)
            } else {
                l.iter().any(hit)
            }
        }
        // Lowering puts only leaves in [`Op::Leaf`].
        Node::And(_) | Node::Or(_) | Node::Not(_) | Node::Memo { .. } => false,
    }
}

/// Whether `ordering` (value against operand) satisfies the ordering operator `op`.
fn ordered(op: CmpOp, ordering: std::cmp::Ordering) -> bool {
    use std::cmp::Ordering::{Greater, Less};
    match op {
        CmpOp::Lt => ordering == Less,
        CmpOp::Le => ordering != Greater,
        CmpOp::Gt => ordering == Greater,
        CmpOp::Ge => ordering != Less,
        _ => false,
    }
}

/// `a OP b` for two extracted values (`val()` comparisons).
fn compare_values(op: CmpOp, a: V<'_>, b: V<'_>) -> bool {
    if let (Some(x), Some(y)) = (a.number(), b.number()) {
        return match op {
            CmpOp::Eq | CmpOp::In | CmpOp::Intersects => x == y,
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
            CmpOp::Eq | CmpOp::In | CmpOp::Intersects => x == y,
            // `x` is `y` or lies below it.
            CmpOp::Pmatch => {
                x.starts_with(y)
                    && (x.len() == y.len() || y.ends_with(b"/") || x.get(y.len()) == Some(&b'/'))
            }
            CmpOp::Ne => x != y,
            CmpOp::Contains => memmem::find(x, y).is_some(),
            CmpOp::IContains => icontains(x, y),
            CmpOp::StartsWith => x.starts_with(y),
            CmpOp::EndsWith => x.ends_with(y),
            CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => ordered(op, x.cmp(y)),
            _ => false,
        },
        (V::Bool(x), V::Bool(y)) => match op {
            CmpOp::Eq | CmpOp::In | CmpOp::Intersects => x == y,
            CmpOp::Ne => x != y,
            _ => false,
        },
        (V::Ip(x), V::Ip(y)) => match op {
            CmpOp::Eq | CmpOp::In | CmpOp::Intersects => x == y,
            CmpOp::Ne => x != y,
            _ => false,
        },
        (V::Net(x), V::Net(y)) => match op {
            CmpOp::Eq | CmpOp::In | CmpOp::Intersects => x == y,
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
#[derive(Clone, Debug)]
pub(crate) enum Test {
    StrEq(Box<[u8]>),
    StrNe(Box<[u8]>),
    /// `<`, `<=`, `>`, `>=` on strings: byte-wise lexicographic order.
    StrCmp(CmpOp, Box<[u8]>),
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
    /// `OP MOD (v1, v2 …)`: the per-item tests combined by the modifier.
    Multi(Modifier, Box<[Test]>),
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
            Test::StrEq(_)
            | Test::StrNe(_)
            | Test::StrCmp(..)
            | Test::StartsWith(_)
            | Test::EndsWith(_) => 4,
            Test::StrSet(_) | Test::IpIn(_) | Test::NetIn(_) => 5,
            Test::Pmatch(_) | Test::Contains(_) | Test::IContains(_) => 6,
            Test::Glob(_) => 7,
            Test::Regex(_) => 10,
            Test::Multi(_, tests) => tests.iter().map(Test::cost).sum::<u32>().max(1),
        }
    }

    #[inline(always)] // once per tested value: the evaluator's innermost step
    pub(crate) fn matches(&self, v: V<'_>) -> bool {
        match (self, v) {
            (Test::StrEq(want), V::Str(s)) => **want == *s,
            (Test::StrNe(want), V::Str(s)) => **want != *s,
            (Test::StrCmp(op, want), V::Str(s)) => ordered(*op, s.cmp(want)),
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
            (Test::Multi(m, tests), v) => m.combine(tests.iter().map(|t| t.matches(v))),
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
#[derive(Clone, Debug, Default)]
pub(crate) struct StrSet {
    items: FxHashSet<Box<[u8]>>,
    /// Bit `n` is set when an item is `n` bytes long (`n < 128`).
    short_lens: u128,
    /// Whether some item is 128 bytes or longer.
    has_long: bool,
}

impl StrSet {
    /// Whether the set holds `item` and nothing else.
    pub(crate) fn is_only(&self, item: &[u8]) -> bool {
        self.items.len() == 1 && self.items.contains(item)
    }

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
#[derive(Clone, Debug, Default)]
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

    /// The tree semantics the lowered program must reproduce.
    fn reference(node: &Node) -> bool {
        match node {
            Node::Const(v) => *v,
            Node::And(items) => items.iter().all(reference),
            Node::Or(items) => items.iter().any(reference),
            Node::Not(inner) | Node::Memo { inner, .. } => {
                !matches!(node, Node::Not(_)) == reference(inner)
            }
            _ => panic!("only constants in these trees"),
        }
    }

    #[test]
    fn lowered_programs_short_circuit_like_the_tree() {
        // Shapes that exercise jump threading (a jump landing on a jump), `not` between jumps,
        // memos inside groups, and empty/single groups; every assignment of the five inputs.
        let shapes: [fn(&[bool; 5]) -> Node; 6] = [
            |x| {
                Node::Or(Box::new([
                    Node::And(Box::new([
                        Node::Const(x[0]),
                        Node::Not(Box::new(Node::Const(x[1]))),
                    ])),
                    Node::And(Box::new([
                        Node::Or(Box::new([Node::Const(x[2]), Node::Const(x[3])])),
                        Node::Const(x[4]),
                    ])),
                ]))
            },
            |x| {
                Node::And(Box::new([
                    Node::Not(Box::new(Node::Or(Box::new([
                        Node::And(Box::new([Node::Const(x[0]), Node::Const(x[1])])),
                        Node::Const(x[2]),
                    ])))),
                    Node::Or(Box::new([
                        Node::Const(x[3]),
                        Node::Not(Box::new(Node::Const(x[4]))),
                    ])),
                ]))
            },
            |x| {
                let shared = || Node::Memo {
                    slot: 0,
                    inner: Box::new(Node::And(Box::new([Node::Const(x[0]), Node::Const(x[1])]))),
                };
                Node::Or(Box::new([
                    Node::And(Box::new([shared(), Node::Const(x[2])])),
                    Node::And(Box::new([Node::Const(x[3]), shared(), Node::Const(x[4])])),
                    Node::Not(Box::new(shared())),
                ]))
            },
            |x| Node::And(Box::new([Node::Or(Box::new([])), Node::Const(x[0])])),
            |x| {
                Node::Or(Box::new([
                    Node::And(Box::new([])),
                    Node::And(Box::new([
                        Node::Const(x[0]),
                        Node::Const(x[1]),
                        Node::Const(x[2]),
                    ])),
                    Node::Or(Box::new([Node::Const(x[3]), Node::Const(x[4])])),
                ]))
            },
            |x| {
                Node::Or(Box::new([
                    Node::And(Box::new([
                        Node::Memo {
                            slot: 1,
                            inner: Box::new(Node::Or(Box::new([
                                Node::Const(x[0]),
                                Node::Const(x[1]),
                                Node::Const(x[2]),
                            ]))),
                        },
                        Node::Not(Box::new(Node::Const(x[3]))),
                    ])),
                    Node::Const(x[4]),
                ]))
            },
        ];
        let ev = crate::testutil::FakeEvent::default();
        let mut ctx = EvalCtx::new(&FieldSlots::default());
        for (k, shape) in shapes.iter().enumerate() {
            for bits in 0u32..32 {
                let x: [bool; 5] = std::array::from_fn(|i| bits & (1 << i) != 0);
                let want = reference(&shape(&x));
                let mut filter = Filter {
                    tree: None,
                    code: lower(shape(&x)),
                    entry_code: None,
                    required: Vec::new(),
                    required_substrings: Vec::new(),
                    event_types: None,
                    failure_types: Box::new([]),
                    fields: Vec::new(),
                    warnings: Vec::new(),
                };
                assert_eq!(
                    filter.eval(&ev, &mut ctx.event()),
                    want,
                    "shape {k}, inputs {x:?}: {:?}",
                    filter.code
                );
                // Without its memos (as for a memo no other rule shares): same result.
                keep_shared_memos(&mut [&mut filter]);
                // Shape 2 repeats its memo, which is then shared and kept.
                assert!(
                    filter
                        .code
                        .iter()
                        .any(|op| matches!(op, Op::LeafJump { .. })),
                    "leaves and jumps are fused: {:?}",
                    filter.code
                );
                assert!(
                    k == 2
                        || !filter
                            .code
                            .iter()
                            .any(|op| matches!(op, Op::MemoLoad { .. } | Op::MemoStore { .. })),
                    "an unshared memo is removed"
                );
                assert_eq!(
                    filter.eval(&ev, &mut ctx.event()),
                    want,
                    "shape {k} without memos, inputs {x:?}: {:?}",
                    filter.code
                );
            }
        }
    }

    #[test]
    fn the_value_cache_keeps_its_allocation_across_events() {
        use crate::compile::Compiler;
        use crate::parser::parse_condition;
        let cat = crate::testutil::FakeCatalog::new();
        let mut compiler = Compiler::new(&cat);
        let filter = compiler
            .compile(&parse_condition("proc.name = bash and fd.num = 3").unwrap())
            .unwrap();
        let mut ctx = EvalCtx::new(compiler.slots());
        let ev = crate::testutil::FakeEvent::default();
        assert!(filter.eval(&ev, &mut ctx.event()));
        assert!(ctx.spare.capacity() >= 2, "the event's values went back");
        let allocation = ctx.spare.as_ptr();
        for _ in 0..3 {
            let mut event = ctx.event();
            assert!(filter.eval(&ev, &mut event));
            assert_eq!(event.vals.len(), 2, "one value per slot");
            drop(event);
            assert_eq!(
                ctx.spare.as_ptr(),
                allocation,
                "no new allocation per event"
            );
        }
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

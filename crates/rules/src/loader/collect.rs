//! The **collect** phase: YAML items → lists, macros and rules, applying `append`, `override`,
//! `enabled` toggles and redefinitions in load order, as Falco's rule collector does.
//!
//! Falco semantics kept here:
//! - items are processed in file order, files in the order they were added;
//! - a later definition replaces an earlier one in place (rule order is kept), in the same
//!   file or another;
//! - `append: true` (legacy, `W_DEPRECATED`) and `override: {key: append|replace}` need an
//!   earlier definition, otherwise `E_UNDEFINED_APPEND` — except `override: {items|condition:
//!   replace}` on a list or macro, which defines it (Falco's reader treats it as a definition);
//!   appended conditions and outputs are joined with a space; an `override` entry for a key
//!   that cannot be overridden is ignored with `W_OVERRIDE_IGNORED`, one for a key the item
//!   does not carry is an error (as in Falco's reader);
//! - `- rule: X` with only `enabled` toggles an existing rule (`W_DEPRECATED`: Falco wants
//!   `override: {enabled: replace}`); `enabled` in an `append: true` entry is ignored;
//! - list and macro names that are not identifiers load with `W_INVALID_NAME`;
//! - exceptions' values may be appended to an existing exception by name.

use rustc_hash::FxHashMap;

use super::text::{Origin, Piece};
use super::yaml::{Kind, Node, Pos};
use super::{Reporter, ENGINE_VERSION};
use crate::ast::{CmpOp, Modifier};
use crate::priority::Priority;

/// A list definition.
#[derive(Clone, Debug)]
pub struct ListDef {
    pub name: String,
    pub items: Vec<String>,
    pub file: usize,
    pub pos: Pos,
}

/// A macro definition (its condition may be several appended pieces).
#[derive(Clone, Debug)]
pub struct MacroDef {
    pub name: String,
    pub condition: Vec<Piece>,
    pub file: usize,
    pub pos: Pos,
}

/// One value of an exception tuple.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExValue {
    Scalar(String),
    List(Vec<String>),
}

/// An exception of a rule.
#[derive(Clone, Debug)]
pub struct ExceptionDef {
    pub name: String,
    pub fields: Vec<String>,
    /// Where each field name is written.
    pub field_pos: Vec<Pos>,
    /// `fields` was a single field name rather than a list (values are then flat).
    pub single: bool,
    /// Each field's operator, with its list modifier (`startswith anyof`) if any.
    pub comps: Vec<(CmpOp, Option<Modifier>)>,
    /// Value tuples with the position of each tuple; for a single field, one-element tuples.
    pub values: Vec<(Vec<ExValue>, Pos)>,
    /// The item had a `values` key (Falco warns when an appended exception has none).
    pub has_values: bool,
    /// The item had a `fields` key. Without one (allowed only when appending to an existing
    /// exception) the values' shape is not known yet: `loose` says, per value, whether it was
    /// written as a sequence (see [`append_exceptions`]).
    pub has_fields: bool,
    pub loose: Vec<bool>,
    pub file: usize,
    pub pos: Pos,
}

/// A rule definition after all appends and overrides.
#[derive(Clone, Debug)]
pub struct RuleDef {
    pub name: String,
    pub condition: Vec<Piece>,
    pub output: Vec<Piece>,
    pub desc: String,
    pub priority: Priority,
    pub tags: Vec<String>,
    pub enabled: bool,
    pub source: String,
    pub exceptions: Vec<ExceptionDef>,
    pub skip_if_unknown_filter: bool,
    pub warn_evttypes: bool,
    pub capture: bool,
    pub capture_duration: Option<u64>,
    pub file: usize,
    pub pos: Pos,
}

/// Definitions by name, in first-definition order.
#[derive(Clone, Debug)]
pub struct Table<T> {
    pub items: Vec<T>,
    index: FxHashMap<String, usize>,
}

impl<T> Default for Table<T> {
    fn default() -> Self {
        Table {
            items: Vec::new(),
            index: FxHashMap::default(),
        }
    }
}

impl<T> Table<T> {
    pub fn get(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// Defines or redefines `name`: a later definition replaces an earlier one in its place,
    /// whether in the same file or an earlier one (Falco's collector does the same).
    fn define(&mut self, name: &str, item: T) {
        match self.index.get(name) {
            Some(&i) => self.items[i] = item,
            None => {
                self.index.insert(name.to_string(), self.items.len());
                self.items.push(item);
            }
        }
    }
}

/// Per-file counts of definitions (not appends or overrides).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub rules: usize,
    pub macros: usize,
    pub lists: usize,
}

/// Everything collected from all files.
#[derive(Clone, Debug, Default)]
pub struct Collected {
    pub lists: Table<ListDef>,
    pub macros: Table<MacroDef>,
    pub rules: Table<RuleDef>,
}

/// What lists and macros share: a name and one body key, which `append` extends and
/// `override: replace` replaces ([`Collected::add_named`]).
trait Named: Sized {
    /// `list` or `macro`.
    const KIND: &'static str;
    /// The body key: `items` or `condition`.
    const BODY: &'static str;
    /// Every key the item may have.
    const KEYS: &'static [&'static str];
    /// Falco's text for an append to an undefined item.
    const NO_PREVIOUS: &'static str;
    type Body;
    fn read(file: usize, node: &Node, name: &str, rep: &mut Reporter) -> Option<Self::Body>;
    fn new(name: String, body: Self::Body, file: usize, pos: Pos) -> Self;
    /// Appends `body`, or replaces the body with it.
    fn update(&mut self, body: Self::Body, append: bool);
    fn table(collected: &mut Collected) -> &mut Table<Self>;
    fn count(counts: &mut Counts) -> &mut usize;
}

impl Named for ListDef {
    const KIND: &'static str = "list";
    const BODY: &'static str = "items";
    const KEYS: &'static [&'static str] = LIST_KEYS;
    const NO_PREVIOUS: &'static str = ERROR_NO_PREVIOUS_LIST;
    type Body = Vec<String>;

    fn read(file: usize, node: &Node, name: &str, rep: &mut Reporter) -> Option<Vec<String>> {
        string_seq(file, node, Self::BODY, name, rep)
    }

    fn new(name: String, items: Vec<String>, file: usize, pos: Pos) -> Self {
        ListDef {
            name,
            items,
            file,
            pos,
        }
    }

    fn update(&mut self, items: Vec<String>, append: bool) {
        if append {
            self.items.extend(items);
        } else {
            self.items = items;
        }
    }

    fn table(collected: &mut Collected) -> &mut Table<Self> {
        &mut collected.lists
    }

    fn count(counts: &mut Counts) -> &mut usize {
        &mut counts.lists
    }
}

impl Named for MacroDef {
    const KIND: &'static str = "macro";
    const BODY: &'static str = "condition";
    const KEYS: &'static [&'static str] = MACRO_KEYS;
    const NO_PREVIOUS: &'static str = ERROR_NO_PREVIOUS_MACRO;
    type Body = Piece;

    fn read(file: usize, node: &Node, name: &str, rep: &mut Reporter) -> Option<Piece> {
        text_piece(file, node, Self::BODY, name, rep)
    }

    fn new(name: String, condition: Piece, file: usize, pos: Pos) -> Self {
        MacroDef {
            name,
            condition: vec![condition],
            file,
            pos,
        }
    }

    fn update(&mut self, condition: Piece, append: bool) {
        if append {
            self.condition.push(condition);
        } else {
            self.condition = vec![condition];
        }
    }

    fn table(collected: &mut Collected) -> &mut Table<Self> {
        &mut collected.macros
    }

    fn count(counts: &mut Counts) -> &mut usize {
        &mut counts.macros
    }
}

const RULE_KEYS: &[&str] = &[
    "rule",
    "condition",
    "output",
    "desc",
    "priority",
    "tags",
    "enabled",
    "source",
    "exceptions",
    "append",
    "override",
    "skip-if-unknown-filter",
    "warn_evttypes",
    "capture",
    "capture_duration",
];
const MACRO_KEYS: &[&str] = &["macro", "condition", "append", "override", "source"];
const LIST_KEYS: &[&str] = &["list", "items", "append", "override"];

/// How a key of an item combines with an existing definition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Define,
    Append,
    Replace,
}

impl Collected {
    /// Collects the items of one file's documents.
    pub fn add_file(
        &mut self,
        file: usize,
        docs: &[Node],
        rep: &mut Reporter,
        counts: &mut Counts,
    ) {
        for doc in docs {
            let Kind::Seq(items) = &doc.kind else {
                rep.error(
                    "E_SCHEMA",
                    file,
                    doc.pos,
                    None,
                    format!(
                        "a rules file must be a sequence of items, found a {}",
                        doc.type_name()
                    ),
                );
                continue;
            };
            for item in items {
                self.add_item(file, item, rep, counts);
            }
        }
    }

    fn add_item(&mut self, file: usize, item: &Node, rep: &mut Reporter, counts: &mut Counts) {
        let Kind::Map(entries) = &item.kind else {
            rep.error(
                "E_SCHEMA",
                file,
                item.pos,
                None,
                format!("an item must be a map, found a {}", item.type_name()),
            );
            return;
        };
        for (k, _) in entries {
            if k.as_str().is_none() {
                rep.error(
                    "E_SCHEMA",
                    file,
                    k.pos,
                    None,
                    "item keys must be strings".into(),
                );
                return;
            }
        }
        const KINDS: [&str; 5] = [
            "rule",
            "macro",
            "list",
            "required_engine_version",
            "required_plugin_versions",
        ];
        let kinds: Vec<&str> = KINDS
            .iter()
            .copied()
            .filter(|k| item.get(k).is_some())
            .collect();
        match kinds.as_slice() {
            ["rule"] => self.add_rule(file, item, rep, counts),
            ["macro"] => self.add_named::<MacroDef>(file, item, rep, counts),
            ["list"] => self.add_named::<ListDef>(file, item, rep, counts),
            ["required_engine_version"] => check_engine_version(file, item, rep),
            ["required_plugin_versions"] => check_plugin_versions(file, item, rep),
            [] => {
                // Falco's reader skips an item of a kind it does not know, with
                // `LOAD_UNKNOWN_ITEM` (`rule_loader_reader.cpp`), so newer files still load.
                let keys: Vec<&str> = entries.iter().filter_map(|(k, _)| k.as_str()).collect();
                rep.warning(
                    "W_UNKNOWN_ITEM",
                    file,
                    item.pos,
                    None,
                    format!(
                        "Unknown top level item (keys `{}`); ignored",
                        keys.join("`, `")
                    ),
                );
            }
            many => rep.error(
                "E_SCHEMA",
                file,
                item.pos,
                None,
                format!("an item must have one kind, found `{}`", many.join("`, `")),
            ),
        }
    }

    /// A list or a macro: defined, or its one body key (`items`, `condition`) appended to or
    /// replaced (`append: true`, `override:`).
    fn add_named<T: Named>(
        &mut self,
        file: usize,
        item: &Node,
        rep: &mut Reporter,
        counts: &mut Counts,
    ) {
        let Some(name) = item_name(file, item, T::KIND, rep) else {
            return;
        };
        warn_unknown_keys(file, item, T::KEYS, &name, rep);
        let Some(modes) = modes(file, item, &name, &[T::BODY], &[T::BODY], rep) else {
            return;
        };
        let body = match item.get(T::BODY) {
            Some(node) => match T::read(file, node, &name, rep) {
                Some(body) => Some(body),
                None => return,
            },
            None => None,
        };
        let mut mode = match modes.is_empty() {
            true => Mode::Define,
            false => modes.get(T::BODY).copied().unwrap_or(Mode::Append),
        };
        let table = T::table(self);
        if mode == Mode::Replace && table.get(&name).is_none() {
            // Falco's reader defines a list or macro whose body is replaced (only `append`
            // needs an earlier definition).
            mode = Mode::Define;
        }
        if mode == Mode::Define {
            check_name(file, item.pos, T::KIND, &name, rep);
            let Some(body) = body else {
                rep.error(
                    "E_SCHEMA",
                    file,
                    item.pos,
                    Some(&name),
                    format!("{} `{name}` has no `{}`", T::KIND, T::BODY),
                );
                return;
            };
            *T::count(counts) += 1;
            table.define(&name, T::new(name.clone(), body, file, item.pos));
            return;
        }
        let Some(i) = table.get(&name) else {
            undefined(file, item.pos, T::NO_PREVIOUS, &name, rep);
            return;
        };
        // An `append: true` without the body key changes nothing (it only needs the item).
        if let Some(body) = body {
            table.items[i].update(body, mode == Mode::Append);
        }
    }

    fn add_rule(&mut self, file: usize, item: &Node, rep: &mut Reporter, counts: &mut Counts) {
        let Some(name) = item_name(file, item, "rule", rep) else {
            return;
        };
        warn_unknown_keys(file, item, RULE_KEYS, &name, rep);
        let Some(modes) = modes(
            file,
            item,
            &name,
            &["condition", "output", "desc", "tags", "exceptions"],
            &[
                "condition",
                "output",
                "desc",
                "priority",
                "tags",
                "exceptions",
                "enabled",
                "warn_evttypes",
                "skip-if-unknown-filter",
                "capture",
                "capture_duration",
            ],
            rep,
        ) else {
            return;
        };
        let legacy_append = item.get("append").and_then(Node::as_bool) == Some(true);
        // Invalid keys are reported and left out; the rule is still collected so that its
        // other problems (condition, output) are found in the same load.
        let fields = RuleFields::read(file, item, &name, rep);
        let only_enabled = fields.enabled.is_some()
            && item.get("override").is_none()
            && match &item.kind {
                Kind::Map(entries) => entries
                    .iter()
                    .all(|(k, _)| matches!(k.as_str(), Some("rule" | "enabled"))),
                _ => false,
            };
        if only_enabled {
            deprecated(file, item.pos, &name, WARNING_ENABLED.into(), rep);
        }
        let is_update = only_enabled || modes.values().any(|m| *m != Mode::Define);
        if !is_update {
            let mut missing = Vec::new();
            for key in ["condition", "output", "desc", "priority"] {
                if item.get(key).is_none() {
                    missing.push(key);
                }
            }
            if !missing.is_empty() {
                rep.error(
                    "E_SCHEMA",
                    file,
                    item.pos,
                    Some(&name),
                    format!("rule `{name}` is missing `{}`", missing.join("`, `")),
                );
                return;
            }
            counts.rules += 1;
            let exceptions = require_fields(fields.exceptions.unwrap_or_default(), &name, rep);
            let def = RuleDef {
                name: name.clone(),
                condition: fields.condition.into_iter().collect(),
                output: fields.output.into_iter().collect(),
                desc: fields.desc.unwrap_or_default(),
                priority: fields.priority.unwrap_or(Priority::Debug),
                tags: fields.tags.unwrap_or_default(),
                enabled: fields.enabled.unwrap_or(true),
                source: fields.source.unwrap_or_else(|| "syscall".to_string()),
                exceptions,
                skip_if_unknown_filter: fields.skip_if_unknown_filter.unwrap_or(false),
                warn_evttypes: fields.warn_evttypes.unwrap_or(true),
                capture: fields.capture.unwrap_or(false),
                capture_duration: fields.capture_duration,
                file,
                pos: item.pos,
            };
            if let Some(i) = self.rules.get(&name) {
                if self.rules.items[i].source != def.source {
                    source_mismatch(file, item, &name, rep);
                    return;
                }
            }
            self.rules.define(&name, def);
            return;
        }
        let Some(i) = self.rules.get(&name) else {
            // Falco appends first, so any `append` entry gives the append text.
            let replace_only = !only_enabled && modes.values().all(|m| *m == Mode::Replace);
            let message = if replace_only {
                ERROR_NO_PREVIOUS_RULE_REPLACE
            } else {
                ERROR_NO_PREVIOUS_RULE_APPEND
            };
            undefined(file, item.pos, message, &name, rep);
            return;
        };
        // Falco compares an update's source only when the update says one: always for
        // `append: true`, for `override` only when it carries the condition.
        let says_source = legacy_append || modes.contains_key("condition");
        let explicit_source = item
            .get("source")
            .and_then(Node::as_str)
            .filter(|s| !s.is_empty());
        if let Some(src) = explicit_source.filter(|_| says_source) {
            if src != self.rules.items[i].source {
                source_mismatch(file, item, &name, rep);
                return;
            }
        }
        let rule = &mut self.rules.items[i];
        // Keys without an override mode: `enabled` alone, or keys next to a legacy append.
        let mode_of = |key: &str| modes.get(key).copied().unwrap_or(Mode::Replace);
        if let Some(p) = fields.condition {
            join_piece(&mut rule.condition, p, mode_of("condition"));
        }
        if let Some(p) = fields.output {
            join_piece(&mut rule.output, p, mode_of("output"));
        }
        if let Some(desc) = fields.desc {
            if mode_of("desc") == Mode::Append && !rule.desc.is_empty() {
                rule.desc.push(' ');
                rule.desc.push_str(&desc);
            } else {
                rule.desc = desc;
            }
        }
        if let Some(tags) = fields.tags {
            if mode_of("tags") == Mode::Append {
                for t in tags {
                    if !rule.tags.contains(&t) {
                        rule.tags.push(t);
                    }
                }
            } else {
                rule.tags = tags;
            }
        }
        if let Some(exceptions) = fields.exceptions {
            if mode_of("exceptions") == Mode::Append {
                for ex in exceptions.iter().filter(|e| !e.has_values) {
                    // Falco's LOAD_APPEND_NO_VALUES (`exceptions_append_no_values`).
                    rep.warning(
                        "W_APPEND_NO_VALUES",
                        ex.file,
                        ex.pos,
                        Some(&name),
                        format!(
                            "Overriding/appending exception with no values (exception `{}`)",
                            ex.name
                        ),
                    );
                }
                append_exceptions(&mut rule.exceptions, exceptions, &name, rep);
            } else {
                rule.exceptions = require_fields(exceptions, &name, rep);
            }
        }
        if let Some(p) = fields.priority {
            rule.priority = p;
        }
        match fields.enabled {
            // Falco ignores `enabled` in an `append: true` entry.
            Some(_) if legacy_append => rep.warning(
                "W_IGNORED_KEY",
                file,
                item.get("enabled").map_or(item.pos, |n| n.pos),
                Some(&name),
                "`enabled` in an `append` entry is ignored".into(),
            ),
            Some(e) => rule.enabled = e,
            None => {}
        }
        if let Some(c) = fields.capture {
            rule.capture = c;
        }
        if let Some(d) = fields.capture_duration {
            rule.capture_duration = Some(d);
        }
        if let Some(w) = fields.warn_evttypes {
            rule.warn_evttypes = w;
        }
        if let Some(s) = fields.skip_if_unknown_filter {
            rule.skip_if_unknown_filter = s;
        }
    }
}

/// The optional keys of a rule item, type-checked.
#[derive(Default)]
struct RuleFields {
    condition: Option<Piece>,
    output: Option<Piece>,
    desc: Option<String>,
    priority: Option<Priority>,
    tags: Option<Vec<String>>,
    enabled: Option<bool>,
    source: Option<String>,
    exceptions: Option<Vec<ExceptionDef>>,
    skip_if_unknown_filter: Option<bool>,
    warn_evttypes: Option<bool>,
    capture: Option<bool>,
    capture_duration: Option<u64>,
}

impl RuleFields {
    /// Reads every key, reporting every problem; invalid keys are left `None`.
    fn read(file: usize, item: &Node, name: &str, rep: &mut Reporter) -> RuleFields {
        let mut f = RuleFields::default();
        if let Some(n) = item.get("condition") {
            if let Some(p) = text_piece(file, n, "condition", name, rep) {
                f.condition = Some(p);
            }
        }
        if let Some(n) = item.get("output") {
            if let Some(p) = text_piece(file, n, "output", name, rep) {
                f.output = Some(p);
            }
        }
        if let Some(n) = item.get("desc") {
            if let Some(s) = string(file, n, "desc", name, rep) {
                f.desc = Some(s);
            }
        }
        // `source:` with no value is the default source, as in Falco.
        if let Some(n) = item.get("source").filter(|n| !n.is_null()) {
            if let Some(s) = string(file, n, "source", name, rep) {
                f.source = Some(s);
            }
        }
        if let Some(n) = item.get("priority") {
            let parsed = string(file, n, "priority", name, rep).and_then(|s| {
                let p = Priority::parse(&s);
                if p.is_none() {
                    rep.error(
                        "E_BAD_PRIORITY",
                        file,
                        n.pos,
                        Some(name),
                        format!("invalid priority `{s}` (expected emergency, alert, critical, error, warning, notice, informational or debug)"),
                    );
                }
                p
            });
            if let Some(p) = parsed {
                f.priority = Some(p);
            }
        }
        if let Some(n) = item.get("tags") {
            if let Some(t) = string_seq(file, n, "tags", name, rep) {
                f.tags = Some(t);
            }
        }
        if let Some(n) = item.get("capture") {
            match n.as_bool() {
                Some(b) => f.capture = Some(b),
                // Capture is a Falco output feature Vigil does not act on: a value it cannot
                // read is not worth refusing the rule for.
                None => rep.warning(
                    "W_IGNORED_KEY",
                    file,
                    n.pos,
                    Some(name),
                    format!(
                        "`capture` must be true or false, found a {}; ignored",
                        n.type_name()
                    ),
                ),
            }
        }
        for (key, slot) in [
            ("enabled", &mut f.enabled),
            ("skip-if-unknown-filter", &mut f.skip_if_unknown_filter),
            ("warn_evttypes", &mut f.warn_evttypes),
        ] {
            if let Some(n) = item.get(key) {
                if let Some(b) = boolean(file, n, key, name, rep) {
                    *slot = Some(b);
                }
            }
        }
        if let Some(n) = item.get("capture_duration") {
            let d = n.as_str().and_then(|s| s.trim().parse::<u64>().ok());
            if d.is_none() {
                type_error(
                    file,
                    n,
                    "capture_duration",
                    "a non-negative integer",
                    name,
                    rep,
                );
            }
            if let Some(d) = d {
                f.capture_duration = Some(d);
            }
        }
        if let Some(n) = item.get("exceptions") {
            if let Some(e) = exceptions(file, n, name, rep) {
                f.exceptions = Some(e);
            }
        }
        f
    }
}

fn join_piece(pieces: &mut Vec<Piece>, piece: Piece, mode: Mode) {
    if mode == Mode::Append {
        pieces.push(piece);
    } else {
        *pieces = vec![piece];
    }
}

/// Exceptions that define (a rule's own, or replacing its exceptions) must name their
/// `fields`; Falco's reader refuses them otherwise (falco `test_rule_loader.cpp`:
/// `rule_override_exceptions_required_fields`). Those without are reported and dropped.
fn require_fields(
    exceptions: Vec<ExceptionDef>,
    rule: &str,
    rep: &mut Reporter,
) -> Vec<ExceptionDef> {
    exceptions
        .into_iter()
        .filter(|ex| {
            if !ex.has_fields {
                rep.error(
                    "E_SCHEMA",
                    ex.file,
                    ex.pos,
                    Some(rule),
                    format!(
                        "Item has no mapping for key 'fields' (exception `{}`)",
                        ex.name
                    ),
                );
            }
            ex.has_fields
        })
        .collect()
}

/// Appends exceptions: values of an exception with a known name are added to it; new names
/// are added whole (they must carry `fields`, checked when read).
fn append_exceptions(
    existing: &mut Vec<ExceptionDef>,
    new: Vec<ExceptionDef>,
    rule: &str,
    rep: &mut Reporter,
) {
    for ex in new {
        match existing.iter_mut().find(|e| e.name == ex.name) {
            Some(old) => {
                let mut values = ex.values;
                if !ex.has_fields && old.single {
                    // A value written as a sequence is a list of values for a single field.
                    for ((tuple, pos), &seq) in values.iter_mut().zip(&ex.loose) {
                        if !seq {
                            continue;
                        }
                        let mut list = Vec::new();
                        for v in tuple.drain(..) {
                            match v {
                                ExValue::Scalar(s) => list.push(s),
                                ExValue::List(_) => rep.error(
                                    "E_SCHEMA",
                                    ex.file,
                                    *pos,
                                    Some(rule),
                                    format!(
                                        "exception `{}` has one field: a value is a string or a sequence of strings",
                                        old.name
                                    ),
                                ),
                            }
                        }
                        *tuple = vec![ExValue::List(list)];
                    }
                }
                for (tuple, pos) in values {
                    if tuple.len() != old.fields.len() {
                        rep.error(
                            "E_SCHEMA",
                            ex.file,
                            pos,
                            Some(rule),
                            format!(
                                "exception `{}` value has {} items but the exception has {} fields",
                                old.name,
                                tuple.len(),
                                old.fields.len()
                            ),
                        );
                        continue;
                    }
                    old.values.push((tuple, pos));
                }
            }
            None if ex.fields.is_empty() => rep.error(
                "E_SCHEMA",
                ex.file,
                ex.pos,
                Some(rule),
                format!(
                    "exception `{}` is not defined on rule `{rule}` and has no `fields`",
                    ex.name
                ),
            ),
            None => existing.push(ex),
        }
    }
}

/// Reads an `exceptions` sequence. Exceptions without `fields` are accepted here (they can
/// only append values to an existing exception; see [`append_exceptions`]).
fn exceptions(
    file: usize,
    node: &Node,
    rule: &str,
    rep: &mut Reporter,
) -> Option<Vec<ExceptionDef>> {
    let Kind::Seq(items) = &node.kind else {
        type_error(file, node, "exceptions", "a sequence", rule, rep);
        return None;
    };
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        match exception(file, item, rule, rep) {
            Some(e) => {
                if out.iter().any(|o: &ExceptionDef| o.name == e.name) {
                    // Falco's `LOAD_EXCEPTION_NAME_NOT_UNIQUE`; both are kept.
                    rep.warning(
                        "W_EXCEPTION_NOT_UNIQUE",
                        file,
                        e.pos,
                        Some(rule),
                        format!(
                            "Multiple definitions of exception '{}' in the same rule (`{rule}`)",
                            e.name
                        ),
                    );
                }
                out.push(e);
            }
            None => ok = false,
        }
    }
    ok.then_some(out)
}

fn exception(file: usize, item: &Node, rule: &str, rep: &mut Reporter) -> Option<ExceptionDef> {
    let Kind::Map(entries) = &item.kind else {
        type_error(file, item, "exceptions", "a sequence of maps", rule, rep);
        return None;
    };
    for (k, _) in entries {
        if !matches!(k.as_str(), Some("name" | "fields" | "comps" | "values")) {
            rep.warning(
                "W_UNKNOWN_KEY",
                file,
                k.pos,
                Some(rule),
                format!(
                    "Unknown key '{}'. The key will be ignored. (in an exception)",
                    k.as_str().unwrap_or("?")
                ),
            );
        }
    }
    let Some(name_node) = item.get("name") else {
        rep.error(
            "E_SCHEMA",
            file,
            item.pos,
            Some(rule),
            "exception has no `name`".into(),
        );
        return None;
    };
    let name = string(file, name_node, "name", rule, rep)?;
    let (fields, single) = match item.get("fields") {
        None => (Vec::new(), false),
        Some(n) if matches!(n.kind, Kind::Seq(_)) => {
            (string_seq(file, n, "fields", rule, rep)?, false)
        }
        Some(n) => (vec![string(file, n, "fields", rule, rep)?], true),
    };
    let field_pos = match item.get("fields").map(|n| &n.kind) {
        Some(Kind::Seq(items)) => items.iter().map(|n| n.pos).collect(),
        Some(_) => vec![item.get("fields").map_or(item.pos, |n| n.pos)],
        None => Vec::new(),
    };
    let comp_texts: Vec<(String, Pos)> = match item.get("comps") {
        None if single => vec![("in".to_string(), item.pos)],
        None => fields.iter().map(|_| ("=".to_string(), item.pos)).collect(),
        Some(n) => match &n.kind {
            Kind::Seq(items) if !single => {
                let mut v = Vec::new();
                for c in items {
                    v.push((string(file, c, "comps", rule, rep)?, c.pos));
                }
                v
            }
            _ => vec![(string(file, n, "comps", rule, rep)?, n.pos)],
        },
    };
    let mut comps = Vec::new();
    for (text, pos) in &comp_texts {
        match parse_cmp(text) {
            // Falco's collector: a single field takes a list operator or a modifier.
            Some((op, None)) if single && !op.takes_list() => {
                rep.error(
                    "E_SCHEMA",
                    file,
                    *pos,
                    Some(rule),
                    format!("When fields is a single value, comps must be one of (in, pmatch, intersects) or a modifier operator (e.g. startswith oneof), not '{text}' (exception `{name}`)"),
                );
                return None;
            }
            None if single => {
                rep.error(
                    "E_SCHEMA",
                    file,
                    *pos,
                    Some(rule),
                    format!("When fields is a single value, comps must be one of (in, pmatch, intersects) or a modifier operator (e.g. startswith oneof); '{text}' is not a supported comparison operator (exception `{name}`)"),
                );
                return None;
            }
            Some(op) => comps.push(op),
            None => {
                rep.error(
                    "E_SCHEMA",
                    file,
                    *pos,
                    Some(rule),
                    format!("'{text}' is not a supported comparison operator (exception `{name}`)"),
                );
                return None;
            }
        }
    }
    if !fields.is_empty() && comps.len() != fields.len() {
        rep.error(
            "E_SCHEMA",
            file,
            item.pos,
            Some(rule),
            format!(
                "exception `{name}` has {} fields but {} comps",
                fields.len(),
                comps.len()
            ),
        );
        return None;
    }
    let mut values = Vec::new();
    let mut loose = Vec::new();
    if let Some(n) = item.get("values") {
        let Kind::Seq(tuples) = &n.kind else {
            type_error(file, n, "values", "a sequence", rule, rep);
            return None;
        };
        for t in tuples {
            if single {
                values.push((vec![ex_value(file, t, rule, rep)?], t.pos));
                continue;
            }
            if item.get("fields").is_none() {
                // Shape decided by the exception appended to: a scalar is one value, a
                // sequence a tuple (or, for a single-field exception, a list of values).
                match &t.kind {
                    Kind::Seq(parts) => {
                        let mut tuple = Vec::new();
                        for p in parts {
                            tuple.push(ex_value(file, p, rule, rep)?);
                        }
                        values.push((tuple, t.pos));
                        loose.push(true);
                    }
                    _ => {
                        values.push((vec![ex_value(file, t, rule, rep)?], t.pos));
                        loose.push(false);
                    }
                }
                continue;
            }
            let Kind::Seq(parts) = &t.kind else {
                type_error(file, t, "values", "a sequence of sequences", rule, rep);
                return None;
            };
            if !fields.is_empty() && parts.len() != fields.len() {
                rep.error(
                    "E_SCHEMA",
                    file,
                    t.pos,
                    Some(rule),
                    format!(
                        "exception `{name}` value has {} items but the exception has {} fields",
                        parts.len(),
                        fields.len()
                    ),
                );
                return None;
            }
            let mut tuple = Vec::new();
            for p in parts {
                tuple.push(ex_value(file, p, rule, rep)?);
            }
            values.push((tuple, t.pos));
        }
    }
    Some(ExceptionDef {
        name,
        fields,
        field_pos,
        single,
        comps,
        values,
        has_values: item.get("values").is_some(),
        has_fields: item.get("fields").is_some(),
        loose,
        file,
        pos: item.pos,
    })
}

fn ex_value(file: usize, node: &Node, rule: &str, rep: &mut Reporter) -> Option<ExValue> {
    match &node.kind {
        Kind::Seq(_) => Some(ExValue::List(string_seq(file, node, "values", rule, rep)?)),
        _ => Some(ExValue::Scalar(string(file, node, "values", rule, rep)?)),
    }
}

/// Parses a comparison operator as written in exceptions' `comps`: an operator, optionally
/// followed by a list modifier (`startswith oneof`, `=  anyof`, any whitespace between). Only
/// string operators take a modifier ([`CmpOp::takes_modifier`]).
pub fn parse_cmp(text: &str) -> Option<(CmpOp, Option<Modifier>)> {
    let mut words = text.split_whitespace();
    let op = CmpOp::from_text(words.next()?)?;
    let modifier = match words.next() {
        None => None,
        Some(w) if op.takes_modifier() => Some(Modifier::from_text(w)?),
        Some(_) => return None,
    };
    words.next().is_none().then_some((op, modifier))
}

fn check_engine_version(file: usize, item: &Node, rep: &mut Reporter) {
    let node = item
        .get("required_engine_version")
        .expect("kind was detected by this key");
    let Some(text) = node.as_str() else {
        type_error(
            file,
            node,
            "required_engine_version",
            "a version string",
            "",
            rep,
        );
        return;
    };
    // Falco's reader (`rule_loader_reader.cpp`) and collector (`rule_loader_collector.cpp`):
    // the text of both messages is Falco's.
    let Some(required) = parse_version(text) else {
        rep.error(
            "E_SCHEMA",
            file,
            node.pos,
            None,
            format!(
                "Unable to parse engine version '{text}' as a semver string. Expected \"x.y.z\" semver format."
            ),
        );
        return;
    };
    if !engine_compatible_with(required) {
        rep.error(
            "E_ENGINE_VERSION",
            file,
            node.pos,
            None,
            format!(
                "Rules require engine version {}, but engine version is {}",
                version_text(required),
                version_text(ENGINE_VERSION)
            ),
        );
    }
}

/// `x.y.z`.
pub fn version_text((major, minor, patch): (u64, u64, u64)) -> String {
    format!("{major}.{minor}.{patch}")
}

/// Whether this engine satisfies a file's `required_engine_version`: the same major version
/// and at least the version required (libsinsp's `sinsp_version::compatible_with`, so a file
/// requiring `1.0.0` is refused by every `0.x` engine).
pub fn engine_compatible_with(required: (u64, u64, u64)) -> bool {
    required.0 == ENGINE_VERSION.0 && ENGINE_VERSION >= required
}

/// A `required_engine_version` in either of Falco's forms: an integer `N` (the engine
/// versions before semver, now the minor number: `N` → (0, N, 0)), or `x.y.z`. As Falco reads
/// it (`sscanf("%u.%u.%u")` after the integer form failed), three numbers are needed and
/// anything after the third is ignored (`0.26.0-rc1` is 0.26.0; `0.26` is refused).
pub fn parse_version(text: &str) -> Option<(u64, u64, u64)> {
    let text = text.trim();
    if let Ok(n) = text.parse::<u32>() {
        return Some((0, u64::from(n), 0));
    }
    let mut rest = text;
    let mut parts = [0u64; 3];
    for (i, part) in parts.iter_mut().enumerate() {
        if i > 0 {
            rest = rest.strip_prefix('.')?;
        }
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        *part = u64::from(rest[..digits].parse::<u32>().ok()?);
        rest = &rest[digits..];
    }
    Some((parts[0], parts[1], parts[2]))
}

/// Accepts `required_plugin_versions` (Vigil has no plugins; the fields plugins provide are
/// built in), checking only its shape.
fn check_plugin_versions(file: usize, item: &Node, rep: &mut Reporter) {
    let node = item
        .get("required_plugin_versions")
        .expect("kind was detected by this key");
    let Kind::Seq(entries) = &node.kind else {
        type_error(
            file,
            node,
            "required_plugin_versions",
            "a sequence",
            "",
            rep,
        );
        return;
    };
    for e in entries {
        if !matches!(e.kind, Kind::Map(_)) || e.get("name").and_then(Node::as_str).is_none() {
            rep.error(
                "E_SCHEMA",
                file,
                e.pos,
                None,
                "each required plugin must be a map with a `name`".into(),
            );
        }
    }
}

fn item_name(file: usize, item: &Node, kind: &str, rep: &mut Reporter) -> Option<String> {
    let node = item.get(kind).expect("kind was detected by this key");
    match node.as_str() {
        Some(name) if !node.is_null() && !name.trim().is_empty() => Some(name.to_string()),
        _ => {
            rep.error(
                "E_SCHEMA",
                file,
                node.pos,
                None,
                format!("{kind} name must be a non-empty string"),
            );
            None
        }
    }
}

fn warn_unknown_keys(file: usize, item: &Node, known: &[&str], name: &str, rep: &mut Reporter) {
    if let Kind::Map(entries) = &item.kind {
        for (k, _) in entries {
            let key = k.as_str().unwrap_or("");
            if !known.contains(&key) {
                rep.warning(
                    "W_UNKNOWN_KEY",
                    file,
                    k.pos,
                    Some(name),
                    format!("Unknown key '{key}'. The key will be ignored."),
                );
            }
        }
    }
}

/// Reads `append` and `override` into a mode per key. Checks that override keys are allowed
/// and present, and that `append`/`override` are not both given.
fn modes(
    file: usize,
    item: &Node,
    name: &str,
    appendable: &[&str],
    replaceable: &[&str],
    rep: &mut Reporter,
) -> Option<FxHashMap<String, Mode>> {
    let mut out = FxHashMap::default();
    let append = match item.get("append") {
        Some(n) => boolean(file, n, "append", name, rep)?,
        None => false,
    };
    if append {
        // Falco warns about the deprecated flag before it looks at `override`, so the warning
        // comes with the error below too (`rule_incorrect_append_override`).
        deprecated(
            file,
            item.get("append").map_or(item.pos, |n| n.pos),
            name,
            WARNING_APPEND.into(),
            rep,
        );
    }
    let Some(ov) = item.get("override") else {
        if append {
            for key in appendable {
                if item.get(key).is_some() {
                    out.insert((*key).to_string(), Mode::Append);
                }
            }
            if out.is_empty() {
                // `append: true` with nothing to append still needs an existing item.
                out.insert(String::new(), Mode::Append);
            }
        }
        return Some(out);
    };
    if append {
        // Falco's ERROR_OVERRIDE_APPEND (`append: false` next to `override` is accepted).
        rep.error(
            "E_SCHEMA",
            file,
            ov.pos,
            Some(name),
            ERROR_OVERRIDE_APPEND.into(),
        );
        return None;
    }
    let Kind::Map(entries) = &ov.kind else {
        type_error(file, ov, "override", "a map", name, rep);
        return None;
    };
    let mut ok = true;
    let mut ignored = false;
    for (k, v) in entries {
        let key = k.as_str().unwrap_or("");
        if !appendable.contains(&key) && !replaceable.contains(&key) {
            rep.warning(
                "W_OVERRIDE_IGNORED",
                file,
                k.pos,
                Some(name),
                format!("`{key}` cannot be overridden; the `override` entry is ignored"),
            );
            ignored = true;
            continue;
        }
        let mode = match v.as_str() {
            Some("append") if appendable.contains(&key) => Mode::Append,
            Some("replace") if replaceable.contains(&key) => Mode::Replace,
            other => {
                // Falco's texts for the two it names (`rule_incorrect_override_type`).
                let message = match other {
                    Some("append") => {
                        format!("Key '{key}' cannot be appended to, use 'replace' instead")
                    }
                    Some("replace") => format!("Key '{key}' cannot be replaced"),
                    _ => format!(
                        "cannot override `{key}` with `{}` (expected append or replace)",
                        other.unwrap_or(v.type_name())
                    ),
                };
                rep.error("E_SCHEMA", file, v.pos, Some(name), message);
                ok = false;
                continue;
            }
        };
        if item.get(key).is_none() {
            // Falco's reader refuses this (`rule_override_without_field`,
            // `missing_enabled_key_with_override` in its test_rule_loader.cpp).
            let article = if mode == Mode::Append { "An" } else { "A" };
            let mode_text = if mode == Mode::Append {
                "append"
            } else {
                "replace"
            };
            rep.error(
                "E_SCHEMA",
                file,
                k.pos,
                Some(name),
                format!(
                    "{article} {mode_text} override for '{key}' was specified but '{key}' is not defined"
                ),
            );
            ok = false;
            continue;
        }
        out.insert(key.to_string(), mode);
    }
    if let Kind::Map(item_entries) = &item.kind {
        for (k, _) in item_entries {
            let key = k.as_str().unwrap_or("");
            if replaceable.contains(&key) && !out.contains_key(key) && ok {
                rep.error(
                    "E_SCHEMA",
                    file,
                    k.pos,
                    Some(name),
                    format!(
                        "Unexpected key '{key}': no corresponding entry under 'override' is defined."
                    ),
                );
                ok = false;
            }
        }
    }
    if out.is_empty() && ok {
        if ignored {
            // Every entry was ignored: still an update of an existing item, not a definition.
            out.insert(String::new(), Mode::Replace);
        } else {
            rep.error(
                "E_SCHEMA",
                file,
                ov.pos,
                Some(name),
                "empty `override`".into(),
            );
            ok = false;
        }
    }
    ok.then_some(out)
}

/// Falco's `LOAD_INVALID_MACRO_NAME` / `LOAD_INVALID_LIST_NAME`, with its texts and its
/// patterns (falco `rule_loader_reader.cpp`): a macro name must be an identifier
/// (`[a-zA-Z]+[a-zA-Z0-9_]*`), a list name a bare string (`[^()"'[:space:]=,]+`, so `a-b` is
/// fine). Either way the item still loads.
fn check_name(file: usize, pos: Pos, kind: &str, name: &str, rep: &mut Reporter) {
    let (valid, message) = if kind == "macro" {
        let mut bytes = name.bytes();
        let valid = bytes.next().is_some_and(|b| b.is_ascii_alphabetic())
            && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_');
        (
            valid,
            "Macro has an invalid name. Macro names should match a regular expression: ([a-zA-Z]+[a-zA-Z0-9_]*)",
        )
    } else {
        let valid = !name.is_empty()
            && name.bytes().all(|b| {
                !matches!(b, b'(' | b')' | b'"' | b'\'' | b'=' | b',') && !crate::ast::is_ws(b)
            });
        (
            valid,
            "List has an invalid name. List names should match a regular expression: ([^()\"'[:space:]=,]+)",
        )
    };
    if !valid {
        rep.warning(
            "W_INVALID_NAME",
            file,
            pos,
            Some(name),
            format!("{message} (`{name}`)"),
        );
    }
}

// Falco's own texts (its `rule_loading_messages.h`), kept word for word because tools and
// Falco's tests match on them.
const WARNING_APPEND: &str = "'append' key is deprecated. Add an 'append' entry (e.g. 'condition: append') under 'override' instead.";
const WARNING_ENABLED: &str = "The standalone 'enabled' key usage is deprecated. The correct approach requires also a 'replace' entry under the 'override' key (i.e. 'enabled: replace').";
const ERROR_NO_PREVIOUS_MACRO: &str =
    "Macro uses 'append' or 'override.condition: append' but no macro by that name already exists";
const ERROR_NO_PREVIOUS_LIST: &str =
    "List uses 'append' or 'override.items: append' but no list by that name already exists";
const ERROR_NO_PREVIOUS_RULE_APPEND: &str =
    "Rule uses 'append' or 'override.<key>: append' but no rule by that name already exists";
const ERROR_NO_PREVIOUS_RULE_REPLACE: &str =
    "An 'override.<key>: replace' to a rule was requested but no rule by that name already exists";
const ERROR_OVERRIDE_APPEND: &str = "Keys 'override' and 'append: true' cannot be used together. Add an 'append' entry (e.g. 'condition: append') under 'override' instead.";

/// Falco's `LOAD_DEPRECATED_ITEM`.
fn deprecated(file: usize, pos: Pos, name: &str, message: String, rep: &mut Reporter) {
    rep.warning("W_DEPRECATED", file, pos, Some(name), message);
}

/// Falco's collector refuses a rule defined again, appended to or overridden with another
/// explicit source (falco `test_rule_loader.cpp`: `redefine_rule_different_source`,
/// `append_across_sources`, `selective_replace_across_sources`).
fn source_mismatch(file: usize, item: &Node, name: &str, rep: &mut Reporter) {
    rep.error(
        "E_SOURCE_MISMATCH",
        file,
        item.pos,
        Some(name),
        format!("Rule has been re-defined with a different source (`{name}`)"),
    );
}

/// `E_UNDEFINED_APPEND` with Falco's text for the kind of update (`ERROR_NO_PREVIOUS_*`).
fn undefined(file: usize, pos: Pos, falco_text: &str, name: &str, rep: &mut Reporter) {
    rep.error(
        "E_UNDEFINED_APPEND",
        file,
        pos,
        Some(name),
        format!("{falco_text} (`{name}` was not defined before)"),
    );
}

fn type_error(file: usize, node: &Node, key: &str, expected: &str, item: &str, rep: &mut Reporter) {
    rep.error(
        "E_SCHEMA",
        file,
        node.pos,
        (!item.is_empty()).then_some(item),
        format!("`{key}` must be {expected}, found a {}", node.type_name()),
    );
}

fn string(file: usize, node: &Node, key: &str, item: &str, rep: &mut Reporter) -> Option<String> {
    match &node.kind {
        Kind::Scalar { value, .. } if !node.is_null() => Some(value.clone()),
        _ => {
            type_error(file, node, key, "a string", item, rep);
            None
        }
    }
}

fn text_piece(
    file: usize,
    node: &Node,
    key: &str,
    item: &str,
    rep: &mut Reporter,
) -> Option<Piece> {
    match &node.kind {
        Kind::Scalar { value, span, .. } if !node.is_null() => Some(Piece {
            text: value.clone(),
            file,
            origin: Origin::Scalar(*span),
        }),
        _ => {
            type_error(file, node, key, "a string", item, rep);
            None
        }
    }
}

fn boolean(file: usize, node: &Node, key: &str, item: &str, rep: &mut Reporter) -> Option<bool> {
    let b = node.as_bool();
    if b.is_none() {
        type_error(file, node, key, "true or false", item, rep);
    }
    b
}

fn string_seq(
    file: usize,
    node: &Node,
    key: &str,
    item: &str,
    rep: &mut Reporter,
) -> Option<Vec<String>> {
    let Kind::Seq(items) = &node.kind else {
        if node.is_null() {
            return Some(Vec::new());
        }
        type_error(file, node, key, "a sequence of strings", item, rep);
        return None;
    };
    let mut out = Vec::with_capacity(items.len());
    for i in items {
        out.push(string(file, i, key, item, rep)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_parse_in_both_styles() {
        assert_eq!(parse_version("0.57.0"), Some((0, 57, 0)));
        assert_eq!(parse_version("9"), Some((0, 9, 0)));
        assert_eq!(parse_version(" 26 "), Some((0, 26, 0)));
        // Three numbers, as libsinsp's `sscanf("%u.%u.%u")`; what follows them is ignored.
        assert_eq!(parse_version("0.26.0-rc1"), Some((0, 26, 0)));
        assert_eq!(parse_version("1.2.3.4"), Some((1, 2, 3)));
        assert_eq!(parse_version("0.26"), None);
        assert_eq!(parse_version("1.x"), None);
        assert_eq!(parse_version("seven"), None);
        assert_eq!(parse_version("-1"), None);
        assert_eq!(parse_version(""), None);
        assert_eq!(parse_version("99999999999"), None);
    }

    #[test]
    fn comps_parse() {
        assert_eq!(parse_cmp("="), Some((CmpOp::Eq, None)));
        assert_eq!(parse_cmp("startswith"), Some((CmpOp::StartsWith, None)));
        assert_eq!(parse_cmp("in"), Some((CmpOp::In, None)));
        assert_eq!(parse_cmp("like"), None);
        assert_eq!(
            parse_cmp("startswith oneof"),
            Some((CmpOp::StartsWith, Some(Modifier::OneOf)))
        );
        assert_eq!(
            parse_cmp(" =   anyof "),
            Some((CmpOp::Eq, Some(Modifier::AnyOf)))
        );
        assert_eq!(
            parse_cmp("contains\tallof"),
            Some((CmpOp::Contains, Some(Modifier::AllOf)))
        );
        assert_eq!(parse_cmp("in oneof"), None);
        assert_eq!(parse_cmp("= someof"), None);
        assert_eq!(parse_cmp("= oneof x"), None);
    }
}

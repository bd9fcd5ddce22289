//! The **compile** phase's front half: parse conditions, expand macros and list names, add
//! exceptions, then hand the expanded AST to [`crate::compile::Compiler`].
//!
//! Expansion works on ASTs, not text: each macro is parsed once, its spans shifted into the
//! virtual offset space of [`super::text::Texts`], and its expansion memoized, so an error
//! inside a macro keeps pointing at the macro's text however many rules use it (and the
//! reporter's de-duplication reports it once).
//!
//! Bounds: expansion recursion and the expanded tree's depth are limited to [`MAX_DEPTH`]
//! (`E_TOO_DEEP`), the expanded size per rule to [`MAX_NODES`] (`E_TOO_LARGE`), list nesting to
//! [`MAX_DEPTH`] as well, so deep or exponential macro graphs cannot exhaust stack or memory.

use std::rc::Rc;

use super::collect::{Collected, ExValue, ExceptionDef, RuleDef};
use super::text::{Origin, Piece, Texts};
use super::yaml::Pos;
use crate::ast::{Expr, Literal, Operand, Rhs, Span};
use crate::parser::parse_condition;

/// Deepest expanded condition (nesting of and/or/not, plus macro references) accepted.
pub const MAX_DEPTH: usize = 400;
/// Most AST nodes (comparisons, list values …) one rule may expand to.
pub const MAX_NODES: usize = 500_000;

/// Where a problem is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Loc {
    /// A virtual offset (see [`Texts`]).
    Virtual(u32),
    /// A file position.
    At(usize, Pos),
}

/// A problem found during resolution, reported by the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub code: &'static str,
    pub message: String,
    pub loc: Loc,
    /// The list the problem belongs to, when `loc` is a file position.
    pub item: Option<String>,
}

enum MacroState {
    Parsed(Rc<Expr>),
    Failed,
    InProgress,
    Done(Rc<Expanded>),
}

struct Expanded {
    expr: Expr,
    depth: usize,
    size: usize,
    ok: bool,
}

enum ListState {
    Unresolved,
    InProgress,
    Done(Rc<Vec<String>>),
    Failed,
}

/// Macro and list resolution state shared by every rule of one load.
pub struct Resolver<'a> {
    col: &'a Collected,
    macros: Vec<MacroState>,
    lists: Vec<ListState>,
    pub macro_used: Vec<bool>,
    pub list_used: Vec<bool>,
    macro_stack: Vec<usize>,
    /// Nodes produced for the current rule.
    budget: usize,
    budget_reported: bool,
    pub problems: Vec<Problem>,
    /// Lists whose names are not one bare word (`my list`): conditions reach them only by
    /// Falco's textual substitution (see [`mask_list_names`]).
    odd_lists: Vec<usize>,
}

impl<'a> Resolver<'a> {
    /// Parses every macro (so that syntax errors in unused macros are reported too) and marks
    /// the macros and lists they reference as used.
    pub fn new(col: &'a Collected, texts: &mut Texts) -> Resolver<'a> {
        let mut r = Resolver {
            col,
            macros: Vec::new(),
            lists: col
                .lists
                .items
                .iter()
                .map(|_| ListState::Unresolved)
                .collect(),
            macro_used: vec![false; col.macros.items.len()],
            list_used: vec![false; col.lists.items.len()],
            macro_stack: Vec::new(),
            budget: 0,
            budget_reported: false,
            problems: Vec::new(),
            odd_lists: col
                .lists
                .items
                .iter()
                .enumerate()
                .filter(|(_, l)| {
                    l.name.bytes().any(is_falco_delim)
                        && !l.name.bytes().any(|b| matches!(b, b'"' | b'\''))
                })
                .map(|(i, _)| i)
                .collect(),
        };
        for m in &col.macros.items {
            let state = match r.parse(texts, m.condition.clone(), &m.name) {
                Some(expr) => {
                    r.mark_refs(&expr);
                    MacroState::Parsed(Rc::new(expr))
                }
                None => MacroState::Failed,
            };
            r.macros.push(state);
        }
        for l in &col.lists.items {
            for item in &l.items {
                if let Some(j) = col.lists.get(item) {
                    r.list_used[j] = true;
                }
            }
        }
        // Resolve every list now, so that cycles are reported even in unused lists.
        r.resolve_lists();
        r
    }

    /// Registers `pieces`, parses them and shifts spans into the virtual space. Problems are
    /// recorded; `None` on failure.
    pub fn parse(&mut self, texts: &mut Texts, pieces: Vec<Piece>, owner: &str) -> Option<Expr> {
        let fallback = pieces.first().map(|p| {
            let pos = match p.origin {
                Origin::Scalar(s) => s.start,
                Origin::Fixed(pos) => pos,
            };
            (p.file, pos)
        });
        let Some(text) = texts.add(pieces, owner) else {
            if let Some((file, pos)) = fallback {
                self.problems.push(Problem {
                    code: "E_TOO_LARGE",
                    message: "rules text exceeds 4 GiB".into(),
                    loc: Loc::At(file, pos),
                    item: None,
                });
            }
            return None;
        };
        let base = text.base;
        let masked = mask_list_names(text.text, self.col, &self.odd_lists);
        match parse_condition(masked.as_ref().map_or(text.text, |(m, _)| m.as_str())) {
            Ok(mut expr) => {
                if let Some((_, names)) = &masked {
                    unmask_list_names(&mut expr, names);
                }
                shift(&mut expr, base);
                if depth(&expr) > MAX_DEPTH {
                    self.problems.push(Problem {
                        code: "E_TOO_DEEP",
                        message: format!("condition is nested deeper than {MAX_DEPTH} levels"),
                        loc: Loc::Virtual(base),
                        item: None,
                    });
                    return None;
                }
                Some(expr)
            }
            Err(e) => {
                self.problems.push(Problem {
                    code: e.code,
                    message: e.message,
                    loc: Loc::Virtual(base.saturating_add(e.span.start)),
                    item: None,
                });
                None
            }
        }
    }

    /// Marks macros and lists referenced by `expr` as used (without expanding).
    pub fn mark_refs(&mut self, expr: &Expr) {
        let mut stack = vec![expr];
        while let Some(e) = stack.pop() {
            match e {
                Expr::And(v) | Expr::Or(v) => stack.extend(v.iter()),
                Expr::Not(b) => stack.push(b),
                Expr::Macro { name, .. } => {
                    if let Some(i) = self.col.macros.get(name) {
                        self.macro_used[i] = true;
                    }
                }
                Expr::Compare {
                    rhs: Rhs::List(items) | Rhs::Modified(_, items),
                    ..
                } => {
                    for lit in items.iter().filter(|l| !l.quoted) {
                        if let Some(i) = self.col.lists.get(&lit.text) {
                            self.list_used[i] = true;
                        }
                    }
                }
                _ => {}
            }
        }
    }

    /// Parses a rule's condition, adds its exceptions and expands macros and lists.
    /// `None` when it could not be parsed; otherwise the expansion and whether it is free of
    /// problems (a failed expansion still compiles, to report the rule's other errors).
    pub fn rule_condition(&mut self, texts: &mut Texts, rule: &RuleDef) -> Option<(Expr, bool)> {
        let owner = rule.name.clone();
        let parsed = self.parse(texts, rule.condition.clone(), &owner)?;
        let with_exceptions = match self.exceptions(texts, rule, &owner) {
            Some(Some(ex)) => {
                let mut children = match parsed {
                    Expr::And(v) => v,
                    other => vec![other],
                };
                children.push(Expr::Not(Box::new(ex)));
                Expr::And(children)
            }
            Some(None) => parsed,
            None => return None,
        };
        self.budget = 0;
        self.budget_reported = false;
        let mut ok = true;
        let (expr, _, _) = self.expand(&with_exceptions, 0, &mut ok);
        Some((expr, ok))
    }

    /// Builds `(t1) or (t2) …` over every exception's value tuples, each tuple being
    /// `f1 c1 v1 and f2 c2 v2 …`. `Some(None)` when no exception has values.
    fn exceptions(
        &mut self,
        texts: &mut Texts,
        rule: &RuleDef,
        owner: &str,
    ) -> Option<Option<Expr>> {
        let mut alternatives = Vec::new();
        let mut ok = true;
        for ex in &rule.exceptions {
            if ex.values.is_empty() {
                continue;
            }
            let operands = match exception_operands(ex) {
                Ok(mut ops) => {
                    for (op, pos) in ops.iter_mut().zip(&ex.field_pos) {
                        let fixed = fixed_span(texts, ex.file, *pos, owner)?;
                        op.spans_mut(&mut |s| *s = fixed);
                    }
                    ops
                }
                Err(field) => {
                    self.problems.push(Problem {
                        code: "E_SCHEMA",
                        message: format!("exception `{}` has an invalid field `{field}`", ex.name),
                        loc: Loc::At(ex.file, ex.pos),
                        item: Some(rule.name.clone()),
                    });
                    ok = false;
                    continue;
                }
            };
            // Values without `fields` (a rule's own exception, not an append to one): nothing
            // to compare them with (found by fuzzing).
            let (Some(&(op0, mod0)), false) = (ex.comps.first(), operands.is_empty()) else {
                self.problems.push(Problem {
                    code: "E_SCHEMA",
                    message: format!("exception `{}` has values but no `fields`", ex.name),
                    loc: Loc::At(ex.file, ex.pos),
                    item: Some(rule.name.clone()),
                });
                ok = false;
                continue;
            };
            if ex.single && (op0.takes_list() || mod0.is_some()) {
                // `field in (v1, v2 …)` or `field OP MOD (v1, v2 …)` over every value.
                let span = fixed_span(texts, ex.file, ex.pos, owner)?;
                let mut items = Vec::new();
                for (tuple, _) in &ex.values {
                    for v in tuple {
                        push_values(&mut items, v, span);
                    }
                }
                alternatives.push(Expr::Compare {
                    lhs: operands[0].clone(),
                    op: op0,
                    rhs: match mod0 {
                        Some(m) => Rhs::Modified(m, items),
                        None => Rhs::List(items),
                    },
                    span,
                });
                continue;
            }
            for (tuple, pos) in &ex.values {
                let span = fixed_span(texts, ex.file, *pos, owner)?;
                let mut tests = Vec::new();
                for ((lhs, &(op, modifier)), value) in operands.iter().zip(&ex.comps).zip(tuple) {
                    let rhs = if op.takes_list() || modifier.is_some() {
                        let mut items = Vec::new();
                        push_values(&mut items, value, span);
                        match modifier {
                            Some(m) => Rhs::Modified(m, items),
                            None => Rhs::List(items),
                        }
                    } else {
                        let text = match value {
                            ExValue::Scalar(s) => s.clone(),
                            ExValue::List(items) => items.join(" "),
                        };
                        transformer_value(&text, span).unwrap_or(Rhs::Value(Literal {
                            text,
                            quoted: true,
                            span,
                        }))
                    };
                    tests.push(Expr::Compare {
                        lhs: lhs.clone(),
                        op,
                        rhs,
                        span,
                    });
                }
                alternatives.push(if tests.len() == 1 {
                    tests.pop().expect("one test")
                } else {
                    Expr::And(tests)
                });
            }
        }
        if !ok {
            return None;
        }
        Some(match alternatives.len() {
            0 => None,
            1 => alternatives.pop(),
            _ => Some(Expr::Or(alternatives)),
        })
    }

    /// Expands macros and list names in `e`. Returns the expansion, its depth and its size.
    fn expand(&mut self, e: &Expr, rec: usize, ok: &mut bool) -> (Expr, usize, usize) {
        if rec > MAX_DEPTH {
            self.problems.push(Problem {
                code: "E_TOO_DEEP",
                message: format!(
                    "condition is nested deeper than {MAX_DEPTH} levels after macro expansion"
                ),
                loc: Loc::Virtual(first_span(e).start),
                item: None,
            });
            *ok = false;
            return (Expr::Const(false), 1, 1);
        }
        match e {
            Expr::And(v) | Expr::Or(v) => {
                let mut children = Vec::with_capacity(v.len());
                self.charge(1, e, ok);
                let (mut d, mut n) = (0, 1);
                for c in v {
                    let (x, cd, cn) = self.expand(c, rec + 1, ok);
                    d = d.max(cd);
                    n += cn;
                    children.push(x);
                }
                let expr = if matches!(e, Expr::And(_)) {
                    Expr::And(children)
                } else {
                    Expr::Or(children)
                };
                (expr, d + 1, n)
            }
            Expr::Not(b) => {
                self.charge(1, e, ok);
                let (x, d, n) = self.expand(b, rec + 1, ok);
                (Expr::Not(Box::new(x)), d + 1, n + 1)
            }
            Expr::Macro { name, span } => self.expand_macro(name, *span, rec, ok),
            Expr::Compare { lhs, op, rhs, span } => {
                let rhs = match rhs {
                    Rhs::List(items) if op.takes_list() => Rhs::List(self.expand_items(items, ok)),
                    Rhs::Modified(m, items) => Rhs::Modified(*m, self.expand_items(items, ok)),
                    other => other.clone(),
                };
                let n = 1 + match &rhs {
                    Rhs::List(items) | Rhs::Modified(_, items) => items.len(),
                    _ => 1,
                };
                self.charge(n, e, ok);
                (
                    Expr::Compare {
                        lhs: lhs.clone(),
                        op: *op,
                        rhs,
                        span: *span,
                    },
                    1,
                    n,
                )
            }
            Expr::Exists { .. } | Expr::Const(_) => {
                self.charge(1, e, ok);
                (e.clone(), 1, 1)
            }
        }
    }

    fn charge(&mut self, n: usize, at: &Expr, ok: &mut bool) {
        self.budget = self.budget.saturating_add(n);
        if self.budget > MAX_NODES {
            *ok = false;
            if !self.budget_reported {
                self.budget_reported = true;
                self.problems.push(Problem {
                    code: "E_TOO_LARGE",
                    message: format!("condition expands to more than {MAX_NODES} nodes"),
                    loc: Loc::Virtual(first_span(at).start),
                    item: None,
                });
            }
        }
    }

    fn expand_macro(
        &mut self,
        name: &str,
        span: Span,
        rec: usize,
        ok: &mut bool,
    ) -> (Expr, usize, usize) {
        let failed = (Expr::Const(false), 1, 1);
        let Some(i) = self.col.macros.get(name) else {
            self.problems.push(Problem {
                code: "E_UNKNOWN_MACRO",
                message: format!("unknown macro `{name}`"),
                loc: Loc::Virtual(span.start),
                item: None,
            });
            *ok = false;
            return failed;
        };
        self.macro_used[i] = true;
        let parsed = match &self.macros[i] {
            MacroState::Failed => {
                *ok = false;
                return failed;
            }
            MacroState::InProgress => {
                let from = self.macro_stack.iter().position(|&m| m == i).unwrap_or(0);
                let mut names: Vec<&str> = self.macro_stack[from..]
                    .iter()
                    .map(|&m| self.col.macros.items[m].name.as_str())
                    .collect();
                names.push(name);
                self.problems.push(Problem {
                    code: "E_MACRO_CYCLE",
                    message: format!("macro cycle: {}", names.join(" -> ")),
                    loc: Loc::Virtual(span.start),
                    item: None,
                });
                *ok = false;
                return failed;
            }
            MacroState::Done(done) => {
                let done = Rc::clone(done);
                if !done.ok {
                    *ok = false;
                    return failed;
                }
                if rec + done.depth > MAX_DEPTH {
                    self.problems.push(Problem {
                        code: "E_TOO_DEEP",
                        message: format!(
                            "condition is nested deeper than {MAX_DEPTH} levels after macro expansion"
                        ),
                        loc: Loc::Virtual(span.start),
                        item: None,
                    });
                    *ok = false;
                    return failed;
                }
                let mut charged_ok = true;
                let at = Expr::Macro {
                    name: name.to_string(),
                    span,
                };
                self.charge(done.size, &at, &mut charged_ok);
                if !charged_ok {
                    *ok = false;
                    return failed;
                }
                return (done.expr.clone(), done.depth, done.size);
            }
            MacroState::Parsed(p) => Rc::clone(p),
        };
        self.macros[i] = MacroState::InProgress;
        self.macro_stack.push(i);
        let mut macro_ok = true;
        let (expr, depth, size) = self.expand(&parsed, rec + 1, &mut macro_ok);
        self.macro_stack.pop();
        self.macros[i] = MacroState::Done(Rc::new(Expanded {
            expr: expr.clone(),
            depth,
            size,
            ok: macro_ok,
        }));
        if !macro_ok {
            *ok = false;
            return failed;
        }
        (expr, depth, size)
    }

    /// Expands unquoted items that name lists.
    fn expand_items(&mut self, items: &[Literal], ok: &mut bool) -> Vec<Literal> {
        let mut out = Vec::with_capacity(items.len());
        for lit in items {
            let list = (!lit.quoted)
                .then(|| self.col.lists.get(&lit.text))
                .flatten();
            match list {
                Some(i) => {
                    self.list_used[i] = true;
                    match &self.lists[i] {
                        ListState::Done(values) => out.extend(values.iter().map(|v| Literal {
                            text: v.clone(),
                            quoted: true,
                            span: lit.span,
                        })),
                        // Reported where the list is defined.
                        _ => *ok = false,
                    }
                }
                None => out.push(lit.clone()),
            }
        }
        out
    }

    /// Resolves every list: nested list names expanded, one level of quotes removed
    /// (`'"10.0.0.0/8"'` in YAML is the value `10.0.0.0/8`, as in Falco). Iterative depth-first
    /// search, so list chains of any length cost no stack; cycles are `E_LIST_CYCLE` and lists
    /// growing past [`MAX_NODES`] values `E_TOO_LARGE`, each reported once at the list where it
    /// was found (lists depending on a failed list fail silently).
    fn resolve_lists(&mut self) {
        struct Frame {
            list: usize,
            next: usize,
            values: Vec<String>,
            failed: bool,
        }
        let lists = &self.col.lists;
        for root in 0..lists.items.len() {
            if !matches!(self.lists[root], ListState::Unresolved) {
                continue;
            }
            self.lists[root] = ListState::InProgress;
            let mut stack = vec![Frame {
                list: root,
                next: 0,
                values: Vec::new(),
                failed: false,
            }];
            while let Some(top) = stack.last_mut() {
                let def = &lists.items[top.list];
                let Some(item) = def.items.get(top.next) else {
                    let done = stack.pop().expect("the stack has a top");
                    let failed = done.failed;
                    self.lists[done.list] = if failed {
                        ListState::Failed
                    } else {
                        ListState::Done(Rc::new(done.values))
                    };
                    if let Some(parent) = stack.last_mut() {
                        match &self.lists[done.list] {
                            ListState::Done(v) => parent.values.extend(v.iter().cloned()),
                            _ => parent.failed = true,
                        }
                    }
                    continue;
                };
                top.next += 1;
                if top.failed {
                    continue;
                }
                if let Some(stripped) = strip_quotes(item) {
                    top.values.push(stripped.to_string());
                } else if let Some(j) = lists.get(item) {
                    match &self.lists[j] {
                        ListState::Done(v) => top.values.extend(v.iter().cloned()),
                        ListState::Failed => top.failed = true,
                        ListState::InProgress => {
                            let from = stack.iter().position(|f| f.list == j).unwrap_or(0);
                            let mut names: Vec<&str> = stack[from..]
                                .iter()
                                .map(|f| lists.items[f.list].name.as_str())
                                .collect();
                            names.push(&lists.items[j].name);
                            let at = &lists.items[j];
                            self.problems.push(Problem {
                                code: "E_LIST_CYCLE",
                                message: format!("list cycle: {}", names.join(" -> ")),
                                loc: Loc::At(at.file, at.pos),
                                item: Some(at.name.clone()),
                            });
                            if let Some(top) = stack.last_mut() {
                                top.failed = true;
                            }
                        }
                        ListState::Unresolved => {
                            self.lists[j] = ListState::InProgress;
                            stack.push(Frame {
                                list: j,
                                next: 0,
                                values: Vec::new(),
                                failed: false,
                            });
                        }
                    }
                } else {
                    top.values.push(item.clone());
                }
                if let Some(top) = stack.last_mut() {
                    if !top.failed && top.values.len() > MAX_NODES {
                        let at = &lists.items[top.list];
                        self.problems.push(Problem {
                            code: "E_TOO_LARGE",
                            message: format!("list expands to more than {MAX_NODES} values"),
                            loc: Loc::At(at.file, at.pos),
                            item: Some(at.name.clone()),
                        });
                        top.failed = true;
                        top.values = Vec::new();
                    }
                }
            }
        }
    }
}

fn strip_quotes(item: &str) -> Option<&str> {
    let b = item.as_bytes();
    if b.len() >= 2 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] {
        Some(&item[1..item.len() - 1])
    } else {
        None
    }
}

fn push_values(items: &mut Vec<Literal>, v: &ExValue, span: Span) {
    let lit = |text: &str| Literal {
        text: text.to_string(),
        quoted: false,
        span,
    };
    match v {
        ExValue::Scalar(s) => items.push(lit(s)),
        ExValue::List(values) => items.extend(values.iter().map(|s| lit(s))),
    }
}

/// An exception value written as a transformer call without whitespace
/// (`toupper(proc.pname)`, `val(proc.pname)`) compares with that transformed field, as in
/// Falco, which pastes such a value into the condition text unquoted (falco
/// `test_rule_loader.cpp`: `exceptions_values_rhs_transformer`,
/// `exceptions_values_transformer_value_quoted`). With whitespace it stays a string, as Falco
/// quotes it (`exceptions_values_transformer_space`); the compiler then warns
/// (`W_FIELD_AS_VALUE`). Every span of the result is `span`.
fn transformer_value(text: &str, span: Span) -> Option<Rhs> {
    if text.is_empty() || text.bytes().any(crate::ast::is_ws) || !text.ends_with(')') {
        return None;
    }
    match parse_condition(&format!("evt.num = {text}")) {
        Ok(Expr::Compare {
            rhs: Rhs::Field(mut operand),
            ..
        }) => {
            operand.spans_mut(&mut |s| *s = span);
            Some(Rhs::Field(operand))
        }
        _ => None,
    }
}

/// Falco's delimiters around a list name it substitutes (`rule_loader_compiler.cpp`,
/// `resolve_list`): blanks, `(`, `)`, `,`, `=`.
fn is_falco_delim(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'(' | b')' | b',' | b'=')
}

/// Falco substitutes list names into the condition *text* before parsing, so a list whose
/// name is not one bare word (`test list`) can still be used: `evt.type in (test list)` loads
/// (falco `test_rule_loader.cpp`: `list_name_invalid`). Vigil expands lists on the parsed
/// tree, so such a name is first masked in the text: outside quoted strings, each occurrence
/// delimited as Falco delimits it has its delimiter bytes replaced by `\x01`, which keeps
/// the text's length (so positions stay right) and makes it one bare word. Returns the
/// masked text and the masked names with the real ones, or `None` when nothing was masked.
fn mask_list_names(
    text: &str,
    col: &Collected,
    odd_lists: &[usize],
) -> Option<(String, Vec<(String, String)>)> {
    if odd_lists.is_empty() {
        return None;
    }
    // Bytes inside quoted strings (libsinsp's rule: a quote after a backslash does not
    // close), which are never masked.
    let bytes = text.as_bytes();
    let mut quoted = vec![false; bytes.len()];
    let mut open: Option<u8> = None;
    for (i, &b) in bytes.iter().enumerate() {
        match open {
            Some(q) => {
                quoted[i] = true;
                if b == q && bytes[i - 1] != b'\\' {
                    open = None;
                }
            }
            None if b == b'"' || b == b'\'' => {
                quoted[i] = true;
                open = Some(b);
            }
            None => {}
        }
    }
    let mut out = bytes.to_vec();
    let mut names = Vec::new();
    for &j in odd_lists {
        let name = col.lists.items[j].name.as_bytes();
        let mut from = 0;
        while let Some(at) = text[from..].find(col.lists.items[j].name.as_str()) {
            let start = from + at;
            let end = start + name.len();
            // The next search starts at the next character (not byte: `text` is UTF-8).
            from = start + text[start..].chars().next().map_or(1, char::len_utf8);
            let bounded = (start == 0 || is_falco_delim(bytes[start - 1]))
                && (end == bytes.len() || is_falco_delim(bytes[end]));
            if !bounded || quoted[start..end].iter().any(|&q| q) {
                continue;
            }
            for (k, &b) in name.iter().enumerate() {
                if is_falco_delim(b) {
                    out[start + k] = 0x01;
                }
            }
            let masked = String::from_utf8_lossy(&out[start..end]).into_owned();
            if !names.iter().any(|(m, _)| *m == masked) {
                names.push((masked, col.lists.items[j].name.clone()));
            }
        }
    }
    if names.is_empty() {
        return None;
    }
    // Only ASCII delimiters were replaced by an ASCII byte: still valid UTF-8.
    let masked = String::from_utf8(out).expect("ASCII bytes replaced by ASCII bytes");
    Some((masked, names))
}

/// Puts the real list names back in place of the masked ones (see [`mask_list_names`]).
fn unmask_list_names(expr: &mut Expr, names: &[(String, String)]) {
    let mut stack = vec![expr];
    while let Some(e) = stack.pop() {
        match e {
            Expr::And(v) | Expr::Or(v) => stack.extend(v.iter_mut()),
            Expr::Not(b) => stack.push(b),
            Expr::Compare { rhs, .. } => {
                let items: &mut [Literal] = match rhs {
                    Rhs::List(items) | Rhs::Modified(_, items) => items,
                    Rhs::Value(lit) => std::slice::from_mut(lit),
                    Rhs::Field(_) => &mut [],
                };
                for lit in items.iter_mut().filter(|l| !l.quoted) {
                    if let Some((_, real)) = names.iter().find(|(m, _)| *m == lit.text) {
                        lit.text.clone_from(real);
                    }
                }
            }
            _ => {}
        }
    }
}

/// Registers a one-character synthetic text at `pos` and returns its span.
fn fixed_span(texts: &mut Texts, file: usize, pos: Pos, owner: &str) -> Option<Span> {
    let text = texts.add(
        vec![Piece {
            text: " ".into(),
            file,
            origin: Origin::Fixed(pos),
        }],
        owner,
    )?;
    Some(Span {
        start: text.base,
        end: text.base + 1,
    })
}

/// Parses exception field names (`proc.name`, `proc.aname[2]`, `tolower(fd.name)`) into
/// operands by parsing `FIELD exists`. `Err(field)` for the first invalid one.
fn exception_operands(ex: &ExceptionDef) -> Result<Vec<Operand>, String> {
    ex.fields
        .iter()
        .map(|f| match parse_condition(&format!("{f} exists")) {
            Ok(Expr::Exists { lhs, .. }) => Ok(lhs),
            _ => Err(f.clone()),
        })
        .collect()
}

/// The first span found in `e` (depth-first), or an empty span.
fn first_span(e: &Expr) -> Span {
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::And(v) | Expr::Or(v) => stack.extend(v.iter().rev()),
            Expr::Not(b) => stack.push(b),
            Expr::Macro { span, .. } | Expr::Compare { span, .. } | Expr::Exists { span, .. } => {
                return *span
            }
            Expr::Const(_) => {}
        }
    }
    Span::default()
}

/// The depth of an expression tree (iterative: the tree may come from untrusted input).
pub fn depth(e: &Expr) -> usize {
    let mut max = 0;
    let mut stack = vec![(e, 1usize)];
    while let Some((e, d)) = stack.pop() {
        max = max.max(d);
        match e {
            Expr::And(v) | Expr::Or(v) => stack.extend(v.iter().map(|c| (c, d + 1))),
            Expr::Not(b) => stack.push((b, d + 1)),
            _ => {}
        }
    }
    max
}

/// Adds `base` to every span in `e` (iterative).
pub fn shift(e: &mut Expr, base: u32) {
    fn s(span: &mut Span, base: u32) {
        span.start = span.start.saturating_add(base);
        span.end = span.end.saturating_add(base);
    }
    fn op(o: &mut Operand, base: u32) {
        o.spans_mut(&mut |span| s(span, base));
    }
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match e {
            Expr::And(v) | Expr::Or(v) => stack.extend(v.iter_mut()),
            Expr::Not(b) => stack.push(b),
            Expr::Macro { span, .. } => s(span, base),
            Expr::Exists { lhs, span } => {
                s(span, base);
                op(lhs, base);
            }
            Expr::Compare { lhs, rhs, span, .. } => {
                s(span, base);
                op(lhs, base);
                match rhs {
                    Rhs::Value(l) => s(&mut l.span, base),
                    Rhs::List(items) | Rhs::Modified(_, items) => {
                        items.iter_mut().for_each(|l| s(&mut l.span, base))
                    }
                    Rhs::Field(o) => op(o, base),
                }
            }
            Expr::Const(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_one_level_of_matching_quotes() {
        assert_eq!(strip_quotes("\"10.0.0.0/8\""), Some("10.0.0.0/8"));
        assert_eq!(strip_quotes("'a'"), Some("a"));
        assert_eq!(strip_quotes("\"a'"), None);
        assert_eq!(strip_quotes("a"), None);
        assert_eq!(strip_quotes("\""), None);
    }

    #[test]
    fn shift_and_depth_walk_every_node() {
        let mut e = parse_condition("not (a and proc.name in (x, y)) or b").unwrap();
        assert_eq!(depth(&e), 4);
        let before = first_span(&e);
        shift(&mut e, 100);
        assert_eq!(first_span(&e).start, before.start + 100);
    }
}

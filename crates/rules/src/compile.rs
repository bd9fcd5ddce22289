//! Type checking and evaluator construction: a resolved [`Expr`] (macros and lists already
//! expanded by the loader) → [`Filter`]; output text → [`Template`].
//!
//! Field references are resolved against a [`Catalog`] and interned into slots shared by every
//! filter and template of one [`Compiler`], so that one event extracts a field at most once. The
//! compiler collects every problem of a condition instead of stopping at the first.

use crate::ast::{
    CallArg, CmpOp, Expr, Literal, Modifier, MultiCall, MultiFn, Operand, Rhs, Span, Transformer,
};
use crate::diag::CompileError;
use crate::eval::{
    CArg, CBase, CMulti, COperand, FieldSlots, Filter, Glob, Node, PathSet, Test, NO_LEAF, V,
};
use crate::parser::MAX_DEPTH;

/// Deepest tree the compiler accepts. Parser output is at most about `2 * MAX_DEPTH` deep
/// (`and` and `or` levels per parenthesis plus `not`s), so it always fits; deeper trees can only
/// come from macro expansion. Evaluation recurses over the tree, so this bounds its stack use.
pub const MAX_TREE_DEPTH: usize = 2 * MAX_DEPTH + 48;
use crate::template::{parse_template, Segment, TField, Template};
use aho_corasick::AhoCorasick;
use memchr::memmem;
use rustc_hash::FxHashMap;
use std::net::IpAddr;
use vigil_fields::{Catalog, FieldRef, FieldType, IpNet, LookupError};

fn err(code: &'static str, message: String, span: Span) -> CompileError {
    CompileError {
        code,
        message,
        span,
    }
}

/// The type of an operand after its transformers.
#[derive(Clone, Copy, Debug)]
struct OperandType {
    ty: FieldType,
    is_list: bool,
}

fn is_stringy(ty: FieldType) -> bool {
    matches!(ty, FieldType::Str | FieldType::Buffer)
}

/// Compiles the conditions and templates of one ruleset against a catalog.
pub struct Compiler<'c> {
    catalog: &'c dyn Catalog,
    slots: FieldSlots,
    slot_of: FxHashMap<FieldRef, u32>,
    /// Structural keys: a leaf's canonical text, and a group's kind with its children's keys.
    leaf_keys: FxHashMap<String, u32>,
    group_keys: FxHashMap<(bool, Box<[u32]>), u32>,
    /// The memo slot of each group key that is memoized.
    memo_of: FxHashMap<u32, u32>,
    /// Deprecated fields met while resolving operands, moved into the current filter's
    /// warnings.
    deprecations: Vec<CompileError>,
}

/// Groups with at least this many leaves are memoized: below it, re-evaluating is as cheap as
/// checking the memo.
const MEMO_MIN_LEAVES: u32 = 3;
/// Groups taller than this are not memoized: macro expansions are shallow, and a wrapper per
/// level would double the evaluator's recursion depth on pathologically deep trees.
const MEMO_MAX_HEIGHT: u32 = 32;

impl<'c> Compiler<'c> {
    pub fn new(catalog: &'c dyn Catalog) -> Self {
        Compiler {
            catalog,
            slots: FieldSlots::default(),
            slot_of: FxHashMap::default(),
            leaf_keys: FxHashMap::default(),
            group_keys: FxHashMap::default(),
            memo_of: FxHashMap::default(),
            deprecations: Vec::new(),
        }
    }

    /// Compiles a fully resolved condition (macros expanded, list names expanded by the loader);
    /// a remaining [`Expr::Macro`] yields `E_UNKNOWN_MACRO`. Returns every error found.
    pub fn compile(&mut self, expr: &Expr) -> Result<Filter, Vec<CompileError>> {
        let mut errors = Vec::new();
        let mut warnings = Vec::new();
        self.deprecations.clear();
        let root = self.node(expr, &mut errors, &mut warnings);
        warnings.append(&mut self.deprecations);
        if !errors.is_empty() {
            return Err(errors);
        }
        let n_types = self.catalog.n_event_types();
        let words = n_types.div_ceil(64);
        let set = event_types(&root, false, words, n_types, &|_| None);
        let all = (0..n_types).all(|i| set[i / 64] & (1u64 << (i % 64)) != 0);
        let event_types = if all {
            None
        } else {
            Some(
                (0..n_types)
                    .filter(|&i| set[i / 64] & (1u64 << (i % 64)) != 0)
                    .filter_map(|i| u16::try_from(i).ok())
                    .collect(),
            )
        };
        let entry_code = if self.tests_result(&root) {
            Some(crate::eval::lower(self.relax(&root, true)))
        } else {
            None
        };
        let mut required = Vec::new();
        required_numbers(&root, &mut required);
        let mut required_substrings = Vec::new();
        self::required_substrings(&root, &mut required_substrings);
        let mut fields = Vec::new();
        fields_of(&root, &mut fields);
        let failed = self.failure_fields();
        let mut failure_types = self::event_types(&root, false, words, n_types, &|leaf| {
            failed.known(leaf, false)
        });
        // Where `fd.num` is the result (a descriptor-returning call), its tests decide too.
        if let Some(fd_num) = failed.fd_num.as_ref().filter(|f| fields.contains(f)) {
            let with_fd = self::event_types(&root, false, words, n_types, &|leaf| {
                failed.known(leaf, true)
            });
            for t in (0..n_types).filter_map(|t| u16::try_from(t).ok()) {
                if self.catalog.is_result_in(fd_num, t) {
                    let (w, bit) = (usize::from(t) / 64, 1u64 << (t % 64));
                    failure_types[w] = (failure_types[w] & !bit) | (with_fd[w] & bit);
                }
            }
        }
        for (w, s) in failure_types.iter_mut().zip(&set) {
            *w &= s;
        }
        // Kept for constant folding only when shallow: cloning, folding (and dropping) walk
        // it recursively, and hostile conditions may nest up to `MAX_TREE_DEPTH`.
        let tree = (tree_depth(&root) <= FOLD_MAX_DEPTH).then(|| root.clone());
        Ok(Filter {
            tree,
            code: crate::eval::lower(root),
            entry_code,
            required,
            required_substrings,
            event_types,
            failure_types: failure_types.into(),
            fields,
            warnings,
        })
    }

    /// The fields that describe a syscall's outcome, as this catalog names them.
    fn failure_fields(&self) -> FailureFields {
        let find = |name: &str| self.catalog.lookup(name, None).ok();
        FailureFields {
            res: find("evt.res"),
            rawres: find("evt.rawres"),
            failed: find("evt.failed"),
            fd_num: find("fd.num"),
        }
    }

    fn is_result_operand(&self, op: &COperand) -> bool {
        op.any_field(&|f| self.catalog.depends_on_result(f))
    }

    /// Whether a leaf of `node` tests a result-dependent field.
    fn tests_result(&self, node: &Node) -> bool {
        match node {
            Node::Const(_) | Node::EvtType(_) => false,
            Node::Exists { op, .. } | Node::Test { lhs: op, .. } => self.is_result_operand(op),
            Node::Fields { lhs, rhs, .. } => {
                self.is_result_operand(lhs) || self.is_result_operand(rhs)
            }
            Node::Not(inner) | Node::Memo { inner, .. } => self.tests_result(inner),
            Node::And(items) | Node::Or(items) => items.iter().any(|n| self.tests_result(n)),
        }
    }

    /// `node` with each leaf testing a result-dependent field replaced by the constant that
    /// can only widen what the whole condition matches: `true` in `positive` position, `false`
    /// under an odd number of `not`s. The result is an over-approximation: whenever `node`
    /// holds for some result, the relaxed tree holds at entry. Memo nodes are dropped (their
    /// slots belong to the exact tree).
    fn relax(&self, node: &Node, positive: bool) -> Node {
        match node {
            Node::Const(_) | Node::EvtType(_) => node.clone(),
            Node::Exists { op, .. } | Node::Test { lhs: op, .. } if self.is_result_operand(op) => {
                Node::Const(positive)
            }
            Node::Fields { lhs, rhs, .. }
                if self.is_result_operand(lhs) || self.is_result_operand(rhs) =>
            {
                Node::Const(positive)
            }
            Node::Exists { .. } | Node::Test { .. } | Node::Fields { .. } => node.clone(),
            Node::Not(inner) => Node::Not(Box::new(self.relax(inner, !positive))),
            Node::Memo { inner, .. } => self.relax(inner, positive),
            Node::And(items) => Node::And(items.iter().map(|n| self.relax(n, positive)).collect()),
            Node::Or(items) => Node::Or(items.iter().map(|n| self.relax(n, positive)).collect()),
        }
    }

    /// Compiles an output template (`%field`, `%field[arg]`, `%transformer(field)`, `%%`).
    pub fn compile_template(&mut self, text: &str) -> Result<Template, Vec<CompileError>> {
        self.compile_template_warn(text).map(|(t, _)| t)
    }

    /// [`Compiler::compile_template`], with the template's warnings: a deprecated field
    /// (`evt.dir`) in an output gets Falco's "usage of deprecated field 'evt.dir' has been
    /// detected in the rule output" (falco `test_rule_loader.cpp`: `deprecated_field_in_output`).
    pub fn compile_template_warn(
        &mut self,
        text: &str,
    ) -> Result<(Template, Vec<CompileError>), Vec<CompileError>> {
        self.deprecations.clear();
        let template = self.template(text);
        let mut warnings = std::mem::take(&mut self.deprecations);
        for w in &mut warnings {
            if w.code == "W_DEPRECATED" {
                w.message =
                    "usage of deprecated field 'evt.dir' has been detected in the rule output"
                        .to_string();
            }
        }
        template.map(|t| (t, warnings))
    }

    fn template(&mut self, text: &str) -> Result<Template, Vec<CompileError>> {
        let parsed = parse_template(text).map_err(|e| {
            vec![CompileError {
                code: e.code,
                message: e.message,
                span: e.span,
            }]
        })?;
        let mut errors = Vec::new();
        let mut fields: Vec<TField> = Vec::new();
        let mut segments = Vec::new();
        for segment in parsed {
            match segment {
                crate::template::Parsed::Text(t) => segments.push(Segment::Text(t)),
                crate::template::Parsed::Field(operand) => {
                    let name = operand.to_string();
                    if let Some(i) = fields.iter().position(|f| f.name == name) {
                        segments.push(Segment::Field(i));
                        continue;
                    }
                    match self.operand(&operand) {
                        Ok((op, ot)) => {
                            segments.push(Segment::Field(fields.len()));
                            fields.push(TField {
                                name,
                                operand: op,
                                is_list: ot.is_list,
                            });
                        }
                        Err(e) => errors.push(e),
                    }
                }
            }
        }
        if errors.is_empty() {
            Ok(Template { segments, fields })
        } else {
            Err(errors)
        }
    }

    /// The field slots of everything compiled so far; build [`crate::eval::EvalCtx`]s from them.
    pub fn slots(&self) -> &FieldSlots {
        &self.slots
    }

    pub fn finish(self) -> FieldSlots {
        self.slots
    }

    /// The canonical text of every comparison compiled so far, by the id its leaves carry
    /// (the same text in several rules is one id).
    pub fn leaf_texts(&self) -> FxHashMap<u32, Box<str>> {
        self.leaf_keys
            .iter()
            .map(|(text, &id)| (id, text.as_str().into()))
            .collect()
    }

    /// Builds the evaluation tree without recursion (post-order over an explicit work stack),
    /// so trees of any depth are safe here; deeper than [`MAX_TREE_DEPTH`] is `E_DEPTH`.
    fn node(
        &mut self,
        root: &Expr,
        errors: &mut Vec<CompileError>,
        warnings: &mut Vec<CompileError>,
    ) -> Node {
        enum Work<'e> {
            Visit(&'e Expr, usize),
            Group { is_and: bool, n: usize },
            Not,
        }
        let mut work = vec![Work::Visit(root, 0)];
        let mut done: Vec<Node> = Vec::new();
        // Beside each built node: its structural key, number of leaves and height.
        let mut keys: Vec<(u32, u32, u32)> = Vec::new();
        let mut too_deep = false;
        while let Some(item) = work.pop() {
            match item {
                Work::Visit(expr, depth) => {
                    if depth >= MAX_TREE_DEPTH {
                        if !too_deep {
                            too_deep = true;
                            errors.push(err(
                                "E_DEPTH",
                                format!("condition is nested deeper than {MAX_TREE_DEPTH} levels"),
                                first_span(expr),
                            ));
                        }
                        done.push(Node::Const(false));
                        keys.push((self.leaf_key("false".to_string()), 1, 1));
                        continue;
                    }
                    match expr {
                        Expr::And(items) | Expr::Or(items) => {
                            work.push(Work::Group {
                                is_and: matches!(expr, Expr::And(_)),
                                n: items.len(),
                            });
                            work.extend(items.iter().rev().map(|e| Work::Visit(e, depth + 1)));
                        }
                        Expr::Not(inner) => {
                            work.push(Work::Not);
                            work.push(Work::Visit(inner, depth + 1));
                        }
                        leaf => {
                            let mut node = self.leaf(leaf, errors, warnings);
                            let key = self.leaf_key(leaf.to_string());
                            node.set_leaf_id(key);
                            done.push(node);
                            keys.push((key, 1, 1));
                        }
                    }
                }
                Work::Not => {
                    let inner = done.pop().expect("the operand of not was built");
                    let (key, leaves, height) = keys.pop().expect("the operand of not has a key");
                    // `not` is keyed as a one-child "or" group of its own kind (`false`
                    // marks "not", `true` a group): a distinct namespace from and/or.
                    let not_key = self.group_key(false, Box::new([key, u32::MAX]));
                    keys.push((not_key, leaves, height + 1));
                    done.push(match inner {
                        Node::Const(v) => Node::Const(!v),
                        Node::Not(n) => *n,
                        n => Node::Not(Box::new(n)),
                    });
                }
                Work::Group { is_and, n } => {
                    let items = done.split_off(done.len() - n);
                    let child_keys = keys.split_off(keys.len() - n);
                    let leaves = child_keys.iter().map(|&(_, l, _)| l).sum::<u32>();
                    let height = 1 + child_keys.iter().map(|&(_, _, h)| h).max().unwrap_or(0);
                    let mut ids: Vec<u32> = child_keys.into_iter().map(|(k, _, _)| k).collect();
                    ids.push(u32::from(is_and));
                    let key = self.group_key(true, ids.into_boxed_slice());
                    keys.push((key, leaves, height));
                    let node = group(is_and, items);
                    done.push(match node {
                        Node::And(_) | Node::Or(_)
                            if leaves >= MEMO_MIN_LEAVES && height <= MEMO_MAX_HEIGHT =>
                        {
                            let next = u32::try_from(self.memo_of.len()).unwrap_or(u32::MAX);
                            let slot = *self.memo_of.entry(key).or_insert(next);
                            self.slots.n_memos = self.memo_of.len();
                            Node::Memo {
                                slot,
                                inner: Box::new(node),
                            }
                        }
                        other => other,
                    });
                }
            }
        }
        done.pop().expect("the root was built")
    }

    /// The structural key of a leaf, from its canonical text.
    fn leaf_key(&mut self, text: String) -> u32 {
        let next = u32::try_from(self.leaf_keys.len() + self.group_keys.len()).unwrap_or(u32::MAX);
        *self.leaf_keys.entry(text).or_insert(next)
    }

    /// The structural key of a group (or `not`) from its kind and its children's keys.
    fn group_key(&mut self, is_group: bool, children: Box<[u32]>) -> u32 {
        let next = u32::try_from(self.leaf_keys.len() + self.group_keys.len()).unwrap_or(u32::MAX);
        *self.group_keys.entry((is_group, children)).or_insert(next)
    }

    fn leaf(
        &mut self,
        expr: &Expr,
        errors: &mut Vec<CompileError>,
        warnings: &mut Vec<CompileError>,
    ) -> Node {
        match expr {
            Expr::Const(v) => Node::Const(*v),
            Expr::Macro { name, span } => {
                errors.push(err(
                    "E_UNKNOWN_MACRO",
                    format!("unknown macro `{name}`"),
                    *span,
                ));
                Node::Const(false)
            }
            Expr::Exists { lhs, .. } => match self.operand(lhs) {
                Ok((op, _)) => Node::Exists { op, id: NO_LEAF },
                Err(e) => {
                    errors.push(e);
                    Node::Const(false)
                }
            },
            Expr::Compare { lhs, op, rhs, span } => {
                match self.compare(lhs, *op, rhs, *span, warnings) {
                    Ok(node) => node,
                    Err(mut e) => {
                        errors.append(&mut e);
                        Node::Const(false)
                    }
                }
            }
            Expr::And(_) | Expr::Or(_) | Expr::Not(_) => {
                unreachable!("groups are handled by Compiler::node")
            }
        }
    }

    /// Resolves a field reference and its transformers.
    fn operand(&mut self, operand: &Operand) -> Result<(COperand, OperandType), CompileError> {
        let field = &operand.field;
        if let Some(call) = &operand.call {
            let (multi, ot) = self.multi(call, operand)?;
            let (transformers, ot) = self.transformers(operand, ot)?;
            return Ok((
                COperand {
                    base: CBase::Multi(Box::new(multi)),
                    transformers,
                },
                ot,
            ));
        }
        let fref = match self.catalog.lookup(&field.name, field.arg.as_deref()) {
            Ok(r) => r,
            Err(LookupError::Unknown) => {
                return Err(err(
                    "E_UNKNOWN_FIELD",
                    format!("unknown field `{}`", field.name),
                    field.span,
                ))
            }
            Err(LookupError::BadArg(why)) => {
                return Err(err(
                    "E_FIELD_ARG",
                    format!("bad argument for field `{}`: {why}", field.name),
                    field.span,
                ))
            }
        };
        let def = self.catalog.def(fref.id);
        if let Some(why) = self.catalog.never_has_value(&fref) {
            self.deprecations.push(err(
                "W_FIELD_NO_VALUE",
                format!("`{}` never has a value in vigil: {why}", field.name),
                field.span,
            ));
        }
        if def.name == "evt.dir" {
            self.deprecations.push(err(
                "W_DEPRECATED",
                "`evt.dir` is deprecated: every event is a completed (exit) event".to_string(),
                field.span,
            ));
        }
        let ot = OperandType {
            ty: def.ty,
            is_list: def.is_list,
        };
        let (transformers, ot) = self.transformers(operand, ot)?;
        let slot = match self.slot_of.get(&fref) {
            Some(&s) => s,
            None => {
                let s = u32::try_from(self.slots.refs.len()).expect("fewer than 2^32 fields");
                self.slots.refs.push(fref.clone());
                self.slot_of.insert(fref.clone(), s);
                s
            }
        };
        Ok((
            COperand {
                base: CBase::Field { slot, field: fref },
                transformers,
            },
            ot,
        ))
    }

    /// Type-checks the single-value transformers of `operand` over a base of type `ot`.
    #[allow(clippy::type_complexity)]
    fn transformers(
        &mut self,
        operand: &Operand,
        mut ot: OperandType,
    ) -> Result<(Box<[(Transformer, bool)]>, OperandType), CompileError> {
        let field = &operand.field;
        let mut transformers = Vec::with_capacity(operand.transformers.len());
        // The AST lists transformers outermost first; they apply innermost first.
        for &t in operand.transformers.iter().rev() {
            let aggregate = t == Transformer::Len && ot.is_list;
            if !aggregate && !is_stringy(ot.ty) {
                return Err(err(
                    "E_BAD_OPERATOR",
                    format!(
                        "transformer `{}` does not apply to {} values (field `{}`)",
                        t.as_str(),
                        ot.ty.name(),
                        field.name
                    ),
                    field.span,
                ));
            }
            ot = match t {
                Transformer::Len => OperandType {
                    ty: FieldType::I64,
                    is_list: false,
                },
                _ => OperandType {
                    ty: FieldType::Str,
                    is_list: ot.is_list,
                },
            };
            transformers.push((t, aggregate));
        }
        Ok((transformers.into_boxed_slice(), ot))
    }

    /// Compiles a multivalue transformer with libsinsp's argument checks (the constructors of
    /// `sinsp_filter_multivalue_transformer_{join,concat,getopt}`); a failed check is
    /// `E_TRANSFORMER_ARGS` at the call.
    fn multi(
        &mut self,
        call: &MultiCall,
        operand: &Operand,
    ) -> Result<(CMulti, OperandType), CompileError> {
        let at = operand.field.span;
        let bad = |message: &str| err("E_TRANSFORMER_ARGS", message.to_string(), at);
        let mut args = Vec::with_capacity(call.args.len());
        let mut types = Vec::with_capacity(call.args.len());
        for arg in &call.args {
            let (c, ot) = self.call_arg(arg)?;
            args.push(c);
            types.push(ot);
        }
        let name = call.func.as_str();
        let selector = match (&operand.field.arg, call.func) {
            (None, _) => None,
            (Some(a), MultiFn::Getopt) if a.len() == 1 => Some(a.as_bytes()[0]),
            (Some(_), MultiFn::Getopt) => {
                return Err(err(
                    "E_FIELD_ARG",
                    "getopt() field argument must be a single option character".to_string(),
                    at,
                ))
            }
            (Some(_), _) => {
                return Err(err(
                    "E_FIELD_ARG",
                    format!("transformer `{name}` does not support field arguments"),
                    at,
                ))
            }
        };
        let string = |t: &OperandType| t.ty == FieldType::Str;
        let result_list = match call.func {
            MultiFn::Join => {
                if types.len() != 2 {
                    return Err(bad(
                        "join() requires exactly 2 arguments: separator and list",
                    ));
                }
                if types[0].is_list {
                    return Err(bad(
                        "join() first argument (separator) must be a single value, not a list",
                    ));
                }
                if !types[1].is_list {
                    return Err(bad("join() second argument must be a list"));
                }
                false
            }
            MultiFn::Concat => {
                if types.len() < 2 {
                    return Err(bad("concat() requires at least 2 arguments"));
                }
                if types.iter().any(|t| !string(t) || t.is_list) {
                    return Err(bad("concat() arguments must be strings"));
                }
                false
            }
            MultiFn::Getopt => {
                if types.len() != 2 {
                    return Err(bad(
                        "getopt() requires exactly 2 arguments: args list and optstring",
                    ));
                }
                if !types[0].is_list {
                    return Err(bad("getopt() first argument must be a list"));
                }
                if types[1].is_list {
                    return Err(bad(
                        "getopt() second argument (optstring) must be a single value",
                    ));
                }
                if !string(&types[0]) || !string(&types[1]) {
                    return Err(bad("getopt() arguments must be strings"));
                }
                selector.is_none()
            }
        };
        Ok((
            CMulti {
                func: call.func,
                args: args.into_boxed_slice(),
                selector,
            },
            OperandType {
                ty: FieldType::Str,
                is_list: result_list,
            },
        ))
    }

    /// One argument of a multivalue transformer and its type. A parenthesised list is a list
    /// of strings (libsinsp's `list_check`, numbers printed as text).
    fn call_arg(&mut self, arg: &CallArg) -> Result<(CArg, OperandType), CompileError> {
        match arg {
            CallArg::Value(lit) if lit.text.contains('\0') => Err(nul_error(lit)),
            CallArg::Value(lit) => Ok((
                CArg::Const(lit.bytes().into_owned().into_boxed_slice()),
                OperandType {
                    ty: FieldType::Str,
                    is_list: false,
                },
            )),
            CallArg::Operand(op) => {
                let (c, ot) = self.operand(op)?;
                Ok((CArg::Operand(c), ot))
            }
            CallArg::List(items, _) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.call_arg(item)?.0);
                }
                Ok((
                    CArg::List(out.into_boxed_slice()),
                    OperandType {
                        ty: FieldType::Str,
                        is_list: true,
                    },
                ))
            }
        }
    }

    fn compare(
        &mut self,
        lhs: &Operand,
        op: CmpOp,
        rhs: &Rhs,
        span: Span,
        warnings: &mut Vec<CompileError>,
    ) -> Result<Node, Vec<CompileError>> {
        let (lop, lty) = self.operand(lhs).map_err(|e| vec![e])?;
        let op_span = span;
        let bad_op = |ty: FieldType| {
            vec![err(
                "E_BAD_OPERATOR",
                format!(
                    "operator `{}` does not apply to {} field `{}`",
                    op.as_str(),
                    ty.name(),
                    lhs.field.name
                ),
                op_span,
            )]
        };
        let items: Vec<&Literal> = match rhs {
            Rhs::Field(other) => {
                let (rop, rty) = self.operand(other).map_err(|e| vec![e])?;
                let compatible = (is_stringy(lty.ty) && is_stringy(rty.ty))
                    || (lty.ty.is_numeric() && rty.ty.is_numeric())
                    || lty.ty == rty.ty;
                let allowed = match op {
                    CmpOp::Eq | CmpOp::Ne => true,
                    CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => {
                        lty.ty.is_numeric() || lty.ty == FieldType::Str
                    }
                    CmpOp::Contains | CmpOp::IContains | CmpOp::StartsWith | CmpOp::EndsWith => {
                        is_stringy(lty.ty)
                    }
                    // The other field's values are the set (libs 0.25).
                    CmpOp::In | CmpOp::Intersects => true,
                    CmpOp::Pmatch => lty.ty == FieldType::Str,
                    _ => false,
                };
                if !compatible || !allowed {
                    return Err(vec![err(
                        "E_BAD_OPERATOR",
                        format!(
                            "operator `{}` cannot compare {} field `{}` with {} field `{}`",
                            op.as_str(),
                            lty.ty.name(),
                            lhs.field.name,
                            rty.ty.name(),
                            other.field.name
                        ),
                        span,
                    )]);
                }
                return Ok(Node::Fields {
                    lhs: lop,
                    op,
                    rhs: rop,
                    all: op == CmpOp::In && lty.is_list,
                    id: NO_LEAF,
                });
            }
            Rhs::Modified(m, items) => {
                return self.modified((lhs, &lop, lty), (op, *m), items, span, warnings);
            }
            Rhs::Value(lit) => vec![lit],
            Rhs::List(items) => {
                if !op.takes_list() {
                    return Err(vec![err(
                        "E_BAD_VALUE",
                        format!("operator `{}` takes one value, not a list", op.as_str()),
                        span,
                    )]);
                }
                items.iter().collect()
            }
        };

        self.value_warnings(op, &items, warnings);
        nul_check(lty.ty, &items)?;
        // `x in ()` on a single-valued field can never hold (on a list field it holds for an
        // empty value, a subset of any set).
        if op.takes_list() && items.is_empty() && !lty.is_list {
            return Ok(Node::Const(false));
        }

        // `evt.type` tests become bit tests on the event type id.
        let is_evt_type = lhs.transformers.is_empty()
            && lhs.field.arg.is_none()
            && lop
                .plain_field()
                .is_some_and(|f| f.id == self.catalog.evt_type_field())
            && matches!(op, CmpOp::Eq | CmpOp::Ne | CmpOp::In | CmpOp::Intersects);
        if is_evt_type {
            let n = self.catalog.n_event_types();
            let mut bits = vec![0u64; n.div_ceil(64)].into_boxed_slice();
            for lit in &items {
                match self.catalog.event_type_id(&lit.text) {
                    Some(id) if usize::from(id) < n => {
                        bits[usize::from(id) / 64] |= 1u64 << (id % 64);
                    }
                    _ => warnings.push(err(
                        "W_UNKNOWN_EVENT_TYPE",
                        format!("unknown event type `{}`", lit.text),
                        lit.span,
                    )),
                }
            }
            let node = Node::EvtType(bits);
            return Ok(if op == CmpOp::Ne {
                Node::Not(Box::new(node))
            } else {
                node
            });
        }

        let test = self.test(op, lty.ty, &items, span).map_err(|e| {
            if e.is_empty() {
                bad_op(lty.ty)
            } else {
                e
            }
        })?;
        // `in` on a list field is a subset test; `!=` on a field standing for both endpoints
        // of a connection (`fd.ip != 0.0.0.0`) means "no endpoint equals" (libsinsp's
        // `compare_ip`/`compare_port`/`compare_net` require every endpoint to differ).
        let all = (op == CmpOp::In && lty.is_list)
            || (op == CmpOp::Ne
                && lop
                    .plain_field()
                    .is_some_and(|f| self.catalog.is_endpoint_pair(f)));
        Ok(Node::Test {
            lhs: lop,
            test,
            all,
            id: NO_LEAF,
        })
    }

    /// `lhs OP MOD (items)`: one test per item, combined by the modifier (libs 0.25: the
    /// left-hand side must be single-valued; an empty list never matches). `= anyof` is an
    /// `in` set and `evt.type = anyof` / `evt.type != allof` stay event-type bit tests, so
    /// such rules are indexed by event type like their `in` spelling.
    /// libsinsp's compiler warnings on constant values (`sinsp_filter_compiler::
    /// check_value_and_add_warnings`), for every value, quoted or not, in lists too:
    /// - a value that, without its whitespace, names a field ("may be a valid field misused as
    ///   a const string value"; `val(…)` compares with the field) or looks like a transformer
    ///   call (`toupper( proc.name)`, quoted or with spaces, is a string);
    /// - a `regex` value with no regex syntax beyond anchors and leading/trailing `.*`, `.+`,
    ///   `.?` (a simpler operator does the same).
    fn value_warnings(&self, op: CmpOp, items: &[&Literal], warnings: &mut Vec<CompileError>) {
        for lit in items {
            let text = &lit.text;
            if op == CmpOp::Regex && regex_is_plain(text) {
                warnings.push(err(
                    "W_REGEX_SIMPLE",
                    format!(
                        "regex check with '{text}' may be optimized with simpler operators such as '=', 'contains', 'startswith', 'endswith'"
                    ),
                    lit.span,
                ));
            }
            let nospaces: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            if self.names_field(&nospaces) {
                warnings.push(err(
                    "W_FIELD_AS_VALUE",
                    format!(
                        "'{text}' may be a valid field misused as a const string value (write `val({nospaces})` to compare with the field)"
                    ),
                    lit.span,
                ));
            }
            let looks_like_call = ["val"]
                .into_iter()
                .chain(TRANSFORMER_NAMES.iter().copied())
                .any(|t| {
                    nospaces.len() >= t.len() + 2
                        && nospaces.starts_with(t)
                        && nospaces.as_bytes()[t.len()] == b'('
                        && nospaces.ends_with(')')
                });
            if looks_like_call {
                warnings.push(err(
                    "W_FIELD_AS_VALUE",
                    format!(
                        "'{text}' may be a valid field transformer misused as a const string value"
                    ),
                    lit.span,
                ));
            }
        }
    }

    /// Whether `text` is a field the catalog knows, with its argument if any (`proc.aname[2]`).
    fn names_field(&self, text: &str) -> bool {
        if !text.contains('.') || !text.starts_with(|c: char| c.is_ascii_alphabetic()) {
            return false;
        }
        match crate::parser::parse_condition(&format!("{text} exists")) {
            Ok(Expr::Exists { lhs, .. }) if lhs.transformers.is_empty() && lhs.call.is_none() => {
                self.catalog
                    .lookup(&lhs.field.name, lhs.field.arg.as_deref())
                    .is_ok()
            }
            _ => false,
        }
    }

    fn modified(
        &mut self,
        (lhs, lop, lty): (&Operand, &COperand, OperandType),
        (op, m): (CmpOp, Modifier),
        items: &[Literal],
        span: Span,
        warnings: &mut Vec<CompileError>,
    ) -> Result<Node, Vec<CompileError>> {
        if op.takes_list() {
            return Err(vec![err(
                "E_BAD_OPERATOR",
                format!(
                    "operator `{}` takes a list and cannot have the modifier `{}`",
                    op.as_str(),
                    m.as_str()
                ),
                span,
            )]);
        }
        if lty.is_list {
            return Err(vec![err(
                "E_BAD_OPERATOR",
                format!(
                    "modifier `{}` needs a single-valued left-hand side, and `{}` is a list",
                    m.as_str(),
                    lhs.field.name
                ),
                span,
            )]);
        }
        if items.is_empty() {
            return Ok(Node::Const(false));
        }
        let refs: Vec<&Literal> = items.iter().collect();
        nul_check(lty.ty, &refs)?;
        let is_evt_type = lhs.transformers.is_empty()
            && lhs.field.arg.is_none()
            && lop
                .plain_field()
                .is_some_and(|f| f.id == self.catalog.evt_type_field());
        let as_set = matches!((op, m), (CmpOp::Eq, Modifier::AnyOf));
        let evt_type_set =
            is_evt_type && (as_set || matches!((op, m), (CmpOp::Ne, Modifier::AllOf)));
        if !evt_type_set {
            // (An `evt.type` set goes through `compare`, which warns.)
            self.value_warnings(op, &refs, warnings);
        }
        if evt_type_set {
            let rhs = Rhs::List(items.to_vec());
            let node = self.compare(lhs, CmpOp::In, &rhs, span, warnings)?;
            return Ok(if as_set {
                node
            } else {
                Node::Not(Box::new(node))
            });
        }
        let bad_op = |ty: FieldType| {
            vec![err(
                "E_BAD_OPERATOR",
                format!(
                    "operator `{}` does not apply to {} field `{}`",
                    op.as_str(),
                    ty.name(),
                    lhs.field.name
                ),
                span,
            )]
        };
        let or_bad = |e: Vec<CompileError>| if e.is_empty() { bad_op(lty.ty) } else { e };
        if as_set {
            let test = self.test(CmpOp::In, lty.ty, &refs, span).map_err(or_bad)?;
            return Ok(Node::Test {
                lhs: lop.clone(),
                test,
                all: false,
                id: NO_LEAF,
            });
        }
        let mut tests = Vec::with_capacity(items.len());
        let mut errors = Vec::new();
        for lit in &refs {
            match self.test(op, lty.ty, std::slice::from_ref(lit), span) {
                Ok(t) => tests.push(t),
                // The operator does not apply: say so once, not once per item.
                Err(e) if e.is_empty() => return Err(bad_op(lty.ty)),
                Err(e) => errors.extend(e),
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Node::Test {
            lhs: lop.clone(),
            test: Test::Multi(m, tests.into_boxed_slice()),
            all: false,
            id: NO_LEAF,
        })
    }

    /// Builds the test of `op` with literal `items` for values of type `ty`. An empty error
    /// vector means "operator not applicable".
    fn test(
        &self,
        op: CmpOp,
        ty: FieldType,
        items: &[&Literal],
        span: Span,
    ) -> Result<Test, Vec<CompileError>> {
        let single = || -> &Literal { items.first().copied().expect("one value") };
        if items.is_empty() && !op.takes_list() {
            return Err(vec![err("E_BAD_VALUE", "missing value".to_string(), span)]);
        }
        let bad_value = |lit: &Literal, what: &str| {
            err(
                "E_BAD_VALUE",
                format!("`{}` is not {what}", lit.text),
                lit.span,
            )
        };
        let collect = |parse: &dyn Fn(&Literal) -> Result<(), CompileError>| {
            let errors: Vec<CompileError> = items.iter().filter_map(|l| parse(l).err()).collect();
            if errors.is_empty() {
                Ok(())
            } else {
                Err(errors)
            }
        };
        match ty {
            // libsinsp compares byte buffers only by equality, containment and prefix/suffix
            // (`evt.buffer icontains x` and `glob`, `regex`, `pmatch`, `<` are refused).
            FieldType::Buffer
                if !matches!(
                    op,
                    CmpOp::Eq
                        | CmpOp::Ne
                        | CmpOp::Contains
                        | CmpOp::BContains
                        | CmpOp::StartsWith
                        | CmpOp::BStartsWith
                        | CmpOp::EndsWith
                        | CmpOp::In
                        | CmpOp::Intersects
                ) =>
            {
                Err(Vec::new())
            }
            // `bcontains`/`bstartswith` are byte-buffer operators: libsinsp refuses them on
            // strings (`filter_compiler.ut.cpp`: `operators_field_types_compatibility`).
            FieldType::Str if matches!(op, CmpOp::BContains | CmpOp::BStartsWith) => {
                Err(Vec::new())
            }
            FieldType::Str | FieldType::Buffer => {
                let bytes = || single().bytes().into_owned().into_boxed_slice();
                Ok(match op {
                    CmpOp::Eq => Test::StrEq(bytes()),
                    CmpOp::Ne => Test::StrNe(bytes()),
                    CmpOp::Contains => Test::Contains(Box::new(
                        memmem::Finder::new(&single().bytes()).into_owned(),
                    )),
                    CmpOp::IContains => {
                        let ac = AhoCorasick::builder()
                            .ascii_case_insensitive(true)
                            .build([&*single().bytes()])
                            .map_err(|e| vec![err("E_BAD_VALUE", e.to_string(), span)])?;
                        Test::IContains(ac)
                    }
                    CmpOp::StartsWith => Test::StartsWith(bytes()),
                    CmpOp::EndsWith => Test::EndsWith(bytes()),
                    CmpOp::BContains | CmpOp::BStartsWith => {
                        let lit = single();
                        let Some(decoded) = decode_hex(&lit.text) else {
                            return Err(vec![err(
                                "E_BAD_OPERATOR",
                                format!(
                                    "operator `{}` needs hexadecimal bytes, not `{}`",
                                    op.as_str(),
                                    lit.text
                                ),
                                lit.span,
                            )]);
                        };
                        if op == CmpOp::BContains {
                            Test::Contains(Box::new(memmem::Finder::new(&decoded).into_owned()))
                        } else {
                            Test::StartsWith(decoded.into_boxed_slice())
                        }
                    }
                    CmpOp::Glob | CmpOp::IGlob => {
                        let lit = single();
                        let glob = Glob::new(&lit.bytes(), op == CmpOp::IGlob).map_err(|why| {
                            vec![err("E_BAD_VALUE", format!("bad glob: {why}"), lit.span)]
                        })?;
                        Test::Glob(glob)
                    }
                    CmpOp::Regex => {
                        let lit = single();
                        // The value the pattern meets has each invalid sequence replaced by
                        // U+FFFD (`Test::Regex`); a pattern that is not UTF-8 (a `\xHH` above
                        // `\x7f`) is refused, as RE2 refuses it in libsinsp.
                        let Ok(pattern) = String::from_utf8(lit.bytes().into_owned()) else {
                            return Err(vec![err(
                                "E_BAD_VALUE",
                                "bad regex: the pattern is not valid UTF-8 (a regex sees \
                                 invalid bytes as U+FFFD: match that character or `.`)"
                                    .to_owned(),
                                lit.span,
                            )]);
                        };
                        let re = regex::RegexBuilder::new(&format!(r"\A(?:{pattern})\z"))
                            .size_limit(1 << 22)
                            .build()
                            .map_err(|e| {
                                let first = e.to_string();
                                let short = first.lines().last().unwrap_or("").trim().to_string();
                                vec![err("E_BAD_VALUE", format!("bad regex: {short}"), lit.span)]
                            })?;
                        Test::Regex(re)
                    }
                    CmpOp::In | CmpOp::Intersects => {
                        let owned: Vec<_> = items.iter().map(|l| l.bytes()).collect();
                        Test::StrSet(owned.iter().map(|b| &b[..]).collect())
                    }
                    CmpOp::Pmatch => {
                        let owned: Vec<_> = items.iter().map(|l| l.bytes()).collect();
                        let set = PathSet::new(owned.iter().map(|b| &b[..])).map_err(|why| {
                            vec![err("E_BAD_VALUE", format!("bad pmatch item: {why}"), span)]
                        })?;
                        Test::Pmatch(set)
                    }
                    // Byte-wise lexicographic order, as libsinsp's `strcmp`.
                    CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => Test::StrCmp(op, bytes()),
                })
            }
            // A DOUBLE compares with integer literals only, as in libsinsp
            // (`operators_field_types_compatibility`: `thread.cpu = 1.0` is refused).
            FieldType::I64
            | FieldType::U64
            | FieldType::AbsTime
            | FieldType::RelTime
            | FieldType::Double => {
                let what = format!("a number ({})", ty.name());
                let parse = |l: &Literal| parse_number(&l.text).ok_or_else(|| bad_value(l, &what));
                match op {
                    CmpOp::Eq | CmpOp::Ne | CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge => {
                        Ok(Test::Num(op, parse(single()).map_err(|e| vec![e])?))
                    }
                    CmpOp::In | CmpOp::Intersects => {
                        collect(&|l| parse(l).map(drop))?;
                        Ok(Test::NumSet(
                            items.iter().filter_map(|l| parse(l).ok()).collect(),
                        ))
                    }
                    _ => Err(Vec::new()),
                }
            }
            FieldType::Bool => {
                let parse = |l: &Literal| {
                    parse_bool(&l.text).ok_or_else(|| bad_value(l, "a boolean (true or false)"))
                };
                match op {
                    CmpOp::Eq | CmpOp::Ne => {
                        Ok(Test::Bool(op, parse(single()).map_err(|e| vec![e])?))
                    }
                    CmpOp::In | CmpOp::Intersects => {
                        collect(&|l| parse(l).map(drop))?;
                        let values: Vec<bool> =
                            items.iter().filter_map(|l| parse(l).ok()).collect();
                        Ok(Test::BoolSet(
                            values.contains(&true),
                            values.contains(&false),
                        ))
                    }
                    _ => Err(Vec::new()),
                }
            }
            FieldType::IpAddr => {
                let parse_addr = |l: &Literal| {
                    l.text
                        .trim()
                        .parse::<IpAddr>()
                        .map_err(|_| bad_value(l, "an IP address"))
                };
                let parse_net = |l: &Literal| {
                    IpNet::parse(&l.text).ok_or_else(|| bad_value(l, "an IP address or network"))
                };
                match op {
                    CmpOp::Eq => Ok(Test::IpEq(parse_addr(single()).map_err(|e| vec![e])?)),
                    CmpOp::Ne => Ok(Test::IpNe(parse_addr(single()).map_err(|e| vec![e])?)),
                    CmpOp::In | CmpOp::Intersects => {
                        collect(&|l| parse_net(l).map(drop))?;
                        Ok(Test::IpIn(
                            items.iter().filter_map(|l| parse_net(l).ok()).collect(),
                        ))
                    }
                    _ => Err(Vec::new()),
                }
            }
            FieldType::IpNet => {
                let parse_net = |l: &Literal| {
                    IpNet::parse(&l.text).ok_or_else(|| bad_value(l, "an IP network"))
                };
                match op {
                    CmpOp::Eq => Ok(Test::NetEq(parse_net(single()).map_err(|e| vec![e])?)),
                    CmpOp::Ne => Ok(Test::NetNe(parse_net(single()).map_err(|e| vec![e])?)),
                    CmpOp::In | CmpOp::Intersects => {
                        collect(&|l| parse_net(l).map(drop))?;
                        Ok(Test::NetIn(
                            items.iter().filter_map(|l| parse_net(l).ok()).collect(),
                        ))
                    }
                    _ => Err(Vec::new()),
                }
            }
        }
    }
}

/// Builds an `and` (`is_and`) or `or` node: nested groups of the same kind are flattened,
/// neutral constants dropped, absorbing constants fold the group, and children are ordered
/// cheapest first (evaluation has no side effects, so order is free).
fn group(is_and: bool, items: Vec<Node>) -> Node {
    let mut nodes = Vec::with_capacity(items.len());
    for node in items {
        match node {
            Node::And(inner) if is_and => nodes.extend(inner.into_vec()),
            Node::Or(inner) if !is_and => nodes.extend(inner.into_vec()),
            Node::Const(v) if v == is_and => {}
            Node::Const(_) => return Node::Const(!is_and),
            other => nodes.push(other),
        }
    }
    // Keep the author's order, as Falco does: rules put their most selective test first
    // (`open_read and sensitive_files and not …`), and a cost-only ordering would run a dozen
    // cheap-looking exclusions before it on every event. Only `evt.type` bit tests and
    // constants, which are both cheapest and often decisive, move to the front (stable sort).
    nodes.sort_by_key(|n| u32::from(n.cost() > 1));
    match nodes.len() {
        0 => Node::Const(is_and),
        1 => nodes.pop().expect("one node"),
        _ if is_and => Node::And(nodes.into_boxed_slice()),
        _ => Node::Or(nodes.into_boxed_slice()),
    }
}

/// The span of the first node of `expr` that has one (iteratively, for deep trees).
fn first_span(expr: &Expr) -> Span {
    let mut e = expr;
    loop {
        match e {
            Expr::And(items) | Expr::Or(items) => match items.first() {
                Some(first) => e = first,
                None => return Span::default(),
            },
            Expr::Not(inner) => e = inner,
            Expr::Macro { span, .. } | Expr::Compare { span, .. } | Expr::Exists { span, .. } => {
                return *span
            }
            Expr::Const(_) => return Span::default(),
        }
    }
}

/// Decimal (optionally signed) or `0x` hexadecimal.
fn parse_number(text: &str) -> Option<i128> {
    let t = text.trim();
    let v = if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        i128::from_str_radix(hex, 16).ok()?
    } else {
        if t.starts_with("+-") || t.starts_with("-+") {
            return None;
        }
        t.parse::<i128>().ok()?
    };
    (i128::from(i64::MIN)..=i128::from(u64::MAX))
        .contains(&v)
        .then_some(v)
}

fn parse_bool(text: &str) -> Option<bool> {
    match text.trim() {
        t if t.eq_ignore_ascii_case("true") || t == "1" => Some(true),
        t if t.eq_ignore_ascii_case("false") || t == "0" => Some(false),
        _ => None,
    }
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    let t = text.trim().as_bytes();
    if t.is_empty() || t.len() & 1 == 1 {
        return None;
    }
    t.chunks(2)
        .map(|pair| {
            let s = std::str::from_utf8(pair).ok()?;
            u8::from_str_radix(s, 16).ok()
        })
        .collect()
}

/// The `field = N` / `field in (N, …)` (and `field = true|false`, as 1/0) conjuncts of
/// `node`'s top-level `and` (through memo wrappers), on untransformed fields.
fn required_numbers(node: &Node, out: &mut Vec<(FieldRef, Box<[i128]>)>) {
    for_each_conjunct(node, &mut |node| match node {
        Node::Test {
            lhs,
            test,
            all: false,
            ..
        } if lhs.transformers.is_empty() => {
            let values: Box<[i128]> = match test {
                Test::Num(CmpOp::Eq, v) => Box::new([*v]),
                // A boolean as 0/1 (`evt.is_open_write = true` → 1).
                Test::Bool(CmpOp::Eq, b) => Box::new([i128::from(*b)]),
                Test::NumSet(set) => {
                    let mut v: Vec<i128> = set.iter().copied().collect();
                    v.sort_unstable();
                    v.into()
                }
                _ => return,
            };
            if let Some(field) = lhs.plain_field() {
                out.push((field.clone(), values));
            }
        }
        _ => {}
    });
}

/// The `field contains 'S'` conjuncts of `node`'s top-level `and` (through memo wrappers), on
/// untransformed fields: the condition cannot hold unless the field contains `S`.
fn required_substrings(node: &Node, out: &mut Vec<(FieldRef, Box<[u8]>)>) {
    for_each_conjunct(node, &mut |node| {
        if let Node::Test {
            lhs,
            test: Test::Contains(finder),
            all: false,
            ..
        } = node
        {
            if let Some(field) = lhs.plain_field().filter(|_| lhs.transformers.is_empty()) {
                out.push((field.clone(), finder.needle().into()));
            }
        }
    });
}

/// Calls `f` on each conjunct of `node`'s top-level `and` (nested `and`s flattened, through
/// memo wrappers): the tests the condition cannot hold without.
fn for_each_conjunct<'n>(node: &'n Node, f: &mut impl FnMut(&'n Node)) {
    match node {
        Node::And(items) => items.iter().for_each(|n| for_each_conjunct(n, f)),
        Node::Memo { inner, .. } => for_each_conjunct(inner, f),
        _ => f(node),
    }
}

/// `evt.res`, `evt.rawres` and `evt.failed`: what a test of them says about a failed call;
/// and `fd.num`, which reads the result in some event types ([`Catalog::is_result_in`]).
struct FailureFields {
    res: Option<FieldRef>,
    rawres: Option<FieldRef>,
    failed: Option<FieldRef>,
    fd_num: Option<FieldRef>,
}

impl FailureFields {
    /// The value of test `leaf` for every failed call (a result in `-4095..=-1`), when it is
    /// the same for all of them: `evt.res = SUCCESS` is false, `evt.rawres >= 0` false,
    /// `evt.failed = true` true; `None` when the failure does not decide it. With
    /// `fd_is_result`, `fd.num` is tested as `evt.rawres` is (the caller applies that only to
    /// the event types where it is).
    fn known(&self, leaf: &Node, fd_is_result: bool) -> Option<bool> {
        let Node::Test {
            lhs,
            test,
            all: false,
            ..
        } = leaf
        else {
            return None;
        };
        if !lhs.transformers.is_empty() {
            return None;
        }
        let field = lhs.plain_field()?;
        let is = |f: &Option<FieldRef>| f.as_ref() == Some(field);
        if is(&self.res) {
            const OK: &[u8] = b"SUCCESS";
            return match test {
                Test::StrEq(w) if **w == *OK => Some(false),
                Test::StrNe(w) if **w == *OK => Some(true),
                Test::StrSet(set) if set.is_only(OK) => Some(false),
                _ => None,
            };
        }
        let uniform = |value: &dyn Fn(i64) -> V<'static>, range: std::ops::RangeInclusive<i64>| {
            let mut seen = range.map(|x| test.matches(value(x)));
            let first = seen.next()?;
            seen.all(|v| v == first).then_some(first)
        };
        if is(&self.rawres) || (fd_is_result && is(&self.fd_num)) {
            return uniform(&V::I64, -4095..=-1);
        }
        if is(&self.failed) {
            return uniform(&|_| V::Bool(true), 0..=0);
        }
        None
    }
}

/// Every field `node` reads, once each, in order of first appearance.
fn fields_of(node: &Node, out: &mut Vec<FieldRef>) {
    let mut add = |op: &COperand| {
        for field in op.fields() {
            if !out.contains(field) {
                out.push(field.clone());
            }
        }
    };
    match node {
        Node::Const(_) | Node::EvtType(_) => {}
        Node::Exists { op, .. } | Node::Test { lhs: op, .. } => add(op),
        Node::Fields { lhs, rhs, .. } => {
            add(lhs);
            add(rhs);
        }
        Node::Not(inner) | Node::Memo { inner, .. } => fields_of(inner, out),
        Node::And(items) | Node::Or(items) => items.iter().for_each(|n| fields_of(n, out)),
    }
}

/// The event types `node` can match (with `negated`: the types for which `not node` can match),
/// as a bit set of `words` words; an over-approximation, exact for `evt.type` tests. `leaf`
/// gives the value of a field test known under some assumption (`None`: either value).
fn event_types(
    node: &Node,
    negated: bool,
    words: usize,
    n_types: usize,
    leaf: &dyn Fn(&Node) -> Option<bool>,
) -> Vec<u64> {
    let all = || {
        let mut v = vec![u64::MAX; words];
        if n_types & 63 != 0 {
            if let Some(last) = v.last_mut() {
                *last = (1u64 << (n_types % 64)) - 1;
            }
        }
        v
    };
    match node {
        Node::Const(v) => {
            if *v != negated {
                all()
            } else {
                vec![0; words]
            }
        }
        Node::EvtType(bits) => {
            let mut v: Vec<u64> = bits.to_vec();
            v.resize(words, 0);
            if negated {
                let full = all();
                v.iter_mut().zip(full).for_each(|(w, f)| *w = !*w & f);
            }
            v
        }
        Node::Not(inner) => event_types(inner, !negated, words, n_types, leaf),
        Node::Memo { inner, .. } => event_types(inner, negated, words, n_types, leaf),
        Node::And(items) | Node::Or(items) => {
            // and (or under negation) intersects; or (and under negation) unites.
            let intersect = matches!(node, Node::And(_)) != negated;
            let mut acc = if intersect { all() } else { vec![0; words] };
            for item in items.iter() {
                let s = event_types(item, negated, words, n_types, leaf);
                for (a, b) in acc.iter_mut().zip(s) {
                    if intersect {
                        *a &= b;
                    } else {
                        *a |= b;
                    }
                }
            }
            acc
        }
        Node::Exists { .. } | Node::Test { .. } | Node::Fields { .. } => match leaf(node) {
            Some(v) if v == negated => vec![0; words],
            _ => all(),
        },
    }
}

/// Deepest condition tree [`crate::eval::Filter::fold`] walks; deeper ones are not folded.
const FOLD_MAX_DEPTH: usize = 256;

/// The depth of `root`, without recursion.
fn tree_depth(root: &Node) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(root, 1usize)];
    while let Some((node, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        match node {
            Node::Not(inner) | Node::Memo { inner, .. } => stack.push((inner, depth + 1)),
            Node::And(items) | Node::Or(items) => {
                stack.extend(items.iter().map(|n| (n, depth + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// A NUL byte (`"\x00"`) is a value only for a byte buffer: libsinsp's strings are
/// NUL-terminated, so it refuses one anywhere else (libs `filter_compiler.ut.cpp`:
/// `filter_nul_byte_value`).
fn nul_check(ty: FieldType, items: &[&Literal]) -> Result<(), Vec<CompileError>> {
    match items.iter().find(|l| l.text.contains('\0')) {
        Some(lit) if ty != FieldType::Buffer => Err(vec![nul_error(lit)]),
        _ => Ok(()),
    }
}

fn nul_error(lit: &Literal) -> CompileError {
    err(
        "E_BAD_VALUE",
        "a NUL byte (`\\x00`) can only be compared with a byte buffer (`evt.buffer`)".to_string(),
        lit.span,
    )
}

/// Transformer names libsinsp's parser knows (besides `val`).
const TRANSFORMER_NAMES: &[&str] = &[
    "tolower", "toupper", "b64", "basename", "len", "join", "concat", "getopt",
];

/// libsinsp's heuristic (`check_warnings_regex_value`): a regex whose only special characters
/// are a leading `^`, a trailing `$`, and `.*`/`.+`/`.?` at its very start or end could be a
/// plain `=`, `contains`, `startswith` or `endswith`.
fn regex_is_plain(v: &str) -> bool {
    const SPECIAL: &[u8] = b".+*?^$()[]{}|\\";
    const OCCURRENCE: &[u8] = b"+*?";
    let b = v.as_bytes();
    let len = b.len();
    let mut i = 0;
    while i < len {
        if (i == 0 && b[i] == b'^') || (i == len - 1 && b[i] == b'$') {
            i += 1;
            continue;
        }
        if ((i == 0 && len > 1) || i + 2 == len)
            && b[i] == b'.'
            && b.get(i + 1).is_some_and(|c| OCCURRENCE.contains(c))
        {
            i += 2;
            continue;
        }
        if SPECIAL.contains(&b[i]) {
            return false;
        }
        i += 1;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::EvalCtx;
    use crate::parser::parse_condition;
    use crate::testutil::{FakeCatalog, FakeEvent};

    fn compile_one(cat: &FakeCatalog, src: &str) -> Result<Filter, Vec<CompileError>> {
        let expr = parse_condition(src).unwrap_or_else(|e| panic!("parse {src:?}: {e}"));
        Compiler::new(cat).compile(&expr)
    }

    /// Evaluates every (condition, expected) pair against `ev`; one assertion lists every
    /// mismatch.
    fn assert_truth(ev: &FakeEvent, cases: &[(&str, bool)]) {
        let failures: Vec<String> = cases
            .iter()
            .filter_map(|(src, want)| {
                let got = eval(src, ev);
                (got != *want).then(|| format!("{src}: got {got}, want {want}"))
            })
            .collect();
        assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
    }

    fn eval(src: &str, ev: &FakeEvent) -> bool {
        let cat = FakeCatalog::new();
        let expr = parse_condition(src).unwrap_or_else(|e| panic!("parse {src:?}: {e}"));
        let mut compiler = Compiler::new(&cat);
        let filter = compiler
            .compile(&expr)
            .unwrap_or_else(|e| panic!("compile {src:?}: {e:?}"));
        let mut ctx = EvalCtx::new(&compiler.finish());
        let result = filter.eval(ev, &mut ctx.event());
        result
    }

    /// (condition, expected result) against the default test event (see `testutil`).
    const TRUTH: &[(&str, bool)] = &[
        // strings
        ("proc.name = bash", true),
        ("proc.name == bash", true),
        ("proc.name = sh", false),
        ("proc.name != sh", true),
        ("proc.name != bash", false),
        ("proc.name in (sh, bash)", true),
        // `<` and friends on strings: byte-wise order (libsinsp's strcmp).
        ("proc.name > bas", true),
        ("proc.name < bat", true),
        ("proc.name <= bash", true),
        ("proc.name >= bashx", false),
        ("proc.name < 5", false),
        ("proc.name > val(proc.pname)", false),
        ("proc.name < val(proc.pname)", true),
        ("evt.buffer contains cafe", false),
        ("proc.name in (sh, zsh)", false),
        ("proc.name in ()", false),
        ("not proc.name in ()", true),
        ("proc.name intersects (bash, x)", true),
        ("proc.cmdline contains \"-c ls\"", true),
        ("proc.cmdline contains \"-C LS\"", false),
        ("proc.cmdline icontains \"-C LS\"", true),
        ("proc.cmdline startswith bash", true),
        ("proc.cmdline startswith ash", false),
        ("proc.cmdline endswith ls", true),
        ("proc.cmdline endswith bash", false),
        ("fd.name glob /etc/*", true),
        ("fd.name glob /etc", false),
        ("fd.name glob /*", true),
        ("fd.name iglob /ETC/PASS*", true),
        ("fd.name glob /ETC/PASS*", false),
        ("fd.name regex '/etc/p[a-z]+'", true),
        ("fd.name regex 'etc'", false),
        ("fd.name regex '.*etc.*'", true),
        ("fd.name pmatch (/etc)", true),
        ("fd.name pmatch (/et)", false),
        ("fd.name pmatch (/usr, /etc/)", true),
        ("fd.name pmatch (/*/passwd)", true),
        ("fd.name pmatch (/)", true),
        ("fd.name pmatch ()", false),
        ("proc.name = \"\"", false),
        ("evt.buffer bcontains cafebabe", true),
        ("evt.buffer bstartswith 00ca", true),
        ("evt.buffer bstartswith ca", false),
        // non-UTF-8 bytes
        ("proc.exe contains \"\\xff\"", true),
        ("proc.exe regex '/tmp/bad.'", true),
        ("proc.exe regex '/tmp/bad\u{fffd}'", true),
        // numbers
        ("fd.num = 3", true),
        ("fd.num != 3", false),
        ("fd.num > 2", true),
        ("fd.num >= 3", true),
        ("fd.num < 3", false),
        ("fd.num <= 3", true),
        ("fd.num > -1", true),
        ("fd.num in (1, 2, 3)", true),
        ("fd.num in (1, 2)", false),
        ("fd.num = 0x3", true),
        ("evt.count = 18446744073709551615", true),
        ("evt.count > 0", true),
        ("evt.time > 1000", true),
        ("proc.duration < 5000000000", true),
        // booleans
        ("proc.is_interactive = true", true),
        ("proc.is_interactive = false", false),
        ("proc.is_interactive != false", true),
        ("proc.is_interactive in (true)", true),
        // addresses
        ("fd.sip = 10.1.2.3", true),
        ("fd.sip = 10.1.2.4", false),
        ("fd.sip != 10.1.2.4", true),
        ("fd.sip in (10.0.0.0/8)", true),
        ("fd.sip in (192.168.0.0/16, 10.1.2.3)", true),
        ("fd.sip in (192.168.0.0/16)", false),
        ("fd.sip in (::1/128)", false),
        ("fd.net = 10.0.0.0/8", true),
        ("fd.net = 192.168.0.0/16", false),
        ("fd.net != 192.168.0.0/16", true),
        ("fd.net in (172.16.0.0/12, 10.1.0.0/16)", true),
        // missing values: comparisons false, their negation true
        ("fd.rip = 1.2.3.4", false),
        ("fd.rip != 1.2.3.4", false),
        ("not fd.rip = 1.2.3.4", true),
        ("container.id = host", false),
        ("container.id != host", false),
        ("not container.id = host", true),
        ("container.id exists", false),
        ("proc.name exists", true),
        ("not container.id exists", true),
        ("tolower(container.id) = x", false),
        // list fields
        ("proc.args = ls", true),
        ("proc.args = nope", false),
        ("proc.args contains l", true),
        ("proc.args in (-c, ls, other)", true),
        ("proc.args in (-c, other)", false),
        ("proc.args intersects (nope, ls)", true),
        ("proc.args intersects (nope)", false),
        ("fd.types in (file, ipv4)", true),
        ("fd.types in (file)", false),
        ("fd.types intersects (file)", true),
        ("fd.types = ipv4", true),
        ("no.values in (x)", true),
        ("no.values intersects (x)", false),
        ("no.values = x", false),
        ("no.values exists", true),
        ("len(no.values) = 0", true),
        // multi-valued non-list field: any value
        ("proc.aname = init", true),
        ("proc.aname = nope", false),
        ("proc.aname in (nope, systemd)", true),
        ("proc.aname[1] = sshd", true),
        ("proc.aname[2] = sshd", false),
        ("proc.aname[2] in (init)", true),
        ("proc.aname[9] = x", false),
        // transformers
        ("tolower(proc.exepath) = /usr/bin/bash", true),
        ("toupper(proc.name) = BASH", true),
        ("toupper(proc.name) = bash", false),
        ("basename(proc.exepath) = BASH", true),
        ("basename(fd.directory) = \"\"", true),
        ("b64(proc.env[SECRET]) = hello", true),
        ("b64(proc.name) = x", false),
        ("len(proc.name) = 4", true),
        ("len(proc.args) = 2", true),
        ("len(proc.args) > 1", true),
        ("len(proc.aname) in (4, 7)", true),
        ("tolower(basename(proc.exepath)) = bash", true),
        ("len(tolower(proc.name)) = 4", true),
        ("toupper(proc.args) in (-C, LS)", true),
        ("len(evt.buffer) = 6", true),
        // field comparisons
        ("proc.name = val(proc.name)", true),
        ("proc.name = val(proc.pname)", false),
        ("proc.name != val(proc.pname)", true),
        ("tolower(proc.exepath) endswith val(proc.name)", true),
        ("proc.cmdline startswith val(proc.name)", true),
        ("fd.num < val(proc.pid)", true),
        ("proc.pid > val(fd.num)", true),
        ("evt.count > val(fd.num)", true),
        ("proc.name = val(container.id)", false),
        ("tolower(proc.name) = tolower(proc.name)", true),
        ("basename(proc.exepath) = toupper(proc.name)", true),
        ("proc.aname = val(proc.pname)", true),
        // A field's values as the set of `in` / `intersects` / `pmatch`.
        ("proc.pname in val(proc.aname)", true),
        ("proc.name in val(proc.aname)", false),
        ("proc.args in val(proc.args)", true),
        ("proc.args in val(proc.aname)", false),
        ("proc.aname intersects val(proc.pname)", true),
        ("fd.name pmatch val(fd.directory)", true),
        ("fd.directory pmatch val(fd.name)", false),
        ("toupper(proc.name) in toupper(proc.aname)", false),
        ("fd.num in val(fd.num)", true),
        // event types
        ("evt.type = openat", true),
        ("evt.type = execve", false),
        ("evt.type != execve", true),
        ("evt.type in (execve, openat)", true),
        ("evt.type in (execve, nonsense)", false),
        ("evt.type = nonsense", false),
        ("evt.type startswith open", true),
        ("evt.type contains exec", false),
        ("tolower(evt.type) = openat", true),
        // logic
        ("proc.name = bash and fd.num = 3", true),
        ("proc.name = bash and fd.num = 4", false),
        ("proc.name = sh or fd.num = 3", true),
        ("not (proc.name = sh or fd.num = 4)", true),
        ("not not proc.name = bash", true),
        ("(proc.name = bash)", true),
    ];

    /// Operator modifiers (Falco 0.44 / libs 0.25), after libs' own filtercheck tests: for the
    /// default event, `proc.name` is `bash`.
    const MODIFIED: &[(&str, bool)] = &[
        ("proc.name = oneof (bash, sh)", true),
        ("proc.name == oneof (bash)", true),
        ("proc.name = oneof (zsh, sh)", false),
        ("proc.name = oneof (bash, bash)", false),
        ("proc.name = anyof (bash, sh)", true),
        ("proc.name = anyof (bash, bash)", true),
        ("proc.name = anyof (zsh, sh)", false),
        ("proc.name = allof (bash)", true),
        ("proc.name = allof (bash, bash)", true),
        ("proc.name = allof (bash, sh)", false),
        ("proc.name != oneof (bash, bash, sh)", true),
        ("proc.name != oneof (bash, bash)", false),
        ("proc.name != oneof (zsh, sh)", false),
        ("proc.name != anyof (zsh, sh)", true),
        ("proc.name != anyof (bash, sh)", true),
        ("proc.name != allof (zsh, sh)", true),
        ("proc.name != allof (bash, sh)", false),
        ("proc.name contains oneof (ba, zsh)", true),
        ("proc.name contains oneof (ba, sh)", false),
        ("proc.name contains anyof (ba, sh)", true),
        ("proc.name contains allof (ba, sh)", true),
        ("proc.name contains allof (ba, zsh)", false),
        ("proc.name icontains allof (BA, SH)", true),
        ("proc.name icontains oneof (BA, SH)", false),
        ("proc.name startswith anyof (b, z)", true),
        ("proc.name startswith allof (b, ba)", true),
        ("proc.name startswith oneof (b, ba)", false),
        ("proc.name endswith anyof (sh, x)", true),
        ("proc.name endswith allof (sh, x)", false),
        ("proc.name glob oneof (b*, z*)", true),
        ("proc.name glob allof (b*, *sh)", true),
        ("proc.name iglob anyof (B*, Z*)", true),
        ("proc.name regex anyof ('^z.*', 'b.*')", true),
        ("proc.name regex oneof (b.*, .*sh)", false),
        ("proc.name regex allof (b.*, .*sh)", true),
        ("toupper(proc.name) = oneof (BASH, SH)", true),
        ("toupper(proc.name) != allof (BASH, SH)", false),
        ("fd.num = anyof (1, 3)", true),
        // The modifier words are still plain values without a list.
        ("proc.name = anyof", false),
        ("proc.name != oneof", true),
        // An empty list never matches.
        ("proc.name = oneof ()", false),
        ("proc.name = anyof ()", false),
        ("proc.name = allof ()", false),
        ("proc.name != allof ()", false),
        ("proc.name != anyof ()", false),
        // A missing value makes every comparison false, whatever the modifier.
        ("container.id != allof (a, b)", false),
        ("not container.id != allof (a, b)", true),
        // Event types.
        ("evt.type = anyof (openat, execve)", true),
        ("evt.type != allof (openat, execve)", false),
        ("evt.type != allof (connect, execve)", true),
        ("evt.type startswith anyof (open, exec)", true),
        // Combined.
        (
            "proc.name = oneof (bash) and proc.name != allof (zsh, sh)",
            true,
        ),
        (
            "proc.name = anyof (zsh) or proc.name != oneof (bash)",
            false,
        ),
    ];

    /// `fd.ip`, `fd.port`, `fd.net` match either endpoint (client `10.0.0.5:40000`, server
    /// `93.184.216.34:443` here); `!=` holds only when neither endpoint equals (libsinsp).
    #[test]
    fn endpoint_pair_fields_negate_like_libsinsp() {
        use vigil_fields::Value;
        let mut ev = FakeEvent::default();
        let ip = |t: &str| Value::Ip(t.parse().expect("test address"));
        ev.set("fd.ip", vec![ip("10.0.0.5"), ip("93.184.216.34")]);
        ev.set("fd.port", vec![Value::U64(40000), Value::U64(443)]);
        ev.set("fd.net", vec![ip("10.0.0.5"), ip("93.184.216.34")]);
        let cases: &[(&str, bool)] = &[
            ("fd.ip = 93.184.216.34", true),
            ("fd.ip = 10.0.0.5", true),
            ("fd.ip != 93.184.216.34", false),
            ("fd.ip != 10.0.0.5", false),
            ("fd.ip != 0.0.0.0", true),
            ("not fd.ip = 93.184.216.34", false),
            ("fd.ip in (93.184.216.34, 1.1.1.1)", true),
            ("fd.ip in (10.0.0.0/8)", true),
            ("fd.port = 443", true),
            ("fd.port != 443", false),
            ("fd.port != 22", true),
            ("fd.port in (443, 80)", true),
            ("fd.port < 1024", true),
            ("fd.port > 50000", false),
            ("fd.net = 93.184.0.0/16", true),
            ("fd.net != 93.184.0.0/16", false),
            ("fd.net != 192.168.0.0/16", true),
            // The "any ancestor" fields keep libsinsp's per-ancestor `!=`.
            ("proc.aname != sshd", true),
        ];
        assert_truth(&ev, cases);
    }

    #[test]
    fn operator_modifiers_evaluate_like_libs() {
        let ev = FakeEvent::default();
        assert_truth(&ev, MODIFIED);
    }

    /// Multivalue transformers against the default event (libsinsp's
    /// `multivalue_transformer_{join,concat,getopt}` tests, adapted to the test event).
    const MULTIVALUE: &[(&str, bool)] = &[
        // join(separator, list)
        ("join(\"-\", (fd.name, fd.directory)) = /etc/passwd-/etc/", true),
        ("join(\"->\", (\"aaa\", \"bbb\")) = aaa->bbb", true),
        ("join(\"->\", (\"aaa\")) = aaa", true),
        ("join(fd.directory, (proc.name, \"x\")) = bash/etc/x", true),
        ("join(\",\", (proc.pid, proc.pid)) = \"100,100\"", true),
        ("join(\",\", ()) = \"\"", true),
        ("join(\",\", ()) = \",\"", false),
        ("join(\",\", (\"aaa\", \"bbb\")) = \"aaa-bbb\"", false),
        ("join(\"+\", proc.args) = \"-c+ls\"", true),
        ("join(\"+\", fd.types) = ipv4+file", true),
        ("join(\"+\", toupper(fd.types)) = IPV4+FILE", true),
        ("join(\"-\", (proc.aname, \"x\")) = sshd-init-systemd-x", true),
        ("join(\"-\", (fd.directory, join(\"->\", (\"aaa\", toupper(proc.name))))) = /etc/-aaa->BASH", true),
        // a missing value anywhere: no value (every comparison false, `not` true)
        ("join(\"-\", (fd.name, container.id)) exists", false),
        ("not join(\"-\", (fd.name, container.id)) = x", true),
        ("join(container.id, (fd.name)) exists", false),
        // concat(a, b …)
        ("concat(fd.name, fd.directory) = /etc/passwd/etc/", true),
        ("concat(\"aaa\", \"bbb\", \"ccc\") = aaabbbccc", true),
        ("concat(toupper(proc.name), \"aaa\") = BASHaaa", true),
        ("concat(fd.directory, concat(\"aaa\", toupper(proc.name))) = /etc/aaaBASH", true),
        ("concat(proc.aname, \"!\") = sshd!", true),
        ("concat(proc.name, container.id) exists", false),
        ("concat(proc.name, 'x') in (bashx, other)", true),
        // transformers over the result
        ("toupper(join(\"-\", (fd.name, fd.directory))) = /ETC/PASSWD-/ETC/", true),
        ("len(join(\"-\", (fd.name, fd.directory))) = 17", true),
        ("len(concat(\"aaa\", \"bbb\")) = 6", true),
        ("b64(concat(\"YWFh\", \"YmJi\")) = aaabbb", true),
        ("basename(concat(fd.directory, \"x/y\")) = y", true),
        ("toupper(concat(fd.name, fd.directory)) startswith /ETC", true),
        ("len(concat(fd.name, fd.directory)) > 15", true),
        // on the right: val() and `in`
        ("proc.cmdline = concat(proc.name, \" -c ls\")", true),
        ("proc.name in concat(\"ba\", \"sh\")", true),
        ("proc.name in join(\"\", (\"ba\", \"sx\"))", false),
        // getopt(argv, optstring)
        ("getopt((\"-n\", \"\"), \"n\") intersects (n)", true),
        ("getopt((\"-t\", \"hello\"), \"t:\") intersects (t, hello)", true),
        ("getopt((\"-nt\", \"hello\"), \"nt:\") intersects (n, t, hello)", true),
        ("getopt((\"-thello\"), \"t:\") in (t, hello)", true),
        ("getopt((\"-n\"), \"n\") intersects (t)", false),
        ("getopt((\"-n\", \"--\", \"-t\"), \"nt:\") intersects (t)", false),
        ("getopt((\"-x\", \"-n\"), \"n\") intersects (\"?\")", true),
        ("getopt((\"-x\", \"-n\"), \"n\") intersects (x)", false),
        ("getopt((\"arg1\", \"-n\"), \"n\") intersects (n)", false),
        ("getopt((\"-\", \"-n\"), \"n\") intersects (n)", false),
        ("getopt((\"--exec\", \"-n\"), \"n\") intersects (n)", true),
        ("getopt((\"-t\"), \"t:\") intersects (\"\")", true),
        ("getopt((\"-t\"), \"t:\") intersects (t)", false),
        ("getopt((\"-abcvalue\"), \"abc:\") in (a, b, c, value)", true),
        ("getopt((\"-lpe\", \"/bin/sh\"), \"lpe:\") intersects (\"/bin/sh\")", true),
        ("getopt((\"-lpe\", \"/bin/sh\"), \"lp:e:\") intersects (\"/bin/sh\")", false),
        ("getopt((\"-lpe\", \"/bin/sh\"), \"lp:e:\") intersects (e)", true),
        ("len(getopt((\"-l\", \"-p\", \"8080\", \"-e\", \"/bin/sh\", \"x\"), \"lp:e:\")) = 5", true),
        ("getopt(proc.args, \"c\") intersects (c)", true),
        ("getopt((\"-\", \"-n\"), \"\") intersects (n)", false),
        // getopt(…)[c]: the last value of one option
        ("getopt((\"-t\", \"a\", \"-t\", \"b\"), \"t:\")[t] = b", true),
        ("getopt((\"-p8080\"), \"p:\")[p] = 8080", true),
        ("getopt((\"-n\", \"-p\", \"80\"), \"np:\")[n] = n", true),
        ("getopt((\"-t\"), \"t:\")[t] = \"\"", true),
        ("getopt((\"-n\"), \"nt:\")[t] exists", false),
        ("not getopt((\"-n\"), \"nt:\")[t] = x", true),
        ("getopt((\"-e\", proc.name), \"e:\")[e] = bash", true),
        ("getopt((\"-e\", container.id), \"e:\")[e] exists", false),
    ];

    #[test]
    fn multivalue_transformers_evaluate_like_libsinsp() {
        let ev = FakeEvent::default();
        assert_truth(&ev, MULTIVALUE);
    }

    #[test]
    fn multivalue_transformer_argument_errors() {
        let cat = FakeCatalog::new();
        let cases: &[(&str, &str)] = &[
            ("join() = foo", "E_TRANSFORMER_ARGS @ 0"),
            ("join(\"-\") = foo", "E_TRANSFORMER_ARGS @ 0"),
            ("join(\"-\", \"a\", \"b\") = foo", "E_TRANSFORMER_ARGS @ 0"),
            (
                "join(fd.types, (\"a\", \"b\")) = foo",
                "E_TRANSFORMER_ARGS @ 0",
            ),
            (
                "join((\"a\", \"b\"), (\"a\", \"b\")) = foo",
                "E_TRANSFORMER_ARGS @ 0",
            ),
            ("join(\"a\", \"b\") = foo", "E_TRANSFORMER_ARGS @ 0"),
            (
                "proc.name = x and concat() = foo",
                "E_TRANSFORMER_ARGS @ 18",
            ),
            ("concat(\"aaa\") = foo", "E_TRANSFORMER_ARGS @ 0"),
            ("concat(fd.types, \"a\") = foo", "E_TRANSFORMER_ARGS @ 0"),
            (
                "concat(\"a\", (\"a\", \"b\")) = foo",
                "E_TRANSFORMER_ARGS @ 0",
            ),
            ("concat(proc.pid, \"a\") = foo", "E_TRANSFORMER_ARGS @ 0"),
            ("concat(evt.buffer, \"a\") = foo", "E_TRANSFORMER_ARGS @ 0"),
            (
                "concat(len(proc.name), \"a\") = foo",
                "E_TRANSFORMER_ARGS @ 0",
            ),
            ("getopt() intersects (n)", "E_TRANSFORMER_ARGS @ 0"),
            ("getopt((\"a\")) intersects (n)", "E_TRANSFORMER_ARGS @ 0"),
            (
                "getopt((\"a\"), \"n\", \"x\") intersects (n)",
                "E_TRANSFORMER_ARGS @ 0",
            ),
            (
                "getopt(\"a\", \"n\") intersects (n)",
                "E_TRANSFORMER_ARGS @ 0",
            ),
            (
                "getopt((\"-n\"), (\"n\")) intersects (n)",
                "E_TRANSFORMER_ARGS @ 0",
            ),
            (
                "getopt((\"-n\"), proc.pid) intersects (n)",
                "E_TRANSFORMER_ARGS @ 0",
            ),
            ("getopt((\"-n\"), \"n\")[nn] = x", "E_FIELD_ARG @ 0"),
            ("join(\"-\", (\"a\"))[x] = x", "E_FIELD_ARG @ 0"),
            ("concat(\"a\", nope.field) = x", "E_UNKNOWN_FIELD @ 12"),
            ("len(concat(\"a\", fd.name)) = abc", "E_BAD_VALUE @ 28"),
        ];
        let mut failures = Vec::new();
        for (src, want) in cases {
            let got = match compile_one(&cat, src) {
                Ok(_) => "ok".to_string(),
                Err(errs) => format!("{} @ {}", errs[0].code, errs[0].span.start),
            };
            if got != *want {
                failures.push(format!("{src}: got {got}, want {want}"));
            }
        }
        assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
    }

    #[test]
    fn fields_without_values_warn_and_never_match() {
        let cat = FakeCatalog::new();
        // Falco's `thread.cpu` is a DOUBLE, compared with integers only (as libsinsp).
        let f = compile_one(&cat, "proc.name = bash and thread.cpu > 0").unwrap();
        let codes: Vec<(&str, u32)> = f
            .warnings()
            .iter()
            .map(|w| (w.code, w.span.start))
            .collect();
        assert_eq!(codes, [("W_FIELD_NO_VALUE", 21)]);
        assert!(!eval("thread.cpu > 0", &FakeEvent::default()));
        assert!(!eval("thread.cpu exists", &FakeEvent::default()));
        assert!(eval("not thread.cpu > 0", &FakeEvent::default()));
        for refused in [
            "thread.cpu > 0.5",
            "thread.cpu contains 1",
            "thread.cpu glob 1*",
        ] {
            assert!(compile_one(&cat, refused).is_err(), "{refused}");
        }
        // A field that can have a value (`evt.cpu`) loads without the warning.
        let f = compile_one(&cat, "evt.cpu >= 0").unwrap();
        assert!(f.warnings().is_empty(), "{:?}", f.warnings());
    }

    #[test]
    fn multivalue_transformer_fields_are_listed() {
        let cat = FakeCatalog::new();
        let f = compile_one(&cat, "concat(proc.name, fd.name) = x").unwrap();
        let names: Vec<&str> = f.fields().iter().map(|r| cat.def(r.id).name).collect();
        assert_eq!(names, ["proc.name", "fd.name"]);
    }

    #[test]
    fn modified_event_type_tests_index_like_in() {
        let cat = FakeCatalog::new();
        let f = compile_one(&cat, "evt.type = anyof (execve, connect)").unwrap();
        assert_eq!(f.event_types(), Some(vec![1, 2]));
        let f = compile_one(&cat, "evt.type != allof (execve, connect)").unwrap();
        assert_eq!(f.event_types(), Some(vec![0, 3]));
        let f = compile_one(&cat, "evt.type = anyof (execve, nonsense)").unwrap();
        assert_eq!(f.warnings()[0].code, "W_UNKNOWN_EVENT_TYPE");
    }

    #[test]
    fn every_operator_evaluates_like_falco() {
        let ev = FakeEvent::default();
        assert_truth(&ev, TRUTH);
    }

    /// (condition, `code @ offset`).
    const ERRORS: &[(&str, &str)] = &[
        ("nope.field = 1", "E_UNKNOWN_FIELD @ 0"),
        ("proc.name = x and nope = 1", "E_UNKNOWN_FIELD @ 18"),
        ("proc.aname[x] = 1", "E_FIELD_ARG @ 0"),
        ("proc.env[\"\"] = 1", "E_FIELD_ARG @ 0"),
        ("proc.name[1] = x", "E_FIELD_ARG @ 0"),
        ("evt.buffer icontains x", "E_BAD_OPERATOR @ 0"),
        ("evt.buffer glob x", "E_BAD_OPERATOR @ 0"),
        ("evt.buffer < x", "E_BAD_OPERATOR @ 0"),
        ("fd.num contains 1", "E_BAD_OPERATOR @ 0"),
        ("fd.num glob 1", "E_BAD_OPERATOR @ 0"),
        ("fd.sip startswith 1", "E_BAD_OPERATOR @ 0"),
        ("proc.is_interactive > true", "E_BAD_OPERATOR @ 0"),
        ("evt.buffer bcontains xyz", "E_BAD_OPERATOR @ 21"),
        // Byte operators take only byte buffers (libsinsp).
        ("proc.cmdline bcontains 2d63", "E_BAD_OPERATOR @ 0"),
        ("proc.cmdline bstartswith 6261", "E_BAD_OPERATOR @ 0"),
        ("evt.buffer bcontains abc", "E_BAD_OPERATOR @ 21"),
        ("tolower(fd.num) = 1", "E_BAD_OPERATOR @ 8"),
        ("basename(fd.sip) = 1", "E_BAD_OPERATOR @ 9"),
        ("proc.name = val(fd.num)", "E_BAD_OPERATOR @ 0"),
        ("fd.num glob val(fd.num)", "E_BAD_OPERATOR @ 0"),
        ("fd.num = abc", "E_BAD_VALUE @ 9"),
        (
            "fd.num in (1, abc, 2, x)",
            "E_BAD_VALUE @ 14, E_BAD_VALUE @ 22",
        ),
        ("fd.num = 99999999999999999999999", "E_BAD_VALUE @ 9"),
        ("proc.is_interactive = maybe", "E_BAD_VALUE @ 22"),
        ("fd.sip = 10.0.0.0/8", "E_BAD_VALUE @ 9"),
        ("fd.sip in (10.0.0.0/33)", "E_BAD_VALUE @ 11"),
        ("fd.net = nope", "E_BAD_VALUE @ 9"),
        ("fd.name regex '('", "E_BAD_VALUE @ 14"),
        ("fd.name glob '[abc'", "E_BAD_VALUE @ 13"),
        ("fd.name pmatch (/a/[b)", "E_BAD_VALUE @ 0"),
        ("some_macro and proc.name = x", "E_UNKNOWN_MACRO @ 0"),
        ("proc.args = anyof (a, b)", "E_BAD_OPERATOR @ 0"),
        ("fd.num = oneof (1, x)", "E_BAD_VALUE @ 19"),
        ("fd.sip contains anyof (1, 2)", "E_BAD_OPERATOR @ 0"),
        ("fd.name regex anyof (a, '(')", "E_BAD_VALUE @ 24"),
        (
            "a and nope.x = 1 and b",
            "E_UNKNOWN_MACRO @ 0, E_UNKNOWN_FIELD @ 6, E_UNKNOWN_MACRO @ 21",
        ),
    ];

    #[test]
    fn errors_have_codes_and_positions() {
        let cat = FakeCatalog::new();
        let mut failures = Vec::new();
        for (src, want) in ERRORS {
            match compile_one(&cat, src) {
                Ok(_) => failures.push(format!("{src}: compiled")),
                Err(errors) => {
                    let got = errors
                        .iter()
                        .map(|e| format!("{} @ {}", e.code, e.span.start))
                        .collect::<Vec<_>>()
                        .join(", ");
                    if got != *want {
                        let msgs: Vec<_> = errors.iter().map(|e| e.message.clone()).collect();
                        failures.push(format!("{src}: got {got} {msgs:?}, want {want}"));
                    }
                }
            }
        }
        assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
    }

    #[test]
    fn error_messages_name_the_object() {
        let cat = FakeCatalog::new();
        let e = compile_one(&cat, "proc.is_interactive > x").unwrap_err();
        assert_eq!(
            e[0].message,
            "operator `>` does not apply to BOOL field `proc.is_interactive`"
        );
        let e = compile_one(&cat, "fd.num = abc").unwrap_err();
        assert_eq!(e[0].message, "`abc` is not a number (INT64)");
        let e = compile_one(&cat, "nope.x = 1").unwrap_err();
        assert_eq!(e[0].message, "unknown field `nope.x`");
    }

    /// (condition, event types as names, or `all`).
    const EVENT_TYPES: &[(&str, &str)] = &[
        ("proc.name = bash", "all"),
        ("evt.type = openat", "openat"),
        ("evt.type = 'openat'", "openat"),
        ("evt.type in (execve, openat)", "openat execve"),
        (
            "evt.type in (execve, openat) and proc.name = x",
            "openat execve",
        ),
        ("evt.type = execve or proc.name = x", "all"),
        ("evt.type = execve or evt.type = connect", "execve connect"),
        ("evt.type = execve and evt.type = connect", ""),
        ("evt.type != execve", "openat connect procexit"),
        ("not evt.type = execve", "openat connect procexit"),
        ("not evt.type in (execve, openat)", "connect procexit"),
        (
            "not (evt.type = execve or evt.type = openat)",
            "connect procexit",
        ),
        ("not (evt.type = execve and proc.name = x)", "all"),
        ("not (evt.type = execve and evt.type = openat)", "all"),
        ("not not evt.type = execve", "execve"),
        ("evt.type = nonsense", ""),
        ("evt.type startswith exec", "all"),
        ("not proc.name = x and evt.type = connect", "connect"),
        ("evt.type in ()", ""),
        ("not evt.type in ()", "all"),
    ];

    #[test]
    fn event_types_follow_falco_resolution() {
        let cat = FakeCatalog::new();
        let mut failures = Vec::new();
        for (src, want) in EVENT_TYPES {
            let filter = compile_one(&cat, src).unwrap_or_else(|e| panic!("{src}: {e:?}"));
            let got = match filter.event_types() {
                None => "all".to_string(),
                Some(ids) => ids
                    .iter()
                    .map(|&id| crate::testutil::EVENT_TYPES[usize::from(id)])
                    .collect::<Vec<_>>()
                    .join(" "),
            };
            if got != *want {
                failures.push(format!("{src}: got {got:?}, want {want:?}"));
            }
        }
        assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
    }

    /// Falco's condition warnings: a bare value naming a field, `<NA>`, `evt.dir`.
    #[test]
    fn falco_condition_warnings() {
        let cat = FakeCatalog::new();
        let codes = |src: &str| {
            let f = compile_one(&cat, src).unwrap_or_else(|e| panic!("{src}: {e:?}"));
            f.warnings()
                .iter()
                .map(|w| format!("{} @ {}", w.code, w.span.start))
                .collect::<Vec<_>>()
                .join(", ")
        };
        assert_eq!(codes("proc.name = proc.pname"), "W_FIELD_AS_VALUE @ 12");
        assert_eq!(codes("proc.name = val(proc.pname)"), "");
        // Quoting does not matter, nor do spaces (libsinsp strips them before looking).
        assert_eq!(codes("proc.name = 'proc.pname'"), "W_FIELD_AS_VALUE @ 12");
        assert_eq!(codes("proc.name = 'proc.pname '"), "W_FIELD_AS_VALUE @ 12");
        assert_eq!(
            codes("proc.name in (a, proc.pname)"),
            "W_FIELD_AS_VALUE @ 17"
        );
        assert_eq!(
            codes("proc.name = anyof (a, proc.pname)"),
            "W_FIELD_AS_VALUE @ 22"
        );
        assert_eq!(
            codes("proc.name startswith oneof (a, proc.pname)"),
            "W_FIELD_AS_VALUE @ 31"
        );
        // A transformer call as a string value.
        assert_eq!(
            codes("proc.name = 'toupper( proc.pname)'"),
            "W_FIELD_AS_VALUE @ 12"
        );
        assert_eq!(codes("proc.name = 'tolow(proc.pname)'"), "");
        assert_eq!(codes("proc.name = tolower"), "");
        assert_eq!(codes("proc.name = unknown.field"), "");
        // A regex that a simpler operator could do.
        for simple in ["x", "^x$", ".*x", "x.*", ".+x.+", ".?x", "^x"] {
            assert_eq!(
                codes(&format!("proc.name regex '{simple}'")),
                "W_REGEX_SIMPLE @ 16",
                "{simple}"
            );
        }
        for real in ["x.{1}", "x\\.*", "s.*l", "ab[c]?"] {
            assert_eq!(codes(&format!("proc.name regex '{real}'")), "", "{real}");
        }
        assert_eq!(codes("proc.name = sshd.service"), "");
        assert_eq!(codes("fd.name = <NA>"), "");
        let cat_dir = crate::testcatalog::TestCatalog::new();
        let f = Compiler::new(&cat_dir)
            .compile(&parse_condition("evt.dir = < and proc.name = x").unwrap())
            .unwrap();
        assert_eq!(f.warnings()[0].code, "W_DEPRECATED");
        // A template's fields do not leak into the next condition's warnings.
        let mut c = Compiler::new(&cat_dir);
        c.compile_template("%evt.dir").unwrap();
        let f = c
            .compile(&parse_condition("proc.name = x").unwrap())
            .unwrap();
        assert!(f.warnings().is_empty());
        // `in ()` on a single-valued field folds to false: such a rule runs on no event.
        let f = compile_one(&cat, "proc.name in ()").unwrap();
        assert_eq!(f.event_types(), Some(vec![]));
    }

    #[test]
    fn unknown_event_types_are_warnings() {
        let cat = FakeCatalog::new();
        let filter = compile_one(&cat, "evt.type in (openat, nonsense)").unwrap();
        let w = filter.warnings();
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].code, "W_UNKNOWN_EVENT_TYPE");
        assert_eq!((w[0].span.start, w[0].span.end), (21, 29));
        assert_eq!(filter.event_types(), Some(vec![0]));
    }

    #[test]
    fn fields_are_extracted_once_per_event_across_filters() {
        let cat = FakeCatalog::new();
        let mut compiler = Compiler::new(&cat);
        let filters: Vec<Filter> = [
            "proc.name = sh",
            "proc.name = zsh or proc.name startswith b",
            "tolower(proc.name) = bash and fd.num = 3",
            "proc.name exists",
        ]
        .iter()
        .map(|src| compiler.compile(&parse_condition(src).unwrap()).unwrap())
        .collect();
        let template = compiler.compile_template("%proc.name %fd.num").unwrap();
        let slots = compiler.finish();
        assert_eq!(slots.len(), 2, "proc.name and fd.num share slots");
        let mut ctx = EvalCtx::new(&slots);
        let ev = FakeEvent::default();
        for _ in 0..3 {
            let mut event = ctx.event();
            let results: Vec<bool> = filters.iter().map(|f| f.eval(&ev, &mut event)).collect();
            assert_eq!(results, [false, true, true, true]);
            let out = template.render(&ev, &mut event);
            assert_eq!(out.text, "bash 3");
        }
        assert_eq!(ev.extractions("proc.name"), 3, "once per event");
        assert_eq!(ev.extractions("fd.num"), 3, "once per event");
    }

    #[test]
    fn shared_groups_are_memoized_once_per_event_across_filters() {
        let cat = FakeCatalog::new();
        let mut compiler = Compiler::new(&cat);
        // The same three-leaf group (a macro expanded into two rules), plus a different one.
        let shared = "(proc.name = bash and fd.num = 3 and proc.name != sh)";
        let sources = [
            format!("{shared} and fd.num > 1"),
            format!("fd.num < 10 and {shared}"),
            "(proc.name = bash and fd.num = 3 and proc.name != zsh)".to_string(),
        ];
        let filters: Vec<Filter> = sources
            .iter()
            .map(|src| compiler.compile(&parse_condition(src).unwrap()).unwrap())
            .collect();
        let memo_slots = |f: &Filter| {
            f.code
                .iter()
                .filter_map(|op| match op {
                    crate::eval::Op::MemoLoad { slot, .. } => Some(*slot),
                    _ => None,
                })
                .collect::<Vec<u32>>()
        };
        let (a, b, c) = (
            memo_slots(&filters[0]),
            memo_slots(&filters[1]),
            memo_slots(&filters[2]),
        );
        assert!(
            a.iter().any(|s| b.contains(s)),
            "the shared group has one slot: {a:?} {b:?}"
        );
        assert!(
            !c.iter().any(|s| a.contains(s)),
            "a different group has its own: {a:?} {c:?}"
        );
        // Once every rule is compiled, memos nothing shares are unwrapped; shared ones stay.
        let mut filters = filters;
        {
            let mut refs: Vec<&mut Filter> = filters.iter_mut().collect();
            crate::eval::keep_shared_memos(&mut refs);
        }
        let (a, b, c) = (
            memo_slots(&filters[0]),
            memo_slots(&filters[1]),
            memo_slots(&filters[2]),
        );
        assert_eq!(a, b, "the shared group keeps its memo in both filters");
        assert_eq!(a.len(), 1, "only the shared group is memoized: {a:?}");
        assert!(c.is_empty(), "an unshared group loses its memo: {c:?}");
        let slots = compiler.finish();
        let mut ctx = EvalCtx::new(&slots);
        let mut ev = FakeEvent::default();
        for (name, want) in [("bash", [true, true, true]), ("sh", [false, false, false])] {
            ev.set_str("proc.name", name);
            let mut event = ctx.event();
            let got: Vec<bool> = filters.iter().map(|f| f.eval(&ev, &mut event)).collect();
            drop(event);
            assert_eq!(
                got, want,
                "proc.name = {name}: a stale memo would repeat the last event"
            );
        }
    }

    #[test]
    fn reset_forgets_the_previous_event() {
        let cat = FakeCatalog::new();
        let mut compiler = Compiler::new(&cat);
        let filter = compiler
            .compile(&parse_condition("proc.name = bash").unwrap())
            .unwrap();
        let mut ctx = EvalCtx::new(&compiler.finish());
        let bash = FakeEvent::default();
        let mut sh = FakeEvent::default();
        sh.set_str("proc.name", "sh");
        assert!(filter.eval(&bash, &mut ctx.event()));
        assert!(!filter.eval(&sh, &mut ctx.event()));
        // A context built before the filter was compiled still works (it grows).
        let mut small = EvalCtx::new(&FieldSlots::default());
        assert!(filter.eval(&bash, &mut small.event()));
    }

    #[test]
    fn deep_trees_from_the_loader_are_rejected() {
        let cat = FakeCatalog::new();
        let leaf = parse_condition("proc.name = bash").unwrap();
        let mut expr = leaf.clone();
        for _ in 0..5000 {
            expr = Expr::Not(Box::new(expr));
        }
        let errors = Compiler::new(&cat).compile(&expr).unwrap_err();
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].code, "E_DEPTH");
        let mut expr = leaf.clone();
        for _ in 0..5000 {
            expr = Expr::And(vec![expr, leaf.clone()]);
        }
        let errors = Compiler::new(&cat).compile(&expr).unwrap_err();
        assert_eq!(errors[0].code, "E_DEPTH");
        // Dropping these trees recurses too; unwind them iteratively in the test.
        let mut e = expr;
        while let Expr::And(mut items) = e {
            e = items.swap_remove(0);
        }
        // Trees just under the limit compile and evaluate (on a test thread's small stack).
        let other = parse_condition("proc.name = sh").unwrap();
        let mut expr = leaf;
        for i in 0..MAX_TREE_DEPTH - 2 {
            expr = if i % 2 == 0 {
                Expr::And(vec![expr, Expr::Not(Box::new(other.clone()))])
            } else {
                Expr::Or(vec![expr, other.clone()])
            };
        }
        let mut compiler = Compiler::new(&cat);
        let filter = compiler.compile(&expr).unwrap();
        let mut ctx = EvalCtx::new(compiler.slots());
        assert!(filter.eval(&FakeEvent::default(), &mut ctx.event()));
        assert_eq!(filter.event_types(), None);
    }

    #[test]
    fn compiled_objects_can_be_shared_across_threads() {
        fn shared<T: Send + Sync>() {}
        fn sent<T: Send>() {}
        shared::<Filter>();
        shared::<crate::template::Template>();
        shared::<FieldSlots>();
        sent::<EvalCtx>();
    }

    #[test]
    fn constants_from_resolution_fold() {
        let cat = FakeCatalog::new();
        let mut c = Compiler::new(&cat);
        let leaf = parse_condition("proc.name = bash").unwrap();
        let f = c
            .compile(&Expr::And(vec![Expr::Const(true), leaf.clone()]))
            .unwrap();
        assert_eq!(f.event_types(), None);
        let f = c
            .compile(&Expr::And(vec![Expr::Const(false), leaf.clone()]))
            .unwrap();
        assert_eq!(f.event_types(), Some(vec![]));
        let f = c
            .compile(&Expr::Or(vec![Expr::Const(false), leaf]))
            .unwrap();
        let mut ctx = EvalCtx::new(c.slots());
        assert!(f.eval(&FakeEvent::default(), &mut ctx.event()));
    }

    #[test]
    fn failures_are_ruled_out_per_event_type() {
        // (condition, event types that may match a failed call), over the fake catalog's
        // types openat, execve, connect, procexit.
        let cases: &[(&str, &[&str])] = &[
            ("evt.type = execve and evt.res = SUCCESS", &[]),
            ("evt.type = execve and evt.res != SUCCESS", &["execve"]),
            ("evt.type = execve and evt.res in (SUCCESS)", &[]),
            ("evt.type = execve and evt.res = ENOENT", &["execve"]),
            ("evt.type = execve and evt.rawres >= 0", &[]),
            ("evt.type = execve and evt.rawres in (0, 1, 2)", &[]),
            ("evt.type = execve and evt.rawres < 0", &["execve"]),
            ("evt.type = execve and evt.rawres != 3", &["execve"]),
            ("evt.type = execve and evt.failed = false", &[]),
            ("evt.type = execve and not evt.failed = true", &[]),
            ("evt.type = execve and not evt.res = SUCCESS", &["execve"]),
            ("evt.type = execve and proc.name = bash", &["execve"]),
            (
                "(evt.type = execve and evt.res = SUCCESS and proc.name = x) \
                 or (evt.type = connect and proc.name = y)",
                &["connect"],
            ),
            (
                "evt.type in (execve, openat) and (evt.res = SUCCESS or proc.name = sh)",
                &["openat", "execve"],
            ),
            // fd.num is openat's result (negative on failure), connect's argument.
            (
                "evt.type in (openat, connect) and fd.num >= 0",
                &["connect"],
            ),
            ("evt.type = openat and fd.num > 2 and proc.name = x", &[]),
            ("evt.type = openat and not fd.num < 0", &[]),
            ("evt.type = openat and fd.num != 3", &["openat"]),
            (
                "evt.type = openat and (fd.num >= 0 or proc.name = x)",
                &["openat"],
            ),
        ];
        let cat = FakeCatalog::new();
        for (src, want) in cases {
            let filter = compile_one(&cat, src).unwrap_or_else(|e| panic!("{src}: {e:?}"));
            let got: Vec<&str> = (0u16..4)
                .filter(|&t| filter.may_match_failure(t))
                .map(|t| crate::testutil::EVENT_TYPES[usize::from(t)])
                .collect();
            assert_eq!(&got, want, "{src}");
        }
        let filter = compile_one(
            &cat,
            "evt.type = execve and proc.name = bash and fd.num > 2",
        )
        .expect("compiles");
        let names: Vec<&str> = filter.fields().iter().map(|f| cat.def(f.id).name).collect();
        assert_eq!(names, ["proc.name", "fd.num"]);
    }

    /// The entry-time filter never says "cannot match" when some result would make the exact
    /// condition match (soundness), and for conditions testing the result once it is exactly
    /// "some result matches".
    #[test]
    fn entry_filters_over_approximate_the_result() {
        use vigil_fields::Value;
        let conditions = [
            "fd.num >= 0 and fd.name = /etc/passwd",
            "not fd.num in (0, 1, 2) and proc.name = bash",
            "fd.num = 3 or proc.name = zsh",
            "not (fd.num = 3 and proc.name = bash)",
            "evt.type = openat and not (proc.name = zsh or fd.num < 0) and fd.name startswith /etc",
            "fd.num exists and proc.name in (bash, sh)",
        ];
        let cat = FakeCatalog::new();
        for src in conditions {
            let expr = parse_condition(src).unwrap_or_else(|e| panic!("parse {src:?}: {e}"));
            let mut compiler = Compiler::new(&cat);
            let filter = compiler
                .compile(&expr)
                .unwrap_or_else(|e| panic!("compile {src:?}: {e:?}"));
            assert!(filter.depends_on_result(), "{src}: tests fd.num");
            let mut ctx = EvalCtx::new(&compiler.finish());
            for name in ["bash", "zsh"] {
                for path in ["/etc/passwd", "/tmp/x"] {
                    let event = |fd: Option<i64>| {
                        let mut ev = FakeEvent::default();
                        ev.set_str("proc.name", name);
                        ev.set_str("fd.name", path);
                        ev.set("fd.num", fd.map(Value::I64).into_iter().collect());
                        ev
                    };
                    let some_result_matches = [None, Some(-2), Some(0), Some(1), Some(3), Some(7)]
                        .into_iter()
                        .any(|fd| filter.eval(&event(fd), &mut ctx.event()));
                    // The entry view does not know the result.
                    let entry = filter.eval_before_result(&event(None), &mut ctx.event());
                    assert_eq!(
                        entry, some_result_matches,
                        "{src} with proc.name={name} fd.name={path}"
                    );
                }
            }
        }
        // A condition without result fields has no separate entry program.
        let expr = parse_condition("proc.name = bash").unwrap();
        let filter = Compiler::new(&cat).compile(&expr).unwrap();
        assert!(!filter.depends_on_result());
    }

    #[test]
    fn required_values_come_from_top_level_conjuncts() {
        let cat = FakeCatalog::new();
        let fd_num = cat.lookup("fd.num", None).unwrap();
        let cases: [(&str, Option<&[i128]>); 7] = [
            ("fd.num in (2, 0, 1) and proc.name = bash", Some(&[0, 1, 2])),
            (
                "proc.name = bash and (fd.num = 5 and proc.pid = 3)",
                Some(&[5]),
            ),
            ("fd.num = 3 or proc.name = zsh", None),
            ("not fd.num in (1) and proc.name = bash", None),
            ("fd.num >= 0 and proc.name = bash", None),
            ("proc.name = bash", None),
            ("fd.num in (1, 2) and fd.num = 2", Some(&[1, 2])),
        ];
        for (src, want) in cases {
            let expr = parse_condition(src).unwrap();
            let filter = Compiler::new(&cat).compile(&expr).unwrap();
            assert_eq!(filter.required_values(&fd_num), want, "{src}");
        }
    }

    #[test]
    fn required_substrings_come_from_top_level_contains_conjuncts() {
        let cat = FakeCatalog::new();
        let nameraw = cat.lookup("fd.nameraw", None).unwrap();
        let cases: [(&str, &[&str]); 7] = [
            (
                "(fd.nameraw contains '../' and fd.nameraw glob '*../*../*') and proc.name = cat",
                &["../"],
            ),
            (
                "fd.nameraw contains abc and (proc.name = x and fd.nameraw contains def)",
                &["abc", "def"],
            ),
            ("fd.nameraw contains '../' or proc.name = cat", &[]),
            ("not fd.nameraw contains '../' and proc.name = cat", &[]),
            ("fd.nameraw icontains abc", &[]),
            ("fd.nameraw startswith /etc", &[]),
            ("fd.name contains abc", &[]),
        ];
        for (src, want) in cases {
            let expr = parse_condition(src).unwrap();
            let filter = Compiler::new(&cat).compile(&expr).unwrap();
            let got: Vec<&[u8]> = filter.required_substrings(&nameraw).collect();
            let want: Vec<&[u8]> = want.iter().map(|s| s.as_bytes()).collect();
            assert_eq!(got, want, "{src}");
        }
    }
}

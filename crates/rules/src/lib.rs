//! The Falco-compatible rules engine: rules files → diagnostics and a compiled, event-type
//! indexed ruleset → matches.
//!
//! This crate knows nothing about kernels, processes or I/O beyond the rules text handed to it:
//! event data arrives only through [`vigil_fields::Extract`].
//!
//! # The phases
//!
//! As in Falco's loader, read → collect → compile → evaluate: `parser` (condition text →
//! `ast::Expr`, bounded depth), [`loader`] (YAML with positions → items; collect
//! lists/macros/rules with `append`/`override`, exceptions, enable/disable; resolve macros and
//! lists), [`compile`] (fields resolved and type-checked against a [`vigil_fields::Catalog`],
//! literals pre-parsed, lists as hash sets, regex/glob compiled; structurally identical groups
//! across rules share a memo slot, so an expanded macro is evaluated at most once per event;
//! `Ruleset::new` unwraps the memos no two rules share; `and`/`or` keep the
//! author's order except that `evt.type` tests move first; besides the exact program, a rule that
//! tests a result-dependent field (`Catalog::depends_on_result`) gets an *entry program* with those
//! tests relaxed to "could be either", which a kernel-less driver evaluates at syscall entry, and
//! `Filter::required_values` exposes top-level `field in (numbers)` and `field = true|false`
//! conjuncts for seccomp conditions and entry trials), `eval`, `template` (`%field` outputs; string
//! values escaped by `escape`, so they cannot add a line), `ruleset` (rules indexed by event type;
//! `rule_matching`, selectors, priority threshold), `diag` (stable codes with `file:line:col`).
//!
//! # Falco semantics worth knowing
//!
//! The language is the Falco engine's 0.63.0 ([`ENGINE_VERSION`], the one place it is kept):
//! Falco 0.44's (libs 0.25) with Falco 0.45's matching model — string operators compare raw
//! bytes, `regex` sees invalid UTF-8 as U+FFFD; what is and is not supported is in
//! `docs/rules-language.md`. Operator modifiers (`startswith anyof (…)`, also in exception `comps`)
//! are `Rhs::Modified` in the AST and `Test::Multi` in the evaluator (`= anyof` compiles to an `in`
//! set, `evt.type = anyof` stays an event-type bit test). The multivalue transformers (`join`,
//! `concat`, `getopt`) are an `ast::Operand` whose `call` holds the arguments (`field` then names
//! the function and carries `getopt`'s `[c]`), and `eval::CBase::Multi` in the evaluator: arguments
//! are evaluated into the per-comparison scratch arena, and the result is one more run of values
//! there. `fd.ip`/`fd.port`/`fd.net` are endpoint pairs (`Catalog::is_endpoint_pair`): `!=` on them
//! requires every endpoint to differ. `glob` follows libsinsp's implementation (`fnmatch` without
//! `FNM_PATHNAME`: `*` crosses `/`), not the sentence in Falco's docs that says otherwise — the
//! stable rules' `directory_traversal` macro depends on it. A missing value makes every comparison
//! false (so `not` of it true). `in` on a list field is a subset test; the "any ancestor" fields
//! (`proc.aname`, `proc.apid` …) without an index are multi-valued, not lists, so `in` means "any".
//! Falco's and libs' own unit tests are the specification for loading, parsing and compiling:
//! `crates/rules/tests/loader/upstream_cases.rs` replays their cases (one test per upstream case or group,
//! named in its doc comment, inputs written here); warnings Falco's tests match carry Falco's text,
//! and `Diagnostic::falco_code` maps Vigil's codes to Falco's `LOAD_*` codes. Deliberate
//! differences are listed in `docs/rules-language.md`.
#![forbid(unsafe_code)]

pub mod ast;
pub mod compile;
pub mod diag;
pub mod escape;
pub mod eval;
pub mod loader;
pub mod parser;
pub mod priority;
pub mod ruleset;
pub mod template;
/// Test fake: for this crate's tests, and for other crates' tests and the fuzz targets
/// through the `test-support` feature (never in the agent's build).
#[cfg(any(test, feature = "test-support"))]
pub mod testcatalog;
#[cfg(test)]
mod testutil;

pub use diag::{Diagnostic, Severity};
pub use loader::{
    engine_compatible_with, version_text, FileStats, LoadOptions, LoadResult, RulesLoader,
    ENGINE_VERSION,
};
pub use priority::Priority;
pub use ruleset::{
    InterestTypes, Rule, RuleMatching, Ruleset, Selection, SelectionEntry, SelectionTarget,
};

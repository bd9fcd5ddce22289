//! The Falco-compatible rules engine: rules files → diagnostics and a compiled, event-type
//! indexed ruleset → matches.
//!
//! Phases, as in Falco's loader: **read** (YAML → items with source positions, [`loader`]),
//! **collect** (lists, macros, rules; `append`/`override`; exceptions; enable/disable), **compile**
//! (expand macros, resolve fields against a [`vigil_fields::Catalog`], type-check operators, build
//! the evaluator, [`compile`]), then **evaluate** ([`Ruleset`]).
//!
//! This crate knows nothing about kernels, processes or I/O beyond the rules text handed to it:
//! event data arrives only through [`vigil_fields::Extract`].
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
pub use loader::{FileStats, LoadOptions, LoadResult, RulesLoader, ENGINE_VERSION};
pub use priority::Priority;
pub use ruleset::{
    InterestTypes, Rule, RuleMatching, Ruleset, Selection, SelectionEntry, SelectionTarget,
};

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

//! The agent's configuration model.
//!
//! This crate owns `Config`: its keys (named after Falco's `falco.yaml` wherever Vigil shares a
//! setting with Falco), its defaults, loading from YAML with errors that name the key path and
//! line:column, Falco-style `-o key.path=value` overrides, the embedded commented default file and
//! printing the effective configuration. It knows nothing about how outputs, the webserver or the
//! metrics behave; it only describes what the user asked for. The rules' priorities and the
//! outputs' sections are their crates' own types (`vigil_rules`, `vigil_output::settings`),
//! which this crate reads and maps onto ([`Config::output_settings`], [`Metrics::flags`]); they
//! do not know it.
//!
//! Keys that Falco understands but Vigil does not implement (`engine`, `plugins`, `grpc`, …) are
//! accepted and reported as warnings so that an unmodified `falco.yaml` loads; any other key is an
//! error.

mod emit;
mod model;
mod parse;
mod tree;

pub use model::*;
pub use parse::{ConfigError, Loaded};

/// The embedded default configuration; it loads to exactly `Config::default()`.
pub const DEFAULT_CONFIG: &str = include_str!("../default.yaml");

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
//!
//! # Loading, and the keys only Vigil has
//!
//! The agent's configuration model with Falco's `falco.yaml` key names, the embedded default
//! (`default.yaml`), `-o key.path=value` overrides and `to_yaml` for `vigil config show`. Errors
//! name the key path and `file:line:col`; Falco-only settings and unknown keys (with a "did you
//! mean" when one is close) load with a warning and are ignored, so a newer falco.yaml loads; a
//! known key with a wrong type is an error. Vigil-only keys: `spool_dir`, `spool_max_bytes`,
//! `retry_max_backoff` in each output, `http_output.timeout`, `syslog_output.socket`, `drop_alert`,
//! `webserver.bind_failure` (`exit`, the default: an enabled web server whose address cannot be
//! bound stops the start with exit code 1 naming the address; `continue`: a warning, no `/healthz`
//! or `/metrics`); `outputs_queue.capacity: 0` means a 100000-alert bound, never unbounded.

mod emit;
mod model;
mod parse;
mod tree;

pub use model::*;
pub use parse::{ConfigError, Loaded};

/// The embedded default configuration; it loads to exactly `Config::default()`.
pub const DEFAULT_CONFIG: &str = include_str!("../default.yaml");

//! The rules loader's integration tests, one binary: diagnostics with positions, loading
//! semantics (append, override, exceptions, selection) and Falco's own upstream cases, with
//! the helpers of [`common`] (loading with the test catalog, matching test events).

mod common;

mod engine_version;
mod loader_diagnostics;
mod loader_semantics;
mod upstream_cases;

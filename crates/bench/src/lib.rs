//! `vigil-bench`: the benchmark suite users run to measure what an agent costs and how much it
//! can take, on their own machines — Vigil or any other agent.
//!
//! - [`workload`]: UnixBench-style tests and paced loads, run inside `vigil bench worker`.
//! - [`overhead`]: every test with the agent off and on, interleaved; UnixBench indices.
//! - [`execrate`]: `/bin/true` at fixed exec rates; CPU of named processes and of the workload.
//! - [`capacity`]: a watched-syscall ramp under a CPU budget until the agent drops events.
//! - [`genbench`]: Falco event-generator's `bench` method over `vigil generate` actions.
//! - [`idle`]: an agent's CPU and wakeups per second on a host with nothing for it to do.
//! - [`latency`]: the time from a syscall to its alert on the agent's stdout, at fixed rates.
//! - [`falco`]: Falco as an agent (`--agent falco`): its install, start, readiness, counters;
//!   [`servers`]: the real workloads `redis` and `nginx`, servers the bench starts itself.
//! - [`counters`]: the counters an agent reports at exit, one shape for every agent.
//! - [`report`]: Markdown + JSON reports and the charts; [`plots`]: a report's SVG plots, drawn
//!   from its `report.json` alone; [`system`]: machine facts and `/proc` readers.
//!
//! Knows the agents only by their command lines and documented contracts (readiness line,
//! SIGTERM, `--stats` JSON line: see [`agent`]); knows nothing about flags or where text goes —
//! progress is handed to a caller-supplied closure. All unsafe code is in the private `sys`
//! module.
//!
//! # The tools in detail
//!
//! The measurement tools: UnixBench-style workloads (run as `vigil bench worker`, so they can be
//! wrapped by `vigil run` or `strace`), `overhead` (agent-off and agent-on runs interleaved, index
//! and geometric mean), `exec-rate` (CPU of named processes at fixed exec rates), `capacity` (ramp
//! a watched-syscall load under a CPU budget until drops appear), the event-generator's round
//! method, and Markdown/JSON/SVG reports (`docs/bench/README.md`). A stopped background agent is
//! waited for until every new process of its name has gone (`vigil watch`'s tracepoint releaser
//! detaches for seconds after the agent exits), so the next run's baseline is not measured during
//! the teardown. `busy.rs` keeps chosen CPUs awake with `SCHED_IDLE` spinners in every
//! configuration (the idle-vCPU effect); `watch:ARGS` agents pass arguments to `vigil watch`, among
//! them `--bpf-floor nop|ring` (the floor of the attach points, `bpf/README.md`).

use thiserror::Error;

pub mod agent;
pub mod busy;
pub mod capacity;
pub mod counters;
pub mod execrate;
pub mod falco;
pub mod genbench;
pub mod idle;
pub mod latency;
pub mod overhead;
pub mod plots;
pub mod report;
pub mod servers;
pub mod stats;
mod sys;
pub mod system;
pub mod workload;

/// Errors of the benchmark suite.
#[derive(Debug, Error)]
pub enum BenchError {
    #[error("cannot {what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid {what}: {detail}")]
    Invalid { what: String, detail: String },
    #[error("agent: {0}")]
    Agent(String),
    #[error("worker `{test}` failed: {detail}")]
    Worker { test: String, detail: String },
    #[error("cannot draw `{path}`: {detail}")]
    Plot { path: String, detail: String },
}

/// A progress sink: one human-readable line per call.
pub type Progress<'a> = &'a mut dyn FnMut(&str);

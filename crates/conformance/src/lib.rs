//! The driver-conformance suite: the same syscall scenarios run under every Vigil driver
//! (`vigil watch`, eBPF; `vigil run`, ptrace), and the events each driver records checked
//! parameter by parameter against one set of expectations.
//!
//! - [`cases`]: the scenarios and their expectations, as data;
//! - the `vigil-trigger CASE DIR PORT` binary performs one scenario with raw syscalls
//!   ([`sys`], the crate's only `unsafe`);
//! - [`check`]: the checker (expectations × events → mismatches, rendered as one table);
//! - [`driver`]: the [`driver::Driver`] trait and its two implementations, which drive the
//!   `vigil` binary and read the captures it writes with `-w`.
//!
//! This crate knows the event model and the capture codec (`vigil-event`) and the `vigil`
//! command line; it knows nothing of how a driver works inside.

pub mod cases;
pub mod check;
pub mod driver;
pub mod sys;

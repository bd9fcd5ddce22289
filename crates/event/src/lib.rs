//! The Vigil event model: events, parameters, the x86-64 syscall table, process-table
//! snapshots, and the capture-file codecs (binary and JSON lines).
//!
//! This crate owns the *shape* of data that flows from a driver to the state engine. It does no
//! I/O beyond encoding and decoding byte streams handed to it, and knows nothing about rules.
#![forbid(unsafe_code)]

pub mod codec;
pub mod flags;
pub mod model;
pub mod syscalls_x86_64;
pub mod table;

pub use model::*;
pub use table::{EventSpec, ParamSpec};

//! The Vigil event model: events, parameters, the syscall tables (x86-64 numbers name events on
//! every architecture: [`arch`]), process-table
//! snapshots, and the capture-file codecs (binary and JSON lines).
//!
//! This crate owns the *shape* of data that flows from a driver to the state engine. It does no
//! I/O beyond encoding and decoding byte streams handed to it, and knows nothing about rules.
#![forbid(unsafe_code)]

pub mod arch;
pub mod codec;
pub mod flags;
pub mod model;
pub mod syscalls_aarch64;
pub mod syscalls_x86_64;
pub mod table;

pub use model::*;
pub use table::{EventSpec, EventType, FlagTable, ParamKind, ParamSpec};

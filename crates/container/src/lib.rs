//! Container metadata from the container runtimes' own files: docker, containerd (CRI),
//! podman and CRI-O, as runc and the daemons leave them on disk, with a read-only reader of
//! the bbolt databases where CRI and podman keep labels.
//!
//! Entry points: [`RuntimeReader`] (what the state engine asks when a process of an unknown
//! container executes a program, retried and counted in [`LookupStats`]), [`lookup`] (one
//! container now), [`add_snapshot_containers`] (the containers of a start snapshot, so a
//! capture carries them), [`ContainerTable`] (metadata by short id) and [`RuntimeDirs`] (where
//! the runtimes keep their state). What is read from which runtime: [`runtime`].
//!
//! Invariants: runtime files are untrusted input (bounded reads, every offset checked, a
//! malformed file reads as "not found", never a panic); nothing is written and no lock is
//! taken, so a runtime is never blocked; no socket is opened (a runtime's socket would let
//! the agent start containers). It knows events only for [`vigil_event::ContainerInfo`] and
//! the snapshot it fills, and nothing about the state engine, rules or drivers.
#![forbid(unsafe_code)]

mod bolt;
pub mod runtime;
mod table;
#[cfg(any(test, feature = "test-support"))]
pub mod testutil;

pub use runtime::{
    add_snapshot_containers, discover_docker, lookup, LookupStats, RuntimeDirs, RuntimeReader,
    SANDBOX_ID_LABEL,
};
pub use table::{label, ContainerTable};

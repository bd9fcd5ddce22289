//! The thin layer over the kernel, one module per kernel object (as aya's `sys`): the loaded
//! object and its attachments (`prog`), maps and counters (`maps`), ring buffers and the wait on
//! them (`ring`), link teardown (`link`), tracefs and tracepoint perf events (`tracefs`,
//! `perf_event`), kernel BTF (`btf`), feature probes (`probe`), libbpf's load log (`load_log`)
//! and the clocks (`time`). Which hook and floor to use is decided above it (`crate::policy`,
//! `BpfSource::open`).
//!
//! Invariant: the only module of the crate allowed `unsafe` (the skeletons' generated code,
//! `bpf()` probes, `perf_event_open`, `fsopen`/`fsmount`, `epoll_*`, `fork` for the link
//! releaser and `clock_gettime`); each block says why it is sound.
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

use libbpf_rs::{Link, MapHandle, RingBuffer};

use crate::policy::Hook;
use crate::EbpfError;

mod btf;
mod link;
mod load_log;
mod maps;
mod perf_event;
mod probe;
mod prog;
mod ring;
mod time;
mod tracefs;

pub use btf::fexit_target;
pub use maps::{KernelDrops, KernelWakeups, Needle, WAKE_KEY_PROCEXIT};
pub use probe::{bpf_call_refused, missing_feature, OLDEST_KERNEL};
pub use ring::{Waiter, RING_BYTES};
pub use time::{boot_now, boot_to_wall_offset};
pub use tracefs::Tracefs;

// Generated code (libbpf-cargo): its unsafe blocks carry no SAFETY comments.
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    unsafe_code,
    unused_qualifications
)]
mod skel {
    include!(concat!(env!("OUT_DIR"), "/vigil.skel.rs"));
}

// Generated code (libbpf-cargo), as above.
#[allow(
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks,
    unsafe_code,
    unused_qualifications
)]
mod stubs_skel {
    include!(concat!(env!("OUT_DIR"), "/vigil_stubs.skel.rs"));
}

use link::SyscallLinks;
use skel::VigilSkel;

/// The loaded programs, their maps and links, and the ring buffers. Its methods sit with the
/// kernel object they touch: loading and attaching in `prog.rs`, map updates and counters in
/// `maps.rs`, consumption and the waiter in `ring.rs`.
pub struct Bpf {
    // Field order matters for drop order: links and the ring buffer go before the skeleton.
    syscall_links: BTreeMap<u16, SyscallLinks>,
    hook: Hook,
    /// HOOK_RAW: the `sys_exit` program's link, while any syscall is hooked.
    raw_exit: Option<Link>,
    /// Kernel BTF, to check that a syscall's `__x64_sys_X` exists before loading its stub.
    vmlinux: Option<libbpf_rs::btf::Btf<'static>>,
    /// `fexit`: the BTF prototypes of the `__x64_sys_X` targets the capture programs serve
    /// (index 0: `vigil_sys_fexit`, 1: `vigil_sys_fexit1`; see `bpf/vigil.bpf.c`).
    fexit_protos: Vec<libbpf_rs::btf::TypeId>,
    /// `raw_syscalls` enter/exit, attached while a watched syscall has no tracepoint.
    raw_links: Option<(Link, Link)>,
    /// Syscall numbers captured through `raw_syscalls` (set in `fallback_nrs`).
    fallback: Vec<u16>,
    _lifecycle_links: Vec<Link>,
    ring: RingBuffer<'static>,
    rings: Vec<MapHandle>,
    /// The keys of `wake_types` set to 1 now.
    wake_keys: Vec<u32>,
    /// The `state_only` keys as last set.
    state_only_keys: Vec<u32>,
    /// The `result_filters` entries as last set (kernel number, allowed results).
    result_filters: Vec<(u32, u64)>,
    /// The `failure_needles` entries as last set (kernel number, needle).
    failure_needles: Vec<(u32, Needle)>,
    skel: VigilSkel<'static>,
    /// Whether the lifecycle programs' wakeups are deferred (`defer_wake_ns`): asked for,
    /// and the kernel took the timer.
    defers_wakes: bool,
    /// Raw records consumed but not yet decoded: `[u32 length][bytes]…`.
    raw: Rc<RefCell<Vec<u8>>>,
    /// Where tracepoint ids are looked up (kept for the life of the capture: a SIGHUP
    /// re-attaches tracepoints, and a private instance needs no privilege to keep), or why
    /// there is none (`EbpfError::NoTracefs`'s message): only `fexit` runs without it (its
    /// syscalls need no tracepoint; the `raw_syscalls` fallback does).
    tracefs: Result<Tracefs, String>,
}

/// A libbpf error as [`EbpfError::Load`], saying what could not be done.
fn load_err(what: &'static str) -> impl FnOnce(libbpf_rs::Error) -> EbpfError {
    move |source| EbpfError::Load {
        what,
        message: source.to_string(),
    }
}

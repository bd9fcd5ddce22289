//! The programs' maps: per-syscall settings (capture spec, failure filter, hooked and fallback
//! numbers, wakeup types) and the per-CPU counters (drops, wakeups).

use libbpf_rs::{MapCore, MapFlags};

use super::{load_err, Bpf};
use crate::spec::CaptureSpec;
use crate::EbpfError;

/// The `wake_types` key of `procexit` (the others are syscall numbers).
pub const WAKE_KEY_PROCEXIT: u32 = 512;

/// A string whose absence filters out a failed call (`struct failure_needle` in
/// `bpf/vigil.bpf.c`): the kernel searches the path string of argument `arg` for `bytes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needle {
    arg: u8,
    bytes: Vec<u8>,
}

impl Needle {
    /// The needle `bytes` (at most [`crate::spec::NEEDLE_MAX`] of them searched: a longer
    /// string contains its prefix) in the path of argument `arg`; `None` for an empty one
    /// (every path contains it) or an argument beyond the six registers.
    pub fn new(arg: u8, bytes: &[u8]) -> Option<Needle> {
        if bytes.is_empty() || arg >= 6 {
            return None;
        }
        let n = bytes.len().min(crate::spec::NEEDLE_MAX);
        Some(Needle {
            arg,
            bytes: bytes[..n].to_vec(),
        })
    }

    /// The map value: the bytes (zero-padded), their count, the argument.
    fn to_value(&self) -> [u8; crate::spec::NEEDLE_MAX + 8] {
        let mut value = [0u8; crate::spec::NEEDLE_MAX + 8];
        value[..self.bytes.len()].copy_from_slice(&self.bytes);
        let len = u32::try_from(self.bytes.len()).unwrap_or(0);
        value[16..20].copy_from_slice(&len.to_ne_bytes());
        value[20..24].copy_from_slice(&u32::from(self.arg).to_ne_bytes());
        value
    }
}

/// Drop counters kept by the kernel side, per reason (summed over CPUs), the count of
/// failed calls filtered out by design (not a loss) and the count of records committed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelDrops {
    pub buffer_full: u64,
    pub read_faults: u64,
    pub stash_full: u64,
    /// Failed calls not recorded because nothing could use them (`skip_failed` in the
    /// kernel: see [`crate::BpfOptions::failed_unused`]). Filtering, not loss: these events
    /// were never meant to be delivered.
    pub filtered_failed: u64,
    /// Descriptor operations only the state engine needed (close, dup*, fcntl(F_DUPFD*))
    /// folded away in the kernel instead of recorded (`hold_state_op` in
    /// `bpf/vigil.bpf.c`; see `spec::state_only`). Filtering, not loss: user space's
    /// descriptor table ends the same without them.
    pub folded_state: u64,
    /// Records committed to the ring buffers (every kind, floor records included): what user
    /// space can consume, so `consumed + still in the rings == submitted`.
    pub submitted: u64,
}

/// The wakeups the kernel gave the reader (`wake_reason` in `bpf/vigil.bpf.c`), by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelWakeups {
    /// For a record of a type an enabled rule watches.
    pub watched: u64,
    /// Because a ring held `BpfOptions::wake_bytes`.
    pub filled: u64,
    /// Process-lifecycle records of watched types written without a wakeup, left to the
    /// timer (`BpfSource::defers_wakes`).
    pub deferred: u64,
    /// By the timer, for the deferred records written before it.
    pub timer: u64,
}

impl Bpf {
    /// Where each parameter of syscall `nr` comes from (`specs`).
    pub(super) fn set_spec(&self, nr: u16, spec: CaptureSpec) -> Result<(), EbpfError> {
        self.skel
            .maps
            .specs
            .update(
                &u32::from(nr).to_ne_bytes(),
                &spec.to_bytes(),
                MapFlags::ANY,
            )
            .map_err(load_err("fill the capture-spec map"))
    }

    /// Whether syscall `nr` is captured through `raw_syscalls` (`fallback_nrs`).
    pub(super) fn set_fallback_nr(&self, nr: u16, on: bool) -> Result<(), EbpfError> {
        self.skel
            .maps
            .fallback_nrs
            .update(&u32::from(nr).to_ne_bytes(), &[u8::from(on)], MapFlags::ANY)
            .map_err(load_err("fill the fallback syscall map"))
    }

    /// Whether the kernel drops the failed calls of syscall `nr` (counting them).
    pub(super) fn set_skip_failed(&self, nr: u16, skip: bool) -> Result<(), EbpfError> {
        self.skel
            .maps
            .skip_failed
            .update(
                &u32::from(nr).to_ne_bytes(),
                &[u8::from(skip)],
                MapFlags::ANY,
            )
            .map_err(load_err("fill the failure-filter map"))
    }

    /// Marks syscall `nr` as hooked (or not) for the fork program.
    pub(super) fn set_hooked(&self, nr: u16, on: bool) -> Result<(), EbpfError> {
        self.skel
            .maps
            .hooked_nrs
            .update(&u32::from(nr).to_ne_bytes(), &[u8::from(on)], MapFlags::ANY)
            .map_err(load_err("fill the hooked-syscall map"))
    }

    /// Makes exactly the records of `keys` (syscall numbers, [`WAKE_KEY_PROCEXIT`]) wake the
    /// reader (`wake_types`).
    pub fn set_wake_types(&mut self, keys: &[u32]) -> Result<(), EbpfError> {
        let map = &self.skel.maps.wake_types;
        sync_flags(map, &self.wake_keys, keys, "fill the wakeup map")?;
        self.wake_keys = keys.to_vec();
        Ok(())
    }

    /// Makes exactly the syscalls `nrs` (kernel numbers) "state only" (`state_only`): their
    /// records may be held back and folded (`hold_state_op` in `bpf/vigil.bpf.c`).
    pub fn set_state_only(&mut self, nrs: &[u32]) -> Result<(), EbpfError> {
        let map = &self.skel.maps.state_only;
        sync_flags(
            map,
            &self.state_only_keys,
            nrs,
            "fill the state-only syscall map",
        )?;
        self.state_only_keys = nrs.to_vec();
        Ok(())
    }

    /// Makes exactly the syscalls of `filters` (kernel number, results 0..=63 some rule may
    /// match) result-filtered (`result_filters` in `bpf/vigil.bpf.c`): a successful call
    /// with another result is held back and folded as a state-only one. The others: no filter.
    pub fn set_result_filters(&mut self, filters: &[(u32, u64)]) -> Result<(), EbpfError> {
        let map = &self.skel.maps.result_filters;
        let set = |nr: u32, filter: Option<u64>| {
            // struct result_filter: allowed (u64), active (u32), pad (u32).
            let mut value = [0u8; 16];
            if let Some(allowed) = filter {
                value[..8].copy_from_slice(&allowed.to_ne_bytes());
                value[8..12].copy_from_slice(&1u32.to_ne_bytes());
            }
            map.update(&nr.to_ne_bytes(), &value, MapFlags::ANY)
                .map_err(load_err("fill the result-filter map"))
        };
        for &(nr, _) in &self.result_filters {
            if !filters.iter().any(|&(n, _)| n == nr) {
                set(nr, None)?;
            }
        }
        for &filter in filters.iter().filter(|f| !self.result_filters.contains(f)) {
            set(filter.0, Some(filter.1))?;
        }
        self.result_filters = filters.to_vec();
        Ok(())
    }

    /// Makes exactly the syscalls of `needles` (kernel number, needle) keep a failed call only
    /// when its path contains the needle (`failure_needles` in `bpf/vigil.bpf.c`). The others:
    /// no such filter.
    pub fn set_failure_needles(&mut self, needles: &[(u32, Needle)]) -> Result<(), EbpfError> {
        let map = &self.skel.maps.failure_needles;
        let set = |nr: u32, value: [u8; crate::spec::NEEDLE_MAX + 8]| {
            map.update(&nr.to_ne_bytes(), &value, MapFlags::ANY)
                .map_err(load_err("fill the failure-needle map"))
        };
        for (nr, _) in &self.failure_needles {
            if !needles.iter().any(|(n, _)| n == nr) {
                set(*nr, [0; crate::spec::NEEDLE_MAX + 8])?;
            }
        }
        for (nr, needle) in needles.iter().filter(|n| !self.failure_needles.contains(n)) {
            set(*nr, needle.to_value())?;
        }
        self.failure_needles = needles.to_vec();
        Ok(())
    }

    /// The kernel-side drop counters, summed over CPUs.
    pub fn drops(&self) -> KernelDrops {
        let mut drops = KernelDrops::default();
        for cpu in self.drops_per_cpu() {
            drops.buffer_full += cpu.buffer_full;
            drops.read_faults += cpu.read_faults;
            drops.stash_full += cpu.stash_full;
            drops.filtered_failed += cpu.filtered_failed;
            drops.folded_state += cpu.folded_state;
            drops.submitted += cpu.submitted;
        }
        drops
    }

    /// The wakeups the kernel gave the reader, by reason, summed over CPUs (`wake_states`).
    pub fn wakeups(&self) -> KernelWakeups {
        let Ok(Some(per_cpu)) = self
            .skel
            .maps
            .wake_states
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        else {
            return KernelWakeups::default();
        };
        let mut total = KernelWakeups::default();
        for value in &per_cpu {
            let n = |i: usize| {
                value
                    .get(i * 8..i * 8 + 8)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_ne_bytes)
            };
            // struct wake_state: last, watched, filled, deferred.
            total.watched += n(1);
            total.filled += n(2);
            total.deferred += n(3);
        }
        if self.defers_wakes {
            // struct defer_timer: the timer (16 bytes), armed, ready, fired.
            total.timer = self
                .skel
                .maps
                .defer_timers
                .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
                .ok()
                .flatten()
                .and_then(|v| v.get(24..32).and_then(|b| b.try_into().ok()))
                .map_or(0, u64::from_ne_bytes);
        }
        total
    }

    /// The kernel-side drop counters of each CPU.
    pub fn drops_per_cpu(&self) -> Vec<KernelDrops> {
        let Ok(Some(per_cpu)) = self
            .skel
            .maps
            .drop_counts
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        else {
            return Vec::new();
        };
        per_cpu
            .iter()
            .map(|value| {
                let n = |i: usize| {
                    value
                        .get(i * 8..i * 8 + 8)
                        .and_then(|b| b.try_into().ok())
                        .map_or(0, u64::from_ne_bytes)
                };
                KernelDrops {
                    buffer_full: n(0),
                    read_faults: n(1),
                    stash_full: n(2),
                    filtered_failed: n(3),
                    submitted: n(4),
                    folded_state: n(5),
                }
            })
            .collect()
    }
}

/// Makes a `u32 → u8` flag map hold exactly `new` (set to 1), given that it held `old`: clears
/// the keys that left, sets the keys that came.
fn sync_flags(
    map: &impl MapCore,
    old: &[u32],
    new: &[u32],
    what: &'static str,
) -> Result<(), EbpfError> {
    let set = |key: u32, on: bool| {
        map.update(&key.to_ne_bytes(), &[u8::from(on)], MapFlags::ANY)
            .map_err(load_err(what))
    };
    for &key in old.iter().filter(|k| !new.contains(k)) {
        set(key, false)?;
    }
    for &key in new.iter().filter(|k| !old.contains(k)) {
        set(key, true)?;
    }
    Ok(())
}

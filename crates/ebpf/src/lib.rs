//! The eBPF driver: host-wide capture of completed syscalls and process lifecycle, as
//! [`vigil_event::Event`]s, through [`BpfSource`] (a [`vigil_capture::Source`]).
//!
//! Kernel side (`bpf/vigil.bpf.c`, CO-RE, built by `build.rs` with libbpf-cargo): one generic
//! enter/exit program pair attached to the per-syscall tracepoints (`syscalls/sys_enter_X`,
//! `sys_exit_X`) of exactly the syscalls in the interest set (the rules' event types plus what
//! the state engine needs, [`driver_interest`]), so an unwatched syscall costs nothing; entry
//! arguments are stashed per thread and one record is written at exit. Clones are reported from
//! `sched_process_fork` (before the child runs), successful execs from `sched_process_exec` (the
//! new image: argv, env, credentials, tty…), thread exits from `sched_process_exit`. One ring
//! buffer per CPU, written without wakeups; this side polls every millisecond or so. The agent's
//! own process is excluded in the kernel. Watched syscalls without a tracepoint of their own
//! fall back to `raw_syscalls` filtered by number in the kernel ([`BpfSource::fallback_syscalls`]).
//! [`BpfSource::drain`] ends a capture without losing what is still in flight.
//!
//! This crate knows the event model, the [`vigil_capture::Source`] interface and the `/proc`
//! bootstrap (`vigil_state::procfs`); it knows nothing of rules or outputs. All `unsafe` is in
//! the `sys` module.

use std::collections::VecDeque;
use std::path::Path;
use std::time::{Duration, Instant};

use vigil_capture::{DropReason, InterestSet, Source, SourceError, SourceStats};
use vigil_event::{Event, Snapshot};
use vigil_state::{ProcError, RealProc, SnapshotOptions, SnapshotStats};

mod decode;
mod spec;
mod sys;

pub use decode::Decoder;
pub use spec::{driver_interest, STATE_NEEDS};
pub use sys::KernelDrops;

/// Why the eBPF driver cannot run or go on.
#[derive(Debug, thiserror::Error)]
pub enum EbpfError {
    #[error(
        "eBPF capture needs root or the capabilities CAP_BPF and CAP_PERFMON (missing: {missing}); \
         without them, run the workload under Vigil instead: `vigil run -- CMD`"
    )]
    Permission { missing: String },
    #[error(
        "eBPF capture needs kernel BTF, and `/sys/kernel/btf/vmlinux` is missing (a kernel built \
         with CONFIG_DEBUG_INFO_BTF=y); without it, run the workload under Vigil instead: \
         `vigil run -- CMD`"
    )]
    NoBtf,
    #[error(
        "eBPF capture needs tracefs (syscall tracepoints), and neither `/sys/kernel/tracing` nor \
         `/sys/kernel/debug/tracing` has them; mount it (`mount -t tracefs nodev \
         /sys/kernel/tracing`) or run the workload under Vigil instead: `vigil run -- CMD`"
    )]
    NoTracefs,
    #[error("cannot {what}: {message}")]
    Load { what: &'static str, message: String },
    #[error("cannot attach the eBPF program to tracepoint `{name}`: {message}")]
    Attach { name: String, message: String },
    #[error("cannot read the process table for the start snapshot")]
    Snapshot(#[source] ProcError),
    #[error("cannot read the eBPF ring buffers (error {code})")]
    Poll { code: u32 },
}

/// Options of [`BpfSource::open`].
#[derive(Clone, Debug)]
pub struct BpfOptions {
    /// Event types the consumer needs (the rules'); [`driver_interest`] adds the state's.
    pub interest: InterestSet,
    /// How the start snapshot reads `/proc` (`exclude_pid` defaults to this process).
    pub snapshot: SnapshotOptions,
    /// How long [`Source::next_batch`] waits for events before returning an empty batch.
    pub max_wait: Duration,
    /// Capture watched syscalls that have no tracepoint of their own on this kernel through
    /// the `raw_syscalls` tracepoints. Off by default: such a syscall is not implemented by
    /// the kernel (it always fails with `ENOSYS`), and while the fallback is attached every
    /// syscall on the host runs a short program, which breaks "pay for what you watch".
    pub raw_fallback: bool,
}

impl Default for BpfOptions {
    fn default() -> Self {
        BpfOptions {
            interest: InterestSet::new(),
            snapshot: SnapshotOptions::default(),
            max_wait: Duration::from_millis(5),
            raw_fallback: false,
        }
    }
}

/// How long an event is held back so that events committed on other CPUs (each CPU has its
/// ring) can be merged in timestamp order before it.
const REORDER_WINDOW_NS: u64 = 2_000_000;
/// Syscall numbers the kernel's `fallback_nrs` map can hold.
const FALLBACK_NR_LIMIT: u16 = 512;
/// Sleep between polls of empty ring buffers.
const POLL_INTERVAL: Duration = Duration::from_millis(1);

/// Whether this process can run the eBPF driver here; the error names what is missing.
pub fn check_support() -> Result<(), EbpfError> {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(str::trim)
            .unwrap_or("")
            .to_owned()
    };
    let euid_is_root = field("Uid:").split_whitespace().nth(1) == Some("0");
    let cap_eff = u64::from_str_radix(&field("CapEff:"), 16).unwrap_or(0);
    let has = |bit: u32| cap_eff & (1u64 << bit) != 0;
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    if !(has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))) {
        let mut missing = Vec::new();
        if !euid_is_root {
            missing.push("root");
        }
        if !has(CAP_BPF) {
            missing.push("CAP_BPF");
        }
        if !has(CAP_PERFMON) {
            missing.push("CAP_PERFMON");
        }
        return Err(EbpfError::Permission {
            missing: missing.join(", "),
        });
    }
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        return Err(EbpfError::NoBtf);
    }
    if tracefs_syscalls().is_none() {
        return Err(EbpfError::NoTracefs);
    }
    Ok(())
}

fn tracefs_syscalls() -> Option<&'static Path> {
    [
        "/sys/kernel/tracing/events/syscalls",
        "/sys/kernel/debug/tracing/events/syscalls",
    ]
    .into_iter()
    .map(Path::new)
    .find(|p| p.is_dir())
}

/// Host-wide capture through eBPF.
pub struct BpfSource {
    bpf: sys::Bpf,
    decoder: Decoder,
    snapshot: Snapshot,
    snapshot_stats: SnapshotStats,
    raw: Vec<u8>,
    fresh: Vec<Event>,
    /// Decoded events not yet old enough to deliver, by timestamp.
    held: VecDeque<Event>,
    delivered: u64,
    max_wait: Duration,
    unsupported: Vec<&'static str>,
    fallback: Vec<&'static str>,
    raw_fallback: bool,
}

impl BpfSource {
    /// Loads and attaches the programs for `options.interest`, then reads the `/proc`
    /// snapshot (attach first, so that nothing that happens in between is missed).
    pub fn open(options: BpfOptions) -> Result<BpfSource, EbpfError> {
        check_support()?;
        let bpf = sys::Bpf::load(std::process::id())?;
        let mut source = BpfSource {
            bpf,
            decoder: Decoder::new(sys::boot_to_wall_offset()),
            snapshot: Snapshot::default(),
            snapshot_stats: SnapshotStats::default(),
            raw: Vec::with_capacity(1 << 20),
            fresh: Vec::with_capacity(4096),
            held: VecDeque::with_capacity(4096),
            delivered: 0,
            max_wait: options.max_wait,
            unsupported: Vec::new(),
            fallback: Vec::new(),
            raw_fallback: false,
        };
        source.raw_fallback = options.raw_fallback;
        source.attach(&options.interest)?;
        let (snapshot, stats) = vigil_state::read_snapshot(&RealProc::default(), &options.snapshot)
            .map_err(EbpfError::Snapshot)?;
        source.snapshot = snapshot;
        source.snapshot_stats = stats;
        Ok(source)
    }

    fn attach(&mut self, interest: &InterestSet) -> Result<(), EbpfError> {
        let dir = tracefs_syscalls().ok_or(EbpfError::NoTracefs)?;
        let raw_ok = dir
            .parent()
            .is_some_and(|events| events.join("raw_syscalls/sys_enter").is_dir());
        let mut wanted = Vec::new();
        let mut fallback = Vec::new();
        self.unsupported.clear();
        self.fallback.clear();
        for etype in driver_interest(interest).iter() {
            let Some(nr) = etype.spec().nr else {
                continue;
            };
            let name = spec::tracepoint_name(etype.name());
            if dir.join(format!("sys_enter_{name}")).is_dir() {
                wanted.push((nr, name, spec::capture_spec(etype)));
            } else if self.raw_fallback && raw_ok && nr < FALLBACK_NR_LIMIT {
                fallback.push((nr, spec::capture_spec(etype)));
                self.fallback.push(etype.name());
            } else {
                self.unsupported.push(etype.name());
            }
        }
        self.bpf.set_syscalls(&wanted)?;
        self.bpf.set_fallback(&fallback)?;
        Ok(())
    }

    /// What the start snapshot read, skipped and cut.
    pub fn snapshot_stats(&self) -> &SnapshotStats {
        &self.snapshot_stats
    }

    /// The syscall numbers whose tracepoints are attached.
    pub fn attached_syscalls(&self) -> Vec<u16> {
        self.bpf.attached()
    }

    /// Event types in the interest set that cannot be captured on this kernel (no
    /// tracepoint of their own, and no `raw_syscalls` tracepoint to fall back to).
    pub fn unsupported(&self) -> &[&'static str] {
        &self.unsupported
    }

    /// Event types in the interest set without a tracepoint of their own on this kernel,
    /// captured through the `raw_syscalls` tracepoints instead (filtered by syscall number
    /// in the kernel; while any is watched, every syscall of the host runs a short program).
    pub fn fallback_syscalls(&self) -> &[&'static str] {
        &self.fallback
    }

    /// Ends the capture: moves every event still in the kernel's ring buffers or held back
    /// for reordering into `out`, in timestamp order. Call it after the last
    /// [`Source::next_batch`], so that the events of the last milliseconds are not lost.
    pub fn drain(&mut self, out: &mut Vec<Event>) -> Result<(), EbpfError> {
        self.pull()?;
        let n = self.held.len();
        out.extend(self.held.drain(..));
        self.delivered += n as u64;
        Ok(())
    }

    /// Arguments the kernel could not read (the events were delivered with `<NA>` there).
    pub fn read_faults(&self) -> u64 {
        self.bpf.drops().read_faults
    }

    /// The kernel's drop counters per CPU (index = CPU number): records lost because that
    /// CPU's ring was full or the per-thread stash was full, arguments that could not be read.
    pub fn drops_per_cpu(&self) -> Vec<KernelDrops> {
        self.bpf.drops_per_cpu()
    }

    /// Moves newly committed records into `held`, sorted by time.
    fn pull(&mut self) -> Result<(), EbpfError> {
        self.raw.clear();
        self.bpf.consume(&mut self.raw)?;
        if self.raw.is_empty() {
            return Ok(());
        }
        self.decoder.decode_all(&self.raw, &mut self.fresh);
        self.fresh.sort_by_key(|e| e.ts);
        let in_order = match (self.held.back(), self.fresh.first()) {
            (Some(last), Some(first)) => last.ts <= first.ts,
            _ => true,
        };
        self.held.extend(self.fresh.drain(..));
        if !in_order {
            self.held.make_contiguous().sort_by_key(|e| e.ts);
        }
        Ok(())
    }

    /// How many held events are old enough to deliver (older than the reorder window).
    fn ready(&self) -> usize {
        let now = sys::boot_now().saturating_add(self.decoder.boot_offset);
        let watermark = now.saturating_sub(REORDER_WINDOW_NS);
        self.held.partition_point(|e| e.ts <= watermark)
    }
}

impl Source for BpfSource {
    fn snapshot(&mut self) -> Result<Snapshot, SourceError> {
        Ok(self.snapshot.clone())
    }

    /// Waits at most `max_wait` for events; never ends on its own (`Ok(true)`).
    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, SourceError> {
        let deadline = Instant::now() + self.max_wait;
        loop {
            self.pull()
                .map_err(|e| SourceError::driver("ebpf", e.to_string()))?;
            let ready = self.ready().min(max);
            if ready > 0 {
                out.extend(self.held.drain(..ready));
                self.delivered += ready as u64;
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(true);
            }
            std::thread::sleep(POLL_INTERVAL);
        }
    }

    fn stats(&self) -> SourceStats {
        let drops = self.bpf.drops();
        let mut stats = SourceStats {
            events_in: self.delivered,
            dropped: Vec::new(),
        };
        let buffer = drops.buffer_full + drops.stash_full;
        if buffer > 0 {
            stats.add_dropped(DropReason::BufferFull, buffer);
        }
        if self.decoder.malformed > 0 {
            stats.add_dropped(DropReason::Malformed, self.decoder.malformed);
        }
        stats
    }

    fn set_interest(&mut self, interest: &InterestSet) -> Result<(), SourceError> {
        self.attach(interest)
            .map_err(|e| SourceError::driver("ebpf", e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_what_is_missing_and_suggest_run() {
        let e = EbpfError::Permission {
            missing: "root, CAP_BPF".into(),
        };
        let text = e.to_string();
        assert!(
            text.contains("root, CAP_BPF") && text.contains("vigil run -- CMD"),
            "{text}"
        );
        assert!(EbpfError::NoBtf
            .to_string()
            .contains("/sys/kernel/btf/vmlinux"));
        assert!(EbpfError::NoTracefs.to_string().contains("vigil run"));
    }

    #[test]
    fn default_options_wait_briefly() {
        let o = BpfOptions::default();
        assert!(o.max_wait <= Duration::from_millis(10));
        assert!(o.interest.is_empty());
    }
}

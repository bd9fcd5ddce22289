//! The eBPF driver: host-wide capture of completed syscalls and process lifecycle, as
//! [`vigil_event::Event`]s, through [`BpfSource`] (a [`vigil_capture::Source`]).
//!
//! Kernel side: `bpf/vigil.bpf.c` (CO-RE, built by `build.rs` with libbpf-cargo). How syscalls
//! are hooked (fexit where trampolines are allowed, else the watched syscalls' exit
//! tracepoints), which failed calls are filtered out, which descriptor operations are held back
//! and folded, the record layout, the wakeup rules and what each kernel needs: `bpf/README.md`.
//!
//! Entry points: [`check_support`], [`BpfSource::open`] (loads and attaches, then calls its
//! caller back for the start snapshot), the [`vigil_capture::Source`] methods (a reader that
//! blocks in `epoll_wait` on the per-CPU rings and merges them in time order),
//! [`BpfSource::set_interest_and_failures`] (a reload), [`BpfSource::drain`] (the end of a
//! capture, nothing in flight lost). Inside: `spec.rs` (per syscall, where each schema parameter
//! comes from; the kernel's capture spec derives from it), `decode.rs` (records → events),
//! `policy.rs` (`Hook`, `Floor`, `WakeTuning`), `sys/` (the skeleton and every `unsafe`, one
//! module per kernel object).
//!
//! Invariants:
//! - knows the event model and the `Source` interface, nothing of the state engine, rules or
//!   outputs; the record layout has one source (`bpf/include/vigil_record.h`, read by `build.rs`);
//! - records are untrusted bytes: decoding never panics, a malformed record is a counted drop;
//! - nothing is lost silently: the kernel counts drops per CPU and reason; failed calls filtered
//!   out (`filtered_failed`) and descriptor operations folded (`folded_state`) are counted apart
//!   from losses; the reorder queue is bounded, so overload shows as counted `buffer_full` drops,
//!   not memory growth;
//! - kernel differences are handled before or at load, never by luck: a missing feature is named
//!   in one line (oldest supported kernel 5.17), a refused load names the program and the
//!   verifier's reason with the full log in a 0600 file, and the host's mounts are left as they
//!   were (a private tracefs instance when none is mounted).

use std::collections::VecDeque;
use std::os::fd::AsFd;
use std::path::Path;
use std::time::{Duration, Instant};

use vigil_capture::{
    DropReason, InterestSet, Source, SourceError, SourceStats, WakeReceiver, Waker,
};
use vigil_event::{Event, EventType, Snapshot};

mod decode;
mod policy;
mod spec;
mod sys;

pub use decode::Decoder;
pub use policy::{Floor, Hook};
pub use spec::{driver_interest, STATE_NEEDS, STATE_USES_FAILED};
pub use sys::{fexit_target, KernelDrops, KernelWakeups, OLDEST_KERNEL};

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
        "eBPF capture needs tracefs (syscall tracepoints){}: none is mounted at \
         `/sys/kernel/tracing` or `/sys/kernel/debug/tracing`, and a private instance cannot \
         be created ({message}); mount it (`mount -t tracefs nodev /sys/kernel/tracing`; in a \
         container, mount the host's `/sys/kernel/tracing` there) or run the workload under \
         Vigil instead: `vigil run -- CMD`",
        fexit_refused.as_ref().map(|why| format!(
            " since BPF trampolines (fexit), which need none, are refused here ({why})"
        )).unwrap_or_default()
    )]
    NoTracefs {
        message: String,
        /// Why `fexit` could not be used, when the exit tracepoints were the fallback.
        fexit_refused: Option<String>,
    },
    #[error(
        "eBPF capture needs the {feature} (Linux {since} or later), which this kernel \
         ({release}) lacks; Vigil's eBPF capture supports Linux {oldest} or later. Run the \
         workload under Vigil instead: `vigil run -- CMD`",
        oldest = sys::OLDEST_KERNEL
    )]
    Unsupported {
        feature: &'static str,
        since: &'static str,
        release: String,
    },
    #[error(
        "the kernel refused the bpf() system call ({message}) although this process has the \
         capabilities for it{}",
        if *seccomp { SECCOMP_HINT } else { " (a security module?)" }
    )]
    BpfRefused { message: String, seccomp: bool },
    #[error("cannot {what}: {message}")]
    Load { what: &'static str, message: String },
    #[error("cannot attach the eBPF program to tracepoint `{name}`: {message}")]
    Attach { name: String, message: String },
    #[error("cannot read the process table for the start snapshot")]
    Snapshot(#[source] Box<dyn std::error::Error + Send + Sync>),
    #[error("cannot read the eBPF ring buffers (error {code})")]
    Poll { code: u32 },
}

/// Said when a seccomp filter refuses `bpf()` or `perf_event_open()`.
const SECCOMP_HINT: &str = ": refused by this process's seccomp filter (`Seccomp: 2` in \
     /proc/self/status). The default profiles of Docker before 23 and containerd before 1.6.9 \
     allow bpf() and perf_event_open() with CAP_SYS_ADMIN only: run the container with a \
     profile that allows both (`docker run --security-opt seccomp=unconfined`, Kubernetes \
     `seccompProfile: {type: Unconfined}`) or a newer runtime";

/// Whether this process runs under a seccomp filter (`Seccomp: 2`, `SECCOMP_MODE_FILTER`).
fn seccomp_filtered() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() == "2"))
    })
}

/// [`SECCOMP_HINT`] for an `EPERM` under a seccomp filter, else nothing.
fn seccomp_hint(err: &std::io::Error) -> &'static str {
    if err.raw_os_error() == Some(libc::EPERM) && seccomp_filtered() {
        SECCOMP_HINT
    } else {
        ""
    }
}

/// Options of [`BpfSource::open`].
#[derive(Clone, Debug)]
pub struct BpfOptions {
    /// Event types the consumer needs (the rules'); [`driver_interest`] adds the state's.
    pub interest: InterestSet,
    /// Event types whose failed calls (result < 0) the consumer cannot use: no rule watching
    /// the type may match a failure and no capture is written. The kernel filters those
    /// calls out (counted as [`KernelDrops::filtered_failed`], not as drops), except for the
    /// types whose failures the state engine learns from ([`STATE_USES_FAILED`]). Empty (the
    /// default): every failed call is delivered.
    pub failed_unused: InterestSet,
    /// Per descriptor-duplicating syscall the rules watch, the results 0..=63 some rule may
    /// match (bit `n`: result `n`; `vigil_engine::descriptor_result_masks`). For a type whose
    /// failures are unused too (`spec::result_filtered`), the kernel treats a successful
    /// call with another result as state-only: held back and folded like an unwatched one
    /// (counted in [`KernelDrops::folded_state`]). Empty (the default): no such filter.
    pub result_masks: Vec<(EventType, u64)>,
    /// Per open type whose failures some rule may match, but only when the path as passed
    /// contains some bytes (`vigil_engine::failure_path_needles`: Falco's
    /// `directory_traversal` needs `'../'`): the kernel searches the path it copied and
    /// filters out a failed call without them, counted with
    /// [`KernelDrops::filtered_failed`]. At most [`spec::NEEDLE_MAX`] bytes are searched (a
    /// longer string's prefix, which it contains). Empty (the default): no such filter.
    pub failure_needles: Vec<(EventType, Vec<u8>)>,
    /// The longest [`Source::next_batch`] (and [`Source::next_batch_until`], whatever its
    /// deadline) blocks before it returns, with an empty batch if nothing came: the bound on
    /// how long a record written without a wakeup stays unread.
    pub max_wait: Duration,
    /// Bytes waiting in a CPU's ring at which the kernel wakes the reader for a record of any
    /// type (below it, only the types the rules watch wake it). Default: an eighth of the
    /// ring; `u64::MAX`: only the rules' types.
    pub wake_bytes: u64,
    /// How long an event is held back so that the records of other CPUs stamped before it
    /// are merged in first (default 2 ms); a CPU that woke the reader does not wake it again
    /// for half of it.
    pub reorder_window: Duration,
    /// Capture watched syscalls that have no tracepoint of their own on this kernel through
    /// the `raw_syscalls` tracepoints. Off by default: such a syscall is not implemented by
    /// the kernel (it always fails with `ENOSYS`), and while the fallback is attached every
    /// syscall on the host runs a short program, which breaks "pay for what you watch".
    pub raw_fallback: bool,
    /// How syscalls are hooked; `None` (the default): fexit trampolines where the kernel
    /// allows them, else the per-syscall exit tracepoints ([`BpfSource::hook_fallback`] says
    /// why).
    pub hook: Option<Hook>,
    /// For `vigil bench`: programs that do nothing (or only write the ring) at the same
    /// attach points, to measure the floor under Vigil's own work. No events are captured.
    pub floor: Floor,
}

impl Default for BpfOptions {
    fn default() -> Self {
        BpfOptions {
            interest: InterestSet::new(),
            failed_unused: InterestSet::new(),
            result_masks: Vec::new(),
            failure_needles: Vec::new(),
            max_wait: Duration::from_secs(1),
            wake_bytes: u64::from(sys::RING_BYTES / 8),
            reorder_window: Duration::from_nanos(REORDER_WINDOW_NS),
            raw_fallback: false,
            hook: None,
            floor: Floor::default(),
        }
    }
}

/// What ended the waits of [`Source::next_batch_until`] ([`BpfSource::reader_waits`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReaderWaits {
    /// The kernel woke the reader (a wait with nothing held: one that holds events waits
    /// for their window to end, and reads whatever the kernel announced meanwhile then).
    pub rings: u64,
    /// The caller's [`Waker`].
    pub caller: u64,
    /// The wait's time ran out: a held event's window ended, or the deadline came.
    pub timeout: u64,
}

/// How long an event is held back so that events committed on other CPUs (each CPU has its
/// ring) can be merged in timestamp order before it (the default of
/// [`BpfOptions::reorder_window`]).
const REORDER_WINDOW_NS: u64 = 2_000_000;
/// Syscall numbers the kernel's `fallback_nrs` map can hold.
const FALLBACK_NR_LIMIT: u16 = 512;
/// After a CPU woke the reader, how long its records do not wake it again: they are read
/// when the reorder window of the record that woke it ends (`bpf/vigil.bpf.c`, `wake_reason`).
/// Half the window: a record written in the gap must be committed before the window of the
/// record that woke the reader ends (a record takes microseconds to write; the other half is
/// the margin).
fn wake_gap_ns(reorder_window_ns: u64) -> u64 {
    reorder_window_ns / 2
}
/// How long after a process-lifecycle record of a watched type the kernel's timer wakes the
/// reader (`defer_wake_ns` in `bpf/vigil.bpf.c`): when a reader woken at once for it would read
/// the rings again anyway (the record's window, then the slack a holding reader sleeps on,
/// [`BpfSource::reorder_slack`]), so the process's next records (a fork's exec, an exec's
/// exit) come in that one wakeup.
fn deferred_wake_ns(reorder_window_ns: u64) -> u64 {
    reorder_window_ns.saturating_add(reorder_window_ns / 2)
}
/// Most decoded events held in user space. Past it the kernel's rings are left alone until
/// the consumer catches up (the rings are the buffer, so memory stays bounded), and the
/// oldest events are delivered even when younger than the reorder window.
const HELD_LIMIT: usize = 16_384;

/// Whether this process can run the eBPF driver here; the error names what is missing.
pub fn check_support() -> Result<(), EbpfError> {
    // Unreadable: neither root nor any capability.
    let (euid_is_root, cap_eff) =
        vigil_procfs::own_status().map_or((false, 0), |s| (s.has_ids && s.euid == 0, s.cap_eff));
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
    Ok(())
}

/// The running kernel's release (`uname -r`), for messages.
fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_else(|_| "release unknown".to_owned())
}

/// Host-wide capture through eBPF.
pub struct BpfSource {
    bpf: sys::Bpf,
    decoder: Decoder,
    snapshot: Snapshot,
    raw: Vec<u8>,
    fresh: Vec<Event>,
    /// Scratch for merging the held events later than the earliest fresh one.
    tail: Vec<Event>,
    /// Decoded events not yet old enough to deliver, by timestamp.
    held: VecDeque<Event>,
    /// `CLOCK_BOOTTIME` when the rings were last read: every record stamped a reorder window
    /// before it has been pulled into `held`.
    pulled_at: u64,
    delivered: u64,
    max_wait: Duration,
    unsupported: Vec<&'static str>,
    fallback: Vec<&'static str>,
    raw_fallback: bool,
    /// Why the fexit hook could not be used (tracepoints were used instead).
    hook_fallback: Option<String>,
    /// [`BpfOptions::failed_unused`], as last set.
    failed_unused: InterestSet,
    /// [`BpfOptions::result_masks`], as last set.
    result_masks: Vec<(EventType, u64)>,
    /// [`BpfOptions::failure_needles`], as last set.
    failure_needles: Vec<(EventType, Vec<u8>)>,
    /// The watched syscalls whose failed calls are filtered out in the kernel.
    filtered: Vec<&'static str>,
    /// [`BpfOptions::reorder_window`].
    reorder_window_ns: u64,
    /// Blocks on the rings and `wake_rx`.
    waiter: sys::Waiter,
    /// What ended the reader's waits.
    waits: ReaderWaits,
    waker: Waker,
    wake_rx: WakeReceiver,
}

impl BpfSource {
    /// Loads and attaches the programs for `options.interest`, then calls `start_snapshot`
    /// for the state of the host (attach first, so that nothing that happens in between is
    /// missed); [`Source::snapshot`] returns what it read. The caller reads `/proc` (leaving
    /// this process out, as the kernel side does).
    pub fn open<E>(
        options: BpfOptions,
        start_snapshot: impl FnOnce() -> Result<Snapshot, E>,
    ) -> Result<BpfSource, EbpfError>
    where
        E: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        check_support()?;
        if let Some(err) = sys::bpf_call_refused() {
            return Err(EbpfError::BpfRefused {
                message: err.to_string(),
                seccomp: seccomp_filtered(),
            });
        }
        let tgid = std::process::id();
        if let Some(feature) = sys::missing_feature() {
            return Err(EbpfError::Unsupported {
                feature: feature.name,
                since: feature.since,
                release: kernel_release(),
            });
        }
        // Loads the programs for `hook` and attaches them to the interest set.
        let reorder_window_ns =
            u64::try_from(options.reorder_window.as_nanos()).unwrap_or(u64::MAX);
        let wake = policy::WakeTuning {
            bytes: options.wake_bytes,
            gap_ns: wake_gap_ns(reorder_window_ns),
            defer_ns: deferred_wake_ns(reorder_window_ns),
        };
        let start = |hook, save_log, hook_fallback| -> Result<BpfSource, EbpfError> {
            // `fexit` runs without a tracefs (without the `raw_syscalls` fallback then):
            // found through neither the host's mount nor a private instance (which needs
            // CAP_SYS_ADMIN), the other hooks fail here.
            let bpf = sys::Bpf::load(
                tgid,
                sys::Tracefs::open(),
                hook,
                options.floor,
                wake,
                save_log,
            )?;
            let (waker, wake_rx) = Waker::pair().map_err(|e| EbpfError::Load {
                what: "create the wake-up socket",
                message: e.to_string(),
            })?;
            let waiter = bpf.waiter(wake_rx.as_fd())?;
            let mut source = BpfSource {
                bpf,
                decoder: Decoder::new(sys::boot_to_wall_offset()),
                snapshot: Snapshot::default(),
                raw: Vec::with_capacity(1 << 20),
                fresh: Vec::with_capacity(4096),
                tail: Vec::new(),
                held: VecDeque::with_capacity(4096),
                pulled_at: 0,
                delivered: 0,
                max_wait: options.max_wait,
                unsupported: Vec::new(),
                fallback: Vec::new(),
                raw_fallback: options.raw_fallback,
                hook_fallback,
                failed_unused: options.failed_unused.clone(),
                result_masks: options.result_masks.clone(),
                failure_needles: options.failure_needles.clone(),
                filtered: Vec::new(),
                reorder_window_ns,
                waiter,
                waits: ReaderWaits::default(),
                waker,
                wake_rx,
            };
            source.attach(&options.interest)?;
            Ok(source)
        };
        let mut source = match options.hook {
            Some(hook) => start(hook, true, None)?,
            // Trampolines first. A kernel that refuses them refuses the load (its log is not
            // kept); one that loads them but refuses a stub's attach (a kernel difference not
            // foreseen) fails here too: either way the exit tracepoints take over and the
            // reason is reported.
            None => match start(Hook::Fexit, false, None) {
                Ok(source) => source,
                Err(e) => {
                    let why = e.to_string();
                    start(Hook::Exit, true, Some(why.clone())).map_err(|e| match e {
                        EbpfError::NoTracefs { message, .. } => EbpfError::NoTracefs {
                            message,
                            fexit_refused: Some(why),
                        },
                        e => e,
                    })?
                }
            },
        };
        source.snapshot = start_snapshot().map_err(|e| EbpfError::Snapshot(e.into()))?;
        Ok(source)
    }

    fn attach(&mut self, interest: &InterestSet) -> Result<(), EbpfError> {
        // Without a tracefs (`fexit` only) there is no `raw_syscalls` fallback.
        let raw_ok = self
            .bpf
            .tracefs()
            .is_ok_and(|t| t.events().join("raw_syscalls/sys_enter").is_dir());
        let mut wanted = Vec::new();
        let mut fallback = Vec::new();
        self.unsupported.clear();
        self.fallback.clear();
        self.filtered.clear();
        for etype in driver_interest(interest).iter() {
            let Some(event_nr) = etype.spec().nr else {
                continue;
            };
            // The kernel's number (events carry x86-64's). A call this architecture lacks
            // (`open`, `stat`, `fork` on arm64) cannot be made here: nothing is missed, so
            // it is not reported with the calls the kernel could make but not show.
            let Some(nr) = vigil_event::arch::native_nr(event_nr) else {
                continue;
            };
            let name = spec::tracepoint_name(etype.name());
            let skip_failed = spec::skip_failed(etype, &self.failed_unused);
            if self.bpf.can_hook(name) {
                wanted.push((nr, name, spec::capture_spec(etype), skip_failed));
            } else if self.raw_fallback && raw_ok && nr < FALLBACK_NR_LIMIT {
                fallback.push((nr, spec::capture_spec(etype), skip_failed));
                self.fallback.push(etype.name());
            } else {
                self.unsupported.push(etype.name());
                continue;
            }
            if skip_failed {
                self.filtered.push(etype.name());
            }
        }
        self.bpf.set_syscalls(&wanted)?;
        self.bpf.set_fallback(&fallback)?;
        self.bpf.set_wake_types(&wake_keys(interest))?;
        let state_only: Vec<u32> = spec::STATE_FOLDABLE
            .iter()
            .filter_map(|name| vigil_event::table::by_name(name))
            .filter(|&etype| spec::state_only(etype, interest, &self.failed_unused))
            .filter_map(|etype| vigil_event::arch::native_nr(etype.spec().nr?))
            .map(u32::from)
            .collect();
        self.bpf.set_state_only(&state_only)?;
        let result_filters: Vec<(u32, u64)> = self
            .result_masks
            .iter()
            .filter(|&&(etype, _)| spec::result_filtered(etype, interest, &self.failed_unused))
            .filter_map(|&(etype, mask)| {
                Some((
                    u32::from(vigil_event::arch::native_nr(etype.spec().nr?)?),
                    mask,
                ))
            })
            .collect();
        self.bpf.set_result_filters(&result_filters)?;
        let needles: Vec<(u32, sys::Needle)> = self
            .failure_needles
            .iter()
            .filter(|(etype, _)| spec::needle_filtered(*etype, interest, &self.failed_unused))
            .filter_map(|(etype, needle)| {
                let nr = u32::from(vigil_event::arch::native_nr(etype.spec().nr?)?);
                Some((
                    nr,
                    sys::Needle::new(spec::failure_path_arg(*etype)?, needle)?,
                ))
            })
            .collect();
        self.bpf.set_failure_needles(&needles)?;
        Ok(())
    }

    /// Changes what is watched ([`Source::set_interest`]) and which failed calls are filtered
    /// out in the kernel ([`BpfOptions::failed_unused`], [`BpfOptions::failure_needles`]) and
    /// which results of the watched dups ([`BpfOptions::result_masks`]), e.g. after the rules
    /// were reloaded.
    pub fn set_interest_and_failures(
        &mut self,
        interest: &InterestSet,
        failed_unused: &InterestSet,
        result_masks: &[(EventType, u64)],
        failure_needles: &[(EventType, Vec<u8>)],
    ) -> Result<(), EbpfError> {
        self.failed_unused = failed_unused.clone();
        self.result_masks = result_masks.to_vec();
        self.failure_needles = failure_needles.to_vec();
        self.attach(interest)
    }

    /// The watched syscalls whose failed calls the kernel filters out now.
    pub fn filtered_failures(&self) -> &[&'static str] {
        &self.filtered
    }

    /// Where the syscall tracepoints were found: the host's tracefs mount, or (when nobody
    /// mounted one) a private instance mounted nowhere, or (`fexit` only) why there is none.
    /// For the start-up log.
    pub fn tracefs_origin(&self) -> String {
        let tracefs = match self.bpf.tracefs() {
            Ok(tracefs) => tracefs,
            Err(why) => {
                return format!(
                    "no tracefs ({why}): not needed by BPF trampolines (fexit); syscalls \
                     without a function of their own cannot fall back to raw_syscalls"
                )
            }
        };
        if tracefs.is_private() {
            "tracefs is not mounted on this host: using a private instance (nothing mounted)"
                .to_owned()
        } else {
            let root = tracefs.events().parent().unwrap_or(tracefs.events());
            format!(
                "syscall tracepoints from the tracefs mounted at {}",
                root.display()
            )
        }
    }

    /// How syscalls are hooked.
    pub fn hook(&self) -> Hook {
        self.bpf.hook()
    }

    /// Why fexit trampolines could not be used here, when tracepoints are used instead.
    pub fn hook_fallback(&self) -> Option<&str> {
        self.hook_fallback.as_deref()
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

    /// Descriptor operations the kernel folded away because only the state engine needed
    /// them (`spec::state_only`, or a watched dup with a result no rule matches:
    /// [`BpfOptions::result_masks`]) and its table ends the same without them: not
    /// delivered, and not drops.
    pub fn folded_state(&self) -> u64 {
        self.bpf.drops().folded_state
    }

    /// Failed calls the kernel filtered out because nothing could use them
    /// ([`BpfOptions::failed_unused`], [`BpfOptions::failure_needles`]): not delivered, and
    /// not drops.
    pub fn filtered_failed(&self) -> u64 {
        self.bpf.drops().filtered_failed
    }

    /// What ended the reader's waits since the start: the kernel, the caller's waker, or
    /// the timeout.
    pub fn reader_waits(&self) -> ReaderWaits {
        self.waits
    }

    /// How often the kernel woke the reader since the start, by reason (crate docs,
    /// *Wakeups*).
    pub fn wakeups(&self) -> KernelWakeups {
        self.bpf.wakeups()
    }

    /// Whether a timer wakes the reader for process-lifecycle records of watched types, at
    /// the end of their reorder window and slack, instead of the kernel at once (off where
    /// the kernel refuses BPF timers in the lifecycle programs).
    pub fn defers_wakes(&self) -> bool {
        self.bpf.defers_wakes()
    }

    /// The kernel's drop counters per CPU (index = CPU number): records lost because that
    /// CPU's ring was full or the per-thread stash was full, arguments that could not be read
    /// (and failed calls filtered out, which are not losses).
    pub fn drops_per_cpu(&self) -> Vec<KernelDrops> {
        self.bpf.drops_per_cpu()
    }

    /// Moves newly committed records into `held`, sorted by time.
    ///
    /// Only the held events later than the earliest fresh one are merged with the fresh
    /// ones (a short tail: the rings are drained every few milliseconds), so the cost of a
    /// pull does not grow with the number of events held.
    fn pull(&mut self) -> Result<(), EbpfError> {
        self.raw.clear();
        self.pulled_at = sys::boot_now();
        self.bpf.consume(&mut self.raw)?;
        if self.raw.is_empty() {
            return Ok(());
        }
        self.decoder.decode_all(&self.raw, &mut self.fresh);
        insert_sorted(&mut self.held, &mut self.tail, &mut self.fresh);
        Ok(())
    }

    /// How long until the oldest held event's reorder window ends (it may be delivered after
    /// a pull then); `None` when nothing is held.
    fn reorder_due(&self) -> Option<Duration> {
        let front = self.held.front()?;
        let due = front
            .ts
            .saturating_sub(self.decoder.boot_offset)
            .saturating_add(self.reorder_window_ns);
        Some(Duration::from_nanos(due.saturating_sub(sys::boot_now())))
    }

    /// How much longer than its window an event is held when the reader sleeps: half the
    /// window. The events that follow it within that time are read in the same wakeup.
    fn reorder_slack(&self) -> Duration {
        Duration::from_nanos(self.reorder_window_ns / 2)
    }

    /// How many held events to deliver: those a reorder window older than the last pull
    /// (anything older has been pulled, so nothing can come before them any more), and, at
    /// [`HELD_LIMIT`], the oldest ones regardless of age (at least one, so a full queue
    /// always drains).
    fn ready(&self) -> usize {
        let pulled = self.pulled_at.saturating_add(self.decoder.boot_offset);
        deliverable(&self.held, pulled.saturating_sub(self.reorder_window_ns))
    }
}

/// The `wake_types` keys of the event types in `interest` (the rules'): the kernel's syscall
/// numbers, and `procexit`'s key.
fn wake_keys(interest: &InterestSet) -> Vec<u32> {
    let mut keys: Vec<u32> = interest
        .iter()
        .filter_map(|etype| {
            if etype.name() == "procexit" {
                return Some(sys::WAKE_KEY_PROCEXIT);
            }
            let nr = vigil_event::arch::native_nr(etype.spec().nr?)?;
            (u32::from(nr) < sys::WAKE_KEY_PROCEXIT).then_some(u32::from(nr))
        })
        .collect();
    keys.sort_unstable();
    keys.dedup();
    keys
}

/// How many of `held` (sorted by time) to deliver: those stamped at or before `watermark`,
/// and at least enough to bring it under [`HELD_LIMIT`].
fn deliverable(held: &VecDeque<Event>, watermark: u64) -> usize {
    let old = held.partition_point(|e| e.ts <= watermark);
    old.max(held.len().saturating_sub(HELD_LIMIT - 1))
}

/// Moves `fresh` (any order) into `held` (sorted by time), keeping it sorted; events of
/// equal time keep their order, held ones first. Only the part of `held` later than the
/// earliest fresh event is touched (through the scratch `tail`).
fn insert_sorted(held: &mut VecDeque<Event>, tail: &mut Vec<Event>, fresh: &mut Vec<Event>) {
    fresh.sort_by_key(|e| e.ts);
    let Some(first) = fresh.first().map(|e| e.ts) else {
        return;
    };
    let split = held.partition_point(|e| e.ts <= first);
    if split == held.len() {
        held.extend(fresh.drain(..));
        return;
    }
    tail.extend(held.drain(split..));
    merge_sorted(held, tail, fresh);
}

/// Appends to `out` the events of `a` and `b` (each sorted by time) in time order, `a`
/// first among equal times; empties both.
fn merge_sorted(out: &mut VecDeque<Event>, a: &mut Vec<Event>, b: &mut Vec<Event>) {
    let mut a_it = a.drain(..).peekable();
    let mut b_it = b.drain(..).peekable();
    loop {
        let take_a = match (a_it.peek(), b_it.peek()) {
            (Some(x), Some(y)) => x.ts <= y.ts,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let next = if take_a { a_it.next() } else { b_it.next() };
        out.extend(next);
    }
}

impl Source for BpfSource {
    fn snapshot(&mut self) -> Result<Snapshot, SourceError> {
        Ok(self.snapshot.clone())
    }

    /// Blocks at most [`BpfOptions::max_wait`] for events; never ends on its own (`Ok(true)`).
    fn next_batch(&mut self, out: &mut Vec<Event>, max: usize) -> Result<bool, SourceError> {
        self.next_batch_until(out, max, Instant::now() + self.max_wait)
    }

    /// Blocks on the rings until events may be delivered, `deadline` (at most
    /// [`BpfOptions::max_wait`] away), or a [`Source::waker`] wakes it; never ends on its own.
    fn next_batch_until(
        &mut self,
        out: &mut Vec<Event>,
        max: usize,
        deadline: Instant,
    ) -> Result<bool, SourceError> {
        let failed = |e: EbpfError| SourceError::driver("ebpf", e.to_string());
        let deadline = deadline.min(Instant::now() + self.max_wait);
        let mut woken = false;
        loop {
            if self.held.len() < HELD_LIMIT {
                self.pull().map_err(failed)?;
            }
            let ready = self.ready().min(max);
            if ready > 0 {
                out.extend(self.held.drain(..ready));
                self.delivered += ready as u64;
                return Ok(true);
            }
            let now = Instant::now();
            if woken || now >= deadline {
                return Ok(true);
            }
            // Something held: until its window ends and a slack more (the records its
            // process writes next, a fork's exec and exit, come in the same wakeup), the
            // deadline, or a wakeup by the caller; not by the kernel: the rings are read then
            // anyway (a ring holds far more than a few milliseconds of records, and its
            // wakeup is kept for the next wait). Nothing held: until the kernel or the caller
            // wakes us, or the deadline.
            let extra = match self.reorder_due() {
                Some(due) => {
                    let wait = due.saturating_add(self.reorder_slack()).min(deadline - now);
                    let extra = self.waiter.wait_extra(wait).map_err(failed)?;
                    // The kernel's wakeups meanwhile are for records the next pull reads:
                    // taken off the epoll set now, they do not end the next wait at once.
                    self.waiter.wait(Duration::ZERO).map_err(failed)?;
                    if !extra {
                        self.waits.timeout += 1;
                    }
                    extra
                }
                None => {
                    let woken = self.waiter.wait(deadline - now).map_err(failed)?;
                    if woken.rings {
                        self.waits.rings += 1;
                    } else if !woken.extra {
                        self.waits.timeout += 1;
                    }
                    woken.extra
                }
            };
            if extra {
                self.waits.caller += 1;
                self.wake_rx.clear();
                woken = true;
            }
        }
    }

    fn waker(&self) -> Option<Waker> {
        Some(self.waker.clone())
    }

    fn stats(&self) -> SourceStats {
        let drops = self.bpf.drops();
        let mut stats = SourceStats {
            events_in: self.delivered,
            dropped: Vec::new(),
            filtered_failed: drops.filtered_failed,
            folded_state: drops.folded_state,
            kernel_records: Some(drops.submitted),
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
    use vigil_event::EventType;

    fn ev(ts: u64, num: u64) -> Event {
        Event {
            num,
            ts,
            tid: 1,
            pid: 1,
            etype: EventType(0),
            res: 0,
            params: Vec::new(),
            truncated: 0,
            cpu: None,
        }
    }

    #[test]
    fn merge_keeps_time_order_and_older_first_on_ties() {
        let mut out: VecDeque<Event> = [ev(1, 0)].into_iter().collect();
        let mut a = vec![ev(3, 1), ev(5, 2), ev(5, 3)];
        let mut b = vec![ev(2, 4), ev(5, 5), ev(9, 6)];
        merge_sorted(&mut out, &mut a, &mut b);
        let got: Vec<(u64, u64)> = out.iter().map(|e| (e.ts, e.num)).collect();
        assert_eq!(
            got,
            [(1, 0), (2, 4), (3, 1), (5, 2), (5, 3), (5, 5), (9, 6)],
            "merged order"
        );
        assert!(a.is_empty() && b.is_empty(), "inputs are emptied");
    }

    fn order(held: &VecDeque<Event>) -> Vec<(u64, u64)> {
        held.iter().map(|e| (e.ts, e.num)).collect()
    }

    #[test]
    fn insert_sorted_appends_or_merges_the_tail() {
        let mut held: VecDeque<Event> = [ev(10, 0), ev(20, 1), ev(30, 2)].into_iter().collect();
        let mut tail = Vec::new();
        // Later than everything held: appended, sorted.
        let mut fresh = vec![ev(50, 4), ev(40, 3)];
        insert_sorted(&mut held, &mut tail, &mut fresh);
        assert_eq!(order(&held), [(10, 0), (20, 1), (30, 2), (40, 3), (50, 4)]);
        // A record of another CPU stamped earlier: merged into the tail; ties keep the held
        // event first.
        let mut fresh = vec![ev(45, 6), ev(20, 5), ev(60, 7)];
        insert_sorted(&mut held, &mut tail, &mut fresh);
        assert_eq!(
            order(&held),
            [
                (10, 0),
                (20, 1),
                (20, 5),
                (30, 2),
                (40, 3),
                (45, 6),
                (50, 4),
                (60, 7)
            ]
        );
        assert!(fresh.is_empty() && tail.is_empty(), "scratch emptied");
        // Nothing fresh: nothing changes.
        insert_sorted(&mut held, &mut tail, &mut Vec::new());
        assert_eq!(held.len(), 8, "unchanged");
    }

    #[test]
    fn deliverable_waits_for_the_window_but_bounds_the_queue() {
        let held: VecDeque<Event> = (0..10).map(|i| ev(100 + i, i)).collect();
        assert_eq!(deliverable(&held, 99), 0, "all too young");
        assert_eq!(deliverable(&held, 104), 5, "up to the watermark");
        assert_eq!(deliverable(&held, u64::MAX), 10, "all old");
        let full: VecDeque<Event> = (0..HELD_LIMIT as u64 + 10)
            .map(|i| ev(100 + i, i))
            .collect();
        assert_eq!(
            deliverable(&full, 0),
            11,
            "a full queue drains below its limit"
        );
        assert_eq!(deliverable(&full, 104), 11, "whichever is more");
        let at_limit: VecDeque<Event> = (0..HELD_LIMIT as u64).map(|i| ev(100 + i, i)).collect();
        assert_eq!(
            deliverable(&at_limit, 0),
            1,
            "a queue at its limit always moves"
        );
    }

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
        assert!(EbpfError::NoTracefs {
            message: "EPERM".into(),
            fexit_refused: None,
        }
        .to_string()
        .contains("vigil run"));
        let text = EbpfError::NoTracefs {
            message: "EPERM".into(),
            fexit_refused: Some("cannot load the BPF programs".into()),
        }
        .to_string();
        assert!(
            text.contains("(fexit), which need none, are refused here (cannot load the BPF")
                && text.contains("the host's `/sys/kernel/tracing`"),
            "{text}"
        );
    }

    #[test]
    fn a_refused_bpf_call_names_the_seccomp_filter() {
        let text = EbpfError::BpfRefused {
            message: "Operation not permitted (os error 1)".into(),
            seccomp: true,
        }
        .to_string();
        assert!(
            text.contains("refused by this process's seccomp filter")
                && text.contains("seccomp=unconfined"),
            "{text}"
        );
        let text = EbpfError::BpfRefused {
            message: "Operation not permitted (os error 1)".into(),
            seccomp: false,
        }
        .to_string();
        assert!(!text.contains("seccomp"), "{text}");
    }

    #[test]
    fn default_options_bound_the_wait_and_wake_below_the_ring_size() {
        let o = BpfOptions::default();
        assert!(o.max_wait <= Duration::from_secs(1));
        assert!(o.wake_bytes < u64::from(sys::RING_BYTES));
        assert_eq!(o.reorder_window, Duration::from_millis(2));
        assert_eq!(wake_gap_ns(2_000_000), 1_000_000, "half the window");
        assert!(o.interest.is_empty());
    }

    #[test]
    fn wake_keys_are_the_rules_types_and_procexit() {
        let set: InterestSet = ["openat", "execve", "procexit"]
            .iter()
            .map(|n| vigil_event::table::by_name(n).expect(n))
            .collect();
        let keys = wake_keys(&set);
        let native = |name: &str| {
            let nr = vigil_event::table::by_name(name).and_then(|t| t.spec().nr);
            u32::from(vigil_event::arch::native_nr(nr.expect(name)).expect(name))
        };
        let mut expected = vec![native("openat"), native("execve"), sys::WAKE_KEY_PROCEXIT];
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert!(wake_keys(&InterestSet::new()).is_empty());
    }
}

//! Everything that touches the kernel: the generated skeleton, map set-up, tracepoint
//! attachment, ring-buffer consumption, the wait on the rings (`Waiter`, epoll) and the clocks.
//! The only module allowed `unsafe` (the skeleton's generated code, `epoll_*` and
//! `clock_gettime`).
#![allow(unsafe_code)]

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::rc::Rc;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle, MapType, RingBuffer, RingBufferBuilder};

use crate::spec::CaptureSpec;
use crate::EbpfError;

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

use skel::{VigilSkel, VigilSkelBuilder};
use stubs_skel::VigilStubsSkelBuilder;

/// How watched syscalls are hooked (`hook_mode` in `bpf/vigil.bpf.c`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hook {
    /// A BPF trampoline (fexit) on each watched syscall's `__x64_sys_X`: one program with
    /// the arguments and the result; unwatched syscalls run no BPF and keep the fast path.
    #[default]
    Fexit,
    /// The raw BTF tracepoint `sys_exit` alone, filtered by syscall number in the kernel
    /// (arguments from the saved user registers): one program per watched syscall, but
    /// every syscall of the host takes the slow path and runs the filter.
    Raw,
    /// The per-syscall exit tracepoints `syscalls/sys_exit_X` alone (arguments from the
    /// saved user registers; execveat also keeps its pathname at entry): every syscall takes
    /// the slow path, but only the exit side's check runs for an unwatched one.
    Exit,
    /// The per-syscall tracepoints `syscalls/sys_{enter,exit}_X` (enter stashes the
    /// arguments, exit writes the record): every syscall takes the slow path.
    Tracepoint,
}

impl Hook {
    pub fn name(self) -> &'static str {
        match self {
            Hook::Fexit => "fexit",
            Hook::Raw => "raw",
            Hook::Exit => "exit",
            Hook::Tracepoint => "tracepoint",
        }
    }
}

/// What the programs do, for measuring the floor under Vigil's own work (`vigil bench`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Floor {
    /// Capture (the agent).
    #[default]
    None,
    /// Programs at the same attach points that return at once.
    Nop,
    /// Programs that write only a record header to the ring (discarded by user space).
    Ring,
}

impl Floor {
    fn code(self) -> u32 {
        match self {
            Floor::None => 0,
            Floor::Nop => 1,
            Floor::Ring => 2,
        }
    }
}

/// One watched syscall's attachment.
enum SyscallLinks {
    /// Enter and exit tracepoints.
    Tracepoint(Link, Link),
    /// The fexit stub on `__x64_sys_X`, and its object's `sys_progs` (a program array is
    /// emptied by the kernel when user space holds no reference to it any more: kept while a
    /// stub of the object is attached).
    Fexit(Link, Rc<MapHandle>),
    /// Marked in `hooked_nrs` for the shared `sys_exit` program (for execveat, also the
    /// entry tracepoint that keeps its pathname for the exec record).
    Raw(Option<Link>),
    /// The exit tracepoint (and for execveat the entry one).
    Exit(Link, Option<Link>),
}

impl SyscallLinks {
    /// Moves the links into `links` and what must outlive them (a stub object's slot map)
    /// into `slots`.
    fn take_into(self, links: &mut Vec<Link>, slots: &mut Vec<Rc<MapHandle>>) {
        match self {
            SyscallLinks::Tracepoint(enter, exit) => links.extend([enter, exit]),
            SyscallLinks::Fexit(link, slot) => {
                links.push(link);
                slots.push(slot);
            }
            SyscallLinks::Raw(link) => links.extend(link),
            SyscallLinks::Exit(exit, enter) => links.extend(std::iter::once(exit).chain(enter)),
        }
    }
}

/// The BTF prototype (type id) of kernel function `name`, if the kernel's BTF has it.
fn prototype_of(btf: &libbpf_rs::btf::Btf<'_>, name: &str) -> Option<libbpf_rs::btf::TypeId> {
    use libbpf_rs::btf::ReferencesType as _;
    btf.type_by_name::<libbpf_rs::btf::types::Func<'_>>(name)
        .map(|f| f.referenced_type_id())
}

/// The distinct prototypes of the syscall functions, each with a function that has it: first
/// `<SYS_PREFIX>openat`'s (the capture program's compiled-in target), then the first other one
/// found in the syscall table (at most two: the capture program is loaded once for each).
fn fexit_prototypes(btf: &libbpf_rs::btf::Btf<'_>) -> Vec<(libbpf_rs::btf::TypeId, String)> {
    let first = fexit_target("openat");
    let Some(base) = prototype_of(btf, &first) else {
        return Vec::new();
    };
    let mut protos = vec![(base, first)];
    for spec in vigil_event::table::events() {
        if spec.nr.is_none() {
            continue;
        }
        let target = fexit_target(crate::spec::tracepoint_name(spec.name));
        if let Some(proto) = prototype_of(btf, &target) {
            if proto != base {
                protos.push((proto, target));
                break;
            }
        }
    }
    protos
}

/// The function a fexit stub for syscall `name` attaches to, and the index in `protos` of its
/// prototype (which capture program serves it): `__x64_sys_X` (`__arm64_sys_X`), or for a
/// syscall without arguments `__do_sys_X` (on x86 `__x64_sys_X` is an alias of it, and BTF names only the
/// aliased function: `SYSCALL_DEFINE0` in arch/x86/include/asm/syscall_wrapper.h). A
/// `__do_sys_X` taking the syscall's own arguments has another prototype and is never chosen.
fn fexit_function(
    btf: &libbpf_rs::btf::Btf<'_>,
    protos: &[libbpf_rs::btf::TypeId],
    name: &str,
) -> Option<(usize, String)> {
    [fexit_target(name), format!("__do_sys_{name}")]
        .into_iter()
        .find_map(|target| {
            let proto = prototype_of(btf, &target)?;
            let group = protos.iter().position(|&p| p == proto)?;
            Some((group, target))
        })
}

/// A kernel feature the programs need, with the first Linux release that has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feature {
    /// What it is, as a user would look it up (`BPF helper bpf_loop`).
    pub name: &'static str,
    /// The first Linux release with it (`5.17`).
    pub since: &'static str,
}

/// The oldest Linux release that has every [`REQUIRED`] feature.
pub const OLDEST_KERNEL: &str = "5.17";

/// What `bpf/vigil.bpf.c` needs beyond BTF and `tp_btf` programs (5.5), probed before the
/// object is loaded so that a kernel without one is named in one line instead of a verifier
/// log. In the order of the releases that brought them.
pub const REQUIRED: [Feature; 4] = [
    Feature {
        name: "BPF map type ringbuf",
        since: "5.8",
    },
    Feature {
        name: "BPF map type task_storage",
        since: "5.11",
    },
    Feature {
        name: "BPF helper bpf_task_pt_regs",
        since: "5.15",
    },
    Feature {
        name: "BPF helper bpf_loop",
        since: "5.17",
    },
];

/// The first [`REQUIRED`] feature this kernel lacks. A probe that cannot decide (an error
/// other than "not supported") counts as present: the load that follows then reports it.
pub fn missing_feature() -> Option<Feature> {
    use libbpf_rs::libbpf_sys as sys;
    let prev = libbpf_rs::set_print(None);
    let present = |i: usize| -> bool {
        // SAFETY: the probes take plain integers and a null options pointer (allowed: "opts
        // must be NULL"); they load and close a throw-away map or program.
        let r = unsafe {
            match i {
                0 => sys::libbpf_probe_bpf_map_type(sys::BPF_MAP_TYPE_RINGBUF, std::ptr::null()),
                1 => {
                    sys::libbpf_probe_bpf_map_type(sys::BPF_MAP_TYPE_TASK_STORAGE, std::ptr::null())
                }
                2 => sys::libbpf_probe_bpf_helper(
                    sys::BPF_PROG_TYPE_TRACEPOINT,
                    sys::BPF_FUNC_task_pt_regs,
                    std::ptr::null(),
                ),
                _ => sys::libbpf_probe_bpf_helper(
                    sys::BPF_PROG_TYPE_TRACEPOINT,
                    sys::BPF_FUNC_loop,
                    std::ptr::null(),
                ),
            }
        };
        r != 0
    };
    let missing = (0..REQUIRED.len())
        .find(|&i| !present(i))
        .map(|i| REQUIRED[i]);
    libbpf_rs::set_print(prev);
    missing
}

/// Why the bpf() system call itself is refused here, when it is: a throw-away array map
/// (which any kernel with eBPF creates for a process with `CAP_BPF`) cannot be created with
/// `EPERM` or `ENOSYS`. Called once the capabilities are known to be there, so that a refusal
/// by a seccomp filter is not taken for a missing kernel feature by the probes that follow.
pub fn bpf_call_refused() -> Option<std::io::Error> {
    use libbpf_rs::libbpf_sys as sys;
    // SAFETY: a null name and null options are allowed (`bpf_map_create`); the fd it
    // returns is new and closed right away.
    let fd = unsafe {
        sys::bpf_map_create(
            sys::BPF_MAP_TYPE_ARRAY,
            std::ptr::null(),
            4,
            4,
            1,
            std::ptr::null(),
        )
    };
    if fd >= 0 {
        // SAFETY: `fd` is a new fd that nothing else owns.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        return None;
    }
    // libbpf returns `-errno`.
    let err = std::io::Error::from_raw_os_error(-fd);
    matches!(err.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)).then_some(err)
}

/// libbpf's messages while the object loads (the verifier's log among them): kept, not
/// printed, so that a refused load is one line on the terminal and the log goes to a file.
static LOAD_LOG: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());
/// Most of libbpf's messages kept per load.
const LOAD_LOG_LIMIT: usize = 8 << 20;

fn keep_libbpf_message(_level: libbpf_rs::PrintLevel, message: String) {
    let mut log = LOAD_LOG.lock().unwrap_or_else(|e| e.into_inner());
    if log.len() + message.len() <= LOAD_LOG_LIMIT {
        log.push_str(&message);
    }
}

/// Runs `load` with libbpf's messages kept in [`LOAD_LOG`]; returns them with the result.
fn with_load_log<T>(load: impl FnOnce() -> T) -> (T, String) {
    LOAD_LOG.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let prev = libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, keep_libbpf_message)));
    let result = load();
    libbpf_rs::set_print(prev);
    let log = std::mem::take(&mut *LOAD_LOG.lock().unwrap_or_else(|e| e.into_inner()));
    (result, log)
}

/// Why libbpf's log says a load failed, in one line: the refused program and the verifier's
/// last words (the line before its summary).
fn load_failure_reason(log: &str) -> Option<String> {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let begin = lines
        .iter()
        .position(|l| l.contains("-- BEGIN PROG LOAD LOG --"))?;
    let program = lines[begin].split('\'').nth(1).unwrap_or("?").to_owned();
    let end = lines[begin..]
        .iter()
        .position(|l| l.contains("-- END PROG LOAD LOG --"))
        .map_or(lines.len(), |p| begin + p);
    let last = lines[begin + 1..end].iter().rev().find(|l| {
        !l.starts_with("processed ")
            && !l.starts_with("verification time")
            && !l.starts_with("stack depth")
    })?;
    Some(format!(
        "the kernel refused program `{program}`: {}",
        last.trim_start_matches("libbpf: ")
    ))
}

/// Writes libbpf's log of a failed load (`vigil watch` names the file in its error) to a new file only this user can read; its path.
fn save_load_log(log: &str) -> Option<PathBuf> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = std::env::temp_dir().join(format!(
        "vigil-bpf-load-{}-{}.log",
        std::process::id(),
        boot_now()
    ));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .ok()?;
    file.write_all(log.as_bytes()).ok()?;
    Some(path)
}

/// Stubs in `bpf/vigil_stubs.bpf.c` (one object holds this many; more are opened as needed).
const STUBS_PER_OBJECT: usize = 64;

/// The prefix of the architecture's syscall wrappers (`SYSCALL_DEFINEx` in
/// arch/x86/include/asm/syscall_wrapper.h, arch/arm64/include/asm/syscall_wrapper.h): the
/// functions the fexit programs attach to (`bpf/vigil.bpf.c` compiles in the same one).
#[cfg(target_arch = "x86_64")]
pub const SYS_PREFIX: &str = "__x64_sys_";
#[cfg(target_arch = "aarch64")]
pub const SYS_PREFIX: &str = "__arm64_sys_";

/// The kernel function a syscall's fexit stub attaches to.
pub fn fexit_target(tracepoint_name: &str) -> String {
    format!("{SYS_PREFIX}{tracepoint_name}")
}

/// Bytes of each per-CPU ring buffer (the kernel-side inner map template's size).
pub const RING_BYTES: u32 = 1 << 22;

/// The `wake_types` key of `procexit` (the others are syscall numbers).
pub const WAKE_KEY_PROCEXIT: u32 = 512;

/// When the kernel wakes the reader (`wake_reason` in `bpf/vigil.bpf.c`), set before load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeTuning {
    /// Bytes waiting in a CPU's ring at which a record of any type wakes the reader.
    pub bytes: u64,
    /// After a wakeup, how long a CPU writes without waking the reader again.
    pub gap_ns: u64,
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
}

/// The loaded programs, their maps and links, and the ring buffers.
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
    skel: VigilSkel<'static>,
    /// Raw records consumed but not yet decoded: `[u32 length][bytes]…`.
    raw: Rc<RefCell<Vec<u8>>>,
    /// Where tracepoint ids are looked up (kept for the life of the capture: a SIGHUP
    /// re-attaches tracepoints, and a private instance needs no privilege to keep), or why
    /// there is none (`EbpfError::NoTracefs`'s message): only `fexit` runs without it (its
    /// syscalls need no tracepoint; the `raw_syscalls` fallback does).
    tracefs: Result<Tracefs, String>,
}

fn load_err(what: &'static str) -> impl FnOnce(libbpf_rs::Error) -> EbpfError {
    move |source| EbpfError::Load {
        what,
        message: source.to_string(),
    }
}

impl Bpf {
    /// Opens, configures and loads the programs; attaches the process-lifecycle programs.
    /// Syscall tracepoints are attached by [`Bpf::set_syscalls`]. `tracefs` is what
    /// [`Tracefs::open`] found: every hook but `fexit` needs it (refused here otherwise).
    pub fn load(
        agent_tgid: u32,
        tracefs: Result<Tracefs, EbpfError>,
        hook: Hook,
        floor: Floor,
        wake: WakeTuning,
        save_log: bool,
    ) -> Result<Bpf, EbpfError> {
        let tracefs = match tracefs {
            Ok(tracefs) => Ok(tracefs),
            Err(EbpfError::NoTracefs { message, .. }) if hook == Hook::Fexit => Err(message),
            Err(e) => return Err(e),
        };
        let ncpus = libbpf_rs::num_possible_cpus().map_err(load_err("count CPUs"))?;
        let ncpus = u32::try_from(ncpus.max(1)).unwrap_or(u32::MAX);
        // The skeleton borrows its object storage for as long as it lives; the source lives
        // as long as the capture, so the (small) storage is leaked once per source.
        let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = VigilSkelBuilder::default()
            .open(storage)
            .map_err(load_err("open the BPF object"))?;
        if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
            rodata.agent_tgid = agent_tgid;
            rodata.hook_mode = match hook {
                Hook::Fexit => 0,
                Hook::Tracepoint => 1,
                Hook::Raw => 2,
                Hook::Exit => 3,
            };
            rodata.floor_mode = floor.code();
            rodata.wake_bytes = wake.bytes;
            rodata.wake_gap_ns = wake.gap_ns;
        }
        let vmlinux = if hook == Hook::Fexit {
            Some(libbpf_rs::btf::Btf::from_vmlinux().map_err(load_err("read the kernel's BTF"))?)
        } else {
            None
        };
        let fexit_protos = vmlinux.as_ref().map(fexit_prototypes).unwrap_or_default();
        match fexit_protos.get(1) {
            Some((_, target)) => open
                .progs
                .vigil_sys_fexit1
                .set_attach_target(0, Some(target.clone()))
                .map_err(load_err("set the second capture program's target"))?,
            None => open.progs.vigil_sys_fexit1.set_autoload(false),
        }
        if hook != Hook::Fexit {
            // Trampolines are not needed (and may not be supported).
            open.progs.vigil_sys_fexit.set_autoload(false);
            open.progs.vigil_execve_entry.set_autoload(false);
            open.progs.vigil_execveat_entry.set_autoload(false);
        }
        if hook != Hook::Raw {
            open.progs.vigil_btf_exit.set_autoload(false);
        }
        open.maps
            .ringbufs
            .set_max_entries(ncpus)
            .map_err(load_err("size the ring-buffer array"))?;
        open.maps
            .scratch
            .set_max_entries(ncpus)
            .map_err(load_err("size the record scratch array"))?;
        let (skel, log) = with_load_log(|| open.load());
        let skel = skel.map_err(|source| {
            let reason = load_failure_reason(&log).unwrap_or_else(|| source.to_string());
            EbpfError::Load {
                what: "load the BPF programs",
                message: match save_log.then(|| save_load_log(&log)).flatten() {
                    Some(path) => format!("{reason} (libbpf's log: {})", path.display()),
                    None => reason,
                },
            }
        })?;

        let opts = libbpf_rs::libbpf_sys::bpf_map_create_opts {
            sz: std::mem::size_of::<libbpf_rs::libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let mut rings = Vec::with_capacity(ncpus as usize);
        for cpu in 0..ncpus {
            let ring = MapHandle::create(
                MapType::RingBuf,
                Some(format!("vigil_rb{cpu}")),
                0,
                0,
                RING_BYTES,
                &opts,
            )
            .map_err(load_err("create a ring buffer"))?;
            let fd = ring.as_fd().as_raw_fd();
            skel.maps
                .ringbufs
                .update(&cpu.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
                .map_err(load_err("install a ring buffer"))?;
            rings.push(ring);
        }
        let raw: Rc<RefCell<Vec<u8>>> = Rc::new(RefCell::new(Vec::with_capacity(1 << 20)));
        let mut builder = RingBufferBuilder::new();
        for ring in &rings {
            let raw = Rc::clone(&raw);
            builder
                .add(ring, move |data: &[u8]| {
                    let mut raw = raw.borrow_mut();
                    let len = u32::try_from(data.len()).unwrap_or(u32::MAX);
                    raw.extend_from_slice(&len.to_ne_bytes());
                    raw.extend_from_slice(data);
                    0
                })
                .map_err(load_err("register a ring buffer"))?;
        }
        let ring = builder
            .build()
            .map_err(load_err("build the ring-buffer reader"))?;
        let mut lifecycle = Vec::new();
        if hook == Hook::Fexit {
            for (name, prog) in [
                (fexit_target("execve"), &skel.progs.vigil_execve_entry),
                (fexit_target("execveat"), &skel.progs.vigil_execveat_entry),
            ] {
                // Kept like a load's messages: a kernel that loads trampolines but cannot
                // attach them (arm64 before ftrace direct calls, 6.4: `ENOTSUPP`) is reported
                // in the error, and `auto` falls back in one line.
                let (attached, _log) = with_load_log(|| prog.attach());
                let link = attached.map_err(|e| EbpfError::Attach {
                    name: format!("fentry/{name}"),
                    message: e.to_string(),
                })?;
                lifecycle.push(link);
            }
        }
        for (name, prog) in [
            ("sched_process_fork", &skel.progs.vigil_fork),
            ("sched_process_exec", &skel.progs.vigil_exec),
            ("sched_process_exit", &skel.progs.vigil_exit),
        ] {
            let link = prog.attach().map_err(|e| EbpfError::Attach {
                name: name.to_owned(),
                message: e.to_string(),
            })?;
            lifecycle.push(link);
        }
        Ok(Bpf {
            syscall_links: BTreeMap::new(),
            hook,
            raw_exit: None,
            vmlinux,
            fexit_protos: fexit_protos.into_iter().map(|(id, _)| id).collect(),
            raw_links: None,
            fallback: Vec::new(),
            _lifecycle_links: lifecycle,
            ring,
            rings,
            wake_keys: Vec::new(),
            skel,
            raw,
            tracefs,
        })
    }

    /// Where the syscall tracepoints are found, or why they cannot be (`fexit` only).
    pub fn tracefs(&self) -> Result<&Tracefs, &str> {
        self.tracefs.as_ref().map_err(String::as_str)
    }

    /// The tracefs for an attach that needs one (with `fexit`, only the `raw_syscalls`
    /// fallback: [`crate::BpfSource`] reports those syscalls unsupported without one).
    fn tracefs_for_attach(&self) -> Result<&Tracefs, EbpfError> {
        self.tracefs
            .as_ref()
            .map_err(|message| EbpfError::NoTracefs {
                message: message.clone(),
                fexit_refused: None,
            })
    }

    /// How syscalls are hooked.
    pub fn hook(&self) -> Hook {
        self.hook
    }

    /// Whether syscall `name` (its tracepoint name) can be hooked on this kernel.
    pub fn can_hook(&self, name: &str) -> bool {
        match self.hook {
            Hook::Tracepoint | Hook::Raw | Hook::Exit => self.tracefs().is_ok_and(|t| {
                t.events()
                    .join("syscalls")
                    .join(format!("sys_enter_{name}"))
                    .is_dir()
            }),
            Hook::Fexit => self.fexit_group(name).is_some(),
        }
    }

    /// `fexit`: which capture program serves syscall `name`, and the function its stub
    /// attaches to ([`fexit_function`]).
    fn fexit_group(&self, name: &str) -> Option<(usize, String)> {
        fexit_function(self.vmlinux.as_ref()?, &self.fexit_protos, name)
    }

    pub fn set_syscalls(
        &mut self,
        wanted: &[(u16, &'static str, CaptureSpec, bool)],
    ) -> Result<usize, EbpfError> {
        // Before any attach, and again for syscalls already hooked (the rules may have
        // changed what they need).
        for &(nr, _, _, skip) in wanted {
            self.set_skip_failed(nr, skip)?;
        }
        let keep: Vec<u16> = wanted.iter().map(|w| w.0).collect();
        let gone: Vec<u16> = self
            .syscall_links
            .keys()
            .filter(|nr| !keep.contains(nr))
            .copied()
            .collect();
        let (mut detach, mut slots) = (Vec::new(), Vec::new());
        for nr in gone {
            if let Some(links) = self.syscall_links.remove(&nr) {
                self.set_hooked(nr, false)?;
                links.take_into(&mut detach, &mut slots);
            }
        }
        release(detach, slots);
        let mut new = Vec::new();
        for &(nr, name, spec, _) in wanted {
            if self.syscall_links.contains_key(&nr) {
                continue;
            }
            let value = spec.to_bytes();
            self.skel
                .maps
                .specs
                .update(&u32::from(nr).to_ne_bytes(), &value, MapFlags::ANY)
                .map_err(load_err("fill the capture-spec map"))?;
            new.push((nr, name));
        }
        match self.hook {
            Hook::Tracepoint => {
                for (nr, name) in new {
                    let enter_name = format!("sys_enter_{name}");
                    let exit_name = format!("sys_exit_{name}");
                    let tracefs = self.tracefs_for_attach()?;
                    let attach = |prog: &libbpf_rs::ProgramMut<'static>, tp: &str| {
                        attach_tracepoint(tracefs, prog, "syscalls", tp)
                    };
                    // Exit first: an enter without its exit would only stash and never emit.
                    let exit = attach(&self.skel.progs.vigil_sys_exit, &exit_name)?;
                    let enter = attach(&self.skel.progs.vigil_sys_enter, &enter_name)?;
                    self.syscall_links
                        .insert(nr, SyscallLinks::Tracepoint(enter, exit));
                }
            }
            Hook::Exit => {
                for (nr, name) in new {
                    let exit = attach_tracepoint(
                        self.tracefs_for_attach()?,
                        &self.skel.progs.vigil_sys_exit,
                        "syscalls",
                        &format!("sys_exit_{name}"),
                    )?;
                    let enter = self.exec_entry(name)?;
                    self.set_hooked(nr, true)?;
                    self.syscall_links
                        .insert(nr, SyscallLinks::Exit(exit, enter));
                }
            }
            Hook::Raw => {
                for (nr, name) in new {
                    let enter = self.exec_entry(name)?;
                    self.set_hooked(nr, true)?;
                    self.syscall_links.insert(nr, SyscallLinks::Raw(enter));
                }
                if self.syscall_links.is_empty() {
                    if let Some(link) = self.raw_exit.take() {
                        release(vec![link], Vec::new());
                    }
                } else if self.raw_exit.is_none() {
                    let link =
                        self.skel
                            .progs
                            .vigil_btf_exit
                            .attach()
                            .map_err(|e| EbpfError::Attach {
                                name: "tp_btf/sys_exit".into(),
                                message: e.to_string(),
                            })?;
                    self.raw_exit = Some(link);
                }
            }
            Hook::Fexit => {
                let mut groups: BTreeMap<usize, Vec<(u16, String)>> = BTreeMap::new();
                for (nr, name) in new {
                    // can_hook() admitted only syscalls with a group.
                    if let Some((group, target)) = self.fexit_group(name) {
                        groups.entry(group).or_default().push((nr, target));
                    }
                }
                for (group, members) in groups {
                    for chunk in members.chunks(STUBS_PER_OBJECT) {
                        let (links, slot) = self.load_stubs(chunk, group)?;
                        for ((nr, _), link) in chunk.iter().zip(links) {
                            self.set_hooked(*nr, true)?;
                            self.syscall_links
                                .insert(*nr, SyscallLinks::Fexit(link, Rc::clone(&slot)));
                        }
                    }
                }
            }
        }
        Ok(self.syscall_links.len())
    }

    /// `exit`/`raw`: the entry tracepoint of execveat, whose pathname is gone by the exec
    /// record (kept at entry); nothing for the other syscalls.
    fn exec_entry(&self, name: &str) -> Result<Option<Link>, EbpfError> {
        if name != "execveat" {
            return Ok(None);
        }
        attach_tracepoint(
            self.tracefs_for_attach()?,
            &self.skel.progs.vigil_sys_enter,
            "syscalls",
            "sys_enter_execveat",
        )
        .map(Some)
    }

    /// Whether the kernel drops the failed calls of syscall `nr` (counting them).
    fn set_skip_failed(&self, nr: u16, skip: bool) -> Result<(), EbpfError> {
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
    fn set_hooked(&self, nr: u16, on: bool) -> Result<(), EbpfError> {
        self.skel
            .maps
            .hooked_nrs
            .update(&u32::from(nr).to_ne_bytes(), &[u8::from(on)], MapFlags::ANY)
            .map_err(load_err("fill the hooked-syscall map"))
    }

    /// Loads one fexit stub per syscall of `wanted` (syscall number and target function, all
    /// of prototype group `group`; at most [`STUBS_PER_OBJECT`]) from a new instance of the
    /// stubs object, puts that group's capture program in the object's slot map, and attaches
    /// each stub to its target. The links keep the stubs loaded, the returned handle keeps
    /// the slot filled; the object itself is closed on return.
    fn load_stubs(
        &self,
        wanted: &[(u16, String)],
        group: usize,
    ) -> Result<(Vec<Link>, Rc<MapHandle>), EbpfError> {
        let mut storage = MaybeUninit::uninit();
        let mut open = VigilStubsSkelBuilder::default()
            .open(&mut storage)
            .map_err(load_err("open the fexit stubs"))?;
        for (i, mut prog) in open.open_object_mut().progs_mut().enumerate() {
            match wanted.get(i) {
                Some((_, target)) => prog
                    .set_attach_target(0, Some(target.clone()))
                    .map_err(load_err("set a fexit stub's target"))?,
                None => prog.set_autoload(false),
            }
        }
        let (skel, log) = with_load_log(|| open.load());
        let skel = skel.map_err(|source| EbpfError::Load {
            what: "load the fexit stubs",
            message: load_failure_reason(&log).unwrap_or_else(|| source.to_string()),
        })?;
        let capture = if group == 0 {
            self.skel.progs.vigil_sys_fexit.as_fd()
        } else {
            self.skel.progs.vigil_sys_fexit1.as_fd()
        };
        skel.maps
            .sys_progs
            .update(
                &0u32.to_ne_bytes(),
                &capture.as_raw_fd().to_ne_bytes(),
                MapFlags::ANY,
            )
            .map_err(load_err("install the syscall capture program"))?;
        let slot = MapHandle::try_from(&skel.maps.sys_progs)
            .map_err(load_err("keep the syscall capture slot"))?;
        let mut links = Vec::with_capacity(wanted.len());
        for (prog, (_, target)) in skel.object().progs_mut().zip(wanted) {
            let link = prog.attach().map_err(|e| EbpfError::Attach {
                name: format!("fexit/{target}"),
                message: e.to_string(),
            })?;
            links.push(link);
        }
        Ok((links, Rc::new(slot)))
    }

    /// Captures exactly the syscalls `wanted` (number and capture spec) through the
    /// `raw_syscalls` tracepoints, filtered in the kernel by number: for syscalls without a
    /// tracepoint of their own. The raw programs run for every syscall of the host, so they
    /// are attached only while `wanted` is not empty.
    /// `wanted` also says whether a syscall's failed calls are filtered out in the kernel.
    pub fn set_fallback(&mut self, wanted: &[(u16, CaptureSpec, bool)]) -> Result<(), EbpfError> {
        for &(nr, spec, skip) in wanted {
            self.set_skip_failed(nr, skip)?;
            self.skel
                .maps
                .specs
                .update(
                    &u32::from(nr).to_ne_bytes(),
                    &spec.to_bytes(),
                    MapFlags::ANY,
                )
                .map_err(load_err("fill the capture-spec map"))?;
        }
        let keep: Vec<u16> = wanted.iter().map(|w| w.0).collect();
        for &nr in self.fallback.iter().filter(|nr| !keep.contains(nr)) {
            self.skel
                .maps
                .fallback_nrs
                .update(&u32::from(nr).to_ne_bytes(), &[0], MapFlags::ANY)
                .map_err(load_err("fill the fallback syscall map"))?;
        }
        for &nr in &keep {
            self.skel
                .maps
                .fallback_nrs
                .update(&u32::from(nr).to_ne_bytes(), &[1], MapFlags::ANY)
                .map_err(load_err("fill the fallback syscall map"))?;
        }
        self.fallback = keep;
        if self.fallback.is_empty() {
            if let Some((enter, exit)) = self.raw_links.take() {
                release(vec![enter, exit], Vec::new());
            }
        } else if self.raw_links.is_none() {
            let tracefs = self.tracefs_for_attach()?;
            let attach = |prog: &libbpf_rs::ProgramMut<'static>, tp: &str| {
                attach_tracepoint(tracefs, prog, "raw_syscalls", tp)
            };
            let exit = attach(&self.skel.progs.vigil_raw_exit, "sys_exit")?;
            let enter = attach(&self.skel.progs.vigil_raw_enter, "sys_enter")?;
            self.raw_links = Some((enter, exit));
        }
        Ok(())
    }

    /// Makes exactly the records of `keys` (syscall numbers, [`WAKE_KEY_PROCEXIT`]) wake the
    /// reader (`wake_types`).
    pub fn set_wake_types(&mut self, keys: &[u32]) -> Result<(), EbpfError> {
        let set = |key: u32, on: bool| {
            self.skel
                .maps
                .wake_types
                .update(&key.to_ne_bytes(), &[u8::from(on)], MapFlags::ANY)
                .map_err(load_err("fill the wakeup map"))
        };
        for &key in self.wake_keys.iter().filter(|k| !keys.contains(k)) {
            set(key, false)?;
        }
        for &key in keys.iter().filter(|k| !self.wake_keys.contains(k)) {
            set(key, true)?;
        }
        self.wake_keys = keys.to_vec();
        Ok(())
    }

    /// An epoll set over every CPU's ring buffer and `extra` (a [`vigil_capture::WakeReceiver`]),
    /// to block on until the kernel wakes the reader (`wake_reason`) or `extra` is readable.
    pub fn waiter(&self, extra: BorrowedFd<'_>) -> Result<Waiter, EbpfError> {
        let fail = |e: std::io::Error| EbpfError::Load {
            what: "set up the wait on the ring buffers",
            message: e.to_string(),
        };
        // SAFETY: epoll_create1 takes flags only; the result is a new descriptor or -1.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(fail(std::io::Error::last_os_error()));
        }
        // SAFETY: `fd` was just created and is owned by nothing else.
        let epoll = unsafe { OwnedFd::from_raw_fd(fd) };
        // The rings edge-triggered: a ring is reported only when the kernel wakes the reader.
        // Level-triggered, a ring once reported would be reported again by every wait that
        // finds a record in it (written since, without a wakeup): on a busy host the reader
        // would never sleep. The wake socket level-triggered: it is emptied before a wait.
        let fds = self
            .rings
            .iter()
            .map(|r| (r.as_fd().as_raw_fd(), libc::EPOLLIN | libc::EPOLLET))
            .enumerate()
            .map(|(i, (fd, events))| (fd, events, i as u64))
            .chain([(extra.as_raw_fd(), libc::EPOLLIN, Waiter::EXTRA)]);
        for (fd, events, data) in fds {
            let mut event = libc::epoll_event {
                events: events as u32,
                u64: data,
            };
            // SAFETY: both descriptors are open (the rings live as long as `self`, `extra` is
            // borrowed); `event` is a valid epoll_event the call only reads.
            let rc =
                unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut event) };
            if rc != 0 {
                return Err(fail(std::io::Error::last_os_error()));
            }
        }
        Ok(Waiter { epoll })
    }

    /// The syscall numbers whose tracepoints are attached.
    pub fn attached(&self) -> Vec<u16> {
        self.syscall_links.keys().copied().collect()
    }

    /// Moves every record the kernel has committed into `out` (`[u32 length][bytes]…`).
    pub fn consume(&mut self, out: &mut Vec<u8>) -> Result<(), EbpfError> {
        let n = self.ring.consume_raw();
        if n < 0 {
            return Err(EbpfError::Poll {
                code: n.unsigned_abs(),
            });
        }
        let mut raw = self.raw.borrow_mut();
        if out.is_empty() {
            // No copy: the buffers trade places (and capacities).
            std::mem::swap(out, &mut *raw);
        } else {
            out.append(&mut raw);
        }
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
            // struct wake_state: last, watched, filled.
            total.watched += n(1);
            total.filled += n(2);
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
                }
            })
            .collect()
    }
}

impl Drop for Bpf {
    fn drop(&mut self) {
        let mut links: Vec<Link> = std::mem::take(&mut self._lifecycle_links);
        if let Some((enter, exit)) = self.raw_links.take() {
            links.push(enter);
            links.push(exit);
        }
        let mut slots = Vec::new();
        for (_, hooked) in std::mem::take(&mut self.syscall_links) {
            hooked.take_into(&mut links, &mut slots);
        }
        links.extend(self.raw_exit.take());
        release(links, slots);
    }
}

/// The tracing filesystem the syscall tracepoints are looked up in: the host's mount when
/// there is one, else a private instance that is never attached to any path (`fsopen` +
/// `fsmount`, Linux 5.2), so the agent starts on a host where nobody mounted tracefs and
/// leaves no mount behind. Tracepoint ids are the same in every instance (tracefs has one
/// superblock, `fs/tracefs/inode.c`).
pub struct Tracefs {
    /// `…/events`: a path under the mount, or under `/proc/self/fd/N` of the private one.
    events: PathBuf,
    /// The private instance's mount fd; `None` for the host's mount.
    private: Option<OwnedFd>,
}

/// Mount points where a host usually has tracefs (the second through debugfs).
const TRACEFS_MOUNTS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];

impl Tracefs {
    /// The host's tracefs if mounted with syscall tracepoints, else a private instance.
    pub fn open() -> Result<Tracefs, EbpfError> {
        if let Some(root) = TRACEFS_MOUNTS
            .iter()
            .map(Path::new)
            .find(|root| root.join("events/syscalls").is_dir())
        {
            return Ok(Tracefs {
                events: root.join("events"),
                private: None,
            });
        }
        let fd = private_tracefs().map_err(|e| EbpfError::NoTracefs {
            // fsopen(2) wants CAP_SYS_ADMIN over the mount namespace (`fs/fsopen.c`).
            message: if e.raw_os_error() == Some(libc::EPERM) {
                format!("{e}: creating one needs CAP_SYS_ADMIN")
            } else {
                e.to_string()
            },
            fexit_refused: None,
        })?;
        let events = PathBuf::from(format!("/proc/self/fd/{}/events", fd.as_raw_fd()));
        if !events.join("syscalls").is_dir() {
            return Err(EbpfError::NoTracefs {
                message: "the kernel has no syscall tracepoints (CONFIG_FTRACE_SYSCALLS)".into(),
                fexit_refused: None,
            });
        }
        Ok(Tracefs {
            events,
            private: Some(fd),
        })
    }

    /// The `events` directory (`events/syscalls/sys_enter_openat/…`).
    pub fn events(&self) -> &Path {
        &self.events
    }

    /// Whether this is a private instance (the host has no tracefs mounted).
    pub fn is_private(&self) -> bool {
        self.private.is_some()
    }

    /// The id of tracepoint `category/name`.
    fn id(&self, category: &str, name: &str) -> std::io::Result<u64> {
        let text = std::fs::read_to_string(self.events.join(category).join(name).join("id"))?;
        text.trim()
            .parse()
            .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "bad tracepoint id"))
    }
}

/// A tracefs instance mounted nowhere: the fd of its root.
fn private_tracefs() -> std::io::Result<OwnedFd> {
    const FSOPEN_CLOEXEC: libc::c_uint = 1;
    const FSCONFIG_CMD_CREATE: libc::c_uint = 6;
    const FSMOUNT_CLOEXEC: libc::c_uint = 1;
    let fstype = CString::new("tracefs").expect("no NUL in a literal");
    // SAFETY: fsopen takes a NUL-terminated string that outlives the call and flags.
    let fs = unsafe { libc::syscall(libc::SYS_fsopen, fstype.as_ptr(), FSOPEN_CLOEXEC) };
    if fs < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fs` is a new fd that nothing else owns.
    let fs = unsafe { OwnedFd::from_raw_fd(fs as RawFd) };
    // SAFETY: FSCONFIG_CMD_CREATE takes no key, value or aux argument.
    let created = unsafe {
        libc::syscall(
            libc::SYS_fsconfig,
            fs.as_raw_fd(),
            FSCONFIG_CMD_CREATE,
            std::ptr::null::<libc::c_char>(),
            std::ptr::null::<libc::c_void>(),
            0,
        )
    };
    if created < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fsmount on the configured context fd, with flags and no mount attributes.
    let mnt = unsafe { libc::syscall(libc::SYS_fsmount, fs.as_raw_fd(), FSMOUNT_CLOEXEC, 0) };
    if mnt < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `mnt` is a new fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(mnt as RawFd) })
}

/// The start of `struct perf_event_attr` (`PERF_ATTR_SIZE_VER0`, 64 bytes), which is all a
/// tracepoint event needs; the kernel zero-extends a short attr (`perf_copy_attr`).
#[repr(C)]
#[derive(Default)]
struct PerfEventAttr {
    kind: u32,
    size: u32,
    config: u64,
    sample_period: u64,
    sample_type: u64,
    read_format: u64,
    flags: u64,
    wakeup_events: u32,
    bp_type: u32,
    config1: u64,
}

/// Attaches `prog` to tracepoint `category/name` found in `tracefs`: a perf event for the
/// tracepoint (any process, CPU 0: a BPF program on a tracepoint runs on every CPU), then
/// a BPF link on it, as libbpf's own tracepoint attach does, but with the id read from
/// `tracefs` (libbpf only looks in the two usual mount points).
fn attach_tracepoint(
    tracefs: &Tracefs,
    prog: &libbpf_rs::ProgramMut<'static>,
    category: &str,
    name: &str,
) -> Result<Link, EbpfError> {
    let fail = |message: String| EbpfError::Attach {
        name: format!("{category}/{name}"),
        message,
    };
    let id = tracefs
        .id(category, name)
        .map_err(|e| fail(format!("no tracepoint id: {e}")))?;
    const PERF_TYPE_TRACEPOINT: u32 = 2;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
    let attr = PerfEventAttr {
        kind: PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<PerfEventAttr>() as u32,
        config: id,
        sample_period: 1,
        wakeup_events: 1,
        ..PerfEventAttr::default()
    };
    // SAFETY: `attr` is a valid perf_event_attr prefix whose `size` says how much of it
    // there is; pid -1 with cpu 0 and no group.
    let pfd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            &raw const attr,
            -1 as libc::pid_t,
            0 as libc::c_int,
            -1 as libc::c_int,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if pfd < 0 {
        let err = std::io::Error::last_os_error();
        return Err(fail(format!(
            "perf_event_open: {err}{}",
            crate::seccomp_hint(&err)
        )));
    }
    // SAFETY: `pfd` is a new fd that nothing else owns.
    let pfd = unsafe { OwnedFd::from_raw_fd(pfd as RawFd) };
    // On success the link owns the perf event fd (libbpf closes it on detach).
    let link = prog
        .attach_perf_event(pfd.as_raw_fd())
        .map_err(|e| fail(e.to_string()))?;
    std::mem::forget(pfd);
    Ok(link)
}

/// Detaches `links` without waiting for the kernel's teardown when it can (a [`Releaser`]
/// does it), else in parallel threads.
///
/// `slots` (the fexit stubs' program arrays) outlive the links: the kernel empties a program
/// array when user space lets go of it, which rewrites the tail call in each stub's code,
/// and that must not happen while a stub is still attached and running (under emulation it
/// crashed a guest kernel in the stub: `int3`).
fn release(links: Vec<Link>, slots: Vec<Rc<MapHandle>>) {
    if links.is_empty() {
        return;
    }
    let fds: Vec<RawFd> = links.iter().map(|l| l.as_fd().as_raw_fd()).collect();
    let slot_fds: Vec<RawFd> = slots.iter().map(|m| m.as_fd().as_raw_fd()).collect();
    match Releaser::start(&fds, &slot_fds) {
        // The releaser holds the last references: dropping ours only disables the events.
        Some(releaser) => {
            drop(links);
            drop(slots);
            drop(releaser);
        }
        None => {
            detach_all(links);
            drop(slots);
        }
    }
}

/// A detached process (a grandchild, reparented to init) that holds copies of the link fds
/// and closes them once this process has let go of its own (its end of a pipe closes): the
/// kernel then tears the tracepoints down in that process, and this one is not held up by the
/// grace periods (~35 ms per syscall tracepoint, seconds with the default interest set).
struct Releaser {
    /// Write end of the pipe the releaser waits on; closing it lets the releaser go.
    go: libc::c_int,
}

impl Releaser {
    /// Forks the releaser holding `fds` and `after`; once let go it closes `fds` (the links)
    /// one by one, then exits (closing `after`). `None` if it cannot fork (the caller
    /// detaches itself).
    fn start(fds: &[RawFd], after: &[RawFd]) -> Option<Releaser> {
        let mut pipe = [-1 as libc::c_int; 2];
        // SAFETY: `pipe` is a valid array of two ints for pipe2 to fill.
        if unsafe { libc::pipe2(pipe.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return None;
        }
        let [wait_fd, go] = pipe;
        let mut keep: Vec<RawFd> = fds.iter().chain(after).copied().collect();
        keep.push(wait_fd);
        let links: Vec<libc::c_int> = fds.to_vec();
        // Computed before forking: the child only makes system calls.
        let gaps = close_gaps(&keep);
        // SAFETY: fork in a possibly multi-threaded process; both children below only make
        // async-signal-safe system calls (fork, close_range, setsid, read, close, _exit) on
        // memory prepared before the fork, and never return into Rust code.
        let child = unsafe { libc::fork() };
        if child < 0 {
            // SAFETY: closing the two pipe fds this function created.
            unsafe {
                libc::close(wait_fd);
                libc::close(go);
            }
            return None;
        }
        if child == 0 {
            // SAFETY: see the fork above: system calls on plain integers, then _exit.
            unsafe {
                if libc::fork() != 0 {
                    libc::_exit(0);
                }
                for &(first, last) in &gaps {
                    libc::syscall(libc::SYS_close_range, first, last, 0);
                }
                libc::setsid();
                let mut byte = 0u8;
                loop {
                    let n = libc::read(wait_fd, (&raw mut byte).cast(), 1);
                    if n >= 0 || *libc::__errno_location() != libc::EINTR {
                        break;
                    }
                }
                for &fd in &links {
                    libc::close(fd);
                }
                libc::_exit(0);
            }
        }
        // SAFETY: reaping the intermediate child (it exits at once) and closing our copy of
        // the pipe's read end.
        unsafe {
            let mut status = 0;
            while libc::waitpid(child, &mut status, 0) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            libc::close(wait_fd);
        }
        Some(Releaser { go })
    }
}

impl Drop for Releaser {
    fn drop(&mut self) {
        // SAFETY: `go` is the pipe write end this releaser owns; closed once.
        unsafe {
            libc::close(self.go);
        }
    }
}

/// The inclusive fd ranges to close to keep exactly `keep` open (the last range is open-ended).
fn close_gaps(keep: &[RawFd]) -> Vec<(libc::c_uint, libc::c_uint)> {
    let mut keep: Vec<libc::c_uint> = keep
        .iter()
        .filter_map(|&fd| libc::c_uint::try_from(fd).ok())
        .collect();
    keep.sort_unstable();
    keep.dedup();
    let mut gaps = Vec::with_capacity(keep.len() + 1);
    let mut next: libc::c_uint = 0;
    for fd in keep {
        if fd > next {
            gaps.push((next, fd - 1));
        }
        next = fd + 1;
    }
    gaps.push((next, libc::c_uint::MAX));
    gaps
}

/// Detaches links in parallel (when no [`Releaser`] can be started). Removing the last
/// program of a syscall tracepoint waits for RCU grace periods (the kernel's
/// `perf_trace_event_unreg`), serialized by the kernel: ~35 ms per tracepoint here, so closing
/// a source with the default interest set takes ~3 s (5.5 s one by one).
fn detach_all(links: Vec<Link>) {
    if links.len() <= 1 {
        drop(links);
        return;
    }
    std::thread::scope(|scope| {
        for link in links {
            scope.spawn(move || drop(link));
        }
    });
}

/// An epoll set over the ring buffers and a wake descriptor ([`Bpf::waiter`]). The rings are
/// edge-triggered: a wait ends when the kernel wakes the reader, never for a record written
/// without a wakeup (unlike libbpf's level-triggered `ring_buffer__poll`, where such records
/// keep a ring reported once it was).
pub struct Waiter {
    epoll: OwnedFd,
}

/// What ended a [`Waiter::wait`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Woken {
    /// The kernel woke the reader: some ring has records.
    pub rings: bool,
    /// The extra descriptor is readable.
    pub extra: bool,
}

impl Waiter {
    const EXTRA: u64 = u64::MAX;

    /// Blocks until the kernel wakes the reader, the extra descriptor becomes readable, a
    /// signal interrupts, or `timeout` (rounded up to the millisecond) has passed.
    pub fn wait(&self, timeout: std::time::Duration) -> Result<Woken, EbpfError> {
        let ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as i32;
        let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
        // SAFETY: `events` is writable for the 8 entries the call is told of.
        let n = unsafe {
            libc::epoll_wait(
                self.epoll.as_raw_fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                ms,
            )
        };
        let mut woken = Woken::default();
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(woken);
            }
            return Err(EbpfError::Poll {
                code: e.raw_os_error().unwrap_or(0).unsigned_abs(),
            });
        }
        for event in &events[..n as usize] {
            let data = event.u64;
            if data == Self::EXTRA {
                woken.extra = true;
            } else {
                woken.rings = true;
            }
        }
        Ok(woken)
    }
}

/// `CLOCK_REALTIME - CLOCK_BOOTTIME` in nanoseconds: added to `bpf_ktime_get_boot_ns()` it
/// gives the wall-clock time of a record.
pub fn boot_to_wall_offset() -> u64 {
    let boot = now(libc::CLOCK_BOOTTIME);
    let wall = now(libc::CLOCK_REALTIME);
    wall.saturating_sub(boot)
}

/// `CLOCK_BOOTTIME` now, in nanoseconds (the clock of record timestamps).
pub fn boot_now() -> u64 {
    now(libc::CLOCK_BOOTTIME)
}

fn now(clock: libc::clockid_t) -> u64 {
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid, writable timespec; clock_gettime writes only into it.
        let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
        if rc != 0 {
            return 0;
        }
        (ts.tv_sec as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the kernel's own BTF (readable by anyone): the two prototypes of the syscall
    /// functions, and the aliased `__do_sys_X` of a syscall without arguments. Skips where
    /// the kernel has no BTF (the driver needs it anyway).
    #[test]
    fn fexit_targets_follow_the_kernels_btf() {
        let Ok(btf) = libbpf_rs::btf::Btf::from_vmlinux() else {
            assert!(
                !Path::new("/sys/kernel/btf/vmlinux").exists(),
                "the kernel's BTF exists but cannot be read"
            );
            return;
        };
        let protos = fexit_prototypes(&btf);
        assert_eq!(
            protos.first().map(|p| p.1.as_str()),
            Some(fexit_target("openat").as_str())
        );
        let ids: Vec<_> = protos.iter().map(|p| p.0).collect();
        assert_eq!(
            fexit_function(&btf, &ids, "openat"),
            Some((0, fexit_target("openat")))
        );
        // fork has no arguments: where BTF has `__do_sys_fork` (x86 kernels since the
        // pt_regs wrappers), it is the target, served by the other prototype's program.
        if prototype_of(&btf, &fexit_target("fork")).is_none()
            && prototype_of(&btf, "__do_sys_fork").is_some()
        {
            assert_eq!(ids.len(), 2, "{protos:?}");
            assert_eq!(
                fexit_function(&btf, &ids, "fork"),
                Some((1, "__do_sys_fork".to_owned()))
            );
        }
        // A `__do_sys_X` with the syscall's own arguments has neither prototype.
        if let Some(proto) = prototype_of(&btf, "__do_sys_openat") {
            assert!(!ids.contains(&proto), "{protos:?}");
        }
        assert_eq!(fexit_function(&btf, &ids, "no_such_syscall"), None);
    }

    #[test]
    fn load_failure_reason_is_the_verifiers_last_words() {
        let log = "libbpf: prog 'vigil_exec': BPF program load failed: Invalid argument\n\
                   libbpf: prog 'vigil_exec': -- BEGIN PROG LOAD LOG --\n\
                   0: R1=ctx() R10=fp0\n\
                   412: <invalid CO-RE relocation>\n\
                   failed to resolve CO-RE relocation <byte_off> [12] struct kernfs_node.__parent (0:6 @ offset 16)\n\
                   processed 1022 insns (limit 1000000) max_states_per_insn 4\n\
                   -- END PROG LOAD LOG --\n\
                   libbpf: prog 'vigil_exec': failed to load: -22\n";
        assert_eq!(
            load_failure_reason(log).as_deref(),
            Some(
                "the kernel refused program `vigil_exec`: failed to resolve CO-RE relocation \
                 <byte_off> [12] struct kernfs_node.__parent (0:6 @ offset 16)"
            )
        );
        assert_eq!(
            load_failure_reason("libbpf: map 'stashes': failed to create\n"),
            None
        );
    }

    #[test]
    fn close_gaps_keep_exactly_the_given_fds() {
        assert_eq!(
            close_gaps(&[7, 3, 4, 7, -1]),
            vec![(0, 2), (5, 6), (8, libc::c_uint::MAX)]
        );
        assert_eq!(close_gaps(&[0]), vec![(1, libc::c_uint::MAX)]);
        assert_eq!(close_gaps(&[]), vec![(0, libc::c_uint::MAX)]);
    }
}

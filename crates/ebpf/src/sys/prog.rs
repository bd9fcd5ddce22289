//! The BPF object: open, configure (hook, floor, wakeups) and load the skeleton, attach the
//! lifecycle programs, and attach or detach each watched syscall for the chosen hook (fexit
//! stubs, tracepoints, the raw `sys_exit`, the `raw_syscalls` fallback).

use std::collections::BTreeMap;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::rc::Rc;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, MapHandle};

use super::btf::{fexit_function, fexit_prototypes, fexit_target};
use super::link::{release, SyscallLinks};
use super::load_log::{load_failure_reason, save_load_log, with_load_log};
use super::perf_event::attach_tracepoint;
use super::skel::VigilSkelBuilder;
use super::stubs_skel::VigilStubsSkelBuilder;
use super::{load_err, ring, Bpf, Tracefs, VigilSkel};
use crate::policy::{Floor, Hook, WakeTuning};
use crate::spec::CaptureSpec;
use crate::EbpfError;

/// Stubs in `bpf/vigil_stubs.bpf.c` (one object holds this many; more are opened as needed).
const STUBS_PER_OBJECT: usize = 64;

/// `hook_mode` in `bpf/vigil.bpf.c`.
fn hook_mode(hook: Hook) -> u32 {
    match hook {
        Hook::Fexit => 0,
        Hook::Tracepoint => 1,
        Hook::Raw => 2,
        Hook::Exit => 3,
    }
}

/// `floor_mode` in `bpf/vigil.bpf.c`.
fn floor_mode(floor: Floor) -> u32 {
    match floor {
        Floor::None => 0,
        Floor::Nop => 1,
        Floor::Ring => 2,
    }
}

/// Why [`Bpf::load_skel`] failed: a step before the load, or the load (with libbpf's log).
enum LoadFailure {
    Step(EbpfError),
    Load {
        source: libbpf_rs::Error,
        log: String,
    },
}

/// The error of a failed load, its libbpf log saved if `save_log`.
fn load_failed(failure: LoadFailure, save_log: bool) -> EbpfError {
    match failure {
        LoadFailure::Step(e) => e,
        LoadFailure::Load { source, log } => {
            let reason = load_failure_reason(&log).unwrap_or_else(|| source.to_string());
            EbpfError::Load {
                what: "load the BPF programs",
                message: match save_log.then(|| save_load_log(&log)).flatten() {
                    Some(path) => format!("{reason} (libbpf's log: {})", path.display()),
                    None => reason,
                },
            }
        }
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
        let vmlinux = if hook == Hook::Fexit {
            Some(libbpf_rs::btf::Btf::from_vmlinux().map_err(load_err("read the kernel's BTF"))?)
        } else {
            None
        };
        let fexit_protos = vmlinux.as_ref().map(fexit_prototypes).unwrap_or_default();
        // Deferred wakeups need BPF timers in the lifecycle programs: a kernel that refuses
        // them (a PREEMPT_RT build may) loads the object again without, and wakes at once.
        let loaded = Self::load_skel(agent_tgid, hook, floor, wake, &fexit_protos, ncpus);
        let (skel, defers_wakes) = match loaded {
            Ok(skel) => (skel, wake.defer_ns > 0),
            // Only for the timer: a load that failed for another reason (trampolines refused,
            // say, which the caller then falls back from) is not tried twice.
            Err(LoadFailure::Load { log, .. }) if wake.defer_ns > 0 && log.contains("timer") => {
                let at_once = WakeTuning {
                    defer_ns: 0,
                    ..wake
                };
                let skel = Self::load_skel(agent_tgid, hook, floor, at_once, &fexit_protos, ncpus)
                    .map_err(|failure| load_failed(failure, save_log))?;
                (skel, false)
            }
            Err(failure) => return Err(load_failed(failure, save_log)),
        };

        let (rings, ring, raw) = ring::create(&skel, ncpus)?;
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
            state_only_keys: Vec::new(),
            result_filters: Vec::new(),
            failure_needles: Vec::new(),
            skel,
            raw,
            tracefs,
            defers_wakes,
        })
    }

    /// Opens the object, configures it and loads it; on failure, what was wrong and
    /// libbpf's log.
    fn load_skel(
        agent_tgid: u32,
        hook: Hook,
        floor: Floor,
        wake: WakeTuning,
        fexit_protos: &[(libbpf_rs::btf::TypeId, String)],
        ncpus: u32,
    ) -> Result<VigilSkel<'static>, LoadFailure> {
        let failed =
            |what: &'static str| move |e: libbpf_rs::Error| LoadFailure::Step(load_err(what)(e));
        // The skeleton borrows its object storage for as long as it lives; the source lives
        // as long as the capture, so the (small) storage is leaked once per load.
        let storage: &'static mut MaybeUninit<libbpf_rs::OpenObject> =
            Box::leak(Box::new(MaybeUninit::uninit()));
        let mut open = VigilSkelBuilder::default()
            .open(storage)
            .map_err(failed("open the BPF object"))?;
        if let Some(rodata) = open.maps.rodata_data.as_deref_mut() {
            rodata.agent_tgid = agent_tgid;
            rodata.hook_mode = hook_mode(hook);
            rodata.floor_mode = floor_mode(floor);
            rodata.wake_bytes = wake.bytes;
            rodata.wake_gap_ns = wake.gap_ns;
            rodata.defer_wake_ns = wake.defer_ns;
        }
        if wake.defer_ns == 0 {
            // Not created: the timer code is dead (the verifier never reaches it).
            open.maps
                .defer_timers
                .set_autocreate(false)
                .map_err(failed("leave the wakeup timer out"))?;
        }
        match fexit_protos.get(1) {
            Some((_, target)) => open
                .progs
                .vigil_sys_fexit1
                .set_attach_target(0, Some(target.clone()))
                .map_err(failed("set the second capture program's target"))?,
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
            .map_err(failed("size the ring-buffer array"))?;
        open.maps
            .scratch
            .set_max_entries(ncpus)
            .map_err(failed("size the record scratch array"))?;
        let (skel, log) = with_load_log(|| open.load());
        skel.map_err(|source| LoadFailure::Load { source, log })
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

    /// Whether a timer wakes the reader for the lifecycle programs' records (`defer_wake_ns`).
    pub fn defers_wakes(&self) -> bool {
        self.defers_wakes
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
            self.set_spec(nr, spec)?;
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
            self.set_spec(nr, spec)?;
        }
        let keep: Vec<u16> = wanted.iter().map(|w| w.0).collect();
        for &nr in self.fallback.iter().filter(|nr| !keep.contains(nr)) {
            self.set_fallback_nr(nr, false)?;
        }
        for &nr in &keep {
            self.set_fallback_nr(nr, true)?;
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

    /// The syscall numbers whose tracepoints are attached.
    pub fn attached(&self) -> Vec<u16> {
        self.syscall_links.keys().copied().collect()
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

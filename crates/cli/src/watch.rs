//! `vigil watch`'s flags: host-wide capture with eBPF, evaluated live against the rules. The
//! assembly (set-up, privilege drop, the loop) is [`vigil_agent::watch`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Result;
use clap::Args;
use vigil_agent::watch::{WatchError, WatchOptions};
use vigil_ebpf::{Floor, Hook};

use crate::flags::{DurationArgs, LiveArgs, WriteArgs};
use crate::live::{init_logging, notice};
use crate::selection::{configure, RulesSelection};

#[derive(Args)]
pub struct WatchArgs {
    #[command(flatten)]
    selection: RulesSelection,
    #[command(flatten)]
    live: LiveArgs,
    #[command(flatten)]
    write: WriteArgs,
    #[command(flatten)]
    duration: DurationArgs,
    /// Capture watched syscalls that this kernel has no tracepoint for (not implemented here,
    /// e.g. init_module without module support: they always fail with ENOSYS) through the
    /// raw_syscalls tracepoints. Costs every syscall on the host a short filter program.
    #[arg(long)]
    raw_fallback: bool,
    /// How watched syscalls are hooked: `auto` (fexit where the kernel allows BPF
    /// trampolines, else exit), `fexit` (trampolines on the syscalls' implementations:
    /// unwatched syscalls run no BPF), `exit` (the exit tracepoint of each watched syscall,
    /// arguments from the saved registers), `raw` (the raw `sys_exit` tracepoint filtered in
    /// the kernel: every syscall runs the filter) or `tracepoint` (per-syscall enter and exit
    /// tracepoints, the previous design). With any tracepoint, every syscall of the host
    /// takes the kernel's slow path.
    #[arg(long, value_enum, default_value_t = SyscallHook(None))]
    syscall_hook: SyscallHook,
    /// For `vigil bench`: attach programs that return at once (`nop`) or only write a
    /// record header (`ring`) at the same points, capturing nothing (the floor under
    /// Vigil's own work). No alerts.
    #[arg(long, value_enum, default_value_t = BpfFloor(Floor::None), hide = true)]
    bpf_floor: BpfFloor,
    /// Also read docker containers' metadata (name, image, labels, mounts) from this data
    /// root (repeatable). `/var/lib/docker` and the `--data-root` of every running `dockerd`
    /// (its command line or `daemon.json`, looked at again when a container is not found)
    /// are always read; this is for a daemon the agent cannot see, e.g.
    /// `--docker-data-root /srv/docker`.
    #[arg(long, value_name = "DIR")]
    docker_data_root: Vec<PathBuf>,
    /// At start (and after a reload), also name where the tracepoints come from, why BPF
    /// trampolines are not used, the syscalls captured through `raw_syscalls` and those whose
    /// failed calls are filtered out in the kernel (counted in `/metrics` as
    /// `vigil_source_filtered_failed_total`). Without it, one line says what is watched and
    /// how, and warnings name what is not captured.
    #[arg(short = 'v', long)]
    verbose: bool,
}

impl WatchArgs {
    /// A watch as `falco` runs one: with Falco's `-M`, `-s` and `--stats-interval`.
    pub fn falco(selection: RulesSelection, duration: DurationArgs, live: LiveArgs) -> WatchArgs {
        WatchArgs {
            selection,
            live,
            write: WriteArgs { write: None },
            duration,
            raw_fallback: false,
            syscall_hook: SyscallHook(None),
            bpf_floor: BpfFloor(Floor::None),
            docker_data_root: Vec::new(),
            verbose: false,
        }
    }
}

/// `--syscall-hook`: `auto` (`None`: the driver's choice, fexit where the kernel allows it,
/// else exit) or one of the driver's [`Hook`]s, by [`Hook::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyscallHook(pub Option<Hook>);

impl clap::ValueEnum for SyscallHook {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [SyscallHook; Hook::ALL.len() + 1] = {
            let mut all = [SyscallHook(None); Hook::ALL.len() + 1];
            let mut i = 0;
            while i < Hook::ALL.len() {
                all[i + 1] = SyscallHook(Some(Hook::ALL[i]));
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(self.0.map_or("auto", Hook::name).into())
    }
}

/// `--bpf-floor`: one of the driver's [`Floor`]s, by [`Floor::name`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BpfFloor(pub Floor);

impl clap::ValueEnum for BpfFloor {
    fn value_variants<'a>() -> &'a [Self] {
        const ALL: [BpfFloor; Floor::ALL.len()] = {
            let mut all = [BpfFloor(Floor::None); Floor::ALL.len()];
            let mut i = 0;
            while i < Floor::ALL.len() {
                all[i] = BpfFloor(Floor::ALL[i]);
                i += 1;
            }
            all
        };
        &ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(self.0.name().into())
    }
}

pub fn watch(args: WatchArgs) -> Result<ExitCode> {
    let reconfigure = || configure(&args.selection, args.live.rule_matching, args.live.json);
    let started = reconfigure()?;
    let options = WatchOptions {
        write: args.write.write.clone(),
        duration: args.duration.duration,
        raw_fallback: args.raw_fallback,
        hook: args.syscall_hook.0,
        floor: args.bpf_floor.0,
        docker_data_roots: args.docker_data_root.clone(),
        verbose: args.verbose,
        stats_file: args
            .live
            .stats_file
            .for_agent()
            .map(|(path, every)| (path.to_path_buf(), every)),
        stats: args.live.stats,
        watch: args.selection.watch_sources(),
        notice,
        logging: init_logging,
    };
    let configure_again = || reconfigure().map_err(Into::into);
    let stats =
        vigil_agent::watch::watch(options, started, &configure_again).map_err(|e| match e {
            // The agent's own error, with its exit-code class.
            WatchError::Agent(e) => anyhow::Error::from(e),
            e => e.into(),
        })?;
    if let Some(line) = stats {
        eprintln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--syscall-hook` and `--bpf-floor` take the driver's names, in the order the help lists
    /// them (scripts and `vigil bench` agent specs pass them), each parsed to its own hook or
    /// floor.
    #[test]
    fn hook_and_floor_flags_take_the_drivers_names() {
        use clap::ValueEnum;
        fn names<T: ValueEnum>() -> Vec<String> {
            T::value_variants()
                .iter()
                .map(|v| {
                    let value = v.to_possible_value().expect("every variant has a value");
                    value.get_name().to_owned()
                })
                .collect()
        }
        assert_eq!(
            names::<SyscallHook>(),
            ["auto", "fexit", "raw", "exit", "tracepoint"]
        );
        assert_eq!(names::<BpfFloor>(), ["none", "nop", "ring"]);
        assert_eq!(SyscallHook::from_str("auto", false), Ok(SyscallHook(None)));
        for hook in Hook::ALL {
            assert_eq!(
                SyscallHook::from_str(hook.name(), false),
                Ok(SyscallHook(Some(hook)))
            );
        }
        assert_eq!(
            SyscallHook::from_str("tracepoint", false),
            Ok(SyscallHook(Some(Hook::Tracepoint)))
        );
        assert_eq!(BpfFloor::from_str("nop", false), Ok(BpfFloor(Floor::Nop)));
        assert_eq!(BpfFloor::from_str("ring", false), Ok(BpfFloor(Floor::Ring)));
        assert!(SyscallHook::from_str("kprobe", false).is_err());
    }
}

//! `vigil run -- CMD ARGS…`: the kernel-less mode's flags. The pipeline (the ptrace driver's
//! handler, enforcement, learning, reloads) is [`vigil_agent::run`].
//!
//! Alerts go to stderr by default so that the workload's stdout stays its own (`vigil run`
//! wraps entrypoints whose stdout is data); `--alerts FILE` (or the configuration's enabled
//! `file_output`) sends them to a file instead.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use vigil_agent::run::{RunError, RunOptions};
use vigil_config::Config;
use vigil_engine::EnforceSelection;
use vigil_ptrace::{Mechanism, MemoryAccess};
use vigil_rules::Ruleset;

use crate::error::InvalidInput;
use crate::flags::{LiveArgs, WriteArgs};
use crate::live::{init_logging, notice};
use crate::selection::{self, RulesSelection};

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    rules: RunSelection,
    /// Block the syscalls that match enforced rules, before they run.
    #[arg(long)]
    enforce: bool,
    /// Enforce rules whose name matches (repeatable, `*` wildcards). Without any
    /// --enforce-rule/--enforce-tag, rules tagged `vigil.enforce` are enforced.
    #[arg(long, value_name = "RULE", requires = "enforce")]
    enforce_rule: Vec<String>,
    /// Enforce rules carrying a matching tag (repeatable, `*` wildcards).
    #[arg(long, value_name = "TAG", requires = "enforce")]
    enforce_tag: Vec<String>,
    /// What blocking does: fail the syscall with EPERM, or kill the process.
    #[arg(long, value_enum, default_value = "deny", requires = "enforce")]
    enforce_action: EnforceAction,
    /// Record every syscall the workload makes and write an OCI/Docker seccomp profile
    /// allowing exactly those (plus what --learn-for's runtime needs) to FILE.
    #[arg(long, value_name = "FILE")]
    learn: Option<PathBuf>,
    /// The runtime that will apply the learned profile: `runc` (Docker, containerd,
    /// Kubernetes) adds the few syscalls runc itself makes after installing it; `none` keeps
    /// exactly the workload's (for --seccomp-profile).
    #[arg(
        long,
        value_enum,
        value_name = "RUNTIME",
        default_value = "runc",
        requires = "learn"
    )]
    learn_for: LearnFor,
    /// Apply an OCI/Docker seccomp profile (names and actions; no argument conditions).
    #[arg(long, value_name = "FILE")]
    seccomp_profile: Option<PathBuf>,
    #[command(flatten)]
    write: WriteArgs,
    /// Interception mechanism: `auto` is ptrace, or seccomp user notification where ptrace
    /// is refused (with a warning); `ptrace` alone; `notify`, the user-notify mechanism (no
    /// syscall results, no learning; see crates/ptrace/README.md).
    #[arg(long, value_enum, default_value = "auto")]
    mechanism: MechanismArg,
    /// How to read the workload's memory: `auto` probes process_vm_readv, /proc/PID/mem and
    /// ptrace (PTRACE_PEEKDATA, no capability needed) and uses the cheapest that works, the
    /// others as fallbacks (`VIGIL_LOG=info` names them); the others force one.
    #[arg(long, value_enum, value_name = "HOW", default_value = "auto")]
    memory_access: MemoryAccessArg,
    /// The workload and its arguments (after `--`).
    #[arg(required = true, last = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Rules, configuration and the flags that shape alerts: what a reload reads again.
#[derive(Args)]
struct RunSelection {
    #[command(flatten)]
    selection: RulesSelection,
    #[command(flatten)]
    live: LiveArgs,
    /// Write alerts to FILE instead of stderr (default: the configuration's `file_output`
    /// when enabled, else stderr; the configuration's syslog, program and HTTP outputs
    /// receive them too).
    #[arg(long = "alerts", value_name = "FILE")]
    alerts: Option<PathBuf>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LearnFor {
    Runc,
    None,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MechanismArg {
    Auto,
    Ptrace,
    Notify,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MemoryAccessArg {
    Auto,
    #[value(name = "process_vm_readv")]
    VmReadv,
    Ptrace,
    ProcMem,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum EnforceAction {
    Deny,
    Kill,
}

/// The configuration and rules of a run; `--alerts FILE` (or an enabled `file_output`)
/// takes the place of the console output, as before outputs were unified.
fn configure(args: &RunSelection) -> Result<(Config, Ruleset)> {
    let (mut config, ruleset) =
        selection::configure(&args.selection, args.live.rule_matching, args.live.json)?;
    // A wrapped workload usually has no syslog daemon (containers): a missing socket is
    // the normal case here, not worth a warning on the workload's stderr.
    if config.syslog_output.enabled && !config.syslog_output.socket.exists() {
        config.syslog_output.enabled = false;
    }
    // The embedded default serves /healthz and /metrics for `vigil watch`; a wrapper starts
    // the web server only when asked (a configuration file, or `-o webserver.…`), so that
    // several wrapped workloads on one host do not contend for its port.
    let configured = args.selection.config.config.is_some()
        || args
            .selection
            .config
            .options
            .iter()
            .any(|o| o.starts_with("webserver."));
    if !configured {
        config.webserver.enabled = false;
    }
    if let Some(path) = &args.alerts {
        config.file_output.enabled = true;
        config.file_output.filename = path.clone();
    }
    if config.file_output.enabled && !config.file_output.filename.as_os_str().is_empty() {
        config.stdout_output.enabled = false;
    }
    Ok((config, ruleset))
}

pub fn run(args: RunArgs) -> Result<std::process::ExitCode> {
    // Before the agent starts: the start-up lines come from the tracer first.
    init_logging();
    let started = configure(&args.rules)?;
    let options = RunOptions {
        command: args.command,
        enforce: args.enforce.then_some(EnforceSelection {
            rules: args.enforce_rule,
            tags: args.enforce_tag,
        }),
        action: match args.enforce_action {
            EnforceAction::Deny => vigil_agent::run::EnforceAction::Deny,
            EnforceAction::Kill => vigil_agent::run::EnforceAction::Kill,
        },
        learn: args.learn.map(|path| {
            let runtime = match args.learn_for {
                LearnFor::Runc => vigil_ptrace::Runtime::Runc,
                LearnFor::None => vigil_ptrace::Runtime::None,
            };
            (path, runtime)
        }),
        seccomp_profile: args.seccomp_profile,
        write: args.write.write,
        mechanism: match args.mechanism {
            MechanismArg::Auto | MechanismArg::Ptrace => Mechanism::Ptrace,
            MechanismArg::Notify => Mechanism::Notify,
        },
        notify_fallback: args.mechanism == MechanismArg::Auto,
        memory: match args.memory_access {
            MemoryAccessArg::Auto => None,
            MemoryAccessArg::VmReadv => Some(MemoryAccess::VmReadv),
            MemoryAccessArg::Ptrace => Some(MemoryAccess::Ptrace),
            MemoryAccessArg::ProcMem => Some(MemoryAccess::ProcMem),
        },
        stats_file: args
            .rules
            .live
            .stats_file
            .for_agent()
            .map(|(path, every)| (path.to_path_buf(), every)),
        stats_interval: args.rules.live.stats_file.stats_interval,
        print_stats: args.rules.live.stats,
        watch: args.rules.selection.watch_sources(),
        notice,
    };
    let selection = args.rules;
    let configure_again = || configure(&selection).map_err(Into::into);
    vigil_agent::run::run(options, started, &configure_again).map_err(|e| match e {
        // The command line's own error, with its exit-code class.
        RunError::Configure(e) => anyhow::Error::from_boxed(e),
        RunError::Invalid(text) => InvalidInput(text).into(),
        RunError::Agent(e) => e.into(),
        e => e.into(),
    })
}

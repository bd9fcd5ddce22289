//! `vigil watch`'s assembly: host-wide capture with eBPF (`vigil-ebpf`), evaluated live
//! against the rules through [`Agent::drive`].
//!
//! Entry point: [`watch`], with the rules and configuration the command line read and a
//! `configure` that reads them again (SIGHUP, a watched file changed).
//!
//! Set-up runs with the privileges the agent was started with (loading BPF programs, reading
//! every process's `/proc`, creating the capture); then [`Agent::start`] drops all but
//! [`vigil_privs::watch_keeps`] (re-attaching tracepoints on SIGHUP, reading `/proc` and
//! container files lazily) and sets `no_new_privs`, before any thread starts. The reasons for
//! each kept capability are in `vigil-privs`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use vigil_capture::{InterestSet, Source};
use vigil_config::Config;
use vigil_ebpf::{BpfOptions, BpfSource, EbpfError, Floor, Hook};
use vigil_engine::Engine;
use vigil_event::{Event, EventType};
use vigil_output::sinks::Console;
use vigil_rules::Ruleset;

use crate::capture_out::{CaptureOut, CaptureOutError};
use crate::filewatch::WatchSources;
use crate::live::{Agent, AgentError, AgentFlags, Drive, Reapplied, ReloadError, StepError};

/// Why a watch cannot start or went wrong.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// This kernel or these privileges cannot load the programs.
    #[error(transparent)]
    Support(EbpfError),
    #[error("cannot start eBPF capture")]
    Start(#[source] EbpfError),
    #[error("cannot read the start snapshot")]
    Snapshot(#[source] vigil_capture::SourceError),
    #[error(transparent)]
    Capture(#[from] CaptureOutError),
    #[error("cannot write `{}`", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: WriteError,
    },
    /// The source failed while the agent drove it.
    #[error("eBPF capture failed")]
    Source(#[source] AgentError),
    /// The agent's own error, with its exit-code class.
    #[error(transparent)]
    Agent(#[from] AgentError),
}

/// What writing the capture's start or end failed on.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Snapshot(vigil_event::codec::CaptureError),
    #[error(transparent)]
    Finish(CaptureOutError),
}

/// A watch as the command line asked for it.
pub struct WatchOptions {
    /// `-w FILE`.
    pub write: Option<PathBuf>,
    /// `-M`: stop after this long.
    pub duration: Option<Duration>,
    /// `--raw-fallback`.
    pub raw_fallback: bool,
    /// `--syscall-hook` (`None`: the driver's choice).
    pub hook: Option<Hook>,
    /// `--bpf-floor`.
    pub floor: Floor,
    /// `--docker-data-root`, besides the ones found on this host.
    pub docker_data_roots: Vec<PathBuf>,
    /// `-v`.
    pub verbose: bool,
    /// The statistics file and its interval.
    pub stats_file: Option<(PathBuf, Duration)>,
    /// Return the counters of the watch (`--stats`).
    pub stats: bool,
    /// The rules and configuration files watched for a reload.
    pub watch: WatchSources,
    /// The stderr line for Vigil's own messages.
    pub notice: fn(&str),
    /// Called once set-up is done, before the agent starts (the command line's logger).
    pub logging: fn(),
}

/// The event types the rules watch (every type for a rule without one, with a warning).
pub fn rules_interest(ruleset: &Ruleset, notice: fn(&str)) -> InterestSet {
    let types = ruleset.event_types();
    if types.is_all() {
        notice(
            "warning: a rule without an event type watches every syscall; capture will be costly",
        );
        InterestSet::all()
    } else {
        types.ids().map(EventType).collect()
    }
}

/// The event types whose failed calls nothing in this watch can use, for the driver to filter
/// out in the kernel: no enabled rule watching the type may match a failure
/// ([`Ruleset::may_match_failure`]), and no capture is written (a capture records the whole
/// interest set, failures included, for a replay with other rules). The driver keeps the
/// failures the state engine learns from (`vigil_ebpf::STATE_USES_FAILED`).
pub fn failed_unused(ruleset: &Ruleset, interest: &InterestSet, capture: bool) -> InterestSet {
    if capture {
        return InterestSet::new();
    }
    vigil_ebpf::driver_interest(interest)
        .iter()
        .filter(|t| t.spec().nr.is_some() && !ruleset.may_match_failure(t.0))
        .collect()
}

/// The failed opens the driver delivers only when their path as passed contains a string
/// every rule that may match one requires (`vigil_engine::failure_path_needles`), for it to
/// search in the kernel; none when a capture is written (it records every failure).
pub fn failure_needles(ruleset: &Ruleset, capture: bool) -> Vec<(EventType, Vec<u8>)> {
    if capture {
        return Vec::new();
    }
    vigil_engine::failure_path_needles(ruleset)
}

/// Watches this host with `config` and `ruleset` (what `configure` returned at the start)
/// until a stop signal or the end of `options.duration`; `configure` reads them again for a
/// reload. Returns the counters line of `--stats` when asked.
pub fn watch(
    options: WatchOptions,
    (config, ruleset): (Config, Ruleset),
    configure: &dyn Fn() -> Result<(Config, Ruleset), ReloadError>,
) -> Result<Option<serde_json::Value>, WatchError> {
    let notice = options.notice;
    let interest = rules_interest(&ruleset, notice);
    let unused = failed_unused(&ruleset, &interest, options.write.is_some());
    vigil_ebpf::check_support().map_err(WatchError::Support)?;
    let duration = options.duration;

    // The start snapshot is read once the programs are attached, so that nothing that happens
    // in between is missed; this process is left out (`exclude_pid`), as in the kernel.
    let mut snapshot_stats = vigil_state::SnapshotStats::default();
    let start_snapshot = || {
        let (snapshot, stats) = vigil_state::read_snapshot(
            &vigil_state::RealProc::default(),
            &vigil_state::SnapshotOptions::default(),
        )?;
        snapshot_stats = stats;
        Ok::<_, vigil_state::ProcError>(snapshot)
    };
    let mut source = BpfSource::open(
        BpfOptions {
            interest,
            failed_unused: unused,
            result_masks: vigil_engine::descriptor_result_masks(&ruleset),
            failure_needles: failure_needles(&ruleset, options.write.is_some()),
            raw_fallback: options.raw_fallback,
            hook: options.hook,
            floor: options.floor,
            ..BpfOptions::default()
        },
        start_snapshot,
    )
    .map_err(WatchError::Start)?;
    let mut snapshot = source.snapshot().map_err(WatchError::Snapshot)?;
    // Before the drop: what this process could read other processes' /proc entries with.
    let start_caps = vigil_state::procfs::own_status().map_or(0, |s| s.cap_eff);
    // Live: container names, images and labels come from the runtimes' state on this host;
    // those of the containers already running go into the snapshot (and a capture's replay).
    let mut runtime_dirs = vigil_container::RuntimeDirs::system();
    runtime_dirs
        .docker_roots
        .extend(options.docker_data_roots.iter().cloned());
    vigil_container::add_snapshot_containers(&runtime_dirs, &mut snapshot);
    let mut capture = match options.write.as_ref() {
        Some(path) => Some({
            let mut cap = CaptureOut::create(path)?;
            cap.snapshot(&snapshot).map_err(|e| WatchError::Write {
                path: path.clone(),
                source: WriteError::Snapshot(e),
            })?;
            cap
        }),
        None => None,
    };
    let hostname = String::from_utf8_lossy(&snapshot.hostname).into_owned();
    let mut state_config = crate::host::live_state_config(&hostname, notice);
    state_config.container_runtime = Some(runtime_dirs);
    let mut engine = Engine::new(ruleset, state_config, hostname.clone());
    engine.load_snapshot(&snapshot);
    (options.logging)();
    let keep = vigil_privs::watch_keeps();
    let flags = AgentFlags {
        // Everything that needed more is done: programs loaded, snapshot read, capture
        // open; the stats and metrics files and the web server come before the drop.
        privileges: Some(&keep),
        stats_file: options
            .stats_file
            .as_ref()
            .map(|(path, every)| (path.as_path(), *every)),
        live: true,
        signals: true,
        console: Console::Stdout,
        engine: "modern_bpf",
        notice,
    };
    let mut agent = Agent::start(config, &hostname, &flags, &mut engine)?;
    agent.watch_files(options.watch);
    for line in coverage(&source, options.raw_fallback, options.verbose, false) {
        notice(&line);
    }
    if options.verbose {
        notice(&source.tracefs_origin().to_string());
        if let Some(why) = source.hook_fallback() {
            notice(&format!(
                "BPF trampolines (fexit) are not available on this kernel ({why}): \
                 syscalls hooked by their exit tracepoints (every syscall of the host takes \
                 the kernel's slow path; `vigil bench overhead --agent 'watch:--bpf-floor \
                 nop'` measures that floor)"
            ));
        }
    }
    if options.floor != Floor::None {
        notice(&format!(
            "floor run ({:?}): programs attached, nothing captured",
            options.floor
        ));
    }
    // One line says what is watched and how; a second one, only when something is
    // degraded, what it costs. The details are behind -v.
    let how = match source.hook_fallback() {
        Some(_) => "their exit tracepoints",
        None => source.hook().name(),
    };
    notice(&format!(
        "watching {} syscalls on this host ({} processes at start); syscalls hooked by \
         {how}",
        source.attached_syscalls().len() + source.fallback_syscalls().len(),
        snapshot_stats.processes
    ));
    let mut degraded = Vec::new();
    if source.hook_fallback().is_some() {
        degraded.push(
            "no BPF trampolines (fexit) on this kernel: every syscall of the host takes the \
             kernel's slow path"
                .to_owned(),
        );
    }
    if !source.unsupported().is_empty() {
        degraded.push(unsupported_text(&source, options.raw_fallback));
    }
    if !source.defers_wakes() {
        degraded.push(
            "the kernel refused BPF timers in the lifecycle programs: a watched fork, exec or \
             exit wakes the agent at once (a second wakeup for a short-lived process)"
                .to_owned(),
        );
    }
    if options.verbose {
        notice(&format!(
            "start snapshot: {} processes, {} threads, {} descriptors; {} reads of \
             /proc refused",
            snapshot_stats.processes,
            snapshot_stats.threads,
            snapshot_stats.fds,
            snapshot_stats.permission_denied
        ));
    }
    degraded.extend(snapshot_denials_text(&snapshot_stats, start_caps));
    if !degraded.is_empty() {
        notice(&format!(
            "warning: {}{}",
            degraded.join("; "),
            if options.verbose {
                ""
            } else {
                " (-v for details)"
            }
        ));
    }

    let started = Instant::now();
    let write = options.write.is_some();
    let (raw_fallback, verbose) = (options.raw_fallback, options.verbose);
    let mut reapply = |source: &mut BpfSource, ruleset: &Ruleset| -> Result<Reapplied, StepError> {
        let interest = rules_interest(ruleset, notice);
        let unused = failed_unused(ruleset, &interest, write);
        let masks = vigil_engine::descriptor_result_masks(ruleset);
        let needles = failure_needles(ruleset, write);
        source.set_interest_and_failures(&interest, &unused, &masks, &needles)?;
        Ok(Reapplied {
            syscalls: source.attached_syscalls().len() + source.fallback_syscalls().len(),
            notes: coverage(source, raw_fallback, verbose, true),
        })
    };
    let drive = Drive {
        batch: 4096,
        until: duration.map(|d| started + d),
        drain: Some(|source: &mut BpfSource, out: &mut Vec<Event>| Ok(source.drain(out)?)),
        capture: capture.as_mut(),
        reapply: Some(&mut reapply),
    };
    let result = agent
        .drive(&mut engine, &mut source, &mut || configure(), drive)
        .map_err(|e| match e {
            AgentError::Source(_) | AgentError::Drain(_) => WatchError::Source(e),
            e => e.into(),
        });
    let source_stats = source.stats();
    // Alerts produced before an error are still delivered.
    let finished = agent.finish(&engine, &source_stats, false);
    result?;
    finished?;
    if let (Some(cap), Some(path)) = (capture, options.write.as_ref()) {
        cap.finish().map_err(|e| WatchError::Write {
            path: path.clone(),
            source: WriteError::Finish(e),
        })?;
    }
    if options.stats {
        let engine_stats = engine.stats();
        let mut dropped = serde_json::Map::new();
        for (reason, n) in &source_stats.dropped {
            dropped.insert(reason.to_string(), (*n).into());
        }
        let line = serde_json::json!({
            "events_in": engine_stats.processed + source_stats.dropped_total(),
            "processed": engine_stats.processed,
            "dropped": source_stats.dropped_total(),
            "dropped_by_reason": dropped,
            "alerts": engine_stats.alerts,
            "read_faults": source.read_faults(),
            "filtered_failed": source_stats.filtered_failed,
            "folded_state": source_stats.folded_state,
            "wakeups": wakeups_json(&source),
            "seconds": started.elapsed().as_secs_f64(),
        });
        return Ok(Some(line));
    }
    Ok(None)
}

/// The `--stats` line's `wakeups`: what the kernel woke the reader for, by reason (`deferred`:
/// records that left their wakeup to the timer, `timer`: its wakeups), and what ended the
/// reader's waits (bpf/README.md, *Wakeups*).
fn wakeups_json(source: &BpfSource) -> serde_json::Value {
    let kernel = source.wakeups();
    let waits = source.reader_waits();
    serde_json::json!({
        "watched": kernel.watched,
        "filled": kernel.filled,
        "deferred": kernel.deferred,
        "timer": kernel.timer,
        "waits_ended_by_rings": waits.rings,
        "waits_ended_by_waker": waits.caller,
        "waits_timed_out": waits.timeout,
    })
}

/// The start-up warning when reads of other processes' `/proc` entries (`exe`, `cwd`,
/// `environ`, `fd`) were refused while the start snapshot was read (`stats`; the effective
/// capabilities `cap_eff` at the time): the processes already running keep those fields
/// unknown. The kernel allows them for another user's process, or one holding capabilities
/// this one lacks, only with `CAP_SYS_PTRACE` (`ptrace_may_access`) and, for the 0500 `fd`
/// directories, `CAP_DAC_READ_SEARCH`; with both, something else refused (a security module:
/// AppArmor's container profiles let a process read only processes of the same profile; or
/// a process this kernel protects even from them, as PID 1 of this project's VMs).
fn snapshot_denials_text(stats: &vigil_state::SnapshotStats, cap_eff: u64) -> Option<String> {
    const CAP_DAC_READ_SEARCH: u32 = 2;
    const CAP_SYS_PTRACE: u32 = 19;
    if stats.permission_denied == 0 {
        return None;
    }
    let missing: Vec<&str> = [
        (CAP_SYS_PTRACE, "CAP_SYS_PTRACE"),
        (CAP_DAC_READ_SEARCH, "CAP_DAC_READ_SEARCH"),
    ]
    .iter()
    .filter(|(bit, _)| cap_eff & (1 << bit) == 0)
    .map(|(_, name)| *name)
    .collect();
    let why = if missing.is_empty() {
        "although CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH are effective: a security module? \
         AppArmor's container profiles allow reading processes of the same profile only"
            .to_owned()
    } else {
        format!("the agent lacks {}", missing.join(" and "))
    };
    Some(format!(
        "the /proc entries of {} of the {} processes running at start could not all be read \
         ({} reads refused; {why}): their executable, directory, environment or descriptors \
         stay unknown",
        stats.denied_processes,
        stats.processes + stats.vanished_processes,
        stats.permission_denied
    ))
}

/// The watched syscalls that cannot be captured on this kernel, and why.
fn unsupported_text(source: &BpfSource, raw_fallback: bool) -> String {
    format!(
        "not captured, no tracepoint on this kernel (not implemented here, calls fail with \
         ENOSYS{}): {}",
        if raw_fallback {
            ""
        } else {
            "; --raw-fallback captures them at a cost on every syscall"
        },
        source.unsupported().join(", ")
    )
}

/// With `verbose`, names the watched syscalls captured through `raw_syscalls` and those whose
/// failed calls are filtered out in the kernel (a cost and a saving, nothing the rules miss);
/// with `unsupported`, warns of those that cannot be captured on this kernel. Lines for
/// stderr, without the `vigil: ` prefix.
fn coverage(
    source: &BpfSource,
    raw_fallback: bool,
    verbose: bool,
    unsupported: bool,
) -> Vec<String> {
    let mut lines = Vec::new();
    if verbose && !source.filtered_failures().is_empty() {
        lines.push(format!(
            "failed calls filtered out in the kernel (no rule and no state update can use \
             them; counted as filtered_failed): {}",
            source.filtered_failures().join(", ")
        ));
    }
    if verbose && !source.fallback_syscalls().is_empty() {
        lines.push(format!(
            "no tracepoint of their own on this kernel, captured through raw_syscalls (every \
             syscall pays a short filter while they are watched): {}",
            source.fallback_syscalls().join(", ")
        ));
    }
    if unsupported && !source.unsupported().is_empty() {
        lines.push(format!(
            "warning: {}",
            unsupported_text(source, raw_fallback)
        ));
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_engine::RulesText;

    fn ruleset(name: &str, text: String) -> Ruleset {
        let result = vigil_engine::load_rules(
            &[RulesText {
                name: name.to_owned(),
                text,
            }],
            &vigil_rules::LoadOptions::default(),
        );
        result
            .ruleset
            .unwrap_or_else(|| panic!("{name}: rules do not load: {:?}", result.diagnostics))
    }

    fn rule(condition: &str) -> Ruleset {
        ruleset(
            "test.yaml",
            format!(
                "- rule: r\n  desc: d\n  condition: {condition}\n  output: o %proc.name\n  \
                 priority: WARNING\n"
            ),
        )
    }

    #[test]
    fn snapshot_denials_name_the_missing_capabilities() {
        let stats = vigil_state::SnapshotStats {
            processes: 40,
            vanished_processes: 2,
            permission_denied: 7,
            denied_processes: 3,
            ..Default::default()
        };
        let none = vigil_state::SnapshotStats {
            permission_denied: 0,
            ..stats.clone()
        };
        assert_eq!(snapshot_denials_text(&none, 0), None);
        let both = (1 << 2) | (1 << 19);
        let text = snapshot_denials_text(&stats, both & !(1 << 19)).expect("a warning");
        assert!(
            text.starts_with("the /proc entries of 3 of the 42 processes")
                && text.contains("(7 reads refused; the agent lacks CAP_SYS_PTRACE)"),
            "{text}"
        );
        let text = snapshot_denials_text(&stats, 0).expect("a warning");
        assert!(
            text.contains("lacks CAP_SYS_PTRACE and CAP_DAC_READ_SEARCH"),
            "{text}"
        );
        let text = snapshot_denials_text(&stats, both).expect("a warning");
        assert!(text.contains("a security module?"), "{text}");
    }

    fn quiet(_: &str) {}

    fn names(set: &InterestSet) -> Vec<&'static str> {
        set.iter().map(|t| t.name()).collect()
    }

    fn unused_for(condition: &str) -> Vec<&'static str> {
        let rs = rule(condition);
        names(&failed_unused(&rs, &rules_interest(&rs, quiet), false))
    }

    #[test]
    fn failures_are_unused_only_where_no_rule_may_match_one() {
        // The state needs every open, close, setuid… whatever the rules watch; with no rule
        // on them, their failures are of no use to the rules.
        let unused = unused_for("evt.type = kill and proc.name = x");
        for name in ["openat", "close", "setuid", "connect"] {
            assert!(unused.contains(&name), "{name} in {unused:?}");
        }
        assert!(
            !unused.contains(&"kill"),
            "no result test: failures may match"
        );
        assert!(!unused.contains(&"procexit"), "not a syscall: {unused:?}");
        for condition in [
            "evt.type = openat and evt.res != SUCCESS",
            "evt.type = openat and evt.failed = true",
            "evt.type = openat and proc.name = x",
        ] {
            let unused = unused_for(condition);
            assert!(!unused.contains(&"openat"), "{condition}: {unused:?}");
        }
        for condition in [
            "evt.type = openat and evt.res = SUCCESS and proc.name = x",
            "evt.type = openat and evt.rawres >= 0",
        ] {
            let unused = unused_for(condition);
            assert!(unused.contains(&"openat"), "{condition}: {unused:?}");
        }
        // A capture records failures for a replay with other rules: nothing is filtered.
        let rs = rule("evt.type = openat and evt.rawres >= 0");
        assert!(failed_unused(&rs, &rules_interest(&rs, quiet), true).is_empty());
    }

    /// Falco's stable rules: `open_read`/`open_write` (`fd.num>=0`, the result of an open)
    /// exclude failures, but `Directory traversal monitored file read` also takes
    /// `open_file_failed`, so failed opens stay delivered, those with `../` in their path only
    /// (`failure_needles`); `spawned_process` has no result
    /// test (failed execs may match); the state's credential, session, descriptor-duplicating
    /// and clone calls are watched by no rule that may match a failure.
    #[test]
    #[allow(clippy::print_stderr)]
    fn falco_stable_rules_filter_the_failures_no_rule_matches() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../../shared/falco-rules/falco_rules.yaml"
        );
        let Ok(text) = std::fs::read_to_string(path) else {
            assert!(
                std::env::var("VIGIL_TEST_STRICT").as_deref() != Ok("1"),
                "VIGIL_TEST_STRICT=1 and {path} is missing"
            );
            eprintln!("skipping: {path} is missing");
            return;
        };
        let rs = ruleset("falco_rules.yaml", text);
        let unused = names(&failed_unused(&rs, &rules_interest(&rs, quiet), false));
        let openat = vigil_event::table::by_name("openat").expect("openat");
        let rule = |name: &str| {
            rs.rules()
                .iter()
                .find(|r| r.name == name)
                .unwrap_or_else(|| panic!("no rule {name}"))
        };
        for name in ["Read sensitive file untrusted", "Clear Log Activities"] {
            assert!(
                !rule(name).filter().may_match_failure(openat.0),
                "{name}: open_read/open_write exclude a failed open (fd.num>=0)"
            );
        }
        assert!(rule("Directory traversal monitored file read")
            .filter()
            .may_match_failure(openat.0));
        for name in [
            "open", "openat", "openat2", "execve", "execveat", "connect", "socket",
        ] {
            assert!(
                !unused.contains(&name),
                "{name}'s failures may match: {unused:?}"
            );
        }
        for name in [
            "setuid",
            "setresuid",
            "setgid",
            "capset",
            "dup2",
            "fcntl",
            "clone",
            "chdir",
            "accept4",
            "bind",
            "prctl",
            "unshare",
            "pipe2",
            "memfd_create",
        ] {
            assert!(
                unused.contains(&name),
                "{name}: no rule matches a failure: {unused:?}"
            );
        }
        // The redirect rule watches every dup but matches only results 0, 1, 2: the kernel
        // holds the others back (`BpfOptions::result_masks`).
        let masks: Vec<(&str, u64)> = vigil_engine::descriptor_result_masks(&rs)
            .into_iter()
            .map(|(t, m)| (t.name(), m))
            .collect();
        assert_eq!(masks, [("dup", 0b111), ("dup2", 0b111), ("dup3", 0b111)]);
        for name in ["dup", "dup3"] {
            assert!(unused.contains(&name), "{name}: {unused:?}");
        }
        // Only `Directory traversal monitored file read` may match a failed open, and it
        // requires `fd.nameraw contains '../'`: the kernel keeps only those failures.
        let needles: Vec<(&str, Vec<u8>)> = failure_needles(&rs, false)
            .into_iter()
            .map(|(t, n)| (t.name(), n))
            .collect();
        let dots = || b"../".to_vec();
        assert_eq!(
            needles,
            [("open", dots()), ("openat", dots()), ("openat2", dots())]
        );
        assert!(
            failure_needles(&rs, true).is_empty(),
            "a capture keeps them all"
        );
    }
}

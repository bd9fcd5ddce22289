//! `vigil watch`: host-wide capture with eBPF, evaluated live against the rules.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use clap::Args;
use vigil_capture::{InterestSet, Source};
use vigil_ebpf::{BpfOptions, BpfSource};
use vigil_engine::Engine;
use vigil_event::codec::{binary, jsonl, CaptureError};
use vigil_event::{Event, EventType, Snapshot};
use vigil_output::JsonOptions;
use vigil_rules::RuleMatching;

use crate::{load_selection, system_state_config, Matching, RulesSelection};

#[derive(Args)]
pub struct WatchArgs {
    #[command(flatten)]
    selection: RulesSelection,
    /// Print alerts as Falco JSON objects, one per line (or set `json_output`).
    #[arg(long)]
    json: bool,
    /// Report every matching rule per event, or only the first (default: the configuration's
    /// `rule_matching`).
    #[arg(long, value_enum)]
    rule_matching: Option<Matching>,
    /// Also record the start snapshot and every captured event into FILE (JSON lines if the
    /// name ends in `.jsonl`, else the binary form); `vigil replay FILE` gives the same alerts.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    write: Option<PathBuf>,
    /// Stop after SECS seconds (default: run until SIGINT or SIGTERM).
    #[arg(long, value_name = "SECS")]
    duration: Option<f64>,
    /// At exit, print the counters to stderr as one JSON line (events_in, processed, dropped
    /// by reason, alerts).
    #[arg(long)]
    stats: bool,
}

/// The capture being written, in either form.
enum CaptureOut {
    Binary(binary::Writer<BufWriter<File>>),
    Jsonl(jsonl::Writer<BufWriter<File>>),
}

impl CaptureOut {
    fn create(path: &Path, snapshot: &Snapshot) -> Result<CaptureOut> {
        let file =
            File::create(path).with_context(|| format!("cannot create `{}`", path.display()))?;
        let out = BufWriter::new(file);
        let mut writer = if path.extension().is_some_and(|e| e == "jsonl") {
            CaptureOut::Jsonl(jsonl::Writer::new(out))
        } else {
            CaptureOut::Binary(binary::Writer::new(out))
        };
        writer
            .snapshot(snapshot)
            .with_context(|| format!("cannot write `{}`", path.display()))?;
        Ok(writer)
    }

    fn snapshot(&mut self, snapshot: &Snapshot) -> Result<(), CaptureError> {
        match self {
            CaptureOut::Binary(w) => w.write_snapshot(snapshot),
            CaptureOut::Jsonl(w) => w.write_snapshot(snapshot),
        }
    }

    fn event(&mut self, event: &Event) -> Result<(), CaptureError> {
        match self {
            CaptureOut::Binary(w) => w.write_event(event),
            CaptureOut::Jsonl(w) => w.write_event(event),
        }
    }

    fn finish(self) -> Result<()> {
        let out = match self {
            CaptureOut::Binary(w) => w.finish()?,
            CaptureOut::Jsonl(w) => w.finish()?,
        };
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(())
    }
}

pub fn watch(args: WatchArgs) -> Result<ExitCode> {
    let config = args.selection.config.load()?;
    let mut ruleset = load_selection(&args.selection, &config)?;
    ruleset.set_rule_matching(match args.rule_matching {
        Some(Matching::First) => RuleMatching::First,
        Some(Matching::All) => RuleMatching::All,
        None => config.rule_matching,
    });
    let json = args.json || config.json_output;
    let types = ruleset.event_types();
    let interest: InterestSet = if types.is_all() {
        eprintln!(
            "vigil: warning: a rule without an event type watches every syscall; capture will be costly"
        );
        InterestSet::all()
    } else {
        types.ids().map(EventType).collect()
    };
    vigil_ebpf::check_support()?;
    let duration = match args.duration {
        Some(secs) if secs.is_finite() && secs >= 0.0 => Some(Duration::from_secs_f64(secs)),
        Some(secs) => {
            return Err(crate::InvalidInput(format!("invalid --duration `{secs}`")).into());
        }
        None => None,
    };

    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("cannot install the signal handlers")?;
    }

    let mut source = BpfSource::open(BpfOptions {
        interest,
        ..BpfOptions::default()
    })
    .context("cannot start eBPF capture")?;
    let snapshot = source
        .snapshot()
        .context("cannot read the start snapshot")?;
    let mut capture = match &args.write {
        Some(path) => Some(CaptureOut::create(path, &snapshot)?),
        None => None,
    };
    let hostname = String::from_utf8_lossy(&snapshot.hostname).into_owned();
    // Live: container names and images come from the runtimes' state on this host.
    let mut state_config = system_state_config(&hostname);
    state_config.container_runtime = Some(vigil_state::RuntimeDirs::system());
    let mut engine = Engine::new(ruleset, state_config, hostname);
    engine.load_snapshot(&snapshot);
    if !source.fallback_syscalls().is_empty() {
        eprintln!(
            "vigil: no tracepoint of their own on this kernel, captured through raw_syscalls \
             (every syscall pays a short filter while they are watched): {}",
            source.fallback_syscalls().join(", ")
        );
    }
    if !source.unsupported().is_empty() {
        eprintln!(
            "vigil: warning: cannot be captured on this kernel (no tracepoint): {}",
            source.unsupported().join(", ")
        );
    }
    eprintln!(
        "vigil: watching {} syscalls on this host ({} processes in the start snapshot)",
        source.attached_syscalls().len() + source.fallback_syscalls().len(),
        source.snapshot_stats().processes
    );

    let stdout = io::stdout();
    let mut out = BufWriter::new(stdout.lock());
    let json_options = JsonOptions {
        include_output: config.json_include_output_property,
        include_tags: config.json_include_tags_property,
        include_output_fields: config.json_include_output_fields_property,
    };
    let started = Instant::now();
    let mut batch: Vec<Event> = Vec::with_capacity(4096);
    let mut write_error: Option<io::Error> = None;
    let mut draining = false;
    loop {
        batch.clear();
        if stop.load(Ordering::Relaxed) || duration.is_some_and(|d| started.elapsed() >= d) {
            // The end: whatever the kernel committed or the reordering holds back is
            // processed too, so the last events before the signal are not lost.
            if draining {
                break;
            }
            draining = true;
            source.drain(&mut batch).context("eBPF capture failed")?;
        } else {
            source
                .next_batch(&mut batch, 4096)
                .context("eBPF capture failed")?;
        }
        for event in &batch {
            if let Some(cap) = capture.as_mut() {
                cap.event(event).context("cannot write the capture")?;
            }
            engine.process(event, &mut |alert| {
                if write_error.is_some() {
                    return;
                }
                let line = if json {
                    alert.json_line(&json_options)
                } else {
                    alert.text_line()
                };
                if let Err(e) = writeln!(out, "{line}") {
                    write_error = Some(e);
                }
            });
        }
        if !batch.is_empty() && write_error.is_none() {
            if let Err(e) = out.flush() {
                write_error = Some(e);
            }
        }
        if let Some(e) = write_error.take() {
            if e.kind() == io::ErrorKind::BrokenPipe {
                break;
            }
            return Err(e).context("cannot write alerts");
        }
    }
    let _ = out.flush();
    if let (Some(cap), Some(path)) = (capture, &args.write) {
        cap.finish()
            .with_context(|| format!("cannot write `{}`", path.display()))?;
    }
    if args.stats {
        let source_stats = source.stats();
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
            "seconds": started.elapsed().as_secs_f64(),
        });
        eprintln!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

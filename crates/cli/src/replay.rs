//! `vigil replay FILE`: a recorded capture through the rules and the configured outputs, as
//! a live agent would deliver its alerts; `--follow` keeps reading the capture as it grows
//! ([`vigil_capture::FollowSource`]) with the live agent's web server, reloads and signals.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use vigil_agent::{Agent, AgentFlags};
use vigil_capture::{FollowSource, ReplaySource, Source};
use vigil_engine::Engine;
use vigil_output::sinks::Console;

use crate::live::{host_name, init_logging, notice};
use crate::selection::{configure, system_state_config, Matching, RulesSelection};

#[derive(Args)]
pub struct ReplayArgs {
    /// The capture file.
    file: PathBuf,
    #[command(flatten)]
    selection: RulesSelection,
    /// Print alerts as Falco JSON objects, one per line (or set `json_output`).
    #[arg(long)]
    json: bool,
    /// Report every matching rule per event, or only the first (default: the configuration's
    /// `rule_matching`).
    #[arg(long, value_enum)]
    rule_matching: Option<Matching>,
    /// Print the run's counters to stderr at the end.
    #[arg(long)]
    stats: bool,
    /// Write Falco-style statistics to FILE: one JSON line per interval (`cur`, `delta`,
    /// `drop_pct`) and one at the end.
    #[arg(short = 's', long = "stats-file", value_name = "FILE")]
    stats_file: Option<PathBuf>,
    /// Interval of the stats file lines, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 5000)]
    stats_interval: u64,
    /// Keep reading the (JSON lines) capture as it grows until SIGTERM/SIGINT, like a live
    /// agent: web server, SIGHUP reload, SIGUSR1 reopen. For tests and demos.
    #[arg(long, hide = true)]
    follow: bool,
}

impl ReplayArgs {
    /// Falco's `-e FILE` with its `-s`/`--stats-interval`.
    pub fn falco(
        file: PathBuf,
        selection: RulesSelection,
        stats_file: Option<PathBuf>,
        stats_interval: u64,
    ) -> ReplayArgs {
        ReplayArgs {
            file,
            selection,
            json: false,
            rule_matching: None,
            stats: false,
            stats_file,
            stats_interval,
            follow: false,
        }
    }
}

/// Evaluates the capture and delivers alerts through the configured outputs.
pub fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let reconfigure = || configure(&args.selection, args.rule_matching, args.json);
    let (config, ruleset) = reconfigure()?;
    let hostname = host_name();
    let mut engine = Engine::new(ruleset, system_state_config(&hostname), hostname.clone());
    let path = &args.file;
    let stats_file = args
        .stats_file
        .as_deref()
        .map(|p| (p, Duration::from_millis(args.stats_interval.max(1))));
    init_logging();
    let mut agent = Agent::start(
        config,
        &hostname,
        &AgentFlags {
            stats_file,
            live: args.follow,
            signals: args.follow,
            console: Console::Stdout,
            engine: "savefile",
            // Not a live capture: a replay runs as it was started.
            privileges: None,
            notice,
        },
        &mut engine,
    )?;
    let mut source: Box<dyn Source> = if args.follow {
        agent.watch_files(args.selection.watch_sources());
        Box::new(FollowSource::open(path, agent.stop_flag())?)
    } else {
        Box::new(
            ReplaySource::open(path)
                .with_context(|| format!("cannot replay `{}`", path.display()))?,
        )
    };
    let cannot = || format!("cannot replay `{}`", path.display());
    let result = (|| -> Result<()> {
        let snapshot = source.snapshot().with_context(cannot)?;
        engine.load_snapshot(&snapshot);
        let mut reload = || reconfigure().map_err(Into::into);
        agent
            .drive(&mut engine, source.as_mut(), &mut reload)
            .with_context(cannot)?;
        Ok(())
    })();
    let source_stats = source.stats();
    // Alerts produced before an error are still delivered.
    let finished = agent.finish(&engine, &source_stats, args.follow);
    result?;
    finished?;
    if args.stats {
        let stats = engine.stats();
        eprintln!(
            "events_in={} processed={} dropped={} alerts={}",
            stats.processed + source_stats.dropped_total(),
            stats.processed,
            source_stats.dropped_total(),
            stats.alerts
        );
    }
    Ok(ExitCode::SUCCESS)
}

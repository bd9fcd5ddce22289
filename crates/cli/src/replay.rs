//! `vigil replay FILE`: a recorded capture through the rules and the configured outputs, as
//! a live agent would deliver its alerts; `--follow` keeps reading the capture as it grows
//! ([`vigil_capture::FollowSource`]) with the live agent's web server, reloads and signals.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::Args;
use vigil_agent::{Agent, Drive};
use vigil_capture::{FollowSource, ReplaySource, Source};
use vigil_engine::Engine;

use crate::flags::LiveArgs;
use crate::live::{agent_flags, host_name, init_logging, notice};
use crate::selection::{configure, RulesSelection};

#[derive(Args)]
pub struct ReplayArgs {
    /// The capture file.
    file: PathBuf,
    #[command(flatten)]
    selection: RulesSelection,
    #[command(flatten)]
    live: LiveArgs,
    /// Keep reading the (JSON lines) capture as it grows until SIGTERM/SIGINT, like a live
    /// agent: web server, SIGHUP reload, SIGUSR1 reopen. For tests and demos.
    #[arg(long, hide = true)]
    follow: bool,
}

impl ReplayArgs {
    /// Falco's `-e FILE` with its `-s`/`--stats-interval`.
    pub fn falco(file: PathBuf, selection: RulesSelection, live: LiveArgs) -> ReplayArgs {
        ReplayArgs {
            file,
            selection,
            live,
            follow: false,
        }
    }
}

/// Evaluates the capture and delivers alerts through the configured outputs.
pub fn replay(args: ReplayArgs) -> Result<ExitCode> {
    let reconfigure = || configure(&args.selection, args.live.rule_matching, args.live.json);
    let (config, ruleset) = reconfigure()?;
    let hostname = host_name();
    let mut engine = Engine::new(
        ruleset,
        vigil_agent::system_state_config(&hostname, notice),
        hostname.clone(),
    );
    let path = &args.file;
    init_logging();
    // Not a live capture: a replay runs as it was started (no privilege drop).
    let flags = agent_flags(&args.live.stats_file, "savefile", args.follow);
    let mut agent = Agent::start(config, &hostname, &flags, &mut engine)?;
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
            .drive(&mut engine, source.as_mut(), &mut reload, Drive::default())
            .with_context(cannot)?;
        Ok(())
    })();
    let source_stats = source.stats();
    // Alerts produced before an error are still delivered.
    let finished = agent.finish(&engine, &source_stats, args.follow);
    result?;
    finished?;
    if args.live.stats {
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

//! `vigil bench …` and `vigil generate bench`: flags of the benchmark suite (`vigil-bench`),
//! progress on stderr, the report directory on stdout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, Subcommand};
use vigil_bench::agent::{split_words, AgentLaunch, AgentSpec};
use vigil_bench::capacity::CapacityOptions;
use vigil_bench::execrate::ExecRateOptions;
use vigil_bench::falco::FalcoInstall;
use vigil_bench::genbench::{AlertSource, FileTail, GenBenchOptions, HttpReceiver, RuleSet};
use vigil_bench::overhead::{OverheadOptions, Variant, WorkerLaunch};
use vigil_bench::report::default_out_dir;
use vigil_bench::stats::Step;
use vigil_bench::workload::{self, ExeclChain, Test, WorkerParams};

use crate::error::InvalidInput;
use crate::flags::duration;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// UnixBench-style suite with the agent off and on, interleaved: scores, indices, % change.
    #[command(
        after_help = "Examples:\n  vigil bench overhead --agent watch --iterations 5 --pin 1\n  \
        vigil bench overhead --pin 1 --agent run --agent run:/etc/falco/falco_rules.yaml \
        --wrap 'strace -f --seccomp-bpf -o /dev/null'\n  \
        vigil bench overhead --agent falco --agent watch --agent run -r falco_rules.yaml \
        --tests syscall,pipe,redis,nginx --agent-per-test --canary 5\n  \
        vigil bench overhead --agent 'auditd -f' --agent-warmup 5s"
    )]
    Overhead(OverheadArgs),
    /// Exec /bin/true at fixed rates; CPU of named processes and extra CPU of the workload.
    #[command(
        after_help = "Example:\n  vigil bench exec-rate --rates 100,400,1600 --watch-proc vigil --watch-proc auditd"
    )]
    ExecRate(ExecRateArgs),
    /// An agent's CPU and wakeups per second on an idle host, per thread, from /proc.
    #[command(
        after_help = "Examples:\n  vigil bench idle --duration 60s\n          vigil bench idle --agent watch --agent '/tmp/vigil-main watch' --ready-line 'vigil: watching' --rounds 2"
    )]
    Idle(IdleArgs),
    /// Time from a syscall to its alert on the agent's stdout, at fixed event rates.
    #[command(
        after_help = "Examples:\n  vigil bench latency --rates 10,100,1000 --duration 10s\n          vigil bench latency --watch-args '-r /etc/falco/falco_rules.yaml' --agent watch \
        --agent '/tmp/vigil-main watch -r $VIGIL_BENCH_TRIGGER_RULES' --ready-line 'vigil: watching'"
    )]
    Latency(LatencyArgs),
    /// Ramp a watched-syscall load until the agent drops events, per CPU budget.
    #[command(
        after_help = "Examples:\n  vigil bench capacity --cpus 0.5,1,2 --start 100000 --step x1.5 --duration 60\n  \
        vigil bench capacity --agent falco --agent watch -r falco_rules.yaml --canary 5"
    )]
    Capacity(CapacityArgs),
    /// Draw a published run's SVG plots again from its report.json.
    #[command(
        after_help = "Example:\n  vigil bench report --svg target/bench/plots docs/bench/capacity-60s-default"
    )]
    Report(ReportArgs),
    /// Run one workload (used by the benches; wrap it with `vigil run --` or `strace`).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

#[derive(Args)]
pub struct ReportArgs {
    /// A run's `report.json`, or the directory holding it.
    #[arg(value_name = "REPORT")]
    report: PathBuf,
    /// Directory to draw the plots into (created if needed).
    #[arg(long, value_name = "DIR")]
    svg: PathBuf,
}

/// How background agents are started and recognised as ready.
#[derive(Args, Clone)]
pub struct AgentArgs {
    /// Command replacing `vigil watch` (e.g. a release build: `target/release/vigil watch`).
    #[arg(long, value_name = "CMD")]
    watch_cmd: Option<String>,
    /// Extra arguments for `vigil watch` (after `--stats`), e.g. `-r rules.yaml --json`.
    #[arg(long, value_name = "ARGS", allow_hyphen_values = true)]
    watch_args: Option<String>,
    /// Rules for every agent that takes rules — run, watch, falco — unless its own arguments
    /// name some (repeatable; default: each agent's own default rules).
    #[arg(short = 'r', long = "rules", value_name = "PATH")]
    rules: Vec<PathBuf>,
    /// The Falco install of `--agent falco`: a prefix holding bin/falco and
    /// etc/falco/falco.yaml, or the binary (default: $VIGIL_BENCH_FALCO, else
    /// target/peers/falco). Built by the user: docs/bench/README.md, "Falco".
    #[arg(long, value_name = "PATH")]
    falco: Option<PathBuf>,
    /// A fact for the report's header, `NAME=VALUE` (repeatable), e.g. `--note 'machine=busy'`.
    #[arg(long, value_name = "NAME=VALUE")]
    note: Vec<String>,
    /// For a command agent: text on its stdout/stderr meaning it is ready.
    #[arg(long, value_name = "TEXT")]
    ready_line: Option<String>,
    /// For a command agent without --ready-line: seconds to wait after starting it.
    #[arg(long, value_name = "DURATION", default_value = "3s", value_parser = duration)]
    agent_warmup: Duration,
    /// Pin a background agent with `taskset -c CPUS` (capacity uses --cpus instead).
    #[arg(long, value_name = "CPUS")]
    agent_pin: Option<String>,
    /// How long to wait for a readiness line.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = duration)]
    ready_timeout: Duration,
}

#[derive(Args)]
pub struct OverheadArgs {
    /// Agent for an "on" configuration: watch, watch:ARGS (extra `vigil watch` arguments,
    /// e.g. `watch:--bpf-floor nop` for the floor of the attach points, `watch:--bpf-floor
    /// ring`, `watch:--syscall-hook tracepoint`, `watch:-r RULES`), run (rules from -r),
    /// run:FILE[,FILE] (its own rules), none, or any command started in the background
    /// (repeatable: one configuration each; default: watch unless --wrap is given).
    #[arg(long, value_name = "watch|watch:ARGS|run|run:RULES|none|CMD")]
    agent: Vec<String>,
    /// A prefix for every workload, e.g. 'strace -f --seccomp-bpf -o /dev/null' (repeatable:
    /// one configuration each).
    #[arg(long, value_name = "PREFIX", allow_hyphen_values = true)]
    wrap: Vec<String>,
    /// Off/on rounds.
    #[arg(long, default_value_t = 3)]
    iterations: usize,
    /// Duration of each test run.
    #[arg(long, default_value = "5s", value_parser = duration)]
    duration: Duration,
    /// Pin each workload (with its wrapper or tracer) with `taskset -c CPUS` (e.g. 1 or 0-1).
    #[arg(long, value_name = "CPUS")]
    pin: Option<String>,
    /// With --pin: run every configuration pinned, then again unpinned, in this one
    /// invocation (reports in OUT/pinned and OUT/unpinned).
    #[arg(long)]
    also_unpinned: bool,
    /// Keep CPUS awake in every configuration (agent off included) with `SCHED_IDLE`
    /// spinners, so that an agent keeping a vCPU awake does not raise ping-pong scores
    /// (context1, pipe) on a VM. E.g. `--busy 0 --pin 1 --agent-pin 0`.
    #[arg(long, value_name = "CPUS")]
    busy: Option<String>,
    /// Comma-separated tests (default all): syscall,getpid,openclose,pipe,context1,spawn,
    /// execl,fsbuffer,fstime,fsdisk,shell1.
    #[arg(long, default_value = "all")]
    tests: String,
    /// Start a background agent for each test (and stop it after), not for each iteration's
    /// block of tests: its CPU, RSS, drops and alerts are then the test's own.
    #[arg(long)]
    agent_per_test: bool,
    /// After each background agent run, open /etc/shadow N times from a process tagged in its
    /// command line and count the agent's alerts naming the tag (alerts expected vs
    /// received). Needs a loaded rule that fires on it: Falco's `Read sensitive file untrusted`.
    #[arg(long, value_name = "N", default_value_t = 0)]
    canary: u64,
    /// Report directory (default target/bench/overhead-<timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    agent_args: AgentArgs,
}

#[derive(Args)]
pub struct ExecRateArgs {
    /// Exec rates per second.
    #[arg(long, default_value = "100,200,400,800,1600", value_delimiter = ',')]
    rates: Vec<f64>,
    /// Duration of each phase (agent off, agent on) at each rate.
    #[arg(long, default_value = "10s", value_parser = duration)]
    duration: Duration,
    /// Process names (comm) whose CPU is sampled (repeatable).
    #[arg(long = "watch-proc", value_name = "NAME", num_args = 1..,
          default_values = ["vigil", "auditd", "kauditd", "laurel", "falco"])]
    watch_proc: Vec<String>,
    /// The agent of the "on" phase: watch, run, run:FILE[,FILE], none, or a command.
    /// Repeatable: each agent runs every rate, one agent after the other in the order given
    /// (reports in OUT/1-…, OUT/2-…); put auditd last (it leaves the kernel's audit on).
    #[arg(
        long,
        default_value = "watch",
        value_name = "watch|run|run:RULES|none|CMD"
    )]
    agent: Vec<String>,
    /// A prefix for the workload in the "on" phase.
    #[arg(long, value_name = "PREFIX", allow_hyphen_values = true)]
    wrap: Option<String>,
    /// The program executed.
    #[arg(long, default_value = "/bin/true")]
    program: PathBuf,
    /// Pin the workload with `taskset -c CPUS`.
    #[arg(long, value_name = "CPUS")]
    pin: Option<String>,
    /// Report directory (default target/bench/exec-rate-<timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    agent_args: AgentArgs,
}

#[derive(Args)]
pub struct IdleArgs {
    /// An agent to measure: watch, watch:ARGS, or a command started in the background
    /// (repeatable: interleaved in each round; default: watch).
    #[arg(long, value_name = "watch|watch:ARGS|CMD")]
    agent: Vec<String>,
    /// The measured window.
    #[arg(long, default_value = "60s", value_parser = duration)]
    duration: Duration,
    /// How long each agent runs before the window opens.
    #[arg(long, default_value = "5s", value_parser = duration)]
    settle: Duration,
    /// Rounds over every agent.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Report directory (default target/bench/idle-<timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    agent_args: AgentArgs,
}

#[derive(Args)]
pub struct LatencyArgs {
    /// An agent to measure: watch, watch:ARGS, or a command whose rules include
    /// `$VIGIL_BENCH_TRIGGER_RULES` (repeatable: one after the other; default: watch).
    #[arg(long, value_name = "watch|watch:ARGS|CMD")]
    agent: Vec<String>,
    /// Alert-worthy events per second.
    #[arg(long, default_value = "10,100,1000", value_delimiter = ',')]
    rates: Vec<f64>,
    /// How long each rate lasts.
    #[arg(long, default_value = "10s", value_parser = duration)]
    duration: Duration,
    /// How long the agent runs before the first rate.
    #[arg(long, default_value = "2s", value_parser = duration)]
    settle: Duration,
    /// Report directory (default target/bench/latency-<timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    agent_args: AgentArgs,
}

#[derive(Args)]
pub struct CapacityArgs {
    /// CPU budgets for the agent: whole CPUs by taskset, fractions by a cgroup CPU quota.
    #[arg(long, default_value = "0.5,1,2", value_delimiter = ',')]
    cpus: Vec<f64>,
    /// First rate (watched syscalls per second, all load workers together).
    #[arg(long, default_value_t = 50_000.0)]
    start: f64,
    /// Growth per step: `x1.5` multiplies, a number adds.
    #[arg(long, default_value = "x1.5")]
    step: String,
    /// Highest rate tried.
    #[arg(long, default_value_t = 4_000_000.0)]
    max_rate: f64,
    /// Most steps per budget.
    #[arg(long, default_value_t = 20)]
    max_steps: usize,
    /// Duration of each step.
    #[arg(long, default_value = "10s", value_parser = duration)]
    duration: Duration,
    /// Load worker processes (default: the number of CPUs).
    #[arg(long)]
    load_workers: Option<usize>,
    /// The agent: watch or watch:ARGS (drop counters from --stats), falco or falco:ARGS (its
    /// driver counters), none, or a command (repeatable: the agents take each step in turn).
    #[arg(long, default_value = "watch", value_name = "watch|falco|none|CMD")]
    agent: Vec<String>,
    /// In the middle of each step's load, open /etc/shadow N times from a tagged process and
    /// count the agent's alerts naming the tag (see `overhead --canary`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    canary: u64,
    /// The file the load opens (default: a temporary file).
    #[arg(long)]
    path: Option<PathBuf>,
    /// Report directory (default target/bench/capacity-<timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    #[command(flatten)]
    agent_args: AgentArgs,
}

#[derive(Args)]
pub struct WorkerArgs {
    /// A test name, `context1-peer`, `exec-rate`, `open-load` or `canary`.
    name: String,
    #[arg(long, default_value = "5", value_parser = duration)]
    duration: Duration,
    /// Write the result JSON here instead of stdout.
    #[arg(long)]
    result: Option<PathBuf>,
    /// Scratch directory.
    #[arg(long)]
    dir: Option<PathBuf>,
    #[arg(long, default_value_t = 100.0)]
    rate: f64,
    #[arg(long)]
    path: Option<PathBuf>,
    #[arg(long, default_value = "/bin/true")]
    program: PathBuf,
    /// execl chain state (START_NS:COUNT).
    #[arg(long)]
    chain: Option<String>,
    /// canary: how many opens of --path.
    #[arg(long, default_value_t = 1)]
    count: u64,
    /// canary: a tag for the command line (the agents' alerts carry it).
    #[arg(long)]
    tag: Option<String>,
}

#[derive(Args)]
pub struct GenerateBenchArgs {
    /// Actions whose name matches this regular expression.
    regex: String,
    /// Halve the sleep after each clean round.
    #[arg(long = "loop")]
    looping: bool,
    /// Duration of a round (and of the rest after it).
    #[arg(long, default_value = "5s", value_parser = duration)]
    round_duration: Duration,
    /// Initial sleep before each action.
    #[arg(long, default_value = "100ms", value_parser = duration)]
    sleep: Duration,
    /// Number of rounds.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// A process to monitor (CPU, RSS), e.g. the agent.
    #[arg(long)]
    pid: Option<i32>,
    /// Receive Falco-format JSON alerts as HTTP POSTs here (default 127.0.0.1:2801 unless
    /// --alerts-file is given).
    #[arg(long, value_name = "ADDR")]
    listen: Option<String>,
    /// Count alerts from JSON lines appended to this file (`vigil watch --json > FILE`).
    #[arg(long, value_name = "FILE", conflicts_with = "listen")]
    alerts_file: Option<PathBuf>,
    /// Which rule list of each action counts: default (Vigil's rules) or stable (Falco's).
    #[arg(long, default_value = "default", value_parser = ["default", "stable"])]
    rules_set: String,
    /// Command replacing `vigil generate` (`list --json` / `run --exact NAME` are appended).
    #[arg(long, value_name = "CMD")]
    generator_cmd: Option<String>,
    /// Report directory (default target/bench/generate-bench-<timestamp>).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
}

fn exe() -> Result<PathBuf> {
    std::env::current_exe().context("cannot find the vigil binary")
}

fn scratch() -> PathBuf {
    std::env::temp_dir().join(format!("vigil-bench-{}", std::process::id()))
}

fn progress(line: &str) {
    eprintln!("{line}");
}

impl AgentArgs {
    /// The Falco install, when some agent is `falco` (invalid input when it is missing).
    fn falco_install(&self, agents: &[AgentSpec]) -> Result<Option<FalcoInstall>> {
        if !agents.iter().any(AgentSpec::is_falco) {
            return Ok(None);
        }
        let path = self
            .falco
            .clone()
            .or_else(|| std::env::var_os("VIGIL_BENCH_FALCO").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(vigil_bench::falco::DEFAULT_INSTALL));
        FalcoInstall::locate(&path)
            .map(Some)
            .map_err(|e| InvalidInput(e.to_string()).into())
    }

    /// The report header's facts: the agents' versions, then `--note`s.
    fn notes(
        &self,
        exe: &Path,
        agents: &[AgentSpec],
        falco: Option<&FalcoInstall>,
    ) -> Result<Vec<(String, String)>> {
        let mut notes = Vec::new();
        if agents
            .iter()
            .any(|a| a.is_watch() || matches!(a, AgentSpec::Run { .. }))
        {
            let binary = match &self.watch_cmd {
                Some(cmd) => format!("`{cmd}` for watch, `{}` for run", exe.display()),
                None => format!("`{}`", exe.display()),
            };
            notes.push((
                "vigil".to_string(),
                format!("vigil {} ({binary})", env!("CARGO_PKG_VERSION")),
            ));
        }
        if let Some(install) = falco {
            notes.push((
                "falco".to_string(),
                format!(
                    "{} (`{}`, configuration `{}`)",
                    install
                        .version()
                        .unwrap_or_else(|| "version unknown".into()),
                    install.bin.display(),
                    install.config.display()
                ),
            ));
        }
        if !self.rules.is_empty() {
            notes.push((
                "rules".to_string(),
                self.rules
                    .iter()
                    .map(|r| format!("`{}`", r.display()))
                    .collect::<Vec<_>>()
                    .join(", "),
            ));
        }
        for n in &self.note {
            let (k, v) = n
                .split_once('=')
                .ok_or_else(|| InvalidInput(format!("--note `{n}` is not NAME=VALUE")))?;
            notes.push((k.trim().to_string(), v.trim().to_string()));
        }
        Ok(notes)
    }

    fn launch(&self, exe: &Path, out: &Path, falco: Option<FalcoInstall>) -> AgentLaunch {
        AgentLaunch {
            exe: exe.to_path_buf(),
            watch_cmd: self.watch_cmd.as_deref().map(split_words),
            watch_args: self
                .watch_args
                .as_deref()
                .map(split_words)
                .unwrap_or_default(),
            ready_line: self.ready_line.clone(),
            warmup: self.agent_warmup,
            ready_timeout: self.ready_timeout,
            pin: self.agent_pin.clone(),
            log_dir: out.join("agent-logs"),
            falco,
        }
    }
}

/// Prints the report path; exits 1 when some runs failed (the report lists them).
fn finish(out: &Path, failures: usize) -> Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{}", out.join("report.md").display())?;
    stdout.flush()?;
    if failures > 0 {
        eprintln!("vigil: {failures} run(s) failed; see the report's failures");
        return Ok(ExitCode::from(crate::error::EXIT_FAILURE));
    }
    Ok(ExitCode::SUCCESS)
}

pub fn run(command: BenchCommand) -> Result<ExitCode> {
    match command {
        BenchCommand::Overhead(args) => overhead(args),
        BenchCommand::ExecRate(args) => exec_rate(args),
        BenchCommand::Capacity(args) => capacity(args),
        BenchCommand::Idle(args) => idle(args),
        BenchCommand::Latency(args) => latency(args),
        BenchCommand::Report(args) => report(args),
        BenchCommand::Worker(args) => worker(args),
    }
}

/// `vigil bench report --svg DIR REPORT`: the plots of a published run, from its report.json.
fn report(args: ReportArgs) -> Result<ExitCode> {
    let path = if args.report.is_dir() {
        args.report.join("report.json")
    } else {
        args.report
    };
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| InvalidInput(format!("`{}` is not JSON: {e}", path.display())))?;
    std::fs::create_dir_all(&args.svg)
        .with_context(|| format!("cannot create `{}`", args.svg.display()))?;
    let files = vigil_bench::plots::from_report(&json, &args.svg).map_err(|e| match e {
        vigil_bench::BenchError::Invalid { .. } => {
            anyhow::Error::new(InvalidInput(format!("`{}`: {e}", path.display())))
        }
        other => other.into(),
    })?;
    let mut stdout = std::io::stdout().lock();
    for f in files {
        writeln!(stdout, "{}", f.display())?;
    }
    stdout.flush()?;
    Ok(ExitCode::SUCCESS)
}

fn overhead(args: OverheadArgs) -> Result<ExitCode> {
    let exe = exe()?;
    let tests = Test::parse_list(&args.tests).map_err(|e| InvalidInput(e.to_string()))?;
    if args.iterations == 0 {
        return Err(InvalidInput("--iterations must be at least 1".into()).into());
    }
    let mut variants = Vec::new();
    let agents = if args.agent.is_empty() && args.wrap.is_empty() {
        vec!["watch".to_string()]
    } else {
        args.agent.clone()
    };
    for a in &agents {
        let agent = AgentSpec::parse(a, &args.agent_args.rules);
        variants.push(Variant {
            label: agent.label_without(&args.agent_args.rules),
            agent,
            wrap: Vec::new(),
        });
    }
    for w in &args.wrap {
        let wrap = split_words(w);
        if wrap.is_empty() {
            return Err(InvalidInput("--wrap needs a command".into()).into());
        }
        variants.push(Variant {
            label: format!("wrap `{w}`"),
            agent: AgentSpec::None,
            wrap,
        });
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir("overhead"));
    if args.also_unpinned && args.pin.is_none() {
        return Err(InvalidInput("--also-unpinned needs --pin".into()).into());
    }
    let scratch = scratch();
    let busy = match &args.busy {
        Some(list) => vigil_bench::busy::parse_cpus(list)?,
        None => Vec::new(),
    };
    // With --also-unpinned: the whole schedule pinned (report in OUT/pinned), then unpinned
    // (OUT/unpinned), each against its own agent-off runs.
    let passes: Vec<(Option<String>, PathBuf)> = if args.also_unpinned {
        vec![
            (args.pin.clone(), out.join("pinned")),
            (None, out.join("unpinned")),
        ]
    } else {
        vec![(args.pin.clone(), out.clone())]
    };
    let specs: Vec<AgentSpec> = variants.iter().map(|v| v.agent.clone()).collect();
    let falco = args.agent_args.falco_install(&specs)?;
    let notes = args.agent_args.notes(&exe, &specs, falco.as_ref())?;
    let mut failures = 0;
    let mut reports = Vec::new();
    for (pin, dir) in passes {
        let opts = OverheadOptions {
            tests: tests.clone(),
            iterations: args.iterations,
            duration: args.duration,
            variants: variants.clone(),
            workers: WorkerLaunch {
                exe: exe.clone(),
                pin,
                scratch: scratch.clone(),
            },
            agent: args.agent_args.launch(&exe, &dir, falco.clone()),
            out: dir.clone(),
            busy: busy.clone(),
            agent_per_test: args.agent_per_test,
            canary: args.canary,
            notes: notes.clone(),
        };
        let result = vigil_bench::overhead::run(&opts, &mut progress);
        vigil_bench::overhead::clean_scratch(&scratch);
        failures += result?.json["errors"].as_array().map_or(0, Vec::len);
        reports.push(dir);
    }
    let last = reports.pop().unwrap_or(out);
    for dir in reports {
        writeln!(
            std::io::stdout().lock(),
            "{}",
            dir.join("report.md").display()
        )?;
    }
    finish(&last, failures)
}

fn exec_rate(args: ExecRateArgs) -> Result<ExitCode> {
    let exe = exe()?;
    if args.rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(InvalidInput("--rates must be positive numbers".into()).into());
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir("exec-rate"));
    let several = args.agent.len() > 1;
    let mut failures = 0;
    let mut last = out.clone();
    for (i, agent) in args.agent.iter().enumerate() {
        let spec = AgentSpec::parse(agent, &args.agent_args.rules);
        // One report per agent, in the order given, when there are several.
        let dir = if several {
            out.join(format!("{}-{}", i + 1, slug(&spec.label())))
        } else {
            out.clone()
        };
        if several {
            progress(&format!(
                "agent {} of {}: {}",
                i + 1,
                args.agent.len(),
                spec.label()
            ));
        }
        let falco = args.agent_args.falco_install(std::slice::from_ref(&spec))?;
        let scratch = scratch();
        let opts = ExecRateOptions {
            rates: args.rates.clone(),
            duration: args.duration,
            watch_procs: args.watch_proc.clone(),
            agent: spec,
            wrap: args.wrap.as_deref().map(split_words).unwrap_or_default(),
            program: args.program.clone(),
            workers: WorkerLaunch {
                exe: exe.clone(),
                pin: args.pin.clone(),
                scratch: scratch.clone(),
            },
            launch: args.agent_args.launch(&exe, &dir, falco),
            out: dir.clone(),
        };
        let result = vigil_bench::execrate::run(&opts, &mut progress);
        vigil_bench::overhead::clean_scratch(&scratch);
        failures += result?
            .iter()
            .map(|(_, off, on)| usize::from(off.error.is_some()) + usize::from(on.error.is_some()))
            .sum::<usize>();
        if several && i + 1 < args.agent.len() {
            writeln!(
                std::io::stdout().lock(),
                "{}",
                dir.join("report.md").display()
            )?;
        }
        last = dir;
    }
    finish(&last, failures)
}

/// A directory-name form of an agent's label: letters, digits, `-`, at most 40 bytes.
fn slug(label: &str) -> String {
    let mut out = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
        if out.len() >= 40 {
            break;
        }
    }
    out.trim_matches('-').to_owned()
}

/// `--agent` values for the idle and latency benches: background agents only.
fn background_agents(values: &[String], rules: &[PathBuf]) -> Result<Vec<AgentSpec>> {
    let values = if values.is_empty() {
        vec!["watch".to_owned()]
    } else {
        values.to_vec()
    };
    values
        .iter()
        .map(|text| {
            let spec = AgentSpec::parse(text, rules);
            if spec.is_background() {
                Ok(spec)
            } else {
                Err(InvalidInput(format!(
                    "--agent `{text}`: a background agent is needed (watch, watch:ARGS or a command)"
                ))
                .into())
            }
        })
        .collect()
}

fn idle(args: IdleArgs) -> Result<ExitCode> {
    let exe = exe()?;
    let agents = background_agents(&args.agent, &args.agent_args.rules)?;
    let falco = args.agent_args.falco_install(&agents)?;
    let out = args.out.clone().unwrap_or_else(|| default_out_dir("idle"));
    let opts = vigil_bench::idle::IdleOptions {
        agents,
        duration: args.duration,
        settle: args.settle,
        rounds: args.rounds.max(1),
        launch: args.agent_args.launch(&exe, &out, falco),
        out: out.clone(),
    };
    let runs = vigil_bench::idle::run(&opts, &mut progress)?;
    finish(&out, runs.iter().filter(|r| r.error.is_some()).count())
}

fn latency(args: LatencyArgs) -> Result<ExitCode> {
    let exe = exe()?;
    if args.rates.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(InvalidInput("--rates must be positive numbers".into()).into());
    }
    let agents = background_agents(&args.agent, &args.agent_args.rules)?;
    let falco = args.agent_args.falco_install(&agents)?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir("latency"));
    let opts = vigil_bench::latency::LatencyOptions {
        agents,
        rates: args.rates,
        duration: args.duration,
        settle: args.settle,
        launch: args.agent_args.launch(&exe, &out, falco),
        out: out.clone(),
    };
    let results = vigil_bench::latency::run(&opts, &mut progress)?;
    finish(&out, results.iter().filter(|r| r.error.is_some()).count())
}

fn capacity(args: CapacityArgs) -> Result<ExitCode> {
    let exe = exe()?;
    let step = Step::parse(&args.step)
        .ok_or_else(|| InvalidInput(format!("invalid --step `{}` (x1.5 or 50000)", args.step)))?;
    if args.cpus.iter().any(|c| !(c.is_finite() && *c > 0.0)) {
        return Err(InvalidInput("--cpus must be positive numbers".into()).into());
    }
    if !(args.start.is_finite() && args.start > 0.0) {
        return Err(InvalidInput("--start must be positive".into()).into());
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir("capacity"));
    let scratch = scratch();
    let path = args
        .path
        .clone()
        .unwrap_or_else(|| scratch.join("capacity-target.dat"));
    let load_workers = args
        .load_workers
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let agents: Vec<AgentSpec> = args
        .agent
        .iter()
        .map(|a| AgentSpec::parse(a, &args.agent_args.rules))
        .collect();
    let falco = args.agent_args.falco_install(&agents)?;
    let notes = args.agent_args.notes(&exe, &agents, falco.as_ref())?;
    let opts = CapacityOptions {
        budgets: args.cpus,
        start: args.start,
        step,
        max_rate: args.max_rate,
        max_steps: args.max_steps.max(1),
        duration: args.duration,
        load_workers,
        labels: agents
            .iter()
            .map(|a| a.label_without(&args.agent_args.rules))
            .collect(),
        agents,
        canary: args.canary,
        notes,
        path,
        workers: WorkerLaunch {
            exe: exe.clone(),
            pin: None,
            scratch: scratch.clone(),
        },
        launch: args.agent_args.launch(&exe, &out, falco),
        out: out.clone(),
    };
    let result = vigil_bench::capacity::run(&opts, &mut progress);
    vigil_bench::overhead::clean_scratch(&scratch);
    let budgets = result.map_err(|e| match e {
        vigil_bench::BenchError::Invalid { .. } => anyhow::Error::new(InvalidInput(e.to_string())),
        other => other.into(),
    })?;
    let failures = budgets
        .iter()
        .flat_map(|b| &b.steps)
        .filter(|s| s.error.is_some())
        .count();
    finish(&out, failures)
}

fn worker(args: WorkerArgs) -> Result<ExitCode> {
    let exe = exe()?;
    let dir = args.dir.clone().unwrap_or_else(scratch);
    let result = match args.name.as_str() {
        "context1-peer" => {
            workload::context1_peer()?;
            return Ok(ExitCode::SUCCESS);
        }
        "exec-rate" => workload::exec_rate(&args.program, args.rate, args.duration)?,
        "canary" => {
            let path = args
                .path
                .clone()
                .ok_or_else(|| InvalidInput("canary needs --path".into()))?;
            workload::canary(&path, args.count, Duration::from_millis(20))?
        }
        "open-load" => {
            let path = args
                .path
                .clone()
                .unwrap_or_else(|| dir.join("open-load.dat"));
            workload::open_load(&path, args.rate, args.duration)?
        }
        "execl" => {
            let chain = match &args.chain {
                Some(c) => ExeclChain::parse(c)
                    .ok_or_else(|| InvalidInput(format!("invalid --chain `{c}`")))?,
                None => ExeclChain::first(),
            };
            let mut extra = vec![
                "--duration".to_string(),
                format!("{}", args.duration.as_secs_f64()),
                "--dir".to_string(),
                dir.display().to_string(),
            ];
            if let Some(r) = &args.result {
                extra.extend(["--result".to_string(), r.display().to_string()]);
            }
            workload::execl_step(&exe, chain, args.duration, &extra)?
        }
        name => {
            let test = Test::parse(name)
                .ok_or_else(|| InvalidInput(format!("unknown worker `{name}`")))?;
            let params = WorkerParams {
                duration: args.duration,
                dir,
                exe,
            };
            workload::run_test(test, &params)?
        }
    };
    let line = serde_json::to_string(&result)?;
    match &args.result {
        Some(path) => std::fs::write(path, line + "\n")
            .with_context(|| format!("cannot write `{}`", path.display()))?,
        None => {
            let mut stdout = std::io::stdout().lock();
            writeln!(stdout, "{line}")?;
            stdout.flush()?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn generate_bench(args: GenerateBenchArgs) -> Result<ExitCode> {
    let generator = match &args.generator_cmd {
        Some(cmd) => split_words(cmd),
        None => vec![exe()?.display().to_string(), "generate".into()],
    };
    if generator.is_empty() {
        return Err(InvalidInput("--generator-cmd needs a command".into()).into());
    }
    let source = match (&args.alerts_file, &args.listen) {
        (Some(file), _) => AlertSource::File(FileTail::new(file.clone())),
        (None, listen) => AlertSource::Http(HttpReceiver::start(
            listen.as_deref().unwrap_or("127.0.0.1:2801"),
        )?),
    };
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| default_out_dir("generate-bench"));
    let mut opts = GenBenchOptions {
        generator,
        regex: args.regex,
        looping: args.looping,
        round_duration: args.round_duration,
        sleep: args.sleep,
        rounds: args.rounds,
        pid: args.pid,
        rule_set: if args.rules_set == "stable" {
            RuleSet::Stable
        } else {
            RuleSet::Default
        },
        source,
        out: out.clone(),
    };
    vigil_bench::genbench::run(&mut opts, &mut progress).map_err(|e| match e {
        vigil_bench::BenchError::Invalid { .. } => anyhow::Error::new(InvalidInput(e.to_string())),
        other => other.into(),
    })?;
    finish(&out, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_agents_get_directories_named_after_them_and_idle_needs_background_ones() {
        assert_eq!(slug("vigil watch"), "vigil-watch");
        assert_eq!(
            slug("`/work/x/scripts/bench-auditd.sh`"),
            "work-x-scripts-bench-auditd-sh"
        );
        assert!(slug(&"a".repeat(100)).len() <= 40);
        let agents = background_agents(&[], &[]).unwrap();
        assert_eq!(
            agents,
            [AgentSpec::Watch { args: Vec::new() }],
            "watch by default"
        );
        assert!(
            background_agents(&["run".into()], &[]).is_err(),
            "run has no process"
        );
        assert!(background_agents(&["none".into()], &[]).is_err());
    }

    #[test]
    fn report_draws_a_published_runs_plots_and_refuses_what_is_not_a_report() {
        let run =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/bench/capacity-60s-default");
        let out = std::env::temp_dir().join(format!("vigil-bench-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let code = report(ReportArgs {
            report: run.clone(),
            svg: out.clone(),
        })
        .unwrap();
        assert_eq!(code, ExitCode::SUCCESS);
        for name in ["capacity-drops.svg", "capacity-cpu.svg"] {
            let svg = std::fs::read_to_string(out.join(name)).unwrap();
            assert!(
                svg.starts_with("<svg") && svg.contains("<polyline"),
                "{name}"
            );
        }
        let e = report(ReportArgs {
            report: run.join("report.md"),
            svg: out.clone(),
        })
        .unwrap_err();
        assert!(e.downcast_ref::<InvalidInput>().is_some(), "{e:#}");
        let _ = std::fs::remove_dir_all(&out);
    }
}

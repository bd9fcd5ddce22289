//! The agent under test and how workloads are launched around it.
//!
//! Contracts assumed from `vigil watch` (the eBPF agent):
//! - **readiness**: once its programs are attached and it is consuming events, it writes a line
//!   containing `vigil: watching` to stderr;
//! - **stop**: `SIGTERM` makes it drain and exit;
//! - **stats** (`--stats`): at exit it writes one JSON line to stderr with `events_in`,
//!   `processed`, `dropped` (a total, with `dropped_by_reason` beside it; an object by reason
//!   is accepted too) and `alerts`.
//!
//! Falco (`falco[:ARGS]`) has its own contracts, in [`crate::falco`]. Whatever the agent, one
//! that exits before it is stopped has **died**: the bench says so instead of a figure.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::falco::FalcoInstall;
use crate::{sys, system, BenchError};

/// The readiness line `vigil watch` writes to stderr.
pub const WATCH_READY: &str = "vigil: watching";

/// Which agent runs during the "on" runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AgentSpec {
    /// Nothing (an A/A run: measures noise).
    None,
    /// `vigil watch --stats [ARGS…]` in the background (`watch:ARGS`, e.g.
    /// `watch:--bpf-floor nop` for the floor, `watch:--syscall-hook tracepoint`,
    /// `watch:-r falco_rules.yaml`).
    Watch { args: Vec<String> },
    /// Each workload under `vigil run [-r RULES…] --`.
    Run { rules: Vec<PathBuf> },
    /// Falco in the background (`falco`, `falco:ARGS`: extra Falco arguments), started as
    /// [`crate::falco`] describes, from the install in [`AgentLaunch::falco`].
    Falco { args: Vec<String> },
    /// Any other agent: a shell command started in the background (e.g. `falco -c …`).
    Cmd(String),
}

impl AgentSpec {
    /// `watch`, `watch:ARGS` (extra `vigil watch` arguments, split at spaces), `falco`,
    /// `falco:ARGS` (extra Falco arguments), `run` (with `rules`), `run:FILE[,FILE…]` (with
    /// those rules), `none`, or any other text as a background shell command. `rules` (the
    /// bench's `-r`) are given to every agent that takes rules — `run`, `watch`, `falco` —
    /// unless its own arguments name some (`-r`, `--rules`).
    pub fn parse(text: &str, rules: &[PathBuf]) -> AgentSpec {
        let with_rules = |args: &str| -> Vec<String> {
            let args: Vec<String> = args.split_whitespace().map(str::to_owned).collect();
            if args.iter().any(|a| a == "-r" || a == "--rules") {
                return args;
            }
            rules
                .iter()
                .flat_map(|r| ["-r".to_string(), r.display().to_string()])
                .chain(args)
                .collect()
        };
        match text.trim() {
            "none" | "" => AgentSpec::None,
            "watch" => AgentSpec::Watch {
                args: with_rules(""),
            },
            other if other.starts_with("watch:") => AgentSpec::Watch {
                args: with_rules(&other["watch:".len()..]),
            },
            "falco" => AgentSpec::Falco {
                args: with_rules(""),
            },
            other if other.starts_with("falco:") => AgentSpec::Falco {
                args: with_rules(&other["falco:".len()..]),
            },
            "run" => AgentSpec::Run {
                rules: rules.to_vec(),
            },
            other => match other.strip_prefix("run:") {
                Some(list) => AgentSpec::Run {
                    rules: list
                        .split(',')
                        .map(str::trim)
                        .filter(|r| !r.is_empty())
                        .map(PathBuf::from)
                        .collect(),
                },
                None => AgentSpec::Cmd(other.to_string()),
            },
        }
    }

    pub fn label(&self) -> String {
        match self {
            AgentSpec::None => "none".into(),
            AgentSpec::Watch { args } if args.is_empty() => "vigil watch".into(),
            AgentSpec::Watch { args } => format!("vigil watch {}", args.join(" ")),
            AgentSpec::Run { rules } if rules.is_empty() => "vigil run (default rules)".into(),
            AgentSpec::Run { rules } => format!(
                "vigil run -r {}",
                rules
                    .iter()
                    .map(|r| r.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" -r ")
            ),
            AgentSpec::Falco { args } if args.is_empty() => "falco".into(),
            AgentSpec::Falco { args } => format!("falco {}", args.join(" ")),
            AgentSpec::Cmd(cmd) => format!("`{cmd}`"),
        }
    }

    /// The label without the bench's own rules (`-r`, named once in a report's header): `falco`,
    /// `vigil watch`, `vigil run` rather than each followed by the same rules files.
    pub fn label_without(&self, bench_rules: &[PathBuf]) -> String {
        if bench_rules.is_empty() {
            return self.label();
        }
        let strip = |args: &[String]| -> Vec<String> {
            let mut out = Vec::new();
            let mut i = 0;
            while i < args.len() {
                let bench_rule = args[i] == "-r"
                    && args
                        .get(i + 1)
                        .is_some_and(|a| bench_rules.iter().any(|r| r.display().to_string() == *a));
                if bench_rule {
                    i += 2;
                } else {
                    out.push(args[i].clone());
                    i += 1;
                }
            }
            out
        };
        match self {
            AgentSpec::Watch { args } => AgentSpec::Watch { args: strip(args) }.label(),
            AgentSpec::Falco { args } => AgentSpec::Falco { args: strip(args) }.label(),
            AgentSpec::Run { rules } if rules == bench_rules => "vigil run".into(),
            other => other.label(),
        }
    }

    /// The prefix this agent puts in front of every workload (only `run` has one).
    pub fn prefix(&self, exe: &Path) -> Vec<String> {
        match self {
            AgentSpec::Run { rules } => {
                let mut argv = vec![exe.display().to_string(), "run".into()];
                for r in rules {
                    argv.push("-r".into());
                    argv.push(r.display().to_string());
                }
                argv.push("--".into());
                argv
            }
            _ => Vec::new(),
        }
    }

    pub fn is_background(&self) -> bool {
        matches!(
            self,
            AgentSpec::Watch { .. } | AgentSpec::Falco { .. } | AgentSpec::Cmd(_)
        )
    }

    /// An agent whose event and drop counters the bench reads (`vigil watch`, Falco).
    pub fn has_counters(&self) -> bool {
        matches!(self, AgentSpec::Watch { .. } | AgentSpec::Falco { .. })
    }

    /// Falco, with or without extra arguments.
    pub fn is_falco(&self) -> bool {
        matches!(self, AgentSpec::Falco { .. })
    }

    /// `vigil watch`, with or without extra arguments.
    pub fn is_watch(&self) -> bool {
        matches!(self, AgentSpec::Watch { .. })
    }
}

/// How the background agent is started and recognised as ready.
#[derive(Clone, Debug)]
pub struct AgentLaunch {
    /// The `vigil` binary.
    pub exe: PathBuf,
    /// Replaces `[exe, "watch"]` (tests, or a release binary elsewhere).
    pub watch_cmd: Option<Vec<String>>,
    /// Extra arguments for `vigil watch` (after `--stats`).
    pub watch_args: Vec<String>,
    /// For a `Cmd` agent: a stderr/stdout substring meaning ready; else wait `warmup`.
    pub ready_line: Option<String>,
    pub warmup: Duration,
    pub ready_timeout: Duration,
    /// `taskset -c CPUS` for the agent when no CPU budget applies.
    pub pin: Option<String>,
    /// Where the agent's stdout/stderr are kept.
    pub log_dir: PathBuf,
    /// The Falco install `falco` agents run (`None`: a `falco` agent fails to start).
    pub falco: Option<FalcoInstall>,
}

pub use crate::counters::WatchStats;

/// A CPU budget for the agent: whole CPUs by affinity, fractions by a cgroup CPU quota.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuBudget {
    pub cpus: f64,
}

/// How a budget was enforced.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum BudgetMethod {
    Taskset(String),
    CgroupV2 {
        dir: PathBuf,
        cpus: String,
    },
    CgroupV1 {
        dir: PathBuf,
        cpus: String,
    },
    /// A fraction asked for but no writable cgroup CPU controller: whole CPUs only.
    TasksetFallback(String),
}

impl BudgetMethod {
    pub fn describe(&self) -> String {
        match self {
            BudgetMethod::Taskset(c) => format!("taskset -c {c}"),
            BudgetMethod::CgroupV2 { dir, cpus } => {
                format!("taskset -c {cpus} + cgroup v2 cpu.max in {}", dir.display())
            }
            BudgetMethod::CgroupV1 { dir, cpus } => format!(
                "taskset -c {cpus} + cgroup v1 cpu.cfs_quota_us in {} (no cgroup v2 cpu controller)",
                dir.display()
            ),
            BudgetMethod::TasksetFallback(c) => format!(
                "taskset -c {c} only: no writable cgroup CPU controller, the fraction is NOT enforced"
            ),
        }
    }

    fn cgroup_dir(&self) -> Option<&Path> {
        match self {
            BudgetMethod::CgroupV2 { dir, .. } | BudgetMethod::CgroupV1 { dir, .. } => Some(dir),
            _ => None,
        }
    }
}

/// The CPU list `0-(n-1)` for `n` whole CPUs.
pub fn cpu_list(n: usize) -> String {
    if n <= 1 {
        "0".into()
    } else {
        format!("0-{}", n - 1)
    }
}

/// The CPUs an agent with `whole` CPUs leaves to the load (`None` when it has them all).
pub fn other_cpus(whole: usize, online: usize) -> Option<String> {
    match online.checked_sub(whole)? {
        0 => None,
        1 => Some(whole.to_string()),
        _ => Some(format!("{whole}-{}", online - 1)),
    }
}

/// The period/quota pair (µs) for a fractional budget over a 100 ms period.
pub fn quota_us(cpus: f64) -> (u64, u64) {
    let period = 100_000u64;
    ((cpus * period as f64).round().max(1000.0) as u64, period)
}

impl CpuBudget {
    /// Whole CPUs the agent may use (`0..n`).
    pub fn whole_cpus(&self) -> usize {
        let online = std::thread::available_parallelism().map_or(1, |n| n.get());
        (self.cpus.ceil() as usize).clamp(1, online)
    }

    /// Prepares the budget: the `taskset` prefix, and for a fraction a cgroup (v2 `cpu.max`
    /// where a v2 hierarchy has the cpu controller, else v1 `cpu.cfs_quota_us`, else none).
    pub fn prepare(&self, tag: &str) -> (Vec<String>, BudgetMethod) {
        let cpus = cpu_list(self.whole_cpus());
        let prefix = vec!["taskset".to_string(), "-c".to_string(), cpus.clone()];
        if (self.cpus - self.cpus.round()).abs() < 1e-9 {
            return (prefix, BudgetMethod::Taskset(cpus));
        }
        let (quota, period) = quota_us(self.cpus);
        for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
            let controllers =
                fs::read_to_string(format!("{root}/cgroup.controllers")).unwrap_or_default();
            if !controllers.split_whitespace().any(|c| c == "cpu") {
                continue;
            }
            let _ = fs::write(format!("{root}/cgroup.subtree_control"), "+cpu");
            let dir = PathBuf::from(format!("{root}/vigil-bench-{tag}"));
            if fs::create_dir_all(&dir).is_ok()
                && fs::write(dir.join("cpu.max"), format!("{quota} {period}")).is_ok()
            {
                return (prefix, BudgetMethod::CgroupV2 { dir, cpus });
            }
            let _ = fs::remove_dir(&dir);
        }
        for root in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
            let dir = PathBuf::from(format!("{root}/vigil-bench-{tag}"));
            if Path::new(root).join("cpu.cfs_quota_us").exists()
                && fs::create_dir_all(&dir).is_ok()
                && fs::write(dir.join("cpu.cfs_period_us"), period.to_string()).is_ok()
                && fs::write(dir.join("cpu.cfs_quota_us"), quota.to_string()).is_ok()
            {
                return (prefix, BudgetMethod::CgroupV1 { dir, cpus });
            }
            let _ = fs::remove_dir(&dir);
        }
        (prefix, BudgetMethod::TasksetFallback(cpus))
    }
}

/// Moves a process into a prepared cgroup (no-op for taskset-only methods).
fn enter_cgroup(method: &BudgetMethod, pid: u32) -> Result<(), BenchError> {
    if let Some(dir) = method.cgroup_dir() {
        fs::write(dir.join("cgroup.procs"), pid.to_string()).map_err(|source| BenchError::Io {
            what: format!("move the agent into `{}`", dir.display()),
            source,
        })?;
    }
    Ok(())
}

/// Removes a cgroup made by [`CpuBudget::prepare`].
pub fn release_budget(method: &BudgetMethod) {
    if let Some(dir) = method.cgroup_dir() {
        let _ = fs::remove_dir(dir);
    }
}

/// A background agent process. It stays in the bench's process group, so a Ctrl-C of the
/// bench reaches it too.
pub struct BackgroundAgent {
    child: Option<Child>,
    pub pid: u32,
    /// The agent's process name (read once it is ready), and the processes that existed
    /// before it started (see [`BackgroundAgent::shutdown`]).
    comm: String,
    pids_before: Vec<i32>,
    stdout_path: PathBuf,
    stderr_path: PathBuf,
    /// Falco's metrics snapshots (its readiness and fallback counters).
    metrics_path: Option<PathBuf>,
    is_falco: bool,
    /// How it exited if it did so before [`BackgroundAgent::stop`].
    died: Option<String>,
    /// Alerts expected on its stdout: lines holding the tag, and how many.
    canary: Option<(String, u64)>,
    pub label: String,
    /// Earlier starts that never became ready ([`AgentExit::stalled_starts`]).
    stalled_starts: Vec<String>,
}

/// Alerts an agent was expected to raise (the canary's opens) and the alerts it raised.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Canary {
    pub expected: u64,
    pub received: u64,
}

/// What a stopped agent left behind.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AgentExit {
    pub stats: Option<WatchStats>,
    /// CPU used while the workloads ran, % of one CPU (set by the caller).
    pub cpu_pct: Option<f64>,
    /// Peak RSS just before the stop, KiB.
    pub vm_hwm_kib: Option<u64>,
    pub exit: String,
    /// It exited before it was stopped (how), e.g. a crash or an out-of-memory kill.
    pub died: Option<String>,
    pub canary: Option<Canary>,
    pub stderr_tail: String,
    /// Starts before this one that never became ready (each: why, and where its stderr is
    /// kept), stopped and started again ([`START_ATTEMPTS`]).
    pub stalled_starts: Vec<String>,
}

/// How many times an agent that does not become ready within the readiness timeout is
/// started. An agent that exits before it is ready is not started again. (The stalls of
/// Falco's starts this was made for were the bench's own: see [`nudge`].)
pub const START_ATTEMPTS: usize = 2;

impl AgentExit {
    /// Events the agent counted as dropped (0 without counters).
    pub fn dropped(&self) -> u64 {
        self.stats.as_ref().map_or(0, WatchStats::dropped_total)
    }
}

impl BackgroundAgent {
    /// Starts the agent (watch or command), optionally under a CPU budget, and waits until it
    /// is ready; one that does not become ready in time is stopped and started again, up to
    /// [`START_ATTEMPTS`] starts (its exit names the stalled starts).
    pub fn start(
        spec: &AgentSpec,
        launch: &AgentLaunch,
        budget: Option<(&[String], &BudgetMethod)>,
        name: &str,
    ) -> Result<BackgroundAgent, BenchError> {
        let mut stalled = Vec::new();
        loop {
            match Self::start_once(spec, launch, budget, name) {
                Ok(mut agent) => {
                    agent.stalled_starts = stalled;
                    return Ok(agent);
                }
                Err(Start::Stalled(_, why)) if stalled.len() + 1 < START_ATTEMPTS => {
                    // Keep the stalled start's log beside the others.
                    let kept = launch
                        .log_dir
                        .join(format!("{name}.stalled-{}.stderr", stalled.len() + 1));
                    let _ = fs::rename(launch.log_dir.join(format!("{name}.stderr")), &kept);
                    stalled.push(format!(
                        "{why}; stopped, started again (its stderr: `{}`)",
                        kept.display()
                    ));
                }
                Err(Start::Stalled(e, _) | Start::Failed(e)) => return Err(e),
            }
        }
    }

    fn start_once(
        spec: &AgentSpec,
        launch: &AgentLaunch,
        budget: Option<(&[String], &BudgetMethod)>,
        name: &str,
    ) -> Result<BackgroundAgent, Start> {
        let mut argv: Vec<String> = match (budget, &launch.pin) {
            (Some((prefix, _)), _) => prefix.to_vec(),
            (None, Some(cpus)) => vec!["taskset".into(), "-c".into(), cpus.clone()],
            (None, None) => Vec::new(),
        };
        match spec {
            AgentSpec::Watch { args } => {
                match &launch.watch_cmd {
                    Some(cmd) => argv.extend(cmd.iter().cloned()),
                    None => argv.extend([launch.exe.display().to_string(), "watch".into()]),
                }
                argv.push("--stats".into());
                argv.extend(launch.watch_args.iter().cloned());
                argv.extend(args.iter().cloned());
            }
            AgentSpec::Cmd(cmd) => argv.extend(["sh".into(), "-c".into(), format!("exec {cmd}")]),
            AgentSpec::Falco { args } => {
                let install = launch.falco.as_ref().ok_or_else(|| {
                    BenchError::Agent("no Falco install given for the falco agent".into())
                })?;
                argv.extend(
                    install.argv(&launch.log_dir.join(format!("{name}.metrics.jsonl")), args),
                );
            }
            _ => {
                return Err(Start::Failed(BenchError::Agent(format!(
                    "{} does not run in the background",
                    spec.label()
                ))))
            }
        }
        fs::create_dir_all(&launch.log_dir).map_err(|source| BenchError::Io {
            what: format!("create `{}`", launch.log_dir.display()),
            source,
        })?;
        let stdout_path = launch.log_dir.join(format!("{name}.stdout"));
        let stderr_path = launch.log_dir.join(format!("{name}.stderr"));
        let metrics_path = spec
            .is_falco()
            .then(|| launch.log_dir.join(format!("{name}.metrics.jsonl")));
        if let Some(m) = &metrics_path {
            // A snapshot left by an earlier run must not pass for readiness.
            let _ = fs::remove_file(m);
        }
        let open = |p: &Path| {
            File::create(p).map_err(|source| BenchError::Io {
                what: format!("create `{}`", p.display()),
                source,
            })
        };
        let pids_before = system::processes_named(None);
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::null())
            .stdout(open(&stdout_path)?)
            .stderr(open(&stderr_path)?)
            .spawn()
            .map_err(|e| BenchError::Agent(format!("cannot start `{}`: {e}", argv.join(" "))))?;
        let pid = child.id();
        let mut agent = BackgroundAgent {
            child: Some(child),
            pid,
            comm: String::new(),
            pids_before,
            stdout_path,
            stderr_path,
            metrics_path,
            is_falco: spec.is_falco(),
            died: None,
            canary: None,
            label: spec.label(),
            stalled_starts: Vec::new(),
        };
        if let Some((_, method)) = budget {
            enter_cgroup(method, pid)?;
        }
        let ready = match spec {
            AgentSpec::Watch { .. } => Ready::Line(WATCH_READY.to_string()),
            AgentSpec::Falco { .. } => Ready::File(
                agent
                    .metrics_path
                    .clone()
                    .expect("a Falco agent has a metrics file"),
            ),
            _ => match &launch.ready_line {
                Some(line) => Ready::Line(line.clone()),
                None => Ready::Warmup,
            },
        };
        agent.wait_ready(&ready, launch)?;
        // Its name once `taskset`/`sh -c exec` have exec'd it.
        agent.comm = system::proc_stat(pid as i32)
            .map(|(comm, _)| comm)
            .unwrap_or_default();
        Ok(agent)
    }

    fn wait_ready(&mut self, ready: &Ready, launch: &AgentLaunch) -> Result<(), Start> {
        let start = Instant::now();
        let deadline = match ready {
            Ready::Warmup => launch.warmup,
            _ => launch.ready_timeout,
        };
        loop {
            match ready {
                Ready::Line(line) => {
                    let out = read_lossy(&self.stderr_path) + &read_lossy(&self.stdout_path);
                    if out.contains(line.as_str()) {
                        return Ok(());
                    }
                }
                Ready::File(path) => {
                    if fs::metadata(path).is_ok_and(|m| m.len() > 0) {
                        return Ok(());
                    }
                    nudge(path);
                }
                Ready::Warmup => {}
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    let tail = tail(&read_lossy(&self.stderr_path), 800);
                    self.child = None;
                    return Err(Start::Failed(BenchError::Agent(format!(
                        "{} exited before it was ready ({status}): {tail}",
                        self.label
                    ))));
                }
            }
            if start.elapsed() >= deadline {
                let what = match ready {
                    Ready::Warmup => return Ok(()),
                    Ready::Line(line) => format!("print `{line}`"),
                    Ready::File(path) => format!("write `{}`", path.display()),
                };
                let why = format!("{} did not {what} within {:?}", self.label, deadline);
                let e = BenchError::Agent(format!(
                    "{why}: {}",
                    tail(&read_lossy(&self.stderr_path), 800)
                ));
                return Err(Start::Stalled(e, why));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it is still running; records how it exited if not (see [`AgentExit::died`]).
    pub fn alive(&mut self) -> bool {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                self.died = Some(status.to_string());
                self.child = None;
            }
        }
        self.died.is_none()
    }

    /// How it exited, if it did so before being stopped.
    pub fn died(&self) -> Option<&str> {
        self.died.as_deref()
    }

    /// Expects `count` alerts naming `tag` (lines of its stdout holding it).
    pub fn expect_alerts(&mut self, tag: &str, count: u64) {
        match &mut self.canary {
            Some((t, n)) if t == tag => *n += count,
            _ => self.canary = Some((tag.to_string(), count)),
        }
    }

    /// Lines of its stdout that hold the expected tag (0 when none is expected).
    pub fn alerts_received(&self) -> u64 {
        self.canary.as_ref().map_or(0, |(tag, _)| {
            count_lines_with(&read_lossy(&self.stdout_path), tag)
        })
    }

    /// Waits until the expected alerts are all on its stdout, at most `timeout`.
    pub fn wait_alerts(&mut self, timeout: Duration) {
        let Some(expected) = self.canary.as_ref().map(|(_, n)| *n) else {
            return;
        };
        let start = Instant::now();
        while self.alerts_received() < expected && start.elapsed() < timeout && self.alive() {
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the agent: SIGTERM, SIGKILL after 10 s; parses its stats (the `--stats` line, or
    /// Falco's counters) and counts the expected alerts once it has drained.
    pub fn stop(mut self) -> AgentExit {
        let vm_hwm_kib = self.vm_hwm_kib();
        self.alive();
        let exit = self.shutdown();
        let stderr = read_lossy(&self.stderr_path);
        let stats = if self.is_falco {
            crate::falco::stats(
                &stderr,
                &self
                    .metrics_path
                    .as_deref()
                    .map(read_lossy)
                    .unwrap_or_default(),
                &read_lossy(&self.stdout_path),
            )
        } else {
            WatchStats::find(&stderr)
        };
        AgentExit {
            stats,
            cpu_pct: None,
            vm_hwm_kib,
            exit: match &self.died {
                Some(status) => format!("died ({status})"),
                None => exit,
            },
            died: self.died.clone(),
            canary: self.canary.as_ref().map(|(_, expected)| Canary {
                expected: *expected,
                received: self.alerts_received(),
            }),
            stderr_tail: tail(&stderr, 2000),
            stalled_starts: self.stalled_starts.clone(),
        }
    }

    /// Stops the agent, then waits (at most 60 s) for what it left detaching in the
    /// background: `vigil watch` hands its tracepoints to a releaser process of the same name,
    /// whose teardown takes seconds and would slow the next measurement.
    fn shutdown(&mut self) -> String {
        let status = self.stop_child();
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.comm.is_empty()
            && Instant::now() < deadline
            && system::processes_named(Some(&self.comm))
                .iter()
                .any(|p| !self.pids_before.contains(p))
        {
            std::thread::sleep(Duration::from_millis(20));
        }
        status
    }

    fn stop_child(&mut self) -> String {
        let Some(mut child) = self.child.take() else {
            return "already exited".into();
        };
        let pid = child.id() as i32;
        let _ = sys::terminate(pid);
        let start = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return status.to_string(),
                Ok(None) if start.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    let _ = sys::kill(pid);
                    let _ = child.wait();
                    return "killed after 10 s".into();
                }
            }
        }
    }

    /// Peak RSS so far, KiB.
    pub fn vm_hwm_kib(&self) -> Option<u64> {
        system::vm_hwm_kib(self.pid as i32)
    }

    /// CPU ticks used so far (the agent's own threads).
    pub fn cpu_ticks(&self) -> Option<u64> {
        system::proc_stat(self.pid as i32).map(|(_, s)| s.cpu_ticks)
    }
}

impl Drop for BackgroundAgent {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Why a start failed: the agent did not become ready in time (it may be started again; the
/// short reason), or anything else.
enum Start {
    Stalled(BenchError, String),
    Failed(BenchError),
}

impl From<BenchError> for Start {
    fn from(e: BenchError) -> Start {
        Start::Failed(e)
    }
}

/// What makes a background agent ready.
enum Ready {
    /// A line on its stdout or stderr holds this text.
    Line(String),
    /// This file exists and is not empty.
    File(PathBuf),
    /// Nothing: wait `warmup`.
    Warmup,
}

/// Makes an event for an agent whose readiness is a file it writes from its event loop: opens
/// the file's directory (an `openat`, which Falco captures under any rules with an open rule).
/// Falco writes a metrics snapshot only when an event reaches that loop after the interval
/// has passed, and it captures only the syscalls its rules need: on a quiet machine, with the
/// bench waiting silently, none may come for minutes, and the start looked stalled (about one
/// start in three, 2026-11-28/29; `docs/bench/README.md`, "Falco").
fn nudge(ready_file: &Path) {
    if let Some(dir) = ready_file.parent() {
        let _ = File::open(dir);
    }
}

/// The lines of `text` that hold `tag`.
pub fn count_lines_with(text: &str, tag: &str) -> u64 {
    text.lines().filter(|l| l.contains(tag)).count() as u64
}

fn read_lossy(path: &Path) -> String {
    let mut bytes = Vec::new();
    if let Ok(mut f) = File::open(path) {
        let _ = f.read_to_end(&mut bytes);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The last `max` bytes of `text` (on a char boundary), one line.
pub fn tail(text: &str, max: usize) -> String {
    let mut start = text.len().saturating_sub(max);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].trim().replace('\n', " | ")
}

/// The first `max` bytes of `text`'s first line (on a char boundary), `…` when cut.
pub fn head(text: &str, max: usize) -> String {
    let line = text.trim().lines().next().unwrap_or("");
    if line.len() <= max {
        return line.to_string();
    }
    let mut end = max;
    while !line.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &line[..end])
}

/// Splits a command prefix on whitespace (`--wrap 'strace -f -o /dev/null'`).
pub fn split_words(text: &str) -> Vec<String> {
    text.split_whitespace().map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_specs() {
        assert_eq!(AgentSpec::parse("none", &[]), AgentSpec::None, "none");
        assert_eq!(
            AgentSpec::parse("watch", &[]),
            AgentSpec::Watch { args: vec![] },
            "watch"
        );
        let floor = AgentSpec::parse("watch:--bpf-floor  nop", &[]);
        assert_eq!(
            floor,
            AgentSpec::Watch {
                args: vec!["--bpf-floor".into(), "nop".into()]
            },
            "watch with arguments"
        );
        assert_eq!(floor.label(), "vigil watch --bpf-floor nop");
        assert!(floor.is_background() && floor.is_watch());
        let r = AgentSpec::parse("run", &[PathBuf::from("a.yaml")]);
        assert_eq!(
            r.prefix(Path::new("/v")),
            vec!["/v", "run", "-r", "a.yaml", "--"],
            "run prefix"
        );
        assert!(
            matches!(AgentSpec::parse("falco -c x", &[]), AgentSpec::Cmd(_)),
            "cmd"
        );
        assert!(
            AgentSpec::Watch { args: vec![] }
                .prefix(Path::new("/v"))
                .is_empty(),
            "watch has no prefix"
        );
    }

    #[test]
    fn falco_specs_and_the_bench_rules_for_every_agent() {
        let rules = [PathBuf::from("/r/falco_rules.yaml")];
        let falco = AgentSpec::parse("falco", &[]);
        assert_eq!(falco, AgentSpec::Falco { args: vec![] }, "falco");
        assert_eq!(falco.label(), "falco");
        assert!(falco.is_background() && falco.is_falco() && falco.has_counters());
        assert!(!falco.is_watch(), "falco is not watch");
        assert!(
            falco.prefix(Path::new("/v")).is_empty(),
            "no workload prefix"
        );
        assert_eq!(
            AgentSpec::parse("falco:-o engine.kind=modern_ebpf", &rules),
            AgentSpec::Falco {
                args: ["-r", "/r/falco_rules.yaml", "-o", "engine.kind=modern_ebpf"]
                    .map(String::from)
                    .to_vec()
            },
            "falco with arguments, after the bench's rules"
        );
        assert_eq!(
            AgentSpec::parse("watch", &rules),
            AgentSpec::Watch {
                args: ["-r", "/r/falco_rules.yaml"].map(String::from).to_vec()
            },
            "watch takes the bench's rules"
        );
        assert_eq!(
            AgentSpec::parse("watch:--rules /own.yaml --json", &rules),
            AgentSpec::Watch {
                args: ["--rules", "/own.yaml", "--json"]
                    .map(String::from)
                    .to_vec()
            },
            "its own rules win"
        );
        assert_eq!(
            AgentSpec::parse("run", &rules),
            AgentSpec::Run {
                rules: rules.to_vec()
            },
            "run"
        );
        assert!(
            !AgentSpec::parse("falco -c x", &[]).is_falco(),
            "a command line is a command"
        );
        let short = |text: &str| AgentSpec::parse(text, &rules).label_without(&rules);
        assert_eq!(short("falco"), "falco", "the bench's rules left out");
        assert_eq!(
            short("watch:--json"),
            "vigil watch --json",
            "own arguments kept"
        );
        assert_eq!(short("run"), "vigil run", "run with the bench's rules");
        assert_eq!(
            short("watch:-r /own.yaml"),
            "vigil watch -r /own.yaml",
            "other rules kept"
        );
        assert_eq!(
            AgentSpec::parse("falco", &rules).label(),
            "falco -r /r/falco_rules.yaml",
            "the full label names them"
        );
    }

    #[test]
    fn stats_line_is_found() {
        let text = "vigil: watching\nsome noise {\n\
            {\"events_in\":10,\"processed\":7,\"dropped\":{\"ring_full\":2,\"oversize\":1},\"alerts\":4}\n";
        let s = WatchStats::find(text).expect("found");
        assert_eq!(s.events_in, 10, "events_in");
        assert_eq!(s.processed, 7, "processed");
        assert_eq!(s.dropped_total(), 3, "dropped by reason summed");
        assert_eq!(s.alerts, 4, "alerts");
        let s = WatchStats::find(
            "{\"events_in\":5,\"processed\":3,\"dropped\":2,\"dropped_by_reason\":{\"ring\":2}}",
        )
        .expect("numeric dropped");
        assert_eq!(s.dropped_total(), 2, "numeric dropped");
        assert_eq!(
            s.dropped_by_reason.get("ring"),
            Some(&2),
            "by reason beside it"
        );
        assert_eq!(WatchStats::find("{\"x\":1}\nnot json"), None, "no stats");
    }

    #[test]
    fn budget_helpers() {
        assert_eq!(cpu_list(1), "0", "one cpu");
        assert_eq!(cpu_list(2), "0-1", "two cpus");
        assert_eq!(other_cpus(1, 2), Some("1".into()), "one left");
        assert_eq!(other_cpus(1, 4), Some("1-3".into()), "three left");
        assert_eq!(other_cpus(2, 2), None, "none left");
        assert_eq!(quota_us(0.5), (50_000, 100_000), "half a cpu");
        assert_eq!(quota_us(1.5), (150_000, 100_000), "one and a half");
        let (prefix, method) = CpuBudget { cpus: 1.0 }.prepare("unit");
        assert_eq!(prefix, vec!["taskset", "-c", "0"], "whole cpu prefix");
        assert_eq!(
            method,
            BudgetMethod::Taskset("0".into()),
            "whole cpu method"
        );
    }

    #[test]
    fn tagged_lines_are_counted() {
        let text = "a tag-1 b\nno\ntag-1 tag-1x\ntag-12\n";
        assert_eq!(
            count_lines_with(text, "tag-1 "),
            2,
            "two lines hold `tag-1 `"
        );
        assert_eq!(
            count_lines_with(text, "tag-1"),
            3,
            "lines, not occurrences (4)"
        );
        assert_eq!(count_lines_with("", "x"), 0, "empty");
    }

    #[test]
    fn tail_and_words() {
        assert_eq!(tail("abc\ndef", 3), "def", "tail");
        assert_eq!(tail("é", 1), "", "char boundary");
        assert_eq!(head("  abc\ndef", 3), "abc", "head: the first line");
        assert_eq!(head("abcd", 3), "abc…", "head: cut");
        assert_eq!(head("aé", 2), "a…", "head: char boundary");
        assert_eq!(split_words(" strace  -f "), vec!["strace", "-f"], "words");
    }

    /// A command agent's launch: ready when it prints `READY`, logs under `dir`.
    fn command_launch(dir: &Path, ready_timeout: Duration) -> AgentLaunch {
        AgentLaunch {
            exe: PathBuf::from("/nonexistent"),
            watch_cmd: None,
            watch_args: Vec::new(),
            ready_line: Some("READY".into()),
            warmup: Duration::ZERO,
            ready_timeout,
            pin: None,
            log_dir: dir.to_path_buf(),
            falco: None,
        }
    }

    #[test]
    fn command_agent_starts_and_stops() {
        let dir = std::env::temp_dir().join(format!("vigil-bench-agent-{}", std::process::id()));
        let launch = AgentLaunch {
            pin: Some("0".into()),
            ..command_launch(&dir, Duration::from_secs(10))
        };
        fs::create_dir_all(&dir).unwrap();
        let script = dir.join("agent.sh");
        fs::write(
            &script,
            "trap 'echo {\\\"events_in\\\":3} >&2; exit 0' TERM\necho READY >&2\nwhile :; do sleep 0.05; done\n",
        )
        .unwrap();
        let spec = AgentSpec::Cmd(format!("sh {}", script.display()));
        let agent = BackgroundAgent::start(&spec, &launch, None, "t").expect("starts");
        assert!(agent.cpu_ticks().is_some(), "readable stat");
        let exit = agent.stop();
        assert_eq!(
            exit.stats.map(|s| s.events_in),
            Some(3),
            "stats at exit: {}",
            exit.stderr_tail
        );
        let _ = fs::remove_dir_all(&dir);
    }

    /// Falco writes its first metrics snapshot (its readiness) from its event loop, when an
    /// event comes: here a fake Falco runs, and the test writes the snapshot as Falco would,
    /// once something opens the snapshot's directory (the bench's wait, an event Falco
    /// captures). Without that event the start stalls, twice.
    #[test]
    fn a_falco_start_is_given_the_event_its_first_snapshot_waits_for() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("vigil-bench-nudge-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("falco");
        fs::write(&bin, "#!/bin/sh\nwhile :; do sleep 0.05; done\n").unwrap();
        fs::set_permissions(&bin, fs::Permissions::from_mode(0o755)).unwrap();
        let launch = AgentLaunch {
            falco: Some(FalcoInstall {
                bin,
                config: dir.join("falco.yaml"),
            }),
            ..command_launch(&dir, Duration::from_secs(2))
        };
        let snapshot = dir.join("f.metrics.jsonl");
        let loop_of_falco = {
            let dir = dir.clone();
            std::thread::spawn(move || {
                let opened = sys::wait_dir_opened(&dir, Duration::from_secs(6)).unwrap();
                if opened {
                    fs::write(&snapshot, "{}\n").unwrap();
                }
                opened
            })
        };
        let started =
            BackgroundAgent::start(&AgentSpec::Falco { args: vec![] }, &launch, None, "f");
        let opened = loop_of_falco.join().unwrap();
        let exit = started.expect("ready once it was given an event").stop();
        assert!(opened, "the bench's wait opened the snapshot's directory");
        assert!(exit.stalled_starts.is_empty(), "{:?}", exit.stalled_starts);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_agent_that_stalls_before_ready_is_started_again_once() {
        let dir = std::env::temp_dir().join(format!("vigil-bench-stall-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let launch = command_launch(&dir, Duration::from_millis(500));
        // Each start appends to `starts`; `ready_on` says on which start it prints READY.
        let script = dir.join("agent.sh");
        fs::write(
            &script,
            "d=$(dirname \"$0\"); echo x >> \"$d/starts\"; echo \"start $(wc -l < \"$d/starts\")\" >&2
             [ \"$(wc -l < \"$d/starts\")\" -ge \"$(cat \"$d/ready_on\")\" ] && echo READY >&2
             while :; do sleep 0.05; done
",
        )
        .unwrap();
        let spec = AgentSpec::Cmd(format!("sh {}", script.display()));
        let starts = || {
            fs::read_to_string(dir.join("starts"))
                .unwrap()
                .lines()
                .count()
        };

        fs::write(dir.join("ready_on"), "2").unwrap();
        let agent = BackgroundAgent::start(&spec, &launch, None, "t").expect("second start");
        let exit = agent.stop();
        assert_eq!(starts(), 2, "started twice");
        assert_eq!(exit.stalled_starts.len(), 1, "{:?}", exit.stalled_starts);
        assert!(
            exit.stalled_starts[0].contains("did not print `READY`"),
            "{:?}",
            exit.stalled_starts
        );
        let kept = fs::read_to_string(dir.join("t.stalled-1.stderr")).expect("stalled log kept");
        assert!(kept.contains("start 1"), "{kept}");

        // Never ready: START_ATTEMPTS starts, then the error.
        fs::remove_file(dir.join("starts")).unwrap();
        fs::write(dir.join("ready_on"), "99").unwrap();
        let err = BackgroundAgent::start(&spec, &launch, None, "u")
            .err()
            .expect("never ready");
        assert!(err.to_string().contains("did not print"), "{err}");
        assert_eq!(starts(), START_ATTEMPTS, "one start again, not more");
        let _ = fs::remove_dir_all(&dir);
    }
}

//! Running the cases under a driver through the `vigil` binary, and reading back what it
//! captured (`-w FILE.jsonl`).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, Ipv6Addr, TcpListener, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use vigil_event::codec::{Capture, CaptureError};
use vigil_event::Event;

use crate::cases::{self, Case};
use crate::check::{check_case, Context, Mismatch};

/// Why a driver could not run the cases.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    #[error("cannot {what}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "`vigil watch` did not report `vigil: watching` within {secs} s; its stderr:\n{stderr}"
    )]
    NotReady { secs: u64, stderr: String },
    #[error("cannot read the capture `{path}`")]
    Capture {
        path: PathBuf,
        #[source]
        source: CaptureError,
    },
    #[error("{what} did not end within {secs} s")]
    Timeout { what: String, secs: u64 },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> DriverError {
    let what = what.into();
    move |source| DriverError::Io { what, source }
}

/// Where the binaries and the scratch space are.
#[derive(Clone, Debug)]
pub struct Setup {
    /// The `vigil` binary.
    pub vigil: PathBuf,
    /// The `vigil-trigger` binary.
    pub trigger: PathBuf,
    /// A scratch directory (created if missing); each driver uses a subdirectory.
    pub work: PathBuf,
}

/// One case as a driver ran it.
#[derive(Debug)]
pub struct CaseRun {
    pub case: &'static Case,
    pub ctx: Context,
    /// The trigger's exit status (as the driver passed it on), or why there is none.
    pub exit: Result<i32, String>,
    /// The trigger's stderr (empty unless a setup step failed).
    pub stderr: String,
    /// Every event of the capture (the checker picks the trigger's pid).
    pub events: Vec<Event>,
}

/// A way to run the trigger and capture what it does.
pub trait Driver {
    /// `watch` or `run`.
    fn name(&self) -> &'static str;
    /// What this machine or process lacks for the driver (checked before `vigil` is built).
    fn missing_privilege(&self) -> Option<String>;
    /// Why this driver cannot run with these binaries (`None`: it can).
    fn unavailable(&self, setup: &Setup) -> Option<String>;
    /// Runs `cases` and returns what was captured for each.
    fn run_cases(
        &mut self,
        setup: &Setup,
        cases: &[&'static Case],
    ) -> Result<Vec<CaseRun>, DriverError>;
}

/// The checker over every run: exit statuses, setup failures and expectations.
pub fn evaluate(runs: &[CaseRun]) -> Vec<Mismatch> {
    let mut out = Vec::new();
    for run in runs {
        let exit_ok = run.exit.as_ref().is_ok_and(|c| *c == run.case.exit_code);
        if !exit_ok {
            let mut actual = match &run.exit {
                Ok(code) => format!("exit status {code}"),
                Err(e) => e.clone(),
            };
            if !run.stderr.trim().is_empty() {
                actual.push_str(": ");
                actual.push_str(run.stderr.trim());
            }
            out.push(Mismatch {
                case: run.case.name.to_string(),
                event: "exit".to_string(),
                param: "-".to_string(),
                expected: format!("exit status {}", run.case.exit_code),
                actual,
            });
        }
        out.extend(check_case(run.case, &run.ctx, &run.events));
    }
    out
}

/// A rules file whose single rule watches every event type the cases need and never matches,
/// so that a driver deriving its interest set from the rules captures them all.
pub fn rules_yaml() -> String {
    let types = cases::event_types().join(", ");
    format!(
        "- rule: Vigil conformance capture\n  \
         desc: watches every event type of the driver-conformance cases; never matches\n  \
         condition: evt.type in ({types}) and proc.name = \"vigil-never-matches\"\n  \
         output: \"conformance %evt.type\"\n  \
         priority: EMERGENCY\n"
    )
}

/// The ids of this process (real uid and gid, whether the effective uid is 0).
fn own_ids() -> (u32, u32, bool) {
    match vigil_procfs::own_status() {
        Ok(s) if s.has_ids => (s.uid, s.gid, s.euid == 0),
        _ => (u32::MAX, u32::MAX, false),
    }
}

/// Whether this process runs with effective uid 0.
pub fn is_root() -> bool {
    own_ids().2
}

/// A loopback port `p` such that `p` and `p + 1` are free for TCP and UDP.
fn free_port_pair() -> Result<u16, DriverError> {
    let lo = Ipv4Addr::LOCALHOST;
    for _ in 0..100 {
        let probe = TcpListener::bind((lo, 0)).map_err(io("bind a loopback port"))?;
        let p = probe.local_addr().map_err(io("read a bound port"))?.port();
        drop(probe);
        let Some(q) = p.checked_add(1) else { continue };
        let free = [p, q].iter().all(|&port| {
            TcpListener::bind((lo, port)).is_ok()
                && UdpSocket::bind((lo, port)).is_ok()
                && TcpListener::bind((Ipv6Addr::LOCALHOST, port)).map_or_else(
                    |e| e.kind() == std::io::ErrorKind::AddrNotAvailable,
                    |_| true,
                )
        });
        if free {
            return Ok(p);
        }
    }
    Err(DriverError::Io {
        what: "find two consecutive free loopback ports".to_string(),
        source: std::io::Error::other("none found in 100 tries"),
    })
}

/// A fresh, empty directory for one case (absolute).
fn case_dir(base: &Path, case: &str) -> Result<PathBuf, DriverError> {
    let dir = base.join(case);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io(format!("clear {}", dir.display())))?;
    }
    std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
    std::fs::canonicalize(&dir).map_err(io(format!("resolve {}", dir.display())))
}

/// Waits for `child` at most `limit`; kills it after that.
fn wait_timeout(child: &mut Child, what: &str, limit: Duration) -> Result<ExitStatus, DriverError> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().map_err(io(format!("wait for {what}")))? {
            return Ok(status);
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(DriverError::Timeout {
                what: what.to_string(),
                secs: limit.as_secs(),
            });
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn exit_code(status: ExitStatus) -> Result<i32, String> {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Ok(code),
        (None, Some(sig)) => Err(format!("killed by signal {sig}")),
        (None, None) => Err("no exit status".to_string()),
    }
}

fn read_capture(path: &Path) -> Result<Vec<Event>, DriverError> {
    let file = File::open(path).map_err(io(format!("open {}", path.display())))?;
    let capture = Capture::read(BufReader::new(file)).map_err(|source| DriverError::Capture {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(capture.events)
}

fn read_all(pipe: Option<impl Read>) -> String {
    let mut s = String::new();
    if let Some(mut p) = pipe {
        let _ = p.read_to_string(&mut s);
    }
    s
}

const TRIGGER_LIMIT: Duration = Duration::from_secs(30);

/// `vigil watch` (eBPF): one watcher for all cases, cases told apart by the trigger's pid.
#[derive(Debug, Default)]
pub struct Watch {
    /// `--syscall-hook` (default: the agent's own choice).
    pub hook: Option<&'static str>,
}

impl Driver for Watch {
    fn name(&self) -> &'static str {
        match self.hook {
            None => "watch",
            Some("raw") => "watch-raw",
            Some("tracepoint") => "watch-tracepoint",
            Some("exit") => "watch-exit",
            Some("fexit") => "watch-fexit",
            Some(_) => "watch-other",
        }
    }

    fn missing_privilege(&self) -> Option<String> {
        (!is_root()).then(|| "not root (eBPF capture needs root)".to_string())
    }

    fn unavailable(&self, setup: &Setup) -> Option<String> {
        if !setup.vigil.is_file() {
            return Some(format!("no vigil binary at {}", setup.vigil.display()));
        }
        None
    }

    fn run_cases(
        &mut self,
        setup: &Setup,
        cases: &[&'static Case],
    ) -> Result<Vec<CaseRun>, DriverError> {
        let base = setup.work.join("watch");
        std::fs::create_dir_all(&base).map_err(io(format!("create {}", base.display())))?;
        let rules = base.join("conformance-rules.yaml");
        std::fs::write(&rules, rules_yaml()).map_err(io("write the rules file"))?;
        let capture = base.join("capture.jsonl");
        let mut watch = Command::new(&setup.vigil)
            .arg("watch")
            // Cases include syscalls this kernel may not implement (init_module without module
            // support): capture their attempts too.
            .arg("--raw-fallback")
            .args(self.hook.iter().flat_map(|hook| ["--syscall-hook", hook]))
            // No web server: another agent may hold its port, which would stop the start.
            .args(["-o", "webserver.enabled=false"])
            .arg("-r")
            .arg(&rules)
            .arg("-w")
            .arg(&capture)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(io("start `vigil watch`"))?;
        let stderr = watch.stderr.take();
        let (tx, rx) = mpsc::channel::<String>();
        let reader = std::thread::spawn(move || {
            if let Some(stderr) = stderr {
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            }
        });
        let mut err_lines = Vec::new();
        let ready_limit = Duration::from_secs(120);
        let start = Instant::now();
        let ready = loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(line) => {
                    let watching = line.contains("vigil: watching");
                    err_lines.push(line);
                    if watching {
                        break true;
                    }
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break false,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if start.elapsed() > ready_limit {
                        break false;
                    }
                }
            }
        };
        if !ready {
            let _ = watch.kill();
            let _ = watch.wait();
            let _ = reader.join();
            err_lines.extend(rx.try_iter());
            return Err(DriverError::NotReady {
                secs: ready_limit.as_secs(),
                stderr: err_lines.join("\n"),
            });
        }

        let (uid, gid, root) = own_ids();
        let mut runs = Vec::new();
        let mut failure = None;
        for &case in cases {
            match run_trigger_directly(setup, &base, case, uid, gid, root) {
                Ok(run) => runs.push(run),
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        // Every trigger has exited (its events are committed); `vigil watch` drains the ring
        // buffers and its reordering window when it stops.
        let _ = crate::sys::kill(watch.id() as i32, libc::SIGTERM);
        let status = wait_timeout(
            &mut watch,
            "`vigil watch` after SIGTERM",
            Duration::from_secs(60),
        );
        let _ = reader.join();
        err_lines.extend(rx.try_iter());
        if let Some(e) = failure {
            return Err(e);
        }
        let status = status?;
        if !status.success() {
            return Err(DriverError::Io {
                what: format!("run `vigil watch` (it ended with {status})"),
                source: std::io::Error::other(err_lines.join("\n")),
            });
        }
        let events = read_capture(&capture)?;
        for run in &mut runs {
            let pid = run.ctx.pid;
            run.events = events.iter().filter(|e| e.pid == pid).cloned().collect();
        }
        Ok(runs)
    }
}

fn run_trigger_directly(
    setup: &Setup,
    base: &Path,
    case: &'static Case,
    uid: u32,
    gid: u32,
    root: bool,
) -> Result<CaseRun, DriverError> {
    let dir = case_dir(base, case.name)?;
    let port = free_port_pair()?;
    let mut child = Command::new(&setup.trigger)
        .arg(case.name)
        .arg(&dir)
        .arg(port.to_string())
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(io("start vigil-trigger"))?;
    let pid = i64::from(child.id());
    let status = wait_timeout(
        &mut child,
        &format!("vigil-trigger {}", case.name),
        TRIGGER_LIMIT,
    )?;
    let stderr = read_all(child.stderr.take());
    Ok(CaseRun {
        case,
        ctx: Context {
            dir,
            port,
            pid,
            uid,
            gid,
            root,
            traced: false,
        },
        exit: exit_code(status),
        stderr,
        events: Vec::new(),
    })
}

/// `vigil run -- vigil-trigger CASE …` (ptrace): one run and one capture per case.
#[derive(Debug, Default)]
pub struct Run;

impl Driver for Run {
    fn name(&self) -> &'static str {
        "run"
    }

    fn missing_privilege(&self) -> Option<String> {
        None
    }

    fn unavailable(&self, setup: &Setup) -> Option<String> {
        let help = Command::new(&setup.vigil)
            .args(["run", "--help"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        match help {
            Ok(s) if s.success() => None,
            Ok(s) => Some(format!(
                "`{} run --help` failed ({s}): this `vigil` has no `run` command yet",
                setup.vigil.display()
            )),
            Err(e) => Some(format!("cannot run {}: {e}", setup.vigil.display())),
        }
    }

    fn run_cases(
        &mut self,
        setup: &Setup,
        cases: &[&'static Case],
    ) -> Result<Vec<CaseRun>, DriverError> {
        let base = setup.work.join("run");
        std::fs::create_dir_all(&base).map_err(io(format!("create {}", base.display())))?;
        let rules = base.join("conformance-rules.yaml");
        std::fs::write(&rules, rules_yaml()).map_err(io("write the rules file"))?;
        let (uid, gid, root) = own_ids();
        let mut runs = Vec::new();
        for &case in cases {
            let dir = case_dir(&base, case.name)?;
            let capture = base.join(format!("{}.jsonl", case.name));
            let port = free_port_pair()?;
            let mut child = Command::new(&setup.vigil)
                .arg("run")
                .arg("-r")
                .arg(&rules)
                .arg("-w")
                .arg(&capture)
                .arg("--")
                .arg(&setup.trigger)
                .arg(case.name)
                .arg(&dir)
                .arg(port.to_string())
                .current_dir(&dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(io("start `vigil run`"))?;
            let status = wait_timeout(
                &mut child,
                &format!("vigil run -- vigil-trigger {}", case.name),
                TRIGGER_LIMIT,
            )?;
            let stderr = read_all(child.stderr.take());
            let (events, exit) = match read_capture(&capture) {
                Ok(events) => (events, exit_code(status)),
                Err(e) => (Vec::new(), Err(format!("{e} ({})", error_chain(&e)))),
            };
            // The workload is the first process in the capture (vigil run records only it
            // and its descendants).
            let pid = events.first().map_or(-1, |e| e.pid);
            runs.push(CaseRun {
                case,
                ctx: Context {
                    dir,
                    port,
                    pid,
                    uid,
                    gid,
                    root,
                    traced: true,
                },
                exit,
                stderr,
                events,
            });
        }
        Ok(runs)
    }
}

/// An error and its sources, joined with `: `.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rules_file_watches_every_expected_type() {
        let yaml = rules_yaml();
        for t in cases::event_types() {
            assert!(
                yaml.contains(&format!(" {t},"))
                    || yaml.contains(&format!(" {t})"))
                    || yaml.contains(&format!("({t},")),
                "{t}"
            );
        }
        assert!(yaml.contains("priority: EMERGENCY"));
    }

    #[test]
    fn port_pairs_are_free() {
        let p = free_port_pair().unwrap();
        TcpListener::bind((Ipv4Addr::LOCALHOST, p + 1)).unwrap();
    }

    #[test]
    fn exit_mismatches_are_reported_with_stderr() {
        let case = cases::case("kill").unwrap();
        let run = CaseRun {
            case,
            ctx: Context {
                dir: PathBuf::from("/x"),
                port: 1,
                pid: 5,
                uid: 0,
                gid: 0,
                root: true,
                traced: false,
            },
            exit: Ok(100),
            stderr: "vigil-trigger kill: boom\n".to_string(),
            events: Vec::new(),
        };
        let m = evaluate(&[run]);
        assert_eq!(m.len(), 2, "{m:?}");
        assert_eq!(m[0].event, "exit");
        assert!(m[0].actual.contains("boom"), "{m:?}");
    }
}

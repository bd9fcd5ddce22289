//! Least privilege of the live commands, from the outside: what `/proc/PID/status` says about a
//! running `vigil watch` and `vigil run` tracer (every thread), what the programs they start
//! and the workload get, file modes under `umask 000`, and a web server port clash.
//!
//! Requirements: root for the capability tests (`vigil run` as root; `vigil watch` also needs
//! eBPF and tracefs mounted), ptrace of a child for the `vigil run` file tests, `setpriv`
//! (util-linux) for the workload that changes user. Missing requirements skip with a reason
//! and fail under `VIGIL_TEST_STRICT=1`.

use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::support::{can_trace, host, is_root, scratch, skip, text, VIGIL};

/// How long `vigil watch` may take to load, attach and read `/proc` on a busy machine.
const START_WAIT: Duration = Duration::from_secs(180);
/// How long an expected alert, file or message may take.
const WAIT: Duration = Duration::from_secs(60);

/// Capability numbers (include/uapi/linux/capability.h).
const CAP_DAC_READ_SEARCH: u32 = 2;
const CAP_KILL: u32 = 5;
const CAP_SYS_PTRACE: u32 = 19;
const CAP_PERFMON: u32 = 38;
const CAP_BPF: u32 = 39;

/// The documented kept sets (`vigil_privs`, ARCHITECTURE.md).
const WATCH_KEEPS: &[u32] = &[CAP_DAC_READ_SEARCH, CAP_SYS_PTRACE, CAP_PERFMON, CAP_BPF];
const TRACER_KEEPS: &[u32] = &[CAP_DAC_READ_SEARCH, CAP_KILL, CAP_SYS_PTRACE];

/// One agent at a time: two captures on a 2-core machine only slow each other down.
static LIVE: Mutex<()> = Mutex::new(());

fn mask(caps: &[u32]) -> u64 {
    caps.iter().fold(0, |m, c| m | (1u64 << c))
}

/// The `Key:\tvalue` lines of a `/proc/.../status` file.
fn status_of(path: &Path) -> BTreeMap<String, String> {
    parse_status(&fs::read_to_string(path).unwrap_or_default())
}

fn parse_status(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

fn hex(status: &BTreeMap<String, String>, key: &str) -> u64 {
    let v = status
        .get(key)
        .unwrap_or_else(|| panic!("no {key} in {status:?}"));
    u64::from_str_radix(v, 16).unwrap_or_else(|_| panic!("{key}: {v}"))
}

/// This test process's permitted capabilities (what a `vigil` it starts begins with).
fn own_permitted() -> u64 {
    hex(&status_of(Path::new("/proc/self/status")), "CapPrm")
}

/// Asserts a reduced agent thread: effective = permitted = `expected`, nothing inheritable or
/// ambient, an empty bounding set, `no_new_privs`.
fn assert_reduced(what: &str, status: &BTreeMap<String, String>, expected: u64) {
    assert_eq!(hex(status, "CapEff"), expected, "{what}: CapEff {status:?}");
    assert_eq!(hex(status, "CapPrm"), expected, "{what}: CapPrm {status:?}");
    assert_eq!(hex(status, "CapInh"), 0, "{what}: CapInh {status:?}");
    assert_eq!(hex(status, "CapAmb"), 0, "{what}: CapAmb {status:?}");
    assert_eq!(hex(status, "CapBnd"), 0, "{what}: CapBnd {status:?}");
    assert_eq!(
        status.get("NoNewPrivs").map(String::as_str),
        Some("1"),
        "{what}: NoNewPrivs {status:?}"
    );
}

/// Every thread of `pid`: (thread name, status).
fn threads_of(pid: u32) -> Vec<(String, BTreeMap<String, String>)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(format!("/proc/{pid}/task")).expect("list threads") {
        let status = status_of(&entry.expect("thread entry").path().join("status"));
        let name = status.get("Name").cloned().unwrap_or_default();
        out.push((name, status));
    }
    out
}

fn mode(path: &Path) -> u32 {
    fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `vigil ARGS…` started by `sh -c 'umask 000; exec …'`, so that nothing but Vigil's own
/// choice decides the modes of the files it creates.
fn vigil_umask0(args: &[String]) -> Command {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg("umask 000; exec \"$@\"")
        .arg("sh")
        .arg(VIGIL)
        .args(args)
        .stdin(Stdio::null());
    cmd
}

fn s(v: impl AsRef<std::ffi::OsStr>) -> String {
    v.as_ref().to_string_lossy().into_owned()
}

/// A rule on the open of `path` (any open-family call), with `extra` output fields.
fn open_rule(name: &str, path: &Path, extra: &str) -> String {
    format!(
        "- rule: {name}\n  desc: t\n  condition: evt.type in (open, openat, openat2) and fd.name = {}\n  output: \"{name} %fd.name{extra}\"\n  priority: WARNING\n",
        path.display()
    )
}

/// A running agent whose stdout and stderr lines are collected.
struct Agent {
    child: Child,
    stdout: Arc<Mutex<Vec<String>>>,
    stderr: Arc<Mutex<Vec<String>>>,
}

fn collect(pipe: impl Read + Send + 'static) -> Arc<Mutex<Vec<String>>> {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&lines);
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            sink.lock().unwrap().push(line);
        }
    });
    lines
}

impl Agent {
    fn spawn(mut cmd: Command) -> Agent {
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start vigil");
        let stdout = collect(child.stdout.take().expect("stdout"));
        let stderr = collect(child.stderr.take().expect("stderr"));
        Agent {
            child,
            stdout,
            stderr,
        }
    }

    fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    fn stdout_has(&self, needle: &str) -> bool {
        self.stdout
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains(needle))
    }

    /// Waits for a stderr line containing `needle`; panics with the stderr if the agent
    /// exits first or it takes longer than `limit`.
    fn wait_stderr(&mut self, needle: &str, limit: Duration) -> String {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(l) = self
                .stderr
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
            {
                return l.clone();
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(200));
                panic!(
                    "vigil exited ({status}) before `{needle}`:\n{}",
                    self.stderr()
                );
            }
            assert!(
                Instant::now() < deadline,
                "no `{needle}` on stderr:\n{}",
                self.stderr()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} failed");
    }

    /// SIGTERM, then the exit status.
    fn stop(mut self) -> std::process::ExitStatus {
        self.signal("TERM");
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status;
            }
            assert!(Instant::now() < deadline, "vigil did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why `vigil watch` cannot run here, if it cannot: as `vigil watch` itself says (it names
/// what eBPF capture needs and is missing: privileges, BTF, tracefs).
fn watch_missing() -> Option<String> {
    if !is_root() {
        return Some("not root (vigil watch needs root and eBPF)".into());
    }
    let out = Command::new(VIGIL)
        .args(["watch", "--duration", "0", "-o", "webserver.enabled=false"])
        .args(["-o", "syslog_output.enabled=false"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .output()
        .expect("run vigil watch");
    let err = text(&out.stderr);
    if !out.status.success() && err.contains("eBPF capture needs") {
        return Some(err.trim().to_owned());
    }
    None
}

fn http_get(port: u16, path: &str) -> String {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to the webserver");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("send");
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    answer
}

#[test]
fn watch_keeps_only_the_documented_capabilities_and_writes_private_files() {
    let _host = host::alone(module_path!());
    const TEST: &str = "watch_keeps_only_the_documented_capabilities_and_writes_private_files";
    if let Some(why) = watch_missing() {
        skip(TEST, &why);
        return;
    }
    let _live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("watch");
    let probe = dir.join("probe");
    fs::write(&probe, "p\n").unwrap();
    let made = dir.join("made");
    let rules = dir.join("rules.yaml");
    fs::write(&rules, open_rule("Privs probe", &probe, "")).unwrap();
    let program_status = dir.join("program-status");
    let program = format!(
        "cat >/dev/null; grep -E '^(Cap|NoNewPrivs)' /proc/self/status > {}",
        program_status.display()
    );
    let (capture, stats, alerts, metrics) = (
        dir.join("capture.vcap"),
        dir.join("stats.jsonl"),
        dir.join("alerts.txt"),
        dir.join("metrics.jsonl"),
    );
    let mut args: Vec<String> = vec!["watch".into(), "--json".into(), "-r".into(), s(&rules)];
    args.extend(["-w".into(), s(&capture), "-s".into(), s(&stats)]);
    for option in [
        "syslog_output.enabled=false".to_owned(),
        // Reloads by SIGHUP alone (the rewritten rules file would reload by itself).
        "watch_config_files=false".to_owned(),
        "webserver.enabled=true".to_owned(),
        "webserver.listen_port=0".to_owned(),
        "file_output.enabled=true".to_owned(),
        format!("file_output.filename={}", alerts.display()),
        "program_output.enabled=true".to_owned(),
        format!("program_output.program={program}"),
        "metrics.enabled=true".to_owned(),
        "metrics.output_rule=false".to_owned(),
        format!("metrics.output_file={}", metrics.display()),
    ] {
        args.push("-o".into());
        args.push(option);
    }
    let mut agent = Agent::spawn(vigil_umask0(&args));
    agent.wait_stderr("vigil: watching", START_WAIT);
    let pid = agent.child.id();

    // Every thread — the event loop, each output worker, the web server — is reduced.
    let expected = mask(WATCH_KEEPS) & own_permitted();
    let threads = threads_of(pid);
    let names: Vec<&str> = threads.iter().map(|(n, _)| n.as_str()).collect();
    assert!(
        names.iter().any(|n| n.starts_with("vigil-web")) && names.len() >= 3,
        "the threads started after the drop are there: {names:?}"
    );
    for (name, status) in &threads {
        assert_reduced(&format!("vigil watch thread `{name}`"), status, expected);
    }

    // The web server serves after the drop.
    let listening = agent.wait_stderr("webserver listening on http://", WAIT);
    let port: u16 = listening
        .rsplit(':')
        .next()
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no port in `{listening}`"));
    let health = http_get(port, "/healthz");
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");

    // An alert: the program output's `sh -c` runs with no capability at all.
    fs::read(&probe).unwrap();
    wait_until("the probe alert", WAIT, || agent.stdout_has("Privs probe"));
    wait_until("the program output's status", WAIT, || {
        fs::read_to_string(&program_status).is_ok_and(|t| t.contains("NoNewPrivs"))
    });
    let child = parse_status(&fs::read_to_string(&program_status).unwrap());
    for key in ["CapEff", "CapPrm", "CapInh", "CapAmb", "CapBnd"] {
        assert_eq!(hex(&child, key), 0, "program_output child {key}: {child:?}");
    }
    assert_eq!(child.get("NoNewPrivs").map(String::as_str), Some("1"));

    // SIGHUP after the drop: the new rules watch mkdir, which the start did not attach, so
    // the reload attaches new tracepoints with the kept capabilities.
    let mkdir_rule = format!(
        "- rule: Privs mkdir\n  desc: t\n  condition: evt.type in (mkdir, mkdirat) and evt.arg.path contains {}\n  output: \"Privs mkdir %evt.arg.path\"\n  priority: WARNING\n",
        made.display()
    );
    fs::write(
        &rules,
        format!("{}{mkdir_rule}", open_rule("Privs probe", &probe, "")),
    )
    .unwrap();
    agent.signal("HUP");
    agent.wait_stderr("SIGHUP: reloaded configuration and 2 rules", WAIT);
    // The reload notice precedes the attach of the new tracepoints; this line follows it.
    agent.wait_stderr("syscalls after the reload", WAIT);
    assert!(
        !agent.stderr().contains("cannot apply the reloaded rules"),
        "{}",
        agent.stderr()
    );
    fs::create_dir(&made).unwrap();
    wait_until("the mkdir alert after the reload", WAIT, || {
        agent.stdout_has("Privs mkdir")
    });
    for (name, status) in &threads_of(pid) {
        assert_reduced(&format!("after SIGHUP, thread `{name}`"), status, expected);
    }

    let err = agent.stderr();
    let status = agent.stop();
    assert!(status.success(), "vigil watch exit {status}:\n{err}");
    for file in [&capture, &stats, &alerts, &metrics] {
        assert_eq!(mode(file), 0o600, "{} under umask 000", file.display());
    }
    assert!(
        fs::read_to_string(&alerts).unwrap().contains("Privs probe"),
        "file output written"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn watch_exits_when_the_webserver_port_is_taken_unless_told_to_continue() {
    let _host = host::alone(module_path!());
    const TEST: &str = "watch_exits_when_the_webserver_port_is_taken_unless_told_to_continue";
    if let Some(why) = watch_missing() {
        skip(TEST, &why);
        return;
    }
    let _live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = taken.local_addr().unwrap().port();
    let run = |extra: &[&str]| -> Output {
        Command::new(VIGIL)
            .args([
                "watch",
                "--duration",
                "1",
                "-o",
                "syslog_output.enabled=false",
            ])
            .args(["-o", "webserver.enabled=true", "-o"])
            .arg(format!("webserver.listen_port={port}"))
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .output()
            .expect("run vigil watch")
    };
    let out = run(&[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("127.0.0.1:{port}")) && err.contains("bind_failure"),
        "the message names the address and the way out: {err}"
    );
    assert!(!err.contains("vigil: watching"), "{err}");
    let out = run(&["-o", "webserver.bind_failure=continue"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("webserver not started") && err.contains(&format!("127.0.0.1:{port}")),
        "{err}"
    );
    assert!(err.contains("vigil: watching"), "{err}");
    drop(taken);
}

/// A JSON lines capture with one process: enough for `vigil replay --follow` to start.
fn capture_header() -> String {
    let header = serde_json::json!({"vigil_capture": 1, "hostname": "t", "start_ts": 1_700_000_000_000_000_000u64});
    let init = serde_json::json!({"thread": {"tid": 1, "pid": 1, "ppid": 0, "comm": "init",
        "exe": "/sbin/init", "exepath": "/sbin/init", "args": [], "cwd": "/", "uid": 0, "gid": 0,
        "euid": 0, "egid": 0, "loginuid": 4_294_967_295u64, "tty": 0, "cgroup": "/"}});
    format!("{header}\n{init}\n")
}

#[test]
fn replay_follow_exits_1_on_a_taken_webserver_port_unless_told_to_continue() {
    let _host = host::alone(module_path!());
    let dir = scratch("port");
    let capture = dir.join("capture.jsonl");
    fs::write(&capture, capture_header()).unwrap();
    let taken = TcpListener::bind("127.0.0.1:0").expect("bind a port");
    let port = taken.local_addr().unwrap().port();
    let cmd = |extra: &[&str]| {
        let mut cmd = Command::new(VIGIL);
        cmd.args(["replay", "--follow"])
            .arg(&capture)
            .args([
                "-o",
                "syslog_output.enabled=false",
                "-o",
                "webserver.enabled=true",
            ])
            .arg("-o")
            .arg(format!("webserver.listen_port={port}"))
            .args(extra)
            .stdin(Stdio::null());
        cmd
    };
    let out = cmd(&[]).output().expect("run vigil replay --follow");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!("webserver: cannot listen on `127.0.0.1:{port}`"))
            && err.contains("bind_failure: continue"),
        "{err}"
    );
    // Told to continue: it runs on (following the capture) until stopped.
    let mut agent = Agent::spawn(cmd(&["-o", "webserver.bind_failure=continue"]));
    agent.wait_stderr("webserver not started", WAIT);
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        agent.child.try_wait().expect("wait").is_none(),
        "still running: {}",
        agent.stderr()
    );
    let err = agent.stderr();
    let status = agent.stop();
    assert!(status.success(), "exit {status}: {err}");
    drop(taken);
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn run_tracer_drops_and_the_workload_keeps_its_privileges() {
    let _host = host::alone(module_path!());
    const TEST: &str = "run_tracer_drops_and_the_workload_keeps_its_privileges";
    if !is_root() {
        skip(TEST, "not root (the tracer has nothing to drop)");
        return;
    }
    if !can_trace(TEST) {
        return;
    }
    let dir = scratch("run-caps");
    let probe = dir.join("probe");
    fs::write(&probe, "p\n").unwrap();
    let rules = dir.join("rules.yaml");
    fs::write(&rules, open_rule("Privs probe", &probe, "")).unwrap();
    let (workload, tracer, program_status) = (
        dir.join("workload"),
        dir.join("tracer"),
        dir.join("program-status"),
    );
    // The workload records its own status and every thread of its parent, the tracer, then
    // opens the probe (an alert for the program output).
    let script = format!(
        "grep -E '^(Cap|NoNewPrivs)' /proc/self/status > {w}; \
         for t in /proc/$PPID/task/*; do grep -E '^(Name|Cap|NoNewPrivs)' $t/status; echo; done > {t}; \
         cat {p} > /dev/null",
        w = workload.display(),
        t = tracer.display(),
        p = probe.display()
    );
    let program = format!(
        "cat >/dev/null; grep -E '^(Cap|NoNewPrivs)' /proc/self/status > {}",
        program_status.display()
    );
    let out = Command::new(VIGIL)
        .arg("run")
        .arg("-r")
        .arg(&rules)
        .args(["-o", "program_output.enabled=true", "-o"])
        .arg(format!("program_output.program={program}"))
        .args(["--", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .expect("run vigil run");
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("Privs probe"), "the alert: {err}");

    let own = status_of(Path::new("/proc/self/status"));
    let workload = parse_status(&fs::read_to_string(&workload).unwrap());
    for key in ["CapEff", "CapPrm", "CapBnd", "CapInh", "CapAmb"] {
        assert_eq!(
            hex(&workload, key),
            hex(&own, key),
            "the workload's {key} is what Vigil started with"
        );
    }
    let expected = mask(TRACER_KEEPS) & own_permitted();
    let threads: Vec<BTreeMap<String, String>> = fs::read_to_string(&tracer)
        .unwrap()
        .split("\n\n")
        .filter(|b| b.contains("CapEff"))
        .map(parse_status)
        .collect();
    assert!(
        threads.len() >= 2,
        "the program output's worker thread runs in the tracer: {threads:?}"
    );
    for status in &threads {
        let name = status.get("Name").cloned().unwrap_or_default();
        assert_reduced(&format!("tracer thread `{name}`"), status, expected);
    }
    // The remote outputs deliver at exit; the program is done by then.
    let child = parse_status(&fs::read_to_string(&program_status).unwrap_or_default());
    for key in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
        assert_eq!(hex(&child, key), 0, "program_output child {key}: {child:?}");
    }
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn run_follows_and_signals_a_workload_that_changed_user() {
    let _host = host::alone(module_path!());
    const TEST: &str = "run_follows_and_signals_a_workload_that_changed_user";
    if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
        skip(TEST, "needs root and /usr/bin/setpriv");
        return;
    }
    if !can_trace(TEST) {
        return;
    }
    let dir = scratch("run-setuid");
    let probe = dir.join("probe");
    fs::write(&probe, "p\n").unwrap();
    fs::set_permissions(&probe, fs::Permissions::from_mode(0o644)).unwrap();
    let rules = dir.join("rules.yaml");
    fs::write(
        &rules,
        open_rule(
            "Privs probe",
            &probe,
            " uid=%user.uid exe=%proc.exepath cwd=%proc.cwd mark=%proc.env[VIGIL_PRIV_MARK]",
        ),
    )
    .unwrap();
    let alerts = dir.join("alerts.txt");
    // As user 65534 (its /proc files are its own, mode 0400/0500): an exec the tracer
    // describes from /proc, an open, then a long sleep that only a forwarded SIGTERM ends.
    let script = format!("cat {} > /dev/null; exec sleep 300", probe.display());
    let mut cmd = Command::new(VIGIL);
    cmd.arg("run")
        .arg("-r")
        .arg(&rules)
        .arg("--alerts")
        .arg(&alerts)
        .args(["--", "/usr/bin/setpriv", "--reuid=65534", "--regid=65534"])
        .args(["--clear-groups", "sh", "-c", &script])
        .env("VIGIL_PRIV_MARK", "marked")
        .current_dir(&dir);
    let agent = Agent::spawn(cmd);
    wait_until("the alert of the changed-user workload", WAIT, || {
        fs::read_to_string(&alerts).is_ok_and(|t| t.contains("Privs probe"))
    });
    let line = fs::read_to_string(&alerts).unwrap();
    for want in [
        "uid=65534".to_owned(),
        "exe=/usr/bin/cat".to_owned(),
        format!("cwd={}/", dir.display()),
        "mark=marked".to_owned(),
    ] {
        assert!(line.contains(&want), "`{want}` in {line}");
    }
    // SIGTERM to Vigil reaches the workload (another user's process: CAP_KILL), which dies
    // of it; Vigil then exits the same way.
    let started = Instant::now();
    let status = agent.stop();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(15),
        "vigil ends as the workload did: {status}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "the signal was forwarded (not the sleep ending)"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn run_as_a_user_without_capabilities_only_sets_no_new_privs() {
    let _host = host::alone(module_path!());
    const TEST: &str = "run_as_a_user_without_capabilities_only_sets_no_new_privs";
    if !is_root() || !Path::new("/usr/bin/setpriv").exists() {
        skip(
            TEST,
            "needs root and /usr/bin/setpriv to start vigil run as user 65534",
        );
        return;
    }
    let out = Command::new("/usr/bin/setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", VIGIL])
        .args(["run", "--", "sh", "-c"])
        .arg("grep -E '^(Cap|NoNewPrivs)' /proc/$PPID/status; exit 3")
        .stdin(Stdio::null())
        .output()
        .expect("run setpriv");
    let err = text(&out.stderr);
    if err.contains("Permission denied") && !err.contains("vigil") {
        skip(
            TEST,
            "the vigil binary is not executable by user 65534 here",
        );
        return;
    }
    assert_eq!(out.status.code(), Some(3), "the workload's status: {err}");
    let tracer = parse_status(&text(&out.stdout));
    for key in ["CapEff", "CapPrm", "CapInh", "CapAmb"] {
        assert_eq!(hex(&tracer, key), 0, "tracer {key}: {tracer:?}");
    }
    assert_eq!(
        tracer.get("NoNewPrivs").map(String::as_str),
        Some("1"),
        "{tracer:?}"
    );
    // Without CAP_SETPCAP the bounding set cannot change (nothing to give away there).
    assert_eq!(
        hex(&tracer, "CapBnd"),
        hex(&status_of(Path::new("/proc/self/status")), "CapBnd"),
        "{tracer:?}"
    );
}

#[test]
fn run_refuses_invalid_remote_outputs_before_the_workload_runs() {
    let _host = host::alone(module_path!());
    const TEST: &str = "run_refuses_invalid_remote_outputs_before_the_workload_runs";
    if !can_trace(TEST) {
        return;
    }
    // The remote outputs start after the tracer's drop, with the workload forked and
    // waiting: a bad one is still invalid input, and the workload is killed unstarted.
    let dir = scratch("bad-output");
    let marker = dir.join("marker");
    let out = Command::new(VIGIL)
        .args(["run", "-o", "http_output.enabled=true", "-o"])
        .arg("http_output.url=notaurl")
        .args(["--", "touch"])
        .arg(&marker)
        .stdin(Stdio::null())
        .output()
        .expect("run vigil run");
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("http_output.url `notaurl`"), "{err}");
    assert!(!marker.exists(), "the workload never ran");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn files_are_owner_only_under_umask_000_and_an_open_one_is_tightened() {
    let _host = host::alone(module_path!());
    const TEST: &str = "files_are_owner_only_under_umask_000_and_an_open_one_is_tightened";
    if !can_trace(TEST) {
        return;
    }
    let dir = scratch("files");
    let probe = dir.join("probe");
    fs::write(&probe, "p\n").unwrap();
    let rules = dir.join("rules.yaml");
    fs::write(&rules, open_rule("Privs probe", &probe, "")).unwrap();
    let (alerts, capture, learned) = (
        dir.join("alerts.txt"),
        dir.join("capture.jsonl"),
        dir.join("profile.json"),
    );
    let out = vigil_umask0(&[
        "run".into(),
        "-r".into(),
        s(&rules),
        "--alerts".into(),
        s(&alerts),
        "-w".into(),
        s(&capture),
        "--learn".into(),
        s(&learned),
        "--".into(),
        "cat".into(),
        s(&probe),
    ])
    .output()
    .expect("run vigil run");
    assert!(out.status.success(), "{}", text(&out.stderr));
    for file in [&alerts, &capture, &learned] {
        assert_eq!(mode(file), 0o600, "{}", file.display());
        assert!(
            fs::metadata(file).unwrap().len() > 0,
            "{} written",
            file.display()
        );
    }

    // The capture, replayed with the agent's files: stats, file output, metrics.
    let (stats, file_output, metrics, converted) = (
        dir.join("stats.jsonl"),
        dir.join("replay-alerts.txt"),
        dir.join("metrics.jsonl"),
        dir.join("converted.vcap"),
    );
    let out = vigil_umask0(&[
        "replay".into(),
        s(&capture),
        "-r".into(),
        s(&rules),
        "-s".into(),
        s(&stats),
        "-o".into(),
        "syslog_output.enabled=false".into(),
        "-o".into(),
        "file_output.enabled=true".into(),
        "-o".into(),
        format!("file_output.filename={}", file_output.display()),
        "-o".into(),
        "metrics.enabled=true".into(),
        "-o".into(),
        format!("metrics.output_file={}", metrics.display()),
    ])
    .output()
    .expect("run vigil replay");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        fs::read_to_string(&file_output)
            .unwrap()
            .contains("Privs probe"),
        "the replay alerts"
    );
    let out = vigil_umask0(&[
        "capture".into(),
        "convert".into(),
        "--to".into(),
        "binary".into(),
        s(&capture),
        s(&converted),
    ])
    .output()
    .expect("run vigil capture convert");
    assert!(out.status.success(), "{}", text(&out.stderr));
    for file in [&stats, &file_output, &metrics, &converted] {
        assert_eq!(mode(file), 0o600, "{}", file.display());
    }

    // A learned profile is opened before the run and replaced only after it; a run that
    // never starts leaves an existing one as it was and creates none.
    let old = format!("{}\n", "x".repeat(64 * 1024));
    fs::write(&learned, &old).unwrap();
    let refused = |path: &Path| {
        Command::new(VIGIL)
            .args(["run", "--mechanism", "notify", "--learn"])
            .arg(path)
            .args(["--", "true"])
            .stdin(Stdio::null())
            .output()
            .expect("run vigil run")
    };
    assert!(!refused(&learned).status.success(), "learning needs ptrace");
    assert_eq!(fs::read_to_string(&learned).unwrap(), old, "kept as it was");
    let never = dir.join("never.json");
    assert!(!refused(&never).status.success());
    assert!(!never.exists(), "no empty profile left behind");
    let out = Command::new(VIGIL)
        .args(["run", "--learn"])
        .arg(&learned)
        .args(["--", "true"])
        .stdin(Stdio::null())
        .output()
        .expect("run vigil run");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let profile: serde_json::Value = serde_json::from_str(&fs::read_to_string(&learned).unwrap())
        .expect("the new profile replaces the old content entirely");
    assert!(profile.is_object(), "{profile}");

    // An alerts file others can read is tightened (its content kept), and the log says so.
    let shared = dir.join("shared-alerts.txt");
    fs::write(&shared, "earlier\n").unwrap();
    fs::set_permissions(&shared, fs::Permissions::from_mode(0o644)).unwrap();
    let out = Command::new(VIGIL)
        .arg("run")
        .arg("-r")
        .arg(&rules)
        .arg("--alerts")
        .arg(&shared)
        .args(["--", "cat"])
        .arg(&probe)
        .stdin(Stdio::null())
        .output()
        .expect("run vigil run");
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(mode(&shared), 0o600);
    assert!(
        err.contains(&format!(
            "`{}` was readable by group or others",
            shared.display()
        )) && err.contains("tightened to 600"),
        "{err}"
    );
    let content = fs::read_to_string(&shared).unwrap();
    assert!(
        content.starts_with("earlier\n") && content.contains("Privs probe"),
        "{content}"
    );
    let _ = fs::remove_dir_all(&dir);
}

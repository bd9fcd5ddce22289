//! Routine host activity raises no alert from the embedded default rules (root, eBPF, network
//! to the Debian mirror and PyPI, runc and the test root filesystem; strict in CI).
//!
//! `vigil watch --json` runs with the embedded ruleset while this test performs what an
//! administrator does on an ordinary day, each step a child of this test process:
//!
//! - `apt-get install --reinstall -y jq` (download, dpkg, debconf's `dpkg-preconfigure`, the
//!   man-db trigger) and a `dpkg -s` query;
//! - `pip install` of a tiny pure-Python package (`six`) into a fresh venv;
//! - `git init`, commit and `git clone` of a local repository (no network);
//! - a runc container start and stop from the debootstrap root filesystem
//!   (`vigil_generator::runc`, as the container tests do);
//! - a cron job, *simulated*: cron is not installed here, so `run-parts` runs a job directory
//!   below a shell started under the name `cron` (a symbolic link to `/bin/sh`), which is what
//!   cron's `/etc/crontab` line does (`cd / && run-parts --report /etc/cron.hourly`) without
//!   cron's own session and PAM handling;
//! - `sudo` and `su` by root (the admin): `sudo -n true`, `sudo -n -u nobody id`,
//!   `su -s /bin/sh nobody -c id`, `su root -c true`;
//! - `logrotate -f` of a log below `/var/log` with `copytruncate` and `compress` (a real
//!   logrotate run on a private configuration and state file).
//!
//! Every alert whose process is this test or one of its descendants (`proc.pid`/`proc.apid[N]`
//! appended to each alert through `append_output`) fails the test and is printed; other helpers'
//! activity on the machine is ignored. A canary (`cat /etc/shadow` by this test, which the
//! default rules must report) proves the agent saw this test's events before the verdict.
//!
//! Recall is checked elsewhere: `live_rules.rs` runs every generator action against the same
//! embedded rules and requires its expected alert.

// Tests report skips and progress on stderr.

use std::fs;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;
use vigil_generator::runc::{self, ContainerSpec};
use vigil_generator::Context;

use crate::support::live::*;
use crate::support::rootfs::runc_missing;
use crate::support::{host, strict, VIGIL};

/// How many ancestors of each alert's process are appended (pid and `proc.apid[1..=N]`).
const ANCESTRY: usize = 16;

/// The tools the routine needs; the first one missing, if any.
fn missing_tool() -> Option<String> {
    for tool in [
        "apt-get",
        "dpkg",
        "python3",
        "git",
        "run-parts",
        "sudo",
        "su",
        "logrotate",
        "cat",
    ] {
        let found = std::env::var_os("PATH")
            .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()));
        if !found {
            return Some(format!(
                "`{tool}` is not installed (`make deps` installs sudo and logrotate)"
            ));
        }
    }
    None
}

fn requirement(ctx: &Context) -> Option<String> {
    missing_requirement()
        .or_else(missing_tool)
        .or_else(|| runc_missing(ctx))
}

/// Removes a directory tree when dropped.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = fs::remove_dir_all(p);
        }
    }
}

/// Runs one routine step to completion; a failure is a test failure (with its output).
fn step(name: &str, cmd: &mut Command) {
    eprintln!("routine: {name}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("routine step `{name}` cannot start: {e}"));
    assert!(
        out.status.success(),
        "routine step `{name}` failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn sh(script: &str) -> Command {
    let mut c = Command::new("sh");
    c.args(["-c", script]);
    c
}

/// Whether `alert`'s process is `pid` or one of its descendants.
fn below(alert: &Value, pid: u32) -> bool {
    let is = |field: &str| output_field(alert, field).is_some_and(|v| v == pid.to_string());
    is("proc.pid") || (1..=ANCESTRY).any(|i| is(&format!("proc.apid[{i}]")))
}

/// `cat /etc/shadow` as a child of this test: its pid.
fn canary() -> u32 {
    let mut child = Command::new("cat")
        .arg("/etc/shadow")
        .stdout(Stdio::null())
        .spawn()
        .expect("cat starts");
    let pid = child.id();
    assert!(
        child.wait().expect("cat exits").success(),
        "cat /etc/shadow"
    );
    pid
}

fn is_canary(alert: &Value, pid: u32) -> bool {
    alert["rule"] == "Sensitive File Read by Unexpected Program"
        && output_field(alert, "proc.pid").is_some_and(|v| v == pid.to_string())
}

#[test]
fn routine_admin_activity_raises_no_default_rule_alert() {
    let _host = host::alone(module_path!());
    let mut ctx = Context::from_env();
    ctx.exe = PathBuf::from(VIGIL);
    if let Some(reason) = requirement(&ctx) {
        if strict() {
            panic!("routine host test: VIGIL_TEST_STRICT=1 but {reason}");
        }
        eprintln!("skipping routine_admin_activity_raises_no_default_rule_alert: {reason}");
        return;
    }
    let _live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let me = std::process::id();

    let mut fields = vec!["proc.pid".to_string()];
    fields.extend((1..=ANCESTRY).map(|i| format!("\"proc.apid[{i}]\"")));
    let append = format!(
        "append_output[0]={{match: {{source: syscall}}, extra_fields: [{}]}}",
        fields.join(", ")
    );
    let watch = Watch::start_with_args(&["-o".into(), append.into()]);

    // The agent sees this test's events: its canary alerts.
    let ready = (0..10).any(|_| {
        let from = watch.cursor();
        let pid = canary();
        watch.wait_for(from, |a| is_canary(a, pid)).is_some()
    });
    assert!(
        ready,
        "the canary `cat /etc/shadow` never alerted; vigil watch stderr:\n{}",
        watch.stderr()
    );
    let from = watch.cursor();

    let work = std::env::temp_dir().join(format!("vigil-routine-{me}"));
    let logs = PathBuf::from(format!("/var/log/vigil-routine-{me}"));
    let _cleanup = Cleanup(vec![work.clone(), logs.clone()]);
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).expect("create the work directory");
    fs::create_dir_all(&logs).expect("create the log directory");
    let w = work.display().to_string();

    // Package management.
    step(
        "apt-get install --reinstall jq",
        Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=600", "install", "--reinstall"])
            .args(["-y", "-qq", "jq"])
            .env("DEBIAN_FRONTEND", "noninteractive"),
    );
    step("dpkg -s jq", Command::new("dpkg").args(["-s", "jq"]));
    step(
        "pip install six into a venv",
        &mut sh(&format!(
            "python3 -m venv {w}/venv && {w}/venv/bin/pip install -q --no-cache-dir \
             --disable-pip-version-check six && {w}/venv/bin/python -c 'import six'"
        )),
    );

    // Source control.
    step(
        "git init, commit, clone",
        &mut sh(&format!(
            "set -e; git init -q {w}/repo; cd {w}/repo; echo routine > README; git add README; \
             git -c user.name=admin -c user.email=admin@example.invalid commit -q -m init; \
             git clone -q {w}/repo {w}/clone; test -f {w}/clone/README"
        )),
    );

    // A container start and stop.
    let id = runc::random_id().expect("random id");
    let spec = ContainerSpec {
        id,
        name: "vigil-routine".into(),
        args: vec![
            "/bin/sh".into(),
            "-c".into(),
            "ls / >/dev/null; echo up".into(),
        ],
        bind_exe: None,
        tty: false,
        linger: false,
    };
    eprintln!("routine: runc container start/stop");
    match runc::run_spec(&ctx, &spec) {
        Ok(run) => assert!(run.success, "the container failed: {}", run.output),
        Err(e) => panic!("the container did not run: {e}"),
    }

    // A cron job (simulated: a shell named `cron` runs run-parts over a job directory).
    let jobs = work.join("cron.hourly");
    fs::create_dir_all(&jobs).expect("create the job directory");
    let job = jobs.join("routine-job");
    fs::write(
        &job,
        format!("#!/bin/sh\ndate >> {w}/cron.log\nfind {w}/repo -name '*.tmp' -delete\n"),
    )
    .expect("write the job");
    fs::set_permissions(&job, fs::Permissions::from_mode(0o755)).expect("chmod the job");
    let cron = work.join("cron");
    std::os::unix::fs::symlink("/bin/sh", &cron).expect("symlink cron");
    step(
        "cron: run-parts of an hourly job directory",
        Command::new(&cron).args(["-c", &format!("cd / && run-parts --report {w}/cron.hourly")]),
    );

    // Privilege switching by the admin.
    step("sudo -n true", Command::new("sudo").args(["-n", "true"]));
    step(
        "sudo -n -u nobody id",
        Command::new("sudo").args(["-n", "-u", "nobody", "id"]),
    );
    step(
        "su -s /bin/sh nobody -c id",
        Command::new("su").args(["-s", "/bin/sh", "nobody", "-c", "id"]),
    );
    step(
        "su root -c true",
        Command::new("su").args(["root", "-c", "true"]),
    );

    // Log rotation below /var/log.
    let log = logs.join("app.log");
    // An application appends to its log (O_APPEND; truncating a log is what the rules watch).
    let mut app_log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .expect("open the log");
    app_log
        .write_all(b"line 1\nline 2\n")
        .expect("write the log");
    drop(app_log);
    let conf = work.join("logrotate.conf");
    fs::write(
        &conf,
        format!(
            "{} {{\n  rotate 3\n  compress\n  copytruncate\n  missingok\n}}\n",
            log.display()
        ),
    )
    .expect("write the logrotate configuration");
    step(
        "logrotate -f",
        Command::new("logrotate")
            .arg("-f")
            .arg("-s")
            .arg(work.join("logrotate.state"))
            .arg(&conf),
    );
    assert!(
        logs.join("app.log.1.gz").is_file(),
        "logrotate did not rotate {}",
        log.display()
    );

    // The agent has caught up with this test's events once the final canary is in; a short
    // grace period covers events of other CPUs that a per-CPU buffer may deliver late.
    let pid = canary();
    assert!(
        watch.wait_for(from, |a| is_canary(a, pid)).is_some(),
        "the final canary never alerted; vigil watch stderr:\n{}",
        watch.stderr()
    );
    std::thread::sleep(Duration::from_secs(3));

    let ours: Vec<Value> = watch
        .since(from)
        .into_iter()
        .filter(|a| below(a, me) && !is_canary(a, pid))
        .collect();
    assert!(
        ours.is_empty(),
        "routine activity raised {} alert(s) from the default rules:\n{}",
        ours.len(),
        ours.iter()
            .map(|a| format!("{}: {}", a["rule"], a["output"]))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

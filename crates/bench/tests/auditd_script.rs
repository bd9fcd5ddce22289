//! `scripts/bench-auditd.sh`, the exec-rate bench's auditd agent, against fake `auditd` and
//! `auditctl` on `PATH` (the real ones must not run on a shared machine: audit leaves the
//! kernel on a slower path until reboot). Checks the order of what it asks of them: auditd in
//! the foreground with a RAW log, the rule only once auditd has registered, and at SIGTERM
//! auditd stopped and the rule deleted.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A directory of this test's own, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("vigil-bench-auditd-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create the scratch directory");
        Scratch(dir)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn write_exec(path: &Path, text: &str) {
    fs::write(path, text).expect("write a fake tool");
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).expect("chmod");
}

#[test]
fn the_auditd_agent_starts_registers_adds_the_rule_and_cleans_up_at_sigterm() {
    let dir = Scratch::new();
    let bin = dir.path().join("bin");
    let work = dir.path().join("auditd");
    let calls = dir.path().join("calls.log");
    fs::create_dir(&bin).unwrap();
    // The fake auditd: notes its arguments and pid, runs until SIGTERM.
    write_exec(
        &bin.join("auditd"),
        &format!(
            "#!/bin/sh\necho \"auditd $*\" >> {calls}\necho $$ > {pidfile}\n\
             trap 'echo \"auditd TERM\" >> {calls}; exit 0' TERM\n\
             while :; do sleep 0.05; done\n",
            calls = calls.display(),
            pidfile = dir.path().join("auditd.pid").display(),
        ),
    );
    // The fake auditctl: notes its arguments; `-s` names the fake auditd once it runs (and
    // notes whether it did).
    write_exec(
        &bin.join("auditctl"),
        &format!(
            "#!/bin/sh\nif [ \"$1\" = -s ]; then\n\
               if [ -s {pidfile} ]; then echo 'auditctl -s: registered' >> {calls}; \
               echo enabled 1; echo \"pid $(cat {pidfile})\"; \
               else echo 'auditctl -s: not yet' >> {calls}; fi\n\
             else echo \"auditctl $*\" >> {calls}; fi\n",
            calls = calls.display(),
            pidfile = dir.path().join("auditd.pid").display(),
        ),
    );
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/bench-auditd.sh");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let stderr = dir.path().join("stderr");
    let mut child = Command::new("sh")
        .arg(script)
        .env("PATH", path)
        .env("VIGIL_AUDITD_DIR", &work)
        .stdin(Stdio::null())
        .stderr(fs::File::create(&stderr).unwrap())
        .spawn()
        .expect("run the script");
    let start = Instant::now();
    while !fs::read_to_string(&stderr)
        .unwrap_or_default()
        .contains("bench-auditd: ready")
    {
        assert!(
            start.elapsed() < Duration::from_secs(20) && child.try_wait().unwrap().is_none(),
            "not ready: {}",
            fs::read_to_string(&stderr).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let conf = fs::read_to_string(work.join("auditd.conf")).expect("the configuration");
    assert!(conf.contains("log_format = RAW"), "{conf}");
    assert!(
        conf.contains(&format!("log_file = {}/audit.log", work.display())),
        "{conf}"
    );
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let status = child.wait().expect("the script ends");
    assert!(status.success(), "{status}");
    let log = fs::read_to_string(&calls).expect("the calls");
    let lines: Vec<&str> = log.lines().collect();
    let at = |prefix: &str| {
        lines
            .iter()
            .position(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` in {lines:?}"))
    };
    let rule = "-F arch=b64 -S execve -S execveat -k vigil-bench-exec";
    assert_eq!(
        lines[at("auditd ")],
        format!("auditd -n -c {}", work.display())
    );
    assert!(
        at("auditctl -s: registered") < at("auditctl -a"),
        "the rule only once auditd has registered: {lines:?}"
    );
    assert_eq!(
        lines[at("auditctl -a")],
        format!("auditctl -a always,exit {rule}")
    );
    assert!(at("auditctl -a") < at("auditd TERM"), "{lines:?}");
    assert!(at("auditd TERM") < at("auditctl -d"), "{lines:?}");
    assert_eq!(
        lines[at("auditctl -d")],
        format!("auditctl -d always,exit {rule}")
    );
}

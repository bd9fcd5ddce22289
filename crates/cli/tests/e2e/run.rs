//! End-to-end tests of `vigil run`: alerts with Vigil's default rules and the upstream Falco
//! rules, enforcement (a blocked open returns EPERM and the file is never opened), seccomp
//! profile learning and application, captures (`-w`) that replay to the same alerts.
//!
//! Requirements: ptrace of a child process (absent in some sandboxes) and, for the
//! `/etc/shadow` tests, root (to read the file). Missing requirements skip with a reason and
//! fail under `VIGIL_TEST_STRICT=1`.

use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::{can_trace, host, is_root, scratch, skip, text, vigil, vigil_cmd};

/// Counter `key` of the `vigil run --stats` line in `stderr`.
fn run_stat(stderr: &str, key: &str) -> u64 {
    stderr
        .lines()
        .find(|l| l.starts_with("vigil: traced_syscalls="))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        })
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in the stats line: {stderr}"))
}

/// Runs `python3 -c PY` under `vigil run --stats` (with `-r RULES` when given), which must
/// succeed; returns its `exit_stops` and `skipped_exits` counters and its stderr.
fn python_under_run(rules: Option<&Path>, py: &str) -> (u64, u64, String) {
    let mut args = vec!["run", "--stats"];
    if let Some(rules) = rules {
        args.extend(["-r", rules.to_str().expect("a UTF-8 rules path")]);
    }
    args.extend(["--", "python3", "-c", py]);
    let out = vigil(&args);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    (
        run_stat(&stderr, "exit_stops"),
        run_stat(&stderr, "skipped_exits"),
        stderr,
    )
}

fn upstream_rules(test: &str) -> Option<PathBuf> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/falco-rules/falco_rules.yaml");
    if path.is_file() {
        Some(path)
    } else {
        skip(test, &format!("{} not found", path.display()));
        None
    }
}

#[test]
fn shadow_read_alerts_with_default_and_upstream_rules() {
    let _host = host::shared();
    if !can_trace("shadow_read") {
        return;
    }
    if !is_root() {
        skip("shadow_read", "reading /etc/shadow needs root");
        return;
    }
    let expected = fs::read("/etc/shadow").expect("root reads /etc/shadow");
    let out = vigil(&["run", "--", "cat", "/etc/shadow"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout, expected, "the workload's stdout is untouched");
    let err = text(&out.stderr);
    assert!(
        err.contains("Credential file opened for reading") && err.contains("file=/etc/shadow"),
        "default rules alert on stderr: {err}"
    );
    assert!(err.contains("parent=vigil"), "{err}");

    let Some(rules) = upstream_rules("shadow_read") else {
        return;
    };
    let out = vigil(&[
        "run",
        "-r",
        rules.to_str().unwrap(),
        "--json",
        "--",
        "cat",
        "/etc/shadow",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    let alert: serde_json::Value = err
        .lines()
        .find(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).expect("JSON alert"))
        .unwrap_or_else(|| panic!("no JSON alert: {err}"));
    assert_eq!(
        alert["rule"], "Read sensitive file untrusted",
        "upstream stable rule: {alert}"
    );
    assert_eq!(alert["output_fields"]["fd.name"], "/etc/shadow");
    assert_eq!(alert["output_fields"]["proc.name"], "cat");
}

#[test]
fn no_alerts_means_a_quiet_vigil() {
    let _host = host::shared();
    if !can_trace("quiet") {
        return;
    }
    let out = vigil(&["run", "--", "echo", "hello"]);
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), "hello\n");
    let err = text(&out.stderr);
    assert_eq!(
        without_unprivileged_warning(&err),
        "",
        "nothing but the workload's output: {err}"
    );
}

/// `stderr` without the one line an unprivileged `vigil run` prints at start (no
/// `CAP_SYS_ADMIN` and `CAP_SYS_PTRACE`: setuid programs will not gain privileges).
fn without_unprivileged_warning(stderr: &str) -> String {
    stderr
        .lines()
        .filter(|l| !l.starts_with("vigil: warn: setuid and setgid programs"))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[test]
fn every_memory_access_method_reads_the_arguments() {
    let _host = host::shared();
    const TEST: &str = "every_memory_access_method_reads_the_arguments";
    if !can_trace(TEST) {
        return;
    }
    if !is_root() {
        return skip(TEST, "reading /etc/shadow needs root");
    }
    let Some(rules) = upstream_rules(TEST) else {
        return;
    };
    for method in ["process_vm_readv", "ptrace", "proc-mem"] {
        // A path and an argv read from memory (Falco's rule prints the command line).
        let out = vigil(&[
            "run",
            "--stats",
            "--json",
            "-r",
            rules.to_str().unwrap(),
            "--memory-access",
            method,
            "--",
            "sh",
            "-c",
            "cat /etc/shadow > /dev/null",
        ]);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{method}: {err}");
        let alert: serde_json::Value = err
            .lines()
            .find(|l| l.contains("Read sensitive file untrusted"))
            .map(|l| serde_json::from_str(l).expect("JSON alert"))
            .unwrap_or_else(|| panic!("{method}: no alert: {err}"));
        assert_eq!(alert["output_fields"]["fd.name"], "/etc/shadow", "{method}");
        assert_eq!(
            alert["output_fields"]["proc.cmdline"], "cat /etc/shadow",
            "{method}"
        );
        assert_eq!(run_stat(&err, "read_faults"), 0, "{method}: {err}");
        assert!(
            err.contains(&format!("memory_access={method} ")),
            "{method}: {err}"
        );
    }
}

#[test]
fn unreadable_arguments_raise_the_read_fault_alert() {
    let _host = host::shared();
    const TEST: &str = "unreadable_arguments_raise_the_read_fault_alert";
    if !can_trace(TEST) {
        return;
    }
    if !Path::new("/usr/bin/perl").exists() {
        return skip(TEST, "/usr/bin/perl is missing");
    }
    // open(2) of the address 1: nothing is mapped there, so its path cannot be read.
    for method in ["process_vm_readv", "ptrace", "proc-mem"] {
        let out = vigil(&[
            "run",
            "--json",
            "--stats",
            "--memory-access",
            method,
            "--",
            "perl",
            "-e",
            "syscall(2, 1, 0)",
        ]);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{method}: {err}");
        let alert: serde_json::Value = err
            .lines()
            .filter(|l| l.starts_with('{'))
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON alert"))
            .find(|a| a["rule"] == "Vigil could not read workload memory")
            .unwrap_or_else(|| panic!("{method}: no read-fault alert: {err}"));
        assert_eq!(alert["source"], "internal", "{alert}");
        assert_eq!(alert["output_fields"]["vigil.memory_access"], method);
        assert!(
            alert["output_fields"]["vigil.read_faults_total"]
                .as_u64()
                .is_some_and(|n| n >= 1),
            "{alert}"
        );
        assert!(run_stat(&err, "read_faults") >= 1, "{method}: {err}");
        assert!(
            err.lines()
                .any(|l| l.starts_with("vigil: warn: Vigil could not read the workload's memory")),
            "{method}: a warning line too: {err}"
        );
    }
}

const GUARD_RULES: &str = r#"
- rule: Guarded FIFO opened
  desc: test rule, enforced through its tag
  condition: evt.type in (open, openat, openat2) and fd.name endswith "/guarded.fifo"
  output: "guarded fifo opened (file=%fd.name proc=%proc.name)"
  priority: WARNING
  tags: [vigil.enforce, test]
"#;

/// Opens FIFO `path` for writing without blocking: `true` if some process has it open for
/// reading (the open succeeds), `false` on ENXIO (no reader).
fn fifo_has_reader(path: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .custom_flags(0o4000) // O_NONBLOCK
        .open(path)
        .map(|mut f| {
            let _ = f.write_all(b"leaked\n");
        })
        .is_ok()
}

#[test]
fn enforced_open_returns_eperm_and_never_opens_the_file() {
    let _host = host::shared();
    if !can_trace("enforce") {
        return;
    }
    let dir = scratch("enforce");
    let rules = dir.join("guard.yaml");
    fs::write(&rules, GUARD_RULES).unwrap();
    let fifo = dir.join("guarded.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(made.success());
    // If the open were let through, `cat` would block on the FIFO (no writer): the loop below
    // then finds a reader, writes to it and the test fails instead of hanging.
    let mut child = vigil_cmd()
        .current_dir(&dir)
        .args([
            "run",
            "-r",
            rules.to_str().unwrap(),
            "--enforce",
            "--json",
            "--",
        ])
        .args([
            "sh",
            "-c",
            "cat guarded.fifo; echo \"cat=$?\"; echo unrelated > other.txt; cat other.txt",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vigil");
    let mut leaked = false;
    for _ in 0..400 {
        if child.try_wait().expect("poll vigil").is_some() {
            break;
        }
        if fifo_has_reader(&fifo) {
            leaked = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("vigil output");
    assert!(!leaked, "the guarded FIFO was opened by the workload");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("cat=1"), "cat failed: {stdout}");
    assert!(
        stdout.contains("unrelated"),
        "unrelated syscalls work: {stdout}"
    );
    assert!(
        stderr.contains("Operation not permitted"),
        "EPERM reached the workload: {stderr}"
    );
    let alert: serde_json::Value = stderr
        .lines()
        .find(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or_else(|| panic!("no alert: {stderr}"));
    assert_eq!(alert["rule"], "Guarded FIFO opened");
    assert_eq!(alert["output_fields"]["vigil.action"], "blocked");
    assert!(alert["output"].as_str().unwrap().ends_with("(blocked)"));
    assert!(alert["output"]
        .as_str()
        .unwrap()
        .contains("guarded.fifo proc=cat"));

    // Without --enforce the same rule only alerts (a writer releases the reader).
    let child = vigil_cmd()
        .current_dir(&dir)
        .args(["run", "-r", rules.to_str().unwrap(), "--"])
        .args(["cat", "guarded.fifo"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vigil");
    let mut fed = false;
    for _ in 0..400 {
        if fifo_has_reader(&fifo) {
            fed = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("vigil output");
    assert!(fed, "detect-only mode lets the open happen");
    assert_eq!(text(&out.stdout), "leaked\n");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("guarded fifo opened") && !stderr.contains("(blocked)"),
        "{stderr}"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn enforce_selection_and_kill_action() {
    let _host = host::shared();
    if !can_trace("enforce_kill") {
        return;
    }
    let dir = scratch("enforce_kill");
    let rules = dir.join("guard.yaml");
    fs::write(&rules, GUARD_RULES).unwrap();
    fs::write(dir.join("guarded.fifo"), "regular file here\n").unwrap();
    let r = rules.to_str().unwrap();
    let script = "cat guarded.fifo; echo \"cat=$?\"";
    // Selected by name (the tag default no longer applies), killing.
    let out = vigil_cmd()
        .current_dir(&dir)
        .args(["run", "-r", r, "--enforce", "--enforce-rule", "Guarded*"])
        .args(["--enforce-action", "kill", "--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "cat=137\n", "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("(killed)"));
    // A selection that matches nothing enforces nothing.
    let out = vigil_cmd()
        .current_dir(&dir)
        .args(["run", "-r", r, "--enforce", "--enforce-tag", "no-such-tag"])
        .args(["--", "sh", "-c", script])
        .output()
        .unwrap();
    assert_eq!(
        text(&out.stdout),
        "regular file here\ncat=0\n",
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stderr).contains("guarded fifo opened"));
    assert!(text(&out.stderr).contains("no enabled rule is selected"));
    // --enforce-rule without --enforce is refused.
    let out = vigil(&["run", "--enforce-rule", "x", "--", "true"]);
    assert_eq!(out.status.code(), Some(2));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn learned_profile_applies_and_refuses_other_syscalls() {
    let _host = host::shared();
    if !can_trace("learn") {
        return;
    }
    let dir = scratch("learn");
    let profile = dir.join("profile.json");
    let p = profile.to_str().unwrap();
    let native = Command::new("ls").arg("/").output().unwrap();
    let out = vigil(&["run", "--learn", p, "--", "ls", "/"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout, native.stdout);
    let doc: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&profile).unwrap()).expect("the profile is JSON");
    assert_eq!(doc["defaultAction"], "SCMP_ACT_ERRNO");
    assert_eq!(doc["architectures"][0], "SCMP_ARCH_X86_64");
    assert_eq!(doc["syscalls"][0]["action"], "SCMP_ACT_ALLOW");
    let names: Vec<&str> = doc["syscalls"][0]["names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    for needed in ["execve", "getdents64", "write", "exit_group"] {
        assert!(names.contains(&needed), "{needed} missing from {names:?}");
    }
    assert!(!names.contains(&"mkdir"), "{names:?}");

    let out = vigil(&["run", "--seccomp-profile", p, "--", "ls", "/"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        out.stdout, native.stdout,
        "the learned workload still works"
    );
    let target = dir.join("made");
    let out = vigil(&[
        "run",
        "--seccomp-profile",
        p,
        "--",
        "mkdir",
        target.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("Operation not permitted"),
        "{}",
        text(&out.stderr)
    );
    assert!(!target.exists(), "mkdir was refused by the profile");
    // Invalid profiles are invalid input.
    fs::write(&profile, "{\"defaultAction\": 3}").unwrap();
    let out = vigil(&["run", "--seccomp-profile", p, "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn capture_replays_to_the_same_alerts() {
    let _host = host::shared();
    if !can_trace("capture") {
        return;
    }
    let dir = scratch("capture");
    let rules = dir.join("guard.yaml");
    fs::write(&rules, GUARD_RULES).unwrap();
    fs::write(dir.join("guarded.fifo"), "x\n").unwrap();
    let r = rules.to_str().unwrap();
    for name in ["cap.jsonl", "cap.vcap"] {
        let cap = dir.join(name);
        let out = vigil_cmd()
            .current_dir(&dir)
            .args(["run", "-r", r, "--stats", "-w", cap.to_str().unwrap()])
            .args(["--", "sh", "-c", "cat guarded.fifo >/dev/null"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out.stderr));
        let live: Vec<String> = text(&out.stderr)
            .lines()
            .filter(|l| l.contains("guarded fifo opened"))
            .map(|l| l.split_once(' ').unwrap().1.to_string())
            .collect();
        assert_eq!(live.len(), 1, "{}", text(&out.stderr));
        assert!(text(&out.stderr).contains("seccomp_stops="));
        let replay = vigil(&["replay", cap.to_str().unwrap(), "-r", r]);
        assert!(replay.status.success(), "{}", text(&replay.stderr));
        let replayed: Vec<String> = text(&replay.stdout)
            .lines()
            .map(|l| l.split_once(' ').unwrap().1.to_string())
            .collect();
        assert_eq!(replayed, live, "{name}: replay reproduces the live alert");
    }
    let jsonl = fs::read_to_string(dir.join("cap.jsonl")).unwrap();
    for needed in ["\"execve\"", "\"openat\"", "\"procexit\""] {
        assert!(jsonl.contains(needed), "{needed} in the capture");
    }
    assert!(
        ["\"clone\"", "\"clone3\"", "\"fork\"", "\"vfork\""]
            .iter()
            .any(|t| jsonl.contains(t)),
        "the shell's child creation is in the capture"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn workload_that_cannot_start() {
    let _host = host::shared();
    if !can_trace("no_such_program") {
        return;
    }
    let out = vigil(&["run", "--", "/nonexistent/program"]);
    assert_eq!(out.status.code(), Some(127));
    assert!(text(&out.stderr).contains("cannot execute the workload"));
    let out = vigil(&["run"]);
    assert_eq!(out.status.code(), Some(2), "a command is required");
}

#[test]
fn notify_mechanism_blocks_and_leaves_ptrace_to_the_workload() {
    let _host = host::shared();
    if !can_trace("notify") {
        return;
    }
    let dir = scratch("notify");
    let rules = dir.join("guard.yaml");
    fs::write(&rules, GUARD_RULES).unwrap();
    fs::write(dir.join("guarded.fifo"), "secret\n").unwrap();
    let r = rules.to_str().unwrap();
    let out = vigil_cmd()
        .current_dir(&dir)
        .args(["run", "--mechanism", "notify", "-r", r, "--enforce", "--"])
        .args(["sh", "-c", "cat guarded.fifo; echo \"cat=$?\"; echo ok"])
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "cat=1\nok\n", "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("(blocked)"));
    // Detection without enforcement sees the open with its predicted descriptor.
    let out = vigil_cmd()
        .current_dir(&dir)
        .args(["run", "--mechanism", "notify", "-r", r, "--json", "--"])
        .args(["cat", "guarded.fifo"])
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "secret\n");
    assert!(text(&out.stderr).contains("guarded fifo opened"));
    // Unlike ptrace, user-notify leaves PTRACE_TRACEME to the workload.
    let py = "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n\
        print(libc.ptrace(0, 0, 0, 0))\n";
    let out = vigil(&["run", "--mechanism", "notify", "--", "python3", "-c", py]);
    assert_eq!(text(&out.stdout), "0\n", "{}", text(&out.stderr));
    let out = vigil(&["run", "--mechanism", "notify", "--", "sh", "-c", "exit 5"]);
    assert_eq!(out.status.code(), Some(5));
    let out = vigil(&[
        "run",
        "--mechanism",
        "notify",
        "--learn",
        "x.json",
        "--",
        "true",
    ]);
    assert!(!out.status.success(), "learning needs ptrace");
    let _ = fs::remove_dir_all(&dir);
}

/// The events of `-w FILE.jsonl` of the given types, as `(type, tid, res, args)`.
fn lifecycle(capture: &Path) -> Vec<(String, i64, i64, serde_json::Value)> {
    fs::read_to_string(capture)
        .expect("read the capture")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| matches!(e["type"].as_str(), Some("fork" | "execve" | "procexit")))
        .map(|e| {
            (
                e["type"].as_str().unwrap_or_default().to_owned(),
                e["tid"].as_i64().unwrap_or(-1),
                e["res"].as_i64().unwrap_or(-1),
                e["args"].clone(),
            )
        })
        .collect()
}

#[test]
fn notify_mechanism_sees_forks_execs_and_exits() {
    let _host = host::shared();
    const TEST: &str = "notify_mechanism_sees_forks_execs_and_exits";
    if !can_trace(TEST) {
        return;
    }
    let dir = scratch("notify-lifecycle");
    let capture = dir.join("events.jsonl");
    let c = capture.to_str().unwrap();
    // A fork and an exec in the child, then an exit status.
    let out = vigil(&[
        "run",
        "--mechanism",
        "notify",
        "-w",
        c,
        "--",
        "sh",
        "-c",
        "cat /etc/hostname > /dev/null; exit 4",
    ]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out.stderr));
    let events = lifecycle(&capture);
    let kinds: Vec<&str> = events.iter().map(|e| e.0.as_str()).collect();
    assert_eq!(
        kinds,
        ["execve", "fork", "execve", "procexit", "procexit"],
        "{events:?}"
    );
    let (sh, cat) = (events[0].1, events[1].2);
    assert_eq!(events[0].3["exe"], "sh", "{events:?}");
    assert_eq!(events[1].1, sh, "the fork is the shell's: {events:?}");
    assert_eq!(events[2].1, cat, "{events:?}");
    assert_eq!(events[2].3["exe"], "cat", "{events:?}");
    assert_eq!((events[3].1, events[3].3["ret"].as_i64()), (cat, Some(0)));
    assert_eq!((events[4].1, events[4].3["ret"].as_i64()), (sh, Some(4)));
    // An exec without a fork: the new image, reported once.
    let out = vigil(&[
        "run",
        "--mechanism",
        "notify",
        "-w",
        c,
        "--",
        "sh",
        "-c",
        "exec cat /etc/hostname",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events = lifecycle(&capture);
    let images: Vec<String> = events
        .iter()
        .filter(|e| e.0 == "execve")
        .map(|e| e.3["exe"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert_eq!(images, ["sh", "cat"], "{events:?}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn connect_events_carry_both_ends() {
    let _host = host::shared();
    if !can_trace("connect") {
        return;
    }
    let dir = scratch("connect");
    let rules = dir.join("conn.yaml");
    fs::write(
        &rules,
        "- rule: Any connect\n  desc: t\n  condition: evt.type = connect and fd.l4proto = tcp\n  \
         output: \"connect %fd.name cport=%fd.cport res=%evt.res\"\n  priority: NOTICE\n",
    )
    .unwrap();
    let py = "import socket\ns = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen()\n\
        c = socket.create_connection(s.getsockname())\n\
        print('%s:%d->%s:%d' % (c.getsockname() + s.getsockname()))\n";
    let out = vigil(&[
        "run",
        "-r",
        rules.to_str().unwrap(),
        "--",
        "python3",
        "-c",
        py,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let name = text(&out.stdout).trim().to_string();
    let port = name.split_once(':').unwrap().1.split_once('-').unwrap().0;
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("connect {name} cport={port} res=SUCCESS")),
        "{name}: {stderr}"
    );
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn descriptors_reused_by_untraced_calls_are_not_misnamed() {
    let _host = host::shared();
    if !can_trace("stale_fd") {
        return;
    }
    let dir = scratch("stale_fd");
    let rules = dir.join("fd.yaml");
    fs::write(
        &rules,
        "- rule: Watch opens\n  desc: t\n  condition: evt.type = openat and fd.name = /nonexistent/x\n  \
         output: never\n  priority: NOTICE\n\
         - rule: Fchmod\n  desc: t\n  condition: evt.type = fchmod\n  \
         output: \"fchmod fd=%evt.arg.fd name=%fd.name type=%fd.type\"\n  priority: NOTICE\n",
    )
    .unwrap();
    // fd N: /etc/hostname (open traced), closed (untraced), reused by pipe() (untraced).
    let py = "import os\nfd = os.open('/etc/hostname', os.O_RDONLY)\nos.close(fd)\n\
        r, w = os.pipe()\nassert r == fd, (r, fd)\nos.fchmod(r, 0o600)\nprint(r)\n";
    let out = vigil(&[
        "run",
        "-r",
        rules.to_str().unwrap(),
        "--",
        "python3",
        "-c",
        py,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let line = stderr
        .lines()
        .find(|l| l.contains("fchmod fd="))
        .unwrap_or_else(|| panic!("no fchmod alert: {stderr}"));
    assert!(!line.contains("/etc/hostname"), "stale fd name: {line}");
    assert!(!line.contains("type=file"), "stale fd type: {line}");
    // The reused number is described from /proc when it is used.
    assert!(line.contains("type=pipe"), "learned fd type: {line}");
    let _ = fs::remove_dir_all(&dir);
}

/// Opens no rule can match whatever they return run without their exit stop; a descriptor
/// opened that way is described from /proc when a later call uses it, so an `openat`
/// relative to it still names the right file and alerts.
#[test]
fn unneeded_open_exits_are_skipped_and_their_descriptors_learnt() {
    let _host = host::shared();
    if !can_trace("skip_exits") {
        return;
    }
    let dir = scratch("skip_exits");
    let sub = dir.join("keys");
    fs::create_dir_all(&sub).unwrap();
    fs::write(sub.join("id_rsa"), "secret").unwrap();
    let target = sub.join("id_rsa");
    let rules = dir.join("open.yaml");
    fs::write(
        &rules,
        format!(
            "- rule: Key opened\n  desc: t\n  condition: evt.type in (open, openat) and \
             evt.rawres >= 0 and fd.name = {}\n  output: \"key fd=%fd.num name=%fd.name\"\n  \
             priority: NOTICE\n",
            target.display()
        ),
    )
    .unwrap();
    // The directory's open matches nothing (skipped); the key's open is relative to it.
    let py = format!(
        "import os\nd = os.open('{}', os.O_RDONLY | os.O_DIRECTORY)\n\
         fd = os.open('id_rsa', os.O_RDONLY, dir_fd=d)\nprint(fd)\n",
        sub.display()
    );
    let out = vigil(&[
        "run",
        "--stats",
        "-r",
        rules.to_str().unwrap(),
        "--",
        "python3",
        "-c",
        &py,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let fd = text(&out.stdout).trim().to_string();
    let alerts: Vec<&str> = stderr.lines().filter(|l| l.contains("key fd=")).collect();
    assert_eq!(alerts.len(), 1, "one alert: {stderr}");
    assert!(
        alerts[0].contains(&format!("key fd={fd} name={}", target.display())),
        "the relative open is resolved through the learnt directory fd: {stderr}"
    );
    let skipped = run_stat(&stderr, "skipped_exits");
    // Python's own start-up opens (modules, locale) plus the directory: none can match.
    assert!(skipped >= 2, "{stderr}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn alerts_can_go_to_a_file() {
    let _host = host::shared();
    if !can_trace("alerts_file") {
        return;
    }
    let dir = scratch("alerts_file");
    let rules = dir.join("guard.yaml");
    fs::write(&rules, GUARD_RULES).unwrap();
    fs::write(dir.join("guarded.fifo"), "data\n").unwrap();
    let alerts = dir.join("alerts.log");
    let out = vigil_cmd()
        .current_dir(&dir)
        .args(["run", "-r", rules.to_str().unwrap()])
        .args([
            "--alerts",
            alerts.to_str().unwrap(),
            "--",
            "cat",
            "guarded.fifo",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(text(&out.stdout), "data\n");
    assert_eq!(
        without_unprivileged_warning(&text(&out.stderr)),
        "",
        "alerts went to the file"
    );
    let logged = fs::read_to_string(&alerts).unwrap();
    assert!(logged.contains("guarded fifo opened"), "{logged}");
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn enforced_exec_is_refused_before_the_new_image_runs() {
    let _host = host::shared();
    if !can_trace("enforce_exec") {
        return;
    }
    let dir = scratch("enforce_exec");
    let rules = dir.join("exec.yaml");
    fs::write(
        &rules,
        "- rule: Forbidden program\n  desc: t\n  \
         condition: evt.type in (execve, execveat) and evt.res = SUCCESS and proc.name = touch\n  \
         output: \"forbidden %proc.name %proc.cmdline parent=%proc.pname\"\n  priority: ERROR\n",
    )
    .unwrap();
    let marker = dir.join("marker");
    let script = format!("/usr/bin/touch {}; echo \"rc=$?\"", marker.display());
    let out = vigil_cmd()
        .args(["run", "-r", rules.to_str().unwrap(), "--enforce"])
        .args(["--enforce-rule", "Forbidden*", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "rc=126\n", "{}", text(&out.stderr));
    assert!(!marker.exists(), "touch never ran");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "forbidden touch touch {} parent=sh (blocked)",
            marker.display()
        )),
        "{stderr}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Serves one HTTP POST on a loopback port; the request body arrives on the channel.
fn one_post_receiver() -> (u16, std::sync::mpsc::Receiver<String>) {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("addr").port();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        let mut reader = BufReader::new(stream);
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let mut stream = reader.into_inner();
        let _ =
            stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        let _ = tx.send(String::from_utf8_lossy(&body).into_owned());
    });
    (port, rx)
}

#[test]
fn alerts_also_reach_the_configured_http_output() {
    let _host = host::shared();
    if !can_trace("http_output") {
        return;
    }
    if !is_root() {
        skip("http_output", "reading /etc/shadow needs root");
        return;
    }
    let (port, rx) = one_post_receiver();
    let url = format!("http_output.url=http://127.0.0.1:{port}/");
    // As in Falco, the HTTP body is the JSON object when `json_output` is set.
    let out = vigil(&[
        "run",
        "-o",
        "json_output=true",
        "-o",
        "http_output.enabled=true",
        "-o",
        &url,
        "--",
        "cat",
        "/etc/shadow",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let body = rx
        .recv_timeout(std::time::Duration::from_secs(10))
        .unwrap_or_else(|_| panic!("no POST received; stderr: {}", text(&out.stderr)));
    let alert: serde_json::Value = serde_json::from_str(&body).expect("Falco JSON body");
    assert_eq!(
        alert["rule"], "Sensitive File Read by Unexpected Program",
        "{alert}"
    );
    assert_eq!(alert["output_fields"]["fd.name"], "/etc/shadow", "{alert}");
    // The console copy still goes to stderr, the workload's stdout stays its own.
    assert!(text(&out.stderr).contains("Sensitive File Read by Unexpected Program"));
    assert!(
        out.stdout.starts_with(b"root:"),
        "workload stdout untouched"
    );
}

/// The default redirection rule needs `evt.rawres in (0, 1, 2)` on dup2/dup3, whose result is
/// their second argument: the seccomp filter stops only for those, so a dup2 onto another
/// descriptor (and plain dup, not watched) never reaches the tracer, and the real
/// redirection still alerts.
#[test]
fn dup2_onto_other_descriptors_never_stops() {
    let _host = host::shared();
    if !can_trace("dup2_filter") {
        return;
    }
    let stops = |loops: u32| -> (u64, String) {
        let py = format!(
            "import os, socket\nfor i in range({loops}):\n    os.close(os.dup(0))\n    \
             os.dup2(0, 9)\n    os.close(9)\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\n\
             s.listen(1)\nc = socket.create_connection(s.getsockname())\n\
             saved = os.dup(1)\nos.dup2(c.fileno(), 1)\nos.dup2(saved, 1)\n"
        );
        let out = vigil(&["run", "--stats", "--", "python3", "-c", &py]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        (run_stat(&stderr, "seccomp_stops"), stderr)
    };
    let (few, _) = stops(0);
    let (many, stderr) = stops(3000);
    assert!(
        many < few + 300,
        "3000 dup/dup2(…, 9) pairs stopped the tracer: {few} stops without, {many} with"
    );
    assert_eq!(
        stderr
            .lines()
            .filter(|l| l.contains("redirected to a network connection") && l.contains("newfd=1"))
            .count(),
        1,
        "the dup2 of the socket onto stdout alerts once: {stderr}"
    );
}

/// A forked child's first syscall may reach the tracer before its parent's fork event: the
/// child is held until that event has described it, so its events always come from a known
/// process (its name and parent, not `<NA>`).
#[test]
fn children_are_known_before_their_first_event() {
    let _host = host::shared();
    if !can_trace("fork_order") {
        return;
    }
    let dir = scratch("fork_order");
    let probe = dir.join("probe-that-does-not-exist");
    let rules = dir.join("probe.yaml");
    fs::write(
        &rules,
        format!(
            "- rule: Probe\n  desc: t\n  condition: evt.type in (open, openat) and fd.name = {}\n  \
             output: \"probe pid=%proc.pid ppid=%proc.ppid name=%proc.name\"\n  priority: NOTICE\n",
            probe.display()
        ),
    )
    .unwrap();
    let py = format!(
        "import os\npids = []\nfor i in range(150):\n    pid = os.fork()\n    if pid == 0:\n        \
         try:\n            os.open('{}', os.O_RDONLY)\n        except OSError:\n            pass\n        \
         os._exit(0)\n    pids.append(pid)\nfor p in pids:\n    os.waitpid(p, 0)\nprint(os.getpid())\n",
        probe.display()
    );
    let out = vigil(&[
        "run",
        "-r",
        rules.to_str().unwrap(),
        "--",
        "python3",
        "-c",
        &py,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let parent = text(&out.stdout).trim().to_string();
    let stderr = text(&out.stderr);
    let probes: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("probe pid="))
        .collect();
    assert_eq!(probes.len(), 150, "{stderr}");
    for line in probes {
        assert!(
            line.contains(&format!("ppid={parent} name=python3")),
            "a child's event from an unknown process: {line}"
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

/// Successful execs are reported by the tracer's exec event, so when no rule can match a
/// failed exec (`evt.res = SUCCESS`) nor reads what only the entry shows, `execve` does not
/// stop at the filter at all: same alerts, one stop fewer per exec. `execveat` (`fexecve`)
/// keeps its entry stop, which is what tells it from `execve`.
#[test]
fn successful_execs_need_no_entry_stop() {
    let _host = host::shared();
    if !can_trace("exec_entry") {
        return;
    }
    let dir = scratch("exec_entry");
    let run = |res_test: &str| -> (Vec<String>, u64) {
        let rules = dir.join("exec.yaml");
        fs::write(
            &rules,
            format!(
                "- rule: True ran\n  desc: t\n  condition: evt.type = execve {res_test} and \
                 proc.name = true\n  output: \"ran-true type=%evt.type\"\n  priority: NOTICE\n\
                 - rule: Echo ran at\n  desc: t\n  condition: evt.type = execveat {res_test} \
                 and proc.exepath endswith /echo\n  output: \"at-echo type=%evt.type\"\n  \
                 priority: NOTICE\n"
            ),
        )
        .unwrap();
        let script = "/bin/true; /bin/true; python3 -c 'import os; \
                      os.execve(os.open(\"/bin/echo\", os.O_RDONLY), [\"echo\", \"hi\"], {})'";
        let out = vigil(&[
            "run",
            "--stats",
            "-r",
            rules.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            script,
        ]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        assert_eq!(text(&out.stdout), "hi\n");
        let mut alerts: Vec<String> = stderr
            .lines()
            .filter_map(|l| {
                l.find("ran-true")
                    .or(l.find("at-echo"))
                    .map(|i| l[i..].to_string())
            })
            .collect();
        alerts.sort();
        (alerts, run_stat(&stderr, "seccomp_stops"))
    };
    let (success_only, fewer) = run("and evt.res = SUCCESS");
    let (any_result, more) = run("");
    let want = [
        "at-echo type=execveat",
        "ran-true type=execve",
        "ran-true type=execve",
    ];
    assert_eq!(success_only, want);
    assert_eq!(any_result, want);
    // sh, true, true and python3 stop at entry only when a failed exec could match.
    assert!(
        more >= fewer + 4,
        "{fewer} stops with, {more} without `evt.res = SUCCESS`"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// `dup2` onto a standard stream of something that is not a socket, and the removal of a
/// file that is not a shell history, match no default rule whatever they return: they run
/// without their exit stop (`skipped_exits`), while the socket redirection and the history
/// removal still alert.
#[test]
fn unneeded_dup2_and_unlink_exits_are_skipped() {
    let _host = host::shared();
    if !can_trace("skip_dup_unlink") {
        return;
    }
    let dir = scratch("skip_dup_unlink");
    let counters = |loops: u32| -> (u64, u64, String) {
        let py = format!(
            "import os, socket\nd = '{dir}'\nsaved = os.dup(1)\nr, w = os.pipe()\n\
             for i in range({loops}):\n    os.dup2(r, 1)\n    os.dup2(saved, 1)\n    \
             p = os.path.join(d, 'f%d' % i)\n    open(p, 'w').close()\n    os.unlink(p)\n\
             h = os.path.join(d, '.bash_history')\nopen(h, 'w').close()\nos.unlink(h)\n\
             s = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen(1)\n\
             c = socket.create_connection(s.getsockname())\nos.dup2(c.fileno(), 1)\n\
             os.dup2(saved, 1)\n",
            dir = dir.display()
        );
        python_under_run(None, &py)
    };
    let (few_exits, few_skipped, _) = counters(0);
    let (many_exits, many_skipped, stderr) = counters(300);
    assert!(
        many_exits < few_exits + 30,
        "300 × (2 dup2, unlink) took exit stops: {few_exits} without, {many_exits} with"
    );
    assert!(
        many_skipped >= few_skipped + 900,
        "{few_skipped} skipped without, {many_skipped} with"
    );
    let count = |needle: &str| stderr.lines().filter(|l| l.contains(needle)).count();
    assert_eq!(
        count("redirected to a network connection"),
        1,
        "the socket's dup2 still alerts: {stderr}"
    );
    assert_eq!(count("Shell history removed"), 1, "{stderr}");
    let _ = fs::remove_dir_all(&dir);
}

/// The namespace ids of a new process are read from `/proc` only where they can differ from
/// the global ones: after `unshare(CLONE_NEWPID)` or `setns` in the parent, or for children
/// of a process that lives in another pid namespace itself. Inside a new namespace
/// (`unshare --pid --fork`, the grandchildren too) and after `nsenter --pid`, `proc.vpid` is
/// the namespace's own id; elsewhere it is the global pid.
#[test]
fn children_in_other_pid_namespaces_get_their_own_ids() {
    let _host = host::shared();
    if !can_trace("pidns") {
        return;
    }
    if !is_root() {
        skip("pidns", "new pid namespaces need root");
        return;
    }
    let dir = scratch("pidns");
    let rules = dir.join("spawn.yaml");
    fs::write(
        &rules,
        "- rule: Spawn\n  desc: t\n  condition: evt.type = execve and evt.dir = < and proc.name = true\n  \
         output: \"spawn pid=%proc.pid vpid=%proc.vpid\"\n  priority: NOTICE\n",
    )
    .unwrap();
    let spawns = |cmd: &[&str]| -> Vec<(i64, i64)> {
        let mut args = vec!["run", "-r", rules.to_str().unwrap(), "--"];
        args.extend_from_slice(cmd);
        let out = vigil(&args);
        let err = text(&out.stderr);
        assert!(out.status.success(), "{cmd:?}: {err}");
        err.lines()
            .filter_map(|l| {
                let rest = &l[l.find("spawn pid=")? + "spawn pid=".len()..];
                let (pid, vpid) = rest.split_once(" vpid=")?;
                Some((pid.trim().parse().ok()?, vpid.trim().parse().ok()?))
            })
            .collect()
    };
    let script = "/bin/true; /bin/true; sh -c '/bin/true; /bin/true'";

    // The host's namespace: the global ids.
    let host = spawns(&["sh", "-c", script]);
    assert_eq!(host.len(), 4, "{host:?}");
    assert!(host.iter().all(|(pid, vpid)| pid == vpid), "{host:?}");

    // A new namespace: the child of `unshare` is 1 there, its descendants small numbers.
    let unshared = spawns(&["unshare", "--pid", "--fork", "sh", "-c", script]);
    assert_eq!(unshared.len(), 4, "{unshared:?}");
    for (pid, vpid) in &unshared {
        assert!(pid != vpid && (2..50).contains(vpid), "{unshared:?}");
    }

    // `setns` into an existing namespace: `nsenter` forks into it.
    let mut holder = Command::new("unshare")
        .args(["--pid", "--fork", "sleep", "30"])
        .spawn()
        .expect("start unshare");
    let children = format!("/proc/{}/task/{}/children", holder.id(), holder.id());
    let mut target = String::new();
    for _ in 0..200 {
        target = fs::read_to_string(&children).unwrap_or_default();
        if !target.trim().is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let target = target.trim().to_string();
    assert!(
        !target.is_empty(),
        "the namespace's first process never started"
    );
    let entered = spawns(&["nsenter", "-t", &target, "--pid", "/bin/true"]);
    let _ = holder.kill();
    let _ = holder.wait();
    assert_eq!(entered.len(), 1, "{entered:?}");
    let (pid, vpid) = entered[0];
    assert!(pid != vpid && (2..50).contains(&vpid), "{entered:?}");
    let _ = fs::remove_dir_all(&dir);
}

/// Falco's multivalue transformers (`concat`, `join`, `getopt(…)[c]`) in a condition and in the
/// output, live under `vigil run` and again in the replay of its capture: only `cat`'s open of
/// the file matches (`head` opens it too), and both print the transformed values. A second
/// rule, on `head`'s open, tests `evt.rawarg.*` (string and numbers), `evt.is_wait` and
/// `evt.cpu` (the ptrace driver does not know the CPU: no value, `<NA>`, live and in replay).
const MULTIVALUE_RULES: &str = r#"- rule: Multivalue open
  desc: t
  condition: >
    evt.type in (open, openat, openat2) and basename(fd.name) = mv-target.txt
    and concat(proc.name, "@", basename(fd.name)) = "cat@mv-target.txt"
    and join("+", (proc.name, basename(fd.name))) = "cat+mv-target.txt"
    and getopt(("-e", proc.name), "e:")[e] = cat
  output: 'mv c=%concat(proc.name, "@", basename(fd.name)) j=%join("+", (proc.name, fd.name)) g=%getopt(("-e", proc.name), "e:")'
  priority: NOTICE
- rule: Raw open
  desc: t
  condition: >
    evt.type in (open, openat, openat2) and proc.name = head
    and evt.rawarg.name endswith mv-target.txt and evt.rawarg.fd >= 0
    and evt.rawarg.flags >= 0 and evt.is_wait = false and not evt.cpu exists
  output: "raw name=%evt.rawarg.name cpu=%evt.cpu"
  priority: NOTICE
"#;

#[test]
fn multivalue_transformers_match_live_and_in_replay() {
    let _host = host::shared();
    if !can_trace("multivalue") {
        return;
    }
    let dir = scratch("multivalue");
    let rules = dir.join("mv.yaml");
    fs::write(&rules, MULTIVALUE_RULES).unwrap();
    fs::write(dir.join("mv-target.txt"), "x\n").unwrap();
    let r = rules.to_str().unwrap();
    let cap = dir.join("cap.jsonl");
    let out = vigil_cmd()
        .current_dir(&dir)
        .args(["run", "-r", r, "-w", cap.to_str().unwrap(), "--"])
        .args([
            "sh",
            "-c",
            "cat mv-target.txt >/dev/null; head -c1 mv-target.txt >/dev/null",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let want = format!(
        "mv c=cat@mv-target.txt j=cat+{}/mv-target.txt g=(e,cat)",
        dir.canonicalize().unwrap().display()
    );
    let live: Vec<String> = text(&out.stderr)
        .lines()
        .filter(|l| l.contains(" mv "))
        .map(|l| l.split_once(": Notice ").unwrap().1.to_string())
        .collect();
    assert_eq!(live, std::slice::from_ref(&want), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("Notice raw name=mv-target.txt cpu=<NA>"),
        "evt.rawarg, evt.is_wait and evt.cpu: {}",
        text(&out.stderr)
    );
    let replay = vigil(&["replay", cap.to_str().unwrap(), "-r", r]);
    assert!(replay.status.success(), "{}", text(&replay.stderr));
    let replayed: Vec<String> = text(&replay.stdout)
        .lines()
        .map(|l| l.split_once(": Notice ").unwrap().1.to_string())
        .filter(|l| l.starts_with("mv "))
        .collect();
    assert_eq!(replayed, [want], "replay reproduces the live alert");
    assert!(
        text(&replay.stdout).contains("Notice raw name=mv-target.txt cpu=<NA>"),
        "{}",
        text(&replay.stdout)
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Plain `dup` (called through `ctypes`: Python's `os.dup` is an `fcntl`) returns the lowest
/// free descriptor, unknown at entry; a redirection rule
/// requires `evt.rawres in (0, 1, 2)` and a socket. The tracer tries the call at entry as a
/// success with each of those results: a `dup` of stdin (not a socket) matches nothing
/// whatever it returns and runs without its exit stop (`skipped_exits`), with this rule and
/// with Falco's stable rules (whose rule is container-guarded: as root it stops only in
/// processes that enter new namespaces, so the host's `dup`s take no stop at all); a socket
/// dup'ed onto a closed stdin still alerts, and a socket dup'ed elsewhere does not.
#[test]
fn dup_exits_are_decided_at_entry() {
    let _host = host::shared();
    if !can_trace("dup_entry") {
        return;
    }
    let Some(upstream) = upstream_rules("dup_entry") else {
        return;
    };
    let dir = scratch("dup_entry");
    let rules = dir.join("redirect.yaml");
    fs::write(
        &rules,
        "- rule: Redirect\n  desc: t\n  condition: evt.type in (dup, dup2, dup3) and \
         evt.rawres in (0, 1, 2) and fd.type in (ipv4, ipv6)\n  output: \"redirect fd=%fd.num \
         type=%fd.type\"\n  priority: NOTICE\n\
         - rule: Connect to port 1\n  desc: t\n  condition: evt.type = connect and fd.sport = 1\n  \
         output: \"connect\"\n  priority: NOTICE\n",
    )
    .unwrap();
    // (The second rule watches a network call, which makes the tracer follow socket
    // creation: the state knows the socket's type only then.)
    let counters = |rules: &Path, loops: u32| -> (u64, u64, String) {
        let py = format!(
            "import ctypes, os, socket\ndup = ctypes.CDLL(None).dup\n\
             for i in range({loops}):\n    os.close(dup(0))\n\
             s = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen(1)\n\
             c = socket.create_connection(s.getsockname())\nos.close(dup(c.fileno()))\n\
             os.close(0)\nassert dup(c.fileno()) == 0\n"
        );
        python_under_run(Some(rules), &py)
    };
    for rules in [rules.as_path(), upstream.as_path()] {
        let (few_exits, _, _) = counters(rules, 0);
        let (many_exits, _, _) = counters(rules, 2000);
        assert!(
            many_exits < few_exits + 200,
            "2000 dup(0) took exit stops with {}: {few_exits} without, {many_exits} with",
            rules.display()
        );
    }
    let (_, few_skipped, _) = counters(&rules, 0);
    let (_, many_skipped, stderr) = counters(&rules, 2000);
    assert!(
        many_skipped >= few_skipped + 2000,
        "{few_skipped} skipped without, {many_skipped} with"
    );
    let alerts: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("redirect fd="))
        .collect();
    assert_eq!(alerts.len(), 1, "{stderr}");
    assert!(
        alerts[0].contains("redirect fd=0 type=ipv4"),
        "the socket dup'ed onto the closed stdin: {}",
        alerts[0]
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A watched exec stops at entry (for the name as passed and for failures) and its exit is
/// needed only to report a failure, which is the caller's unchanged image: the tracer asks
/// the rules at entry and takes the exit stop only when a failure could match. Failed execs
/// that no rule can match (a `PATH` search) take no exit stop, with this rule and with
/// Falco's stable rules; the failure a rule matches still alerts; a rule reading an image
/// argument (`evt.arg.exe`) keeps every exit.
#[test]
fn failed_exec_exits_are_decided_at_entry() {
    let _host = host::shared();
    if !can_trace("exec_exit") {
        return;
    }
    let Some(upstream) = upstream_rules("exec_exit") else {
        return;
    };
    let dir = scratch("exec_exit");
    let write_rules = |name: &str, extra: &str| -> PathBuf {
        let path = dir.join(name);
        fs::write(
            &path,
            format!(
                "- rule: Failed probe exec\n  desc: t\n  condition: evt.type = execve and \
                 evt.res = ENOENT and proc.name = python3 and evt.arg.filename endswith \
                 /vigil-probe{extra}\n  output: \"failed-exec name=%evt.arg.filename \
                 res=%evt.res proc=%proc.name\"\n  priority: NOTICE\n"
            ),
        )
        .unwrap();
        path
    };
    let probe = write_rules("probe.yaml", "");
    let image = write_rules(
        "image.yaml",
        " or (evt.type = execve and evt.arg.exe = nope)",
    );
    let counters = |rules: &Path, loops: u32| -> (u64, u64, String) {
        let py = format!(
            "import os\nfor i in range({loops}):\n    try:\n        \
             os.execv('/nonexistent/x%d' % i, ['x'])\n    except OSError:\n        pass\n\
             try:\n    os.execv('/nonexistent/vigil-probe', ['p'])\nexcept OSError:\n    pass\n"
        );
        python_under_run(Some(rules), &py)
    };
    for rules in [probe.as_path(), upstream.as_path()] {
        let (few, few_skipped, _) = counters(rules, 0);
        let (many, many_skipped, _) = counters(rules, 300);
        assert!(
            many < few + 30,
            "300 failed execs took exit stops with {}: {few} without, {many} with",
            rules.display()
        );
        assert!(
            many_skipped >= few_skipped + 300,
            "{few_skipped} skipped without, {many_skipped} with"
        );
    }
    let (_, _, stderr) = counters(&probe, 300);
    let alerts: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("failed-exec"))
        .collect();
    assert_eq!(alerts.len(), 1, "{stderr}");
    assert!(
        alerts[0].contains("failed-exec name=/nonexistent/vigil-probe res=ENOENT proc=python3"),
        "{}",
        alerts[0]
    );
    let (few, _, _) = counters(&image, 0);
    let (many, _, stderr) = counters(&image, 300);
    assert!(
        many >= few + 300,
        "a rule reading evt.arg.exe needs every failure: {few} exits without, {many} with"
    );
    assert_eq!(
        stderr.lines().filter(|l| l.contains("failed-exec")).count(),
        1,
        "{stderr}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// When every rule watching `open`/`openat` requires a write (`evt.is_open_write = true`),
/// the seccomp filter tests the access mode in the flags register: read-only opens never
/// stop, a write open of the watched file still alerts. With a read rule beside it every
/// open stops again.
#[test]
fn read_only_opens_never_stop_for_write_only_rules() {
    let _host = host::shared();
    if !can_trace("open_write") {
        return;
    }
    let dir = scratch("open_write");
    let target = dir.join("watched");
    let write_rule = format!(
        "- rule: Write watched\n  desc: t\n  condition: evt.type in (open, openat, openat2) and \
         evt.is_open_write = true and fd.name startswith {}\n  output: \"write-open \
         file=%fd.name\"\n  priority: NOTICE\n",
        target.display()
    );
    fs::write(format!("{}-y", target.display()), "").unwrap();
    let write_only = dir.join("write.yaml");
    fs::write(&write_only, &write_rule).unwrap();
    let with_read = dir.join("read.yaml");
    fs::write(
        &with_read,
        format!(
            "{write_rule}- rule: Read shadow\n  desc: t\n  condition: evt.type in (open, openat) \
             and evt.is_open_read = true and fd.name = /etc/shadow\n  output: \"read\"\n  \
             priority: NOTICE\n"
        ),
    )
    .unwrap();
    let stops = |rules: &Path, loops: u32| -> (u64, String) {
        let py = format!(
            "for i in range({loops}):\n    open('/etc/hostname').close()\n\
             open('{t}-x', 'w').close()\nopen('{t}-y', 'r+').close()\n",
            t = target.display()
        );
        let out = vigil(&[
            "run",
            "--stats",
            "-r",
            rules.to_str().unwrap(),
            "--",
            "python3",
            "-c",
            &py,
        ]);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{stderr}");
        (run_stat(&stderr, "seccomp_stops"), stderr)
    };
    let (few, _) = stops(&write_only, 0);
    let (many, stderr) = stops(&write_only, 500);
    assert!(
        many < few + 50,
        "500 read-only opens stopped the tracer: {few} stops without, {many} with"
    );
    let mut alerts: Vec<String> = stderr
        .lines()
        .filter_map(|l| l.find("write-open").map(|i| l[i..].to_string()))
        .collect();
    alerts.sort();
    assert_eq!(
        alerts,
        [
            format!("write-open file={}-x", target.display()),
            format!("write-open file={}-y", target.display()),
        ],
        "O_WRONLY|O_CREAT and O_RDWR opens still alert: {stderr}"
    );
    let (few, _) = stops(&with_read, 0);
    let (many, _) = stops(&with_read, 500);
    assert!(
        many >= few + 500,
        "a read rule needs every open: {few} stops without, {many} with"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// A socket made by a call no rule watches (`accept`: a bind shell) is described from a copy
/// of the descriptor when a traced call uses it, so its redirection onto stdout still
/// alerts, oriented client → server (the listening port is the server's).
#[test]
fn accepted_socket_redirection_alerts() {
    let _host = host::shared();
    if !can_trace("accepted_socket") {
        return;
    }
    let py = "import os, socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen(1)\n\
              print(s.getsockname()[1], flush=True)\n\
              c = socket.create_connection(s.getsockname())\nconn, _ = s.accept()\n\
              saved = os.dup(1)\nos.dup2(conn.fileno(), 1)\nos.dup2(saved, 1)\n";
    let out = vigil(&["run", "--", "python3", "-c", py]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let port = text(&out.stdout).trim().to_string();
    let alerts: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("redirected to a network connection"))
        .collect();
    assert_eq!(
        alerts.len(),
        1,
        "the accepted socket's dup2 alerts: {stderr}"
    );
    assert!(
        alerts[0].contains(&format!("->127.0.0.1:{port} "))
            && alerts[0].contains("fd_type=ipv4")
            && alerts[0].contains(&format!("server_port={port} ")),
        "client → server, the listening port the server's: {}",
        alerts[0]
    );
}

/// `chdir`/`fchdir` stop only because the state needs the working directory (no rule
/// watches them): they run without their exit stop and the process's directory is read from
/// `/proc` before its next event. Relative opens after `chdir`, `fchdir`, in a forked child
/// and after an exec still resolve to the right file.
#[test]
fn working_directory_changes_take_no_exit_stop() {
    let _host = host::shared();
    if !can_trace("cwd_exit") {
        return;
    }
    let dir = scratch("cwd_exit");
    fs::write(dir.join("probe"), "x").unwrap();
    let rules = dir.join("probe.yaml");
    fs::write(
        &rules,
        format!(
            "- rule: Probe\n  desc: t\n  condition: evt.type in (open, openat) and fd.name = \
             {}/probe\n  output: \"probe proc=%proc.name\"\n  priority: NOTICE\n",
            dir.display()
        ),
    )
    .unwrap();
    let counters = |loops: u32| -> (u64, String) {
        let py = format!(
            "import os, subprocess\nfor i in range({loops}):\n    os.chdir('/')\n    \
             os.chdir('/tmp')\nos.chdir('/etc')\nos.chdir('{d}')\nopen('probe').close()\n\
             fd = os.open('/etc', os.O_RDONLY)\nos.fchdir(fd)\nos.chdir('{d}')\n\
             open('probe').close()\npid = os.fork()\nif pid == 0:\n    \
             open('probe').close()\n    os._exit(0)\nos.waitpid(pid, 0)\n\
             subprocess.run(['cat', 'probe'], check=True, stdout=subprocess.DEVNULL)\n",
            d = dir.display()
        );
        let (exit_stops, _, stderr) = python_under_run(Some(&rules), &py);
        (exit_stops, stderr)
    };
    let (few, _) = counters(0);
    let (many, stderr) = counters(300);
    assert!(
        many < few + 30,
        "600 chdir took exit stops: {few} without, {many} with"
    );
    let mut alerts: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.find("probe proc=").map(|i| &l[i..]))
        .collect();
    alerts.sort_unstable();
    assert_eq!(
        alerts,
        [
            "probe proc=cat",
            "probe proc=python3",
            "probe proc=python3",
            "probe proc=python3"
        ],
        "every relative open names the file: {stderr}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// As root with a writable cgroup mount the workload may start containers, so no rule is
/// disabled; but a rule that cannot match where Vigil runs (here `container.id != host`)
/// costs nothing in the processes that stay here: they start under a filter without its
/// syscalls, and a process that enters new namespaces — by `unshare`, or cloned into them —
/// gets the full filter added before it runs on (a container runtime does one or the other;
/// `tests/e2e/generate_run.rs` checks the alerts from inside a runc container).
#[test]
fn container_rules_stop_only_in_processes_that_enter_new_namespaces() {
    let _host = host::shared();
    let test = "container_rules_stop_only_in_processes_that_enter_new_namespaces";
    if !can_trace(test) {
        return;
    }
    if !is_root() {
        skip(
            test,
            "not root (a workload that cannot enter namespaces is folded)",
        );
        return;
    }
    let dir = scratch("widen");
    let rules = dir.join("container-dup.yaml");
    fs::write(
        &rules,
        "- rule: Dup in a container\n  desc: t\n  condition: evt.type = dup and container.id != \
         host\n  output: \"dup in %container.id\"\n  priority: NOTICE\n\
         - rule: Open of a marker\n  desc: t\n  condition: evt.type = openat and fd.name = \
         /nonexistent/marker\n  output: \"marker\"\n  priority: NOTICE\n",
    )
    .unwrap();
    let explain = vigil(&[
        "rules",
        "list",
        "--explain-run",
        "-r",
        rules.to_str().unwrap(),
    ]);
    if !text(&explain.stdout).contains("no rule is folded") {
        skip(
            test,
            "this process cannot change its container identity here (no writable cgroup mount)",
        );
        return;
    }
    let listed = text(&explain.stdout);
    let line = |rule: &str| {
        listed
            .lines()
            .find(|l| l.starts_with(rule))
            .unwrap_or_else(|| panic!("{rule} not listed: {listed}"))
            .to_owned()
    };
    assert!(
        line("Dup in a container").contains("watched in new namespaces"),
        "{listed}"
    );
    assert!(
        !line("Open of a marker").contains("new namespaces"),
        "{listed}"
    );
    // (`os.dup` is `fcntl(F_DUPFD_CLOEXEC)`: the C library's `dup` is the syscall.)
    let dups = "import ctypes, os\ndup = ctypes.CDLL(None).dup\nfor i in range(2000):\n    \
                os.close(dup(0))\n";
    let cloned = |loops: u32| {
        format!(
            "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\n\
             pid = libc.syscall(56, 0x40000000 | 17, 0, 0, 0, 0)\n\
             if pid == 0:\n    for i in range({loops}):\n        os.close(libc.dup(0))\n    \
             os._exit(0)\nassert pid > 0, ctypes.get_errno()\nassert os.waitpid(pid, 0)[1] == 0\n"
        )
    };
    // (seccomp stops, widened, widening failures); the interpreter's start-up opens stop too,
    // so each case is compared with the same start-up without the loop.
    let run = |workload: &[&str]| -> (u64, u64, u64) {
        let mut args = vec!["run", "--stats", "-r", rules.to_str().unwrap(), "--"];
        args.extend(workload);
        let out = vigil(&args);
        let stderr = text(&out.stderr);
        assert!(out.status.success(), "{workload:?}: {stderr}");
        assert!(!stderr.contains("could not be armed"), "{stderr}");
        (
            run_stat(&stderr, "seccomp_stops"),
            run_stat(&stderr, "widened"),
            run_stat(&stderr, "widen_failures"),
        )
    };
    let (start, _, _) = run(&["python3", "-c", "pass"]);
    let (here, widened, _) = run(&["python3", "-c", dups]);
    assert!(
        here < start + 200 && widened == 0,
        "2000 dup() on the host stopped the tracer {here} times ({start} without them; \
         widened {widened})"
    );
    let (start, _, _) = run(&["unshare", "--net", "--", "python3", "-c", "pass"]);
    let (unshared, widened, failed) = run(&["unshare", "--net", "--", "python3", "-c", dups]);
    assert!(
        unshared >= start + 2000 && widened >= 1 && failed == 0,
        "after unshare(CLONE_NEWNET): {unshared} stops ({start} without the dups), widened \
         {widened}, failed {failed}"
    );
    let (start, _, _) = run(&["python3", "-c", &cloned(0)]);
    let (cloned_stops, widened, failed) = run(&["python3", "-c", &cloned(2000)]);
    assert!(
        cloned_stops >= start + 2000 && widened >= 1 && failed == 0,
        "a child cloned into a new network namespace: {cloned_stops} stops ({start} \
         without the dups), widened {widened}, failed {failed}"
    );
    let _ = fs::remove_dir_all(&dir);
}

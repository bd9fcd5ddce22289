//! The default enforcement set: `vigil run --enforce` with the embedded rules and no
//! `--enforce-rule`/`--enforce-tag` blocks the rules tagged `vigil.enforce`.
//!
//! For every enabled rule carrying the tag (listed by `vigil rules list --enable-tag
//! vigil.enforce`), its attack runs twice under `vigil run` with the default rules: without
//! `--enforce` the kernel lets it happen (so the refusal below is Vigil's, not the kernel's), and
//! with `--enforce` it fails with EPERM and the rule's alert is written. The attacks are the
//! generator's actions (`vigil generate run --exact NAME`), except `cat /etc/shadow` (whose
//! own message shows the EPERM) and ptrace: under `vigil run` the
//! generator's own attach targets an already traced child, which the kernel refuses anyway, so
//! a Python `ptrace(PTRACE_ATTACH)` of a `sleep` started by this test stands in. The tagged set
//! and the demonstrated set must be equal: tagging a rule without a demonstration fails here.
//!
//! And a routine workload (file I/O, Python, `curl` to a loopback HTTP server, shell
//! subprocesses, reading `/etc/passwd`) runs to completion under `--enforce` with no alert.
//!
//! Requirements: ptrace of a child (`vigil run`). Attacks that need root to succeed without
//! enforcement (reading `/etc/shadow`, writing `/usr/local/bin`, `setns`, `bpf`) are skipped
//! with a reason when not root, and fail under `VIGIL_TEST_STRICT=1`.

// Tests report skips and progress on stderr.

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::support::{can_trace, host, is_root, scratch, strict, VIGIL};

/// How each default-enforced rule's attack is performed.
enum Attack {
    /// `vigil generate run --exact NAME`.
    Action(&'static str),
    /// A command whose own error message shows the refusal (the generator's `cat` of
    /// `/etc/shadow` reports only an exit status).
    Command(&'static [&'static str]),
    /// `python3 -c PTRACE_ATTACH` of a process this test starts.
    PtraceAttach,
}

/// The default enforcement set and the attack that shows each rule blocking.
const ENFORCED: &[(&str, Attack)] = &[
    (
        "Sensitive File Read by Unexpected Program",
        Attack::Command(&["cat", "/etc/shadow"]),
    ),
    (
        "Link Created to Sensitive File",
        Attack::Action("syscall.CreateSymlinkOverSensitiveFiles"),
    ),
    (
        "Standard Stream Redirected to Network Socket",
        Attack::Action("syscall.RedirectStdoutToNetwork"),
    ),
    (
        "Program Executed from Shared Memory Directory",
        Attack::Action("syscall.ExecutionFromDevShm"),
    ),
    (
        "Netcat or Socat Started with Command Execution",
        Attack::Action("syscall.NetcatRemoteCodeExecution"),
    ),
    (
        "Write Below Binary or System Configuration Directory",
        Attack::Action("syscall.WriteBelowBinaryDir"),
    ),
    (
        "Kernel Module Load Attempt",
        Attack::Action("syscall.KernelModuleLoad"),
    ),
    (
        "BPF Program Loaded by Unexpected Process",
        Attack::Action("syscall.BpfProgLoad"),
    ),
    ("Process Attached with ptrace", Attack::PtraceAttach),
    (
        "Namespace Changed by Non-Runtime Process",
        Attack::Action("syscall.ChangeNamespace"),
    ),
];

const PTRACE_ATTACH: &str = r#"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
pid = int(sys.argv[1])
if libc.ptrace(16, pid, None, None) != 0:
    print("PTRACE_ATTACH:", os.strerror(ctypes.get_errno()), file=sys.stderr)
    sys.exit(1)
os.waitpid(pid, 0)
libc.ptrace(17, pid, None, None)
print("attached and detached")
"#;

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn refused(output: &str) -> bool {
    output.contains("Operation not permitted") || output.contains("EPERM")
}

fn alerts(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// `vigil run [--enforce] --json --alerts ALERTS -- CMD…` with the default rules.
fn vigil_run(enforce: bool, alerts: &Path, cmd: &[&str]) -> Output {
    let mut c = Command::new(VIGIL);
    c.arg("run");
    if enforce {
        c.arg("--enforce");
    }
    c.args(["--json", "--alerts"])
        .arg(alerts)
        .arg("--")
        .args(cmd)
        .stdin(Stdio::null())
        .output()
        .expect("vigil run starts")
}

fn python() -> &'static str {
    if Path::new("/usr/bin/python3").is_file() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

#[test]
fn default_enforce_set_blocks_each_tagged_rule() {
    let _host = host::alone(module_path!());
    if !can_trace("default_enforce_set_blocks_each_tagged_rule") {
        return;
    }
    // The tagged set is the demonstrated set.
    let list = Command::new(VIGIL)
        .args(["rules", "list", "--enable-tag", "vigil.enforce", "--json"])
        .output()
        .expect("vigil rules list");
    assert!(list.status.success(), "vigil rules list: {}", text(&list));
    let tagged: BTreeSet<String> = String::from_utf8_lossy(&list.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|r| r["enabled"] == true)
        .filter_map(|r| r["rule"].as_str().map(str::to_string))
        .collect();
    let demonstrated: BTreeSet<String> = ENFORCED.iter().map(|(r, _)| r.to_string()).collect();
    assert_eq!(
        tagged, demonstrated,
        "the rules tagged vigil.enforce (left) differ from the rules this test demonstrates (right)"
    );

    let dir = scratch("attacks");
    let mut failures = Vec::new();
    let mut checked = 0;
    for (i, (rule, attack)) in ENFORCED.iter().enumerate() {
        let mut target = None;
        let cmd: Vec<String> = match attack {
            Attack::Action(name) => {
                vec![
                    VIGIL.into(),
                    "generate".into(),
                    "run".into(),
                    "--exact".into(),
                    name.to_string(),
                ]
            }
            Attack::Command(argv) => argv.iter().map(|a| a.to_string()).collect(),
            Attack::PtraceAttach => {
                let child = Command::new("sleep")
                    .arg("30")
                    .spawn()
                    .expect("sleep starts");
                let pid = child.id().to_string();
                target = Some(child);
                vec![python().into(), "-c".into(), PTRACE_ATTACH.into(), pid]
            }
        };
        let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();

        // Without enforcement the kernel allows the attack (and the rule alerts).
        let free_alerts = dir.join(format!("{i}-free.jsonl"));
        let free = vigil_run(false, &free_alerts, &cmd);
        let free_text = text(&free);
        // With the default enforcement set it is refused with EPERM, and alerts.
        let blocked_alerts = dir.join(format!("{i}-enforced.jsonl"));
        let blocked = vigil_run(true, &blocked_alerts, &cmd);
        let blocked_text = text(&blocked);
        if let Some(mut t) = target {
            let _ = t.kill();
            let _ = t.wait();
        }
        if !free.status.success() || refused(&free_text) {
            let why = format!("{rule}: the attack fails even without --enforce: {free_text}");
            if is_root() || strict() {
                failures.push(why);
            } else {
                eprintln!("not checked (not root): {why}");
            }
            continue;
        }
        if !refused(&blocked_text) {
            failures.push(format!(
                "{rule}: not refused with EPERM under --enforce: {blocked_text}"
            ));
            continue;
        }
        if !alerts(&blocked_alerts).iter().any(|a| a["rule"] == *rule) {
            failures.push(format!(
                "{rule}: refused but no alert of the rule: {:?}",
                alerts(&blocked_alerts)
            ));
            continue;
        }
        eprintln!("{rule}: blocked");
        checked += 1;
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    eprintln!(
        "{checked} of {} default-enforced rules shown blocking",
        ENFORCED.len()
    );
}

#[test]
fn routine_workload_runs_unblocked_under_default_enforcement() {
    let _host = host::alone(module_path!());
    if !can_trace("routine_workload_runs_unblocked_under_default_enforcement") {
        return;
    }
    // A loopback HTTP server answering one request.
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("local address").port();
    let server = std::thread::spawn(move || {
        if let Ok((mut s, _)) = listener.accept() {
            let mut buf = [0u8; 1024];
            let _ = s.read(&mut buf);
            let _ = s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nloopback\n",
            );
        }
    });

    let dir = scratch("routine");
    let d = dir.display();
    let py = python();
    let script = format!(
        "set -e
cd {d}
mkdir -p data
for i in 1 2 3; do echo \"record $i\" >> data/log.txt; done
cp data/log.txt data/copy.txt && mv data/copy.txt data/moved.txt && rm data/moved.txt
wc -l < data/log.txt
cat /etc/passwd > /dev/null && ls /usr/bin > /dev/null
tar -czf data.tgz data && gzip -t data.tgz
{py} -c 'import json, os, hashlib; p = os.path.join(\"data\", \"log.txt\"); print(json.dumps({{\"lines\": len(open(p).readlines()), \"sha\": hashlib.sha256(b\"x\").hexdigest()[:8]}}))'
curl -sS http://127.0.0.1:{port}/health
sh -c 'echo subshell $$ > /dev/null'
echo routine-done"
    );
    let alerts_path = dir.join("alerts.jsonl");
    let out = vigil_run(true, &alerts_path, &["sh", "-c", &script]);
    let _ = server.join();
    let all = text(&out);
    assert!(
        out.status.success(),
        "the routine workload failed under --enforce ({}): {all}",
        out.status
    );
    for want in ["3\n", "\"lines\": 3", "loopback", "routine-done"] {
        assert!(
            all.contains(want),
            "no `{want}` in the workload's output: {all}"
        );
    }
    let raised = alerts(&alerts_path);
    assert!(
        raised.is_empty(),
        "the routine workload raised alerts: {raised:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

//! Shared by the live tests (`live_rules.rs`, `container.rs`): a running `vigil watch --json`
//! whose alerts a reader thread collects, the requirements check (root, `vigil watch`), the
//! expected output fields of each generator action, alert matching, and loopback HTTP helpers.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use vigil_generator::Ruleset;

use super::{is_root, strict, VIGIL};

/// The `vigil` a [`Watch`] runs: this build's, or `VIGIL_TEST_BIN` (a measured run with the
/// release binary, e.g. the churn soak of BENCHMARKS.md).
pub fn watch_bin() -> std::ffi::OsString {
    std::env::var_os("VIGIL_TEST_BIN").unwrap_or_else(|| VIGIL.into())
}
/// How long an expected alert may take to show up (capture, poll cadence, a busy machine).
const ALERT_WAIT: Duration = Duration::from_secs(20);
/// How long `vigil watch` may take to load rules, attach and read `/proc`.
const START_WAIT: Duration = Duration::from_secs(180);

/// Serialises the live tests: two agents and two action sequences at once on a 2-core machine
/// only slow each other down.
pub static LIVE: Mutex<()> = Mutex::new(());

/// `Some(reason)` when live tests cannot run here.
pub fn missing_requirement() -> Option<String> {
    if !is_root() {
        return Some("not root (live capture needs root and eBPF)".into());
    }
    let help = Command::new(VIGIL).args(["watch", "--help"]).output();
    match help {
        Ok(out) if out.status.success() => None,
        _ => Some("this build of vigil has no `watch` command".into()),
    }
}

/// Skips (prints why) or, in strict mode, fails.
pub fn skip_or_fail(test: &str) -> bool {
    match missing_requirement() {
        None => false,
        Some(reason) if strict() => panic!("{test}: VIGIL_TEST_STRICT=1 but {reason}"),
        Some(reason) => {
            eprintln!("skipping {test}: {reason}");
            true
        }
    }
}

/// A running `vigil watch --json`, its alerts collected by a reader thread.
pub struct Watch {
    child: Child,
    alerts: Arc<(Mutex<Vec<Value>>, Condvar)>,
    stderr: Arc<Mutex<String>>,
}

impl Watch {
    /// Starts the agent (`rules`: extra `-r` files; none = the embedded ruleset) and waits
    /// until it reports it is watching.
    pub fn start(rules: &[PathBuf]) -> Watch {
        let mut args: Vec<std::ffi::OsString> = Vec::new();
        for r in rules {
            args.push("-r".into());
            args.push(r.clone().into_os_string());
        }
        Watch::start_with_args(&args)
    }

    /// Starts `vigil watch --json ARGS…` and waits until it reports it is watching.
    pub fn start_with_args(args: &[std::ffi::OsString]) -> Watch {
        let mut cmd = Command::new(watch_bin());
        // The live tests' agents need no web server (and must not clash on its port with
        // another test's agent: a taken port stops the start).
        cmd.args(["watch", "--json", "-o", "webserver.enabled=false"])
            .args(args);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("vigil watch starts");
        let alerts = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let stderr = Arc::new(Mutex::new(String::new()));
        let out = child.stdout.take().expect("piped stdout");
        let sink = Arc::clone(&alerts);
        thread::spawn(move || {
            for line in BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let (list, cv) = &*sink;
                    list.lock().unwrap().push(v);
                    cv.notify_all();
                }
            }
        });
        let err = child.stderr.take().expect("piped stderr");
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let log = Arc::clone(&stderr);
        thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                let Ok(line) = line else { break };
                if line.contains("watching") {
                    let _ = ready_tx.send(());
                }
                let mut log = log.lock().unwrap();
                if log.len() < 64 * 1024 {
                    log.push_str(&line);
                    log.push('\n');
                }
            }
        });
        let mut watch = Watch {
            child,
            alerts,
            stderr,
        };
        if ready_rx.recv_timeout(START_WAIT).is_err() {
            let status = watch.child.try_wait().ok().flatten();
            panic!(
                "vigil watch did not report it was watching within {START_WAIT:?} (exit: {status:?}); stderr:\n{}",
                watch.stderr()
            );
        }
        watch
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Number of alerts received so far (a cursor for [`Watch::wait_for`]).
    pub fn cursor(&self) -> usize {
        self.alerts.0.lock().unwrap().len()
    }

    /// Waits for an alert after `from` that satisfies `pred`.
    pub fn wait_for(&self, from: usize, pred: impl Fn(&Value) -> bool) -> Option<Value> {
        let deadline = Instant::now() + ALERT_WAIT;
        let (list, cv) = &*self.alerts;
        let mut guard = list.lock().unwrap();
        loop {
            if let Some(v) = guard.iter().skip(from).find(|v| pred(v)) {
                return Some(v.clone());
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            guard = cv.wait_timeout(guard, deadline - now).unwrap().0;
        }
    }

    /// Every alert after `from`.
    pub fn since(&self, from: usize) -> Vec<Value> {
        let list = self.alerts.0.lock().unwrap();
        list.iter().skip(from).cloned().collect()
    }

    /// Stops the agent with SIGINT (it drains what is in flight and closes its capture) and
    /// waits for it; its exit status.
    pub fn stop(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .expect("run kill");
        assert!(killed.success(), "kill -INT {pid}");
        self.child.wait().expect("wait for vigil watch")
    }

    /// Stops the agent with `signal` (`-TERM`, …) and waits for it; its exit status.
    pub fn stop_with(mut self, signal: &str) -> std::process::ExitStatus {
        let pid = self.child.id().to_string();
        let killed = Command::new("kill")
            .args([signal, &pid])
            .status()
            .expect("run kill");
        assert!(killed.success(), "kill {signal} {pid}");
        self.child.wait().expect("wait for vigil watch")
    }

    /// Alerts of `rule` after `from` (for failure messages).
    pub fn alerts_of(&self, from: usize, rule: &str) -> Vec<Value> {
        let list = self.alerts.0.lock().unwrap();
        list.iter()
            .skip(from)
            .filter(|v| v["rule"] == rule)
            .take(5)
            .cloned()
            .collect()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An expected value of one output field.
#[derive(Clone, Copy, Debug)]
pub enum M<'a> {
    Eq(&'a str),
    OneOf(&'a [&'a str]),
    Prefix(&'a str),
    Suffix(&'a str),
    Contains(&'a str),
}

impl M<'_> {
    fn matches(self, v: &str) -> bool {
        match self {
            M::Eq(x) => v == x,
            M::OneOf(xs) => xs.contains(&v),
            M::Prefix(x) => v.starts_with(x),
            M::Suffix(x) => v.ends_with(x),
            M::Contains(x) => v.contains(x),
        }
    }
}

const OPEN: M<'static> = M::OneOf(&["open", "openat", "openat2"]);
const EXEC: M<'static> = M::OneOf(&["execve", "execveat"]);

/// The output fields each action's alerts must carry (checked when the rule's output has the
/// field; `user.name` and `container.id` are added for every action).
pub fn expected_fields(action: &str) -> Vec<(&'static str, M<'static>)> {
    let v: &[(&'static str, M<'static>)] = match action {
        "syscall.ReadSensitiveFileUntrusted" => &[
            ("fd.name", M::Eq("/etc/shadow")),
            ("proc.name", M::Eq("cat")),
            ("proc.pname", M::Eq("vigil")),
            ("proc.cmdline", M::Eq("cat /etc/shadow")),
            ("proc.exepath", M::Eq("/usr/bin/cat")),
            ("evt.type", OPEN),
        ],
        "syscall.ReadSensitiveFileTrustedAfterStartup" => &[
            ("fd.name", M::Eq("/etc/shadow")),
            ("proc.name", M::Eq("nginx")),
            ("proc.pname", M::Eq("vigil")),
            ("proc.exepath", M::Suffix("/nginx")),
            ("evt.type", OPEN),
        ],
        "syscall.RunShellUntrusted" => &[
            ("proc.name", M::Eq("sh")),
            ("proc.pname", M::Eq("nginx")),
            ("proc.cmdline", M::Eq("sh -c true")),
            (
                "proc.exepath",
                M::OneOf(&["/bin/sh", "/usr/bin/dash", "/bin/dash"]),
            ),
            ("evt.type", EXEC),
        ],
        "syscall.SystemUserInteractive" => &[
            ("proc.name", M::Eq("true")),
            ("proc.pname", M::Eq("sshd")),
            ("user.name", M::Eq("nobody")),
            ("evt.type", EXEC),
        ],
        "syscall.ServiceAccountInteractiveShell" => &[
            ("proc.name", M::Eq("sh")),
            ("proc.cmdline", M::Eq("sh -c true")),
            ("user.name", M::Eq("daemon")),
            ("user.uid", M::Eq("1")),
            ("evt.type", EXEC),
        ],
        "syscall.FilelessExecutionViaMemfd" => &[
            ("proc.pname", M::Eq("vigil")),
            ("proc.exepath", M::Contains("memfd:")),
            ("evt.type", EXEC),
        ],
        "syscall.ExecutionFromDevShm" => &[
            ("proc.name", M::Eq("vigil-shm")),
            ("proc.pname", M::Eq("vigil")),
            ("proc.exepath", M::Prefix("/dev/shm/vigil-generator.")),
            ("evt.type", EXEC),
        ],
        "syscall.CreateSymlinkOverSensitiveFiles" => &[
            ("evt.arg.target", M::Eq("/etc/shadow")),
            ("evt.arg.linkpath", M::Suffix("/shadow-link")),
            ("proc.name", M::Eq("vigil")),
            ("evt.type", M::OneOf(&["symlink", "symlinkat"])),
        ],
        "syscall.CreateHardlinkOverSensitiveFiles" => &[
            ("evt.arg.oldpath", M::Eq("/etc/shadow")),
            ("evt.arg.newpath", M::Suffix("/shadow-hardlink")),
            ("proc.name", M::Eq("vigil")),
            ("evt.type", M::OneOf(&["link", "linkat"])),
        ],
        "syscall.DirectoryTraversalMonitoredFileRead" => &[
            ("fd.name", M::Eq("/etc/passwd")),
            ("fd.nameraw", M::Contains("/../../")),
            ("proc.name", M::Eq("vigil")),
            ("evt.type", OPEN),
        ],
        "syscall.SearchPrivateKeysOrPasswords" => &[
            ("proc.name", M::Eq("find")),
            ("proc.pname", M::Eq("vigil")),
            ("proc.cmdline", M::Suffix("-name id_rsa")),
            ("proc.exepath", M::Eq("/usr/bin/find")),
            ("evt.type", EXEC),
        ],
        "syscall.GrepPrivateKeys" => &[
            ("proc.name", M::Eq("grep")),
            ("proc.pname", M::Eq("vigil")),
            ("proc.cmdline", M::Contains("BEGIN RSA PRIVATE")),
            ("proc.exepath", M::Eq("/usr/bin/grep")),
            ("evt.type", EXEC),
        ],
        "syscall.FindAwsCredentials" => &[
            ("proc.name", M::Eq("find")),
            ("proc.cmdline", M::Suffix(".aws/credentials")),
            ("evt.type", EXEC),
        ],
        "syscall.ClearLogActivities" => &[
            ("fd.name", M::Prefix("/var/log/vigil-generator-")),
            ("proc.name", M::Eq("vigil")),
            ("evt.type", OPEN),
        ],
        "syscall.RemoveBulkDataFromDisk" => &[
            ("proc.name", M::Eq("shred")),
            ("proc.pname", M::Eq("vigil")),
            ("proc.cmdline", M::Contains("shred -u ")),
            ("proc.exepath", M::Eq("/usr/bin/shred")),
            ("evt.type", EXEC),
        ],
        "syscall.PtraceAttach" | "syscall.PtraceAntiDebug" => {
            &[("proc.name", M::Eq("vigil")), ("evt.type", M::Eq("ptrace"))]
        }
        "syscall.RedirectStdoutToNetwork" => &[
            ("proc.name", M::Eq("vigil")),
            ("fd.type", M::Eq("ipv4")),
            ("fd.sip", M::Eq("127.0.0.1")),
            ("evt.type", M::OneOf(&["dup", "dup2", "dup3"])),
        ],
        "syscall.NetcatRemoteCodeExecution" => &[
            ("proc.name", M::Eq("nc")),
            ("proc.cmdline", M::Eq("nc -e /bin/sh 127.0.0.1 4444")),
            ("evt.type", EXEC),
        ],
        "syscall.ChangeNamespace" => &[
            ("proc.name", M::Eq("vigil")),
            ("evt.type", M::OneOf(&["setns", "unshare"])),
        ],
        "syscall.WriteBelowBinaryDir" => &[
            ("fd.name", M::Prefix("/usr/local/bin/vigil-generator-")),
            ("proc.name", M::Eq("vigil")),
            ("evt.type", OPEN),
        ],
        "syscall.WriteBelowEtc" => &[
            ("fd.name", M::Prefix("/etc/security/vigil-generator-")),
            ("proc.name", M::Eq("vigil")),
            ("evt.type", OPEN),
        ],
        "syscall.DeleteShellHistory" => &[
            ("proc.name", M::Eq("vigil")),
            ("evt.type", M::OneOf(&["unlink", "unlinkat"])),
        ],
        "syscall.SetuidRoot" => &[("proc.name", M::Eq("vigil")), ("evt.type", M::Eq("setuid"))],
        "syscall.KernelModuleLoad" => &[
            ("proc.name", M::Eq("vigil")),
            ("evt.type", M::OneOf(&["init_module", "finit_module"])),
        ],
        "syscall.BpfProgLoad" => &[
            ("proc.name", M::Eq("bpf-loader")),
            ("proc.pname", M::Eq("vigil")),
            ("evt.type", M::Eq("bpf")),
        ],
        _ => &[],
    };
    let mut fields = v.to_vec();
    if !fields.iter().any(|(k, _)| *k == "user.name") {
        fields.push(("user.name", M::Eq("root")));
    }
    fields.push(("container.id", M::Eq("host")));
    fields
}

/// The value of `field` in an alert's `output_fields`, as text; `None` when the rule's output
/// does not include it.
pub fn output_field(alert: &Value, field: &str) -> Option<String> {
    let v = alert.get("output_fields")?.get(field)?;
    Some(match v {
        Value::String(s) => s.clone(),
        Value::Null => "<NA>".into(),
        other => other.to_string(),
    })
}

/// The fields each rule's output names (`%proc.name`, `%proc.aname[2]` …), read from the rules
/// files themselves, not from Vigil: Falco's JSON alert carries every one of them in
/// `output_fields` (`<NA>` when it has no value), so one missing there is a lost key.
#[derive(Clone, Debug, Default)]
pub struct RuleOutputs(BTreeMap<String, BTreeSet<String>>);

impl RuleOutputs {
    /// The rules of `ruleset`: Vigil's embedded file (`rules/vigil_rules.yaml`) or Falco's
    /// stable rules.
    pub fn of(ruleset: Ruleset) -> RuleOutputs {
        RuleOutputs::of_files(&[ruleset_file(ruleset)])
    }

    /// The rules of `files`; a later item of the same rule appends to its output (Falco's
    /// `append`/`override: {output: append}`) unless it overrides it with `replace`.
    pub fn of_files(files: &[PathBuf]) -> RuleOutputs {
        let mut outputs = RuleOutputs::default();
        for file in files {
            let text = std::fs::read_to_string(file)
                .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
            outputs.add_yaml(&text, &file.display().to_string());
        }
        outputs
    }

    /// The rules of one rules file's text (`origin` names it in messages).
    pub fn add_yaml(&mut self, text: &str, origin: &str) {
        let items: Vec<Value> = serde_saphyr::from_str(text)
            .unwrap_or_else(|e| panic!("{origin} is not a YAML list: {e}"));
        let before = self.0.len();
        for item in &items {
            let (Some(rule), Some(output)) = (item["rule"].as_str(), item["output"].as_str())
            else {
                continue;
            };
            let named = output_template_fields(output);
            let entry = self.0.entry(rule.to_owned()).or_default();
            if item["override"]["output"] == "replace" {
                *entry = named;
            } else {
                entry.extend(named);
            }
        }
        assert!(self.0.len() > before, "no rule with an output in {origin}");
    }

    /// The fields `rule`'s output names; `None` for a rule these files do not define.
    pub fn fields(&self, rule: &str) -> Option<&BTreeSet<String>> {
        self.0.get(rule)
    }
}

/// The rules file of `ruleset`, as loaded by the tests.
pub fn ruleset_file(ruleset: Ruleset) -> PathBuf {
    match ruleset {
        Ruleset::Vigil => super::workspace().join("rules/vigil_rules.yaml"),
        Ruleset::FalcoStable => super::falco_rules(),
    }
}

/// The `%field` references of an output template, by Falco's field syntax: a dotted name of
/// letters, digits and `_`, with an optional `[argument]` (`%proc.aname[2]`); a `.` that ends
/// the name is the sentence's.
pub fn output_template_fields(output: &str) -> BTreeSet<String> {
    let mut fields = BTreeSet::new();
    let mut rest = output;
    while let Some(at) = rest.find('%') {
        rest = &rest[at + 1..];
        let len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.'))
            .unwrap_or(rest.len());
        let mut name = rest[..len].trim_end_matches('.').to_owned();
        let mut taken = len;
        if rest[len..].starts_with('[') && name.len() == len {
            if let Some(close) = rest[len..].find(']') {
                name.push_str(&rest[len..=len + close]);
                taken = len + close + 1;
            }
        }
        if name.contains('.') {
            fields.insert(name);
        }
        rest = &rest[taken..];
    }
    fields
}

/// Whether `alert` is `rule`, its `output_fields` hold every field the rule's output names
/// (per `outputs`; a rule `outputs` does not know never matches), and every expected field
/// the rule's output names — or that the alert carries anyway (`append_output`) — has the
/// expected value. Expected fields the output does not name are not checked.
pub fn alert_matches(
    alert: &Value,
    rule: &str,
    fields: &[(&str, M<'_>)],
    outputs: &RuleOutputs,
) -> bool {
    let Some(named) = outputs.fields(rule) else {
        return false;
    };
    alert["rule"] == rule
        && named.iter().all(|k| output_field(alert, k).is_some())
        && fields.iter().all(|(k, m)| match output_field(alert, k) {
            Some(v) => m.matches(&v),
            None => !named.contains(*k),
        })
}

/// Runs one action in its own process.
pub fn run_action(name: &str) -> Result<String, String> {
    let out = Command::new(VIGIL)
        .args(["generate", "run", "--exact", name])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run vigil generate: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if out.status.success() {
        Ok(text)
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_string())
    }
}

/// One HTTP GET on loopback; the response body.
pub fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_string())
}

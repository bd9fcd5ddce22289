//! Real alert receivers for the end-to-end tests and the `receivers` bench: an rsyslogd started with a
//! private configuration (its own socket and log file in a scratch directory, never
//! `/dev/log`), a loopback HTTP receiver that checks every request against Falcosidekick's
//! input contract, and a capture whose alerts cover every Falco priority.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Falco's priorities, most severe first: index = syslog severity (RFC 5424 section 6.2.1).
pub const PRIORITIES: [&str; 8] = [
    "Emergency",
    "Alert",
    "Critical",
    "Error",
    "Warning",
    "Notice",
    "Informational",
    "Debug",
];

/// The syslog severity Falco's priority `name` maps to (as documented in deploy/README.md).
pub fn severity_of(name: &str) -> u8 {
    PRIORITIES
        .iter()
        .position(|p| *p == name)
        .unwrap_or_else(|| panic!("`{name}` is not one of Falco's priorities")) as u8
}

/// One rule per Falco priority: rule `Prio <Name>` fires on an execve of `p-<name>`.
pub fn rules() -> String {
    PRIORITIES
        .iter()
        .map(|p| {
            format!(
                "- rule: Prio {p}\n  desc: one alert per p-{l} execve\n  \
                 condition: evt.type = execve and proc.name = p-{l}\n  \
                 output: \"%proc.name n=%proc.args user=%user.name\"\n  \
                 priority: {u}\n  tags: [test, prio_{l}]\n",
                l = p.to_lowercase(),
                u = p.to_uppercase()
            )
        })
        .collect()
}

/// Arguments with spaces, quotes, `%`, a backslash and non-ASCII text: they must reach the
/// receiver unchanged.
pub fn awkward_arg(n: u64) -> String {
    format!("{n} a  b \"q\" 50% \\x caf\u{e9}")
}

/// A JSON lines capture with `count` execves cycling through the priorities: `count` alerts.
pub fn write_capture(path: &Path, count: u64) {
    let mut text = String::new();
    let header = serde_json::json!({"vigil_capture": 1, "hostname": "recv-host",
        "start_ts": 1_700_000_000_000_000_000u64});
    let init = serde_json::json!({"thread": {"tid": 1, "pid": 1, "ppid": 0, "comm": "init",
        "exe": "/sbin/init", "exepath": "/sbin/init", "args": [], "cwd": "/", "uid": 0, "gid": 0,
        "euid": 0, "egid": 0, "loginuid": 4_294_967_295u64, "tty": 0, "cgroup": "/"}});
    text.push_str(&format!("{header}\n{init}\n"));
    for n in 0..count {
        let pid = 1000 + n;
        let comm = format!("p-{}", PRIORITIES[(n % 8) as usize].to_lowercase());
        let exe = format!("/usr/bin/{comm}");
        let line = serde_json::json!({"ts": 1_700_000_000_000_000_000u64 + 1000 * (n + 1),
            "tid": pid, "pid": pid, "type": "execve", "res": 0, "args": {"filename": exe,
            "exe": comm, "args": [awkward_arg(n)], "env": ["HOME=/root"], "comm": comm,
            "trusted_exepath": exe, "cwd": "/", "tid": pid, "pid": pid, "ptid": 1, "uid": 0,
            "gid": 0, "euid": 0, "egid": 0, "loginuid": 4_294_967_295u64, "tty": 0,
            "cgroups": "/"}});
        text.push_str(&format!("{line}\n"));
    }
    fs::write(path, text).expect("write capture");
}

/// `vigil replay CAPTURE -r RULES` over the capture and rules in `dir` (`capture.jsonl`,
/// `rules.yaml`: [`write_capture`], [`rules`]) with every output off except those `args`
/// enable, stdin closed; `vigil` is the binary under test.
pub fn replay_command<A: AsRef<OsStr>>(vigil: &Path, dir: &Path, args: &[A]) -> Command {
    let mut command = Command::new(vigil);
    command
        .arg("replay")
        .arg(dir.join("capture.jsonl"))
        .arg("-r")
        .arg(dir.join("rules.yaml"))
        .args(["--min-priority", "debug"])
        .args(["-o", "stdout_output.enabled=false"])
        .args(["-o", "syslog_output.enabled=false"])
        .args(args)
        .stdin(Stdio::null());
    command
}

/// The rsyslogd binary, when installed (`make deps` installs the Debian package).
pub fn rsyslogd() -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin".into(), "/sbin".into()]);
    dirs.into_iter()
        .map(|d| d.join("rsyslogd"))
        .find(|p| p.is_file())
}

/// What rsyslog logged for one message of facility `user`, via the test's template.
#[derive(Debug, Clone)]
pub struct Logged {
    pub severity: u8,
    pub facility: String,
    pub hostname: String,
    pub app_name: String,
    pub procid: String,
    pub msg: String,
}

/// An rsyslogd in the foreground with a private configuration, stopped on drop (also when
/// the test panics). It listens on `socket` (imuxsock) and writes every `user` facility
/// message to `alerts.log` through a template that prints the parsed fields; anything else
/// (rsyslogd's own messages) goes to `other.log`.
pub struct Rsyslog {
    child: Option<Child>,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub log: PathBuf,
}

/// Field separator in the log template: a control character cannot occur in a parsed field
/// (rsyslog escapes received control characters as `#ooo`).
const SEP: char = '\u{1}';

impl Rsyslog {
    /// Starts rsyslogd. `parser_chain`: the imuxsock input hands messages to rsyslog's
    /// parser chain (`UseSpecialParser="off"`); otherwise the
    /// input keeps its default special parser, as on a stock `/dev/log`.
    pub fn start(bin: &Path, dir: &Path, parser_chain: bool) -> Rsyslog {
        let d = dir.join("rsyslog");
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).expect("create rsyslog dir");
        let socket = d.join("log.sock");
        let log = d.join("alerts.log");
        let special = if parser_chain { "off" } else { "on" };
        let conf = format!(
            r#"global(workDirectory="{d}")
module(load="imuxsock" SysSock.Use="off")
input(type="imuxsock" Socket="{socket}" CreatePath="on" UseSpecialParser="{special}"
      RateLimit.Interval="0")
template(name="fields" type="string"
         string="%syslogseverity%{SEP}%syslogfacility-text%{SEP}%hostname%{SEP}%app-name%{SEP}%procid%{SEP}%msg%\n")
if $syslogfacility-text == "user" then {{
  action(type="omfile" file="{log}" template="fields")
  stop
}}
action(type="omfile" file="{other}")
"#,
            d = d.display(),
            socket = socket.display(),
            log = log.display(),
            other = d.join("other.log").display(),
        );
        let conf_path = d.join("rsyslog.conf");
        fs::write(&conf_path, conf).expect("write rsyslog.conf");
        let stderr = fs::File::create(d.join("rsyslogd.stderr")).expect("create stderr file");
        let child = Command::new(bin)
            .arg("-n")
            .arg("-f")
            .arg(&conf_path)
            .arg("-i")
            .arg(d.join("rsyslogd.pid"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("start rsyslogd");
        let mut r = Rsyslog {
            child: Some(child),
            dir: d,
            socket,
            log,
        };
        let start = Instant::now();
        while !r.socket.exists() {
            if let Some(status) = r.child.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("rsyslogd exited at start ({status}): {}", r.stderr_text());
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "rsyslogd did not create {} within 60s: {}",
                r.socket.display(),
                r.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        r
    }

    pub fn stderr_text(&self) -> String {
        fs::read_to_string(self.dir.join("rsyslogd.stderr")).unwrap_or_default()
    }

    /// The messages logged so far (complete lines only).
    pub fn logged(&self) -> Vec<Logged> {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        let complete = &text[..text.rfind('\n').map_or(0, |i| i + 1)];
        complete
            .lines()
            .map(|line| {
                let f: Vec<&str> = line.splitn(6, SEP).collect();
                assert_eq!(f.len(), 6, "rsyslog line without every field: {line:?}");
                Logged {
                    severity: f[0]
                        .parse()
                        .unwrap_or_else(|_| panic!("severity in {line:?}")),
                    facility: f[1].to_owned(),
                    hostname: f[2].to_owned(),
                    app_name: f[3].to_owned(),
                    procid: f[4].to_owned(),
                    msg: f[5].to_owned(),
                }
            })
            .collect()
    }

    /// Waits until `count` messages are logged, then stops rsyslogd (SIGTERM: it flushes
    /// and exits) and returns everything it logged, so that late duplicates show too.
    pub fn collect(mut self, count: usize, limit: Duration) -> Vec<Logged> {
        let start = Instant::now();
        while self.logged().len() < count && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.stop();
        self.logged()
    }

    pub fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(20) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Rsyslog {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Falcosidekick's input contract, as its documentation and handler describe it: a `POST /`
/// whose body is one JSON object with `output` (non-empty string), `priority` (a Falco
/// priority name), `rule` (string), `time` (RFC 3339 with nanoseconds) and `output_fields`
/// (object), and optionally `source` (string), `tags` (array of strings), `hostname`
/// (string) and `uuid` (string). Vigil, like Falco with `json_output`, labels the body
/// `application/json`. Returns every violation found.
pub fn contract_violations(
    method: &str,
    path: &str,
    headers: &BTreeMap<String, String>,
    body: &[u8],
) -> Vec<String> {
    let mut v = Vec::new();
    if method != "POST" {
        v.push(format!("method {method}, not POST"));
    }
    if path != "/" {
        v.push(format!("path {path}, not /"));
    }
    match headers.get("content-type") {
        Some(ct) if ct.split(';').next().map(str::trim) == Some("application/json") => {}
        other => v.push(format!("content-type {other:?}, not application/json")),
    }
    let obj: Value = match serde_json::from_slice(body) {
        Ok(o) => o,
        Err(e) => {
            v.push(format!("body is not JSON: {e}"));
            return v;
        }
    };
    let Some(map) = obj.as_object() else {
        v.push("body is not a JSON object".into());
        return v;
    };
    const KNOWN: [&str; 9] = [
        "output",
        "priority",
        "rule",
        "time",
        "output_fields",
        "source",
        "tags",
        "hostname",
        "uuid",
    ];
    for k in map.keys() {
        if !KNOWN.contains(&k.as_str()) {
            v.push(format!("unknown key `{k}`"));
        }
    }
    match map.get("output") {
        Some(Value::String(s)) if !s.is_empty() => {}
        other => v.push(format!("output {other:?}: needs a non-empty string")),
    }
    match map.get("priority") {
        Some(Value::String(s)) if PRIORITIES.contains(&s.as_str()) => {}
        other => v.push(format!("priority {other:?}: needs a Falco priority name")),
    }
    match map.get("rule") {
        Some(Value::String(s)) if !s.is_empty() => {}
        other => v.push(format!("rule {other:?}: needs a non-empty string")),
    }
    match map.get("time") {
        Some(Value::String(s)) if rfc3339_nanos(s) => {}
        other => v.push(format!("time {other:?}: needs RFC 3339 with nanoseconds")),
    }
    match map.get("output_fields") {
        Some(Value::Object(fields)) => {
            for (k, val) in fields {
                if val.is_object() || val.is_array() {
                    v.push(format!("output_fields.{k} is not a scalar: {val}"));
                }
            }
        }
        other => v.push(format!("output_fields {other:?}: needs an object")),
    }
    for key in ["source", "hostname", "uuid"] {
        match map.get(key) {
            None | Some(Value::String(_)) => {}
            Some(other) => v.push(format!("{key} {other}: needs a string")),
        }
    }
    match map.get("tags") {
        None => {}
        Some(Value::Array(tags)) if tags.iter().all(Value::is_string) => {}
        Some(other) => v.push(format!("tags {other}: needs an array of strings")),
    }
    v
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnn` then `Z` or `±HH:MM`, with fields in range.
pub fn rfc3339_nanos(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| -> Option<u32> {
        let part = s.get(r)?;
        part.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| part.parse().ok())?
    };
    if b.len() < 30 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return false;
    }
    if b[16] != b':' || b[19] != b'.' {
        return false;
    }
    let (Some(_), Some(mo), Some(d), Some(h), Some(mi), Some(sec), Some(_)) = (
        digits(0..4),
        digits(5..7),
        digits(8..10),
        digits(11..13),
        digits(14..16),
        digits(17..19),
        digits(20..29),
    ) else {
        return false;
    };
    let zone_ok = match &s[29..] {
        "Z" => true,
        z => {
            z.len() == 6
                && (z.starts_with('+') || z.starts_with('-'))
                && z.as_bytes()[3] == b':'
                && digits(30..32).is_some_and(|h| h < 24)
                && digits(33..35).is_some_and(|m| m < 60)
        }
    };
    (1..=12).contains(&mo) && (1..=31).contains(&d) && h < 24 && mi < 60 && sec <= 60 && zone_ok
}

/// One request as the receiver saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub body: Vec<u8>,
    pub violations: Vec<String>,
}

/// A loopback HTTP/1.1 server (keep-alive, one thread per connection) that answers 200 to
/// requests that keep Falcosidekick's contract and 400 to the others, and records them all.
pub struct SidekickReceiver {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<Request>>>,
    /// TCP connections accepted (a client that keeps connections alive opens few).
    pub connections: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
}

impl SidekickReceiver {
    pub fn start() -> SidekickReceiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind receiver");
        let addr = listener.local_addr().expect("receiver address");
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let connections = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (reqs, conns, flag) = (
            Arc::clone(&requests),
            Arc::clone(&connections),
            Arc::clone(&stop),
        );
        // A blocking accept (a polling one would add its poll interval to every new
        // connection); `drop` wakes it with a connection of its own.
        let handle = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if flag.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                conns.fetch_add(1, Ordering::SeqCst);
                let reqs = Arc::clone(&reqs);
                std::thread::spawn(move || serve_connection(stream, &reqs));
            }
        });
        SidekickReceiver {
            addr,
            requests,
            connections,
            stop,
            handle: Some(handle),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn count(&self) -> usize {
        self.requests.lock().expect("requests lock").len()
    }

    pub fn take(&self) -> Vec<Request> {
        std::mem::take(&mut *self.requests.lock().expect("requests lock"))
    }
}

impl Drop for SidekickReceiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            if TcpStream::connect(self.addr).is_ok() {
                let _ = h.join();
            }
        }
    }
}

fn serve_connection(stream: TcpStream, requests: &Mutex<Vec<Request>>) {
    if stream.set_nonblocking(false).is_err()
        || stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .is_err()
    {
        return;
    }
    let Ok(write_half) = stream.try_clone() else {
        return;
    };
    let mut out = write_half;
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        match reader.read_line(&mut request_line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let mut parts = request_line.split_whitespace();
        let method = parts.next().unwrap_or_default().to_owned();
        let path = parts.next().unwrap_or_default().to_owned();
        let mut headers = BTreeMap::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" || line == "\n" {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
            }
        }
        let mut violations = Vec::new();
        let len = match headers.get("content-length").map(|v| v.parse::<usize>()) {
            Some(Ok(n)) => n,
            _ => {
                violations.push(format!("no usable content-length: {headers:?}"));
                0
            }
        };
        let mut body = vec![0; len];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        violations.extend(contract_violations(&method, &path, &headers, &body));
        let status = if violations.is_empty() {
            "200 OK"
        } else {
            "400 Bad Request"
        };
        requests
            .lock()
            .expect("requests lock")
            .push(Request { body, violations });
        let close = headers
            .get("connection")
            .is_some_and(|c| c.eq_ignore_ascii_case("close"));
        let response = format!(
            "HTTP/1.1 {status}\r\nContent-Length: 0\r\n{}\r\n",
            if close { "Connection: close\r\n" } else { "" }
        );
        if out.write_all(response.as_bytes()).is_err() || close {
            return;
        }
    }
}

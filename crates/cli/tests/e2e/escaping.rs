//! One alert is always one line: field values chosen by a monitored process (its path, arguments,
//! environment) cannot add a line to a text alert, forge one, or reach a terminal or a log as raw
//! control characters. Checked live under `vigil run` (a traced `cat` with a hostile argv and
//! environment) and through every line-writing output under `vigil replay` (standard output,
//! file, program, syslog to a datagram socket the test binds), with JSON alongside.
//!
//! `vigil run` needs ptrace of a child process; the `/etc/shadow` variant also needs root.
//! Missing requirements skip with a reason and fail under `VIGIL_TEST_STRICT=1`.

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use crate::support::{can_trace, host, is_root, scratch, skip, text, vigil_cmd};

/// The forged alert a hostile argument carries, after a newline.
const FORGED: &str = "12:00:00.000000000: Critical FORGED alert rule=fake";

/// Whether `line` starts like a text alert: `HH:MM:SS.nnnnnnnnn: `.
fn looks_like_alert(line: &str) -> bool {
    let b = line.as_bytes();
    b.len() > 20
        && b[..18].iter().enumerate().all(|(i, c)| match i {
            2 | 5 => *c == b':',
            8 => *c == b'.',
            _ => c.is_ascii_digit(),
        })
        && &b[18..20] == b": "
}

/// Fails on any byte or code point in `out` other than line feeds that a terminal or a line
/// splitter acts on (C0, DEL, C1, U+2028/U+2029, bidi overrides), and on invalid UTF-8.
fn assert_no_raw_controls(what: &str, out: &[u8]) {
    let s = std::str::from_utf8(out).unwrap_or_else(|e| panic!("{what}: not UTF-8: {e}"));
    for (i, c) in s.char_indices() {
        assert!(
            c == '\n'
                || !(c.is_control()
                    || matches!(c, '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')),
            "{what}: raw {c:?} at byte {i}: {s:?}"
        );
    }
}

/// The argument and environment the hostile workload carries.
fn hostile_arg() -> Vec<u8> {
    format!("x\n{FORGED}\u{1b}[2J\u{7}\r\u{7f}\u{85}\u{2028}").into_bytes()
}

/// `hostile_arg()` as the text alert prints it.
fn hostile_arg_escaped() -> String {
    format!("x\\n{FORGED}\\x1b[2J\\x07\\r\\x7f\\u{{85}}\\u{{2028}}")
}

const EVIL_ENV: &[u8] = b"v\x1b]0;pwned\x07\r\n\xff";
const EVIL_ENV_ESCAPED: &str = "v\\x1b]0;pwned\\x07\\r\\n\\xff";

/// `vigil run` of `cat FILE HOSTILE` with `EVIL=<control bytes>` in its environment, alerts to a
/// file (so the workload's own stderr cannot mix in). Returns the alerts file's bytes and the
/// stderr (with the stats line).
fn run_hostile_cat(dir: &Path, rules: &Path, file: &Path, json: bool) -> (Vec<u8>, String) {
    let alerts = dir.join(if json { "alerts.json" } else { "alerts.txt" });
    let _ = fs::remove_file(&alerts);
    let mut cmd = vigil_cmd();
    cmd.arg("run")
        .arg("-r")
        .arg(rules)
        .arg("--alerts")
        .arg(&alerts)
        .args(["--stats", "-o", "syslog_output.enabled=false"]);
    if json {
        cmd.arg("--json");
    }
    let out: Output = cmd
        .args(["--", "cat"])
        .arg(file)
        .arg(OsStr::from_bytes(&hostile_arg()))
        .env("EVIL", OsStr::from_bytes(EVIL_ENV))
        .stdout(Stdio::null())
        .output()
        .expect("run vigil");
    let stderr = text(&out.stderr);
    // `cat` fails on the second (missing) file: exit 1, as the workload did.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    (fs::read(&alerts).expect("alerts file"), stderr)
}

fn stats_alerts(stderr: &str) -> usize {
    stderr
        .lines()
        .find(|l| l.starts_with("vigil: traced_syscalls="))
        .and_then(|l| {
            l.split_whitespace()
                .find_map(|kv| kv.strip_prefix("alerts=")?.parse().ok())
        })
        .unwrap_or_else(|| panic!("no alerts= in the stats line: {stderr}"))
}

/// Checks the text alerts of a hostile `cat` run: one line per alert, no raw control bytes, the
/// forged alert only escaped inside a real one. Returns the lines.
fn check_text_alerts(what: &str, bytes: &[u8], stderr: &str, expect: &str) -> Vec<String> {
    assert_no_raw_controls(what, bytes);
    let all = text(bytes);
    let lines: Vec<String> = all.lines().map(str::to_owned).collect();
    assert!(!lines.is_empty(), "{what}: no alerts; {stderr}");
    assert_eq!(
        lines.len(),
        stats_alerts(stderr),
        "{what}: one line per alert: {all}"
    );
    for line in &lines {
        assert!(
            looks_like_alert(line),
            "{what}: not an alert line: {line:?}"
        );
        // The forged alert appears only escaped, after the `\n` it came with.
        let unforged = line.replace(&format!("\\n{FORGED}"), "");
        assert!(
            !unforged.contains("FORGED"),
            "{what}: forged text unescaped: {line}"
        );
    }
    assert!(
        lines.iter().any(|l| l.contains(expect)),
        "{what}: no alert with {expect:?}: {all}"
    );
    lines
}

const OPEN_RULES: &str = r#"
- rule: Hostile open
  desc: test rule, an open of the marked file by a process with a hostile argv and environment
  condition: evt.type in (open, openat, openat2) and fd.name endswith "/marked.txt"
  output: "marked file opened (file=%fd.name cmdline=%proc.cmdline args=%proc.args evil=%proc.env[EVIL])"
  priority: WARNING
  tags: [test]
"#;

#[test]
fn traced_hostile_argv_and_env_stay_inside_one_alert_line() {
    let _host = host::shared();
    if !can_trace("hostile_run") {
        return;
    }
    let dir = scratch("run");
    let rules = dir.join("rules.yaml");
    fs::write(&rules, OPEN_RULES).unwrap();
    let marked = dir.join("marked.txt");
    fs::write(&marked, "data\n").unwrap();

    let (bytes, stderr) = run_hostile_cat(&dir, &rules, &marked, false);
    let lines = check_text_alerts("text alerts", &bytes, &stderr, "marked file opened");
    assert_eq!(lines.len(), 1, "{lines:?}");
    let hostile = hostile_arg_escaped();
    let want = format!(
        "Warning marked file opened (file={m} cmdline=cat {m} {hostile} args={m} {hostile} \
         evil={EVIL_ENV_ESCAPED})",
        m = marked.display()
    );
    assert!(lines[0].ends_with(&want), "got  {}\nwant …{want}", lines[0]);

    // JSON: one object per line, `output` is the escaped text, the fields the raw values.
    let (bytes, stderr) = run_hostile_cat(&dir, &rules, &marked, true);
    let all = text(&bytes);
    let objects: Vec<serde_json::Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(objects.len(), stats_alerts(&stderr), "{all}");
    let v = &objects[0];
    assert!(
        v["output"].as_str().unwrap().ends_with(&want),
        "JSON output is the text line: {v}"
    );
    assert_eq!(
        v["output_fields"]["proc.env[EVIL]"],
        String::from_utf8_lossy(EVIL_ENV).as_ref()
    );
    let args = format!(
        "{} {}",
        marked.display(),
        String::from_utf8_lossy(&hostile_arg())
    );
    assert_eq!(v["output_fields"]["proc.args"], args.as_str());
    let _ = fs::remove_dir_all(&dir);
}

#[test]
fn shadow_read_with_hostile_argv_is_one_upstream_alert_line() {
    let _host = host::shared();
    if !can_trace("hostile_shadow") {
        return;
    }
    if !is_root() {
        skip("hostile_shadow", "reading /etc/shadow needs root");
        return;
    }
    let rules = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/falco-rules/falco_rules.yaml");
    if !rules.is_file() {
        skip("hostile_shadow", &format!("{} not found", rules.display()));
        return;
    }
    let dir = scratch("shadow");
    let (bytes, stderr) = run_hostile_cat(&dir, &rules, Path::new("/etc/shadow"), false);
    let lines = check_text_alerts(
        "upstream alerts",
        &bytes,
        &stderr,
        "Sensitive file opened for reading by non-trusted program",
    );
    let shadow = lines
        .iter()
        .find(|l| l.contains("file=/etc/shadow"))
        .unwrap_or_else(|| panic!("no /etc/shadow alert: {lines:?}"));
    assert!(
        shadow.contains(&format!(
            "command=cat /etc/shadow {}",
            hostile_arg_escaped()
        )),
        "{shadow}"
    );
    let _ = fs::remove_dir_all(&dir);
}

const EXEC_RULES: &str = r#"
- rule: Hostile exec
  desc: test rule, one alert per execve of hostiletool
  condition: evt.type = execve and proc.name = hostiletool
  output: "hostile exec (exe=%proc.exepath cmdline=%proc.cmdline evil=%proc.env[EVIL])"
  priority: WARNING
  tags: [test]
"#;

/// Base64 of `bad\xff\x85\n\xe2\x80` with a literal backslash-n: invalid UTF-8, a raw C1 byte,
/// a backslash that reads as an escape, a truncated sequence.
const BAD_B64: &str = "YmFk/4VcbuKA";
const BAD_ESCAPED: &str = "bad\\xff\\x85\\\\n\\xe2\\x80";

fn capture(dir: &Path) -> PathBuf {
    let header = serde_json::json!({"vigil_capture": 1, "hostname": "t",
        "start_ts": 1_700_000_000_000_000_000u64});
    let init = serde_json::json!({"thread": {"tid": 1, "pid": 1, "ppid": 0, "comm": "init",
        "exe": "/sbin/init", "exepath": "/sbin/init", "args": [], "cwd": "/", "uid": 0,
        "gid": 0, "euid": 0, "egid": 0, "loginuid": 4_294_967_295u64, "tty": 0,
        "cgroup": "/"}});
    let hostile = String::from_utf8(hostile_arg()).unwrap();
    let exe = format!("/tmp/x\n{FORGED}\u{2029}");
    let mut text = format!("{header}\n{init}\n");
    for n in 0..2u64 {
        let pid = 1000 + n;
        let event = serde_json::json!({"ts": 1_700_000_000_000_000_000u64 + 1000 * (n + 1),
            "tid": pid, "pid": pid, "type": "execve", "res": 0, "args": {"filename": exe,
            "exe": "hostiletool", "args": [hostile, {"b64": BAD_B64}],
            "env": [format!("EVIL=\r\u{1b}[1A{FORGED}"), "HOME=/root"],
            "comm": "hostiletool", "trusted_exepath": exe, "cwd": "/", "tid": pid,
            "pid": pid, "ptid": 1, "uid": 0, "gid": 0, "euid": 0, "egid": 0,
            "loginuid": 4_294_967_295u64, "tty": 0, "cgroups": "/"}});
        text.push_str(&format!("{event}\n"));
    }
    let path = dir.join("capture.jsonl");
    fs::write(&path, text).unwrap();
    path
}

/// The expected text of the replayed alerts (without time and priority).
fn replay_output() -> String {
    format!(
        "hostile exec (exe=/tmp/x\\n{FORGED}\\u{{2029}} cmdline=hostiletool {} {BAD_ESCAPED} \
         evil=\\r\\x1b[1A{FORGED})",
        hostile_arg_escaped()
    )
}

fn replay(dir: &Path, args: &[&str]) -> Output {
    let rules = dir.join("rules.yaml");
    fs::write(&rules, EXEC_RULES).unwrap();
    let out = vigil_cmd()
        .arg("replay")
        .arg(capture(dir))
        .arg("-r")
        .arg(&rules)
        .args(["-o", "syslog_output.enabled=false"])
        .args(args)
        .output()
        .expect("run vigil replay");
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}

/// The two replayed alerts as text lines, checked.
fn check_replay_lines(what: &str, bytes: &[u8]) -> Vec<String> {
    assert_no_raw_controls(what, bytes);
    let lines: Vec<String> = text(bytes).lines().map(str::to_owned).collect();
    let want = [
        format!("22:13:20.000001000: Warning {}", replay_output()),
        format!("22:13:20.000002000: Warning {}", replay_output()),
    ];
    assert_eq!(lines, want, "{what}");
    lines
}

#[test]
fn replayed_hostile_values_are_one_line_in_every_output() {
    let _host = host::shared();
    let dir = scratch("replay");
    // Standard output.
    let out = replay(&dir, &[]);
    let stdout_lines = check_replay_lines("stdout", &out.stdout);

    // File and program outputs, standard output off.
    let file = dir.join("alerts.txt");
    let piped = dir.join("piped.txt");
    let out = replay(
        &dir,
        &[
            "-o",
            "stdout_output.enabled=false",
            "-o",
            &format!(
                "file_output={{enabled: true, filename: {}}}",
                file.display()
            ),
            "-o",
            &format!(
                "program_output={{enabled: true, keep_alive: true, program: \"cat >> {}\"}}",
                piped.display()
            ),
        ],
    );
    assert!(out.stdout.is_empty());
    check_replay_lines("file_output", &fs::read(&file).expect("file output"));
    check_replay_lines("program_output", &fs::read(&piped).expect("program output"));

    // Syslog: one `syslog(3)`-format datagram per alert, its MSG the text line.
    let socket = dir.join("log.sock");
    let server = UnixDatagram::bind(&socket).expect("bind syslog socket");
    server.set_nonblocking(true).unwrap();
    replay(
        &dir,
        &[
            "-o",
            "stdout_output.enabled=false",
            "-o",
            &format!(
                "syslog_output={{enabled: true, socket: {}}}",
                socket.display()
            ),
        ],
    );
    let mut messages = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = server.recv(&mut buf) {
        messages.push(buf[..n].to_vec());
    }
    assert_eq!(messages.len(), 2, "one datagram per alert");
    for (message, line) in messages.iter().zip(&stdout_lines) {
        assert_no_raw_controls("syslog", message);
        let message = text(message);
        // `<PRI>Mmm dd hh:mm:ss vigil[PID]: MSG`
        assert!(message.starts_with("<12>"), "{message}");
        let (header, msg) = message
            .split_once("]: ")
            .unwrap_or_else(|| panic!("no tag in {message}"));
        let pid = header
            .rsplit_once(" vigil[")
            .map(|(_, pid)| pid)
            .unwrap_or_else(|| panic!("no vigil tag in {message}"));
        assert!(pid.parse::<u32>().is_ok(), "{message}");
        assert_eq!(msg, line, "{message}");
    }

    // JSON: `output` is the same escaped line; `output_fields` and append_output's extra
    // fields hold the values themselves; extra_output is escaped like the rest of the text.
    let out = replay(
        &dir,
        &[
            "-o",
            "json_output=true",
            "-o",
            r#"append_output[0]={match: {rule: Hostile exec}, extra_output: "again=%proc.env[EVIL]", extra_fields: [proc.env, {evil: "%proc.env[EVIL]"}]}"#,
        ],
    );
    let all = text(&out.stdout);
    let objects: Vec<serde_json::Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}")))
        .collect();
    assert_eq!(objects.len(), 2, "{all}");
    let evil = format!("\r\u{1b}[1A{FORGED}");
    let v = &objects[0];
    assert_eq!(
        v["output"],
        format!("{} again=\\r\\x1b[1A{FORGED}", stdout_lines[0])
    );
    assert_eq!(v["output_fields"]["proc.env[EVIL]"], evil.as_str());
    assert_eq!(v["output_fields"]["evil"], evil.as_str());
    assert_eq!(
        v["output_fields"]["proc.env"],
        format!("EVIL={evil} HOME=/root")
    );
    assert_eq!(
        v["output_fields"]["proc.exepath"],
        format!("/tmp/x\n{FORGED}\u{2029}")
    );
    let _ = fs::remove_dir_all(&dir);
}

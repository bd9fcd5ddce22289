//! Falco 0.45's matching model (falco 65273dae, engine 0.63.0) end to end: conditions match
//! the raw bytes of a path with invalid UTF-8 (`\xHH`, `glob`'s `?` one byte), `regex` sees
//! U+FFFD in their place, the text alert escapes the bytes and the JSON one carries U+FFFD —
//! in `vigil replay` (JSON-lines and binary captures, whose bytes survive conversion) and in
//! `vigil watch` on a real file whose name has invalid UTF-8 (root and eBPF; skips otherwise,
//! fails under `VIGIL_TEST_STRICT=1`), whose `-w` capture replays to the same alerts.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;
use vigil_event::codec::Capture;
use vigil_event::{table, Event, Param, Snapshot, ThreadInfo};

use crate::support::live::{skip_or_fail, Watch, LIVE};
use crate::support::{host, scratch, text, vigil};

/// The invalid and non-printable part of the file name: a lone 0xFF, a cut two-byte
/// sequence, a C0 control and a newline.
const ODD: &[u8] = b"bad\xff\xc3\x01\nname";

/// Rules matching the odd name `ODD` below `dir` in each of Falco 0.45's ways, and one that
/// must not match (the replaced form: conditions see raw bytes).
fn rules(dir: &str) -> String {
    let rule = |name: &str, condition: &str| {
        format!(
            "- rule: {name}\n  desc: d\n  condition: evt.type in (open, openat, openat2) and fd.directory = \"{dir}\" and {condition}\n  output: \"odd file opened (file=%fd.name)\"\n  priority: WARNING\n"
        )
    };
    [
        rule("Raw contains", r#"fd.name contains "\xff\xc3\x01\x0a""#),
        rule("Raw equals", r#"fd.filename = "bad\xff\xc3\x01\nname""#),
        rule("Byte glob", r#"fd.filename glob "bad????name""#),
        rule(
            "Sanitized regex",
            "fd.filename regex \"bad\u{fffd}\u{fffd}.\\nname\"",
        ),
        rule("Replaced form", "fd.filename contains \"\u{fffd}\""),
    ]
    .concat()
}

const MATCHING: [&str; 4] = ["Raw contains", "Raw equals", "Byte glob", "Sanitized regex"];

fn rule_names(alerts: &[Value]) -> BTreeSet<String> {
    alerts
        .iter()
        .filter_map(|a| a["rule"].as_str().map(str::to_owned))
        .collect()
}

/// Every alert of `vigil replay CAPTURE -r RULES --json`, every rule evaluated.
fn replay_json(capture: &Path, rules: &Path) -> Vec<Value> {
    let out = vigil(&[
        "replay",
        &capture.display().to_string(),
        "-r",
        &rules.display().to_string(),
        "--json",
        "-o",
        "rule_matching=all",
        "-o",
        "syslog_output.enabled=false",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// The JSON alerts' file names and the text alerts' lines must show the odd name sanitized
/// (JSON: U+FFFD for each invalid sequence, the control bytes as JSON escapes; text: each
/// byte escaped, one line per alert).
fn check_outputs(what: &str, alerts: &[Value], file: &[u8]) {
    let want = String::from_utf8_lossy(file);
    for a in alerts {
        assert_eq!(
            a["output_fields"]["fd.name"].as_str(),
            Some(&*want),
            "{what}: {a}"
        );
        let output = a["output"].as_str().expect("output");
        assert!(
            output.contains("bad\\xff\\xc3\\x01\\nname"),
            "{what}: the text escapes each byte: {output}"
        );
    }
}

fn open_event(path: &[u8]) -> Event {
    let etype = table::by_name("openat").expect("openat");
    let mut params = vec![Param::None; etype.spec().params.len()];
    params[0] = Param::Int(-100);
    params[1] = Param::Bytes(path.to_vec());
    params[2] = Param::Uint(0);
    Event {
        num: 1,
        ts: 1_700_000_000_000_001_000,
        tid: 100,
        pid: 100,
        etype,
        res: 3,
        params,
        truncated: 0,
        cpu: None,
    }
}

#[test]
fn replay_matches_raw_bytes_and_sanitizes_outputs() {
    let _host = host::shared();
    let dir = scratch("raw-bytes-replay");
    let file = [b"/srv/odd/".as_slice(), ODD].concat();
    let capture = Capture {
        snapshot: Snapshot {
            threads: vec![ThreadInfo {
                tid: 100,
                pid: 100,
                ppid: 1,
                comm: b"cat".to_vec(),
                exe: b"cat".to_vec(),
                exepath: b"/usr/bin/cat".to_vec(),
                cwd: b"/".to_vec(),
                ..ThreadInfo::default()
            }],
            ..Snapshot::default()
        },
        events: vec![open_event(&file)],
    };
    let jsonl = dir.join("odd.jsonl");
    capture
        .write_jsonl(fs::File::create(&jsonl).expect("create capture"))
        .expect("write capture");
    let rules_path = dir.join("rules.yaml");
    fs::write(&rules_path, rules("/srv/odd")).expect("write rules");
    let alerts = replay_json(&jsonl, &rules_path);
    assert_eq!(
        rule_names(&alerts),
        MATCHING.iter().map(|s| s.to_string()).collect(),
        "{alerts:?}"
    );
    check_outputs("replay jsonl", &alerts, &file);

    // The binary form keeps the bytes too: the same alerts.
    let binary = dir.join("odd.vcap");
    let out = vigil(&[
        "capture",
        "convert",
        "--to",
        "binary",
        &jsonl.display().to_string(),
        &binary.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(replay_json(&binary, &rules_path), alerts);

    // Text alerts: one line each, the bytes escaped.
    let out = vigil(&[
        "replay",
        &binary.display().to_string(),
        "-r",
        &rules_path.display().to_string(),
        "-o",
        "rule_matching=all",
        "-o",
        "syslog_output.enabled=false",
    ]);
    let lines = text(&out.stdout);
    assert_eq!(lines.lines().count(), MATCHING.len(), "{lines}");
    assert!(
        lines
            .lines()
            .all(|l| l.contains("file=/srv/odd/bad\\xff\\xc3\\x01\\nname)")),
        "{lines}"
    );
    let _ = fs::remove_dir_all(&dir);
}

/// Removes the scratch directory of the live test, whatever happens.
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[test]
fn watch_matches_a_real_file_named_with_invalid_utf8_and_its_capture_replays() {
    let _host = host::alone(module_path!());
    if skip_or_fail("watch_matches_a_real_file_named_with_invalid_utf8") {
        return;
    }
    let _live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = std::env::temp_dir().join(format!("vigil-raw-bytes-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch dir");
    let _cleanup = Cleanup(dir.clone());
    let file = dir.join(OsStr::from_bytes(ODD));
    fs::write(&file, b"x").expect("a file with an odd name");
    let rules_path = dir.join("rules.yaml");
    let dir_text = dir.to_str().expect("temp dir is UTF-8");
    fs::write(&rules_path, rules(dir_text)).expect("write rules");
    let capture = dir.join("watch.vcap");

    let watch = Watch::start_with_args(&[
        "-r".into(),
        rules_path.clone().into_os_string(),
        "-o".into(),
        "rule_matching=all".into(),
        "-w".into(),
        capture.clone().into_os_string(),
    ]);
    let from = watch.cursor();
    let status = Command::new("cat")
        .arg(&file)
        .stdout(Stdio::null())
        .status()
        .expect("run cat");
    assert!(status.success(), "cat the odd file");
    let seen = MATCHING
        .iter()
        .all(|rule| watch.wait_for(from, |a| a["rule"] == *rule).is_some());
    let live = watch.since(from);
    let stderr = watch.stderr();
    let exit = watch.stop();
    assert!(exit.success(), "vigil watch exit {exit}: {stderr}");
    assert!(
        seen,
        "not every rule matched the odd name: {live:?}\n{stderr}"
    );
    assert_eq!(
        rule_names(&live),
        MATCHING.iter().map(|s| s.to_string()).collect(),
        "{live:?}"
    );
    let file_bytes = file.as_os_str().as_bytes().to_vec();
    check_outputs("watch", &live, &file_bytes);

    // The capture keeps the raw bytes: its replay raises the same alerts on the same name.
    let replayed = replay_json(&capture, &rules_path);
    let key = |a: &Value| (a["rule"].clone(), a["output_fields"]["fd.name"].clone());
    let mut live_keys: Vec<_> = live.iter().map(key).collect();
    let mut replay_keys: Vec<_> = replayed.iter().map(key).collect();
    live_keys.sort_by_key(|k| k.0.to_string());
    replay_keys.sort_by_key(|k| k.0.to_string());
    assert_eq!(live_keys, replay_keys);
}

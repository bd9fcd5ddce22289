//! Falco 0.45's matching model (falco 65273dae, "improve invalid UTF-8 sequence handling",
//! engine 0.63.0) on real events, state and fields: conditions see the raw bytes of a field
//! (an invalid or non-printable sequence is matched with `\xHH`, `glob`'s `?` is one byte),
//! `regex` sees the value with each invalid sequence replaced by U+FFFD, and nothing on the
//! way from the event to the field sanitizes.
//!
//! Each test follows the libs test it names (libs 48dfd53: `userspace/libsinsp/test/
//! filterchecks/invalid_utf8.cpp`, `events_file.ut.cpp`, `parsers/parse_connect.cpp`,
//! `sinsp_utils.ut.cpp`), with events of Vigil's own schemas and inputs written here.

use vigil_engine::{load_rules, Engine, RulesText};
use vigil_event::{table, Event, FdInfo, FdType, Param, Snapshot, SockAddr, SockTuple, ThreadInfo};
use vigil_rules::LoadOptions;
use vigil_state::StateConfig;

const PID: i64 = 100;

/// The test process: `sh`, cwd `/tmp`, with no descriptors beyond what the events open.
fn snapshot() -> Snapshot {
    Snapshot {
        threads: vec![ThreadInfo {
            tid: PID,
            pid: PID,
            ppid: 1,
            comm: b"sh".to_vec(),
            exe: b"/bin/sh".to_vec(),
            exepath: b"/bin/sh".to_vec(),
            cwd: b"/tmp".to_vec(),
            fds: vec![FdInfo {
                fd: 7,
                kind: FdType::Unix,
                tuple: None,
                name: Vec::new(),
                flags: 2,
            }],
            ..ThreadInfo::default()
        }],
        ..Snapshot::default()
    }
}

/// An event of type `name` by the test process with `params` in schema order.
fn event(name: &str, res: i64, params: Vec<Param>) -> Event {
    Event {
        num: 1,
        ts: 1_700_000_000_000_000_000,
        tid: PID,
        pid: PID,
        etype: table::by_name(name).unwrap_or_else(|| panic!("no event type {name}")),
        res,
        params,
        truncated: 0,
        cpu: None,
    }
}

fn bytes(b: &[u8]) -> Param {
    Param::Bytes(b.to_vec())
}

/// Whether `condition` holds on the last of `events` (run in order through a fresh engine).
fn holds(events: &[Event], condition: &str) -> bool {
    let text = format!(
        "- rule: probe\n  desc: d\n  condition: {}\n  output: o\n  priority: INFO\n",
        yaml_quoted(condition)
    );
    let loaded = load_rules(
        &[RulesText {
            name: "probe.yaml".into(),
            text,
        }],
        &LoadOptions::default(),
    );
    let ruleset = loaded.ruleset.unwrap_or_else(|| {
        panic!(
            "`{condition}` does not load: {:?}",
            loaded
                .diagnostics
                .iter()
                .map(|d| d.brief())
                .collect::<Vec<_>>()
        )
    });
    let mut engine = Engine::new(ruleset, StateConfig::default(), "h".into());
    engine.load_snapshot(&snapshot());
    let (last, before) = events.split_last().expect("at least one event");
    for e in before {
        engine.process(e, &mut |_| {});
    }
    let mut alerted = false;
    engine.process(last, &mut |_| alerted = true);
    alerted
}

/// `text` as a YAML double-quoted scalar that reads back as `text`: backslashes and quotes
/// escaped, everything outside printable ASCII as `\uXXXX` / `\UXXXXXXXX` (so a C1 control
/// such as U+0085, a YAML line break when raw, arrives as the character).
fn yaml_quoted(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            ' '..='~' => out.push(c),
            c if u32::from(c) <= 0xffff => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

/// Checks each `(condition, expected)` on `events`, naming every mismatch.
fn check(what: &str, events: &[Event], cases: &[(&str, bool)]) {
    let wrong: Vec<String> = cases
        .iter()
        .filter(|(condition, want)| holds(events, condition) != *want)
        .map(|(condition, want)| format!("`{condition}` should be {want}"))
        .collect();
    assert!(wrong.is_empty(), "{what}:\n{}", wrong.join("\n"));
}

fn open_rdwr(path: &[u8]) -> Event {
    // O_RDWR = 2
    event("open", 3, vec![bytes(path), Param::Uint(2), Param::Uint(0)])
}

/// libs `fd_fields_invalid_utf8_match`: an open of `/p\xff/q\xff` matches `\xff` in every
/// fd and path field, byte-wise in `glob` and `in`; `regex` sees `/p\u{fffd}/q\u{fffd}`, so
/// `.` matches each invalid byte.
#[test]
fn fd_fields_invalid_utf8_match() {
    check(
        "open /p\\xff/q\\xff",
        &[open_rdwr(b"/p\xff/q\xff")],
        &[
            (r#"fd.name = "/p\xff/q\xff""#, true),
            (r#"fd.name contains "\xff""#, true),
            (r#"fd.name glob "/p?/q?""#, true),
            (r#"fd.name in ("/p\xff/q\xff")"#, true),
            (r#"fd.directory contains "\xff""#, true),
            (r#"fd.filename endswith "\xff""#, true),
            (r#"fs.path.name contains "\xff""#, true),
            (r#"evt.arg.name contains "\xff""#, true),
            (r#"fd.name contains "\xfe""#, false),
            (r#"fd.name regex "/p./q.""#, true),
            (r#"fd.name regex "/p./q""#, false),
        ],
    );
}

/// libs `proc_fields_invalid_utf8_match`: an exec of `/bin/bad\xff` named `bad\xff`.
#[test]
fn proc_fields_invalid_utf8_match() {
    let spec = table::by_name("execve").expect("execve").spec();
    let mut params = vec![Param::None; spec.params.len()];
    let mut set = |name: &str, value: Param| {
        params[spec
            .param_index(name)
            .unwrap_or_else(|| panic!("execve has no {name}"))] = value;
    };
    set("filename", bytes(b"/bin/bad\xff"));
    set("exe", bytes(b"/bin/bad\xff"));
    set("comm", bytes(b"bad\xff"));
    set("args", Param::List(Vec::new()));
    let exec = event("execve", 0, params);
    check(
        "execve /bin/bad\\xff",
        &[exec],
        &[
            (r#"proc.name contains "\xff""#, true),
            (r#"proc.name glob "bad?""#, true),
            (r#"proc.exe contains "\xff""#, true),
            (r#"proc.exe endswith "\xff""#, true),
            (r#"proc.name contains "\xfe""#, false),
        ],
    );
}

/// libs `fspath_fields_invalid_utf8_match`: a rename of `/tmp/s\xff` to `/tmp/t\xff`.
#[test]
fn fspath_fields_invalid_utf8_match() {
    let rename = event(
        "rename",
        0,
        vec![bytes(b"/tmp/s\xff"), bytes(b"/tmp/t\xff")],
    );
    check(
        "rename",
        &[rename],
        &[
            (r#"fs.path.source contains "\xff""#, true),
            (r#"fs.path.target contains "\xff""#, true),
            (r#"fs.path.source endswith "s\xff""#, true),
            (r#"fs.path.target endswith "t\xff""#, true),
        ],
    );
}

/// libs `evt_abspath_invalid_utf8_match` (there an `open_by_handle_at`, which Vigil does not
/// capture): the resolved absolute path of a relative `unlinkat` keeps the invalid byte.
#[test]
fn evt_abspath_invalid_utf8_match() {
    // unlinkat(AT_FDCWD, "a\xff", 0) in cwd /tmp.
    let unlink = event(
        "unlinkat",
        0,
        vec![Param::Int(-100), bytes(b"a\xff"), Param::Uint(0)],
    );
    check(
        "unlinkat a\\xff",
        &[unlink],
        &[
            (r#"evt.abspath contains "\xff""#, true),
            (r#"evt.abspath glob "/tmp/a?""#, true),
            (r#"evt.abspath = "/tmp/a\xff""#, true),
        ],
    );
}

/// libs `proc_cwd_invalid_utf8_match`: after `chdir("/tmp/c\xff")` the working directory
/// keeps the byte (`proc.cwd` ends in `/`, as in Falco).
#[test]
fn proc_cwd_invalid_utf8_match() {
    let chdir = event("chdir", 0, vec![bytes(b"/tmp/c\xff")]);
    let after = open_rdwr(b"x");
    check(
        "chdir /tmp/c\\xff",
        &[chdir, after],
        &[
            (r#"proc.cwd contains "\xff""#, true),
            (r#"proc.cwd glob "/tmp/c?/""#, true),
            // And a relative path opened there resolves through it (libs
            // `concatenate_paths`: invalid bytes are left as they are).
            (r#"fd.name = "/tmp/c\xff/x""#, true),
        ],
    );
}

/// libs `events_file.ut.cpp` `file_open_invalid_utf8`: the path reaches `fd.name` and
/// `evt.arg.name` as it is; and `sinsp_utils.ut.cpp` `concatenate_paths` ("invalid arbitrary
/// byte sequences are left as is"): a relative path with invalid and control bytes resolves
/// with those bytes kept.
#[test]
fn file_open_invalid_utf8() {
    check(
        "open /tmp/bad\\xff",
        &[open_rdwr(b"/tmp/bad\xff")],
        &[
            (r#"fd.name = "/tmp/bad\xff""#, true),
            (r#"evt.arg.name = "/tmp/bad\xff""#, true),
            // The replaced form is not what conditions see.
            ("fd.name = \"/tmp/bad\u{fffd}\"", false),
            ("evt.arg.name = \"/tmp/bad\u{fffd}\"", false),
        ],
    );
    check(
        "open ../\\xff\\xfe/\\xc2\\x85/\\x01\\x1f/test from /tmp",
        &[open_rdwr(b"../\xff\xfe/\xc2\x85/\x01\x1f/test")],
        &[(r#"fd.name = "/\xff\xfe/\xc2\x85/\x01\x1f/test""#, true)],
    );
}

/// libs `parse_connect.cpp` `CONNECT_unix_socket_invalid_utf8`: a unix socket connected to
/// `/tmp/s\xff.sock` has the path, bytes kept, in its name.
#[test]
fn connect_unix_socket_invalid_utf8() {
    let path = b"/tmp/s\xff.sock".to_vec();
    let connect = event(
        "connect",
        0,
        vec![
            Param::Int(7),
            Param::Addr(SockAddr::Unix { path: path.clone() }),
            Param::Tuple(SockTuple::Unix { path }),
        ],
    );
    check(
        "connect unix /tmp/s\\xff.sock",
        &[connect],
        &[
            (r#"fd.name contains "/tmp/s\xff.sock""#, true),
            (r#"evt.arg.addr contains "/tmp/s\xff.sock""#, true),
            (r#"evt.arg.tuple contains "/tmp/s\xff.sock""#, true),
        ],
    );
}

/// libs `sinsp_utils.ut.cpp` `utf8_sanitize` through `regex` (libs 9edf42d: the regex
/// operator's input is sanitized): valid UTF-8, controls, C1 and non-characters are kept;
/// each maximal invalid subpart becomes one U+FFFD (`\xe1\x80` is one, the surrogate
/// `\xed\xa0\x80` and the overlong `\xe0\x9f\xbf` three each).
#[test]
fn regex_sees_invalid_sequences_replaced() {
    let cases: &[(&[u8], &str)] = &[
        (
            b"/tmp/hello \xf0\x9f\x98\x80 world",
            "/tmp/hello \u{1f600} world",
        ),
        (b"/tmp/foo\x01\x1fxyz", "/tmp/foo\\x01\\x1fxyz"),
        (b"/tmp/foo\x7fxyz", "/tmp/foo\\x7fxyz"),
        (b"/tmp/foo\xc2\x85xyz", "/tmp/foo\u{85}xyz"),
        (b"/tmp/foo\xff\xfexyz", "/tmp/foo\u{fffd}\u{fffd}xyz"),
        (b"/tmp/\xc3\xa9\xff", "/tmp/\u{e9}\u{fffd}"),
        (b"/tmp/\xef\xb7\x90", "/tmp/\u{fdd0}"),
        (b"/tmp/\xe1\x80x", "/tmp/\u{fffd}x"),
        (b"/tmp/hello\xe1\x80", "/tmp/hello\u{fffd}"),
        (b"/tmp/\xed\xa0\x80", "/tmp/\u{fffd}\u{fffd}\u{fffd}"),
        (b"/tmp/\xe0\x9f\xbf", "/tmp/\u{fffd}\u{fffd}\u{fffd}"),
    ];
    for (path, sanitized) in cases {
        // The regex is the sanitized value itself: a full match only if the replacement
        // gave exactly that text.
        let pattern = regex_escape(sanitized);
        check(
            &format!("open {}", path.escape_ascii()),
            &[open_rdwr(path)],
            &[(&format!("fd.name regex \"{pattern}\""), true)],
        );
    }
}

/// `text` as a regex matching itself (the condition string is read by the condition lexer
/// first, so the backslashes of `\x01` in `text` stay as the regex escapes they are).
fn regex_escape(text: &str) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if ".+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

//! The checker itself, without root or drivers: hand-made JSON-lines captures, read with the
//! capture codec as the drivers' captures are, must pass when right and report every wrong
//! value when not.

use std::path::PathBuf;

use vigil_conformance::cases::case;
use vigil_conformance::check::{table, Context};
use vigil_conformance::driver::{evaluate, CaseRun};
use vigil_event::codec::Capture;

fn ctx(pid: i64) -> Context {
    Context {
        dir: PathBuf::from("/tmp/vc/openat"),
        port: 40000,
        pid,
        uid: 1000,
        gid: 1000,
        root: false,
        traced: false,
    }
}

fn run(name: &str, ctx: Context, capture: &str) -> CaseRun {
    let capture = Capture::read(capture.as_bytes()).expect("hand-made capture reads");
    CaseRun {
        case: case(name).expect("case exists"),
        ctx,
        exit: Ok(0),
        stderr: String::new(),
        events: capture.events,
    }
}

const HEADER: &str = "{\"vigil_capture\": 1}\n";

#[test]
fn a_correct_capture_passes() {
    let capture = format!(
        "{HEADER}\
         {{\"tid\": 50, \"type\": \"openat\", \"res\": 3, \"args\": {{\"dirfd\": \"AT_FDCWD\", \"name\": \"/tmp/vc/openat\", \"flags\": \"O_RDONLY|O_DIRECTORY\"}}}}\n\
         {{\"tid\": 50, \"type\": \"openat\", \"res\": 4, \"args\": {{\"dirfd\": 3, \"name\": \"openat.txt\", \"flags\": \"O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC\", \"mode\": \"S_IRUSR|S_IWUSR\"}}}}\n\
         {{\"tid\": 50, \"type\": \"procexit\", \"args\": {{\"status\": 0, \"ret\": 0}}}}\n"
    );
    let m = evaluate(&[run("openat", ctx(50), &capture)]);
    assert!(m.is_empty(), "{}", table("hand-made", &m));
}

#[test]
fn wrong_values_missing_events_and_exit_codes_are_all_reported() {
    // openat: wrong flags (no O_EXCL) and mode; kill: absent; connect: tuple reversed.
    let openat = format!(
        "{HEADER}\
         {{\"tid\": 50, \"type\": \"openat\", \"res\": 4, \"args\": {{\"dirfd\": 3, \"name\": \"openat.txt\", \"flags\": \"O_RDWR|O_CREAT|O_CLOEXEC\", \"mode\": 420}}}}\n"
    );
    let kill = format!(
        "{HEADER}{{\"tid\": 51, \"type\": \"getpid\", \"res\": 51}}\n{{\"tid\": 99, \"type\": \"kill\", \"args\": {{\"pid\": 99, \"sig\": 0}}}}\n"
    );
    let connect = format!(
        "{HEADER}\
         {{\"tid\": 52, \"type\": \"connect\", \"args\": {{\"fd\": 4, \"addr\": \"127.0.0.1:40000\", \"tuple\": \"tcp:127.0.0.1:40000->127.0.0.1:40001\"}}}}\n"
    );
    let mut kill_run = run("kill", ctx(51), &kill);
    kill_run.exit = Ok(100);
    kill_run.stderr = "vigil-trigger kill: setup failed".to_string();
    let runs = [
        run("openat", ctx(50), &openat),
        kill_run,
        run("connect", ctx(52), &connect),
    ];
    let m = evaluate(&runs);
    let got: Vec<(&str, &str, &str)> = m
        .iter()
        .map(|m| (m.case.as_str(), m.event.as_str(), m.param.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("openat", "openat", "flags"),
            ("openat", "openat", "mode"),
            ("kill", "exit", "-"),
            ("kill", "kill", "-"),
            ("connect", "connect", "tuple"),
        ],
        "{}",
        table("hand-made", &m)
    );
    let text = table("hand-made", &m);
    assert!(text.contains("5 mismatches in 3 cases"), "{text}");
    assert!(text.contains("only: getpid"), "{text}");
    assert!(
        text.contains("tcp:127.0.0.1:40001->127.0.0.1:40000"),
        "the expected tuple is shown: {text}"
    );
    assert!(text.contains("setup failed"), "{text}");
}

#[test]
fn errno_and_truncation_cases() {
    let long = vigil_conformance::cases::long_path(b"/tmp/vc/openat");
    let prefix = String::from_utf8(long[..4095].to_vec()).unwrap();
    let flagged = format!(
        "{HEADER}{{\"tid\": 60, \"type\": \"openat\", \"res\": \"ENAMETOOLONG\", \"args\": {{\"dirfd\": \"AT_FDCWD\", \"name\": \"{prefix}\", \"flags\": 0}}, \"truncated\": [\"name\"]}}\n"
    );
    assert!(evaluate(&[run("long-path", ctx(60), &flagged)]).is_empty());
    let silent = flagged.replace(", \"truncated\": [\"name\"]", "");
    let m = evaluate(&[run("long-path", ctx(60), &silent)]);
    assert_eq!(m.len(), 1, "{}", table("hand-made", &m));
    assert_eq!(m[0].param, "name");
    let wrong_errno = flagged.replace("ENAMETOOLONG", "ENOENT");
    let m = evaluate(&[run("long-path", ctx(60), &wrong_errno)]);
    assert_eq!(m.len(), 1, "{}", table("hand-made", &m));
    assert!(m[0].expected.contains("ENAMETOOLONG"), "{m:?}");
}

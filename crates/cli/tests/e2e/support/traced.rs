//! Helpers of the `vigil run` tests: the binary, strict skipping, whether ptrace works here,
//! root, scratch directories.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// `vigil` with stdin closed.
pub fn vigil_cmd() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vigil"));
    c.stdin(Stdio::null());
    c
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub fn strict() -> bool {
    std::env::var("VIGIL_TEST_STRICT").is_ok_and(|v| v == "1")
}

/// Prints why `test` skips; under `VIGIL_TEST_STRICT=1` fails instead.
pub fn skip(test: &str, why: &str) {
    assert!(!strict(), "{test}: {why}");
    eprintln!("skipping {test}: {why}");
}

/// Whether `vigil run` can trace here (skips `test` with the reason otherwise).
pub fn can_trace(test: &str) -> bool {
    let out = vigil_cmd()
        .args(["run", "--", "true"])
        .output()
        .expect("run vigil run");
    if out.status.success() {
        return true;
    }
    skip(
        test,
        &format!("vigil run cannot trace: {}", text(&out.stderr)),
    );
    false
}

pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|v| v.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

/// A new, empty directory named after `suite`, this process and `test`.
pub fn scratch(suite: &str, test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vigil-{suite}-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

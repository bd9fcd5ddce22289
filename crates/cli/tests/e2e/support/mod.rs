//! What the end-to-end tests share: the `vigil` under test, skipping with a reason (a failure
//! under `VIGIL_TEST_STRICT=1`), root and ptrace checks, scratch directories, the workspace and
//! Falco's rules, and [`host`], the lock that keeps host-wide tests apart.

pub mod fleet;
pub mod host;
pub mod live;
pub mod receiver;
pub mod receivers;
pub mod rootfs;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

pub use vigil_test_support::scratch;

/// The `vigil` of this build.
pub const VIGIL: &str = env!("CARGO_BIN_EXE_vigil");

/// `vigil` with stdin closed.
pub fn vigil_cmd() -> Command {
    let mut c = Command::new(VIGIL);
    c.stdin(Stdio::null());
    c
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Whether an unmet requirement fails instead of skipping (CI sets `VIGIL_TEST_STRICT=1`).
pub fn strict() -> bool {
    std::env::var("VIGIL_TEST_STRICT").is_ok_and(|v| v == "1")
}

/// Prints why `test` skips; under `VIGIL_TEST_STRICT=1` fails instead.
pub fn skip(test: &str, why: &str) {
    assert!(!strict(), "{test}: VIGIL_TEST_STRICT=1 but {why}");
    eprintln!("skipping {test}: {why}");
}

/// Whether this process runs as root (effective uid 0, from procfs: no libc needed).
pub fn is_root() -> bool {
    fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .map(|v| v.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
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

/// The repository's root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Falco's stable rules, beside the repository (read by path, never copied).
pub fn falco_rules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/falco-rules/falco_rules.yaml")
}

/// `vigil ARGS…` run to its end, stdin closed.
pub fn vigil(args: &[&str]) -> Output {
    vigil_cmd().args(args).output().expect("run vigil")
}

/// Runs `cmd` (stdin closed) and asserts that it succeeded, naming it and its output if not.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// A loopback port nobody listens on (the kernel's choice of an ephemeral one).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

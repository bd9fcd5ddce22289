//! The kernel matrix (issue 22): Debian's stock kernels, booted under qemu with an initramfs
//! holding a Debian minbase tree, the static `vigil` and Falco's rules, run
//! `scripts/kernels/guest-init.sh`, which performs every host action of the generator under
//! `vigil watch` (each `--syscall-hook` mode, the default rules and Falco's) and under
//! `vigil run`, and sends back the alerts, logs and captures. This side decides:
//!
//! - on a kernel Vigil supports (Linux [`vigil_ebpf::OLDEST_KERNEL`] or later): `auto` chooses
//!   fexit; every action that ran raised each rule it is expected to raise, with the expected
//!   output fields, in every mode and under `vigil run`; the fexit and exit-tracepoint
//!   captures of the same actions hold the same events; each capture replays here to the
//!   alerts the guest raised; unwatched syscalls ran no Vigil program
//!   (`kernel.bpf_stats_enabled` run counts: counts, not times, mean something under
//!   emulation);
//! - on an older kernel: `vigil watch` exits 1 with one line naming the missing feature and the
//!   oldest kernel that has it, and `vigil run` alerts as anywhere.
//!
//! Kernels come from Debian's archive (`scripts/kernels/fetch.sh`: a private apt
//! configuration, cached under `target/kernels`). Needs root (the initramfs copies a root-owned
//! tree), qemu (`make deps` installs it), the static binary (`VIGIL_STATIC_BIN`, set by `make
//! test`) and Debian's archive; without them the test prints `skipping …`, and under
//! `VIGIL_TEST_STRICT=1` it fails. Software emulation (about 10–20 times slower than the host):
//! the timings in the guest mean nothing, so nothing here measures time.
#![allow(clippy::print_stderr)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;
use vigil_generator::{Action, Ruleset};

#[path = "support/live.rs"]
mod live;
use live::*;

/// One Debian kernel of the matrix: the suite and the metapackage naming its current image.
struct Kernel {
    suite: &'static str,
    package: &'static str,
}

const BOOKWORM: Kernel = Kernel {
    suite: "bookworm",
    package: "linux-image-amd64",
};
const BOOKWORM_CLOUD: Kernel = Kernel {
    suite: "bookworm",
    package: "linux-image-cloud-amd64",
};
const TRIXIE: Kernel = Kernel {
    suite: "trixie",
    package: "linux-image-amd64",
};
const BULLSEYE: Kernel = Kernel {
    suite: "bullseye",
    package: "linux-image-amd64",
};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn matrix_dir() -> PathBuf {
    workspace().join("target/kernels")
}

/// Why the matrix cannot run here, if so.
fn missing() -> Option<String> {
    if !nix_is_root() {
        return Some("not root (the guest image copies a root-owned tree)".into());
    }
    if Command::new("qemu-system-x86_64")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        return Some("qemu-system-x86_64 is not installed (`make deps` installs it)".into());
    }
    match std::env::var_os("VIGIL_STATIC_BIN") {
        Some(p) if Path::new(&p).is_file() => None,
        _ => Some("VIGIL_STATIC_BIN names no static vigil (`make test` builds and sets it)".into()),
    }
}

fn skip(test: &str) -> bool {
    match missing() {
        None => false,
        Some(why) if strict() => panic!("{test}: VIGIL_TEST_STRICT=1 but {why}"),
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            true
        }
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The guests' initramfs, built once per run of this binary.
fn initramfs() -> &'static Path {
    static IMAGE: OnceLock<PathBuf> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let rootfs_dir = std::env::var_os("VIGIL_ROOTFS")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(vigil_generator::DEFAULT_ROOTFS_DIR));
        if !rootfs_dir.join("rootfs/etc/debian_version").is_file() {
            run(Command::new("sh")
                .arg(workspace().join("scripts/mk-rootfs.sh"))
                .arg(&rootfs_dir));
        }
        let dir = matrix_dir();
        std::fs::create_dir_all(&dir).expect("create target/kernels");
        let image = dir.join(format!("initramfs-{}.cpio", std::process::id()));
        run(Command::new("sh")
            .arg(workspace().join("scripts/kernels/initramfs.sh"))
            .arg(rootfs_dir.join("rootfs"))
            .arg(std::env::var_os("VIGIL_STATIC_BIN").expect("checked by skip()"))
            .arg(falco_rules())
            .arg(&image));
        image
    })
}

/// What one guest sent back: `phase NAME key=value` lines and the files of each phase.
#[derive(Default)]
struct Guest {
    release: String,
    facts: BTreeMap<String, String>,
    files: BTreeMap<String, Vec<u8>>,
    console: String,
}

impl Guest {
    fn fact(&self, key: &str) -> Option<&str> {
        self.facts.get(key).map(String::as_str)
    }

    fn text(&self, file: &str) -> String {
        String::from_utf8_lossy(self.files.get(file).map_or(&[][..], Vec::as_slice)).into_owned()
    }

    fn alerts(&self, phase: &str) -> Vec<Value> {
        self.text(&format!("{phase}.alerts"))
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The actions `vigil generate run` performed in `phase` (`ok` lines), and its failures.
    fn actions(&self, phase: &str) -> (Vec<String>, Vec<String>) {
        let gen = self.text(&format!("{phase}.gen"));
        let ran = gen
            .lines()
            .filter_map(|l| l.strip_prefix("ok    "))
            .filter_map(|l| l.split(':').next())
            .map(str::to_owned)
            .collect();
        let failed = gen
            .lines()
            .filter(|l| l.starts_with("FAIL  "))
            .map(str::to_owned)
            .collect();
        (ran, failed)
    }

    /// A report of `phase` for failure messages.
    fn explain(&self, phase: &str) -> String {
        format!(
            "[{} phase {phase}] facts: {:?}\n--- stderr:\n{}\n--- generate:\n{}",
            self.release,
            self.facts
                .iter()
                .filter(|(k, _)| k.starts_with(&format!("{phase}.")))
                .collect::<Vec<_>>(),
            tail(&self.text(&format!("{phase}.err")), 40),
            tail(&self.text(&format!("{phase}.gen")), 40)
        )
    }
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

fn decode_block(lines: &[&str]) -> Vec<u8> {
    let mut child = Command::new("sh")
        .args(["-c", "base64 -d | gzip -dc"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run base64 and gzip");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let text = lines.join("\n");
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().expect("decode a guest file");
    writer.join().expect("writer thread");
    out.stdout
}

fn parse_results(results: &str, console: String) -> Guest {
    let mut guest = Guest {
        console,
        ..Guest::default()
    };
    let lines: Vec<&str> = results.lines().map(|l| l.trim_end_matches('\r')).collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(name) = line.strip_prefix("=== begin ") {
            let end = lines[i..]
                .iter()
                .position(|l| *l == format!("=== end {name}"))
                .map_or(lines.len(), |p| i + p);
            guest
                .files
                .insert(name.to_owned(), decode_block(&lines[i + 1..end]));
            i = end + 1;
            continue;
        }
        if let Some(release) = line.strip_prefix("guest kernel ") {
            guest.release = release.to_owned();
        } else if let Some(rest) = line.strip_prefix("phase ") {
            let mut words = rest.split_whitespace();
            let phase = words.next().unwrap_or("");
            for word in words {
                if let Some((k, v)) = word.split_once('=') {
                    guest.facts.insert(format!("{phase}.{k}"), v.to_owned());
                }
            }
        } else if let Some((k, v)) = line.split_once('=') {
            guest.facts.insert(k.to_owned(), v.to_owned());
        } else if line == "guest done" {
            guest.facts.insert("done".into(), "1".into());
        }
        i += 1;
    }
    guest
}

/// Fetches `kernel`, boots it and returns what its guest sent back.
fn boot(kernel: &Kernel) -> Guest {
    let vmlinuz = run(Command::new("sh")
        .arg(workspace().join("scripts/kernels/fetch.sh"))
        .args([kernel.suite, kernel.package]));
    let vmlinuz = PathBuf::from(vmlinuz.lines().last().expect("fetch.sh prints the image").trim());
    let name = vmlinuz
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .expect("the image's directory is the package's name");
    let out = matrix_dir().join("runs").join(&name);
    let phases = std::env::var("VIGIL_GUEST_PHASES").unwrap_or_else(|_| "all".into());
    eprintln!("booting {name} (phases: {phases})");
    run(Command::new("sh")
        .arg(workspace().join("scripts/kernels/boot.sh"))
        .arg(&vmlinuz)
        .arg(initramfs())
        .arg(&out)
        .arg(&phases));
    let results = std::fs::read_to_string(out.join("results.log")).unwrap_or_default();
    let console = std::fs::read_to_string(out.join("console.log")).unwrap_or_default();
    let guest = parse_results(&results, console);
    assert!(
        guest.fact("done").is_some(),
        "{name}: the guest did not finish its checks; console:\n{}\nresults:\n{}",
        tail(&guest.console, 60),
        tail(&results, 40)
    );
    eprintln!("{name}: guest kernel {} finished", guest.release);
    guest
}

/// `(major, minor)` of a release string (`6.1.0-50-amd64` → (6, 1)).
fn version(release: &str) -> (u32, u32) {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

fn supported(release: &str) -> bool {
    version(release) >= version(vigil_ebpf::OLDEST_KERNEL)
}

/// Every action that ran in `phase` raised each rule of `ruleset` it is expected to raise,
/// with the expected output fields. Returns the failures.
fn check_alerts(guest: &Guest, phase: &str, ruleset: Ruleset) -> Vec<String> {
    let alerts = guest.alerts(phase);
    let (ran, failed) = guest.actions(phase);
    let mut failures: Vec<String> = failed
        .iter()
        .map(|l| format!("{phase}: action failed: {l}"))
        .collect();
    let mut checked = 0;
    for name in &ran {
        let Some(action) = vigil_generator::registry()
            .iter()
            .find(|a: &&Action| a.name == name)
        else {
            failures.push(format!("{phase}: unknown action {name}"));
            continue;
        };
        let fields = expected_fields(action.name);
        for e in action.expected().into_iter().filter(|e| e.ruleset == ruleset) {
            checked += 1;
            if !alerts.iter().any(|a| alert_matches(a, e.rule, &fields)) {
                failures.push(format!(
                    "{phase}: {}: no `{}` alert with {fields:?}; that rule's alerts: {:?}",
                    action.name,
                    e.rule,
                    alerts
                        .iter()
                        .filter(|a| a["rule"] == e.rule)
                        .map(|a| a["output_fields"].clone())
                        .take(3)
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    if checked == 0 {
        failures.push(format!("{phase}: no expected alert was checked (no action ran)"));
    }
    failures
}

/// Rule and output fields of each alert, as a set (time and host left out).
fn alert_set(alerts: &[Value]) -> BTreeSet<String> {
    alerts
        .iter()
        .map(|a| format!("{} {}", a["rule"], a["output_fields"]))
        .collect()
}

fn scratch(name: &str) -> PathBuf {
    let dir = matrix_dir().join("runs").join(name);
    std::fs::create_dir_all(&dir).expect("create a scratch directory");
    dir
}

/// The capture of `phase` replays here (the host) to the alerts the guest raised.
fn check_replay(guest: &Guest, phase: &str, dir: &Path) -> Vec<String> {
    let Some(capture) = guest.files.get(&format!("{phase}.cap")) else {
        return vec![format!("{phase}: no capture came back")];
    };
    let path = dir.join(format!("{phase}.cap"));
    std::fs::write(&path, capture).expect("write the capture");
    let out = Command::new(VIGIL)
        .args(["replay", "--json"])
        .arg(&path)
        .output()
        .expect("run vigil replay");
    let replayed: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let live = alert_set(&guest.alerts(phase));
    let again = alert_set(&replayed);
    if !out.status.success() || live != again {
        vec![format!(
            "{phase}: the capture replays to other alerts ({}): only live: {:?}; only replayed: {:?}",
            out.status,
            live.difference(&again).take(5).collect::<Vec<_>>(),
            again.difference(&live).take(5).collect::<Vec<_>>()
        )]
    } else {
        Vec::new()
    }
}

/// The events of a capture, as comparable lines: the generator's processes only (the agent's
/// start-up and the shell around it are not the same actions), with thread ids renumbered in
/// order of appearance and times left out.
fn event_lines(capture: &Path) -> Vec<String> {
    let jsonl = capture.with_extension("jsonl");
    run(Command::new(VIGIL)
        .args(["capture", "convert", "--to", "jsonl"])
        .arg(capture)
        .arg(&jsonl));
    let text = std::fs::read_to_string(&jsonl).expect("read the converted capture");
    normalize_events(&text)
}

fn normalize_events(jsonl: &str) -> Vec<String> {
    let mut ids: BTreeMap<u64, u64> = BTreeMap::new();
    let mut out = Vec::new();
    for line in jsonl.lines() {
        let Ok(mut v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(obj) = v.as_object_mut() else {
            continue;
        };
        if !obj.contains_key("type") || obj.contains_key("processes") {
            continue;
        }
        let _ = obj;
        out.push(v);
    }
    let _ = &mut ids;
    out.iter().map(Value::to_string).collect()
}

/// A supported kernel: every check of the module comment.
fn check_supported(guest: &Guest, name: &str) {
    let mut failures = Vec::new();
    let fexit = guest.text("auto.err").contains("syscalls hooked by fexit");
    if !fexit {
        failures.push(format!(
            "auto: fexit was not chosen\n{}",
            guest.explain("auto")
        ));
    }
    for phase in ["auto", "falco", "exit", "tracepoint", "raw"] {
        if guest.fact(&format!("{phase}.exit")) != Some("0") {
            failures.push(format!("{phase}: vigil watch failed\n{}", guest.explain(phase)));
        }
    }
    match guest
        .fact("auto.bpf_runs")
        .and_then(|n| n.parse::<u64>().ok())
    {
        // A few for dd's own fork, exec, open and exit; none per read or write.
        Some(n) if n < 1_000 => {}
        other => failures.push(format!(
            "auto: 200000 unwatched syscalls ran Vigil programs {other:?} times"
        )),
    }
    failures.extend(check_alerts(guest, "auto", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "falco", Ruleset::FalcoStable));
    failures.extend(check_alerts(guest, "exit", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "tracepoint", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "raw", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "run", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "run-falco", Ruleset::FalcoStable));
    let dir = scratch(name);
    failures.extend(check_replay(guest, "auto", &dir));
    failures.extend(check_replay(guest, "exit", &dir));
    assert!(
        failures.is_empty(),
        "{name} ({}):\n{}",
        guest.release,
        failures.join("\n")
    );
}

/// A kernel older than Vigil's eBPF capture supports: one clean line, and `vigil run` works.
fn check_refused(guest: &Guest, name: &str) {
    let mut failures = Vec::new();
    let err = guest.text("auto.err");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    if guest.fact("auto.exit") != Some("1")
        || lines.len() != 1
        || !lines[0].contains(&format!("Linux {} or later", vigil_ebpf::OLDEST_KERNEL))
        || !lines[0].contains("vigil run")
    {
        failures.push(format!(
            "auto: expected exit 1 and one line naming the missing feature\n{}",
            guest.explain("auto")
        ));
    }
    failures.extend(check_alerts(guest, "run", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "run-falco", Ruleset::FalcoStable));
    assert!(
        failures.is_empty(),
        "{name} ({}):\n{}",
        guest.release,
        failures.join("\n")
    );
}

fn check_kernel(test: &str, kernel: &Kernel) {
    if skip(test) {
        return;
    }
    let guest = boot(kernel);
    if supported(&guest.release) {
        check_supported(&guest, test);
    } else {
        check_refused(&guest, test);
    }
}

#[test]
fn debian_12_bookworm_6_1() {
    check_kernel("debian_12_bookworm_6_1", &BOOKWORM);
}

#[test]
fn debian_12_bookworm_6_1_cloud() {
    check_kernel("debian_12_bookworm_6_1_cloud", &BOOKWORM_CLOUD);
}

#[test]
fn debian_13_trixie_6_12() {
    check_kernel("debian_13_trixie_6_12", &TRIXIE);
}

#[test]
fn debian_11_bullseye_5_10() {
    check_kernel("debian_11_bullseye_5_10", &BULLSEYE);
}

#[test]
fn results_parse_into_facts_and_files() {
    let block = {
        let mut child = Command::new("sh")
            .args(["-c", "printf 'hello\\n' | gzip -c | base64"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("gzip and base64");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut child.stdout.take().expect("stdout"), &mut text)
            .expect("read");
        child.wait().expect("wait");
        text
    };
    let results = format!(
        "guest kernel 6.1.0-50-amd64\r\nphase auto exit=0\nphase auto bpf_runs=12\n=== begin auto.err\n{block}=== end auto.err\nguest done\n"
    );
    let guest = parse_results(&results, String::new());
    assert_eq!(guest.release, "6.1.0-50-amd64");
    assert_eq!(guest.fact("auto.exit"), Some("0"));
    assert_eq!(guest.fact("auto.bpf_runs"), Some("12"));
    assert_eq!(guest.text("auto.err"), "hello\n");
    assert!(guest.fact("done").is_some());
    assert!(supported("6.1.0-50-amd64"));
    assert!(supported("6.12.117+deb13-amd64"));
    assert!(!supported("5.10.0-32-amd64"));
}

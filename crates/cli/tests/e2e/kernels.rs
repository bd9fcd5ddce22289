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
//!   alerts the guest raised; unwatched syscalls ran no Vigil program under the exit
//!   tracepoints (`kernel.bpf_stats_enabled` run counts, with a control: 1000 watched opens
//!   must raise the count by 1000; counts, not times, mean something under emulation); the
//!   kernel took the wakeup timer, and who woke the reader fits the hook (`--stats`' `wakeups`:
//!   a tracing hook's watched records leave it to the timer, the exit tracepoints' wake it at
//!   once); the generator ran every action of its selection and exited 0;
//! - on an older kernel: `vigil watch` exits 1 with one line naming the missing feature and the
//!   oldest kernel that has it, and `vigil run` alerts as anywhere.
//!
//! amd64 and arm64 guests (`qemu-system-aarch64 -M virt -cpu max`, the static aarch64 `vigil`
//! of `$VIGIL_STATIC_BIN_AARCH64`, a foreign arm64 minbase tree): the same checks, where an
//! arm64 kernel without trampolines (6.1) must choose the exit tracepoints; the arm64 guests'
//! captures replay here (x86-64), and a capture written here by `vigil run -w` replays in them
//! to the alerts it raises here.
//!
//! Kernels come from Debian's archive (`scripts/kernels/fetch.sh`: a private apt
//! configuration, cached under `target/kernels`). Needs root (the initramfs copies a root-owned
//! tree), qemu (`make deps` installs it), the static binary (`VIGIL_STATIC_BIN`, set by `make
//! test`) and Debian's archive; without them the test prints `skipping …`, and under
//! `VIGIL_TEST_STRICT=1` it fails. Software emulation (about 10–20 times slower than the host):
//! the timings in the guest mean nothing, so nothing here measures time.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use serde_json::Value;
use vigil_generator::{Action, Ruleset};

use crate::support::live::*;
use crate::support::{falco_rules, host, is_root, run_ok, strict, text, workspace, VIGIL};

/// A guest architecture: Debian's name, the static binary's environment variable, qemu.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Arch {
    Amd64,
    Arm64,
}

impl Arch {
    fn debian(self) -> &'static str {
        match self {
            Arch::Amd64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }

    /// The variable naming the static `vigil` of this architecture (`make test` sets both).
    fn static_bin_var(self) -> &'static str {
        match self {
            Arch::Amd64 => "VIGIL_STATIC_BIN",
            Arch::Arm64 => "VIGIL_STATIC_BIN_AARCH64",
        }
    }

    fn qemu(self) -> &'static str {
        match self {
            Arch::Amd64 => "qemu-system-x86_64",
            Arch::Arm64 => "qemu-system-aarch64",
        }
    }
}

/// One Debian kernel of the matrix: the suite and the metapackage naming its current image,
/// its architecture, and whether its BPF trampolines load (`auto` must choose fexit): arm64
/// trampolines need ftrace direct calls (`DYNAMIC_FTRACE_WITH_DIRECT_CALLS`, Linux 6.4), so
/// Debian's arm64 6.1 runs the exit tracepoints.
struct Kernel {
    suite: &'static str,
    package: &'static str,
    arch: Arch,
    trampolines: bool,
}

const BOOKWORM: Kernel = Kernel {
    suite: "bookworm",
    package: "linux-image-amd64",
    arch: Arch::Amd64,
    trampolines: true,
};
const BOOKWORM_CLOUD: Kernel = Kernel {
    suite: "bookworm",
    package: "linux-image-cloud-amd64",
    arch: Arch::Amd64,
    trampolines: true,
};
const TRIXIE: Kernel = Kernel {
    suite: "trixie",
    package: "linux-image-amd64",
    arch: Arch::Amd64,
    trampolines: true,
};
const BULLSEYE: Kernel = Kernel {
    suite: "bullseye",
    package: "linux-image-amd64",
    arch: Arch::Amd64,
    trampolines: true,
};
const BOOKWORM_ARM64: Kernel = Kernel {
    suite: "bookworm",
    package: "linux-image-arm64",
    arch: Arch::Arm64,
    trampolines: false,
};
const TRIXIE_ARM64: Kernel = Kernel {
    suite: "trixie",
    package: "linux-image-arm64",
    arch: Arch::Arm64,
    trampolines: true,
};

fn matrix_dir() -> PathBuf {
    workspace().join("target/kernels")
}

/// Why the matrix cannot run here for `arch`, if so.
fn missing(arch: Arch) -> Option<String> {
    if !is_root() {
        return Some("not root (the guest image copies a root-owned tree)".into());
    }
    let qemu = arch.qemu();
    if Command::new(qemu)
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .map_or(true, |s| !s.success())
    {
        return Some(format!(
            "{qemu} is not installed (`make test-deps` installs it)"
        ));
    }
    let var = arch.static_bin_var();
    match std::env::var_os(var) {
        Some(p) if Path::new(&p).is_file() => None,
        _ => Some(format!(
            "{var} names no static vigil (`make test` builds and sets it)"
        )),
    }
}

fn skip(test: &str, arch: Arch) -> bool {
    match missing(arch) {
        None => false,
        Some(why) if strict() => panic!("{test}: VIGIL_TEST_STRICT=1 but {why}"),
        Some(why) => {
            eprintln!("skipping {test}: {why}");
            true
        }
    }
}

fn run(cmd: &mut Command) -> String {
    text(&run_ok(cmd).stdout)
}

/// The guests' initramfs of `arch`, built once per run of this binary. The arm64 tree is a
/// foreign one of its own (`ARCH=arm64 scripts/mk-rootfs.sh`, with busybox-static), never the
/// amd64 tree the container tests share.
fn initramfs(arch: Arch) -> &'static Path {
    static AMD64: OnceLock<PathBuf> = OnceLock::new();
    static ARM64: OnceLock<PathBuf> = OnceLock::new();
    let cell = match arch {
        Arch::Amd64 => &AMD64,
        Arch::Arm64 => &ARM64,
    };
    cell.get_or_init(|| {
        let (rootfs_dir, image) = match arch {
            Arch::Amd64 => (
                std::env::var_os("VIGIL_ROOTFS")
                    .map(PathBuf::from)
                    .unwrap_or_else(|| PathBuf::from(vigil_generator::DEFAULT_ROOTFS_DIR)),
                "initramfs.cpio",
            ),
            Arch::Arm64 => (
                std::env::var_os("VIGIL_ROOTFS_ARM64").map_or_else(
                    || PathBuf::from("/var/tmp/vigil-rootfs-arm64"),
                    PathBuf::from,
                ),
                "initramfs-arm64.cpio",
            ),
        };
        if !rootfs_dir.join("rootfs/etc/debian_version").is_file() {
            let mut cmd = Command::new("sh");
            cmd.arg(workspace().join("scripts/mk-rootfs.sh"))
                .arg(&rootfs_dir);
            if arch == Arch::Arm64 {
                cmd.env("ARCH", "arm64")
                    .env("INCLUDE", "libelf1,zlib1g,busybox-static");
            }
            run(&mut cmd);
        }
        let dir = matrix_dir();
        std::fs::create_dir_all(&dir).expect("create target/kernels");
        let image = dir.join(image);
        let mut cmd = Command::new("sh");
        cmd.arg(workspace().join("scripts/kernels/initramfs.sh"))
            .arg(rootfs_dir.join("rootfs"))
            .arg(std::env::var_os(arch.static_bin_var()).expect("checked by skip()"))
            .arg(falco_rules())
            .arg(&image);
        if arch != Arch::Amd64 {
            cmd.arg(host_capture());
        }
        run(&mut cmd);
        image
    })
}

/// A capture written here (x86-64), by `vigil run -w` around the generator's host actions,
/// for the foreign guests to replay (`check_foreign_replay`).
fn host_capture() -> PathBuf {
    let path = scratch("host-capture").join("host.cap");
    let out = Command::new(VIGIL)
        .arg("run")
        .arg("-w")
        .arg(&path)
        .args([
            "--",
            VIGIL,
            "generate",
            "run",
            "^syscall\\.",
            "--sleep",
            "0s",
        ])
        .stdin(Stdio::null())
        .output()
        .expect("run vigil run -w");
    // The generator's exit says whether every action ran; the capture is what matters.
    assert!(
        std::fs::metadata(&path).is_ok_and(|m| m.len() > 0),
        "vigil run -w wrote no capture ({}):\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    path
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

    /// The actions `vigil generate run` performed in `phase` (`ok` lines).
    fn actions(&self, phase: &str) -> Vec<String> {
        self.text(&format!("{phase}.gen"))
            .lines()
            .filter_map(|l| l.strip_prefix("ok    "))
            .filter_map(|l| l.split(':').next())
            .map(str::to_owned)
            .collect()
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

/// The guest's own lines of `results` (its phases' steps with their times), each file it sent
/// named but not shown: where a stopped guest got to.
fn progress(results: &str) -> String {
    let mut out = Vec::new();
    let mut inside = false;
    for line in results.lines().map(|l| l.trim_end_matches('\r')) {
        if let Some(name) = line.strip_prefix("=== begin ") {
            out.push(format!("(sent {name})"));
            inside = true;
        } else if line.starts_with("=== end ") {
            inside = false;
        } else if !inside {
            out.push(line.to_owned());
        }
    }
    tail(&out.join("\n"), 80)
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

/// Fetches `kernel`: its image and the name of its package's version (its directory).
fn image(kernel: &Kernel) -> (PathBuf, String) {
    let vmlinuz = run(Command::new("sh")
        .arg(workspace().join("scripts/kernels/fetch.sh"))
        .args([kernel.suite, kernel.package, kernel.arch.debian()]));
    let vmlinuz = PathBuf::from(
        vmlinuz
            .lines()
            .last()
            .expect("fetch.sh prints the image")
            .trim(),
    );
    let name = vmlinuz
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .expect("the image's directory is the package's name");
    (vmlinuz, name)
}

/// Fetches `kernel`, boots it and returns what its guest sent back.
fn boot(kernel: &Kernel) -> Guest {
    let (vmlinuz, name) = image(kernel);
    let out = matrix_dir().join("runs").join(&name);
    let phases = std::env::var("VIGIL_GUEST_PHASES").unwrap_or_else(|_| "all".into());
    // VIGIL_GUEST_REUSE=1: check the last run's results again instead of booting (for work
    // on the checks themselves).
    let reuse = std::env::var("VIGIL_GUEST_REUSE").is_ok_and(|v| v == "1")
        && std::fs::read_to_string(out.join("results.log")).is_ok_and(|r| r.contains("guest done"));
    // A guest boot.sh stopped is reported below with how far it got.
    let mut stopped = String::new();
    if !reuse {
        // A guest that stalls (no result line for VIGIL_GUEST_STALL seconds, or past
        // VIGIL_GUEST_TIMEOUT) is booted once more: under emulation on a loaded host a guest
        // kernel can stop making progress for reasons of the emulator's. A step of Vigil's
        // that hangs is not one: the guest bounds each step and reports it (`hung_steps`).
        for attempt in 1..=2 {
            eprintln!("booting {name} (phases: {phases}, attempt {attempt})");
            let boot = Command::new("sh")
                .arg(workspace().join("scripts/kernels/boot.sh"))
                .arg(&vmlinuz)
                .arg(initramfs(kernel.arch))
                .arg(&out)
                .arg(&phases)
                .stdin(Stdio::null())
                .output()
                .expect("run scripts/kernels/boot.sh");
            stopped = match boot.status.code() {
                _ if boot.status.success() => String::new(),
                Some(124) => format!("it ran past VIGIL_GUEST_TIMEOUT ({})", boot.status),
                Some(125) => format!("it stalled: {}", text(&boot.stderr).trim()),
                _ => format!(
                    "qemu failed ({}): {}",
                    boot.status,
                    text(&boot.stderr).trim()
                ),
            };
            let stalled = matches!(boot.status.code(), Some(124 | 125));
            if !stalled || attempt == 2 {
                break;
            }
            let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
            eprintln!(
                "{name}: attempt {attempt} stopped, {stopped}; its progress:\n{}\nconsole:\n{}",
                progress(&read("results.log")),
                tail(&read("console.log"), 40)
            );
        }
    }
    let results = std::fs::read_to_string(out.join("results.log")).unwrap_or_default();
    // arm64: one UART, the console is in the results (boot.sh).
    let console = match kernel.arch {
        Arch::Amd64 => std::fs::read_to_string(out.join("console.log")).unwrap_or_default(),
        Arch::Arm64 => results.clone(),
    };
    let guest = parse_results(&results, console);
    assert!(
        guest.fact("done").is_some(),
        "{name}: the guest did not finish its checks. {stopped}\nits progress:\n{}\nconsole:\n{}",
        progress(&results),
        tail(&guest.console, 60)
    );
    assert!(
        stopped.is_empty(),
        "{name}: the guest finished, but {stopped}"
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

/// The generator's pattern of each phase of `scripts/kernels/guest-init.sh` (kept here, not
/// read back from the guest, so a guest that narrows its selection fails).
fn phase_pattern(phase: &str) -> &'static str {
    match phase {
        "tracepoint" | "raw" => {
            r"^syscall\.(CreateSymlinkOverSensitiveFiles|ReadSensitiveFileUntrusted)$"
        }
        _ => r"^syscall\.",
    }
}

/// The phases that run the generator under `vigil run`: there the phase's exit status is the
/// generator's (`vigil run` exits with its workload's); under `vigil watch` the guest records
/// the generator's own (`generate_exit`).
const RUN_PHASES: [&str; 2] = ["run", "run-falco"];

/// The generator ran every action of its selection in `phase` (the actions of
/// [`phase_pattern`] but the slow ones, which it leaves out without `--slow`) and exited 0: an
/// action it skipped, failed or never reached (it died on the way) fails, and so does one it
/// ran that the selection does not hold. Returns the actions that ran, and the failures.
fn check_generator(guest: &Guest, phase: &str) -> (Vec<&'static Action>, Vec<String>) {
    let pattern = phase_pattern(phase);
    let selection: Vec<&'static Action> = vigil_generator::select(pattern)
        .unwrap_or_else(|e| panic!("the pattern of phase {phase}: {e}"))
        .into_iter()
        .filter(|a| !a.slow)
        .collect();
    let gen = guest.text(&format!("{phase}.gen"));
    let mut failures = Vec::new();
    let exit_fact = if RUN_PHASES.contains(&phase) {
        format!("{phase}.exit")
    } else {
        format!("{phase}.generate_exit")
    };
    if guest.fact(&exit_fact) != Some("0") {
        failures.push(format!(
            "{phase}: the generator's exit status ({exit_fact}) is {:?}, not 0",
            guest.fact(&exit_fact)
        ));
    }
    // `ok    NAME: …`, `FAIL  NAME: …`, `skip  NAME: why` (crates/cli/src/generate.rs).
    let line_of = |name: &str| {
        gen.lines()
            .find(|l| l.get(6..).and_then(|r| r.split(':').next()) == Some(name))
    };
    let ran = guest.actions(phase);
    let ran: BTreeSet<String> = ran.into_iter().collect();
    for action in &selection {
        if !ran.contains(action.name) {
            failures.push(format!(
                "{phase}: {} did not run: {}",
                action.name,
                line_of(action.name).unwrap_or("never reached (no line of the generator)")
            ));
        }
    }
    for name in &ran {
        if !selection.iter().any(|a| a.name == name) {
            failures.push(format!(
                "{phase}: {name} ran but is not in the selection of {pattern}"
            ));
        }
    }
    if selection.is_empty() {
        failures.push(format!("{phase}: {pattern} selects no action"));
    }
    if !failures.is_empty() {
        failures.push(guest.explain(phase));
    }
    let ran = selection
        .into_iter()
        .filter(|a| ran.contains(a.name))
        .collect();
    (ran, failures)
}

/// The generator ran its whole selection in `phase` ([`check_generator`]), and every action
/// raised each rule of `ruleset` it is expected to raise, with the expected output fields and
/// every field the rule's output names. Returns the failures.
fn check_alerts(guest: &Guest, phase: &str, ruleset: Ruleset) -> Vec<String> {
    let alerts = guest.alerts(phase);
    let outputs = RuleOutputs::of(ruleset);
    let (ran, mut failures) = check_generator(guest, phase);
    for action in ran {
        let fields = expected_fields(action.name);
        for e in action
            .expected()
            .into_iter()
            .filter(|e| e.ruleset == ruleset)
        {
            if !alerts
                .iter()
                .any(|a| alert_matches(a, e.rule, &fields, &outputs))
            {
                failures.push(format!(
                    "{phase}: {}: no `{}` alert with {fields:?} and the fields its output names \
                     ({:?}); that rule's alerts: {:?}",
                    action.name,
                    e.rule,
                    outputs.fields(e.rule),
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

/// The host's capture (another architecture's) replayed in the guest raises the alerts it
/// raises here, and some.
fn check_foreign_replay(guest: &Guest) -> Vec<String> {
    let capture = scratch("host-capture").join("host.cap");
    if guest.fact("replay.exit") != Some("0") {
        return vec![format!(
            "replay: vigil replay of the host's capture failed in the guest\n{}",
            guest.explain("replay")
        )];
    }
    let out = Command::new(VIGIL)
        .args(["replay", "--json"])
        .arg(&capture)
        .output()
        .expect("run vigil replay");
    let here: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let (here, there) = (alert_set(&here), alert_set(&guest.alerts("replay")));
    if here.is_empty() || here != there {
        vec![format!(
            "replay: the host's capture replays to other alerts in the guest ({} here): only here: {:?}; only there: {:?}",
            here.len(),
            here.difference(&there).take(5).collect::<Vec<_>>(),
            there.difference(&here).take(5).collect::<Vec<_>>()
        )]
    } else {
        Vec::new()
    }
}

/// The events of a capture, as comparable lines (see [`normalize_events`]).
fn event_lines(capture: &Path) -> Vec<String> {
    let jsonl = capture.with_extension("jsonl");
    run(Command::new(VIGIL)
        .args(["capture", "convert", "--to", "jsonl"])
        .arg(capture)
        .arg(&jsonl));
    let text = std::fs::read_to_string(&jsonl).expect("read the converted capture");
    normalize_events(&text)
}

const CLONES: [&str; 4] = ["clone", "clone3", "fork", "vfork"];

/// The events of the generator's processes (from the first exec of `vigil generate run` on,
/// and every process it forked), sorted, each with what differs from one run of the same
/// actions to the next taken out: times, event numbers, CPUs, process ids (also inside
/// strings: `/proc/<pid>/…`, file names), loopback ports and the times of files the actions
/// create. Everything else — the syscall, its arguments, its result — is compared as captured.
fn normalize_events(jsonl: &str) -> Vec<String> {
    let mut members: BTreeSet<u64> = BTreeSet::new();
    let mut events = Vec::new();
    for line in jsonl.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(kind) = event["type"].as_str() else {
            continue;
        };
        let pid = event["pid"].as_u64().unwrap_or(0);
        if members.is_empty()
            && kind == "execve"
            && event["args"]["filename"] == "/vigil"
            && event["args"]["args"]
                .as_array()
                .is_some_and(|a| a.iter().any(|x| x == "generate"))
        {
            members.insert(pid);
        }
        if !members.contains(&pid) {
            continue;
        }
        if CLONES.contains(&kind) {
            if let Some(child) = event["res"].as_u64().filter(|&c| c > 0) {
                members.insert(child);
            }
        }
        events.push(event);
    }
    let mut lines: Vec<String> = events
        .into_iter()
        .map(|mut event| {
            let kind = event["type"].as_str().unwrap_or("").to_owned();
            if let Some(obj) = event.as_object_mut() {
                for key in ["ts", "tid", "pid", "cpu", "num"] {
                    obj.remove(key);
                }
                if CLONES.contains(&kind.as_str()) || kind == "setsid" {
                    obj.insert("res".into(), "P".into());
                }
            }
            if let Some(args) = event["args"].as_object_mut() {
                for key in [
                    "tid",
                    "pid",
                    "ptid",
                    "vtid",
                    "vpid",
                    "exe_ino",
                    "exe_ino_ctime",
                    "exe_ino_mtime",
                ] {
                    if args.contains_key(key) {
                        args.insert(key.into(), "P".into());
                    }
                }
                for key in ["addr", "tuple"] {
                    if let Some(text) = args.get(key).and_then(Value::as_str) {
                        let port_free = mask_ports(text);
                        args.insert(key.into(), port_free.into());
                    }
                }
            }
            mask_temp_names(&mask_pids(&event.to_string(), &members))
        })
        .collect();
    lines.sort();
    lines
}

/// `text` with every run of digits that is one of `pids` and stands in a path or name
/// (after `/` or `-`: `/proc/139/status`, `vigil-generator-155.log`) replaced by `P`. Other
/// numbers stay, even when some process has that id (a guest's pids are small: `127.0.0.1`).
fn mask_pids(text: &str, pids: &BTreeSet<u64>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut digits = String::new();
    let mut before = ' ';
    let flush = |digits: &mut String, out: &mut String, before: char| {
        let in_name = before == '/' || before == '-';
        if in_name && digits.parse::<u64>().is_ok_and(|n| pids.contains(&n)) {
            out.push('P');
        } else {
            out.push_str(digits);
        }
        digits.clear();
    };
    for c in text.chars() {
        if c.is_ascii_digit() {
            if digits.is_empty() {
                before = out.chars().last().unwrap_or(' ');
            }
            digits.push(c);
        } else {
            flush(&mut digits, &mut out, before);
            out.push(c);
        }
    }
    flush(&mut digits, &mut out, before);
    out
}

/// `text` with the random part of the generator's temporary names (`vigil-generator.` and
/// six letters or digits) replaced by `XXXXXX`.
fn mask_temp_names(text: &str) -> String {
    const PREFIX: &str = "vigil-generator.";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let (head, tail) = rest.split_at(at + PREFIX.len());
        out.push_str(head);
        let random = tail
            .chars()
            .take(6)
            .take_while(char::is_ascii_alphanumeric)
            .count();
        if random == 6 {
            out.push_str("XXXXXX");
            rest = &tail[6..];
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

/// `text` with each port (the digits after a `:` that end the text or an endpoint, `->`)
/// replaced by `N`: `tcp:0.0.0.0:0->127.0.0.1:41761` → `tcp:0.0.0.0:N->127.0.0.1:N`.
fn mask_ports(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(':') {
        let (head, tail) = rest.split_at(at + 1);
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        let after = &tail[digits..];
        if digits > 0 && (after.is_empty() || after.starts_with("->")) {
            out.push('N');
            rest = after;
        } else {
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

fn count_lines(lines: &[String]) -> BTreeMap<&str, i64> {
    let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
    for l in lines {
        *counts.entry(l.as_str()).or_default() += 1;
    }
    counts
}

/// The fexit and exit-tracepoint captures of the same actions hold the same events.
fn check_same_events(guest: &Guest, dir: &Path) -> Vec<String> {
    let mut streams = Vec::new();
    for phase in ["auto", "exit"] {
        let Some(capture) = guest.files.get(&format!("{phase}.cap")) else {
            return vec![format!("{phase}: no capture came back")];
        };
        let path = dir.join(format!("{phase}.cap"));
        std::fs::write(&path, capture).expect("write the capture");
        streams.push(event_lines(&path));
    }
    let (fexit, exit) = (&streams[0], &streams[1]);
    // The guest runs everything in /vigil/matrix (guest-init.sh): every exec record carries
    // that path, walked up the kernel's kernfs nodes.
    let execs: Vec<&String> = fexit
        .iter()
        .filter(|l| l.contains(r#""type":"execve""#))
        .collect();
    let in_cgroup = execs
        .iter()
        .filter(|l| l.contains(r#""cgroups":"/vigil/matrix""#))
        .count();
    if execs.is_empty() || in_cgroup != execs.len() {
        return vec![format!(
            "auto: {in_cgroup} of {} exec records carry the cgroup /vigil/matrix; first: {:?}",
            execs.len(),
            execs
                .first()
                .map(|l| l.chars().take(600).collect::<String>())
        )];
    }
    let (a, b) = (count_lines(fexit), count_lines(exit));
    let mut differences: Vec<String> = Vec::new();
    for key in a.keys().chain(b.keys()).collect::<BTreeSet<_>>() {
        let d = a.get(key).copied().unwrap_or(0) - b.get(key).copied().unwrap_or(0);
        if d != 0 {
            differences.push(format!("{d:+} {key}"));
        }
    }
    if fexit.len() < 500 || !differences.is_empty() {
        vec![format!(
            "fexit and exit streams differ ({} and {} events of the generator; +: only fexit, -: only exit):\n{}",
            fexit.len(),
            exit.len(),
            differences
                .iter()
                .take(20)
                .map(|d| d.chars().take(400).collect::<String>())
                .collect::<Vec<_>>()
                .join("\n")
        )]
    } else {
        eprintln!(
            "fexit and exit tracepoints: the same {} events of the generator",
            fexit.len()
        );
        Vec::new()
    }
}

/// How an alert's output fields may differ between `vigil watch` and `vigil run` for the same
/// action, by design (README, *`vigil run` and `vigil watch`*): `(field prefix, watch value
/// prefix, run value prefix)`, an empty prefix matching any value.
const WATCH_RUN_DIFFERENCES: [(&str, &str, &str); 3] = [
    // The workload's ancestry includes `vigil run` itself.
    ("proc.aname[", "", ""),
    // A traced task cannot be traced again: the ptrace actions are refused under the tracer.
    ("evt.res", "SUCCESS", "EPERM"),
    // A namespace descriptor opened where no watched call saw it is named by the kernel
    // (`/proc/PID/fd` link: `uts:[…]`) under `vigil run`, by its path under `vigil watch`.
    ("fd.name", "/proc/self/ns/", ""),
];

/// An alert as compared across modes: rule, priority and the output fields with what differs
/// from one run of the generator to the next masked (temporary names, the generator's pids in
/// file names, loopback ports).
fn comparable(alert: &Value) -> (String, BTreeMap<String, String>) {
    let key = format!("{} {}", alert["rule"], alert["priority"]);
    let mut fields = BTreeMap::new();
    if let Some(map) = alert["output_fields"].as_object() {
        for (k, v) in map {
            if k == "evt.time" || k.ends_with("port") {
                continue;
            }
            let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
            let masked = mask_ports(&mask_temp_names(&mask_generator_ids(&text)));
            fields.insert(k.clone(), masked);
        }
    }
    (key, fields)
}

/// `text` with the digits after `vigil-generator-` (the generator's pid in the names of the
/// files it writes) replaced by `P`.
fn mask_generator_ids(text: &str) -> String {
    const PREFIX: &str = "vigil-generator-";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(PREFIX) {
        let (head, tail) = rest.split_at(at + PREFIX.len());
        out.push_str(head);
        let digits = tail.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push('P');
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// The same actions under `vigil watch` (phase `watch_phase`) and under `vigil run`
/// (`run_phase`) raise the same rules with the same priorities and output fields, but for
/// [`WATCH_RUN_DIFFERENCES`].
fn check_watch_run_agree(guest: &Guest, watch_phase: &str, run_phase: &str) -> Vec<String> {
    let group = |phase: &str| {
        let mut by_rule: BTreeMap<String, Vec<BTreeMap<String, String>>> = BTreeMap::new();
        for alert in guest.alerts(phase) {
            let (key, fields) = comparable(&alert);
            by_rule.entry(key).or_default().push(fields);
        }
        for list in by_rule.values_mut() {
            list.sort();
        }
        by_rule
    };
    let (watched, traced) = (group(watch_phase), group(run_phase));
    let mut failures = Vec::new();
    for key in watched.keys().chain(traced.keys()).collect::<BTreeSet<_>>() {
        let (w, r) = (
            watched.get(key).map_or(&[][..], Vec::as_slice),
            traced.get(key).map_or(&[][..], Vec::as_slice),
        );
        if w.len() != r.len() {
            failures.push(format!(
                "{watch_phase}/{run_phase}: {key}: {} alerts under watch, {} under run",
                w.len(),
                r.len()
            ));
            continue;
        }
        for (fw, fr) in w.iter().zip(r) {
            for field in fw.keys().chain(fr.keys()).collect::<BTreeSet<_>>() {
                let (vw, vr) = (
                    fw.get(field).map_or("<absent>", String::as_str),
                    fr.get(field).map_or("<absent>", String::as_str),
                );
                let allowed = WATCH_RUN_DIFFERENCES.iter().any(|(f, pw, pr)| {
                    field.starts_with(f) && vw.starts_with(pw) && vr.starts_with(pr)
                });
                if vw != vr && !allowed {
                    failures.push(format!(
                        "{watch_phase}/{run_phase}: {key}: {field} is {vw:?} under watch, {vr:?} under run"
                    ));
                }
            }
        }
    }
    failures
}

/// Who woke the reader (`--stats`' `wakeups`): where syscalls are hooked by a tracing program
/// (`raw`'s `tp_btf`; `auto` where it chose fexit) a watched record leaves its wakeup to the BPF
/// timer, so none wakes the reader at once; the exit tracepoints cannot use the timer and wake
/// it at once (bpf/README.md, *Wakeups*).
fn check_wakeups(guest: &Guest, fexit: bool) -> Vec<String> {
    let mut failures = Vec::new();
    for (phase, tracing) in [("auto", fexit), ("raw", true), ("exit", false)] {
        let err = guest.text(&format!("{phase}.err"));
        let wakeups = err
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|v| v.get("wakeups").cloned());
        let Some(w) = wakeups else {
            failures.push(format!(
                "{phase}: no `wakeups` in the --stats line\n{}",
                guest.explain(phase)
            ));
            continue;
        };
        let n = |key: &str| w.get(key).and_then(Value::as_u64).unwrap_or(0);
        let ok = if tracing {
            n("watched") == 0 && n("deferred") > 0 && n("timer") > 0
        } else {
            n("watched") > 0
        };
        if !ok {
            failures.push(format!(
                "{phase}: {} ({w})\n{}",
                if tracing {
                    "a watched record of a tracing hook woke the reader at once, or none waited for the timer"
                } else {
                    "no watched record of the exit tracepoints woke the reader"
                },
                guest.explain(phase)
            ));
        }
    }
    failures
}

/// A supported kernel: every check of the module comment. Where the kernel has no BPF
/// trampolines (`trampolines`), `auto` must fall back to the exit tracepoints instead.
fn check_supported(guest: &Guest, name: &str, trampolines: bool) {
    let mut failures = Vec::new();
    let fexit = guest.text("auto.err").contains("syscalls hooked by fexit");
    if fexit != trampolines {
        failures.push(format!(
            "auto: fexit was {}chosen\n{}",
            if fexit { "" } else { "not " },
            guest.explain("auto")
        ));
    }
    for phase in ["auto", "falco", "exit", "tracepoint", "raw"] {
        if guest.fact(&format!("{phase}.exit")) != Some("0") {
            failures.push(format!(
                "{phase}: vigil watch failed\n{}",
                guest.explain(phase)
            ));
        }
        // Debian's stock kernels take the lifecycle programs' wakeup timer (bpf/README.md,
        // *Wakeups*).
        if guest.fact(&format!("{phase}.timers_refused")) != Some("0") {
            failures.push(format!(
                "{phase}: the wakeup timer was refused ({:?})\n{}",
                guest.fact(&format!("{phase}.timers_refused")),
                guest.explain(phase)
            ));
        }
    }
    failures.extend(check_wakeups(guest, fexit));
    failures.extend(check_bpf_runs(guest));
    failures.extend(check_alerts(guest, "auto", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "falco", Ruleset::FalcoStable));
    failures.extend(check_alerts(guest, "exit", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "tracepoint", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "raw", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "run", Ruleset::Vigil));
    failures.extend(check_alerts(guest, "run-falco", Ruleset::FalcoStable));
    failures.extend(check_widened(guest));
    let dir = scratch(name);
    failures.extend(check_replay(guest, "auto", &dir));
    failures.extend(check_replay(guest, "exit", &dir));
    failures.extend(check_same_events(guest, &dir));
    failures.extend(check_watch_run_agree(guest, "auto", "run"));
    failures.extend(check_watch_run_agree(guest, "falco", "run-falco"));
    assert!(
        failures.is_empty(),
        "{name} ({}):\n{}",
        guest.release,
        failures.join("\n")
    );
}

/// How many opens (a watched call) the guest's control makes: they must raise the run count
/// of Vigil's programs by at least as many (`scripts/kernels/guest-init.sh`, phase `exit`).
const WATCHED_CALLS: u64 = 1_000;

/// The phase whose agent the run counts are taken from: the exit tracepoints, whose per-call
/// program the agent holds. Under fexit the per-syscall stubs' descriptors are closed once
/// attached (their links keep them loaded), so the agent's fdinfo shows none of their runs:
/// 1000 watched opens counted 14 there, and the bound for unwatched calls could not fail.
const BPF_RUNS_PHASE: &str = "exit";

/// Unwatched syscalls ran no Vigil program, by `bpf_stats_enabled` run counts: the guest
/// turned the statistics on (`bpf_stats_enabled=1`), its 200000 unwatched calls (`dd`, exit
/// 0) ran programs fewer than 1000 times (dd's own fork, exec, opens and exit), and the
/// control — [`WATCHED_CALLS`] opens by one `cat` (exit 0) — ran them at least that often, so
/// a count stuck at 0 fails.
fn check_bpf_runs(guest: &Guest) -> Vec<String> {
    let fact = |key: &str| guest.fact(&format!("{BPF_RUNS_PHASE}.{key}"));
    let number = |key: &str| fact(key).and_then(|n| n.parse::<u64>().ok());
    let mut failures = Vec::new();
    if guest.fact("bpf_stats_enabled") != Some("1") {
        failures.push(format!(
            "the guest could not turn kernel.bpf_stats_enabled on (it reads {:?}): run counts \
             mean nothing",
            guest.fact("bpf_stats_enabled")
        ));
    }
    for (exit, what) in [("dd_exit", "dd"), ("cat_exit", "the control's cat")] {
        if fact(exit) != Some("0") {
            failures.push(format!(
                "{BPF_RUNS_PHASE}: {what} failed ({exit} = {:?})",
                fact(exit)
            ));
        }
    }
    match (number("unwatched_syscalls"), number("bpf_runs")) {
        (Some(200_000), Some(n)) if n < 1_000 => {}
        other => failures.push(format!(
            "{BPF_RUNS_PHASE}: 200000 unwatched syscalls ran Vigil programs {other:?} times \
             (calls, runs)"
        )),
    }
    match (number("watched_syscalls"), number("watched_bpf_runs")) {
        (Some(WATCHED_CALLS), Some(n)) if n >= WATCHED_CALLS => {}
        other => failures.push(format!(
            "{BPF_RUNS_PHASE}: {WATCHED_CALLS} watched opens must run Vigil's programs at least \
             as often: {other:?} (calls, runs)"
        )),
    }
    if !failures.is_empty() {
        failures.push(guest.explain(BPF_RUNS_PHASE));
    }
    failures
}

/// Under Falco's rules `vigil run` armed the full filter in the process that entered new
/// namespaces (a `seccomp(2)` injected at its `setns` exit: `Tracer::widen`), with no failure.
fn check_widened(guest: &Guest) -> Vec<String> {
    let err = guest.text("run-falco.err");
    let stat = |key: &str| {
        err.lines()
            .filter(|l| l.starts_with("vigil: traced_syscalls="))
            .flat_map(str::split_whitespace)
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (stat("widened"), stat("widen_failures")) {
        (Some(w), Some(0)) if w >= 1 => Vec::new(),
        other => vec![format!(
            "run-falco: no process got the full filter (widened, widen_failures: {other:?})\n{}",
            guest.explain("run-falco")
        )],
    }
}

/// A kernel older than Vigil's eBPF capture supports: one clean line, and `vigil run` works.
fn check_refused(guest: &Guest, name: &str) {
    let mut failures = Vec::new();
    let err = guest.text("auto.err");
    // Warnings about the guest itself (no `/dev/log` for the syslog output) aside, the
    // failure is one line: no libbpf message, no verifier log.
    let lines: Vec<&str> = err
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with("vigil: warn"))
        .collect();
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
    failures.extend(check_widened(guest));
    assert!(
        failures.is_empty(),
        "{name} ({}):\n{}",
        guest.release,
        failures.join("\n")
    );
}

/// Each step the guest stopped at its budget (guest-init.sh: `ready_timeout`,
/// `generate_timeout`, `term_timeout`, `run_timeout`), with what its phase left.
fn hung_steps(guest: &Guest) -> Vec<String> {
    guest
        .facts
        .iter()
        .filter(|(k, v)| k.ends_with("_timeout") && v.as_str() == "1")
        .map(|(k, _)| {
            let (phase, step) = k.split_once('.').unwrap_or((k, ""));
            format!("{step} in phase {phase}: {}", guest.explain(phase))
        })
        .collect()
}

fn check_kernel(test: &str, kernel: &Kernel) {
    if skip(test, kernel.arch) {
        return;
    }
    let guest = boot(kernel);
    let hung = hung_steps(&guest);
    assert!(hung.is_empty(), "{test}:\n{}", hung.join("\n"));
    if kernel.arch != Arch::Amd64 {
        let failures = check_foreign_replay(&guest);
        assert!(failures.is_empty(), "{test}:\n{}", failures.join("\n"));
    }
    if supported(&guest.release) {
        check_supported(&guest, test, kernel.trampolines);
    } else {
        check_refused(&guest, test);
    }
}

#[test]
fn debian_12_bookworm_6_1() {
    let _host = host::alone(module_path!());
    check_kernel("debian_12_bookworm_6_1", &BOOKWORM);
}

#[test]
fn debian_12_bookworm_6_1_cloud() {
    let _host = host::alone(module_path!());
    check_kernel("debian_12_bookworm_6_1_cloud", &BOOKWORM_CLOUD);
}

#[test]
fn debian_13_trixie_6_12() {
    let _host = host::alone(module_path!());
    check_kernel("debian_13_trixie_6_12", &TRIXIE);
}

#[test]
fn debian_11_bullseye_5_10() {
    let _host = host::alone(module_path!());
    check_kernel("debian_11_bullseye_5_10", &BULLSEYE);
}

/// arm64 (Graviton, Fargate ARM), emulated by `qemu-system-aarch64 -M virt -cpu max`: the same
/// checks; the guest's captures replay here, on x86-64, to the alerts the guest raised.
#[test]
fn debian_12_bookworm_6_1_arm64() {
    let _host = host::alone(module_path!());
    check_kernel("debian_12_bookworm_6_1_arm64", &BOOKWORM_ARM64);
}

#[test]
fn debian_13_trixie_6_12_arm64() {
    let _host = host::alone(module_path!());
    check_kernel("debian_13_trixie_6_12_arm64", &TRIXIE_ARM64);
}

#[test]
fn results_parse_into_facts_and_files() {
    let _host = host::alone(module_path!());
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
    assert!(hung_steps(&guest).is_empty());
    assert_eq!(
        progress(&results),
        "guest kernel 6.1.0-50-amd64\nphase auto exit=0\nphase auto bpf_runs=12\n(sent auto.err)\nguest done"
    );
    // A step stopped at its budget fails the kernel's test with its phase's report.
    let stopped = parse_results(
        &format!("phase run start at=3.1s\nphase run run_timeout=1 at=483.2s\nphase run exit=124 at=483.3s\n=== begin run.err\n{block}=== end run.err\n"),
        String::new(),
    );
    let hung = hung_steps(&stopped);
    assert_eq!(hung.len(), 1, "{hung:?}");
    assert!(hung[0].starts_with("run_timeout in phase run:"), "{hung:?}");
    assert!(
        hung[0].contains("hello"),
        "the phase's stderr is shown: {hung:?}"
    );
    assert_eq!(
        mask_pids(
            "/proc/139/status 1390 139 x-139.log 127.0.0.1",
            &BTreeSet::from([127, 139])
        ),
        "/proc/P/status 1390 139 x-P.log 127.0.0.1"
    );
    assert_eq!(
        mask_ports("tcp:0.0.0.0:0->127.0.0.1:34201"),
        "tcp:0.0.0.0:N->127.0.0.1:N"
    );
    assert_eq!(
        mask_temp_names("/tmp/vigil-generator.UNxmPz/x vigil-generator.ab"),
        "/tmp/vigil-generator.XXXXXX/x vigil-generator.ab"
    );
    assert_eq!(
        mask_generator_ids("/var/log/vigil-generator-194.log"),
        "/var/log/vigil-generator-P.log"
    );
    let watched = serde_json::json!({"rule": "R", "priority": "Warning", "output_fields": {
        "proc.aname[2]": "init", "evt.res": "SUCCESS", "fd.sport": 1, "proc.name": "a"}});
    let traced = serde_json::json!({"rule": "R", "priority": "Warning", "output_fields": {
        "proc.aname[2]": "vigil", "evt.res": "EPERM", "fd.sport": 2, "proc.name": "a"}});
    let renamed = serde_json::json!({"rule": "R", "priority": "Warning", "output_fields": {
        "proc.aname[2]": "vigil", "evt.res": "EPERM", "fd.sport": 2, "proc.name": "b"}});
    let with = |w: &Value, r: &Value| {
        let mut guest = Guest::default();
        for (phase, alert) in [("w", w), ("r", r)] {
            guest
                .files
                .insert(format!("{phase}.alerts"), alert.to_string().into_bytes());
        }
        check_watch_run_agree(&guest, "w", "r")
    };
    assert!(with(&watched, &traced).is_empty());
    assert_eq!(with(&watched, &renamed).len(), 1);
    assert!(supported("6.1.0-50-amd64"));
    assert!(supported("6.12.117+deb13-amd64"));
    assert!(!supported("5.10.0-32-amd64"));
}

/// A guest that writes no result line for VIGIL_GUEST_STALL seconds is stopped with exit
/// status 125 and a message, and leaves no qemu behind (what lets `boot` tell a stalled guest
/// from a failed one). The guest runs the `stall` phase: a few lines, then nothing (a guest
/// running real phases may write a line every few seconds on a fast host, and finish before
/// any allowance ran out).
#[test]
fn a_guest_that_writes_no_result_is_stopped_as_stalled() {
    let _host = host::alone(module_path!());
    if skip(
        "a_guest_that_writes_no_result_is_stopped_as_stalled",
        Arch::Amd64,
    ) {
        return;
    }
    let (vmlinuz, _) = image(&BOOKWORM);
    let out = matrix_dir().join("runs").join("stall-check");
    let boot = Command::new("sh")
        .arg(workspace().join("scripts/kernels/boot.sh"))
        .arg(&vmlinuz)
        .arg(initramfs(Arch::Amd64))
        .arg(&out)
        .arg("stall")
        .env("VIGIL_GUEST_STALL", "3")
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/kernels/boot.sh");
    let stderr = text(&boot.stderr);
    assert_eq!(boot.status.code(), Some(125), "{}: {stderr}", boot.status);
    assert!(
        stderr.contains("wrote no result for 3s"),
        "the message says why: {stderr}"
    );
    let left = Command::new("pgrep")
        .args(["-f", &out.to_string_lossy()])
        .output()
        .expect("run pgrep");
    assert!(
        left.stdout.is_empty(),
        "qemu of the stalled guest still runs: {}",
        text(&left.stdout)
    );
}

/// The checks of what a guest sent back, on made-up results: each requirement, when unmet,
/// is a failure (no guest boots here).
#[test]
fn guest_checks_fail_when_a_requirement_is_unmet() {
    let _host = host::alone(module_path!());
    let with = |facts: &[(&str, &str)], gen: &str| {
        let mut guest = Guest {
            release: "test".into(),
            ..Guest::default()
        };
        for (k, v) in facts {
            guest.facts.insert((*k).into(), (*v).into());
        }
        guest
            .files
            .insert("tracepoint.gen".into(), gen.as_bytes().to_vec());
        guest
    };
    let counts = [
        ("bpf_stats_enabled", "1"),
        ("exit.unwatched_syscalls", "200000"),
        ("exit.bpf_runs", "12"),
        ("exit.dd_exit", "0"),
        ("exit.watched_syscalls", "1000"),
        ("exit.watched_bpf_runs", "1004"),
        ("exit.cat_exit", "0"),
    ];
    assert_eq!(check_bpf_runs(&with(&counts, "")), Vec::<String>::new());
    for (key, bad) in [
        ("bpf_stats_enabled", "0"),
        ("exit.dd_exit", "1"),
        ("exit.cat_exit", "1"),
        ("exit.bpf_runs", "1000"),
        ("exit.watched_bpf_runs", "0"),
        ("exit.watched_bpf_runs", "999"),
        ("exit.watched_syscalls", "10"),
    ] {
        let mut facts = counts.to_vec();
        facts.retain(|(k, _)| *k != key);
        facts.push((key, bad));
        assert!(
            !check_bpf_runs(&with(&facts, "")).is_empty(),
            "{key}={bad} must fail"
        );
        facts.retain(|(k, _)| *k != key);
        assert!(
            !check_bpf_runs(&with(&facts, "")).is_empty(),
            "{key} missing must fail"
        );
    }

    let selected = [
        "syscall.ReadSensitiveFileUntrusted",
        "syscall.CreateSymlinkOverSensitiveFiles",
    ];
    let gen = |names: &[&str], extra: &str| {
        let mut text: String = names
            .iter()
            .map(|n| format!("ok    {n}: did it\n"))
            .collect();
        text.push_str(extra);
        text
    };
    let ok = [("tracepoint.generate_exit", "0")];
    let (ran, failures) = check_generator(&with(&ok, &gen(&selected, "")), "tracepoint");
    assert!(failures.is_empty(), "{failures:?}");
    assert_eq!(ran.len(), 2);
    let (_, failures) = check_generator(
        &with(&[("tracepoint.generate_exit", "1")], &gen(&selected, "")),
        "tracepoint",
    );
    assert!(!failures.is_empty(), "exit 1 must fail");
    let (_, failures) = check_generator(&with(&[], &gen(&selected, "")), "tracepoint");
    assert!(!failures.is_empty(), "no exit status must fail");
    let skipped = gen(
        &selected[..1],
        "skip  syscall.CreateSymlinkOverSensitiveFiles: no reason\n",
    );
    let (ran, failures) = check_generator(&with(&ok, &skipped), "tracepoint");
    assert_eq!(ran.len(), 1);
    assert!(
        failures.iter().any(|f| f.contains("did not run: skip")),
        "a skipped action: {failures:?}"
    );
    let (_, failures) = check_generator(&with(&ok, &gen(&selected[..1], "")), "tracepoint");
    assert!(
        failures.iter().any(|f| f.contains("never reached")),
        "an action never reached: {failures:?}"
    );
    let (_, failures) = check_generator(
        &with(
            &ok,
            &gen(&[selected[0], selected[1], "syscall.PtraceAttach"], ""),
        ),
        "tracepoint",
    );
    assert!(
        failures.iter().any(|f| f.contains("not in the selection")),
        "an action outside the selection: {failures:?}"
    );
}

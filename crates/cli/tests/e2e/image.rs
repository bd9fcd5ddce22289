//! The container image (root, runc, buildah; strict in CI). The static `vigil` that `make
//! static` builds is packed by `scripts/build-image.sh` into an OCI image, the image's only
//! layer is unpacked as the root filesystem of a runc bundle (nothing else in it: no libc, no
//! `/etc`), and the container runs:
//! - `vigil run` as uid 1000 with no capabilities and `noNewPrivileges`, tracing a workload in
//!   the container and alerting on a file the workload opens (a rules file mounted read-only,
//!   as a ConfigMap would be), and posting the alert to an HTTP output whose host name only
//!   the DNS server of the container's `/etc/resolv.conf` knows (static glibc, no NSS modules);
//! - `vigil watch` as root with only CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN, the host's PID
//!   namespace, and of `/sys` only the host's `/sys/kernel/btf` and `/sys/devices/system/cpu`:
//!   it loads its eBPF programs, attaches, reports it is watching with the host's processes in
//!   its start snapshot, and counts the events of the host's activity.
//!
//! The static binary is `$VIGIL_STATIC_BIN` (the Makefile's `test` target builds it and sets
//! the variable) or `target/<arch>-unknown-linux-gnu/release/vigil`. The test does not build it
//! (a release build takes minutes): when it is missing the tests skip, or fail under
//! `VIGIL_TEST_STRICT=1`. A stale binary is tested as it is: run `make static` after changes.

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::{host, is_root, skip, text, workspace};

/// How long one container may run (`vigil watch` loads and attaches its programs first).
const CONTAINER_WAIT: Duration = Duration::from_secs(300);

fn static_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("VIGIL_STATIC_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace().join("target"));
    target
        .join(format!("{}-unknown-linux-gnu", std::env::consts::ARCH))
        .join("release/vigil")
}

/// A directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("vigil-image-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("create a scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

// --- The binary ----------------------------------------------------------------------------

/// What the dynamic loader would need: the `PT_INTERP` path and the `DT_NEEDED` count.
fn dynamic_needs(elf: &[u8]) -> (Option<String>, usize) {
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    assert!(
        elf.len() > 64 && &elf[..4] == b"\x7fELF" && elf[4] == 2 && elf[5] == 1,
        "not a little-endian ELF64 file"
    );
    let (phoff, phentsize, phnum) = (u64_at(0x20), u16_at(0x36), u16_at(0x38));
    let mut interp = None;
    let mut needed = 0;
    for i in 0..phnum {
        let ph = phoff + i * phentsize;
        let (offset, size) = (u64_at(ph + 0x08), u64_at(ph + 0x20));
        match u32_at(ph) {
            // PT_INTERP: the loader's path, NUL-terminated.
            3 => {
                let path = &elf[offset..offset + size];
                interp = Some(text(path.split(|&b| b == 0).next().unwrap_or_default()));
            }
            // PT_DYNAMIC: (tag, value) pairs up to DT_NULL; DT_NEEDED is 1.
            2 => {
                for entry in elf[offset..offset + size].chunks_exact(16) {
                    match u64::from_le_bytes(entry[..8].try_into().unwrap()) {
                        0 => break,
                        1 => needed += 1,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    (interp, needed)
}

#[test]
fn static_binary_needs_no_loader_and_no_shared_library() {
    let _host = host::shared();
    let bin = static_binary();
    if !bin.is_file() {
        skip(
            "static_binary_needs_no_loader",
            &format!("no static binary at {} (make static)", bin.display()),
        );
        return;
    }
    let elf = fs::read(&bin).expect("read the static binary");
    assert_eq!(
        dynamic_needs(&elf),
        (None, 0),
        "{} must have no program interpreter and need no shared library",
        bin.display()
    );
    // The ordinary build is dynamic; the parser must see that, or the check above proves
    // nothing.
    let dynamic = fs::read(env!("CARGO_BIN_EXE_vigil")).expect("read the test's vigil");
    let (interp, needed) = dynamic_needs(&dynamic);
    assert!(
        interp.as_deref().is_some_and(|p| p.contains("ld-linux")) && needed > 0,
        "the dynamic build names its loader and libraries: {interp:?}, {needed}"
    );
}

// --- The image -----------------------------------------------------------------------------

/// The image, unpacked: its root filesystem and its configuration.
struct Image {
    rootfs: PathBuf,
    /// The root directory's entries as unpacked (runc later adds mount points to it).
    entries: Vec<String>,
    config: Value,
}

/// Builds the image once for every test of this binary; `Err` says why it cannot be.
fn image() -> &'static Result<Image, String> {
    static IMAGE: OnceLock<Result<Image, String>> = OnceLock::new();
    IMAGE.get_or_init(build_image)
}

fn build_image() -> Result<Image, String> {
    if !is_root() {
        return Err("not root (buildah storage and runc need root)".into());
    }
    let bin = static_binary();
    if !bin.is_file() {
        return Err(format!(
            "no static binary at {} (make static)",
            bin.display()
        ));
    }
    for tool in ["buildah", "runc"] {
        match Command::new(tool).arg("--version").output() {
            Ok(out) if out.status.success() => {}
            _ => return Err(format!("`{tool}` does not run (apt-get install {tool})")),
        }
    }
    // Under target/tmp, one copy replaced by each run: a static is never dropped, so the
    // directory outlives the test process.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("vigil-image-test");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("create the image directory");
    let oci = dir.join("oci");
    let out = Command::new("sh")
        .arg(workspace().join("scripts/build-image.sh"))
        .arg("-b")
        .arg(&bin)
        .args(["-t", "localhost/vigil-image-test"])
        .arg("-o")
        .arg(&oci)
        .arg("-s")
        .arg(dir.join("storage"))
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/build-image.sh");
    assert!(
        out.status.success(),
        "scripts/build-image.sh failed:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    // OCI image layout: index.json → manifest → config and layers, all by digest.
    let blob = |digest: &Value| -> Vec<u8> {
        let digest = digest.as_str().expect("a digest string");
        let hex = digest.strip_prefix("sha256:").expect("sha256 digest");
        fs::read(oci.join("blobs/sha256").join(hex)).expect("read a blob")
    };
    let index: Value =
        serde_json::from_slice(&fs::read(oci.join("index.json")).expect("read index.json"))
            .expect("index.json is JSON");
    let manifests = index["manifests"].as_array().expect("manifests");
    assert_eq!(manifests.len(), 1, "one image in the layout: {index}");
    let manifest: Value =
        serde_json::from_slice(&blob(&manifests[0]["digest"])).expect("manifest is JSON");
    let config: Value =
        serde_json::from_slice(&blob(&manifest["config"]["digest"])).expect("config is JSON");
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "the image is one layer: {manifest}");

    let rootfs = dir.join("rootfs");
    fs::create_dir(&rootfs).expect("create the root filesystem directory");
    let layer = dir.join("layer");
    fs::write(&layer, blob(&layers[0]["digest"])).expect("write the layer");
    // GNU tar recognises the compression (gzip, the OCI default) by itself.
    let out = Command::new("tar")
        .arg("-xf")
        .arg(&layer)
        .arg("-C")
        .arg(&rootfs)
        .output()
        .expect("run tar");
    assert!(
        out.status.success(),
        "unpacking the layer: {}",
        text(&out.stderr)
    );
    fs::remove_file(&layer).expect("remove the layer file");
    let mut entries: Vec<String> = fs::read_dir(&rootfs)
        .expect("list the root filesystem")
        .map(|e| {
            let entry = e.expect("a directory entry");
            entry.file_name().to_string_lossy().into_owned()
        })
        .collect();
    entries.sort();
    Ok(Image {
        rootfs,
        entries,
        config,
    })
}

/// The image for a test, or `None` after skipping (or failing under strict mode).
fn image_for(test: &str) -> Option<&'static Image> {
    match image() {
        Ok(image) => Some(image),
        Err(why) => {
            skip(test, why);
            None
        }
    }
}

#[test]
fn image_holds_only_the_static_vigil_as_its_entrypoint() {
    let _host = host::shared();
    let Some(image) = image_for("image_holds_only_the_static_vigil") else {
        return;
    };
    assert_eq!(
        image.entries,
        ["vigil"],
        "the image holds /vigil and nothing else"
    );
    let meta = fs::metadata(image.rootfs.join("vigil")).expect("stat /vigil");
    assert!(meta.is_file(), "/vigil is a regular file");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o755
    );
    let cfg = &image.config["config"];
    assert_eq!(cfg["Entrypoint"], json!(["/vigil"]), "{cfg}");
    assert_eq!(cfg["Cmd"], json!(["watch"]), "{cfg}");
    assert_eq!(image.config["os"], "linux");
    // Stripped of debug sections for the image, but the same program.
    let image_elf = fs::read(image.rootfs.join("vigil")).expect("read /vigil");
    assert_eq!(dynamic_needs(&image_elf), (None, 0));
    let version = |path: &Path| {
        let out = Command::new(path)
            .arg("--version")
            .output()
            .expect("run --version");
        assert!(out.status.success());
        text(&out.stdout)
    };
    assert_eq!(
        version(&image.rootfs.join("vigil")),
        version(&static_binary())
    );
    assert_eq!(
        cfg["Labels"]["org.opencontainers.image.version"],
        // The first line of Falco's version block: `Falco version: X`.
        version(&static_binary())
            .lines()
            .next()
            .and_then(|l| l.rsplit(' ').next())
            .unwrap()
    );
}

// --- Containers ----------------------------------------------------------------------------

/// A runc bundle over the image's root filesystem; the container is deleted when dropped.
struct Bundle {
    dir: Scratch,
    id: String,
}

impl Bundle {
    /// `runc spec`'s default configuration with the image's root (read-only), patched by
    /// `patch`.
    fn new(name: &str, image: &Image, patch: impl FnOnce(&mut Value)) -> Bundle {
        let dir = Scratch::new(name);
        let out = Command::new("runc")
            .args(["spec", "--bundle"])
            .arg(&dir.0)
            .output()
            .expect("run runc spec");
        assert!(out.status.success(), "runc spec: {}", text(&out.stderr));
        let path = dir.0.join("config.json");
        let mut config: Value =
            serde_json::from_slice(&fs::read(&path).expect("read config.json")).expect("JSON");
        config["root"] = json!({ "path": image.rootfs, "readonly": true });
        config["process"]["terminal"] = json!(false);
        patch(&mut config);
        fs::write(&path, config.to_string()).expect("write config.json");
        let id = format!("vigil-image-test-{}-{name}", std::process::id());
        Bundle { dir, id }
    }

    /// `runc run` in the foreground; killed after [`CONTAINER_WAIT`].
    fn run(&self) -> Output {
        let mut child = Command::new("runc")
            .args(["run", "--bundle"])
            .arg(&self.dir.0)
            .arg(&self.id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run runc");
        let deadline = Instant::now() + CONTAINER_WAIT;
        while child.try_wait().expect("wait for runc").is_none() {
            if Instant::now() >= deadline {
                let _ = Command::new("runc")
                    .args(["kill", &self.id, "KILL"])
                    .status();
                let out = child.wait_with_output().expect("collect runc's output");
                panic!(
                    "container {} still running after {CONTAINER_WAIT:?}; stderr:\n{}",
                    self.id,
                    text(&out.stderr)
                );
            }
            thread::sleep(Duration::from_millis(100));
        }
        child.wait_with_output().expect("collect runc's output")
    }
}

impl Drop for Bundle {
    fn drop(&mut self) {
        let _ = Command::new("runc")
            .args(["delete", "--force", &self.id])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        // With the host's PID namespace, runc 1.1 on cgroup v1 may fail to remove the
        // container's (by then empty) cgroups ("unable to freeze", rmdir EBUSY) and leaves
        // them; remove them, retrying while they are still busy.
        let mut left = Vec::new();
        find_dirs_named(Path::new("/sys/fs/cgroup"), &self.id, 6, &mut left);
        for dir in left {
            let deadline = Instant::now() + Duration::from_secs(20);
            while fs::remove_dir(&dir).is_err() && dir.exists() {
                if Instant::now() >= deadline {
                    eprintln!("{}: cannot remove {}", self.id, dir.display());
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Directories named `name` below `dir`, at most `depth` levels down (deepest first).
fn find_dirs_named(dir: &Path, name: &str, depth: usize, found: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        if depth > 1 {
            find_dirs_named(&path, name, depth - 1, found);
        }
        if entry.file_name() == name {
            found.push(path);
        }
    }
}

/// Sets every capability set of the container process to `caps`.
fn set_capabilities(config: &mut Value, caps: &[&str]) {
    config["process"]["capabilities"] = json!({
        "bounding": caps, "effective": caps, "permitted": caps,
        "inheritable": [], "ambient": [],
    });
}

const RULE: &str = "Image test rules file opened";
const RULES: &str = "\
- rule: Image test rules file opened
  desc: the workload of the image test opened the rules file mounted into the container
  condition: evt.type in (open, openat, openat2) and evt.res = SUCCESS and fd.name = /rules/image-test.yaml
  output: rules file opened (file=%fd.name command=%proc.cmdline uid=%user.uid)
  priority: WARNING
";

/// A directory holding [`RULES`] as `image-test.yaml`, readable by uid 1000.
fn rules_dir(test: &str) -> Scratch {
    let rules = Scratch::new(&format!("{test}-rules"));
    let file = rules.0.join("image-test.yaml");
    fs::write(&file, RULES).expect("write the rules file");
    for (path, mode) in [(&rules.0, 0o755), (&file, 0o644)] {
        fs::set_permissions(path, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .expect("chmod");
    }
    rules
}

/// A bundle running `vigil run VIGIL_ARGS -r /rules/image-test.yaml -- vigil rules validate
/// /rules/image-test.yaml` (the workload opens the mounted rules file) as uid 1000, no
/// capabilities, no new privileges; `patch` adds to the configuration.
fn run_bundle(
    name: &str,
    image: &Image,
    rules: &Scratch,
    vigil_args: &[&str],
    patch: impl FnOnce(&mut Value),
) -> Bundle {
    Bundle::new(name, image, |config| {
        let process = &mut config["process"];
        process["user"] = json!({ "uid": 1000, "gid": 1000 });
        process["noNewPrivileges"] = json!(true);
        let mut args = vec!["/vigil", "run"];
        args.extend_from_slice(vigil_args);
        args.extend_from_slice(&["-r", "/rules/image-test.yaml", "--"]);
        args.extend_from_slice(&["/vigil", "rules", "validate", "/rules/image-test.yaml"]);
        process["args"] = json!(args);
        set_capabilities(config, &[]);
        config["mounts"]
            .as_array_mut()
            .expect("mounts")
            .push(json!({
                "destination": "/rules", "type": "bind", "source": rules.0,
                "options": ["rbind", "ro"]
            }));
        patch(config);
    })
}

/// The image test rule's alert in `text` (JSON lines), checked for the workload's identity.
fn check_alert(text: &str, what: &str) -> Value {
    let alert: Value = text
        .lines()
        .filter(|l| l.starts_with('{'))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|a| a["rule"] == RULE)
        .unwrap_or_else(|| panic!("no `{RULE}` alert in {what}:\n{text}"));
    let fields = &alert["output_fields"];
    assert_eq!(fields["fd.name"], "/rules/image-test.yaml", "{alert}");
    assert_eq!(fields["user.uid"], 1000, "{alert}");
    assert!(
        fields["proc.cmdline"]
            .as_str()
            .is_some_and(|c| c.contains("rules validate")),
        "{alert}"
    );
    alert
}

#[test]
fn vigil_run_traces_a_workload_as_an_unprivileged_user_in_the_image() {
    let _host = host::shared();
    let test = "vigil_run_in_the_image";
    let Some(image) = image_for(test) else {
        return;
    };
    let rules = rules_dir("run");
    let bundle = run_bundle("run", image, &rules, &["--json"], |_| {});
    let out = bundle.run();
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "vigil run in the container failed ({}):\nstdout:\n{}\nstderr:\n{stderr}",
        out.status,
        text(&out.stdout)
    );
    check_alert(&stderr, "vigil run's stderr");
}

/// The name the HTTP output posts to, known only to the test's DNS responder.
const SINK_NAME: &str = "sink.vigil-image.test";
/// The responder's address (port 53: a resolv.conf `nameserver` has no port).
const DNS_ADDR: &str = "127.0.0.77:53";

/// Answers every DNS query for [`SINK_NAME`] over UDP: A → 127.0.0.1, other types → no
/// records; everything else NXDOMAIN. Stops when `stop` is set.
fn dns_responder(stop: Arc<AtomicBool>) -> thread::JoinHandle<usize> {
    let socket = std::net::UdpSocket::bind(DNS_ADDR)
        .unwrap_or_else(|e| panic!("bind the test DNS responder at {DNS_ADDR}: {e}"));
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .expect("set a read timeout");
    let wanted: Vec<u8> = SINK_NAME
        .split('.')
        .flat_map(|label| std::iter::once(label.len() as u8).chain(label.bytes()))
        .chain([0])
        .collect();
    thread::spawn(move || {
        let mut answered = 0;
        let mut buf = [0u8; 512];
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, peer)) = socket.recv_from(&mut buf) else {
                continue;
            };
            let query = &buf[..n];
            // Header (12 bytes), then the question: a name, type and class.
            let Some(name_len) = query.iter().skip(12).position(|&b| b == 0).map(|p| p + 1) else {
                continue;
            };
            let question_end = 12 + name_len + 4;
            if n < question_end {
                continue;
            }
            let name = &query[12..12 + name_len];
            let qtype = u16::from_be_bytes([query[12 + name_len], query[13 + name_len]]);
            let known = name.eq_ignore_ascii_case(&wanted);
            let answer_a = known && qtype == 1;
            let mut reply = Vec::with_capacity(question_end + 16);
            reply.extend_from_slice(&query[..2]);
            // Response, recursion desired + available; rcode 0 or 3 (NXDOMAIN).
            reply.extend_from_slice(&[0x81, if known { 0x80 } else { 0x83 }]);
            reply.extend_from_slice(&[0, 1, 0, u8::from(answer_a), 0, 0, 0, 0]);
            reply.extend_from_slice(&query[12..question_end]);
            if answer_a {
                // Name (pointer to the question's), A, IN, TTL 60, 4 bytes: 127.0.0.1.
                reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 127, 0, 0, 1]);
                answered += 1;
            }
            let _ = socket.send_to(&reply, peer);
        }
        answered
    })
}

/// Receives one HTTP request on loopback and answers 200; the request body, on `rx`.
fn post_receiver() -> (u16, mpsc::Receiver<String>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind loopback");
    let port = listener.local_addr().expect("local address").port();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        let mut reader = BufReader::new(stream);
        let mut length = 0;
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line.trim_end() != "" {
            if let Some((key, value)) = line.trim_end().split_once(':') {
                if key.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            line.clear();
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_ok() {
            let _ = reader
                .into_inner()
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = tx.send(text(&body));
        }
    });
    (port, rx)
}

/// The static glibc resolves names with no NSS module in the image: the HTTP output posts to
/// a host name that only the DNS server of the container's /etc/resolv.conf knows (as a
/// Kubernetes service name is known only to the cluster DNS).
#[test]
fn http_output_resolves_a_host_name_through_dns_in_the_image() {
    let _host = host::shared();
    let test = "http_output_in_the_image";
    let Some(image) = image_for(test) else {
        return;
    };
    let stop = Arc::new(AtomicBool::new(false));
    let responder = dns_responder(Arc::clone(&stop));
    let (port, bodies) = post_receiver();
    let etc = Scratch::new("etc");
    let resolv = etc.0.join("resolv.conf");
    let nameserver = DNS_ADDR.trim_end_matches(":53");
    fs::write(
        &resolv,
        format!("nameserver {nameserver}\noptions attempts:1\n"),
    )
    .expect("write resolv.conf");
    fs::set_permissions(&resolv, std::os::unix::fs::PermissionsExt::from_mode(0o644))
        .expect("chmod resolv.conf");
    let rules = rules_dir("http");
    let url = format!("http_output.url=http://{SINK_NAME}:{port}/");
    let vigil_args = [
        "-o",
        "json_output=true",
        "-o",
        "http_output.enabled=true",
        "-o",
        &url,
    ];
    let bundle = run_bundle("http", image, &rules, &vigil_args, |config| {
        // The host's network namespace: the receiver and the responder listen on its loopback.
        config["linux"]["namespaces"]
            .as_array_mut()
            .expect("namespaces")
            .retain(|ns| ns["type"] != "network");
        config["mounts"]
            .as_array_mut()
            .expect("mounts")
            .push(json!({
                "destination": "/etc/resolv.conf", "type": "bind", "source": resolv,
                "options": ["bind", "ro"]
            }));
    });
    let out = bundle.run();
    stop.store(true, Ordering::Relaxed);
    let answered = responder.join().expect("the DNS responder thread");
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "vigil run in the container failed ({}):\n{stderr}",
        out.status
    );
    let body = bodies
        .recv_timeout(Duration::from_secs(10))
        .unwrap_or_else(|_| {
            panic!("nothing posted to {SINK_NAME} ({answered} A queries answered):\n{stderr}")
        });
    assert!(answered > 0, "the name was resolved through DNS");
    check_alert(&body, "the HTTP body");
}

#[test]
fn vigil_watch_attaches_in_the_image_with_bpf_capabilities() {
    let _host = host::shared();
    let test = "vigil_watch_in_the_image";
    let Some(image) = image_for(test) else {
        return;
    };
    if !Path::new("/sys/kernel/btf/vmlinux").exists() {
        skip(test, "this kernel has no BTF (/sys/kernel/btf/vmlinux)");
        return;
    }
    let bundle = Bundle::new("watch", image, |config| {
        let process = &mut config["process"];
        process["user"] = json!({ "uid": 0, "gid": 0 });
        process["noNewPrivileges"] = json!(true);
        process["args"] = json!(["/vigil", "watch", "--duration", "2", "--stats"]);
        set_capabilities(config, &["CAP_BPF", "CAP_PERFMON", "CAP_SYS_ADMIN"]);
        // The host's processes: its PID namespace (as `hostPID: true`).
        config["linux"]["namespaces"]
            .as_array_mut()
            .expect("namespaces")
            .retain(|ns| ns["type"] != "pid");
        // Of /sys only what the agent reads, read-only: the kernel's BTF (CO-RE) and the
        // possible CPUs (libbpf sizes per-CPU maps from them). No sysfs otherwise, so nothing
        // else there is relied on unnoticed (deploy/README.md lists what is read).
        let mounts = config["mounts"].as_array_mut().expect("mounts");
        mounts.retain(|m| m["destination"] != "/sys" && m["destination"] != "/sys/fs/cgroup");
        for dir in ["/sys/kernel/btf", "/sys/devices/system/cpu"] {
            mounts.push(json!({
                "destination": dir, "type": "bind", "source": dir,
                "options": ["rbind", "ro", "nosuid", "nodev", "noexec"]
            }));
        }
    });
    // Host activity the agent must see while it watches: opens, every 20 ms.
    let stop = Arc::new(AtomicBool::new(false));
    let opener = {
        let stop = Arc::clone(&stop);
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let _ = fs::read("/etc/hostname");
                thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let out = bundle.run();
    stop.store(true, Ordering::Relaxed);
    opener.join().expect("the opener thread");
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "vigil watch in the container failed ({}):\n{stderr}",
        out.status
    );
    let watching = stderr
        .lines()
        .find(|l| l.contains("watching") && l.contains("syscalls"))
        .unwrap_or_else(|| panic!("vigil watch never reported it was watching:\n{stderr}"));
    let count: usize = watching
        .split_whitespace()
        .skip_while(|w| *w != "watching")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no syscall count in {watching:?}"));
    assert!(count > 0, "{watching}");
    // The host's PID namespace: the start snapshot holds the host's processes (in a PID
    // namespace of its own the agent, which leaves itself out, would see none).
    let processes: usize = watching
        .split_once('(')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no process count in {watching:?}"));
    assert!(processes > 1, "{watching}");
    // Events arrived through the rings: the `--stats` line at exit.
    let stats: Value = stderr
        .lines()
        .filter(|l| l.starts_with('{'))
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v.get("events_in").is_some())
        .unwrap_or_else(|| panic!("no --stats line:\n{stderr}"));
    assert!(stats["events_in"].as_u64() > Some(0), "{stats}");
}

// --- The multi-architecture image ----------------------------------------------------------

/// The amd64 and arm64 static binaries (`make test` builds both) become one manifest list
/// (`scripts/build-image-multiarch.sh`, a private buildah storage): its two entries name their
/// platforms, and the arm64 image's `/vigil` is the static aarch64 binary. Root and buildah.
#[test]
fn multiarch_image_lists_amd64_and_arm64() {
    let _host = host::shared();
    const TEST: &str = "multiarch_image_lists_amd64_and_arm64";
    let amd64 = static_binary();
    let arm64 = std::env::var_os("VIGIL_STATIC_BIN_AARCH64").map(PathBuf::from);
    let why = if !is_root() {
        Some("not root (buildah's storage)".to_owned())
    } else if Command::new("buildah").arg("--version").output().is_err() {
        Some("buildah is not installed (make test-deps)".to_owned())
    } else if !amd64.is_file() || std::env::consts::ARCH != "x86_64" {
        Some(format!("no amd64 static binary at {}", amd64.display()))
    } else if !arm64.as_ref().is_some_and(|p| p.is_file()) {
        Some("VIGIL_STATIC_BIN_AARCH64 names no aarch64 static binary (make test)".to_owned())
    } else {
        None
    };
    if let Some(why) = why {
        skip(TEST, &why);
        return;
    }
    let arm64 = arm64.expect("checked above");
    let elf = fs::read(&arm64).expect("read the aarch64 binary");
    // e_machine 183: EM_AARCH64.
    assert_eq!(
        u16::from_le_bytes([elf[0x12], elf[0x13]]),
        183,
        "{} is not an aarch64 executable",
        arm64.display()
    );
    assert_eq!(
        dynamic_needs(&elf),
        (None, 0),
        "{} is not static",
        arm64.display()
    );
    let scratch = Scratch::new("multiarch");
    let storage = scratch.0.join("storage");
    let out = Command::new("sh")
        .arg(workspace().join("scripts/build-image-multiarch.sh"))
        .arg(&amd64)
        .arg(&arm64)
        .arg("vigil-multiarch-test")
        .arg(&storage)
        .output()
        .expect("run scripts/build-image-multiarch.sh");
    assert!(
        out.status.success(),
        "build-image-multiarch.sh failed:\n{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let buildah = |args: &[&str]| {
        let out = Command::new("buildah")
            .arg("--root")
            .arg(storage.join("root"))
            .arg("--runroot")
            .arg(storage.join("run"))
            .args(["--storage-driver", "vfs"])
            .args(args)
            .output()
            .expect("run buildah");
        assert!(
            out.status.success(),
            "buildah {args:?}: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    let version = env!("CARGO_PKG_VERSION");
    let list: Value = serde_json::from_str(&buildah(&[
        "manifest",
        "inspect",
        &format!("vigil-multiarch-test:{version}"),
    ]))
    .expect("the manifest list is JSON");
    let mut platforms: Vec<String> = list["manifests"]
        .as_array()
        .expect("a list of manifests")
        .iter()
        .map(|m| {
            format!(
                "{}/{}",
                m["platform"]["os"].as_str().unwrap_or("?"),
                m["platform"]["architecture"].as_str().unwrap_or("?")
            )
        })
        .collect();
    platforms.sort();
    assert_eq!(platforms, ["linux/amd64", "linux/arm64"], "{list}");
    let config: Value = serde_json::from_str(&buildah(&[
        "inspect",
        "--type",
        "image",
        &format!("localhost/vigil-multiarch-test:{version}-arm64"),
    ]))
    .expect("buildah inspect prints JSON");
    assert_eq!(config["OCIv1"]["architecture"], "arm64", "{config}");
    // The private storage goes with the scratch directory.
}

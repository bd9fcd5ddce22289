//! Container metadata read from container runtimes' on-disk state, for containers whose id the
//! state engine saw in a cgroup path (`container.name`, `container.image.*`, `k8s.*`, mounts,
//! start time).
//!
//! Sources, by the short (12 character) id:
//! - runc state directories — `/run/runc/<id>/state.json` (plain runc), containerd's
//!   `/run/containerd/runc/<namespace>/<id>/state.json` and docker's
//!   `/run/docker/runtime-runc/moby/<id>/state.json`. runc records the OCI annotations as
//!   `key=value` labels (plus `bundle=<dir>`), the creation time and the mounts.
//! - docker's `/var/lib/docker/containers/<id>/config.v2.json` (name, image, labels, created).
//!
//! Names come from annotations the runtimes write: CRI (`io.kubernetes.cri.container-name`,
//! `…image-name`, `…sandbox-name`, `…sandbox-namespace`, `…sandbox-uid`), docker/cri-o labels
//! (`io.kubernetes.container.name`, `io.kubernetes.pod.*`), nerdctl (`nerdctl/name`); a plain
//! runc container without any is named by its id. Nothing readable → no metadata, and every
//! field but `container.id` is `<NA>` (as in Falco when its container engine knows nothing).
//!
//! This is the only place the state engine reads runtime files; it happens when a process of
//! a container the table does not know yet executes a program, never per event. A runtime
//! may write its state after the container's first processes ran (runc re-executes itself
//! inside the cgroup before saving `state.json`), so the first [`EAGER_RETRIES`] misses of an
//! id are retried at its next exec; after that, at most every [`RETRY_NS`] of event time.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;
use serde_json::Value;
use vigil_event::{ContainerInfo, MountInfo};

use crate::container::ContainerTable;
use vigil_procfs::SHORT_ID_LEN;

/// A state file larger than this is not read (runtime state is a few KiB).
const MAX_STATE_BYTES: u64 = 4 << 20;
/// Misses of an id retried at once (at its next exec).
pub const EAGER_RETRIES: u32 = 16;
/// After [`EAGER_RETRIES`] misses, a lookup is retried after this much event time (ns).
pub const RETRY_NS: u64 = 2_000_000_000;
/// At most this many ids are remembered as unknown (then the memory is cleared).
const MAX_UNKNOWN: usize = 4096;

/// Where the runtimes keep their state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeDirs {
    /// runc state roots (each holds `<id>/state.json`) and the runtime name each implies.
    pub runc_roots: Vec<(PathBuf, String)>,
    /// docker's per-container directories (`<id>/config.v2.json`).
    pub docker_containers: PathBuf,
}

impl RuntimeDirs {
    /// The standard locations on this machine.
    pub fn system() -> RuntimeDirs {
        RuntimeDirs::under(Path::new("/"))
    }

    /// The standard locations below `root` (tests use a fake tree).
    pub fn under(root: &Path) -> RuntimeDirs {
        let p = |s: &str| root.join(s);
        RuntimeDirs {
            runc_roots: vec![
                (p("run/runc"), "runc".into()),
                (p("run/containerd/runc/k8s.io"), "containerd".into()),
                (p("run/containerd/runc/default"), "containerd".into()),
                (p("run/docker/runtime-runc/moby"), "docker".into()),
                (p("run/containerd/runc/moby"), "docker".into()),
            ],
            docker_containers: p("var/lib/docker/containers"),
        }
    }
}

/// Looks up a container by its short id; `None` when no runtime knows it.
pub fn lookup(dirs: &RuntimeDirs, short_id: &[u8]) -> Option<ContainerInfo> {
    let short = std::str::from_utf8(short_id).ok()?;
    if short.is_empty() || short.contains('/') || short.starts_with('.') {
        return None;
    }
    for (root, runtime) in &dirs.runc_roots {
        if let Some(full) = find_entry(root, short) {
            if let Some(text) = read_small(&root.join(&full).join("state.json")) {
                if let Some(info) = from_runc_state(&text, &full, runtime) {
                    return Some(info);
                }
            }
        }
    }
    let full = find_entry(&dirs.docker_containers, short)?;
    let text = read_small(&dirs.docker_containers.join(&full).join("config.v2.json"))?;
    from_docker_config(&text, &full)
}

/// The entry of `dir` whose name is `short`, or starts with it when `short` is a full short
/// id (12 characters: a 64-hex id cut down).
fn find_entry(dir: &Path, short: &str) -> Option<String> {
    if dir.join(short).is_dir() {
        return Some(short.to_string());
    }
    if short.len() < SHORT_ID_LEN {
        return None;
    }
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .find(|name| name.len() > short.len() && name.starts_with(short))
}

fn read_small(path: &Path) -> Option<String> {
    let file = fs::File::open(path).ok()?;
    let mut text = String::new();
    file.take(MAX_STATE_BYTES).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Metadata from a runc `state.json`.
fn from_runc_state(text: &str, id: &str, runtime: &str) -> Option<ContainerInfo> {
    let state: Value = serde_json::from_str(text).ok()?;
    let config = state.get("config")?;
    let labels: Vec<(String, String)> = config
        .get("labels")
        .and_then(Value::as_array)
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .filter_map(|kv| kv.split_once('='))
                .filter(|(k, _)| *k != "bundle")
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .unwrap_or_default();
    let mounts = config
        .get("mounts")
        .and_then(Value::as_array)
        .map(|ms| ms.iter().filter_map(runc_mount).collect())
        .unwrap_or_default();
    let id = state.get("id").and_then(Value::as_str).unwrap_or(id);
    let mut info = ContainerInfo {
        id: id.to_string(),
        runtime: runtime.to_string(),
        start_ts: state
            .get("created")
            .and_then(Value::as_str)
            .and_then(parse_rfc3339)
            .unwrap_or(0),
        mounts,
        ..ContainerInfo::default()
    };
    apply_labels(&mut info, labels);
    if info.name.is_empty() {
        info.name = id.to_string();
    }
    Some(info)
}

/// One runc mount: `{source, destination, device, flags}`; read-write when `MS_RDONLY` (1) is
/// not in the flags.
fn runc_mount(m: &Value) -> Option<MountInfo> {
    let flags = m.get("flags").and_then(Value::as_u64).unwrap_or(0);
    Some(MountInfo {
        source: m.get("source")?.as_str()?.to_string(),
        dest: m.get("destination")?.as_str()?.to_string(),
        mode: String::new(),
        rdwr: flags & 1 == 0,
        propagation: String::new(),
    })
}

/// Metadata from docker's `config.v2.json`.
fn from_docker_config(text: &str, id: &str) -> Option<ContainerInfo> {
    let c: Value = serde_json::from_str(text).ok()?;
    let config = c.get("Config");
    let mut labels: Vec<(String, String)> = config
        .and_then(|c| c.get("Labels"))
        .and_then(Value::as_object)
        .map(|o| {
            o.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                .collect()
        })
        .unwrap_or_default();
    labels.sort();
    let mut info = ContainerInfo {
        id: c
            .get("ID")
            .and_then(Value::as_str)
            .unwrap_or(id)
            .to_string(),
        runtime: "docker".into(),
        name: c
            .get("Name")
            .and_then(Value::as_str)
            .map(|n| n.trim_start_matches('/').to_string())
            .unwrap_or_default(),
        start_ts: c
            .get("Created")
            .and_then(Value::as_str)
            .and_then(parse_rfc3339)
            .unwrap_or(0),
        ..ContainerInfo::default()
    };
    if let Some(image) = config.and_then(|c| c.get("Image")).and_then(Value::as_str) {
        set_image(&mut info, image);
    }
    if info.image_digest.is_empty() {
        if let Some(digest) = c.get("Image").and_then(Value::as_str) {
            info.image_digest = digest.to_string();
        }
    }
    apply_labels(&mut info, labels);
    Some(info)
}

/// Fills the name, image and Kubernetes labels from runtime annotations/labels and keeps
/// them all as `container.label.*`. CRI annotations are mapped to the
/// `io.kubernetes.pod.*` labels the `k8s.*` fields read.
fn apply_labels(info: &mut ContainerInfo, mut labels: Vec<(String, String)>) {
    let get = |labels: &[(String, String)], key: &str| {
        labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    };
    if info.name.is_empty() {
        for key in [
            "io.kubernetes.cri.container-name",
            "io.kubernetes.container.name",
            "nerdctl/name",
        ] {
            if let Some(name) = get(&labels, key).filter(|n| !n.is_empty()) {
                info.name = name;
                break;
            }
        }
    }
    if info.image.is_empty() {
        if let Some(image) = get(&labels, "io.kubernetes.cri.image-name") {
            set_image(info, &image);
        }
    }
    for (cri, k8s) in [
        ("io.kubernetes.cri.sandbox-name", "io.kubernetes.pod.name"),
        (
            "io.kubernetes.cri.sandbox-namespace",
            "io.kubernetes.pod.namespace",
        ),
        ("io.kubernetes.cri.sandbox-uid", "io.kubernetes.pod.uid"),
    ] {
        if get(&labels, k8s).is_none() {
            if let Some(v) = get(&labels, cri) {
                labels.push((k8s.to_string(), v));
            }
        }
    }
    info.labels = labels;
}

/// Splits an image reference `[registry/]repo[:tag][@digest]`.
fn set_image(info: &mut ContainerInfo, image: &str) {
    info.image = image.to_string();
    let (name, digest) = image.split_once('@').unwrap_or((image, ""));
    let slash = name.rfind('/').map_or(0, |i| i + 1);
    let (repo, tag) = match name[slash..].rfind(':') {
        Some(i) => (&name[..slash + i], &name[slash + i + 1..]),
        None => (name, ""),
    };
    info.image_repository = repo.to_string();
    info.image_tag = tag.to_string();
    info.image_digest = digest.to_string();
}

/// `2026-11-21T22:28:10.316134435Z` (or with a `±hh:mm` offset) → ns since the epoch.
fn parse_rfc3339(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> { s.get(r)?.parse().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut nanos: i64 = 0;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        let mut scale = 100_000_000i64;
        for c in frac[..digits].bytes().take(9) {
            nanos += i64::from(c - b'0') * scale;
            scale /= 10;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            sign * (oh * 3600 + om * 60)
        }
    };
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset;
    u64::try_from(secs)
        .ok()?
        .checked_mul(1_000_000_000)?
        .checked_add(u64::try_from(nanos).ok()?)
}

/// Fills the container table from runtime state as new container ids appear.
#[derive(Debug)]
pub(crate) struct RuntimeReader {
    dirs: RuntimeDirs,
    /// Short ids no runtime knew: misses so far and the event time of the last attempt.
    unknown: FxHashMap<Box<[u8]>, (u32, u64)>,
}

impl RuntimeReader {
    pub(crate) fn new(dirs: RuntimeDirs) -> Self {
        RuntimeReader {
            dirs,
            unknown: FxHashMap::default(),
        }
    }

    /// Makes sure `table` knows `short_id` if a runtime does (`now`: event time, ns).
    pub(crate) fn resolve(&mut self, short_id: &[u8], now: u64, table: &mut ContainerTable) {
        if short_id.is_empty() || table.get(short_id).is_some() {
            return;
        }
        if let Some(&(misses, last)) = self.unknown.get(short_id) {
            if misses >= EAGER_RETRIES && now.saturating_sub(last) < RETRY_NS {
                return;
            }
        }
        match lookup(&self.dirs, short_id) {
            Some(mut info) => {
                self.unknown.remove(short_id);
                // The table is keyed by the id as seen in the cgroup path.
                if !info.id.as_bytes().starts_with(short_id) {
                    info.id = String::from_utf8_lossy(short_id).into_owned();
                }
                table.insert(info);
            }
            None => {
                if self.unknown.len() >= MAX_UNKNOWN {
                    self.unknown.clear();
                }
                let entry = self.unknown.entry(short_id.into()).or_insert((0, now));
                entry.0 = entry.0.saturating_add(1);
                entry.1 = now;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3ad7b26ded6d8e7b23da7d48fe889434573036c27ae5a74837233de441c3601e";

    struct Tree(PathBuf);
    impl Tree {
        fn new(tag: &str) -> Tree {
            let dir = std::env::temp_dir()
                .join(format!("vigil-state-runtime-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir_all(&dir).unwrap();
            Tree(dir)
        }
        fn write(&self, rel: &str, text: &str) {
            let p = self.0.join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
    }
    impl Drop for Tree {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn runc_state(id: &str, labels: &[&str]) -> String {
        serde_json::json!({
            "id": id,
            "created": "2026-11-21T22:28:10.316134435Z",
            "config": {
                "labels": labels,
                "mounts": [
                    {"source": "proc", "destination": "/proc", "device": "proc", "flags": 14},
                    {"source": "/usr/bin/vigil", "destination": "/vigil", "device": "bind", "flags": 20481},
                ]
            }
        })
        .to_string()
    }

    #[test]
    fn runc_state_with_cri_annotations() {
        let t = Tree::new("cri");
        t.write(
            &format!("run/runc/{ID}/state.json"),
            &runc_state(
                ID,
                &[
                    "io.kubernetes.cri.container-name=web",
                    "io.kubernetes.cri.image-name=docker.io/library/nginx:1.25",
                    "io.kubernetes.cri.sandbox-name=web-7d9f",
                    "io.kubernetes.cri.sandbox-namespace=shop",
                    "bundle=/tmp/b",
                ],
            ),
        );
        let dirs = RuntimeDirs::under(&t.0);
        let info = lookup(&dirs, &ID.as_bytes()[..12]).expect("found by short id");
        assert_eq!(info.id, ID);
        assert_eq!(info.runtime, "runc");
        assert_eq!(info.name, "web");
        assert_eq!(info.image, "docker.io/library/nginx:1.25");
        assert_eq!(info.image_repository, "docker.io/library/nginx");
        assert_eq!(info.image_tag, "1.25");
        assert_eq!(info.start_ts, 1_795_300_090_316_134_435);
        assert_eq!(
            crate::container::label(&info, "io.kubernetes.pod.name"),
            Some("web-7d9f")
        );
        assert_eq!(
            crate::container::label(&info, "io.kubernetes.pod.namespace"),
            Some("shop")
        );
        assert_eq!(crate::container::label(&info, "bundle"), None);
        assert_eq!(info.mounts.len(), 2);
        assert!(info.mounts[0].rdwr);
        assert!(!info.mounts[1].rdwr);
    }

    #[test]
    fn plain_runc_names_and_containerd_roots() {
        let t = Tree::new("plain");
        t.write(
            "run/runc/mybox/state.json",
            &runc_state("mybox", &["bundle=/b"]),
        );
        t.write(
            &format!("run/containerd/runc/k8s.io/{ID}/state.json"),
            &runc_state(ID, &["nerdctl/name=db"]),
        );
        let dirs = RuntimeDirs::under(&t.0);
        let plain = lookup(&dirs, b"mybox").unwrap();
        assert_eq!(
            (plain.name.as_str(), plain.runtime.as_str()),
            ("mybox", "runc")
        );
        assert_eq!(plain.image, "");
        let ctrd = lookup(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert_eq!(
            (ctrd.name.as_str(), ctrd.runtime.as_str()),
            ("db", "containerd")
        );
        // A prefix shorter than a short id never matches a longer name.
        assert!(lookup(&dirs, b"myb").is_none());
        assert!(lookup(&dirs, b"../etc").is_none());
        assert!(lookup(&dirs, b"").is_none());
        assert!(lookup(&dirs, b"\xff\xfe").is_none());
    }

    #[test]
    fn docker_config() {
        let t = Tree::new("docker");
        t.write(
            &format!("var/lib/docker/containers/{ID}/config.v2.json"),
            &serde_json::json!({
                "ID": ID, "Name": "/shop-db",
                "Created": "2026-01-02T03:04:05Z",
                "Image": "sha256:abcd",
                "Config": {"Image": "localhost:5000/db@sha256:ef01", "Labels": {"tier": "db"}}
            })
            .to_string(),
        );
        let info = lookup(&RuntimeDirs::under(&t.0), &ID.as_bytes()[..12]).unwrap();
        assert_eq!(info.name, "shop-db");
        assert_eq!(info.runtime, "docker");
        assert_eq!(info.image_repository, "localhost:5000/db");
        assert_eq!(info.image_tag, "");
        assert_eq!(info.image_digest, "sha256:ef01");
        assert_eq!(crate::container::label(&info, "tier"), Some("db"));
    }

    #[test]
    fn unreadable_or_hostile_state_gives_nothing() {
        let t = Tree::new("bad");
        t.write(&format!("run/runc/{ID}/state.json"), "{not json");
        t.write("run/runc/deep/state.json", &"[".repeat(100_000));
        t.write("run/runc/nocfg/state.json", r#"{"id": "nocfg"}"#);
        let dirs = RuntimeDirs::under(&t.0);
        assert!(lookup(&dirs, &ID.as_bytes()[..12]).is_none());
        assert!(lookup(&dirs, b"deep").is_none());
        assert!(lookup(&dirs, b"nocfg").is_none());
        assert!(lookup(&RuntimeDirs::under(Path::new("/nonexistent")), b"x").is_none());
    }

    #[test]
    fn reader_caches_misses_and_retries_later() {
        let t = Tree::new("reader");
        let dirs = RuntimeDirs::under(&t.0);
        let mut reader = RuntimeReader::new(dirs);
        let mut table = ContainerTable::default();
        let short = &ID.as_bytes()[..12];
        // The first misses are retried at each call (a runtime saves its state late).
        reader.resolve(short, 1_000, &mut table);
        assert!(table.get(short).is_none());
        t.write(&format!("run/runc/{ID}/state.json"), &runc_state(ID, &[]));
        reader.resolve(short, 1_001, &mut table);
        assert_eq!(table.get(short).map(|c| c.name.as_str()), Some(ID));

        // An id no runtime knows: after the eager retries, once per RETRY_NS.
        const OTHER: &[u8] = b"0123456789ab";
        for i in 0..u64::from(EAGER_RETRIES) {
            reader.resolve(OTHER, 2_000 + i, &mut table);
        }
        assert_eq!(reader.unknown.get(OTHER).map(|e| e.0), Some(EAGER_RETRIES));
        reader.resolve(OTHER, 3_000, &mut table);
        assert_eq!(
            reader.unknown.get(OTHER).map(|e| e.0),
            Some(EAGER_RETRIES),
            "skipped"
        );
        reader.resolve(OTHER, 2_000 + 15 + RETRY_NS, &mut table);
        assert_eq!(
            reader.unknown.get(OTHER).map(|e| e.0),
            Some(EAGER_RETRIES + 1),
            "retried"
        );
    }

    #[test]
    fn state_reads_runtime_metadata_when_a_container_execs() {
        use crate::testutil::{apply, ev, f, field, snapshot};
        use crate::{State, StateConfig};
        const NEW: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
        let t = Tree::new("state");
        t.write(
            &format!("run/runc/{NEW}/state.json"),
            &runc_state(
                NEW,
                &[
                    "io.kubernetes.cri.container-name=job",
                    "io.kubernetes.cri.sandbox-namespace=batch",
                ],
            ),
        );
        let mut state = State::new(StateConfig {
            container_runtime: Some(RuntimeDirs::under(&t.0)),
            ..StateConfig::default()
        });
        state.load_snapshot(&snapshot());
        let exec = apply(
            &mut state,
            ev(300, "execve")
                .bytes("filename", "/bin/cat")
                .list("args", &["/etc/shadow"])
                .bytes("comm", "cat")
                .bytes("cgroups", format!("0::/{NEW}"))
                .build(),
        );
        assert_eq!(f(&state, &exec, "container.id"), &NEW[..12]);
        assert_eq!(f(&state, &exec, "container.full_id"), NEW);
        assert_eq!(f(&state, &exec, "container.name"), "job");
        assert_eq!(f(&state, &exec, "container.type"), "runc");
        assert_eq!(f(&state, &exec, "k8s.ns.name"), "batch");
        assert_eq!(field(&state, &exec, "container.image"), None);
        // Without the option nothing is read: the id only.
        let mut plain = State::new(StateConfig::default());
        plain.load_snapshot(&snapshot());
        let exec = apply(
            &mut plain,
            ev(300, "execve")
                .bytes("filename", "/bin/cat")
                .bytes("cgroups", format!("0::/{NEW}"))
                .build(),
        );
        assert_eq!(f(&plain, &exec, "container.id"), &NEW[..12]);
        assert_eq!(field(&plain, &exec, "container.name"), None);
    }

    #[test]
    fn timestamps() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("1970-01-01T01:00:00+01:00"), Some(0));
        assert_eq!(
            parse_rfc3339("2000-03-01T00:00:00.5Z"),
            Some(951_868_800_500_000_000)
        );
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "1969-12-31T23:59:59Z",
            "2026-01-01 00:00:00Z",
            "2026-01-01T00:00:00",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }
}

//! Container metadata from the runtimes' files on disk, by the short (12-character) id the
//! state engine found in a cgroup path: `container.name`, `container.image.*`, labels, mounts,
//! the start time and the Kubernetes pod (`k8s.*`). Nothing readable → no metadata, and every
//! field but `container.id` is `<NA>` (as in Falco when its container engine knows nothing).
//!
//! What is read, per runtime:
//! - **runc** (under every runtime): `state.json` in `/run/runc/<id>/`, containerd's
//!   `/run/containerd/runc/<namespace>/<id>/` and docker's `<exec-root>/runtime-runc/moby/<id>/`:
//!   the OCI annotations as `key=value` labels (plus `bundle=<dir>`), the creation time, the
//!   mounts. Names come from the annotations the runtimes write: CRI
//!   (`io.kubernetes.cri.container-name`, `…image-name`, `…sandbox-name`, `…sandbox-namespace`,
//!   `…sandbox-uid`), docker/CRI-O labels (`io.kubernetes.container.name`,
//!   `io.kubernetes.pod.*`), nerdctl (`nerdctl/name`); a plain runc container is named by its id.
//! - **Docker**: its own record (`<data-root>/containers/<id>/config.v2.json`,
//!   `hostconfig.json`, `image/<driver>/repositories.json`) wins over its runc state, which has
//!   no name or image. Roots: `/var/lib/docker`, `--docker-data-root`, and those of every
//!   root-owned `dockerd` in `/proc` (command line, else `daemon.json`), looked for again at
//!   most every [`DISCOVER_NS`] when a lookup misses, so a daemon restarted elsewhere is followed.
//! - **containerd (CRI)**: the CRI annotations of runc's state; the creation time from the CRI
//!   plugin's `status` file; labels from `<root>/io.containerd.metadata.v1.bolt/meta.db`, where
//!   the plugin keeps each container's and pod sandbox's CRI metadata (a protobuf `Any` holding
//!   JSON: `Config.labels`, what `crictl inspect`/`inspectp` report).
//! - **Podman**: runc's state (`io.container.manager=libpod`), containers/storage's
//!   `containers.json` (name, image) and podman 4's `<graphroot>/libpod/bolt_state.db`
//!   (`ctr/<id>/config`: labels). Not read: podman 5's SQLite database.
//! - **CRI-O**: no database: it writes a container's CRI labels into its OCI annotations
//!   (`io.kubernetes.cri-o.Labels`, JSON; its infra container's are the pod's) and names the
//!   sandbox (`io.kubernetes.cri-o.SandboxID`). Unit-tested only: CRI-O is not installed here.
//!
//! As in Falco, a CRI container carries `io.kubernetes.sandbox.id` ([`SANDBOX_ID_LABEL`]); its
//! sandbox is looked up too (once per pod, one level) and `k8s.pod.label[...]` reads the
//! sandbox's labels. Falco asks the CRI API over the runtime's socket instead; reading the
//! database (`bolt.rs`: `pread` of the pages a lookup walks, every offset checked, no lock)
//! needs no socket (which would let the agent start containers), no gRPC client, and never
//! blocks the runtime. A missing database degrades to no labels; one that does not answer
//! (a torn read, a restart rewriting it) leaves the entry incomplete, asked again later.
//!
//! When: [`RuntimeReader::resolve`], synchronously when a process of a container the table
//! lacks executes a program (live only), so the entrypoint's exec already carries the names;
//! never per event. A runtime may write its state after the container's first processes ran
//! (runc re-executes itself inside the cgroup before saving `state.json`), so the first
//! [`EAGER_RETRIES`] misses of an id are retried at its next exec, then at most every
//! [`EAGER_GAP_NS`] until [`EAGER_WINDOW_NS`] after its first miss (a busy host may run many
//! execs in a container before its runtime writes the state: a count alone would be used up),
//! then at most every [`RETRY_NS`] of event time; lookups, misses and their time are counted ([`LookupStats`],
//! exported as `vigil_container_lookup_*`). At start, [`add_snapshot_containers`] puts the
//! running containers (and their sandboxes) into the start snapshot, so a capture carries them
//! and its replay names them as the live agent did. **Limitation:** containers started after
//! the capture began are not recorded (the replay has `container.id` only for them).

use std::fs;
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rustc_hash::FxHashMap;
use serde_json::Value;
use vigil_event::{ContainerInfo, MountInfo};

use vigil_procfs::SHORT_ID_LEN;

use crate::table::{label, ContainerTable};

/// A state file larger than this is not read (runtime state is a few KiB).
const MAX_STATE_BYTES: u64 = 4 << 20;
/// Misses of an id retried at once (at its next exec).
pub const EAGER_RETRIES: u32 = 16;
/// After [`EAGER_RETRIES`] misses and until [`EAGER_WINDOW_NS`] after the first, a lookup is
/// retried after this much event time (ns): at most 100 more lookups of one id.
pub const EAGER_GAP_NS: u64 = 50_000_000;
/// How long after an id's first miss its lookups stay eager (ns).
pub const EAGER_WINDOW_NS: u64 = 5_000_000_000;
/// After the eager window, a lookup is retried after this much event time (ns).
pub const RETRY_NS: u64 = 2_000_000_000;
/// At most this many ids are remembered as unknown (then the memory is cleared).
const MAX_UNKNOWN: usize = 4096;
/// Running docker daemons are looked for again at most this often (event time, ns), and only
/// when a lookup missed.
pub const DISCOVER_NS: u64 = 1_000_000_000;
/// At most this many docker daemons are followed (a host runs one, rarely a few).
const MAX_DAEMONS: usize = 8;
/// A command line or `daemon.json` larger than this is not read.
const MAX_CMDLINE_BYTES: u64 = 64 << 10;

/// Where the runtimes keep their state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeDirs {
    /// runc state roots (each holds `<id>/state.json`) and the runtime name each implies.
    pub runc_roots: Vec<(PathBuf, String)>,
    /// docker data roots (`--data-root`): each holds `containers/<id>/config.v2.json` and
    /// `hostconfig.json`, and `image/<driver>/repositories.json`.
    pub docker_roots: Vec<PathBuf>,
    /// containers/storage graph roots (podman's, `graphroot` of `storage.conf`): each holds
    /// `<driver>-containers/containers.json` with every container's names and image.
    pub podman_roots: Vec<PathBuf>,
    /// containerd roots (`root` of its config): the CRI plugin keeps each container's
    /// creation time in `io.containerd.grpc.v1.cri/containers/<id>/status`.
    pub containerd_roots: Vec<PathBuf>,
    /// Live: the `/proc` in which running `dockerd` processes are looked for, whose data and
    /// exec roots (`--data-root`, `--exec-root`, `-g`, or `data-root`/`exec-root` of their
    /// `daemon.json`) are then read too. `None`: only the directories above.
    pub discover: Option<PathBuf>,
    /// What the paths a daemon names are relative to (`/` on the host).
    pub host_root: PathBuf,
}

impl RuntimeDirs {
    /// The standard locations on this machine, plus those of the docker daemons running.
    pub fn system() -> RuntimeDirs {
        RuntimeDirs {
            discover: Some(PathBuf::from("/proc")),
            ..RuntimeDirs::under(Path::new("/"))
        }
    }

    /// The standard locations below `root` (tests use a fake tree); no discovery.
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
            docker_roots: vec![p("var/lib/docker")],
            podman_roots: vec![p("var/lib/containers/storage")],
            containerd_roots: vec![p("var/lib/containerd")],
            discover: None,
            host_root: root.to_path_buf(),
        }
    }

    /// Every directory a lookup reads below these roots, with the runtime each serves (the
    /// runtime name of a runc root; `docker`, `podman`, `containerd` for the others): what a
    /// deployment must make visible to the agent at the same paths (deploy/README.md).
    /// Daemons found by discovery add theirs at run time.
    pub fn read_dirs(&self) -> Vec<(PathBuf, String)> {
        let mut dirs: Vec<(PathBuf, String)> = self.runc_roots.clone();
        for root in &self.docker_roots {
            dirs.push((docker_containers(root), "docker".into()));
            dirs.push((docker_images(root), "docker".into()));
        }
        for root in &self.podman_roots {
            for driver in STORAGE_DRIVERS {
                dirs.push((storage_containers(root, driver), "podman".into()));
            }
            if let Some(dir) = podman_state_db(root).parent() {
                dirs.push((dir.to_path_buf(), "podman".into()));
            }
        }
        for root in &self.containerd_roots {
            dirs.push((cri_containers(root), "containerd".into()));
            if let Some(dir) = containerd_meta_db(root).parent() {
                dirs.push((dir.to_path_buf(), "containerd".into()));
            }
        }
        dirs
    }

    /// Adds a docker daemon's data root and exec root (paths as the daemon names them) when
    /// they are not there yet.
    fn add_docker(&mut self, data_root: &str, exec_root: &str) {
        let data = host_path(&self.host_root, data_root);
        if !self.docker_roots.contains(&data) {
            self.docker_roots.push(data);
        }
        let runc = (
            host_path(&self.host_root, exec_root).join("runtime-runc/moby"),
            "docker".to_string(),
        );
        if !self.runc_roots.contains(&runc) {
            self.runc_roots.push(runc);
        }
    }
}

/// containers/storage's drivers whose `<driver>-containers/containers.json` is read.
const STORAGE_DRIVERS: [&str; 4] = ["overlay", "vfs", "btrfs", "zfs"];

/// docker's per-container directories (`<id>/config.v2.json`, `<id>/hostconfig.json`) in a
/// data root.
fn docker_containers(data_root: &Path) -> PathBuf {
    data_root.join("containers")
}

/// docker's image store of a data root (`<driver>/repositories.json`).
fn docker_images(data_root: &Path) -> PathBuf {
    data_root.join("image")
}

/// containers/storage's container list directory of `driver` in a graph root.
fn storage_containers(graph_root: &Path, driver: &str) -> PathBuf {
    graph_root.join(format!("{driver}-containers"))
}

/// The CRI plugin's per-container directories (`<id>/status`) in a containerd root.
fn cri_containers(containerd_root: &Path) -> PathBuf {
    containerd_root.join("io.containerd.grpc.v1.cri/containers")
}

/// `path` (absolute, as a daemon names it) below `root`.
fn host_path(root: &Path, path: &str) -> PathBuf {
    root.join(path.trim_start_matches('/'))
}

/// Looks up a container by its short id; `None` when no runtime knows it.
pub fn lookup(dirs: &RuntimeDirs, short_id: &[u8]) -> Option<ContainerInfo> {
    lookup_any(dirs, short_id).map(|(info, _)| info)
}

/// As [`lookup`], and whether the answer is complete: `false` when only a docker container's
/// runc state was found (its name and image are in docker's data root, not found).
fn lookup_any(dirs: &RuntimeDirs, short_id: &[u8]) -> Option<(ContainerInfo, bool)> {
    let short = std::str::from_utf8(short_id).ok()?;
    if short.is_empty() || short.contains('/') || short.starts_with('.') {
        return None;
    }
    // Docker first: its runc state (`runtime-runc/moby`) carries no name, image or labels.
    for root in &dirs.docker_roots {
        let containers = docker_containers(root);
        if let Some(full) = find_entry(&containers, short) {
            let dir = containers.join(&full);
            if let Some(text) = read_small(&dir.join("config.v2.json")) {
                let host = read_small(&dir.join("hostconfig.json"));
                if let Some(info) = from_docker_config(root, &text, host.as_deref(), &full) {
                    return Some((info, true));
                }
            }
        }
    }
    for (root, runtime) in &dirs.runc_roots {
        if let Some(full) = find_entry(root, short) {
            if let Some(text) = read_small(&root.join(&full).join("state.json")) {
                if let Some(mut info) = from_runc_state(&text, &full, runtime) {
                    let mut complete = runtime != "docker";
                    if label(&info, "io.container.manager") == Some("libpod") {
                        complete &= add_podman(dirs, &mut info);
                        keep_user_mounts(&mut info, &["/var/lib/containers/", "/run/containers/"]);
                    } else if label(&info, "io.kubernetes.cri.container-type").is_some() {
                        // containerd's namespace is the runc root's last component.
                        let namespace = root.file_name().and_then(|n| n.to_str()).unwrap_or("");
                        complete &= add_cri(dirs, &mut info, &full, namespace);
                        keep_user_mounts(&mut info, &["/var/lib/containerd/", "/run/containerd/"]);
                    } else if label(&info, CRIO_TYPE).is_some() {
                        add_crio(&mut info);
                    }
                    return Some((info, complete));
                }
            }
        }
    }
    // podman's `runc init` runs in the container's cgroup before runc saved its state: the
    // name and image are already in containers/storage (the rest, at the next exec).
    let entry = podman_storage_entry(dirs, short)?;
    let mut info = ContainerInfo {
        id: entry.id,
        runtime: "podman".into(),
        name: entry.name,
        ..ContainerInfo::default()
    };
    if !entry.image.is_empty() {
        set_image(&mut info, &entry.image);
    }
    Some((info, false))
}

/// A CRI container of containerd: the creation time the CRI reports (`crictl inspect`'s
/// `createdAt`) from the CRI plugin's status file, and the CRI labels (`crictl inspect`'s
/// `status.labels`; of a pod sandbox, the pod's labels: `crictl inspectp`'s) from the
/// metadata containerd keeps in its database. A container also gets Falco's
/// `io.kubernetes.sandbox.id` label: its pod's sandbox, whose labels `k8s.pod.label*` read.
/// `false` when the database exists but did not answer (read again later).
fn add_cri(dirs: &RuntimeDirs, info: &mut ContainerInfo, full_id: &str, namespace: &str) -> bool {
    for root in &dirs.containerd_roots {
        let path = cri_containers(root).join(full_id).join("status");
        let Some(status) = read_small(&path).and_then(|t| serde_json::from_str::<Value>(&t).ok())
        else {
            continue;
        };
        if let Some(ts) = status.get("CreatedAt").and_then(Value::as_u64) {
            info.start_ts = ts;
            break;
        }
    }
    let sandbox = label(info, "io.kubernetes.cri.container-type") == Some("sandbox");
    if !sandbox {
        if let Some(id) = label(info, "io.kubernetes.cri.sandbox-id") {
            let id = id.to_string();
            info.labels.push((SANDBOX_ID_LABEL.into(), id));
        }
    }
    let extension = if sandbox {
        "io.cri-containerd.sandbox.metadata"
    } else {
        "io.cri-containerd.container.metadata"
    };
    let mut answered = true;
    for root in &dirs.containerd_roots {
        let path = containerd_meta_db(root);
        if !path.exists() {
            continue;
        }
        match cri_labels(&path, namespace, full_id, extension) {
            Some(labels) => {
                prepend_labels(info, labels);
                return true;
            }
            None => answered = false,
        }
    }
    answered
}

/// CRI-O's annotation saying `container` or `sandbox` (its infra container).
const CRIO_TYPE: &str = "io.kubernetes.cri-o.ContainerType";

/// A CRI-O container: CRI-O writes the CRI labels into the OCI annotations
/// (`io.kubernetes.cri-o.Labels`, JSON; the infra container's are the pod's) and names the
/// sandbox (`io.kubernetes.cri-o.SandboxID`), so no database is needed. Not tested against
/// a real CRI-O (not installed here): the annotation names are CRI-O's documented ones.
fn add_crio(info: &mut ContainerInfo) {
    let labels = label(info, "io.kubernetes.cri-o.Labels")
        .and_then(|json| serde_json::from_str::<Value>(json).ok())
        .map(|v| string_map(Some(&v)))
        .unwrap_or_default();
    if label(info, CRIO_TYPE) == Some("container") {
        if let Some(id) = label(info, "io.kubernetes.cri-o.SandboxID") {
            let id = id.to_string();
            info.labels.push((SANDBOX_ID_LABEL.into(), id));
        }
    }
    prepend_labels(info, labels);
}

/// Falco's label naming a CRI container's pod sandbox (`k8s.pod.sandbox_id`).
pub const SANDBOX_ID_LABEL: &str = "io.kubernetes.sandbox.id";
/// At most this many labels are read per container (a label map is user input).
const MAX_LABELS: usize = 256;

/// containerd's metadata database (bbolt) in a containerd root.
fn containerd_meta_db(containerd_root: &Path) -> PathBuf {
    containerd_root.join("io.containerd.metadata.v1.bolt/meta.db")
}

/// podman 4's state database (bbolt) in a containers/storage graph root (the default
/// `static_dir` of `containers.conf`; podman 5 keeps a SQLite `db.sql` there, not read).
fn podman_state_db(graph_root: &Path) -> PathBuf {
    graph_root.join("libpod/bolt_state.db")
}

/// The CRI labels of container `id` in containerd's database: the `Config.labels` of the
/// CRI plugin's metadata `extension` (a protobuf `Any` holding JSON) in
/// `v1/<namespace>/containers/<id>/extensions`. `None` when not found.
fn cri_labels(
    db: &Path,
    namespace: &str,
    id: &str,
    extension: &str,
) -> Option<Vec<(String, String)>> {
    let db = crate::bolt::Db::open(db)?;
    let ext = db.bucket_at(&[
        b"v1",
        namespace.as_bytes(),
        b"containers",
        id.as_bytes(),
        b"extensions",
    ])?;
    let any = db.get(&ext, extension.as_bytes())?;
    let json = any_value(&any)?;
    let meta: Value = serde_json::from_slice(json).ok()?;
    let labels = meta.get("Metadata")?.get("Config")?.get("labels");
    Some(string_map(labels))
}

/// The `value` (field 2) of a protobuf `google.protobuf.Any`.
fn any_value(bytes: &[u8]) -> Option<&[u8]> {
    let mut at = 0;
    while at < bytes.len() {
        let (key, n) = varint(&bytes[at..])?;
        at += n;
        match key & 7 {
            0 => at += varint(&bytes[at..])?.1,
            2 => {
                let (len, n) = varint(&bytes[at..])?;
                let start = at + n;
                let end = start.checked_add(usize::try_from(len).ok()?)?;
                let field = bytes.get(start..end)?;
                if key >> 3 == 2 {
                    return Some(field);
                }
                at = end;
            }
            _ => return None,
        }
    }
    None
}

fn varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// A JSON object of strings as sorted pairs (other values left out), at most [`MAX_LABELS`].
fn string_map(map: Option<&Value>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = map
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .take(MAX_LABELS)
        .collect();
    out.sort();
    out
}

/// Puts a runtime's labels before the annotations already kept (a label and an
/// annotation of the same name: `container.label` gives the label).
fn prepend_labels(info: &mut ContainerInfo, mut labels: Vec<(String, String)>) {
    labels.append(&mut info.labels);
    info.labels = labels;
}

/// The labels of podman container `id` (full id) in podman's database: `labels` of the
/// JSON `config` in `ctr/<id>`, what `podman inspect` reports as `Config.Labels` (the
/// image's labels included). `None` when not found.
fn podman_labels(db: &Path, id: &str) -> Option<Vec<(String, String)>> {
    let db = crate::bolt::Db::open(db)?;
    let ctr = db.bucket_at(&[b"ctr", id.as_bytes()])?;
    let config: Value = serde_json::from_slice(&db.get(&ctr, b"config")?).ok()?;
    Some(string_map(config.get("labels")))
}

/// The mounts a user asked for, as the runtime reports them (`crictl inspect`'s
/// `status.mounts`, `podman inspect`'s `Mounts`): bind mounts whose source is not the
/// runtime's own state (`/etc/hosts`, `/etc/resolv.conf`, `/dev/shm` … come from there), and
/// no kernel filesystem (`proc`, `sysfs`, `tmpfs`, …) the runtime mounts in every container.
fn keep_user_mounts(info: &mut ContainerInfo, runtime_dirs: &[&str]) {
    info.mounts.retain(|m| {
        m.source.starts_with('/') && !runtime_dirs.iter().any(|d| m.source.starts_with(d))
    });
}

/// Fills a podman container's name and image from containers/storage's `containers.json`
/// (its runc state carries neither), privileged and creation time from podman's
/// annotations, labels from podman's database. `false` when the database exists but did
/// not answer (read again later).
fn add_podman(dirs: &RuntimeDirs, info: &mut ContainerInfo) -> bool {
    info.runtime = "podman".into();
    let annotation = |info: &ContainerInfo, k: &str| label(info, k).map(str::to_string);
    if annotation(info, "io.podman.annotations.privileged")
        .is_some_and(|v| v.eq_ignore_ascii_case("true"))
    {
        info.privileged = true;
    }
    if let Some(ts) = annotation(info, "io.kubernetes.cri-o.Created")
        .as_deref()
        .and_then(parse_rfc3339)
    {
        info.start_ts = ts;
    }
    if let Some(entry) = podman_storage_entry(dirs, &info.id.clone()) {
        info.name = entry.name;
        if !entry.image.is_empty() {
            set_image(info, &entry.image);
        }
    }
    let mut answered = true;
    for root in &dirs.podman_roots {
        let path = podman_state_db(root);
        if !path.exists() {
            continue;
        }
        match podman_labels(&path, &info.id) {
            Some(labels) => {
                prepend_labels(info, labels);
                return true;
            }
            None => answered = false,
        }
    }
    answered
}

/// A container of containers/storage (`containers.json`): its full id, first name and image
/// name (empty when not recorded).
struct StorageEntry {
    id: String,
    name: String,
    image: String,
}

/// The containers/storage entry whose id is `id` or starts with it (a short id).
fn podman_storage_entry(dirs: &RuntimeDirs, id: &str) -> Option<StorageEntry> {
    if id.len() < SHORT_ID_LEN {
        return None;
    }
    for root in &dirs.podman_roots {
        for driver in STORAGE_DRIVERS {
            let path = storage_containers(root, driver).join("containers.json");
            let Some(text) = read_small(&path) else {
                continue;
            };
            let Ok(Value::Array(list)) = serde_json::from_str::<Value>(&text) else {
                continue;
            };
            let Some((full, entry)) = list.iter().find_map(|c| {
                let full = c.get("id").and_then(Value::as_str)?;
                full.starts_with(id).then_some((full, c))
            }) else {
                continue;
            };
            let name = entry
                .get("names")
                .and_then(Value::as_array)
                .and_then(|n| n.first())
                .and_then(Value::as_str)?;
            // `metadata` is a JSON document in a string: {"image-name": …, "name": …}.
            let image = entry
                .get("metadata")
                .and_then(Value::as_str)
                .and_then(|m| serde_json::from_str::<Value>(m).ok())
                .and_then(|m| Some(m.get("image-name")?.as_str()?.to_string()))
                .unwrap_or_default();
            return Some(StorageEntry {
                id: full.to_string(),
                name: name.to_string(),
                image,
            });
        }
    }
    None
}

/// The data and exec roots of the docker daemons running (processes named `dockerd` owned by
/// root: another user's process of that name must not point the agent at its own files).
pub fn discover_docker(proc_root: &Path) -> Vec<(String, String)> {
    discover_docker_of(proc_root, 0)
}

/// As [`discover_docker`], for daemons whose `/proc` entry `owner` owns.
fn discover_docker_of(proc_root: &Path, owner: u32) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let Ok(entries) = fs::read_dir(proc_root) else {
        return found;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        let dir = proc_root.join(pid);
        match fs::read(dir.join("comm")) {
            Ok(comm) if comm.strip_suffix(b"\n").unwrap_or(&comm) == b"dockerd" => {}
            _ => continue,
        }
        if !fs::metadata(&dir).is_ok_and(|m| m.uid() == owner) {
            continue;
        }
        let Some(cmdline) = read_bytes(&dir.join("cmdline"), MAX_CMDLINE_BYTES) else {
            continue;
        };
        let args: Vec<String> = cmdline
            .split(|&b| b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let flags = DockerdFlags::parse(&args);
        // daemon.json, read through the daemon's own root (it may run in a container).
        let config_path = flags
            .config_file
            .clone()
            .unwrap_or_else(|| "/etc/docker/daemon.json".to_string());
        let config = read_bytes(
            &host_path(&dir.join("root"), &config_path),
            MAX_CMDLINE_BYTES,
        )
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        let from_config = |keys: &[&str]| {
            keys.iter().find_map(|k| {
                config
                    .as_ref()
                    .and_then(|c| c.get(*k))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
        };
        let data = flags
            .data_root
            .or_else(|| from_config(&["data-root", "graph"]))
            .unwrap_or_else(|| "/var/lib/docker".to_string());
        let exec = flags
            .exec_root
            .or_else(|| from_config(&["exec-root"]))
            .unwrap_or_else(|| "/var/run/docker".to_string());
        if !data.starts_with('/') || !exec.starts_with('/') {
            continue;
        }
        let pair = (data, exec);
        if !found.contains(&pair) {
            found.push(pair);
        }
        if found.len() >= MAX_DAEMONS {
            break;
        }
    }
    found
}

/// The flags of a `dockerd` command line that say where its state is.
#[derive(Debug, Default, PartialEq, Eq)]
struct DockerdFlags {
    data_root: Option<String>,
    exec_root: Option<String>,
    config_file: Option<String>,
}

impl DockerdFlags {
    fn parse(args: &[String]) -> DockerdFlags {
        let mut flags = DockerdFlags::default();
        let mut i = 1;
        while i < args.len() {
            let arg = args[i].as_str();
            i += 1;
            let (name, inline) = match arg.split_once('=') {
                Some((n, v)) if n.starts_with('-') => (n, Some(v.to_string())),
                _ => (arg, None),
            };
            let slot = match name {
                "--data-root" | "-g" | "--graph" => &mut flags.data_root,
                "--exec-root" => &mut flags.exec_root,
                "--config-file" => &mut flags.config_file,
                _ => continue,
            };
            let value = match inline {
                Some(v) => Some(v),
                None => {
                    let v = args.get(i).cloned();
                    i += 1;
                    v
                }
            };
            if let Some(v) = value.filter(|v| !v.is_empty()) {
                *slot = Some(v);
            }
        }
        flags
    }
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

fn read_bytes(path: &Path, max: u64) -> Option<Vec<u8>> {
    let file = fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(max).read_to_end(&mut bytes).ok()?;
    Some(bytes)
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
        privileged: runc_privileged(config),
        mounts,
        ..ContainerInfo::default()
    };
    apply_labels(&mut info, labels);
    if info.name.is_empty() {
        info.name = id.to_string();
    }
    Some(info)
}

/// What a privileged container looks like in runc's configuration when the runtime records no
/// flag (CRI, podman, plain runc): no masked paths and `CAP_SYS_ADMIN` in the bounding set
/// (docker's `--privileged`, the CRI's `privileged: true` and podman's all clear
/// `maskedPaths` and grant every capability; a default container masks `/proc/kcore` & co).
fn runc_privileged(config: &Value) -> bool {
    let masked = config
        .get("mask_paths")
        .and_then(Value::as_array)
        .is_some_and(|m| !m.is_empty());
    let sys_admin = config
        .get("capabilities")
        .and_then(|c| c.get("Bounding"))
        .and_then(Value::as_array)
        .is_some_and(|b| b.iter().any(|c| c.as_str() == Some("CAP_SYS_ADMIN")));
    !masked && sys_admin
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
        propagation: runc_propagation(m),
    })
}

/// `rprivate`, `slave`, … from runc's `propagation_flags` (`MS_PRIVATE`, `MS_SLAVE`,
/// `MS_SHARED`, with `MS_REC`), as `docker inspect`/`podman inspect` name them.
fn runc_propagation(m: &Value) -> String {
    const MS_REC: u64 = 1 << 14;
    let flags: u64 = m
        .get("propagation_flags")
        .and_then(Value::as_array)
        .map_or(0, |f| {
            f.iter().filter_map(Value::as_u64).fold(0, |a, b| a | b)
        });
    let kind = if flags & (1 << 18) != 0 {
        "private"
    } else if flags & (1 << 19) != 0 {
        "slave"
    } else if flags & (1 << 20) != 0 {
        "shared"
    } else {
        return String::new();
    };
    format!("{}{kind}", if flags & MS_REC != 0 { "r" } else { "" })
}

/// Metadata from docker's `config.v2.json` (name, image, labels, creation time, mounts) and
/// `hostconfig.json` (privileged) of a container of the data root `root`; the image digest
/// from the image store's `repositories.json` (as `docker inspect`'s `RepoDigests`: empty for
/// an image that was never pushed or pulled by digest).
fn from_docker_config(
    root: &Path,
    text: &str,
    hostconfig: Option<&str>,
    id: &str,
) -> Option<ContainerInfo> {
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
    let mounts = c
        .get("MountPoints")
        .and_then(Value::as_object)
        .map(|o| o.values().filter_map(docker_mount).collect())
        .unwrap_or_default();
    let privileged = hostconfig
        .and_then(|h| serde_json::from_str::<Value>(h).ok())
        .and_then(|h| h.get("Privileged").and_then(Value::as_bool))
        .unwrap_or(false);
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
        privileged,
        mounts,
        ..ContainerInfo::default()
    };
    if let Some(image) = config.and_then(|c| c.get("Image")).and_then(Value::as_str) {
        set_image(&mut info, image);
    }
    if info.image_digest.is_empty() {
        let image_id = c.get("Image").and_then(Value::as_str).unwrap_or("");
        let driver = c.get("Driver").and_then(Value::as_str).unwrap_or("");
        if let Some(digest) = repo_digest(root, driver, &info.image_repository, image_id) {
            info.image_digest = digest;
        }
    }
    apply_labels(&mut info, labels);
    Some(info)
}

/// One of docker's `MountPoints`: `{Source, Destination, RW, Relabel (the mode), Propagation}`.
fn docker_mount(m: &Value) -> Option<MountInfo> {
    let s = |k: &str| m.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Some(MountInfo {
        source: s("Source"),
        dest: m.get("Destination")?.as_str()?.to_string(),
        mode: s("Relabel"),
        rdwr: m.get("RW").and_then(Value::as_bool).unwrap_or(false),
        propagation: s("Propagation"),
    })
}

/// The digest docker recorded for image `image_id` of `repository`
/// (`image/<driver>/repositories.json`: `{"Repositories": {repo: {"repo@sha256:…": id}}}`).
fn repo_digest(root: &Path, driver: &str, repository: &str, image_id: &str) -> Option<String> {
    if driver.is_empty()
        || driver.contains('/')
        || driver.starts_with('.')
        || repository.is_empty()
        || image_id.is_empty()
    {
        return None;
    }
    let text = read_small(&docker_images(root).join(driver).join("repositories.json"))?;
    let repos: Value = serde_json::from_str(&text).ok()?;
    let refs = repos.get("Repositories")?.get(repository)?.as_object()?;
    refs.iter()
        .filter(|(_, id)| id.as_str() == Some(image_id))
        .find_map(|(r, _)| Some(r.split_once('@')?.1.to_string()))
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

/// Adds to `snapshot.containers` the metadata of the containers its threads run in, and of
/// their pods' sandboxes, read now from the runtimes' state: what a capture must carry for a
/// replay (which reads no runtime) to name them and give their labels. Containers already
/// in the snapshot are kept as they are. Returns how many were added.
pub fn add_snapshot_containers(dirs: &RuntimeDirs, snapshot: &mut vigil_event::Snapshot) -> usize {
    let mut seen: Vec<Vec<u8>> = snapshot
        .containers
        .iter()
        .map(|c| c.id.as_bytes()[..c.id.len().min(SHORT_ID_LEN)].to_vec())
        .collect();
    let mut todo: Vec<Vec<u8>> = snapshot
        .threads
        .iter()
        .filter_map(|t| vigil_procfs::container_id_from_cgroup(&t.cgroup))
        .map(<[u8]>::to_vec)
        .collect();
    let mut added = 0;
    while let Some(short) = todo.pop() {
        if short.is_empty() || seen.contains(&short) {
            continue;
        }
        seen.push(short.clone());
        let Some(info) = lookup(dirs, &short) else {
            continue;
        };
        if let Some(sandbox) = label(&info, SANDBOX_ID_LABEL) {
            todo.push(sandbox.as_bytes()[..sandbox.len().min(SHORT_ID_LEN)].to_vec());
        }
        snapshot.containers.push(info);
        added += 1;
    }
    added
}

/// Counters of the metadata lookups (live capture).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LookupStats {
    /// Lookups made (one per new container id, plus retries of misses).
    pub lookups: u64,
    /// Lookups that found nothing, or only part (a docker container's runc state).
    pub misses: u64,
    /// Time spent in lookups (wall clock, ns) and the longest one.
    pub total_ns: u64,
    pub max_ns: u64,
    /// Scans of `/proc` for docker daemons.
    pub discoveries: u64,
}

/// Fills the container table from runtime state as new container ids appear.
#[derive(Debug)]
pub struct RuntimeReader {
    /// The configured directories.
    configured: RuntimeDirs,
    /// The configured directories plus those of the docker daemons found last.
    dirs: RuntimeDirs,
    /// Event time of the last look for docker daemons.
    discovered_at: Option<u64>,
    /// Short ids no runtime knew: misses so far, and the event times of the first and the
    /// last attempt.
    unknown: FxHashMap<Box<[u8]>, Misses>,
    stats: LookupStats,
}

impl RuntimeReader {
    /// A reader of the runtimes' files under `dirs` (docker daemons looked for at once).
    pub fn new(dirs: RuntimeDirs) -> Self {
        let mut reader = RuntimeReader {
            configured: dirs.clone(),
            dirs,
            discovered_at: None,
            unknown: FxHashMap::default(),
            stats: LookupStats::default(),
        };
        reader.discover(0);
        reader
    }

    /// Looks for running docker daemons (when configured to) and follows their roots; the
    /// roots of daemons gone are dropped, so a restart with other roots is followed.
    fn discover(&mut self, now: u64) -> bool {
        let Some(proc_root) = self.configured.discover.clone() else {
            return false;
        };
        self.discovered_at = Some(now);
        self.stats.discoveries += 1;
        let mut dirs = self.configured.clone();
        for (data, exec) in discover_docker(&proc_root) {
            dirs.add_docker(&data, &exec);
        }
        let changed = dirs != self.dirs;
        self.dirs = dirs;
        changed
    }

    /// Makes sure `table` knows `short_id` if a runtime does (`now`: event time, ns), and
    /// the pod sandbox it names.
    pub fn resolve(&mut self, short_id: &[u8], now: u64, table: &mut ContainerTable) {
        self.resolve_one(short_id, now, table, true);
    }

    /// [`Self::resolve`]; the sandbox only when `sandbox` (one level: a sandbox naming
    /// another, or a cycle of incomplete entries, is not followed).
    fn resolve_one(
        &mut self,
        short_id: &[u8],
        now: u64,
        table: &mut ContainerTable,
        sandbox: bool,
    ) {
        if short_id.is_empty() || table.is_complete(short_id) {
            return;
        }
        if let Some(m) = self.unknown.get(short_id) {
            if !m.due(now) {
                return;
            }
        }
        let started = Instant::now();
        let mut found = lookup_any(&self.dirs, short_id);
        // A miss may mean a docker daemon (re)started with other roots: look again, at
        // most once per DISCOVER_NS.
        if !found.as_ref().is_some_and(|(_, complete)| *complete)
            && self
                .discovered_at
                .is_none_or(|at| now.saturating_sub(at) >= DISCOVER_NS)
            && self.discover(now)
        {
            found = lookup_any(&self.dirs, short_id).or(found);
        }
        let ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.stats.lookups += 1;
        self.stats.total_ns = self.stats.total_ns.saturating_add(ns);
        self.stats.max_ns = self.stats.max_ns.max(ns);
        if !found.as_ref().is_some_and(|(_, complete)| *complete) {
            self.stats.misses += 1;
        }
        match found {
            Some((mut info, complete)) => {
                // A docker container seen through its runc state only: keep what is known
                // and ask again at its next exec (eagerly, then every RETRY_NS).
                if complete {
                    self.unknown.remove(short_id);
                } else {
                    self.note_miss(short_id, now);
                }
                // The table is keyed by the id as seen in the cgroup path.
                if !info.id.as_bytes().starts_with(short_id) {
                    info.id = String::from_utf8_lossy(short_id).into_owned();
                }
                // A pod's container: its sandbox too (the pod's labels), once.
                let sandbox = label(&info, SANDBOX_ID_LABEL)
                    .filter(|_| sandbox)
                    .map(|id| id.as_bytes()[..id.len().min(SHORT_ID_LEN)].to_vec())
                    .filter(|id| id.as_slice() != short_id && !table.is_complete(id));
                if complete {
                    table.insert(info);
                } else {
                    table.insert_partial(info);
                }
                if let Some(sandbox) = sandbox {
                    self.resolve_one(&sandbox, now, table, false);
                }
            }
            None => self.note_miss(short_id, now),
        }
    }

    /// The lookups made so far.
    pub fn stats(&self) -> LookupStats {
        self.stats
    }

    fn note_miss(&mut self, short_id: &[u8], now: u64) {
        if self.unknown.len() >= MAX_UNKNOWN {
            self.unknown.clear();
        }
        let entry = self.unknown.entry(short_id.into()).or_insert(Misses {
            count: 0,
            first: now,
            last: now,
        });
        entry.count = entry.count.saturating_add(1);
        entry.last = now;
    }
}

/// The failed lookups of one id.
#[derive(Clone, Copy, Debug)]
struct Misses {
    count: u32,
    /// Event time of the first and of the last failed lookup (ns).
    first: u64,
    last: u64,
}

impl Misses {
    /// Whether the id may be looked up again at event time `now`.
    fn due(&self, now: u64) -> bool {
        if self.count < EAGER_RETRIES {
            return true;
        }
        let gap = if now.saturating_sub(self.first) < EAGER_WINDOW_NS {
            EAGER_GAP_NS
        } else {
            RETRY_NS
        };
        now.saturating_sub(self.last) >= gap
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{cri_meta_db, cri_pod, runc_state, Tree};

    const ID: &str = "3ad7b26ded6d8e7b23da7d48fe889434573036c27ae5a74837233de441c3601e";

    #[test]
    fn runc_state_with_cri_annotations() {
        let t = Tree::new("cri");
        t.write(
            &format!("run/runc/{ID}/state.json"),
            runc_state(
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
        assert_eq!(label(&info, "io.kubernetes.pod.name"), Some("web-7d9f"));
        assert_eq!(label(&info, "io.kubernetes.pod.namespace"), Some("shop"));
        assert_eq!(label(&info, "bundle"), None);
        assert_eq!(info.mounts.len(), 2);
        assert!(info.mounts[0].rdwr);
        assert!(!info.mounts[1].rdwr);
    }

    #[test]
    fn plain_runc_names_and_containerd_roots() {
        let t = Tree::new("plain");
        t.write(
            "run/runc/mybox/state.json",
            runc_state("mybox", &["bundle=/b"]),
        );
        t.write(
            &format!("run/containerd/runc/k8s.io/{ID}/state.json"),
            runc_state(ID, &["nerdctl/name=db"]),
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

    fn docker_config_v2(id: &str, name: &str) -> String {
        serde_json::json!({
            "ID": id, "Name": format!("/{name}"),
            "Created": "2026-01-02T03:04:05Z",
            "Image": "sha256:1111", "Driver": "overlay2",
            "Config": {"Image": "vigiltest/bb:1.0", "Labels": {"tier": "web"}},
            "MountPoints": {
                "/data": {"Source": "/srv/data", "Destination": "/data", "RW": false,
                          "Relabel": "ro", "Propagation": "rprivate", "Type": "bind"},
                "/var/lib/x": {"Source": "/var/lib/docker/volumes/x/_data",
                               "Destination": "/var/lib/x", "RW": true, "Relabel": "z",
                               "Propagation": "", "Type": "volume"}
            }
        })
        .to_string()
    }

    #[test]
    fn docker_config() {
        let t = Tree::new("docker");
        t.write(
            &format!("var/lib/docker/containers/{ID}/config.v2.json"),
            serde_json::json!({
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
        assert!(!info.privileged, "no hostconfig.json: not privileged");
        assert_eq!(label(&info, "tier"), Some("db"));
    }

    /// Docker 20.10 with its containerd: the runc state (`runtime-runc/moby`) has no name or
    /// image; docker's own record must win over it.
    #[test]
    fn docker_record_wins_over_its_runc_state() {
        let t = Tree::new("docker-runc");
        t.write(
            &format!("run/docker/runtime-runc/moby/{ID}/state.json"),
            runc_state(ID, &["bundle=/run/docker/containerd/daemon/x"]),
        );
        let dirs = RuntimeDirs::under(&t.0);
        // Only the runc state: found, but incomplete (the name is the id).
        let (info, complete) = lookup_any(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert_eq!((info.name.as_str(), complete), (ID, false));

        let dir = format!("var/lib/docker/containers/{ID}");
        t.write(
            &format!("{dir}/config.v2.json"),
            docker_config_v2(ID, "web-a"),
        );
        t.write(
            &format!("{dir}/hostconfig.json"),
            r#"{"Privileged": true, "Binds": ["/srv/data:/data:ro"]}"#,
        );
        t.write(
            "var/lib/docker/image/overlay2/repositories.json",
            r#"{"Repositories": {"vigiltest/bb": {
                "vigiltest/bb:1.0": "sha256:1111",
                "vigiltest/bb@sha256:beef": "sha256:1111",
                "vigiltest/bb@sha256:dead": "sha256:2222"}}}"#,
        );
        let (info, complete) = lookup_any(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert!(complete);
        assert_eq!(info.id, ID);
        assert_eq!(info.name, "web-a");
        assert_eq!(info.runtime, "docker");
        assert_eq!(info.image, "vigiltest/bb:1.0");
        assert_eq!(info.image_repository, "vigiltest/bb");
        assert_eq!(info.image_tag, "1.0");
        assert_eq!(info.image_digest, "sha256:beef");
        assert!(info.privileged);
        assert_eq!(info.start_ts, 1_767_323_045_000_000_000);
        assert_eq!(
            info.mounts,
            vec![
                MountInfo {
                    source: "/srv/data".into(),
                    dest: "/data".into(),
                    mode: "ro".into(),
                    rdwr: false,
                    propagation: "rprivate".into(),
                },
                MountInfo {
                    source: "/var/lib/docker/volumes/x/_data".into(),
                    dest: "/var/lib/x".into(),
                    mode: "z".into(),
                    rdwr: true,
                    propagation: String::new(),
                },
            ]
        );
        // A hostile driver name never leaves the image store.
        t.write(
            &format!("{dir}/config.v2.json"),
            docker_config_v2(ID, "web-a").replace("overlay2", "../../../etc"),
        );
        let info = lookup(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert_eq!(info.image_digest, "");
    }

    #[test]
    fn cri_creation_time_and_user_mounts() {
        let t = Tree::new("cri-status");
        let mut state: Value = serde_json::from_str(&runc_state(
            ID,
            &[
                "io.kubernetes.cri.container-type=container",
                "io.kubernetes.cri.container-name=web",
                "io.kubernetes.cri.sandbox-uid=7f0c",
            ],
        ))
        .unwrap();
        state["config"]["mounts"] = serde_json::json!([
            {"source": "proc", "destination": "/proc", "flags": 14},
            {"source": "/var/lib/containerd/io.containerd.grpc.v1.cri/sandboxes/x/hosts",
             "destination": "/etc/hosts", "flags": 20480},
            {"source": "/srv/share", "destination": "/data", "flags": 20481,
             "propagation_flags": [278528]}
        ]);
        t.write(
            &format!("run/containerd/runc/k8s.io/{ID}/state.json"),
            state.to_string(),
        );
        t.write(
            &format!("var/lib/containerd/io.containerd.grpc.v1.cri/containers/{ID}/status"),
            r#"{"Version":"v1","Pid":1,"CreatedAt":1795791958400472273,"StartedAt":1}"#,
        );
        let info = lookup(&RuntimeDirs::under(&t.0), &ID.as_bytes()[..12]).unwrap();
        assert_eq!(
            (info.name.as_str(), info.runtime.as_str()),
            ("web", "containerd")
        );
        assert_eq!(info.start_ts, 1_795_791_958_400_472_273);
        assert_eq!(
            info.mounts,
            vec![MountInfo {
                source: "/srv/share".into(),
                dest: "/data".into(),
                mode: String::new(),
                rdwr: false,
                propagation: "rprivate".into(),
            }]
        );
        assert_eq!(label(&info, "io.kubernetes.pod.uid"), Some("7f0c"));
    }

    #[test]
    fn podman_names_and_images_from_containers_storage() {
        let t = Tree::new("podman");
        t.write(
            &format!("run/runc/{ID}/state.json"),
            runc_state(
                ID,
                &[
                    "io.container.manager=libpod",
                    "io.podman.annotations.privileged=TRUE",
                    "io.kubernetes.cri-o.Created=2026-01-02T03:04:05.5Z",
                ],
            ),
        );
        let dirs = RuntimeDirs::under(&t.0);
        // Without containers/storage: podman's, named by its id.
        let info = lookup(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert_eq!((info.name.as_str(), info.runtime.as_str()), (ID, "podman"));
        t.write(
            "var/lib/containers/storage/overlay-containers/containers.json",
            serde_json::json!([
                {"id": "other", "names": ["nope"]},
                {"id": ID, "names": ["pod-a"], "image": "7de1",
                 "metadata": "{\"image-name\":\"localhost/vigiltest/bb:1.0\",\"name\":\"pod-a\"}"}
            ])
            .to_string(),
        );
        let info = lookup(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert_eq!(info.name, "pod-a");
        // Before runc saved its state (podman's `runc init` runs in the container's
        // cgroup): named from the storage, incomplete (looked up again at the next exec).
        let early = Tree::new("podman-early");
        early.write(
            "var/lib/containers/storage/overlay-containers/containers.json",
            fs::read_to_string(
                t.0.join("var/lib/containers/storage/overlay-containers/containers.json"),
            )
            .unwrap(),
        );
        let (first, complete) =
            lookup_any(&RuntimeDirs::under(&early.0), &ID.as_bytes()[..12]).unwrap();
        assert_eq!(
            (first.name.as_str(), first.id.as_str(), complete),
            ("pod-a", ID, false)
        );
        assert_eq!(first.image_tag, "1.0");
        assert_eq!(info.image, "localhost/vigiltest/bb:1.0");
        assert_eq!(info.image_repository, "localhost/vigiltest/bb");
        assert_eq!(info.image_tag, "1.0");
        assert!(info.privileged);
        assert_eq!(info.start_ts, 1_767_323_045_500_000_000);
        // Hostile storage: not an array, or a metadata string that is not JSON.
        t.write(
            "var/lib/containers/storage/overlay-containers/containers.json",
            serde_json::json!([{"id": ID, "names": [7], "metadata": "{"}]).to_string(),
        );
        let info = lookup(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert_eq!((info.name.as_str(), info.image.as_str()), (ID, ""));
    }

    /// Copies `rel` (a directory below `from`) to the same place below `to`.
    fn copy_tree(from: &Path, to: &Path, rel: &Path) {
        let Ok(entries) = fs::read_dir(from.join(rel)) else {
            return;
        };
        fs::create_dir_all(to.join(rel)).unwrap();
        for e in entries.flatten() {
            let sub = rel.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                copy_tree(from, to, &sub);
            } else {
                fs::copy(from.join(&sub), to.join(&sub)).unwrap();
            }
        }
    }

    /// `read_dirs` is what a deployment mounts (deploy/README.md, checked by the Helm test):
    /// a host tree holding only those directories gives every runtime's lookup the same
    /// answer as the whole tree, and each directory that exists is needed by some lookup.
    #[test]
    fn read_dirs_hold_everything_a_lookup_reads() {
        let ids: Vec<String> = ["d0", "c1", "f2", "b3"]
            .iter()
            .map(|p| format!("{p}{}", &ID[2..]))
            .collect();
        let t = Tree::new("read-dirs-full");
        // docker: its record and image store (and runc state, read when the record is not).
        let dir = format!("var/lib/docker/containers/{}", ids[0]);
        t.write(
            &format!("{dir}/config.v2.json"),
            docker_config_v2(&ids[0], "web-a"),
        );
        t.write(&format!("{dir}/hostconfig.json"), r#"{"Privileged": true}"#);
        t.write(
            "var/lib/docker/image/overlay2/repositories.json",
            r#"{"Repositories": {"vigiltest/bb": {"vigiltest/bb@sha256:beef": "sha256:1111"}}}"#,
        );
        t.write(
            &format!("run/docker/runtime-runc/moby/{}/state.json", ids[3]),
            runc_state(&ids[3], &["bundle=/run/docker/x"]),
        );
        // containerd's CRI: runc state with the CRI annotations, the CRI plugin's status.
        t.write(
            &format!("run/containerd/runc/k8s.io/{}/state.json", ids[1]),
            runc_state(
                &ids[1],
                &[
                    "io.kubernetes.cri.container-type=container",
                    "io.kubernetes.cri.container-name=web",
                    "io.kubernetes.cri.sandbox-name=web-7d9f",
                ],
            ),
        );
        t.write(
            &format!(
                "var/lib/containerd/io.containerd.grpc.v1.cri/containers/{}/status",
                ids[1]
            ),
            r#"{"CreatedAt":1795791958400472273}"#,
        );
        t.write(
            "var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db",
            "placeholder",
        );
        fs::write(
            t.0.join("var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db"),
            cri_meta_db(&ids[1], &format!("5b{}", &ID[2..])),
        )
        .unwrap();
        // CRI-O: runc state in /run/runc with CRI-O's annotations.
        t.write(
            &format!("run/runc/{}/state.json", ids[2]),
            runc_state(
                &ids[2],
                &[
                    "io.kubernetes.container.name=api",
                    "io.kubernetes.pod.name=api-5c",
                    "io.kubernetes.pod.namespace=shop",
                ],
            ),
        );
        let full = RuntimeDirs::under(&t.0);
        let lookups = |dirs: &RuntimeDirs| -> Vec<Option<ContainerInfo>> {
            ids.iter()
                .map(|id| lookup(dirs, &id.as_bytes()[..SHORT_ID_LEN]))
                .collect()
        };
        let want = lookups(&full);
        assert!(want.iter().all(Option::is_some), "{want:?}");
        assert_eq!(want[0].as_ref().unwrap().image_digest, "sha256:beef");
        assert_eq!(
            want[1].as_ref().unwrap().start_ts,
            1_795_791_958_400_472_273
        );
        assert_eq!(label(want[1].as_ref().unwrap(), "team"), Some("blue"));

        let rel = |d: &Path| d.strip_prefix(&t.0).unwrap().to_path_buf();
        let read: Vec<PathBuf> = full.read_dirs().iter().map(|(d, _)| rel(d)).collect();
        let only = |skip: Option<&Path>| {
            let part = Tree::new("read-dirs-part");
            for d in read.iter().filter(|d| Some(d.as_path()) != skip) {
                copy_tree(&t.0, &part.0, d);
            }
            let got = lookups(&RuntimeDirs::under(&part.0));
            (part, got)
        };
        assert_eq!(only(None).1, want, "the listed directories are not enough");
        for d in read.iter().filter(|d| t.0.join(d).is_dir()) {
            assert_ne!(
                only(Some(d)).1,
                want,
                "{} is listed but no lookup needs it",
                d.display()
            );
        }
        // Each runtime is named.
        let listed = full.read_dirs();
        let runtimes: Vec<&str> = listed.iter().map(|(_, r)| r.as_str()).collect();
        for r in ["runc", "containerd", "docker", "podman"] {
            assert!(runtimes.contains(&r), "{r} in {runtimes:?}");
        }
    }

    #[test]
    fn runc_mount_propagation() {
        let m = |flags: serde_json::Value| {
            runc_propagation(&serde_json::json!({"propagation_flags": flags}))
        };
        assert_eq!(m(serde_json::json!([278528])), "rprivate");
        assert_eq!(m(serde_json::json!([1 << 19])), "slave");
        assert_eq!(m(serde_json::json!([1 << 20, 1 << 14])), "rshared");
        assert_eq!(m(serde_json::json!(null)), "");
        assert_eq!(m(serde_json::json!(["x", -1])), "");
    }

    #[test]
    fn runc_privileged_from_masked_paths_and_capabilities() {
        let cfg = |masked: serde_json::Value, caps: &[&str]| serde_json::json!({"mask_paths": masked, "capabilities": {"Bounding": caps}});
        assert!(runc_privileged(&cfg(
            serde_json::json!(null),
            &["CAP_SYS_ADMIN"]
        )));
        assert!(runc_privileged(&cfg(
            serde_json::json!([]),
            &["CAP_CHOWN", "CAP_SYS_ADMIN"]
        )));
        assert!(!runc_privileged(&cfg(
            serde_json::json!(["/proc/kcore"]),
            &["CAP_SYS_ADMIN"]
        )));
        assert!(!runc_privileged(&cfg(
            serde_json::json!([]),
            &["CAP_CHOWN"]
        )));
        assert!(!runc_privileged(&serde_json::json!({})));
    }

    #[test]
    fn dockerd_flags() {
        let args = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            DockerdFlags::parse(&args(
                "dockerd --bridge=none --data-root /srv/d --exec-root=/run/d"
            )),
            DockerdFlags {
                data_root: Some("/srv/d".into()),
                exec_root: Some("/run/d".into()),
                config_file: None
            }
        );
        assert_eq!(
            DockerdFlags::parse(&args("dockerd -g /old --config-file /etc/d.json")).data_root,
            Some("/old".into())
        );
        // A flag without its value, or an empty one, names nothing.
        assert_eq!(
            DockerdFlags::parse(&args("dockerd --data-root")),
            DockerdFlags::default()
        );
        assert_eq!(
            DockerdFlags::parse(&args("dockerd --data-root=")),
            DockerdFlags::default()
        );
    }

    #[test]
    fn docker_daemons_are_discovered_and_followed() {
        let t = Tree::new("discover");
        let owner = fs::metadata(&t.0).unwrap().uid();
        // A daemon with a non-default data root on its command line, one whose daemon.json
        // names it, and processes that are not dockerd.
        t.write("proc/100/comm", "dockerd\n");
        t.write(
            "proc/100/cmdline",
            "dockerd\0--bridge=none\0--data-root\0/srv/docker\0--exec-root=/run/d2\0",
        );
        t.write("proc/200/comm", "dockerd\n");
        t.write("proc/200/cmdline", "/usr/sbin/dockerd\0");
        t.write(
            "proc/200/root/etc/docker/daemon.json",
            r#"{"data-root": "/data/docker"}"#,
        );
        t.write("proc/300/comm", "sh\n");
        t.write("proc/300/cmdline", "dockerd\0--data-root\0/evil\0");
        t.write("proc/self/comm", "dockerd\n");
        let found = discover_docker_of(&t.0.join("proc"), owner);
        let mut found = found;
        found.sort();
        assert_eq!(
            found,
            vec![
                ("/data/docker".to_string(), "/var/run/docker".to_string()),
                ("/srv/docker".to_string(), "/run/d2".to_string()),
            ]
        );
        assert!(discover_docker_of(&t.0.join("proc"), owner.wrapping_add(1)).is_empty());
        assert!(discover_docker(Path::new("/nonexistent")).is_empty());
    }

    #[test]
    fn reader_follows_a_daemon_started_later() {
        let t = Tree::new("follow");
        let owner = fs::metadata(&t.0).unwrap().uid();
        if owner != 0 {
            // discover_docker trusts root's daemons only; the fake /proc is ours.
            return;
        }
        let mut dirs = RuntimeDirs::under(&t.0);
        dirs.discover = Some(t.0.join("proc"));
        let mut reader = RuntimeReader::new(dirs);
        let mut table = ContainerTable::default();
        let short = &ID.as_bytes()[..12];
        t.write(
            &format!("run/d2/runtime-runc/moby/{ID}/state.json"),
            runc_state(ID, &[]),
        );
        t.write(
            &format!("srv/docker/containers/{ID}/config.v2.json"),
            docker_config_v2(ID, "web-b"),
        );
        reader.resolve(short, 10, &mut table);
        assert!(table.get(short).is_none(), "no daemon yet");
        // The daemon starts: the next lookup (a second later) finds it.
        t.write("proc/100/comm", "dockerd\n");
        t.write(
            "proc/100/cmdline",
            "dockerd\0--data-root\0/srv/docker\0--exec-root\0/run/d2\0",
        );
        reader.resolve(short, 20, &mut table);
        assert!(
            table.get(short).is_none(),
            "looked for daemons less than a second ago"
        );
        reader.resolve(short, 10 + DISCOVER_NS, &mut table);
        assert_eq!(table.get(short).map(|c| c.name.as_str()), Some("web-b"));
        assert!(table.is_complete(short));
        let stats = reader.stats;
        assert_eq!((stats.lookups, stats.misses, stats.discoveries), (3, 2, 2));
        assert!(stats.max_ns <= stats.total_ns);
    }

    #[test]
    fn unreadable_or_hostile_state_gives_nothing() {
        let t = Tree::new("bad");
        t.write(&format!("run/runc/{ID}/state.json"), "{not json");
        t.write("run/runc/deep/state.json", "[".repeat(100_000));
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
        t.write(&format!("run/runc/{ID}/state.json"), runc_state(ID, &[]));
        reader.resolve(short, 1_001, &mut table);
        assert_eq!(table.get(short).map(|c| c.name.as_str()), Some(ID));

        // An id no runtime knows: after the eager retries, once per EAGER_GAP_NS during the
        // eager window, then once per RETRY_NS.
        const OTHER: &[u8] = b"0123456789ab";
        let misses = |reader: &RuntimeReader| reader.unknown.get(OTHER).map(|m| m.count);
        for i in 0..u64::from(EAGER_RETRIES) {
            reader.resolve(OTHER, 2_000 + i, &mut table);
        }
        assert_eq!(misses(&reader), Some(EAGER_RETRIES));
        reader.resolve(OTHER, 3_000, &mut table);
        assert_eq!(misses(&reader), Some(EAGER_RETRIES), "skipped");
        let last = 2_000 + 15;
        reader.resolve(OTHER, last + EAGER_GAP_NS, &mut table);
        assert_eq!(
            misses(&reader),
            Some(EAGER_RETRIES + 1),
            "retried in the window"
        );
        let last = last + EAGER_GAP_NS;
        reader.resolve(OTHER, last + EAGER_GAP_NS - 1, &mut table);
        assert_eq!(
            misses(&reader),
            Some(EAGER_RETRIES + 1),
            "not before the gap"
        );
        // Past the window: the gap grows to RETRY_NS.
        let late = 2_000 + EAGER_WINDOW_NS;
        reader.resolve(OTHER, late, &mut table);
        assert_eq!(
            misses(&reader),
            Some(EAGER_RETRIES + 2),
            "a retry RETRY_NS after the last"
        );
        reader.resolve(OTHER, late + EAGER_GAP_NS, &mut table);
        assert_eq!(
            misses(&reader),
            Some(EAGER_RETRIES + 2),
            "skipped after the window"
        );
        reader.resolve(OTHER, late + RETRY_NS, &mut table);
        assert_eq!(misses(&reader), Some(EAGER_RETRIES + 3), "retried");
    }

    #[test]
    fn a_runtime_that_writes_its_state_after_many_execs_is_still_found() {
        // Under load a container may exec more than EAGER_RETRIES times before its runtime
        // writes the state (CI saw 82 events): the entry is found at the next exec after it.
        let t = Tree::new("late-state");
        let mut reader = RuntimeReader::new(RuntimeDirs::under(&t.0));
        let mut table = ContainerTable::default();
        let short = &ID.as_bytes()[..12];
        let ms = 1_000_000;
        for i in 0..100 {
            reader.resolve(short, i * ms, &mut table);
        }
        assert!(table.get(short).is_none());
        t.write(&format!("run/runc/{ID}/state.json"), runc_state(ID, &[]));
        reader.resolve(short, 100 * ms + EAGER_GAP_NS, &mut table);
        assert_eq!(table.get(short).map(|c| c.name.as_str()), Some(ID));
    }

    #[test]
    fn cri_and_podman_labels_from_the_runtimes_databases() {
        const ID: &str = "9c1e5b0f2a3d4c5b6a7980f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f";
        const SANDBOX: &str = "5b1d2f0c9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";
        let t = Tree::new("cri-labels");
        let db = cri_pod(&t, ID, SANDBOX);
        let dirs = RuntimeDirs::under(&t.0);
        let (info, complete) = lookup_any(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert!(complete);
        assert_eq!(label(&info, "team"), Some("blue"));
        assert_eq!(label(&info, SANDBOX_ID_LABEL), Some(SANDBOX));
        let (pod, complete) = lookup_any(&dirs, &SANDBOX.as_bytes()[..12]).unwrap();
        assert!(complete);
        assert_eq!(label(&pod, "app"), Some("web"));
        // A capture's snapshot carries them for its replay (no runtime read there): the
        // container a thread runs in, and its sandbox.
        let mut snap = vigil_event::Snapshot::default();
        snap.threads.push(vigil_event::ThreadInfo {
            tid: 400,
            pid: 400,
            cgroup: format!("0::/kubepods/{ID}").into_bytes(),
            ..Default::default()
        });
        assert_eq!(
            add_snapshot_containers(&dirs, &mut snap),
            2,
            "container and sandbox"
        );
        assert_eq!(add_snapshot_containers(&dirs, &mut snap), 0, "once");
        let ids: Vec<&str> = snap.containers.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, [ID, SANDBOX]);
        // No database: the container without its labels (degraded, complete: nothing to
        // wait for). A database that does not answer: incomplete, asked again later.
        fs::remove_file(&db).unwrap();
        let (info, complete) = lookup_any(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert_eq!((info.name.as_str(), complete), ("web", true));
        assert_eq!(label(&info, "team"), None);
        fs::write(&db, b"not a bolt database").unwrap();
        let (info, complete) = lookup_any(&dirs, &ID.as_bytes()[..12]).unwrap();
        assert_eq!((info.name.as_str(), complete), ("web", false));

        // podman: `labels` of the container's config in its database.
        let p = Tree::new("podman-labels");
        p.write(
            &format!("run/runc/{ID}/state.json"),
            runc_state(ID, &["io.container.manager=libpod"]),
        );
        let db = p.0.join("var/lib/containers/storage/libpod/bolt_state.db");
        fs::create_dir_all(db.parent().unwrap()).unwrap();
        let config = serde_json::json!({"id": ID, "labels": {"team": "blue", "tier": "web"}});
        {
            use crate::bolt::write::{bucket, db as bolt, value};
            let root = bucket(vec![
                ("all-ctrs", bucket(vec![(ID, value("pod-a"))])),
                (
                    "ctr",
                    bucket(vec![(
                        ID,
                        bucket(vec![("config", value(config.to_string()))]),
                    )]),
                ),
            ]);
            fs::write(&db, bolt(&root, 100)).unwrap();
        }
        let (info, complete) = lookup_any(&RuntimeDirs::under(&p.0), &ID.as_bytes()[..12]).unwrap();
        assert!(complete);
        assert_eq!(label(&info, "tier"), Some("web"));
        assert_eq!(label(&info, "team"), Some("blue"));
    }

    /// Two CRI containers naming each other as their sandbox, with a database that does
    /// not answer (both stay incomplete): one exec resolves each once, no endless chain.
    #[test]
    fn a_sandbox_cycle_is_not_followed() {
        const A: &str = "a1e5b0f2a3d4c5b6a7980f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f0";
        const B: &str = "b1d2f0c9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c0";
        let t = Tree::new("sandbox-cycle");
        for (id, other) in [(A, B), (B, A)] {
            t.write(
                &format!("run/containerd/runc/k8s.io/{id}/state.json"),
                runc_state(
                    id,
                    &[
                        "io.kubernetes.cri.container-type=container",
                        &format!("io.kubernetes.cri.sandbox-id={other}"),
                    ],
                ),
            );
        }
        t.write(
            "var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db",
            "not a bolt database",
        );
        let mut reader = RuntimeReader::new(RuntimeDirs::under(&t.0));
        let mut table = ContainerTable::default();
        reader.resolve(&A.as_bytes()[..12], 1, &mut table);
        assert_eq!(reader.stats.lookups, 2, "A and its sandbox B, once each");
        assert_eq!(table.len(), 2);
        assert!(!table.is_complete(&A.as_bytes()[..12]));
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

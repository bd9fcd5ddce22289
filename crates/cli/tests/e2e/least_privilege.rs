//! The least-privileged DaemonSet (issue 36): `vigil watch` without `privileged: true`, with
//! exactly the capabilities of the Helm chart's security context.
//!
//! - The chart (no root needed): `leastPrivileged` is the default; its security context adds
//!   exactly the capabilities `vigil watch` keeps after start-up
//!   ([`vigil_privs::WATCH`]), drops the rest, and sets no privilege gain, a read-only
//!   root filesystem and the runtime's seccomp profile; `leastPrivileged: false` is the
//!   privileged pod of before; `deploy/kubernetes/vigil.yaml` has the same security context.
//! - A CRI pod (root, containerd and crictl started by the test, as in `runtimes.rs`): the
//!   chart is rendered (`helm template`), and its DaemonSet's pod (security context, host PID
//!   namespace, volumes, arguments) becomes the CRI configuration a kubelet would send, run
//!   with the image `make image` builds (only the static `/vigil`). A workload pod (its own
//!   user 4321 known only to its image's `/etc/passwd`) holds a descriptor opened before the
//!   agent started; once the agent watches, it closes it and reads a file. With the chart's
//!   capabilities the agent alerts on both with the container's and the pod's fields and the
//!   workload's user name. Then once per capability, the same without it, and the failure is
//!   the one each capability is there to prevent; and without the host's tracefs mounted.
//! - `docker run` with the chart's capabilities (`--cap-drop ALL --cap-add …`): the agent
//!   alerts with the workload container's fields; Docker's default seccomp profile allows
//!   bpf() and perf_event_open() with CAP_BPF and CAP_PERFMON only from Docker 23 on, so on
//!   an older Docker the agent must refuse to start with the line that says so, and run with
//!   `--security-opt seccomp=unconfined`.
//!
//! The capability set is read from the rendered chart, nowhere else. The host's tracefs is
//! mounted at `/sys/kernel/tracing` for the pods (as systemd does on a node) when it is not
//! already, and unmounted afterwards.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::helm::{by_kind, chart, helm};
use crate::runtimes::{
    busybox_rootfs, cri_requirement, docker_requirement, oci_archives, run, scratch, static_vigil,
    Containerd, Dockerd, CONTAINERD_CONFIG, OCI_IMAGE,
};
use crate::support::live::LIVE;
use crate::support::{free_port, host, skip, strict, text, workspace};

/// The agent image's repository (`make image`'s, renamed for the test).
const AGENT_IMAGE: &str = "localhost/vigiltest/vigil-lp";
/// The workload's user: in its image's `/etc/passwd` only (`user.name` comes from there).
const WORKLOAD_UID: u32 = 4321;
const WORKLOAD_USER: &str = "shopper";
/// The rule of the test: every open and close of the shared marker in a container.
const RULE: &str = "vigil lp marker in a container";
/// How long the agent may take to report it is watching (or to exit).
const START_WAIT: Duration = Duration::from_secs(180);
/// How long the workload's alerts may take once it acted.
const ALERT_WAIT: Duration = Duration::from_secs(30);

// --- The chart ------------------------------------------------------------------------------

/// `helm template` of the chart with `values` (YAML); `kind/name` → manifest.
fn render(helm: &Path, dir: &Path, values: &str) -> BTreeMap<String, Value> {
    let file = dir.join("values.yaml");
    fs::write(&file, values).expect("write values");
    let mut cmd = Command::new(helm);
    for (var, sub) in [
        ("HELM_CACHE_HOME", "cache"),
        ("HELM_CONFIG_HOME", "config"),
        ("HELM_DATA_HOME", "data"),
    ] {
        cmd.env(var, dir.join("helm").join(sub));
    }
    cmd.args(["template", "vigil"])
        .arg(chart())
        .args(["--namespace", "vigil", "-f"])
        .arg(&file);
    let out = run_cmd(&mut cmd).unwrap_or_else(|e| panic!("helm template: {e}"));
    by_kind(&out)
}

fn run_cmd(cmd: &mut Command) -> Result<String, String> {
    let out = cmd
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(text(&out.stdout))
    } else {
        Err(format!(
            "{cmd:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        ))
    }
}

/// The DaemonSet's pod template.
fn pod_template(manifests: &BTreeMap<String, Value>) -> &Value {
    &manifests
        .get("DaemonSet/vigil")
        .unwrap_or_else(|| panic!("no DaemonSet/vigil in {:?}", manifests.keys()))["spec"]
        ["template"]
}

/// The agent container of a pod template.
fn agent_container(pod: &Value) -> &Value {
    let containers = pod["spec"]["containers"].as_array().expect("containers");
    assert_eq!(containers.len(), 1, "one container: {containers:?}");
    &containers[0]
}

/// The capabilities a security context adds, as the kernel names them (`CAP_BPF`), sorted.
fn added_capabilities(security: &Value) -> Vec<String> {
    let mut caps: Vec<String> = security["capabilities"]["add"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("CAP_{}", c.as_str().expect("a capability name")))
        .collect();
    caps.sort();
    caps
}

/// The host's tracefs, among a pod's hostPath volumes, mounted read-only.
fn mounts_tracefs(pod: &Value) -> bool {
    let volume = pod["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .find(|v| v["hostPath"]["path"] == "/sys/kernel/tracing");
    let Some(volume) = volume else {
        return false;
    };
    agent_container(pod)["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .any(|m| {
            m["name"] == volume["name"]
                && m["mountPath"] == "/sys/kernel/tracing"
                && m["readOnly"] == true
        })
}

#[test]
fn chart_runs_the_agent_least_privileged_by_default() {
    let _host = host::shared();
    const TEST: &str = "chart_runs_the_agent_least_privileged_by_default";
    let Some(helm) = helm() else {
        skip(
            TEST,
            "helm is not installed (`make test-deps` installs it into target/tools/bin)",
        );
        return;
    };
    let dir = scratch("lp-chart");
    let default = render(&helm, &dir, "{}\n");
    let pod = pod_template(&default);
    let security = &agent_container(pod)["securityContext"];
    assert_eq!(security["privileged"], false, "{security}");
    assert_eq!(security["allowPrivilegeEscalation"], false, "{security}");
    assert_eq!(security["readOnlyRootFilesystem"], true, "{security}");
    assert_eq!(
        security["capabilities"]["drop"],
        json!(["ALL"]),
        "{security}"
    );
    assert_eq!(
        security["seccompProfile"],
        json!({"type": "RuntimeDefault"}),
        "{security}"
    );
    assert!(security.get("appArmorProfile").is_none(), "{security}");
    // Exactly what the agent keeps after start-up: nothing more to drop, nothing missing.
    let mut kept: Vec<String> = vigil_privs::WATCH.iter().map(ToString::to_string).collect();
    kept.sort();
    assert_eq!(added_capabilities(security), kept, "{security}");
    assert_eq!(pod["spec"]["hostPID"], true);
    assert!(mounts_tracefs(pod), "the host's tracefs, read-only");

    // leastPrivileged: false is the privileged pod: no capability list, no tracefs mount.
    let privileged = render(&helm, &dir, "leastPrivileged: false\n");
    let pod = pod_template(&privileged);
    assert_eq!(
        agent_container(pod)["securityContext"],
        json!({"privileged": true})
    );
    assert!(!mounts_tracefs(pod));

    // The profiles are values.
    let unconfined = render(
        &helm,
        &dir,
        "seccompProfile: {type: Unconfined}\nappArmorProfile: {type: Unconfined}\n",
    );
    let security = &agent_container(pod_template(&unconfined))["securityContext"];
    assert_eq!(security["seccompProfile"], json!({"type": "Unconfined"}));
    assert_eq!(security["appArmorProfile"], json!({"type": "Unconfined"}));

    // The plain manifest runs the agent as the chart's defaults do.
    let manifest = by_kind(
        &fs::read_to_string(workspace().join("deploy/kubernetes/vigil.yaml")).expect("manifest"),
    );
    let pod = pod_template(&manifest);
    assert_eq!(
        agent_container(pod)["securityContext"],
        agent_container(pod_template(&default))["securityContext"],
        "deploy/kubernetes/vigil.yaml and the chart's defaults"
    );
    assert!(mounts_tracefs(pod), "deploy/kubernetes/vigil.yaml");
    let _ = fs::remove_dir_all(&dir);
}

// --- The agent's image and the host's tracefs -----------------------------------------------

/// The agent image as `make image` builds it (`scripts/build-image.sh`, only `/vigil`), as a
/// docker archive named `AGENT_IMAGE:<version>`, which `ctr` and `docker load` import.
fn agent_image_archive(dir: &Path) -> Result<(PathBuf, String), String> {
    let bin = static_vigil().ok_or("no static vigil (`make static`)")?;
    let version = env!("CARGO_PKG_VERSION");
    let storage = dir.join("buildah");
    run_cmd(
        Command::new("sh")
            .arg(workspace().join("scripts/build-image.sh"))
            .arg("-b")
            .arg(&bin)
            .args(["-t", AGENT_IMAGE, "-k"])
            .arg(&storage),
    )?;
    let archive = dir.join("vigil-image.tar");
    let reference = format!("{AGENT_IMAGE}:{version}");
    let pushed = run_cmd(
        Command::new("buildah")
            .arg("--root")
            .arg(storage.join("root"))
            .arg("--runroot")
            .arg(storage.join("run"))
            .args(["--storage-driver", "vfs", "push", "--quiet", &reference])
            .arg(format!("docker-archive:{}:{reference}", archive.display())),
    );
    let _ = fs::remove_dir_all(&storage);
    pushed?;
    Ok((archive, reference))
}

/// The host's tracefs at `/sys/kernel/tracing`, as systemd mounts it on a node: mounted by
/// the test when it was not, unmounted when dropped (or on [`Tracefs::unmount`]).
struct Tracefs {
    mounted_here: bool,
}

impl Tracefs {
    const PATH: &'static str = "/sys/kernel/tracing";

    fn is_mounted() -> bool {
        Path::new(Self::PATH).join("events/syscalls").is_dir()
    }

    fn mount() -> Tracefs {
        if Self::is_mounted() {
            return Tracefs {
                mounted_here: false,
            };
        }
        run("mount", &["-t", "tracefs", "nodev", Self::PATH]).expect("mount tracefs");
        Tracefs { mounted_here: true }
    }

    fn unmount(&mut self) {
        if std::mem::take(&mut self.mounted_here) {
            let _ = run("umount", &[Self::PATH]);
        }
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        self.unmount();
    }
}

// --- A kubelet's part -----------------------------------------------------------------------

/// CRI's `NamespaceMode::NODE` (the host's namespace) and `SecurityProfile` types.
const NAMESPACE_NODE: u8 = 2;

/// The CRI seccomp profile of a Kubernetes `seccompProfile`.
fn cri_seccomp(profile: &Value) -> Value {
    match profile["type"].as_str() {
        Some("RuntimeDefault") => json!({"profile_type": 0}),
        Some("Unconfined") => json!({"profile_type": 1}),
        other => panic!("seccompProfile {other:?} is not translated by this test"),
    }
}

/// `runc spec`'s default masked and read-only paths.
fn runc_default_paths() -> (Value, Value) {
    let dir = scratch("lp-runc-spec");
    run("runc", &["spec", "--bundle", &dir.to_string_lossy()]).expect("runc spec");
    let spec: Value = serde_json::from_str(
        &fs::read_to_string(dir.join("config.json")).expect("runc spec's config.json"),
    )
    .expect("JSON");
    let _ = fs::remove_dir_all(&dir);
    (
        spec["linux"]["maskedPaths"].clone(),
        spec["linux"]["readonlyPaths"].clone(),
    )
}

/// How a run of the agent's pod differs from the chart's.
#[derive(Default)]
struct Variant<'a> {
    /// A capability (the chart's name: `BPF`) left out of the added ones.
    without: Option<&'a str>,
    /// A seccomp profile file (CRI `Localhost`) instead of the chart's.
    seccomp: Option<PathBuf>,
}

/// The CRI configurations (sandbox, container) a kubelet sends for the chart's DaemonSet pod,
/// changed as `variant` says. Volumes: hostPath (created for
/// `DirectoryOrCreate`, as the kubelet does) and the rendered ConfigMaps (written below
/// `dir`). Anything this translation does not know fails the test: a new field in the
/// chart's security context must be translated before the test can pass. The pod uses the
/// host's network (no CNI here); the chart's pod has its own, which changes no privilege.
fn agent_configs(
    manifests: &BTreeMap<String, Value>,
    dir: &Path,
    name: &str,
    variant: &Variant,
) -> (Value, Value) {
    let pod = pod_template(manifests);
    let spec = &pod["spec"];
    let container = agent_container(pod);
    for key in spec.as_object().expect("pod spec").keys() {
        assert!(
            [
                "hostPID",
                "terminationGracePeriodSeconds",
                "tolerations",
                "containers",
                "volumes"
            ]
            .contains(&key.as_str()),
            "pod spec key `{key}` is not translated by this test"
        );
    }
    let host_pid = spec["hostPID"] == true;
    let pid_mode = if host_pid { NAMESPACE_NODE } else { 0 };
    let logs = dir.join("logs").join(name);
    fs::create_dir_all(&logs).unwrap();
    let sandbox = json!({
        "metadata": {"name": name, "namespace": "vigil",
                     "uid": format!("0b5e7c1d-{:04x}-4e2f-8a3b-{:012x}",
                                    std::process::id() & 0xffff, name.len()),
                     "attempt": 0},
        "labels": pod["metadata"]["labels"],
        "annotations": pod["metadata"]["annotations"],
        "log_directory": logs,
        "linux": {"security_context": {"namespace_options": {
            "pid": pid_mode, "network": NAMESPACE_NODE}}}
    });

    let volumes: BTreeMap<&str, &Value> = spec["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .map(|v| (v["name"].as_str().expect("volume name"), v))
        .collect();
    let mut mounts = Vec::new();
    for mount in container["volumeMounts"].as_array().expect("volumeMounts") {
        let volume = volumes[mount["name"].as_str().expect("mount name")];
        let source = if let Some(path) = volume["hostPath"]["path"].as_str() {
            if volume["hostPath"]["type"] == "DirectoryOrCreate" {
                fs::create_dir_all(path).unwrap_or_else(|e| panic!("create {path}: {e}"));
            }
            PathBuf::from(path)
        } else if let Some(cm) = volume["configMap"]["name"].as_str() {
            config_map(manifests, dir, cm, mount)
        } else {
            panic!("volume {volume} is not translated by this test");
        };
        mounts.push(json!({
            "container_path": mount["mountPath"],
            "host_path": source,
            "readonly": mount["readOnly"] == true,
        }));
    }

    let security = &container["securityContext"];
    // A kubelet masks and makes read-only a few /proc and /sys paths of every container that
    // is not privileged: the OCI runtime's defaults (`runc spec`'s), which are the same list.
    let (masked, readonly) = runc_default_paths();
    let mut cri_security = json!({
        "namespace_options": {"pid": pid_mode, "network": NAMESPACE_NODE},
        "masked_paths": masked,
        "readonly_paths": readonly,
    });
    for (key, value) in security.as_object().expect("securityContext") {
        match key.as_str() {
            "privileged" => cri_security["privileged"] = value.clone(),
            // The kubelet's `NoNewPrivs`: set when privilege escalation is refused.
            "allowPrivilegeEscalation" => cri_security["no_new_privs"] = json!(value == false),
            "readOnlyRootFilesystem" => cri_security["readonly_rootfs"] = value.clone(),
            "seccompProfile" => {
                cri_security["seccomp"] = match &variant.seccomp {
                    Some(profile) => json!({"profile_type": 2, "localhost_ref": profile}),
                    None => cri_seccomp(value),
                }
            }
            "capabilities" => {
                let add: Vec<&Value> = value["add"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|c| Some(c.as_str().unwrap_or_default()) != variant.without)
                    .collect();
                cri_security["capabilities"] = json!({
                    "add_capabilities": add,
                    "drop_capabilities": value["drop"],
                });
            }
            other => panic!("securityContext key `{other}` is not translated by this test"),
        }
    }
    let config = json!({
        "metadata": {"name": container["name"]},
        "image": {"image": container["image"]},
        "args": container["args"],
        "mounts": mounts,
        "log_path": "agent.log",
        "linux": {"security_context": cri_security},
    });
    (sandbox, config)
}

/// The files of the rendered ConfigMap `name`, written below `dir`, as `mount` (a volume
/// mount) sees them: the directory, or one key's file (`subPath`).
fn config_map(
    manifests: &BTreeMap<String, Value>,
    dir: &Path,
    name: &str,
    mount: &Value,
) -> PathBuf {
    let data = &manifests
        .get(&format!("ConfigMap/{name}"))
        .unwrap_or_else(|| panic!("no ConfigMap/{name}"))["data"];
    let at = dir.join("configmaps").join(name);
    fs::create_dir_all(&at).unwrap();
    for (key, value) in data.as_object().expect("ConfigMap data") {
        fs::write(at.join(key), value.as_str().expect("text")).unwrap();
    }
    match mount["subPath"].as_str() {
        Some(key) => at.join(key),
        None => at,
    }
}

/// The workload's root filesystem: busybox, and a user of its own in `/etc/passwd`.
fn workload_rootfs(dir: &Path) -> PathBuf {
    let rootfs = busybox_rootfs(dir);
    fs::write(
        rootfs.join("etc/passwd"),
        format!(
            "root:x:0:0:root:/root:/bin/sh\n\
             {WORKLOAD_USER}:x:{WORKLOAD_UID}:{WORKLOAD_UID}::/:/bin/sh\n"
        ),
    )
    .unwrap();
    rootfs
}

/// The chart's values for a test: the agent image `agent_ref` (`repository:tag`), the one
/// container runtime of the node (`containerd` or `docker`), the spool in `dir`, the web
/// server on a free port (the test's pods use the host's network) and the test's rule as a
/// custom rules file.
fn test_values(agent_ref: &str, runtime: &str, dir: &Path) -> String {
    let (repository, tag) = agent_ref.rsplit_once(':').expect("name:tag");
    let rules: String = rules_yaml().lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "image: {{repository: {repository}, tag: \"{tag}\"}}\n\
         containerRuntimes: {{containerd: {}, crio: false, docker: {}}}\n\
         spoolHostPath: {}\n\
         config:\n  rules_files: [/etc/vigil/rules.d]\n  webserver: {{listen_port: {}}}\n\
         customRules:\n  test.yaml: |\n{rules}",
        runtime == "containerd",
        runtime == "docker",
        dir.join("spool").display(),
        free_port(),
    )
}

/// A CRI container log (`TIME STREAM P|F TEXT` lines) as (stream, line) pairs, partial lines
/// joined.
fn cri_log(path: &Path) -> Vec<(String, String)> {
    let text = fs::read_to_string(path).unwrap_or_default();
    let mut lines = Vec::new();
    let mut partial = String::new();
    for line in text.lines() {
        let mut parts = line.splitn(4, ' ');
        let (_, Some(stream), Some(tag)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        partial.push_str(parts.next().unwrap_or_default());
        if tag == "F" {
            lines.push((stream.to_owned(), std::mem::take(&mut partial)));
        }
    }
    lines
}

/// The JSON alerts of the rule among an agent's log lines.
fn alerts_in(log: &[(String, String)]) -> Vec<Value> {
    log.iter()
        .filter(|(stream, _)| stream == "stdout")
        .filter_map(|(_, line)| serde_json::from_str::<Value>(line).ok())
        .filter(|a| a["rule"] == RULE)
        .collect()
}

fn stderr_of(log: &[(String, String)]) -> String {
    log.iter()
        .filter(|(stream, _)| stream == "stderr")
        .map(|(_, line)| format!("{line}\n"))
        .collect()
}

/// What the workload does: opens the marker as descriptor 3 before the agent starts, waits
/// for `go`, closes the descriptor (the agent knows it from its start snapshot only) and then
/// reads the marker with `cat`.
fn workload_script(go: &str) -> String {
    format!(
        "exec 3</data/marker; while [ ! -e /data/{go} ]; do sleep 0.1; done; exec 3<&-; \
         cat /data/marker"
    )
}

/// The rule (a custom rules file of the chart): every open and close of the marker in a
/// container, with the container's and the pod's fields.
fn rules_yaml() -> String {
    format!(
        r#"- rule: {RULE}
  desc: the test workload's marker, opened or closed in a container
  condition: >
    evt.type in (open, openat, openat2, close) and fd.name = /data/marker
    and container.id != host
  output: >
    marker %evt.type (%container.id %container.name %container.image.repository
    %k8s.pod.name %k8s.ns.name %k8s.pod.uid %k8s.pod.label[app] %user.uid %user.name
    %proc.cmdline)
  priority: WARNING
"#
    )
}

/// One agent pod of the chart's DaemonSet, with the workload pod beside it.
struct PodRun {
    /// The agent's log lines (stream, text).
    log: Vec<(String, String)>,
    /// The agent's alerts of [`RULE`] for the workload.
    alerts: Vec<Value>,
    /// Whether the agent reported it was watching (else it exited).
    watching: bool,
    /// The agent container's `crictl inspect` while it ran (or after it exited).
    inspect: Value,
    /// The agent's `/proc/PID/status` while it watched.
    status: String,
    /// The workload's container id, pod name and uid.
    workload: (String, String, String),
}

/// Runs the workload pod, then the agent pod (the chart's, changed by `variant`), lets the
/// workload act once the agent watches, and collects what happened.
fn run_pods(
    daemon: &Containerd,
    dir: &Path,
    manifests: &BTreeMap<String, Value>,
    case: &str,
    variant: &Variant,
) -> PodRun {
    let share = dir.join("share");
    let go = format!("go-{case}");
    // The workload first: its descriptor 3 is in the agent's start snapshot.
    let workload_name = format!("shop-{case}");
    let workload_uid = format!(
        "4a7c1e2b-{:04x}-4d5e-9f60-{:012x}",
        std::process::id() & 0xffff,
        case.len()
    );
    let logs = dir.join("logs").join(&workload_name);
    fs::create_dir_all(&logs).unwrap();
    let pod_json = dir.join(format!("{workload_name}.json"));
    fs::write(
        &pod_json,
        json!({
            "metadata": {"name": workload_name, "namespace": "shop", "uid": workload_uid,
                         "attempt": 0},
            "labels": {"app": "shop"},
            "log_directory": logs,
            "linux": {"security_context": {"namespace_options": {"network": NAMESPACE_NODE}}}
        })
        .to_string(),
    )
    .unwrap();
    let ctr_json = dir.join(format!("{workload_name}-ctr.json"));
    fs::write(
        &ctr_json,
        json!({
            "metadata": {"name": "shop"},
            "image": {"image": OCI_IMAGE},
            "command": ["sh", "-c", workload_script(&go)],
            "mounts": [{"container_path": "/data", "host_path": share, "readonly": true}],
            "log_path": "shop.log",
            "linux": {"security_context": {"run_as_user": {"value": WORKLOAD_UID}}}
        })
        .to_string(),
    )
    .unwrap();
    let crictl = |args: &[&str]| {
        daemon
            .crictl(args)
            .unwrap_or_else(|e| panic!("{case}: crictl {args:?}: {e}"))
    };
    let (pod_json, ctr_json) = (pod_json.to_string_lossy(), ctr_json.to_string_lossy());
    let workload_pod = crictl(&["runp", &pod_json]);
    let workload = crictl(&["create", &workload_pod, &ctr_json, &pod_json]);
    crictl(&["start", &workload]);

    // The agent, as the chart's DaemonSet.
    let agent_name = format!("vigil-{case}");
    let (sandbox, config) = agent_configs(manifests, dir, &agent_name, variant);
    let agent_log = PathBuf::from(sandbox["log_directory"].as_str().unwrap()).join("agent.log");
    let sandbox_json = dir.join(format!("{agent_name}.json"));
    let config_json = dir.join(format!("{agent_name}-ctr.json"));
    fs::write(&sandbox_json, sandbox.to_string()).unwrap();
    fs::write(&config_json, config.to_string()).unwrap();
    let (sandbox_json, config_json) = (
        sandbox_json.to_string_lossy(),
        config_json.to_string_lossy(),
    );
    let agent_pod = crictl(&["runp", &sandbox_json]);
    let agent = crictl(&["create", &agent_pod, &config_json, &sandbox_json]);
    crictl(&["start", &agent]);
    let inspect = || -> Value {
        serde_json::from_str(&crictl(&["inspect", &agent])).expect("crictl inspect is JSON")
    };
    let deadline = Instant::now() + START_WAIT;
    let watching = loop {
        let log = cri_log(&agent_log);
        if log.iter().any(|(_, l)| l.contains("vigil: watching")) {
            break true;
        }
        if inspect()["status"]["state"] == "CONTAINER_EXITED" || Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut status = String::new();
    let mut alerts = Vec::new();
    if watching {
        let pid = inspect()["info"]["pid"].as_u64().expect("the agent's pid");
        status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        fs::write(share.join(&go), "").unwrap();
        // The cat's open comes after the close: once it is in (or the wait is over), the
        // close's alert is in too if there is one.
        let deadline = Instant::now() + ALERT_WAIT;
        let short = &workload[..12];
        let ours = |a: &Value| a["output_fields"]["container.id"] == short;
        loop {
            alerts = alerts_in(&cri_log(&agent_log));
            let open = alerts
                .iter()
                .any(|a| ours(a) && find_act(std::slice::from_ref(a), Act::CatOpen).is_some());
            if open || Instant::now() > deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(2));
        alerts = alerts_in(&cri_log(&agent_log))
            .into_iter()
            .filter(ours)
            .collect();
    }
    let inspected = inspect();
    for pod in [&agent_pod, &workload_pod] {
        let _ = daemon.crictl(&["stopp", pod]);
        let _ = daemon.crictl(&["rmp", pod]);
    }
    PodRun {
        log: cri_log(&agent_log),
        alerts,
        watching,
        inspect: inspected,
        status,
        workload: (workload, workload_name, workload_uid),
    }
}

/// The bit mask of capabilities named `CAP_BPF` or `BPF`, as `/proc/PID/status` shows them.
fn capability_mask(names: &[String]) -> u64 {
    names.iter().fold(0, |mask, name| {
        let full = format!("CAP_{}", name.trim_start_matches("CAP_"));
        let cap: vigil_privs::Capability = full.parse().expect("a capability name");
        mask | cap.bitmask()
    })
}

/// A `/proc/PID/status` line's value (`CapEff`, `NoNewPrivs`, `Seccomp`).
fn status_value<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .map(str::trim)
}

/// Which of the workload's actions an alert is about.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Act {
    /// The shell's `exec 3<&-`: the close of the descriptor it opened before the agent
    /// started, known to the agent from its start snapshot only.
    InheritedClose,
    /// `cat /data/marker`, run (exec'd by the shell) after the agent started.
    CatOpen,
}

/// The alert about `act` among `alerts`: by its command line (the shell's before it execs
/// `cat`, which keeps its pid) and event type. The shell's `exec 3<&-` closes descriptor 3
/// and the copy of it it makes first (busybox's `fcntl(3, F_DUPFD_CLOEXEC, 10)`): either
/// alert will do.
fn find_act(alerts: &[Value], act: Act) -> Option<&Value> {
    alerts.iter().find(|a| {
        let fields = &a["output_fields"];
        let cmdline = fields["proc.cmdline"].as_str().unwrap_or_default();
        match act {
            Act::InheritedClose => fields["evt.type"] == "close" && cmdline.starts_with("sh "),
            // busybox runs its applet through /proc/self/exe: `exe /data/marker`.
            Act::CatOpen => {
                fields["evt.type"] != "close"
                    && cmdline.ends_with(" /data/marker")
                    && !cmdline.starts_with("sh ")
            }
        }
    })
}

fn alert_of(run: &PodRun, act: Act) -> Option<&Value> {
    find_act(&run.alerts, act)
}

fn describe(run: &PodRun) -> String {
    format!(
        "watching: {}\nalerts: {:#?}\nagent's stderr:\n{}",
        run.watching,
        run.alerts,
        stderr_of(&run.log)
    )
}

#[test]
fn cri_pod_with_the_charts_capabilities_alerts_and_needs_each_of_them() {
    let _host = host::alone(module_path!());
    const TEST: &str = "cri_pod_with_the_charts_capabilities_alerts_and_needs_each_of_them";
    let reason = cri_requirement()
        .or_else(|| {
            static_vigil()
                .is_none()
                .then(|| "no static vigil (`make static`)".into())
        })
        .or_else(|| {
            helm()
                .is_none()
                .then(|| "helm is not installed (`make test-deps`)".into())
        })
        .or_else(|| {
            (!Path::new("/sys/kernel/btf/vmlinux").exists())
                .then(|| "this kernel has no BTF".into())
        });
    if let Some(reason) = reason {
        assert!(!strict(), "{TEST}: VIGIL_TEST_STRICT=1 but {reason}");
        eprintln!("skipping {TEST}: {reason}");
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("lp-cri");
    let share = dir.join("share");
    fs::create_dir_all(&share).unwrap();
    fs::write(share.join("marker"), "here\n").unwrap();
    let rootfs = workload_rootfs(&dir);
    let (workload_image, pause) = oci_archives(&dir, &rootfs, &rootfs).expect("test images");
    let (agent_image, agent_ref) = agent_image_archive(&dir).expect("the agent's image");
    let helm = helm().expect("helm (checked)");
    let manifests = render(&helm, &dir, &test_values(&agent_ref, "containerd", &dir));
    let chart_caps =
        added_capabilities(&agent_container(pod_template(&manifests))["securityContext"]);
    assert!(!chart_caps.is_empty(), "the chart adds no capability");

    let config = dir.join("containerd.toml");
    fs::write(&config, CONTAINERD_CONFIG).unwrap();
    let mut tracefs = Tracefs::mount();
    let daemon = Containerd::start(&config, &dir.join("containerd.log"));
    daemon.import(&[&workload_image, &pause, &agent_image]);

    // The chart's capabilities: the agent watches and alerts with the pod's fields.
    let full = run_pods(&daemon, &dir, &manifests, "full", &Variant::default());
    let mut failures = Vec::new();
    check_full_run(&full, &chart_caps, &mut failures);
    assert!(
        failures.is_empty(),
        "{}\n{}",
        failures.join("\n"),
        describe(&full)
    );

    // Without each capability: the failure it is there to prevent.
    for cap in &chart_caps {
        let name = cap.trim_start_matches("CAP_");
        let case = format!("no-{}", name.to_lowercase().replace('_', "-"));
        let variant = Variant {
            without: Some(name),
            ..Variant::default()
        };
        let run = run_pods(&daemon, &dir, &manifests, &case, &variant);
        let mut wrong = Vec::new();
        check_run_without(&run, cap, &mut wrong);
        if !wrong.is_empty() {
            failures.extend(wrong);
            failures.push(describe(&run));
        }
    }

    // A runtime whose default profile refuses bpf() without CAP_SYS_ADMIN (containerd before
    // 1.6.9, Docker before 23): this one's, without bpf. The agent must say it is the filter.
    {
        let profile = dir.join("seccomp-without-bpf.json");
        fs::write(&profile, without_bpf(&full.inspect).to_string()).unwrap();
        let variant = Variant {
            seccomp: Some(profile),
            ..Variant::default()
        };
        let run = run_pods(&daemon, &dir, &manifests, "seccomp", &variant);
        let stderr = stderr_of(&run.log);
        let line = "the kernel refused the bpf() system call (Operation not permitted (os error \
                    1)) although this process has the capabilities for it: refused by this \
                    process's seccomp filter";
        if run.watching || !stderr.contains(line) {
            failures.push(format!("a seccomp profile without bpf: no `{line}`"));
            failures.push(describe(&run));
        }
    }

    // No host tracefs: BPF trampolines need none; without them the agent says what it needs.
    let fexit = !stderr_of(&full.log).contains("hooked by their exit tracepoints");
    let was_mounted = !tracefs.mounted_here;
    if !was_mounted {
        tracefs.unmount();
        let run = run_pods(&daemon, &dir, &manifests, "no-tracefs", &Variant::default());
        let stderr = stderr_of(&run.log);
        let wrong = if fexit {
            !run.watching || alert_of(&run, Act::CatOpen).is_none()
        } else {
            run.watching
                || !stderr.contains("eBPF capture needs tracefs")
                || !stderr.contains("since BPF trampolines (fexit), which need none, are refused")
                || !stderr.contains("in a container, mount the host's `/sys/kernel/tracing`")
        };
        if wrong {
            failures.push(if fexit {
                "no tracefs, fexit: the agent must watch and alert".into()
            } else {
                "no tracefs and no fexit: the agent must stop with the line that says so".into()
            });
            failures.push(describe(&run));
        }
    } else {
        eprintln!("{TEST}: tracefs was mounted at /sys/kernel/tracing before the test: the case without it is not run");
    }
    drop(daemon);
    drop(tracefs);
    let _ = fs::remove_dir_all(&dir);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The seccomp profile the runtime applied to the agent (`crictl inspect`'s runtime spec),
/// with `bpf` taken out of every rule that allows it, as a profile file for a `Localhost`
/// seccomp profile.
fn without_bpf(inspect: &Value) -> Value {
    let mut profile = inspect["info"]["runtimeSpec"]["linux"]["seccomp"].clone();
    assert!(
        profile["syscalls"].is_array(),
        "no seccomp profile in {inspect}"
    );
    for rule in profile["syscalls"].as_array_mut().expect("checked") {
        if let Some(names) = rule["names"].as_array_mut() {
            names.retain(|n| n != "bpf");
        }
    }
    profile["syscalls"]
        .as_array_mut()
        .expect("checked")
        .retain(|r| r["names"].as_array().is_some_and(|n| !n.is_empty()));
    profile
}

/// With the chart's capabilities: the runtime ran the pod as the chart says, the agent kept
/// exactly those capabilities, and both alerts carry the workload's container, pod and user.
fn check_full_run(run: &PodRun, chart_caps: &[String], failures: &mut Vec<String>) {
    if !run.watching {
        failures.push("with the chart's capabilities the agent did not start".into());
        return;
    }
    // The spec the runtime ran: not privileged, exactly the chart's capabilities, no privilege
    // gain, a read-only root, the runtime's default seccomp profile (which lets bpf and
    // perf_event_open through for CAP_BPF and CAP_PERFMON).
    let spec = &run.inspect["info"]["runtimeSpec"];
    let caps = &spec["process"]["capabilities"];
    for set in ["bounding", "effective", "permitted"] {
        let mut got: Vec<String> = caps[set]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c.as_str().map(str::to_owned))
            .collect();
        got.sort();
        if got != chart_caps {
            failures.push(format!(
                "{set} capabilities {got:?}, the chart's {chart_caps:?}"
            ));
        }
    }
    if caps["inheritable"]
        .as_array()
        .is_some_and(|a| !a.is_empty())
    {
        failures.push(format!("inheritable capabilities: {}", caps["inheritable"]));
    }
    if spec["process"]["noNewPrivileges"] != true {
        failures.push("noNewPrivileges is not set".into());
    }
    if spec["root"]["readonly"] != true {
        failures.push("the root filesystem is writable".into());
    }
    if spec["linux"]["maskedPaths"]
        .as_array()
        .is_none_or(|a| a.is_empty())
    {
        failures.push("no masked paths: the container ran privileged".into());
    }
    let seccomp = &spec["linux"]["seccomp"];
    if seccomp["defaultAction"] != "SCMP_ACT_ERRNO" {
        failures.push(format!(
            "not the runtime's default seccomp profile: {}",
            seccomp["defaultAction"]
        ));
    }
    for call in ["bpf", "perf_event_open"] {
        let allowed = seccomp["syscalls"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| {
                s["action"] == "SCMP_ACT_ALLOW"
                    && s["names"]
                        .as_array()
                        .is_some_and(|n| n.iter().any(|n| n == call))
            });
        if !allowed {
            failures.push(format!(
                "the runtime's default seccomp profile refuses {call}"
            ));
        }
    }
    // The agent itself: the chart's capabilities, all kept after its drop; no privilege gain;
    // a seccomp filter.
    let mask = capability_mask(chart_caps);
    let eff = status_value(&run.status, "CapEff").and_then(|v| u64::from_str_radix(v, 16).ok());
    if eff != Some(mask) {
        failures.push(format!("the agent's CapEff {eff:x?}, the chart's {mask:x}"));
    }
    if status_value(&run.status, "NoNewPrivs") != Some("1") {
        failures.push("the agent runs without no_new_privs".into());
    }
    if status_value(&run.status, "Seccomp") != Some("2") {
        failures.push("the agent runs without a seccomp filter".into());
    }
    let stderr = stderr_of(&run.log);
    if stderr.contains("lacks CAP_") {
        failures.push("the agent says it lacks a capability".into());
    }

    // The alerts: the read by cat (a process started after the agent) with the container's,
    // the pod's and the image user's fields; the close of the descriptor opened before the
    // agent started (known from its start snapshot: /proc/PID/fd of another user's process).
    let (id, pod, uid) = &run.workload;
    let expected = [
        ("container.id", json!(&id[..12])),
        ("container.name", json!("shop")),
        (
            "container.image.repository",
            json!("localhost/vigiltest/bb"),
        ),
        ("k8s.pod.name", json!(pod)),
        ("k8s.ns.name", json!("shop")),
        ("k8s.pod.uid", json!(uid)),
        ("k8s.pod.label[app]", json!("shop")),
        ("user.uid", json!(WORKLOAD_UID)),
        ("user.name", json!(WORKLOAD_USER)),
    ];
    for act in [Act::CatOpen, Act::InheritedClose] {
        let what = match act {
            Act::InheritedClose => "the close of descriptor 3",
            Act::CatOpen => "the open by cat",
        };
        let Some(alert) = alert_of(run, act) else {
            failures.push(format!("no alert for the workload's {what}"));
            continue;
        };
        for (field, want) in &expected {
            if alert["output_fields"][*field] != *want {
                failures.push(format!(
                    "{what}: {field} = {}, expected {want}",
                    alert["output_fields"][*field]
                ));
            }
        }
    }
}

/// Without `cap` (`CAP_…`): what the agent must say or miss.
fn check_run_without(run: &PodRun, cap: &str, failures: &mut Vec<String>) {
    let stderr = stderr_of(&run.log);
    let exited = run.inspect["status"]["state"] == "CONTAINER_EXITED";
    match cap {
        // Loading eBPF programs needs both: the agent stops at once and names the missing one.
        "CAP_BPF" | "CAP_PERFMON" => {
            let line =
                format!("needs root or the capabilities CAP_BPF and CAP_PERFMON (missing: {cap})");
            if run.watching
                || !exited
                || run.inspect["status"]["exitCode"] != 1
                || !stderr.contains(&line)
            {
                failures.push(format!(
                    "without {cap}: the agent must exit 1 with `{line}`"
                ));
            }
        }
        // Other users' /proc entries: the start snapshot has no descriptors of the workload's
        // shell (no close alert); without CAP_SYS_PTRACE the container's user database cannot
        // be read through /proc/PID/root either (no user name).
        "CAP_SYS_PTRACE" | "CAP_DAC_READ_SEARCH" => {
            if !run.watching {
                failures.push(format!("without {cap}: the agent must still watch"));
                return;
            }
            let line = format!("lacks {cap}");
            if !stderr.contains(&line) {
                failures.push(format!("without {cap}: no start-up warning `{line}`"));
            }
            if alert_of(run, Act::InheritedClose).is_some() {
                failures.push(format!(
                    "without {cap}: the descriptor opened before the agent started is known"
                ));
            }
            let Some(open) = alert_of(run, Act::CatOpen) else {
                failures.push(format!("without {cap}: no alert for the open by cat"));
                return;
            };
            let name = &open["output_fields"]["user.name"];
            let named = *name == json!(WORKLOAD_USER);
            if named != (cap == "CAP_DAC_READ_SEARCH") {
                failures.push(format!("without {cap}: user.name = {name}"));
            }
        }
        other => failures.push(format!(
            "the chart adds {other}, which this test does not know the use of"
        )),
    }
}

// --- Docker ---------------------------------------------------------------------------------

/// How the agent's container is started under Docker.
struct DockerCase<'a> {
    name: &'a str,
    /// `--cap-add` names (the chart's, or a substitute set).
    caps: &'a [String],
    /// A `--security-opt seccomp=…` value, if any (else Docker's default profile).
    seccomp: Option<&'a str>,
}

/// `docker run` flags for the chart's DaemonSet pod: its security context (with `case`'s
/// capabilities and seccomp option), host PID namespace and volumes (hostPath and the
/// rendered ConfigMaps, written below `dir`).
fn docker_flags(manifests: &BTreeMap<String, Value>, dir: &Path, case: &DockerCase) -> Vec<String> {
    let pod = pod_template(manifests);
    let container = agent_container(pod);
    let mut flags: Vec<String> = vec!["--network".into(), "host".into()];
    if pod["spec"]["hostPID"] == true {
        flags.extend(["--pid".into(), "host".into()]);
    }
    for (key, value) in container["securityContext"]
        .as_object()
        .expect("securityContext")
    {
        match key.as_str() {
            "privileged" if value == true => flags.push("--privileged".into()),
            "privileged" => {}
            "allowPrivilegeEscalation" if value == false => {
                flags.extend(["--security-opt".into(), "no-new-privileges".into()]);
            }
            "readOnlyRootFilesystem" if value == true => flags.push("--read-only".into()),
            "capabilities" => {
                for cap in value["drop"].as_array().into_iter().flatten() {
                    flags.push(format!("--cap-drop={}", cap.as_str().expect("a name")));
                }
                for cap in case.caps {
                    flags.push(format!("--cap-add={cap}"));
                }
            }
            // Docker's own default profile, unless the case says otherwise.
            "seccompProfile" if value["type"] == "RuntimeDefault" => {}
            other => panic!("securityContext key `{other}` = {value} is not translated"),
        }
    }
    if let Some(profile) = case.seccomp {
        flags.extend(["--security-opt".into(), format!("seccomp={profile}")]);
    }
    let volumes: BTreeMap<&str, &Value> = pod["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .map(|v| (v["name"].as_str().expect("volume name"), v))
        .collect();
    for mount in container["volumeMounts"].as_array().expect("volumeMounts") {
        let volume = volumes[mount["name"].as_str().expect("mount name")];
        let source = if let Some(path) = volume["hostPath"]["path"].as_str() {
            if volume["hostPath"]["type"] == "DirectoryOrCreate" {
                fs::create_dir_all(path).unwrap_or_else(|e| panic!("create {path}: {e}"));
            }
            PathBuf::from(path)
        } else if let Some(cm) = volume["configMap"]["name"].as_str() {
            config_map(manifests, dir, cm, mount)
        } else {
            panic!("volume {volume} is not translated by this test");
        };
        let ro = if mount["readOnly"] == true { ":ro" } else { "" };
        flags.extend([
            "-v".into(),
            format!(
                "{}:{}{ro}",
                source.display(),
                mount["mountPath"].as_str().expect("mountPath")
            ),
        ]);
    }
    flags
}

/// What one agent container under Docker did.
struct DockerRun {
    watching: bool,
    stderr: String,
    /// The alerts of [`RULE`] for the workload container.
    alerts: Vec<Value>,
    /// The workload container's id and name.
    workload: (String, String),
    /// The agent's `/proc/PID/status` while it watched.
    status: String,
}

/// Runs the workload container, then the agent (`docker run -d … IMAGE ARGS` from the chart),
/// as [`run_pods`] does; `Err`: Docker refused to create the agent's container.
fn docker_run(
    daemon: &Dockerd,
    dir: &Path,
    manifests: &BTreeMap<String, Value>,
    case: &DockerCase,
) -> Result<DockerRun, String> {
    let share = dir.join("share");
    let go = format!("go-{}", case.name);
    let workload_name = format!("vt-lp-shop-{}", case.name);
    let workload = daemon
        .docker(&[
            "run",
            "-d",
            "--name",
            &workload_name,
            "--network",
            "none",
            "-u",
            &WORKLOAD_UID.to_string(),
            "-v",
            &format!("{}:/data:ro", share.display()),
            DOCKER_WORKLOAD_IMAGE,
            "sh",
            "-c",
            &workload_script(&go),
        ])
        .unwrap_or_else(|e| panic!("{}: docker run (workload): {e}", case.name));
    let container = agent_container(pod_template(manifests));
    let name = format!("vt-lp-vigil-{}", case.name);
    let mut args: Vec<String> = vec!["run".into(), "-d".into(), "--name".into(), name.clone()];
    args.extend(docker_flags(manifests, dir, case));
    args.push(container["image"].as_str().expect("image").to_owned());
    args.extend(
        container["args"]
            .as_array()
            .expect("args")
            .iter()
            .map(|a| a.as_str().expect("an argument").to_owned()),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let remove = || {
        let _ = daemon.docker(&["rm", "-f", &name, &workload_name]);
    };
    if let Err(e) = daemon.docker(&args) {
        remove();
        return Err(e);
    }
    // `docker logs` writes the container's stdout and stderr to its own.
    let logs = || {
        Command::new("docker")
            .args(["-H", &daemon.host, "logs", &name])
            .output()
            .expect("docker logs")
    };
    let running = || {
        daemon
            .docker(&["inspect", "-f", "{{.State.Running}}", &name])
            .is_ok_and(|s| s == "true")
    };
    let deadline = Instant::now() + START_WAIT;
    let watching = loop {
        if text(&logs().stderr).contains("vigil: watching") {
            break true;
        }
        if !running() || Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    let short = workload[..12].to_owned();
    let alerts = || -> Vec<Value> {
        text(&logs().stdout)
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|a| a["rule"] == RULE && a["output_fields"]["container.id"] == short.as_str())
            .collect()
    };
    let mut found = Vec::new();
    let mut status = String::new();
    if watching {
        let pid = daemon
            .docker(&["inspect", "-f", "{{.State.Pid}}", &name])
            .expect("docker inspect");
        status = fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        fs::write(share.join(&go), "").unwrap();
        let deadline = Instant::now() + ALERT_WAIT;
        while Instant::now() < deadline {
            found = alerts();
            if found
                .iter()
                .any(|a| find_act(std::slice::from_ref(a), Act::CatOpen).is_some())
            {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        std::thread::sleep(Duration::from_secs(2));
        found = alerts();
    }
    let stderr = text(&logs().stderr);
    remove();
    Ok(DockerRun {
        watching,
        stderr,
        alerts: found,
        workload: (workload, workload_name),
        status,
    })
}

/// The workload image under Docker (imported by the test).
const DOCKER_WORKLOAD_IMAGE: &str = "vigiltest/bb:1.0";

/// The agent watched, kept the capabilities it was given (`caps`, Docker's names) after its
/// drop, and alerted on the workload's open and close with the container's fields and the
/// image's user.
fn check_docker_run(run: &DockerRun, caps: &[String], what: &str, failures: &mut Vec<String>) {
    if !run.watching {
        failures.push(format!("{what}: the agent did not start:\n{}", run.stderr));
        return;
    }
    let eff = status_value(&run.status, "CapEff").and_then(|v| u64::from_str_radix(v, 16).ok());
    if eff != Some(capability_mask(caps)) {
        failures.push(format!(
            "{what}: the agent's CapEff {eff:x?} after its drop"
        ));
    }
    let (id, name) = &run.workload;
    let expected = [
        ("container.id", json!(&id[..12])),
        ("container.name", json!(name)),
        ("container.image.repository", json!("vigiltest/bb")),
        ("user.uid", json!(WORKLOAD_UID)),
        ("user.name", json!(WORKLOAD_USER)),
    ];
    for close in [false, true] {
        let act = if close {
            Act::InheritedClose
        } else {
            Act::CatOpen
        };
        let alert = find_act(&run.alerts, act);
        let Some(alert) = alert else {
            failures.push(format!(
                "{what}: no alert for the workload's {}\n{}",
                if close { "close" } else { "open" },
                run.stderr
            ));
            continue;
        };
        for (field, want) in &expected {
            if alert["output_fields"][*field] != *want {
                failures.push(format!(
                    "{what}: {field} = {}, expected {want}",
                    alert["output_fields"][*field]
                ));
            }
        }
    }
}

/// `docker run` with the chart's capabilities (`--cap-drop ALL --cap-add …`), no
/// `--privileged`, Docker's default seccomp profile. Docker learnt the names BPF and PERFMON
/// and let bpf() and perf_event_open() through its default profile for them in version 23;
/// before (Debian 12's docker.io is 20.10), `--cap-add BPF` is refused, and the documented
/// substitute is `CAP_SYS_ADMIN` for both (which the agent then keeps:
/// `vigil_privs::watch_keeps`). A Docker that knows the names but whose profile refuses bpf()
/// stops the agent with the line naming the seccomp filter, and `--security-opt
/// seccomp=unconfined` must then work. Each way, the agent alerts with the workload container's
/// fields and user.
#[test]
fn docker_run_with_the_charts_capabilities_alerts() {
    let _host = host::alone(module_path!());
    const TEST: &str = "docker_run_with_the_charts_capabilities_alerts";
    let reason = docker_requirement()
        .or_else(|| {
            static_vigil()
                .is_none()
                .then(|| "no static vigil (`make static`)".into())
        })
        .or_else(|| {
            helm()
                .is_none()
                .then(|| "helm is not installed (`make test-deps`)".into())
        })
        .or_else(|| {
            (!Path::new("/sys/kernel/btf/vmlinux").exists())
                .then(|| "this kernel has no BTF".into())
        });
    if let Some(reason) = reason {
        assert!(!strict(), "{TEST}: VIGIL_TEST_STRICT=1 but {reason}");
        eprintln!("skipping {TEST}: {reason}");
        return;
    }
    let _serial = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("lp-docker");
    let share = dir.join("share");
    fs::create_dir_all(&share).unwrap();
    fs::write(share.join("marker"), "here\n").unwrap();
    let rootfs = workload_rootfs(&dir);
    let (agent_image, agent_ref) = agent_image_archive(&dir).expect("the agent's image");
    let helm = helm().expect("helm (checked)");
    let manifests = render(&helm, &dir, &test_values(&agent_ref, "docker", &dir));
    let chart_caps: Vec<String> =
        added_capabilities(&agent_container(pod_template(&manifests))["securityContext"])
            .iter()
            .map(|c| c.trim_start_matches("CAP_").to_owned())
            .collect();
    let _tracefs = Tracefs::mount();
    let daemon = Dockerd::start(None, dir.join("dockerd.log"));
    daemon.import_as(&rootfs, DOCKER_WORKLOAD_IMAGE);
    daemon
        .docker(&["load", "-i", &agent_image.to_string_lossy()])
        .expect("docker load");
    let version = daemon
        .docker(&["version", "--format", "{{.Server.Version}}"])
        .expect("docker version");
    let major: u32 = version
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or_else(|| panic!("docker version {version:?}"));

    let mut failures = Vec::new();
    let chart = DockerCase {
        name: "chart",
        caps: &chart_caps,
        seccomp: None,
    };
    match docker_run(&daemon, &dir, &manifests, &chart) {
        Err(e) if e.contains("unknown capability") => {
            if major >= 23 {
                failures.push(format!(
                    "Docker {version} does not know the chart's capabilities: {e}"
                ));
            }
            eprintln!("{TEST}: Docker {version} does not know the names: {e}");
            let substitute: Vec<String> = chart_caps
                .iter()
                .filter(|c| !["BPF", "PERFMON"].contains(&c.as_str()))
                .cloned()
                .chain(["SYS_ADMIN".to_owned()])
                .collect();
            let case = DockerCase {
                name: "sys-admin",
                caps: &substitute,
                seccomp: None,
            };
            let run = docker_run(&daemon, &dir, &manifests, &case).expect("docker run");
            check_docker_run(
                &run,
                &substitute,
                "SYS_ADMIN for BPF and PERFMON",
                &mut failures,
            );
        }
        Err(e) => failures.push(format!("docker run with the chart's capabilities: {e}")),
        Ok(run)
            if !run.watching
                && run
                    .stderr
                    .contains("refused by this process's seccomp filter") =>
        {
            if major >= 23 {
                failures.push(format!(
                    "Docker {version}'s default profile refuses bpf():\n{}",
                    run.stderr
                ));
            }
            let case = DockerCase {
                name: "unconfined",
                caps: &chart_caps,
                seccomp: Some("unconfined"),
            };
            let run = docker_run(&daemon, &dir, &manifests, &case).expect("docker run");
            check_docker_run(
                &run,
                &chart_caps,
                "the chart's capabilities, seccomp=unconfined",
                &mut failures,
            );
        }
        Ok(run) => check_docker_run(&run, &chart_caps, "the chart's capabilities", &mut failures),
    }
    drop(daemon);
    let _ = fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "Docker {version}:\n{}",
        failures.join("\n")
    );
}

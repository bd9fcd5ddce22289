//! The Helm chart `deploy/helm/vigil`: `helm lint`, `helm template` with the default values and
//! with the outputs and custom rules a deployment sets, then the rendered manifests checked:
//! the ConfigMap's `vigil.yaml` loads with `vigil config show -c` without an error or a warning
//! and every key the chart sets takes effect; the DaemonSet's `-c` path, rules directories and
//! spool directories are mounted from volumes that exist (the config file from the rendered
//! ConfigMap's key); probes and the metrics Service point at the agent's web server.
//!
//! Requires `helm` (`make deps` installs it into `target/tools/bin`; `HELM=/path/to/helm`
//! overrides); without it the test skips with the reason, and fails under
//! `VIGIL_TEST_STRICT=1`.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::support::{host, run_ok, VIGIL};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub(crate) fn chart() -> PathBuf {
    root().join("deploy/helm/vigil")
}

pub(crate) fn helm() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HELM") {
        return Some(PathBuf::from(p)).filter(|p| p.is_file());
    }
    let local = root().join("target/tools/bin/helm");
    if local.is_file() {
        return Some(local);
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("helm"))
            .find(|p| p.is_file())
    })
}

/// The values a production install sets on top of the defaults (deploy/README.md's example),
/// plus custom rules listed in `rules_files`.
const PRODUCTION_VALUES: &str = r#"
image:
  repository: registry.example.com/vigil
config:
  rules_files:
    - /etc/vigil/rules.d
  http_output:
    enabled: true
    url: http://falcosidekick.falco:2801/
  syslog_output:
    enabled: false
  file_output:
    enabled: true
    filename: /var/lib/vigil/events.json
    spool_dir: /var/lib/vigil/spool/file
customRules:
  local_rules.yaml: |-
    - rule: Local shell
      desc: a shell in a container
      condition: evt.type = execve and proc.name = bash and container.id != host
      output: "shell (user=%user.name)"
      priority: WARNING
"#;

#[test]
fn helm_chart_lints_and_renders_a_configuration_vigil_loads() {
    let _host = host::shared();
    const TEST: &str = "helm_chart_lints_and_renders_a_configuration_vigil_loads";
    let Some(helm) = helm() else {
        let reason = "helm is not installed (`make deps` installs it into target/tools/bin)";
        if std::env::var("VIGIL_TEST_STRICT").is_ok_and(|v| v == "1") {
            panic!("{TEST}: VIGIL_TEST_STRICT=1 but {reason}");
        }
        eprintln!("skipping {TEST}: {reason}");
        return;
    };
    let dir = std::env::temp_dir().join(format!("vigil-helm-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("scratch dir");
    let values = dir.join("production.yaml");
    fs::write(&values, PRODUCTION_VALUES).expect("write values");

    for extra in [None, Some(&values)] {
        let label = if extra.is_some() {
            "production values"
        } else {
            "default values"
        };
        // helm keeps its cache and settings in the scratch directory, not in $HOME.
        let helm_cmd = || {
            let mut c = Command::new(&helm);
            for (var, sub) in [
                ("HELM_CACHE_HOME", "cache"),
                ("HELM_CONFIG_HOME", "config"),
                ("HELM_DATA_HOME", "data"),
            ] {
                c.env(var, dir.join("helm").join(sub));
            }
            c
        };
        let mut lint = helm_cmd();
        lint.args(["lint", "--strict"]).arg(chart());
        if let Some(v) = extra {
            lint.arg("-f").arg(v);
        }
        run_ok(&mut lint);
        let mut template = helm_cmd();
        template
            .args(["template", "vigil"])
            .arg(chart())
            .args(["--namespace", "vigil"]);
        if let Some(v) = extra {
            template.arg("-f").arg(v);
        }
        let rendered = String::from_utf8(run_ok(&mut template).stdout).expect("utf-8 manifests");
        check_manifests(&dir, label, &rendered);
        let ds = &by_kind(&rendered)["DaemonSet/vigil"];
        check_runtime_mounts(label, &ds["spec"]["template"], ALL_RUNTIMES);
    }
    // One runtime per node pool: only its directories are mounted.
    for (key, runtime) in [
        ("containerd", "containerd"),
        ("crio", "runc"),
        ("docker", "docker"),
    ] {
        let mut template = Command::new(&helm);
        for (var, sub) in [
            ("HELM_CACHE_HOME", "cache"),
            ("HELM_CONFIG_HOME", "config"),
            ("HELM_DATA_HOME", "data"),
        ] {
            template.env(var, dir.join("helm").join(sub));
        }
        template.args(["template", "vigil"]).arg(chart());
        for other in ["containerd", "crio", "docker"] {
            template.args([
                "--set",
                &format!("containerRuntimes.{other}={}", other == key),
            ]);
        }
        let rendered = String::from_utf8(run_ok(&mut template).stdout).expect("utf-8 manifests");
        let ds = &by_kind(&rendered)["DaemonSet/vigil"];
        check_runtime_mounts(&format!("{key} only"), &ds["spec"]["template"], &[runtime]);
    }
    let _ = fs::remove_dir_all(&dir);
}

/// The runtimes (as the metadata reader names them: `runc` is CRI-O's runc root) a node of
/// Kubernetes may run, all mounted by default.
const ALL_RUNTIMES: &[&str] = &["containerd", "runc", "docker"];

/// Host files the agent reads besides the runtimes' state: the kernel's BTF and tracefs
/// (`leastPrivileged`), the user database, and where it writes its spools.
const NON_RUNTIME_HOST_PATHS: &[&str] = &[
    "/sys/kernel/btf",
    "/sys/kernel/tracing",
    "/etc/passwd",
    "/etc/group",
];

/// The pod mounts, read-only and at the same paths as on the host, every directory the
/// container metadata reader reads for `runtimes` (`RuntimeDirs::read_dirs` of the host's
/// standard locations), and no other host path but [`NON_RUNTIME_HOST_PATHS`] and the spool:
/// each runtime mount is one of those directories or the parent of some (a parent survives
/// the runtime re-creating the directory below it). The host PID namespace gives `/proc`
/// (cgroups name each process's container; docker daemons are found there).
fn check_runtime_mounts(label: &str, pod: &Value, runtimes: &[&str]) {
    assert_eq!(pod["spec"]["hostPID"], true, "{label}: hostPID");
    let needed: Vec<String> = vigil_state::RuntimeDirs::under(Path::new("/"))
        .read_dirs()
        .into_iter()
        .filter(|(_, runtime)| runtimes.contains(&runtime.as_str()))
        .map(|(dir, _)| dir.to_string_lossy().into_owned())
        .collect();
    assert!(!needed.is_empty(), "{label}: no directory for {runtimes:?}");
    let host_paths: BTreeMap<&str, &str> = pod["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .filter_map(|v| Some((v["name"].as_str()?, v["hostPath"]["path"].as_str()?)))
        .collect();
    let mounts: Vec<(&str, &Value)> = pod["spec"]["containers"][0]["volumeMounts"]
        .as_array()
        .expect("volumeMounts")
        .iter()
        .filter_map(|m| Some((*host_paths.get(m["name"].as_str()?)?, m)))
        .collect();
    let covers = |at: &str, dir: &str| {
        dir == at || dir.starts_with(&format!("{}/", at.trim_end_matches('/')))
    };
    for dir in &needed {
        let (host, mount) = mounts
            .iter()
            .find(|(_, m)| covers(m["mountPath"].as_str().unwrap_or_default(), dir))
            .unwrap_or_else(|| panic!("{label}: {dir} ({runtimes:?}) is not mounted"));
        assert_eq!(
            Some(*host),
            mount["mountPath"].as_str(),
            "{label}: {dir} is mounted from another host path"
        );
        assert_eq!(
            mount["readOnly"], true,
            "{label}: {dir} is mounted writable"
        );
    }
    let spool = mounts
        .iter()
        .find(|(_, m)| m["name"] == "spool")
        .map(|(host, _)| *host);
    for (host, mount) in &mounts {
        if NON_RUNTIME_HOST_PATHS.contains(host) || Some(*host) == spool {
            continue;
        }
        let at = mount["mountPath"].as_str().unwrap_or_default();
        let needed_here = needed
            .iter()
            .any(|dir| dir == at || Path::new(dir).parent() == Some(Path::new(at)));
        assert!(
            needed_here,
            "{label}: host path {host} (at {at}) is mounted but the agent reads no directory \
             there for {runtimes:?}: {needed:?}"
        );
    }
}

/// The plain manifest `deploy/kubernetes/vigil.yaml` mounts what the chart's defaults do.
#[test]
fn kubernetes_manifest_mounts_what_the_metadata_reader_reads() {
    let _host = host::shared();
    let text = fs::read_to_string(root().join("deploy/kubernetes/vigil.yaml")).expect("manifest");
    let m = by_kind(&text);
    let ds = m
        .get("DaemonSet/vigil")
        .unwrap_or_else(|| panic!("no DaemonSet/vigil in {:?}", m.keys()));
    check_runtime_mounts(
        "deploy/kubernetes/vigil.yaml",
        &ds["spec"]["template"],
        ALL_RUNTIMES,
    );
}

/// `kind/name` → manifest.
pub(crate) fn by_kind(rendered: &str) -> BTreeMap<String, Value> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(rendered)
        .unwrap_or_else(|e| panic!("rendered manifests are not YAML: {e}\n{rendered}"));
    docs.into_iter()
        .filter(|d| !d.is_null())
        .map(|d| {
            let key = format!(
                "{}/{}",
                d["kind"].as_str().expect("kind"),
                d["metadata"]["name"].as_str().expect("metadata.name")
            );
            (key, d)
        })
        .collect()
}

fn check_manifests(dir: &Path, label: &str, rendered: &str) {
    let m = by_kind(rendered);
    let ds = m
        .get("DaemonSet/vigil")
        .unwrap_or_else(|| panic!("{label}: no DaemonSet/vigil in {:?}", m.keys()));
    let pod = &ds["spec"]["template"];
    let container = &pod["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .expect("container args")
        .iter()
        .map(|a| a.as_str().expect("string arg"))
        .collect();
    assert_eq!(args.first(), Some(&"watch"), "{label}: args {args:?}");
    let config_path = args
        .iter()
        .position(|a| *a == "-c")
        .and_then(|i| args.get(i + 1))
        .unwrap_or_else(|| panic!("{label}: no `-c FILE` in {args:?}"));

    // Every mount names a volume; every ConfigMap volume names a rendered ConfigMap.
    let volumes: BTreeMap<&str, &Value> = pod["spec"]["volumes"]
        .as_array()
        .expect("volumes")
        .iter()
        .map(|v| (v["name"].as_str().expect("volume name"), v))
        .collect();
    let mounts = container["volumeMounts"].as_array().expect("volumeMounts");
    for mount in mounts {
        let name = mount["name"].as_str().expect("mount name");
        let volume = volumes
            .get(name)
            .unwrap_or_else(|| panic!("{label}: mount {name} has no volume"));
        if let Some(cm) = volume["configMap"]["name"].as_str() {
            let cm = m
                .get(&format!("ConfigMap/{cm}"))
                .unwrap_or_else(|| panic!("{label}: volume {name} needs ConfigMap {cm}"));
            if let Some(key) = mount["subPath"].as_str() {
                assert!(
                    cm["data"].get(key).is_some(),
                    "{label}: ConfigMap has no key {key}"
                );
            }
        }
    }
    // The mount that holds a path, when one does.
    let mount_of = |path: &str| {
        mounts.iter().find(|mount| {
            let at = mount["mountPath"].as_str().unwrap_or_default();
            path == at || path.starts_with(&format!("{}/", at.trim_end_matches('/')))
        })
    };

    // The configuration file: the rendered ConfigMap's key, mounted where `-c` reads it.
    let config_mount = mount_of(config_path)
        .unwrap_or_else(|| panic!("{label}: `-c {config_path}` is not on a mounted volume"));
    assert_eq!(
        config_mount["mountPath"], *config_path,
        "{label}: the config file is mounted as a file"
    );
    let key = config_mount["subPath"].as_str().expect("config subPath");
    let cm_name = volumes[config_mount["name"].as_str().unwrap()]["configMap"]["name"]
        .as_str()
        .expect("config volume is a ConfigMap");
    let text = m[&format!("ConfigMap/{cm_name}")]["data"][key]
        .as_str()
        .expect("config text")
        .to_owned();
    let file = dir.join("vigil.yaml");
    fs::write(&file, &text).expect("write rendered config");
    let shown = Command::new(VIGIL)
        .args(["config", "show", "-c"])
        .arg(&file)
        .stdin(Stdio::null())
        .output()
        .expect("run vigil config show");
    let stderr = String::from_utf8_lossy(&shown.stderr);
    assert!(
        shown.status.success(),
        "{label}: vigil config show -c <rendered vigil.yaml> failed: {stderr}\n{text}"
    );
    let lower = stderr.to_lowercase();
    assert!(
        !lower.contains("error") && !lower.contains("warning"),
        "{label}: the rendered configuration has problems: {stderr}\n{text}"
    );

    // Every key the chart sets is in effect.
    let chart_config: Value = serde_saphyr::from_str(&text).expect("rendered config is YAML");
    let effective: Value = serde_saphyr::from_str(&String::from_utf8_lossy(&shown.stdout))
        .expect("config show prints YAML");
    let mut leaves = Vec::new();
    collect_leaves(&chart_config, String::new(), &mut leaves);
    assert!(leaves.len() > 5, "{label}: too few keys in {text}");
    for (path, want) in &leaves {
        let got = lookup(&effective, path);
        assert_eq!(
            got,
            Some(want),
            "{label}: `{path}` set to {want} by the chart is {got:?} in effect"
        );
    }

    // Rules directories are mounted; spools and the alert file on writable mounts.
    for rules in chart_config["rules_files"].as_array().into_iter().flatten() {
        let rules = rules.as_str().expect("rules path");
        assert!(
            mount_of(rules).is_some(),
            "{label}: rules_files {rules} is not mounted"
        );
    }
    for (path, value) in &leaves {
        let written = path.ends_with(".spool_dir") || path == "file_output.filename";
        if let (true, Some(at)) = (written, value.as_str()) {
            let mount = mount_of(at)
                .unwrap_or_else(|| panic!("{label}: {path} = {at} is not on a mounted volume"));
            assert_ne!(
                mount["readOnly"], true,
                "{label}: {path} = {at} is on a read-only mount"
            );
        }
    }

    // The web server: the container port, the probes and the metrics Service.
    let web = &effective["webserver"];
    let port = web["listen_port"].as_u64().expect("listen_port");
    let ports = container["ports"].as_array().expect("container ports");
    let port_name = ports
        .iter()
        .find(|p| p["containerPort"].as_u64() == Some(port))
        .and_then(|p| p["name"].as_str())
        .unwrap_or_else(|| panic!("{label}: no named container port {port}"));
    assert_eq!(
        web["listen_address"], "0.0.0.0",
        "{label}: probes reach the pod IP"
    );
    for probe in ["livenessProbe", "readinessProbe"] {
        let get = &container[probe]["httpGet"];
        assert_eq!(get["path"], web["k8s_healthz_endpoint"], "{label}: {probe}");
        assert_eq!(get["port"], port_name, "{label}: {probe}");
    }
    let service = m
        .get("Service/vigil-metrics")
        .unwrap_or_else(|| panic!("{label}: no metrics Service"));
    assert_eq!(service["spec"]["ports"][0]["targetPort"], port_name);
    let pod_labels = pod["metadata"]["labels"].as_object().expect("pod labels");
    for selector in [
        &service["spec"]["selector"],
        &ds["spec"]["selector"]["matchLabels"],
    ] {
        for (k, v) in selector.as_object().expect("selector") {
            assert_eq!(pod_labels.get(k), Some(v), "{label}: selector {k}");
        }
    }
}

fn collect_leaves(v: &Value, path: String, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(map) if !map.is_empty() => {
            for (k, child) in map {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                collect_leaves(child, p, out);
            }
        }
        _ => out.push((path, v.clone())),
    }
}

fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(v, |v, k| v.get(k))
}

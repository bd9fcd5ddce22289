//! Test support (`cfg(test)`, or the `test-support` feature for the state engine's tests):
//! runtime state written as the runtimes write it, under a scratch directory.

use std::fs;
use std::path::PathBuf;

use serde_json::Value;

use crate::bolt::write::{bucket, db, value};

/// A scratch directory standing for a host's `/`, removed on drop.
pub struct Tree(pub PathBuf);

impl Tree {
    pub fn new(tag: &str) -> Tree {
        let dir =
            std::env::temp_dir().join(format!("vigil-container-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Tree(dir)
    }

    /// Writes `text` to `rel` under the tree, creating its directories.
    pub fn write(&self, rel: &str, text: impl AsRef<[u8]>) {
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

/// runc's `state.json` of container `id` with OCI annotations `labels` (`key=value`) and two
/// mounts.
pub fn runc_state(id: &str, labels: &[&str]) -> String {
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

/// A protobuf `Any` as containerd stores its CRI metadata: a type URL and JSON.
fn any(type_url: &str, json: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for (tag, bytes) in [
        (0x0a, type_url.as_bytes().to_vec()),
        (0x12, json.to_string().into_bytes()),
    ] {
        out.push(tag);
        let mut n = bytes.len();
        while n >= 0x80 {
            out.push((n as u8) | 0x80);
            n >>= 7;
        }
        out.push(n as u8);
        out.extend_from_slice(&bytes);
    }
    out
}

/// containerd's `meta.db` holding the CRI metadata of a container (name `web`, label
/// `team=blue`) and its pod sandbox (labels `app=web`, `pod-template-hash=7d9f`, `empty=`,
/// and ones Falco leaves out of `k8s.pod.labels`).
pub fn cri_meta_db(container: &str, sandbox: &str) -> Vec<u8> {
    let ext = |name: &str, meta: Value| {
        bucket(vec![(
            "extensions",
            bucket(vec![(
                name,
                value(any("github.com/containerd/cri/pkg/store/x/Metadata", &meta)),
            )]),
        )])
    };
    let root = bucket(vec![(
        "v1",
        bucket(vec![(
            "k8s.io",
            bucket(vec![(
                "containers",
                bucket(vec![
                    (
                        container,
                        ext(
                            "io.cri-containerd.container.metadata",
                            serde_json::json!({"Version": "v1", "Metadata": {"ID": container,
                                "Config": {"metadata": {"name": "web"}, "labels": {"team": "blue"}}}}),
                        ),
                    ),
                    (
                        sandbox,
                        ext(
                            "io.cri-containerd.sandbox.metadata",
                            serde_json::json!({"Version": "v1", "Metadata": {"ID": sandbox,
                                "Config": {"labels": {"pod-template-hash": "7d9f", "app": "web",
                                    "empty": "", "io.kubernetes.x": "hidden", "n": 7}}}}),
                        ),
                    ),
                ]),
            )]),
        )]),
    )]);
    db(&root, 3)
}

/// A containerd CRI pod under `tree`: container `id` (named `web`) in sandbox `sandbox`
/// (pod `web-0`), their runc states and the CRI metadata database ([`cri_meta_db`]), whose
/// path is returned.
pub fn cri_pod(tree: &Tree, id: &str, sandbox: &str) -> PathBuf {
    tree.write(
        &format!("run/containerd/runc/k8s.io/{id}/state.json"),
        runc_state(
            id,
            &[
                "io.kubernetes.cri.container-type=container",
                "io.kubernetes.cri.container-name=web",
                &format!("io.kubernetes.cri.sandbox-id={sandbox}"),
                "io.kubernetes.cri.sandbox-name=web-0",
            ],
        ),
    );
    tree.write(
        &format!("run/containerd/runc/k8s.io/{sandbox}/state.json"),
        runc_state(
            sandbox,
            &[
                "io.kubernetes.cri.container-type=sandbox",
                "io.kubernetes.cri.sandbox-name=web-0",
            ],
        ),
    );
    let rel = "var/lib/containerd/io.containerd.metadata.v1.bolt/meta.db";
    tree.write(rel, cri_meta_db(id, sandbox));
    tree.0.join(rel)
}

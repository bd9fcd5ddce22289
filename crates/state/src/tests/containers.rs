//! Container fields through the state engine, over runtime state written as the runtimes
//! write it (`vigil_container::testutil`); the lookups themselves are tested in
//! `vigil-container`.

use vigil_container::testutil::{cri_pod, runc_state, Tree};
use vigil_container::{add_snapshot_containers, RuntimeDirs};

use crate::testutil::{apply, ev, f, field, snapshot};
use crate::{State, StateConfig};

#[test]
fn state_reads_runtime_metadata_when_a_container_execs() {
    const NEW: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let t = Tree::new("state-exec");
    t.write(
        &format!("run/runc/{NEW}/state.json"),
        runc_state(
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
    assert!(state.stats().container_lookups.lookups >= 1);
    // The container's last process exits: its fields still resolve for the exit, then
    // the table forgets it (container churn does not grow it); other containers stay.
    let before = state.stats().containers;
    let exit = apply(
        &mut state,
        ev(300, "procexit")
            .int("status", 0)
            .ts(exec.ts + 10_000_000_000)
            .build(),
    );
    assert_eq!(f(&state, &exit, "container.name"), "job");
    state.finish(&exit);
    assert!(state.containers.get(&NEW.as_bytes()[..12]).is_none());
    assert_eq!(state.stats().containers, before - 1);
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
fn cri_pod_labels_through_the_state_and_a_capture_snapshot() {
    // Not the snapshot's container (testutil), whose metadata the snapshot brings.
    const ID: &str = "9c1e5b0f2a3d4c5b6a7980f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f";
    const SANDBOX: &str = "5b1d2f0c9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";
    let t = Tree::new("state-cri-labels");
    cri_pod(&t, ID, SANDBOX);
    let dirs = RuntimeDirs::under(&t.0);
    // The container's exec brings in its sandbox too.
    let mut state = State::new(StateConfig {
        container_runtime: Some(dirs.clone()),
        ..StateConfig::default()
    });
    state.load_snapshot(&snapshot());
    let exec = apply(
        &mut state,
        ev(300, "execve")
            .bytes("filename", "/bin/cat")
            .bytes("cgroups", format!("0::/kubepods/{ID}"))
            .build(),
    );
    assert_eq!(f(&state, &exec, "container.name"), "web");
    assert_eq!(f(&state, &exec, "container.label.team"), "blue");
    assert_eq!(f(&state, &exec, "k8s.pod.label.app"), "web");
    assert_eq!(f(&state, &exec, "k8s.pod.label[pod-template-hash]"), "7d9f");
    assert_eq!(field(&state, &exec, "k8s.pod.label.team"), None);
    assert_eq!(field(&state, &exec, "container.label.app"), None);
    assert_eq!(f(&state, &exec, "k8s.pod.sandbox_id"), &SANDBOX[..12]);
    assert_eq!(f(&state, &exec, "k8s.pod.full_sandbox_id"), SANDBOX);
    assert_eq!(
        f(&state, &exec, "k8s.pod.labels"),
        "app:web, empty, pod-template-hash:7d9f"
    );
    // A capture's snapshot carries them for its replay (no runtime read there).
    let mut snap = snapshot();
    let worker = snap.threads.iter().position(|t| t.tid == 400).unwrap();
    snap.threads[worker].cgroup = format!("0::/kubepods/{ID}").into_bytes();
    let before = snap.containers.len();
    assert_eq!(add_snapshot_containers(&dirs, &mut snap), 2);
    assert_eq!(snap.containers.len(), before + 2);
    let mut replay = State::new(StateConfig::default());
    replay.load_snapshot(&snap);
    let open = apply(
        &mut replay,
        ev(400, "openat").bytes("name", "/etc/shadow").build(),
    );
    assert_eq!(f(&replay, &open, "container.name"), "web");
    assert_eq!(f(&replay, &open, "container.label.team"), "blue");
    assert_eq!(
        f(&replay, &open, "k8s.pod.labels"),
        "app:web, empty, pod-template-hash:7d9f"
    );
}

#[test]
fn crio_labels_and_pod_labels_from_its_annotations() {
    const ID: &str = "4c1e5b0f2a3d4c5b6a7980f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6e5f";
    const SANDBOX: &str = "6b1d2f0c9e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c";
    let t = Tree::new("state-crio");
    t.write(
        &format!("run/runc/{ID}/state.json"),
        runc_state(
            ID,
            &[
                "io.kubernetes.cri-o.ContainerType=container",
                &format!("io.kubernetes.cri-o.SandboxID={SANDBOX}"),
                r#"io.kubernetes.cri-o.Labels={"team":"blue","io.kubernetes.pod.name":"api-5c"}"#,
                "io.kubernetes.container.name=api",
                "io.kubernetes.pod.name=api-5c",
            ],
        ),
    );
    t.write(
        &format!("run/runc/{SANDBOX}/state.json"),
        runc_state(
            SANDBOX,
            &[
                "io.kubernetes.cri-o.ContainerType=sandbox",
                r#"io.kubernetes.cri-o.Labels={"app":"api","io.kubernetes.pod.uid":"7f"}"#,
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
            .bytes("cgroups", format!("0::/kubepods/crio-{ID}.scope"))
            .build(),
    );
    assert_eq!(f(&state, &exec, "container.name"), "api");
    assert_eq!(f(&state, &exec, "container.label.team"), "blue");
    assert_eq!(f(&state, &exec, "k8s.pod.label.app"), "api");
    assert_eq!(f(&state, &exec, "k8s.pod.labels"), "app:api");
    assert_eq!(f(&state, &exec, "k8s.pod.sandbox_id"), &SANDBOX[..12]);
}

//! The crate graph is one-way: a crate depends only on crates before it in the pipeline order
//! (ARCHITECTURE.md, "Crate graph"). Read from `cargo metadata`, so a new dependency that points
//! back up the pipeline, or a new crate nobody placed, fails here.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The pipeline order, once (ARCHITECTURE.md's crate graph, top to bottom): event model,
/// sources, state, rules, outputs, the wiring, the command line. A crate may depend only on
/// crates before it.
const ORDER: &[&str] = &[
    "vigil-event",
    "vigil-fields",
    "vigil-capture",
    // `/proc` into a snapshot: below the drivers, which must not know the state engine.
    "vigil-procfs",
    // Container metadata from the runtimes' files: for the state engine, not the drivers.
    "vigil-container",
    "vigil-ebpf",
    "vigil-ptrace",
    "vigil-state",
    "vigil-rules",
    "vigil-output",
    "vigil-engine",
    // The `falco.yaml` model: read by the agent and the command line, over the rules' and
    // outputs' own types.
    "vigil-config",
    "vigil-agent",
    "vigil-generator",
    "vigil-bench",
    "vigil",
    // Runs the `vigil` binary.
    "vigil-conformance",
];

/// Every dependency (normal or build) of a workspace crate on a crate at or after it in
/// [`ORDER`], and every workspace crate missing from it, as messages.
fn violations(metadata: &Value) -> Vec<String> {
    let position = |name: &str| ORDER.iter().position(|n| *n == name);
    let packages = metadata["packages"]
        .as_array()
        .expect("cargo metadata has `packages`");
    let mut found = Vec::new();
    for package in packages {
        let name = package["name"].as_str().expect("a package name");
        let Some(at) = position(name) else {
            found.push(format!(
                "`{name}` is not in the pipeline order: place it in ORDER"
            ));
            continue;
        };
        let deps = package["dependencies"].as_array().expect("dependencies");
        for dep in deps {
            let dep_name = dep["name"].as_str().expect("a dependency name");
            // Tests may use any crate to build their inputs; the graph that is built is
            // that of the normal and build dependencies.
            if dep["kind"].as_str() == Some("dev") {
                continue;
            }
            if let Some(dep_at) = position(dep_name) {
                if dep_at >= at {
                    found.push(format!(
                        "`{name}` depends on `{dep_name}`, which comes after it in the \
                         pipeline order"
                    ));
                }
            }
        }
    }
    found
}

fn workspace_metadata() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(&root)
        .output()
        .expect("cannot run `cargo metadata`");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

#[test]
fn crate_graph_follows_the_pipeline_order() {
    let metadata = workspace_metadata();
    let names: Vec<&str> = metadata["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter_map(|p| p["name"].as_str())
        .collect();
    for name in ORDER {
        assert!(
            names.contains(name),
            "`{name}` is in ORDER but not in the workspace ({names:?})"
        );
    }
    let found = violations(&metadata);
    assert!(
        found.is_empty(),
        "the crate graph is not one-way:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_dependency_against_the_order_is_reported() {
    let metadata = serde_json::json!({
        "packages": [
            {
                "name": "vigil-output",
                "dependencies": [
                    {"name": "vigil-fields", "kind": null},
                    {"name": "vigil-config", "kind": null},
                    {"name": "serde_json", "kind": null},
                ],
            },
            {
                "name": "vigil-ebpf",
                "dependencies": [
                    {"name": "vigil-state", "kind": "build"},
                    {"name": "vigil-engine", "kind": "dev"},
                ],
            },
            {"name": "vigil-state", "dependencies": [{"name": "vigil-state", "kind": null}]},
            {"name": "vigil-new", "dependencies": []},
        ],
    });
    assert_eq!(
        violations(&metadata),
        [
            "`vigil-output` depends on `vigil-config`, which comes after it in the pipeline order",
            "`vigil-ebpf` depends on `vigil-state`, which comes after it in the pipeline order",
            "`vigil-state` depends on `vigil-state`, which comes after it in the pipeline order",
            "`vigil-new` is not in the pipeline order: place it in ORDER",
        ]
    );
}

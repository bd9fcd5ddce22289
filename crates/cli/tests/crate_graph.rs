//! The crate graph is one-way: a crate depends only on crates before it in the pipeline order
//! (ARCHITECTURE.md, "Crate graph"). Read from `cargo metadata`, so a new dependency that points
//! back up the pipeline, or a new crate nobody placed, fails here.

use std::collections::{BTreeMap, BTreeSet};
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
    // The capability drop of every live command: below both drivers and the agent.
    "vigil-privs",
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
    // The binary's tests' and benches' receivers (a dev-dependency).
    "vigil-test-support",
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

/// The source text that counts for imports: no comment lines, nothing from the first
/// `#[cfg(test)]` module on (tests sit at the bottom and may use anything).
fn code(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod ").unwrap_or(text.len());
    text[..end]
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn identifiers(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
}

/// What `crate::…` paths in `text` name: the first segment of `crate::a::b`, and every
/// identifier inside `crate::{…}`.
fn crate_paths(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for (at, _) in text.match_indices("crate::") {
        let rest = &text[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let end = group
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '{' => 1,
                        '}' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map_or(group.len(), |(i, _)| i);
            found.extend(identifiers(&group[..end]));
        } else if let Some(first) = identifiers(rest).next() {
            found.push(first);
        }
    }
    found
}

/// The top-level modules of the crate whose sources are in `src`, each with the top-level
/// modules it imports: `crate::module…`, or an item the crate root re-exports from a module
/// (`pub use module::{Item}`, `pub use module::*`). Test modules (`tests`, `testutil`) are
/// left out.
fn module_imports(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let top = rel
                .components()
                .next()
                .and_then(|c| c.as_os_str().to_str())
                .expect("a UTF-8 file name")
                .trim_end_matches(".rs")
                .to_owned();
            let text = std::fs::read_to_string(&path).expect("a readable source file");
            texts.entry(top).or_default().push_str(&code(&text));
        }
    }
    let root = texts
        .remove("lib")
        .or_else(|| texts.remove("main"))
        .unwrap_or_default();
    texts.retain(|name, _| name != "tests" && name != "testutil");
    // The root's re-exports: item name → the module it comes from.
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    for line in root.split(';') {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, items)) = path.split_once("::") else {
            continue;
        };
        if !texts.contains_key(module) {
            continue;
        }
        if items.trim() == "*" {
            let text = &texts[module];
            for kind in [
                "pub struct ",
                "pub enum ",
                "pub fn ",
                "pub const ",
                "pub static ",
                "pub type ",
                "pub trait ",
            ] {
                for (at, _) in text.match_indices(kind) {
                    if let Some(name) = identifiers(&text[at + kind.len()..]).next() {
                        owner.insert(name.to_owned(), module.to_owned());
                    }
                }
            }
        } else {
            for name in identifiers(items) {
                owner.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    texts
        .iter()
        .map(|(module, text)| {
            let imports = crate_paths(text)
                .into_iter()
                .filter_map(|name| match owner.get(name) {
                    Some(m) => Some(m.clone()),
                    None => texts.contains_key(name).then(|| name.to_owned()),
                })
                .filter(|m| m != module)
                .collect();
            (module.clone(), imports)
        })
        .collect()
}

/// Every import circle among `modules` (each reported once, from its smallest module).
fn circles(modules: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    for start in modules.keys() {
        // Paths from `start` through modules after it, back to `start`.
        let mut stack = vec![vec![start.clone()]];
        while let Some(path) = stack.pop() {
            let last = path.last().expect("a path is never empty");
            for next in &modules[last] {
                if next == start {
                    let mut circle = path.clone();
                    circle.push(start.clone());
                    found.push(circle);
                } else if next > start && !path.contains(next) {
                    let mut longer = path.clone();
                    longer.push(next.clone());
                    stack.push(longer);
                }
            }
        }
    }
    found.sort();
    found
}

#[test]
fn modules_import_one_way() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&crates).expect("the crates directory") {
        let src = entry.expect("a crate directory").path().join("src");
        if !src.is_dir() {
            continue;
        }
        let modules = module_imports(&src);
        for circle in circles(&modules) {
            found.push(format!("{}: {}", src.display(), circle.join(" → ")));
        }
    }
    // The scan sees real imports: the event model reads its schemas.
    let event = module_imports(&crates.join("event/src"));
    assert!(event["model"].contains("table"), "{event:?}");
    assert!(
        found.is_empty(),
        "modules that import each other back:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_module_circle_is_reported() {
    let dir = std::env::temp_dir().join(format!("vigil-module-graph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("codec")).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write(
        "lib.rs",
        "mod model;\nmod table;\nmod codec;\npub use model::*;\npub use table::{Spec};\n",
    );
    // model → table through a path, table → model through the root's glob re-export.
    write("model.rs", "use crate::table::Spec;\npub struct Event;\n");
    write("table.rs", "// crate::codec in a comment does not count\npub struct Spec;\nfn f(_: crate::Event) {}\n#[cfg(test)]\nmod tests {\n    use crate::codec;\n}\n");
    write("codec.rs", "mod binary;\n");
    write(
        "codec/binary.rs",
        "use crate::{Event, table::{self, Spec}};\n",
    );
    let modules = module_imports(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    let imports = |m: &str| modules[m].iter().cloned().collect::<Vec<_>>();
    assert_eq!(imports("codec"), ["model", "table"]);
    assert_eq!(imports("table"), ["model"]);
    assert_eq!(
        circles(&modules),
        [vec![
            "model".to_owned(),
            "table".to_owned(),
            "model".to_owned()
        ]]
    );
}

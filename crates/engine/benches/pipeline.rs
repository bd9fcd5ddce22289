//! Pipeline benchmarks: rules load+compile time, and state + rules throughput on the mixed
//! corpus (`vigil_engine::corpus`). Upstream Falco rules are read from `../shared/falco-rules`
//! beside the repository; without them those benchmarks are skipped with a message.
// Tests report skipped requirements on stderr.
#![allow(clippy::print_stderr)]

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use vigil_engine::{corpus, load_rules, read_rules_paths, Engine, RulesText};
use vigil_rules::LoadOptions;
use vigil_state::{FakeProc, LiveUsers, LiveUsersConfig, StateConfig};

fn upstream_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/falco-rules")
}

fn upstream(files: &[&str]) -> Option<Vec<RulesText>> {
    let dir = upstream_dir();
    let paths: Vec<PathBuf> = files.iter().map(|f| dir.join(f)).collect();
    if !paths.iter().all(|p| p.is_file()) {
        eprintln!("skipping upstream benchmarks: {} not found", dir.display());
        return None;
    }
    Some(read_rules_paths(&paths).expect("upstream rules are readable"))
}

fn bench_load(c: &mut Criterion) {
    let Some(files) = upstream(&[
        "falco_rules.yaml",
        "falco-incubating_rules.yaml",
        "falco-sandbox_rules.yaml",
    ]) else {
        return;
    };
    c.bench_function("load+compile upstream stable+incubating+sandbox", |b| {
        b.iter(|| {
            let result = load_rules(black_box(&files), &LoadOptions::default());
            assert!(result.ruleset.is_some());
        })
    });
}

fn bench_pipeline(c: &mut Criterion) {
    let all_events = corpus::events(200_000);
    let snapshot = corpus::snapshot();
    // (name, rules, watched types only, live user tables)
    let mut cases: Vec<(&str, Vec<RulesText>, bool, bool)> = vec![
        // Baseline in the same run: the state engine alone (no rules).
        (
            "state only (no rules), full stream",
            Vec::new(),
            false,
            false,
        ),
        (
            "vigil default, full stream",
            vec![RulesText::embedded_default()],
            false,
            false,
        ),
    ];
    if let Some(files) = upstream(&["falco_rules.yaml"]) {
        cases.push((
            "upstream stable, watched types only",
            files.clone(),
            true,
            false,
        ));
        // As `vigil watch` runs it: user tables followed live (in-memory files here, so the
        // figure is the bookkeeping's cost, not the file system's).
        cases.push((
            "upstream stable, watched types only, live users",
            files.clone(),
            true,
            true,
        ));
        cases.push(("upstream stable, full stream", files, false, false));
    }
    let mut group = c.benchmark_group("state+rules on mixed corpus");
    group.sample_size(10);
    for (name, files, watched_only, live) in cases {
        let load = || {
            load_rules(&files, &LoadOptions::default())
                .ruleset
                .expect("benchmark rules load")
        };
        // "Watched types only": every event is of a type some enabled rule watches.
        let events: Vec<_> = if watched_only {
            let interest = load().event_types();
            all_events
                .iter()
                .filter(|e| interest.contains(e.etype.0))
                .cloned()
                .collect()
        } else {
            all_events.clone()
        };
        eprintln!("{name}: {} events", events.len());
        group.throughput(Throughput::Elements(events.len() as u64));
        group.bench_function(name, |b| {
            b.iter_batched(
                || {
                    let config = StateConfig {
                        live_users: live.then(|| live_users(&snapshot)),
                        ..StateConfig::default()
                    };
                    let mut engine = Engine::new(load(), config, "bench".into());
                    engine.load_snapshot(&snapshot);
                    engine
                },
                |mut engine| {
                    let mut alerts = 0u64;
                    for event in &events {
                        engine.process(event, &mut |_| alerts += 1);
                    }
                    black_box(alerts)
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// Live user tables whose host files hold the snapshot's users and groups.
fn live_users(snapshot: &vigil_event::Snapshot) -> LiveUsers {
    let text = |s: &[u8]| String::from_utf8_lossy(s).into_owned();
    let passwd: String = snapshot
        .users
        .iter()
        .map(|u| {
            format!(
                "{}:x:{}:{}::{}:{}\n",
                text(&u.name),
                u.uid,
                u.gid,
                text(&u.home),
                text(&u.shell)
            )
        })
        .collect();
    let group: String = snapshot
        .groups
        .iter()
        .map(|g| format!("{}:x:{}:\n", text(&g.name), g.gid))
        .collect();
    let mut host = FakeProc::new();
    host.file("etc/passwd", passwd).file("etc/group", group);
    LiveUsers::new(
        Box::new(host),
        Box::new(FakeProc::new()),
        LiveUsersConfig::default(),
    )
}

criterion_group!(benches, bench_load, bench_pipeline);
criterion_main!(benches);

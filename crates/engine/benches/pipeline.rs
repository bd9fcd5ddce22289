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
use vigil_state::StateConfig;

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
    let mut cases: Vec<(&str, Vec<RulesText>, bool)> = vec![
        // Baseline in the same run: the state engine alone (no rules).
        ("state only (no rules), full stream", Vec::new(), false),
        (
            "vigil default, full stream",
            vec![RulesText::embedded_default()],
            false,
        ),
    ];
    if let Some(files) = upstream(&["falco_rules.yaml"]) {
        cases.push(("upstream stable, watched types only", files.clone(), true));
        cases.push(("upstream stable, full stream", files, false));
    }
    let mut group = c.benchmark_group("state+rules on mixed corpus");
    group.sample_size(10);
    for (name, files, watched_only) in cases {
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
                    let mut engine = Engine::new(load(), StateConfig::default(), "bench".into());
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

criterion_group!(benches, bench_load, bench_pipeline);
criterion_main!(benches);

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

/// This thread's time on a CPU so far, in ns (the first field of `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .expect("/proc/thread-self/schedstat is readable")
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

/// Per-rule cost accounting (issue 31: `/metrics`' per-rule series) against none, in one run,
/// on the events Falco's stable rules watch: the state alone (to tell evaluation time from
/// the state's), the rules without accounting, and with accounting at several clock strides.
/// Accounting overhead = (on − off) / (off − state only).
fn bench_rule_costs(c: &mut Criterion) {
    let Some(files) = upstream(&["falco_rules.yaml"]) else {
        return;
    };
    let snapshot = corpus::snapshot();
    let load = || {
        load_rules(&files, &LoadOptions::default())
            .ruleset
            .expect("benchmark rules load")
    };
    let interest = load().event_types();
    let events: Vec<_> = corpus::events(200_000)
        .into_iter()
        .filter(|e| interest.contains(e.etype.0))
        .collect();
    let mut group = c.benchmark_group("rule cost accounting, stable rules, watched types");
    group.sample_size(20);
    group.throughput(Throughput::Elements(events.len() as u64));
    // (name, rules, accounting stride)
    let cases: [(&str, bool, Option<u32>); 5] = [
        ("state only", false, None),
        ("accounting off", true, None),
        ("accounting on, stride 16", true, Some(16)),
        ("accounting on, stride 64", true, Some(64)),
        ("accounting on, stride 256", true, Some(256)),
    ];
    let engine_for = |rules: bool, stride: Option<u32>| {
        let ruleset = if rules {
            load()
        } else {
            load_rules(&[], &LoadOptions::default())
                .ruleset
                .expect("no rules load")
        };
        let mut engine = Engine::new(ruleset, StateConfig::default(), "bench".into());
        engine.load_snapshot(&snapshot);
        engine.set_rule_costs(stride);
        engine
    };
    let run = |mut engine: Engine| {
        let mut alerts = 0u64;
        for event in &events {
            engine.process(event, &mut |_| alerts += 1);
        }
        black_box((alerts, engine.rule_costs().map(|c| c.nanos().len())))
    };
    for (name, rules, stride) in cases {
        group.bench_function(name, |b| {
            b.iter_batched(|| engine_for(rules, stride), run, BatchSize::PerIteration)
        });
    }
    group.finish();

    // The same variants measured in rounds, each round running every variant once in a
    // rotating order, so a machine whose load drifts (other builds) weighs on all of them
    // alike; the overhead is the median over rounds of each round's own ratio. Timed in the
    // thread's own CPU time (`/proc/thread-self/schedstat`, ns), which leaves out the time
    // the thread waited for a CPU that other work held.
    // Only when this group is asked for (no filter, or one it matches).
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    if filter.is_some_and(|f| !"rule cost accounting".contains(f.as_str())) {
        return;
    }
    let rounds: usize = std::env::var("VIGIL_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(31);
    let mut times = vec![Vec::with_capacity(rounds); cases.len()];
    for round in 0..rounds {
        for k in 0..cases.len() {
            let v = (round + k) % cases.len();
            let (_, rules, stride) = cases[v];
            let engine = engine_for(rules, stride);
            let start = thread_cpu_ns();
            run(engine);
            times[v].push((thread_cpu_ns() - start) as f64 / 1e9);
        }
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let per_event = |t: f64| t * 1e9 / events.len() as f64;
    eprintln!(
        "rule cost accounting, interleaved: {rounds} rounds × {} events (median thread CPU \
         ns/event; overhead = median over rounds of (on − off) / (off − state only))",
        events.len()
    );
    for (v, (name, _, _)) in cases.iter().enumerate() {
        let overhead = if v >= 2 {
            let ratios: Vec<f64> = (0..rounds)
                .map(|r| (times[v][r] - times[1][r]) / (times[1][r] - times[0][r]))
                .collect();
            format!("  overhead {:+.2}% of evaluation", median(ratios) * 100.0)
        } else {
            String::new()
        };
        eprintln!(
            "  {name:<28} {:>8.1} ns/event{overhead}",
            per_event(median(times[v].clone()))
        );
    }
}

criterion_group!(benches, bench_load, bench_pipeline, bench_rule_costs);
criterion_main!(benches);

//! Processes the benchmark corpus N times through state + rules, for instruction counting:
//! `perf stat -e instructions:u taskset -c 1 corpus_loop [passes] [watched|full] [OPTION]`,
//! OPTION `costs=N` (per-rule cost accounting on, one event in N timed) or `norules` (the
//! state alone, the baseline evaluation time is measured against).
//! Mirrors the `pipeline` benchmark's "upstream stable" cases (a fresh engine per pass, the
//! snapshot loaded), without criterion's sampling, so that instruction counts of two runs with
//! different pass counts differ by exactly the per-pass work. Without a PMU (VMs), count
//! instructions of the event loop alone with
//! `valgrind --tool=callgrind --toggle-collect='corpus_loop::run_pass' corpus_loop 1`.
// An example reports on stdout.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::time::Instant;

use vigil_engine::{corpus, load_rules, read_rules_paths, Engine};
use vigil_rules::LoadOptions;
use vigil_state::StateConfig;

/// The measured work, out of line so that `valgrind --tool=callgrind
/// --toggle-collect=corpus_loop::run_pass` counts exactly it.
#[inline(never)]
fn run_pass(engine: &mut Engine, events: &[vigil_event::Event]) -> u64 {
    let mut alerts = 0;
    for event in events {
        engine.process(event, &mut |_| alerts += 1);
    }
    alerts
}

fn main() {
    let mut args = std::env::args().skip(1);
    let passes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(10);
    let watched_only = args.next().as_deref() != Some("full");
    let option = args.next().unwrap_or_default();
    let stride: Option<u32> = option.strip_prefix("costs=").and_then(|n| n.parse().ok());
    let no_rules = option == "norules";
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/falco-rules");
    let files = read_rules_paths(&[dir.join("falco_rules.yaml")]).expect("upstream rules");
    let load = || {
        load_rules(&files, &LoadOptions::default())
            .ruleset
            .expect("rules load")
    };
    let interest = load().event_types();
    let events: Vec<_> = corpus::events(200_000)
        .into_iter()
        .filter(|e| !watched_only || interest.contains(e.etype.0))
        .collect();
    let snapshot = corpus::snapshot();
    let mut alerts = 0u64;
    let mut evaluations = 0u64;
    let mut busy = std::time::Duration::ZERO;
    for _ in 0..passes {
        let ruleset = if no_rules {
            load_rules(&[], &LoadOptions::default())
                .ruleset
                .expect("no rules load")
        } else {
            load()
        };
        let mut engine = Engine::new(ruleset, StateConfig::default(), "bench".into());
        engine.load_snapshot(&snapshot);
        engine.set_rule_costs(stride);
        let start = Instant::now();
        alerts += run_pass(&mut engine, &events);
        busy += start.elapsed();
        if let Some(costs) = engine.rule_costs() {
            evaluations += engine.ruleset().rule_evaluations(costs).iter().sum::<u64>();
        }
    }
    let total = (events.len() * passes) as f64;
    if stride.is_some() {
        println!(
            "one clock read: {} ns (median of back-to-back reads); {:.2} rule evaluations per event",
            vigil_engine::profile::clock_read_nanos(),
            evaluations as f64 / total
        );
    }
    println!(
        "{} events x {passes} passes, {alerts} alerts, {:.3} M events/s ({:.1} ns/event)",
        events.len(),
        total / busy.as_secs_f64() / 1e6,
        busy.as_nanos() as f64 / total
    );
}

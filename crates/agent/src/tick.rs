//! The agent's periodic housekeeping, run when its timers are due ([`crate::timers`]): copies
//! the engine's and source's counters into the metrics registry, writes Falco's stats file
//! line, checks the drop alert, and emits Falco's periodic metrics snapshot
//! (`metrics.enabled`: the internal alert `Falco internal: metrics snapshot` with
//! `output_rule`, and/or its JSON line in `output_file`). The agent's CPU and memory are read
//! from `/proc` by those who show them (a scrape, a snapshot), not every second.

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use vigil_fields::Value;
use vigil_output::metrics::{self, names};
use vigil_output::stats::{Counts, StatsFile};
use vigil_output::{Alert, JsonOptions, Metrics, Outputs};
use vigil_rules::Ruleset;

use crate::timers::{Due, Job};

/// Rule name of Falco's periodic metrics alert.
pub const METRICS_RULE: &str = "Falco internal: metrics snapshot";

/// Counters of the pipeline at one instant (totals since start).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TickCounts {
    pub events_in: u64,
    pub processed: u64,
    /// Events dropped before processing, by reason.
    pub dropped: Vec<(String, u64)>,
    /// Failed calls the source filtered out by design (not drops, not in `events_in`).
    pub filtered_failed: u64,
    /// State-only records the source folded into later ones (not drops, not in `events_in`).
    pub folded_state: u64,
    /// Records the source's kernel side committed (the eBPF driver's ring buffers), counted
    /// there; `None` for a source without a kernel side.
    pub kernel_records: Option<u64>,
    /// Seconds spent in state update and rule evaluation.
    pub eval_seconds: f64,
    /// The state tables (Falco's state counters): threads, fds and containers now, and
    /// threads not tracked because the table was full.
    pub threads: u64,
    pub fds: u64,
    pub containers: u64,
    pub dropped_threads: u64,
    /// Container metadata lookups in the runtimes' state (live): made, missed, seconds spent
    /// in all and in the longest.
    pub container_lookups: u64,
    pub container_lookup_misses: u64,
    pub container_lookup_seconds: f64,
    pub container_lookup_max_seconds: f64,
    /// Per enabled rule, when the engine accounts for them: evaluations and seconds spent.
    pub rule_costs: Vec<RuleCost>,
}

/// One rule's evaluation cost so far (`vigil_rule_evaluations_total`,
/// `vigil_rule_eval_seconds_total`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuleCost {
    pub rule: String,
    pub evaluations: u64,
    pub seconds: f64,
}

/// The per-rule costs of `engine`'s enabled rules; empty when it does not account for them.
pub fn rule_costs(engine: &vigil_engine::Engine) -> Vec<RuleCost> {
    let Some(costs) = engine.rule_costs() else {
        return Vec::new();
    };
    let ruleset = engine.ruleset();
    let evaluations = ruleset.rule_evaluations(costs);
    ruleset
        .rules()
        .iter()
        .enumerate()
        .filter(|(i, _)| ruleset.is_enabled(*i))
        .map(|(i, rule)| RuleCost {
            rule: rule.name.clone(),
            evaluations: evaluations.get(i).copied().unwrap_or(0),
            seconds: costs.nanos().get(i).copied().unwrap_or(0) as f64 / 1e9,
        })
        .collect()
}

impl TickCounts {
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }

    /// Drops for one reason (`buffer_full`, `read_fault`, `malformed`, `queue_full`).
    pub fn dropped(&self, reason: &str) -> u64 {
        self.dropped
            .iter()
            .filter(|(r, _)| r == reason)
            .map(|(_, n)| n)
            .sum()
    }

    /// Events the source delivered (Falco's `scap.n_evts`: drops excluded).
    pub fn delivered(&self) -> u64 {
        self.events_in.saturating_sub(self.dropped_total())
    }
}

/// Zero-valued `falcosecurity_falco_rules_matches_total` series for every enabled rule of
/// `ruleset` (a rule's first match then moves its series from 0 rather than creating it), and
/// the per-rule cost series likewise (shown when the engine accounts for them).
pub fn seed_rule_counters(metrics: &Metrics, ruleset: &Ruleset) {
    for rule in ruleset.rules().iter().filter(|r| r.enabled) {
        metrics.add_labels(
            names::RULES_MATCHES,
            metrics::rule_labels(&rule.name, rule.priority.as_str(), &rule.source, &rule.tags),
            0.0,
        );
    }
    for (i, rule) in ruleset.rules().iter().enumerate() {
        if ruleset.is_enabled(i) {
            let labels = [("rule", rule.name.as_str())];
            metrics.add(names::RULE_EVALUATIONS, &labels, 0.0);
            metrics.add(names::RULE_EVAL_SECONDS, &labels, 0.0);
        }
    }
}

/// Housekeeping state. When each part runs is the timers' business ([`Tick::run`]).
pub struct Tick {
    metrics: Metrics,
    stats: Option<(StatsFile, Duration)>,
    snapshots: Option<Snapshots>,
    started: Instant,
}

/// Falco's `metrics` settings and state.
struct Snapshots {
    config: vigil_config::Metrics,
    file: Option<File>,
    last: Instant,
    previous_events: u64,
    /// `scap.n_evts` and `scap.n_drops` of the previous snapshot.
    previous_kernel: (u64, u64),
}

impl Tick {
    /// `stats_file`: Falco's `-s FILE` with `--stats-interval` (a line every interval, when
    /// the timers say so, and a last one by [`Tick::finish`]).
    pub fn new(metrics: &Metrics, stats_file: Option<(&Path, Duration)>) -> io::Result<Tick> {
        let stats = match stats_file {
            Some((path, every)) => Some((StatsFile::create(path)?, every)),
            None => None,
        };
        let tick = Tick {
            metrics: metrics.clone(),
            stats,
            snapshots: None,
            started: Instant::now(),
        };
        // Every drop series exists, at 0, from the first scrape.
        tick.publish(&TickCounts::default());
        Ok(tick)
    }

    /// What the first scrape should already show: the hostname of alerts and a zero-valued
    /// match counter per enabled rule. Call again after a reload (new rules get theirs).
    pub fn seed(&self, outputs: &Outputs, ruleset: &Ruleset) {
        self.metrics.set_only(
            names::HOSTNAME_INFO,
            &[("hostname", outputs.hostname())],
            1.0,
        );
        seed_rule_counters(&self.metrics, ruleset);
    }

    /// Applies Falco's `metrics:` block: its category flags to `/metrics`, and the periodic
    /// metrics snapshots when `config.enabled` (appending to `output_file` when set).
    pub fn with_snapshots(mut self, config: &vigil_config::Metrics) -> io::Result<Tick> {
        self.metrics.set_flags(config.flags());
        if config.enabled {
            let file = match &config.output_file {
                Some(path) => Some(vigil_output::files::append(path)?),
                None => None,
            };
            self.snapshots = Some(Snapshots {
                config: config.clone(),
                file,
                last: Instant::now(),
                previous_events: 0,
                previous_kernel: (0, 0),
            });
        }
        Ok(self)
    }

    /// The metrics snapshot alert for `counts` now, with the field names of Falco's "Falco
    /// Metrics" documentation (`falco.*`, `scap.*`, `evt.*`) for what Vigil measures.
    fn snapshot(&mut self, counts: &TickCounts, now_ns: u64, hostname: &str) -> Option<Alert> {
        let m = self.metrics.clone();
        m.sample_process();
        let s = self.snapshots.as_mut()?;
        let elapsed = s.last.elapsed().as_secs_f64().max(1e-9);
        s.last = Instant::now();
        let c = &s.config;
        let mut fields: Vec<(String, Option<Value<'static>>)> = Vec::new();
        let mut put = |name: &str, value: Value<'static>| {
            let empty = matches!(value, Value::U64(0));
            if c.include_empty_values || !empty {
                fields.push((name.to_owned(), Some(value)));
            }
        };
        let text = |v: String| Value::Str(Cow::Owned(v.into_bytes()));
        let gauge = |name: &str| m.get(name, &[]);
        let label = |family: &str, key: &str| {
            m.samples(family)
                .into_iter()
                .next()
                .and_then(|(l, _)| l.into_iter().find(|(k, _)| k == key))
                .map(|(_, v)| v)
        };
        // Base fields, always present.
        put("evt.source", Value::Str(Cow::Borrowed(b"syscall")));
        put("evt.hostname", text(hostname.to_owned()));
        put("evt.time", Value::U64(now_ns));
        put(
            "falco.version",
            Value::Str(Cow::Borrowed(env!("CARGO_PKG_VERSION").as_bytes())),
        );
        if let Some(engine) = label(names::ENGINE_NAME_INFO, "engine_name") {
            put("scap.engine_name", text(engine));
        }
        if let Some(release) = label(names::KERNEL_RELEASE_INFO, "kernel_release") {
            put("falco.kernel_release", text(release));
        }
        put(
            "falco.duration_sec",
            Value::U64(self.started.elapsed().as_secs()),
        );
        put("falco.start_ts", Value::U64(gauge(names::START_TS) as u64));
        put(
            "falco.host_boot_ts",
            Value::U64(gauge(names::HOST_BOOT_TS) as u64),
        );
        put(
            "falco.host_num_cpus",
            Value::U64(gauge(names::HOST_NUM_CPUS) as u64),
        );
        put(
            "falco.outputs_queue_num_drops",
            Value::U64(m.sum(names::OUTPUT_DROPPED) as u64),
        );
        put("falco.num_evts", Value::U64(counts.processed));
        put("falco.num_evts_prev", Value::U64(s.previous_events));
        let rate = counts.processed.saturating_sub(s.previous_events) as f64 / elapsed;
        put("falco.evts_rate_sec", text(format!("{rate:.2}")));
        if c.kernel_event_counters_enabled {
            let (evts, drops) = (counts.delivered(), counts.dropped_total());
            let (evts_prev, drops_prev) = s.previous_kernel;
            put("scap.n_evts", Value::U64(evts));
            put("scap.n_evts_prev", Value::U64(evts_prev));
            put("scap.n_drops", Value::U64(drops));
            put("scap.n_drops_prev", Value::U64(drops_prev));
            let (d_evts, d_drops) = (
                evts.saturating_sub(evts_prev),
                drops.saturating_sub(drops_prev),
            );
            let perc = if d_evts + d_drops == 0 {
                0.0
            } else {
                100.0 * d_drops as f64 / (d_evts + d_drops) as f64
            };
            put("scap.n_drops_perc", text(format!("{perc:.2}")));
            put(
                "scap.evts_rate_sec",
                text(format!("{:.2}", d_evts as f64 / elapsed)),
            );
            put(
                "scap.evts_drop_rate_sec",
                text(format!("{:.2}", d_drops as f64 / elapsed)),
            );
            let buffer = counts.dropped(DROP_BUFFER_FULL);
            put("scap.n_drops_buffer_total", Value::U64(buffer));
            for (dir, drop) in metrics::BUFFER_DROP_KINDS {
                let n = if [*dir, *drop] == [BUFFER_DIR, BUFFER_DROP] {
                    buffer
                } else {
                    0
                };
                put(&format!("scap.n_drops_buffer_{drop}_{dir}"), Value::U64(n));
            }
            put("scap.n_drops_scratch_map", Value::U64(0));
            put(
                "scap.n_drops_page_faults",
                Value::U64(counts.dropped(DROP_READ_FAULT)),
            );
            put(
                "scap.n_drops_bug",
                Value::U64(counts.dropped(DROP_MALFORMED)),
            );
            s.previous_kernel = (evts, drops);
        }
        s.previous_events = counts.processed;
        if c.resource_utilization_enabled {
            // Falco's snapshot gives percentages and memory in MB (or kB).
            let (unit, div) = if c.convert_memory_to_mb {
                ("mb", 1_048_576.0)
            } else {
                ("kb", 1024.0)
            };
            let mut mem = |name: &str, family: &str| {
                if m.has(family, &[]) {
                    put(
                        &format!("{name}_{unit}"),
                        text(format!("{:.2}", gauge(family) / div)),
                    );
                }
            };
            mem("falco.memory_rss", names::MEMORY_RSS);
            mem("falco.memory_vsz", names::MEMORY_VSZ);
            mem("falco.memory_pss", names::MEMORY_PSS);
            mem("falco.host_memory_used", names::HOST_MEMORY_USED);
            for (field, family) in [
                ("falco.cpu_usage_perc", names::CPU_USAGE),
                ("falco.host_cpu_usage_perc", names::HOST_CPU_USAGE),
            ] {
                if m.has(family, &[]) {
                    put(field, text(format!("{:.2}", 100.0 * gauge(family))));
                }
            }
            for (field, family) in [
                ("falco.host_procs_running", names::HOST_PROCS_RUNNING),
                ("falco.host_open_fds", names::HOST_OPEN_FDS),
            ] {
                if m.has(family, &[]) {
                    put(field, Value::U64(gauge(family) as u64));
                }
            }
        }
        if c.state_counters_enabled {
            put("falco.n_threads", Value::U64(counts.threads));
            put("falco.n_fds", Value::U64(counts.fds));
            put("falco.n_containers", Value::U64(counts.containers));
            put(
                "falco.n_drops_full_threadtable",
                Value::U64(counts.dropped_threads),
            );
        }
        if c.rules_counters_enabled {
            let mut total = 0.0;
            for (labels, n) in m.samples(names::RULES_MATCHES) {
                total += n;
                if let Some((_, rule)) = labels.iter().find(|(k, _)| k == "rule_name") {
                    let key = metrics::sanitize_metric_name(rule);
                    put(&format!("falco.rules.{key}"), Value::U64(n as u64));
                }
            }
            put("falco.rules.matches_total", Value::U64(total as u64));
        }
        if c.libbpf_stats_enabled {
            // Falco's per-program `<prog>.run_cnt`/`run_time_ns`/`avg_time_ns`, named by the
            // kernel program id (procfs gives no program name).
            let programs = crate::bpf::own_programs();
            crate::bpf::publish(&m, &programs);
            for p in &programs {
                let key = format!("scap.bpf_prog_{}", p.id);
                put(&format!("{key}.run_cnt"), Value::U64(p.run_cnt));
                put(&format!("{key}.run_time_ns"), Value::U64(p.run_time_ns));
                put(
                    &format!("{key}.avg_time_ns"),
                    Value::U64(p.run_time_ns.checked_div(p.run_cnt).unwrap_or(0)),
                );
            }
        }
        Some(Alert {
            time: now_ns,
            rule: METRICS_RULE.to_owned(),
            priority: Cow::Borrowed("Informational"),
            source: Cow::Borrowed("internal"),
            tags: Vec::new(),
            hostname: hostname.to_owned(),
            output: "Falco metrics snapshot".to_owned(),
            output_fields: fields,
        })
    }

    fn emit_snapshot(
        &mut self,
        counts: &TickCounts,
        outputs: &Outputs,
        now_ns: u64,
        hostname: &str,
    ) -> io::Result<()> {
        let Some(alert) = self.snapshot(counts, now_ns, hostname) else {
            return Ok(());
        };
        let Some(s) = self.snapshots.as_mut() else {
            return Ok(());
        };
        if s.config.output_rule {
            outputs.emit_internal(&alert);
        }
        if let Some(file) = s.file.as_mut() {
            writeln!(file, "{}", alert.json_line(&JsonOptions::default()))?;
        }
        Ok(())
    }

    /// The stats file's interval (`--stats-interval`), when there is one: the period of
    /// [`Job::StatsFile`].
    pub fn stats_interval(&self) -> Option<Duration> {
        self.stats.as_ref().map(|(_, every)| *every)
    }

    /// `metrics.interval` while snapshots are on: the period of [`Job::Snapshot`].
    pub fn snapshot_interval(&self) -> Option<Duration> {
        self.snapshots.as_ref().map(|s| s.config.interval)
    }

    /// Updates metrics and the drop alert; writes the stats file line and the metrics
    /// snapshot when `due` holds their jobs.
    pub fn run(
        &mut self,
        counts: &TickCounts,
        outputs: &mut Outputs,
        now_ns: u64,
        due: Due,
    ) -> io::Result<()> {
        self.publish(counts);
        outputs.check_drops(counts.dropped_total(), now_ns);
        if due.contains(Job::Snapshot) && self.snapshots.is_some() {
            let hostname = outputs.hostname().to_owned();
            self.emit_snapshot(counts, outputs, now_ns, &hostname)?;
        }
        if let Some((file, _)) = self.stats.as_mut() {
            if due.contains(Job::StatsFile) {
                file.write(stats_counts(counts))?;
            }
        }
        Ok(())
    }

    /// The final update at exit: metrics, the drop alert for every drop not yet reported
    /// (whatever its rate limit), and one last stats line with the final totals.
    pub fn finish(
        &mut self,
        counts: &TickCounts,
        outputs: &mut Outputs,
        now_ns: u64,
    ) -> io::Result<()> {
        self.publish(counts);
        outputs.final_drops(counts.dropped_total(), now_ns);
        if let Some((file, _)) = self.stats.as_mut() {
            file.write(stats_counts(counts))?;
        }
        Ok(())
    }

    /// Copies `counts` into the registry under Falco's names; Vigil's drop reasons map onto
    /// Falco's drop series as `docs/metrics.md` lists.
    fn publish(&self, counts: &TickCounts) {
        let m = &self.metrics;
        m.set(names::N_EVTS, &[], counts.delivered() as f64);
        m.set(names::N_DROPS, &[], counts.dropped_total() as f64);
        for (dir, drop) in metrics::BUFFER_DROP_KINDS {
            m.add(names::N_DROPS_BUFFER, &[("dir", dir), ("drop", drop)], 0.0);
        }
        m.set(
            names::N_DROPS_BUFFER,
            &metrics::BUFFER_DROP_LABELS,
            counts.dropped(DROP_BUFFER_FULL) as f64,
        );
        m.set(names::N_DROPS_SCRATCH_MAP, &[], 0.0);
        m.set(
            names::N_DROPS_PAGE_FAULTS,
            &[],
            counts.dropped(DROP_READ_FAULT) as f64,
        );
        m.set(
            names::N_DROPS_BUG,
            &[],
            counts.dropped(DROP_MALFORMED) as f64,
        );
        m.set(
            names::SOURCE_QUEUE_DROPS,
            &[],
            counts.dropped(DROP_QUEUE_FULL) as f64,
        );
        m.set(
            names::SOURCE_FILTERED_FAILED,
            &[],
            counts.filtered_failed as f64,
        );
        m.set(names::SOURCE_FOLDED_STATE, &[], counts.folded_state as f64);
        // Before the processed count: a scrape between the two sees the previous tick's
        // processed count with this tick's records, never more processed than recorded.
        if let Some(records) = counts.kernel_records {
            m.set(names::BPF_RECORDS_SUBMITTED, &[], records as f64);
        }
        m.set(names::EVENTS_PROCESSED, &[], counts.processed as f64);
        m.set(names::N_THREADS, &[], counts.threads as f64);
        m.set(names::N_FDS, &[], counts.fds as f64);
        m.set(names::N_CONTAINERS, &[], counts.containers as f64);
        m.set(
            names::N_DROPS_FULL_THREADTABLE,
            &[],
            counts.dropped_threads as f64,
        );
        m.set(
            names::CONTAINER_LOOKUPS,
            &[],
            counts.container_lookups as f64,
        );
        m.set(
            names::CONTAINER_LOOKUP_MISSES,
            &[],
            counts.container_lookup_misses as f64,
        );
        m.set(
            names::CONTAINER_LOOKUP_SECONDS,
            &[],
            counts.container_lookup_seconds,
        );
        m.set(
            names::CONTAINER_LOOKUP_MAX_SECONDS,
            &[],
            counts.container_lookup_max_seconds,
        );
        m.set(names::EVAL_SECONDS, &[], counts.eval_seconds);
        for cost in &counts.rule_costs {
            let labels = [("rule", cost.rule.as_str())];
            m.set(names::RULE_EVALUATIONS, &labels, cost.evaluations as f64);
            m.set(names::RULE_EVAL_SECONDS, &labels, cost.seconds);
        }
        m.set(
            names::OUTPUTS_QUEUE_DROPS,
            &[],
            m.sum(names::OUTPUT_DROPPED),
        );
        // The agent's and the host's usage from /proc is sampled by those who read it (a
        // scrape, a snapshot), not here: /proc/self/smaps_rollup walks every page table of
        // the agent and was most of an idle agent's CPU at one read a second.
    }
}

/// Vigil's drop reasons (the source's labels), mapped onto Falco's series in `publish`.
const DROP_BUFFER_FULL: &str = "buffer_full";
const DROP_READ_FAULT: &str = "read_fault";
const DROP_MALFORMED: &str = "malformed";
const DROP_QUEUE_FULL: &str = "queue_full";
const BUFFER_DIR: &str = metrics::BUFFER_DROP_LABELS[0].1;
const BUFFER_DROP: &str = metrics::BUFFER_DROP_LABELS[1].1;

fn stats_counts(counts: &TickCounts) -> Counts {
    Counts {
        events: counts.events_in,
        drops: counts.dropped_total(),
        preemptions: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_counters_and_final_stats_line() {
        let dir = std::env::temp_dir().join(format!("vigil-tick-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("stats.jsonl");
        let metrics = Metrics::new();
        let mut outputs = Outputs::with_sinks(Default::default(), Vec::new(), &metrics).unwrap();
        let mut tick = Tick::new(&metrics, Some((&path, Duration::ZERO))).unwrap();
        assert_eq!(tick.stats_interval(), Some(Duration::ZERO));
        // Before any event: every drop series, at 0.
        for (dir, drop) in metrics::BUFFER_DROP_KINDS {
            assert!(
                metrics.has(names::N_DROPS_BUFFER, &[("dir", dir), ("drop", drop)]),
                "{dir}/{drop}"
            );
        }
        for family in [
            names::N_DROPS,
            names::N_DROPS_SCRATCH_MAP,
            names::N_DROPS_PAGE_FAULTS,
            names::N_DROPS_BUG,
            names::SOURCE_QUEUE_DROPS,
            names::SOURCE_FILTERED_FAILED,
            names::SOURCE_FOLDED_STATE,
            names::N_EVTS,
        ] {
            assert!(metrics.has(family, &[]), "{family}");
            assert_eq!(metrics.get(family, &[]), 0.0, "{family}");
        }
        let counts = TickCounts {
            events_in: 20,
            processed: 10,
            dropped: vec![
                ("buffer_full".into(), 2),
                ("read_fault".into(), 3),
                ("malformed".into(), 1),
                ("queue_full".into(), 4),
            ],
            filtered_failed: 6,
            folded_state: 9,
            kernel_records: Some(17),
            eval_seconds: 0.5,
            threads: 7,
            fds: 30,
            containers: 1,
            dropped_threads: 2,
            container_lookups: 5,
            container_lookup_misses: 1,
            container_lookup_seconds: 0.25,
            container_lookup_max_seconds: 0.125,
            rule_costs: Vec::new(),
        };
        // Metrics only: no stats line yet.
        tick.run(&counts, &mut outputs, 0, Due::default().with(Job::Metrics))
            .unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "", "not due");
        tick.run(
            &counts,
            &mut outputs,
            0,
            Due::default().with(Job::StatsFile),
        )
        .unwrap();
        tick.finish(&counts, &mut outputs, 0).unwrap();
        assert_eq!(metrics.get(names::N_EVTS, &[]), 10.0);
        assert_eq!(metrics.get(names::N_DROPS, &[]), 10.0);
        assert_eq!(metrics.get(names::EVENTS_PROCESSED, &[]), 10.0);
        assert_eq!(
            metrics.get(names::N_DROPS_BUFFER, &metrics::BUFFER_DROP_LABELS),
            2.0
        );
        assert_eq!(metrics.sum(names::N_DROPS_BUFFER), 2.0);
        assert_eq!(metrics.get(names::N_DROPS_PAGE_FAULTS, &[]), 3.0);
        assert_eq!(metrics.get(names::N_DROPS_BUG, &[]), 1.0);
        assert_eq!(metrics.get(names::SOURCE_QUEUE_DROPS, &[]), 4.0);
        assert_eq!(
            metrics.get(names::SOURCE_FILTERED_FAILED, &[]),
            6.0,
            "filtered, not dropped: outside n_drops"
        );
        assert_eq!(
            metrics.get(names::SOURCE_FOLDED_STATE, &[]),
            9.0,
            "folded, not dropped"
        );
        assert_eq!(metrics.get(names::BPF_RECORDS_SUBMITTED, &[]), 17.0);
        // Every drop is in exactly one of the breakdown series.
        assert_eq!(
            metrics.sum(names::N_DROPS_BUFFER)
                + metrics.get(names::N_DROPS_PAGE_FAULTS, &[])
                + metrics.get(names::N_DROPS_BUG, &[])
                + metrics.get(names::N_DROPS_SCRATCH_MAP, &[])
                + metrics.get(names::SOURCE_QUEUE_DROPS, &[]),
            metrics.get(names::N_DROPS, &[])
        );
        assert_eq!(metrics.get(names::N_THREADS, &[]), 7.0);
        assert_eq!(metrics.get(names::N_FDS, &[]), 30.0);
        assert_eq!(metrics.get(names::N_DROPS_FULL_THREADTABLE, &[]), 2.0);
        assert_eq!(metrics.get(names::CONTAINER_LOOKUPS, &[]), 5.0);
        assert_eq!(metrics.get(names::CONTAINER_LOOKUP_MISSES, &[]), 1.0);
        assert_eq!(metrics.get(names::CONTAINER_LOOKUP_SECONDS, &[]), 0.25);
        assert_eq!(metrics.get(names::CONTAINER_LOOKUP_MAX_SECONDS, &[]), 0.125);
        assert_eq!(
            metrics.get(
                "vigil_internal_alerts_total",
                &[("rule", "Vigil dropped events")]
            ),
            1.0
        );
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["cur"]["events"], 20);
        assert_eq!(lines[0]["drop_pct"], 50.0);
        assert_eq!(lines[1]["delta"]["events"], 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn seeds_zero_match_counters_for_enabled_rules_and_the_hostname() {
        let rules = vigil_engine::RulesText {
            name: "r.yaml".into(),
            text: "- rule: On\n  desc: d\n  condition: evt.type = open\n  output: o\n  \
                   priority: ERROR\n  tags: [host, T1000]\n\
                   - rule: Off\n  desc: d\n  condition: evt.type = open\n  output: o\n  \
                   priority: DEBUG\n  enabled: false\n"
                .into(),
        };
        let result = vigil_engine::load_rules(&[rules], &Default::default());
        let ruleset = result.ruleset.expect("rules load");
        let metrics = Metrics::new();
        let outputs = Outputs::with_sinks(Default::default(), Vec::new(), &metrics).unwrap();
        let tick = Tick::new(&metrics, None).unwrap();
        tick.seed(&outputs, &ruleset);
        let on = [
            ("priority", "3"),
            ("rule_name", "On"),
            ("source", "syscall"),
            ("tag_T1000", "true"),
            ("tag_host", "true"),
        ];
        assert!(
            metrics.has(names::RULES_MATCHES, &on),
            "{}",
            metrics.render()
        );
        assert_eq!(
            metrics.samples(names::RULES_MATCHES).len(),
            1,
            "disabled rules get none"
        );
        let text = metrics.render();
        assert!(
            text.contains(
                "falcosecurity_falco_rules_matches_total{priority=\"3\",rule_name=\"On\",source=\"syscall\",tag_T1000=\"true\",tag_host=\"true\"} 0\n"
            ),
            "{text}"
        );
        assert!(metrics.has(names::HOSTNAME_INFO, &[("hostname", outputs.hostname())]));
        // A match moves the seeded series (same labels from the alert).
        outputs.emit(&Alert {
            time: 0,
            rule: "On".into(),
            priority: Cow::Borrowed("Error"),
            source: Cow::Borrowed("syscall"),
            tags: vec!["host".into(), "T1000".into()],
            hostname: "h".into(),
            output: "o".into(),
            output_fields: Vec::new(),
        });
        assert_eq!(metrics.get(names::RULES_MATCHES, &on), 1.0);
        assert_eq!(metrics.samples(names::RULES_MATCHES).len(), 1);
    }

    #[test]
    fn the_metrics_block_gates_the_exposition() {
        let metrics = Metrics::new();
        let config = vigil_config::Metrics {
            kernel_event_counters_enabled: false,
            rules_counters_enabled: false,
            ..vigil_config::Metrics::default()
        };
        let _tick = Tick::new(&metrics, None)
            .unwrap()
            .with_snapshots(&config)
            .unwrap();
        let text = metrics.render();
        assert!(!text.contains(names::N_DROPS), "{text}");
        assert!(!text.contains(names::RULES_MATCHES), "{text}");
        assert!(text.contains(names::N_THREADS), "{text}");
        assert!(text.contains(names::MEMORY_RSS), "{text}");
    }

    #[test]
    fn the_periodic_job_leaves_proc_sampling_to_the_readers() {
        // Reading /proc/self/smaps_rollup walks the agent's page tables (~0.6 ms here): at one
        // read a second it was most of an idle agent's CPU. Scrapes and snapshots sample.
        let metrics = Metrics::new();
        let mut outputs = Outputs::with_sinks(Default::default(), Vec::new(), &metrics).unwrap();
        let mut tick = Tick::new(&metrics, None).unwrap();
        for _ in 0..3 {
            tick.run(
                &TickCounts::default(),
                &mut outputs,
                0,
                Due::default().with(Job::Metrics),
            )
            .unwrap();
        }
        assert!(!metrics.has(names::MEMORY_RSS, &[]), "{}", metrics.render());
        assert!(!metrics.has(names::CPU_USAGE, &[]), "{}", metrics.render());
        metrics.sample_process();
        assert!(
            metrics.get(names::MEMORY_RSS, &[]) > 0.0,
            "{}",
            metrics.render()
        );
    }

    #[test]
    fn metrics_snapshots_go_to_the_file_and_the_outputs() {
        let dir = std::env::temp_dir().join(format!("vigil-snap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("metrics.jsonl");
        let metrics = Metrics::new();
        metrics.add_labels(
            names::RULES_MATCHES,
            metrics::rule_labels("Read shadow file", "Warning", "syscall", &[]),
            3.0,
        );
        metrics.set(
            names::ENGINE_NAME_INFO,
            &[("engine_name", "modern_bpf"), ("evt_source", "syscall")],
            1.0,
        );
        let mut outputs = Outputs::with_sinks(Default::default(), Vec::new(), &metrics).unwrap();
        let config = vigil_config::Metrics {
            enabled: true,
            interval: Duration::from_nanos(1),
            output_file: Some(path.clone()),
            ..vigil_config::Metrics::default()
        };
        let mut tick = Tick::new(&metrics, None)
            .unwrap()
            .with_snapshots(&config)
            .unwrap();
        let counts = TickCounts {
            events_in: 12,
            processed: 10,
            dropped: vec![("buffer_full".into(), 2)],
            threads: 4,
            ..TickCounts::default()
        };
        assert_eq!(tick.snapshot_interval(), Some(Duration::from_nanos(1)));
        tick.run(&counts, &mut outputs, 0, Due::default().with(Job::Metrics))
            .unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "",
            "a snapshot only when its timer is due"
        );
        std::thread::sleep(Duration::from_millis(1));
        tick.run(&counts, &mut outputs, 0, Due::default().with(Job::Snapshot))
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(v["rule"], METRICS_RULE);
        assert_eq!(v["priority"], "Informational");
        let f = &v["output_fields"];
        assert_eq!(f["scap.n_evts"], 10, "drops excluded, as in Falco");
        assert_eq!(f["scap.n_drops"], 2);
        assert_eq!(f["scap.n_drops_buffer_total"], 2);
        assert_eq!(f["scap.n_drops_buffer_other_interest_exit"], 2);
        assert_eq!(f["scap.n_drops_perc"], "16.67");
        assert_eq!(f["falco.num_evts"], 10);
        assert_eq!(f["falco.n_threads"], 4);
        assert_eq!(
            f["falco.rules.Read_shadow_file"], 3,
            "Falco's sanitized rule name"
        );
        assert_eq!(f["falco.rules.matches_total"], 3);
        assert_eq!(f["falco.version"], env!("CARGO_PKG_VERSION"));
        assert_eq!(f["scap.engine_name"], "modern_bpf");
        assert!(f["falco.host_num_cpus"].as_u64().unwrap() >= 1);
        assert!(f["falco.start_ts"].as_u64().unwrap() > 0);
        assert!(
            f["falco.memory_rss_mb"]
                .as_str()
                .unwrap()
                .parse::<f64>()
                .unwrap()
                > 0.0
        );
        assert!(f.get("falco.cpu_usage_perc").is_some());
        assert!(f.get("falco.cpu_seconds").is_none(), "not a Falco field");
        for zero in [
            "scap.n_drops_bug",
            "scap.n_drops_page_faults",
            "falco.n_fds",
        ] {
            assert!(f.get(zero).is_none(), "zero values omitted: {zero}");
        }
        assert_eq!(
            metrics.get("vigil_internal_alerts_total", &[("rule", METRICS_RULE)]),
            1.0
        );
        // Disabled: nothing.
        let off = Tick::new(&metrics, None)
            .unwrap()
            .with_snapshots(&vigil_config::Metrics::default())
            .unwrap();
        assert!(off.snapshots.is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! The agent's periodic housekeeping, called by the event loop between batches: copies the
//! engine's and source's counters into the metrics registry, writes Falco's stats file line
//! when its interval is due, samples CPU and memory, checks the drop alert, and emits Falco's
//! periodic metrics snapshot (`metrics.enabled`: the internal alert `Falco internal: metrics
//! snapshot` with `output_rule`, and/or its JSON line in `output_file`).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use vigil_fields::Value;
use vigil_output::stats::{Counts, StatsFile};
use vigil_output::{Alert, JsonOptions, Metrics, Outputs};

/// Rule name of Falco's periodic metrics alert.
pub const METRICS_RULE: &str = "Falco internal: metrics snapshot";

/// Counters of the pipeline at one instant (totals since start).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TickCounts {
    pub events_in: u64,
    pub processed: u64,
    /// Events dropped before processing, by reason.
    pub dropped: Vec<(String, u64)>,
    /// Seconds spent in state update and rule evaluation.
    pub eval_seconds: f64,
}

impl TickCounts {
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|(_, n)| n).sum()
    }
}

/// Housekeeping state.
pub struct Tick {
    metrics: Metrics,
    stats: Option<(StatsFile, Duration, Instant)>,
    housekeeping: Duration,
    last: Instant,
    snapshots: Option<Snapshots>,
    started: Instant,
}

/// Falco's `metrics` settings and state.
struct Snapshots {
    config: vigil_config::Metrics,
    file: Option<File>,
    last: Instant,
    previous_events: u64,
}

impl Tick {
    /// `stats_file`: Falco's `-s FILE` with `--stats-interval` (the first line is written one
    /// interval after start, then every interval, and a last one by [`Tick::finish`]).
    pub fn new(metrics: &Metrics, stats_file: Option<(&Path, Duration)>) -> io::Result<Tick> {
        let stats = match stats_file {
            Some((path, every)) => Some((StatsFile::create(path)?, every, Instant::now())),
            None => None,
        };
        let housekeeping = Duration::from_millis(250);
        let now = Instant::now();
        Ok(Tick {
            metrics: metrics.clone(),
            stats,
            housekeeping,
            // Due at the first call: the counters are published with the first event (a
            // traced workload may go idle right after it, and nothing calls again until its
            // next event).
            last: now.checked_sub(housekeeping).unwrap_or(now),
            snapshots: None,
            started: Instant::now(),
        })
    }

    /// Enables Falco's periodic metrics snapshots when `config.enabled` (appending to
    /// `output_file` when set).
    pub fn with_snapshots(mut self, config: &vigil_config::Metrics) -> io::Result<Tick> {
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
            });
        }
        Ok(self)
    }

    /// The metrics snapshot alert for `counts` now (Falco's field names where they exist).
    fn snapshot(&mut self, counts: &TickCounts, now_ns: u64, hostname: &str) -> Option<Alert> {
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
        put("evt.source", Value::Str(Cow::Borrowed(b"syscall")));
        put(
            "falco.version",
            Value::Str(Cow::Borrowed(env!("CARGO_PKG_VERSION").as_bytes())),
        );
        put(
            "falco.duration_sec",
            Value::U64(self.started.elapsed().as_secs()),
        );
        if c.kernel_event_counters_enabled {
            put("scap.n_evts", Value::U64(counts.events_in));
            put("scap.n_drops", Value::U64(counts.dropped_total()));
            put("falco.num_evts", Value::U64(counts.processed));
            put("falco.num_evts_prev", Value::U64(s.previous_events));
            let rate = (counts.processed.saturating_sub(s.previous_events)) as f64 / elapsed;
            put(
                "falco.evts_rate_sec",
                Value::Str(Cow::Owned(format!("{rate:.2}").into_bytes())),
            );
        }
        s.previous_events = counts.processed;
        if c.resource_utilization_enabled {
            if let Some((cpu, rss)) = vigil_output::metrics::process_usage() {
                let (name, rss) = if c.convert_memory_to_mb {
                    ("falco.memory_rss_mb", rss / 1_048_576.0)
                } else {
                    ("falco.memory_rss_kb", rss / 1024.0)
                };
                put(
                    name,
                    Value::Str(Cow::Owned(format!("{rss:.2}").into_bytes())),
                );
                put(
                    "falco.cpu_seconds",
                    Value::Str(Cow::Owned(format!("{cpu:.2}").into_bytes())),
                );
            }
        }
        if c.rules_counters_enabled {
            let mut total = 0.0;
            for (labels, n) in self.metrics.samples("vigil_alerts_total") {
                total += n;
                if let Some((_, rule)) = labels.iter().find(|(k, _)| k == "rule") {
                    put(&format!("falco.rules.{rule}"), Value::U64(n as u64));
                }
            }
            put("falco.rules.matches_total", Value::U64(total as u64));
        }
        if c.libbpf_stats_enabled {
            // Falco's per-program `<prog>.run_cnt`/`run_time_ns`/`avg_time_ns`, named by the
            // kernel program id (procfs gives no program name).
            let programs = crate::bpf::own_programs();
            crate::bpf::publish(&self.metrics, &programs);
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
        put(
            "falco.outputs_queue_num_drops",
            Value::U64(self.metrics.sum("vigil_output_dropped_total") as u64),
        );
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

    /// Whether [`Tick::run`] has anything to do now (cheap; call it every batch).
    pub fn due(&self) -> bool {
        let now = Instant::now();
        now.duration_since(self.last) >= self.housekeeping
            || self
                .snapshots
                .as_ref()
                .is_some_and(|s| now.duration_since(s.last) >= s.config.interval)
            || self
                .stats
                .as_ref()
                .is_some_and(|(_, every, last)| now.duration_since(*last) >= *every)
    }

    /// Updates metrics, the stats file and the metrics snapshot (when due) and the drop alert.
    pub fn run(
        &mut self,
        counts: &TickCounts,
        outputs: &mut Outputs,
        now_ns: u64,
    ) -> io::Result<()> {
        self.last = Instant::now();
        self.publish(counts);
        outputs.check_drops(counts.dropped_total(), now_ns);
        if self
            .snapshots
            .as_ref()
            .is_some_and(|s| s.last.elapsed() >= s.config.interval)
        {
            let hostname = outputs.hostname().to_owned();
            self.emit_snapshot(counts, outputs, now_ns, &hostname)?;
        }
        if let Some((file, every, last)) = self.stats.as_mut() {
            if last.elapsed() >= *every {
                *last = Instant::now();
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
        if let Some((file, _, _)) = self.stats.as_mut() {
            file.write(stats_counts(counts))?;
        }
        Ok(())
    }

    fn publish(&self, counts: &TickCounts) {
        let m = &self.metrics;
        m.set("vigil_events_in_total", &[], counts.events_in as f64);
        m.set("vigil_events_processed_total", &[], counts.processed as f64);
        for (reason, n) in &counts.dropped {
            m.set(
                "vigil_events_dropped_total",
                &[("reason", reason)],
                *n as f64,
            );
        }
        m.set(
            "vigil_rule_evaluation_seconds_total",
            &[],
            counts.eval_seconds,
        );
        m.sample_process();
    }
}

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
        assert!(tick.due());
        let counts = TickCounts {
            events_in: 10,
            processed: 8,
            dropped: vec![("ring_full".into(), 2)],
            eval_seconds: 0.5,
        };
        tick.run(&counts, &mut outputs, 0).unwrap();
        tick.finish(&counts, &mut outputs, 0).unwrap();
        assert_eq!(metrics.get("vigil_events_in_total", &[]), 10.0);
        assert_eq!(
            metrics.get("vigil_events_dropped_total", &[("reason", "ring_full")]),
            2.0
        );
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
        assert_eq!(lines[0]["cur"]["events"], 10);
        assert_eq!(lines[0]["drop_pct"], 20.0);
        assert_eq!(lines[1]["delta"]["events"], 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn metrics_snapshots_go_to_the_file_and_the_outputs() {
        let dir = std::env::temp_dir().join(format!("vigil-snap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("metrics.jsonl");
        let metrics = Metrics::new();
        metrics.add(
            "vigil_alerts_total",
            &[("rule", "R"), ("priority", "Warning")],
            3.0,
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
            events_in: 10,
            processed: 10,
            ..TickCounts::default()
        };
        std::thread::sleep(Duration::from_millis(1));
        assert!(tick.due());
        tick.run(&counts, &mut outputs, 0).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(v["rule"], METRICS_RULE);
        assert_eq!(v["priority"], "Informational");
        assert_eq!(v["output_fields"]["scap.n_evts"], 10);
        assert_eq!(v["output_fields"]["falco.rules.R"], 3);
        assert!(
            v["output_fields"].get("scap.n_drops").is_none(),
            "zero values omitted"
        );
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

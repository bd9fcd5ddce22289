//! A small metrics registry with Prometheus text exposition (format 0.0.4).
//!
//! Counters and gauges are keyed by family name and label values. Writers are the delivery
//! workers (per alert, not per event) and the agent's main loop, which copies the engine's
//! counters in periodically, so a mutex is cheap enough here.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Arc, Mutex, MutexGuard};

/// Whether a family is a counter or a gauge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
}

/// Every family Vigil exports: name, kind, help.
pub const FAMILIES: &[(&str, Kind, &str)] = &[
    (
        "vigil_events_in_total",
        Kind::Counter,
        "Events the source produced, processed or not.",
    ),
    (
        "vigil_events_processed_total",
        Kind::Counter,
        "Events that went through state and rules.",
    ),
    (
        "vigil_events_dropped_total",
        Kind::Counter,
        "Events lost before processing, by reason.",
    ),
    (
        "vigil_alerts_total",
        Kind::Counter,
        "Alerts emitted, by rule and priority.",
    ),
    (
        "vigil_rule_evaluation_seconds_total",
        Kind::Counter,
        "Time spent updating state and evaluating rules.",
    ),
    (
        "vigil_output_queue_depth",
        Kind::Gauge,
        "Alerts waiting in memory, per output.",
    ),
    (
        "vigil_output_spool_bytes",
        Kind::Gauge,
        "Bytes of alerts waiting on disk, per output.",
    ),
    (
        "vigil_output_delivered_total",
        Kind::Counter,
        "Alerts delivered, per output.",
    ),
    (
        "vigil_output_delivery_failures_total",
        Kind::Counter,
        "Failed delivery attempts, per output.",
    ),
    (
        "vigil_output_timeouts_total",
        Kind::Counter,
        "Delivery attempts that timed out, per output (included in the failures).",
    ),
    (
        "vigil_output_dropped_total",
        Kind::Counter,
        "Alerts an output lost, by reason (queue or spool budget exhausted, given up after failed attempts or consecutive timeouts, spool records damaged or missing on disk).",
    ),
    (
        "vigil_internal_alerts_total",
        Kind::Counter,
        "Internal alerts raised by the agent, by rule.",
    ),
    (
        "process_cpu_seconds_total",
        Kind::Counter,
        "User and system CPU time of the agent.",
    ),
    (
        "process_resident_memory_bytes",
        Kind::Gauge,
        "Resident memory of the agent.",
    ),
    ("vigil_up", Kind::Gauge, "1 while the agent runs."),
    (
        "vigil_bpf_program_runs_total",
        Kind::Counter,
        "Runs of each BPF program of the agent (metrics.libbpf_stats_enabled; counted while kernel.bpf_stats_enabled is set).",
    ),
    (
        "vigil_bpf_program_run_seconds_total",
        Kind::Counter,
        "Time spent in each BPF program of the agent (metrics.libbpf_stats_enabled; counted while kernel.bpf_stats_enabled is set).",
    ),
];

type Labels = Vec<(String, String)>;

#[derive(Default)]
struct Inner {
    samples: BTreeMap<String, BTreeMap<Labels, f64>>,
}

/// A shared registry; clones are handles to the same samples.
#[derive(Clone, Default)]
pub struct Metrics {
    inner: Arc<Mutex<Inner>>,
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

impl Metrics {
    pub fn new() -> Metrics {
        Metrics::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave samples half-written (plain numbers).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `by` to a counter (created at 0).
    pub fn add(&self, name: &str, label_pairs: &[(&str, &str)], by: f64) {
        let mut inner = self.lock();
        *inner
            .samples
            .entry(name.to_owned())
            .or_default()
            .entry(labels(label_pairs))
            .or_insert(0.0) += by;
    }

    /// Sets a gauge, or a counter copied from a source of truth (the engine's totals).
    pub fn set(&self, name: &str, label_pairs: &[(&str, &str)], value: f64) {
        self.lock()
            .samples
            .entry(name.to_owned())
            .or_default()
            .insert(labels(label_pairs), value);
    }

    /// A sample's value (0 when absent).
    pub fn get(&self, name: &str, label_pairs: &[(&str, &str)]) -> f64 {
        self.lock()
            .samples
            .get(name)
            .and_then(|m| m.get(&labels(label_pairs)))
            .copied()
            .unwrap_or(0.0)
    }

    /// The sum of a family over all label values.
    pub fn sum(&self, name: &str) -> f64 {
        self.lock()
            .samples
            .get(name)
            .map_or(0.0, |m| m.values().sum())
    }

    /// Every sample of a family: (labels, value), in label order.
    pub fn samples(&self, name: &str) -> Vec<(Vec<(String, String)>, f64)> {
        self.lock()
            .samples
            .get(name)
            .map(|m| m.iter().map(|(l, v)| (l.clone(), *v)).collect())
            .unwrap_or_default()
    }

    /// Samples the agent's own CPU time and resident memory from `/proc/self`.
    pub fn sample_process(&self) {
        if let Some((cpu, rss)) = process_usage() {
            self.set("process_cpu_seconds_total", &[], cpu);
            self.set("process_resident_memory_bytes", &[], rss);
        }
    }

    /// The Prometheus text exposition of every family (families without samples are listed
    /// with their HELP and TYPE only).
    pub fn render(&self) -> String {
        let inner = self.lock();
        let mut out = String::new();
        for (name, kind, help) in FAMILIES {
            let _ = writeln!(out, "# HELP {name} {help}");
            let kind = match kind {
                Kind::Counter => "counter",
                Kind::Gauge => "gauge",
            };
            let _ = writeln!(out, "# TYPE {name} {kind}");
            if let Some(samples) = inner.samples.get(*name) {
                for (labels, value) in samples {
                    out.push_str(name);
                    if !labels.is_empty() {
                        out.push('{');
                        for (i, (k, v)) in labels.iter().enumerate() {
                            if i > 0 {
                                out.push(',');
                            }
                            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
                        }
                        out.push('}');
                    }
                    let _ = writeln!(out, " {}", number(*value));
                }
            }
        }
        out
    }
}

fn number(v: f64) -> String {
    if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// (CPU seconds, resident bytes) of this process, from `/proc/self/stat` and
/// `/proc/self/statm`; clock ticks are taken as 100 per second and pages as 4 KiB (Linux's
/// values on the supported architectures).
pub fn process_usage() -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 after `)`, 0-based 11/12.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: f64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(((utime + stime) / 100.0, pages * 4096.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_gauges_and_text() {
        let m = Metrics::new();
        m.add(
            "vigil_output_dropped_total",
            &[("sink", "http"), ("reason", "spool_full")],
            2.0,
        );
        m.add(
            "vigil_output_dropped_total",
            &[("sink", "http"), ("reason", "spool_full")],
            1.0,
        );
        m.set("vigil_output_queue_depth", &[("sink", "http")], 7.0);
        m.set(
            "vigil_alerts_total",
            &[("rule", "a \"quoted\"\nrule"), ("priority", "Warning")],
            1.0,
        );
        assert_eq!(
            m.get(
                "vigil_output_dropped_total",
                &[("sink", "http"), ("reason", "spool_full")]
            ),
            3.0
        );
        assert_eq!(m.sum("vigil_output_dropped_total"), 3.0);
        let text = m.render();
        assert!(text.contains("# TYPE vigil_output_queue_depth gauge\nvigil_output_queue_depth{sink=\"http\"} 7\n"), "{text}");
        assert!(
            text.contains("vigil_output_dropped_total{sink=\"http\",reason=\"spool_full\"} 3\n"),
            "{text}"
        );
        assert!(text.contains("rule=\"a \\\"quoted\\\"\\nrule\""), "{text}");
    }

    #[test]
    fn process_usage_reads_proc() {
        let (cpu, rss) = process_usage().expect("/proc/self is readable on Linux");
        assert!(cpu >= 0.0);
        assert!(rss > 0.0);
    }
}

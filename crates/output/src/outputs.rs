//! The set of configured outputs: formats each alert once, counts it, and hands it to every
//! enabled output's delivery worker. Also raises Vigil's internal drop alerts (dropped events,
//! dropped alerts, spool damage).

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::delivery::{reason, Delivery, DeliveryOptions, SinkReport};
use crate::envelope::{AlertIds, RecordFormat};
use crate::format::Formatter;
use crate::http::{HttpSetupError, HttpSink};
use crate::kafka::{KafkaSetupError, KafkaSink};
use crate::metrics::{self, names, Metrics};
use crate::otlp::{OtlpSetupError, OtlpSink};
use crate::settings::{Delivery as DeliveryConfig, DropAlertSettings, OutputSettings};
use crate::sinks::{self, FileSink, ProgramSink, Record, Sink, SyslogSink};
use crate::{Alert, JsonOptions};

/// Rule name of the internal alert for dropped events.
pub const DROPPED_EVENTS_RULE: &str = "Vigil dropped events";
/// Rule name of the internal alert for dropped alerts.
pub const DROPPED_ALERTS_RULE: &str = "Vigil dropped alerts";
/// Rule name of the internal alert for spooled alerts found damaged or missing on disk
/// (`spool_corrupt`, `spool_gap`; not included in the dropped-alerts alert).
pub const SPOOL_LOSS_RULE: &str = "Vigil lost spooled alerts";
/// Rule name of the internal alert for reads of a traced workload's memory that failed
/// (`vigil run`: arguments left empty, rules possibly blind to them).
pub const READ_FAULTS_RULE: &str = "Vigil could not read workload memory";

/// Why the outputs could not be started.
#[derive(Debug, thiserror::Error)]
pub enum OutputsError {
    #[error("http_output: {0}")]
    Http(#[from] HttpSetupError),
    #[error(transparent)]
    Otlp(#[from] OtlpSetupError),
    #[error(transparent)]
    Kafka(#[from] KafkaSetupError),
    #[error("{output}: cannot open spool directory `{dir}`: {source}")]
    Spool {
        output: &'static str,
        dir: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{output}: cannot start delivery worker: {source}")]
    Worker {
        output: &'static str,
        #[source]
        source: std::io::Error,
    },
}

/// The outcome of delivery at shutdown, per output.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DeliveryReport {
    pub sinks: Vec<SinkReport>,
}

impl DeliveryReport {
    /// Alerts lost by every output together.
    pub fn dropped_total(&self) -> u64 {
        self.sinks.iter().map(SinkReport::dropped_total).sum()
    }

    /// Alerts every output together dropped for `why` (a [`reason`]).
    pub fn dropped_by(&self, why: &str) -> u64 {
        self.sinks.iter().filter_map(|s| s.dropped.get(why)).sum()
    }

    /// One line per output for the log: `http: delivered 10, dropped 2 (spool_full=2), …`.
    pub fn summary(&self) -> Vec<String> {
        self.sinks
            .iter()
            .map(|s| {
                let dropped: Vec<String> =
                    s.dropped.iter().map(|(r, n)| format!("{r}={n}")).collect();
                format!(
                    "{}: delivered {}, failed attempts {}{}, dropped {}{}, left in spool {}",
                    s.name,
                    s.delivered,
                    s.failures,
                    if s.timeouts > 0 {
                        format!(" ({} timed out)", s.timeouts)
                    } else {
                        String::new()
                    },
                    s.dropped_total(),
                    if dropped.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", dropped.join(", "))
                    },
                    s.spooled_at_exit
                )
            })
            .collect()
    }
}

/// Syslog severity of a Falco priority name (unknown names: informational).
pub fn severity(priority: &str) -> u8 {
    match priority.to_ascii_lowercase().as_str() {
        "emergency" => 0,
        "alert" => 1,
        "critical" => 2,
        "error" => 3,
        "warning" => 4,
        "notice" => 5,
        "debug" => 7,
        _ => 6,
    }
}

/// Drop-alert settings and state.
struct DropWatch {
    enabled: bool,
    priority: &'static str,
    threshold: u64,
    rate_limit: Duration,
    last_alert: Option<Instant>,
    seen_events: u64,
    seen_alerts: u64,
    /// The spool-loss alert has its own rate limit, so a flood of dropped alerts cannot hide
    /// damage on disk (nor the reverse).
    last_spool_alert: Option<Instant>,
    /// `(corrupt, gap)` totals at the last spool-loss alert.
    seen_spool: (u64, u64),
    /// The read-fault alert has its own rate limit too.
    last_read_fault_alert: Option<Instant>,
    /// The read-fault total at the last read-fault alert.
    seen_read_faults: u64,
}

/// Every enabled output with its delivery worker.
pub struct Outputs {
    formatter: Formatter,
    deliveries: Vec<Delivery>,
    /// What each delivery (same index) queues for an alert.
    formats: Vec<RecordFormat>,
    /// Alert ids of the envelope records (made only when some output takes envelopes).
    ids: AlertIds,
    /// `stdout_output` written to stderr under `vigil run`: synchronously, by the caller's
    /// thread at the event (the traced workload is stopped then), so an alert line never
    /// lands between two writes of the workload's own stderr.
    console: Option<std::sync::Mutex<std::io::Stderr>>,
    metrics: Metrics,
    hostname: String,
    drops: DropWatch,
}

fn options(config: &OutputSettings, delivery: &DeliveryConfig) -> DeliveryOptions {
    DeliveryOptions {
        queue_capacity: config.outputs_queue.bound(),
        spool: delivery
            .spool_dir
            .as_ref()
            .map(|d| (d.clone(), delivery.spool_max_bytes)),
        max_backoff: delivery.retry_max_backoff,
        ..DeliveryOptions::default()
    }
}

impl Outputs {
    /// Starts every output `config` enables. `hostname` labels syslog messages and internal
    /// alerts.
    pub fn from_config(
        config: &OutputSettings,
        metrics: &Metrics,
        hostname: &str,
    ) -> Result<Outputs, OutputsError> {
        Outputs::from_config_to(config, metrics, hostname, sinks::Console::Stdout)
    }

    /// [`Outputs::from_config`] with `stdout_output` writing to `console`.
    pub fn from_config_to(
        config: &OutputSettings,
        metrics: &Metrics,
        hostname: &str,
        console: sinks::Console,
    ) -> Result<Outputs, OutputsError> {
        let formatter = config.format.clone();
        let mut planned: Vec<(&'static str, Box<dyn Sink>, DeliveryOptions)> = Vec::new();
        let mut formats = Vec::new();
        let direct = config.stdout_output.enabled && console == sinks::Console::Stderr;
        if config.stdout_output.enabled && !direct {
            planned.push((
                "stdout_output",
                Box::new(sinks::stdout_sink(config.buffered_outputs)),
                DeliveryOptions {
                    queue_capacity: config.outputs_queue.bound(),
                    ..DeliveryOptions::default()
                },
            ));
        }
        let f = &config.file_output;
        if f.enabled {
            planned.push((
                "file_output",
                Box::new(FileSink::new(
                    &f.filename,
                    f.keep_alive,
                    config.buffered_outputs,
                )),
                options(config, &f.delivery()),
            ));
        }
        let s = &config.syslog_output;
        if s.enabled {
            planned.push((
                "syslog_output",
                Box::new(SyslogSink::new(&s.socket)),
                options(config, &s.delivery()),
            ));
        }
        let p = &config.program_output;
        if p.enabled {
            planned.push((
                "program_output",
                Box::new(ProgramSink::new(&p.program, p.keep_alive)),
                options(config, &p.delivery()),
            ));
        }
        let h = &config.http_output;
        if h.enabled {
            planned.push((
                "http_output",
                Box::new(HttpSink::new(h, formatter.content_type())?),
                DeliveryOptions {
                    max_consecutive_timeouts: Some(h.max_consecutive_timeouts),
                    ..options(config, &h.delivery())
                },
            ));
        }
        formats.resize(planned.len(), RecordFormat::Line);
        let o = &config.otlp_output;
        if o.enabled {
            planned.push((
                "otlp_output",
                Box::new(OtlpSink::new(o)?),
                options(config, &o.delivery()),
            ));
            // The OTLP record carries every property, whatever `json_include_*` says.
            formats.push(RecordFormat::Envelope(JsonOptions::default()));
        }
        let k = &config.kafka_output;
        if k.enabled {
            planned.push((
                "kafka_output",
                Box::new(KafkaSink::new(k)?),
                options(config, &k.delivery()),
            ));
            formats.push(RecordFormat::Envelope(formatter.json_options));
        }
        let mut deliveries = Vec::with_capacity(planned.len());
        for (output, sink, opts) in planned {
            let spool_dir = opts.spool.as_ref().map(|(d, _)| d.display().to_string());
            let delivery =
                Delivery::start(sink, opts, metrics).map_err(|source| match spool_dir {
                    Some(dir) => OutputsError::Spool {
                        output,
                        dir,
                        source,
                    },
                    None => OutputsError::Worker { output, source },
                })?;
            deliveries.push(delivery);
        }
        metrics.set(names::UP, &[], 1.0);
        let d = &config.drop_alert;
        Ok(Outputs {
            formatter,
            deliveries,
            formats,
            ids: AlertIds::new(),
            console: direct.then(|| std::sync::Mutex::new(std::io::stderr())),
            metrics: metrics.clone(),
            hostname: hostname.to_owned(),
            drops: DropWatch {
                enabled: d.enabled,
                priority: d.priority,
                threshold: d.threshold,
                rate_limit: d.rate_limit,
                last_alert: None,
                seen_events: 0,
                seen_alerts: 0,
                last_spool_alert: None,
                seen_spool: (0, 0),
                last_read_fault_alert: None,
                seen_read_faults: 0,
            },
        })
    }

    /// Outputs over explicit sinks (tests, benchmarks, embedding).
    pub fn with_sinks(
        formatter: Formatter,
        sinks: Vec<(Box<dyn Sink>, DeliveryOptions)>,
        metrics: &Metrics,
    ) -> std::io::Result<Outputs> {
        let deliveries = sinks
            .into_iter()
            .map(|(sink, opts)| Delivery::start(sink, opts, metrics))
            .collect::<Result<Vec<_>, _>>()?;
        let defaults = DropAlertSettings::default();
        Ok(Outputs {
            formatter,
            formats: vec![RecordFormat::Line; deliveries.len()],
            ids: AlertIds::new(),
            deliveries,
            console: None,
            metrics: metrics.clone(),
            hostname: String::new(),
            drops: DropWatch {
                enabled: defaults.enabled,
                priority: defaults.priority,
                threshold: defaults.threshold,
                rate_limit: defaults.rate_limit,
                last_alert: None,
                seen_events: 0,
                seen_alerts: 0,
                last_spool_alert: None,
                seen_spool: (0, 0),
                last_read_fault_alert: None,
                seen_read_faults: 0,
            },
        })
    }

    /// The names of the running outputs (`stdout`, `file`, …).
    pub fn names(&self) -> Vec<String> {
        self.deliveries
            .iter()
            .map(|d| d.name().to_owned())
            .collect()
    }

    /// The hostname internal alerts carry.
    pub fn hostname(&self) -> &str {
        &self.hostname
    }

    pub fn formatter(&self) -> &Formatter {
        &self.formatter
    }

    /// Formats `alert` once, counts it (`falcosecurity_falco_rules_matches_total{rule_name,
    /// priority,source,tag_*}`) and queues it on every output. Never blocks on an output.
    pub fn emit(&self, alert: &Alert) {
        self.metrics.add_labels(
            names::RULES_MATCHES,
            metrics::rule_labels(&alert.rule, &alert.priority, &alert.source, &alert.tags),
            1.0,
        );
        self.deliver(alert);
    }

    /// Delivers an alert the agent raises itself (metrics snapshot, drop alert) on every
    /// output, counted in `vigil_internal_alerts_total{rule}` rather than with rule alerts.
    pub fn emit_internal(&self, alert: &Alert) {
        self.metrics
            .add(names::INTERNAL_ALERTS, &[("rule", &alert.rule)], 1.0);
        self.deliver(alert);
    }

    fn deliver(&self, alert: &Alert) {
        let record = Record {
            severity: severity(&alert.priority),
            body: self.formatter.format(alert).into(),
        };
        if let Some(console) = &self.console {
            // One write(2) for the whole line: atomic against the workload's writes.
            let mut line = Vec::with_capacity(record.body.len() + 1);
            line.extend_from_slice(record.body.as_bytes());
            line.push(b'\n');
            if let Ok(mut stderr) = console.lock() {
                let _ = std::io::Write::write_all(&mut *stderr, &line);
            }
        }
        // The envelope (alert id and Falco's JSON) is made once per alert and JSON options.
        let mut enveloped: Option<(JsonOptions, Record)> = None;
        let mut id = None;
        for (delivery, format) in self.deliveries.iter().zip(&self.formats) {
            match format {
                RecordFormat::Line => delivery.enqueue(record.clone()),
                RecordFormat::Envelope(options) => {
                    let reuse = enveloped.as_ref().filter(|(o, _)| o == options);
                    let record = match reuse {
                        Some((_, r)) => r.clone(),
                        None => {
                            let id = id.get_or_insert_with(|| self.ids.next(alert.time));
                            let r = Record {
                                severity: record.severity,
                                body: crate::envelope::envelope(id, alert, options).into(),
                            };
                            enveloped = Some((*options, r.clone()));
                            r
                        }
                    };
                    delivery.enqueue(record);
                }
            }
        }
    }

    /// Reopens every output's file or connection (SIGUSR1).
    pub fn reopen(&self) {
        for delivery in &self.deliveries {
            delivery.reopen();
        }
    }

    /// Counters so far, per output.
    pub fn report(&self) -> DeliveryReport {
        DeliveryReport {
            sinks: self.deliveries.iter().map(Delivery::report).collect(),
        }
    }

    /// Checks the drop counters (`events_dropped`: the total the source reported so far) and
    /// raises the internal alerts when more than the threshold were dropped since the last
    /// one, at most once per rate-limit period: dropped events, dropped alerts (every reason
    /// but spool damage) and, with its own rate limit, spooled alerts found damaged or missing
    /// on disk. Each carries the running totals. Returns the alerts raised.
    pub fn check_drops(&mut self, events_dropped: u64, now_ns: u64) -> Vec<Alert> {
        self.drop_alerts(events_dropped, now_ns, false)
    }

    /// The last drop check, at exit: raises the internal alerts for every loss not yet
    /// reported, whatever the rate limits and the threshold, so the totals a reader of the
    /// alerts sees are the final ones. Returns the alerts raised.
    pub fn final_drops(&mut self, events_dropped: u64, now_ns: u64) -> Vec<Alert> {
        self.drop_alerts(events_dropped, now_ns, true)
    }

    fn drop_alerts(&mut self, events_dropped: u64, now_ns: u64, last: bool) -> Vec<Alert> {
        let report = self.report();
        let spool_corrupt = report.dropped_by(reason::SPOOL_CORRUPT);
        let spool_gap = report.dropped_by(reason::SPOOL_GAP);
        let alerts_dropped = report.dropped_total() - spool_corrupt - spool_gap;
        let w = &mut self.drops;
        if !w.enabled {
            return Vec::new();
        }
        let priority = w.priority;
        let alert = |rule: &str, output: String, fields: Vec<(String, u64)>| Alert {
            time: now_ns,
            rule: rule.to_owned(),
            priority: Cow::Borrowed(priority),
            source: Cow::Borrowed("internal"),
            tags: vec!["vigil".to_owned()],
            hostname: self.hostname.clone(),
            output,
            output_fields: fields
                .into_iter()
                .map(|(name, n)| (name, Some(vigil_fields::Value::U64(n))))
                .collect(),
        };
        let mut raised = Vec::new();
        let threshold = if last { 0 } else { w.threshold };
        if last || w.last_alert.is_none_or(|t| t.elapsed() >= w.rate_limit) {
            let new_events = events_dropped.saturating_sub(w.seen_events);
            let new_alerts = alerts_dropped.saturating_sub(w.seen_alerts);
            let make = |rule: &str, what: &str, n: u64, total: u64| {
                alert(
                    rule,
                    format!("Vigil dropped {n} {what} since the last report ({total} in total)"),
                    vec![
                        (format!("vigil.{what}_dropped"), n),
                        (format!("vigil.{what}_dropped_total"), total),
                    ],
                )
            };
            let before = raised.len();
            if new_events > threshold {
                raised.push(make(
                    DROPPED_EVENTS_RULE,
                    "events",
                    new_events,
                    events_dropped,
                ));
            }
            if new_alerts > threshold {
                raised.push(make(
                    DROPPED_ALERTS_RULE,
                    "alerts",
                    new_alerts,
                    alerts_dropped,
                ));
            }
            if raised.len() > before {
                w.last_alert = Some(Instant::now());
                w.seen_events = events_dropped;
                w.seen_alerts = alerts_dropped;
            }
        }
        let (new_corrupt, new_gap) = (
            spool_corrupt.saturating_sub(w.seen_spool.0),
            spool_gap.saturating_sub(w.seen_spool.1),
        );
        if new_corrupt + new_gap > threshold
            && (last
                || w.last_spool_alert
                    .is_none_or(|t| t.elapsed() >= w.rate_limit))
        {
            let sinks: Vec<&str> = report
                .sinks
                .iter()
                .filter(|s| s.spool_lost() > 0)
                .map(|s| s.name.as_str())
                .collect();
            raised.push(alert(
                SPOOL_LOSS_RULE,
                format!(
                    "Vigil lost {} spooled alert(s) since the last report: {new_corrupt} damaged, \
                     {new_gap} missing ({spool_corrupt} damaged and {spool_gap} missing in \
                     total; output {})",
                    new_corrupt + new_gap,
                    sinks.join(", ")
                ),
                vec![
                    ("vigil.spool_corrupt".to_owned(), new_corrupt),
                    ("vigil.spool_gap".to_owned(), new_gap),
                    ("vigil.spool_corrupt_total".to_owned(), spool_corrupt),
                    ("vigil.spool_gap_total".to_owned(), spool_gap),
                ],
            ));
            w.last_spool_alert = Some(Instant::now());
            w.seen_spool = (spool_corrupt, spool_gap);
        }
        for alert in &raised {
            log::warn!("{}", alert.output);
            self.emit_internal(alert);
        }
        raised
    }

    /// Checks the count of failed reads of the traced workload's memory (`total` so far;
    /// `method` names how it is read) and raises the internal alert when there are new ones,
    /// under the drop alert's settings (enabled, priority, threshold) and at most once per
    /// its rate-limit period — or, with `last` (at exit), whenever any is unreported.
    /// Returns the alert raised.
    pub fn check_read_faults(
        &mut self,
        total: u64,
        method: &str,
        now_ns: u64,
        last: bool,
    ) -> Option<Alert> {
        let w = &mut self.drops;
        let new = total.saturating_sub(w.seen_read_faults);
        let threshold = if last { 0 } else { w.threshold };
        if !w.enabled
            || new <= threshold
            || !(last
                || w.last_read_fault_alert
                    .is_none_or(|t| t.elapsed() >= w.rate_limit))
        {
            return None;
        }
        w.last_read_fault_alert = Some(Instant::now());
        w.seen_read_faults = total;
        let alert = Alert {
            time: now_ns,
            rule: READ_FAULTS_RULE.to_owned(),
            priority: Cow::Borrowed(w.priority),
            source: Cow::Borrowed("internal"),
            tags: vec!["vigil".to_owned()],
            hostname: self.hostname.clone(),
            output: format!(
                "Vigil could not read the workload's memory {new} times since the last report \
                 ({total} in total; read with {method}): the arguments of those syscalls are \
                 missing and rules on them may not match"
            ),
            output_fields: vec![
                (
                    "vigil.read_faults".to_owned(),
                    Some(vigil_fields::Value::U64(new)),
                ),
                (
                    "vigil.read_faults_total".to_owned(),
                    Some(vigil_fields::Value::U64(total)),
                ),
                (
                    "vigil.memory_access".to_owned(),
                    Some(vigil_fields::Value::Str(method.as_bytes().to_vec().into())),
                ),
            ],
        };
        log::warn!("{}", alert.output);
        self.emit_internal(&alert);
        Some(alert)
    }

    /// Delivers what is pending until `deadline` (SIGTERM), then stops every worker.
    pub fn shutdown(self, deadline: Instant) -> DeliveryReport {
        let sinks = self
            .deliveries
            .into_iter()
            .map(|d| d.shutdown(deadline))
            .collect();
        self.metrics.set(names::UP, &[], 0.0);
        DeliveryReport { sinks }
    }
}

/// Per-output drop counters, for tests and reports: output name → reason → count.
pub fn dropped_by_output(report: &DeliveryReport) -> BTreeMap<String, BTreeMap<String, u64>> {
    report
        .sinks
        .iter()
        .map(|s| (s.name.clone(), s.dropped.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    struct Collect(Arc<Mutex<Vec<String>>>);
    impl Sink for Collect {
        fn name(&self) -> &str {
            "collect"
        }
        fn send(&mut self, record: &Record) -> Result<(), crate::sinks::SinkError> {
            self.0
                .lock()
                .unwrap()
                .push(format!("{} {}", record.severity, record.body));
            Ok(())
        }
    }

    fn alert(rule: &str, priority: &'static str) -> Alert {
        Alert {
            time: 0,
            rule: rule.into(),
            priority: priority.into(),
            source: "syscall".into(),
            tags: vec![],
            hostname: "h".into(),
            output: "out".into(),
            output_fields: vec![],
        }
    }

    #[test]
    fn emit_formats_counts_and_delivers() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let metrics = Metrics::new();
        let outputs = Outputs::with_sinks(
            Formatter::default(),
            vec![(Box::new(Collect(got.clone())), DeliveryOptions::default())],
            &metrics,
        )
        .unwrap();
        outputs.emit(&alert("A", "Critical"));
        outputs.emit(&alert("A", "Critical"));
        outputs.emit(&alert("B", "Debug"));
        let report = outputs.shutdown(Instant::now() + Duration::from_secs(10));
        assert_eq!(report.sinks[0].delivered, 3);
        assert_eq!(
            *got.lock().unwrap(),
            [
                "2 00:00:00.000000000: Critical out",
                "2 00:00:00.000000000: Critical out",
                "7 00:00:00.000000000: Debug out"
            ]
        );
        assert_eq!(
            metrics.get(
                names::RULES_MATCHES,
                &[("priority", "2"), ("rule_name", "A"), ("source", "syscall")]
            ),
            2.0
        );
        assert_eq!(metrics.get(names::UP, &[]), 0.0);
    }

    #[test]
    fn read_fault_alert_is_rate_limited_and_final() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let metrics = Metrics::new();
        let mut outputs = Outputs::with_sinks(
            Formatter::default(),
            vec![(Box::new(Collect(got.clone())), DeliveryOptions::default())],
            &metrics,
        )
        .unwrap();
        assert!(outputs.check_read_faults(0, "ptrace", 0, false).is_none());
        let alert = outputs
            .check_read_faults(6, "ptrace", 0, false)
            .expect("new faults raise the alert");
        assert_eq!(alert.rule, READ_FAULTS_RULE);
        assert_eq!(alert.source, "internal");
        assert!(
            alert.output.starts_with(
                "Vigil could not read the workload's memory 6 times since the last report \
                 (6 in total; read with ptrace)"
            ),
            "{}",
            alert.output
        );
        assert!(
            outputs.check_read_faults(9, "ptrace", 0, false).is_none(),
            "rate-limited"
        );
        let last = outputs
            .check_read_faults(9, "ptrace", 0, true)
            .expect("at exit the rest is reported");
        assert!(last.output.contains(" 3 times "), "{}", last.output);
        assert!(outputs.check_read_faults(9, "ptrace", 0, true).is_none());
        let report = outputs.shutdown(Instant::now() + Duration::from_secs(10));
        assert_eq!(report.sinks[0].delivered, 2);
        assert_eq!(
            metrics.get(names::INTERNAL_ALERTS, &[("rule", READ_FAULTS_RULE)]),
            2.0
        );
    }

    #[test]
    fn drop_alert_threshold_and_rate_limit() {
        let got = Arc::new(Mutex::new(Vec::new()));
        let metrics = Metrics::new();
        let mut outputs = Outputs::with_sinks(
            Formatter::default(),
            vec![(Box::new(Collect(got.clone())), DeliveryOptions::default())],
            &metrics,
        )
        .unwrap();
        assert!(outputs.check_drops(0, 0).is_empty());
        let raised = outputs.check_drops(5, 0);
        assert_eq!(raised.len(), 1);
        assert_eq!(raised[0].rule, DROPPED_EVENTS_RULE);
        assert_eq!(raised[0].priority, "Critical");
        // Rate-limited: more drops within the period raise nothing.
        assert!(outputs.check_drops(50, 0).is_empty());
        outputs.drops.rate_limit = Duration::ZERO;
        let raised = outputs.check_drops(50, 0);
        assert_eq!(
            raised[0].output,
            "Vigil dropped 45 events since the last report (50 in total)"
        );
        outputs.drops.threshold = 100;
        assert!(
            outputs.check_drops(120, 0).is_empty(),
            "20 new drops are under the threshold"
        );
        // At exit, what is still unreported is reported, under the threshold and within
        // the rate-limit period alike, with the final total.
        outputs.drops.rate_limit = Duration::from_secs(3600);
        let raised = outputs.final_drops(121, 0);
        assert_eq!(
            raised[0].output,
            "Vigil dropped 71 events since the last report (121 in total)"
        );
        assert!(outputs.final_drops(121, 0).is_empty(), "nothing new");
        let report = outputs.shutdown(Instant::now() + Duration::from_secs(10));
        assert_eq!(report.sinks[0].delivered, 3);
        assert_eq!(
            metrics.get(names::INTERNAL_ALERTS, &[("rule", DROPPED_EVENTS_RULE)]),
            3.0
        );
    }

    /// A sink that is always down.
    struct Down;
    impl Sink for Down {
        fn name(&self) -> &str {
            "collect"
        }
        fn send(&mut self, _: &Record) -> Result<(), crate::sinks::SinkError> {
            Err(crate::sinks::SinkError::Unavailable("down".into()))
        }
    }

    #[test]
    fn spool_damage_raises_its_own_alert_with_totals() {
        let dir = tempfile::tempdir().unwrap();
        let spooled = DeliveryOptions {
            spool: Some((dir.path().to_owned(), 1 << 20)),
            ..DeliveryOptions::default()
        };
        let metrics = Metrics::new();
        let outputs = Outputs::with_sinks(
            Formatter::default(),
            vec![(Box::new(Down), spooled.clone())],
            &metrics,
        )
        .unwrap();
        for rule in ["A", "B", "C"] {
            outputs.emit(&alert(rule, "Warning"));
        }
        let report = outputs.shutdown(Instant::now());
        assert_eq!(report.sinks[0].spooled_at_exit, 3);
        // Damage the second record: the first byte of its body (the three text lines are
        // alike, `00:00:00.000000000: Warning out`).
        let segment = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "spool"))
            .unwrap();
        let mut data = std::fs::read(&segment).unwrap();
        let bodies: Vec<usize> = data
            .windows(8)
            .enumerate()
            .filter(|(_, w)| *w == b"00:00:00")
            .map(|(i, _)| i)
            .collect();
        assert_eq!(bodies.len(), 3);
        data[bodies[1]] = b'1';
        std::fs::write(&segment, data).unwrap();

        let got = Arc::new(Mutex::new(Vec::new()));
        let mut outputs = Outputs::with_sinks(
            Formatter::default(),
            vec![(Box::new(Collect(got.clone())), spooled)],
            &metrics,
        )
        .unwrap();
        let start = Instant::now();
        while outputs.report().sinks[0].delivered < 2 {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "delivery stalled"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let raised = outputs.check_drops(0, 0);
        assert_eq!(raised.len(), 1, "{raised:?}");
        assert_eq!(raised[0].rule, SPOOL_LOSS_RULE);
        assert_eq!(
            raised[0].output,
            "Vigil lost 1 spooled alert(s) since the last report: 1 damaged, 0 missing (1 \
             damaged and 0 missing in total; output collect)"
        );
        let field = |name: &str| {
            raised[0]
                .output_fields
                .iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, v)| v.clone())
        };
        assert_eq!(
            field("vigil.spool_corrupt_total"),
            Some(vigil_fields::Value::U64(1))
        );
        assert_eq!(field("vigil.spool_gap"), Some(vigil_fields::Value::U64(0)));
        // Nothing new: nothing raised, even without a rate limit.
        outputs.drops.rate_limit = Duration::ZERO;
        assert!(outputs.check_drops(0, 0).is_empty());
        let report = outputs.shutdown(Instant::now() + Duration::from_secs(10));
        // The two intact alerts and the internal one.
        assert_eq!(report.sinks[0].delivered, 3);
        assert_eq!(report.dropped_by(reason::SPOOL_CORRUPT), 1);
        assert_eq!(got.lock().unwrap().len(), 3);
    }

    #[test]
    fn from_config_starts_enabled_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = OutputSettings::default();
        config.stdout_output.enabled = false;
        config.syslog_output.enabled = false;
        config.file_output.enabled = true;
        config.file_output.filename = dir.path().join("alerts.txt");
        config.format.json = true;
        let metrics = Metrics::new();
        let outputs = Outputs::from_config(&config, &metrics, "h").unwrap();
        assert_eq!(outputs.names(), ["file"]);
        outputs.emit(&alert("A", "Warning"));
        outputs.shutdown(Instant::now() + Duration::from_secs(10));
        let text = std::fs::read_to_string(dir.path().join("alerts.txt")).unwrap();
        let v: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
        assert_eq!(v["rule"], "A");

        config.http_output.enabled = true;
        config.http_output.url = String::new();
        let e = Outputs::from_config(&config, &metrics, "h").err().unwrap();
        assert_eq!(e.to_string(), "http_output: http_output.url is empty");
        config.http_output.enabled = false;
        config.file_output.spool_dir = Some("/proc/forbidden/spool".into());
        let e = Outputs::from_config(&config, &metrics, "h")
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.starts_with("file_output: cannot open spool directory `/proc/forbidden/spool`"),
            "{e}"
        );
    }
}

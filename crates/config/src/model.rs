//! Configuration types and their defaults.

use std::path::PathBuf;
use std::time::Duration;

use vigil_output::metrics::Flags;
use vigil_output::settings::{DropAlertSettings, OutputSettings};
use vigil_output::{Formatter, JsonOptions};

/// The whole agent configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Rules files or directories, loaded in order (`rules_files`; the older `rules_file` is
    /// accepted too, `rules_files` wins when both are present). Empty means Vigil's embedded
    /// default ruleset.
    pub rules_files: Vec<PathBuf>,
    /// Reload rules and configuration when the configuration file or a loaded rules file or
    /// directory changes, as SIGHUP does (`watch_config_files`).
    pub watch_config_files: bool,
    /// Enable/disable selectors applied in order after loading rules (`rules`).
    pub rules: Vec<RuleSelector>,
    /// Minimum rule priority to load (`priority`).
    pub priority: Priority,
    /// Whether evaluation stops at the first matching rule (`rule_matching`).
    pub rule_matching: RuleMatching,
    pub json_output: bool,
    pub json_include_output_property: bool,
    pub json_include_tags_property: bool,
    pub json_include_message_property: bool,
    pub json_include_output_fields_property: bool,
    /// Text alerts start with an ISO 8601 timestamp instead of Falco's `HH:MM:SS.nnnnnnnnn`
    /// (`time_format_iso_8601`).
    pub time_format_iso_8601: bool,
    /// Extra output text and fields appended to matching rules' outputs (`append_output`).
    pub append_output: Vec<AppendOutput>,
    pub stdout_output: StdoutOutput,
    pub file_output: FileOutput,
    pub syslog_output: SyslogOutput,
    pub program_output: ProgramOutput,
    pub http_output: HttpOutput,
    /// Vigil-only: OTLP logs to an OpenTelemetry Collector (`otlp_output`).
    pub otlp_output: OtlpOutput,
    /// Vigil-only: Falco's JSON alerts to a Kafka topic (`kafka_output`).
    pub kafka_output: KafkaOutput,
    pub buffered_outputs: bool,
    pub outputs_queue: OutputsQueue,
    pub webserver: Webserver,
    pub metrics: Metrics,
    /// Vigil-only: the internal alert raised when events or alerts are dropped (`drop_alert`).
    pub drop_alert: DropAlert,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            // Empty: Vigil's embedded default ruleset (Falco's default lists /etc/falco files).
            rules_files: Vec::new(),
            watch_config_files: true,
            rules: Vec::new(),
            priority: Priority::Debug,
            rule_matching: RuleMatching::First,
            json_output: false,
            json_include_output_property: true,
            json_include_tags_property: true,
            json_include_message_property: false,
            json_include_output_fields_property: true,
            time_format_iso_8601: false,
            append_output: Vec::new(),
            stdout_output: StdoutOutput { enabled: true },
            file_output: FileOutput::default(),
            syslog_output: SyslogOutput::default(),
            program_output: ProgramOutput::default(),
            http_output: HttpOutput::default(),
            otlp_output: OtlpOutput::default(),
            kafka_output: KafkaOutput::default(),
            buffered_outputs: false,
            outputs_queue: OutputsQueue { capacity: 0 },
            webserver: Webserver::default(),
            metrics: Metrics::default(),
            drop_alert: DropAlert::default(),
        }
    }
}

// Priorities and `rule_matching` are the rules engine's own types: the configuration only
// selects among them.
pub use vigil_rules::{Priority, RuleMatching};
// Each output's section is the output crate's own type: the configuration reads it from YAML.
pub use vigil_output::settings::{
    Compression, Delivery, FileOutput, HttpOutput, KafkaOutput, OtlpOutput, OutputsQueue,
    ProgramOutput, SaslMechanism, StdoutOutput, SyslogOutput,
};

impl Config {
    /// What the outputs start from: the alert format, each output's section, the queue bound
    /// and the drop alert.
    pub fn output_settings(&self) -> OutputSettings {
        OutputSettings {
            format: Formatter {
                json: self.json_output,
                json_options: JsonOptions {
                    include_output: self.json_include_output_property,
                    include_tags: self.json_include_tags_property,
                    include_output_fields: self.json_include_output_fields_property,
                },
                include_message: self.json_include_message_property,
                iso_8601: self.time_format_iso_8601,
            },
            stdout_output: self.stdout_output.clone(),
            file_output: self.file_output.clone(),
            syslog_output: self.syslog_output.clone(),
            program_output: self.program_output.clone(),
            http_output: self.http_output.clone(),
            otlp_output: self.otlp_output.clone(),
            kafka_output: self.kafka_output.clone(),
            buffered_outputs: self.buffered_outputs,
            outputs_queue: self.outputs_queue.clone(),
            drop_alert: DropAlertSettings {
                enabled: self.drop_alert.enabled,
                priority: self.drop_alert.priority.as_str(),
                threshold: self.drop_alert.threshold,
                rate_limit: self.drop_alert.rate_limit,
            },
        }
    }
}

/// One item of Falco's `rules:` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleSelector {
    Enable(RuleMatch),
    Disable(RuleMatch),
}

/// What a `rules:` selector applies to; the name may contain `*` wildcards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleMatch {
    Rule(String),
    Tag(String),
}

/// One `append_output` item.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppendOutput {
    /// The `match` conditions; all given ones must hold (none given: every rule).
    pub matches: AppendMatch,
    pub extra_output: Option<String>,
    pub extra_fields: Vec<ExtraField>,
}

/// The `match` part of an `append_output` item.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AppendMatch {
    pub source: Option<String>,
    pub tags: Vec<String>,
    pub rule: Option<String>,
}

/// An `extra_fields` entry: a bare field name (`evt.hostname`, `value: None`) or a single-key
/// mapping `{name: value}` whose value is an output format or literal text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraField {
    pub name: String,
    pub value: Option<String>,
}

/// Vigil-only (`drop_alert`): an internal alert, through the normal outputs, when more than
/// `threshold` events or alerts were dropped since the last check; at most one per `rate_limit`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropAlert {
    pub enabled: bool,
    pub priority: Priority,
    pub threshold: u64,
    pub rate_limit: Duration,
}

impl Default for DropAlert {
    fn default() -> Self {
        DropAlert {
            enabled: true,
            priority: Priority::Critical,
            threshold: 0,
            rate_limit: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webserver {
    pub enabled: bool,
    pub listen_port: u16,
    /// Vigil's default is the loopback address `127.0.0.1` (Falco binds `0.0.0.0`): the health
    /// and metrics endpoints are exposed beyond the host only when the user asks for it.
    pub listen_address: String,
    pub k8s_healthz_endpoint: String,
    pub ssl_enabled: bool,
    pub ssl_certificate: PathBuf,
    pub prometheus_metrics_enabled: bool,
    /// Vigil-only (`bind_failure`): what an enabled web server whose address cannot be bound
    /// (port taken, address not on this host) does to the agent's start.
    pub bind_failure: BindFailure,
}

/// `webserver.bind_failure`: `exit` (the default: the start fails, exit code 1, naming the
/// address) or `continue` (a warning, and the agent runs without `/healthz` and `/metrics`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BindFailure {
    #[default]
    Exit,
    Continue,
}

impl BindFailure {
    /// The configuration spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            BindFailure::Exit => "exit",
            BindFailure::Continue => "continue",
        }
    }
}

impl Default for Webserver {
    fn default() -> Self {
        Webserver {
            enabled: true,
            listen_port: 8765,
            listen_address: "127.0.0.1".to_owned(),
            k8s_healthz_endpoint: "/healthz".to_owned(),
            ssl_enabled: false,
            ssl_certificate: PathBuf::from("/etc/falco/falco.pem"),
            prometheus_metrics_enabled: false,
            bind_failure: BindFailure::Exit,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metrics {
    pub enabled: bool,
    /// Falco's duration syntax: a positive integer and a unit (`ms`, `s`, `m`, `h`, `d`, `w`).
    pub interval: Duration,
    pub output_rule: bool,
    /// No file unless set (Falco leaves it commented out).
    pub output_file: Option<PathBuf>,
    pub rules_counters_enabled: bool,
    pub resource_utilization_enabled: bool,
    pub state_counters_enabled: bool,
    pub kernel_event_counters_enabled: bool,
    pub libbpf_stats_enabled: bool,
    pub convert_memory_to_mb: bool,
    pub include_empty_values: bool,
}

impl Metrics {
    /// Which metric families `/metrics` and the snapshots export (the `*_enabled` keys).
    pub fn flags(&self) -> Flags {
        Flags {
            rules_counters: self.rules_counters_enabled,
            resource_utilization: self.resource_utilization_enabled,
            state_counters: self.state_counters_enabled,
            kernel_event_counters: self.kernel_event_counters_enabled,
            libbpf_stats: self.libbpf_stats_enabled,
        }
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            enabled: false,
            interval: Duration::from_secs(3600),
            output_rule: true,
            output_file: None,
            rules_counters_enabled: true,
            resource_utilization_enabled: true,
            state_counters_enabled: true,
            kernel_event_counters_enabled: true,
            libbpf_stats_enabled: true,
            convert_memory_to_mb: true,
            include_empty_values: false,
        }
    }
}

/// What [`parse_duration`] accepts, for error messages.
pub const DURATION_SYNTAX: &str = "a number and a unit: ns, us, ms, s, m, h, d, w (e.g. 500ms, 2.5s, 1h); a bare number is seconds";

/// Parses a duration: Falco's syntax (`1h`, `15m`, `30s`, `500ms`) widened by decimals (`2.5s`)
/// and bare seconds (`5`, `0.1`), the one grammar of every duration Vigil reads — configuration
/// files and command-line flags alike. `None` when malformed or too large; zero is a duration
/// (a setting that must be positive says so itself). Exact: no floating point.
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, unit) = s.split_at(end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let unit_ns: u128 = match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "" | "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        "w" => 604_800_000_000_000,
        _ => return None,
    };
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut ns = whole.checked_mul(unit_ns)?;
    // The fraction's digits beyond a nanosecond are dropped.
    let mut scale = unit_ns;
    for digit in fraction.bytes() {
        scale /= 10;
        ns = ns.checked_add(u128::from(digit - b'0') * scale)?;
    }
    let secs = u64::try_from(ns / 1_000_000_000).ok()?;
    Some(Duration::new(secs, (ns % 1_000_000_000) as u32))
}

/// Formats a duration in the largest unit that represents it exactly.
pub fn format_duration(d: Duration) -> String {
    let ns = d.as_nanos();
    for (unit, size) in [
        ("w", 604_800_000_000_000u128),
        ("d", 86_400_000_000_000),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("us", 1_000),
    ] {
        if ns != 0 && (ns / size) * size == ns {
            return format!("{}{unit}", ns / size);
        }
    }
    format!("{ns}ns")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_options_map() {
        let c = Config {
            json_output: true,
            json_include_output_property: false,
            json_include_tags_property: false,
            json_include_output_fields_property: false,
            ..Config::default()
        };
        let f = c.output_settings().format;
        let alert = vigil_output::Alert {
            time: 1_700_000_000_000_001_000,
            rule: "R".into(),
            priority: "Warning".into(),
            source: "syscall".into(),
            tags: vec!["b".into(), "a".into()],
            hostname: "h".into(),
            output: "something happened".into(),
            output_fields: Vec::new(),
        };
        let v: serde_json::Value = serde_json::from_str(&f.format(&alert)).unwrap();
        let mut keys: Vec<_> = v.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["hostname", "priority", "rule", "source", "time"]);
    }

    #[test]
    fn output_defaults_are_the_outputs_own() {
        // One set of defaults: the configuration's match the output crate's.
        assert_eq!(
            Config::default().output_settings(),
            OutputSettings::default()
        );
        let d = Config::default().output_settings().drop_alert;
        assert_eq!(d.priority, Priority::Critical.as_str());
    }

    #[test]
    fn metrics_flags_map() {
        use vigil_output::metrics::Category;
        let config = Metrics {
            state_counters_enabled: false,
            ..Metrics::default()
        };
        let f = config.flags();
        assert!(
            !f.allows(Category::State) && f.allows(Category::Kernel) && f.allows(Category::Base)
        );
        assert_eq!(Metrics::default().flags(), Flags::default());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("5000ms"), Some(Duration::from_secs(5)));
        assert_eq!(
            parse_duration("0s"),
            Some(Duration::ZERO),
            "zero is a duration"
        );
        assert_eq!(
            parse_duration("10"),
            Some(Duration::from_secs(10)),
            "bare seconds"
        );
        assert_eq!(parse_duration("0.1"), Some(Duration::from_millis(100)));
        assert_eq!(parse_duration("2.5s"), Some(Duration::from_millis(2500)));
        assert_eq!(parse_duration(".5m"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("1.5us"), Some(Duration::from_nanos(1500)));
        assert_eq!(
            parse_duration("1.0000000009s"),
            Some(Duration::new(1, 0)),
            "below 1 ns"
        );
        assert_eq!(parse_duration(" 3µs "), Some(Duration::from_micros(3)));
        for bad in [
            "",
            "h",
            ".",
            "s",
            "1x",
            "-1s",
            "1e3s",
            "1.2.3s",
            "10 parsecs",
            "abc",
            "inf",
            "99999999999999999999w",
        ] {
            assert_eq!(parse_duration(bad), None, "{bad:?}");
        }
        assert_eq!(format_duration(Duration::from_secs(3600)), "1h");
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        for s in ["1w", "2d", "90m", "17s", "3us", "7ns"] {
            assert_eq!(format_duration(parse_duration(s).unwrap()), s);
        }
    }

    #[test]
    fn priorities() {
        assert_eq!(Priority::parse("WARNING"), Some(Priority::Warning));
        assert_eq!(Priority::parse("info"), Some(Priority::Informational));
        assert_eq!(Priority::parse("loud"), None);
        assert!(Priority::Emergency < Priority::Debug);
    }
}

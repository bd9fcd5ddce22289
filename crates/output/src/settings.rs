//! The outputs' settings, under the key names of Falco's `falco.yaml` (`stdout_output`,
//! `file_output`, `syslog_output`, `program_output`, `http_output`, `outputs_queue`) with
//! Falco's defaults, Vigil's own `otlp_output` and `kafka_output` in the same style, and [`OutputSettings`]: everything [`crate::Outputs`] starts from. The
//! output crate owns them; the configuration crate (`vigil-config`) reads them from YAML into
//! its model, so this crate needs no configuration parser.

use std::path::PathBuf;
use std::time::Duration;

use crate::Formatter;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StdoutOutput {
    pub enabled: bool,
}

/// Vigil-only delivery settings shared by the file, syslog, program and HTTP outputs (keys
/// `spool_dir`, `spool_max_bytes`, `retry_max_backoff` inside each output's section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Where alerts wait on disk while the output is down (unset: no spool; alerts beyond the
    /// in-memory queue are dropped and counted).
    pub spool_dir: Option<PathBuf>,
    /// Disk budget of the spool; alerts beyond it are dropped and counted.
    pub spool_max_bytes: u64,
    /// Longest wait between two delivery attempts (the wait doubles from 100ms up to this).
    pub retry_max_backoff: Duration,
}

impl Default for Delivery {
    fn default() -> Self {
        Delivery {
            spool_dir: None,
            spool_max_bytes: 64 * 1024 * 1024,
            retry_max_backoff: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyslogOutput {
    pub enabled: bool,
    /// Vigil-only: the local syslog socket (datagram), `/dev/log` by default.
    pub socket: PathBuf,
    pub spool_dir: Option<PathBuf>,
    pub spool_max_bytes: u64,
    pub retry_max_backoff: Duration,
}

impl Default for SyslogOutput {
    fn default() -> Self {
        let d = Delivery::default();
        SyslogOutput {
            enabled: true,
            socket: PathBuf::from("/dev/log"),
            spool_dir: d.spool_dir,
            spool_max_bytes: d.spool_max_bytes,
            retry_max_backoff: d.retry_max_backoff,
        }
    }
}

macro_rules! delivery_accessor {
    ($($ty:ty),*) => {$(
        impl $ty {
            /// The Vigil-only delivery settings of this output.
            pub fn delivery(&self) -> Delivery {
                Delivery {
                    spool_dir: self.spool_dir.clone(),
                    spool_max_bytes: self.spool_max_bytes,
                    retry_max_backoff: self.retry_max_backoff,
                }
            }
        }
    )*};
}
delivery_accessor!(
    SyslogOutput,
    FileOutput,
    ProgramOutput,
    HttpOutput,
    OtlpOutput,
    KafkaOutput
);

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileOutput {
    pub enabled: bool,
    pub keep_alive: bool,
    pub filename: PathBuf,
    pub spool_dir: Option<PathBuf>,
    pub spool_max_bytes: u64,
    pub retry_max_backoff: Duration,
}

impl Default for FileOutput {
    fn default() -> Self {
        FileOutput {
            enabled: false,
            keep_alive: false,
            filename: PathBuf::from("./events.txt"),
            spool_dir: None,
            spool_max_bytes: Delivery::default().spool_max_bytes,
            retry_max_backoff: Delivery::default().retry_max_backoff,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProgramOutput {
    pub enabled: bool,
    pub keep_alive: bool,
    pub program: String,
    pub spool_dir: Option<PathBuf>,
    pub spool_max_bytes: u64,
    pub retry_max_backoff: Duration,
}

impl Default for ProgramOutput {
    fn default() -> Self {
        ProgramOutput {
            enabled: false,
            keep_alive: false,
            program:
                "jq '{text: .output}' | curl -d @- -X POST https://hooks.slack.com/services/XXX"
                    .to_owned(),
            spool_dir: None,
            spool_max_bytes: Delivery::default().spool_max_bytes,
            retry_max_backoff: Delivery::default().retry_max_backoff,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpOutput {
    pub enabled: bool,
    pub url: String,
    pub user_agent: String,
    pub insecure: bool,
    pub ca_cert: PathBuf,
    pub ca_bundle: PathBuf,
    pub ca_path: PathBuf,
    pub mtls: bool,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    pub echo: bool,
    pub compress_uploads: bool,
    pub keep_alive: bool,
    /// Falco's meaning: how many timed-out attempts in a row an alert may have before it is
    /// given up (a timeout is retried at once while this allows; 0: give up at the first
    /// timeout). Given-up alerts are dropped with reason `timeout` and counted.
    pub max_consecutive_timeouts: u32,
    /// Vigil-only: the longest one POST may take, connection included (`timeout`); an attempt
    /// that takes longer is a timeout for `max_consecutive_timeouts`.
    pub timeout: Duration,
    pub spool_dir: Option<PathBuf>,
    pub spool_max_bytes: u64,
    pub retry_max_backoff: Duration,
}

impl Default for HttpOutput {
    fn default() -> Self {
        HttpOutput {
            enabled: false,
            url: String::new(),
            user_agent: "falcosecurity/falco".to_owned(),
            insecure: false,
            ca_cert: PathBuf::new(),
            ca_bundle: PathBuf::new(),
            ca_path: PathBuf::from("/etc/ssl/certs"),
            mtls: false,
            client_cert: PathBuf::from("/etc/ssl/certs/client.crt"),
            client_key: PathBuf::from("/etc/ssl/certs/client.key"),
            echo: false,
            compress_uploads: false,
            keep_alive: false,
            max_consecutive_timeouts: 5,
            timeout: Duration::from_secs(10),
            spool_dir: None,
            spool_max_bytes: Delivery::default().spool_max_bytes,
            retry_max_backoff: Delivery::default().retry_max_backoff,
        }
    }
}

/// Vigil-only `otlp_output`: OTLP logs over HTTP/protobuf to an OpenTelemetry Collector (or
/// any OTLP/HTTP receiver), one LogRecord per alert, in batches ([`crate::otlp`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OtlpOutput {
    pub enabled: bool,
    /// The base URL (`http://collector:4318`); logs go to `<endpoint>/v1/logs` (an endpoint
    /// that already ends in `/v1/logs` is used as it is).
    pub endpoint: String,
    /// Extra HTTP headers (`Authorization`, tenant ids), in order.
    pub headers: Vec<(String, String)>,
    /// Headers whose value is read from a file at start (a mounted Kubernetes Secret);
    /// surrounding whitespace is trimmed.
    pub header_files: Vec<(String, PathBuf)>,
    /// Accept any server certificate (HTTPS).
    pub insecure: bool,
    /// PEM file of the CA(s) to trust (empty: the system's web PKI roots).
    pub ca_cert: PathBuf,
    /// Client certificate and key for mutual TLS (both or neither).
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// The longest one export request may take, connection included.
    pub timeout: Duration,
    /// At most this many alerts per export request.
    pub batch_max_records: u64,
    /// How long the first alert of a batch waits for more before the request goes.
    pub batch_delay: Duration,
    /// `gzip` (the OTLP exporters' default) or `none`.
    pub compression: Compression,
    pub spool_dir: Option<PathBuf>,
    pub spool_max_bytes: u64,
    pub retry_max_backoff: Duration,
}

impl Default for OtlpOutput {
    fn default() -> Self {
        let d = Delivery::default();
        OtlpOutput {
            enabled: false,
            endpoint: "http://localhost:4318".to_owned(),
            headers: Vec::new(),
            header_files: Vec::new(),
            insecure: false,
            ca_cert: PathBuf::new(),
            client_cert: PathBuf::new(),
            client_key: PathBuf::new(),
            timeout: Duration::from_secs(10),
            batch_max_records: 512,
            batch_delay: Duration::from_millis(200),
            compression: Compression::Gzip,
            spool_dir: d.spool_dir,
            spool_max_bytes: d.spool_max_bytes,
            retry_max_backoff: d.retry_max_backoff,
        }
    }
}

/// How an output compresses what it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    pub fn parse(name: &str) -> Option<Compression> {
        Some(match name.to_ascii_lowercase().as_str() {
            "none" | "" => Compression::None,
            "gzip" => Compression::Gzip,
            "lz4" => Compression::Lz4,
            "zstd" => Compression::Zstd,
            _ => return None,
        })
    }
}

/// The SASL mechanism of `kafka_output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaslMechanism {
    Plain,
    ScramSha256,
    ScramSha512,
}

impl SaslMechanism {
    pub fn as_str(self) -> &'static str {
        match self {
            SaslMechanism::Plain => "PLAIN",
            SaslMechanism::ScramSha256 => "SCRAM-SHA-256",
            SaslMechanism::ScramSha512 => "SCRAM-SHA-512",
        }
    }

    pub fn parse(name: &str) -> Option<SaslMechanism> {
        Some(match name.to_ascii_uppercase().as_str() {
            "PLAIN" => SaslMechanism::Plain,
            "SCRAM-SHA-256" => SaslMechanism::ScramSha256,
            "SCRAM-SHA-512" => SaslMechanism::ScramSha512,
            _ => return None,
        })
    }
}

/// Vigil-only `kafka_output`: Falco's JSON alerts to a Kafka topic, with acks from every
/// in-sync replica and the idempotent producer ([`crate::kafka`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KafkaOutput {
    pub enabled: bool,
    /// Bootstrap brokers, `host:port`.
    pub brokers: Vec<String>,
    pub topic: String,
    /// The message key: `hostname` (the default: a host's alerts stay in order in one
    /// partition), `rule`, `priority`, `source`, or an output field's Falco name
    /// (`container.id`); a field without a value gives no key.
    pub key: String,
    /// `none`, `gzip`, `lz4` (the default) or `zstd`.
    pub compression: Compression,
    pub client_id: String,
    /// The longest one produce request may take, connection included.
    pub timeout: Duration,
    pub batch_max_records: u64,
    pub batch_delay: Duration,
    /// TLS to the brokers (`SSL` / `SASL_SSL` listeners).
    pub tls: bool,
    pub insecure: bool,
    pub ca_cert: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
    /// SASL authentication (none when unset).
    pub sasl_mechanism: Option<SaslMechanism>,
    pub sasl_username: String,
    pub sasl_password: String,
    /// The password read from this file at start instead (a mounted Kubernetes Secret);
    /// surrounding whitespace is trimmed.
    pub sasl_password_file: PathBuf,
    pub spool_dir: Option<PathBuf>,
    pub spool_max_bytes: u64,
    pub retry_max_backoff: Duration,
}

impl Default for KafkaOutput {
    fn default() -> Self {
        let d = Delivery::default();
        KafkaOutput {
            enabled: false,
            brokers: Vec::new(),
            topic: "falco".to_owned(),
            key: "hostname".to_owned(),
            compression: Compression::Lz4,
            client_id: "vigil".to_owned(),
            timeout: Duration::from_secs(10),
            batch_max_records: 512,
            batch_delay: Duration::from_millis(100),
            tls: false,
            insecure: false,
            ca_cert: PathBuf::new(),
            client_cert: PathBuf::new(),
            client_key: PathBuf::new(),
            sasl_mechanism: None,
            sasl_username: String::new(),
            sasl_password: String::new(),
            sasl_password_file: PathBuf::new(),
            spool_dir: d.spool_dir,
            spool_max_bytes: d.spool_max_bytes,
            retry_max_backoff: d.retry_max_backoff,
        }
    }
}

/// `outputs_queue`: alerts waiting in memory per output. Falco reads 0 as unbounded; Vigil
/// never queues without bound and reads 0 as [`OutputsQueue::DEFAULT_BOUND`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputsQueue {
    pub capacity: u64,
}

impl OutputsQueue {
    /// The per-output queue bound used when `capacity` is 0.
    pub const DEFAULT_BOUND: usize = 100_000;

    /// The effective per-output queue bound.
    pub fn bound(&self) -> usize {
        match usize::try_from(self.capacity) {
            Ok(0) => Self::DEFAULT_BOUND,
            Ok(n) => n,
            Err(_) => usize::MAX,
        }
    }
}

/// The internal alert raised when events or alerts are dropped (the configuration's
/// `drop_alert`, with the priority as the name alerts carry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DropAlertSettings {
    pub enabled: bool,
    /// The priority name the alert carries (`Critical`).
    pub priority: &'static str,
    /// More than this many drops since the last check raise the alert.
    pub threshold: u64,
    /// At most one such alert per this period.
    pub rate_limit: Duration,
}

impl Default for DropAlertSettings {
    fn default() -> Self {
        DropAlertSettings {
            enabled: true,
            priority: "Critical",
            threshold: 0,
            rate_limit: Duration::from_secs(60),
        }
    }
}

/// Everything [`crate::Outputs::from_config`] starts: the alert format, each output's
/// section, the queue bound and the drop alert. The defaults are Falco's (and
/// `vigil-config`'s).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputSettings {
    /// `json_output`, `json_include_*_property`, `time_format_iso_8601`.
    pub format: Formatter,
    pub stdout_output: StdoutOutput,
    pub file_output: FileOutput,
    pub syslog_output: SyslogOutput,
    pub program_output: ProgramOutput,
    pub http_output: HttpOutput,
    pub otlp_output: OtlpOutput,
    pub kafka_output: KafkaOutput,
    pub buffered_outputs: bool,
    pub outputs_queue: OutputsQueue,
    pub drop_alert: DropAlertSettings,
}

impl Default for OutputSettings {
    fn default() -> Self {
        OutputSettings {
            format: Formatter::default(),
            stdout_output: StdoutOutput { enabled: true },
            file_output: FileOutput::default(),
            syslog_output: SyslogOutput::default(),
            program_output: ProgramOutput::default(),
            http_output: HttpOutput::default(),
            otlp_output: OtlpOutput::default(),
            kafka_output: KafkaOutput::default(),
            buffered_outputs: false,
            outputs_queue: OutputsQueue { capacity: 0 },
            drop_alert: DropAlertSettings::default(),
        }
    }
}

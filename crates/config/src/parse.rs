//! YAML tree → `Config`, with key paths and positions in errors, and `-o` overrides.

use std::path::{Path, PathBuf};

use crate::model::*;
use crate::tree::{self, Kind, Node};

/// Errors from loading or overriding the configuration.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("failed to read config file `{path}`")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{origin}: invalid YAML: {message}")]
    Yaml { origin: String, message: String },
    #[error("{origin}: {}: {message}", show_path(path))]
    Value {
        origin: String,
        path: String,
        message: String,
    },
    #[error("{origin}: unknown key `{path}`{}", suggestion.as_ref().map(|s| format!(" (did you mean `{s}`?)")).unwrap_or_default())]
    UnknownKey {
        origin: String,
        path: String,
        suggestion: Option<String>,
    },
    #[error("invalid override `{spec}`: {message}")]
    Override { spec: String, message: String },
}

fn show_path(path: &str) -> String {
    if path.is_empty() {
        "the top level".to_owned()
    } else {
        format!("`{path}`")
    }
}

/// A loaded configuration and the warnings about accepted-but-ignored keys.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<String>,
}

/// Top-level keys of `falco.yaml` that Vigil accepts but does not implement.
const FALCO_ONLY_TOP: &[&str] = &[
    "config_files",
    "engine",
    "load_plugins",
    "plugins",
    "buffer_format_base64",
    "log_stderr",
    "log_syslog",
    "log_level",
    "libs_logger",
    "output_timeout",
    "outputs",
    "grpc",
    "grpc_output",
    "syscall_event_timeouts",
    "syscall_event_drops",
    "base_syscalls",
    "falco_libs",
    "container_engines",
    "container",
    "metadata_download",
    "modern_bpf",
    "syscall_buf_size_preset",
    "syscall_drop_failed_exit",
    "capture",
    "plugins_hostinfo",
    "static_fields",
    "json_include_output_fields_property_deprecated",
];

/// The shape Falco reads an ignored top-level key with: a value of another shape makes Falco
/// refuse the file (falco `test_configuration_schema.cpp`: `schema_wrong_type`,
/// `falco_libs: 512`), so Vigil refuses it too rather than ignore it. A key left empty is
/// accepted.
fn falco_only_shape(ctx: &Ctx<'_>, v: &Node, path: &str) -> Result<(), ConfigError> {
    const MAPS: &[&str] = &[
        "engine",
        "libs_logger",
        "outputs",
        "grpc",
        "grpc_output",
        "syscall_event_timeouts",
        "syscall_event_drops",
        "base_syscalls",
        "falco_libs",
        "container_engines",
        "container",
        "metadata_download",
        "modern_bpf",
        "capture",
        "static_fields",
    ];
    const SEQS: &[&str] = &["config_files", "load_plugins", "plugins"];
    const BOOLS: &[&str] = &[
        "buffer_format_base64",
        "log_stderr",
        "log_syslog",
        "plugins_hostinfo",
        "syscall_drop_failed_exit",
    ];
    match (&v.kind, path) {
        (Kind::Null, _) => Ok(()),
        (Kind::Map(_), p) if MAPS.contains(&p) => Ok(()),
        (_, p) if MAPS.contains(&p) => Err(ctx.expected(v, path, "a mapping")),
        (Kind::Seq(_), p) if SEQS.contains(&p) => Ok(()),
        (_, p) if SEQS.contains(&p) => Err(ctx.expected(v, path, "a sequence")),
        (_, p) if BOOLS.contains(&p) => ctx.bool(v, path).map(|_| ()),
        (Kind::Map(_) | Kind::Seq(_), "log_level" | "output_timeout") => {
            Err(ctx.expected(v, path, "a scalar"))
        }
        _ => Ok(()),
    }
}

const WEBSERVER_FALCO_ONLY: &[&str] = &["threadiness"];
const METRICS_FALCO_ONLY: &[&str] = &[
    "kernel_event_counters_per_cpu_enabled",
    "plugins_metrics_enabled",
    "jemalloc_stats_enabled",
];
const APPEND_FALCO_ONLY: &[&str] = &["suggested_output"];

struct Ctx<'a> {
    /// `file` or `override `x=y``; positions are appended when known.
    origin: &'a str,
    with_positions: bool,
    warnings: Vec<String>,
}

impl Ctx<'_> {
    fn at(&self, node: &Node) -> String {
        if self.with_positions && node.line > 0 {
            format!("{}:{}:{}", self.origin, node.line, node.col)
        } else {
            self.origin.to_owned()
        }
    }

    fn err(&self, node: &Node, path: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Value {
            origin: self.at(node),
            path: path.to_owned(),
            message: message.into(),
        }
    }

    fn expected(&self, node: &Node, path: &str, what: &str) -> ConfigError {
        self.err(
            node,
            path,
            format!("expected {what}, found {}", node.kind.describe()),
        )
    }

    fn warn_ignored(&mut self, node: &Node, path: &str) {
        self.warnings.push(format!(
            "{}: `{path}` is a Falco setting that Vigil does not implement; ignored",
            self.at(node)
        ));
    }

    /// A boolean; like Falco (YAML 1.1) `yes`/`no`/`on`/`off`/`y`/`n` are accepted too.
    fn bool(&self, n: &Node, path: &str) -> Result<bool, ConfigError> {
        match &n.kind {
            Kind::Bool(b) => Ok(*b),
            Kind::Str(s) => match s.to_ascii_lowercase().as_str() {
                "yes" | "on" | "y" => Ok(true),
                "no" | "off" | "n" => Ok(false),
                _ => Err(self.expected(n, path, "a boolean")),
            },
            _ => Err(self.expected(n, path, "a boolean")),
        }
    }

    fn string(&self, n: &Node, path: &str) -> Result<String, ConfigError> {
        match &n.kind {
            Kind::Str(s) => Ok(s.clone()),
            _ => Err(self.expected(n, path, "a string")),
        }
    }

    /// An IP address literal (IPv4 or IPv6), kept as written.
    fn ip_address(&self, n: &Node, path: &str) -> Result<String, ConfigError> {
        let s = self.string(n, path)?;
        match s.trim().parse::<std::net::IpAddr>() {
            Ok(_) => Ok(s),
            Err(_) => Err(self.err(
                n,
                path,
                format!("invalid IP address `{s}` (expected an IPv4 or IPv6 address)"),
            )),
        }
    }

    fn path(&self, n: &Node, path: &str) -> Result<PathBuf, ConfigError> {
        self.string(n, path).map(PathBuf::from)
    }

    fn uint<T: TryFrom<i128>>(&self, n: &Node, path: &str) -> Result<T, ConfigError> {
        match n.kind {
            Kind::Int(i) => T::try_from(i).map_err(|_| {
                self.err(
                    n,
                    path,
                    format!("integer {i} is out of range for this setting"),
                )
            }),
            _ => Err(self.expected(n, path, "a non-negative integer")),
        }
    }

    /// A sequence of strings; a single string is accepted as a one-item list.
    fn strings(&self, n: &Node, path: &str) -> Result<Vec<String>, ConfigError> {
        match &n.kind {
            Kind::Str(s) => Ok(vec![s.clone()]),
            Kind::Null => Ok(Vec::new()),
            Kind::Seq(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| self.string(item, &format!("{path}[{i}]")))
                .collect(),
            _ => Err(self.expected(n, path, "a sequence of strings")),
        }
    }

    /// The entries of a mapping with their key text; `null` counts as an empty mapping.
    fn entries<'n>(
        &self,
        n: &'n Node,
        path: &str,
    ) -> Result<Vec<(String, &'n Node, &'n Node)>, ConfigError> {
        match &n.kind {
            Kind::Null => Ok(Vec::new()),
            Kind::Map(m) => m
                .iter()
                .map(|(k, v)| {
                    let name = k.key_text().ok_or_else(|| {
                        self.err(
                            k,
                            path,
                            format!("keys must be strings, found {}", k.kind.describe()),
                        )
                    })?;
                    Ok((name, k, v))
                })
                .collect(),
            _ => Err(self.expected(n, path, "a mapping")),
        }
    }

    fn unknown(&self, key: &Node, path: &str, name: &str, known: &[&str]) -> ConfigError {
        ConfigError::UnknownKey {
            origin: self.at(key),
            path: path.to_owned(),
            suggestion: suggest(name, known),
        }
    }

    /// An unknown key in a mapping of settings: a warning, as Falco's configuration keeps
    /// growing (a newer falco.yaml must load); the key is ignored. A known key with a wrong
    /// type stays an error.
    fn warn_unknown(&mut self, key: &Node, path: &str, name: &str, known: &[&str]) {
        let unknown = self.unknown(key, path, name, known);
        self.warnings.push(format!("{unknown}; ignored"));
    }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() {
        key.to_owned()
    } else {
        format!("{prefix}.{key}")
    }
}

/// The closest known key within edit distance 2, if any.
fn suggest(name: &str, known: &[&str]) -> Option<String> {
    known
        .iter()
        .map(|k| (edit_distance(name, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.to_owned())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}

/// Generates a function that fills a struct from a mapping, field by field.
macro_rules! section {
    ($fn_name:ident, $ty:ty, ignored: $ignored:expr, { $($key:ident => $getter:ident),* $(,)? }) => {
        fn $fn_name(ctx: &mut Ctx<'_>, n: &Node, path: &str, out: &mut $ty) -> Result<(), ConfigError> {
            const KNOWN: &[&str] = &[$(stringify!($key)),*];
            for (name, k, v) in ctx.entries(n, path)? {
                let p = join(path, &name);
                match name.as_str() {
                    $(stringify!($key) => out.$key = ctx.$getter(v, &p)?,)*
                    other if $ignored.contains(&other) => ctx.warn_ignored(k, &p),
                    other => ctx.warn_unknown(k, &p, other, KNOWN),
                }
            }
            Ok(())
        }
    };
}

const NONE: &[&str] = &[];

section!(stdout_section, StdoutOutput, ignored: NONE, { enabled => bool });
section!(syslog_section, SyslogOutput, ignored: NONE, {
    enabled => bool, socket => path,
    spool_dir => opt_path, spool_max_bytes => uint, retry_max_backoff => duration,
});
section!(file_section, FileOutput, ignored: NONE, {
    enabled => bool, keep_alive => bool, filename => path,
    spool_dir => opt_path, spool_max_bytes => uint, retry_max_backoff => duration,
});
section!(program_section, ProgramOutput, ignored: NONE, {
    enabled => bool, keep_alive => bool, program => string,
    spool_dir => opt_path, spool_max_bytes => uint, retry_max_backoff => duration,
});
section!(drop_alert_section, DropAlert, ignored: NONE, {
    enabled => bool, priority => priority, threshold => uint, rate_limit => duration,
});
section!(http_section, HttpOutput, ignored: NONE, {
    enabled => bool, url => string, user_agent => string, insecure => bool,
    ca_cert => path, ca_bundle => path, ca_path => path, mtls => bool,
    client_cert => path, client_key => path, echo => bool, compress_uploads => bool,
    keep_alive => bool, max_consecutive_timeouts => uint, timeout => duration,
    spool_dir => opt_path, spool_max_bytes => uint, retry_max_backoff => duration,
});
section!(otlp_section, OtlpOutput, ignored: NONE, {
    enabled => bool, endpoint => string, headers => string_map, header_files => path_map,
    insecure => bool, ca_cert => path, client_cert => path, client_key => path,
    timeout => duration, batch_max_records => positive, batch_delay => duration_or_zero,
    compression => otlp_compression,
    spool_dir => opt_path, spool_max_bytes => uint, retry_max_backoff => duration,
});
section!(kafka_section, KafkaOutput, ignored: NONE, {
    enabled => bool, brokers => broker_list, topic => string, key => string,
    compression => kafka_compression, client_id => string, timeout => duration,
    batch_max_records => positive, batch_delay => duration_or_zero,
    tls => bool, insecure => bool, ca_cert => path, client_cert => path, client_key => path,
    sasl_mechanism => sasl_mechanism, sasl_username => string, sasl_password => string,
    sasl_password_file => path,
    spool_dir => opt_path, spool_max_bytes => uint, retry_max_backoff => duration,
});
section!(queue_section, OutputsQueue, ignored: NONE, { capacity => uint });
section!(webserver_section, Webserver, ignored: WEBSERVER_FALCO_ONLY, {
    enabled => bool, listen_port => uint, listen_address => ip_address,
    k8s_healthz_endpoint => string, ssl_enabled => bool, ssl_certificate => path,
    prometheus_metrics_enabled => bool, bind_failure => bind_failure,
});
section!(metrics_section, Metrics, ignored: METRICS_FALCO_ONLY, {
    enabled => bool, interval => duration, output_rule => bool, output_file => opt_path,
    rules_counters_enabled => bool, resource_utilization_enabled => bool,
    state_counters_enabled => bool, kernel_event_counters_enabled => bool,
    libbpf_stats_enabled => bool, convert_memory_to_mb => bool, include_empty_values => bool,
});

impl Ctx<'_> {
    fn duration(&self, n: &Node, path: &str) -> Result<std::time::Duration, ConfigError> {
        let s = self.string(n, path)?;
        match parse_duration(&s) {
            Some(d) if !d.is_zero() => Ok(d),
            Some(_) => Err(self.err(
                n,
                path,
                format!("invalid duration `{s}` (must be positive)"),
            )),
            None => Err(self.err(
                n,
                path,
                format!("invalid duration `{s}` (expected {DURATION_SYNTAX})"),
            )),
        }
    }

    /// A duration that may be zero (`0s`: no wait).
    fn duration_or_zero(&self, n: &Node, path: &str) -> Result<std::time::Duration, ConfigError> {
        let s = self.string(n, path)?;
        parse_duration(&s).ok_or_else(|| {
            self.err(
                n,
                path,
                format!("invalid duration `{s}` (expected {DURATION_SYNTAX})"),
            )
        })
    }

    fn positive(&self, n: &Node, path: &str) -> Result<u64, ConfigError> {
        match self.uint::<u64>(n, path)? {
            0 => Err(self.err(n, path, "must be at least 1")),
            v => Ok(v),
        }
    }

    /// A mapping of strings to strings, in order (HTTP headers).
    fn string_map(&self, n: &Node, path: &str) -> Result<Vec<(String, String)>, ConfigError> {
        self.entries(n, path)?
            .into_iter()
            .map(|(name, _, v)| {
                let value = self.string(v, &join(path, &name))?;
                Ok((name, value))
            })
            .collect()
    }

    fn path_map(&self, n: &Node, path: &str) -> Result<Vec<(String, PathBuf)>, ConfigError> {
        Ok(self
            .string_map(n, path)?
            .into_iter()
            .map(|(k, v)| (k, PathBuf::from(v)))
            .collect())
    }

    /// Broker addresses: a list, or one string of comma-separated `host:port`s.
    fn broker_list(&self, n: &Node, path: &str) -> Result<Vec<String>, ConfigError> {
        let mut out = Vec::new();
        for item in self.strings(n, path)? {
            for broker in item.split(',').map(str::trim).filter(|b| !b.is_empty()) {
                let ok = broker
                    .rsplit_once(':')
                    .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok());
                if !ok {
                    return Err(self.err(n, path, format!("`{broker}` is not host:port")));
                }
                out.push(broker.to_owned());
            }
        }
        Ok(out)
    }

    fn otlp_compression(&self, n: &Node, path: &str) -> Result<Compression, ConfigError> {
        let s = self.string(n, path)?;
        match Compression::parse(&s) {
            Some(c @ (Compression::Gzip | Compression::None)) => Ok(c),
            _ => Err(self.err(n, path, format!("unknown compression `{s}` (gzip or none)"))),
        }
    }

    fn kafka_compression(&self, n: &Node, path: &str) -> Result<Compression, ConfigError> {
        let s = self.string(n, path)?;
        Compression::parse(&s).ok_or_else(|| {
            self.err(
                n,
                path,
                format!("unknown compression `{s}` (lz4, zstd, gzip or none)"),
            )
        })
    }

    fn sasl_mechanism(&self, n: &Node, path: &str) -> Result<Option<SaslMechanism>, ConfigError> {
        if matches!(n.kind, Kind::Null) {
            return Ok(None);
        }
        let s = self.string(n, path)?;
        if s.is_empty() {
            return Ok(None);
        }
        SaslMechanism::parse(&s).map(Some).ok_or_else(|| {
            self.err(
                n,
                path,
                format!("unknown SASL mechanism `{s}` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)"),
            )
        })
    }

    fn opt_path(&self, n: &Node, path: &str) -> Result<Option<PathBuf>, ConfigError> {
        match &n.kind {
            Kind::Null => Ok(None),
            Kind::Str(s) if s.is_empty() => Ok(None),
            _ => self.path(n, path).map(Some),
        }
    }

    fn priority(&self, n: &Node, path: &str) -> Result<Priority, ConfigError> {
        let s = self.string(n, path)?;
        Priority::parse(&s).ok_or_else(|| {
            self.err(n, path, format!("unknown priority `{s}` (expected one of emergency, alert, critical, error, warning, notice, informational, debug)"))
        })
    }

    fn rule_matching(&self, n: &Node, path: &str) -> Result<RuleMatching, ConfigError> {
        let s = self.string(n, path)?;
        match s.to_ascii_lowercase().as_str() {
            "first" => Ok(RuleMatching::First),
            "all" => Ok(RuleMatching::All),
            _ => Err(self.err(
                n,
                path,
                format!("unknown rule matching `{s}` (expected `first` or `all`)"),
            )),
        }
    }

    fn bind_failure(&self, n: &Node, path: &str) -> Result<BindFailure, ConfigError> {
        let s = self.string(n, path)?;
        match s.to_ascii_lowercase().as_str() {
            "exit" => Ok(BindFailure::Exit),
            "continue" => Ok(BindFailure::Continue),
            _ => Err(self.err(
                n,
                path,
                format!("unknown bind failure action `{s}` (expected `exit` or `continue`)"),
            )),
        }
    }

    fn selectors(&self, n: &Node, path: &str) -> Result<Vec<RuleSelector>, ConfigError> {
        let items = match &n.kind {
            Kind::Null => return Ok(Vec::new()),
            Kind::Seq(items) => items,
            _ => return Err(self.expected(n, path, "a sequence")),
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ip = format!("{path}[{i}]");
            let entries = self.entries(item, &ip)?;
            let [(action, k, body)] = entries.as_slice() else {
                return Err(self.err(item, &ip, "expected exactly one of `enable` or `disable`"));
            };
            let ap = join(&ip, action);
            let matcher = self.rule_match(body, &ap)?;
            out.push(match action.as_str() {
                "enable" => RuleSelector::Enable(matcher),
                "disable" => RuleSelector::Disable(matcher),
                other => return Err(self.unknown(k, &ap, other, &["enable", "disable"])),
            });
        }
        Ok(out)
    }

    fn rule_match(&self, n: &Node, path: &str) -> Result<RuleMatch, ConfigError> {
        let entries = self.entries(n, path)?;
        let [(what, k, v)] = entries.as_slice() else {
            return Err(self.err(n, path, "expected exactly one of `rule` or `tag`"));
        };
        let p = join(path, what);
        let value = self.string(v, &p)?;
        match what.as_str() {
            "rule" => Ok(RuleMatch::Rule(value)),
            "tag" => Ok(RuleMatch::Tag(value)),
            other => Err(self.unknown(k, &p, other, &["rule", "tag"])),
        }
    }

    fn append_outputs(&mut self, n: &Node, path: &str) -> Result<Vec<AppendOutput>, ConfigError> {
        let items = match &n.kind {
            Kind::Null => return Ok(Vec::new()),
            Kind::Seq(items) => items,
            _ => return Err(self.expected(n, path, "a sequence")),
        };
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.iter().enumerate() {
            let ip = format!("{path}[{i}]");
            let mut ao = AppendOutput::default();
            for (name, k, v) in self.entries(item, &ip)? {
                let p = join(&ip, &name);
                match name.as_str() {
                    "match" => ao.matches = self.append_match(v, &p)?,
                    "extra_output" => ao.extra_output = Some(self.string(v, &p)?),
                    "extra_fields" => ao.extra_fields = self.extra_fields(v, &p)?,
                    other if APPEND_FALCO_ONLY.contains(&other) => self.warn_ignored(k, &p),
                    other => {
                        self.warn_unknown(k, &p, other, &["match", "extra_output", "extra_fields"])
                    }
                }
            }
            out.push(ao);
        }
        Ok(out)
    }

    fn append_match(&mut self, n: &Node, path: &str) -> Result<AppendMatch, ConfigError> {
        let mut m = AppendMatch::default();
        for (name, k, v) in self.entries(n, path)? {
            let p = join(path, &name);
            match name.as_str() {
                "source" => m.source = Some(self.string(v, &p)?),
                "tags" => m.tags = self.strings(v, &p)?,
                "rule" => m.rule = Some(self.string(v, &p)?),
                other => self.warn_unknown(k, &p, other, &["source", "tags", "rule"]),
            }
        }
        Ok(m)
    }

    fn extra_fields(&self, n: &Node, path: &str) -> Result<Vec<ExtraField>, ConfigError> {
        let items = match &n.kind {
            Kind::Null => return Ok(Vec::new()),
            Kind::Seq(items) => items,
            _ => return Err(self.expected(n, path, "a sequence")),
        };
        items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let ip = format!("{path}[{i}]");
                match &item.kind {
                    Kind::Str(s) => Ok(ExtraField {
                        name: s.clone(),
                        value: None,
                    }),
                    Kind::Map(_) => {
                        let entries = self.entries(item, &ip)?;
                        let [(name, _, v)] = entries.as_slice() else {
                            return Err(self.err(
                                item,
                                &ip,
                                "expected a single `name: value` pair",
                            ));
                        };
                        let value = self.string(v, &join(&ip, name))?;
                        Ok(ExtraField {
                            name: name.clone(),
                            value: Some(value),
                        })
                    }
                    _ => Err(self.expected(item, &ip, "a field name or a `name: value` mapping")),
                }
            })
            .collect()
    }
}

const TOP_KEYS: &[&str] = &[
    "rules_files",
    "rules_file",
    "watch_config_files",
    "rules",
    "priority",
    "rule_matching",
    "json_output",
    "json_include_output_property",
    "json_include_tags_property",
    "json_include_message_property",
    "json_include_output_fields_property",
    "time_format_iso_8601",
    "append_output",
    "stdout_output",
    "file_output",
    "syslog_output",
    "program_output",
    "http_output",
    "otlp_output",
    "kafka_output",
    "buffered_outputs",
    "outputs_queue",
    "webserver",
    "metrics",
    "drop_alert",
];

fn build(ctx: &mut Ctx<'_>, root: &Node) -> Result<Config, ConfigError> {
    let mut c = Config::default();
    let mut rules_files = None;
    let mut rules_file = None;
    for (name, k, v) in ctx.entries(root, "")? {
        let p = name.clone();
        match name.as_str() {
            "rules_files" => rules_files = Some(ctx.strings(v, &p)?),
            "rules_file" => rules_file = Some((ctx.strings(v, &p)?, k)),
            "watch_config_files" => c.watch_config_files = ctx.bool(v, &p)?,
            "rules" => c.rules = ctx.selectors(v, &p)?,
            "priority" => c.priority = ctx.priority(v, &p)?,
            "rule_matching" => c.rule_matching = ctx.rule_matching(v, &p)?,
            "json_output" => c.json_output = ctx.bool(v, &p)?,
            "json_include_output_property" => c.json_include_output_property = ctx.bool(v, &p)?,
            "json_include_tags_property" => c.json_include_tags_property = ctx.bool(v, &p)?,
            "json_include_message_property" => c.json_include_message_property = ctx.bool(v, &p)?,
            "json_include_output_fields_property" => {
                c.json_include_output_fields_property = ctx.bool(v, &p)?
            }
            "time_format_iso_8601" => c.time_format_iso_8601 = ctx.bool(v, &p)?,
            "append_output" => c.append_output = ctx.append_outputs(v, &p)?,
            "stdout_output" => stdout_section(ctx, v, &p, &mut c.stdout_output)?,
            "file_output" => file_section(ctx, v, &p, &mut c.file_output)?,
            "syslog_output" => syslog_section(ctx, v, &p, &mut c.syslog_output)?,
            "program_output" => program_section(ctx, v, &p, &mut c.program_output)?,
            "http_output" => http_section(ctx, v, &p, &mut c.http_output)?,
            "otlp_output" => {
                otlp_section(ctx, v, &p, &mut c.otlp_output)?;
                if c.otlp_output.enabled && c.otlp_output.endpoint.trim().is_empty() {
                    return Err(ctx.err(k, &p, "enabled without an `endpoint`"));
                }
            }
            "kafka_output" => {
                kafka_section(ctx, v, &p, &mut c.kafka_output)?;
                let kafka = &c.kafka_output;
                if kafka.enabled && kafka.brokers.is_empty() {
                    return Err(ctx.err(k, &p, "enabled without `brokers`"));
                }
                if kafka.enabled && kafka.topic.is_empty() {
                    return Err(ctx.err(k, &p, "enabled without a `topic`"));
                }
                if kafka.sasl_mechanism.is_some() && kafka.sasl_username.is_empty() {
                    return Err(ctx.err(k, &p, "`sasl_mechanism` without a `sasl_username`"));
                }
            }
            "buffered_outputs" => c.buffered_outputs = ctx.bool(v, &p)?,
            "outputs_queue" => queue_section(ctx, v, &p, &mut c.outputs_queue)?,
            "webserver" => webserver_section(ctx, v, &p, &mut c.webserver)?,
            "metrics" => metrics_section(ctx, v, &p, &mut c.metrics)?,
            "drop_alert" => drop_alert_section(ctx, v, &p, &mut c.drop_alert)?,
            other if FALCO_ONLY_TOP.contains(&other) => {
                falco_only_shape(ctx, v, &p)?;
                ctx.warn_ignored(k, &p)
            }
            other => ctx.warn_unknown(k, &p, other, TOP_KEYS),
        }
    }
    match (rules_files, rules_file) {
        (Some(files), Some((_, k))) => {
            c.rules_files = files.into_iter().map(PathBuf::from).collect();
            ctx.warnings.push(format!(
                "{}: `rules_file` is ignored because `rules_files` is also set",
                ctx.at(k)
            ));
        }
        (Some(files), None) | (None, Some((files, _))) => {
            c.rules_files = files.into_iter().map(PathBuf::from).collect();
        }
        (None, None) => {}
    }
    Ok(c)
}

fn parse_tree(text: &str, origin: &str) -> Result<Node, ConfigError> {
    tree::parse(text).map_err(|e| {
        let origin = match e.location() {
            Some(l) => format!("{origin}:{}:{}", l.line(), l.column()),
            None => origin.to_owned(),
        };
        ConfigError::Yaml {
            origin,
            message: e.to_string(),
        }
    })
}

impl Config {
    /// Parses a configuration from YAML text; `origin` (usually the file name) prefixes errors
    /// and warnings. Keys that are absent keep their defaults.
    pub fn from_yaml_str(text: &str, origin: &str) -> Result<Loaded, ConfigError> {
        let root = parse_tree(text, origin)?;
        let mut ctx = Ctx {
            origin,
            with_positions: true,
            warnings: Vec::new(),
        };
        let config = build(&mut ctx, &root)?;
        Ok(Loaded {
            config,
            warnings: ctx.warnings,
        })
    }

    /// Reads and parses a configuration file.
    pub fn load(path: &Path) -> Result<Loaded, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        Config::from_yaml_str(&text, &path.display().to_string())
    }

    /// Applies one Falco-style `-o` override: `key.path=value`, where a path segment may carry
    /// list indexes (`rules_files[0]=/x.yaml`; the index equal to the list's length, or `[]` as
    /// in Falco's `rules[].disable.tag=x`, appends) and
    /// the value is YAML (`true`, `8080`, `[a, b]`, `{enabled: true}`). Returns warnings, e.g.
    /// for Falco-only keys, which are accepted and ignored. On error `self` is unchanged.
    pub fn apply_override(&mut self, spec: &str) -> Result<Vec<String>, ConfigError> {
        let bad = |message: String| ConfigError::Override {
            spec: spec.to_owned(),
            message,
        };
        let (key, value) = spec
            .split_once('=')
            .ok_or_else(|| bad("expected `key.path=value`".to_owned()))?;
        let segments = parse_key_path(key.trim()).map_err(bad)?;
        let trimmed = value.trim();
        let value = if trimmed.is_empty() {
            Node::new(Kind::Str(String::new()))
        } else {
            // Falco reads a value as YAML only when it is a `{…}` map (Vigil also takes a
            // `[…]` list); anything else is one scalar, typed as YAML types a plain scalar
            // (`true`, `8765`), so `webserver.listen_address=::` is the string `::`, not a
            // YAML map (falco `test_configuration.cpp`: `configuration_webserver_ip`).
            let flow = (trimmed.starts_with('{') && trimmed.ends_with('}'))
                || (trimmed.starts_with('[') && trimmed.ends_with(']'));
            match tree::parse(value) {
                Ok(mut v) if flow || !matches!(v.kind, Kind::Map(_) | Kind::Seq(_)) => {
                    strip_positions(&mut v);
                    v
                }
                Err(e) if flow => return Err(bad(format!("value is not valid YAML: {e}"))),
                _ => Node::new(Kind::Str(value.to_owned())),
            }
        };
        let mut root = parse_tree(&self.to_yaml(), "effective configuration")?;
        strip_positions(&mut root);
        set_path(&mut root, &segments, value).map_err(bad)?;
        let origin = format!("override `{spec}`");
        let mut ctx = Ctx {
            origin: &origin,
            with_positions: false,
            warnings: Vec::new(),
        };
        *self = build(&mut ctx, &root)?;
        Ok(ctx.warnings)
    }
}

#[derive(Debug, PartialEq)]
enum Segment {
    Key(String),
    Index(usize),
    /// `[]`: a new item at the end of the list (Falco's `-o 'rules[].disable.tag=x'`).
    Append,
}

fn parse_key_path(key: &str) -> Result<Vec<Segment>, String> {
    if key.is_empty() {
        return Err("empty key path".to_owned());
    }
    let mut out = Vec::new();
    for part in key.split('.') {
        if out.len() > tree::MAX_DEPTH {
            return Err(format!("key path `{key}` is nested too deeply"));
        }
        let (name, mut rest) = match part.find('[') {
            Some(i) => part.split_at(i),
            None => (part, ""),
        };
        if name.is_empty() {
            return Err(format!("empty key in path `{key}`"));
        }
        out.push(Segment::Key(name.to_owned()));
        while !rest.is_empty() {
            if out.len() > tree::MAX_DEPTH {
                return Err(format!("key path `{key}` is nested too deeply"));
            }
            let close = rest
                .find(']')
                .filter(|_| rest.starts_with('['))
                .ok_or_else(|| format!("malformed index in `{part}`"))?;
            if close == 1 {
                out.push(Segment::Append);
                rest = &rest[close + 1..];
                continue;
            }
            let idx = rest[1..close]
                .parse::<usize>()
                .map_err(|_| format!("invalid index `{}` in `{part}`", &rest[1..close]))?;
            out.push(Segment::Index(idx));
            rest = &rest[close + 1..];
        }
    }
    Ok(out)
}

fn strip_positions(n: &mut Node) {
    n.line = 0;
    n.col = 0;
    match &mut n.kind {
        Kind::Seq(items) => items.iter_mut().for_each(strip_positions),
        Kind::Map(m) => m.iter_mut().for_each(|(k, v)| {
            strip_positions(k);
            strip_positions(v);
        }),
        _ => {}
    }
}

fn set_path(node: &mut Node, segments: &[Segment], value: Node) -> Result<(), String> {
    let Some((first, rest)) = segments.split_first() else {
        *node = value;
        return Ok(());
    };
    match first {
        Segment::Key(name) => {
            if matches!(node.kind, Kind::Null) {
                node.kind = Kind::Map(Vec::new());
            }
            let Kind::Map(m) = &mut node.kind else {
                return Err(format!(
                    "cannot set key `{name}` inside {}",
                    node.kind.describe()
                ));
            };
            let pos = m
                .iter()
                .position(|(k, _)| k.key_text().as_deref() == Some(name.as_str()));
            let pos = match pos {
                Some(p) => p,
                None => {
                    m.push((Node::new(Kind::Str(name.clone())), Node::new(Kind::Null)));
                    m.len() - 1
                }
            };
            set_path(&mut m[pos].1, rest, value)
        }
        Segment::Index(_) | Segment::Append => {
            if matches!(node.kind, Kind::Null) {
                node.kind = Kind::Seq(Vec::new());
            }
            let Kind::Seq(items) = &mut node.kind else {
                let index = match first {
                    Segment::Index(i) => i.to_string(),
                    _ => String::new(),
                };
                return Err(format!(
                    "cannot index [{index}] into {}",
                    node.kind.describe()
                ));
            };
            let i = &match first {
                Segment::Index(i) => *i,
                _ => items.len(),
            };
            if *i == items.len() {
                items.push(Node::new(Kind::Null));
            }
            let len = items.len();
            let item = items
                .get_mut(*i)
                .ok_or_else(|| format!("index {i} is out of range (the list has {len} items)"))?;
            set_path(item, rest, value)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn load(text: &str) -> Loaded {
        Config::from_yaml_str(text, "config.yaml").unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    fn err(text: &str) -> String {
        match Config::from_yaml_str(text, "config.yaml") {
            Ok(l) => panic!("expected an error for:\n{text}\ngot {l:?}"),
            Err(e) => e.to_string(),
        }
    }

    /// Falco's `schema_wrong_type`: a Falco-only section of the wrong shape is refused,
    /// naming the key; the right shape (or an empty key) is still ignored with a warning.
    #[test]
    fn falco_only_keys_of_the_wrong_shape_are_refused() {
        for (text, key) in [
            (
                "falco_libs: 512\n",
                "`falco_libs`: expected a mapping, found",
            ),
            (
                "engine: modern_ebpf\n",
                "`engine`: expected a mapping, found",
            ),
            (
                "load_plugins: json\n",
                "`load_plugins`: expected a sequence, found",
            ),
            (
                "log_stderr: sometimes\n",
                "`log_stderr`: expected a boolean, found",
            ),
            (
                "log_level: [info]\n",
                "`log_level`: expected a scalar, found",
            ),
        ] {
            let e = Config::from_yaml_str(text, "config.yaml")
                .unwrap_err()
                .to_string();
            assert!(e.contains(key), "{text:?}: {e}");
        }
        for text in [
            "falco_libs:\n  thread_table_size: 262144\n",
            "falco_libs:\n",
            "load_plugins: []\n",
            "log_stderr: true\n",
            "log_level: info\n",
        ] {
            let loaded = Config::from_yaml_str(text, "config.yaml")
                .unwrap_or_else(|e| panic!("{text:?}: {e}"));
            assert_eq!(loaded.warnings.len(), 1, "{text:?}: {:?}", loaded.warnings);
        }
    }

    #[test]
    fn defaults() {
        let c = Config::default();
        assert_eq!(c.priority, Priority::Debug);
        assert_eq!(c.rule_matching, RuleMatching::First);
        assert!(!c.json_output && c.json_include_output_property && c.json_include_tags_property);
        assert!(!c.json_include_message_property && c.json_include_output_fields_property);
        assert_eq!(c.webserver.listen_address, "127.0.0.1");
        assert_eq!(c.webserver.listen_port, 8765);
        assert_eq!(c.metrics.interval, Duration::from_secs(3600));
        assert_eq!(c.http_output.max_consecutive_timeouts, 5);
        assert!(c.rules_files.is_empty(), "empty: the embedded ruleset");
        assert!(
            c.watch_config_files,
            "Falco's default: changed files reload"
        );
        // Empty and comment-only documents are the defaults.
        assert_eq!(load("").config, c);
        assert_eq!(load("# nothing\n").config, c);
        assert!(load("").warnings.is_empty());
    }

    #[test]
    fn embedded_default_is_default() {
        let l = load(crate::DEFAULT_CONFIG);
        assert_eq!(l.config, Config::default());
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
    }

    #[test]
    fn every_key_parses() {
        let text = r#"
rules_files: [/a.yaml, /b.d]
rules:
  - disable: {rule: "*"}
  - enable: {tag: network}
  - enable:
      rule: Read sensitive file*
priority: WARNING
rule_matching: all
json_output: true
json_include_output_property: false
json_include_tags_property: false
json_include_message_property: true
json_include_output_fields_property: false
append_output:
  - match: {source: syscall, tags: [a, b], rule: R}
    extra_output: "on CPU %evt.cpu"
    extra_fields:
      - evt.hostname
      - home: "${HOME}"
  - extra_output: x
stdout_output: {enabled: false}
time_format_iso_8601: true
watch_config_files: false
file_output: {enabled: true, keep_alive: true, filename: /var/log/v.txt}
syslog_output: {enabled: false, socket: /run/log.sock, spool_dir: /s, spool_max_bytes: 10, retry_max_backoff: 2s}
program_output: {enabled: true, keep_alive: true, program: "cat", spool_dir: /ps}
http_output:
  enabled: true
  url: http://127.0.0.1:2801/
  user_agent: ua
  insecure: true
  ca_cert: /c
  ca_bundle: /b
  ca_path: /p
  mtls: true
  client_cert: /cc
  client_key: /ck
  echo: true
  compress_uploads: true
  keep_alive: true
  max_consecutive_timeouts: 9
  timeout: 1500ms
  spool_dir: /var/spool/vigil
  spool_max_bytes: 4096
  retry_max_backoff: 500ms
buffered_outputs: true
outputs_queue: {capacity: 1000}
webserver:
  enabled: false
  listen_port: 9000
  listen_address: 0.0.0.0
  k8s_healthz_endpoint: /hz
  ssl_enabled: true
  ssl_certificate: /s.pem
  prometheus_metrics_enabled: true
  bind_failure: continue
metrics:
  enabled: true
  interval: 15m
  output_rule: false
  output_file: /tmp/m.jsonl
  rules_counters_enabled: false
  resource_utilization_enabled: false
  state_counters_enabled: false
  kernel_event_counters_enabled: false
  libbpf_stats_enabled: false
  convert_memory_to_mb: false
  include_empty_values: true
drop_alert: {enabled: false, priority: WARNING, threshold: 5, rate_limit: 1m}
"#;
        let l = load(text);
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        let c = l.config;
        assert_eq!(
            c.rules_files,
            vec![PathBuf::from("/a.yaml"), PathBuf::from("/b.d")]
        );
        assert_eq!(
            c.rules,
            vec![
                RuleSelector::Disable(RuleMatch::Rule("*".into())),
                RuleSelector::Enable(RuleMatch::Tag("network".into())),
                RuleSelector::Enable(RuleMatch::Rule("Read sensitive file*".into())),
            ]
        );
        assert_eq!(c.priority, Priority::Warning);
        assert_eq!(c.rule_matching, RuleMatching::All);
        assert!(c.json_output && !c.json_include_output_property && !c.json_include_tags_property);
        assert!(c.json_include_message_property && !c.json_include_output_fields_property);
        assert_eq!(
            c.append_output,
            vec![
                AppendOutput {
                    matches: AppendMatch {
                        source: Some("syscall".into()),
                        tags: vec!["a".into(), "b".into()],
                        rule: Some("R".into()),
                    },
                    extra_output: Some("on CPU %evt.cpu".into()),
                    extra_fields: vec![
                        ExtraField {
                            name: "evt.hostname".into(),
                            value: None
                        },
                        ExtraField {
                            name: "home".into(),
                            value: Some("${HOME}".into())
                        },
                    ],
                },
                AppendOutput {
                    extra_output: Some("x".into()),
                    ..Default::default()
                },
            ]
        );
        assert!(!c.stdout_output.enabled && !c.syslog_output.enabled);
        assert!(c.time_format_iso_8601);
        assert!(!c.watch_config_files, "watch_config_files: false is read");
        assert_eq!(
            c.syslog_output,
            SyslogOutput {
                enabled: false,
                socket: "/run/log.sock".into(),
                spool_dir: Some("/s".into()),
                spool_max_bytes: 10,
                retry_max_backoff: Duration::from_secs(2),
            }
        );
        assert_eq!(
            c.drop_alert,
            DropAlert {
                enabled: false,
                priority: Priority::Warning,
                threshold: 5,
                rate_limit: Duration::from_secs(60),
            }
        );
        assert_eq!(
            c.file_output,
            FileOutput {
                enabled: true,
                keep_alive: true,
                filename: "/var/log/v.txt".into(),
                ..FileOutput::default()
            }
        );
        assert_eq!(
            c.program_output,
            ProgramOutput {
                enabled: true,
                keep_alive: true,
                program: "cat".into(),
                spool_dir: Some("/ps".into()),
                ..ProgramOutput::default()
            }
        );
        assert_eq!(
            c.http_output,
            HttpOutput {
                enabled: true,
                url: "http://127.0.0.1:2801/".into(),
                user_agent: "ua".into(),
                insecure: true,
                ca_cert: "/c".into(),
                ca_bundle: "/b".into(),
                ca_path: "/p".into(),
                mtls: true,
                client_cert: "/cc".into(),
                client_key: "/ck".into(),
                echo: true,
                compress_uploads: true,
                keep_alive: true,
                max_consecutive_timeouts: 9,
                timeout: Duration::from_millis(1500),
                spool_dir: Some("/var/spool/vigil".into()),
                spool_max_bytes: 4096,
                retry_max_backoff: Duration::from_millis(500),
            }
        );
        assert!(c.buffered_outputs);
        assert_eq!(c.outputs_queue.capacity, 1000);
        assert_eq!(
            c.webserver,
            Webserver {
                enabled: false,
                listen_port: 9000,
                listen_address: "0.0.0.0".into(),
                k8s_healthz_endpoint: "/hz".into(),
                ssl_enabled: true,
                ssl_certificate: "/s.pem".into(),
                prometheus_metrics_enabled: true,
                bind_failure: BindFailure::Continue,
            }
        );
        assert_eq!(
            c.metrics,
            Metrics {
                enabled: true,
                interval: Duration::from_secs(900),
                output_rule: false,
                output_file: Some("/tmp/m.jsonl".into()),
                rules_counters_enabled: false,
                resource_utilization_enabled: false,
                state_counters_enabled: false,
                kernel_event_counters_enabled: false,
                libbpf_stats_enabled: false,
                convert_memory_to_mb: false,
                include_empty_values: true,
            }
        );
        // Round trip through to_yaml.
        let again = load(&c.to_yaml());
        assert_eq!(again.config, c, "{}", c.to_yaml());
    }

    #[test]
    fn fleet_outputs_parse_validate_and_print_back() {
        let text = r#"
otlp_output:
  enabled: true
  endpoint: https://collector.example:4318
  headers: {Authorization: "Bearer t", X-Scope-OrgID: tenant-1}
  header_files: {X-Api-Key: /etc/vigil/secrets/otlp-key}
  insecure: true
  ca_cert: /ca.pem
  timeout: 3s
  batch_max_records: 100
  batch_delay: 0s
  compression: none
  spool_dir: /var/lib/vigil/otlp
kafka_output:
  enabled: true
  brokers: "k1:9092, k2:9093"
  topic: alerts
  key: container.id
  compression: zstd
  tls: true
  sasl_mechanism: scram-sha-512
  sasl_username: vigil
  sasl_password_file: /etc/vigil/secrets/kafka
  batch_max_records: 64
  spool_dir: /var/lib/vigil/kafka
"#;
        let c = load(text).config;
        let o = &c.otlp_output;
        assert!(o.enabled && o.insecure);
        assert_eq!(
            o.headers,
            [
                ("Authorization".to_owned(), "Bearer t".to_owned()),
                ("X-Scope-OrgID".to_owned(), "tenant-1".to_owned())
            ]
        );
        assert_eq!(
            o.header_files[0].1,
            PathBuf::from("/etc/vigil/secrets/otlp-key")
        );
        assert_eq!(o.batch_delay, Duration::ZERO);
        assert_eq!(o.compression, Compression::None);
        let k = &c.kafka_output;
        assert_eq!(k.brokers, ["k1:9092", "k2:9093"]);
        assert_eq!(k.compression, Compression::Zstd);
        assert_eq!(k.sasl_mechanism, Some(SaslMechanism::ScramSha512));
        assert_eq!(k.key, "container.id");
        let settings = c.output_settings();
        assert_eq!(settings.kafka_output, c.kafka_output);
        assert_eq!(settings.otlp_output, c.otlp_output);
        // `config show` prints it back to the same configuration.
        assert_eq!(load(&c.to_yaml()).config, c, "{}", c.to_yaml());
        for (text, message) in [
            (
                "otlp_output:\n  compression: lz4\n",
                "config.yaml:2:16: `otlp_output.compression`: unknown compression `lz4` (gzip or none)",
            ),
            (
                "kafka_output:\n  compression: snappy\n",
                "config.yaml:2:16: `kafka_output.compression`: unknown compression `snappy`",
            ),
            (
                "kafka_output:\n  sasl_mechanism: GSSAPI\n",
                "config.yaml:2:19: `kafka_output.sasl_mechanism`: unknown SASL mechanism `GSSAPI`",
            ),
            (
                "kafka_output:\n  brokers: [kafka]\n",
                "config.yaml:2:12: `kafka_output.brokers`: `kafka` is not host:port",
            ),
            (
                "kafka_output:\n  enabled: true\n",
                "config.yaml:1:1: `kafka_output`: enabled without `brokers`",
            ),
            (
                "kafka_output: {brokers: [k:1], sasl_mechanism: PLAIN}\n",
                "config.yaml:1:1: `kafka_output`: `sasl_mechanism` without a `sasl_username`",
            ),
            (
                "otlp_output: {batch_max_records: 0}\n",
                "`otlp_output.batch_max_records`: must be at least 1",
            ),
            (
                "otlp_output: {headers: [a]}\n",
                "`otlp_output.headers`: expected a mapping",
            ),
        ] {
            let e = err(text);
            assert!(e.contains(message), "{text:?}: {e}");
        }
    }

    #[test]
    fn type_errors_name_path_and_position() {
        let cases: &[(&str, &str)] = &[
            (
                "http_output:\n  enabled: true\n  url: [a]\n",
                "config.yaml:3:8: `http_output.url`: expected a string, found a sequence",
            ),
            ("json_output: 1\n", "config.yaml:1:14: `json_output`: expected a boolean, found an integer"),
            ("json_output: \"maybe\"\n", "`json_output`: expected a boolean, found a string"),
            ("json_include_output_property: ~\n", "`json_include_output_property`: expected a boolean, found null"),
            ("json_include_tags_property: 2\n", "`json_include_tags_property`"),
            ("json_include_message_property: x\n", "`json_include_message_property`"),
            ("json_include_output_fields_property: x\n", "`json_include_output_fields_property`"),
            ("buffered_outputs: x\n", "`buffered_outputs`: expected a boolean"),
            ("rules_files: [a, {b: c}]\n", "config.yaml:1:18: `rules_files[1]`: expected a string, found a mapping"),
            ("rules_file: 3\n", "`rules_file`: expected a sequence of strings, found an integer"),
            ("priority: loud\n", "config.yaml:1:11: `priority`: unknown priority `loud`"),
            ("priority: [a]\n", "`priority`: expected a string"),
            ("rule_matching: some\n", "`rule_matching`: unknown rule matching `some`"),
            ("rules: {a: b}\n", "`rules`: expected a sequence, found a mapping"),
            ("rules:\n  - frobnicate: {rule: x}\n", "config.yaml:2:5: unknown key `rules[0].frobnicate`"),
            ("rules:\n  - disable: {rule: x, tag: y}\n", "`rules[0].disable`: expected exactly one of `rule` or `tag`"),
            ("rules:\n  - disable: {rul: x}\n", "unknown key `rules[0].disable.rul` (did you mean `rule`?)"),
            ("rules:\n  - disable: {tag: [x]}\n", "`rules[0].disable.tag`: expected a string, found a sequence"),
            ("rules:\n  - {enable: {tag: x}, disable: {tag: y}}\n", "`rules[0]`: expected exactly one of `enable` or `disable`"),
            ("append_output: 3\n", "`append_output`: expected a sequence"),
            ("append_output:\n  - match: {tags: 3}\n", "`append_output[0].match.tags`: expected a sequence of strings"),
            ("append_output:\n  - extra_output: [x]\n", "`append_output[0].extra_output`: expected a string"),
            ("append_output:\n  - extra_fields: [3]\n", "`append_output[0].extra_fields[0]`: expected a field name or a `name: value` mapping, found an integer"),
            ("append_output:\n  - extra_fields: [{a: b, c: d}]\n", "`append_output[0].extra_fields[0]`: expected a single `name: value` pair"),
            ("append_output:\n  - extra_fields: [{a: [b]}]\n", "`append_output[0].extra_fields[0].a`: expected a string"),
            ("stdout_output: true\n", "`stdout_output`: expected a mapping, found a boolean"),
            ("stdout_output: {enabled: 1}\n", "`stdout_output.enabled`"),
            ("syslog_output: {enabled: 1}\n", "`syslog_output.enabled`"),
            ("file_output: {filename: 1}\n", "`file_output.filename`: expected a string"),
            ("file_output: {keep_alive: x}\n", "`file_output.keep_alive`"),
            ("program_output: {program: {}}\n", "`program_output.program`: expected a string, found a mapping"),
            ("http_output: {max_consecutive_timeouts: -1}\n", "`http_output.max_consecutive_timeouts`: integer -1 is out of range"),
            ("http_output: {max_consecutive_timeouts: 1.5}\n", "`http_output.max_consecutive_timeouts`: expected a non-negative integer, found a float"),
            ("http_output: {mtls: 2}\n", "`http_output.mtls`: expected a boolean"),
            ("http_output: {timeout: 0s}\n", "`http_output.timeout`: invalid duration `0s`"),
            ("http_output: {ca_path: 1}\n", "`http_output.ca_path`"),
            ("outputs_queue: {capacity: x}\n", "`outputs_queue.capacity`"),
            ("webserver: {listen_port: 70000}\n", "`webserver.listen_port`: integer 70000 is out of range"),
            ("webserver: {listen_address: [a]}\n", "`webserver.listen_address`"),
            (
                "webserver: {listen_address: 327.0.0.1}\n",
                "config.yaml:1:29: `webserver.listen_address`: invalid IP address `327.0.0.1`",
            ),
            ("webserver: {ssl_enabled: x}\n", "`webserver.ssl_enabled`"),
            ("webserver: {bind_failure: ignore}\n", "`webserver.bind_failure`: unknown bind failure action `ignore` (expected `exit` or `continue`)"),
            ("metrics: {interval: 10}\n", "`metrics.interval`: expected a string, found an integer"),
            ("metrics: {interval: 10 parsecs}\n", "`metrics.interval`: invalid duration `10 parsecs`"),
            ("metrics: {output_file: [x]}\n", "`metrics.output_file`"),
            ("metrics: {include_empty_values: x}\n", "`metrics.include_empty_values`"),
            ("- a\n- b\n", "config.yaml:1:1: the top level: expected a mapping, found a sequence"),
            ("[a]: x\n", "the top level: keys must be strings, found a sequence"),
        ];
        for (text, want) in cases {
            let got = err(text);
            assert!(
                got.contains(want),
                "for {text:?}: got {got:?}, want {want:?}"
            );
        }
    }

    #[test]
    fn unknown_keys_warn_with_suggestions_and_are_ignored() {
        let warned = |text: &str| {
            let loaded = load(text);
            assert_eq!(loaded.warnings.len(), 1, "{text:?}: {:?}", loaded.warnings);
            loaded.warnings[0].clone()
        };
        assert_eq!(
            warned("json_output: true\nhttp_ouput:\n  enabled: true\n"),
            "config.yaml:2:1: unknown key `http_ouput` (did you mean `http_output`?); ignored"
        );
        assert_eq!(
            warned("zzz_totally_new: 1\n"),
            "config.yaml:1:1: unknown key `zzz_totally_new`; ignored"
        );
        assert_eq!(
            warned("webserver:\n  listen_prot: 1\n"),
            "config.yaml:2:3: unknown key `webserver.listen_prot` (did you mean `listen_port`?); ignored"
        );
        assert!(warned("metrics: {bogus: 1}\n").contains("unknown key `metrics.bogus`"));
        assert!(warned("json_output: true\n7: x\n").contains("config.yaml:2:1: unknown key `7`"));
        assert!(warned("append_output:\n  - match: {sauce: x}\n")
            .contains("unknown key `append_output[0].match.sauce` (did you mean `source`?)"));
        // The rest of the file still applies.
        assert!(load("json_output: true\nzzz: 1\n").config.json_output);
        // A known key with a wrong type stays an error, and so does a selector entry that
        // names neither of its two possible keys (its meaning is unknown).
        assert!(err("zzz: 1\njson_output: 3\n").contains("`json_output`: expected a boolean"));
        assert!(
            err("rules:\n  - disable: {rul: x}\n").contains("unknown key `rules[0].disable.rul`")
        );
    }

    #[test]
    fn yaml_syntax_errors_have_position() {
        let e = err("json_output: true\nwebserver: [\n");
        assert!(e.starts_with("config.yaml:"), "{e}");
        assert!(e.contains("invalid YAML"), "{e}");
        let e = err("a: 1\na: 2\n");
        assert!(e.contains("invalid YAML"), "{e}");
    }

    #[test]
    fn falco_only_keys_warn() {
        let l = load("engine:\n  kind: modern_ebpf\nlog_level: info\nwebserver:\n  threadiness: 0\njson_output: true\n");
        assert!(l.config.json_output);
        assert_eq!(l.warnings.len(), 3, "{:?}", l.warnings);
        assert!(
            l.warnings[0].starts_with("config.yaml:1:1: `engine`"),
            "{:?}",
            l.warnings
        );
        assert!(
            l.warnings[2].contains("`webserver.threadiness`"),
            "{:?}",
            l.warnings
        );
        // (An empty key fits every shape; a wrong shape is an error, see
        // `falco_only_keys_of_the_wrong_shape_are_refused`.)
        for key in FALCO_ONLY_TOP {
            let l = load(&format!("{key}:\n"));
            assert_eq!(l.warnings.len(), 1, "{key}");
            assert!(
                l.warnings[0].contains(&format!("`{key}`")),
                "{:?}",
                l.warnings
            );
        }
    }

    #[test]
    fn rules_file_and_rules_files() {
        let l = load("rules_file:\n  - /old.yaml\n");
        assert_eq!(l.config.rules_files, vec![PathBuf::from("/old.yaml")]);
        assert!(l.warnings.is_empty());
        let l = load("rules_file: /single.yaml\n");
        assert_eq!(l.config.rules_files, vec![PathBuf::from("/single.yaml")]);
        let l = load("rules_files: [/new.yaml]\nrules_file: [/old.yaml]\n");
        assert_eq!(l.config.rules_files, vec![PathBuf::from("/new.yaml")]);
        assert_eq!(l.warnings.len(), 1);
        assert!(
            l.warnings[0].contains("`rules_file` is ignored"),
            "{:?}",
            l.warnings
        );
        let l = load("rules_file: [/old.yaml]\nrules_files: [/new.yaml]\n");
        assert_eq!(l.config.rules_files, vec![PathBuf::from("/new.yaml")]);
        assert_eq!(
            load("rules_files: []\n").config.rules_files,
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn realistic_falco_yaml_loads() {
        let text = r#"
# Falco-style configuration
config_files:
  - /etc/falco/config.d
watch_config_files: true
rules_files:
  - /etc/falco/falco_rules.yaml
  - /etc/falco/falco_rules.local.yaml
  - /etc/falco/rules.d
rules:
  - disable:
      rule: "Terminal shell in container"
engine:
  kind: modern_ebpf
  kmod:
    buf_size_preset: 4
    drop_failed_exit: false
  ebpf:
    probe: ${HOME}/.falco/falco-bpf.o
    buf_size_preset: 4
    drop_failed_exit: false
  modern_ebpf:
    cpus_for_each_buffer: 2
    buf_size_preset: 4
    drop_failed_exit: false
  replay:
    capture_file: ""
  gvisor:
    config: ""
    root: ""
load_plugins: []
plugins:
  - name: k8saudit
    library_path: libk8saudit.so
    init_config: ""
    open_params: "http://:9765/k8s-audit"
  - name: json
    library_path: libjson.so
time_format_iso_8601: false
priority: debug
json_output: false
json_include_output_property: true
json_include_message_property: false
json_include_output_fields_property: true
json_include_tags_property: true
buffered_outputs: false
rule_matching: first
outputs_queue:
  capacity: 0
append_output:
  - match:
      source: syscall
    extra_output: "on CPU %evt.cpu"
    extra_fields:
      - evt.hostname
stdout_output:
  enabled: true
syslog_output:
  enabled: true
file_output:
  enabled: false
  keep_alive: false
  filename: ./events.txt
http_output:
  enabled: false
  url: ""
  user_agent: "falcosecurity/falco"
  insecure: false
  ca_cert: ""
  ca_bundle: ""
  ca_path: "/etc/ssl/certs"
  mtls: false
  client_cert: "/etc/ssl/certs/client.crt"
  client_key: "/etc/ssl/certs/client.key"
  echo: false
  compress_uploads: false
  keep_alive: false
program_output:
  enabled: false
  keep_alive: false
  program: "jq '{text: .output}' | curl -d @- -X POST https://hooks.slack.com/services/XXX"
grpc_output:
  enabled: false
grpc:
  enabled: false
  bind_address: "unix:///run/falco/falco.sock"
  threadiness: 0
webserver:
  enabled: true
  threadiness: 0
  listen_port: 8765
  listen_address: 0.0.0.0
  k8s_healthz_endpoint: /healthz
  prometheus_metrics_enabled: false
  ssl_enabled: false
  ssl_certificate: /etc/falco/falco.pem
log_stderr: true
log_syslog: true
log_level: info
libs_logger:
  enabled: false
  severity: debug
output_timeout: 2000
syscall_event_timeouts:
  max_consecutives: 1000
syscall_event_drops:
  threshold: .1
  actions:
    - log
    - alert
  rate: .03333
  max_burst: 1
  simulate_drops: false
metrics:
  enabled: false
  interval: 1h
  output_rule: true
  # output_file: /tmp/falco_stats.jsonl
  rules_counters_enabled: true
  resource_utilization_enabled: true
  state_counters_enabled: true
  kernel_event_counters_enabled: true
  kernel_event_counters_per_cpu_enabled: false
  libbpf_stats_enabled: true
  plugins_metrics_enabled: true
  jemalloc_stats_enabled: false
  convert_memory_to_mb: true
  include_empty_values: false
base_syscalls:
  custom_set: []
  repair: false
falco_libs:
  thread_table_size: 262144
container_engines:
  docker:
    enabled: true
"#;
        let l = load(text);
        let c = &l.config;
        assert_eq!(
            c.rules_files,
            [
                "/etc/falco/falco_rules.yaml",
                "/etc/falco/falco_rules.local.yaml",
                "/etc/falco/rules.d"
            ]
            .map(PathBuf::from)
        );
        assert_eq!(
            c.rules,
            vec![RuleSelector::Disable(RuleMatch::Rule(
                "Terminal shell in container".into()
            ))]
        );
        assert_eq!(c.webserver.listen_address, "0.0.0.0");
        assert_eq!(c.append_output.len(), 1);
        let ignored: Vec<&str> = l
            .warnings
            .iter()
            .filter_map(|w| w.split('`').nth(1))
            .collect();
        assert_eq!(
            ignored,
            [
                "config_files",
                "engine",
                "load_plugins",
                "plugins",
                "grpc_output",
                "grpc",
                "webserver.threadiness",
                "log_stderr",
                "log_syslog",
                "log_level",
                "libs_logger",
                "output_timeout",
                "syscall_event_timeouts",
                "syscall_event_drops",
                "metrics.kernel_event_counters_per_cpu_enabled",
                "metrics.plugins_metrics_enabled",
                "metrics.jemalloc_stats_enabled",
                "base_syscalls",
                "falco_libs",
                "container_engines",
            ]
        );
    }

    #[test]
    fn overrides() {
        let mut c = Config::default();
        assert!(c.apply_override("json_output=true").unwrap().is_empty());
        assert!(c.json_output);
        c.apply_override("http_output.url=http://127.0.0.1:2801/")
            .unwrap();
        assert_eq!(c.http_output.url, "http://127.0.0.1:2801/");
        c.apply_override("rules_files[0]=/x.yaml").unwrap();
        assert_eq!(
            c.rules_files,
            vec![PathBuf::from("/x.yaml")],
            "index = length appends"
        );
        c.apply_override("rules_files[0]=/y.yaml").unwrap();
        assert_eq!(
            c.rules_files,
            vec![PathBuf::from("/y.yaml")],
            "an existing index replaces"
        );
        c.apply_override("rules_files[1]=/appended.yaml").unwrap();
        assert_eq!(c.rules_files[1], PathBuf::from("/appended.yaml"));
        // Falco's `configuration_webserver_ip`: every IPv4/IPv6 spelling is kept as written
        // (`::` is an address, not a YAML map); anything else is refused.
        for address in [
            "::",
            "::1",
            "0.0.0.0",
            "10.20.30.40",
            "fe80::2:b3ff:fe1e:8329",
            "ABCD:0000:12:0:0:FF:1:2",
            "2001:db8::0:1",
        ] {
            let mut w = Config::default();
            w.apply_override(&format!("webserver.listen_address={address}"))
                .unwrap_or_else(|e| panic!("{address}: {e}"));
            assert_eq!(w.webserver.listen_address, address);
        }
        for address in [
            "256.1.1.1",
            "10.20 .30.40",
            "10.20.30. 40",
            "#10.20.30.40",
            "fe80: 2::1",
            "fe80::2:b3ff:fe1e:832g",
            "ABCD:0000:12:O:0:FF:1:2",
        ] {
            let mut w = Config::default();
            assert!(
                w.apply_override(&format!("webserver.listen_address={address}"))
                    .is_err(),
                "{address}"
            );
        }
        c.apply_override("rules_files=[/only.yaml]").unwrap();
        assert_eq!(c.rules_files, vec![PathBuf::from("/only.yaml")]);
        c.apply_override("webserver.listen_port=9999").unwrap();
        assert_eq!(c.webserver.listen_port, 9999);
        c.apply_override("webserver.listen_address=::1").unwrap();
        assert_eq!(c.webserver.listen_address, "::1");
        c.apply_override("priority=Error").unwrap();
        assert_eq!(c.priority, Priority::Error);
        c.apply_override("metrics.interval=30s").unwrap();
        assert_eq!(c.metrics.interval, Duration::from_secs(30));
        c.apply_override("metrics.output_file=/tmp/m").unwrap();
        assert_eq!(c.metrics.output_file, Some(PathBuf::from("/tmp/m")));
        c.apply_override("http_output.url=").unwrap();
        assert_eq!(c.http_output.url, "");
        c.apply_override("rules[0].disable.tag=network").unwrap();
        assert_eq!(
            c.rules,
            vec![RuleSelector::Disable(RuleMatch::Tag("network".into()))]
        );
        // Falco's list-append form: `rules[]` adds a new item at the end.
        c.apply_override("rules[].disable.tag=k8s").unwrap();
        c.apply_override("rules[].enable.rule=Some Rule").unwrap();
        assert_eq!(
            c.rules,
            vec![
                RuleSelector::Disable(RuleMatch::Tag("network".into())),
                RuleSelector::Disable(RuleMatch::Tag("k8s".into())),
                RuleSelector::Enable(RuleMatch::Rule("Some Rule".into())),
            ]
        );
        c.apply_override("append_output[0].match.source=syscall")
            .unwrap();
        assert_eq!(
            c.append_output[0].matches.source.as_deref(),
            Some("syscall")
        );
        c.apply_override("stdout_output={enabled: false}").unwrap();
        assert!(!c.stdout_output.enabled);
        // Falco-only keys are accepted with a warning and change nothing.
        let before = c.clone();
        let w = c.apply_override("engine.kind=modern_ebpf").unwrap();
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("`engine`"), "{w:?}");
        assert_eq!(c, before);
    }

    #[test]
    fn bad_overrides_name_the_path_and_keep_config() {
        let mut c = Config::default();
        let before = c.clone();
        let cases: &[(&str, &str)] = &[
            (
                "json_output",
                "invalid override `json_output`: expected `key.path=value`",
            ),
            ("=1", "invalid override `=1`: empty key path"),
            ("a..b=1", "empty key in path"),
            ("rules_files[x]=a", "invalid index `x`"),
            ("rules_files[0=a", "malformed index"),
            (
                "rules_files[7]=a",
                "index 7 is out of range (the list has 0 items)",
            ),
            ("json_output.x=1", "cannot set key `x` inside a boolean"),
            ("webserver[0]=1", "cannot index [0] into a mapping"),
            ("webserver[]=1", "cannot index [] into a mapping"),
            (
                "webserver.listen_address=327.0.0.1",
                "`webserver.listen_address`: invalid IP address `327.0.0.1`",
            ),
            (
                "json_output=maybe",
                "override `json_output=maybe`: `json_output`: expected a boolean, found a string",
            ),
            (
                "webserver.listen_port=http",
                "`webserver.listen_port`: expected a non-negative integer",
            ),
            (
                "http_output.url=[a]",
                "`http_output.url`: expected a string, found a sequence",
            ),
            ("priority=loud", "`priority`: unknown priority `loud`"),
            // Not a `{…}`/`[…]` collection: one string, which is not a boolean.
            (
                "json_output=[",
                "`json_output`: expected a boolean, found a string",
            ),
            ("json_output={a: [}", "value is not valid YAML"),
            (
                &format!("{}=1", ["a"; 1000].join(".")),
                "is nested too deeply",
            ),
            (
                &format!("rules_files{}=1", "[0]".repeat(1000)),
                "is nested too deeply",
            ),
        ];
        for (spec, want) in cases {
            let got = c.apply_override(spec).map(|_| ()).unwrap_err().to_string();
            assert!(
                got.contains(want),
                "for {spec:?}: got {got:?}, want {want:?}"
            );
            assert_eq!(c, before, "{spec} changed the config");
        }
        // Unknown keys warn (as in a file) and change nothing.
        for (spec, want) in [
            (
                "http_ouput.url=x",
                "unknown key `http_ouput` (did you mean `http_output`?); ignored",
            ),
            (
                "webserver.bogus=1",
                "unknown key `webserver.bogus`; ignored",
            ),
        ] {
            let warnings = c.apply_override(spec).unwrap();
            assert!(
                warnings.iter().any(|w| w.contains(want)),
                "for {spec:?}: {warnings:?}"
            );
            assert_eq!(c, before, "{spec} changed the config");
        }
    }

    #[test]
    fn load_from_file() {
        let dir = std::env::temp_dir().join(format!("vigil-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("bad.yaml");
        std::fs::write(&path, "json_output: true\nmetrics:\n  interval: [1]\n").unwrap();
        let e = Config::load(&path).unwrap_err().to_string();
        assert_eq!(
            e,
            format!(
                "{}:3:13: `metrics.interval`: expected a string, found a sequence",
                path.display()
            )
        );
        let good = dir.join("good.yaml");
        std::fs::write(&good, "json_output: true\n").unwrap();
        assert!(Config::load(&good).unwrap().config.json_output);
        let missing = dir.join("missing.yaml");
        let e = Config::load(&missing).unwrap_err().to_string();
        assert!(e.starts_with("failed to read config file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn adversarial_input_does_not_panic() {
        let deep = "[".repeat(10_000);
        assert!(Config::from_yaml_str(&deep, "x").is_err());
        let deep_valid = format!("a: {}{}\n", "[".repeat(100_000), "]".repeat(100_000));
        assert!(Config::from_yaml_str(&deep_valid, "x").is_err());
        let deep_maps = format!("a: {}x{}\n", "{a: ".repeat(100_000), "}".repeat(100_000));
        assert!(Config::from_yaml_str(&deep_maps, "x").is_err());
        let bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\ne: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\nf: [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n";
        assert!(Config::from_yaml_str(bomb, "x").is_err());
        assert!(Config::from_yaml_str("\u{0}\u{1}\u{ffff}", "x").is_err());
        assert!(Config::from_yaml_str("? [a]\n: b\n", "x").is_err());
    }

    #[test]
    fn key_path_parsing() {
        assert_eq!(
            parse_key_path("a.b[1][2].c").unwrap(),
            vec![
                Segment::Key("a".into()),
                Segment::Key("b".into()),
                Segment::Index(1),
                Segment::Index(2),
                Segment::Key("c".into()),
            ]
        );
        assert!(parse_key_path("a[1]x").is_err());
        assert!(parse_key_path("[1]").is_err());
    }
}

//! `otlp_output`: alerts as OpenTelemetry logs, OTLP over HTTP with protobuf bodies, to a
//! Collector or any OTLP/HTTP receiver (`POST <endpoint>/v1/logs`, `Content-Type:
//! application/x-protobuf`, gzip by default), many alerts per request.
//!
//! **One LogRecord per alert.** `time_unix_nano` is the event time (`observed_time_unix_nano`
//! too: the agent observed the event then); `severity_number` / `severity_text` come from the
//! priority (Emergency FATAL4 … Debug DEBUG, the text as Falco spells it); the body is the
//! alert line (Falco's JSON `output`); the attributes are `rule`, `priority`, `source`, `tags`
//! (a string array), `hostname`, every output field under its Falco name with its typed value
//! (a field without a value, Falco's `<NA>`, is an attribute with an empty value), and
//! `log.record.uid`, the alert id ([`crate::envelope`]) that stays the same on every copy a
//! retry or a crash sends. The resource says `service.name=vigil`, `service.version`,
//! `host.name`, and, for alerts about a container, the OpenTelemetry semantic-convention
//! attributes of what the alert knows: `container.id`, `container.name`,
//! `container.image.name`, `container.image.tags`, `k8s.namespace.name`, `k8s.pod.name`,
//! `k8s.pod.uid`. Consecutive alerts with the same resource share one `ResourceLogs`, so the
//! order of a request is the order of the alerts.
//!
//! **Answers** (the OTLP/HTTP specification): 200 with a partial success counts the rejected
//! records as dropped (`rejected`); 400 drops the batch (`rejected`: the receiver will never
//! take it); 401/403 are refused authentication (`auth`, retried: a fixed credential may come
//! with a reload); 429, 502, 503, 504 and other 5xx are retried; a TLS failure is counted as
//! `tls` and retried. The protobuf encoding is written here (the messages are small and
//! stable; generating them would bring `prost` and its build-time code generation for four
//! messages), and tests decode it with the real Collector (`crates/cli/tests/e2e/fleet.rs`).
//!
//! gRPC is not offered: it needs HTTP/2, which the HTTP client Vigil has (ureq) does not
//! speak; a gRPC stack (tonic, hyper, tokio) would more than double the dependencies for a
//! transport every Collector also accepts over HTTP.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value as Json;

use crate::envelope;
use crate::settings::{Compression, OtlpOutput};
use crate::sinks::{Batching, Record, Sink, SinkError};
use crate::tls::{ClientCert, ClientTls, TlsSetupError};

/// Why `otlp_output` could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OtlpSetupError {
    #[error("otlp_output.endpoint `{0}` is not an http:// or https:// URL")]
    BadEndpoint(String),
    #[error("otlp_output.{0}: set both client_cert and client_key, or neither")]
    HalfClientCert(&'static str),
    #[error("otlp_output.header_files: cannot read `{path}` for header `{header}`: {source}")]
    HeaderFile {
        header: String,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("otlp_output: {0}")]
    Tls(#[from] TlsSetupError),
    #[error("otlp_output.compression: `{0}` is not supported here (gzip or none)")]
    Compression(&'static str),
}

/// The OTLP/HTTP logs output.
pub struct OtlpSink {
    agent: ureq::Agent,
    url: String,
    headers: Vec<(String, String)>,
    gzip: bool,
    batching: Batching,
    buf: Vec<u8>,
}

impl OtlpSink {
    pub fn new(config: &OtlpOutput) -> Result<OtlpSink, OtlpSetupError> {
        let endpoint = config.endpoint.trim();
        let lower = endpoint.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(OtlpSetupError::BadEndpoint(config.endpoint.clone()));
        }
        let url = if endpoint.trim_end_matches('/').ends_with("/v1/logs") {
            endpoint.to_owned()
        } else {
            format!("{}/v1/logs", endpoint.trim_end_matches('/'))
        };
        let gzip = match config.compression {
            Compression::Gzip => true,
            Compression::None => false,
            other => return Err(OtlpSetupError::Compression(other.as_str())),
        };
        let client = match (
            config.client_cert.as_os_str().is_empty(),
            config.client_key.as_os_str().is_empty(),
        ) {
            (true, true) => None,
            (false, false) => Some(ClientCert {
                cert: (config.client_cert.clone(), "otlp_output.client_cert"),
                key: (config.client_key.clone(), "otlp_output.client_key"),
            }),
            (true, false) => return Err(OtlpSetupError::HalfClientCert("client_cert")),
            (false, true) => return Err(OtlpSetupError::HalfClientCert("client_key")),
        };
        let mut builder = ureq::AgentBuilder::new()
            .timeout_connect(config.timeout.min(std::time::Duration::from_secs(5)))
            .timeout(config.timeout)
            .user_agent(concat!("vigil/", env!("CARGO_PKG_VERSION")));
        if lower.starts_with("https://") {
            let tls = ClientTls {
                insecure: config.insecure,
                ca_files: vec![(config.ca_cert.clone(), "otlp_output.ca_cert")],
                ca_dir: None,
                client,
            };
            builder = builder.tls_config(Arc::new(tls.client_config()?));
        }
        let mut headers = config.headers.clone();
        for (header, path) in &config.header_files {
            let value = read_secret(path).map_err(|source| OtlpSetupError::HeaderFile {
                header: header.clone(),
                path: path.display().to_string(),
                source,
            })?;
            headers.push((header.clone(), value));
        }
        Ok(OtlpSink {
            agent: builder.build(),
            url,
            headers,
            gzip,
            batching: Batching {
                max_records: usize::try_from(config.batch_max_records)
                    .unwrap_or(usize::MAX)
                    .max(1),
                delay: config.batch_delay,
            },
            buf: Vec::new(),
        })
    }

    /// The URL requests go to.
    pub fn url(&self) -> &str {
        &self.url
    }
}

/// A secret from a file (a mounted Kubernetes Secret), surrounding whitespace trimmed.
pub fn read_secret(path: &PathBuf) -> std::io::Result<String> {
    Ok(std::fs::read_to_string(path)?.trim().to_owned())
}

impl Sink for OtlpSink {
    fn name(&self) -> &str {
        "otlp"
    }

    fn send(&mut self, record: &Record) -> Result<(), SinkError> {
        self.send_batch(std::slice::from_ref(record)).map(|_| ())
    }

    fn batching(&self) -> Batching {
        self.batching
    }

    fn send_batch(&mut self, records: &[Record]) -> Result<u64, SinkError> {
        let mut skipped = 0;
        self.buf.clear();
        encode_request(records, &mut self.buf, &mut skipped);
        if skipped == records.len() as u64 {
            return Ok(skipped);
        }
        let mut request = self
            .agent
            .post(&self.url)
            .set("Content-Type", "application/x-protobuf");
        for (name, value) in &self.headers {
            request = request.set(name, value);
        }
        let result = if self.gzip {
            let mut gz = flate2::write::GzEncoder::new(
                Vec::with_capacity(self.buf.len() / 4),
                flate2::Compression::fast(),
            );
            gz.write_all(&self.buf)?;
            request
                .set("Content-Encoding", "gzip")
                .send_bytes(&gz.finish()?)
        } else {
            request.send_bytes(&self.buf)
        };
        match result {
            Ok(response) => {
                let body = read_body(response);
                let (rejected, message) = proto::partial_success(&body);
                if rejected > 0 {
                    log::warn!(
                        "otlp output: the receiver rejected {rejected} log record(s): {message}"
                    );
                }
                Ok(skipped + u64::try_from(rejected).unwrap_or(0))
            }
            Err(ureq::Error::Status(code, response)) => {
                let body = read_body(response);
                let message = proto::status_message(&body)
                    .unwrap_or_else(|| String::from_utf8_lossy(&body).trim().to_owned());
                let what = format!("`{}` answered HTTP {code}: {message}", self.url);
                Err(match code {
                    400 | 413 => SinkError::Rejected(what),
                    401 | 403 => SinkError::Refused {
                        cause: "auth",
                        message: format!("{what} (refused authentication)"),
                    },
                    404 | 405 | 415 => SinkError::Fatal(what),
                    _ => SinkError::Unavailable(what),
                })
            }
            Err(e) if crate::http::timed_out(&e) => {
                Err(SinkError::Timeout(format!("POST `{}`: {e}", self.url)))
            }
            Err(e) if crate::tls::is_tls_error(&e) => Err(SinkError::Refused {
                cause: "tls",
                message: format!("POST `{}`: TLS failed: {e}", self.url),
            }),
            Err(e) => Err(SinkError::Unavailable(format!("POST `{}`: {e}", self.url))),
        }
    }
}

/// An answer's body, at most 1 MiB of it.
fn read_body(response: ureq::Response) -> Vec<u8> {
    use std::io::Read;
    let mut body = Vec::new();
    let _ = response.into_reader().take(1 << 20).read_to_end(&mut body);
    body
}

/// OpenTelemetry's severity number for a Falco priority.
pub fn severity_number(priority: &str) -> u64 {
    match priority.to_ascii_lowercase().as_str() {
        "emergency" => 24, // FATAL4
        "alert" => 23,     // FATAL3
        "critical" => 21,  // FATAL
        "error" => 17,     // ERROR
        "warning" => 13,   // WARN
        "notice" => 10,    // INFO2
        "debug" => 5,      // DEBUG
        _ => 9,            // INFO (informational)
    }
}

/// Falco field → OpenTelemetry resource attribute (semantic conventions).
const RESOURCE_FIELDS: &[(&str, &str)] = &[
    ("container.id", "container.id"),
    ("container.name", "container.name"),
    ("container.image.repository", "container.image.name"),
    ("k8s.ns.name", "k8s.namespace.name"),
    ("k8s.pod.name", "k8s.pod.name"),
    ("k8s.pod.uid", "k8s.pod.uid"),
];

/// The resource attributes of one alert: `(key, value)`, strings (the image tag as a
/// one-item array, as `container.image.tags` is).
fn resource_of(
    hostname: &str,
    fields: Option<&serde_json::Map<String, Json>>,
) -> Vec<(&'static str, Resource)> {
    let mut out = vec![
        ("service.name", Resource::Str("vigil".to_owned())),
        (
            "service.version",
            Resource::Str(env!("CARGO_PKG_VERSION").to_owned()),
        ),
        ("host.name", Resource::Str(hostname.to_owned())),
    ];
    let Some(fields) = fields else {
        return out;
    };
    let known = |name: &str| -> Option<String> {
        match fields.get(name) {
            Some(Json::String(s)) if !s.is_empty() && s != "<NA>" => Some(s.clone()),
            _ => None,
        }
    };
    // `container.id` is `host` for processes outside any container: no container resource.
    if known("container.id").is_some_and(|id| id == "host") {
        return out;
    }
    for (falco, otel) in RESOURCE_FIELDS {
        if let Some(value) = known(falco) {
            out.push((otel, Resource::Str(value)));
        }
    }
    if let Some(tag) = known("container.image.tag") {
        out.push(("container.image.tags", Resource::Tags(vec![tag])));
    }
    out
}

#[derive(Clone, Debug, PartialEq)]
enum Resource {
    Str(String),
    Tags(Vec<String>),
}

/// A resource and the encoded LogRecords under it so far.
type Pending = (Vec<(&'static str, Resource)>, Vec<u8>);

/// Encodes one `ExportLogsServiceRequest` for `records` into `out`; records that are not
/// envelopes or not JSON objects are skipped and counted in `skipped` (they cannot come from
/// this output's own spool, only from a directory shared by mistake).
fn encode_request(records: &[Record], out: &mut Vec<u8>, skipped: &mut u64) {
    use proto::*;
    let mut current: Option<Pending> = None;
    let flush = |current: &mut Option<Pending>, out: &mut Vec<u8>| {
        if let Some((resource, logs)) = current.take() {
            let mut resource_msg = Vec::new();
            for (key, value) in &resource {
                let mut any = Vec::new();
                match value {
                    Resource::Str(s) => string_field(&mut any, 1, s),
                    Resource::Tags(tags) => {
                        let mut array = Vec::new();
                        for tag in tags {
                            let mut item = Vec::new();
                            string_field(&mut item, 1, tag);
                            message_field(&mut array, 1, &item);
                        }
                        message_field(&mut any, 5, &array);
                    }
                }
                key_value(&mut resource_msg, 1, key, &any);
            }
            let mut scope = Vec::new();
            string_field(&mut scope, 1, "vigil");
            string_field(&mut scope, 2, env!("CARGO_PKG_VERSION"));
            let mut scope_logs = Vec::new();
            message_field(&mut scope_logs, 1, &scope);
            scope_logs.extend_from_slice(&logs);
            let mut resource_logs = Vec::new();
            message_field(&mut resource_logs, 1, &resource_msg);
            message_field(&mut resource_logs, 2, &scope_logs);
            message_field(out, 1, &resource_logs);
        }
    };
    for record in records {
        let Some(env) = envelope::parse(&record.body) else {
            *skipped += 1;
            continue;
        };
        let Ok(Json::Object(alert)) = serde_json::from_str::<Json>(env.json) else {
            *skipped += 1;
            continue;
        };
        let text = |key: &str| alert.get(key).and_then(Json::as_str).unwrap_or_default();
        let fields = alert.get("output_fields").and_then(Json::as_object);
        let resource = resource_of(text("hostname"), fields);
        if current.as_ref().is_some_and(|(r, _)| *r != resource) {
            flush(&mut current, out);
        }
        let logs = &mut current.get_or_insert_with(|| (resource, Vec::new())).1;
        let mut log = Vec::new();
        fixed64_field(&mut log, 1, env.time);
        varint_field(&mut log, 2, severity_number(text("priority")));
        string_field(&mut log, 3, text("priority"));
        let mut body = Vec::new();
        string_field(&mut body, 1, text("output"));
        message_field(&mut log, 5, &body);
        for key in ["rule", "priority", "source", "hostname"] {
            if let Some(Json::String(s)) = alert.get(key) {
                let mut any = Vec::new();
                string_field(&mut any, 1, s);
                key_value(&mut log, 6, key, &any);
            }
        }
        if let Some(Json::Array(tags)) = alert.get("tags") {
            let mut array = Vec::new();
            for tag in tags {
                let mut item = Vec::new();
                any_value(&mut item, tag);
                message_field(&mut array, 1, &item);
            }
            let mut any = Vec::new();
            message_field(&mut any, 5, &array);
            key_value(&mut log, 6, "tags", &any);
        }
        if let Some(fields) = fields {
            for (name, value) in fields {
                let mut any = Vec::new();
                any_value(&mut any, value);
                key_value(&mut log, 6, name, &any);
            }
        }
        let mut uid = Vec::new();
        string_field(&mut uid, 1, env.id);
        key_value(&mut log, 6, "log.record.uid", &uid);
        fixed64_field(&mut log, 11, env.time);
        message_field(logs, 2, &log);
    }
    flush(&mut current, out);
}

/// Protocol buffers, the few wire types OTLP's logs messages use.
mod proto {
    use serde_json::Value as Json;

    fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push((v as u8) | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }

    fn tag(out: &mut Vec<u8>, field: u32, wire: u8) {
        varint(out, (u64::from(field) << 3) | u64::from(wire));
    }

    pub fn varint_field(out: &mut Vec<u8>, field: u32, v: u64) {
        tag(out, field, 0);
        varint(out, v);
    }

    pub fn fixed64_field(out: &mut Vec<u8>, field: u32, v: u64) {
        tag(out, field, 1);
        out.extend_from_slice(&v.to_le_bytes());
    }

    pub fn bytes_field(out: &mut Vec<u8>, field: u32, bytes: &[u8]) {
        tag(out, field, 2);
        varint(out, bytes.len() as u64);
        out.extend_from_slice(bytes);
    }

    pub fn string_field(out: &mut Vec<u8>, field: u32, s: &str) {
        bytes_field(out, field, s.as_bytes());
    }

    pub fn message_field(out: &mut Vec<u8>, field: u32, message: &[u8]) {
        bytes_field(out, field, message);
    }

    /// A `KeyValue` (key, AnyValue already encoded) as field `field` of `out`.
    pub fn key_value(out: &mut Vec<u8>, field: u32, key: &str, any: &[u8]) {
        let mut kv = Vec::with_capacity(key.len() + any.len() + 4);
        string_field(&mut kv, 1, key);
        message_field(&mut kv, 2, any);
        message_field(out, field, &kv);
    }

    /// The fields of an `AnyValue` for a JSON value: strings, booleans, integers (a `u64`
    /// beyond `i64` as its text), doubles; `null` leaves it empty (no value).
    pub fn any_value(out: &mut Vec<u8>, value: &Json) {
        match value {
            Json::String(s) => string_field(out, 1, s),
            Json::Bool(b) => varint_field(out, 2, u64::from(*b)),
            Json::Number(n) => {
                if let Some(i) = n.as_i64() {
                    varint_field(out, 3, i as u64);
                } else if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
                    tag(out, 4, 1);
                    out.extend_from_slice(&f.to_bits().to_le_bytes());
                } else {
                    string_field(out, 1, &n.to_string());
                }
            }
            Json::Null => {}
            other => string_field(out, 1, &other.to_string()),
        }
    }

    /// A decoded field: number and value (varint, fixed or length-delimited bytes).
    enum Field<'a> {
        Varint(u64),
        Bytes(&'a [u8]),
        Other,
    }

    fn read_varint(data: &[u8], at: &mut usize) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *data.get(*at)?;
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }

    /// The fields of a message, in order; stops at the first malformed byte.
    fn fields(data: &[u8]) -> Vec<(u64, Field<'_>)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let Some(key) = read_varint(data, &mut at) else {
                break;
            };
            let field = match key & 7 {
                0 => match read_varint(data, &mut at) {
                    Some(v) => Field::Varint(v),
                    None => break,
                },
                1 => {
                    at += 8;
                    Field::Other
                }
                5 => {
                    at += 4;
                    Field::Other
                }
                2 => {
                    let Some(len) = read_varint(data, &mut at) else {
                        break;
                    };
                    let Some(end) = usize::try_from(len).ok().and_then(|l| at.checked_add(l))
                    else {
                        break;
                    };
                    let Some(bytes) = data.get(at..end) else {
                        break;
                    };
                    at = end;
                    Field::Bytes(bytes)
                }
                _ => break,
            };
            if at > data.len() {
                break;
            }
            out.push((key >> 3, field));
        }
        out
    }

    /// `ExportLogsServiceResponse.partial_success`: (rejected log records, error message).
    pub fn partial_success(body: &[u8]) -> (i64, String) {
        let mut rejected = 0;
        let mut message = String::new();
        for (number, field) in fields(body) {
            if let (1, Field::Bytes(partial)) = (number, field) {
                for (number, field) in fields(partial) {
                    match (number, field) {
                        (1, Field::Varint(v)) => rejected = v as i64,
                        (2, Field::Bytes(b)) => message = String::from_utf8_lossy(b).into_owned(),
                        _ => {}
                    }
                }
            }
        }
        (rejected, message)
    }

    /// `google.rpc.Status.message` of an error answer, when the body is one.
    pub fn status_message(body: &[u8]) -> Option<String> {
        fields(body)
            .into_iter()
            .find_map(|(number, field)| match (number, field) {
                (2, Field::Bytes(b)) => std::str::from_utf8(b).ok().map(str::to_owned),
                _ => None,
            })
    }

    #[cfg(test)]
    pub(super) fn decode_strings(data: &[u8]) -> Vec<(u64, Vec<u8>)> {
        fields(data)
            .into_iter()
            .filter_map(|(n, f)| match f {
                Field::Bytes(b) => Some((n, b.to_vec())),
                _ => None,
            })
            .collect()
    }

    #[cfg(test)]
    pub(super) fn decode_varints(data: &[u8]) -> Vec<(u64, u64)> {
        fields(data)
            .into_iter()
            .filter_map(|(n, f)| match f {
                Field::Varint(v) => Some((n, v)),
                _ => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::{envelope, AlertIds};
    use crate::{Alert, JsonOptions};
    use std::borrow::Cow;
    use vigil_fields::Value;

    fn alert(container: Option<&str>) -> Alert {
        let mut fields = vec![
            (
                "proc.name".to_owned(),
                Some(Value::Str(Cow::Borrowed(b"cat"))),
            ),
            ("proc.pid".to_owned(), Some(Value::U64(42))),
            ("user.loginuid".to_owned(), Some(Value::I64(-1))),
            ("evt.is_open_read".to_owned(), Some(Value::Bool(true))),
            ("container.image.repository".to_owned(), None),
        ];
        if let Some(id) = container {
            fields.push((
                "container.id".to_owned(),
                Some(Value::Str(Cow::Owned(id.as_bytes().to_vec()))),
            ));
        }
        Alert {
            time: 1_700_000_000_000_001_000,
            rule: "Read sensitive file untrusted".into(),
            priority: "Warning".into(),
            source: "syscall".into(),
            tags: vec!["T1555".into(), "host".into()],
            hostname: "node-1".into(),
            output: "Sensitive file opened".into(),
            output_fields: fields,
        }
    }

    fn record(alert: &Alert, id: &str) -> Record {
        Record {
            severity: 4,
            body: envelope(id, alert, &JsonOptions::default()).into(),
        }
    }

    /// The (key, AnyValue bytes) pairs of a message's repeated KeyValue field `field`.
    fn attributes(message: &[u8], field: u64) -> Vec<(String, Vec<u8>)> {
        proto::decode_strings(message)
            .into_iter()
            .filter(|(n, _)| *n == field)
            .map(|(_, kv)| {
                let parts = proto::decode_strings(&kv);
                let key = String::from_utf8(parts[0].1.clone()).unwrap();
                let value = parts.get(1).map(|p| p.1.clone()).unwrap_or_default();
                (key, value)
            })
            .collect()
    }

    fn string_of(any: &[u8]) -> String {
        String::from_utf8(proto::decode_strings(any)[0].1.clone()).unwrap()
    }

    #[test]
    fn one_log_record_per_alert_with_attributes_and_resource() {
        let ids = AlertIds::new();
        let a = alert(None);
        let b = alert(Some("3ad7b26ded6d"));
        let records = [record(&a, &ids.next(a.time)), record(&b, &ids.next(b.time))];
        let mut out = Vec::new();
        let mut skipped = 0;
        encode_request(&records, &mut out, &mut skipped);
        assert_eq!(skipped, 0);
        // Two resources (host, then the container), one record each, in order.
        let resource_logs: Vec<Vec<u8>> = proto::decode_strings(&out)
            .into_iter()
            .map(|(n, b)| {
                assert_eq!(n, 1);
                b
            })
            .collect();
        assert_eq!(resource_logs.len(), 2);
        let resource = |rl: &[u8]| attributes(&proto::decode_strings(rl)[0].1, 1);
        let host: Vec<(String, String)> = resource(&resource_logs[0])
            .into_iter()
            .map(|(k, v)| (k, string_of(&v)))
            .collect();
        assert_eq!(
            host,
            [
                ("service.name".to_owned(), "vigil".to_owned()),
                (
                    "service.version".to_owned(),
                    env!("CARGO_PKG_VERSION").to_owned()
                ),
                ("host.name".to_owned(), "node-1".to_owned()),
            ]
        );
        let container = resource(&resource_logs[1]);
        assert_eq!(container[3].0, "container.id");
        assert_eq!(string_of(&container[3].1), "3ad7b26ded6d");
        // The LogRecord of the first alert.
        let scope_logs = &proto::decode_strings(&resource_logs[0])[1].1;
        let logs: Vec<Vec<u8>> = proto::decode_strings(scope_logs)
            .into_iter()
            .filter(|(n, _)| *n == 2)
            .map(|(_, b)| b)
            .collect();
        assert_eq!(logs.len(), 1);
        let log = &logs[0];
        assert_eq!(proto::decode_varints(log), [(2, 13)]);
        let attrs = attributes(log, 6);
        let keys: Vec<&str> = attrs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "rule",
                "priority",
                "source",
                "hostname",
                "tags",
                "container.image.repository",
                "evt.is_open_read",
                "proc.name",
                "proc.pid",
                "user.loginuid",
                "log.record.uid",
            ]
        );
        let value = |key: &str| attrs.iter().find(|(k, _)| k == key).unwrap().1.clone();
        assert_eq!(string_of(&value("rule")), "Read sensitive file untrusted");
        assert_eq!(proto::decode_varints(&value("proc.pid")), [(3, 42)]);
        assert_eq!(
            proto::decode_varints(&value("user.loginuid")),
            [(3, (-1i64) as u64)]
        );
        assert_eq!(proto::decode_varints(&value("evt.is_open_read")), [(2, 1)]);
        assert!(
            value("container.image.repository").is_empty(),
            "<NA> has no value"
        );
        assert_eq!(string_of(&value("log.record.uid")).len(), 36);
        let body = &proto::decode_strings(log)
            .into_iter()
            .find(|(n, _)| *n == 5)
            .unwrap()
            .1;
        assert_eq!(string_of(body), a.text_line());
    }

    #[test]
    fn foreign_records_are_skipped_and_counted() {
        let mut out = Vec::new();
        let mut skipped = 0;
        let records = [Record {
            severity: 4,
            body: "12:00:00.000000000: Warning not an envelope".into(),
        }];
        encode_request(&records, &mut out, &mut skipped);
        assert_eq!(skipped, 1);
        assert!(out.is_empty());
    }

    #[test]
    fn partial_success_and_status_answers_decode() {
        let mut partial = Vec::new();
        proto::varint_field(&mut partial, 1, 3);
        proto::string_field(&mut partial, 2, "too old");
        let mut response = Vec::new();
        proto::message_field(&mut response, 1, &partial);
        assert_eq!(proto::partial_success(&response), (3, "too old".to_owned()));
        assert_eq!(proto::partial_success(&[]), (0, String::new()));
        let mut status = Vec::new();
        proto::varint_field(&mut status, 1, 3);
        proto::string_field(&mut status, 2, "bad data");
        assert_eq!(proto::status_message(&status).as_deref(), Some("bad data"));
        // Garbage never panics.
        for junk in [&[0xff_u8; 12][..], &[0x0a, 0xff, 0xff, 0xff, 0x0f], &[0x12]] {
            let _ = proto::partial_success(junk);
            let _ = proto::status_message(junk);
        }
    }

    #[test]
    fn endpoint_gets_the_logs_path_once() {
        let mut config = OtlpOutput {
            endpoint: "http://collector:4318/".into(),
            ..OtlpOutput::default()
        };
        assert_eq!(
            OtlpSink::new(&config).unwrap().url(),
            "http://collector:4318/v1/logs"
        );
        config.endpoint = "https://c.example/otlp/v1/logs".into();
        assert_eq!(
            OtlpSink::new(&config).unwrap().url(),
            "https://c.example/otlp/v1/logs"
        );
        config.endpoint = "collector:4318".into();
        assert!(matches!(
            OtlpSink::new(&config),
            Err(OtlpSetupError::BadEndpoint(_))
        ));
        config.endpoint = "http://c:4318".into();
        config.client_cert = "/x.pem".into();
        assert!(matches!(
            OtlpSink::new(&config),
            Err(OtlpSetupError::HalfClientCert("client_key"))
        ));
    }
}

//! `kafka_output`: Falco's JSON alerts to a Kafka topic, with a small producer written here
//! over the Kafka protocol (blocking, one request in flight, run by the output's delivery
//! worker).
//!
//! **What it does.** Bootstrap from `brokers`, negotiate versions (`ApiVersions`), authenticate
//! (SASL PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, over plain TCP or TLS), read the topic's
//! partitions and leaders (`Metadata`), get a producer id (`InitProducerId`: the idempotent
//! producer), and send each batch of alerts as one record batch per partition (magic 2, with
//! the producer id, epoch and per-partition sequence numbers) to the partition leaders with
//! `acks=all` (`Produce`). A batch that fails is sent again with the same sequence numbers, so
//! the broker writes it once even when the first attempt did reach it; an alert is delivered
//! only when every in-sync replica has it. Each message: key = the host name (default: a
//! host's alerts stay in order in one partition, chosen as the Java client does, murmur2) or
//! the chosen field, value = Falco's JSON object, header `vigil.alert.id` = the alert id
//! ([`crate::envelope`]), timestamp = the event time. Compression: `lz4` (the default), `zstd`,
//! `gzip` or `none`.
//!
//! **Faults.** An unreachable broker, a leader change and a broker without enough in-sync
//! replicas are retried (the spool holds the alerts); a missing topic (`unknown_topic`),
//! refused authentication or authorization (`auth`) and a TLS mismatch (`tls`) are clear
//! errors, counted by cause and retried too (a topic may be created, a credential fixed by a
//! reload); a broker that lost the producer's state (`UNKNOWN_PRODUCER_ID`, an out-of-order
//! sequence) gets a new producer id, and the batch goes again (at least once: the alert id lets
//! a consumer drop the copy). A record batch the broker refuses for good (too large, invalid)
//! is dropped and counted (`rejected`).
//!
//! **Why not librdkafka or another crate.** librdkafka is C (and C++ for parts of its build)
//! with OpenSSL and Cyrus SASL for SCRAM: the static and aarch64 builds would carry a second TLS
//! stack and a CMake build. The pure-Rust clients are asynchronous (a tokio runtime in an agent
//! that has none) and lack the idempotent producer. A producer needs six requests of the
//! protocol's stable, documented non-flexible versions; they are written here (`wire`), with
//! ring (already linked for rustls) for SCRAM and pure-Rust lz4 and zstd encoders.

mod sasl;
mod wire;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use serde_json::Value as Json;

use crate::envelope;
use crate::settings::{Compression, KafkaOutput, SaslMechanism};
use crate::sinks::{Batching, Record, Sink, SinkError};
use crate::tls::{ClientCert, ClientTls, TlsSetupError};
use wire::{Dec, Enc, Malformed};

pub use wire::{murmur2, partition_for};

/// Why `kafka_output` could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum KafkaSetupError {
    #[error("kafka_output.brokers is empty")]
    NoBrokers,
    #[error("kafka_output.brokers: `{0}` is not host:port")]
    BadBroker(String),
    #[error("kafka_output.topic is empty")]
    NoTopic,
    #[error("kafka_output.sasl_username is empty (sasl_mechanism is {0})")]
    NoUsername(&'static str),
    #[error("kafka_output.sasl_password_file: cannot read `{path}`: {source}")]
    PasswordFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("kafka_output.{0}: set both client_cert and client_key, or neither")]
    HalfClientCert(&'static str),
    #[error("kafka_output: {0}")]
    Tls(#[from] TlsSetupError),
}

/// Record batch compression codes (the low bits of the batch attributes).
fn codec(compression: Compression) -> i16 {
    match compression {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

mod api {
    pub const PRODUCE: i16 = 0;
    pub const METADATA: i16 = 3;
    pub const SASL_HANDSHAKE: i16 = 17;
    pub const API_VERSIONS: i16 = 18;
    pub const INIT_PRODUCER_ID: i16 = 22;
    pub const SASL_AUTHENTICATE: i16 = 36;
}

/// The versions this producer speaks (non-flexible ones), lowest and highest.
fn our_versions(key: i16) -> (i16, i16) {
    match key {
        api::PRODUCE => (3, 8),
        api::METADATA => (4, 8),
        api::SASL_HANDSHAKE => (1, 1),
        api::SASL_AUTHENTICATE => (0, 1),
        api::INIT_PRODUCER_ID => (0, 1),
        _ => (0, 0),
    }
}

/// Kafka error codes the producer tells apart.
mod code {
    pub const NONE: i16 = 0;
    pub const CORRUPT_MESSAGE: i16 = 2;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const LEADER_NOT_AVAILABLE: i16 = 5;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const REQUEST_TIMED_OUT: i16 = 7;
    pub const MESSAGE_TOO_LARGE: i16 = 10;
    pub const RECORD_LIST_TOO_LARGE: i16 = 18;
    pub const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    pub const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
    pub const ILLEGAL_SASL_STATE: i16 = 34;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    pub const INVALID_PRODUCER_EPOCH: i16 = 47;
    pub const SASL_AUTHENTICATION_FAILED: i16 = 58;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const INVALID_RECORD: i16 = 87;
    pub const PRODUCER_FENCED: i16 = 90;
}

fn error_name(code: i16) -> String {
    let name = match code {
        code::CORRUPT_MESSAGE => "CORRUPT_MESSAGE",
        code::UNKNOWN_TOPIC_OR_PARTITION => "UNKNOWN_TOPIC_OR_PARTITION",
        code::LEADER_NOT_AVAILABLE => "LEADER_NOT_AVAILABLE",
        code::NOT_LEADER_OR_FOLLOWER => "NOT_LEADER_OR_FOLLOWER",
        code::REQUEST_TIMED_OUT => "REQUEST_TIMED_OUT",
        code::MESSAGE_TOO_LARGE => "MESSAGE_TOO_LARGE",
        14 => "COORDINATOR_LOAD_IN_PROGRESS",
        15 => "COORDINATOR_NOT_AVAILABLE",
        code::RECORD_LIST_TOO_LARGE => "RECORD_LIST_TOO_LARGE",
        19 => "NOT_ENOUGH_REPLICAS",
        20 => "NOT_ENOUGH_REPLICAS_AFTER_APPEND",
        code::TOPIC_AUTHORIZATION_FAILED => "TOPIC_AUTHORIZATION_FAILED",
        code::CLUSTER_AUTHORIZATION_FAILED => "CLUSTER_AUTHORIZATION_FAILED",
        code::UNSUPPORTED_SASL_MECHANISM => "UNSUPPORTED_SASL_MECHANISM",
        code::ILLEGAL_SASL_STATE => "ILLEGAL_SASL_STATE",
        code::UNSUPPORTED_VERSION => "UNSUPPORTED_VERSION",
        code::OUT_OF_ORDER_SEQUENCE_NUMBER => "OUT_OF_ORDER_SEQUENCE_NUMBER",
        code::INVALID_PRODUCER_EPOCH => "INVALID_PRODUCER_EPOCH",
        code::SASL_AUTHENTICATION_FAILED => "SASL_AUTHENTICATION_FAILED",
        code::UNKNOWN_PRODUCER_ID => "UNKNOWN_PRODUCER_ID",
        code::INVALID_RECORD => "INVALID_RECORD",
        code::PRODUCER_FENCED => "PRODUCER_FENCED",
        _ => return format!("error code {code}"),
    };
    format!("{name} ({code})")
}

impl From<Malformed> for SinkError {
    fn from(e: Malformed) -> SinkError {
        SinkError::Unavailable(format!("kafka: {e}"))
    }
}

enum Stream {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    fn io(&mut self) -> &mut dyn ReadWrite {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.as_mut(),
        }
    }
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

/// One broker connection, authenticated, with the versions it speaks.
struct Conn {
    stream: Stream,
    addr: String,
    versions: HashMap<i16, (i16, i16)>,
    correlation: i32,
    client_id: String,
}

/// What the connection needs besides the address.
struct ConnSettings {
    client_id: String,
    timeout: Duration,
    tls: Option<Arc<ClientConfig>>,
    sasl: Option<(SaslMechanism, String, String)>,
}

fn io_error(addr: &str, what: &str, e: std::io::Error) -> SinkError {
    if crate::tls::is_tls_error(&e) {
        return SinkError::Refused {
            cause: "tls",
            message: format!("kafka broker {addr}: TLS failed ({what}): {e}"),
        };
    }
    match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => {
            SinkError::Timeout(format!("kafka broker {addr}: {what}: no answer in time"))
        }
        _ => SinkError::Unavailable(format!("kafka broker {addr}: {what}: {e}")),
    }
}

impl Conn {
    fn open(addr: &str, settings: &ConnSettings) -> Result<Conn, SinkError> {
        let (host, _) = split_host_port(addr)
            .ok_or_else(|| SinkError::Fatal(format!("kafka broker `{addr}` is not host:port")))?;
        let targets: Vec<_> = addr
            .to_socket_addrs()
            .map_err(|e| {
                SinkError::Unavailable(format!("kafka broker {addr}: cannot resolve: {e}"))
            })?
            .collect();
        let connect_timeout = settings.timeout.min(Duration::from_secs(5));
        let mut last = None;
        let mut tcp = None;
        for target in targets {
            match TcpStream::connect_timeout(&target, connect_timeout) {
                Ok(s) => {
                    tcp = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let tcp = match (tcp, last) {
            (Some(tcp), _) => tcp,
            (None, Some(e)) => return Err(io_error(addr, "connect", e)),
            (None, None) => {
                return Err(SinkError::Unavailable(format!(
                    "kafka broker {addr}: no address"
                )))
            }
        };
        let _ = tcp.set_nodelay(true);
        tcp.set_read_timeout(Some(settings.timeout))
            .and_then(|()| tcp.set_write_timeout(Some(settings.timeout)))
            .map_err(|e| io_error(addr, "connect", e))?;
        let stream = match &settings.tls {
            Some(config) => {
                let name = ServerName::try_from(host.to_owned()).map_err(|e| {
                    SinkError::Fatal(format!("kafka broker `{addr}`: not a TLS server name: {e}"))
                })?;
                let conn = ClientConnection::new(Arc::clone(config), name).map_err(|e| {
                    SinkError::Refused {
                        cause: "tls",
                        message: format!("kafka broker {addr}: {e}"),
                    }
                })?;
                let mut tls = StreamOwned::new(conn, tcp);
                while tls.conn.is_handshaking() {
                    tls.conn
                        .complete_io(&mut tls.sock)
                        .map_err(|e| io_error(addr, "TLS handshake", e))?;
                }
                Stream::Tls(Box::new(tls))
            }
            None => Stream::Plain(tcp),
        };
        let mut conn = Conn {
            stream,
            addr: addr.to_owned(),
            versions: HashMap::new(),
            correlation: 0,
            client_id: settings.client_id.clone(),
        };
        conn.negotiate()?;
        if let Some((mechanism, username, password)) = &settings.sasl {
            conn.authenticate(*mechanism, username, password)?;
        }
        Ok(conn)
    }

    /// Sends one request and returns its response body (after the correlation id).
    fn request(&mut self, key: i16, version: i16, body: &[u8]) -> Result<Vec<u8>, SinkError> {
        self.correlation = self.correlation.wrapping_add(1);
        let mut header = Enc::default();
        header
            .i32(0)
            .i16(key)
            .i16(version)
            .i32(self.correlation)
            .nullable_string(Some(&self.client_id));
        let mut frame = header.0;
        frame.extend_from_slice(body);
        let size = (frame.len() - 4) as i32;
        frame[..4].copy_from_slice(&size.to_be_bytes());
        let addr = self.addr.clone();
        let io = self.stream.io();
        io.write_all(&frame)
            .and_then(|()| io.flush())
            .map_err(|e| io_error(&addr, "send", e))?;
        let mut size = [0u8; 4];
        io.read_exact(&mut size)
            .map_err(|e| io_error(&addr, "read", e))?;
        let size = i32::from_be_bytes(size);
        if !(4..=64 << 20).contains(&size) {
            return Err(SinkError::Unavailable(format!(
                "kafka broker {addr}: impossible response size {size}"
            )));
        }
        let mut response = vec![0u8; size as usize];
        io.read_exact(&mut response)
            .map_err(|e| io_error(&addr, "read", e))?;
        let correlation = i32::from_be_bytes([response[0], response[1], response[2], response[3]]);
        if correlation != self.correlation {
            return Err(SinkError::Unavailable(format!(
                "kafka broker {addr}: answer out of step (correlation {correlation}, expected {})",
                self.correlation
            )));
        }
        response.drain(..4);
        Ok(response)
    }

    /// The version to use for `key`: the highest both sides speak.
    fn version(&self, key: i16) -> Result<i16, SinkError> {
        let (ours_min, ours_max) = our_versions(key);
        let (theirs_min, theirs_max) = self.versions.get(&key).copied().ok_or_else(|| {
            SinkError::Fatal(format!(
                "kafka broker {} does not offer API {key}",
                self.addr
            ))
        })?;
        let version = ours_max.min(theirs_max);
        if version < ours_min.max(theirs_min) {
            return Err(SinkError::Fatal(format!(
                "kafka broker {} speaks API {key} versions {theirs_min}..{theirs_max}, this \
                 producer {ours_min}..{ours_max}",
                self.addr
            )));
        }
        Ok(version)
    }

    fn negotiate(&mut self) -> Result<(), SinkError> {
        let body = self.request(api::API_VERSIONS, 1, &[])?;
        let mut d = Dec::new(&body);
        let error = d.i16()?;
        if error != code::NONE {
            return Err(SinkError::Fatal(format!(
                "kafka broker {}: ApiVersions: {}",
                self.addr,
                error_name(error)
            )));
        }
        for _ in 0..d.array_len()? {
            let key = d.i16()?;
            let min = d.i16()?;
            let max = d.i16()?;
            self.versions.insert(key, (min, max));
        }
        Ok(())
    }

    fn authenticate(
        &mut self,
        mechanism: SaslMechanism,
        username: &str,
        password: &str,
    ) -> Result<(), SinkError> {
        let auth = |message: String| SinkError::Refused {
            cause: "auth",
            message,
        };
        let mut e = Enc::default();
        e.string(mechanism.as_str());
        let version = self.version(api::SASL_HANDSHAKE)?;
        let body = self.request(api::SASL_HANDSHAKE, version, &e.0)?;
        let mut d = Dec::new(&body);
        let error = d.i16()?;
        if error != code::NONE {
            let mut offered = Vec::new();
            for _ in 0..d.array_len().unwrap_or(0) {
                offered.push(d.string().unwrap_or_default());
            }
            return Err(auth(format!(
                "kafka broker {}: SASL {} refused: {} (the listener offers: {})",
                self.addr,
                mechanism.as_str(),
                error_name(error),
                if offered.is_empty() {
                    "none".to_owned()
                } else {
                    offered.join(", ")
                }
            )));
        }
        let version = self.version(api::SASL_AUTHENTICATE)?;
        let step = |conn: &mut Conn, bytes: &[u8]| -> Result<Vec<u8>, SinkError> {
            let mut e = Enc::default();
            e.bytes(bytes);
            let body = conn.request(api::SASL_AUTHENTICATE, version, &e.0)?;
            let mut d = Dec::new(&body);
            let error = d.i16()?;
            let message = d.nullable_string()?;
            let answer = d.bytes()?;
            if error != code::NONE {
                return Err(auth(format!(
                    "kafka broker {}: authentication of `{username}` refused: {}{}",
                    conn.addr,
                    error_name(error),
                    message.map(|m| format!(": {m}")).unwrap_or_default()
                )));
            }
            Ok(answer)
        };
        match mechanism {
            SaslMechanism::Plain => {
                step(self, &sasl::plain(username, password))?;
            }
            SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
                let addr = self.addr.clone();
                let scram_error =
                    |e: sasl::ScramError| auth(format!("kafka broker {addr}: SCRAM: {e}"));
                let (mut scram, first) =
                    sasl::Scram::start(mechanism, username, password).map_err(scram_error)?;
                let server_first = step(self, &first)?;
                let last = scram.client_final(&server_first).map_err(scram_error)?;
                let server_final = step(self, &last)?;
                scram.verify(&server_final).map_err(scram_error)?;
            }
        }
        Ok(())
    }
}

fn split_host_port(addr: &str) -> Option<(&str, u16)> {
    let (host, port) = addr.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() {
        return None;
    }
    Some((host, port.parse().ok()?))
}

/// The topic as the cluster describes it.
struct Topic {
    /// Leader node of each partition (`-1`: none now).
    leaders: Vec<i32>,
    brokers: HashMap<i32, String>,
}

/// One partition's record batch: partition, encoded batch, record count.
type PartitionBatch = (i32, Vec<u8>, i32);

/// Where a record goes and what it carries.
struct Message<'a> {
    key: Option<String>,
    value: &'a str,
    id: &'a str,
    time_ms: i64,
}

/// The Kafka output.
pub struct KafkaSink {
    bootstrap: Vec<String>,
    topic: String,
    key: String,
    compression: Compression,
    settings: ConnSettings,
    batching: Batching,
    conns: HashMap<String, Conn>,
    meta: Option<Topic>,
    /// Producer id and epoch (`InitProducerId`).
    producer: Option<(i64, i16)>,
    /// The next sequence number of each partition.
    sequences: HashMap<i32, i32>,
}

impl KafkaSink {
    pub fn new(config: &KafkaOutput) -> Result<KafkaSink, KafkaSetupError> {
        if config.brokers.is_empty() {
            return Err(KafkaSetupError::NoBrokers);
        }
        for broker in &config.brokers {
            if split_host_port(broker).is_none() {
                return Err(KafkaSetupError::BadBroker(broker.clone()));
            }
        }
        if config.topic.is_empty() {
            return Err(KafkaSetupError::NoTopic);
        }
        let sasl = match config.sasl_mechanism {
            None => None,
            Some(mechanism) => {
                if config.sasl_username.is_empty() {
                    return Err(KafkaSetupError::NoUsername(mechanism.as_str()));
                }
                let password = if config.sasl_password_file.as_os_str().is_empty() {
                    config.sasl_password.clone()
                } else {
                    crate::otlp::read_secret(&config.sasl_password_file).map_err(|source| {
                        KafkaSetupError::PasswordFile {
                            path: config.sasl_password_file.display().to_string(),
                            source,
                        }
                    })?
                };
                Some((mechanism, config.sasl_username.clone(), password))
            }
        };
        let tls = if config.tls {
            let client = match (
                config.client_cert.as_os_str().is_empty(),
                config.client_key.as_os_str().is_empty(),
            ) {
                (true, true) => None,
                (false, false) => Some(ClientCert {
                    cert: (config.client_cert.clone(), "kafka_output.client_cert"),
                    key: (config.client_key.clone(), "kafka_output.client_key"),
                }),
                (true, false) => return Err(KafkaSetupError::HalfClientCert("client_cert")),
                (false, true) => return Err(KafkaSetupError::HalfClientCert("client_key")),
            };
            let tls = ClientTls {
                insecure: config.insecure,
                ca_files: vec![(config.ca_cert.clone(), "kafka_output.ca_cert")],
                ca_dir: None,
                client,
            };
            Some(Arc::new(tls.client_config()?))
        } else {
            None
        };
        Ok(KafkaSink {
            bootstrap: config.brokers.clone(),
            topic: config.topic.clone(),
            key: config.key.clone(),
            compression: config.compression,
            settings: ConnSettings {
                client_id: config.client_id.clone(),
                timeout: config.timeout,
                tls,
                sasl,
            },
            batching: Batching {
                max_records: usize::try_from(config.batch_max_records)
                    .unwrap_or(usize::MAX)
                    .max(1),
                delay: config.batch_delay,
            },
            conns: HashMap::new(),
            meta: None,
            producer: None,
            sequences: HashMap::new(),
        })
    }

    /// A connection to `addr` (opened when there is none).
    fn conn(&mut self, addr: &str) -> Result<&mut Conn, SinkError> {
        if !self.conns.contains_key(addr) {
            let conn = Conn::open(addr, &self.settings)?;
            self.conns.insert(addr.to_owned(), conn);
        }
        Ok(self.conns.get_mut(addr).expect("just inserted"))
    }

    /// Runs `f` on a connection to any bootstrap broker (the first that answers).
    fn any_broker<T>(
        &mut self,
        mut f: impl FnMut(&mut Conn) -> Result<T, SinkError>,
    ) -> Result<T, SinkError> {
        let mut candidates: Vec<String> = self.conns.keys().cloned().collect();
        for b in &self.bootstrap {
            if !candidates.contains(b) {
                candidates.push(b.clone());
            }
        }
        let mut last = None;
        for addr in candidates {
            let result = self.conn(&addr).and_then(&mut f);
            match result {
                Ok(v) => return Ok(v),
                Err(e) => {
                    self.conns.remove(&addr);
                    // Authentication, TLS and configuration problems are not a reason to try
                    // the next broker: they would answer the same.
                    if matches!(e, SinkError::Refused { .. } | SinkError::Fatal(_)) {
                        return Err(e);
                    }
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| SinkError::Unavailable("kafka: no broker".into())))
    }

    fn refresh_metadata(&mut self) -> Result<(), SinkError> {
        let topic = self.topic.clone();
        let meta = self.any_broker(|conn| {
            let version = conn.version(api::METADATA)?;
            let mut e = Enc::default();
            e.i32(1).string(&topic).bool(false);
            if version >= 8 {
                e.bool(false).bool(false);
            }
            let body = conn.request(api::METADATA, version, &e.0)?;
            parse_metadata(&body, version, &topic, &conn.addr)
        })?;
        self.meta = Some(meta);
        Ok(())
    }

    fn init_producer(&mut self) -> Result<(), SinkError> {
        let producer = self.any_broker(|conn| {
            let version = conn.version(api::INIT_PRODUCER_ID)?;
            let mut e = Enc::default();
            e.nullable_string(None).i32(-1);
            let body = conn.request(api::INIT_PRODUCER_ID, version, &e.0)?;
            let mut d = Dec::new(&body);
            let _throttle = d.i32()?;
            let error = d.i16()?;
            let id = d.i64()?;
            let epoch = d.i16()?;
            match error {
                code::NONE => Ok((id, epoch)),
                code::CLUSTER_AUTHORIZATION_FAILED | code::TOPIC_AUTHORIZATION_FAILED => {
                    Err(SinkError::Refused {
                        cause: "auth",
                        message: format!(
                            "kafka broker {}: not allowed an idempotent producer id: {}",
                            conn.addr,
                            error_name(error)
                        ),
                    })
                }
                other => Err(SinkError::Unavailable(format!(
                    "kafka broker {}: InitProducerId: {}",
                    conn.addr,
                    error_name(other)
                ))),
            }
        })?;
        self.producer = Some(producer);
        self.sequences.clear();
        Ok(())
    }

    /// The message of each record (skipping what is not an envelope: counted as rejected).
    fn messages<'a>(&self, records: &'a [Record]) -> (Vec<Message<'a>>, u64) {
        let mut skipped = 0;
        let mut out = Vec::with_capacity(records.len());
        for record in records {
            let Some(env) = envelope::parse(&record.body) else {
                skipped += 1;
                continue;
            };
            let key = message_key(&self.key, env.json);
            out.push(Message {
                key,
                value: env.json,
                id: env.id,
                time_ms: (env.time / 1_000_000) as i64,
            });
        }
        (out, skipped)
    }

    fn produce(&mut self, messages: &[Message<'_>]) -> Result<(), SinkError> {
        if self.meta.is_none() {
            self.refresh_metadata()?;
        }
        if self.producer.is_none() {
            self.init_producer()?;
        }
        let meta = self.meta.as_ref().expect("refreshed above");
        let partitions = meta.leaders.len();
        // Messages per partition, in order.
        let mut by_partition: Vec<(i32, Vec<&Message<'_>>)> = Vec::new();
        for m in messages {
            let key = m.key.as_deref().unwrap_or_default();
            let p = partition_for(key.as_bytes(), partitions) as i32;
            match by_partition.iter_mut().find(|(q, _)| *q == p) {
                Some((_, list)) => list.push(m),
                None => by_partition.push((p, vec![m])),
            }
        }
        // Partitions per leader.
        let mut by_leader: Vec<(String, Vec<PartitionBatch>)> = Vec::new();
        let (producer_id, epoch) = self.producer.expect("initialised above");
        for (p, list) in &by_partition {
            let leader = meta.leaders[*p as usize];
            let Some(addr) = meta.brokers.get(&leader).cloned() else {
                self.meta = None;
                return Err(SinkError::Unavailable(format!(
                    "kafka: partition {p} of `{}` has no leader now",
                    self.topic
                )));
            };
            let sequence = self.sequences.get(p).copied().unwrap_or(0);
            let batch = record_batch(list, producer_id, epoch, sequence, self.compression)?;
            let count = list.len() as i32;
            match by_leader.iter_mut().find(|(a, _)| *a == addr) {
                Some((_, parts)) => parts.push((*p, batch, count)),
                None => by_leader.push((addr, vec![(*p, batch, count)])),
            }
        }
        let timeout_ms = i32::try_from(self.settings.timeout.as_millis()).unwrap_or(i32::MAX);
        let topic = self.topic.clone();
        let mut done: Vec<(i32, i32)> = Vec::new();
        let mut first_error = None;
        for (addr, parts) in by_leader {
            let result = self.conn(&addr).and_then(|conn| {
                let version = conn.version(api::PRODUCE)?;
                let mut e = Enc::default();
                e.nullable_string(None).i16(-1).i32(timeout_ms);
                e.i32(1).string(&topic).i32(parts.len() as i32);
                for (p, batch, _) in &parts {
                    e.i32(*p).bytes(batch);
                }
                let body = conn.request(api::PRODUCE, version, &e.0)?;
                parse_produce(&body, version)
            });
            match result {
                Ok(errors) => {
                    for (p, _, count) in &parts {
                        let error = errors.get(p).cloned().unwrap_or((code::NONE, None));
                        match error.0 {
                            code::NONE | code::DUPLICATE_SEQUENCE_NUMBER => {
                                done.push((*p, *count));
                            }
                            other => {
                                let e = self.partition_error(*p, other, error.1, &addr);
                                first_error.get_or_insert(e);
                            }
                        }
                    }
                }
                Err(e) => {
                    self.conns.remove(&addr);
                    self.meta = None;
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            // Nothing counts as delivered: the next attempt sends the same records with the same
            // sequence numbers, and the broker keeps one copy of what it already has.
            return Err(e);
        }
        for (p, count) in done {
            let next = self.sequences.entry(p).or_insert(0);
            *next = next.wrapping_add(count) & i32::MAX;
        }
        Ok(())
    }

    fn partition_error(
        &mut self,
        partition: i32,
        error: i16,
        message: Option<String>,
        addr: &str,
    ) -> SinkError {
        let what = format!(
            "kafka broker {addr}: topic `{}` partition {partition}: {}{}",
            self.topic,
            error_name(error),
            message.map(|m| format!(": {m}")).unwrap_or_default()
        );
        match error {
            code::UNKNOWN_TOPIC_OR_PARTITION => {
                self.meta = None;
                SinkError::Refused {
                    cause: "unknown_topic",
                    message: what,
                }
            }
            code::TOPIC_AUTHORIZATION_FAILED | code::CLUSTER_AUTHORIZATION_FAILED => {
                SinkError::Refused {
                    cause: "auth",
                    message: what,
                }
            }
            code::MESSAGE_TOO_LARGE
            | code::RECORD_LIST_TOO_LARGE
            | code::INVALID_RECORD
            | code::CORRUPT_MESSAGE => SinkError::Rejected(what),
            code::OUT_OF_ORDER_SEQUENCE_NUMBER
            | code::UNKNOWN_PRODUCER_ID
            | code::INVALID_PRODUCER_EPOCH
            | code::PRODUCER_FENCED => {
                // The broker lost (or never had) this producer's state: start over with a new
                // producer id; the batch goes again (at least once).
                self.producer = None;
                SinkError::Unavailable(format!("{what}; a new producer id is taken"))
            }
            code::UNSUPPORTED_VERSION => SinkError::Fatal(what),
            _ => {
                self.meta = None;
                SinkError::Unavailable(what)
            }
        }
    }
}

/// The message key for `key` (`hostname`, `rule`, `priority`, `source`, or an output field)
/// from the alert's JSON.
fn message_key(key: &str, json: &str) -> Option<String> {
    if key.is_empty() || key == "none" {
        return None;
    }
    let Ok(Json::Object(alert)) = serde_json::from_str::<Json>(json) else {
        return None;
    };
    let value = match key {
        "hostname" | "rule" | "priority" | "source" => alert.get(key)?,
        field => alert.get("output_fields")?.get(field)?,
    };
    match value {
        Json::Null => None,
        Json::String(s) => Some(s.clone()),
        other => Some(other.to_string()),
    }
}

fn parse_metadata(body: &[u8], version: i16, topic: &str, addr: &str) -> Result<Topic, SinkError> {
    let mut d = Dec::new(body);
    let _throttle = d.i32()?;
    let mut brokers = HashMap::new();
    for _ in 0..d.array_len()? {
        let id = d.i32()?;
        let host = d.string()?;
        let port = d.i32()?;
        let _rack = d.nullable_string()?;
        let address = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        brokers.insert(id, address);
    }
    let _cluster = d.nullable_string()?;
    let _controller = d.i32()?;
    let mut found = None;
    for _ in 0..d.array_len()? {
        let error = d.i16()?;
        let name = d.string()?;
        let _internal = d.i8()?;
        let mut leaders = Vec::new();
        for _ in 0..d.array_len()? {
            let _perror = d.i16()?;
            let index = d.i32()?;
            let leader = d.i32()?;
            if version >= 7 {
                let _epoch = d.i32()?;
            }
            for _ in 0..d.array_len()? {
                d.skip(4)?;
            }
            for _ in 0..d.array_len()? {
                d.skip(4)?;
            }
            if version >= 5 {
                for _ in 0..d.array_len()? {
                    d.skip(4)?;
                }
            }
            leaders.push((index, leader));
        }
        if version >= 8 {
            let _ops = d.i32()?;
        }
        if name == topic {
            found = Some((error, leaders));
        }
    }
    let Some((error, mut leaders)) = found else {
        return Err(SinkError::Unavailable(format!(
            "kafka broker {addr}: the metadata does not mention topic `{topic}`"
        )));
    };
    match error {
        code::NONE => {}
        code::UNKNOWN_TOPIC_OR_PARTITION => {
            return Err(SinkError::Refused {
                cause: "unknown_topic",
                message: format!(
                    "kafka broker {addr}: topic `{topic}` does not exist (kafka_output.topic; \
                     Vigil does not create topics)"
                ),
            })
        }
        code::TOPIC_AUTHORIZATION_FAILED => {
            return Err(SinkError::Refused {
                cause: "auth",
                message: format!("kafka broker {addr}: not allowed to describe topic `{topic}`"),
            })
        }
        other => {
            return Err(SinkError::Unavailable(format!(
                "kafka broker {addr}: topic `{topic}`: {}",
                error_name(other)
            )))
        }
    }
    leaders.sort_unstable();
    if leaders.is_empty() || leaders.iter().enumerate().any(|(i, (p, _))| *p != i as i32) {
        return Err(SinkError::Unavailable(format!(
            "kafka broker {addr}: topic `{topic}` has no usable partition list"
        )));
    }
    Ok(Topic {
        leaders: leaders.into_iter().map(|(_, l)| l).collect(),
        brokers,
    })
}

/// Per partition: (error code, error message) of a Produce response.
fn parse_produce(
    body: &[u8],
    version: i16,
) -> Result<HashMap<i32, (i16, Option<String>)>, SinkError> {
    let mut d = Dec::new(body);
    let mut out = HashMap::new();
    for _ in 0..d.array_len()? {
        let _name = d.string()?;
        for _ in 0..d.array_len()? {
            let index = d.i32()?;
            let error = d.i16()?;
            let _base_offset = d.i64()?;
            let _append_time = d.i64()?;
            if version >= 5 {
                let _log_start = d.i64()?;
            }
            let mut message = None;
            if version >= 8 {
                for _ in 0..d.array_len()? {
                    let _batch_index = d.i32()?;
                    let _text = d.nullable_string()?;
                }
                message = d.nullable_string()?;
            }
            out.insert(index, (error, message));
        }
    }
    Ok(out)
}

/// One record batch (magic 2) of `messages` for the idempotent producer.
fn record_batch(
    messages: &[&Message<'_>],
    producer_id: i64,
    epoch: i16,
    base_sequence: i32,
    compression: Compression,
) -> Result<Vec<u8>, SinkError> {
    let base_time = messages.iter().map(|m| m.time_ms).min().unwrap_or(0);
    let max_time = messages.iter().map(|m| m.time_ms).max().unwrap_or(0);
    let mut records = Enc::default();
    for (i, m) in messages.iter().enumerate() {
        let mut r = Enc::default();
        r.i8(0).varint(m.time_ms - base_time).varint(i as i64);
        match &m.key {
            Some(key) => {
                r.varint(key.len() as i64);
                r.0.extend_from_slice(key.as_bytes());
            }
            None => {
                r.varint(-1);
            }
        }
        r.varint(m.value.len() as i64);
        r.0.extend_from_slice(m.value.as_bytes());
        r.varint(1);
        let header = b"vigil.alert.id";
        r.varint(header.len() as i64);
        r.0.extend_from_slice(header);
        r.varint(m.id.len() as i64);
        r.0.extend_from_slice(m.id.as_bytes());
        records.varint(r.0.len() as i64);
        records.0.extend_from_slice(&r.0);
    }
    let payload = compress(&records.0, compression)?;
    // Everything the CRC covers: attributes onwards.
    let mut tail = Enc::default();
    tail.i16(codec(compression))
        .i32(messages.len() as i32 - 1)
        .i64(base_time)
        .i64(max_time)
        .i64(producer_id)
        .i16(epoch)
        .i32(base_sequence)
        .i32(messages.len() as i32);
    tail.0.extend_from_slice(&payload);
    let crc = wire::crc32c(&tail.0);
    let mut batch = Enc::default();
    batch
        .i64(0)
        .i32((4 + 1 + 4 + tail.0.len()) as i32)
        .i32(-1)
        .i8(2)
        .i32(crc as i32);
    batch.0.extend_from_slice(&tail.0);
    Ok(batch.0)
}

fn compress(data: &[u8], compression: Compression) -> Result<Vec<u8>, SinkError> {
    Ok(match compression {
        Compression::None => data.to_vec(),
        Compression::Gzip => {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            gz.write_all(data)?;
            gz.finish()?
        }
        Compression::Lz4 => {
            let mut lz = lz4_flex::frame::FrameEncoder::new(Vec::new());
            lz.write_all(data)?;
            lz.finish()
                .map_err(|e| SinkError::Io(std::io::Error::other(e)))?
        }
        Compression::Zstd => {
            ruzstd::encoding::compress_to_vec(data, ruzstd::encoding::CompressionLevel::Fastest)
        }
    })
}

impl Sink for KafkaSink {
    fn name(&self) -> &str {
        "kafka"
    }

    fn send(&mut self, record: &Record) -> Result<(), SinkError> {
        self.send_batch(std::slice::from_ref(record)).map(|_| ())
    }

    fn batching(&self) -> Batching {
        self.batching
    }

    fn send_batch(&mut self, records: &[Record]) -> Result<u64, SinkError> {
        let (messages, skipped) = self.messages(records);
        if !messages.is_empty() {
            self.produce(&messages)?;
        }
        Ok(skipped)
    }

    fn reopen(&mut self) -> Result<(), SinkError> {
        self.conns.clear();
        self.meta = None;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_from_the_alert() {
        let json = r#"{"hostname":"node-1","rule":"R","priority":"Warning","source":"syscall",
            "output_fields":{"container.id":"abc","proc.pid":42,"k8s.pod.name":null}}"#;
        assert_eq!(message_key("hostname", json).as_deref(), Some("node-1"));
        assert_eq!(message_key("rule", json).as_deref(), Some("R"));
        assert_eq!(message_key("container.id", json).as_deref(), Some("abc"));
        assert_eq!(message_key("proc.pid", json).as_deref(), Some("42"));
        assert_eq!(message_key("k8s.pod.name", json), None);
        assert_eq!(message_key("fd.name", json), None);
        assert_eq!(message_key("none", json), None);
    }

    #[test]
    fn record_batch_layout() {
        let m = Message {
            key: Some("node-1".into()),
            value: "{\"a\":1}",
            id: "id-1",
            time_ms: 1_700_000_000_000,
        };
        let batch = record_batch(&[&m, &m], 77, 3, 10, Compression::None).unwrap();
        let mut d = Dec::new(&batch);
        assert_eq!(d.i64().unwrap(), 0, "base offset");
        let length = d.i32().unwrap() as usize;
        assert_eq!(length, batch.len() - 12);
        assert_eq!(d.i32().unwrap(), -1, "partition leader epoch");
        assert_eq!(d.i8().unwrap(), 2, "magic");
        let crc = d.i32().unwrap() as u32;
        assert_eq!(crc, wire::crc32c(&batch[21..]));
        assert_eq!(d.i16().unwrap(), 0, "attributes");
        assert_eq!(d.i32().unwrap(), 1, "last offset delta");
        assert_eq!(d.i64().unwrap(), 1_700_000_000_000);
        assert_eq!(d.i64().unwrap(), 1_700_000_000_000);
        assert_eq!(d.i64().unwrap(), 77, "producer id");
        assert_eq!(d.i16().unwrap(), 3, "epoch");
        assert_eq!(d.i32().unwrap(), 10, "base sequence");
        assert_eq!(d.i32().unwrap(), 2, "records");
        // Every codec produces a batch whose CRC covers what follows it.
        for c in [Compression::Gzip, Compression::Lz4, Compression::Zstd] {
            let batch = record_batch(&[&m], 1, 0, 0, c).unwrap();
            let crc = u32::from_be_bytes([batch[17], batch[18], batch[19], batch[20]]);
            assert_eq!(crc, wire::crc32c(&batch[21..]), "{c:?}");
            assert_eq!(i16::from_be_bytes([batch[21], batch[22]]), codec(c));
        }
    }

    #[test]
    fn setup_errors_name_the_key() {
        let mut config = KafkaOutput {
            enabled: true,
            ..KafkaOutput::default()
        };
        assert!(matches!(
            KafkaSink::new(&config),
            Err(KafkaSetupError::NoBrokers)
        ));
        config.brokers = vec!["kafka".into()];
        assert!(matches!(
            KafkaSink::new(&config),
            Err(KafkaSetupError::BadBroker(_))
        ));
        config.brokers = vec!["kafka:9092".into()];
        config.sasl_mechanism = Some(SaslMechanism::ScramSha256);
        assert!(matches!(
            KafkaSink::new(&config),
            Err(KafkaSetupError::NoUsername(_))
        ));
        config.sasl_username = "u".into();
        config.sasl_password_file = "/nonexistent/secret".into();
        let e = KafkaSink::new(&config).err().unwrap();
        assert!(e.to_string().contains("/nonexistent/secret"), "{e}");
        config.sasl_password_file = std::path::PathBuf::new();
        assert!(KafkaSink::new(&config).is_ok());
    }

    #[test]
    fn an_unreachable_broker_is_unavailable() {
        // A port nothing listens on (bound then released).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = KafkaOutput {
            enabled: true,
            brokers: vec![format!("127.0.0.1:{port}")],
            ..KafkaOutput::default()
        };
        let mut sink = KafkaSink::new(&config).unwrap();
        let record = Record {
            severity: 4,
            body: "id 1 {\"hostname\":\"h\"}".into(),
        };
        match sink.send_batch(&[record]) {
            Err(SinkError::Unavailable(m)) => assert!(m.contains("connect"), "{m}"),
            other => panic!("{other:?}"),
        }
    }
}

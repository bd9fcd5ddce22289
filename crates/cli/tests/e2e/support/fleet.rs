//! The fleet's real services, started and stopped by the tests: an OpenTelemetry Collector
//! (`target/tools/bin/vigil-otelcol`, built by `make test-deps` from `tools/otelcol`: the OTLP
//! receiver and the file exporter) and an Apache Kafka broker in KRaft mode, one node, from the
//! jars `make test-deps` fetches into `target/tools/kafka/libs` (run with `java`), with a
//! plaintext listener, a SASL one (PLAIN and SCRAM users) and a TLS one. What arrived is read
//! back the way a consumer of the fleet would: the Collector's file, and Kafka's own console
//! consumer. Each service is killed when its handle is dropped.

use std::collections::BTreeMap;
use std::fs;
use std::io::Read;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{run_ok, text, workspace};

fn tools() -> PathBuf {
    workspace().join("target/tools")
}

/// Waits until something accepts connections on 127.0.0.1:`port` (`child` must stay alive).
fn wait_port(child: &mut Child, port: u16, what: &str, log: &Path) {
    let until = Instant::now() + Duration::from_secs(180);
    loop {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return;
        }
        if let Ok(Some(status)) = child.try_wait() {
            panic!(
                "{what} exited ({status}) before listening on {port}:\n{}",
                fs::read_to_string(log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < until,
            "{what} does not listen on {port} after 3 minutes:\n{}",
            fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn kill(child: &mut Option<Child>) {
    if let Some(mut c) = child.take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// A running Collector writing what it receives to `file`.
pub struct Collector {
    child: Option<Child>,
    pub port: u16,
    pub file: PathBuf,
    config: PathBuf,
    log: PathBuf,
}

impl Collector {
    /// The Collector binary, when `make test-deps` built it (`VIGIL_OTELCOL` overrides).
    pub fn binary() -> Option<PathBuf> {
        if let Some(p) = std::env::var_os("VIGIL_OTELCOL") {
            return Some(PathBuf::from(p)).filter(|p| p.is_file());
        }
        Some(tools().join("bin/vigil-otelcol")).filter(|p| p.is_file())
    }

    /// Starts a Collector with an OTLP/HTTP receiver on `port` (plain HTTP, or HTTPS with
    /// `tls = (cert, key)` PEM files).
    pub fn start(dir: &Path, port: u16, tls: Option<(&Path, &Path)>) -> Collector {
        let file = dir.join("collector-out.jsonl");
        let config = dir.join("collector.yaml");
        let tls = tls
            .map(|(cert, key)| {
                format!(
                    "\n        tls:\n          cert_file: {}\n          key_file: {}",
                    cert.display(),
                    key.display()
                )
            })
            .unwrap_or_default();
        fs::write(
            &config,
            format!(
                "receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: \
                 127.0.0.1:{port}{tls}\n\
                 exporters:\n  file:\n    path: {}\n    flush_interval: 100ms\n\
                 service:\n  telemetry:\n    metrics:\n      level: none\n  \
                 pipelines:\n    logs:\n      receivers: [otlp]\n      exporters: [file]\n",
                file.display()
            ),
        )
        .expect("collector config");
        let mut collector = Collector {
            child: None,
            port,
            file,
            config,
            log: dir.join("collector.log"),
        };
        collector.resume();
        collector
    }

    /// The files of earlier runs (the file exporter truncates its file when it starts), then
    /// the current one.
    fn files(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = (1..)
            .map(|n| self.file.with_extension(format!("jsonl.{n}")))
            .take_while(|p| p.exists())
            .collect();
        files.push(self.file.clone());
        files
    }

    /// Starts it again after [`Collector::stop`] (the same port; what it wrote is kept).
    pub fn resume(&mut self) {
        if self.file.exists() {
            let n = self.files().len();
            fs::rename(&self.file, self.file.with_extension(format!("jsonl.{n}")))
                .expect("keep the Collector's file");
        }
        let binary = Collector::binary().expect("the Collector binary");
        let log = fs::File::create(&self.log).expect("collector log");
        let mut child = Command::new(binary)
            .arg("--config")
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start the Collector");
        wait_port(&mut child, self.port, "the Collector", &self.log);
        self.child = Some(child);
    }

    pub fn stop(&mut self) {
        kill(&mut self.child);
    }

    /// Every LogRecord the Collector wrote so far, in order, each with its resource's
    /// attributes under `"resource"` (attributes as a plain JSON object).
    pub fn records(&self) -> Vec<Value> {
        let mut out = Vec::new();
        let data = self
            .files()
            .iter()
            .map(|f| fs::read_to_string(f).unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n");
        for line in data.lines() {
            let Ok(batch) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            for rl in batch["resourceLogs"].as_array().into_iter().flatten() {
                let resource = attributes(&rl["resource"]["attributes"]);
                for sl in rl["scopeLogs"].as_array().into_iter().flatten() {
                    for record in sl["logRecords"].as_array().into_iter().flatten() {
                        let mut r = record.clone();
                        r["attributes"] = attributes(&record["attributes"]);
                        r["resource"] = resource.clone();
                        out.push(r);
                    }
                }
            }
        }
        out
    }

    /// Waits until at least `n` records arrived (or two minutes passed); returns them all.
    pub fn wait_records(&self, n: usize) -> Vec<Value> {
        let until = Instant::now() + Duration::from_secs(120);
        loop {
            let records = self.records();
            if records.len() >= n || Instant::now() > until {
                return records;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop();
    }
}

/// OTLP/JSON `[{key, value: {stringValue|intValue|boolValue|arrayValue…}}]` as a JSON object
/// of plain values (`intValue` as a number, arrays as arrays, an empty value as `null`).
pub fn attributes(list: &Value) -> Value {
    let mut out = serde_json::Map::new();
    for kv in list.as_array().into_iter().flatten() {
        let key = kv["key"].as_str().unwrap_or_default().to_owned();
        out.insert(key, any_value(&kv["value"]));
    }
    Value::Object(out)
}

fn any_value(v: &Value) -> Value {
    if let Some(s) = v.get("stringValue") {
        return s.clone();
    }
    if let Some(b) = v.get("boolValue") {
        return b.clone();
    }
    if let Some(i) = v.get("intValue") {
        // OTLP/JSON prints 64-bit integers as strings.
        return i
            .as_str()
            .and_then(|s| s.parse::<i64>().ok())
            .map_or(i.clone(), Value::from);
    }
    if let Some(d) = v.get("doubleValue") {
        return d.clone();
    }
    if let Some(a) = v.get("arrayValue") {
        return Value::Array(
            a["values"]
                .as_array()
                .into_iter()
                .flatten()
                .map(any_value)
                .collect(),
        );
    }
    Value::Null
}

/// The Kafka jars, when `make test-deps` fetched them (`VIGIL_KAFKA_LIBS` overrides).
pub fn kafka_libs() -> Option<PathBuf> {
    let dir = std::env::var_os("VIGIL_KAFKA_LIBS")
        .map(PathBuf::from)
        .unwrap_or_else(|| tools().join("kafka/libs"));
    let has_broker = fs::read_dir(&dir)
        .ok()?
        .flatten()
        .any(|e| e.file_name().to_string_lossy().starts_with("kafka_2.13-"));
    (has_broker && which("java")).then_some(dir)
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// The SASL users of the test broker: (mechanism, user, password).
pub const KAFKA_USER: (&str, &str) = ("vigil", "vigil-secret");

/// Ports of the test broker's listeners.
#[derive(Clone, Copy, Debug)]
pub struct KafkaPorts {
    pub plain: u16,
    pub sasl: u16,
    pub tls: u16,
    controller: u16,
}

/// A running single-node KRaft broker.
pub struct Kafka {
    child: Option<Child>,
    pub ports: KafkaPorts,
    libs: PathBuf,
    config: PathBuf,
    log: PathBuf,
    /// The CA that signed the TLS listener's certificate (PEM).
    pub ca: PathBuf,
}

impl Kafka {
    /// Formats a new broker in `dir` and starts it; `topics` are created (name, partitions).
    pub fn start(dir: &Path, topics: &[(&str, u32)]) -> Kafka {
        let libs = kafka_libs().expect("the Kafka jars");
        let ports = KafkaPorts {
            plain: super::free_port(),
            sasl: super::free_port(),
            tls: super::free_port(),
            controller: super::free_port(),
        };
        let pki = dir.join("pki");
        fs::create_dir_all(&pki).expect("pki dir");
        let ca = pki.join("ca.pem");
        let (ca_key, server_key, server_csr, server_crt) = (
            pki.join("ca.key"),
            pki.join("server.key"),
            pki.join("server.csr"),
            pki.join("server.crt"),
        );
        run_ok(
            Command::new("openssl")
                .args([
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-days",
                    "2",
                    "-subj",
                    "/CN=vigil-test-ca",
                    "-keyout",
                ])
                .arg(&ca_key)
                .arg("-out")
                .arg(&ca),
        );
        run_ok(
            Command::new("openssl")
                .args([
                    "req",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-subj",
                    "/CN=127.0.0.1",
                    "-keyout",
                ])
                .arg(&server_key)
                .arg("-out")
                .arg(&server_csr),
        );
        let ext = pki.join("ext.cnf");
        fs::write(&ext, "subjectAltName=IP:127.0.0.1,DNS:localhost\n").expect("ext");
        run_ok(
            Command::new("openssl")
                .args(["x509", "-req", "-days", "2", "-in"])
                .arg(&server_csr)
                .arg("-CA")
                .arg(&ca)
                .arg("-CAkey")
                .arg(&ca_key)
                .args(["-CAcreateserial", "-extfile"])
                .arg(&ext)
                .arg("-out")
                .arg(&server_crt),
        );
        // Kafka's PEM key store: the PKCS#8 key and the certificate in one file.
        let key_store = pki.join("server.pem");
        let pkcs8 = run_ok(
            Command::new("openssl")
                .args(["pkcs8", "-topk8", "-nocrypt", "-in"])
                .arg(&server_key),
        );
        let mut pem = pkcs8.stdout;
        pem.extend(fs::read(&server_crt).expect("server cert"));
        fs::write(&key_store, pem).expect("key store");
        let (user, password) = KAFKA_USER;
        let config = dir.join("server.properties");
        fs::write(
            &config,
            format!(
                "process.roles=broker,controller\nnode.id=1\n\
                 controller.quorum.voters=1@127.0.0.1:{c}\n\
                 listeners=PLAINTEXT://127.0.0.1:{p},SASL_PLAINTEXT://127.0.0.1:{s},SSL://127.0.0.1:{t},CONTROLLER://127.0.0.1:{c}\n\
                 advertised.listeners=PLAINTEXT://127.0.0.1:{p},SASL_PLAINTEXT://127.0.0.1:{s},SSL://127.0.0.1:{t}\n\
                 controller.listener.names=CONTROLLER\ninter.broker.listener.name=PLAINTEXT\n\
                 listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT\n\
                 sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512\n\
                 listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required user_{user}=\"{password}\";\n\
                 listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
                 listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n\
                 listener.name.ssl.ssl.keystore.type=PEM\nlistener.name.ssl.ssl.keystore.location={ks}\n\
                 log.dirs={logs}\nnum.partitions=1\nauto.create.topics.enable=false\n\
                 offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\n\
                 transaction.state.log.min.isr=1\nshare.coordinator.state.topic.replication.factor=1\n\
                 share.coordinator.state.topic.min.isr=1\ngroup.initial.rebalance.delay.ms=0\n",
                p = ports.plain,
                s = ports.sasl,
                t = ports.tls,
                c = ports.controller,
                ks = key_store.display(),
                logs = dir.join("data").display(),
            ),
        )
        .expect("server.properties");
        let classpath = format!("{}/*", libs.display());
        run_ok(
            Command::new("java")
                .args([
                    "-Xmx256m",
                    "-cp",
                    &classpath,
                    "kafka.tools.StorageTool",
                    "format",
                ])
                .args(["-t", "q1Sh-9_ISia_zwGINzRvyQ", "-c"])
                .arg(&config)
                .args(["--add-scram"])
                .arg(format!("SCRAM-SHA-256=[name={user},password={password}]"))
                .args(["--add-scram"])
                .arg(format!("SCRAM-SHA-512=[name={user},password={password}]")),
        );
        let mut kafka = Kafka {
            child: None,
            ports,
            libs,
            config,
            log: dir.join("broker.log"),
            ca,
        };
        kafka.resume();
        for (topic, partitions) in topics {
            kafka.tool(&[
                "org.apache.kafka.tools.TopicCommand",
                "--bootstrap-server",
                &kafka.plain(),
                "--create",
                "--topic",
                topic,
                "--partitions",
                &partitions.to_string(),
                "--replication-factor",
                "1",
            ]);
        }
        kafka
    }

    pub fn plain(&self) -> String {
        format!("127.0.0.1:{}", self.ports.plain)
    }

    /// Starts the broker again after [`Kafka::stop`] (its data stays).
    pub fn resume(&mut self) {
        let log = fs::File::create(&self.log).expect("broker log");
        let mut child = Command::new("java")
            .args([
                "-Xmx512m",
                "-cp",
                &format!("{}/*", self.libs.display()),
                "kafka.Kafka",
            ])
            .arg(&self.config)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .expect("start the Kafka broker");
        wait_port(&mut child, self.ports.plain, "the Kafka broker", &self.log);
        self.child = Some(child);
    }

    pub fn stop(&mut self) {
        kill(&mut self.child);
    }

    /// Runs a Kafka tool class to its end; its standard output.
    fn tool(&self, args: &[&str]) -> String {
        let out = run_ok(
            Command::new("java")
                .args(["-Xmx256m", "-cp", &format!("{}/*", self.libs.display())])
                .args(args),
        );
        text(&out.stdout)
    }

    /// Every message of `topic` from the start, read by Kafka's console consumer until `n`
    /// arrived (or 30 s passed with none new): partition, headers, key, value.
    pub fn consume(&self, topic: &str, n: usize) -> Vec<Message> {
        let mut child = Command::new("java")
            .args(["-Xmx256m", "-cp", &format!("{}/*", self.libs.display())])
            .arg("org.apache.kafka.tools.consumer.ConsoleConsumer")
            .args([
                "--bootstrap-server",
                &self.plain(),
                "--topic",
                topic,
                "--from-beginning",
            ])
            .args(["--max-messages", &n.to_string(), "--timeout-ms", "30000"])
            .args([
                "--property",
                "print.partition=true",
                "--property",
                "print.headers=true",
            ])
            .args(["--property", "print.key=true"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the console consumer");
        let mut out = String::new();
        child
            .stdout
            .take()
            .expect("piped")
            .read_to_string(&mut out)
            .expect("consumer output");
        let _ = child.wait();
        out.lines().filter_map(Message::parse).collect()
    }
}

impl Drop for Kafka {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One message as the console consumer prints it.
#[derive(Clone, Debug)]
pub struct Message {
    pub partition: u32,
    pub headers: BTreeMap<String, String>,
    pub key: Option<String>,
    pub value: Value,
}

impl Message {
    /// `Partition:P<TAB>h1:v1,h2:v2<TAB>KEY<TAB>VALUE`.
    fn parse(line: &str) -> Option<Message> {
        let mut parts = line.splitn(4, '\t');
        let partition = parts.next()?.strip_prefix("Partition:")?.parse().ok()?;
        let headers = parts
            .next()?
            .split(',')
            .filter_map(|h| h.split_once(':'))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let key = parts.next()?;
        let value = serde_json::from_str(parts.next()?).ok()?;
        Some(Message {
            partition,
            headers,
            key: (key != "null").then(|| key.to_owned()),
            value,
        })
    }
}

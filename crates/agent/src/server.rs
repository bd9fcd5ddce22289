//! The embedded web server (Falco's `webserver`): `/healthz` (or `k8s_healthz_endpoint`),
//! `/versions` (Falco's version object, [`crate::versions`]: what falcoctl asks before it
//! installs a rules artifact) and, with `prometheus_metrics_enabled`, `/metrics` in Prometheus
//! text format. A tiny HTTP/1.1
//! server on `std::net`: GET only, one short request per connection. With `ssl_enabled` it
//! speaks HTTPS only (rustls), with the certificate chain and private key of
//! `ssl_certificate` (Falco's format: one PEM file holding both). Vigil binds `127.0.0.1` by
//! default (Falco binds `0.0.0.0`).

use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::ServerConfig;

use vigil_config::Webserver;
use vigil_output::Metrics;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("webserver: cannot listen on `{address}`: {source}")]
    Bind {
        address: String,
        #[source]
        source: std::io::Error,
    },
    /// `ssl_certificate` is missing, unreadable, or not a PEM certificate chain and key.
    #[error("webserver.ssl_certificate `{path}`: {message}")]
    Certificate { path: String, message: String },
}

impl ServerError {
    /// A configuration error (the certificate), as opposed to a busy address.
    pub fn is_config(&self) -> bool {
        matches!(self, ServerError::Certificate { .. })
    }
}

/// The running server; stops when dropped.
pub struct AgentServer {
    addr: SocketAddr,
    tls: bool,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

struct Routes {
    healthz: String,
    /// The `/versions` body, built once (as Falco does).
    versions: String,
    metrics: Option<Metrics>,
    tls: Option<Arc<ServerConfig>>,
    /// `metrics.libbpf_stats_enabled`: refresh the BPF program series on each scrape.
    bpf_stats: bool,
}

fn cert_error(path: &Path, message: impl ToString) -> ServerError {
    ServerError::Certificate {
        path: path.display().to_string(),
        message: message.to_string(),
    }
}

/// The TLS configuration from Falco's `ssl_certificate`: one PEM file with the certificate
/// chain (server certificate first) and its private key.
pub fn tls_config(path: &Path) -> Result<ServerConfig, ServerError> {
    let pem = fs::read(path).map_err(|e| cert_error(path, e))?;
    let certs: Vec<CertificateDer<'static>> = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<_, _>>()
        .map_err(|e| cert_error(path, format!("not a PEM file: {e}")))?;
    if certs.is_empty() {
        return Err(cert_error(
            path,
            "no certificate found (expected a PEM `CERTIFICATE` block)",
        ));
    }
    let key: PrivateKeyDer<'static> = rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|e| cert_error(path, format!("not a PEM file: {e}")))?
        .ok_or_else(|| {
            cert_error(
                path,
                "no private key found (expected a PEM `PRIVATE KEY` block in the same file)",
            )
        })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| cert_error(path, e))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            cert_error(
                path,
                format!("certificate and key do not make a TLS identity: {e}"),
            )
        })
}

/// A server whose socket is bound and listening but that serves nothing yet: binding may need
/// privileges (a port below 1024) that the agent gives up before it starts threads, and
/// serving needs a thread ([`BoundServer::serve`]).
pub struct BoundServer {
    listener: TcpListener,
    addr: SocketAddr,
    routes: Routes,
}

impl BoundServer {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Starts the serving thread.
    pub fn serve(self) -> Result<AgentServer, ServerError> {
        let BoundServer {
            listener,
            addr,
            routes,
        } = self;
        let scheme = if routes.tls.is_some() {
            "https"
        } else {
            "http"
        };
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("vigil-web".into())
            .spawn(move || serve(listener, routes, thread_stop))
            .map_err(|source| ServerError::Bind {
                address: addr.to_string(),
                source,
            })?;
        log::info!("webserver listening on {scheme}://{addr}");
        Ok(AgentServer {
            addr,
            tls: scheme == "https",
            stop,
            thread: Some(thread),
        })
    }
}

impl AgentServer {
    /// Listens on `listen_address:listen_port` (port 0: any free port; see [`Self::addr`])
    /// and serves: [`AgentServer::bind`], then [`BoundServer::serve`].
    pub fn start(
        config: &Webserver,
        metrics: &Metrics,
        bpf_stats: bool,
    ) -> Result<AgentServer, ServerError> {
        Self::bind(config, metrics, bpf_stats)?.serve()
    }

    /// Reads the certificate (with `ssl_enabled`) and binds `listen_address:listen_port`,
    /// without serving yet. `bpf_stats` (Falco's `metrics.libbpf_stats_enabled`): `/metrics`
    /// includes the statistics of the agent's BPF programs, read at each scrape.
    pub fn bind(
        config: &Webserver,
        metrics: &Metrics,
        bpf_stats: bool,
    ) -> Result<BoundServer, ServerError> {
        let tls = if config.ssl_enabled {
            Some(Arc::new(tls_config(&config.ssl_certificate)?))
        } else {
            None
        };
        let address = if config.listen_address.contains(':') {
            format!("[{}]:{}", config.listen_address, config.listen_port)
        } else {
            format!("{}:{}", config.listen_address, config.listen_port)
        };
        let bind_err = |source| ServerError::Bind {
            address: address.clone(),
            source,
        };
        // Blocking: the serving thread sleeps in accept until a client (or the stop's own
        // connection, `halt`) comes; it wakes for nothing else.
        let listener = TcpListener::bind(&address).map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        let routes = Routes {
            healthz: config.k8s_healthz_endpoint.clone(),
            versions: crate::versions::Versions::current().to_json().to_string(),
            metrics: config.prometheus_metrics_enabled.then(|| metrics.clone()),
            tls,
            bpf_stats,
        };
        Ok(BoundServer {
            listener,
            addr,
            routes,
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL scheme served: `https` with `ssl_enabled`, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls {
            "https"
        } else {
            "http"
        }
    }

    /// Stops serving and joins the thread.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let Some(thread) = self.thread.take() else {
            return;
        };
        // The thread blocks in accept: a connection of our own wakes it to see the flag. If
        // even that cannot connect, the thread is left to end with the process.
        let mut target = self.addr;
        if target.ip().is_unspecified() {
            target.set_ip(match target {
                SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
            });
        }
        if TcpStream::connect_timeout(&target, Duration::from_secs(1)).is_ok() {
            let _ = thread.join();
        }
    }
}

impl Drop for AgentServer {
    fn drop(&mut self) {
        self.halt();
    }
}

fn serve(listener: TcpListener, routes: Routes, stop: Arc<AtomicBool>) {
    loop {
        let accepted = listener.accept();
        if stop.load(Ordering::SeqCst) {
            return;
        }
        match accepted {
            Ok((stream, _)) => {
                if let Err(e) = handle(stream, &routes) {
                    log::debug!("webserver: {e}");
                }
            }
            Err(e) => {
                log::warn!("webserver: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// The longest request line or header line read.
const MAX_LINE: usize = 8192;

fn handle(stream: TcpStream, routes: &Routes) -> std::io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    match &routes.tls {
        // A client that does not speak TLS fails the handshake (on the first read) and gets
        // no HTTP answer.
        Some(config) => {
            let conn =
                rustls::ServerConnection::new(Arc::clone(config)).map_err(std::io::Error::other)?;
            let mut tls = rustls::StreamOwned::new(conn, stream);
            respond(&mut tls, routes)?;
            tls.conn.send_close_notify();
            tls.flush()
        }
        None => {
            let mut stream = stream;
            respond(&mut stream, routes)
        }
    }
}

/// Reads one request from `stream` and writes the answer.
fn respond<S: Read + Write>(stream: &mut S, routes: &Routes) -> std::io::Result<()> {
    let mut reader = BufReader::new(&mut *stream).take(64 * 1024);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    // Skip the headers; the routes need none.
    loop {
        let mut line = String::new();
        let n = reader.read_line(&mut line)?;
        if n == 0 || line == "\r\n" || line == "\n" || line.len() > MAX_LINE {
            break;
        }
    }
    let mut parts = request.split_whitespace();
    let method = parts.next().unwrap_or("");
    let target = parts.next().unwrap_or("");
    let path = target.split('?').next().unwrap_or("");
    let (status, content_type, body) = if method != "GET" && method != "HEAD" {
        (
            "405 Method Not Allowed",
            "text/plain",
            "method not allowed\n".to_owned(),
        )
    } else if path == routes.healthz {
        (
            "200 OK",
            "application/json",
            "{\"status\": \"ok\"}".to_owned(),
        )
    } else if path == "/versions" {
        ("200 OK", "application/json", routes.versions.clone())
    } else if let (Some(metrics), "/metrics") = (&routes.metrics, path) {
        metrics.sample_process();
        if routes.bpf_stats {
            crate::bpf::publish(metrics, &crate::bpf::own_programs());
        }
        (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        )
    } else {
        ("404 Not Found", "text/plain", "not found\n".to_owned())
    };
    drop(reader);
    write!(
        stream,
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    if method != "HEAD" {
        stream.write_all(body.as_bytes())?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(addr: SocketAddr, path: &str) -> (String, String) {
        let mut s = TcpStream::connect(addr).unwrap();
        write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        (head.lines().next().unwrap().to_owned(), body.to_owned())
    }

    fn config(metrics: bool) -> Webserver {
        Webserver {
            listen_port: 0,
            prometheus_metrics_enabled: metrics,
            ..Webserver::default()
        }
    }

    #[test]
    fn serves_healthz_and_parseable_metrics() {
        let metrics = Metrics::new();
        metrics.set("falcosecurity_scap_n_evts_total", &[], 42.0);
        metrics.add(
            "vigil_output_dropped_total",
            &[("sink", "http"), ("reason", "spool_full")],
            3.0,
        );
        let server = AgentServer::start(&config(true), &metrics, false).unwrap();
        assert!(server.addr().ip().is_loopback(), "loopback by default");
        let (status, body) = get(server.addr(), "/healthz");
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(body, "{\"status\": \"ok\"}");
        let (status, body) = get(server.addr(), "/metrics");
        assert_eq!(status, "HTTP/1.1 200 OK");
        let lines = body.lines().map(|l| Ok(l.to_owned()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
        let find = |name: &str| {
            scrape
                .samples
                .iter()
                .find(|s| s.metric == name)
                .unwrap_or_else(|| panic!("{name} missing:\n{body}"))
        };
        assert!(
            matches!(find("falcosecurity_scap_n_evts_total").value, prometheus_parse::Value::Counter(v) if v == 42.0)
        );
        let dropped = find("vigil_output_dropped_total");
        assert_eq!(dropped.labels.get("reason"), Some("spool_full"));
        assert!(
            matches!(find("falcosecurity_falco_memory_rss_bytes").value, prometheus_parse::Value::Gauge(v) if v > 0.0),
            "sampled at each scrape"
        );
        assert_eq!(get(server.addr(), "/nope").0, "HTTP/1.1 404 Not Found");
        server.stop();
    }

    /// `/versions` is served with or without metrics (as in Falco), with exactly Falco
    /// 0.44.1's keys (`versions_info::as_json`) and the engine version rules are checked
    /// against.
    #[test]
    fn serves_falcos_versions_object() {
        let metrics = Metrics::new();
        let server = AgentServer::start(&config(false), &metrics, false).unwrap();
        let (status, body) = get(server.addr(), "/versions");
        assert_eq!(status, "HTTP/1.1 200 OK");
        let json: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        let mut keys: Vec<&str> = json
            .as_object()
            .expect("an object")
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "default_driver_version",
                "driver_api_version",
                "driver_schema_version",
                "engine_version",
                "engine_version_semver",
                "falco_version",
                "libs_version",
                "plugin_api_version",
                "plugin_versions",
            ]
        );
        assert_eq!(
            json["engine_version_semver"],
            vigil_rules::version_text(vigil_rules::ENGINE_VERSION)
        );
        server.stop();
    }

    #[test]
    fn metrics_need_prometheus_enabled_and_a_busy_port_is_named() {
        let metrics = Metrics::new();
        let server = AgentServer::start(&config(false), &metrics, false).unwrap();
        assert_eq!(server.scheme(), "http");
        assert_eq!(get(server.addr(), "/metrics").0, "HTTP/1.1 404 Not Found");
        let taken = server.addr().port();
        let mut c = config(false);
        c.listen_port = taken;
        let e = AgentServer::start(&c, &metrics, false).err().unwrap();
        assert!(!e.is_config());
        let e = e.to_string();
        assert!(e.contains(&format!("127.0.0.1:{taken}")), "{e}");
    }

    #[test]
    fn a_bound_server_listens_before_it_serves() {
        let metrics = Metrics::new();
        let bound = AgentServer::bind(&config(false), &metrics, false).unwrap();
        let addr = bound.addr();
        assert_ne!(addr.port(), 0, "port 0 resolves to the bound port");
        // Bound and listening: the port is taken, and a client connects (its request waits
        // in the backlog until the thread serves it).
        let mut c = config(false);
        c.listen_port = addr.port();
        assert!(
            AgentServer::bind(&c, &metrics, false).is_err(),
            "port taken"
        );
        let mut early = TcpStream::connect(addr).unwrap();
        early
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        write!(early, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let server = bound.serve().unwrap();
        assert_eq!(server.addr(), addr);
        let mut answer = String::new();
        early.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        server.stop();
    }

    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

    /// A self-signed certificate for 127.0.0.1: (certificate PEM, key PEM, certificate DER).
    fn self_signed() -> (String, String, CertificateDer<'static>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().clone())
    }

    /// One HTTPS GET trusting only `root`: (status line, body), or the TLS error.
    fn https_get(
        addr: SocketAddr,
        root: &CertificateDer<'static>,
        path: &str,
    ) -> std::io::Result<(String, String)> {
        let mut roots = RootCertStore::empty();
        roots.add(root.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = ServerName::try_from("127.0.0.1").unwrap();
        let conn = ClientConnection::new(Arc::new(client), name).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut tls = StreamOwned::new(conn, tcp);
        write!(tls, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")?;
        let mut text = String::new();
        tls.read_to_string(&mut text)?;
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        Ok((head.lines().next().unwrap().to_owned(), body.to_owned()))
    }

    #[test]
    fn https_with_a_falco_pem_serves_healthz_and_metrics_and_not_plain_http() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, der) = self_signed();
        // Falco's format: certificate and key in one file.
        let pem = dir.path().join("falco.pem");
        fs::write(&pem, format!("{cert}{key}")).unwrap();
        let metrics = Metrics::new();
        metrics.set("falcosecurity_scap_n_evts_total", &[], 7.0);
        let mut c = config(true);
        c.ssl_enabled = true;
        c.ssl_certificate = pem;
        let server = AgentServer::start(&c, &metrics, false).unwrap();
        assert_eq!(server.scheme(), "https");
        let (status, body) = https_get(server.addr(), &der, "/healthz").unwrap();
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert_eq!(body, "{\"status\": \"ok\"}");
        let (status, body) = https_get(server.addr(), &der, "/metrics").unwrap();
        assert_eq!(status, "HTTP/1.1 200 OK");
        let lines = body.lines().map(|l| Ok(l.to_owned()));
        let scrape = prometheus_parse::Scrape::parse(lines).unwrap();
        assert!(scrape
            .samples
            .iter()
            .any(|s| s.metric == "falcosecurity_scap_n_evts_total"));
        // A client that does not trust the certificate refuses the server.
        let (_, _, other) = self_signed();
        assert!(https_get(server.addr(), &other, "/healthz").is_err());
        // Plain HTTP on the TLS port gets no HTTP answer.
        let mut s = TcpStream::connect(server.addr()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(s, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        assert!(
            !answer.starts_with(b"HTTP/") && !String::from_utf8_lossy(&answer).contains("ok"),
            "plain HTTP was served: {:?}",
            String::from_utf8_lossy(&answer)
        );
        // The server is still up for TLS clients after the bad one.
        assert!(https_get(server.addr(), &der, "/healthz").is_ok());
        server.stop();
    }

    #[test]
    fn bad_ssl_certificate_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key, _) = self_signed();
        let (_, other_key, _) = self_signed();
        let metrics = Metrics::new();
        let cases: Vec<(&str, Option<String>, &str)> = vec![
            ("missing.pem", None, "No such file"),
            (
                "garbage.pem",
                Some("hello\n".into()),
                "no certificate found",
            ),
            ("cert-only.pem", Some(cert.clone()), "no private key found"),
            ("key-only.pem", Some(key.clone()), "no certificate found"),
            (
                "mismatch.pem",
                Some(format!("{cert}{other_key}")),
                "do not make a TLS identity",
            ),
        ];
        for (name, content, want) in cases {
            let path = dir.path().join(name);
            if let Some(text) = content {
                fs::write(&path, text).unwrap();
            }
            let mut c = config(false);
            c.ssl_enabled = true;
            c.ssl_certificate = path.clone();
            let e = AgentServer::start(&c, &metrics, false).err().unwrap();
            assert!(e.is_config());
            let e = e.to_string();
            assert!(
                e.contains("webserver.ssl_certificate")
                    && e.contains(&path.display().to_string())
                    && e.contains(want),
                "{name}: {e}"
            );
        }
    }
}

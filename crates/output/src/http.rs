//! Falco's `http_output`: one POST per alert (the formatted alert as the body, as Falcosidekick
//! expects), over HTTP or HTTPS (rustls), with Falco's TLS settings: `insecure`, `ca_cert`,
//! `ca_bundle`, `ca_path`, `mtls` with `client_cert`/`client_key`, and `compress_uploads`
//! (gzip body, `Content-Encoding: gzip`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use crate::settings::HttpOutput;
use crate::tls::{ClientCert, ClientTls, TlsSetupError};
use rustls::ClientConfig;

use crate::sinks::{Record, Sink, SinkError};

/// The longest wait for the connection itself (shorter when `http_output.timeout` is).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Why the HTTP output could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum HttpSetupError {
    #[error("http_output.url is empty")]
    NoUrl,
    #[error("http_output.url `{0}` is not an http:// or https:// URL")]
    BadUrl(String),
    #[error("cannot read {what} `{path}`: {message}")]
    Pem {
        what: &'static str,
        path: String,
        message: String,
    },
    #[error("invalid TLS settings: {0}")]
    Tls(String),
}

/// The HTTP(S) output.
pub struct HttpSink {
    agent: ureq::Agent,
    url: String,
    user_agent: String,
    content_type: &'static str,
    compress: bool,
    echo: bool,
}

impl HttpSink {
    /// Builds the client from Falco's `http_output` settings; `content_type` follows
    /// `json_output` (`application/json` or `text/plain`).
    pub fn new(
        config: &HttpOutput,
        content_type: &'static str,
    ) -> Result<HttpSink, HttpSetupError> {
        if config.url.is_empty() {
            return Err(HttpSetupError::NoUrl);
        }
        let lower = config.url.to_ascii_lowercase();
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(HttpSetupError::BadUrl(config.url.clone()));
        }
        let mut builder = ureq::AgentBuilder::new()
            .timeout_connect(config.timeout.min(CONNECT_TIMEOUT))
            .timeout(config.timeout)
            .user_agent(&config.user_agent);
        if !config.keep_alive {
            builder = builder.max_idle_connections(0);
        }
        if lower.starts_with("https://") {
            builder = builder.tls_config(Arc::new(tls_config(config)?));
        }
        Ok(HttpSink {
            agent: builder.build(),
            url: config.url.clone(),
            user_agent: config.user_agent.clone(),
            content_type,
            compress: config.compress_uploads,
            echo: config.echo,
        })
    }
}

/// The rustls client configuration for Falco's TLS settings.
pub fn tls_config(config: &HttpOutput) -> Result<ClientConfig, HttpSetupError> {
    let tls = ClientTls {
        insecure: config.insecure,
        ca_files: vec![
            (config.ca_cert.clone(), "http_output.ca_cert"),
            (config.ca_bundle.clone(), "http_output.ca_bundle"),
        ],
        ca_dir: Some((config.ca_path.clone(), "http_output.ca_path")),
        client: config.mtls.then(|| ClientCert {
            cert: (config.client_cert.clone(), "http_output.client_cert"),
            key: (config.client_key.clone(), "http_output.client_key"),
        }),
    };
    tls.client_config().map_err(|e| match e {
        TlsSetupError::Pem {
            what,
            path,
            message,
        } => HttpSetupError::Pem {
            what,
            path,
            message,
        },
        TlsSetupError::Tls(message) => HttpSetupError::Tls(message),
    })
}

impl Sink for HttpSink {
    fn name(&self) -> &str {
        "http"
    }
    fn send(&mut self, record: &Record) -> Result<(), SinkError> {
        let request = self
            .agent
            .post(&self.url)
            .set("Content-Type", self.content_type)
            .set("User-Agent", &self.user_agent);
        let result = if self.compress {
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(record.body.as_bytes())?;
            let body = gz.finish()?;
            request.set("Content-Encoding", "gzip").send_bytes(&body)
        } else {
            request.send_bytes(record.body.as_bytes())
        };
        match result {
            Ok(response) => {
                if self.echo {
                    let status = response.status();
                    let text = response.into_string().unwrap_or_default();
                    log::info!("http output: {status} {text}");
                }
                Ok(())
            }
            Err(ureq::Error::Status(code, _)) => Err(SinkError::Unavailable(format!(
                "`{}` answered HTTP {code}",
                self.url
            ))),
            Err(e) if timed_out(&e) => Err(SinkError::Timeout(format!("POST `{}`: {e}", self.url))),
            Err(e) => Err(SinkError::Unavailable(format!("POST `{}`: {e}", self.url))),
        }
    }
}

/// Whether a failed request ran out of time (connecting, sending or waiting for the answer):
/// an I/O error of kind `TimedOut` (or `WouldBlock`, what a socket read timeout gives on
/// Linux) somewhere in the error's source chain.
pub(crate) fn timed_out(error: &ureq::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            ) {
                return true;
            }
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read};
    use std::net::TcpListener;

    /// Accepts one request and returns (headers, body), answering `status`.
    fn serve_one(listener: &TcpListener, status: u16) -> (String, Vec<u8>) {
        let (stream, _) = listener.accept().unwrap();
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut headers = String::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            if line == "\r\n" || line.is_empty() {
                break;
            }
            headers.push_str(&line);
        }
        let len: usize = headers
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        let mut stream = stream;
        write!(
            stream,
            "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        (headers, body)
    }

    fn config(url: String) -> HttpOutput {
        HttpOutput {
            enabled: true,
            url,
            user_agent: "vigil-test/1".into(),
            ..HttpOutput::default()
        }
    }

    #[test]
    fn posts_json_with_headers_and_gzip() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        let mut cfg = config(url.clone());
        let server = std::thread::spawn(move || {
            let a = serve_one(&listener, 200);
            let b = serve_one(&listener, 200);
            let c = serve_one(&listener, 503);
            (a, b, c)
        });
        let mut sink = HttpSink::new(&cfg, "application/json").unwrap();
        let record = Record {
            severity: 4,
            body: r#"{"rule":"R"}"#.into(),
        };
        sink.send(&record).unwrap();
        cfg.compress_uploads = true;
        let mut gz_sink = HttpSink::new(&cfg, "application/json").unwrap();
        gz_sink.send(&record).unwrap();
        assert!(matches!(sink.send(&record), Err(SinkError::Unavailable(_))));
        let ((h1, b1), (h2, b2), _) = server.join().unwrap();
        let h1 = h1.to_ascii_lowercase();
        assert!(h1.starts_with("post / http/1.1"), "{h1}");
        assert!(h1.contains("content-type: application/json"), "{h1}");
        assert!(h1.contains("user-agent: vigil-test/1"), "{h1}");
        assert_eq!(b1, br#"{"rule":"R"}"#);
        assert!(h2.to_ascii_lowercase().contains("content-encoding: gzip"));
        let mut unzipped = String::new();
        flate2::read::GzDecoder::new(&b2[..])
            .read_to_string(&mut unzipped)
            .unwrap();
        assert_eq!(unzipped, r#"{"rule":"R"}"#);
    }

    /// A loopback server that accepts connections, reads nothing and never answers; counts the
    /// connections. Stops accepting when the returned flag is set (and one more connects).
    fn silent_server() -> (
        String,
        Arc<std::sync::atomic::AtomicUsize>,
        Arc<std::sync::atomic::AtomicBool>,
    ) {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/alerts", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (count, done) = (accepted.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            for stream in listener.incoming() {
                if done.load(Ordering::SeqCst) {
                    break;
                }
                count.fetch_add(1, Ordering::SeqCst);
                held.push(stream);
            }
        });
        (url, accepted, stop)
    }

    #[test]
    fn unanswered_requests_time_out_and_are_given_up_after_max_consecutive_timeouts() {
        use crate::delivery::{reason, Delivery, DeliveryOptions};
        use crate::metrics::Metrics;
        use std::sync::atomic::Ordering;
        let (url, accepted, stop) = silent_server();
        let mut cfg = config(url.clone());
        cfg.timeout = Duration::from_millis(200);
        cfg.max_consecutive_timeouts = 1;
        let mut sink = HttpSink::new(&cfg, "application/json").unwrap();
        let record = Record {
            severity: 4,
            body: r#"{"rule":"R"}"#.into(),
        };
        assert!(
            matches!(sink.send(&record), Err(SinkError::Timeout(_))),
            "an unanswered POST is a timeout"
        );
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while accepted.load(Ordering::SeqCst) < 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1);
        // Through the delivery worker, as the agent runs it: each alert is tried twice (one
        // timeout ignored), then given up and counted.
        let metrics = Metrics::new();
        let options = DeliveryOptions {
            max_consecutive_timeouts: Some(cfg.max_consecutive_timeouts),
            ..DeliveryOptions::default()
        };
        let d = Delivery::start(Box::new(sink), options, &metrics).unwrap();
        for _ in 0..3 {
            d.enqueue(record.clone());
        }
        let report = d.shutdown(std::time::Instant::now() + Duration::from_secs(60));
        // The server thread may not have taken the last connection off the backlog yet.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while accepted.load(Ordering::SeqCst) < 1 + 3 * 2 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::SeqCst);
        assert_eq!(accepted.load(Ordering::SeqCst), 1 + 3 * 2, "attempts");
        assert_eq!(report.delivered, 0);
        assert_eq!(report.timeouts, 6);
        assert_eq!(report.dropped.get(reason::TIMEOUT), Some(&3), "{report:?}");
        assert_eq!(
            metrics.get(
                "vigil_output_dropped_total",
                &[("sink", "http"), ("reason", "timeout")]
            ),
            3.0
        );
    }

    #[test]
    fn refused_connection_is_unavailable() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/", listener.local_addr().unwrap());
        drop(listener);
        let mut sink = HttpSink::new(&config(url), "text/plain").unwrap();
        let record = Record {
            severity: 1,
            body: "x".into(),
        };
        assert!(matches!(sink.send(&record), Err(SinkError::Unavailable(_))));
    }

    #[test]
    fn setup_errors_name_the_setting() {
        assert!(matches!(
            HttpSink::new(&config(String::new()), "text/plain"),
            Err(HttpSetupError::NoUrl)
        ));
        let e = HttpSink::new(&config("ftp://x".into()), "text/plain")
            .err()
            .unwrap();
        assert!(e.to_string().contains("ftp://x"));
        let mut cfg = config("https://127.0.0.1:1/".into());
        cfg.ca_cert = "/nonexistent/ca.pem".into();
        let e = HttpSink::new(&cfg, "text/plain").err().unwrap().to_string();
        assert!(
            e.contains("http_output.ca_cert") && e.contains("/nonexistent/ca.pem"),
            "{e}"
        );
        let mut cfg = config("https://127.0.0.1:1/".into());
        cfg.mtls = true;
        cfg.client_cert = "/nonexistent/c.crt".into();
        let e = HttpSink::new(&cfg, "text/plain").err().unwrap().to_string();
        assert!(e.contains("http_output.client_cert"), "{e}");
        // Insecure and default-root configurations build.
        let mut cfg = config("https://127.0.0.1:1/".into());
        cfg.insecure = true;
        assert!(HttpSink::new(&cfg, "text/plain").is_ok());
        cfg.insecure = false;
        cfg.ca_path = "/nonexistent".into();
        assert!(HttpSink::new(&cfg, "text/plain").is_ok());
    }
}

#[cfg(test)]
mod tls_tests {
    use super::*;
    use rustls::pki_types::PrivateKeyDer;
    use rustls::RootCertStore;
    use std::fs;
    use std::io::{BufRead, BufReader, Read};
    use std::net::TcpListener;

    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    use rustls::server::WebPkiClientVerifier;
    use rustls::ServerConfig;

    struct Pki {
        dir: tempfile::TempDir,
        server: ServerConfig,
    }

    /// A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files; the
    /// server requires a client certificate from the CA when `mtls`.
    fn pki(mtls: bool) -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let server_key = KeyPair::generate().unwrap();
        let server = CertificateParams::new(vec!["127.0.0.1".to_owned()])
            .unwrap()
            .signed_by(&server_key, &ca, &ca_key)
            .unwrap();
        let client_key = KeyPair::generate().unwrap();
        let client = CertificateParams::new(vec!["vigil-client".to_owned()])
            .unwrap()
            .signed_by(&client_key, &ca, &ca_key)
            .unwrap();
        fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        fs::write(dir.path().join("client.crt"), client.pem()).unwrap();
        fs::write(dir.path().join("client.key"), client_key.serialize_pem()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap();
        let builder = if mtls {
            let mut roots = RootCertStore::empty();
            roots.add(ca.der().clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        } else {
            builder.with_no_client_auth()
        };
        let key = PrivateKeyDer::try_from(server_key.serialize_der()).unwrap();
        let server = builder
            .with_single_cert(vec![server.der().clone()], key)
            .unwrap();
        Pki { dir, server }
    }

    /// Serves TLS connections until one request arrives; returns its body (or `None` when the
    /// handshakes failed `attempts` times).
    fn serve(listener: TcpListener, config: ServerConfig, attempts: usize) -> Option<String> {
        let config = Arc::new(config);
        for _ in 0..attempts {
            let (mut tcp, _) = listener.accept().unwrap();
            let mut conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
            let mut reader = BufReader::new(&mut tls);
            let mut len = 0usize;
            let mut ok = true;
            loop {
                let mut line = String::new();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => {
                        ok = false;
                        break;
                    }
                    Ok(_) if line == "\r\n" => break,
                    Ok(_) => {
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            len = v.trim().parse().unwrap();
                        }
                    }
                }
            }
            if !ok {
                continue;
            }
            let mut body = vec![0; len];
            reader.read_exact(&mut body).unwrap();
            tls.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .unwrap();
            tls.flush().unwrap();
            return Some(String::from_utf8(body).unwrap());
        }
        None
    }

    fn record() -> Record {
        Record {
            severity: 4,
            body: r#"{"rule":"R"}"#.into(),
        }
    }

    #[test]
    fn https_with_ca_cert_and_mtls() {
        let pki = pki(true);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}/", listener.local_addr().unwrap());
        let server_config = pki.server.clone();
        // First a client without its certificate (refused), then one with it.
        let server = std::thread::spawn(move || serve(listener, server_config, 2));
        let d = pki.dir.path();
        let mut config = HttpOutput {
            enabled: true,
            url,
            ca_cert: d.join("ca.pem"),
            ..HttpOutput::default()
        };
        let mut no_client_cert = HttpSink::new(&config, "application/json").unwrap();
        assert!(
            no_client_cert.send(&record()).is_err(),
            "mTLS server refuses"
        );
        config.mtls = true;
        config.client_cert = d.join("client.crt");
        config.client_key = d.join("client.key");
        let mut sink = HttpSink::new(&config, "application/json").unwrap();
        sink.send(&record()).unwrap();
        assert_eq!(server.join().unwrap().as_deref(), Some(r#"{"rule":"R"}"#));
    }

    #[test]
    fn https_unknown_ca_fails_unless_insecure() {
        let pki = pki(false);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("https://{}/", listener.local_addr().unwrap());
        let server_config = pki.server.clone();
        let server = std::thread::spawn(move || serve(listener, server_config, 2));
        // The default roots do not know the test CA: verification fails.
        let mut config = HttpOutput {
            enabled: true,
            url,
            ca_path: pki.dir.path().join("empty"),
            ..HttpOutput::default()
        };
        let mut strict = HttpSink::new(&config, "text/plain").unwrap();
        assert!(strict.send(&record()).is_err());
        config.insecure = true;
        let mut insecure = HttpSink::new(&config, "text/plain").unwrap();
        insecure.send(&record()).unwrap();
        assert!(server.join().unwrap().is_some());
    }
}

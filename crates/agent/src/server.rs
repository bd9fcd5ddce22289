//! The embedded web server (Falco's `webserver`): `/healthz` (or `k8s_healthz_endpoint`) and,
//! with `prometheus_metrics_enabled`, `/metrics` in Prometheus text format. A tiny HTTP/1.1
//! server on `std::net`: GET only, one short request per connection, no TLS. Vigil binds
//! `127.0.0.1` by default (Falco binds `0.0.0.0`).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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
    #[error("webserver.ssl_enabled: TLS on the web server is not supported by Vigil")]
    Tls,
}

/// The running server; stops when dropped.
pub struct AgentServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

struct Routes {
    healthz: String,
    metrics: Option<Metrics>,
}

impl AgentServer {
    /// Listens on `listen_address:listen_port` (port 0: any free port; see [`Self::addr`]).
    pub fn start(config: &Webserver, metrics: &Metrics) -> Result<AgentServer, ServerError> {
        if config.ssl_enabled {
            return Err(ServerError::Tls);
        }
        let address = if config.listen_address.contains(':') {
            format!("[{}]:{}", config.listen_address, config.listen_port)
        } else {
            format!("{}:{}", config.listen_address, config.listen_port)
        };
        let bind_err = |source| ServerError::Bind {
            address: address.clone(),
            source,
        };
        let listener = TcpListener::bind(&address).map_err(bind_err)?;
        listener.set_nonblocking(true).map_err(bind_err)?;
        let addr = listener.local_addr().map_err(bind_err)?;
        let routes = Routes {
            healthz: config.k8s_healthz_endpoint.clone(),
            metrics: config.prometheus_metrics_enabled.then(|| metrics.clone()),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("vigil-web".into())
            .spawn(move || serve(listener, routes, thread_stop))
            .map_err(bind_err)?;
        log::info!("webserver listening on {addr}");
        Ok(AgentServer {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving and joins the thread.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for AgentServer {
    fn drop(&mut self) {
        self.halt();
    }
}

fn serve(listener: TcpListener, routes: Routes, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Err(e) = handle(stream, &routes) {
                    log::debug!("webserver: {e}");
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
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
    let mut reader = BufReader::new(stream.try_clone()?).take(64 * 1024);
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
    } else if let (Some(metrics), "/metrics") = (&routes.metrics, path) {
        metrics.sample_process();
        (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            metrics.render(),
        )
    } else {
        ("404 Not Found", "text/plain", "not found\n".to_owned())
    };
    let mut stream = stream;
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
        metrics.set("vigil_events_in_total", &[], 42.0);
        metrics.add(
            "vigil_output_dropped_total",
            &[("sink", "http"), ("reason", "spool_full")],
            3.0,
        );
        let server = AgentServer::start(&config(true), &metrics).unwrap();
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
            matches!(find("vigil_events_in_total").value, prometheus_parse::Value::Counter(v) if v == 42.0)
        );
        let dropped = find("vigil_output_dropped_total");
        assert_eq!(dropped.labels.get("reason"), Some("spool_full"));
        assert!(
            matches!(find("process_resident_memory_bytes").value, prometheus_parse::Value::Gauge(v) if v > 0.0)
        );
        assert_eq!(get(server.addr(), "/nope").0, "HTTP/1.1 404 Not Found");
        server.stop();
    }

    #[test]
    fn metrics_need_prometheus_enabled_and_tls_is_refused() {
        let metrics = Metrics::new();
        let server = AgentServer::start(&config(false), &metrics).unwrap();
        assert_eq!(get(server.addr(), "/metrics").0, "HTTP/1.1 404 Not Found");
        let taken = server.addr().port();
        let mut c = config(false);
        c.listen_port = taken;
        let e = AgentServer::start(&c, &metrics).err().unwrap().to_string();
        assert!(e.contains(&format!("127.0.0.1:{taken}")), "{e}");
        c.ssl_enabled = true;
        assert!(matches!(
            AgentServer::start(&c, &metrics),
            Err(ServerError::Tls)
        ));
    }
}

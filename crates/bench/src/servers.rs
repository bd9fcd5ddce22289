//! The real workloads of `vigil bench overhead` (`--tests redis,nginx`), from Debian's packages:
//! `redis-server` under `redis-benchmark` (the load falcosecurity/libs' maintainers measured
//! their probe with) and `nginx` serving a static file under `wrk`. The bench starts the server
//! on loopback, on a free port, with its files in the scratch directory; the configuration's
//! prefix wraps the server only (`vigil run --`, as on Fargate, or a `--wrap` tracer), and
//! `--pin` pins it; the load client runs unwrapped and unpinned, as a remote client would.
//! Score: requests per second. The server is stopped with SIGTERM (SIGKILL after 10 s) before
//! the result is returned, so nothing outlives a test.

use std::fs::{self, File};
use std::io::Write;
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::agent::tail;
use crate::workload::{Test, WorkerResult};
use crate::{sys, BenchError};

/// Requests per second per `redis-benchmark` test that sizes its run (`-n`): SET and GET each
/// get `duration × this` requests, so a native run lasts about twice `duration` on the VMs
/// this was measured on and every configuration does the same work.
pub const REDIS_REQUESTS_PER_SECOND: f64 = 25_000.0;
/// `redis-benchmark` connections (its default).
const REDIS_CLIENTS: u32 = 50;
/// `wrk` threads and connections.
const WRK_THREADS: u32 = 1;
const WRK_CONNECTIONS: u32 = 16;
/// The static file nginx serves, bytes.
const NGINX_FILE_BYTES: usize = 4096;

/// A server workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    Redis,
    Nginx,
}

impl Server {
    /// The server workload behind a test, if it is one.
    pub fn of(test: Test) -> Option<Server> {
        match test {
            Test::Redis => Some(Server::Redis),
            Test::Nginx => Some(Server::Nginx),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Server::Redis => "redis",
            Server::Nginx => "nginx",
        }
    }

    /// The programs it needs, with the Debian package of each.
    pub fn programs(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Server::Redis => &[
                ("redis-server", "redis-server"),
                ("redis-benchmark", "redis-tools"),
            ],
            Server::Nginx => &[("nginx", "nginx-light"), ("wrk", "wrk")],
        }
    }

    /// The programs missing from `PATH` (and `/usr/sbin`, where Debian puts nginx), named with
    /// their packages.
    pub fn missing(self) -> Vec<String> {
        self.programs()
            .iter()
            .filter(|(prog, _)| find_program(prog).is_none())
            .map(|(prog, pkg)| format!("{prog} (package {pkg})"))
            .collect()
    }
}

/// `name` on `PATH`, or in `/usr/sbin` and `/sbin`.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A free TCP port on loopback (bound, then released for the server).
fn free_port() -> Result<u16, BenchError> {
    let listener =
        TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|source| BenchError::Io {
            what: "find a free loopback port".into(),
            source,
        })?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|source| BenchError::Io {
            what: "read the free port".into(),
            source,
        })
}

fn failed(server: Server, detail: String) -> BenchError {
    BenchError::Worker {
        test: server.name().into(),
        detail,
    }
}

/// A running server: killed by [`Drop`] if the caller returns early.
struct Running {
    server: Server,
    child: Option<Child>,
    log: PathBuf,
}

impl Running {
    /// Starts `[taskset -c PIN] PREFIX… argv…`, its output into `log`.
    fn start(
        server: Server,
        pin: Option<&str>,
        prefix: &[String],
        argv: &[String],
        log: PathBuf,
    ) -> Result<Running, BenchError> {
        let mut full = Vec::new();
        if let Some(cpus) = pin {
            full.extend(["taskset".to_string(), "-c".into(), cpus.to_string()]);
        }
        full.extend(prefix.iter().cloned());
        full.extend(argv.iter().cloned());
        let out = File::create(&log).map_err(|source| BenchError::Io {
            what: format!("create `{}`", log.display()),
            source,
        })?;
        let err = out.try_clone().map_err(|source| BenchError::Io {
            what: format!("share `{}`", log.display()),
            source,
        })?;
        let child = Command::new(&full[0])
            .args(&full[1..])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| failed(server, format!("cannot start `{}`: {e}", full.join(" "))))?;
        Ok(Running {
            server,
            child: Some(child),
            log,
        })
    }

    fn log_tail(&self) -> String {
        tail(&fs::read_to_string(&self.log).unwrap_or_default(), 600)
    }

    /// Waits until `port` accepts connections (or the server exits, or `timeout` passes).
    fn wait_listening(&mut self, port: u16, timeout: Duration) -> Result<(), BenchError> {
        let start = Instant::now();
        loop {
            if TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_ok() {
                return Ok(());
            }
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(failed(
                        self.server,
                        format!(
                            "the server exited before listening ({status}): {}",
                            self.log_tail()
                        ),
                    ));
                }
            }
            if start.elapsed() > timeout {
                return Err(failed(
                    self.server,
                    format!(
                        "the server did not listen on port {port} within {timeout:?}: {}",
                        self.log_tail()
                    ),
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server is still running (a server that died under load fails the test).
    fn check_alive(&mut self) -> Result<(), BenchError> {
        if let Some(child) = self.child.as_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Err(failed(
                    self.server,
                    format!(
                        "the server exited during the load ({status}): {}",
                        self.log_tail()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// SIGTERM, SIGKILL after 10 s; waits for it.
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = sys::terminate(child.id() as i32);
        let start = Instant::now();
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if start.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
            }
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs the client to completion, its stdout as text.
fn client(server: Server, argv: &[String]) -> Result<String, BenchError> {
    let out = Command::new(&argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| failed(server, format!("cannot run `{}`: {e}", argv.join(" "))))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(failed(
            server,
            format!(
                "`{}` failed ({}): {}",
                argv.join(" "),
                out.status,
                tail(&(stdout + &String::from_utf8_lossy(&out.stderr)), 600)
            ),
        ));
    }
    Ok(stdout)
}

/// Runs one server workload: the server under `pin` and `prefix`, the client for about
/// `duration` (redis: a request count sized from it), then stops the server.
pub fn run(
    server: Server,
    pin: Option<&str>,
    prefix: &[String],
    scratch: &Path,
    duration: Duration,
) -> Result<WorkerResult, BenchError> {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let missing = server.missing();
    if !missing.is_empty() {
        return Err(failed(
            server,
            format!("not installed: {}", missing.join(", ")),
        ));
    }
    let dir = scratch.join(format!("{}-{}-{n}", server.name(), std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).map_err(|source| BenchError::Io {
        what: format!("create `{}`", dir.display()),
        source,
    })?;
    let result = match server {
        Server::Redis => redis(pin, prefix, &dir, duration),
        Server::Nginx => nginx(pin, prefix, &dir, duration),
    };
    let _ = fs::remove_dir_all(&dir);
    result
}

fn redis(
    pin: Option<&str>,
    prefix: &[String],
    dir: &Path,
    duration: Duration,
) -> Result<WorkerResult, BenchError> {
    let port = free_port()?;
    let argv: Vec<String> = [
        "redis-server",
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
        "--daemonize",
        "no",
        "--dir",
        &dir.display().to_string(),
    ]
    .map(str::to_string)
    .to_vec();
    let mut running = Running::start(Server::Redis, pin, prefix, &argv, dir.join("server.log"))?;
    running.wait_listening(port, Duration::from_secs(30))?;
    let requests = redis_requests(duration);
    let client_argv: Vec<String> = [
        "redis-benchmark",
        "-h",
        "127.0.0.1",
        "-p",
        &port.to_string(),
        "-c",
        &REDIS_CLIENTS.to_string(),
        "-n",
        &requests.to_string(),
        "-t",
        "set,get",
        "--csv",
    ]
    .map(str::to_string)
    .to_vec();
    let text = client(Server::Redis, &client_argv);
    running.check_alive()?;
    running.stop();
    let rates = parse_redis_csv(&text?);
    let rps = |name: &str| rates.iter().find(|(t, _)| t == name).map(|(_, r)| *r);
    let (Some(set), Some(get)) = (rps("SET"), rps("GET")) else {
        return Err(failed(
            Server::Redis,
            "redis-benchmark printed no SET and GET rates".into(),
        ));
    };
    let (score, seconds) = combined_rate(requests, &[set, get]);
    Ok(WorkerResult {
        test: "redis".into(),
        iterations: requests * 2,
        elapsed_s: seconds,
        score,
        unit: "req/s".into(),
    })
}

/// `redis-benchmark -n` for a run of about `duration` per test.
pub fn redis_requests(duration: Duration) -> u64 {
    ((duration.as_secs_f64() * REDIS_REQUESTS_PER_SECOND) as u64).max(1000)
}

/// `(test, requests/s)` of `redis-benchmark --csv` lines (`"SET","80000.00",…`; the header
/// line and anything else skipped).
pub fn parse_redis_csv(text: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter_map(|line| {
            let mut cols = line.split(',').map(|c| c.trim().trim_matches('"'));
            let name = cols.next()?.to_string();
            let rps: f64 = cols.next()?.parse().ok()?;
            (rps > 0.0).then_some((name, rps))
        })
        .collect()
}

/// The rate over several runs of `requests` each at `rates`: total requests over total time
/// (not the mean of the rates), and that time.
pub fn combined_rate(requests: u64, rates: &[f64]) -> (f64, f64) {
    let seconds: f64 = rates.iter().map(|r| requests as f64 / r).sum();
    (
        (requests as f64 * rates.len() as f64) / seconds.max(1e-9),
        seconds,
    )
}

fn nginx(
    pin: Option<&str>,
    prefix: &[String],
    dir: &Path,
    duration: Duration,
) -> Result<WorkerResult, BenchError> {
    let port = free_port()?;
    let www = dir.join("www");
    let io = |what: String| move |source| BenchError::Io { what, source };
    fs::create_dir_all(&www).map_err(io(format!("create `{}`", www.display())))?;
    fs::create_dir_all(dir.join("tmp")).map_err(io("create nginx's temporary directory".into()))?;
    let page: String = "vigil bench nginx static file\n"
        .chars()
        .cycle()
        .take(NGINX_FILE_BYTES)
        .collect();
    fs::write(www.join("index.html"), page).map_err(io("write index.html".into()))?;
    let conf = dir.join("nginx.conf");
    let mut f = File::create(&conf).map_err(io(format!("create `{}`", conf.display())))?;
    f.write_all(nginx_conf(dir, port).as_bytes())
        .map_err(io(format!("write `{}`", conf.display())))?;
    drop(f);
    let nginx = find_program("nginx").unwrap_or_else(|| PathBuf::from("nginx"));
    let argv = vec![
        nginx.display().to_string(),
        "-p".into(),
        dir.display().to_string(),
        "-c".into(),
        conf.display().to_string(),
        "-e".into(),
        dir.join("error.log").display().to_string(),
    ];
    let mut running = Running::start(Server::Nginx, pin, prefix, &argv, dir.join("server.log"))?;
    running.wait_listening(port, Duration::from_secs(30))?;
    let secs = duration.as_secs_f64().ceil().max(1.0) as u64;
    let client_argv = vec![
        "wrk".to_string(),
        "-t".into(),
        WRK_THREADS.to_string(),
        "-c".into(),
        WRK_CONNECTIONS.to_string(),
        "-d".into(),
        format!("{secs}s"),
        format!("http://127.0.0.1:{port}/index.html"),
    ];
    let text = client(Server::Nginx, &client_argv);
    running.check_alive()?;
    running.stop();
    let text = text?;
    let report = parse_wrk(&text).ok_or_else(|| {
        failed(
            Server::Nginx,
            format!("no rate in wrk's output: {}", tail(&text, 600)),
        )
    })?;
    if report.errors > 0 {
        return Err(failed(
            Server::Nginx,
            format!(
                "{} failed requests (socket errors or non-2xx): {}",
                report.errors,
                tail(&text, 600)
            ),
        ));
    }
    Ok(WorkerResult {
        test: "nginx".into(),
        iterations: report.requests,
        elapsed_s: report.requests as f64 / report.rate.max(1e-9),
        score: report.rate,
        unit: "req/s".into(),
    })
}

/// The configuration of one nginx run: one worker, everything under `dir`, the access log on
/// (as served sites keep it).
pub fn nginx_conf(dir: &Path, port: u16) -> String {
    let d = dir.display();
    format!(
        "worker_processes 1;\ndaemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n  access_log {d}/access.log;\n  client_body_temp_path {d}/tmp/body;\n  \
         proxy_temp_path {d}/tmp/proxy;\n  fastcgi_temp_path {d}/tmp/fastcgi;\n  \
         uwsgi_temp_path {d}/tmp/uwsgi;\n  scgi_temp_path {d}/tmp/scgi;\n  \
         server {{\n    listen 127.0.0.1:{port};\n    root {d}/www;\n  }}\n}}\n"
    )
}

/// What `wrk` printed: the request count, the rate, and failed requests.
#[derive(Clone, Debug, PartialEq)]
pub struct WrkReport {
    pub requests: u64,
    pub rate: f64,
    pub errors: u64,
}

/// Reads `N requests in Ts, …`, `Requests/sec: R`, `Socket errors: connect A, read B, write C,
/// timeout D` and `Non-2xx or 3xx responses: E`.
pub fn parse_wrk(text: &str) -> Option<WrkReport> {
    let mut requests = None;
    let mut rate = None;
    let mut errors = 0u64;
    for line in text.lines().map(str::trim) {
        if let Some(v) = line.strip_prefix("Requests/sec:") {
            rate = v.trim().parse::<f64>().ok();
        } else if let Some(v) = line.strip_prefix("Non-2xx or 3xx responses:") {
            errors += v.trim().parse::<u64>().unwrap_or(1);
        } else if let Some(v) = line.strip_prefix("Socket errors:") {
            errors += v
                .split(',')
                .filter_map(|part| part.split_whitespace().last()?.parse::<u64>().ok())
                .sum::<u64>();
        } else if let Some((n, rest)) = line.split_once(" requests in ") {
            if rest.contains(',') {
                requests = n.trim().parse::<u64>().ok();
            }
        }
    }
    Some(WrkReport {
        requests: requests?,
        rate: rate?,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_csv_rates_and_their_combination() {
        let text = "\"test\",\"rps\",\"avg_latency_ms\",\"min_latency_ms\"\n\
                    \"SET\",\"80000.00\",\"0.331\",\"0.100\"\n\
                    \"GET\",\"40000.00\",\"0.301\",\"0.090\"\n";
        let rates = parse_redis_csv(text);
        assert_eq!(
            rates,
            vec![("SET".to_string(), 80_000.0), ("GET".to_string(), 40_000.0)],
            "header skipped"
        );
        let (rate, secs) = combined_rate(80_000, &[80_000.0, 40_000.0]);
        assert!((secs - 3.0).abs() < 1e-9, "1 s + 2 s: {secs}");
        assert!(
            (rate - 160_000.0 / 3.0).abs() < 1e-6,
            "total over time, not the mean of the rates: {rate}"
        );
        assert_eq!(redis_requests(Duration::from_secs(2)), 50_000, "sized");
        assert_eq!(redis_requests(Duration::from_millis(1)), 1000, "floor");
    }

    #[test]
    fn wrk_output_is_read_with_its_errors() {
        let ok = "Running 2s test @ http://127.0.0.1:8080/index.html\n  1 threads and 16 connections\n\
                  Thread Stats   Avg      Stdev     Max   +/- Stdev\n    Latency   1.00ms  0.20ms   5.00ms   90.00%\n\
                  40000 requests in 2.00s, 170.00MB read\nRequests/sec:  20000.50\nTransfer/sec:     85.00MB\n";
        assert_eq!(
            parse_wrk(ok),
            Some(WrkReport {
                requests: 40_000,
                rate: 20_000.5,
                errors: 0
            })
        );
        let bad = format!(
            "{ok}  Socket errors: connect 0, read 3, write 0, timeout 2\n  Non-2xx or 3xx responses: 5\n"
        );
        assert_eq!(parse_wrk(&bad).map(|r| r.errors), Some(10), "3 + 2 + 5");
        assert_eq!(parse_wrk("Requests/sec: 5\n"), None, "no request count");
    }

    #[test]
    fn nginx_configuration_keeps_everything_in_its_directory() {
        let conf = nginx_conf(Path::new("/s/n"), 4321);
        assert!(conf.contains("listen 127.0.0.1:4321;"), "{conf}");
        assert!(conf.contains("root /s/n/www;"), "{conf}");
        assert!(conf.contains("daemon off;"), "{conf}");
        for line in conf
            .lines()
            .filter(|l| l.contains("_path") || l.contains("log "))
        {
            assert!(
                line.contains("/s/n/"),
                "a path outside the run's directory: {line}"
            );
        }
    }

    #[test]
    fn servers_of_tests() {
        assert_eq!(Server::of(Test::Redis), Some(Server::Redis));
        assert_eq!(Server::of(Test::Nginx), Some(Server::Nginx));
        assert_eq!(Server::of(Test::Pipe), None);
        assert_eq!(find_program("sh-no-such-program-vigil"), None);
    }
}

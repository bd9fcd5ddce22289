//! The web server's thread sleeps in `accept` while nobody asks: it does not wake the host for
//! nothing, and a stop still ends it at once. Its own test binary, so that its thread is the
//! only `vigil-web` thread of the process.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use vigil_agent::AgentServer;
use vigil_config::Webserver;
use vigil_output::Metrics;

/// Voluntary context switches (sleeps that ended in a wakeup) of this process's threads named
/// `name`, and how many there are.
fn wakeups_of(name: &str) -> (u64, usize) {
    let mut total = 0;
    let mut threads = 0;
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = entry.expect("a task").path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim() != name {
            continue;
        }
        threads += 1;
        let status = std::fs::read_to_string(dir.join("status")).expect("a task's status");
        total += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .expect("voluntary_ctxt_switches");
    }
    (total, threads)
}

#[test]
fn an_idle_web_server_sleeps_until_asked_and_stops_at_once() {
    let config = Webserver {
        listen_port: 0,
        ..Webserver::default()
    };
    let server = AgentServer::start(&config, &Metrics::new(), false).expect("the server starts");
    let addr = server.addr();
    std::thread::sleep(Duration::from_millis(200));
    let (before, threads) = wakeups_of("vigil-web");
    assert_eq!(threads, 1, "one serving thread");
    std::thread::sleep(Duration::from_secs(1));
    let (after, _) = wakeups_of("vigil-web");
    assert!(
        after - before <= 2,
        "an idle server woke {} times in a second",
        after - before
    );
    // It still answers, and a stop ends it although it sleeps in accept.
    let mut client = TcpStream::connect(addr).expect("connect");
    client
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    write!(client, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut answer = String::new();
    client.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
    let (done, stopped) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        server.stop();
        let _ = done.send(());
    });
    assert!(
        stopped.recv_timeout(Duration::from_secs(5)).is_ok(),
        "the server did not stop"
    );
    // Joined: the thread has exited (the kernel may list it a moment longer).
    let gone = (0..500).any(|_| {
        std::thread::sleep(Duration::from_millis(10));
        wakeups_of("vigil-web").1 == 0
    });
    assert!(gone, "its thread ended");
}

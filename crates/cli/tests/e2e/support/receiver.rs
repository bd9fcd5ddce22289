//! A loopback HTTP receiver for output tests: takes every POST's body, answers 200, and can
//! be taken down (connections refused) and brought back on the same port.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

pub struct Receiver {
    pub addr: SocketAddr,
    bodies: Arc<Mutex<Vec<String>>>,
    running: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Receiver {
    pub fn start() -> Receiver {
        Receiver::start_on("127.0.0.1:0".parse().expect("loopback address"))
    }

    /// On `addr` (e.g. the port of a receiver that went away).
    pub fn start_on(addr: SocketAddr) -> Receiver {
        let listener = TcpListener::bind(addr).expect("bind receiver");
        let mut r = Receiver {
            addr: listener.local_addr().expect("receiver address"),
            bodies: Arc::default(),
            running: None,
        };
        r.serve(listener);
        r
    }

    fn serve(&mut self, listener: TcpListener) {
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let (bodies, flag) = (Arc::clone(&self.bodies), Arc::clone(&stop));
        let handle = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => take(stream, &bodies),
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        self.running = Some((stop, handle));
    }

    /// Closes the listening socket: connections are refused until [`Receiver::up`].
    pub fn down(&mut self) {
        if let Some((stop, handle)) = self.running.take() {
            stop.store(true, Ordering::SeqCst);
            handle.join().expect("receiver thread");
        }
    }

    pub fn up(&mut self) {
        let listener = TcpListener::bind(self.addr).expect("rebind receiver on the same port");
        self.serve(listener);
    }

    /// Every body received so far, in arrival order.
    pub fn bodies(&self) -> Vec<String> {
        self.bodies.lock().expect("bodies").clone()
    }

    /// How many bodies were received so far.
    pub fn count(&self) -> usize {
        self.bodies.lock().expect("bodies").len()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.down();
    }
}

fn take(stream: TcpStream, bodies: &Mutex<Vec<String>>) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let Ok(clone) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(clone);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    bodies
        .lock()
        .expect("bodies")
        .push(String::from_utf8_lossy(&body).into_owned());
    let mut stream = stream;
    let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
}

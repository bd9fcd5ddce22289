//! A deterministic, mixed event corpus for throughput benchmarks and soak tests.
//!
//! It models a busy host: shells and services that spawn short-lived processes which open files
//! (mostly benign, a few sensitive), connect sockets, make and remove links, and exit. Every event
//! is of a type that a stable upstream rule watches (`openat`, `execve`, `connect`, `socket`,
//! `symlinkat`, `linkat`) or that the state engine needs to stay correct (`clone`, `close`,
//! `procexit`): what a driver with the rules' interest set delivers, nothing the index would skip
//! for free. (`read`/`write` are deliberately absent: no stable rule watches them.)

use std::net::{IpAddr, Ipv4Addr};

use vigil_event::{
    table, Event, EventType, FdInfo, FdType, GroupInfo, Param, Snapshot, SockAddr, SockTuple,
    ThreadInfo, UserInfo,
};

/// The files processes read: all benign (a sensitive read is added once per
/// [`SENSITIVE_EVERY`] sessions).
const READ_PATHS: &[&str] = &[
    "/etc/ld.so.cache",
    "/lib/x86_64-linux-gnu/libc.so.6",
    "/usr/lib/locale/locale-archive",
    "/etc/nsswitch.conf",
    "/etc/passwd",
    "/proc/self/status",
    "/var/www/html/index.html",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/home/alice/.bashrc",
];

/// One session in this many reads `/etc/shadow` (untrusted: an alert with the stable rules).
/// Real hosts alert far more rarely; this keeps alert rendering in the measurement without
/// letting it dominate. Benchmarks report the alert count they saw.
pub const SENSITIVE_EVERY: usize = 1000;

/// Programs the spawner runs.
const PROGRAMS: &[(&str, &str)] = &[
    ("ls", "/usr/bin/ls"),
    ("cat", "/usr/bin/cat"),
    ("grep", "/usr/bin/grep"),
    ("python3", "/usr/bin/python3.11"),
    ("curl", "/usr/bin/curl"),
    ("sh", "/usr/bin/dash"),
];

fn etype(name: &str) -> EventType {
    table::by_name(name).expect("corpus uses event types of the table")
}

fn bytes(s: &str) -> Param {
    Param::Bytes(s.as_bytes().to_vec())
}

/// The process tree the corpus starts from: init → sshd → bash (alice, on a tty) and
/// init → nginx (www-data), each with stdio open.
pub fn snapshot() -> Snapshot {
    let stdio = |name: &str| {
        (0..3)
            .map(|fd| FdInfo {
                fd,
                kind: FdType::File,
                tuple: None,
                name: name.as_bytes().to_vec(),
                flags: 2,
            })
            .collect::<Vec<_>>()
    };
    let thread = |tid: i64, ppid: i64, comm: &str, exepath: &str, uid: u32, tty: u32| ThreadInfo {
        tid,
        pid: tid,
        ppid,
        vtid: tid,
        vpid: tid,
        comm: comm.as_bytes().to_vec(),
        exe: exepath.as_bytes().to_vec(),
        exepath: exepath.as_bytes().to_vec(),
        cwd: b"/".to_vec(),
        uid,
        gid: uid,
        euid: uid,
        egid: uid,
        loginuid: if tty == 0 { u32::MAX } else { uid },
        tty,
        start_ts: 1_700_000_000_000_000_000,
        cgroup: b"/system.slice/ssh.service".to_vec(),
        fds: stdio(if tty == 0 { "/dev/null" } else { "/dev/pts/0" }),
        ..ThreadInfo::default()
    };
    let user = |uid: u32, name: &str| UserInfo {
        uid,
        gid: uid,
        name: name.as_bytes().to_vec(),
        home: format!("/home/{name}").into_bytes(),
        shell: b"/bin/bash".to_vec(),
    };
    Snapshot {
        hostname: b"bench-host".to_vec(),
        start_ts: 1_700_000_000_000_000_000,
        users: vec![user(0, "root"), user(33, "www-data"), user(1000, "alice")],
        groups: vec![GroupInfo {
            gid: 0,
            name: b"root".to_vec(),
        }],
        threads: vec![
            thread(1, 0, "systemd", "/usr/lib/systemd/systemd", 0, 0),
            thread(500, 1, "sshd", "/usr/sbin/sshd", 0, 0),
            thread(1000, 500, "bash", "/usr/bin/bash", 1000, 34816),
            thread(600, 1, "nginx", "/usr/sbin/nginx", 33, 0),
        ],
        ..Snapshot::default()
    }
}

/// Builds the corpus: `n_events` events (rounded up to a whole session) in sessions of a
/// spawned child's life. Deterministic for a given `n_events`.
pub fn events(n_events: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(n_events + 64);
    let mut ts = 1_700_000_000_000_001_000u64;
    let mut session = 0usize;
    while out.len() < n_events {
        let parent = if session.is_multiple_of(3) { 600 } else { 1000 };
        let child = 20_000 + (session % 1000) as i64;
        let (comm, exepath) = PROGRAMS[session % PROGRAMS.len()];
        let mut push = |tid: i64, name: &str, res: i64, params: Vec<Param>| {
            ts += 1_000;
            out.push(Event {
                num: 0,
                ts,
                tid,
                pid: tid,
                etype: etype(name),
                res,
                params,
                truncated: 0,
                cpu: None,
            });
        };
        push(parent, "clone", child, vec![Param::Uint(0x0120_0011)]);
        let args: Vec<Vec<u8>> = vec![format!("/tmp/input-{session}").into_bytes()];
        let mut exec = vec![
            bytes(exepath),
            bytes(comm),
            Param::List(args),
            Param::List(vec![
                b"PATH=/usr/bin:/bin".to_vec(),
                b"LANG=C.UTF-8".to_vec(),
            ]),
            bytes(comm),
            bytes(exepath),
            bytes("/home/alice"),
        ];
        exec.resize(
            table::by_name("execve").map_or(0, |t| t.spec().params.len()),
            Param::None,
        );
        push(child, "execve", 0, exec);
        // The dynamic loader and the program's own reads.
        let sensitive = session % SENSITIVE_EVERY == SENSITIVE_EVERY - 1;
        let reads = READ_PATHS
            .iter()
            .take(4 + session % 6)
            .chain(sensitive.then_some(&"/etc/shadow"));
        for (i, path) in reads.enumerate() {
            let fd = 3 + i as i64;
            push(
                child,
                "openat",
                fd,
                vec![
                    Param::Int(-100),
                    bytes(path),
                    Param::Uint(0o2_000_000),
                    Param::Uint(0),
                ],
            );
            push(child, "close", 0, vec![Param::Int(fd)]);
        }
        // A new file, then a symbolic and a hard link to it.
        let tmp = format!("/tmp/out-{session}");
        push(
            child,
            "openat",
            3,
            vec![
                Param::Int(-100),
                bytes(&tmp),
                Param::Uint(0o1101),
                Param::Uint(0o644),
            ],
        );
        push(child, "close", 0, vec![Param::Int(3)]);
        push(
            child,
            "symlinkat",
            0,
            vec![bytes(&tmp), Param::Int(-100), bytes(&format!("{tmp}.lnk"))],
        );
        push(
            child,
            "linkat",
            0,
            vec![
                Param::Int(-100),
                bytes(&tmp),
                Param::Int(-100),
                bytes(&format!("{tmp}.hard")),
                Param::Uint(0),
            ],
        );
        // Network: a client connection, every other session.
        if session.is_multiple_of(2) {
            push(
                child,
                "socket",
                3,
                vec![Param::Uint(2), Param::Uint(1), Param::Uint(0)],
            );
            let server = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));
            let local = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
            push(
                child,
                "connect",
                0,
                vec![
                    Param::Int(3),
                    Param::Addr(SockAddr::Inet {
                        ip: server,
                        port: 443,
                    }),
                    Param::Tuple(SockTuple::Inet {
                        l4proto: 6,
                        src_ip: local,
                        src_port: 40_000 + (session % 20_000) as u16,
                        dst_ip: server,
                        dst_port: 443,
                    }),
                ],
            );
            push(child, "close", 0, vec![Param::Int(3)]);
        }
        push(
            child,
            "procexit",
            0,
            vec![Param::Int(0), Param::Int(0), Param::Uint(0), Param::Uint(0)],
        );
        session += 1;
    }
    for (i, event) in out.iter_mut().enumerate() {
        event.num = i as u64 + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_is_deterministic_and_sized() {
        let a = events(5_000);
        let b = events(5_000);
        assert_eq!(a, b);
        assert!(a.len() >= 5_000 && a.len() < 5_100, "{}", a.len());
        assert!(a.windows(2).all(|w| w[0].ts < w[1].ts));
    }
}

//! The ring-record layout, live (root and BTF; skips with a reason elsewhere, fails under
//! `VIGIL_TEST_STRICT=1`): a child performs syscalls whose records carry every record kind,
//! blob tag and blob flag `bpf/include/vigil_record.h` defines, and each decoded event holds
//! what the child put there. The header is read here too: a kind, tag or flag added to it
//! without a check below fails this test.
// Tests print why they skip; the child prints its child's pid for the test to read.
#![allow(clippy::print_stderr, clippy::print_stdout)]

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, TcpListener, UdpSocket};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use vigil_capture::{InterestSet, Source};
use vigil_ebpf::{BpfOptions, BpfSource};
use vigil_event::{table, Event, Param, SockTuple};

const CHILD_ENV: &str = "VIGIL_EBPF_RECORD_CHILD";
/// The exit code of the child's child (`REC_EXIT`).
const EXIT_CODE: i64 = 7;
/// The environment of the child's child: a marker, then a value past the 4 KiB bound
/// (`BLOB_TRUNCATED`); `Command` passes them sorted by name.
const MARK: (&str, &str) = ("VIGIL_A_MARK", "record-layout");
const BIG: &str = "VIGIL_Z_BIG";

/// The kinds, tags and flags the header defines.
fn header_names() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../bpf/include/vigil_record.h");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .filter_map(|line| line.trim().strip_prefix("#define "))
        .filter_map(|rest| rest.split_whitespace().next())
        .filter(|name| {
            ["REC_", "TAG_", "BLOB_"]
                .iter()
                .any(|p| name.starts_with(p))
        })
        .map(str::to_owned)
        .collect()
}

/// Runs in the child (the test binary re-executed with `CHILD_ENV` set): opens a file,
/// connects, sends a message to an address, opens through a bad pointer, then runs
/// `/bin/sh -c 'exit 7'` and prints its pid.
#[test]
fn record_child_actions() {
    let Ok(args) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut args = args.split(',');
    let (Some(path), Some(tcp), Some(udp), Some(dir)) =
        (args.next(), args.next(), args.next(), args.next())
    else {
        panic!("{CHILD_ENV}: PATH,TCP_PORT,UDP_PORT,DIR");
    };
    let port = |p: &str| p.parse::<u16>().expect("a port");
    drop(std::fs::File::open(path).expect("open the test file"));
    drop(std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port(tcp))).expect("connect"));
    let socket = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a UDP socket");
    raw::sendmsg_to(&socket, port(udp), &[b"abc", b"defg"]).expect("sendmsg");
    raw::open_bad_pointer();
    let mut child = Command::new("/bin/sh")
        .args(["-c", &format!("exit {EXIT_CODE}")])
        .env_clear()
        .env(MARK.0, MARK.1)
        .env(BIG, "x".repeat(5000))
        .current_dir(dir)
        .spawn()
        .expect("run /bin/sh");
    println!("grandchild={}", child.id());
    let status = child.wait().expect("wait for /bin/sh");
    assert_eq!(status.code(), Some(EXIT_CODE as i32));
}

/// The system calls std does not make (a `sendmsg` with an address, an `openat` of a pointer
/// that cannot be read).
#[allow(unsafe_code)]
mod raw {
    use std::io;
    use std::net::{Ipv4Addr, UdpSocket};
    use std::os::fd::AsRawFd;

    /// `sendmsg(socket, {msg_name: 127.0.0.1:port, msg_iov: parts})`.
    pub fn sendmsg_to(socket: &UdpSocket, port: u16, parts: &[&[u8]]) -> io::Result<()> {
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
            },
            sin_zero: [0; 8],
        };
        let mut iov: Vec<libc::iovec> = parts
            .iter()
            .map(|p| libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            })
            .collect();
        // SAFETY: a zeroed msghdr is valid (null pointers, zero lengths); the fields set
        // below point at `addr` and `iov`, alive across the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = &addr as *const libc::sockaddr_in as *mut libc::c_void;
        msg.msg_namelen = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        // SAFETY: `msg` is a valid msghdr whose buffers are alive and only read by the call.
        let n = unsafe { libc::sendmsg(socket.as_raw_fd(), &msg, 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// `openat(AT_FDCWD, 1, O_RDONLY)`: fails with EFAULT, and the kernel side cannot read
    /// the path either.
    pub fn open_bad_pointer() {
        // SAFETY: the kernel validates the pointer and returns EFAULT; nothing is read or
        // written in this process.
        let fd = unsafe { libc::syscall(libc::SYS_openat, libc::AT_FDCWD, 1usize, 0) };
        assert_eq!(fd, -1, "an openat of address 1 fails");
    }
}

/// A list parameter as text, each entry cut at 40 characters (for readable failures).
fn list(p: &Param) -> Option<Vec<String>> {
    match p {
        Param::List(entries) => Some(
            entries
                .iter()
                .map(|e| String::from_utf8_lossy(&e[..e.len().min(40)]).into_owned())
                .collect(),
        ),
        _ => None,
    }
}

fn bytes(p: &Param) -> &[u8] {
    match p {
        Param::Bytes(b) => b,
        _ => b"",
    }
}

#[test]
fn every_record_kind_tag_and_flag_decodes_as_the_kernel_wrote_it() {
    if let Err(e) = vigil_ebpf::check_support() {
        assert!(
            std::env::var("VIGIL_TEST_STRICT").as_deref() != Ok("1"),
            "VIGIL_TEST_STRICT=1 and the eBPF driver cannot run: {e}"
        );
        eprintln!("skipping live record test: {e}");
        return;
    }
    let interest: InterestSet = [
        "openat", "connect", "sendmsg", "execve", "clone", "clone3", "fork", "vfork", "procexit",
    ]
    .iter()
    .map(|n| table::by_name(n).unwrap_or_else(|| panic!("no event type {n}")))
    .collect();
    let start = || {
        vigil_procfs::read_snapshot(
            &vigil_procfs::RealProc::default(),
            &vigil_procfs::SnapshotOptions::default(),
        )
        .map(|(snapshot, _)| snapshot)
    };
    let mut source = BpfSource::open(
        BpfOptions {
            interest,
            ..BpfOptions::default()
        },
        start,
    )
    .unwrap_or_else(|e| panic!("cannot open the eBPF source: {e}"));

    let tcp = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("a TCP listener");
    let tcp_port = tcp.local_addr().expect("its address").port();
    let udp = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).expect("a UDP socket");
    let udp_port = udp.local_addr().expect("its address").port();
    let dir = std::env::temp_dir().join(format!("vigil-ebpf-record-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let dir = std::fs::canonicalize(&dir).expect("its real path");
    let path = dir.join("opened");
    std::fs::write(&path, b"x").expect("the test file");
    let mut child = Command::new(std::env::current_exe().expect("the test binary"))
        .args([
            "--exact",
            "record_child_actions",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(
            CHILD_ENV,
            format!("{},{tcp_port},{udp_port},{}", path.display(), dir.display()),
        )
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the child");
    let child_pid = i64::from(child.id());
    let mut out = String::new();
    child
        .stdout
        .take()
        .expect("its stdout")
        .read_to_string(&mut out)
        .expect("read the child's output");
    assert!(child.wait().expect("wait for the child").success(), "{out}");
    // The harness prints the test's name on the same line.
    let grandchild: i64 = out
        .split("grandchild=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no grandchild pid in the child's output: {out}"));

    let mut events: Vec<Event> = Vec::new();
    let started = Instant::now();
    let exited = |events: &[Event]| {
        events
            .iter()
            .any(|e| e.pid == grandchild && e.etype.name() == "procexit")
    };
    while started.elapsed() < Duration::from_secs(10) && !exited(&events) {
        source.next_batch(&mut events, 4096).expect("next_batch");
    }
    source.drain(&mut events).expect("drain");
    let _ = std::fs::remove_dir_all(&dir);
    let of = |pid: i64, name: &str| -> Vec<&Event> {
        events
            .iter()
            .filter(|e| e.pid == pid && e.etype.name() == name)
            .collect()
    };
    let one = |pid: i64, names: &[&str]| -> &Event {
        events
            .iter()
            .find(|e| e.pid == pid && names.contains(&e.etype.name()))
            .unwrap_or_else(|| {
                panic!(
                    "no {names:?} of pid {pid} in {} events: {:?}",
                    events.len(),
                    events
                        .iter()
                        .filter(|e| e.pid == child_pid || e.pid == grandchild)
                        .map(|e| e.etype.name())
                        .collect::<Vec<_>>()
                )
            })
    };
    let path_bytes = path.to_string_lossy().into_owned().into_bytes();
    let opened = of(child_pid, "openat");
    let open = opened
        .iter()
        .find(|e| bytes(e.param_by_name("name")) == path_bytes.as_slice())
        .unwrap_or_else(|| panic!("no openat of {} in {opened:?}", path.display()));
    // The child's clone of /bin/sh (not of a thread of its own).
    let fork = events
        .iter()
        .find(|e| {
            e.pid == child_pid
                && ["clone", "clone3", "fork", "vfork"].contains(&e.etype.name())
                && e.res == grandchild
        })
        .unwrap_or_else(|| panic!("no clone of {grandchild} by {child_pid}"));
    let exec = one(grandchild, &["execve"]);
    let exit = one(grandchild, &["procexit"]);
    let connect = one(child_pid, &["connect"]);
    let sendmsg = one(child_pid, &["sendmsg"]);
    let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
    let dst_port = |e: &Event| match e.param_by_name("tuple") {
        Param::Tuple(SockTuple::Inet {
            dst_ip, dst_port, ..
        }) if *dst_ip == lo => Some(*dst_port),
        _ => None,
    };
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();

    for name in header_names() {
        match name.as_str() {
            "REC_SYSCALL" => assert!(open.res >= 0, "the openat succeeded: {open:?}"),
            // Found by its result, the new process's pid (the header's `res`).
            "REC_FORK" => assert_eq!(fork.res, grandchild, "{fork:?}"),
            "REC_EXEC" => assert_eq!(exec.res, 0, "{exec:?}"),
            "REC_EXIT" => assert_eq!(exit.tid, grandchild, "{exit:?}"),
            // Floor runs (`vigil bench`) write headers only, counted and never delivered;
            // the decoder's handling is unit-tested in decode.rs.
            "REC_FLOOR" => {}
            // The wakeup timer's header (the watched exec and exit above may be left to it):
            // never delivered, and not malformed (checked below). Once a record was deferred,
            // its timer fired 3 ms later, long before this.
            "REC_WAKE" => {
                let w = source.wakeups();
                assert!(
                    w.deferred == 0 || w.timer >= 1,
                    "a deferred record's timer woke the reader: {w:?}"
                );
            }
            "TAG_TUPLE" => assert_eq!(dst_port(connect), Some(tcp_port), "{connect:?}"),
            "TAG_FILENAME" => assert_eq!(bytes(exec.param_by_name("filename")), b"/bin/sh"),
            "TAG_ARGV" => assert_eq!(
                list(exec.param_by_name("args")),
                Some(vec!["-c".to_owned(), format!("exit {EXIT_CODE}")]),
            ),
            "TAG_ENV" => assert_eq!(
                list(exec.param_by_name("env")).and_then(|env| env.first().cloned()),
                Some(format!("{}={}", MARK.0, MARK.1)),
            ),
            "TAG_COMM" => assert_eq!(bytes(exec.param_by_name("comm")), b"sh"),
            "TAG_EXEC_INFO" => {
                assert_eq!(exec.param_by_name("pid"), &Param::Int(grandchild));
                assert_eq!(exec.param_by_name("ptid"), &Param::Int(child_pid));
            }
            "TAG_FORK_INFO" => {
                assert_eq!(fork.param_by_name("vtid"), &Param::Int(grandchild));
                assert_eq!(fork.param_by_name("vpid"), &Param::Int(grandchild));
                assert!(
                    matches!(fork.param_by_name("flags"), Param::Uint(f) if *f != 0),
                    "clone flags: {fork:?}"
                );
            }
            "TAG_EXIT_INFO" => {
                assert_eq!(exit.param_by_name("status"), &Param::Int(EXIT_CODE << 8));
                assert_eq!(exit.param_by_name("ret"), &Param::Int(EXIT_CODE));
            }
            "TAG_CWD" => assert_eq!(
                bytes(exec.param_by_name("cwd")),
                dir.to_string_lossy().as_bytes()
            ),
            "TAG_EXEPATH" => assert_eq!(
                bytes(exec.param_by_name("trusted_exepath")),
                std::fs::canonicalize("/bin/sh")
                    .expect("realpath /bin/sh")
                    .to_string_lossy()
                    .as_bytes()
            ),
            "TAG_CGROUP" => match cgroup.lines().find_map(|l| l.strip_prefix("0::")) {
                Some(own) => assert_eq!(bytes(exec.param_by_name("cgroups")), own.as_bytes()),
                None => eprintln!("TAG_CGROUP: no unified hierarchy here, not compared"),
            },
            "TAG_MSG" => assert_eq!(sendmsg.param_by_name("size"), &Param::Uint(7)),
            "TAG_MSG_NAME" => assert_eq!(dst_port(sendmsg), Some(udp_port), "{sendmsg:?}"),
            "BLOB_TRUNCATED" => {
                let env = exec.etype.spec().param_index("env").expect("env");
                assert!(exec.is_truncated(env), "5000 bytes of env: {exec:?}");
                let args = exec.etype.spec().param_index("args").expect("args");
                assert!(!exec.is_truncated(args), "short argv: {exec:?}");
            }
            "BLOB_FAULT" => {
                let bad = opened
                    .iter()
                    .find(|e| e.res == -14)
                    .unwrap_or_else(|| panic!("no openat failing with EFAULT: {opened:?}"));
                assert_eq!(bad.param_by_name("name"), &Param::None, "{bad:?}");
                assert!(source.read_faults() >= 1, "the fault is counted");
            }
            other => panic!(
                "{other} is defined in bpf/include/vigil_record.h with no live check here: \
                 add one"
            ),
        }
    }
    let stats = source.stats();
    assert!(
        stats
            .dropped
            .iter()
            .all(|(reason, _)| *reason != vigil_capture::DropReason::Malformed),
        "no record was malformed: {stats:?}"
    );
}

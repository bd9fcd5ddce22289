//! Live driver tests (root): a child process performs real syscalls and the decoded events are
//! checked parameter by parameter. Without root (or BTF) they skip with a printed reason, and
//! fail instead when `VIGIL_TEST_STRICT=1`.
// Tests print why they skip.
#![allow(clippy::print_stderr)]

use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use vigil_capture::{InterestSet, Source};
use vigil_ebpf::{BpfOptions, BpfSource, Hook};
use vigil_event::{table, Event, Param, SockTuple};
use vigil_procfs::SnapshotOptions;

const CHILD_ENV: &str = "VIGIL_EBPF_TEST_CHILD";

/// `None` (after printing why) when the live tests cannot run here.
fn open(interest: &[&str]) -> Option<BpfSource> {
    open_with(interest, false)
}

fn open_with(interest: &[&str], raw_fallback: bool) -> Option<BpfSource> {
    open_hook(interest, raw_fallback, None)
}

/// Opens with syscalls hooked by `hook` (`None`: the default choice, checked here: fexit,
/// or exit tracepoints with the reason fexit could not load).
fn open_hook(interest: &[&str], raw_fallback: bool, hook: Option<Hook>) -> Option<BpfSource> {
    open_filtering(interest, raw_fallback, hook, &[])
}

/// Event types of the names given (panics on an unknown name).
fn types(names: &[&str]) -> InterestSet {
    names
        .iter()
        .map(|n| table::by_name(n).unwrap_or_else(|| panic!("no event type {n}")))
        .collect()
}

/// [`open_hook`], with the failed calls of `failed_unused` filtered out in the kernel.
fn open_filtering(
    interest: &[&str],
    raw_fallback: bool,
    hook: Option<Hook>,
    failed_unused: &[&str],
) -> Option<BpfSource> {
    let options = BpfOptions {
        interest: types(interest),
        failed_unused: types(failed_unused),
        raw_fallback,
        hook,
        ..BpfOptions::default()
    };
    open_options(options)
}

/// Opens with `options` (`None` after printing why when the live tests cannot run here).
fn open_options(options: BpfOptions) -> Option<BpfSource> {
    if let Err(e) = vigil_ebpf::check_support() {
        if std::env::var("VIGIL_TEST_STRICT").as_deref() == Ok("1") {
            panic!("VIGIL_TEST_STRICT=1 and the eBPF driver cannot run: {e}");
        }
        eprintln!("skipping live eBPF test: {e}");
        return None;
    }
    let hook = options.hook;
    // The start snapshot as `vigil watch` reads it (this process left out).
    let start = || {
        vigil_procfs::read_snapshot(
            &vigil_procfs::RealProc::default(),
            &SnapshotOptions::default(),
        )
        .map(|(snapshot, _)| snapshot)
    };
    let source = BpfSource::open(options, start)
        .unwrap_or_else(|e| panic!("cannot open the eBPF source: {e}"));
    match hook {
        Some(h) => assert_eq!(source.hook(), h, "the hook asked for"),
        None => match source.hook_fallback() {
            None => assert_eq!(source.hook(), Hook::Fexit, "fexit unless it failed"),
            Some(why) => {
                assert_eq!(source.hook(), Hook::Exit, "the fallback is exit");
                eprintln!("fexit is not available on this kernel ({why}): exit tracepoints tested instead");
            }
        },
    }
    Some(source)
}

/// One live test per way of hooking syscalls (the default, then each explicit one).
macro_rules! per_hook {
    ($body:ident: $($name:ident = $hook:expr),+ $(,)?) => {
        $(
            #[test]
            fn $name() {
                $body($hook);
            }
        )+
    };
}

per_hook!(decoded_with_parameters:
    child_syscalls_are_decoded_with_their_parameters = None,
    child_syscalls_are_decoded_with_their_parameters_raw = Some(Hook::Raw),
    child_syscalls_are_decoded_with_their_parameters_exit = Some(Hook::Exit),
    child_syscalls_are_decoded_with_their_parameters_tracepoint = Some(Hook::Tracepoint),
);
per_hook!(own_syscalls_not_captured:
    the_agents_own_syscalls_are_not_captured = None,
    the_agents_own_syscalls_are_not_captured_raw = Some(Hook::Raw),
    the_agents_own_syscalls_are_not_captured_exit = Some(Hook::Exit),
    the_agents_own_syscalls_are_not_captured_tracepoint = Some(Hook::Tracepoint),
);
per_hook!(thread_ids:
    a_threads_syscall_carries_its_thread_and_process_ids = None,
    a_threads_syscall_carries_its_thread_and_process_ids_raw = Some(Hook::Raw),
    a_threads_syscall_carries_its_thread_and_process_ids_exit = Some(Hook::Exit),
    a_threads_syscall_carries_its_thread_and_process_ids_tracepoint = Some(Hook::Tracepoint),
);
per_hook!(unwatched_not_delivered:
    an_unwatched_syscall_is_not_delivered = None,
    an_unwatched_syscall_is_not_delivered_raw = Some(Hook::Raw),
    an_unwatched_syscall_is_not_delivered_exit = Some(Hook::Exit),
    an_unwatched_syscall_is_not_delivered_tracepoint = Some(Hook::Tracepoint),
);
per_hook!(failed_calls_filtered:
    failed_calls_nothing_uses_are_filtered_in_the_kernel = None,
    failed_calls_nothing_uses_are_filtered_in_the_kernel_raw = Some(Hook::Raw),
    failed_calls_nothing_uses_are_filtered_in_the_kernel_exit = Some(Hook::Exit),
    failed_calls_nothing_uses_are_filtered_in_the_kernel_tracepoint = Some(Hook::Tracepoint),
);
per_hook!(failed_opens_searched:
    failed_opens_are_kept_only_with_the_needle = None,
    failed_opens_are_kept_only_with_the_needle_raw = Some(Hook::Raw),
    failed_opens_are_kept_only_with_the_needle_exit = Some(Hook::Exit),
    failed_opens_are_kept_only_with_the_needle_tracepoint = Some(Hook::Tracepoint),
);
per_hook!(memfd_exec:
    exec_of_a_memfd_carries_the_memfd_flag_and_name = None,
    exec_of_a_memfd_carries_the_memfd_flag_and_name_raw = Some(Hook::Raw),
    exec_of_a_memfd_carries_the_memfd_flag_and_name_exit = Some(Hook::Exit),
    exec_of_a_memfd_carries_the_memfd_flag_and_name_tracepoint = Some(Hook::Tracepoint),
);

/// Collects events until `done` says so (or 10 s pass), then 200 ms more.
fn collect(source: &mut BpfSource, mut done: impl FnMut(&[Event]) -> bool) -> Vec<Event> {
    let mut events = Vec::new();
    let start = Instant::now();
    let mut finished_at: Option<Instant> = None;
    while start.elapsed() < Duration::from_secs(10) {
        source.next_batch(&mut events, 4096).expect("next_batch");
        if finished_at.is_none() && done(&events) {
            finished_at = Some(Instant::now());
        }
        if finished_at.is_some_and(|t| t.elapsed() > Duration::from_millis(200)) {
            break;
        }
    }
    events
}

fn stats_malformed(stats: &vigil_capture::SourceStats) -> u64 {
    stats
        .dropped
        .iter()
        .filter(|(r, _)| *r == vigil_capture::DropReason::Malformed)
        .map(|(_, n)| n)
        .sum()
}

fn name_of(e: &Event) -> &'static str {
    e.etype.name()
}

fn bytes(p: &Param) -> &[u8] {
    match p {
        Param::Bytes(b) => b,
        _ => b"",
    }
}

/// Runs in the child (the test binary re-executed with `CHILD_ENV` set): opens a file,
/// connects to the parent's listener, then execs `/bin/true`.
#[test]
fn child_actions() {
    let Ok(port) = std::env::var(CHILD_ENV) else {
        return;
    };
    let path = std::env::var("VIGIL_EBPF_TEST_PATH").expect("path");
    let mut f = std::fs::File::open(&path).expect("open the test file");
    let mut s = String::new();
    let _ = f.read_to_string(&mut s);
    let _ = std::fs::create_dir(format!("{path}.dir"));
    // File-system changes: a symlink, a rename, an unlink; and a descriptor duplicate.
    let link = format!("{path}.link");
    std::os::unix::fs::symlink(&path, &link).expect("symlink");
    std::fs::rename(&link, format!("{link}2")).expect("rename");
    std::fs::remove_file(format!("{link}2")).expect("unlink");
    let _dup = f.try_clone().expect("dup");
    let port: u16 = port.parse().expect("port");
    let _conn = TcpStream::connect((Ipv4Addr::LOCALHOST, port)).expect("connect");
    use std::os::unix::process::CommandExt;
    let err = Command::new("/bin/true")
        .args(["first arg", "second"])
        .exec();
    panic!("exec failed: {err}");
}

fn run_child(path: &str, port: u16) -> u32 {
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "child_actions",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, port.to_string())
        .env("VIGIL_EBPF_TEST_PATH", path)
        .spawn()
        .expect("spawn the child");
    let pid = child.id();
    let status = child.wait().expect("wait for the child");
    assert!(status.success(), "child failed: {status}");
    pid
}

/// A new file under the temporary directory, unique to this call (the tests run in parallel).
fn temp_path(tag: &str) -> String {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir();
    let path = dir.join(format!("vigil-ebpf-{tag}-{}-{n}", std::process::id()));
    std::fs::write(&path, b"hello").expect("write the test file");
    path.to_string_lossy().into_owned()
}

fn decoded_with_parameters(hook: Option<Hook>) {
    let Some(mut source) = open_hook(
        &[
            "openat",
            "connect",
            "execve",
            "mkdir",
            "mkdirat",
            "symlink",
            "symlinkat",
            "rename",
            "renameat",
            "renameat2",
            "unlink",
            "unlinkat",
            "fcntl",
        ],
        false,
        hook,
    ) else {
        return;
    };
    let _snapshot = source.snapshot().expect("snapshot");
    let path = temp_path("params");
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("listen");
    let port = listener.local_addr().expect("addr").port();
    let accept = std::thread::spawn(move || listener.accept().map(|(s, _)| s));
    let child = i64::from(run_child(&path, port));
    let _ = accept.join();
    let events = collect(&mut source, |evs| {
        evs.iter().any(|e| {
            e.pid == child
                && name_of(e) == "execve"
                && bytes(e.param_by_name("filename")) == b"/bin/true"
        })
    });
    let mine: Vec<&Event> = events.iter().filter(|e| e.pid == child).collect();
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir(format!("{path}.dir"));

    // Every record carries the CPU it was written on (`evt.cpu`), a CPU this machine has.
    let possible = std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .expect("read /sys/devices/system/cpu/possible");
    let max_cpu: u32 = possible
        .trim()
        .rsplit(['-', ','])
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("cpu list {possible:?}"));
    for e in &mine {
        assert!(
            e.cpu.is_some_and(|c| c <= max_cpu),
            "{} on cpu {:?} (possible: {})",
            name_of(e),
            e.cpu,
            possible.trim()
        );
    }

    // The first exec: the test binary itself, with its arguments.
    let exec1 = mine
        .iter()
        .find(|e| name_of(e) == "execve")
        .unwrap_or_else(|| panic!("no execve of the child in {} events", events.len()));
    assert_eq!(exec1.res, 0);
    assert_eq!(
        exec1.param_by_name("ptid"),
        &Param::Int(i64::from(std::process::id()))
    );
    assert_eq!(exec1.param_by_name("pid"), &Param::Int(child));
    match exec1.param_by_name("args") {
        Param::List(args) => assert_eq!(args.first().map(Vec::as_slice), Some(&b"--exact"[..])),
        other => panic!("args: {other:?}"),
    }
    match exec1.param_by_name("env") {
        Param::List(env) => assert!(
            env.iter().any(|v| v.starts_with(CHILD_ENV.as_bytes())),
            "the environment is captured"
        ),
        other => panic!("env: {other:?}"),
    }

    // openat of the test file: path, flags (O_RDONLY|O_CLOEXEC), a descriptor.
    let open = mine
        .iter()
        .find(|e| name_of(e) == "openat" && bytes(e.param_by_name("name")) == path.as_bytes())
        .unwrap_or_else(|| panic!("no openat of {path}"));
    assert!(open.res >= 3, "fd {}", open.res);
    assert_eq!(open.param_by_name("dirfd"), &Param::Int(-100));
    match open.param_by_name("flags") {
        Param::Uint(f) => assert_eq!(*f & 0o3, 0, "O_RDONLY"),
        other => panic!("flags: {other:?}"),
    }

    // connect to the loopback listener: the tuple from the socket.
    let conn = mine
        .iter()
        .find(|e| name_of(e) == "connect")
        .unwrap_or_else(|| panic!("no connect"));
    assert_eq!(conn.res, 0);
    match conn.param_by_name("tuple") {
        Param::Tuple(SockTuple::Inet {
            l4proto,
            src_ip,
            dst_ip,
            dst_port,
            src_port,
        }) => {
            let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
            assert_eq!((*l4proto, *src_ip, *dst_ip, *dst_port), (6, lo, lo, port));
            assert!(*src_port > 0);
        }
        other => panic!("tuple: {other:?}"),
    }

    // The second exec: /bin/true with its argv; the parent is still the test.
    let exec2 = mine
        .iter()
        .find(|e| name_of(e) == "execve" && bytes(e.param_by_name("filename")) == b"/bin/true")
        .expect("exec of /bin/true");
    assert_eq!(
        exec2.param_by_name("exe"),
        &Param::Bytes(b"/bin/true".to_vec())
    );
    assert_eq!(
        exec2.param_by_name("args"),
        &Param::List(vec![b"first arg".to_vec(), b"second".to_vec()])
    );
    assert_eq!(exec2.param_by_name("comm"), &Param::Bytes(b"true".to_vec()));
    assert_eq!(
        exec2.param_by_name("ptid"),
        &Param::Int(i64::from(std::process::id()))
    );
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| {
                    v.split_whitespace()
                        .next()
                        .and_then(|u| u.parse::<u64>().ok())
                })
        })
        .expect("own uid");
    assert_eq!(exec2.param_by_name("uid"), &Param::Uint(uid));

    // Paths the kernel resolved: cwd, the executable, the cgroup.
    let cwd = std::env::current_dir().expect("cwd");
    assert_eq!(
        bytes(exec2.param_by_name("cwd")),
        cwd.to_string_lossy().as_bytes()
    );
    let real = std::fs::canonicalize("/bin/true").expect("realpath /bin/true");
    assert_eq!(
        bytes(exec2.param_by_name("trusted_exepath")),
        real.to_string_lossy().as_bytes()
    );
    let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    if let Some(path) = cgroup.lines().find_map(|l| l.strip_prefix("0::")) {
        assert_eq!(bytes(exec2.param_by_name("cgroups")), path.as_bytes());
    }

    // File-system changes, whichever variant the C library chose.
    let link = format!("{path}.link");
    let find = |names: &[&str]| {
        mine.iter()
            .find(|e| names.contains(&name_of(e)))
            .unwrap_or_else(|| panic!("none of {names:?} in {} events", mine.len()))
    };
    let mkdir = find(&["mkdir", "mkdirat"]);
    assert_eq!(
        bytes(mkdir.param_by_name("path")),
        format!("{path}.dir").as_bytes()
    );
    let sym = find(&["symlink", "symlinkat"]);
    assert_eq!(bytes(sym.param_by_name("target")), path.as_bytes());
    assert_eq!(bytes(sym.param_by_name("linkpath")), link.as_bytes());
    let ren = find(&["rename", "renameat", "renameat2"]);
    assert_eq!(bytes(ren.param_by_name("oldpath")), link.as_bytes());
    assert_eq!(
        bytes(ren.param_by_name("newpath")),
        format!("{link}2").as_bytes()
    );
    let unl = find(&["unlink", "unlinkat"]);
    let unl_path = if name_of(unl) == "unlink" {
        "path"
    } else {
        "name"
    };
    assert_eq!(
        bytes(unl.param_by_name(unl_path)),
        format!("{link}2").as_bytes()
    );
    // try_clone: fcntl(fd, F_DUPFD_CLOEXEC) on the opened file.
    let dup = mine
        .iter()
        .find(|e| name_of(e) == "fcntl" && e.param_by_name("cmd") == &Param::Uint(1030))
        .expect("fcntl F_DUPFD_CLOEXEC");
    assert_eq!(dup.param_by_name("fd"), &Param::Int(open.res));
    assert!(dup.res > open.res);

    // The process exit.
    assert!(
        mine.iter().any(|e| name_of(e) == "procexit"),
        "procexit of the child"
    );
    // Events come in time order.
    assert!(events.windows(2).all(|w| w[0].ts <= w[1].ts), "time order");
    let stats = source.stats();
    assert_eq!(stats.events_in, events.len() as u64);
    let per_cpu = source.drops_per_cpu();
    assert!(!per_cpu.is_empty(), "one drop counter set per CPU");
    let full: u64 = per_cpu.iter().map(|d| d.buffer_full + d.stash_full).sum();
    // Read after `stats()`: counters only grow.
    assert!(full >= stats.dropped_total() - stats_malformed(&stats));
}

fn own_syscalls_not_captured(hook: Option<Hook>) {
    let Some(mut source) = open_hook(&["openat"], false, hook) else {
        return;
    };
    let path = temp_path("self");
    let me = i64::from(std::process::id());
    let start = Instant::now();
    let mut events = Vec::new();
    while start.elapsed() < Duration::from_millis(300) {
        let _ = std::fs::read(&path);
        source.next_batch(&mut events, 4096).expect("next_batch");
    }
    // A child's open of the same file is captured: the exclusion is by process only.
    let status = Command::new("/bin/cat")
        .arg(&path)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("cat");
    assert!(status.success());
    let more = collect(&mut source, |evs| {
        evs.iter()
            .any(|e| bytes(e.param_by_name("name")) == path.as_bytes())
    });
    events.extend(more);
    let _ = std::fs::remove_file(&path);
    assert!(
        events.iter().all(|e| e.pid != me),
        "an event of the agent itself was delivered"
    );
    assert!(
        events
            .iter()
            .any(|e| e.pid != me && bytes(e.param_by_name("name")) == path.as_bytes()),
        "the child's open was not captured"
    );
}

const THREAD_CHILD_ENV: &str = "VIGIL_EBPF_TEST_THREAD_CHILD";

/// Runs in the child (the test binary re-executed with `THREAD_CHILD_ENV` set to a path): a
/// second thread opens `PATH.TID`, TID being its own thread id.
#[test]
fn thread_child_actions() {
    let Ok(path) = std::env::var(THREAD_CHILD_ENV) else {
        return;
    };
    std::thread::spawn(move || {
        // SAFETY: gettid has no preconditions.
        #[allow(unsafe_code)]
        let tid = unsafe { libc::gettid() };
        let _ = std::fs::read(format!("{path}.{tid}"));
    })
    .join()
    .expect("the opening thread");
}

/// A record carries the thread that made the call and its process, read in the kernel from
/// the task itself: they differ in a second thread.
fn thread_ids(hook: Option<Hook>) {
    let Some(mut source) = open_hook(&["openat"], false, hook) else {
        return;
    };
    let path = temp_path("thread");
    let exe = std::env::current_exe().expect("test binary path");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "thread_child_actions",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(THREAD_CHILD_ENV, &path)
        .spawn()
        .expect("spawn the child");
    let pid = i64::from(child.id());
    assert!(child.wait().expect("wait for the child").success());
    let prefix = format!("{path}.");
    let opened = |e: &Event| {
        name_of(e) == "openat" && bytes(e.param_by_name("name")).starts_with(prefix.as_bytes())
    };
    let events = collect(&mut source, |evs| evs.iter().any(opened));
    let _ = std::fs::remove_file(&path);
    let open = events
        .iter()
        .find(|e| opened(e))
        .expect("the thread's openat was captured");
    let tid: i64 = std::str::from_utf8(&bytes(open.param_by_name("name"))[prefix.len()..])
        .expect("utf-8")
        .parse()
        .expect("the thread id in the name");
    assert_eq!(open.pid, pid, "the process id is the child's");
    assert_eq!(open.tid, tid, "the thread id is the opening thread's");
    assert_ne!(open.tid, open.pid, "a second thread");
}

fn unwatched_not_delivered(hook: Option<Hook>) {
    let Some(mut source) = open_hook(&["openat"], false, hook) else {
        return;
    };
    let mkdir = table::by_name("mkdir").expect("mkdir");
    let getpid = table::by_name("getpid").expect("getpid");
    let attached = source.attached_syscalls();
    assert!(!attached.contains(&83), "mkdir is not attached");
    assert!(attached.contains(&257), "openat is attached");
    let file = temp_path("unwatched");
    let _ = std::fs::remove_file(&file);
    let dir = std::path::PathBuf::from(file);
    let status = Command::new("/bin/mkdir")
        .arg(&dir)
        .status()
        .expect("mkdir");
    assert!(status.success());
    let events = collect(&mut source, |evs| {
        evs.iter().any(|e| name_of(e) == "procexit")
    });
    let _ = std::fs::remove_dir(&dir);
    assert!(!events.is_empty(), "the watched syscalls are delivered");
    assert!(
        events.iter().all(|e| e.etype != mkdir && e.etype != getpid),
        "an unwatched syscall was delivered"
    );
    // Widening the interest set attaches it.
    let wider: InterestSet = [mkdir].into_iter().collect();
    source.set_interest(&wider).expect("set_interest");
    assert!(source.attached_syscalls().contains(&83));
}

/// The caller's start snapshot is read once the programs are attached: what a process does
/// while it is read is captured, so nothing falls between the snapshot and the stream.
#[test]
fn the_start_snapshot_is_read_after_the_programs_are_attached() {
    if let Err(e) = vigil_ebpf::check_support() {
        if std::env::var("VIGIL_TEST_STRICT").as_deref() == Ok("1") {
            panic!("VIGIL_TEST_STRICT=1 and the eBPF driver cannot run: {e}");
        }
        eprintln!("skipping live eBPF test: {e}");
        return;
    }
    let path = temp_path("snapshot");
    let interest: InterestSet = [table::by_name("openat").expect("openat")]
        .into_iter()
        .collect();
    let mut reader = None;
    let start = || {
        // A process that opens the file while the snapshot is taken.
        let status = Command::new("/bin/cat")
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .spawn()
            .and_then(|mut child| {
                reader = Some(child.id());
                child.wait()
            })?;
        assert!(status.success(), "cat failed: {status}");
        vigil_procfs::read_snapshot(
            &vigil_procfs::RealProc::default(),
            &SnapshotOptions::default(),
        )
        .map(|(snapshot, _)| snapshot)
        .map_err(std::io::Error::other)
    };
    let options = BpfOptions {
        interest,
        ..BpfOptions::default()
    };
    let mut source = BpfSource::open(options, start)
        .unwrap_or_else(|e| panic!("cannot open the eBPF source: {e}"));
    let pid = i64::from(reader.expect("the start snapshot was read"));
    let opened = |e: &Event| {
        e.pid == pid
            && name_of(e) == "openat"
            && e.params.iter().any(|p| bytes(p) == path.as_bytes())
    };
    let events = collect(&mut source, |events| events.iter().any(opened));
    assert!(
        events.iter().any(opened),
        "the open made while the snapshot was read is captured ({} events of pid {pid})",
        events.iter().filter(|e| e.pid == pid).count()
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn drain_delivers_what_is_still_in_flight() {
    let Some(mut source) = open(&["openat"]) else {
        return;
    };
    let child = Command::new("/bin/true").spawn().expect("run /bin/true");
    let pid = child.id();
    let status = { child }.wait().expect("wait /bin/true");
    assert!(status.success());
    // The child has exited, so all its records are committed; no waiting for the reordering
    // window: drain hands over everything, in time order.
    let committed = source
        .stats()
        .kernel_records
        .expect("the eBPF driver counts the records its programs commit");
    let mut events = Vec::new();
    source.drain(&mut events).expect("drain");
    // Every record committed before the drain was delivered or counted as malformed, and
    // nothing was delivered that the kernel side did not count (other processes' opens keep
    // coming: a window, not one number).
    let stats = source.stats();
    let handled = stats.events_in + stats_malformed(&stats);
    let committed_after = stats.kernel_records.expect("still counted");
    assert!(
        committed <= handled && handled <= committed_after,
        "records committed by the kernel side: {committed} before the drain, \
         {committed_after} after; delivered or malformed: {handled}"
    );
    let of_child: Vec<&Event> = events.iter().filter(|e| e.pid == i64::from(pid)).collect();
    assert!(
        of_child.iter().any(|e| name_of(e) == "execve"),
        "the child's execve is drained"
    );
    assert!(
        of_child.iter().any(|e| name_of(e) == "procexit"),
        "the child's exit is drained"
    );
    assert!(
        events.windows(2).all(|w| w[0].ts <= w[1].ts),
        "in time order"
    );
}

#[test]
fn without_the_option_a_syscall_without_its_own_tracepoint_is_named_not_captured() {
    let Some(source) = open(&["init_module", "openat"]) else {
        return;
    };
    assert!(
        source.fallback_syscalls().is_empty(),
        "no raw_syscalls unless asked"
    );
    let own = kernel_has_tracepoint("syscalls/sys_enter_init_module");
    assert_eq!(
        source.unsupported().contains(&"init_module"),
        !own,
        "init_module is named unsupported exactly when it has no tracepoint"
    );
}

#[test]
fn a_syscall_without_its_own_tracepoint_falls_back_to_raw_syscalls() {
    let Some(source) = open_with(&["init_module", "openat"], true) else {
        return;
    };
    let own = kernel_has_tracepoint("syscalls/sys_enter_init_module");
    if own {
        assert!(source.attached_syscalls().contains(&175));
        assert!(source.fallback_syscalls().is_empty());
    } else {
        assert!(
            source.fallback_syscalls().contains(&"init_module")
                || source.unsupported().contains(&"init_module"),
            "init_module is either captured through raw_syscalls or named as unsupported"
        );
        assert!(!source.attached_syscalls().contains(&175));
    }
    assert!(!source.fallback_syscalls().contains(&"openat"));
}

/// Whether the kernel has tracepoint `category/name`, looked up in a tracefs mounted in a
/// private mount namespace (`unshare -m`), independently of the driver and of the host's
/// mounts.
fn kernel_has_tracepoint(tracepoint: &str) -> bool {
    let script = format!(
        "umount -l /sys/kernel/tracing 2>/dev/null; \
         mount -t tracefs nodev /sys/kernel/tracing && test -d /sys/kernel/tracing/events/{tracepoint}"
    );
    Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .status()
        .expect("run unshare")
        .success()
}

/// The two raw system calls fileless execution needs (std wraps neither).
#[allow(unsafe_code)]
mod memfd {
    use std::ffi::{c_char, CStr};
    use std::io;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    /// `memfd_create(name, 0)`.
    pub fn create(name: &CStr) -> io::Result<OwnedFd> {
        // SAFETY: `name` is NUL-terminated and outlives the call.
        let fd = unsafe { libc::memfd_create(name.as_ptr(), 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by memfd_create: open, and owned by nothing else.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `execveat(fd, "", argv, {}, AT_EMPTY_PATH)`; returns only on failure.
    pub fn exec(fd: &OwnedFd, argv: &[&CStr]) -> io::Error {
        let argv: Vec<*const c_char> = argv
            .iter()
            .map(|a| a.as_ptr())
            .chain(Some(std::ptr::null()))
            .collect();
        let envp: [*const c_char; 1] = [std::ptr::null()];
        // SAFETY: the path is an empty NUL-terminated string, `argv` and `envp` are
        // NULL-terminated arrays of NUL-terminated strings, all alive across the call (which
        // replaces the process image on success).
        unsafe {
            libc::syscall(
                libc::SYS_execveat,
                fd.as_raw_fd(),
                c"".as_ptr(),
                argv.as_ptr(),
                envp.as_ptr(),
                libc::AT_EMPTY_PATH,
            )
        };
        io::Error::last_os_error()
    }
}

const MEMFD_CHILD_ENV: &str = "VIGIL_EBPF_TEST_MEMFD_CHILD";

/// Runs in the child: copies `/bin/true` into a memfd and executes it by descriptor.
#[test]
fn memfd_child_actions() {
    if std::env::var_os(MEMFD_CHILD_ENV).is_none() {
        return;
    }
    let fd = memfd::create(c"vigil-payload").expect("memfd_create");
    let mut file = std::fs::File::from(fd);
    let mut exe = std::fs::File::open("/bin/true").expect("open /bin/true");
    std::io::copy(&mut exe, &mut file).expect("copy /bin/true into the memfd");
    let fd = std::os::fd::OwnedFd::from(file);
    let err = memfd::exec(&fd, &[c"vigil-memfd", c"arg"]);
    panic!("execveat of the memfd failed: {err}");
}

fn memfd_exec(hook: Option<Hook>) {
    let Some(mut source) = open_hook(&["execve", "execveat"], false, hook) else {
        return;
    };
    let _snapshot = source.snapshot().expect("snapshot");
    let exe = std::env::current_exe().expect("test binary path");
    let status_child = Command::new(exe)
        .args([
            "--exact",
            "memfd_child_actions",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(MEMFD_CHILD_ENV, "1")
        .spawn()
        .expect("spawn the child");
    let child = i64::from(status_child.id());
    let output = status_child.wait_with_output().expect("wait for the child");
    assert!(output.status.success(), "child failed: {}", output.status);
    let events = collect(&mut source, |evs| {
        evs.iter()
            .any(|e| e.pid == child && name_of(e) == "execveat")
    });
    let mine: Vec<&Event> = events.iter().filter(|e| e.pid == child).collect();
    let exec = mine
        .iter()
        .find(|e| name_of(e) == "execveat")
        .unwrap_or_else(|| panic!("no execveat of the child in {} events", events.len()));
    assert_eq!(exec.res, 0);
    // Root may write any file: the memfd is also writable, not on an overlay.
    assert_eq!(
        exec.param_by_name("exe_flags"),
        &Param::Uint(table::exe_flags::FROM_MEMFD | table::exe_flags::WRITABLE)
    );
    assert_eq!(
        bytes(exec.param_by_name("trusted_exepath")),
        b"memfd:vigil-payload"
    );
    assert_eq!(bytes(exec.param_by_name("pathname")), b"");
    assert_eq!(bytes(exec.param_by_name("exe")), b"vigil-memfd");
    match exec.param_by_name("flags") {
        Param::Uint(f) => assert_eq!(*f & 0x1000, 0x1000, "AT_EMPTY_PATH in {f:#x}"),
        other => panic!("flags: {other:?}"),
    }
    // The first exec (the test binary itself, from a regular file): no memfd flag, a real path.
    let exec1 = mine
        .iter()
        .find(|e| name_of(e) == "execve")
        .unwrap_or_else(|| panic!("no execve of the child in {} events", events.len()));
    assert_eq!(
        exec1.param_by_name("exe_flags"),
        &Param::Uint(table::exe_flags::WRITABLE),
        "root's own test binary: writable, not a memfd, not on an overlay"
    );
    assert!(
        bytes(exec1.param_by_name("trusted_exepath")).starts_with(b"/"),
        "{:?}",
        exec1.param_by_name("trusted_exepath")
    );
}

/// Runs `/bin/cat MISSING PRESENT` (an `openat` that fails with ENOENT, then one that
/// succeeds, in the same thread) and returns the child's `openat` events, by path.
fn cat_openats(source: &mut BpfSource, missing: &str, present: &str) -> Vec<(Vec<u8>, i64)> {
    let child = Command::new("/bin/cat")
        .args([missing, present])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn cat");
    let pid = i64::from(child.id());
    let output = child.wait_with_output().expect("wait for cat");
    assert_eq!(output.status.code(), Some(1), "cat: one file missing");
    let events = collect(source, |evs| {
        evs.iter().any(|e| e.pid == pid && name_of(e) == "procexit")
    });
    events
        .iter()
        .filter(|e| e.pid == pid && name_of(e) == "openat")
        .map(|e| (bytes(e.param_by_name("name")).to_vec(), e.res))
        .filter(|(name, _)| name == missing.as_bytes() || name == present.as_bytes())
        .collect()
}

fn failed_calls_filtered(hook: Option<Hook>) {
    let interest = ["openat", "close"];
    let Some(mut source) = open_filtering(&interest, false, hook, &["openat", "close"]) else {
        return;
    };
    assert_eq!(
        source.filtered_failures(),
        ["openat"],
        "close's failures change the state (EINTR/EIO still close): never filtered"
    );
    let present = temp_path("present");
    let missing = format!("{present}.missing");
    let before = source.filtered_failed();
    let opens = cat_openats(&mut source, &missing, &present);
    assert!(
        opens
            .iter()
            .any(|(n, r)| n == present.as_bytes() && *r >= 0),
        "the successful openat is delivered (after a filtered failure in the same thread): \
         {opens:?}"
    );
    assert!(
        opens.iter().all(|(n, _)| n != missing.as_bytes()),
        "the failed openat is filtered out: {opens:?}"
    );
    let filtered = source.filtered_failed();
    assert!(
        filtered > before,
        "the filtered failure is counted ({before} -> {filtered})"
    );
    let stats = source.stats();
    assert_eq!(stats.filtered_failed, filtered, "in the source's stats");
    assert_eq!(
        stats.dropped_total(),
        0,
        "filtering is not a loss: {stats:?}"
    );

    // The rules now want failures (a reload): the failed call is delivered with its error.
    source
        .set_interest_and_failures(&types(&interest), &InterestSet::new(), &[], &[])
        .expect("set_interest_and_failures");
    assert!(source.filtered_failures().is_empty());
    let missing = format!("{present}.missing2");
    let opens = cat_openats(&mut source, &missing, &present);
    let _ = std::fs::remove_file(&present);
    const ENOENT: i64 = 2;
    assert!(
        opens
            .iter()
            .any(|(n, r)| n == missing.as_bytes() && *r == -ENOENT),
        "the failed openat is delivered with its result: {opens:?}"
    );
    assert!(
        opens
            .iter()
            .any(|(n, r)| n == present.as_bytes() && *r >= 0),
        "{opens:?}"
    );
}

/// A rule may match a failed `openat` only when its path contains "../"
/// (`BpfOptions::failure_needles`): the kernel searches the path it copied.
fn failed_opens_searched(hook: Option<Hook>) {
    let interest = ["openat"];
    let needles = |n: &[u8]| vec![(table::by_name("openat").expect("openat"), n.to_vec())];
    let Some(mut source) = open_options(BpfOptions {
        interest: types(&interest),
        failure_needles: needles(b"../"),
        hook,
        ..BpfOptions::default()
    }) else {
        return;
    };
    const ENOENT: i64 = 2;
    let present = temp_path("needle");
    // Missing (their directory is): failures whose path has the needle at its end, in its
    // middle, at its start.
    for dotted in [
        format!("{present}.nodir/../"),
        format!("{present}.nodir/../x"),
        format!("../vigil-ebpf-missing-{}", std::process::id()),
    ] {
        let opens = cat_openats(&mut source, &dotted, &present);
        assert!(
            opens
                .iter()
                .any(|(n, r)| n == dotted.as_bytes() && *r == -ENOENT),
            "the failed openat of {dotted} is delivered with its result: {opens:?}"
        );
    }
    // Near misses: "..", "./", "../" split by another byte.
    for missing in [
        format!("{present}.missing"),
        format!("{present}.nodir/.."),
        format!("{present}.nodir/./x"),
        format!("{present}.nodir/.x./"),
    ] {
        let before = source.filtered_failed();
        let opens = cat_openats(&mut source, &missing, &present);
        assert!(
            opens.iter().all(|(n, _)| n != missing.as_bytes()),
            "a failed openat without \"../\" is filtered out: {opens:?}"
        );
        assert!(
            opens
                .iter()
                .any(|(n, r)| n == present.as_bytes() && *r >= 0),
            "the successful openat is delivered: {opens:?}"
        );
        let filtered = source.filtered_failed();
        assert!(
            filtered > before,
            "counted ({before} -> {filtered}): {missing}"
        );
    }
    assert_eq!(source.stats().dropped_total(), 0, "filtering is not a loss");
    // Reloaded without the needle: every failure is delivered again.
    source
        .set_interest_and_failures(&types(&interest), &InterestSet::new(), &[], &[])
        .expect("set_interest_and_failures");
    let missing = format!("{present}.missing2");
    let opens = cat_openats(&mut source, &missing, &present);
    let _ = std::fs::remove_file(&present);
    assert!(
        opens
            .iter()
            .any(|(n, r)| n == missing.as_bytes() && *r == -ENOENT),
        "{opens:?}"
    );
}

// Wakeups (crate docs, "Wakeups"). The reader blocks on the rings; the kernel wakes it for a
// record of a type the rules watch, or when a ring holds `wake_bytes`; the rest is read with
// the next wakeup or at `max_wait`. These tests watch `rmdir` alone (a syscall of its own on
// x86-64, which the busy hosts the tests run on hardly make), so that only what a test does
// wakes its reader, and give `max_wait` far beyond the liveness bound they assert: a record
// read at `max_wait` instead of through its wakeup fails them.

/// Options of the wakeup tests: `rmdir` watched, `max_wait`, `wake_bytes`, syscalls hooked by
/// their exit tracepoints (whose records of watched types wake the reader at once; a tracing
/// hook's leave it to the timer, as the lifecycle programs' do: tested apart).
fn wake_options(max_wait: Duration, wake_bytes: u64) -> BpfOptions {
    BpfOptions {
        interest: types(&["rmdir"]),
        max_wait,
        wake_bytes,
        hook: Some(Hook::Exit),
        ..BpfOptions::default()
    }
}

/// What a reader blocked for a minute must still deliver within this: a record left to the
/// timeout (or a held one left to the next wakeup) takes the minute.
const LIVENESS: Duration = Duration::from_secs(5);

#[test]
fn the_waker_ends_a_wait_at_once() {
    let Some(mut source) = open_options(wake_options(Duration::from_secs(60), u64::MAX)) else {
        return;
    };
    let waker = source.waker().expect("the eBPF source has a waker");
    let wake = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        waker.wake();
    });
    let start = Instant::now();
    let mut batch = Vec::new();
    source
        .next_batch_until(&mut batch, 4096, start + Duration::from_secs(60))
        .expect("next_batch_until");
    let took = start.elapsed();
    wake.join().expect("the waking thread");
    assert!(
        took < LIVENESS,
        "a wait for a minute was woken after {took:?}"
    );
}

/// The wakeup tests that watch `rmdir`, a syscall of its own on x86-64 only (arm64 has only
/// `unlinkat`, which every `rm` makes).
#[cfg(target_arch = "x86_64")]
mod wakeups {
    use super::*;

    /// A new empty directory under the temporary directory (removed by the test's child).
    fn temp_dir_path(tag: &str) -> String {
        let path = format!("{}.dir", temp_path(tag));
        std::fs::create_dir(&path).expect("create the test directory");
        path
    }

    /// Reads batches (each call blocking up to `until`) until `wanted` has seen one it wants;
    /// when that happened, `None` if `until` passed first.
    fn wait_for(
        source: &mut BpfSource,
        until: Instant,
        mut wanted: impl FnMut(&Event) -> bool,
    ) -> Option<Instant> {
        let mut batch = Vec::new();
        while Instant::now() < until {
            batch.clear();
            source
                .next_batch_until(&mut batch, 4096, until)
                .expect("next_batch_until");
            if batch.iter().any(&mut wanted) {
                return Some(Instant::now());
            }
        }
        None
    }

    /// Reads batches until an `rmdir` of each path in `wanted` was delivered, or `limit`
    /// passed: the paths seen.
    fn read_rmdirs(
        source: &mut BpfSource,
        wanted: &std::collections::HashSet<Vec<u8>>,
        limit: Duration,
    ) -> std::collections::HashSet<Vec<u8>> {
        let mut seen = std::collections::HashSet::new();
        let until = Instant::now() + limit;
        let mut batch = Vec::new();
        while seen.len() < wanted.len() && Instant::now() < until {
            batch.clear();
            source
                .next_batch_until(&mut batch, 4096, until)
                .expect("next_batch_until");
            for e in &batch {
                let path = bytes(e.param_by_name("path")).to_vec();
                if name_of(e) == "rmdir" && wanted.contains(&path) {
                    seen.insert(path);
                }
            }
        }
        seen
    }

    #[test]
    fn a_watched_event_wakes_the_reader_and_is_delivered_after_its_reorder_window() {
        // Nothing but an alert-worthy record wakes this reader: no size threshold, and a minute
        // of timeout. A reorder window of 500 ms (default 2 ms): the reader runs within it of
        // the wakeup even on a loaded machine, so the record is held when first read and must
        // leave when its window ends, not at the next wakeup.
        let options = BpfOptions {
            reorder_window: Duration::from_millis(500),
            ..wake_options(Duration::from_secs(60), u64::MAX)
        };
        let Some(mut source) = open_options(options) else {
            return;
        };
        let dir = temp_dir_path("wake");
        // Empty rings: the record cannot meet one the busy host filled meanwhile.
        source.drain(&mut Vec::new()).expect("drain");
        // The rmdir comes while the reader waits (a record already written when the reader
        // looks is read without any wakeup).
        let mut child = Command::new("sh")
            .args(["-c", "sleep 0.3; exec rmdir \"$0\"", &dir])
            .spawn()
            .expect("run rmdir");
        let start = Instant::now();
        let woken = source.wakeups();
        let pid = i64::from(child.id());
        let arrived = wait_for(&mut source, start + Duration::from_secs(60), |e| {
            e.pid == pid && name_of(e) == "rmdir"
        });
        let status = child.wait().expect("wait for rmdir");
        assert!(status.success(), "rmdir {dir}: {status}");
        let took = arrived.map(|t| t - start);
        assert!(
            took.is_some_and(|t| t < LIVENESS),
            "the rmdir of {dir} arrived after {took:?} (a reader waiting for its minute's timeout, \
             or an event held for the reorder window until another wakeup)"
        );
        // The kernel woke the reader for it. (On a busy host the reader also reads every
        // reorder window while it holds other processes' events, and would find the record
        // without a wakeup: the count tells.)
        let now = source.wakeups();
        assert!(
            now.watched > woken.watched,
            "no wakeup for a watched type: {woken:?} → {now:?}"
        );
    }

    #[test]
    fn records_of_two_cpus_within_one_window_wake_a_holding_reader_once() {
        // An rmdir on CPU 0, another on CPU 1 20 ms later, within one reorder window of
        // 300 ms; five such bursts. The first record wakes the reader, which then holds it and
        // sleeps until its window ends: the second CPU's wakeup must not end that sleep (its
        // record is read when the window ends, with the first).
        if std::thread::available_parallelism().map_or(1, |n| n.get()) < 2 {
            eprintln!("skipping: one CPU");
            return;
        }
        let options = BpfOptions {
            reorder_window: Duration::from_millis(300),
            ..wake_options(Duration::from_secs(60), u64::MAX)
        };
        let Some(mut source) = open_options(options) else {
            return;
        };
        const BURSTS: usize = 5;
        let dirs: Vec<[String; 2]> = (0..BURSTS)
            .map(|_| [temp_dir_path("burst0"), temp_dir_path("burst1")])
            .collect();
        source.drain(&mut Vec::new()).expect("drain");
        let before = source.reader_waits();
        let kernel_before = source.wakeups();
        let bursts = dirs.clone();
        let runner = std::thread::spawn(move || {
            for [a, b] in &bursts {
                let rmdir = |cpu: &str, dir: &str| {
                    Command::new("taskset")
                        .args(["-c", cpu, "rmdir", dir])
                        .status()
                        .expect("run taskset rmdir")
                };
                assert!(rmdir("0", a).success(), "rmdir {a} on CPU 0");
                std::thread::sleep(Duration::from_millis(20));
                assert!(rmdir("1", b).success(), "rmdir {b} on CPU 1");
                std::thread::sleep(Duration::from_millis(700));
            }
        });
        let wanted: std::collections::HashSet<Vec<u8>> = dirs
            .iter()
            .flatten()
            .map(|d| d.as_bytes().to_vec())
            .collect();
        let seen = read_rmdirs(&mut source, &wanted, Duration::from_secs(30));
        runner.join().expect("the bursts");
        assert_eq!(seen.len(), wanted.len(), "every rmdir was delivered");
        let waits = source.reader_waits();
        let kernel = source.wakeups();
        let by_kernel = waits.rings - before.rings;
        assert!(
            kernel.watched - kernel_before.watched >= BURSTS as u64 * 2 - 1,
            "each CPU's record was written with a wakeup: {kernel_before:?} → {kernel:?}"
        );
        assert!(
            by_kernel <= BURSTS as u64 + 1,
            "the kernel ended {by_kernel} waits for {BURSTS} bursts of two CPUs' records \
             ({before:?} → {waits:?}): a reader holding the first record woke again for the \
             second"
        );
    }

    #[test]
    fn a_watched_exec_wakes_the_reader_once_by_the_timer_at_its_windows_end() {
        // `execve` watched, a reorder window of 300 ms: five runs of /bin/true, 700 ms apart.
        // A successful exec is the lifecycle program's record: written without a wakeup, the
        // kernel's timer wakes the reader 450 ms later (window and slack), when the exec and
        // the exit are both due. Woken at once instead, the reader would wake for the exec,
        // then again when its window ended (it holds it meanwhile).
        let options = BpfOptions {
            interest: types(&["execve"]),
            reorder_window: Duration::from_millis(300),
            ..wake_options(Duration::from_secs(60), u64::MAX)
        };
        let Some(mut source) = open_options(options) else {
            return;
        };
        assert!(
            source.defers_wakes(),
            "the kernel took the lifecycle programs' timer"
        );
        const RUNS: usize = 5;
        source.drain(&mut Vec::new()).expect("drain");
        let kernel_before = source.wakeups();
        let (pid_tx, pid_rx) = std::sync::mpsc::channel();
        let runner = std::thread::spawn(move || {
            for _ in 0..RUNS {
                let mut child = Command::new("/bin/true").spawn().expect("run /bin/true");
                pid_tx.send(i64::from(child.id())).expect("send the pid");
                assert!(child.wait().expect("wait for /bin/true").success());
                std::thread::sleep(Duration::from_millis(700));
            }
        });
        let mut pids = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let delivered = |pids: &[i64], seen: &std::collections::HashSet<(i64, &str)>| {
            pids.len() == RUNS
                && pids
                    .iter()
                    .all(|p| seen.contains(&(*p, "execve")) && seen.contains(&(*p, "procexit")))
        };
        let until = Instant::now() + Duration::from_secs(30);
        let mut batch = Vec::new();
        while !delivered(&pids, &seen) && Instant::now() < until {
            batch.clear();
            source
                .next_batch_until(&mut batch, 4096, until)
                .expect("next_batch_until");
            pids.extend(pid_rx.try_iter());
            for e in &batch {
                if let what @ ("execve" | "procexit") = name_of(e) {
                    seen.insert((e.pid, what));
                }
            }
        }
        runner.join().expect("the runs");
        pids.extend(pid_rx.try_iter());
        assert!(
            delivered(&pids, &seen),
            "every run's execve and procexit was delivered (runs {pids:?})"
        );
        let kernel = source.wakeups();
        // Each run is covered by a timer of its own (the runs are further apart than a timer's
        // delay); a busy host's other execs may arm it first, never for two runs.
        assert!(
            kernel.timer - kernel_before.timer >= RUNS as u64,
            "the timer woke the reader for each run: {kernel_before:?} → {kernel:?}"
        );
        // No watched lifecycle record woke the reader at once (only a failed exec, another
        // test's, would: the syscall's own record).
        assert!(
            kernel.watched - kernel_before.watched < RUNS as u64,
            "the execs woke the reader at once: {kernel_before:?} → {kernel:?}"
        );
        assert!(
            kernel.deferred - kernel_before.deferred >= RUNS as u64,
            "each run's exec was left to the timer: {kernel_before:?} → {kernel:?}"
        );
    }

    #[test]
    fn a_watched_syscall_of_a_tracing_hook_wakes_the_reader_by_the_timer() {
        // Syscalls hooked by a tracing program (`raw` here: `tp_btf/sys_exit`; `fexit` where
        // the kernel has trampolines), which may use the timer as the lifecycle programs do:
        // `rmdir` watched, a reorder window of 300 ms, five runs 700 ms apart. Each rmdir's
        // record is written without a wakeup and the timer wakes the reader 450 ms later, when
        // the record's window has ended: one wakeup, not one for the record and one for the
        // window's end. (Exit tracepoints cannot use timers: the other wakeup tests.)
        let options = BpfOptions {
            reorder_window: Duration::from_millis(300),
            hook: Some(Hook::Raw),
            ..wake_options(Duration::from_secs(60), u64::MAX)
        };
        let Some(mut source) = open_options(options) else {
            return;
        };
        assert!(source.defers_wakes(), "the kernel took the timer");
        const RUNS: usize = 5;
        let dirs: Vec<String> = (0..RUNS).map(|_| temp_dir_path("timer")).collect();
        source.drain(&mut Vec::new()).expect("drain");
        let kernel_before = source.wakeups();
        let runs = dirs.clone();
        let runner = std::thread::spawn(move || {
            for dir in &runs {
                let status = Command::new("rmdir").arg(dir).status().expect("run rmdir");
                assert!(status.success(), "rmdir {dir}");
                std::thread::sleep(Duration::from_millis(700));
            }
        });
        let wanted: std::collections::HashSet<Vec<u8>> =
            dirs.iter().map(|d| d.as_bytes().to_vec()).collect();
        let seen = read_rmdirs(&mut source, &wanted, Duration::from_secs(30));
        runner.join().expect("the runs");
        assert_eq!(seen.len(), wanted.len(), "every rmdir was delivered");
        let kernel = source.wakeups();
        // Every watched record of this source defers, the host's others too (another test's
        // rmdirs): none wakes the reader at once.
        assert_eq!(
            kernel.watched, kernel_before.watched,
            "a watched syscall woke the reader at once: {kernel_before:?} → {kernel:?}"
        );
        assert!(
            kernel.deferred - kernel_before.deferred >= RUNS as u64,
            "each rmdir was left to the timer: {kernel_before:?} → {kernel:?}"
        );
        assert!(
            kernel.timer - kernel_before.timer >= RUNS as u64,
            "the timer woke the reader for each run: {kernel_before:?} → {kernel:?}"
        );
    }

    #[test]
    fn an_event_of_a_type_no_rule_watches_is_read_at_the_latest_at_max_wait() {
        // `execve` and `procexit` are the state's, not the rules': they never wake the reader
        // here. They are read at `max_wait` (1 s), which ends the minute's wait asked for.
        let Some(mut source) = open_options(wake_options(Duration::from_secs(1), u64::MAX)) else {
            return;
        };
        source.drain(&mut Vec::new()).expect("drain");
        // The exit comes while the reader waits.
        let mut child = Command::new("sh")
            .args(["-c", "sleep 0.3; exec /bin/true"])
            .spawn()
            .expect("run /bin/true");
        let start = Instant::now();
        let pid = i64::from(child.id());
        let arrived = wait_for(&mut source, start + Duration::from_secs(60), |e| {
            e.pid == pid && name_of(e) == "procexit"
        });
        assert!(child.wait().expect("wait for /bin/true").success());
        let took = arrived.map(|t| t - start);
        assert!(
            took.is_some_and(|t| t < LIVENESS),
            "the exit of /bin/true arrived after {took:?}: max_wait did not bound the wait"
        );
    }

    const BURST_ENV: &str = "VIGIL_EBPF_TEST_BURST";
    /// The burst: `BURST_CHUNKS` × `BURST_CHUNK` descriptor duplicates of stdin (an `fcntl` and
    /// a `close` record each, ~88 bytes a record in the ring: 7 MB on one CPU, whose ring holds
    /// 4 MiB), with a pause after each chunk (~1.7 MB/s) so that a reader woken at the threshold
    /// keeps up on a machine loaded with builds (the ring's headroom then covers two seconds
    /// without the reader).
    const BURST_CHUNKS: u64 = 400;
    const BURST_CHUNK: u64 = 100;
    /// `F_DUPFD_CLOEXEC`: how `try_clone_to_owned` duplicates.
    const F_DUPFD_CLOEXEC: u64 = 1030;

    /// Runs in the burst test's child: the burst, then `rmdir` of the directory named in
    /// `BURST_ENV`.
    #[test]
    fn burst_child_actions() {
        let Ok(dir) = std::env::var(BURST_ENV) else {
            return;
        };
        use std::os::fd::AsFd;
        let stdin = std::io::stdin();
        for _ in 0..BURST_CHUNKS {
            for _ in 0..BURST_CHUNK {
                drop(stdin.as_fd().try_clone_to_owned().expect("dup stdin"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        std::fs::remove_dir(&dir).expect("rmdir");
    }

    #[test]
    fn a_burst_of_unwatched_types_beyond_the_ring_is_fully_delivered() {
        // No rule watches fcntl or close: below the threshold they wake nobody. The burst holds
        // more than a ring, so it is delivered whole only if the reader reads it as it comes:
        // the kernel wakes it at the threshold (the timeout is a minute away). A reorder window
        // of 1 s: the reader, which reads every window while it holds other processes'
        // events, leaves the ring to fill past the threshold in between (~1.7 MB/s), but not
        // past its size. The rmdir at its end is watched.
        let options = BpfOptions {
            reorder_window: Duration::from_secs(1),
            ..wake_options(Duration::from_secs(60), BpfOptions::default().wake_bytes)
        };
        let Some(mut source) = open_options(options) else {
            return;
        };
        let woken = source.wakeups();
        let dir = temp_dir_path("burst");
        let exe = std::env::current_exe().expect("test binary path");
        // On one CPU: the burst fills one ring.
        let mut child = Command::new("taskset")
            .args(["-c", "0"])
            .arg(exe)
            .args([
                "--exact",
                "wakeups::burst_child_actions",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(BURST_ENV, &dir)
            .stdin(std::process::Stdio::null())
            .spawn()
            .expect("spawn the burst child");
        let pid = i64::from(child.id());
        let (mut dups, mut closes, mut done) = (0u64, 0u64, false);
        let until = Instant::now() + Duration::from_secs(60);
        let mut batch = Vec::new();
        while !done && Instant::now() < until {
            batch.clear();
            source
                .next_batch_until(&mut batch, 4096, until)
                .expect("next_batch_until");
            for e in batch.iter().filter(|e| e.pid == pid) {
                match name_of(e) {
                    "fcntl"
                        if e.param_by_name("fd") == &Param::Int(0)
                            && e.param_by_name("cmd") == &Param::Uint(F_DUPFD_CLOEXEC) =>
                    {
                        dups += 1
                    }
                    "close" => closes += 1,
                    // Delivered in time order: every record of the burst came before it.
                    "rmdir" => done = true,
                    _ => {}
                }
            }
        }
        let status = child.wait().expect("wait for the burst child");
        assert!(status.success(), "burst child: {status}");
        let stats = source.stats();
        assert!(done, "the rmdir after the burst was not delivered");
        assert_eq!(
            dups,
            BURST_CHUNKS * BURST_CHUNK,
            "every duplicate of the burst is delivered ({closes} closes; source: {stats:?})"
        );
        assert!(
            closes >= BURST_CHUNKS * BURST_CHUNK,
            "every close of the burst is delivered ({closes})"
        );
        let now = source.wakeups();
        assert!(
            now.filled > woken.filled,
            "no wakeup at the threshold: {woken:?} → {now:?}"
        );
    }

    #[test]
    #[allow(unsafe_code)]
    fn a_held_dup_does_not_wake_the_reader() {
        // The rules watch dup3 only for results 0..2 (Falco's redirect rule): a dup3 to 77 is
        // held and, its process exiting next, folded away; neither wakes the reader (a minute
        // of timeout, no size threshold). In another process a dup3 to 77 then a dup3 to 2:
        // the second wakes the reader and brings the held one along, ahead of it.
        let mut options = wake_options(Duration::from_secs(60), u64::MAX);
        options.interest = types(&["dup3"]);
        options.failed_unused = vigil_ebpf::driver_interest(&options.interest);
        options.result_masks = vec![(table::by_name("dup3").expect("dup3"), 0b111)];
        let Some(mut source) = open_options(options) else {
            return;
        };
        let file = std::fs::File::open("/").expect("open /");
        let old = std::os::fd::AsRawFd::as_raw_fd(&file);
        let run = |newfds: &[i32]| -> i64 {
            // SAFETY: the forked child makes only async-signal-safe calls (dup3, _exit) on
            // memory allocated before the fork.
            unsafe {
                let pid = libc::fork();
                assert!(pid >= 0, "fork failed");
                if pid == 0 {
                    let ok = newfds.iter().all(|&fd| libc::dup3(old, fd, 0) == fd);
                    libc::_exit(if ok { 0 } else { 3 });
                }
                let mut status = 0;
                assert_eq!(libc::waitpid(pid, &mut status, 0), pid, "waitpid");
                assert!(
                    libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
                    "dup3({old}, {newfds:?}) failed: {status:#x}"
                );
                i64::from(pid)
            }
        };
        let before = source.wakeups();
        let folded_before = source.folded_state();
        let gone = run(&[77]);
        std::thread::sleep(Duration::from_millis(300));
        let after = source.wakeups();
        assert_eq!(
            after.watched, before.watched,
            "the held dup3 (a result no rule matches) woke the reader"
        );
        // At least: the count is the host's, and other processes' loaders fold their closes
        // meanwhile (another test's `taskset rmdir`, say). That this dup3 is not delivered is
        // checked below.
        let folded = source.folded_state();
        assert!(
            folded > folded_before,
            "the dup3 held at its process's exit is folded away (and counted): \
             {folded_before} → {folded}"
        );
        let both = run(&[77, 2]);
        let mut order = Vec::new();
        let mut stamps = Vec::new();
        let seen = wait_for(&mut source, Instant::now() + LIVENESS, |e| {
            if name_of(e) == "dup3" && (e.pid == gone || e.pid == both) {
                order.push((e.pid, e.res));
                stamps.push(e.ts);
            }
            e.pid == both && e.res == 2
        });
        assert!(seen.is_some(), "the dup3 to 2 is delivered");
        assert_eq!(
            order,
            [(both, 77), (both, 2)],
            "the held dup3 goes out ahead of the next record of its thread; the one folded at \
             exit never does"
        );
        assert!(
            stamps.len() == 2 && stamps[0] == stamps[1],
            "the held dup3 is stamped when it is written, with the time of the record it goes \
             out ahead of: {stamps:?}"
        );
        assert!(
            source.wakeups().watched > after.watched,
            "the dup3 to 2 woke the reader"
        );
        drop(file);
    }
}

// Descriptor operations captured for the state engine alone (`vigil_ebpf::spec::state_only`)
// are held back in the kernel and folded (`hold_state_op` in `bpf/vigil.bpf.c`). The state
// engine, fed the delivered stream, must still name every descriptor the watched calls use.

per_hook!(held_descriptor_operations:
    held_descriptor_operations_keep_the_state_right = None,
    held_descriptor_operations_keep_the_state_right_raw = Some(Hook::Raw),
    held_descriptor_operations_keep_the_state_right_exit = Some(Hook::Exit),
    held_descriptor_operations_keep_the_state_right_tracepoint = Some(Hook::Tracepoint),
);

const FD_CHILD_ENV: &str = "VIGIL_EBPF_TEST_FD_CHILD";
/// Where the dup2 of the descriptor actions puts the file (far from the low numbers).
const DUP_TARGET: i32 = 100;
/// How many `close(dup(0))` the descriptor actions make.
const DUP_LOOP: usize = 1000;
/// How many `close(open(file))` the descriptor actions make.
const OPEN_LOOP: usize = 200;

/// Runs in the child (the test binary re-executed with `FD_CHILD_ENV` set to a file's path):
/// forks a single-threaded process (the test harness may have threads, and the kernel holds
/// back only the operations of a thread that alone owns its descriptor table) that
/// 1. opens the file (A), `dup2(A, 100)`, closes A, reads from 100: the read must name the file;
/// 2. opens it again (A again), closes it, makes an eventfd (A again, a type not captured) and
///    writes to it: the write must not name the file;
/// 3. runs `close(open(file))` `OPEN_LOOP` times (each open reuses the number the last close
///    released); then opens the file twice (F, F+1), closes both, opens it (F again), makes an
///    eventfd (F+1) and writes to it: the write must not name the file (the close of F+1 is
///    not one the open of F replaces);
///    then runs `close(dup(0))` `DUP_LOOP` times (the UnixBench `syscall` loop);
/// 4. opens the file (C), `dup2(C, 1)` twice (a result Falco's redirect rule matches), closes
///    C, reads from 1: the read must name the file;
/// 5. closes 100 and exits.
#[test]
#[allow(unsafe_code)]
fn fd_child_actions() {
    let Ok(path) = std::env::var(FD_CHILD_ENV) else {
        return;
    };
    let path = std::ffi::CString::new(path).expect("a path without NUL");
    // SAFETY: the forked child makes only async-signal-safe calls (open, dup, dup2, close,
    // read, write, eventfd, _exit) on memory allocated before the fork.
    unsafe {
        let pid = libc::fork();
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let mut buf = [0u8; 8];
            let a = libc::open(path.as_ptr(), libc::O_RDONLY);
            let ok_dup = libc::dup2(a, DUP_TARGET) == DUP_TARGET;
            libc::close(a);
            let ok_read = libc::read(DUP_TARGET, buf.as_mut_ptr().cast(), 5) == 5;
            let b = libc::open(path.as_ptr(), libc::O_RDONLY);
            libc::close(b);
            let e = libc::eventfd(0, 0);
            let one = 1u64.to_ne_bytes();
            let ok_write = libc::write(e, one.as_ptr().cast(), 8) == 8;
            for _ in 0..OPEN_LOOP {
                libc::close(libc::open(path.as_ptr(), libc::O_RDONLY));
            }
            let f = libc::open(path.as_ptr(), libc::O_RDONLY);
            let g = libc::open(path.as_ptr(), libc::O_RDONLY);
            libc::close(f);
            libc::close(g);
            let h = libc::open(path.as_ptr(), libc::O_RDONLY);
            let e2 = libc::eventfd(0, 0);
            let ok_write2 = libc::write(e2, one.as_ptr().cast(), 8) == 8;
            libc::close(h);
            libc::close(e2);
            let ok_reuse = f >= 0 && g == f + 1 && h == f && e2 == g && ok_write2;
            for _ in 0..DUP_LOOP {
                libc::close(libc::dup(0));
            }
            let c = libc::open(path.as_ptr(), libc::O_RDONLY);
            // Twice: were the first held, the second would fold it away.
            let ok_stdout = c > 1 && libc::dup2(c, 1) == 1 && libc::dup2(c, 1) == 1;
            libc::close(c);
            let ok_read1 = libc::read(1, buf.as_mut_ptr().cast(), 5) == 5;
            // The last call: its process's table goes with it.
            libc::close(DUP_TARGET);
            let ok = a >= 0 && b == a && e == a && ok_dup && ok_read && ok_write;
            let ok = ok && ok_stdout && ok_read1 && ok_reuse;
            libc::_exit(if ok { 0 } else { 3 });
        }
        let mut status = 0;
        assert_eq!(libc::waitpid(pid, &mut status, 0), pid, "waitpid");
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "the descriptor actions failed (status {status:#x}): the fd numbers were not reused \
             as planned, or a call failed"
        );
    }
}

/// The value of field `name` of `evt` as Falco prints it, or `None`.
fn field(state: &vigil_state::State, evt: &Event, name: &str) -> Option<String> {
    use vigil_fields::{Catalog, Extract};
    let field = vigil_state::catalog()
        .lookup(name, None)
        .unwrap_or_else(|e| panic!("field {name}: {e:?}"));
    let view = state.view(evt);
    let mut out = Vec::new();
    if !view.extract(&field, &mut out) {
        return None;
    }
    let mut s = String::new();
    for v in &out {
        v.render(&mut s);
    }
    Some(s)
}

/// Runs `fd_child_actions` on `path`; returns the events collected until its forked process
/// exited, and that process's id.
fn run_fd_actions(source: &mut BpfSource, path: &str) -> (Vec<Event>, i64) {
    let exe = std::env::current_exe().expect("test binary path");
    let status = Command::new(exe)
        .args([
            "--exact",
            "fd_child_actions",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(FD_CHILD_ENV, path)
        .status()
        .expect("run the child");
    assert!(status.success(), "child failed: {status}");
    // The forked process: the one that opened the file.
    let opener = |evs: &[Event]| {
        evs.iter()
            .find(|e| name_of(e) == "openat" && bytes(e.param_by_name("name")) == path.as_bytes())
            .map(|e| e.pid)
    };
    let events = collect(source, |evs| {
        opener(evs).is_some_and(|pid| evs.iter().any(|e| e.pid == pid && name_of(e) == "procexit"))
    });
    let pid = opener(&events).expect("the child's openat of the file was captured");
    (events, pid)
}

fn held_descriptor_operations(hook: Option<Hook>) {
    // What `vigil watch` asks for with rules watching openat, read and write that cannot match
    // a failure, and no capture: close and dup* are captured for the state engine alone.
    let rules = types(&["openat", "read", "write"]);
    let Some(mut source) = open_options(BpfOptions {
        interest: rules.clone(),
        failed_unused: vigil_ebpf::driver_interest(&rules),
        hook,
        ..BpfOptions::default()
    }) else {
        return;
    };
    let mut state = vigil_state::State::new(vigil_state::StateConfig::default());
    state.load_snapshot(&source.snapshot().expect("snapshot"));
    let path = temp_path("fds");
    let folded_before = source.folded_state();
    let (events, pid) = run_fd_actions(&mut source, &path);

    let mut read_name = None;
    let mut write_names = Vec::new();
    let (mut dups, mut closes, mut opens, mut last_closes) = (0, 0, 0, 0);
    for evt in &events {
        state.apply(evt);
        if evt.pid == pid {
            match name_of(evt) {
                "read" if evt.param_by_name("fd") == &Param::Int(DUP_TARGET.into()) => {
                    read_name = Some(field(&state, evt, "fd.name"));
                }
                "write" => write_names.push(field(&state, evt, "fd.name")),
                "dup" | "dup2" | "dup3" | "fcntl" => dups += 1,
                "close" => {
                    closes += 1;
                    last_closes +=
                        usize::from(evt.param_by_name("fd") == &Param::Int(DUP_TARGET.into()));
                }
                "openat" => opens += 1,
                _ => {}
            }
        }
        state.finish(evt);
    }
    assert_eq!(
        read_name,
        Some(Some(path.clone())),
        "the read from the dup2'd descriptor (its source closed) names the file"
    );
    assert!(
        write_names.len() == 2
            && write_names
                .iter()
                .all(|name| name.as_deref() != Some(path.as_str())),
        "the writes to the eventfds (the file's descriptor numbers, closed and reused by a type \
         that is not captured) do not name the file: {write_names:?}"
    );
    assert_eq!(
        last_closes, 0,
        "the close held at the process's exit is folded away, not delivered"
    );
    assert!(
        opens >= OPEN_LOOP + 5,
        "every watched open arrives: {opens} openat events"
    );
    assert!(
        dups + closes < 20,
        "close(dup(0)) x {DUP_LOOP} and close(open(file)) x {OPEN_LOOP}, the closes and dups \
         captured for the state alone, write (almost) no record: {dups} dup and {closes} close \
         events delivered"
    );
    let folded = source.folded_state() - folded_before;
    assert!(
        folded >= (2 * DUP_LOOP + OPEN_LOOP) as u64 - 20,
        "the folded operations are counted: {folded}"
    );
    // The count is host-wide and live (any process's close may fold meanwhile): the stats'
    // figure lies between two direct reads around it.
    let (low, carried, high) = (
        source.folded_state(),
        source.stats().folded_state,
        source.folded_state(),
    );
    assert!(
        low > 0 && low <= carried && carried <= high,
        "the source's stats carry the count to --stats and /metrics: {low} <= {carried} <= {high}"
    );
    assert_eq!(
        source.stats().dropped_total(),
        0,
        "folding is not a loss: {:?}",
        source.stats()
    );

    // Rules now watch dup (Falco's redirect rule does): every dup arrives, and the closes
    // captured for the state alone fold into the dups that reuse their numbers.
    let rules = types(&["openat", "read", "write", "dup"]);
    source
        .set_interest_and_failures(&rules, &vigil_ebpf::driver_interest(&rules), &[], &[])
        .expect("set_interest_and_failures");
    let (events, pid) = run_fd_actions(&mut source, &path);
    let mine: Vec<&Event> = events.iter().filter(|e| e.pid == pid).collect();
    let dups: Vec<&&Event> = mine.iter().filter(|e| name_of(e) == "dup").collect();
    let closes = mine.iter().filter(|e| name_of(e) == "close").count();
    assert!(
        dups.len() == DUP_LOOP
            && dups
                .iter()
                .all(|e| e.params == [Param::Int(0)] && e.res > 2),
        "every watched dup arrives with its fields: {} of {DUP_LOOP}",
        dups.len()
    );
    assert!(
        closes < 20,
        "the closes fold into the dups that reuse their numbers: {closes} close events"
    );

    // Rules watch every dup but only with a result in (0, 1, 2) (Falco's redirect rule):
    // a dup to another descriptor is state-only (held and folded); `dup2(C, 1)` arrives with
    // its fields; the state names the file at both reads.
    let rules = types(&["openat", "read", "write", "dup", "dup2", "dup3"]);
    let masks: Vec<(vigil_event::EventType, u64)> = ["dup", "dup2", "dup3"]
        .iter()
        .map(|n| (table::by_name(n).expect("a dup type"), 0b111))
        .collect();
    source
        .set_interest_and_failures(&rules, &vigil_ebpf::driver_interest(&rules), &masks, &[])
        .expect("set_interest_and_failures");
    let folded_before = source.folded_state();
    let (events, pid) = run_fd_actions(&mut source, &path);
    let (mut dups, mut closes) = (0, 0);
    let mut reads = Vec::new();
    let mut to_stdout = Vec::new();
    for evt in &events {
        state.apply(evt);
        if evt.pid == pid {
            match name_of(evt) {
                "read" => reads.push((
                    evt.param_by_name("fd").clone(),
                    field(&state, evt, "fd.name"),
                )),
                "dup2" if evt.res == 1 => to_stdout.push(evt.params.clone()),
                "dup" | "dup2" | "dup3" => dups += 1,
                "close" => closes += 1,
                _ => {}
            }
        }
        state.finish(evt);
    }
    assert!(
        dups + closes < 20,
        "close(dup(0)) x {DUP_LOOP}, watched only for results 0..2, writes (almost) no record: \
         {dups} dup and {closes} close events delivered"
    );
    let folded = source.folded_state() - folded_before;
    assert!(
        folded >= (2 * DUP_LOOP + OPEN_LOOP) as u64 - 20,
        "the folded operations are counted: {folded}"
    );
    assert!(
        to_stdout.len() == 2
            && to_stdout
                .iter()
                .all(|p| matches!(p.as_slice(), [Param::Int(c), Param::Int(1)] if *c > 1)),
        "both dup2(C, 1), a result the rules match, arrive with their fields (none held): {to_stdout:?}"
    );
    for fd in [DUP_TARGET, 1] {
        assert!(
            reads
                .iter()
                .any(|(f, name)| f == &Param::Int(fd.into()) && name.as_deref() == Some(&*path)),
            "the read from descriptor {fd} names the file: {reads:?}"
        );
    }

    // Rules now watch dup2 and close (a reload): every call arrives, with its fields.
    let rules = types(&["openat", "read", "write", "dup2", "close"]);
    source
        .set_interest_and_failures(&rules, &vigil_ebpf::driver_interest(&rules), &[], &[])
        .expect("set_interest_and_failures");
    let (events, pid) = run_fd_actions(&mut source, &path);
    let _ = std::fs::remove_file(&path);
    let mine: Vec<&Event> = events.iter().filter(|e| e.pid == pid).collect();
    let fd_a = mine
        .iter()
        .find(|e| name_of(e) == "openat")
        .map(|e| e.res)
        .expect("the openat");
    assert!(
        mine.iter().any(|e| name_of(e) == "dup2"
            && e.params == [Param::Int(fd_a), Param::Int(DUP_TARGET.into())]
            && e.res == i64::from(DUP_TARGET)),
        "the watched dup2 arrives with its fields: {:?}",
        mine.iter()
            .filter(|e| name_of(e) == "dup2")
            .collect::<Vec<_>>()
    );
    let closes = mine.iter().filter(|e| name_of(e) == "close").count();
    let dups = mine.iter().filter(|e| name_of(e) == "dup").count();
    assert!(
        closes >= DUP_LOOP + OPEN_LOOP + 2
            && dups == DUP_LOOP
            && mine.iter().any(|e| name_of(e) == "close"
                && e.param_by_name("fd") == &Param::Int(DUP_TARGET.into())),
        "every watched close arrives, and the dup each closes: {closes} close, {dups} dup"
    );
}

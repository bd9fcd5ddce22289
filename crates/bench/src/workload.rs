//! The workloads, run inside a `vigil bench worker` process so that a tracer or wrapper can be
//! put in front of them: UnixBench-style tests (same units and baselines as UnixBench 5.1.3's
//! `pgms/index.base`), two per-syscall cost loops, and the paced loads of `exec-rate` and
//! `capacity`. Each measures itself from its first loop to its last, so wrapper start-up is
//! not counted.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::stats::Pacer;
use crate::{sys, BenchError};

/// The unit a test reports its score in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Loops per second (higher is better).
    Lps,
    /// Loops per minute (higher is better).
    Lpm,
    /// Kilobytes per second (higher is better).
    KBps,
    /// Nanoseconds per loop (lower is better).
    NsPerLoop,
    /// Requests per second of a server under its load client (higher is better).
    ReqPerSec,
}

impl Unit {
    pub fn as_str(self) -> &'static str {
        match self {
            Unit::Lps => "lps",
            Unit::Lpm => "lpm",
            Unit::KBps => "KBps",
            Unit::NsPerLoop => "ns/loop",
            Unit::ReqPerSec => "req/s",
        }
    }

    pub fn higher_is_better(self) -> bool {
        self != Unit::NsPerLoop
    }
}

/// A test of `vigil bench overhead`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Test {
    /// UnixBench "System Call Overhead": `close(dup(0)); getpid(); getuid(); umask(022)`.
    Syscall,
    /// `getpid()` alone (a syscall no rule watches): ns per call.
    Getpid,
    /// `openat` + `close` of a temporary file (a watched syscall): ns per pair.
    OpenClose,
    /// UnixBench "Pipe Throughput": write and read 512 bytes on one pipe.
    Pipe,
    /// UnixBench "Pipe-based Context Switching": a round trip between two processes.
    Context1,
    /// UnixBench "Process Creation": fork, the child exits, the parent reaps it.
    Spawn,
    /// UnixBench "Execl Throughput": the process re-executes itself with a counter.
    Execl,
    /// UnixBench "File Copy 256 bufsize 500 maxblocks".
    FsBuffer,
    /// UnixBench "File Copy 1024 bufsize 2000 maxblocks".
    FsTime,
    /// UnixBench "File Copy 4096 bufsize 8000 maxblocks".
    FsDisk,
    /// UnixBench "Shell Scripts (1 concurrent)": a sort/od/grep/tee/wc script per loop.
    Shell1,
    /// `redis-server` on loopback under `redis-benchmark` (SET and GET): run by the bench
    /// itself, not in a worker (`crate::servers`).
    Redis,
    /// `nginx` serving a static file on loopback under `wrk` (`crate::servers`).
    Nginx,
}

impl Test {
    /// Every test, in report order.
    pub const ALL: [Test; 11] = [
        Test::Syscall,
        Test::Getpid,
        Test::OpenClose,
        Test::Pipe,
        Test::Context1,
        Test::Spawn,
        Test::Execl,
        Test::FsBuffer,
        Test::FsTime,
        Test::FsDisk,
        Test::Shell1,
    ];

    /// The real workloads from Debian's packages, run by the bench around a server it starts
    /// (not part of `all`: they need the packages).
    pub const SERVERS: [Test; 2] = [Test::Redis, Test::Nginx];

    /// The short name (UnixBench's where it has one).
    pub fn name(self) -> &'static str {
        match self {
            Test::Syscall => "syscall",
            Test::Getpid => "getpid",
            Test::OpenClose => "openclose",
            Test::Pipe => "pipe",
            Test::Context1 => "context1",
            Test::Spawn => "spawn",
            Test::Execl => "execl",
            Test::FsBuffer => "fsbuffer",
            Test::FsTime => "fstime",
            Test::FsDisk => "fsdisk",
            Test::Shell1 => "shell1",
            Test::Redis => "redis",
            Test::Nginx => "nginx",
        }
    }

    pub fn parse(name: &str) -> Option<Test> {
        Test::ALL
            .into_iter()
            .chain(Test::SERVERS)
            .find(|t| t.name() == name)
    }

    /// The title UnixBench prints (or ours for the two extra loops).
    pub fn title(self) -> &'static str {
        match self {
            Test::Syscall => "System Call Overhead",
            Test::Getpid => "getpid loop (unwatched syscall)",
            Test::OpenClose => "open+close loop (watched syscall)",
            Test::Pipe => "Pipe Throughput",
            Test::Context1 => "Pipe-based Context Switching",
            Test::Spawn => "Process Creation",
            Test::Execl => "Execl Throughput",
            Test::FsBuffer => "File Copy 256 bufsize 500 maxblocks",
            Test::FsTime => "File Copy 1024 bufsize 2000 maxblocks",
            Test::FsDisk => "File Copy 4096 bufsize 8000 maxblocks",
            Test::Shell1 => "Shell Scripts (1 concurrent)",
            Test::Redis => "redis-server under redis-benchmark (SET, GET)",
            Test::Nginx => "nginx static file under wrk",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Test::Getpid | Test::OpenClose => Unit::NsPerLoop,
            Test::FsBuffer | Test::FsTime | Test::FsDisk => Unit::KBps,
            Test::Shell1 => Unit::Lpm,
            Test::Redis | Test::Nginx => Unit::ReqPerSec,
            _ => Unit::Lps,
        }
    }

    /// UnixBench's baseline score ("George", a SPARCstation 20-61; `pgms/index.base`), for the
    /// tests that count in the index.
    pub fn baseline(self) -> Option<f64> {
        match self {
            Test::Syscall => Some(15_000.0),
            Test::Pipe => Some(12_440.0),
            Test::Context1 => Some(4_000.0),
            Test::Spawn => Some(126.0),
            Test::Execl => Some(43.0),
            Test::FsBuffer => Some(1_655.0),
            Test::FsTime => Some(3_960.0),
            Test::FsDisk => Some(5_800.0),
            Test::Shell1 => Some(42.4),
            Test::Getpid | Test::OpenClose | Test::Redis | Test::Nginx => None,
        }
    }

    /// (buffer size, blocks) of the file-copy tests.
    fn copy_shape(self) -> Option<(usize, usize)> {
        match self {
            Test::FsBuffer => Some((256, 500)),
            Test::FsTime => Some((1024, 2000)),
            Test::FsDisk => Some((4096, 8000)),
            _ => None,
        }
    }

    /// Parses a comma-separated list (`all` for every test).
    pub fn parse_list(text: &str) -> Result<Vec<Test>, BenchError> {
        if text.trim() == "all" {
            return Ok(Test::ALL.to_vec());
        }
        let mut tests = Vec::new();
        for name in text.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let test = Test::parse(name).ok_or_else(|| BenchError::Invalid {
                what: "test list".into(),
                detail: format!(
                    "unknown test `{name}` (known: {}, and the servers {})",
                    Test::ALL.map(Test::name).join(", "),
                    Test::SERVERS.map(Test::name).join(", ")
                ),
            })?;
            if !tests.contains(&test) {
                tests.push(test);
            }
        }
        if tests.is_empty() {
            return Err(BenchError::Invalid {
                what: "test list".into(),
                detail: "no test named".into(),
            });
        }
        Ok(tests)
    }
}

/// What one worker run measured; written as one JSON object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkerResult {
    pub test: String,
    pub iterations: u64,
    pub elapsed_s: f64,
    pub score: f64,
    pub unit: String,
}

impl WorkerResult {
    fn new(test: &str, unit: Unit, iterations: u64, elapsed: Duration, bytes: u64) -> Self {
        let secs = elapsed.as_secs_f64().max(1e-9);
        let score = match unit {
            Unit::Lps => iterations as f64 / secs,
            Unit::Lpm => iterations as f64 / secs * 60.0,
            Unit::KBps => bytes as f64 / 1024.0 / secs,
            Unit::NsPerLoop => secs * 1e9 / iterations.max(1) as f64,
            Unit::ReqPerSec => iterations as f64 / secs,
        };
        WorkerResult {
            test: test.to_string(),
            iterations,
            elapsed_s: secs,
            score,
            unit: unit.as_str().to_string(),
        }
    }
}

/// Where and how long a worker runs.
#[derive(Clone, Debug)]
pub struct WorkerParams {
    pub duration: Duration,
    /// Scratch directory for files (created if missing; the worker removes what it made).
    pub dir: PathBuf,
    /// The `vigil` binary (for `execl` and the `context1` peer).
    pub exe: PathBuf,
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> BenchError {
    let what = what.into();
    move |source| BenchError::Io { what, source }
}

/// Runs loops of `body` in batches of `batch` until `duration` has passed (at least one
/// batch), returning (loops, elapsed).
fn timed_loop(
    duration: Duration,
    batch: u64,
    mut body: impl FnMut() -> Result<(), BenchError>,
) -> Result<(u64, Duration), BenchError> {
    let start = Instant::now();
    let mut loops = 0u64;
    loop {
        for _ in 0..batch {
            body()?;
        }
        loops += batch;
        let elapsed = start.elapsed();
        if elapsed >= duration {
            return Ok((loops, elapsed));
        }
    }
}

/// Runs one test (all but `execl`, which replaces the process: see [`execl_step`]).
pub fn run_test(test: Test, params: &WorkerParams) -> Result<WorkerResult, BenchError> {
    fs::create_dir_all(&params.dir).map_err(io_err(format!(
        "create scratch directory `{}`",
        params.dir.display()
    )))?;
    let d = params.duration;
    let unit = test.unit();
    let (loops, elapsed, bytes) = match test {
        Test::Syscall => {
            let (n, e) = timed_loop(d, 1000, || {
                drop(sys::dup_stdin().map_err(io_err("dup stdin"))?);
                std::hint::black_box(sys::getpid());
                std::hint::black_box(sys::getuid());
                sys::umask(0o22);
                Ok(())
            })?;
            (n, e, 0)
        }
        Test::Getpid => {
            let (n, e) = timed_loop(d, 10_000, || {
                std::hint::black_box(sys::getpid());
                Ok(())
            })?;
            (n, e, 0)
        }
        Test::OpenClose => {
            let path = params
                .dir
                .join(format!("openclose-{}.dat", std::process::id()));
            File::create(&path).map_err(io_err(format!("create `{}`", path.display())))?;
            let result = timed_loop(d, 1000, || {
                File::open(&path).map_err(io_err(format!("open `{}`", path.display())))?;
                Ok(())
            });
            let _ = fs::remove_file(&path);
            let (n, e) = result?;
            (n, e, 0)
        }
        Test::Pipe => {
            let (r, w) = sys::pipe().map_err(io_err("create pipe"))?;
            let mut r = File::from(r);
            let mut w = File::from(w);
            let mut buf = [0u8; 512];
            let (n, e) = timed_loop(d, 1000, || {
                w.write_all(&buf).map_err(io_err("write pipe"))?;
                r.read_exact(&mut buf).map_err(io_err("read pipe"))?;
                Ok(())
            })?;
            (n, e, 0)
        }
        Test::Context1 => {
            let (n, e) = context1(params)?;
            (n, e, 0)
        }
        Test::Spawn => {
            let (n, e) = timed_loop(d, 10, || sys::fork_exit_wait().map_err(io_err("fork")))?;
            (n, e, 0)
        }
        Test::Execl => {
            return Err(BenchError::Invalid {
                what: "test".into(),
                detail: "execl runs through execl_step".into(),
            })
        }
        Test::Redis | Test::Nginx => {
            return Err(BenchError::Invalid {
                what: "test".into(),
                detail: format!(
                    "{} runs a server from the bench itself, not in a worker",
                    test.name()
                ),
            })
        }
        Test::FsBuffer | Test::FsTime | Test::FsDisk => {
            let (size, blocks) = test.copy_shape().expect("file-copy tests have a shape");
            file_copy(params, size, blocks)?
        }
        Test::Shell1 => {
            let (n, e) = shell(params)?;
            (n, e, 0)
        }
    };
    Ok(WorkerResult::new(test.name(), unit, loops, elapsed, bytes))
}

/// The two-process ping-pong: this process writes a 4-byte counter to the peer's stdin, the
/// peer (`vigil bench worker context1-peer`) echoes it back on its stdout.
fn context1(params: &WorkerParams) -> Result<(u64, Duration), BenchError> {
    let mut child = Command::new(&params.exe)
        .args(["bench", "worker", "context1-peer"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(io_err(format!("start `{}`", params.exe.display())))?;
    let mut to_peer = child.stdin.take().expect("stdin was piped");
    let mut from_peer = child.stdout.take().expect("stdout was piped");
    let mut counter = 0u32;
    let result = timed_loop(params.duration, 100, || {
        to_peer
            .write_all(&counter.to_le_bytes())
            .map_err(io_err("write to context1 peer"))?;
        let mut back = [0u8; 4];
        from_peer
            .read_exact(&mut back)
            .map_err(io_err("read from context1 peer"))?;
        if u32::from_le_bytes(back) != counter {
            return Err(BenchError::Invalid {
                what: "context1 reply".into(),
                detail: "peer echoed a different counter".into(),
            });
        }
        counter = counter.wrapping_add(1);
        Ok(())
    });
    drop(to_peer);
    let _ = child.wait();
    result
}

/// The peer side of `context1`: echo 4-byte messages from stdin to stdout until end of input.
pub fn context1_peer() -> Result<(), BenchError> {
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    let mut buf = [0u8; 4];
    loop {
        match input.read_exact(&mut buf) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(io_err("read stdin")(e)),
        }
        output.write_all(&buf).map_err(io_err("write stdout"))?;
        output.flush().map_err(io_err("flush stdout"))?;
    }
}

/// UnixBench's fstime copy: a source file of `blocks × size` bytes is copied block by block
/// (unbuffered read + write) to a destination; both rewind at the end of the source.
fn file_copy(
    params: &WorkerParams,
    size: usize,
    blocks: usize,
) -> Result<(u64, Duration, u64), BenchError> {
    let pid = std::process::id();
    let src_path = params.dir.join(format!("fscopy-src-{pid}-{size}.dat"));
    let dst_path = params.dir.join(format!("fscopy-dst-{pid}-{size}.dat"));
    let result = (|| {
        let block = vec![0x5au8; size];
        let mut src = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&src_path)
            .map_err(io_err(format!("create `{}`", src_path.display())))?;
        for _ in 0..blocks {
            src.write_all(&block).map_err(io_err("fill copy source"))?;
        }
        let mut dst =
            File::create(&dst_path).map_err(io_err(format!("create `{}`", dst_path.display())))?;
        src.seek(SeekFrom::Start(0))
            .map_err(io_err("rewind copy source"))?;
        let mut buf = vec![0u8; size];
        let mut bytes = 0u64;
        let (loops, elapsed) = timed_loop(params.duration, 64, || {
            let n = src.read(&mut buf).map_err(io_err("read copy source"))?;
            if n == 0 {
                src.seek(SeekFrom::Start(0))
                    .map_err(io_err("rewind copy source"))?;
                dst.seek(SeekFrom::Start(0))
                    .map_err(io_err("rewind copy destination"))?;
                return Ok(());
            }
            dst.write_all(&buf[..n])
                .map_err(io_err("write copy destination"))?;
            bytes += n as u64;
            Ok(())
        })?;
        Ok((loops, elapsed, bytes))
    })();
    let _ = fs::remove_file(&src_path);
    let _ = fs::remove_file(&dst_path);
    result
}

/// The shell script each `shell1` loop runs with `sh -c` (in the scratch directory): sort a
/// text file, dump and sort it numerically, search, count, clean up.
const SHELL_SCRIPT: &str = "sort <input.txt >sorted.$$; od sorted.$$ | sort -n -k 1 >od.$$; \
grep the sorted.$$ | tee grep.$$ | wc >wc.$$; rm -f sorted.$$ od.$$ grep.$$ wc.$$";

fn shell(params: &WorkerParams) -> Result<(u64, Duration), BenchError> {
    let dir = params.dir.join(format!("shell-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(io_err(format!("create `{}`", dir.display())))?;
    let mut text = String::new();
    let words = [
        "the", "quick", "brown", "fox", "jumps", "over", "lazy", "dog",
    ];
    for i in 0..400usize {
        let line: Vec<&str> = (0..8)
            .map(|j| words[(i * 7 + j * 3) % words.len()])
            .collect();
        text.push_str(&format!("{} {i}\n", line.join(" ")));
    }
    let result = (|| {
        fs::write(dir.join("input.txt"), text).map_err(io_err("write shell test input"))?;
        timed_loop(params.duration, 1, || {
            let status = Command::new("sh")
                .args(["-c", SHELL_SCRIPT])
                .current_dir(&dir)
                .stdin(Stdio::null())
                .status()
                .map_err(io_err("run sh"))?;
            if status.success() {
                Ok(())
            } else {
                Err(BenchError::Invalid {
                    what: "shell script".into(),
                    detail: format!("sh exited with {status}"),
                })
            }
        })
    })();
    let _ = fs::remove_dir_all(&dir);
    result
}

fn epoch_nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// The state an `execl` chain carries from one image to the next: `START_NS:COUNT`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExeclChain {
    pub start_ns: u128,
    pub count: u64,
}

impl ExeclChain {
    pub fn first() -> ExeclChain {
        ExeclChain {
            start_ns: epoch_nanos(),
            count: 0,
        }
    }

    pub fn parse(text: &str) -> Option<ExeclChain> {
        let (start, count) = text.split_once(':')?;
        Some(ExeclChain {
            start_ns: start.parse().ok()?,
            count: count.parse().ok()?,
        })
    }

    pub fn encode(self) -> String {
        format!("{}:{}", self.start_ns, self.count)
    }
}

/// One link of UnixBench's execl test: when the duration has passed, returns the result;
/// otherwise re-executes `exe bench worker execl … --chain START:COUNT+1` (and only returns
/// on failure). `extra_args` are passed along unchanged (`--duration`, `--result`, `--dir`).
pub fn execl_step(
    exe: &Path,
    chain: ExeclChain,
    duration: Duration,
    extra_args: &[String],
) -> Result<WorkerResult, BenchError> {
    let elapsed_ns = epoch_nanos().saturating_sub(chain.start_ns);
    let elapsed = Duration::from_nanos(u64::try_from(elapsed_ns).unwrap_or(u64::MAX));
    if chain.count > 0 && elapsed >= duration {
        return Ok(WorkerResult::new(
            Test::Execl.name(),
            Unit::Lps,
            chain.count,
            elapsed,
            0,
        ));
    }
    let next = ExeclChain {
        start_ns: chain.start_ns,
        count: chain.count + 1,
    };
    let err = Command::new(exe)
        .args(["bench", "worker", "execl"])
        .args(extra_args)
        .args(["--chain", &next.encode()])
        .exec();
    Err(io_err(format!("exec `{}`", exe.display()))(err))
}

/// A paced load: `op` at `rate` per second for `duration`; returns the loops actually done.
fn paced(
    rate: f64,
    duration: Duration,
    mut op: impl FnMut() -> Result<(), BenchError>,
) -> Result<(u64, Duration), BenchError> {
    let pacer = Pacer::new(rate);
    let start = Instant::now();
    let mut done = 0u64;
    loop {
        let elapsed = start.elapsed();
        if elapsed >= duration {
            return Ok((done, elapsed));
        }
        let due = pacer.due(elapsed);
        while done < due {
            op()?;
            done += 1;
            if done & 255 == 0 && start.elapsed() >= duration {
                break;
            }
        }
        let wait = pacer.wait(done, start.elapsed());
        if !wait.is_zero() {
            std::thread::sleep(wait.min(duration.saturating_sub(start.elapsed())));
        }
    }
}

/// `exec-rate`'s load: fork + exec + wait of `program` at `rate` per second.
pub fn exec_rate(
    program: &Path,
    rate: f64,
    duration: Duration,
) -> Result<WorkerResult, BenchError> {
    let (n, e) = paced(rate, duration, || {
        Command::new(program)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map_err(io_err(format!("run `{}`", program.display())))?;
        Ok(())
    })?;
    Ok(WorkerResult::new("exec-rate", Unit::Lps, n, e, 0))
}

/// The alert canary: opens `path` for reading `count` times, `interval` apart (a sensitive
/// file such as `/etc/shadow`, which a rule like Falco's `Read sensitive file untrusted`
/// reports on every open). The caller puts a tag in the command line, which the alerts'
/// `proc.cmdline` carries. Every open must succeed: a failed one is not an event those rules see.
pub fn canary(path: &Path, count: u64, interval: Duration) -> Result<WorkerResult, BenchError> {
    let start = Instant::now();
    for i in 0..count {
        if i > 0 {
            std::thread::sleep(interval);
        }
        File::open(path).map_err(io_err(format!("open `{}`", path.display())))?;
    }
    Ok(WorkerResult::new(
        "canary",
        Unit::Lps,
        count,
        start.elapsed(),
        0,
    ))
}

/// `capacity`'s load: `openat` + `close` of `path` at `rate` per second.
pub fn open_load(path: &Path, rate: f64, duration: Duration) -> Result<WorkerResult, BenchError> {
    if !path.exists() {
        File::create(path).map_err(io_err(format!("create `{}`", path.display())))?;
    }
    let (n, e) = paced(rate, duration, || {
        File::open(path).map_err(io_err(format!("open `{}`", path.display())))?;
        Ok(())
    })?;
    Ok(WorkerResult::new("open-load", Unit::Lps, n, e, 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_baselines() {
        for t in Test::ALL {
            assert_eq!(Test::parse(t.name()), Some(t), "{}", t.name());
            assert_eq!(
                t.baseline().is_some(),
                t.unit().higher_is_better(),
                "{}: only the UnixBench tests have baselines",
                t.name()
            );
        }
        assert_eq!(Test::Syscall.baseline(), Some(15_000.0), "syscall baseline");
        assert_eq!(Test::Shell1.baseline(), Some(42.4), "shell1 baseline");
    }

    #[test]
    fn parse_list_all_and_errors() {
        assert_eq!(Test::parse_list("all").unwrap().len(), 11, "all");
        assert_eq!(
            Test::parse_list("pipe, spawn,pipe").unwrap(),
            vec![Test::Pipe, Test::Spawn],
            "dedup"
        );
        assert!(Test::parse_list("nope").is_err(), "unknown");
        assert!(Test::parse_list(",").is_err(), "empty");
    }

    #[test]
    fn result_units() {
        let r = WorkerResult::new("x", Unit::Lps, 500, Duration::from_secs(2), 0);
        assert_eq!(r.score, 250.0, "lps");
        let r = WorkerResult::new("x", Unit::Lpm, 5, Duration::from_secs(30), 0);
        assert_eq!(r.score, 10.0, "lpm");
        let r = WorkerResult::new("x", Unit::KBps, 1, Duration::from_secs(2), 4096);
        assert_eq!(r.score, 2.0, "KBps");
        let r = WorkerResult::new("x", Unit::NsPerLoop, 1000, Duration::from_micros(1), 0);
        assert_eq!(r.score, 1.0, "ns per loop");
    }

    #[test]
    fn execl_chain_round_trip() {
        let c = ExeclChain {
            start_ns: 123,
            count: 7,
        };
        assert_eq!(ExeclChain::parse(&c.encode()), Some(c), "round trip");
        assert_eq!(ExeclChain::parse("x:1"), None, "garbage");
    }

    #[test]
    fn in_process_tests_run_briefly() {
        let dir = std::env::temp_dir().join(format!("vigil-bench-unit-{}", std::process::id()));
        let params = WorkerParams {
            duration: Duration::from_millis(20),
            dir: dir.clone(),
            exe: PathBuf::from("/nonexistent"),
        };
        for t in [
            Test::Syscall,
            Test::Getpid,
            Test::OpenClose,
            Test::Pipe,
            Test::Spawn,
            Test::FsBuffer,
        ] {
            let r = run_test(t, &params).unwrap_or_else(|e| panic!("{}: {e}", t.name()));
            assert!(r.iterations > 0 && r.score > 0.0, "{}: {r:?}", t.name());
        }
        let left: Vec<_> = fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "workers clean up: {left:?}");
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn paced_load_runs() {
        let r = exec_rate(Path::new("/bin/true"), 50.0, Duration::from_millis(100)).unwrap();
        assert!(r.iterations >= 1, "{r:?}");
        let path = std::env::temp_dir().join(format!("vigil-bench-load-{}", std::process::id()));
        let r = open_load(&path, 1000.0, Duration::from_millis(50)).unwrap();
        assert!(r.iterations >= 1, "{r:?}");
        let _ = fs::remove_file(&path);
    }
}

//! Alert throughput per output kind, end to end through the `vigil` binary: `vigil replay` of a
//! capture that raises N alerts (default 20000; `VIGIL_BENCH_ALERTS`), timed from start until
//! the receiver holds every alert, for: no output (the baseline: replay and rule evaluation),
//! stdout into /dev/null, a file, syslog into a real rsyslogd (private socket, as in
//! `tests/e2e/receivers.rs`), a keep-alive program (`cat > /dev/null`) and HTTP to the loopback
//! Falcosidekick-contract receiver (`keep_alive: true`). Each kind runs `VIGIL_BENCH_RUNS` times (default 3); the
//! median is printed as a Markdown table row.
//!
//! `cargo bench -p vigil --bench receivers` (needs rsyslogd for the syslog row).

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::fs;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use vigil_test_support::receivers::{
    self, replay_command, rsyslogd, write_capture, Rsyslog, SidekickReceiver,
};
use vigil_test_support::scratch;

/// The `vigil` of this build.
const VIGIL: &str = env!("CARGO_BIN_EXE_vigil");

/// One timed delivery of every alert through one output kind.
type Run = Box<dyn Fn() -> Duration>;

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Runs `vigil replay` with `args` ([`replay_command`]), stdout into /dev/null; the time
/// until it exits.
fn replay(dir: &Path, args: &[String]) -> Duration {
    let start = Instant::now();
    let status = replay_command(Path::new(VIGIL), dir, args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .status()
        .expect("run vigil replay");
    assert!(status.success(), "vigil replay {args:?} failed");
    start.elapsed()
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "receiver did not get every alert");
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn opts(pairs: &[String]) -> Vec<String> {
    pairs
        .iter()
        .flat_map(|p| ["-o".to_owned(), p.clone()])
        .collect()
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing to run.
    if !std::env::args().any(|a| a == "--bench") {
        return;
    }
    let alerts = env_u64("VIGIL_BENCH_ALERTS", 20_000);
    let runs = env_u64("VIGIL_BENCH_RUNS", 3);
    let dir = scratch("bench");
    fs::write(dir.join("rules.yaml"), receivers::rules()).expect("write rules");
    write_capture(&dir.join("capture.jsonl"), alerts);
    let limit = Duration::from_secs(600);

    let mut kinds: Vec<(&str, Run)> = Vec::new();
    {
        let d = dir.clone();
        kinds.push(("none (baseline)", Box::new(move || replay(&d, &[]))));
    }
    {
        let d = dir.clone();
        kinds.push((
            "stdout > /dev/null",
            Box::new(move || replay(&d, &opts(&["stdout_output.enabled=true".into()]))),
        ));
    }
    {
        let d = dir.clone();
        kinds.push((
            "file",
            Box::new(move || {
                let file = d.join("alerts.txt");
                let _ = fs::remove_file(&file);
                replay(
                    &d,
                    &opts(&[format!(
                        "file_output={{enabled: true, keep_alive: true, filename: {}}}",
                        file.display()
                    )]),
                )
            }),
        ));
    }
    match rsyslogd() {
        Some(bin) => {
            let d = dir.clone();
            kinds.push((
                "syslog (rsyslogd)",
                Box::new(move || {
                    let rsyslog = Rsyslog::start(&bin, &d, true);
                    let start = Instant::now();
                    replay(
                        &d,
                        &opts(&[format!(
                            "syslog_output={{enabled: true, socket: {}}}",
                            rsyslog.socket.display()
                        )]),
                    );
                    wait_until(limit, || rsyslog.logged().len() as u64 >= alerts);
                    start.elapsed()
                }),
            ));
        }
        None => eprintln!("rsyslogd not installed: no syslog row"),
    }
    {
        let d = dir.clone();
        kinds.push((
            "program (keep_alive, cat > /dev/null)",
            Box::new(move || {
                replay(
                    &d,
                    &opts(&["program_output={enabled: true, keep_alive: true, \
                             program: \"cat > /dev/null\"}"
                        .into()]),
                )
            }),
        ));
    }
    {
        let d = dir.clone();
        kinds.push((
            "http (loopback receiver)",
            Box::new(move || {
                let receiver = SidekickReceiver::start();
                let start = Instant::now();
                replay(
                    &d,
                    &opts(&[
                        "json_output=true".into(),
                        "http_output.enabled=true".into(),
                        "http_output.keep_alive=true".into(),
                        format!("http_output.url={}", receiver.url()),
                    ]),
                );
                wait_until(limit, || receiver.count() as u64 >= alerts);
                let t = start.elapsed();
                eprintln!(
                    "http: {} requests over {} connections",
                    receiver.count(),
                    receiver
                        .connections
                        .load(std::sync::atomic::Ordering::SeqCst)
                );
                t
            }),
        ));
    }

    println!("alerts per run: {alerts}, runs per kind: {runs} (median)");
    println!("| output | seconds | alerts/s | time over baseline |");
    println!("| --- | --- | --- | --- |");
    let mut baseline = None;
    for (name, run) in &kinds {
        let mut times: Vec<Duration> = (0..runs).map(|_| run()).collect();
        times.sort();
        let t = times[times.len() / 2].as_secs_f64();
        let base = *baseline.get_or_insert(t);
        println!(
            "| {name} | {t:.2} | {:.0} | {:+.2} s |",
            alerts as f64 / t,
            t - base
        );
    }
    let _ = fs::remove_dir_all(&dir);
}

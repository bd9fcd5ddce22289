//! The network outputs side by side, each alone and with a spool (as a lossless deployment
//! runs them): `http_output` (one POST per alert, keep-alive), `otlp_output` (batched OTLP
//! requests) and `kafka_output` (batched produce requests, acks=all, lz4). For each:
//!
//! - **alerts/s**: 20,000 alerts emitted at once, the time until the receiver has them all
//!   (run it pinned to one core: `taskset -c 0`);
//! - **CPU at 1,000 alerts/s**: alerts emitted at 1,000/s for 5 s; the CPU time of the agent's
//!   side (the emitting thread, the delivery worker and the spool's sync thread, from
//!   `/proc/self/task/*/stat`), as a share of one core.
//!
//! Receivers: HTTP and OTLP go to `VIGIL_BENCH_HTTP` / `VIGIL_BENCH_OTLP` when set (a real
//! Collector), else to a loopback receiver in this process (its threads are not counted);
//! Kafka runs only with `VIGIL_BENCH_KAFKA=host:port` (and `VIGIL_BENCH_KAFKA_TOPIC`, default
//! `bench`). `cargo bench -p vigil-output --bench fleet`.

#![allow(clippy::print_stdout)]

use std::borrow::Cow;
use std::time::{Duration, Instant};

use vigil_output::settings::{HttpOutput, KafkaOutput, OtlpOutput, OutputSettings, StdoutOutput};
use vigil_output::{Alert, Formatter, Metrics, Outputs};

mod common;
use common::receiver;

fn alert(i: u64) -> Alert {
    Alert {
        time: 1_700_000_000_000_000_000 + i * 1000,
        rule: "Read sensitive file untrusted".into(),
        priority: "Warning".into(),
        source: "syscall".into(),
        tags: vec!["filesystem".into(), "mitre_credential_access".into()],
        hostname: "bench".into(),
        output: "Sensitive file opened for reading by non-trusted program | file=/etc/shadow \
                 process=cat user=root command=cat /etc/shadow"
            .into(),
        output_fields: vec![
            (
                "fd.name".into(),
                Some(vigil_fields::Value::Str(Cow::Borrowed(b"/etc/shadow"))),
            ),
            ("proc.pid".into(), Some(vigil_fields::Value::U64(4242 + i))),
            (
                "container.id".into(),
                Some(vigil_fields::Value::Str(Cow::Borrowed(b"host"))),
            ),
        ],
    }
}

/// CPU seconds of this process's threads whose name starts with one of `prefixes`.
fn thread_cpu(prefixes: &[&str], main: bool) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    let mut total = 0.0;
    let me = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    for entry in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
        let Some(open) = stat.find('(') else { continue };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let name = &stat[open + 1..close];
        let is_main = main && stat.split(' ').next() == me.split(' ').next();
        if !is_main && !prefixes.iter().any(|p| name.starts_with(p)) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        let utime: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        let stime: f64 = fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
        total += (utime + stime) / tick;
    }
    total
}

fn settings(name: &str, spool: &std::path::Path) -> Option<OutputSettings> {
    let mut s = OutputSettings {
        stdout_output: StdoutOutput { enabled: false },
        ..OutputSettings::default()
    };
    s.syslog_output.enabled = false;
    s.format = Formatter {
        json: true,
        ..Formatter::default()
    };
    let spool_dir = Some(spool.to_owned());
    match name {
        "http" => {
            let url = std::env::var("VIGIL_BENCH_HTTP").unwrap_or_else(|_| receiver() + "/");
            s.http_output = HttpOutput {
                enabled: true,
                url,
                keep_alive: true,
                spool_dir,
                ..HttpOutput::default()
            };
        }
        "otlp" => {
            let endpoint = std::env::var("VIGIL_BENCH_OTLP").unwrap_or_else(|_| receiver());
            s.otlp_output = OtlpOutput {
                enabled: true,
                endpoint,
                spool_dir,
                ..OtlpOutput::default()
            };
        }
        _ => {
            let broker = std::env::var("VIGIL_BENCH_KAFKA").ok()?;
            s.kafka_output = KafkaOutput {
                enabled: true,
                brokers: vec![broker],
                topic: std::env::var("VIGIL_BENCH_KAFKA_TOPIC").unwrap_or_else(|_| "bench".into()),
                spool_dir,
                ..KafkaOutput::default()
            };
        }
    }
    Some(s)
}

fn wait_delivered(outputs: &Outputs, n: u64) {
    let until = Instant::now() + Duration::from_secs(300);
    while outputs.report().sinks[0].delivered < n {
        assert!(
            Instant::now() < until,
            "not delivered: {:?}",
            outputs.report()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else is understood.
    println!("| output | alerts/s (20,000 at once) | CPU at 1,000 alerts/s (% of one core) |");
    println!("| --- | --- | --- |");
    for name in ["http", "otlp", "kafka"] {
        let dir =
            std::env::temp_dir().join(format!("vigil-bench-fleet-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let Some(config) = settings(name, &dir.join("spool")) else {
            println!("| {name} | (set VIGIL_BENCH_KAFKA=host:port) | |");
            continue;
        };
        let metrics = Metrics::new();
        let outputs = Outputs::from_config(&config, &metrics, "bench").expect("start the output");
        // Warm up (connections, producer id).
        outputs.emit(&alert(0));
        wait_delivered(&outputs, 1);
        let n = 20_000;
        let start = Instant::now();
        for i in 1..=n {
            outputs.emit(&alert(i));
        }
        wait_delivered(&outputs, n + 1);
        let rate = n as f64 / start.elapsed().as_secs_f64();
        // 1,000 alerts/s for 5 s.
        let threads = ["vigil-out-", "vigil-sync-"];
        let before = thread_cpu(&threads, true);
        let start = Instant::now();
        let paced = 5_000u64;
        for i in 0..paced {
            let due = start + Duration::from_millis(i);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            outputs.emit(&alert(n + 1 + i));
        }
        wait_delivered(&outputs, n + 1 + paced);
        let wall = start.elapsed().as_secs_f64();
        let cpu = thread_cpu(&threads, true) - before;
        let report = outputs.shutdown(Instant::now() + Duration::from_secs(10));
        assert_eq!(report.dropped_total(), 0, "{report:?}");
        println!("| {name} | {rate:.0} | {:.1} % |", 100.0 * cpu / wall);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

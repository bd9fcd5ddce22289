//! Alert throughput per output through the full delivery path (format → queue → worker →
//! output): stdout to `/dev/null`, a file, a program (`cat >/dev/null`) and HTTP POSTs to a
//! loopback receiver (keep-alive). Each iteration delivers 1000 alerts and waits for them.
//!
//! Smoke run: `cargo bench -p vigil-output --bench sinks -- --warm-up-time 0.2
//! --measurement-time 1 --sample-size 10`.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vigil_output::http::HttpSink;
use vigil_output::settings::HttpOutput;
use vigil_output::sinks::{FileSink, ProgramSink, Sink, WriterSink};
use vigil_output::{Alert, DeliveryOptions, Formatter, Metrics, Outputs};

mod common;
use common::receiver;

const BATCH: u64 = 1000;

fn alert(i: u64) -> Alert {
    Alert {
        time: 1_700_000_000_000_000_000 + i,
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
            ("proc.pid".into(), Some(vigil_fields::Value::U64(4242))),
        ],
    }
}

fn bench_sink(
    c: &mut Criterion,
    name: &str,
    formatter: &Formatter,
    make: &dyn Fn() -> Box<dyn Sink>,
) {
    let mut group = c.benchmark_group("alert delivery");
    group.throughput(Throughput::Elements(BATCH));
    group.bench_function(name, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let metrics = Metrics::new();
                let outputs = Outputs::with_sinks(
                    formatter.clone(),
                    vec![(make(), DeliveryOptions::default())],
                    &metrics,
                )
                .expect("start delivery");
                let start = Instant::now();
                for i in 0..BATCH {
                    outputs.emit(&alert(i));
                }
                let report = outputs.shutdown(Instant::now() + Duration::from_secs(60));
                total += start.elapsed();
                assert_eq!(report.sinks[0].delivered, BATCH, "every alert delivered");
            }
            total
        });
    });
    group.finish();
}

fn benches(c: &mut Criterion) {
    let json = Formatter {
        json: true,
        ..Formatter::default()
    };
    let text = Formatter::default();
    bench_sink(c, "stdout (/dev/null), text", &text, &|| {
        let null = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("open /dev/null");
        Box::new(WriterSink::new(
            "stdout",
            std::io::BufWriter::new(null),
            false,
        ))
    });
    let dir = std::env::temp_dir().join(format!("vigil-bench-sinks-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("bench dir");
    let file = dir.join("alerts.json");
    bench_sink(c, "file (keep_alive), json", &json, &|| {
        Box::new(FileSink::new(&file, true, false))
    });
    bench_sink(
        c,
        "program `cat >/dev/null` (keep_alive), json",
        &json,
        &|| Box::new(ProgramSink::new("cat >/dev/null", true)),
    );
    let url = receiver() + "/";
    bench_sink(c, "http loopback (keep_alive), json", &json, &|| {
        let config = HttpOutput {
            enabled: true,
            url: url.clone(),
            keep_alive: true,
            ..HttpOutput::default()
        };
        Box::new(HttpSink::new(&config, "application/json").expect("http sink"))
    });
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(sink_benches, benches);
criterion_main!(sink_benches);

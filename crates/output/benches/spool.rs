//! What the write-ahead spool costs: alerts per second through one output without a spool,
//! with a spool synced once a second (the default), with one never synced, and with one
//! synced after every record. Two measurements per variant, 1000 alerts an iteration:
//!
//! - `emit`: the event loop's side, formatting and `enqueue` of 1000 alerts (with a spool, one
//!   `write(2)` each) while the worker delivers concurrently;
//! - `delivered`: from the first `emit` until the output has delivered all 1000;
//!
//! and, for the spool alone on one thread, `append` and `append` + `peek` + `ack`.
//!
//! The output writes text lines to `/dev/null`, so the spool's own cost is what differs. The
//! spool lives under Cargo's target tmp directory (a disk, not tmpfs, so `fdatasync` costs
//! what it costs on this machine).
//!
//! Run: `cargo bench -p vigil-output --bench spool -- --warm-up-time 1 --measurement-time 3`.

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vigil_output::sinks::WriterSink;
use vigil_output::spool::{Spool, SpoolSync};
use vigil_output::{Alert, DeliveryOptions, Formatter, Metrics, Outputs};

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

fn start(spool: Option<(&Path, SpoolSync)>) -> Outputs {
    let null = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .expect("open /dev/null");
    let sink = WriterSink::new("null", std::io::BufWriter::new(null), false);
    let options = DeliveryOptions {
        spool: spool.map(|(dir, _)| (dir.to_owned(), 64 << 20)),
        spool_sync: spool.map_or(SpoolSync::default(), |(_, sync)| sync),
        ..DeliveryOptions::default()
    };
    Outputs::with_sinks(
        Formatter::default(),
        vec![(Box::new(sink), options)],
        &Metrics::new(),
    )
    .expect("start delivery")
}

fn wait_delivered(outputs: &Outputs) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while outputs.report().sinks[0].delivered < BATCH {
        assert!(Instant::now() < deadline, "delivery stalled");
        std::thread::sleep(Duration::from_micros(50));
    }
}

fn benches(c: &mut Criterion) {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("vigil-bench-spool-{}", std::process::id()));
    let variants: [(&str, Option<SpoolSync>); 4] = [
        ("no spool", None),
        ("spool, sync every 1s (default)", Some(SpoolSync::default())),
        ("spool, never synced", Some(SpoolSync::Never)),
        ("spool, sync each record", Some(SpoolSync::EachRecord)),
    ];
    for (what, waits_for_delivery) in [("emit", false), ("delivered", true)] {
        let mut group = c.benchmark_group(format!("spool cost: {what}"));
        group.throughput(Throughput::Elements(BATCH));
        // A synced record takes milliseconds: 10 samples keep a run within minutes.
        group.sample_size(10);
        for (i, (name, sync)) in variants.iter().enumerate() {
            let dir = root.join(format!("{what}-{i}"));
            group.bench_function(*name, |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let outputs = start(sync.map(|s| (dir.as_path(), s)));
                        let started = Instant::now();
                        for i in 0..BATCH {
                            outputs.emit(&alert(i));
                        }
                        if waits_for_delivery {
                            wait_delivered(&outputs);
                        }
                        total += started.elapsed();
                        let report = outputs.shutdown(Instant::now() + Duration::from_secs(60));
                        assert_eq!(report.sinks[0].delivered, BATCH, "every alert delivered");
                    }
                    total
                });
            });
        }
        group.finish();
    }
    // The spool alone, 1000 records of the size above, one thread: `append` (the write-ahead
    // on the event loop), and `append` + `peek` + `ack` (all the disk work of one delivery).
    let record = vigil_output::Record {
        severity: 4,
        body: Formatter::default().format(&alert(0)).into(),
    };
    let mut group = c.benchmark_group("spool operations");
    group.throughput(Throughput::Elements(BATCH));
    for (name, deliver) in [("append", false), ("append + peek + ack", true)] {
        let dir = root.join(format!("ops-{deliver}"));
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut spool =
                        Spool::open(&dir, 64 << 20, SpoolSync::Never).expect("open spool");
                    let started = Instant::now();
                    for _ in 0..BATCH {
                        assert!(spool.append(&record).expect("append"));
                        if deliver {
                            spool.peek().expect("peek").expect("a record");
                            spool.ack().expect("ack");
                        }
                    }
                    total += started.elapsed();
                    while spool.peek().expect("peek").is_some() {
                        spool.ack().expect("ack");
                    }
                }
                total
            });
        });
    }
    group.finish();
    let _ = std::fs::remove_dir_all(&root);
}

criterion_group!(spool_benches, benches);
criterion_main!(spool_benches);

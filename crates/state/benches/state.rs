//! Per-event cost of the state engine: apply + extracting the fields a typical rule set reads
//! + finish, over a small process tree.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use vigil_event::{table, Event, EventType, Param, Snapshot, ThreadInfo};
use vigil_fields::{Catalog, Extract};
use vigil_state::{catalog, State, StateConfig};

fn etype(name: &str) -> EventType {
    table::by_name(name).expect("known event type")
}

fn event(tid: i64, name: &str, res: i64, params: Vec<Param>) -> Event {
    Event {
        num: 0,
        ts: 1_700_000_000_000_000_000,
        tid,
        pid: tid,
        etype: etype(name),
        res,
        params,
        truncated: 0,
        cpu: None,
    }
}

fn state() -> State {
    let mut threads = Vec::new();
    for (tid, ppid, comm) in [
        (1, 0, "systemd"),
        (100, 1, "sshd"),
        (200, 100, "sshd"),
        (300, 200, "bash"),
        (400, 300, "python3"),
    ] {
        threads.push(ThreadInfo {
            tid,
            pid: tid,
            ppid,
            vpid: tid,
            comm: comm.into(),
            exe: comm.into(),
            exepath: format!("/usr/bin/{comm}").into_bytes(),
            args: vec![b"-x".to_vec(), b"script.py".to_vec()],
            cwd: b"/home/alice".to_vec(),
            uid: 1000,
            euid: 1000,
            loginuid: 1000,
            cgroup: b"0::/user.slice".to_vec(),
            ..ThreadInfo::default()
        });
    }
    let mut s = State::new(StateConfig::default());
    s.load_snapshot(&Snapshot {
        threads,
        ..Snapshot::default()
    });
    s
}

fn bench(c: &mut Criterion) {
    let names = [
        "evt.type",
        "proc.name",
        "fd.name",
        "proc.aname[2]",
        "user.name",
        "container.id",
        "proc.cmdline",
        "fd.directory",
        "proc.pname",
        "evt.is_open_write",
    ];
    let fields: Vec<_> = names
        .iter()
        .map(|n| match n.split_once('[') {
            Some((b, a)) => catalog().lookup(b, Some(a.trim_end_matches(']'))).unwrap(),
            None => catalog().lookup(n, None).unwrap(),
        })
        .collect();
    let open = event(
        400,
        "openat",
        5,
        vec![
            Param::Int(-100),
            Param::Bytes(b"data/file.txt".to_vec()),
            Param::Uint(0o101),
        ],
    );
    let read = event(400, "read", 64, vec![Param::Int(5), Param::Uint(64)]);
    let close = event(400, "close", 0, vec![Param::Int(5)]);
    let batch = [open, read.clone(), read.clone(), read, close];
    let mut group = c.benchmark_group("state");
    group.throughput(Throughput::Elements(batch.len() as u64));
    group.bench_function("apply_extract10_finish", |b| {
        let mut s = state();
        b.iter(|| {
            for evt in &batch {
                s.apply(evt);
                {
                    let view = s.view(evt);
                    let mut out = Vec::new();
                    for f in &fields {
                        out.clear();
                        black_box(view.extract(f, &mut out));
                        black_box(&out);
                    }
                }
                s.finish(evt);
            }
        })
    });
    group.bench_function("apply_finish_only", |b| {
        let mut s = state();
        b.iter(|| {
            for evt in &batch {
                s.apply(evt);
                black_box(s.view(evt).event_type());
                s.finish(evt);
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

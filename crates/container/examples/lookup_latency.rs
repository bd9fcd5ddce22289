//! Times the container metadata lookup of running containers on this host (BENCHMARKS.md,
//! "Container label lookups"): `cargo run --release -p vigil-container --example lookup_latency
//! -- ID...` (12-hex or full ids). For each id: the mean and the worst of N lookups with the
//! standard locations, and with the same locations minus the containerd root and the podman
//! graph root's database (the lookup without labels), so the difference is what reading the
//! labels costs.

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use vigil_container::{lookup, RuntimeDirs};

const N: u32 = 2000;

fn time(dirs: &RuntimeDirs, id: &[u8]) -> (f64, f64, usize) {
    let mut worst = 0f64;
    let mut labels = 0;
    let start = Instant::now();
    for _ in 0..N {
        let t = Instant::now();
        let info = lookup(dirs, id);
        worst = worst.max(t.elapsed().as_secs_f64());
        labels = info.map_or(0, |i| i.labels.len());
    }
    (start.elapsed().as_secs_f64() / f64::from(N), worst, labels)
}

fn main() {
    let full = RuntimeDirs::under(std::path::Path::new("/"));
    let without = RuntimeDirs {
        containerd_roots: Vec::new(),
        podman_roots: vec![PathBuf::from("/nonexistent")],
        ..full.clone()
    };
    let mut out = std::io::stdout().lock();
    for id in std::env::args().skip(1) {
        let short = &id.as_bytes()[..id.len().min(12)];
        let (mean, worst, labels) = time(&full, short);
        let (mean0, worst0, labels0) = time(&without, short);
        let line = writeln!(
            out,
            "{id:.12}: with labels {:.1} us mean, {:.1} us worst ({labels} labels and \
             annotations); without {:.1} us mean, {:.1} us worst ({labels0}); {N} lookups each",
            mean * 1e6,
            worst * 1e6,
            mean0 * 1e6,
            worst0 * 1e6
        );
        if line.is_err() {
            return;
        }
    }
}

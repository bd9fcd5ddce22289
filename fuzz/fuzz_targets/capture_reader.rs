//! Feeds arbitrary bytes to the capture reader (`open_any`, either encoding) and drains it.
//!
//! Beyond "no panic, no hang, no huge allocation", whatever a reader accepts must re-encode in
//! both encodings and read back identically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil_event::codec::{open_any, Capture};

/// Enough events to reach deep into a capture without making each run slow.
const MAX_EVENTS: usize = 10_000;

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = open_any(data) else {
        return;
    };
    let mut capture = Capture {
        snapshot: reader.snapshot().clone(),
        events: Vec::new(),
    };
    while capture.events.len() < MAX_EVENTS {
        match reader.next_event() {
            Ok(Some(event)) => capture.events.push(event),
            Ok(None) | Err(_) => break,
        }
    }
    let binary = capture
        .write_binary(Vec::new())
        .expect("what a reader returns is encodable in binary");
    assert_eq!(Capture::read(&binary[..]).expect("binary re-read"), capture);
    let jsonl = capture
        .write_jsonl(Vec::new())
        .expect("what a reader returns is encodable as JSON lines");
    assert_eq!(
        Capture::read(&jsonl[..]).expect("JSON lines re-read"),
        capture
    );
});

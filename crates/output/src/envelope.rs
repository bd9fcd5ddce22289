//! What the fleet outputs (`otlp_output`, `kafka_output`) queue and spool for each alert: a
//! stable alert id, the event time and Falco's JSON object, in one record body
//!
//! ```text
//! <alert id> SP <event time, ns since the epoch> SP <Falco JSON object>
//! ```
//!
//! The id is fixed when the alert is raised and travels with it through the spool, so every
//! copy a crash or a retry delivers carries the same one (OTLP attribute `log.record.uid`,
//! Kafka header `vigil.alert.id`): a consumer drops duplicates by it. It is a UUID version 7
//! (RFC 9562): the event time in milliseconds, then 74 bits that are random per agent start
//! plus a counter, so ids are unique within a run and across runs, and sort by time.

use std::fmt::Write as _;
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::{Alert, JsonOptions};

/// How an output wants its records: the formatted alert (text line or JSON, as configured),
/// or the envelope with Falco's JSON under `json` options.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecordFormat {
    Line,
    Envelope(JsonOptions),
}

/// Makes alert ids.
#[derive(Debug)]
pub struct AlertIds {
    /// 12 random bits (UUIDv7's `rand_a`).
    rand_a: u16,
    /// 62 random bits (`rand_b`); the counter is added to them.
    rand_b: u64,
    counter: AtomicU64,
}

const RAND_B_MASK: u64 = (1 << 62) - 1;

impl AlertIds {
    /// Seeded from the kernel's random source (or, failing that, the time and the process).
    pub fn new() -> AlertIds {
        let mut seed = [0u8; 16];
        let random = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut seed));
        if random.is_err() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let mixed = now ^ (u128::from(std::process::id()) << 64);
            seed = mixed.to_le_bytes();
        }
        let a = u16::from_le_bytes([seed[0], seed[1]]) & 0x0fff;
        let mut b = [0u8; 8];
        b.copy_from_slice(&seed[8..16]);
        AlertIds {
            rand_a: a,
            rand_b: u64::from_le_bytes(b) & RAND_B_MASK,
            counter: AtomicU64::new(0),
        }
    }

    /// The next id, for an alert whose event happened at `time_ns`.
    pub fn next(&self, time_ns: u64) -> String {
        let n = self.counter.fetch_add(1, Ordering::Relaxed);
        uuid_v7(
            time_ns / 1_000_000,
            self.rand_a,
            self.rand_b.wrapping_add(n) & RAND_B_MASK,
        )
    }
}

impl Default for AlertIds {
    fn default() -> Self {
        AlertIds::new()
    }
}

fn uuid_v7(ms: u64, rand_a: u16, rand_b: u64) -> String {
    let hi: u64 = ((ms & 0xffff_ffff_ffff) << 16) | 0x7000 | u64::from(rand_a & 0x0fff);
    let lo: u64 = (0b10 << 62) | (rand_b & RAND_B_MASK);
    let mut text = String::with_capacity(36);
    let _ = write!(
        text,
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        hi >> 32,
        (hi >> 16) & 0xffff,
        hi & 0xffff,
        lo >> 48,
        lo & 0xffff_ffff_ffff
    );
    text
}

/// The record body for `alert` with id `id`.
pub fn envelope(id: &str, alert: &Alert, json: &JsonOptions) -> String {
    let mut body = String::with_capacity(512);
    body.push_str(id);
    body.push(' ');
    let _ = write!(body, "{}", alert.time);
    body.push(' ');
    body.push_str(&alert.json_line(json));
    body
}

/// A record body taken apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enveloped<'a> {
    pub id: &'a str,
    pub time: u64,
    pub json: &'a str,
}

/// Takes a record body apart; `None` for a body that is not an envelope (a spool written by
/// another output's configuration).
pub fn parse(body: &str) -> Option<Enveloped<'_>> {
    let (id, rest) = body.split_once(' ')?;
    let (time, json) = rest.split_once(' ')?;
    if id.is_empty() || !json.starts_with('{') {
        return None;
    }
    Some(Enveloped {
        id,
        time: time.parse().ok()?,
        json,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_uuid_v7_unique_and_time_ordered() {
        let ids = AlertIds::new();
        let a = ids.next(1_700_000_000_000_000_000);
        let b = ids.next(1_700_000_000_000_000_000);
        let c = ids.next(1_700_000_000_001_000_000);
        assert_ne!(a, b);
        assert!(a < c && b < c, "{a} {b} {c}");
        for id in [&a, &b, &c] {
            assert_eq!(id.len(), 36);
            assert_eq!(&id[14..15], "7", "version: {id}");
            assert!(
                matches!(&id[19..20], "8" | "9" | "a" | "b"),
                "variant: {id}"
            );
        }
        // The millisecond timestamp leads: 1_700_000_000_000 ms = 0x018bcfe56800.
        assert!(a.starts_with("018bcfe5-6800-7"), "{a}");
        // Another agent start draws other random bits.
        assert_ne!(AlertIds::new().next(0), AlertIds::new().next(0));
    }

    #[test]
    fn envelope_round_trips() {
        let alert = Alert {
            time: 1_700_000_000_000_001_000,
            rule: "R".into(),
            priority: "Warning".into(),
            source: "syscall".into(),
            tags: vec![],
            hostname: "h".into(),
            output: "a b c".into(),
            output_fields: vec![],
        };
        let body = envelope("id-1", &alert, &JsonOptions::default());
        let parsed = parse(&body).unwrap();
        assert_eq!(parsed.id, "id-1");
        assert_eq!(parsed.time, alert.time);
        assert_eq!(parsed.json, alert.json_line(&JsonOptions::default()));
        assert_eq!(parse("12:00:00 Warning text"), None);
        assert_eq!(parse("x y {"), None);
    }
}

//! The counters an agent reports at exit (`vigil watch --stats`' line; Falco's are read into the
//! same shape by [`crate::falco::stats`]): what the benches compare across agents.

use std::collections::BTreeMap;

use serde::Serialize;

/// The counters `vigil watch --stats` prints at exit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WatchStats {
    pub events_in: u64,
    pub processed: u64,
    pub dropped: u64,
    pub dropped_by_reason: BTreeMap<String, u64>,
    pub alerts: u64,
}

impl WatchStats {
    pub fn dropped_total(&self) -> u64 {
        self.dropped
    }

    /// The last line of `text` that is a JSON object with `events_in`.
    pub fn find(text: &str) -> Option<WatchStats> {
        text.lines().rev().find_map(|line| {
            let line = line.trim();
            if !line.starts_with('{') {
                return None;
            }
            let v: serde_json::Value = serde_json::from_str(line).ok()?;
            let num = |k: &str| v.get(k).and_then(serde_json::Value::as_u64);
            let events_in = num("events_in")?;
            let by_reason = |value: Option<&serde_json::Value>| -> BTreeMap<String, u64> {
                value
                    .and_then(serde_json::Value::as_object)
                    .map(|m| {
                        m.iter()
                            .map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0)))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            // `dropped` is a total with `dropped_by_reason` beside it, or an object by reason.
            let (dropped, dropped_by_reason) = match v.get("dropped") {
                Some(serde_json::Value::Object(_)) => {
                    let map = by_reason(v.get("dropped"));
                    (map.values().sum(), map)
                }
                Some(n) => (
                    n.as_u64().unwrap_or(0),
                    by_reason(v.get("dropped_by_reason")),
                ),
                None => (0, by_reason(v.get("dropped_by_reason"))),
            };
            Some(WatchStats {
                events_in,
                processed: num("processed").unwrap_or(0),
                dropped,
                dropped_by_reason,
                alerts: num("alerts").unwrap_or(0),
            })
        })
    }
}

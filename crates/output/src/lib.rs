//! Alerts, their wire formats and their delivery.
//!
//! Owns the [`Alert`] record and the two formats Falco's tooling consumes ([`Formatter`]: the text
//! line `HH:MM:SS.nnnnnnnnn: Priority output` and the JSON object `hostname, output, priority,
//! rule, source, tags, time, output_fields`), the outputs ([`sinks`], [`http`], and the fleet
//! outputs [`otlp`] and [`kafka`] with their [`envelope`]), one delivery worker per output
//! ([`delivery`]) with an optional disk
//! spool ([`spool`]), the configured set ([`Outputs`]: `from_config`, `emit`, `reopen`,
//! `check_drops`, `shutdown`), the metrics registry ([`metrics`]) and Falco's stats file
//! ([`stats`]). Its settings are its own ([`settings`], [`OutputSettings`]): `vigil-config`
//! reads them from YAML. Knows nothing about rules, events or state: an alert arrives rendered,
//! with its typed output fields (values already escaped, `docs/alert-text.md`).
//!
//! Invariants: an output never blocks the event loop and loses nothing silently. The order is
//! head → spool → queue, so alerts are delivered once and in order across outages; an alert is
//! dropped only when the queue (no spool) or the spool budget is full, or past a retry or
//! timeout budget, and then counted in `vigil_output_dropped_total{sink,reason}`. With a spool
//! an alert is on disk once `enqueue` returns (a crash loses nothing; at-least-once across it); a
//! damaged or missing spool record is never sent and is counted. Every file it writes is created
//! 0600 ([`files`]).
#![forbid(unsafe_code)]

use std::borrow::Cow;

use serde_json::{Map, Number, Value as Json};
use vigil_fields::Value;

pub mod delivery;
pub mod envelope;
pub mod files;
pub mod format;
pub mod http;
pub mod kafka;
pub mod metrics;
pub mod otlp;
pub mod outputs;
pub mod settings;
pub mod sinks;
pub mod spool;
pub mod stats;
pub mod time;
pub mod tls;

pub use delivery::{DeliveryOptions, SinkReport};
pub use format::Formatter;
pub use metrics::Metrics;
pub use outputs::{DeliveryReport, Outputs, OutputsError};
pub use settings::OutputSettings;
pub use sinks::Record;

/// One rule match, rendered.
#[derive(Clone, Debug, PartialEq)]
pub struct Alert {
    /// Event time, nanoseconds since the Unix epoch.
    pub time: u64,
    pub rule: String,
    /// Falco's spelling: `Emergency`, `Alert`, `Critical`, `Error`, `Warning`, `Notice`,
    /// `Informational`, `Debug`.
    pub priority: Cow<'static, str>,
    /// The rule's event source (`syscall`).
    pub source: Cow<'static, str>,
    pub tags: Vec<String>,
    pub hostname: String,
    /// The rule's output with fields substituted (no time or priority prefix).
    pub output: String,
    /// Every field the output names, as written (`proc.aname[2]`), with its value
    /// (`None` = Falco's `<NA>`, JSON `null`).
    pub output_fields: Vec<(String, Option<Value<'static>>)>,
}

/// Fields that print as a time string but that Falco's JSON `output_fields` gives as the raw
/// event timestamp.
const RAW_TIME_FIELDS: &[&str] = &[
    "evt.time",
    "evt.time.s",
    "evt.time.iso8601",
    "evt.datetime",
    "evt.datetime.s",
];

/// Which optional properties the JSON object carries (Falco's `json_include_*_property`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JsonOptions {
    pub include_output: bool,
    pub include_tags: bool,
    pub include_output_fields: bool,
}

impl Default for JsonOptions {
    fn default() -> Self {
        JsonOptions {
            include_output: true,
            include_tags: true,
            include_output_fields: true,
        }
    }
}

impl Alert {
    /// Falco's text line: `HH:MM:SS.nnnnnnnnn: Priority output` (UTC).
    pub fn text_line(&self) -> String {
        let mut line = time::clock(self.time);
        line.push_str(": ");
        line.push_str(&self.priority);
        line.push(' ');
        line.push_str(&self.output);
        line
    }

    /// Falco's JSON object. Tags are sorted (Falco keeps them in a set); `time` is RFC 3339 with
    /// nanoseconds in UTC; `output` is the text line, as Falco puts it there.
    pub fn to_json(&self, options: &JsonOptions) -> Json {
        let mut object = Map::new();
        object.insert("hostname".into(), Json::String(self.hostname.clone()));
        if options.include_output {
            object.insert("output".into(), Json::String(self.text_line()));
        }
        object.insert("priority".into(), Json::String(self.priority.to_string()));
        object.insert("rule".into(), Json::String(self.rule.clone()));
        object.insert("source".into(), Json::String(self.source.to_string()));
        if options.include_tags {
            let mut tags = self.tags.clone();
            tags.sort();
            tags.dedup();
            object.insert(
                "tags".into(),
                Json::Array(tags.into_iter().map(Json::String).collect()),
            );
        }
        object.insert("time".into(), Json::String(time::rfc3339(self.time)));
        if options.include_output_fields {
            object.insert("output_fields".into(), self.fields_json());
        }
        Json::Object(object)
    }

    /// The `output_fields` object alone: typed values, `null` for missing ones. The event-time
    /// string fields carry the raw timestamp (nanoseconds since the epoch) here, as in Falco's
    /// JSON, while the text output shows them formatted.
    pub fn fields_json(&self) -> Json {
        let mut fields = Map::new();
        for (name, value) in &self.output_fields {
            let json = if RAW_TIME_FIELDS.contains(&name.as_str()) {
                Json::Number(Number::from(self.time))
            } else {
                value.as_ref().map_or(Json::Null, value_json)
            };
            fields.insert(name.clone(), json);
        }
        Json::Object(fields)
    }

    /// The JSON object as one line of text.
    pub fn json_line(&self, options: &JsonOptions) -> String {
        self.to_json(options).to_string()
    }
}

/// A field value as Falco puts it in `output_fields`: numbers as numbers, booleans as booleans,
/// everything else as its text.
pub fn value_json(value: &Value<'_>) -> Json {
    match value {
        Value::I64(v) => Json::Number(Number::from(*v)),
        Value::U64(v) => Json::Number(Number::from(*v)),
        Value::Bool(v) => Json::Bool(*v),
        Value::Str(s) => Json::String(String::from_utf8_lossy(s).into_owned()),
        other => {
            let mut text = String::new();
            other.render(&mut text);
            Json::String(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alert() -> Alert {
        Alert {
            time: 1_700_000_000_000_001_000,
            rule: "Read sensitive file untrusted".into(),
            priority: "Warning".into(),
            source: "syscall".into(),
            tags: vec![
                "mitre_credential_access".into(),
                "T1555".into(),
                "host".into(),
            ],
            hostname: "vigil-test".into(),
            output: "Sensitive file opened for reading | file=/etc/shadow".into(),
            output_fields: vec![
                (
                    "fd.name".into(),
                    Some(Value::Str(Cow::Borrowed(b"/etc/shadow"))),
                ),
                ("user.loginuid".into(), Some(Value::I64(-1))),
                ("proc.tty".into(), Some(Value::U64(0))),
                ("container.image.repository".into(), None),
                ("evt.is_open_read".into(), Some(Value::Bool(true))),
            ],
        }
    }

    #[test]
    fn text_line_has_time_and_priority_prefix() {
        assert_eq!(
            alert().text_line(),
            "22:13:20.000001000: Warning Sensitive file opened for reading | file=/etc/shadow"
        );
    }

    #[test]
    fn json_matches_falco_shape() {
        let json = alert().to_json(&JsonOptions::default());
        let expected = serde_json::json!({
            "hostname": "vigil-test",
            "output": "22:13:20.000001000: Warning Sensitive file opened for reading | file=/etc/shadow",
            "priority": "Warning",
            "rule": "Read sensitive file untrusted",
            "source": "syscall",
            "tags": ["T1555", "host", "mitre_credential_access"],
            "time": "2023-11-14T22:13:20.000001000Z",
            "output_fields": {
                "fd.name": "/etc/shadow",
                "user.loginuid": -1,
                "proc.tty": 0,
                "container.image.repository": null,
                "evt.is_open_read": true
            }
        });
        assert_eq!(json, expected);
    }

    #[test]
    fn time_string_fields_are_raw_timestamps_in_json() {
        let mut alert = alert();
        alert.output_fields.push((
            "evt.time".into(),
            Some(Value::Str(Cow::Borrowed(b"22:13:20.000001000"))),
        ));
        alert.output_fields.push((
            "evt.datetime".into(),
            Some(Value::Str(Cow::Borrowed(b"2023-11-14 22:13:20.000001000"))),
        ));
        let fields = alert.fields_json();
        assert_eq!(
            fields["evt.time"],
            serde_json::json!(1_700_000_000_000_001_000u64)
        );
        assert_eq!(
            fields["evt.datetime"],
            serde_json::json!(1_700_000_000_000_001_000u64)
        );
        assert_eq!(fields["fd.name"], "/etc/shadow");
    }

    #[test]
    fn json_options_drop_properties() {
        let options = JsonOptions {
            include_output: false,
            include_tags: false,
            include_output_fields: false,
        };
        let json = alert().to_json(&options);
        let object = json.as_object().unwrap();
        let mut keys: Vec<_> = object.keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["hostname", "priority", "rule", "source", "time"]);
    }

    /// Falco 0.45 (falco 65273dae, `formats.cpp`) sanitizes `output_fields` with libs'
    /// `utf8::sanitize`: the cases of libs `sinsp_utils.ut.cpp` `utf8_sanitize`. Valid
    /// UTF-8, C0 controls, DEL, C1 (U+0085) and non-characters are kept (JSON escapes the
    /// controls); each maximal invalid subpart becomes one U+FFFD.
    #[test]
    fn non_utf8_field_values_are_sanitized_like_libs() {
        let cases: &[(&[u8], &str)] = &[
            (b"", ""),
            (b"hello world", "hello world"),
            ("\u{1f600}".as_bytes(), "\u{1f600}"),
            (
                "\u{8bf6}\u{6bd4}\u{897f}".as_bytes(),
                "\u{8bf6}\u{6bd4}\u{897f}",
            ),
            (b"foo\x01\x1fxyz", "foo\u{1}\u{1f}xyz"),
            (b"foo\x7fxyz", "foo\u{7f}xyz"),
            (b"foo\xc2\x85xyz", "foo\u{85}xyz"),
            (b"foo\xff\xfexyz", "foo\u{fffd}\u{fffd}xyz"),
            (b"\xc3\xa9\xff", "\u{e9}\u{fffd}"),
            (b"\x80xyz", "\u{fffd}xyz"),
            (b"foo\xff", "foo\u{fffd}"),
            (b"\x80\xff\xfe", "\u{fffd}\u{fffd}\u{fffd}"),
            (b"\xef\xb7\x90", "\u{fdd0}"),
            (b"\xef\xbf\xbf", "\u{ffff}"),
            (b"\xf0\x9f\xbf\xbe", "\u{1fffe}"),
            (b"\xe1\x80x", "\u{fffd}x"),
            (b"hello\xe1\x80", "hello\u{fffd}"),
            (b"\xed\xa0\x80", "\u{fffd}\u{fffd}\u{fffd}"),
            (b"\xe0\x9f\xbf", "\u{fffd}\u{fffd}\u{fffd}"),
        ];
        for (raw, want) in cases {
            let value = Value::Str(Cow::Owned(raw.to_vec()));
            assert_eq!(
                value_json(&value),
                Json::String((*want).into()),
                "{}",
                raw.escape_ascii()
            );
        }
        // JSON escapes what must be escaped, so the line stays one valid line.
        let line = Json::String("a\u{1}\nb".into()).to_string();
        assert_eq!(line, r#""a\u0001\nb""#);
    }
}

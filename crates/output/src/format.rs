//! How an alert becomes the bytes every output receives (Falco formats an alert once and
//! hands the same text to each output).
//!
//! A record is always one line. The alert's `output` arrives with its field values already
//! escaped (control characters, line separators and invalid UTF-8 written as `\n`, `\x1b`,
//! `\u{2028}` …, done once where the rule's template is rendered, `vigil_rules::escape`), so the
//! text line is one line whatever the monitored processes put in their paths, arguments and
//! environment; the JSON `output` and `message` properties carry that same escaped text, while
//! `output_fields` carries the values themselves, escaped by JSON.

use crate::{time, Alert, JsonOptions};

/// The shared alert format: Falco's text line or JSON object, with the `json_include_*` and
/// `time_format_iso_8601` options.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Formatter {
    pub json: bool,
    pub json_options: JsonOptions,
    /// Add `message` (the output without time and priority) to JSON alerts.
    pub include_message: bool,
    /// Text lines start with `YYYY-MM-DDTHH:MM:SS.nnnnnnnnn+0000` instead of the time of day.
    pub iso_8601: bool,
}

impl Formatter {
    /// The text line as Falco prints it with these options.
    pub fn text_line(&self, alert: &Alert) -> String {
        if self.iso_8601 {
            let mut line = iso_8601(alert.time);
            line.push_str(": ");
            line.push_str(&alert.priority);
            line.push(' ');
            line.push_str(&alert.output);
            line
        } else {
            alert.text_line()
        }
    }

    /// One alert as one line of text (no trailing newline).
    pub fn format(&self, alert: &Alert) -> String {
        if !self.json {
            return self.text_line(alert);
        }
        let mut json = alert.to_json(&self.json_options);
        if let Some(object) = json.as_object_mut() {
            if self.json_options.include_output {
                object.insert(
                    "output".into(),
                    serde_json::Value::String(self.text_line(alert)),
                );
            }
            if self.include_message {
                object.insert(
                    "message".into(),
                    serde_json::Value::String(alert.output.clone()),
                );
            }
        }
        json.to_string()
    }

    /// The HTTP `Content-Type` of formatted alerts.
    pub fn content_type(&self) -> &'static str {
        if self.json {
            "application/json"
        } else {
            "text/plain"
        }
    }
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnn+0000`, the form Falco's `time_format_iso_8601` prints.
pub fn iso_8601(ns: u64) -> String {
    let mut s = time::rfc3339(ns);
    s.pop(); // the `Z`
    s.push_str("+0000");
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    fn alert() -> Alert {
        Alert {
            time: 1_700_000_000_000_001_000,
            rule: "R".into(),
            priority: "Warning".into(),
            source: "syscall".into(),
            tags: vec!["b".into(), "a".into()],
            hostname: "h".into(),
            output: "something happened".into(),
            output_fields: vec![(
                "fd.name".into(),
                Some(vigil_fields::Value::Str(Cow::Borrowed(b"/etc/shadow"))),
            )],
        }
    }

    #[test]
    fn text_and_iso_8601_lines() {
        let f = Formatter::default();
        assert_eq!(
            f.format(&alert()),
            "22:13:20.000001000: Warning something happened"
        );
        let f = Formatter {
            iso_8601: true,
            ..Formatter::default()
        };
        assert_eq!(
            f.format(&alert()),
            "2023-11-14T22:13:20.000001000+0000: Warning something happened"
        );
        assert_eq!(f.content_type(), "text/plain");
    }

    #[test]
    fn json_with_message_and_iso_output() {
        let f = Formatter {
            json: true,
            include_message: true,
            iso_8601: true,
            ..Formatter::default()
        };
        let v: serde_json::Value = serde_json::from_str(&f.format(&alert())).unwrap();
        assert_eq!(v["message"], "something happened");
        assert_eq!(
            v["output"],
            "2023-11-14T22:13:20.000001000+0000: Warning something happened"
        );
        assert_eq!(v["time"], "2023-11-14T22:13:20.000001000Z");
        assert_eq!(v["tags"], serde_json::json!(["a", "b"]));
        assert_eq!(v["output_fields"]["fd.name"], "/etc/shadow");
        assert_eq!(f.content_type(), "application/json");
    }

    #[test]
    fn hostile_values_stay_on_one_line_in_text_and_json() {
        // As the rules engine renders it: the value escaped in `output`, raw in the fields.
        let raw = "x\n12:00:00.000000000: Critical FORGED\r\u{1b}[2K\u{7f}\u{85}\u{2028}";
        let escaped = r"x\n12:00:00.000000000: Critical FORGED\r\x1b[2K\x7f\u{85}\u{2028}";
        let alert = Alert {
            output: format!("cmd={escaped}"),
            output_fields: vec![(
                "proc.cmdline".into(),
                Some(vigil_fields::Value::Str(Cow::Owned(
                    raw.as_bytes().to_vec(),
                ))),
            )],
            ..alert()
        };
        for iso_8601 in [false, true] {
            let text = Formatter {
                iso_8601,
                ..Formatter::default()
            };
            let line = text.format(&alert);
            assert_eq!(line.lines().count(), 1, "{line}");
            assert!(line.ends_with(&format!("Warning cmd={escaped}")), "{line}");
            let json = Formatter {
                json: true,
                include_message: true,
                iso_8601,
                ..Formatter::default()
            };
            let record = json.format(&alert);
            assert!(!record.contains(['\n', '\r', '\u{1b}']), "{record}");
            let v: serde_json::Value = serde_json::from_str(&record).unwrap();
            // `output` is the text line exactly; `output_fields` has the value itself.
            assert_eq!(v["output"], line.as_str());
            assert_eq!(v["message"], format!("cmd={escaped}"));
            assert_eq!(v["output_fields"]["proc.cmdline"], raw);
        }
    }
}

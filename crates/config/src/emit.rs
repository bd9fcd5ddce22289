//! `Config` → YAML text.

use std::fmt::Write;
use std::path::Path;

use crate::model::*;

fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}') => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn qpath(p: &Path) -> String {
    quote(&p.to_string_lossy())
}

struct Out(String);

impl Out {
    fn line(&mut self, indent: usize, text: &str) {
        for _ in 0..indent {
            self.0.push_str("  ");
        }
        self.0.push_str(text);
        self.0.push('\n');
    }
    fn kv(&mut self, indent: usize, key: &str, value: impl std::fmt::Display) {
        self.line(indent, &format!("{key}: {value}"));
    }
    fn list(&mut self, indent: usize, key: &str, items: &[String]) {
        if items.is_empty() {
            self.kv(indent, key, "[]");
        } else {
            self.line(indent, &format!("{key}:"));
            for i in items {
                self.line(indent + 1, &format!("- {i}"));
            }
        }
    }
}

fn delivery(o: &mut Out, d: &Delivery) {
    match &d.spool_dir {
        Some(p) => o.kv(1, "spool_dir", qpath(p)),
        None => o.kv(1, "spool_dir", "null"),
    }
    o.kv(1, "spool_max_bytes", d.spool_max_bytes);
    o.kv(1, "retry_max_backoff", format_duration(d.retry_max_backoff));
}

/// A mapping under an output (`  key:` then `    name: value` lines, or `{}`).
fn map<'a>(o: &mut Out, key: &str, entries: impl Iterator<Item = (&'a str, String)>) {
    let entries: Vec<(&str, String)> = entries.collect();
    if entries.is_empty() {
        o.kv(1, key, "{}");
    } else {
        o.line(1, &format!("{key}:"));
        for (name, value) in entries {
            o.kv(2, &quote(name), value);
        }
    }
}

impl Config {
    /// The effective configuration as YAML that parses back to an equal `Config`.
    pub fn to_yaml(&self) -> String {
        let mut o = Out(String::new());
        let files: Vec<String> = self.rules_files.iter().map(|p| qpath(p)).collect();
        o.list(0, "rules_files", &files);
        if self.rules.is_empty() {
            o.kv(0, "rules", "[]");
        } else {
            o.line(0, "rules:");
            for r in &self.rules {
                let (action, m) = match r {
                    RuleSelector::Enable(m) => ("enable", m),
                    RuleSelector::Disable(m) => ("disable", m),
                };
                let (what, name) = match m {
                    RuleMatch::Rule(n) => ("rule", n),
                    RuleMatch::Tag(n) => ("tag", n),
                };
                o.line(1, &format!("- {action}:"));
                o.kv(3, what, quote(name));
            }
        }
        o.kv(0, "priority", self.priority.as_str().to_ascii_lowercase());
        let rm = match self.rule_matching {
            RuleMatching::First => "first",
            RuleMatching::All => "all",
        };
        o.kv(0, "rule_matching", rm);
        o.kv(0, "json_output", self.json_output);
        o.kv(
            0,
            "json_include_output_property",
            self.json_include_output_property,
        );
        o.kv(
            0,
            "json_include_tags_property",
            self.json_include_tags_property,
        );
        o.kv(
            0,
            "json_include_message_property",
            self.json_include_message_property,
        );
        o.kv(
            0,
            "json_include_output_fields_property",
            self.json_include_output_fields_property,
        );
        o.kv(0, "time_format_iso_8601", self.time_format_iso_8601);
        o.kv(0, "watch_config_files", self.watch_config_files);
        if self.append_output.is_empty() {
            o.kv(0, "append_output", "[]");
        } else {
            o.line(0, "append_output:");
            for a in &self.append_output {
                let m = &a.matches;
                if m.source.is_none() && m.tags.is_empty() && m.rule.is_none() {
                    o.line(1, "- match: {}");
                } else {
                    o.line(1, "- match:");
                }
                if let Some(s) = &m.source {
                    o.kv(3, "source", quote(s));
                }
                if !m.tags.is_empty() {
                    let tags: Vec<String> = m.tags.iter().map(|t| quote(t)).collect();
                    o.list(3, "tags", &tags);
                }
                if let Some(r) = &m.rule {
                    o.kv(3, "rule", quote(r));
                }
                if let Some(e) = &a.extra_output {
                    o.kv(2, "extra_output", quote(e));
                }
                let fields: Vec<String> = a
                    .extra_fields
                    .iter()
                    .map(|f| match &f.value {
                        None => quote(&f.name),
                        Some(v) => format!("{}: {}", quote(&f.name), quote(v)),
                    })
                    .collect();
                o.list(2, "extra_fields", &fields);
            }
        }
        o.line(0, "stdout_output:");
        o.kv(1, "enabled", self.stdout_output.enabled);
        o.line(0, "file_output:");
        o.kv(1, "enabled", self.file_output.enabled);
        o.kv(1, "keep_alive", self.file_output.keep_alive);
        o.kv(1, "filename", qpath(&self.file_output.filename));
        delivery(&mut o, &self.file_output.delivery());
        o.line(0, "syslog_output:");
        o.kv(1, "enabled", self.syslog_output.enabled);
        o.kv(1, "socket", qpath(&self.syslog_output.socket));
        delivery(&mut o, &self.syslog_output.delivery());
        o.line(0, "program_output:");
        o.kv(1, "enabled", self.program_output.enabled);
        o.kv(1, "keep_alive", self.program_output.keep_alive);
        o.kv(1, "program", quote(&self.program_output.program));
        delivery(&mut o, &self.program_output.delivery());
        let h = &self.http_output;
        o.line(0, "http_output:");
        o.kv(1, "enabled", h.enabled);
        o.kv(1, "url", quote(&h.url));
        o.kv(1, "user_agent", quote(&h.user_agent));
        o.kv(1, "insecure", h.insecure);
        o.kv(1, "ca_cert", qpath(&h.ca_cert));
        o.kv(1, "ca_bundle", qpath(&h.ca_bundle));
        o.kv(1, "ca_path", qpath(&h.ca_path));
        o.kv(1, "mtls", h.mtls);
        o.kv(1, "client_cert", qpath(&h.client_cert));
        o.kv(1, "client_key", qpath(&h.client_key));
        o.kv(1, "echo", h.echo);
        o.kv(1, "compress_uploads", h.compress_uploads);
        o.kv(1, "keep_alive", h.keep_alive);
        o.kv(1, "max_consecutive_timeouts", h.max_consecutive_timeouts);
        o.kv(1, "timeout", format_duration(h.timeout));
        delivery(&mut o, &h.delivery());
        let t = &self.otlp_output;
        o.line(0, "otlp_output:");
        o.kv(1, "enabled", t.enabled);
        o.kv(1, "endpoint", quote(&t.endpoint));
        map(
            &mut o,
            "headers",
            t.headers.iter().map(|(k, v)| (k.as_str(), quote(v))),
        );
        map(
            &mut o,
            "header_files",
            t.header_files.iter().map(|(k, v)| (k.as_str(), qpath(v))),
        );
        o.kv(1, "insecure", t.insecure);
        o.kv(1, "ca_cert", qpath(&t.ca_cert));
        o.kv(1, "client_cert", qpath(&t.client_cert));
        o.kv(1, "client_key", qpath(&t.client_key));
        o.kv(1, "timeout", format_duration(t.timeout));
        o.kv(1, "batch_max_records", t.batch_max_records);
        o.kv(1, "batch_delay", format_duration(t.batch_delay));
        o.kv(1, "compression", t.compression.as_str());
        delivery(&mut o, &t.delivery());
        let k = &self.kafka_output;
        o.line(0, "kafka_output:");
        o.kv(1, "enabled", k.enabled);
        let brokers: Vec<String> = k.brokers.iter().map(|b| quote(b)).collect();
        o.list(1, "brokers", &brokers);
        o.kv(1, "topic", quote(&k.topic));
        o.kv(1, "key", quote(&k.key));
        o.kv(1, "compression", k.compression.as_str());
        o.kv(1, "client_id", quote(&k.client_id));
        o.kv(1, "timeout", format_duration(k.timeout));
        o.kv(1, "batch_max_records", k.batch_max_records);
        o.kv(1, "batch_delay", format_duration(k.batch_delay));
        o.kv(1, "tls", k.tls);
        o.kv(1, "insecure", k.insecure);
        o.kv(1, "ca_cert", qpath(&k.ca_cert));
        o.kv(1, "client_cert", qpath(&k.client_cert));
        o.kv(1, "client_key", qpath(&k.client_key));
        match k.sasl_mechanism {
            Some(m) => o.kv(1, "sasl_mechanism", m.as_str()),
            None => o.kv(1, "sasl_mechanism", "null"),
        }
        o.kv(1, "sasl_username", quote(&k.sasl_username));
        // A password is never printed.
        o.kv(
            1,
            "sasl_password",
            if k.sasl_password.is_empty() {
                "\"\""
            } else {
                "\"<hidden>\""
            },
        );
        o.kv(1, "sasl_password_file", qpath(&k.sasl_password_file));
        delivery(&mut o, &k.delivery());
        o.kv(0, "buffered_outputs", self.buffered_outputs);
        o.line(0, "outputs_queue:");
        o.kv(1, "capacity", self.outputs_queue.capacity);
        let w = &self.webserver;
        o.line(0, "webserver:");
        o.kv(1, "enabled", w.enabled);
        o.kv(1, "listen_port", w.listen_port);
        o.kv(1, "listen_address", quote(&w.listen_address));
        o.kv(1, "k8s_healthz_endpoint", quote(&w.k8s_healthz_endpoint));
        o.kv(1, "ssl_enabled", w.ssl_enabled);
        o.kv(1, "ssl_certificate", qpath(&w.ssl_certificate));
        o.kv(
            1,
            "prometheus_metrics_enabled",
            w.prometheus_metrics_enabled,
        );
        o.kv(1, "bind_failure", w.bind_failure.as_str());
        let m = &self.metrics;
        o.line(0, "metrics:");
        o.kv(1, "enabled", m.enabled);
        o.kv(1, "interval", format_duration(m.interval));
        o.kv(1, "output_rule", m.output_rule);
        match &m.output_file {
            Some(p) => o.kv(1, "output_file", qpath(p)),
            None => o.kv(1, "output_file", "null"),
        }
        o.kv(1, "rules_counters_enabled", m.rules_counters_enabled);
        o.kv(
            1,
            "resource_utilization_enabled",
            m.resource_utilization_enabled,
        );
        o.kv(1, "state_counters_enabled", m.state_counters_enabled);
        o.kv(
            1,
            "kernel_event_counters_enabled",
            m.kernel_event_counters_enabled,
        );
        o.kv(1, "libbpf_stats_enabled", m.libbpf_stats_enabled);
        o.kv(1, "convert_memory_to_mb", m.convert_memory_to_mb);
        o.kv(1, "include_empty_values", m.include_empty_values);
        let d = &self.drop_alert;
        o.line(0, "drop_alert:");
        o.kv(1, "enabled", d.enabled);
        o.kv(1, "priority", d.priority.as_str().to_ascii_lowercase());
        o.kv(1, "threshold", d.threshold);
        o.kv(1, "rate_limit", format_duration(d.rate_limit));
        o.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::time::Duration;

    fn reparse(c: &Config) -> Config {
        let text = c.to_yaml();
        let l = Config::from_yaml_str(&text, "shown").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(l.warnings.is_empty(), "{:?}", l.warnings);
        l.config
    }

    #[test]
    fn default_round_trips() {
        let c = Config::default();
        assert_eq!(reparse(&c), c);
    }

    #[test]
    fn awkward_values_round_trip() {
        let mut c = Config {
            rules_files: vec![
                PathBuf::from("/with space/#hash.yaml"),
                PathBuf::from("a: b"),
            ],
            ..Config::default()
        };
        c.rules = vec![
            RuleSelector::Disable(RuleMatch::Rule("*".into())),
            RuleSelector::Enable(RuleMatch::Tag("\"quoted\" \\ tab\t nl\n".into())),
        ];
        c.priority = Priority::Informational;
        c.rule_matching = RuleMatching::All;
        c.append_output = vec![
            AppendOutput::default(),
            AppendOutput {
                matches: AppendMatch {
                    source: Some("syscall".into()),
                    tags: vec!["t1".into(), "- t2".into()],
                    rule: Some("R: x".into()),
                },
                extra_output: Some("%evt.cpu {x}".into()),
                extra_fields: vec![
                    ExtraField {
                        name: "evt.hostname".into(),
                        value: None,
                    },
                    ExtraField {
                        name: "home".into(),
                        value: Some("${HOME}".into()),
                    },
                ],
            },
        ];
        c.http_output.url = "http://127.0.0.1:2801/?a=b&c=\u{1}".into();
        c.http_output.max_consecutive_timeouts = u32::MAX;
        c.outputs_queue.capacity = u64::MAX;
        c.webserver.listen_port = 0;
        c.webserver.bind_failure = BindFailure::Continue;
        c.metrics.interval = Duration::from_millis(1500);
        c.metrics.output_file = Some(PathBuf::from("null"));
        c.program_output.program = "true".into();
        c.file_output.filename = PathBuf::from("");
        assert_eq!(reparse(&c), c, "{}", c.to_yaml());
    }
}

//! Falco's `append_output`: for rules matching an item's `match` (source, all of `tags`, rule
//! name), `extra_output` is appended to the alert's output text (after a space) and
//! `extra_fields` are added to its `output_fields` — a bare field name (`proc.env`,
//! `evt.hostname`) with the field's value, or `name: format` with the rendered format (an
//! output format with `%fields`, or literal text).

use vigil_config::{AppendOutput, ExtraField};
use vigil_engine::AlertDecorator;
use vigil_fields::{Catalog, Extract, Value};
use vigil_output::Alert;
use vigil_rules::compile::Compiler;
use vigil_rules::eval::EvalCtx;
use vigil_rules::template::Template;
use vigil_rules::Rule;

/// An `append_output` item that did not compile.
#[derive(Debug, thiserror::Error)]
#[error("append_output[{index}].{key}: {message}")]
pub struct AppendError {
    pub index: usize,
    pub key: String,
    pub message: String,
}

struct Item {
    source: Option<String>,
    tags: Vec<String>,
    rule: Option<String>,
    extra_output: Option<Template>,
    /// (field name in `output_fields`, template, whether the value is the field's own value).
    extra_fields: Vec<(String, Template, bool)>,
}

/// The compiled `append_output` items.
pub struct Appender {
    items: Vec<Item>,
    ctx: EvalCtx,
}

impl Appender {
    /// Compiles the items against `catalog`; `None` when there are none.
    pub fn new(
        items: &[AppendOutput],
        catalog: &dyn Catalog,
    ) -> Result<Option<Appender>, AppendError> {
        if items.is_empty() {
            return Ok(None);
        }
        let mut compiler = Compiler::new(catalog);
        let mut compiled = Vec::with_capacity(items.len());
        for (index, item) in items.iter().enumerate() {
            let mut compile = |key: String, text: &str| {
                compiler
                    .compile_template(text)
                    .map_err(|errors| AppendError {
                        index,
                        key,
                        message: errors
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; "),
                    })
            };
            let extra_output = match &item.extra_output {
                Some(text) => Some(compile("extra_output".into(), text)?),
                None => None,
            };
            let mut extra_fields = Vec::with_capacity(item.extra_fields.len());
            for (i, ExtraField { name, value }) in item.extra_fields.iter().enumerate() {
                let key = format!("extra_fields[{i}]");
                match value {
                    None => {
                        extra_fields.push((name.clone(), compile(key, &format!("%{name}"))?, true))
                    }
                    Some(format) => extra_fields.push((name.clone(), compile(key, format)?, false)),
                }
            }
            compiled.push(Item {
                source: item.matches.source.clone(),
                tags: item.matches.tags.clone(),
                rule: item.matches.rule.clone(),
                extra_output,
                extra_fields,
            });
        }
        let ctx = EvalCtx::new(&compiler.finish());
        Ok(Some(Appender {
            items: compiled,
            ctx,
        }))
    }
}

impl Item {
    fn matches(&self, rule: &Rule) -> bool {
        self.source.as_ref().is_none_or(|s| *s == rule.source)
            && self.rule.as_ref().is_none_or(|r| *r == rule.name)
            && self.tags.iter().all(|t| rule.tags.contains(t))
    }
}

impl AlertDecorator for Appender {
    fn decorate(&mut self, rule: &Rule, view: &dyn Extract, alert: &mut Alert) {
        // One evaluation event for every item: values extracted once are reused.
        let mut ctx = self.ctx.event();
        for item in &self.items {
            if !item.matches(rule) {
                continue;
            }
            if let Some(template) = &item.extra_output {
                let rendered = template.render(view, &mut ctx);
                if !rendered.text.is_empty() {
                    alert.output.push(' ');
                    alert.output.push_str(&rendered.text);
                }
            }
            for (name, template, own_value) in &item.extra_fields {
                // Extra fields travel only in JSON `output_fields`, which escapes them itself:
                // their values stay as they are, unlike the text of `extra_output` above.
                let rendered = template.render_raw(view, &mut ctx);
                let value = if *own_value {
                    rendered.fields.into_iter().next().and_then(|(_, v)| v)
                } else {
                    Some(Value::Str(rendered.text.into_bytes().into()))
                };
                alert.output_fields.retain(|(n, _)| n != name);
                alert.output_fields.push((name.clone(), value));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_config::AppendMatch;

    #[test]
    fn bad_items_name_their_key() {
        let items = vec![AppendOutput {
            extra_fields: vec![ExtraField {
                name: "no.such.field".into(),
                value: None,
            }],
            ..AppendOutput::default()
        }];
        let e = Appender::new(&items, vigil_state::catalog())
            .err()
            .unwrap()
            .to_string();
        assert!(e.starts_with("append_output[0].extra_fields[0]: "), "{e}");
        assert!(Appender::new(&[], vigil_state::catalog())
            .unwrap()
            .is_none());
        let items = vec![AppendOutput {
            matches: AppendMatch {
                source: Some("syscall".into()),
                ..AppendMatch::default()
            },
            extra_output: Some("by %proc.name".into()),
            ..AppendOutput::default()
        }];
        assert!(Appender::new(&items, vigil_state::catalog())
            .unwrap()
            .is_some());
    }
}

//! Output templates: Falco's rule `output` text with `%field`, `%field[arg]` and
//! `%transformer(field)` references (`%%` is a literal `%`).
//!
//! A template is compiled by [`crate::compile::Compiler::compile_template`] against the same
//! field slots as the conditions, so rendering after a match reuses the values the condition
//! already extracted. Missing values print `<NA>`; list fields print as `(a,b,c)`.
//!
//! Field values are escaped as they are put into the text ([`crate::escape`]): the monitored
//! processes choose them, and they must not be able to add a line to an alert or hide it. The
//! rule's own text is copied as written; the typed values in [`RenderedOutput::fields`] are the
//! values themselves, unescaped (JSON escapes them).

use crate::ast::Operand;
use crate::eval::{COperand, EventCtx, V};
use crate::parser::{span, ParseError, Parser};
use vigil_fields::{Extract, Value};

/// A compiled output template.
#[derive(Debug)]
pub struct Template {
    pub(crate) segments: Vec<Segment>,
    pub(crate) fields: Vec<TField>,
}

#[derive(Debug)]
pub(crate) enum Segment {
    Text(String),
    /// Index into [`Template::fields`].
    Field(usize),
}

#[derive(Debug)]
pub(crate) struct TField {
    /// As written, canonically: `proc.aname[2]`, `tolower(proc.name)`.
    pub name: String,
    pub operand: COperand,
    pub is_list: bool,
}

/// A rendered output: the text, and every field of the template in order of first appearance
/// (no duplicates) with its value (`None` = `<NA>`). List values are given as the string printed
/// in the text (`(a,b,c)`) before escaping; a non-list field with several values as its first.
#[derive(Clone, Debug, PartialEq)]
pub struct RenderedOutput {
    pub text: String,
    pub fields: Vec<(String, Option<Value<'static>>)>,
}

/// The text printed for a missing value.
pub const NA: &str = "<NA>";

impl Template {
    /// The fields the template prints.
    pub fn field_refs(&self) -> impl Iterator<Item = &vigil_fields::FieldRef> {
        self.fields.iter().flat_map(|f| f.operand.fields())
    }

    /// Renders the template for the current event (sharing `ctx`'s cache with the filters), with
    /// string values escaped in the text: the alert's output line.
    pub fn render<'a>(&self, ex: &'a dyn Extract, ctx: &mut EventCtx<'_, 'a>) -> RenderedOutput {
        self.render_with(ex, ctx, true)
    }

    /// Renders the template with string values copied into the text as they are (invalid UTF-8
    /// replaced by U+FFFD): for text that only ever travels inside JSON, such as an
    /// `append_output` extra field with a format.
    pub fn render_raw<'a>(
        &self,
        ex: &'a dyn Extract,
        ctx: &mut EventCtx<'_, 'a>,
    ) -> RenderedOutput {
        self.render_with(ex, ctx, false)
    }

    fn render_with<'a>(
        &self,
        ex: &'a dyn Extract,
        ctx: &mut EventCtx<'_, 'a>,
        escape: bool,
    ) -> RenderedOutput {
        let mut values: Vec<(String, Option<Value<'static>>)> =
            Vec::with_capacity(self.fields.len());
        for field in &self.fields {
            values.push((field.name.clone(), render_field(field, ex, ctx)));
        }
        let mut text = String::new();
        for segment in &self.segments {
            match segment {
                Segment::Text(t) => text.push_str(t),
                Segment::Field(i) => match values.get(*i).and_then(|(_, v)| v.as_ref()) {
                    Some(Value::Str(s)) if escape => crate::escape::push_escaped(&mut text, s),
                    Some(v) => v.render(&mut text),
                    None => text.push_str(NA),
                },
            }
        }
        RenderedOutput {
            text,
            fields: values,
        }
    }

    /// The field references of the template as written, in order of first appearance.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.fields.iter().map(|f| f.name.as_str())
    }
}

fn render_field<'a>(
    field: &TField,
    ex: &'a dyn Extract,
    ctx: &mut EventCtx<'_, 'a>,
) -> Option<Value<'static>> {
    ctx.begin_temp();
    let src = ctx.load(ex, &field.operand)?;
    let vals = ctx.vals(src);
    if !field.is_list {
        // Several values of a non-list field (e.g. `proc.aname`): the first, as Falco prints.
        return vals.iter().next().map(V::to_value);
    }
    // The bytes of the list as printed, escaped (or not) with the rest of the text.
    let mut text = vec![b'('];
    let mut number = String::new();
    for (i, v) in vals.iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        match v {
            V::Str(s) => text.extend_from_slice(s),
            other => {
                number.clear();
                other.to_value().render(&mut number);
                text.extend_from_slice(number.as_bytes());
            }
        }
    }
    text.push(b')');
    Some(Value::Str(text.into()))
}

/// One piece of a parsed template.
#[derive(Debug)]
pub(crate) enum Parsed {
    Text(String),
    Field(Operand),
}

/// Splits template text into literal text and field references (spans are byte offsets into
/// `text`).
pub(crate) fn parse_template(text: &str) -> Result<Vec<Parsed>, ParseError> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut literal = String::new();
    let mut pos = 0;
    while let Some(rel) = memchr::memchr(b'%', &bytes[pos..]) {
        let at = pos + rel;
        literal.push_str(&text[pos..at]);
        match bytes.get(at + 1) {
            Some(b'%') => {
                literal.push('%');
                pos = at + 2;
            }
            Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {
                let mut parser = Parser::at(text, at + 1);
                let operand = parser.operand(0)?;
                if !literal.is_empty() {
                    out.push(Parsed::Text(std::mem::take(&mut literal)));
                }
                out.push(Parsed::Field(operand));
                pos = parser.pos();
            }
            _ => {
                return Err(ParseError {
                    code: "E_SYNTAX",
                    message: "expected a field name or `%` after `%`".to_string(),
                    span: span(at, at + 1),
                })
            }
        }
    }
    literal.push_str(&text[pos..]);
    if !literal.is_empty() {
        out.push(Parsed::Text(literal));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compile::Compiler;
    use crate::eval::EvalCtx;
    use crate::testutil::{FakeCatalog, FakeEvent};
    use std::borrow::Cow;

    fn render(template: &str, ev: &FakeEvent) -> RenderedOutput {
        let cat = FakeCatalog::new();
        let mut compiler = Compiler::new(&cat);
        let t = compiler
            .compile_template(template)
            .unwrap_or_else(|e| panic!("{template}: {e:?}"));
        let mut ctx = EvalCtx::new(&compiler.finish());
        let out = t.render(ev, &mut ctx.event());
        out
    }

    #[test]
    fn renders_text_and_typed_fields() {
        let ev = FakeEvent::default();
        let out = render(
            "Shell (user=%proc.name pid=%proc.pid fd=%fd.num ip=%fd.sip c=%container.id \
             a=%proc.aname[1] x=%toupper(proc.name) again=%proc.name 100%% args=%proc.args)",
            &ev,
        );
        assert_eq!(
            out.text,
            "Shell (user=bash pid=100 fd=3 ip=10.1.2.3 c=<NA> a=sshd x=BASH again=bash 100% \
             args=(-c,ls))"
        );
        let names: Vec<&str> = out.fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "proc.name",
                "proc.pid",
                "fd.num",
                "fd.sip",
                "container.id",
                "proc.aname[1]",
                "toupper(proc.name)",
                "proc.args"
            ]
        );
        assert_eq!(out.fields[0].1, Some(Value::Str(Cow::Borrowed(b"bash"))));
        assert_eq!(out.fields[1].1, Some(Value::I64(100)));
        assert_eq!(
            out.fields[3].1,
            Some(Value::Ip("10.1.2.3".parse().unwrap()))
        );
        assert_eq!(out.fields[4].1, None);
    }

    #[test]
    fn multivalue_transformers_render() {
        let ev = FakeEvent::default();
        let out = render(
            "j=%join(\"+\", (proc.name, fd.name)) c=%toupper(concat(proc.name, \"-x\")) \
             g=%getopt(proc.args, \"c\") v=%getopt((\"-p\", \"80\"), \"p:\")[p] \
             na=%concat(proc.name, container.id)",
            &ev,
        );
        assert_eq!(out.text, "j=bash+/etc/passwd c=BASH-X g=(c) v=80 na=<NA>");
        let names: Vec<&str> = out.fields.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "join(\"+\", (proc.name, fd.name))",
                "toupper(concat(proc.name, \"-x\"))",
                "getopt(proc.args, \"c\")",
                "getopt((\"-p\", \"80\"), \"p:\")[p]",
                "concat(proc.name, container.id)"
            ]
        );
        let cat = FakeCatalog::new();
        let mut compiler = Compiler::new(&cat);
        let t = compiler
            .compile_template("%concat(proc.name, fd.name)")
            .unwrap();
        let refs: Vec<&str> = t
            .field_refs()
            .map(|r| vigil_fields::Catalog::def(&cat, r.id).name)
            .collect();
        assert_eq!(refs, ["proc.name", "fd.name"]);
        let e = compiler.compile_template("x %join(\"-\")").unwrap_err();
        assert_eq!((e[0].code, e[0].span.start), ("E_TRANSFORMER_ARGS", 3));
    }

    #[test]
    fn fields_are_listed_as_written() {
        let cat = FakeCatalog::new();
        let mut compiler = Compiler::new(&cat);
        let t = compiler
            .compile_template("%proc.aname[2] %len(proc.args) %proc.aname[2].")
            .unwrap();
        assert_eq!(
            t.fields().collect::<Vec<_>>(),
            ["proc.aname[2]", "len(proc.args)"]
        );
        let mut ctx = EvalCtx::new(compiler.slots());
        assert_eq!(
            t.render(&FakeEvent::default(), &mut ctx.event()).text,
            "init 2 init."
        );
    }

    #[test]
    fn template_errors_have_codes_and_offsets() {
        let cat = FakeCatalog::new();
        let cases: &[(&str, &str)] = &[
            ("x=%nope.field y", "E_UNKNOWN_FIELD @ 3"),
            (
                "%proc.name %bad.one %bad.two",
                "E_UNKNOWN_FIELD @ 12, E_UNKNOWN_FIELD @ 21",
            ),
            ("50% off", "E_SYNTAX @ 2"),
            ("end %", "E_SYNTAX @ 4"),
            ("%foo(proc.name)", "E_UNKNOWN_TRANSFORMER @ 1"),
            ("%tolower(proc.name", "E_SYNTAX @ 18"),
            ("%proc.aname[x]", "E_FIELD_ARG @ 1"),
            ("%tolower(fd.num)", "E_BAD_OPERATOR @ 9"),
        ];
        let mut failures = Vec::new();
        for (text, want) in cases {
            match Compiler::new(&cat).compile_template(text) {
                Ok(_) => failures.push(format!("{text}: compiled")),
                Err(errors) => {
                    let got = errors
                        .iter()
                        .map(|e| format!("{} @ {}", e.code, e.span.start))
                        .collect::<Vec<_>>()
                        .join(", ");
                    if got != *want {
                        failures.push(format!("{text}: got {got}, want {want}"));
                    }
                }
            }
        }
        assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
    }

    const FORGED: &[u8] =
        b"x\n12:00:00.000000000: Critical FORGED\r\x1b[2K\x07\x7f\xc2\x85\xe2\x80\xa8\xff";

    #[test]
    fn hostile_values_cannot_add_a_line_to_the_text() {
        let mut ev = FakeEvent::default();
        let hostile = || Value::Str(Cow::Owned(FORGED.to_vec()));
        ev.set("proc.cmdline", vec![hostile()]);
        ev.set(
            "proc.args",
            vec![Value::Str(Cow::Borrowed(b"-c")), hostile()],
        );
        ev.set("proc.name", vec![hostile()]);
        let out = render(
            "Alert\ttab (cmd=%proc.cmdline args=%proc.args up=%toupper(proc.name))",
            &ev,
        );
        let escaped =
            "x\\n12:00:00.000000000: Critical FORGED\\r\\x1b[2K\\x07\\x7f\\u{85}\\u{2028}\\xff";
        let upper =
            "X\\n12:00:00.000000000: CRITICAL FORGED\\r\\x1b[2K\\x07\\x7f\\u{85}\\u{2028}\\xff";
        assert_eq!(
            out.text,
            format!("Alert\ttab (cmd={escaped} args=(-c,{escaped}) up={upper})")
        );
        assert_eq!(out.text.lines().count(), 1);
        // The rule's own text is copied as written (its tab stays); values have no control left.
        let values = &out.text["Alert\ttab".len()..];
        assert!(
            !values.chars().any(|c| c.is_control() || c == '\u{2028}'),
            "{values:?}"
        );
        // The typed values are the values themselves: JSON escapes them.
        assert_eq!(out.fields[0].1, Some(hostile()));
        let mut list = b"(-c,".to_vec();
        list.extend_from_slice(FORGED);
        list.push(b')');
        assert_eq!(out.fields[1].1, Some(Value::Str(Cow::Owned(list))));
    }

    #[test]
    fn raw_rendering_leaves_values_unescaped() {
        let cat = FakeCatalog::new();
        let mut compiler = Compiler::new(&cat);
        let t = compiler.compile_template("cmd=%proc.cmdline").unwrap();
        let mut ctx = EvalCtx::new(&compiler.finish());
        let mut ev = FakeEvent::default();
        ev.set("proc.cmdline", vec![Value::Str(Cow::Borrowed(b"a\nb\xff"))]);
        assert_eq!(t.render_raw(&ev, &mut ctx.event()).text, "cmd=a\nb\u{fffd}");
        assert_eq!(t.render(&ev, &mut ctx.event()).text, "cmd=a\\nb\\xff");
    }

    #[test]
    fn plain_text_and_unicode_pass_through() {
        let out = render("héllo — %proc.name ✓", &FakeEvent::default());
        assert_eq!(out.text, "héllo — bash ✓");
        assert!(render("", &FakeEvent::default()).text.is_empty());
    }
}

//! The **read** phase's YAML layer: a small node tree with source positions, built from
//! `saphyr-parser` events (serde-based readers drop positions).
//!
//! Limits: nesting deeper than [`MAX_DEPTH`] and alias expansion past [`MAX_ALIAS_NODES`] are
//! errors, so adversarial input can neither overflow the stack nor explode memory.
//!
//! Leniency: Falco's YAML parser (yaml-cpp) accepts a flow collection whose closing `]`/`}`
//! sits on its own line indented less than the collection's key (upstream
//! `falco-sandbox_rules.yaml` does this); saphyr rejects it with "invalid indentation". When
//! that error lands on a line holding only closing brackets, the line is re-indented and the
//! text parsed again. Flow indicators' indentation carries no meaning, so this changes nothing
//! else; reported columns on such lines are mapped back to the original text.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle};

/// Deepest nesting of sequences and maps accepted (Falco rules files use 4).
pub const MAX_DEPTH: usize = 64;
/// Most nodes that alias expansion may create in one source.
pub const MAX_ALIAS_NODES: usize = 100_000;
/// Most re-indent-and-retry passes for the closing-bracket leniency.
const MAX_REINDENT_PASSES: usize = 64;

/// A 1-based line and column (in characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

/// Where a scalar's text lies in the source, for mapping offsets inside its value back to
/// `line:col` (see [`crate::loader::text`]). Kept as positions rather than byte offsets because
/// the closing-bracket leniency may have shifted bytes (never lines, never scalar columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ScalarSpan {
    /// Start of the scalar's source text (for block scalars: the first content line).
    pub start: Pos,
    /// End (exclusive) of the scalar's source text.
    pub end: Pos,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Kind {
    Scalar {
        value: String,
        /// Plain (unquoted) scalars may be `null`, booleans or numbers.
        plain: bool,
        span: ScalarSpan,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    pub pos: Pos,
    pub kind: Kind,
}

impl Node {
    /// The scalar text, if this is a scalar.
    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar { value, .. } => Some(value),
            _ => None,
        }
    }

    /// Whether this is a YAML null (`~`, `null`, empty plain scalar).
    pub fn is_null(&self) -> bool {
        matches!(&self.kind, Kind::Scalar { value, plain: true, .. }
            if matches!(value.as_str(), "" | "~" | "null" | "Null" | "NULL"))
    }

    /// A YAML 1.2 core-schema boolean.
    pub fn as_bool(&self) -> Option<bool> {
        match &self.kind {
            Kind::Scalar {
                value, plain: true, ..
            } => match value.as_str() {
                // yaml-cpp's `as<bool>` (Falco's reader) also takes YAML 1.1's y/yes/on and
                // n/no/off spellings.
                "true" | "True" | "TRUE" | "y" | "Y" | "yes" | "Yes" | "YES" | "on" | "On"
                | "ON" => Some(true),
                "false" | "False" | "FALSE" | "n" | "N" | "no" | "No" | "NO" | "off" | "Off"
                | "OFF" => Some(false),
                _ => None,
            },
            _ => None,
        }
    }

    /// Looks up `key` in a map node.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Map(entries) => entries
                .iter()
                .find(|(k, _)| k.as_str() == Some(key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// A short name of the node's type, for messages.
    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            Kind::Scalar { .. } if self.is_null() => "null",
            Kind::Scalar { .. } => "scalar",
            Kind::Seq(_) => "sequence",
            Kind::Map(_) => "map",
        }
    }
}

/// A YAML syntax problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct YamlError {
    pub pos: Pos,
    pub message: String,
}

/// Byte offsets of line starts, to turn (line, char column) into byte offsets and back.
#[derive(Clone, Debug)]
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let mut starts = vec![0];
        starts.extend(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1));
        LineIndex { starts }
    }

    /// The byte offset of 1-based `line`, 0-based char `col` (clamped to the text).
    pub fn byte_of(&self, text: &str, line: usize, col: usize) -> usize {
        let Some(&start) = self.starts.get(line.saturating_sub(1)) else {
            return text.len();
        };
        let rest = &text[start..];
        start + rest.char_indices().nth(col).map_or(rest.len(), |(i, _)| i)
    }

    /// The 1-based position of byte offset `byte` (clamped, moved back to a char boundary).
    pub fn pos_of(&self, text: &str, byte: usize) -> Pos {
        let mut byte = byte.min(text.len());
        while !text.is_char_boundary(byte) {
            byte -= 1;
        }
        let line = self.starts.partition_point(|&s| s <= byte).max(1);
        let start = self.starts[line - 1];
        let col = text[start..byte].chars().count() + 1;
        Pos {
            line: u32::try_from(line).unwrap_or(u32::MAX),
            col: u32::try_from(col).unwrap_or(u32::MAX),
        }
    }
}

/// Parses every document of `text`. Empty documents are skipped.
pub fn parse(text: &str) -> Result<Vec<Node>, YamlError> {
    let first = match parse_strict(text) {
        Ok(docs) => return Ok(docs),
        Err(e) => e,
    };
    // Leniency for under-indented closing brackets (see the module docs).
    let mut fixed = text.to_string();
    let mut pads: HashMap<u32, u32> = HashMap::new();
    let mut err = first.clone();
    for _ in 0..MAX_REINDENT_PASSES {
        if !err.message.starts_with("invalid indentation") {
            break;
        }
        let Some(pad) = reindent_closer_line(&mut fixed, err.line) else {
            break;
        };
        *pads.entry(err.line).or_default() += pad;
        match parse_strict(&fixed) {
            // Only closing brackets moved and no node starts at one: positions hold as they are.
            Ok(docs) => return Ok(docs),
            Err(e) => err = e,
        }
    }
    if pads.is_empty() {
        return Err(first.into_error());
    }
    let mut e = err.into_error();
    if let Some(pad) = pads.get(&e.pos.line) {
        e.pos.col = e.pos.col.saturating_sub(*pad).max(1);
    }
    Err(e)
}

/// A raw error from one strict pass (line is 1-based, col 0-based).
#[derive(Clone, Debug)]
struct RawError {
    line: u32,
    col: u32,
    message: String,
}

impl RawError {
    fn into_error(self) -> YamlError {
        YamlError {
            pos: Pos {
                line: self.line,
                col: self.col + 1,
            },
            message: self.message,
        }
    }
}

/// Indents line `line` (1-based) of `text` to the indentation of the nearest non-blank line
/// above it plus one, if it holds only closing flow indicators, commas and a comment.
/// Returns the number of spaces added.
fn reindent_closer_line(text: &mut String, line: u32) -> Option<u32> {
    let index = LineIndex::new(text);
    let line = usize::try_from(line).ok()?;
    let start = *index.starts.get(line.checked_sub(1)?)?;
    let end = text[start..].find('\n').map_or(text.len(), |i| start + i);
    let content = text[start..end].trim_end_matches('\r');
    let body = content.trim_start_matches(' ');
    let body_no_comment = body.split('#').next().unwrap_or("");
    if body_no_comment.trim().is_empty()
        || !body_no_comment
            .chars()
            .all(|c| matches!(c, ']' | '}' | ',' | ' ' | '\t'))
    {
        return None;
    }
    let indent = content.len() - body.len();
    let mut want = None;
    for prev in (1..line).rev() {
        let s = index.starts[prev - 1];
        let e = index.starts[prev] - 1;
        let l = text[s..e].trim_end_matches('\r');
        let b = l.trim_start_matches(' ');
        if !b.is_empty() && !b.starts_with('#') {
            want = Some(l.len() - b.len() + 1);
            break;
        }
    }
    let want = want?;
    if want <= indent {
        return None;
    }
    let pad = want - indent;
    text.insert_str(start, &" ".repeat(pad));
    u32::try_from(pad).ok()
}

enum Frame {
    Seq {
        pos: Pos,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        pos: Pos,
        anchor: usize,
        entries: Vec<(Node, Node)>,
        key: Option<Node>,
    },
}

fn parse_strict(text: &str) -> Result<Vec<Node>, RawError> {
    let mut parser = Parser::new_from_str(text);
    let mut docs = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut alias_nodes = 0usize;
    let mut root: Option<Node> = None;
    loop {
        let (event, span) = match parser.next_event() {
            None => break,
            Some(Ok(ev)) => ev,
            Some(Err(e)) => {
                return Err(RawError {
                    line: to_u32(e.marker().line()),
                    col: to_u32(e.marker().col()),
                    message: e.info().to_string(),
                })
            }
        };
        let pos = Pos {
            line: to_u32(span.start.line()),
            col: to_u32(span.start.col()) + 1,
        };
        let too_deep = || RawError {
            line: pos.line,
            col: pos.col - 1,
            message: format!("yaml nested deeper than {MAX_DEPTH} levels"),
        };
        let done = match event {
            Event::StreamStart | Event::StreamEnd | Event::Nothing => None,
            Event::DocumentStart(_) => {
                root = None;
                None
            }
            Event::DocumentEnd => {
                if let Some(doc) = root.take() {
                    if !doc.is_null() {
                        docs.push(doc);
                    }
                }
                None
            }
            Event::SequenceStart(anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(too_deep());
                }
                stack.push(Frame::Seq {
                    pos,
                    anchor,
                    items: Vec::new(),
                });
                None
            }
            Event::MappingStart(anchor, _) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(too_deep());
                }
                stack.push(Frame::Map {
                    pos,
                    anchor,
                    entries: Vec::new(),
                    key: None,
                });
                None
            }
            Event::SequenceEnd | Event::MappingEnd => match stack.pop() {
                Some(Frame::Seq { pos, anchor, items }) => Some((
                    anchor,
                    Node {
                        pos,
                        kind: Kind::Seq(items),
                    },
                )),
                Some(Frame::Map {
                    pos,
                    anchor,
                    entries,
                    ..
                }) => Some((
                    anchor,
                    Node {
                        pos,
                        kind: Kind::Map(entries),
                    },
                )),
                None => None,
            },
            Event::Scalar(value, style, anchor, _) => Some((
                anchor,
                Node {
                    pos,
                    kind: Kind::Scalar {
                        value: value.into_owned(),
                        plain: style == ScalarStyle::Plain,
                        span: ScalarSpan {
                            start: pos,
                            end: Pos {
                                line: to_u32(span.end.line()),
                                col: to_u32(span.end.col()) + 1,
                            },
                        },
                    },
                },
            )),
            Event::Alias(id) => {
                let Some(target) = anchors.get(&id) else {
                    return Err(RawError {
                        line: pos.line,
                        col: pos.col - 1,
                        message: "alias to an unknown anchor".into(),
                    });
                };
                alias_nodes += count_nodes(target);
                if alias_nodes > MAX_ALIAS_NODES {
                    return Err(RawError {
                        line: pos.line,
                        col: pos.col - 1,
                        message: format!("aliases expand to more than {MAX_ALIAS_NODES} nodes"),
                    });
                }
                let mut node = target.clone();
                node.pos = pos;
                Some((0, node))
            }
        };
        if let Some((anchor, node)) = done {
            if anchor != 0 {
                anchors.insert(anchor, node.clone());
            }
            match stack.last_mut() {
                Some(Frame::Seq { items, .. }) => items.push(node),
                Some(Frame::Map { entries, key, .. }) => match key.take() {
                    None => *key = Some(node),
                    Some(k) => entries.push((k, node)),
                },
                None => root = Some(node),
            }
        }
    }
    Ok(docs)
}

/// Counts the nodes of a tree (depth is bounded by [`MAX_DEPTH`], so recursion is safe).
fn count_nodes(node: &Node) -> usize {
    1 + match &node.kind {
        Kind::Scalar { .. } => 0,
        Kind::Seq(items) => items.iter().map(count_nodes).sum(),
        Kind::Map(entries) => entries
            .iter()
            .map(|(k, v)| count_nodes(k) + count_nodes(v))
            .sum(),
    }
}

fn to_u32(v: usize) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_positioned_tree() {
        let docs = parse("- rule: a\n  condition: evt.type = open\n").unwrap();
        assert_eq!(docs.len(), 1);
        let Kind::Seq(items) = &docs[0].kind else {
            panic!("root is not a sequence")
        };
        let cond = items[0].get("condition").unwrap();
        assert_eq!(cond.pos, Pos { line: 2, col: 14 });
        assert_eq!(cond.as_str(), Some("evt.type = open"));
        assert_eq!(items[0].pos, Pos { line: 1, col: 3 });
    }

    #[test]
    fn accepts_under_indented_closing_bracket() {
        let text =
            "- list: x\n  items: [\n      \"a\",\n      \"b\"\n  ]\n- list: y\n  items: [c]\n";
        assert!(
            parse_strict(text).is_err(),
            "saphyr became lenient; drop the retry"
        );
        let docs = parse(text).unwrap();
        let Kind::Seq(items) = &docs[0].kind else {
            panic!("root is not a sequence")
        };
        assert_eq!(items.len(), 2);
        let Kind::Seq(values) = &items[0].get("items").unwrap().kind else {
            panic!("items is not a sequence")
        };
        assert_eq!(values.len(), 2);
    }

    #[test]
    fn reports_syntax_errors_with_position() {
        // saphyr reports an unterminated quoted scalar at its start.
        let e = parse("- a: 1\n  b: \"open\n").unwrap_err();
        assert_eq!(e.pos, Pos { line: 2, col: 6 }, "{e:?}");
        let e = parse("- a: [1, 2\n- b\n").unwrap_err();
        assert!(e.pos.line >= 2, "{e:?}");
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let e = parse(&"[".repeat(10_000)).unwrap_err();
        assert_eq!(e.pos.line, 1);
        let mut block = String::new();
        for i in 0..10_000 {
            block.push_str(&" ".repeat(i));
            block.push_str("-\n");
        }
        let e = parse(&block).unwrap_err();
        assert!(e.message.contains("deeper"), "{e:?}");
    }

    #[test]
    fn aliases_are_expanded_within_a_budget() {
        let docs = parse("- &a {x: 1}\n- *a\n").unwrap();
        let Kind::Seq(items) = &docs[0].kind else {
            panic!("root is not a sequence")
        };
        assert_eq!(items[1].get("x").and_then(Node::as_str), Some("1"));
        let mut bomb = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let p = i - 1;
            bomb.push_str(&format!(
                "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
            ));
        }
        let e = parse(&bomb).unwrap_err();
        assert!(e.message.contains("aliases"), "{e:?}");
    }

    #[test]
    fn line_index_maps_both_ways() {
        let text = "ab\ncé d\n";
        let idx = LineIndex::new(text);
        let b = idx.byte_of(text, 2, 2);
        assert_eq!(&text[b..b + 1], " ");
        assert_eq!(idx.pos_of(text, b), Pos { line: 2, col: 3 });
    }
}

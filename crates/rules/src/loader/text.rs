//! Maps spans in condition and output texts back to `file:line:col`.
//!
//! Every text handed to the parser or compiler (a rule's or macro's condition, an output, a
//! synthetic exception) is registered here and given a distinct range of a *virtual* offset
//! space. The parsed AST's spans are shifted into that range, so after macro expansion mixes
//! nodes from many texts, one `u32` still says where a node came from.
//!
//! A text may be the concatenation of several YAML scalars (`append` joins conditions with a
//! space); each piece remembers its scalar. Inside a scalar, an offset in the *value* is mapped
//! to the source by aligning the value with the scalar's source text character by character
//! (skipping what YAML removed: quotes, escapes' backslashes, indentation, folded line
//! breaks). This is exact for plain, quoted and block scalars without escapes, and
//! best-effort (never outside the scalar) with escapes such as `\n` or `\t`.

use super::yaml::{LineIndex, Pos, ScalarSpan};

/// One loaded source.
#[derive(Clone, Debug)]
pub struct SourceFile {
    pub name: String,
    pub text: String,
    pub lines: LineIndex,
}

impl SourceFile {
    pub fn new(name: &str, text: &str) -> SourceFile {
        SourceFile {
            name: name.to_string(),
            text: text.to_string(),
            lines: LineIndex::new(text),
        }
    }
}

/// Where a piece of text comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A YAML scalar: offsets are mapped inside it.
    Scalar(ScalarSpan),
    /// Generated text (exceptions): every offset maps to this position.
    Fixed(Pos),
}

/// A piece of text with its origin.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub text: String,
    pub file: usize,
    pub origin: Origin,
}

#[derive(Clone, Debug)]
struct Entry {
    base: u32,
    /// The name of the rule or macro the text belongs to, for diagnostics' `item`.
    owner: String,
    text: String,
    /// (start in `text`, piece)
    pieces: Vec<(usize, Piece)>,
}

/// The registry of texts and their virtual offset ranges.
#[derive(Clone, Debug, Default)]
pub struct Texts {
    entries: Vec<Entry>,
    next: u32,
}

/// A registered text: its virtual base and its full (joined) text.
#[derive(Clone, Copy, Debug)]
pub struct TextRef<'t> {
    pub base: u32,
    pub text: &'t str,
}

impl Texts {
    /// Registers the pieces joined by single spaces. Returns `None` when the virtual offset
    /// space is exhausted (over 4 GiB of condition text).
    pub fn add(&mut self, pieces: Vec<Piece>, owner: &str) -> Option<TextRef<'_>> {
        let mut text = String::new();
        let mut starts = Vec::with_capacity(pieces.len());
        for (i, piece) in pieces.into_iter().enumerate() {
            if i > 0 {
                text.push(' ');
            }
            starts.push((text.len(), piece.clone()));
            text.push_str(&piece.text);
        }
        let base = self.next;
        let len = u32::try_from(text.len()).ok()?;
        self.next = base.checked_add(len)?.checked_add(1)?;
        self.entries.push(Entry {
            base,
            owner: owner.to_string(),
            text,
            pieces: starts,
        });
        let entry = self.entries.last().expect("an entry was just pushed");
        Some(TextRef {
            base: entry.base,
            text: &entry.text,
        })
    }

    /// The file index, position and owner of virtual offset `at`.
    pub fn locate(&self, files: &[SourceFile], at: u32) -> Option<(usize, Pos, &str)> {
        let i = self
            .entries
            .partition_point(|e| e.base <= at)
            .checked_sub(1)?;
        let entry = &self.entries[i];
        let local = usize::try_from(at - entry.base).ok()?;
        let p = entry
            .pieces
            .partition_point(|(start, _)| *start <= local)
            .checked_sub(1)?;
        let (start, piece) = &entry.pieces[p];
        let within = (local - start).min(piece.text.len());
        let file = files.get(piece.file)?;
        let pos = match piece.origin {
            Origin::Fixed(pos) => pos,
            Origin::Scalar(span) => map_in_scalar(file, span, &piece.text, within),
        };
        Some((piece.file, pos, &entry.owner))
    }
}

/// The position of byte `offset` of `value`, the value of the scalar at `span` in `file`.
pub fn map_in_scalar(file: &SourceFile, span: ScalarSpan, value: &str, offset: usize) -> Pos {
    let text = &file.text;
    let start = file.lines.byte_of(
        text,
        span.start.line as usize,
        span.start.col.saturating_sub(1) as usize,
    );
    let end = file
        .lines
        .byte_of(
            text,
            span.end.line as usize,
            span.end.col.saturating_sub(1) as usize,
        )
        .max(start);
    match align(&text[start..end], value, offset) {
        Some(src_off) => file.lines.pos_of(text, start + src_off),
        None => span.start,
    }
}

/// Finds where byte `offset` of `value` lies in `src`, matching value characters in order
/// and skipping source characters that YAML dropped.
fn align(src: &str, value: &str, offset: usize) -> Option<usize> {
    let mut offset = offset.min(value.len());
    while !value.is_char_boundary(offset) {
        offset -= 1;
    }
    let mut si = 0;
    for c in value[..offset].chars() {
        si += src[si..].find(c)? + c.len_utf8();
    }
    match value[offset..].chars().next() {
        Some(c) => Some(si + src[si..].find(c)?),
        None => Some(si),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::loader::yaml::{parse, Kind, Node};

    fn scalar(node: &Node) -> (String, ScalarSpan) {
        match &node.kind {
            Kind::Scalar { value, span, .. } => (value.clone(), *span),
            _ => panic!("not a scalar: {node:?}"),
        }
    }

    fn item_value(text: &str, key: &str) -> (String, ScalarSpan) {
        let docs = parse(text).unwrap();
        let Kind::Seq(items) = &docs[0].kind else {
            panic!("root is not a sequence")
        };
        scalar(items[0].get(key).unwrap())
    }

    fn pos_of(text: &str, needle: &str) -> Pos {
        let file = SourceFile::new("f", text);
        let (value, span) = item_value(text, "condition");
        let off = value.find(needle).unwrap();
        map_in_scalar(&file, span, &value, off)
    }

    #[test]
    fn maps_plain_and_quoted_scalars_exactly() {
        let text = "- macro: m\n  condition: evt.type = open and foo\n";
        assert_eq!(pos_of(text, "foo"), Pos { line: 2, col: 34 });
        let text = "- macro: m\n  condition: \"a = \\\"x\\\" and foo\"\n";
        assert_eq!(pos_of(text, "foo"), Pos { line: 2, col: 29 });
    }

    #[test]
    fn maps_folded_and_literal_block_scalars() {
        let text = "- macro: m\n  condition: >\n    evt.type = open\n      and foo\n";
        assert_eq!(pos_of(text, "foo"), Pos { line: 4, col: 11 });
        let text = "- macro: m\n  condition: |\n    a\n    and  foo\n";
        assert_eq!(pos_of(text, "foo"), Pos { line: 4, col: 10 });
        let text = "- macro: m\n  condition: a and\n    b and foo\n";
        assert_eq!(pos_of(text, "foo"), Pos { line: 3, col: 11 });
    }

    #[test]
    fn locates_through_joined_pieces() {
        let text = "- macro: m\n  condition: a\n- macro: m\n  condition: and foo\n";
        let files = vec![SourceFile::new("f", text)];
        let docs = parse(text).unwrap();
        let Kind::Seq(items) = &docs[0].kind else {
            panic!("root is not a sequence")
        };
        let pieces: Vec<Piece> = items
            .iter()
            .map(|it| {
                let (value, span) = scalar(it.get("condition").unwrap());
                Piece {
                    text: value,
                    file: 0,
                    origin: Origin::Scalar(span),
                }
            })
            .collect();
        let mut texts = Texts::default();
        texts.add(
            vec![Piece {
                text: "xyz".into(),
                file: 0,
                origin: Origin::Fixed(Pos { line: 9, col: 9 }),
            }],
            "x",
        );
        let r = texts.add(pieces, "m").unwrap();
        assert_eq!(r.text, "a and foo");
        let (base, at) = (r.base, r.text.find("foo").unwrap() as u32);
        assert_eq!(
            texts.locate(&files, base + at),
            Some((0, Pos { line: 4, col: 18 }, "m"))
        );
        assert_eq!(
            texts.locate(&files, 1),
            Some((0, Pos { line: 9, col: 9 }, "x"))
        );
    }
}

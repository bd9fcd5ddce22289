//! A YAML value tree that remembers where each node came from.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

/// One YAML node with its 1-based line and column (0 when unknown).
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub line: u64,
    pub col: u64,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Null,
    Bool(bool),
    Int(i128),
    Float,
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    pub fn new(kind: Kind) -> Node {
        Node {
            line: 0,
            col: 0,
            kind,
        }
    }

    /// The key text of a mapping key (scalars only).
    pub fn key_text(&self) -> Option<String> {
        match &self.kind {
            Kind::Str(s) => Some(s.clone()),
            Kind::Int(i) => Some(i.to_string()),
            Kind::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }
}

impl Kind {
    /// How an error message names the kind of value found.
    pub fn describe(&self) -> &'static str {
        match self {
            Kind::Null => "null",
            Kind::Bool(_) => "a boolean",
            Kind::Int(_) => "an integer",
            Kind::Float => "a float",
            Kind::Str(_) => "a string",
            Kind::Seq(_) => "a sequence",
            Kind::Map(_) => "a mapping",
        }
    }
}

/// Deepest nesting accepted. Vigil's own keys nest at most 6 levels; the margin is for
/// Falco-only sections. Building the tree recurses once per level, so this also bounds the stack.
pub(crate) const MAX_DEPTH: usize = 20;

/// Parses YAML text into a node tree; an empty document is `Null`.
pub(crate) fn parse(text: &str) -> Result<Node, serde_saphyr::Error> {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    // Only YAML 1.2 `true`/`false` become booleans so that names such as `n` or `on` stay
    // strings; boolean settings accept the YAML 1.1 spellings themselves (see `Ctx::bool`).
    options.strict_booleans = true;
    options.budget = Some(budget);
    let node: Option<Node> = serde_saphyr::from_str_with_options(text, options)?;
    Ok(node.unwrap_or_else(|| Node::new(Kind::Null)))
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = Spanned::<Kind>::deserialize(d)?;
        Ok(Node {
            line: s.referenced.line(),
            col: s.referenced.column(),
            kind: s.value,
        })
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KindVisitor)
    }
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = Kind;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<Kind, E> {
        Ok(Kind::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Kind, D::Error> {
        Kind::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Kind, E> {
        Ok(Kind::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Kind, E> {
        Ok(Kind::Int(v.into()))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Kind, E> {
        Ok(Kind::Int(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Kind, E> {
        Ok(Kind::Int(v))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Kind, E> {
        i128::try_from(v)
            .map(Kind::Int)
            .map_err(|_| E::custom("integer out of range"))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Kind, E> {
        let _ = v;
        Ok(Kind::Float)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Kind, E> {
        Ok(Kind::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Kind, E> {
        Ok(Kind::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut a: A) -> Result<Kind, A::Error> {
        let mut v = Vec::new();
        while let Some(n) = a.next_element::<Node>()? {
            v.push(n);
        }
        Ok(Kind::Seq(v))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut a: A) -> Result<Kind, A::Error> {
        let mut v = Vec::new();
        while let Some((k, n)) = a.next_entry::<Node, Node>()? {
            v.push((k, n));
        }
        Ok(Kind::Map(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_kinds() {
        let n = parse("a: 1\nb:\n  - 'true'\n  - ~\n").unwrap();
        let Kind::Map(m) = &n.kind else {
            panic!("expected a map: {n:?}")
        };
        assert_eq!((m[1].0.line, m[1].0.col), (2, 1));
        let Kind::Seq(s) = &m[1].1.kind else {
            panic!("expected a seq")
        };
        assert!(matches!(&s[0].kind, Kind::Str(x) if x == "true"));
        assert_eq!((s[1].line, s[1].col), (4, 5));
        assert!(matches!(s[1].kind, Kind::Null));
        assert!(matches!(parse("").unwrap().kind, Kind::Null));
        assert!(matches!(
            parse("# only a comment\n").unwrap().kind,
            Kind::Null
        ));
        let nested = |d: usize| format!("a: {}{}\n", "[".repeat(d), "]".repeat(d));
        assert!(parse(&nested(MAX_DEPTH - 1)).is_ok());
        assert!(parse(&nested(MAX_DEPTH + 1)).is_err());
    }
}

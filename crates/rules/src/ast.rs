//! The condition syntax tree shared by the parser, the loader (macro and list resolution) and
//! the compiler. Spans are byte offsets into the condition text the node was parsed from; the
//! loader maps them to `file:line:col`.

use std::borrow::Cow;
use std::fmt;

/// Whitespace as the lexer sees it (unlike `u8::is_ascii_whitespace`, includes vertical tab).
pub(crate) fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0b' | b'\x0c')
}

/// A byte range in the source text of one condition (or output template).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

/// A boolean expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// `a and b and c` (flattened, at least two children).
    And(Vec<Expr>),
    /// `a or b or c` (flattened, at least two children).
    Or(Vec<Expr>),
    Not(Box<Expr>),
    /// A bare identifier in boolean position: a macro reference, resolved by the loader.
    Macro {
        name: String,
        span: Span,
    },
    /// `lhs OP rhs`.
    Compare {
        lhs: Operand,
        op: CmpOp,
        rhs: Rhs,
        span: Span,
    },
    /// `lhs exists`.
    Exists {
        lhs: Operand,
        span: Span,
    },
    /// A constant produced by resolution (e.g. an empty list with `in`); never parsed.
    Const(bool),
}

/// Comparison operators of Falco's condition language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    Intersects,
    Pmatch,
    Contains,
    IContains,
    BContains,
    StartsWith,
    BStartsWith,
    EndsWith,
    Glob,
    IGlob,
    Regex,
}

impl CmpOp {
    /// Every operator, symbols first, then words.
    pub const ALL: [CmpOp; 18] = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
        CmpOp::In,
        CmpOp::Intersects,
        CmpOp::Pmatch,
        CmpOp::Contains,
        CmpOp::IContains,
        CmpOp::BContains,
        CmpOp::StartsWith,
        CmpOp::BStartsWith,
        CmpOp::EndsWith,
        CmpOp::Glob,
        CmpOp::IGlob,
        CmpOp::Regex,
    ];

    /// The operator written `text` (its [`CmpOp::as_str`] spelling, or `==` for `=`).
    pub fn from_text(text: &str) -> Option<CmpOp> {
        if text == "==" {
            return Some(CmpOp::Eq);
        }
        CmpOp::ALL.into_iter().find(|op| op.as_str() == text)
    }

    /// Whether the operator is a word (`contains`) rather than a symbol (`>=`).
    pub fn is_word(self) -> bool {
        self.as_str().bytes().all(|b| b.is_ascii_alphabetic())
    }

    /// The operator as written in a condition (`=` for [`CmpOp::Eq`]).
    pub fn as_str(self) -> &'static str {
        match self {
            CmpOp::Eq => "=",
            CmpOp::Ne => "!=",
            CmpOp::Lt => "<",
            CmpOp::Le => "<=",
            CmpOp::Gt => ">",
            CmpOp::Ge => ">=",
            CmpOp::In => "in",
            CmpOp::Intersects => "intersects",
            CmpOp::Pmatch => "pmatch",
            CmpOp::Contains => "contains",
            CmpOp::IContains => "icontains",
            CmpOp::BContains => "bcontains",
            CmpOp::StartsWith => "startswith",
            CmpOp::BStartsWith => "bstartswith",
            CmpOp::EndsWith => "endswith",
            CmpOp::Glob => "glob",
            CmpOp::IGlob => "iglob",
            CmpOp::Regex => "regex",
        }
    }

    /// Whether the right-hand side is a parenthesised list (`in`, `intersects`, `pmatch`).
    pub fn takes_list(self) -> bool {
        matches!(self, CmpOp::In | CmpOp::Intersects | CmpOp::Pmatch)
    }

    /// Whether a list modifier (`oneof`, `anyof`, `allof`) may follow: only libsinsp's string
    /// operators take one, not the numeric `<`, `<=`, `>`, `>=` nor the list operators
    /// (libs `parser.cpp`: `s_binary_str_ops`).
    pub fn takes_modifier(self) -> bool {
        !self.takes_list() && !matches!(self, CmpOp::Lt | CmpOp::Le | CmpOp::Gt | CmpOp::Ge)
    }
}

/// A list modifier after a scalar comparison operator (Falco 0.44, libs 0.25):
/// `field OP MOD (v1, v2 …)` expands to `field OP v1`, `field OP v2` … combined by the modifier.
/// An empty list never matches (whatever the modifier).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Modifier {
    /// Exactly one of the comparisons holds.
    OneOf,
    /// At least one holds (`or`).
    AnyOf,
    /// Every one holds (`and`).
    AllOf,
}

impl Modifier {
    pub const ALL: [Modifier; 3] = [Modifier::OneOf, Modifier::AnyOf, Modifier::AllOf];

    pub fn as_str(self) -> &'static str {
        match self {
            Modifier::OneOf => "oneof",
            Modifier::AnyOf => "anyof",
            Modifier::AllOf => "allof",
        }
    }

    pub fn from_text(text: &str) -> Option<Modifier> {
        Modifier::ALL.into_iter().find(|m| m.as_str() == text)
    }

    /// Combines the outcomes of the per-item comparisons (`false` for no item).
    pub fn combine(self, mut outcomes: impl Iterator<Item = bool>) -> bool {
        match self {
            Modifier::AnyOf => outcomes.any(|b| b),
            Modifier::AllOf => {
                let mut any = false;
                for b in outcomes {
                    if !b {
                        return false;
                    }
                    any = true;
                }
                any
            }
            Modifier::OneOf => {
                let mut n = 0;
                for b in outcomes {
                    n += usize::from(b);
                    if n > 1 {
                        return false;
                    }
                }
                n == 1
            }
        }
    }
}

/// Field transformers (`tolower(proc.name)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Transformer {
    ToLower,
    ToUpper,
    B64,
    Basename,
    Len,
}

impl Transformer {
    pub fn as_str(self) -> &'static str {
        match self {
            Transformer::ToLower => "tolower",
            Transformer::ToUpper => "toupper",
            Transformer::B64 => "b64",
            Transformer::Basename => "basename",
            Transformer::Len => "len",
        }
    }
}

/// Falco's multivalue transformers (libs 0.25, `sinsp_filtercheck_multivalue_transformer`):
/// functions of several arguments, each a field, a transformer, a quoted value or a
/// parenthesised list of those.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MultiFn {
    /// `join(sep, list)`: the list's values joined by `sep` (one string).
    Join,
    /// `concat(a, b …)`: two or more strings concatenated (one string).
    Concat,
    /// `getopt(argv, optstring)`: the options of an argv-like list as getopt(3) reads them
    /// (a list of option letters and their values); `getopt(…)[c]` the value of option `c`.
    Getopt,
}

impl MultiFn {
    pub fn as_str(self) -> &'static str {
        match self {
            MultiFn::Join => "join",
            MultiFn::Concat => "concat",
            MultiFn::Getopt => "getopt",
        }
    }

    pub fn from_text(text: &str) -> Option<MultiFn> {
        [MultiFn::Join, MultiFn::Concat, MultiFn::Getopt]
            .into_iter()
            .find(|m| m.as_str() == text)
    }
}

/// One argument of a multivalue transformer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallArg {
    /// A field, possibly transformed (or another multivalue transformer).
    Operand(Operand),
    /// A quoted (or bare) value.
    Value(Literal),
    /// `(item, item …)`: fields and values; the list of all their values.
    List(Vec<CallArg>, Span),
}

/// A multivalue transformer call: `join("-", (proc.name, fd.name))`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MultiCall {
    pub func: MultiFn,
    pub args: Vec<CallArg>,
}

/// A field reference as written: `proc.aname[2]` is `name = "proc.aname"`, `arg = Some("2")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldName {
    pub name: String,
    pub arg: Option<String>,
    pub span: Span,
}

/// A field with zero or more transformers applied, innermost last:
/// `toupper(basename(fd.name))` is `transformers = [ToUpper, Basename]`.
///
/// When `call` is set the innermost value is a multivalue transformer instead of a field;
/// `field` then names the function (`name` = `join`, `arg` = the `[c]` selector of
/// `getopt(…)[c]`, `span` = the whole call) so that messages and positions still have a name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operand {
    pub transformers: Vec<Transformer>,
    pub field: FieldName,
    pub call: Option<Box<MultiCall>>,
}

impl Operand {
    /// A plain field reference, no transformers.
    pub fn field(field: FieldName) -> Operand {
        Operand {
            transformers: Vec::new(),
            field,
            call: None,
        }
    }

    /// Every span in the operand (the field's, or the call's and its arguments'), for the
    /// loader to move. Recursion is bounded by the parser's depth limit.
    pub fn spans_mut(&mut self, f: &mut dyn FnMut(&mut Span)) {
        f(&mut self.field.span);
        if let Some(call) = &mut self.call {
            for arg in &mut call.args {
                arg.spans_mut(f);
            }
        }
    }
}

impl CallArg {
    fn spans_mut(&mut self, f: &mut dyn FnMut(&mut Span)) {
        match self {
            CallArg::Operand(o) => o.spans_mut(f),
            CallArg::Value(l) => f(&mut l.span),
            CallArg::List(items, span) => {
                f(span);
                for item in items {
                    item.spans_mut(f);
                }
            }
        }
    }
}

/// A literal value as written (quotes removed, escapes resolved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Literal {
    pub text: String,
    /// Whether it was quoted: a quoted item is never expanded as a list name.
    pub quoted: bool,
    pub span: Span,
}

/// Bytes of a quoted literal that are not valid UTF-8 (written as `\xHH` escapes, e.g. `"\xff"`)
/// are carried in [`Literal::text`] as the private-use characters `U+10FF80..=U+10FFFF`
/// (`RAW_BYTE_BASE + byte`), the way Python's "surrogateescape" carries them; [`Literal::bytes`]
/// turns them back into the raw bytes.
pub const RAW_BYTE_BASE: u32 = 0x10FF00;

impl Literal {
    /// The literal's bytes, with raw-byte characters (see [`RAW_BYTE_BASE`]) decoded.
    pub fn bytes(&self) -> Cow<'_, [u8]> {
        if !self.text.chars().any(is_raw_byte) {
            return Cow::Borrowed(self.text.as_bytes());
        }
        let mut out = Vec::with_capacity(self.text.len());
        for c in self.text.chars() {
            if is_raw_byte(c) {
                out.push((u32::from(c) - RAW_BYTE_BASE) as u8);
            } else {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
        Cow::Owned(out)
    }
}

fn is_raw_byte(c: char) -> bool {
    (RAW_BYTE_BASE + 0x80..=RAW_BYTE_BASE + 0xff).contains(&u32::from(c))
}

/// Text for `bytes`: valid UTF-8 as is, every other byte as a raw-byte character.
pub fn text_from_bytes(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        out.push_str(chunk.valid());
        for &b in chunk.invalid() {
            out.push(char::from_u32(RAW_BYTE_BASE + u32::from(b)).expect("a valid scalar value"));
        }
    }
    out
}

/// The right-hand side of a comparison.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rhs {
    /// A single value: `proc.name = bash`, `fd.num >= 0`.
    Value(Literal),
    /// A parenthesised list: `(a, "b", list_name)`. Unquoted items that name a list are
    /// expanded in place by the loader before compilation.
    List(Vec<Literal>),
    /// Another field: `val(proc.pname)` or a transformer applied to a field.
    Field(Operand),
    /// A modified list after a scalar operator: `startswith anyof (/etc, /usr)`. Unquoted
    /// items that name a list are expanded like those of [`Rhs::List`].
    Modified(Modifier, Vec<Literal>),
}

/// Trees deeper than this print `…` for the rest (printing recurses).
const MAX_PRINT_DEPTH: usize = 2000;

/// Prints the condition in a canonical form that parses back to the same tree (without
/// spans): `and`/`or` groups nested in each other and `not` operands that are groups are
/// parenthesised, quoted literals keep their quotes (with `\x5c` for a backslash, `\"`, `\n`, `\t`, `\r`, `\xHH`
/// escapes), `val()` is explicit.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_expr(self, f, 0)
    }
}

fn write_expr(expr: &Expr, f: &mut fmt::Formatter<'_>, depth: usize) -> fmt::Result {
    if depth > MAX_PRINT_DEPTH {
        return f.write_str("…");
    }
    let grouped = |e: &Expr| matches!(e, Expr::And(_) | Expr::Or(_) | Expr::Not(_));
    let write_child = |e: &Expr, f: &mut fmt::Formatter<'_>, paren: bool| {
        if paren {
            f.write_str("(")?;
            write_expr(e, f, depth + 1)?;
            f.write_str(")")
        } else {
            write_expr(e, f, depth + 1)
        }
    };
    match expr {
        Expr::And(items) | Expr::Or(items) => {
            let sep = if matches!(expr, Expr::And(_)) {
                " and "
            } else {
                " or "
            };
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    f.write_str(sep)?;
                }
                write_child(item, f, grouped(item))?;
            }
            Ok(())
        }
        Expr::Not(inner) => {
            f.write_str("not ")?;
            write_child(inner, f, grouped(inner))
        }
        Expr::Macro { name, .. } => f.write_str(name),
        Expr::Compare { lhs, op, rhs, .. } => write!(f, "{lhs} {} {rhs}", op.as_str()),
        Expr::Exists { lhs, .. } => write!(f, "{lhs} exists"),
        Expr::Const(v) => write!(f, "{v}"),
    }
}

impl fmt::Display for Operand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for t in &self.transformers {
            write!(f, "{}(", t.as_str())?;
        }
        match &self.call {
            None => write!(f, "{}", self.field)?,
            Some(call) => {
                write!(f, "{}(", call.func.as_str())?;
                for (i, arg) in call.args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{arg}")?;
                }
                f.write_str(")")?;
                if let Some(arg) = &self.field.arg {
                    // The selector is one character; quote anything a bare argument cannot be.
                    let plain = !arg.is_empty()
                        && arg
                            .bytes()
                            .all(|b| !(is_ws(b) || matches!(b, b'[' | b']' | b'"' | b'\'')));
                    if plain {
                        write!(f, "[{arg}]")?;
                    } else {
                        f.write_str("[")?;
                        write_quoted(arg, f)?;
                        f.write_str("]")?;
                    }
                }
            }
        }
        for _ in &self.transformers {
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl fmt::Display for CallArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallArg::Operand(o) => write!(f, "{o}"),
            // Values are always quoted: a bare word could read back as a field or a call.
            CallArg::Value(l) => write_quoted(&l.text, f),
            CallArg::List(items, _) => {
                f.write_str("(")?;
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{item}")?;
                }
                f.write_str(")")
            }
        }
    }
}

/// `name` or `name[arg]` (the argument quoted when it holds whitespace, brackets or quotes).
impl fmt::Display for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name)?;
        if let Some(arg) = &self.arg {
            let plain = !arg.is_empty()
                && arg
                    .bytes()
                    .all(|b| !(is_ws(b) || matches!(b, b'[' | b']' | b'"' | b'\'')));
            if plain {
                write!(f, "[{arg}]")?;
            } else {
                f.write_str("[")?;
                write_quoted(arg, f)?;
                f.write_str("]")?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Literal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bare_ok = !self.text.is_empty()
            && self.text.bytes().all(|b| {
                !(b.is_ascii_whitespace()
                    || b.is_ascii_control()
                    || matches!(b, b'(' | b')' | b',' | b'"' | b'\''))
            })
            && !self.text.chars().any(is_raw_byte);
        if self.quoted || !bare_ok {
            write_quoted(&self.text, f)
        } else {
            f.write_str(&self.text)
        }
    }
}

fn write_quoted(text: &str, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str("\"")?;
    for c in text.chars() {
        match c {
            // Not `\\`: libsinsp's lexer ends a string only at a quote not preceded by a
            // backslash, so `"a\\"` would not end there.
            '\\' => f.write_str("\\x5c")?,
            '"' => f.write_str("\\\"")?,
            '\n' => f.write_str("\\n")?,
            '\t' => f.write_str("\\t")?,
            '\r' => f.write_str("\\r")?,
            c if c.is_ascii_control() => write!(f, "\\x{:02x}", c as u32)?,
            c if is_raw_byte(c) => write!(f, "\\x{:02x}", u32::from(c) - RAW_BYTE_BASE)?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}

impl fmt::Display for Rhs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rhs::Value(lit) => write!(f, "{lit}"),
            Rhs::List(items) => write_list(items, f),
            Rhs::Modified(m, items) => {
                write!(f, "{} ", m.as_str())?;
                write_list(items, f)
            }
            // libsinsp's `val()` takes only a field; a transformer stands on its own.
            Rhs::Field(operand) if operand.transformers.is_empty() && operand.call.is_none() => {
                write!(f, "val({operand})")
            }
            Rhs::Field(operand) => write!(f, "{operand}"),
        }
    }
}

fn write_list(items: &[Literal], f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str("(")?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{item}")?;
    }
    f.write_str(")")
}

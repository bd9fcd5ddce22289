//! The condition syntax tree shared by the parser, the loader (macro and list resolution) and
//! the compiler. Spans are byte offsets into the condition text the node was parsed from; the
//! loader maps them to `file:line:col`.

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
    Macro { name: String, span: Span },
    /// `lhs OP rhs`.
    Compare {
        lhs: Operand,
        op: CmpOp,
        rhs: Rhs,
        span: Span,
    },
    /// `lhs exists`.
    Exists { lhs: Operand, span: Span },
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

/// A field reference as written: `proc.aname[2]` is `name = "proc.aname"`, `arg = Some("2")`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldName {
    pub name: String,
    pub arg: Option<String>,
    pub span: Span,
}

/// A field with zero or more transformers applied, innermost last:
/// `toupper(basename(fd.name))` is `transformers = [ToUpper, Basename]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operand {
    pub transformers: Vec<Transformer>,
    pub field: FieldName,
}

/// A literal value as written (quotes removed, escapes resolved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Literal {
    pub text: String,
    /// Whether it was quoted: a quoted item is never expanded as a list name.
    pub quoted: bool,
    pub span: Span,
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
}

//! The condition parser: Falco condition text → [`Expr`].
//!
//! The language is context-sensitive (a value such as `/etc/ld.so.preload` or `a=b` is a single
//! bare word after an operator, while `=` is an operator after a field), so the parser reads the
//! text directly with a cursor instead of a separate token stream.
//!
//! Grammar (precedence `not` > `and` > `or`):
//!
//! ```text
//! expr     := and ("or" and)*
//! and      := unary ("and" unary)*
//! unary    := "not"* primary
//! primary  := "(" expr ")" | operand "exists" | operand OP rhs | MACRO
//! operand  := TRANSFORMER "(" operand ")" | FIELD ["[" ARG "]"]
//!           | MULTI "(" [arg ("," arg)*] ")" ["[" ARG "]"]   -- join / concat / getopt
//! arg      := operand | QUOTED | BAREWORD | "(" [item ("," item)*] ")"
//! item     := operand | QUOTED | BAREWORD
//! rhs      := list                                 -- for in / intersects / pmatch
//!           | MODIFIER list                        -- oneof / anyof / allof, other operators
//!           | "val" "(" operand ")" | TRANSFORMER "(" operand ")" | value
//! list     := "(" [value ("," value)*] ")"
//! value    := QUOTED | BAREWORD
//! ```
//!
//! The parser does not recurse on nesting (open parentheses live on an explicit stack), and
//! nesting (parentheses, `not`, transformers) is limited to [`MAX_DEPTH`] levels so that later
//! phases, which do recurse over the tree, see bounded depth: adversarial input yields `E_DEPTH`.

use crate::ast::{
    is_ws, CallArg, CmpOp, Expr, FieldName, Literal, Modifier, MultiCall, MultiFn, Operand, Rhs,
    Span, Transformer,
};
use std::fmt;

/// Maximum nesting depth of parentheses, `not` and transformers in one condition.
pub const MAX_DEPTH: usize = 1000;

/// Maximum nesting of multivalue transformer calls (`concat(concat(…))`) in one operand: the
/// compiler and the evaluator recurse over their arguments, so this bounds their stack use
/// (far deeper than any rule needs).
pub const MAX_CALL_DEPTH: usize = 32;

/// A syntax error in a condition or template, with a stable code (`E_SYNTAX`, `E_DEPTH`,
/// `E_UNKNOWN_TRANSFORMER`) and the byte span of the offending text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub code: &'static str,
    pub message: String,
    pub span: Span,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} @ {}", self.code, self.message, self.span.start)
    }
}

impl std::error::Error for ParseError {}

/// Parses one condition.
pub fn parse_condition(src: &str) -> Result<Expr, ParseError> {
    // libsinsp reads the condition as a C string: a raw NUL byte ends it. Refusing it keeps
    // every accepted condition printable in a form that parses back (found by fuzzing); a NUL
    // is written `\x00`, which only a byte-buffer comparison accepts (the compiler checks).
    if let Some(at) = src.bytes().position(|b| b == 0) {
        return Err(ParseError {
            code: "E_SYNTAX",
            message: "a NUL byte cannot appear in a condition".to_string(),
            span: span(at, at + 1),
        });
    }
    let mut parser = Parser::new(src);
    let expr = parser.expr()?;
    parser.skip_ws();
    if !parser.at_end() {
        return Err(parser.unexpected("`and`, `or` or the end of the condition"));
    }
    Ok(expr)
}

/// Converts a byte offset to a span coordinate (saturating for inputs over 4 GiB).
pub(crate) fn offset(pos: usize) -> u32 {
    u32::try_from(pos).unwrap_or(u32::MAX)
}

pub(crate) fn span(start: usize, end: usize) -> Span {
    Span {
        start: offset(start),
        end: offset(end),
    }
}

pub(crate) fn transformer_named(name: &str) -> Option<Transformer> {
    Some(match name {
        "tolower" => Transformer::ToLower,
        "toupper" => Transformer::ToUpper,
        "b64" => Transformer::B64,
        "basename" => Transformer::Basename,
        "len" => Transformer::Len,
        _ => return None,
    })
}

fn is_ident_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_ident_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// libsinsp's `RGX_NUMBER` (`[+-]?[0-9]+[.]?[0-9]*([eE][+-][0-9]+)?`) or `RGX_HEXNUM`
/// (`0[xX][0-9a-fA-F]+`), whole.
fn is_number(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() > 2 && b[0] == b'0' && matches!(b[1], b'x' | b'X') {
        return b[2..].iter().all(u8::is_ascii_hexdigit);
    }
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    if digits(&mut i) == 0 {
        return false;
    }
    if b.get(i) == Some(&b'.') {
        i += 1;
        digits(&mut i);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if !matches!(b.get(i), Some(b'+' | b'-')) {
            return false;
        }
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// Characters that end a bare word (libsinsp's `RGX_BARESTR` is `[^()"'[:space:]=,]+`).
fn ends_bareword(b: u8) -> bool {
    is_ws(b) || matches!(b, b'(' | b')' | b',' | b'"' | b'\'' | b'=')
}

/// What follows an operand in boolean position.
enum After {
    Op(CmpOp),
    Exists,
    Nothing,
}

/// An open parenthesis (or the whole condition) while parsing: the `or` operands so far, the
/// `and` operands of the current `or` operand, and the `not`s waiting for the next term.
struct Group {
    ors: Vec<Expr>,
    ands: Vec<Expr>,
    nots: usize,
    depth: usize,
}

impl Group {
    fn new(depth: usize) -> Group {
        Group {
            ors: Vec::new(),
            ands: Vec::new(),
            nots: 0,
            depth,
        }
    }

    /// Ends the current `and` chain.
    fn close_and(&mut self) {
        let mut ands = std::mem::take(&mut self.ands);
        let group = if ands.len() == 1 {
            ands.pop().expect("one element")
        } else {
            Expr::And(ands)
        };
        self.ors.push(group);
    }

    fn finish(mut self) -> Expr {
        if self.ors.len() == 1 {
            self.ors.pop().expect("one element")
        } else {
            Expr::Or(self.ors)
        }
    }
}

/// A cursor over the condition text; also used by the template parser for field references.
pub(crate) struct Parser<'s> {
    src: &'s str,
    bytes: &'s [u8],
    pos: usize,
    /// Multivalue transformer calls open at the cursor (see [`MAX_CALL_DEPTH`]).
    calls: usize,
}

impl<'s> Parser<'s> {
    pub(crate) fn new(src: &'s str) -> Self {
        Parser {
            src,
            bytes: src.as_bytes(),
            pos: 0,
            calls: 0,
        }
    }

    pub(crate) fn at(src: &'s str, pos: usize) -> Self {
        Parser {
            src,
            bytes: src.as_bytes(),
            pos,
            calls: 0,
        }
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    fn skip_ws(&mut self) {
        while self.peek().is_some_and(is_ws) {
            self.pos += 1;
        }
    }

    /// The span of the token at the cursor, for error messages.
    fn token_span(&self) -> Span {
        let start = self.pos;
        let Some(&first) = self.bytes.get(start) else {
            return span(start, start);
        };
        let mut end = start + 1;
        if is_ident_char(first) || !ends_bareword(first) {
            while end < self.bytes.len() && !ends_bareword(self.bytes[end]) {
                end += 1;
            }
        }
        // Keep the span on a character boundary.
        while !self.src.is_char_boundary(end) {
            end += 1;
        }
        span(start, end)
    }

    fn token_text(&self) -> &'s str {
        let s = self.token_span();
        &self.src[s.start as usize..s.end as usize]
    }

    fn unexpected(&self, expected: &str) -> ParseError {
        let found = if self.at_end() {
            "the end of the condition".to_string()
        } else {
            let text = self.token_text();
            let shown: String = text.chars().take(40).collect();
            format!("`{shown}`")
        };
        ParseError {
            code: "E_SYNTAX",
            message: format!("expected {expected}, found {found}"),
            span: self.token_span(),
        }
    }

    fn depth_error(&self) -> ParseError {
        ParseError {
            code: "E_DEPTH",
            message: format!("condition is nested deeper than {MAX_DEPTH} levels"),
            span: self.token_span(),
        }
    }

    /// Whether the identifier-like keyword `word` is at the cursor (followed by a non-identifier
    /// character).
    fn at_keyword(&self, word: &str) -> bool {
        let w = word.as_bytes();
        self.bytes[self.pos.min(self.bytes.len())..].starts_with(w)
            && !self
                .bytes
                .get(self.pos + w.len())
                .copied()
                .is_some_and(is_ident_char)
    }

    fn eat_keyword(&mut self, word: &str) -> bool {
        if self.at_keyword(word) {
            self.pos += word.len();
            true
        } else {
            false
        }
    }

    /// Parses `expr` without recursion: an explicit stack holds one [`Group`] per open
    /// parenthesis.
    fn expr(&mut self) -> Result<Expr, ParseError> {
        let mut stack: Vec<Group> = Vec::new();
        let mut cur = Group::new(0);
        loop {
            // A term: `not`* then `(` or a comparison/macro.
            loop {
                self.skip_ws();
                if !self.at_keyword("not") {
                    break;
                }
                if cur.depth + cur.nots + 1 >= MAX_DEPTH {
                    return Err(self.depth_error());
                }
                self.pos += 3;
                cur.nots += 1;
            }
            match self.peek() {
                Some(b'(') => {
                    let depth = cur.depth + cur.nots + 1;
                    if depth >= MAX_DEPTH {
                        return Err(self.depth_error());
                    }
                    self.pos += 1;
                    stack.push(std::mem::replace(&mut cur, Group::new(depth)));
                    continue;
                }
                Some(_) if self.at_keyword("and") || self.at_keyword("or") => {
                    return Err(self.unexpected("a condition"));
                }
                Some(b) if is_ident_start(b) => {}
                _ => return Err(self.unexpected("a field, a macro, `not` or `(`")),
            }
            let mut term = self.comparison_or_macro(cur.depth + cur.nots)?;
            // Attach the term, then close as many groups as the text closes.
            loop {
                for _ in 0..std::mem::take(&mut cur.nots) {
                    term = Expr::Not(Box::new(term));
                }
                cur.ands.push(term);
                self.skip_ws();
                if self.eat_keyword("and") {
                    break;
                }
                cur.close_and();
                if self.eat_keyword("or") {
                    break;
                }
                let done = cur.finish();
                let Some(parent) = stack.pop() else {
                    return Ok(done);
                };
                if self.peek() != Some(b')') {
                    return Err(self.unexpected("`)`, `and` or `or`"));
                }
                self.pos += 1;
                cur = parent;
                term = done;
            }
        }
    }

    fn comparison_or_macro(&mut self, depth: usize) -> Result<Expr, ParseError> {
        let start = self.pos;
        let operand = self.operand(depth)?;
        let is_plain_ident = operand.transformers.is_empty()
            && operand.call.is_none()
            && operand.field.arg.is_none()
            && !operand.field.name.contains('.');
        self.skip_ws();
        let after_operand = self.pos;
        match self.operator() {
            After::Exists => Ok(Expr::Exists {
                lhs: operand,
                span: span(start, self.pos),
            }),
            After::Op(op) => {
                let rhs = self.rhs(op, depth)?;
                Ok(Expr::Compare {
                    lhs: operand,
                    op,
                    rhs,
                    span: span(start, self.pos),
                })
            }
            After::Nothing if is_plain_ident => {
                self.pos = after_operand;
                Ok(Expr::Macro {
                    name: operand.field.name,
                    span: operand.field.span,
                })
            }
            After::Nothing => Err(self.unexpected("a comparison operator or `exists`")),
        }
    }

    /// Reads an operator at the cursor, if any.
    fn operator(&mut self) -> After {
        let rest = &self.bytes[self.pos.min(self.bytes.len())..];
        let symbolic: &[(&[u8], CmpOp)] = &[
            (b"==", CmpOp::Eq),
            (b"!=", CmpOp::Ne),
            (b"<=", CmpOp::Le),
            (b">=", CmpOp::Ge),
            (b"=", CmpOp::Eq),
            (b"<", CmpOp::Lt),
            (b">", CmpOp::Gt),
        ];
        for (text, op) in symbolic {
            if rest.starts_with(text) {
                self.pos += text.len();
                return After::Op(*op);
            }
        }
        // libsinsp lexes `exists` as a plain prefix, with no word boundary after it:
        // `f existsand m` is `f exists and m` (libs `filter_parser.ut.cpp`: `parse_operators`).
        if rest.starts_with(b"exists") {
            self.pos += "exists".len();
            return After::Exists;
        }
        for op in CmpOp::ALL.into_iter().filter(|op| op.is_word()) {
            if self.eat_keyword(op.as_str()) {
                return After::Op(op);
            }
        }
        After::Nothing
    }

    /// Reads an identifier (`[a-zA-Z_][a-zA-Z0-9_]*(\.[a-zA-Z0-9_]+)*`) at the cursor.
    fn name(&mut self) -> Option<(usize, usize)> {
        let start = self.pos;
        if !self.peek().is_some_and(is_ident_start) {
            return None;
        }
        self.pos += 1;
        loop {
            while self.peek().is_some_and(is_ident_char) {
                self.pos += 1;
            }
            if self.peek() == Some(b'.')
                && self
                    .bytes
                    .get(self.pos + 1)
                    .copied()
                    .is_some_and(is_ident_char)
            {
                // A label's key after `….label.` (`k8s.pod.label.app.kubernetes.io/name`,
                // `container.label.pod-template-hash`): libsinsp's label fields take `.`,
                // `-` and `/` in the key too.
                if self.src[start..self.pos].ends_with(".label") {
                    self.pos += 1;
                    while self
                        .peek()
                        .is_some_and(|b| is_ident_char(b) || matches!(b, b'.' | b'-' | b'/'))
                    {
                        self.pos += 1;
                    }
                    break;
                }
                self.pos += 1;
                continue;
            }
            break;
        }
        Some((start, self.pos))
    }

    /// `operand := TRANSFORMER "(" operand ")" | FIELD ["[" ARG "]"]`, iterative over the
    /// transformers.
    pub(crate) fn operand(&mut self, depth: usize) -> Result<Operand, ParseError> {
        let mut transformers = Vec::new();
        loop {
            self.skip_ws();
            let Some((start, end)) = self.name() else {
                return Err(self.unexpected("a field name"));
            };
            let word = &self.src[start..end];
            // libsinsp lexes `toupper(` as one token: no whitespace before the `(`
            // (libs `filter_parser.ut.cpp`: `parse_transformers_left_hand`).
            let look = self.pos;
            let paren_follows = self.bytes.get(look) == Some(&b'(');
            if let Some(t) = transformer_named(word).filter(|_| paren_follows) {
                if depth + transformers.len() >= MAX_DEPTH {
                    return Err(self.depth_error());
                }
                transformers.push(t);
                self.pos = look + 1;
                continue;
            }
            let mut call = None;
            if let Some(func) = MultiFn::from_text(word).filter(|_| paren_follows) {
                let nesting = depth + transformers.len() + 1;
                if nesting >= MAX_DEPTH {
                    return Err(self.depth_error());
                }
                if self.calls >= MAX_CALL_DEPTH {
                    return Err(ParseError {
                        code: "E_DEPTH",
                        message: format!(
                            "multivalue transformers are nested deeper than {MAX_CALL_DEPTH} levels"
                        ),
                        span: span(start, end),
                    });
                }
                self.pos = look + 1;
                self.calls += 1;
                let args = self.call_args(nesting);
                self.calls -= 1;
                call = Some(Box::new(MultiCall { func, args: args? }));
            } else if self.peek() == Some(b'(') && !word.contains('.') {
                return Err(ParseError {
                    code: "E_UNKNOWN_TRANSFORMER",
                    message: format!("unknown transformer `{word}`"),
                    span: span(start, end),
                });
            }
            let arg = if self.peek() == Some(b'[') {
                Some(self.field_arg()?)
            } else {
                None
            };
            let field = FieldName {
                name: word.to_string(),
                arg,
                span: span(start, self.pos),
            };
            self.close_transformers(transformers.len())?;
            return Ok(Operand {
                transformers,
                field,
                call,
            });
        }
    }

    fn close_transformers(&mut self, n: usize) -> Result<(), ParseError> {
        for _ in 0..n {
            self.skip_ws();
            if self.peek() != Some(b')') {
                return Err(self.unexpected("`)` closing the transformer"));
            }
            self.pos += 1;
        }
        Ok(())
    }

    /// The arguments of a multivalue transformer after its `(`, through the closing `)`.
    fn call_args(&mut self, depth: usize) -> Result<Vec<CallArg>, ParseError> {
        let mut args = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b')') {
            self.pos += 1;
            return Ok(args);
        }
        loop {
            self.skip_ws();
            if self.peek() == Some(b'(') {
                let start = self.pos;
                if depth + 1 >= MAX_DEPTH {
                    return Err(self.depth_error());
                }
                self.pos += 1;
                let mut items = Vec::new();
                self.skip_ws();
                if self.peek() == Some(b')') {
                    self.pos += 1;
                } else {
                    loop {
                        items.push(self.call_item(depth + 1)?);
                        self.skip_ws();
                        match self.peek() {
                            Some(b',') => self.pos += 1,
                            Some(b')') => {
                                self.pos += 1;
                                break;
                            }
                            _ => return Err(self.unexpected("`,` or `)` in the list")),
                        }
                    }
                }
                args.push(CallArg::List(items, span(start, self.pos)));
            } else {
                args.push(self.call_item(depth)?);
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b')') => {
                    self.pos += 1;
                    return Ok(args);
                }
                _ => return Err(self.unexpected("`,` or `)` after a transformer argument")),
            }
        }
    }

    /// A field (possibly transformed), a multivalue transformer, or a value.
    fn call_item(&mut self, depth: usize) -> Result<CallArg, ParseError> {
        self.skip_ws();
        match self.peek() {
            Some(b'"' | b'\'') => return self.value().map(CallArg::Value),
            Some(b'(' | b')' | b',') | None => return Err(self.unexpected("a field or a value")),
            _ => {}
        }
        let save = self.pos;
        if let Some((start, end)) = self.name() {
            let word = &self.src[start..end];
            let call = self.bytes.get(self.pos) == Some(&b'(');
            let is_operand = word.contains('.')
                || (call
                    && (transformer_named(word).is_some() || MultiFn::from_text(word).is_some()));
            self.pos = save;
            if is_operand || call {
                // An unknown `name(` is reported by `operand` as an unknown transformer.
                return self.operand(depth).map(CallArg::Operand);
            }
        }
        self.pos = save;
        // libsinsp takes fields, transformers, quoted strings and numbers as transformer
        // arguments, not bare words (libs `filter_parser.ut.cpp`:
        // `parse_transformer_list_invalid`).
        let value = self.value()?;
        if !value.quoted && !is_number(&value.text) {
            self.pos = value.span.start as usize;
            return Err(self.unexpected(
                "a field, a transformer, a quoted string or a number as a transformer argument",
            ));
        }
        Ok(CallArg::Value(value))
    }

    /// `[arg]`: a quoted string or text up to `]` without whitespace.
    fn field_arg(&mut self) -> Result<String, ParseError> {
        self.pos += 1; // `[`
        let arg = match self.peek() {
            Some(b'"' | b'\'') => self.quoted()?.0,
            _ => {
                let start = self.pos;
                // libsinsp's `RGX_FIELDARGBARESTR`: no brackets, quotes or whitespace.
                while self
                    .peek()
                    .is_some_and(|b| !matches!(b, b']' | b'[' | b'"' | b'\'') && !is_ws(b))
                {
                    self.pos += 1;
                }
                if self.pos == start {
                    // libsinsp's grammar wants at least one character (or a quoted string):
                    // `evt.arg[]` is a syntax error there too.
                    return Err(self.unexpected("a field argument"));
                }
                self.src[start..self.pos].to_string()
            }
        };
        if self.peek() != Some(b']') {
            return Err(self.unexpected("`]` closing the field argument"));
        }
        self.pos += 1;
        Ok(arg)
    }

    fn rhs(&mut self, op: CmpOp, depth: usize) -> Result<Rhs, ParseError> {
        let had_blank = self.peek().is_some_and(is_ws);
        self.skip_ws();
        if op.takes_list() {
            if self.peek() == Some(b'(') {
                return self.list().map(Rhs::List);
            }
            // libs 0.25's parser also takes `val(field)` or a transformer here: the values of
            // another field are the set (`proc.name in val(proc.aname)`).
            if let Some(rhs) = self.field_rhs(depth)? {
                return Ok(rhs);
            }
            return Err(self.unexpected(&format!("a parenthesised list after `{}`", op.as_str())));
        }
        // `oneof (…)`, `anyof (…)`, `allof (…)` or `oneof LIST_NAME`, as libsinsp's parser
        // reads them (libs `filter_parser.ut.cpp`: `parse_str_op_modifier_accept/_reject`):
        // only after a string operator (not `<`, `<=`, `>`, `>=`), with whitespace between the
        // operator and the modifier and after the modifier, and followed by `(` or an
        // identifier that is not `and`/`or`/`not`. Otherwise the word is an ordinary bare
        // value (`proc.name = anyof`, `proc.name = oneof and …`). A list name stands for the
        // list: `oneof my_list` is `oneof (my_list)`.
        if op.takes_modifier() && (op.is_word() || had_blank) {
            for m in Modifier::ALL {
                let word = m.as_str();
                if !self.bytes[self.pos..].starts_with(word.as_bytes()) {
                    continue;
                }
                let mut look = self.pos + word.len();
                if !self.bytes.get(look).copied().is_some_and(is_ws) {
                    continue;
                }
                while self.bytes.get(look).copied().is_some_and(is_ws) {
                    look += 1;
                }
                match self.bytes.get(look) {
                    Some(b'(') => {
                        self.pos = look;
                        return self.list().map(|items| Rhs::Modified(m, items));
                    }
                    Some(&b) if b.is_ascii_alphabetic() => {
                        let mut end = look;
                        while self.bytes.get(end).copied().is_some_and(is_ident_char) {
                            end += 1;
                        }
                        let ident = &self.src[look..end];
                        let keyword_follows = ["and", "or", "not"].iter().any(|kw| {
                            ident.starts_with(kw)
                                && !self
                                    .bytes
                                    .get(look + kw.len())
                                    .is_some_and(u8::is_ascii_alphanumeric)
                        });
                        if keyword_follows {
                            continue;
                        }
                        self.pos = end;
                        return Ok(Rhs::Modified(
                            m,
                            vec![Literal {
                                text: ident.to_string(),
                                quoted: false,
                                span: span(look, end),
                            }],
                        ));
                    }
                    _ => {}
                }
            }
        }
        if let Some(rhs) = self.field_rhs(depth)? {
            return Ok(rhs);
        }
        match self.peek() {
            Some(b'(') => Err(self.unexpected(&format!(
                "a value after `{}` (lists need `in`, `intersects` or `pmatch`)",
                op.as_str()
            ))),
            Some(b')' | b',') | None => Err(self.unexpected("a value")),
            _ => self.value().map(Rhs::Value),
        }
    }

    /// `val(field)` or `transformer(field)` at the cursor, if there is one.
    fn field_rhs(&mut self, depth: usize) -> Result<Option<Rhs>, ParseError> {
        let save = self.pos;
        if let Some((start, end)) = self.name() {
            let word = &self.src[start..end];
            let is_call = self.peek() == Some(b'(');
            if is_call && word == "val" {
                if depth >= MAX_DEPTH {
                    return Err(self.depth_error());
                }
                self.pos += 1;
                let inner = self.pos;
                let operand = self.operand(depth + 1)?;
                // libsinsp's `val()` takes a field, not a transformer (libs
                // `filter_parser.ut.cpp`: `parse_transformers_right_hand`;
                // `filter_compiler.ut.cpp`: `filter_val_transformer`).
                if !operand.transformers.is_empty() || operand.call.is_some() {
                    self.pos = inner;
                    self.skip_ws();
                    return Err(self.unexpected("a field inside `val(` (not a transformer)"));
                }
                self.skip_ws();
                if self.peek() != Some(b')') {
                    return Err(self.unexpected("`)` closing `val(`"));
                }
                self.pos += 1;
                return Ok(Some(Rhs::Field(operand)));
            }
            if is_call && (transformer_named(word).is_some() || MultiFn::from_text(word).is_some())
            {
                self.pos = save;
                return self.operand(depth).map(|o| Some(Rhs::Field(o)));
            }
            self.pos = save;
        }
        Ok(None)
    }

    /// `"(" [value ("," value)*] ")"`.
    fn list(&mut self) -> Result<Vec<Literal>, ParseError> {
        self.pos += 1; // `(`
        let mut items = Vec::new();
        self.skip_ws();
        if self.peek() == Some(b')') {
            self.pos += 1;
            return Ok(items);
        }
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'(' | b')' | b',') | None => {
                    return Err(self.unexpected("a list item"));
                }
                _ => items.push(self.value()?),
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b')') => {
                    self.pos += 1;
                    return Ok(items);
                }
                _ => return Err(self.unexpected("`,` or `)` in the list")),
            }
        }
    }

    /// A quoted string or a bare word.
    fn value(&mut self) -> Result<Literal, ParseError> {
        let start = self.pos;
        if matches!(self.peek(), Some(b'"' | b'\'')) {
            let (text, _) = self.quoted()?;
            return Ok(Literal {
                text,
                quoted: true,
                span: span(start, self.pos),
            });
        }
        while self.peek().is_some_and(|b| !ends_bareword(b)) {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.unexpected("a value"));
        }
        Ok(Literal {
            text: self.src[start..self.pos].to_string(),
            quoted: false,
            span: span(start, self.pos),
        })
    }

    /// A string in `"…"` or `'…'`, read as libsinsp's lexer reads it (`parser::lex_quoted_str`,
    /// `escaping.cpp`'s `unescape_str`): the string ends at the first closing quote **not
    /// preceded by a backslash** (so `'a \\''` is `a \'`: the backslash before the second
    /// quote hides it), then escapes are resolved: `\\` and `\ ` are a backslash, `\/` a
    /// slash, `\b`, `\f`, `\n`, `\r`, `\t`, `\xHH`; `\"` only inside `"…"` and `\'` only
    /// inside `'…'` (the other is a syntax error). Any other backslash is kept as written, so
    /// regexes such as `'\.so'` need no doubling (libsinsp refuses those; a documented
    /// superset). Bytes that do not form valid UTF-8 are kept as raw-byte characters
    /// ([`crate::ast::RAW_BYTE_BASE`]).
    fn quoted(&mut self) -> Result<(String, Span), ParseError> {
        let start = self.pos;
        let quote = self.bytes[self.pos];
        let mut end = start + 1;
        loop {
            match self.bytes.get(end) {
                None => {
                    self.pos = self.bytes.len();
                    return Err(ParseError {
                        code: "E_SYNTAX",
                        message: "unterminated quoted string".to_string(),
                        span: span(start, self.pos),
                    });
                }
                Some(&b) if b == quote && self.bytes[end - 1] != b'\\' => break,
                Some(_) => end += 1,
            }
        }
        let body = &self.bytes[start + 1..end];
        let mut out: Vec<u8> = Vec::with_capacity(body.len());
        let mut i = 0;
        while i < body.len() {
            let b = body[i];
            i += 1;
            if b != b'\\' {
                out.push(b);
                continue;
            }
            let at = start + 1 + i; // offset of the escaped character
            let Some(&e) = body.get(i) else {
                out.push(b'\\');
                break;
            };
            i += 1;
            match e {
                b'\\' | b' ' => out.push(b'\\'),
                b'/' => out.push(b'/'),
                b'b' => out.push(0x08),
                b'f' => out.push(0x0c),
                b'n' => out.push(b'\n'),
                b'r' => out.push(b'\r'),
                b't' => out.push(b'\t'),
                b'"' | b'\'' if e == quote => out.push(e),
                b'"' | b'\'' => {
                    self.pos = at;
                    return Err(ParseError {
                        code: "E_SYNTAX",
                        message: format!(
                            "invalid `\\{}` escape in a {}-quoted string",
                            e as char, quote as char
                        ),
                        span: span(at - 1, at + 1),
                    });
                }
                b'x' => {
                    let value = body
                        .get(i..i + 2)
                        .and_then(|h| std::str::from_utf8(h).ok())
                        .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                        .and_then(|h| u8::from_str_radix(h, 16).ok());
                    match value {
                        // `\x00` is a NUL byte: only a byte buffer may hold one, which the
                        // compiler checks (libsinsp does the same since libs 0.25).
                        Some(v) => {
                            out.push(v);
                            i += 2;
                        }
                        None => {
                            self.pos = at;
                            return Err(ParseError {
                                code: "E_SYNTAX",
                                message: "`\\x` must be followed by two hexadecimal digits"
                                    .to_string(),
                                span: span(at - 1, (at + 1).min(end)),
                            });
                        }
                    }
                }
                _ => {
                    out.push(b'\\');
                    i -= 1; // the next character is read as itself
                }
            }
        }
        self.pos = end + 1;
        let text = match String::from_utf8(out) {
            Ok(s) => s,
            Err(e) => crate::ast::text_from_bytes(e.as_bytes()),
        };
        Ok((text, span(start, self.pos)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (condition, canonical re-print of the AST).
    const CASES: &[(&str, &str)] = &[
        ("proc.name = bash", "proc.name = bash"),
        ("proc.name==bash", "proc.name = bash"),
        (
            "k8s.pod.label.app.kubernetes.io/name=shop and container.label.pod-template-hash exists",
            "k8s.pod.label.app.kubernetes.io/name = shop and container.label.pod-template-hash exists",
        ),
        ("a and b or c", "(a and b) or c"),
        ("a or b and c", "a or (b and c)"),
        ("not a and b", "(not a) and b"),
        ("not (a and b)", "not (a and b)"),
        ("a and b and c", "a and b and c"),
        ("(a or b) and (c or d)", "(a or b) and (c or d)"),
        ("not not a", "not (not a)"),
        ("not(a)", "not a"),
        ("fd.num>=0", "fd.num >= 0"),
        ("fd.num <3", "fd.num < 3"),
        ("fd.num != -1", "fd.num != -1"),
        (
            "proc.name in (a, \"b c\", 'd')",
            "proc.name in (a, \"b c\", \"d\")",
        ),
        ("proc.name in ()", "proc.name in ()"),
        ("proc.name in(a,b)", "proc.name in (a, b)"),
        (
            "fd.name pmatch (/etc, /var/run)",
            "fd.name pmatch (/etc, /var/run)",
        ),
        (
            "proc.args intersects (\"-V\")",
            "proc.args intersects (\"-V\")",
        ),
        ("fd.name startswith /etc/", "fd.name startswith /etc/"),
        // `=` ends a bare word (libsinsp's bare strings exclude it): quote such values.
        (
            "proc.cmdline contains '--x=y'",
            "proc.cmdline contains \"--x=y\"",
        ),
        ("fd.typechar='f'", "fd.typechar = \"f\""),
        ("proc.name = \"(systemd)\"", "proc.name = \"(systemd)\""),
        ("proc.name = \"a\\\"b\"", "proc.name = \"a\\\"b\""),
        ("fd.name regex '\\.so$'", "fd.name regex \"\\x5c.so$\""),
        // libsinsp's lexer: a quote after a backslash does not end the string.
        ("proc.name = 'a \\' \\\\''", "proc.name = \"a ' \\x5c'\""),
        ("proc.name = \"a \\ b\"", "proc.name = \"a \\x5cb\""),
        ("proc.aname[2] = sshd", "proc.aname[2] = sshd"),
        // A quoted argument holding a vertical tab prints quoted again (found by fuzzing:
        // `u8::is_ascii_whitespace` does not count `\x0b`, the lexer does).
        ("l[\"a\x0bb\"] = x", "l[\"a\\x0bb\"] = x"),
        (
            "container.mount.dest[/var/run/docker.sock] exists",
            "container.mount.dest[/var/run/docker.sock] exists",
        ),
        ("evt.arg[0] = 1", "evt.arg[0] = 1"),
        ("evt.arg[''] = 1", "evt.arg[\"\"] = 1"),
        ("proc.env[\"HOME\"] = /root", "proc.env[HOME] = /root"),
        ("tolower(proc.name) = bash", "tolower(proc.name) = bash"),
        (
            "toupper( basename(fd.name) ) = X",
            "toupper(basename(fd.name)) = X",
        ),
        ("len(proc.args) > 3", "len(proc.args) > 3"),
        ("proc.name = val(proc.pname)", "proc.name = val(proc.pname)"),
        (
            "tolower(proc.name) = tolower(proc.pname)",
            "tolower(proc.name) = tolower(proc.pname)",
        ),
        ("k8s.ns.name exists", "k8s.ns.name exists"),
        (
            "evt.buffer bcontains cafebabe",
            "evt.buffer bcontains cafebabe",
        ),
        (
            "fd.name glob '/home/*/.ssh/*'",
            "fd.name glob \"/home/*/.ssh/*\"",
        ),
        ("proc.name = \"\\xff\\xc3\\xa9\"", "proc.name = \"\\xffé\""),
        ("fd.name iglob *.PEM", "fd.name iglob *.PEM"),
        ("evt.dir = <", "evt.dir = <"),
        ("x\n\tand\r\ny", "x and y"),
        ("proc.name = 'a\\x41\\n'", "proc.name = \"aA\\n\""),
        ("proc.name = 'it\\'s'", "proc.name = \"it's\""),
        (
            "proc.cmdline contains 'don\\'t' and proc.name in ('a\\'b', c)",
            "proc.cmdline contains \"don't\" and proc.name in (\"a'b\", c)",
        ),
        ("proc.name = '\\x01'", "proc.name = \"\\x01\""),
        ("a_b.c_1.2 = x", "a_b.c_1.2 = x"),
        ("android", "android"),
        ("notx and orx", "notx and orx"),
        ("proc.name = and", "proc.name = and"),
        ("proc.name=bash or(a)", "proc.name = bash or a"),
        (
            "proc.name = oneof (cat, nginx)",
            "proc.name = oneof (cat, nginx)",
        ),
        (
            "fd.name startswith anyof (/etc,'/usr')",
            "fd.name startswith anyof (/etc, \"/usr\")",
        ),
        (
            "proc.cmdline contains  allof\n ('a b',c)",
            "proc.cmdline contains allof (\"a b\", c)",
        ),
        ("proc.name != allof ()", "proc.name != allof ()"),
        ("proc.name = anyof", "proc.name = anyof"),
        (
            "proc.name in val(proc.aname)",
            "proc.name in val(proc.aname)",
        ),
        (
            "fd.name pmatch tolower( fd.directory )",
            "fd.name pmatch tolower(fd.directory)",
        ),
        (
            "join(\"-\",(fd.name,'x', toupper(fd.directory))) = a",
            "join(\"-\", (fd.name, \"x\", toupper(fd.directory))) = a",
        ),
        ("join('-', ()) = a", "join(\"-\", ()) = a"),
        (
            "toupper( concat(proc.name , fd.name, concat(\"a\", 'b')) ) exists",
            "toupper(concat(proc.name, fd.name, concat(\"a\", \"b\"))) exists",
        ),
        (
            "getopt((\"-n\", proc.name), \"n:\")[n] = x",
            "getopt((\"-n\", proc.name), \"n:\")[n] = x",
        ),
        (
            "proc.name in concat(\"a\", \"b\")",
            "proc.name in concat(\"a\", \"b\")",
        ),
        (
            "proc.name = join(\",\", proc.args)",
            "proc.name = join(\",\", proc.args)",
        ),
        ("getopt() exists", "getopt() exists"),
        // not followed by `(`: a macro named like a transformer
        ("join", "join"),
    ];

    #[test]
    fn conditions_print_back_canonically() {
        let mut failures = Vec::new();
        for (src, want) in CASES {
            match parse_condition(src) {
                Ok(expr) => {
                    let got = expr.to_string();
                    if got != *want {
                        failures.push(format!("{src:?}: got {got:?}, want {want:?}"));
                    }
                    // The canonical form parses back to the same tree (ignoring spans).
                    let again = parse_condition(&got)
                        .unwrap_or_else(|e| panic!("reparse of {got:?} failed: {e}"));
                    assert_eq!(again.to_string(), got, "reparse of {got:?}");
                }
                Err(e) => failures.push(format!("{src:?}: unexpected error {e}")),
            }
        }
        assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
    }

    /// (condition, `code @ offset`).
    const ERRORS: &[(&str, &str)] = &[
        ("", "E_SYNTAX @ 0"),
        ("proc.name =", "E_SYNTAX @ 11"),
        ("proc.name", "E_SYNTAX @ 9"),
        ("proc.name bash", "E_SYNTAX @ 10"),
        ("a and", "E_SYNTAX @ 5"),
        ("a b", "E_SYNTAX @ 2"),
        ("(a", "E_SYNTAX @ 2"),
        ("a)", "E_SYNTAX @ 1"),
        ("proc.name in a", "E_SYNTAX @ 13"),
        ("proc.name in (a,)", "E_SYNTAX @ 16"),
        ("proc.name in (a b)", "E_SYNTAX @ 16"),
        ("proc.name in ((a))", "E_SYNTAX @ 14"),
        ("proc.name = (a)", "E_SYNTAX @ 12"),
        ("proc.name = \"abc", "E_SYNTAX @ 12"),
        ("proc.name = 'a\\xZZ'", "E_SYNTAX @ 14"),
        ("proc.aname[2 = x", "E_SYNTAX @ 12"),
        ("foo(proc.name) = x", "E_UNKNOWN_TRANSFORMER @ 0"),
        (
            "join(\"-\", (\"a\", foo(b))) = x",
            "E_UNKNOWN_TRANSFORMER @ 16",
        ),
        ("join(\"-\", ((a))) = x", "E_SYNTAX @ 11"),
        ("join(\"-\" (a)) = x", "E_SYNTAX @ 9"),
        ("join(\"-\", (\"a\", \"b\") = x", "E_SYNTAX @ 21"),
        ("concat(\"a\",) = x", "E_SYNTAX @ 11"),
        ("getopt((\"a\"), \"b\")[ = x", "E_SYNTAX @ 19"),
        ("concat(\"a\", \"b\"", "E_SYNTAX @ 15"),
        ("tolower(proc.name = x", "E_SYNTAX @ 18"),
        ("and", "E_SYNTAX @ 0"),
        ("= x", "E_SYNTAX @ 0"),
        ("proc.name = val(x", "E_SYNTAX @ 17"),
        ("proc.name = oneofx (a)", "E_SYNTAX @ 19"),
        ("proc.name = oneof (a", "E_SYNTAX @ 20"),
        ("proc.name in oneof (a)", "E_SYNTAX @ 13"),
        ("proc.name in val(x", "E_SYNTAX @ 18"),
        ("evt.arg[] = value", "E_SYNTAX @ 8"),
        ("proc= a\0\0\0eo", "E_SYNTAX @ 7"),
        ("proc.name = 'a\0'", "E_SYNTAX @ 14"),
    ];

    #[test]
    fn errors_have_codes_and_offsets() {
        let mut failures = Vec::new();
        for (src, want) in ERRORS {
            match parse_condition(src) {
                Ok(expr) => failures.push(format!("{src:?}: parsed as {expr}")),
                Err(e) => {
                    let got = format!("{} @ {}", e.code, e.span.start);
                    if got != *want {
                        failures.push(format!("{src:?}: got {got} ({}), want {want}", e.message));
                    }
                }
            }
        }
        assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
    }

    #[test]
    fn syntax_errors_say_what_was_expected() {
        let e = parse_condition("proc.name in a").unwrap_err();
        assert_eq!(
            e.message,
            "expected a parenthesised list after `in`, found `a`"
        );
        let e = parse_condition("a and").unwrap_err();
        assert!(
            e.message.contains("the end of the condition"),
            "{}",
            e.message
        );
    }

    #[test]
    fn spans_cover_the_source() {
        let src = "evt.type = open and proc.aname[2] in (a, \"b\")";
        let Expr::And(items) = parse_condition(src).unwrap() else {
            panic!("expected and");
        };
        let Expr::Compare { lhs, rhs, span, .. } = &items[1] else {
            panic!("expected compare");
        };
        assert_eq!(
            &src[span.start as usize..span.end as usize],
            "proc.aname[2] in (a, \"b\")"
        );
        let f = lhs.field.span;
        assert_eq!(&src[f.start as usize..f.end as usize], "proc.aname[2]");
        let Rhs::List(list) = rhs else {
            panic!("expected list")
        };
        assert!(list[1].quoted);
        assert_eq!(
            &src[list[1].span.start as usize..list[1].span.end as usize],
            "\"b\""
        );
        let Expr::Macro { span, .. } = parse_condition("  my_macro ").unwrap() else {
            panic!("expected macro")
        };
        assert_eq!((span.start, span.end), (2, 10));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let n = 10_000;
        let parens = format!("{}x{}", "(".repeat(n), ")".repeat(n));
        assert_eq!(parse_condition(&parens).unwrap_err().code, "E_DEPTH");
        let nots = format!("{}x", "not ".repeat(n));
        assert_eq!(parse_condition(&nots).unwrap_err().code, "E_DEPTH");
        let transformers = format!("{}proc.name{} = x", "tolower(".repeat(n), ")".repeat(n));
        assert_eq!(parse_condition(&transformers).unwrap_err().code, "E_DEPTH");
        let calls = |n: usize| {
            format!(
                "{}proc.name{} = x",
                "concat(\"b\", ".repeat(n),
                ")".repeat(n)
            )
        };
        assert!(parse_condition(&calls(MAX_CALL_DEPTH)).is_ok());
        assert_eq!(
            parse_condition(&calls(MAX_CALL_DEPTH + 1))
                .unwrap_err()
                .code,
            "E_DEPTH"
        );
        let mixed = "not (".repeat(n);
        assert_eq!(parse_condition(&mixed).unwrap_err().code, "E_DEPTH");
        // Just under the limit still parses.
        let ok = format!(
            "{}x{}",
            "(".repeat(MAX_DEPTH - 1),
            ")".repeat(MAX_DEPTH - 1)
        );
        assert!(parse_condition(&ok).is_ok());
        let ok = format!("{}x", "not ".repeat(MAX_DEPTH - 1));
        assert!(parse_condition(&ok).is_ok());
    }

    #[test]
    fn long_flat_conditions_do_not_recurse() {
        let src = vec!["a"; 100_000].join(" and ");
        let Expr::And(items) = parse_condition(&src).unwrap() else {
            panic!("expected and")
        };
        assert_eq!(items.len(), 100_000);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        let samples = [
            "\u{fe0f}(",
            "é = ",
            "proc.name = é(",
            "a[",
            "a[é",
            "a[\"",
            "'\\x",
            "\"\\xé\"",
            "proc.name in (\u{1F600}",
            "x = \\",
            "((((",
            "not",
            "a or or",
            "tolower(",
            "val(",
            "a = val(",
            "a = len(",
            "a.b[]",
            "a.b[] = 1",
        ];
        for s in samples {
            let _ = parse_condition(s);
        }
        // Every prefix of a real condition.
        let src = "evt.type in (open, 'x') and not tolower(proc.aname[2]) startswith \"é\\x41\"";
        for end in 0..=src.len() {
            if src.is_char_boundary(end) {
                let _ = parse_condition(&src[..end]);
            }
        }
    }

    /// A deterministic stand-in for the fuzz target: random token soups must not panic, and
    /// whatever parses must print to a stable canonical form.
    #[test]
    fn random_token_soups_parse_or_fail_cleanly() {
        #[rustfmt::skip]
        const TOKENS: &[&str] = &[
            "proc.name", "fd.name", "a", "m_1", "not", "and", "or", "(", ")", "=", "!=", "<=",
            ">", "in", "intersects", "pmatch", "contains", "glob", "exists", "val(", "tolower(",
            "len(", "foo(", "[2]", "[", "]", ",", "\"x y\"", "'q'", "\"\\xff\"", "/etc/",
            "-1", "é", "\\", " ", "\n", "\"", "'", "%", "\u{10ff80}",
        ];
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut parsed = 0;
        for _ in 0..20_000 {
            let len = (next() % 12) as usize;
            let mut src = String::new();
            for _ in 0..len {
                src.push_str(TOKENS[(next() % TOKENS.len() as u64) as usize]);
                if next() % 2 == 0 {
                    src.push(' ');
                }
            }
            if let Ok(expr) = parse_condition(&src) {
                parsed += 1;
                let printed = expr.to_string();
                let again = parse_condition(&printed)
                    .unwrap_or_else(|e| panic!("{src:?} printed as {printed:?}: {e}"));
                assert_eq!(again.to_string(), printed, "unstable print of {src:?}");
            }
        }
        assert!(parsed > 100, "only {parsed} soups parsed");
    }

    fn collect_texts(value: &serde_json::Value, out: &mut Vec<(String, String)>) {
        match value {
            serde_json::Value::Array(items) => items.iter().for_each(|v| collect_texts(v, out)),
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    if let (true, Some(text)) = (key == "condition" || key == "output", v.as_str())
                    {
                        out.push((key.clone(), text.to_string()));
                    }
                    collect_texts(v, out);
                }
            }
            _ => {}
        }
    }

    #[test]
    fn every_upstream_condition_parses() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/falco-rules");
        let mut n_conditions = 0;
        let mut failures = Vec::new();
        for file in [
            "falco_rules.yaml",
            "falco-incubating_rules.yaml",
            "falco-sandbox_rules.yaml",
        ] {
            let path = format!("{dir}/{file}");
            let text =
                std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
            let doc: serde_json::Value =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parsing {path}: {e}"));
            let mut texts = Vec::new();
            collect_texts(&doc, &mut texts);
            for (key, text) in texts {
                if key == "condition" {
                    n_conditions += 1;
                    if let Err(e) = parse_condition(&text) {
                        failures.push(format!("{file}: {e}\n  {text}"));
                    }
                } else if let Err(e) = crate::template::parse_template(&text) {
                    failures.push(format!("{file}: output: {e}\n  {text}"));
                }
            }
        }
        assert!(n_conditions > 400, "only {n_conditions} conditions found");
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }
}

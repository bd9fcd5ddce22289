//! Load diagnostics: every problem found while loading rules files, with a stable code, a
//! severity, a short lower-case message and a `file:line:col` position (1-based).
//!
//! Codes (stable; tests and users match on them). Warnings Falco also gives map to Falco's
//! code with [`Diagnostic::falco_code`], and where Falco's tests match a warning's text the
//! message carries that text word for word.
//!
//! | code | meaning |
//! |---|---|
//! | `E_YAML_PARSE` | malformed YAML, or YAML nested deeper than the reader allows |
//! | `E_SCHEMA` | not a sequence of maps, an item of two kinds, wrong value type, missing key |
//! | `E_ENGINE_VERSION` | `required_engine_version` above [`crate::loader::ENGINE_VERSION`] |
//! | `E_UNDEFINED_APPEND` | `append`/`override`/`enabled` on a rule, macro or list not defined before |
//! | `E_SOURCE_MISMATCH` | a rule defined again, appended to or overridden with another `source` |
//! | `E_BAD_PRIORITY` | a priority that is not one of Falco's eight |
//! | `E_UNKNOWN_MACRO` | a condition names a macro that does not exist |
//! | `E_MACRO_CYCLE` | macros that reference each other in a cycle |
//! | `E_LIST_CYCLE` | lists that reference each other in a cycle |
//! | `E_TOO_DEEP` | a condition nested (directly or through macros) deeper than the limit |
//! | `E_TOO_LARGE` | a condition whose macro expansion exceeds the size limit |
//! | `E_SYNTAX`, `E_UNKNOWN_FIELD`, … | condition and output errors reported by the parser and compiler |
//! | `E_TRANSFORMER_ARGS` | `join`/`concat`/`getopt` with the wrong number or kind of arguments |
//! | `W_FIELD_NO_VALUE` | a field Falco has that never has a value in Vigil (`thread.cpu`, `thread.cpu.user`, `thread.cpu.system`) |
//! | `W_UNKNOWN_KEY` | a key the loader does not know (ignored) |
//! | `W_UNKNOWN_ITEM` | a top-level item of a kind the loader does not know (ignored) |
//! | `W_SOURCE_SKIPPED` | a rule for a source other than `syscall` (counted, not compiled) |
//! | `W_SKIPPED_UNKNOWN_FILTER` | a rule with `skip-if-unknown-filter: true` that uses an unknown field |
//! | `W_UNUSED_MACRO`, `W_UNUSED_LIST` | defined but referenced by no rule, macro or list |
//! | `W_NO_EVTTYPE` | a rule whose condition does not restrict `evt.type` (runs on every event) |
//! | `W_DEPRECATED` | Falco-deprecated syntax: `append: true`, a standalone `enabled`, `evt.dir` |
//! | `W_INVALID_NAME` | a macro name that is not an identifier, a list name that is not a bare word |
//! | `W_IGNORED_KEY` | a key Falco ignores there (`enabled` in an `append` entry, an unreadable `capture`) |
//! | `W_EXCEPTION_NOT_UNIQUE` | two exceptions of one rule item with the same name |
//! | `W_FIELD_AS_VALUE` | a bare value that names a field (`proc.name = proc.pname`; meant `val()`?) |
//! | `W_OVERRIDE_IGNORED` | an `override` entry for a key that cannot be overridden |
//! | `W_REGEX_SIMPLE` | a `regex` value a simpler operator could test (`'^x'`, `'.*x'`) |
//! | `W_APPEND_NO_VALUES` | an exception appended to (`append: true` or `override: {exceptions: append}`) without `values` |

use std::fmt;

use crate::ast::Span;

/// A problem found while compiling a condition or template, with a stable code and the byte span
/// in the text it was parsed from. Warnings (codes `W_…`) use the same shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    pub code: &'static str,
    pub message: String,
    pub span: Span,
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} @ {}", self.code, self.message, self.span.start)
    }
}

impl std::error::Error for CompileError {}

/// How bad a diagnostic is: any error makes the load fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Severity {
    Error,
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

/// One problem found while loading.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// Stable code, `E_…` for errors and `W_…` for warnings.
    pub code: &'static str,
    pub severity: Severity,
    pub message: String,
    /// The source name given to [`crate::loader::RulesLoader::add_source`].
    pub file: String,
    /// 1-based line; 0 when the problem has no position (e.g. an empty source list).
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
    /// The rule, macro or list the problem belongs to, if any.
    pub item: Option<String>,
}

impl Diagnostic {
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// Falco's code for the same warning (`falco_load_result.h`'s `warning_code`, as Falco
    /// prints it), so that a Falco user can match one with the other; `None` for errors and
    /// for warnings Falco does not have.
    pub fn falco_code(&self) -> Option<&'static str> {
        Some(match self.code {
            "W_NO_EVTTYPE" => "LOAD_NO_EVTTYPE",
            "W_SKIPPED_UNKNOWN_FILTER" | "W_UNKNOWN_EVENT_TYPE" => "LOAD_UNKNOWN_FILTER",
            "W_UNUSED_MACRO" => "LOAD_UNUSED_MACRO",
            "W_UNUSED_LIST" => "LOAD_UNUSED_LIST",
            "W_DEPRECATED" => "LOAD_DEPRECATED_ITEM",
            "W_APPEND_NO_VALUES" => "LOAD_APPEND_NO_VALUES",
            "W_EXCEPTION_NOT_UNIQUE" => "LOAD_EXCEPTION_NAME_NOT_UNIQUE",
            // One Vigil code, two Falco codes: the message says which (Falco's own text).
            "W_INVALID_NAME" if self.message.starts_with("Macro") => "LOAD_INVALID_MACRO_NAME",
            "W_INVALID_NAME" => "LOAD_INVALID_LIST_NAME",
            // libsinsp's compiler warnings reach Falco's load result as this code.
            "W_FIELD_AS_VALUE" | "W_REGEX_SIMPLE" => "LOAD_COMPILE_CONDITION",
            "W_UNKNOWN_KEY" => "LOAD_UNKNOWN_KEY",
            "W_UNKNOWN_ITEM" => "LOAD_UNKNOWN_ITEM",
            "W_SOURCE_SKIPPED" => "LOAD_UNKNOWN_SOURCE",
            _ => return None,
        })
    }

    /// The compact form used by snapshot tests: `CODE: message @ line:col`.
    pub fn brief(&self) -> String {
        format!(
            "{}: {} @ {}:{}",
            self.code, self.message, self.line, self.col
        )
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}[{}]: {}",
            self.file,
            self.line,
            self.col,
            self.severity.as_str(),
            self.code,
            self.message
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn displays_like_a_compiler() {
        let d = Diagnostic {
            code: "E_UNKNOWN_MACRO",
            severity: Severity::Error,
            message: "unknown macro `foo`".into(),
            file: "rules.yaml".into(),
            line: 3,
            col: 14,
            item: Some("r".into()),
        };
        assert_eq!(
            d.to_string(),
            "rules.yaml:3:14: error[E_UNKNOWN_MACRO]: unknown macro `foo`"
        );
        assert_eq!(d.brief(), "E_UNKNOWN_MACRO: unknown macro `foo` @ 3:14");
        assert_eq!(d.falco_code(), None);
    }

    #[test]
    fn warnings_map_to_falco_codes() {
        let w = |code: &'static str, message: &str| Diagnostic {
            code,
            severity: Severity::Warning,
            message: message.into(),
            file: "f".into(),
            line: 1,
            col: 1,
            item: None,
        };
        assert_eq!(w("W_NO_EVTTYPE", "").falco_code(), Some("LOAD_NO_EVTTYPE"));
        assert_eq!(
            w("W_INVALID_NAME", "Macro has an invalid name.").falco_code(),
            Some("LOAD_INVALID_MACRO_NAME")
        );
        assert_eq!(
            w("W_INVALID_NAME", "List has an invalid name.").falco_code(),
            Some("LOAD_INVALID_LIST_NAME")
        );
        assert_eq!(
            w("W_APPEND_NO_VALUES", "").falco_code(),
            Some("LOAD_APPEND_NO_VALUES")
        );
        assert_eq!(w("W_FIELD_NO_VALUE", "").falco_code(), None);
    }
}

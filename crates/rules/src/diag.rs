//! Load diagnostics: every problem found while loading rules files, with a stable code, a
//! severity, a short lower-case message and a `file:line:col` position (1-based).
//!
//! Codes (stable; tests and users match on them):
//!
//! | code | meaning |
//! |---|---|
//! | `E_YAML_PARSE` | malformed YAML, or YAML nested deeper than the reader allows |
//! | `E_SCHEMA` | not a sequence of maps, unknown item kind, wrong value type, missing key |
//! | `E_ENGINE_VERSION` | `required_engine_version` above [`crate::loader::ENGINE_VERSION`] |
//! | `E_UNDEFINED_APPEND` | `append`/`override`/`enabled` on a rule, macro or list not defined before |
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
//! | `W_SOURCE_SKIPPED` | a rule for a source other than `syscall` (counted, not compiled) |
//! | `W_SKIPPED_UNKNOWN_FILTER` | a rule with `skip-if-unknown-filter: true` that uses an unknown field |
//! | `W_UNUSED_MACRO`, `W_UNUSED_LIST` | defined but referenced by no rule, macro or list |
//! | `W_NO_EVTTYPE` | a rule whose condition does not restrict `evt.type` (runs on every event) |
//! | `W_DEPRECATED` | Falco-deprecated syntax: `append: true`, a standalone `enabled`, `evt.dir` |
//! | `W_INVALID_NAME` | a list or macro name that is not an identifier (conditions cannot name it) |
//! | `W_IGNORED_KEY` | a key Falco ignores there (`enabled` in an `append` entry, an unreadable `capture`) |
//! | `W_EXCEPTION_NOT_UNIQUE` | two exceptions of one rule item with the same name |
//! | `W_FIELD_AS_VALUE` | a bare value that names a field (`proc.name = proc.pname`; meant `val()`?) |
//! | `W_OVERRIDE_IGNORED` | an `override` entry for a key that cannot be overridden |
//! | `W_APPEND_NO_VALUES` | an exception appended to (`append: true` or `override: {exceptions: append}`) without `values` |

use std::fmt;

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
    }
}

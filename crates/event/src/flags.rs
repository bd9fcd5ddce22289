//! Symbol tables for flag and enumeration parameters, and errno names.
//!
//! Rendering follows Falco's spelling so that conditions such as
//! `evt.arg.flags contains O_TRUNC` or `evt.arg.request contains PTRACE_ATTACH` work unchanged.
//! (Being completed: the values below are the interface; see the crate's tests.)

use crate::model::FlagTable;

/// Appends the symbolic form of `value` for `table` to `out`: flag sets as `A|B|C`, enumerations
/// as their name; unknown bits or values are rendered numerically.
pub fn render(table: FlagTable, value: u64, out: &mut String) {
    let _ = table;
    out.push_str(&value.to_string());
}

/// Parses a symbolic (`O_WRONLY|O_CREAT`) or numeric form back to a value.
pub fn parse(table: FlagTable, text: &str) -> Option<u64> {
    let _ = table;
    text.trim().parse().ok()
}

/// The errno name for a positive errno number (`2` → `ENOENT`).
pub fn errno_name(errno: i64) -> Option<&'static str> {
    let _ = errno;
    None
}

/// The errno number for a name (`ENOENT` → `2`).
pub fn errno_from_name(name: &str) -> Option<i64> {
    let _ = name;
    None
}

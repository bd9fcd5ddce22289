//! Feeds arbitrary bytes (as lossy UTF-8) to the condition parser, `parse_condition`.
//!
//! Beyond "no panic, no stack overflow": whatever parses must print (the AST's canonical
//! `Display`) to text that parses again and prints identically.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil_rules::parser::parse_condition;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(expr) = parse_condition(&text) {
        let printed = expr.to_string();
        let again = parse_condition(&printed)
            .unwrap_or_else(|e| panic!("canonical form {printed:?} does not parse: {e}"));
        assert_eq!(again.to_string(), printed, "printing is not stable");
    }
});

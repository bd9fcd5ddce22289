//! Fuzz target: arbitrary bytes as a rules file (lossy UTF-8) through the whole loader — read,
//! collect, resolve, compile — against the permissive test catalog. The loader must return
//! diagnostics, never panic, overflow the stack or blow up memory.
#![no_main]

use libfuzzer_sys::fuzz_target;
use vigil_rules::testcatalog::TestCatalog;
use vigil_rules::{LoadOptions, RulesLoader};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut loader = RulesLoader::new();
    // Split on a form feed so the fuzzer can exercise cross-file redefinition and appends.
    for (i, part) in text.split('\u{c}').take(4).enumerate() {
        loader.add_source(&format!("f{i}.yaml"), part);
    }
    let result = loader.load(&TestCatalog::new(), &LoadOptions::default());
    assert_eq!(
        result.ruleset.is_some(),
        !result.diagnostics.iter().any(|d| d.is_error())
    );
    if let Some(ruleset) = result.ruleset {
        let _ = ruleset.event_types();
    }
});

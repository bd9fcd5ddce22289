//! Shared helpers of the loader integration tests.

use vigil_rules::testcatalog::{TestCatalog, TestEvent};
use vigil_rules::{LoadOptions, LoadResult, RulesLoader, Ruleset};

/// Loads sources in order with the test catalog.
pub fn load(files: &[(&str, &str)]) -> LoadResult {
    load_with(files, &LoadOptions::default())
}

pub fn load_with(files: &[(&str, &str)], opts: &LoadOptions) -> LoadResult {
    let mut loader = RulesLoader::new();
    for (name, text) in files {
        loader.add_source(name, text);
    }
    loader.load(&TestCatalog::new(), opts)
}

/// Diagnostics in the snapshot form `CODE: message @ line:col`, one per line, prefixed by the
/// file name when there are several files.
pub fn briefs(r: &LoadResult) -> String {
    let multi = r.stats.len() > 1;
    r.diagnostics
        .iter()
        .map(|d| {
            if multi {
                format!("{}: {}", d.file, d.brief())
            } else {
                d.brief()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts the diagnostics of loading `files` (warnings about unused items excluded unless
/// `expected` mentions them), snapshot style.
pub fn check(files: &[(&str, &str)], expected: &str) -> LoadResult {
    let r = load(files);
    check_result(&r, expected);
    r
}

pub fn check_result(r: &LoadResult, expected: &str) {
    let keep_unused = expected.contains("W_UNUSED");
    let actual: Vec<String> = briefs(r)
        .lines()
        .filter(|l| keep_unused || !l.contains("W_UNUSED"))
        .map(str::to_string)
        .collect();
    let actual = actual.join("\n");
    let expected: Vec<&str> = expected
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let expected = expected.join("\n");
    assert_eq!(
        actual, expected,
        "\ndiagnostics differ; actual:\n{actual}\n(expected:\n{expected})"
    );
    assert_eq!(
        r.ruleset.is_some(),
        !r.has_errors(),
        "a ruleset is returned exactly when there is no error"
    );
}

/// Loads and returns the ruleset, failing with every diagnostic if there is an error.
pub fn ruleset(files: &[(&str, &str)]) -> Ruleset {
    let r = load(files);
    match r.ruleset {
        Some(rs) => rs,
        None => panic!("load failed:\n{}", briefs(&r)),
    }
}

/// Names of the rules matching `ev`.
pub fn matching(rs: &Ruleset, ev: &TestEvent) -> Vec<String> {
    let mut ctx = rs.new_ctx();
    let mut out = Vec::new();
    rs.evaluate(ev, &mut ctx, &mut out);
    out.iter().map(|&i| rs.rules()[i].name.clone()).collect()
}

/// An event of type `ty` with string fields.
pub fn event(ty: &str, fields: &[(&str, &str)]) -> TestEvent {
    let mut e = TestEvent::new(ty);
    for (k, v) in fields {
        e.set(k, v);
    }
    e
}

/// The text of an upstream Falco rules file (read by path; never copied into the repo).
pub fn upstream(name: &str) -> String {
    let path = format!(
        "{}/../../../shared/falco-rules/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read upstream rules file {path}: {e}"))
}

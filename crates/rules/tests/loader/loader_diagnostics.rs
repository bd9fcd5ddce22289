//! Every class of bad input gives the right code at the right `line:col`, loading goes on
//! after the first problem, and deep input gives diagnostics instead of crashing.

use crate::common::{check, event, load, matching};

const RULE_TAIL: &str = "  desc: d\n  output: o\n  priority: WARNING\n";

#[test]
fn malformed_yaml_reports_position() {
    check(
        &[("f.yaml", "- rule: r\n  desc: \"never closed\n")],
        "E_YAML_PARSE: while scanning a quoted scalar, found unexpected end of stream @ 2:9",
    );
    check(
        &[("f.yaml", "- list: l\n  items: [a, b\n- list: m\n")],
        "E_YAML_PARSE: illegal placement of ':' indicator @ 3:7",
    );
}

#[test]
fn schema_errors_name_the_problem() {
    check(
        &[("f.yaml", "rule: r\n")],
        "E_SCHEMA: a rules file must be a sequence of items, found a map @ 1:1",
    );
    check(
        &[(
            "f.yaml",
            "- just a string\n- frobnicate: x\n- rule: r\n  macro: m\n- list: l\n  items: {a: b}\n- macro: m\n  condition: [a]\n",
        )],
        "E_SCHEMA: an item must be a map, found a scalar @ 1:3
         W_UNKNOWN_ITEM: Unknown top level item (keys `frobnicate`); ignored @ 2:3
         E_SCHEMA: an item must have one kind, found `rule`, `macro` @ 3:3
         E_SCHEMA: `items` must be a sequence of strings, found a map @ 6:10
         E_SCHEMA: `condition` must be a string, found a sequence @ 8:14",
    );
    check(
        &[("f.yaml", "- rule: r\n  condition: evt.type = open\n")],
        "E_SCHEMA: rule `r` is missing `output`, `desc`, `priority` @ 1:3",
    );
    check(
        &[(
            "f.yaml",
            "- rule: r\n  condition: evt.type = open\n  enabled: maybe\n  priority: loud\n  desc: d\n  output: o\n",
        )],
        "E_BAD_PRIORITY: invalid priority `loud` (expected emergency, alert, critical, error, warning, notice, informational or debug) @ 4:13
         E_SCHEMA: `enabled` must be true or false, found a scalar @ 3:12",
    );
}

#[test]
fn unknown_keys_warn() {
    let r = check(
        &[(
            "f.yaml",
            &format!("- rule: r\n  condition: evt.type = open\n  colour: red\n{RULE_TAIL}"),
        )],
        "W_UNKNOWN_KEY: Unknown key 'colour'. The key will be ignored. @ 3:3",
    );
    assert!(r.ruleset.is_some(), "warnings do not fail the load");
}

#[test]
fn unknown_field_points_into_condition_and_output() {
    check(
        &[(
            "f.yaml",
            "- rule: r\n  desc: d\n  condition: evt.type = open and proc.nmae = bash\n  output: \"x %fd.nam y\"\n  priority: WARNING\n",
        )],
        "E_UNKNOWN_FIELD: unknown field `proc.nmae` @ 3:34
         E_UNKNOWN_FIELD: unknown field `fd.nam` @ 4:15",
    );
}

#[test]
fn positions_inside_block_scalars() {
    check(
        &[(
            "f.yaml",
            &format!(
                "- rule: r\n  condition: >\n    evt.type = open\n    and not\n      proc.nmae = x\n{RULE_TAIL}"
            ),
        )],
        "E_UNKNOWN_FIELD: unknown field `proc.nmae` @ 5:7",
    );
}

#[test]
fn unknown_macro_and_macro_errors_reported_once_at_the_macro() {
    let text = format!(
        "- macro: m\n  condition: proc.nmae = x or missing_macro\n\
         - rule: a\n  condition: evt.type = open and m\n{RULE_TAIL}\
         - rule: b\n  condition: evt.type = openat and m and other_missing\n{RULE_TAIL}"
    );
    check(
        &[("f.yaml", &text)],
        "E_UNKNOWN_MACRO: unknown macro `missing_macro` @ 2:31
         E_UNKNOWN_MACRO: unknown macro `other_missing` @ 9:42",
    );
    // With every macro known, the field error inside `m` is found once, at `m`.
    let text = format!(
        "- macro: m\n  condition: proc.nmae = x\n\
         - rule: a\n  condition: evt.type = open and m\n{RULE_TAIL}\
         - rule: b\n  condition: evt.type = openat and m\n{RULE_TAIL}"
    );
    let r = check(
        &[("f.yaml", &text)],
        "E_UNKNOWN_FIELD: unknown field `proc.nmae` @ 2:14",
    );
    assert_eq!(r.diagnostics[0].item.as_deref(), Some("m"));
}

#[test]
fn macro_and_list_cycles_are_named() {
    let text = format!(
        "- macro: a\n  condition: b and proc.name = x\n- macro: b\n  condition: >\n    evt.type = open\n    and a\n\
         - list: l1\n  items: [x, l2]\n- list: l2\n  items: [l1]\n\
         - rule: r\n  condition: a or proc.name in (l1)\n{RULE_TAIL}"
    );
    check(
        &[("f.yaml", &text)],
        "E_LIST_CYCLE: list cycle: l1 -> l2 -> l1 @ 7:3
         E_MACRO_CYCLE: macro cycle: a -> b -> a @ 6:9",
    );
}

#[test]
fn syntax_and_operator_errors() {
    let text = format!(
        "- rule: r1\n  condition: evt.type = open and (proc.name = x\n{RULE_TAIL}\
         - rule: r2\n  condition: evt.type = open and proc.name like x\n{RULE_TAIL}\
         - rule: r3\n  condition: evt.type = open and fd.num > abc\n{RULE_TAIL}"
    );
    check(
        &[("f.yaml", &text)],
        "E_SYNTAX: expected `)`, `and` or `or`, found the end of the condition @ 2:48
         E_SYNTAX: expected a comparison operator or `exists`, found `like` @ 7:44
         E_BAD_VALUE: `abc` is not a number (INT64) @ 12:43",
    );
}

#[test]
fn append_to_undefined_items() {
    let text = "- list: l\n  items: [a]\n  append: true\n\
                - macro: m\n  condition: and x\n  override:\n    condition: append\n\
                - rule: r\n  condition: and y\n  append: true\n\
                - rule: s\n  enabled: false\n";
    check(
        &[("f.yaml", text)],
        "W_DEPRECATED: 'append' key is deprecated. Add an 'append' entry (e.g. 'condition: append') under 'override' instead. @ 3:11
         E_UNDEFINED_APPEND: List uses 'append' or 'override.items: append' but no list by that name already exists (`l` was not defined before) @ 1:3
         E_UNDEFINED_APPEND: Macro uses 'append' or 'override.condition: append' but no macro by that name already exists (`m` was not defined before) @ 4:3
         W_DEPRECATED: 'append' key is deprecated. Add an 'append' entry (e.g. 'condition: append') under 'override' instead. @ 10:11
         E_UNDEFINED_APPEND: Rule uses 'append' or 'override.<key>: append' but no rule by that name already exists (`r` was not defined before) @ 8:3
         W_DEPRECATED: The standalone 'enabled' key usage is deprecated. The correct approach requires also a 'replace' entry under the 'override' key (i.e. 'enabled: replace'). @ 11:3
         E_UNDEFINED_APPEND: Rule uses 'append' or 'override.<key>: append' but no rule by that name already exists (`s` was not defined before) @ 11:3",
    );
}

#[test]
fn override_shape_errors() {
    let base = format!("- rule: r\n  condition: evt.type = open\n{RULE_TAIL}");
    let text = format!(
        "{base}- rule: r\n  condition: and proc.name = x\n  output: more\n  override:\n    condition: append\n\
         - rule: r\n  priority: ERROR\n  override:\n    priority: append\n\
         - rule: r\n  append: true\n  override:\n    desc: replace\n"
    );
    check(
        &[("f.yaml", &text)],
        "E_SCHEMA: Unexpected key 'output': no corresponding entry under 'override' is defined. @ 8:3
         E_SCHEMA: Key 'priority' cannot be appended to, use 'replace' instead @ 14:15
         W_DEPRECATED: 'append' key is deprecated. Add an 'append' entry (e.g. 'condition: append') under 'override' instead. @ 16:11
         E_SCHEMA: Keys 'override' and 'append: true' cannot be used together. Add an 'append' entry (e.g. 'condition: append') under 'override' instead. @ 18:5",
    );
}

#[test]
fn engine_version() {
    check(
        &[("f.yaml", "- required_engine_version: 0.99.0\n")],
        "E_ENGINE_VERSION: Rules require engine version 0.99.0, but engine version is 0.63.0 @ 1:28",
    );
    check(
        &[("f.yaml", "- required_engine_version: 1.0.0\n")],
        "E_ENGINE_VERSION: Rules require engine version 1.0.0, but engine version is 0.63.0 @ 1:28",
    );
    check(
        &[("f.yaml", "- required_engine_version: banana\n")],
        "E_SCHEMA: Unable to parse engine version 'banana' as a semver string. Expected \"x.y.z\" semver format. @ 1:28",
    );
    // Old integer versions and lower versions load.
    check(
        &[(
            "f.yaml",
            "- required_engine_version: 10\n- required_engine_version: 0.63.0\n- required_plugin_versions:\n    - name: container\n      version: 0.4.0\n",
        )],
        "",
    );
}

/// As in Falco, a second definition in the same file replaces the first, in its place.
#[test]
fn redefinitions_in_one_file_replace() {
    let text = format!(
        "- list: l\n  items: [a]\n- list: l\n  items: [b]\n\
         - macro: m\n  condition: proc.name in (l)\n- macro: m\n  condition: proc.name in (l, c)\n\
         - rule: r\n  condition: evt.type = open and proc.name = z\n{RULE_TAIL}\
         - rule: r\n  condition: evt.type = open and m\n{RULE_TAIL}"
    );
    let r = check(&[("f.yaml", &text)], "");
    let rs = r.ruleset.expect("loads");
    assert_eq!(rs.rules().len(), 1);
    let hit = |name: &str| !matching(&rs, &event("open", &[("proc.name", name)])).is_empty();
    assert!(hit("b") && hit("c"), "the second list and macro");
    assert!(!hit("a"), "the first list is gone");
    assert!(!hit("z"), "the first rule is gone");
}

/// Falco's loader accepts these where Vigil used to stop: `override: replace` of a list or
/// macro not defined yet defines it; an override entry that cannot apply is a warning;
/// `enabled` in an `append` entry is ignored; `source:` without a value is the default;
/// `capture`/`capture_duration` can be replaced; yaml-cpp's `yes`/`on` are booleans; a list
/// named with a space loads with a warning.
#[test]
fn falco_lenient_loader_cases_load_with_warnings() {
    let text = format!(
        "- list: my list\n  items: [a, b]\n\
         - macro: m2\n  condition: proc.name = x\n  override:\n    condition: replace\n\
         - list: l2\n  items: [y]\n  override:\n    items: replace\n\
         - rule: r\n  condition: evt.type = open and (proc.name in (l2) or m2)\n  source:\n{RULE_TAIL}\
         - rule: r\n  condition: and proc.name != x\n  enabled: false\n  append: true\n\
         - rule: r\n  capture: yes\n  capture_duration: 5\n  override:\n    capture: replace\n    capture_duration: replace\n    source: replace\n\
         - rule: q\n  condition: evt.type = open\n  capture: 3\n{RULE_TAIL}"
    );
    let r = check(
        &[("f.yaml", &text)],
        "W_INVALID_NAME: List has an invalid name. List names should match a regular expression: ([^()\"'[:space:]=,]+) (`my list`) @ 1:3
         W_DEPRECATED: 'append' key is deprecated. Add an 'append' entry (e.g. 'condition: append') under 'override' instead. @ 20:11
         W_IGNORED_KEY: `enabled` in an `append` entry is ignored @ 19:12
         W_OVERRIDE_IGNORED: `source` cannot be overridden; the `override` entry is ignored @ 27:5
         W_IGNORED_KEY: `capture` must be true or false, found a scalar; ignored @ 30:12",
    );
    let rs = r.ruleset.expect("loads");
    let rule = &rs.rules()[0];
    assert!(rule.enabled, "enabled in an append entry is ignored");
    assert_eq!(rule.source, "syscall");
    assert!(rule.capture);
    assert_eq!(rule.capture_duration, Some(5));
    let hit = |name: &str| {
        matching(&rs, &event("open", &[("proc.name", name)])).contains(&"r".to_string())
    };
    assert!(hit("y"));
    assert!(!hit("x"), "the appended condition applies");
    assert!(!hit("z"));
}

#[test]
fn loading_goes_on_after_errors_in_every_phase() {
    let text = format!(
        "- rule: r1\n  condition: evt.type = open and nope.x = 1\n{RULE_TAIL}\
         - rule: r2\n  condition: evt.type = open and unknown_m\n{RULE_TAIL}\
         - list: l\n  items: a\n\
         - rule: r3\n  condition: evt.type = open\n  desc: d\n  output: \"%bad.field\"\n  priority: INFO\n"
    );
    let r = check(
        &[("f.yaml", &text)],
        "E_SCHEMA: `items` must be a sequence of strings, found a scalar @ 12:10
         E_UNKNOWN_FIELD: unknown field `nope.x` @ 2:34
         E_UNKNOWN_MACRO: unknown macro `unknown_m` @ 7:34
         E_UNKNOWN_FIELD: unknown field `bad.field` @ 16:13",
    );
    assert!(r.ruleset.is_none());
    // Diagnostics carry file names and display like a compiler's.
    assert_eq!(
        r.diagnostics[1].to_string(),
        "f.yaml:2:34: error[E_UNKNOWN_FIELD]: unknown field `nope.x`"
    );
}

#[test]
fn warnings_unused_no_evttype_source_skip_and_unknown_filter() {
    let text = "- list: unused_l\n  items: [a]\n- macro: unused_m\n  condition: proc.name = x\n\
                - rule: everywhere\n  condition: proc.name = bash\n  desc: d\n  output: o\n  priority: INFO\n\
                - rule: quiet\n  condition: proc.name = zsh\n  desc: d\n  output: o\n  priority: INFO\n  warn_evttypes: false\n\
                - rule: k8s\n  condition: ka.verb = create\n  desc: d\n  output: o\n  priority: INFO\n  source: k8s_audit\n\
                - rule: future\n  condition: evt.type = open and proc.future_field = 1\n  desc: d\n  output: o\n  priority: INFO\n  skip-if-unknown-filter: true\n";
    let r = check(
        &[("f.yaml", text)],
        "W_NO_EVTTYPE: Rule matches too many evt.type values. This has a significant performance penalty. (rule `everywhere` is evaluated for every event) @ 5:3
         W_SOURCE_SKIPPED: rule `k8s` is for source `k8s_audit`; only `syscall` rules are loaded @ 16:3
         W_SKIPPED_UNKNOWN_FILTER: rule `future` uses a field this engine does not know; skipped (skip-if-unknown-filter) @ 22:3
         W_UNUSED_MACRO: macro `unused_m` is not used @ 3:3
         W_UNUSED_LIST: list `unused_l` is not used @ 1:3",
    );
    let rs = r.ruleset.expect("warnings only");
    let names: Vec<&str> = rs.rules().iter().map(|r| r.name.as_str()).collect();
    assert_eq!(names, ["everywhere", "quiet"]);
    assert_eq!(r.stats[0].skipped_rules, 1);
}

/// Runs `f` on a thread with a small stack, so that unbounded recursion fails the test.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(4 << 20)
        .spawn(f)
        .expect("spawn test thread")
        .join()
        .expect("deep input must not crash the loader");
}

#[test]
fn deep_yaml_is_a_diagnostic() {
    on_small_stack(|| {
        let r = load(&[("seq.yaml", &"[".repeat(10_000))]);
        assert_eq!(r.diagnostics.len(), 1, "{:?}", r.diagnostics);
        assert_eq!(r.diagnostics[0].code, "E_YAML_PARSE");
        let r = load(&[("map.yaml", &"{a: ".repeat(10_000))]);
        assert_eq!(r.diagnostics[0].code, "E_YAML_PARSE");
        let mut block = String::new();
        for i in 0..10_000 {
            block.push_str(&" ".repeat(i));
            block.push_str("- \n");
        }
        let r = load(&[("block.yaml", &block)]);
        assert_eq!(r.diagnostics.len(), 1);
        assert_eq!(
            r.diagnostics[0].brief(),
            "E_YAML_PARSE: yaml nested deeper than 64 levels @ 65:65"
        );
    });
}

#[test]
fn deep_conditions_are_diagnostics() {
    on_small_stack(|| {
        let cond = format!("{}proc.name = x{}", "(".repeat(10_000), ")".repeat(10_000));
        let text = format!("- rule: r\n  condition: \"{cond}\"\n{RULE_TAIL}");
        let r = load(&[("f.yaml", &text)]);
        let codes: Vec<&str> = r.diagnostics.iter().map(|d| d.code).collect();
        assert_eq!(codes, ["E_DEPTH"], "{:?}", r.diagnostics);
        assert_eq!(r.diagnostics[0].line, 2);

        let nots = format!("{}proc.name = x", "not ".repeat(10_000));
        let text = format!("- rule: r\n  condition: {nots}\n{RULE_TAIL}");
        let r = load(&[("f.yaml", &text)]);
        assert!(r.has_errors());
        assert_eq!(r.diagnostics[0].code, "E_DEPTH");
    });
}

#[test]
fn deep_macro_chains_are_diagnostics() {
    on_small_stack(|| {
        let mut text = String::from("- macro: m0\n  condition: evt.type = open\n");
        for i in 1..10_000 {
            text.push_str(&format!(
                "- macro: m{i}\n  condition: (m{} and proc.name = x)\n",
                i - 1
            ));
        }
        text.push_str(&format!("- rule: r\n  condition: m9999\n{RULE_TAIL}"));
        let r = load(&[("f.yaml", &text)]);
        let errors: Vec<_> = r.errors().collect();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].code, "E_TOO_DEEP");

        // Lists are resolved without recursion: a 10,000-long chain loads in either order.
        for reverse in [false, true] {
            let mut text = String::new();
            for i in 0..10_000 {
                let (name, next) = if reverse { (i, i + 1) } else { (i + 1, i) };
                text.push_str(&format!("- list: l{name}\n  items: [l{next}]\n"));
            }
            let last = if reverse { 10_000 } else { 0 };
            let first = if reverse { 0 } else { 10_000 };
            text.push_str(&format!("- list: l{last}\n  items: [leaf]\n"));
            text.push_str(&format!(
                "- rule: r\n  condition: evt.type = open and proc.name in (l{first})\n{RULE_TAIL}"
            ));
            let r = load(&[("f.yaml", &text)]);
            assert!(!r.has_errors(), "{:?}", r.errors().next());
            let rs = r.ruleset.expect("no errors");
            let ev = crate::common::event("open", &[("proc.name", "leaf")]);
            assert_eq!(crate::common::matching(&rs, &ev), ["r"]);
        }
        // Lists that double at each level are cut off.
        let mut text = String::from("- list: l0\n  items: [a, b]\n");
        for i in 1..40 {
            text.push_str(&format!("- list: l{i}\n  items: [l{p}, l{p}]\n", p = i - 1));
        }
        let r = load(&[("f.yaml", &text)]);
        let codes: Vec<&str> = r.errors().map(|d| d.code).collect();
        assert_eq!(
            codes,
            ["E_TOO_LARGE"],
            "{:?}",
            r.errors().collect::<Vec<_>>()
        );
    });
}

#[test]
fn exponential_macro_graphs_are_bounded() {
    on_small_stack(|| {
        let mut text = String::from("- macro: m0\n  condition: proc.name = x\n");
        for i in 1..64 {
            let p = i - 1;
            text.push_str(&format!("- macro: m{i}\n  condition: m{p} or m{p}\n"));
        }
        text.push_str(&format!(
            "- rule: r\n  condition: evt.type = open and m63\n{RULE_TAIL}"
        ));
        let r = load(&[("f.yaml", &text)]);
        let codes: Vec<&str> = r.errors().map(|d| d.code).collect();
        assert_eq!(codes, ["E_TOO_LARGE"], "{:?}", r.diagnostics);
    });
}

/// Falco's warnings, as warnings (the load succeeds): a duplicated exception name, a field
/// name as a bare value, `evt.dir` (but not `<NA>` on syscall fields); and a rule that can never be true (`in` an empty
/// list) gets no `W_NO_EVTTYPE`.
#[test]
fn falco_warnings_are_warnings() {
    let text = format!(
        "- list: empty\n  items: []\n\
         - rule: r\n  condition: evt.type = open and proc.name = proc.pname and fd.name != <NA>\n{RULE_TAIL}\
         \x20 exceptions:\n    - name: e\n      fields: proc.name\n      values: [a]\n    - name: e\n      fields: proc.name\n      values: [b]\n\
         - rule: s\n  condition: proc.name in (empty) and evt.dir = <\n{RULE_TAIL}"
    );
    let r = check(
        &[("f.yaml", &text)],
        "W_EXCEPTION_NOT_UNIQUE: Multiple definitions of exception 'e' in the same rule (`r`) @ 12:7
         W_FIELD_AS_VALUE: 'proc.pname' may be a valid field misused as a const string value (write `val(proc.pname)` to compare with the field) @ 4:46
         W_DEPRECATED: `evt.dir` is deprecated: every event is a completed (exit) event @ 16:39",
    );
    assert!(r.ruleset.is_some());
}

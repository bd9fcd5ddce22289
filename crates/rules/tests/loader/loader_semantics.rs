//! Falco's rules-file semantics: upstream files, redefinition across files, append/override,
//! exceptions, enable/disable, priorities, rule matching and the event-type index.

use crate::common::{check, event, load, matching, ruleset, upstream};
use vigil_fields::Catalog;
use vigil_rules::testcatalog::{TestCatalog, EVENT_TYPES};
use vigil_rules::{Priority, RuleMatching, Selection};

const TAIL: &str = "  desc: d\n  output: \"%proc.name\"\n  priority: WARNING\n";

#[test]
fn upstream_files_load_without_errors() {
    let expected = [
        ("falco_rules.yaml", 25, 87, 49),
        ("falco-incubating_rules.yaml", 31, 82, 54),
        ("falco-sandbox_rules.yaml", 37, 183, 60),
    ];
    for (name, rules, macros, lists) in expected {
        let text = upstream(name);
        let r = load(&[(name, &text)]);
        let errors: Vec<String> = r.errors().map(ToString::to_string).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
        let s = &r.stats[0];
        assert_eq!(
            (s.rules, s.macros, s.lists),
            (rules, macros, lists),
            "{name}: definitions counted as Falco's README counts them"
        );
        let rs = r.ruleset.expect("no errors");
        assert_eq!(rs.rules().len(), rules, "{name}: every rule compiled");
    }
    // The three together, in Falco's order: later files redefine earlier macros and lists.
    let texts: Vec<(String, String)> = expected
        .iter()
        .map(|(n, ..)| (n.to_string(), upstream(n)))
        .collect();
    let files: Vec<(&str, &str)> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let r = load(&files);
    assert!(!r.has_errors(), "{:?}", r.errors().next());
}

#[test]
fn upstream_stable_rules_fire_on_matching_events() {
    let rs = ruleset(&[("falco_rules.yaml", &upstream("falco_rules.yaml"))]);
    // A shell spawned in a container with a terminal (`Terminal shell in container`).
    let mut ev = event(
        "execve",
        &[
            ("proc.name", "bash"),
            ("container.id", "abc123"),
            ("evt.arg.flags", ""),
        ],
    );
    ev.set_values("proc.tty", vec![vigil_fields::Value::U64(34816)]);
    ev.set_values("proc.vpid", vec![vigil_fields::Value::I64(1)]);
    let names = matching(&rs, &ev);
    assert!(
        names.iter().any(|n| n == "Terminal shell in container"),
        "matched {names:?}"
    );
}

#[test]
fn sandbox_under_indented_closing_bracket_is_accepted() {
    let text = "- list: domains\n  items: [\n    \"a.example\",\n    \"b.example\"\n  ]\n\
                - rule: r\n  condition: evt.type = connect and fd.sip.name in (domains)\n";
    let r = check(&[("f.yaml", &format!("{text}{TAIL}"))], "");
    let rs = r.ruleset.expect("accepted");
    let ev = event("connect", &[("fd.sip.name", "b.example")]);
    assert_eq!(matching(&rs, &ev), ["r"]);
}

#[test]
fn later_files_redefine_and_toggle() {
    let base = format!(
        "- list: shells\n  items: [bash]\n- macro: shell\n  condition: proc.name in (shells)\n\
         - rule: r\n  condition: evt.type = execve and shell\n{TAIL}\
         - rule: other\n  condition: evt.type = openat\n{TAIL}"
    );
    let custom = format!(
        "- list: shells\n  items: [zsh]\n- rule: other\n  enabled: false\n\
         - rule: added\n  condition: evt.type = execve and proc.name = fish\n{TAIL}"
    );
    let rs = ruleset(&[("base.yaml", &base), ("custom.yaml", &custom)]);
    let names: Vec<&str> = rs.rules().iter().map(|r| r.name.as_str()).collect();
    assert_eq!(
        names,
        ["r", "other", "added"],
        "redefinitions keep their place"
    );
    assert!(!rs.rules()[1].enabled);
    assert_eq!(
        matching(&rs, &event("execve", &[("proc.name", "bash")])),
        Vec::<String>::new()
    );
    assert_eq!(
        matching(&rs, &event("execve", &[("proc.name", "zsh")])),
        ["r"]
    );
    assert_eq!(matching(&rs, &event("openat", &[])), Vec::<String>::new());
    assert!(!rs
        .event_types()
        .contains(TestCatalog.event_type_id("openat").unwrap()));
}

#[test]
fn append_and_override() {
    let base = format!(
        "- list: shells\n  items: [bash]\n\
         - macro: spawned\n  condition: evt.type = execve\n\
         - rule: r\n  condition: spawned and proc.name in (shells)\n{TAIL}  tags: [a]\n"
    );
    // Legacy append for lists and rules.
    let legacy = "- list: shells\n  items: [zsh]\n  append: true\n\
                  - rule: r\n  condition: and not proc.pname = sshd\n  append: true\n";
    let rs = ruleset(&[("base.yaml", &base), ("legacy.yaml", legacy)]);
    assert_eq!(
        matching(
            &rs,
            &event("execve", &[("proc.name", "zsh"), ("proc.pname", "x")])
        ),
        ["r"]
    );
    assert_eq!(
        matching(
            &rs,
            &event("execve", &[("proc.name", "bash"), ("proc.pname", "x")])
        ),
        ["r"]
    );
    assert!(matching(
        &rs,
        &event("execve", &[("proc.name", "zsh"), ("proc.pname", "sshd")])
    )
    .is_empty());

    // Override: replace list items, append a macro condition, replace priority, append tags
    // and output.
    let ov = "- list: shells\n  items: [fish]\n  override:\n    items: replace\n\
              - macro: spawned\n  condition: or evt.type = execveat\n  override:\n    condition: append\n\
              - rule: r\n  priority: CRITICAL\n  tags: [b]\n  output: more\n  override:\n    priority: replace\n    tags: append\n    output: append\n";
    let rs = ruleset(&[("base.yaml", &base), ("ov.yaml", ov)]);
    assert!(matching(&rs, &event("execve", &[("proc.name", "bash")])).is_empty());
    assert_eq!(
        matching(&rs, &event("execveat", &[("proc.name", "fish")])),
        ["r"]
    );
    let rule = &rs.rules()[0];
    assert_eq!(rule.priority, Priority::Critical);
    assert_eq!(rule.tags, ["a", "b"]);
    let mut ctx = rs.new_ctx();
    let ev = event("execveat", &[("proc.name", "fish")]);
    let out = rule.output.render(&ev, &mut ctx.event());
    assert_eq!(out.text, "fish more");

    // Override replace of a condition.
    let replace =
        "- rule: r\n  condition: evt.type = openat\n  override:\n    condition: replace\n";
    let rs = ruleset(&[("base.yaml", &base), ("replace.yaml", replace)]);
    assert_eq!(matching(&rs, &event("openat", &[])), ["r"]);
    assert!(matching(&rs, &event("execve", &[("proc.name", "bash")])).is_empty());
}

#[test]
fn appended_condition_errors_point_at_the_appending_file() {
    let base = format!("- rule: r\n  condition: evt.type = execve\n{TAIL}");
    let add = "- rule: r\n  condition: and proc.nmae = x\n  override:\n    condition: append\n";
    check(
        &[("base.yaml", &base), ("add.yaml", add)],
        "add.yaml: E_UNKNOWN_FIELD: unknown field `proc.nmae` @ 2:18",
    );
}

#[test]
fn exceptions_exclude_matching_tuples() {
    let text = [
        "- list: trusted",
        "  items: [apt, dpkg]",
        "- rule: r",
        "  condition: evt.type = openat and fd.name startswith /etc",
        "  desc: d",
        "  output: o",
        "  priority: WARNING",
        "  exceptions:",
        "    - name: writers",
        "      fields: [proc.name, fd.name]",
        "      comps: [=, startswith]",
        "      values:",
        "        - [vi, /etc/hosts]",
        "        - [nano, /etc/ssh]",
        "    - name: by_list",
        "      fields: [proc.name]",
        "      comps: [in]",
        "      values:",
        "        - [trusted]",
        "        - [[yum, rpm]]",
        "    - name: single",
        "      fields: proc.pname",
        "      values: [systemd, init]",
        "",
    ]
    .join("\n");
    let rs = ruleset(&[("f.yaml", &text)]);
    let hit = |name: &str, file: &str, parent: &str| {
        !matching(
            &rs,
            &event(
                "openat",
                &[
                    ("proc.name", name),
                    ("fd.name", file),
                    ("proc.pname", parent),
                ],
            ),
        )
        .is_empty()
    };
    assert!(hit("cat", "/etc/passwd", "bash"));
    assert!(!hit("vi", "/etc/hosts", "bash"), "tuple [vi, /etc/hosts]");
    assert!(
        hit("vi", "/etc/passwd", "bash"),
        "both tuple fields must match"
    );
    assert!(
        !hit("nano", "/etc/ssh/sshd_config", "bash"),
        "startswith comp"
    );
    assert!(!hit("dpkg", "/etc/passwd", "bash"), "list name as value");
    assert!(!hit("rpm", "/etc/passwd", "bash"), "inline list value");
    assert!(
        !hit("cat", "/etc/passwd", "init"),
        "single-field exception with in"
    );

    // Values appended to an existing exception from a later file, and a new exception.
    let more = "- rule: r\n  exceptions:\n    - name: writers\n      values:\n        - [cat, /etc/passwd]\n\
                \x20   - name: fresh\n      fields: [proc.name]\n      values: [[less]]\n  override:\n    exceptions: append\n";
    let rs = ruleset(&[("f.yaml", &text), ("more.yaml", more)]);
    let hit = |name: &str, file: &str| {
        !matching(
            &rs,
            &event(
                "openat",
                &[("proc.name", name), ("fd.name", file), ("proc.pname", "x")],
            ),
        )
        .is_empty()
    };
    assert!(!hit("cat", "/etc/passwd"));
    assert!(!hit("less", "/etc/group"));
    assert!(hit("cat", "/etc/group"));
    assert!(!hit("vi", "/etc/hosts"), "earlier values are kept");

    // Legacy append of values works the same way.
    let legacy = "- rule: r\n  exceptions:\n    - name: writers\n      values:\n        - [cat, /etc/passwd]\n  append: true\n";
    let rs = ruleset(&[("f.yaml", &text), ("legacy.yaml", legacy)]);
    assert!(matching(
        &rs,
        &event(
            "openat",
            &[
                ("proc.name", "cat"),
                ("fd.name", "/etc/passwd"),
                ("proc.pname", "x")
            ]
        )
    )
    .is_empty());
}

/// Falco 0.44's operator modifiers in conditions (with list names expanded inside the modified
/// list) and in exception `comps`: single-field (all values form one modified list),
/// multi-field (mixed per field) and with extra whitespace inside the comp.
#[test]
fn operator_modifiers_in_conditions_and_exceptions() {
    let text = [
        "- list: prefixes",
        "  items: [/etc, /usr]",
        "- macro: sensitive",
        "  condition: fd.name startswith anyof (prefixes, /root)",
        "- rule: r",
        "  condition: evt.type = anyof (openat) and sensitive and proc.name != allof (cat, ls)",
        "  desc: d",
        "  output: o",
        "  priority: WARNING",
        "  exceptions:",
        "    - name: pkg",
        "      fields: proc.name",
        "      comps: startswith  oneof",
        "      values: [apt, dpkg]",
        "    - name: pair",
        "      fields: [proc.pname, proc.cmdline]",
        "      comps: [= oneof, contains allof]",
        "      values:",
        "        - [[sshd, cron], [--fix, -y]]",
        "    - name: ends",
        "      fields: [fd.name]",
        "      comps: [endswith anyof]",
        "      values:",
        "        - [[.bak, .old]]",
        "",
    ]
    .join("\n");
    let rs = ruleset(&[("f.yaml", &text)]);
    let hit = |fields: &[(&str, &str)]| {
        let mut all = vec![
            ("proc.name", "vi"),
            ("fd.name", "/etc/passwd"),
            ("proc.pname", "bash"),
            ("proc.cmdline", "vi x"),
        ];
        for (k, v) in fields {
            all.retain(|(name, _)| name != k);
            all.push((k, v));
        }
        !matching(&rs, &event("openat", &all)).is_empty()
    };
    assert!(hit(&[]));
    assert!(
        hit(&[("fd.name", "/usr/lib/x")]),
        "list name in a modified list"
    );
    assert!(
        hit(&[("fd.name", "/root/.ssh")]),
        "inline item beside a list name"
    );
    assert!(!hit(&[("fd.name", "/tmp/x")]));
    assert!(!hit(&[("proc.name", "cat")]), "!= allof excludes each item");
    assert!(
        !hit(&[("proc.name", "apt-get")]),
        "startswith oneof exception"
    );
    assert!(!hit(&[
        ("proc.pname", "cron"),
        ("proc.cmdline", "x --fix -y")
    ]));
    assert!(
        hit(&[("proc.pname", "cron"), ("proc.cmdline", "x --fix")]),
        "contains allof needs every item"
    );
    assert!(!hit(&[("fd.name", "/etc/passwd.old")]), "endswith anyof");
    let types = rs.rules()[0].filter().event_types();
    assert_eq!(types.map(|t| t.len()), Some(1), "indexed on openat alone");
}

#[test]
fn exception_shape_errors() {
    let text = format!(
        "- rule: r\n  condition: evt.type = openat\n{TAIL}  exceptions:\n\
         \x20   - name: e1\n      fields: [proc.name, fd.name]\n      comps: [=]\n\
         \x20   - name: e2\n      fields: [proc.name]\n      values:\n        - [a, b]\n\
         \x20   - name: e3\n      fields: [proc.name]\n      comps: [like]\n\
         \x20   - name: e4\n      fields: [proc.nmae]\n      values: [[x]]\n"
    );
    check(
        &[("f.yaml", &text)],
        "E_SCHEMA: exception `e1` has 2 fields but 1 comps @ 7:7
         E_SCHEMA: exception `e2` value has 2 items but the exception has 1 fields @ 13:11
         E_SCHEMA: 'like' is not a supported comparison operator (exception `e3`) @ 16:15",
    );
    let text = format!(
        "- rule: r\n  condition: evt.type = openat\n{TAIL}  exceptions:\n\
         \x20   - name: e4\n      fields: [proc.nmae]\n      values: [[x]]\n"
    );
    check(
        &[("f.yaml", &text)],
        "E_UNKNOWN_FIELD: unknown field `proc.nmae` @ 8:16",
    );
    // Values without `fields` on the rule's own exception (a fuzzer find: it used to panic).
    let text = format!(
        "- rule: r\n  condition: evt.type = openat\n{TAIL}  exceptions:\n\
         \x20   - name: e5\n      values:\n        - [sshd/vi]\n"
    );
    check(
        &[("f.yaml", &text)],
        "E_SCHEMA: Item has no mapping for key 'fields' (exception `e5`) @ 7:7",
    );
}

fn tagged_rules() -> vigil_rules::Ruleset {
    let mut text = String::new();
    for (name, ty, prio, tags, enabled) in [
        (
            "Write below etc",
            "openat",
            "ERROR",
            "[filesystem, mitre_persistence]",
            true,
        ),
        ("Write below bin", "openat", "WARNING", "[filesystem]", true),
        (
            "Shell in container",
            "execve",
            "NOTICE",
            "[shell, container]",
            true,
        ),
        ("Outbound connection", "connect", "INFO", "[network]", false),
    ] {
        text.push_str(&format!(
            "- rule: {name}\n  condition: evt.type = {ty}\n  desc: d\n  output: o\n  priority: {prio}\n  tags: {tags}\n  enabled: {enabled}\n"
        ));
    }
    ruleset(&[("f.yaml", &text)])
}

fn enabled_names(rs: &vigil_rules::Ruleset) -> Vec<&str> {
    (0..rs.rules().len())
        .filter(|&i| rs.is_enabled(i))
        .map(|i| rs.rules()[i].name.as_str())
        .collect()
}

#[test]
fn selection_by_name_and_tag_with_wildcards() {
    let mut rs = tagged_rules();
    assert_eq!(
        enabled_names(&rs),
        ["Write below etc", "Write below bin", "Shell in container"]
    );
    rs.select(&Selection::default().disable_rule("*").enable_tag("network"));
    assert_eq!(
        enabled_names(&rs),
        ["Outbound connection"],
        "enable overrides `enabled: false`"
    );
    rs.select(
        &Selection::default()
            .disable_rule("Write below *")
            .enable_rule("Write below etc"),
    );
    assert_eq!(
        enabled_names(&rs),
        ["Write below etc", "Shell in container"],
        "later entries win"
    );
    rs.select(&Selection::default().disable_tag("file*"));
    assert_eq!(enabled_names(&rs), ["Shell in container"]);
    let openat = TestCatalog.event_type_id("openat").unwrap();
    assert!(
        rs.candidates(openat).is_empty(),
        "the index follows the selection"
    );
    assert!(matching(&rs, &event("openat", &[])).is_empty());
    assert_eq!(matching(&rs, &event("execve", &[])), ["Shell in container"]);
    rs.select(&Selection::default());
    assert_eq!(
        enabled_names(&rs).len(),
        3,
        "an empty selection restores the files' state"
    );
}

#[test]
fn priority_threshold() {
    let mut rs = tagged_rules();
    rs.set_min_priority(Priority::Warning);
    assert_eq!(enabled_names(&rs), ["Write below etc", "Write below bin"]);
    assert!(matching(&rs, &event("execve", &[])).is_empty());
    rs.set_min_priority(Priority::Error);
    assert_eq!(matching(&rs, &event("openat", &[])), ["Write below etc"]);
    rs.set_min_priority(Priority::Debug);
    assert_eq!(enabled_names(&rs).len(), 3);
}

#[test]
fn rule_matching_first_and_all() {
    let mut rs = tagged_rules();
    let ev = event("openat", &[]);
    assert_eq!(
        matching(&rs, &ev),
        ["Write below etc"],
        "first by default, in file order"
    );
    rs.set_rule_matching(RuleMatching::All);
    assert_eq!(matching(&rs, &ev), ["Write below etc", "Write below bin"]);
}

#[test]
fn event_type_index_matches_brute_force_on_upstream_rules() {
    let texts: Vec<(String, String)> = ["falco_rules.yaml", "falco-incubating_rules.yaml"]
        .iter()
        .map(|n| (n.to_string(), upstream(n)))
        .collect();
    let files: Vec<(&str, &str)> = texts
        .iter()
        .map(|(n, t)| (n.as_str(), t.as_str()))
        .collect();
    let mut rs = load(&files).ruleset.expect("upstream rules load");
    for sel in [
        Selection::default(),
        Selection::default()
            .disable_rule("*")
            .enable_tag("container"),
        Selection::default().enable_rule("*"),
    ] {
        rs.select(&sel);
        let interest = rs.event_types();
        for (id, name) in EVENT_TYPES.iter().enumerate() {
            let id = u16::try_from(id).unwrap();
            let expected: Vec<u32> = (0..rs.rules().len())
                .filter(|&i| rs.is_enabled(i))
                .filter(|&i| rs.rules()[i].event_types().is_none_or(|t| t.contains(&id)))
                .map(|i| u32::try_from(i).unwrap())
                .collect();
            assert_eq!(rs.candidates(id), expected.as_slice(), "event type {name}");
            assert_eq!(
                interest.contains(id),
                !expected.is_empty(),
                "interest in {name}"
            );
        }
        assert!(
            interest.count() < EVENT_TYPES.len(),
            "upstream rules all restrict evt.type"
        );
    }
    // Rules matching `execve` events only: a spawned shell hits no `openat` rule.
    let execve = TestCatalog.event_type_id("execve").unwrap();
    assert!(rs.candidates(execve).iter().all(|&i| {
        rs.rules()[i as usize]
            .event_types()
            .is_none_or(|t| t.contains(&execve))
    }));
}

#[test]
fn unrestricted_rules_are_indexed_everywhere() {
    let text = "- rule: any\n  condition: proc.name = x\n  desc: d\n  output: o\n  priority: INFO\n  warn_evttypes: false\n\
                - rule: open\n  condition: evt.type in (open, openat)\n  desc: d\n  output: o\n  priority: INFO\n";
    let mut rs = ruleset(&[("f.yaml", text)]);
    assert!(rs.event_types().is_all());
    assert_eq!(
        rs.candidates(TestCatalog.event_type_id("openat").unwrap()),
        [0, 1]
    );
    assert_eq!(
        rs.candidates(TestCatalog.event_type_id("execve").unwrap()),
        [0]
    );
    assert_eq!(
        rs.candidates(u16::MAX),
        [0],
        "unknown type ids meet unrestricted rules"
    );
    rs.select(&Selection::default().disable_rule("any"));
    let ids: Vec<u16> = rs.event_types().ids().collect();
    assert_eq!(ids, [0, 1]);
    assert_eq!(TestCatalog.n_event_types(), EVENT_TYPES.len());
}

#[test]
fn evaluate_does_not_allocate_per_event_in_steady_state() {
    // Capacity of the output vector is reused; the context is reset by `evaluate`.
    let rs = tagged_rules();
    let mut ctx = rs.new_ctx();
    let mut out = Vec::with_capacity(4);
    let ev = event("openat", &[]);
    for _ in 0..3 {
        out.clear();
        rs.evaluate(&ev, &mut ctx, &mut out);
        assert_eq!(out, [0]);
    }
    assert_eq!(out.capacity(), 4);
}

/// The incubating and sandbox rules' `fd.ip != "0.0.0.0"`: a connection whose server (or
/// client) is 0.0.0.0 must not match, as in libsinsp, where `!=` on `fd.ip` requires every
/// endpoint to differ; `in` on it matches either endpoint.
#[test]
fn endpoint_pair_inequality_excludes_either_endpoint() {
    let text = [
        "- rule: r",
        "  condition: evt.type = connect and fd.ip != \"0.0.0.0\" and fd.port in (80, 8080)",
        "  desc: d",
        "  output: o",
        "  priority: WARNING",
        "",
    ]
    .join("\n");
    let rs = ruleset(&[("f.yaml", &text)]);
    let hit = |client: &str, server: &str, sport: u64| {
        let ip = |t: &str| vigil_fields::Value::Ip(t.parse().expect("test address"));
        let mut ev = event("connect", &[]);
        ev.set_values("fd.ip", vec![ip(client), ip(server)]);
        ev.set_values(
            "fd.port",
            vec![
                vigil_fields::Value::U64(40000),
                vigil_fields::Value::U64(sport),
            ],
        );
        !matching(&rs, &ev).is_empty()
    };
    assert!(hit("10.0.0.5", "93.184.216.34", 80));
    assert!(!hit("10.0.0.5", "0.0.0.0", 80), "server 0.0.0.0");
    assert!(!hit("0.0.0.0", "93.184.216.34", 80), "client 0.0.0.0");
    assert!(
        !hit("10.0.0.5", "93.184.216.34", 443),
        "neither port listed"
    );
}

/// The multivalue transformers `join`, `concat` and `getopt` in macros, rules, outputs and
/// exception fields, and their argument errors at `file:line:col`.
#[test]
fn multivalue_transformers_in_rules_files() {
    let text = [
        "- macro: dotted",
        "  condition: concat(proc.name, \":\", fd.name) = \"vi:/etc/passwd\"",
        "- rule: r",
        "  condition: evt.type = openat and (dotted or join(\"|\", (proc.pname, proc.name)) = \"cron|sh\")",
        "  desc: d",
        "  output: seen %concat(proc.name, \"@\", fd.name)",
        "  priority: WARNING",
        "  exceptions:",
        "    - name: joined",
        "      fields:",
        "        - 'join(\"/\", (proc.pname, proc.name))'",
        "      values:",
        "        - [sshd/vi]",
        "",
    ]
    .join("\n");
    let rs = ruleset(&[("f.yaml", &text)]);
    let hit = |fields: &[(&str, &str)]| !matching(&rs, &event("openat", fields)).is_empty();
    assert!(hit(&[
        ("proc.name", "vi"),
        ("fd.name", "/etc/passwd"),
        ("proc.pname", "bash")
    ]));
    assert!(!hit(&[
        ("proc.name", "vi"),
        ("fd.name", "/etc/shadow"),
        ("proc.pname", "bash")
    ]));
    assert!(hit(&[
        ("proc.name", "sh"),
        ("fd.name", "/x"),
        ("proc.pname", "cron")
    ]));
    assert!(
        hit(&[("proc.name", "vi"), ("fd.name", "/etc/passwd")]),
        "without proc.pname the exception's join has no value, so it does not hold"
    );
    assert!(
        !hit(&[
            ("proc.name", "vi"),
            ("fd.name", "/etc/passwd"),
            ("proc.pname", "sshd")
        ]),
        "the exception on join(\"/\", …) excludes sshd/vi"
    );

    let bad = [
        "- rule: r",
        "  condition: evt.type = openat and",
        "    join(\"-\", proc.name) = x",
        "  desc: d",
        "  output: o %concat(proc.name)",
        "  priority: WARNING",
        "",
    ]
    .join("\n");
    check(
        &[("f.yaml", &bad)],
        "E_TRANSFORMER_ARGS: join() second argument must be a list @ 3:5
         E_TRANSFORMER_ARGS: concat() requires at least 2 arguments @ 5:14",
    );
}

//! End-to-end tests of the `vigil` binary: exit codes, diagnostics with positions, replay
//! output formats, capture conversion and corrupt captures.
//!
//! Requirements: the upstream Falco rules beside the repository (`../shared/falco-rules`) for
//! the tests that load them; without them those tests skip with a reason, and fail under
//! `VIGIL_TEST_STRICT=1`.
// Tests report skipped requirements on stderr.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::support::{host, scratch, text, vigil};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn upstream(test: &str) -> Option<PathBuf> {
    let dir = repo_root().join("../shared/falco-rules");
    if dir.join("falco_rules.yaml").is_file() {
        return Some(dir);
    }
    let strict = std::env::var("VIGIL_TEST_STRICT").is_ok_and(|v| v == "1");
    assert!(!strict, "{test}: {} not found", dir.display());
    eprintln!("skipping {test}: {} not found", dir.display());
    None
}

fn write(dir: &Path, name: &str, content: &str) -> PathBuf {
    let path = dir.join(name);
    fs::write(&path, content).expect("write test file");
    path
}

/// `vigil capture convert --to FORM input output`, which must succeed.
fn convert(form: &str, input: &Path, output: &Path) {
    let out = vigil(&[
        "capture",
        "convert",
        "--to",
        form,
        &input.display().to_string(),
        &output.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn validate_upstream_rules_reports_counts_and_nothing_unsupported() {
    let _host = host::shared();
    let Some(dir) = upstream("validate_upstream_rules_reports_counts_and_nothing_unsupported")
    else {
        return;
    };
    let files: Vec<String> = [
        "falco_rules.yaml",
        "falco-incubating_rules.yaml",
        "falco-sandbox_rules.yaml",
    ]
    .iter()
    .map(|f| dir.join(f).display().to_string())
    .collect();
    let mut args = vec!["rules", "validate"];
    args.extend(files.iter().map(String::as_str));
    let out = vigil(&args);
    let stdout = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout:\n{stdout}\nstderr:\n{}",
        text(&out.stderr)
    );
    assert!(
        stdout.contains("falco_rules.yaml: 25 rules, 87 macros, 49 lists"),
        "{stdout}"
    );
    assert!(
        stdout.contains("falco-incubating_rules.yaml: 31 rules, 82 macros, 54 lists"),
        "{stdout}"
    );
    assert!(
        stdout.contains("falco-sandbox_rules.yaml: 37 rules, 183 macros, 60 lists"),
        "{stdout}"
    );
    assert!(
        stdout.contains("unsupported fields: 0, unsupported operators: 0"),
        "{stdout}"
    );
    assert!(stdout.contains("0 error(s)"), "{stdout}");
}

#[test]
fn validate_embedded_default_rules_directory() {
    let _host = host::shared();
    let out = vigil(&[
        "rules",
        "validate",
        &repo_root().join("rules").display().to_string(),
    ]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}{}", text(&out.stderr));
    assert!(stdout.contains("vigil_rules.yaml: "), "{stdout}");
    assert!(stdout.contains("0 error(s), 0 warning(s)"), "{stdout}");
}

/// One bad-input class: the file content, the diagnostic code, and the `line:col` it must name.
struct BadInput {
    name: &'static str,
    content: String,
    code: &'static str,
    position: &'static str,
}

fn rule(condition: &str) -> String {
    format!(
        "- rule: r\n  desc: d\n  condition: {condition}\n  output: o %proc.name\n  priority: WARNING\n"
    )
}

fn bad_inputs() -> Vec<BadInput> {
    let deep_parens = format!("{}proc.name=x{}", "(".repeat(10_000), ")".repeat(10_000));
    let deep_yaml = format!(
        "- rule: r\n  desc: {}x{}\n",
        "[".repeat(10_000),
        "]".repeat(10_000)
    );
    vec![
        BadInput {
            name: "malformed_yaml",
            content: "- rule: r\n  desc: [unclosed\n  condition: evt.type=open\n".into(),
            code: "E_YAML_PARSE",
            position: ":3:",
        },
        BadInput {
            name: "unknown_field",
            content: rule("evt.type=open and proc.nmae=bash"),
            code: "E_UNKNOWN_FIELD",
            position: ":3:32",
        },
        BadInput {
            name: "unknown_macro",
            content: rule("evt.type=open and not_a_macro"),
            code: "E_UNKNOWN_MACRO",
            position: ":3:32",
        },
        BadInput {
            name: "unknown_list",
            content: "- list: not_defined_anywhere\n  items: [a]\n  append: true\n".into(),
            code: "E_UNDEFINED_APPEND",
            position: ":1:3",
        },
        BadInput {
            name: "macro_cycle",
            content: format!(
                "- macro: a\n  condition: b\n- macro: b\n  condition: a\n{}",
                rule("evt.type=open and a")
            ),
            code: "E_MACRO_CYCLE",
            position: ":4:14",
        },
        BadInput {
            name: "bad_operator",
            content: rule("evt.type=open and evt.buffer icontains x"),
            code: "E_BAD_OPERATOR",
            position: ":3:32",
        },
        BadInput {
            name: "engine_version",
            content: format!(
                "- required_engine_version: 99.0.0\n{}",
                rule("evt.type=open")
            ),
            code: "E_ENGINE_VERSION",
            position: ":1:28",
        },
        BadInput {
            name: "undefined_override",
            content: format!(
                "{}- rule: s\n  condition: and proc.name = x\n  override:\n    condition: append\n",
                rule("evt.type=open")
            ),
            code: "E_UNDEFINED_APPEND",
            position: ":6:3",
        },
        BadInput {
            name: "deep_condition",
            content: rule(&deep_parens),
            code: "E_DEPTH",
            position: ":3:",
        },
        BadInput {
            name: "deep_yaml",
            content: deep_yaml,
            // The YAML parser's own nesting limit fires first.
            code: "E_YAML_PARSE",
            position: ":2:",
        },
    ]
}

#[test]
fn bad_rules_give_a_coded_positioned_diagnostic_and_exit_2() {
    let _host = host::shared();
    let dir = scratch("bad-rules");
    let mut failures = Vec::new();
    for case in bad_inputs() {
        let path = write(&dir, &format!("{}.yaml", case.name), &case.content);
        let out = vigil(&["rules", "validate", &path.display().to_string()]);
        let stderr = text(&out.stderr);
        let expected_prefix = format!("{}{}", path.display(), case.position);
        let line = stderr
            .lines()
            .find(|l| l.contains(&format!("[{}]", case.code)))
            .unwrap_or("");
        if out.status.code() != Some(2) || !line.starts_with(&expected_prefix) {
            failures.push(format!(
                "{}: exit {:?}, wanted `{}` at `{expected_prefix}`; stderr:\n{}",
                case.name,
                out.status.code(),
                case.code,
                stderr.chars().take(600).collect::<String>()
            ));
        }
        assert!(
            !stderr.contains("panicked"),
            "{}: panicked:\n{stderr}",
            case.name
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn replay_prints_falco_json_and_text() {
    let _host = host::shared();
    let capture = repo_root().join("testdata/vigil-default/ptrace-attach/events.jsonl");
    let capture = capture.display().to_string();
    let out = vigil(&["replay", &capture, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let first = stdout.lines().next().expect("at least one alert");
    let alert: serde_json::Value = serde_json::from_str(first).expect("alert is JSON");
    for key in [
        "hostname",
        "output",
        "priority",
        "rule",
        "source",
        "tags",
        "time",
        "output_fields",
    ] {
        assert!(alert.get(key).is_some(), "missing `{key}` in {first}");
    }
    assert_eq!(alert["source"], "syscall");
    assert_eq!(
        alert["hostname"], "vigil-test",
        "a replay reports the recorded host"
    );

    let out = vigil(&["replay", &capture]);
    let stdout = text(&out.stdout);
    let line = stdout.lines().next().expect("a text alert");
    // `HH:MM:SS.nnnnnnnnn: Priority output`
    assert_eq!(line.as_bytes()[2], b':', "{line}");
    assert_eq!(&line[18..20], ": ", "{line}");
}

#[test]
fn binary_and_jsonl_captures_replay_to_the_same_alerts() {
    let _host = host::shared();
    let dir = scratch("convert");
    let jsonl = repo_root().join("testdata/vigil-default/stdio-to-network-socket/events.jsonl");
    let binary = dir.join("capture.vcap");
    convert("binary", &jsonl, &binary);
    let from_text = vigil(&[
        "replay",
        "--rule-matching",
        "all",
        "--json",
        &jsonl.display().to_string(),
    ]);
    let from_binary = vigil(&[
        "replay",
        "--rule-matching",
        "all",
        "--json",
        &binary.display().to_string(),
    ]);
    assert_eq!(
        from_binary.status.code(),
        Some(0),
        "{}",
        text(&from_binary.stderr)
    );
    assert!(!from_text.stdout.is_empty());
    assert_eq!(text(&from_text.stdout), text(&from_binary.stdout));

    // Back to text, and the same again.
    let again = dir.join("again.jsonl");
    convert("jsonl", &binary, &again);
    let from_again = vigil(&[
        "replay",
        "--rule-matching",
        "all",
        "--json",
        &again.display().to_string(),
    ]);
    assert_eq!(text(&from_text.stdout), text(&from_again.stdout));
}

#[test]
fn corrupt_captures_fail_with_position_and_exit_2() {
    let _host = host::shared();
    let dir = scratch("corrupt");
    let jsonl = repo_root().join("testdata/vigil-default/ptrace-attach/events.jsonl");
    let binary = dir.join("capture.vcap");
    convert("binary", &jsonl, &binary);
    let bytes = fs::read(&binary).expect("read binary capture");

    let truncated = dir.join("truncated.vcap");
    fs::write(&truncated, &bytes[..bytes.len() - 3]).expect("write truncated");
    let out = vigil(&["replay", &truncated.display().to_string()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("offset"), "no offset in: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");

    let bad_line = dir.join("bad.jsonl");
    let mut content = fs::read_to_string(&jsonl).expect("read jsonl");
    content.push_str("{\"tid\": 1, \"type\": \"no_such_syscall\"}\n");
    fs::write(&bad_line, content).expect("write bad jsonl");
    let out = vigil(&["replay", &bad_line.display().to_string()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no_such_syscall") && stderr.contains("line"),
        "{stderr}"
    );

    let garbage = write(&dir, "garbage.bin", "\u{0}\u{1}not a capture at all");
    let out = vigil(&["replay", &garbage.display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn fields_lists_the_catalog() {
    let _host = host::shared();
    let out = vigil(&["fields"]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    for field in [
        "proc.aname[N]?",
        "fd.name",
        "evt.type",
        "container.id",
        "k8s.ns.name",
        "user.loginuid",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.split_whitespace().next() == Some(field)),
            "`{field}` missing from vigil fields"
        );
    }
    let json = vigil(&["fields", "--json"]);
    for line in text(&json.stdout).lines() {
        let v: serde_json::Value =
            serde_json::from_str(line).expect("fields --json lines are JSON");
        assert!(v["desc"].as_str().is_some_and(|d| !d.is_empty()), "{line}");
    }
}

#[test]
fn rules_list_shows_the_embedded_default() {
    let _host = host::shared();
    let out = vigil(&["rules", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rules: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert!(rules.len() >= 20, "only {} default rules", rules.len());
    assert!(rules
        .iter()
        .all(|r| r["enabled"] == true && r["source"] == "syscall"));
}

#[test]
fn missing_rules_file_and_bad_priority_exit_2() {
    let _host = host::shared();
    let out = vigil(&["rules", "validate", "/nonexistent/rules.yaml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let out = vigil(&["rules", "list", "--min-priority", "loud"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("unknown priority"));
}

#[test]
fn closed_stdout_is_not_an_error() {
    let _host = host::shared();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .arg("fields")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vigil");
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("wait vigil");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn rule_selection_flags_enable_and_disable_like_falco() {
    let _host = host::shared();
    let enabled = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["rules", "list", "--json"];
        all.extend_from_slice(args);
        let out = vigil(&all);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON line"))
            .filter(|r| r["enabled"] == true)
            .map(|r| r["rule"].as_str().expect("rule name").to_string())
            .collect()
    };
    let all = enabled(&[]);
    let shells = enabled(&["--enable-tag", "shell"]);
    assert!(!shells.is_empty() && shells.len() < all.len(), "{shells:?}");
    let no_ptrace = enabled(&["--disable", "*ptrace*"]);
    assert_eq!(no_ptrace.len(), all.len() - 1, "{no_ptrace:?}");
    assert!(!no_ptrace.iter().any(|r| r.contains("ptrace")));
    let mitre = enabled(&[
        "--enable-tag",
        "mitre_*",
        "--disable-tag",
        "mitre_execution",
    ]);
    assert!(!mitre.is_empty() && mitre.len() < all.len());
    assert!(!mitre.contains(&"Interactive Shell Started in Container".to_string()));
    let notice_up = enabled(&["--min-priority", "error"]);
    assert!(!notice_up.is_empty() && notice_up.len() < all.len());
}

#[test]
fn config_show_applies_overrides_and_rejects_bad_keys() {
    let _host = host::shared();
    let out = vigil(&[
        "config",
        "show",
        "-o",
        "json_output=true",
        "-o",
        "rule_matching=all",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(shown.contains("json_output: true"), "{shown}");
    assert!(shown.contains("rule_matching: all"), "{shown}");

    let dir = scratch("config");
    let bad = write(
        &dir,
        "bad.yaml",
        "json_output: true\nhttp_output:\n  url: [1, 2]\n",
    );
    let out = vigil(&["config", "show", "-c", &bad.display().to_string()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{}:3:", bad.display())),
        "{stderr}"
    );
    assert!(stderr.contains("`http_output.url`"), "{stderr}");

    // Unknown keys warn with file:line:col and are ignored (Falco's configuration keeps
    // growing); the rest of the file applies.
    let unknown = write(
        &dir,
        "unknown.yaml",
        "json_ouput: true\nbuffered_outputs: true\n",
    );
    let out = vigil(&["config", "show", "-c", &unknown.display().to_string()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}:1:1: unknown key `json_ouput` (did you mean `json_output`?); ignored",
            unknown.display()
        )),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains("buffered_outputs: true"));

    let out = vigil(&["config", "show", "-o", "no_such_key=1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("unknown key `no_such_key`"));
}

/// The falco.yaml files Falco ships (0.41.0 and 0.44.1, read from `../shared/falco-config/`)
/// load unchanged: exit 0, every Falco-only or newer key named in a warning with its
/// position, and the values Vigil honours taken from the file.
#[test]
fn falco_shipped_configuration_files_load() {
    let _host = host::shared();
    let shared =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/falco-config");
    for version in ["0.41.0", "0.44.1"] {
        let file = shared.join(format!("falco-{version}.yaml"));
        assert!(file.exists(), "{}", file.display());
        let out = vigil(&["config", "show", "-c", &file.display().to_string()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "falco {version}: {stderr}");
        let prefix = format!("{}:", file.display());
        assert!(
            stderr.lines().all(|l| l.contains(&prefix)),
            "falco {version}: every warning names the file and position:\n{stderr}"
        );
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains("json_output: false"),
            "falco {version}: {stdout}"
        );
        assert!(
            stdout.contains("priority: debug"),
            "falco {version}: {stdout}"
        );
    }
}

#[test]
fn replay_follows_the_configuration_and_flags_win() {
    let _host = host::shared();
    let capture = repo_root().join("testdata/vigil-default/stdio-to-network-socket/events.jsonl");
    let capture = capture.display().to_string();
    let lines = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["replay", capture.as_str()];
        all.extend_from_slice(args);
        let out = vigil(&all);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        text(&out.stdout).lines().map(str::to_string).collect()
    };
    // json_output and the json_include_* keys shape the alert.
    let json = lines(&[
        "-o",
        "json_output=true",
        "-o",
        "json_include_tags_property=false",
    ]);
    let alert: serde_json::Value = serde_json::from_str(&json[0]).expect("JSON alert");
    assert!(
        alert.get("tags").is_none() && alert.get("output_fields").is_some(),
        "{alert}"
    );
    // The configuration's `rules:` selectors apply; a flag re-enables nothing it disabled.
    let dir = scratch("config-replay");
    let config = write(
        &dir,
        "vigil.yaml",
        "rules:\n  - disable:\n      rule: \"Standard Stream*\"\n",
    );
    let config = config.display().to_string();
    assert!(
        lines(&["-c", &config]).is_empty(),
        "the only alerting rule is disabled"
    );
    // Priority: the configuration's threshold applies unless --min-priority is given.
    let high = lines(&["-o", "priority=critical"]);
    assert!(high.is_empty(), "{high:?}");
    let flag_wins = lines(&["-o", "priority=critical", "--min-priority", "debug"]);
    assert!(!flag_wins.is_empty());
}

/// `vigil` without a subcommand takes Falco's command line and does what `falco` does with it.
#[test]
fn falco_command_line_without_a_subcommand() {
    let _host = host::shared();
    let Some(upstream) = upstream("falco_command_line_without_a_subcommand") else {
        return;
    };
    let dir = scratch("falco-cli");
    let rules = upstream.join("falco_rules.yaml").display().to_string();

    // -L: every rule's name and description; with json_output, one JSON object per rule.
    let out = vigil(&["-L", "-r", &rules]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("Read sensitive file untrusted"));
    let out = vigil(&["-L", "-r", &rules, "-o", "json_output=true"]);
    let first = text(&out.stdout)
        .lines()
        .next()
        .map(str::to_owned)
        .unwrap_or_default();
    let first: serde_json::Value = serde_json::from_str(&first).expect("JSON line");
    assert!(first["rule"].is_string(), "{first}");

    // -l RULE: that rule's description; an unknown rule is invalid input.
    let out = vigil(&["-l", "Read sensitive file untrusted", "-r", &rules]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("An attempt to read any sensitive file"));
    let out = vigil(&["-l", "No such rule", "-r", &rules]);
    assert_eq!(out.status.code(), Some(2));

    // --list [syscall] and -N: the fields.
    let out = vigil(&["--list", "-N"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).lines().any(|l| l == "proc.name"));
    let out = vigil(&["--list", "syscall"]);
    assert!(text(&out.stdout).contains("proc.name"));
    assert_eq!(vigil(&["--list", "k8s_audit"]).status.code(), Some(2));

    // -V: validate (repeatable); a broken file exits 2.
    let bad = write(&dir, "bad.yaml", "- rule: x\n  condition: proc.name =\n");
    let out = vigil(&["-V", &rules, "--validate", &rules]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        vigil(&["-V", &bad.display().to_string()]).status.code(),
        Some(2)
    );

    // --support: one JSON object; -U shows as buffered_outputs: false in its configuration.
    let out = vigil(&["--support", "-U", "-r", &rules]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let support: serde_json::Value = serde_json::from_slice(&out.stdout).expect("support JSON");
    for key in [
        "version",
        "engine_info",
        "system_info",
        "cmdline",
        "config",
        "rules_files",
    ] {
        assert!(!support[key].is_null(), "--support has `{key}`: {support}");
    }
    assert!(support["config"]
        .as_str()
        .is_some_and(|c| c.contains("buffered_outputs: false")));
    assert_eq!(support["rules_files"][0]["name"], rules.as_str());
    assert!(support["rules_files"][0]["variants"][0]["content"]
        .as_str()
        .is_some_and(|c| c.contains("- rule: Read sensitive file untrusted")));
    // `engine_info` is the object `/versions` serves, as in Falco, and `version` its
    // `falco_version`.
    assert_falco_version_keys(&support["engine_info"]);
    assert_eq!(support["version"], support["engine_info"]["falco_version"]);

    // --dry-run: loads configuration and rules, captures nothing.
    assert_eq!(vigil(&["--dry-run", "-r", &rules]).status.code(), Some(0));
    assert_eq!(
        vigil(&["--dry-run", "-r", &bad.display().to_string()])
            .status
            .code(),
        Some(2)
    );

    // -e FILE: evaluate a capture; -D SUBSTRING, -T TAG and -t TAG select rules as in Falco.
    let capture = repo_root().join("testdata/demo/events.jsonl");
    let capture = capture.display().to_string();
    let rules_of = |extra: &[&str]| -> Vec<String> {
        let mut args = vec![
            "-e",
            &capture,
            "-o",
            "json_output=true",
            "-o",
            "syslog_output.enabled=false",
        ];
        args.extend_from_slice(extra);
        let out = vigil(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{extra:?}: {}",
            text(&out.stderr)
        );
        text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("alert JSON"))
            .map(|a| a["rule"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let all = rules_of(&[]);
    assert!(all.iter().any(|r| r.contains("Search")), "{all:?}");
    let without = rules_of(&["-D", "Credential Search"]);
    assert!(
        !without.is_empty() && !without.iter().any(|r| r.contains("Search")),
        "{without:?}"
    );
    assert_eq!(
        without.len() + all.iter().filter(|r| r.contains("Search")).count(),
        all.len()
    );
    let network_only = rules_of(&["-t", "network"]);
    assert!(
        !network_only.is_empty() && network_only.len() < all.len(),
        "{network_only:?}"
    );
    let no_network = rules_of(&["-T", "network"]);
    assert_eq!(
        no_network.len() + network_only.len(),
        all.len(),
        "{no_network:?}"
    );

    // --version (Falco's `-V` means validate, so there is no short form): Falco's block,
    // and with json_output the `/versions` object.
    let out = vigil(&["--version"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let block = text(&out.stdout);
    assert!(
        block.starts_with(&format!(
            "Falco version: {}\nLibs version:  ",
            env!("CARGO_PKG_VERSION")
        )),
        "{block}"
    );
    let engine = block
        .lines()
        .find_map(|l| l.strip_prefix("Engine:"))
        .map(str::trim);
    assert_eq!(
        engine,
        Some(vigil_rules::version_text(vigil_rules::ENGINE_VERSION).as_str()),
        "{block}"
    );
    let out = vigil(&["--version", "-o", "json_output=true"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let versions: serde_json::Value = serde_json::from_slice(&out.stdout).expect("--version JSON");
    assert_falco_version_keys(&versions);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Falco 0.44.1's version keys (`versions_info::as_json`), exactly, with the engine version
/// Vigil implements.
fn assert_falco_version_keys(versions: &serde_json::Value) {
    let mut keys: Vec<&str> = versions
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {versions}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "default_driver_version",
            "driver_api_version",
            "driver_schema_version",
            "engine_version",
            "engine_version_semver",
            "falco_version",
            "libs_version",
            "plugin_api_version",
            "plugin_versions",
        ],
        "{versions}"
    );
    assert_eq!(
        versions["engine_version_semver"],
        vigil_rules::version_text(vigil_rules::ENGINE_VERSION)
    );
}

/// `evt.cpu` has the capture's value where the event records one and none (`<NA>`) where it
/// does not, and loads without a warning; Falco's DOUBLE `thread.cpu*` fields load with
/// `W_FIELD_NO_VALUE` and never match.
#[test]
fn evt_cpu_replays_the_recorded_cpu_and_thread_cpu_never_matches() {
    let _host = host::shared();
    let dir = scratch("evt-cpu");
    let cap = write(
        &dir,
        "cap.jsonl",
        concat!(
            "{\"vigil_capture\":1,\"start_ts\":1700000000000000000}\n",
            "{\"thread\":{\"tid\":100,\"comm\":\"cat\",\"exe\":\"/usr/bin/cat\"}}\n",
            "{\"tid\":100,\"type\":\"close\",\"res\":0,\"cpu\":1,\"args\":{\"fd\":3}}\n",
            "{\"tid\":100,\"type\":\"close\",\"res\":0,\"args\":{\"fd\":4}}\n",
        ),
    );
    let rules = write(
        &dir,
        "cpu.yaml",
        r#"- rule: On cpu 1
  desc: t
  condition: evt.type = close and evt.cpu = 1
  output: "A cpu=%evt.cpu fd=%fd.num"
  priority: NOTICE
- rule: Cpu unknown
  desc: t
  condition: evt.type = close and not evt.cpu exists
  output: "B cpu=%evt.cpu fd=%fd.num"
  priority: NOTICE
- rule: Busy thread
  desc: t
  condition: evt.type = close and (thread.cpu > 0 or thread.cpu.user >= 1 or thread.cpu.system exists)
  output: "C cpu=%thread.cpu"
  priority: NOTICE
"#,
    );
    let r = rules.display().to_string();
    let out = vigil(&["rules", "validate", &r]);
    let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{all}");
    let warnings: Vec<&str> = all
        .lines()
        .filter(|l| l.contains("W_FIELD_NO_VALUE"))
        .collect();
    // Three in the condition, one in the output.
    assert_eq!(warnings.len(), 4, "one per thread.cpu* use:\n{all}");
    assert!(
        warnings
            .iter()
            .all(|w| w.contains("thread.cpu") && !w.contains("evt.cpu")),
        "{all}"
    );
    let out = vigil(&["replay", &cap.display().to_string(), "-r", &r]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    let alerts: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once(": Notice ").map(|(_, a)| a))
        .collect();
    assert_eq!(alerts, ["A cpu=1 fd=3", "B cpu=<NA> fd=4"], "{stdout}");
    let _ = fs::remove_dir_all(&dir);
}

/// `vigil rules profile CAPTURE`: the rule whose condition costs the most on the capture comes
/// first, with its costliest comparison named under it; `--json` has every rule's exact
/// evaluation count; a capture that cannot be read is invalid input.
#[test]
fn rules_profile_ranks_the_costliest_rule_and_condition() {
    use vigil_event::codec::Capture;
    use vigil_event::{table, Event, Param, Snapshot, ThreadInfo};
    let _host = host::shared();
    let dir = scratch("rules-profile");
    let etype = table::by_name("openat").expect("openat");
    let capture = Capture {
        snapshot: Snapshot {
            threads: vec![ThreadInfo {
                tid: 7,
                pid: 7,
                comm: b"cat".to_vec(),
                ..ThreadInfo::default()
            }],
            ..Snapshot::default()
        },
        events: (0..3000u64)
            .map(|n| Event {
                num: n + 1,
                ts: 1_700_000_000_000_000_000 + n,
                tid: 7,
                pid: 7,
                etype,
                res: 3,
                params: vec![
                    Param::Int(-100),
                    Param::Bytes(format!("/var/lib/app/cache/x{n}/aabbccaabbcc").into_bytes()),
                    Param::Uint(0),
                ],
                truncated: 0,
                cpu: None,
            })
            .collect(),
    };
    let path = dir.join("opens.vcap");
    capture
        .write_binary(fs::File::create(&path).expect("create capture"))
        .expect("write capture");
    let rules = write(
        &dir,
        "rules.yaml",
        "- rule: Cheap check\n  desc: d\n  condition: evt.type = openat and proc.name = nothing\n  output: o\n  priority: INFO\n\
         - rule: Costly check\n  desc: d\n  condition: evt.type = openat and fd.name regex '(/[a-z]+)*/x[0-9]+/(a|b|c)*q' and proc.name = nothing\n  output: o\n  priority: INFO\n\
         - rule: Never evaluated\n  desc: d\n  condition: evt.type = execve\n  output: o\n  priority: INFO\n",
    );
    let (path, rules) = (path.display().to_string(), rules.display().to_string());
    let out = vigil(&["rules", "profile", &path, "-r", &rules, "--top", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let report = text(&out.stdout);
    let lines: Vec<&str> = report.lines().collect();
    assert!(
        lines[0].starts_with("3000 events, 3 rules evaluated 6000 times"),
        "{report}"
    );
    assert!(lines[2].ends_with("  Costly check"), "{report}");
    assert!(lines[3].contains("fd.name regex"), "{report}");
    assert!(
        lines.iter().any(|l| l.ends_with("  Cheap check")),
        "{report}"
    );
    assert_eq!(lines.last(), Some(&"… 1 more rules"), "{report}");

    let out = vigil(&["rules", "profile", &path, "-r", &rules, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("profile JSON");
    let evaluations = |rule: &str| {
        json["rules"]
            .as_array()
            .and_then(|rules| rules.iter().find(|r| r["rule"] == rule))
            .map(|r| r["evaluations"].clone())
            .unwrap_or_else(|| panic!("no {rule}: {json}"))
    };
    assert_eq!(evaluations("Costly check"), 3000);
    assert_eq!(evaluations("Cheap check"), 3000);
    assert_eq!(evaluations("Never evaluated"), 0);
    assert_eq!(json["rules"][0]["rule"], "Costly check", "{json}");

    let missing = dir.join("missing.vcap").display().to_string();
    let out = vigil(&["rules", "profile", &missing, "-r", &rules]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let _ = fs::remove_dir_all(&dir);
}

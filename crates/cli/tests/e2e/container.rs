//! Container detection (root, eBPF, runc; strict in CI): start `vigil watch --json` with
//! Falco's stable rules and Vigil's rules, run each container action of the generator in a
//! real runc container built from a `debootstrap --variant=minbase` root filesystem
//! (`scripts/mk-rootfs.sh`, cached in `$VIGIL_ROOTFS` or `/var/tmp/vigil-rootfs`), and assert
//! the alerts carry the container's identity: `container.id` is the first 12 characters of the
//! 64-hex-digit runc id (Falco's short id), `container.name` the name the bundle announces.

// Tests report skips and progress on stderr.

use std::path::PathBuf;

use vigil_generator::runc::{self, ContainerSpec};
use vigil_generator::Context;

use crate::support::live::{
    alert_matches, expected_fields, missing_requirement, output_field, RuleOutputs, Watch, M,
};
use crate::support::rootfs::runc_missing;
use crate::support::{falco_rules, host, strict, workspace};

fn requirement(ctx: &Context) -> Option<String> {
    if let Some(why) = missing_requirement() {
        return Some(why);
    }
    runc_missing(ctx)
}

#[test]
fn container_actions_alert_with_container_identity() {
    let _host = host::alone(module_path!());
    let mut ctx = Context::from_env();
    ctx.exe = PathBuf::from(env!("CARGO_BIN_EXE_vigil"));
    if let Some(reason) = requirement(&ctx) {
        if strict() {
            panic!("container test: VIGIL_TEST_STRICT=1 but {reason}");
        }
        eprintln!("skipping container_actions_alert_with_container_identity: {reason}");
        return;
    }
    let outputs =
        RuleOutputs::of_files(&[falco_rules(), workspace().join("rules/vigil_rules.yaml")]);
    let watch = Watch::start_with_args(&[
        "-r".into(),
        falco_rules().into_os_string(),
        "-r".into(),
        workspace().join("rules/vigil_rules.yaml").into_os_string(),
        "--rule-matching".into(),
        "all".into(),
    ]);

    let mut failures = Vec::new();
    for action in vigil_generator::registry() {
        let Some(args) = action.container_args() else {
            continue;
        };
        let id = runc::random_id().expect("random id");
        let name = format!("vigil-test-{}", &id[..6]);
        let spec = ContainerSpec {
            id: id.clone(),
            name: name.clone(),
            args: args.iter().map(|s| s.to_string()).collect(),
            bind_exe: Some(ctx.exe.clone()),
            tty: action.container_tty(),
            linger: !action.container_tty(),
        };
        let from = watch.cursor();
        match runc::run_spec(&ctx, &spec) {
            Ok(run) if run.success => {}
            Ok(run) => {
                failures.push(format!(
                    "{}: failed in the container: {}",
                    action.name, run.output
                ));
                continue;
            }
            Err(e) => {
                failures.push(format!("{}: {e}", action.name));
                continue;
            }
        }
        let short = &id[..12];
        let name = name.as_str();
        let inner = action
            .container_args()
            .and_then(|a| a.last().copied())
            .filter(|n| n.starts_with("syscall."));
        let mut fields: Vec<(&str, M<'_>)> = match (inner, action.name) {
            (Some(host_action), _) => expected_fields(host_action),
            (None, "container.TerminalShell") => vec![
                ("proc.name", M::Eq("sh")),
                ("proc.cmdline", M::Eq("sh -c true; sleep 1")),
                ("evt.type", M::OneOf(&["execve", "execveat"])),
            ],
            (None, _) => vec![
                ("fd.name", M::Eq("/etc/shadow")),
                ("proc.name", M::Eq("cat")),
                ("proc.cmdline", M::Eq("cat /etc/shadow")),
            ],
        };
        // Inside the container the agent names the user from the container's own database
        // (tests/e2e/users.rs checks that) and the parent is runc's init or the vigil binary; the
        // container identity is what matters here.
        fields.retain(|(k, _)| !matches!(*k, "container.id" | "proc.pname" | "user.name"));
        fields.push(("container.id", M::Eq(short)));
        fields.push(("container.name", M::Eq(name)));
        for e in action.expected() {
            match watch.wait_for(from, |a| alert_matches(a, e.rule, &fields, &outputs)) {
                Some(alert) => {
                    // Vigil's outputs carry the container fields: they must be there.
                    if e.ruleset == vigil_generator::Ruleset::Vigil {
                        assert_eq!(output_field(&alert, "container.id").as_deref(), Some(short));
                        assert_eq!(
                            output_field(&alert, "container.name").as_deref(),
                            Some(name)
                        );
                    }
                }
                None => failures.push(format!(
                    "{} ({id}): no `{}` alert with {fields:?}; seen: {:?}",
                    action.name,
                    e.rule,
                    watch
                        .alerts_of(from, e.rule)
                        .iter()
                        .map(|a| a["output_fields"].clone())
                        .collect::<Vec<_>>()
                )),
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{}\nvigil watch stderr:\n{}",
        failures.join("\n"),
        watch.stderr()
    );
}

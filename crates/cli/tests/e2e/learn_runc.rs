//! Learned seccomp profiles applied by runc (root, runc, the debootstrap root filesystem of
//! `scripts/mk-rootfs.sh`, cached in `$VIGIL_ROOTFS` or `/var/tmp/vigil-rootfs`; strict in CI):
//! a shell workload's profile is learned by `vigil run --learn` *inside* a runc container
//! (the vigil binary bind-mounted at `/vigil`, the profile written to a bind-mounted host
//! directory), put into another bundle's `linux.seccomp` as written, and the container started
//! with it: the workload prints what it printed without a profile, with runc's filter
//! installed late (`noNewPrivileges: true`) and early (`false`, Docker's and Kubernetes'
//! default); the same workload with one more step (a `mkdir`, never made while learning) gets
//! `EPERM` for that step and still finishes; the exact profile (`--learn-for none`'s first
//! entry alone) does not even let runc start the container.
//!
//! Plus, without root: the `--learn-for` option's effect on the written profile.

// Tests report skips on stderr.

use std::fs;
use std::path::PathBuf;

use serde_json::{json, Value};
use vigil_generator::runc::{self, ContainerRun, ContainerSpec};
use vigil_generator::Context;

use crate::support::rootfs::runc_missing;
use crate::support::{host, skip, vigil, VIGIL};

/// The workload: a few programs of the image; with the argument `extra`, one more step (a
/// `mkdir` in the container's writable `/tmp`) that the learned run never made.
const SCRIPT: &str = "echo 'learned workload'; cat /etc/debian_version; ls /etc/apt; \
     if [ \"$1\" = extra ]; then mkdir /tmp/extra && echo 'mkdir: made'; fi; echo done";

/// Where the learning container writes the profile (a bind mount of a host directory).
const OUT_DIR: &str = "/tmp/out";

/// A host directory removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("vigil-learn-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).expect("scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn spec(args: Vec<String>, bind_exe: Option<PathBuf>) -> ContainerSpec {
    let id = runc::random_id().expect("random id");
    ContainerSpec {
        name: format!("vigil-learn-{}", &id[..6]),
        id,
        args,
        bind_exe,
        tty: false,
        linger: false,
    }
}

fn workload(extra: bool) -> Vec<String> {
    let mut args: Vec<String> = ["/bin/sh", "-c", SCRIPT, "sh"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    if extra {
        args.push("extra".into());
    }
    args
}

/// Runs the workload in a container with `seccomp` (none: no `linux.seccomp`) and runc's
/// `noNewPrivileges` as given.
fn run_workload(
    ctx: &Context,
    extra: bool,
    seccomp: Option<&Value>,
    no_new_privileges: bool,
) -> ContainerRun {
    let s = spec(workload(extra), None);
    runc::run_spec_with(ctx, &s, |config| {
        config["process"]["noNewPrivileges"] = Value::Bool(no_new_privileges);
        if let Some(profile) = seccomp {
            config["linux"]["seccomp"] = profile.clone();
        }
    })
    .unwrap_or_else(|e| panic!("runc: {e}"))
}

fn names(entry: &Value) -> Vec<&str> {
    entry["names"]
        .as_array()
        .unwrap_or_else(|| panic!("no names in {entry}"))
        .iter()
        .map(|v| v.as_str().expect("a syscall name"))
        .collect()
}

#[test]
fn profile_learned_in_the_container_runs_it_under_runc_and_denies_the_rest() {
    let _host = host::shared();
    let test = "profile_learned_in_the_container_runs_it_under_runc_and_denies_the_rest";
    let mut ctx = Context::from_env();
    ctx.exe = PathBuf::from(VIGIL);
    if let Some(reason) = runc_missing(&ctx) {
        skip(test, &reason);
        return;
    }

    // The workload without any profile: its normal output, and the extra step works.
    let plain = run_workload(&ctx, false, None, true);
    assert!(
        plain.success,
        "the workload fails without a profile: {}",
        plain.output
    );
    for line in ["learned workload", "done"] {
        assert!(plain.output.contains(line), "{}", plain.output);
    }
    let plain_extra = run_workload(&ctx, true, None, true);
    assert!(
        plain_extra.success && plain_extra.output.contains("mkdir: made"),
        "mkdir must work in the container without a profile: {}",
        plain_extra.output
    );

    // Learn inside a container of the same image: same binaries, loader, environment, mounts.
    let out = Scratch::new("runc");
    let mut args: Vec<String> = vec![
        "/vigil".into(),
        "run".into(),
        "--learn".into(),
        format!("{OUT_DIR}/profile.json"),
        "--".into(),
    ];
    args.extend(workload(false));
    let learn_spec = spec(args, Some(ctx.exe.clone()));
    let host_out = out.0.to_string_lossy().into_owned();
    let learned = runc::run_spec_with(&ctx, &learn_spec, |config| {
        if let Some(mounts) = config["mounts"].as_array_mut() {
            mounts.push(json!({
                "destination": OUT_DIR, "type": "bind", "source": host_out,
                "options": ["rbind", "rw"]
            }));
        }
    })
    .unwrap_or_else(|e| panic!("runc: {e}"));
    assert!(learned.success, "learning failed: {}", learned.output);
    // Without CAP_SYS_ADMIN here, vigil run's one start-up warning (setuid programs will not
    // gain privileges) is its only line.
    let learned_output: String = learned
        .output
        .lines()
        .filter(|l| !l.starts_with("vigil: warn: setuid and setgid programs"))
        .map(|l| format!("{l}\n"))
        .collect();
    assert_eq!(
        learned_output, plain.output,
        "the workload under vigil run prints what it prints alone"
    );
    let text = fs::read_to_string(out.0.join("profile.json")).expect("the learned profile");
    let profile: Value = serde_json::from_str(&text).expect("the profile is JSON");
    let entries = profile["syscalls"].as_array().expect("syscalls");
    assert_eq!(entries.len(), 2, "workload entry + runc's entry: {text}");
    let workload_names = names(&entries[0]);
    let runtime_names = names(&entries[1]);
    for needed in ["execve", "vfork", "getdents64", "write"] {
        assert!(workload_names.contains(&needed), "{needed}: {text}");
    }
    for runc_only in ["fstatfs", "capset", "setuid"] {
        assert!(runtime_names.contains(&runc_only), "{runc_only}: {text}");
    }
    for never in ["mkdir", "mkdirat"] {
        assert!(
            !workload_names.contains(&never) && !runtime_names.contains(&never),
            "{never} was never made: {text}"
        );
    }

    // (a) The profile as written is the bundle's `linux.seccomp`; runc installs it late
    // (noNewPrivileges) or early (Docker's and Kubernetes' default): same output.
    for nnp in [true, false] {
        let run = run_workload(&ctx, false, Some(&profile), nnp);
        assert!(
            run.success,
            "runc with the learned profile (noNewPrivileges {nnp}): {}",
            run.output
        );
        assert_eq!(
            run.output, plain.output,
            "normal output under the profile (noNewPrivileges {nnp})"
        );
    }

    // (b) The step never learned is denied with the profile's EPERM; the rest still runs.
    for nnp in [true, false] {
        let run = run_workload(&ctx, true, Some(&profile), nnp);
        assert!(
            run.output
                .contains("mkdir: cannot create directory '/tmp/extra': Operation not permitted"),
            "mkdir must get EPERM (noNewPrivileges {nnp}): {}",
            run.output
        );
        assert!(!run.output.contains("mkdir: made"), "{}", run.output);
        assert!(run.success, "the script goes on: {}", run.output);
        let rest: String = run
            .output
            .lines()
            .filter(|l| !l.starts_with("mkdir: "))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_eq!(rest, plain.output, "everything else as without the step");
    }

    // Without runc's entry, runc itself is refused between installing the filter and the
    // entrypoint's execve (runc 1.1: `ensure /proc/self/fd is on procfs`), or, when its Go
    // runtime happens to wake a thread first, the refused futex (EPERM: "returned -1") makes
    // the runtime abort. Either way the profile's EPERM stops runc.
    let mut exact = profile.clone();
    exact["syscalls"] = json!([entries[0].clone()]);
    let run = run_workload(&ctx, false, Some(&exact), true);
    assert!(
        !run.success
            && (run.output.contains("operation not permitted")
                || run.output.contains("futexwakeup addr=") && run.output.contains("returned -1")),
        "the workload's syscalls alone should not let runc start it: {}",
        run.output
    );
    assert!(!run.output.contains("learned workload"), "{}", run.output);
}

#[test]
fn learn_for_selects_the_runtime_entry() {
    let _host = host::shared();
    let out = Scratch::new("flag");
    let path = out.0.join("p.json");
    let p = path.to_str().unwrap();
    let read = || -> Value {
        serde_json::from_str(&fs::read_to_string(&path).expect("profile written"))
            .expect("the profile is JSON")
    };
    let run = vigil(&["run", "--learn", p, "--", "true"]);
    if !run.status.success() {
        let why = format!(
            "vigil run cannot trace here: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        skip("learn_for_selects_the_runtime_entry", &why);
        return;
    }
    // Default: for runc.
    let doc = read();
    let entries = doc["syscalls"].as_array().unwrap();
    assert_eq!(entries.len(), 2, "{doc}");
    let workload = names(&entries[0]);
    let runtime = names(&entries[1]);
    assert!(workload.contains(&"execve"), "{doc}");
    assert!(runtime.contains(&"capset"), "{doc}");
    assert!(
        runtime.iter().all(|n| !workload.contains(n)),
        "the runtime entry adds only what the workload lacks: {doc}"
    );

    let run = vigil(&["run", "--learn", p, "--learn-for", "none", "--", "true"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let doc = read();
    assert_eq!(doc["syscalls"].as_array().unwrap().len(), 1, "{doc}");
    assert!(!names(&doc["syscalls"][0]).contains(&"capset"), "{doc}");

    let run = vigil(&["run", "--learn", p, "--learn-for", "runc", "--", "true"]);
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(read()["syscalls"].as_array().unwrap().len(), 2);

    // Meaningless without --learn, and only known runtimes.
    for bad in [
        &["run", "--learn-for", "runc", "--", "true"][..],
        &["run", "--learn", p, "--learn-for", "crun", "--", "true"][..],
    ] {
        let run = vigil(bad);
        assert_eq!(run.status.code(), Some(2), "{bad:?}");
    }
}

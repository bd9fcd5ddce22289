//! `vigil run` in containers with no added capability (root, runc, the debootstrap root
//! filesystem of `scripts/mk-rootfs.sh`, cached in `$VIGIL_ROOTFS` or `/var/tmp/vigil-rootfs`;
//! strict in CI). Each container runs `/vigil run --stats -- cat /etc/shadow` (the vigil
//! binary bind-mounted) under the essential effect of Docker's default seccomp profile
//! written into the bundle's `linux.seccomp`: without `CAP_SYS_PTRACE`, `process_vm_readv`,
//! `process_vm_writev`, `pidfd_getfd` and `kcmp` fail with `EPERM` (moby's
//! `profiles/seccomp/default.json` allows them only with that capability; `ptrace` itself is
//! allowed on kernels ≥ 4.8). With `noNewPrivileges: false`, as Docker starts containers:
//!
//! - root with Docker's default capabilities, root with none (`--cap-drop ALL`), and user
//!   1000 (in group `shadow`, which may read `/etc/shadow` on Debian): each alerts on the
//!   read with the file, the program and its path (read from `/proc`), reads the workload's
//!   memory through `/proc/PID/mem` (ptrace next), says so at start, and has no read fault;
//! - root dropping to user 1000 before the program (gosu-style): `/proc/PID/mem` of another
//!   user is refused, the reads go through ptrace, still no read fault;
//! - root with Docker's default capabilities and no profile: `process_vm_readv` is chosen;
//! - a profile that also refuses `PTRACE_PEEKDATA` and `preadv` (so `/proc/PID/mem`
//!   cannot be read either): `vigil run` exits with one line naming the cause and the fix,
//!   and the workload never runs;
//! - a profile that refuses `ptrace` itself: `vigil run` says so in one line and runs the
//!   workload under seccomp user notification, which alerts (memory read through
//!   `/proc/PID/mem`); with `--mechanism ptrace` it exits with one line instead.

use std::path::PathBuf;

use serde_json::{json, Value};
use vigil_generator::runc::{self, ContainerRun, ContainerSpec};
use vigil_generator::Context;

use crate::support::rootfs::runc_missing;
use crate::support::{host, skip, VIGIL};

/// Docker's default capabilities (moby `oci/caps/defaults.go`).
const DOCKER_CAPS: &[&str] = &[
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// The `shadow` group of Debian's base passwd (`/etc/group`): may read `/etc/shadow`.
const SHADOW_GID: u32 = 42;

fn context(test: &str) -> Option<Context> {
    let ctx = Context::from_env();
    if let Some(why) = runc_missing(&ctx) {
        skip(test, &why);
        return None;
    }
    Some(ctx)
}

/// The architectures Docker's default profile names on this machine (moby's `archMap`: the
/// native one and its 32-bit and x32 companions).
#[cfg(target_arch = "x86_64")]
const PROFILE_ARCHITECTURES: &[&str] = &["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"];
#[cfg(target_arch = "aarch64")]
const PROFILE_ARCHITECTURES: &[&str] = &["SCMP_ARCH_AARCH64", "SCMP_ARCH_ARM"];

/// The essential effect of Docker's default profile for a container without
/// `CAP_SYS_PTRACE`, plus `extra` refused entries, for this machine's architecture.
fn docker_profile(extra: &[Value]) -> Value {
    let mut syscalls = vec![json!({
        "names": ["process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp"],
        "action": "SCMP_ACT_ERRNO",
        "errnoRet": 1
    })];
    syscalls.extend(extra.iter().cloned());
    json!({
        "defaultAction": "SCMP_ACT_ALLOW",
        "architectures": PROFILE_ARCHITECTURES,
        "syscalls": syscalls
    })
}

struct Container<'a> {
    caps: &'a [&'a str],
    /// `(uid, gid, additional gids)`.
    user: (u32, u32, &'a [u32]),
    seccomp: Option<Value>,
}

/// Runs `vigil run --stats -- cat /etc/shadow` in a container as described.
fn run_in(ctx: &Context, c: &Container<'_>) -> ContainerRun {
    run_with(ctx, c, &[])
}

/// [`run_in`] with more `vigil run` options.
fn run_with(ctx: &Context, c: &Container<'_>, options: &[&str]) -> ContainerRun {
    run_command(ctx, c, options, &["cat", "/etc/shadow"])
}

/// `vigil run --stats OPTIONS -- COMMAND` in a container as described.
fn run_command(
    ctx: &Context,
    c: &Container<'_>,
    options: &[&str],
    command: &[&str],
) -> ContainerRun {
    let id = runc::random_id().expect("random id");
    let mut args = vec!["/vigil", "run", "--stats"];
    args.extend(options);
    args.push("--");
    args.extend(command);
    let spec = ContainerSpec {
        name: format!("vigil-run-{}", &id[..6]),
        id,
        args: args.iter().map(|s| s.to_string()).collect(),
        bind_exe: Some(PathBuf::from(VIGIL)),
        tty: false,
        linger: false,
    };
    runc::run_spec_with(ctx, &spec, |config| {
        let process = &mut config["process"];
        process["noNewPrivileges"] = Value::Bool(false);
        let caps: Vec<Value> = c.caps.iter().map(|s| json!(s)).collect();
        process["capabilities"] = json!({
            "bounding": caps, "effective": caps, "permitted": caps, "inheritable": caps
        });
        let (uid, gid, more) = c.user;
        process["user"] = json!({ "uid": uid, "gid": gid, "additionalGids": more });
        if let Some(env) = process["env"].as_array_mut() {
            env.push(json!("VIGIL_LOG=info"));
        }
        if let Some(profile) = &c.seccomp {
            config["linux"]["seccomp"] = profile.clone();
        }
    })
    .unwrap_or_else(|e| panic!("runc: {e}"))
}

/// The alert on `/etc/shadow`, the method named at start and in the counters, no fault.
fn assert_alerts(what: &str, run: &ContainerRun, method: &str) {
    assert_alerts_with(what, run, method, &["proc_exepath=/usr/bin/cat"]);
}

/// [`assert_alerts`], with `extra` fields in the alert besides the file and the program.
fn assert_alerts_with(what: &str, run: &ContainerRun, method: &str, extra: &[&str]) {
    let out = &run.output;
    assert!(run.success, "{what}: the workload's status: {out}");
    let alert = out
        .lines()
        .find(|l| l.contains("Credential file opened for reading"))
        .unwrap_or_else(|| panic!("{what}: no alert on /etc/shadow in: {out}"));
    for want in ["file=/etc/shadow", "process=cat"].iter().chain(extra) {
        assert!(alert.contains(want), "{what}: `{want}` in {alert}");
    }
    assert!(
        out.lines().any(
            |l| l.contains("vigil: info: reading the workload's memory with")
                && l.contains(&format!("with {method}"))
        ),
        "{what}: the start-up line names {method}: {out}"
    );
    let stats = out
        .lines()
        .find(|l| l.contains("read_faults="))
        .unwrap_or_else(|| panic!("{what}: no --stats line: {out}"));
    assert!(stats.contains("read_faults=0 "), "{what}: {stats}");
    assert!(
        stats.contains(&format!("memory_access={method} ")),
        "{what}: {stats}"
    );
}

#[test]
fn alerts_without_added_capabilities_under_dockers_profile() {
    let _host = host::shared();
    const TEST: &str = "alerts_without_added_capabilities_under_dockers_profile";
    let Some(ctx) = context(TEST) else {
        return;
    };
    let cases: [(&str, Container<'_>); 3] = [
        (
            "root, Docker's default capabilities",
            Container {
                caps: DOCKER_CAPS,
                user: (0, 0, &[]),
                seccomp: Some(docker_profile(&[])),
            },
        ),
        (
            "root, --cap-drop ALL",
            Container {
                caps: &[],
                user: (0, 0, &[]),
                seccomp: Some(docker_profile(&[])),
            },
        ),
        (
            "user 1000 in group shadow",
            Container {
                caps: DOCKER_CAPS,
                user: (1000, 1000, &[SHADOW_GID]),
                seccomp: Some(docker_profile(&[])),
            },
        ),
    ];
    for (what, container) in &cases {
        let run = run_in(&ctx, container);
        assert_alerts(what, &run, "proc-mem");
        let denied = run
            .output
            .lines()
            .find(|l| l.contains("reading the workload's memory with"))
            .unwrap_or_default();
        assert!(
            denied.contains("process_vm_readv: operation not permitted"),
            "{what}: why the fast path was not taken: {denied}"
        );
    }
}

#[test]
fn takes_process_vm_readv_where_it_is_allowed() {
    let _host = host::shared();
    const TEST: &str = "takes_process_vm_readv_where_it_is_allowed";
    let Some(ctx) = context(TEST) else {
        return;
    };
    let run = run_in(
        &ctx,
        &Container {
            caps: DOCKER_CAPS,
            user: (0, 0, &[]),
            seccomp: None,
        },
    );
    assert_alerts(
        "root, default capabilities, no profile",
        &run,
        "process_vm_readv",
    );
}

#[test]
fn exits_before_the_workload_when_no_read_works() {
    let _host = host::shared();
    const TEST: &str = "exits_before_the_workload_when_no_read_works";
    let Some(ctx) = context(TEST) else {
        return;
    };
    // PTRACE_PEEKDATA is request 2; /proc/PID/mem is read with preadv (pread64, which the
    // dynamic loader uses too, stays allowed).
    let profile = docker_profile(&[
        json!({
            "names": ["ptrace"],
            "action": "SCMP_ACT_ERRNO",
            "errnoRet": 1,
            "args": [{ "index": 0, "value": 2, "op": "SCMP_CMP_EQ" }]
        }),
        json!({ "names": ["preadv"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1 }),
    ]);
    let run = run_in(
        &ctx,
        &Container {
            caps: DOCKER_CAPS,
            user: (0, 0, &[]),
            seccomp: Some(profile),
        },
    );
    let out = &run.output;
    assert!(!run.success, "vigil run must fail: {out}");
    assert!(!out.contains("root:"), "the workload never ran: {out}");
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("cannot read the workload's memory"))
        .collect();
    assert_eq!(lines.len(), 1, "one line with the cause: {out}");
    for want in [
        "process_vm_readv: operation not permitted",
        "ptrace: operation not permitted",
        "proc-mem: operation not permitted",
        "CAP_SYS_PTRACE",
    ] {
        assert!(lines[0].contains(want), "`{want}` in {}", lines[0]);
    }
}

#[test]
fn falls_back_to_user_notification_where_ptrace_is_refused() {
    let _host = host::shared();
    const TEST: &str = "falls_back_to_user_notification_where_ptrace_is_refused";
    let Some(ctx) = context(TEST) else {
        return;
    };
    // A policy that refuses ptrace altogether, on top of Docker's.
    let refused = || {
        Some(docker_profile(&[json!({
            "names": ["ptrace"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1
        })]))
    };
    let container = Container {
        caps: DOCKER_CAPS,
        user: (0, 0, &[]),
        seccomp: refused(),
    };
    let run = run_in(&ctx, &container);
    let out = &run.output;
    let warnings: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("ptrace is refused"))
        .collect();
    assert_eq!(warnings.len(), 1, "one line says why: {out}");
    assert!(
        warnings[0].contains("operation not permitted")
            && warnings[0].contains("seccomp user notification"),
        "{}",
        warnings[0]
    );
    // process_vm_readv is refused too (no CAP_SYS_PTRACE): /proc/PID/mem is what is left.
    assert_alerts("ptrace refused", &run, "proc-mem");
    assert!(
        out.contains("with proc-mem (process_vm_readv: operation not permitted)"),
        "no ptrace attachment to read through: {out}"
    );

    // Asked for ptrace alone: one line with the cause, and the workload never runs.
    let run = run_with(&ctx, &container, &["--mechanism", "ptrace"]);
    let out = &run.output;
    assert!(!run.success, "{out}");
    assert!(!out.contains("root:"), "the workload never ran: {out}");
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("cannot trace the workload"))
        .collect();
    assert_eq!(lines.len(), 1, "{out}");
    assert!(lines[0].contains("not permitted"), "{}", lines[0]);
}

#[test]
fn reads_through_ptrace_when_the_workload_changed_user() {
    let _host = host::shared();
    const TEST: &str = "reads_through_ptrace_when_the_workload_changed_user";
    let Some(ctx) = context(TEST) else {
        return;
    };
    // Root with Docker's capabilities drops to user 1000 (group shadow) before the program,
    // as gosu-style entrypoints do: /proc/PID/mem now wants CAP_SYS_PTRACE (another user),
    // while the attachment still reads the (dumpable) program's memory.
    let container = Container {
        caps: DOCKER_CAPS,
        user: (0, 0, &[]),
        seccomp: Some(docker_profile(&[])),
    };
    let run = run_command(
        &ctx,
        &container,
        &[],
        &[
            "setpriv",
            "--reuid=1000",
            "--regid=1000",
            "--groups=42",
            "cat",
            "/etc/shadow",
        ],
    );
    assert_alerts_with("changed user", &run, "proc-mem", &["user_uid=1000"]);
    assert!(
        run.output
            .contains("with proc-mem, then ptrace (process_vm_readv: operation not permitted)"),
        "{}",
        run.output
    );
}

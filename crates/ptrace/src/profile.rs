//! OCI/Docker seccomp profiles: writing the one `--learn` observed (with what the OCI runtime
//! applying it does after installing it, [`Runtime`]), reading one back to apply.
//!
//! Supported when reading: `defaultAction`, `defaultErrnoRet`, and `syscalls[]` entries with
//! `names` (or the legacy `name`), `action` and `errnoRet`. Entries with argument conditions
//! (`args`) or `includes`/`excludes` constraints cannot be expressed by this filter builder and
//! are refused with an error naming the entry, rather than silently applied more loosely.
//! Names unknown on x86-64 are skipped, as runc does.

use serde_json::{json, Value};
use thiserror::Error;
use vigil_event::arch::Arch;
use vigil_event::syscalls_x86_64::SYSCALLS;

use crate::filter;
use crate::sys::SockFilter;

/// Why a profile could not be used.
#[derive(Debug, Error)]
pub enum ProfileError {
    #[error("seccomp profile is not valid JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("seccomp profile: {0}")]
    Invalid(String),
}

/// What a profile does with a syscall.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Allow,
    Errno(u16),
    KillThread,
    KillProcess,
    Log,
}

impl Action {
    fn parse(name: &str, errno: u16) -> Result<Action, ProfileError> {
        Ok(match name {
            "SCMP_ACT_ALLOW" => Action::Allow,
            "SCMP_ACT_ERRNO" => Action::Errno(errno),
            "SCMP_ACT_KILL" | "SCMP_ACT_KILL_THREAD" => Action::KillThread,
            "SCMP_ACT_KILL_PROCESS" => Action::KillProcess,
            "SCMP_ACT_LOG" => Action::Log,
            other => {
                return Err(ProfileError::Invalid(format!(
                    "unsupported action `{other}`"
                )))
            }
        })
    }

    fn ret(self) -> u32 {
        match self {
            Action::Allow => filter::RET_ALLOW,
            Action::Errno(e) => filter::ret_errno(e),
            Action::KillThread => filter::RET_KILL_THREAD,
            Action::KillProcess => filter::RET_KILL_PROCESS,
            Action::Log => filter::RET_LOG,
        }
    }
}

/// A parsed profile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Profile {
    pub default: Action,
    /// `(syscall number, action)`; the first entry for a number wins.
    pub rules: Vec<(u16, Action)>,
}

/// `EPERM`, the errno of `SCMP_ACT_ERRNO` without `errnoRet` (as runc).
const EPERM: u16 = 1;

/// libseccomp's name of an architecture (OCI `architectures`).
fn scmp_arch(arch: Arch) -> &'static str {
    match arch {
        Arch::X86_64 => "SCMP_ARCH_X86_64",
        Arch::Aarch64 => "SCMP_ARCH_AARCH64",
    }
}

fn nr_of(name: &str) -> Option<u16> {
    SYSCALLS.iter().find(|(_, n)| *n == name).map(|(nr, _)| *nr)
}

/// The name of x86-64 syscall `nr`.
pub fn syscall_name(nr: u16) -> Option<&'static str> {
    SYSCALLS
        .iter()
        .find(|(n, _)| *n == nr)
        .map(|(_, name)| *name)
}

fn errno_of(v: Option<&Value>, what: &str) -> Result<u16, ProfileError> {
    match v {
        None | Some(Value::Null) => Ok(EPERM),
        Some(v) => v
            .as_u64()
            .and_then(|n| u16::try_from(n).ok())
            .filter(|&n| n > 0 && n < 4096)
            .ok_or_else(|| ProfileError::Invalid(format!("bad errnoRet in {what}"))),
    }
}

impl Profile {
    /// Parses a profile's JSON text.
    pub fn parse(text: &str) -> Result<Profile, ProfileError> {
        let doc: Value = serde_json::from_str(text)?;
        let obj = doc
            .as_object()
            .ok_or_else(|| ProfileError::Invalid("the top level must be an object".into()))?;
        let default_name = obj
            .get("defaultAction")
            .and_then(Value::as_str)
            .ok_or_else(|| ProfileError::Invalid("missing `defaultAction`".into()))?;
        let default = Action::parse(
            default_name,
            errno_of(obj.get("defaultErrnoRet"), "defaultErrnoRet")?,
        )?;
        if let Some(archs) = obj.get("architectures").and_then(Value::as_array) {
            // The profile names syscalls; the filter numbers them for the machine it runs on.
            let host = scmp_arch(Arch::host());
            if !archs.is_empty() && !archs.iter().any(|a| a.as_str() == Some(host)) {
                return Err(ProfileError::Invalid(format!(
                    "`architectures` does not include {host}"
                )));
            }
        }
        let mut rules = Vec::new();
        let entries = match obj.get("syscalls") {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(a)) => a.as_slice(),
            Some(_) => return Err(ProfileError::Invalid("`syscalls` must be an array".into())),
        };
        for (i, entry) in entries.iter().enumerate() {
            let what = format!("syscalls[{i}]");
            let e = entry
                .as_object()
                .ok_or_else(|| ProfileError::Invalid(format!("{what} must be an object")))?;
            for key in ["args", "includes", "excludes"] {
                let constrained = match e.get(key) {
                    None | Some(Value::Null) => false,
                    Some(Value::Array(a)) => !a.is_empty(),
                    Some(Value::Object(o)) => !o.is_empty(),
                    Some(_) => true,
                };
                if constrained {
                    return Err(ProfileError::Invalid(format!(
                        "{what} uses `{key}`, which is not supported"
                    )));
                }
            }
            let action_name = e
                .get("action")
                .and_then(Value::as_str)
                .ok_or_else(|| ProfileError::Invalid(format!("{what} has no `action`")))?;
            let action = Action::parse(action_name, errno_of(e.get("errnoRet"), &what)?)?;
            let mut names: Vec<&str> = Vec::new();
            if let Some(list) = e.get("names").and_then(Value::as_array) {
                names.extend(list.iter().filter_map(Value::as_str));
            }
            if let Some(name) = e.get("name").and_then(Value::as_str) {
                names.push(name);
            }
            for name in names {
                if let Some(nr) = nr_of(name) {
                    rules.push((nr, action));
                }
            }
        }
        Ok(Profile { default, rules })
    }

    /// The seccomp program enforcing this profile.
    pub(crate) fn to_filter(&self) -> Vec<SockFilter> {
        let entries: Vec<(u16, u32)> = self.rules.iter().map(|&(nr, a)| (nr, a.ret())).collect();
        filter::build(&entries, self.default.ret())
    }
}

/// The OCI runtime a learned profile is written for: what it does itself between installing
/// the container's filter and exec'ing the entrypoint must be allowed too, or the container
/// never starts (runc: `ensure /proc/self/fd is on procfs: operation not permitted`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// Exactly the workload's syscalls (for `vigil run --seccomp-profile`, which installs the
    /// profile in the workload's own `execve`).
    None,
    /// runc (what Docker, containerd and Kubernetes run): [`RUNC_LATE`], [`RUNC_EARLY`] and
    /// [`GO_RUNTIME`].
    Runc,
}

/// runc init's syscalls after it installs the filter when `noNewPrivileges` is true (it then
/// installs it as late as it can): closing its sync and log pipes, opening the exec FIFO
/// through `/proc/self/fd/N` and writing to it, `getpid` for the container state, closing
/// every descriptor not passed to the container (`fstatfs` checks `/proc/self/fd` is procfs,
/// `getdents64` lists it; Go's `os.Open` tries to register the directory with its `epoll`),
/// and the `execve` of the entrypoint. Measured with runc 1.1.5+ds1-1+deb12u1 (Debian 12);
/// see crates/ptrace/README.md.
pub const RUNC_LATE: &[&str] = &[
    "close",
    "epoll_ctl",
    "execve",
    "fstatfs",
    "getdents64",
    "getpid",
    "openat",
    "write",
];

/// What runc init adds when `noNewPrivileges` is false (Docker's and Kubernetes' default):
/// the filter is then installed before the process's credentials are set, so these follow it:
/// dropping capabilities (`capget`, `capset`, `prctl` for the bounding and ambient sets and
/// keep-caps), switching user (`setgroups`, `setgid`, `setuid`), checking the parent
/// (`getppid`), entering the working directory (`chdir`, `getcwd`), finding the entrypoint
/// (`faccessat2`, `newfstatat`) and reading `/proc` (`read`, `fstat`, `fcntl`).
pub const RUNC_EARLY: &[&str] = &[
    "capget",
    "capset",
    "chdir",
    "faccessat2",
    "fcntl",
    "fstat",
    "getcwd",
    "getppid",
    "newfstatat",
    "prctl",
    "read",
    "setgid",
    "setgroups",
    "setuid",
];

/// What the Go runtime under runc init may do on the locked init thread at any point: locks
/// (`futex`, seen), returning from its preemption signal (`rt_sigreturn`, seen), spinning
/// (`nanosleep`, `sched_yield`), growing or trimming the heap (`mmap`, `munmap`, `madvise`),
/// preempting another thread for the collector (`tgkill`) and exiting on an error
/// (`exit_group`). The last six were not seen in the measurements but would fail the start
/// at random if denied.
pub const GO_RUNTIME: &[&str] = &[
    "exit_group",
    "futex",
    "madvise",
    "mmap",
    "munmap",
    "nanosleep",
    "rt_sigreturn",
    "sched_yield",
    "tgkill",
];

impl Runtime {
    /// The syscalls this runtime needs after installing the filter, sorted, without repeats.
    pub fn syscalls(self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = match self {
            Runtime::None => Vec::new(),
            Runtime::Runc => [RUNC_LATE, RUNC_EARLY, GO_RUNTIME].concat(),
        };
        names.sort_unstable();
        names.dedup();
        names
    }
}

/// The profile `--learn` writes: deny (`EPERM`) by default; allow exactly `used` (the first
/// `syscalls` entry), and in a second entry the syscalls `runtime` needs that `used` lacks
/// (none: no second entry). The document is both a Docker profile and an OCI runtime-spec
/// `linux.seccomp` object: it uses only the keys the two formats share.
pub fn learned_profile(used: &[u16], runtime: Runtime) -> String {
    let mut names: Vec<&str> = used.iter().filter_map(|&nr| syscall_name(nr)).collect();
    names.sort_unstable();
    names.dedup();
    let mut entries = vec![json!({"names": names, "action": "SCMP_ACT_ALLOW"})];
    let extra: Vec<&str> = runtime
        .syscalls()
        .into_iter()
        .filter(|n| !names.contains(n))
        .collect();
    if !extra.is_empty() {
        entries.push(json!({"names": extra, "action": "SCMP_ACT_ALLOW"}));
    }
    let doc = json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": EPERM,
        "architectures": [scmp_arch(Arch::host())],
        "syscalls": entries,
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value always serialises");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "x86_64")]
    use crate::filter::tests::run;
    #[cfg(target_arch = "x86_64")]
    use crate::filter::AUDIT_ARCH_X86_64;

    #[test]
    #[cfg(target_arch = "x86_64")] // x86-64 numbers and audit arch
    fn learned_profile_round_trips() {
        let text = learned_profile(&[59, 0, 1, 60, 0, 9999], Runtime::None);
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(doc["architectures"][0], scmp_arch(Arch::host()));
        assert_eq!(
            doc["syscalls"][0]["names"],
            json!(["execve", "exit", "read", "write"])
        );
        let profile = Profile::parse(&text).unwrap();
        assert_eq!(profile.default, Action::Errno(1));
        let prog = profile.to_filter();
        assert_eq!(run(&prog, 0, AUDIT_ARCH_X86_64), filter::RET_ALLOW);
        assert_eq!(run(&prog, 59, AUDIT_ARCH_X86_64), filter::RET_ALLOW);
        assert_eq!(run(&prog, 2, AUDIT_ARCH_X86_64), filter::ret_errno(1));
        assert_eq!(doc["syscalls"].as_array().unwrap().len(), 1, "{text}");
    }

    #[test]
    fn runtime_sets_name_known_syscalls() {
        let runc = Runtime::Runc.syscalls();
        assert!(Runtime::None.syscalls().is_empty());
        for name in RUNC_LATE.iter().chain(RUNC_EARLY).chain(GO_RUNTIME) {
            assert!(nr_of(name).is_some(), "`{name}` is no x86-64 syscall");
            assert!(runc.contains(name), "{name} missing from {runc:?}");
        }
        let mut sorted = runc.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(runc, sorted);
        // What runc 1.1 failed on with the exact profile, and what it is never given.
        for needed in ["fstatfs", "getdents64", "capset", "setuid", "execve"] {
            assert!(runc.contains(&needed), "{needed}");
        }
        for never in [
            "mkdir", "chmod", "unshare", "mount", "ptrace", "clone", "socket",
        ] {
            assert!(
                !runc.contains(&never),
                "{never} is not runc's after the filter"
            );
        }
        assert_eq!(runc.len(), 31, "the README counts 31: {runc:?}");
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // x86-64 numbers and audit arch
    fn learned_profile_for_runc_adds_only_what_the_workload_lacks() {
        // read, write, close, execve, exit_group, fstatfs
        let used = [0, 1, 3, 59, 231, 138];
        let text = learned_profile(&used, Runtime::Runc);
        let doc: Value = serde_json::from_str(&text).unwrap();
        let entries = doc["syscalls"].as_array().unwrap();
        assert_eq!(entries.len(), 2, "{text}");
        assert_eq!(
            entries[0]["names"],
            json!(["close", "execve", "exit_group", "fstatfs", "read", "write"]),
            "the first entry is the workload's, exactly"
        );
        let extra: Vec<&str> = entries[1]["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let expected: Vec<&str> = Runtime::Runc
            .syscalls()
            .into_iter()
            .filter(|n| !["close", "execve", "exit_group", "fstatfs", "read", "write"].contains(n))
            .collect();
        assert_eq!(extra, expected);
        for e in entries {
            assert_eq!(e["action"], "SCMP_ACT_ALLOW");
        }
        // Applied by vigil itself: the union is allowed, anything else fails with EPERM.
        let prog = Profile::parse(&text).unwrap().to_filter();
        for name in Runtime::Runc.syscalls() {
            let nr = nr_of(name).unwrap();
            assert_eq!(
                run(&prog, u32::from(nr), AUDIT_ARCH_X86_64),
                filter::RET_ALLOW,
                "{name}"
            );
        }
        let mkdir = nr_of("mkdir").unwrap();
        assert_eq!(
            run(&prog, u32::from(mkdir), AUDIT_ARCH_X86_64),
            filter::ret_errno(1)
        );
        // A workload that already makes every runtime syscall gets no second entry.
        let all: Vec<u16> = Runtime::Runc
            .syscalls()
            .iter()
            .map(|n| nr_of(n).unwrap())
            .collect();
        let doc: Value = serde_json::from_str(&learned_profile(&all, Runtime::Runc)).unwrap();
        assert_eq!(doc["syscalls"].as_array().unwrap().len(), 1);
    }

    #[test]
    fn learned_profile_is_an_oci_linux_seccomp_object() {
        // The OCI runtime-spec `linux.seccomp` keys (config-linux.md); Docker's profile
        // format accepts the same document (its `archMap` and `comment` are not used).
        const OCI_TOP: &[&str] = &[
            "defaultAction",
            "defaultErrnoRet",
            "architectures",
            "flags",
            "listenerPath",
            "listenerMetadata",
            "syscalls",
        ];
        const OCI_SYSCALL: &[&str] = &["names", "action", "errnoRet", "args"];
        const ACTIONS: &[&str] = &[
            "SCMP_ACT_KILL",
            "SCMP_ACT_KILL_PROCESS",
            "SCMP_ACT_KILL_THREAD",
            "SCMP_ACT_TRAP",
            "SCMP_ACT_ERRNO",
            "SCMP_ACT_TRACE",
            "SCMP_ACT_ALLOW",
            "SCMP_ACT_LOG",
            "SCMP_ACT_NOTIFY",
        ];
        for runtime in [Runtime::None, Runtime::Runc] {
            let doc: Value = serde_json::from_str(&learned_profile(&[0, 1, 59], runtime)).unwrap();
            let top = doc.as_object().unwrap();
            for key in top.keys() {
                assert!(OCI_TOP.contains(&key.as_str()), "`{key}` is not OCI");
            }
            assert!(ACTIONS.contains(&top["defaultAction"].as_str().unwrap()));
            assert!(top["defaultErrnoRet"].as_u64().is_some());
            for e in top["syscalls"].as_array().unwrap() {
                let e = e.as_object().unwrap();
                for key in e.keys() {
                    assert!(OCI_SYSCALL.contains(&key.as_str()), "`{key}` is not OCI");
                }
                let names = e["names"].as_array().unwrap();
                assert!(!names.is_empty(), "OCI wants at least one name");
                assert!(names.iter().all(Value::is_string));
                assert!(ACTIONS.contains(&e["action"].as_str().unwrap()));
            }
        }
    }

    #[test]
    fn docker_style_entries_and_errors() {
        let p = Profile::parse(
            r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[
                {"names":["mkdir","no_such_call"],"action":"SCMP_ACT_ERRNO","errnoRet":13},
                {"name":"ptrace","action":"SCMP_ACT_KILL_PROCESS","args":[]}]}"#,
        )
        .unwrap();
        assert_eq!(p.default, Action::Allow);
        assert_eq!(
            p.rules,
            vec![(83, Action::Errno(13)), (101, Action::KillProcess)]
        );
        for bad in [
            "[]",
            "{}",
            r#"{"defaultAction":"SCMP_ACT_TRAP"}"#,
            // Only another architecture's (a profile for x86-64 and aarch64 loads on both).
            match Arch::host() {
                Arch::X86_64 => {
                    r#"{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_AARCH64"]}"#
                }
                Arch::Aarch64 => {
                    r#"{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_X86_64"]}"#
                }
            },
            r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["clone"],"action":"SCMP_ACT_ALLOW","args":[{"index":0}]}]}"#,
            r#"{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":-1}"#,
            "not json",
        ] {
            assert!(Profile::parse(bad).is_err(), "accepted {bad}");
        }
    }
}

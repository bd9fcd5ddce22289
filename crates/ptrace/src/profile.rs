//! OCI/Docker seccomp profiles: writing the one `--learn` observed, reading one back to apply.
//!
//! Supported when reading: `defaultAction`, `defaultErrnoRet`, and `syscalls[]` entries with
//! `names` (or the legacy `name`), `action` and `errnoRet`. Entries with argument conditions
//! (`args`) or `includes`/`excludes` constraints cannot be expressed by this filter builder and
//! are refused with an error naming the entry, rather than silently applied more loosely.
//! Names unknown on x86-64 are skipped, as runc does.

use serde_json::{json, Value};
use thiserror::Error;
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
            let x86_64 = archs.iter().any(|a| a.as_str() == Some("SCMP_ARCH_X86_64"));
            if !archs.is_empty() && !x86_64 {
                return Err(ProfileError::Invalid(
                    "`architectures` does not include SCMP_ARCH_X86_64".into(),
                ));
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

/// The profile `--learn` writes: deny (`EPERM`) by default, allow exactly `used`.
pub fn learned_profile(used: &[u16]) -> String {
    let mut names: Vec<&str> = used.iter().filter_map(|&nr| syscall_name(nr)).collect();
    names.sort_unstable();
    names.dedup();
    let doc = json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": EPERM,
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": [{"names": names, "action": "SCMP_ACT_ALLOW"}],
    });
    let mut text = serde_json::to_string_pretty(&doc).expect("a JSON value always serialises");
    text.push('\n');
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::tests::run;
    use crate::filter::AUDIT_ARCH_X86_64;

    #[test]
    fn learned_profile_round_trips() {
        let text = learned_profile(&[59, 0, 1, 60, 0, 9999]);
        let doc: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(doc["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(doc["architectures"][0], "SCMP_ARCH_X86_64");
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
            r#"{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_AARCH64"]}"#,
            r#"{"defaultAction":"SCMP_ACT_ALLOW","syscalls":[{"names":["clone"],"action":"SCMP_ACT_ALLOW","args":[{"index":0}]}]}"#,
            r#"{"defaultAction":"SCMP_ACT_ERRNO","defaultErrnoRet":-1}"#,
            "not json",
        ] {
            assert!(Profile::parse(bad).is_err(), "accepted {bad}");
        }
    }
}

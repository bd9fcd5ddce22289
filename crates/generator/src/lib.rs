//! `vigil-generator`: a registry of **actions** that perform the real system calls Falco's
//! stable rules and Vigil's default rules detect (read `/etc/shadow` from an untrusted program,
//! spawn a shell below a web-server-named process, execute from a memfd, attach with ptrace …),
//! for live tests, demos and benchmarks (`vigil generate`).
//!
//! Each [`Action`] names the rules it is expected to trigger ([`Expect`]), says whether it needs
//! root or a runc container, and cleans up after itself (temporary directories, files created
//! for the test, loopback-only sockets). Actions run in the calling process; callers that want a
//! clean process identity (the CLI) run each one in a child process of their own.
//!
//! Each action also says how it behaves under `vigil run`, whose tracer makes every process
//! of the action a tracee ([`UnderRun`]): the same, or refused by the kernel there (ptrace of an
//! already traced task) while the attempt still alerts. `vigil generate list --json` shows it.
//!
//! Container actions (`container.*`) run a host action inside a `runc` container built from a
//! local root filesystem (`scripts/mk-rootfs.sh`), with the calling binary bind-mounted in.
//!
//! This crate knows nothing about rules evaluation, events or the agent: it only acts.

mod actions;
pub mod runc;
mod sys;
mod util;

use std::fmt;
use std::path::PathBuf;

pub use runc::{ContainerRun, ContainerSpec};

/// An action failed (or could not be selected).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("invalid action pattern `{pattern}`: {source}")]
    Pattern {
        pattern: String,
        #[source]
        source: regex::Error,
    },
    #[error("no action is named `{0}`")]
    UnknownAction(String),
    #[error("action {action}: {what}: {source}")]
    Io {
        action: &'static str,
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("action {action}: {what}: {source}")]
    Sys {
        action: &'static str,
        what: String,
        #[source]
        source: nix::Error,
    },
    #[error("action {action}: {0}", .what)]
    Failed { action: &'static str, what: String },
    #[error("container: {0}")]
    Container(String),
}

/// The rules file an expectation refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ruleset {
    /// Falco's stable rules (`falco_rules.yaml`), loaded unchanged.
    FalcoStable,
    /// Vigil's embedded default ruleset (`rules/vigil_rules.yaml`).
    Vigil,
}

impl fmt::Display for Ruleset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Ruleset::FalcoStable => "falco",
            Ruleset::Vigil => "vigil",
        })
    }
}

/// Where a rule can fire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// On the host and in containers.
    Any,
    /// Only when the action runs inside a container (the rule tests `container.id != host`).
    Container,
}

/// A rule an action is expected to trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Expect {
    pub ruleset: Ruleset,
    pub rule: &'static str,
    pub scope: Scope,
}

const fn falco(rule: &'static str) -> Expect {
    Expect {
        ruleset: Ruleset::FalcoStable,
        rule,
        scope: Scope::Any,
    }
}
const fn falco_in_container(rule: &'static str) -> Expect {
    Expect {
        ruleset: Ruleset::FalcoStable,
        rule,
        scope: Scope::Container,
    }
}
const fn vigil(rule: &'static str) -> Expect {
    Expect {
        ruleset: Ruleset::Vigil,
        rule,
        scope: Scope::Any,
    }
}
const fn vigil_in_container(rule: &'static str) -> Expect {
    Expect {
        ruleset: Ruleset::Vigil,
        rule,
        scope: Scope::Container,
    }
}

/// How an action behaves under `vigil run` (the ptrace driver: the action and every process it
/// starts are the tracer's tracees) compared with an agent that does not trace (`vigil watch`).
///
/// The live test `crates/cli/tests/e2e/generate_run.rs` runs every action under `vigil run` and
/// holds it to this: a [`UnderRun::Same`] action must succeed and raise its expected rules; a
/// [`UnderRun::RefusedButAlerts`] action must *fail* (so the note stays true) and still raise
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnderRun {
    /// Runs and alerts as under `vigil watch`.
    Same,
    /// The kernel refuses the action's system call under a tracer, so the action reports a
    /// failure; the attempt is still captured and the expected rules fire all the same. The
    /// text says why.
    RefusedButAlerts(&'static str),
}

impl UnderRun {
    /// `same` or `refused_but_alerts` (the `outcome` of `vigil generate list --json`).
    pub fn outcome(&self) -> &'static str {
        match self {
            UnderRun::Same => "same",
            UnderRun::RefusedButAlerts(_) => "refused_but_alerts",
        }
    }

    /// Why the action differs under `vigil run`, if it does.
    pub fn reason(&self) -> Option<&'static str> {
        match self {
            UnderRun::Same => None,
            UnderRun::RefusedButAlerts(why) => Some(why),
        }
    }
}

/// Why a ptrace request fails in a process that is already traced.
pub(crate) const ALREADY_TRACED: &str = "a task has one tracer: under `vigil run` the action's \
     processes are already traced by Vigil, so PTRACE_TRACEME and PTRACE_ATTACH of a traced \
     task fail with EPERM; the ptrace call is still captured at its entry and the rules, which \
     test the request and not its result, fire";

/// What an action needs and where it runs.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// Runs in the calling process (and children it spawns).
    Host(fn(&Context) -> Result<String, Error>),
    /// Runs the named host action inside a runc container.
    InContainer(&'static str),
    /// Runs this command inside a runc container.
    ContainerCommand(&'static [&'static str]),
    /// Runs this command inside a runc container with a pseudo-terminal as its stdio.
    ContainerTty(&'static [&'static str]),
}

/// One action.
#[derive(Clone, Copy, Debug)]
pub struct Action {
    /// `category.Name`, e.g. `syscall.ReadSensitiveFileUntrusted`.
    pub name: &'static str,
    pub description: &'static str,
    /// Needs root (for the system call to succeed or to touch root-owned paths).
    pub needs_root: bool,
    /// Takes several seconds (waits for a process to stop being "new").
    pub slow: bool,
    /// How it behaves under `vigil run` (ptrace) compared with `vigil watch`.
    pub under_run: UnderRun,
    /// A check of the kernel: `Some(reason)` when a kernel driver (`vigil watch`) cannot
    /// capture the action's system call here (e.g. no tracepoint for a syscall the kernel does
    /// not implement). A tracer sees every attempt at syscall entry, so `vigil run` ignores it
    /// ([`Action::unavailable_under_run`]).
    check: Option<fn() -> Option<String>>,
    expects: &'static [Expect],
    kind: Kind,
}

/// What actions need from their environment.
#[derive(Clone, Debug)]
pub struct Context {
    /// The `vigil` binary (bind-mounted into containers to run host actions there).
    pub exe: PathBuf,
    /// A runc bundle directory holding `rootfs/` (see `scripts/mk-rootfs.sh`).
    pub rootfs_dir: PathBuf,
    /// The `runc` binary.
    pub runc: PathBuf,
}

/// Default location of the container root filesystem cache (`$VIGIL_ROOTFS` overrides).
pub const DEFAULT_ROOTFS_DIR: &str = "/var/tmp/vigil-rootfs";

impl Context {
    /// The running executable, `$VIGIL_ROOTFS` (or [`DEFAULT_ROOTFS_DIR`]) and `runc` on `PATH`.
    pub fn from_env() -> Context {
        Context {
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("vigil")),
            rootfs_dir: std::env::var_os("VIGIL_ROOTFS")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from(DEFAULT_ROOTFS_DIR)),
            runc: PathBuf::from("runc"),
        }
    }
}

impl Action {
    /// The part before the dot (`syscall`, `container`).
    pub fn category(&self) -> &'static str {
        self.name.split_once('.').map_or("", |(c, _)| c)
    }

    /// Whether it runs inside a runc container.
    pub fn needs_runc(&self) -> bool {
        !matches!(self.kind, Kind::Host(_))
    }

    /// The rules expected to fire when this action runs where it runs (host actions: rules of
    /// scope [`Scope::Any`]; container actions: all of them).
    pub fn expected(&self) -> Vec<Expect> {
        let in_container = self.needs_runc();
        self.expects
            .iter()
            .filter(|e| in_container || e.scope == Scope::Any)
            .copied()
            .collect()
    }

    /// Every rule this action can trigger, in any context.
    pub fn all_expects(&self) -> &'static [Expect] {
        self.expects
    }

    /// For container actions: the command run inside the container (`/vigil` is the calling
    /// binary, bind-mounted), so callers can run it under a container id of their choosing
    /// with [`runc::run_spec`].
    pub fn container_args(&self) -> Option<Vec<&'static str>> {
        match self.kind {
            Kind::Host(_) => None,
            Kind::InContainer(inner) => Some(vec!["/vigil", "generate", "run", "--exact", inner]),
            Kind::ContainerCommand(args) | Kind::ContainerTty(args) => Some(args.to_vec()),
        }
    }

    /// For container actions: whether the container's stdio is a pseudo-terminal.
    pub fn container_tty(&self) -> bool {
        matches!(self.kind, Kind::ContainerTty(_))
    }

    /// Why this action cannot run or be captured here by a kernel driver (not root, no runc,
    /// no root filesystem, a kernel check), if so.
    pub fn unavailable(&self, ctx: &Context) -> Option<String> {
        self.unavailable_under_run(ctx)
            .or_else(|| self.check.and_then(|check| check()))
    }

    /// Whether this process is being traced (`TracerPid` in `/proc/self/status` is not 0), as
    /// under `vigil run`, `strace` or a debugger: then [`UnderRun::RefusedButAlerts`] actions
    /// fail by design.
    pub fn traced() -> bool {
        vigil_procfs::own_status()
            .ok()
            .and_then(|s| s.tracer_pid)
            .is_some_and(|pid| pid != 0)
    }

    /// Why this action cannot run under `vigil run` here (not root, no runc, no root
    /// filesystem), if so: [`Action::unavailable`] without the kernel-capture check.
    pub fn unavailable_under_run(&self, ctx: &Context) -> Option<String> {
        if (self.needs_root || self.needs_runc()) && !nix::unistd::geteuid().is_root() {
            return Some("needs root".into());
        }
        if self.needs_runc() {
            return runc::unavailable(ctx);
        }
        None
    }

    /// The object `vigil generate list --json` prints for this action (the rule names per
    /// ruleset are the shape `vigil generate bench` reads).
    pub fn to_json(&self, ctx: &Context) -> serde_json::Value {
        let expects: Vec<_> = self
            .all_expects()
            .iter()
            .map(|e| {
                serde_json::json!({
                    "ruleset": e.ruleset.to_string(),
                    "rule": e.rule,
                    "container_only": e.scope == Scope::Container,
                })
            })
            .collect();
        let rules_of = |set: Ruleset| -> Vec<&str> {
            self.all_expects()
                .iter()
                .filter(|e| e.ruleset == set)
                .map(|e| e.rule)
                .collect()
        };
        serde_json::json!({
            "name": self.name,
            "rules_stable": rules_of(Ruleset::FalcoStable),
            "rules_default": rules_of(Ruleset::Vigil),
            "description": self.description,
            "needs_root": self.needs_root,
            "needs_runc": self.needs_runc(),
            "slow": self.slow,
            "under_run": {
                "outcome": self.under_run.outcome(),
                "reason": self.under_run.reason(),
            },
            "expects": expects,
            "unavailable": self.unavailable(ctx),
            "unavailable_under_run": self.unavailable_under_run(ctx),
        })
    }

    /// The entry `vigil generate list` prints for this action, each line ending in a newline.
    pub fn to_text(&self, ctx: &Context) -> String {
        let mut needs = Vec::new();
        if self.needs_root {
            needs.push("root");
        }
        if self.needs_runc() {
            needs.push("runc");
        }
        if self.slow {
            needs.push("slow");
        }
        let mut text = self.name.to_string();
        if !needs.is_empty() {
            text.push_str(&format!(" [{}]", needs.join(", ")));
        }
        text.push_str(&format!("\n    {}\n", self.description));
        for e in self.expected() {
            text.push_str(&format!("    -> {}: {}\n", e.ruleset, e.rule));
        }
        if let Some(why) = self.under_run.reason() {
            text.push_str(&format!(
                "    under `vigil run`: the action fails, the rules still fire ({why})\n"
            ));
        }
        if let Some(why) = self.unavailable(ctx) {
            text.push_str(&format!("    (cannot run here: {why})\n"));
        }
        text
    }

    /// Performs the action; returns a one-line account of what it did.
    pub fn run(&self, ctx: &Context) -> Result<String, Error> {
        match self.kind {
            Kind::Host(f) => f(ctx),
            Kind::InContainer(inner) => {
                let args = ["/vigil", "generate", "run", "--exact", inner];
                let run = runc::run(ctx, self.name, &args, true, false)?;
                if !run.success {
                    return Err(Error::Container(format!(
                        "{} in container {} failed: {}",
                        inner,
                        run.id,
                        run.output.trim()
                    )));
                }
                Ok(format!(
                    "ran {inner} in runc container {} ({}): {}",
                    run.id,
                    run.name,
                    run.output.trim()
                ))
            }
            Kind::ContainerCommand(args) | Kind::ContainerTty(args) => {
                let tty = matches!(self.kind, Kind::ContainerTty(_));
                let run = runc::run(ctx, self.name, args, false, tty)?;
                Ok(format!(
                    "ran `{}` in runc container {} ({}), {}",
                    args.join(" "),
                    run.id,
                    run.name,
                    if run.success {
                        "succeeded".to_string()
                    } else {
                        format!("failed: {}", run.output.trim())
                    }
                ))
            }
        }
    }
}

/// The uid and gid of the user `name` in `/etc/passwd` (`vigil generate run --as-user`);
/// `Ok(None)` when there is no such user.
pub fn user_ids(name: &str) -> std::io::Result<Option<(u32, u32)>> {
    let passwd = std::fs::read_to_string("/etc/passwd")?;
    Ok(passwd.lines().find_map(|l| {
        let mut f = l.split(':');
        let user = f.next()?;
        let _ = f.next()?;
        let uid = f.next()?.parse().ok()?;
        let gid = f.next()?.parse().ok()?;
        (user == name).then_some((uid, gid))
    }))
}

/// Every action, in a stable order.
pub fn registry() -> &'static [Action] {
    actions::ACTIONS
}

/// The action named exactly `name`.
pub fn find(name: &str) -> Result<&'static Action, Error> {
    registry()
        .iter()
        .find(|a| a.name == name)
        .ok_or_else(|| Error::UnknownAction(name.into()))
}

/// The actions whose name matches the regular expression (unanchored, like Falco's
/// event-generator); an empty pattern selects all.
pub fn select(pattern: &str) -> Result<Vec<&'static Action>, Error> {
    let re = regex::Regex::new(pattern).map_err(|source| Error::Pattern {
        pattern: pattern.into(),
        source,
    })?;
    Ok(registry().iter().filter(|a| re.is_match(a.name)).collect())
}

/// Tests that create temporary directories, or check that none is left behind, run one at a
/// time (a concurrent test's directory would look like a leftover).
#[cfg(test)]
pub(crate) static TEMP_DIRS: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::Path;

    #[test]
    fn users_from_passwd() {
        assert_eq!(user_ids("root").unwrap(), Some((0, 0)));
        assert_eq!(user_ids("no-such-user-here").unwrap(), None);
    }

    fn rule_names(path: &Path) -> HashSet<String> {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        text.lines()
            .filter_map(|l| l.strip_prefix("- rule: "))
            .map(|r| r.trim().to_string())
            .collect()
    }

    fn workspace() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn names_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for a in registry() {
            assert!(seen.insert(a.name), "duplicate action {}", a.name);
            assert!(
                ["syscall", "container"].contains(&a.category()),
                "{}: unknown category",
                a.name
            );
            assert!(!a.description.is_empty(), "{}: no description", a.name);
            assert!(!a.expects.is_empty(), "{}: expects no rule", a.name);
            if let Kind::InContainer(inner) = a.kind {
                let inner = find(inner).unwrap();
                assert!(matches!(inner.kind, Kind::Host(_)), "{}", a.name);
                assert_eq!(
                    a.expects, inner.expects,
                    "{} repeats its host action",
                    a.name
                );
            }
        }
    }

    #[test]
    fn expected_rules_exist_in_their_files() {
        let falco = rule_names(&workspace().join("../shared/falco-rules/falco_rules.yaml"));
        let vigil = rule_names(&workspace().join("rules/vigil_rules.yaml"));
        assert!(falco.len() > 20 && vigil.len() > 20);
        for a in registry() {
            for e in a.expects {
                let names = match e.ruleset {
                    Ruleset::FalcoStable => &falco,
                    Ruleset::Vigil => &vigil,
                };
                assert!(
                    names.contains(e.rule),
                    "{}: no {} rule {:?}",
                    a.name,
                    e.ruleset,
                    e.rule
                );
            }
        }
    }

    #[test]
    fn expected_depends_on_where_the_action_runs() {
        let host = find("syscall.PacketSocket").unwrap();
        assert!(host.expected().is_empty());
        let inside = find("container.PacketSocket").unwrap();
        assert_eq!(inside.expected().len(), 2);
        let read = find("syscall.CreateSymlinkOverSensitiveFiles").unwrap();
        assert_eq!(read.expected().len(), 2);
    }

    #[test]
    fn under_run_differences_are_explained() {
        for a in registry() {
            if let Some(why) = a.under_run.reason() {
                assert!(why.len() > 40, "{}: explain the difference", a.name);
                assert!(
                    !a.needs_runc(),
                    "{}: container actions run the same",
                    a.name
                );
            }
        }
        for name in ["syscall.PtraceAttach", "syscall.PtraceAntiDebug"] {
            let a = find(name).unwrap();
            assert_eq!(a.under_run.outcome(), "refused_but_alerts", "{name}");
            assert!(a.under_run.reason().unwrap().contains("EPERM"), "{name}");
        }
        let same = find("syscall.ReadSensitiveFileUntrusted").unwrap();
        assert_eq!(same.under_run, UnderRun::Same);
        assert_eq!(same.under_run.reason(), None);
    }

    #[test]
    fn tracer_detection_reads_proc() {
        // The test harness is normally not traced; when it is (strace, gdb), the answer must
        // agree with /proc.
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let tracer = status
            .lines()
            .find_map(|l| l.strip_prefix("TracerPid:"))
            .unwrap()
            .trim()
            .to_string();
        assert_eq!(Action::traced(), tracer != "0");
    }

    #[test]
    fn selection_by_regex() {
        assert_eq!(select("").unwrap().len(), registry().len());
        let ptrace = select("(?i)ptrace").unwrap();
        assert!(ptrace
            .iter()
            .all(|a| a.name.to_lowercase().contains("ptrace")));
        assert!(ptrace.len() >= 2);
        assert!(select("^nothing$").unwrap().is_empty());
        assert!(matches!(select("("), Err(Error::Pattern { .. })));
        assert!(matches!(find("nope"), Err(Error::UnknownAction(_))));
    }
}

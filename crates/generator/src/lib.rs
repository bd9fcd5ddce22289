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
    /// A check of the machine: `Some(reason)` when the action cannot work here.
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

    /// Why this action cannot run here (not root, no runc, no root filesystem), if so.
    pub fn unavailable(&self, ctx: &Context) -> Option<String> {
        if (self.needs_root || self.needs_runc()) && !nix::unistd::geteuid().is_root() {
            return Some("needs root".into());
        }
        if self.needs_runc() {
            return runc::unavailable(ctx);
        }
        self.check.and_then(|check| check())
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::Path;

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

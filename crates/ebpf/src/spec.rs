//! What the kernel side captures for each syscall, and where each schema parameter comes from.
//!
//! One table ([`DEFS`]) says, per syscall and in the order of the event type's schema
//! (`vigil_event::table`), where each parameter's value is found in a record: a raw argument
//! register, a user string the kernel copied, a socket address, a socket tuple… The kernel's
//! per-syscall capture spec ([`CaptureSpec`], the `specs` BPF map) is derived from the same
//! table, so the two cannot disagree.

use std::sync::OnceLock;

use vigil_capture::InterestSet;
use vigil_event::{table, EventType};

/// Where one schema parameter's value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    /// Argument register `n`, converted per the parameter's kind.
    Arg(u8),
    /// The path string argument `n` points to (up to 4096 bytes).
    Str(u8),
    /// A short string argument (names, module parameters; up to 256 bytes).
    Short(u8),
    /// The `struct sockaddr` argument `n` points to (its length is argument `n + 1`).
    Addr(u8),
    /// `int[2]` at argument `n` (pipe fds): element `k`.
    Pair(u8, u8),
    /// `struct open_how` at argument 2 (`openat2`): `u64` field `k`.
    How(u8),
    /// The socket tuple of the fd in argument 0 (local → remote).
    Tuple,
    /// The socket tuple of the returned fd (`accept`: remote → local).
    TupleRes,
    /// The total length of the iovecs of the `struct msghdr` at argument 1 (`sendmsg`); the
    /// kernel also copies its `msg_name`, which completes an unconnected socket's tuple.
    MsgSize,
    /// The parameter is not captured (`<NA>`).
    Absent,
}

use Src::{Absent, Addr, Arg, How, MsgSize, Pair, Short, Str, Tuple, TupleRes};

/// One syscall's parameter sources, in schema order (exec calls: the head only; the tail is
/// the process image, read by the exec tracepoint).
#[derive(Debug)]
pub struct SyscallDef {
    pub name: &'static str,
    pub params: &'static [Src],
}

const fn d(name: &'static str, params: &'static [Src]) -> SyscallDef {
    SyscallDef { name, params }
}

/// Every syscall with a detailed schema.
pub const DEFS: &[SyscallDef] = &[
    d("open", &[Str(0), Arg(1), Arg(2), Absent, Absent]),
    d("openat", &[Arg(0), Str(1), Arg(2), Arg(3), Absent, Absent]),
    d(
        "openat2",
        &[Arg(0), Str(1), How(0), How(1), How(2), Absent, Absent],
    ),
    d("creat", &[Str(0), Arg(1), Absent, Absent]),
    d("close", &[Arg(0)]),
    d("dup", &[Arg(0)]),
    d("dup2", &[Arg(0), Arg(1)]),
    d("dup3", &[Arg(0), Arg(1), Arg(2)]),
    d("fcntl", &[Arg(0), Arg(1)]),
    d("pipe", &[Pair(0, 0), Pair(0, 1), Absent]),
    d("pipe2", &[Pair(0, 0), Pair(0, 1), Absent, Arg(1)]),
    d("memfd_create", &[Short(0), Arg(1)]),
    d("link", &[Str(0), Str(1)]),
    d("linkat", &[Arg(0), Str(1), Arg(2), Str(3), Arg(4)]),
    d("symlink", &[Str(0), Str(1)]),
    d("symlinkat", &[Str(0), Arg(1), Str(2)]),
    d("rename", &[Str(0), Str(1)]),
    d("renameat", &[Arg(0), Str(1), Arg(2), Str(3)]),
    d("renameat2", &[Arg(0), Str(1), Arg(2), Str(3), Arg(4)]),
    d("unlink", &[Str(0)]),
    d("unlinkat", &[Arg(0), Str(1), Arg(2)]),
    d("mkdir", &[Str(0), Arg(1)]),
    d("mkdirat", &[Arg(0), Str(1), Arg(2)]),
    d("rmdir", &[Str(0)]),
    d("chmod", &[Str(0), Arg(1)]),
    d("fchmod", &[Arg(0), Arg(1)]),
    d("fchmodat", &[Arg(0), Str(1), Arg(2)]),
    d("chdir", &[Str(0)]),
    d("fchdir", &[Arg(0)]),
    d("read", &[Arg(0), Arg(2), Absent]),
    d("write", &[Arg(0), Arg(2), Absent]),
    d("mount", &[Str(0), Str(1), Short(2), Arg(3)]),
    d("umount2", &[Str(0), Arg(1)]),
    // Successful clones are reported by the fork tracepoint (flags, child ids); these sources
    // serve failed calls.
    d("clone", &[Arg(0), Absent, Absent]),
    d("clone3", &[Absent, Absent, Absent]),
    d("fork", &[Absent, Absent]),
    d("vfork", &[Absent, Absent]),
    d("execve", &[Str(0)]),
    d("execveat", &[Arg(0), Str(1), Arg(4)]),
    d("kill", &[Arg(0), Arg(1)]),
    d("tgkill", &[Arg(0), Arg(1), Arg(2)]),
    d("ptrace", &[Arg(0), Arg(1), Arg(2), Arg(3)]),
    d("setuid", &[Arg(0)]),
    d("setgid", &[Arg(0)]),
    d("setreuid", &[Arg(0), Arg(1)]),
    d("setregid", &[Arg(0), Arg(1)]),
    d("setresuid", &[Arg(0), Arg(1), Arg(2)]),
    d("setresgid", &[Arg(0), Arg(1), Arg(2)]),
    d("setsid", &[]),
    d("setpgid", &[Arg(0), Arg(1)]),
    d("capset", &[Absent, Absent, Absent]),
    d("setns", &[Arg(0), Arg(1)]),
    d("unshare", &[Arg(0)]),
    d("prctl", &[Arg(0), Arg(1)]),
    d("init_module", &[Arg(1), Short(2)]),
    d("finit_module", &[Arg(0), Short(1), Arg(2)]),
    d("delete_module", &[Short(0), Arg(1)]),
    d("bpf", &[Arg(0)]),
    d("userfaultfd", &[Arg(0)]),
    d("socket", &[Arg(0), Arg(1), Arg(2)]),
    d(
        "socketpair",
        &[Arg(0), Arg(1), Arg(2), Pair(3, 0), Pair(3, 1)],
    ),
    d("connect", &[Arg(0), Addr(1), Tuple]),
    d("accept", &[TupleRes, Absent]),
    d("accept4", &[TupleRes, Absent, Arg(3)]),
    d("bind", &[Arg(0), Addr(1)]),
    d("listen", &[Arg(0), Arg(1)]),
    d("sendto", &[Arg(0), Arg(2), Tuple, Absent]),
    d("sendmsg", &[Arg(0), MsgSize, Tuple, Absent]),
    d("recvfrom", &[Arg(0), Arg(2), Tuple, Absent]),
    d("recvmsg", &[Arg(0), Absent, Tuple, Absent]),
];

/// Extra captures a syscall needs beyond its parameters' sources (the destination address of
/// an unconnected `sendto`, which completes its tuple).
fn extra_caps(name: &str) -> &'static [Src] {
    match name {
        "sendto" => &[Addr(4)],
        _ => &[],
    }
}

/// The kernel's capture spec for one syscall (the `struct spec` of `bpf/vigil.bpf.c`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CaptureSpec {
    /// Per argument: 0 none, 1 path string, 2 sockaddr, 3 8 bytes, 4 24 bytes, 5 short string.
    pub cap: [u8; 6],
    /// 0 none, 1 the socket in argument 0, 2 the returned socket.
    pub tuple: u8,
    /// 1: argument 1 is a `struct msghdr` (iovec total and `msg_name` captured).
    pub msg: u8,
}

impl CaptureSpec {
    pub fn to_bytes(self) -> [u8; 8] {
        let c = self.cap;
        [c[0], c[1], c[2], c[3], c[4], c[5], self.tuple, self.msg]
    }

    fn from_sources(sources: &[Src]) -> CaptureSpec {
        let mut spec = CaptureSpec::default();
        for src in sources {
            let (arg, cap) = match *src {
                Str(n) => (n, 1),
                Addr(n) => (n, 2),
                Pair(n, _) => (n, 3),
                How(_) => (2, 4),
                Short(n) => (n, 5),
                Tuple => {
                    spec.tuple = 1;
                    continue;
                }
                TupleRes => {
                    spec.tuple = 2;
                    continue;
                }
                MsgSize => {
                    spec.msg = 1;
                    continue;
                }
                Arg(_) | Absent => continue,
            };
            if let Some(slot) = spec.cap.get_mut(usize::from(arg)) {
                *slot = cap;
            }
        }
        spec
    }
}

/// The definition for event type id `etype`, if it has one.
pub fn def_for(etype: EventType) -> Option<&'static SyscallDef> {
    static BY_ID: OnceLock<Vec<Option<&'static SyscallDef>>> = OnceLock::new();
    BY_ID
        .get_or_init(|| {
            let mut v = vec![None; table::events().len()];
            for def in DEFS {
                if let Some(t) = table::by_name(def.name) {
                    v[usize::from(t.0)] = Some(def);
                }
            }
            v
        })
        .get(usize::from(etype.0))
        .copied()
        .flatten()
}

/// The capture spec of event type `etype` (empty for syscalls without a detailed schema).
pub fn capture_spec(etype: EventType) -> CaptureSpec {
    match def_for(etype) {
        Some(def) => {
            let mut sources = def.params.to_vec();
            sources.extend_from_slice(extra_caps(def.name));
            CaptureSpec::from_sources(&sources)
        }
        None => CaptureSpec::default(),
    }
}

/// The event types the state engine needs whatever the rules watch, to keep its process,
/// fd and cwd tables right (as Falco adds its own "state" syscalls to the rules' set).
pub const STATE_NEEDS: &[&str] = &[
    "open",
    "openat",
    "openat2",
    "creat",
    "close",
    "dup",
    "dup2",
    "dup3",
    "fcntl",
    "pipe",
    "pipe2",
    "memfd_create",
    "socket",
    "socketpair",
    "connect",
    "accept",
    "accept4",
    "bind",
    "listen",
    "chdir",
    "fchdir",
    "clone",
    "clone3",
    "fork",
    "vfork",
    "execve",
    "execveat",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setsid",
    "setpgid",
    "capset",
    "prctl",
    "unshare",
    "bpf",
    "userfaultfd",
    "procexit",
];

/// The state-needed event types whose failed calls still change the state engine's tables
/// (`crates/state/src/state.rs`): a `close` that fails with `EINTR`/`EIO` has released the
/// descriptor all the same (only `EBADF` changes nothing), and a non-blocking `connect`
/// failing with `EINPROGRESS` has its endpoint. Every other type the state handles changes
/// nothing on failure (no descriptor, cwd, credential, session or namespace change; successful
/// clones and execs come from the lifecycle programs, not from the syscall's return).
pub const STATE_USES_FAILED: &[&str] = &["close", "connect"];

/// Whether the kernel filters out the failed calls of `etype`: the consumer cannot use them
/// (`failed_unused`) and neither can the state engine ([`STATE_USES_FAILED`]).
pub fn skip_failed(etype: EventType, failed_unused: &InterestSet) -> bool {
    failed_unused.contains(etype) && !STATE_USES_FAILED.contains(&etype.name())
}

/// The open types whose failed calls the kernel may search for a string the rules require
/// (`failure_needles` in `bpf/vigil.bpf.c`), and the argument it searches: the path as
/// passed, which is `fd.nameraw` of a failed open.
const NEEDLE_FILTERABLE: &[&str] = &["open", "openat", "openat2", "creat"];

/// The most bytes of a failure needle the kernel searches for (`struct failure_needle`).
pub const NEEDLE_MAX: usize = 16;

/// The argument register holding the path of a [`NEEDLE_FILTERABLE`] type (its one path
/// string in [`DEFS`]); `None` for other types.
pub fn failure_path_arg(etype: EventType) -> Option<u8> {
    if !NEEDLE_FILTERABLE.contains(&etype.name()) {
        return None;
    }
    let def = DEFS.iter().find(|d| d.name == etype.name())?;
    let mut paths = def.params.iter().filter_map(|src| match src {
        Str(n) => Some(*n),
        _ => None,
    });
    let arg = paths.next()?;
    paths.next().is_none().then_some(arg)
}

/// Whether the kernel searches the failed calls of `etype` for a needle
/// ([`crate::BpfOptions::failure_needles`]): a [`NEEDLE_FILTERABLE`] type that is captured
/// (in the driver's interest) and whose failures are not filtered whole already
/// ([`skip_failed`]) nor used by the state engine.
pub fn needle_filtered(etype: EventType, rules: &InterestSet, failed_unused: &InterestSet) -> bool {
    failure_path_arg(etype).is_some()
        && driver_interest(rules).contains(etype)
        && !skip_failed(etype, failed_unused)
        && !STATE_USES_FAILED.contains(&etype.name())
}

/// The state-needed descriptor operations the kernel may fold away when they are captured for
/// the state engine alone (`hold_state_op` in `bpf/vigil.bpf.c`): each only sets one
/// descriptor (a close releases it, a dup or `fcntl(F_DUPFD*)` makes it from another), so
/// two in a row that set the same descriptor leave the state engine's table as the second
/// alone does, and one that no other record of its thread follows changes nothing anybody
/// can observe.
pub const STATE_FOLDABLE: &[&str] = &["close", "dup", "dup2", "dup3", "fcntl"];

/// Whether the kernel may hold back and fold the records of `etype`: a
/// [`STATE_FOLDABLE`] type that no rule watches (not in `rules`), whose failures nothing uses
/// either (in `failed_unused`, which is empty when a capture is written: a capture keeps the
/// whole interest set, for a replay with other rules).
pub fn state_only(etype: EventType, rules: &InterestSet, failed_unused: &InterestSet) -> bool {
    STATE_FOLDABLE.contains(&etype.name())
        && !rules.contains(etype)
        && failed_unused.contains(etype)
}

/// The [`STATE_FOLDABLE`] types whose successful calls the kernel may treat as state-only when
/// their result is one no rule can match (`result_filters` in `bpf/vigil.bpf.c`): each returns
/// the descriptor it makes, which a rule may require to be one of a few numbers (Falco's
/// `evt.rawres in (0, 1, 2)`).
pub const RESULT_FOLDABLE: &[&str] = &["dup", "dup2", "dup3"];

/// Whether the kernel holds back and folds the successful calls of `etype` whose result is
/// not among those the rules require (`mask`, from the rules): a [`RESULT_FOLDABLE`] type a
/// rule watches (in `rules`; an unwatched one is [`state_only`] whatever its result), whose
/// failures nothing uses (in `failed_unused`, empty when a capture is written).
pub fn result_filtered(etype: EventType, rules: &InterestSet, failed_unused: &InterestSet) -> bool {
    RESULT_FOLDABLE.contains(&etype.name())
        && rules.contains(etype)
        && failed_unused.contains(etype)
}

/// The rules' interest set plus what the state engine needs.
pub fn driver_interest(rules: &InterestSet) -> InterestSet {
    let mut set = rules.clone();
    set.extend(STATE_NEEDS.iter().filter_map(|n| table::by_name(n)));
    set
}

/// The tracepoint name of a syscall event type (`sys_enter_<name>`), where the kernel's
/// differs from the x86-64 table's.
pub fn tracepoint_name(name: &'static str) -> &'static str {
    match name {
        "umount2" => "umount",
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_def_matches_its_schema() {
        for def in DEFS {
            let t = table::by_name(def.name).unwrap_or_else(|| panic!("no type {}", def.name));
            let spec = t.spec();
            let expected = if def.name.starts_with("execve") {
                spec.params.len() - 23
            } else {
                spec.params.len()
            };
            assert_eq!(def.params.len(), expected, "{}", def.name);
        }
    }

    #[test]
    fn every_detailed_syscall_has_a_def() {
        for spec in table::DETAILED.iter().filter(|s| s.nr.is_some()) {
            assert!(
                DEFS.iter().any(|d| d.name == spec.name),
                "{} has no capture definition",
                spec.name
            );
        }
    }

    #[test]
    fn capture_specs_follow_the_sources() {
        let t = |n| table::by_name(n).unwrap();
        assert_eq!(capture_spec(t("openat")).cap, [0, 1, 0, 0, 0, 0]);
        assert_eq!(capture_spec(t("renameat2")).cap, [0, 1, 0, 1, 0, 0]);
        assert_eq!(capture_spec(t("connect")).cap, [0, 2, 0, 0, 0, 0]);
        assert_eq!(capture_spec(t("connect")).tuple, 1);
        assert_eq!(capture_spec(t("accept4")).tuple, 2);
        assert_eq!(capture_spec(t("sendto")).cap[4], 2, "destination address");
        assert_eq!(capture_spec(t("pipe2")).cap, [3, 0, 0, 0, 0, 0]);
        assert_eq!(capture_spec(t("openat2")).cap, [0, 1, 4, 0, 0, 0]);
        assert_eq!(capture_spec(t("getpid")), CaptureSpec::default());
        assert_eq!(
            capture_spec(t("sendmsg")).to_bytes(),
            [0, 0, 0, 0, 0, 0, 1, 1]
        );
        assert_eq!(
            capture_spec(t("mount")).to_bytes(),
            [1, 1, 5, 0, 0, 0, 0, 0]
        );
    }

    #[test]
    fn failures_the_state_uses_are_never_filtered() {
        let t = |n| table::by_name(n).unwrap();
        let unused: InterestSet = ["openat", "close", "connect", "setuid", "kill"]
            .into_iter()
            .map(t)
            .collect();
        for name in ["openat", "setuid", "kill"] {
            assert!(skip_failed(t(name), &unused), "{name}");
        }
        for name in ["close", "connect"] {
            assert!(
                !skip_failed(t(name), &unused),
                "{name}: the state uses its failures"
            );
        }
        assert!(
            !skip_failed(t("execve"), &unused),
            "not in the set: delivered"
        );
        for name in STATE_USES_FAILED {
            assert!(STATE_NEEDS.contains(name), "{name} is a state need");
        }
    }

    #[test]
    fn only_unwatched_descriptor_operations_are_folded() {
        let t = |n| table::by_name(n).unwrap();
        let rules: InterestSet = [t("dup2"), t("openat")].into_iter().collect();
        let unused: InterestSet = driver_interest(&rules).iter().collect();
        for name in ["close", "dup", "dup3", "fcntl"] {
            assert!(state_only(t(name), &rules, &unused), "{name}");
        }
        assert!(
            !state_only(t("dup2"), &rules, &unused),
            "a rule watches dup2"
        );
        assert!(!state_only(t("openat"), &rules, &unused), "not a fold type");
        assert!(
            !state_only(t("close"), &rules, &InterestSet::new()),
            "a capture is written: nothing folded"
        );
        for name in STATE_FOLDABLE {
            assert!(STATE_NEEDS.contains(name), "{name} is a state need");
            let spec = capture_spec(t(name));
            assert_eq!(spec, CaptureSpec::default(), "{name}: a header-only record");
        }
    }

    #[test]
    fn watched_dups_are_result_filtered_only_when_their_failures_are_unused() {
        let t = |n| table::by_name(n).unwrap();
        let rules: InterestSet = [t("dup"), t("dup2"), t("fcntl"), t("openat")]
            .into_iter()
            .collect();
        let unused: InterestSet = driver_interest(&rules)
            .iter()
            .filter(|&e| e != t("dup2"))
            .collect();
        assert!(result_filtered(t("dup"), &rules, &unused));
        assert!(
            !result_filtered(t("dup2"), &rules, &unused),
            "a rule may match a failed dup2"
        );
        assert!(
            !result_filtered(t("dup3"), &rules, &unused),
            "unwatched: state-only instead"
        );
        assert!(!result_filtered(t("fcntl"), &rules, &unused), "not a dup");
        assert!(!result_filtered(t("openat"), &rules, &unused));
        assert!(
            !result_filtered(t("dup"), &rules, &InterestSet::new()),
            "a capture is written: every dup is recorded"
        );
        for name in RESULT_FOLDABLE {
            assert!(STATE_FOLDABLE.contains(name), "{name} is state-foldable");
        }
    }

    #[test]
    fn driver_interest_adds_state_needs() {
        let rules: InterestSet = [table::by_name("kill").unwrap()].into_iter().collect();
        let set = driver_interest(&rules);
        for name in ["kill", "close", "execve", "clone", "procexit", "openat"] {
            assert!(set.contains(table::by_name(name).unwrap()), "{name}");
        }
        assert!(!set.contains(table::by_name("getpid").unwrap()));
        assert_eq!(tracepoint_name("umount2"), "umount");
    }
}

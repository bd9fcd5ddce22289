//! The cases as data: what `vigil-trigger CASE` does (in words, the code is in the trigger) and
//! which events with which parameters a driver must report for the trigger's process.
//!
//! Values that depend on the run (the case's directory, the ports, the trigger's pid and ids,
//! whether it runs as root or under a tracer) are placeholders ([`V`]) resolved against a
//! [`crate::check::Context`] by the checker.

/// An expected value.
#[derive(Clone, Copy, Debug)]
pub enum V {
    /// A signed integer (`Fd`, `Int`, `Pid` parameters, the return value).
    Int(i64),
    /// An unsigned integer (`Uint`, `Uid`, `Gid`, `Flags` parameters).
    Uint(u64),
    /// An unsigned value with at least these bits set (clone flags).
    Bits(u64),
    /// A return value that is a failure with one of these errnos (positive numbers).
    Errno(&'static [i32]),
    /// A positive integer (a child's pid).
    Positive,
    /// Exact bytes.
    Bytes(&'static [u8]),
    /// The case directory joined with this relative path (`""`: the directory itself).
    Path(&'static [u8]),
    /// The canonical path of this absolute path (symlinks resolved, as `trusted_exepath`).
    Canonical(&'static str),
    /// A list of strings, exactly.
    List(&'static [&'static [u8]]),
    /// A list containing this string.
    ListHas(&'static [u8]),
    /// The trigger's pid.
    SelfPid,
    /// The trigger's user id / group id (real = effective = saved).
    Uid,
    Gid,
    /// `127.0.0.1:` the case's base port plus `n`.
    Lo(u16),
    /// The inet tuple `proto:127.0.0.1:(port+src)->127.0.0.1:(port+dst)`.
    LoTuple {
        proto: u8,
        src: u16,
        dst: u16,
    },
    /// `[::1]:` the case's base port plus `n`.
    Lo6(u16),
    /// The inet tuple `proto:[::1]:(port+src)->[::1]:(port+dst)`.
    Lo6Tuple {
        proto: u8,
        src: u16,
        dst: u16,
    },
    /// A Unix socket address: the case directory joined with this relative path.
    UnixAddr(&'static [u8]),
    /// A prefix of [`long_path`] (and the parameter must be flagged truncated).
    LongPathPrefix,
    /// The first value when the trigger runs as root, the second otherwise.
    IfRoot(&'static V, &'static V),
    /// The first value when the driver traces the trigger (ptrace), the second otherwise.
    IfTraced(&'static V, &'static V),
}

/// One event that must appear for the trigger's process.
#[derive(Debug)]
pub struct Expect {
    /// Falco's `evt.type`.
    pub event: &'static str,
    /// The return value (`evt.rawres`); `None` = not checked.
    pub res: Option<V>,
    /// Parameters by schema name.
    pub params: &'static [(&'static str, V)],
}

/// One trigger scenario.
#[derive(Debug)]
pub struct Case {
    /// The trigger's argument.
    pub name: &'static str,
    /// What the trigger does (`DIR` is the case directory, `P` the base port, `fd N` the
    /// numbers the trigger gets: it starts with only 0, 1 and 2 open).
    pub does: &'static str,
    /// The trigger's exit status.
    pub exit_code: i32,
    pub expect: &'static [Expect],
}

// Linux x86-64 values used by the expectations (kept literal so the data reads as a spec).
const O_WRONLY: u64 = 0o1;
const O_RDWR: u64 = 0o2;
const O_CREAT: u64 = 0o100;
const O_EXCL: u64 = 0o200;
const O_TRUNC: u64 = 0o1000;
const O_NONBLOCK: u64 = 0o4000;
const O_CLOEXEC: u64 = 0o2000000;
const AT_FDCWD: i64 = -100;
const EPERM: i32 = 1;
const ENOENT: i32 = 2;
const ENOEXEC: i32 = 8;
const EBADF: i32 = 9;
const EFAULT: i32 = 14;
const EINVAL: i32 = 22;
const ENAMETOOLONG: i32 = 36;
const ENOSYS: i32 = 38;
const ECONNREFUSED: i32 = 111;
const E2BIG: i32 = 7;
const ETXTBSY: i32 = 26;
const CLONE_FILES: u64 = 0x400;
const CLONE_SIGHAND: u64 = 0x800;
const CLONE_NEWUTS: u64 = 0x0400_0000;
const SOCK_DGRAM: u64 = 2;
const SOCK_CLOEXEC: u64 = 0o2000000;
const TCP: u8 = 6;
const UDP: u8 = 17;

const OK: Option<V> = Some(V::Int(0));
const ROOT_OK: V = V::IfRoot(&V::Int(0), &V::Errno(&[EPERM]));
const MODULE_FAILS: V = V::Errno(&[EPERM, ENOSYS, EINVAL, ENOEXEC, EBADF, ETXTBSY, EFAULT]);

const fn e(event: &'static str, res: Option<V>, params: &'static [(&'static str, V)]) -> Expect {
    Expect { event, res, params }
}

const fn c(name: &'static str, does: &'static str, expect: &'static [Expect]) -> Case {
    Case {
        name,
        does,
        exit_code: 0,
        expect,
    }
}

/// The argument of the `execve` cases' `/bin/true`.
pub const EXEC_ARG: &[u8] = b"conformance-arg";
/// The environment of the `execve` case.
pub const EXEC_ENV: &[&[u8]] = &[b"VIGIL_CONF=1", b"PATH=/usr/bin:/bin"];
/// A non-UTF-8 file name and argument.
pub const BAD_NAME: &[u8] = b"bad-\xff\xfe.txt";
pub const BAD_ARG: &[u8] = b"\xff\xfe-arg";
/// The variable placed after [`DEEP_ENV_PAD`] bytes of other variables.
pub const DEEP_ENV_VAR: &[u8] = b"VIGIL_DEEP=found-it";
/// How many bytes of environment come before [`DEEP_ENV_VAR`].
pub const DEEP_ENV_PAD: usize = 3500;
/// The exit status of the `exit` case.
pub const EXIT_CODE: i32 = 3;

/// A path of more than 4096 bytes under `dir` (components of 200 bytes, none exists).
pub fn long_path(dir: &[u8]) -> Vec<u8> {
    let mut path = dir.to_vec();
    while path.len() <= 5000 {
        path.push(b'/');
        path.extend_from_slice(&[b'L'; 200]);
    }
    path
}

/// The padding variables of the deep-environment case: `VIGIL_PAD_NN=xxx…`, at least
/// [`DEEP_ENV_PAD`] bytes in all (NULs included).
pub fn deep_env_padding() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut total = 0;
    let mut i = 0;
    while total < DEEP_ENV_PAD {
        let mut var = format!("VIGIL_PAD_{i:02}=").into_bytes();
        var.extend_from_slice(&[b'x'; 90]);
        total += var.len() + 1;
        out.push(var);
        i += 1;
    }
    out
}

/// Every case.
pub const CASES: &[Case] = &[
    // Files.
    c(
        "open",
        "open(DIR/open.txt, O_WRONLY|O_CREAT|O_TRUNC, 0640) → fd 3",
        &[e(
            "open",
            Some(V::Int(3)),
            &[
                ("name", V::Path(b"open.txt")),
                ("flags", V::Uint(O_WRONLY | O_CREAT | O_TRUNC)),
                ("mode", V::Uint(0o640)),
            ],
        )],
    ),
    c(
        "open-enoent",
        "open(DIR/missing.txt, O_RDONLY) → ENOENT",
        &[e(
            "open",
            Some(V::Errno(&[ENOENT])),
            &[("name", V::Path(b"missing.txt")), ("flags", V::Uint(0))],
        )],
    ),
    c(
        "openat",
        "openat(AT_FDCWD, DIR, O_RDONLY|O_DIRECTORY) → 3; openat(3, openat.txt, O_RDWR|O_CREAT|O_EXCL|O_CLOEXEC, 0600) → 4",
        &[e(
            "openat",
            Some(V::Int(4)),
            &[
                ("dirfd", V::Int(3)),
                ("name", V::Bytes(b"openat.txt")),
                ("flags", V::Uint(O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC)),
                ("mode", V::Uint(0o600)),
            ],
        )],
    ),
    c(
        "openat2",
        "openat2(AT_FDCWD, DIR/openat2.txt, {O_WRONLY|O_CREAT, 0644, RESOLVE_NO_SYMLINKS}) → 3",
        &[e(
            "openat2",
            Some(V::Int(3)),
            &[
                ("dirfd", V::Int(AT_FDCWD)),
                ("name", V::Path(b"openat2.txt")),
                ("flags", V::Uint(O_WRONLY | O_CREAT)),
                ("mode", V::Uint(0o644)),
                ("resolve", V::Uint(4)),
            ],
        )],
    ),
    c(
        "creat",
        "creat(DIR/creat.txt, 0600) → 3",
        &[e(
            "creat",
            Some(V::Int(3)),
            &[("name", V::Path(b"creat.txt")), ("mode", V::Uint(0o600))],
        )],
    ),
    c(
        "long-path",
        "openat(AT_FDCWD, a path of 5000+ bytes, O_RDONLY) → ENAMETOOLONG",
        &[e(
            "openat",
            Some(V::Errno(&[ENAMETOOLONG])),
            &[
                ("dirfd", V::Int(AT_FDCWD)),
                ("name", V::LongPathPrefix),
                ("flags", V::Uint(0)),
            ],
        )],
    ),
    c(
        "nonutf8-path",
        "openat(AT_FDCWD, DIR/bad-\\xff\\xfe.txt, O_WRONLY|O_CREAT, 0600) → 3",
        &[e(
            "openat",
            Some(V::Int(3)),
            &[
                ("dirfd", V::Int(AT_FDCWD)),
                ("name", V::Path(BAD_NAME)),
                ("flags", V::Uint(O_WRONLY | O_CREAT)),
                ("mode", V::Uint(0o600)),
            ],
        )],
    ),
    c(
        "close",
        "openat(DIR/close.txt, O_WRONLY|O_CREAT) → 3; close(3)",
        &[e("close", OK, &[("fd", V::Int(3))])],
    ),
    c(
        "dup",
        "openat(DIR/dup.txt) → 3; dup(3) → 4",
        &[e("dup", Some(V::Int(4)), &[("oldfd", V::Int(3))])],
    ),
    c(
        "dup2",
        "openat(DIR/dup.txt) → 3; dup2(3, 10) → 10",
        &[e(
            "dup2",
            Some(V::Int(10)),
            &[("oldfd", V::Int(3)), ("newfd", V::Int(10))],
        )],
    ),
    c(
        "dup3",
        "openat(DIR/dup.txt) → 3; dup3(3, 11, O_CLOEXEC) → 11",
        &[e(
            "dup3",
            Some(V::Int(11)),
            &[
                ("oldfd", V::Int(3)),
                ("newfd", V::Int(11)),
                ("flags", V::Uint(O_CLOEXEC)),
            ],
        )],
    ),
    c(
        "fcntl-dupfd",
        "openat(DIR/dup.txt) → 3; fcntl(3, F_DUPFD, 20) → 20",
        &[e(
            "fcntl",
            Some(V::Int(20)),
            &[("fd", V::Int(3)), ("cmd", V::Uint(0))],
        )],
    ),
    c(
        "pipe",
        "pipe() → fds 3, 4",
        &[e("pipe", OK, &[("fd1", V::Int(3)), ("fd2", V::Int(4))])],
    ),
    c(
        "pipe2",
        "pipe2(O_CLOEXEC|O_NONBLOCK) → fds 3, 4",
        &[e(
            "pipe2",
            OK,
            &[
                ("fd1", V::Int(3)),
                ("fd2", V::Int(4)),
                ("flags", V::Uint(O_CLOEXEC | O_NONBLOCK)),
            ],
        )],
    ),
    c(
        "memfd_create",
        "memfd_create(\"vigil-conf\", MFD_CLOEXEC) → 3",
        &[e(
            "memfd_create",
            Some(V::Int(3)),
            &[("name", V::Bytes(b"vigil-conf")), ("flags", V::Uint(1))],
        )],
    ),
    c(
        "link",
        "create DIR/a; link(DIR/a, DIR/b)",
        &[e(
            "link",
            OK,
            &[("oldpath", V::Path(b"a")), ("newpath", V::Path(b"b"))],
        )],
    ),
    c(
        "linkat",
        "open DIR → 3; create DIR/a; linkat(AT_FDCWD, DIR/a, 3, \"c\", AT_SYMLINK_FOLLOW)",
        &[e(
            "linkat",
            OK,
            &[
                ("olddir", V::Int(AT_FDCWD)),
                ("oldpath", V::Path(b"a")),
                ("newdir", V::Int(3)),
                ("newpath", V::Bytes(b"c")),
                ("flags", V::Uint(0x400)),
            ],
        )],
    ),
    c(
        "symlink",
        "symlink(\"target-x\", DIR/s)",
        &[e(
            "symlink",
            OK,
            &[("target", V::Bytes(b"target-x")), ("linkpath", V::Path(b"s"))],
        )],
    ),
    c(
        "symlinkat",
        "open DIR → 3; symlinkat(\"target-y\", 3, \"s2\")",
        &[e(
            "symlinkat",
            OK,
            &[
                ("target", V::Bytes(b"target-y")),
                ("linkdirfd", V::Int(3)),
                ("linkpath", V::Bytes(b"s2")),
            ],
        )],
    ),
    c(
        "rename",
        "create DIR/a; rename(DIR/a, DIR/b)",
        &[e(
            "rename",
            OK,
            &[("oldpath", V::Path(b"a")), ("newpath", V::Path(b"b"))],
        )],
    ),
    c(
        "renameat",
        "open DIR → 3; create DIR/a; renameat(3, \"a\", AT_FDCWD, DIR/b)",
        &[e(
            "renameat",
            OK,
            &[
                ("olddirfd", V::Int(3)),
                ("oldpath", V::Bytes(b"a")),
                ("newdirfd", V::Int(AT_FDCWD)),
                ("newpath", V::Path(b"b")),
            ],
        )],
    ),
    c(
        "renameat2",
        "open DIR → 3; create DIR/a; renameat2(3, \"a\", 3, \"b\", RENAME_NOREPLACE)",
        &[e(
            "renameat2",
            OK,
            &[
                ("olddirfd", V::Int(3)),
                ("oldpath", V::Bytes(b"a")),
                ("newdirfd", V::Int(3)),
                ("newpath", V::Bytes(b"b")),
                ("flags", V::Uint(1)),
            ],
        )],
    ),
    c(
        "unlink",
        "create DIR/a; unlink(DIR/a)",
        &[e("unlink", OK, &[("path", V::Path(b"a"))])],
    ),
    c(
        "unlinkat",
        "open DIR → 3; mkdirat(3, \"d\"); unlinkat(3, \"d\", AT_REMOVEDIR)",
        &[e(
            "unlinkat",
            OK,
            &[
                ("dirfd", V::Int(3)),
                ("name", V::Bytes(b"d")),
                ("flags", V::Uint(0x200)),
            ],
        )],
    ),
    c(
        "mkdir",
        "mkdir(DIR/d, 0750)",
        &[e(
            "mkdir",
            OK,
            &[("path", V::Path(b"d")), ("mode", V::Uint(0o750))],
        )],
    ),
    c(
        "mkdirat",
        "open DIR → 3; mkdirat(3, \"d\", 0700)",
        &[e(
            "mkdirat",
            OK,
            &[
                ("dirfd", V::Int(3)),
                ("path", V::Bytes(b"d")),
                ("mode", V::Uint(0o700)),
            ],
        )],
    ),
    c(
        "chmod",
        "create DIR/a; chmod(DIR/a, 0640)",
        &[e(
            "chmod",
            OK,
            &[("filename", V::Path(b"a")), ("mode", V::Uint(0o640))],
        )],
    ),
    c(
        "fchmod",
        "create DIR/a → 3; fchmod(3, 0600)",
        &[e(
            "fchmod",
            OK,
            &[("fd", V::Int(3)), ("mode", V::Uint(0o600))],
        )],
    ),
    c(
        "fchmodat",
        "open DIR → 3; create DIR/a; fchmodat(3, \"a\", 0604)",
        &[e(
            "fchmodat",
            OK,
            &[
                ("dirfd", V::Int(3)),
                ("filename", V::Bytes(b"a")),
                ("mode", V::Uint(0o604)),
            ],
        )],
    ),
    c(
        "mount",
        "root: unshare(CLONE_NEWNS), make / private, mount(\"vigil-conf\", DIR/mnt, \"tmpfs\", MS_NOSUID|MS_NODEV, \"size=64k\") → 0; not root: the same mount → EPERM",
        &[e(
            "mount",
            Some(ROOT_OK),
            &[
                ("dev", V::Bytes(b"vigil-conf")),
                ("dir", V::Path(b"mnt")),
                ("type", V::Bytes(b"tmpfs")),
                ("flags", V::Uint(0x2 | 0x4)),
            ],
        )],
    ),
    // Processes.
    c(
        "execve",
        "execve(\"/bin/true\", [\"true\", \"conformance-arg\"], [VIGIL_CONF=1, PATH=…])",
        &[e(
            "execve",
            OK,
            &[
                ("filename", V::Bytes(b"/bin/true")),
                ("exe", V::Bytes(b"true")),
                ("args", V::List(&[EXEC_ARG])),
                ("env", V::List(EXEC_ENV)),
                ("comm", V::Bytes(b"true")),
                ("trusted_exepath", V::Canonical("/bin/true")),
                ("cwd", V::Path(b"")),
                ("pid", V::SelfPid),
                ("tid", V::SelfPid),
                ("uid", V::Uid),
                ("gid", V::Gid),
                ("euid", V::Uid),
                ("egid", V::Gid),
            ],
        )],
    ),
    c(
        "execveat",
        "openat(\"/usr/bin\", O_PATH|O_DIRECTORY) → 3; execveat(3, \"true\", [\"true\", \"at-arg\"], env, 0)",
        &[e(
            "execveat",
            OK,
            &[
                ("dirfd", V::Int(3)),
                ("pathname", V::Bytes(b"true")),
                ("flags", V::Uint(0)),
                ("exe", V::Bytes(b"true")),
                ("args", V::List(&[b"at-arg"])),
                ("comm", V::Bytes(b"true")),
                ("trusted_exepath", V::Canonical("/usr/bin/true")),
                ("pid", V::SelfPid),
            ],
        )],
    ),
    c(
        "nonutf8-argv",
        "execve(\"/bin/true\", [\"true\", \"\\xff\\xfe-arg\"], env)",
        &[e(
            "execve",
            OK,
            &[
                ("filename", V::Bytes(b"/bin/true")),
                ("args", V::List(&[BAD_ARG])),
            ],
        )],
    ),
    c(
        "deep-env",
        "execve(\"/bin/true\", [\"true\"], [3.5 KiB of VIGIL_PAD_NN=…, VIGIL_DEEP=found-it])",
        &[e(
            "execve",
            OK,
            &[
                ("filename", V::Bytes(b"/bin/true")),
                ("env", V::ListHas(DEEP_ENV_VAR)),
            ],
        )],
    ),
    c(
        "execve-enoent",
        "execve(DIR/missing-exe, [\"missing-exe\"], []) → ENOENT",
        &[e(
            "execve",
            Some(V::Errno(&[ENOENT])),
            &[("filename", V::Path(b"missing-exe"))],
        )],
    ),
    c(
        "fork",
        "fork(); the child exits 0; wait",
        &[e(
            "fork",
            Some(V::Positive),
            &[("vtid", V::Positive), ("vpid", V::Positive)],
        )],
    ),
    c(
        "vfork",
        "vfork(); the child exits 0",
        &[e("vfork", Some(V::Positive), &[])],
    ),
    c(
        "clone",
        "clone(CLONE_FILES|SIGCHLD, no stack); the child exits 0; wait",
        &[e(
            "clone",
            Some(V::Positive),
            &[
                ("flags", V::Bits(CLONE_FILES)),
                ("vtid", V::Positive),
                ("vpid", V::Positive),
            ],
        )],
    ),
    c(
        "clone3",
        "clone3({flags: CLONE_FILES, exit_signal: SIGCHLD}); the child exits 0; wait",
        &[e(
            "clone3",
            Some(V::Positive),
            &[
                ("flags", V::Bits(CLONE_FILES)),
                ("vtid", V::Positive),
                ("vpid", V::Positive),
            ],
        )],
    ),
    c(
        "clone-fail",
        "clone(CLONE_SIGHAND|SIGCHLD) without CLONE_VM → EINVAL",
        &[e(
            "clone",
            Some(V::Errno(&[EINVAL])),
            &[("flags", V::Bits(CLONE_SIGHAND))],
        )],
    ),
    Case {
        name: "exit",
        does: "exit_group(3)",
        exit_code: EXIT_CODE,
        expect: &[e(
            "procexit",
            None,
            &[
                ("status", V::Int((EXIT_CODE as i64) << 8)),
                ("ret", V::Int(EXIT_CODE as i64)),
                ("sig", V::Uint(0)),
            ],
        )],
    },
    c(
        "kill",
        "kill(getpid(), 0)",
        &[e("kill", OK, &[("pid", V::SelfPid), ("sig", V::Uint(0))])],
    ),
    c(
        "ptrace",
        "ptrace(PTRACE_TRACEME) → 0 (EPERM when already traced)",
        &[e(
            "ptrace",
            Some(V::IfTraced(&V::Errno(&[EPERM]), &V::Int(0))),
            &[("request", V::Uint(0))],
        )],
    ),
    c(
        "setuid",
        "setuid(getuid())",
        &[e("setuid", OK, &[("uid", V::Uid)])],
    ),
    c(
        "setuid-fail",
        "setuid(-1) → EINVAL",
        &[e(
            "setuid",
            Some(V::Errno(&[EINVAL])),
            &[("uid", V::Uint(u32::MAX as u64))],
        )],
    ),
    c(
        "setgid",
        "setgid(getgid())",
        &[e("setgid", OK, &[("gid", V::Gid)])],
    ),
    c(
        "setgid-fail",
        "setgid(-1) → EINVAL",
        &[e(
            "setgid",
            Some(V::Errno(&[EINVAL])),
            &[("gid", V::Uint(u32::MAX as u64))],
        )],
    ),
    c(
        "setresuid",
        "setresuid(getresuid())",
        &[e(
            "setresuid",
            OK,
            &[("ruid", V::Uid), ("euid", V::Uid), ("suid", V::Uid)],
        )],
    ),
    c(
        "setresuid-root",
        "setresuid(0, 0, 0): 0 as root, EPERM otherwise",
        &[e(
            "setresuid",
            Some(ROOT_OK),
            &[("ruid", V::Uint(0)), ("euid", V::Uint(0)), ("suid", V::Uint(0))],
        )],
    ),
    c(
        "setresgid",
        "setresgid(getresgid())",
        &[e(
            "setresgid",
            OK,
            &[("rgid", V::Gid), ("egid", V::Gid), ("sgid", V::Gid)],
        )],
    ),
    c(
        "setns",
        "openat(/proc/self/ns/uts) → 3; setns(3, CLONE_NEWUTS): 0 as root, EPERM otherwise",
        &[e(
            "setns",
            Some(ROOT_OK),
            &[("fd", V::Int(3)), ("nstype", V::Uint(CLONE_NEWUTS))],
        )],
    ),
    c(
        "unshare",
        "unshare(CLONE_NEWUTS): 0 as root, EPERM otherwise",
        &[e("unshare", Some(ROOT_OK), &[("flags", V::Uint(CLONE_NEWUTS))])],
    ),
    c(
        "init_module",
        "init_module(64 zero bytes, 64, \"vigil=1\") → fails",
        &[e(
            "init_module",
            Some(MODULE_FAILS),
            &[("len", V::Uint(64)), ("uargs", V::Bytes(b"vigil=1"))],
        )],
    ),
    c(
        "finit_module",
        "create DIR/mod.ko (empty), open it O_RDONLY → 3; finit_module(3, \"vigil=2\", 0) → fails",
        &[e(
            "finit_module",
            Some(MODULE_FAILS),
            &[
                ("fd", V::Int(3)),
                ("uargs", V::Bytes(b"vigil=2")),
                ("flags", V::Uint(0)),
            ],
        )],
    ),
    c(
        "bpf",
        "bpf(BPF_PROG_LOAD, 144 zero bytes) → fails (EINVAL as root)",
        &[e(
            "bpf",
            Some(V::Errno(&[EINVAL, EPERM, E2BIG, EFAULT])),
            &[("cmd", V::Uint(5))],
        )],
    ),
    // Network (P and P+1 are free loopback ports chosen by the harness).
    c(
        "socket",
        "socket(AF_INET6, SOCK_DGRAM|SOCK_CLOEXEC, 0) → 3",
        &[e(
            "socket",
            Some(V::Int(3)),
            &[
                ("domain", V::Uint(10)),
                ("type", V::Uint(SOCK_DGRAM | SOCK_CLOEXEC)),
                ("proto", V::Uint(0)),
            ],
        )],
    ),
    c(
        "bind",
        "socket(AF_INET, SOCK_STREAM) → 3; bind(3, 127.0.0.1:P)",
        &[e("bind", OK, &[("fd", V::Int(3)), ("addr", V::Lo(0))])],
    ),
    c(
        "listen",
        "socket → 3; bind(3, 127.0.0.1:P); listen(3, 7)",
        &[e("listen", OK, &[("fd", V::Int(3)), ("backlog", V::Int(7))])],
    ),
    c(
        "connect",
        "TCP listener 3 on 127.0.0.1:P; socket 4 bound to 127.0.0.1:P+1; connect(4, 127.0.0.1:P)",
        &[e(
            "connect",
            OK,
            &[
                ("fd", V::Int(4)),
                ("addr", V::Lo(0)),
                (
                    "tuple",
                    V::LoTuple {
                        proto: TCP,
                        src: 1,
                        dst: 0,
                    },
                ),
            ],
        )],
    ),
    c(
        "connect-refused",
        "TCP socket 3 bound to 127.0.0.1:P+1; connect(3, 127.0.0.1:P) with no listener → ECONNREFUSED",
        &[e(
            "connect",
            Some(V::Errno(&[ECONNREFUSED])),
            &[("fd", V::Int(3)), ("addr", V::Lo(0))],
        )],
    ),
    c(
        "connect6",
        "TCP listener 3 on [::1]:P; socket 4 bound to [::1]:P+1; connect(4, [::1]:P)",
        &[e(
            "connect",
            OK,
            &[
                ("fd", V::Int(4)),
                ("addr", V::Lo6(0)),
                (
                    "tuple",
                    V::Lo6Tuple {
                        proto: TCP,
                        src: 1,
                        dst: 0,
                    },
                ),
            ],
        )],
    ),
    c(
        "connect-unix",
        "Unix listener 3 on DIR/sock; socket 4; connect(4, DIR/sock)",
        &[e(
            "connect",
            OK,
            &[("fd", V::Int(4)), ("addr", V::UnixAddr(b"sock"))],
        )],
    ),
    c(
        "accept",
        "as connect, then accept(3) → 5",
        &[e(
            "accept",
            Some(V::Int(5)),
            &[(
                "tuple",
                V::LoTuple {
                    proto: TCP,
                    src: 1,
                    dst: 0,
                },
            )],
        )],
    ),
    c(
        "accept4",
        "as connect, then accept4(3, SOCK_CLOEXEC) → 5",
        &[e(
            "accept4",
            Some(V::Int(5)),
            &[
                (
                    "tuple",
                    V::LoTuple {
                        proto: TCP,
                        src: 1,
                        dst: 0,
                    },
                ),
                ("flags", V::Uint(SOCK_CLOEXEC)),
            ],
        )],
    ),
    c(
        "sendto",
        "UDP socket 3 on 127.0.0.1:P; UDP socket 4 on P+1; sendto(4, \"hello\", 127.0.0.1:P) → 5",
        &[e(
            "sendto",
            Some(V::Int(5)),
            &[
                ("fd", V::Int(4)),
                ("size", V::Uint(5)),
                (
                    "tuple",
                    V::LoTuple {
                        proto: UDP,
                        src: 1,
                        dst: 0,
                    },
                ),
            ],
        )],
    ),
    c(
        "sendmsg",
        "UDP socket 3 on 127.0.0.1:P; UDP socket 4 on P+1 connected to P; sendmsg(4, \"hello world\") → 11",
        &[e(
            "sendmsg",
            Some(V::Int(11)),
            &[
                ("fd", V::Int(4)),
                ("size", V::Uint(11)),
                (
                    "tuple",
                    V::LoTuple {
                        proto: UDP,
                        src: 1,
                        dst: 0,
                    },
                ),
            ],
        )],
    ),
];

/// The case called `name`.
pub fn case(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// Every event type some case expects (what a driver must be asked to capture).
pub fn event_types() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for case in CASES {
        for exp in case.expect {
            if !out.contains(&exp.event) {
                out.push(exp.event);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_event::table;

    #[test]
    fn names_are_unique_and_every_parameter_is_in_its_schema() {
        for (i, case) in CASES.iter().enumerate() {
            assert!(
                CASES[..i].iter().all(|c| c.name != case.name),
                "duplicate case {}",
                case.name
            );
            assert!(!case.expect.is_empty(), "{} expects nothing", case.name);
            for exp in case.expect {
                let t = table::by_name(exp.event)
                    .unwrap_or_else(|| panic!("{}: unknown event type {}", case.name, exp.event));
                for (name, _) in exp.params {
                    assert!(
                        t.spec().param_index(name).is_some(),
                        "{}: {} has no parameter {name}",
                        case.name,
                        exp.event
                    );
                }
            }
        }
    }

    #[test]
    fn the_table_of_issue_3_is_covered() {
        let types = event_types();
        for name in [
            "open",
            "openat",
            "openat2",
            "creat",
            "execve",
            "execveat",
            "clone",
            "clone3",
            "fork",
            "vfork",
            "procexit",
            "connect",
            "accept",
            "accept4",
            "bind",
            "listen",
            "socket",
            "sendto",
            "sendmsg",
            "dup",
            "dup2",
            "dup3",
            "fcntl",
            "close",
            "pipe",
            "pipe2",
            "link",
            "linkat",
            "symlink",
            "symlinkat",
            "rename",
            "renameat",
            "renameat2",
            "unlink",
            "unlinkat",
            "mkdir",
            "mkdirat",
            "chmod",
            "fchmod",
            "fchmodat",
            "setuid",
            "setgid",
            "setresuid",
            "setresgid",
            "setns",
            "unshare",
            "ptrace",
            "memfd_create",
            "init_module",
            "finit_module",
            "mount",
            "bpf",
            "kill",
        ] {
            assert!(types.contains(&name), "no case covers {name}");
        }
    }

    #[test]
    fn long_inputs_are_long() {
        assert!(long_path(b"/tmp/x").len() > 4096);
        let pad: usize = deep_env_padding().iter().map(|v| v.len() + 1).sum();
        assert!(pad >= DEEP_ENV_PAD);
    }
}

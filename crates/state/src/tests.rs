//! Field tests by Falco name over the default process tree (see `testutil`).

use vigil_event::{DnsName, EventType, Param, Snapshot, SockAddr, SockTuple};
use vigil_fields::Value;

use crate::testutil::*;
use crate::{State, StateConfig};

mod containers;

fn read(tid: i64, pid: i64, fd: i64) -> vigil_event::Event {
    ev(tid, "read")
        .pid(pid)
        .int("fd", fd)
        .uint("size", 4)
        .bytes("data", "\u{ca}\u{fe}")
        .res(4)
        .build()
}

#[test]
fn proc_fields_on_the_default_tree() {
    let state = tree();
    let e = read(401, 400, 3);
    assert_eq!(f(&state, &e, "proc.name"), "python3");
    assert_eq!(f(&state, &e, "proc.pid"), "400");
    assert_eq!(f(&state, &e, "proc.ppid"), "300");
    assert_eq!(f(&state, &e, "proc.vpid"), "400");
    assert_eq!(f(&state, &e, "proc.pvpid"), "300");
    assert_eq!(f(&state, &e, "proc.pname"), "bash");
    assert_eq!(f(&state, &e, "proc.aname[0]"), "python3");
    assert_eq!(f(&state, &e, "proc.aname[1]"), "bash");
    assert_eq!(f(&state, &e, "proc.aname[2]"), "sshd");
    assert_eq!(f(&state, &e, "proc.aname[3]"), "sshd");
    assert_eq!(f(&state, &e, "proc.aname[4]"), "systemd");
    assert_eq!(field(&state, &e, "proc.aname[5]"), None, "beyond init");
    assert_eq!(field(&state, &e, "proc.aname[-1]"), None);
    assert_eq!(
        f(&state, &e, "proc.aname"),
        "bash sshd sshd systemd",
        "ancestors only"
    );
    assert_eq!(f(&state, &e, "proc.apid[2]"), "200");
    assert_eq!(f(&state, &e, "proc.apid"), "300 200 100 1");
    assert_eq!(f(&state, &e, "proc.aexe[1]"), "-bash");
    assert_eq!(f(&state, &e, "proc.aexepath[2]"), "/usr/sbin/sshd");
    assert_eq!(f(&state, &e, "proc.acmdline[2]"), "sshd -D -R");
    assert_eq!(f(&state, &e, "proc.exe"), "python3");
    assert_eq!(f(&state, &e, "proc.exepath"), "/usr/bin/python3");
    assert_eq!(f(&state, &e, "proc.pexe"), "-bash");
    assert_eq!(f(&state, &e, "proc.pexepath"), "/bin/bash");
    assert_eq!(f(&state, &e, "proc.args"), "script.py -v");
    assert_eq!(f(&state, &e, "proc.cmdline"), "python3 script.py -v");
    assert_eq!(f(&state, &e, "proc.exeline"), "python3 script.py -v");
    assert_eq!(f(&state, &e, "proc.pcmdline"), "bash");
    assert_eq!(f(&state, &e, "proc.cmdnargs"), "2");
    assert_eq!(f(&state, &e, "proc.cmdlenargs"), "11");
    assert_eq!(
        f(&state, &e, "proc.env"),
        "PATH=/usr/bin:/bin HOME=/home/python3 SECRET_TOKEN=abc=def"
    );
    assert_eq!(f(&state, &e, "proc.env[SECRET_TOKEN]"), "abc=def");
    assert_eq!(f(&state, &e, "proc.env[PATH]"), "/usr/bin:/bin");
    assert_eq!(
        field(&state, &e, "proc.env[SECRET]"),
        None,
        "whole names only"
    );
    assert_eq!(f(&state, &e, "proc.cwd"), "/home/alice/work/");
    assert_eq!(f(&state, &e, "proc.tty"), "34816");
    assert_eq!(f(&state, &e, "proc.sid"), "300");
    assert_eq!(f(&state, &e, "proc.sname"), "bash");
    assert_eq!(f(&state, &e, "proc.sid.exe"), "-bash");
    assert_eq!(f(&state, &e, "proc.sid.exepath"), "/bin/bash");
    assert_eq!(f(&state, &e, "proc.vpgid"), "400");
    assert_eq!(f(&state, &e, "proc.vpgid.name"), "python3");
    assert_eq!(f(&state, &e, "proc.vpgid.exe"), "python3");
    assert_eq!(f(&state, &e, "proc.is_vpgid_leader"), "true");
    assert_eq!(f(&state, &e, "proc.is_sid_leader"), "false");
    assert_eq!(
        f(&state, &e, "proc.duration"),
        (1_000_000_000u64 * 601).to_string()
    );
    assert_eq!(
        f(&state, &e, "proc.ppid.duration"),
        (1_000_000_000u64 * 701).to_string()
    );
    assert_eq!(
        f(&state, &e, "proc.pid.ts"),
        (T0 - 600 * 1_000_000_000).to_string()
    );
    assert_eq!(f(&state, &e, "proc.nthreads"), "2");
    assert_eq!(f(&state, &e, "proc.nchilds"), "1");
    assert_eq!(f(&state, &e, "proc.fdopencount"), "6");
    assert_eq!(f(&state, &e, "proc.is_exe_writable"), "false");
    assert_eq!(field(&state, &e, "proc.exe_ino"), None, "unknown inode");
    let bash = read(300, 300, 0);
    assert_eq!(f(&state, &bash, "proc.is_sid_leader"), "true");
    assert_eq!(f(&state, &bash, "proc.sname"), "bash");
    let init = read(1, 1, 0);
    assert_eq!(field(&state, &init, "proc.pname"), None);
    assert_eq!(field(&state, &init, "proc.ppid"), None);
    assert_eq!(
        f(&state, &init, "proc.aname"),
        "",
        "an empty list is a value"
    );
    assert_eq!(f(&state, &init, "proc.args"), "");
    assert_eq!(f(&state, &init, "proc.cmdline"), "systemd");
}

#[test]
fn thread_fields() {
    let state = tree();
    let e = read(401, 400, 0);
    assert_eq!(f(&state, &e, "thread.tid"), "401");
    assert_eq!(f(&state, &e, "thread.vtid"), "401");
    assert_eq!(f(&state, &e, "thread.ismain"), "false");
    assert_eq!(f(&state, &e, "thread.cap_permitted"), "");
    assert_eq!(f(&state, &e, "thread.cgroups"), "0::/user.slice");
    let root = read(100, 100, 0);
    assert_eq!(f(&state, &root, "thread.ismain"), "true");
    let caps = f(&state, &root, "thread.cap_effective");
    assert!(caps.starts_with("CAP_CHOWN CAP_DAC_OVERRIDE"), "{caps}");
    assert!(
        caps.contains("CAP_SYS_ADMIN") && caps.ends_with("CAP_CHECKPOINT_RESTORE"),
        "{caps}"
    );
    assert_eq!(f(&state, &root, "thread.cap_inheritable"), "");
}

#[test]
fn user_and_group_fields() {
    let state = tree();
    let e = read(400, 400, 0);
    assert_eq!(f(&state, &e, "user.uid"), "1000");
    assert_eq!(f(&state, &e, "user.name"), "alice");
    assert_eq!(f(&state, &e, "user.homedir"), "/home/alice");
    assert_eq!(f(&state, &e, "user.shell"), "/bin/zsh");
    assert_eq!(f(&state, &e, "user.loginuid"), "1000");
    assert_eq!(f(&state, &e, "user.loginname"), "alice");
    assert_eq!(f(&state, &e, "group.gid"), "1000");
    assert_eq!(f(&state, &e, "group.name"), "alice");
    let sshd = read(100, 100, 0);
    assert_eq!(f(&state, &sshd, "user.name"), "root");
    assert_eq!(f(&state, &sshd, "user.loginuid"), "-1");
    assert_eq!(field(&state, &sshd, "user.loginname"), None);

    // A snapshot's users replace the configured database; an unknown uid has no name.
    let mut snap = snapshot();
    let (users, groups) = users_snapshot();
    snap.users = users;
    snap.groups = groups;
    let mut state = State::new(StateConfig {
        user_db: Box::new(user_db()),
        ..StateConfig::default()
    });
    state.load_snapshot(&snap);
    assert_eq!(f(&state, &e, "user.name"), "bob");
    assert_eq!(f(&state, &e, "group.name"), "bobs");
    assert_eq!(
        field(&state, &sshd, "user.name"),
        None,
        "root is not in the snapshot's users"
    );
    assert_eq!(f(&state, &sshd, "user.uid"), "0");
}

#[test]
fn container_and_k8s_fields() {
    let state = tree();
    let host = read(400, 400, 0);
    assert_eq!(f(&state, &host, "container.id"), "host");
    assert_eq!(f(&state, &host, "container.name"), "host");
    assert_eq!(field(&state, &host, "container.image"), None);
    assert_eq!(field(&state, &host, "container.image.repository"), None);
    assert_eq!(field(&state, &host, "container.privileged"), None);
    assert_eq!(
        field(&state, &host, "container.mount.dest[/var/run/docker.sock]"),
        None
    );
    assert_eq!(field(&state, &host, "k8s.ns.name"), None);
    assert_eq!(field(&state, &host, "container.start_ts"), None);

    let c = read(700, 700, 0);
    assert_eq!(f(&state, &c, "container.id"), "3ad7b26ded6d");
    assert_eq!(f(&state, &c, "container.full_id"), "3ad7b26ded6d");
    assert_eq!(f(&state, &c, "container.name"), "web");
    assert_eq!(f(&state, &c, "container.type"), "docker");
    assert_eq!(
        f(&state, &c, "container.image"),
        "docker.io/library/nginx:1.25"
    );
    assert_eq!(
        f(&state, &c, "container.image.repository"),
        "docker.io/library/nginx"
    );
    assert_eq!(f(&state, &c, "container.image.tag"), "1.25");
    assert_eq!(
        field(&state, &c, "container.image.digest"),
        None,
        "empty = unknown"
    );
    assert_eq!(f(&state, &c, "container.privileged"), "true");
    assert_eq!(
        f(&state, &c, "container.mounts"),
        "/var/run/docker.sock:/var/run/docker.sock::true:rprivate /etc:/host/etc:ro:false:rprivate"
    );
    assert_eq!(
        f(&state, &c, "container.mount.dest[/var/run/docker.sock]"),
        "/var/run/docker.sock"
    );
    assert_eq!(f(&state, &c, "container.mount.dest[/etc]"), "/host/etc");
    assert_eq!(f(&state, &c, "container.mount.dest[/et*]"), "/host/etc");
    assert_eq!(field(&state, &c, "container.mount.dest[/proc*]"), None);
    assert_eq!(f(&state, &c, "container.mount.dest[1]"), "/host/etc");
    assert_eq!(f(&state, &c, "container.mount.source[/host/etc]"), "/etc");
    assert_eq!(f(&state, &c, "container.mount.mode[/etc]"), "ro");
    assert_eq!(f(&state, &c, "container.mount.rdwr[/etc]"), "false");
    assert_eq!(f(&state, &c, "container.mount[/proc]"), "none");
    assert_eq!(
        f(&state, &c, "container.mount[0]"),
        "/var/run/docker.sock:/var/run/docker.sock::true:rprivate"
    );
    assert_eq!(f(&state, &c, "k8s.pod.name"), "web-0");
    assert_eq!(f(&state, &c, "k8s.ns.name"), "prod");
    assert_eq!(field(&state, &c, "k8s.pod.uid"), None);
    assert_eq!(f(&state, &c, "container.label.app"), "web");
    assert_eq!(
        f(&state, &c, "container.start_ts"),
        (T0 - 500_000_000_000).to_string()
    );
    assert_eq!(f(&state, &c, "proc.vpid"), "1");
    assert_eq!(f(&state, &c, "user.name"), "www-data");
    assert_eq!(f(&state, &c, "proc.pname"), "containerd-shim");

    // A container the runtime did not describe: id only; start from its pid-namespace init.
    let mut state = tree();
    let other = "0123456789abcdef".repeat(4);
    let exec = ev(700, "execve")
        .bytes("filename", "/bin/sh")
        .bytes("cgroups", format!("/kubepods/besteffort/podx/{other}"))
        .build();
    state.apply(&exec);
    assert_eq!(f(&state, &exec, "container.id"), "0123456789ab");
    assert_eq!(field(&state, &exec, "container.name"), None);
    assert_eq!(field(&state, &exec, "container.image.repository"), None);
    assert_eq!(
        f(&state, &exec, "container.start_ts"),
        (T0 - 300 * 1_000_000_000).to_string()
    );
}

#[test]
fn evt_fields() {
    let mut state = tree();
    let e = apply(
        &mut state,
        ev(400, "openat")
            .num(42)
            .ts(T0 + 123)
            .int("dirfd", -100)
            .bytes("name", "../notes.txt")
            .uint("flags", O_WRONLY | O_CREAT | O_CLOEXEC)
            .uint("mode", 0o755)
            .res(7)
            .build(),
    );
    assert_eq!(f(&state, &e, "evt.num"), "42");
    assert_eq!(f(&state, &e, "evt.type"), "openat");
    assert_eq!(f(&state, &e, "syscall.type"), "openat");
    assert_eq!(f(&state, &e, "evt.dir"), "<");
    assert_eq!(f(&state, &e, "evt.source"), "syscall");
    assert_eq!(f(&state, &e, "evt.category"), "file");
    assert_eq!(
        f(&state, &e, "evt.hostname"),
        "testhost",
        "snapshot hostname wins"
    );
    assert_eq!(f(&state, &e, "evt.rawtime"), (T0 + 123).to_string());
    assert_eq!(f(&state, &e, "evt.time"), "22:13:20.000000123");
    assert_eq!(
        f(&state, &e, "evt.datetime"),
        "2023-11-14 22:13:20.000000123"
    );
    assert_eq!(
        f(&state, &e, "evt.time.iso8601"),
        "2023-11-14T22:13:20.000000123Z"
    );
    assert_eq!(f(&state, &e, "evt.rawtime.s"), "1700000000");
    assert_eq!(f(&state, &e, "evt.res"), "SUCCESS");
    assert_eq!(f(&state, &e, "evt.rawres"), "7");
    assert_eq!(f(&state, &e, "evt.failed"), "false");
    assert_eq!(f(&state, &e, "evt.arg.fd"), "7");
    assert_eq!(f(&state, &e, "evt.arg.res_or_fd"), "7");
    assert_eq!(f(&state, &e, "evt.arg.name"), "../notes.txt", "raw path");
    assert_eq!(f(&state, &e, "evt.arg[0]"), "7", "position 0 is the result");
    assert_eq!(f(&state, &e, "evt.arg[2]"), "../notes.txt");
    assert_eq!(f(&state, &e, "evt.arg[name]"), "../notes.txt");
    assert_eq!(f(&state, &e, "evt.arg.dirfd"), "-100");
    assert_eq!(field(&state, &e, "evt.arg.dev"), None, "absent parameter");
    assert_eq!(field(&state, &e, "evt.arg.nosuch"), None);
    assert_eq!(field(&state, &e, "evt.arg[99]"), None);
    let flags = f(&state, &e, "evt.arg.flags");
    let mut expect = String::new();
    vigil_event::flags::render(
        vigil_event::FlagTable::Open,
        O_WRONLY | O_CREAT | O_CLOEXEC,
        &mut expect,
    );
    assert_eq!(flags, expect, "rendered by the flag tables");
    // Falco's form: `name=value(resolved)`.
    assert_eq!(
        f(&state, &e, "evt.args"),
        "fd=7(<f>/home/alice/notes.txt) dirfd=-100(AT_FDCWD) name=../notes.txt(/home/alice/notes.txt) \
         flags=524353(O_WRONLY|O_CREAT|O_CLOEXEC) \
         mode=0755(S_IRUSR|S_IWUSR|S_IXUSR|S_IRGRP|S_IXGRP|S_IROTH|S_IXOTH)"
    );
    assert_eq!(f(&state, &e, "evt.is_open_read"), "false");
    assert_eq!(f(&state, &e, "evt.is_open_write"), "true");
    assert_eq!(f(&state, &e, "evt.is_open_create"), "true");
    assert_eq!(f(&state, &e, "evt.is_open_exec"), "true");
    assert_eq!(f(&state, &e, "fs.path.name"), "/home/alice/notes.txt");
    assert_eq!(f(&state, &e, "evt.abspath"), "/home/alice/notes.txt");
    assert_eq!(f(&state, &e, "fs.path.nameraw"), "../notes.txt");
    assert_eq!(f(&state, &e, "evt.count"), "1");

    let r = read(400, 400, 3);
    assert_eq!(
        values(&state, &r, "evt.buffer"),
        Some(vec![s("\u{ca}\u{fe}")])
    );
    assert_eq!(f(&state, &r, "evt.buflen"), "4");
    assert_eq!(f(&state, &r, "evt.is_io_read"), "true");
    assert_eq!(f(&state, &r, "evt.io_dir"), "r");
    assert_eq!(f(&state, &r, "evt.is_open_read"), "false", "not an open");
    assert_eq!(field(&state, &r, "fs.path.name"), None);

    let failed = ev(400, "unlinkat")
        .int("dirfd", 5)
        .bytes("name", "shadow")
        .res(-13)
        .build();
    assert_eq!(f(&state, &failed, "evt.failed"), "true");
    assert_eq!(f(&state, &failed, "evt.rawres"), "-13");
    let res = f(&state, &failed, "evt.res");
    assert_eq!(
        res,
        vigil_event::flags::errno_name(13).map_or("-13".to_string(), str::to_string)
    );
    assert_eq!(
        f(&state, &failed, "fs.path.name"),
        "/etc/shadow",
        "resolved against dirfd 5"
    );

    let exit = ev(400, "procexit").int("status", 0).build();
    assert_eq!(field(&state, &exit, "syscall.type"), None);
    assert_eq!(field(&state, &exit, "evt.res"), None);
    assert_eq!(f(&state, &exit, "evt.type"), "procexit");

    let rename = ev(400, "renameat2")
        .int("olddirfd", -100)
        .bytes("oldpath", "a")
        .int("newdirfd", 5)
        .bytes("newpath", "b/../c")
        .build();
    assert_eq!(f(&state, &rename, "fs.path.source"), "/home/alice/work/a");
    assert_eq!(f(&state, &rename, "fs.path.target"), "/etc/c");
    assert_eq!(f(&state, &rename, "fs.path.targetraw"), "b/../c");
    assert_eq!(f(&state, &rename, "evt.abspath.dst"), "/etc/c");
}

#[test]
fn evt_arg_renders_uids_and_flags() {
    let state = tree();
    let e = ev(400, "setuid").uint("uid", 33).build();
    assert_eq!(f(&state, &e, "evt.arg.uid"), "www-data");
    let e = ev(400, "setuid").uint("uid", 4242).build();
    assert_eq!(f(&state, &e, "evt.arg.uid"), "4242");
    assert_eq!(f(&state, &e, "evt.arg.res"), "0");
    let e = ev(400, "connect")
        .int("fd", 4)
        .arg(
            "addr",
            Param::Addr(SockAddr::Inet {
                ip: "1.2.3.4".parse().unwrap(),
                port: 80,
            }),
        )
        .tuple("tuple", 6, "10.0.0.5:5555", "1.2.3.4:80")
        .build();
    assert_eq!(f(&state, &e, "evt.arg.addr"), "1.2.3.4:80");
    assert_eq!(f(&state, &e, "evt.arg.tuple"), "10.0.0.5:5555->1.2.3.4:80");
    let exec = ev(400, "execve")
        .bytes("filename", "/bin/ls")
        .uint("exe_flags", 3)
        .build();
    assert_eq!(
        f(&state, &exec, "evt.arg.flags"),
        "EXE_WRITABLE|EXE_UPPER_LAYER",
        "Falco's name for exe flags"
    );
}

#[test]
fn fd_lifecycle_open_dup_close() {
    let mut state = tree();
    let open = apply(
        &mut state,
        ev(401, "openat")
            .pid(400)
            .int("dirfd", 5)
            .bytes("name", "passwd")
            .uint("flags", O_RDONLY)
            .res(6)
            .build(),
    );
    assert_eq!(f(&state, &open, "fd.num"), "6");
    assert_eq!(f(&state, &open, "fd.name"), "/etc/passwd");
    assert_eq!(f(&state, &open, "fd.nameraw"), "passwd");
    assert_eq!(f(&state, &open, "fd.directory"), "/etc");
    assert_eq!(f(&state, &open, "fd.filename"), "passwd");
    assert_eq!(f(&state, &open, "fd.type"), "file");
    assert_eq!(f(&state, &open, "fd.typechar"), "f");
    assert_eq!(f(&state, &open, "evt.is_open_read"), "true");
    assert_eq!(
        field(&state, &open, "fd.sip"),
        None,
        "files have no addresses"
    );
    assert_eq!(
        f(&state, &open, "fd.l4proto"),
        "<NA>",
        "Falco: every descriptor has one"
    );
    state.finish(&open);

    // Visible from the other thread of the process.
    let r = read(400, 400, 6);
    assert_eq!(f(&state, &r, "fd.name"), "/etc/passwd");

    let dup = apply(
        &mut state,
        ev(400, "dup2")
            .int("oldfd", 6)
            .int("newfd", 1)
            .res(1)
            .build(),
    );
    assert_eq!(f(&state, &dup, "fd.name"), "/etc/passwd");
    assert_eq!(f(&state, &read(400, 400, 1), "fd.name"), "/etc/passwd");
    assert_eq!(f(&state, &dup, "fd.types[1]"), "file");
    assert_eq!(f(&state, &dup, "fd.types"), "file ipv4 directory");
    assert_eq!(field(&state, &dup, "fd.types[99]"), None);

    let close = apply(&mut state, ev(400, "close").int("fd", 6).build());
    assert_eq!(
        f(&state, &close, "fd.name"),
        "/etc/passwd",
        "close fields resolve before finish"
    );
    state.finish(&close);
    assert_eq!(field(&state, &close, "fd.name"), None);
    assert_eq!(
        f(&state, &read(400, 400, 1), "fd.name"),
        "/etc/passwd",
        "the dup survives"
    );

    // Directories, `..`, and failed opens.
    let dir = apply(
        &mut state,
        ev(400, "open")
            .bytes("name", "../../alice/./x/..//")
            .uint("flags", O_DIRECTORY)
            .res(8)
            .build(),
    );
    assert_eq!(f(&state, &dir, "fd.name"), "/home/alice");
    assert_eq!(f(&state, &dir, "fd.type"), "directory");
    assert_eq!(f(&state, &dir, "fd.directory"), "/home/alice");
    assert_eq!(field(&state, &dir, "fd.filename"), None);
    let fail = apply(
        &mut state,
        ev(400, "openat")
            .int("dirfd", -100)
            .bytes("name", "secret/../key")
            .uint("flags", O_RDONLY)
            .res(-2)
            .build(),
    );
    assert_eq!(
        f(&state, &fail, "fd.name"),
        "/home/alice/work/key",
        "from the arguments"
    );
    assert_eq!(f(&state, &fail, "fd.nameraw"), "secret/../key");
    assert_eq!(f(&state, &fail, "fd.directory"), "/home/alice/work");
    // libsinsp's fd.num of a failed open is -1 whatever the error, and its type character
    // `f` (Falco's `open_file_failed`: `fd.typechar='f' and fd.num=-1`).
    assert_eq!(f(&state, &fail, "fd.num"), "-1");
    assert_eq!(f(&state, &fail, "fd.typechar"), "f");
    assert_eq!(field(&state, &fail, "fd.type"), None);
    // libsinsp names `open`'s failures `o` (its type-character table leaves `open` out).
    let fail_open = apply(
        &mut state,
        ev(400, "open")
            .bytes("name", "/nowhere")
            .uint("flags", O_RDONLY)
            .res(-13)
            .build(),
    );
    assert_eq!(f(&state, &fail_open, "fd.num"), "-1");
    assert_eq!(f(&state, &fail_open, "fd.typechar"), "o");
    assert_eq!(field(&state, &read(400, 400, -2), "fd.name"), None);
    let fds_before = state.stats().fds;
    state.finish(&fail);
    assert_eq!(state.stats().fds, fds_before, "failed open adds nothing");

    // Unknown dirfd: the raw path is kept.
    let odd = apply(
        &mut state,
        ev(400, "openat")
            .int("dirfd", 77)
            .bytes("name", "rel")
            .res(9)
            .build(),
    );
    assert_eq!(f(&state, &odd, "fd.name"), "rel");
}

#[test]
fn pipes_memfd_and_other_fds() {
    let mut state = tree();
    let pipe = apply(
        &mut state,
        ev(400, "pipe2")
            .int("fd1", 10)
            .int("fd2", 11)
            .uint("ino", 777)
            .uint("flags", O_CLOEXEC)
            .build(),
    );
    assert_eq!(f(&state, &pipe, "fd.type"), "pipe");
    assert_eq!(f(&state, &pipe, "fd.name"), "pipe:[777]");
    assert_eq!(f(&state, &read(400, 400, 11), "fd.typechar"), "p");
    let memfd = apply(
        &mut state,
        ev(400, "memfd_create")
            .bytes("name", "payload")
            .uint("flags", 0)
            .res(12)
            .build(),
    );
    assert_eq!(f(&state, &memfd, "fd.name"), "memfd:payload");
    assert_eq!(f(&state, &memfd, "fd.type"), "memfd");
    let ep = apply(&mut state, ev(400, "epoll_create1").res(13).build());
    assert_eq!(f(&state, &ep, "fd.type"), "eventpoll");
    let bpf = apply(&mut state, ev(400, "bpf").uint("cmd", 5).res(14).build());
    assert_eq!(f(&state, &bpf, "fd.typechar"), "b");
    let bpf_no_fd = apply(&mut state, ev(400, "bpf").uint("cmd", 2).res(0).build());
    assert_eq!(
        f(&state, &bpf_no_fd, "fd.name"),
        "/dev/pts/0",
        "cmd 2 returns no fd: fd 0 untouched"
    );
    let sp = apply(
        &mut state,
        ev(400, "socketpair")
            .uint("domain", 1)
            .uint("type", 1)
            .uint("proto", 0)
            .int("fd1", 15)
            .int("fd2", 16)
            .build(),
    );
    assert_eq!(f(&state, &sp, "fd.type"), "unix");
    assert_eq!(f(&state, &sp, "fd.sockfamily"), "unix");
    assert_eq!(f(&state, &read(400, 400, 16), "fd.type"), "unix");
}

#[test]
fn inet_sockets() {
    let mut state = tree();
    // A connection from the snapshot (this process the client).
    let r = read(400, 400, 4);
    assert_eq!(
        f(&state, &r, "fd.name"),
        "10.0.0.5:40000->93.184.216.34:443"
    );
    assert_eq!(f(&state, &r, "fd.type"), "ipv4");
    assert_eq!(f(&state, &r, "fd.typechar"), "4");
    assert_eq!(f(&state, &r, "fd.l4proto"), "tcp");
    assert_eq!(f(&state, &r, "fd.sockfamily"), "ip");
    assert_eq!(f(&state, &r, "fd.cip"), "10.0.0.5");
    assert_eq!(f(&state, &r, "fd.sip"), "93.184.216.34");
    assert_eq!(f(&state, &r, "fd.lip"), "10.0.0.5");
    assert_eq!(f(&state, &r, "fd.rip"), "93.184.216.34");
    assert_eq!(f(&state, &r, "fd.cport"), "40000");
    assert_eq!(f(&state, &r, "fd.sport"), "443");
    assert_eq!(f(&state, &r, "fd.lport"), "40000");
    assert_eq!(f(&state, &r, "fd.rport"), "443");
    assert_eq!(f(&state, &r, "fd.ip"), "10.0.0.5 93.184.216.34");
    assert_eq!(f(&state, &r, "fd.port"), "40000 443");
    assert_eq!(
        values(&state, &r, "fd.snet"),
        Some(vec![Value::Ip("93.184.216.34".parse().unwrap())])
    );
    assert_eq!(f(&state, &r, "fd.connected"), "true");
    assert_eq!(f(&state, &r, "fd.is_server"), "false");
    assert_eq!(f(&state, &r, "fd.name_changed"), "false");
    assert_eq!(
        field(&state, &r, "fd.sip.name"),
        None,
        "no DNS table, no name"
    );

    // socket + connect.
    let sock = apply(
        &mut state,
        ev(400, "socket")
            .uint("domain", 2)
            .uint("type", 2)
            .uint("proto", 0)
            .res(20)
            .build(),
    );
    assert_eq!(f(&state, &sock, "fd.l4proto"), "udp");
    assert_eq!(f(&state, &sock, "fd.connected"), "false");
    assert_eq!(
        f(&state, &sock, "fd.name"),
        "",
        "no tuple yet: empty, as in Falco"
    );
    assert_eq!(
        f(&state, &sock, "evt.args"),
        "fd=20(<4u>) domain=2(AF_INET) type=2 proto=0"
    );
    let conn = apply(
        &mut state,
        ev(400, "connect")
            .int("fd", 20)
            .tuple("tuple", 17, "10.0.0.5:5353", "8.8.8.8:53")
            .build(),
    );
    assert_eq!(f(&state, &conn, "fd.name"), "10.0.0.5:5353->8.8.8.8:53");
    assert_eq!(f(&state, &conn, "fd.rport"), "53");
    assert_eq!(f(&state, &conn, "fd.connected"), "true");
    assert_eq!(f(&state, &conn, "fd.name_changed"), "true");
    assert_eq!(f(&state, &conn, "fd.l4proto"), "udp");
    // UDP sendto to another peer changes the name; the same tuple does not.
    let send = apply(
        &mut state,
        ev(400, "sendto")
            .int("fd", 20)
            .uint("size", 1)
            .tuple("tuple", 17, "10.0.0.5:5353", "1.1.1.1:53")
            .res(1)
            .build(),
    );
    assert_eq!(f(&state, &send, "fd.name_changed"), "true");
    assert_eq!(f(&state, &send, "fd.sip"), "1.1.1.1");
    let again = apply(
        &mut state,
        ev(400, "sendto")
            .int("fd", 20)
            .uint("size", 1)
            .tuple("tuple", 17, "10.0.0.5:5353", "1.1.1.1:53")
            .res(1)
            .build(),
    );
    assert_eq!(f(&state, &again, "fd.name_changed"), "false");
    // A failed connect changes nothing; EINPROGRESS connects.
    let refused = apply(
        &mut state,
        ev(400, "connect")
            .int("fd", 20)
            .tuple("tuple", 17, "10.0.0.5:5353", "9.9.9.9:53")
            .res(-111)
            .build(),
    );
    assert_eq!(f(&state, &refused, "fd.sip"), "1.1.1.1");

    // A server: bind, listen, accept. Local = server end.
    let srv = apply(
        &mut state,
        ev(300, "socket")
            .uint("domain", 10)
            .uint("type", 1)
            .res(5)
            .build(),
    );
    assert_eq!(f(&state, &srv, "fd.type"), "ipv6");
    apply(
        &mut state,
        ev(300, "bind")
            .int("fd", 5)
            .arg(
                "addr",
                Param::Addr(SockAddr::Inet {
                    ip: "::".parse().unwrap(),
                    port: 8080,
                }),
            )
            .build(),
    );
    let listen = apply(
        &mut state,
        ev(300, "listen").int("fd", 5).int("backlog", 5).build(),
    );
    assert_eq!(f(&state, &listen, "fd.lport"), "8080");
    assert_eq!(f(&state, &listen, "fd.is_server"), "true");
    let acc = apply(
        &mut state,
        ev(300, "accept4")
            .tuple("tuple", 6, "[2001:db8::7]:51000", "[2001:db8::1]:8080")
            .uint("flags", 0)
            .res(6)
            .build(),
    );
    assert_eq!(f(&state, &acc, "fd.type"), "ipv6");
    assert_eq!(f(&state, &acc, "fd.lport"), "8080");
    assert_eq!(f(&state, &acc, "fd.rport"), "51000");
    assert_eq!(f(&state, &acc, "fd.rip"), "2001:db8::7");
    assert_eq!(f(&state, &acc, "fd.lip"), "2001:db8::1");
    assert_eq!(f(&state, &acc, "fd.is_server"), "true");
    assert_eq!(
        f(&state, &acc, "fd.name"),
        "2001:db8::7:51000->2001:db8::1:8080"
    );

    // Unix sockets.
    apply(
        &mut state,
        ev(300, "socket")
            .uint("domain", 1)
            .uint("type", 1)
            .res(7)
            .build(),
    );
    let uconn = apply(
        &mut state,
        ev(300, "connect")
            .int("fd", 7)
            .arg(
                "addr",
                Param::Addr(SockAddr::Unix {
                    path: b"/run/docker.sock".to_vec(),
                }),
            )
            .build(),
    );
    assert_eq!(f(&state, &uconn, "fd.name"), "/run/docker.sock");
    assert_eq!(f(&state, &uconn, "fd.type"), "unix");
    assert_eq!(field(&state, &uconn, "fd.sip"), None);
    let uacc = apply(
        &mut state,
        ev(300, "accept")
            .arg(
                "tuple",
                Param::Tuple(SockTuple::Unix {
                    path: b"/run/x.sock".to_vec(),
                }),
            )
            .res(8)
            .build(),
    );
    assert_eq!(f(&state, &uacc, "fd.name"), "/run/x.sock");
}

#[test]
fn packet_sockets_are_descriptors_of_unknown_type() {
    let mut state = tree();
    // socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL)) as tcpdump makes it.
    let sock = apply(
        &mut state,
        ev(400, "socket")
            .uint("domain", 17)
            .uint("type", 3)
            .uint("proto", 768)
            .res(9)
            .build(),
    );
    assert_eq!(f(&state, &sock, "fd.type"), "<NA>");
    assert_eq!(f(&state, &sock, "fd.typechar"), "o");
    assert_eq!(f(&state, &sock, "fd.l4proto"), "<NA>");
    assert_eq!(f(&state, &sock, "fd.name"), "");
    assert_eq!(field(&state, &sock, "fd.lport"), None);
    assert_eq!(field(&state, &sock, "fd.sip"), None);
    assert_eq!(f(&state, &sock, "evt.arg.domain"), "AF_PACKET");
    assert_eq!(
        f(&state, &sock, "evt.args"),
        "fd=9(<o>) domain=17(AF_PACKET) type=3 proto=768"
    );
    let types = values(&state, &read(400, 400, 0), "fd.types").unwrap();
    assert!(types.contains(&s("<NA>")), "{types:?}");
}

#[test]
fn evt_args_resolve_like_falco() {
    let mut state = tree();
    let failed = apply(
        &mut state,
        ev(400, "openat")
            .int("dirfd", 5)
            .bytes("name", "missing")
            .uint("flags", 0)
            .res(-2)
            .build(),
    );
    assert_eq!(
        f(&state, &failed, "evt.args"),
        "fd=-2(ENOENT) dirfd=5(<d>/etc) name=missing(/etc/missing) flags=0(O_RDONLY)"
    );
    let setuid = apply(
        &mut state,
        ev(400, "setresuid")
            .uint("ruid", 0)
            .uint("euid", 4242)
            .uint("suid", u64::from(u32::MAX))
            .res(-1)
            .build(),
    );
    assert_eq!(
        f(&state, &setuid, "evt.args"),
        "res=-1(EPERM) ruid=0(root) euid=4242(<NA>) suid=-1(<NONE>)"
    );
    let kill = apply(
        &mut state,
        ev(400, "kill").int("pid", 300).uint("sig", 9).build(),
    );
    assert_eq!(
        f(&state, &kill, "evt.args"),
        "res=0 pid=300(bash) sig=9(SIGKILL)"
    );
    let close = apply(&mut state, ev(400, "close").int("fd", 4).build());
    assert_eq!(
        f(&state, &close, "evt.args"),
        "res=0 fd=4(<4t>10.0.0.5:40000->93.184.216.34:443)"
    );
    let exit = apply(&mut state, ev(400, "procexit").int("status", 0).build());
    assert_eq!(f(&state, &exit, "evt.args"), "status=0");
}

#[test]
fn dns_names_of_socket_addresses() {
    let mut state = tree();
    let ip = |text: &str| -> std::net::IpAddr { text.parse().unwrap() };
    state.load_snapshot(&Snapshot {
        dns: vec![
            DnsName {
                name: "example.com".into(),
                addrs: vec![ip("93.184.216.34"), ip("2606:2800:220:1::1")],
            },
            DnsName {
                name: "www.example.com".into(),
                addrs: vec![ip("93.184.216.34")],
            },
            // A repeated name adds no second value.
            DnsName {
                name: "example.com".into(),
                addrs: vec![ip("93.184.216.34")],
            },
            DnsName {
                name: "laptop.lan".into(),
                addrs: vec![ip("10.0.0.5")],
            },
            DnsName {
                name: "api.internal".into(),
                addrs: vec![ip("2001:db8::1")],
            },
        ],
        ..Snapshot::default()
    });
    assert_eq!(
        state.dns_names(&ip("93.184.216.34")),
        ["example.com", "www.example.com"]
    );
    // The snapshot connection: this process is the client 10.0.0.5.
    let r = read(400, 400, 4);
    assert_eq!(
        values(&state, &r, "fd.sip.name"),
        Some(vec![s("example.com"), s("www.example.com")]),
        "every name of the address is a value"
    );
    assert_eq!(f(&state, &r, "fd.rip.name"), "example.com www.example.com");
    assert_eq!(f(&state, &r, "fd.cip.name"), "laptop.lan");
    assert_eq!(f(&state, &r, "fd.lip.name"), "laptop.lan");
    // A file descriptor has no addresses, so no names.
    assert_eq!(field(&state, &read(400, 400, 3), "fd.sip.name"), None);

    // An accepted connection: local = server end; the client's address has no name.
    let acc = apply(
        &mut state,
        ev(300, "accept4")
            .tuple("tuple", 6, "[2001:db8::7]:51000", "[2001:db8::1]:8080")
            .uint("flags", 0)
            .res(6)
            .build(),
    );
    assert_eq!(f(&state, &acc, "fd.lip.name"), "api.internal");
    assert_eq!(f(&state, &acc, "fd.sip.name"), "api.internal");
    assert_eq!(field(&state, &acc, "fd.rip.name"), None);
    assert_eq!(field(&state, &acc, "fd.cip.name"), None);
}

#[test]
fn clone_events_carry_the_childs_namespace_ids() {
    let mut state = tree();
    // A process in a container (vpid 1) forks: without vtid/vpid the child's namespace ids are
    // unknown; with them they are what the event says.
    apply(
        &mut state,
        ev(600, "unshare").uint("flags", 0x2000_0000).build(),
    );
    apply(&mut state, ev(600, "fork").res(1000).build());
    assert_eq!(f(&state, &read(1000, 1000, 0), "proc.vpid"), "1");
    apply(&mut state, ev(1000, "fork").res(1001).build());
    assert_eq!(field(&state, &read(1001, 1001, 0), "proc.vpid"), None);
    apply(
        &mut state,
        ev(1000, "clone")
            .uint("flags", 17)
            .int("vtid", 7)
            .int("vpid", 7)
            .res(1002)
            .build(),
    );
    let child = read(1002, 1002, 0);
    assert_eq!(f(&state, &child, "proc.vpid"), "7");
    assert_eq!(f(&state, &child, "thread.vtid"), "7");
    assert_eq!(f(&state, &child, "proc.pvpid"), "1");
    // A thread of it (CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|CLONE_THREAD).
    apply(
        &mut state,
        ev(1002, "clone3")
            .uint("flags", 0x10f00)
            .int("vtid", 8)
            .int("vpid", 7)
            .res(1003)
            .build(),
    );
    let thread = read(1003, 1002, 0);
    assert_eq!(f(&state, &thread, "thread.vtid"), "8");
    assert_eq!(f(&state, &thread, "proc.vpid"), "7");
    assert_eq!(f(&state, &thread, "thread.ismain"), "false");
    // vfork with the ids; a host process's child keeps its own ids when the event has none.
    apply(
        &mut state,
        ev(1000, "vfork")
            .int("vtid", 9)
            .int("vpid", 9)
            .res(1004)
            .build(),
    );
    assert_eq!(f(&state, &read(1004, 1004, 0), "proc.vpid"), "9");
    apply(&mut state, ev(300, "fork").res(1005).build());
    assert_eq!(f(&state, &read(1005, 1005, 0), "proc.vpid"), "1005");
    assert_eq!(f(&state, &read(1005, 1005, 0), "thread.vtid"), "1005");
    // Non-positive ids are not ids: the fallback applies.
    apply(
        &mut state,
        ev(300, "fork")
            .int("vtid", 0)
            .int("vpid", -1)
            .res(1006)
            .build(),
    );
    assert_eq!(f(&state, &read(1006, 1006, 0), "proc.vpid"), "1006");

    // The child's own return fills in what its parent's event could not tell.
    apply(
        &mut state,
        ev(1001, "fork")
            .int("vtid", 2)
            .int("vpid", 2)
            .res(0)
            .build(),
    );
    assert_eq!(f(&state, &read(1001, 1001, 0), "proc.vpid"), "2");
    assert_eq!(f(&state, &read(1001, 1001, 0), "thread.vtid"), "2");
    // ... and so does the first event of a child whose parent's event was missed.
    apply(
        &mut state,
        ev(1200, "clone")
            .uint("flags", 17)
            .int("vtid", 3)
            .int("vpid", 3)
            .res(0)
            .build(),
    );
    assert_eq!(f(&state, &read(1200, 1200, 0), "proc.vpid"), "3");
    assert_eq!(f(&state, &read(1200, 1200, 0), "thread.vtid"), "3");
}

#[test]
fn clone_exec_exit() {
    let mut state = tree();
    let before = state.stats();
    // bash forks.
    let fork = apply(
        &mut state,
        ev(300, "clone")
            .uint("flags", 17)
            .res(900)
            .ts(T0 + 5)
            .build(),
    );
    assert_eq!(f(&state, &fork, "proc.pid"), "300", "the parent's event");
    let child_read = read(900, 900, 0);
    assert_eq!(f(&state, &child_read, "proc.name"), "bash");
    assert_eq!(f(&state, &child_read, "proc.pname"), "bash");
    assert_eq!(f(&state, &child_read, "proc.ppid"), "300");
    assert_eq!(f(&state, &child_read, "proc.aname[2]"), "sshd");
    assert_eq!(f(&state, &child_read, "proc.cwd"), "/home/alice/");
    assert_eq!(f(&state, &child_read, "user.name"), "alice");
    assert_eq!(f(&state, &child_read, "proc.vpid"), "900");
    assert_eq!(f(&state, &child_read, "proc.pid.ts"), (T0 + 5).to_string());
    assert_eq!(state.stats().processes, before.processes + 1);
    // The child's own clone return is not a new thread.
    apply(
        &mut state,
        ev(900, "clone").uint("flags", 17).res(0).build(),
    );
    assert_eq!(state.stats().unknown_thread_events, 0);

    // The child opens a file with O_CLOEXEC and one without, then executes.
    apply(
        &mut state,
        ev(900, "open")
            .bytes("name", "/tmp/keep")
            .uint("flags", O_WRONLY)
            .res(3)
            .build(),
    );
    apply(
        &mut state,
        ev(900, "open")
            .bytes("name", "/tmp/drop")
            .uint("flags", O_WRONLY | O_CLOEXEC)
            .res(4)
            .build(),
    );
    let exec = apply(
        &mut state,
        ev(900, "execve")
            .bytes("filename", "ls")
            .bytes("exe", "ls")
            .list("args", &["-la", "/root"])
            .list("env", &["LANG=C"])
            .bytes("comm", "ls")
            .bytes("trusted_exepath", "/usr/bin/ls")
            .uint("uid", 0)
            .uint("gid", 0)
            .uint("euid", 0)
            .uint("egid", 0)
            .uint("loginuid", 1000)
            .uint("cap_permitted", 1 << 21)
            .build(),
    );
    assert_eq!(f(&state, &exec, "proc.name"), "ls");
    assert_eq!(f(&state, &exec, "proc.exe"), "ls");
    assert_eq!(f(&state, &exec, "proc.exepath"), "/usr/bin/ls");
    assert_eq!(f(&state, &exec, "proc.cmdline"), "ls -la /root");
    assert_eq!(f(&state, &exec, "proc.pcmdline"), "bash");
    assert_eq!(f(&state, &exec, "proc.pname"), "bash");
    assert_eq!(f(&state, &exec, "proc.aname[3]"), "sshd");
    assert_eq!(f(&state, &exec, "proc.aname[4]"), "systemd");
    assert_eq!(f(&state, &exec, "proc.env"), "LANG=C");
    assert_eq!(f(&state, &exec, "user.name"), "root");
    assert_eq!(f(&state, &exec, "user.loginname"), "alice");
    assert_eq!(f(&state, &exec, "thread.cap_permitted"), "CAP_SYS_ADMIN");
    assert_eq!(f(&state, &exec, "container.id"), "host", "cgroup inherited");
    assert_eq!(f(&state, &read(900, 900, 3), "fd.name"), "/tmp/keep");
    assert_eq!(
        field(&state, &read(900, 900, 4), "fd.name"),
        None,
        "O_CLOEXEC closed at exec"
    );
    assert_eq!(
        f(&state, &read(300, 300, 0), "proc.name"),
        "bash",
        "the parent is unchanged"
    );

    // Without trusted_exepath the filename is resolved against the cwd.
    let exec2 = apply(
        &mut state,
        ev(900, "execve").bytes("filename", "./bin/../tool").build(),
    );
    assert_eq!(f(&state, &exec2, "proc.exepath"), "/home/alice/tool");
    assert_eq!(
        f(&state, &exec2, "proc.name"),
        "tool",
        "comm from the path when not given"
    );
    assert_eq!(f(&state, &exec2, "proc.exe"), "./bin/../tool");
    // A failed exec changes nothing.
    let bad = apply(
        &mut state,
        ev(900, "execve").bytes("filename", "/nope").res(-2).build(),
    );
    assert_eq!(f(&state, &bad, "proc.name"), "tool");

    // Exit: fields still resolve for the procexit event, then the process is gone.
    let exit = apply(&mut state, ev(900, "procexit").int("status", 0).build());
    assert_eq!(f(&state, &exit, "proc.name"), "tool");
    state.finish(&exit);
    assert_eq!(state.stats().processes, before.processes);
    assert_eq!(state.stats().threads, before.threads);
    assert_eq!(state.stats().fds, before.fds);
}

#[test]
fn threads_share_process_data_and_fd_tables() {
    let mut state = tree();
    apply(
        &mut state,
        ev(400, "clone")
            .uint("flags", 0x10000 | 0x800 | 0x400 | 0x100)
            .res(402)
            .build(),
    );
    let t = read(402, 400, 4);
    assert_eq!(f(&state, &t, "thread.tid"), "402");
    assert_eq!(f(&state, &t, "proc.pid"), "400");
    assert_eq!(f(&state, &t, "fd.sport"), "443");
    assert_eq!(f(&state, &t, "proc.nthreads"), "3");
    // A thread's chdir is the process's.
    apply(
        &mut state,
        ev(402, "chdir").pid(400).bytes("path", "/tmp").build(),
    );
    assert_eq!(f(&state, &read(400, 400, 0), "proc.cwd"), "/tmp/");
    // fchdir to an open directory.
    apply(&mut state, ev(400, "fchdir").int("fd", 5).build());
    assert_eq!(f(&state, &read(401, 400, 0), "proc.cwd"), "/etc/");

    // CLONE_FILES without CLONE_THREAD: a new process sharing the fd table.
    apply(
        &mut state,
        ev(400, "clone").uint("flags", 0x400 | 17).res(950).build(),
    );
    apply(
        &mut state,
        ev(950, "open").bytes("name", "/tmp/shared").res(30).build(),
    );
    assert_eq!(f(&state, &read(400, 400, 30), "fd.name"), "/tmp/shared");
    // Without CLONE_FILES: a copy.
    apply(&mut state, ev(400, "fork").res(960).build());
    apply(
        &mut state,
        ev(960, "open")
            .bytes("name", "/tmp/private")
            .res(31)
            .build(),
    );
    assert_eq!(field(&state, &read(400, 400, 31), "fd.name"), None);
    assert_eq!(
        f(&state, &read(960, 960, 30), "fd.name"),
        "/tmp/shared",
        "copied at fork"
    );
    // The sharing process executes: its table is unshared first.
    apply(
        &mut state,
        ev(950, "execve").bytes("filename", "/bin/true").build(),
    );
    apply(
        &mut state,
        ev(950, "open").bytes("name", "/tmp/after").res(32).build(),
    );
    assert_eq!(field(&state, &read(400, 400, 32), "fd.name"), None);

    // Exec from a non-leader thread: the other threads are gone, the leader remains.
    let exec = apply(
        &mut state,
        ev(402, "execve")
            .pid(400)
            .bytes("filename", "/usr/bin/env")
            .build(),
    );
    assert_eq!(f(&state, &exec, "proc.name"), "env");
    assert_eq!(f(&state, &exec, "proc.nthreads"), "1");
    assert_eq!(f(&state, &read(400, 400, 0), "proc.name"), "env");

    // Thread exit keeps the process; the last one removes it.
    let before = state.stats().processes;
    let exit = apply(&mut state, ev(400, "procexit").build());
    state.finish(&exit);
    assert_eq!(state.stats().processes, before - 1);
}

#[test]
fn orphans_are_reparented() {
    let mut state = tree();
    let exit = apply(&mut state, ev(300, "procexit").build());
    state.finish(&exit);
    let e = read(400, 400, 0);
    assert_eq!(f(&state, &e, "proc.ppid"), "1");
    assert_eq!(f(&state, &e, "proc.pname"), "systemd");
    // With a subreaper among the ancestors, it adopts.
    let mut state = tree();
    apply(
        &mut state,
        ev(200, "prctl").int("option", 36).uint("arg2", 1).build(),
    );
    let exit = apply(&mut state, ev(300, "procexit").build());
    state.finish(&exit);
    assert_eq!(f(&state, &e, "proc.pname"), "sshd");
    assert_eq!(f(&state, &e, "proc.ppid"), "200");
}

#[test]
fn credentials_sessions_and_namespaces() {
    let mut state = tree();
    apply(
        &mut state,
        ev(400, "setresuid")
            .uint("ruid", 0)
            .uint("euid", 0)
            .uint("suid", 0)
            .build(),
    );
    let e = read(400, 400, 0);
    assert_eq!(f(&state, &e, "user.name"), "root");
    apply(
        &mut state,
        ev(400, "setreuid")
            .uint("ruid", u64::from(u32::MAX))
            .uint("euid", 33)
            .build(),
    );
    assert_eq!(f(&state, &e, "user.name"), "www-data");
    apply(&mut state, ev(400, "setgid").uint("gid", 0).build());
    assert_eq!(f(&state, &e, "group.name"), "root");
    apply(&mut state, ev(400, "setuid").uint("uid", 0).res(-1).build());
    assert_eq!(
        f(&state, &e, "user.name"),
        "www-data",
        "failed setuid changes nothing"
    );
    apply(
        &mut state,
        ev(400, "capset")
            .uint("cap_inheritable", 0)
            .uint("cap_permitted", 1 << 12)
            .uint("cap_effective", 1 << 12)
            .build(),
    );
    assert_eq!(f(&state, &e, "thread.cap_effective"), "CAP_NET_ADMIN");
    apply(&mut state, ev(400, "setsid").res(400).build());
    assert_eq!(f(&state, &e, "proc.sid"), "400");
    assert_eq!(f(&state, &e, "proc.is_sid_leader"), "true");
    assert_eq!(f(&state, &e, "proc.sname"), "python3");
    apply(
        &mut state,
        ev(300, "setpgid").int("pid", 0).int("pgid", 0).build(),
    );
    assert_eq!(f(&state, &read(300, 300, 0), "proc.vpgid"), "300");

    // unshare(CLONE_NEWPID): the next child is pid 1 of a new namespace; its children unknown.
    apply(
        &mut state,
        ev(600, "unshare").uint("flags", 0x2000_0000).build(),
    );
    apply(&mut state, ev(600, "fork").res(1000).build());
    let init = read(1000, 1000, 0);
    assert_eq!(f(&state, &init, "proc.vpid"), "1");
    apply(&mut state, ev(1000, "fork").res(1001).build());
    assert_eq!(field(&state, &read(1001, 1001, 0), "proc.vpid"), None);
    assert_eq!(field(&state, &read(1001, 1001, 0), "thread.vtid"), None);
    assert_eq!(f(&state, &read(1001, 1001, 0), "proc.pvpid"), "1");
    // clone with CLONE_NEWPID.
    apply(
        &mut state,
        ev(600, "clone")
            .uint("flags", 0x2000_0000 | 17)
            .res(1100)
            .build(),
    );
    assert_eq!(f(&state, &read(1100, 1100, 0), "proc.vpid"), "1");
}

#[test]
fn unknown_threads_and_adversarial_events() {
    let mut state = tree();
    let before = state.stats();
    // An unknown thread: a placeholder whose unknown fields have no value.
    let e = apply(&mut state, read(5000, 5000, 3));
    assert_eq!(state.stats().unknown_thread_events, 1);
    assert_eq!(f(&state, &e, "proc.pid"), "5000");
    assert_eq!(f(&state, &e, "thread.tid"), "5000");
    for name in [
        "proc.name",
        "proc.exe",
        "proc.exepath",
        "proc.cmdline",
        "proc.args",
        "proc.pname",
        "proc.aname[1]",
        "proc.cwd",
        "user.uid",
        "user.name",
        "user.loginuid",
        "group.gid",
        "container.id",
        "container.name",
        "proc.vpid",
        "proc.sname",
        "thread.vtid",
        "fd.name",
        "thread.cap_permitted",
        "proc.tty",
        "proc.duration",
    ] {
        assert_eq!(field(&state, &e, name), None, "{name} should be <NA>");
    }
    // Its exec fills in what is known.
    let exec = apply(
        &mut state,
        ev(5000, "execve")
            .bytes("filename", "/bin/sh")
            .uint("uid", 0)
            .build(),
    );
    assert_eq!(f(&state, &exec, "proc.name"), "sh");
    assert_eq!(f(&state, &exec, "user.uid"), "0");
    assert_eq!(f(&state, &exec, "container.id"), "host");

    // Non-UTF-8 names, huge argv, missing parameters, bad tids, a bogus event type.
    let name = b"/tmp/\xff\xfe\x00evil".to_vec();
    let huge: Vec<Vec<u8>> = (0..10_000)
        .map(|i| format!("arg{i}\u{1b}[31m").into_bytes())
        .collect();
    apply(
        &mut state,
        ev(400, "execve")
            .bytes("filename", &name)
            .arg("args", Param::List(huge))
            .bytes("comm", b"\xc3\x28")
            .build(),
    );
    let e = read(400, 400, 0);
    assert!(f(&state, &e, "proc.cmdline").len() > 100_000);
    assert_eq!(
        values(&state, &e, "proc.name"),
        Some(vec![Value::Str(b"\xc3\x28".to_vec().into())])
    );
    assert_eq!(
        values(&state, &e, "proc.exepath"),
        Some(vec![Value::Str(name.clone().into())])
    );
    let malformed = state.stats().malformed_events;
    apply(&mut state, ev(400, "openat").res(3).build());
    apply(&mut state, ev(400, "dup").res(3).build());
    apply(&mut state, ev(400, "connect").build());
    apply(&mut state, ev(0, "read").build());
    apply(&mut state, ev(-5, "read").build());
    let mut bogus = ev(400, "read").build();
    bogus.etype = EventType(u16::MAX);
    state.apply(&bogus);
    state.finish(&bogus);
    assert_eq!(state.stats().malformed_events, malformed + 6);
    // Fields of a bogus event type do not panic.
    let _ = field(&state, &bogus, "evt.type");
    let _ = field(&state, &bogus, "evt.args");
    let _ = field(&state, &bogus, "fd.name");
    // Wrong parameter representations are ignored, not trusted.
    apply(
        &mut state,
        ev(400, "open")
            .arg("name", Param::Int(5))
            .arg("flags", Param::Bytes(b"x".to_vec()))
            .res(40)
            .build(),
    );
    assert_eq!(field(&state, &read(400, 400, 40), "fd.name"), None);
    // A reused tid under another pid: the stale thread goes.
    let reuse = apply(&mut state, read(401, 7777, 0));
    assert_eq!(f(&state, &reuse, "proc.pid"), "7777");
    assert_eq!(field(&state, &reuse, "proc.name"), None);
    // Every field of the catalog on odd events never panics.
    let catalog = crate::catalog();
    for def in vigil_fields::Catalog::fields(catalog) {
        if def.name.contains('(') {
            // Internal typed variants (of `evt.rawarg`), reached through their public name.
            continue;
        }
        let arg = match def.arg {
            vigil_fields::ArgKind::Index => Some("0"),
            vigil_fields::ArgKind::Key if def.name == "evt.rawarg" => Some("flags"),
            vigil_fields::ArgKind::Key => Some("x"),
            _ => None,
        };
        for evt in [&bogus, &reuse, &e, &exec] {
            let r = vigil_fields::Catalog::lookup(catalog, def.name, arg).unwrap();
            let view = state.view(evt);
            let mut out = Vec::new();
            let _ = vigil_fields::Extract::extract(&view, &r, &mut out);
        }
    }
    assert!(state.stats().threads >= before.threads);
}

#[test]
fn procexit_of_unknown_and_table_bounds() {
    let mut state = State::new(StateConfig {
        max_threads: 3,
        max_fds_per_table: 2,
        ..StateConfig::default()
    });
    state.load_snapshot(&Snapshot::default());
    for tid in 1..=5 {
        state.apply(&read(tid, tid, 0));
    }
    let stats = state.stats();
    assert_eq!(stats.threads, 3);
    assert_eq!(stats.dropped_threads, 2);
    assert_eq!(
        stats.processes, 3,
        "processes of dropped threads are not kept"
    );
    for fd in 0..4 {
        state.apply(&ev(1, "open").bytes("name", "/x").res(fd).build());
    }
    assert_eq!(state.stats().fds, 2);
    assert_eq!(state.stats().dropped_fds, 2);
    // Events of the dropped threads still extract without panicking.
    assert_eq!(field(&state, &read(5, 5, 0), "proc.pid"), None);
    let exit = ev(42, "procexit").build();
    state.finish(&exit);
}

#[test]
fn snapshot_hostname_and_config_hostname() {
    let mut state = State::new(StateConfig {
        hostname: b"cfg".to_vec(),
        ..StateConfig::default()
    });
    let e = read(1, 1, 0);
    assert_eq!(f(&state, &e, "evt.hostname"), "cfg");
    state.load_snapshot(&Snapshot {
        hostname: b"snap".to_vec(),
        ..Snapshot::default()
    });
    assert_eq!(f(&state, &e, "evt.hostname"), "snap");
}

/// Descriptor objects and images are reused (in place, or from the spares of closed
/// descriptors and dead processes): nothing of a previous owner may show through, and objects
/// still shared (fork copies, dups, a parent's image) are never overwritten.
#[test]
fn reused_objects_and_images_do_not_leak() {
    let mut state = tree();
    let open = |state: &mut State, tid: i64, name: &str, res: i64| {
        apply(state, ev(tid, "open").bytes("name", name).res(res).build())
    };
    let close = |state: &mut State, tid: i64, fd: i64| {
        let evt = apply(state, ev(tid, "close").int("fd", fd).build());
        state.finish(&evt);
    };
    open(&mut state, 400, "notes/a.txt", 20);
    apply(
        &mut state,
        ev(400, "dup2")
            .int("oldfd", 20)
            .int("newfd", 21)
            .res(21)
            .build(),
    );
    apply(&mut state, ev(400, "fork").res(970).build());
    // Reopening fd 20 in the parent: the dup and the child's copy keep the old object.
    let reopened = open(&mut state, 400, "/etc/hosts", 20);
    assert_eq!(f(&state, &reopened, "fd.name"), "/etc/hosts");
    assert_eq!(f(&state, &reopened, "fd.nameraw"), "/etc/hosts");
    for (tid, fd) in [(400, 21), (970, 20), (970, 21)] {
        let r = read(tid, tid, fd);
        assert_eq!(f(&state, &r, "fd.name"), "/home/alice/work/notes/a.txt");
        assert_eq!(
            f(&state, &r, "fd.nameraw"),
            "notes/a.txt",
            "tid {tid} fd {fd}"
        );
    }
    // A closed descriptor's object comes back for the next open with nothing of the old one.
    close(&mut state, 400, 20);
    close(&mut state, 400, 21);
    let sock = apply(
        &mut state,
        ev(400, "socket")
            .uint("domain", 2)
            .uint("type", 1)
            .uint("proto", 0)
            .res(22)
            .build(),
    );
    assert_eq!(f(&state, &sock, "fd.type"), "ipv4");
    assert_eq!(f(&state, &sock, "fd.name"), "");
    assert_eq!(field(&state, &sock, "fd.nameraw"), None);
    let reopened = open(&mut state, 400, "/etc/hosts", 23);
    assert_eq!(f(&state, &reopened, "fd.nameraw"), "/etc/hosts");
    assert_eq!(field(&state, &reopened, "fd.sport"), None);
    // Renaming a descriptor whose raw name was its name keeps the raw name.
    apply(
        &mut state,
        ev(400, "connect")
            .int("fd", 23)
            .tuple("tuple", 6, "10.0.0.2:40000", "10.0.0.7:443")
            .build(),
    );
    let r = read(400, 400, 23);
    assert_eq!(f(&state, &r, "fd.name"), "10.0.0.2:40000->10.0.0.7:443");
    assert_eq!(f(&state, &r, "fd.nameraw"), "/etc/hosts");

    // The child's exec leaves the parent's (shared) image alone.
    let exec = apply(
        &mut state,
        ev(970, "execve")
            .bytes("filename", "/bin/ls")
            .list("args", &["-la", "/root"])
            .list("env", &["LANG=C", "TOKEN=x"])
            .build(),
    );
    assert_eq!(f(&state, &exec, "proc.cmdline"), "ls -la /root");
    assert_eq!(f(&state, &exec, "proc.env[TOKEN]"), "x");
    let parent = read(400, 400, 0);
    assert_eq!(f(&state, &parent, "proc.cmdline"), "python3 script.py -v");
    assert_eq!(f(&state, &parent, "proc.env[SECRET_TOKEN]"), "abc=def");
    // Its image, once it is gone, serves the next exec without leaking into it.
    let exit = apply(&mut state, ev(970, "procexit").build());
    state.finish(&exit);
    apply(&mut state, ev(400, "fork").res(980).build());
    let exec = apply(
        &mut state,
        ev(980, "execve").bytes("filename", "/bin/true").build(),
    );
    assert_eq!(f(&state, &exec, "proc.name"), "true");
    assert_eq!(f(&state, &exec, "proc.cmdline"), "true");
    assert_eq!(f(&state, &exec, "proc.args"), "");
    assert_eq!(f(&state, &exec, "proc.cmdnargs"), "0");
    assert_eq!(f(&state, &exec, "proc.env"), "");
    assert_eq!(field(&state, &exec, "proc.env[TOKEN]"), None);
    assert_eq!(f(&state, &exec, "proc.exepath"), "/bin/true");
    assert_eq!(f(&state, &read(400, 400, 0), "proc.name"), "python3");
}

/// `fd.num` is the call's result exactly where the view reads it from the result (a failed
/// `openat`'s `fd.num` is -1), and an argument elsewhere.
#[test]
fn fd_num_is_the_result_of_descriptor_returning_calls() {
    use vigil_fields::Catalog;
    let cat = crate::catalog();
    let fd_num = cat.lookup("fd.num", None).unwrap();
    let is = |name: &str| cat.is_result_in(&fd_num, vigil_event::table::by_name(name).unwrap().0);
    for name in [
        "open",
        "openat",
        "openat2",
        "creat",
        "socket",
        "accept4",
        "dup2",
        "memfd_create",
    ] {
        assert!(is(name), "{name} returns the descriptor");
    }
    for name in [
        "read", "close", "connect", "sendto", "pipe", "execve", "procexit",
    ] {
        assert!(!is(name), "{name}: fd.num is not the result");
    }
    let name = cat.lookup("fd.name", None).unwrap();
    assert!(!cat.is_result_in(&name, vigil_event::table::by_name("openat").unwrap().0));
}

/// `depends_on_result` leaves out exactly the path fields that a failed open's view resolves
/// from its arguments: they must read the same as after a successful open.
#[test]
fn open_path_fields_do_not_depend_on_the_result() {
    use vigil_fields::Catalog;
    let cat = crate::catalog();
    let dep = |name: &str| {
        let (base, arg) = match name.split_once('[') {
            Some((b, a)) => (b, Some(a.trim_end_matches(']'))),
            None => (name, None),
        };
        cat.depends_on_result(&cat.lookup(base, arg).unwrap())
    };
    for name in [
        "evt.res",
        "evt.rawres",
        "evt.failed",
        "fd.num",
        "fd.typechar",
        "fd.type",
    ] {
        assert!(dep(name), "{name} is only known once the call returned");
    }
    for name in [
        "evt.arg.res",
        "evt.arg.fd",
        "evt.arg[0]",
        "proc.fdopencount",
        "fd.ino",
    ] {
        assert!(dep(name), "{name} is only known once the call returned");
    }
    let path_fields = ["fd.name", "fd.nameraw", "fd.directory", "fd.filename"];
    for name in path_fields
        .iter()
        .chain(&["evt.arg.flags", "proc.name", "evt.type"])
    {
        assert!(!dep(name), "{name} is known at entry");
    }
    let opens = [
        ev(401, "openat")
            .pid(400)
            .int("dirfd", 5)
            .bytes("name", "passwd")
            .uint("flags", O_RDONLY),
        ev(401, "openat")
            .pid(400)
            .int("dirfd", -100)
            .bytes("name", "../etc//shadow")
            .uint("flags", O_RDONLY),
        ev(401, "open")
            .pid(400)
            .bytes("name", "/usr/bin/./ls")
            .uint("flags", O_RDONLY),
        ev(401, "creat").pid(400).bytes("name", "notes.txt"),
    ];
    for open in opens {
        let mut ok_state = tree();
        let ok = apply(&mut ok_state, open.clone().res(6).build());
        let mut failed_state = tree();
        let failed = apply(&mut failed_state, open.res(-2).build());
        assert!(
            field(&failed_state, &failed, "fd.name").is_some(),
            "a failed open names its path: {failed:?}"
        );
        for name in path_fields {
            assert_eq!(
                field(&failed_state, &failed, name),
                field(&ok_state, &ok, name),
                "{name} of {ok:?}"
            );
        }
    }
}

/// A descriptor learnt from `/proc` after the fact names its file like a traced open did,
/// and a relative open through it resolves against it.
#[test]
fn learned_descriptors_resolve_like_opened_ones() {
    let mut state = tree();
    let info = vigil_event::FdInfo {
        fd: 9,
        kind: vigil_event::FdType::File,
        tuple: None,
        name: b"/etc/ssh".to_vec(),
        flags: O_RDONLY as u32,
    };
    state.learn_fd(400, &info);
    state.learn_fd(999_999, &info); // unknown process: ignored
    let open = apply(
        &mut state,
        ev(401, "openat")
            .pid(400)
            .int("dirfd", 9)
            .bytes("name", "ssh_host_rsa_key")
            .uint("flags", O_RDONLY)
            .res(10)
            .build(),
    );
    assert_eq!(f(&state, &open, "fd.name"), "/etc/ssh/ssh_host_rsa_key");
    let live = crate::read_fd(i64::from(std::process::id()), 0);
    let missing = crate::read_fd(i64::from(std::process::id()), 1_000_000);
    assert!(missing.is_none(), "no such descriptor");
    if let Some(live) = live {
        assert_eq!(live.fd, 0);
        assert!(!live.name.is_empty(), "{live:?}");
    }
}

// ----- live user tables -----

const HOST_PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
    www-data:x:33:33:www-data:/var/www:/usr/sbin/nologin\n\
    alice:x:1000:1000:Alice:/home/alice:/bin/zsh\n";
const HOST_GROUP: &str = "root:x:0:\nwww-data:x:33:\nalice:x:1000:\n";

/// The default tree in a live state: host files and procfs are shared fakes.
fn live_tree(host: &SharedFake, procfs: &SharedFake) -> State {
    let live = crate::LiveUsers::new(
        Box::new(host.clone()),
        Box::new(procfs.clone()),
        crate::LiveUsersConfig::default(),
    );
    let mut state = State::new(StateConfig {
        user_db: Box::new(crate::MemUserDb::default()),
        live_users: Some(live),
        ..StateConfig::default()
    });
    state.load_snapshot(&snapshot());
    state
}

/// `pid` executes `/bin/cat` with these credentials (`cgroup`: a container's, or the host).
fn exec_as(pid: i64, uid: u32, gid: u32, cgroup: &str) -> vigil_event::Event {
    ev(pid, "execve")
        .bytes("filename", "/bin/cat")
        .bytes("exe", "/bin/cat")
        .bytes("comm", "cat")
        .bytes("cgroups", cgroup)
        .uint("uid", u64::from(uid))
        .uint("gid", u64::from(gid))
        .uint("euid", u64::from(uid))
        .uint("egid", u64::from(gid))
        .build()
}

#[test]
fn live_user_added_after_start_is_named_at_its_first_exec() {
    let host = SharedFake::with(&[("etc/passwd", HOST_PASSWD), ("etc/group", HOST_GROUP)]);
    let mut state = live_tree(&host, &SharedFake::default());
    let before = apply(&mut state, exec_as(400, 105, 65534, "0::/user.slice"));
    assert_eq!(
        field(&state, &before, "user.name"),
        None,
        "not in passwd yet"
    );
    assert_eq!(f(&state, &before, "user.uid"), "105");

    host.set(
        "etc/passwd",
        &format!("{HOST_PASSWD}sshd:x:106:65534::/run/sshd:/usr/sbin/nologin\n"),
    );
    host.set("etc/group", &format!("{HOST_GROUP}nogroup:x:65534:\n"));
    let after = apply(&mut state, exec_as(300, 106, 65534, "0::/user.slice"));
    assert_eq!(f(&state, &after, "user.name"), "sshd");
    assert_eq!(f(&state, &after, "user.homedir"), "/run/sshd");
    assert_eq!(f(&state, &after, "group.name"), "nogroup");
    // The process's later events resolve from the table (no lookup work of their own).
    let reads = host.reads();
    let stamps = host.stamps();
    for fd in 0..100 {
        let e = read(300, 300, fd);
        state.apply(&e);
        assert_eq!(f(&state, &e, "user.name"), "sshd");
        state.finish(&e);
    }
    assert_eq!((host.reads(), host.stamps()), (reads, stamps));
    let stats = state.live_users_stats().expect("live");
    assert_eq!(stats.container_tables, 1, "the tree's nginx container");
}

#[test]
fn live_container_processes_are_named_from_the_containers_files() {
    let host = SharedFake::with(&[("etc/passwd", HOST_PASSWD), ("etc/group", HOST_GROUP)]);
    // The container of the tree's nginx (pid 700) names uid 33 differently and has uid 1000
    // as someone else; uid 0 is not in its passwd at all.
    let procfs = SharedFake::with(&[
        (
            "700/root/etc/passwd",
            "nginx:x:33:33::/var/cache/nginx:/sbin/nologin\nbob:x:1000:1000::/home/bob:/bin/sh\n",
        ),
        ("700/root/etc/group", "nginx:x:33:\n"),
    ]);
    let mut state = live_tree(&host, &procfs);
    let nginx = read(700, 700, 0);
    assert_eq!(
        f(&state, &nginx, "user.name"),
        "nginx",
        "read at the snapshot"
    );
    assert_eq!(f(&state, &nginx, "user.homedir"), "/var/cache/nginx");
    assert_eq!(f(&state, &nginx, "group.name"), "nginx");
    assert_eq!(
        f(&state, &read(400, 400, 0), "user.name"),
        "alice",
        "host processes keep the host's table"
    );
    let cgroup = format!("0::/system.slice/docker-{CONTAINER_ID}.scope");
    let bob = apply(&mut state, exec_as(700, 1000, 1000, &cgroup));
    assert_eq!(f(&state, &bob, "container.id"), &CONTAINER_ID[..12]);
    assert_eq!(f(&state, &bob, "user.name"), "bob");
    assert_eq!(
        field(&state, &bob, "group.name"),
        None,
        "gid 1000 only on the host"
    );
    let root = apply(&mut state, exec_as(700, 0, 0, &cgroup));
    assert_eq!(
        field(&state, &root, "user.name"),
        None,
        "no host name leaks in"
    );

    // The container's passwd changes while a short-lived child (gone from procfs by the time
    // its exec is processed) runs as a new uid: its parent's root is read instead.
    procfs.set(
        "700/root/etc/passwd",
        "nginx:x:33:33::/var/cache/nginx:/sbin/nologin\nlate:x:77:77::/:/bin/sh\n",
    );
    apply(
        &mut state,
        ev(700, "clone").uint("flags", 17).res(710).build(),
    );
    let late = apply(&mut state, exec_as(710, 77, 77, &cgroup));
    assert_eq!(f(&state, &late, "proc.ppid"), "700");
    assert_eq!(f(&state, &late, "user.name"), "late");
}

#[test]
fn replay_uses_the_captures_table_for_every_process() {
    // No live tables: the snapshot's users answer, for host and container processes alike,
    // and nothing is read while events are applied.
    let mut snap = snapshot();
    let (users, groups) = users_snapshot();
    snap.users = users;
    snap.groups = groups;
    let mut state = State::new(StateConfig {
        user_db: Box::new(user_db()),
        ..StateConfig::default()
    });
    state.load_snapshot(&snap);
    assert_eq!(state.live_users_stats(), None);
    let e = apply(&mut state, exec_as(400, 1000, 1000, "0::/user.slice"));
    assert_eq!(f(&state, &e, "user.name"), "bob");
    let cgroup = format!("0::/system.slice/docker-{CONTAINER_ID}.scope");
    let c = apply(&mut state, exec_as(700, 1000, 1000, &cgroup));
    assert_eq!(
        f(&state, &c, "user.name"),
        "bob",
        "captures carry one table"
    );
    let gone = apply(&mut state, exec_as(400, 0, 0, "0::/user.slice"));
    assert_eq!(
        field(&state, &gone, "user.name"),
        None,
        "root: not in the capture"
    );
}

#[test]
fn raw_arguments_cpu_and_wait() {
    let mut state = tree();
    let e = apply(
        &mut state,
        ev(400, "openat")
            .int("dirfd", -100)
            .bytes("name", "../notes.txt")
            .uint("flags", O_WRONLY | O_CREAT)
            .uint("mode", 0o755)
            .res(7)
            .build(),
    );
    assert_eq!(
        values(&state, &e, "evt.rawarg.flags"),
        Some(vec![Value::U64(O_WRONLY | O_CREAT)]),
        "flags unrendered, unsigned"
    );
    assert_eq!(
        values(&state, &e, "evt.rawarg[flags]"),
        Some(vec![Value::U64(O_WRONLY | O_CREAT)])
    );
    assert_eq!(
        values(&state, &e, "evt.rawarg.dirfd"),
        Some(vec![Value::I64(-100)])
    );
    assert_eq!(
        values(&state, &e, "evt.rawarg.fd"),
        Some(vec![Value::I64(7)]),
        "the result"
    );
    assert_eq!(f(&state, &e, "evt.rawarg.name"), "../notes.txt");
    assert_eq!(
        field(&state, &e, "evt.rawarg.dev"),
        None,
        "absent parameter"
    );
    assert_eq!(
        field(&state, &e, "evt.rawarg.res"),
        None,
        "openat calls its result fd"
    );
    assert_eq!(
        field(&state, &e, "evt.cpu"),
        None,
        "an event whose driver does not know the CPU (ptrace) has none"
    );
    let on_cpu = apply(&mut state, ev(400, "close").int("fd", 7).cpu(1).build());
    assert_eq!(
        values(&state, &on_cpu, "evt.cpu"),
        Some(vec![Value::I64(1)])
    );
    for name in ["thread.cpu", "thread.cpu.user", "thread.cpu.system"] {
        assert_eq!(
            field(&state, &on_cpu, name),
            None,
            "{name} never has a value"
        );
    }
    assert_eq!(f(&state, &e, "evt.is_wait"), "false");
    let failed = apply(&mut state, ev(400, "close").int("fd", 99).res(-9).build());
    assert_eq!(
        values(&state, &failed, "evt.rawarg.res"),
        Some(vec![Value::I64(-9)])
    );
    for waits in ["epoll_wait", "poll", "ppoll", "select", "nanosleep"] {
        let w = apply(&mut state, ev(400, waits).build());
        assert_eq!(f(&state, &w, "evt.is_wait"), "true", "{waits}");
    }
    let read = apply(&mut state, ev(400, "read").int("fd", 0).res(0).build());
    assert_eq!(f(&state, &read, "evt.is_wait"), "false");
}

#[test]
fn live_container_user_tables_go_with_the_containers_last_process() {
    let host = SharedFake::with(&[("etc/passwd", HOST_PASSWD), ("etc/group", HOST_GROUP)]);
    let procfs = SharedFake::with(&[
        (
            "700/root/etc/passwd",
            "nginx:x:33:33::/var/cache/nginx:/sbin/nologin\n",
        ),
        ("700/root/etc/group", "nginx:x:33:\n"),
    ]);
    let mut state = live_tree(&host, &procfs);
    assert_eq!(state.live_users_stats().unwrap().container_tables, 1);
    let in_container: Vec<i64> = state
        .threads
        .iter()
        .filter(|(_, t)| {
            state
                .procs
                .get(&t.pid)
                .is_some_and(|p| !p.image.container_id.is_empty())
        })
        .map(|(tid, _)| *tid)
        .collect();
    assert!(!in_container.is_empty());
    // Exits seconds later (the sweep runs at most every few seconds of event time).
    for (i, tid) in in_container.into_iter().enumerate() {
        let exit = ev(tid, "procexit")
            .int("status", 0)
            .ts(T0 + 60_000_000_000 + i as u64)
            .build();
        state.apply(&exit);
        state.finish(&exit);
    }
    assert_eq!(state.live_users_stats().unwrap().container_tables, 0);
}

//! The field catalog: every field Vigil extracts, with Falco's name, type and meaning.

use std::sync::OnceLock;

use rustc_hash::FxHashMap;
use vigil_event::table;
use vigil_fields::{
    ArgKind, Catalog, FieldArg, FieldDef, FieldId, FieldRef, FieldType, LookupError,
};

macro_rules! fields {
    ($( $variant:ident = $name:literal, $ty:ident, $arg:ident, $list:literal, $desc:literal; )*) => {
        /// Field identities; the discriminant is the [`FieldId`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        #[repr(u32)]
        pub(crate) enum F { $($variant),* }

        const ALL: &[F] = &[$(F::$variant),*];

        const DEFS: &[FieldDef] = &[$(FieldDef {
            name: $name,
            ty: FieldType::$ty,
            arg: ArgKind::$arg,
            is_list: $list,
            desc: $desc,
        }),*];
    };
}

fields! {
    // ----- evt -----
    EvtNum = "evt.num", U64, None, false, "event number within its source";
    EvtTime = "evt.time", Str, None, false, "event time (UTC) as HH:MM:SS.nnnnnnnnn";
    EvtTimeS = "evt.time.s", Str, None, false, "event time (UTC) as HH:MM:SS";
    EvtTimeIso = "evt.time.iso8601", Str, None, false, "event time in ISO 8601 with nanoseconds, UTC";
    EvtDatetime = "evt.datetime", Str, None, false, "event date and time (UTC) with nanoseconds";
    EvtDatetimeS = "evt.datetime.s", Str, None, false, "event date and time (UTC) without nanoseconds";
    EvtRawtime = "evt.rawtime", AbsTime, None, false, "event time in nanoseconds since the epoch";
    EvtRawtimeS = "evt.rawtime.s", AbsTime, None, false, "integer seconds part of evt.rawtime";
    EvtRawtimeNs = "evt.rawtime.ns", AbsTime, None, false, "nanoseconds part of evt.rawtime";
    EvtReltime = "evt.reltime", RelTime, None, false, "nanoseconds since the capture or agent start";
    EvtHostname = "evt.hostname", Str, None, false, "name of the host the event happened on";
    EvtSource = "evt.source", Str, None, false, "event source name (always syscall)";
    EvtIsAsync = "evt.is_async", Bool, None, false, "true for asynchronous (non-syscall metadata) events";
    EvtDir = "evt.dir", Str, None, false, "event direction: always '<' (a Vigil event is a completed syscall)";
    EvtType = "evt.type", Str, None, false, "event type name (e.g. openat, execve, procexit)";
    SyscallType = "syscall.type", Str, None, false, "system call name; no value for non-syscall events";
    EvtCategory = "evt.category", Str, None, false, "event category: file, net, process, ipc, signal, other";
    EvtArgs = "evt.args", Str, None, false, "all event arguments as 'name=value ...', resolved values in parentheses: 'fd=3(<f>/etc/passwd) flags=577(O_WRONLY|O_CREAT|O_TRUNC)'";
    EvtInfo = "evt.info", Str, None, false, "same as evt.args";
    EvtArg = "evt.arg", Str, Key, false, "one event argument by name (evt.arg.name) or position (evt.arg[0] = result), rendered as text";
    EvtRawarg = "evt.rawarg", Str, Key, false, "one event argument by name (evt.rawarg.name), unformatted: numbers as numbers (the type is that of the argument of that name in the event table, as libsinsp), strings as they were passed; socket addresses and tuples have no raw form";
    EvtRawargI64 = "evt.rawarg(int)", I64, Key, false, "evt.rawarg of a signed argument (internal)";
    EvtRawargU64 = "evt.rawarg(uint)", U64, Key, false, "evt.rawarg of an unsigned argument (internal)";
    EvtCpu = "evt.cpu", I64, None, false, "number of the CPU the event completed on (eBPF driver; no value under `vigil run`)";
    EvtIsWait = "evt.is_wait", Bool, None, false, "true for events that make the thread wait: epoll_wait, poll, ppoll, select, nanosleep (libscap's EF_WAITS events)";
    EvtBuffer = "evt.buffer", Buffer, None, false, "data buffer of I/O events (read, write, sendto ...)";
    EvtBuflen = "evt.buflen", U64, None, false, "length of evt.buffer";
    EvtRes = "evt.res", Str, None, false, "SUCCESS, or the error code name (e.g. ENOENT) when the call failed";
    EvtRawres = "evt.rawres", I64, None, false, "return value as a number (negative errno on failure)";
    EvtFailed = "evt.failed", Bool, None, false, "true when the call returned an error";
    EvtCount = "evt.count", U64, None, false, "always 1";
    EvtIsIo = "evt.is_io", Bool, None, false, "true for events that read or write an fd";
    EvtIsIoRead = "evt.is_io_read", Bool, None, false, "true for events that read from an fd";
    EvtIsIoWrite = "evt.is_io_write", Bool, None, false, "true for events that write to an fd";
    EvtIoDir = "evt.io_dir", Str, None, false, "'r' for reads, 'w' for writes";
    EvtIsOpenRead = "evt.is_open_read", Bool, None, false, "true for open events opening the path for reading";
    EvtIsOpenWrite = "evt.is_open_write", Bool, None, false, "true for open events opening the path for writing";
    EvtIsOpenExec = "evt.is_open_exec", Bool, None, false, "true for open/creat events creating a file with execute permission";
    EvtIsOpenCreate = "evt.is_open_create", Bool, None, false, "true for open events that may create the file (O_CREAT, creat)";
    EvtAbspath = "evt.abspath", Str, None, false, "absolute path of the path argument, resolved against dirfd or cwd";
    EvtAbspathSrc = "evt.abspath.src", Str, None, false, "absolute source path of rename/link/symlink calls";
    EvtAbspathDst = "evt.abspath.dst", Str, None, false, "absolute destination path of rename/link/symlink calls";
    // ----- fs.path -----
    FsPathName = "fs.path.name", Str, None, false, "absolute path of the filesystem path argument";
    FsPathNameraw = "fs.path.nameraw", Str, None, false, "the filesystem path argument as passed";
    FsPathSource = "fs.path.source", Str, None, false, "absolute source path of rename/link/symlink calls";
    FsPathSourceraw = "fs.path.sourceraw", Str, None, false, "source path of rename/link/symlink calls as passed";
    FsPathTarget = "fs.path.target", Str, None, false, "absolute target path of rename/link/symlink calls";
    FsPathTargetraw = "fs.path.targetraw", Str, None, false, "target path of rename/link/symlink calls as passed";
    // ----- proc -----
    ProcPid = "proc.pid", I64, None, false, "process id";
    ProcPpid = "proc.ppid", I64, None, false, "parent process id";
    ProcApid = "proc.apid", I64, OptionalIndex, false, "pid of an ancestor: [0] self, [1] parent ...; without index any ancestor";
    ProcVpid = "proc.vpid", I64, None, false, "process id in its pid namespace";
    ProcPvpid = "proc.pvpid", I64, None, false, "parent process id in its pid namespace";
    ProcSid = "proc.sid", I64, None, false, "session id";
    ProcSname = "proc.sname", Str, None, false, "name of the session leader";
    ProcSidExe = "proc.sid.exe", Str, None, false, "argv[0] of the session leader";
    ProcSidExepath = "proc.sid.exepath", Str, None, false, "executable path of the session leader";
    ProcVpgid = "proc.vpgid", I64, None, false, "process group id in the pid namespace";
    ProcVpgidName = "proc.vpgid.name", Str, None, false, "name of the process group leader";
    ProcVpgidExe = "proc.vpgid.exe", Str, None, false, "argv[0] of the process group leader";
    ProcVpgidExepath = "proc.vpgid.exepath", Str, None, false, "executable path of the process group leader";
    ProcIsSidLeader = "proc.is_sid_leader", Bool, None, false, "true if proc.sid == proc.vpid";
    ProcIsVpgidLeader = "proc.is_vpgid_leader", Bool, None, false, "true if proc.vpgid == proc.vpid";
    ProcName = "proc.name", Str, None, false, "process name (comm, at most 15 bytes)";
    ProcPname = "proc.pname", Str, None, false, "name of the parent process";
    ProcAname = "proc.aname", Str, OptionalIndex, false, "name of an ancestor: [0] self, [1] parent ...; without index any ancestor";
    ProcExe = "proc.exe", Str, None, false, "argv[0] of the process";
    ProcPexe = "proc.pexe", Str, None, false, "argv[0] of the parent process";
    ProcAexe = "proc.aexe", Str, OptionalIndex, false, "argv[0] of an ancestor: [0] self, [1] parent ...; without index any ancestor";
    ProcExepath = "proc.exepath", Str, None, false, "full path of the executable";
    ProcPexepath = "proc.pexepath", Str, None, false, "full executable path of the parent process";
    ProcAexepath = "proc.aexepath", Str, OptionalIndex, false, "executable path of an ancestor: [0] self, [1] parent ...; without index any ancestor";
    ProcArgs = "proc.args", Str, None, false, "command line arguments (argv[1..]) joined by spaces";
    ProcCmdline = "proc.cmdline", Str, None, false, "proc.name followed by proc.args";
    ProcPcmdline = "proc.pcmdline", Str, None, false, "proc.cmdline of the parent process";
    ProcAcmdline = "proc.acmdline", Str, OptionalIndex, false, "proc.cmdline of an ancestor: [0] self, [1] parent ...; without index any ancestor";
    ProcCmdnargs = "proc.cmdnargs", U64, None, false, "number of command line arguments";
    ProcCmdlenargs = "proc.cmdlenargs", U64, None, false, "total length of the command line arguments";
    ProcExeline = "proc.exeline", Str, None, false, "proc.exe followed by proc.args";
    ProcEnv = "proc.env", Str, OptionalKey, false, "environment as 'NAME=value ...', or one variable's value with proc.env[NAME]";
    ProcCwd = "proc.cwd", Str, None, false, "current working directory (with a trailing slash, as Falco prints it)";
    ProcTty = "proc.tty", U64, None, false, "controlling terminal device number; 0 when none";
    ProcDuration = "proc.duration", RelTime, None, false, "nanoseconds since the process started";
    ProcPpidDuration = "proc.ppid.duration", RelTime, None, false, "nanoseconds since the parent process started";
    ProcPidTs = "proc.pid.ts", AbsTime, None, false, "process start time, nanoseconds since the epoch";
    ProcPpidTs = "proc.ppid.ts", AbsTime, None, false, "parent process start time, nanoseconds since the epoch";
    ProcIsExeWritable = "proc.is_exe_writable", Bool, None, false, "true if the executable is writable by the process's user";
    ProcIsExeUpperLayer = "proc.is_exe_upper_layer", Bool, None, false, "true if the executable is in an overlayfs upper layer";
    ProcIsExeFromMemfd = "proc.is_exe_from_memfd", Bool, None, false, "true if the executable is a memfd_create file";
    ProcExeIno = "proc.exe_ino", I64, None, false, "inode number of the executable";
    ProcExeInoCtime = "proc.exe_ino.ctime", AbsTime, None, false, "status change time of the executable's inode";
    ProcExeInoMtime = "proc.exe_ino.mtime", AbsTime, None, false, "modification time of the executable's inode";
    ProcExeInoCtimeDurationProcStart = "proc.exe_ino.ctime_duration_proc_start", AbsTime, None, false, "nanoseconds between the executable's ctime and the process start";
    ProcNthreads = "proc.nthreads", U64, None, false, "number of live threads of the process";
    ProcNchilds = "proc.nchilds", U64, None, false, "number of live threads other than the leader";
    ProcFdopencount = "proc.fdopencount", U64, None, false, "number of open fds of the process";
    // ----- thread -----
    ThreadTid = "thread.tid", I64, None, false, "thread id";
    ThreadVtid = "thread.vtid", I64, None, false, "thread id in its pid namespace";
    ThreadIsmain = "thread.ismain", Bool, None, false, "true for the thread-group leader";
    ThreadCapPermitted = "thread.cap_permitted", Str, None, false, "permitted capabilities, names separated by spaces";
    ThreadCapInheritable = "thread.cap_inheritable", Str, None, false, "inheritable capabilities, names separated by spaces";
    ThreadCapEffective = "thread.cap_effective", Str, None, false, "effective capabilities, names separated by spaces";
    ThreadCgroups = "thread.cgroups", Str, None, false, "the cgroup path(s) of the thread";
    ThreadCpu = "thread.cpu", Double, None, false, "CPU used by the thread in the last second: never has a value (no driver samples CPU time); compares with integers only, as in Falco";
    ThreadCpuUser = "thread.cpu.user", Double, None, false, "user CPU used by the thread in the last second: never has a value, as thread.cpu";
    ThreadCpuSystem = "thread.cpu.system", Double, None, false, "system CPU used by the thread in the last second: never has a value, as thread.cpu";
    // ----- user / group -----
    UserUid = "user.uid", U64, None, false, "effective user id";
    UserName = "user.name", Str, None, false, "effective user name";
    UserHomedir = "user.homedir", Str, None, false, "home directory of the user";
    UserShell = "user.shell", Str, None, false, "login shell of the user";
    UserLoginuid = "user.loginuid", I64, None, false, "audit login uid (-1 when unset)";
    UserLoginname = "user.loginname", Str, None, false, "name of the audit login user";
    GroupGid = "group.gid", U64, None, false, "effective group id";
    GroupName = "group.name", Str, None, false, "effective group name";
    // ----- container / k8s -----
    ContainerId = "container.id", Str, None, false, "short (12 character) container id; 'host' outside containers";
    ContainerFullId = "container.full_id", Str, None, false, "full container id as the runtime reports it";
    ContainerName = "container.name", Str, None, false, "container name; 'host' outside containers";
    ContainerImage = "container.image", Str, None, false, "container image reference";
    ContainerImageRepository = "container.image.repository", Str, None, false, "container image repository";
    ContainerImageTag = "container.image.tag", Str, None, false, "container image tag";
    ContainerImageDigest = "container.image.digest", Str, None, false, "container image digest";
    ContainerType = "container.type", Str, None, false, "container runtime (docker, containerd, cri-o, podman ...)";
    ContainerPrivileged = "container.privileged", Bool, None, false, "true for privileged containers";
    ContainerMounts = "container.mounts", Str, None, false, "mounts as 'source:dest:mode:rdwr:propagation' separated by spaces";
    ContainerMount = "container.mount", Str, Key, false, "one mount by index or source glob, 'source:dest:mode:rdwr:propagation'; 'none' when absent";
    ContainerMountSource = "container.mount.source", Str, Key, false, "mount source by index or destination glob";
    ContainerMountDest = "container.mount.dest", Str, Key, false, "mount destination by index or source glob";
    ContainerMountMode = "container.mount.mode", Str, Key, false, "mount mode by index or source glob";
    ContainerMountRdwr = "container.mount.rdwr", Str, Key, false, "mount read-write flag by index or source glob";
    ContainerMountPropagation = "container.mount.propagation", Str, Key, false, "mount propagation by index or source glob";
    ContainerStartTs = "container.start_ts", AbsTime, None, false, "container start time, nanoseconds since the epoch";
    ContainerDuration = "container.duration", RelTime, None, false, "nanoseconds since container.start_ts";
    ContainerLabel = "container.label", Str, Key, false, "a runtime label of the container (container.label.KEY)";
    K8sPodName = "k8s.pod.name", Str, None, false, "Kubernetes pod name";
    K8sNsName = "k8s.ns.name", Str, None, false, "Kubernetes namespace name";
    K8sPodUid = "k8s.pod.uid", Str, None, false, "Kubernetes pod uid";
    K8sPodId = "k8s.pod.id", Str, None, false, "Kubernetes pod uid (legacy name)";
    K8sPodLabel = "k8s.pod.label", Str, Key, false, "a label of the container's Kubernetes pod (k8s.pod.label.KEY), as the CRI runtime reports the pod sandbox's";
    K8sPodSandboxId = "k8s.pod.sandbox_id", Str, None, false, "the first 12 characters of the container's pod sandbox id (CRI)";
    K8sPodFullSandboxId = "k8s.pod.full_sandbox_id", Str, None, false, "the container's pod sandbox id (CRI)";
    K8sPodLabels = "k8s.pod.labels", Str, None, false, "the labels of the container's Kubernetes pod as 'key:value' (or 'key' when the value is empty) in key order, separated by ', ', io.kubernetes.* and annotation.* left out";
    // ----- fd -----
    FdNum = "fd.num", I64, None, false, "file descriptor number";
    FdType = "fd.type", Str, None, false, "fd type: file, directory, ipv4, ipv6, unix, pipe, memfd, event, signalfd, eventpoll, inotify, timerfd, netlink, bpf, userfaultfd, io_uring, or <NA> (e.g. a packet socket)";
    FdTypechar = "fd.typechar", Str, None, false, "fd type as one character (f d 4 6 u p m e s l i t n b r o)";
    FdName = "fd.name", Str, None, false, "absolute path for files, connection tuple for sockets, memfd:NAME for memfds; empty for sockets without endpoints";
    FdNameraw = "fd.nameraw", Str, None, false, "file path as the process passed it";
    FdDirectory = "fd.directory", Str, None, false, "directory containing the file (the directory itself for directory fds)";
    FdFilename = "fd.filename", Str, None, false, "file name without its directory";
    FdIp = "fd.ip", IpAddr, None, false, "matches the client or the server IP address";
    FdCip = "fd.cip", IpAddr, None, false, "client IP address";
    FdSip = "fd.sip", IpAddr, None, false, "server IP address";
    FdLip = "fd.lip", IpAddr, None, false, "local IP address";
    FdRip = "fd.rip", IpAddr, None, false, "remote IP address";
    FdPort = "fd.port", U64, None, false, "matches the client or the server port";
    FdCport = "fd.cport", U64, None, false, "client port";
    FdSport = "fd.sport", U64, None, false, "server port";
    FdLport = "fd.lport", U64, None, false, "local port";
    FdRport = "fd.rport", U64, None, false, "remote port";
    FdL4proto = "fd.l4proto", Str, None, false, "IP protocol: tcp, udp, icmp or raw; <NA> for other descriptors";
    FdSockfamily = "fd.sockfamily", Str, None, false, "socket family: ip or unix";
    FdIsServer = "fd.is_server", Bool, None, false, "true if this process is the server end";
    FdNet = "fd.net", IpNet, None, false, "matches the client or server IP against networks (value: the address)";
    FdCnet = "fd.cnet", IpNet, None, false, "client IP matched against networks (value: the address)";
    FdSnet = "fd.snet", IpNet, None, false, "server IP matched against networks (value: the address)";
    FdLnet = "fd.lnet", IpNet, None, false, "local IP matched against networks (value: the address)";
    FdRnet = "fd.rnet", IpNet, None, false, "remote IP matched against networks (value: the address)";
    FdConnected = "fd.connected", Bool, None, false, "true if the socket is connected";
    FdNameChanged = "fd.name_changed", Bool, None, false, "true when this event changed the fd's name (e.g. a UDP tuple)";
    FdCipName = "fd.cip.name", Str, None, false, "domain names that resolved to the client IP (snapshot DNS table); several names, several values";
    FdSipName = "fd.sip.name", Str, None, false, "domain names that resolved to the server IP (snapshot DNS table); several names, several values";
    FdLipName = "fd.lip.name", Str, None, false, "domain names that resolved to the local IP (snapshot DNS table); several names, several values";
    FdRipName = "fd.rip.name", Str, None, false, "domain names that resolved to the remote IP (snapshot DNS table); several names, several values";
    FdDev = "fd.dev", I64, None, false, "device number of the file";
    FdIno = "fd.ino", I64, None, false, "inode number of the file";
    FdTypes = "fd.types", Str, OptionalIndex, true, "types of the process's open fds; fd.types[N] the type of fd N";
}

impl F {
    pub(crate) fn from_id(id: FieldId) -> Option<F> {
        ALL.get(id.0 as usize).copied()
    }

    fn id(self) -> FieldId {
        FieldId(self as u32)
    }
}

/// Vigil's field catalog ([`Catalog`] over [`vigil_event::table::events`]).
pub struct FieldCatalog {
    by_name: FxHashMap<&'static str, F>,
}

/// The catalog (built once).
pub fn catalog() -> &'static FieldCatalog {
    static CATALOG: OnceLock<FieldCatalog> = OnceLock::new();
    CATALOG.get_or_init(|| FieldCatalog {
        // Names with `(` are internal variants, reached through their public name only.
        by_name: DEFS
            .iter()
            .zip(ALL)
            .filter(|(d, _)| !d.name.contains('('))
            .map(|(d, &f)| (d.name, f))
            .collect(),
    })
}

/// The argument name of an `evt.rawarg.NAME` / `evt.rawarg[NAME]` reference (`None`: not one).
fn rawarg_key<'n>(name: &'n str, arg: Option<&'n str>) -> Result<Option<&'n str>, LookupError> {
    match (name.strip_prefix("evt.rawarg"), arg) {
        (Some(""), Some(a)) if !a.is_empty() => Ok(Some(a)),
        (Some("" | "."), _) => Err(LookupError::BadArg(
            "`evt.rawarg` needs an argument name (evt.rawarg.NAME)".to_string(),
        )),
        (Some(rest), None) if rest.len() > 1 && rest.starts_with('.') => Ok(Some(&rest[1..])),
        (Some(rest), Some(_)) if rest.starts_with('.') => Err(LookupError::BadArg(format!(
            "`{name}` takes no bracketed argument"
        ))),
        _ => Ok(None),
    }
}

/// `evt.rawarg.KEY`: typed like libsinsp, from the event table: the argument of that name
/// (or a result of that name) in any event type decides the type; a string argument anywhere
/// makes it a string, otherwise a signed one anywhere makes it signed.
fn rawarg(key: &str) -> Result<FieldRef, LookupError> {
    use vigil_event::ParamKind as K;
    let (mut seen, mut string, mut signed, mut addr) = (false, false, false, false);
    for spec in table::events() {
        if spec.res_name == key {
            seen = true;
            signed = true;
        }
        for p in spec.params.iter().filter(|p| p.name == key) {
            seen = true;
            match p.kind {
                K::Fd | K::Int | K::Pid => signed = true,
                K::Uint | K::Uid | K::Gid | K::Flags(_) | K::AbsTime => {}
                K::Path | K::Str | K::Buf | K::StrList => string = true,
                K::SockAddr | K::SockTuple => addr = true,
            }
        }
    }
    let id = match (seen, string, signed, addr) {
        (false, ..) => {
            return Err(LookupError::BadArg(format!(
                "no event has an argument named `{key}`"
            )))
        }
        (_, true, ..) => F::EvtRawarg,
        (_, _, true, _) => F::EvtRawargI64,
        (_, _, _, true) => {
            return Err(LookupError::BadArg(format!(
                "`{key}` is a socket address or tuple, which has no raw value to compare"
            )))
        }
        _ => F::EvtRawargU64,
    };
    Ok(FieldRef {
        id: id.id(),
        arg: FieldArg::Key(key.to_string()),
    })
}

/// Field families written with a dotted key: `evt.arg.NAME`, `container.label.KEY` ….
const DOTTED: &[(&str, F)] = &[
    ("evt.arg.", F::EvtArg),
    ("container.label.", F::ContainerLabel),
    ("k8s.pod.label.", F::K8sPodLabel),
];

impl Catalog for FieldCatalog {
    fn fields(&self) -> &[FieldDef] {
        DEFS
    }

    fn lookup(&self, name: &str, arg: Option<&str>) -> Result<FieldRef, LookupError> {
        if let Some(key) = rawarg_key(name, arg)? {
            return rawarg(key);
        }
        let field = match self.by_name.get(name) {
            Some(&f) => f,
            None => {
                let (prefix, f) = DOTTED
                    .iter()
                    .find(|(p, _)| name.starts_with(p) && name.len() > p.len())
                    .ok_or(LookupError::Unknown)?;
                if arg.is_some() {
                    return Err(LookupError::BadArg(format!(
                        "`{name}` takes no bracketed argument"
                    )));
                }
                return Ok(FieldRef {
                    id: f.id(),
                    arg: FieldArg::Key(name[prefix.len()..].to_string()),
                });
            }
        };
        let def = &DEFS[field as usize];
        let index = |text: &str| {
            text.trim()
                .parse::<i64>()
                .map(FieldArg::Index)
                .map_err(|_| {
                    LookupError::BadArg(format!("`{name}` needs a numeric index, got `{text}`"))
                })
        };
        let arg = match (def.arg, arg) {
            (ArgKind::None, None) => FieldArg::None,
            (ArgKind::None, Some(_)) => {
                return Err(LookupError::BadArg(format!("`{name}` takes no argument")))
            }
            (ArgKind::Index, None) | (ArgKind::Key, None) => {
                return Err(LookupError::BadArg(format!("`{name}` needs an argument")))
            }
            (ArgKind::OptionalIndex, None) | (ArgKind::OptionalKey, None) => FieldArg::None,
            (ArgKind::Index | ArgKind::OptionalIndex, Some(text)) => index(text)?,
            (ArgKind::Key | ArgKind::OptionalKey, Some(text)) => {
                // `evt.arg[0]` is positional; `evt.arg[name]` a name.
                if field == F::EvtArg {
                    if let Ok(i) = text.trim().parse::<i64>() {
                        return Ok(FieldRef {
                            id: field.id(),
                            arg: FieldArg::Index(i),
                        });
                    }
                }
                FieldArg::Key(text.to_string())
            }
        };
        Ok(FieldRef {
            id: field.id(),
            arg,
        })
    }

    fn def(&self, id: FieldId) -> &FieldDef {
        DEFS.get(id.0 as usize).unwrap_or(&DEFS[0])
    }

    /// The result and what it describes: `evt.res`/`evt.rawres`/`evt.failed`, the rendered
    /// argument lists, the `res`/`fd`/`dev`/`ino` arguments (and positional ones), the
    /// process's open descriptor count, and every `fd.*` field except the four an open-like
    /// call's path arguments already give (`fd.name`, `fd.nameraw`, `fd.directory`,
    /// `fd.filename`: the same for a failed call, resolved from the arguments, as for a
    /// successful one, read from the new descriptor).
    fn is_endpoint_pair(&self, field: &FieldRef) -> bool {
        matches!(self.def(field.id).name, "fd.ip" | "fd.port" | "fd.net")
    }

    fn never_has_value(&self, field: &FieldRef) -> Option<&'static str> {
        matches!(
            F::from_id(field.id),
            Some(F::ThreadCpu | F::ThreadCpuUser | F::ThreadCpuSystem)
        )
        .then_some("no driver samples a thread's CPU time (Falco's DOUBLE CPU-use fields)")
    }

    /// `fd.num` of a call that returns the descriptor (`openat`, `socket`, `accept`, `dup` …)
    /// is the call's result, negative for a failure (the view's `fd_number`).
    fn is_result_in(&self, field: &FieldRef, event_type: u16) -> bool {
        self.def(field.id).name == "fd.num"
            && matches!(field.arg, FieldArg::None)
            && crate::schema::type_info(vigil_event::EventType(event_type)).fd
                == crate::schema::FdRef::Res
    }

    fn depends_on_result(&self, field: &FieldRef) -> bool {
        let name = self.def(field.id).name;
        if name == "evt.arg" || name.starts_with("evt.rawarg") {
            return match &field.arg {
                FieldArg::Key(k) => matches!(k.as_str(), "res" | "fd" | "dev" | "ino"),
                _ => true,
            };
        }
        match name {
            "evt.res" | "evt.rawres" | "evt.failed" | "evt.args" | "evt.info"
            | "proc.fdopencount" => true,
            "fd.name" | "fd.nameraw" | "fd.directory" | "fd.filename" => false,
            _ => name.starts_with("fd."),
        }
    }

    fn n_event_types(&self) -> usize {
        table::events().len()
    }

    fn event_type_id(&self, name: &str) -> Option<u16> {
        table::by_name(name).map(|t| t.0)
    }

    fn evt_type_field(&self) -> FieldId {
        F::EvtType.id()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defs_and_ids_agree() {
        assert_eq!(ALL.len(), DEFS.len());
        for (i, (&f, d)) in ALL.iter().zip(DEFS).enumerate() {
            assert_eq!(f as usize, i, "{}", d.name);
            assert!(!d.desc.is_empty(), "{}", d.name);
        }
        let c = catalog();
        let public = DEFS.iter().filter(|d| !d.name.contains('(')).count();
        assert_eq!(c.by_name.len(), public, "duplicate field names");
        assert_eq!(c.def(c.evt_type_field()).name, "evt.type");
    }

    #[test]
    fn lookups() {
        let c = catalog();
        let r = c.lookup("proc.aname", Some("2")).unwrap();
        assert_eq!(
            (F::from_id(r.id), r.arg),
            (Some(F::ProcAname), FieldArg::Index(2))
        );
        assert_eq!(c.lookup("proc.aname", None).unwrap().arg, FieldArg::None);
        let r = c.lookup("evt.arg.flags", None).unwrap();
        assert_eq!(
            (F::from_id(r.id), r.arg),
            (Some(F::EvtArg), FieldArg::Key("flags".into()))
        );
        assert_eq!(
            c.lookup("evt.arg", Some("1")).unwrap().arg,
            FieldArg::Index(1)
        );
        assert_eq!(
            c.lookup("evt.arg", Some("name")).unwrap().arg,
            FieldArg::Key("name".into())
        );
        assert_eq!(
            c.lookup("proc.env", Some("HOME")).unwrap().arg,
            FieldArg::Key("HOME".into())
        );
        assert_eq!(
            c.lookup("container.mount.dest", Some("/proc*"))
                .unwrap()
                .arg,
            FieldArg::Key("/proc*".into())
        );
        assert_eq!(c.lookup("nope.field", None), Err(LookupError::Unknown));
        assert!(matches!(
            c.lookup("proc.name", Some("1")),
            Err(LookupError::BadArg(_))
        ));
        assert!(matches!(
            c.lookup("proc.aname", Some("x")),
            Err(LookupError::BadArg(_))
        ));
        assert!(matches!(
            c.lookup("evt.arg", None),
            Err(LookupError::BadArg(_))
        ));
        assert!(matches!(
            c.lookup("evt.arg.", None),
            Err(LookupError::Unknown)
        ));
        assert_eq!(
            c.event_type_id("openat"),
            table::by_name("openat").map(|t| t.0)
        );
        assert_eq!(c.n_event_types(), table::events().len());
    }

    #[test]
    fn raw_arguments_are_typed_from_the_event_table() {
        let c = catalog();
        let kind = |name: &str, arg: Option<&str>| {
            c.lookup(name, arg)
                .map(|r| (c.def(r.id).ty, r.arg))
                .map_err(|e| format!("{e:?}"))
        };
        let key = |k: &str| FieldArg::Key(k.to_string());
        assert_eq!(
            kind("evt.rawarg.flags", None),
            Ok((FieldType::U64, key("flags")))
        );
        assert_eq!(
            kind("evt.rawarg", Some("flags")),
            Ok((FieldType::U64, key("flags")))
        );
        assert_eq!(kind("evt.rawarg.fd", None), Ok((FieldType::I64, key("fd"))));
        assert_eq!(
            kind("evt.rawarg.res", None),
            Ok((FieldType::I64, key("res")))
        );
        assert_eq!(
            kind("evt.rawarg.uid", None),
            Ok((FieldType::U64, key("uid")))
        );
        assert_eq!(
            kind("evt.rawarg.name", None),
            Ok((FieldType::Str, key("name")))
        );
        for bad in [
            "evt.rawarg.nosuch",
            "evt.rawarg.tuple",
            "evt.rawarg",
            "evt.rawarg.",
        ] {
            assert!(
                matches!(c.lookup(bad, None), Err(LookupError::BadArg(_))),
                "{bad}: {:?}",
                c.lookup(bad, None)
            );
        }
        assert!(matches!(
            c.lookup("evt.rawarg.flags", Some("x")),
            Err(LookupError::BadArg(_))
        ));
        let cpu = c.lookup("evt.cpu", None).unwrap();
        assert!(c.never_has_value(&cpu).is_none());
        for name in ["thread.cpu", "thread.cpu.user", "thread.cpu.system"] {
            let f = c.lookup(name, None).unwrap();
            assert!(c.never_has_value(&f).is_some(), "{name}");
        }
        let wait = c.lookup("evt.is_wait", None).unwrap();
        assert!(c.never_has_value(&wait).is_none());
        let res = c.lookup("evt.rawarg.res", None).unwrap();
        assert!(c.depends_on_result(&res));
        let name = c.lookup("evt.rawarg.name", None).unwrap();
        assert!(!c.depends_on_result(&name));
    }

    #[test]
    fn every_field_in_the_falco_rules_resolves() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/falco-rules");
        let Ok(entries) = std::fs::read_dir(&dir) else {
            // The shared rules live beside the repository; without them there is nothing to check.
            return;
        };
        let re_field = |text: &str| -> Vec<(String, Option<String>)> {
            let mut out = Vec::new();
            let bytes = text.as_bytes();
            let classes = [
                "evt.",
                "proc.",
                "thread.",
                "fd.",
                "user.",
                "group.",
                "container.",
                "k8s.ns.",
                "k8s.pod.",
            ];
            let mut i = 0;
            while i < bytes.len() {
                let boundary = i == 0
                    || !(bytes[i - 1].is_ascii_alphanumeric()
                        || bytes[i - 1] == b'_'
                        || bytes[i - 1] == b'.');
                if boundary {
                    if let Some(class) = classes.iter().find(|c| text[i..].starts_with(**c)) {
                        let mut j = i + class.len();
                        while j < bytes.len()
                            && (bytes[j].is_ascii_alphanumeric()
                                || bytes[j] == b'_'
                                || bytes[j] == b'.')
                        {
                            j += 1;
                        }
                        let name = text[i..j].trim_end_matches('.').to_string();
                        let mut arg = None;
                        if j < bytes.len() && bytes[j] == b'[' {
                            if let Some(end) = text[j..].find(']') {
                                arg = Some(text[j + 1..j + end].to_string());
                                j += end + 1;
                            }
                        }
                        out.push((name, arg));
                        i = j;
                        continue;
                    }
                }
                i += 1;
            }
            out
        };
        let mut checked = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for line in text.lines() {
                let code = line.trim_start();
                if code.starts_with('#')
                    || !(code.starts_with("condition:")
                        || code.starts_with("output:")
                        || code.starts_with('(')
                        || code.starts_with("and")
                        || code.starts_with("or")
                        || code.starts_with("not")
                        || code.starts_with("evt.")
                        || code.starts_with("proc.")
                        || code.starts_with("fd."))
                {
                    continue;
                }
                for (name, arg) in re_field(code) {
                    // `k8s.ns.name`-like names only; words such as `evt.type.` in prose were cut above.
                    if name == "evt.arg" && arg.is_none() {
                        continue;
                    }
                    let got = catalog().lookup(&name, arg.as_deref());
                    assert!(
                        got.is_ok(),
                        "{}: `{name}` [{arg:?}] -> {got:?}",
                        path.display()
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 500, "only {checked} field references found");
    }
}

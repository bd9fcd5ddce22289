//! The actions. Each function performs the real system calls a rule looks for, names the
//! process as the rule needs (a copy of a real binary under the needed name, executed from a
//! temporary directory), and removes everything it created.

use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use nix::sched::CloneFlags;
use nix::sys::memfd::{memfd_create, MFdFlags};
use nix::sys::socket::{socket, AddressFamily, SockFlag, SockType};

use crate::util::{copy_exe, io_err, run_ok, status, sys_err, TempDir, TempFile};
use crate::{
    falco, falco_in_container, sys, vigil, vigil_in_container, Action, Context, Error, Expect,
    Kind, UnderRun,
};

const READ_SENSITIVE: &[Expect] = &[
    falco("Read sensitive file untrusted"),
    vigil("Sensitive File Read by Unexpected Program"),
];
// "Read sensitive file untrusted" matches the same event, but Falco's default
// `rule_matching: first` reports only the earlier rule of the file.
const TRUSTED_AFTER_STARTUP: &[Expect] = &[
    falco("Read sensitive file trusted after startup"),
    vigil("Sensitive File Read by Unexpected Program"),
];
const RUN_SHELL: &[Expect] = &[falco("Run shell untrusted")];
const SYSTEM_USER: &[Expect] = &[falco("System user interactive")];
const MEMFD: &[Expect] = &[
    falco("Fileless execution via memfd_create"),
    vigil("Fileless Program Execution from Memory"),
];
const DEV_SHM: &[Expect] = &[
    falco("Execution from /dev/shm"),
    vigil("Program Executed from Shared Memory Directory"),
];
const SYMLINK: &[Expect] = &[
    falco("Create Symlink Over Sensitive Files"),
    vigil("Link Created to Sensitive File"),
];
const HARDLINK: &[Expect] = &[
    falco("Create Hardlink Over Sensitive Files"),
    vigil("Link Created to Sensitive File"),
];
const TRAVERSAL: &[Expect] = &[falco("Directory traversal monitored file read")];
const FIND_KEYS: &[Expect] = &[
    falco("Search Private Keys or Passwords"),
    vigil("Credential Search with Command-Line Tools"),
];
const FIND_AWS: &[Expect] = &[
    falco("Find AWS Credentials"),
    vigil("Credential Search with Command-Line Tools"),
];
const CLEAR_LOG: &[Expect] = &[falco("Clear Log Activities"), vigil("Log File Truncated")];
const BULK_REMOVE: &[Expect] = &[
    falco("Remove Bulk Data from Disk"),
    vigil("Bulk Data Destruction Tool Started"),
];
const PTRACE_ATTACH: &[Expect] = &[
    falco("PTRACE attached to process"),
    vigil("Process Attached with ptrace"),
];
const PTRACE_TRACEME: &[Expect] = &[
    falco("PTRACE anti-debug attempt"),
    vigil("Anti-Debugging with PTRACE_TRACEME"),
];
const REDIRECT: &[Expect] = &[
    falco_in_container("Redirect STDOUT/STDIN to Network Connection in Container"),
    vigil("Standard Stream Redirected to Network Socket"),
];
const NETCAT: &[Expect] = &[
    falco_in_container("Netcat Remote Code Execution in Container"),
    vigil("Netcat or Socat Started with Command Execution"),
];
const PACKET: &[Expect] = &[
    falco_in_container("Packet socket created in container"),
    vigil_in_container("Packet Socket Created in Container"),
];
const SERVICE_SHELL: &[Expect] = &[vigil("Service Account Started Interactive Shell")];
const TERMINAL_SHELL: &[Expect] = &[
    falco_in_container("Terminal shell in container"),
    vigil_in_container("Interactive Shell Started in Container"),
];
const NAMESPACE: &[Expect] = &[vigil("Namespace Changed by Non-Runtime Process")];
const WRITE_BIN: &[Expect] = &[vigil(
    "Write Below Binary or System Configuration Directory",
)];
const HISTORY: &[Expect] = &[vigil("Shell History Deleted or Redirected")];
const SETUID: &[Expect] = &[vigil("Root Identity Taken by Non-Sudo Program")];
const KMOD: &[Expect] = &[vigil("Kernel Module Load Attempt")];
const BPF: &[Expect] = &[vigil("BPF Program Loaded by Unexpected Process")];

const fn host(
    name: &'static str,
    description: &'static str,
    needs_root: bool,
    expects: &'static [Expect],
    f: fn(&Context) -> Result<String, Error>,
) -> Action {
    Action {
        name,
        description,
        needs_root,
        slow: false,
        under_run: UnderRun::Same,
        check: None,
        expects,
        kind: Kind::Host(f),
    }
}

const fn in_container(
    name: &'static str,
    description: &'static str,
    inner: &'static str,
    expects: &'static [Expect],
) -> Action {
    Action {
        name,
        description,
        needs_root: true,
        slow: false,
        under_run: UnderRun::Same,
        check: None,
        expects,
        kind: Kind::InContainer(inner),
    }
}

pub(crate) static ACTIONS: &[Action] = &[
    host(
        "syscall.ReadSensitiveFileUntrusted",
        "cat /etc/shadow (a program no rule trusts reads the shadow password file)",
        true,
        READ_SENSITIVE,
        read_sensitive_file_untrusted,
    ),
    Action {
        slow: true,
        ..host(
            "syscall.ReadSensitiveFileTrustedAfterStartup",
            "a process named nginx waits 6 s (no longer 'new'), then opens /etc/shadow",
            true,
            TRUSTED_AFTER_STARTUP,
            read_sensitive_file_trusted_after_startup,
        )
    },
    host(
        "syscall.RunShellUntrusted",
        "a process named nginx (a copy of /bin/sh) spawns `sh -c true`",
        false,
        RUN_SHELL,
        run_shell_untrusted,
    ),
    host(
        "syscall.SystemUserInteractive",
        "below a process named sshd, runs /bin/true as user nobody (setpriv)",
        true,
        SYSTEM_USER,
        system_user_interactive,
    ),
    host(
        "syscall.ServiceAccountInteractiveShell",
        "as user daemon, starts `sh -c true` on a new pseudo-terminal (setpriv, setsid -c)",
        true,
        SERVICE_SHELL,
        service_account_interactive_shell,
    ),
    host(
        "syscall.FilelessExecutionViaMemfd",
        "copies /bin/true into a memfd and runs it with execveat(AT_EMPTY_PATH)",
        false,
        MEMFD,
        fileless_execution_via_memfd,
    ),
    host(
        "syscall.ExecutionFromDevShm",
        "copies /bin/true below /dev/shm and runs it",
        false,
        DEV_SHM,
        execution_from_dev_shm,
    ),
    host(
        "syscall.CreateSymlinkOverSensitiveFiles",
        "symlink(/etc/shadow) in a temporary directory",
        false,
        SYMLINK,
        create_symlink_over_sensitive_files,
    ),
    host(
        "syscall.CreateHardlinkOverSensitiveFiles",
        "link(/etc/shadow) in a temporary directory on the same filesystem (EPERM without root: the attempt is what the rules see)",
        false,
        HARDLINK,
        create_hardlink_over_sensitive_files,
    ),
    host(
        "syscall.DirectoryTraversalMonitoredFileRead",
        "opens /etc/passwd through a path with ../../ in it",
        false,
        TRAVERSAL,
        directory_traversal_monitored_file_read,
    ),
    host(
        "syscall.SearchPrivateKeysOrPasswords",
        "find DIR -name id_rsa over a temporary directory",
        false,
        FIND_KEYS,
        search_private_keys,
    ),
    host(
        "syscall.GrepPrivateKeys",
        "grep -r 'BEGIN RSA PRIVATE KEY' over a temporary directory",
        false,
        FIND_KEYS,
        grep_private_keys,
    ),
    host(
        "syscall.FindAwsCredentials",
        "find DIR -path '*.aws/credentials' over a temporary directory",
        false,
        FIND_AWS,
        find_aws_credentials,
    ),
    host(
        "syscall.ClearLogActivities",
        "creates a file under /var/log, then opens it with O_TRUNC; removes it",
        true,
        CLEAR_LOG,
        clear_log_activities,
    ),
    host(
        "syscall.RemoveBulkDataFromDisk",
        "shred -u on a temporary file",
        false,
        BULK_REMOVE,
        remove_bulk_data_from_disk,
    ),
    Action {
        under_run: UnderRun::RefusedButAlerts(crate::ALREADY_TRACED),
        ..host(
            "syscall.PtraceAttach",
            "PTRACE_ATTACH to a child `sleep`, then detach and kill it",
            false,
            PTRACE_ATTACH,
            ptrace_attach,
        )
    },
    Action {
        under_run: UnderRun::RefusedButAlerts(crate::ALREADY_TRACED),
        ..host(
            "syscall.PtraceAntiDebug",
            "a child calls ptrace(PTRACE_TRACEME) and exits",
            false,
            PTRACE_TRACEME,
            ptrace_anti_debug,
        )
    },
    host(
        "syscall.RedirectStdoutToNetwork",
        "connects to a loopback listener and dup2()s the socket over stdin and stdout, then restores them",
        false,
        REDIRECT,
        redirect_stdout_to_network,
    ),
    host(
        "syscall.NetcatRemoteCodeExecution",
        "runs `nc -e /bin/sh 127.0.0.1 4444` where nc is a copy of /bin/true (no connection is made)",
        false,
        NETCAT,
        netcat_remote_code_execution,
    ),
    host(
        "syscall.PacketSocket",
        "socket(AF_PACKET, SOCK_RAW) (rules fire inside containers only)",
        true,
        PACKET,
        packet_socket,
    ),
    host(
        "syscall.ChangeNamespace",
        "unshare(CLONE_NEWUTS), then setns() back to its own UTS namespace",
        true,
        NAMESPACE,
        change_namespace,
    ),
    host(
        "syscall.WriteBelowBinaryDir",
        "creates and removes a file in /usr/local/bin",
        true,
        WRITE_BIN,
        write_below_binary_dir,
    ),
    host(
        "syscall.WriteBelowEtc",
        "creates and removes a file in /etc/security",
        true,
        WRITE_BIN,
        write_below_etc,
    ),
    host(
        "syscall.DeleteShellHistory",
        "creates and unlinks a .bash_history file in a temporary directory",
        false,
        HISTORY,
        delete_shell_history,
    ),
    host(
        "syscall.SetuidRoot",
        "setuid(0) while root (takes the root identity again)",
        true,
        SETUID,
        setuid_root,
    ),
    Action {
        check: Some(kernel_has_modules),
        ..host(
            "syscall.KernelModuleLoad",
            "init_module() with an empty image (the kernel refuses it)",
            false,
            KMOD,
            kernel_module_load,
        )
    },
    host(
        "syscall.BpfProgLoad",
        "a process named bpf-loader calls bpf(BPF_PROG_LOAD) with an empty attribute block (the kernel refuses it)",
        false,
        BPF,
        bpf_prog_load,
    ),
    Action {
        name: "container.ReadSensitiveFile",
        description: "cat /etc/shadow inside a runc container",
        needs_root: true,
        slow: false,
        under_run: UnderRun::Same,
        check: None,
        expects: READ_SENSITIVE,
        kind: Kind::ContainerCommand(&["/bin/cat", "/etc/shadow"]),
    },
    Action {
        name: "container.TerminalShell",
        description: "`sh -c 'true; sleep 1'` as a runc container's process, with a terminal",
        needs_root: true,
        slow: false,
        under_run: UnderRun::Same,
        check: None,
        expects: TERMINAL_SHELL,
        kind: Kind::ContainerTty(&["/bin/sh", "-c", "true; sleep 1"]),
    },
    in_container(
        "container.PacketSocket",
        "syscall.PacketSocket inside a runc container",
        "syscall.PacketSocket",
        PACKET,
    ),
    in_container(
        "container.RedirectStdoutToNetwork",
        "syscall.RedirectStdoutToNetwork inside a runc container (host network, loopback)",
        "syscall.RedirectStdoutToNetwork",
        REDIRECT,
    ),
    in_container(
        "container.NetcatRemoteCodeExecution",
        "syscall.NetcatRemoteCodeExecution inside a runc container",
        "syscall.NetcatRemoteCodeExecution",
        NETCAT,
    ),
];

// ----- files -----

fn read_sensitive_file_untrusted(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.ReadSensitiveFileUntrusted";
    run_ok(
        A,
        Command::new(crate::util::which(A, "cat")?).arg("/etc/shadow"),
    )?;
    Ok("cat /etc/shadow".into())
}

fn read_sensitive_file_trusted_after_startup(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.ReadSensitiveFileTrustedAfterStartup";
    let dir = TempDir::new(A)?;
    let nginx = copy_exe(A, "dash", dir.path(), "nginx")?;
    // The shell itself (named nginx) opens the file, for the redirection.
    run_ok(
        A,
        Command::new(&nginx)
            .arg0("nginx")
            .args(["-c", "sleep 6; exec 3</etc/shadow; true"]),
    )?;
    Ok(format!("{} opened /etc/shadow after 6 s", nginx.display()))
}

fn run_shell_untrusted(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.RunShellUntrusted";
    let dir = TempDir::new(A)?;
    let nginx = copy_exe(A, "dash", dir.path(), "nginx")?;
    // `; true` keeps the shell from replacing itself with the last command.
    run_ok(
        A,
        Command::new(&nginx)
            .arg0("nginx")
            .args(["-c", "/bin/sh -c true; true"]),
    )?;
    Ok(format!("{} spawned `sh -c true`", nginx.display()))
}

fn system_user_interactive(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.SystemUserInteractive";
    let dir = TempDir::new(A)?;
    let sshd = copy_exe(A, "dash", dir.path(), "sshd")?;
    let setpriv = crate::util::which(A, "setpriv")?;
    let script = format!(
        "{} --reuid=65534 --regid=65534 --clear-groups /bin/true; true",
        setpriv.display()
    );
    run_ok(A, Command::new(&sshd).arg0("sshd").args(["-c", &script]))?;
    Ok(format!("{} ran /bin/true as uid 65534", sshd.display()))
}

fn service_account_interactive_shell(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.ServiceAccountInteractiveShell";
    let pty = nix::pty::openpty(None, None).map_err(sys_err(A, "openpty"))?;
    let setpriv = crate::util::which(A, "setpriv")?;
    let setsid = crate::util::which(A, "setsid")?;
    let slave = |what: &str| {
        pty.slave
            .try_clone()
            .map(Stdio::from)
            .map_err(io_err(A, format!("duplicating the terminal for {what}")))
    };
    // setpriv is not a process-group leader, so setsid makes a new session in place, takes the
    // terminal on stdin as its controlling terminal (-c) and executes the shell.
    let status = Command::new(setpriv)
        .args(["--reuid=1", "--regid=1", "--clear-groups"])
        .arg(setsid)
        .args(["-c", "/bin/sh", "-c", "true"])
        .stdin(slave("stdin")?)
        .stdout(slave("stdout")?)
        .stderr(slave("stderr")?)
        .status()
        .map_err(io_err(A, "running setpriv"))?;
    drop(pty);
    if !status.success() {
        return Err(Error::Failed {
            action: A,
            what: format!("setpriv … sh exited with {status}"),
        });
    }
    Ok("ran `sh -c true` as uid 1 with a controlling terminal".into())
}

fn fileless_execution_via_memfd(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.FilelessExecutionViaMemfd";
    let image = fs::read(crate::util::which(A, "true")?).map_err(io_err(A, "reading true"))?;
    let fd = memfd_create(c"vigil-generator", MFdFlags::MFD_CLOEXEC)
        .map_err(sys_err(A, "memfd_create"))?;
    let mut file = fs::File::from(fd);
    file.write_all(&image)
        .map_err(io_err(A, "writing the memfd"))?;
    let argv = [CString::from(c"vigil-memfd")];
    // The caller's environment, as any exec passes it on: tools that match alerts to the run
    // that caused them by `proc.env` (Falco's event-generator suite) see their marker.
    let env: Vec<CString> = std::env::vars_os()
        .filter_map(|(k, v)| {
            let mut pair = k.into_encoded_bytes();
            pair.push(b'=');
            pair.extend_from_slice(&v.into_encoded_bytes());
            CString::new(pair).ok()
        })
        .collect();
    let code = sys::child_execveat(file.as_fd(), &argv, &env).map_err(sys_err(A, "fork"))?;
    if code != 0 {
        return Err(Error::Failed {
            action: A,
            what: format!("execveat of the memfd: child exited with {code}"),
        });
    }
    Ok("executed a copy of /bin/true from memfd:vigil-generator".into())
}

fn execution_from_dev_shm(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.ExecutionFromDevShm";
    let dir = TempDir::new_in(A, Path::new("/dev/shm"))?;
    let exe = copy_exe(A, "true", dir.path(), "vigil-shm")?;
    run_ok(A, &mut Command::new(&exe))?;
    Ok(format!("ran {}", exe.display()))
}

fn create_symlink_over_sensitive_files(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.CreateSymlinkOverSensitiveFiles";
    let dir = TempDir::new(A)?;
    let link = dir.join("shadow-link");
    std::os::unix::fs::symlink("/etc/shadow", &link).map_err(io_err(A, "symlink"))?;
    Ok(format!("symlink /etc/shadow -> {}", link.display()))
}

fn create_hardlink_over_sensitive_files(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.CreateHardlinkOverSensitiveFiles";
    // A hard link needs the same filesystem: the first candidate on /etc's device.
    let dev = fs::metadata("/etc/shadow")
        .map_err(io_err(A, "stat /etc/shadow"))?
        .dev();
    let parent = ["/tmp", "/var/tmp", "/root", "/etc"]
        .iter()
        .map(Path::new)
        .find(|p| fs::metadata(p).is_ok_and(|m| m.dev() == dev))
        .unwrap_or(Path::new("/tmp"));
    let dir = TempDir::new_in(A, parent)?;
    let link = dir.join("shadow-hardlink");
    match fs::hard_link("/etc/shadow", &link) {
        Ok(()) => Ok(format!("hard link /etc/shadow -> {}", link.display())),
        // The attempt is what the rules detect; without root the kernel refuses it.
        Err(e) => Ok(format!(
            "hard link /etc/shadow -> {} attempted: {e}",
            link.display()
        )),
    }
}

fn directory_traversal_monitored_file_read(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.DirectoryTraversalMonitoredFileRead";
    let dir = TempDir::new(A)?;
    // DIR/../../…/etc/passwd with one `..` per component of DIR (at least two).
    let depth = dir.path().components().count().saturating_sub(1).max(2);
    let mut path = dir.path().to_path_buf();
    for _ in 0..depth {
        path.push("..");
    }
    path.push("etc/passwd");
    fs::File::open(&path).map_err(io_err(A, format!("opening {}", path.display())))?;
    Ok(format!("opened {}", path.display()))
}

fn search_private_keys(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.SearchPrivateKeysOrPasswords";
    let dir = TempDir::new(A)?;
    let find = crate::util::which(A, "find")?;
    run_ok(
        A,
        Command::new(find).arg(dir.path()).args(["-name", "id_rsa"]),
    )?;
    Ok(format!("find {} -name id_rsa", dir.path().display()))
}

fn grep_private_keys(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.GrepPrivateKeys";
    let dir = TempDir::new(A)?;
    fs::write(dir.join("notes.txt"), b"nothing to see\n").map_err(io_err(A, "writing"))?;
    let grep = crate::util::which(A, "grep")?;
    // Exit status 1 (no match) is expected.
    status(
        A,
        Command::new(grep)
            .args(["-r", "BEGIN RSA PRIVATE KEY"])
            .arg(dir.path()),
    )?;
    Ok(format!(
        "grep -r 'BEGIN RSA PRIVATE KEY' {}",
        dir.path().display()
    ))
}

fn find_aws_credentials(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.FindAwsCredentials";
    let dir = TempDir::new(A)?;
    let find = crate::util::which(A, "find")?;
    run_ok(
        A,
        Command::new(find)
            .arg(dir.path())
            .args(["-path", "*.aws/credentials"]),
    )?;
    Ok(format!(
        "find {} -path '*.aws/credentials'",
        dir.path().display()
    ))
}

fn clear_log_activities(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.ClearLogActivities";
    let path = Path::new("/var/log").join(format!("vigil-generator-{}.log", std::process::id()));
    let _cleanup = TempFile(path.clone());
    fs::write(&path, b"a log line\n").map_err(io_err(A, format!("creating {}", path.display())))?;
    OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(&path)
        .map_err(io_err(A, format!("truncating {}", path.display())))?;
    Ok(format!("truncated {}", path.display()))
}

fn remove_bulk_data_from_disk(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.RemoveBulkDataFromDisk";
    let dir = TempDir::new(A)?;
    let victim = dir.join("data.bin");
    fs::write(&victim, [0x5au8; 4096]).map_err(io_err(A, "writing the victim file"))?;
    let shred = crate::util::which(A, "shred")?;
    run_ok(A, Command::new(shred).arg("-u").arg(&victim))?;
    Ok(format!("shred -u {}", victim.display()))
}

// ----- processes -----

fn ptrace_attach(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.PtraceAttach";
    use nix::sys::ptrace;
    use nix::sys::signal::Signal;
    use nix::sys::wait::waitpid;
    use nix::unistd::Pid;
    let sleep = crate::util::which(A, "sleep")?;
    let mut child = Command::new(sleep)
        .arg("30")
        .stdin(Stdio::null())
        .spawn()
        .map_err(io_err(A, "spawning sleep"))?;
    let pid = Pid::from_raw(child.id() as i32);
    // Attach once `sleep` sleeps: the attach then always finds it at the same point (not
    // half-way through its loader), so the same action gives the same events every time.
    crate::util::wait_until_sleeping(pid.as_raw(), std::time::Duration::from_secs(5));
    let attached = ptrace::attach(pid);
    if attached.is_ok() {
        // Wait for the attach stop, then let go.
        let _ = waitpid(pid, None);
        let _ = ptrace::detach(pid, None::<Signal>);
    }
    let _ = child.kill();
    let _ = child.wait();
    attached.map_err(sys_err(A, format!("PTRACE_ATTACH {pid}")))?;
    Ok(format!("attached to and detached from sleep (pid {pid})"))
}

fn ptrace_anti_debug(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.PtraceAntiDebug";
    match sys::child_traceme().map_err(sys_err(A, "fork"))? {
        0 => Ok("a child called PTRACE_TRACEME".into()),
        errno => Err(Error::Failed {
            action: A,
            what: format!("PTRACE_TRACEME failed: errno {errno}"),
        }),
    }
}

fn netcat_remote_code_execution(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.NetcatRemoteCodeExecution";
    let dir = TempDir::new(A)?;
    let nc = copy_exe(A, "true", dir.path(), "nc")?;
    run_ok(
        A,
        Command::new(&nc)
            .arg0("nc")
            .args(["-e", "/bin/sh", "127.0.0.1", "4444"]),
    )?;
    Ok(format!("{} -e /bin/sh 127.0.0.1 4444", nc.display()))
}

// ----- network -----

fn redirect_stdout_to_network(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.RedirectStdoutToNetwork";
    let listener = TcpListener::bind("127.0.0.1:0").map_err(io_err(A, "listening on loopback"))?;
    let addr = listener.local_addr().map_err(io_err(A, "local address"))?;
    // The kernel completes the connection into the listen backlog: accepted afterwards in
    // this thread, so the descriptors are numbered the same in every run.
    let stream = TcpStream::connect(addr).map_err(io_err(A, format!("connecting to {addr}")))?;
    let accepted = listener.accept();
    let saved_out =
        nix::unistd::dup(std::io::stdout().as_fd()).map_err(sys_err(A, "dup stdout"))?;
    let saved_in = nix::unistd::dup(std::io::stdin().as_fd()).map_err(sys_err(A, "dup stdin"))?;
    let result = nix::unistd::dup2_stdout(&stream)
        .and_then(|()| nix::unistd::dup2_stdin(&stream))
        .map_err(sys_err(A, "dup2 of the socket"));
    // Restore the original streams whatever happened.
    let restored = nix::unistd::dup2_stdout(&saved_out)
        .and_then(|()| nix::unistd::dup2_stdin(&saved_in))
        .map_err(sys_err(A, "restoring stdin/stdout"));
    drop(stream);
    drop(accepted);
    result?;
    restored?;
    Ok(format!(
        "dup2'd a socket connected to {addr} over fds 0 and 1"
    ))
}

fn packet_socket(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.PacketSocket";
    let sock = socket(
        AddressFamily::Packet,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(sys_err(A, "socket(AF_PACKET)"))?;
    drop(sock);
    Ok("created and closed an AF_PACKET raw socket".into())
}

fn change_namespace(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.ChangeNamespace";
    // setns() into the namespace we are in (no change), then unshare a new UTS namespace: it
    // affects only this process, which exits right after.
    let own =
        fs::File::open("/proc/self/ns/uts").map_err(io_err(A, "opening /proc/self/ns/uts"))?;
    nix::sched::setns(&own, CloneFlags::CLONE_NEWUTS).map_err(sys_err(A, "setns"))?;
    nix::sched::unshare(CloneFlags::CLONE_NEWUTS).map_err(sys_err(A, "unshare(CLONE_NEWUTS)"))?;
    Ok("setns(CLONE_NEWUTS) and unshare(CLONE_NEWUTS)".into())
}

fn write_below(a: &'static str, dir: &str) -> Result<String, Error> {
    let path = Path::new(dir).join(format!("vigil-generator-{}", std::process::id()));
    let _cleanup = TempFile(path.clone());
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o644)
        .open(&path)
        .map_err(io_err(a, format!("creating {}", path.display())))?;
    Ok(format!("created and removed {}", path.display()))
}

fn write_below_binary_dir(_: &Context) -> Result<String, Error> {
    write_below("syscall.WriteBelowBinaryDir", "/usr/local/bin")
}

fn write_below_etc(_: &Context) -> Result<String, Error> {
    write_below("syscall.WriteBelowEtc", "/etc/security")
}

fn delete_shell_history(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.DeleteShellHistory";
    let dir = TempDir::new(A)?;
    let history = dir.join(".bash_history");
    fs::write(&history, b"ls\n").map_err(io_err(A, "writing .bash_history"))?;
    fs::remove_file(&history).map_err(io_err(A, "unlinking .bash_history"))?;
    Ok(format!("unlinked {}", history.display()))
}

fn setuid_root(_: &Context) -> Result<String, Error> {
    const A: &str = "syscall.SetuidRoot";
    nix::unistd::setuid(nix::unistd::Uid::from_raw(0)).map_err(sys_err(A, "setuid(0)"))?;
    Ok("setuid(0)".into())
}

/// Without `CONFIG_MODULES` the kernel has no `init_module` (ENOSYS) and no tracepoint for it.
fn kernel_has_modules() -> Option<String> {
    (!Path::new("/proc/modules").exists()).then(|| {
        "the kernel has no module support (no /proc/modules): init_module is not implemented".into()
    })
}

fn kernel_module_load(_: &Context) -> Result<String, Error> {
    let r = nix::kmod::init_module(&[], c"");
    Ok(format!(
        "init_module(empty image) returned {}",
        match r {
            Ok(()) => "success".to_string(),
            Err(e) => e.desc().to_string(),
        }
    ))
}

fn bpf_prog_load(ctx: &Context) -> Result<String, Error> {
    const A: &str = "syscall.BpfProgLoad";
    if std::env::var_os(AS_NAMED).is_none() {
        // `vigil` is a known BPF loader in Vigil's rules: make the call as `bpf-loader`.
        return run_self_as(ctx, A, "bpf-loader");
    }
    let errno = sys::bpf_prog_load_invalid();
    Ok(format!(
        "bpf(BPF_PROG_LOAD, empty) returned {}",
        nix::errno::Errno::from_raw(errno).desc()
    ))
}

/// Set in the environment of a re-executed generator ([`run_self_as`]).
const AS_NAMED: &str = "VIGIL_GENERATOR_RENAMED";

/// Runs `action` again in a child process whose name is `name`: the calling binary executed
/// through a symbolic link called `name` (the kernel names a process after the path it
/// executed), with [`AS_NAMED`] set so that the action does the work instead of recursing.
fn run_self_as(ctx: &Context, action: &'static str, name: &str) -> Result<String, Error> {
    let dir = TempDir::new(action)?;
    let link = dir.join(name);
    std::os::unix::fs::symlink(&ctx.exe, &link).map_err(io_err(action, "linking the binary"))?;
    let out = Command::new(&link)
        .args(["generate", "run", "--exact", action])
        .env(AS_NAMED, name)
        .stdin(Stdio::null())
        .output()
        .map_err(io_err(action, format!("running {}", link.display())))?;
    if !out.status.success() {
        return Err(Error::Failed {
            action,
            what: format!(
                "{} failed: {}",
                link.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        });
    }
    Ok(format!(
        "as {name}: {}",
        String::from_utf8_lossy(&out.stdout).trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> Context {
        Context::from_env()
    }

    #[test]
    fn unprivileged_actions_run_and_clean_up() {
        let _serial = crate::TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        let tmp_before: Vec<_> = leftovers();
        for name in [
            "syscall.CreateSymlinkOverSensitiveFiles",
            "syscall.CreateHardlinkOverSensitiveFiles",
            "syscall.DirectoryTraversalMonitoredFileRead",
            "syscall.SearchPrivateKeysOrPasswords",
            "syscall.GrepPrivateKeys",
            "syscall.FindAwsCredentials",
            "syscall.RemoveBulkDataFromDisk",
            "syscall.DeleteShellHistory",
            "syscall.RunShellUntrusted",
            "syscall.FilelessExecutionViaMemfd",
            "syscall.ExecutionFromDevShm",
            "syscall.NetcatRemoteCodeExecution",
            "syscall.PtraceAntiDebug",
            "syscall.PtraceAttach",
            "syscall.KernelModuleLoad",
        ] {
            let action = crate::find(name).unwrap();
            let out = action
                .run(&ctx())
                .unwrap_or_else(|e| panic!("{name} failed: {e}"));
            assert!(!out.is_empty(), "{name}");
        }
        let after = leftovers();
        let new: Vec<_> = after.iter().filter(|p| !tmp_before.contains(p)).collect();
        assert!(new.is_empty(), "left behind: {new:?}");
    }

    fn leftovers() -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        for dir in [std::env::temp_dir(), "/dev/shm".into(), "/var/tmp".into()] {
            if let Ok(rd) = fs::read_dir(&dir) {
                for e in rd.flatten() {
                    if e.file_name()
                        .to_string_lossy()
                        .starts_with("vigil-generator")
                    {
                        out.push(e.path());
                    }
                }
            }
        }
        out
    }

    #[test]
    #[allow(clippy::print_stderr)]
    fn root_actions_run_and_clean_up_when_root() {
        let _serial = crate::TEMP_DIRS.lock().unwrap_or_else(|e| e.into_inner());
        if !nix::unistd::geteuid().is_root() {
            if std::env::var("VIGIL_TEST_STRICT").is_ok_and(|v| v == "1") {
                panic!("root_actions_run_and_clean_up_when_root: VIGIL_TEST_STRICT=1 but not root");
            }
            eprintln!("skipping root_actions_run_and_clean_up_when_root: not root");
            return;
        }
        // Actions that change this process's identity or namespaces (SetuidRoot,
        // ChangeNamespace) run in the CLI's child processes, not in the test harness.
        for name in [
            "syscall.ReadSensitiveFileUntrusted",
            "syscall.SystemUserInteractive",
            "syscall.ServiceAccountInteractiveShell",
            "syscall.ClearLogActivities",
            "syscall.WriteBelowBinaryDir",
            "syscall.WriteBelowEtc",
            "syscall.PacketSocket",
        ] {
            crate::find(name)
                .unwrap()
                .run(&ctx())
                .unwrap_or_else(|e| panic!("{name} failed: {e}"));
        }
        let pid = std::process::id();
        for p in [
            format!("/var/log/vigil-generator-{pid}.log"),
            format!("/usr/local/bin/vigil-generator-{pid}"),
            format!("/etc/security/vigil-generator-{pid}"),
        ] {
            assert!(!Path::new(&p).exists(), "{p} left behind");
        }
    }
}

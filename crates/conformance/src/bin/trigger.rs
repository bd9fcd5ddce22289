//! `vigil-trigger CASE DIR PORT`: performs exactly one syscall scenario of the conformance suite
//! (see `vigil_conformance::cases::CASES` for what each case does and what a driver must report)
//! with files under DIR (an existing, empty directory) and loopback ports PORT and PORT + 1,
//! then exits 0 (the `exit` case: 3). It prints nothing, except a message on stderr and exit
//! status 100 when a setup step fails (the case's own syscall may fail: that is what drivers
//! must report, so its result is not checked here).
// The trigger is a command: it reports setup failures on stderr.
#![allow(clippy::print_stderr)]

use std::ffi::{CStr, CString};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::unix::ffi::OsStrExt;

use vigil_conformance::cases::{self, BAD_ARG, BAD_NAME, DEEP_ENV_VAR, EXEC_ARG, EXEC_ENV};
use vigil_conformance::sys::{self, Addr, OpenHow};

const AT_FDCWD: i32 = libc::AT_FDCWD;

/// A setup step failed.
struct Setup(String);

type R = Result<(), Setup>;

fn need<T>(what: &str, r: Result<T, i32>) -> Result<T, Setup> {
    r.map_err(|errno| Setup(format!("{what} failed with errno {errno}")))
}

fn cs(bytes: &[u8]) -> CString {
    CString::new(bytes).unwrap_or_default()
}

struct Trigger {
    dir: Vec<u8>,
    port: u16,
}

impl Trigger {
    fn path(&self, rel: &[u8]) -> CString {
        let mut p = self.dir.clone();
        if !rel.is_empty() {
            p.push(b'/');
            p.extend_from_slice(rel);
        }
        cs(&p)
    }

    fn lo(&self, n: u16) -> Addr<'static> {
        Addr::Inet(SocketAddr::from((
            Ipv4Addr::LOCALHOST,
            self.port.wrapping_add(n),
        )))
    }

    fn lo6(&self, n: u16) -> Addr<'static> {
        Addr::Inet(SocketAddr::from((
            Ipv6Addr::LOCALHOST,
            self.port.wrapping_add(n),
        )))
    }

    /// Opens the case directory (fd 3 when nothing else is open).
    fn open_dir(&self) -> Result<i32, Setup> {
        let fd = need(
            "open the case directory",
            sys::openat(
                AT_FDCWD,
                &self.path(b""),
                libc::O_RDONLY | libc::O_DIRECTORY,
                0,
            ),
        )?;
        Ok(fd as i32)
    }

    /// Creates (or truncates) `rel` and returns the open descriptor.
    fn create(&self, rel: &[u8]) -> Result<i32, Setup> {
        let fd = need(
            "create a file",
            sys::openat(
                AT_FDCWD,
                &self.path(rel),
                libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                0o600,
            ),
        )?;
        Ok(fd as i32)
    }

    fn create_closed(&self, rel: &[u8]) -> R {
        let fd = self.create(rel)?;
        need("close", sys::close(fd))?;
        Ok(())
    }

    fn tcp_pair(&self) -> Result<(i32, i32), Setup> {
        let srv = need("socket", sys::socket(libc::AF_INET, libc::SOCK_STREAM, 0))? as i32;
        need("bind", sys::bind(srv, self.lo(0)))?;
        need("listen", sys::listen(srv, 8))?;
        let cli = need("socket", sys::socket(libc::AF_INET, libc::SOCK_STREAM, 0))? as i32;
        need("bind", sys::bind(cli, self.lo(1)))?;
        need("connect", sys::connect(cli, self.lo(0)))?;
        Ok((srv, cli))
    }

    fn udp_pair(&self) -> Result<(i32, i32), Setup> {
        let srv = need("socket", sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0))? as i32;
        need("bind", sys::bind(srv, self.lo(0)))?;
        let cli = need("socket", sys::socket(libc::AF_INET, libc::SOCK_DGRAM, 0))? as i32;
        need("bind", sys::bind(cli, self.lo(1)))?;
        Ok((srv, cli))
    }

    fn exec_true(&self, argv: &[&[u8]], env: &[Vec<u8>]) -> R {
        let argv: Vec<CString> = argv.iter().map(|a| cs(a)).collect();
        let argv: Vec<&CStr> = argv.iter().map(CString::as_c_str).collect();
        let env: Vec<CString> = env.iter().map(|a| cs(a)).collect();
        let env: Vec<&CStr> = env.iter().map(CString::as_c_str).collect();
        let err = sys::execve(c"/bin/true", &argv, &env);
        need("execve /bin/true", err.map(|_| ()))
    }

    fn run(&self, case: &str) -> R {
        match case {
            "open" => {
                let _ = sys::open(
                    &self.path(b"open.txt"),
                    libc::O_WRONLY | libc::O_CREAT | libc::O_TRUNC,
                    0o640,
                );
            }
            "open-enoent" => {
                let _ = sys::open(&self.path(b"missing.txt"), libc::O_RDONLY, 0);
            }
            "openat" => {
                let dir = self.open_dir()?;
                let _ = sys::openat(
                    dir,
                    c"openat.txt",
                    libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                    0o600,
                );
            }
            "openat2" => {
                let how = OpenHow {
                    flags: (libc::O_WRONLY | libc::O_CREAT) as u64,
                    mode: 0o644,
                    resolve: 4, // RESOLVE_NO_SYMLINKS
                };
                let _ = sys::openat2(AT_FDCWD, &self.path(b"openat2.txt"), &how);
            }
            "creat" => {
                let _ = sys::creat(&self.path(b"creat.txt"), 0o600);
            }
            "long-path" => {
                let _ = sys::openat(
                    AT_FDCWD,
                    &cs(&cases::long_path(&self.dir)),
                    libc::O_RDONLY,
                    0,
                );
            }
            "nonutf8-path" => {
                let _ = sys::openat(
                    AT_FDCWD,
                    &self.path(BAD_NAME),
                    libc::O_WRONLY | libc::O_CREAT,
                    0o600,
                );
            }
            "close" => {
                let fd = self.create(b"close.txt")?;
                let _ = sys::close(fd);
            }
            "dup" => {
                let fd = self.create(b"dup.txt")?;
                let _ = sys::dup(fd);
            }
            "dup2" => {
                let fd = self.create(b"dup.txt")?;
                let _ = sys::dup2(fd, 10);
            }
            "dup3" => {
                let fd = self.create(b"dup.txt")?;
                let _ = sys::dup3(fd, 11, libc::O_CLOEXEC);
            }
            "fcntl-dupfd" => {
                let fd = self.create(b"dup.txt")?;
                let _ = sys::fcntl(fd, libc::F_DUPFD, 20);
            }
            "pipe" => {
                let _ = sys::pipe();
            }
            "pipe2" => {
                let _ = sys::pipe2(libc::O_CLOEXEC | libc::O_NONBLOCK);
            }
            "memfd_create" => {
                let _ = sys::memfd_create(c"vigil-conf", libc::MFD_CLOEXEC);
            }
            "link" => {
                self.create_closed(b"a")?;
                let _ = sys::link(&self.path(b"a"), &self.path(b"b"));
            }
            "linkat" => {
                let dir = self.open_dir()?;
                self.create_closed(b"a")?;
                let _ = sys::linkat(
                    AT_FDCWD,
                    &self.path(b"a"),
                    dir,
                    c"c",
                    libc::AT_SYMLINK_FOLLOW,
                );
            }
            "symlink" => {
                let _ = sys::symlink(c"target-x", &self.path(b"s"));
            }
            "symlinkat" => {
                let dir = self.open_dir()?;
                let _ = sys::symlinkat(c"target-y", dir, c"s2");
            }
            "rename" => {
                self.create_closed(b"a")?;
                let _ = sys::rename(&self.path(b"a"), &self.path(b"b"));
            }
            "renameat" => {
                let dir = self.open_dir()?;
                self.create_closed(b"a")?;
                let _ = sys::renameat(dir, c"a", AT_FDCWD, &self.path(b"b"));
            }
            "renameat2" => {
                let dir = self.open_dir()?;
                self.create_closed(b"a")?;
                let _ = sys::renameat2(dir, c"a", dir, c"b", libc::RENAME_NOREPLACE);
            }
            "unlink" => {
                self.create_closed(b"a")?;
                let _ = sys::unlink(&self.path(b"a"));
            }
            "unlinkat" => {
                let dir = self.open_dir()?;
                need("mkdirat", sys::mkdirat(dir, c"d", 0o700))?;
                let _ = sys::unlinkat(dir, c"d", libc::AT_REMOVEDIR);
            }
            "mkdir" => {
                let _ = sys::mkdir(&self.path(b"d"), 0o750);
            }
            "mkdirat" => {
                let dir = self.open_dir()?;
                let _ = sys::mkdirat(dir, c"d", 0o700);
            }
            "chmod" => {
                self.create_closed(b"a")?;
                let _ = sys::chmod(&self.path(b"a"), 0o640);
            }
            "fchmod" => {
                let fd = self.create(b"a")?;
                let _ = sys::fchmod(fd, 0o600);
            }
            "fchmodat" => {
                let dir = self.open_dir()?;
                self.create_closed(b"a")?;
                let _ = sys::fchmodat(dir, c"a", 0o604);
            }
            "mount" => {
                need(
                    "mkdir mnt",
                    sys::mkdirat(AT_FDCWD, &self.path(b"mnt"), 0o700),
                )?;
                let root = sys::getresuid().map(|ids| ids[1] == 0).unwrap_or(false);
                if root {
                    need("unshare(CLONE_NEWNS)", sys::unshare(libc::CLONE_NEWNS))?;
                    need(
                        "make / private",
                        sys::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None),
                    )?;
                }
                let _ = sys::mount(
                    Some(c"vigil-conf"),
                    &self.path(b"mnt"),
                    Some(c"tmpfs"),
                    libc::MS_NOSUID | libc::MS_NODEV,
                    Some(c"size=64k"),
                );
            }
            "execve" => {
                let env: Vec<Vec<u8>> = EXEC_ENV.iter().map(|v| v.to_vec()).collect();
                self.exec_true(&[b"true", EXEC_ARG], &env)?;
            }
            "execveat" => {
                let dir = need(
                    "open /usr/bin",
                    sys::openat(AT_FDCWD, c"/usr/bin", libc::O_PATH | libc::O_DIRECTORY, 0),
                )? as i32;
                let env = [c"VIGIL_CONF=1"];
                let r = sys::execveat(dir, c"true", &[c"true", c"at-arg"], &env, 0);
                need("execveat", r.map(|_| ()))?;
            }
            "nonutf8-argv" => {
                self.exec_true(&[b"true", BAD_ARG], &[b"VIGIL_CONF=1".to_vec()])?;
            }
            "deep-env" => {
                let mut env = cases::deep_env_padding();
                env.push(DEEP_ENV_VAR.to_vec());
                self.exec_true(&[b"true"], &env)?;
            }
            "fork" => {
                let pid = need("fork", sys::fork_and_exit())?;
                let _ = sys::wait(pid);
            }
            "vfork" => {
                let pid = need("vfork", sys::vfork_and_exit())?;
                let _ = sys::wait(pid);
            }
            "clone" => {
                let flags = libc::CLONE_FILES as u64 | libc::SIGCHLD as u64;
                let pid = need("clone", sys::clone_and_exit(flags))?;
                let _ = sys::wait(pid);
            }
            "clone3" => {
                let pid = need(
                    "clone3",
                    sys::clone3_and_exit(libc::CLONE_FILES as u64, libc::SIGCHLD as u64),
                )?;
                let _ = sys::wait(pid);
            }
            "exit" => sys::exit_group(cases::EXIT_CODE),
            "kill" => {
                let _ = sys::kill(sys::getpid(), 0);
            }
            "ptrace" => {
                let _ = sys::ptrace_traceme();
            }
            "setuid" => {
                let ids = need("getresuid", sys::getresuid())?;
                let _ = sys::setuid(ids[0]);
            }
            "setuid-fail" => {
                let _ = sys::setuid(u32::MAX);
            }
            "setgid" => {
                let ids = need("getresgid", sys::getresgid())?;
                let _ = sys::setgid(ids[0]);
            }
            "setgid-fail" => {
                let _ = sys::setgid(u32::MAX);
            }
            "setresuid" => {
                let [r, e, s] = need("getresuid", sys::getresuid())?;
                let _ = sys::setresuid(r, e, s);
            }
            "setresuid-root" => {
                let _ = sys::setresuid(0, 0, 0);
            }
            "setresgid" => {
                let [r, e, s] = need("getresgid", sys::getresgid())?;
                let _ = sys::setresgid(r, e, s);
            }
            "setns" => {
                let fd = need(
                    "open /proc/self/ns/uts",
                    sys::openat(AT_FDCWD, c"/proc/self/ns/uts", libc::O_RDONLY, 0),
                )? as i32;
                let _ = sys::setns(fd, libc::CLONE_NEWUTS);
            }
            "unshare" => {
                let _ = sys::unshare(libc::CLONE_NEWUTS);
            }
            "init_module" => {
                let _ = sys::init_module(&[0u8; 64], c"vigil=1");
            }
            "finit_module" => {
                self.create_closed(b"mod.ko")?;
                let fd = need(
                    "open mod.ko",
                    sys::openat(AT_FDCWD, &self.path(b"mod.ko"), libc::O_RDONLY, 0),
                )? as i32;
                let _ = sys::finit_module(fd, c"vigil=2", 0);
            }
            "bpf" => {
                let _ = sys::bpf(5, &[0u8; 144]); // BPF_PROG_LOAD of program type 0
            }
            "socket" => {
                let _ = sys::socket(libc::AF_INET6, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
            }
            "bind" => {
                let fd = need("socket", sys::socket(libc::AF_INET, libc::SOCK_STREAM, 0))?;
                let _ = sys::bind(fd as i32, self.lo(0));
            }
            "listen" => {
                let fd = need("socket", sys::socket(libc::AF_INET, libc::SOCK_STREAM, 0))?;
                need("bind", sys::bind(fd as i32, self.lo(0)))?;
                let _ = sys::listen(fd as i32, 7);
            }
            "connect" => {
                self.tcp_pair()?;
            }
            "accept" => {
                let (srv, _cli) = self.tcp_pair()?;
                let _ = sys::accept(srv);
            }
            "accept4" => {
                let (srv, _cli) = self.tcp_pair()?;
                let _ = sys::accept4(srv, libc::SOCK_CLOEXEC);
            }
            "sendto" => {
                let (_srv, cli) = self.udp_pair()?;
                let _ = sys::sendto(cli, b"hello", self.lo(0));
            }
            "sendmsg" => {
                let (_srv, cli) = self.udp_pair()?;
                need("connect", sys::connect(cli, self.lo(0)))?;
                let _ = sys::sendmsg(cli, b"hello world");
            }
            "execve-enoent" => {
                let _ = sys::execve(&self.path(b"missing-exe"), &[c"missing-exe"], &[]);
            }
            "clone-fail" => {
                // CLONE_SIGHAND without CLONE_VM is invalid.
                let flags = libc::CLONE_SIGHAND as u64 | libc::SIGCHLD as u64;
                if let Ok(pid) = sys::clone_and_exit(flags) {
                    let _ = sys::wait(pid);
                }
            }
            "connect-refused" => {
                let fd = need("socket", sys::socket(libc::AF_INET, libc::SOCK_STREAM, 0))?;
                need("bind", sys::bind(fd as i32, self.lo(1)))?;
                let _ = sys::connect(fd as i32, self.lo(0));
            }
            "connect6" => {
                let srv = need("socket", sys::socket(libc::AF_INET6, libc::SOCK_STREAM, 0))?;
                need("bind", sys::bind(srv as i32, self.lo6(0)))?;
                need("listen", sys::listen(srv as i32, 8))?;
                let cli = need("socket", sys::socket(libc::AF_INET6, libc::SOCK_STREAM, 0))?;
                need("bind", sys::bind(cli as i32, self.lo6(1)))?;
                let _ = sys::connect(cli as i32, self.lo6(0));
            }
            "connect-unix" => {
                let path = self.path(b"sock");
                let srv = need("socket", sys::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0))?;
                need("bind", sys::bind(srv as i32, Addr::Unix(path.as_bytes())))?;
                need("listen", sys::listen(srv as i32, 8))?;
                let cli = need("socket", sys::socket(libc::AF_UNIX, libc::SOCK_STREAM, 0))?;
                let _ = sys::connect(cli as i32, Addr::Unix(path.as_bytes()));
            }
            other => return Err(Setup(format!("unknown case `{other}`"))),
        }
        Ok(())
    }
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let [_, case, dir, port] = &args[..] else {
        eprintln!("usage: vigil-trigger CASE DIR PORT");
        std::process::exit(100);
    };
    let Some(port) = port.to_str().and_then(|p| p.parse::<u16>().ok()) else {
        eprintln!("vigil-trigger: invalid port {port:?}");
        std::process::exit(100);
    };
    let trigger = Trigger {
        dir: dir.as_bytes().to_vec(),
        port,
    };
    // Only 0, 1 and 2 stay open, so the case's descriptors are predictable (a driver that
    // launches the trigger may leak descriptors into it). `close_range` is not a watched call.
    let _ = sys::close_from(3);
    if let Err(Setup(message)) = trigger.run(&case.to_string_lossy()) {
        eprintln!("vigil-trigger {}: {message}", case.to_string_lossy());
        std::process::exit(100);
    }
    sys::exit_group(0);
}

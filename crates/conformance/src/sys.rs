//! Raw system calls for the trigger, one safe wrapper per call. Every call goes through
//! `syscall(2)` with the exact syscall number (glibc's wrappers often use another syscall:
//! `open` → `openat`, `fork` → `clone`, `mkdir` → `mkdirat` …), so each case performs exactly
//! the syscall it names. This is the crate's only module with `unsafe`.
//!
//! Descriptor arguments are raw numbers: which descriptors a call may close or replace is the
//! caller's business (the trigger holds no descriptors owned by Rust objects).
#![allow(unsafe_code)]

use std::ffi::CStr;
use std::net::SocketAddr;

/// The result of a raw call: the return value, or the errno.
pub type SysResult = Result<i64, i32>;

/// `syscall(nr, a…)` with errno converted.
///
/// # Safety
/// Every argument that the kernel treats as a pointer must point to memory valid for what the
/// syscall reads or writes there, for the duration of the call.
unsafe fn raw(nr: libc::c_long, a: [usize; 6]) -> SysResult {
    // SAFETY: forwarded to the caller's contract above.
    let ret = unsafe { libc::syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]) };
    if ret < 0 {
        Err(std::io::Error::last_os_error().raw_os_error().unwrap_or(0))
    } else {
        Ok(ret)
    }
}

/// A string argument's address, its bytes read first. A BPF program cannot take a page fault:
/// a string on a page this process never touched (a file page of its read-only data not yet
/// in its page tables) reads as nothing there (`<NA>`, counted as a read fault), and a call
/// that fails before reading its argument (`init_module` of a bad image) or an entry probe
/// (`execveat`'s name, read as the call starts) can meet one, depending on what else the
/// process touched. A program's strings are normally touched before it passes them; the
/// cases here are too, so what they check does not depend on the binary's page layout.
fn p(s: &CStr) -> usize {
    let sum = s
        .to_bytes()
        .iter()
        .fold(0u8, |acc, &b| acc.wrapping_add(std::hint::black_box(b)));
    std::hint::black_box(sum);
    s.as_ptr() as usize
}

/// `fd` as a syscall argument (sign-extended, as the kernel reads an `int`).
fn fd(n: i32) -> usize {
    n as isize as usize
}

macro_rules! call {
    ($nr:expr $(, $a:expr)*) => {{
        let mut args = [0usize; 6];
        let given = [$($a),*];
        args[..given.len()].copy_from_slice(&given);
        // SAFETY: every pointer argument comes from a reference or an owned buffer that
        // outlives the call, with the size the syscall expects (see each wrapper).
        unsafe { raw($nr, args) }
    }};
}

/// A syscall of x86-64's legacy set (`open`, `creat`, `fork` …) that the asm-generic table of
/// aarch64 lacks: made as on x86-64, and `ENOSYS` (what the kernel would answer) elsewhere. The
/// conformance cases are x86-64's (their expectations carry x86-64 values); this keeps the crate
/// building for every architecture.
macro_rules! legacy {
    ($nr:ident $(, $a:expr)*) => {{
        #[cfg(target_arch = "x86_64")]
        let result = call!(libc::$nr $(, $a)*);
        #[cfg(not(target_arch = "x86_64"))]
        let result: SysResult = {
            $(let _ = $a;)*
            Err(libc::ENOSYS)
        };
        result
    }};
}

pub fn open(path: &CStr, flags: i32, mode: u32) -> SysResult {
    legacy!(SYS_open, p(path), flags as usize, mode as usize)
}

pub fn openat(dirfd: i32, path: &CStr, flags: i32, mode: u32) -> SysResult {
    call!(
        libc::SYS_openat,
        fd(dirfd),
        p(path),
        flags as usize,
        mode as usize
    )
}

/// `struct open_how` (`linux/openat2.h`).
#[repr(C)]
pub struct OpenHow {
    pub flags: u64,
    pub mode: u64,
    pub resolve: u64,
}

pub fn openat2(dirfd: i32, path: &CStr, how: &OpenHow) -> SysResult {
    call!(
        libc::SYS_openat2,
        fd(dirfd),
        p(path),
        how as *const OpenHow as usize,
        std::mem::size_of::<OpenHow>()
    )
}

pub fn creat(path: &CStr, mode: u32) -> SysResult {
    legacy!(SYS_creat, p(path), mode as usize)
}

pub fn close(n: i32) -> SysResult {
    call!(libc::SYS_close, fd(n))
}

/// Closes every descriptor from `first` on (`close_range`, not a watched `close`).
pub fn close_from(first: u32) -> SysResult {
    call!(libc::SYS_close_range, first as usize, u32::MAX as usize, 0)
}

pub fn dup(n: i32) -> SysResult {
    call!(libc::SYS_dup, fd(n))
}

pub fn dup2(old: i32, new: i32) -> SysResult {
    legacy!(SYS_dup2, fd(old), fd(new))
}

pub fn dup3(old: i32, new: i32, flags: i32) -> SysResult {
    call!(libc::SYS_dup3, fd(old), fd(new), flags as usize)
}

pub fn fcntl(n: i32, cmd: i32, arg: usize) -> SysResult {
    call!(libc::SYS_fcntl, fd(n), cmd as usize, arg)
}

pub fn pipe() -> Result<[i32; 2], i32> {
    let mut fds = [0i32; 2];
    legacy!(SYS_pipe, fds.as_mut_ptr() as usize)?;
    Ok(fds)
}

pub fn pipe2(flags: i32) -> Result<[i32; 2], i32> {
    let mut fds = [0i32; 2];
    call!(libc::SYS_pipe2, fds.as_mut_ptr() as usize, flags as usize)?;
    Ok(fds)
}

pub fn link(old: &CStr, new: &CStr) -> SysResult {
    legacy!(SYS_link, p(old), p(new))
}

pub fn linkat(olddir: i32, old: &CStr, newdir: i32, new: &CStr, flags: i32) -> SysResult {
    call!(
        libc::SYS_linkat,
        fd(olddir),
        p(old),
        fd(newdir),
        p(new),
        flags as usize
    )
}

pub fn symlink(target: &CStr, linkpath: &CStr) -> SysResult {
    legacy!(SYS_symlink, p(target), p(linkpath))
}

pub fn symlinkat(target: &CStr, dirfd: i32, linkpath: &CStr) -> SysResult {
    call!(libc::SYS_symlinkat, p(target), fd(dirfd), p(linkpath))
}

pub fn rename(old: &CStr, new: &CStr) -> SysResult {
    legacy!(SYS_rename, p(old), p(new))
}

pub fn renameat(olddir: i32, old: &CStr, newdir: i32, new: &CStr) -> SysResult {
    call!(libc::SYS_renameat, fd(olddir), p(old), fd(newdir), p(new))
}

pub fn renameat2(olddir: i32, old: &CStr, newdir: i32, new: &CStr, flags: u32) -> SysResult {
    call!(
        libc::SYS_renameat2,
        fd(olddir),
        p(old),
        fd(newdir),
        p(new),
        flags as usize
    )
}

pub fn unlink(path: &CStr) -> SysResult {
    legacy!(SYS_unlink, p(path))
}

pub fn unlinkat(dirfd: i32, path: &CStr, flags: i32) -> SysResult {
    call!(libc::SYS_unlinkat, fd(dirfd), p(path), flags as usize)
}

pub fn mkdir(path: &CStr, mode: u32) -> SysResult {
    legacy!(SYS_mkdir, p(path), mode as usize)
}

pub fn mkdirat(dirfd: i32, path: &CStr, mode: u32) -> SysResult {
    call!(libc::SYS_mkdirat, fd(dirfd), p(path), mode as usize)
}

pub fn chmod(path: &CStr, mode: u32) -> SysResult {
    legacy!(SYS_chmod, p(path), mode as usize)
}

pub fn fchmod(n: i32, mode: u32) -> SysResult {
    call!(libc::SYS_fchmod, fd(n), mode as usize)
}

pub fn fchmodat(dirfd: i32, path: &CStr, mode: u32) -> SysResult {
    call!(libc::SYS_fchmodat, fd(dirfd), p(path), mode as usize)
}

pub fn setuid(uid: u32) -> SysResult {
    call!(libc::SYS_setuid, uid as usize)
}

pub fn setgid(gid: u32) -> SysResult {
    call!(libc::SYS_setgid, gid as usize)
}

pub fn setresuid(r: u32, e: u32, s: u32) -> SysResult {
    call!(libc::SYS_setresuid, r as usize, e as usize, s as usize)
}

pub fn setresgid(r: u32, e: u32, s: u32) -> SysResult {
    call!(libc::SYS_setresgid, r as usize, e as usize, s as usize)
}

/// Real, effective and saved user ids.
pub fn getresuid() -> Result<[u32; 3], i32> {
    let mut ids = [0u32; 3];
    let [r, e, s] = ids.each_mut().map(|x| x as *mut u32 as usize);
    call!(libc::SYS_getresuid, r, e, s)?;
    Ok(ids)
}

/// Real, effective and saved group ids.
pub fn getresgid() -> Result<[u32; 3], i32> {
    let mut ids = [0u32; 3];
    let [r, e, s] = ids.each_mut().map(|x| x as *mut u32 as usize);
    call!(libc::SYS_getresgid, r, e, s)?;
    Ok(ids)
}

pub fn setns(n: i32, nstype: i32) -> SysResult {
    call!(libc::SYS_setns, fd(n), nstype as usize)
}

pub fn unshare(flags: i32) -> SysResult {
    call!(libc::SYS_unshare, flags as usize)
}

pub fn ptrace_traceme() -> SysResult {
    call!(libc::SYS_ptrace, libc::PTRACE_TRACEME as usize, 0, 0, 0)
}

pub fn memfd_create(name: &CStr, flags: u32) -> SysResult {
    call!(libc::SYS_memfd_create, p(name), flags as usize)
}

pub fn init_module(image: &[u8], params: &CStr) -> SysResult {
    call!(
        libc::SYS_init_module,
        image.as_ptr() as usize,
        image.len(),
        p(params)
    )
}

pub fn finit_module(n: i32, params: &CStr, flags: i32) -> SysResult {
    call!(libc::SYS_finit_module, fd(n), p(params), flags as usize)
}

pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: u64,
    data: Option<&CStr>,
) -> SysResult {
    call!(
        libc::SYS_mount,
        source.map_or(0, p),
        p(target),
        fstype.map_or(0, p),
        flags as usize,
        data.map_or(0, p)
    )
}

pub fn bpf(cmd: i32, attr: &[u8]) -> SysResult {
    call!(
        libc::SYS_bpf,
        cmd as usize,
        attr.as_ptr() as usize,
        attr.len()
    )
}

pub fn kill(pid: i32, sig: i32) -> SysResult {
    call!(libc::SYS_kill, pid as isize as usize, sig as usize)
}

pub fn getpid() -> i32 {
    std::process::id() as i32
}

pub fn socket(domain: i32, ty: i32, proto: i32) -> SysResult {
    call!(
        libc::SYS_socket,
        domain as usize,
        ty as usize,
        proto as usize
    )
}

/// A socket address argument.
#[derive(Clone, Copy, Debug)]
pub enum Addr<'a> {
    Inet(SocketAddr),
    /// A Unix socket path (without the terminating NUL).
    Unix(&'a [u8]),
}

/// `struct sockaddr_in` / `sockaddr_in6` / `sockaddr_un` as bytes.
fn sockaddr_bytes(addr: Addr<'_>) -> Vec<u8> {
    let mut b = Vec::with_capacity(112);
    match addr {
        Addr::Inet(SocketAddr::V4(a)) => {
            b.extend_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
            b.extend_from_slice(&a.port().to_be_bytes());
            b.extend_from_slice(&a.ip().octets());
            b.extend_from_slice(&[0; 8]);
        }
        Addr::Inet(SocketAddr::V6(a)) => {
            b.extend_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
            b.extend_from_slice(&a.port().to_be_bytes());
            b.extend_from_slice(&a.flowinfo().to_be_bytes());
            b.extend_from_slice(&a.ip().octets());
            b.extend_from_slice(&a.scope_id().to_ne_bytes());
        }
        Addr::Unix(path) => {
            b.extend_from_slice(&(libc::AF_UNIX as u16).to_ne_bytes());
            b.extend_from_slice(path);
            b.push(0);
        }
    }
    b
}

pub fn bind(n: i32, addr: Addr<'_>) -> SysResult {
    let sa = sockaddr_bytes(addr);
    call!(libc::SYS_bind, fd(n), sa.as_ptr() as usize, sa.len())
}

pub fn listen(n: i32, backlog: i32) -> SysResult {
    call!(libc::SYS_listen, fd(n), backlog as usize)
}

pub fn connect(n: i32, addr: Addr<'_>) -> SysResult {
    let sa = sockaddr_bytes(addr);
    call!(libc::SYS_connect, fd(n), sa.as_ptr() as usize, sa.len())
}

pub fn accept(n: i32) -> SysResult {
    call!(libc::SYS_accept, fd(n), 0, 0)
}

pub fn accept4(n: i32, flags: i32) -> SysResult {
    call!(libc::SYS_accept4, fd(n), 0, 0, flags as usize)
}

pub fn sendto(n: i32, data: &[u8], to: Addr<'_>) -> SysResult {
    let sa = sockaddr_bytes(to);
    call!(
        libc::SYS_sendto,
        fd(n),
        data.as_ptr() as usize,
        data.len(),
        0,
        sa.as_ptr() as usize,
        sa.len()
    )
}

/// `sendmsg` of one buffer on a connected socket.
pub fn sendmsg(n: i32, data: &[u8]) -> SysResult {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut libc::c_void,
        iov_len: data.len(),
    };
    // SAFETY: `msghdr` is plain data; all-zero is a valid value (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    call!(
        libc::SYS_sendmsg,
        fd(n),
        &msg as *const libc::msghdr as usize,
        0
    )
}

/// Ends the process at once with `code` (`exit_group`), running nothing else.
pub fn exit_group(code: i32) -> ! {
    loop {
        let _ = call!(libc::SYS_exit_group, code as usize);
    }
}

/// In a new child (`ret == Ok(0)`): ends it at once; otherwise passes `ret` on. The child of
/// a raw fork/clone must not run arbitrary code (locks held by other threads stay locked), so
/// the wrappers below never return in the child.
fn child_exits(ret: SysResult) -> SysResult {
    if ret == Ok(0) {
        exit_group(0);
    }
    ret
}

/// Raw `fork(2)`; the child exits 0 at once. Returns the child's pid.
pub fn fork_and_exit() -> SysResult {
    child_exits(legacy!(SYS_fork))
}

/// `clone(2)` without a new stack (fork-like: `flags` must not contain `CLONE_VM`); the
/// child exits 0 at once. Returns the child's pid.
pub fn clone_and_exit(flags: u64) -> SysResult {
    if flags & libc::CLONE_VM as u64 != 0 {
        return Err(libc::EINVAL);
    }
    child_exits(call!(libc::SYS_clone, flags as usize, 0, 0, 0, 0))
}

/// `struct clone_args` (`linux/sched.h`, version 2: 88 bytes).
#[repr(C)]
#[derive(Default)]
struct CloneArgs {
    flags: u64,
    pidfd: u64,
    child_tid: u64,
    parent_tid: u64,
    exit_signal: u64,
    stack: u64,
    stack_size: u64,
    tls: u64,
    set_tid: u64,
    set_tid_size: u64,
    cgroup: u64,
}

/// `clone3(2)` without a new stack (`flags` must not contain `CLONE_VM`); the child exits 0
/// at once. Returns the child's pid.
pub fn clone3_and_exit(flags: u64, exit_signal: u64) -> SysResult {
    if flags & libc::CLONE_VM as u64 != 0 {
        return Err(libc::EINVAL);
    }
    let args = CloneArgs {
        flags,
        exit_signal,
        ..CloneArgs::default()
    };
    child_exits(call!(
        libc::SYS_clone3,
        &args as *const CloneArgs as usize,
        std::mem::size_of::<CloneArgs>()
    ))
}

/// `vfork(2)`; the child immediately ends with `exit_group(0)`. Returns the child's pid.
///
/// The child runs inside the same `asm!` block as the parent's `vfork` (it touches no stack
/// and no variable), so the "returns twice" hazard of calling `vfork` from Rust cannot arise.
#[cfg(target_arch = "x86_64")]
pub fn vfork_and_exit() -> SysResult {
    let ret: i64;
    // SAFETY: syscall 58 (`vfork`) suspends this thread until the child ends; the child
    // (rax = 0) calls `exit_group(0)` (231) before leaving the block, so only the parent
    // continues. `syscall` clobbers rcx and r11, declared below; no memory is accessed.
    unsafe {
        std::arch::asm!(
            "syscall",
            "test rax, rax",
            "jnz 2f",
            "mov eax, 231",
            "xor edi, edi",
            "syscall",
            "2:",
            inout("rax") libc::SYS_vfork => ret,
            out("rdi") _,
            out("rcx") _,
            out("r11") _,
            options(nostack),
        );
    }
    if ret < 0 {
        Err(-ret as i32)
    } else {
        Ok(ret)
    }
}

/// `vfork(2)` is only implemented for x86-64 (the syscall table this suite covers).
#[cfg(not(target_arch = "x86_64"))]
pub fn vfork_and_exit() -> SysResult {
    Err(libc::ENOSYS)
}

/// Waits for child `pid` to end.
pub fn wait(pid: i64) -> SysResult {
    let mut status = 0i32;
    call!(
        libc::SYS_wait4,
        pid as usize,
        &mut status as *mut i32 as usize,
        libc::__WALL as usize,
        0
    )
}

/// A NULL-terminated array of pointers to the given strings (valid while they are).
fn ptr_array(items: &[&CStr]) -> Vec<usize> {
    items.iter().map(|s| p(s)).chain([0]).collect()
}

pub fn execve(path: &CStr, argv: &[&CStr], envp: &[&CStr]) -> SysResult {
    let argv = ptr_array(argv);
    let envp = ptr_array(envp);
    call!(
        libc::SYS_execve,
        p(path),
        argv.as_ptr() as usize,
        envp.as_ptr() as usize
    )
}

pub fn execveat(dirfd: i32, path: &CStr, argv: &[&CStr], envp: &[&CStr], flags: i32) -> SysResult {
    let argv = ptr_array(argv);
    let envp = ptr_array(envp);
    call!(
        libc::SYS_execveat,
        fd(dirfd),
        p(path),
        argv.as_ptr() as usize,
        envp.as_ptr() as usize,
        flags as usize
    )
}

//! Every system interface the tracer needs that `std` does not offer: fork/exec with a seccomp
//! filter, ptrace requests, `waitpid`, `process_vm_readv`, signal dispositions,
//! `no_new_privs` for the workload (the tracer's own privileges: `vigil-privs`). This is the one
//! module of the crate allowed to use `unsafe`; each block says why it is sound.
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::sync::atomic::{AtomicI32, Ordering};

/// A stopped thread's registers as ptrace reads and writes them, seen through the syscall ABI
/// of the architecture (number, arguments, result, program counter, stack pointer). The
/// number it reports is the event numbering (x86-64's, [`vigil_event::arch`]) everywhere; the
/// kernel's own number only crosses [`get_regs`] and [`set_regs`].
#[derive(Clone, Copy)]
pub struct Regs {
    raw: libc::user_regs_struct,
    /// aarch64: the syscall number, which `NT_PRSTATUS` does not hold (`NT_ARM_SYSTEM_CALL`
    /// reads and changes it; -1 is "no syscall").
    #[cfg(target_arch = "aarch64")]
    syscallno: i32,
}

impl Regs {
    /// All registers zero.
    pub fn zero() -> Regs {
        Regs {
            // SAFETY: `user_regs_struct` is plain integers; all-zero is valid.
            raw: unsafe { std::mem::zeroed() },
            #[cfg(target_arch = "aarch64")]
            syscallno: -1,
        }
    }

    /// Registers of a call to syscall `event_nr` (event numbering) with `args`: what the
    /// notify mechanism knows of a call.
    pub fn of_call(event_nr: u16, args: [u64; 6]) -> Regs {
        let mut regs = Regs::zero();
        #[cfg(target_arch = "x86_64")]
        {
            regs.raw.orig_rax = u64::from(event_nr);
        }
        #[cfg(target_arch = "aarch64")]
        {
            regs.syscallno = vigil_event::arch::native_nr(event_nr).map_or(-1, i32::from);
        }
        for (i, a) in args.into_iter().enumerate() {
            regs.set_arg(i, a);
        }
        regs
    }

    /// The syscall number in the event numbering; `u64::MAX` for none (a skipped call) or
    /// one without an x86-64 namesake.
    pub fn nr(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            self.raw.orig_rax
        }
        #[cfg(target_arch = "aarch64")]
        {
            u16::try_from(self.syscallno)
                .ok()
                .and_then(vigil_event::arch::event_nr)
                .map_or(u64::MAX, u64::from)
        }
    }

    /// Argument `i` (0..6) as the syscall received it.
    pub fn arg(&self, i: usize) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            match i {
                0 => self.raw.rdi,
                1 => self.raw.rsi,
                2 => self.raw.rdx,
                3 => self.raw.r10,
                4 => self.raw.r8,
                _ => self.raw.r9,
            }
        }
        // x0 is also the result register: only an entry stop's copy holds the first argument.
        #[cfg(target_arch = "aarch64")]
        {
            self.raw.regs[i.min(5)]
        }
    }

    pub fn set_arg(&mut self, i: usize, value: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            *match i {
                0 => &mut self.raw.rdi,
                1 => &mut self.raw.rsi,
                2 => &mut self.raw.rdx,
                3 => &mut self.raw.r10,
                4 => &mut self.raw.r8,
                _ => &mut self.raw.r9,
            } = value;
        }
        #[cfg(target_arch = "aarch64")]
        {
            self.raw.regs[i.min(5)] = value;
        }
    }

    /// The result register (at a syscall-exit stop: the call's result).
    pub fn ret(&self) -> i64 {
        #[cfg(target_arch = "x86_64")]
        {
            self.raw.rax as i64
        }
        #[cfg(target_arch = "aarch64")]
        {
            self.raw.regs[0] as i64
        }
    }

    /// Skips the call at an entry stop: its result is `ret` (syscall number -1 on both
    /// architectures; arm64's el0_svc_common skips to the exit path for it).
    pub fn skip_call(&mut self, ret: i64) {
        #[cfg(target_arch = "x86_64")]
        {
            self.raw.orig_rax = u64::MAX;
            self.raw.rax = ret as u64;
        }
        #[cfg(target_arch = "aarch64")]
        {
            self.syscallno = -1;
            self.raw.regs[0] = ret as u64;
        }
    }

    /// Sets up syscall `native_nr` (the kernel's number) to run from the syscall instruction
    /// at `pc`, outside any syscall (no restart logic applies on the way back to user mode).
    pub fn set_call_at(&mut self, pc: u64, native_nr: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            self.raw.rip = pc;
            self.raw.rax = native_nr;
            self.raw.orig_rax = u64::MAX;
        }
        #[cfg(target_arch = "aarch64")]
        {
            self.raw.pc = pc;
            self.raw.regs[8] = native_nr;
            self.syscallno = -1;
        }
    }

    pub fn pc(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            self.raw.rip
        }
        #[cfg(target_arch = "aarch64")]
        {
            self.raw.pc
        }
    }

    pub fn sp(&self) -> u64 {
        #[cfg(target_arch = "x86_64")]
        {
            self.raw.rsp
        }
        #[cfg(target_arch = "aarch64")]
        {
            self.raw.sp
        }
    }
}

/// The instruction that enters the kernel: x86-64 `syscall`, aarch64 `svc #0`
/// (little-endian); the pc of a syscall stop is just past it.
#[cfg(target_arch = "x86_64")]
pub const SYSCALL_INSN: &[u8] = &[0x0f, 0x05];
#[cfg(target_arch = "aarch64")]
pub const SYSCALL_INSN: &[u8] = &[0x01, 0x00, 0x00, 0xd4];

/// `PTRACE_EVENT_*` values as they appear in `status >> 16`.
pub const EVENT_FORK: i32 = libc::PTRACE_EVENT_FORK;
pub const EVENT_VFORK: i32 = libc::PTRACE_EVENT_VFORK;
pub const EVENT_CLONE: i32 = libc::PTRACE_EVENT_CLONE;
pub const EVENT_EXEC: i32 = libc::PTRACE_EVENT_EXEC;
pub const EVENT_SECCOMP: i32 = libc::PTRACE_EVENT_SECCOMP;
pub const EVENT_STOP: i32 = 128;

/// The options every tracee gets (auto-attached children inherit them).
pub const TRACE_OPTIONS: i32 = libc::PTRACE_O_TRACESECCOMP
    | libc::PTRACE_O_TRACECLONE
    | libc::PTRACE_O_TRACEFORK
    | libc::PTRACE_O_TRACEVFORK
    | libc::PTRACE_O_TRACEEXEC
    | libc::PTRACE_O_TRACESYSGOOD
    | libc::PTRACE_O_EXITKILL;

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// What the child needs between `fork` and `exec`, prepared before forking so that the child
/// allocates nothing.
pub struct ChildPlan {
    pub program: CString,
    /// `argv` including `argv[0]`.
    pub argv: Vec<CString>,
    /// Seccomp filters, installed in order (each a classic-BPF program).
    pub filters: Vec<Vec<libc::sock_filter>>,
    /// The read end of the pipe the parent closes once it has attached.
    pub gate_read: i32,
    pub gate_write: i32,
    /// Seccomp user-notify mode: this filter is installed with a listener that the child
    /// sends over the Unix socket `report` ([`socketpair`], `SCM_RIGHTS`: no capability
    /// needed, unlike `pidfd_getfd`, which Docker's default seccomp profile allows only with
    /// `CAP_SYS_PTRACE`) before waiting at the gate. The child then runs no ptrace gate first.
    pub notify: Option<(Vec<libc::sock_filter>, i32)>,
    /// Set `PR_SET_NO_NEW_PRIVS` before installing the filters (needed unless the child has
    /// `CAP_SYS_ADMIN`; it stops setuid/setgid bits and file capabilities from working).
    pub no_new_privs: bool,
}

/// Forks a child that waits until the parent closes the gate pipe, then sets
/// `PR_SET_NO_NEW_PRIVS` (when [`ChildPlan::no_new_privs`]), installs the filters and execs
/// the program. Returns the child's pid.
/// A child that cannot exec prints the reason and exits 127 (as shells do for "not found").
pub fn spawn_gated(plan: &ChildPlan) -> io::Result<i32> {
    let mut argv: Vec<*const libc::c_char> = plan.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let progs: Vec<libc::sock_fprog> = plan
        .filters
        .iter()
        .map(|f| libc::sock_fprog {
            len: u16::try_from(f.len()).unwrap_or(u16::MAX),
            filter: f.as_ptr().cast_mut(),
        })
        .collect();
    let notify_prog = plan.notify.as_ref().map(|(f, fd)| {
        (
            libc::sock_fprog {
                len: u16::try_from(f.len()).unwrap_or(u16::MAX),
                filter: f.as_ptr().cast_mut(),
            },
            *fd,
        )
    });
    let msg_exec = b"vigil: cannot execute the workload: ";
    let msg_filter = b"vigil: cannot install the seccomp filter\n";
    // SAFETY: `fork` has no memory-safety preconditions. The child only calls
    // async-signal-safe functions on data prepared above (no allocation) before exec or _exit.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid > 0 {
        return Ok(pid);
    }
    // Child.
    // SAFETY: plain syscalls on valid fds and pointers that live until exec/_exit; the
    // filter programs point into `plan.filters`, alive for the whole call.
    unsafe {
        libc::close(plan.gate_write);
        let wait_gate = || {
            let mut byte = 0u8;
            // Blocks until the parent closes its end (EOF).
            while libc::read(plan.gate_read, std::ptr::addr_of_mut!(byte).cast(), 1) < 0
                && *libc::__errno_location() == libc::EINTR
            {}
            libc::close(plan.gate_read);
        };
        if notify_prog.is_none() {
            // ptrace: the parent attaches before any filter exists.
            wait_gate();
        }
        // Rust ignores SIGPIPE in its own process; the workload gets the default back.
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        if plan.no_new_privs && libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            libc::write(2, msg_filter.as_ptr().cast(), msg_filter.len());
            libc::_exit(126);
        }
        for prog in &progs {
            if libc::prctl(
                libc::PR_SET_SECCOMP,
                libc::SECCOMP_MODE_FILTER,
                std::ptr::from_ref(prog),
                0,
                0,
            ) != 0
            {
                libc::write(2, msg_filter.as_ptr().cast(), msg_filter.len());
                libc::_exit(126);
            }
        }
        if let Some((prog, report)) = &notify_prog {
            let fd = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                std::ptr::from_ref(prog),
            ) as i32;
            if fd < 0 {
                libc::write(2, msg_filter.as_ptr().cast(), msg_filter.len());
                libc::_exit(126);
            }
            send_fd(*report, fd);
            libc::close(*report);
            wait_gate();
            libc::close(fd);
        }
        libc::execvp(plan.program.as_ptr(), argv.as_ptr());
        let err = *libc::__errno_location();
        libc::write(2, msg_exec.as_ptr().cast(), msg_exec.len());
        let text = libc::strerror(err);
        libc::write(2, text.cast(), libc::strlen(text));
        libc::write(2, b"\n".as_ptr().cast(), 1);
        libc::_exit(if err == libc::ENOENT { 127 } else { 126 });
    }
}

/// Sends descriptor `fd` over Unix socket `sock` (`SCM_RIGHTS`, one data byte). Allocates
/// nothing: safe between `fork` and `exec`.
///
/// # Safety
/// Only async-signal-safe calls; `sock` and `fd` are the caller's descriptors.
unsafe fn send_fd(sock: i32, fd: i32) {
    // Room for one cmsghdr (16 bytes) and one int, 8-byte aligned (CMSG_SPACE(4) = 24).
    let mut control = [0u64; 4];
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: std::ptr::addr_of_mut!(byte).cast(),
        iov_len: 1,
    };
    // SAFETY: plain data; all-zero is a valid msghdr, filled below with pointers to locals
    // that outlive the sendmsg call.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = std::ptr::addr_of_mut!(iov);
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
        let cmsg = libc::CMSG_FIRSTHDR(std::ptr::addr_of!(msg));
        if cmsg.is_null() {
            return;
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(4) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), fd);
        libc::sendmsg(sock, std::ptr::addr_of!(msg), 0);
    }
}

/// Receives a descriptor sent with `SCM_RIGHTS` over Unix socket `sock` (close-on-exec).
pub fn recv_fd(sock: i32) -> io::Result<i32> {
    let mut control = [0u64; 4];
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: std::ptr::addr_of_mut!(byte).cast(),
        iov_len: 1,
    };
    // SAFETY: all-zero is a valid msghdr; it points to locals alive during the call, and the
    // control buffer is read only within the length the kernel reports.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = std::ptr::addr_of_mut!(iov);
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as usize;
        loop {
            let n = libc::recvmsg(sock, std::ptr::addr_of_mut!(msg), libc::MSG_CMSG_CLOEXEC);
            if n > 0 {
                break;
            }
            if n == 0 {
                return Err(io::Error::other("the workload closed its socket"));
            }
            let err = io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(err);
            }
        }
        let cmsg = libc::CMSG_FIRSTHDR(std::ptr::addr_of!(msg));
        if cmsg.is_null()
            || (*cmsg).cmsg_level != libc::SOL_SOCKET
            || (*cmsg).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::other("no descriptor in the workload's message"));
        }
        Ok(std::ptr::read_unaligned(
            libc::CMSG_DATA(cmsg).cast::<i32>(),
        ))
    }
}

/// A connected pair of Unix stream sockets, both close-on-exec.
pub fn socketpair() -> io::Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints.
    let ret = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    check(ret.into())?;
    Ok((fds[0], fds[1]))
}

/// A pipe with both ends close-on-exec: `(read, write)`.
pub fn pipe() -> io::Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: `fds` is a valid array of two ints.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }.into())?;
    Ok((fds[0], fds[1]))
}

/// For tests: a close-on-exec copy of `fd` at the lowest free number from `min` up
/// (`fcntl(F_DUPFD_CLOEXEC)`), owned.
#[cfg(test)]
pub fn dup_from(fd: &impl std::os::fd::AsRawFd, min: i32) -> io::Result<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    // SAFETY: `fd` is open (borrowed); the new number is this process's and owned by the result.
    let new = check(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, min) }.into())?;
    // SAFETY: `new` was just created by fcntl and is owned by nobody else.
    Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(new as i32) })
}

/// For tests: `target`, which the caller owns, now refers to `src`'s object (`dup3`, atomic).
#[cfg(test)]
pub fn dup_onto(src: &impl std::os::fd::AsRawFd, target: &std::os::fd::OwnedFd) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: both numbers are open; `target` is owned by the caller, so replacing its object
    // affects no other owner.
    check(unsafe { libc::dup3(src.as_raw_fd(), target.as_raw_fd(), libc::O_CLOEXEC) }.into())?;
    Ok(())
}

pub fn close(fd: i32) {
    // SAFETY: closing an fd this module created; errors are irrelevant.
    unsafe {
        libc::close(fd);
    }
}

/// `PTRACE_SEIZE` with [`TRACE_OPTIONS`].
pub fn seize(pid: i32) -> io::Result<()> {
    // SAFETY: ptrace with integer arguments only.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_SEIZE,
            pid,
            std::ptr::null_mut::<libc::c_void>(),
            TRACE_OPTIONS as libc::c_long as *mut libc::c_void,
        )
    })?;
    Ok(())
}

fn request(req: libc::c_uint, tid: i32, data: libc::c_long) -> io::Result<()> {
    // SAFETY: resume-type ptrace requests take integers only.
    check(unsafe {
        libc::ptrace(
            req,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            data as *mut libc::c_void,
        )
    })?;
    Ok(())
}

/// Resumes a stopped tracee, delivering `sig` (0 for none).
pub fn cont(tid: i32, sig: i32) -> io::Result<()> {
    request(libc::PTRACE_CONT, tid, sig.into())
}

/// Resumes a tracee until the exit of the current syscall.
pub fn resume_to_exit(tid: i32) -> io::Result<()> {
    request(libc::PTRACE_SYSCALL, tid, 0)
}

/// Lets a tracee in group-stop stay stopped while the tracer keeps waiting (`PTRACE_LISTEN`).
pub fn listen(tid: i32) -> io::Result<()> {
    request(libc::PTRACE_LISTEN, tid, 0)
}

#[cfg(target_arch = "x86_64")]
pub fn get_regs(tid: i32) -> io::Result<Regs> {
    let mut regs = Regs::zero();
    // SAFETY: `regs.raw` is a valid, writable `user_regs_struct`.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_GETREGS,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::addr_of_mut!(regs.raw).cast::<libc::c_void>(),
        )
    })?;
    Ok(regs)
}

#[cfg(target_arch = "x86_64")]
pub fn set_regs(tid: i32, regs: &Regs) -> io::Result<()> {
    // SAFETY: `regs.raw` is a valid `user_regs_struct` the kernel only reads.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_SETREGS,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::from_ref(&regs.raw)
                .cast_mut()
                .cast::<libc::c_void>(),
        )
    })?;
    Ok(())
}

/// Register sets of `PTRACE_GETREGSET` (include/uapi/linux/elf.h): the general registers, and
/// arm64's syscall number (arch/arm64/kernel/ptrace.c, `REGSET_SYSCALL`).
#[cfg(target_arch = "aarch64")]
const NT_PRSTATUS: usize = 1;
#[cfg(target_arch = "aarch64")]
const NT_ARM_SYSTEM_CALL: usize = 0x404;

/// `PTRACE_GETREGSET`/`PTRACE_SETREGSET` of register set `set` into/from `len` bytes at `at`.
#[cfg(target_arch = "aarch64")]
fn regset(
    request: libc::c_uint,
    tid: i32,
    set: usize,
    at: *mut libc::c_void,
    len: usize,
) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: at,
        iov_len: len,
    };
    // SAFETY: `iov` describes `len` valid bytes at `at` (the callers pass a field of their
    // own `Regs`); the kernel reads or writes at most that many and updates `iov_len`.
    check(unsafe {
        libc::ptrace(
            request,
            tid,
            set as *mut libc::c_void,
            std::ptr::addr_of_mut!(iov).cast::<libc::c_void>(),
        )
    })?;
    Ok(())
}

#[cfg(target_arch = "aarch64")]
pub fn get_regs(tid: i32) -> io::Result<Regs> {
    let mut regs = Regs::zero();
    regset(
        libc::PTRACE_GETREGSET,
        tid,
        NT_PRSTATUS,
        std::ptr::addr_of_mut!(regs.raw).cast(),
        std::mem::size_of::<libc::user_regs_struct>(),
    )?;
    regset(
        libc::PTRACE_GETREGSET,
        tid,
        NT_ARM_SYSTEM_CALL,
        std::ptr::addr_of_mut!(regs.syscallno).cast(),
        std::mem::size_of::<i32>(),
    )?;
    Ok(regs)
}

#[cfg(target_arch = "aarch64")]
pub fn set_regs(tid: i32, regs: &Regs) -> io::Result<()> {
    let mut regs = *regs;
    regset(
        libc::PTRACE_SETREGSET,
        tid,
        NT_PRSTATUS,
        std::ptr::addr_of_mut!(regs.raw).cast(),
        std::mem::size_of::<libc::user_regs_struct>(),
    )?;
    regset(
        libc::PTRACE_SETREGSET,
        tid,
        NT_ARM_SYSTEM_CALL,
        std::ptr::addr_of_mut!(regs.syscallno).cast(),
        std::mem::size_of::<i32>(),
    )?;
    Ok(())
}

/// The event message of the current ptrace event stop (new tid, former tid …).
pub fn event_msg(tid: i32) -> io::Result<u64> {
    let mut msg: libc::c_ulong = 0;
    // SAFETY: `msg` is a valid, writable unsigned long.
    check(unsafe {
        libc::ptrace(
            libc::PTRACE_GETEVENTMSG,
            tid,
            std::ptr::null_mut::<libc::c_void>(),
            std::ptr::addr_of_mut!(msg).cast::<libc::c_void>(),
        )
    })?;
    Ok(msg)
}

/// One result of [`wait_any`].
pub enum Wait {
    /// `(tid, raw status)`.
    Status(i32, i32),
    /// No children or tracees remain.
    NoChildren,
    /// The wait was interrupted by the idle wake-up signal ([`wait_any_interruptible`]).
    Interrupted,
}

/// `waitpid(-1, __WALL | __WNOTHREAD)`, retried on `EINTR`: the calling thread's children
/// and tracees only. Children other threads start (an output's `program` command, waited
/// for by its own thread) are not reaped from under them (`wait(2)`: `__WNOTHREAD`).
pub fn wait_any() -> io::Result<Wait> {
    const WNOTHREAD: libc::c_int = 0x2000_0000;
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid, writable int.
        let pid =
            unsafe { libc::waitpid(-1, std::ptr::addr_of_mut!(status), libc::__WALL | WNOTHREAD) };
        if pid >= 0 {
            return Ok(Wait::Status(pid, status));
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::ECHILD) => return Ok(Wait::NoChildren),
            _ => return Err(err),
        }
    }
}

/// [`wait_any`], except that an interruption by a signal (only [`wakeup_signal`] interrupts
/// it: the forwarding handlers restart) returns [`Wait::Interrupted`].
pub fn wait_any_interruptible() -> io::Result<Wait> {
    const WNOTHREAD: libc::c_int = 0x2000_0000;
    let mut status = 0;
    // SAFETY: `status` is a valid, writable int.
    let pid =
        unsafe { libc::waitpid(-1, std::ptr::addr_of_mut!(status), libc::__WALL | WNOTHREAD) };
    if pid >= 0 {
        return Ok(Wait::Status(pid, status));
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINTR) => Ok(Wait::Interrupted),
        Some(libc::ECHILD) => Ok(Wait::NoChildren),
        _ => Err(err),
    }
}

/// The signal that wakes the tracer's wait when the workload has been idle: the second
/// real-time signal the C library leaves to applications (the tracer never forwards it).
pub fn wakeup_signal() -> i32 {
    libc::SIGRTMIN() + 1
}

extern "C" fn on_wakeup(_sig: libc::c_int) {}

/// Installs a handler that does nothing for [`wakeup_signal`], *without* `SA_RESTART`, so
/// the signal makes a blocked `waitpid` return `EINTR`. Handlers are reset by `execve`: the
/// workload never inherits it.
pub fn install_wakeup() -> io::Result<()> {
    // SAFETY: a zeroed sigaction is valid; the handler is an `extern "C"` function that does
    // nothing (trivially async-signal-safe).
    unsafe {
        let mut act: libc::sigaction = std::mem::zeroed();
        act.sa_sigaction = on_wakeup as *const () as usize;
        act.sa_flags = 0;
        libc::sigemptyset(std::ptr::addr_of_mut!(act.sa_mask));
        check(
            libc::sigaction(
                wakeup_signal(),
                std::ptr::addr_of!(act),
                std::ptr::null_mut(),
            )
            .into(),
        )
        .map(|_| ())
    }
}

/// The calling thread's id.
pub fn gettid() -> i32 {
    // The raw system call: glibc's `gettid()` wrapper is a null weak symbol in the static
    // build (`make static`), where calling it crashed `vigil run`.
    // SAFETY: `gettid` has no arguments and cannot fail.
    let tid = unsafe { libc::syscall(libc::SYS_gettid) };
    tid as i32
}

/// Sends [`wakeup_signal`] to thread `tid` of this process.
pub fn wake(tid: i32) -> io::Result<()> {
    // SAFETY: `tgkill` on this process's own thread id with a valid signal number.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            libc::getpid(),
            libc::c_long::from(tid),
            libc::c_long::from(wakeup_signal()),
        )
    };
    check(rc).map(|_| ())
}

/// How the tracer reads (and writes) the workload's memory. The ones that work are found
/// once per run by a probe ([`set_memory_access`]); `process_vm_readv` is the default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemoryAccess {
    /// `process_vm_readv`/`process_vm_writev`: one syscall per contiguous range.
    VmReadv,
    /// `preadv`/`pwritev` of `/proc/TID/mem`: one syscall per range once the file is open
    /// (kept open per thread, reopened when a read fails: after an exec or a pid reuse).
    ProcMem,
    /// `PTRACE_PEEKDATA`/`PTRACE_POKEDATA` through the tracer's own attachment: one syscall
    /// per 8-byte word, only for a tracee in a ptrace-stop, only from the tracer's thread.
    Ptrace,
}

/// The methods that work, one bit per index in [`MEMORY_ACCESS`] (bit 0 by default).
static MEMORY: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(1);
/// Failed reads of tracee memory since the process started (every method).
static READ_FAULTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Every method, cheapest first (measured: `BENCHMARKS.md`, "vigil run: memory reads").
pub const MEMORY_ACCESS: [MemoryAccess; 3] = [
    MemoryAccess::VmReadv,
    MemoryAccess::ProcMem,
    MemoryAccess::Ptrace,
];

/// Makes [`read_mem`] and [`write_mem`] use `methods` from now on: the cheapest first, the
/// others when it fails (a workload that changed its identity may refuse one and not
/// another). Empty: the default.
pub fn set_memory_access(methods: &[MemoryAccess]) {
    let mut mask = 0u8;
    for (i, m) in MEMORY_ACCESS.iter().enumerate() {
        if methods.contains(m) {
            mask |= 1 << i;
        }
    }
    MEMORY.store(if mask == 0 { 1 } else { mask }, Ordering::Relaxed);
}

/// The methods [`read_mem`] tries, in order.
fn memory_methods() -> impl Iterator<Item = MemoryAccess> {
    let mask = MEMORY.load(Ordering::Relaxed);
    MEMORY_ACCESS
        .into_iter()
        .enumerate()
        .filter(move |(i, _)| mask & (1 << i) != 0)
        .map(|(_, m)| m)
}

/// Failed reads of tracee memory so far (see [`read_mem`]).
pub fn read_faults() -> u64 {
    READ_FAULTS.load(Ordering::Relaxed)
}

/// Reads tracee memory at `addr` into `buf` with the first [`MemoryAccess`] that works,
/// of those [`set_memory_access`] allowed; returns how many bytes were read (short at an
/// unmapped page). A failure of every one is counted in [`read_faults`].
pub fn read_mem(pid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut last = None;
    for method in memory_methods() {
        match read_mem_with(method, pid, addr, buf) {
            Ok(n) => return Ok(n),
            Err(e) => last = Some(e),
        }
    }
    READ_FAULTS.fetch_add(1, Ordering::Relaxed);
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EFAULT)))
}

/// [`read_mem`] with a given method, uncounted (the start-up probe).
pub fn read_mem_with(
    method: MemoryAccess,
    pid: i32,
    addr: u64,
    buf: &mut [u8],
) -> io::Result<usize> {
    match method {
        // SAFETY: `buf` is valid and writable for its length.
        MemoryAccess::VmReadv => unsafe {
            vm_transfer(pid, addr, buf.as_mut_ptr(), buf.len(), false)
        },
        MemoryAccess::Ptrace => peek(pid, addr, buf),
        MemoryAccess::ProcMem => proc_mem(pid, addr, Transfer::Read(buf)),
    }
}

/// `PTRACE_PEEKDATA` of one aligned word.
fn peek_word(tid: i32, addr: u64) -> io::Result<[u8; 8]> {
    // SAFETY: PEEKDATA returns the word (or -1 with errno set); errno is cleared first so a
    // word that is -1 is told apart from an error. No pointer is passed.
    unsafe {
        *libc::__errno_location() = 0;
        let word = libc::ptrace(
            libc::PTRACE_PEEKDATA,
            tid,
            addr as usize as *mut libc::c_void,
            std::ptr::null_mut::<libc::c_void>(),
        );
        if word == -1 && *libc::__errno_location() != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(word.to_ne_bytes())
    }
}

/// Reads through the tracer's attachment, word by word; short at the first unreadable word
/// (an error only when nothing was read).
fn peek(tid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0usize;
    while done < buf.len() {
        let at = addr.wrapping_add(done as u64);
        let aligned = at & !7;
        let skip = (at - aligned) as usize;
        let word = match peek_word(tid, aligned) {
            Ok(w) => w,
            Err(e) if done == 0 => return Err(e),
            Err(_) => break,
        };
        let n = (8 - skip).min(buf.len() - done);
        buf[done..done + n].copy_from_slice(&word[skip..skip + n]);
        done += n;
    }
    Ok(done)
}

/// Writes through the tracer's attachment, word by word (a partial first or last word is
/// read first and merged).
fn poke(tid: i32, addr: u64, data: &[u8]) -> io::Result<usize> {
    let mut done = 0usize;
    while done < data.len() {
        let at = addr.wrapping_add(done as u64);
        let aligned = at & !7;
        let skip = (at - aligned) as usize;
        let n = (8 - skip).min(data.len() - done);
        let mut word = if n == 8 {
            [0u8; 8]
        } else {
            match peek_word(tid, aligned) {
                Ok(w) => w,
                Err(e) if done == 0 => return Err(e),
                Err(_) => break,
            }
        };
        word[skip..skip + n].copy_from_slice(&data[done..done + n]);
        let value = i64::from_ne_bytes(word);
        // SAFETY: POKEDATA takes the word by value; no pointer of this process is passed.
        let ret = unsafe {
            libc::ptrace(
                libc::PTRACE_POKEDATA,
                tid,
                aligned as usize as *mut libc::c_void,
                value as usize as *mut libc::c_void,
            )
        };
        if let Err(e) = check(ret) {
            if done == 0 {
                return Err(e);
            }
            break;
        }
        done += n;
    }
    Ok(done)
}

enum Transfer<'a> {
    Read(&'a mut [u8]),
    Write(&'a [u8]),
}

thread_local! {
    /// `/proc/TID/mem` of the threads read so far, opened for reading (on the tracer's
    /// thread). A file stays bound to the address space it was opened on: after that
    /// thread's exec or exit, reads fail, and the file is opened again.
    static MEM_FILES: std::cell::RefCell<std::collections::HashMap<i32, std::fs::File>> =
        std::cell::RefCell::new(std::collections::HashMap::new());
    /// Threads whose `/proc/TID/mem` could not be opened (another user's, say): not tried
    /// again until they exec or end ([`forget_memory`]), the next method is used at once.
    static MEM_REFUSED: std::cell::RefCell<std::collections::HashSet<i32>> =
        std::cell::RefCell::new(std::collections::HashSet::new());
}

/// Whether reads of thread `tid` go through ptrace first (one syscall per 8-byte word, so
/// a caller reading a string reads it a word at a time).
pub fn reads_by_word(tid: i32) -> bool {
    let refused = MEM_REFUSED.with(|r| r.borrow().contains(&tid));
    memory_methods()
        .find(|m| !(refused && *m == MemoryAccess::ProcMem))
        .is_some_and(|m| m == MemoryAccess::Ptrace)
}

/// Closes the kept `/proc/TID/mem` of thread `tid`, which has ended: the file stays bound to
/// its process's memory, which another thread of that process keeps alive, so a new thread
/// reusing the number must not read through it.
pub fn forget_memory(tid: i32) {
    MEM_FILES.with(|files| {
        files.borrow_mut().remove(&tid);
    });
    MEM_REFUSED.with(|refused| {
        refused.borrow_mut().remove(&tid);
    });
}

/// At most this many `/proc/TID/mem` files stay open; beyond, all are closed.
const MEM_FILES_MAX: usize = 256;

/// Reads `/proc/TID/mem` at `addr`, through the kept file when there is one (opened again
/// once if the read through it fails or finds nothing).
fn proc_mem_read(tid: i32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    if buf.is_empty() {
        return Ok(0);
    }
    MEM_FILES.with(|files| {
        let mut files = files.borrow_mut();
        if let Some(file) = files.get(&tid) {
            if let Ok(n @ 1..) = mem_transfer(file, addr, Transfer::Read(&mut *buf)) {
                return Ok(n);
            }
            files.remove(&tid);
        }
        if MEM_REFUSED.with(|r| r.borrow().contains(&tid)) {
            return Err(io::Error::from_raw_os_error(libc::EACCES));
        }
        let file = match std::fs::File::open(format!("/proc/{tid}/mem")) {
            Ok(file) => file,
            Err(e) => {
                if matches!(e.raw_os_error(), Some(libc::EACCES | libc::EPERM)) {
                    MEM_REFUSED.with(|r| {
                        let mut r = r.borrow_mut();
                        if r.len() >= MEM_FILES_MAX {
                            r.clear();
                        }
                        r.insert(tid);
                    });
                }
                return Err(e);
            }
        };
        let got = mem_transfer(&file, addr, Transfer::Read(buf));
        if got.is_ok() {
            if files.len() >= MEM_FILES_MAX {
                files.clear();
            }
            files.insert(tid, file);
        }
        got
    })
}

/// `preadv`/`pwritev` of `/proc/TID/mem` at `addr` (one iovec; the vectored calls rather
/// than `pread64`, which the dynamic loader also uses, so a test's seccomp profile can refuse
/// this path alone). Writes (rare: the filter injection) open the file each time.
fn proc_mem(tid: i32, addr: u64, transfer: Transfer<'_>) -> io::Result<usize> {
    match transfer {
        Transfer::Read(buf) => proc_mem_read(tid, addr, buf),
        Transfer::Write(data) => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(format!("/proc/{tid}/mem"))?;
            mem_transfer(&file, addr, Transfer::Write(data))
        }
    }
}

fn mem_transfer(file: &std::fs::File, addr: u64, transfer: Transfer<'_>) -> io::Result<usize> {
    use std::os::fd::AsRawFd;
    let (base, len, write) = match transfer {
        Transfer::Read(buf) => (buf.as_mut_ptr(), buf.len(), false),
        Transfer::Write(data) => (data.as_ptr().cast_mut(), data.len(), true),
    };
    if len == 0 {
        return Ok(0);
    }
    let iov = libc::iovec {
        iov_base: base.cast(),
        iov_len: len,
    };
    let offset = addr as libc::off_t;
    // SAFETY: `iov` describes `len` bytes of a buffer borrowed for this call: writable for a
    // read (`Transfer::Read` holds it mutably), readable for a write.
    let n = unsafe {
        if write {
            libc::pwritev(file.as_raw_fd(), std::ptr::addr_of!(iov), 1, offset)
        } else {
            libc::preadv(file.as_raw_fd(), std::ptr::addr_of!(iov), 1, offset)
        }
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(usize::try_from(n).unwrap_or(0))
    }
}

/// Stops a running tracee (`PTRACE_INTERRUPT`); the stop is a `PTRACE_EVENT_STOP` to wait
/// for.
pub fn interrupt(tid: i32) -> io::Result<()> {
    request(libc::PTRACE_INTERRUPT, tid, 0)
}

/// `process_vm_readv` (into) or `process_vm_writev` (from) the `len` bytes at `local`, one
/// iovec on each side; returns how many bytes moved.
///
/// # Safety
/// `local` must be valid for `len` bytes: writable when reading, readable when writing.
unsafe fn vm_transfer(
    pid: i32,
    addr: u64,
    local: *mut u8,
    len: usize,
    write: bool,
) -> io::Result<usize> {
    if len == 0 {
        return Ok(0);
    }
    let local = libc::iovec {
        iov_base: local.cast(),
        iov_len: len,
    };
    let remote = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: len,
    };
    // SAFETY: `local` is valid for `len` bytes as the caller promises; the remote iovec is
    // only interpreted by the kernel in the other process's address space.
    let n = unsafe {
        if write {
            libc::process_vm_writev(
                pid,
                std::ptr::addr_of!(local),
                1,
                std::ptr::addr_of!(remote),
                1,
                0,
            )
        } else {
            libc::process_vm_readv(
                pid,
                std::ptr::addr_of!(local),
                1,
                std::ptr::addr_of!(remote),
                1,
                0,
            )
        }
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(usize::try_from(n).unwrap_or(0))
    }
}

/// Writes `data` into process `pid`'s memory at `addr` with the first [`MemoryAccess`]
/// that works (as [`read_mem`]); returns how many bytes were written.
pub fn write_mem(pid: i32, addr: u64, data: &[u8]) -> io::Result<usize> {
    let mut last = None;
    for method in memory_methods() {
        let got = match method {
            // SAFETY: `data` is valid for reads for its length, and a write only reads it.
            MemoryAccess::VmReadv => unsafe {
                vm_transfer(pid, addr, data.as_ptr().cast_mut(), data.len(), true)
            },
            MemoryAccess::Ptrace => poke(pid, addr, data),
            MemoryAccess::ProcMem => proc_mem(pid, addr, Transfer::Write(data)),
        };
        match got {
            Ok(n) => return Ok(n),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::from_raw_os_error(libc::EFAULT)))
}

/// `waitpid(tid, __WALL)`, retried on `EINTR`: the next status change of that one tracee.
pub fn wait_tid(tid: i32) -> io::Result<i32> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid, writable int.
        let pid = unsafe { libc::waitpid(tid, std::ptr::addr_of_mut!(status), libc::__WALL) };
        if pid >= 0 {
            return Ok(status);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Sends `sig` to thread `tid` of process `tgid` (`tgkill`).
pub fn tgkill(tgid: i32, tid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: plain syscall with integer arguments.
    check(unsafe { libc::syscall(libc::SYS_tgkill, tgid, tid, sig) })?;
    Ok(())
}

/// Sends `sig` to process `pid`.
pub fn kill(pid: i32, sig: i32) -> io::Result<()> {
    // SAFETY: plain syscall.
    check(unsafe { libc::kill(pid, sig) }.into())?;
    Ok(())
}

/// The workload's pid, for the signal forwarder (0 = none yet).
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);

/// The signals Vigil forwards to the workload. Job-control signals (`SIGTSTP`, `SIGCONT` …)
/// are left alone: Vigil and the workload share the terminal's process group.
pub const FORWARDED: [i32; 8] = [
    libc::SIGHUP,
    libc::SIGINT,
    libc::SIGQUIT,
    libc::SIGTERM,
    libc::SIGUSR1,
    libc::SIGUSR2,
    libc::SIGALRM,
    libc::SIGWINCH,
];

extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _ctx: *mut libc::c_void) {
    let code = if info.is_null() {
        0
    } else {
        // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler.
        unsafe { (*info).si_code }
    };
    // A signal the terminal sent (to the whole foreground process group, so the workload has
    // it already) is not sent twice.
    if code == libc::SI_KERNEL {
        return;
    }
    let pid = FORWARD_TO.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// Installs the forwarding handler for [`FORWARDED`] (with `SA_RESTART`, so the wait loop is
/// not disturbed) and sets the target.
pub fn forward_signals_to(pid: i32) -> io::Result<()> {
    FORWARD_TO.store(pid, Ordering::Relaxed);
    for sig in FORWARDED {
        // SAFETY: a zeroed sigaction is valid; the handler is an `extern "C"` function with
        // the SA_SIGINFO signature that only calls async-signal-safe functions.
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = forward as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(std::ptr::addr_of_mut!(act.sa_mask));
            check(libc::sigaction(sig, std::ptr::addr_of!(act), std::ptr::null_mut()).into())?;
        }
    }
    Ok(())
}

/// Stops forwarding once the workload's main process is gone (its pid may be reused): the
/// forwarded signals get their default disposition back, so they act on Vigil itself (and
/// ending Vigil ends the traced descendants still running, through `PTRACE_O_EXITKILL`).
pub fn stop_forwarding() {
    FORWARD_TO.store(0, Ordering::Relaxed);
    for sig in FORWARDED {
        // SAFETY: restoring a default disposition has no preconditions.
        unsafe {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
}

/// Ends this process the way the workload ended: the default disposition of `sig` restored,
/// core dumps off (the workload dumped its own), the signal unblocked and raised. Returns only
/// if the signal did not kill (it never should).
pub fn die_by_signal(sig: i32) {
    // SAFETY: plain syscalls on valid, zero-initialised structures.
    unsafe {
        let limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, std::ptr::addr_of!(limit));
        libc::signal(sig, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(std::ptr::addr_of_mut!(set));
        libc::sigaddset(std::ptr::addr_of_mut!(set), sig);
        libc::sigprocmask(
            libc::SIG_UNBLOCK,
            std::ptr::addr_of!(set),
            std::ptr::null_mut(),
        );
        libc::kill(libc::getpid(), sig);
    }
}

/// One seccomp user notification.
pub struct Notif {
    pub id: u64,
    pub tid: i32,
    pub nr: i32,
    pub args: [u64; 6],
}

/// `pidfd_open(pid)`.
pub fn pidfd_open(pid: i32) -> io::Result<i32> {
    // SAFETY: plain syscall with integer arguments.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
    Ok(i32::try_from(fd).unwrap_or(-1))
}

/// `pidfd_getfd(pidfd, fd)`: a copy of another process's descriptor.
pub fn pidfd_getfd(pidfd: i32, fd: i32) -> io::Result<i32> {
    // SAFETY: plain syscall with integer arguments.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, fd, 0) })?;
    Ok(i32::try_from(fd).unwrap_or(-1))
}

/// What a socket's descriptor tells about its ends (each `None` when unknown: an unconnected
/// socket has no peer).
pub struct SocketEnds {
    /// `getsockname`, as raw `struct sockaddr` bytes.
    pub local: Option<Vec<u8>>,
    /// `getpeername`, as raw `struct sockaddr` bytes.
    pub peer: Option<Vec<u8>>,
    /// `SO_PROTOCOL` (`IPPROTO_TCP`, `IPPROTO_UDP`, 0 for Unix sockets).
    pub proto: Option<i32>,
}

/// The ends of socket `fd` of process `pid` (a thread-group leader), read through a copy of
/// the descriptor (`pidfd_getfd`, allowed to the process's tracer).
pub fn socket_ends(pid: i32, fd: i32) -> io::Result<SocketEnds> {
    let pidfd = pidfd_open(pid)?;
    let copy = pidfd_getfd(pidfd, fd);
    close(pidfd);
    let copy = copy?;
    let name = |peer: bool| -> Option<Vec<u8>> {
        // SAFETY: sockaddr_storage is plain data; all-zero is a valid value.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::sockaddr_storage>();
        let mut len = libc::socklen_t::try_from(size).unwrap_or(128);
        let ptr = std::ptr::addr_of_mut!(storage).cast::<libc::sockaddr>();
        // SAFETY: `ptr` points to a writable sockaddr_storage of `len` bytes; `len` is a
        // valid, writable socklen_t.
        let ret = unsafe {
            if peer {
                libc::getpeername(copy, ptr, std::ptr::addr_of_mut!(len))
            } else {
                libc::getsockname(copy, ptr, std::ptr::addr_of_mut!(len))
            }
        };
        if ret != 0 {
            return None;
        }
        let n = usize::try_from(len).unwrap_or(0).min(size);
        // SAFETY: `storage` is `size` initialised bytes and `n <= size`.
        let bytes =
            unsafe { std::slice::from_raw_parts(std::ptr::addr_of!(storage).cast::<u8>(), n) };
        Some(bytes.to_vec())
    };
    let local = name(false);
    let peer = name(true);
    let mut proto: libc::c_int = 0;
    let mut len = libc::socklen_t::try_from(std::mem::size_of::<libc::c_int>()).unwrap_or(4);
    // SAFETY: `proto` and `len` are valid, writable and of the sizes given.
    let ret = unsafe {
        libc::getsockopt(
            copy,
            libc::SOL_SOCKET,
            libc::SO_PROTOCOL,
            std::ptr::addr_of_mut!(proto).cast(),
            std::ptr::addr_of_mut!(len),
        )
    };
    close(copy);
    Ok(SocketEnds {
        local,
        peer,
        proto: (ret == 0).then_some(proto),
    })
}

/// The accept queue of listening TCP socket `fd` of process `pid` (a thread-group leader):
/// `(connections waiting, backlog)`, from `TCP_INFO` on a copy of the descriptor (for a
/// listener the kernel puts them in `tcpi_unacked` and `tcpi_sacked`). `None` for other
/// sockets.
pub fn listen_queue(pid: i32, fd: i32) -> io::Result<Option<(u32, u32)>> {
    let pidfd = pidfd_open(pid)?;
    let copy = pidfd_getfd(pidfd, fd);
    close(pidfd);
    let copy = copy?;
    // struct tcp_info: 8 one-byte fields, then u32 rto, ato, snd_mss, rcv_mss, unacked, sacked.
    let mut info = [0u8; 104];
    let mut len = libc::socklen_t::try_from(info.len()).unwrap_or(0);
    // SAFETY: `info` is writable for `len` bytes; `len` is a valid, writable socklen_t.
    let ret = unsafe {
        libc::getsockopt(
            copy,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            info.as_mut_ptr().cast(),
            std::ptr::addr_of_mut!(len),
        )
    };
    close(copy);
    const TCP_LISTEN: u8 = 10;
    if ret != 0 || len < 32 || info[0] != TCP_LISTEN {
        return Ok(None);
    }
    let word = |i: usize| u32::from_ne_bytes([info[i], info[i + 1], info[i + 2], info[i + 3]]);
    Ok(Some((word(24), word(28))))
}

/// Polls `fds` for input; returns each one's `revents`.
pub fn poll_in(fds: &[i32]) -> io::Result<Vec<i16>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    loop {
        // SAFETY: `p` is a valid array of `p.len()` pollfd structures.
        let n = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, -1) };
        if n >= 0 {
            return Ok(p.iter().map(|x| x.revents).collect());
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Receives one notification; `Ok(None)` when it vanished (the task was interrupted or died).
pub fn notif_recv(listener: i32) -> io::Result<Option<Notif>> {
    // SAFETY: an all-zero seccomp_notif (plain integers) is valid and required by the ioctl.
    let mut n: libc::seccomp_notif = unsafe { std::mem::zeroed() };
    // SAFETY: `n` is a valid, writable seccomp_notif.
    let r = unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_RECV,
            std::ptr::addr_of_mut!(n),
        )
    };
    if r < 0 {
        let err = io::Error::last_os_error();
        return match err.raw_os_error() {
            Some(libc::EINTR | libc::ENOENT) => Ok(None),
            _ => Err(err),
        };
    }
    Ok(Some(Notif {
        id: n.id,
        tid: i32::try_from(n.pid).unwrap_or(0),
        // The event numbering (x86-64's), like `Regs::nr`; -1 for a call without one.
        nr: u16::try_from(n.data.nr)
            .ok()
            .and_then(vigil_event::arch::event_nr)
            .map_or(-1, i32::from),
        args: n.data.args,
    }))
}

/// Answers a notification: run the syscall (`errno` 0) or fail it with `-errno`.
pub fn notif_send(listener: i32, id: u64, errno: i32) {
    let resp = libc::seccomp_notif_resp {
        id,
        val: 0,
        error: -errno,
        flags: if errno == 0 {
            libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32
        } else {
            0
        },
    };
    // SAFETY: `resp` is a valid seccomp_notif_resp the kernel only reads. A failure means the
    // task is gone (ENOENT): nothing to answer.
    unsafe {
        libc::ioctl(
            listener,
            libc::SECCOMP_IOCTL_NOTIF_SEND,
            std::ptr::addr_of!(resp),
        );
    }
}

/// `waitpid(pid, 0)` for one child, retried on `EINTR`.
pub fn wait_child(pid: i32) -> io::Result<i32> {
    loop {
        let mut status = 0;
        // SAFETY: `status` is a valid, writable int.
        let r = unsafe { libc::waitpid(pid, std::ptr::addr_of_mut!(status), 0) };
        if r >= 0 {
            return Ok(status);
        }
        let err = io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(err);
        }
    }
}

/// Helpers for the raw wait status.
pub mod status {
    pub fn exited(s: i32) -> bool {
        libc::WIFEXITED(s)
    }
    pub fn exit_code(s: i32) -> i32 {
        libc::WEXITSTATUS(s)
    }
    pub fn signaled(s: i32) -> bool {
        libc::WIFSIGNALED(s)
    }
    pub fn term_sig(s: i32) -> i32 {
        libc::WTERMSIG(s)
    }
    pub fn core_dumped(s: i32) -> bool {
        libc::WCOREDUMP(s)
    }
    pub fn stopped(s: i32) -> bool {
        libc::WIFSTOPPED(s)
    }
    pub fn stop_sig(s: i32) -> i32 {
        libc::WSTOPSIG(s)
    }
}

/// `sock_filter` constructor for the filter builder.
pub fn bpf_stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

pub fn bpf_jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

pub use libc::sock_filter as SockFilter;

#[cfg(test)]
mod tests {
    use super::*;

    static BYTES: [u8; 40] = *b"0123456789abcdefghijklmnopqrstuvwxyzABCD";

    /// `process_vm_readv` and `/proc/PID/mem` of this very process (ptrace needs a tracee:
    /// `crates/cli/tests/e2e/run.rs` covers it), at unaligned offsets and lengths, and a read
    /// that runs into an unmapped page comes back short.
    #[test]
    fn reads_without_ptrace_at_any_offset() {
        let me = i32::try_from(std::process::id()).expect("pid fits");
        for method in [MemoryAccess::VmReadv, MemoryAccess::ProcMem] {
            for (start, len) in [(0, 40), (3, 11), (7, 1), (9, 30)] {
                let mut buf = vec![0u8; len];
                let addr = BYTES.as_ptr() as u64 + start as u64;
                let n = read_mem_with(method, me, addr, &mut buf).expect("own memory");
                assert_eq!(n, len, "{method:?} {start}+{len}");
                assert_eq!(buf, BYTES[start..start + len], "{method:?} {start}+{len}");
            }
            assert!(
                read_mem_with(method, me, 8, &mut [0u8; 8]).is_err(),
                "{method:?}: nothing is mapped at address 8"
            );
        }
    }
}

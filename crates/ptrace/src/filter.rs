//! Classic-BPF seccomp programs: "return action A for these syscall numbers, D otherwise",
//! behind an architecture check. Callers number syscalls as events do (x86-64's); a program
//! is built for one architecture ([`Arch`]) and holds that kernel's numbers (a call the
//! architecture lacks, like `open` on aarch64, cannot be made there and is left out).
//!
//! Layout (every jump is short, so the program has no offset limits):
//!
//! ```text
//! ld  [arch]          ; jeq AUDIT_ARCH_X86_64 ? skip : ret ERRNO(ENOSYS)
//! ld  [nr]            ; jge 0x40000000 (x32 ABI) ? ret ERRNO(ENOSYS) : skip
//! jeq nr_1 ? next : skip 1 ; ret action_1
//! …
//! ret default
//! ```
//!
//! 32-bit (`int 0x80`) and x32 syscalls are refused with `ENOSYS`: their numbers mean other
//! calls, so they would slip past a filter written for x86-64 numbers. On aarch64 the check is
//! `AUDIT_ARCH_AARCH64` (32-bit tasks have `AUDIT_ARCH_ARM` and are refused) and there is no
//! x32 line.

use vigil_event::arch::Arch;

use crate::sys::{bpf_jump, bpf_stmt, SockFilter};

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x15;
const BPF_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;
const BPF_ALU_AND_K: u16 = 0x54;

/// `AUDIT_ARCH_X86_64`.
pub const AUDIT_ARCH_X86_64: u32 = 0xC000_003E;
/// `AUDIT_ARCH_AARCH64` (EM_AARCH64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE).
pub const AUDIT_ARCH_AARCH64: u32 = 0xC000_00B7;
/// The bit x32-ABI syscall numbers carry.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// `struct seccomp_data` offsets.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;

/// Seccomp filter return values.
pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const RET_KILL_THREAD: u32 = 0;
pub const RET_ERRNO: u32 = 0x0005_0000;
pub const RET_TRACE: u32 = 0x7ff0_0000;
pub const RET_USER_NOTIF: u32 = 0x7fc0_0000;
pub const RET_LOG: u32 = 0x7ffc_0000;
pub const RET_ALLOW: u32 = 0x7fff_0000;

const ENOSYS: u32 = 38;

/// `SECCOMP_RET_ERRNO` with `errno`.
pub const fn ret_errno(errno: u16) -> u32 {
    RET_ERRNO | errno as u32
}

pub use vigil_capture::ArgIn;

/// At most this many values per [`ArgIn`] (keeps every jump short).
pub const MAX_ARG_VALUES: usize = 64;

/// `struct seccomp_data.args[i]`, low 32 bits (x86-64 is little-endian).
const fn off_arg_low(i: u8) -> u32 {
    16 + 8 * i as u32
}

/// A program returning `action` for each listed syscall (the first entry for a number wins)
/// and `default` for every other x86-64 syscall.
pub fn build(entries: &[(u16, u32)], default: u32) -> Vec<SockFilter> {
    let conditional: Vec<(u16, u32, Option<ArgIn>)> =
        entries.iter().map(|&(nr, a)| (nr, a, None)).collect();
    build_conditional(&conditional, default)
}

/// [`build`] where an entry may carry a condition: that syscall gets `action` only when the
/// condition holds, `default` otherwise (no later entry is consulted for its number).
/// A condition with no values, or more than [`MAX_ARG_VALUES`], or on an argument beyond the
/// sixth, is ignored (the action applies unconditionally).
pub fn build_conditional(entries: &[(u16, u32, Option<ArgIn>)], default: u32) -> Vec<SockFilter> {
    build_for(Arch::host(), entries, default)
}

/// [`build_conditional`] for architecture `arch`.
pub fn build_for(
    arch: Arch,
    entries: &[(u16, u32, Option<ArgIn>)],
    default: u32,
) -> Vec<SockFilter> {
    let mut prog = Vec::with_capacity(6 + 2 * entries.len());
    prog.push(bpf_stmt(BPF_LD_W_ABS, OFF_ARCH));
    let audit_arch = match arch {
        Arch::X86_64 => AUDIT_ARCH_X86_64,
        Arch::Aarch64 => AUDIT_ARCH_AARCH64,
    };
    prog.push(bpf_jump(BPF_JEQ_K, audit_arch, 1, 0));
    prog.push(bpf_stmt(BPF_RET_K, RET_ERRNO | ENOSYS));
    prog.push(bpf_stmt(BPF_LD_W_ABS, OFF_NR));
    if arch == Arch::X86_64 {
        prog.push(bpf_jump(BPF_JGE_K, X32_SYSCALL_BIT, 0, 1));
        prog.push(bpf_stmt(BPF_RET_K, RET_ERRNO | ENOSYS));
    }
    let mut seen = Vec::new();
    for (nr, action, when) in entries {
        let Some(nr) = arch.native_nr(*nr) else {
            continue;
        };
        let action = *action;
        if action == default || seen.contains(&nr) {
            continue;
        }
        seen.push(nr);
        match when
            .as_ref()
            .filter(|w| !w.values.is_empty() && w.values.len() <= MAX_ARG_VALUES && w.arg < 6)
        {
            None => {
                prog.push(bpf_jump(BPF_JEQ_K, u32::from(nr), 0, 1));
                prog.push(bpf_stmt(BPF_RET_K, action));
            }
            Some(w) => {
                // jeq nr ? next : past the block
                // ld args[arg].low; [and mask;] jeq v_i ? ret action : next …; ret default;
                // ret action
                let n = w.values.len();
                let masked = w.mask != u32::MAX;
                let block = u8::try_from(n + 3 + usize::from(masked))
                    .expect("at most MAX_ARG_VALUES values");
                prog.push(bpf_jump(BPF_JEQ_K, u32::from(nr), 0, block));
                prog.push(bpf_stmt(BPF_LD_W_ABS, off_arg_low(w.arg)));
                if masked {
                    prog.push(bpf_stmt(BPF_ALU_AND_K, w.mask));
                }
                for (i, &v) in w.values.iter().enumerate() {
                    let to_action = u8::try_from(n - i).expect("at most MAX_ARG_VALUES values");
                    prog.push(bpf_jump(BPF_JEQ_K, v, to_action, 0));
                }
                prog.push(bpf_stmt(BPF_RET_K, default));
                prog.push(bpf_stmt(BPF_RET_K, action));
            }
        }
    }
    prog.push(bpf_stmt(BPF_RET_K, default));
    prog
}

/// The tracing filter with conditions: `SECCOMP_RET_TRACE` for `traced` (only where the
/// syscall's [`ArgIn`] in `when` holds, for those listed there), `ALLOW` for the rest.
pub fn trace_where(traced: &[u16], when: &[(u16, ArgIn)]) -> Vec<SockFilter> {
    let entries: Vec<(u16, u32, Option<ArgIn>)> = traced
        .iter()
        .map(|&nr| {
            let cond = when.iter().find(|(n, _)| *n == nr).map(|(_, c)| c.clone());
            (nr, RET_TRACE, cond)
        })
        .collect();
    build_conditional(&entries, RET_ALLOW)
}

/// The user-notify filter: `SECCOMP_RET_USER_NOTIF` for `notified`, `ALLOW` for the rest.
pub fn notify_only(notified: &[u16]) -> Vec<SockFilter> {
    let entries: Vec<(u16, u32)> = notified.iter().map(|&nr| (nr, RET_USER_NOTIF)).collect();
    build(&entries, RET_ALLOW)
}

/// The learning filter: every syscall stops.
pub fn trace_all() -> Vec<SockFilter> {
    build(&[], RET_TRACE)
}

/// The bytes of a `struct sock_fprog` placed at `addr`, followed by `prog`'s instructions (as
/// the kernel reads them on x86-64, little-endian): what a `seccomp(2)` call injected into a
/// tracee is given, once written at `addr` in its memory.
pub fn fprog_image(prog: &[SockFilter], addr: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + 8 * prog.len());
    let len = u16::try_from(prog.len()).unwrap_or(u16::MAX);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 6]);
    out.extend_from_slice(&(addr + 16).to_le_bytes());
    for insn in prog {
        out.extend_from_slice(&insn.code.to_le_bytes());
        out.push(insn.jt);
        out.push(insn.jf);
        out.extend_from_slice(&insn.k.to_le_bytes());
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A classic-BPF interpreter for the instructions [`build`] emits, over a
    /// `seccomp_data` with `nr` and `arch`.
    pub(crate) fn run(prog: &[SockFilter], nr: u32, arch: u32) -> u32 {
        run_args(prog, nr, arch, &[0; 6])
    }

    /// [`run`] with argument registers.
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    pub(crate) fn run_args(prog: &[SockFilter], nr: u32, arch: u32, args: &[u64; 6]) -> u32 {
        let mut acc = 0u32;
        let mut pc = 0usize;
        loop {
            let ins = prog.get(pc).expect("program runs off its end");
            pc += 1;
            match ins.code {
                BPF_LD_W_ABS => {
                    acc = match ins.k {
                        OFF_NR => nr,
                        OFF_ARCH => arch,
                        k if (16..64).contains(&k) && k % 8 == 0 => {
                            args[((k - 16) / 8) as usize] as u32
                        }
                        other => panic!("load from unexpected offset {other}"),
                    }
                }
                BPF_ALU_AND_K => acc &= ins.k,
                BPF_JEQ_K => pc += usize::from(if acc == ins.k { ins.jt } else { ins.jf }),
                BPF_JGE_K => pc += usize::from(if acc >= ins.k { ins.jt } else { ins.jf }),
                BPF_RET_K => return ins.k,
                other => panic!("unexpected opcode {other:#x}"),
            }
        }
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // x86-64 numbers and audit arch
    fn fprog_image_is_the_kernels_layout() {
        let prog = trace_where(&[32], &[]);
        let image = fprog_image(&prog, 0x7fff_0000_1000);
        assert_eq!(image.len(), 16 + 8 * prog.len());
        assert_eq!(u16::from_le_bytes([image[0], image[1]]), prog.len() as u16);
        assert_eq!(&image[2..8], &[0; 6], "padding of struct sock_fprog");
        let ptr = u64::from_le_bytes(image[8..16].try_into().unwrap());
        assert_eq!(ptr, 0x7fff_0000_1010, "the instructions follow the header");
        // Decoded back, the instructions are the program, and it still traces only `dup`.
        let decoded: Vec<SockFilter> = image[16..]
            .chunks(8)
            .map(|c| SockFilter {
                code: u16::from_le_bytes([c[0], c[1]]),
                jt: c[2],
                jf: c[3],
                k: u32::from_le_bytes([c[4], c[5], c[6], c[7]]),
            })
            .collect();
        for nr in [0u32, 32, 33] {
            assert_eq!(
                run(&decoded, nr, AUDIT_ARCH_X86_64),
                run(&prog, nr, AUDIT_ARCH_X86_64)
            );
        }
        assert_eq!(run(&decoded, 32, AUDIT_ARCH_X86_64), RET_TRACE);
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // x86-64 numbers and audit arch
    fn traces_exactly_the_listed_syscalls() {
        let prog = trace_where(&[257, 2, 59, 257], &[]);
        for nr in 0..460u32 {
            let expected = if [2, 59, 257].contains(&nr) {
                RET_TRACE
            } else {
                RET_ALLOW
            };
            assert_eq!(run(&prog, nr, AUDIT_ARCH_X86_64), expected, "nr {nr}");
        }
        assert_eq!(prog.len(), 6 + 2 * 3 + 1, "duplicates emitted once");
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // x86-64 numbers and audit arch
    fn foreign_abis_are_refused() {
        let prog = trace_where(&[2], &[]);
        // i386 `open` is 5; the filter must not let it through as x86-64 `fstat`.
        assert_eq!(run(&prog, 5, 0x4000_0003), RET_ERRNO | ENOSYS);
        assert_eq!(
            run(&prog, X32_SYSCALL_BIT | 2, AUDIT_ARCH_X86_64),
            RET_ERRNO | ENOSYS
        );
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // x86-64 numbers and audit arch
    fn learning_traces_everything_and_defaults_apply() {
        let prog = trace_all();
        assert_eq!(run(&prog, 0, AUDIT_ARCH_X86_64), RET_TRACE);
        assert_eq!(run(&prog, 435, AUDIT_ARCH_X86_64), RET_TRACE);
        let allow_list = build(&[(0, RET_ALLOW), (60, RET_ALLOW)], ret_errno(1));
        assert_eq!(run(&allow_list, 0, AUDIT_ARCH_X86_64), RET_ALLOW);
        assert_eq!(run(&allow_list, 1, AUDIT_ARCH_X86_64), ret_errno(1));
        assert_eq!(run(&allow_list, 60, AUDIT_ARCH_X86_64), RET_ALLOW);
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // x86-64 numbers and audit arch
    fn argument_conditions_trace_only_matching_calls() {
        let when = [(33u16, ArgIn::equal(1, vec![0, 1, 2]))];
        let prog = trace_where(&[2, 33, 257], &when);
        let call = |nr: u32, a1: u64| run_args(&prog, nr, AUDIT_ARCH_X86_64, &[7, a1, 0, 0, 0, 0]);
        for newfd in 0..3 {
            assert_eq!(call(33, newfd), RET_TRACE, "dup2(7, {newfd})");
        }
        assert_eq!(call(33, 3), RET_ALLOW, "dup2 onto a non-standard fd");
        assert_eq!(
            call(33, 1 << 32),
            RET_TRACE,
            "the kernel reads newfd as 32 bits"
        );
        // Unconditional entries before and after the block still work.
        assert_eq!(call(2, 9), RET_TRACE);
        assert_eq!(call(257, 9), RET_TRACE);
        assert_eq!(call(32, 0), RET_ALLOW, "dup is not listed");
        assert_eq!(run(&prog, 5, 0x4000_0003), RET_ERRNO | ENOSYS);
        // Too many values: the condition is dropped, not the syscall.
        let many = [(
            33u16,
            ArgIn::equal(1, (0..=MAX_ARG_VALUES as u32).collect()),
        )];
        let prog = trace_where(&[33], &many);
        assert_eq!(
            run_args(&prog, 33, AUDIT_ARCH_X86_64, &[0, 999, 0, 0, 0, 0]),
            RET_TRACE
        );
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // x86-64 numbers and audit arch
    fn masked_conditions_test_the_bits_kept() {
        // openat(dirfd, path, flags): stops only for a write access mode (O_WRONLY, O_RDWR).
        let when = [(
            257u16,
            ArgIn {
                arg: 2,
                mask: 3,
                values: vec![1, 2],
            },
        )];
        let prog = trace_where(&[2, 257], &when);
        let openat = |flags: u64| run_args(&prog, 257, AUDIT_ARCH_X86_64, &[0, 0, flags, 0, 0, 0]);
        assert_eq!(openat(0), RET_ALLOW, "O_RDONLY");
        assert_eq!(openat(0o2000000), RET_ALLOW, "O_RDONLY|O_CLOEXEC");
        assert_eq!(openat(1), RET_TRACE, "O_WRONLY");
        assert_eq!(openat(0o1102), RET_TRACE, "O_RDWR|O_CREAT|O_TRUNC");
        assert_eq!(openat(0o2000001), RET_TRACE, "O_WRONLY|O_CLOEXEC");
        assert_eq!(openat(3), RET_ALLOW, "access mode 3 is neither");
        assert_eq!(
            openat((1 << 32) | 1),
            RET_TRACE,
            "the kernel reads flags as 32 bits"
        );
        assert_eq!(
            run_args(&prog, 2, AUDIT_ARCH_X86_64, &[0; 6]),
            RET_TRACE,
            "open has no condition"
        );
        assert_eq!(run(&prog, 3, AUDIT_ARCH_X86_64), RET_ALLOW);
    }

    #[test]
    #[cfg(target_arch = "x86_64")] // x86-64 numbers and audit arch
    fn large_sets_keep_short_jumps() {
        let all: Vec<u16> = (0..460).collect();
        let prog = trace_where(&all, &[]);
        assert!(prog.iter().all(|i| i.jt <= 1 && i.jf <= 1));
        assert_eq!(run(&prog, 459, AUDIT_ARCH_X86_64), RET_TRACE);
        assert_eq!(run(&prog, 460, AUDIT_ARCH_X86_64), RET_ALLOW);
    }

    #[test]
    fn aarch64_programs_hold_the_generic_numbers() {
        // openat (x86-64 257, aarch64 56) traced, open (2, none on aarch64) left out.
        let entries = [(257, RET_TRACE, None), (2, RET_TRACE, None)];
        let prog = build_for(Arch::Aarch64, &entries, RET_ALLOW);
        assert_eq!(run(&prog, 56, AUDIT_ARCH_AARCH64), RET_TRACE);
        assert_eq!(run(&prog, 257, AUDIT_ARCH_AARCH64), RET_ALLOW);
        assert_eq!(run(&prog, 2, AUDIT_ARCH_AARCH64), RET_ALLOW);
        // Another architecture's calls (a 32-bit arm task, x86-64) are refused.
        assert_eq!(run(&prog, 56, 0x4000_0028), RET_ERRNO | ENOSYS);
        assert_eq!(run(&prog, 56, AUDIT_ARCH_X86_64), RET_ERRNO | ENOSYS);
        // No x32 line: the generic table's numbers are all small anyway.
        assert_eq!(prog.len(), 4 + 2 + 1);
        let x86 = build_for(Arch::X86_64, &entries, RET_ALLOW);
        assert_eq!(run(&x86, 257, AUDIT_ARCH_X86_64), RET_TRACE);
        assert_eq!(run(&x86, 2, AUDIT_ARCH_X86_64), RET_TRACE);
        assert_eq!(run(&x86, 257, AUDIT_ARCH_AARCH64), RET_ERRNO | ENOSYS);
    }
}

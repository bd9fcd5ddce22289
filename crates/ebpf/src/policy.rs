//! Choices of behaviour the caller makes and `sys` carries out: how syscalls are hooked
//! ([`Hook`]), what the programs do for a floor measurement ([`Floor`]), when the kernel wakes
//! the reader (`WakeTuning`). Plain data: no kernel calls here.

/// How watched syscalls are hooked (`hook_mode` in `bpf/vigil.bpf.c`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Hook {
    /// A BPF trampoline (fexit) on each watched syscall's `__x64_sys_X`: one program with
    /// the arguments and the result; unwatched syscalls run no BPF and keep the fast path.
    #[default]
    Fexit,
    /// The raw BTF tracepoint `sys_exit` alone, filtered by syscall number in the kernel
    /// (arguments from the saved user registers): one program per watched syscall, but
    /// every syscall of the host takes the slow path and runs the filter.
    Raw,
    /// The per-syscall exit tracepoints `syscalls/sys_exit_X` alone (arguments from the
    /// saved user registers; execveat also keeps its pathname at entry): every syscall takes
    /// the slow path, but only the exit side's check runs for an unwatched one.
    Exit,
    /// The per-syscall tracepoints `syscalls/sys_{enter,exit}_X` (enter stashes the
    /// arguments, exit writes the record): every syscall takes the slow path.
    Tracepoint,
}

impl Hook {
    pub fn name(self) -> &'static str {
        match self {
            Hook::Fexit => "fexit",
            Hook::Raw => "raw",
            Hook::Exit => "exit",
            Hook::Tracepoint => "tracepoint",
        }
    }
}

/// What the programs do, for measuring the floor under Vigil's own work (`vigil bench`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Floor {
    /// Capture (the agent).
    #[default]
    None,
    /// Programs at the same attach points that return at once.
    Nop,
    /// Programs that write only a record header to the ring (discarded by user space).
    Ring,
}

/// When the kernel wakes the reader (`wake_reason` in `bpf/vigil.bpf.c`), set before load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeTuning {
    /// Bytes waiting in a CPU's ring at which a record of any type wakes the reader.
    pub bytes: u64,
    /// After a wakeup, how long a CPU writes without waking the reader again.
    pub gap_ns: u64,
}

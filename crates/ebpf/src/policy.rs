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
    /// Every hook, in the order `vigil watch --syscall-hook` lists them.
    pub const ALL: [Hook; 4] = [Hook::Fexit, Hook::Raw, Hook::Exit, Hook::Tracepoint];

    /// Its name on the command line (`--syscall-hook`) and in the start-up line.
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

impl Floor {
    /// Every floor, in the order `vigil watch --bpf-floor` lists them.
    pub const ALL: [Floor; 3] = [Floor::None, Floor::Nop, Floor::Ring];

    /// Its name on the command line (`--bpf-floor`).
    pub fn name(self) -> &'static str {
        match self {
            Floor::None => "none",
            Floor::Nop => "nop",
            Floor::Ring => "ring",
        }
    }
}

/// When the kernel wakes the reader (`wake_reason` in `bpf/vigil.bpf.c`), set before load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeTuning {
    /// Bytes waiting in a CPU's ring at which a record of any type wakes the reader.
    pub bytes: u64,
    /// After a wakeup, how long a CPU writes without waking the reader again.
    pub gap_ns: u64,
    /// How long after a process-lifecycle record of a watched type a timer wakes the reader
    /// for it (0: at once, as for any other record).
    pub defer_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ALL` lists every variant once, in order (the command line offers exactly these), each
    /// with a name of its own. A new variant fails to compile here until it is placed.
    #[test]
    fn every_hook_and_floor_is_listed_once_by_a_name_of_its_own() {
        let hook_at = |hook: Hook| match hook {
            Hook::Fexit => 0,
            Hook::Raw => 1,
            Hook::Exit => 2,
            Hook::Tracepoint => 3,
        };
        let floor_at = |floor: Floor| match floor {
            Floor::None => 0,
            Floor::Nop => 1,
            Floor::Ring => 2,
        };
        let hooks: Vec<usize> = Hook::ALL.into_iter().map(hook_at).collect();
        assert_eq!(hooks, [0, 1, 2, 3]);
        let floors: Vec<usize> = Floor::ALL.into_iter().map(floor_at).collect();
        assert_eq!(floors, [0, 1, 2]);
        let mut names: Vec<&str> = Hook::ALL.into_iter().map(Hook::name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Hook::ALL.len(), "{names:?}");
        let mut names: Vec<&str> = Floor::ALL.into_iter().map(Floor::name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Floor::ALL.len(), "{names:?}");
    }
}

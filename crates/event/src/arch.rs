//! The syscall numbering of the machine a driver runs on, against the numbering events carry.
//!
//! Events, captures and rules name syscalls by their x86-64 number ([`EventSpec::nr`]), on
//! every architecture: a capture written on arm64 replays on x86-64 and back, and one table
//! of event types serves both. A driver speaks the kernel's own numbers (what seccomp, ptrace
//! and the BPF programs see) and translates at its boundary with [`native_nr`] and
//! [`event_nr`]. The two tables are matched by name; every aarch64 call has an x86-64 namesake,
//! the converse does not hold (`open`, `stat`, `fork`… have no aarch64 number).
//!
//! [`EventSpec::nr`]: crate::EventSpec::nr

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::{syscalls_aarch64, syscalls_x86_64};

/// A CPU architecture whose syscall table Vigil knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arch {
    X86_64,
    Aarch64,
}

impl Arch {
    /// The architecture this build runs on (a build for another one does not compile: see
    /// the `compile_error!` below).
    pub const fn host() -> Arch {
        if cfg!(target_arch = "aarch64") {
            Arch::Aarch64
        } else {
            Arch::X86_64
        }
    }

    /// `(number, name)` of every syscall, ordered by number.
    pub fn syscalls(self) -> &'static [(u16, &'static str)] {
        match self {
            Arch::X86_64 => syscalls_x86_64::SYSCALLS,
            Arch::Aarch64 => syscalls_aarch64::SYSCALLS,
        }
    }

    /// The kernel's number for the syscall events number `event_nr` (x86-64), if this
    /// architecture has the call.
    pub fn native_nr(self, event_nr: u16) -> Option<u16> {
        match self {
            Arch::X86_64 => Some(event_nr),
            Arch::Aarch64 => maps().to_native.get(&event_nr).copied(),
        }
    }

    /// The event (x86-64) number of the kernel's syscall `native_nr`.
    pub fn event_nr(self, native_nr: u16) -> Option<u16> {
        match self {
            Arch::X86_64 => Some(native_nr),
            Arch::Aarch64 => maps().to_event.get(&native_nr).copied(),
        }
    }

    /// The kernel's number of the syscall called `name`.
    pub fn nr_of(self, name: &str) -> Option<u16> {
        self.syscalls()
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(nr, _)| *nr)
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
compile_error!("Vigil knows the syscall tables of x86_64 and aarch64 only");

struct Maps {
    to_native: HashMap<u16, u16>,
    to_event: HashMap<u16, u16>,
}

fn maps() -> &'static Maps {
    static MAPS: OnceLock<Maps> = OnceLock::new();
    MAPS.get_or_init(|| {
        let x86: HashMap<&str, u16> = syscalls_x86_64::SYSCALLS
            .iter()
            .map(|&(nr, name)| (name, nr))
            .collect();
        let mut to_native = HashMap::new();
        let mut to_event = HashMap::new();
        for &(nr, name) in syscalls_aarch64::SYSCALLS {
            if let Some(&event) = x86.get(name) {
                to_native.insert(event, nr);
                to_event.insert(nr, event);
            }
        }
        Maps {
            to_native,
            to_event,
        }
    })
}

/// [`Arch::native_nr`] of the architecture this build runs on.
pub fn native_nr(event_nr: u16) -> Option<u16> {
    Arch::host().native_nr(event_nr)
}

/// [`Arch::event_nr`] of the architecture this build runs on.
pub fn event_nr(native_nr: u16) -> Option<u16> {
    Arch::host().event_nr(native_nr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_aarch64_call_has_an_x86_64_namesake() {
        for &(nr, name) in syscalls_aarch64::SYSCALLS {
            let event = Arch::Aarch64.event_nr(nr);
            assert!(event.is_some(), "{name} ({nr}) has no x86-64 number");
            assert_eq!(Arch::Aarch64.native_nr(event.unwrap()), Some(nr), "{name}");
        }
    }

    #[test]
    fn numbers_translate_by_name() {
        let a = Arch::Aarch64;
        // openat: 257 on x86-64, 56 in the generic table; execve 59/221; clone3 435 on both.
        assert_eq!(a.native_nr(257), Some(56));
        assert_eq!(a.event_nr(56), Some(257));
        assert_eq!(a.native_nr(59), Some(221));
        assert_eq!(a.native_nr(435), Some(435));
        assert_eq!(a.event_nr(79), Some(262)); // newfstatat
                                               // open (2), stat (4), fork (57) do not exist on aarch64.
        for nr in [2, 4, 57, 58] {
            assert_eq!(a.native_nr(nr), None, "x86-64 {nr}");
        }
        assert_eq!(Arch::X86_64.native_nr(2), Some(2));
        assert_eq!(a.nr_of("execveat"), Some(281));
    }

    #[test]
    fn tables_are_ordered_and_unique() {
        for arch in [Arch::X86_64, Arch::Aarch64] {
            let table = arch.syscalls();
            assert!(table.windows(2).all(|w| w[0].0 < w[1].0), "{arch:?}");
        }
    }
}

//! Feature probes before load: what a kernel must have (`REQUIRED`), and whether `bpf()`
//! itself is refused (a seccomp filter), so that neither is taken for a verifier failure.

use std::os::fd::{FromRawFd, OwnedFd};

/// A kernel feature the programs need, with the first Linux release that has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Feature {
    /// What it is, as a user would look it up (`BPF helper bpf_loop`).
    pub name: &'static str,
    /// The first Linux release with it (`5.17`).
    pub since: &'static str,
}

/// The oldest Linux release that has every `REQUIRED` feature.
pub const OLDEST_KERNEL: &str = "5.17";

/// What `bpf/vigil.bpf.c` needs beyond BTF and `tp_btf` programs (5.5), probed before the
/// object is loaded so that a kernel without one is named in one line instead of a verifier
/// log. In the order of the releases that brought them.
pub const REQUIRED: [Feature; 4] = [
    Feature {
        name: "BPF map type ringbuf",
        since: "5.8",
    },
    Feature {
        name: "BPF map type task_storage",
        since: "5.11",
    },
    Feature {
        name: "BPF helper bpf_task_pt_regs",
        since: "5.15",
    },
    Feature {
        name: "BPF helper bpf_loop",
        since: "5.17",
    },
];

/// The first [`REQUIRED`] feature this kernel lacks. A probe that cannot decide (an error
/// other than "not supported") counts as present: the load that follows then reports it.
pub fn missing_feature() -> Option<Feature> {
    use libbpf_rs::libbpf_sys as sys;
    let prev = libbpf_rs::set_print(None);
    let present = |i: usize| -> bool {
        // SAFETY: the probes take plain integers and a null options pointer (allowed: "opts
        // must be NULL"); they load and close a throw-away map or program.
        let r = unsafe {
            match i {
                0 => sys::libbpf_probe_bpf_map_type(sys::BPF_MAP_TYPE_RINGBUF, std::ptr::null()),
                1 => {
                    sys::libbpf_probe_bpf_map_type(sys::BPF_MAP_TYPE_TASK_STORAGE, std::ptr::null())
                }
                2 => sys::libbpf_probe_bpf_helper(
                    sys::BPF_PROG_TYPE_TRACEPOINT,
                    sys::BPF_FUNC_task_pt_regs,
                    std::ptr::null(),
                ),
                _ => sys::libbpf_probe_bpf_helper(
                    sys::BPF_PROG_TYPE_TRACEPOINT,
                    sys::BPF_FUNC_loop,
                    std::ptr::null(),
                ),
            }
        };
        r != 0
    };
    let missing = (0..REQUIRED.len())
        .find(|&i| !present(i))
        .map(|i| REQUIRED[i]);
    libbpf_rs::set_print(prev);
    missing
}

/// Why the bpf() system call itself is refused here, when it is: a throw-away array map
/// (which any kernel with eBPF creates for a process with `CAP_BPF`) cannot be created with
/// `EPERM` or `ENOSYS`. Called once the capabilities are known to be there, so that a refusal
/// by a seccomp filter is not taken for a missing kernel feature by the probes that follow.
pub fn bpf_call_refused() -> Option<std::io::Error> {
    use libbpf_rs::libbpf_sys as sys;
    // SAFETY: a null name and null options are allowed (`bpf_map_create`); the fd it
    // returns is new and closed right away.
    let fd = unsafe {
        sys::bpf_map_create(
            sys::BPF_MAP_TYPE_ARRAY,
            std::ptr::null(),
            4,
            4,
            1,
            std::ptr::null(),
        )
    };
    if fd >= 0 {
        // SAFETY: `fd` is a new fd that nothing else owns.
        drop(unsafe { OwnedFd::from_raw_fd(fd) });
        return None;
    }
    // libbpf returns `-errno`.
    let err = std::io::Error::from_raw_os_error(-fd);
    matches!(err.raw_os_error(), Some(libc::EPERM | libc::ENOSYS)).then_some(err)
}

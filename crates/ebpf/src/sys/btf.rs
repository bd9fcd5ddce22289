//! Kernel BTF: which function a syscall's fexit stub attaches to, and which capture program
//! (one per BTF prototype) serves it.

/// The BTF prototype (type id) of kernel function `name`, if the kernel's BTF has it.
fn prototype_of(btf: &libbpf_rs::btf::Btf<'_>, name: &str) -> Option<libbpf_rs::btf::TypeId> {
    use libbpf_rs::btf::ReferencesType as _;
    btf.type_by_name::<libbpf_rs::btf::types::Func<'_>>(name)
        .map(|f| f.referenced_type_id())
}

/// The distinct prototypes of the syscall functions, each with a function that has it: first
/// `<SYS_PREFIX>openat`'s (the capture program's compiled-in target), then the first other one
/// found in the syscall table (at most two: the capture program is loaded once for each).
pub(super) fn fexit_prototypes(
    btf: &libbpf_rs::btf::Btf<'_>,
) -> Vec<(libbpf_rs::btf::TypeId, String)> {
    let first = fexit_target("openat");
    let Some(base) = prototype_of(btf, &first) else {
        return Vec::new();
    };
    let mut protos = vec![(base, first)];
    for spec in vigil_event::table::events() {
        if spec.nr.is_none() {
            continue;
        }
        let target = fexit_target(crate::spec::tracepoint_name(spec.name));
        if let Some(proto) = prototype_of(btf, &target) {
            if proto != base {
                protos.push((proto, target));
                break;
            }
        }
    }
    protos
}

/// The function a fexit stub for syscall `name` attaches to, and the index in `protos` of its
/// prototype (which capture program serves it): `__x64_sys_X` (`__arm64_sys_X`), or for a
/// syscall without arguments `__do_sys_X` (on x86 `__x64_sys_X` is an alias of it, and BTF names only the
/// aliased function: `SYSCALL_DEFINE0` in arch/x86/include/asm/syscall_wrapper.h). A
/// `__do_sys_X` taking the syscall's own arguments has another prototype and is never chosen.
pub(super) fn fexit_function(
    btf: &libbpf_rs::btf::Btf<'_>,
    protos: &[libbpf_rs::btf::TypeId],
    name: &str,
) -> Option<(usize, String)> {
    [fexit_target(name), format!("__do_sys_{name}")]
        .into_iter()
        .find_map(|target| {
            let proto = prototype_of(btf, &target)?;
            let group = protos.iter().position(|&p| p == proto)?;
            Some((group, target))
        })
}

/// The prefix of the architecture's syscall wrappers (`SYSCALL_DEFINEx` in
/// arch/x86/include/asm/syscall_wrapper.h, arch/arm64/include/asm/syscall_wrapper.h): the
/// functions the fexit programs attach to (`bpf/vigil.bpf.c` compiles in the same one).
#[cfg(target_arch = "x86_64")]
pub const SYS_PREFIX: &str = "__x64_sys_";
#[cfg(target_arch = "aarch64")]
pub const SYS_PREFIX: &str = "__arm64_sys_";

/// The kernel function a syscall's fexit stub attaches to.
pub fn fexit_target(tracepoint_name: &str) -> String {
    format!("{SYS_PREFIX}{tracepoint_name}")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// Against the kernel's own BTF (readable by anyone): the two prototypes of the syscall
    /// functions, and the aliased `__do_sys_X` of a syscall without arguments. Skips where
    /// the kernel has no BTF (the driver needs it anyway).
    #[test]
    fn fexit_targets_follow_the_kernels_btf() {
        let Ok(btf) = libbpf_rs::btf::Btf::from_vmlinux() else {
            assert!(
                !Path::new("/sys/kernel/btf/vmlinux").exists(),
                "the kernel's BTF exists but cannot be read"
            );
            return;
        };
        let protos = fexit_prototypes(&btf);
        assert_eq!(
            protos.first().map(|p| p.1.as_str()),
            Some(fexit_target("openat").as_str())
        );
        let ids: Vec<_> = protos.iter().map(|p| p.0).collect();
        assert_eq!(
            fexit_function(&btf, &ids, "openat"),
            Some((0, fexit_target("openat")))
        );
        // fork has no arguments: where BTF has `__do_sys_fork` (x86 kernels since the
        // pt_regs wrappers), it is the target, served by the other prototype's program.
        if prototype_of(&btf, &fexit_target("fork")).is_none()
            && prototype_of(&btf, "__do_sys_fork").is_some()
        {
            assert_eq!(ids.len(), 2, "{protos:?}");
            assert_eq!(
                fexit_function(&btf, &ids, "fork"),
                Some((1, "__do_sys_fork".to_owned()))
            );
        }
        // A `__do_sys_X` with the syscall's own arguments has neither prototype.
        if let Some(proto) = prototype_of(&btf, "__do_sys_openat") {
            assert!(!ids.contains(&proto), "{protos:?}");
        }
        assert_eq!(fexit_function(&btf, &ids, "no_such_syscall"), None);
    }
}

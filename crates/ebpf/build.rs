//! Compiles `bpf/vigil.bpf.c` with clang and generates its libbpf-rs skeleton.

use std::env;
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let manifest =
        PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("../../bpf");
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    // The kernel types of the target's architecture (`bpf/include/<linux arch>/vmlinux.h`);
    // libbpf-cargo defines the matching `__TARGET_ARCH_*` from CARGO_CFG_TARGET_ARCH.
    let target_arch = env::var("CARGO_CFG_TARGET_ARCH").expect("cargo sets CARGO_CFG_TARGET_ARCH");
    let include = bpf_dir.join("include").join(match target_arch.as_str() {
        "x86_64" => "x86",
        "aarch64" => "arm64",
        other => panic!("no bpf/include/<arch>/vmlinux.h for target architecture {other}"),
    });
    for (source, skeleton) in [
        ("vigil.bpf.c", "vigil.skel.rs"),
        ("vigil_stubs.bpf.c", "vigil_stubs.skel.rs"),
    ] {
        let src = bpf_dir.join(source);
        SkeletonBuilder::new()
            .source(&src)
            .clang_args([
                std::ffi::OsString::from("-I"),
                include.clone().into_os_string(),
                std::ffi::OsString::from("-O2"),
                std::ffi::OsString::from("-g"),
            ])
            .build_and_generate(out_dir.join(skeleton))
            .expect("the BPF program compiles (clang) and its skeleton generates");
        println!("cargo:rerun-if-changed={}", src.display());
    }
    // Only files that exist: a missing one makes cargo rerun this script (and relink every
    // binary, fat LTO) on every build.
    println!(
        "cargo:rerun-if-changed={}",
        include.join("vmlinux.h").display()
    );
}

#!/bin/sh
# Builds the statically linked `vigil` the container image ships: glibc, libelf, zlib and
# libbpf linked in, no program interpreter, so it runs in an empty root filesystem.
#
# Usage: scripts/build-static.sh [ARCH]   (prints the binary's path on the last line)
#
# ARCH: x86_64 or aarch64 (default: the host's). Output: target/<triple>/release/vigil, e.g.
# target/aarch64-unknown-linux-gnu/release/vigil.
# The explicit `--target` keeps `+crt-static` away from build scripts and proc macros (they
# must stay dynamic) and the result apart from the ordinary `target/release/vigil`.
#
# Needs: the release toolchain of `make build` plus the static archives `libelf.a` and
# `libz.a` (Debian: libelf-dev, zlib1g-dev). crates/ebpf/Cargo.toml turns on libbpf-sys's
# `static` feature for `+crt-static` builds; `-L` names the directory of those archives.
#
# Why glibc and not musl: elfutils' libelf does not build against musl without argp, fts and
# obstack ports, and the archives Debian ships are glibc's. A static glibc (2.34 or later,
# where the `files` and `dns` lookups are part of libc) still resolves host names from
# /etc/hosts and /etc/resolv.conf without NSS modules, which the HTTP output needs; Vigil
# looks up users by reading /etc/passwd itself, so nothing else needs NSS.
set -eu

cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
CC=${CC:-cc}

host=$(rustc -vV | sed -n 's/^host: //p')
case "$host" in
    *-linux-gnu) ;;
    *) echo "build-static: host $host is not a *-linux-gnu target" >&2; exit 1 ;;
esac
arch=${1:-${host%%-*}}
case "$arch" in
    x86_64 | aarch64) triple=$arch-unknown-linux-gnu ;;
    *) echo "build-static: unsupported ARCH $arch (x86_64 or aarch64)" >&2; exit 1 ;;
esac
# A cross build (Debian: gcc-ARCH-linux-gnu, libc6-dev-ARCH-cross, and libelf-dev:DEBARCH,
# zlib1g-dev:DEBARCH of a foreign dpkg architecture) compiles libbpf with the cross compiler
# and links with it; the BPF objects are compiled for the target's kernel by crates/ebpf's
# build script (CARGO_CFG_TARGET_ARCH picks the vmlinux.h and __TARGET_ARCH_*).
if [ "$triple" != "$host" ]; then
    CC=${CROSS_CC:-$arch-linux-gnu-gcc}
    if ! command -v "$CC" >/dev/null; then
        echo "build-static: cross compiler $CC not found (install gcc-$arch-linux-gnu)" >&2
        exit 1
    fi
    env_triple=$(echo "$triple" | tr 'a-z-' 'A-Z_')
    export "CC_$(echo "$triple" | tr - _)=$CC"
    export "CARGO_TARGET_${env_triple}_LINKER=$CC"
    if ! rustup target list --installed 2>/dev/null | grep -qx "$triple"; then
        echo "build-static: Rust target $triple not installed (rustup target add $triple)" >&2
        exit 1
    fi
fi

libdir=""
for lib in libelf.a libz.a; do
    path=$("$CC" -print-file-name="$lib")
    if [ "$path" = "$lib" ] || [ ! -f "$path" ]; then
        echo "build-static: $lib not found by $CC (install libelf-dev and zlib1g-dev for $arch)" >&2
        exit 1
    fi
    dir=$(cd "$(dirname "$path")" && pwd -P)
    case " $libdir " in *" -L native=$dir "*) ;; *) libdir="$libdir -L native=$dir" ;; esac
done

RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static$libdir" \
    "$CARGO" build --release --locked --target "$triple" --bin vigil >&2

bin="target/$triple/release/vigil"
case "$arch" in
    x86_64) machine="Advanced Micro Devices X86-64" ;;
    aarch64) machine="AArch64" ;;
esac
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    bin="$CARGO_TARGET_DIR/$triple/release/vigil"
fi
# A dynamically linked executable names its loader in a PT_INTERP program header.
if [ "$(readelf --file-header "$bin" | sed -n 's/^ *Machine: *//p')" != "$machine" ]; then
    echo "build-static: $bin is not a $machine executable" >&2
    exit 1
fi
if readelf --program-headers --wide "$bin" | grep -q 'INTERP'; then
    echo "build-static: $bin has a program interpreter: it is not statically linked" >&2
    exit 1
fi
if readelf --dynamic --wide "$bin" | grep -q '(NEEDED)'; then
    echo "build-static: $bin needs shared libraries:" >&2
    readelf --dynamic --wide "$bin" | grep '(NEEDED)' >&2
    exit 1
fi
echo "$bin"

#!/bin/sh
# Builds the statically linked `vigil` the container image ships: glibc, libelf, zlib and
# libbpf linked in, no program interpreter, so it runs in an empty root filesystem.
#
# Usage: scripts/build-static.sh        (prints the binary's path on the last line)
#
# Output: target/<host triple>/release/vigil (e.g. target/x86_64-unknown-linux-gnu/...).
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

triple=$(rustc -vV | sed -n 's/^host: //p')
case "$triple" in
    *-linux-gnu) ;;
    *) echo "build-static: host $triple is not a *-linux-gnu target" >&2; exit 1 ;;
esac

libdir=""
for lib in libelf.a libz.a; do
    path=$("$CC" -print-file-name="$lib")
    if [ "$path" = "$lib" ] || [ ! -f "$path" ]; then
        echo "build-static: $lib not found by $CC (install libelf-dev and zlib1g-dev)" >&2
        exit 1
    fi
    dir=$(cd "$(dirname "$path")" && pwd -P)
    case " $libdir " in *" -L native=$dir "*) ;; *) libdir="$libdir -L native=$dir" ;; esac
done

RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static$libdir" \
    "$CARGO" build --release --locked --target "$triple" --bin vigil >&2

bin="target/$triple/release/vigil"
if [ -n "${CARGO_TARGET_DIR:-}" ]; then
    bin="$CARGO_TARGET_DIR/$triple/release/vigil"
fi
# A dynamically linked executable names its loader in a PT_INTERP program header.
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

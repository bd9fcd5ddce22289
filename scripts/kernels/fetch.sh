#!/bin/sh
# Fetches a Debian kernel package and unpacks its image under target/kernels/, without touching
# the host's apt configuration: a private sources list, state and cache directories are given
# to apt-get with `-o Dir::…` options.
#
# Usage: scripts/kernels/fetch.sh SUITE METAPACKAGE [ARCH]
#        e.g. bookworm linux-image-cloud-amd64; trixie linux-image-arm64 arm64
# ARCH is the Debian architecture of the package (default amd64).
# Prints the path of the unpacked kernel image (vmlinuz) on its last line. A kernel fetched
# before is reused (delete target/kernels to refresh).
set -eu
cd "$(dirname "$0")/../.."

suite=$1
meta=$2
arch=${3:-amd64}
mirror=${VIGIL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=$(pwd)/target/kernels
apt_dir=$root/apt/$suite
[ "$arch" = amd64 ] || apt_dir=$apt_dir-$arch
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/etc/preferences.d" \
    "$apt_dir/etc/apt.conf.d" "$root/pkgs"
: > "$apt_dir/status"
echo "deb $mirror $suite main" > "$apt_dir/sources.list"

aptq() {
    apt-get -qq \
        -o Dir::Etc::sourcelist="$apt_dir/sources.list" \
        -o Dir::Etc::sourceparts=- \
        -o Dir::Etc::preferencesparts="$apt_dir/etc/preferences.d" \
        -o Dir::Etc::parts="$apt_dir/etc/apt.conf.d" \
        -o Dir::State="$apt_dir" \
        -o Dir::State::lists="$apt_dir/lists" \
        -o Dir::State::status="$apt_dir/status" \
        -o Dir::Cache="$apt_dir/cache" \
        -o APT::Architecture="$arch" \
        -o APT::Architectures::="$arch" \
        -o Debug::NoLocking=1 \
        -o APT::Sandbox::User=root \
        "$@"
}
aptcache() {
    apt-cache \
        -o Dir::Etc::sourcelist="$apt_dir/sources.list" \
        -o Dir::Etc::sourceparts=- \
        -o Dir::State="$apt_dir" \
        -o Dir::State::lists="$apt_dir/lists" \
        -o Dir::State::status="$apt_dir/status" \
        -o Dir::Cache="$apt_dir/cache" \
        -o APT::Architecture="$arch" \
        "$@"
}

# The lists are refreshed once a day at most.
if [ -z "$(find "$apt_dir/lists" -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null)" ]; then
    aptq update >&2
fi
# The metapackage names the current versioned image package (linux-image-6.1.0-NN-amd64).
pkg=$(aptcache depends "$meta" | sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)
if [ -z "$pkg" ]; then
    echo "fetch: $meta in $suite names no versioned linux-image package" >&2
    exit 1
fi
dest=$root/$pkg
if [ ! -f "$dest/vmlinuz" ]; then
    (cd "$root/pkgs" && aptq download "$pkg" >&2)
    deb=$(ls "$root/pkgs/${pkg}_"*.deb | head -n 1)
    tmp=$dest.tmp
    rm -rf "$tmp"
    mkdir -p "$tmp"
    dpkg-deb -x "$deb" "$tmp/x"
    cp "$tmp"/x/boot/vmlinuz-* "$tmp/vmlinuz"
    cp "$tmp"/x/boot/config-* "$tmp/config"
    rm -rf "$tmp/x" "$deb"
    rm -rf "$dest"
    mv "$tmp" "$dest"
fi
echo "$dest/vmlinuz"

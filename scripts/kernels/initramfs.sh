#!/bin/sh
# Builds the kernel-matrix guests' initramfs (an uncompressed newc cpio): the Debian minbase
# tree of scripts/mk-rootfs.sh, the static vigil at /vigil, Falco's rules at
# /rules/falco_rules.yaml, busybox (from the host's busybox-static: the tree has no `ip` to
# bring the loopback up) and scripts/kernels/guest-init.sh as /init. The tree and vigil are of
# the guest's architecture (amd64 or arm64).
#
# Usage: scripts/kernels/initramfs.sh ROOTFS VIGIL FALCO_RULES OUT.cpio [CAPTURE]
# CAPTURE: a capture written elsewhere (the host's architecture), at /captures/host.cap, which
# the guest replays (guest-init.sh, phase `replay`).
set -eu
rootfs=$1
vigil=$2
rules=$3
out=$4
capture=${5:-}
here=$(cd "$(dirname "$0")" && pwd)

stage=$(mktemp -d "${TMPDIR:-/tmp}/vigil-initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT
# The tree is shared with the container tests: copied, never changed in place. Documentation
# and locales are left out (a smaller image boots faster under emulation).
tar -C "$rootfs" --exclude=./usr/share/doc --exclude=./usr/share/man \
    --exclude=./usr/share/locale --exclude=./var/cache/apt --exclude=./var/lib/apt/lists \
    -cf - . | tar -C "$stage" -xf -
install -m 0755 "$vigil" "$stage/vigil"
install -m 0755 "$here/guest-init.sh" "$stage/init"
# The tree's own busybox when it has one (the arm64 tree includes busybox-static: the host's
# is an amd64 binary), else the host's.
busybox=$(command -v busybox)
[ -x "$stage/usr/bin/busybox" ] && busybox=$stage/usr/bin/busybox
mkdir -p "$stage/usr/local/bin"
install -m 0755 "$busybox" "$stage/usr/local/bin/busybox"
mkdir -p "$stage/rules"
install -m 0644 "$rules" "$stage/rules/falco_rules.yaml"
if [ -n "$capture" ]; then
    mkdir -p "$stage/captures"
    install -m 0644 "$capture" "$stage/captures/host.cap"
fi
(cd "$stage" && find . -print0 | cpio --null --create --format=newc --quiet) >"$out.tmp"
mv "$out.tmp" "$out"

#!/bin/sh
# Builds (once) the root filesystem and runc bundle the container tests and the generator's
# container actions use: a `debootstrap --variant=minbase bookworm` tree in DIR/rootfs and a
# `runc spec` configuration in DIR/config.json whose root path is absolute (runc needs that).
#
# Usage: scripts/mk-rootfs.sh [DIR]     (default: $VIGIL_ROOTFS or /var/tmp/vigil-rootfs)
# Cached: nothing is downloaded when DIR/rootfs/etc/debian_version exists.
# Needs root, debootstrap and runc; MIRROR overrides the Debian mirror. ARCH=arm64 builds a
# foreign tree (unpacked, not configured: the arm64 kernel-matrix guests; keep it in its own DIR).
set -eu

DIR=${1:-${VIGIL_ROOTFS:-/var/tmp/vigil-rootfs}}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SUITE=${SUITE:-bookworm}
# libelf1: the vigil binary (bind-mounted by container actions) links libbpf's libelf.
INCLUDE=${INCLUDE:-libelf1,zlib1g}

if [ "$(id -u)" != 0 ]; then
    echo "mk-rootfs: root is needed (debootstrap, runc)" >&2
    exit 1
fi
for tool in debootstrap runc; do
    command -v "$tool" >/dev/null || { echo "mk-rootfs: $tool is not installed" >&2; exit 1; }
done

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
ROOTFS="$DIR/rootfs"

if [ -f "$ROOTFS/etc/debian_version" ]; then
    echo "mk-rootfs: $ROOTFS is ready (cached)"
else
    # A previous run may have been interrupted: start from scratch in a staging directory and
    # move it into place only when debootstrap succeeded, so the cache test above stays true.
    STAGE="$DIR/rootfs.partial"
    rm -rf "$STAGE"
    mkdir -p "$STAGE"
    echo "mk-rootfs: debootstrap --variant=minbase $SUITE into $ROOTFS (a few minutes)"
    if [ -n "${ARCH:-}" ] && [ "$ARCH" != "$(dpkg --print-architecture)" ]; then
        # A foreign tree (ARCH=arm64: the arm64 kernel-matrix guests) is unpacked only: its
        # maintainer scripts would need to run arm64 code. What the guests use of it is
        # files (binaries, libraries); the accounts base-passwd would create are copied from
        # its masters.
        debootstrap --foreign --arch="$ARCH" --variant=minbase --include="$INCLUDE" \
            "$SUITE" "$STAGE" "$MIRROR"
        # The first stage unpacks the required packages only; the others (minbase's and
        # INCLUDE's) are unpacked here the same way. Then the links and files maintainer
        # scripts would have made: awk (an alternative), the accounts (base-passwd), and a
        # real /proc (the first stage links it to the host's).
        # (--keep-directory-symlink: through the merged-/usr links, never replacing them.)
        for deb in "$STAGE"/var/cache/apt/archives/*.deb; do
            dpkg-deb --fsys-tarfile "$deb" | tar -C "$STAGE" --keep-directory-symlink -xf -
        done
        rm -f "$STAGE"/var/cache/apt/archives/*.deb
        [ -e "$STAGE/usr/bin/awk" ] || ln -s mawk "$STAGE/usr/bin/awk"
        for f in passwd group; do
            [ -f "$STAGE/etc/$f" ] || cp "$STAGE/usr/share/base-passwd/$f.master" "$STAGE/etc/$f"
        done
        # The shadow files passwd's postinst makes (`shadowconfig on`): locked accounts.
        for f in passwd group; do
            shadow=$STAGE/etc/shadow
            [ "$f" = group ] && shadow=$STAGE/etc/gshadow
            [ -f "$shadow" ] && continue
            if [ "$f" = passwd ]; then
                awk -F: '{ print $1 ":*:19000:0:99999:7:::" }' "$STAGE/etc/passwd" >"$shadow"
            else
                awk -F: '{ print $1 ":*::" }' "$STAGE/etc/group" >"$shadow"
            fi
            chmod 0640 "$shadow"
            chgrp 42 "$shadow" # shadow
        done
        if [ -L "$STAGE/proc" ]; then rm "$STAGE/proc" && mkdir "$STAGE/proc"; fi
        rm -rf "$STAGE/debootstrap"
    else
        debootstrap --variant=minbase --include="$INCLUDE" "$SUITE" "$STAGE" "$MIRROR"
    fi
    rm -rf "$ROOTFS"
    mv "$STAGE" "$ROOTFS"
fi

# The bundle: runc's default spec with an absolute, read-only root and no terminal.
if [ ! -f "$DIR/config.json" ]; then
    TMP=$(mktemp -d)
    (cd "$TMP" && runc spec)
    sed -e "s|\"path\": \"rootfs\"|\"path\": \"$ROOTFS\"|" \
        -e 's|"terminal": true|"terminal": false|' "$TMP/config.json" >"$DIR/config.json"
    rm -rf "$TMP"
fi
echo "mk-rootfs: bundle $DIR (config.json, rootfs)"

#!/bin/sh
# Builds the `vigil` container image from an already built static binary, with buildah (no
# daemon, no registry, no network): one layer holding `/vigil`, entrypoint `/vigil`, default
# command `watch`. It is the final stage of the Containerfile; use it where the Containerfile's
# builder stage cannot run (no registry access) or to skip a second compilation.
#
# Usage: scripts/build-image.sh [-b BINARY] [-t NAME] [-o OCI_DIR] [-s|-k STORAGE_DIR]
#   -b BINARY      the static vigil (default: what scripts/build-static.sh builds)
#   -t NAME        image name (default: vigil); tagged NAME:<version> and NAME:latest
#   -o OCI_DIR     also write the image as an OCI image layout in OCI_DIR (runc bundles,
#                  skopeo copy oci:OCI_DIR:<version> docker://…)
#   -s STORAGE_DIR buildah storage for this build only, removed at the end (default: buildah's
#                  own storage, where `buildah push NAME:<version> docker://…` finds the image)
#   -k STORAGE_DIR as -s, but kept (scripts/build-image-multiarch.sh adds to it)
#
# The binary's debug sections are stripped for the image (symbols stay, for backtraces).
# Prints the image id on the last line. Needs buildah (Debian: buildah), objcopy, readelf.
set -eu

cd "$(dirname "$0")/.."
binary=""
name=vigil
oci=""
storage=""
keep=""
while getopts b:t:o:s:k: opt; do
    case "$opt" in
        b) binary=$OPTARG ;;
        t) name=$OPTARG ;;
        o) oci=$OPTARG ;;
        s) storage=$OPTARG ;;
        k) storage=$OPTARG; keep=1 ;;
        *) sed -n '8,16p' "$0" >&2; exit 2 ;;
    esac
done
if [ -z "$binary" ]; then
    binary="target/$(rustc -vV | sed -n 's/^host: //p')/release/vigil"
fi
[ -x "$binary" ] || { echo "build-image: no executable at $binary (make static)" >&2; exit 1; }
command -v buildah >/dev/null || { echo "build-image: buildah is not installed" >&2; exit 1; }
if readelf --program-headers --wide "$binary" | grep -q 'INTERP'; then
    echo "build-image: $binary is dynamically linked; the image has no libraries (make static)" >&2
    exit 1
fi

# The image's architecture is the binary's (an aarch64 one from `make static ARCH=aarch64`
# gives an arm64 image; scripts/build-image-multiarch.sh joins both under one name).
case "$(readelf --file-header "$binary" | sed -n 's/^ *Machine: *//p')" in
    "Advanced Micro Devices X86-64") arch=amd64 ;;
    AArch64) arch=arm64 ;;
    *) echo "build-image: $binary is neither x86-64 nor aarch64" >&2; exit 1 ;;
esac
if [ "$arch" = "$(dpkg --print-architecture 2>/dev/null || echo amd64)" ]; then
    version=$("$binary" --version | awk 'NR == 1 {print $NF}')
else
    # A foreign binary cannot run here: the workspace's version is the one it was built with.
    version=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' Cargo.toml)
fi
work=$(mktemp -d)
set -- buildah
if [ -n "$storage" ]; then
    # vfs: works on any file system and without fuse-overlayfs; fine for one small layer.
    set -- buildah --root "$storage/root" --runroot "$storage/run" --storage-driver vfs
fi
container=""
cleanup() {
    [ -n "$container" ] && "$@" rm "$container" >/dev/null 2>&1
    rm -rf "$work"
    [ -n "$storage" ] && [ -z "$keep" ] && rm -rf "$storage/root" "$storage/run"
    return 0
}
trap 'cleanup "$@"' EXIT

# The host's objcopy reads its own architecture's objects only: a foreign binary takes the
# cross binutils' (Debian: binutils-aarch64-linux-gnu, with gcc-aarch64-linux-gnu).
objcopy=objcopy
if [ "$arch" = arm64 ] && [ "$(uname -m)" != aarch64 ]; then objcopy=aarch64-linux-gnu-objcopy; fi
"$objcopy" --strip-debug "$binary" "$work/vigil"
chmod 0755 "$work/vigil"

container=$("$@" from --quiet scratch)
"$@" copy --quiet --chmod 0755 --chown 0:0 "$container" "$work/vigil" /vigil >/dev/null
"$@" config \
    --entrypoint '["/vigil"]' \
    --cmd '["watch"]' \
    --os linux \
    --arch "$arch" \
    --label "org.opencontainers.image.title=vigil" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.description=Vigil runtime security agent (static binary)" \
    "$container"
image=$("$@" commit --quiet --rm "$container" "$name:$version")
container=""
"$@" tag "$name:$version" "$name:latest"
if [ -n "$oci" ]; then
    mkdir -p "$oci"
    "$@" push --quiet "$name:$version" "oci:$oci:$version"
fi
echo "$image"

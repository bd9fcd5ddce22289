#!/bin/sh
# Builds the `vigil` container image from an already built static binary, with buildah (no
# daemon, no registry, no network): one layer holding `/vigil`, entrypoint `/vigil`, default
# command `watch`. It is the final stage of the Containerfile; use it where the Containerfile's
# builder stage cannot run (no registry access) or to skip a second compilation.
#
# Usage: scripts/build-image.sh [-b BINARY] [-t NAME] [-o OCI_DIR] [-s STORAGE_DIR]
#   -b BINARY      the static vigil (default: what scripts/build-static.sh builds)
#   -t NAME        image name (default: vigil); tagged NAME:<version> and NAME:latest
#   -o OCI_DIR     also write the image as an OCI image layout in OCI_DIR (runc bundles,
#                  skopeo copy oci:OCI_DIR:<version> docker://…)
#   -s STORAGE_DIR buildah storage for this build only, removed at the end (default: buildah's
#                  own storage, where `buildah push NAME:<version> docker://…` finds the image)
#
# The binary's debug sections are stripped for the image (symbols stay, for backtraces).
# Prints the image id on the last line. Needs buildah (Debian: buildah), objcopy, readelf.
set -eu

cd "$(dirname "$0")/.."
binary=""
name=vigil
oci=""
storage=""
while getopts b:t:o:s: opt; do
    case "$opt" in
        b) binary=$OPTARG ;;
        t) name=$OPTARG ;;
        o) oci=$OPTARG ;;
        s) storage=$OPTARG ;;
        *) sed -n '8,15p' "$0" >&2; exit 2 ;;
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

version=$("$binary" --version | awk 'NR == 1 {print $NF}')
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
    [ -n "$storage" ] && rm -rf "$storage/root" "$storage/run"
    return 0
}
trap 'cleanup "$@"' EXIT

objcopy --strip-debug "$binary" "$work/vigil"
chmod 0755 "$work/vigil"

container=$("$@" from --quiet scratch)
"$@" copy --quiet --chmod 0755 --chown 0:0 "$container" "$work/vigil" /vigil >/dev/null
"$@" config \
    --entrypoint '["/vigil"]' \
    --cmd '["watch"]' \
    --os linux \
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

#!/bin/sh
# Builds the multi-architecture image `NAME:<version>` (and `NAME:latest`): a manifest list of
# the amd64 and arm64 images of scripts/build-image.sh, in buildah's storage, without a
# registry. `buildah manifest push --all NAME:<version> docker://REGISTRY/vigil:<version>`
# publishes both; a pull (Graviton, Fargate ARM64, x86) takes its platform's.
#
# Usage: scripts/build-image-multiarch.sh AMD64_BINARY ARM64_BINARY [NAME] [STORAGE_DIR]
#   the two static binaries (make static; make static ARCH=aarch64), the name (default vigil),
#   and a buildah storage for this build only (default: buildah's own; the per-architecture
#   images are tagged NAME:<version>-amd64 and NAME:<version>-arm64 there).
# Prints the manifest list's id on the last line.
set -eu
cd "$(dirname "$0")/.."
amd64=$1
arm64=$2
name=${3:-vigil}
storage=${4:-}
set -- buildah
if [ -n "$storage" ]; then
    set -- buildah --root "$storage/root" --runroot "$storage/run" --storage-driver vfs
fi
version=$(sed -n '/^\[workspace.package\]/,/^\[/ s/^version = "\(.*\)"/\1/p' Cargo.toml)
for arch in amd64 arm64; do
    if [ "$arch" = amd64 ]; then binary=$amd64; else binary=$arm64; fi
    # A private storage is kept (not removed by build-image.sh) for the manifest's steps.
    if [ -n "$storage" ]; then
        scripts/build-image.sh -b "$binary" -t "$name-$arch" -k "$storage" >&2
    else
        scripts/build-image.sh -b "$binary" -t "$name-$arch" >&2
    fi
    "$@" tag "$name-$arch:$version" "$name:$version-$arch"
    "$@" rmi "$name-$arch:$version" "$name-$arch:latest" >/dev/null
done
# The list takes the version's name: a single-architecture image of that name goes first.
for tag in "$name:$version" "$name:latest"; do
    "$@" manifest rm "$tag" >/dev/null 2>&1 || "$@" rmi "$tag" >/dev/null 2>&1 || true
done
list=$("$@" manifest create "$name:$version")
for arch in amd64 arm64; do
    "$@" manifest add --os linux --arch "$arch" "$name:$version" \
        "containers-storage:localhost/$name:$version-$arch" >/dev/null
done
"$@" tag "$name:$version" "$name:latest"
echo "$list"

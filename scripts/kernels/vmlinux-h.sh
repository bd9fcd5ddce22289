#!/bin/sh
# Generates a bpf/include/<arch>/vmlinux.h from a kernel image fetched by fetch.sh, without
# booting it: the BTF the kernel would expose at /sys/kernel/btf/vmlinux is the `.BTF` section
# of its image, which an arm64 `Image` (uncompressed in Debian's packages) holds verbatim. A
# maintainer's tool (the headers are committed); needs python3 and bpftool.
#
# Usage: scripts/kernels/vmlinux-h.sh VMLINUZ OUT.h
#   e.g. scripts/kernels/vmlinux-h.sh target/kernels/linux-image-6.12.117+deb13-arm64/vmlinuz \
#        bpf/include/arm64/vmlinux.h
set -eu
image=$1
out=$2
btf=$(mktemp)
trap 'rm -f "$btf"' EXIT
# The BTF header (include/uapi/linux/btf.h): magic 0xeB9F, version 1, flags 0, hdr_len 24,
# then type_off, type_len, str_off, str_len; the types directly follow the header and the
# strings the types. The first blob of that shape is the kernel's.
python3 - "$image" "$btf" <<'PY'
import struct, sys
data = open(sys.argv[1], "rb").read()
at = 0
while True:
    at = data.find(b"\x9f\xeb\x01\x00", at)
    if at < 0:
        sys.exit("vmlinux-h: no BTF found in " + sys.argv[1] + " (a compressed image?)")
    hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<5I", data, at + 4)
    if hdr_len == 24 and type_off == 0 and str_off == type_len and type_len > 100000:
        open(sys.argv[2], "wb").write(data[at:at + hdr_len + str_off + str_len])
        break
    at += 1
PY
bpftool btf dump file "$btf" format c >"$out"
echo "$out: $(wc -l <"$out") lines"

#!/bin/sh
# Boots one kernel-matrix guest under qemu (software emulation unless VIGIL_QEMU_KVM=1) and
# waits for it to power off. The guest's console goes to OUTDIR/console.log, what its checks
# produced (scripts/kernels/guest-init.sh) to OUTDIR/results.log (on arm64 both to results.log:
# see below). The architecture is the kernel image's.
#
# Usage: scripts/kernels/boot.sh VMLINUZ INITRAMFS OUTDIR [PHASES]
# PHASES: a comma-separated list of guest-init.sh phases (default: all).
# Exit status: qemu's; 124 when the guest ran past VIGIL_GUEST_TIMEOUT seconds, 125 when it
# wrote no result line for VIGIL_GUEST_STALL seconds.
set -eu
kernel=$1
initrd=$2
outdir=$3
phases=${4:-all}
timeout=${VIGIL_GUEST_TIMEOUT:-1500}
# A guest that writes no result line for this long has stalled (guest-init.sh bounds each of
# its steps well below it, and says so when one runs over): stopped, exit status 125.
stall=${VIGIL_GUEST_STALL:-600}

mkdir -p "$outdir"
: >"$outdir/console.log"
: >"$outdir/results.log"
accel="-accel tcg,thread=multi"
# The guest's architecture is the image's: an arm64 `Image` says so in its header.
arch=x86_64
case "$(file -b "$kernel")" in *ARM64*) arch=aarch64 ;; esac
if [ "$arch" = aarch64 ]; then
    # `virt` with the emulated `max` CPU; pointer authentication with QEMU's own (cheap)
    # algorithm instead of QARMA, which dominates the emulation's cost otherwise. One UART:
    # the console and the results share it (guest-init.sh), so the kernel says only errors.
    # shellcheck disable=SC2086 # accel is a word list
    set -- timeout --kill-after=10 "$timeout" qemu-system-aarch64 -M virt $accel \
        -cpu max,pauth-impdef=on -smp 2 -m 2048 \
        -kernel "$kernel" -initrd "$initrd" \
        -append "console=ttyAMA0 panic=-1 quiet loglevel=3 vigil.phases=$phases" \
        -display none -monitor none -no-reboot -nodefaults \
        -serial "file:$outdir/results.log"
else
    cpu="-cpu max"
    if [ "${VIGIL_QEMU_KVM:-0}" = 1 ] && [ -w /dev/kvm ]; then
        accel="-enable-kvm"
        cpu="-cpu host"
    fi
    # shellcheck disable=SC2086 # accel and cpu are word lists
    set -- timeout --kill-after=10 "$timeout" qemu-system-x86_64 $accel $cpu -smp 2 -m 2048 \
        -kernel "$kernel" -initrd "$initrd" \
        -append "console=ttyS0 panic=-1 quiet vigil.phases=$phases" \
        -display none -monitor none -no-reboot -nodefaults \
        -serial "file:$outdir/console.log" -serial "file:$outdir/results.log"
fi

"$@" &
guest=$!
size=-1
quiet=0
while kill -0 "$guest" 2>/dev/null; do
    sleep 5
    now=$(stat -c %s "$outdir/results.log")
    if [ "$now" != "$size" ]; then
        size=$now
        quiet=0
    else
        quiet=$((quiet + 5))
    fi
    if [ "$quiet" -ge "$stall" ]; then
        echo "boot.sh: the guest wrote no result for ${stall}s: stopped" >&2
        kill -TERM "$guest" 2>/dev/null
        wait "$guest" || true
        exit 125
    fi
done
wait "$guest"

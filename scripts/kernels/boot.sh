#!/bin/sh
# Boots one kernel-matrix guest under qemu (software emulation unless VIGIL_QEMU_KVM=1) and
# waits for it to power off. The guest's console goes to OUTDIR/console.log, what its checks
# produced (scripts/kernels/guest-init.sh) to OUTDIR/results.log.
#
# Usage: scripts/kernels/boot.sh VMLINUZ INITRAMFS OUTDIR [PHASES]
# PHASES: a comma-separated list of guest-init.sh phases (default: all).
set -eu
kernel=$1
initrd=$2
outdir=$3
phases=${4:-all}
timeout=${VIGIL_GUEST_TIMEOUT:-1500}

mkdir -p "$outdir"
: >"$outdir/console.log"
: >"$outdir/results.log"
accel="-accel tcg,thread=multi"
cpu="-cpu max"
if [ "${VIGIL_QEMU_KVM:-0}" = 1 ] && [ -w /dev/kvm ]; then
    accel="-enable-kvm"
    cpu="-cpu host"
fi
# shellcheck disable=SC2086 # accel and cpu are word lists
timeout --kill-after=10 "$timeout" qemu-system-x86_64 $accel $cpu -smp 2 -m 2048 \
    -kernel "$kernel" -initrd "$initrd" \
    -append "console=ttyS0 panic=-1 quiet vigil.phases=$phases" \
    -display none -monitor none -no-reboot -nodefaults \
    -serial "file:$outdir/console.log" -serial "file:$outdir/results.log"

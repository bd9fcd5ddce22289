#!/bin/sh
# PID 1 of a kernel-matrix guest (crates/cli/tests/e2e/kernels.rs boots it under qemu). The
# initramfs holds a Debian minbase tree, the static `vigil` at /vigil and Falco's rules at
# /rules/falco_rules.yaml. Each phase runs `vigil watch` or `vigil run` while `vigil generate`
# performs the host actions, and writes what it produced to the second serial port
# (/dev/ttyS1) as gzip+base64 blocks between `=== begin NAME` and `=== end NAME` lines, and one
# `phase NAME exit=N` line. The host side decides what passed: this script only collects.
#
# Kernel command line: `vigil.phases=a,b,…` selects phases (default: all; `stall`: none, and
# the guest then writes nothing more).
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
mkdir -p /dev/pts /dev/shm /tmp /run
mount -t devpts devpts /dev/pts
mount -t tmpfs tmpfs /dev/shm
mount -t tmpfs tmpfs /run
mount -t cgroup2 cgroup2 /sys/fs/cgroup 2>/dev/null
[ -e /dev/fd ] || ln -s /proc/self/fd /dev/fd
# Everything below runs two levels down the unified hierarchy, so that the exec records'
# cgroup path (a walk up `kernfs_node` parents in the kernel) has something to walk.
mkdir -p /sys/fs/cgroup/vigil/matrix && echo $$ >/sys/fs/cgroup/vigil/matrix/cgroup.procs
hostname vigil-guest
/usr/local/bin/busybox ip link set lo up

# The results go to the second serial port; arm64's `virt` machine has one UART only, so there
# they share the console (boot.sh quiets the kernel's messages; the host finds the lines).
OUT=/dev/ttyS1
[ "$(uname -m)" = aarch64 ] && OUT=/dev/ttyAMA0
ACTIONS='^syscall\.'
say() { echo "$*" >"$OUT"; }
# A phase line carries the guest's uptime (`at=`): a run the host stopped says how far it got.
sayp() { say "phase $* at=$(cut -d' ' -f1 /proc/uptime)s"; }
# Budgets (seconds) of each step of a phase. A step past its budget is stopped and the phase
# says so (`…_timeout=1`) and goes on: one hang costs its own phase, never the guest's run, and
# the host reports which step hung with what the agent had written. Under emulation on a
# loaded host a step takes up to ~2 min; a hang is what these catch.
READY_BUDGET=300
STEP_BUDGET=480
TERM_BUDGET=120
emit() { # NAME FILE
    [ -f "$2" ] || return 0
    say "=== begin $1"
    gzip -c "$2" | base64 >"$OUT"
    say "=== end $1"
}

phases=all
for word in $(cat /proc/cmdline); do
    case "$word" in vigil.phases=*) phases=${word#vigil.phases=} ;; esac
done
wanted() { [ "$phases" = all ] || case ",$phases," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

# The run count of every BPF program the process holds (bpf_stats_enabled must be on).
run_counts() {
    cat /proc/"$1"/fdinfo/* 2>/dev/null | awk '/^run_cnt:/ { s += $2 } END { print s + 0 }'
}

# watch_phase NAME ACTIONS VIGIL-WATCH-ARGS…: starts the agent, waits until it reports it is
# watching, performs the actions matching ACTIONS, stops it with SIGTERM (it drains).
watch_phase() {
    name=$1
    actions=$2
    shift 2
    wanted "$name" || return 0
    sayp "$name start"
    /vigil watch --json -o webserver.enabled=false "$@" >/tmp/"$name".alerts 2>/tmp/"$name".err &
    pid=$!
    waited=0
    while ! grep -q watching /tmp/"$name".err && kill -0 "$pid" 2>/dev/null \
        && [ "$waited" -lt "$READY_BUDGET" ]; do
        sleep 1
        waited=$((waited + 1))
    done
    sayp "$name ready_after=${waited}s"
    if grep -q watching /tmp/"$name".err; then
        sayp "$name timers_refused=$(grep -c 'refused BPF timers' /tmp/"$name".err)"
        if [ "$name" = exit ]; then
            # An unwatched syscall runs no Vigil program: 2×100000 read/write calls by dd
            # (neither is in the default rules' interest set). The control: 1000 opens by one
            # cat (openat is watched) must raise the run count by at least 1000, so a count
            # that does not move (stats off, programs not attached) cannot pass as "none".
            # Counted with the exit tracepoints, whose per-call program the agent holds: a
            # fexit stub's descriptor is closed once it is attached (its link keeps it), so
            # its runs are in no fdinfo of the agent (under `auto`, 1000 opens showed 14).
            before=$(run_counts "$pid")
            dd if=/dev/zero of=/dev/null bs=1 count=100000 2>/dev/null
            dd_exit=$?
            after=$(run_counts "$pid")
            sayp "$name unwatched_syscalls=200000 bpf_runs=$((after - before)) dd_exit=$dd_exit"
            files=$(yes /etc/hostname | head -n 1000)
            before=$(run_counts "$pid")
            # shellcheck disable=SC2086 # one argument per line of $files
            cat $files >/dev/null
            cat_exit=$?
            after=$(run_counts "$pid")
            sayp "$name watched_syscalls=1000 watched_bpf_runs=$((after - before)) cat_exit=$cat_exit"
        fi
        timeout -k 10 "$STEP_BUDGET" /vigil generate run "$actions" --sleep 0s >/tmp/"$name".gen 2>&1
        gen=$?
        [ "$gen" = 124 ] && sayp "$name generate_timeout=1"
        sayp "$name generate_exit=$gen"
        sleep 3
    elif kill -0 "$pid" 2>/dev/null; then
        sayp "$name ready_timeout=1"
    fi
    # SIGTERM drains and exits; an agent still there after the budget is killed.
    kill -TERM "$pid" 2>/dev/null
    (sleep "$TERM_BUDGET" && kill -KILL "$pid" 2>/dev/null && sayp "$name term_timeout=1") &
    dog=$!
    wait "$pid"
    rc=$?
    kill "$dog" 2>/dev/null
    wait "$dog" 2>/dev/null
    sayp "$name exit=$rc"
    emit "$name.alerts" /tmp/"$name".alerts
    emit "$name.err" /tmp/"$name".err
    emit "$name.gen" /tmp/"$name".gen
    [ -f /tmp/"$name".cap ] && emit "$name.cap" /tmp/"$name".cap
}

# run_phase NAME VIGIL-RUN-ARGS…: the actions under `vigil run`.
run_phase() {
    name=$1
    shift
    wanted "$name" || return 0
    sayp "$name start"
    timeout -k 10 "$STEP_BUDGET" /vigil run --json --alerts /tmp/"$name".alerts "$@" -- \
        /vigil generate run "$ACTIONS" --sleep 0s >/tmp/"$name".gen 2>/tmp/"$name".err
    rc=$?
    [ "$rc" = 124 ] && sayp "$name run_timeout=1"
    sayp "$name exit=$rc"
    emit "$name.alerts" /tmp/"$name".alerts
    emit "$name.err" /tmp/"$name".err
    emit "$name.gen" /tmp/"$name".gen
}

say "guest kernel $(uname -r)"
echo 1 >/proc/sys/kernel/bpf_stats_enabled 2>/dev/null
say "bpf_stats_enabled=$(cat /proc/sys/kernel/bpf_stats_enabled 2>/dev/null)"

# `vigil.phases=stall` (the stall check of crates/cli/tests/e2e/kernels.rs): one phase line, then
# nothing, however fast the guest boots, so that boot.sh must stop it as stalled.
if [ "$phases" = stall ]; then
    sayp "stall start"
    while :; do sleep 60; done
fi

# `auto` and `exit` perform the same actions and write captures: the host compares the two
# event streams (fexit against the exit tracepoints) and replays each capture.
# `--stats`: the wakeup counters (the host checks who wakes the reader in each hook).
watch_phase auto "$ACTIONS" -w /tmp/auto.cap --stats
watch_phase falco "$ACTIONS" -r /rules/falco_rules.yaml
watch_phase exit "$ACTIONS" --syscall-hook exit -w /tmp/exit.cap --stats
watch_phase tracepoint '^syscall\.(CreateSymlinkOverSensitiveFiles|ReadSensitiveFileUntrusted)$' \
    --syscall-hook tracepoint
watch_phase raw '^syscall\.(CreateSymlinkOverSensitiveFiles|ReadSensitiveFileUntrusted)$' \
    --syscall-hook raw --stats
run_phase run
# --stats: Falco's container rules cannot match where Vigil runs, so the workload starts under
# the narrower filter and the tracer arms the full one in the process that calls setns
# (ChangeNamespace): `widened=` says the injected seccomp(2) worked.
run_phase run-falco -r /rules/falco_rules.yaml --stats

# A capture written on another architecture (the host's, initramfs.sh's CAPTURE) replayed
# here: the host replays the same file and compares.
if [ -f /captures/host.cap ] && wanted replay; then
    sayp "replay start"
    timeout -k 10 "$STEP_BUDGET" /vigil replay --json /captures/host.cap >/tmp/replay.alerts 2>/tmp/replay.err
    sayp "replay exit=$?"
    emit replay.alerts /tmp/replay.alerts
    emit replay.err /tmp/replay.err
fi

say "guest done"
sync
echo 1 >/proc/sys/kernel/sysrq
echo o >/proc/sysrq-trigger
sleep 10

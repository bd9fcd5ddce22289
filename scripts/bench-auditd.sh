#!/bin/sh
# auditd as the exec-rate bench's comparison agent: the field's configuration (a rule on every
# execve/execveat, the RAW log format, written to a file), in the foreground until SIGTERM.
#
#   vigil bench exec-rate --rates 100,400,1600 --agent watch \
#       --agent "$PWD/scripts/bench-auditd.sh" --ready-line 'bench-auditd: ready' \
#       --watch-proc vigil --watch-proc auditd --watch-proc kauditd
#
# Its CPU is in the report's `auditd` and `kauditd` columns (the "agent CPU" column is this
# shell's, which only waits). At SIGTERM/SIGINT it stops auditd and deletes the rule.
#
# WARNING: once audit has been enabled, the kernel keeps syscall auditing on (a slower path
# for every process) until reboot, whatever is deleted afterwards: run it last, on a machine
# nobody else measures on (BENCHMARKS.md, "CPU at fixed exec rates"). auditd must be
# installed without being started (`docs/bench/README.md`).
#
# Environment: VIGIL_AUDITD_DIR (default /tmp/vigil-bench-auditd): the configuration and log.
set -eu

dir=${VIGIL_AUDITD_DIR:-/tmp/vigil-bench-auditd}
key=vigil-bench-exec
mkdir -p "$dir"
chmod 700 "$dir"

cat >"$dir/auditd.conf" <<EOF
local_events = yes
write_logs = yes
log_file = $dir/audit.log
log_group = root
log_format = RAW
flush = INCREMENTAL_ASYNC
freq = 50
max_log_file = 256
num_logs = 2
max_log_file_action = ROTATE
priority_boost = 4
disp_qos = lossy
name_format = NONE
space_left = 75
space_left_action = IGNORE
admin_space_left = 50
admin_space_left_action = IGNORE
disk_full_action = IGNORE
disk_error_action = SYSLOG
tcp_listen_queue = 5
tcp_max_per_addr = 1
tcp_client_max_idle = 0
EOF

pid=
# Stops auditd (if it runs), deletes the rule, exits with $1 (default 0).
stop() {
	trap - TERM INT
	if [ -n "$pid" ]; then
		kill -TERM "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	fi
	auditctl -d always,exit -F arch=b64 -S execve -S execveat -k "$key" >/dev/null 2>&1 || true
	exit "${1:-0}"
}
trap stop TERM INT

# -n: no fork (auditd stays this shell's child); -c: the configuration directory.
auditd -n -c "$dir" &
pid=$!
# auditd enables audit when it starts; the rule is added once it runs (a rule without a
# daemon would fill the kernel's backlog).
tries=0
until auditctl -s 2>/dev/null | grep -qx "pid $pid"; do
	tries=$((tries + 1))
	if [ "$tries" -gt 100 ] || ! kill -0 "$pid" 2>/dev/null; then
		echo "bench-auditd: auditd did not register with the kernel" >&2
		stop 1
	fi
	sleep 0.1
done
auditctl -a always,exit -F arch=b64 -S execve -S execveat -k "$key" >/dev/null
echo "bench-auditd: ready (auditd pid $pid, log $dir/audit.log, RAW)" >&2
# auditd ends only when stopped (the trap); on its own, it failed.
if wait "$pid"; then stop 0; else stop 1; fi

#!/bin/bash
# Per-loop ptrace stop counts of `vigil run` on the UnixBench-style workloads (deterministic
# enough to compare builds and rule sets without a quiet machine; BENCHMARKS.md, issue 14).
#
# usage: scripts/run-stops.sh VIGIL [vigil run options…]
#   e.g. scripts/run-stops.sh target/release/vigil -r ../shared/falco-rules/falco_rules.yaml
# env: TESTS (default syscall,pipe,context1,spawn,execl,fstime,shell1), DURATION (s, default 2)
# Prints one Markdown row per test: stops, seccomp stops, exit stops, skipped exits per loop.
set -eu
vigil=$(readlink -f "$1")
shift
tests=${TESTS:-syscall,pipe,context1,spawn,execl,fstime,shell1}
duration=${DURATION:-2}
dir=$(mktemp -d /tmp/vigil-stops.XXXXXX)
chmod 0777 "$dir"
trap 'rm -rf "$dir"' EXIT
echo "| test | loops | stops/loop | seccomp/loop | exit/loop | skipped exits/loop |"
echo "|---|---|---|---|---|---|"
for t in ${tests//,/ }; do
    out=$(cd "$dir" && "$vigil" run --stats "$@" -- \
        "$vigil" bench worker --duration "$duration" --dir "$dir" "$t" 2>&1 >"$dir/result.json")
    loops=$(sed -n 's/.*"iterations":\([0-9]*\).*/\1/p' "$dir/result.json")
    stat() { echo "$out" | sed -n "s/.* $1=\([0-9]*\).*/\1/p" | tail -1; }
    awk -v t="$t" -v n="$loops" -v s="$(stat stops)" -v sc="$(stat seccomp_stops)" \
        -v e="$(stat exit_stops)" -v k="$(stat skipped_exits)" \
        'BEGIN { printf "| %s | %d | %.2f | %.2f | %.2f | %.2f |\n", t, n, s/n, sc/n, e/n, k/n }'
done

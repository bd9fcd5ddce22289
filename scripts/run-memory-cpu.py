#!/usr/bin/env python3
# Usage: scripts/run-memory-cpu.py VIGIL RULES N ROUNDS [PATH]   (BENCHMARKS.md, "vigil run: memory reads")
# CPU time (user+sys of vigil run and the workload, from RUSAGE_CHILDREN) of N open+close of
# PATH under each --memory-access method and natively; rounds interleaved; medians.
import resource, subprocess, sys, time, statistics
V, R, N, ROUNDS = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
PATH = sys.argv[5] if len(sys.argv) > 5 else "/etc/hostname"
loop = f"import os\nfor i in range({N}): os.close(os.open({PATH!r}, os.O_RDONLY))\n"
configs = [("native", [])] + [(m, [V, "run", "-r", R, "--memory-access", m, "--"])
                              for m in ("process_vm_readv", "ptrace", "proc-mem")]
res = {c: [] for c, _ in configs}
for _ in range(ROUNDS):
    for name, prefix in configs:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.monotonic()
        subprocess.run(prefix + ["python3", "-c", loop], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        res[name].append(((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall))
base = statistics.median(c for c, _ in res["native"])
print(f"{N} open+close of a {len(PATH)}-byte path per run, {ROUNDS} rounds interleaved, medians")
print("| configuration | CPU s (user+sys) | wall s | extra CPU per open vs native |")
print("|---|---|---|---|")
for name, _ in configs:
    cpu = statistics.median(c for c, _ in res[name])
    wall = statistics.median(w for _, w in res[name])
    extra = "-" if name == "native" else f"{(cpu - base) / N * 1e6:.1f} µs"
    print(f"| {name} | {cpu:.3f} | {wall:.3f} | {extra} |")

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
//
// The per-syscall fexit stubs of HOOK_FEXIT (see vigil.bpf.c). A BPF trampoline needs a program
// loaded for its target function, so each watched syscall `__x64_sys_X` gets one of these
// stubs (user space sets its target before load and loads only the stubs it needs); each
// tail-calls the capture program user space puts in slot 0 of this object's `sys_progs`:
// `vigil_sys_fexit` or `vigil_sys_fexit1`, the one loaded for the stubs' prototype (a tail
// call needs the same BTF prototype on both sides; see vigil.bpf.c). Every `__x64_sys_X`
// takes `const struct pt_regs *` and returns `long`, so the capture program sees the same
// context whatever the syscall. The objects of one prototype share nothing: the map is
// created per object and lives as long as its stubs.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

// The target compiled in (user space sets each stub's own before load).
#if defined(__TARGET_ARCH_arm64)
#define SYS_OPENAT "__arm64_sys_openat"
#else
#define SYS_OPENAT "__x64_sys_openat"
#endif

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_PROG_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} sys_progs SEC(".maps");

#define STUB(n)                                                                                  \
	SEC("fexit/" SYS_OPENAT)                                                                \
	int vigil_stub_##n(void *ctx)                                                            \
	{                                                                                        \
		bpf_tail_call(ctx, &sys_progs, 0);                                               \
		return 0;                                                                        \
	}

#define STUB8(n) STUB(n##0) STUB(n##1) STUB(n##2) STUB(n##3) STUB(n##4) STUB(n##5) STUB(n##6) STUB(n##7)

STUB8(0)
STUB8(1)
STUB8(2)
STUB8(3)
STUB8(4)
STUB8(5)
STUB8(6)
STUB8(7)

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
//
// Vigil's kernel side: per-syscall tracepoints (attached by user space only for the syscalls in
// the interest set) and the scheduler's process-lifecycle tracepoints. One record per completed
// syscall, written to this CPU's ring buffer; user space blocks on the rings (epoll) and is
// woken only for what needs it soon (`wake_reason`).
//
// Record layout (little-endian): struct rec_hdr, then blobs, each `struct blob_hdr` + `len`
// bytes, 8-byte aligned. Kinds, tags and flags: vigil_record.h (crates/ebpf/build.rs generates
// the Rust side's constants from it); crates/ebpf/src/decode.rs reads the records.

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "vigil_record.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

// Argument capture kinds (the `spec` map, filled by user space per syscall number).
#define CAP_NONE 0
#define CAP_STR 1      // NUL-terminated user string, up to PATH_MAX
#define CAP_SOCKADDR 2 // user sockaddr, length in the next argument
#define CAP_MEM8 3     // 8 bytes of user memory (pipe fds, clone_args.flags)
#define CAP_MEM24 4    // 24 bytes (struct open_how)
#define CAP_STR_SHORT 5 // short user string (names), up to 256 bytes

#define TUPLE_NONE 0
#define TUPLE_ARG0 1 // socket fd in args[0]
#define TUPLE_RES 2  // socket fd is the return value

#define MAX_PATH 4096
#define MAX_SHORT 256
#define MAX_ARGS_AREA 4096
#define MAX_SOCKADDR 128
#define MAX_IOV 16 // iovecs summed for a msghdr's size (more: flagged truncated)
#define MAX_DEPTH 32
#define MAX_COMPONENT 256
#define OFF_MASK 32767
#define SCRATCH_SIZE 49152

#define DROP_BUFFER_FULL 0
#define DROP_READ_FAULT 1
#define DROP_STASH_FULL 2
// Not a loss: failed calls filtered out because nothing can use them (`skip_failed`).
#define FILTERED_FAILED 3
// Not a loss: records committed to a ring buffer (user space compares what it processed and
// counted as dropped with this count, so a record lost between the ring and the engine shows).
#define RECORDS_SUBMITTED 4
// Not a loss: state-only descriptor operations folded away, never recorded (`hold_state_op`).
#define FILTERED_STATE 5

struct rec_hdr {
	__u64 ts;
	__u32 tid;
	__u32 pid;
	__u16 kind;
	__u16 nr;
	__u32 len; // bits 0..15: record length (< SCRATCH_SIZE); 16..31: the CPU (hdr_set_len)
	__s64 res;
	__u64 args[6];
};

struct blob_hdr {
	__u8 tag;
	__u8 flags;
	__u16 pad;
	__u32 len;
};

struct tuple {
	__u16 family;
	__u8 l4proto;
	__u8 pad;
	__u16 sport; // host order
	__u16 dport; // network order
	__u8 saddr[16];
	__u8 daddr[16];
};

struct exec_info {
	__u32 tid, pid, ptid, uid, gid, euid, egid, loginuid, tty, old_pid;
	__u64 cap_inheritable, cap_permitted, cap_effective;
	__u64 exe_ino, exe_ctime, exe_mtime;
	__u32 vtid, vpid;
	__u32 exe_flags; // EXE_* bits
	__u32 pad;
};

// exec_info.exe_flags bits (the `exe_flags` event parameter, vigil_event::table::exe_flags).
#define EXE_WRITABLE 1
#define EXE_UPPER_LAYER 2
#define EXE_FROM_MEMFD 4

#define OVERLAYFS_SUPER_MAGIC 0x794c7630

struct fork_info {
	__u64 flags;
	__u32 child_tid, child_pid, child_vtid, child_vpid;
};

struct exit_info {
	__s32 exit_code;
	__u32 pad;
};

struct spec {
	__u8 cap[6];
	__u8 tuple;
	__u8 msg; // 1: args[1] is a `struct user_msghdr` (size and msg_name captured)
};

struct msg_info {
	__u64 size;
};

// The pathname argument of an execveat in flight (the new image replaces the memory it was
// in before sched_process_exec runs), copied at sys_enter_execveat.
struct exec_name {
	__s64 n; // bpf_probe_read_user_str's result
	__u8 s[MAX_PATH + 8];
};

struct stash {
	__u64 args[6];
	__u32 nr;
	__u32 pad;
};

// Per CPU: the DROP_* counters, FILTERED_FAILED (filtering by design, not a loss) and
// RECORDS_SUBMITTED.
struct drops {
	__u64 n[6];
};

// Set before load: the agent's thread group, never captured.
const volatile __u32 agent_tgid = 0;

// Set before load: how syscalls are hooked. HOOK_FEXIT: a BPF trampoline (fexit) on each
// watched syscall's implementation `__x64_sys_X`, whose stub tail-calls `vigil_sys_fexit`
// (arguments and return value in one program; no per-thread syscall-work flag, so unwatched
// syscalls run no BPF and stay on the fast path). HOOK_TRACEPOINT: the per-syscall
// tracepoints `syscalls/sys_{enter,exit}_X` (any enabled one puts every thread on the
// syscall slow path). HOOK_RAW: the raw BTF tracepoint `sys_exit` alone, filtered by
// `hooked_nrs` in the kernel (arguments from the saved user registers, result from the
// tracepoint; as HOOK_TRACEPOINT, every syscall takes the slow path).
// HOOK_EXIT: the per-syscall exit tracepoints alone, arguments from the saved user registers
// (no enter program, so the kernel's enter-side tracepoint work is not registered at all,
// except for execveat, whose pathname is kept at entry).
#define HOOK_FEXIT 0
#define HOOK_TRACEPOINT 1
#define HOOK_RAW 2
#define HOOK_EXIT 3
const volatile __u32 hook_mode = HOOK_FEXIT;

// Set before load, for `vigil bench`: FLOOR_NONE captures; FLOOR_NOP runs programs that
// return at once, at the same attach points; FLOOR_RING writes only a record header.
#define FLOOR_NONE 0
#define FLOOR_NOP 1
#define FLOOR_RING 2
const volatile __u32 floor_mode = FLOOR_NONE;

struct ringbuf_inner {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY_OF_MAPS);
	__uint(max_entries, 1); // set to the number of CPUs before load
	__type(key, __u32);
	__array(values, struct ringbuf_inner);
} ringbufs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, struct spec);
} specs SEC(".maps");

// A syscall's entry arguments, kept in the calling task until its exit: task-local storage
// (a pointer in the task: no hashing, nothing to delete, freed with the task; measured ~70 ns
// cheaper per watched syscall than a hash map keyed by tid). `nr` is NO_STASH when nothing is
// pending.
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct stash);
} stashes SEC(".maps");

#define NO_STASH 0xffffffffu

static __always_inline struct stash *stash_of(struct task_struct *task)
{
	struct stash *st = bpf_task_storage_get(&stashes, task, 0, 0);
	return st && st->nr != NO_STASH ? st : 0;
}

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, struct exec_name);
} exec_names SEC(".maps");

// Syscall numbers captured through raw_syscalls (they have no per-syscall tracepoint on this
// kernel): 1 = captured. The raw programs are attached only while one is watched.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, __u8);
} fallback_nrs SEC(".maps");

// Syscall numbers whose fexit stub is attached (1), for the fork program under HOOK_FEXIT.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, __u8);
} hooked_nrs SEC(".maps");

// Syscall numbers whose failed calls (result < 0) are of no use (1): no rule watching the
// syscall may match a failure, the state engine learns nothing from one, and no capture is
// written. Such a call is counted (FILTERED_FAILED) and not recorded. 0 (the default): every
// call is recorded.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, __u8);
} skip_failed SEC(".maps");

// Per syscall number (the open family), set by user space when the rules may match a failed
// call only if its path as passed contains some bytes (`BpfOptions::failure_needles`:
// Falco's `directory_traversal` needs "../"): the bytes (`len` of them, 0: no filter) and the
// argument holding the path. A failed call whose copied path lacks them is counted
// (FILTERED_FAILED) and not recorded (`failure_wanted`).
#define NEEDLE_MAX 16
struct failure_needle {
	__u8 b[NEEDLE_MAX];
	__u32 len;
	__u32 arg;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, struct failure_needle);
} failure_needles SEC(".maps");

struct scratch_buf {
	__u8 b[SCRATCH_SIZE];
};

// One record under construction per CPU (indexed by CPU: too large for a per-CPU map).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1); // set to the number of CPUs before load
	__type(key, __u32);
	__type(value, struct scratch_buf);
} scratch SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct drops);
} drop_counts SEC(".maps");

// Set before load (user space: `BpfOptions::wake_bytes`, half the reorder window): see
// `wake_reason`.
const volatile __u64 wake_bytes = 1 << 19;
const volatile __u64 wake_gap_ns = 1000000;

// Event types a record of which wakes the reader (1): those an enabled rule watches (set by
// user space with the interest set), by syscall number; WAKE_KEY_PROCEXIT for procexit.
#define WAKE_KEY_PROCEXIT 512
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 513);
	__type(key, __u32);
	__type(value, __u8);
} wake_types SEC(".maps");

// Per CPU: the time of the last record this CPU wrote with a wakeup, and the wakeups by
// reason (read by user space: `BpfSource::wakeups`).
#define WAKE_NONE 0
#define WAKE_WATCHED 1 // a type an enabled rule watches
#define WAKE_FILLED 2  // the ring held `wake_bytes`
struct wake_state {
	__u64 last;
	__u64 watched;
	__u64 filled;
	__u64 deferred; // lifecycle records of watched types left to the timer (`defer_wake`)
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct wake_state);
} wake_states SEC(".maps");

// Path components collected leaf first while walking up (too big for the BPF stack).
struct names {
	const unsigned char *p[MAX_DEPTH];
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct names);
} path_names SEC(".maps");

static __always_inline void count_drop(int reason)
{
	__u32 zero = 0;
	struct drops *d = bpf_map_lookup_elem(&drop_counts, &zero);
	if (d && reason >= 0 && reason < 4)
		d->n[reason & 3] += 1;
}

// One more state-only operation folded away (FILTERED_STATE).
static __always_inline void count_folded(void)
{
	__u32 zero = 0;
	struct drops *d = bpf_map_lookup_elem(&drop_counts, &zero);
	if (d)
		d->n[FILTERED_STATE] += 1;
}

// One more record committed to a ring buffer (RECORDS_SUBMITTED).
static __always_inline void count_submitted(void)
{
	__u32 zero = 0;
	struct drops *d = bpf_map_lookup_elem(&drop_counts, &zero);
	if (d)
		d->n[RECORDS_SUBMITTED] += 1;
}

// Whether the failed call `nr` (result `ret`) is filtered out here (and counted).
static __always_inline int skip_failure(__u32 nr, __s64 ret)
{
	if (ret >= 0)
		return 0;
	__u32 key = nr & 511;
	__u8 *skip = bpf_map_lookup_elem(&skip_failed, &key);
	if (!skip || !*skip)
		return 0;
	count_drop(FILTERED_FAILED);
	return 1;
}

static __always_inline __u8 *scratch_buf(void)
{
	__u32 cpu = bpf_get_smp_processor_id();
	return bpf_map_lookup_elem(&scratch, &cpu);
}

static __always_inline int excluded(void)
{
	return agent_tgid != 0 && (bpf_get_current_pid_tgid() >> 32) == agent_tgid;
}

// The same for the current task, `task` (bpf_get_current_task_btf()): a direct load, where a
// helper call costs a call and a return (a return thunk on CPUs mitigated against SRSO).
static __always_inline int excluded_task(const struct task_struct *task)
{
	return agent_tgid != 0 && (__u32)task->tgid == agent_tgid;
}

static __always_inline __u32 align8(__u32 off)
{
	return (off + 7) & ~7u;
}

// Starts a blob at `off`; returns the offset of its data.
static __always_inline __u32 blob_begin(__u8 *buf, __u32 off)
{
	return (off + sizeof(struct blob_hdr)) & OFF_MASK;
}

// Closes the blob started at `off` with `len` data bytes; returns the next offset.
static __always_inline __u32 blob_end(__u8 *buf, __u32 off, __u8 tag, __u8 flags, __u32 len)
{
	struct blob_hdr *h = (struct blob_hdr *)&buf[off & OFF_MASK];
	h->tag = tag;
	h->flags = flags;
	h->pad = 0;
	h->len = len;
	return align8(off + sizeof(struct blob_hdr) + len) & OFF_MASK;
}

// A user string of at most `max` bytes (NUL excluded): truncation and faults flagged.
static __always_inline __u32 put_user_str(__u8 *buf, __u32 off, __u8 tag, const void *src,
					  __u32 max)
{
	__u32 data = blob_begin(buf, off);
	long n = bpf_probe_read_user_str(&buf[data], max + 1, src);
	__u8 flags = 0;
	__u32 len = 0;
	if (n < 0) {
		flags = BLOB_FAULT;
		count_drop(DROP_READ_FAULT);
	} else if (n > max) {
		flags = BLOB_TRUNCATED;
		len = max;
	} else if (n > 0) {
		len = n - 1;
	}
	return blob_end(buf, off, tag, flags, len);
}

static __always_inline __u32 put_kernel_str(__u8 *buf, __u32 off, __u8 tag, const void *src,
					    __u32 max)
{
	__u32 data = blob_begin(buf, off);
	long n = bpf_probe_read_kernel_str(&buf[data], max + 1, src);
	__u8 flags = 0;
	__u32 len = 0;
	if (n < 0) {
		flags = BLOB_FAULT;
	} else if (n > max) {
		flags = BLOB_TRUNCATED;
		len = max;
	} else if (n > 0) {
		len = n - 1;
	}
	return blob_end(buf, off, tag, flags, len);
}

static __always_inline __u32 put_user_mem(__u8 *buf, __u32 off, __u8 tag, const void *src,
					  __u32 len, __u32 max)
{
	__u32 data = blob_begin(buf, off);
	__u8 flags = 0;
	if (len > max) {
		len = max;
		flags = BLOB_TRUNCATED;
	}
	__u64 n = len;
	// Bound the size in the very register passed to the helper (clang may otherwise clamp a
	// copy and pass another).
	asm volatile("%0 &= 8191" : "+r"(n));
	if (n > 0 && bpf_probe_read_user(&buf[data], n, src) < 0) {
		flags = BLOB_FAULT;
		len = 0;
		count_drop(DROP_READ_FAULT);
	}
	return blob_end(buf, off, tag, flags, len);
}

static __always_inline __u32 put_kernel_mem(__u8 *buf, __u32 off, __u8 tag, const void *src,
					    __u32 len)
{
	__u32 data = blob_begin(buf, off);
	__u64 n = len;
	asm volatile("%0 &= 1023" : "+r"(n));
	if (bpf_probe_read_kernel(&buf[data], n, src) < 0)
		return blob_end(buf, off, tag, BLOB_FAULT, 0);
	return blob_end(buf, off, tag, 0, len);
}

// Whether a record wakes the reader (BPF_RB_FORCE_WAKEUP) and why: its type is one an enabled
// rule watches (`wake_types`), or this CPU's ring already holds `wake_bytes` (records of the
// types only the state engine needs: they ride along with the next wakeup, or are read at the
// reader's bounded timeout, unless they pile up). Never within `wake_gap_ns` of this CPU's last
// wakeup: the reader holds the record that woke it for its reorder window (2 ms, twice the
// gap) and reads every ring again when the window ends, so a record committed within the gap is
// read then, at no cost of its own. Under load a CPU so wakes the reader at most once per gap,
// however many records it writes; on an idle host, only the records a rule may alert on wake
// it at all. `*state` is this CPU's slot, for `woke` once the record is written.
static __always_inline int wake_reason(void *rb, const struct rec_hdr *h, __u32 len,
				       struct wake_state **state, int held)
{
	__u32 zero = 0;
	struct wake_state *st = bpf_map_lookup_elem(&wake_states, &zero);
	*state = st;
	if (!st || h->ts - st->last < wake_gap_ns)
		return WAKE_NONE;
	__u32 key = h->kind == REC_EXIT ? WAKE_KEY_PROCEXIT : (__u32)(h->nr & 511);
	__u8 *watched = held ? 0 : bpf_map_lookup_elem(&wake_types, &key);
	if (watched && *watched)
		return WAKE_WATCHED;
	if (bpf_ringbuf_query(rb, BPF_RB_AVAIL_DATA) + len >= wake_bytes)
		return WAKE_FILLED;
	return WAKE_NONE;
}

static __always_inline __u64 wake_flags(int reason)
{
	return reason == WAKE_NONE ? BPF_RB_NO_WAKEUP : BPF_RB_FORCE_WAKEUP;
}

// A record written with a wakeup starts this CPU's gap (the record's own time: the reader
// holds it, and reads the rings again, until that time plus the reorder window), and counts.
static __always_inline void woke(int reason, struct wake_state *st, __u64 ts)
{
	if (!st || reason == WAKE_NONE)
		return;
	st->last = ts;
	if (reason == WAKE_WATCHED)
		st->watched += 1;
	else
		st->filled += 1;
}

// A state-only descriptor operation (close, dup*, fcntl(F_DUPFD*)) of a thread that alone
// owns its descriptor table, held back instead of recorded (see `hold_state_op`): the record
// as it would have been written, and whether one is held.
struct held_op {
	struct rec_hdr h;
	__u32 valid;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct held_op);
} held_ops SEC(".maps");

// Syscall numbers (close, dup, dup2, dup3, fcntl) captured only for the state engine's
// descriptor table (1, set by user space): no enabled rule watches them and no capture is
// written. Their records may be held back and folded (`hold_state_op`).
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, __u8);
} state_only SEC(".maps");

// Per syscall number (dup, dup2, dup3) that an enabled rule watches but only with a result
// among a few (Falco's `evt.rawres in (0, 1, 2)`), set by user space when its failures are
// unused too (`BpfOptions::result_masks`): the results 0..63 a rule may match (bit n for
// result n). A successful call with another result is treated as state-only
// (`hold_state_op`); `active` 0: no filter.
struct result_filter {
	__u64 allowed;
	__u32 active;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 512);
	__type(key, __u32);
	__type(value, struct result_filter);
} result_filters SEC(".maps");

// ----- deferred wakeups (records of tracing programs) -----

// Set before load (user space: the reorder window and its slack, `BpfOptions::reorder_window`;
// 0: off): how long after a record of a watched type written by a tracing program (a
// process-lifecycle record: fork, exec, exit; a syscall's under fexit or `raw`) the reader is
// woken for it, by a timer, instead of at once. The reader holds a record for its
// reorder window and reads the rings again half a window later (`next_batch_until`): woken at
// once, it wakes twice for a process that forks, executes and exits within that time (for the
// first record, then for the window's end); woken by the timer, once. Only tracing programs
// (tp_btf, fexit) defer: the kernel refuses timers in tracepoint programs.
const volatile __u64 defer_wake_ns = 0;

#ifndef CLOCK_MONOTONIC
#define CLOCK_MONOTONIC 1
#endif

// The one timer: armed by the first deferred record, not again until it fired (a later record
// is read at that wakeup, or held and read when its own window ends). `fired` counts its
// wakeups (read by user space: `BpfSource::wakeups`).
struct defer_timer {
	struct bpf_timer timer;
	__u32 armed;
	__u32 ready; // bpf_timer_init and its callback done
	__u64 fired;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct defer_timer);
} defer_timers SEC(".maps");

// A header-only record written with a wakeup, to wake the reader (discarded by user space).
static __always_inline int wake_record(void *rb)
{
	struct rec_hdr h = {};
	h.ts = bpf_ktime_get_boot_ns();
	h.kind = REC_WAKE;
	h.len = sizeof(h);
	return bpf_ringbuf_output(rb, &h, sizeof(h), BPF_RB_FORCE_WAKEUP);
}

static int defer_fired(void *map, __u32 *key, struct defer_timer *d)
{
	// Cleared before the wakeup is written: a record whose writer still saw the timer armed
	// was committed before this (the ring's commit is a full barrier), so the wakeup below
	// finds it; one that sees it cleared arms the timer again.
	d->armed = 0;
	__u32 cpu = bpf_get_smp_processor_id();
	void *rb = bpf_map_lookup_elem(&ringbufs, &cpu);
	if (rb && wake_record(rb) == 0)
		d->fired += 1;
	return 0;
}

// After a record committed without a wakeup: whether the timer will wake the reader for it
// (armed now, or already). 0: it could not be armed, so the caller wakes the reader at once.
static __always_inline int defer_wake(void)
{
	__u32 zero = 0;
	struct defer_timer *d = bpf_map_lookup_elem(&defer_timers, &zero);
	if (!d)
		return 0;
	if (d->armed)
		return 1;
	if (!d->ready) {
		// Another CPU may initialise it at the same time: its -EBUSY is harmless.
		bpf_timer_init(&d->timer, &defer_timers, CLOCK_MONOTONIC);
		if (bpf_timer_set_callback(&d->timer, defer_fired) != 0)
			return 0;
		d->ready = 1;
	}
	d->armed = 1;
	if (bpf_timer_start(&d->timer, defer_wake_ns, 0) != 0) {
		d->armed = 0;
		return 0;
	}
	return 1;
}

// `held`: a record held back (`hold_state_op`), which never wakes the reader for its own
// type (a rule may watch it, but cannot match it): it goes out ahead of its thread's next
// record, which wakes the reader if that one should. `deferrable`: a tracing program's record
// (lifecycle, or a syscall's under fexit or `raw`), whose wakeup for a watched type the timer
// gives (`defer_wake_ns`); a constant at every call, so the tracepoint programs (where timers
// are refused) have no timer code at all.
static __always_inline void emit_raw(const __u8 *buf, __u32 len, int held, int deferrable)
{
	__u32 cpu = bpf_get_smp_processor_id();
	void *rb = bpf_map_lookup_elem(&ringbufs, &cpu);
	if (!rb) {
		count_drop(DROP_BUFFER_FULL);
		return;
	}
	if (len > SCRATCH_SIZE)
		return;
	const struct rec_hdr *h = (const struct rec_hdr *)buf;
	struct wake_state *st;
	int reason = wake_reason(rb, h, len, &st, held);
	int defer = deferrable && defer_wake_ns && reason == WAKE_WATCHED;
	__u64 flags = defer ? BPF_RB_NO_WAKEUP : wake_flags(reason);
	if (bpf_ringbuf_output(rb, buf, len, flags) < 0) {
		count_drop(DROP_BUFFER_FULL);
		return;
	}
	count_submitted();
	if (defer) {
		if (defer_wake()) {
			// This CPU's gap starts as for a wakeup: the timer's comes later still.
			if (st) {
				st->last = h->ts;
				st->deferred += 1;
			}
			return;
		}
		wake_record(rb); // no timer: at once
	}
	woke(reason, st, h->ts);
}

// Writes the operation the current thread holds back, if any, stamped `ts`: the time of the
// record about to follow it (user space delivers records in time order, equal times in the
// order written, so the held one is applied just ahead of that record and the stream stays
// in order; its own time is not shown anywhere that matters: no rule watches it, or none can
// match it (`result_filters`), and no capture is written).
static __always_inline void flush_held_of(struct task_struct *task, __u64 ts)
{
	struct held_op *o = bpf_task_storage_get(&held_ops, task, 0, 0);
	if (o && o->valid) {
		o->valid = 0;
		o->h.ts = ts;
		emit_raw((const __u8 *)&o->h, sizeof(o->h), 1, 0);
	}
}

static __always_inline void flush_held(__u64 ts)
{
	flush_held_of(bpf_get_current_task_btf(), ts);
}

// Every record goes out after the operation its thread holds back. For the lifecycle
// programs: the wakeup is deferred (`defer_wake_ns`).
static __always_inline void emit(const __u8 *buf, __u32 len)
{
	flush_held(((const struct rec_hdr *)buf)->ts);
	emit_raw(buf, len, 0, 1);
}

// The same, written by the current task `task`; `deferrable` (a constant at every call): the
// caller is a program that may use the timer (BPF_PROG_TYPE_TRACING: fexit, tp_btf), not a
// tracepoint.
static __always_inline void emit_of(struct task_struct *task, const __u8 *buf, __u32 len,
				    int deferrable)
{
	flush_held_of(task, ((const struct rec_hdr *)buf)->ts);
	emit_raw(buf, len, 0, deferrable);
}

// The header of a record stamped `ts`.
static __always_inline void fill_hdr_at(struct rec_hdr *h, __u16 kind, __u16 nr, __s64 res,
					__u64 ts)
{
	__u64 id = bpf_get_current_pid_tgid();
	h->ts = ts;
	h->tid = (__u32)id;
	h->pid = id >> 32;
	h->kind = kind;
	h->nr = nr;
	h->res = res;
	// The CPU the record is written on: a program runs with migration disabled, so this is
	// the CPU the syscall completed on. Carried in the upper half of `len`.
	h->len = bpf_get_smp_processor_id() << 16;
}

// The same for the current task `task`, whose ids are read from it directly.
static __always_inline void fill_hdr_of(struct rec_hdr *h, const struct task_struct *task,
					__u16 kind, __u16 nr, __s64 res, __u64 ts)
{
	h->ts = ts;
	h->tid = (__u32)task->pid;
	h->pid = (__u32)task->tgid;
	h->kind = kind;
	h->nr = nr;
	h->res = res;
	h->len = bpf_get_smp_processor_id() << 16;
}

static __always_inline void fill_hdr(struct rec_hdr *h, __u16 kind, __u16 nr, __s64 res)
{
	fill_hdr_at(h, kind, nr, res, bpf_ktime_get_boot_ns());
}

// Sets the record length, keeping the CPU that fill_hdr put in the upper 16 bits.
static __always_inline void hdr_set_len(struct rec_hdr *h, __u32 len)
{
	h->len = (h->len & 0xffff0000) | (len & 0xffff);
}

static __always_inline struct file *fd_file(struct task_struct *task, __s64 fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	if (!fdt || fd < 0)
		return NULL;
	unsigned int max = BPF_CORE_READ(fdt, max_fds);
	if ((__u64)fd >= max)
		return NULL;
	struct file **arr = BPF_CORE_READ(fdt, fd);
	struct file *f = NULL;
	bpf_probe_read_kernel(&f, sizeof(f), &arr[fd]);
	return f;
}

// The inet tuple of socket `fd` (local in saddr/sport, remote in daddr/dport).
static __always_inline __u32 put_tuple(__u8 *buf, __u32 off, __s64 fd)
{
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	struct file *f = fd_file(task, fd);
	if (!f)
		return off;
	struct socket *sock = BPF_CORE_READ(f, private_data);
	if (!sock)
		return off;
	struct sock *sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return off;
	__u32 data = blob_begin(buf, off);
	struct tuple *t = (struct tuple *)&buf[data];
	__builtin_memset(t, 0, sizeof(*t));
	t->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (t->family != 2 && t->family != 10)
		return off;
	t->l4proto = BPF_CORE_READ(sk, sk_protocol);
	t->sport = BPF_CORE_READ(sk, __sk_common.skc_num);
	t->dport = BPF_CORE_READ(sk, __sk_common.skc_dport);
	if (t->family == 2) {
		bpf_probe_read_kernel(t->saddr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_probe_read_kernel(t->daddr, 4, &sk->__sk_common.skc_daddr);
	} else {
		bpf_probe_read_kernel(t->saddr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_probe_read_kernel(t->daddr, 16, &sk->__sk_common.skc_v6_daddr);
	}
	return blob_end(buf, off, TAG_TUPLE, 0, sizeof(*t));
}

// Path walks run under bpf_loop(): the verifier checks each callback once instead of every
// unrolled iteration (unrolled, the exec program exceeded the verifier's budget).

static __always_inline struct names *names_buf(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&path_names, &zero);
}

struct emit_ctx {
	__u32 data;
	__u32 pos;
	__u32 n;
	__u32 truncated;
};

static long emit_component(__u64 j, struct emit_ctx *c)
{
	if (j >= c->n)
		return 1;
	__u8 *buf = scratch_buf();
	struct names *names = names_buf();
	if (!buf || !names)
		return 1;
	if (c->pos > MAX_PATH - MAX_COMPONENT) {
		c->truncated = 1;
		return 1;
	}
	buf[(c->data + c->pos) & OFF_MASK] = '/';
	c->pos++;
	long r = bpf_probe_read_kernel_str(&buf[(c->data + c->pos) & OFF_MASK], MAX_COMPONENT,
					   names->p[(c->n - 1 - j) & (MAX_DEPTH - 1)]);
	if (r > 1)
		c->pos += r - 1;
	return 0;
}

// Writes the collected components (leaf first in `path_names`) as an absolute path.
static __always_inline __u32 put_components(__u8 *buf, __u32 off, __u8 tag, __u32 n,
					    __u8 flags)
{
	struct emit_ctx c = { .data = blob_begin(buf, off), .pos = 0, .n = n, .truncated = 0 };
	bpf_loop(MAX_DEPTH, emit_component, &c, 0);
	if (c.truncated)
		flags |= BLOB_TRUNCATED;
	__u32 pos = c.pos;
	if (pos == 0) {
		buf[c.data & OFF_MASK] = '/';
		pos = 1;
	}
	return blob_end(buf, off, tag, flags, pos & 8191);
}

struct walk_ctx {
	struct dentry *d;
	struct mount *mnt;
	__u32 n;
	__u32 truncated;
};

static long walk_dentry(__u64 i, struct walk_ctx *c)
{
	struct names *names = names_buf();
	if (!names)
		return 1;
	struct dentry *d = c->d;
	struct mount *mnt = c->mnt;
	struct dentry *parent = BPF_CORE_READ(d, d_parent);
	struct dentry *root = BPF_CORE_READ(mnt, mnt.mnt_root);
	if (d == root || d == parent) {
		struct mount *up = BPF_CORE_READ(mnt, mnt_parent);
		if (!up || up == mnt)
			return 1;
		c->d = BPF_CORE_READ(mnt, mnt_mountpoint);
		c->mnt = up;
		return 0;
	}
	if (c->n >= MAX_DEPTH) {
		c->truncated = 1;
		return 1;
	}
	names->p[c->n & (MAX_DEPTH - 1)] = BPF_CORE_READ(d, d_name.name);
	c->n++;
	c->d = parent;
	return 0;
}

// The absolute path of `path` (dentries up to each mount's root, then across mount points).
static __always_inline __u32 put_path(__u8 *buf, __u32 off, __u8 tag, const struct path *path)
{
	struct dentry *d = BPF_CORE_READ(path, dentry);
	struct vfsmount *vmnt = BPF_CORE_READ(path, mnt);
	if (!d || !vmnt)
		return off;
	struct walk_ctx c = {
		.d = d,
		.mnt = container_of(vmnt, struct mount, mnt),
		.n = 0,
		.truncated = 0,
	};
	bpf_loop(MAX_DEPTH + 8, walk_dentry, &c, 0);
	return put_components(buf, off, tag, c.n, c.truncated ? BLOB_TRUNCATED : 0);
}

// ----- kernel differences (CO-RE flavours: libbpf ignores the `___suffix` when it matches a
// flavour against the running kernel's types, and each `bpf_core_field_exists` is a constant
// fixed at load time, so the branch for other kernels is dead code the verifier never walks) -----

// overlayfs's inode, a module's type: a vmlinux.h holds it only where overlayfs was built in
// when it was generated (the x86 one; not the arm64 one), so the two fields used are declared
// here as a flavour (matched against `struct ovl_inode` of the running kernel's BTF).
struct ovl_inode___vigil {
	struct inode vfs_inode;
	struct dentry *__upperdentry;
} __attribute__((preserve_access_index));

// `kernfs_node.parent` became `__parent` in Linux 6.15 ("kernfs: Use RCU
// to access kernfs_node::parent"). Both are flavours, so that either vmlinux.h compiles (the
// arm64 one is 6.12's).
struct kernfs_node___pre615 {
	struct kernfs_node *parent;
} __attribute__((preserve_access_index));

struct kernfs_node___615 {
	struct kernfs_node *__parent;
} __attribute__((preserve_access_index));

static __always_inline struct kernfs_node *kn_parent(struct kernfs_node *kn)
{
	struct kernfs_node___615 *now = (struct kernfs_node___615 *)kn;
	if (bpf_core_field_exists(now->__parent))
		return BPF_CORE_READ(now, __parent);
	return BPF_CORE_READ((struct kernfs_node___pre615 *)kn, parent);
}

// An inode's change and modification times: `i_{c,m}time_sec`/`_nsec` since Linux 6.11 ("fs: switch
// timespec64 fields in inode to discrete integers"); before that `__i_ctime` (6.6) and
// `__i_mtime` (6.7) as a `struct timespec64`, and `i_ctime`/`i_mtime` before those.
struct inode___pre611 {
	struct timespec64 __i_ctime;
	struct timespec64 __i_mtime;
} __attribute__((preserve_access_index));

struct inode___pre66 {
	struct timespec64 i_ctime;
	struct timespec64 i_mtime;
} __attribute__((preserve_access_index));

static __always_inline __u64 ts64_ns(__s64 sec, long nsec)
{
	return (__u64)sec * 1000000000ull + (__u64)nsec;
}

static __always_inline __u64 inode_ctime_ns(struct inode *ino)
{
	if (bpf_core_field_exists(ino->i_ctime_sec))
		return ts64_ns(BPF_CORE_READ(ino, i_ctime_sec), BPF_CORE_READ(ino, i_ctime_nsec));
	struct inode___pre611 *v66 = (void *)ino;
	if (bpf_core_field_exists(v66->__i_ctime))
		return ts64_ns(BPF_CORE_READ(v66, __i_ctime.tv_sec),
			       BPF_CORE_READ(v66, __i_ctime.tv_nsec));
	struct inode___pre66 *old = (void *)ino;
	return ts64_ns(BPF_CORE_READ(old, i_ctime.tv_sec), BPF_CORE_READ(old, i_ctime.tv_nsec));
}

static __always_inline __u64 inode_mtime_ns(struct inode *ino)
{
	if (bpf_core_field_exists(ino->i_mtime_sec))
		return ts64_ns(BPF_CORE_READ(ino, i_mtime_sec), BPF_CORE_READ(ino, i_mtime_nsec));
	struct inode___pre611 *v67 = (void *)ino;
	if (bpf_core_field_exists(v67->__i_mtime))
		return ts64_ns(BPF_CORE_READ(v67, __i_mtime.tv_sec),
			       BPF_CORE_READ(v67, __i_mtime.tv_nsec));
	struct inode___pre66 *old = (void *)ino;
	return ts64_ns(BPF_CORE_READ(old, i_mtime.tv_sec), BPF_CORE_READ(old, i_mtime.tv_nsec));
}

// A capability set as 64 bits. `kernel_cap_t` is `{ u64 val; }` since Linux 6.3 ("capability:
// just use a 'u64' instead of a 'u32[2]' array") and `{ u32 cap[2];
// }` before: the same 8 bytes little-endian either way, so the field is read whole at its
// relocated offset.
#define CRED_CAPS(cred, field)                                                                  \
	({                                                                                      \
		__u64 __caps = 0;                                                               \
		bpf_core_read(&__caps, sizeof(__caps), &(cred)->field);                         \
		__caps;                                                                         \
	})

#define MAX_CGROUP_DEPTH 12

// The task's cgroup path in the unified hierarchy (`/system.slice/…`). Unrolled rather than a
// bpf_loop() callback: the kernel refused the program with the callback (EINVAL, no log).
static __always_inline __u32 put_cgroup(__u8 *buf, __u32 off, struct task_struct *task)
{
	struct names *names = names_buf();
	if (!names)
		return off;
	struct kernfs_node *kn = BPF_CORE_READ(task, cgroups, dfl_cgrp, kn);
	__u32 n = 0;
	__u8 flags = 0;
	#pragma unroll
	for (int i = 0; i < MAX_CGROUP_DEPTH; i++) {
		if (!kn)
			break;
		struct kernfs_node *parent = kn_parent(kn);
		if (!parent)
			break; // the hierarchy's root: no name of its own
		names->p[i] = (const unsigned char *)BPF_CORE_READ(kn, name);
		n = i + 1;
		kn = parent;
	}
	if (n == MAX_CGROUP_DEPTH && kn && kn_parent(kn))
		flags = BLOB_TRUNCATED;
	return put_components(buf, off, TAG_CGROUP, n, flags);
}

// ----- syscalls -----

// The architecture's syscall numbers (the kernel's own: user space translates them to the
// x86-64 numbers events carry, crates/event/src/arch.rs), the prefix of its syscall wrappers
// (`SYSCALL_DEFINEx` in arch/*/include/asm/syscall_wrapper.h) and its saved registers.
// The generic table (arm64) has no fork or vfork: they are never matched there.
#if defined(__TARGET_ARCH_x86)
#define SYS_PREFIX "__x64_sys_"
#define NR_CLONE 56
#define NR_FORK 57
#define NR_VFORK 58
#define NR_EXECVE 59
#define NR_EXECVEAT 322
#define NR_CLONE3 435
#define NR_CLOSE 3
#define NR_DUP 32
#define NR_DUP2 33
#define NR_DUP3 292
#define NR_FCNTL 72
#define NR_OPEN 2
#define NR_OPENAT 257
#define NR_CREAT 85
#define NR_OPENAT2 437
#elif defined(__TARGET_ARCH_arm64)
#define SYS_PREFIX "__arm64_sys_"
#define NR_CLONE 220
#define NR_FORK 0xfffffffe
#define NR_VFORK 0xfffffffe
#define NR_EXECVE 221
#define NR_EXECVEAT 281
#define NR_CLONE3 435
#define NR_CLOSE 57
#define NR_DUP 23
#define NR_DUP2 0xfffffffe
#define NR_DUP3 24
#define NR_FCNTL 25
#define NR_OPEN 0xfffffffe
#define NR_OPENAT 56
#define NR_CREAT 0xfffffffe
#define NR_OPENAT2 437
#else
#error "vigil.bpf.c knows x86 and arm64 (__TARGET_ARCH_x86, __TARGET_ARCH_arm64)"
#endif

// Keeps the pathname an execveat of thread `tid` passed, for its exec record (the new image
// replaces the memory it is in): staged in this CPU's scratch area, then copied into the map.
static __always_inline void keep_exec_name(__u32 tid, const void *pathname)
{
	__u8 *buf = scratch_buf();
	if (!buf)
		return;
	struct exec_name *en = (struct exec_name *)buf;
	en->n = bpf_probe_read_user_str(en->s, MAX_PATH + 1, pathname);
	if (bpf_map_update_elem(&exec_names, &tid, en, BPF_ANY) < 0)
		count_drop(DROP_STASH_FULL);
}

static __always_inline int on_enter(struct trace_event_raw_sys_enter *ctx)
{
	if (floor_mode == FLOOR_NOP || excluded())
		return 0;
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct stash *st = bpf_task_storage_get(&stashes, bpf_get_current_task_btf(), 0,
						BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count_drop(DROP_STASH_FULL);
		return 0;
	}
	// Not direct context loads: the kernel refuses to attach a program whose context
	// accesses go past a tracepoint's record, and syscalls with fewer than six arguments have
	// shorter records. Extra words are ignored by user space.
	bpf_probe_read_kernel(st->args, sizeof(st->args), ctx->args);
	// The syscall number is an `int` (the record of a syscall without arguments ends there).
	__s32 nr = -1;
	bpf_probe_read_kernel(&nr, sizeof(nr), &ctx->id);
	st->nr = (__u32)nr;
	if (nr == NR_EXECVEAT)
		keep_exec_name(tid, (const void *)st->args[1]);
	return 0;
}

// The total length of a msghdr's iovecs (at most MAX_IOV of them) and its msg_name.
static __always_inline __u32 put_msghdr(__u8 *buf, __u32 off, const struct user_msghdr *um)
{
	struct user_msghdr m = {};
	if (bpf_probe_read_user(&m, sizeof(m), um) < 0) {
		count_drop(DROP_READ_FAULT);
		return off;
	}
	__u64 count = m.msg_iovlen;
	__u8 flags = 0;
	if (count > MAX_IOV) {
		count = MAX_IOV;
		flags = BLOB_TRUNCATED;
	}
	__u64 size = 0;
	#pragma unroll
	for (int i = 0; i < MAX_IOV; i++) {
		if (i >= count)
			break;
		__u64 len = 0;
		if (bpf_probe_read_user(&len, sizeof(len), &m.msg_iov[i].iov_len) < 0) {
			flags = BLOB_FAULT;
			break;
		}
		size += len;
	}
	__u32 data = blob_begin(buf, off);
	struct msg_info *mi = (struct msg_info *)&buf[data];
	mi->size = size;
	off = blob_end(buf, off, TAG_MSG, flags, sizeof(*mi));
	if (m.msg_name && m.msg_namelen > 0)
		off = put_user_mem(buf, off, TAG_MSG_NAME, m.msg_name, (__u32)m.msg_namelen,
				   MAX_SOCKADDR);
	return off;
}

#define EBADF 9
#define F_DUPFD 0
#define F_DUPFD_CLOEXEC 1030

// The descriptor a state-only operation sets (the one a dup creates, the one a close
// releases) and the one it reads (a dup's source; -1 for a close), or 0 when the call is
// not one that can be held back (a failed dup, fcntl of another command, dup2(fd, fd)).
static __always_inline int state_op(__u32 nr, const __u64 *args, __s64 ret, __s64 *set,
				    __s64 *read)
{
	if (nr == NR_CLOSE) {
		*set = (__s32)args[0];
		*read = -1;
		return 1;
	}
	if (ret < 0)
		return 0;
	if (nr == NR_FCNTL && args[1] != F_DUPFD && args[1] != F_DUPFD_CLOEXEC)
		return 0;
	if (nr != NR_DUP && nr != NR_DUP2 && nr != NR_DUP3 && nr != NR_FCNTL)
		return 0;
	*set = ret;
	*read = (__s32)args[0];
	return *read != *set;
}

// `task` alone owns its descriptor table: the only thread of its process, its files_struct
// shared with no one (after a fork or a clone without CLONE_FILES it is a copy). Direct loads
// through the BTF pointer (CO-RE relocated, no helper call each).
static __always_inline int owns_table_alone(struct task_struct *task)
{
	struct signal_struct *sig = task->signal;
	struct files_struct *files = task->files;
	return sig && files && sig->nr_threads == 1 && files->count.counter == 1;
}

// Holds back or folds away a record of `nr` that only the state engine's descriptor table
// needs (`state_only`, or a successful watched dup whose result no rule can match:
// `result_filters`), when the calling thread alone owns its table (one thread, a
// files_struct nobody shares): no other task can act on one of its descriptors until this
// thread writes another record (a clone of it is a fork record), and every record it writes
// goes out after the held one (`emit`). Two operations in a row that set the same descriptor
// fold into the second: user space's table ends the same (a dup or close of N then a dup to
// N or a close of N: the second replaces or removes what the first left at N; a dup's source
// is never its target). A close failing with EBADF changes nothing and is dropped. Returns 1
// when the record is held or dropped (nothing to write now), 0 to write it as usual.
static __always_inline int hold_state_op(struct task_struct *task, __u32 nr, const __u64 *args,
					 __s64 ret)
{
	__u32 key = nr & 511;
	__u8 *on = bpf_map_lookup_elem(&state_only, &key);
	if (!on || !*on) {
		// A watched dup whose result no rule can match is state-only all the same.
		struct result_filter *rf = bpf_map_lookup_elem(&result_filters, &key);
		if (!rf || !rf->active || ret < 0)
			return 0;
		if (ret < 64 && (rf->allowed & (1ULL << ret)))
			return 0;
	}
	__s64 set, read;
	if (!state_op(nr, args, ret, &set, &read))
		return 0;
	if (nr == NR_CLOSE && ret == -EBADF) {
		count_folded();
		return 1;
	}
	if (!owns_table_alone(task))
		return 0;
	struct held_op *o =
		bpf_task_storage_get(&held_ops, task, 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!o)
		return 0;
	if (o->valid) {
		__s64 held_set, held_read;
		if (state_op(o->h.nr, o->h.args, o->h.res, &held_set, &held_read) &&
		    held_set == set) {
			count_folded();
		} else {
			o->h.ts = bpf_ktime_get_boot_ns();
			emit_raw((const __u8 *)&o->h, sizeof(o->h), 1, 0);
		}
	}
	// Not stamped now: a held record is stamped when it is written (`flush_held`, or the
	// next hold above), and a folded one never is. A clock read costs ~100 ns on some VMs, a
	// third of this path (BENCHMARKS.md, "held operations stamped when written").
	fill_hdr_of(&o->h, task, REC_SYSCALL, (__u16)nr, ret, 0);
	#pragma unroll
	for (int i = 0; i < 6; i++)
		o->h.args[i] = args[i];
	hdr_set_len(&o->h, sizeof(o->h));
	o->valid = 1;
	return 1;
}

static __always_inline int is_open(__u32 nr)
{
	return nr == NR_OPENAT || nr == NR_OPEN || nr == NR_CREAT || nr == NR_OPENAT2;
}

// A dup (or fcntl(F_DUPFD*)) that is written (a rule watches it) to the descriptor the
// thread's held operation sets replaces or removes what that operation left there (the state
// engine applies the dup before any rule reads the event's fields): the held one is folded
// away. Not for a close, whose event shows the descriptor as it was before it. So too for a
// successful open returning the descriptor a held close released (the loop of open, read,
// close, open again): the state engine's open replaces the entry the close would have removed.
static __always_inline void fold_held_into(struct task_struct *task, __u32 nr,
					   const __u64 *args, __s64 ret)
{
	__s64 set, read;
	int open = is_open(nr) && ret >= 0;
	if (open)
		set = ret;
	else if (nr == NR_CLOSE || !state_op(nr, args, ret, &set, &read))
		return;
	struct held_op *o = bpf_task_storage_get(&held_ops, task, 0, 0);
	if (!o || !o->valid)
		return;
	if (open && o->h.nr != NR_CLOSE)
		return;
	__s64 held_set, held_read;
	if (state_op(o->h.nr, o->h.args, o->h.res, &held_set, &held_read) && held_set == set) {
		o->valid = 0;
		count_folded();
	}
}

struct needle_ctx {
	const struct failure_needle *nd;
	__u32 data;  // the path's offset in the scratch buffer
	__u32 last;  // the last offset (from `data`) the needle may start at
	__u32 found;
};

// Whether the needle starts at offset `i` of the path (bpf_loop callback: 1 ends the loop).
static long needle_at(__u64 i, struct needle_ctx *c)
{
	if (i > c->last)
		return 1;
	__u8 *buf = scratch_buf();
	if (!buf)
		return 1;
	const struct failure_needle *nd = c->nd;
	__u32 at = c->data + (__u32)i;
	#pragma unroll
	for (int j = 0; j < NEEDLE_MAX; j++) {
		if (j >= nd->len) {
			c->found = 1;
			return 1;
		}
		if (buf[(at + j) & OFF_MASK] != nd->b[j])
			return 0;
	}
	c->found = 1;
	return 1;
}

// Whether a failed call whose path argument was copied into the blob at `blob` (NO_BLOB:
// none) is wanted under needle `nd`: its path contains the needle.
#define NO_BLOB 0xffffffffu
static __always_inline int failure_wanted(__u8 *buf, const struct failure_needle *nd, __u32 blob)
{
	if (blob == NO_BLOB)
		return 0;
	const struct blob_hdr *bh = (const struct blob_hdr *)&buf[blob & OFF_MASK];
	__u32 len = bh->len;
	if (nd->len == 0 || nd->len > NEEDLE_MAX || len < nd->len || len > MAX_PATH)
		return 0;
	struct needle_ctx c = {
		.nd = nd,
		.data = blob_begin(buf, blob),
		.last = len - nd->len,
		.found = 0,
	};
	bpf_loop(MAX_PATH, needle_at, &c, 0);
	return c.found;
}

// The record of a completed syscall `nr` of the current task `task` with its six argument
// registers and result.
static __always_inline int emit_syscall(struct task_struct *task, __u8 *buf, __u32 nr,
					const __u64 *args, __s64 ret, int deferrable)
{
	if (hold_state_op(task, nr, args, ret))
		return 0;
	fold_held_into(task, nr, args, ret);
	struct rec_hdr *h = (struct rec_hdr *)buf;
	// Stamped once it is known to be written (below): a filtered failure reads no clock.
	fill_hdr_of(h, task, REC_SYSCALL, (__u16)nr, ret, 0);
	#pragma unroll
	for (int i = 0; i < 6; i++)
		h->args[i] = args[i];

	__u32 off = sizeof(struct rec_hdr);
	__u32 key = nr & 511;
	const struct failure_needle *nd = 0;
	if (ret < 0) {
		nd = bpf_map_lookup_elem(&failure_needles, &key);
		if (nd && nd->len == 0)
			nd = 0;
	}
	__u32 needle_blob = NO_BLOB;
	struct spec *sp = bpf_map_lookup_elem(&specs, &key);
	if (sp) {
		#pragma unroll
		for (int i = 0; i < 6; i++) {
			__u8 cap = sp->cap[i];
			const void *p = (const void *)h->args[i];
			if (cap == CAP_NONE || !p)
				continue;
			if (nd && cap == CAP_STR && nd->arg == i)
				needle_blob = off;
			if (cap == CAP_STR)
				off = put_user_str(buf, off, i, p, MAX_PATH);
			else if (cap == CAP_STR_SHORT)
				off = put_user_str(buf, off, i, p, MAX_SHORT);
			else if (cap == CAP_SOCKADDR && i < 5)
				off = put_user_mem(buf, off, i, p, (__u32)h->args[i + 1], MAX_SOCKADDR);
			else if (cap == CAP_MEM8)
				off = put_user_mem(buf, off, i, p, 8, 8);
			else if (cap == CAP_MEM24)
				off = put_user_mem(buf, off, i, p, 24, 24);
		}
		if (sp->tuple == TUPLE_ARG0)
			off = put_tuple(buf, off, (__s64)h->args[0]);
		else if (sp->tuple == TUPLE_RES && ret >= 0)
			off = put_tuple(buf, off, ret);
		if (sp->msg && h->args[1])
			off = put_msghdr(buf, off, (const struct user_msghdr *)h->args[1]);
	}
	if (nd && !failure_wanted(buf, nd, needle_blob)) {
		count_drop(FILTERED_FAILED);
		return 0;
	}
	h->ts = bpf_ktime_get_boot_ns();
	hdr_set_len(h, off);
	emit_of(task, buf, off, deferrable);
	return 0;
}

// FLOOR_RING: the cost of a ring write alone (a header, reserved and committed in place).
static __always_inline int emit_floor(__u32 nr, __s64 ret)
{
	__u32 cpu = bpf_get_smp_processor_id();
	void *rb = bpf_map_lookup_elem(&ringbufs, &cpu);
	if (!rb)
		return 0;
	struct rec_hdr *h = bpf_ringbuf_reserve(rb, sizeof(*h), 0);
	if (!h) {
		count_drop(DROP_BUFFER_FULL);
		return 0;
	}
	fill_hdr(h, REC_FLOOR, (__u16)nr, ret);
	hdr_set_len(h, sizeof(*h));
	#pragma unroll
	for (int i = 0; i < 6; i++)
		h->args[i] = 0;
	// The same wakeups as a real record of this syscall: the floor includes their cost.
	struct wake_state *st;
	int reason = wake_reason(rb, h, sizeof(*h), &st, 0);
	__u64 ts = h->ts;
	bpf_ringbuf_submit(h, wake_flags(reason));
	count_submitted();
	woke(reason, st, ts);
	return 0;
}

static __always_inline int on_completed(struct task_struct *task, const struct pt_regs *regs,
					long ret, int deferrable);

static __always_inline int on_exit(struct trace_event_raw_sys_exit *ctx)
{
	if (floor_mode == FLOOR_NOP)
		return 0;
	// One load of the result: clang would otherwise offset the context pointer for the
	// later loads, which the verifier refuses (a modified ctx pointer).
	long ret = ctx->ret;
	asm volatile("" : "+r"(ret));
	// One helper call for the task: its ids are read from it (`excluded_task`, `fill_hdr_of`).
	struct task_struct *task = bpf_get_current_task_btf();
	if (hook_mode == HOOK_EXIT) {
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
		if (!regs)
			return 0;
		return on_completed(task, regs, ret, 0);
	}
	__u32 tid = (__u32)task->pid;
	struct stash *st = stash_of(task);
	if (!st)
		return 0;
	__u8 *buf = scratch_buf();
	// A stash left by another syscall (whose exit was detached meanwhile) is stale.
	if (!buf || (__u32)(__s32)ctx->id != st->nr) {
		st->nr = NO_STASH;
		return 0;
	}
	if (st->nr == NR_EXECVEAT) // it failed (a successful one has no exit)
		bpf_map_delete_elem(&exec_names, &tid);
	__u32 nr = st->nr;
	st->nr = NO_STASH; // released before any filtering: nothing is left pending
	if (floor_mode == FLOOR_RING)
		return emit_floor(nr, ret);
	if (skip_failure(nr, ret))
		return 0;
	return emit_syscall(task, buf, nr, st->args, ret, 0);
}

static __always_inline int is_clone(__u32 nr)
{
	return nr == NR_CLONE || nr == NR_FORK || nr == NR_VFORK || nr == NR_CLONE3;
}

// The six argument registers of a syscall as its wrapper received them. `regs` is a BTF
// pointer (a tracing program's argument or bpf_task_pt_regs()): direct loads, relocated by
// CO-RE, with no helper call each.
static __always_inline void regs_args(const struct pt_regs *regs, __u64 *args)
{
#if defined(__TARGET_ARCH_x86)
	// x86-64: rdi, rsi, rdx, r10, r8, r9.
	args[0] = regs->di;
	args[1] = regs->si;
	args[2] = regs->dx;
	args[3] = regs->r10;
	args[4] = regs->r8;
	args[5] = regs->r9;
#else
	// arm64: x0..x5, where x0 is overwritten by the return value once the call completes
	// (syscall_set_return_value); el0_svc_common keeps the first argument in `orig_x0`
	// (arch/arm64/kernel/syscall.c).
	args[0] = regs->orig_x0;
	args[1] = regs->regs[1];
	args[2] = regs->regs[2];
	args[3] = regs->regs[3];
	args[4] = regs->regs[4];
	args[5] = regs->regs[5];
#endif
}

// The syscall number of the saved registers: -1 (NO_SYSCALL on arm64) when ptrace or seccomp
// skipped the call.
static __always_inline __u32 regs_nr(const struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	return (__u32)regs->orig_ax;
#else
	return (__u32)regs->syscallno;
#endif
}

// A completed syscall seen at its return with its saved user registers (HOOK_FEXIT,
// HOOK_RAW, HOOK_EXIT): the number is regs_nr(). `deferrable`: the caller is a tracing
// program (fexit, tp_btf), whose records of watched types leave their wakeup to the timer as
// the lifecycle programs' do; 0 for a tracepoint (HOOK_EXIT), where timers are refused.
static __always_inline int on_completed(struct task_struct *task, const struct pt_regs *regs,
					long ret, int deferrable)
{
	if (floor_mode == FLOOR_NOP || excluded_task(task))
		return 0;
	__u32 nr = regs_nr(regs);
	if (nr >= 512)
		return 0;
	if (nr == NR_EXECVE || nr == NR_EXECVEAT) {
		// The entry stash was for the exec record; a successful exec reported it.
		struct stash *st = stash_of(task);
		if (st)
			st->nr = NO_STASH;
		if (nr == NR_EXECVEAT) {
			__u32 tid = (__u32)task->pid;
			bpf_map_delete_elem(&exec_names, &tid);
		}
		if (ret == 0)
			return 0;
	}
	// A successful clone is reported by the fork program (in the parent, before the child
	// ran); the child's own return (0) is not a call.
	if (is_clone(nr) && ret >= 0)
		return 0;
	if (floor_mode == FLOOR_RING)
		return emit_floor(nr, ret);
	if (skip_failure(nr, ret))
		return 0;
	__u8 *buf = scratch_buf();
	if (!buf)
		return 0;
	__u64 args[6];
	regs_args(regs, args);
	return emit_syscall(task, buf, nr, args, ret, deferrable);
}

// HOOK_FEXIT, HOOK_RAW: `on_completed` for the current task, asked for after the floor's check
// (a `--bpf-floor nop` program makes no helper call).
static __always_inline int on_completed_current(const struct pt_regs *regs, long ret)
{
	if (floor_mode == FLOOR_NOP)
		return 0;
	return on_completed(bpf_get_current_task_btf(), regs, ret, 1);
}

// HOOK_FEXIT: the capture program, reached by tail call from the fexit stub of each watched
// syscall (`bpf/vigil_stubs.bpf.c`). Loaded for `__x64_sys_openat` and never attached itself.
// A tail call is allowed only between programs whose targets have the same BTF prototype
// (Linux 6.11, "bpf: Prevent tail call between progs attached to different hooks", backported
// to the stable kernels: Debian's 6.1 has it). Every `__x64_sys_X` takes one `const struct
// pt_regs *` and returns `long`, but the parameter is named `regs` or `__unused` (the
// SYSCALL_DEFINE0 and COND_SYSCALL wrappers), and BTF keeps the two prototypes apart. So the
// capture program is loaded twice: `vigil_sys_fexit1` is loaded for a target of the other
// prototype, which user space finds in the kernel's BTF, and serves the stubs of the syscalls
// with that prototype (user space puts the right one in each stub object's `sys_progs`).
SEC("fexit/" SYS_PREFIX "openat")
int BPF_PROG(vigil_sys_fexit, const struct pt_regs *regs, long ret)
{
	return on_completed_current(regs, ret);
}

SEC("fexit/" SYS_PREFIX "openat")
int BPF_PROG(vigil_sys_fexit1, const struct pt_regs *regs, long ret)
{
	return on_completed_current(regs, ret);
}

// HOOK_RAW: every syscall's return; only the numbers in `hooked_nrs` go further.
SEC("tp_btf/sys_exit")
int BPF_PROG(vigil_btf_exit, struct pt_regs *regs, long ret)
{
	__u32 key = regs_nr(regs);
	if (key >= 512)
		return 0;
	__u8 *on = bpf_map_lookup_elem(&hooked_nrs, &key);
	if (!on || !*on)
		return 0;
	return on_completed_current(regs, ret);
}

// HOOK_FEXIT: exec entry. The exec record (sched_process_exec) needs the call's arguments and,
// for execveat, the pathname as passed, which the new image has replaced by then.
static __always_inline int exec_entry(const struct pt_regs *regs, __u32 nr)
{
	if (floor_mode == FLOOR_NOP || excluded())
		return 0;
	struct stash *st = bpf_task_storage_get(&stashes, bpf_get_current_task_btf(), 0,
						BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!st) {
		count_drop(DROP_STASH_FULL);
		return 0;
	}
	regs_args(regs, st->args);
	st->nr = nr;
	if (nr == NR_EXECVEAT)
		keep_exec_name((__u32)bpf_get_current_pid_tgid(), (const void *)st->args[1]);
	return 0;
}

SEC("fentry/" SYS_PREFIX "execve")
int BPF_PROG(vigil_execve_entry, const struct pt_regs *regs)
{
	return exec_entry(regs, NR_EXECVE);
}

SEC("fentry/" SYS_PREFIX "execveat")
int BPF_PROG(vigil_execveat_entry, const struct pt_regs *regs)
{
	return exec_entry(regs, NR_EXECVEAT);
}

SEC("tp/syscalls/sys_enter_openat")
int vigil_sys_enter(struct trace_event_raw_sys_enter *ctx)
{
	return on_enter(ctx);
}

SEC("tp/syscalls/sys_exit_openat")
int vigil_sys_exit(struct trace_event_raw_sys_exit *ctx)
{
	return on_exit(ctx);
}

// The fallback for watched syscalls without their own tracepoints: every syscall runs these,
// so they are attached only while `fallback_nrs` has an entry.
static __always_inline int is_fallback(long id)
{
	if (id < 0 || id >= 512)
		return 0;
	__u32 key = (__u32)id;
	__u8 *on = bpf_map_lookup_elem(&fallback_nrs, &key);
	return on && *on;
}

SEC("tp/raw_syscalls/sys_enter")
int vigil_raw_enter(struct trace_event_raw_sys_enter *ctx)
{
	if (!is_fallback(ctx->id))
		return 0;
	return on_enter(ctx);
}

SEC("tp/raw_syscalls/sys_exit")
int vigil_raw_exit(struct trace_event_raw_sys_exit *ctx)
{
	if (!is_fallback(ctx->id))
		return 0;
	return on_exit(ctx);
}

// ----- process lifecycle -----

static __always_inline __u32 ns_nr(struct pid *p)
{
	if (!p)
		return 0;
	unsigned int level = BPF_CORE_READ(p, level);
	return BPF_CORE_READ(p, numbers[level & 31].nr);
}

// The clone family completes here, in the parent, before the child can run: the parent's
// event always precedes the child's first event.
SEC("tp_btf/sched_process_fork")
int BPF_PROG(vigil_fork, struct task_struct *parent, struct task_struct *child)
{
	if (floor_mode == FLOOR_NOP || excluded())
		return 0;
	// The child (or the new thread) shares or copies the descriptor table as it is now.
	flush_held(bpf_ktime_get_boot_ns());
	__u64 args[6] = {};
	__u32 nr;
	if (hook_mode == HOOK_TRACEPOINT) {
		struct stash *st = stash_of(bpf_get_current_task_btf());
		if (!st || !is_clone(st->nr))
			return 0;
		nr = st->nr;
		#pragma unroll
		for (int i = 0; i < 6; i++)
			args[i] = st->args[i];
		st->nr = NO_STASH;
	} else {
		// The parent is inside its clone call: its saved user registers are the call's
		// arguments (a kernel thread has none that matter: skipped).
		struct task_struct *cur = bpf_get_current_task_btf();
		if (BPF_CORE_READ(cur, flags) & 0x00200000 /* PF_KTHREAD */)
			return 0;
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(cur);
		if (!regs)
			return 0;
		nr = regs_nr(regs);
		if (!is_clone(nr))
			return 0;
		__u32 key = nr;
		__u8 *on = bpf_map_lookup_elem(&hooked_nrs, &key);
		if (!on || !*on)
			return 0;
		regs_args(regs, args);
	}
	__u8 *buf = scratch_buf();
	if (!buf)
		return 0;
	struct rec_hdr *h = (struct rec_hdr *)buf;
	__u32 child_tid = BPF_CORE_READ(child, pid);
	fill_hdr(h, REC_FORK, (__u16)nr, child_tid);
	#pragma unroll
	for (int i = 0; i < 6; i++)
		h->args[i] = args[i];

	__u32 off = sizeof(struct rec_hdr);
	__u32 data = blob_begin(buf, off);
	struct fork_info *fi = (struct fork_info *)&buf[data];
	fi->flags = 0;
	if (nr == NR_CLONE) {
		fi->flags = h->args[0];
	} else if (nr == NR_CLONE3) {
		bpf_probe_read_user(&fi->flags, 8, (const void *)h->args[0]);
	}
	fi->child_tid = child_tid;
	fi->child_pid = BPF_CORE_READ(child, tgid);
	fi->child_vtid = ns_nr(BPF_CORE_READ(child, thread_pid));
	fi->child_vpid = ns_nr(BPF_CORE_READ(child, group_leader, thread_pid));
	off = blob_end(buf, off, TAG_FORK_INFO, 0, sizeof(*fi));
	hdr_set_len(h, off);
	emit(buf, off);
	return 0;
}

// Whether `exe` is an anonymous memory file (memfd_create): the kernel names its pseudo dentry
// `memfd:<name>`, and a pseudo dentry has no parent (it is its own `d_parent`), which tells it
// apart from a regular file that happens to be named `memfd:…`.
static __always_inline int exe_is_memfd(struct file *exe)
{
	struct dentry *d = BPF_CORE_READ(exe, f_path.dentry);
	if (!d || BPF_CORE_READ(d, d_parent) != d)
		return 0;
	char p[8] = {};
	if (bpf_probe_read_kernel_str(p, sizeof(p), BPF_CORE_READ(d, d_name.name)) < 7)
		return 0;
	return p[0] == 'm' && p[1] == 'e' && p[2] == 'm' && p[3] == 'f' && p[4] == 'd' &&
	       p[5] == ':';
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(vigil_exec, struct task_struct *task, pid_t old_pid, struct linux_binprm *bprm)
{
	if (floor_mode == FLOOR_NOP || excluded())
		return 0;
	// Before the exec record (which applies close-on-exec), whether or not one follows.
	flush_held(bpf_ktime_get_boot_ns());
	__u32 key = (__u32)old_pid;
	__u64 args[6] = {};
	__u32 nr = NO_STASH;
	struct stash *st = stash_of(task);
	if (st) {
		nr = st->nr;
		#pragma unroll
		for (int i = 0; i < 6; i++)
			args[i] = st->args[i];
		st->nr = NO_STASH;
	}
	if ((hook_mode == HOOK_RAW || hook_mode == HOOK_EXIT) && nr != NR_EXECVEAT) {
		// Only execveat stashes at entry here (its dirfd, flags and pathname); for execve the
		// number is still in the saved registers (the new image's loader cleared the others).
		struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
		if (!regs)
			return 0;
		nr = regs_nr(regs);
		__u32 hk = nr;
		__u8 *on = nr < 512 ? bpf_map_lookup_elem(&hooked_nrs, &hk) : 0;
		if (!on || !*on)
			return 0;
	}
	if (nr != NR_EXECVE && nr != NR_EXECVEAT)
		return 0;
	__u8 *buf = scratch_buf();
	if (!buf)
		return 0;
	struct rec_hdr *h = (struct rec_hdr *)buf;
	fill_hdr(h, REC_EXEC, (__u16)nr, 0);
	#pragma unroll
	for (int i = 0; i < 6; i++)
		h->args[i] = args[i];

	__u32 off = sizeof(struct rec_hdr);
	off = put_kernel_str(buf, off, TAG_FILENAME, BPF_CORE_READ(bprm, filename), MAX_PATH);
	if (nr == NR_EXECVEAT) {
		// The pathname as passed (bprm->filename is `/dev/fd/N/...` for a dirfd-relative one).
		struct exec_name *en = bpf_map_lookup_elem(&exec_names, &key);
		if (en) {
			if (en->n >= 0)
				off = put_kernel_str(buf, off, 1, en->s, MAX_PATH);
			else
				off = blob_end(buf, off, 1, BLOB_FAULT, 0);
			bpf_map_delete_elem(&exec_names, &key);
		}
	}

	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	unsigned long arg_start = BPF_CORE_READ(mm, arg_start);
	unsigned long arg_end = BPF_CORE_READ(mm, arg_end);
	unsigned long env_start = BPF_CORE_READ(mm, env_start);
	unsigned long env_end = BPF_CORE_READ(mm, env_end);
	off = put_user_mem(buf, off, TAG_ARGV, (const void *)arg_start,
			   arg_end > arg_start ? (__u32)(arg_end - arg_start) : 0, MAX_ARGS_AREA);
	off = put_user_mem(buf, off, TAG_ENV, (const void *)env_start,
			   env_end > env_start ? (__u32)(env_end - env_start) : 0, MAX_ARGS_AREA);

	off = put_kernel_mem(buf, off, TAG_COMM, &task->comm, 16);
	struct fs_struct *fs = BPF_CORE_READ(task, fs);
	if (fs)
		off = put_path(buf, off, TAG_CWD, &fs->pwd);
	struct file *exe = BPF_CORE_READ(mm, exe_file);
	__u32 exe_flags = 0;
	if (exe) {
		if (exe_is_memfd(exe)) {
			// No path to walk: the name (`memfd:<name>`) is the executable's path.
			exe_flags |= EXE_FROM_MEMFD;
			off = put_kernel_str(buf, off, TAG_EXEPATH,
					     BPF_CORE_READ(exe, f_path.dentry, d_name.name), MAX_SHORT);
		} else {
			off = put_path(buf, off, TAG_EXEPATH, &exe->f_path);
		}
	}
	off = put_cgroup(buf, off, task);

	__u32 data = blob_begin(buf, off);
	struct exec_info *ei = (struct exec_info *)&buf[data];
	__builtin_memset(ei, 0, sizeof(*ei));
	ei->tid = BPF_CORE_READ(task, pid);
	ei->pid = BPF_CORE_READ(task, tgid);
	ei->ptid = BPF_CORE_READ(task, real_parent, tgid);
	ei->old_pid = old_pid;
	const struct cred *cred = BPF_CORE_READ(task, cred);
	ei->uid = BPF_CORE_READ(cred, uid.val);
	ei->gid = BPF_CORE_READ(cred, gid.val);
	ei->euid = BPF_CORE_READ(cred, euid.val);
	ei->egid = BPF_CORE_READ(cred, egid.val);
	ei->cap_inheritable = CRED_CAPS(cred, cap_inheritable);
	ei->cap_permitted = CRED_CAPS(cred, cap_permitted);
	ei->cap_effective = CRED_CAPS(cred, cap_effective);
	if (bpf_core_field_exists(task->loginuid))
		ei->loginuid = BPF_CORE_READ(task, loginuid.val);
	else
		ei->loginuid = 0xffffffff;
	struct tty_struct *tty = BPF_CORE_READ(task, signal, tty);
	if (tty) {
		__u32 index = BPF_CORE_READ(tty, index);
		__u32 major = BPF_CORE_READ(tty, driver, major);
		__u32 minor = BPF_CORE_READ(tty, driver, minor_start) + index;
		// new_encode_dev, as /proc/<pid>/stat's tty_nr.
		ei->tty = (minor & 0xff) | (major << 8) | ((minor & ~0xffu) << 12);
	}
	struct inode *ino = BPF_CORE_READ(mm, exe_file, f_inode);
	if (ino) {
		// Writable by the process's effective user (root always is), as the mode bits say.
		__u32 mode = BPF_CORE_READ(ino, i_mode);
		__u32 owner = BPF_CORE_READ(ino, i_uid.val);
		__u32 group = BPF_CORE_READ(ino, i_gid.val);
		__u32 w = owner == ei->euid ? mode & 0200 : group == ei->egid ? mode & 0020 : mode & 0002;
		if (ei->euid == 0 || w)
			exe_flags |= EXE_WRITABLE;
		// An overlayfs file whose upper dentry exists was written (or copied up) in the
		// upper layer, i.e. after the container's image was assembled.
		// `struct ovl_inode` is known only where overlayfs is built in or its module was
		// loaded when Vigil started (libbpf reads module BTF too).
		if (bpf_core_type_exists(struct ovl_inode___vigil) &&
		    BPF_CORE_READ(ino, i_sb, s_magic) == OVERLAYFS_SUPER_MAGIC) {
			struct ovl_inode___vigil *oi = (struct ovl_inode___vigil *)((void *)ino -
				bpf_core_field_offset(struct ovl_inode___vigil, vfs_inode));
			if (BPF_CORE_READ(oi, __upperdentry))
				exe_flags |= EXE_UPPER_LAYER;
		}
		ei->exe_ino = BPF_CORE_READ(ino, i_ino);
		ei->exe_ctime = inode_ctime_ns(ino);
		ei->exe_mtime = inode_mtime_ns(ino);
	}
	ei->vtid = ns_nr(BPF_CORE_READ(task, thread_pid));
	ei->vpid = ns_nr(BPF_CORE_READ(task, group_leader, thread_pid));
	ei->exe_flags = exe_flags;
	off = blob_end(buf, off, TAG_EXEC_INFO, 0, sizeof(*ei));
	hdr_set_len(h, off);
	emit(buf, off);
	return 0;
}

// The operation held back by a thread that exits as the last of its process, its descriptor
// table shared with no one (as when it was held: a clone since would have written it), is
// folded away: the table goes with the process (before this tracepoint the kernel has not
// released it yet), and user space drops its copy at the exit record.
static __always_inline void drop_held_at_exit(void)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct held_op *o = bpf_task_storage_get(&held_ops, task, 0, 0);
	if (!o || !o->valid || !owns_table_alone(task))
		return;
	o->valid = 0;
	count_folded();
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(vigil_exit, struct task_struct *task)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	bpf_map_delete_elem(&exec_names, &tid);
	if (floor_mode == FLOOR_NOP || excluded())
		return 0;
	drop_held_at_exit();
	__u8 *buf = scratch_buf();
	if (!buf)
		return 0;
	struct rec_hdr *h = (struct rec_hdr *)buf;
	fill_hdr(h, REC_EXIT, 0, 0);
	#pragma unroll
	for (int i = 0; i < 6; i++)
		h->args[i] = 0;
	__u32 off = sizeof(struct rec_hdr);
	__u32 data = blob_begin(buf, off);
	struct exit_info *xi = (struct exit_info *)&buf[data];
	xi->exit_code = BPF_CORE_READ(task, exit_code);
	xi->pad = 0;
	off = blob_end(buf, off, TAG_EXIT_INFO, 0, sizeof(*xi));
	hdr_set_len(h, off);
	emit(buf, off);
	return 0;
}

// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
//
// The ring records' kinds, blob tags and blob flags: the one definition both sides read.
// bpf/vigil.bpf.c writes records with them; crates/ebpf/build.rs turns every `#define` of a
// REC_, TAG_ or BLOB_ name below into a Rust constant for crates/ebpf/src/decode.rs (a
// decimal value, an optional `//` comment: the constant's doc). The record structs
// (`struct rec_hdr`, `struct blob_hdr` and the blob payloads) are in bpf/vigil.bpf.c.

#ifndef VIGIL_RECORD_H
#define VIGIL_RECORD_H

// Record kinds (`rec_hdr.kind`).
#define REC_SYSCALL 0 // one completed syscall
#define REC_EXEC 1    // an execve/execveat of the new image (sched_process_exec)
#define REC_FORK 2    // a clone/fork/vfork (sched_process_fork)
#define REC_EXIT 3    // a process exit (sched_process_exit)
#define REC_FLOOR 4   // a header only (FLOOR_RING): counted and discarded by user space
#define REC_WAKE 5    // a header only, written by the deferred-wakeup timer: discarded by user space

// Blob tags (`blob_hdr.tag`): 0..5 = the user memory of the syscall argument of that index.
#define TAG_TUPLE 16     // struct tuple: the socket's endpoints
#define TAG_FILENAME 17  // the path execve was given (bprm->filename)
#define TAG_ARGV 18      // argv, NUL-separated
#define TAG_ENV 19       // the environment, NUL-separated
#define TAG_COMM 20      // the new image's comm
#define TAG_EXEC_INFO 21 // struct exec_info: ids, credentials, capabilities, executable inode
#define TAG_FORK_INFO 22 // struct fork_info: clone flags and the child's ids
#define TAG_EXIT_INFO 23 // struct exit_info: the exit code
#define TAG_CWD 24       // the working directory (a dentry walk)
#define TAG_EXEPATH 25   // the executable's path (a dentry walk; memfd:NAME for a memfd)
#define TAG_CGROUP 26    // the cgroup path in the unified hierarchy
#define TAG_MSG 27       // struct msg_info: a msghdr's total iovec length
#define TAG_MSG_NAME 28  // a msghdr's msg_name (the destination of an unconnected send)

// Blob flags (`blob_hdr.flags`).
#define BLOB_TRUNCATED 1 // cut at its bound (the event's truncation bit)
#define BLOB_FAULT 2     // the memory could not be read (the parameter is `<NA>`)

#endif

/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared by stacks.bpf.c and the Rust side (through the skeleton's types). */
#ifndef IOPATH_STACKS_H
#define IOPATH_STACKS_H

/* Frames kept per stack (the kernel's own limit for bpf_get_stackid is 127). */
#define STACK_DEPTH 127
#define STACK_COMM_LEN 16

/* One distinct (thread, kernel stack, user stack): counted in samples (on-CPU) or ns (off-CPU).
 * A stack id < 0 is bpf_get_stackid's -errno: no such stack (a kernel thread has no user
 * stack) or the stack map was full. */
struct stack_key {
	__u32 tgid;
	__u32 pid;
	__s32 kstack;
	__s32 ustack;
	char comm[STACK_COMM_LEN];
};

#endif /* IOPATH_STACKS_H */

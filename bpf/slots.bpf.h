/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Open-addressed tables in BPF arrays, for the per-I/O state that crosses contexts (an I/O's
 * key -> its state, io_state.bpf.h; a bio -> the I/O that owns it, block_core.bpf.h). A hash map
 * costs a bucket lock, a free-list pop and a push per I/O (~150 ns each on the 2-vCPU test VM); an
 * array lookup is inlined by the verifier, a slot is claimed with one cmpxchg on its key and freed
 * with one xchg. At most a few hundred I/Os are in flight against 65536 slots, so the first probe
 * almost always hits.
 *
 * Keys are kernel (or user) addresses, never 0: 0 marks a free slot. A key is claimed by the one
 * context that creates the I/O state and released by the one that consumes it, so a slot
 * never has two writers; the cmpxchg only settles two different keys racing for a free slot.
 * Kernels without BPF atomics claim through a hash of held slot indexes instead (compat.bpf.h).
 */
#ifndef IOPATH_SLOTS_BPF_H
#define IOPATH_SLOTS_BPF_H

#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "phases.h"
#include "compat.bpf.h"

/* Linear probing this far; beyond it the I/O is counted as dropped, never tracked wrongly. */
#define SLOT_PROBES 4

/*
 * Fibonacci hashing of the key's low 32 bits (where slab addresses differ). Only those: the key
 * may be a BTF pointer, and the verifier turns a pointer into a number only by a 32-bit move.
 */
static __always_inline __u32 slot_index(__u64 key, __u32 tgid, __u32 i)
{
	__u32 lo;
	__u64 h;

	asm volatile("%0 = %1" : "=w"(lo) : "w"((__u32)key));
	h = lo ^ tgid;

	return ((__u32)((h * 0x9E3779B97F4A7C15ULL) >> (64 - SLOT_BITS)) + i) & (NR_SLOTS - 1);
}

/* Defines NAME_find(key, tgid), NAME_claim(key, tgid, &existed), NAME_release(s) and
 * NAME_take(s, key) over the array map NAME of SLOT values (a SLOT has `key` and its own `idx`);
 * MATCH(s, key, tgid) says whether slot s holds that key. */
#define SLOT_TABLE(NAME, SLOT, MATCH)                                                              \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_ARRAY);                                                  \
		__uint(max_entries, NR_SLOTS);                                                     \
		/* mmapable: a long-running reader (top, serve) expires leaked slots with a        \
		 * cmpxchg on the key, as the probes claim them (probe/expire.rs). */              \
		__uint(map_flags, BPF_F_MMAPABLE);                                                 \
		__type(key, __u32);                                                                \
		__type(value, struct SLOT);                                                        \
	} NAME SEC(".maps");                                                                       \
                                                                                                   \
	/* The claimed slots' indexes: the compat build's claims (one entry, unused, otherwise).   \
	 */                                                                                        \
	struct {                                                                                   \
		__uint(type, BPF_MAP_TYPE_HASH);                                                   \
		__uint(max_entries, NR_SLOTS);                                                     \
		__type(key, __u32);                                                                \
		__type(value, __u8);                                                               \
	} NAME##_held SEC(".maps");                                                                \
                                                                                                   \
	static __always_inline struct SLOT *NAME##_find(__u64 key, __u32 tgid)                     \
	{                                                                                          \
		struct SLOT *s;                                                                    \
		__u32 i, idx;                                                                      \
                                                                                                   \
		for (i = 0; i < SLOT_PROBES; i++) {                                                \
			idx = slot_index(key, tgid, i);                                            \
			s = bpf_map_lookup_elem(&NAME, &idx);                                      \
			if (s && MATCH(s, key, tgid))                                              \
				return s;                                                          \
		}                                                                                  \
		return NULL;                                                                       \
	}                                                                                          \
                                                                                                   \
	/* The slot holding key (*existed = true: a leftover of an earlier I/O, or a sibling       \
	 * bio of the same one) or a newly claimed free slot; NULL when all probes are taken. */   \
	/* A free slot for a key the caller just failed to find (NULL: all probes taken). */       \
	static __always_inline struct SLOT *NAME##_claim_free(__u64 key, __u32 tgid)               \
	{                                                                                          \
		struct SLOT *s;                                                                    \
		__u32 i, idx;                                                                      \
                                                                                                   \
		for (i = 0; i < SLOT_PROBES; i++) {                                                \
			idx = slot_index(key, tgid, i);                                            \
			s = bpf_map_lookup_elem(&NAME, &idx);                                      \
			if (s && !s->key &&                                                        \
			    slot_take_free(&NAME##_held, &s->key, &s->idx, idx, key))              \
				return s;                                                          \
		}                                                                                  \
		return NULL;                                                                       \
	}                                                                                          \
                                                                                                   \
	static __always_inline struct SLOT *NAME##_claim(__u64 key, __u32 tgid, bool *existed)     \
	{                                                                                          \
		struct SLOT *s = NAME##_find(key, tgid);                                           \
                                                                                                   \
		*existed = s != NULL;                                                              \
		if (s)                                                                             \
			return s;                                                                  \
		return NAME##_claim_free(key, tgid);                                               \
	}                                                                                          \
                                                                                                   \
	/* Frees a slot after its values were read. */                                             \
	static __always_inline void NAME##_release(struct SLOT *s)                                 \
	{                                                                                          \
		slot_give(&NAME##_held, &s->key, s->idx, s->key);                                  \
	}                                                                                          \
                                                                                                   \
	/* Frees a slot if it still holds key: true for the one context that freed it. */          \
	static __always_inline bool NAME##_take(struct SLOT *s, __u64 key)                         \
	{                                                                                          \
		return slot_give(&NAME##_held, &s->key, s->idx, key);                              \
	}

#endif /* IOPATH_SLOTS_BPF_H */

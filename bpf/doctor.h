/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Shared by doctor.bpf.c and the Rust side (through the skeleton's types). */
#ifndef IOPATH_DOCTOR_H
#define IOPATH_DOCTOR_H

/*
 * One program per attach kind. `iopath doctor` loads them one at a time, so a
 * kind this kernel refuses (fentry gives EPERM under some lockdown setups,
 * kprobes may be compiled out) fails alone and is reported, not assumed.
 */
enum doctor_probe {
	DOCTOR_TP_BTF = 0,
	DOCTOR_RAW_TP = 1,
	DOCTOR_TRACEPOINT = 2,
	DOCTOR_FENTRY = 3,
	DOCTOR_KPROBE = 4,
	DOCTOR_PERF_EVENT = 5,
	DOCTOR_NR_PROBES = 6,
};

#endif /* IOPATH_DOCTOR_H */

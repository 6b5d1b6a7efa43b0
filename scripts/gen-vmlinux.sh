#!/usr/bin/env bash
# Regenerates the committed bpf/vmlinux.h from this kernel's BTF. CO-RE relocates field offsets
# at load time, so one header serves every kernel that has BTF.
set -euo pipefail
cd "$(dirname "$0")/.."
btf=${1:-/sys/kernel/btf/vmlinux}
command -v bpftool >/dev/null || { echo "install bpftool (apt-get install bpftool)" >&2; exit 1; }
bpftool btf dump file "$btf" format c > bpf/vmlinux.h.new
mv bpf/vmlinux.h.new bpf/vmlinux.h
echo "bpf/vmlinux.h regenerated from $btf ($(uname -r))"

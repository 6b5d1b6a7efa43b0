#!/usr/bin/env bash
# What one stack sample costs in BPF: runs `iopath trace --flamegraph` on the tmpfs loop device
# with the kernel's BPF run-time stats on, and prints the sampler's run count and ns per run.
#   usage: sudo scripts/bench-sampling-cost.sh [RUNTIME=4s]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-4s}
. scripts/bench-lib.sh
command -v bpftool >/dev/null || { echo "needs bpftool (scripts/setup.sh installs it)" >&2; exit 1; }
old=$(sysctl -n kernel.bpf_stats_enabled)
trap 'sysctl -q kernel.bpf_stats_enabled="$old"; cleanup' EXIT
sysctl -q kernel.bpf_stats_enabled=1
"$IOPATH" trace --device "$LOOP" --engine uring --qd 32 --runtime "$RUNTIME" --flamegraph --out "$W/fg" >/dev/null 2>&1 &
pid=$!
# Read the program's counters just before the run ends (they vanish with the program).
secs=${RUNTIME%s}; sleep "$(awk -v s="$secs" 'BEGIN { print s - 0.5 }')"
bpftool prog show name oncpu | awk '/run_time_ns/ {
  for (i = 1; i <= NF; i++) { if ($i == "run_time_ns") t = $(i+1); if ($i == "run_cnt") n = $(i+1) }
  printf "oncpu sampler: %d runs, %.1f us per run\n", n, t / n / 1000 }'
wait "$pid"

#!/usr/bin/env bash
# The one hook's BPF time per run (docs/performance.md, "One hook"): io_uring QD32 on the
# tmpfs-backed loop device (scheduler set by bench-lib.sh) under `iopath serve`, then under
# `serve --empty-probes` (the same hook, an empty body: what the kernel's timing itself reads),
# each with the kernel's run-time stats on (sysctl kernel.bpf_stats_enabled=1) for the measured
# run only; a first run lets the device's stamps be judged (its check window) before it. REPEAT
# rounds, each arm's ns per run printed (the runs vary on a shared host: read the spread).
#   usage: sudo scripts/bench-one-hook-ns.sh [RUNTIME_S=4] [REPEAT=3]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-4}; REPEAT=${2:-3}
. scripts/bench-lib.sh
PORT=19439
was=$(sysctl -n kernel.bpf_stats_enabled)
restore() { sysctl -qw kernel.bpf_stats_enabled="$was"; cleanup; }
trap restore EXIT
job() { "$IOPATH" run --device "$LOOP" --engine uring --qd 32 --bs 4k --rw randread --runtime "$1" >/dev/null 2>&1; }
stat_of() { bpftool prog show name stamps_complete | grep -o 'run_time_ns [0-9]* run_cnt [0-9]*' || echo "run_time_ns 0 run_cnt 0"; }
arm() { # [--empty-probes] -> ns per run of stamps_complete over one measured run
  "$IOPATH" serve --listen 127.0.0.1:$PORT "$@" >/dev/null 2>&1 & local s=$!
  local i; for i in $(seq 100); do curl -s "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -q '^iopath_probe_info{' && break; sleep 0.1; done
  job 2s; sleep 6
  sysctl -qw kernel.bpf_stats_enabled=1
  local a b; a=$(stat_of); job "${RUNTIME}s"; b=$(stat_of)
  sysctl -qw kernel.bpf_stats_enabled="$was"
  kill -TERM $s; wait $s || true
  python3 -c "a='$a'.split(); b='$b'.split(); print('%.0f' % ((int(b[1])-int(a[1]))/max(1,int(b[3])-int(a[3]))))"
}
printf '%-6s %-12s %s\n' round "one hook" "empty hook (ns per run, stats on)"
for r in $(seq "$REPEAT"); do
  printf '%-6s %-12s %s\n' "$r" "$(arm)" "$(arm --empty-probes)"
done

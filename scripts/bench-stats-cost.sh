#!/usr/bin/env bash
# What the kernel's own timing of BPF programs costs (BPF_ENABLE_STATS, the sysctl
# kernel.bpf_stats_enabled: two clock reads around every program run), measured once for
# docs/performance.md: io_uring QD32 on the tmpfs-backed loop device (CPU-bound) with
# `iopath serve --empty-probes` attached (its one hook, an empty body), with and without the
# stats on, interleaved in rotating order, REPEAT pairs; the ratio is paired run by run
# (scripts/paired.py). serve itself holds the stats only 1 s in 10 (its measuring windows).
#   usage: sudo scripts/bench-stats-cost.sh [RUNTIME_S=4] [REPEAT=6]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-4}; REPEAT=${2:-6}
. scripts/bench-lib.sh
PORT=19438
was=$(sysctl -n kernel.bpf_stats_enabled)
restore() { sysctl -qw kernel.bpf_stats_enabled="$was"; cleanup; }
trap restore EXIT
iops() {
  "$IOPATH" run --device "$LOOP" --engine uring --qd 32 --bs 4k --rw randread --runtime "${RUNTIME}s" --json - 2>/dev/null |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["iops"])'
}
"$IOPATH" serve --listen 127.0.0.1:$PORT --empty-probes >/dev/null 2>&1 & SERVE=$!
for i in $(seq 100); do curl -s "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -q '^iopath_probe_info{' && break; sleep 0.1; done
: > "$W/off"; : > "$W/on"
for r in $(seq "$REPEAT"); do
  for arm in $( ((r % 2)) && echo "off on" || echo "on off"); do
    sysctl -qw kernel.bpf_stats_enabled=$([ "$arm" = on ] && echo 1 || echo 0)
    iops >> "$W/$arm"
  done
done
kill -TERM $SERVE; wait $SERVE || true
read -r ratio lo hi verdict < <(python3 scripts/paired.py "$W/on" "$W/off")
printf 'loop uring qd32, one empty hook: stats off %.0f IOPS, on %.0f IOPS (medians); on/off %.3fx [%.3f-%.3f] %s\n' \
  "$(median < "$W/off")" "$(median < "$W/on")" "$ratio" "$lo" "$hi" "$verdict"

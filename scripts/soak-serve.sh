#!/usr/bin/env bash
# Long-running safety of `iopath serve`: the generator at the loop device's max IOPS (io_uring,
# QD32, 4k random reads on a tmpfs-backed loop device: CPU-bound, the most I/Os a second this
# machine makes) for MINUTES while serve runs system-wide and a scraper reads /metrics every
# 10 s, as Prometheus would. Every 10 s one line: seconds, serve's RSS (KiB, /proc VmRSS), its
# CPU seconds so far, the exposition's bytes, the I/Os it counted, the lost-event total, the
# kernel rows in its table; then the RSS's first/last/max and its slope over the second half
# (KiB per minute), and the growth after the first minute against the RSS: flat is < 1%.
# Finally SIGTERM, and whether the probes are gone. REFRESH=10ms packs 100 minutes' worth of
# 1 s refreshes into each minute (a leak per refresh or per scrape shows 100 times sooner).
#   usage: sudo scripts/soak-serve.sh [MINUTES=10] [OUT=soak.tsv] [REFRESH=1s]
set -euo pipefail
cd "$(dirname "$0")/.."
MIN=${1:-10}; OUT=${2:-soak.tsv}; REFRESH=${3:-1s}
. scripts/bench-lib.sh
PORT=19436
"$IOPATH" serve --listen 127.0.0.1:$PORT --interval "$REFRESH" >"$W/serve.log" 2>&1 &
SERVE=$!
sleep 2
"$IOPATH" run --device "$LOOP" --engine uring --qd 32 --bs 4k --rw randread --runtime "$((MIN * 60))s" \
  --json "$W/run.json" >/dev/null 2>&1 &
GEN=$!
printf 's\trss_kib\tcpu_s\texposition_bytes\tios\tlost\tkernel_rows\n' > "$OUT"
start=$(date +%s)
while kill -0 $GEN 2>/dev/null; do
  sleep 10
  t=$(( $(date +%s) - start ))
  rss=$(awk '/VmRSS/ {print $2}' /proc/$SERVE/status)
  cpu=$(awk '{printf "%.1f", ($14+$15)/100}' /proc/$SERVE/stat)
  curl -s 127.0.0.1:$PORT/metrics > "$W/m"
  bytes=$(wc -c < "$W/m")
  ios=$(awk '/^iopath_ios_total/ {s+=$2} END {printf "%d", s}' "$W/m")
  lost=$(awk '/^iopath_lost_events_total/ {s+=$2} END {printf "%d", s}' "$W/m")
  rows=$(bpftool map dump name top 2>/dev/null | grep -c '"key"' || true)
  printf '%d\t%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$rss" "$cpu" "$bytes" "$ios" "$lost" "$rows" | tee -a "$OUT"
done
wait $GEN || true
kill -TERM $SERVE; wait $SERVE; rc=$?
sleep 3
left=$(bpftool prog show 2>/dev/null | grep -c "name rq_complete_btf" || true)
python3 - "$OUT" "$W/run.json" "$rc" <<'PY'
import json, sys
rows = [l.split("\t") for l in open(sys.argv[1]).read().splitlines()[1:]]
t = [float(r[0]) for r in rows]; rss = [float(r[1]) for r in rows]
half = len(rows) // 2
xs, ys = t[half:], rss[half:]
settled = [y for x, y in zip(t, rss) if x >= 60] or rss
growth = (settled[-1] - settled[0]) / settled[0] * 100
mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / max(sum((x - mx) ** 2 for x in xs), 1e-9) * 60
r = json.load(open(sys.argv[2]))
print(f"RSS KiB first {rss[0]:.0f} last {rss[-1]:.0f} max {max(rss):.0f}; second-half slope {slope:+.2f} KiB/min; "
      f"after the first minute {growth:+.2f}% ({'flat' if abs(growth) < 1 else 'GROWING'}); generator {r['iops']:.0f} IOPS, {r['ios']} I/Os; "
      f"serve counted {rows[-1][4]}, lost {rows[-1][5]}; CPU {rows[-1][2]} s; exit {sys.argv[3]} on SIGTERM")
PY
echo "programs left attached 3 s after SIGTERM: $left"

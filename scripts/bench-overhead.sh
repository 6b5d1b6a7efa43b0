#!/usr/bin/env bash
# What tracing costs: the same job with and without `iopath trace`, interleaved (alternating which
# goes first), median of REPEAT runs, on a file of the root file system (virtio-blk) and on a loop
# device backed by tmpfs (CPU-bound, where every probe's cost shows). Prints the IOPS ratio
# traced / untraced per point: histogram mode (trace), --events, and --flamegraph (997 Hz sampling).
#   usage: sudo scripts/bench-overhead.sh [RUNTIME_S=5] [REPEAT=5] [QDS="1 32"] [ENGINES="uring aio"]
# Set SKIP_HOOKS=irq,softirq (hook name fragments, passed as --skip-hooks) to measure the tracer
# without some hooks.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-5}; REPEAT=${2:-5}; QDS=${3:-"1 32"}; ENGINES=${4:-"uring aio"}
. scripts/bench-lib.sh

one() { # mode kind target engine qd -> "iops lost correlated"; mode: run | trace | events | flame
  local mode=$1 kind=$2 t=$3 eng=$4 qd=$5 flag cmd=trace extra=(); [ "$kind" = file ] && flag=--file || flag=--device
  [ "$mode" = run ] && cmd=run
  [ "$mode" != run ] && [ -n "${SKIP_HOOKS:-}" ] && extra+=(--skip-hooks "$SKIP_HOOKS")
  [ "$mode" = events ] && extra+=(--events)
  [ "$mode" = flame ] && extra+=(--flamegraph --out "$W/flamegraph-out")
  if ! "$IOPATH" "$cmd" $flag "$t" --engine "$eng" --qd "$qd" --runtime "${RUNTIME}s" "${extra[@]}" --json - \
      > "$W/out.json" 2> "$W/err"; then
    echo "bench-overhead: iopath $cmd ($mode $kind $eng qd$qd) failed: $(tail -3 "$W/err")" >&2
    exit 1
  fi
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["iops"], r.get("lost_events",{}).get("total",0), r.get("correlated_fraction",1))' "$W/out.json"
}

printf '%-6s %-6s %4s %10s %10s %8s %10s %8s %10s %8s %9s %10s\n' target engine qd untraced traced ratio +events ratio +flame ratio lost_max correlated
MODES=(run trace events flame)
for kind in file loop; do
  [ $kind = file ] && t="$W/file.dat" || t=$LOOP
  for eng in $ENGINES; do
    for qd in $QDS; do
      for m in "${MODES[@]}"; do : > "$W/$m"; done
      for r in $(seq "$REPEAT"); do
        # Rotate the order, so drift on this noisy VM hits every mode alike.
        for i in 0 1 2 3; do
          m=${MODES[$(( (r + i) % 4 ))]}
          one "$m" $kind "$t" $eng $qd >> "$W/$m"
        done
      done
      u=$(cut -d' ' -f1 "$W/run" | median); tr=$(cut -d' ' -f1 "$W/trace" | median)
      ev=$(cut -d' ' -f1 "$W/events" | median); fl=$(cut -d' ' -f1 "$W/flame" | median)
      lost=$(cat "$W/trace" "$W/events" | cut -d' ' -f2 | sort -g | tail -1); corr=$(cut -d' ' -f3 "$W/trace" | median)
      awk -v k=$kind -v e=$eng -v q=$qd -v u="$u" -v t="$tr" -v ev="$ev" -v fl="$fl" -v l="$lost" -v c="$corr" 'BEGIN {
        printf "%-6s %-6s %4d %10.0f %10.0f %7.3fx %10.0f %7.3fx %10.0f %7.3fx %9d %10.4f\n", k, e, q, u, t, t/u, ev, ev/u, fl, fl/u, l, c }'
    done
  done
done

#!/usr/bin/env bash
# Reproduces the seeds' study on this machine (the YDB io_uring-vs-libaio comparison over queue
# depth, with the Intel talk's IRQ and context-switch counts), with iopath's phase breakdown:
# `iopath sweep` of uring, aio and psync over QD 1..128, REPEAT runs per point in a seeded random
# order, on a file of the root file system (virtio-blk) and on a loop device backed by tmpfs.
#   usage: sudo scripts/reproduce-seeds.sh [RUNTIME=3s] [REPEAT=3] [OUT=flamegraphs/example]
# Writes OUT/seeds-virtio/ and OUT/seeds-loop/: sweep.json, report.html and the plots as SVG (the
# per-run reports are left out of OUT to keep it small; they are in the scratch folder while it runs).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-3s}; REPEAT=${2:-3}; OUT=${3:-flamegraphs/example}
. scripts/bench-lib.sh
QDS=1,2,4,8,16,32,64,128
for kind in virtio loop; do
  if [ $kind = virtio ]; then target=(--file "$W/file.dat"); else target=(--device "$LOOP"); fi
  "$IOPATH" sweep --engine uring,aio,psync --qd $QDS --repeat "$REPEAT" --seed 1 --cooldown 1s \
    --runtime "$RUNTIME" "${target[@]}" --out "$W/seeds-$kind"
  mkdir -p "$OUT/seeds-$kind"
  cp "$W/seeds-$kind"/{sweep.json,report.html,*.svg} "$OUT/seeds-$kind/"
done
echo "plots and reports in $OUT/seeds-virtio and $OUT/seeds-loop"

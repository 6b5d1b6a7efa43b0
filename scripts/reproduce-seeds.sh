#!/usr/bin/env bash
# Reproduces the seeds' studies on this machine, with iopath's phase breakdown, each an
# `iopath sweep` with REPEAT runs per point in a seeded random order, on a file of the root file
# system (virtio-blk) and on a loop device backed by tmpfs:
#   qd     the YDB io_uring-vs-libaio comparison: uring, aio and psync over QD 1..128 (with the
#          Intel talk's IRQ and context-switch counts)
#   bs     the pread study: latency over block size 4 KiB..32 MiB at QD1, uring, aio and psync
#   batch  the SDC talk's batching: I/Os per submit call 1..32 at QD32, uring and aio
#   nvme   the bs study on the VM rig's emulated NVMe (scripts/vmtest --sweep, IOMMU off and
#          strict, Debian 6.12): OUT/bs-nvme
#   kernel the kernel study under emulation: uring and aio over QD 1..64 on Debian 6.1 and 6.12,
#          IOMMU off and strict: OUT/kernel-study
#   (both rig studies keep study.html and study.json from `iopath study`, each sweep as
#   <kernel>-iommu-off|strict/ with its points' median runs, and each pair's comparison as
#   <kernel>-compare/)
#   usage: sudo scripts/reproduce-seeds.sh [RUNTIME=3s] [REPEAT=3] [OUT=flamegraphs/example] [STUDIES=qd,bs,batch,nvme,kernel]
# Writes OUT/<study>-<target>/: sweep.json, report.html and the plots as SVG (the per-run
# reports are left out of OUT to keep it small; they are in the scratch folder while it runs).
# The qd study keeps its old folder names, OUT/seeds-virtio and OUT/seeds-loop.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-3s}; REPEAT=${2:-3}; OUT=${3:-flamegraphs/example}; STUDIES=${4:-qd,bs,batch,nvme,kernel}
. scripts/bench-lib.sh
BS=4k,16k,64k,256k,1m,4m,16m,32m
study() { # $1 folder prefix, then the sweep's own arguments
  local name=$1 kind target; shift
  for kind in virtio loop; do
    if [ $kind = virtio ]; then target=(--file "$W/file.dat"); else target=(--device "$LOOP"); fi
    "$IOPATH" sweep "$@" --repeat "$REPEAT" --seed 1 --cooldown 1s --runtime "$RUNTIME" "${target[@]}" \
      --out "$W/$name-$kind"
    mkdir -p "$OUT/$name-$kind"
    rm -f "$OUT/$name-$kind"/*.svg
    cp "$W/$name-$kind"/{sweep.json,report.html,*.svg} "$OUT/$name-$kind/"
    echo "$name on $kind: $OUT/$name-$kind"
  done
}
# A study in the VM rig: $1 the folder under OUT, $2 the kernels (--kernel), $3 the sweep. The
# rig's guests have 2 vCPUs and an emulated drive: shorter runs, one per point.
rig_study() {
  local name=$1 res="$W/$1" d k
  scripts/vmtest --kernel "$2" --no-verify --out "$res" --sweep "$3"
  rm -rf "${OUT:?}/$name"
  mkdir -p "$OUT/$name"
  cp "$res"/study.html "$res"/study.json "$OUT/$name/"
  for d in "$res"/*-iommu-off "$res"/*-iommu-strict; do
    k=$(basename "$d")
    mkdir -p "$OUT/$name/$k"
    cp "$d"/sweep/{sweep.json,report.html,*.svg} "$OUT/$name/$k/"
    # Each point's median run (15 KiB each): what `iopath compare` and `iopath study` read, so
    # the committed study can be compared and drawn again without the rig.
    mkdir -p "$OUT/$name/$k/runs"
    python3 -c 'import json,sys; print("\n".join(p["median_report"] for p in json.load(open(sys.argv[1]))["points"]))' \
      "$d/sweep/sweep.json" | while read -r r; do cp "$d/sweep/$r" "$OUT/$name/$k/runs/"; done
  done
  for d in "$res"/*-compare-sweep; do
    k=$(basename "$d")
    cp -r "$d" "$OUT/$name/${k%-sweep}"
  done
  echo "$name: $OUT/$name"
}
for s in ${STUDIES//,/ }; do
  case $s in
    qd) study seeds --engine uring,aio,psync --qd 1,2,4,8,16,32,64,128 ;;
    bs) study bs --engine uring,aio,psync --qd 1 --bs "$BS" --percentiles 50,99,99.9 ;;
    batch) study batch --engine uring,aio --qd 32 --batch-submit 1,2,4,8,16,32 ;;
    nvme) rig_study bs-nvme 6.12 "--engine uring,psync --qd 1 --bs 4k,64k,1m,4m,32m --repeat 1 --runtime 2s" ;;
    kernel) rig_study kernel-study all "--engine uring,aio --qd 1,4,16,64 --repeat 3 --runtime 2s" ;;
    *) echo "reproduce-seeds: unknown study '$s' (qd, bs, batch, nvme, kernel)" >&2; exit 2 ;;
  esac
done

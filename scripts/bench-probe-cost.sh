#!/usr/bin/env bash
# The BPF CPU each traced I/O costs, per hook and in all, from the kernel's own program stats
# (`iopath trace --prog-stats`), on a page-cache-backed loop device where probe cost is a large
# share of each I/O. Several binaries are measured side by side, interleaved, to compare builds:
#
#   scripts/bench-probe-cost.sh [RUNTIME_S] [REPEAT] [IOPATH_BIN ...]   (default: target/release/iopath)
#
# Prints one line per binary x engine x repeat: "ns of BPF CPU per I/O", then the median.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-2}; REPEAT=${2:-3}; shift $(( $# < 2 ? $# : 2 ))
BINS=("$@"); ((${#BINS[@]})) || BINS=(target/release/iopath)
[ "$(id -u)" = 0 ] || { echo "bench-probe-cost: run as root (BPF, loop devices)" >&2; exit 1; }
work=$(mktemp -d /var/tmp/iopath-probecost.XXXXXX)
dev=
cleanup() { [ -n "$dev" ] && losetup -d "$dev"; rm -rf "$work"; }
trap cleanup EXIT
truncate -s 256M "$work/backing"
dev=$(losetup -f --show "$work/backing")   # buffered backing file: reads come from the page cache
echo "binary engine rep ns_bpf_per_io"
for e in uring aio; do
  for i in "${!BINS[@]}"; do : > "$work/$i-$e"; done
  for ((r = 1; r <= REPEAT; r++)); do
    for i in "${!BINS[@]}"; do
      b=${BINS[$i]}
      ns=$("$b" trace --device "$dev" --engine "$e" --qd 8 --runtime "${RUNTIME}s" --prog-stats 2>&1 \
        | sed -n 's/.*probe cost (kernel BPF stats): \([0-9.]*\) ns.*/\1/p')
      echo "$b $e $r ${ns:-?}"
      echo "${ns:-0}" >> "$work/$i-$e"
    done
  done
  for i in "${!BINS[@]}"; do
    echo "median ${BINS[$i]} $e $(sort -n "$work/$i-$e" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') ns of BPF CPU per I/O"
  done
done

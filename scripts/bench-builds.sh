#!/usr/bin/env bash
# Two builds of iopath against each other, interleaved: what a change costs. On the RAM-backed
# loop device (CPU-bound: every nanosecond of probe cost shows as lost IOPS), io_uring QD32:
#   full     `iopath trace --full` of the bundled generator (it times its own job)
#   outside  `iopath trace -- iopath run ...`: the generator traced as another program
# REPEAT pairs each, the order alternating; ratios new/old are the geometric mean of the pairs
# with a 95% interval (scripts/paired.py). Then each build's BPF cost per I/O (--prog-stats) on
# the outside way. docs/routes.md "What an io_uring application waited" quotes this for the ring looks
# (old = the build before them, e206e86).
#   usage: sudo scripts/bench-builds.sh OLD_IOPATH NEW_IOPATH [RUNTIME_S=3] [REPEAT=5]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: scripts/bench-builds.sh OLD_IOPATH NEW_IOPATH [RUNTIME_S] [REPEAT]" >&2; exit 2; }
OLD=$(realpath "$1") NEW=$(realpath "$2") RUNTIME=${3:-3} REPEAT=${4:-5}
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "bench-builds: $b is not an executable iopath" >&2; exit 2; }; done
IOPATH=$NEW
. scripts/bench-lib.sh
full() { "$1" trace --device "$LOOP" --engine uring --qd 32 --runtime "${RUNTIME}s" --full --json - 2>/dev/null |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["iops"])'; }
outside() { "$1" trace --json "$W/t.json" -- "$NEW" run --device "$LOOP" --engine uring --qd 32 --runtime "${RUNTIME}s" \
    --json "$W/in.json" >/dev/null 2>&1
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["iops"])' "$W/in.json"; }
for way in full outside; do : > "$W/$way.old"; : > "$W/$way.new"; done
for r in $(seq "$REPEAT"); do
  for way in full outside; do
    if [ $((r % 2)) = 0 ]; then
      $way "$OLD" >> "$W/$way.old"; $way "$NEW" >> "$W/$way.new"
    else
      $way "$NEW" >> "$W/$way.new"; $way "$OLD" >> "$W/$way.old"
    fi
  done
done
echo "loop device, io_uring QD32, ${RUNTIME}s runs x $REPEAT pairs; IOPS new/old [95%]"
python3 - "$W" <<'PY'
import statistics as st, sys
sys.path.insert(0, "scripts")
from paired import paired
W = sys.argv[1]
for way, what in (("full", "trace --full (the generator)"), ("outside", "trace -- iopath run (an outside program)")):
    n = [float(x) for x in open(f"{W}/{way}.new")]
    o = [float(x) for x in open(f"{W}/{way}.old")]
    g, lo, hi = paired(n, o)
    print(f"  {what:<42} {g:.3f}x [{lo:.3f}-{hi:.3f}]  medians new {st.median(n):.0f} old {st.median(o):.0f}")
PY
for b in "$OLD" "$NEW"; do
  "$b" trace --prog-stats --json "$W/t.json" -- "$NEW" run --device "$LOOP" --engine uring --qd 32 \
      --runtime "${RUNTIME}s" --json "$W/in.json" 2>/dev/null | grep "probe cost" | sed "s|^ *|  $( [ "$b" = "$OLD" ] && echo old || echo new ): |"
done

#!/usr/bin/env bash
# iopath's load generator against fio, same job, interleaved, REPEAT runs of each per point.
# Prints, per point, the medians, the IOPS and CPU-per-I/O ratios (iopath / fio) as the geometric
# mean of the per-pair ratios with a 95% interval, and whether the interval clears 1.00x: on this
# noisy VM a point is only "behind" or "ahead" when the pairs say so, not when one median does.
# A table holds 24 such intervals, so at 95% about one of them clears 1.00x by chance (and the
# host's drift over minutes is not i.i.d. noise): a point judged better or WORSE is measured again
# with fresh pairs, and the verdict stands only when that rerun agrees.
# QD1 on the RAM loop device is decided mostly by where the scheduler puts the submitter and the
# loop driver's kworker (one vCPU or two: 3-6x apart here, and this guest's choice swings with the
# host's load), so after the table those points run again with the placement fixed (taskset for
# the generator, the unbound-workqueue cpumask for the kworker, restored on exit): both on CPU 0,
# then one on each vCPU. There only the generators' own costs differ.
#   usage: sudo scripts/bench-vs-fio.sh [RUNTIME_S=5] [REPEAT=3] [QDS="1 32 128"] [TARGETS="file loop"] [ENGINES="uring aio"]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-5}; REPEAT=${2:-3}; QDS=${3:-"1 32 128"}; TARGETS=${4:-"file loop"}; ENGINES=${5:-"uring aio"}
. scripts/bench-lib.sh

# One point's line from the two files of "iops cpu" runs (run r of each is a pair).
summarize() { # kind engine qd fio-file iopath-file verdict-file
  python3 - "$@" <<'PY'
import statistics as st, sys
sys.path.insert(0, "scripts")
from paired import paired, verdict
kind, eng, qd, ff, fi, vf = sys.argv[1:]
f = [list(map(float, l.split())) for l in open(ff)]
i = [list(map(float, l.split())) for l in open(fi)]
io, io_lo, io_hi = paired([x[0] for x in i], [x[0] for x in f])
cp, cp_lo, cp_hi = paired([x[1] for x in i], [x[1] for x in f])
med = lambda rows, k: st.median(x[k] for x in rows)
v_io, v_cp = verdict(io, io_lo, io_hi, True), verdict(cp, cp_lo, cp_hi, False)
open(vf, "w").write(f"{v_io} {v_cp}\n")
print(f"{kind:<6} {eng:<6} {int(qd):4d} {med(f,0):9.0f} {med(i,0):9.0f}  {io:5.2f}x [{io_lo:4.2f}-{io_hi:4.2f}] {v_io:<6}"
      f" {med(f,1):8.0f}ns {med(i,1):8.0f}ns  {cp:5.2f}x [{cp_lo:4.2f}-{cp_hi:4.2f}] {v_cp}")
PY
}

pairs() { # kind target engine qd -> $W/fio, $W/iop: REPEAT runs of each, run r of each a pair
  : > "$W/fio"; : > "$W/iop"
  for r in $(seq "$REPEAT"); do
    # Alternate which goes first, so drift on this noisy VM hits both alike.
    if ((r % 2)); then run_fio "$@" "$RUNTIME" >> "$W/fio"; run_iopath "$@" "$RUNTIME" >> "$W/iop"
    else run_iopath "$@" "$RUNTIME" >> "$W/iop"; run_fio "$@" "$RUNTIME" >> "$W/fio"; fi
  done
}

point() { # label kind target engine qd: one point's line, and its rerun when not even
  local label=$1; shift
  pairs "$@"; summarize "$label" "$3" "$4" "$W/fio" "$W/iop" "$W/v1"
  [ "$(cat "$W/v1")" = "even even" ] && return
  pairs "$@"; summarize rerun "" "$4" "$W/fio" "$W/iop" "$W/v2"
  local i1 c1 i2 c2
  read -r i1 c1 < "$W/v1"; read -r i2 c2 < "$W/v2"
  [ "$i1" = "$i2" ] || i1=even; [ "$c1" = "$c2" ] || c1=even
  printf '%-6s %-6s %4s   -> iops %s, cpu/io %s\n' "" "" "" "$i1" "$c1"
}

printf '%-6s %-6s %4s %9s %9s  %-24s %10s %10s  %s\n' target engine qd fio_iops iop_iops \
  "iops iop/fio [95%]" fio_cpu/io iop_cpu/io "cpu/io iop/fio [95%]"
for kind in $TARGETS; do
  [ $kind = file ] && t="$W/file.dat" || t=$LOOP
  for eng in $ENGINES; do
    for qd in $QDS; do point $kind $kind "$t" $eng $qd; done
  done
done

# The placement-equal lines for QD1 on the loop device (see the top): generator on CPU 0, and the
# loop kworker on CPU 0 too (1vcpu) or on CPU 1 (2vcpu: every I/O crosses vCPUs twice).
case " $TARGETS " in *" loop "*) ;; *) exit 0 ;; esac
case " $QDS " in *" 1 "*) ;; *) exit 0 ;; esac
WQ=/sys/devices/virtual/workqueue/cpumask
if [ ! -w $WQ ] || [ "$(nproc)" -lt 2 ]; then echo "(no $WQ or one CPU: skipping the placement-equal lines)"; exit 0; fi
WQ_WAS=$(cat $WQ)
trap 'echo "$WQ_WAS" > $WQ; cleanup' EXIT
echo "QD1 on the loop device, generator on CPU 0, loop kworker on CPU 0 (1vcpu) or CPU 1 (2vcpu):"
for placed in 1vcpu:1 2vcpu:2; do
  echo "${placed#*:}" > $WQ
  for eng in $ENGINES; do
    WRAP="taskset -c 0" point "${placed%:*}" loop "$LOOP" $eng 1
  done
done

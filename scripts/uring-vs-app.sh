#!/usr/bin/env bash
# What an io_uring application waited, against what iopath traced of it: fio, and iopath's own
# generator run as an outside program (`iopath trace -- iopath run ...`, so none of its user_data
# stamps are read), at each iodepth, inline and SQPOLL, 4k random O_DIRECT reads of a scratch file.
# Each row sets the program's own mean latency (fio's lat_ns, the generator's lat_ns) against
# iopath's per-I/O mean, and shows the mean width of the bounds iopath could only bound (when the
# application took a CQE from the ring, when an SQPOLL application wrote its SQE): docs/routes.md's
# "What the application waited" table is this script's output.
#   usage: sudo scripts/uring-vs-app.sh [--runtime S=3] [--qds "1 4 16 32 64"] [--check] [FILE]
# --check exits 1 when a row is more than 5% off (tests/uring_ring.rs runs it so); FILE defaults
# to a 256 MiB file this script makes under /var/tmp and removes.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=3 QDS="1 4 16 32 64" CHECK=0 FILE=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runtime) RUNTIME=$2; shift 2 ;;
    --qds) QDS=$2; shift 2 ;;
    --check) CHECK=1; shift ;;
    -*) echo "uring-vs-app.sh: unknown option $1 (see the usage at the top of the script)" >&2; exit 2 ;;
    *) FILE=$1; shift ;;
  esac
done
IOPATH=${IOPATH:-target/release/iopath}
[ -x "$IOPATH" ] || { echo "uring-vs-app.sh: $IOPATH not built: cargo build --release (or set IOPATH)" >&2; exit 2; }
command -v fio >/dev/null || { echo "uring-vs-app.sh: fio is not installed: apt-get install fio" >&2; exit 2; }
W=$(mktemp -d /var/tmp/iopath-uring-vs-app.XXXXXX)
trap 'rm -rf "$W"' EXIT
if [ -z "$FILE" ]; then
  FILE=$W/t.dat
  # Made here, on the root file system (a disk, not tmpfs: O_DIRECT on tmpfs would time RAM).
  fio --name=mk --filename="$FILE" --size=256m --rw=write --bs=1m --direct=1 >/dev/null
fi

row() { # program mode qd app-json trace-json
  python3 - "$@" <<'PY'
import json, sys
prog, mode, qd, app, tr = sys.argv[1:]
a, r = json.load(open(app)), json.load(open(tr))
own = a["jobs"][0]["read"]["lat_ns"]["mean"] if prog == "fio" else a["lat_ns"]["mean"]
ph = r.get("phases", {})
b = lambda k: "%.2f" % (ph[k]["mean_ns"] / 1000) if k in ph else "-"
ratio = r["lat_ns"]["mean"] / own
ok = abs(ratio - 1) <= 0.05 and r.get("correlated_fraction", 0) >= 0.99
print(f"| {prog} | {mode} | {qd} | {own/1000:.1f} | {r['lat_ns']['mean']/1000:.1f} | {ratio:.3f} "
      f"| {b('cq_ring_bound')} | {b('sq_ring_bound')} | {100*r.get('correlated_fraction',0):.1f}% | {'ok' if ok else 'OFF'} |")
sys.exit(0 if ok else 1)
PY
}

echo "| program | mode | iodepth | its own mean (us) | iopath (us) | iopath / own | CQ bound (us) | SQ bound (us) | followed | within 5% |"
echo "|---|---|---|---|---|---|---|---|---|---|"
fail=0
for prog in fio generator; do
  for mode in inline sqpoll; do
    for qd in $QDS; do
      if [ "$prog" = fio ]; then
        sq=(); [ "$mode" = sqpoll ] && sq=(--sqthread_poll=1)
        cmd=(fio --name=t --ioengine=io_uring --iodepth="$qd" "${sq[@]}" --rw=randread --bs=4k --direct=1
          --size=256m --runtime="$RUNTIME" --time_based --output-format=json --output="$W/app.json" --filename="$FILE")
      else
        sq=(); [ "$mode" = sqpoll ] && sq=(--sqpoll)
        cmd=("$IOPATH" run --file "$FILE" --engine uring "${sq[@]}" --qd "$qd" --runtime "${RUNTIME}s" --json "$W/app.json")
      fi
      rm -f "$W/app.json" "$W/trace.json"
      if ! "$IOPATH" trace --json "$W/trace.json" -- "${cmd[@]}" >/dev/null 2>"$W/err"; then
        echo "| $prog | $mode | $qd | trace failed: $(tail -1 "$W/err") |" ; fail=1; continue
      fi
      row "$prog" "$mode" "$qd" "$W/app.json" "$W/trace.json" || fail=1
    done
  done
done
echo
echo "(iopath $("$IOPATH" --version | awk '{print $2}'), kernel $(uname -r), ${RUNTIME}s a row; rerun: sudo scripts/uring-vs-app.sh)"
[ "$CHECK" = 1 ] && exit $fail
exit 0

#!/usr/bin/env bash
# The "unlinked" reads, against an independent tracer: dd's 5000 direct reads of a freshly
# written 64 MiB ext4 file, traced by iopath while bpftrace matches dd's block_rq_issue to
# block_rq_complete by sector. Per try: what iopath followed and left unlinked, and how many of
# dd's issued requests bpftrace saw completed (issued - completed: never reported by the kernel).
#   sudo scripts/unlinked-dd.sh [TRIES=8]      (after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
TRIES=${1:-8}
IOPATH=${IOPATH:-./target/release/iopath}
[ -x "$IOPATH" ] || cargo build --release --locked
[ -d /sys/kernel/tracing/events ] || mount -t tracefs tracefs /sys/kernel/tracing
W=$(mktemp -d /var/tmp/iopath-unlinked.XXXXXX)
trap 'rm -rf "$W"' EXIT
BT='tracepoint:block:block_rq_issue /comm == "dd"/ { @iss[args->sector] = 1; @issued = count(); }
tracepoint:block:block_rq_complete /@iss[args->sector]/ { delete(@iss[args->sector]); @completed = count(); }
END { clear(@iss); }'
printf '%-4s %9s %9s %9s %10s\n' try followed unlinked issued completed
for i in $(seq "$TRIES"); do
  rm -f "$W/t.dat" "$W/r.json"
  "$IOPATH" run --file "$W/t.dat" --size 64m --ios 1 >/dev/null 2>&1
  seen=$(bpftrace -e "$BT" -c "$IOPATH trace --json $W/r.json -- dd if=$W/t.dat of=/dev/null bs=4k count=5000 iflag=direct" 2>/dev/null |
    awk -F': ' '/^@issued/ {i=$2} /^@completed/ {c=$2} END {print i+0, c+0}')
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["phases"]["total"]["count"], r["unlinked"])' "$W/r.json" |
    { read -r f u; read -r is co <<<"$seen"; printf '%-4s %9s %9s %9s %10s\n' "$i" "$f" "$u" "$is" "$co"; }
done

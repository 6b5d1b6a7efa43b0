#!/bin/bash
# The README's pictures of the three report pages, as a reader sees them in Chromium at 1280 px:
# a trace (with its flamegraph), a sweep, and the compare page of that trace against the same job
# under a blk-throttle limit of 20000 IOPS (a cgroup v1 blkio group this script makes), on a loop
# device over a scratch file; everything it makes is removed after.
#   scripts/screenshots.sh [OUT_DIR]   (default docs/img; run as root after scripts/setup.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/img}
mkdir -p "$out"
cargo build --release --locked -q
bin=target/release/iopath
work=$(mktemp -d /var/tmp/iopath-shots.XXXXXX)
dev=
cg=/sys/fs/cgroup/blkio/iopath-shots
cleanup() {
  [ -n "$dev" ] && losetup -d "$dev" 2>/dev/null || true
  rmdir "$cg" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
truncate -s 256M "$work/backing"
dev=$(losetup -f --show --direct-io=on "$work/backing")
"$bin" trace --device "$dev" --qd 8 --runtime 5s --interval 250ms --flamegraph --out "$work/trace" >/dev/null
"$bin" sweep --engine uring,aio --qd 1,4,16,32 --repeat 3 --seed 1 --runtime 1s --device "$dev" \
  --out "$work/sweep" >/dev/null 2>&1
mkdir -p "$cg"
echo "$(cat "/sys/block/${dev#/dev/}/dev") 20000" > "$cg/blkio.throttle.read_iops_device"
sh -c 'echo $$ > "$0/cgroup.procs" && exec "$@"' "$cg" "$bin" trace --device "$dev" --qd 8 --runtime 5s \
  --interval 250ms --flamegraph --out "$work/limited" >/dev/null
"$bin" compare "$work/trace/report.json" "$work/limited/report.json" --out "$work/compare" >/dev/null
shot() { # page, png, height
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=5000 \
    --window-size="1280,$3" --screenshot="$2" "file://$1" 2>/dev/null
  echo "$2"
}
shot "$work/trace/report.html" "$out/report-trace.png" 2700
shot "$work/sweep/report.html" "$out/report-sweep.png" 1500
shot "$work/compare/report.html" "$out/report-compare.png" 2600

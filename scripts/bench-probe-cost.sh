#!/usr/bin/env bash
# The BPF CPU each traced I/O costs, per hook and in all, from the kernel's own program stats
# (`iopath trace --prog-stats`), on a page-cache-backed loop device where probe cost is a large
# share of each I/O. Several binaries are measured side by side, interleaved, to compare builds:
#
#   scripts/bench-probe-cost.sh [RUNTIME_S] [REPEAT] [IOPATH_BIN ...]   (default: target/release/iopath)
#
# Prints one line per binary x engine x repeat: "ns of BPF CPU per I/O", then the median, in all
# and per hook (the hooks that cost more than 1 ns per I/O). Where the completing CPU is not the
# submitting one, every hook pays for the per-I/O state's cache lines crossing CPUs: runs of one
# binary differ by up to 30% with placement, so compare binaries within one run only.
#
# PLACE=same or PLACE=cross pins it: the traced generator on CPU 0 and the loop device's worker
# (an unbound workqueue: the kernel's default unbound cpumask, restored on exit) on CPU 0 as
# well, or on CPU 1, where every request then completes. The difference is what the per-I/O
# state's trips between CPUs cost.
#
# The word `peer` among the binaries measures scripts/peer-device.bt the same way: `iopath run`
# (the first binary's) under the two-probe bpftrace tracer of the device phase, its programs'
# run time from the kernel's stats (kernel.bpf_stats_enabled, restored on exit) over the
# requests its completion probe saw. Its hash-map entry crosses CPUs as iopath's state does.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-2}; REPEAT=${2:-3}; shift $(( $# < 2 ? $# : 2 ))
BINS=("$@"); ((${#BINS[@]})) || BINS=(target/release/iopath)
[ "$(id -u)" = 0 ] || { echo "bench-probe-cost: run as root (BPF, loop devices)" >&2; exit 1; }
PLACE=${PLACE:-any}
wqmask=/sys/devices/virtual/workqueue/cpumask
case $PLACE in
  any) pin=() ;;
  same|cross)
    [ "$(nproc)" -ge 2 ] && [ -w "$wqmask" ] || { echo "bench-probe-cost: PLACE=$PLACE needs 2 CPUs and $wqmask" >&2; exit 1; }
    pin=(taskset -c 0) ;;
  *) echo "bench-probe-cost: PLACE is same, cross or any, not '$PLACE'" >&2; exit 1 ;;
esac
work=$(mktemp -d /var/tmp/iopath-probecost.XXXXXX)
dev= oldmask= oldstats= bt= tracefs_mounted=
# bpftrace ends on SIGINT; once here it sat in epoll_wait after one: KILL after 5 s.
bt_stop() {
  kill -INT "$bt" 2> /dev/null || true
  for _ in $(seq 50); do kill -0 "$bt" 2> /dev/null || break; sleep 0.1; done
  kill -KILL "$bt" 2> /dev/null || true
  wait "$bt" 2> /dev/null || true
  bt=
}
cleanup() {
  [ -n "$bt" ] && bt_stop
  [ -n "$oldstats" ] && sysctl -q kernel.bpf_stats_enabled="$oldstats"
  [ -n "$tracefs_mounted" ] && umount /sys/kernel/tracing
  [ -n "$oldmask" ] && echo "$oldmask" > "$wqmask"
  [ -n "$dev" ] && losetup -d "$dev"
  rm -rf "$work"
}
trap cleanup EXIT
if [ "$PLACE" != any ]; then
  oldmask=$(cat "$wqmask")
  if [ "$PLACE" = same ]; then echo 1 > "$wqmask"; else echo 2 > "$wqmask"; fi
fi
RUNBIN=${BINS[0]}; [ "$RUNBIN" = peer ] && RUNBIN=target/release/iopath
if printf '%s\n' "${BINS[@]}" | grep -qx peer; then
  command -v bpftrace > /dev/null && command -v bpftool > /dev/null \
    || { echo "bench-probe-cost: the peer needs bpftrace and bpftool (scripts/setup.sh installs them)" >&2; exit 1; }
  if [ ! -d /sys/kernel/tracing/events ]; then
    mount -t tracefs tracefs /sys/kernel/tracing && tracefs_mounted=1
  fi
  oldstats=$(sysctl -n kernel.bpf_stats_enabled)
  sysctl -q kernel.bpf_stats_enabled=1
fi
# The peer's block_rq_* programs: total run ns and the completion program's runs.
peer_stats() {
  bpftool prog show -j | python3 -c '
import json, sys
d = [p for p in json.load(sys.stdin) if p.get("name", "").startswith("block_rq_")]
print(sum(p.get("run_time_ns", 0) for p in d), sum(p.get("run_cnt", 0) for p in d if "comp" in p["name"]))'
}
# One run under the peer: "ns_per_io".
peer_run() { # engine
  bpftrace scripts/peer-device.bt > "$work/bt.out" 2> "$work/bt.err" &
  bt=$!
  for _ in $(seq 300); do grep -q '^Attaching' "$work/bt.out" && break; sleep 0.1; done
  grep -q '^Attaching' "$work/bt.out" || { echo "bench-probe-cost: bpftrace did not attach: $(tail -3 "$work/bt.err")" >&2; exit 1; }
  read -r t0 n0 < <(peer_stats)
  "${pin[@]}" "$RUNBIN" run --device "$dev" --engine "$1" --qd 8 --runtime "${RUNTIME}s" > /dev/null 2> "$work/run.err" \
    || { bt_stop; echo "bench-probe-cost: the peer's run failed: $(tail -3 "$work/run.err")" >&2; exit 1; }
  read -r t1 n1 < <(peer_stats)
  bt_stop
  awk -v t=$((t1 - t0)) -v n=$((n1 - n0)) 'BEGIN {if (n > 0) printf "%.0f\n", t / n; else print "?"}'
}
truncate -s 256M "$work/backing"
dev=$(losetup -f --show "$work/backing")   # buffered backing file: reads come from the page cache
echo "binary engine rep ns_bpf_per_io"
for e in uring aio; do
  for i in "${!BINS[@]}"; do : > "$work/$i-$e"; : > "$work/$i-$e-hooks"; done
  for ((r = 1; r <= REPEAT; r++)); do
    for i in "${!BINS[@]}"; do
      b=${BINS[$i]}
      if [ "$b" = peer ]; then
        ns=$(peer_run "$e")
        echo "peer(bpftrace) $e $r $ns"
        echo "$ns" >> "$work/$i-$e"
        continue
      fi
      out=$("${pin[@]}" "$b" trace --device "$dev" --engine "$e" --qd 8 --runtime "${RUNTIME}s" --prog-stats 2>&1)
      ns=$(sed -n 's/.*probe cost (kernel BPF stats): \([0-9.]*\) ns.*/\1/p' <<< "$out")
      echo "$b $e $r ${ns:-?}"
      echo "${ns:-0}" >> "$work/$i-$e"
      # "    family:hook   N runs   X ns/run   Y ns per I/O" -> "hook Y"
      awk '/probe cost/ {on = 1; next} on && /ns per I\/O$/ {print $1, $(NF-3); next} on {on = 0}' \
        <<< "$out" >> "$work/$i-$e-hooks"
    done
  done
  for i in "${!BINS[@]}"; do
    echo "median ${BINS[$i]} $e $(sort -n "$work/$i-$e" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') ns of BPF CPU per I/O"
    [ -s "$work/$i-$e-hooks" ] || continue
    for h in $(awk '$2 > 1 {print $1}' "$work/$i-$e-hooks" | sort -u); do
      echo "  median $h $(awk -v h="$h" '$1 == h {print $2}' "$work/$i-$e-hooks" | sort -n \
        | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}') ns per I/O"
    done
  done
done

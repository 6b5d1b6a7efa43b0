#!/usr/bin/env bash
# What always-on costs: the same job alone and with `iopath serve` running system-wide (started
# before the run, SIGTERM after), interleaved in rotating order, REPEAT pairs per point:
#   loop  uring QD32 / psync      on a tmpfs-backed loop device (CPU-bound: every ns of probe
#                                 cost is lost IOPS; the worst case)
#   file  uring QD1 / QD32        on a file of the root file system (virtio-blk)
#   syscalls                      dd of 1-byte blocks /dev/zero -> /dev/null: read and write
#                                 calls that are no disk I/O, in syscalls/s
#   getppid                       perf bench syscall basic: a call that is no I/O, in calls/s
# serve hooks block I/O and io_uring alone (no syscall hook unless --sync-syscalls), so the last
# two measure what always-on costs a process that does no disk I/O: nothing, or it is a bug.
# serve holds BPF_ENABLE_STATS (its self-metrics): its own programs' clock reads are in the ratios.
# Beside it, serve's floor: the same hooks attached with empty bodies (serve --empty-probes), what
# any agent on these hooks pays before doing any work: a target below the floor is out of reach.
# And the one-hook peer: a bpftrace script with the anchors' one block_rq_complete probe and a
# histogram by disk (scripts/peer-one-hook.bt); serve's default must cost no more than it + 2%.
# serve is measured as it runs always on, past its start: before each measured run a 1 s warm
# run on the same target lets serve judge that disk's stamps (its first check window: the check
# hooks attached ~1 s) and its first measuring window (BPF_ENABLE_STATS, 1 s) close; the empty
# arm gets the same warm run. What a check window costs while open: docs/performance.md.
# Ratios are with / without, paired run by run (scripts/paired.py: geometric mean, 95% interval).
#   usage: sudo scripts/bench-serve-overhead.sh [RUNTIME_S=5] [REPEAT=5]
# POINTS="file uring 32;getppid" measures those points alone (the names printed, ';' between).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-5}; REPEAT=${2:-5}
. scripts/bench-lib.sh
PORT=19437

one() { # loop|file uring|psync QD -> "iops"
  local flag t; if [ "$1" = loop ]; then flag=--device; t=$LOOP; else flag=--file; t=$W/file.dat; fi
  if [ "$2" = psync ]; then
    "$IOPATH" run $flag "$t" --engine psync --bs 4k --rw randread --runtime "${RUNTIME}s" --json - 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["iops"])'
  else
    "$IOPATH" run $flag "$t" --engine uring --qd "$3" --bs 4k --rw randread --runtime "${RUNTIME}s" --json - 2>/dev/null |
      python3 -c 'import json,sys; print(json.load(sys.stdin)["iops"])'
  fi
}
getppid() { # -> calls/s
  perf bench syscall basic 2>/dev/null | awk '/ops\/sec/ {print $1}'
}
syscalls() { # -> syscalls/s (a read and a write per byte)
  local n=1000000 s e
  s=$(date +%s.%N); dd if=/dev/zero of=/dev/null bs=1 count=$n status=none; e=$(date +%s.%N)
  python3 -c "print(2*$n/($e-$s))"
}
disk_of() { # loop|file -> the disk whose stamps serve judges for that target
  if [ "$1" = loop ]; then basename "$LOOP"; return; fi
  local src; src=$(findmnt -no SOURCE -T "$W")
  local parent; parent=$(lsblk -no PKNAME "$src" 2>/dev/null | head -1)
  basename "${parent:-$src}"  # a partition's disk, or the disk itself
}
with_serve() { # [--empty-probes] CMD...: CMD with serve's probes attached
  local extra=(); [ "$1" = --empty-probes ] && { extra=("$1"); shift; }
  "$IOPATH" serve --listen 127.0.0.1:$PORT "${extra[@]}" >/dev/null 2>&1 & local pid=$!
  # Its probes are attached once the exposition names them (loading takes a second or more).
  local i; for i in $(seq 100); do
    curl -s "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -q '^iopath_probe_info{' && break
    sleep 0.1
  done
  if [ "$1" = one ]; then
    local saved=$RUNTIME; RUNTIME=1; "$@" > /dev/null; RUNTIME=$saved
    local disk; disk=$(disk_of "$2")
    if [ ${#extra[@]} -eq 0 ]; then
      for i in $(seq 200); do
        curl -s "http://127.0.0.1:$PORT/metrics" 2>/dev/null | grep -q "^iopath_stamps_trusted{disk=\"$disk\",stamp=\"io_start_time_ns\"}" && break
        sleep 0.1
      done
    fi
    sleep 1
  fi
  "$@"
  kill -TERM $pid; wait $pid || true
  sleep 1
}
with_peer() { # CMD...: CMD under the bpftrace one-hook peer
  bpftrace scripts/peer-one-hook.bt > "$W/bt.out" 2> "$W/bt.err" & local bt=$!
  local i; for i in $(seq 300); do grep -q '^Attaching' "$W/bt.out" && break; sleep 0.1; done
  grep -q '^Attaching' "$W/bt.out" || { echo "bench-serve-overhead: bpftrace did not attach: $(tail -3 "$W/bt.err")" >&2; exit 1; }
  "$@"
  kill -INT $bt; wait $bt || true
}
printf '%-22s %10s %10s %10s %10s  %-28s %-28s %s\n' point alone "serve" "empty" "peer" "serve ratio [95%]" \
  "floor ratio [95%]" "serve vs peer [95%] (target >= 0.98x)"
IFS=';' read -r -a points <<< "${POINTS:-loop uring 32;loop psync 1;file uring 1;file uring 32;syscalls;getppid}"
for point in "${points[@]}"; do
  : > "$W/a"; : > "$W/b"; : > "$W/c"; : > "$W/d"
  for r in $(seq "$REPEAT"); do
    # Rotate which goes first, so the host's drift hits all alike.
    case $point in syscalls|getppid) run=($point) ;; *) run=(one $point) ;; esac
    arms=(a b c d)
    for i in 0 1 2 3; do
      case ${arms[$(( (i + r) % 4 ))]} in
        a) "${run[@]}" >> "$W/a" ;;
        b) with_serve "${run[@]}" >> "$W/b" ;;
        c) with_serve --empty-probes "${run[@]}" >> "$W/c" ;;
        d) with_peer "${run[@]}" >> "$W/d" ;;
      esac
    done
  done
  read -r ratio lo hi verdict < <(python3 scripts/paired.py "$W/b" "$W/a")
  read -r fr flo fhi fverdict < <(python3 scripts/paired.py "$W/c" "$W/a")
  read -r pr plo phi _ < <(python3 scripts/paired.py "$W/b" "$W/d")
  # serve within 2% of the peer: the interval's upper end reaches 0.98x.
  pv=$(python3 -c "print('met' if $phi >= 0.98 else 'MISSED')")
  printf '%-22s %10.0f %10.0f %10.0f %10.0f  %-28s %-28s %s\n' "$point" "$(median < "$W/a")" "$(median < "$W/b")" \
    "$(median < "$W/c")" "$(median < "$W/d")" "$(printf '%.3fx [%.3f-%.3f] %s' "$ratio" "$lo" "$hi" "$verdict")" \
    "$(printf '%.3fx [%.3f-%.3f] %s' "$fr" "$flo" "$fhi" "$fverdict")" "$(printf '%.3fx [%.3f-%.3f] %s' "$pr" "$plo" "$phi" "$pv")"
done

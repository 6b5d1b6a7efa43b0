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
# Ratios are with / without, paired run by run (scripts/paired.py: geometric mean, 95% interval).
#   usage: sudo scripts/bench-serve-overhead.sh [RUNTIME_S=5] [REPEAT=5]
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
with_serve() {
  "$IOPATH" serve --listen 127.0.0.1:$PORT >/dev/null 2>&1 & local pid=$!
  sleep 1.5
  "$@"
  kill -TERM $pid; wait $pid || true
  sleep 1
}
printf '%-22s %12s %12s  %s\n' point alone "with serve" "ratio [95%]"
for point in "loop uring 32" "loop psync 1" "file uring 1" "file uring 32" "syscalls" "getppid"; do
  : > "$W/a"; : > "$W/b"
  for r in $(seq "$REPEAT"); do
    # Rotate which goes first, so the host's drift hits both alike.
    case $point in syscalls|getppid) run=($point) ;; *) run=(one $point) ;; esac
    if (( r % 2 )); then
      "${run[@]}" >> "$W/a"; with_serve "${run[@]}" >> "$W/b"
    else
      with_serve "${run[@]}" >> "$W/b"; "${run[@]}" >> "$W/a"
    fi
  done
  read -r ratio lo hi verdict < <(python3 scripts/paired.py "$W/b" "$W/a")
  printf '%-22s %12.0f %12.0f  %.3fx [%.3f-%.3f] %s\n' "$point" "$(median < "$W/a")" "$(median < "$W/b")" "$ratio" "$lo" "$hi" "$verdict"
done

#!/usr/bin/env bash
# What tracing costs: the same job with and without `iopath trace`, interleaved (alternating which
# goes first), median of REPEAT runs, on a file of the root file system (virtio-blk) and on a loop
# device backed by tmpfs (CPU-bound, where every probe's cost shows). Prints the IOPS ratio
# traced / untraced per point: histogram mode (trace), --events, and --flamegraph (997 Hz sampling).
# Then buffered reads of a cached file against a bpftrace peer (`cached`, see there).
#   usage: sudo scripts/bench-overhead.sh [RUNTIME_S=5] [REPEAT=5] [QDS="1 32"] [ENGINES="uring aio"]
#          [TARGETS="file loop cached"]
# Set SKIP_HOOKS=irq,softirq (hook name fragments, passed as --skip-hooks) to measure the tracer
# without some hooks.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-5}; REPEAT=${2:-5}; QDS=${3:-"1 32"}; ENGINES=${4:-"uring aio"}; TARGETS=${5:-"file loop cached"}
. scripts/bench-lib.sh

one() { # mode kind target engine qd -> "iops lost correlated"; mode: run | trace | events | flame
  local mode=$1 kind=$2 t=$3 eng=$4 qd=$5 flag cmd=trace extra=(); [ "$kind" = file ] && flag=--file || flag=--device
  [ "$mode" = run ] && cmd=run
  [ "$mode" != run ] && [ -n "${SKIP_HOOKS:-}" ] && extra+=(--skip-hooks "$SKIP_HOOKS")
  [ "$mode" = events ] && extra+=(--events)
  [ "$mode" = flame ] && extra+=(--flamegraph --out "$W/flamegraph-out")
  if ! "$IOPATH" "$cmd" $flag "$t" --engine "$eng" --qd "$qd" --runtime "${RUNTIME}s" "${extra[@]}" --json - \
      > "$W/out.json" 2> "$W/err"; then
    echo "bench-overhead: iopath $cmd ($mode $kind $eng qd$qd) failed: $(tail -3 "$W/err")" >&2
    exit 1
  fi
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["iops"], r.get("lost_events",{}).get("total",0), r.get("correlated_fraction",1))' "$W/out.json"
}

MODES=(run trace events flame)
KINDS=$(for k in $TARGETS; do [ "$k" = cached ] || echo "$k"; done)
[ -n "$KINDS" ] && printf '%-6s %-6s %4s %10s %10s %8s %10s %8s %10s %8s %9s %10s\n' target engine qd untraced traced ratio +events ratio +flame ratio lost_max correlated
for kind in $KINDS; do
  [ $kind = file ] && t="$W/file.dat" || t=$LOOP
  for eng in $ENGINES; do
    for qd in $QDS; do
      for m in "${MODES[@]}"; do : > "$W/$m"; done
      for r in $(seq "$REPEAT"); do
        # Rotate the order, so drift on this noisy VM hits every mode alike.
        for i in 0 1 2 3; do
          m=${MODES[$(( (r + i) % 4 ))]}
          one "$m" $kind "$t" $eng $qd >> "$W/$m"
        done
      done
      u=$(cut -d' ' -f1 "$W/run" | median); tr=$(cut -d' ' -f1 "$W/trace" | median)
      ev=$(cut -d' ' -f1 "$W/events" | median); fl=$(cut -d' ' -f1 "$W/flame" | median)
      lost=$(cat "$W/trace" "$W/events" | cut -d' ' -f2 | sort -g | tail -1); corr=$(cut -d' ' -f3 "$W/trace" | median)
      awk -v k=$kind -v e=$eng -v q=$qd -v u="$u" -v t="$tr" -v ev="$ev" -v fl="$fl" -v l="$lost" -v c="$corr" 'BEGIN {
        printf "%-6s %-6s %4d %10.0f %10.0f %7.3fx %10.0f %7.3fx %10.0f %7.3fx %9d %10.4f\n", k, e, q, u, t, t/u, ev, ev/u, fl, fl/u, l, c }'
    done
  done
done

# The page cache: buffered 4k sequential reads of a file the cache already holds (psync, one
# thread), where the page-cache route's hooks run on every call and no call waits for a device:
# the cheapest I/O there is, so their cost shows whole. Four ways, interleaved in rotating order:
# untraced; `iopath trace` (every call split into on CPU / waited / run queue through the
# syscall hooks); `iopath trace --pagecache count` (no syscall hook: reads and pages added
# counted per CPU from filemap's tracepoints); and the peer, the same untraced run under a
# two-probe bpftrace counter of those tracepoints (mm_filemap_get_pages: once per read;
# mm_filemap_add_to_page_cache: once per page missed). Each of iopath's two modes is paired
# with the peer run by run (scripts/paired.py): iopath must not cost more ("even" or "better").
# A fifth way is the floor of any design built on the syscall hooks: the same run under an
# empty, filtered bpftrace pair on raw_syscalls (enabling them sends every system call through
# the slow entry path).
case " $TARGETS " in *" cached "*) ;; *) exit 0 ;; esac
PEER='tracepoint:filemap:mm_filemap_get_pages { @reads = count(); }
tracepoint:filemap:mm_filemap_add_to_page_cache { @misses = count(); }'
FLOOR='tracepoint:raw_syscalls:sys_enter /pid == 1/ {} tracepoint:raw_syscalls:sys_exit /pid == 1/ {}'
# bpftrace finds tracepoints through tracefs: mounted for this run when missing, unmounted after.
TRACEFS_MOUNTED=""
if [ ! -d /sys/kernel/tracing/events ]; then
  mount -t tracefs tracefs /sys/kernel/tracing && TRACEFS_MOUNTED=1
fi
trap '[ -n "$TRACEFS_MOUNTED" ] && umount /sys/kernel/tracing; cleanup' EXIT
cat "$W/file.dat" > /dev/null # into the page cache (1 GiB)

cached_one() { # mode -> "iops ios peer_reads"; mode: run | split | count | peer | floor
  local mode=$1 cmd=(run) bt="" reads=- script=""
  [ "$mode" = split ] && cmd=(trace)
  [ "$mode" = count ] && cmd=(trace --pagecache count)
  [ "$mode" = peer ] && script=$PEER
  [ "$mode" = floor ] && script=$FLOOR
  if [ -n "$script" ]; then
    bpftrace -e "$script" > "$W/bt.out" 2> "$W/bt.err" &
    bt=$!
    for _ in $(seq 300); do grep -q '^Attaching' "$W/bt.out" && break; sleep 0.1; done
    if ! grep -q '^Attaching' "$W/bt.out"; then
      echo "bench-overhead: bpftrace did not attach: $(tail -3 "$W/bt.err")" >&2
      exit 1
    fi
  fi
  if ! "$IOPATH" "${cmd[@]}" --file "$W/file.dat" --engine psync --rw read --bs 4k --direct false \
      --runtime "${RUNTIME}s" --json - > "$W/out.json" 2> "$W/err"; then
    echo "bench-overhead: iopath ${cmd[*]} (cached $mode) failed: $(tail -3 "$W/err")" >&2
    exit 1
  fi
  if [ -n "$bt" ]; then
    kill -INT "$bt"; wait "$bt" || true
    reads=$(awk '/^@reads:/ {print $2}' "$W/bt.out")
  fi
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["iops"], r["ios"], sys.argv[2])' \
    "$W/out.json" "${reads:--}"
}

CMODES=(run split count peer floor)
for m in "${CMODES[@]}"; do : > "$W/c_$m"; done
for r in $(seq "$REPEAT"); do
  for i in 0 1 2 3 4; do
    m=${CMODES[$(( (r + i) % 5 ))]}
    cached_one "$m" >> "$W/c_$m"
  done
done
# The peer fired on every read (else it measured nothing): its count against the run's own.
awk '$3 == "-" || $3 < 0.99 * $2 { bad = 1 } END { exit bad }' "$W/c_peer" ||
  { echo "bench-overhead: the bpftrace peer counted fewer reads than the run made:" >&2; cat "$W/c_peer" >&2; exit 1; }
echo
echo "cached buffered reads (psync 4k sequential, ${RUNTIME}s x $REPEAT; ratios: geometric mean of the pairs [95%])"
printf '%-22s %10s  %-24s %-24s %s\n' way iops "vs untraced" "vs the bpftrace peer" verdict
for m in run peer floor split count; do
  med=$(cut -d' ' -f1 "$W/c_$m" | median)
  read -r r lo hi _ < <(python3 scripts/paired.py "$W/c_$m" "$W/c_run")
  case $m in
    run) label=untraced ;; peer) label="bpftrace peer" ;; floor) label="empty raw_syscalls pair" ;;
    split) label="iopath trace" ;; count) label="iopath --pagecache count" ;;
  esac
  vs="" verdict=""
  if [ "$m" = split ] || [ "$m" = count ] || [ "$m" = floor ]; then
    read -r v v_lo v_hi verdict < <(python3 scripts/paired.py "$W/c_$m" "$W/c_peer")
    vs=$(printf '%5.3fx [%5.3f-%5.3f]' "$v" "$v_lo" "$v_hi")
  fi
  printf '%-24s %10.0f  %5.3fx [%5.3f-%5.3f]   %-24s %s\n' "$label" "$med" "$r" "$lo" "$hi" "$vs" "$verdict"
done

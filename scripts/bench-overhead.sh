#!/usr/bin/env bash
# What tracing costs: the same job untraced and traced, interleaved in rotating order (so the
# host's drift hits every way alike), REPEAT rounds, on a file of the root file system
# (virtio-blk) and on a loop device backed by tmpfs (CPU-bound: every nanosecond of probe cost
# shows as lost IOPS), uring and aio, QD1 and QD32. Eight ways per point:
#   untraced   `iopath run`
#   trace      `iopath trace` (four phases, histograms; direct io_uring and aio get the lean hook
#              set by default: only the hooks the four phases need, docs/performance.md)
#   hooked     `iopath trace --issue-hook`: the default with block_rq_issue attached for the whole
#              run (the default detaches it where a check trusts the request's io_start_time_ns)
#   full       `iopath trace --full`: every hook, the scheduler's, softirqs' and syscalls' too
#   events     `iopath trace --events` (plus one ring-buffer record per I/O)
#   flame      `iopath trace --flamegraph` (plus stack sampling at 997 Hz per CPU)
#   peer       `iopath run` under scripts/peer-device.bt, a two-probe bpftrace tracer of the device
#              phase only (block_rq_issue -> block_rq_complete in a hash map): the one-phase peer
#   floor      `iopath trace --empty-probes`: the default's hooks attached with empty bodies, what
#              they cost before any work (the tracepoints' dispatch)
# Ratios are paired run by run (scripts/paired.py: geometric mean, 95% interval); every way is
# judged against the peer: better, even (the interval holds 1.00x) or WORSE.
# Then buffered reads of a cached file against a bpftrace peer (`cached`, see there).
#   usage: scripts/bench-overhead.sh [RUNTIME_S=5] [REPEAT=5] [QDS="1 32"] [ENGINES="uring aio"]
#          [TARGETS="file loop cached"]
# Set SKIP_HOOKS=irq,softirq (hook name fragments, passed as --skip-hooks) to measure the tracer
# without some hooks.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-5}; REPEAT=${2:-5}; QDS=${3:-"1 32"}; ENGINES=${4:-"uring aio"}; TARGETS=${5:-"file loop cached"}
. scripts/bench-lib.sh
command -v bpftrace > /dev/null || { echo "bench-overhead: bpftrace is missing (scripts/setup.sh installs it)" >&2; exit 1; }
# bpftrace finds tracepoints through tracefs: mounted for this run when missing, unmounted after.
TRACEFS_MOUNTED=""
if [ ! -d /sys/kernel/tracing/events ]; then
  mount -t tracefs tracefs /sys/kernel/tracing && TRACEFS_MOUNTED=1
fi
trap '[ -n "$TRACEFS_MOUNTED" ] && umount /sys/kernel/tracing; cleanup' EXIT

BT=""
bt_start() { # script text or file -> runs bpftrace in the background until bt_stop
  bpftrace "$@" > "$W/bt.out" 2> "$W/bt.err" &
  BT=$!
  for _ in $(seq 300); do grep -q '^Attaching' "$W/bt.out" && break; sleep 0.1; done
  if ! grep -q '^Attaching' "$W/bt.out"; then
    echo "bench-overhead: bpftrace did not attach: $(tail -3 "$W/bt.err")" >&2
    exit 1
  fi
}
bt_stop() { kill -INT "$BT"; wait "$BT" || true; BT=""; }

one() { # mode kind target engine qd -> "iops lost correlated peer_count"
  local mode=$1 kind=$2 t=$3 eng=$4 qd=$5 flag cmd=trace extra=() peer=-; [ "$kind" = file ] && flag=--file || flag=--device
  case $mode in run | peer) cmd=run ;; esac
  case $mode in trace | hooked | events | flame | full | floor) [ -n "${SKIP_HOOKS:-}" ] && extra+=(--skip-hooks "$SKIP_HOOKS") ;; esac
  [ "$mode" = hooked ] && extra+=(--issue-hook)
  [ "$mode" = events ] && extra+=(--events)
  [ "$mode" = flame ] && extra+=(--flamegraph --out "$W/flamegraph-out")
  [ "$mode" = floor ] && extra+=(--empty-probes)
  [ "$mode" = full ] && extra+=(--full)
  [ "$mode" = peer ] && bt_start scripts/peer-device.bt
  if ! "$IOPATH" "$cmd" $flag "$t" --engine "$eng" --qd "$qd" --runtime "${RUNTIME}s" "${extra[@]}" --json - \
      > "$W/out.json" 2> "$W/err"; then
    echo "bench-overhead: iopath $cmd ($mode $kind $eng qd$qd) failed: $(tail -3 "$W/err")" >&2
    exit 1
  fi
  if [ "$mode" = peer ]; then
    bt_stop
    # Requests the peer timed (its histogram's counts): proof it measured this run.
    peer=$(awk -F'|' '/^\[/ {k = split($1, a, " "); n += a[k]} END {print n + 0}' "$W/bt.out")
  fi
  python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["iops"], r["ios"], r.get("lost_events",{}).get("total",0), r.get("correlated_fraction",1), sys.argv[2])' "$W/out.json" "$peer"
}

KINDS=$(for k in $TARGETS; do [ "$k" = cached ] || echo "$k"; done)
[ -n "$KINDS" ] && echo "4k random reads, O_DIRECT, ${RUNTIME}s runs x $REPEAT rounds; ratios: geometric mean of the paired runs [95%]"
for kind in $KINDS; do
  [ $kind = file ] && t="$W/file.dat" || t=$LOOP
  for eng in $ENGINES; do
    MODES=(run trace hooked full events flame peer floor)
    for qd in $QDS; do
      for m in "${MODES[@]}"; do : > "$W/$m"; done
      for r in $(seq "$REPEAT"); do
        for i in $(seq 0 $(( ${#MODES[@]} - 1 ))); do
          m=${MODES[$(( (r + i) % ${#MODES[@]} ))]}
          one "$m" $kind "$t" $eng $qd >> "$W/$m"
        done
      done
      # The peer timed (nearly) every request of its runs, else it measured nothing.
      awk '$5 < 0.95 * $2 { bad = 1 } END { exit bad }' "$W/peer" ||
        { echo "bench-overhead: the bpftrace peer timed fewer requests than the run made:" >&2; cat "$W/peer" >&2; exit 1; }
      printf '\n%s %s qd%s: untraced %.0f IOPS (median)\n' $kind $eng $qd "$(cut -d' ' -f1 "$W/run" | median)"
      printf '  %-20s %-22s %-22s %-7s %5s %8s\n' way "vs untraced" "vs the peer" verdict lost corr
      for m in trace hooked full events flame peer floor; do
        [ -s "$W/$m" ] || continue
        read -r r lo hi _ < <(python3 scripts/paired.py "$W/$m" "$W/run")
        case $m in
          trace) label="iopath trace" ;; hooked) label="  --issue-hook" ;; full) label="iopath trace --full" ;; events) label="  --events" ;;
          flame) label="  --flamegraph" ;; peer) label="peer (bpftrace)" ;; floor) label="floor (empty hooks)" ;;
        esac
        vs="" verdict="" lost="" corr=""
        if [ "$m" != peer ]; then
          read -r v v_lo v_hi verdict < <(python3 scripts/paired.py "$W/$m" "$W/peer")
          vs=$(printf '%5.3fx [%5.3f-%5.3f]' "$v" "$v_lo" "$v_hi")
        fi
        if [ "$m" != peer ] && [ "$m" != floor ]; then
          lost=$(cut -d' ' -f3 "$W/$m" | sort -g | tail -1); corr=$(printf '%.4f' "$(cut -d' ' -f4 "$W/$m" | median)")
        fi
        printf '  %-20s %5.3fx [%5.3f-%5.3f]  %-22s %-7s %5s %8s\n' "$label" "$r" "$lo" "$hi" "$vs" "$verdict" "$lost" "$corr"
      done
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
cat "$W/file.dat" > /dev/null # into the page cache (1 GiB)

cached_one() { # mode -> "iops ios peer_reads"; mode: run | split | count | peer | floor
  local mode=$1 cmd=(run) reads=- script=""
  [ "$mode" = split ] && cmd=(trace)
  [ "$mode" = count ] && cmd=(trace --pagecache count)
  [ "$mode" = peer ] && script=$PEER
  [ "$mode" = floor ] && script=$FLOOR
  [ -n "$script" ] && bt_start -e "$script"
  if ! "$IOPATH" "${cmd[@]}" --file "$W/file.dat" --engine psync --rw read --bs 4k --direct false \
      --runtime "${RUNTIME}s" --json - > "$W/out.json" 2> "$W/err"; then
    echo "bench-overhead: iopath ${cmd[*]} (cached $mode) failed: $(tail -3 "$W/err")" >&2
    exit 1
  fi
  if [ -n "$BT" ]; then
    bt_stop
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

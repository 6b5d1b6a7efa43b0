#!/usr/bin/env bash
# iopath's load generator against fio, same job, interleaved, median of REPEAT runs per point.
# Prints IOPS ratio and CPU-per-I/O ratio (iopath / fio) for uring and aio at several queue depths,
# on a file of the root file system and on a loop device backed by tmpfs (CPU-bound blk-mq).
#   usage: sudo scripts/bench-vs-fio.sh [RUNTIME_S=5] [REPEAT=3] [QDS="1 32 128"]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-5}; REPEAT=${2:-3}; QDS=${3:-"1 32 128"}
. scripts/bench-lib.sh

# One run -> "iops cpu_ns_per_io"
run_fio() { # target engine qd
  local kind=$1 t=$2 eng=$3 qd=$4 fe; [ "$eng" = uring ] && fe=io_uring || fe=libaio
  fio --name=b --filename="$t" --ioengine=$fe --iodepth="$qd" --rw=randread --bs=4k --direct=1 \
      --size=1g --runtime="$RUNTIME" --time_based --norandommap --randrepeat=0 --output-format=json |
    python3 -c 'import json,sys
j=json.load(sys.stdin)["jobs"][0]; r=j["read"]; secs=j["job_runtime"]/1000
print(r["iops"], (j["usr_cpu"]+j["sys_cpu"])/100*secs*1e9/max(r["total_ios"],1))'
}
run_iopath() {
  local kind=$1 t=$2 eng=$3 qd=$4 flag; [ "$kind" = file ] && flag=--file || flag=--device
  "$IOPATH" run $flag "$t" --engine "$eng" --qd "$qd" --bs 4k --rw randread --runtime "${RUNTIME}s" --json - 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["iops"], r["cpu"]["per_io_ns"])'
}

# ratio: of the medians; pairs: min-max of the per-run ratios (run r of iopath / run r of fio),
# which shows how much of a difference is this VM's noise.
printf '%-6s %-6s %4s %10s %10s %7s %13s %12s %12s %7s\n' target engine qd fio_iops iopath_iops ratio pairs fio_cpu/io iopath_cpu/io ratio
for kind in file loop; do
  [ $kind = file ] && t="$W/file.dat" || t=$LOOP
  for eng in uring aio; do
    for qd in $QDS; do
      : > "$W/fio"; : > "$W/iop"
      for r in $(seq "$REPEAT"); do
        # Alternate which goes first, so drift on this noisy VM hits both alike.
        if ((r % 2)); then run_fio $kind "$t" $eng $qd >> "$W/fio"; run_iopath $kind "$t" $eng $qd >> "$W/iop"
        else run_iopath $kind "$t" $eng $qd >> "$W/iop"; run_fio $kind "$t" $eng $qd >> "$W/fio"; fi
      done
      fi=$(cut -d' ' -f1 "$W/fio" | median); ii=$(cut -d' ' -f1 "$W/iop" | median)
      fc=$(cut -d' ' -f2 "$W/fio" | median); ic=$(cut -d' ' -f2 "$W/iop" | median)
      pr=$(paste -d' ' <(cut -d' ' -f1 "$W/iop") <(cut -d' ' -f1 "$W/fio") | awk '{print $1/$2}' | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.2f-%.2f", lo, hi}')
      awk -v k=$kind -v e=$eng -v q=$qd -v fi="$fi" -v ii="$ii" -v fc="$fc" -v ic="$ic" -v pr="$pr" 'BEGIN {
        printf "%-6s %-6s %4d %10.0f %10.0f %6.2fx %13s %10.0fns %10.0fns %6.2fx\n", k, e, q, fi, ii, ii/fi, pr, fc, ic, ic/fc }'
    done
  done
done

# Shared by the benchmark scripts (sourced): a scratch folder with a 1 GiB file on the root file
# system and a loop device backed by tmpfs, all removed on exit; a median helper; and the one job
# both generators run (4k randread, O_DIRECT, 1 GiB, time-based), so every script compares alike.
IOPATH=${IOPATH:-./target/release/iopath}
[ -x "$IOPATH" ] || cargo build --release --locked
W=$(mktemp -d /var/tmp/iopath-bench.XXXXXX)
LOOP=""
cleanup() {
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null || true
  umount "$W/tmpfs" 2>/dev/null || true
  rm -rf "$W"
}
trap cleanup EXIT
"$IOPATH" run --file "$W/file.dat" --size 1g --ios 1 >/dev/null 2>&1
mkdir -p "$W/tmpfs"; mount -t tmpfs -o size=1100m tmpfs "$W/tmpfs"
truncate -s 1g "$W/tmpfs/backing"; LOOP=$(losetup -f --show "$W/tmpfs/backing")
# A loop device keeps the scheduler it last had across detach (tests/compare.rs leaves bfq: every
# benchmark after the test suite measured bfq, 340k instead of 580k IOPS): set it, and say it.
LOOP_SCHED=${LOOP_SCHED:-none}
echo "$LOOP_SCHED" > "/sys/block/${LOOP#/dev/}/queue/scheduler"
echo "# loop device $LOOP: scheduler $(grep -o '\[[^]]*\]' "/sys/block/${LOOP#/dev/}/queue/scheduler" | tr -d '[]')," \
  "wbt_lat_usec $(cat "/sys/block/${LOOP#/dev/}/queue/wbt_lat_usec" 2>/dev/null || echo -)," \
  "iostats $(cat "/sys/block/${LOOP#/dev/}/queue/iostats")" >&2
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

# One run of the job -> "iops cpu_ns_per_io ios". Args: file|loop TARGET uring|aio QD RUNTIME_S;
# a command in $WRAP (e.g. "perf stat ...") runs the generator under it.
run_fio() {
  local t=$2 fe; [ "$3" = uring ] && fe=io_uring || fe=libaio
  ${WRAP:-} fio --name=b --filename="$t" --ioengine=$fe --iodepth="$4" --rw=randread --bs=4k --direct=1 \
      --size=1g --runtime="$5" --time_based --norandommap --randrepeat=0 --output-format=json |
    python3 -c 'import json,sys
j=json.load(sys.stdin)["jobs"][0]; r=j["read"]; secs=j["job_runtime"]/1000
print(r["iops"], (j["usr_cpu"]+j["sys_cpu"])/100*secs*1e9/max(r["total_ios"],1), r["total_ios"])'
}
run_iopath() {
  local flag; [ "$1" = file ] && flag=--file || flag=--device
  ${WRAP:-} "$IOPATH" run $flag "$2" --engine "$3" --qd "$4" --bs 4k --rw randread --runtime "${5}s" --json - 2>/dev/null |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["iops"], r["cpu"]["per_io_ns"], r["ios"])'
}

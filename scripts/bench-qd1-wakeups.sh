#!/usr/bin/env bash
# Why QD1 on the RAM loop device swings: each I/O's work runs on the loop driver's unbound
# kworker, and every wakeup that crosses vCPUs (submitter -> kworker, ksoftirqd -> submitter)
# costs an IPI, which a nested guest pays dearly for. This runs fio and `iopath run` at QD1,
# alternating, and prints per run the IOPS next to the IPIs the generator's own threads sent
# per I/O (perf's ipi:ipi_send_cpu tracepoint), then how closely the two track each other; and,
# with bpftrace, one more run of each under workqueue and scheduler tracepoints (see below).
#   usage: sudo scripts/bench-qd1-wakeups.sh [RUNTIME_S=2] [ROUNDS=8] [ENGINE=uring]
set -euo pipefail
cd "$(dirname "$0")/.."
RUNTIME=${1:-2}; ROUNDS=${2:-8}; ENGINE=${3:-uring}
command -v perf >/dev/null || { echo "needs perf (apt install linux-perf)" >&2; exit 1; }
. scripts/bench-lib.sh
one() { # tool -> "iops ipis_per_io"
  local ios
  ios=$(WRAP="perf stat -e ipi:ipi_send_cpu -x, -o $W/st" run_$1 loop "$LOOP" "$ENGINE" 1 "$RUNTIME" | cut -d' ' -f3)
  awk -F, -v ios="$ios" -v t="$RUNTIME" '/ipi_send_cpu/ { printf "%.0f %.3f\n", ios / t, $1 / ios }' "$W/st"
}

: > "$W/runs"
printf '%-7s %9s %8s\n' tool iops ipi/io
for r in $(seq "$ROUNDS"); do
  if ((r % 2)); then order="fio iopath"; else order="iopath fio"; fi
  for tool in $order; do
    line=$(one $tool); echo "$tool $line" >> "$W/runs"
    printf '%-7s %9.0f %8.3f\n' $tool $line
  done
done
python3 - "$W/runs" <<'PY'
import math, statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
for tool in ("fio", "iopath"):
    t = [r for r in rows if r[0] == tool]
    print(f"{tool:<7} median {st.median(float(r[1]) for r in t):9.0f} IOPS, {st.median(float(r[2]) for r in t):.3f} IPIs per I/O")
x = [float(r[2]) for r in rows]; y = [math.log(float(r[1])) for r in rows]
mx, my = st.mean(x), st.mean(y)
r = sum((a - mx) * (b - my) for a, b in zip(x, y)) / math.sqrt(sum((a - mx) ** 2 for a in x) * sum((b - my) ** 2 for b in y))
print(f"correlation of IPIs per I/O with log IOPS over all runs: {r:+.2f}")
PY

command -v bpftrace >/dev/null || exit 0
# Per tool: the workqueue's choice of kworker; how long a wakeup of the submitter takes to run it;
# how long it then takes to queue the next read; how often the kworker, when woken, last ran on
# the submitter's vCPU; when it last ran on the other vCPU and that one is idle, how often the
# wakeup still pulls it onto the submitter's (the way back to sharing one vCPU), by the
# submitter's PELT utilization, with the mean utilization of kworker and submitter at pulled and
# not-pulled wakeups; and the submitter's PELT load and utilization at its first I/O
# (what the scheduler knows of it when the run starts).
cat > "$W/qd1.bt" <<'BT'
tracepoint:workqueue:workqueue_queue_work /comm == "fio" || comm == "iopath-w0"/ {
  @who = comm; @queued[comm] = count(); if (@busy) { @while_busy[comm] = count(); }
}
tracepoint:workqueue:workqueue_execute_start /strncmp(comm, "kworker/u", 9) == 0 && @who != ""/ {
  @busy = 1; if (pid == @last) { @same[@who] = count(); } @last = pid;
}
tracepoint:workqueue:workqueue_execute_end /strncmp(comm, "kworker/u", 9) == 0/ { @busy = 0; }
tracepoint:sched:sched_waking /args->comm == "fio" || args->comm == "iopath-w0"/ { @woken[args->pid] = nsecs; }
tracepoint:sched:sched_switch /(args->next_comm == "fio" || args->next_comm == "iopath-w0") && @woken[args->next_pid]/ {
  @wake_to_run_ns[args->next_comm] = avg(nsecs - @woken[args->next_pid]); @ran[args->next_pid] = nsecs; @woken[args->next_pid] = 0;
}
tracepoint:sched:sched_switch { @idle[cpu] = (args->next_pid == 0); }
// The kworker's utilization as of its last switch-out: what a wakeup sees of it.
tracepoint:sched:sched_switch /strncmp(args->prev_comm, "kworker/u", 9) == 0/ { @kw_util_now[args->prev_pid] = curtask->se.avg.util_avg; }
tracepoint:sched:sched_waking /(comm == "fio" || comm == "iopath-w0") && strncmp(args->comm, "kworker/u", 9) == 0/ {
  if (@ran[tid]) { @run_to_next_ns[comm] = avg(nsecs - @ran[tid]); @ran[tid] = 0; }
  @kw_wakes[comm] = count(); if (args->target_cpu == cpu) { @kw_here[comm] = count(); }
  // sched_waking comes before the CPU is chosen: target_cpu is where the kworker last ran.
  @away[tid] = args->target_cpu != cpu && @idle[args->target_cpu]; @kw[tid] = args->pid; @pulled[tid] = 0;
  @util[tid] = curtask->se.avg.util_avg; @kwutil[tid] = @kw_util_now[args->pid];
}
tracepoint:sched:sched_migrate_task /@away[tid] && args->pid == @kw[tid]/ { @pulled[tid] = args->dest_cpu == cpu; }
tracepoint:syscalls:sys_exit_io_submit,tracepoint:syscalls:sys_exit_io_uring_enter /@away[tid]/ {
  $b = @util[tid] < 192 ? "lo" : (@util[tid] < 384 ? "mid" : "hi");
  @away_n[comm, $b] = count(); if (@pulled[tid]) { @away_pulled[comm, $b] = count(); }
  @away_kw_util[comm, @pulled[tid]] = avg(@kwutil[tid]); @away_util[comm, @pulled[tid]] = avg(@util[tid]);
  @away[tid] = 0;
}
tracepoint:syscalls:sys_enter_io_submit,tracepoint:syscalls:sys_enter_io_uring_enter
/(comm == "fio" || comm == "iopath-w0") && !@started[tid]/ {
  @started[tid] = 1; @first_load[comm] = curtask->se.avg.load_avg; @first_util[comm] = curtask->se.avg.util_avg;
}
END { clear(@kw_util_now); clear(@kwutil); clear(@idle); clear(@away); clear(@kw); clear(@pulled); clear(@util); clear(@started); clear(@who); clear(@busy); clear(@last); clear(@woken); clear(@ran); }
BT
bpftrace -f json "$W/qd1.bt" > "$W/qd1.json" 2>/dev/null &
BT_PID=$!
sleep 5 # attach
one fio >/dev/null; one iopath >/dev/null
kill -INT $BT_PID; wait $BT_PID || true
python3 - "$W/qd1.json" <<'PY'
import json, sys
m = {}
for l in open(sys.argv[1]):
    try:
        j = json.loads(l)
    except ValueError:
        continue
    if j.get("type") in ("map", "stats"):  # avg() maps come as "stats"
        m.update(j["data"])
def get(name, tool):
    return m.get(name, {}).get(tool, 0)
def pulls(tool):
    out = []
    for b, label in (("lo", "< 192"), ("mid", "192-383"), ("hi", ">= 384")):
        n = get("@away_n", f"{tool},{b}")
        if n:
            out.append(f"util {label}: {get('@away_pulled', f'{tool},{b}') / n:.0%} of {n}")
    return ", ".join(out) or "none"
print("under bpftrace (one run each):")
for tool in ("fio", "iopath-w0"):
    n, k = get("@queued", tool), get("@kw_wakes", tool)
    if n and k:
        print(f"{tool:<9} {n} reads: same kworker as the last {get('@same', tool) / n:.1%}, queued while it was busy "
              f"{get('@while_busy', tool) / n:.1%}; submitter woken -> running {get('@wake_to_run_ns', tool) / 1e3:.1f} us, "
              f"running -> next kworker wakeup {get('@run_to_next_ns', tool) / 1e3:.1f} us; kworker last ran on the "
              f"submitter's vCPU when woken {get('@kw_here', tool) / k:.1%}; at its first I/O the submitter's PELT load was "
              f"{get('@first_load', tool)}, utilization {get('@first_util', tool)}")
        print(f"{'':<9} woken while last on the other, idle vCPU, pulled onto the submitter's: {pulls(tool)}")
        print(f"{'':<9} mean PELT utilization at those wakeups, pulled / not: kworker "
              f"{get('@away_kw_util', f'{tool},1')} / {get('@away_kw_util', f'{tool},0')}, submitter "
              f"{get('@away_util', f'{tool},1')} / {get('@away_util', f'{tool},0')}")
PY

#!/usr/bin/env python3
"""Builds the IOMMU pair of tests/data/compare-iommu from one real run of this machine.

usage: make.py RUN_DIR   (RUN_DIR: 'iopath trace --flamegraph --out RUN_DIR' of a virtio file)

before/ is the run itself. after/ is the same run as it would look with the IOMMU translation
measured in the QEMU guests (issue #7's rig: Debian 6.12, emulated NVMe behind intel-iommu, fio
4k randread QD16): one iommu map and one unmap per 4k I/O, the default domain DMA-FQ (lazy),
submission +3.1 us and completion +2.7 us per I/O (the seed's example), the CPU per I/O up by
that much, IOPS down as Little's law says at the same queue depth, and 11% of on-CPU samples
moved into the IOMMU map/unmap paths. This VM has no IOMMU: the pair exercises compare's
verdict logic until the VM rig records a real one.
"""
import copy
import json
import os
import shutil
import sys

run = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
rep = json.load(open(os.path.join(run, "report.json")))
folded = [l.rsplit(" ", 1) for l in open(os.path.join(run, "oncpu.folded")).read().splitlines() if l.strip()]
folded = [(s, int(n)) for s, n in folded]

def write(side, r, lines):
    d = os.path.join(here, side)
    os.makedirs(d, exist_ok=True)
    r = copy.deepcopy(r)
    r["flamegraphs"]["oncpu"]["folded"] = "oncpu.folded"
    r["flamegraphs"]["oncpu"]["svg"] = "oncpu.svg"
    r["flamegraphs"]["dir"] = "."
    json.dump(r, open(os.path.join(d, "report.json"), "w"), indent=1)
    with open(os.path.join(d, "oncpu.folded"), "w") as f:
        for s, n in lines:
            f.write(f"{s} {n}\n")

write("before", rep, folded)

after = copy.deepcopy(rep)
ios = after["ios"]
lat0 = after["lat_ns"]["mean"]
after["iops"] *= lat0 / (lat0 + 5800)
after["cpu"]["per_io_ns"] += 5800
for name, add in (("submission", 3100), ("completion", 2700)):
    for k in ("mean_ns", "p50_ns", "p90_ns", "p99_ns", "p999_ns", "max_ns"):
        after["phases"][name][k] += add
for k in ("mean", "p50", "p90", "p99", "p999"):
    if k in after["lat_ns"]:
        after["lat_ns"][k] += 5800
after["phase_sum_mean_ns"] += 5800
for k in ("iommu_map", "iommu_unmap"):
    after[k] = {"total": ios, "per_io": 1.0}
after["config"]["iommu"] = {
    "group_types": [["DMA-FQ", 6]],
    "cmdline": [],
    "config": ["CONFIG_IOMMU_DEFAULT_DMA_LAZY=y", "CONFIG_INTEL_IOMMU_DEFAULT_ON=y"],
    "config_source": "/boot/config-6.12.0-amd64",
    "mode": "DMA-FQ x6",
}

# 11% of samples move into map (submission side) and unmap (completion side) paths.
total = sum(n for _, n in folded)
moved = int(total * 0.11)
scaled = [(s, n - int(n * 0.11)) for s, n in folded]
base_submit = max((x for x in folded if "blk_mq_submit_bio_[k]" in x[0]), key=lambda x: x[1])[0]
base_submit = base_submit[: base_submit.index("blk_mq_submit_bio_[k]") + len("blk_mq_submit_bio_[k]")]
map_stack = base_submit + ";virtio_queue_rq_[k];virtqueue_add_sgs_[k];dma_map_page_attrs_[k];iommu_dma_map_page_[k];__iommu_dma_map_[k];iommu_map_[k];intel_iommu_map_pages_[k]"
base_reap = max((x for x in folded if "io_uring_enter_[k]" in x[0]), key=lambda x: x[1])[0]
base_reap = base_reap[: base_reap.index("io_uring_enter_[k]") + len("io_uring_enter_[k]")]
unmap_stack = base_reap + ";io_run_task_work_[k];blk_mq_end_request_[k];virtblk_unmap_data_[k];dma_unmap_page_attrs_[k];iommu_dma_unmap_page_[k];__iommu_dma_unmap_[k];iommu_unmap_fast_[k];intel_iommu_unmap_pages_[k]"
scaled.append((map_stack, moved // 2))
scaled.append((unmap_stack, moved - moved // 2))
after["flamegraphs"]["oncpu"]["total"] = sum(n for _, n in scaled)
write("after", after, scaled)
print("wrote", here)

#!/usr/bin/env bash
# What bounds a masked level's loops (issue 27): Nsight Compute over one V-cycle and one matrix product of the LV's
# masked elliptic system, visiting the tissue's nodes and then every node of the box (tools/gpu/stencil_kernels.py),
# each kernel's duration, DRAM throughput, occupancy, waves and warp stalls in $OUT/ncu.csv (one row per kernel and
# metric), and a short table of the first to stdout. Session 20 found the masked 27-point loops ~1.6x dearer per
# node than the box's and the unrolled loop no help to them (docs/decisions.md, "Level 0 swept twice"); this is
# the measurement that says why. About a minute on an H100 besides the LV's set-up.
#
#   source .gpu-node/activate.sh && OUT=/tmp/ncu bash tools/gpu/issue27-ncu.sh [--lv-spacing 0.025]
#
# Nsight Compute's defaults lock the clocks at base and flush the caches before each kernel, so a small kernel reads
# slower than it runs inside a step (session 21's 7-15 us per coarse kernel). NCU_CLOCK=none NCU_CACHE=none keep the
# boost clocks and warm caches: durations closer to a run's own (still each kernel alone, without the graph's
# launch gaps).
set -u
out=${OUT:-/tmp}
mkdir -p "$out"
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
ncu --target-processes all --kernel-name regex:'each_kernel|reduce_kernel|gemv_kernel|finish_kernel' \
    --clock-control "${NCU_CLOCK:-base}" --cache-control "${NCU_CACHE:-all}" \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats \
    --section MemoryWorkloadAnalysis --csv --page details \
    ${PYTHON:-python3} tools/gpu/stencil_kernels.py "$@" > "$out/ncu.csv" 2> "$out/ncu.err"
echo "ncu exit $?; $(grep -c '"Duration"' "$out/ncu.csv") kernels profiled"
${PYTHON:-python3} - "$out/ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
col = {k: i for i, k in enumerate(head)}
want = {"Duration": "time", "DRAM Throughput": "dram%", "Achieved Occupancy": "occ%", "Waves Per SM": "waves",
        "Registers Per Thread": "regs"}
kern = {}
for r in rows:
    key = (int(r[col["ID"]]), r[col["Kernel Name"]][:40])
    m = kern.setdefault(key, {"grid": r[col["Grid Size"]] if "Grid Size" in col else ""})
    name = r[col["Metric Name"]]
    if name in want:
        unit = r[col["Metric Unit"]] if name == "Duration" else ""
        m[want[name]] = r[col["Metric Value"]] + ({"usecond": "us", "nsecond": "ns", "msecond": "ms"}.get(unit, unit))
cols = [*want.values(), "grid"]
print(f"{'id':>4} {'kernel':40} " + " ".join(f"{v:>14}" for v in cols))
for (i, name), m in sorted(kern.items()):
    print(f"{i:>4} {name:40} " + " ".join(f"{m.get(v, ''):>14}" for v in cols))
PY

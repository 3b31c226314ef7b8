#!/usr/bin/env bash
# Issue 23 on 2 GPUs: where the root layout's ~0.18 ms per step goes (the Niederer slab is slower on 2 GPUs than on
# one: 0.775 against 0.638 ms per step, docs/benchmarks.md "Session 12"). Runs the slab for 10 ms (2,000 steps) on 1
# and 2 ranks, resident, with PETSc's -log_view: per event the count, time, and the copies between host and device
# (CpuToGpu / GpuToCpu count and MB). What to look for: MatMult's VecScatter on 2 ranks (the right-hand side's
# product, host-staged: this MPI is not CUDA-aware) — does it copy only the halo or whole vectors; which events
# exist on 2 ranks and not on 1; the KSPSolve time per solve against the step's parabolic phase. About 2 minutes.
#
#   device call (2 GPUs):  command "source .gpu-node/activate.sh && bash tools/gpu/issue23-root-overhead.sh"
#                          (PYTHON=python3 there: the image's Python with the carried PETSc)
set -uo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
dir=${OUT:-/tmp}
cfg=run/niederer/dx0.1_dt0.005.toml
set_=(--set 'cell.placement="resident"' --set 'cell.backend="cuda"' --set simulation.duration=10.0 --overwrite)
{
  nvidia-smi -L
  for n in 1 2; do
    echo "== $n rank(s)"
    mpirun -n $n "$py" -m cardiosim run "$cfg" "${set_[@]}" --output "/tmp/root$n.h5" -- -log_view ":$dir/logview-$n.txt" \
      2>&1 | grep -E "^(cardiosim|  |\||reaction|parabolic|elliptic|other|total)" | tail -25
    grep -E "^(MatMult |VecScatter|SF|KSPSolve|PCApply|VecNorm|VecDot|VecTDot|VecAXPY|VecScale|VecPointwise|VecCopy|VecSet |VecCUDACopy)" \
      "$dir/logview-$n.txt"
  done
} 2>&1 | tee "$dir/issue23-root.txt"

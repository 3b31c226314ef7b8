#!/usr/bin/env bash
# session 22 call 3 (2-GPU host): on GPU 0 alone, the issue-27 LV A/B of the working tree (call 2's changes, and
# StencilCG projecting the elliptic right-hand side on the device instead of KSPSolve: cardiosim.solvers.nullspace)
# against a34b4a8 (.dev22/prev), four rounds; then tools/phi_profile.py on the new tree; then the solver GPU tests of
# the new tree, both sets at once on GPUs 0,1.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 TREES="$PWD $PWD/.dev22/prev" LABELS="new prev" ROUNDS=4 bash tools/gpu/issue27-lv-ab.sh
echo "A/B done $(( $(date +%s) - t0 )) s"
CUDA_VISIBLE_DEVICES=0 timeout 80 python3 tools/phi_profile.py 0.025 resident 2>&1 | grep -v "^$" | tail -22
echo "profiles done $(( $(date +%s) - t0 )) s"
runs=("tests/test_resident_gpu.py tests/test_multigpu_runs_gpu.py"
      "tests/test_masked_mg_gpu.py tests/test_solvers_ranks_gpu.py tests/test_mask_gpu.py tests/test_multigrid_gpu.py tests/test_coloured_icc_gpu.py tests/test_microscopic_gpu.py")
for i in 0 1; do
  CUDA_VISIBLE_DEVICES=0,1 timeout $(( 590 - ($(date +%s) - t0) )) python3 -m pytest -q -m gpu --tb=short ${runs[$i]} \
    > $OUT/tests-$i.txt 2>&1 &
done
wait
for i in 0 1; do echo "== ${runs[$i]}"; tail -6 $OUT/tests-$i.txt; done
echo "end $(( $(date +%s) - t0 )) s"; date

#!/usr/bin/env bash
# session 21 call 3 (2-GPU host): GPU 0 alone, the issue-27 LV A/B of main (the device loop and batched loads)
# against 993a12a (session 20's end); then the solver GPU tests of main, both sets at once on GPUs 0,1.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 TREES="$PWD $PWD/.dev21/prev" LABELS="main prev" ROUNDS=3 bash tools/gpu/issue27-lv-ab.sh
echo "A/B done $(( $(date +%s) - t0 )) s"
runs=("tests/test_resident_gpu.py tests/test_multigpu_runs_gpu.py"
      "tests/test_masked_mg_gpu.py tests/test_solvers_ranks_gpu.py tests/test_mask_gpu.py tests/test_multigrid_gpu.py tests/test_coloured_icc_gpu.py tests/test_microscopic_gpu.py")
for i in 0 1; do
  CUDA_VISIBLE_DEVICES=0,1 timeout $(( 545 - ($(date +%s) - t0) )) python3 -m pytest -q -m gpu --tb=short ${runs[$i]} \
    > $OUT/tests-$i.txt 2>&1 &
done
wait
for i in 0 1; do echo "== ${runs[$i]}"; tail -6 $OUT/tests-$i.txt; done
echo "end $(( $(date +%s) - t0 )) s"; date

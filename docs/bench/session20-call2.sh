#!/usr/bin/env bash
# session 20 call 2 (a 4-GPU host): issue 27's ratio by the bench's own command (GPU 0 alone, four rounds, the grids
# alternating, medians), on the tree with level 0 swept twice on masked grids; then the GPU tests of the solvers
# on GPUs 0,1 and 2,3 side by side, and the 4-GPU tests.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 timeout 330 python3 -m cardiosim.bench.mask --anatomies lv --ranks 1 --placement resident \
    --model tt06 --ode-substeps 10 --current-density -52 --lv-spacing 0.025 --no-gamg --rounds 4 \
    --json $OUT/bench-mask.json 2>&1 | grep -v "^\s*$" | tail -30
echo "bench $(( $(date +%s) - t0 )) s"
CUDA_VISIBLE_DEVICES=0,1 timeout 250 python3 -m pytest -q -m gpu --tb=short tests/test_resident_gpu.py \
    tests/test_multigpu_runs_gpu.py > $OUT/tests-01.txt 2>&1 &
CUDA_VISIBLE_DEVICES=2,3 timeout 250 python3 -m pytest -q -m gpu --tb=short tests/test_masked_mg_gpu.py \
    tests/test_solvers_ranks_gpu.py tests/test_mask_gpu.py tests/test_multigrid_gpu.py tests/test_coloured_icc_gpu.py \
    tests/test_microscopic_gpu.py > $OUT/tests-23.txt 2>&1 &
wait
echo "== GPUs 0,1:"; tail -4 $OUT/tests-01.txt; echo "== GPUs 2,3:"; tail -4 $OUT/tests-23.txt
[ $(( $(date +%s) - t0 )) -lt 520 ] && timeout 70 python3 -m pytest -q -m gpu --tb=short tests/test_four_gpus_gpu.py 2>&1 | tail -2
echo "end $(( $(date +%s) - t0 )) s"; date

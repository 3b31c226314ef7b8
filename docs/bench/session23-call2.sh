#!/usr/bin/env bash
# session 23 call 2 (2-GPU host): the working tree's stencil solvers on the GPU first (the CG and V-cycle GPU tests:
# device loop against host loop, StencilCG against PETSc's CG, with the masked grids' Jacobi level 0), then on GPU 0
# alone the LV A/B: new (HEAD: a solve as one graph) against launch (8672d8b: fewer launches per iteration) and prev
# (556b9eb, session 22's end), two rounds; then the solver GPU tests, both sets at once on GPUs 0,1.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
timeout 120 python3 -m pytest -q -m gpu --tb=short tests/test_multigrid_gpu.py -k "device_loop or equals_petsc" 2>&1 | tail -4
echo "quick tests $(( $(date +%s) - t0 )) s"
CUDA_VISIBLE_DEVICES=0 TREES="$PWD $PWD/.dev23/launch $PWD/.dev23/prev" LABELS="new launch prev" ROUNDS=2 \
  bash tools/gpu/issue27-lv-ab.sh
echo "A/B done $(( $(date +%s) - t0 )) s"
runs=("tests/test_resident_gpu.py tests/test_multigpu_runs_gpu.py"
      "tests/test_masked_mg_gpu.py tests/test_solvers_ranks_gpu.py tests/test_mask_gpu.py tests/test_multigrid_gpu.py tests/test_coloured_icc_gpu.py tests/test_microscopic_gpu.py")
for i in 0 1; do
  CUDA_VISIBLE_DEVICES=0,1 timeout $(( 590 - ($(date +%s) - t0) )) python3 -m pytest -q -m gpu --tb=short ${runs[$i]} \
    > $OUT/tests-$i.txt 2>&1 &
done
wait
for i in 0 1; do echo "== ${runs[$i]}"; tail -8 $OUT/tests-$i.txt; done
echo "end $(( $(date +%s) - t0 )) s"; date

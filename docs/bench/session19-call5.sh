#!/usr/bin/env bash
# session 19 call 5 (a 4-GPU host): the CG's reductions on 1024 blocks instead of 264 (working tree) against
# 7d5b8d9 (.dev19/prev): the LV at 0.025 cm masked and box on GPU 0 alone, two rounds alternating, and the V-cycle
# and CG per iteration (tools/masked_mg.py); then the GPU tests of the solvers on GPUs 0,1 and 2,3 side by side,
# and the 4-GPU tests if time is left.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
NEW=$PWD PREV=$PWD/.dev19/prev
one() {  # tree label grid
  (cd $1 && CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m cardiosim.bench.mask --single lv --grid $3 --steps 20 \
    --model tt06 --placement resident --lv-spacing 0.025 --ode-substeps 10 --current-density -52 \
    --integrator rush-larsen) 2>&1 | grep -E "RESULT|rror" | python3 -c "import sys,json
for l in sys.stdin:
    if l.startswith('RESULT'):
        r=json.loads(l[7:]); print(f\"$2 $3: step {r['step_ms']:.2f} ms, elliptic {r['elliptic_ms']:.2f} ({r['elliptic_its']:.2f} its), parabolic {r['parabolic_ms']:.2f} ({r['parabolic_its']:.2f}), cells {r['reaction_ms']:.2f}\")
    else: print(l.rstrip()[:300])"
}
one $PREV prev masked; one $NEW new masked | tee /tmp/first.txt
grep -q step /tmp/first.txt || { echo "the new tree's first case failed: stopping"; exit 1; }
for r in 1 2; do one $PREV prev masked; one $NEW new masked; one $PREV prev box; one $NEW new box; done
echo "LV $(( $(date +%s) - t0 )) s"
(cd $NEW && CUDA_VISIBLE_DEVICES=0 timeout 60 python3 tools/masked_mg.py --lv-spacing 0.025 --solves 3 --vcycles 10 \
    --systems elliptic --gpu --jacobi-from 0 2>&1 | grep -E "GPU CG")
echo "masked_mg $(( $(date +%s) - t0 )) s"
CUDA_VISIBLE_DEVICES=0,1 timeout 280 python3 -m pytest -q -m gpu --tb=short tests/test_resident_gpu.py \
    tests/test_multigpu_runs_gpu.py > $OUT/tests-01.txt 2>&1 &
CUDA_VISIBLE_DEVICES=2,3 timeout 280 python3 -m pytest -q -m gpu --tb=short tests/test_masked_mg_gpu.py \
    tests/test_solvers_ranks_gpu.py tests/test_mask_gpu.py tests/test_multigrid_gpu.py tests/test_coloured_icc_gpu.py \
    tests/test_microscopic_gpu.py > $OUT/tests-23.txt 2>&1 &
wait
echo "== GPUs 0,1:"; tail -4 $OUT/tests-01.txt; echo "== GPUs 2,3:"; tail -4 $OUT/tests-23.txt
[ $(( $(date +%s) - t0 )) -lt 520 ] && timeout 70 python3 -m pytest -q -m gpu --tb=short tests/test_four_gpus_gpu.py 2>&1 | tail -2
echo "end $(( $(date +%s) - t0 )) s"; date

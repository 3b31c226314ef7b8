#!/usr/bin/env bash
# session 19 call 3 (GPU 0 alone): issue 27, 7d5b8d9 (one CUDA graph per CG iteration, the coarsest dense solve on
# the active nodes, a Jacobi level's smoothing and residual fused) against a0c86d6 (.dev19/base): the bench's
# resident LV at 0.025 cm, masked and box, three rounds alternating; the elliptic phase's profile; the V-cycle per
# level; the one-GPU stencil tests.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none CUDA_VISIBLE_DEVICES=0
nvidia-smi -L; date; t0=$(date +%s); which ncu nsys
NEW=$PWD BASE=$PWD/.dev19/base
one() {  # tree label grid [petsc options]
  local tree=$1 label=$2 grid=$3; shift 3
  (cd $tree && timeout 150 python3 -m cardiosim.bench.mask --single lv --grid $grid --steps 20 --model tt06 \
    --placement resident --lv-spacing 0.025 --ode-substeps 10 --current-density -52 --integrator rush-larsen \
    ${1:+-- "$@"}) 2>&1 | grep -E "RESULT|rror" \
    | python3 -c "import sys,json
for l in sys.stdin:
    if l.startswith('RESULT'):
        r=json.loads(l[7:]); print(f\"$label $grid $*: step {r['step_ms']:.2f} ms, elliptic {r['elliptic_ms']:.2f} ({r['elliptic_its']:.2f} its), parabolic {r['parabolic_ms']:.2f} ({r['parabolic_its']:.2f}), cells {r['reaction_ms']:.2f}\")
    else: print(l.rstrip()[:300])"
}
one $BASE base masked; one $NEW new masked | tee /tmp/first.txt       # warm-up: compiles both trees' libraries
grep -q step /tmp/first.txt || { echo "the new tree's first case failed: stopping"; exit 1; }
echo "warm-up done $(( $(date +%s) - t0 )) s"
for r in 1 2 3; do
  one $BASE base masked; one $NEW new masked; one $BASE base box; one $NEW new box
  echo "round $r $(( $(date +%s) - t0 )) s"
done
echo "== phi_profile, new"; timeout 120 python3 tools/phi_profile.py 0.025 resident 2>&1 | tail -14
echo "== masked_mg --jacobi-from 0, new ($(( $(date +%s) - t0 )) s)"
timeout 100 python3 tools/masked_mg.py --lv-spacing 0.025 --solves 3 --vcycles 10 --systems elliptic --gpu \
    --jacobi-from 0 2>&1 | grep -A14 "GPU V-cycle" | head -16
echo "== tests ($(( $(date +%s) - t0 )) s)"
timeout 150 python3 -m pytest -q -m gpu --tb=short tests/test_multigrid_gpu.py tests/test_masked_mg_gpu.py tests/test_mask_gpu.py 2>&1 | tail -6
echo "end $(( $(date +%s) - t0 )) s"; date

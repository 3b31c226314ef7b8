#!/usr/bin/env bash
# session 20 call 3 (GPU 0 alone): issue 27, the 27-point stencil loop unrolled with constant offsets (working
# tree) against HEAD 4a27499 (.dev20/head): the LV at 0.025 cm masked and box, three rounds alternating;
# then the one-GPU stencil tests.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none CUDA_VISIBLE_DEVICES=0
nvidia-smi -L; date; t0=$(date +%s)
NEW=$PWD PREV=$PWD/.dev20/head
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
one $PREV prev masked; one $NEW new masked | tee /tmp/first.txt       # warm-up: compiles both trees' libraries
grep -q step /tmp/first.txt || { echo "the new tree's first case failed: stopping"; exit 1; }
echo "warm-up done $(( $(date +%s) - t0 )) s"
for r in 1 2 3; do
  one $PREV prev masked; one $NEW new masked; one $PREV prev box; one $NEW new box
  echo "round $r $(( $(date +%s) - t0 )) s"
done
echo "== tests ($(( $(date +%s) - t0 )) s)"
timeout 170 python3 -m pytest -q -m gpu --tb=short tests/test_multigrid_gpu.py tests/test_masked_mg_gpu.py tests/test_mask_gpu.py 2>&1 | tail -6
echo "end $(( $(date +%s) - t0 )) s"; date

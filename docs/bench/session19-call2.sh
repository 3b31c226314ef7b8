#!/usr/bin/env bash
# session 19 call 2 (GPU 0 alone): issue 27, one CUDA graph per CG iteration and the coarsest dense solve on the
# active nodes (fca2227) against a0c86d6 (.dev19/base): the bench's resident LV at 0.025 cm, masked and box, two
# rounds alternating; two smoothing sweeps; the elliptic phase's profile; -log_view of the masked case; the V-cycle
# per level; the one-GPU stencil tests.
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
one $BASE base masked; one $NEW new masked        # warm-up: compiles both stencil libraries and the kernels
echo "warm-up done $(( $(date +%s) - t0 )) s"
for r in 1 2; do
  one $BASE base masked; one $NEW new masked; one $BASE base box; one $NEW new box
  echo "round $r $(( $(date +%s) - t0 )) s"
done
one $NEW new masked -elliptic_smg_sweeps 2; one $NEW new box -elliptic_smg_sweeps 2
one $BASE base masked -elliptic_smg_sweeps 2
echo "variants $(( $(date +%s) - t0 )) s"
echo "== phi_profile, new"; timeout 120 python3 tools/phi_profile.py 0.025 resident 2>&1 | tail -14
echo "== log_view, new, masked ($(( $(date +%s) - t0 )) s)"
timeout 100 python3 -m cardiosim.bench.mask --single lv --grid masked --steps 20 --model tt06 --placement resident \
    --lv-spacing 0.025 --ode-substeps 10 --current-density -52 --integrator rush-larsen -- -log_view \
    > $OUT/logview-masked.txt 2>&1
grep -E "^(KSPSolve|PCApply|Vec[A-Za-z]+|Mat[A-Za-z]+|SFPack|DMCreate) " $OUT/logview-masked.txt | cut -c1-200 | head -40
echo "== masked_mg --jacobi-from 0, new ($(( $(date +%s) - t0 )) s)"
timeout 100 python3 tools/masked_mg.py --lv-spacing 0.025 --solves 3 --vcycles 10 --systems elliptic --gpu \
    --jacobi-from 0 2>&1 | grep -A14 "GPU V-cycle" | head -16
echo "== tests ($(( $(date +%s) - t0 )) s)"
timeout 200 python3 -m pytest -q -m gpu --tb=short tests/test_multigrid_gpu.py tests/test_masked_mg_gpu.py 2>&1 | tail -6
echo "end $(( $(date +%s) - t0 )) s"; date

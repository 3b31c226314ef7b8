#!/usr/bin/env bash
# session 19 call 1 (GPU 0 alone): issue 27, the stencil loops unrolled (loads issued together) and no transpose
# null space on cardiosim's CG's matrix, against the tree before (a0c86d6, .dev19/base): the bench's resident LV at
# 0.025 cm, masked and whole box, two rounds alternating; smoother variants on the masked LV; the elliptic phase's
# profile; the V-cycle per level (tools/masked_mg.py) in both trees.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none CUDA_VISIBLE_DEVICES=0
nvidia-smi -L; date; t0=$(date +%s)
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
for opts in "-elliptic_smg_sweeps 2" "-elliptic_smg_jacobi_from 1" "-elliptic_smg_jacobi_omega 1.0"; do
  one $NEW new masked $opts
done
echo "variants $(( $(date +%s) - t0 )) s"
echo "== phi_profile, new"; timeout 120 python3 tools/phi_profile.py 0.025 resident 2>&1 | tail -14
echo "== phi_profile, base"; (cd $BASE && timeout 120 python3 tools/phi_profile.py 0.025 resident 2>&1 | tail -14)
echo "profiles $(( $(date +%s) - t0 )) s"
for tree in $NEW $BASE; do
  echo "== masked_mg --jacobi-from 0, $tree ($(( $(date +%s) - t0 )) s)"
  (cd $tree && timeout 100 python3 tools/masked_mg.py --lv-spacing 0.025 --solves 3 --vcycles 10 --systems elliptic \
     --gpu --jacobi-from 0 2>&1 | grep -A14 "GPU V-cycle" | head -16)
done
echo "end $(( $(date +%s) - t0 )) s"; date

#!/usr/bin/env bash
# session 18 call D (1 GPU): issue 27, Jacobi on level 0 too (smg_jacobi_from 0) against the default (from 1),
# masked and whole box, the bench's resident LV at 0.025 cm; two rounds alternating.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none CUDA_VISIBLE_DEVICES=0
nvidia-smi -L; date; t0=$(date +%s)
one() {  # grid, jacobi_from
  timeout 120 python3 -m cardiosim.bench.mask --single lv --grid $1 --steps 20 --model tt06 --placement resident \
    --lv-spacing 0.025 --ode-substeps 10 --current-density -52 --integrator rush-larsen \
    -- -elliptic_smg_jacobi_from $2 -parabolic_smg_jacobi_from $2 2>&1 | grep -E "RESULT|rror" \
    | python3 -c "import sys,json
for l in sys.stdin:
    if l.startswith('RESULT'):
        r=json.loads(l[7:]); print(f\"$1 jacobi_from $2: step {r['step_ms']:.2f} ms, elliptic {r['elliptic_ms']:.2f} ({r['elliptic_its']:.2f} its), parabolic {r['parabolic_ms']:.2f} ({r['parabolic_its']:.2f}), cells {r['reaction_ms']:.2f}\")
    else: print(l.rstrip()[:300])"
}
for r in 1 2; do
  for j in 1 0; do one masked $j; one box $j; done
  echo "t $(( $(date +%s) - t0 )) s"
done
date

#!/usr/bin/env bash
# session 21 call 6 (one GPU): branch fused-coarse: its GPU test, then the LV masked/box with and without
# -elliptic_smg_fuse_coarse 65536, two rounds alternating (one tree: one compile).
set -u
export OMPI_MCA_hwloc_base_binding_policy=none CUDA_VISIBLE_DEVICES=0
nvidia-smi -L; t0=$(date +%s)
timeout 100 python3 -m pytest -q -s -m gpu tests/test_multigrid_gpu.py -k "fused or device_loop" 2>&1 | grep -E "levels|passed|failed|Error|error" | head -20
echo "tests $(( $(date +%s) - t0 )) s"
one() {  # grid label [options]
  local grid=$1 label=$2; shift 2
  timeout 60 python3 -m cardiosim.bench.mask --single lv --grid $grid --steps 20 --model tt06 --placement resident \
    --lv-spacing 0.025 --ode-substeps 10 --current-density -52 --integrator rush-larsen ${1:+-- "$@"} 2>&1 \
    | grep -E "RESULT|rror" | python3 -c "import sys,json
for l in sys.stdin:
    if l.startswith('RESULT'):
        r=json.loads(l[7:]); print(f\"$label $grid: step {r['step_ms']:.2f} ms, elliptic {r['elliptic_ms']:.2f} ({r['elliptic_its']:.2f} its), parabolic {r['parabolic_ms']:.2f}, cells {r['reaction_ms']:.2f}\")
    else: print(l.rstrip()[:300])"
}
for r in 1 2; do
  one masked off; one masked fused -elliptic_smg_fuse_coarse 65536
  one box off; one box fused -elliptic_smg_fuse_coarse 65536
  echo "round $r $(( $(date +%s) - t0 )) s"
done

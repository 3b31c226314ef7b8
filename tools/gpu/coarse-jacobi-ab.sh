#!/usr/bin/env bash
# The coarse levels smoothed by Jacobi (smg_jacobi_from 1; docs/decisions.md, "Jacobi on the coarse levels") on a
# 4-GPU node: its GPU test, then the A/B by option, one job at a time: Table 4.1 on 1 GPU (two rounds) and on 4
# GPUs, the masked LV at 0.025 cm resident (elliptic only: its parabolic solve is CG + Jacobi, which would leave a
# -parabolic_smg_ option unused, and cardiosim refuses unused options). About 3 minutes.
#
#   device call: kind nvidia-h100-x4 (or -x2: the 4-GPU rows then fail), carry [".gpu-node"],
#                command "source .gpu-node/activate.sh && bash tools/gpu/coarse-jacobi-ab.sh"
#
# Written in session 16; run in session 17 (docs/benchmarks.md, "Session 17"), after which the GPU runs' defaults
# carry smg_jacobi_from 1 (cardiosim.solvers.linear.GPU_STENCIL_MG). So "sor" below sets -1 (every level by SOR,
# the earlier default) and "jacobi" is the default.
set -u
cd "$(dirname "$0")/../.."
export OMPI_MCA_hwloc_base_binding_policy=none      # parallel mpiruns must not share core 0
echo "tree $(git rev-parse --short HEAD 2>/dev/null || echo '?')"; nvidia-smi -L; date
t0=$(date +%s)
jac=${PETSC_OPTIONS:-}
base="$jac -elliptic_smg_jacobi_from -1 -parabolic_smg_jacobi_from -1"
CUDA_VISIBLE_DEVICES=0 timeout 70 python3 -m pytest -q -s -m gpu --tb=short tests/test_multigrid_gpu.py -k jacobi 2>&1 | grep -E 'levels|passed|failed|Error|assert' | cut -c1-300
T="python3 -m cardiosim bench table41 --placements resident --variants fused --tissues homogenised"
row() { grep -E '^\| homogenised|rror' | tail -1 | cut -c1-300; }
t41() { echo "t41 $1 GPU(s) $2 round $3 $(PETSC_OPTIONS="$4" timeout 40 $T --ranks $1 2>&1 | row)"; }
CUDA_VISIBLE_DEVICES=0 t41 1 sor 1 "$base"
CUDA_VISIBLE_DEVICES=0 t41 1 jacobi 1 "$jac"
for v in sor jacobi; do
  [ $v = sor ] && opts="$jac -elliptic_smg_jacobi_from -1" || opts=$jac
  echo "mask $v $(( $(date +%s) - t0 )) s"
  CUDA_VISIBLE_DEVICES=0 PETSC_OPTIONS="$opts" timeout 55 python3 -m cardiosim bench mask --ranks 1 --placement resident --model tt06 --ode-substeps 10 --current-density -52 --lv-spacing 0.025 --no-gamg --steps 20 2>&1 | grep -E '^\| lv|rror' | cut -c1-300
done
CUDA_VISIBLE_DEVICES=0 t41 1 sor 2 "$base"
CUDA_VISIBLE_DEVICES=0 t41 1 jacobi 2 "$jac"
t41 4 sor 1 "$base"
t41 4 jacobi 1 "$jac"
echo "$(( $(date +%s) - t0 )) s"; date

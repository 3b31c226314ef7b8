#!/usr/bin/env bash
# session 18 call B (4 GPUs): Table 4.1 resident on 4 GPUs beside the seed's layout (16 ranks grouped onto the 4
# GPUs), back to back (issue 29); then issue 27's masked LV elliptic V-cycle profiled per level under the Jacobi
# default and under SOR (tools/masked_mg.py --gpu), GPU 0 alone.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
T=(python3 -m cardiosim bench table41 --variants fused --tissues homogenised)
row() { grep -E '^\| homogenised|rror' | tail -1 | cut -c1-300; }
for r in 1 2; do
  echo "t41 resident 4 GPUs r$r $(timeout 60 "${T[@]}" --placements resident --ranks 4 2>&1 | row)"
  echo "t41 seed 16 ranks grouped r$r $(timeout 120 "${T[@]}" --placements grouped --exchange vm --ranks 16 2>&1 | row)"
  echo "t $(( $(date +%s) - t0 )) s"
done
export CUDA_VISIBLE_DEVICES=0
for j in 1 -1; do
  echo "== masked_mg --jacobi-from $j ($(( $(date +%s) - t0 )) s)"
  timeout 200 python3 tools/masked_mg.py --lv-spacing 0.025 --solves 3 --vcycles 10 --systems elliptic --gpu \
      --jacobi-from $j 2>&1 | grep -v "^INFO" | tail -22
done
echo "end $(( $(date +%s) - t0 )) s"; date

#!/usr/bin/env bash
# session 23 call 1 (4-GPU host): main (556b9eb) on the GPU: the solver GPU tests (two pairs at once) and the 4-GPU
# file; Table 4.1 resident on 1 and 2 GPUs beside a34b4a8 (session 21's end, .dev23/s21), and on 4; then on GPU 0
# alone the LV A/B of the cell kernel's register cap: main's default (auto cap 128, block 128) against
# CARDIOSIM_CELL_MAXRREG=112 CARDIOSIM_CELL_BLOCK=64 (576 threads per SM: the masked grid's 207,863 cells in 2.73
# waves instead of 3.08).
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
OUT=$OUT TIMEOUT=280 bash tools/gpu/solver-tests.sh
echo "tests $(( $(date +%s) - t0 )) s"
row() { grep -E '^\| homogenised|rror' | tail -1 | cut -c1-300; }
for n in 1 2 4; do
  for tree in "$PWD main" "$PWD/.dev23/s21 s21"; do
    set -- $tree
    [ $n = 4 ] && [ $2 = s21 ] && continue
    echo "t41 $2 $n GPUs $(cd $1 && timeout 60 python3 -m cardiosim bench table41 --variants fused \
      --tissues homogenised --placements resident --ranks $n 2>&1 | row)"
  done
done
echo "t41 $(( $(date +%s) - t0 )) s"
left=$(( 585 - ($(date +%s) - t0) ))
[ $left -gt 100 ] && CUDA_VISIBLE_DEVICES=0 TREES="$PWD $PWD" LABELS="auto cap112" \
  ENVS="- CARDIOSIM_CELL_MAXRREG=112,CARDIOSIM_CELL_BLOCK=64" ROUNDS=$(( left > 250 ? 2 : 1 )) \
  timeout $left bash tools/gpu/issue27-lv-ab.sh
echo "end $(( $(date +%s) - t0 )) s"; date

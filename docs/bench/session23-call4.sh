#!/usr/bin/env bash
# session 23 call 4 (one GPU, the session's last device time): the stencil loops' occupancy on a masked level 0.
# The level-0 loops use 56-72 registers (a row's loads first), so 1,024 threads per SM: the masked LV's 207,863
# tissue nodes take 1.54 waves of them (two, the second half empty) and the box's 6.15. Trees: new (HEAD) against
# capA (each_kernel __launch_bounds__(64, 21), blocks of 64: 40 registers, 1,600 threads per SM, the masked level 0
# in 0.98 waves; ptxas spills a little) and capB (__launch_bounds__(128, 9), blocks of 128: 56 registers, 1,152
# threads, 1.37 waves; no spills). Two rounds on GPU 0.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 TREES="$PWD $PWD/.dev23/capA $PWD/.dev23/capB" LABELS="new capA capB" ROUNDS=2 \
  timeout 330 bash tools/gpu/issue27-lv-ab.sh
echo "end $(( $(date +%s) - t0 )) s"; date

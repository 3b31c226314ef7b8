#!/usr/bin/env bash
# session 21 call 4 (4-GPU host): the 4-GPU test file on main; Table 4.1 resident on 1, 2 and 4 GPUs, main
# (device loop, a row's loads first) beside 993a12a (session 20's end), alternating.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
timeout 120 python3 -m pytest -q -m gpu --tb=short tests/test_four_gpus_gpu.py 2>&1 | tail -3
echo "tests $(( $(date +%s) - t0 )) s"
row() { grep -E '^\| homogenised|rror' | tail -1 | cut -c1-300; }
for n in 1 2 4; do
  for tree in "$PWD main" "$PWD/.dev21/prev prev"; do
    set -- $tree
    echo "t41 $2 $n GPUs $(cd $1 && timeout 70 python3 -m cardiosim bench table41 --variants fused \
      --tissues homogenised --placements resident --ranks $n 2>&1 | row)"
  done
  echo "t $(( $(date +%s) - t0 )) s"
done
echo "end $(( $(date +%s) - t0 )) s"; date

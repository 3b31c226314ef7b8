#!/usr/bin/env bash
# session 21 call 5 (the same 4-GPU host as call 4, still warm): Table 4.1's second round, prev first this time.
source .gpu-node/activate.sh && export OMPI_MCA_hwloc_base_binding_policy=none
row() { grep -E '^\| homogenised|rror' | tail -1 | cut -c1-300; }
for n in 1 2 4; do for tree in "$PWD/.dev21/prev prev" "$PWD main"; do set -- $tree
  echo "t41 r2 $2 $n GPUs $(cd $1 && timeout 40 python3 -m cardiosim bench table41 --variants fused --tissues homogenised --placements resident --ranks $n 2>&1 | row)"
done; done

#!/usr/bin/env bash
# session 23 call 3 (one H100, the card of issue 27's own figures): the LV A/B of the working tree (a solve as one
# graph, fewer launches) against prev (556b9eb, session 22's end), four rounds; then Table 4.1 resident on this GPU,
# new and prev alternating, twice.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 TREES="$PWD $PWD/.dev23/prev" LABELS="new prev" ROUNDS=4 bash tools/gpu/issue27-lv-ab.sh
echo "A/B done $(( $(date +%s) - t0 )) s"
row() { grep -E '^\| homogenised|rror' | tail -1 | cut -c1-300; }
for r in 1 2; do
  for tree in "$PWD new" "$PWD/.dev23/prev prev"; do
    set -- $tree
    echo "t41 r$r $2 1 GPU $(cd $1 && timeout 60 python3 -m cardiosim bench table41 --variants fused \
      --tissues homogenised --placements resident --ranks 1 2>&1 | row)"
  done
done
echo "end $(( $(date +%s) - t0 )) s"; date

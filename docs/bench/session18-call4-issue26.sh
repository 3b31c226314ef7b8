#!/usr/bin/env bash
# session 18 call A (4 GPUs as 4 lanes): issue 26's generated kernels with the paired reciprocals against the
# generator before (main c31f864) in one run, beside Myokit's own CUDA kernel; the GPU tests of the generated and
# fused kernels on the other GPUs at the same time.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site18 .dev18/wheels/*.whl
export PYTHONPATH=$PYTHONPATH:/tmp/site18
nvidia-smi -L; date; t0=$(date +%s)
# the tree before: the same checkout with main's two generator files
mkdir -p /tmp/oldtree && cp -r cardiosim kernels models tools /tmp/oldtree/
cp .dev18/old/cse.py .dev18/old/cellml_codegen.py /tmp/oldtree/cardiosim/cells/
( export CUDA_VISIBLE_DEVICES=1
  timeout 560 python3 -m pytest -q -s -m gpu --tb=short tests/test_cellml_gpu.py -k "not steps_per_second" 2>&1 \
    | grep -E 'max relative|passed|failed|rror|assert' | cut -c1-300 > $OUT/lane1.txt ) &
( export CUDA_VISIBLE_DEVICES=2
  timeout 560 python3 -m pytest -q -s -m gpu --tb=short tests/test_cuda_kernels.py 2>&1 \
    | grep -E 'max|passed|failed|rror|assert' | cut -c1-300 > $OUT/lane2.txt ) &
( export CUDA_VISIBLE_DEVICES=3
  timeout 560 python3 -m pytest -q -m gpu --tb=short tests/test_population_gpu.py tests/test_cell_populations_gpu.py 2>&1 \
    | tail -5 | cut -c1-300 > $OUT/lane3.txt ) &
export CUDA_VISIBLE_DEVICES=0
M=(--models "tt06 (hand)" "tt06 (generated)" "bondarenko (hand)" "bondarenko (generated)" "ord2011 (generated)" "courtemanche (generated)")
O=(tools/gpu/issue26_occupancy.py time --blocks 128 --repeats 3 --caps -1)
for r in 1 2; do
  echo "== round $r, new generator ($(( $(date +%s) - t0 )) s)"
  timeout 200 python3 "${O[@]}" "${M[@]}" 2>/dev/null | grep -E '^\||GPU'
  echo "== round $r, generator before ($(( $(date +%s) - t0 )) s)"
  (cd /tmp/oldtree && timeout 150 python3 "${O[@]}" --models "tt06 (generated)" "bondarenko (generated)" "ord2011 (generated)" "courtemanche (generated)" 2>/dev/null | grep -E '^\|')
  [ $r = 1 ] && { echo "== Myokit peer ($(( $(date +%s) - t0 )) s)"; timeout 120 python3 tools/gpu/myokit_peer.py time 2>&1 | grep -E '^\||Myokit|rror'; }
done
echo "== lanes ($(( $(date +%s) - t0 )) s)"; wait
for f in $OUT/lane1.txt $OUT/lane2.txt $OUT/lane3.txt; do echo "-- $f"; cat $f; done
echo "end $(( $(date +%s) - t0 )) s"; date

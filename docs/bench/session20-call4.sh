#!/usr/bin/env bash
# session 20 call 4 (a 4-GPU host), the final tree: the BiV at 0.25 mm on 1 and 2 GPUs (100 steps, the geometry
# built once); issue 27's LV ratio by the bench's own command (GPU 0 alone, three rounds); the GPU tests of the
# solvers, runs and masks on GPUs 0,1 and 2,3 side by side; the 4-GPU tests.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site20 .dev20/wheels/*.whl
export PYTHONPATH=$PYTHONPATH:/tmp/site20
nvidia-smi -L; date; t0=$(date +%s)
mkdir -p /tmp/biv
for np in 1 2; do
  echo "== BiV, NP=$np ($(( $(date +%s) - t0 )) s)"
  OUT=/tmp/biv REUSE=1 NP=$np DURATION=1.0 PYTHON=python3 timeout 100 bash tools/gpu/issue27-biv-resident.sh \
      > /tmp/biv/log.txt 2>&1
  grep -E "^ *(reaction|parabolic|elliptic|io|total) |set-up|iterations per step|activation" /tmp/biv/log.txt | head -10
  cp /tmp/biv/log.txt $OUT/biv-np$np.txt
done
echo "== LV ratio ($(( $(date +%s) - t0 )) s)"
CUDA_VISIBLE_DEVICES=0 timeout 150 python3 -m cardiosim.bench.mask --anatomies lv --ranks 1 --placement resident \
    --model tt06 --ode-substeps 10 --current-density -52 --lv-spacing 0.025 --no-gamg --rounds 3 \
    --json $OUT/bench-mask.json 2>&1 | grep -E "^lv|medians"
echo "== tests ($(( $(date +%s) - t0 )) s)"
CUDA_VISIBLE_DEVICES=0,1 timeout 250 python3 -m pytest -q -m gpu --tb=short tests/test_resident_gpu.py \
    tests/test_multigpu_runs_gpu.py > $OUT/tests-01.txt 2>&1 &
CUDA_VISIBLE_DEVICES=2,3 timeout 250 python3 -m pytest -q -m gpu --tb=short tests/test_masked_mg_gpu.py \
    tests/test_solvers_ranks_gpu.py tests/test_mask_gpu.py tests/test_multigrid_gpu.py tests/test_coloured_icc_gpu.py \
    tests/test_microscopic_gpu.py > $OUT/tests-23.txt 2>&1 &
wait
echo "== GPUs 0,1:"; tail -4 $OUT/tests-01.txt; echo "== GPUs 2,3:"; tail -4 $OUT/tests-23.txt
[ $(( $(date +%s) - t0 )) -lt 480 ] && timeout 60 python3 -m pytest -q -m gpu --tb=short tests/test_four_gpus_gpu.py 2>&1 | tail -2
echo "end $(( $(date +%s) - t0 )) s"; date

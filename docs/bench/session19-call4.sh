#!/usr/bin/env bash
# session 19 call 4 (a 4-GPU host), tree 7d5b8d9 + docs: issue 27's LV at 0.025 cm masked and box on GPU 0 alone
# (three rounds alternating); then the GPU tests of the solvers, runs and masks on GPUs 0,1 and 2,3 side by side;
# the 4-GPU tests; the BiV at 0.25 mm on 1 and 2 GPUs (100 steps, the geometry built once).
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site19 .dev19/wheels/*.whl
export PYTHONPATH=$PYTHONPATH:/tmp/site19
nvidia-smi -L; date; t0=$(date +%s)
one() {  # grid
  CUDA_VISIBLE_DEVICES=0 timeout 100 python3 -m cardiosim.bench.mask --single lv --grid $1 --steps 20 --model tt06 \
    --placement resident --lv-spacing 0.025 --ode-substeps 10 --current-density -52 --integrator rush-larsen \
    2>&1 | grep -E "RESULT|rror" | python3 -c "import sys,json
for l in sys.stdin:
    if l.startswith('RESULT'):
        r=json.loads(l[7:]); print(f\"$1: step {r['step_ms']:.2f} ms, elliptic {r['elliptic_ms']:.2f} ({r['elliptic_its']:.2f} its), parabolic {r['parabolic_ms']:.2f} ({r['parabolic_its']:.2f}), cells {r['reaction_ms']:.2f}\")
    else: print(l.rstrip()[:300])"
}
one masked
for r in 1 2 3; do one masked; one box; done
echo "LV $(( $(date +%s) - t0 )) s"
CUDA_VISIBLE_DEVICES=0,1 timeout 280 python3 -m pytest -q -m gpu --tb=short tests/test_resident_gpu.py \
    tests/test_multigpu_runs_gpu.py > $OUT/tests-01.txt 2>&1 &
CUDA_VISIBLE_DEVICES=2,3 timeout 280 python3 -m pytest -q -m gpu --tb=short tests/test_masked_mg_gpu.py \
    tests/test_solvers_ranks_gpu.py tests/test_mask_gpu.py tests/test_multigrid_gpu.py tests/test_coloured_icc_gpu.py \
    tests/test_microscopic_gpu.py > $OUT/tests-23.txt 2>&1 &
wait
echo "== GPUs 0,1:"; tail -4 $OUT/tests-01.txt; echo "== GPUs 2,3:"; tail -4 $OUT/tests-23.txt
echo "tests $(( $(date +%s) - t0 )) s"
timeout 90 python3 -m pytest -q -m gpu --tb=short tests/test_four_gpus_gpu.py 2>&1 | tail -3
echo "four GPUs $(( $(date +%s) - t0 )) s"
mkdir -p /tmp/biv
for np in 1 2; do
  left=$(( 590 - ($(date +%s) - t0) )); [ $left -lt 40 ] && { echo "no time left for the BiV on $np GPU(s)"; break; }
  echo "== BiV, NP=$np ($(( $(date +%s) - t0 )) s)"
  OUT=/tmp/biv REUSE=1 NP=$np DURATION=1.0 PYTHON=python3 timeout $left bash tools/gpu/issue27-biv-resident.sh \
      > /tmp/biv/log.txt 2>&1
  grep -E "^ *(reaction|parabolic|elliptic|total) |set-up|iterations per step|activation" /tmp/biv/log.txt | head -9
  cp /tmp/biv/log.txt $OUT/biv-np$np.txt
done
echo "end $(( $(date +%s) - t0 )) s"; date

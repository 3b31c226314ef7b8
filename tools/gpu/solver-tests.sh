#!/usr/bin/env bash
# The GPU tests of the PDE solvers, runs and masks on a 4-GPU host: two pytest runs
# side by side on GPUs 0,1 and 2,3 (each file's 2-GPU cases need a pair), then the 4-GPU file. Logs in $OUT;
# the last lines of each on stdout. On a 2-GPU host, PAIRS=1 runs the two sets one after the other on GPUs 0,1.
#
#   source .gpu-node/activate.sh && OUT=/tmp/t bash tools/gpu/solver-tests.sh
set -u
out=${OUT:-/tmp}
py=${PYTHON:-python3}
runs=("tests/test_resident_gpu.py tests/test_multigpu_runs_gpu.py"
      "tests/test_masked_mg_gpu.py tests/test_solvers_ranks_gpu.py tests/test_mask_gpu.py tests/test_multigrid_gpu.py tests/test_coloured_icc_gpu.py tests/test_microscopic_gpu.py")
pairs=("0,1" "2,3")
for i in 0 1; do
  gpus=${pairs[$i]}; [ "${PAIRS:-2}" = 1 ] && gpus=0,1
  # shellcheck disable=SC2086
  CUDA_VISIBLE_DEVICES=$gpus timeout ${TIMEOUT:-300} $py -m pytest -q -m gpu --tb=short ${runs[$i]} \
      > "$out/tests-$i.txt" 2>&1 &
  [ "${PAIRS:-2}" = 1 ] && wait
done
wait
for i in 0 1; do echo "== ${runs[$i]}"; tail -4 "$out/tests-$i.txt"; done
[ "${PAIRS:-2}" = 2 ] && timeout 90 $py -m pytest -q -m gpu --tb=short tests/test_four_gpus_gpu.py 2>&1 | tail -2

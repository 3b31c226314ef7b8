#!/usr/bin/env bash
# session 21 call 2 (2-GPU host): GPU 0 the issue-27 LV A/B of main, offdiag-batched, +device loop, +coarse loads
# first (stack); GPU 1 the one-GPU solver tests of the stack tree (its new device-loop test among them).
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
D=$PWD/.dev21
(
  cd $D/stack && sleep 45 && CUDA_VISIBLE_DEVICES=1 timeout 420 python3 -m pytest -q -m gpu --tb=short \
    tests/test_multigrid_gpu.py tests/test_masked_mg_gpu.py tests/test_mask_gpu.py tests/test_resident_gpu.py \
    -k "not two_gpus" > $OUT/tests-stack-gpu1.txt 2>&1
  cd $D/stack && CUDA_VISIBLE_DEVICES=1 timeout 60 python3 -m pytest -q -s -m gpu tests/test_multigrid_gpu.py \
    -k device_loop 2>&1 | grep -E "precond|passed|failed" > $OUT/device-loop-test.txt
) &
TP=$!
CUDA_VISIBLE_DEVICES=0 TREES="$PWD $D/offdiag-batched $D/loop-batched $D/stack" \
  LABELS="main batched loop+batched stack" ROUNDS=3 bash tools/gpu/issue27-lv-ab.sh
echo "A/B done $(( $(date +%s) - t0 )) s"
wait $TP
echo "== stack tests, GPU 1"; tail -15 $OUT/tests-stack-gpu1.txt; cat $OUT/device-loop-test.txt
echo "end $(( $(date +%s) - t0 )) s"; date

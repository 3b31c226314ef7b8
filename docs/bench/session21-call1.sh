#!/usr/bin/env bash
# session 21 call 1 (2-GPU host): GPU 0 the issue-27 LV A/B of main, offdiag-batched, compact-stencil;
# GPU 1 Nsight Compute (and an nsys timeline if there is nsys).
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
which ncu nsys; nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1
(
  export CUDA_VISIBLE_DEVICES=1
  sleep 60
  OUT=$OUT timeout 200 bash tools/gpu/issue27-ncu.sh > $OUT/ncu-summary.txt 2>&1
  if which nsys >/dev/null 2>&1; then
    timeout 150 nsys profile -o $OUT/lv --trace cuda --cuda-graph-trace node -f true \
      python3 -m cardiosim.bench.mask --single lv --grid masked --steps 20 --model tt06 --placement resident \
      --lv-spacing 0.025 --ode-substeps 10 --current-density -52 --integrator rush-larsen > $OUT/nsys-run.txt 2>&1
    nsys stats --report cuda_gpu_trace --format csv -o $OUT/trace $OUT/lv.nsys-rep > /dev/null 2>&1
    ls $OUT/trace* 2>/dev/null | head; gzip -f $OUT/trace*.csv 2>/dev/null; rm -f $OUT/lv.sqlite $OUT/lv.nsys-rep
  fi
) &
NP=$!
CUDA_VISIBLE_DEVICES=0 TREES="$PWD $PWD/.dev21/offdiag-batched $PWD/.dev21/compact-stencil" \
  LABELS="main batched compact" ROUNDS=3 bash tools/gpu/issue27-lv-ab.sh
echo "A/B done $(( $(date +%s) - t0 )) s"
wait $NP; echo "== ncu"; cat $OUT/ncu-summary.txt | tail -60
echo "end $(( $(date +%s) - t0 )) s"; date

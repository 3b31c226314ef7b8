#!/usr/bin/env bash
# session 18 call E (2 GPUs): Jacobi on every level of a masked grid's elliptic multigrid (the new GPU default):
# the masked GPU tests on 2 GPUs, the LV once under the new default, then the BiV at 0.25 mm on one GPU, the new
# default against -elliptic_smg_jacobi_from 1 (the default before), the geometry built once.
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site18 .dev18/wheels/*.whl
export PYTHONPATH=$PYTHONPATH:/tmp/site18
nvidia-smi -L; date; t0=$(date +%s)
timeout 200 python3 -m pytest -q -m gpu --tb=short tests/test_masked_mg_gpu.py tests/test_mask_gpu.py 2>&1 | tail -4
echo "tests $(( $(date +%s) - t0 )) s"
export CUDA_VISIBLE_DEVICES=0
timeout 60 python3 -m cardiosim.bench.mask --single lv --grid masked --steps 20 --model tt06 --placement resident \
    --lv-spacing 0.025 --ode-substeps 10 --current-density -52 --integrator rush-larsen 2>&1 | grep -E "RESULT|rror" | cut -c1-600
mkdir -p /tmp/biv
for args in "" "-elliptic_smg_jacobi_from 1"; do
  echo "== BiV, PETSC_ARGS='$args' ($(( $(date +%s) - t0 )) s)"
  OUT=/tmp/biv REUSE=1 NP=1 DURATION=1.0 PYTHON=python3 PETSC_ARGS="$args" timeout 150 \
      bash tools/gpu/issue27-biv-resident.sh > /tmp/biv/log.txt 2>&1
  grep -E "elliptic|parabolic|reaction|Total|total|step|rror|solver|StencilCG" /tmp/biv/log.txt | grep -v "^INFO" | head -30 | cut -c1-220
  cp /tmp/biv/log.txt "$OUT/biv-${args:+jacobi1}${args:-default}.txt"
done
echo "end $(( $(date +%s) - t0 )) s"; date

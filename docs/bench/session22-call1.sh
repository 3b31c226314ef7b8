#!/usr/bin/env bash
# session 22 call 1 (2-GPU host): on GPU 0 alone, tools/phi_profile.py (the LV's phases in pieces) and an Nsight
# Systems trace of the masked and box LV (tools/gpu/nsys_steps.py: busy and idle time per step); then the solver GPU
# tests of main (9e9c810's host code had not run on a GPU), both sets at once on GPUs 0,1.
# (nsys was not installed on the machine: the trace part was skipped, and tools/gpu/nsys_steps.py was not kept)
set -u
export OMPI_MCA_hwloc_base_binding_policy=none
nvidia-smi -L; date; t0=$(date +%s)
which nsys ncu
export CUDA_VISIBLE_DEVICES=0
timeout 150 python3 tools/phi_profile.py 0.025 resident 2>&1 | grep -v "^$" | tail -40
echo "phi_profile done $(( $(date +%s) - t0 )) s"
lv="--single lv --steps 20 --model tt06 --placement resident --lv-spacing 0.025 --ode-substeps 10 --current-density -52 --integrator rush-larsen"
if command -v nsys >/dev/null; then
  for g in masked box; do
    timeout 100 nsys profile -t cuda --cuda-graph-trace=node -o $OUT/lv-$g python3 -m cardiosim.bench.mask $lv --grid $g 2>&1 | grep -E "RESULT|rror" | cut -c1-300
    nsys export --type sqlite -o $OUT/lv-$g.sqlite $OUT/lv-$g.nsys-rep >/dev/null 2>&1
    echo "== $g"; python3 tools/gpu/nsys_steps.py $OUT/lv-$g.sqlite --last 10
    rm -f $OUT/lv-$g.nsys-rep $OUT/lv-$g.sqlite
    echo "nsys $g done $(( $(date +%s) - t0 )) s"
  done
fi
runs=("tests/test_resident_gpu.py tests/test_multigpu_runs_gpu.py"
      "tests/test_masked_mg_gpu.py tests/test_solvers_ranks_gpu.py tests/test_mask_gpu.py tests/test_multigrid_gpu.py tests/test_coloured_icc_gpu.py tests/test_microscopic_gpu.py")
for i in 0 1; do
  CUDA_VISIBLE_DEVICES=0,1 timeout $(( 585 - ($(date +%s) - t0) )) python3 -m pytest -q -m gpu --tb=short ${runs[$i]} \
    > $OUT/tests-$i.txt 2>&1 &
done
wait
for i in 0 1; do echo "== ${runs[$i]}"; tail -6 $OUT/tests-$i.txt; done
echo "end $(( $(date +%s) - t0 )) s"; date

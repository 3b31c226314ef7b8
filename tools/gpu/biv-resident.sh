#!/usr/bin/env bash
# The BiV benchmark on one GPU (or NP GPUs): the idealised BiV at 0.25 mm (1.7 million grid nodes, 464,000 in
# tissue), bidomain, O'Hara-Rudy 2011 (CellML, Rush-Larsen) with endo-, mid- and epicardial cells chosen by the
# transmural coordinate, both endocardia stimulated, the pseudo-ECG, resident on the GPU. Needs a set-up venv with
# PyCUDA and Myokit (EXTRAS=test,plot,gpu make setup) and nvcc. About 5-10 minutes (the geometry ~1 min on the CPU,
# the first kernel compile, 200 steps). Everything it prints goes to $OUT/biv-resident.txt too.
#
#   on a GPU node:  bash tools/gpu/biv-resident.sh
#   on 2 GPUs, one rank each:  NP=2 bash tools/gpu/biv-resident.sh  (BALANCE below chooses the split)
#   DURATION=1.0 (ms) for 100 steps instead of 200 (what benchmarks/biv.json records).
#   BALANCE=tissue|box|auto: grid.balance on several ranks (auto: the box split for the resident placement).
#   PETSC_ARGS="-elliptic_smg_jacobi_from 1": PETSc options for the run (after its --); REUSE=1 keeps the geometry
#   in $OUT for the next call with REUSE=1 (an A/B of solver options without building the BiV twice).
#
# What it should show:
#   1. geometry: "rule-based fibres: 463702 tissue nodes, both ventricles", "121 x 137 x 105 nodes" and the [grid]
#      lines (size [3, 3.4, 2.6], spacing 0.025; the grid padded to multiples of 8 cells).
#   2. the run's header: resident placement, the solvers it chose; then progress lines and, at the end, the timing
#      table (reaction, parabolic, elliptic, I/O, other; mean and max) and iterations per step: ms per step and per
#      phase are total / steps and each phase / steps (the stencil solvers visit the tissue's nodes only:
#      smg_active); benchmarks/biv.json has the current figures.
#   3. inspect: the activation map (within 2 ms the stimulated endocardial layer only) and the ECG traces' ranges.
#      2 ms is too short for the wave to cross the wall, so the run ends with two warnings (under 95 % activated,
#      the far side not reached): this measures cost, not the QRS. The same config at 1 mm on the CPU (native
#      O'Hara-Rudy, cpu placement, 2 ms) ran here: 3622 of 7315 tissue nodes activated, those two warnings.
set -uo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
dir=${OUT:-/tmp}
np=${NP:-1}
duration=${DURATION:-2.0}
balance=${BALANCE:-auto}
run=()
[ "$np" -gt 1 ] && run=(mpirun -n "$np")
out=$dir/biv-resident.txt
export CARDIOSIM_CACHE=${CARDIOSIM_CACHE:-/tmp/cardiosim-biv-cache}
{
  nvidia-smi --query-gpu=name --format=csv,noheader
  if [ -n "${REUSE:-}" ] && [ -f "$dir/biv25.h5" ] && [ -f "$dir/geometry.txt" ]; then
    echo "geometry: $dir/biv25.h5 reused (REUSE=1)"
  else
    "$py" -m cardiosim geometry biv --spacing 0.025 --out "$dir/biv25.h5" --overwrite | tee "$dir/geometry.txt"
  fi
  grid=$(sed -n '/^\[grid\]/,$p' "$dir/geometry.txt" | sed "s/^\[grid\]$/[grid]\nbalance = \"$balance\"/")
  cat > "$dir/biv-ohara.toml" <<TOML
[simulation]
equations = "bidomain"
duration = $duration                  # ms: 100 steps per ms
dt = 0.01                       # ms
progress_interval = 10.0
$grid
sigma_il = 1.74                 # mS/cm (Clerc 1976)
sigma_it = 0.19
sigma_el = 6.25
sigma_et = 2.36
[cell]
model = "$PWD/models/ohara_rudy_2011_endo.cellml"
integrator = "rush-larsen"
backend = "cuda"
placement = "resident"
parameters = { celltype = 0.0 }   # endocardial
[[cell.regions]]                  # mid-myocardial (M) cells
shape = "coordinate"
coordinate = "transmural"
range = [0.3, 0.7]
parameters = { celltype = 2.0 }
[[cell.regions]]                  # epicardial cells
shape = "coordinate"
coordinate = "transmural"
range = [0.7, 1.0]
parameters = { celltype = 1.0 }
[[stimulus]]
name = "endocardia"
shape = "coordinate"
coordinate = "transmural"
range = [0.0, 0.05]
duration = 1.0
current_density = -80.0
[ecg]
bath_conductivity = 2.0
[[ecg.electrodes]]
name = "apex"
position = [0.0, 0.0, -4.5]
[[ecg.electrodes]]
name = "base"
position = [0.0, 0.0, 3.0]
[[ecg.electrodes]]
name = "left"
position = [-4.0, 0.0, -0.5]
[[ecg.electrodes]]
name = "right"
position = [5.0, 0.0, -0.5]
[[ecg.leads]]
name = "long"
plus = "base"
minus = "apex"
[[ecg.leads]]
name = "lv_rv"
plus = "left"
minus = "right"
[output]
interval = 1.0
fields = ["Vm"]
TOML
  read -r -a extra <<< "${PETSC_ARGS:-}"
  "${run[@]}" "$py" -m cardiosim run "$dir/biv-ohara.toml" --output "$dir/biv-ohara.h5" --overwrite \
      ${extra[@]+-- "${extra[@]}"}
  "$py" -m cardiosim inspect "$dir/biv-ohara.h5"
} 2>&1 | tee "$out"
rm -f "$dir/biv-ohara.h5"                       # large; the text above is what is wanted
[ -n "${REUSE:-}" ] || rm -f "$dir/biv25.h5"

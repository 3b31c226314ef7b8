#!/usr/bin/env bash
# Issue 26 on one GPU: the generated cell kernels after per-run specialisation (constants folded, integer powers as
# products) against the hand-written twins, and GRL1 on the GPU. Needs a set-up venv with PyCUDA and Myokit
# (EXTRAS=test,plot,gpu make setup; Myokit carried as a wheel where the node reaches no registry) and nvcc.
# About 3-5 minutes for the speed table, then several for the twin test; everything it prints goes to
# $OUT/issue26.txt too (on a fresh machine more: 420 s ran out inside the twin test, session 11).
#
#   device call:  command "bash tools/gpu/issue26-cell-kernels.sh"
#
# What it should show (compare with docs/benchmarks.md, "Generated (CellML) models in the fused kernel", H100
# 2026-11-25: hand TT06 7.27e9, hand Bondarenko 5.51e9, generated TT06 1.68e9, O'Hara-Rudy 8.1e8, Courtemanche 1.26e9
# cell-steps/s; the same card for every number, or rerun those rows on the card at hand):
#   1. test_generated_kernel_equals_numpy_twin: GPU = NumPy to < 1e-10 with Forward Euler, Rush-Larsen and GRL1
#      (fmad off) for TT06, O'Hara-Rudy, Courtemanche (3 passed).
#   2. test_cell_steps_per_second: a table with the column "x hand twin"; issue 26's targets: generated TT06 and
#      generated Bondarenko >= 0.9, O'Hara-Rudy >= 3e9; the row "tt06-generated, constants not folded" is the old
#      form (powers already products) and shows what the folding alone bought; the rows "tt06-generated, without
#      common subexpressions" and "ord2011-generated, without common subexpressions" are the equations as Myokit
#      has them (constants folded, no CSE, no reciprocals: cardiosim/cells/cse.py), beside the default rows with
#      both: the GPU's gain from the CSE pass (on the CPU: docs/benchmarks.md, "Generated cell models on one CPU
#      core"; nvcc's PTX has 36-68 % fewer div.rn.f64 with it, registers within 8).
#   3. cardiosim kernels for the generated models: registers and spills (0 spills expected; O'Hara-Rudy had 255
#      registers before).
# Populations on the GPU (item 4) are in tools/gpu/issue26-population.sh (a device call of their own: 5-9 minutes).
set -uo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
out=${OUT:-/tmp}/issue26.txt
export CARDIOSIM_CACHE=${CARDIOSIM_CACHE:-/tmp/cardiosim-issue26-cache}
{
  nvidia-smi --query-gpu=name --format=csv,noheader
  # the speed table first (about a minute): the twin test integrates whole beats in NumPy beside the GPU (minutes per
  # model) and once took the whole of a 420 s call before the table; lines pass through as they come
  CARDIOSIM_REQUIRE=gpu "$py" -m pytest -q -s -m gpu tests/test_cellml_gpu.py -k steps_per_second 2>&1 \
      | grep --line-buffered -v "^INFO"
  CARDIOSIM_REQUIRE=gpu "$py" -m pytest -q -s -m gpu tests/test_cellml_gpu.py -k equals_numpy_twin 2>&1 \
      | grep --line-buffered -v "^INFO"
  for m in ten_tusscher_model_2006_epi ohara_rudy_2011_endo courtemanche_ramirez_nattel_1998 \
           bondarenko_szigeti_bett_kim_rasmusson_2004_apical; do
    "$py" -m cardiosim kernels --model "models/$m.cellml"
  done
  "$py" -m cardiosim kernels --model tt06
} 2>&1 | tee "$out"

#!/usr/bin/env bash
# Issue 26 on one GPU: does occupancy limit the fused Forward-Euler cell kernel? Hand TT06, hand Bondarenko and
# generated O'Hara-Rudy timed with register caps (-maxrregcount through $CARDIOSIM_CELL_MAXRREG) and blocks of 128
# and 256 threads ($CARDIOSIM_CELL_BLOCK), the loop of tests/test_cellml_gpu.py::test_cell_steps_per_second (2^20
# cells at rest, k = 100, 10 launches, best of 3). About 2-4 minutes; everything goes to $OUT/issue26-occupancy.txt.
#
#   device call (one GPU):  command "source .gpu-node/activate.sh && bash tools/gpu/issue26-occupancy.sh"
#   carry (only where python3 there lacks Myokit, for O'Hara-Rudy; without it that model is left out):
#     [".dev/gpu-wheelhouse/core/myokit-1.39.2-py3-none-any.whl",
#      ".dev/gpu-wheelhouse/core/lxml-6.1.3-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"]
#
# What ptxas gives (sm_90, nvcc 13, fmad on; `python3 tools/gpu/issue26_occupancy.py ptxas`, no GPU needed):
#   model       cap    regs  spill st/ld (B)  stack (B)  warps/SM block 128 / 256
#   tt06        none   162      0 /    0         0          12 / 8
#   tt06        128    128    140 /  116       104          16 / 16
#   bondarenko  none   238      0 /    0         0           8 / 8
#   bondarenko  192    192    172 /  172       176           8 / 8     (spills, no more warps: the control)
#   bondarenko  168    168    284 /  284       272          12 / 8
#   bondarenko  128    128    636 /  716       480          16 / 16
#   bondarenko  96      96   1004 / 1188       608          20 / 16
#   ord2011     none   240      0 /    0         0           8 / 8
#   ord2011     168    168    392 /  520       304          12 / 8
#   ord2011     128    128    648 / 1040       448          16 / 16
# (warps per SM from registers alone, as cuda_occupancy.h counts: 4 sub-partitions of 16,384 registers, 256 per
# warp granule; 192 registers give no more warps than 240, and 168 gives 12 only in blocks of 128.)
#
# What to look for in the table (column "x no cap, block 128" is against the model's uncapped block-128 row, today's
# default; issue 26's targets on an H200: Bondarenko >= 7e9, O'Hara-Rudy >= 3e9; H200 before: TT06 7.11e9,
# Bondarenko 5.48e9, O'Hara-Rudy 2.28e9):
#   - occupancy is the limit if the rate follows the warps column: cap 168 block 128 (12 warps) above cap 168
#     block 256 (8 warps) and above no cap; cap 128 (16 warps) higher still unless its spills eat the gain;
#   - cap 192 (8 warps, spills) below no cap measures what spilling alone costs;
#   - no cap at block 128 vs 256 should be equal for Bondarenko and O'Hara-Rudy (8 warps either way) and favour
#     128 for TT06 (12 vs 8): if so the occupancy model above holds;
#   - "states = reference" must say bitwise everywhere (a cap changes allocation, not arithmetic);
#   - a winner becomes the default only after this: set CARDIOSIM_CELL_MAXRREG / CARDIOSIM_CELL_BLOCK in a run
#     meanwhile (unset = today's kernel, bit for bit).
set -uo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-python3}
out=${OUT:-/tmp}/issue26-occupancy.txt
export CARDIOSIM_CACHE=${CARDIOSIM_CACHE:-/tmp/cardiosim-issue26-occupancy-cache}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
models=("tt06 (hand)" "bondarenko (hand)" "ord2011 (generated)")
if ! "$py" -c "import myokit, lxml" 2>/dev/null; then
  whl=(.dev/gpu-wheelhouse/core/myokit-*.whl .dev/gpu-wheelhouse/core/lxml-*.whl)
  if ls "${whl[@]}" >/dev/null 2>&1; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --target /tmp/gpu-site "${whl[@]}" 2>&1 | tail -2
    case ":${PYTHONPATH}:" in *:/tmp/gpu-site:*) ;; *) export PYTHONPATH="$PYTHONPATH:/tmp/gpu-site" ;; esac
  fi
  "$py" -c "import myokit, lxml" 2>/dev/null || {
    echo "no Myokit/lxml for python3 here (carry the wheels named above): O'Hara-Rudy left out"
    models=("tt06 (hand)" "bondarenko (hand)"); }
fi
{
  nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
  nvcc --version | tail -2 | head -1
  # uncapped and block 128 first for each model: the reference of the ratio and of the bitwise check
  "$py" tools/gpu/issue26_occupancy.py time --models "${models[@]}" --caps 0 192 168 128 96 --blocks 128 256
} 2>&1 | tee "$out"

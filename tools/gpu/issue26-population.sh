#!/usr/bin/env bash
# Issue 26, item 4 on one GPU: populations with every cell its own parameters in device memory
# (`cardiosim cell --population N --backend cuda`), checked against the CPU and timed: 10^5 O'Hara-Rudy cells x 100
# beats on the GPU beside the same on the CPU (the CPU measured on this node's host with 100 cells x 2 beats and
# extrapolated by its cell-steps/s: 10^5 x 100 beats would take days on one core). Needs a set-up venv with PyCUDA
# and Myokit and nvcc, as tools/gpu/issue26-cell-kernels.sh. Everything it prints goes to $OUT/issue26-population.txt.
#
#   device call:  command "bash tools/gpu/issue26-population.sh"   (about 6 minutes on an H200: under the 10-minute limit)
#
# What it should show:
#   1. tests/test_population_gpu.py: 4 passed. For three generated models the GPU population equals the CPU
#      population (biomarkers within 1e-8 relative, the recorded beat within 1e-6 mV; the lines it prints give the
#      largest differences), and a cell that blows up is marked failed on both with the others unchanged.
#   2. 1-beat and 6-beat runs of 10^5 cells: the time the 100 beats will take (a recorded beat costs more than a
#      pre-paced one: 10.3 s against 2.24 s on an H200 in session 14).
#   3. The 100-beat run: "population of 100000 cells, 100 beats each: ... s (R cell-steps/s on one GPU)"; it is run
#      only where step 2 says it fits in $BUDGET s (default 420; else its estimate stands). Protocol: O'Hara-Rudy
#      2011 endo, Rush-Larsen at 0.02 ms (one cell after 31 beats on the CPU: APD90 269.15 ms against CVODES's
#      270.35, -0.4 %; GRL1 at 0.05 ms gives 267.25, -1.1 %, but its kernel spills ~5 kB per cell-step on the GPU,
#      where it ran at 2.2e8 cell-steps/s, so 100 beats would have taken 909 s: docs/benchmarks.md), 1 Hz,
#      99 beats of pre-pacing and the last beat recorded every 1 ms, GKr_b and GNa log-normal (sigma 0.2), I_CaL
#      (PCa_b) uniform 0.7-1.3, the filter APD90 in 200-350 ms.
#   4. The same protocol on one core of the host, 100 cells x 2 beats, and the extrapolation to 10^5 x 100 beats.
set -uo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
out=${OUT:-/tmp}/issue26-population.txt
tmp=$(mktemp -d)
export CARDIOSIM_CACHE=${CARDIOSIM_CACHE:-/tmp/cardiosim-issue26-cache}
model=models/ohara_rudy_2011_endo.cellml
protocol=(--model "$model" --integrator rush-larsen --dt 0.02 --period 1000 --record-every 1
          --sample GKr_b=lognormal:0.2 --sample GNa=lognormal:0.2 --sample PCa_b=uniform:0.7:1.3 --keep APD90=200:350)
rate() { sed -n 's/.*(\([0-9.e+-]*\) cell-steps\/s.*/\1/p' "$1" | tail -1; }
seconds() { sed -n 's/.*; \([0-9.]*\) s (.*/\1/p' "$1" | tail -1; }
{
  nvidia-smi --query-gpu=name --format=csv,noheader
  [ "${SKIP_TESTS:-0}" = 1 ] || CARDIOSIM_REQUIRE=gpu "$py" -m pytest -q -s -m gpu tests/test_population_gpu.py 2>&1 | grep -v "^INFO"

  # compile first (the GPU kernel and the host's C driver, cached per machine), so that no rate below counts it
  "$py" -m cardiosim cell "${protocol[@]}" --population 2 --beats 1 --backend cuda --output "$tmp/w1.h5" >/dev/null 2>&1
  "$py" -m cardiosim cell "${protocol[@]}" --population 2 --beats 1 --output "$tmp/w2.h5" >/dev/null 2>&1
  # the recorded beat (1000 launches, the biomarkers of every cell) costs more than a pre-paced one (one launch):
  # the time of 100 beats is one recorded beat + 99 pre-paced ones, from a 1-beat and a 6-beat run
  echo "== 10^5 cells, 1 and 6 beats, GPU"
  "$py" -m cardiosim cell "${protocol[@]}" --population 100000 --beats 1 --backend cuda \
      --output "$tmp/one.h5" 2>&1 | tee "$tmp/one.log"
  "$py" -m cardiosim cell "${protocol[@]}" --population 100000 --beats 1 --prepace 5 --backend cuda \
      --output "$tmp/six.h5" 2>&1 | tee "$tmp/six.log"
  est=$("$py" -c "
t1, t6 = (float('$(seconds "$tmp/one.log")'), float('$(seconds "$tmp/six.log")'))
print(f'{t1 + 99 * (t6 - t1) / 5:.0f}')" 2>/dev/null || echo 99999)
  echo "estimate for 100 beats: $est s (one recorded beat + 99 pre-paced ones at the 6-beat run's rate)"
  if [ "$est" -lt "${BUDGET:-420}" ]; then
    echo "== 10^5 cells, 100 beats, GPU"
    /usr/bin/time -f "wall %e s, max RSS %M kB" "$py" -m cardiosim cell "${protocol[@]}" --population 100000 \
        --beats 1 --prepace 99 --backend cuda --output "$tmp/hundred.h5" --csv "$tmp/hundred.csv" 2>&1
  else
    echo "== 100 beats not run: the estimate above exceeds what one device call may take"
  fi

  echo "== 100 cells, 2 beats, one core of the host"
  "$py" -m cardiosim cell "${protocol[@]}" --population 100 --beats 1 --prepace 1 --backend native \
      --output "$tmp/cpu.h5" 2>&1 | tee "$tmp/cpu.log"
  c=$(rate "$tmp/cpu.log")
  "$py" -c "r = float('$c'); s = 1e5 * 100 * 1000 / 0.02 / r
print(f'CPU, one core: {r:.3g} cell-steps/s -> 10^5 cells x 100 beats ~ {s:.3g} s = {s / 86400:.3g} days (extrapolated)')"
} 2>&1 | tee "$out"
rm -rf "$tmp"

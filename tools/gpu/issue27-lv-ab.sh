#!/usr/bin/env bash
# Issue 27's A/B on one GPU: the bench's LV at 0.025 cm (resident, TT06, 20 steps), masked and box, from several
# checkouts in one call, ROUNDS rounds with the trees and grids alternating; one line per case (ms per step and per
# phase, iterations), then each tree's medians and masked/box ratio. A single 20-step run varies by several per
# cent (docs/benchmarks.md, "Session 19"): compare trees only within one call.
#
#   TREES="$PWD .dev/base" LABELS="new base" ROUNDS=3 bash tools/gpu/issue27-lv-ab.sh [PETSc options]
#
# A tree is any directory with cardiosim's sources (git archive REV cardiosim kernels tools pyproject.toml
# setup.cfg | tar -x -C DIR). GRIDS (default "masked box") picks the grids; PETSc options apply to every case.
# ENVS (one word per tree: VAR=VALUE pairs joined by commas, or "-" for none) sets environment variables for that
# tree's cases only, e.g. ENVS="- CARDIOSIM_CELL_MAXRREG=112,CARDIOSIM_CELL_BLOCK=64" with the same tree twice.
# GPU 0 unless CUDA_VISIBLE_DEVICES says otherwise. The first round also compiles each tree's libraries: a
# warm-up round (WARMUP=1, the default) runs each tree's masked case once, untimed in the summary.
set -u
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
read -r -a trees <<< "${TREES:-$PWD}"
read -r -a labels <<< "${LABELS:-${TREES:-new}}"
read -r -a grids <<< "${GRIDS:-masked box}"
read -r -a envs <<< "${ENVS:-}"
rounds=${ROUNDS:-3}
py=${PYTHON:-python3}
log=$(mktemp)
case_() {  # tree label grid round env
  local e=${5:--}; [ "$e" = - ] && e=""
  (cd "$1" && env ${e//,/ } timeout 150 $py -m cardiosim.bench.mask --single lv --grid "$3" --steps 20 --model tt06 \
    --placement resident --lv-spacing 0.025 --ode-substeps 10 --current-density -52 --integrator rush-larsen \
    ${petsc:+-- $petsc}) 2>&1 | grep -E "RESULT|rror" | LABEL=$2 GRID=$3 ROUND=$4 $py -c "
import json, os, sys
for l in sys.stdin:
    if not l.startswith('RESULT'):
        print(l.rstrip()[:300]); continue
    r = json.loads(l[7:])
    print(f\"{os.environ['LABEL']} {os.environ['GRID']} round {os.environ['ROUND']}: step {r['step_ms']:.2f} ms, \"
          f\"elliptic {r['elliptic_ms']:.2f} ({r['elliptic_its']:.2f} its), parabolic {r['parabolic_ms']:.2f} \"
          f\"({r['parabolic_its']:.2f}), cells {r['reaction_ms']:.2f}\")"
}
petsc="$*"
if [ "${WARMUP:-1}" = 1 ]; then
  for i in "${!trees[@]}"; do case_ "${trees[$i]}" "${labels[$i]}" masked 0 "${envs[$i]:--}"; done
fi
for r in $(seq 1 "$rounds"); do
  for g in "${grids[@]}"; do
    for i in "${!trees[@]}"; do case_ "${trees[$i]}" "${labels[$i]}" "$g" "$r" "${envs[$i]:--}" | tee -a "$log"; done
  done
done
$py - "$log" <<'PY'
import re, statistics, sys
steps = {}
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) (\S+) round (\d+): step ([\d.]+) ms", line)
    if m:
        steps.setdefault(m[1], {}).setdefault(m[2], []).append(float(m[4]))
for label, by in steps.items():
    med = {g: statistics.median(v) for g, v in by.items()}
    ratio = f", masked/box {med['masked'] / med['box']:.3f}" if {"masked", "box"} <= med.keys() else ""
    print(f"{label}: medians " + ", ".join(f"{g} {m:.2f} ms ({len(by[g])})" for g, m in med.items()) + ratio)
PY
rm -f "$log"

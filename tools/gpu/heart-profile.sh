#!/usr/bin/env bash
# Where the O'Hara-Rudy reaction's time goes in a heart on one GPU: the built-in BiV at SPACING cm (default 0.025:
# 464,000 tissue nodes) with run/human-biv.toml's cells (O'Hara-Rudy 2011, Rush-Larsen, endo/M/epi regions),
# resident placement; tools/gpu/reaction_profile.py's figures (whole steps, the reaction step, each region's kernel
# alone, the same kernel in a fresh backend at rest and on the tissue's states), then, where NCU=1, Nsight
# Compute's summary of two launches of the cell kernel inside the run. Results in $OUT (default /tmp):
# reaction-profile.json, ncu.txt.
#
#   bash tools/gpu/heart-profile.sh                 SPACING=0.05 STEPS=50 NCU=1 bash tools/gpu/heart-profile.sh
set -uo pipefail
cd "$(dirname "$0")/../.."
py=${PYTHON:-.venv/bin/python}
dir=${OUT:-/tmp}
spacing=${SPACING:-0.025}
steps=${STEPS:-100}
"$py" -m cardiosim geometry biv --spacing "$spacing" --out "$dir/biv-profile.h5" --overwrite > "$dir/geometry.txt" || exit 1
mapfile -t args < <("$py" - "$dir/geometry.txt" <<'PY'
import sys, tomllib
text = open(sys.argv[1]).read()
d = tomllib.loads(text[text.index("[grid]"):])
g, t = d["grid"], d["tissue"]
for s in (f"grid.size={g['size']!r}", f"grid.spacing={g['spacing']!r}", f"grid.origin={g['origin']!r}",
          f'tissue.label_file="{t["label_file"]}"', f'tissue.fibre_file="{t["fibre_file"]}"',
          'ecg.twelve_lead="biv"', "probe=[]", 'cell.backend="cuda"'):
    print("--set")
    print(s)
PY
)
"$py" tools/gpu/reaction_profile.py run/human-biv.toml "${args[@]}" --steps "$steps" --json "$dir/reaction-profile.json"
if [ -n "${NCU:-}" ]; then
  ncu --clock-control none -k regex:cs_fused --launch-skip 12 --launch-count 2 \
      --section SpeedOfLight --section Occupancy --section LaunchStats --section MemoryWorkloadAnalysis \
      "$py" tools/gpu/reaction_profile.py run/human-biv.toml "${args[@]}" --steps 1 --warm 6 > "$dir/ncu.txt" 2>&1
  tail -80 "$dir/ncu.txt"
fi
rm -f "$dir/biv-profile.h5"

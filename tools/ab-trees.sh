#!/usr/bin/env bash
# The same command in two or more trees (checkouts of cardiosim) compared: ROUNDS rounds, the trees (and cases)
# interleaved in every round, then a table with one row per tree and case, one column per round and the median.
#
#   TREES="DIR DIR ..." [LABELS="new old ..."] [ROUNDS=3] [CASES="masked box"] [RESULT=key | VALUE=regex]
#   [RATIO=masked/box] [ENVS="- VAR=V,VAR2=W"] [WARMUP=1] [TIMEOUT=900] bash tools/ab-trees.sh COMMAND [ARGS ...]
#
# e.g. the idealised LV at 0.025 cm, masked grid against its box, this tree against another checkout, on GPU 0:
#   git worktree add ../base main
#   CUDA_VISIBLE_DEVICES=0 TREES="$PWD ../base" LABELS="new base" CASES="masked box" RESULT=step_ms \
#     RATIO=masked/box bash tools/ab-trees.sh python3 -m cardiosim bench mask --single lv --grid {case} --steps 20 \
#     --model tt06 --placement resident --lv-spacing 0.025 --ode-substeps 10 --current-density -52 \
#     --integrator rush-larsen
#
# COMMAND runs in each tree's directory, one run at a time (never two at once: they would share the GPU and the
# host's cores). A tree is any directory with cardiosim's sources: a `git worktree`, or `git archive REV | tar -x -C
# DIR`. What one run gives:
#   RESULT=key    the key's value in the last line "RESULT {json}" the command prints (a single case of cardiosim
#                 bench mask, pde, table41 or scaling prints one; e.g. step_ms)
#   VALUE=regex   the first group of the last line of its output the (Python) regex matches, e.g.
#                 VALUE='^\| homogenised.*\| ([0-9.]+) \| parabolic' for the Total of cardiosim bench table41
#   neither       the run's wall time in seconds
# CASES: words put in place of {case} in the command's arguments; every case is a row for each tree. RATIO=a/b adds
# each tree's median of case a over its median of case b. ENVS: one word per tree, VAR=VALUE pairs joined by commas
# ("-" for none), e.g. the same tree twice with and without CARDIOSIM_CELL_MAXRREG=112. WARMUP=1 (the default)
# first runs every tree's first case once, not counted (it compiles the tree's libraries and kernels). A run that
# fails or prints no value is shown with its last lines and counted as missing. One 20-step GPU run varies by
# several per cent and hosts differ by more: compare trees only within one invocation.
set -u
if [ $# -eq 0 ] || [ -z "${TREES:-}" ]; then
  sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
read -r -a trees <<< "$TREES"
read -r -a labels <<< "${LABELS:-}"
read -r -a cases <<< "${CASES:--}"
read -r -a envs <<< "${ENVS:-}"
rounds=${ROUNDS:-3}
py=${PYTHON:-python3}
limit=${TIMEOUT:-900}
cmd=("$@")
for i in "${!trees[@]}"; do
  [ -d "${trees[$i]}" ] || { echo "ab-trees: no directory ${trees[$i]}" >&2; exit 2; }
  [ -n "${labels[$i]:-}" ] || labels[$i]=${trees[$i]}
done
log=$(mktemp)
out=$(mktemp)
trap 'rm -f "$log" "$out"' EXIT

run() {  # tree-index case round (round 0: the warm-up, not counted)
  local i=$1 c=$2 r=$3 e=${envs[$1]:--} t0 t1 rc value
  [ "$e" = - ] && e=""
  local args=("${cmd[@]//\{case\}/$c}")
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  (cd "${trees[$i]}" && env ${e//,/ } timeout "$limit" "${args[@]}") > "$out" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  value=$(RESULT_KEY=${RESULT:-} VALUE_RE=${VALUE:-} "$py" - "$out" "$t0" "$t1" <<'PY'
import json, os, re, sys
lines = open(sys.argv[1], errors="replace").read().splitlines()
key, pattern = os.environ["RESULT_KEY"], os.environ["VALUE_RE"]
found = None
if key:
    for line in lines:
        if line.startswith("RESULT "):
            try:
                found = json.loads(line[7:]).get(key, found)
            except ValueError:
                pass
elif pattern:
    for line in lines:
        m = re.search(pattern, line)
        if m:
            found = m.group(1)
else:
    found = float(sys.argv[3]) - float(sys.argv[2])
try:
    print(f"{float(found):.6g}")
except (TypeError, ValueError):
    print("")
PY
)
  local case_=$c; [ "$c" = - ] && case_=""
  if [ "$rc" -ne 0 ] || [ -z "$value" ]; then
    echo "${labels[$i]} ${case_:+$case_ }round $r: no value (exit status $rc); its last lines:"
    tail -5 "$out" | cut -c1-300 | sed 's/^/    /'
    value=nan
  else
    echo "${labels[$i]} ${case_:+$case_ }round $r: $value"
  fi
  [ "$r" -gt 0 ] && printf '%s\t%s\t%s\t%s\n' "${labels[$i]}" "$c" "$r" "$value" >> "$log"
  return 0
}

echo "ab-trees: ${#trees[@]} trees, $rounds rounds; $(date -u '+%Y-%m-%d %H:%M UTC')"
revision() {  # a tree's commit, where the tree is the top of a git checkout (an extracted archive inside one is not)
  local top here
  top=$(git -C "$1" rev-parse --show-toplevel 2>/dev/null) && here=$(cd "$1" && pwd -P) && [ "$top" = "$here" ] \
    || { echo "not a git checkout"; return; }
  echo "$(git -C "$1" rev-parse --short HEAD)$([ -n "$(git -C "$1" status --porcelain --untracked-files=no)" ] \
    && echo ' with uncommitted changes')"
}
for i in "${!trees[@]}"; do
  e=${envs[$i]:--}
  echo "  ${labels[$i]}: ${trees[$i]} ($(revision "${trees[$i]}"))$([ "$e" != - ] && echo ", env $e")"
done
if [ "${WARMUP:-1}" = 1 ]; then
  for i in "${!trees[@]}"; do run "$i" "${cases[0]}" 0; done
fi
for r in $(seq 1 "$rounds"); do
  for c in "${cases[@]}"; do
    for i in "${!trees[@]}"; do run "$i" "$c" "$r"; done
  done
done

RATIO=${RATIO:-} ROUNDS=$rounds what=${RESULT:-${VALUE:+the value}} "$py" - "$log" <<'PY'
import math, os, statistics, sys
rounds = int(os.environ["ROUNDS"])
rows = {}
for line in open(sys.argv[1]):
    label, case, r, value = line.rstrip("\n").split("\t")
    rows.setdefault((label, case), {})[int(r)] = float(value)
what = os.environ.get("what") or "wall time (s)"
with_case = any(case != "-" for _, case in rows)
head = ["tree"] + (["case"] if with_case else []) + [f"round {r}" for r in range(1, rounds + 1)] + ["median"]
print(f"\n{what}:\n")
print("| " + " | ".join(head) + " |")
print("|" + "---|" * len(head))
medians = {}
for (label, case), by in rows.items():
    good = [v for v in by.values() if not math.isnan(v)]
    med = statistics.median(good) if good else math.nan
    medians[(label, case)] = med
    cells = [f"{by[r]:.4g}" if r in by and not math.isnan(by[r]) else "—" for r in range(1, rounds + 1)]
    print("| " + " | ".join([label] + ([case] if with_case else []) + cells + [f"{med:.4g}"]) + " |")
ratio = os.environ.get("RATIO", "")
if ratio:
    a, b = ratio.split("/", 1)
    print()
    for label in dict.fromkeys(label for label, _ in rows):
        if (label, a) in medians and (label, b) in medians:
            print(f"{label}: median {a} / median {b} = {medians[(label, a)] / medians[(label, b)]:.3f}")
PY

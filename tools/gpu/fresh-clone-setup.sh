#!/usr/bin/env bash
# The GPU path from the README's own commands, on a GPU node that reaches no package registry: a copy of
# this checkout without anything built (no .venv, empty caches) goes through
#
#   make setup                                    PETSc with CUDA and PyCUDA built from their PyPI sources
#   cardiosim info                                what the new venv can do (exit 0 expected)
#   make test-gpu                                 every GPU test, in four runs side by side (TESTS=, files split)
#   make run CONFIG=run/gpu-resident.toml NP=1    the resident placement on the GPU
#
# with the packages `pip download` fetched elsewhere (tools/gpu/wheelhouse.sh: .dev/gpu-wheelhouse/core, carried
# into the device call) and the image's own numpy/h5py/scipy/mpi4py (CARDIOSIM_SYSTEM_SITE=1).
#
# It takes longer than one device call may (10 minutes), so the first call starts it detached (setsid) and every
# call, the same command, shows what happened since and waits up to WAIT seconds (default 540) for the end:
#   exit 0  done, everything passed (the summary is printed)
#   exit 1  done, something failed (the summary says what; logs in $OUT)
#   exit 3  still running: call again at once (the machine is given back after 30 s idle, and the work with it)
#   exit 4  not started: a package the image lacks is not in the wheelhouse (it says which and from where)
#
#   device call:  carry [".dev/gpu-wheelhouse/core"], command "bash tools/gpu/fresh-clone-setup.sh"   (repeat)
#
# Work goes to $WORK (default /tmp/cardiosim-fresh): src/ (the copy), cache/ (CARDIOSIM_CACHE), pip-cache/, logs/.
# On every call the summary and seven logs are copied to $OUT (the files a device call brings back: 8 at most).
# Timing (estimated, not yet measured): set-up 12-16 min, GPU tests 6-10 min, the run 1 min: three calls, within
# the 30 minutes a machine is held.
set -uo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
work=${WORK:-/tmp/cardiosim-fresh}
wait_s=${WAIT:-540}
mkdir -p "$work/logs" "$work/wheelhouse"

# What this call carried joins what earlier calls of this machine brought (core now, extra before, or the other way).
for d in "$here"/.dev/gpu-wheelhouse/*/; do
    [ -d "$d" ] && cp -n "$d"* "$work/wheelhouse/" 2>/dev/null
done

# CUDA's bin/ on PATH where the image has it but PATH lacks it (what `module load cuda` does on a cluster); Open MPI's
# mpirun refuses root unless told (the devices run as root; conftest does the same for the tests).
command -v nvcc >/dev/null || { [ -x /usr/local/cuda/bin/nvcc ] && export PATH=/usr/local/cuda/bin:$PATH; }
if [ "$(id -u)" = 0 ]; then export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1; fi

pipeline() {
    local src=$work/src t0=$SECONDS
    step() {   # step NAME COMMAND...: its output to logs/NAME.log, "NAME rc seconds" to steps
        local name=$1 start=$SECONDS rc
        shift
        echo "== $(date -u +%H:%M:%S) $name: $*"
        "$@" >"$work/logs/$name.log" 2>&1
        rc=$?
        echo "$name $rc $((SECONDS - start))" >>"$work/steps"
        echo "== $(date -u +%H:%M:%S) $name: exit $rc after $((SECONDS - start)) s"
        return $rc
    }
    # The copy: the working tree as it is (the device's copy of the checkout), less everything built or fetched.
    mkdir -p "$src"
    tar -C "$here" --exclude=./.venv --exclude=./.dev --exclude=./.gpu-node --exclude=./out --exclude='*.egg-info' \
        --exclude=__pycache__ --exclude=.pytest_cache -cf - . | tar -C "$src" -xf -
    export CARDIOSIM_WHEELHOUSE=$work/wheelhouse CARDIOSIM_SYSTEM_SITE=1 CARDIOSIM_CACHE=$work/cache \
        PIP_CACHE_DIR=$work/pip-cache EXTRAS=test
    if step setup make -C "$src" setup; then
        step info "$src/.venv/bin/cardiosim" info
        # The GPU tests in TEST_RUNS (4) runs side by side on the one GPU (three fit an H200 well), the files dealt
        # out largest first; each run is `make test-gpu`, which fails on a skip for a missing GPU or mpirun.
        mapfile -t files < <(cd "$src" && grep -l "mark.gpu" tests/test_*.py | xargs ls -S)
        local runs=${TEST_RUNS:-4} groups=() i=0 pids=() g
        for f in "${files[@]}"; do groups[i % runs]+="$f "; i=$((i + 1)); done
        echo "== $(date -u +%H:%M:%S) test-gpu: ${#files[@]} files in $runs runs"
        for ((g = 0; g < runs; g++)); do
            [ -n "${groups[g]-}" ] || continue
            # each its own pytest temporary folder (pytest prunes the older ones of a shared one)
            PYTEST_ADDOPTS="--basetemp=$work/pytest-$g" \
                step "test-gpu-$g" make -C "$src" test-gpu TESTS="${groups[g]}" &
            pids+=($!)
        done
        for g in "${pids[@]}"; do wait "$g"; done
        step run bash -c "make -C '$src' run CONFIG=run/gpu-resident.toml NP=1 && \
                          '$src/.venv/bin/cardiosim' inspect '$src/out/gpu-resident.h5'"
    fi
    summary >"$work/summary.txt"
    echo "== $(date -u +%H:%M:%S) all done after $((SECONDS - t0)) s"
    touch "$work/done"
}

summary() {
    local gpu
    gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
    echo "fresh-clone GPU set-up, $(date -u -Is), $gpu"
    local name rc s ok=1
    while read -r name rc s; do
        printf '  %-12s exit %-3s %5d s\n' "$name" "$rc" "$s"
        [ "$rc" = 0 ] || ok=0
    done <"$work/steps"
    grep -h "^\[bootstrap" "$work/logs/setup.log" 2>/dev/null | sed 's/^/  /'
    [ -f "$work/logs/info.log" ] && sed 's/^/  info: /' "$work/logs/info.log"
    for f in "$work"/logs/test-gpu-*.log; do
        [ -f "$f" ] && echo "  $(basename "$f" .log): $(grep -E '^=+ .*(passed|failed|error).* =+$' "$f" | tail -n 1)"
    done
    [ -f "$work/logs/run.log" ] && tail -n 25 "$work/logs/run.log" | sed 's/^/  run: /'
    for name in setup info test-gpu-0 run; do        # a step that never ran (the set-up failed) is a failure too
        grep -q "^$name " "$work/steps" || ok=0
    done
    echo "verdict: $([ $ok = 1 ] && echo "every step passed" || echo "FAILED")"
}

# Before the first start: the packages the image must give where the wheelhouse does not.
if [ ! -f "$work/started" ]; then
    ls "$work"/wheelhouse/petsc-*.tar.gz >/dev/null 2>&1 \
        || { echo "not started: no PETSc sources in the wheelhouse: carry .dev/gpu-wheelhouse/core" \
                  "(tools/gpu/wheelhouse.sh)"; exit 4; }
    missing=()
    for m in numpy h5py scipy matplotlib mpi4py lxml pytest rich; do
        python3 -c "import $m" 2>/dev/null || ls "$work/wheelhouse/" | grep -qi "^$m-" || missing+=("$m")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "not started: python3 here lacks ${missing[*]} and the wheelhouse has none of them: carry their" \
             "wheels from .dev/gpu-wheelhouse/extra first, in calls of their own (this command again; 64 MiB a call" \
             "with the tree), then core"
        exit 4
    fi
    touch "$work/started"
    setsid nohup bash "$0" --pipeline >"$work/logs/pipeline.log" 2>&1 </dev/null &
    echo "started: $work (the pipeline's log: $work/logs/pipeline.log)"
fi
if [ "${1:-}" = --pipeline ]; then
    pipeline
    exit 0
fi

# Show what happened since the last call, wait for the end or for WAIT seconds.
deadline=$((SECONDS + wait_s))
shown=$(cat "$work/shown" 2>/dev/null || echo 0)
while :; do
    total=$(wc -l <"$work/logs/pipeline.log")
    if [ "$total" -gt "$shown" ]; then
        sed -n "$((shown + 1)),${total}p" "$work/logs/pipeline.log"
        shown=$total
        echo "$shown" >"$work/shown"
    fi
    [ -f "$work/done" ] && break
    [ "$SECONDS" -ge "$deadline" ] && break
    sleep 5
done
if [ -n "${OUT:-}" ]; then     # a device call brings back 8 files at most
    for f in summary.txt logs/pipeline.log logs/setup.log logs/test-gpu-0.log logs/test-gpu-1.log \
             logs/test-gpu-2.log logs/test-gpu-3.log logs/run.log; do      # cardiosim info is in the summary
        [ -f "$work/$f" ] && cp "$work/$f" "$OUT/"
    done
fi
if [ ! -f "$work/done" ]; then
    current=$(tail -n 1 "$work/logs/pipeline.log")
    echo "still running ($current); the setup log's last lines:"
    grep -h "^\[bootstrap" "$work/logs/setup.log" 2>/dev/null | tail -n 3
    echo "call again at once (same command)"
    exit 3
fi
cat "$work/summary.txt"
grep -q "^verdict: every step passed" "$work/summary.txt"

"""``cardiosim sweep``: one config, many runs (the product of the varied keys' values, or their lists side by side),
run locally in parallel or as a SLURM job array, and one table of chosen outputs (CSV or HDF5).

    cardiosim sweep run/s1s2-restitution.toml --vary stimulus.S2.start=250:400:25 --out out/restitution \\
        --collect probe.centre.apd.2 probe.centre.di.2 --jobs 2

Each run is ``cardiosim run CONFIG --set KEY=VALUE ... --output OUT/run-NNN.h5`` (under mpirun with ``--np``), so
it is the same run as the command line gives, with its overrides stored in its output; the table has a row per run:
its number, the varied values, how it ended (finished, failed: exit status N, or missing) and the collected
quantities (:data:`QUANTITIES`), NaN where a run has none. The same sweep from Python: cardiosim.api.sweep (runs in
this process), which gives the same table.

Everything is checked before the first run starts (every run's config, every file it would write, the table):
a mistake is one line naming the run and the key, exit status 2, nothing run or written. A run that fails (exit
status 3) does not stop the others; the sweep's exit status is then 3. The sweep's own process imports neither MPI
nor PETSc (a nested mpirun fails inside an MPI singleton's environment); the configs are checked in a child.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from cardiosim.analysis.maps import cv_map, ecg_features
from cardiosim.output.results import Results
from cardiosim.runtime.errors import UserError
from cardiosim.runtime.files import Target, check_writes
from cardiosim.runtime.mpi import mpirun_command

QUANTITIES = {
    "activated": "share of the tissue's nodes that activated (0-1)",
    "activation_first": "first activation time (ms)",
    "total_activation": "last minus first activation time (ms; the QRS proxy)",
    "apd_mean": "mean APD of the first beat over the repolarised nodes (ms)",
    "qt": "last repolarisation minus first activation (ms), NaN unless every activated node repolarised",
    "cv": "median local conduction velocity, 1/|grad T| (m/s)",
    "warnings": "number of end-of-run warnings (cardiosim/analysis/checks.py)",
    "simulated_ms": "simulated time (ms)",
    "wall_s": "wall time of the run (s)",
    "probe.NAME.beats": "beats at probe NAME",
    "probe.NAME.activation.K": "activation time of beat K (1, 2, ...; or 'last') at probe NAME (ms)",
    "probe.NAME.apd.K": "APD of beat K at probe NAME (ms; the run's output.apd_level)",
    "probe.NAME.di.K": "diastolic interval before beat K at probe NAME: its activation minus the previous beat's "
                       "repolarisation (ms)",
    "probe.NAME.vpeak.K": "peak Vm of beat K at probe NAME (mV)",
}
DEFAULT_COLLECT = ("activated", "total_activation", "apd_mean", "warnings")
_PROBE = re.compile(r"probe\.(?P<name>[A-Za-z0-9_.-]+?)\.(?:(?P<beats>beats)|(?P<what>activation|apd|di|vpeak)\."
                    r"(?P<k>\d+|last))$")


# -- the plan ----------------------------------------------------------------------------------------------------
def split_values(text: str) -> list[str]:
    """``v1,v2,[1,2],"a,b"`` -> the values as TOML texts (commas inside brackets, braces and quotes stay);
    ``a:b:step`` (numbers) -> a, a+step, ... up to b inclusive."""
    m = re.fullmatch(r"\s*(-?[\d.eE+-]+):(-?[\d.eE+-]+):(-?[\d.eE+-]+)\s*", text)
    if m:
        try:
            a, b, step = (float(x) for x in m.groups())
        except ValueError:
            m = None
        else:
            if step == 0 or (b - a) / step < 0:
                raise UserError(f"--vary {text}: a:b:step must step from a towards b")
            n = int(math.floor((b - a) / step + 1e-9)) + 1
            whole = all(float(x).is_integer() for x in (a, step))
            return [str(int(round(a + i * step))) if whole else repr(round(a + i * step, 12)) for i in range(n)]
    out, depth, quote, cur = [], 0, None, ""
    for c in text:
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += c
    out.append(cur.strip())
    if any(not v for v in out):
        raise UserError(f"--vary ...={text}: an empty value; give values as v1,v2,... or a:b:step")
    return out


def parse_vary(items) -> list[tuple[str, list[str]]]:
    """``["KEY=v1,v2", ...]`` -> [(KEY, [TOML texts])]; a key given twice is a mistake."""
    out, seen = [], set()
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise UserError(f"--vary {item}: expected KEY=v1,v2,... or KEY=a:b:step")
        if key in seen:
            raise UserError(f"--vary {key}: given twice; give all its values in one --vary")
        seen.add(key)
        out.append((key, split_values(values)))
    return out


def runs_of(vary: list[tuple[str, list[str]]], zipped: bool = False) -> list[list[str]]:
    """The --set options of every run: the product of the values, or (``zipped``) the i-th value of every key."""
    if not vary:
        raise UserError("cardiosim sweep: give at least one --vary KEY=v1,v2,...")
    keys = [k for k, _ in vary]
    if zipped:
        lengths = {len(v) for _, v in vary}
        if len(lengths) != 1:
            raise UserError("--zip: every --vary needs as many values (" + ", ".join(f"{k}: {len(v)}" for k, v in vary)
                            + ")")
        combos = list(zip(*(v for _, v in vary)))
    else:
        combos = list(itertools.product(*(v for _, v in vary)))
    return [[f"{k}={v}" for k, v in zip(keys, combo)] for combo in combos]


def check_collect(names) -> None:
    for n in names:
        if n not in QUANTITIES and not _PROBE.match(n):
            raise UserError(f"--collect {n}: unknown; allowed: {', '.join(QUANTITIES)}")


def run_path(out: Path, i: int) -> Path:
    return out / f"run-{i:03d}.h5"


# -- collecting --------------------------------------------------------------------------------------------------
def collect(path: Path, names) -> dict:
    """The quantities ``names`` of one run's output (NaN where it has none)."""
    row = {n: float("nan") for n in names}
    with Results(path) as r:
        act = r.map("activation_time") if "activation_time" in r.maps else None
        inside = r.map("tissue") > 0 if "tissue" in r.maps else None
        beats = {}
        for n in names:
            m = _PROBE.match(n)
            if m:
                p = m["name"]
                if p not in r.probes:
                    raise UserError(f"--collect {n}: {path} has no probe {p}; probes: {', '.join(r.probes) or 'none'}")
                b = beats.setdefault(p, r.beats(p))
                if m["beats"]:
                    row[n] = float(b["count"])
                    continue
                k = b["count"] if m["k"] == "last" else int(m["k"])
                if not 1 <= k <= b["count"]:
                    continue
                if m["what"] == "activation":
                    row[n] = float(b["activation"][k - 1])
                elif m["what"] == "apd":
                    row[n] = float(b["apd"][k - 1])
                elif m["what"] == "vpeak":
                    row[n] = float(b["v_peak"][k - 1])
                elif k >= 2:
                    row[n] = float(b["activation"][k - 1] - b["activation"][k - 2] - b["apd"][k - 2])
            elif n == "warnings":
                w = r.warnings
                row[n] = float(len(w)) if w is not None else float("nan")
            elif n in ("simulated_ms", "wall_s"):
                v = r.attr(n)
                row[n] = float(v) if v is not None else float("nan")
            elif act is not None:
                a = act if inside is None else act[inside]
                ok = np.isfinite(a)
                if n == "activated":
                    row[n] = float(ok.mean()) if a.size else float("nan")
                elif n == "activation_first" and ok.any():
                    row[n] = float(a[ok].min())
                elif n == "total_activation" and ok.any():
                    row[n] = float(a[ok].max() - a[ok].min())
                elif n == "apd_mean" and "apd" in r.maps:
                    apd = r.map("apd") if inside is None else r.map("apd")[inside]
                    if np.isfinite(apd).any():
                        row[n] = float(np.nanmean(apd))
                elif n == "qt":
                    qt = ecg_features(r).get("QT")
                    row[n] = float(qt) if qt is not None else float("nan")
                elif n == "cv":
                    cv = cv_map(act, r.spacing)
                    if inside is not None:
                        cv = cv[inside]
                    if np.isfinite(cv).any():
                        row[n] = float(np.nanmedian(cv))
    return row


def table(out: Path, runs: list[list[str]], vary, names, statuses: dict) -> list[dict]:
    """A row per run: run, the varied values (as given), status, the quantities."""
    rows = []
    for i, sets in enumerate(runs):
        row = {"run": i, **{k: s.split("=", 1)[1] for (k, _), s in zip(vary, sets)}}
        path = run_path(out, i)
        status = statuses.get(i, "finished" if path.exists() else "missing")
        values = {n: float("nan") for n in names}
        if path.exists():
            try:
                values = collect(path, names)
            except UserError as e:
                if "--collect" in str(e):
                    raise
                status = f"unreadable ({e})"
        rows.append({**row, "status": status, **values})
    return rows


def write_table(path: Path, rows: list[dict]) -> None:
    """The table as CSV (``.csv``) or HDF5 (``.h5``: a dataset per column), whole or not at all."""
    tmp = path.with_name(f".{path.name}.part")
    if path.suffix == ".h5":
        import h5py
        with h5py.File(tmp, "w") as f:
            f.attrs["format"] = "cardiosim-sweep-1"
            for col in rows[0]:
                vals = [r[col] for r in rows]
                if all(isinstance(v, (int, float)) for v in vals):
                    f[col] = np.array(vals, dtype=float if any(isinstance(v, float) for v in vals) else int)
                else:
                    f[col] = np.array([str(v) for v in vals], dtype=h5py.string_dtype())
    else:
        import csv
        with open(tmp, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            for r in rows:
                w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in r.items()})
    os.replace(tmp, path)


# -- checking and running ----------------------------------------------------------------------------------------
def _targets(out: Path, runs, table_path: Path, extra=()):
    # lazy: cardiosim.output.writer imports PETSc, which this module does not
    from cardiosim.output.writer import run_targets
    targets = [t for i in range(len(runs)) for t in run_targets(run_path(out, i), run_path(out, i).with_suffix(
        ".ckpt.h5"))]
    return targets + [Target("--table", table_path, "sweep-table"), *extra]


def check_configs(config: str, runs: list[list[str]]) -> None:
    """Every run's config validated, in a child process (this one stays free of MPI); the first mistake is one line
    naming the run."""
    proc = subprocess.run([sys.executable, "-m", "cardiosim.simulation.sweep", "--check", config], input=json.dumps(runs),
                          capture_output=True, text=True, env=_child_env())
    if proc.returncode != 0:
        said = proc.stdout.strip().splitlines() or proc.stderr.strip().splitlines() or ["the check failed"]
        raise UserError(said[-1])


def check_child(config: str) -> int:
    # lazy, in the --check child: cardiosim.config imports mpi4py, which the sweep's own process does not
    from cardiosim import config as cfgmod
    runs = json.loads(sys.stdin.read())
    for i, sets in enumerate(runs):
        try:
            cfgmod.load(config, sets)
        except UserError as e:
            print(f"cardiosim sweep: run {i} (--set {' --set '.join(sets)}): {e}")
            return 2
    return 0


def _child_env() -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def run_local(config: str, runs, out: Path, jobs: int, ranks: int, overwrite: bool, quiet: bool) -> dict:
    """Run every run, ``jobs`` at a time, each on ``ranks`` ranks; {run: status} of those that did not finish."""
    launcher = mpirun_command(ranks) if ranks > 1 else []
    statuses, started = {}, time.perf_counter()

    def one(i):
        cmd = [*launcher, sys.executable, "-m", "cardiosim", "run", config, "--quiet", "--output",
               str(run_path(out, i)), *(["--overwrite"] if overwrite else [])]
        for s in runs[i]:
            cmd += ["--set", s]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=_child_env())
        if proc.returncode != 0:
            statuses[i] = f"failed: exit status {proc.returncode}"
        if not quiet:
            errs = [ln for ln in proc.stderr.splitlines() if ln.startswith("cardiosim: error")]
            print(f"run {i} ({' '.join(runs[i])}): {statuses.get(i, 'finished')}"
                  + (f" - {errs[-1]}" if errs else "") + f" [{time.perf_counter() - started:.1f} s]", flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(one, range(len(runs))))
    return statuses


SLURM = """#!/bin/bash
# A SLURM job array of the sweep {out} ({n} runs), written by: {command}
# Submit: sbatch {script}; then collect the table: {collect}
#SBATCH --job-name=cardiosim-sweep
#SBATCH --array=0-{last}
#SBATCH --ntasks={ranks}
#SBATCH --time=01:00:00
#SBATCH --output={out}/run-%a.slurm.log
set -euo pipefail
i=$(printf "%03d" "$SLURM_ARRAY_TASK_ID")
# the run's --set options, one a line, from the plan written beside this script
mapfile -t sets < <({python} -c 'import json, sys
for s in json.load(open(sys.argv[1]))["runs"][int(sys.argv[2])]: print(s)' {plan} "$SLURM_ARRAY_TASK_ID")
args=()
for s in "${{sets[@]}}"; do args+=(--set "$s"); done
srun {python} -m cardiosim run {config} --quiet --output {out}/run-$i.h5 "${{args[@]}}"
"""


def write_slurm(config, runs, out: Path, ranks: int, command: str, collect_cmd: str) -> Path:
    plan = out / "sweep.json"
    script = out / "sweep.sbatch"
    plan.write_text(json.dumps({"config": config, "runs": runs}, indent=1) + "\n")
    # absolute paths: the job runs wherever SLURM starts it
    script.write_text(SLURM.format(out=out.resolve(), n=len(runs), command=command, script=script, collect=collect_cmd,
                                   last=len(runs) - 1, ranks=ranks, plan=plan.resolve(),
                                   config=Path(config).resolve(), python=sys.executable))
    return script


# -- the command -------------------------------------------------------------------------------------------------
def plan_of(args):
    vary = parse_vary(args.vary)
    runs = [[*args.set, *sets] for sets in runs_of(vary, args.zip)]
    check_collect(args.collect)
    if args.jobs < 1 or args.np < 1:
        raise UserError("--jobs and --np: must be >= 1")
    out = Path(args.out)
    table_path = Path(args.table) if args.table else out / "sweep.csv"
    if table_path.suffix not in (".csv", ".h5"):
        raise UserError(f"--table {table_path}: must end in .csv or .h5")
    return vary, runs, out, table_path


def command(args, argv) -> int:
    """``cardiosim sweep``: ``args`` its options (parsed by cardiosim.cli.sweep), ``argv`` its words (written into
    the SLURM script)."""
    started = time.perf_counter()
    vary, runs, out, table_path = plan_of(args)
    fixed = len(args.set)
    if not args.collect_only:
        check_configs(args.config, runs)
        extra = [Target("--slurm", out / n, "sweep-plan") for n in ("sweep.json", "sweep.sbatch")] if args.slurm \
            else []
        targets = _targets(out, runs, table_path, extra) if not args.slurm else extra
        check_writes(targets, {"the config": Path(args.config)}, args.overwrite)
        out.mkdir(parents=True, exist_ok=True)
        if args.slurm:
            command = "cardiosim sweep " + " ".join(argv)
            collect_cmd = command.replace(" --slurm", "") + " --collect-only"
            script = write_slurm(args.config, runs, out, args.np, command, collect_cmd)
            print(f"wrote {script} ({len(runs)} runs); sbatch {script}, then: {collect_cmd}")
            return 0
        statuses = run_local(args.config, runs, out, args.jobs, args.np, args.overwrite, args.quiet)
    else:
        check_writes([Target("--table", table_path, "sweep-table")], {}, True)
        statuses = {}
    rows = table(out, [r[fixed:] for r in runs], vary, args.collect, statuses)
    write_table(table_path, rows)
    print(f"wrote {table_path} ({len(rows)} runs, {sum(r['status'] == 'finished' for r in rows)} finished; "
          f"{time.perf_counter() - started:.1f} s wall)")
    return 3 if any(r["status"] != "finished" for r in rows) else 0


if __name__ == "__main__":      # the check of every run's config, in a child (check_configs): --check CONFIG
    sys.exit(check_child(sys.argv[2]))

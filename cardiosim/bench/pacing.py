"""One cell paced to steady state, the whole command timed: ``cardiosim cell`` against a Myokit script doing the same
with Myokit's own CVODES simulation (the aim: within 2× of its time).

    cardiosim bench pacing [--model models/ohara_rudy_2011_endo.cellml] [--beats 1000] [--also grl1:0.05 ...]
                           [--json benchmarks/raw/pacing.json]

Each run is a fresh process (imports, model generation or compilation from a warm cache, the pacing, the output
files), timed from outside, one after the other on the same machine; the row says the APD90 of the last beat, so
that a fast but wrong integrator shows. The Myokit script paces the model cardiosim prepares from the file (the
stimulus bound to Myokit's pacing input, time in ms, V in mV: cardiosim.cells.cellml.load_myokit) with
``myokit.pacing.blocktrain`` and ``Simulation.pre``, then logs the last beat every 1 ms: what a Myokit user writes.
Protocol: 1 Hz, -80 µA/µF for 0.5 ms (``cardiosim cell``'s defaults).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from cardiosim.cells.cellml import MODELS
from cardiosim.bench.launch import machine, publish

PERIOD, DURATION, AMPLITUDE = 1000.0, 0.5, -80.0

MYOKIT_SCRIPT = """
import sys, json, numpy as np
from cardiosim.cells import cellml
from cardiosim.analysis.biomarkers import beat_biomarkers
myokit = cellml.myokit_cvodes()
m = cellml.load_myokit(sys.argv[1])
beats, period, duration, level = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
s = myokit.Simulation(m, myokit.pacing.blocktrain(period, duration, level=level, limit=0))
s.pre((beats - 1) * period)
v = m.label("membrane_potential").qname()
tq = m.time().qname()
d = s.run(period + 0.5, log=[v, tq], log_interval=1.0)
t = np.asarray(d[tq])                      # Simulation.pre leaves the time at 0
b = beat_biomarkers(t, np.asarray(d[v]), [0.0], apd_origin="stimulus")
print(json.dumps({"APD90": b[0]["APD90"] if b else None}))
"""


def _timed(cmd) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise SystemExit(f"cardiosim bench pacing: {' '.join(map(str, cmd))[:200]} failed:\n{proc.stderr[-2000:]}")
    return wall, proc


def measure(model: Path, beats: int, also, repeats: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        def cardiosim_cell(integrator, dt):
            out, js = Path(tmp) / "cell.h5", Path(tmp) / "cell.json"
            cmd = [sys.executable, "-m", "cardiosim", "cell", "--model", model, "--integrator", integrator,
                   "--prepace", beats - 1, "--beats", 1, "--record-every", 1, "--period", PERIOD, "--duration",
                   DURATION, "--amplitude", AMPLITUDE, "--output", out, "--json", js, "--overwrite", "--quiet"]
            if dt is not None:
                cmd += ["--dt", dt]
            wall, _ = _timed(cmd)
            data = json.loads(js.read_text())
            beat = data["beats"][-1] if isinstance(data, dict) and "beats" in data else data[-1]
            return wall, beat["APD90"]

        def myokit_script(_i, _dt):
            wall, proc = _timed([sys.executable, "-c", MYOKIT_SCRIPT, model, beats, PERIOD, DURATION, AMPLITUDE])
            return wall, json.loads(proc.stdout.strip().splitlines()[-1])["APD90"]

        runs = [("Myokit script (CVODES)", myokit_script, None, None),
                ("cardiosim cell --integrator cvode", cardiosim_cell, "cvode", None)]
        for item in also:
            integrator, _, dt = item.partition(":")
            runs.append((f"cardiosim cell --integrator {integrator} --dt {dt}", cardiosim_cell, integrator, float(dt)))
        for name, fn, integrator, dt in runs:                  # once each first: every cache warm
            fn(integrator, dt)
        best = {name: (float("inf"), None) for name, *_ in runs}
        for _ in range(repeats):
            for name, fn, integrator, dt in runs:
                wall, apd = fn(integrator, dt)
                best[name] = min(best[name], (wall, apd), key=lambda x: x[0])
                print(f"{name}: {wall:.2f} s, APD90 {apd}", file=sys.stderr, flush=True)
        ref = best["Myokit script (CVODES)"][0]
        for name, *_ in runs:
            wall, apd = best[name]
            rows.append({"command": name, "wall_s": wall, "x_myokit": wall / ref, "APD90_ms": apd})
    return rows


def markdown(rows, meta) -> str:
    out = [f"### One cell to steady state: {meta['model']}, {meta['beats']} beats at 1 Hz, the whole command",
           "", f"{meta['date']} · {meta['cpu']} ({meta['cores']} cores, shared) · one process each, best of "
           f"{meta['repeats']} after a warm-up run (caches warm) · `{meta['command']}`", "",
           "| command | wall (s) | × Myokit | APD90 of the last beat (ms) |", "|---|---|---|---|"]
    for r in rows:
        apd = f"{r['APD90_ms']:.2f}" if r["APD90_ms"] is not None else "—"
        out.append(f"| {r['command']} | {r['wall_s']:.2f} | {r['x_myokit']:.2f} | {apd} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="cardiosim bench pacing", description=__doc__.split("\n")[0])
    p.add_argument("--model", default=str(MODELS / "ohara_rudy_2011_endo.cellml"))
    p.add_argument("--beats", type=int, default=1000)
    p.add_argument("--also", nargs="*", default=[], metavar="INTEGRATOR:DT",
                   help="cardiosim cell with these integrators too, e.g. grl1:0.05")
    p.add_argument("--repeats", type=int, default=2)
    p.add_argument("--write", help="markdown page to update (the table replaces its own section)")
    p.add_argument("--json", help="write the rows here too")
    a = p.parse_args(argv)
    model = Path(a.model)
    if not model.is_file() or a.beats < 1:
        print(f"cardiosim bench pacing: no CellML file {model}" if not model.is_file() else
              "cardiosim bench pacing: --beats must be >= 1", file=sys.stderr)
        return 2
    rows = measure(model, a.beats, a.also, a.repeats)
    meta = {**machine(), "date": datetime.date.today().isoformat(), "model": model.stem, "beats": a.beats,
            "repeats": a.repeats, "command": "cardiosim bench pacing " + " ".join(argv or sys.argv[1:])}
    publish(markdown(rows, meta), meta, rows, a.json, a.write, f"pacing:{model.stem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

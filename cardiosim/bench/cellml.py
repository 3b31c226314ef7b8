"""Conformance of the CellML generator (cardiosim/cells/cellml.py) over a folder of CellML files: for each file,
whether it generates (or the one-line reason why not), whether its C compiles, C = NumPy = Myokit derivatives at the
initial state, ``BEATS`` paced beats against Myokit's CVODES simulation, the gates found and the largest stable
Forward-Euler, Rush–Larsen and GRL1 steps over those beats.

    cardiosim bench cellml [--models DIR|FILE ...] [--subset] [--beats N] [--write docs/user/cell-models.md]
                           [--json FILE]

Protocol (the same for every model, so the table compares like with like): a pulse of ``AMPLITUDE`` µA/µF for
``DURATION`` ms every ``BEAT`` ms from t = 0, ``BEATS`` of them (``--beats``), from the file's initial state.
Several beats, because a later beat can be stiffer than the first: from its initial state Li 2010's calcium
release peaks at Cass = 32 µM in the first beat and 61 to 68 µM in the next four, and its RyR state P_O1, whose own
rate grows as Cass⁴, then needs a Forward-Euler or Rush–Larsen step of 10⁻⁵ ms (2·10⁻⁵ passes the second beat, not
the fifth) where the first beat passed at 2·10⁻⁴ ms, and GRL1 5·10⁻⁴ ms where it passed at 2·10⁻³
(tests/test_cellml_every_model.py). cardiosim: the native C kernel, the first run of ``REFERENCE`` that stays finite and in range over all the
beats (Forward Euler at 1 µs, else 0.1 µs, else GRL1 at 0.5 µs). Reference: Myokit's CVODES simulation of the same
prepared model (rtol = atol = 1e-8), both sampled every ``SAMPLE`` ms; V RMS is the root-mean-square difference of
the two traces over the beats, APD90 is measured from each stimulus onset (cardiosim.analysis.biomarkers), the
table showing the last beat's. The stable step is the largest of ``STEPS`` at which every beat keeps every state
finite and within its range (gates that are probabilities in [0, 1], |V| ≤ 300 mV) with its APD90 within 5 % of
CVODES's for that beat. Each (integrator, step) is run once: the reference run is one of the search's.
The derivative column is the largest relative difference over the states, |a − b| / max(|b|, 1e-12·max|dy/dt|).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np

from cardiosim.bench.launch import machine, publish
from cardiosim.analysis.biomarkers import beat_biomarkers
from cardiosim.cells import CellModelError, cellml
from cardiosim.cells.stimulus import Protocol
from cardiosim.runtime.errors import SimulationError

AMPLITUDE, DURATION, BEAT = -50.0, 1.0, 1000.0          # µA/µF, ms, ms (a pulse every BEAT ms)
BEATS = 5               # beats per model: a later beat can be stiffer than the first (Li 2010, module docstring)
# The reference run: the first of these that stays finite and in range over the beats
REFERENCE = (("forward-euler", 1e-3), ("forward-euler", 1e-4), ("grl1", 5e-4))
DT_REF = tuple(dt for integ, dt in REFERENCE if integ == "forward-euler")
SAMPLE = 0.5                                            # ms
STEPS = (0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005, 0.0002, 0.0001,     # ms, tried in this order
         5e-5, 2e-5, 1e-5)     # down to Li 2010's later beats (module docstring)
# The fixed subset tests/test_cellml.py runs (slow): the variety of the corpus (sizes, gate forms, unit systems,
# singularities), with the best-known ventricular and atrial models among them.
SUBSET = ("ohara_rudy_2011_endo", "courtemanche_ramirez_nattel_1998", "grandi_pasqualini_bers_2010_ss",
          "luo_rudy_1991", "ten_tusscher_model_2006_epi", "bondarenko_szigeti_bett_kim_rasmusson_2004_apical",
          "beeler_reuter_model_1977", "hodgkin_huxley_squid_axon_model_1952_modified", "noble_model_1962",
          "bueno_2007_epi", "fox_mcharg_gilmour_2002", "dokos_model_1996", "shannon_wang_puglisi_weber_bers_2004",
          "li_mouse_2010")


def _rel(a, b) -> float:
    a, b = np.asarray(a, float), np.asarray(b, float)
    floor = 1e-12 * max(float(np.max(np.abs(b))), 1e-300)
    return float(np.max(np.abs(a - b) / np.maximum(np.abs(b), floor)))


def _apd90(t, v) -> float:
    rows = beat_biomarkers(t, v, [0.0])
    return rows[0]["APD90"] if rows else float("nan")


def _apd90s(t, v, beats: int) -> list[float]:
    """APD90 of each of ``beats`` beats of the trace (from their stimulus onsets, every BEAT ms)."""
    rows = beat_biomarkers(t, v, [b * BEAT for b in range(beats)])
    return [r["APD90"] for r in rows] + [float("nan")] * (beats - len(rows))


def _close(apd: float, ref: float) -> bool:
    """APD90 within 5 % of the reference's (a NaN reference, no repolarisation in either, passes)."""
    return not np.isfinite(ref) or (np.isfinite(apd) and abs(apd - ref) <= 0.05 * ref)


def _beat(model, integrator: str, dt: float, beats: int = 1):
    """(t, V) of ``beats`` paced beats (a pulse every BEAT ms) with the native C kernel, or None where a state goes
    bad."""
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.ode.native import NativeModel
    nat = NativeModel(model, integrator=integrator)
    y = np.ascontiguousarray(model.initial_state(1))
    k = int(round(SAMPLE / dt))
    stim = nat.stimulus([Protocol(start=0.0, duration=DURATION, period=BEAT, count=beats)], [AMPLITUDE], 1)
    n = int(round(beats * BEAT / SAMPLE))
    v = np.empty(n + 1)
    v[0] = y[0, 0]
    try:
        for i in range(n):
            nat.advance(y, i * k * dt, dt, k, stim)
            v[i + 1] = y[0, 0]
    except SimulationError:
        return None
    return np.arange(n + 1) * SAMPLE, v


def _cvodes(path, beats: int = 1):
    myokit = cellml.myokit_cvodes()
    m = cellml.load_myokit(path)
    p = myokit.Protocol()
    for b in range(beats):
        p.schedule(AMPLITUDE, b * BEAT, DURATION)
    s = myokit.Simulation(m, p)
    s.set_tolerance(1e-8, 1e-8)
    s.set_max_step_size(DURATION / 4)                  # do not step over the pulse
    vname = m.label("membrane_potential").qname()
    n = int(round(beats * BEAT / SAMPLE))
    d = s.run(beats * BEAT + SAMPLE / 2, log=[vname], log_times=np.arange(n + 1) * SAMPLE)
    return np.arange(n + 1) * SAMPLE, np.asarray(d[vname])


def conformance(path: Path, beats: int = BEATS) -> dict:
    """One row of the table (see the module docstring), over ``beats`` beats."""
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    import warnings
    from cardiosim.reaction.ode.native import NativeModel
    row = {"model": path.stem, "beats": beats}
    t0 = time.perf_counter()
    try:
        cls = cellml.model_class(path)
    except CellModelError as e:
        row["generates"] = str(e).replace(str(path) + ": ", "")
        return row
    row["generates"] = "yes"
    row["states"] = len(cls.states)
    row["gates"] = len(cls.gates)
    row["singularities"] = len(cls.singularities)
    model = cls()
    y0 = model.initial_state(1)
    try:
        nat = NativeModel(model)
        row["compiles"] = "yes"
    except RuntimeError as e:
        row["compiles"] = "no: " + str(e).splitlines()[0][:120]
        return row
    d_np = np.empty_like(y0)
    model.rhs(0.0, y0, 0.0, d_np)
    d_c = nat.rhs(y0[:, 0], 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d_my = np.array(cellml.load_myokit(path).evaluate_derivatives(inputs={"pace": 0.0}, ignore_errors=True))
    row["c_vs_numpy"] = _rel(d_c, d_np[:, 0])
    row["numpy_vs_myokit"] = _rel(d_np[:, 0], d_my)
    try:
        t_ref, v_ref = _cvodes(path, beats)
    except Exception as e:                                   # a CVODES failure is a result, not a crash
        row["cvodes"] = "failed: " + (str(e).strip().splitlines() or [type(e).__name__])[0][:100]
        return row
    ref = _apd90s(t_ref, v_ref, beats)
    row["apd90s_cvodes"] = ref
    row["apd90_cvodes"] = ref[-1]
    runs: dict = {}

    def run(integ, dt):                  # each (integrator, step) once: the reference is one of the search's runs
        if (integ, dt) not in runs:
            runs[integ, dt] = _beat(model, integ, dt, beats)
        return runs[integ, dt]
    for integ, dt in REFERENCE:
        beat = run(integ, dt)
        if beat is not None:
            row["v_rms"] = float(np.sqrt(np.mean((beat[1] - v_ref) ** 2)))
            row["apd90s"] = _apd90s(*beat, beats)
            row["apd90"] = row["apd90s"][-1]
            row["dt_ref"] = dt
            row["integrator_ref"] = integ
            break
    else:
        row["beat"] = f"unstable with {', '.join(f'{i} at {d:g} ms' for i, d in REFERENCE)}"
    for integ, key in (("forward-euler", "fe_max_dt"), ("rush-larsen", "rl_max_dt"), ("grl1", "grl1_max_dt")):
        row[key] = None
        for dt in STEPS:                 # from the largest: a step that fails usually fails within a few ms
            b = run(integ, dt)
            if b is not None and all(_close(a, r) for a, r in zip(_apd90s(*b, beats), ref)):
                row[key] = dt
                break
    row["seconds"] = time.perf_counter() - t0
    return row


def _f(x, fmt):
    return "—" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)


def markdown(rows: list[dict], meta: dict) -> str:
    n_ok = sum(r["generates"] == "yes" for r in rows)
    beats = max([r.get("beats", 1) for r in rows] or [1])
    marks = {ref: mark for ref, mark in zip(REFERENCE[1:], ("*", "†"))}
    lines = [f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']['cpu']}; Myokit "
             f"{meta['myokit']}, generator {meta['generator']}). {n_ok} of {len(rows)} files generate. "
             f"Beats: {beats} pulses of {AMPLITUDE:g} µA/µF for {DURATION:g} ms, one every {BEAT:g} ms from t = 0, "
             f"from the file's initial state; cardiosim = native C, Forward Euler at {REFERENCE[0][1]:g} ms "
             + "".join(f"({i.replace('-', ' ')} at {d:g} ms where marked {marks[(i, d)]}) " for i, d in REFERENCE[1:])
             + f"over all of them; CVODES = Myokit's simulation (rtol = atol = 1e-8); V RMS over the {beats} "
             f"beats, APD90 (from the stimulus onset) of the last. Derivatives at the initial state: max relative "
             f"difference over the states. Stable step: the largest of {', '.join(f'{s:g}' for s in sorted(STEPS))} "
             f"ms at which every beat keeps every state finite and in range with its APD90 within 5 % of CVODES's "
             f"(— : none of them). An APD90 of a few ms means the pulse did not excite the model (the same in "
             f"both); 'failed' is CVODES's own failure on the model.", "",
             "| model | generates | states | gates | guarded 0/0 | C vs NumPy | NumPy vs Myokit | V RMS vs CVODES (mV) "
             "| APD90 cardiosim / CVODES (ms) | max FE dt (ms) | max RL dt (ms) | max GRL1 dt (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["generates"] != "yes":
            lines.append(f"| {r['model']} | no: {r['generates']} | | | | | | | | | | |")
            continue
        if r.get("compiles", "yes") != "yes":
            lines.append(f"| {r['model']} | yes; C {r['compiles']} | {r['states']} | {r['gates']} | "
                         f"{r['singularities']} | | | | | | | |")
            continue
        beat = r.get("cvodes") or r.get("beat")
        ref = (r.get("integrator_ref", "forward-euler"), r.get("dt_ref"))
        vr = beat if beat else _f(r.get("v_rms"), ".3g") + marks.get(ref, "")
        apd = "" if beat else f"{_f(r.get('apd90'), '.1f')} / {_f(r.get('apd90_cvodes'), '.1f')}"
        lines.append(f"| {r['model']} | yes | {r['states']} | {r['gates']} | {r['singularities']} | "
                     f"{r['c_vs_numpy']:.1e} | {r['numpy_vs_myokit']:.1e} | {vr} | {apd} | "
                     f"{_f(r.get('fe_max_dt'), 'g')} | {_f(r.get('rl_max_dt'), 'g')} | "
                     f"{_f(r.get('grl1_max_dt'), 'g')} |")
    return "\n".join(lines + ["", summary(rows)]) + "\n"


def summary(rows: list[dict]) -> str:
    """The table in numbers: what generates and compiles, the derivatives, the beats against CVODES, the steps."""
    built = [r for r in rows if r["generates"] == "yes" and r.get("compiles", "yes") == "yes"]
    exact = sum(r["numpy_vs_myokit"] == 0.0 for r in built)
    finite = [r["numpy_vs_myokit"] for r in built if 0.0 < r["numpy_vs_myokit"] < np.inf]
    beat = [r for r in built if r.get("v_rms") is not None and r.get("apd90_cvodes") is not None]
    no_cvodes = [r["model"] for r in built if r.get("cvodes")]
    steps = {k: [r[k] for r in beat if r.get(k) is not None] for k in ("fe_max_dt", "rl_max_dt", "grl1_max_dt")}
    both = [r for r in beat if None not in (r.get("fe_max_dt"), r.get("rl_max_dt"), r.get("grl1_max_dt"))]
    larger = sum(r["grl1_max_dt"] > max(r["fe_max_dt"], r["rl_max_dt"]) for r in both)
    same = sum(r["grl1_max_dt"] == max(r["fe_max_dt"], r["rl_max_dt"]) for r in both)
    med = {k: f"{float(np.median(v)):g} ms" if v else "—" for k, v in steps.items()}
    apd = max((abs(r["apd90"] - r["apd90_cvodes"]) for r in beat if r.get("apd90") is not None), default=np.nan)
    return (f"In numbers: {len(built)} of {len(rows)} files generate and compile; NumPy's derivatives equal "
            f"Myokit's bit for bit in {exact}" + (f", to {max(finite):.1g} in {len(finite)}" if finite else "")
            + f"; C's equal NumPy's to {max(r['c_vs_numpy'] for r in built):.1g} at most. {len(beat)} beats run "
            f"against CVODES (it fails on {', '.join(no_cvodes) or 'none'}): V RMS at most "
            f"{max(r['v_rms'] for r in beat):.2g} mV, the last APD90 within {apd:.2g} ms. Largest stable step, "
            f"median over them: Forward Euler {med['fe_max_dt']}, Rush–Larsen {med['rl_max_dt']}, GRL1 "
            f"{med['grl1_max_dt']}; GRL1's is larger than both others' for {larger} of {len(both)} models and "
            f"equal to the larger for {same}.")


def main(argv=None) -> int:
    import myokit
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="cardiosim bench cellml", description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=[str(cellml.MODELS)], help="CellML files or folders of them "
                   "(default: models/, the 79 models of the Chaste collection)")
    p.add_argument("--subset", action="store_true", help=f"only the {len(SUBSET)} models CI runs")
    p.add_argument("--write", help="markdown page to update (docs/user/cell-models.md)")
    p.add_argument("--json", help="write the rows here too")
    p.add_argument("--beats", type=int, default=BEATS, help=f"paced beats per model (default {BEATS})")
    p.add_argument("--jobs", type=int, default=1, help="models checked at a time, one process each (default 1)")
    args = p.parse_args(argv)
    for opt, value in (("--beats", args.beats), ("--jobs", args.jobs)):
        if value < 1:
            print(f"cardiosim bench cellml: {opt} must be at least 1, got {value}", file=sys.stderr)
            return 2
    files = []
    for item in args.models:
        q = Path(item)
        files += sorted(q.glob("*.cellml")) if q.is_dir() else [q]
    if args.subset:
        files = [f for f in files if f.stem in SUBSET]
    if not files:
        print(f"cardiosim bench cellml: no CellML files in {' '.join(args.models)}", file=sys.stderr)
        return 2
    rows = []
    with concurrent.futures.ProcessPoolExecutor(args.jobs) if args.jobs > 1 else contextlib.nullcontext() as pool:
        results = (pool.map(conformance, files, [args.beats] * len(files)) if pool else
                   (conformance(f, args.beats) for f in files))
        for r in results:        # in the files' order, each as it is known
            rows.append(r)
            print(json.dumps(r), file=sys.stderr, flush=True)
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(), "myokit": myokit.__version__,
            "generator": cellml.GENERATOR_VERSION,
            "command": "cardiosim bench cellml " + " ".join(argv)}
    publish(markdown(rows, meta), meta, rows, args.json, args.write, key="cellml-conformance")
    return 0

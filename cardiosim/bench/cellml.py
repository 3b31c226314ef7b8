"""Conformance of the CellML generator (cardiosim/cells/cellml.py) over a folder of CellML files: for each file,
whether it generates (or the one-line reason why not), whether its C compiles, C = NumPy = Myokit derivatives at the
initial state, one paced beat against Myokit's CVODES simulation, the gates found and the largest stable
Forward-Euler, Rush–Larsen and GRL1 steps.

    cardiosim bench cellml [--models DIR|FILE ...] [--subset] [--write docs/user/cell-models.md] [--json FILE]

Protocol of the beat (the same for every model, so the table compares like with like): one pulse of
``AMPLITUDE`` µA/µF for ``DURATION`` ms at t = 0, integrated for ``BEAT`` ms. cardiosim: the native C kernel, Forward
Euler at the first of ``DT_REF`` (ms) at which the beat stays finite and in range. Reference: Myokit's CVODES
simulation of the same prepared model (rtol = atol = 1e-8), both sampled every ``SAMPLE`` ms; V RMS is the
root-mean-square difference of the two traces, APD90 is measured from the stimulus onset (cardiosim.analysis.biomarkers) on
each. The stable step is the largest of ``STEPS`` at which the whole beat
keeps every state finite and within its range (gates that are probabilities in [0, 1], |V| ≤ 300 mV) with APD90
within 5 % of CVODES's.
The derivative column is the largest relative difference over the states, |a − b| / max(|b|, 1e-12·max|dy/dt|).
"""

from __future__ import annotations

import argparse
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

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "models"
AMPLITUDE, DURATION, BEAT = -50.0, 1.0, 1000.0          # µA/µF, ms, ms
DT_REF, SAMPLE = (1e-3, 1e-4), 0.5                      # ms: the first reference step that is stable is used
STEPS = (0.5, 0.2, 0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005, 0.0002, 0.0001)   # ms, tried in this order
# The fixed subset CI runs: the variety of the corpus (sizes, gate forms, unit systems, singularities), with the
# best-known ventricular and atrial models among them.
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


def _beat(model, integrator: str, dt: float):
    """(t, V) of one paced beat with the native C kernel, or None where a state goes bad."""
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.ode.native import NativeModel
    nat = NativeModel(model, integrator=integrator)
    y = np.ascontiguousarray(model.initial_state(1))
    k = int(round(SAMPLE / dt))
    stim = nat.stimulus([Protocol(start=0.0, duration=DURATION, period=0.0, count=1)], [AMPLITUDE], 1)
    n = int(round(BEAT / SAMPLE))
    v = np.empty(n + 1)
    v[0] = y[0, 0]
    try:
        for i in range(n):
            nat.advance(y, i * k * dt, dt, k, stim)
            v[i + 1] = y[0, 0]
    except SimulationError:
        return None
    return np.arange(n + 1) * SAMPLE, v


def _cvodes(path):
    myokit = cellml.myokit_cvodes()
    m = cellml.load_myokit(path)
    p = myokit.Protocol()
    p.schedule(AMPLITUDE, 0.0, DURATION)
    s = myokit.Simulation(m, p)
    s.set_tolerance(1e-8, 1e-8)
    s.set_max_step_size(DURATION / 4)                  # do not step over the pulse
    vname = m.label("membrane_potential").qname()
    n = int(round(BEAT / SAMPLE))
    d = s.run(BEAT + SAMPLE / 2, log=[vname], log_times=np.arange(n + 1) * SAMPLE)
    return np.arange(n + 1) * SAMPLE, np.asarray(d[vname])


def conformance(path: Path) -> dict:
    """One row of the table (see the module docstring)."""
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    import warnings
    from cardiosim.reaction.ode.native import NativeModel
    row = {"model": path.stem}
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
        t_ref, v_ref = _cvodes(path)
    except Exception as e:                                   # a CVODES failure is a result, not a crash
        row["cvodes"] = "failed: " + (str(e).strip().splitlines() or [type(e).__name__])[0][:100]
        return row
    row["apd90_cvodes"] = _apd90(t_ref, v_ref)
    for dt in DT_REF:
        beat = _beat(model, "forward-euler", dt)
        if beat is not None:
            row["v_rms"] = float(np.sqrt(np.mean((beat[1] - v_ref) ** 2)))
            row["apd90"] = _apd90(*beat)
            row["dt_ref"] = dt
            break
    else:
        row["beat"] = f"Forward Euler unstable at {DT_REF[-1]:g} ms"
    for integ, key in (("forward-euler", "fe_max_dt"), ("rush-larsen", "rl_max_dt"), ("grl1", "grl1_max_dt")):
        row[key] = None
        for dt in STEPS:                 # from the largest: a step that fails usually fails within a few ms
            b = _beat(model, integ, dt)
            if b is None:
                continue
            apd = _apd90(*b)
            ref = row["apd90_cvodes"]
            if np.isfinite(ref) and not (np.isfinite(apd) and abs(apd - ref) <= 0.05 * ref):
                continue
            row[key] = dt
            break
    row["seconds"] = time.perf_counter() - t0
    return row


def _f(x, fmt):
    return "—" if x is None or (isinstance(x, float) and not np.isfinite(x)) else format(x, fmt)


def markdown(rows: list[dict], meta: dict) -> str:
    n_ok = sum(r["generates"] == "yes" for r in rows)
    lines = [f"Generated by `{meta['command']}` on {meta['date']} ({meta['machine']['cpu']}; Myokit "
             f"{meta['myokit']}, generator {meta['generator']}). {n_ok} of {len(rows)} files generate. "
             f"Beat: one {AMPLITUDE:g} µA/µF pulse of {DURATION:g} ms at t = 0, {BEAT:g} ms; cardiosim = native C, "
             f"Forward Euler at {DT_REF[0]:g} ms ({DT_REF[1]:g} ms where marked *); CVODES = Myokit's simulation "
             f"(rtol = atol = 1e-8); APD90 from the stimulus onset. Derivatives at the initial state: max relative difference over the states. Stable "
             f"step: the largest of {', '.join(f'{s:g}' for s in sorted(STEPS))} ms at which the beat keeps every "
             f"state finite and in range with APD90 within 5 % of CVODES (— : none of them). An APD90 of a few ms "
             f"means the pulse did not excite the model (the same in both); 'failed' is CVODES's own failure on the model.", "",
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
        vr = beat if beat else _f(r.get("v_rms"), ".3g") + ("*" if r.get("dt_ref") != DT_REF[0] else "")
        apd = "" if beat else f"{_f(r.get('apd90'), '.1f')} / {_f(r.get('apd90_cvodes'), '.1f')}"
        lines.append(f"| {r['model']} | yes | {r['states']} | {r['gates']} | {r['singularities']} | "
                     f"{r['c_vs_numpy']:.1e} | {r['numpy_vs_myokit']:.1e} | {vr} | {apd} | "
                     f"{_f(r.get('fe_max_dt'), 'g')} | {_f(r.get('rl_max_dt'), 'g')} | "
                     f"{_f(r.get('grl1_max_dt'), 'g')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    import myokit
    argv = list(sys.argv[1:] if argv is None else argv)
    p = argparse.ArgumentParser(prog="cardiosim bench cellml", description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=[str(MODELS)], help="CellML files or folders of them "
                   "(default: models/, the 79 models of the Chaste collection)")
    p.add_argument("--subset", action="store_true", help=f"only the {len(SUBSET)} models CI runs")
    p.add_argument("--write", help="markdown page to update (docs/user/cell-models.md)")
    p.add_argument("--json", help="write the rows here too")
    args = p.parse_args(argv)
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
    for f in files:
        r = conformance(f)
        rows.append(r)
        print(json.dumps(r), file=sys.stderr, flush=True)
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(), "myokit": myokit.__version__,
            "generator": cellml.GENERATOR_VERSION,
            "command": "cardiosim bench cellml " + " ".join(argv)}
    publish(markdown(rows, meta), meta, rows, args.json, args.write, key="cellml-conformance")
    return 0

"""Concentration-response series: one cell paced (cardiosim.single_cell.pacing.run_cell) at each of several drug
concentrations, every block scaling its conductance by 1/(1 + (C/IC50)^Hill) (pacing.block_factor); the last beat's
biomarkers per concentration.

    concentration_response("tt06", "epi", {}, {}, {"g_Kr": (0.1, 1.0)}, [0.0, 0.03, 0.1, 0.3], amplitude=-52,
                           duration=1, period=1000, beats=2, prepace=0, dt=0.02, integrator="rush-larsen",
                           record_every=0.1, h5_path="drug.h5", json_path="drug.json")

HDF5 layout (written whole at the end, cardiosim.runtime.files.write_h5; units in each dataset's ``unit``):

    /                          attrs as pacing's (model, variant, overrides, amplitude, duration, period, beats,
                               prepace, dt, integrator, record_every, cardiosim_version), ``protocol``
                               "concentration-response" and ``blocks`` (JSON {parameter: [IC50, Hill]})
    /concentration/values      (n,) the concentrations, in the IC50s' unit
    /concentration/factors/<p> (n,) the share of parameter p left at each concentration (1)
    /concentration/biomarkers  one row per concentration: ``concentration`` and the last beat's biomarkers (columns
                               as cardiosim.analysis.biomarkers.UNITS, attribute ``units``: JSON); APDs from the
                               stimulus onset
    /trace/t                   (m,) ms from the last beat's onset
    /trace/V                   (n, m) mV, the last beat at each concentration (one row per concentration)

The JSON file (optional) holds the settings and the same rows (NaN as null).
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Mapping

import h5py
import numpy as np

from cardiosim import __version__
from cardiosim.analysis.biomarkers import UNITS
from cardiosim.runtime.errors import SimulationError
from cardiosim.runtime.files import whole, write_h5
from cardiosim.single_cell.pacing import block_factor, run_cell, scaled

PROTOCOL = "concentration-response"


def factors_at(blocks: Mapping[str, tuple], concentration: float) -> dict[str, float]:
    """{parameter: share left} of every block (IC50, Hill) at ``concentration`` (the IC50s' unit)."""
    return {name: block_factor(concentration, ic50, hill) for name, (ic50, hill) in blocks.items()}


def concentration_response(model_name: str, variant: str | None, overrides: Mapping[str, float] | None,
                           scale: Mapping[str, float], blocks: Mapping[str, tuple], concentrations, amplitude: float,
                           duration: float, period: float, beats: int, prepace: int, dt: float, integrator: str,
                           record_every: float, h5_path, json_path=None, done=None) -> list[dict]:
    """Pace the cell at every concentration (``beats`` recorded beats after ``prepace``, each from the model's
    initial state); write the file of the module docstring and return its rows (``concentration`` and the last
    beat's biomarkers). ``scale``: other factors (--scale), multiplied with the blocks'. ``done(i, n, row)`` after
    each concentration. ValueError (one line) for bad arguments before anything is computed; a blow-up at one
    concentration is a SimulationError naming it, and nothing is written."""
    concentrations = [float(c) for c in concentrations]
    if len(concentrations) < 2 or not all(math.isfinite(c) and c >= 0 for c in concentrations):
        raise ValueError(f"--concentration: a series needs two or more finite concentrations >= 0; got "
                         f"{concentrations}")
    if not blocks:
        raise ValueError("--concentration: a series needs at least one --block NAME=IC50[:HILL]")
    parent = Path(h5_path).expanduser().resolve().parent
    rows, traces, shares, t_last, units = [], [], {name: [] for name in blocks}, None, {}
    for i, c in enumerate(concentrations):
        left = factors_at(blocks, c)
        factors = {**scale}
        for name, f in left.items():
            factors[name] = factors.get(name, 1.0) * f
            shares[name].append(f)
        params = scaled(model_name, variant, dict(overrides or {}), factors)
        # run_cell writes its trace as it goes; here only the last beat is kept, in the series' own file
        with tempfile.TemporaryDirectory(dir=parent, prefix=".cardiosim-series-") as tmp:
            path = Path(tmp) / "cell.h5"
            try:
                beat_rows = run_cell(model_name, variant, params, amplitude, duration, period, beats, dt,
                                     record_every, path, integrator=integrator, prepace=prepace)
            except SimulationError as e:      # its words without the temporary file's, which goes now
                why = str(e).split(f"; {path}")[0].split(f" {path} ")[0]
                raise SimulationError(f"--concentration {c:g}: {why}; nothing written") from None
            with h5py.File(path, "r") as f:
                t, v = f["trace/t"][:], f["trace/V"][:]
                units = json.loads(f["biomarkers"].attrs["units"])
        start = (beats - 1) * period
        last = t >= start - 1e-9 * max(1.0, start)
        t_last = t[last] - start
        traces.append(v[last])
        rows.append({"concentration": c, **beat_rows[-1]})
        if done:
            done(i + 1, len(concentrations), rows[-1])
    units = {c: units.get(c, UNITS.get(c, "")) for c in rows[0]}
    units["concentration"] = "the IC50s' unit"
    _write(h5_path, json_path, rows, units, t_last, np.array(traces), shares, dict(
        model=str(model_name), variant=variant or "", overrides=json.dumps(dict(overrides or {})),
        amplitude=amplitude, duration=duration, period=period, beats=beats, prepace=prepace, dt=dt,
        integrator=integrator, record_every=record_every, cardiosim_version=__version__, protocol=PROTOCOL,
        blocks=json.dumps({k: list(v) for k, v in blocks.items()})))
    return rows


def _write(h5_path, json_path, rows, units, t, v, shares, attrs) -> None:
    """The series' HDF5 file (whole or not at all) and its JSON."""
    cols = list(rows[0])

    def fill(f):
        f.attrs.update(attrs)
        g = f.create_group("concentration")
        g.create_dataset("values", data=np.array([r["concentration"] for r in rows])).attrs["unit"] = \
            "the IC50s' unit"
        for name, left in shares.items():
            g.create_dataset(f"factors/{name}", data=np.array(left)).attrs["unit"] = "1"
        table = np.array([tuple(r[c] for c in cols) for r in rows],
                         dtype=[(c, "i8" if c == "beat" else "f8") for c in cols])
        g.create_dataset("biomarkers", data=table).attrs["units"] = json.dumps(units)
        f.create_dataset("trace/t", data=t).attrs["unit"] = "ms (from the last beat's onset)"
        f.create_dataset("trace/V", data=v).attrs["unit"] = "mV (one row per concentration)"
    write_h5(h5_path, "--output", fill)
    if json_path:
        doc = {k: (json.loads(a) if k in ("overrides", "blocks") else a) for k, a in attrs.items()}
        doc["units"] = units
        doc["concentration_response"] = [{c: (None if isinstance(x, float) and not math.isfinite(x) else x)
                                          for c, x in r.items()} for r in rows]
        with whole(json_path, "--json") as part:
            part.write_text(json.dumps(doc, indent=1) + "\n")

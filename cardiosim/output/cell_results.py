"""Reading the HDF5 files of ``cardiosim cell`` (cardiosim.single_cell; docs/user/output-format.md), for ``cardiosim
inspect`` and ``cardiosim plot``: a paced trace, an S1–S2 restitution, a population, a concentration-response
series. Like :mod:`cardiosim.output.results`: h5py and NumPy only (no MPI, no PETSc), files a run is still writing
opened without HDF5 file locking, and every problem with the file one :class:`UserError` line.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from cardiosim.runtime.errors import UserError

TRACE, RESTITUTION, POPULATION, SERIES = "trace", "restitution", "population", "concentration-response"
WHAT = {TRACE: "a paced single-cell trace", RESTITUTION: "an S1-S2 restitution", POPULATION: "a cell population",
        SERIES: "a concentration-response series"}
# the root attribute ``protocol`` each kind is written with (a paced trace has none)
PROTOCOLS = {"S1-S2 restitution": RESTITUTION, "population": POPULATION, "concentration-response": SERIES}


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def cell_kind(path) -> str | None:
    """Which kind of ``cardiosim cell`` file ``path`` is (TRACE, RESTITUTION, POPULATION, SERIES), or None where it
    is none (a run's file, another HDF5 file, no HDF5 file at all, no file)."""
    p = Path(path)
    try:
        if not p.is_file() or not h5py.is_hdf5(str(p)):
            return None
        with h5py.File(p, "r", locking=False) as f:
            a = f.attrs
            if "format" in a or "cardiosim_version" not in a or "model" not in a or "trace" not in f:
                return None
            return PROTOCOLS.get(_text(a.get("protocol", "")), TRACE)
    except OSError:
        return None


class CellFile:
    """A file of ``cardiosim cell``: its settings (``attrs``), kind, and the arrays of that kind."""

    def __init__(self, path):
        self.path = Path(path)
        self.kind = cell_kind(self.path)
        if self.kind is None:
            raise UserError(f"{self.path}: not a file of cardiosim cell")
        self.f = h5py.File(self.path, "r", locking=False)
        self.attrs = {k: _text(v) for k, v in self.f.attrs.items()}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()

    @property
    def model(self) -> str:
        variant = self.attrs.get("variant") or ""
        return f"{Path(str(self.attrs['model'])).name}" + (f" ({variant})" if variant else "")

    def unit(self, ds, default: str = "") -> str:
        return _text(ds.attrs.get("unit", default)) or default

    # -- a paced trace ---------------------------------------------------------------------------------------------
    def n_samples(self) -> int:
        """Samples every dataset of /trace holds (one written in blocks as the run goes: a run stopped early, or
        still going, may have written its states a block ahead of its times)."""
        g = self.f["trace"]
        return min(g[n].shape[-1] for n in g)

    def names(self) -> list[str]:
        """What /trace holds besides the time: the model's states in their order, then the intermediates."""
        g = self.f["trace"]
        states = [_text(s) for s in self.f.attrs.get("state_names", [])]
        return [n for n in states if n in g] + [n for n in g if n not in states and n != "t"]

    def series(self, name: str) -> tuple[np.ndarray, np.ndarray, str]:
        """(t in ms, values, unit) of one recorded name of a paced trace (complete samples)."""
        if name not in self.names():
            raise UserError(f"--trace {name}: not in {self.path}; recorded: {', '.join(self.names())}")
        n = self.n_samples()
        ds = self.f["trace"][name]
        return self.f["trace/t"][:n], ds[:n], self.unit(ds)

    def biomarkers(self) -> tuple[np.ndarray | None, dict]:
        """(/biomarkers, {column: unit}) of a paced trace; (None, {}) where none was written (a run that stopped
        before a beat was complete)."""
        if "biomarkers" not in self.f:
            return None, {}
        ds = self.f["biomarkers"]
        return ds[()], json.loads(_text(ds.attrs.get("units", "{}")))

    # -- restitution, population, series ------------------------------------------------------------------------------
    def table(self) -> tuple[np.ndarray, dict]:
        """The kind's table, a row per coupling interval, cell or concentration, and {column: unit}."""
        where = {RESTITUTION: "restitution", POPULATION: "population/biomarkers",
                 SERIES: "concentration/biomarkers"}[self.kind]
        ds = self.f[where]
        units = ds.attrs.get("units")
        if units is None:      # a restitution table: ms, but V_peak_S2 in mV
            units = json.dumps({c: ("mV" if c.startswith("V_") else "1" if c == "captured" else "ms")
                                for c in ds.dtype.names if c != "reason"})
        return ds[()], json.loads(_text(units))

    def traces(self) -> tuple[np.ndarray, np.ndarray]:
        """(t in ms, V in mV: a row per coupling interval, cell or concentration) of a restitution, a population
        (the last beat) or a series (the last beat)."""
        return self.f["trace/t"][:], np.atleast_2d(self.f["trace/V"][()])

    def factors(self) -> dict[str, np.ndarray]:
        """A population's scale factors per cell, or a series' share left per concentration, by parameter."""
        where = "population/factors" if self.kind == POPULATION else "concentration/factors"
        return {n: d[:] for n, d in self.f[where].items()} if where in self.f else {}

    def keep(self) -> dict[str, tuple[float, float]]:
        """A population's calibration filter (--keep): {biomarker: (lo, hi)}; {} where there was none."""
        return {k: (float(v[0]), float(v[1])) for k, v in json.loads(self.attrs.get("keep", "{}")).items()}

    def blocks(self) -> dict[str, tuple[float, float]]:
        """A series' blocks: {parameter: (IC50, Hill)}."""
        return {k: (float(v[0]), float(v[1])) for k, v in json.loads(self.attrs.get("blocks", "{}")).items()}


# ----------------------------------------------------------------------------------------------------------------
# cardiosim inspect
# ----------------------------------------------------------------------------------------------------------------
def _settings(c: CellFile) -> str:
    a = c.attrs
    parts = [f"{a['amplitude']:g} pA/pF for {a['duration']:g} ms every {a['period']:g} ms"]
    if "beats" in a:
        parts.append(f"{a['beats']} beat(s) recorded")
    if int(a.get("prepace", 0) or 0):
        parts.append(f"after {a['prepace']} not recorded")
    parts.append(f"{a.get('integrator', '?')}, dt {a['dt']:g} ms")
    if "record_every" in a:
        parts.append(f"records every {a['record_every']:g} ms")
    over = json.loads(a.get("overrides", "{}") or "{}")
    if over:
        parts.append("parameters " + ", ".join(f"{k} = {v:.4g}" for k, v in over.items()))
    return "; ".join(parts)


def _ranges(values: np.ndarray) -> str:
    ok = values[np.isfinite(values)]
    if not ok.size:
        return "no value"
    return f"{ok.min():.4g} to {ok.max():.4g} (median {np.median(ok):.4g})"


def _describe_trace(c: CellFile, lines: list[str]) -> None:
    n = c.n_samples()
    if n == 0:
        lines.append("trace: no sample written")
        return
    t = c.f["trace/t"][:n]
    lines.append(f"trace: {n} samples, t = {t[0]:g} to {t[-1]:g} ms")
    for name in c.names():
        _, v, unit = c.series(name)
        ok = v[np.isfinite(v)]
        span = f"{ok.min():.4g} to {ok.max():.4g}" if ok.size else "no finite value"
        lines.append(f"  {name:<12} {span} {unit}")
    rows, units = c.biomarkers()
    if rows is None:
        lines.append("biomarkers: none (no beat was complete)")
        return
    cols = [k for k in ("V_rest", "V_peak", "dVdt_max", "APD50", "APD90", "Cai_peak") if k in rows.dtype.names]
    lines.append(f"biomarkers: {len(rows)} beat(s), APDs from the stimulus onset")
    lines.append("  beat " + "".join(f"{k + ' (' + units.get(k, '') + ')':>18}" for k in cols))
    for r in rows:
        lines.append(f"  {int(r['beat']):4d} " + "".join(f"{r[k]:18.5g}" for k in cols))


def _describe_restitution(c: CellFile, lines: list[str]) -> None:
    rows, _ = c.table()
    captured = rows["captured"] > 0
    lines.append(f"restitution: {len(rows)} coupling interval(s), {int(captured.sum())} captured; APD90 of the "
                 f"last S1 beat {rows['APD90_S1'][0]:.4g} ms")
    lines.append("        CI (ms)        DI (ms)  APD90 S2 (ms)")
    for r in rows:
        why = _text(r["reason"]) if "reason" in rows.dtype.names else ""
        lines.append("".join(f"{r[k]:15.2f}" for k in ("CI", "DI", "APD90_S2")) + (f"  {why}" if why else ""))


def _describe_population(c: CellFile, lines: list[str]) -> None:
    rows, units = c.table()
    failed, kept = rows["failed"] > 0, rows["kept"] > 0
    keep = c.keep()
    rule = ", ".join(f"{k} {lo:g} to {hi:g} {units.get(k, '')}".rstrip() for k, (lo, hi) in keep.items())
    lines.append(f"population: {len(rows)} cells, {int(failed.sum())} failed, {int(kept.sum())} kept "
                 + (f"by the calibration filter ({rule})" if keep else "(no calibration filter: every cell that "
                                                                        "did not fail)"))
    for name, f in c.factors().items():
        lines.append(f"  factor {name:<14} {_ranges(f)}")
    for col in (k for k in rows.dtype.names if k not in ("cell", "failed", "kept")):
        lines.append(f"  {col:<8} ({units.get(col, '')}): all {_ranges(rows[col])}; kept {_ranges(rows[col][kept])}")


def _describe_series(c: CellFile, lines: list[str]) -> None:
    rows, units = c.table()
    blocks = ", ".join(f"{k} IC50 {ic:g}, Hill {h:g}" for k, (ic, h) in c.blocks().items())
    lines.append(f"concentration-response: {len(rows)} concentrations ({units.get('concentration', '')}); blocks: "
                 f"{blocks}; biomarkers of the last beat")
    cols = [k for k in ("APD90", "APD50", "V_peak", "V_rest", "dVdt_max") if k in rows.dtype.names]
    lines.append("  " + f"{'concentration':>14}" + "".join(f"{k + ' (' + units.get(k, '') + ')':>18}" for k in cols))
    for r in rows:
        lines.append("  " + f"{r['concentration']:14.4g}" + "".join(f"{r[k]:18.5g}" for k in cols))


def describe_cell(c: CellFile) -> str:
    """The report of ``cardiosim inspect`` for a file of ``cardiosim cell``."""
    lines = [f"{c.path}: {WHAT[c.kind]} of cardiosim cell (written by cardiosim {c.attrs.get('cardiosim_version')})",
             f"model: {c.model}", f"pacing: {_settings(c)}"]
    if c.attrs.get("error"):
        lines.append(f"stopped early: {c.attrs['error']}")
    {TRACE: _describe_trace, RESTITUTION: _describe_restitution, POPULATION: _describe_population,
     SERIES: _describe_series}[c.kind](c, lines)
    return "\n".join(lines)

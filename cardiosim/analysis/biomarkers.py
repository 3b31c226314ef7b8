"""Per-beat action-potential biomarkers from a sampled trace (single cells, probes).

Definitions (Bondarenko 2004 reference, tests/data/reference/bondarenko2004/spec.md §6; also used for TT06):

* ``V_rest`` (mV): V at the stimulus onset of the beat (linearly interpolated in the trace).
* ``V_peak`` (mV), ``t_peak`` (ms, from the onset): the largest sample of V in the beat.
* ``dVdt_max`` (mV/ms = V/s), ``t_dVdt_max`` (ms, from the onset): the largest upstroke velocity. From ``dvdt``
  when given (e.g. the native driver's per-substep maximum, exact at the resolution of dt), else from finite
  differences of the trace (only as good as the sampling: use a fine record interval then).
* ``APD25/50/75/90`` (ms): from the origin until V first falls below V_peak − x %·(V_peak − V_rest) after the peak,
  the crossing linearly interpolated between the two samples around it. The origin is the stimulus onset
  (``apd_origin="stimulus"``, Bondarenko spec §6) or the time of dV/dt_max (``"dvdt_max"``, the usual TT06
  convention). NaN when V does not get back below the level within the beat.
* With ``Cai``: ``Cai_rest`` (Cai at the onset), ``Cai_peak`` and ``Cai_time_to_peak`` (ms, from the onset), in the
  units of ``Cai`` (µM for Bondarenko, mM for TT06).

A beat runs from its onset to the next onset (the last one to the end of the trace).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

APD_LEVELS = (25, 50, 75, 90)

UNITS = {
    "beat": "1", "t_start": "ms", "V_rest": "mV", "V_peak": "mV", "t_peak": "ms", "dVdt_max": "mV/ms",
    "t_dVdt_max": "ms", **{f"APD{x}": "ms" for x in APD_LEVELS},
    "Cai_rest": "as Cai", "Cai_peak": "as Cai", "Cai_time_to_peak": "ms",
}


def _crossing_down(t: np.ndarray, v: np.ndarray, level: float, i0: int) -> float:
    """Time at which v first falls below ``level`` at or after index i0, linearly interpolated; NaN if never."""
    below = np.flatnonzero(v[i0:] < level)
    if below.size == 0:
        return float("nan")
    j = i0 + int(below[0])
    if j == 0:
        return float(t[0])
    return float(t[j - 1] + (level - v[j - 1]) * (t[j] - t[j - 1]) / (v[j] - v[j - 1]))


def beat_biomarkers(t, V, beat_starts: Sequence[float], Cai=None, apd_origin: str = "stimulus",
                    dvdt=None, t_dvdt=None) -> list[dict]:
    """Biomarkers of each beat (see the module docstring), one dict per beat, keys as in :data:`UNITS`.

    t (ms, increasing), V (mV), Cai (optional, any unit): samples of one cell. beat_starts: stimulus onsets (ms).
    dvdt (mV/ms) with its sample times t_dvdt (default ``t``): optional upstroke-velocity samples.
    """
    t = np.asarray(t, dtype=float)
    V = np.asarray(V, dtype=float)
    if t.ndim != 1 or t.shape != V.shape or t.size < 2:
        raise ValueError("beat_biomarkers: t and V must be 1-D arrays of the same length (at least 2)")
    if apd_origin not in ("stimulus", "dvdt_max"):
        raise ValueError(f"beat_biomarkers: apd_origin must be 'stimulus' or 'dvdt_max', not '{apd_origin}'")
    if dvdt is None:
        dvdt, t_dvdt = np.gradient(V, t), t
    else:
        dvdt = np.asarray(dvdt, dtype=float)
        t_dvdt = t if t_dvdt is None else np.asarray(t_dvdt, dtype=float)
    ca = None if Cai is None else np.asarray(Cai, dtype=float)

    starts = [float(s) for s in beat_starts]
    out = []
    for b, t0 in enumerate(starts):
        t1 = starts[b + 1] if b + 1 < len(starts) else np.inf
        sel = np.flatnonzero((t >= t0) & (t < t1))
        if sel.size < 2:
            continue
        tb, vb = t[sel], V[sel]
        v_rest = float(np.interp(t0, t, V))
        ip = int(np.argmax(vb))
        v_peak = float(vb[ip])
        dsel = np.flatnonzero((t_dvdt >= t0) & (t_dvdt < t1) & np.isfinite(dvdt))
        if dsel.size:
            jd = dsel[int(np.argmax(dvdt[dsel]))]
            dv_max, t_dv = float(dvdt[jd]), float(t_dvdt[jd])
        else:
            dv_max, t_dv = float("nan"), float("nan")
        origin = t0 if apd_origin == "stimulus" else t_dv
        row = {"beat": b + 1, "t_start": t0, "V_rest": v_rest, "V_peak": v_peak, "t_peak": float(tb[ip]) - t0,
               "dVdt_max": dv_max, "t_dVdt_max": t_dv - t0}
        for x in APD_LEVELS:
            level = v_peak - x / 100.0 * (v_peak - v_rest)
            row[f"APD{x}"] = _crossing_down(tb, vb, level, ip) - origin
        if ca is not None:
            cb = ca[sel]
            ic = int(np.argmax(cb))
            row["Cai_rest"] = float(np.interp(t0, t, ca))
            row["Cai_peak"] = float(cb[ic])
            row["Cai_time_to_peak"] = float(tb[ic]) - t0
        out.append(row)
    return out


def format_table(rows: list[dict], cai_unit: str = "uM") -> str:
    """A plain-text table of :func:`beat_biomarkers` rows, for logs and test output."""
    cols = ["beat", "V_rest", "V_peak", "dVdt_max"] + [f"APD{x}" for x in APD_LEVELS]
    if rows and "Cai_peak" in rows[0]:
        cols += ["Cai_rest", "Cai_peak", "Cai_time_to_peak"]
    units = {**UNITS, "Cai_rest": cai_unit, "Cai_peak": cai_unit}
    head = " ".join(f"{c:>16s}" for c in cols)
    unit_line = " ".join(f"{'(' + units[c] + ')':>16s}" for c in cols)
    lines = [head, unit_line]
    for r in rows:
        lines.append(" ".join(f"{r[c]:16d}" if c == "beat" else f"{r[c]:16.5g}" for c in cols))
    return "\n".join(lines)

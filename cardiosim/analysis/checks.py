"""Runs that say when they went wrong: plausibility checks of a finished run's activation (``[checks]``).

A run can end without an error and still be wrong: on a grid too coarse for the tissue's conductivities the wave
slows and dies (the idealised LV at 1 mm spacing: 50 of 3,271 tissue nodes activated, exit 0), or a heart without
a conduction system activates so slowly that its QRS is twice a physiological one. These checks read the activation
map at the end of the run (and the same checks read a result file: ``cardiosim inspect``) and give one line per
finding; the run prints them (``cardiosim: warning: ...`` on stderr), stores them in the output (the ``warnings``
attribute, a JSON list, and the summary's ``warnings``), and ``cardiosim run --strict`` ends with exit status 1
where there is one.

What is checked, and why these thresholds (every one a ``[checks]`` key; 0 turns it off):

* ``min_activated`` (default 0.95): the share of the tissue's nodes (tissue.label_file's tissue, else the box)
  that activated. A healthy wave from one stimulus activates all of it; 5 % is left for nodes a stimulus region
  or an obstacle may isolate.
* the far side: the activated node farthest from where activation began is nearer than 90 % of the farthest
  tissue node (the wave stopped part way, even where most nodes activated).
* ``min_velocity`` (default 0.1 m/s): the apparent conduction velocity, the median over activated nodes of
  (straight-line distance from the first-activated nodes) / (their activation delay). Healthy ventricular
  myocardium conducts at 0.2-0.7 m/s along and across fibres; a straight line is never longer than the path, so
  the apparent velocity is a lower bound of the real one; below 0.1 m/s, the grid is too coarse (discretisation
  slows conduction and then blocks it: Niederer et al. 2011) or the tissue does not conduct.
* ``max_qrs`` (default 120 ms; runs with ``[ecg]`` only): the QRS duration, taken as the total activation time of
  the tissue (last minus first activation), the standard simulation proxy. Above 120 ms a human QRS is a
  bundle-branch block; a model heart paced from one point without a Purkinje network is expected to exceed it,
  and the line says so.
* every probe whose node never activated.

A run with no stimulus (no node activated at all) gets one line saying so, not one per check.
"""

from __future__ import annotations

import numpy as np

# The [checks] keys' defaults (cardiosim.config.Checks declares them from here; a result file without them, from
# before they existed, is checked with these).
DEFAULTS = {"min_activated": 0.95, "min_velocity": 0.1, "max_qrs": 120.0}


class Limits:
    """The [checks] limits, as cardiosim.config.Checks holds them, for reading a result file without the config
    module (inspect and plot run without MPI)."""

    def __init__(self, **given):
        for k, v in {**DEFAULTS, **given}.items():
            setattr(self, k, float(v))


# The activation delay below which a node counts as a first-activated one (ms): a stimulus region activates within
# a fraction of a millisecond.
FIRST_WINDOW_MS = 0.5
# Nodes nearer than this many grid spacings to the first-activated ones are left out of the apparent velocity:
# there the delay is the stimulus's and the membrane's, not conduction.
NEAR_SPACINGS = 5
# At most this many nodes enter the distance computation (a random, fixed subset on larger grids).
MAX_NODES = 400_000


def positions(axes, index: np.ndarray) -> np.ndarray:
    """Coordinates (cm, x first) of flat natural-order node indices, for the grid of ``axes`` (x, y, z arrays)."""
    shape = tuple(len(a) for a in reversed(axes))
    idx = np.unravel_index(index, shape)            # (z,) (y,) x
    return np.stack([axes[d][idx[len(axes) - 1 - d]] for d in range(len(axes))], axis=1)


def findings(activation: np.ndarray, axes, tissue: np.ndarray | None, limits, probes: dict | None = None,
             has_ecg: bool = False) -> list[str]:
    """The checks' lines for an activation map (ms, NaN: not activated; natural shape ([nz,] [ny,] nx)) on the grid
    of ``axes`` (cm); ``tissue``: the tissue nodes (bool, same shape) or None for every node; ``limits``: the
    ``[checks]`` section (min_activated, min_velocity in m/s, max_qrs in ms); ``probes``: {name: activation time of
    the probe's node (ms, NaN: none)}."""
    act = np.asarray(activation, dtype=float).ravel()
    inside = np.ones(act.size, bool) if tissue is None else np.asarray(tissue, bool).ravel()
    n_tissue = int(inside.sum())
    on = inside & np.isfinite(act)
    n_on = int(on.sum())
    if n_tissue == 0:
        return []
    if n_on == 0:
        return ["no tissue node activated (no stimulus, or one too weak or too short to excite)"]
    out = []
    share = n_on / n_tissue
    if limits.min_activated > 0 and share < limits.min_activated:
        out.append(f"{n_on} of {n_tissue} tissue nodes activated ({100 * share:.1f} %, below checks.min_activated "
                   f"= {100 * limits.min_activated:g} %): the wave did not cross the tissue (a grid too coarse for "
                   f"these conductivities, a run too short, or block)")
    h = min(float(a[1] - a[0]) for a in axes if len(a) > 1) if any(len(a) > 1 for a in axes) else 1.0
    rng = np.random.default_rng(0)
    t0 = float(np.nanmin(act[on]))
    first = np.flatnonzero(on & (act <= t0 + FIRST_WINDOW_MS))
    later = np.flatnonzero(on & (act > t0 + FIRST_WINDOW_MS))
    tissue_idx = np.flatnonzero(inside)
    subset = [rng.choice(i, MAX_NODES, replace=False) if i.size > MAX_NODES else i
              for i in (first, later, tissue_idx)]
    from scipy.spatial import cKDTree
    tree = cKDTree(positions(axes, subset[0]))
    d_tissue = tree.query(positions(axes, subset[2]))[0]
    d_on = tree.query(positions(axes, subset[1]))[0] if subset[1].size else np.zeros(0)
    far_tissue = float(d_tissue.max()) if d_tissue.size else 0.0
    far_on = float(d_on.max()) if d_on.size else 0.0
    if far_tissue > 2 * h and far_on < 0.9 * far_tissue:
        out.append(f"the wave did not reach the far side: activated nodes reach {far_on:.3g} cm from where "
                   f"activation began, the tissue extends to {far_tissue:.3g} cm")
    delay = act[subset[1]] - t0
    use = d_on > NEAR_SPACINGS * h
    if limits.min_velocity > 0 and np.count_nonzero(use) >= 10:
        v = float(np.median(d_on[use] / delay[use])) * 10.0          # cm/ms -> m/s
        if v < limits.min_velocity:
            out.append(f"apparent conduction velocity {v:.3g} m/s (median of straight-line distance / activation "
                       f"delay), below checks.min_velocity = {limits.min_velocity:g} m/s; healthy myocardium "
                       f"conducts at 0.2-0.7 m/s: the grid is likely too coarse (spacing {h:g} cm)")
    total = float(np.nanmax(act[on]) - t0)
    if has_ecg and limits.max_qrs > 0 and total > limits.max_qrs:
        out.append(f"QRS {total:.4g} ms (total activation time of the tissue) is wider than checks.max_qrs = "
                   f"{limits.max_qrs:g} ms (a human QRS above 120 ms is a bundle-branch block; a heart paced from "
                   f"one site without a Purkinje network is expected to be wider)")
    for name, t in (probes or {}).items():
        if not np.isfinite(t):
            out.append(f"probe {name}: its node never activated")
    return out


def probe_activation(activation: np.ndarray, axes, node_positions: dict) -> dict:
    """{probe: activation time at its node (ms)} from the map and the probes' node positions (cm)."""
    out = {}
    for name, pos in node_positions.items():
        idx = tuple(int(np.argmin(np.abs(axes[d] - x))) for d, x in enumerate(pos))[::-1]
        out[name] = float(activation[idx])
    return out


def from_results(r) -> list[str] | None:
    """The checks of a result file (cardiosim.output.results.Results) with its run's [checks] limits (the defaults where
    the file predates them); None where the file has no activation map (the run did not finish)."""
    if "activation_time" not in r.maps:
        return None
    act = r.map("activation_time")
    tissue = r.map("tissue") > 0 if "tissue" in r.maps else None
    limits = r.checks_limits()
    probes = probe_activation(act, r.axes, {n: r.probe(n)["node_position"] for n in r.probes})
    return findings(act, r.axes, tissue, limits, probes, has_ecg=bool(r.ecg))

"""Quantities derived from traces: activation times and conduction velocity.

Activation time: the first upward crossing of a threshold (default 0 mV, as in the Niederer benchmark),
linearly interpolated between samples; NaN where the trace never crosses.
"""

from __future__ import annotations

import numpy as np


def activation_time(t: np.ndarray, v: np.ndarray, threshold: float = 0.0) -> float:
    """First upward crossing of ``threshold`` by the trace v(t), interpolated; NaN if none (ms, like t)."""
    v = np.asarray(v)
    above = v >= threshold
    if not above.any():
        return float("nan")
    i = int(np.argmax(above))
    if i == 0:
        return float(t[0])
    v0, v1 = v[i - 1], v[i]
    return float(t[i - 1] + (threshold - v0) / (v1 - v0) * (t[i] - t[i - 1]))


def conduction_velocity(x0: float, t0: float, x1: float, t1: float) -> float:
    """Speed between two activation points, in the units given (cm/ms ×10 = m/s)."""
    return abs(x1 - x0) / (t1 - t0)


class ActivationMap:
    """Per-node activation time, updated every PDE step: the first upward crossing of ``threshold`` (mV),
    linearly interpolated within the step; NaN until the node activates. A node above threshold at t = 0
    counts as activated at 0."""

    def __init__(self, v0: np.ndarray, threshold: float):
        self.threshold = threshold
        self.time = np.where(v0 >= threshold, 0.0, np.nan)
        self.prev = v0.copy()

    def update(self, t0: float, t1: float, v: np.ndarray) -> None:
        thr, prev = self.threshold, self.prev
        new = np.isnan(self.time) & (prev < thr) & (v >= thr)
        if new.any():
            frac = (thr - prev[new]) / (v[new] - prev[new])
            self.time[new] = t0 + frac * (t1 - t0)
        prev[:] = v

    # A run's accumulators (this one, and any other map computed during the run) are saved in checkpoints
    # through these two methods: a dict of per-node arrays whose last axis is this rank's owned nodes (PETSc local
    # order), and plain numbers. The checkpoint stores the arrays in natural order, so a restart may use another
    # number of ranks.
    def state(self) -> dict:
        return {"time": self.time, "prev": self.prev}

    def load_state(self, state: dict) -> None:
        self.time[:] = state["time"]
        self.prev[:] = state["prev"]


def sample(field: np.ndarray, spacing, point) -> float:
    """Multilinear interpolation of a nodal field (natural shape [z,] [y,] x) at ``point`` (cm, x first).
    NaN if any contributing node is NaN."""
    idx, weights = [], []
    for d, x in enumerate(point):
        n = field.shape[field.ndim - 1 - d]
        s = min(max(x / spacing[d], 0.0), n - 1.0)
        i0 = min(int(np.floor(s)), n - 2) if n > 1 else 0
        f = s - i0
        idx.append((i0, min(i0 + 1, n - 1)))
        weights.append((1.0 - f, f))
    total = 0.0
    for corner in np.ndindex(*(2,) * len(point)):
        w = np.prod([weights[d][c] for d, c in enumerate(corner)])
        if w == 0.0:
            continue
        node = tuple(idx[d][c] for d, c in reversed(list(enumerate(corner))))
        total += w * field[node]
    return float(total)

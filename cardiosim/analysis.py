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

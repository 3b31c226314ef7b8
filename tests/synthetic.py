"""Result files made without a run: the layout of docs/user/output-format.md (format cardiosim-2), with given
snapshots of Vm, for the tests of what reads them (movies, the arrhythmia analysis)."""

from __future__ import annotations

import json

import h5py
import numpy as np


def write_result(path, t, vm, spacing: float, tissue=None, name: str = "synthetic"):
    """A finished run's file: snapshots ``vm`` (time, [z,] [y,] x; mV) at ``t`` (ms) on a grid of ``spacing`` cm
    from 0, ``tissue`` (bool, the grid's shape) as /maps/tissue."""
    vm = np.asarray(vm, dtype=float)
    shape = vm.shape[1:][::-1]                                  # x first
    with h5py.File(path, "w") as f:
        f.attrs.update(format="cardiosim-2", status="finished", config_name=name, equations="monodomain",
                       units=json.dumps({"Vm": "mV", "time": "ms", "length": "cm"}))
        g = f.create_group("grid")
        g.attrs.update(dim=len(shape), shape=shape, spacing=[spacing] * len(shape),
                       size=[(n - 1) * spacing for n in shape], stencil="star")
        for axis, n in zip("xyz", shape):
            g[axis] = np.arange(n) * spacing
        f["fields/time"] = np.asarray(t, dtype=float)
        f["fields/Vm"] = vm
        f["fields/Vm"].attrs["units"] = "mV"
        if tissue is not None:
            f["maps/tissue"] = np.asarray(tissue, dtype=float)
    return path


def spiral(x, y, t, centre, omega: float, pitch: float = 2.0, sign: int = 1):
    """The phase (rad) of an Archimedean spiral turning rigidly about ``centre`` (cm; a function of t for a moving
    tip): atan2(y - y0, x - x0) - pitch r - omega t (omega rad/ms, pitch rad/cm), ``sign`` -1 its mirror image;
    shape (time, y, x)."""
    X, Y = np.meshgrid(x, y)
    x0, y0 = centre(np.asarray(t, float))
    dx, dy = X[None] - np.reshape(x0, (-1, 1, 1)), sign * (Y[None] - np.reshape(y0, (-1, 1, 1)))
    return np.arctan2(dy, dx) - pitch * np.hypot(dx, dy) - omega * np.reshape(t, (-1, 1, 1))


def to_mv(phase):
    """A phase as Vm: -85 mV at rest to 25 mV at the peak, cos(phase) between."""
    return -85.0 + 110.0 * (1.0 + np.cos(phase)) / 2.0

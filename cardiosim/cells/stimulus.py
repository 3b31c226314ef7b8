"""Stimuli: where (a region of tissue), when (a pulse train) and how strong.

The timing rule is shared by every backend (NumPy, native C, CUDA), so it lives in one place,
:func:`Protocol.active`, and the C/CUDA code follows it literally:

    active(t)  <=>  t >= start  and  (count == 0 or n < count)  and  (t - start) - n*period < duration,
                    with n = floor((t - start) / period)   (n = 0 when period == 0: one pulse)

Amplitudes inside the cell models are currents per unit capacitance, µA/µF (= pA/pF), negative depolarising.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Protocol:
    """A pulse train. Times in ms. ``count == 0`` means unlimited; ``period == 0`` means a single pulse."""

    start: float
    duration: float
    period: float = 0.0
    count: int = 1

    def pulse_index(self, t: float) -> int:
        if self.period <= 0.0:
            return 0
        return int(math.floor((t - self.start) / self.period))

    def active(self, t: float) -> bool:
        if t < self.start:
            return False
        n = self.pulse_index(t)
        if self.count and n >= self.count:
            return False
        return (t - self.start) - n * self.period < self.duration

    def onsets(self, until: float) -> list[float]:
        """Start times of the pulses that begin before ``until``."""
        out, n = [], 0
        while True:
            t = self.start + n * self.period
            if t >= until or (self.count and n >= self.count):
                return out
            out.append(t)
            if self.period <= 0.0:
                return out
            n += 1


def kernel_layout(protocols, amps, n_cells: int) -> tuple[np.ndarray, np.ndarray]:
    """Pulse trains and currents in the layout the C/CUDA kernels read: proto = (start, duration, period, count)
    per protocol, flattened; amp[p, c] (pA/pF), C-contiguous. ``amps`` is (n_protocols, n_cells) or one number
    per protocol for all cells."""
    n_p = len(protocols)
    proto = np.array([[p.start, p.duration, p.period, p.count] for p in protocols], dtype=np.float64).reshape(-1)
    a = np.asarray(amps, dtype=np.float64)
    if a.ndim <= 1:
        a = np.broadcast_to(a.reshape(-1, 1), (n_p, n_cells))
    if a.shape != (n_p, n_cells):
        raise ValueError(f"amps must have shape ({n_p}, {n_cells}), got {np.shape(amps)}")
    return proto, np.ascontiguousarray(a)


@dataclass
class TissueStimuli:
    """The configured stimuli on this rank's cells: a protocol each and a per-cell current (µA/µF).

    ``amplitudes[p, c]`` is the current of protocol p at local cell c, zero outside its region. Currents per
    membrane area (µA/cm²) are divided by Cm, currents per volume (µA/cm³) by χ·Cm. ``inside[p, c]`` says
    whether cell c is in the region of p (a stimulus of zero current still has a region).
    """

    protocols: list
    amplitudes: np.ndarray
    names: list
    inside: np.ndarray | None = None

    def subset(self, cells: np.ndarray) -> "TissueStimuli":
        """The same stimuli on some of the cells (indices into this rank's cells)."""
        inside = None if self.inside is None else self.inside[:, cells]
        return TissueStimuli(self.protocols, np.ascontiguousarray(self.amplitudes[:, cells]), self.names, inside)

    @classmethod
    def from_config(cls, cfg, grid, coords):
        protocols, amps, names, regions = [], [], [], []
        Cm, chi = cfg.tissue.Cm, cfg.tissue.chi
        # Non-conducting volumes of the microscopic model (cardiosim.tissue.microscopic) are never stimulated.
        unexcitable = getattr(grid, "unexcitable", None)
        for i, st in enumerate(cfg.stimulus):
            per_cap = (st.current_density / Cm if st.current_density is not None
                       else st.current_per_volume / (chi * Cm))
            protocols.append(Protocol(st.start, st.duration, st.period, st.count))
            inside = grid.in_region(st, coords)
            if unexcitable is not None:
                inside &= ~unexcitable
            amps.append(np.where(inside, per_cap, 0.0))
            regions.append(inside)
            names.append(st.name or f"stimulus[{i}]")
        amplitudes = np.array(amps) if amps else np.zeros((0, len(coords)))
        return cls(protocols, amplitudes, names, np.array(regions, dtype=bool).reshape(amplitudes.shape))

    def current(self, t: float):
        """Stimulus current (µA/µF) of every local cell at time t: a scalar 0.0 when nothing is active."""
        out = 0.0
        for p, amp in zip(self.protocols, self.amplitudes):
            if p.active(t):
                out = out + amp
        return out

    def empty_regions(self, comm) -> list:
        """Names of stimuli whose region holds no node on any rank (a config mistake worth one line)."""
        from mpi4py import MPI
        inside = self.amplitudes != 0 if self.inside is None else self.inside
        local = inside.sum(axis=1, dtype=np.int64)
        counts = comm.allreduce(local, op=MPI.SUM) if len(local) else []
        return [n for n, c in zip(self.names, counts) if c == 0]


def ode_step(s) -> tuple[float, str]:
    """The ODE substep (ms) the stimuli are sampled at, and how to say it."""
    if s.splitting == "strang":
        half_k = math.ceil(s.ode_substeps / 2)
        return s.dt / (2 * half_k), f"the ODE step simulation.dt / (2·ceil(ode_substeps / 2))"
    return s.dt / s.ode_substeps, "the ODE step simulation.dt / simulation.ode_substeps"

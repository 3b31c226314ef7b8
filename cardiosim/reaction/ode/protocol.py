"""What the reaction step needs from a cell backend (cardiosim.reaction): one Protocol, whatever the placement.

A backend integrates this rank's cells over a PDE step with Vm taken from, and given back to, the PDE's PETSc Vec
(``advance_vec``): where the states live (host, a GPU, a group owner's GPU) and how Vm reaches them is its own
business. Host backends (numpy, native, the CUDA backend of the grouped/per-rank placements) keep their states in
``y`` and go through :class:`OnHost`, which moves Vm between the Vec's host array and ``y[0]``; the resident
backend (cardiosim.reaction.ode.resident) reads and writes Vm in the Vec's device memory.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class CellBackend(Protocol):
    name: str
    y: np.ndarray            # host copy of the states (n_states, n_cells); current after download()
    failure: str | None      # the first bad state seen (recorded; the reaction step's collective check raises it)
    device: int | None       # the GPU ordinal the states are on, None on the host

    def advance_vec(self, V, t0: float, dt: float, k: int) -> None:
        """k substeps of dt ms from t0 ms; Vm in and out through the PETSc Vec ``V`` (this rank's cells)."""

    def download(self) -> None:
        """Make ``y`` current (collective in grouped placement)."""

    def upload(self) -> None:
        """Replace the states wherever they live by ``y`` (a restart; collective in grouped placement)."""


class Wrapper:
    """A backend around another (``inner``): its name, failure and device are the inner one's."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name

    @property
    def failure(self) -> str | None:
        return self.inner.failure

    @property
    def device(self) -> int | None:
        return getattr(self.inner, "device", None)


class OnHost(Wrapper):
    """A backend whose states (or at least Vm, row 0) are in a host array ``y``: Vm crosses from the Vec's host
    array into ``y[0]`` before the substeps and back after (for a GPU Vec that would be a copy each way: the
    resident placement does not use this)."""

    def __init__(self, inner, stimuli):
        super().__init__(inner)
        self.stimuli = stimuli

    @property
    def y(self) -> np.ndarray:
        return self.inner.y

    def advance_vec(self, V, t0: float, dt: float, k: int) -> None:
        v = V.getArray()
        y = self.inner.y
        y[0] = v
        self.inner.advance(t0, dt, k, self.stimuli)
        v[:] = y[0]

    def download(self) -> None:
        self.inner.download()

    def upload(self) -> None:
        self.inner.upload()


class TissueCells(Wrapper):
    """Cells at the tissue nodes of a masked grid only (cardiosim.mask): ``inner`` (any backend of this protocol)
    integrates the states of the nodes ``at`` (indices into this rank's nodes); the other nodes have no cell, their
    Vm is left as it is and their states as they started (a checkpoint keeps them so, in its usual layout). Vm
    crosses through a sequential Vec of the tissue nodes."""

    def __init__(self, inner, at: np.ndarray, states: np.ndarray):
        from petsc4py import PETSc
        super().__init__(inner)
        self.at = at
        self.y = states                                   # every node's states; tissue columns current after download
        self.v = PETSc.Vec().createSeq(len(at), comm=PETSc.COMM_SELF)

    def advance_vec(self, V, t0: float, dt: float, k: int) -> None:
        v = V.getArray()
        self.v.getArray()[:] = v[self.at]
        self.inner.advance_vec(self.v, t0, dt, k)
        v[self.at] = self.v.getArray(readonly=True)

    def download(self) -> None:
        self.inner.download()
        self.y[:, self.at] = self.inner.y

    def upload(self) -> None:
        self.inner.y[:] = self.y[:, self.at]
        self.inner.upload()

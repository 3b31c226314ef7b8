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


def launch(backend, V, t0: float, dt: float, k: int):
    """Start ``backend``'s k substeps of dt ms from t0 ms; returns the call that ends them. A backend whose kernels
    run on after the launch returns (``launch_vec`` and ``finish_vec``: the resident placement's) leaves the host
    free until then, and the end reads its error flag; any other has finished when launch returns."""
    start = getattr(backend, "launch_vec", None)
    if start is None:
        backend.advance_vec(V, t0, dt, k)
        return _finished
    start(V, t0, dt, k)
    return backend.finish_vec


def _finished() -> None:
    pass


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


class Pieces:
    """This rank's cells in pieces, each integrated by its own backend: the tissue nodes of a masked grid
    (cardiosim.domain.mask; the other nodes have no cell), and the nodes of each cell region (``cell.regions``: another
    variant or other parameters of the model). ``pieces`` is a list of (backend, at): ``at`` the indices into this
    rank's nodes of the backend's cells, in its column order. A node in no piece keeps its Vm and its states as they
    started (a checkpoint keeps them so, in its usual layout).

    Vm crosses between the Vec and a piece through a sequential Vec of its nodes, unless the backend reads and writes
    the Vec at ``at`` itself (``gathers``: the resident placement, on the device)."""

    def __init__(self, pieces: list, states: np.ndarray):
        from petsc4py import PETSc
        self.pieces = pieces
        self.name = pieces[0][0].name
        self.y = states                                   # every node's states; piece columns current after download
        self._ends: list = []                             # launch_vec's pieces still to finish
        self.seq = [None if getattr(b, "gathers", False) else PETSc.Vec().createSeq(len(at), comm=PETSc.COMM_SELF)
                    for b, at in pieces]

    @property
    def failure(self) -> str | None:
        return next((b.failure for b, _ in self.pieces if b.failure), None)

    @property
    def device(self) -> int | None:
        return getattr(self.pieces[0][0], "device", None)

    def advance_vec(self, V, t0: float, dt: float, k: int) -> None:
        self.launch_vec(V, t0, dt, k)
        self.finish_vec()

    def launch_vec(self, V, t0: float, dt: float, k: int) -> None:
        """Every piece started (:func:`launch`): the resident pieces' kernels queued one after another, their error
        flags read by :meth:`finish_vec` (one wait for all, not one per piece)."""
        self._ends = []
        for (backend, at), seq in zip(self.pieces, self.seq):
            if seq is None:
                self._ends.append(launch(backend, V, t0, dt, k))
                continue
            v = V.getArray()
            seq.getArray()[:] = v[at]
            backend.advance_vec(seq, t0, dt, k)
            v[at] = seq.getArray(readonly=True)

    def finish_vec(self) -> None:
        for end in self._ends:
            end()
        self._ends = []

    def download(self) -> None:
        for backend, at in self.pieces:
            backend.download()
            self.y[:, at] = backend.y

    def upload(self) -> None:
        for backend, at in self.pieces:
            backend.y[:] = self.y[:, at]
            backend.upload()

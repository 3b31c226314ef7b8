"""Several cell models in one run: one cell population per model (``cell.regions`` may name a ``model`` other than
``cell.model``).

A population is the cells of one model on this rank: its own state array (n_states of that model, one column per
local node, like the one-model run's), its own backend(s) built by the placement (ode.protocol.Pieces: one piece
per region of that model, each its own kernel and parameters), and the local nodes it owns. The populations own
disjoint nodes, so they are integrated one after another on the one Vm vector: each reads and writes Vm at its
own nodes only. Columns of nodes a population does not own hold that model's initial state and never change (as
the nodes outside a masked tissue do in a one-model run), so that every population's array has the grid's layout
and is saved, gathered and restored like the one-model run's (cardiosim.output.checkpoint).

Why a composition and not one array: the models' states differ in number, names and units, and each backend
(NumPy, native C, CUDA, grouped, resident) already integrates one model's structure of arrays.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Population:
    """The cells of one model on this rank. ``model``: the model of its cells outside any region of other
    parameters (for the state names and units); ``name``: the config's name for it (cell.model or a region's
    model); ``backend``: integrates its cells (y: its state array); ``owns``: the local nodes that are its cells
    (a boolean mask)."""

    name: str
    model: object
    backend: object
    owns: np.ndarray

    @property
    def states(self) -> np.ndarray:
        return self.backend.y


class Populations:
    """Several populations as one cell backend (ode.protocol.CellBackend): advanced one after another, each on its
    own nodes of the Vec. Every rank holds every population, in the same order (the grouped placement's
    collectives inside each must match), even where one has no cell on a rank."""

    def __init__(self, populations: list[Population]):
        self.populations = populations
        self.name = " + ".join(p.backend.name for p in populations)

    @property
    def y(self) -> np.ndarray:          # the first population's (cell.model's) states, as a one-model run's
        return self.populations[0].states

    @property
    def failure(self) -> str | None:
        return next((p.backend.failure for p in self.populations if p.backend.failure), None)

    @property
    def device(self) -> int | None:
        return getattr(self.populations[0].backend, "device", None)

    def advance_vec(self, V, t0: float, dt: float, k: int) -> None:
        for p in self.populations:
            p.backend.advance_vec(V, t0, dt, k)

    def download(self) -> None:
        for p in self.populations:
            p.backend.download()

    def upload(self) -> None:
        for p in self.populations:
            p.backend.upload()

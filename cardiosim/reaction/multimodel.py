"""Several cell models in one run (``cell.regions`` may name a ``model`` other than ``cell.model``): the cells of
each model are a ModelCells, and a MultiModelBackend advances them all as one cell backend.

A ModelCells is the cells of one model on this rank: its own state array (n_states of that model, one column per
local node, like the one-model run's), its own backend(s) built by the placement (ode.protocol.Pieces: one piece
per region of that model, each its own kernel and parameters), and the local nodes it owns. The models' cells own
disjoint nodes, so they are integrated one after another on the one Vm vector: each reads and writes Vm at its
own nodes only. Columns of nodes a model's cells do not own hold that model's initial state and never change (as
the nodes outside a masked tissue do in a one-model run), so that every model's array has the grid's layout and is
saved, gathered and restored like the one-model run's (cardiosim.output.checkpoint).

Why a composition and not one array: the models' states differ in number, names and units, and each backend
(NumPy, native C, CUDA, grouped, resident) already integrates one model's structure of arrays.

The names: "population" in cardiosim is cardiosim.single_cell.population's (many single cells, each with its own
parameters: ``cardiosim cell --population``), and a "group" is the grouped placement's (ranks whose cells one rank
integrates); these classes are neither, so they are named for what they hold: the cells of one model, and the
backend of several models. The checkpoint's datasets keep their names (``populations/<i>``): a file format does
not follow the code's names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cardiosim.reaction.ode.protocol import launch


@dataclass
class ModelCells:
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


class MultiModelBackend:
    """The cells of several models as one cell backend (ode.protocol.CellBackend): each model's advanced one after
    another, each on its own nodes of the Vec. Every rank holds every model's cells, in the same order (the grouped
    placement's collectives inside each must match), even where a model has no cell on a rank."""

    def __init__(self, model_cells: list[ModelCells]):
        self.model_cells = model_cells
        self.name = " + ".join(mc.backend.name for mc in model_cells)
        self._ends: list = []

    @property
    def y(self) -> np.ndarray:          # the first model's (cell.model's) states, as a one-model run's
        return self.model_cells[0].states

    @property
    def failure(self) -> str | None:
        return next((mc.backend.failure for mc in self.model_cells if mc.backend.failure), None)

    @property
    def device(self) -> int | None:
        return getattr(self.model_cells[0].backend, "device", None)

    def advance_vec(self, V, t0: float, dt: float, k: int) -> None:
        self.launch_vec(V, t0, dt, k)
        self.finish_vec()

    def launch_vec(self, V, t0: float, dt: float, k: int) -> None:
        self._ends = [launch(mc.backend, V, t0, dt, k) for mc in self.model_cells]

    def finish_vec(self) -> None:
        for end in self._ends:
            end()
        self._ends = []

    def download(self) -> None:
        for mc in self.model_cells:
            mc.backend.download()

    def upload(self) -> None:
        for mc in self.model_cells:
            mc.backend.upload()

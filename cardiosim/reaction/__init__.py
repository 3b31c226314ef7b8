"""The reaction step: every cell integrates its model over one PDE step with k substeps (Forward Euler, or
Rush-Larsen for models with gates: cell.integrator).

The cell states of this rank's nodes live in the backend (ode.protocol.CellBackend), as a structure of
arrays (n_states, n_cells); V (state 0) comes from the PDE's Vec before each step and goes back after. Where the
states are integrated (on this rank, on a GPU, by the owner of this rank's group, or on the GPU that holds the
Vec: resident) is the placement's choice (cardiosim.reaction.placement.MODE) and the backend's business.
"""

from __future__ import annotations

import math

import numpy as np
from mpi4py import MPI

from cardiosim import cells
from cardiosim.cells import paced_state, stability
from cardiosim.runtime import log
from cardiosim.runtime.errors import SimulationError
from cardiosim.reaction.ode.numpy_backend import NumpyBackend
from cardiosim.reaction.ode.protocol import Pieces, launch
from cardiosim.reaction.placement import MODE, place
from cardiosim.reaction.multimodel import ModelCells, MultiModelBackend
from cardiosim.cells.stimulus import TissueStimuli, ode_step
from cardiosim.reaction.ode.cuda_tissue_backend import CudaTissueBackend
from cardiosim.reaction.ode.native_backend import NativeBackend


class Reaction:
    def __init__(self, cfg, grid, comm, timers=None):
        c = cfg.cell
        t = cfg.tissue
        self.cell = c
        self.comm = comm
        self.k = cfg.simulation.ode_substeps
        self.placement = place(c, comm)
        coords = grid.coords()
        self.stimuli = TissueStimuli.from_config(cfg, grid, coords)
        mode = MODE[self.placement.mode]

        def model(variant, parameters):
            m = cells.make(c.model, variant or None, parameters, tissue={"Cm": t.Cm, "chi": t.chi})
            if not c.scale:
                return m
            scaled = {**parameters, **{k: m.p[k] * f for k, f in c.scale.items()}}    # cell.scale: on top
            return cells.make(c.model, variant or None, scaled, tissue={"Cm": t.Cm, "chi": t.chi})

        paced = {}
        if c.initial_state:                # a paced single cell's state (cardiosim cell), then cell.initial
            paced = paced_state.read(c.initial_state, c.model, [s.name for s in cells.model_class(c.model).states])

        def initial(m, n, xyz):
            states = m.initial_state(n, xyz)
            for name, value in {**paced, **c.initial}.items():
                states[m.state_index(name)] = value
            return states

        self.model = model(c.variant, c.parameters)
        states = initial(self.model, grid.n_local, coords)
        # The mode builds the backend (placement.MODE); every backend follows ode.protocol.CellBackend. Cells of
        # another variant or with other parameters (cell.regions), and a masked grid (tissue.label_file, cells at
        # the tissue nodes only), make pieces, each with its own backend. Every rank builds every piece, in the
        # same order, so that the grouped placement's collectives match (a piece may have no cell on a rank).
        # The cells of another model (cell.regions[].model) are a ModelCells of their own: its own state array,
        # pieces and backends (cardiosim.reaction.multimodel).
        self.models = [(self.model, slice(None), 0)]   # each piece's model, its nodes, its index in model_cells
        names = c.models()
        if not c.regions and grid.mask is None:
            self.backend = mode.backend(self, self.model, states, self.stimuli, coords, timers)
            self.model_cells = [ModelCells(c.model, self.model, self.backend, np.ones(grid.n_local, bool))]
        else:
            self.models = []
            which = np.zeros(grid.n_local, dtype=np.int64)           # 0: the base model; i + 1: cell.regions[i]
            for i, r in enumerate(c.regions):
                which[grid.in_region(r, coords)] = i + 1
            if grid.mask is not None:
                which[grid.mask.outside()] = -1                      # no cell outside the tissue
            tissue = {"Cm": t.Cm, "chi": t.chi}
            bases = [self.model, *(cells.make(n, None, {}, tissue=tissue) for n in names[1:])]
            arrays = [states, *(b.initial_state(grid.n_local, coords) for b in bases[1:])]
            pieces = [[] for _ in names]
            for i, r in enumerate([None, *c.regions]):
                p = names.index(c.model_of(r))
                if p == 0:
                    m = self.model if r is None else model(r.variant or c.variant, {**c.parameters, **r.parameters})
                else:                  # another model: the region's own variant and parameters, its initial state
                    m = cells.make(names[p], r.variant or None, r.parameters, tissue=tissue)
                at = np.flatnonzero(which == i)
                if r is not None:
                    arrays[p][:, at] = initial(m, len(at), coords[at]) if p == 0 else m.initial_state(len(at),
                                                                                                      coords[at])
                sub = np.ascontiguousarray(arrays[p][:, at])
                pieces[p].append((mode.backend(self, m, sub, self.stimuli.subset(at), coords[at], timers, at=at), at))
                self.models.append((m, at, p))
            owned = [np.isin(which, [i for i, r in enumerate([None, *c.regions]) if c.model_of(r) == n])
                     for n in names]
            self.model_cells = [ModelCells(n, b, Pieces(ps, a), o)
                                for n, b, ps, a, o in zip(names, bases, pieces, arrays, owned)]
            self.backend = (self.model_cells[0].backend if len(names) == 1
                            else MultiModelBackend(self.model_cells))
        self.states = self.backend.y      # the backend's host copy (page-locked with CUDA); cell.model's cells
        self._warn_unstable_step(cfg)

    def _warn_unstable_step(self, cfg) -> None:
        """Warn where the ODE step is above a stability limit of cell.integrator for a model of the run
        (cardiosim.cells.stability): at set-up, before hours of stepping end in NaN. Every rank reaches the same
        lines; cardiosim.runtime.log prints rank 0's. Each distinct model (regions' parameters) is checked once."""
        s = cfg.simulation
        dt, what = ode_step(s)

        def substeps(limit: float) -> str:
            k = math.ceil(s.dt / limit * (1 - 1e-12))       # not one more for a quotient a rounding above whole
            if s.splitting == "strang":                        # the ODE step is dt / (2·ceil(k/2))
                k += k % 2
            return f"simulation.ode_substeps ≥ {max(k, 1)}"

        said, checked = set(), set()
        for m, _, _ in self.models:
            key = (type(m), m.variant, tuple(sorted(m.p.items())))
            if key in checked:
                continue
            checked.add(key)
            msg = stability.step_warning(m, self.cell.integrator, dt, option='cell.integrator = "{}"',
                                         step_is=what + " =", smaller=substeps)
            if msg and msg not in said:
                said.add(msg)
                log.warning(msg)

    def integrator(self, model, states, stimuli, coords, rows):
        """The backend that integrates ``states`` of ``model`` on this rank; ``rows`` cross between the host copy and
        a GPU."""
        which = self.placement.integrator
        if which == "native":
            return NativeBackend(model, states, stimuli, self.cell.integrator)
        if which == "cuda":
            return CudaTissueBackend(model, states, stimuli, self.placement.device, self.placement.kernel_comm,
                                     rows, self.cell.integrator, self.cell.kernel)
        return NumpyBackend(model, states, coords, self.cell.integrator)

    @property
    def vm(self) -> np.ndarray:
        """Vm at this rank's nodes, each from the model's cells that own it (the one-model run's: its states' row 0)."""
        if len(self.model_cells) == 1:
            return self.states[0]
        v = self.states[0].copy()
        for mc in self.model_cells[1:]:
            v[mc.owns] = mc.states[0][mc.owns]
        return v

    def advance(self, V, t: float, dt: float, k: int, meanwhile=None) -> None:
        """Integrate all cells from t to t + dt (ms) in k substeps; V (a PETSc Vec) in and out. ``meanwhile()``: host
        work that does not touch V or the cells, done while the resident placement's kernels run (after the
        substeps elsewhere)."""
        end = launch(self.backend, V, t, dt / k, k)
        if meanwhile is not None:
            meanwhile()
        end()

    def host_states(self) -> list[np.ndarray]:
        """Every cell state of this rank, current on the host: one array (n_states, n_local) per model
        (cell.model's first; cardiosim.reaction.multimodel), the arrays themselves, not copies (collective in
        grouped placement; the GPU backends keep them on the device)."""
        self.backend.download()
        return [mc.states for mc in self.model_cells]

    def intermediates(self, names: list[str], states: np.ndarray) -> dict[str, np.ndarray]:
        """{name: its value at each of this rank's nodes} for intermediates of a CellML model (currents, fluxes, ...),
        from the states given (host_states), each piece by its own model (regions' parameters). Computed without the
        stimulus (i_stim = 0): the recorded currents are the ionic ones. Nodes in no piece (outside masked tissue):
        NaN."""
        out = {n: np.full(states[0].shape[1], np.nan) for n in names}
        for model, at, p in self.models:
            if not hasattr(model, "values"):          # a built-in model: no intermediates
                continue
            vals = model.values(states[p][:, at], 0.0)
            for n in names:
                if n in vals:                         # several models: each gives its own (config checked)
                    out[n][at] = vals[n]
        return out

    def load_states(self, states: list[np.ndarray]) -> None:
        """Replace every cell state of this rank (a restart): one array per model, as host_states gives them,
        wherever the backends keep them (collective in grouped placement)."""
        for mc, s in zip(self.model_cells, states, strict=True):
            mc.states[:] = s
        self.backend.upload()

    def check(self, t: float, requests: int = 0, failure: str | None = None) -> int:
        """Stop every rank if any cell's state is non-finite or out of its range (collective). Every backend checks
        its own states (ranges included) and records the first failure; in grouped placement only the owner knows.
        ``failure``: another of this rank's, raised as theirs are (the Purkinje network's cells, on rank 0).

        ``requests`` is a bit mask of other per-step decisions (a checkpoint asked for by a signal) that rides on
        the same collective, so that a step costs one; returns its OR over all ranks."""
        msg = self.backend.failure or failure
        flags = self.comm.allreduce(int(msg is not None) | requests << 1, op=MPI.BOR)  # one small collective
        if flags & 1:                                                                   # messages only on failure
            first = next(m for m in self.comm.allgather(msg) if m)
            raise SimulationError(first)
        return flags >> 1

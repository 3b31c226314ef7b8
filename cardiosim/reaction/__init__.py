"""The reaction step: every cell integrates its model over one PDE step with k substeps (Forward Euler, or
Rush-Larsen for models with gates: cell.integrator).

The cell states of this rank's nodes live in the backend (ode.protocol.CellBackend), as a structure of
arrays (n_states, n_cells); V (state 0) comes from the PDE's Vec before each step and goes back after. Where the
states are integrated (on this rank, on a GPU, by the owner of this rank's group, or on the GPU that holds the
Vec: resident) is the placement's choice (cardiosim.reaction.placement.MODE) and the backend's business.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from .. import cells
from ..errors import SimulationError
from .ode.numpy_backend import NumpyBackend
from .ode.protocol import TissueCells
from .placement import MODE, place
from ..stimulus import TissueStimuli


class Reaction:
    def __init__(self, cfg, grid, comm, timers=None):
        c = cfg.cell
        t = cfg.tissue
        self.model = cells.make(c.model, c.variant or None, c.parameters, tissue={"Cm": t.Cm, "chi": t.chi})
        coords = grid.coords()
        states = self.model.initial_state(grid.n_local, coords)
        for name, value in c.initial.items():
            states[self.model.state_index(name)] = value
        self.stimuli = TissueStimuli.from_config(cfg, grid, coords)
        self.cell = c
        self.placement = place(c, comm)
        # The mode builds the backend (placement.MODE); every backend follows ode.protocol.CellBackend. On a masked
        # grid (tissue.label_file) there are cells at the tissue nodes only.
        mode = MODE[self.placement.mode]
        if grid.mask is None:
            self.backend = mode.backend(self, states, self.stimuli, coords, timers)
        else:
            at = np.flatnonzero(~grid.mask.outside())
            inner = mode.backend(self, np.ascontiguousarray(states[:, at]), self.stimuli.subset(at), coords[at],
                                 timers)
            self.backend = TissueCells(inner, at, states)
        self.states = self.backend.y      # the backend's host copy (page-locked with CUDA)
        self.k = cfg.simulation.ode_substeps
        self.comm = comm

    def integrator(self, states, stimuli, coords, rows):
        """The backend that integrates ``states`` on this rank; ``rows`` cross between the host copy and a GPU."""
        which = self.placement.integrator
        if which == "native":
            from .ode.native_backend import NativeBackend
            return NativeBackend(self.model, states, stimuli, self.cell.integrator)
        if which == "cuda":
            from .ode.cuda_tissue_backend import CudaTissueBackend
            return CudaTissueBackend(self.model, states, stimuli, self.placement.device, self.placement.kernel_comm,
                                     rows, self.cell.integrator, self.cell.kernel)
        return NumpyBackend(self.model, states, coords, self.cell.integrator)

    @property
    def vm(self) -> np.ndarray:
        return self.states[0]

    def advance(self, V, t: float, dt: float, k: int) -> None:
        """Integrate all cells from t to t + dt (ms) in k substeps; V (a PETSc Vec) in and out."""
        self.backend.advance_vec(V, t, dt / k, k)

    def host_states(self) -> np.ndarray:
        """Every cell state of this rank, current on the host (collective in grouped placement; the GPU backends keep
        them on the device)."""
        self.backend.download()
        return self.states

    def load_states(self, states: np.ndarray) -> None:
        """Replace every cell state of this rank (a restart), wherever the backend keeps them (collective in grouped
        placement)."""
        self.states[:] = states
        self.backend.upload()

    def check(self, t: float, requests: int = 0) -> int:
        """Stop every rank if any cell's state is non-finite or out of its range (collective). Every backend checks
        its own states (ranges included) and records the first failure; in grouped placement only the owner knows.

        ``requests`` is a bit mask of other per-step decisions (a checkpoint asked for by a signal) that rides on
        the same collective, so that a step costs one; returns its OR over all ranks."""
        msg = self.backend.failure
        flags = self.comm.allreduce(int(msg is not None) | requests << 1, op=MPI.BOR)  # one small collective
        if flags & 1:                                                                   # messages only on failure
            first = next(m for m in self.comm.allgather(msg) if m)
            raise SimulationError(first)
        return flags >> 1

"""The reaction step: every cell integrates its model over one PDE step with k substeps (Forward Euler, or
Rush-Larsen for models with gates: cell.integrator).

The cell states of this rank's nodes live here, as a structure of arrays (n_states, n_cells); V (state 0) is
exchanged with the PDE's Vec before and after each step. Where the states are integrated (NumPy on this rank,
or a GPU owned by another rank of the node) is the backend's business.
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from . import cells
from .errors import SimulationError, UserError
from .ode.numpy_backend import NumpyBackend
from .stimulus import TissueStimuli


class Reaction:
    def __init__(self, cfg, grid, comm):
        c = cfg.cell
        t = cfg.tissue
        self.model = cells.make(c.model, c.variant or None, c.parameters, tissue={"Cm": t.Cm, "chi": t.chi})
        coords = grid.coords()
        self.states = self.model.initial_state(grid.n_local, coords)
        for name, value in c.initial.items():
            self.states[self.model.state_index(name)] = value
        self.stimuli = TissueStimuli.from_config(cfg, grid, coords)
        backend = c.backend
        if backend == "auto":
            backend = "native" if self.model.kernel_name else "numpy"
        if backend in ("native", "cuda") and not self.model.kernel_name:
            raise UserError(f"cell.backend: {self.model.name} has no C kernel; use 'numpy' (or 'auto')")
        if backend == "native":
            from .ode.native_backend import NativeBackend
            self.backend = NativeBackend(self.model, self.states, self.stimuli, c.integrator)
        elif backend == "cuda":
            from .ode.cuda_tissue_backend import CudaTissueBackend
            self.backend = CudaTissueBackend(self.model, self.states, self.stimuli, c.integrator, c.kernel)
        else:
            self.backend = NumpyBackend(self.model, self.states, c.integrator)
        self.k = cfg.simulation.ode_substeps
        self.comm = comm
        self.coords = coords

    @property
    def vm(self) -> np.ndarray:
        return self.states[0]

    def advance(self, V, t: float, dt: float, k: int) -> None:
        """Integrate all cells from t to t + dt (ms) in k substeps; V (a PETSc Vec) in and out."""
        v = V.getArray()
        self.states[0] = v
        self.backend.advance(t, dt / k, k, self.stimuli)
        v[:] = self.states[0]

    def host_states(self) -> np.ndarray:
        """Every cell state of this rank, current on the host (the CUDA backend keeps them on the GPU)."""
        self.backend.download()
        return self.states

    def load_states(self, states: np.ndarray) -> None:
        """Replace every cell state of this rank (a restart), wherever the backend keeps them."""
        self.states[:] = states
        self.backend.upload()

    def check(self, t: float, requests: int = 0) -> int:
        """Stop every rank if any cell's state is non-finite or out of its range (collective).

        ``requests`` is a bit mask of other per-step decisions (a checkpoint asked for by a signal) that rides on
        the same collective, so that a step costs one; returns its OR over all ranks."""
        # The compiled backends check every state themselves (ranges included) and keep only Vm current on the
        # host; the NumPy backend is checked here.
        msg = self.backend.failure
        bad = self.model.find_bad_state(self.states) if self.backend.name == "numpy" else None
        if msg is None and bad is not None:
            s, cidx = bad
            st = self.model.states[s]
            pos = ", ".join(f"{x:.4g}" for x in self.coords[cidx])
            msg = (f"cell state {st.name} = {self.states[s, cidx]:.6g} {st.unit} at ({pos}) cm, t = {t:.6g} ms is "
                   f"{'not finite' if not np.isfinite(self.states[s, cidx]) else 'outside its range'} "
                   f"[{st.lower:g}, {st.upper:g}]; the time step may be too large "
                   f"(simulation.dt / simulation.ode_substeps)")
        flags = self.comm.allreduce(int(msg is not None) | requests << 1, op=MPI.BOR)  # one small collective
        if flags & 1:                                                                   # messages only on failure
            first = next(m for m in self.comm.allgather(msg) if m)
            raise SimulationError(first)
        return flags >> 1

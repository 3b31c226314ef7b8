"""The NumPy reference backend: Forward Euler on this rank's cells, vectorised over cells.

It is the reference every other backend (native C, CUDA kernels) is checked against, and what CI runs.
"""

from __future__ import annotations

import numpy as np


class NumpyBackend:
    name = "numpy"

    def __init__(self, model, states: np.ndarray):
        self.model = model
        self.y = states                       # (n_states, n_cells), float64, owned by the caller
        self.work = np.empty_like(states)
        self.failure = None   # NumPy never stops mid-step; Reaction.check finds bad states

    def download(self) -> None:   # the states live on the host
        pass

    upload = download

    def advance(self, t0: float, dt: float, k: int, stimuli) -> None:
        """k Forward-Euler substeps of dt ms from t0, in place; the stimulus is evaluated at each substep."""
        for s in range(k):
            t = t0 + s * dt
            self.model.forward_euler(self.y, t, dt, stimuli.current(t), self.work)

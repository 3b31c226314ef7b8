"""The NumPy reference backend: Forward Euler on this rank's cells, vectorised over cells.

It is the reference every other backend (native C, CUDA kernels) is checked against, and what CI runs.
"""

from __future__ import annotations

import numpy as np


class NumpyBackend:
    name = "numpy"

    def __init__(self, model, states: np.ndarray, integrator: str = "forward-euler"):
        self.model = model
        # Rush-Larsen: the model's own step (gates exactly for frozen V, the rest Forward Euler), same signature
        self.step = model.rush_larsen if integrator == "rush-larsen" else model.forward_euler
        self.y = states                       # (n_states, n_cells), float64, owned by the caller
        self.work = np.empty_like(states)
        self.failure = None   # NumPy never stops mid-step; Reaction.check finds bad states

    def download(self) -> None:   # the states live on the host
        pass

    upload = download

    def advance(self, t0: float, dt: float, k: int, stimuli) -> None:
        """k substeps of dt ms from t0 (Forward Euler or Rush-Larsen), in place; the stimulus is evaluated at each substep."""
        for s in range(k):
            t = t0 + s * dt
            self.step(self.y, t, dt, stimuli.current(t), self.work)

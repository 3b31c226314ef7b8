"""The NumPy reference backend: this rank's cells stepped by Forward Euler, or by the model's own Rush–Larsen or
GRL1 step, vectorised over cells.

It is the reference every other backend (native C, CUDA kernels) is checked against, and what CI runs.
"""

from __future__ import annotations

import numpy as np


class NumpyBackend:
    name = "numpy"

    def __init__(self, model, states: np.ndarray, coords: np.ndarray, integrator: str = "forward-euler"):
        self.model = model
        # Rush-Larsen, GRL1: the model's own step (Rush-Larsen: gates exactly for frozen V, the rest Forward Euler),
        # with forward_euler's signature
        self.step = {"rush-larsen": getattr(model, "rush_larsen", None), "grl1": getattr(model, "grl1", None)}.get(
            integrator, model.forward_euler)
        if self.step is None:
            raise ValueError(f"cell model {model.name} has no {integrator} step")
        self.y = states                       # (n_states, n_cells), float64, owned by the caller
        self.coords = coords                  # (n_cells, dim) cm: to say where a state went bad
        self.work = np.empty_like(states)
        self.failure: str | None = None       # as the compiled backends: recorded, raised by the collective check

    def download(self) -> None:   # the states live on the host
        pass

    upload = download

    def advance(self, t0: float, dt: float, k: int, stimuli) -> None:
        """k substeps of dt ms from t0 (Forward Euler, Rush-Larsen or GRL1), in place; the stimulus is evaluated at
        each substep. NumPy never stops mid-step: the states are checked (finite, in range) at the end."""
        if self.failure:
            return
        for s in range(k):
            t = t0 + s * dt
            self.step(self.y, t, dt, stimuli.current(t), self.work)
        self.failure = bad_state_message(self.model, self.y, self.coords, t0 + k * dt)


def bad_state_message(model, states: np.ndarray, coords: np.ndarray, t: float) -> str | None:
    """One line naming the first non-finite or out-of-range state (name, value, position, time), or None."""
    bad = model.find_bad_state(states)
    if bad is None:
        return None
    s, c = bad
    st = model.states[s]
    pos = ", ".join(f"{x:.4g}" for x in coords[c])
    return (f"cell state {st.name} = {states[s, c]:.6g} {st.unit} at ({pos}) cm, t = {t:.6g} ms is "
            f"{'not finite' if not np.isfinite(states[s, c]) else 'outside its range'} "
            f"[{st.lower:g}, {st.upper:g}]; the time step may be too large "
            f"(simulation.dt / simulation.ode_substeps)")

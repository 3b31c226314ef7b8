"""The native CPU backend for tissue runs: this rank's cells through the compiled C driver (cardiosim/reaction/ode/native.py).

Same numbers as the NumPy reference (to ~1e-12 per step), many times faster for the large models (Bondarenko, TT06),
which NumPy cannot integrate at their stable steps in reasonable time. A bad state on this rank is recorded, not
raised: the reaction step's collective check (reaction.Reaction.check) stops every rank together.
"""

from __future__ import annotations

from cardiosim.runtime.errors import SimulationError
from cardiosim.reaction.ode.native import NativeModel


class NativeBackend:
    name = "native"

    def __init__(self, model, states, stimuli, integrator: str = "forward-euler"):
        self.native = NativeModel(model, integrator=integrator)
        self.y = states
        self.stimulus = self.native.stimulus(stimuli.protocols, stimuli.amplitudes, states.shape[1])
        self.failure: str | None = None

    def download(self) -> None:   # the states live on the host
        pass

    upload = download

    def advance(self, t0: float, dt: float, k: int, stimuli) -> None:
        if self.failure:
            return
        try:
            self.native.advance(self.y, t0, dt, k, self.stimulus, check_range=True)
        except SimulationError as e:
            self.failure = str(e)

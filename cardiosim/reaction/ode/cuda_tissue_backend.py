"""The CUDA backend for tissue runs: cell states on one GPU for the whole run; each PDE step only the state rows in
``rows`` cross between the GPU and the host copy ``y`` (Vm: host -> GPU before the step, GPU -> host after: 16 B
per cell; every row with the grouped placement's ``exchange = "full"``).

``y`` is page-locked (pinned) host memory, so the copies run at full PCIe/NVLink speed. The device is chosen by
the placement (reaction.placement): the group's GPU for a grouped owner, node rank mod GPUs per rank; the kernel
variant (``kernel``) and the integrator (``integrator``) are cell.kernel and cell.integrator. The
kernel is compiled once per node and architecture (``kernel_comm``: the first rank compiles into the cache, the
others load it). A bad state on the GPU is
recorded, not raised: the reaction step's collective check stops every rank together.
"""

from __future__ import annotations

import numpy as np

from cardiosim.runtime.errors import SimulationError
from cardiosim.reaction.ode.cuda_backend import CudaBackend, first_then_others


class CudaTissueBackend:
    name = "cuda"

    def __init__(self, model, states: np.ndarray, stimuli, device: int, kernel_comm=None, rows=(0,),
                 integrator: str = "forward-euler", kernel: str = "fused"):

        def start():
            return CudaBackend(model, states, device=device, variant=kernel, integrator=integrator)

        # The node's first GPU rank compiles the kernel (into the cache); the others then load it from there.
        self.gpu = first_then_others(kernel_comm, start) if kernel_comm is not None else start()
        self.device = device
        self.rows = tuple(rows)
        if states.shape[1]:
            with self.gpu.ctx as cuda:
                self.y = cuda.pagelocked_empty(states.shape, np.float64)
        else:                   # no cells here (a rank or a group without tissue): nothing to pin
            self.y = np.empty(states.shape)
        self.y[:] = states
        self.stimulus = self.gpu.stimulus(stimuli.protocols, stimuli.amplitudes)
        self.failure: str | None = None

    def advance(self, t0: float, dt: float, k: int, stimuli) -> None:
        if self.failure:
            return
        for s in self.rows:
            self.gpu.set_row(s, self.y[s])
        try:
            self.gpu.advance(t0, dt, k, self.stimulus, check_range=True, check=True)
        except SimulationError as e:
            self.failure = str(e)
        for s in self.rows:
            self.gpu.get_row(s, self.y[s])

    def download(self) -> None:
        """Bring every state to the host copy (for output or checks of states other than Vm)."""
        self.y[:] = self.gpu.from_device()

    def upload(self) -> None:
        """Replace every state on the GPU by the host copy (a restart)."""
        self.gpu.to_device(self.y)

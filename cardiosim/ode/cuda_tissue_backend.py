"""The CUDA backend for tissue runs, one GPU context per rank: this rank's cell states live on the GPU for the
whole run; each PDE step only Vm crosses (host → GPU before the reaction step, GPU → host after: 16 B per cell).

The GPU is chosen as (rank on this node) mod (visible GPUs). A bad state on the GPU is recorded, not raised:
the reaction step's collective check stops every rank together.
"""

from __future__ import annotations

import numpy as np

from ..errors import SimulationError, UserError


def node_rank() -> int:
    from mpi4py import MPI
    node = MPI.COMM_WORLD.Split_type(MPI.COMM_TYPE_SHARED)
    r = node.rank
    node.Free()
    return r


class CudaTissueBackend:
    name = "cuda"

    def __init__(self, model, states: np.ndarray, stimuli, integrator: str = "forward-euler", kernel: str = "fused"):
        from .cuda_backend import CudaBackend
        try:
            import pycuda.driver as cuda
            cuda.init()
            n_gpus = cuda.Device.count()
        except ImportError:
            raise UserError("cell.backend: 'cuda' needs PyCUDA (EXTRAS=test,plot,gpu make setup) and a GPU") from None
        except Exception as e:  # pycuda.driver.Error: no driver or no device
            raise UserError(f"cell.backend: 'cuda' found no usable GPU ({e})") from None
        if n_gpus == 0:
            raise UserError("cell.backend: 'cuda' found no GPU")
        self.device = node_rank() % n_gpus
        self.gpu = CudaBackend(model, states, device=self.device, variant=kernel, integrator=integrator)
        self.y = states
        self.stimulus = self.gpu.stimulus(stimuli.protocols, stimuli.amplitudes)
        self.failure: str | None = None

    def advance(self, t0: float, dt: float, k: int, stimuli) -> None:
        if self.failure:
            return
        v = self.y[0]
        self.gpu.set_row(0, v)
        try:
            self.gpu.advance(t0, dt, k, self.stimulus, check_range=True, check=True)
        except SimulationError as e:
            self.failure = str(e)
        self.gpu.get_row(0, v)

    def download(self) -> None:
        """Bring every state to the host copy (for output or checks of states other than Vm)."""
        self.y[:] = self.gpu.from_device()

    def upload(self) -> None:
        """Replace every state on the GPU by the host copy (a restart)."""
        self.gpu.to_device(self.y)

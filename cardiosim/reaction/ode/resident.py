"""The resident placement's device side (docs/dev/design.md §4): cell states, stimulus tables, the activation and
APD maps and the probe samples on the GPU that holds the PDE's vectors; nothing crosses to the host inside the
stepping loop except the cell kernel's 16-byte error flag (the per-step health check).

- :class:`ResidentBackend` (an ode.protocol.CellBackend): the fused kernel (cardiosim.reaction.ode.cuda_backend) on this
  rank's cells. Vm is copied device-to-device from the Vec's device memory (``getCUDAHandle``) into state row 0
  before the substeps and back after (2 x 8 B per cell on the device; the kernel itself is unchanged, so the
  numbers are those of the grouped and per-rank placements).
- the activation and APD maps, the probes and the pseudo-ECG on the device: cardiosim.analysis.device, whose
  kernels are in kernels/resident.cu too (:func:`module`).
- :class:`DeviceEntries`: a few entries of the Vec read to, and written from, the host (the Purkinje network's
  junctions, cardiosim.purkinje.system), by the same gather and scatter kernels.

Everything runs in the device's primary context, the one PETSc's CUDA objects use (gpu-node/README.md), on the
legacy default stream, which PETSc's default device context uses too: kernels and PETSc's operations are ordered.
"""

from __future__ import annotations

import numpy as np

from cardiosim.reaction.ode.cuda_backend import CudaBackend, first_then_others
from cardiosim.runtime.compile import compile_cached, kernel_dir
from cardiosim.runtime.gpu import PrimaryContext, arch_of

BLOCK = 256


_modules: dict[int, object] = {}


def module(ctx: PrimaryContext):
    """kernels/resident.cu compiled for the device (cached on disk by compile_cached, per process here)."""
    key = ctx.device.get_attribute(ctx.cuda.device_attribute.PCI_BUS_ID)
    if key not in _modules:
        src = (kernel_dir() / "resident.cu").read_text()
        cubin = compile_cached(src, ["--fmad=false"], arch_of(ctx.device))
        _modules[key] = ctx.cuda.module_from_buffer(cubin)
    return _modules[key]


def launch_dims(n: int):
    """(grid, block) of a launch over ``n`` items, BLOCK threads a block."""
    return ((max(n, 1) + BLOCK - 1) // BLOCK, 1), (BLOCK, 1, 1)


class ResidentBackend:
    name = "resident"

    def __init__(self, model, states: np.ndarray, stimuli, device: int, kernel_comm=None,
                 integrator: str = "forward-euler", kernel: str = "fused", at: np.ndarray | None = None):
        """``states`` (n_states, n_cells) of the cells at the Vec's local entries ``at`` (a masked grid's tissue
        nodes, cardiosim.domain.mask), or at every entry (None): Vm is then gathered from, and scattered back to, those
        entries by two small kernels instead of one copy."""

        def start():
            return CudaBackend(model, states, device=device, variant=kernel, integrator=integrator)

        # The node's first GPU rank compiles the kernel (into the cache); the others then load it from there.
        self.gpu = first_then_others(kernel_comm, start) if kernel_comm is not None else start()
        self.cuda = self.gpu.cuda
        self.device = device
        self.n = self.gpu.n_cells
        self.y = np.array(states, dtype=np.float64)    # the host copy: current only after download()
        self.stimulus = self.gpu.stimulus(stimuli.protocols, stimuli.amplitudes)
        self.failure: str | None = None
        self._launched = None              # (t0, dt) of the launch finish_vec has to check
        self.gathers = at is not None      # ode.protocol.Pieces: this backend reads the Vec at ``at`` itself
        self.at = None
        if at is not None and self.n:
            ctx = PrimaryContext(device)
            with ctx as cuda:
                mod = module(ctx)
                self.gather, self.scatter = mod.get_function("cs_probe_gather"), mod.get_function("cs_scatter_at")
                self.gather.prepare("PPiP")
                self.scatter.prepare("PPiP")
                self.at = cuda.to_device(np.ascontiguousarray(at, dtype=np.int64))

    def _vm_row(self, ptr: int, to_states: bool) -> None:
        row = int(self.gpu.y)                  # state 0 (Vm) is the first row of the pitched state array
        self.gpu._push()
        try:
            if self.at is not None:
                grid, block = launch_dims(self.n)
                src, dst = (ptr, row) if to_states else (row, ptr)
                (self.gather if to_states else self.scatter).prepared_call(grid, block, np.intp(src), self.at,
                                                                          np.int32(self.n), np.intp(dst))
            elif to_states:
                self.cuda.memcpy_dtod(row, ptr, self.n * 8)
            else:
                self.cuda.memcpy_dtod(ptr, row, self.n * 8)
        finally:
            self.gpu._pop()

    def advance_vec(self, V, t0: float, dt: float, k: int) -> None:
        self.launch_vec(V, t0, dt, k)
        self.finish_vec()

    def launch_vec(self, V, t0: float, dt: float, k: int) -> None:
        """The substeps queued on the device, Vm in and out of ``V`` with them; :meth:`finish_vec` reads their error
        flag. In between the host is free (the Purkinje network's cable, cardiosim.purkinje.system): the kernels
        and PETSc's next operations on V are ordered by the stream."""
        self._launched = None
        if self.failure or self.n == 0:
            return
        ptr = V.getCUDAHandle("rw")
        try:
            self._vm_row(int(ptr), to_states=True)
            self.gpu.advance(t0, dt, k, self.stimulus, check_range=True, check=False)
            self._vm_row(int(ptr), to_states=False)
        finally:
            V.restoreCUDAHandle(ptr, "rw")
        self._launched = (t0, dt)

    def finish_vec(self) -> None:
        """The launch's 16-byte error flag to the host (the per-step health check; a synchronisation)."""
        if self._launched is not None:
            self.failure = self.gpu.failure_after(*self._launched)
            self._launched = None

    def download(self) -> None:
        if self.n:
            self.y[:] = self.gpu.from_device()

    def upload(self) -> None:
        if self.n:
            self.gpu.to_device(self.y)


class DeviceEntries:
    """The entries ``at`` (local indices) of a GPU Vec to and from the host: gathered on the device into a buffer of
    len(at) doubles and copied, and the other way round, so that those entries cross and not the vector (whose
    host copy PETSc would otherwise bring up to date, and send back, whole)."""

    def __init__(self, at: np.ndarray, device: int):
        self.m = len(at)
        self.ctx = PrimaryContext(device)
        with self.ctx as cuda:
            mod = module(self.ctx)
            self.gather, self.scatter = mod.get_function("cs_probe_gather"), mod.get_function("cs_scatter_at")
            self.gather.prepare("PPiP")
            self.scatter.prepare("PPiP")
            self.at = cuda.to_device(np.ascontiguousarray(at if self.m else [0], dtype=np.int64))
            self.buf = cuda.mem_alloc(max(self.m, 1) * 8)
            self.host = cuda.pagelocked_empty(max(self.m, 1), np.float64)    # both ways, at full speed

    def read(self, V) -> np.ndarray:
        out = np.empty(self.m)
        if not self.m:
            return out
        ptr = V.getCUDAHandle("r")
        try:
            grid, block = launch_dims(self.m)
            with self.ctx as cuda:
                self.gather.prepared_call(grid, block, np.intp(int(ptr)), self.at, np.int32(self.m), self.buf)
                cuda.memcpy_dtoh(self.host, self.buf)    # ordered after the gather: the legacy default stream
            out[:] = self.host[:self.m]
        finally:
            V.restoreCUDAHandle(ptr, "r")
        return out

    def write(self, V, values: np.ndarray) -> None:
        if not self.m:
            return
        ptr = V.getCUDAHandle("rw")
        try:
            grid, block = launch_dims(self.m)
            with self.ctx as cuda:
                # queued, not waited for: the next read (a synchronisation) comes before the buffer is reused
                self.host[:self.m] = values
                cuda.memcpy_htod_async(self.buf, self.host)
                self.scatter.prepared_call(grid, block, self.buf, self.at, np.int32(self.m), np.intp(int(ptr)))
        finally:
            V.restoreCUDAHandle(ptr, "rw")

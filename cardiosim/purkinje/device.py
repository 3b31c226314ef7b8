"""The junctions' step on the GPU, for a network whose cells are there too (cardiosim.purkinje.cable.DeviceCells)
and a tissue on one rank's GPU (the resident placement on one rank): the step of cardiosim.purkinje.coupling, by
kernels/resident.cu's cs_pmj_* kernels, reading and writing the tissue Vec and the network's Vm row where they
are. Nothing the tissue waits for crosses to the host: the host path's round trip (the junctions' tissue nodes to
the host, the solve, back) was most of the network's cost in a step (BiV at 0.25 mm, 305 junctions: 0.26 ms of
0.3). The junctions' tissue potentials and currents (for the PMJ activation times and charges) come back queued,
read after the tissue's reaction has started.

The Schur complement's inverse is dense (p² doubles): up to :data:`LIMIT` junctions; more stay on the host path.
"""

from __future__ import annotations

import numpy as np

from cardiosim.reaction.ode.resident import launch_dims, module
from cardiosim.runtime.gpu import PrimaryContext

LIMIT = 4096          # junctions (S⁻¹: 134 MB at the limit)


class DeviceJunctions:
    """``junctions`` (cardiosim.purkinje.coupling.Junctions) whose tissue node k is entry ``vec_index[k]`` of this
    rank's tissue Vec; ``cells``: the network's DeviceCells (its Vm row is the kernels' V_p)."""

    def __init__(self, junctions, vec_index: np.ndarray, cells, device: int):
        a = junctions.device_arrays()
        vec_index = np.asarray(vec_index, dtype=np.int64)
        self.p, self.q = junctions.n, len(vec_index)
        self.cells = cells
        self.ctx = PrimaryContext(device)
        with self.ctx as cuda:
            mod = module(self.ctx)
            self.k_rhs, self.k_solve, self.k_tissue, self.k_current = (
                mod.get_function(f"cs_pmj_{n}") for n in ("rhs", "solve", "tissue", "current"))
            self.k_rhs.prepare("iPPPPPPPPPP")
            self.k_solve.prepare("iPPPPP")
            self.k_tissue.prepare("iPPPPPPP")
            self.k_current.prepare("iPPPPPPP")
            up = {k: cuda.to_device(np.ascontiguousarray(v)) for k, v in a.items() if k != "col"}
            up["col"] = cuda.to_device(vec_index[a["col"]])           # W's columns: entries of the Vec
            up["node"] = cuda.to_device(vec_index)
            up["term"] = cuda.to_device(np.ascontiguousarray(junctions.terminals, dtype=np.int64))
            self.d = up
            self.rhs, self.newp, self.vbar, self.current = (cuda.mem_alloc(self.p * 8) for _ in range(4))
            self.host = cuda.pagelocked_empty((2, self.p), np.float64)     # vbar, current
            self.copied = None

    def exchange(self, V):
        """Queue the step (the network's host Vm to the device first, the tissue's in ``V``); returns the event
        after which the network's Vm row holds the junctions' V_p' (for the cells' launch to wait on)."""
        d, p, cells = self.d, self.p, self.cells
        gp, gq = launch_dims(p), launch_dims(self.q)
        vp = np.intp(int(cells.gpu.y))                  # the network's states: Vm is row 0
        ptr = V.getCUDAHandle("rw")
        try:
            with self.ctx as cuda:
                cells.vm_in[:] = cells.y[0]
                cuda.memcpy_htod_async(int(vp), cells.vm_in)
                vm = np.intp(int(ptr))
                self.k_rhs.prepared_call(*gp, np.int32(p), d["ptr"], d["col"], d["w"], d["g1"], d["cp"], d["term"],
                                         vp, vm, self.rhs, self.vbar)
                self.k_solve.prepared_call(*gp, np.int32(p), d["sinv"], self.rhs, self.newp, d["term"], vp)
                written = cuda.Event()
                written.record()
                self.k_tissue.prepared_call(*gq, np.int32(self.q), d["ptr2"], d["col2"], d["g2"], d["a"],
                                            d["node"], self.newp, vm)
                self.k_current.prepared_call(*gp, np.int32(p), d["ptr"], d["col"], d["w"], d["resistance"],
                                             self.newp, vm, self.current)
                cuda.memcpy_dtoh_async(self.host[0], self.vbar)
                cuda.memcpy_dtoh_async(self.host[1], self.current)
                self.copied = cuda.Event()
                self.copied.record()
        finally:
            V.restoreCUDAHandle(ptr, "rw")
        return written

    def results(self) -> tuple[np.ndarray, np.ndarray]:
        """(V̄_m before the step, the step's currents µA) per junction, of the last :meth:`exchange`."""
        self.copied.synchronize()
        return self.host[0].copy(), self.host[1].copy()

"""The resident placement's device-side analysis (docs/dev/design.md §4), on the GPU that holds the PDE's vectors,
by the kernels of kernels/resident.cu (cardiosim.reaction.ode.resident.module):

- :class:`DeviceMaps`: cardiosim.analysis.maps's ActivationMap and APDMap updated by one kernel (no FMA
  contraction: the same bits as NumPy) on Vm in the Vec's device memory; the host arrays are brought up to date
  only for checkpoints and the final maps (:class:`DeviceAccumulator`).
- :class:`DeviceProbes`: cardiosim.analysis.probes.Probes whose samples are gathered on the device into a growing
  device buffer and copied to the host when the output flushes them (snapshots, checkpoints, the end); the
  pseudo-ECG's shares with them (:class:`DeviceEcg`).
"""

from __future__ import annotations

import numpy as np

from cardiosim.analysis.probes import Probes
from cardiosim.reaction.ode.resident import launch_dims, module
from cardiosim.runtime.gpu import PrimaryContext

ECG_BLOCK = 256        # threads per block of cs_ecg_partial and cs_ecg_finish (ECG_BLOCK in kernels/resident.cu)


class DeviceMaps:
    """The activation and APD maps (cardiosim.analysis.maps) kept on the device; ``activation``/``apd`` are the host
    objects, whose arrays :meth:`download` brings up to date and :meth:`upload` sends."""

    ARRAYS = (("activation", "time"), ("activation", "prev"), ("apd", "v_rest"), ("apd", "v_peak"),
              ("apd", "repolarisation"), ("apd", "prev"))

    def __init__(self, activation, apd, device: int):
        self.activation, self.apd = activation, apd
        self.ctx = PrimaryContext(device)
        self.n = int(activation.time.size)
        with self.ctx as cuda:
            self.func = module(self.ctx).get_function("cs_maps")
            self.func.prepare("PiddddPPPPPP")
            self.dev = {key: cuda.mem_alloc(max(self.n, 1) * 8) for key in self.ARRAYS}
        self.upload()

    def _host(self, key) -> np.ndarray:
        obj, name = key
        return getattr(getattr(self, obj), name)

    def update(self, t0: float, t1: float, V) -> None:
        if self.n == 0:
            return
        ptr = V.getCUDAHandle("r")
        try:
            grid, block = launch_dims(self.n)
            d = self.dev
            with self.ctx:
                self.func.prepared_call(grid, block, np.intp(int(ptr)), np.int32(self.n), float(t0), float(t1),
                                        float(self.activation.threshold), 1.0 - self.apd.level / 100.0,
                                        d["activation", "time"], d["activation", "prev"], d["apd", "v_rest"],
                                        d["apd", "v_peak"], d["apd", "repolarisation"], d["apd", "prev"])
        finally:
            V.restoreCUDAHandle(ptr, "r")

    def download(self) -> None:
        with self.ctx as cuda:
            for key, buf in self.dev.items():
                host = self._host(key)
                if host.size:
                    out = np.empty_like(host)
                    cuda.memcpy_dtoh(out, buf)
                    host[...] = out

    def upload(self) -> None:
        with self.ctx as cuda:
            for key, buf in self.dev.items():
                host = np.ascontiguousarray(self._host(key), dtype=np.float64)
                if host.size:
                    cuda.memcpy_htod(buf, host)


class DeviceAccumulator:
    """A checkpointed accumulator (cardiosim.analysis.maps.ActivationMap / APDMap) whose arrays live in ``maps`` on the device:
    state() and load_state() go through the host object, so checkpoints are the same across placements."""

    def __init__(self, maps: DeviceMaps, acc):
        self.maps, self.acc = maps, acc

    def state(self) -> dict:
        self.maps.download()
        return self.acc.state()

    def load_state(self, state: dict) -> None:
        self.acc.load_state(state)
        self.maps.upload()


class DeviceEcg:
    """The pseudo-ECG (cardiosim.analysis.ecg.PseudoEcg ``ecg``) on the device: this rank's share of each
    electrode's sum (K_iᵀ w_e)·Vm (cs_ecg_partial, then cs_ecg_finish) straight into a row of the probes' device
    sample buffer. The shares are added over the ranks and the leads formed when the samples are flushed
    (:meth:`totals`): a sum is linear, so nothing needs to cross between ranks, or to the host, per step."""

    NODES_PER_THREAD = 8       # the first stage's blocks per electrode: enough to fill the GPU, at most MAX_BLOCKS
    MAX_BLOCKS = 1024

    def __init__(self, ecg, device: int):
        self.ecg = ecg
        self.ctx = PrimaryContext(device)
        w = np.stack([x.getArray(readonly=True) for x in ecg.weights])      # (electrodes, local nodes)
        self.n_e, self.n = w.shape
        self.blocks = int(min(max(-(-self.n // (ECG_BLOCK * self.NODES_PER_THREAD)), 1), self.MAX_BLOCKS))
        with self.ctx as cuda:
            mod = module(self.ctx)
            self.partial, self.finish = mod.get_function("cs_ecg_partial"), mod.get_function("cs_ecg_finish")
            self.partial.prepare("PPiP")
            self.finish.prepare("PiP")
            self.parts = cuda.mem_alloc(max(self.n_e * self.blocks, 1) * 8)
            self.w = cuda.mem_alloc(max(w.nbytes, 8))
            if w.size:
                cuda.memcpy_htod(self.w, np.ascontiguousarray(w))

    def record(self, V, out: int) -> None:
        """This rank's share of each electrode for Vm ``V`` into the device doubles at ``out`` (the weights are
        K_iᵀ w_e: cardiosim.analysis.ecg)."""
        ptr = V.getCUDAHandle("r")
        try:
            with self.ctx:
                self.partial.prepared_call((self.blocks, self.n_e), (ECG_BLOCK, 1, 1), np.intp(int(ptr)), self.w,
                                           np.int32(self.n), self.parts)
                self.finish.prepared_call((self.n_e, 1), (ECG_BLOCK, 1, 1), self.parts, np.int32(self.blocks),
                                          np.intp(out))
        finally:
            V.restoreCUDAHandle(ptr, "r")

    def totals(self, shares: np.ndarray, comm) -> np.ndarray | None:
        """Every trace (electrodes, then leads) per sample on rank 0, from the ranks' ``shares`` (samples,
        electrodes); None elsewhere (collective)."""
        from mpi4py import MPI
        total = np.empty_like(shares) if comm.rank == 0 else None
        comm.Reduce(np.ascontiguousarray(shares), total, op=MPI.SUM, root=0)
        return self.ecg.traces(total) if comm.rank == 0 else None


class DeviceProbes(Probes):
    """cardiosim.analysis.probes.Probes with the samples taken on the device: each step one small gather kernel per field writes this
    rank's probe values, and the pseudo-ECG (:class:`DeviceEcg`) its shares, into row ``len(times)`` of a device
    buffer (doubled when full); :meth:`collect` copies the rows recorded so far to the host in the buffer format of
    Probes and hands over to it."""

    def __init__(self, probes: Probes, device: int):
        self.__dict__.update(probes.__dict__)
        self.ctx = PrimaryContext(device)
        self.m = len(self.mine)
        self.device_ecg = DeviceEcg(self.ecg, device) if self.ecg is not None else None
        self.n_probe = self.m * len(self.fields)             # a sample row: the probes' values, then the ECG's
        self.width = self.n_probe + (self.device_ecg.n_e if self.device_ecg else 0)
        self.times: list[float] = []
        self.rows = 0                              # capacity of the device buffer, in sample rows
        self.buf = None
        with self.ctx as cuda:
            self.func = module(self.ctx).get_function("cs_probe_gather")
            self.func.prepare("PPiP")
            self.idx = cuda.to_device(np.array([off for _, off in self.mine] or [0], dtype=np.int64))

    def _grow(self) -> None:
        cuda = self.ctx.cuda
        rows = max(64, 2 * self.rows)
        new = cuda.mem_alloc(rows * self.width * 8)
        if self.buf is not None:
            cuda.memcpy_dtod(new, self.buf, len(self.times) * self.width * 8)
            self.buf.free()
        self.buf, self.rows = new, rows

    def record(self, t: float, vecs: dict) -> None:
        if not self.names and not self.ecg_names:
            return
        if self.width:
            with self.ctx:
                if len(self.times) == self.rows:
                    self._grow()
            row = int(self.buf) + len(self.times) * self.width * 8
            if self.m:
                grid, block = launch_dims(self.m)
                with self.ctx:
                    for f, field in enumerate(self.fields):
                        v = vecs[field]
                        ptr = v.getCUDAHandle("r")
                        try:
                            self.func.prepared_call(grid, block, np.intp(int(ptr)), self.idx, np.int32(self.m),
                                                    np.intp(row + f * self.m * 8))
                        finally:
                            v.restoreCUDAHandle(ptr, "r")
            if self.device_ecg is not None:     # every rank has the electrodes, hence a row
                self.device_ecg.record(vecs["Vm"], row + self.n_probe * 8)
        self.times.append(t)

    def collect(self, comm):
        n = len(self.times)
        if n:
            values = np.empty((n, self.width))
            if self.width:
                with self.ctx as cuda:
                    cuda.memcpy_dtoh(values, self.buf)
            probes = values[:, :self.n_probe].reshape(n, len(self.fields), self.m)
            ecg = self.device_ecg.totals(values[:, self.n_probe:], comm) if self.device_ecg else None
            samples = [{(i, field): float(probes[s, f, j]) for f, field in enumerate(self.fields)
                        for j, (i, _) in enumerate(self.mine)} for s in range(n)]
            if ecg is not None:
                for s in range(n):
                    samples[s].update(zip((("ecg", name) for name in self.ecg_names), ecg[s].tolist()))
            self.buffer.extend(zip(self.times, samples))
            self.times = []
        return super().collect(comm)

"""GPU board energy from NVML: joules used by the GPUs a run computes on, for the set-up and for the
stepping loop, in the run's summary, its log and the output file's attributes.

NVML's total-energy counter (``nvmlDeviceGetTotalEnergyConsumption``, mJ since the driver loaded) is the board's
energy, updated about every 100 ms: it measures windows of seconds, not the sub-millisecond phases of one step, so
the energy is reported per run segment (set-up, loop) and per GPU, with the loop's mean power — not per phase, which
would be the loop's energy split by time, an assumption rather than a measurement. NVML numbers devices by PCI bus,
whatever CUDA_VISIBLE_DEVICES says: each GPU is found by the PCI bus id of the CUDA device the run uses, and a GPU
that several ranks share is read once. Where there is no NVML (no nvidia-ml-py, no driver, a CPU run) the summary
says why instead of giving numbers.
"""

from __future__ import annotations

from cardiosim.runtime.gpu import cuda_driver


def _nvml():
    try:
        import pynvml
        pynvml.nvmlInit()
        return pynvml, None
    except Exception as e:     # the module missing, no driver, no GPU: all mean "no energy numbers"
        return None, f"NVML not available ({type(e).__name__}: {e})"


def bus_id(device: int) -> str | None:
    """PCI bus id of CUDA device ``device`` (as CUDA numbers it, i.e. after CUDA_VISIBLE_DEVICES)."""
    try:
        return cuda_driver().Device(device).pci_bus_id()
    except Exception:
        return None


class Meter:
    """Energy counters of the GPUs with the given PCI bus ids (this rank's share: ids another rank of the node reads
    are not given here). ``read()`` is joules summed over them, or None without NVML."""

    def __init__(self, bus_ids: list[str]):
        self.bus_ids = list(dict.fromkeys(b for b in bus_ids if b))
        self.handles = []
        self.why = None
        if not self.bus_ids:
            self.why = "no GPU in this run"
            return
        nvml, self.why = _nvml()
        if nvml is None:
            return
        try:
            self.handles = [nvml.nvmlDeviceGetHandleByPciBusId(b.encode() if isinstance(b, str) else b)
                            for b in self.bus_ids]
            self.read_mj = nvml.nvmlDeviceGetTotalEnergyConsumption
            self.read()
        except Exception as e:     # e.g. a GPU without the energy counter (older than Volta)
            self.handles, self.why = [], f"NVML energy counter not readable ({type(e).__name__}: {e})"

    @property
    def available(self) -> bool:
        return bool(self.handles)

    def read(self) -> float | None:
        if not self.handles:
            return None
        try:
            return sum(self.read_mj(h) for h in self.handles) / 1000.0
        except Exception as e:    # a driver hiccup must not end a run: the energy is then reported missing
            self.handles, self.why = [], f"NVML energy counter stopped answering ({type(e).__name__}: {e})"
            return None


def for_run(comm, device: int | None) -> Meter:
    """The meter of this rank: the GPU it computes on, unless a lower rank on the same host uses the same GPU."""
    import socket
    mine = bus_id(device) if device is not None else None
    everyone = comm.allgather((socket.gethostname(), mine))
    first = everyone.index((socket.gethostname(), mine))
    return Meter([mine] if mine and first == comm.rank else [])


def summary(comm, meter: Meter, t_setup_start: float | None, t_loop_start: float | None, t_end: float | None,
            loop_s: float, steps: int) -> dict:
    """Joules over all ranks' meters (collective): set-up (from the meter's start), loop, mean loop power, per
    step; or the reason there are none."""
    marks_ok = None not in (t_setup_start, t_loop_start, t_end)
    gpus = comm.allreduce(len(meter.handles) if marks_ok else 0)
    if gpus == 0:
        why = comm.bcast(meter.why, root=0)
        return {"available": False, "why": why}
    setup = comm.allreduce((t_loop_start - t_setup_start) if meter.available else 0.0)
    loop = comm.allreduce((t_end - t_loop_start) if meter.available else 0.0)
    return {"available": True, "gpus": gpus, "setup_j": setup, "loop_j": loop,
            "loop_mean_power_w": loop / loop_s if loop_s > 0 else None,
            "loop_j_per_step": loop / steps if steps else None,
            "note": "board energy from NVML (counter updated every ~100 ms; per run segment, not per phase)"}


def line(e: dict) -> str:
    if not e.get("available"):
        return f"GPU energy: not measured ({e.get('why')})"
    return (f"GPU energy ({e['gpus']} GPU{'s' if e['gpus'] > 1 else ''}, NVML): loop {e['loop_j']:.1f} J "
            f"({e['loop_mean_power_w']:.0f} W mean, {e['loop_j_per_step']:.3g} J per step), "
            f"set-up {e['setup_j']:.1f} J")

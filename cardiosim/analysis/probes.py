"""Probes: the fields at the nodes nearest the configured points (cfg.probe), every PDE step, with the pseudo-ECG's
traces (cardiosim.analysis.ecg) at the same times; buffered on each rank, gathered on rank 0 when the output
flushes them. The resident placement samples them on the device instead (cardiosim.analysis.device.DeviceProbes).
"""

from __future__ import annotations

import numpy as np


def ecg_traces(cfg) -> list[str]:
    """The pseudo-ECG traces a run writes (/ecg/<name>): the electrodes, then the leads."""
    return [x.name for x in cfg.ecg.electrodes] + [x.name for x in cfg.ecg.leads]


class Probes:
    """Vm (and φe) at the nodes nearest the configured points, every PDE step; buffered, gathered at flush."""

    def __init__(self, cfg, grid, fields):
        self.names = [p.name for p in cfg.probe]
        self.fields = fields
        self.nodes = [grid.nearest_node(p.position) for p in cfg.probe]
        self.positions = [p.position for p in cfg.probe]
        self.mine = [(i, grid.local_offset(n)) for i, n in enumerate(self.nodes) if grid.owns(n)]
        self.grid = grid
        self.buffer: list[tuple[float, dict]] = []
        # Every step, per field: one gather by these local offsets, its values keyed by (probe, field) as
        # collect() reads them; no Python work per probe beyond the dict itself.
        offsets = np.array([off for _, off in self.mine], dtype=np.intp)
        self._gathers = [(f, offsets, [(i, f) for i, _ in self.mine]) for f in fields] if self.mine else []
        # The pseudo-ECG's traces (cardiosim.analysis.ecg) go with the probe samples: the same times, the same file
        # position. The Simulation attaches the calculator (it needs the tissue's matrices); rank 0 keeps them.
        self.ecg_names = ecg_traces(cfg)
        self.ecg = None
        self.root = grid.da.comm.rank == 0

    def record(self, t: float, vecs: dict) -> None:
        if not self.names and not self.ecg_names:
            return
        sample: dict = {}
        for f, offsets, keys in self._gathers:
            sample.update(zip(keys, vecs[f].getArray(readonly=True)[offsets].tolist()))
        if self.ecg is not None:
            values = self.ecg(vecs["Vm"])                      # collective
            if self.root:
                sample.update(zip((("ecg", n) for n in self.ecg_names), values))
        self.buffer.append((t, sample))

    def collect(self, comm):
        """All buffered samples on rank 0 as (times, {(probe, field): values}); clears the buffers."""
        parts = comm.gather(self.buffer, root=0)
        self.buffer = []
        if comm.rank != 0 or not parts or not parts[0]:
            return None
        times = np.array([t for t, _ in parts[0]])
        merged = {}
        for part in parts:
            for s, (_, vals) in enumerate(part):
                for key, v in vals.items():
                    merged.setdefault(key, np.empty(len(times)))[s] = v
        return times, merged

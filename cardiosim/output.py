"""HDF5 output: field snapshots, probe traces, the config and the run's metadata, written by rank 0.

Layout (docs/output-format.md has the full description)::

    /                    attrs: format, cardiosim_version, config (TOML text), equations, mpi_ranks, units (JSON)
    /grid                attrs: dim, shape (x first), spacing (cm), size (cm), stencil; datasets x, y, z (cm)
    /fields/time         (n_snapshots,) ms
    /fields/Vm           (n_snapshots, [nz,] [ny,] nx) mV        chunked one snapshot per chunk
    /fields/phi_e        (same) mV                               bidomain only
    /probes/time         (n_steps + 1,) ms                        every PDE step
    /probes/<name>/Vm    (n_steps + 1,) mV   (and phi_e)          attrs: position, node_position (cm)
    /solver/<name>_iterations  (n_steps,)                          Krylov iterations per step
    /maps/activation_time      ([nz,] [ny,] nx) ms                 first upward crossing of the threshold; NaN: none
    /timing              attrs: one per phase, seconds (max over ranks), written at the end

Fields are gathered to rank 0 in natural order (x fastest), so ``f["fields/Vm"][i]`` indexes as [z, y, x]. The
file is flushed after every snapshot: a run that dies keeps everything written before.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import numpy as np
from petsc4py import PETSc

from . import __version__
from .errors import UserError

UNITS = {"time": "ms", "x": "cm", "Vm": "mV", "phi_e": "mV", "conductivity": "mS/cm", "chi": "cm^-1",
         "Cm": "uF/cm^2", "stimulus": "uA/cm^2 or uA/cm^3"}


def resolve_path(cfg) -> Path:
    return Path(cfg.output.path) if cfg.output.path else Path("out") / f"{cfg.source_name}.h5"


def check_path(path: Path, overwrite: bool) -> None:
    """Refuse before anything is computed: an existing file (without --overwrite), or a place we cannot write."""
    import os
    if path.exists() and not overwrite:
        raise UserError(f"output.path: {path} exists; pass --overwrite to replace it or choose another path")
    if path.exists() and path.is_dir():
        raise UserError(f"output.path: {path} is a directory")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"output.path: cannot write in {parent} (not a writable directory)")


class Gatherer:
    """Collects a distributed Vec on rank 0 in natural (x-fastest) order."""

    def __init__(self, grid):
        self.grid = grid
        self.natural = grid.da.createNaturalVec()
        self.scatter, self.zero = PETSc.Scatter.toZero(self.natural)

    def __call__(self, v: PETSc.Vec):
        self.grid.da.globalToNatural(v, self.natural)
        self.scatter.scatter(self.natural, self.zero, addv=PETSc.InsertMode.INSERT_VALUES,
                             mode=PETSc.ScatterMode.FORWARD)
        if self.grid.da.comm.rank == 0:
            return self.zero.getArray().reshape(tuple(int(n) for n in reversed(self.grid.n))).copy()
        return None

    def distribute(self, arr, v: PETSc.Vec) -> None:
        """The inverse: a natural-order array given on rank 0 (ignored elsewhere) into the distributed Vec v."""
        if self.grid.da.comm.rank == 0:
            self.zero.getArray()[:] = np.asarray(arr).reshape(-1)
        self.scatter.scatter(self.zero, self.natural, addv=PETSc.InsertMode.INSERT_VALUES,
                             mode=PETSc.ScatterMode.REVERSE)
        self.grid.da.naturalToGlobal(self.natural, v)


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

    def record(self, t: float, vecs: dict) -> None:
        if not self.names:
            return
        arrays = {f: vecs[f].getArray(readonly=True) for f in self.fields}
        self.buffer.append((t, {(i, f): float(arrays[f][off]) for i, off in self.mine for f in self.fields}))

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


class Output:
    # What finish() writes; a resumed run drops it and writes it again at its own end.
    FINAL_GROUPS = ("maps", "solver", "timing")
    FINAL_ATTRS = ("simulated_ms", "wall_s")

    def __init__(self, cfg, grid, path: Path, stencil: str, layout: dict, comm, resume: dict | None = None):
        """Create the file, or with ``resume`` (a checkpoint's :meth:`position`) continue the existing one."""
        self.cfg = cfg
        self.comm = comm
        self.rank = comm.rank
        self.path = path
        self.fields = list(cfg.output.fields)
        self.gather = Gatherer(grid)
        self.probes = Probes(cfg, grid, ["Vm", "phi_e"] if cfg.simulation.equations == "bidomain" else ["Vm"])
        self.f = None
        if self.rank == 0 and resume is not None:
            self._resume(resume, layout)
        elif self.rank == 0:
            import h5py
            path.parent.mkdir(parents=True, exist_ok=True)
            f = self.f = h5py.File(path, "w")
            f.attrs["format"] = "cardiosim-1"
            f.attrs["cardiosim_version"] = __version__
            f.attrs["config"] = cfg.source_text
            f.attrs["config_name"] = cfg.source_name
            f.attrs["equations"] = cfg.simulation.equations
            f.attrs["units"] = json.dumps(UNITS)
            f.attrs["layout"] = json.dumps(layout)
            f.attrs["run_id"] = uuid.uuid4().hex   # ties checkpoints to this file
            g = f.create_group("grid")
            g.attrs["dim"] = grid.dim
            g.attrs["shape"] = grid.n
            g.attrs["spacing"] = grid.h
            g.attrs["size"] = grid.size
            g.attrs["stencil"] = stencil
            for d, name in enumerate("xyz"[: grid.dim]):
                g[name] = np.arange(grid.n[d]) * grid.h[d]
                g[name].attrs["units"] = "cm"
            fl = f.create_group("fields")
            fl.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8").attrs["units"] = "ms"
            shape = tuple(int(n) for n in reversed(grid.n))
            for name in self.fields:
                ds = fl.create_dataset(name, shape=(0, *shape), maxshape=(None, *shape), dtype="f8",
                                       chunks=(1, *shape))
                ds.attrs["units"] = "mV"
            pr = f.create_group("probes")
            pr.create_dataset("time", shape=(0,), maxshape=(None,), dtype="f8").attrs["units"] = "ms"
            for name, node, pos in zip(self.probes.names, self.probes.nodes, self.probes.positions):
                pg = pr.create_group(name)
                pg.attrs["position"] = pos
                pg.attrs["node_position"] = np.array(node) * grid.h
                for fld in self.probes.fields:
                    pg.create_dataset(fld, shape=(0,), maxshape=(None,), dtype="f8").attrs["units"] = "mV"
            f.create_group("solver")
            f.flush()

    @staticmethod
    def _append(ds, values):
        n = ds.shape[0]
        ds.resize(n + len(values), axis=0)
        ds[n:] = values

    def snapshot(self, t: float, vecs: dict) -> None:
        """Write the configured fields at time t (collective)."""
        gathered = {name: self.gather(vecs[name]) for name in self.fields}
        self.flush_probes()
        if self.rank == 0:
            fl = self.f["fields"]
            for name, arr in gathered.items():
                self._append(fl[name], arr[None])
            self._append(fl["time"], [t])
            self.f.flush()

    def flush_probes(self) -> None:
        got = self.probes.collect(self.comm)
        if self.rank == 0 and got is not None:
            times, values = got
            pr = self.f["probes"]
            self._append(pr["time"], times)
            for (i, fld), v in values.items():
                self._append(pr[self.probes.names[i]][fld], v)

    def write_map(self, name: str, local: np.ndarray, units: str, doc: str) -> None:
        """Gather a per-node array (owned nodes, PETSc local order) and store it as /maps/<name> (collective)."""
        v = self.gather.grid.vec()
        v.getArray()[:] = local
        arr = self.gather(v)
        v.destroy()
        if self.rank == 0:
            ds = self.f.require_group("maps").create_dataset(name, data=arr)
            ds.attrs["units"] = units
            ds.attrs["description"] = doc

    def finish(self, timing: dict, iterations: dict, extra: dict) -> None:
        self.flush_probes()
        if self.rank == 0:
            for name, its in iterations.items():
                self.f["solver"].create_dataset(f"{name}_iterations", data=np.array(its, dtype=np.int32))
            tg = self.f.require_group("timing")
            for k, v in timing.items():
                tg.attrs[k] = v["max"]
            for k, v in extra.items():
                self.f.attrs[k] = v
            self.f.close()
            self.f = None

    # -- continuing after a restart ------------------------------------------------------------------------------
    def position(self) -> dict:
        """What this file holds so far (rank 0, after flush_probes): a checkpoint records it, and a restart cuts the
        time-stacked datasets back to it before appending."""
        self.f.flush()
        return {"run_id": self.f.attrs["run_id"], "snapshots": int(self.f["fields/time"].shape[0]),
                "probe_samples": int(self.f["probes/time"].shape[0])}

    @staticmethod
    def check_resumable(path: Path, position: dict) -> None:
        """Refuse a restart whose output file is missing, unreadable, another run's, or shorter than the checkpoint
        says (rank 0, before anything is changed)."""
        import os
        import h5py
        if not path.is_file():
            raise UserError(f"output.path: {path} does not exist; a restart continues the output file that the "
                            f"checkpoint was written with (give it with --output)")
        if not os.access(path, os.R_OK | os.W_OK):
            raise UserError(f"output.path: {path} is not readable and writable; a restart appends to it")
        try:
            with h5py.File(path, "r") as f:
                run_id = f.attrs.get("run_id")
                have = (f["fields/time"].shape[0], f["probes/time"].shape[0])
        except (OSError, KeyError) as e:
            raise UserError(f"output.path: {path} is not a readable cardiosim output file ({e})") from None
        if run_id != position["run_id"]:
            raise UserError(f"output.path: {path} was written by another run than the checkpoint (run id {run_id} "
                            f"in the file, {position['run_id']} in the checkpoint)")
        want = (position["snapshots"], position["probe_samples"])
        if have[0] < want[0] or have[1] < want[1]:
            raise UserError(f"output.path: {path} holds {have[0]} snapshots and {have[1]} probe samples, fewer than "
                            f"the checkpoint's {want[0]} and {want[1]}; it was cut short or replaced")

    def _resume(self, position: dict, layout: dict) -> None:
        import h5py
        f = self.f = h5py.File(self.path, "r+")
        n, m = position["snapshots"], position["probe_samples"]
        for name in ["time", *self.fields]:
            f["fields"][name].resize(n, axis=0)
        f["probes/time"].resize(m, axis=0)
        for name in self.probes.names:
            for fld in self.probes.fields:
                f["probes"][name][fld].resize(m, axis=0)
        for g in self.FINAL_GROUPS:
            if g in f:
                del f[g]
        f.create_group("solver")   # as a new file has it
        for a in self.FINAL_ATTRS:
            f.attrs.pop(a, None)
        restarts = json.loads(f.attrs.get("restarts", "[]"))
        restarts.append({"snapshots": n, "probe_samples": m, "layout": layout})
        f.attrs["restarts"] = json.dumps(restarts)
        f.flush()

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = None

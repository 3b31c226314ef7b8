"""HDF5 output: field snapshots, probe traces, maps, the config and the run's metadata, written by rank 0.

Layout (docs/user/output-format.md has the full description)::

    /                    attrs: format, status, cardiosim_version, git_hash, config (TOML text), config_effective
                                (the config with every --set applied), overrides (JSON: the --set), config_name,
                                equations, cell_model, units (JSON), layout (JSON: ranks, hosts, GPUs), created
    /grid                attrs: dim, shape (x first), spacing (cm), size (cm), stencil; datasets x, y, z (cm)
    /fields/time         (n_snapshots,) ms
    /fields/Vm           (n_snapshots, [nz,] [ny,] nx) mV        chunked one snapshot per chunk; NaN outside the
                                                                 tissue (tissue.label_file)
    /fields/phi_e        (same) mV                               bidomain only
    /probes/time         (n_steps + 1,) ms                        every PDE step
    /probes/<name>/Vm    (n_steps + 1,) mV   (and phi_e)          attrs: position, node_position (cm)
    /fields/<state>, /probes/<name>/<state>                        output.states: cell states (and CellML models'
                                                                   intermediates), in the model's units
    /ecg/<name>          (n_steps + 1,) mV                        pseudo-ECG electrode or lead, at /probes/time
    /solver/<name>_iterations  (n_steps [+ 1],)                    Krylov iterations per step
    /maps/activation_time      ([nz,] [ny,] nx) ms                 first upward crossing of the threshold; NaN: none
    /maps/apd                  ([nz,] [ny,] nx) ms                 APD of the first beat at output.apd_level %
    /maps/tissue               ([nz,] [ny,] nx) 1                  1: tissue node (tissue.label_file), 0: outside
    /timing              attrs: per phase, seconds: max over ranks (<phase>) and mean (<phase>_mean)

Fields are gathered to rank 0 in natural order (x fastest), so ``f["fields/Vm"][i]`` indexes as [z, y, x].

A run killed at any moment (SIGKILL, a node failure) leaves a file that opens, holding every snapshot and probe
sample written before: every dataset the run writes into is created at its full planned length when the run
starts (space allocated, not written), so writing a snapshot changes no HDF5 metadata, only data; each entry's
time is written (and flushed) after its data, so an entry is complete exactly when its time is finite (NaN
beyond). When the run ends (finished, or stopped by an error) the datasets are trimmed to what was written and
``status`` says how it ended; the XDMF sidecar (cardiosim.output.xdmf) is rewritten as snapshots complete.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import uuid
from pathlib import Path

import numpy as np
from petsc4py import PETSc

from cardiosim import __version__
from cardiosim.analysis.probes import Probes, ecg_traces
from cardiosim.output import xdmf
from cardiosim.runtime.errors import SimulationError, UserError, io_reason, quiet_h5py_unraisable
from cardiosim.runtime.mpi import root_then_all
from cardiosim.analysis.ecg import sheet_thickness
from cardiosim.runtime import files
from cardiosim.runtime.files import Target
from cardiosim.runtime.resources import file_size_limit

FORMAT = "cardiosim-2"

UNITS = {"time": "ms", "x": "cm", "Vm": "mV", "phi_e": "mV", "conductivity": "mS/cm", "chi": "cm^-1",
         "Cm": "uF/cm^2", "stimulus": "uA/cm^2 or uA/cm^3"}


def snapshot_every(cfg) -> int:
    """PDE steps between field snapshots: output.interval in whole steps (at least one)."""
    return max(1, int(round(cfg.output.interval / cfg.simulation.dt)))


def planned_snapshots(n_steps: int, every: int) -> int:
    """Snapshots of a whole run: t = 0, every ``every`` steps, and the last step."""
    return 1 + n_steps // every + (1 if n_steps % every else 0)


def git_hash(src: Path | None = None) -> str:
    """The commit of the source tree cardiosim runs from (``src``: the package's directory), "-dirty" added if
    the checkout has uncommitted changes; "unknown" where it is not a git checkout (an installed wheel) or git is
    missing. Never raises."""
    src = src or Path(__file__).resolve().parents[1]

    def git(*args):
        return subprocess.run(["git", "-C", str(src), *args], capture_output=True, text=True, timeout=20)

    try:
        # The package must itself be tracked: an installed copy inside some other checkout is not that commit.
        if not git("ls-files", "__init__.py").stdout.strip():
            return "unknown"
        head = git("rev-parse", "HEAD")
        if head.returncode != 0:
            return "unknown"
        dirty = git("status", "--porcelain", "--untracked-files=no")
        return head.stdout.strip() + ("-dirty" if dirty.returncode == 0 and dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def resolve_path(cfg) -> Path:
    return Path(cfg.output.path) if cfg.output.path else Path("out") / f"{cfg.source_name}.h5"


def summary_path(path: Path) -> Path:
    """The run's JSON summary, written beside the output when the run ends."""
    return path.with_suffix(".json")


def write_summary(path: Path, summary: dict) -> None:
    """The JSON summary beside the output (rank 0), whole or not at all; a failed write is one line (exit 3)."""
    target = summary_path(path)
    tmp = target.with_name(f".{target.name}.part")
    try:
        tmp.write_text(json.dumps(summary, indent=2) + "\n")
        os.replace(tmp, target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise SimulationError(f"output: cannot write the summary {target} ({io_reason(e)}); {path} holds the "
                              f"finished run") from None


def run_targets(path: Path, checkpoint_path: Path | None) -> list:
    """Every file a run writes, by what the user calls it and what kind of file it is (cardiosim.runtime.files)."""
    targets = [Target("output.path", path, "run"), Target("the XDMF sidecar", xdmf.sidecar(path), "xdmf"),
               Target("the JSON summary", summary_path(path), "summary")]
    if checkpoint_path is not None:
        targets.append(Target("checkpoint.path", checkpoint_path, "checkpoint"))
    return targets


def output_lock(path: Path, what: str = "output.path") -> files.FileLock:
    """An exclusive claim on a path a run writes (its output, its checkpoint) for the whole run: a lock on
    ``.<name>.lock`` beside it, taken before anything is written, so that a second run on the same output or
    checkpoint is refused at its start instead of truncating the first one's file (or failing at its first
    checkpoint). The lock dies with the process (a killed run leaves a stale file, never a held lock)."""
    return files.FileLock(
        path.with_name(f".{path.name}.lock"), what, quiet_folders=True,   # files.check_existing says why
        busy=lambda holder: f"{what}: {path} is in use by another run ({holder or 'another process'}); wait for "
                            f"it to end or choose another {what}")


class Claim:
    """The locks of a run's output and checkpoint, held together for the run's duration (rank 0)."""

    def __init__(self, locks):
        self.locks = locks

    def release(self, refused: bool = False) -> None:
        for lock in reversed(self.locks):
            lock.release(refused)
        self.locks = []


def claim(cfg, path: Path, checkpoint_path: Path | None, overwrite: bool, resume: dict | None) -> Claim:
    """Everything about a run's files, before anything is computed or written (rank 0): no file it writes is one
    it reads (the config, label, fibre, conductivity, layout and CellML files) or another of its own; the output
    and the checkpoint not in use by another run (their locks, kept by the caller for the run's duration); and
    each file new, or --overwrite given and the file an earlier result of the same kind (a restart continues its
    own output and checkpoint)."""
    # lazy: cardiosim.config imports mpi4py (through cardiosim.reaction), which this module does not
    from cardiosim import config
    targets = run_targets(path, checkpoint_path)
    reads = config.input_files(cfg)
    # Names, collisions and folders first (nothing is made for them), then the locks, then what exists: a second
    # run is told that the first one holds the file, not that the file exists.
    files.check_places(targets, reads)
    locks = []
    try:
        locks.append(output_lock(path))
        if checkpoint_path is not None:
            locks.append(output_lock(checkpoint_path, "checkpoint.path"))
        if resume is not None:
            Output.check_resumable(path, resume)
        files.check_existing(targets, overwrite, allow=[t.what for t in targets] if resume is not None else ())
    except UserError:
        for lock in reversed(locks):
            lock.release(refused=True)
        raise
    return Claim(locks)


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


def records_samples(cfg) -> bool:
    """Whether a run writes per-step samples (/probes/time): probes or pseudo-ECG traces."""
    return bool(cfg.probe or ecg_traces(cfg))


class Output:
    # What finish() writes; a resumed run drops it and writes it again at its own end.
    FINAL_GROUPS = ("maps", "solver", "timing", "purkinje")
    FINAL_ATTRS = ("simulated_ms", "wall_s", "warnings")

    def __init__(self, cfg, grid, path: Path, stencil: str, layout: dict, comm, resume: dict | None = None,
                 units: dict | None = None, models: dict | None = None):
        """Create the file, or with ``resume`` (a checkpoint's :meth:`position`) continue the existing one.
        ``units``: of the cell states in output.states (mV for Vm and phi_e); ``models``: for each of them, the
        cell models whose cells it is recorded at (attribute ``cell_models`` of its datasets; NaN at others')."""
        self.cfg = cfg
        self.state_models = models or {}
        self.comm = comm
        self.rank = comm.rank
        self.path = path
        self.units = {"Vm": "mV", "phi_e": "mV", **(units or {})}
        # the cell states of output.states go where the fields go: snapshots and probes
        self.fields = list(cfg.output.fields) + list(cfg.output.states)
        self.gather = Gatherer(grid)
        # Snapshots hold NaN outside the tissue (tissue.label_file): a viewer shows the tissue, not the box.
        self.outside = None if grid.mask is None else ~grid.mask.tissue
        self.probes = Probes(cfg, grid, (["Vm", "phi_e"] if cfg.simulation.equations == "bidomain" else ["Vm"])
                             + list(cfg.output.states))
        self.f = None
        self.n_snapshots = 0              # complete snapshots in the file
        self.n_samples = 0                # complete probe samples
        if resume is not None:
            self._on_root("the reopened file", lambda: self._resume(cfg, grid, resume, layout))
        else:
            self._on_root("the new file", lambda: self._create(cfg, grid, stencil, layout))

    def _on_root(self, what: str, write) -> None:
        """Rank 0 writes; a failure there (a full disk, a vanished directory) stops every rank with one line
        instead of leaving the others in the next collective (collective)."""
        def attempt():
            try:
                write()
            except (OSError, RuntimeError) as e:    # h5py: OSError, or RuntimeError from HDF5's own layers
                error = io_reason(e)
                self._stop_after_failed_write()
                raise SimulationError(f"output: cannot write {what} to {self.path} ({error}); the file keeps every "
                                      f"snapshot completed before") from None
        root_then_all(self.comm, attempt, share=False)

    def _create(self, cfg, grid, stencil, layout) -> None:
        import shutil
        import h5py
        n_steps = cfg.simulation.n_steps
        n_snap = planned_snapshots(n_steps, snapshot_every(cfg))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # The datasets are laid out at their full length now and filled as the run goes: a disk that cannot hold
        # them is refused before anything is computed (a disk that fills up later still stops the run, one line).
        need = 8 * (n_snap * (1 + grid.n_nodes * len(self.fields))
                    + (n_steps + 1) * (1 + len(self.probes.names) * len(self.probes.fields)
                                       + len(self.probes.ecg_names))) + (1 << 20)
        free = shutil.disk_usage(self.path.parent).free
        if free < need:
            raise UserError(f"output.path: {self.path.parent} has {free / 1e6:.3g} MB free; this run's output needs "
                            f"about {need / 1e6:.3g} MB (fewer snapshots: raise output.interval or drop fields)")
        limit = file_size_limit()
        if limit is not None and limit < need:
            raise UserError(f"output.path: this run's output needs about {need / 1e6:.3g} MB, more than this "
                            f"process may write to one file (ulimit -f: {limit / 1e6:.3g} MB); raise the limit, or "
                            f"write fewer snapshots (output.interval) or fields")
        # The HDF5 1.8 format: readable by every HDF5 since 2008, attributes of any size, and no "file open for
        # writing" flag that would stop a killed run's file from opening. No chunk cache: each write goes to the
        # disk at once, so a full disk or a file-size limit (EFBIG) fails that write and leaves nothing dirty
        # behind; with a cache, the chunk that cannot be written fails every later flush, the status cannot be
        # marked, and HDF5 crashes when the process exits (measured: a segmentation fault, exit 139). Made under a
        # temporary name and renamed into place once its layout is on disk: a run killed before that leaves an
        # earlier file (with --overwrite) as it was, never a file that does not open.
        self.part = self.path.with_name(f".{self.path.name}.part")
        f = self.f = h5py.File(self.part, "w", libver=("v108", "v108"), rdcc_nbytes=0)
        f.attrs["format"] = FORMAT
        f.attrs["status"] = "running"
        f.attrs["cardiosim_version"] = __version__
        f.attrs["git_hash"] = git_hash()
        f.attrs["created"] = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
        f.attrs["config"] = cfg.source_text
        # what ran: the config with every --set applied (TOML; the same text where none was given), and the --set
        f.attrs["config_effective"] = cfg.effective_text or cfg.source_text
        f.attrs["overrides"] = json.dumps(cfg.overrides)
        f.attrs["config_name"] = cfg.source_name
        f.attrs["equations"] = cfg.simulation.equations
        f.attrs["cell_model"] = " + ".join([cfg.cell.model + (f" ({cfg.cell.variant})" if cfg.cell.variant else ""),
                                            *cfg.cell.models()[1:]])    # several: cell.regions name the others
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
            g[name] = np.arange(grid.n[d]) * grid.h[d] + grid.offset[d]
            g[name].attrs["units"] = "cm"
        # Handles to every dataset a snapshot writes (looking them up by path each time costs more than writing).
        fl = f.create_group("fields")
        self.time = _planned(fl, "time", (n_snap,), "ms")
        shape = tuple(int(n) for n in reversed(grid.n))
        self.data = {name: _planned(fl, name, (n_snap, *shape), self.units[name], chunks=(1, *shape), fill=False)
                     for name in self.fields}
        for name, models in self.state_models.items():       # which model a recorded cell state belongs to
            self.data[name].attrs["cell_models"] = json.dumps(models)
        pr = f.create_group("probes", track_order=True)    # the config's order
        self.probe_time = _planned(pr, "time", (n_steps + 1,), "ms")
        self.traces = {}
        for i, (name, node, pos) in enumerate(zip(self.probes.names, self.probes.nodes, self.probes.positions)):
            pg = pr.create_group(name)
            pg.attrs["position"] = pos
            pg.attrs["node_position"] = grid.node_position(node)
            for fld in self.probes.fields:
                self.traces[i, fld] = _planned(pg, fld, (n_steps + 1,), self.units[fld])
                if fld in self.state_models:
                    self.traces[i, fld].attrs["cell_models"] = json.dumps(self.state_models[fld])
        if self.probes.ecg_names:
            e = cfg.ecg
            eg = f.create_group("ecg", track_order=True)
            eg.attrs["bath_conductivity"] = e.bath_conductivity
            eg.attrs["sheet_thickness"] = sheet_thickness(cfg, grid)
            eg.attrs["description"] = ("pseudo-ECG (Gima-Rudy, infinite homogeneous bath of bath_conductivity "
                                       "mS/cm; 2D: a sheet of sheet_thickness cm), sampled at /probes/time")
            for x in e.electrodes:
                self.traces["ecg", x.name] = _planned(eg, x.name, (n_steps + 1,), "mV")
                self.traces["ecg", x.name].attrs["position"] = x.position
            for x in e.leads:
                self.traces["ecg", x.name] = _planned(eg, x.name, (n_steps + 1,), "mV")
                self.traces["ecg", x.name].attrs["lead"] = x.formula()
        f.create_group("solver")
        self.sidecar = xdmf.Sidecar(self.path, shape, grid.h, self.fields, grid.offset)
        f.flush()
        import os
        os.replace(self.part, self.path)
        self.part = None
        summary_path(self.path).unlink(missing_ok=True)   # an earlier run's (--overwrite), no longer this file's

    def snapshot(self, t: float, vecs: dict) -> None:
        """Write the configured fields at time t, and the probe samples so far (collective)."""
        gathered = {name: self.gather(vecs[name]) for name in self.fields}
        if self.outside is not None and self.rank == 0:
            for arr in gathered.values():
                arr[self.outside] = np.nan
        self.flush_probes()

        def write():
            i = self.n_snapshots
            for name, arr in gathered.items():
                self.data[name][i] = arr
            self._commit(self.time, i, [t])
            self.n_snapshots += 1
            self.sidecar.add(t, {f"/fields/{n}": ds.shape for n, ds in self.data.items()})
        self._on_root(f"the snapshot at t = {t:g} ms", write)

    def _commit(self, time_ds, start: int, times) -> None:
        """Data first, then the times that mark it complete, each made durable by a flush."""
        self.f.flush()
        time_ds[start:start + len(times)] = times
        self.f.flush()

    def flush_probes(self) -> None:
        got = self.probes.collect(self.comm)
        if not self.comm.bcast(got is not None, root=0):
            return

        def write():
            times, values = got
            a, b = self.n_samples, self.n_samples + len(times)
            for key, v in values.items():
                self.traces[key][a:b] = v
            self._commit(self.probe_time, a, times)
            self.n_samples = b
        self._on_root("the probe traces", write)

    def write_map(self, name: str, local: np.ndarray, units: str, doc: str, **attrs) -> None:
        """Gather a per-node array (owned nodes, PETSc local order) and store it as /maps/<name> (collective)."""
        v = self.gather.grid.vec()
        v.getArray()[:] = local
        arr = self.gather(v)
        v.destroy()

        def write():
            ds = self.f.require_group("maps").create_dataset(name, data=arr)
            ds.attrs["units"] = units
            ds.attrs["description"] = doc
            for k, val in attrs.items():
                ds.attrs[k] = val
        self._on_root(f"the map {name}", write)

    def write_group(self, name: str, arrays: dict, attrs: dict, what: str) -> None:
        """Arrays that are not per grid node as /<name>/<array> (``arrays``: {array: (values, units, description)},
        rank 0's), with the group's ``attrs`` (collective)."""
        def write():
            g = self.f.require_group(name)
            for k, v in attrs.items():
                g.attrs[k] = v
            for k, (values, units, doc) in arrays.items():
                ds = g.create_dataset(k, data=values)
                ds.attrs["units"] = units
                ds.attrs["description"] = doc
        self._on_root(what, write)

    def write_tissue(self, arrays, attrs: dict) -> None:
        """The microscopic model's layout as /tissue (``arrays``: a function giving {name: natural-order array},
        called on rank 0 only; collective)."""
        def write():
            g = self.f.require_group("tissue")
            for k, v in attrs.items():
                g.attrs[k] = v
            for name, arr in arrays().items():
                ds = g.create_dataset(name, data=arr, compression="gzip", compression_opts=1, shuffle=True)
                ds.attrs["units"] = "uS" if name.startswith("face_g") else "1"
            self.f.flush()
        self._on_root("the myocyte layout", write)

    def finish(self, timing: dict, iterations: dict, extra: dict) -> None:
        self.flush_probes()
        self._on_root("the end of the run", lambda: self._finish(timing, iterations, extra))

    def _finish(self, timing: dict, iterations: dict, extra: dict) -> None:
        for name, its in iterations.items():
            ds = self.f["solver"].create_dataset(f"{name}_iterations", data=np.array(its, dtype=np.int32))
            ds.attrs["units"] = "1"
            ds.attrs["description"] = "Krylov iterations per step"
        tg = self.f.require_group("timing")
        tg.attrs["units"] = "s"
        for k, v in timing.items():
            tg.attrs[k] = v["max"]
            tg.attrs[f"{k}_mean"] = v["mean"]
        for k, v in extra.items():
            self.f.attrs[k] = v
        self._close("finished")

    # -- continuing after a restart ------------------------------------------------------------------------------
    def position(self) -> dict:
        """What this file holds so far (rank 0, after flush_probes): a checkpoint records it, and a restart continues
        from it."""
        self.f.flush()
        return {"run_id": self.f.attrs["run_id"], "snapshots": self.n_snapshots, "probe_samples": self.n_samples}

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
                have = (_complete(f["fields/time"]), _complete(f["probes/time"]))
        except (OSError, KeyError) as e:
            raise UserError(f"output.path: {path} is not a readable cardiosim output file ({e})") from None
        if run_id != position["run_id"]:
            raise UserError(f"output.path: {path} was written by another run than the checkpoint (run id {run_id} "
                            f"in the file, {position['run_id']} in the checkpoint)")
        want = (position["snapshots"], position["probe_samples"])
        if have[0] < want[0] or have[1] < want[1]:
            raise UserError(f"output.path: {path} holds {have[0]} snapshots and {have[1]} probe samples, fewer than "
                            f"the checkpoint's {want[0]} and {want[1]}; it was cut short or replaced")

    def _resume(self, cfg, grid, position: dict, layout: dict) -> None:
        """Reopen the file at the checkpoint's position: every dataset back at this run's planned length, the
        entries after the position marked incomplete (NaN time), what finish() wrote removed."""
        import h5py
        f = self.f = h5py.File(self.path, "r+", rdcc_nbytes=0)     # no chunk cache: see _create
        n, m = position["snapshots"], position["probe_samples"]
        n_steps = cfg.simulation.n_steps
        n_snap = max(planned_snapshots(n_steps, snapshot_every(cfg)), n)
        fl, pr = f["fields"], f["probes"]
        self.time = fl["time"]
        self.data = {name: fl[name] for name in self.fields}
        self.probe_time = pr["time"]
        self.traces = {(i, fld): pr[name][fld] for i, name in enumerate(self.probes.names)
                       for fld in self.probes.fields}
        self.traces.update({("ecg", name): f["ecg"][name] for name in self.probes.ecg_names})
        for ds in (self.time, *self.data.values()):
            ds.resize(n_snap, axis=0)
        for ds in (self.probe_time, *self.traces.values()):
            ds.resize(max(n_steps + 1, m), axis=0)
        self.time[n:] = np.nan
        self.probe_time[m:] = np.nan
        self.n_snapshots, self.n_samples = n, m
        for g in self.FINAL_GROUPS:
            if g in f:
                del f[g]
        f.create_group("solver")   # as a new file has it
        for a in self.FINAL_ATTRS:
            f.attrs.pop(a, None)
        f.attrs["status"] = "running"
        f.attrs.pop("stopped_by", None)
        # the config as this (last) segment runs it: a restart may change the free keys (simulation.duration, ...)
        f.attrs["config_effective"] = cfg.effective_text or cfg.source_text
        f.attrs["overrides"] = json.dumps(cfg.overrides)
        restarts = json.loads(f.attrs.get("restarts", "[]"))
        restarts.append({"snapshots": n, "probe_samples": m, "layout": layout})
        f.attrs["restarts"] = json.dumps(restarts)
        shape = tuple(int(k) for k in reversed(grid.n))
        self.sidecar = xdmf.Sidecar(self.path, shape, grid.h, self.fields, grid.offset)
        datasets = {f"/fields/{name}": ds.shape for name, ds in self.data.items()}
        for t in self.time[:n]:
            self.sidecar.add(float(t), datasets)
        f.flush()

    def _stop_after_failed_write(self) -> None:
        """After a write failed (a full disk, a file-size limit): mark the file ``stopped`` if that can still be
        written (it can, measured with EFBIG and without a chunk cache: the status is rewritten in place), and close
        it; what is on disk is every entry completed before. Never raises."""
        if self.f is not None and getattr(self, "part", None) is None:
            try:
                self.f.attrs["status"] = "stopped"
                self.f.flush()
            except (OSError, RuntimeError):
                pass
        self._abandon()

    def _abandon(self) -> None:
        """Close the file after a failed write without trying to write more. What is on disk is the state of the
        last flush (every completed snapshot); HDF5 repeats the failure while its objects are freed, which Python
        could only print as 'Exception ignored' tracebacks: those, and only those, are silenced."""
        quiet_h5py_unraisable()
        if self.f is not None:
            try:
                self.f.close()
            except (OSError, RuntimeError):
                pass
            self.f = None
        if getattr(self, "part", None) is not None:    # never renamed into place: not a file of this run
            self.part.unlink(missing_ok=True)
            self.part = None
        xdmf.sidecar(self.path).with_name(f".{xdmf.sidecar(self.path).name}.tmp").unlink(missing_ok=True)

    def close(self, why: str = "error") -> None:
        """End a run that stopped early: keep what was written, trimmed, and say so (``why``: "error", or
        "checkpoint" for a clean stop on a signal, as the ``stopped_by`` attribute). Never raises: a run that
        stopped because the disk is full cannot trim either, and its file is readable as it is."""
        if self.f is not None:
            try:
                self.f.attrs["stopped_by"] = why
                self._close("stopped")
            except (OSError, RuntimeError):
                self._abandon()

    def _close(self, status: str) -> None:
        for ds in (self.time, *self.data.values()):
            ds.resize(self.n_snapshots, axis=0)
        for ds in (self.probe_time, *self.traces.values()):
            ds.resize(self.n_samples, axis=0)
        self.f.attrs["status"] = status
        datasets = {f"/fields/{n}": ds.shape for n, ds in self.data.items()}
        maps = self.f.get("maps", {})
        datasets.update({f"/maps/{n}": maps[n].shape for n in maps})
        self.sidecar.finish(datasets, sorted(maps))
        self.f.close()
        self.f = None


def _complete(time_ds) -> int:
    """Entries of a time-stacked dataset that were completed: the leading finite times."""
    t = time_ds[:]
    bad = np.flatnonzero(~np.isfinite(t))
    return int(bad[0]) if bad.size else int(t.size)


def _planned(group, name: str, shape: tuple, units: str, chunks=None, fill: bool = True):
    """A dataset at its full planned length, its file space allocated now, so that filling it in later changes
    only data, never HDF5 metadata (what keeps a killed run's file readable). ``fill``: NaN in every entry now
    (cheap for traces and times); otherwise unwritten entries read as 0 and cost no disk space (sparse)."""
    import h5py
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    if not fill:
        dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    # Without a chunk cache (Output._create) every write reads and writes its whole chunk: 4096 entries (32 KB) keep
    # that small for the traces and times written a few entries at a time.
    ds = group.create_dataset(name, shape=shape, maxshape=(None, *shape[1:]), dtype="f8",
                              chunks=chunks or (min(shape[0], 4096) or 1, *shape[1:]), fillvalue=np.nan,
                              dcpl=dcpl)
    ds.attrs["units"] = units
    return ds

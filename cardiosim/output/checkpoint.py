"""Checkpoints: every piece of a run's state in one HDF5 file, so that a run can stop and go on later, on the same
or another number of ranks (docs/user/checkpoints.md).

What a step carries to the next, and so what a checkpoint holds: the time (as the step index), Vm, φe (used
lagged by the parabolic step and as the elliptic solve's initial guess: the only warm-start data), every cell state,
the analysis accumulators (activation map, ...), the solver iteration counts written at the end, how far the
output file has got, and with [purkinje] the network's arrays (its cells' states, activation times, PMJ charges
and tissue-side crossings: cardiosim.purkinje.system.STATE, rank 0's). Nothing else is carried: Crank–Nicolson and Strang splitting start each step from Vm alone,
the matrices and preconditioners are rebuilt identically from the config, and the stimuli are a pure function of t
(stimulus.Protocol.active), so there is no stimulus bookkeeping to save.

Rank 0 gathers each per-node array in natural order (x fastest, stored in the output's [z,] [y,] x shape) and writes
``<path>.tmp``, which replaces the previous checkpoint only once it is complete (os.replace). A restart reads them
on rank 0 and scatters them back through the DMDA's natural ordering, whatever the new decomposition.

When: every ``checkpoint.interval`` ms of simulated time, every ``checkpoint.wall_interval`` s of wall time (rank 0's
clock), and on SIGTERM/SIGUSR1, after which the run stops with exit status STOPPED. A signal only raises a flag;
the ranks agree on it in the collective that ends every step (reaction.Reaction.check), so all of them write the
same step's state.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import signal
import time
from pathlib import Path

import numpy as np

from cardiosim import __version__, cells
from cardiosim.runtime.errors import SimulationError, UserError, io_reason
from cardiosim.runtime.mpi import root_then_all
# the stop signals, caught from the start by cardiosim.cli; STOPPED, the exit status of a clean stop on one
from cardiosim.runtime.signals import SIGNALS, STOPPED, flag as _flag, received as _received
from cardiosim.runtime.files import check_input

FORMAT = "cardiosim-checkpoint-2"   # -2: every attribute and dataset under one checksum (digests)
# Written before the checksums (tests/data/legacy): still restarted; its datasets have Fletcher-32 checksums, its
# attributes only the cross-checks (_cross_check), and the restart says so.
LEGACY_FORMAT = "cardiosim-checkpoint-1"


# Keys a restart may change; every other key must equal the checkpointed run's (the physics, the grid, the model,
# the probes and fields of the output file). A prefix ending in "." stands for a whole section. Where and how the
# cells are integrated may change (a job moved from a CPU partition to a GPU partition): backend, placement, kernel
# variant, exchange and groups hold the same states and integrate the same equations, with the backends'
# round-off differences (tests/test_restart.py). So may the decomposition (grid.balance): the arrays are stored in
# natural order.
FREE_KEYS = ("simulation.duration", "simulation.progress_interval", "grid.balance", "output.path", "checkpoint.",
             "checks.", "cell.backend", "cell.placement", "cell.kernel", "cell.exchange", "cell.groups_per_node",
             "cell.share_gpu")


def state_datasets(cfg) -> list[str]:
    """The datasets of the cell states, one per cell model (cardiosim.reaction.multimodel): ``states`` for
    cell.model's cells (as in a one-model run), ``populations/<i>`` for the i-th other model of cell.models()."""
    return ["states", *(f"populations/{i}" for i in range(1, len(cfg.cell.models())))]


def region_models(cfg) -> list[str]:
    """The model of the cells outside every region, then of each cell.regions entry's (what a restart must keep)."""
    return [cfg.cell.model_of(r) for r in [None, *cfg.cell.regions]]


def resolve_path(cfg, output_path: Path) -> Path:
    """checkpoint.path, or beside the output: out/demo.h5 -> out/demo.ckpt.h5."""
    return Path(cfg.checkpoint.path) if cfg.checkpoint.path else output_path.with_suffix(".ckpt.h5")


def physics(cfg, defaults: bool = False) -> dict:
    """The config as {dotted key: value}, less the keys a restart may change; with ``defaults``, every key's default
    instead of its value (for checkpoints written before a key existed: they were run with its default)."""
    flat = {}

    def default_of(f, value):
        if f.default is not dataclasses.MISSING:
            return f.default
        if f.default_factory is not dataclasses.MISSING:
            return f.default_factory()
        return value

    def walk(prefix, value):
        if dataclasses.is_dataclass(value):
            for f in dataclasses.fields(value):
                if not f.metadata.get("internal"):
                    v = getattr(value, f.name)
                    tables = isinstance(v, list) and v and dataclasses.is_dataclass(v[0])   # [[...]] items
                    walk(f"{prefix}{f.name}.", v if not defaults or dataclasses.is_dataclass(v) or tables
                         else default_of(f, v))
        elif isinstance(value, list) and value and dataclasses.is_dataclass(value[0]):
            for i, v in enumerate(value):
                walk(f"{prefix[:-1]}[{i}].", v)
        else:
            key = prefix[:-1]
            if not any(key == k or (k.endswith(".") and key.startswith(k)) for k in FREE_KEYS):
                flat[key] = value
    walk("", cfg)
    return flat


def _differences(then: dict, now: dict) -> str:
    keys = sorted(set(then) | set(now))
    diff = [k for k in keys if then.get(k, "(absent)") != now.get(k, "(absent)")]
    shown = "; ".join(f"{k} = {json.dumps(then.get(k, '(absent)'))} there, {json.dumps(now.get(k, '(absent)'))} here"
                      for k in diff[:3])
    return shown + (f"; and {len(diff) - 3} more" if len(diff) > 3 else "")


class Schedule:
    """When to write: every ``interval`` steps, every ``wall_interval`` s (rank 0's clock) and on a signal, which
    also stops the run. ``requests()`` is this rank's contribution to the step's collective (a bit mask)."""

    STOP, WALL = 1, 2

    def __init__(self, cfg, dt: float, comm):
        c = cfg.checkpoint
        self.every = max(1, int(round(c.interval / dt))) if c.interval > 0 else 0
        self.wall = c.wall_interval
        self.is_root = comm.rank == 0
        self.last_wall = time.perf_counter()
        self.on_signal = c.on_signal
        self.previous = {}
        for s in SIGNALS:
            if c.on_signal:
                self.previous[s] = signal.signal(s, _flag)
            else:   # the signals' usual effect: SIGINT a KeyboardInterrupt, the others end the process
                self.previous[s] = signal.signal(s, signal.default_int_handler if s == signal.SIGINT
                                                 else signal.SIG_DFL)
        if _received and not c.on_signal:   # one came during set-up: what it would have done then
            signal.raise_signal(_received[0])

    @property
    def signalled(self) -> bool:
        return self.on_signal and bool(_received)

    def requests(self) -> int:
        r = self.STOP if self.signalled else 0
        if self.wall and self.is_root and time.perf_counter() - self.last_wall >= self.wall:
            r |= self.WALL
        return r

    def due(self, step: int, agreed: int) -> bool:
        return bool(agreed) or (self.every > 0 and step % self.every == 0)

    def written(self) -> None:
        self.last_wall = time.perf_counter()

    def close(self) -> None:
        for s, h in self.previous.items():
            signal.signal(s, h)
        self.previous = {}


# ---------------------------------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------------------------------
def save(sim, path: Path) -> None:
    """Write sim's state to ``path`` (collective). The output file is flushed first, so that what the checkpoint
    says was written is on disk. A failure (full disk, ...) leaves the previous checkpoint and the output as they
    were and stops every rank with one line."""
    out, comm = sim.output, sim.comm
    out.flush_probes()
    root = comm.rank == 0
    position = {}
    model = sim.reaction.model
    gather = out.gather
    work = sim.grid.vec()
    tmp = path.with_name(path.name + ".tmp")
    f, error = None, None

    def attempt(action):
        nonlocal error
        if root and error is None:
            try:
                action()
            except Exception as e:   # an I/O error on rank 0 must not leave the others in a collective
                error = e

    def put(name, local, **attrs):
        """Gather a per-node array with any leading axes, row by row (collective), into dataset ``name``."""
        local = np.asarray(local)
        lead = local.shape[:-1]
        field = tuple(int(n) for n in reversed(sim.grid.n))

        def create():   # one chunk per row; the checksum makes a damaged file fail loudly on restart
            f.create_dataset(name, shape=lead + field, dtype="f8", chunks=(1,) * len(lead) + field,
                             fletcher32=True).attrs.update(attrs)
        attempt(create)
        for idx in np.ndindex(*lead):
            work.getArray()[:] = local[idx]
            arr = gather(work)
            attempt(lambda: f[name].__setitem__(idx, arr))

    def open_tmp():
        nonlocal f
        import h5py
        path.parent.mkdir(parents=True, exist_ok=True)
        # No chunk cache: each row goes to disk as it is written, so a full disk shows up here, as an exception,
        # and not later while HDF5 closes objects (where it could only print).
        f = h5py.File(tmp, "w", rdcc_nbytes=0)
        a = f.attrs
        a["format"] = FORMAT
        a["cardiosim_version"] = __version__
        a["written"] = datetime.datetime.now().isoformat(timespec="seconds")
        a["t"] = sim.t
        a["step"] = sim.step_index
        a["dt"] = sim.dt
        a["equations"] = sim.cfg.simulation.equations
        a["cell_model"] = model.name
        a["region_models"] = json.dumps(region_models(sim.cfg))
        a["grid_shape"] = np.array(sim.grid.n)
        a["mpi_ranks"] = comm.size
        a["physics"] = json.dumps(physics(sim.cfg))
        a["config"] = sim.cfg.source_text
        a["output"] = json.dumps({"path": str(out.path), **position})
        for name, its in sim.tissue.iterations().items():
            its = np.array(its, dtype=np.int64)
            f.create_dataset(f"solver/{name}_iterations", data=its, fletcher32=its.size > 0,
                             chunks=its.shape if its.size else None)

    attempt(lambda: position.update(out.position()))
    attempt(open_tmp)
    put("fields/Vm", sim.V.getArray(readonly=True), units="mV")
    put("fields/phi_e", sim.phi.getArray(readonly=True), units="mV")
    for name, mc, states in zip(state_datasets(sim.cfg), sim.reaction.model_cells, sim.reaction.host_states()):
        put(name, states, names=[s.name for s in mc.model.states], units=[s.unit for s in mc.model.states],
            model=mc.name)
    for acc_name, acc in sim.accumulators.items():
        for key, value in acc.state().items():
            if np.ndim(value) == 0:
                attempt(lambda: f.require_group(f"accumulators/{acc_name}").attrs.__setitem__(key, value))
            else:
                put(f"accumulators/{acc_name}/{key}", value)
    if sim.purkinje is not None:        # the network's arrays, rank 0's (cardiosim.purkinje.system.STATE)
        network = sim.purkinje.state()
        attempt(lambda: [f.create_dataset(f"purkinje/{k}", data=v, fletcher32=v.size > 0,
                                          chunks=v.shape if v.size else None) for k, v in network.items()])
    work.destroy()

    def commit():
        seal(f)
        f.close()
        _fsync(tmp)
        os.replace(tmp, path)     # atomic: the old checkpoint stays whole until this moment
        _fsync(path.parent)
    attempt(commit)

    def give_up():
        """Rank 0, after a failure: the temporary file removed; the failure is raised on every rank."""
        if error is None:
            return
        try:
            if f is not None:
                f.close()
        except Exception:
            pass
        tmp.unlink(missing_ok=True)
        # Simulation.run adds where the last checkpoint is
        raise SimulationError(f"checkpoint: cannot write {path} at t = {sim.t:.6g} ms ({io_reason(error)}); "
                              f"the output {out.path} keeps everything written so far")
    root_then_all(comm, give_up, share=False)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------------------------
# Integrity: one checksum per piece (every attribute, every dataset), and one over those
# ---------------------------------------------------------------------------------------------------------------
DIGEST_ATTRS = ("digests", "digest")   # where the checksums live; everything else is under them


def _canonical(value) -> bytes:
    """An attribute's value as bytes that change whenever the value does (type and shape included)."""
    if isinstance(value, str):
        return b"str:" + value.encode()
    if isinstance(value, bytes):
        return b"bytes:" + value
    a = np.asarray(value)
    if a.dtype.kind == "O":
        return b"obj:" + repr(a.tolist()).encode()
    return f"{a.dtype.str}{a.shape}:".encode() + np.ascontiguousarray(a).tobytes()


def digests(f) -> dict:
    """{piece: sha256 hex} of every attribute (``/path@name``) and every dataset (``/path``) of an open file;
    datasets are read one leading index at a time."""
    import hashlib
    import h5py
    out = {}

    def attrs(path, obj):
        for k in obj.attrs:
            if path == "/" and k in DIGEST_ATTRS:
                continue
            out[f"{path}@{k}"] = hashlib.sha256(_canonical(obj.attrs[k])).hexdigest()

    def visit(name, obj):
        path = "/" + name
        attrs(path, obj)
        if isinstance(obj, h5py.Dataset):
            h = hashlib.sha256(f"{obj.dtype.str}{obj.shape}:".encode())
            try:
                if obj.ndim and obj.shape[0] and obj.size:
                    for i in range(obj.shape[0]):
                        h.update(np.ascontiguousarray(obj[i]).tobytes())
                elif obj.size:
                    h.update(np.ascontiguousarray(obj[()]).tobytes())
            except OSError as e:       # HDF5's own chunk checksum (Fletcher-32) failed, or worse
                raise Unreadable(path, e) from None
            out[path] = h.hexdigest()
    attrs("/", f)
    f.visititems(visit)
    return out


class Unreadable(Exception):
    def __init__(self, path, error):
        super().__init__(f"dataset {path} cannot be read ({str(error).splitlines()[0] if str(error) else error})")


def _overall(table: str) -> str:
    import hashlib
    return hashlib.sha256(table.encode()).hexdigest()


def seal(f) -> None:
    """Write the checksums of everything in ``f`` into it (last, just before it is closed)."""
    table = json.dumps(digests(f), sort_keys=True)
    f.attrs["digests"] = table
    f.attrs["digest"] = _overall(table)


def verify(f, where: str) -> None:
    """Refuse a checkpoint any piece of which differs from what was written (one flipped bit anywhere)."""
    table, overall = f.attrs.get("digests"), f.attrs.get("digest")
    if not isinstance(table, str) or not isinstance(overall, str):
        raise UserError(f"{where}: has no checksums (written by a cardiosim before {FORMAT}, or damaged); "
                        f"it cannot be trusted, start the run afresh")
    if _overall(table) != overall:
        raise UserError(f"{where}: the file is damaged (its table of checksums does not match its checksum); "
                        f"start from an earlier copy or afresh")
    want = json.loads(table)
    try:
        have = digests(f)
    except Unreadable as e:
        raise UserError(f"{where}: the file is damaged: {e}; start from an earlier copy or afresh") from None
    bad = sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k))
    if bad:
        def name(k):
            pretty = k.replace("/@", "attribute ").replace("@", " attribute ") if "@" in k else f"dataset {k}"
            if k not in want:
                return f"{pretty} (not written with the checkpoint)"
            if k not in have:
                return f"{pretty} (missing)"
            return pretty
        shown = ", ".join(name(k) for k in bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise UserError(f"{where}: the file is damaged: {shown} differ(s) from what was written (checksum); "
                        f"start from an earlier copy or afresh")


# ---------------------------------------------------------------------------------------------------------------
# Reading
# ---------------------------------------------------------------------------------------------------------------
class Checkpoint:
    """A checkpoint opened for a restart: metadata on every rank; arrays read on rank 0 and scattered on demand."""

    def __init__(self, path: Path, meta: dict, comm):
        self.path, self.comm = path, comm
        self.t, self.step, self.output = meta["t"], meta["step"], meta["output"]
        self.iterations = meta["iterations"]
        self.f = None
        if comm.rank == 0:
            import h5py
            self.f = h5py.File(path, "r")

    @classmethod
    def open(cls, path: Path, cfg, n_steps: int, comm) -> Checkpoint:
        """Check the file on rank 0 against the config; every rank raises the same UserError if it does not fit."""
        meta = root_then_all(comm, lambda: _read_meta(Path(path), cfg, n_steps))
        if meta.get("legacy"):
            # lazy: cardiosim.runtime.log imports mpi4py, which this module does not
            from cardiosim.runtime import log
            log.info(f"--restart {path}: format {LEGACY_FORMAT}, written before checkpoints had checksums of every "
                     f"piece: its datasets are checked (Fletcher-32), its attributes only against each other")
        return cls(Path(path), meta, comm)

    def read(self, name: str, gather, v) -> np.ndarray:
        """Dataset ``name`` (natural order) into this rank's nodes: a copy, shape (leading axes..., n_local)
        (collective). A read error (a corrupt file) is one line on every rank."""
        def on_root(action, share):
            """``action()`` on rank 0; its failure is the same UserError on every rank."""
            def read():
                try:
                    return action()
                except (OSError, KeyError, ValueError) as e:
                    raise UserError(f"--restart {self.path}: cannot read {name}: {e}; the file is damaged") from None
            return root_then_all(self.comm, read, share=share)

        lead = on_root(lambda: self.f[name].shape[:-gather.grid.dim], share=True)
        out = []
        for idx in np.ndindex(*lead):
            gather.distribute(on_root(lambda: self.f[name][idx], share=False), v)
            out.append(v.getArray(readonly=True).copy())
        return np.array(out).reshape(*lead, -1)

    def accumulator(self, name: str, gather, v) -> dict:
        """A saved accumulator state (see analysis.ActivationMap.state), arrays scattered to this rank."""
        def keys():
            g = self.f.get(f"accumulators/{name}")
            return ([], {}) if g is None else (sorted(g.keys()), dict(g.attrs))
        arrays, scalars = root_then_all(self.comm, keys)
        if not arrays and not scalars:
            raise UserError(f"--restart {self.path}: holds no state of the {name} accumulator")
        return {**scalars, **{k: self.read(f"accumulators/{name}/{k}", gather, v) for k in arrays}}

    def purkinje(self) -> dict:
        """Rank 0: the Purkinje network's arrays ({name: array}); {} elsewhere. Call it through root_then_all: a
        read error is a UserError naming the file."""
        if self.f is None:
            return {}
        try:
            g = self.f["purkinje"]
            return {k: g[k][()] for k in g}
        except (OSError, KeyError, ValueError) as e:
            raise UserError(f"--restart {self.path}: cannot read the Purkinje network's state: {e}; the file is "
                            f"damaged") from None

    def close(self) -> None:
        if self.f is not None:
            self.f.close()
            self.f = None


def _read_meta(path: Path, cfg, n_steps: int) -> dict:
    import h5py
    where = f"--restart {path}"
    check_input("--restart", path, "checkpoint file")
    try:
        with h5py.File(path, "r") as f:
            a = f.attrs
            if a.get("format") not in (FORMAT, LEGACY_FORMAT):
                raise UserError(f"{where}: not a cardiosim checkpoint (format {a.get('format')!r}, "
                                f"expected {FORMAT!r})")
            legacy = a.get("format") == LEGACY_FORMAT
            if not legacy:
                verify(f, where)
            then = json.loads(a["physics"])
            meta = {"t": float(a["t"]), "step": int(a["step"]), "output": json.loads(a["output"]),
                    "dt": float(a["dt"]), "legacy": legacy,
                    "iterations": {k[: -len("_iterations")]: [int(i) for i in ds[:]]
                                   for k, ds in f["solver"].items()},
                    "shapes": {k: f[k].shape if k in f else None
                               for k in ("fields/Vm", "fields/phi_e", *state_datasets(cfg))},
                    "purkinje": "purkinje" in f,
                    "region_models": json.loads(a["region_models"]) if "region_models" in a else None}
    except UserError:
        raise
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise UserError(f"{where}: not a readable cardiosim checkpoint ({e})") from None
    _same_models(meta["region_models"], region_models(cfg), where)
    now = physics(cfg)
    # keys this version has and the checkpoint's does not: the run that wrote it used their defaults. A key of a
    # [[table]] item counts so only where the checkpoint has that table (a new field of a stimulus, say); a whole
    # table it lacks (e.g. [[ecg.electrodes]]) was empty there, so its items are a change of config.
    def had_table(k):
        return "[" not in k or any(t.startswith(k[:k.index("[") + 1]) for t in then)
    then = {**{k: v for k, v in physics(cfg, defaults=True).items() if k not in then and had_table(k)}, **then}
    if then != now:
        raise UserError(f"{where}: written for another config: {_differences(then, now)} (a restart may change "
                        f"only {', '.join(k + '*' if k.endswith('.') else k for k in FREE_KEYS)})")
    # The config fits; the arrays must fit it too, or the file is damaged.
    from cardiosim.domain.grid import node_counts      # lazy: it imports PETSc, which this module does not
    shape = tuple(int(n) for n in reversed(node_counts(cfg)))
    want = {"fields/Vm": shape, "fields/phi_e": shape,
            **{k: (len(cells.model_class(m).states), *shape) for k, m in zip(state_datasets(cfg), cfg.cell.models())}}
    for k, s in want.items():
        if meta["shapes"][k] is None:
            raise UserError(f"{where}: has no dataset {k}, which the config needs; the file is damaged")
        if tuple(meta["shapes"][k]) != s:
            raise UserError(f"{where}: {k} has shape {meta['shapes'][k]}, the config needs {s}; the file is damaged")
    if cfg.purkinje.enabled and not meta["purkinje"]:
        raise UserError(f"{where}: holds no state of the Purkinje network ([purkinje]); the file is damaged")
    _cross_check(meta, cfg, where)
    if meta["step"] >= n_steps:
        raise UserError(f"{where}: the checkpoint is at t = {meta['t']:g} ms, not before the end of the run "
                        f"(simulation.duration = {cfg.simulation.duration:g} ms); lengthen the duration to go on")
    return meta


def _same_models(then: list | None, now: list[str], where: str) -> None:
    """A restart keeps the model of every region's cells (each model's states are that model's); one line
    naming the first that differs. ``then`` None: written before several models per run, all cell.model's."""
    if then is None or then == now or then[0] != now[0]:    # another cell.model: the config's check names it
        return
    if len(then) != len(now):
        raise UserError(f"{where}: written for {len(then) - 1} cell.regions, this config has {len(now) - 1}; a restart "
                        f"keeps the regions and their cell models")
    i = next(i for i, (a, b) in enumerate(zip(then, now)) if a != b)
    raise UserError(f"{where}: cell.regions[{i - 1}] held cell model {then[i]} there, {now[i]} here; a restart keeps "
                    f"the cell model of every region (its cells' states are that model's)")


def _cross_check(meta: dict, cfg, where: str) -> None:
    """What one piece of a checkpoint says about another must agree (a checksum protects against damage, this
    against a file put together from pieces, or written by a faulty version)."""
    # lazy: cardiosim.output.writer imports PETSc, which this module does not
    from cardiosim.output.writer import records_samples, snapshot_every
    step, t, dt = meta["step"], meta["t"], meta["dt"]

    def bad(what):
        raise UserError(f"{where}: the file is inconsistent: {what}; it cannot be trusted")
    if dt != cfg.simulation.dt:
        bad(f"dt = {dt!r} ms, the config's simulation.dt = {cfg.simulation.dt!r} ms")
    if step < 0 or t != step * dt:
        bad(f"t = {t!r} ms is not step · dt = {step} · {dt!r} ms")
    out = meta["output"]
    snaps = 1 + step // snapshot_every(cfg)     # t = 0 and every output.interval since
    samples = step + 1 if records_samples(cfg) else 0    # a run without probes or ECG records no samples
    if out.get("snapshots") != snaps or out.get("probe_samples") != samples:
        bad(f"the output position ({out.get('snapshots')} snapshots, {out.get('probe_samples')} probe samples) "
            f"is not that of step {step} ({snaps}, {samples})")
    for name, its in meta["iterations"].items():
        if len(its) not in (step, step + 1) or any(i < 0 or i > 1_000_000 for i in its):
            bad(f"solver/{name}_iterations holds {len(its)} counts (step {step}) or a count out of range")

"""cardiosim from Python: build a run from a config file, a dict or overrides, run it (under mpirun too), and read
what it wrote as NumPy arrays. ``cardiosim run`` is this module and a command line (cardiosim/cli/).

    from cardiosim import api

    cfg = api.config("run/demo.toml", {"simulation.duration": 50.0, "stimulus.S1.current_density": -40.0})
    done = api.run(cfg, output="out/demo-50.h5", overwrite=True)
    print(done.warnings)                    # the end-of-run checks (cardiosim/analysis/checks.py); [] where none
    with done.results() as r:               # cardiosim.output.results.Results: h5py + NumPy, no MPI needed
        act = r.map("activation_time")      # ([nz,] [ny,] nx) ms, NaN: not activated
        vm = r.probe("centre")["Vm"]        # every PDE step, at r.probe_times (ms)
        beats = r.beats("centre")           # per-beat activation, APD and the rest (cardiosim/analysis/maps.py)

A config may also be a dict of the TOML's tables (``api.config({"simulation": {...}, "grid": {...}})``). Overrides
are ``--set``'s keys with Python values: ``{"stimulus.S2.start": 300.0, "grid.spacing": 0.02}`` (an entry of a table
array by its name or index); the effective config and the overrides are stored in the output, as with ``--set``.
Under ``mpirun -n 4 python script.py`` every rank calls :func:`run` and the run is spread over the ranks;
:class:`Done` is the same on every rank, and rank 0 writes the files. Mistakes raise :class:`cardiosim.runtime.errors.
UserError` (one line naming the key), a run that goes wrong :class:`cardiosim.runtime.errors.SimulationError`.

Threads: importing cardiosim sets no thread count; a script chooses its own. With one MPI rank per core, give each
rank one BLAS/OpenMP thread (several under every rank oversubscribe the node), before NumPy or PETSc loads: in the
environment (``OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1``), or as the ``cardiosim`` command
does, first thing in the script::

    from cardiosim.runtime.threads import one_thread_per_rank
    one_thread_per_rank()                   # then import numpy, cardiosim.api, ...
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cardiosim.runtime.errors import SimulationError, UserError
from cardiosim.simulation import sweep as _sweep
from cardiosim.output.results import Results
from cardiosim.runtime import info, petsc as po
from cardiosim.runtime.files import Target, check_existing


def override(key: str, value) -> str:
    """``key`` = ``value`` as a ``--set`` option: the value written as TOML (a Python str becomes a TOML string)."""
    # lazy: cardiosim.config imports mpi4py (through cardiosim.reaction), which this module does not
    from cardiosim.config import tomlwrite
    try:
        return f"{key}={tomlwrite._value(value)}"
    except TypeError:
        raise UserError(f"override {key}: {type(value).__name__} is not a config value (number, string, bool, "
                        f"list, dict)") from None


def config(source, overrides: dict | list | None = None, name: str | None = None):
    """A validated config (cardiosim.config.Config) from a TOML file, a TOML text's tables as a dict, or another
    Config (its effective text, so its overrides stay recorded); ``overrides``: {dotted key: value} or a list of
    ``--set`` strings. ``name``: the config's name (default: the file's stem, or "config"), which names the default
    output ``out/<name>.h5``."""
    # lazy: cardiosim.config imports mpi4py (through cardiosim.reaction), which this module does not
    from cardiosim import config as cfgmod
    from cardiosim.config import tomlwrite
    sets = [override(k, v) for k, v in overrides.items()] if isinstance(overrides, dict) else list(overrides or [])
    if isinstance(source, cfgmod.Config):
        base = Path(source.source_path) if source.source_path else None
        cfg = cfgmod.loads(source.source_text, [*source.overrides, *sets], name=name or source.source_name,
                           path=base)
    elif isinstance(source, dict):
        try:
            text = tomlwrite.dumps(source)
        except TypeError as e:
            raise UserError(f"config: {e}") from None
        cfg = cfgmod.loads(text, sets, name=name or "config")
    else:
        cfg = cfgmod.load(source, sets)
        if name:
            cfg.source_name = name
    return cfg


_config = config      # for sweep(), whose argument ``config`` is the config itself


@dataclass
class Done:
    """What a finished (or stopped) run returns: its summary (the JSON beside the output), its output file, and the
    end-of-run checks' warnings."""
    summary: dict
    output: Path | None
    warnings: list[str]
    stopped: bool = False

    def results(self):
        """The output file, opened (cardiosim.output.results.Results; use it in a ``with`` block)."""
        if self.output is None:
            raise UserError("this run wrote no output (write_output=False)")
        return Results(self.output)


def start_petsc(petsc_options=(), comm=None) -> None:
    """Start PETSc with these options (``-elliptic_pc_type gamg`` ...) where it is not running yet; the CLI does the
    same with what follows ``--``. Options given once PETSc runs cannot be taken (one line saying so)."""
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.placement import petsc_device_options
    if comm is None:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    if _petsc_started():
        if petsc_options:
            raise UserError("petsc_options: PETSc is running already in this process; give the options to the first "
                            "run (or start the process with them)")
        return
    # -no_signal_handler: PETSc's handler would turn a SIGTERM during set-up into a stack dump and an abort
    # (cardiosim.runtime.signals has its own); REPRODUCIBLE (below); the device choice; -use_gpu_aware_mpi 0 for a CUDA PETSc
    # over an MPI that is not CUDA-aware (cardiosim.runtime.info)
    given = list(petsc_options)
    po.init(given, ["-no_signal_handler", *REPRODUCIBLE, *petsc_device_options(comm, given),
                    *info.gpu_aware_mpi_options(given)])


# PETSc options that make a result independent of where the heap put the vectors, so that a run restarted from its
# checkpoint (a new process, another heap) repeats the uninterrupted one bit for bit. -vec_mdot_use_gemv 0: with
# PETSc's default (1), VecMDot sums each dot in one of three orders (one BLAS gemv over the vectors that happen to
# lie at one stride in memory, VecDot for the first that does not, an unrolled loop for the rest), chosen by the
# vectors' addresses; 0 is the unrolled loop for all, in index order (the pseudo-ECG's electrode weights, the null
# space of several pieces of tissue). Read when each vector is created, so it is set at PETSc's start; the user's
# options after -- still win.
REPRODUCIBLE = ["-vec_mdot_use_gemv", "0"]


def _petsc_started() -> bool:
    import sys
    return "petsc4py.PETSc" in sys.modules


def run(cfg, output: str | Path | None = None, overwrite: bool = False, restart: str | Path | None = None,
        petsc_options=(), quiet: bool = True, strict: bool = False, write_output: bool = True, comm=None) -> Done:
    """Run ``cfg`` (a Config, or whatever :func:`config` takes) to its end. ``output``: the HDF5 file (default
    output.path, else out/<name>.h5); ``overwrite``: replace an earlier result there; ``restart``: a checkpoint to
    go on from; ``petsc_options``: for PETSc, as after ``--`` (only before PETSc has started in this process);
    ``quiet``: no progress lines, no timing table (the checks' warnings still go to stderr); ``strict``: raise
    :class:`StrictError` where the checks warn; ``write_output``: False runs without writing any file
    (the summary and the checks' warnings are still returned)."""
    # lazy: cardiosim.config and cardiosim.runtime.log import mpi4py, which this module does not
    from cardiosim import config as cfgmod
    from cardiosim.runtime import log
    if not isinstance(cfg, cfgmod.Config):
        cfg = config(cfg)
    if comm is None:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    start_petsc(petsc_options, comm)
    # here, after start_petsc: the simulation imports PETSc, which must start with the run's options
    from cardiosim.reaction.placement import check_resident
    from cardiosim.simulation.loop import Simulation
    check_resident(cfg.cell, comm)   # before any file, lock or PETSc object: its GPU needs, one line
    if restart and overwrite:
        raise cfgmod.ConfigError("cardiosim run: --restart continues the output file and --overwrite would replace "
                                 "it; give one of them")
    was_quiet = log.is_quiet()
    log.set_quiet(quiet)
    if quiet:
        cfg.simulation.progress_interval = 0.0
    try:
        sim = Simulation(cfg, comm=comm, output_path=Path(output) if output else None, overwrite=overwrite,
                         restart=Path(restart) if restart else None, write_output=write_output)
        try:
            summary = sim.run()
        finally:
            sim.release_output()
    finally:
        log.set_quiet(was_quiet)
    path = sim.path if write_output else None
    if summary.get("stopped"):
        return Done(summary, path, [], stopped=True)
    done = Done(summary, path, list(summary.get("warnings") or []))
    if strict and done.warnings:
        raise StrictError(f"--strict: the run finished with {len(done.warnings)} warning(s) (above); its output is "
                          f"kept" + (f" in {path}" if path else ""))
    return done


def sweep(config, vary: dict, out, collect=_sweep.DEFAULT_COLLECT, zipped: bool = False, overrides=(),
          overwrite: bool = False, table_path=None, link: dict | None = None, plot=(),
          against: str | None = None) -> _sweep.Table:
    """``cardiosim sweep`` from Python, in this process (under mpirun: every rank calls it, each run on every rank):
    ``vary``: {key: [values]} (Python values); ``link``: {key: expression} (``--link``: numbers, + - * /,
    parentheses and varied keys); ``overrides``: --set strings for every run. Runs one after the other through
    :func:`run`, writes OUT/run-NNN.h5 and the table (``table_path``, default OUT/sweep.csv; rank 0) and returns
    its rows: the same table as ``cardiosim sweep`` (cardiosim.simulation.sweep), the varied values as the types
    they were given (130 an int, 130.0 a float). ``plot``, ``against``: as ``--plot Q ... --against KEY``, drawn
    beside the table; the result's :meth:`~cardiosim.simulation.sweep.Table.plot` draws more. Every mistake
    (a key, a quantity, an expression, a file in the way) is a UserError before the first run."""
    # lazy: cardiosim.config imports mpi4py (through cardiosim.reaction), which this module does not
    from cardiosim.config.tomlwrite import _value
    pairs = [(k, [_value(v) for v in vals]) for k, vals in vary.items()]
    links = _sweep.parse_links([f"{k}={e}" for k, e in (link or {}).items()], pairs, overrides)
    runs = _sweep.linked(_sweep.runs_of(pairs, zipped), links)
    _sweep.check_collect(collect)
    out = Path(out)
    table_path = Path(table_path) if table_path else out / "sweep.csv"
    plots = _sweep.plot_targets(list(plot), against, pairs, links, list(collect), table_path, runs)
    cfgs = [_config(config, [*overrides, *sets]) for sets in runs]     # every mistake before the first run
    columns = [k for k, _ in pairs] + [lk.key for lk in links]
    units = {k: _sweep.key_unit(cfgs[0], k) for k in columns} if cfgs else {}
    name = cfgs[0].source_name if cfgs else "sweep"
    check_existing([Target("--plot", p, "png") for _, p in plots], overwrite)
    statuses = {}
    for i, cfg in enumerate(cfgs):
        try:
            run(cfg, output=_sweep.run_path(out, i), overwrite=overwrite)
        except SimulationError as e:
            statuses[i] = f"failed: {e}"
    from mpi4py import MPI
    rows = _sweep.Table(_sweep.table(out, runs, columns, list(collect), statuses), table_path, pairs, links,
                        list(collect), units, name)
    if MPI.COMM_WORLD.rank == 0:
        _sweep.write_table(table_path, rows)
        if plots:
            _sweep.draw_plots(plots, rows, units, name, quiet=True)
    return rows


class StrictError(SimulationError):
    """A run that finished with warnings under ``strict``: exit status 1 from the command line."""
    exit_status = 1

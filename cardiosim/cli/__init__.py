"""``cardiosim`` command line.

    cardiosim run CONFIG [--set section.key=value ...] [--output FILE] [--overwrite | --restart CHECKPOINT]
                  [--strict] [-- PETSc options]      (the run itself: cardiosim.api)
    cardiosim sweep CONFIG --vary KEY=v1,v2 ... --out DIR [--collect Q ...] [--jobs N] [--np R] [--slurm]
                                               many runs and one table (cardiosim/simulation/sweep.py)
    cardiosim config --doc | cardiosim config check CONFIG
    cardiosim cell ...        single-cell runs and biomarkers (see ``cardiosim cell --help``)
    cardiosim model info FILE                  a CellML model as cardiosim generates it: states, gates, parameters
    cardiosim bench kernels | niederer | pde | table41 | cellml | microscopic | mask ...   benchmarks, to docs/
                                               (see ``cardiosim bench NAME --help``)
    cardiosim inspect FILE [--config]          what a result file holds (docs/user/output-format.md)
    cardiosim plot FILE [--times T ...] [--field NAME] [--view z y x] [--format png|svg|pdf] [--vtu] [--out DIR]
                                               figures of a result file (and VTU files)
    cardiosim info                             what this installation can do (PETSc, CUDA, GPUs, MPI, ranks)

Everything after ``--`` goes to PETSc (``-elliptic_pc_type gamg``, ``-log_view``, ...). Every command has one
error path (:func:`_guarded`): a mistake in the input gives one line on stderr and exit status 2; a run that goes
wrong (a state out of range, a diverged solver) or a write that fails (a full disk, ``ulimit -f``) one line and
exit status 3; a run stopped by SIGTERM/SIGINT/SIGUSR1 writes a checkpoint and exits with 75
(docs/user/checkpoints.md); anything else is a bug and aborts the whole MPI job with a traceback, so no rank hangs.
"""

from __future__ import annotations

import argparse
import sys
import traceback


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and only rank 0 says it)."""

    def error(self, message):
        from cardiosim.runtime.errors import UserError
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cardiosim", description="Cardiac electrophysiology: bidomain/monodomain on PETSc.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    r = sub.add_parser("run", help="run a simulation from a TOML config",
                       usage="cardiosim run CONFIG [options] [-- PETSc options]",
                       epilog="Everything after -- goes to PETSc, e.g. -- -elliptic_pc_type gamg -log_view. Exit "
                              "status: 0 done; 2 bad input (one line, nothing written); 3 the run went wrong (one "
                              "line, output kept); 75 stopped by SIGTERM, SIGINT (Ctrl-C) or SIGUSR1 after writing a "
                              "checkpoint (docs/user/checkpoints.md).")
    r.add_argument("config", help="TOML config file")
    r.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config key (value read as TOML), repeatable")
    r.add_argument("--output", help="HDF5 output file (overrides output.path)")
    r.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    r.add_argument("--quiet", action="store_true", help="no progress lines")
    r.add_argument("--restart", metavar="CHECKPOINT",
                   help="go on from this checkpoint, appending to its output file (same config; any number of ranks)")
    r.add_argument("--strict", action="store_true",
                   help="exit status 1 where the end-of-run checks warn ([checks]: too little tissue activated, the "
                        "far side not reached, implausibly slow conduction or a wide QRS, a probe never activated)")

    cell = sub.add_parser("cell", help="pace a single cell; trace and per-beat biomarkers to HDF5 (and JSON)",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    cell.add_argument("--list", action="store_true", help="list the cell models and their variants")
    cell.add_argument("--model", default="bondarenko", help="cell model (see --list), or a CellML file (*.cellml)")
    cell.add_argument("--variant", default=None, help="model variant (bondarenko: apical | septal)")
    cell.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                      help="override a model parameter (model units; also Cm, chi where the model uses them), "
                           "repeatable")
    cell.add_argument("--amplitude", type=float, default=-80.0, help="stimulus, pA/pF (negative depolarises)")
    cell.add_argument("--duration", type=float, default=0.5, help="stimulus duration, ms")
    cell.add_argument("--period", type=float, default=1000.0, help="pacing period, ms")
    cell.add_argument("--beats", type=int, default=1, help="number of beats")
    cell.add_argument("--dt", type=float, default=1e-4, help="the integrator's step, ms (cvode takes its own)")
    cell.add_argument("--integrator", default="forward-euler",
                      choices=("forward-euler", "rush-larsen", "grl1", "cvode"),
                      help="forward-euler; rush-larsen (gates exact for frozen V; tt06, CellML models); grl1 (every "
                           "state by its own linearisation; CellML models); cvode (Myokit's CVODES; CellML models)")
    cell.add_argument("--prepace", type=int, default=0, metavar="N", help="pace N beats first, not recorded")
    cell.add_argument("--scale", action="append", default=[], metavar="NAME=FACTOR",
                      help="multiply a parameter by FACTOR (e.g. GKr=0.5), repeatable")
    cell.add_argument("--block", action="append", default=[], metavar="NAME=IC50[:HILL]",
                      help="drug block of a conductance: scaled by 1/(1 + (C/IC50)^HILL) with C = --concentration "
                           "(same unit as IC50; HILL default 1), repeatable")
    cell.add_argument("--concentration", type=float, default=None, help="drug concentration for --block")
    cell.add_argument("--restitution", default=None, metavar="CI,CI,...",
                      help="S1-S2 restitution instead of a paced trace: --prepace S1 beats every --period, then for "
                           "each coupling interval CI (ms) an S1 and an S2; APD90 of S2 against the diastolic "
                           "interval, to --output (/restitution) and --json")
    cell.add_argument("--population", type=int, default=None, metavar="N",
                      help="a population of N cells, each with its own scale factors (--sample or "
                           "--population-table): biomarkers of the last beat per cell to --output and --csv")
    cell.add_argument("--sample", action="append", default=[], metavar="NAME=uniform:LO:HI|NAME=lognormal:SIGMA",
                      help="population: how a parameter's scale factor is drawn, repeatable")
    cell.add_argument("--seed", type=int, default=1, help="population: random seed of --sample")
    cell.add_argument("--population-table", default=None, metavar="CSV",
                      help="population: the factors from a table (header: parameter names; a row per cell)")
    cell.add_argument("--keep", action="append", default=[], metavar="BIOMARKER=LO:HI",
                      help="population: calibration filter, e.g. APD90=200:300 (a cell is kept where all hold)")
    cell.add_argument("--csv", default=None, help="population: also write the per-cell table here")
    cell.add_argument("--backend", choices=("native", "cuda"), default="native",
                      help="population: where the cells run: native (the C driver, one core) or cuda (one GPU, "
                           "CellML models: the varied parameters per cell in device memory)")
    cell.add_argument("--trace", action="append", default=[], metavar="NAME",
                      help="also record this intermediate (a current, a flux: `cardiosim model info` lists them; "
                           "CellML models), repeatable")
    cell.add_argument("--record-every", type=float, default=0.05, help="trace sampling interval, ms")
    cell.add_argument("--output", default="out/cell.h5", help="HDF5 file")
    cell.add_argument("--json", default=None, help="also write the biomarkers as JSON here")
    cell.add_argument("--overwrite", action="store_true", help="replace existing output files")
    cell.add_argument("--quiet", action="store_true", help="no progress lines")

    mo = sub.add_parser("model", help="a cell model: built in, or a CellML file as cardiosim generates it (Myokit)",
                        usage="cardiosim model info MODEL")
    mo.add_argument("action", choices=("info",), help="info: states (initial values, units), the gates Rush-Larsen "
                                                      "updates, parameters (defaults, units), guarded singularities")
    mo.add_argument("file", metavar="MODEL",
                    help="a built-in model (cardiosim cell --list) or a CellML file (*.cellml)")

    k = sub.add_parser("kernels", help="compile every CUDA kernel variant fresh and print ptxas's registers, spills, "
                                       "local and constant memory (needs nvcc)")
    k.add_argument("--model", default="bondarenko", help="cell model (default bondarenko)")
    k.add_argument("--variant", action="append", default=[], help="a variant (repeatable; default: all the model has)")
    k.add_argument("--arch", default=None, help="target, e.g. sm_90 (default: the GPU nvidia-smi reports)")
    k.add_argument("--no-fmad", action="store_true", help="compile without fused multiply-adds")
    k.add_argument("--json", default=None, help="also write the figures as JSON here")
    k.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    k.add_argument("--source", metavar="VARIANT", default=None,
                   help="print the generated CUDA source of VARIANT (and its nvcc -D options) instead; no nvcc needed")

    i = sub.add_parser("inspect", help="what a result file holds: grid, snapshots, ranges, probes, maps, timings")
    i.add_argument("file", help="HDF5 file of a run")
    i.add_argument("--config", action="store_true", help="print the run's config text instead")

    pl = sub.add_parser("plot", help="PNGs of a result file: field maps, probe traces, activation and APD maps")
    pl.add_argument("file", help="HDF5 file of a run")
    pl.add_argument("--times", type=float, nargs="+", metavar="MS",
                    help="snapshot times to show (ms; the nearest snapshot); default: four spread over the run")
    pl.add_argument("--field", default="Vm", help="Vm (default) or phi_e")
    pl.add_argument("--out", help="directory for the PNGs (default: beside FILE)")
    pl.add_argument("--isochrones", type=float, metavar="MS",
                    help="spacing of the activation isochrones (ms; default: about ten lines; at most "
                         "200 lines)")
    pl.add_argument("--view", nargs="+", choices=("z", "y", "x"), metavar="AXIS",
                    help="3D: the middle slices drawn, by the axis they are normal to (z: the x-y plane, y, x; "
                         "default: z y, a short- and a long-axis section of a heart along z)")
    pl.add_argument("--range", type=float, nargs=2, metavar=("LO", "HI"),
                    help="the field's colour range (mV; default: Vm -90 to 40, phi_e symmetric)")
    pl.add_argument("--format", choices=("png", "svg", "pdf"), default="png", help="file format (default png)")
    pl.add_argument("--dpi", type=int, default=150, help="resolution of PNGs (default 150)")
    pl.add_argument("--beats", action="store_true", help="also draw the activation and APD maps of every beat (up "
                                                         "to four), from the snapshots (as fine as output.interval)")
    pl.add_argument("--vtu", action="store_true", help="also write the snapshots at --times as VTU files (meshio): "
                                                       "fields and maps as point data, for ParaView/VTK pipelines")
    pl.add_argument("--overwrite", action="store_true", help="replace existing figures")

    g = sub.add_parser("geometry", help="anatomy onto the grid once: labels and fibres (HDF5) for "
                                        "tissue.label_file and tissue.fibre_file",
                       usage="cardiosim geometry lv|biv|MESH --spacing CM --out GEO.h5 [options]\n"
                             "       cardiosim geometry fibres GEO.h5 --out OUT.h5 [--helix-endo DEG ...]",
                       description="Writes GEO.h5 and prints the [grid] and [tissue] lines of a config that reads "
                                   "it (cardiosim/domain/anatomy.py); 'fibres' adds rule-based fibres and ventricular "
                                   "coordinates to a file with labelled surfaces (cardiosim/domain/fibres.py).")
    g.add_argument("source", help="'lv', 'biv': the built-in idealised left ventricle, both ventricles; or a "
                                  "tetrahedral mesh: .vtu, .vtk, .msh (meshio) or openCARP .elem (.pts and .lon "
                                  "beside it); or 'fibres' followed by a geometry file")
    g.add_argument("file", nargs="?", help="fibres: the geometry file (labels and surfaces) to make fibres for")
    g.add_argument("--spacing", type=float, help="grid spacing, cm (lv, biv, a mesh)")
    for name, default, what in (("helix-endo", 60.0, "fibres' helix angle at the endocardium"),
                                ("helix-epi", -60.0, "fibres' helix angle at the epicardium"),
                                ("sheet-endo", 0.0, "sheets' angle at the endocardium"),
                                ("sheet-epi", 0.0, "sheets' angle at the epicardium")):
        g.add_argument(f"--{name}", type=float, default=None,
                       help=f"lv, biv, fibres: the {what}, degrees, linear in the wall's depth (default {default:g})")
    g.add_argument("--out", required=True, help="the HDF5 file to write")
    g.add_argument("--units", choices=("um", "mm", "cm"), default=None,
                   help="the mesh's coordinate units (default: um for openCARP, cm otherwise)")
    g.add_argument("--margin", type=int, default=1, help="empty grid nodes around the geometry (default 1)")
    g.add_argument("--overwrite", action="store_true", help="replace an existing --out file")

    sub.add_parser("sweep", help="many runs of one config (--vary KEY=v1,v2 ...), locally in parallel or as a SLURM "
                                 "job array, and one table of chosen outputs (see cardiosim sweep --help)",
                   add_help=False)
    sub.add_parser("bench", help="benchmarks, written to docs/: " + ", ".join(BENCHMARKS) + " (see cardiosim bench "
                                 "NAME --help)", add_help=False)
    sub.add_parser("info", help="what this installation can do: PETSc and its CUDA, PyCUDA, GPUs, mpi4py's MPI "
                                "and the mpirun on PATH, the ranks started (exit status 1 where they do not fit)")

    c = sub.add_parser("config", help="config reference and checking", usage="cardiosim config --doc | "
                                                                              "cardiosim config check CONFIG")
    c.add_argument("--doc", action="store_true", help="print the reference of every key (markdown)")
    c.add_argument("check", nargs="?", metavar="check", help="check CONFIG: validate a config file, as a run would "
                                                            "(one line per mistake; exit status 2)")
    c.add_argument("file", nargs="?", metavar="CONFIG", help="the config file to check")
    return p


def _split_petsc(argv):
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, petsc_args = _split_petsc(argv)
    if ours[:1] == ["bench"]:
        # Benchmarks start their runs with mpirun; this process must not be an MPI process itself (an OpenMPI
        # singleton's environment makes a nested mpirun fail without a word). Their PETSc starts itself: a CUDA
        # PETSc over an MPI not known to be CUDA-aware is told so through the environment (cardiosim.runtime.info).
        from cardiosim.runtime.info import export_gpu_aware_mpi_option
        export_gpu_aware_mpi_option()
        return _bench(argv[1:])
    if ours[:1] == ["sweep"]:                  # the same: its runs are children, under mpirun with --np
        from cardiosim.simulation.sweep import main as sweep_main
        return sweep_main(argv[1:])
    from cardiosim.runtime import signals
    signals.ignore_file_size_signal()
    if ours[:1] in (["inspect"], ["plot"], ["model"], ["geometry"]):
        return _guarded(lambda: _result_file(ours, petsc_args), comm=None)
    if ours[:1] == ["info"]:     # before MPI: it reports an mpi4py that does not load instead of failing with it
        from cardiosim.runtime import info
        return _guarded(lambda: info.main(_parser().parse_args(ours), petsc_args), comm=None)
    if ours[:1] == ["run"]:
        signals.catch()      # before MPI and PETSc: a signal during set-up is a checkpoint at the first step
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    return _guarded(lambda: _mpi_command(ours, petsc_args, comm), comm)


def _guarded(command, comm) -> int:
    """The one error path of every command: a mistake in the input is one line and exit status 2 (UserError), a
    run or a write that went wrong one line and 3 (SimulationError), Ctrl-C one line and 130; anything else is a
    bug, reported with its traceback, and on several ranks it takes the whole job down (MPI_Abort): no rank is
    ever left waiting in a collective. ``comm``: MPI's world, or None for the commands that run without MPI."""
    from cardiosim.runtime.errors import SimulationError, UserError
    size = comm.size if comm is not None else 1
    try:
        return command()
    except (UserError, SimulationError) as e:
        _say(f"cardiosim: error: {e}", comm)
        return e.exit_status
    except SystemExit:
        raise
    except BrokenPipeError:                  # `cardiosim inspect FILE | head`: the reader has what it wanted
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:   # Ctrl-C where no checkpoint is asked for (checkpoint.on_signal = false, cell, ...)
        _say("cardiosim: error: interrupted (SIGINT)", comm)
        if size > 1:            # a rank may be inside a collective: leave without MPI_Finalize's wait
            import os
            os._exit(130)
        return 130
    except MemoryError:
        # What the estimates up front (cardiosim.runtime.resources) did not foresee: still one line, and the job ends.
        rank = f" on rank {comm.rank}" if size > 1 else ""
        sys.stderr.write(f"cardiosim: error: out of memory{rank}; use a coarser grid or fewer samples, or a "
                         f"host with more memory\n")
        _abort(comm, 1)
        return 1
    except BaseException:
        # A bug, or an error on some ranks only: report it and take the whole job down, never hang.
        rank = f" on rank {comm.rank}" if comm is not None else ""
        sys.stderr.write(f"cardiosim: internal error{rank}:\n{traceback.format_exc()}")
        _abort(comm, 1)
        return 1


def _say(line: str, comm) -> None:
    """One line on stderr, from rank 0 only (every rank reaches the same conclusion for these errors)."""
    if comm is None or comm.rank == 0:
        print(line, file=sys.stderr, flush=True)


def _abort(comm, status: int) -> None:
    sys.stderr.flush()
    if comm is not None and comm.size > 1:
        # The launcher forwards a rank's stderr through its own process, which MPI_Abort can end before the
        # report has gone through (seen once with MPICH): give it a moment, then take the job down.
        import time
        time.sleep(0.5)
        comm.Abort(status)


def _no_petsc_options(command: str, petsc_args) -> None:
    from cardiosim.runtime.errors import UserError
    if petsc_args and command != "run":
        raise UserError(f"cardiosim {command}: takes no PETSc options (given after --: {' '.join(petsc_args)}); "
                        f"they are for cardiosim run")


def _mpi_command(ours, petsc_args, comm) -> int:
    from cardiosim.runtime import log
    from cardiosim.runtime.errors import UserError
    args = _parser().parse_args(ours)
    if args.version:
        from cardiosim import __version__
        log.info(f"cardiosim {__version__}")
        return 0
    if args.command is None:
        raise UserError("cardiosim: no command given; commands: run, config, cell, model, kernels, inspect, "
                        "plot, geometry, bench, info (see cardiosim --help)")
    _no_petsc_options(args.command, petsc_args)
    from cardiosim.runtime import info
    if args.command == "run":
        info.check_rank_count(comm.size)    # N single-rank copies would write the same files: before anything
    # Before anything imports PETSc (cardiosim.api.start_petsc: our options, the user's after --); a PETSc option of
    # the user's that nothing reads is an error.
    from cardiosim import api
    api.start_petsc(petsc_args, comm)
    if args.command == "run":
        return _run(args, comm)
    if args.command == "config":
        return _config(args)
    if args.command == "cell":
        return _cell(args)
    if args.command == "kernels":
        return _kernels(args)
    return 0


def _run(args, comm) -> int:
    from cardiosim import api
    from cardiosim.runtime import log
    log.set_quiet(args.quiet)
    cfg = api.config(args.config, args.set)
    done = api.run(cfg, output=args.output, overwrite=args.overwrite, restart=args.restart, quiet=args.quiet,
                   strict=args.strict, comm=comm)
    if done.stopped:
        from cardiosim.output.checkpoint import STOPPED
        same = " (with the same --set/--output options)" if args.set or args.output else ""
        log.info(f"checkpoint written at t = {done.summary['simulated_ms']:g} ms; resume with "
                 f"cardiosim run {args.config} --restart {done.summary['checkpoint']}{same}", force=True)
        return STOPPED
    return 0


def _result_file(argv, petsc_args) -> int:
    """``inspect``, ``plot``, ``model`` and ``geometry``: h5py, NumPy and matplotlib, no mpirun (``geometry``'s
    rule-based fibres use PETSc on this one process), so they run anywhere (a login node, a laptop) and while the
    run is still writing."""
    args = _parser().parse_args(argv)
    _no_petsc_options(args.command, petsc_args)
    if args.command == "inspect":
        from cardiosim.output.results import inspect_main
        return inspect_main(args)
    if args.command == "model":
        return _model_info(args)
    if args.command == "geometry":
        from cardiosim.domain.anatomy import main as geometry_main
        return geometry_main(args)
    from cardiosim.output.plot import plot_main
    return plot_main(args)


BENCHMARKS = {"kernels": "cardiosim.bench.kernels", "niederer": "cardiosim.bench.niederer",
              "pde": "cardiosim.bench.pde", "table41": "cardiosim.bench.table41",
              "cellml": "cardiosim.bench.cellml", "microscopic": "cardiosim.bench.microscopic",
              "mask": "cardiosim.bench.mask", "scaling": "cardiosim.bench.scaling",
              "halo": "cardiosim.bench.halo", "cell-steps": "cardiosim.bench.cell_steps",
              "pacing": "cardiosim.bench.pacing"}


def _bench(argv) -> int:
    """``cardiosim bench NAME ...``: each benchmark parses its own arguments (see its --help)."""
    import importlib
    if not argv or argv[0] not in BENCHMARKS:
        print(f"cardiosim: error: cardiosim bench: name a benchmark: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    return importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:])


def _kernels(args) -> int:
    import json
    from pathlib import Path
    from cardiosim import cells
    from cardiosim.runtime.errors import UserError
    from cardiosim.reaction.ode import kernel_variants, ptxas
    from cardiosim.reaction.ode.cuda_backend import kernel_source
    try:
        model = cells.make(args.model)
    except cells.CellModelError as e:
        raise UserError(f"cardiosim kernels: --model: {e}") from None
    if not model.kernel_name:
        raise UserError(f"cardiosim kernels: --model: {args.model} has no C/CUDA kernel")
    if args.json:
        from cardiosim.runtime.files import Target, check_writes
        check_writes([Target("--json", Path(args.json), "kernels-json")], {}, args.overwrite)
    seed = model.kernel_name in kernel_variants.SEED_MODELS
    names = args.variant or (list(kernel_variants.VARIANTS) if seed else [kernel_variants.DEFAULT])
    if args.source:
        names = [args.source]
    try:
        variants = [kernel_variants.get(n, model.kernel_name) for n in names]
    except ValueError as e:
        raise UserError(f"cardiosim kernels: {e}") from None
    if args.source:
        src, opts = kernel_source(model, model.parameter_vector(), variants[0])
        print(f"// nvcc options: {' '.join(opts)}\n{src}")
        return 0
    rows = ptxas.report(model, names, args.arch, fmad=not args.no_fmad)
    print(f"{model.name}, {rows[0]['arch']}, fmad={'off' if args.no_fmad else 'on'}, compiled fresh by nvcc:")
    print(ptxas.table(rows), end="")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


def _cell(args) -> int:
    import math
    from pathlib import Path
    from mpi4py import MPI
    from cardiosim import cells
    from cardiosim.runtime import log
    from cardiosim.analysis.biomarkers import format_table
    from cardiosim.runtime.errors import UserError
    if MPI.COMM_WORLD.size > 1:
        raise UserError("cardiosim cell: runs one cell; start it without mpirun")
    if args.list:
        for name in cells.available():
            cls = cells.model_class(name)
            variants = f" (variants: {', '.join(cls.variants)})" if cls.variants else ""
            log.info(f"{name}: {len(cls.states)} states{variants}")
        from cardiosim.cells import cellml
        for row in cellml.cached():
            log.info(f"{row['file']}: {len(row['states'])} states, {len(row['gates'])} gates (generated from CellML "
                     f"{row.get('source', row['file'])})")
        return 0
    overrides = {}
    for item in args.param:
        name, sep, value = item.partition("=")
        try:
            overrides[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise UserError(f"cardiosim cell --param {item}: expected NAME=NUMBER")
        if not math.isfinite(overrides[name.strip()]):
            raise UserError(f"cardiosim cell --param {item}: must be a finite number")
    scale = {}
    for opt, item in [("--scale", x) for x in args.scale] + [("--block", x) for x in args.block]:
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            if opt == "--scale":
                f = float(value)
            else:
                if args.concentration is None:
                    raise UserError("cardiosim cell --block: needs --concentration (same unit as the IC50)")
                ic50, _, hill = value.partition(":")
                from cardiosim.single_cell.pacing import block_factor
                f = block_factor(args.concentration, float(ic50), float(hill) if hill else 1.0)
        except ValueError as e:
            raise UserError(f"cardiosim cell {opt} {item}: expected "
                            f"{'NAME=FACTOR' if opt == '--scale' else 'NAME=IC50[:HILL], IC50 and HILL > 0'}"
                            f"{'' if 'could not convert' in str(e) else f' ({e})'}") from None
        if not sep or not name or not math.isfinite(f) or f < 0:
            raise UserError(f"cardiosim cell {opt} {item}: expected NAME=FACTOR with a finite factor >= 0")
        scale[name] = scale.get(name, 1.0) * f
    if args.prepace < 0:
        raise UserError(f"cardiosim cell --prepace {args.prepace}: a number of beats >= 0")
    from cardiosim.cells import cellml
    from cardiosim.runtime.files import Target, check_writes
    targets = [Target("--output", Path(args.output), "cell")]
    if args.json:
        targets.append(Target("--json", Path(args.json), "cell-json"))
    if args.csv:
        targets.append(Target("--csv", Path(args.csv), "population-csv"))
    check_writes(targets, {"--model": args.model} if cellml.is_cellml(args.model) else {}, args.overwrite)
    from cardiosim.single_cell.pacing import run_cell
    import time
    last = [time.perf_counter()]

    def progress(t, total):   # a line every 5 s of wall time: runs of many beats take minutes
        now = time.perf_counter()
        if not args.quiet and now - last[0] >= 5.0:
            last[0] = now
            if t <= 0:          # pre-pacing: t counts down to the first recorded beat
                log.info(f"pre-pacing: {-t / args.period:.0f} of {args.prepace} beats left")
            else:
                log.info(f"t = {t:.6g} / {total:.6g} ms ({100 * t / total:5.1f} %)")
    try:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        from cardiosim.runtime.errors import io_reason
        raise UserError(f"cardiosim cell: --output {args.output}: cannot make its folder ({io_reason(e)})") from None
    try:
        from cardiosim.single_cell.pacing import scaled
        overrides = scaled(args.model, args.variant, overrides, scale)     # --scale and --block, once for all
    except ValueError as e:
        raise UserError(f"cardiosim cell: {e}") from None
    if args.backend != "native" and args.population is None and not args.population_table:
        raise UserError(f"cardiosim cell: --backend {args.backend} is for populations (--population N); one cell "
                        f"runs on the CPU")
    if args.restitution is not None:
        return _restitution(args, overrides)
    if args.population is not None or args.population_table:
        return _population(args, overrides)
    try:
        rows = run_cell(args.model, args.variant, overrides, args.amplitude, args.duration, args.period, args.beats,
                        args.dt, args.record_every, args.output, args.json, progress=progress,
                        integrator=args.integrator, prepace=args.prepace, trace=tuple(args.trace))
    except ValueError as e:   # bad arguments, found before any file is written
        raise UserError(f"cardiosim cell: {e}") from None
    log.info(format_table(rows))
    log.info(f"wrote {args.output}" + (f" and {args.json}" if args.json else ""))
    return 0


def _population(args, overrides) -> int:
    """``cardiosim cell --population N``: cardiosim.single_cell.population, its table and the kept share."""
    import time
    from cardiosim.runtime import log
    from cardiosim.runtime.errors import UserError
    from cardiosim.single_cell.population import parse_sample, run_population, sample_factors, table_factors
    try:
        if args.population_table:
            factors = table_factors(args.population_table)
        else:
            if not args.population or args.population < 1 or not args.sample:
                raise ValueError("--population N needs N >= 1 and at least one --sample (or --population-table)")
            factors = sample_factors(dict(parse_sample(x) for x in args.sample), args.population, args.seed)
        keep = {}
        for item in args.keep:
            name, _, rng = item.partition("=")
            lo, _, hi = rng.partition(":")
            try:
                keep[name.strip()] = (float(lo), float(hi))
            except ValueError:
                raise ValueError(f"--keep {item}: expected BIOMARKER=LO:HI, e.g. APD90=200:300") from None
        t0 = time.perf_counter()
        r = run_population(args.model, args.variant, overrides, factors, args.amplitude, args.duration, args.period,
                           args.beats, args.prepace, args.dt, args.integrator, args.record_every, keep, args.output,
                           args.csv, backend=args.backend)
    except ValueError as e:
        raise UserError(f"cardiosim cell: {e}") from None
    wall = time.perf_counter() - t0
    n, beats = r["n"], args.prepace + args.beats
    log.info(f"population of {n} cells, {beats} beats each: {r['kept']} kept, {r['failed']} failed; "
             f"{wall:.3g} s ({n * beats * args.period / args.dt / wall:.3g} cell-steps/s "
             f"{'on one GPU' if args.backend == 'cuda' else 'on one core'})")
    log.info(f"wrote {args.output}" + (f" and {args.csv}" if args.csv else ""))
    return 0


def _restitution(args, overrides) -> int:
    """``cardiosim cell --restitution CI,...``: the S1-S2 curve (cardiosim.single_cell.pacing.restitution) to HDF5/JSON."""
    import json
    import h5py
    import numpy as np
    from cardiosim import __version__
    from cardiosim.runtime import log
    from cardiosim.runtime.errors import UserError
    from pathlib import Path
    from cardiosim.single_cell.pacing import restitution
    try:
        intervals = [float(x) for x in args.restitution.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"cardiosim cell --restitution {args.restitution}: expected coupling intervals in ms, "
                        f"e.g. 600,400,300") from None
    try:
        rows, t, v = restitution(args.model, args.variant, overrides, args.amplitude, args.duration, args.period,
                                 args.prepace, intervals, args.dt, args.integrator, args.record_every)
    except ValueError as e:
        raise UserError(f"cardiosim cell: {e}") from None
    cols = list(rows[0])
    with h5py.File(args.output, "w") as f:
        f.attrs.update({"model": str(args.model), "variant": args.variant or "", "overrides": json.dumps(overrides),
                        "amplitude": args.amplitude, "duration": args.duration, "period": args.period,
                        "prepace": args.prepace, "dt": args.dt, "integrator": args.integrator,
                        "cardiosim_version": __version__, "protocol": "S1-S2 restitution"})
        f.create_dataset("trace/t", data=t).attrs["unit"] = "ms"
        f.create_dataset("trace/V", data=v).attrs["unit"] = "mV (one row per coupling interval)"
        f.create_dataset("restitution", data=np.array(
            [tuple(r[c] for c in cols) for r in rows],
            dtype=[(c, h5py.string_dtype() if isinstance(rows[0][c], str) else "f8") for c in cols]
        )).attrs["unit"] = "ms, mV"
    if args.json:
        Path(args.json).write_text(json.dumps({"model": str(args.model), "units": "ms (V_peak_S2: mV)",
                                               "restitution": rows, "cardiosim_version": __version__},
                                              indent=1) + "\n")
    log.info("        CI (ms)        DI (ms)  APD90 S2 (ms)  APD90 S1 (ms)  V_peak S2 (mV)")
    for r in rows:        # the five numbers, then why an S2 did not capture (pacing.restitution)
        log.info("".join(f"{r[c]:15.2f}" for c in ("CI", "DI", "APD90_S2", "APD90_S1", "V_peak_S2"))
                 + (f"  {r['reason']}" if r.get("reason") else ""))
    log.info(f"wrote {args.output}" + (f" and {args.json}" if args.json else ""))
    return 0


def _model_info(args) -> int:
    """``cardiosim model info MODEL``: a built-in model's states, parameters and variants, or what the generator
    makes of a CellML file (no MPI, no PETSc)."""
    from cardiosim import cells
    from cardiosim.cells import CellModelError, cellml
    from cardiosim.runtime.errors import UserError
    try:
        cls = cells.model_class(args.file)
    except CellModelError as e:
        raise UserError(f"cardiosim model info: {e}") from None
    print(cellml.describe(cls) if cellml.is_cellml(args.file) else cells.describe(cls), end="")
    return 0


def _config(args) -> int:
    from cardiosim import config
    from cardiosim.runtime import log
    from cardiosim.runtime.errors import UserError
    if args.doc:
        from mpi4py import MPI
        if MPI.COMM_WORLD.rank == 0:
            sys.stdout.write(config.reference_markdown())
        return 0
    if args.check == "check" and args.file:
        mistakes = config.check_all(args.file)
        for line in mistakes:
            log.error(line)
        if mistakes:
            return 2
        log.info(f"{args.file}: ok")
        return 0
    raise UserError("cardiosim config: use --doc, or check CONFIG")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

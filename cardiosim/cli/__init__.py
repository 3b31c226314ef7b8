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
    cardiosim --doc                            the reference of every verb and option (docs/reference/cli.md)

Everything after ``--`` goes to PETSc (``-elliptic_pc_type gamg``, ``-log_view``, ...). Every command has one
error path (:func:`cardiosim.cli.common.guarded`): a mistake in the input gives one line on stderr and exit status
2; a run that goes wrong (a state out of range, a diverged solver) or a write that fails (a full disk, ``ulimit
-f``) one line and exit status 3; a run stopped by SIGTERM/SIGINT/SIGUSR1 writes a checkpoint and exits with 75
(docs/user/checkpoints.md); anything else is a bug and aborts the whole MPI job with a traceback, so no rank hangs.

The verbs are :data:`COMMANDS`: one module each (cardiosim/cli/VERB.py) with

    START                   how it is started: common.RAW, common.LOCAL or common.MPI (cardiosim.cli.common)
    add_parser(subparsers)  its subparser, options and help
    main(args)              the command: parsed arguments (RAW: its words), with ``args.petsc_args`` (the words
                            after ``--``) and ``args.comm`` (MPI's world; None where LOCAL); returns the exit status

and optionally ``PETSC_OPTIONS = True`` (it takes, or rejects itself, the words after ``--``; every other verb
refuses them in one line) and ``STOP_SIGNALS = True`` (stop signals caught before NumPy, MPI and PETSc load:
``run``, ``sweep``; cardiosim.cli.common.start_signals).
A new verb is a new module and its line in :data:`COMMANDS`.
"""

from __future__ import annotations

import importlib
import sys

from cardiosim import __version__
from cardiosim.cli import common, reference
from cardiosim.runtime.errors import UserError
from cardiosim.runtime.threads import one_thread_per_rank

# verb -> its module, in the order of ``cardiosim --help``
COMMANDS = {
    "run": "cardiosim.cli.run",
    "cell": "cardiosim.cli.cell",
    "model": "cardiosim.cli.model",
    "kernels": "cardiosim.cli.kernels",
    "inspect": "cardiosim.cli.inspect",
    "plot": "cardiosim.cli.plot",
    "geometry": "cardiosim.cli.geometry",
    "sweep": "cardiosim.cli.sweep",
    "bench": "cardiosim.cli.bench",
    "info": "cardiosim.cli.info",
    "config": "cardiosim.cli.config",
}


def command(verb: str):
    """The module of a verb (imported on first use: ``cardiosim bench`` and ``sweep`` load no other verb's)."""
    return importlib.import_module(COMMANDS[verb])


def parser() -> common.Parser:
    """The parser of every verb (the RAW verbs' subparsers only name them: they parse their own words)."""
    p = common.Parser(prog="cardiosim", description="Cardiac electrophysiology: bidomain/monodomain on PETSc.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    # dest: not "doc", which is config's own --doc (the verbs' options share the namespace)
    p.add_argument("--doc", dest="cli_reference", action="store_true",
                   help="print the reference of every command and option (markdown: docs/reference/cli.md) and exit")
    sub = p.add_subparsers(dest="command", parser_class=common.Parser)
    for verb in COMMANDS:
        command(verb).add_parser(sub)
    return p


def reference_markdown() -> str:
    """The command-line reference (docs/reference/cli.md: ``cardiosim --doc``), from the parsers."""
    return reference.reference_markdown(parser(), command)


def main(argv=None) -> int:
    one_thread_per_rank()       # before anything loads NumPy or PETSc (the console script comes here first)
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, petsc_args = common.split_petsc(argv)
    module = command(ours[0]) if ours and ours[0] in COMMANDS else None
    start = module.START if module is not None else common.MPI    # no verb: --help, --version, a mistake
    common.start_signals(module)
    if start == common.RAW:
        return module.main(argv[1:])
    if start == common.LOCAL:
        return common.guarded(lambda: _dispatch(ours, petsc_args, None), comm=None)
    from mpi4py import MPI   # lazy: the LOCAL and RAW commands run without MPI
    comm = MPI.COMM_WORLD
    return common.guarded(lambda: _dispatch(ours, petsc_args, comm), comm)


def _dispatch(ours, petsc_args, comm) -> int:
    args = parser().parse_args(ours)
    if args.version:
        from cardiosim.runtime import log   # lazy: log loads MPI (here it is loaded already)
        log.info(f"cardiosim {__version__}")
        return 0
    if args.cli_reference:
        if comm is None or comm.rank == 0:
            sys.stdout.write(reference_markdown())
        return 0
    if args.command is None:
        raise UserError("cardiosim: no command given; commands: run, config, cell, model, kernels, inspect, "
                        "plot, geometry, bench, info (see cardiosim --help)")
    module = command(args.command)
    if not getattr(module, "PETSC_OPTIONS", False):
        common.no_petsc_options(args.command, petsc_args)
    args.petsc_args, args.comm = petsc_args, comm
    return module.main(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""``cardiosim`` command line.

    cardiosim run CONFIG [--set section.key=value ...] [--output FILE] [--overwrite] [-- PETSc options]
    cardiosim config --doc | cardiosim config check CONFIG
    cardiosim cell ...        single-cell runs and biomarkers (see ``cardiosim cell --help``)

Everything after ``--`` goes to PETSc (``-elliptic_pc_type gamg``, ``-log_view``, ...). A mistake in the input
gives one line on stderr and exit status 2; a run that goes wrong (a state out of range, a diverged solver) one
line and exit status 3; anything else is a bug and aborts the whole MPI job with a traceback, so no rank hangs.
"""

from __future__ import annotations

import argparse
import sys
import traceback


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and only rank 0 says it)."""

    def error(self, message):
        from .errors import UserError
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="cardiosim", description="Cardiac electrophysiology: bidomain/monodomain on PETSc.")
    p.add_argument("--version", action="store_true", help="print the version and exit")
    sub = p.add_subparsers(dest="command", parser_class=_Parser)

    r = sub.add_parser("run", help="run a simulation from a TOML config")
    r.add_argument("config", help="TOML config file")
    r.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="override a config key (value read as TOML), repeatable")
    r.add_argument("--output", help="HDF5 output file (overrides output.path)")
    r.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    r.add_argument("--quiet", action="store_true", help="no progress lines")

    c = sub.add_parser("config", help="config reference and checking")
    c.add_argument("--doc", action="store_true", help="print the reference of every key (markdown)")
    c.add_argument("check", nargs="?", help=argparse.SUPPRESS)
    c.add_argument("file", nargs="?", help="with 'check': validate this config file")
    return p


def _split_petsc(argv):
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    ours, petsc_args = _split_petsc(argv)
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    from . import log
    from .errors import SimulationError, UserError
    try:
        args = _parser().parse_args(ours)
        if args.version:
            from . import __version__
            log.info(f"cardiosim {__version__}")
            return 0
        if args.command is None:
            raise UserError("cardiosim: no command given; commands: run, config, cell (see cardiosim --help)")
        import petsc4py
        # Before anything imports PETSc. Our own defaults for one preconditioner are unused when the user picks
        # another, so the unused-options report is off unless asked for (later options win).
        petsc4py.init(["cardiosim", "-options_left", "0"] + petsc_args)
        if args.command == "run":
            return _run(args)
        if args.command == "config":
            return _config(args)
    except (UserError, SimulationError) as e:
        log.error(str(e))
        return e.exit_status
    except SystemExit:
        raise
    except BaseException:
        # A bug, or an error on some ranks only: report it and take the whole job down, never hang.
        sys.stderr.write(f"cardiosim: internal error on rank {comm.rank}:\n{traceback.format_exc()}")
        sys.stderr.flush()
        if comm.size > 1:
            comm.Abort(1)
        return 1
    return 0


def _run(args) -> int:
    from . import config, log
    from .simulation import Simulation
    from pathlib import Path
    log.set_quiet(args.quiet)
    cfg = config.load(args.config, args.set)
    if args.quiet:
        cfg.simulation.progress_interval = 0.0
    sim = Simulation(cfg, output_path=Path(args.output) if args.output else None, overwrite=args.overwrite)
    sim.run()
    return 0


def _config(args) -> int:
    from . import config, log
    from .errors import UserError
    if args.doc:
        from mpi4py import MPI
        if MPI.COMM_WORLD.rank == 0:
            sys.stdout.write(config.reference_markdown())
        return 0
    if args.check == "check" and args.file:
        config.load(args.file)
        log.info(f"{args.file}: ok")
        return 0
    raise UserError("cardiosim config: use --doc, or check CONFIG")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

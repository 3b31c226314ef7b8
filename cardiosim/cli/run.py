"""``cardiosim run CONFIG``: one simulation from a TOML config (cardiosim.api), with PETSc's options after ``--``."""

from __future__ import annotations

from cardiosim.cli import common
from cardiosim.runtime import info

START = common.MPI
PETSC_OPTIONS = True    # the words after -- are PETSc's
STOP_SIGNALS = True     # SIGTERM, SIGINT, SIGUSR1: a checkpoint and exit status 75 (docs/user/checkpoints.md)


def add_parser(sub) -> None:
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


def main(args) -> int:
    info.check_rank_count(args.comm.size)    # N single-rank copies would write the same files: before anything
    common.start_petsc(args)
    from cardiosim import api                # lazy: NumPy and PETSc, after the signal handler (common.start_signals)
    from cardiosim.runtime import log        # lazy: loads MPI
    log.set_quiet(args.quiet)
    cfg = api.config(args.config, args.set)
    done = api.run(cfg, output=args.output, overwrite=args.overwrite, restart=args.restart, quiet=args.quiet,
                   strict=args.strict, comm=args.comm)
    if done.stopped:
        from cardiosim.output.checkpoint import STOPPED   # lazy: NumPy
        same = " (with the same --set/--output options)" if args.set or args.output else ""
        log.info(f"checkpoint written at t = {done.summary['simulated_ms']:g} ms; resume with "
                 f"cardiosim run {args.config} --restart {done.summary['checkpoint']}{same}", force=True)
        return STOPPED
    return 0

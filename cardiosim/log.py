"""MPI-aware messages: rank 0 speaks for the job; errors from any rank carry its number."""

from __future__ import annotations

import sys

from mpi4py import MPI

_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet


def is_quiet() -> bool:
    return _quiet


def info(msg: str, force: bool = False) -> None:
    """On stdout from rank 0; ``force``: also with --quiet (what the user must act on)."""
    if MPI.COMM_WORLD.rank == 0 and (force or not _quiet):
        print(msg, flush=True)


def error(msg: str) -> None:
    """One line on stderr, from rank 0 only (every rank reaches the same conclusion for user errors)."""
    if MPI.COMM_WORLD.rank == 0:
        print(f"cardiosim: error: {msg}", file=sys.stderr, flush=True)

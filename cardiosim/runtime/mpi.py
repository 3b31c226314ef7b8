"""MPI helpers every package uses: collectives such as one root-then-all, the launcher."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np

from cardiosim.runtime.errors import SimulationError, UserError


def root_then_all(comm, fn, *, share: bool = True, catch: tuple = (UserError, SimulationError)):
    """``fn()`` on rank 0 of ``comm`` (an mpi4py communicator), and every rank goes on together (collective).

    Returns what ``fn`` returned, on every rank (``share``: broadcast from rank 0), or on rank 0 alone (``share``
    False, for what cannot or need not travel: a lock, an array that is scattered later; None on the others). An
    exception of ``catch`` raised by ``fn`` is raised on every rank, so that none is left waiting in the next
    collective: as the first class of ``catch`` it is an instance of, with its message (a ConfigError arrives as a
    UserError, its one line unchanged). Anything else raised by ``fn`` is a bug and stays on rank 0."""
    value = failure = None
    if comm.rank == 0:
        try:
            value = fn()
        except catch as e:
            failure = (next(i for i, c in enumerate(catch) if isinstance(e, c)), str(e))
    shared, failure = comm.bcast((value if share else None, failure), root=0)
    if failure is not None:
        raise catch[failure[0]](failure[1])
    return shared if share else value


def gather_to_root(comm, local, counts):
    """Rank 0: every rank's ``local`` (a float64 array) one after another, in rank order (``counts``: rank 0's list of
    their lengths, as comm.gather of len(local) gives it); None elsewhere (collective; one process: ``local``
    itself, no copy)."""
    local = np.ascontiguousarray(local, dtype=np.float64)
    if comm.size == 1:
        return local
    whole = np.empty(int(sum(counts)), dtype=np.float64) if comm.rank == 0 else None
    comm.Gatherv(local, [whole, counts] if comm.rank == 0 else None, root=0)
    return whole


def scatter_from_root(comm, whole, counts, n: int):
    """The inverse of gather_to_root: this rank's ``n`` values of rank 0's ``whole`` (``counts`` as there;
    collective)."""
    if comm.size == 1:
        return whole
    piece = np.empty(n, dtype=np.float64)
    comm.Scatterv([whole, counts] if comm.rank == 0 else None, piece, root=0)
    return piece


def find_mpirun() -> str | None:
    """The mpirun that belongs to this Python's environment (MPICH from PyPI in .venv), else the one on PATH."""
    here = Path(sys.executable).parent / "mpirun"
    return str(here) if here.exists() else shutil.which("mpirun")


def mpirun_command(ranks: int) -> list[str]:
    launcher = find_mpirun()
    if launcher is None:
        raise SystemExit("no mpirun found (neither next to the Python interpreter nor on PATH)")
    return [launcher, "-n", str(ranks)]

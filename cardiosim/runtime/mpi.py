"""MPI helpers every package uses: collectives such as one root-then-all, the launcher."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path


def find_mpirun() -> str | None:
    """The mpirun that belongs to this Python's environment (MPICH from PyPI in .venv), else the one on PATH."""
    here = Path(sys.executable).parent / "mpirun"
    return str(here) if here.exists() else shutil.which("mpirun")


def mpirun_command(ranks: int) -> list[str]:
    launcher = find_mpirun()
    if launcher is None:
        raise SystemExit("no mpirun found (neither next to the Python interpreter nor on PATH)")
    return [launcher, "-n", str(ranks)]

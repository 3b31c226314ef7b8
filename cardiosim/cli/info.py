"""``cardiosim info``: what this installation can do (cardiosim.runtime.info); started before MPI, so that it
reports an mpi4py that does not load instead of failing with it."""

from __future__ import annotations

from cardiosim.cli import common
from cardiosim.runtime import info

START = common.LOCAL
PETSC_OPTIONS = True    # info.main refuses the words after -- itself


def add_parser(sub) -> None:
    sub.add_parser("info", help="what this installation can do: PETSc and its CUDA, PyCUDA, GPUs, mpi4py's MPI "
                                "and the mpirun on PATH, the ranks started (exit status 1 where they do not fit)")


def main(args) -> int:
    return info.main(args, args.petsc_args)

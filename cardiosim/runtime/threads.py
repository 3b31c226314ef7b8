"""Threads per process of a cardiosim program: one BLAS/OpenMP thread per MPI rank.

cardiosim runs one MPI rank per core; a multithreaded BLAS or OpenMP under every rank oversubscribes the node (seen
on a GPU node: VecAXPY 100× slower with 16 ranks). The libraries read their thread count once, when they load, so a
program sets it first thing, before NumPy or PETSc is imported: the ``cardiosim`` command, ``python -m cardiosim``
and the benchmarks (cardiosim.bench). The processes they start (mpirun ranks, a sweep's runs and its check) inherit
it. Importing cardiosim as a library sets nothing: a program that uses cardiosim.api chooses its own
threads (cardiosim.api says how).
"""

from __future__ import annotations

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_thread_per_rank() -> None:
    """One thread for OpenMP, OpenBLAS and MKL in this process and the ones it starts; a variable already set (by
    the user, a batch script) is left as it is. Call it before NumPy or PETSc loads: later it reaches only the
    processes started after it."""
    for name in THREAD_VARIABLES:
        os.environ.setdefault(name, "1")


def setup_threads(comm) -> int:
    """Threads for a rank's set-up loops in C (the stiffness rows, cardiosim.tissue.operators): the cores this
    process may run on, shared among the ranks of its node, so 1 where the ranks fill the node (a CPU run, one per
    core) and all of them where one rank drives a GPU. Collective over the mpi4py communicator ``comm``."""
    from mpi4py import MPI               # here, not at the top: this module is imported before anything loads
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    ranks = local.Get_size()
    local.Free()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // ranks)

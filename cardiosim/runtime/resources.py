"""What a run needs, estimated before anything is allocated, against what the hosts have.

A grid too large for the memory would otherwise spend a long set-up filling it and end in a MemoryError
traceback or the OOM killer. The estimate is a lower bound (cell states, the vectors of the time step and the
solvers, the matrices' entries; preconditioners come on top), so a run it refuses could not have run.
"""

from __future__ import annotations

import os
import socket

from cardiosim.runtime.errors import UserError

VECTORS = 12            # Vm, φe, right-hand sides and the Krylov solvers' work vectors, 8 bytes per node each
AIJ_BYTES = 12          # one matrix entry: a float64 value and a 32-bit column index


def n_nodes(cfg) -> int:
    n = 1
    for L, h in zip(cfg.grid.size, cfg.grid.spacing):
        n *= int(round(L / h)) + 1
    return n


def bytes_per_node(cfg, states: int) -> tuple[int, int]:
    """(bytes per node on every rank, extra bytes per node on rank 0, which gathers the output's fields), for a cell
    model of ``states`` state variables."""
    dim = len(cfg.grid.size)
    points = 3 ** dim if cfg.grid.stencil == "box" else 2 * dim + 1   # auto: the smaller star, a lower bound
    matrices = 3 if cfg.simulation.equations == "bidomain" else 1
    shared = 8 * states + 8 * VECTORS + AIJ_BYTES * points * matrices
    root = 8 * (2 + len(cfg.output.fields))     # the gathered natural-order copies of one snapshot
    return shared, root


def available_memory() -> int | None:
    """Bytes this process can still get, or None where it cannot be told: the host's MemAvailable, or less where a
    limit is lower — the address-space limit (``ulimit -v``) and the cgroup's memory.max (a SLURM job's, a
    container's), both of which batch systems set."""
    candidates = [_meminfo(), _address_space_left(), _cgroup_left()]
    known = [c for c in candidates if c is not None]
    return min(known) if known else None


def _meminfo() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return None


def _address_space_left() -> int | None:
    try:
        import resource
        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/status") as f:
            size = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
        return max(limit - size, 0)
    except (ImportError, OSError, ValueError, StopIteration):
        return None


def _cgroup_left() -> int | None:
    """memory.max − memory.current of this process's cgroup (v2), None where there is no limit."""
    try:
        with open("/proc/self/cgroup") as f:
            rel = next(line.split(":", 2)[2].strip() for line in f if line.startswith("0::"))
        d = f"/sys/fs/cgroup{rel}"
        with open(f"{d}/memory.max") as f:
            limit = f.read().strip()
        if limit == "max":
            return None
        with open(f"{d}/memory.current") as f:
            return max(int(limit) - int(f.read()), 0)
    except (OSError, ValueError, StopIteration, IndexError):
        return None


def file_size_limit() -> int | None:
    """The largest file this process may write (``ulimit -f``, RLIMIT_FSIZE; batch systems set it), None: none."""
    try:
        import resource
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, ValueError):
        return None
    return None if limit == resource.RLIM_INFINITY else int(limit)


def check_fits(need: float, what: str, advice: str) -> None:
    """UserError where ``need`` bytes exceed what this process can still get (a command's estimate before its large
    allocations): ``what`` says what needs them, ``advice`` what to change."""
    have = available_memory()
    if have is not None and need > have:
        raise UserError(f"{what} need about {need / 1e9:.3g} GB of memory, and {have / 1e9:.3g} GB are available; "
                        f"{advice}")


def check_indices(cfg) -> None:
    """A DMDA of more nodes than PETSc's indices can count cannot be made; petsc4py would say so only in a
    traceback, after allocating."""
    import numpy as np
    from petsc4py import PETSc
    bits = 8 * np.dtype(PETSc.IntType).itemsize
    limit = 2 ** (bits - 1) - 1
    nodes = n_nodes(cfg)
    if nodes > limit:
        raise UserError(f"grid.spacing: grid.size / spacing gives {nodes:.4g} nodes, more than this PETSc's "
                        f"{bits}-bit indices allow ({limit}); use a coarser spacing or a smaller grid.size")


def check_memory(cfg, comm, states: int) -> None:
    """Refuse a run whose lower-bound memory need exceeds what some host has available (collective; the same
    UserError on every rank); and a grid beyond PETSc's indices. ``states``: the cell model's state variables."""
    check_indices(cfg)
    nodes = n_nodes(cfg)
    shared, root = bytes_per_node(cfg, states)
    hosts = comm.allgather((socket.gethostname(), available_memory()))
    need, have, ranks = {}, {}, {}
    for r, (host, avail) in enumerate(hosts):
        need[host] = need.get(host, 0) + nodes * shared / comm.size + (nodes * root if r == 0 else 0)
        have[host] = avail
        ranks[host] = ranks.get(host, 0) + 1
    for host in need:
        if have[host] is not None and need[host] > have[host]:
            raise UserError(f"grid.spacing: {nodes:.4g} nodes need at least {need[host] / 1e9:.3g} GB of memory "
                            f"on {host} ({ranks[host]} rank(s)), which has {have[host] / 1e9:.3g} GB available; "
                            f"use a coarser grid.spacing, a smaller grid.size, or more hosts")

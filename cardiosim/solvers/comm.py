"""The communication seam of cardiosim's stencil solvers on several ranks: how a grid level is split into boxes, and
how the ranks talk.

What moves, and where the code for it is:
  halo exchange     one layer of ghost nodes around each rank's box, per level, dimension by dimension (edges and
                    corners arrive too): kernels/stencil_mg.cpp ``exchange``
  reduction         a CG iteration's scalars, all in one MPI_Allreduce: ``allreduce`` there
  coarse levels     gathered onto rank 0 once a rank's box gets small (agglomeration), solved there by the serial
                    hierarchy, scattered back: ``gather_root`` / ``scatter_root`` there
This module holds the rest: the boxes of each level (the DMDA's decomposition, coarsened with the grid), the
mapping between PETSc's global numbering and grid coordinates, and the table of transports.

PETSc numbers a DMDA's nodes rank by rank, each rank's box in natural order (x fastest), ranks in process-grid order
(rank = px + Px (py + Py pz)); a coarse level is numbered the same way over its coarse boxes, so PETSc's parallel
matrices (the Galerkin products) and our boxes agree.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# How halo and gather bytes travel between ranks: name -> what it is. Chosen at run time (``-<prefix>smg_transport``,
# default auto) and printed in the run header. Host staging works everywhere (any MPI, any node count; the CPU build
# moves no byte twice); CUDA IPC needs every rank on one node, each on its GPU's device memory. The latencies that
# decide the default: docs/decisions/0018-stencil-solvers-on-several-ranks.md.
TRANSPORTS = {
    "mpi-host": "host-staged MPI: faces packed on the device, only the packed bytes copied to the host and sent",
    "ipc": "CUDA IPC: faces packed by this rank's kernel into the neighbour's device buffer, a flag there raised "
           "by the same kernel says so (ranks of one node; device work only, so a V-cycle is one CUDA graph)",
}


def transport(choice: str, gpu: bool, mpi_comm) -> str:
    """The transport for ``choice`` ("auto" or a TRANSPORTS name) on this communicator (collective): auto is ipc
    where the build is the GPU's and every rank shares one node, else mpi-host."""
    check("auto", choice)
    from mpi4py import MPI
    node = mpi_comm.Split_type(MPI.COMM_TYPE_SHARED)
    one_node = node.Get_size() == mpi_comm.Get_size()
    node.Free()
    if choice == "auto":
        return "ipc" if gpu and one_node else "mpi-host"
    if choice == "ipc" and not (gpu and one_node):
        raise ValueError("smg_transport = 'ipc' needs GPU matrices and every rank on one node")
    return choice


@dataclass(frozen=True)
class Boxes:
    """A level's split into per-rank boxes: global sizes ``n`` (x, y, z; 1 beyond the grid's dimensions), the
    process grid ``P`` and, per dimension, each process column's node count ``sizes[d]`` (length P[d])."""

    n: tuple
    P: tuple
    sizes: tuple

    @staticmethod
    def of_dmda(da) -> "Boxes":
        dim = da.getDim()
        n = tuple(int(v) for v in da.getSizes()) + (1,) * (3 - dim)
        P = tuple(int(v) for v in da.getProcSizes()) + (1,) * (3 - dim)
        ranges = da.getOwnershipRanges()
        sizes = tuple(np.asarray(ranges[d], dtype=np.int64) if d < dim else np.ones(1, dtype=np.int64)
                      for d in range(3))
        return Boxes(n, P, sizes)

    @staticmethod
    def whole(n) -> "Boxes":
        """One rank's box: the whole grid of sizes ``n`` (x, y, z)."""
        return Boxes(tuple(int(v) for v in n), (1, 1, 1), tuple(np.array([int(v)], dtype=np.int64) for v in n))

    @property
    def nranks(self) -> int:
        return int(np.prod(self.P))

    def starts(self, d: int) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.sizes[d])[:-1]]).astype(np.int64)

    def place(self, rank: int) -> tuple[int, int, int]:
        """The rank's position in the process grid."""
        Px, Py, _ = self.P
        return rank % Px, (rank // Px) % Py, rank // (Px * Py)

    def box(self, rank: int) -> tuple[np.ndarray, np.ndarray]:
        """(start, size) of the rank's box, 3 entries each."""
        q = self.place(rank)
        return (np.array([self.starts(d)[q[d]] for d in range(3)], dtype=np.int64),
                np.array([self.sizes[d][q[d]] for d in range(3)], dtype=np.int64))

    def all_boxes(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, sizes) of every rank's box, [nranks, 3] each (int32, for the C side)."""
        boxes = [self.box(r) for r in range(self.nranks)]
        return (np.array([b[0] for b in boxes], dtype=np.int32), np.array([b[1] for b in boxes], dtype=np.int32))

    def offsets(self) -> np.ndarray:
        """PETSc's first global index of each rank (and the total at the end)."""
        counts = [int(np.prod(self.box(r)[1])) for r in range(self.nranks)]
        return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)

    def coords(self, index: np.ndarray) -> np.ndarray:
        """Grid coordinates [m, 3] of PETSc global indices."""
        index = np.asarray(index, dtype=np.int64)
        off = self.offsets()
        rank = np.searchsorted(off, index, side="right") - 1
        local = index - off[rank]
        boxes = [self.box(r) for r in range(self.nranks)]
        start = np.array([b[0] for b in boxes])[rank]
        size = np.array([b[1] for b in boxes])[rank]
        i = local % size[:, 0]
        j = (local // size[:, 0]) % size[:, 1]
        k = local // (size[:, 0] * size[:, 1])
        return np.stack([i, j, k], axis=1) + start

    def index(self, ijk: np.ndarray) -> np.ndarray:
        """PETSc global indices of grid coordinates [m, 3]."""
        ijk = np.asarray(ijk, dtype=np.int64)
        q = [np.searchsorted(np.cumsum(self.sizes[d]), ijk[:, d], side="right") for d in range(3)]
        rank = q[0] + self.P[0] * (q[1] + self.P[1] * q[2])
        starts = [self.starts(d) for d in range(3)]
        local = [ijk[:, d] - starts[d][q[d]] for d in range(3)]
        size = [self.sizes[d][q[d]] for d in range(3)]
        return self.offsets()[rank] + local[0] + size[0] * (local[1] + size[1] * local[2])

    def natural(self, ijk: np.ndarray) -> np.ndarray:
        """Natural (whole-grid, x fastest) indices of grid coordinates [m, 3]."""
        ijk = np.asarray(ijk, dtype=np.int64)
        return ijk[:, 0] + self.n[0] * (ijk[:, 1] + self.n[1] * ijk[:, 2])

    def coarsen(self, pos: list[np.ndarray]) -> "Boxes":
        """The boxes of the next coarser level: a rank keeps the coarse points (global fine indices ``pos[d]``) that
        lie in its fine box."""
        sizes = []
        for d in range(3):
            edges = np.concatenate([[0], np.cumsum(self.sizes[d])])
            c = np.searchsorted(pos[d], edges)
            sizes.append(np.diff(c).astype(np.int64))
        return Boxes(tuple(len(p) for p in pos), self.P, tuple(sizes))

    def smallest(self, dim: int) -> int:
        """The smallest box extent in any of the grid's dimensions."""
        return int(min(self.sizes[d].min() for d in range(dim)))


def fortran_handle(petsc_comm) -> int:
    """The communicator as the Fortran integer MPI_Comm_f2c takes (portable across MPI implementations)."""
    return int(petsc_comm.tompi4py().py2f())


# The layouts of a solve on several ranks: the grid split over them ("ranks"), or gathered whole onto rank 0 and
# solved there ("root": the PDE on one GPU, the cells still on all). "auto" takes root below ROOT_BELOW nodes per
# rank, where a step's halo latency costs more than the work it splits: on 2 H200s with the V-cycle as a CUDA graph
# per rank, root is the faster up to 390,000 nodes per rank and the split (halo per sweep) at 781,000
# (docs/decisions/0018-stencil-solvers-on-several-ranks.md).
LAYOUTS = ("auto", "ranks", "root")
ROOT_BELOW = 600_000


def check(layout_choice: str, transport_choice: str) -> None:
    """ValueError naming the option unless both choices are known (on any number of ranks: a misspelt option is a
    mistake on one rank too)."""
    if layout_choice not in LAYOUTS:
        raise ValueError(f"smg_layout = '{layout_choice}'; allowed: {', '.join(LAYOUTS)}")
    if transport_choice != "auto" and transport_choice not in TRANSPORTS:
        raise ValueError(f"smg_transport = '{transport_choice}'; allowed: auto, {', '.join(TRANSPORTS)}")


def layout(choice: str, nodes: int, nranks: int) -> tuple[str, str]:
    """("ranks" or "root", why) for a grid of ``nodes`` on ``nranks`` ranks."""
    check(choice, "auto")
    if nranks == 1:
        return "ranks", ""
    where = {"ranks": f"split over {nranks} ranks", "root": "whole on rank 0"}
    if choice != "auto":
        return choice, f"{where[choice]}, as smg_layout says"
    per = nodes // nranks
    if per < ROOT_BELOW:
        return "root", f"{where['root']}: {per} nodes per rank < {ROOT_BELOW}"
    return "ranks", f"{where['ranks']}: {per} nodes per rank >= {ROOT_BELOW}"

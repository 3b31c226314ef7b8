"""The multigrid hierarchy's operators as stencils: a matrix's rows read into a stencil, and the Galerkin coarse
operator PᵀAP computed on the stencils, one dimension at a time (kernels/stencil_setup.c), on one rank or on each
rank's box of a split level.

Why not PETSc's MatPtAP: P is the tensor product of 1D linear interpolations, so
PᵀAP = P_zᵀ(P_yᵀ(P_xᵀ A P_x)P_y)P_z can be formed on the stencils with at most 27·4 multiply-adds per node and
dimension, with no matrix of P and no sparse triple product. With this and the stiffness rows in C
(cardiosim.tissue.operators) the 216³ slab's set-up on an H200 host takes less than half the time it takes with
MatPtAP (docs/decisions/0018-stencil-solvers-on-several-ranks.md). The results equal MatPtAP's to round-off
(tests/test_galerkin.py).

A stencil here is S[s, t]: node t of a box (x fastest), neighbour code s = (dx+1) + 3(dy+1) + 9(dz+1), always the 27
codes of 3D (a 2D grid is one z layer; :func:`planar` gives the 9 codes of 2D that kernels/stencil_mg.cpp reads),
with the codes whose rows may be non-zero (:class:`Stencil`): a fine star stencil uses 7 of the 27 rows, and the
others are never read, written or scanned (at 10^7 nodes each row is 80 MB).
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np
from petsc4py import PETSc

from cardiosim.runtime.compile import c_library
from cardiosim.solvers.comm import Boxes

SOURCE = "stencil_setup.c"
NCODES = 27

_lib: list[ctypes.CDLL] = []


def library() -> ctypes.CDLL:
    """kernels/stencil_setup.c, compiled once per machine into the cache (the stiffness rows of
    cardiosim.tissue.operators come from it too)."""
    if not _lib:
        lib = c_library(SOURCE, "multigrid")
        p, i, l = ctypes.c_void_p, ctypes.c_int, ctypes.c_long
        lib.sst_from_csr.argtypes, lib.sst_from_csr.restype = [l, p, p, i, p, i, p, p, p, i, p, p], i
        lib.sst_coarsen.argtypes, lib.sst_coarsen.restype = [i, p, p, i, p, p, l, l, l, p, p, p, p, p, p, p, i, p,
                                                             p], i
        lib.sst_stiffness.argtypes, lib.sst_stiffness.restype = [i, p, p, p, p, p, p, l, l, p, p, p, i, p, i, p, p,
                                                               p], i
        lib.sst_connectivity.argtypes = [i, p, p, p, p, p, i, p, p, i, p, p, p, i]
        lib.sst_connectivity.restype = l
        lib.sst_gather.argtypes, lib.sst_gather.restype = [l, p, i, p, p], None
        lib.sst_apply.argtypes, lib.sst_apply.restype = [i, p, p, p, p, p, l, p, p, p], None
        _lib.append(lib)
    return _lib[0]


def _int64(a) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=np.int64)


@dataclass
class Stencil:
    """S (27, nodes of a box; rows not in ``codes`` are zero) and ``codes``, the sorted codes whose rows may be
    non-zero."""
    S: np.ndarray
    codes: np.ndarray

    @classmethod
    def of(cls, S: np.ndarray) -> "Stencil":
        """A stencil given whole (its codes found by a scan)."""
        return cls(S, np.flatnonzero(np.any(S != 0, axis=1)).astype(np.int32))


def from_csr(csr, boxes: Boxes, rank: int) -> Stencil:
    """The stencil of the CSR rows (indptr, columns, values; PETSc's global numbering) of ``rank``'s box of
    ``boxes``. ValueError where the matrix couples nodes more than one grid step apart or does not fit the
    grid."""
    indptr, cols, vals = csr
    nrows = len(indptr) - 1
    starts, sizes = boxes.all_boxes()
    if nrows != int(np.prod(sizes[rank])):
        raise ValueError(f"multigrid: the matrix has {nrows} rows here for a box of {int(np.prod(sizes[rank]))} "
                         f"grid nodes")
    cols = np.ascontiguousarray(cols)
    if cols.dtype not in (np.int32, np.int64):
        cols = cols.astype(np.int64)
    vals = np.ascontiguousarray(vals, dtype=float)
    S = np.zeros((NCODES, nrows))
    used = np.zeros(NCODES, dtype=np.int32)
    # every array bound to a name for the call's duration (a temporary's .ctypes.data outlives its memory)
    indptr, offsets, starts, sizes = _int64(indptr), _int64(boxes.offsets()), _int64(starts), _int64(sizes)
    err = library().sst_from_csr(nrows, indptr.ctypes.data, cols.ctypes.data, int(cols.dtype == np.int64),
                                 vals.ctypes.data, boxes.nranks, offsets.ctypes.data, starts.ctypes.data,
                                 sizes.ctypes.data, rank, S.ctypes.data, used.ctypes.data)
    if err == 1:
        raise ValueError("multigrid: the matrix couples nodes more than one grid step apart")
    if err:
        raise ValueError("multigrid: the matrix has a column outside the grid")
    return Stencil(S, np.flatnonzero(used).astype(np.int32))


_ATTR = "cardiosim.stencil"


def attach(A: PETSc.Mat, st: Stencil) -> None:
    """Record the stencil of A's rows on this rank's box where the caller built A from it (cardiosim.tissue.equations: the
    assembler's rows), so that :func:`of_matrix` need not read A back: PETSc's copy of the CSR and
    :func:`from_csr` cost ~2 s per matrix of 10^7 nodes. Held with A's object state: any later change to A
    (values, scale, diagonal) makes it stale, and A is then read back."""
    A.setAttr(_ATTR, (A.stateGet(), st))


def detach(A: PETSc.Mat) -> None:
    """Forget the stencil attached to A (its rows' memory is about to be reused for something else)."""
    A.setAttr(_ATTR, None)


def of_matrix(A: PETSc.Mat, boxes: Boxes, rank: int) -> Stencil:
    """The stencil of A's rows on ``rank``'s box: the one attached to A while A is unchanged, else read from A."""
    held = A.getAttr(_ATTR)
    if held is not None and held[0] == A.stateGet():
        return held[1]
    if A.getType() == PETSc.Mat.Type.PYTHON:      # a stencil matrix (cardiosim.solvers.stencil_matrix) has no rows
        raise ValueError("multigrid: the matrix holds no stencil (a stencil matrix whose stencil was released)")
    return from_csr(A.getValuesCSR(), boxes, rank)


def spread(codes: np.ndarray, d: int) -> np.ndarray:
    """The codes a coarsening along dimension d can give from ``codes``: each with every offset along d."""
    stride = 3 ** d
    base = codes - ((codes // stride) % 3) * stride
    return np.unique((base[:, None] + stride * np.arange(3)[None, :]).ravel()).astype(np.int32)


def coarsen(st: Stencil, start, size, tables: list[dict], cstart, csize) -> Stencil:
    """PᵀAP on the box (cstart, csize) of the coarse level, from the fine stencil on the box (start, size), which
    must hold every fine node with a parent in the coarse box (a rank's box and one ghost layer). ``tables``: the
    per-dimension interpolation of the whole grid (cardiosim.solvers.multigrid.transfer_1d)."""
    lib = library()
    start, size = _int64(start).copy(), _int64(size).copy()
    S, codes = st.S, st.codes
    for d in range(3):
        if len(tables[d]["pos"]) == len(tables[d]["c0"]):
            continue                                     # this dimension does not coarsen
        ocodes = spread(codes, d)
        out_size = size.copy()
        out_size[d] = csize[d]
        out = np.zeros((NCODES, int(np.prod(out_size))))     # rows ocodes written, the others left zero
        keys = ("c0", "c1", "w0", "w1", "pos", "wl", "wr")
        t = {k: np.ascontiguousarray(tables[d][k]) for k in keys}
        err = lib.sst_coarsen(d, start.ctypes.data, size.ctypes.data, len(codes), codes.ctypes.data, S.ctypes.data,
                              int(cstart[d]), int(csize[d]), len(t["c0"]), *(t[k].ctypes.data for k in keys),
                              len(ocodes), ocodes.ctypes.data, out.ctypes.data)
        if err == 2:
            raise MemoryError("multigrid: out of host memory while coarsening")
        if err:
            raise ValueError("multigrid: a transfer table is wrong, or the fine box lacks a ghost layer")
        S, codes, size = out, ocodes, out_size
        start[d] = cstart[d]
    # the codes that came out non-zero (a scan of the coarse box only): the V-cycle reads no more than these
    return Stencil(S, np.array([c for c in codes if S[c].any()], dtype=np.int32))


def ghosted(st: Stencil, boxes: Boxes, rank: int, comm: PETSc.Comm, dim: int):
    """(the stencil on the rank's box with one ghost layer, its start, its size): the neighbours' rows by a DMDA of
    the level's boxes (box stencil: edges and corners too), carrying only the codes some rank uses."""
    from mpi4py import MPI
    used = np.zeros(NCODES, dtype=np.int32)
    used[st.codes] = 1
    comm.tompi4py().Allreduce(MPI.IN_PLACE, used, op=MPI.MAX)
    codes = np.flatnonzero(used).astype(np.int32)
    da = PETSc.DMDA().create(dim=dim, dof=len(codes), sizes=boxes.n[:dim], proc_sizes=boxes.P[:dim],
                             ownership_ranges=[tuple(int(v) for v in boxes.sizes[d]) for d in range(dim)],
                             stencil_type=PETSc.DMDA.StencilType.BOX, stencil_width=1, comm=comm)
    try:
        g, loc = da.createGlobalVec(), da.createLocalVec()
        g.getArray()[:] = st.S[codes].T.ravel()
        da.globalToLocal(g, loc)
        gstart, gsize = da.getGhostCorners()
        gstart = tuple(gstart) + (0,) * (3 - dim)
        gsize = tuple(gsize) + (1,) * (3 - dim)
        out = np.zeros((NCODES, int(np.prod(gsize))))
        out[codes] = loc.getArray(readonly=True).reshape(-1, len(codes)).T
        for v in (g, loc):
            v.destroy()
    finally:
        da.destroy()
    return Stencil(out, codes), gstart, gsize


CENTRE = 13


def coupled(st: Stencil) -> np.ndarray:
    """Per node of the stencil's box: whether its row couples to another node (a nonzero off the diagonal). The
    rows that do not (a masked grid's nodes outside the tissue: a diagonal alone, cardiosim.tissue.equations) are the
    inactive nodes of the finest level of cardiosim.solvers.multigrid."""
    out = np.zeros(st.S.shape[1], dtype=bool)
    for c in st.codes:                  # code by code: no (codes x nodes) temporary (~200 MB at 10^7 nodes)
        if c != CENTRE:
            out |= st.S[c] != 0
    return out


def _neighbours(active: np.ndarray, start, size, code: int) -> np.ndarray:
    """The flags of ``active`` (a whole level, (z, y, x); False beyond it) at each node of the box (start, size)
    moved by the stencil code's offset, flat in the box's order."""
    di, dj, dk = code % 3 - 1, (code // 3) % 3 - 1, code // 9 - 1
    pad = np.pad(active, 1)
    (i0, j0, k0), (ni, nj, nk) = (int(v) for v in start), (int(v) for v in size)
    return pad[k0 + 1 + dk:k0 + 1 + dk + nk, j0 + 1 + dj:j0 + 1 + dj + nj, i0 + 1 + di:i0 + 1 + di + ni].ravel()


def reaches_inactive(st: Stencil, active: np.ndarray, start, size) -> bool:
    """Whether a row of the box (start, size) of ``active``'s level couples an active node to an inactive one (a
    matrix whose decoupled rows are not decoupled columns too: then skipping them would not be exact)."""
    here = _neighbours(active, start, size, CENTRE)
    return any(np.any((st.S[c] != 0) & here & ~_neighbours(active, start, size, c)) for c in st.codes if c != CENTRE)


def lump(st: Stencil, active: np.ndarray, start, size) -> Stencil:
    """The coarse stencil on the box (start, size) with every coupling that touches an inactive node (``active``: the
    whole level's flags, (z, y, x)) moved onto the row's diagonal, so that an inactive node's row is a diagonal
    alone, as on the finest level, and skipping it stays exact on the next level too (cardiosim.solvers.multigrid,
    "Active nodes"). The couplings moved are those of the outside rows' diagonals, which the Galerkin product
    spreads over the coarse nodes their interpolation touches (nonnegative: the matrix only grows, in the
    positive semi-definite sense, and stays symmetric); an active node's couplings to active nodes are kept."""
    S = st.S
    here = _neighbours(active, start, size, CENTRE)
    for c in st.codes:                 # ascending: one order of the sums on every rank's box
        if c == CENTRE:
            continue
        cut = (S[c] != 0) & ~(here & _neighbours(active, start, size, c))
        S[CENTRE, cut] += S[c, cut]
        S[c, cut] = 0.0
    return Stencil(S, np.array([c for c in st.codes if S[c].any()], dtype=np.int32))


def planar(st: Stencil, dim: int) -> tuple[np.ndarray, np.ndarray]:
    """The stencil in kernels/stencil_mg.cpp's codes (the 27 of 3D, or in 2D the 9 of the one z layer): its rows
    and its codes there."""
    if dim == 3:
        return st.S, st.codes
    return np.ascontiguousarray(st.S[9:18]), (st.codes[(st.codes >= 9) & (st.codes < 18)] - 9).astype(np.int32)


def dense(st: Stencil, sizes) -> np.ndarray:
    """The matrix of a stencil on a whole (small) grid, natural order, symmetrised (symmetric by construction, up to
    round-off)."""
    nx, ny, nz = (int(v) for v in sizes)
    n = nx * ny * nz
    t = np.arange(n)
    i, j, k = t % nx, (t // nx) % ny, t // (nx * ny)
    A = np.zeros((n, n))
    S = st.S
    for s in st.codes:
        di, dj, dk = s % 3 - 1, (s // 3) % 3 - 1, s // 9 - 1
        ok = (i + di >= 0) & (i + di < nx) & (j + dj >= 0) & (j + dj < ny) & (k + dk >= 0) & (k + dk < nz)
        A[t[ok], (t + di + nx * (dj + ny * dk))[ok]] = S[s, ok]
    return np.ascontiguousarray(0.5 * (A + A.T))

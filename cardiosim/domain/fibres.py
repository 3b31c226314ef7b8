"""Rule-based fibres and ventricular coordinates on the grid: ``cardiosim geometry fibres GEO.h5 --out OUT.h5``.

Input: a ``cardiosim geometry`` file with ``labels`` (tissue > 0) and ``surfaces`` (the tissue nodes on labelled
surfaces, as bits: :data:`SURFACES`). Laplace problems on the tissue nodes, with Dirichlet values on those
surfaces, give

    transmural   0 at the endocardia (LV and RV) to 1 at the epicardium: the LV alone, Bayer et al. 2012's φ_epi;
                 both ventricles, the smaller of the two walls' depths u and v below, so that each free wall runs
                 from its own endocardium to the epicardium and the septum from either face (0) to 0.5 in its
                 middle: a septum has endocardial layers on both sides and no epicardium (φ_epi, 0 on both
                 endocardia and nearly 0 through the whole septum, would make it all endocardial)
    lv_rv        BiV only: 0 at the LV endocardium to 1 at the RV endocardium (no condition elsewhere: about 0 in
                 the LV free wall, 1 in the RV free wall, 0 → 1 across the septum)
    apex_base    0 at the apex to 1 at the base: the position along the long axis (from the apex to the base
                 plane, both found from the surfaces), a straight coordinate rather than a Laplace solution, whose
                 point condition at the apex crowds its values there; the fibres' longitudinal direction does come
                 from a Laplace solution (ψ: 0 at the apex node, 1 at the base), as in Bayer's method.

Fibres, sheets (and the sheet normals, their cross product) follow the rule of Bayer et al. 2012 (Ann Biomed Eng 40:
2243, "LDRB"): at each node a frame of the longitudinal direction (∇ψ), the transmural direction and the
circumferential one (their cross product); the fibre is the circumferential direction turned by the helix angle α
about the transmural one, the sheet the transmural direction turned by the sheet angle β about the fibre. Where
this departs from Bayer's algorithm, and why:

* The angles are linear in the wall's depth: α = α_endo + w (α_epi − α_endo), and β likewise. Bayer orients an
  endocardial frame at α_endo and an epicardial one at α_w(φ_epi) and interpolates the two rotations (bislerp)
  with weight φ_epi; on a plain LV wall that gives α_endo + φ_epi² (α_epi − α_endo) (+30° mid-wall, not 0°), and
  where the two frames are more than 90° apart bislerp takes the other way round (a jump at φ_epi = 0.75). Doste
  et al. 2019 (Int J Numer Meth Biomed Eng 35: e3185) made the same correction.
* Two walls instead of four interpolated frames. The LV wall's depth u is a Laplace solution, 0 at the LV
  endocardium and 1 at the epicardium and the RV endocardium (so the septum runs from the LV side, α_endo, to the
  RV side, α_epi in the LV's frame, which is α_endo of the RV seen from its own cavity: Bayer's septal rule); the RV
  wall's depth v is 0 at the RV endocardium and 1 at the epicardium and the LV endocardium. Each gives a fibre
  and a sheet (transmural direction ∇u, resp. ∇v); they are mixed with weight |∇v|²/(|∇u|² + |∇v|²): in the LV
  free wall ∇v vanishes (v = 1 on both its faces), in the RV free wall ∇u does, and in the septum the two rules
  give the same directions. The LV alone has u only.

The Laplace problems are assembled here, on the tissue nodes only (the Q1 stiffness of the grid's elements whose
eight corners are all tissue: the surface rule of cardiosim.domain.mask, so the same staircase is no-flux), and solved
with PETSc on one process: CG + ICC(0), which took 37 iterations (φ_epi) and 206 (ψ) on the BiV at 0.25 mm
(464,000 tissue nodes), and less time there than CG + GAMG (10-14 iterations, but a set-up of several seconds);
ψ and lv_rv above GAMG_ROWS free nodes by CG + GAMG, whose iterations do not grow with the grid. A small
assembly of its own because the run's operators (cardiosim.tissue.operators) are built on the whole box of a DMDA across
MPI ranks, which an anatomy made once on a login node has no need of; cardiosim's tissue-only stencil
solvers (cardiosim.solvers.multigrid) may replace it.
"""

from __future__ import annotations

import argparse
import itertools
import math
from pathlib import Path

import numpy as np

from cardiosim.runtime.errors import SimulationError, UserError
from cardiosim.runtime.resources import check_fits

# The bits of a geometry file's ``surfaces`` dataset: a node may lie on several surfaces (the base's rim is on the
# base and on an endocardium or the epicardium, as a mesh's vertex there is on both surfaces' facets); 0: on none.
SURFACES = {"base": 1, "lv_endo": 2, "rv_endo": 4, "epi": 8}

# Default angles (degrees): helix +60° at the endocardium to −60° at the epicardium; sheets transmural.
HELIX = (60.0, -60.0)
SHEET = (0.0, 0.0)

RTOL = 1e-10             # the Laplace solves' relative residual: coordinates to ~1e-8, far below what is asked of them


# PETSc starts MPI, whose start-up writes shared-memory files: under a file-size limit (ulimit -f) smaller than
# those it aborts the process with a page of MPI's errors. Measured with this project's MPICH (UCX): it fails at
# 4 MB and starts at 4.5 MB; 16 MB leaves room for other MPI builds.
MPI_FILE_LIMIT = 16 << 20


def check_file_limit(out: Path) -> None:
    """Refuse, before PETSc starts MPI, a file-size limit MPI's start-up could not live with (one line, exit 3)."""
    import resource
    soft, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if soft != resource.RLIM_INFINITY and soft < MPI_FILE_LIMIT:
        raise SimulationError(f"--out {out}: cannot write under a file-size limit of {soft / 1024:.0f} KB (ulimit -f): "
                              f"the rule-based fibres' solver (PETSc, which starts MPI) needs files of up to "
                              f"{MPI_FILE_LIMIT >> 20} MB for its shared memory; raise the limit; nothing written")


# -- tissue nodes and the Q1 Laplacian on them ----------------------------------------------------------------------
CORNERS = tuple(itertools.product((0, 1), repeat=3))                 # an element's corners, (z, y, x) offsets
OFFSETS = tuple(itertools.product((-1, 0, 1), repeat=3))             # a node's couplings, (z, y, x) offsets


def tissue_nodes(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(elements, nodes) of a (nz, ny, nx) label image: an element (indexed by its lowest corner) is tissue where
    its eight corners are labelled, a node where it is a corner of a tissue element (cardiosim.domain.mask's rule)."""
    labelled = labels > 0
    shape = labelled.shape
    elements = np.ones(tuple(s - 1 for s in shape), dtype=bool)
    for off in CORNERS:
        elements &= labelled[tuple(slice(o, o + s - 1) for o, s in zip(off, shape))]
    nodes = np.zeros(shape, dtype=bool)
    for off in CORNERS:
        nodes[tuple(slice(o, o + s - 1) for o, s in zip(off, shape))] |= elements
    return elements, nodes


class Tissue:
    """The tissue nodes and elements of a grid by their flat indices (natural order, elements by their lowest
    corner's node), with the tables the Laplacian and the gradients read, so that no per-node array of the whole
    box is made after this (the box is often four to six times the tissue):

    ``idx`` the nodes' flat indices (sorted: the order of ``np.flatnonzero(nodes)``), ``number`` each box node's
    tissue number (−1 elsewhere; int32 below 2^31 tissue nodes), ``corner[c]`` the tissue numbers of the elements'
    corners c (CORNERS), ``node_element[c]`` the element whose corner c a node is (its number, −1 for none)."""

    def __init__(self, elements: np.ndarray, nodes: np.ndarray):
        self.shape = nodes.shape
        self.strides = (self.shape[1] * self.shape[2], self.shape[2], 1)
        self.idx = np.flatnonzero(nodes)
        self.n = len(self.idx)
        itype = np.int32 if self.n < 2 ** 31 - 1 else np.int64
        self.number = np.full(nodes.size, -1, dtype=itype)
        self.number[self.idx] = np.arange(self.n, dtype=itype)
        padded = np.zeros(self.shape, dtype=bool)
        padded[:-1, :-1, :-1] = elements
        self.elements = np.flatnonzero(padded)
        del padded
        self.corner = np.empty((8, len(self.elements)), dtype=itype)
        self.node_element = np.full((8, self.n), -1, dtype=itype)
        for c, off in enumerate(CORNERS):
            self.corner[c] = self.number[self.elements + self.shift(off)]
            self.node_element[c, self.corner[c]] = np.arange(len(self.elements), dtype=itype)

    def shift(self, off) -> int:
        return int(sum(o * s for o, s in zip(off, self.strides)))


def _q1_stiffness(h: float) -> np.ndarray:
    """The Q1 Laplacian of a cube of side h, 8 × 8, corners numbered by their offsets (z, y, x) in {0, 1}³: the
    tensor product of the 1D stiffness and mass matrices (exact; scales as h^(3−2))."""
    k1 = np.array([[1.0, -1.0], [-1.0, 1.0]])
    m1 = np.array([[1.0, 0.5], [0.5, 1.0]]) / 3.0
    K = np.zeros((8, 8))
    for i, a in enumerate(CORNERS):
        for j, b in enumerate(CORNERS):
            K[i, j] = sum(k1[a[d], b[d]] * np.prod([m1[a[e], b[e]] for e in range(3) if e != d]) for d in range(3))
    return K * h


def _coupling(t: Tissue, K: np.ndarray, off, has: list) -> np.ndarray:
    """At each tissue node n, the Laplacian's entry (n, n + off): the sum over the elements holding both (those
    whose corner a is n, a + off a corner too), in the order of the corners a."""
    return _coupling_of(K, off, has, t.n)


def _coupling_of(K: np.ndarray, off, has: list, n: int) -> np.ndarray:
    """:func:`_coupling` at n nodes, ``has[i]`` whether each is corner i of an element."""
    v = np.zeros(n)
    for i, a in enumerate(CORNERS):
        b = tuple(x + o for x, o in zip(a, off))
        if all(c in (0, 1) for c in b) and K[i, CORNERS.index(b)] != 0.0:
            v += K[i, CORNERS.index(b)] * has[i]
    return v


def laplacian(elements: np.ndarray, nodes: np.ndarray, h: float, tissue: Tissue | None = None):
    """The Q1 stiffness matrix on the tissue nodes (scipy CSR, rows in the order of ``np.flatnonzero(nodes)``,
    columns sorted), written straight into its CSR arrays one neighbour offset at a time (two passes: the
    entries per row, then the entries), so that neither a per-element array of 64 entries nor a coordinate list
    of every entry is made."""
    import scipy.sparse as sp
    t = tissue or Tissue(elements, nodes)
    K = _q1_stiffness(h)
    has = [t.node_element[c] >= 0 for c in range(8)]
    counts = np.zeros(t.n, dtype=np.int64)
    for off in OFFSETS:
        counts += _coupling(t, K, off, has) != 0.0
    indptr = np.concatenate([[0], np.cumsum(counts)])
    data = np.empty(int(indptr[-1]))
    indices = np.empty(int(indptr[-1]), dtype=t.number.dtype)
    cursor = indptr[:-1].copy()
    for off in OFFSETS:          # in increasing flat offset: each row's columns come sorted
        v = _coupling(t, K, off, has)
        nz = np.flatnonzero(v)
        at = cursor[nz]
        data[at] = v[nz]
        indices[at] = t.number[t.idx[nz] + t.shift(off)]
        cursor[nz] += 1
    return sp.csr_matrix((data, indices, indptr), shape=(t.n, t.n))


def _free_block(A, free: np.ndarray):
    """A[free][:, free] (CSR, columns in A's order) in one pass over A's entries: the rows and columns of the free
    nodes, renumbered; scipy's two fancy indexings made two copies of A's rows on the way."""
    import scipy.sparse as sp
    itype = A.indices.dtype
    keep = free[A.indices]
    keep &= np.repeat(free, np.diff(A.indptr))
    kept = np.zeros(len(keep) + 1, dtype=A.indptr.dtype)
    np.cumsum(keep, out=kept[1:])
    per_row = (kept[A.indptr[1:]] - kept[A.indptr[:-1]])[free]
    del kept
    rank = (np.cumsum(free) - 1).astype(itype)
    n = int(free.sum())
    indptr = np.zeros(n + 1, dtype=A.indptr.dtype)
    np.cumsum(per_row, out=indptr[1:])
    return sp.csr_matrix((A.data[keep], rank[A.indices[keep]], indptr), shape=(n, n))


# Free rows per chunk while a free block goes into PETSc's matrix: the chunk's entries are its temporaries.
ROW_CHUNK = 1 << 19


def _free_block_into(t: Tissue, h: float, free: np.ndarray, us: list):
    """The free block of the Laplacian on the tissue nodes (t: :class:`Tissue`, its ``number`` table present)
    straight into a PETSc matrix, ROW_CHUNK rows at a time (preallocated exactly, so its entries are stored once),
    and the right-hand sides −A[free][:, fixed] u[fixed] for each u of ``us`` (0 at the free nodes), each summed in
    the order of the row's columns as A @ u sums them: the matrix and vectors that :func:`laplacian` and
    :func:`_free_block` gave, without a copy of the whole Laplacian."""
    from petsc4py import PETSc
    K = _q1_stiffness(h)
    rows = np.flatnonzero(free)
    rank = np.full(t.n, -1, dtype=t.number.dtype)
    rank[rows] = np.arange(len(rows), dtype=t.number.dtype)

    def entries(r):
        """(offset's shift, nz positions in r, columns' tissue numbers, values) of rows r, offset by offset."""
        has = [t.node_element[c, r] >= 0 for c in range(8)]
        for off in OFFSETS:
            v = _coupling_of(K, off, has, len(r))
            nz = np.flatnonzero(v)
            yield nz, t.number[t.idx[r[nz]] + t.shift(off)], v[nz]

    counts = np.zeros(len(rows), dtype=PETSc.IntType)
    for i in range(0, len(rows), ROW_CHUNK):
        r = rows[i:i + ROW_CHUNK]
        for nz, col, _ in entries(r):
            counts[i + nz] += free[col]
    M = PETSc.Mat().createAIJ(size=(len(rows), len(rows)), nnz=counts, comm=PETSc.COMM_SELF)
    bs = [np.zeros(len(rows)) for _ in us]
    for i in range(0, len(rows), ROW_CHUNK):
        r = rows[i:i + ROW_CHUNK]
        indptr = np.zeros(len(r) + 1, dtype=PETSc.IntType)
        np.cumsum(counts[i:i + len(r)], out=indptr[1:])
        cols = np.empty(int(indptr[-1]), dtype=PETSc.IntType)
        vals = np.empty(int(indptr[-1]))
        cursor = indptr[:-1].copy()
        acc = [np.zeros(len(r)) for _ in us]
        for nz, col, v in entries(r):
            for a, u in zip(acc, us):
                a[nz] += v * u[col]
            keep = free[col]
            at = cursor[nz[keep]]
            cols[at] = rank[col[keep]]
            vals[at] = v[keep]
            cursor[nz[keep]] += 1
        M.setValuesIJV(indptr, cols, vals, rowmap=np.arange(i, i + len(r), dtype=PETSc.IntType))
        for b, a in zip(bs, acc):
            b[i:i + len(r)] = -a
    M.assemble()
    return M, bs


def solve_laplace(A, fixed: np.ndarray, values, what: str, pieces=None, long_range: bool = False, tissue=None,
                  h: float | None = None):
    """u on the tissue nodes with A u = 0 at the free nodes and u = ``values`` at the ``fixed`` ones (bool, per
    row of A): the free block solved with PETSc's CG (the Dirichlet nodes eliminated, so it is SPD) and ICC(0),
    or, for a ``long_range`` problem (one whose solution varies along the whole anatomy: ψ, lv_rv) of more than
    GAMG_ROWS free nodes, algebraic multigrid (GAMG_OPTIONS). ``values`` may be a list of such vectors (one
    problem each, the same fixed nodes): a list of solutions, the block and its preconditioner made once.
    ``pieces``: the tissue's connected components (count, piece of each node), where the caller has them already.
    With ``tissue`` (a :class:`Tissue`) and ``h`` instead of A (None), the free block is assembled from them
    straight into PETSc's matrix (:func:`_free_block_into`): the same matrix and right-hand sides, bit for bit."""
    many = isinstance(values, (list, tuple))
    free = ~fixed
    us = [np.where(fixed, v, 0.0) for v in (values if many else [values])]
    if not free.any():
        return us if many else us[0]
    n_pieces, piece = pieces if pieces is not None else components(A)
    touched = np.zeros(n_pieces, dtype=bool)
    touched[piece[fixed]] = True
    if not touched.all():
        sizes = np.bincount(piece, minlength=n_pieces)[~touched]
        raise UserError(f"{what}: {len(sizes)} piece(s) of tissue ({int(sizes.sum())} nodes) touch none of the "
                        f"surfaces it is fixed on; label their surfaces or leave such pieces out of the anatomy")
    from petsc4py import PETSc
    if A is None:
        M, rhs_values = _free_block_into(tissue, h, free, us)
    else:
        Aff = _free_block(A, free)
        M = PETSc.Mat().createAIJ(size=Aff.shape, csr=(Aff.indptr.astype(PETSc.IntType, copy=False),
                                                       Aff.indices.astype(PETSc.IntType, copy=False), Aff.data),
                                  comm=PETSc.COMM_SELF)
        M.assemble()
        del Aff                     # PETSc holds its own copy
        rhs_values = [-(A @ u)[free] for u in us]     # A[free][:, fixed] @ u[fixed]: u is 0 at the free nodes
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setType("cg")
    P = None
    if long_range and M.getSize()[0] > GAMG_ROWS:
        if tissue is not None:
            P = _face_laplacian(tissue, h, free, M.getDiagonal().getArray())
        ksp.setOperators(M, M if P is None else P)
        _gamg(ksp)
    else:
        ksp.setOperators(M)
        ksp.getPC().setType("icc")
    ksp.setTolerances(rtol=RTOL, atol=0.0, max_it=2000)
    x, rhs = M.createVecs()
    for u, b in zip(us, rhs_values):
        rhs.getArray()[:] = b
        ksp.solve(rhs, x)
        if ksp.getConvergedReason() <= 0:
            raise SimulationError(f"{what}: the Laplace solve did not converge ({ksp.getIterationNumber()} CG "
                                  f"iterations, reason {ksp.getConvergedReason()})")
        u[free] = x.getArray()
    for o in (ksp, M, P, x, rhs):
        if o is not None:
            o.destroy()
    return us if many else us[0]


def _face_laplacian(t: Tissue, h: float, free: np.ndarray, diagonal: np.ndarray):
    """GAMG's preconditioning matrix for a free block: the 7-point Laplacian of the free nodes (−h to each tissue
    neighbour along an axis, the diagonal h per such neighbour, free or fixed, plus 1e-3 of the Q1 block's own
    ``diagonal``, so that it is SPD whatever the staircase). Spectrally equivalent to the Q1 block, a third of
    its entries, and its multigrid hierarchy a quarter of the memory of the Q1 block's (idealised BiV at 0.25 mm,
    ψ: 0.13 GB against 0.52; CG 24 iterations against 14, the same solution to 2e-10); CG still solves the Q1
    block to RTOL. (A neighbour across the box's x or y edge, with --margin 0, is a row's wrap-around: symmetric,
    so harmless in a preconditioner.)"""
    from petsc4py import PETSc
    rows = np.flatnonzero(free)
    nf = len(rows)
    rank = np.full(t.n, -1, dtype=PETSc.IntType)
    rank[rows] = np.arange(nf, dtype=PETSc.IntType)
    s0, s1, s2 = t.strides
    cols = np.full((nf, 7), -1, dtype=PETSc.IntType)
    vals = np.zeros((nf, 7))
    degree = np.zeros(nf)
    at = t.idx[rows]
    for k, shift in enumerate((-s0, -s1, -s2, 0, s2, s1, s0)):       # increasing: each row's columns sorted
        if shift == 0:
            cols[:, k] = np.arange(nf, dtype=PETSc.IntType)
            continue
        j = at + shift
        inside = (j >= 0) & (j < len(t.number))
        nb = np.full(nf, -1, dtype=t.number.dtype)
        nb[inside] = t.number[j[inside]]
        tissue = nb >= 0
        degree += tissue
        linked = np.zeros(nf, dtype=bool)
        linked[tissue] = free[nb[tissue]]
        cols[linked, k] = rank[nb[linked]]
        vals[linked, k] = -h
    vals[:, 3] = degree * h + 1e-3 * diagonal
    keep = cols >= 0
    indptr = np.zeros(nf + 1, dtype=PETSc.IntType)
    np.cumsum(keep.sum(axis=1), out=indptr[1:])
    P = PETSc.Mat().createAIJ(size=(nf, nf), csr=(indptr, cols[keep], vals[keep]), comm=PETSc.COMM_SELF)
    P.assemble()
    return P


# CG + ICC(0) takes iterations in proportion to the nodes along the problem, so a solve costs as (nodes)^(4/3), CG +
# algebraic multigrid about 10-15 whatever the grid, after a set-up of about 7 µs per node (idealised BiV at
# 0.25 mm, 463,698 tissue nodes, CPU time: ψ 206 iterations, 6.1 s with ICC(0); 14 iterations, 3.2 + 1.3 s with
# GAMG; the walls' depths 37 iterations, 1.0 s with ICC(0), 3.5 s with GAMG). So GAMG for ψ and lv_rv above a
# million free nodes, ICC(0) for everything else (and the walls' depths, which cross a wall only, always). GAMG
# preconditions with the 7-point Laplacian (_face_laplacian): built on the Q1 block its set-up peaked at five times
# the block's memory.
GAMG_ROWS = 1_000_000
GAMG_OPTIONS = {"pc_gamg_threshold": 0.0, "mg_levels_ksp_type": "chebyshev", "mg_levels_pc_type": "jacobi"}
GAMG_PREFIX = "cardiosim_laplace_"


def _gamg(ksp) -> None:
    """CG's preconditioner GAMG with GAMG_OPTIONS (through the options database, under a prefix of its own)."""
    from petsc4py import PETSc
    opts = PETSc.Options()
    for k, v in GAMG_OPTIONS.items():
        opts[GAMG_PREFIX + k] = v
    ksp.setOptionsPrefix(GAMG_PREFIX)
    ksp.getPC().setType("gamg")
    ksp.setFromOptions()
    for k in GAMG_OPTIONS:
        opts.delValue(GAMG_PREFIX + k)


def element_pieces(elements: np.ndarray, t: Tissue) -> tuple[int, np.ndarray]:
    """(count, piece of each tissue node) of the tissue's graph (the Laplacian's): within an element its entries
    join every corner to every other, directly or through a third, so its connected pieces are those of the
    elements that share a corner (26-neighbours); found on the element image, without the Laplacian."""
    from scipy import ndimage
    labelled, count = ndimage.label(elements, structure=np.ones((3, 3, 3), dtype=bool))
    padded = np.zeros(t.shape, dtype=labelled.dtype)
    padded[:-1, :-1, :-1] = labelled
    del labelled
    of_element = padded.reshape(-1)[t.elements] - 1
    del padded
    piece = np.empty(t.n, dtype=of_element.dtype)
    for c in range(8):
        on = t.node_element[c] >= 0
        piece[on] = of_element[t.node_element[c, on]]
    return count, piece


def components(A):
    """(count, component of each node) of the tissue's graph. A is symmetric, so its strong components are its
    connected ones, found without the transpose that scipy's undirected search makes."""
    from scipy.sparse.csgraph import connected_components
    return connected_components(A, directed=True, connection="strong")


# -- gradients and frames ---------------------------------------------------------------------------------------------
def gradient(values: np.ndarray, t: Tissue, h: float) -> np.ndarray:
    """∇ of a field given at the tissue nodes (in the order of ``t.idx``), (n, 3) in x, y, z: the mean over a
    node's tissue elements of the Q1 gradient at each element's centre (the mean of its four edge differences
    along each axis). Only tissue values enter, so a node on the staircase surface gets a gradient as good as
    inside (one-sided differences along the grid's axes were off by tens of degrees there)."""
    grad = np.zeros((len(t.elements), 3))
    for c, off in enumerate(CORNERS):
        v = values[t.corner[c]]
        for axis in range(3):                                         # array axis z, y, x -> component x, y, z
            grad[:, 2 - axis] += (1 if off[axis] else -1) * v
    grad *= 1.0 / (4 * h)
    total = np.zeros((t.n, 3))
    count = np.zeros(t.n)
    for c in range(8):
        on = np.flatnonzero(t.node_element[c] >= 0)
        total[on] += grad[t.node_element[c, on]]
        count[on] += 1.0
    return total / np.maximum(count, 1)[:, None]


def _unit(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return np.where(n > 1e-12, v / np.maximum(n, 1e-300), fallback)


def _perpendicular(v: np.ndarray) -> np.ndarray:
    """A unit vector perpendicular to each (unit) row of v."""
    axis = np.eye(3)[np.argmin(np.abs(v), axis=1)]
    p = axis - np.sum(axis * v, axis=1, keepdims=True) * v
    return p / np.linalg.norm(p, axis=1, keepdims=True)


def oriented(longitudinal: np.ndarray, transmural: np.ndarray, helix: np.ndarray, sheet: np.ndarray):
    """(fibre, sheet, normal), each (n, 3), of the frame of a transmural and a longitudinal direction (Bayer's
    axis(): e2 the transmural, e1 the longitudinal made perpendicular to it, e0 = e1 × e2) turned by the helix
    angle about e2 and the sheet angle about the fibre (radians)."""
    e2 = _unit(transmural, np.array([0.0, 0.0, 1.0]))
    e1 = longitudinal - np.sum(longitudinal * e2, axis=1, keepdims=True) * e2
    e1 = _unit(e1, _perpendicular(e2))
    e0 = np.cross(e1, e2)
    ca, sa = np.cos(helix)[:, None], np.sin(helix)[:, None]
    f = ca * e0 + sa * e1
    t = -sa * e0 + ca * e1                     # in the wall, perpendicular to the fibre
    cb, sb = np.cos(sheet)[:, None], np.sin(sheet)[:, None]
    s = cb * e2 + sb * t
    return f, s, np.cross(f, s)


def _mix(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Directions (f and −f alike) a and b mixed with weight w on b."""
    sign = np.where(np.sum(a * b, axis=1) < 0, -1.0, 1.0)[:, None]
    return (1 - w)[:, None] * a + w[:, None] * sign * b


# -- the whole computation --------------------------------------------------------------------------------------------
def long_axis(points: np.ndarray, surfaces: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(apex point, unit axis apex → base, its length) from the surfaces: the base plane fitted to the base
    nodes (its normal: their covariance's smallest eigenvector), the apex the epicardial node farthest from it."""
    base = points[(surfaces & SURFACES["base"]) > 0]
    epi = points[(surfaces & SURFACES["epi"]) > 0]
    centre = base.mean(axis=0)
    _, vecs = np.linalg.eigh(np.cov((base - centre).T))
    normal = vecs[:, 0]
    depth = (epi - centre) @ normal
    if np.median(depth) > 0:                   # the normal points out of the base, away from the heart
        normal, depth = -normal, -depth
    apex = epi[np.argmin(depth)]
    length = float((centre - apex) @ normal)
    return apex, normal, length


# Peak bytes per tissue node (about one per tissue element) while the rule runs, over the labels and surfaces:
# PETSc's matrix (21 entries a row, 12 bytes each) and its ICC(0) factor or GAMG hierarchy (on the 7-point
# Laplacian), the tables of Tissue, the coordinates, gradients and frames. Measured (maximum resident set less 0.15
# GB and the grid's GRID_BYTES): 810 (idealised BiV at 0.125 mm, 3.70 million tissue nodes) and 720 (human BiV at
# 0.5 mm, 1.50 million) with GAMG, 520 with ICC(0) alone (idealised BiV at 0.25 mm).
TISSUE_BYTES = 900
# Tissue nodes per chunk of the frames' arithmetic (row by row, so chunks give the same numbers): its temporaries
# (a dozen (n, 3) arrays) are a chunk's, not the tissue's.
FRAME_CHUNK = 1 << 18


class Scattered:
    """A field of the geometry file given at the tissue nodes (``values``, in the order of the flat indices
    ``idx``), ``outside`` elsewhere: cardiosim.domain.anatomy.write writes it a slab of z-planes at a time, so
    that the whole box's float array is never made; :meth:`dense` makes it."""

    def __init__(self, values: np.ndarray, idx: np.ndarray, grid: tuple, outside: float):
        self.values, self.idx, self.outside = values, idx, outside
        self.shape = tuple(grid) + values.shape[1:]
        self.dtype = np.dtype(float)

    def slab(self, k0: int, k1: int) -> np.ndarray:
        """z-planes k0 to k1 (exclusive)."""
        plane = self.shape[1] * self.shape[2]
        a, b = np.searchsorted(self.idx, (k0 * plane, k1 * plane))
        out = np.full((k1 - k0,) + self.shape[1:], self.outside, dtype=float)
        out.reshape((-1,) + self.values.shape[1:])[self.idx[a:b] - k0 * plane] = self.values[a:b]
        return out

    def dense(self) -> np.ndarray:
        return self.slab(0, self.shape[0])


def _frames(grad_psi, gu, u, gv, v, helix, sheet) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fibres, sheets, normals) at the tissue nodes, FRAME_CHUNK nodes at a time: the LV wall's rule (``gu``,
    ``u``), mixed with the RV wall's (``gv``, ``v``; None for the LV alone) by |∇v|²/(|∇u|² + |∇v|²)."""
    rad = np.deg2rad
    out = tuple(np.empty_like(grad_psi) for _ in range(3))
    for i in range(0, len(u), FRAME_CHUNK):
        c = slice(i, i + FRAME_CHUNK)
        f, s, _ = oriented(grad_psi[c], gu[c], rad(helix[0] + u[c] * (helix[1] - helix[0])),
                           rad(sheet[0] + u[c] * (sheet[1] - sheet[0])))
        if gv is not None:
            gu2 = np.sum(gu[c] ** 2, axis=1)
            gv2 = np.sum(gv[c] ** 2, axis=1)
            w = np.where(gu2 + gv2 > 0, gv2 / np.maximum(gu2 + gv2, 1e-300), 0.5)
            f_rv, s_rv, _ = oriented(grad_psi[c], gv[c], rad(helix[0] + v[c] * (helix[1] - helix[0])),
                                     rad(sheet[0] + v[c] * (sheet[1] - sheet[0])))
            f = _unit(_mix(f, f_rv, w), f)
            s = _mix(s, s_rv, w)
            s = _unit(s - np.sum(s * f, axis=1, keepdims=True) * f, _perpendicular(f))
        out[0][c], out[1][c], out[2][c] = f, s, np.cross(f, s)
    return out


def compute(labels: np.ndarray, surfaces: np.ndarray, h: float, origin, helix=HELIX, sheet=SHEET,
            log=print, dense: bool = True) -> dict:
    """The coordinates and the fibres, sheets and normals on the grid (natural order, (nz, ny, nx[, 3]); NaN / 0
    outside the tissue). ``helix``, ``sheet``: (endo, epi) in degrees. ``dense=False``: each as a
    :class:`Scattered` (the tissue nodes' values), for a writer that streams them."""
    import time
    elements, nodes = tissue_nodes(labels)
    if not elements.any():
        raise UserError(f"spacing {h:g} cm: no grid element lies wholly in the tissue (its walls are too thin for "
                        f"that spacing), so there is nothing to make fibres on; choose a finer --spacing")
    check_fits(TISSUE_BYTES * float(elements.sum()), f"--spacing {h:g}: the rule-based fibres on about "
               f"{elements.sum():.4g} tissue elements", "choose a coarser spacing or a host with more memory")
    t = Tissue(elements, nodes)
    pieces = element_pieces(elements, t)
    del elements, nodes
    surf = surfaces.reshape(-1)[t.idx].astype(np.int64)
    present = {k for k, bit in SURFACES.items() if np.any(surf & bit)}
    need = {"base", "lv_endo", "epi"}
    if not need <= present:
        raise UserError(f"surfaces: the anatomy's tissue nodes have no {', '.join(sorted(need - present))} surface "
                        f"(found: {', '.join(sorted(present)) or 'none'}); rule-based fibres need base, lv_endo "
                        f"and epi (and rv_endo for both ventricles)")
    biv = "rv_endo" in present
    is_ = {k: (surf & bit) > 0 for k, bit in SURFACES.items()}
    start = time.perf_counter()
    zz, yy, xx = np.unravel_index(t.idx, t.shape)
    points = np.asarray(origin, dtype=float) + h * np.stack([xx, yy, zz], axis=1)
    del zz, yy, xx
    apex, axis, length = long_axis(points, surf)

    def dirichlet(one, zero):
        values = np.zeros(len(surf))
        for k in one:
            values[is_[k]] = 1.0
        for k in zero:      # a node on both (a wall one or two nodes thick): the endocardium, 0, wins
            values[is_[k]] = 0.0
        return values

    def solve(one, zero, what, long_range=False):
        fixed = np.zeros(len(surf), dtype=bool)
        for k in one + zero:
            fixed |= is_[k]
        return solve_laplace(None, fixed, dirichlet(one, zero), what, pieces, long_range, t, h)

    if biv:     # the two walls' depths: the same fixed nodes (both endocardia and the epicardium), one factor
        u, v = solve_laplace(None, is_["epi"] | is_["rv_endo"] | is_["lv_endo"],
                             [dirichlet(["epi", "rv_endo"], ["lv_endo"]), dirichlet(["epi", "lv_endo"], ["rv_endo"])],
                             "the walls' depths", pieces, False, t, h)
    else:
        u, v = solve(["epi"], ["lv_endo"], "the LV wall's depth"), None
    # ψ: 0 at the apex node, 1 at the base (Bayer), for the longitudinal direction only
    apex_node = np.zeros(len(surf), dtype=bool)
    apex_node[np.argmin(np.sum((points - apex) ** 2, axis=1))] = True
    fixed = is_["base"] | apex_node
    psi = solve_laplace(None, fixed, np.where(is_["base"], 1.0, 0.0), "apex-to-base Laplace solution", pieces,
                        True, t, h)
    # where ∇ψ vanishes (at the apex node), the long axis
    grad_psi = _unit(gradient(psi, t, h), axis)
    del psi
    out = {"transmural": u, "apex_base": np.clip((points - apex) @ axis / length, 0.0, 1.0)}
    del points
    gu, gv = gradient(u, t, h), None
    if biv:
        gv = gradient(v, t, h)
        out["lv_rv"] = solve(["rv_endo"], ["lv_endo"], "LV-RV coordinate", long_range=True)
    t.number = None                            # the box's table: only the Laplace problems read it
    f, s, n = _frames(grad_psi, gu, u, gv, v, helix, sheet)
    del grad_psi, gu, gv
    if biv:
        out["transmural"] = np.minimum(u, v)
    log(f"rule-based fibres: {len(surf)} tissue nodes, {'both ventricles' if biv else 'one ventricle'}, "
        f"helix {helix[0]:g}° → {helix[1]:g}°, sheet {sheet[0]:g}° → {sheet[1]:g}°, "
        f"{time.perf_counter() - start:.1f} s")
    # the solves' values lie within RTOL of [0, 1]; the file's are in it
    fields = {k: Scattered(np.clip(c, 0.0, 1.0), t.idx, t.shape, np.nan) for k, c in out.items()}
    for name, vec in (("fibres", f), ("sheets", s), ("normals", n)):
        fields[name] = Scattered(vec, t.idx, t.shape, 0.0)
    return {k: v.dense() for k, v in fields.items()} if dense else fields


# -- the command -------------------------------------------------------------------------------------------------------
ANGLE_OPTIONS = {"helix_endo": HELIX[0], "helix_epi": HELIX[1], "sheet_endo": SHEET[0], "sheet_epi": SHEET[1]}


def angles(args: argparse.Namespace) -> tuple[tuple, tuple]:
    """(helix, sheet) from the command line's options (None: the default), each (endo, epi) degrees."""
    got = {}
    for name, default in ANGLE_OPTIONS.items():
        v = getattr(args, name, None)
        v = default if v is None else v
        if not (math.isfinite(v) and -90.0 <= v <= 90.0):
            raise UserError(f"--{name.replace('_', '-')}: must be an angle in degrees in [-90, 90]; got {v}")
        got[name] = v
    return (got["helix_endo"], got["helix_epi"]), (got["sheet_endo"], got["sheet_epi"])

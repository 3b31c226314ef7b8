"""Discrete diffusion operators on the DMDA grid.

The weak form of −∇·(σ∇u) on bilinear/trilinear (Q1) elements gives a symmetric stiffness matrix K with
    ∫ σ∇u·∇v  ≈  vᵀ K u,
and the lumped mass M (a diagonal: each node's share of the tissue volume, cm^d) turns it into the nodal equation
    M du/dt = −K u   for   du/dt = ∇·(σ∇u),   with zero-flux boundaries built in.
Both are second-order accurate in L2 (checked against manufactured solutions in tests/test_convergence.py).

Two stencils:
  box   the full Q1 element matrix, cross terms of rotated fibres included (9 points in 2D, 27 in 3D);
  star  the same with the mass matrix lumped across each direction, which for diagonal tensors is the classic
        finite-volume 3/5/7-point stencil with face conductivities averaged from the nodes. It cannot represent
        cross terms, so it is only allowed when every fibre is axis-aligned.

Element conductivity is the mean of its corner nodes' tensors (a node with zero conductivity, scar, still lets
current pass along its edges with a healthy neighbour at half strength; make scar regions at least one
element wide).

The rows are computed once, from the elements around each owned node (:meth:`Assembler.values`), and become either
stencil matrices for cardiosim's stencil solvers (cardiosim.solvers.stencil_matrix: the resident placement's
defaults) or PETSc matrices assembled as CSR (``setPreallocationCSR``, any matrix type, aijcusparse included;
:func:`cardiosim.solvers.linear.sync_host` works around a PETSc defect there); only right-hand sides change per step.
"""

from __future__ import annotations

import itertools
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
from petsc4py import PETSc

from cardiosim.runtime.threads import setup_threads
from cardiosim.solvers import galerkin
from cardiosim.solvers.linear import sync_host


def _unit_element_matrices(h, lumped: bool) -> np.ndarray:
    """E[p, q, a, b] = ∫_e ∂_p φ_a ∂_q φ_b over one element of size h (per dim), local nodes a = ix + 2 iy + 4 iz.

    With ``lumped``, the 1D mass factors are lumped and cross terms (p != q) are dropped: the star stencil.
    """
    dim = len(h)
    nb = 2 ** dim
    E = np.zeros((dim, dim, nb, nb))
    factors = {}
    corners = list(itertools.product((0, 1), repeat=dim))                 # tuples in (iz, iy, ix) order...
    corners = [tuple(reversed(c)) for c in corners]                       # ...made (ix, iy, iz), a = ix + 2 iy + ...
    for d in range(dim):
        hd = h[d]
        S = np.array([[1.0, -1.0], [-1.0, 1.0]]) / hd                    # ∫ φ_i' φ_j'
        Mc = hd / 6.0 * np.array([[2.0, 1.0], [1.0, 2.0]])               # ∫ φ_i φ_j
        Ml = hd / 2.0 * np.eye(2)
        D = np.array([[-0.5, -0.5], [0.5, 0.5]])                          # D[i, j] = ∫ φ_i' φ_j
        factors[d] = (S, Ml if lumped else Mc, D)
    for p in range(dim):
        for q in range(dim):
            if lumped and p != q:
                continue
            for ca in corners:
                a = sum(c << k for k, c in enumerate(ca))
                for cb in corners:
                    b = sum(c << k for k, c in enumerate(cb))
                    val = 1.0
                    for d in range(dim):
                        S, M, D = factors[d]
                        i, j = ca[d], cb[d]
                        if d == p == q:
                            val *= S[i, j]
                        elif d == p:
                            val *= D[i, j]
                        elif d == q:
                            val *= D[j, i]
                        else:
                            val *= M[i, j]
                    E[p, q, a, b] = val
    return E


@dataclass
class NodeConductivity:
    """One domain's conductivity at the ghosted nodes: σ = scale (σ_t I + (σ_l − σ_t) f fᵀ) (mS/cm), σ_l and σ_t
    scalars or per-node arrays, f the unit fibres (n, dim), scale per node (dimensionless); ``tissue`` (bool per
    node, or None: all tissue) leaves out the elements with a corner outside the tissue."""
    sl: np.ndarray | float
    st: np.ndarray | float
    scale: np.ndarray | float
    fibres: np.ndarray
    tissue: np.ndarray | None = None


class Assembler:
    """Element connectivity around this rank's nodes, computed once and reused for every matrix.

    A rank assembles the rows of the nodes it owns, each from every element that touches it: the elements whose
    lowest corner lies in the owned range or one node below it. Their corners are inside the ghosted range
    (stencil width 1), so no entries travel between ranks; the elements along a rank boundary are computed by both
    ranks. A row couples a node to its 3^d in-grid neighbours, zeros included (masked grids keep the pattern, with
    zeros where elements were left out); on the GPU the star stencil stores only its 2d + 1 (``compact``).

    Why rows and not PETSc's COO assembly of element matrices: COO holds 4^d
    entries per element with two indices each, which PETSc sorts — at 10^7 nodes in 3D, 640 M entries per matrix,
    and 62 GB of host memory at the peak of a 285 s set-up (docs/decisions/0002-assembly-own-rows-as-csr.md). The
    rows here are summed element by
    element (:meth:`values`, in C) and handed to PETSc as CSR.
    """

    def __init__(self, grid, stencil: str, compact: bool | None = None):
        """``compact``: store only the stencil's own entries (2d + 1 per row for the star stencil) rather than the
        box pattern with zeros; default: on the GPU (grid.gpu), where the bytes of every product count and the
        default solvers (Jacobi, multigrid) gain nothing from the zeros. On the host the zeros stay: block
        Jacobi's ILU(0) fills them (Table 4.1 sheet at 313²: 17 CG iterations with them, 24 without)."""
        self.grid = grid
        self.stencil = stencil
        self.threads = setup_threads(grid.da.getComm().tompi4py())
        dim = grid.dim
        n = [int(v) for v in grid.n]
        owned = [(int(a), int(b)) for a, b in grid.owned]
        # elements (by lowest corner) touching an owned node
        self.element_ranges = [(max(a - 1, 0), min(b, nd - 1)) for (a, b), nd in zip(owned, n)]
        self.owned = owned
        self.owned_shape = tuple(b - a for a, b in reversed(owned))

        self.E = _unit_element_matrices(grid.h, lumped=(stencil == "star"))
        compact = stencil == "star" and (grid.gpu if compact is None else compact)
        # the neighbours some row couples to: all 3^d (code k = Σ_d (o_d + 1) 3^d), or the compact star's 2d + 1;
        # of those, the ones some owned node has inside the grid (a grid one node thick has not all)
        offsets = [tuple(reversed(oz)) for oz in itertools.product((-1, 0, 1), repeat=dim)]      # x first
        codes = [k for k, off in enumerate(offsets) if (not compact or sum(o != 0 for o in off) <= 1)
                 and all(max(a + o, 0) < min(b + o, nd) for (a, b), o, nd in zip(owned, off, n))]
        self.codes = np.array(codes, dtype=np.int32)                     # the neighbour codes any row has
        self._pattern = None        # the CSR pattern, made by the first matrix (csr_pattern)

    def csr_pattern(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(indptr, indices, take) of the owned rows, made at the first call (collective: a matrix's assembly) and
        kept: each owned row's in-grid neighbours, their global columns (sorted per row, as PETSc wants), and each
        entry's place in the (3^d, n_owned) rows of :meth:`values`, so that :meth:`matrix` gathers a whole matrix's
        CSR values in one pass (kernels/stencil_setup.c: sst_connectivity; int32 where it fits, 4 bytes per entry).
        Not made where nothing is assembled (cardiosim.solvers.stencil_matrix): at 10^7 nodes of 27 it is 2 GB."""
        if self._pattern is None:
            grid, dim = self.grid, self.grid.dim
            n = [int(v) for v in grid.n]
            ghosted = [(int(a), int(b)) for a, b in grid.ghosted]
            gshape = [b - a for a, b in ghosted]
            g2g = np.ascontiguousarray(grid.da.getLGMap().apply(np.arange(int(np.prod(gshape)),
                                                                          dtype=PETSc.IntType)),
                                       dtype=PETSc.IntType)                              # ghosted → global
            n_owned, ncodes = int(np.prod(self.owned_shape)), len(self.codes)
            take_t = np.int32 if (3 ** dim) * n_owned <= np.iinfo(np.int32).max else np.int64
            idx64 = np.dtype(PETSc.IntType).itemsize == 8
            indptr = np.empty(n_owned + 1, dtype=PETSc.IntType)
            indices = np.empty(n_owned * ncodes, dtype=PETSc.IntType)
            take = np.empty(n_owned * ncodes, dtype=take_t)
            (ostart, osize), (gstart, gsize) = _box(self.owned), _box(ghosted)
            grid_size = np.array(n + [1] * (3 - dim), dtype=np.int64)
            nnz = galerkin.library().sst_connectivity(
                dim, grid_size.ctypes.data, ostart.ctypes.data, osize.ctypes.data, gstart.ctypes.data,
                gsize.ctypes.data, ncodes, self.codes.ctypes.data, g2g.ctypes.data, int(idx64), indptr.ctypes.data,
                indices.ctypes.data, take.ctypes.data, int(take_t == np.int64))
            self._pattern = indptr, indices[:nnz], take[:nnz]
        return self._pattern

    def values(self, sigma: "NodeConductivity", add_to: np.ndarray | None = None) -> np.ndarray:
        """The rows of K = Σ_e Σ_pq σ_e[p,q] E[p,q] for the conductivity given at the ghosted nodes, σ_e the mean of
        element e's corner tensors (zero where a corner is outside the tissue): (3^d, n_owned), entry [k, i] the
        coupling of owned node i to its neighbour k = Σ_d (o_d + 1) 3^d (zero where that is outside the grid).
        ``add_to``: an earlier call's rows, which this call adds its own to and returns (K_i + K_e without a third
        array of 3^d rows). Computed element by element in kernels/stencil_setup.c, with only the terms the element
        matrices have (the star stencil: 48 of 576 per element)."""
        dim = self.grid.dim
        (es, en), (gs, gn), (os_, on) = _box(self.element_ranges), _box(self.grid.ghosted), _box(self.owned)
        fib = np.ascontiguousarray(sigma.fibres, dtype=float)
        scale = np.ascontiguousarray(np.broadcast_to(np.asarray(sigma.scale, dtype=float), (len(fib),)))
        sl, st = (np.ascontiguousarray(np.atleast_1d(np.asarray(v, dtype=float))) for v in (sigma.sl, sigma.st))
        tissue = None if sigma.tissue is None else np.ascontiguousarray(sigma.tissue, dtype=np.uint8)
        E = np.ascontiguousarray(self.E)
        S = np.zeros((3 ** dim, int(np.prod(on)))) if add_to is None else add_to      # the C code adds to S
        if S.shape != (3 ** dim, int(np.prod(on))) or S.dtype != float or not S.flags["C_CONTIGUOUS"]:
            raise ValueError("Assembler.values: add_to is not a C-contiguous (3^d, owned nodes) float array")

        def slab(z0: int, z1: int) -> int:
            """The rows of the owned nodes with z in [z0, z1), from the elements touching them."""
            ez0, ez1 = max(int(es[2]), z0 - 1), min(int(es[2] + en[2]), z1)
            start, size = es.copy(), en.copy()
            start[2], size[2] = ez0, max(ez1 - ez0, 0)
            return galerkin.library().sst_stiffness(
                dim, start.ctypes.data, size.ctypes.data, gs.ctypes.data, gn.ctypes.data, os_.ctypes.data,
                on.ctypes.data, z0, z1, fib.ctypes.data, scale.ctypes.data, sl.ctypes.data, int(sl.size > 1),
                st.ctypes.data, int(st.size > 1), None if tissue is None else tissue.ctypes.data, E.ctypes.data,
                S.ctypes.data)

        if any(self._run_slabs(slab, int(os_[2]), int(os_[2] + on[2]))):
            raise MemoryError("Assembler.values: out of host memory")
        return S

    def _run_slabs(self, slab, z0: int, z1: int) -> list:
        """``slab(a, b)`` over the owned z range [z0, z1) cut into slabs, run at once on the set-up's threads (the C
        call releases the GIL; each slab writes its own rows, the same bits as one call: kernels/stencil_setup.c)."""
        n = min(self.threads, z1 - z0) if self.grid.dim == 3 else 1
        if n <= 1:
            return [slab(z0, z1)]
        cuts = [z0 + (z1 - z0) * k // n for k in range(n + 1)]
        with ThreadPoolExecutor(max_workers=n) as pool:
            return list(pool.map(slab, cuts[:-1], cuts[1:]))

    def as_stencil(self, values: np.ndarray, scale: float = 1.0, diagonal: np.ndarray | None = None):
        """The rows of scale·K + diag(``diagonal``) (K's rows ``values``, from :meth:`values`) as the multigrid's
        stencil (cardiosim.solvers.galerkin.Stencil: the 27 codes of 3D, a 2D grid's 9 being its middle z layer and
        a 1D grid's 3 that layer's middle row),
        with the codes that have a non-zero entry here: what the solvers would otherwise read back from the
        assembled matrix (galerkin.attach). The same arithmetic as PETSc's scale and diagonal add, so equal to it."""
        dim, n = self.grid.dim, values.shape[1]
        centre = (3 ** dim) // 2
        # a 1D or 2D code's place among the 27: its neighbours lie in the middle z layer (+9), a 1D grid's in the
        # middle y row of it too (+3)
        shift = {1: 12, 2: 9, 3: 0}[dim]
        if dim == 3 and scale == 1.0 and diagonal is None:
            S = values
        elif dim == 3:                  # one pass: the rows of codes not in self.codes are zero in values too
            S = values * scale
        else:
            S = np.zeros((galerkin.NCODES, n))
            for c in self.codes:
                S[c + shift] = values[c] * scale                        # × 1.0 is exact
        if diagonal is not None:
            S[centre + shift] += diagonal
        codes = [c + shift for c in self.codes if S[c + shift].any()]
        return galerkin.Stencil(S, np.array(codes, dtype=np.int32))

    def diagonal(self, values: np.ndarray) -> np.ndarray:
        """K's diagonal on this rank's nodes (a view of its rows ``values``)."""
        return values[(3 ** self.grid.dim) // 2]

    def check_rows(self, values: np.ndarray, where: str) -> None:
        """Refuse ``values`` that are not rows of this assembler: C-contiguous (3^d, owned nodes), PETSc's scalar
        type (the C code reads them as such)."""
        if values.shape != (3 ** self.grid.dim, int(np.prod(self.owned_shape))) \
                or values.dtype != np.dtype(PETSc.ScalarType) or not values.flags["C_CONTIGUOUS"]:
            raise ValueError(f"{where}: values is not a C-contiguous (3^d, owned nodes) array of PETSc's scalar type")

    def matrix(self, values: np.ndarray) -> PETSc.Mat:
        """The matrix of rows ``values`` (from :meth:`values`, or a sum of them), assembled as CSR."""
        self.check_rows(values, "Assembler.matrix")
        indptr, indices, take = self.csr_pattern()
        vals = np.empty(len(take), dtype=PETSc.ScalarType)
        galerkin.library().sst_gather(len(vals), take.ctypes.data, int(take.dtype == np.int64), values.ctypes.data,
                                      vals.ctypes.data)
        A = self.grid.matrix()
        A.setPreallocationCSR((indptr, indices, vals))
        del vals
        if not A.isAssembled():
            A.assemble()
        A.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, False)
        A.setOption(PETSc.Mat.Option.SYMMETRIC, True)
        A.setOption(PETSc.Mat.Option.SPD, False)
        sync_host(A)
        return A


class RowsOperator:
    """K as its rows (:meth:`Assembler.values`), applied on the host without an assembled matrix: y = K x for several
    x at once, the rows read once for all of them, each row summed in neighbour-code order (the same bits on any
    number of ranks). K is symmetric, so these are the products with Kᵀ too. For products at set-up only (the
    pseudo-ECG's electrode weights, cardiosim.analysis.ecg), where an assembled matrix costs more than the
    products (human BiV at 0.5 mm: 8 M rows of 27)."""

    def __init__(self, assembler: Assembler, values: np.ndarray):
        assembler.check_rows(values, "RowsOperator")
        self.grid, self.values = assembler.grid, values
        self.boxes = _box(self.grid.owned), _box(self.grid.ghosted)
        self.size = np.array([int(v) for v in self.grid.n] + [1] * (3 - self.grid.dim), dtype=np.int64)

    def products(self, xs: list, ys: list) -> None:
        """ys[i] = K xs[i] (collective: the xs' halos are exchanged)."""
        if not xs:
            return
        local = self.grid.da.createLocalVec()
        try:
            xl = np.empty((len(xs), local.getLocalSize()))
            for i, x in enumerate(xs):
                self.grid.da.globalToLocal(x, local)
                xl[i] = local.getArray(readonly=True)
        finally:
            local.destroy()
        out = np.empty((len(xs), self.values.shape[1]))
        (os_, on), (gs, gn) = self.boxes
        galerkin.library().sst_apply(self.grid.dim, self.size.ctypes.data, os_.ctypes.data, on.ctypes.data,
                                     gs.ctypes.data, gn.ctypes.data, len(xs), self.values.ctypes.data,
                                     xl.ctypes.data, out.ctypes.data)
        for y, o in zip(ys, out):
            y.getArray()[:] = o


class MatrixOperator:
    """An assembled symmetric matrix behind :class:`RowsOperator`'s interface."""

    def __init__(self, A: PETSc.Mat):
        self.A = A

    def products(self, xs: list, ys: list) -> None:
        """ys[i] = A xs[i]."""
        for x, y in zip(xs, ys):
            self.A.mult(x, y)


def _box(ranges) -> tuple[np.ndarray, np.ndarray]:
    """Per-dimension (start, stop) ranges, x first, as the C code's 3D box: start[3] and size[3] (int64; a 2D grid
    is one z layer)."""
    pad = 3 - len(ranges)
    start = [int(a) for a, _ in ranges] + [0] * pad
    size = [int(b) - int(a) for a, b in ranges] + [1] * pad
    return np.array(start, dtype=np.int64), np.array(size, dtype=np.int64)


def lumped_mass(grid) -> PETSc.Vec:
    """Each owned node's share of the tissue volume (cm^d): Π_d h_d, halved per boundary direction."""
    w = []
    for d, (a, b) in enumerate(grid.owned):
        i = np.arange(a, b)
        wd = np.full(len(i), grid.h[d])
        wd[(i == 0) | (i == grid.n[d] - 1)] *= 0.5
        w.append(wd)
    mesh = np.meshgrid(*reversed(w), indexing="ij")
    vol = np.ones(mesh[0].shape)
    for m in mesh:
        vol = vol * m
    M = grid.vec()
    M.getArray()[:] = vol.ravel()
    return M

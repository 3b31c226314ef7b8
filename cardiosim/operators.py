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

Matrices are assembled once, row by row from the elements around each owned node, and handed to PETSc as CSR
(``setPreallocationCSR``), which also works for GPU matrix types (aijcusparse: the resident placement;
:func:`sync_host` works around a PETSc defect there); only right-hand sides change per step.
"""

from __future__ import annotations

import itertools
import os

import numpy as np
from petsc4py import PETSc


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


class Assembler:
    """Element connectivity around this rank's nodes, computed once and reused for every matrix.

    A rank assembles the rows of the nodes it owns, each from every element that touches it: the elements whose
    lowest corner lies in the owned range or one node below it. Their corners are inside the ghosted range
    (stencil width 1), so no entries travel between ranks; the elements along a rank boundary are computed by both
    ranks. A row couples a node to its 3^d in-grid neighbours, zeros included (masked grids keep the pattern, with
    zeros where elements were left out); on the GPU the star stencil stores only its 2d + 1 (``compact``).

    Why rows and not PETSc's COO assembly of element matrices (which did this until 2026-11-25): COO holds 4^d
    entries per element with two indices each, which PETSc sorts — at 10^7 nodes in 3D, 640 M entries per matrix,
    and 62 GB of host memory at the peak of a 285 s set-up (docs/benchmarks.md). The rows here are built by
    shifted array additions and handed to PETSc as CSR: at 150³ on one rank 2.8× less peak memory than COO and
    about 1.5× less time.
    """

    def __init__(self, grid, stencil: str, compact: bool | None = None):
        """``compact``: store only the stencil's own entries (2d + 1 per row for the star stencil) rather than the
        box pattern with zeros; default: on the GPU (grid.gpu), where the bytes of every product count and the
        default solvers (Jacobi, multigrid) gain nothing from the zeros. On the host the zeros stay: block
        Jacobi's ILU(0) fills them (Table 4.1 sheet at 313²: 17 CG iterations with them, 24 without)."""
        self.grid = grid
        self.stencil = stencil
        dim = grid.dim
        n = [int(v) for v in grid.n]
        owned = [(int(a), int(b)) for a, b in grid.owned]
        ghosted = [(int(a), int(b)) for a, b in grid.ghosted]
        # elements (by lowest corner) touching an owned node
        self.element_ranges = [(max(a - 1, 0), min(b, nd - 1)) for (a, b), nd in zip(owned, n)]
        self.element_shape = tuple(b - a for a, b in reversed(self.element_ranges))     # z, y, x
        self.owned = owned
        self.owned_shape = tuple(b - a for a, b in reversed(owned))
        nb = 2 ** dim
        gx = [a for a, _ in ghosted]
        gshape = [b - a for a, b in ghosted]                                  # x first

        def ghosted_local(ranges, offset):
            """Ghosted-local indices of the nodes ``ranges`` (x first) shifted by ``offset``, z-y-x raveled."""
            idx = [np.arange(a, b) + o - g for (a, b), o, g in zip(ranges, offset, gx)]
            li = np.zeros(tuple(len(i) for i in reversed(idx)), dtype=np.int64)
            stride = 1
            for d in range(dim):
                shape = [1] * dim
                shape[dim - 1 - d] = len(idx[d])
                li += idx[d].reshape(shape) * stride
                stride *= gshape[d]
            return li.ravel()

        self.offsets = [tuple((a >> d) & 1 for d in range(dim)) for a in range(nb)]   # corner a = ix + 2 iy + 4 iz
        self.corners_local = np.stack([ghosted_local(self.element_ranges, off) for off in self.offsets],
                                      axis=1).astype(np.int32)                      # (n_el, 2^dim)
        self.E = _unit_element_matrices(grid.h, lumped=(stencil == "star"))
        compact = stencil == "star" and (grid.gpu if compact is None else compact)
        # the rows' pattern: neighbour k = Σ_d (o_d + 1) 3^d of each owned node, where it lies in the grid
        g2g = grid.da.getLGMap().apply(np.arange(int(np.prod(gshape)), dtype=np.int32))   # ghosted-local → global
        base = ghosted_local(owned, [0] * dim)
        n_owned, K = len(base), 3 ** dim
        big = np.iinfo(np.int32).max
        cols = np.empty((K, n_owned), dtype=np.int32)                      # neighbour-major: contiguous columns
        valid = np.empty((K, n_owned), dtype=bool)
        for k, oz_first in enumerate(itertools.product((-1, 0, 1), repeat=dim)):
            off = tuple(reversed(oz_first))                                 # x first
            ok = np.ones(self.owned_shape, dtype=bool)
            shift = 0
            for d in range(dim):
                i = np.arange(*owned[d]) + off[d]
                shape = [1] * dim
                shape[dim - 1 - d] = len(i)
                ok &= ((i >= 0) & (i < n[d])).reshape(shape)
                shift += off[d] * int(np.prod(gshape[:d]))
            # the star stencil couples no diagonal neighbours: a compact pattern leaves them out
            valid[k] = ok.ravel() & (not compact or sum(o != 0 for o in off) <= 1)
            li = base + shift
            li[~valid[k]] = 0                                               # a valid index, masked out below
            cols[k] = np.where(valid[k], g2g[li], big)
        # PETSc wants each row's columns sorted: true of the neighbour order on one rank (natural numbering), not
        # across rank boundaries, where PETSc numbers each rank's nodes in turn
        unsorted, last = False, np.full(n_owned, -1, dtype=np.int32)      # last valid column of each row so far
        for k in range(K):
            unsorted = unsorted or bool((valid[k] & (cols[k] < last)).any())
            last = np.where(valid[k], cols[k], last)
        self.csr_order = None
        if unsorted:
            order = np.argsort(cols.T, axis=1, kind="stable")
            self.csr_order = order.astype(np.int8)
            cols = np.take_along_axis(cols.T, order, axis=1).T
            valid = np.take_along_axis(valid.T, order, axis=1).T
            del order
        self.csr_valid = np.ascontiguousarray(valid.T)                     # (n_owned, K): which entries exist
        self.csr_indices = cols.T[self.csr_valid].astype(PETSc.IntType)
        self.csr_indptr = np.concatenate([[0], np.cumsum(self.csr_valid.sum(axis=1))]).astype(PETSc.IntType)

    def element_tensors(self, node_tensors_ghosted: np.ndarray) -> np.ndarray:
        """Mean of the corner nodes' tensors, (n_el, dim, dim), from tensors on the ghosted node range (summed
        corner by corner: a gather of all corners at once would hold 2^d tensors per element)."""
        out = node_tensors_ghosted[self.corners_local[:, 0]]
        for a in range(1, self.corners_local.shape[1]):
            out += node_tensors_ghosted[self.corners_local[:, a]]
        out /= self.corners_local.shape[1]
        return out

    def values(self, elem_sigma: np.ndarray) -> np.ndarray:
        """The rows of K = Σ_e Σ_pq σ_e[p,q] E[p,q] for the element tensors given: (3^d, n_owned), entry [k, i]
        the coupling of owned node i to its neighbour k = Σ_d (o_d + 1) 3^d (zero where that is outside the grid).
        Neighbour-major, so that each of the 4^d additions below writes one contiguous array."""
        dim = self.grid.dim
        nb = 2 ** dim
        S = np.zeros((3 ** dim,) + self.owned_shape)
        sigma_t = np.ascontiguousarray(np.asarray(elem_sigma).reshape(len(elem_sigma), dim * dim).T)
        for a, off_a in enumerate(self.offsets):
            # w[b, e] = Σ_pq σ_e[p,q] E[p,q,a,b]: element e's coupling of its corner a (the row) to corner b
            w = (self.E[:, :, a, :].reshape(dim * dim, nb).T @ sigma_t).reshape((nb,) + self.element_shape)
            # the owned nodes that are corner a of an element, and those elements
            node, elem = [], []
            for d in reversed(range(dim)):
                (oa, ob), (ea, eb) = self.owned[d], self.element_ranges[d]
                lo, hi = max(oa, ea + off_a[d]), min(ob, eb + off_a[d])
                node.append(slice(lo - oa, hi - oa))
                elem.append(slice(lo - off_a[d] - ea, hi - off_a[d] - ea))
            for b, off_b in enumerate(self.offsets):
                k = sum((off_b[d] - off_a[d] + 1) * 3 ** d for d in range(dim))
                S[(k, *node)] += w[(b, *elem)]
        return S.reshape(3 ** dim, -1)

    def matrix(self, values: np.ndarray) -> PETSc.Mat:
        """The matrix of rows ``values`` (from :meth:`values`, or a sum of them), assembled as CSR."""
        rows = values.T                                                      # (n_owned, K), a view
        if self.csr_order is not None:
            rows = np.take_along_axis(rows, self.csr_order.astype(np.intp), axis=1)
        A = self.grid.da.createMat()
        A.setPreallocationCSR((self.csr_indptr, self.csr_indices,
                               rows[self.csr_valid].astype(PETSc.ScalarType, copy=False)))
        if not A.isAssembled():
            A.assemble()
        A.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, False)
        A.setOption(PETSc.Mat.Option.SYMMETRIC, True)
        A.setOption(PETSc.Mat.Option.SPD, False)
        sync_host(A)
        return A


def sync_host(A: PETSc.Mat) -> None:
    """Work around a PETSc 3.26.1 defect (docs/petsc-pcmg-gpu.md): a cuSPARSE matrix assembled by COO (or changed
    on the device) is valid only on the device, and PCMG's Galerkin product then builds a wrong coarse operator
    (an identity two levels down: CG+MG converges like CG+Jacobi). A norm copies the values to the host once, at
    set-up; host matrices are left alone. The stiffness matrices, assembled on the host as CSR, do not need it
    (tests/test_resident_gpu.py runs PCMG with CARDIOSIM_PCMG_GPU_WORKAROUND=0 too); matrices changed on the
    device after assembly (the parabolic matrix's scale and diagonal, the mask's diagonal) meet the defect's
    condition (values valid only on the device) and keep it; that case is not tested without it."""
    if "cusparse" in A.getType().lower() and os.environ.get("CARDIOSIM_PCMG_GPU_WORKAROUND", "1") != "0":
        A.norm()


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

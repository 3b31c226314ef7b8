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

Matrices are assembled once with COO preallocation (``setPreallocationCOO``/``setValuesCOO``), which also works
for GPU matrix types (aijcusparse: the resident placement; :func:`sync_host` works around a PETSc defect there);
only right-hand sides change per step.
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
    """Element connectivity of this rank's elements, computed once and reused for every matrix.

    A rank assembles the elements whose lowest corner it owns; their other corners are at most one node away,
    inside the ghosted range (stencil width 1). Entries for nodes owned elsewhere travel through PETSc's COO
    assembly.
    """

    def __init__(self, grid, stencil: str):
        self.grid = grid
        self.stencil = stencil
        dim = grid.dim
        # Element lower corners: owned nodes that are not on the upper boundary.
        lo_ranges = [(a, min(b, int(n) - 1)) for (a, b), n in zip(grid.owned, grid.n)]
        self.element_ranges = lo_ranges
        idx = [np.arange(a, b) for a, b in lo_ranges]
        mesh = np.meshgrid(*reversed(idx), indexing="ij") if all(len(i) for i in idx) else None
        gx = [a for a, _ in grid.ghosted]
        gshape = [b - a for a, b in grid.ghosted]                          # x first
        if mesh is None:
            self.corners_local = np.zeros((0, 2 ** dim), dtype=np.int32)
        else:
            lower = [m.ravel() for m in reversed(mesh)]                    # x, y, z arrays of element corners
            cols = []
            for a in range(2 ** dim):
                off = [(a >> d) & 1 for d in range(dim)]
                li = np.zeros_like(lower[0])
                stride = 1
                for d in range(dim):
                    li += (lower[d] + off[d] - gx[d]) * stride
                    stride *= gshape[d]
                cols.append(li)
            self.corners_local = np.stack(cols, axis=1).astype(np.int32)  # (n_el, 2^dim) ghosted-local indices
        lgmap = grid.da.getLGMap()
        self.corners = lgmap.apply(self.corners_local.ravel()).reshape(self.corners_local.shape)
        nb = 2 ** dim
        self.rows = np.repeat(self.corners[:, :, None], nb, axis=2).ravel().astype(PETSc.IntType)
        self.cols = np.repeat(self.corners[:, None, :], nb, axis=1).ravel().astype(PETSc.IntType)
        self.E = _unit_element_matrices(grid.h, lumped=(stencil == "star"))

    def element_tensors(self, node_tensors_ghosted: np.ndarray) -> np.ndarray:
        """Mean of the corner nodes' tensors, (n_el, dim, dim), from tensors on the ghosted node range."""
        return node_tensors_ghosted[self.corners_local].mean(axis=1)

    def values(self, elem_sigma: np.ndarray) -> np.ndarray:
        """COO values of K = Σ_e Σ_pq σ_e[p,q] E[p,q] for the element tensors given."""
        return np.einsum("epq,pqab->eab", elem_sigma, self.E, optimize=True).ravel()

    def matrix(self, values: np.ndarray) -> PETSc.Mat:
        A = self.grid.da.createMat()
        A.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, False)
        # PETSc may reorder the index arrays in place (MPIAIJ does), so it gets copies.
        A.setPreallocationCOO(self.rows.copy(), self.cols.copy())
        A.setValuesCOO(values.astype(PETSc.ScalarType), addv=PETSc.InsertMode.INSERT_VALUES)
        A.setOption(PETSc.Mat.Option.SYMMETRIC, True)
        A.setOption(PETSc.Mat.Option.SPD, False)
        sync_host(A)
        return A


def sync_host(A: PETSc.Mat) -> None:
    """Work around a PETSc 3.26.1 defect (docs/petsc-pcmg-gpu.md): a cuSPARSE matrix assembled by COO (or changed
    on the device) is valid only on the device, and PCMG's Galerkin product then builds a wrong coarse operator
    (an identity two levels down: CG+MG converges like CG+Jacobi). A norm copies the values to the host once, at
    set-up; host matrices are left alone. CARDIOSIM_PCMG_GPU_WORKAROUND=0 leaves it out: the GPU test shows the
    defect with it (tests/test_resident_gpu.py), so that it says when a PETSc release no longer needs this."""
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

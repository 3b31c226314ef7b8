"""A grid operator held as its stencil only, as a PETSc matrix (type python): what cardiosim's stencil solvers take
where no PETSc solver needs the assembled matrix.

Why: the stencil solvers (cardiosim.solvers.krylov, cardiosim.solvers.multigrid) read their operator as a stencil
(cardiosim.solvers.galerkin) and never touch PETSc's copy, yet an assembled matrix costs its CSR on the host, its
upload on the GPU and the copies of θK + αM: on the human BiV at 0.5 mm (8 M box nodes of 27 entries) the
parabolic system and the stiffness behind its right-hand side were ≈ 5 GB of host memory and most of the tissue's
set-up (docs/decisions/0066-stencil-matrices-without-assembly.md). The tissue models therefore build one of these
wherever the options pick a stencil solver, and an assembled matrix wherever a PETSc solver runs.

What it offers PETSc: its sizes and vector type (the grid's), its diagonal (for PCJACOBI's set-up) and, for a
caller that asks, products y = A x, computed through a :class:`cardiosim.solvers.multigrid.StencilProduct` built at
the first product (a second copy of the stencil on the device: the tissue models' steps use their own products and
their solvers', never this one). The stencil is held with the matrix (cardiosim.solvers.galerkin.attach) until
:func:`release`; the values never change.
"""

from __future__ import annotations

import numpy as np
from petsc4py import PETSc

from cardiosim.solvers import galerkin
from cardiosim.solvers.multigrid import StencilProduct


class StencilMatrix:
    """MATPYTHON context of :func:`create`."""

    def __init__(self, stencil: galerkin.Stencil, da):
        self.stencil = stencil
        self.da = da
        v = da.createGlobalVec()
        self.vec_type = v.getType()
        v.destroy()
        self.gpu = "cuda" in self.vec_type.lower()
        self.product = None

    def mult(self, A, x, y):
        if self.product is None:
            self.product = StencilProduct(A, self.da)
        self.product.mult(x, y)

    def multTranspose(self, A, x, y):       # symmetric
        self.mult(A, x, y)

    def getDiagonal(self, A, d):
        if self.stencil is None:
            raise ValueError("stencil matrix: its stencil was released (cardiosim.solvers.stencil_matrix.release)")
        d.getArray()[:] = self.stencil.S[galerkin.CENTRE]

    def destroy(self, A):
        if self.product is not None:
            self.product.destroy()
            self.product = None


def create(stencil: galerkin.Stencil, da) -> PETSc.Mat:
    """The operator of ``stencil`` (this rank's rows, on its box of the DMDA ``da``) as a symmetric PETSc matrix of
    the grid's layout and vector type."""
    n_local, n = int(np.prod(da.getCorners()[1])), int(np.prod(da.getSizes()))
    ctx = StencilMatrix(stencil, da)
    A = PETSc.Mat().createPython(((n_local, n), (n_local, n)), ctx, comm=da.getComm())
    A.setVecType(ctx.vec_type)
    A.setUp()
    A.setOption(PETSc.Mat.Option.SYMMETRIC, True)
    galerkin.attach(A, stencil)
    return A


def is_stencil_matrix(A: PETSc.Mat) -> bool:
    return A.getType() == PETSc.Mat.Type.PYTHON and isinstance(A.getPythonContext(), StencilMatrix)


def type_name(A: PETSc.Mat) -> str:
    """A's PETSc matrix type, or "stencil" for a stencil matrix (a report's name for what the solvers read)."""
    return "stencil" if is_stencil_matrix(A) else A.getType()


def use_product(A: PETSc.Mat, product) -> None:
    """Let A's products go through ``product`` (a StencilProduct of A's stencil the caller built and destroys), and
    drop A's hold on the stencil (the caller is about to reuse its rows' memory: the bidomain adds K_e to K_i's
    rows in place)."""
    ctx = A.getPythonContext()
    ctx.product = _Borrowed(product)
    release(A)


def release(A: PETSc.Mat) -> None:
    """Forget A's stencil (its rows' memory may be reused or freed); products already set up keep working."""
    A.getPythonContext().stencil = None
    galerkin.detach(A)


class _Borrowed:
    """A product owned by someone else: used here, destroyed there."""

    def __init__(self, product):
        self.mult = product.mult

    def destroy(self):
        pass

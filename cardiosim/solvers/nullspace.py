"""A singular system's null space, as cardiosim's own Krylov solver takes it.

PETSc keeps a matrix's null space with the matrix (MatSetNullSpace), and KSPSolve makes every right-hand side
consistent with it (for a symmetric matrix the null space is its transpose's too): it projects a fresh copy of b,
VecDuplicate, VecCopy and VecDestroy each solve. On the GPU that costs 0.14 ms a solve (one H200, 831,705 entries;
docs/decisions/0048-a-steps-fixed-costs-on-the-device.md), most of it the allocation; the idealised LV's masked step
is ~4 ms. Where the
Krylov solver is cardiosim's StencilCG (cardiosim.solvers.krylov), the null space is therefore held here instead, as
an attribute of the matrix, and StencilCG projects b on the device into a work vector of its own (one pass, the sums
on the device: kernels/stencil_mg.cpp ``smg_deflate``). Any other Krylov solver gets PETSc's null space
(cardiosim.solvers.linear.LinearSolver chooses). StencilMG reads either.
"""

from __future__ import annotations

from petsc4py import PETSc

ATTR = "cardiosim_nullspace"


def give(A: PETSc.Mat, vecs) -> None:
    """Hold the null space for StencilCG: True, the constants; else a list of orthonormal vectors."""
    A.setAttr(ATTR, vecs)


def of(A: PETSc.Mat):
    """A's null space: None, True (the constants, alone) or a list of orthonormal vectors (with the constants
    first where PETSc's null space has them too), from :func:`give` or else from PETSc's."""
    held = A.getAttr(ATTR)
    if held is not None:
        return held
    ns = A.getNullSpace()
    if not (ns and ns.handle):
        return None
    vecs = list(ns.getVecs())
    if not ns.hasConstant():
        return vecs
    if not vecs:
        return True
    ones = A.createVecs()[0]
    ones.set(1.0)
    ones.normalize()
    return [ones, *vecs]

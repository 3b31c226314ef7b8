"""Coloured IC(0) preconditioning (the seed's Tavares et al. coloured pJDS and Martins et al. GPU PCG), as
a PETSc preconditioner (PC type python):

    z = Pᵀ M⁻¹ P r,    M = L Lᵀ the ICC(0) factor of P A Pᵀ,

P the permutation that orders the grid's nodes by colour. With that ordering no two nodes of one colour couple, so
the triangular solves of L and Lᵀ have as many dependency levels as colours (2 for the star stencil, 2^d for the box
stencil) instead of ~n in natural order: on the GPU each level is one wide parallel step.

Written here: only the colouring (``colouring``: colour = index parity, (i+j+k) % 2 for a star stencil, (i%2, j%2,
k%2) for a box one, read from the matrix's nonzero pattern) and its permutation. Everything else is PETSc's:
  P A Pᵀ         MatPermute (``Mat.permute(is, is)``), on the host copy, converted back to the operator's type
                 (aijcusparse on the GPU);
  ICC(0)         an inner PC of type icc with options prefix ``<prefix>cicc_``, on the GPU with the factor solver
                 type cusparse (PETSc's cuSPARSE ICC(0) and its triangular solves: level-scheduled, so the colour
                 ordering gives them 2–8 levels);
  P r, Pᵀ y      one VecScatter (PetscSF) forward and in reverse: on CUDA vectors it runs on the device, no host
                 copies.
Options under the solver's prefix (e.g. ``-elliptic_``): ``cicc_mat_type`` aij (default) | sell: with sell the
Krylov method's matrix–vector products use PETSc's sliced ELLPACK (``sellcuda`` on the GPU, the maintained successor
of pJDS) — cardiosim.solvers.linear.LinearSolver swaps the KSP's operator for ``krylov_matrix``; PETSc has no ICC for
SELL, so the factor is always taken from the AIJ copy. Any inner PC option, e.g. ``-elliptic_cicc_pc_factor_shift_type
none``.

Singular systems (the elliptic one, constant null space): ICC(0) of a singular M-matrix may meet a zero or negative
last pivot. Default shift: ``positive_definite`` (PETSc's Manteuffel shift: the diagonal is raised until every
pivot is positive), which keeps M SPD so CG stays valid; KSP projects the constant out of each preconditioned
residual. Where cuSPARSE factors (the GPU), PETSc's device ICC(0) ignores shift types for level 0; it computes the
factor as it is, and a zero pivot is an error there (said at set-up).

    -elliptic_pc_type python -elliptic_pc_python_type cardiosim.solvers.coloured_icc.ColouredICC [-elliptic_cicc_mat_type sell]

One MPI rank only (the colouring is of the whole grid).
"""

from __future__ import annotations

import numpy as np
from petsc4py import PETSc

from cardiosim.solvers.linear import sync_host
from cardiosim.solvers.multigrid import grid_dm

PYTHON_TYPE = "cardiosim.solvers.coloured_icc.ColouredICC"
MAT_TYPES = ("aij", "sell")


def _ijk(r: np.ndarray, dims) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    nx, ny = dims[0], dims[1] if len(dims) > 1 else 1
    return r % nx, (r // nx) % ny, r // (nx * ny)


def stored_nonzeros(A: PETSc.Mat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A's CSR without the explicit zeros (the DMDA preallocates the box pattern even for a star stencil; ICC(0)
    takes its pattern from the stored entries, and a zero stored between two nodes of one colour would make the
    triangular solves' levels those of the box pattern). The diagonal is always kept."""
    indptr, cols, vals = A.getValuesCSR()
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    keep = (vals != 0) | (rows == cols)
    counts = np.bincount(rows[keep], minlength=len(indptr) - 1)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(PETSc.IntType)
    return indptr, cols[keep].astype(PETSc.IntType), vals[keep]


def is_box(A: PETSc.Mat, dims) -> bool:
    """True where some row couples diagonal neighbours (offsets in two or more dimensions, nonzero value): a box
    stencil. Refuses couplings beyond one grid step (parity colouring would not separate them)."""
    indptr, cols, _ = stored_nonzeros(A)
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    d = [np.abs(a - b) for a, b in zip(_ijk(cols.astype(np.int64), dims), _ijk(rows, dims))]
    if max(x.max(initial=0) for x in d) > 1:
        raise ValueError("coloured ICC: the matrix couples nodes more than one grid step apart")
    return bool(np.any(sum((x > 0).astype(int) for x in d) > 1))


def colouring(dims, box: bool) -> np.ndarray:
    """Colour of each node (natural order, x fastest): (i+j+k) % 2 for a star stencil, i%2 + 2 (j%2) + 4 (k%2) for
    a box stencil (2^d colours)."""
    i, j, k = _ijk(np.arange(int(np.prod(dims))), dims)
    if box:
        return (i % 2 + 2 * (j % 2) + 4 * (k % 2)).astype(np.int64)
    return ((i + j + k) % 2).astype(np.int64)


def permutation(colours: np.ndarray) -> np.ndarray:
    """perm[new] = old: nodes grouped by colour, natural order within a colour (stable sort: better locality)."""
    return np.argsort(colours, kind="stable").astype(PETSc.IntType)


class ColouredICC:
    """PC type python context (see the module's docstring)."""

    def __init__(self):
        self.mat_type = "aij"
        self.inner: PETSc.PC | None = None
        self.Ap = self.scatter = self.xp = self.yp = self.perm_is = None
        self.krylov_matrix: PETSc.Mat | None = None
        self.colours = 0
        self.gpu = False
        self.built_from = None

    def setFromOptions(self, pc):
        opts = PETSc.Options(pc.getOptionsPrefix() or "")
        self.mat_type = opts.getString("cicc_mat_type", self.mat_type)
        if self.mat_type not in MAT_TYPES:
            raise ValueError(f"coloured ICC: cicc_mat_type = '{self.mat_type}'; allowed: {', '.join(MAT_TYPES)}")

    def setUp(self, pc):
        # the preconditioner's matrix: the KSP's operator may be the SELL copy made below
        _, A = pc.getOperators()
        key = (A.handle, A.stateGet())
        if self.inner is not None and key == self.built_from:
            return                      # LinearSolver handed the KSP the SELL copy: nothing to rebuild
        if A.getComm().getSize() > 1:
            raise ValueError("coloured ICC: cardiosim.solvers.coloured_icc.ColouredICC runs on one rank")
        dm = grid_dm(pc.getDM(), "coloured ICC")
        self.destroy(pc)
        sync_host(A)                     # host values of a COO-assembled cuSPARSE matrix (PETSc 3.26.1 defect)
        dims = dm.getSizes()
        kind = A.getType()
        self.gpu = "cusparse" in kind.lower()
        host = PETSc.Mat().createAIJ(size=A.getSize(), csr=stored_nonzeros(A), comm=PETSc.COMM_SELF)
        box = is_box(host, dims)
        colours = colouring(dims, box)
        self.colours = int(colours.max()) + 1
        perm = permutation(colours)
        self.perm_is = PETSc.IS().createGeneral(perm, comm=PETSc.COMM_SELF)
        Ap = host.permute(self.perm_is, self.perm_is)      # Ap[k, l] = A[perm[k], perm[l]]
        host.destroy()
        if Ap.getType() != kind:
            Ap.convert(kind)                                # in place (petsc4py without ``out``)
        self.Ap = Ap
        ns = A.getNullSpace()
        singular = bool(ns and ns.handle and ns.hasConstant())
        if singular:                    # the constant vector permuted is the constant vector
            self.Ap.setNullSpace(PETSc.NullSpace().create(constant=True, comm=PETSc.COMM_SELF))
        inner = PETSc.PC().create(comm=PETSc.COMM_SELF)
        inner.setOptionsPrefix((pc.getOptionsPrefix() or "") + "cicc_")
        inner.setType(PETSc.PC.Type.ICC)
        inner.setOperators(self.Ap, self.Ap)
        if self.gpu:
            inner.setFactorSolverType("cusparse")
        inner.setFactorLevels(0)
        # natural: the colour ordering is already in Ap (another ordering would undo it; and cuSPARSE's device
        # ICC(0) path takes natural ordering only)
        inner.setFactorOrdering("natural")
        inner.setFactorShift(PETSc.Mat.FactorShiftType.POSITIVE_DEFINITE)
        inner.setFromOptions()
        inner.setUp()
        self.inner = inner
        # P r and Pᵀ y: one scatter, xp[k] = r[perm[k]] forward and its reverse
        self.xp, self.yp = self.Ap.createVecs()
        r = A.createVecs()[0]
        self.scatter = PETSc.Scatter().create(r, self.perm_is, self.xp, None)
        r.destroy()
        if self.mat_type == "sell":
            self.krylov_matrix = _sell(A, self.gpu)
            if singular:                # KSP takes the null space from its operator
                self.krylov_matrix.setNullSpace(ns)
        self.built_from = (A.handle, A.stateGet())     # after the conversion, which counts as a change of A

    def apply(self, pc, x, y):
        self.scatter.scatter(x, self.xp, PETSc.InsertMode.INSERT_VALUES, PETSc.ScatterMode.FORWARD)
        self.inner.apply(self.xp, self.yp)
        self.scatter.scatter(self.yp, y, PETSc.InsertMode.INSERT_VALUES, PETSc.ScatterMode.REVERSE)

    def view(self, pc, viewer):
        if self.inner is None:
            return
        viewer.printfASCII(f"  cardiosim coloured ICC(0): {self.colours} colours, permuted matrix "
                           f"{self.Ap.getType()}, Krylov matrix {self.mat_type}, factor "
                           f"{self.inner.getFactorSolverType()} ({'GPU' if self.gpu else 'host'})\n")

    def destroy(self, pc):
        for name in ("inner", "Ap", "scatter", "xp", "yp", "perm_is", "krylov_matrix"):
            obj = getattr(self, name)
            if obj is not None:
                obj.destroy()
            setattr(self, name, None)


def _sell(A: PETSc.Mat, gpu: bool) -> PETSc.Mat:
    """A copy of ``A`` in sliced ELLPACK: ``sell`` on the host, ``sellcuda`` on the GPU. (petsc4py's ``convert``
    without ``out`` converts in place: ``A`` is the solver's operator and stays as it is.) PETSc 3.26 converts aij to
    sell directly and sell to sellcuda in place, but has no aijcusparse -> sellcuda converter: the generic fallback
    inserts entry by entry and does not finish a 1025² matrix in 200 s
    (docs/decisions/0019-coloured-icc-preconditioner.md). So the GPU copy goes
    through the host: the rows as CSR, a host aij, sell, then sellcuda."""
    if not gpu:
        return A.convert("sell", PETSc.Mat())
    copy = PETSc.Mat().createAIJ(A.getSizes(), csr=A.getValuesCSR(), comm=A.getComm())
    copy.convert("sell")            # in place
    copy.convert("sellcuda")        # in place
    return copy

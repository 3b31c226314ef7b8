"""Conjugate gradients with the whole iteration on the device, as a PETSc Krylov solver (KSP type python): the
resident placement's default, on one GPU or several (docs/decisions/0017-own-stencil-cg-and-multigrid.md,
docs/decisions/0018-stencil-solvers-on-several-ranks.md).

Why not PETSc's KSPCG there: on the GPU each of its vector operations costs 5–60 µs of host latency, most of them
synchronising (a dot product returns to the host; Thrust-based kernels wait), so an iteration costs ~0.2–0.4 ms
whatever the grid (docs/decisions/0017-own-stencil-cg-and-multigrid.md). Here an
iteration is three or four kernels on the matrix's stencil form (cardiosim.solvers.multigrid) whose scalars stay
on the device: on one GPU the stopping test runs there too (a CUDA graph loop), and the host waits once per solve;
on several ranks one synchronisation per iteration brings the scalars to the host for the MPI_Allreduce. The
algorithm, the preconditioned residual norm and the stopping test are KSPCG's and KSPConvergedDefault's, so
iteration counts and tolerances mean what they mean in PETSc (tests/test_krylov.py compares the two).

The preconditioner is the KSP's own PC: ``jacobi`` (the stencil's diagonal, fused into the CG update),
``python`` with cardiosim.solvers.multigrid.StencilMG (its V-cycle, as a CUDA graph), or ``none``. The host build of the
same source runs on host matrices (CI). On several ranks the iteration is the Chronopoulos–Gear form (one
MPI_Allreduce per iteration; the same iterates), over the boxes of the grid or, for small grids, on rank 0 alone
(``smg_layout``, ``smg_transport``: cardiosim.solvers.comm). On a masked grid every vector operation and dot
product runs over the tissue's nodes only (``smg_active``, cardiosim.solvers.multigrid): the rows outside (a
diagonal each) are solved at the start, and their part of ‖B b‖ is kept for the stopping test, so iteration counts
are the box's. A singular operator's right-hand side is projected onto its range on the device, as KSPSolve
would project it (cardiosim.solvers.nullspace). Not supported: monitors (-ksp_monitor prints
nothing), other PC types (one line says so).

    -parabolic_ksp_type python -parabolic_ksp_python_type cardiosim.solvers.krylov.StencilCG -parabolic_pc_type jacobi
"""

from __future__ import annotations

from petsc4py import PETSc

from cardiosim.solvers import comm, multigrid, nullspace
from cardiosim.solvers.linear import on_device, sync_host

PYTHON_TYPE = "cardiosim.solvers.krylov.StencilCG"
PRECONDITIONERS = {"none": 0, "jacobi": 1}


class StencilCG:
    """KSP type python context (see the module's docstring)."""

    def __init__(self):
        self.vcycle: multigrid.VCycle | None = None
        self.own: multigrid.VCycle | None = None     # a one-level hierarchy of our own, for Jacobi and none
        self.precond = 0
        self.why = ""          # on several ranks: the layout, and why (cardiosim.solvers.comm.layout)
        self.null: list = []   # (w, u) pairs whose removal makes b consistent (cardiosim.solvers.nullspace)
        self.b = None          # b made consistent, where the operator is singular
        self.mine: list = []   # the vectors made here for that (destroyed with the solver)

    def setUp(self, ksp):
        A, _ = ksp.getOperators()
        pc = ksp.getPC()
        pc.setUp()
        kind = pc.getType()
        self.destroy(ksp)
        gpu = on_device(A)
        if kind == "python" and isinstance(pc.getPythonContext(), multigrid.StencilMG):
            self.vcycle, self.precond = pc.getPythonContext().vcycle, 2
            self.why = pc.getPythonContext().why
        elif kind in PRECONDITIONERS:
            dm = multigrid.grid_dm(ksp.getDM(), "krylov")
            sync_host(A)
            opts = PETSc.Options(ksp.getOptionsPrefix() or "")
            layout, transport = opts.getString("smg_layout", "auto"), opts.getString("smg_transport", "auto")
            comm.check(layout, transport)
            h = multigrid.hierarchy_for(A, dm, None, False, layout)
            self.own = self.vcycle = multigrid.VCycle(h, gpu, transport=transport,
                                                      active=opts.getBool("smg_active", True))
            self.why = ", ".join(w for w in (h.why, self.vcycle.transport) if w)
            self.precond = PRECONDITIONERS[kind]
        else:
            raise ValueError(f"krylov: StencilCG works with -pc_type jacobi, none or the cardiosim multigrid "
                             f"(python), not '{kind}'")
        if self.vcycle.gpu != gpu:
            raise ValueError("krylov: the preconditioner and the matrix are on different devices")
        self._null_space(A)

    def _null_space(self, A) -> None:
        """The pairs that project b onto A's range, b − Σ (n·b) n over its orthonormal null vectors n (the
        constants: b − mean(b)), and a vector for the projected b."""
        held = nullspace.of(A)
        if held is None:
            return
        if held is True:
            w = A.createVecs()[0]
            w.set(1.0 / A.getSize()[0])
            self.null = [(w, None)]
            self.mine.append(w)
        else:
            self.null = [(n, n) for n in held]
        self.b = A.createVecs()[1]
        self.mine.append(self.b)

    def solve(self, ksp, b, x):
        rtol, atol, dtol, maxit = ksp.getTolerances()
        zero = not ksp.getInitialGuessNonzero()
        if self.null:      # KSPSolve's projection of b, on the device (it has none to do: nullspace.give)
            multigrid.deflate(self.vcycle, b, self.null, out=self.b)
            b = self.b
        with multigrid.addresses(self.vcycle.gpu, (b, "r"), (x, "rw")) as (bp, xp):
            its, rnorm, reason = self.vcycle.cg(self.precond, bp, xp, rtol, atol, dtol, maxit, zero)
        ksp.setIterationNumber(its)
        ksp.setResidualNorm(rnorm)
        ksp.setConvergedReason(reason)

    def view(self, ksp, viewer):
        name = {0: "none", 1: "Jacobi", 2: "cardiosim multigrid"}[self.precond]
        viewer.printfASCII(f"  cardiosim CG on the {'GPU' if self.vcycle and self.vcycle.gpu else 'host'}, "
                           f"preconditioner {name}\n")

    def destroy(self, ksp):
        if self.own is not None:
            self.own.destroy()
        self.own = self.vcycle = None
        for v in self.mine:
            v.destroy()
        self.null, self.b, self.mine = [], None, []

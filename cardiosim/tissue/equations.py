"""The tissue equations: the diffusion part of the monodomain and bidomain models, on the stiffness rows of
cardiosim.tissue.operators (assembled for PETSc's solvers, stencil matrices for cardiosim's).

With K_x the stiffness of σ_x (operators.py), M the lumped mass, α = χ·Cm/Δt and θ = 1 (backward Euler) or
½ (Crank–Nicolson), the PDE steps after the reaction step has produced V* are

  monodomain   (αM + θK_m) V' = αM V* − (1−θ) K_m V*                       σ_m = σ_i σ_e / (σ_i + σ_e)
  bidomain     (αM + θK_i) V' = αM V* − (1−θ) K_i V* − K_i φe              parabolic, φe from the last step
               (K_i + K_e) φe' = −K_i V'                                    elliptic, constant null space

Units: σ in mS/cm, χ in cm⁻¹, Cm in µF/cm², V and φe in mV, t in ms. φe is reported with zero mean over the
tissue volume (it is defined up to a constant).
"""

from __future__ import annotations

import weakref

import numpy as np
from mpi4py import MPI
from petsc4py import PETSc

from cardiosim.solvers.linear import (
    ELLIPTIC_DEFAULTS,
    PARABOLIC_DEFAULTS,
    LinearSolver,
    elliptic_pc_defaults,
    even_mg_levels,
    gpu_elliptic_defaults,
    gpu_parabolic_defaults,
    stencil_solver,
    sync_host,
)
from cardiosim.tissue.operators import Assembler, MatrixOperator, NodeConductivity, RowsOperator, lumped_mass
from cardiosim.solvers import stencil_matrix
from cardiosim.solvers.multigrid import StencilProduct


# The elliptic matrix's diagonal at nodes outside the tissue, relative to its largest entry. Any positive value
# gives φe = 0 there; a small one keeps those rows out of the Galerkin coarse operators of the geometric multigrid
# (CG + PCMG, 128² disc, bidomain: 24 iterations per solve with 1, 8.4 with 1e-6, 7.6 on the full box; GAMG 21
# either way: docs/decisions/0028-tissue-inside-the-box.md).
OUTSIDE_DIAGONAL = 1e-6


class Conductivities:
    """The conductivities of both domains and of the monodomain (their series combination) at the ghosted nodes,
    as the assembler reads them (cardiosim.tissue.operators.NodeConductivity)."""

    def __init__(self, grid, tissue):
        rng = grid.ghosted
        fib = grid.fibres(tissue, rng)
        si, se = grid.scale_factors(tissue, rng)
        # An element with a corner outside the tissue conducts nothing (cardiosim.domain.mask): a no-flux surface.
        inside = grid.mask.ghosted_tissue() if grid.mask is not None else None
        self.intra = NodeConductivity(tissue.sigma_il, tissue.sigma_it, si, fib, inside)
        self.extra = NodeConductivity(tissue.sigma_el, tissue.sigma_et, se, fib, inside)
        # σ_m along each principal direction: the series combination of the two domains.
        self.mono = NodeConductivity(_series(tissue.sigma_il * si, tissue.sigma_el * se),
                                     _series(tissue.sigma_it * si, tissue.sigma_et * se), 1.0, fib, inside)
        self.fibres = fib


def _series(a, b):
    s = a + b
    return np.divide(a * b, s, out=np.zeros_like(s), where=s > 0)


class TissueModel:
    """Common part: mass, time-step constants and the parabolic solve."""

    def __init__(self, grid, cfg, stencil: str):
        self.assembler = Assembler(grid, stencil)
        self.sigma = Conductivities(grid, cfg.tissue)
        self.common(grid, cfg, lumped_mass(grid) if grid.mask is None else grid.mask.mass())

    def common(self, grid, cfg, M) -> None:
        """What every tissue model has, whatever its matrices: the grid, the time-step constants, the mass ``M``
        (cm^d per node) and the work vectors (cardiosim.tissue.microscopic sets its own mass through this too)."""
        self.grid = grid
        self.cfg = cfg
        sim, tis = cfg.simulation, cfg.tissue
        self.alpha = tis.chi * tis.Cm / sim.dt
        self.theta = 1.0 if sim.time_scheme == "backward-euler" else 0.5
        self.M = M
        # The mass in the parabolic step. Nodes outside the tissue (cardiosim.domain.mask) have no mass and no coupling:
        # 1/α there makes their row V' = V*, so their Vm stays as it is.
        self.M_step = M
        self.outside = None
        self.rows = None        # the tissue nodes, where the systems are solved on them only (tissue.solve_on)
        if grid.mask is not None:
            self.outside = grid.vec()
            self.outside.getArray()[:] = grid.mask.outside()
            self.M_step = M.copy()
            self.M_step.axpy(1.0 / self.alpha, self.outside)
            if solve_on_tissue(cfg, grid):
                # The rows outside are decoupled (a diagonal, V' = V* and φe = 0): the tissue's submatrix gives the
                # same answer at the cost of the tissue alone (a heart fills 10-20 % of its box)
                start = M.getOwnershipRange()[0]
                inside = np.flatnonzero(~grid.mask.outside()).astype(PETSc.IntType) + start
                self.rows = PETSc.IS().createGeneral(inside, comm=M.getComm())
        self.rhs = grid.vec()
        self.work = grid.vec()
        # the right-hand sides' stiffness products through the stencil solvers' seam, where those solvers run (by
        # matrix handle; others go through PETSc's MatMult): on several GPUs PETSc's product sends its halo
        # through host memory (this MPI is not CUDA-aware), ours GPU to GPU, and the ranks' streams need not meet
        self.products = {}
        # freed with the model (a script may run many simulations in one process); not at the interpreter's end,
        # where MPI and the device may be gone before it
        weakref.finalize(self, _destroy_all, self.products).atexit = False

    def _parabolic_matrix(self, K):
        """θK + αM, assembled (for PETSc's solvers)."""
        A = K.copy()
        A.scale(self.theta)
        diag = self.M_step.copy()
        diag.scale(self.alpha)
        A.setDiagonal(diag, addv=True)
        sync_host(A)
        return A

    def _parabolic_defaults(self, diagonal) -> dict:
        if not self.grid.gpu:
            return PARABOLIC_DEFAULTS
        return gpu_parabolic_defaults(self.grid, self.jacobi_radius(diagonal))

    def _parabolic(self, rows):
        """The stiffness K of the assembler's ``rows`` and the parabolic solver of αM + θK (``self.parabolic``);
        returns K. Where cardiosim's stencil solvers take the system, both are stencil matrices (no assembly,
        cardiosim.solvers.stencil_matrix) and K's products go through the stencil library; else assembled."""
        defaults = self._parabolic_defaults(self.assembler.diagonal(rows))
        stencils = self._stencil_only("parabolic", defaults)
        if stencils:
            m = self.M_step.getArray(readonly=True)
            K = stencil_matrix.create(self.assembler.as_stencil(rows), self.grid.da)
            A = stencil_matrix.create(self.assembler.as_stencil(rows, self.theta, self.alpha * m), self.grid.da)
        else:
            K = self.assembler.matrix(rows)
            A = self._parabolic_matrix(K)
        self.parabolic = LinearSolver("parabolic", A, grid=self.grid, defaults=defaults, rows=self.rows)
        if stencils:
            self._product(K)
        return K

    def _stencil_only(self, name: str, defaults: dict) -> bool:
        """Whether system ``name`` is a stencil matrix: where cardiosim's stencil solvers take it, on the whole grid
        (on a masked grid's tissue rows they refuse it, and say so: cardiosim.solvers.multigrid)."""
        return self.rows is None and stencil_solver(name, defaults)

    def jacobi_radius(self, diagonal: np.ndarray) -> float:
        """ρ = max_i θK_ii / (αM_i + θK_ii), dimensionless, from K's diagonal on this rank's nodes: the Gershgorin
        radius of the Jacobi-scaled parabolic matrix where K is an M-matrix (its off-diagonal row sum is −K_ii), so
        the spectrum lies in [1−ρ, 1+ρ]. Near 1 (fine grids, small mass term) CG+Jacobi needs many iterations: 6.5
        per step at ρ ≈ 0.4, 72 at ρ ≈ 0.98 (docs/decisions/0017-own-stencil-cg-and-multigrid.md)."""
        d = self.theta * diagonal
        den = self.alpha * self.M_step.getArray(readonly=True) + d
        local = float(np.max(d / den)) if len(d) else -np.inf
        return float(self.grid.da.comm.tompi4py().allreduce(local, op=MPI.MAX))

    def _product(self, K) -> None:
        """Route the stencil matrix K's products (the right-hand sides', and any caller's) through a StencilProduct,
        which copies its stencil into the stencil library here: the bidomain then adds K_e to the same rows in
        place."""
        product = StencilProduct(K, self.grid.da)
        self.products[K.handle] = product
        stencil_matrix.use_product(K, product)

    def vecs(self) -> list:
        """The model's own vectors (for the resident placement's set-up: made current on the device)."""
        return [self.M, self.rhs, self.work] + ([self.M_step, self.outside] if self.outside is not None else [])

    def warm_up(self) -> None:
        """One solve of each system on a throw-away right-hand side (made consistent by the solver where A is
        singular, as every right-hand side is: KSPSolve and StencilCG project it), so that
        what PETSc sets up at the first solve (multigrid smoothers' eigenvalue estimates, GPU transposes, work
        vectors) happens in the set-up, timed apart. The solvers keep no state from it that changes later
        solves (the eigenvalue estimates use PETSc's fixed random seed either way); iteration counts are not
        recorded."""
        for s in self.solvers():
            b, y = s.A.createVecs()
            b.setArray(self.grid.coords()[:, 0] + 1.0)   # smooth, non-constant (cm)
            y.set(0.0)
            s.run(b, y)
            for v in (b, y):
                v.destroy()

    def _rhs(self, K, V, phi, alpha: float, beta: float):
        """αM V − K(βV + φ) into self.rhs (φ None: αM V − βK V). Through the stencil product where the stencil
        solvers run: one pass on the device, where PETSc's vector operations would cost a launch and its host
        latency each (docs/decisions/0048-a-steps-fixed-costs-on-the-device.md); else PETSc's product and vector
        operations."""
        b = self.rhs
        product = self.products.get(K.handle)
        if product is not None:
            product.combine(V, phi, self.M_step if alpha else None, alpha, beta, 1.0, b)
            return b
        if alpha:
            b.pointwiseMult(self.M_step, V)
            b.scale(alpha)
            if beta:
                K.mult(V, self.work)
                b.axpy(-beta, self.work)
        else:
            K.mult(V, b)
            b.scale(-beta)
        if phi is not None:
            K.mult(phi, self.work)
            b.axpy(-1.0, self.work)
        return b

    def iterations(self) -> dict:
        return {s.name: s.iterations for s in self.solvers()}


class Monodomain(TissueModel):
    has_phi = False

    def __init__(self, grid, cfg, stencil):
        super().__init__(grid, cfg, stencil)
        self.K = self._parabolic(self.assembler.values(self.sigma.mono))

    def solvers(self):
        return [self.parabolic]

    def intracellular(self):
        """The intracellular stiffness K_i's products (the pseudo-ECG's source: cardiosim.analysis.ecg) from its rows,
        computed on demand: the pseudo-ECG needs only a few products at set-up, not an assembled matrix."""
        return RowsOperator(self.assembler, self.assembler.values(self.sigma.intra))

    def diffuse(self, V, phi, t):
        self.parabolic.solve(self._rhs(self.K, V, None, self.alpha, 1.0 - self.theta), V, t)

    def solve_phi(self, V, phi, t):  # no extracellular potential
        pass


class Bidomain(TissueModel):
    has_phi = True
    pieces = None       # masked grids: an indicator vector per connected piece of tissue (cardiosim.domain.mask)

    def __init__(self, grid, cfg, stencil):
        super().__init__(grid, cfg, stencil)
        a = self.assembler
        vi = a.values(self.sigma.intra)
        self.Ki = self._parabolic(vi)                   # its stencil product copies vi before vi becomes K_i + K_e
        # on the tissue's rows no DMDA hierarchy fits: algebraic multigrid there
        pc = (gpu_elliptic_defaults(grid) if grid.gpu else
              {"pc_type": "gamg"} if self.rows is not None else elliptic_pc_defaults(grid))
        rows = a.values(self.sigma.extra, add_to=vi)            # K_i + K_e: vi's rows are in Ki and θKi + αM
        defaults = {**ELLIPTIC_DEFAULTS, **pc}
        outside = None
        if self.outside is not None:
            # φe = 0 outside the tissue (a row of its own: a diagonal, right-hand side 0); one constant per
            # connected piece of tissue is free
            dmax = grid.da.comm.tompi4py().allreduce(float(a.diagonal(rows).max()), op=MPI.MAX)
            outside = self.outside.getArray(readonly=True) * (OUTSIDE_DIAGONAL * dmax)
        if self._stencil_only("elliptic", defaults):
            A = stencil_matrix.create(a.as_stencil(rows, diagonal=outside), grid.da)
        else:
            A = a.matrix(rows)
            if outside is not None:
                d = grid.vec()
                d.getArray()[:] = outside
                A.setDiagonal(d, addv=PETSc.InsertMode.ADD_VALUES)
                d.destroy()
                sync_host(A)
        if self.outside is not None:
            self.pieces = [grid.mask.indicator(p) for p in range(1, grid.mask.n_pieces + 1)]
            self.inside = grid.mask.indicator()
            # φe's mean over a piece is φe · (M on the piece) / its volume: those weights, once
            self.piece_means = []
            for piece in self.pieces:
                w = self.M.copy()
                w.pointwiseMult(w, piece)
                w.scale(1.0 / w.sum())
                self.piece_means.append(w)
        self.elliptic = LinearSolver("elliptic", A, grid=grid, defaults=defaults, rows=self.rows,
                                     nullspace=True if self.pieces is None else _normalised(self.pieces))
        self.volume = self.M.sum()
        self.mean_weight = None                 # M / volume: φe's mean over the grid as a product, on the device
        if self.pieces is None and self.Ki.handle in self.products:
            self.mean_weight = self.M.copy()
            self.mean_weight.scale(1.0 / self.volume)

    def solvers(self):
        return [self.parabolic, self.elliptic]

    def intracellular(self):
        """K_i's products (cardiosim.tissue.operators.MatrixOperator): its matrix is the parabolic step's."""
        return MatrixOperator(self.Ki)

    def diffuse(self, V, phi, t):
        self.parabolic.solve(self._rhs(self.Ki, V, phi, self.alpha, 1.0 - self.theta), V, t)

    def solve_phi(self, V, phi, t):
        b = self._rhs(self.Ki, V, None, 0.0, 1.0)                  # −K_i V
        # b sums to zero over each piece in exact arithmetic (K_i 1 = 0); its round-off, which would make the
        # singular system inconsistent, the solver removes: KSPSolve by the matrix's null space, or StencilCG on
        # the device (cardiosim.solvers.nullspace). Not here as well.
        self.elliptic.solve(b, phi, t)
        self._zero_means(phi)

    def _zero_means(self, phi) -> None:
        """φe with zero mean over the tissue's volume (over each piece's, masked), and exactly 0 outside the tissue
        (the solve leaves round-off there). Through the stencil product where the stencil solvers run: the sums stay
        on the device (StencilProduct.deflate), where PETSc's VecDot waits for the host."""
        product = self.products.get(self.Ki.handle)
        if self.pieces is None:
            if product is not None:
                product.deflate(phi, [(self.mean_weight, None)])
            else:
                phi.shift(-phi.dot(self.M) / self.volume)
            return
        if product is not None:
            product.deflate(phi, list(zip(self.piece_means, self.pieces)), self.inside)
            return
        phi.pointwiseMult(phi, self.inside)
        for piece, mean in zip(self.pieces, self.piece_means):
            phi.axpy(-phi.dot(mean), piece)


def _destroy_all(products: dict) -> None:
    for p in products.values():
        p.destroy()
    products.clear()


TISSUE_ONLY_BELOW = 0.5     # solve_on = "auto": on the tissue where it fills less of the box than this


def solve_on_tissue(cfg, grid) -> bool:
    """Whether a masked grid's systems are solved on its tissue nodes only (tissue.solve_on). Algebraic multigrid on
    the tissue needs more iterations than geometric multigrid on the box (the LV at 0.5 mm: 13.4 against 10.3; a
    disc filling 75 % of its square: 22.8 against 9.3), so the box wins where the tissue fills most of it."""
    if grid.mask is None or grid.gpu:
        return False
    choice = getattr(cfg.tissue, "solve_on", "box")
    opts = PETSc.Options()
    if choice == "auto" and any(stencil_solver(name, {}) or opts.getString(f"{name}_pc_type", "") == "mg"
                                for name in ("parabolic", "elliptic")):
        return False            # solvers chosen by options that need the grid (ours, PCMG): the box
    if choice == "auto":
        return grid.mask.n_tissue < TISSUE_ONLY_BELOW * grid.n_nodes
    return choice == "tissue"


def balance_levels(cfg, grid, procs) -> int:
    """The multigrid levels a tissue-balanced split of ``grid`` on the process grid ``procs`` must keep (Grid's
    balance_levels): those of PETSc's geometric multigrid where it may run on the box; else one."""
    if cfg.simulation.equations == "bidomain" and cfg.tissue.model != "microscopic":
        if not solve_on_tissue(cfg, grid):     # PETSc's geometric multigrid may run on the box: keep its levels
            return even_mg_levels(grid.n, procs)[0]
    return 1


def _normalised(vecs):
    out = []
    for v in vecs:
        u = v.copy()
        u.normalize()
        out.append(u)
    return out

"""Krylov solvers with defaults set in code and every choice overridable from the PETSc options database.

Each solver has an options prefix (``parabolic_``, ``elliptic_``). Defaults are in the options database only
while the solver is set up (cardiosim.runtime.petsc.inserted), only where the user has not set the option, and
``setFromOptions()`` runs last, so anything after ``--`` on the command line wins, e.g.
``-- -elliptic_pc_type gamg -elliptic_ksp_monitor``.

Defaults:
  parabolic  CG + block Jacobi/ILU(0): the matrix χCm/Δt·M + θK is diagonally dominant, a few iterations.
  elliptic   CG + geometric multigrid on the DMDA hierarchy (Galerkin coarse operators, Chebyshev/Jacobi
             smoothers, which also run on GPUs) with the constant null space and a redundant SVD on the
             coarsest grid (the coarse operator is singular too). GAMG where the grid does not coarsen.
"""

from __future__ import annotations

import os

from petsc4py import PETSc

from cardiosim.domain.balance import keeps
from cardiosim.runtime import petsc as petsc_options
from cardiosim.solvers import nullspace as nullspace_attr
from cardiosim.runtime.errors import SimulationError, UserError

PARABOLIC_DEFAULTS = {
    "ksp_type": "cg",
    "ksp_rtol": "1e-10",
    "ksp_atol": "1e-12",   # mV-scale: a right-hand side of round-off (uniform Vm) must not be chased
    "ksp_initial_guess_nonzero": "true",
    "pc_type": "bjacobi",
    "sub_pc_type": "ilu",
}

ELLIPTIC_DEFAULTS = {
    "ksp_type": "cg",
    "ksp_rtol": "1e-10",
    "ksp_atol": "1e-12",
    "ksp_initial_guess_nonzero": "true",   # warm start from the previous φe
}

MAX_COARSE_NODES = 3000  # an SVD of the coarsest grid on every rank: keep it small


def on_device(A: PETSc.Mat) -> bool:
    """Whether A's products run on the GPU: a cuSPARSE matrix, or a stencil matrix (type python,
    cardiosim.solvers.stencil_matrix) of a grid whose vectors are CUDA's."""
    kind = A.getType()
    if kind == PETSc.Mat.Type.PYTHON:
        return bool(getattr(A.getPythonContext(), "gpu", False))
    return "cusparse" in kind.lower()


def sync_host(A: PETSc.Mat) -> None:
    """Work around a PETSc 3.26.1 defect (docs/dev/petsc-pcmg-gpu.md): a cuSPARSE matrix assembled by COO (or changed
    on the device) is valid only on the device, and PCMG's Galerkin product then builds a wrong coarse operator
    (an identity two levels down: CG+MG converges like CG+Jacobi). A norm copies the values to the host once, at
    set-up; host matrices are left alone. The stiffness matrices, assembled on the host as CSR, do not need it
    (tests/test_resident_gpu.py runs PCMG with CARDIOSIM_PCMG_GPU_WORKAROUND=0 too); matrices changed on the
    device after assembly (the parabolic matrix's scale and diagonal, the mask's diagonal) meet the defect's
    condition (values valid only on the device) and keep it; that case is not tested without it."""
    if "cusparse" in A.getType().lower() and os.environ.get("CARDIOSIM_PCMG_GPU_WORKAROUND", "1") != "0":
        A.norm()


def even_mg_levels(n, procs) -> tuple[int, list[int]]:
    """Number of multigrid levels a DMDA of ``n`` nodes per dimension on the process grid ``procs`` can be coarsened
    to (each coarsening halves the cells per dimension, which needs an even cell count, and every rank must keep at
    least two cells per dimension, counted as for PETSc's even split), and the coarsest cells."""
    cells = [int(v) - 1 for v in n]
    levels = 1
    while all(c % 2 == 0 and c // 2 >= 2 * p for c, p in zip(cells, procs)):
        cells = [c // 2 for c in cells]
        levels += 1
    return levels, cells


def mg_levels(grid) -> tuple[int, list[int]]:
    """:func:`even_mg_levels` of the grid's DMDA; where its boxes are not PETSc's even split (grid.balance), no more
    levels than keep every rank's box at least one node wide on each, by PETSc's coarsening of the boxes
    (cardiosim.domain.balance.keeps)."""
    levels, cells = even_mg_levels(grid.n, grid.da.getProcSizes())
    if getattr(grid, "box_split", None) is None:
        return levels, cells
    ranges = [[int(v) for v in r] for r in grid.da.getOwnershipRanges()]
    while levels > 1 and not all(keeps(r, levels, 1) for r in ranges):
        levels -= 1
    return levels, [(int(v) - 1) // 2 ** (levels - 1) for v in grid.n]


def elliptic_pc_defaults(grid) -> dict:
    """Multigrid settings where the grid allows them; nothing where the user chose another preconditioner."""
    opts = PETSc.Options()
    if opts.hasName("elliptic_pc_type") and opts.getString("elliptic_pc_type") != "mg":
        return {}
    levels, coarse_cells = mg_levels(grid)
    coarse_nodes = 1
    for c in coarse_cells:
        coarse_nodes *= c + 1
    if levels >= 2 and coarse_nodes <= MAX_COARSE_NODES:
        return {"pc_type": "mg", "pc_mg_levels": str(levels), "pc_mg_galerkin": "both",
                "mg_levels_ksp_type": "chebyshev", "mg_levels_pc_type": "jacobi",
                "mg_coarse_pc_type": "redundant", "mg_coarse_redundant_pc_type": "svd"}
    return {"pc_type": "gamg"}


# cardiosim's own geometric multigrid (cardiosim.solvers.multigrid: the whole V-cycle in one call) and CG with the
# iteration on the device (cardiosim.solvers.krylov), on one rank or several: PETSc's own are latency-bound on a GPU
# (docs/decisions/0017-own-stencil-cg-and-multigrid.md). On several ranks they split the grid over the ranks or
# solve on rank 0 alone, whichever the
# grid's size makes faster (cardiosim.solvers.comm.layout; ``-<prefix>smg_layout`` chooses).
STENCIL_MG = {"pc_type": "python", "pc_python_type": "cardiosim.solvers.multigrid.StencilMG"}
# On the GPU a V-cycle's coarse levels cost launch latency, not bandwidth (the LV at 0.025 cm: ~0.2 ms per level
# from 45x45x53 down to 12x12x14 alike), while one dense product of 2,000 unknowns costs ~10 us. So the GPU's runs
# stop coarsening at 2048 nodes, not the solver's 1024 (which the host build keeps: there the dense product costs
# more than the levels it replaces); on one H200 that shortens both Table 4.1's PDE step and the masked LV's elliptic
# solve (docs/decisions/0042-gpu-coarsest-level-2048-nodes.md). Not higher: the coarsest (pseudo-)inverse is an
# eigendecomposition on the host at set-up, ~0.8 s at 2,000 nodes and ~8 s at 4,000 on a 2-core machine, and 4096
# would move the 10^7-node slab's coarsest level from 8^3 to 15^3 (its set-up target is 20 s).
#
# Below the finest level the GPU runs smooth with weighted Jacobi (smg_jacobi_from 1), not the finest level's
# coloured SOR: one loop per sweep instead of 2^d colour loops, and these levels cost launches, not flops; on H200s
# it shortens Table 4.1's step on 1 and 4 GPUs and the masked LV's
# (docs/decisions/0043-jacobi-on-the-coarse-levels-on-gpus.md). The host build keeps SOR: there a sweep costs flops,
# not a launch, and Jacobi costs Table 4.1's elliptic solve an iteration there (11 against 12,
# tools/coarse_smoother_iterations.py); Jacobi on the host is not timed.
GPU_STENCIL_MG = {**STENCIL_MG, "smg_coarse_max": "2048", "smg_jacobi_from": "1"}
STENCIL_CG = {"ksp_type": "python", "ksp_python_type": "cardiosim.solvers.krylov.StencilCG"}


def _chosen(name: str, defaults: dict, key: str) -> str:
    """Option ``key`` of solver ``name``: the options database's where the user set it, else ``defaults``'."""
    opts = PETSc.Options()
    return opts.getString(f"{name}_{key}") if opts.hasName(f"{name}_{key}") else defaults.get(key, "")


def stencil_krylov(name: str, defaults: dict) -> bool:
    """Whether solver ``name``'s Krylov method will be cardiosim's StencilCG."""
    return (_chosen(name, defaults, "ksp_type"), _chosen(name, defaults, "ksp_python_type")) == \
        ("python", STENCIL_CG["ksp_python_type"])


def stencil_solver(name: str, defaults: dict) -> bool:
    """Whether solver ``name`` (its options prefix) will be one of cardiosim's stencil solvers, which read their
    matrix as a stencil (cardiosim.solvers.galerkin.attach): by the options database where the user set them, else
    by ``defaults``."""
    return stencil_krylov(name, defaults) or \
        (_chosen(name, defaults, "pc_type"), _chosen(name, defaults, "pc_python_type")) == \
        ("python", STENCIL_MG["pc_python_type"])


def _user_chose_pc(name: str) -> bool:
    return PETSc.Options().hasName(f"{name}_pc_type")


PARABOLIC_MG_RADIUS = 0.9


def gpu_parabolic_defaults(grid, jacobi_radius: float) -> dict:
    """The parabolic solver on the GPU (resident placement): cardiosim's CG + Jacobi, or cardiosim's multigrid where
    the Jacobi-scaled matrix's Gershgorin radius (TissueModel.jacobi_radius) exceeds PARABOLIC_MG_RADIUS. Block
    Jacobi/ILU(0) would run its triangular solves, sequential by nature, as slow cuSPARSE sweeps; Jacobi is one
    vector kernel and needs no set-up, and wins where the mass term dominates (1025² at 100 µm: 6.5 iterations,
    2.1 ms per step, against 3 iterations and 4.3 ms with multigrid); at 8 µm (radius ≈ 0.98) Jacobi needs 72
    (docs/decisions/0017-own-stencil-cg-and-multigrid.md)."""
    out = {k: v for k, v in PARABOLIC_DEFAULTS.items() if not k.startswith("sub_")}
    out["pc_type"] = "jacobi"
    out.update(STENCIL_CG)
    if not _user_chose_pc("parabolic") and jacobi_radius > PARABOLIC_MG_RADIUS:
        out.update(GPU_STENCIL_MG)
    return out


# On a masked grid the finest level is smoothed by Jacobi too: its multicolour SOR sweeps the tissue's nodes in 8
# colours of 27-point stencils, each a launch over an eighth of them, latency more than work. On one H200 the
# idealised LV at 0.025 cm (25 % tissue) steps faster with it despite more elliptic iterations; a box gains little
# (docs/decisions/0044-jacobi-on-the-finest-level-of-masked-grids.md).
GPU_MASKED_JACOBI_FROM = "0"
# and swept twice there, each sweep fused with its residual: two loops more per V-cycle for fewer iterations
# (the LV at 0.025 cm, zero first guess, on the host: 13 -> 9; on the GPU:
# docs/decisions/0045-masked-level-0-swept-twice.md). Not on the coarser levels, whose loops cost launches, not bytes.
GPU_MASKED_FINEST_SWEEPS = "2"


def gpu_elliptic_defaults(grid) -> dict:
    """The elliptic solver on the GPU: cardiosim's CG + multigrid (PCMG's V-cycle on the GPU is latency-bound,
    docs/decisions/0017-own-stencil-cg-and-multigrid.md), Jacobi on every level of a masked grid's, unless the user
    chose a preconditioner (then
    PETSc's CG with it, and the CPU's PCMG settings where that choice is mg)."""
    if not _user_chose_pc("elliptic"):
        out = {**STENCIL_CG, **GPU_STENCIL_MG}
        if grid.mask is not None:
            out["smg_jacobi_from"] = GPU_MASKED_JACOBI_FROM
            out["smg_finest_sweeps"] = GPU_MASKED_FINEST_SWEEPS
        return out
    return elliptic_pc_defaults(grid)


def petsc_message(e: PETSc.Error) -> str:
    """The innermost line of a PETSc error (the one that says what was wrong), or the message of the Python error
    behind it (a solver of ours refusing an option: petsc4py chains it as the cause)."""
    cause = e.__cause__
    while isinstance(cause, PETSc.Error) and cause.__cause__ is not None:    # a python KSP setting up a python PC
        cause = cause.__cause__
    if isinstance(cause, (ValueError, RuntimeError)):
        return str(cause)
    lines = [ln.split("]", 1)[-1].strip() for ln in str(e).splitlines() if ln.strip()]
    return lines[-1] if lines else str(e)


def _use_krylov_matrix(ksp, A) -> None:
    """A preconditioner may ask for the Krylov method's products in another storage than the one it factors
    (cardiosim.solvers.coloured_icc: ``cicc_mat_type sell``, PETSc's sliced ELLPACK; PETSc has no ICC for SELL): the KSP's
    operator becomes that copy, the preconditioner's stays A (unchanged, so the PC is not set up again)."""
    pc = ksp.getPC()
    km = getattr(pc.getPythonContext(), "krylov_matrix", None) if pc.getType() == "python" else None
    if km is not None:
        ksp.setOperators(km, A)
        ksp.setUp()


class LinearSolver:
    """A KSP for one fixed matrix, with its iteration counts recorded per solve.

    ``rows``: solve on those rows only (an IS of global indices: the tissue nodes of a masked grid,
    cardiosim.tissue.equations), the system being A's submatrix on them; x keeps its other entries. The rows left out must not
    couple to the ones kept (a masked grid's nodes outside the tissue have a diagonal row only), so the answer is the
    whole system's. The hierarchy of a DMDA does not fit a submatrix: geometric multigrid is then not available, and
    the callers' defaults say what runs instead (algebraic multigrid for the elliptic system)."""

    def __init__(self, name: str, A: PETSc.Mat, grid=None, defaults=None, nullspace=False,
                 rows: PETSc.IS | None = None):
        self.name = name
        self.A = A
        self.rows = rows
        op = A if rows is None else A.createSubMatrix(rows, rows)
        self.op = op
        if nullspace and rows is None and stencil_krylov(name, defaults or {}):
            nullspace_attr.give(A, nullspace)       # StencilCG makes b consistent itself, on the device
        elif nullspace:
            _set_nullspace(A, nullspace)
            if rows is not None:
                _set_nullspace(op, _restricted(nullspace, rows))
        ksp = PETSc.KSP().create(comm=A.getComm())
        ksp.setOptionsPrefix(name + "_")
        ksp.setOperators(op)
        if grid is not None and rows is None:
            # Multigrid takes its hierarchy (interpolation) from the DMDA, but keeps our assembled operator.
            ksp.setDM(grid.da)
            ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
        # Everything that reads options happens here, the blocks' solvers (block Jacobi's ILU) included, so that
        # our defaults can leave the database afterwards.
        with petsc_options.inserted(name + "_", defaults or {}):
            try:
                ksp.setFromOptions()
                ksp.setUp()
                ksp.setUpOnBlocks()
                _use_krylov_matrix(ksp, op)
            except PETSc.Error as e:
                raise UserError(f"PETSc options for -{name}_*: {petsc_message(e)}") from None
        self.ksp = ksp
        self.iterations: list[int] = []

    def run(self, b: PETSc.Vec, x: PETSc.Vec) -> None:
        """The KSP's solve of A x = b on whole-grid vectors (on ``rows`` only where they are given); nothing recorded
        or checked (warm-ups and benchmarks)."""
        if self.rows is None:
            self.ksp.solve(b, x)
            return
        bs, xs = b.getSubVector(self.rows), x.getSubVector(self.rows)
        try:
            self.ksp.solve(bs, xs)
        finally:
            b.restoreSubVector(self.rows, bs)
            x.restoreSubVector(self.rows, xs)

    def solve(self, b: PETSc.Vec, x: PETSc.Vec, t: float) -> None:
        self.run(b, x)
        reason = self.ksp.getConvergedReason()
        self.iterations.append(self.ksp.getIterationNumber())
        if reason < 0:
            raise SimulationError(
                f"{self.name} solve did not converge at t = {t:.6g} ms (PETSc reason {reason}, "
                f"{self.ksp.getIterationNumber()} iterations); try a smaller simulation.dt or other "
                f"-{self.name}_ksp_/-{self.name}_pc_ options")

    def describe(self) -> str:
        """e.g. "cg+gamg", or "StencilCG+StencilMG (split over 2 ranks: ..., ipc)": on several ranks the stencil
        solvers say where they solve and how the ranks talk (cardiosim.solvers.comm)."""
        ksp, pc = self.ksp.getType(), self.ksp.getPC().getType()
        why = ""
        if ksp == "python":
            why = getattr(self.ksp.getPythonContext(), "why", "")
            ksp = type(self.ksp.getPythonContext()).__name__
        if pc == "python":
            why = why or getattr(self.ksp.getPC().getPythonContext(), "why", "")
            pc = type(self.ksp.getPC().getPythonContext()).__name__
        if self.rows is not None:
            why = ", ".join(w for w in (why, f"on the {self.rows.getSize():,} tissue nodes of {self.A.getSize()[0]:,}")
                            if w)
        return f"{ksp}+{pc}" + (f" ({why})" if why else "")

    def destroy(self):
        self.ksp.destroy()
        if self.op is not self.A:
            self.op.destroy()


def _set_nullspace(M: PETSc.Mat, vecs) -> None:
    """``vecs``: True, the constants; else the orthonormal vectors given (one constant per piece of masked tissue)."""
    ns = (PETSc.NullSpace().create(constant=True, comm=M.getComm()) if vecs is True else
          PETSc.NullSpace().create(constant=False, vectors=vecs, comm=M.getComm()))
    M.setNullSpace(ns)
    M.setTransposeNullSpace(ns)


def _restricted(vecs, rows: PETSc.IS):
    """Null-space vectors on ``rows`` only: True (the constants) stays True; given vectors are cut to the rows and
    normalised again."""
    if vecs is True:
        return True
    out = []
    for v in vecs:
        sub = v.getSubVector(rows)
        u = sub.copy()
        v.restoreSubVector(rows, sub)
        u.normalize()
        out.append(u)
    return out

"""cardiosim's CG (cardiosim.solvers.krylov.StencilCG, kernels/stencil_mg.cpp smg_cg), host build, against PETSc's KSPCG
with the same preconditioner, tolerances and initial guess: the same iteration counts, residual norms and
solutions, on the tissue solver's own matrices (2D box stencil with rotated fibres, 3D star stencil). The GPU build
is compared with PETSc in tests/test_multigrid_gpu.py."""

import numpy as np
import pytest
from petsc4py import PETSc

from cardiosim.solvers import krylov, multigrid

from conftest import require_gcc
from test_multigrid import tissue


# the smoothing a masked grid's elliptic multigrid gets on the GPU (cardiosim.solvers.linear.gpu_elliptic_defaults):
# Jacobi on level 0, swept twice, where CG's sums of z = B r come from the V-cycle's last sweep (smg jacobi_into_sums)
MASKED_GPU_MG = {"pc_type": "python", "pc_python_type": multigrid.PYTHON_TYPE, "smg_jacobi_from": "0",
                 "smg_finest_sweeps": "2"}


@pytest.fixture(scope="module", autouse=True)
def _compiler():
    require_gcc()


def solve_with(name, size, h, options, b_of, guess_of, fibre=30.0, placement="cpu"):
    opts = PETSc.Options()
    for k, v in options.items():
        opts[f"{name}_{k}"] = v
    try:
        grid, tis = tissue(size, h, fibre, placement)
    finally:
        for k in options:
            del opts[f"{name}_{k}"]
    s = getattr(tis, name)
    b, x = b_of(s.A), guess_of(s.A)
    s.ksp.solve(b, x)
    return s.ksp, x


@pytest.mark.parametrize("size,h,fibre", [((0.5, 0.3), 0.01, 30.0), ((0.2, 0.12, 0.1), 0.01, 0.0)])
@pytest.mark.parametrize("name,pc", [("parabolic", {"pc_type": "jacobi"}),
                                     ("elliptic", {"pc_type": "python", "pc_python_type": multigrid.PYTHON_TYPE}),
                                     ("elliptic", MASKED_GPU_MG)],
                         ids=["parabolic-jacobi", "elliptic-mg", "elliptic-mg-jacobi0"])
def test_stencil_cg_equals_petsc_cg(size, h, fibre, name, pc, placement="cpu"):
    """The same iterations, norms and solution as PETSc's CG; for the elliptic system from a right-hand side with a
    part in the null space, which PETSc's KSPSolve projects out and StencilCG on the device."""
    rng = np.random.default_rng(5)
    cache = {}

    def b_of(A):
        if "b" not in cache:
            x = A.createVecs()[0]
            x.setArray(np.sin(np.arange(x.getSize()) * 0.01) + 0.1 * rng.standard_normal(x.getSize()))
            b = A.createVecs()[1]
            A.mult(x, b)
            if name == "elliptic":      # a part in the null space, which KSPSolve (PETSc CG) or StencilCG removes
                b.shift(0.25 * b.norm(PETSc.NormType.INFINITY))
            cache["b"] = b.getArray().copy()
        b = A.createVecs()[1]
        b.setArray(cache["b"])
        return b

    def guess_of(A):
        x = A.createVecs()[0]
        x.setArray(np.linspace(0.0, 1.0, x.getSize()))      # a nonzero initial guess, as the time loop's
        return x

    ref, xr = solve_with(name, size, h, {"ksp_type": "cg", **pc}, b_of, guess_of, fibre, placement)
    ours, xo = solve_with(name, size, h, {"ksp_type": "python", "ksp_python_type": krylov.PYTHON_TYPE, **pc},
                          b_of, guess_of, fibre, placement)
    assert ours.getType() == "python"
    if name == "elliptic":      # StencilCG holds the null space itself (cardiosim.solvers.nullspace): KSPSolve has none
        assert not ours.getOperators()[0].getNullSpace().handle and ref.getOperators()[0].getNullSpace().handle
    a, b = xr.getArray(readonly=True).copy(), xo.getArray(readonly=True).copy()
    if name == "elliptic":
        a, b = a - a.mean(), b - b.mean()
    diff = np.abs(a - b).max() / np.abs(a).max()
    print(f"\n{name} {'x'.join(map(str, [round(s / h) + 1 for s in size]))}: PETSc CG {ref.getIterationNumber()} its "
          f"(reason {ref.getConvergedReason()}, norm {ref.getResidualNorm():.3e}); StencilCG "
          f"{ours.getIterationNumber()} its (reason {ours.getConvergedReason()}, norm {ours.getResidualNorm():.3e}); "
          f"max rel. difference {diff:.1e}")
    assert ours.getConvergedReason() == ref.getConvergedReason() > 0
    assert ours.getIterationNumber() == ref.getIterationNumber()
    # elliptic: PETSc removes the constant (the null space) from each preconditioned residual, we do not; the norms
    # differ by that component only (the same iterations, the same solution up to a constant)
    assert ours.getResidualNorm() == pytest.approx(ref.getResidualNorm(), rel=1e-6 if name == "parabolic" else 0.05)
    assert diff < 1e-9


def test_stencil_cg_stops_at_max_it_and_refuses_other_preconditioners():
    _, tis = tissue((0.5, 0.3), 0.01)
    opts = PETSc.Options()
    for k, v in {"ksp_type": "python", "ksp_python_type": krylov.PYTHON_TYPE, "pc_type": "jacobi",
                 "ksp_max_it": "2"}.items():
        opts[f"parabolic_{k}"] = v
    try:
        _, tis = tissue((0.5, 0.3), 0.01)
    finally:
        for k in ("ksp_type", "ksp_python_type", "pc_type", "ksp_max_it"):
            del opts[f"parabolic_{k}"]
    s = tis.parabolic
    x, b = s.A.createVecs()
    b.setRandom()
    x.set(0.0)
    s.ksp.solve(b, x)
    assert s.ksp.getIterationNumber() == 2
    assert s.ksp.getConvergedReason() == PETSc.KSP.ConvergedReason.DIVERGED_MAX_IT
    ksp = PETSc.KSP().create(PETSc.COMM_SELF)
    ksp.setOperators(s.A)
    ksp.setType("python")
    ksp.setPythonContext(krylov.StencilCG())
    ksp.setDM(s.ksp.getDM())
    ksp.setDMActive(PETSc.KSP.DMActive.ALL, False)
    ksp.getPC().setType("sor")
    with pytest.raises(PETSc.Error):
        ksp.setUp()

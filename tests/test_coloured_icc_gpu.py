"""The seed's solver techniques on the GPU (resident placement, PETSc CUDA types). Run on a GPU node:

    python3 -m pytest -q -s -m gpu tests/test_coloured_icc_gpu.py

- CG + coloured ICC(0) (cardiosim.solvers.coloured_icc) on cuSPARSE matrices and CUDA vectors, with aijcusparse and with
  sellcuda storage for the Krylov products, gives PETSc CG + Jacobi's answer within the tolerance, on both systems
  (2D box stencil with fibres at 30°, 3D star stencil); the factor is cuSPARSE's;
- a bidomain resident run with each technique (the Gauss–Jordan coarse solve in the elliptic multigrid; coloured
  ICC(0) for the parabolic system, aij and sell; coloured ICC(0) for the elliptic system) equals the default
  resident run within the solver tolerance, and the steps copy nothing between host and GPU (PETSc's counters).
"""

import numpy as np
import pytest

from conftest import require_gcc, require_gpu
from test_coloured_icc import BOX_2D, CICC, STAR_3D, max_rel_difference, prefixed, rhs, tissue

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("case", [BOX_2D, STAR_3D], ids=["2D-box-30deg", "3D-star"])
@pytest.mark.parametrize("name", ["parabolic", "elliptic"])
@pytest.mark.parametrize("mat_type", ["aij", "sell"])
def test_gpu_coloured_icc_equals_petsc_cg_jacobi(case, name, mat_type):
    require_gpu()
    _, ref = tissue(case, prefixed(name, {"ksp_type": "cg", "pc_type": "jacobi"}), placement="resident")
    r = getattr(ref, name)
    assert "cusparse" in r.A.getType()
    b = rhs(r.A)
    x_ref = b.duplicate()
    x_ref.set(0.0)
    r.ksp.solve(b, x_ref)
    assert r.ksp.getConvergedReason() > 0
    _, tis = tissue(case, prefixed(name, {"ksp_type": "cg", **CICC, "cicc_mat_type": mat_type}),
                    placement="resident")
    s = getattr(tis, name)
    ctx = s.ksp.getPC().getPythonContext()
    assert ctx.gpu and ctx.Ap.getType() == "seqaijcusparse"
    assert ctx.inner.getFactorSolverType() == "cusparse"
    assert s.ksp.getOperators()[0].getType() == ("seqsellcuda" if mat_type == "sell" else "seqaijcusparse")
    x = b.duplicate()
    x.set(0.0)
    s.ksp.solve(b, x)
    assert s.ksp.getConvergedReason() > 0
    assert x.getType() == "seqcuda"
    err = max_rel_difference(x, x_ref, name == "elliptic")
    print(f"\n{name} {case[3]} {mat_type}: CG+Jacobi {r.ksp.getIterationNumber()} its, CG+coloured ICC(0) "
          f"({ctx.colours} colours) {s.ksp.getIterationNumber()} its, max rel. difference {err:.1e}")
    assert err < 1e-7


TECHNIQUES = {
    "gauss-jordan": ["-elliptic_smg_coarse_solve", "gauss-jordan"],
    "parabolic-cicc-aij": ["-parabolic_ksp_type", "cg", "-parabolic_pc_type", "python",
                           "-parabolic_pc_python_type", "cardiosim.solvers.coloured_icc.ColouredICC"],
    "parabolic-cicc-sell": ["-parabolic_ksp_type", "cg", "-parabolic_pc_type", "python",
                            "-parabolic_pc_python_type", "cardiosim.solvers.coloured_icc.ColouredICC",
                            "-parabolic_cicc_mat_type", "sell"],
    "elliptic-cicc-aij": ["-elliptic_ksp_type", "cg", "-elliptic_pc_type", "python",
                          "-elliptic_pc_python_type", "cardiosim.solvers.coloured_icc.ColouredICC"],
}


@pytest.fixture(scope="module")
def default_run(tmp_path_factory):
    require_gpu()
    require_gcc()
    from test_resident_gpu import RESIDENT, run, write_config
    d = tmp_path_factory.mktemp("techniques")
    cfg = write_config(d, "tt06", "bidomain", "2D")
    out, _ = run(d, cfg, "default", RESIDENT)
    return d, cfg, out


@pytest.mark.parametrize("technique", sorted(TECHNIQUES))
def test_resident_bidomain_with_technique_equals_default(default_run, technique):
    from test_resident_gpu import RESIDENT, contents, run, summary
    d, cfg, default = default_run
    log = d / f"{technique}.log"
    out, _ = run(d, cfg, technique, RESIDENT, petsc=[*TECHNIQUES[technique], "-log_view", f":{log}"])
    a, b = contents(default), contents(out)
    assert b["layout"]["placement"] == "resident"
    s = summary(out)
    print(f"\n{technique}: iterations {s['iterations']}, PETSc's copy counters over the steps {s['petsc_log']}")
    for key in a:
        if key == "layout":
            continue
        x, y = a[key], b[key]
        assert np.array_equal(np.isnan(x), np.isnan(y)), key
        diff = float(np.nanmax(np.abs(x - y))) if np.isfinite(x).any() else 0.0
        print(f"  {key:<22} max |{technique} - default| = {diff:.3g}")
        assert diff < 1e-6, key             # both solvers converged to rtol 1e-13 (test_resident_gpu.TIGHT)
    copies = s["petsc_log"]
    assert copies["cpu_to_gpu_copies"] == 0 and copies["gpu_to_cpu_copies"] == 0

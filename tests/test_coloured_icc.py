"""Coloured IC(0) preconditioning (cardiosim.solvers.coloured_icc), host matrices: the colouring is one (no two
coupled nodes share a colour), the permuted matrix is A permuted, and CG with it solves the tissue solver's own
systems (2D box stencil with fibres at 30°, 3D star stencil) to the default solver's answer, with its iteration
counts printed beside CG + Jacobi and CG + cardiosim's multigrid. Also: the multigrid's Gauss–Jordan coarsest
inverse times the coarsest operator is the identity on the complement of the null space.

    python -m pytest -q -s tests/test_coloured_icc.py

The GPU versions (aijcusparse, sellcuda, cuSPARSE factors) are in tests/test_coloured_icc_gpu.py."""

import numpy as np
import pytest
from petsc4py import PETSc

from cardiosim import config
from cardiosim.solvers import coloured_icc, multigrid
from cardiosim.domain.grid import Grid
from cardiosim.tissue import make as make_tissue

from conftest import require_gcc
from test_multigrid import SHEET, dense

CICC = {"pc_type": "python", "pc_python_type": coloured_icc.PYTHON_TYPE}
JACOBI = {"pc_type": "jacobi"}
SMG = {"pc_type": "python", "pc_python_type": multigrid.PYTHON_TYPE}

# (size cm, spacing cm, fibre angle deg, stencil)
BOX_2D = ((0.5, 0.3), 0.01, 30.0, "box")
STAR_3D = ((0.2, 0.12, 0.1), 0.01, 0.0, "star")
STAR_2D = ((0.2, 0.1), 0.01, 0.0, "star")
BOX_3D = ((0.1, 0.08, 0.06), 0.02, 30.0, "box")


def tissue(case, options=None, placement="cpu"):
    """Grid and tissue model (both systems' solvers set up) with PETSc options, as {"elliptic_pc_type": ...}."""
    size, h, fibre, stencil = case
    text = SHEET.format(size=list(size), h=h).replace("fibre_angle = 30.0", f"fibre_angle = {fibre}")
    text = text.replace('stencil = "box"', f'stencil = "{stencil}"')
    if placement == "resident":
        text = text.replace('model = "mitchell-schaeffer"', 'model = "tt06"\nplacement = "resident"\nbackend = "cuda"')
    opts = PETSc.Options()
    options = options or {}
    for k, v in options.items():
        opts[k] = v
    try:
        cfg = config.loads(text)
        grid = Grid(cfg, PETSc.COMM_SELF)
        return grid, make_tissue(grid, cfg, stencil)
    finally:
        for k in options:
            del opts[k]


def prefixed(name, options):
    return {f"{name}_{k}": v for k, v in options.items()}


def rhs(A, seed=3):
    """b = A x for a random x: consistent (b sums to zero where A is singular)."""
    x, b = A.createVecs()
    x.setArray(np.random.default_rng(seed).standard_normal(x.getSize()))
    A.mult(x, b)
    return b


def solve(solver, b):
    x = b.duplicate()
    x.set(0.0)
    solver.ksp.solve(b, x)
    assert solver.ksp.getConvergedReason() > 0, solver.ksp.getConvergedReason()
    return x, solver.ksp.getIterationNumber()


def max_rel_difference(x, ref, singular):
    x, ref = x.getArray().copy(), ref.getArray().copy()
    if singular:                     # defined up to a constant
        x -= x.mean()
        ref -= ref.mean()
    return float(np.abs(x - ref).max() / np.abs(ref).max())


@pytest.mark.parametrize("case,colours", [(BOX_2D, 4), (STAR_3D, 2), (STAR_2D, 2), (BOX_3D, 8)])
@pytest.mark.parametrize("name", ["parabolic", "elliptic"])
def test_permutation_is_a_colouring(case, colours, name):
    grid, tis = tissue(case)
    A = getattr(tis, name).A
    dims = grid.da.getSizes()
    box = coloured_icc.is_box(A, dims)
    assert box == (case[3] == "box")
    col = coloured_icc.colouring(dims, box)
    assert col.max() + 1 == colours
    indptr, cols, vals = A.getValuesCSR()
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    coupled = (rows != cols) & (vals != 0)
    assert coupled.any()
    assert not np.any(col[rows[coupled]] == col[cols[coupled]])       # no two neighbours share a colour
    perm = coloured_icc.permutation(col)
    assert np.array_equal(np.sort(perm), np.arange(len(col)))          # a permutation
    assert np.all(np.diff(col[perm]) >= 0)                             # grouped by colour


@pytest.mark.parametrize("mat_type", ["aij", "sell"])
def test_permuted_matrix_is_a_permuted(mat_type):
    grid, tis = tissue(BOX_2D, {**prefixed("elliptic", CICC), "elliptic_cicc_mat_type": mat_type})
    s = tis.elliptic
    ctx = s.ksp.getPC().getPythonContext()
    assert isinstance(ctx, coloured_icc.ColouredICC) and ctx.colours == 4
    perm = ctx.perm_is.getIndices()
    A = dense(s.A)
    assert np.array_equal(dense(ctx.Ap), A[np.ix_(perm, perm)])
    assert ctx.Ap.getInfo()["nz_used"] == np.count_nonzero(A)       # the explicit zeros left out
    assert ctx.inner.getType() == "icc" and ctx.Ap.getNullSpace().hasConstant()
    op = s.ksp.getOperators()[0]
    assert op.getType() == ("seqsell" if mat_type == "sell" else "seqaij")
    assert s.A.getType() == "seqaij"          # the system's matrix itself is left as it is (a copy is converted)
    assert op.getNullSpace().hasConstant()
    # z = Pᵀ M⁻¹ P r: the scatter permutes and its reverse undoes it
    r = rhs(s.A)
    xp = ctx.xp.duplicate()
    ctx.scatter.scatter(r, xp, PETSc.InsertMode.INSERT_VALUES, PETSc.ScatterMode.FORWARD)
    assert np.array_equal(xp.getArray(), r.getArray()[perm])
    back = r.duplicate()
    ctx.scatter.scatter(xp, back, PETSc.InsertMode.INSERT_VALUES, PETSc.ScatterMode.REVERSE)
    assert np.array_equal(back.getArray(), r.getArray())


@pytest.mark.parametrize("case", [BOX_2D, STAR_3D], ids=["2D-box-30deg", "3D-star"])
def test_cg_with_coloured_icc_gives_the_default_answer(case):
    """CG + coloured ICC(0), aij and sell storage, = the default solver (block Jacobi/ILU, PCMG) to tolerance."""
    _, ref = tissue(case)
    grid = ref.grid
    print(f"\n{'x'.join(map(str, grid.da.getSizes()))} {case[3]} stencil, fibres {case[2]}°, CG iterations "
          f"(zero initial guess, rtol 1e-10):")
    for name in ("parabolic", "elliptic"):
        s = getattr(ref, name)
        b = rhs(s.A)
        x_ref, its_ref = solve(s, b)
        its = {}
        for label, opts in (("jacobi", {"ksp_type": "cg", **JACOBI}), ("stencil MG", {"ksp_type": "cg", **SMG}),
                            ("cICC aij", CICC), ("cICC sell", {**CICC, "cicc_mat_type": "sell"})):
            _, tis = tissue(case, prefixed(name, opts))
            t = getattr(tis, name)
            x, its[label] = solve(t, b)
            err = max_rel_difference(x, x_ref, name == "elliptic")
            assert err < 1e-7, (label, err)
            if label.startswith("cICC"):
                assert t.ksp.getPC().getPythonContext().colours == (2 if case[3] == "star" else 2 ** grid.dim)
        print(f"  {name:<10} default {s.describe():<12} {its_ref:4d}   " +
              "   ".join(f"{k} {v:4d}" for k, v in its.items()))
        assert its["cICC aij"] == its["cICC sell"]             # the storage changes no arithmetic's order... much
        assert its["cICC aij"] < its["jacobi"]                 # a better preconditioner than the diagonal


@pytest.mark.parametrize("system", ["elliptic", "parabolic"])
def test_gauss_jordan_coarse_inverse_times_coarse_operator_is_identity_off_the_null_space(system):
    """G Ac = I on the complement of the null space: I − 11ᵀ/n for the singular elliptic operator, I otherwise."""
    require_gcc()
    grid, tis = tissue(BOX_2D)
    A = getattr(tis, system).A
    singular = system == "elliptic"
    h = multigrid.Hierarchy(A, grid.da.getSizes(), coarse_max=300, singular=singular)
    vc = multigrid.VCycle(h, gpu=False, coarse="gauss-jordan")
    G = vc.coarse_inverse()
    vc.destroy()
    Ac = h.coarse_matrix
    n = Ac.shape[0]
    want = np.eye(n) - (1.0 / n if singular else 0.0)
    err = np.abs(G @ Ac - want).max()
    print(f"\n{system}: coarsest {n} nodes, max |G Ac - I_complement| = {err:.1e}")
    assert err < 1e-9
    assert np.abs(Ac @ G - want).max() < 1e-9


def test_cpu_bidomain_run_with_coloured_icc_equals_default(tmp_path):
    """`cardiosim run` (cpu placement, 33 × 17 bidomain sheet, TT06) with coloured ICC(0) for both systems, sell
    storage for the parabolic one, equals the default run (block Jacobi/ILU, PCMG) within the solver tolerance."""
    require_gcc()
    from test_resident_gpu import CPU, contents, run, summary, write_config
    cfg = write_config(tmp_path, "tt06", "bidomain", "2D", duration=2.0)
    default, _ = run(tmp_path, cfg, "default", CPU)
    cicc = ["-parabolic_pc_type", "python", "-parabolic_pc_python_type", coloured_icc.PYTHON_TYPE,
            "-parabolic_cicc_mat_type", "sell",
            "-elliptic_pc_type", "python", "-elliptic_pc_python_type", coloured_icc.PYTHON_TYPE]
    out, _ = run(tmp_path, cfg, "cicc", CPU, petsc=cicc)
    a, b = contents(default), contents(out)
    assert a["Vm"][-1].max() > 0.0            # the wave started
    print(f"\niterations: default {summary(default)['iterations']}, coloured ICC {summary(out)['iterations']}")
    for key in a:
        if key != "layout":
            diff = float(np.nanmax(np.abs(a[key] - b[key]))) if np.isfinite(a[key]).any() else 0.0
            print(f"  {key:<22} max |coloured ICC - default| = {diff:.3g}")
            assert diff < 1e-6, key

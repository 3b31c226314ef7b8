"""Tissue-only work in cardiosim's stencil solvers (kernels/stencil_mg.cpp "Active nodes",
docs/decisions/0031-tissue-only-stencil-solves.md): on a masked grid every loop of the V-cycle and of CG visits each
level's active nodes only, and the solves equal the box's — the same iteration counts and, on the host build
(whose sums over a list run in the box's order, its other nodes adding zeros), the same bits. 2D (a ring, box
stencil) and 3D (an LV-like shell, star stencil), the elliptic and parabolic systems, one rank and 2 or 3 (split
and root layouts), and a whole run with the solvers forced by options. The script: tests/masked_solve.py."""

import numpy as np
import pytest

from conftest import require_gcc, run_cli
from test_mask import anatomy, anatomy_results, assert_anatomy_agrees
from test_solvers_ranks import ranks_solve

from pathlib import Path

SCRIPT = Path(__file__).parent / "masked_solve.py"
RING = ["--dim", "2", "--h", "0.02"]
SHELL = ["--dim", "3", "--h", "0.1"]


@pytest.fixture(scope="module", autouse=True)
def _compiler():
    require_gcc()


def _prolongation(sizes, tables) -> np.ndarray:
    """P = P_z ⊗ P_y ⊗ P_x, dense, natural order (x fastest), from the V-cycle's tables."""
    P = np.ones((1, 1))
    for n, t in zip(sizes, tables):
        Pd = np.zeros((n, len(t["pos"])))
        Pd[np.arange(n), t["c0"]] += t["w0"]
        Pd[np.arange(n), t["c1"]] += t["w1"]
        P = np.kron(Pd, P)
    return P


@pytest.mark.parametrize("system", ["elliptic", "parabolic"])
def test_hierarchy_of_a_masked_grid_decouples_every_inactive_node(petsc, tmp_path, system):
    """The rule the exactness rests on, level by level (a 2D ring, box stencil, coarsened to 5 levels): level 0's
    active nodes are the tissue; a coarse level's are those whose interpolation support (P's column) holds an
    active finer node; an inactive node's row is its diagonal alone, no active row reads it; the lumped operator
    is the Galerkin product plus a positive semi-definite part, symmetric, and differs from it only in rows or
    columns of inactive nodes and on the diagonal."""
    from cardiosim import config
    from cardiosim.domain.grid import Grid
    from cardiosim.solvers import galerkin, multigrid
    from cardiosim.tissue import make as make_tissue
    from masked_solve import CONFIG, labels
    size, lab = labels(2, 0.04)
    np.save(tmp_path / "ring.npy", lab)
    o = petsc.Options()
    o[f"{system}_pc_type"] = "python"
    o[f"{system}_pc_python_type"] = multigrid.PYTHON_TYPE
    try:
        cfg = config.loads(CONFIG.format(size=size, h=0.04, stencil="box", labels=tmp_path / "ring.npy"))
        grid = Grid(cfg, petsc.COMM_SELF)
        A = getattr(make_tissue(grid, cfg, "box"), system).A
    finally:
        del o[f"{system}_pc_type"], o[f"{system}_pc_python_type"]
    h = multigrid.Hierarchy(A, grid.da.getSizes(), coarse_max=20)
    assert h.levels >= 4 and h.active is not None
    assert np.array_equal(h.active[0].ravel(), grid.mask.tissue.ravel())
    dense = galerkin.dense(galerkin.of_matrix(A, multigrid.Boxes.whole(h.sizes[0]), 0), h.sizes[0])
    for l in range(h.levels):
        act = h.active[l].ravel()
        if l > 0:
            P = _prolongation(h.sizes[l - 1], h.transfers[l - 1])
            assert np.array_equal(act, (P != 0).T @ h.active[l - 1].ravel() > 0)
            galerkin_op = P.T @ dense @ P
            sym = lambda M: 0.5 * (M + M.T)
            dense = galerkin.dense(galerkin.Stencil.of(_whole_27(h, l)), h.sizes[l])
            extra = sym(dense - galerkin_op)
            assert np.linalg.eigvalsh(extra).min() > -1e-12 * np.abs(dense).max()
            keep = np.outer(act, act) & ~np.eye(len(act), dtype=bool)
            assert np.allclose(dense[keep], galerkin_op[keep], rtol=1e-12, atol=1e-15 * np.abs(dense).max())
        off = dense - np.diag(np.diag(dense))
        assert not off[~act].any() and not off[:, ~act].any()       # inactive: a diagonal alone, read by no one
        assert (np.diag(dense)[~act] > 0).all()
    assert h.active[-1].mean() > h.active[0].mean()


def test_the_vcycle_does_not_amplify_a_pieces_constant(petsc, tmp_path):
    """On a masked grid the coarsest operator's modes of the fine null space (a constant per piece of tissue) are
    not null but ~1e-6 of its largest eigenvalue (the outside rows' diagonal, lumped onto the tissue's border): the
    pseudo-inverse leaves them out by count (Hierarchy.eig_inverse). Inverted, they made the V-cycle map the
    piece's constant to 2.6e5 times itself, and CG + V-cycle stop as indefinite on a right-hand side with noise of
    1e-14 (the 2D ring; a GPU's product of A x had that much)."""
    from cardiosim import config
    from cardiosim.domain.grid import Grid
    from cardiosim.solvers import krylov, multigrid
    from cardiosim.tissue import make as make_tissue
    from masked_solve import CONFIG, labels
    size, lab = labels(2, 0.02)
    np.save(tmp_path / "ring.npy", lab)
    o = petsc.Options()
    mine = {"elliptic_ksp_type": "python", "elliptic_ksp_python_type": krylov.PYTHON_TYPE,
            "elliptic_pc_type": "python", "elliptic_pc_python_type": multigrid.PYTHON_TYPE}
    for k, v in mine.items():
        o[k] = v
    try:
        cfg = config.loads(CONFIG.format(size=size, h=0.02, stencil="box", labels=tmp_path / "ring.npy"))
        grid = Grid(cfg, petsc.COMM_SELF)
        s = make_tissue(grid, cfg, "box").elliptic
    finally:
        for k in mine:
            del o[k]
    inside = ~grid.mask.outside()
    n, z = s.A.createVecs()
    n.getArray()[:] = np.where(inside, 1.0, 0.0)
    n.normalize()
    s.ksp.getPC().apply(n, z)
    assert z.norm() < 10.0, z.norm()
    x, b = s.A.createVecs()
    xyz = grid.coords()
    x.setArray(np.where(inside, np.sin(3.0 * xyz[:, 0]) * np.cos(2.0 * xyz[:, 1]), 0.0))
    s.A.mult(x, b)
    noise = 1e-14 * np.abs(b.getArray()).max() * np.random.default_rng(0).standard_normal(len(inside))
    b.getArray()[:] += np.where(inside, noise, 0.0)
    x.set(0.0)
    s.ksp.solve(b, x)
    assert s.ksp.getConvergedReason() > 0 and s.ksp.getIterationNumber() <= 10, \
        (s.ksp.getConvergedReason(), s.ksp.getIterationNumber())


def _whole_27(h, l):
    """Level l's stencil rows of a one-rank hierarchy as 27 codes (2D: the z = 0 layer's 9 in the middle)."""
    S = np.zeros((27, h.stencils[l].shape[1]))
    if h.dim == 3:
        return h.stencils[l]
    S[9:18] = h.stencils[l]
    return S


def same_as_box(r: dict) -> None:
    """Active loops against the box's on the same ranks: the same iterations and solution (bit for bit, here)."""
    assert r["reason_on"] == r["reason_off"] and r["reason_on"] > 0
    assert r["its_on"] == r["its_off"]
    assert r["on_off"] <= 1e-12
    assert r["share"][0] < 0.5                # the lists are in force: the tissue is a third of the box or less


def solve(n: int, args: list[str]) -> dict:
    return ranks_solve(n, args, script=SCRIPT)


@pytest.mark.parametrize("grid", [RING, SHELL], ids=["2d-ring", "3d-shell"])
@pytest.mark.parametrize("system,pc", [("elliptic", "mg"), ("parabolic", "mg"), ("parabolic", "jacobi"),
                                       ("elliptic", "petsc-cg-mg")])
@pytest.mark.slow
def test_active_solve_equals_the_box_on_one_rank(grid, system, pc):
    r = solve(1, [*grid, "--system", system, "--pc", pc])
    same_as_box(r)
    assert abs(r["share"][0] - r["tissue_share"]) < 1e-12      # level 0's active nodes are the tissue
    if pc != "jacobi":
        assert all(a <= b for a, b in zip(r["share"], r["share"][1:]))   # coarser levels: the support grows


@pytest.mark.mpi
@pytest.mark.parametrize("n,grid,system,layout", [
    (2, SHELL, "elliptic", "ranks"), (3, SHELL, "parabolic", "ranks"), (3, RING, "elliptic", "ranks"),
    (2, RING, "parabolic", "ranks"), (2, SHELL, "elliptic", "root"), (3, RING, "elliptic", "root")])
@pytest.mark.slow
def test_active_solve_equals_the_box_on_ranks(n, grid, system, layout):
    """Each rank's box has its own lists (a rank may hold little tissue or none), the top level's serial tail on
    rank 0 its own; with the exact smoother over the ranks (halo per colour) also one rank's solution."""
    r = solve(n, [*grid, "--system", system, "--pc", "mg", "--layout", layout, "--halo", "colour"])
    same_as_box(r)
    assert r["its_on"] == r["its_1"] and r["vs_1"] < 1e-7


@pytest.mark.parametrize("n", [1, pytest.param(2, marks=pytest.mark.mpi)])
@pytest.mark.parametrize("grid", [RING, SHELL], ids=["2d-ring", "3d-shell"])
@pytest.mark.slow
def test_active_solve_equals_the_box_under_jacobi(n, grid):
    """Jacobi on every level, level 0 swept twice (the GPU's default on a masked grid): the box's visit solves the
    rows outside the tissue in one sweep (multigrid.jacobi_weights), as SOR does, so it leaves them what the
    tissue's visit leaves them, and the two give the same iterates."""
    r = solve(n, [*grid, "--system", "elliptic", "--pc", "mg", "--jacobi-from", "0", "--finest-sweeps", "2",
                  "--halo", "colour"])
    same_as_box(r)


@pytest.mark.mpi
@pytest.mark.slow
def test_active_jacobi_cg_on_ranks():
    r = solve(2, [*SHELL, "--system", "parabolic", "--pc", "jacobi"])
    same_as_box(r)


@pytest.mark.slow
def test_outside_residual_is_solved_at_once():
    """A first guess that leaves a residual outside the tissue: the box solve carries it through its iterations,
    the active solve solves those rows (a diagonal each) at the start. Not the same iterates, the same solution to
    the tolerance."""
    r = solve(1, [*SHELL, "--system", "elliptic", "--pc", "mg", "--outside"])
    assert r["reason_on"] > 0 and r["on_off"] < 1e-9


@pytest.mark.slow
@pytest.mark.parametrize("np_", [1, pytest.param(2, marks=pytest.mark.mpi)], ids=["1-rank", "2-ranks"])
def test_run_with_active_loops_equals_the_box(tmp_path, np_):
    """A whole bidomain run of a masked anatomy (TT06 cells, two labels) with cardiosim's stencil solvers forced by
    options on the cpu placement: the same fields, probes, ECG and activation map with the active loops as with
    every node visited, bit for bit (2 ranks: the split layout, boxes balanced by tissue)."""
    cfg = anatomy(tmp_path, duration=6.0)
    ours = []
    for name in ("parabolic", "elliptic"):
        ours += [f"-{name}_ksp_type", "python", f"-{name}_ksp_python_type", "cardiosim.solvers.krylov.StencilCG",
                 f"-{name}_pc_type", "python", f"-{name}_pc_python_type", "cardiosim.solvers.multigrid.StencilMG",
                 f"-{name}_smg_coarse_max", "64"]
    out = {}
    for active in ("true", "false"):
        h5 = tmp_path / f"{active}.h5"
        proc = run_cli(["run", cfg, "--output", h5, "--quiet", "--set", 'cell.backend="numpy"', "--",
                        *ours, "-elliptic_smg_active", active, "-parabolic_smg_active", active,
                        "-elliptic_smg_layout", "ranks", "-parabolic_smg_layout", "ranks"], np=np_)
        assert proc.returncode == 0, proc.stderr
        out[active] = anatomy_results(h5)
    assert np.nanmax(out["true"]["activation"]) > 0
    assert_anatomy_agrees(out["true"], out["false"], 1e-12, f"active vs box, {np_} rank(s)")

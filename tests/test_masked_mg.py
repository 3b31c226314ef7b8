"""Tissue-only work in cardiosim's stencil solvers (issue 27; kernels/stencil_mg.cpp "Active nodes",
docs/decisions.md "Tissue-only stencil solves"): on a masked grid every loop of the V-cycle and of CG visits each
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
def test_active_solve_equals_the_box_on_ranks(n, grid, system, layout):
    """Each rank's box has its own lists (a rank may hold little tissue or none), the top level's serial tail on
    rank 0 its own; with the exact smoother over the ranks (halo per colour) also one rank's solution."""
    r = solve(n, [*grid, "--system", system, "--pc", "mg", "--layout", layout, "--halo", "colour"])
    same_as_box(r)
    assert r["its_on"] == r["its_1"] and r["vs_1"] < 1e-7


@pytest.mark.mpi
def test_active_jacobi_cg_on_ranks():
    r = solve(2, [*SHELL, "--system", "parabolic", "--pc", "jacobi"])
    same_as_box(r)


def test_outside_residual_is_solved_at_once():
    """A first guess that leaves a residual outside the tissue: the box solve carries it through its iterations,
    the active solve solves those rows (a diagonal each) at the start. Not the same iterates, the same solution to
    the tolerance."""
    r = solve(1, [*SHELL, "--system", "elliptic", "--pc", "mg", "--outside"])
    assert r["reason_on"] > 0 and r["on_off"] < 1e-9


@pytest.mark.slow
def test_run_with_active_loops_equals_the_box(tmp_path):
    """A whole bidomain run of a masked anatomy (TT06 cells, two labels) with cardiosim's stencil solvers forced by
    options on the cpu placement: the same fields, probes, ECG and activation map with the active loops as with
    every node visited."""
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
                        "-elliptic_ksp_view", "-parabolic_ksp_view"])
        assert proc.returncode == 0, proc.stderr
        out[active] = anatomy_results(h5)
    assert np.nanmax(out["true"]["activation"]) > 0
    assert_anatomy_agrees(out["true"], out["false"], 1e-12, "active vs box")

"""cardiosim's stencil solvers on several ranks (cardiosim.solvers: StencilCG, StencilMG; the host build of
kernels/stencil_mg.cpp, as CI has no GPU) against the same solve on one rank: the same converged reason, iteration
counts within one, solutions within the solver tolerance. On 2 and 3 ranks (a 3-rank split has boxes of unequal
sizes and odd origins: the multicolour smoother's colours must follow the global index), 2D box stencil with
rotated fibres and 3D star stencil, parabolic (Jacobi) and elliptic (multigrid: levels split over the ranks with
halo exchanges, the coarse ones gathered onto rank 0), the "root" layout (the whole solve on rank 0), and PETSc's
own KSPCG with our V-cycle as its preconditioner. The GPU build: tests/test_solvers_ranks_gpu.py."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_gcc, require_mpirun

SCRIPT = Path(__file__).parent / "ranks_solve.py"
PRODUCT = Path(__file__).parent / "ranks_product.py"     # StencilProduct against PETSc's MatMult
SHEET_2D = ["--size", "0.5", "0.3", "--h", "0.01", "--stencil", "box", "--fibre", "30"]
SLAB_3D = ["--size", "0.2", "0.12", "0.1", "--h", "0.01", "--stencil", "star", "--fibre", "0"]


def ranks_solve(n: int, args: list[str], timeout: int = 300, script: Path = SCRIPT) -> dict:
    require_gcc()
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    cmd = [require_mpirun(), "-n", str(n), sys.executable, str(script), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1]
    out = json.loads(line)
    print(f"\n{n} ranks {' '.join(args)}: {out}")
    return out


def agree(r: dict, tol: float = 1e-7) -> None:
    assert r["reason"] == r["reason_1"] and r["reason"] > 0
    assert abs(r["its"] - r["its_1"]) <= 1
    assert r["max_rel_diff"] < tol


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("grid", [SHEET_2D, SLAB_3D], ids=["2d-box", "3d-star"])
@pytest.mark.parametrize("system,pc", [("parabolic", "jacobi"), ("elliptic", "mg")])
def test_stencil_cg_on_ranks_equals_one_rank(n, grid, system, pc):
    r = ranks_solve(n, [*grid, "--system", system, "--pc", pc, "--layout", "ranks", "--agglomerate", "64"])
    agree(r)
    assert r["exchanges"] > 0                 # the halo path ran
    if pc == "mg":
        assert r["gathers"] > 0               # and the coarse levels went to rank 0


@pytest.mark.mpi
def test_four_ranks_in_a_square_exchange_corners():
    """A 2 x 2 process grid: the box stencil's diagonal neighbours arrive through the dimension-by-dimension
    exchange (the y phase sends the x ghosts along)."""
    r = ranks_solve(4, [*SHEET_2D, "--system", "elliptic", "--pc", "mg", "--agglomerate", "16"])
    assert r["procs"] == [2, 2]
    agree(r)


@pytest.mark.mpi
@pytest.mark.parametrize("grid", [SHEET_2D, SLAB_3D], ids=["2d-box", "3d-star"])
def test_halo_per_sweep_costs_at_most_one_iteration(grid):
    """smg_halo sweep: the hybrid smoother (ghosts of a sweep's start) converges as the exact one, ±1 iteration,
    with a quarter of the exchanges in 3D."""
    r = ranks_solve(3, [*grid, "--system", "elliptic", "--pc", "mg", "--agglomerate", "64", "--halo", "sweep"])
    agree(r)
    exact = ranks_solve(3, [*grid, "--system", "elliptic", "--pc", "mg", "--agglomerate", "64"])
    assert r["exchanges"] < exact["exchanges"]


@pytest.mark.mpi
@pytest.mark.parametrize("system,pc,ksp", [("elliptic", "mg", "stencil"), ("parabolic", "jacobi", "stencil"),
                                           ("elliptic", "mg", "petsc")])
def test_root_layout_solves_on_rank_zero_alone(system, pc, ksp):
    """The whole solve gathered onto rank 0 (the serial CG there, or PETSc's CG with our V-cycle applied on rank 0
    to gathered vectors)."""
    r = ranks_solve(2, [*SHEET_2D, "--system", system, "--pc", pc, "--layout", "root", "--ksp", ksp])
    agree(r, 1e-12 if ksp == "stencil" else 1e-7)
    if ksp == "stencil":
        assert r["its"] == r["its_1"]         # the serial solver itself, on gathered vectors
        assert r["exchanges"] == 0 and r["why"].startswith("whole on rank 0")


@pytest.mark.mpi
@pytest.mark.parametrize("n,grid,system,jf,finest", [(2, SHEET_2D, "elliptic", 1, 0), (3, SLAB_3D, "parabolic", 1, 0),
                                                     (2, SLAB_3D, "elliptic", 0, 2)])
def test_jacobi_coarse_levels_on_ranks_equal_one_rank(n, grid, system, jf, finest):
    """smg_jacobi_from 1: the coarse levels smoothed by Jacobi, which a decomposition cannot change (the halo is
    exchanged before each sweep's residual), on the split levels and rank 0's tail alike; from level 0 with two
    sweeps there (smg_finest_sweeps, a masked grid's GPU default)."""
    r = ranks_solve(n, [*grid, "--system", system, "--pc", "mg", "--agglomerate", "64", "--jacobi-from", str(jf),
                        "--finest-sweeps", str(finest)])
    agree(r)
    assert r["exchanges"] > 0 and r["gathers"] > 0


@pytest.mark.mpi
def test_unpreconditioned_cg_on_ranks():
    r = ranks_solve(3, [*SLAB_3D, "--system", "parabolic", "--pc", "none", "--layout", "ranks"])
    agree(r)
    assert r["exchanges"] > 0


@pytest.mark.mpi
def test_petsc_cg_with_our_vcycle_on_ranks():
    """The V-cycle as a PETSc preconditioner on several ranks (smg_apply: owned vectors in, owned vectors out)."""
    r = ranks_solve(3, [*SLAB_3D, "--system", "elliptic", "--pc", "mg", "--ksp", "petsc", "--agglomerate", "32"])
    agree(r)


STENCIL = [f"-{s}_{k}" if i % 2 == 0 else k for s in ("parabolic", "elliptic")
           for i, k in enumerate(["ksp_type", "python", "ksp_python_type", "cardiosim.solvers.krylov.StencilCG",
                                  "pc_type", "python", "pc_python_type", "cardiosim.solvers.multigrid.StencilMG",
                                  "smg_layout", "ranks", "smg_agglomerate", "64"])]
TIGHT = ["-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"]


@pytest.mark.mpi
@pytest.mark.parametrize("case", ["sheet", "anatomy"])
def test_whole_run_with_stencil_solvers_on_two_ranks_equals_one_rank(tmp_path, case):
    """A bidomain run on 2 ranks with cardiosim's solvers split over the ranks (both systems: CG + the V-cycle)
    equals one rank with PETSc's default solvers, within the solver tolerance: the 2D sheet with rotated fibres,
    and the masked anatomy (a mask, a cell region, the ECG; tests/test_mask.py), whose second rank holds no
    tissue."""
    import h5py
    import numpy as np
    from conftest import run_cli
    from test_mask import anatomy, anatomy_results, assert_anatomy_agrees
    cfg = Path(__file__).parent / "configs" / "sheet.toml" if case == "sheet" else anatomy(tmp_path)
    common = ["--quiet", "--set", 'cell.backend="numpy"'] + (["--set", "simulation.duration=6.0"] if case == "sheet"
                                                            else [])
    out = {}
    for tag, np_, extra in (("one", 1, []), ("two", 2, STENCIL)):
        out[tag] = tmp_path / f"{tag}.h5"
        proc = run_cli(["run", cfg, "--output", out[tag], *common, "--", *TIGHT, *extra], np=np_)
        assert proc.returncode == 0, proc.stdout + proc.stderr
    if case == "anatomy":
        assert_anatomy_agrees(anatomy_results(out["one"]), anatomy_results(out["two"]), 1e-6, "2 ranks vs 1")
        return
    with h5py.File(out["one"]) as a, h5py.File(out["two"]) as b:
        assert a["fields/Vm"][-1].max() > 0.0
        for f in ("Vm", "phi_e"):
            d = float(np.abs(a["fields"][f][:] - b["fields"][f][:]).max())
            print(f"{f}: max |2 ranks (stencil solvers) - 1 rank| = {d:.3g} mV")
            assert d < 1e-6


@pytest.mark.mpi
@pytest.mark.parametrize("option, value, allowed", [("smg_layout", "everywhere", "auto, ranks, root"),
                                                     ("smg_transport", "pigeon", "auto, mpi-host, ipc"),
                                                     ("smg_halo", "never", "sweep, colour")])
def test_a_bad_solver_option_is_one_line_on_two_ranks(tmp_path, option, value, allowed):
    from conftest import run_cli
    out = tmp_path / "bad.h5"
    proc = run_cli(["run", Path(__file__).parent / "configs" / "sheet.toml", "--output", out, "--quiet", "--",
                    *STENCIL, f"-elliptic_{option}", value], np=2, timeout=120)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cardiosim: error: PETSc options for -elliptic_*: ")
    assert lines[0].endswith(f"{option} = '{value}'; allowed: {allowed}")
    assert "Traceback" not in proc.stderr and not out.exists()


STENCIL_SOLVERS = [a for s in ("parabolic", "elliptic") for a in (
    f"-{s}_ksp_type", "python", f"-{s}_ksp_python_type", "cardiosim.solvers.krylov.StencilCG",
    f"-{s}_pc_type", "python", f"-{s}_pc_python_type", "cardiosim.solvers.multigrid.StencilMG")]


@pytest.mark.mpi
@pytest.mark.parametrize("n", [1, 2])
def test_masked_anatomy_with_the_stencil_solvers_equals_petscs(tmp_path, n):
    """The masked anatomy (two pieces of φe's null space are possible: one constant per piece of tissue) with
    cardiosim's CG + multigrid, on 1 rank and split over 2, against PETSc's default solvers: the coarsest operator is
    singular there too, and must be pseudo-inverted (it once was inverted, dividing by round-off)."""
    import numpy as np
    from conftest import run_cli
    from test_mask import anatomy, anatomy_results
    require_gcc()
    cfg = anatomy(tmp_path, duration=1.0)
    ref = tmp_path / "ref.h5"
    run_cli(["run", cfg, "--output", ref, "--quiet", "--", "-elliptic_ksp_rtol", "1e-13"], check=True)
    out = tmp_path / "own.h5"
    layout = ["-elliptic_smg_layout", "ranks", "-parabolic_smg_layout", "ranks", "-elliptic_smg_agglomerate", "64"]
    run_cli(["run", cfg, "--output", out, "--quiet", "--", "-elliptic_ksp_rtol", "1e-13", *STENCIL_SOLVERS,
             *(layout if n > 1 else [])], np=n, check=True)
    a, b = anatomy_results(ref), anatomy_results(out)
    for key in a:
        assert np.nanmax(np.abs(a[key] - b[key])) < 1e-6, key


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("grid", [SHEET_2D[:-2], SLAB_3D[:-2]], ids=["2d-box", "3d-star"])
def test_stencil_product_on_ranks_equals_matmult(n, grid):
    """The right-hand sides' matrix product through the stencil library's seam equals PETSc's MatMult of K_i to
    round-off (another summation order), the halo exchanged once; so does a whole right-hand side in one pass
    (α d∘x − K_i(βx + γw), and −K_i x), against PETSc's product and vector operations."""
    r = ranks_solve(n, grid, script=PRODUCT)
    assert r["max_rel_diff"] < 1e-13
    assert max(r["combine_max_rel_diff"]) < 1e-13 and r["deflate_max_rel_diff"] < 1e-13
    assert r["exchanges"] == 3 and r["procs"][0] == n

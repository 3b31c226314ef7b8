"""With cardiosim's stencil solvers the tissue models hand them stencil matrices (cardiosim.solvers.stencil_matrix:
the operator as its stencil, no assembled matrix), and those stencils equal the matrices PETSc's solvers get
(galerkin.from_csr of their CSR) exactly, code by code, on 1 and 2 ranks: monodomain and bidomain, 1D, 2D and 3D,
star and box, Crank–Nicolson and backward Euler, the masked anatomy (one diagonal outside the tissue); they are the
ones the multigrid takes; and with PETSc's solvers the matrices are assembled, with nothing attached (the stencil
would hold the rows' memory for nothing)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conftest import require_mpirun

SCRIPT = r'''
import sys
import numpy as np
import petsc4py
path, stencil, solvers, overrides = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ours = [f"-{s}_{k}" if i % 2 == 0 else k for s in ("parabolic", "elliptic")
        for i, k in enumerate(["ksp_type", "python", "ksp_python_type", "cardiosim.solvers.krylov.StencilCG",
                               "pc_type", "python", "pc_python_type", "cardiosim.solvers.multigrid.StencilMG"])]
petsc4py.init(sys.argv[:1] + ["-no_signal_handler"] + (ours if solvers == "ours" else []))
from petsc4py import PETSc
from cardiosim import config, tissue
from cardiosim.domain.grid import Grid
from cardiosim.solvers import galerkin, stencil_matrix
from cardiosim.solvers.comm import Boxes

cfg = config.load(path, overrides)
grid = Grid(cfg)
model = tissue.make(grid, cfg, stencil)
rank = grid.da.getComm().getRank()
if solvers == "ours":                   # the reference: the same systems assembled, for PETSc's solvers
    for key in ours[::2]:
        PETSc.Options().delValue(key)
    ref = {s.name: s for s in tissue.make(grid, cfg, stencil).solvers()}
for s in model.solvers():
    held = s.A.getAttr("cardiosim.stencil")
    if solvers == "petsc":
        assert held is None, f"{s.name}: a stencil attached for PETSc's solvers"
        assert stencil_matrix.is_stencil_matrix(s.A) is False, s.name
        print(f"rank {rank}: {s.name} none attached")
        continue
    assert stencil_matrix.is_stencil_matrix(s.A), f"{s.name}: {s.A.getType()}, not a stencil matrix"
    assert held is not None, f"{s.name}: no stencil held"
    got = galerkin.of_matrix(s.A, Boxes.of_dmda(grid.da), rank)
    assert got is held[1]
    want = galerkin.from_csr(ref[s.name].A.getValuesCSR(), Boxes.of_dmda(grid.da), rank)
    assert np.array_equal(got.codes, want.codes), (s.name, got.codes, want.codes)
    assert np.array_equal(got.S[want.codes], want.S[want.codes]), (s.name, np.abs(got.S - want.S).max())
    d = s.A.getDiagonal()               # PCJACOBI's, from the stencil
    assert np.array_equal(d.getArray(), ref[s.name].A.getDiagonal().getArray()), s.name
    print(f"rank {rank}: {s.name} {len(got.codes)} codes, equal")
'''

SHEET = """
[simulation]
equations = "{equations}"
duration = 0.1
dt = 0.05
time_scheme = "{scheme}"
[grid]
size = {size}
spacing = 0.05
[tissue]
chi = 1400.0
Cm = 1.0
sigma_il = 2.65
sigma_it = 0.68
sigma_el = 6.25
sigma_et = 2.36
fibre_angle = {angle}
[cell]
model = "mitchell-schaeffer"
"""


def _check(tmp_path, cfg: Path, stencil: str, ranks: int, solvers: str = "ours"):
    script = tmp_path / "attached_check.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, str(script), str(cfg), stencil, solvers]
    if ranks > 1:
        cmd = [require_mpirun(), "-n", str(ranks), *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=cfg.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


CASES = [("bidomain", "crank-nicolson", "[0.6]", 0.0, "star"),       # a 1D grid's 3 codes: the middle row's
         ("monodomain", "backward-euler", "[0.6]", 0.0, "star"),
         ("bidomain", "crank-nicolson", "[0.6, 0.4]", 30.0, "box"),
         ("bidomain", "backward-euler", "[0.6, 0.4]", 0.0, "star"),
         ("monodomain", "crank-nicolson", "[0.3, 0.2, 0.2]", 0.0, "star"),
         ("bidomain", "crank-nicolson", "[0.3, 0.2, 0.2]", 20.0, "box")]


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
@pytest.mark.parametrize("equations, scheme, size, angle, stencil", CASES)
def test_attached_stencils_equal_the_matrices(tmp_path, ranks, equations, scheme, size, angle, stencil):
    cfg = tmp_path / "sheet.toml"
    cfg.write_text(SHEET.format(equations=equations, scheme=scheme, size=size, angle=angle))
    out = _check(tmp_path, cfg, stencil, ranks)
    assert out.count("equal") == ranks * (2 if equations == "bidomain" else 1), out


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
def test_attached_stencils_of_the_masked_anatomy(tmp_path, ranks):
    from test_mask import anatomy
    out = _check(tmp_path, anatomy(tmp_path), "star", ranks)
    assert out.count("equal") == 2 * ranks, out


def test_nothing_is_attached_for_petscs_solvers(tmp_path):
    cfg = tmp_path / "sheet.toml"
    cfg.write_text(SHEET.format(equations="bidomain", scheme="crank-nicolson", size="[0.6, 0.4]", angle=0.0))
    out = _check(tmp_path, cfg, "star", 1, solvers="petsc")
    assert out.count("none attached") == 2, out


def test_which_solvers_read_stencils(petsc):
    """The GPU defaults (cardiosim's CG, with Jacobi or the V-cycle) do; PETSc's CG with its preconditioners does
    not."""
    from cardiosim.solvers import linear
    assert linear.stencil_solver("parabolic", {**linear.PARABOLIC_DEFAULTS, **linear.STENCIL_CG, "pc_type": "jacobi"})
    assert linear.stencil_solver("elliptic", {**linear.ELLIPTIC_DEFAULTS, **linear.STENCIL_CG, **linear.STENCIL_MG})
    assert not linear.stencil_solver("parabolic", linear.PARABOLIC_DEFAULTS)
    assert not linear.stencil_solver("elliptic", {**linear.ELLIPTIC_DEFAULTS, "pc_type": "gamg"})


def test_a_cable_with_the_stencil_solvers_equals_petscs(tmp_path):
    """A 1D cable stepped by cardiosim's CG (the GPU's default, here on the host) and by PETSc's: the same Vm to the
    solvers' tolerance (a 1D grid's attached stencil once put its neighbours on the row below, and the first solve
    gave NaN)."""
    import h5py
    import numpy as np
    from conftest import ROOT, run_cli
    ours = ["-parabolic_ksp_type", "python", "-parabolic_ksp_python_type", "cardiosim.solvers.krylov.StencilCG",
            "-parabolic_pc_type", "jacobi"]
    out = {}
    for name, opts in (("petsc", []), ("ours", ours)):
        out[name] = tmp_path / f"{name}.h5"
        run_cli(["run", ROOT / "tests" / "configs" / "cable.toml", "--quiet", "--output", out[name], "--",
                 "-parabolic_ksp_rtol", "1e-12", *opts], check=True)
    with h5py.File(out["petsc"]) as a, h5py.File(out["ours"]) as b:
        x, y = a["fields/Vm"][...], b["fields/Vm"][...]
    assert np.isfinite(y).all() and np.abs(x - y).max() < 1e-6 * np.abs(x).max()

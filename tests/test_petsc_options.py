"""PETSc options (cardiosim/runtime/petsc.py): the user's options win, our defaults leave the database once the
solvers are set up, and an option from the command line that nothing read is bad input (one line, exit 2, no file).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from conftest import run_cli

SHEET = Path(__file__).parent / "configs" / "sheet.toml"
SHORT = ["--quiet", "--set", "simulation.duration=0.2"]

# (case, extra --set, PETSc options, words the one line must hold)
UNUSED = [
    ("misspelt option", [], ["-elliptic_pc_typo", "gamg"], ["-elliptic_pc_typo", "not used"]),
    ("misspelt prefix", [], ["-eliptic_pc_type", "gamg"], ["-eliptic_pc_type", "-elliptic_*"]),
    ("misspelt prefix of a viewer", [], ["-eliptic_ksp_view"], ["-eliptic_ksp_view"]),
    ("a solver this run does not have", ["--set", 'simulation.equations="monodomain"'],
     ["-elliptic_pc_type", "gamg"], ["-elliptic_pc_type", "-parabolic_*"]),
    ("two unused options", [], ["-parabolic_ksp_rtl", "1e-8", "-foo"], ["-parabolic_ksp_rtl, -foo", "were"]),
]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("case,sets,petsc,words", UNUSED, ids=[c[0] for c in UNUSED])
def test_unused_petsc_option_is_one_line(tmp_path, case, sets, petsc, words):
    out = tmp_path / "out.h5"
    proc = run_cli(["run", SHEET, "--output", out, *SHORT, *sets, "--", *petsc], cwd=tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    print(f"{case}: {lines}")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(lines) == 1 and "Traceback" not in proc.stderr + proc.stdout
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == []      # no output, checkpoint, sidecar or summary


def test_unused_option_leaves_an_existing_output_alone(tmp_path):
    out = tmp_path / "out.h5"
    run_cli(["run", SHEET, "--output", out, *SHORT], check=True)
    before = {p.name: _digest(p) for p in tmp_path.iterdir()}
    proc = run_cli(["run", SHEET, "--output", out, *SHORT, "--overwrite", "--", "-elliptic_pc_typo", "gamg"])
    assert proc.returncode == 2, proc.stderr
    assert {p.name: _digest(p) for p in tmp_path.iterdir()} == before


@pytest.mark.mpi
def test_unused_option_under_mpirun_is_one_line(tmp_path):
    proc = run_cli(["run", SHEET, "--output", tmp_path / "out.h5", *SHORT, "--", "-elliptic_pc_typo", "gamg"], np=2)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "-elliptic_pc_typo" in lines[0], proc.stderr


def test_options_read_later_and_real_choices_are_accepted(tmp_path):
    """Viewers and the converged reason are read at the end of each solve, -log_view at the end of the run: they are
    not 'unused'. A preconditioner the user picks replaces our multigrid defaults."""
    proc = run_cli(["run", SHEET, "--output", tmp_path / "out.h5", *SHORT[1:], "--", "-elliptic_pc_type", "gamg",
                    "-elliptic_ksp_converged_reason", "-parabolic_ksp_rtol", "1e-9", "-log_view", ":/dev/null"],
                   check=True)
    assert "elliptic cg+gamg" in proc.stdout
    assert "Linear elliptic_ solve converged" in proc.stdout


def test_petsc_options_refused_by_commands_without_petsc(tmp_path):
    proc = run_cli(["config", "check", SHEET, "--", "-elliptic_pc_type", "gamg"])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "takes no PETSc options" in lines[0], proc.stderr


def test_defaults_live_only_during_setup(petsc):
    """After a simulation is set up, the global options database holds what the user gave and none of our
    defaults (petsc_options.inserted), and the solvers still use them."""
    from cardiosim import config
    from cardiosim.simulation.loop import Simulation
    opts = petsc.Options()
    before = dict(opts.getAll())
    sim = Simulation(config.load(SHEET, ["simulation.duration=0.04"]), write_output=False)
    assert dict(opts.getAll()) == before
    ell, par = sim.tissue.elliptic.ksp, sim.tissue.parabolic.ksp
    assert (ell.getType(), ell.getPC().getType()) == ("cg", "mg")
    assert (par.getType(), par.getPC().getType()) == ("cg", "bjacobi")
    assert par.getTolerances()[0] == 1e-10
    # the blocks' solvers are set up inside too: ILU(0), as the default says (not PETSc's own default)
    assert par.getPC().getBJacobiSubKSP()[0].getPC().getType() == "ilu"
    mg_level = ell.getPC().getMGSmoother(1)
    assert (mg_level.getType(), mg_level.getPC().getType()) == ("chebyshev", "jacobi")
    sim.run()
    # the same counts as with the defaults left in the database for good (the code before this change)
    assert sim.tissue.iterations() == {"parabolic": [2, 2], "elliptic": [1, 14, 14]}


def test_option_names_skip_values():
    from cardiosim.runtime.petsc import option_names
    assert option_names(["-a", "1", "-b_c", "-1e-3", "-d", "-.5", "-e"]) == ["a", "b_c", "d", "e"]

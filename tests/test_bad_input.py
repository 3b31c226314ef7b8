"""Bad input: one clear line naming the key or file and what is allowed, exit status 2, no traceback, and no
output file written (nor an existing one touched)."""

from pathlib import Path

import pytest

from conftest import run_cli

SHEET = (Path(__file__).parent / "configs" / "sheet.toml").read_text()


def edit(old, new, text=SHEET):
    assert old in text, old
    return text.replace(old, new, 1)


# (case, config text or None for the sheet, extra command-line arguments, words the message must contain)
CASES = [
    ("missing config file", None, ["run", "nowhere.toml"], ["nowhere.toml", "no such config file"]),
    ("not TOML", "[simulation\nduration = 1", [], ["not valid TOML"]),
    ("misspelt key", edit("spacing = 0.02", "spcing = 0.02"), [], ["grid.spcing", "unknown key", "spacing"]),
    ("wrong type", edit("duration = 40.0", 'duration = "forty"'), [], ["simulation.duration", "number"]),
    ("negative step", edit("dt = 0.02", "dt = -0.02"), [], ["simulation.dt", "> 0", "ms"]),
    ("unknown choice", edit('equations = "bidomain"', 'equations = "tridomain"'), [],
     ["simulation.equations", "bidomain, monodomain"]),
    ("missing required key", edit("dt = 0.02\n", ""), [], ["simulation.dt", "missing"]),
    ("missing section", edit("[grid]\nsize = [1.0, 0.4]\nspacing = 0.02\n", ""), [], ["grid", "missing"]),
    ("spacing does not divide size", edit("spacing = 0.02", "spacing = 0.03"), [],
     ["grid.spacing", "whole number"]),
    ("two stimulus amplitudes", edit("current_density = -30.0", "current_density = -30.0\ncurrent_per_volume = 1.0"),
     [], ["stimulus[0]", "exactly one"]),
    ("unknown cell model", edit('model = "mitchell-schaeffer"', 'model = "hodgkin"'), [],
     ["cell.model", "hodgkin", "allowed"]),
    ("unknown cell parameter", edit('model = "mitchell-schaeffer"', 'model = "mitchell-schaeffer"\nparameters = { tau_x = 1.0 }'),
     [], ["cell.parameters.tau_x", "allowed"]),
    ("probe outside the tissue", edit("position = [0.8, 0.05]", "position = [1.8, 0.05]"), [],
     ["probe[2].position[0]", "[0, 1.0]"]),
    ("stimulus region without nodes", edit("lower = [0.0, 0.0]\nupper = [0.04, 0.1]",
                                           "lower = [0.005, 0.0]\nupper = [0.015, 0.1]"), [],
     ["corner", "no grid node"]),
    ("duration not a whole number of steps", edit("duration = 40.0", "duration = 40.01"), [],
     ["simulation.duration", "whole number of steps"]),
    ("star stencil with rotated fibres", edit("[tissue]", '[tissue]\nfibre_angle = 45.0'),
     ["--set", 'grid.stencil="star"'], ["grid.stencil", "box"]),
    ("missing fibre file", edit("[tissue]", '[tissue]\nfibre_file = "fibres.npy"'), [], ["tissue.fibre_file", "fibres.npy"]),
    ("--set without =", None, ["--set", "simulation.dt"], ["--set simulation.dt", "section.key=value"]),
    ("--set of an unknown key", None, ["--set", "simulation.dtt=0.01"], ["simulation.dtt", "unknown key"]),
    ("--set of a bad value", None, ["--set", "simulation.ode_substeps=0"], ["simulation.ode_substeps", ">= 1"]),
    ("unknown option", None, ["--frobnicate"], ["unrecognized arguments: --frobnicate"]),
    ("no command", None, ["__no_command__"], ["no command given"]),
    ("unknown PETSc preconditioner", None, ["--", "-elliptic_pc_type", "nonsense"],
     ["-elliptic_", "nonsense"]),
]


@pytest.mark.parametrize("case,text,extra,words", CASES, ids=[c[0] for c in CASES])
def test_bad_input_one_line_exit_2(tmp_path, case, text, extra, words):
    cfg = tmp_path / "case.toml"
    cfg.write_text(SHEET if text is None else text)
    out = tmp_path / "out.h5"
    if extra[:1] == ["run"]:
        args = extra
    elif extra == ["__no_command__"]:
        args = []
    else:
        i = extra.index("--") if "--" in extra else len(extra)
        args = ["run", cfg, "--output", out, *extra[:i], *extra[i:]]
    proc = run_cli(args, cwd=tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    print(f"{case}: {lines}")
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"
    assert not out.exists()
    assert not (tmp_path / "out").exists()


def test_existing_output_is_not_overwritten(tmp_path):
    cfg = tmp_path / "case.toml"
    cfg.write_text(SHEET)
    out = tmp_path / "out.h5"
    out.write_bytes(b"precious")
    proc = run_cli(["run", cfg, "--output", out, "--set", "simulation.duration=0.1"], cwd=tmp_path)
    assert proc.returncode == 2
    assert "--overwrite" in proc.stderr and str(out) in proc.stderr
    assert out.read_bytes() == b"precious"


def test_output_in_unwritable_place(tmp_path):
    cfg = tmp_path / "case.toml"
    cfg.write_text(SHEET)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    proc = run_cli(["run", cfg, "--output", blocker / "out.h5", "--set", "simulation.duration=0.1"], cwd=tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert "output.path" in lines[0]


def test_bad_input_under_mpirun_is_one_line(tmp_path):
    cfg = tmp_path / "case.toml"
    cfg.write_text(edit("dt = 0.02", "dt = -0.02"))
    proc = run_cli(["run", cfg, "--output", tmp_path / "out.h5"], np=2, cwd=tmp_path, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "simulation.dt" in lines[0], proc.stderr


def test_blow_up_stops_every_rank_with_one_line(tmp_path):
    """A too-large ODE step makes the cells blow up: exit 3 on all ranks, one line naming the state, place and
    time, no hang; the output written so far stays readable."""
    import h5py
    cfg = tmp_path / "case.toml"
    cfg.write_text(SHEET)
    out = tmp_path / "out.h5"
    proc = run_cli(["run", cfg, "--output", out, "--quiet", "--set", "simulation.dt=2.0",
                    "--set", "output.interval=2.0"], np=2, cwd=tmp_path, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    print(lines)
    assert proc.returncode == 3, proc.stderr
    assert len(lines) == 1 and "cell state" in lines[0] and "t = " in lines[0] and "time step" in lines[0]
    with h5py.File(out) as f:
        assert f["fields/Vm"].shape[0] >= 1

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


# -- cardiosim inspect / plot: the result file -------------------------------------------------------------------
@pytest.fixture(scope="module")
def result_file(tmp_path_factory):
    """A small finished monodomain run (so it has no phi_e)."""
    d = tmp_path_factory.mktemp("result")
    cfg = d / "mono.toml"
    cfg.write_text(edit('equations = "bidomain"', 'equations = "monodomain"'))
    out = d / "mono.h5"
    run_cli(["run", cfg, "--quiet", "--output", out, "--set", "simulation.duration=2.0",
             "--set", "grid.spacing=0.05", "--set", "simulation.dt=0.05"], cwd=d, check=True, timeout=300)
    return out


def _not_hdf5(d):
    p = d / "notes.h5"
    p.write_text("not HDF5\n")
    return p


def _foreign_hdf5(d):
    import h5py
    p = d / "other.h5"
    with h5py.File(p, "w") as f:
        f["x"] = [1, 2, 3]
    return p


# (case, command, arguments: FILE stands for the result file, words the message must contain)
FILE_CASES = [
    ("inspect: missing file", "inspect", ["nowhere.h5"], ["nowhere.h5", "no such file"]),
    ("plot: missing file", "plot", ["nowhere.h5"], ["nowhere.h5", "no such file"]),
    ("inspect: not an HDF5 file", "inspect", [_not_hdf5], ["notes.h5", "not an HDF5 file"]),
    ("plot: not an HDF5 file", "plot", [_not_hdf5], ["notes.h5", "not an HDF5 file"]),
    ("inspect: not a cardiosim file", "inspect", [_foreign_hdf5], ["other.h5", "not a cardiosim run file"]),
    ("plot: not a cardiosim file", "plot", [_foreign_hdf5], ["other.h5", "not a cardiosim run file"]),
    ("inspect: a directory", "inspect", ["."], ["is a directory"]),
    ("plot: time out of range", "plot", ["FILE", "--times", "1.0", "99.0"], ["--times 99", "0 to 2 ms"]),
    ("plot: negative time", "plot", ["FILE", "--times", "-1"], ["--times -1", "0 to 2 ms"]),
    ("plot: field absent", "plot", ["FILE", "--field", "phi_e"], ["--field phi_e", "monodomain", "Vm"]),
    ("plot: unknown field", "plot", ["FILE", "--field", "Vmm"], ["--field Vmm", "fields in the file: Vm"]),
    ("plot: --out is a file", "plot", ["FILE", "--out", "FILE"], ["--out", "not a directory"]),
    ("plot: bad isochrone spacing", "plot", ["FILE", "--isochrones", "0"], ["--isochrones 0", "> 0"]),
    ("plot: time not a number", "plot", ["FILE", "--times", "ten"], ["--times", "invalid float value"]),
    ("inspect: no file given", "inspect", [], ["the following arguments are required: file"]),
]


@pytest.mark.parametrize("case,command,arguments,words", FILE_CASES, ids=[c[0] for c in FILE_CASES])
def test_bad_result_file_one_line_exit_2(tmp_path, result_file, case, command, arguments, words):
    args = [command]
    for a in arguments:
        args.append(result_file if a == "FILE" else a(tmp_path) if callable(a) else a)
    before = sorted(p.name for p in result_file.parent.iterdir())
    proc = run_cli(args, cwd=tmp_path)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    print(f"{case}: {lines}")
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"
    assert not list(tmp_path.glob("*.png")) and sorted(p.name for p in result_file.parent.iterdir()) == before

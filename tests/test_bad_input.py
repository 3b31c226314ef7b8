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



def assert_one_line(proc, case: str, words) -> None:
    """The rule of the bad-input table: exit 2, one line on stderr holding every one of ``words``, no traceback."""
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    print(f"{case}: {lines}")
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"

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
    assert_one_line(proc, case, words)
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


@pytest.mark.mpi
def test_bad_input_under_mpirun_is_one_line(tmp_path):
    cfg = tmp_path / "case.toml"
    cfg.write_text(edit("dt = 0.02", "dt = -0.02"))
    proc = run_cli(["run", cfg, "--output", tmp_path / "out.h5"], np=2, cwd=tmp_path, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "simulation.dt" in lines[0], proc.stderr


@pytest.mark.mpi
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


# -- restarts: the same rules; besides, neither the output file nor the checkpoint is changed --------------------
def _checkpointed(d: Path) -> tuple[Path, Path, Path]:
    """A finished 1-rank run of the sheet (2 ms) with a checkpoint at 1 ms: (config, output, checkpoint)."""
    cfg = d / "case.toml"
    cfg.write_text(SHEET.replace("duration = 40.0", "duration = 2.0"))
    run_cli(["run", cfg, "--output", d / "out.h5", "--quiet", "--set", "checkpoint.interval=1.0"], cwd=d, check=True)
    return cfg, d / "out.h5", d / "out.ckpt.h5"


@pytest.fixture(scope="module")
def checkpointed(tmp_path_factory):
    return _checkpointed(tmp_path_factory.mktemp("checkpointed"))


def _garbage(p):
    p.write_bytes(b"this is not HDF5\n" * 100)


def _halve(p):
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _damage_states(p):
    """Flip bytes inside the first row of the cell states (the checksum must catch it)."""
    import h5py
    with h5py.File(p, "r") as f:
        offset = f["states"].id.get_chunk_info(0).byte_offset
    data = bytearray(p.read_bytes())
    for i in range(offset + 100, offset + 108):
        data[i] ^= 0xFF
    p.write_bytes(bytes(data))


def _h5(edit_fn):
    def edit_file(p):
        import h5py
        with h5py.File(p, "r+") as f:
            edit_fn(f)
    return edit_file


def _other_run(f):
    f.attrs["run_id"] = "0" * 32


def _cut_short(f):
    for name in ("time", "Vm", "phi_e"):
        f["fields"][name].resize(0, axis=0)


# (case, file to edit ("ckpt"/"out") and how, arguments after `run CONFIG`, words the message must contain)
RESTART_CASES = [
    ("missing checkpoint", None, ["--restart", "nowhere.ckpt.h5"], ["nowhere.ckpt.h5", "no such checkpoint file"]),
    ("checkpoint is not HDF5", ("ckpt", _garbage), ["--restart", "out.ckpt.h5"],
     ["out.ckpt.h5", "not a readable cardiosim checkpoint"]),
    ("truncated checkpoint", ("ckpt", _halve), ["--restart", "out.ckpt.h5"], ["not a readable cardiosim checkpoint"]),
    ("damaged cell states", ("ckpt", _damage_states), ["--restart", "out.ckpt.h5"],
     ["out.ckpt.h5", "cannot read states", "damaged"]),
    ("output file given as checkpoint", None, ["--restart", "out.h5"], ["out.h5", "not a cardiosim checkpoint"]),
    ("checkpoint of other conductivities", None, ["--restart", "out.ckpt.h5", "--set", "tissue.sigma_il=2.0"],
     ["another config", "tissue.sigma_il = 1.74 there, 2.0 here", "simulation.duration"]),
    ("checkpoint of another grid", None, ["--restart", "out.ckpt.h5", "--set", "grid.spacing=0.04"],
     ["another config", "grid.spacing = [0.02, 0.02] there, [0.04, 0.04] here"]),
    ("checkpoint of another cell model", None, ["--restart", "out.ckpt.h5", "--set", 'cell.model="pathmanathan-gray"'],
     ["cell.model = \"mitchell-schaeffer\" there, \"pathmanathan-gray\" here"]),
    ("checkpoint of another time step", None, ["--restart", "out.ckpt.h5", "--set", "simulation.dt=0.01"],
     ["simulation.dt = 0.02 there, 0.01 here"]),
    ("checkpoint at the end of the run", None, ["--restart", "out.ckpt.h5", "--set", "simulation.duration=1.0"],
     ["t = 1 ms", "not before the end", "simulation.duration"]),
    ("restart without the output file", ("out", Path.unlink), ["--restart", "out.ckpt.h5"],
     ["out.h5 does not exist", "--output"]),
    ("output file of another run", ("out", _h5(_other_run)), ["--restart", "out.ckpt.h5"],
     ["out.h5", "another run"]),
    ("output file cut short", ("out", _h5(_cut_short)), ["--restart", "out.ckpt.h5"],
     ["out.h5", "0 snapshots", "fewer than"]),
    ("restart and overwrite", None, ["--restart", "out.ckpt.h5", "--overwrite"], ["--restart", "--overwrite"]),
    ("new run over an existing checkpoint", None, ["--output", "new.h5", "--set", 'checkpoint.path="out.ckpt.h5"'],
     ["checkpoint.path", "out.ckpt.h5 exists", "--restart", "--overwrite"]),
    ("checkpoint in an unwritable place", None, ["--output", "new.h5", "--set", 'checkpoint.path="case.toml/x.h5"'],
     ["checkpoint.path", "cannot write in case.toml"]),
    ("checkpoint interval below the step", None, ["--output", "new.h5", "--set", "checkpoint.interval=0.01"],
     ["checkpoint.interval", ">= simulation.dt"]),
]


def _snapshot_files(d: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


@pytest.mark.parametrize("case,edit_file,extra,words", RESTART_CASES, ids=[c[0] for c in RESTART_CASES])
def test_bad_restart_one_line_exit_2(tmp_path, checkpointed, case, edit_file, extra, words):
    import shutil
    for p in checkpointed:
        shutil.copy(p, tmp_path / p.name)
    if edit_file:
        which, fn = edit_file
        fn(tmp_path / {"ckpt": "out.ckpt.h5", "out": "out.h5"}[which])
    before = _snapshot_files(tmp_path)
    args = ["run", "case.toml", *extra]
    if "--output" not in extra:
        args += ["--output", "out.h5"]
    proc = run_cli(args, cwd=tmp_path)
    assert_one_line(proc, case, words)
    assert _snapshot_files(tmp_path) == before   # nothing written, nothing changed


@pytest.mark.mpi
def test_bad_restart_under_mpirun_is_one_line(tmp_path, checkpointed):
    import shutil
    for p in checkpointed:
        shutil.copy(p, tmp_path / p.name)
    _damage_states(tmp_path / "out.ckpt.h5")
    before = _snapshot_files(tmp_path)
    proc = run_cli(["run", "case.toml", "--output", "out.h5", "--restart", "out.ckpt.h5"], np=2, cwd=tmp_path,
                   timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr
    assert len(lines) == 1 and "cannot read states" in lines[0], proc.stderr
    assert _snapshot_files(tmp_path) == before


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
    assert_one_line(proc, case, words)
    assert not list(tmp_path.glob("*.png")) and sorted(p.name for p in result_file.parent.iterdir()) == before

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
    ("non-positive Jacobi damping of the stencil multigrid", None,
     ["--", "-elliptic_pc_type", "python", "-elliptic_pc_python_type", "cardiosim.solvers.multigrid.StencilMG",
      "-elliptic_smg_jacobi_from", "1", "-elliptic_smg_jacobi_omega", "0"],
     ["smg_jacobi_omega = 0.0", "must be positive"]),
    ("negative finest-level sweeps of the stencil multigrid", None,
     ["--", "-elliptic_pc_type", "python", "-elliptic_pc_python_type", "cardiosim.solvers.multigrid.StencilMG",
      "-elliptic_smg_finest_sweeps", "-1"],
     ["smg_finest_sweeps = -1", "at least 1"]),
    # -- times the run could only round --
    ("output interval not a whole number of steps", None, ["--set", "output.interval=0.03"],
     ["output.interval", "0.03 ms", "whole number of steps", "simulation.dt = 0.02 ms", "0.04 ms"]),
    ("output interval below the step", None, ["--set", "output.interval=0.01"],
     ["output.interval", "whole number of steps", "multiple of 0.02 ms"]),
    ("checkpoint interval not a whole number of steps", None, ["--set", "checkpoint.interval=1.01"],
     ["checkpoint.interval", "1.01 ms", "multiple of 0.02 ms"]),
    ("stimulus shorter than the ODE step", edit("duration = 1.0", "duration = 0.001"), [],
     ["stimulus[0].duration", "0.001 ms", "ODE step", "0.02 ms"]),
    ("stimulus not a whole number of ODE steps", edit("duration = 1.0", "duration = 1.01"), [],
     ["stimulus[0].duration", "1.01 ms", "multiple of 0.02 ms"]),
    ("stimulus with substeps", edit("duration = 1.0", "duration = 1.003"), ["--set", "simulation.ode_substeps=4"],
     ["stimulus[0].duration", "1.003 ms", "ode_substeps = 0.005 ms"]),
    ("stimulus start between ODE steps", edit("duration = 1.0", "duration = 1.0\nstart = 0.005"), [],
     ["stimulus[0].start", "0.005 ms", "0.02 ms"]),
    ("stimulus period between ODE steps", edit("duration = 1.0", "duration = 1.0\nperiod = 100.001\ncount = 2"), [],
     ["stimulus[0].period", "100.001 ms"]),
    ("stimulus under Strang splitting", edit("duration = 1.0", "duration = 1.002"),
     ["--set", 'simulation.splitting="strang"', "--set", "simulation.ode_substeps=3"],
     ["stimulus[0].duration", "2·ceil(ode_substeps / 2)", "0.005 ms"]),
    # -- sizes (class 6) --
    ("grid beyond 32-bit indices", None, ["--set", "grid.size=[100.0, 100.0]", "--set", "grid.spacing=0.001"],
     ["grid.spacing", "1e+10 nodes", "32-bit", "2147483647"]),
    ("grid beyond 32-bit indices, finer", None, ["--set", "grid.size=[10.0, 10.0]", "--set", "grid.spacing=0.0002"],
     ["grid.spacing", "2.5e+09 nodes", "32-bit"]),
    ("grid beyond the memory", None, ["--set", "grid.size=[46.0, 46.0]", "--set", "grid.spacing=0.001"],
     ["grid.spacing", "nodes need at least", "GB of memory", "available", "coarser"]),
    # -- names (class 7) --
    ("probe name with a slash", edit('name = "near"', 'name = "a/b"'), [], ["probe[0].name", "'a/b'", "letters"]),
    ("probe named time", edit('name = "near"', 'name = "time"'), [], ["probe[0].name", "'time'", "other than"]),
    ("empty probe name", edit('name = "near"', 'name = ""'), [], ["probe[0].name", "''", "non-empty"]),
    ("probe named ..", edit('name = "near"', 'name = ".."'), [], ["probe[0].name", "'..'"]),
    ("probe name with a space", edit('name = "near"', 'name = "my probe"'), [], ["probe[0].name", "'my probe'"]),
    ("probe name twice", edit('name = "middle"', 'name = "near"'), [], ["probe[1].name", "'near'", "used twice"]),
    ("field listed twice", None, ["--set", 'output.fields=["Vm", "phi_e", "Vm"]'],
     ["output.fields[2]", "'Vm'", "listed twice"]),
    ("unknown field", None, ["--set", 'output.fields=["Vm", "Ve"]'], ["output.fields[1]", "'Ve'", "Vm, phi_e"]),
    # -- files that collide (class 2) --
    ("output is the config", None, ["--output", "case.toml", "--overwrite"],
     ["case.toml", "config file of this run"]),
    ("checkpoint is the output", None, ["--set", 'checkpoint.path="out.h5"'],
     ["checkpoint.path", "out.h5 is also output.path"]),
    ("checkpoint is the output, overwriting", None, ["--set", 'checkpoint.path="out.h5"', "--overwrite"],
     ["checkpoint.path", "is also output.path"]),
    ("checkpoint is the summary", None, ["--set", 'checkpoint.path="out.json"'],
     ["checkpoint.path", "out.json is also the JSON summary"]),
    ("checkpoint is the config", None, ["--set", 'checkpoint.path="case.toml"', "--overwrite"],
     ["checkpoint.path", "config file of this run"]),
    ("output named like its sidecar", None, ["run", "case.toml", "--output", "out.xdmf"],
     ["the XDMF sidecar", "out.xdmf is also output.path"]),
    ("output named like its summary", None, ["run", "case.toml", "--output", "out.json"],
     ["the JSON summary", "out.json is also output.path"]),
    ("output name too long", None, ["run", "case.toml", "--output", "x" * 300 + ".h5"],
     ["output.path", "File name too long"]),
    ("relative fibre file beside the config", edit("[tissue]", '[tissue]\nfibre_file = "nested/f.npy"'), [],
     ["tissue.fibre_file", "nested/f.npy", "relative to the config file's folder"]),
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
    cfg.write_text(edit("duration = 1.0", "duration = 2.0"))   # a whole number of the large steps
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


def _attr(name, value, reseal=False):
    """Change one attribute of the checkpoint; ``reseal``: and write its checksums anew, as a forger (or a faulty
    version) would, so that only the cross-checks can tell."""
    def edit_fn(f):
        from cardiosim.output import checkpoint
        f.attrs[name] = value(f.attrs[name]) if callable(value) else value
        if reseal:
            checkpoint.seal(f)
    return _h5(edit_fn)


def _flip_bit(dataset, index=0):
    """Flip one bit of a value in ``dataset`` through h5py: HDF5 writes a new Fletcher-32 for the chunk, so only
    the checkpoint's own checksum can see it."""
    def edit_fn(f):
        import numpy as np
        a = f[dataset][()]
        flat = a.reshape(-1).view(np.uint64 if a.dtype.itemsize == 8 else np.uint32)
        flat[index] ^= 1 << 3
        f[dataset][...] = a
    return _h5(edit_fn)


def _raw_bit_flip(dataset):
    """Flip a bit of ``dataset`` in the file's bytes (HDF5's chunk checksum no longer matches)."""
    def edit_file(p):
        import h5py
        with h5py.File(p, "r") as f:
            offset = f[dataset].id.get_chunk_info(0).byte_offset
        data = bytearray(p.read_bytes())
        data[offset] ^= 0x04
        p.write_bytes(bytes(data))
    return edit_file


def _reseal(edit_fn):
    def both(f):
        from cardiosim.output import checkpoint
        edit_fn(f)
        checkpoint.seal(f)
    return _h5(both)


def _drop(name):
    def edit_fn(f):
        del f[name]
    return _h5(edit_fn)


def _add_attr(f):
    f["fields/Vm"].attrs["note"] = "added later"


def _truncate_iterations(f):
    its = f["solver/parabolic_iterations"][:-1]
    del f["solver/parabolic_iterations"]
    f["solver/parabolic_iterations"] = its


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
     ["out.ckpt.h5", "damaged", "dataset /states cannot be read"]),
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
    # -- every piece of a checkpoint is under a checksum; what can be derived is cross-checked (class 4) --
    ("step attribute changed", ("ckpt", _attr("step", lambda v: v + 4)), ["--restart", "out.ckpt.h5"],
     ["out.ckpt.h5", "damaged", "attribute step", "checksum"]),
    ("t attribute changed", ("ckpt", _attr("t", 1.5)), ["--restart", "out.ckpt.h5"], ["damaged", "attribute t "]),
    ("dt attribute changed", ("ckpt", _attr("dt", 0.025)), ["--restart", "out.ckpt.h5"], ["damaged", "attribute dt"]),
    ("config text changed", ("ckpt", _attr("config", lambda v: v.replace("sigma_il = 1.74", "sigma_il = 1.75"))),
     ["--restart", "out.ckpt.h5"], ["damaged", "attribute config"]),
    ("output position changed", ("ckpt", _attr("output", lambda v: v.replace('"snapshots": 1', '"snapshots": 2'))),
     ["--restart", "out.ckpt.h5"], ["damaged", "attribute output"]),
    ("a bit of Vm flipped", ("ckpt", _flip_bit("fields/Vm", 7)), ["--restart", "out.ckpt.h5"],
     ["damaged", "dataset /fields/Vm"]),
    ("a bit of phi_e flipped", ("ckpt", _flip_bit("fields/phi_e", 100)), ["--restart", "out.ckpt.h5"],
     ["damaged", "dataset /fields/phi_e"]),
    ("a bit of an iteration count flipped", ("ckpt", _flip_bit("solver/parabolic_iterations", 3)),
     ["--restart", "out.ckpt.h5"], ["damaged", "dataset /solver/parabolic_iterations"]),
    ("iteration counts damaged on disk", ("ckpt", _raw_bit_flip("solver/elliptic_iterations")),
     ["--restart", "out.ckpt.h5"], ["damaged", "/solver/elliptic_iterations"]),
    ("an accumulator changed", ("ckpt", _flip_bit("accumulators/activation/time", 5)), ["--restart", "out.ckpt.h5"],
     ["damaged", "dataset /accumulators/activation/time"]),
    ("a dataset removed", ("ckpt", _drop("accumulators/activation/time")), ["--restart", "out.ckpt.h5"],
     ["damaged", "/accumulators/activation/time (missing)"]),
    ("an attribute added", ("ckpt", _h5(_add_attr)), ["--restart", "out.ckpt.h5"],
     ["damaged", "/fields/Vm attribute note (not written with the checkpoint)"]),
    ("checksum table changed", ("ckpt", _attr("digests", lambda v: v.replace("a", "b", 1))),
     ["--restart", "out.ckpt.h5"], ["damaged", "table of checksums"]),
    ("checksums removed", ("ckpt", _h5(lambda f: [f.attrs.__delitem__(k) for k in ("digest", "digests")])),
     ["--restart", "out.ckpt.h5"], ["has no checksums"]),
    ("step forged with its checksums", ("ckpt", _attr("step", lambda v: v + 4, reseal=True)),
     ["--restart", "out.ckpt.h5"], ["inconsistent", "is not step · dt"]),
    ("step and t forged with their checksums",
     ("ckpt", _reseal(lambda f: (f.attrs.__setitem__("step", 54), f.attrs.__setitem__("t", 54 * 0.02)))),
     ["--restart", "out.ckpt.h5"], ["inconsistent", "output position", "step 54"]),
    ("iterations forged with their checksums", ("ckpt", _reseal(_truncate_iterations)),
     ["--restart", "out.ckpt.h5"], ["inconsistent", "parabolic_iterations"]),
]


def checksums(d: Path) -> dict:
    """SHA-256 of every file under ``d`` (hidden ones too): what "nothing changed" is checked against."""
    import hashlib
    return {str(p.relative_to(d)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file()}


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
    assert len(lines) == 1 and "dataset /states cannot be read" in lines[0], proc.stderr
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
             "--set", "grid.spacing=0.05", "--set", "simulation.dt=0.05",
             "--set", "output.activation_threshold=-80.0"], cwd=d, check=True, timeout=300)
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


def _file(d):
    p = d / "a_file"
    p.write_text("x")
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
    ("plot: too many isochrones", "plot", ["FILE", "--isochrones", "1e-7"],
     ["--isochrones 1e-07", "lines", "at most 200", "spacing >="]),
    ("plot: --out under a file", "plot", ["FILE", "--out", lambda d: _file(d) / "pngs"],
     ["--out", "not a writable directory"]),
    ("plot: --out name too long", "plot", ["FILE", "--out", lambda d: d / ("x" * 300)],
     ["--out", "File name too long", "255 bytes"]),
    ("plot: --out a file", "plot", ["FILE", "--out", _file], ["--out", "not a directory"]),
    ("plot: unknown option", "plot", ["FILE", "--frobnicate"], ["unrecognized arguments: --frobnicate"]),
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


def test_plot_never_replaces_a_png(tmp_path, result_file):
    """An existing PNG is refused (one line, exit 2, nothing written) unless --overwrite is given; then replaced if
    cardiosim plot drew it, and refused still if not (a picture of the user's own with the name)."""
    import shutil
    res = tmp_path / "mono.h5"
    shutil.copy(result_file, res)
    run_cli(["plot", res], cwd=tmp_path, check=True)
    drawn = tmp_path / "mono_Vm.png"
    drawn.write_bytes(drawn.read_bytes() + b"\0")         # still cardiosim's PNG, but told apart from a new one
    before = checksums(tmp_path)
    proc = run_cli(["plot", res], cwd=tmp_path)
    assert_one_line(proc, "existing PNG", ["mono_Vm.png", "exists", "--overwrite"])
    assert checksums(tmp_path) == before
    run_cli(["plot", res, "--overwrite"], cwd=tmp_path, check=True)
    assert drawn.read_bytes()[:4] == b"\x89PNG" and not drawn.read_bytes().endswith(b"\0")
    drawn.write_bytes(b"\x89PNG\r\n\x1a\n a precious picture of the user's own")
    before = checksums(tmp_path)
    proc = run_cli(["plot", res, "--overwrite"], cwd=tmp_path)
    assert_one_line(proc, "a PNG of someone else's", ["mono_Vm.png", "not a PNG drawn by cardiosim plot"])
    assert checksums(tmp_path) == before


# -- every file a run writes: refused if it exists, unless --overwrite; none may be another or the config --------
@pytest.mark.parametrize("existing", ["out.json", "out.xdmf", "out.ckpt.h5", "out.h5"])
def test_no_file_of_a_run_is_replaced_without_overwrite(tmp_path, existing):
    cfg = tmp_path / "case.toml"
    cfg.write_text(SHEET)
    (tmp_path / existing).write_text("precious")
    before = checksums(tmp_path)
    proc = run_cli(["run", cfg, "--output", "out.h5", "--set", "simulation.duration=0.1"], cwd=tmp_path)
    assert_one_line(proc, existing, [existing, "exists", "--overwrite"])
    assert checksums(tmp_path) == before


def test_config_named_like_the_summary_is_not_destroyed(tmp_path):
    """A config named out.json and --output out.h5 (even with --overwrite)."""
    cfg = tmp_path / "out.json"
    cfg.write_text(SHEET)
    before = checksums(tmp_path)
    proc = run_cli(["run", cfg, "--output", "out.h5", "--overwrite"], cwd=tmp_path)
    assert_one_line(proc, "config out.json", ["the JSON summary", "out.json", "config file of this run"])
    assert checksums(tmp_path) == before


def test_relative_paths_in_a_config_follow_the_config(tmp_path):
    """fibre_file, conductivity_file, output.path and checkpoint.path written in a config are relative to its
    folder; --set values and --output stay relative to the working directory."""
    import numpy as np
    from cardiosim import config
    d = tmp_path / "case"
    d.mkdir()
    np.save(d / "fibres.npy", np.tile([1.0, 0.0], (51 * 21, 1)))
    text = edit("[tissue]", '[tissue]\nfibre_file = "fibres.npy"')
    (d / "case.toml").write_text(edit("interval = 2.0", 'interval = 2.0\npath = "res/run.h5"', text)
                                 + '[checkpoint]\npath = "ck/run.ckpt.h5"\n')
    cfg = config.load(d / "case.toml")
    assert cfg.tissue.fibre_file == str(d / "fibres.npy")
    assert cfg.output.path == str(d / "res" / "run.h5") and cfg.checkpoint.path == str(d / "ck" / "run.ckpt.h5")
    cfg = config.load(d / "case.toml", ['output.path="elsewhere.h5"'])
    assert cfg.output.path == "elsewhere.h5"
    proc = run_cli(["config", "check", d / "case.toml"], cwd=tmp_path)   # from another folder
    assert proc.returncode == 0, proc.stderr


def test_a_stimulus_of_zero_current_is_not_an_empty_region(tmp_path):
    """A stimulus switched off by its current (current_density = 0) still has nodes in its region: the run goes
    on, at rest, rather than being refused as a region without nodes."""
    import h5py
    cfg = tmp_path / "off.toml"
    cfg.write_text(edit("current_density = -30.0", "current_density = 0.0"))
    proc = run_cli(["run", cfg, "--output", tmp_path / "off.h5", "--set", "simulation.duration=2.0"])
    assert proc.returncode == 0, proc.stderr
    with h5py.File(tmp_path / "off.h5") as f:
        vm = f["fields/Vm"][:]
    assert abs(vm[-1] - vm[0]).max() < 1e-6      # at rest: nothing stimulated

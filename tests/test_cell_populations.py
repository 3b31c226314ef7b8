"""Several cell models in one run (cell.regions[].model; cardiosim.reaction.multimodel): one population per model,
each its own states, backend and parameters, Vm gathered back into the one PDE vector.

Checked against what is known:
- regions that name one model other than cell.model, covering the whole sheet, give that model's one-model run
  bit for bit (cell.model's population then has no cell; the composition changes nothing);
- a sheet of TT06 on the left and Mitchell-Schaeffer on the right, stimulated at both ends: at a probe far inside
  each half, the first 2 ms equal the one-model run of that half's model (the other half is too far to be felt yet);
- a restart from a checkpoint equals the uninterrupted run bit for bit, and a checkpoint of other region models is
  refused in one line; on 2 ranks the run equals 1 rank's to round-off (and so does a 2-rank checkpoint restarted on
  1 rank), the grouped placement the cpu one's bit for bit;
- output.states records a state at the cells of every model that has it (NaN at the others) and says which.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from conftest import run_cli

SHEET = """
[simulation]
equations = "monodomain"
duration = {duration}
dt = 0.02
ode_substeps = 10                  # TT06 by Forward Euler needs 2 us steps
progress_interval = 0
[grid]
size = [1.0, 0.2]                  # cm
spacing = 0.02
[tissue]
sigma_il = 1.74
sigma_it = 0.19
sigma_el = 6.34578
sigma_et = 0.69293
[cell]
model = "{model}"
backend = "numpy"
{regions}
[[stimulus]]
name = "left"
shape = "box"
lower = [0.0, 0.0]
upper = [0.04, 0.2]
duration = 1.0
current_density = -52.0
[[stimulus]]
name = "right"
shape = "box"
lower = [0.96, 0.0]
upper = [1.0, 0.2]
duration = 1.0
current_density = -52.0
[[probe]]
name = "left"
position = [0.1, 0.1]
[[probe]]
name = "right"
position = [0.9, 0.1]
[output]
interval = 0.5
{output}
"""

# the right half (x >= 0.5 cm) of another model
RIGHT = """
[[cell.regions]]
shape = "box"
lower = [0.5, 0.0]
upper = [1.0, 0.2]
model = "{model}"
"""
LEFT = RIGHT.replace("[0.5, 0.0]", "[0.0, 0.0]").replace("[1.0, 0.2]", "[0.49, 0.2]")


def sheet(tmp_path, name, model="tt06", regions="", duration=2.0, output=""):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(SHEET.format(model=model, regions=regions, duration=duration, output=output))
    return cfg


def run(cfg, out, *extra, np_=1):
    proc = run_cli(["run", cfg, "--output", out, "--quiet", *extra], np=np_)
    assert proc.returncode == 0, proc.stderr
    return out


def datasets(path) -> dict:
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def test_regions_of_one_other_model_equal_that_models_run(tmp_path):
    """cell.model = tt06, but the two halves both name mitchell-schaeffer (one population of two pieces; tt06's has
    no cell): every dataset equals the one-model Mitchell-Schaeffer run's bit for bit."""
    ms = "mitchell-schaeffer"
    one = run(sheet(tmp_path, "one", model=ms), tmp_path / "one.h5")
    two = run(sheet(tmp_path, "two", regions=LEFT.format(model=ms) + RIGHT.format(model=ms)), tmp_path / "two.h5")
    a, b = datasets(one), datasets(two)
    assert sorted(a) == sorted(b)
    for name in a:
        if not name.startswith("timing"):
            assert np.array_equal(a[name], b[name], equal_nan=True), name
    assert a["fields/Vm"][-1].max() > -20.0                 # not a run at rest: both ends depolarised
    with h5py.File(two) as f:
        assert f.attrs["cell_model"] == f"tt06 + {ms}"


def test_two_models_far_from_their_border_equal_each_ones_run(tmp_path):
    """TT06 left, Mitchell-Schaeffer right, both ends stimulated: over the first 3 ms (before the border, 0.4 cm
    away, is felt: measured 1e-7 mV at 3 ms) the left probe equals the TT06 run's and the right one the
    Mitchell-Schaeffer run's; each is its model's own action potential (TT06 overshoots past 10 mV by 2.5 ms,
    Mitchell-Schaeffer is still rising)."""
    ms = "mitchell-schaeffer"
    two = run(sheet(tmp_path, "two", regions=RIGHT.format(model=ms), duration=3.0), tmp_path / "two.h5")
    tt = run(sheet(tmp_path, "tt06", duration=3.0), tmp_path / "tt06.h5")
    m = run(sheet(tmp_path, "ms", model=ms, duration=3.0), tmp_path / "ms.h5")
    with h5py.File(two) as f2, h5py.File(tt) as ft, h5py.File(m) as fm:
        left, right = f2["probes/left/Vm"][:], f2["probes/right/Vm"][:]
        assert np.max(np.abs(left - ft["probes/left/Vm"][:])) < 1e-5
        assert np.max(np.abs(right - fm["probes/right/Vm"][:])) < 1e-5
        assert left.max() > 10.0 and right.max() < -30.0                 # TT06's upstroke; MS's slow rise
        assert np.max(np.abs(right - ft["probes/right/Vm"][:])) > 10.0    # and not TT06 on the right
        # and the border is a real one: the two models' cells meet there in one Vm
        v = f2["fields/Vm"][-1]
        assert np.all(np.isfinite(v))


def test_restart_of_two_models_is_bit_identical(tmp_path):
    """A checkpoint holds both populations (states, populations/1); the restarted run equals the uninterrupted one
    bit for bit; a checkpoint whose region holds another model is refused in one line."""
    regions = RIGHT.format(model="mitchell-schaeffer")
    cfg = sheet(tmp_path, "two", regions=regions, duration=1.5, output='states = ["h"]')
    full = run(cfg, tmp_path / "full.h5")
    part = run(cfg, tmp_path / "part.h5", "--set", "simulation.duration=1.0", "--set", "checkpoint.interval=0.6")
    ckpt = tmp_path / "part.ckpt.h5"
    with h5py.File(ckpt) as c:
        assert c["states"].shape[0] == 19 and c["states"].attrs["model"] == "tt06"
        assert c["populations/1"].shape[0] == 2 and c["populations/1"].attrs["model"] == "mitchell-schaeffer"
    run(cfg, part, "--restart", ckpt)
    a, b = datasets(full), datasets(part)
    assert sorted(a) == sorted(b)
    for name in a:
        if not name.startswith("timing"):
            assert np.array_equal(a[name], b[name], equal_nan=True), name
    other = sheet(tmp_path, "other", regions=RIGHT.format(model="tt06"), duration=1.5, output='states = ["h"]')
    proc = run_cli(["run", other, "--output", part, "--quiet", "--restart", ckpt])
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert "cell.regions[0]" in lines[0] and "mitchell-schaeffer" in lines[0] and "cell model" in lines[0]


def test_output_states_of_several_models(tmp_path):
    """A state both models have (h) is recorded at each model's cells; one only TT06 has (Ca_i) is NaN at the
    Mitchell-Schaeffer cells; the datasets say whose."""
    cfg = sheet(tmp_path, "two", regions=RIGHT.format(model="mitchell-schaeffer"), duration=0.5,
                output='states = ["h", "Ca_i"]')
    out = run(cfg, tmp_path / "two.h5")
    with h5py.File(out) as f:
        h, ca = f["fields/h"][-1], f["fields/Ca_i"][-1]
        assert f["fields/h"].attrs["cell_models"] == '["tt06", "mitchell-schaeffer"]'
        assert f["fields/Ca_i"].attrs["cell_models"] == '["tt06"]'
        assert f["probes/right/Ca_i"].attrs["cell_models"] == '["tt06"]'
        assert np.all(np.isfinite(h))
        assert np.all(np.isfinite(ca[:, :25])) and np.all(np.isnan(ca[:, 25:]))
        assert np.all(np.isnan(f["probes/right/Ca_i"][:])) and np.all(np.isfinite(f["probes/left/Ca_i"][:]))
    lines = run_cli(["inspect", out], check=True).stdout
    assert "(of tt06, mitchell-schaeffer)" in lines and "(of tt06)" in lines


@pytest.mark.mpi
@pytest.mark.slow
def test_two_models_on_two_ranks(tmp_path):
    """Both populations cut over 2 ranks: equal to 1 rank's run to round-off; the grouped placement (the group's
    owner integrates both ranks' cells of each model) equals the cpu placement's bit for bit; a checkpoint written
    on 2 ranks, restarted on 1, gives the 1-rank run to round-off."""
    cfg = sheet(tmp_path, "two", regions=RIGHT.format(model="mitchell-schaeffer"), duration=1.0)
    tight = ["--", "-parabolic_ksp_rtol", "1e-13"]
    one = run(cfg, tmp_path / "one.h5", *tight)
    cpu = run(cfg, tmp_path / "cpu.h5", *tight, np_=2)
    grouped = run(cfg, tmp_path / "grouped.h5", "--set", 'cell.placement="grouped"', *tight, np_=2)
    # a checkpoint of both populations written on 2 ranks, the run finished on 1
    part = run(cfg, tmp_path / "part.h5", "--set", "simulation.duration=0.6", "--set", "checkpoint.interval=0.5",
               *tight, np_=2)
    run(cfg, part, "--restart", tmp_path / "part.ckpt.h5", *tight)
    a, b, c, d = datasets(one), datasets(cpu), datasets(grouped), datasets(part)
    for name in ("fields/Vm", "probes/left/Vm", "probes/right/Vm"):
        assert np.array_equal(b[name], c[name]), name
        assert np.max(np.abs(a[name] - b[name])) < 1e-8, name
        assert np.max(np.abs(a[name] - d[name])) < 1e-8, name


@pytest.mark.parametrize("regions,extra,words", [
    (RIGHT.format(model="no-such-model"), [], ["cell.regions[0].model", "unknown model", "no-such-model"]),
    (RIGHT.format(model="mitchell-schaeffer") + "parameters = { g_Na = 1.0 }\n", [],
     ["cell.regions[0]", "g_Na"]),
    (RIGHT.format(model="mitchell-schaeffer"), ["--set", 'output.states=["nothing"]'],
     ["output.states[0]", "nothing", "tt06", "mitchell-schaeffer"]),
    (RIGHT.format(model="mitchell-schaeffer"), ["--set", 'cell.backend="native"'],
     ["cell.backend", "mitchell-schaeffer", "C kernel"]),
    (RIGHT.format(model="mitchell-schaeffer"), ["--set", 'cell.integrator="rush-larsen"'],
     ["cell.integrator", "mitchell-schaeffer"]),
])
def test_bad_region_model_is_one_line(tmp_path, regions, extra, words):
    cfg = sheet(tmp_path, "bad", regions=regions)
    proc = run_cli(["run", cfg, "--output", tmp_path / "bad.h5", "--quiet", *extra])
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    assert not (tmp_path / "bad.h5").exists()

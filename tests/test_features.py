"""Grid and stimulus features beyond the verification cases: 3D, per-point fibre and conductivity files, scar
regions, sphere stimuli, pulse trains (S1–S2)."""

import h5py
import numpy as np
import pytest

from cardiosim.analysis.maps import activation_time

from conftest import run_cli

CABLE2D = """
[simulation]
equations = "{eq}"
duration = {duration}
dt = 0.05
progress_interval = 0
[grid]
size = [1.0, 0.2]
spacing = 0.025
[tissue]
fibre_angle = {angle}
{tissue_extra}
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
name = "S1"
shape = "box"
lower = [0.0, 0.0]
upper = [0.05, 0.2]
duration = 1.0
current_density = -30.0
{stim_extra}
[[probe]]
name = "end"
position = [0.9, 0.1]
[output]
interval = 5.0
"""


def run(tmp_path, name, eq="monodomain", duration=40.0, angle=0.0, tissue_extra="", stim_extra="", extra=()):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(CABLE2D.format(eq=eq, duration=duration, angle=angle, tissue_extra=tissue_extra,
                                  stim_extra=stim_extra))
    out = tmp_path / f"{name}.h5"
    run_cli(["run", cfg, "--quiet", "--output", out, *extra], check=True, cwd=tmp_path)
    f = h5py.File(out)
    return f, f["probes/time"][:], f["probes/end/Vm"][:]


def test_fibre_file_equals_uniform_angle(tmp_path):
    n = (9, 41)  # (ny, nx)
    a = np.deg2rad(30.0)
    fib = np.zeros(n + (2,))
    fib[..., 0], fib[..., 1] = np.cos(a), np.sin(a)
    np.save(tmp_path / "fibres.npy", 3.0 * fib)        # not normalised on purpose
    f1, _, v1 = run(tmp_path, "angle", eq="bidomain", duration=10.0, angle=30.0)
    f2, _, v2 = run(tmp_path, "file", eq="bidomain", duration=10.0, tissue_extra='fibre_file = "fibres.npy"')
    assert f1["grid"].attrs["stencil"] == f2["grid"].attrs["stencil"] == "box"
    assert np.array_equal(f1["fields/Vm"][:], f2["fields/Vm"][:])
    assert np.array_equal(f1["fields/phi_e"][:], f2["fields/phi_e"][:])


def test_conductivity_file_scales_speed(tmp_path):
    _, t, v = run(tmp_path, "base")
    np.save(tmp_path / "scale.npy", np.full((9, 41), 0.25))
    _, t4, v4 = run(tmp_path, "slow", duration=80.0, tissue_extra='conductivity_file = "scale.npy"')
    a, a4 = activation_time(t, v, -40.0), activation_time(t4, v4, -40.0)
    print(f"\nactivation at x = 0.9 cm: {a:.2f} ms (σ), {a4:.2f} ms (σ/4)")
    assert a4 / a == pytest.approx(2.0, rel=0.15)     # CV ∝ √σ


def test_scar_blocks_conduction(tmp_path):
    scar = '[[tissue.regions]]\nshape = "box"\nlower = [0.45, 0.0]\nupper = [0.55, 0.2]\nscale_intra = 0.0\n' \
           'scale_extra = 0.0'
    _, t, v = run(tmp_path, "scar", tissue_extra=scar)
    assert np.isnan(activation_time(t, v, -40.0))
    assert v.max() < -80.0


def test_pulse_train_and_s2_sphere(tmp_path):
    # S1 twice (period 500 ms; Mitchell–Schaeffer's APD is ~240 ms), then an S2 sphere at the far end at
    # 1000 ms: the probe sees three upstrokes, the last one early since S2 is next to it.
    train = "period = 500.0\ncount = 2"
    s2 = '[[stimulus]]\nname = "S2"\nshape = "sphere"\ncenter = [1.0, 0.1]\nradius = 0.06\nstart = 1000.0\n' \
         'duration = 1.0\ncurrent_density = -30.0'
    cfg_text = CABLE2D.format(eq="monodomain", duration=1100.0, angle=0.0, tissue_extra="",
                              stim_extra=f"{train}\n{s2}")
    cfg = tmp_path / "s1s2.toml"
    cfg.write_text(cfg_text)
    out = tmp_path / "s1s2.h5"
    run_cli(["run", cfg, "--quiet", "--output", out], check=True)
    with h5py.File(out) as f:
        t, v = f["probes/time"][:], f["probes/end/Vm"][:]
    up = np.flatnonzero((v[:-1] < -40.0) & (v[1:] >= -40.0))
    times = t[up]
    print("\nupstrokes at x = 0.9 cm (ms):", np.round(times, 1))
    assert len(times) == 3
    assert 0 < times[0] < 60 and 500 < times[1] < 560 and 1000 < times[2] < 1010


@pytest.mark.mpi
def test_3d_slab_propagates_on_two_ranks(tmp_path):
    cfg = tmp_path / "slab.toml"
    cfg.write_text("""
[simulation]
equations = "bidomain"
duration = 40.0
dt = 0.05
progress_interval = 0
[grid]
size = [0.5, 0.2, 0.1]
spacing = 0.025
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
shape = "sphere"
center = [0.0, 0.0, 0.0]
radius = 0.06
duration = 1.0
current_per_volume = -42000.0
[[probe]]
name = "corner"
position = [0.5, 0.2, 0.1]
[output]
interval = 5.0
""")
    out = tmp_path / "slab.h5"
    run_cli(["run", cfg, "--quiet", "--output", out], np=2, check=True)
    with h5py.File(out) as f:
        assert f["fields/Vm"].shape == (9, 5, 9, 21)      # time, z, y, x
        assert f["grid"].attrs["stencil"] == "star"
        t, v = f["probes/time"][:], f["probes/corner/Vm"][:]
    a = activation_time(t, v, -40.0)
    print(f"\n3D slab: far corner activates at {a:.2f} ms")
    assert 5.0 < a < 40.0


@pytest.mark.mpi
def test_activation_map_matches_probes_on_two_ranks(tmp_path):
    from cardiosim.analysis.maps import sample
    from pathlib import Path
    sheet = Path(__file__).parent / "configs" / "sheet.toml"
    out = tmp_path / "sheet.h5"
    run_cli(["run", sheet, "--quiet", "--output", out, "--set", "output.activation_threshold=-40.0"], np=2,
            check=True)
    with h5py.File(out) as f:
        amap = f["maps/activation_time"][:]
        assert amap.shape == tuple(f["grid"].attrs["shape"][::-1])
        t = f["probes/time"][:]
        for name in ("near", "middle", "far"):
            pos = f["probes"][name].attrs["node_position"]
            a_probe = activation_time(t, f["probes"][name]["Vm"][:], -40.0)
            a_map = sample(amap, f["grid"].attrs["spacing"], pos)
            print(f"{name}: probe {a_probe:.4f} ms, map {a_map:.4f} ms")
            assert a_map == pytest.approx(a_probe, abs=1e-9)
        assert 0.0 < np.nanmin(amap) < 5.0     # the stimulated corner, just after the 1 ms pulse

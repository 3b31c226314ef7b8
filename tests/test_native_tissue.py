"""Tissue runs with the compiled C cell kernels (cell.backend = native): the same numbers as the NumPy
reference, and the large models propagate in tissue."""

import h5py
import numpy as np

from cardiosim.analysis import activation_time, conduction_velocity

from conftest import run_cli

CABLE = """
[simulation]
equations = "{eq}"
duration = {duration}
dt = {dt}
ode_substeps = {k}
progress_interval = 0
[grid]
size = [{L}]
spacing = 0.01
[cell]
model = "{model}"
backend = "{backend}"
[[stimulus]]
shape = "box"
lower = [0.0]
upper = [0.03]
duration = 1.0
current_density = {amp}
[[probe]]
name = "x1"
position = [{x1}]
[[probe]]
name = "x2"
position = [{x2}]
[output]
interval = 1.0
"""


def run(tmp_path, name, **kw):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(CABLE.format(**kw))
    out = tmp_path / f"{name}.h5"
    run_cli(["run", cfg, "--quiet", "--output", out], check=True)
    return h5py.File(out)


def test_native_equals_numpy_in_tissue(tmp_path):
    kw = dict(eq="bidomain", duration=4.0, dt=0.02, k=10, L=0.3, model="tt06", amp=-52.0, x1=0.1, x2=0.2)
    a = run(tmp_path, "numpy", backend="numpy", **kw)
    b = run(tmp_path, "native", backend="native", **kw)
    assert a.attrs["layout"] != b.attrs["layout"]          # really two backends
    for field in ("Vm", "phi_e"):
        d = np.abs(a["fields"][field][:] - b["fields"][field][:]).max()
        print(f"\nTT06 cable, {field}: max |numpy - native| = {d:.3e} mV")
        assert d < 1e-8
    assert a["fields/Vm"][-1].max() > 0.0


def test_bondarenko_cable_propagates(tmp_path):
    f = run(tmp_path, "bondarenko", eq="monodomain", duration=15.0, dt=0.01, k=100, L=0.5, model="bondarenko",
            backend="native", amp=-80.0, x1=0.2, x2=0.4)
    t = f["probes/time"][:]
    t1 = activation_time(t, f["probes/x1/Vm"][:])
    t2 = activation_time(t, f["probes/x2/Vm"][:])
    cv = conduction_velocity(0.2, t1, 0.4, t2)
    print(f"\nBondarenko (apical) cable, Clerc conductivities, dx 0.01 cm: activation at 0.2 / 0.4 cm: "
          f"{t1:.3f} / {t2:.3f} ms, CV = {10 * cv:.3f} m/s")
    assert 0.1 < 10 * cv < 1.5

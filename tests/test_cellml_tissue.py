"""Generated CellML models in tissue: the generated TT06 against the hand-written one over a propagating wave, and
a generated model (O'Hara–Rudy 2011) conducting in a 2D sheet, with its conduction velocity."""

import h5py
import numpy as np
import pytest

from cardiosim.analysis.maps import activation_time, conduction_velocity

from conftest import ROOT, require_gcc, run_cli

pytest.importorskip("myokit")

MODELS = ROOT / "models"

TISSUE = """
[simulation]
equations = "monodomain"
duration = {duration}
dt = {dt}
ode_substeps = {k}
progress_interval = 0
[grid]
size = {size}
spacing = 0.01
[cell]
model = "{model}"
backend = "{backend}"
integrator = "{integrator}"
{parameters}
[[stimulus]]
shape = "box"
lower = {lower}
upper = {upper}
duration = 1.0
current_density = {amp}
[[probe]]
name = "x1"
position = {x1}
[[probe]]
name = "x2"
position = {x2}
[output]
interval = 0.5
"""


def run(tmp_path, name, **kw):
    kw.setdefault("integrator", "forward-euler")
    kw.setdefault("backend", "native")
    kw.setdefault("parameters", "")
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(TISSUE.format(**kw))
    out = tmp_path / f"{name}.h5"
    run_cli(["run", cfg, "--quiet", "--output", out], check=True, env={"CARDIOSIM_CACHE": str(tmp_path / "c")})
    return h5py.File(out)


@pytest.mark.parametrize("backend", ["numpy", "native"])
@pytest.mark.slow
def test_generated_tt06_equals_hand_tt06_in_tissue(tmp_path, backend):
    """A 0.5 cm cable, monodomain, Forward Euler 2 µs: the wave crosses the cable; every Vm snapshot of the generated
    TT06 equals the hand-written one to round-off.

    The Chaste CellML replaces I_CaL's 0/0 at V = 15 mV by a constant, the mean of its values at V_low = 14.999 and
    V_high = 15.001 mV, over that whole window (1.3e-7 mV in Vm here when a cell's V passes through it); the hand
    model computes the exact limit. Closing the window (V_low = V_high = 15, parameters like any other) leaves the
    generator's own guard, a straight line over ±1e-5 mV, which is exact to round-off."""
    if backend == "native":
        require_gcc()
    kw = dict(duration=12.0, dt=0.02, k=10, size="[0.5]", lower="[0.0]", upper="[0.03]", amp=-52.0,
              x1="[0.15]", x2="[0.4]")
    a = run(tmp_path, "hand", model="tt06", backend=backend, **kw)
    b = run(tmp_path, "gen", model=MODELS / "ten_tusscher_model_2006_epi.cellml", backend=backend,
            parameters="parameters = { V_low = 15.0, V_high = 15.0 }", **kw)
    t = a["probes/time"][:]
    t1, t2 = activation_time(t, a["probes/x1/Vm"][:]), activation_time(t, a["probes/x2/Vm"][:])
    assert np.isfinite(t2)                                  # it propagated to the far probe
    d = np.abs(a["fields/Vm"][:] - b["fields/Vm"][:]).max()
    print(f"\nTT06 cable ({backend}): max |hand - generated| Vm = {d:.3e} mV over {a['fields/Vm'].shape[0]} snapshots; "
          f"CV = {10 * conduction_velocity(0.15, t1, 0.4, t2):.3f} m/s")
    assert d < 1e-9


@pytest.mark.slow
def test_ohara_rudy_conducts_in_a_sheet(tmp_path):
    """O'Hara–Rudy 2011 (endo), generated, Rush–Larsen, in a 0.6 × 0.1 cm monodomain sheet stimulated along
    x = 0: the wave reaches both probes; its conduction velocity is printed (and must be physiological)."""
    require_gcc()
    f = run(tmp_path, "ord", model=MODELS / "ohara_rudy_2011_endo.cellml", integrator="rush-larsen",
            duration=20.0, dt=0.01, k=1, size="[0.6, 0.1]", lower="[0.0, 0.0]", upper="[0.03, 0.1]", amp=-80.0,
            x1="[0.2, 0.05]", x2="[0.5, 0.05]")
    t = f["probes/time"][:]
    t1, t2 = activation_time(t, f["probes/x1/Vm"][:]), activation_time(t, f["probes/x2/Vm"][:])
    cv = conduction_velocity(0.2, t1, 0.5, t2)
    print(f"\nO'Hara-Rudy 2011 endo (generated), 2D sheet dx 0.01 cm, Rush-Larsen dt 0.01 ms: activation at "
          f"0.2 / 0.5 cm: {t1:.3f} / {t2:.3f} ms, CV = {10 * cv:.3f} m/s")
    assert 0.2 < 10 * cv < 1.5


@pytest.mark.slow
def test_shannon_grl1_in_a_cable_numpy_equals_native(tmp_path):
    """Shannon 2004 (a model Forward Euler needed 5 µs for) with GRL1 at 0.01 ms in a 0.3 cm cable: the wave crosses
    it, and the NumPy and native backends agree to round-off (the generated NumPy twin and C header)."""
    require_gcc()
    kw = dict(model=MODELS / "shannon_wang_puglisi_weber_bers_2004.cellml", integrator="grl1", duration=8.0,
              dt=0.01, k=1, size="[0.3]", lower="[0.0]", upper="[0.03]", amp=-60.0, x1="[0.1]", x2="[0.25]")
    a = run(tmp_path, "np", backend="numpy", **kw)
    b = run(tmp_path, "c", backend="native", **kw)
    t = b["probes/time"][:]
    assert np.isfinite(activation_time(t, b["probes/x2/Vm"][:]))
    assert np.abs(a["fields/Vm"][:] - b["fields/Vm"][:]).max() < 1e-8

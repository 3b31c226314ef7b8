"""The set-up warning where an explicit cell step is beyond a state's stability limit (cardiosim.cells.stability):
the limits it computes against the models' own formulas, when it warns and when not, and that a tissue run on two
ranks says it once."""

import math
import time
from pathlib import Path

import numpy as np
import pytest

from cardiosim import cells
from cardiosim.cells import stability
from conftest import run_cli

MODELS = Path(__file__).resolve().parents[1] / "models"
ORD = str(MODELS / "ohara_rudy_2011_endo.cellml")


def warning(model, integrator, dt):
    return stability.step_warning(model, integrator, dt, option="--integrator {}", step_is="--dt",
                                  smaller=lambda d: f"--dt {d:g}")


def tt06_two_tau_m(v):
    """2·τ_m (ms) of TT06 at V (mV), as the paper writes it: τ_m = α_m·β_m."""
    alpha = 1.0 / (1.0 + math.exp((-60.0 - v) / 5.0))
    beta = 0.1 / (1.0 + math.exp((v + 35.0) / 5.0)) + 0.1 / (1.0 + math.exp((v - 50.0) / 200.0))
    return 2.0 * alpha * beta


def test_tt06_forward_euler_limit_is_the_m_gate_below_rest():
    """τ_m ≈ 1 µs near rest: the limit is m's, at the bottom of the sweep (1 mV below the initial -85.23 mV), and
    equals 2·τ_m there. 0.002 ms (the step that stopped the idealised LV) is above it; the Niederer benchmark's
    0.00167 ms and 0.0005 ms are below."""
    m = cells.make("tt06")
    lim = stability.smallest_limit(m, "forward-euler")
    assert lim.state == "m"
    assert lim.v == pytest.approx(-85.23 - 1.0)
    assert lim.dt == pytest.approx(tt06_two_tau_m(-86.23), rel=1e-6)
    assert lim.dt == pytest.approx(0.0017441, rel=1e-4)
    # at rest and 0.3 mV below it, the measured blow-up of 0.002 ms: the limit crosses 0.002 ms in between
    assert tt06_two_tau_m(-85.23) > 0.002 > tt06_two_tau_m(-85.6)
    msg = warning(m, "forward-euler", 0.002)
    assert msg and "state m of tt06" in msg and "0.00174 ms at V = -86.23 mV" in msg
    assert "--integrator rush-larsen" in msg and "--dt 0.0017" in msg and "\n" not in msg
    assert warning(m, "forward-euler", 0.0005) is None
    assert warning(m, "forward-euler", 0.001) is None
    assert warning(m, "forward-euler", 0.005 / 3) is None          # run/niederer: 3 substeps of 0.005 ms


def test_rush_larsen_is_not_limited_by_tt06s_gates():
    """Rush–Larsen advances the 12 gates exactly: only the concentrations and R' are checked, and they are slow."""
    m = cells.make("tt06")
    lim = stability.smallest_limit(m, "rush-larsen")
    assert m.state_index(lim.state) not in m.gates and lim.dt > 10.0
    for dt in (0.002, 0.02, 0.2):
        assert warning(m, "rush-larsen", dt) is None
    assert stability.smallest_limit(m, "grl1") is None and stability.smallest_limit(m, "cvode") is None


def test_ohara_rudy_cellml_limit_and_its_blow_up():
    """A generated model: the limit is the h_f gate's at the top of the sweep (55 mV, a few mV above the AP's
    peak), 2·τ_hf there from O'Hara et al. 2011's formula. Forward Euler at 0.05 ms leaves [0, 1] within one
    upstroke, at 0.02 ms (below the limit) it does not."""
    m = cells.make(ORD)
    t0 = time.perf_counter()
    lim = stability.smallest_limit(m, "forward-euler")
    cost = time.perf_counter() - t0
    assert cost < 0.5, cost                        # 41 states: about 35 ms on a laptop core
    v = 55.0
    tau_hf = 1.0 / (1.432e-5 * math.exp(-(v + 1.196) / 6.285) + 6.149 * math.exp((v + 0.5096) / 20.27))
    assert (lim.state, lim.v) == ("hf", v)
    assert lim.dt == pytest.approx(2 * tau_hf, rel=1e-4)
    assert 0.020 < lim.dt < 0.022
    msg = warning(m, "forward-euler", 0.05)
    assert msg and "--integrator rush-larsen, or --integrator grl1, or --dt 0.021" in msg
    assert warning(m, "rush-larsen", 0.05) is None and warning(m, "grl1", 0.05) is None

    def forward_euler_ok(dt):
        y = m.initial_state(1)
        work = np.empty_like(y)
        for i in range(int(round(4.0 / dt))):
            m.forward_euler(y, i * dt, dt, -80.0 if i * dt < 0.5 else 0.0, work)
        return m.find_bad_state(y) is None

    assert not forward_euler_ok(0.05) and forward_euler_ok(0.02)


@pytest.mark.parametrize("name", cells.available())
def test_every_built_in_model_has_a_limit_or_none(name):
    m = cells.make(name, tissue={"Cm": 1.0, "chi": 1400.0})
    lim = stability.smallest_limit(m, "forward-euler")
    assert lim is None or (lim.state != m.states[0].name and lim.dt > 0)
    if name == "bondarenko":
        # What the check sees at the initial state. Along a beat P_O1 (RyR) comes to 0.00019 ms during the calcium
        # release, and Forward Euler at 0.0002 ms fails there: the module docstring's limitation, unseen here.
        assert lim.state == "C_Na2" and lim.dt == pytest.approx(0.0391, rel=1e-2)
        assert warning(m, "forward-euler", 1e-4) is None     # the step it runs at


CONFIG = """
[simulation]
equations = "monodomain"
duration = 0.02
dt = 0.01
ode_substeps = 5
progress_interval = 0
[grid]
size = [0.2]
spacing = 0.05
[cell]
model = "tt06"
[[stimulus]]
shape = "box"
lower = [0.0]
upper = [0.05]
duration = 0.01
current_density = -30.0
[output]
interval = 0.01
"""


@pytest.mark.mpi
@pytest.mark.slow
def test_tissue_run_on_two_ranks_warns_once(tmp_path):
    cfg = tmp_path / "case.toml"
    cfg.write_text(CONFIG)
    proc = run_cli(["run", cfg, "--output", tmp_path / "out.h5", "--quiet"], np=2, cwd=tmp_path, timeout=120,
                   check=True)
    lines = [ln for ln in proc.stderr.splitlines() if "stability limit" in ln]
    assert len(lines) == 1, proc.stderr
    assert ('cell.integrator = "forward-euler" with the ODE step simulation.dt / simulation.ode_substeps = 0.002 '
            'ms' in lines[0])
    assert 'use cell.integrator = "rush-larsen", or simulation.ode_substeps ≥ 6' in lines[0]
    proc = run_cli(["run", cfg, "--output", tmp_path / "out.h5", "--overwrite", "--quiet",
                    "--set", 'cell.integrator="rush-larsen"'], cwd=tmp_path, timeout=120, check=True)
    assert "stability limit" not in proc.stderr, proc.stderr


def test_single_cell_warns_before_it_steps(tmp_path, capsys):
    from cardiosim.single_cell.pacing import run_cell
    run_cell("tt06", None, {}, -52.0, 0.5, 2.0, 1, 0.002, 0.01, tmp_path / "c.h5")
    err = capsys.readouterr().err
    assert err.count("stability limit") == 1 and "--integrator forward-euler with --dt 0.002 ms" in err

"""The numbers `cardiosim cell` reports: the pre-paced state as the trace's first sample, dV/dt max only where the
sampling resolves it, restitution's no-capture rows, a blow-up's own message and file, and what the message says
of the time step."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from conftest import ROOT, require_cvodes, require_gcc, run_cli

pytest.importorskip("myokit")

from cardiosim.runtime.errors import SimulationError  # noqa: E402
from cardiosim.single_cell.pacing import restitution, run_cell  # noqa: E402

MODELS = ROOT / "models"
LR91 = MODELS / "luo_rudy_1991.cellml"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _paced(tmp_path, name, beats, prepace, integrator, dt, model=LR91, record_every=0.5, **kw):
    """run_cell in this process (the compiled kernels and Myokit shared between runs): (h5, json) paths. Luo–Rudy
    1991 at 500 ms with -80 µA/µF for 0.5 ms; TT06 at 1000 ms with -52 µA/µF for 1 ms."""
    out, js = tmp_path / f"{name}.h5", tmp_path / f"{name}.json"
    amplitude, duration, period = (-52.0, 1.0, 1000.0) if model == "tt06" else (-80.0, 0.5, 500.0)
    run_cell(str(model), None, {}, amplitude, duration, period, beats, dt, record_every, out, js,
             integrator=integrator, prepace=prepace, **kw)
    return out, js


def _trace(path):
    with h5py.File(path) as f:
        return f["trace/t"][:], {k: f[f"trace/{k}"][:] for k in f.attrs["state_names"]}


# -- the pre-paced state is the trace's first sample ------------------------------------------------------------------
@pytest.mark.parametrize("integrator, dt, first, trace_mv, marker", [("forward-euler", 0.005, 1e-9, 1e-6, 1e-6),
                                                                     ("grl1", 0.01, 1e-9, 1e-6, 1e-6),
                                                                     ("cvode", 0.05, 1e-3, 0.5, 0.1)])
def test_prepace_then_one_beat_is_the_last_beat_of_a_continuous_run(tmp_path, integrator, dt, first, trace_mv,
                                                                    marker):
    """--prepace 2 --beats 1 is beat 3 of --beats 3 from its first sample on: the t = 0 sample is the paced state,
    for CVODES too (there it was the unpaced initial state, and V_rest and the APDs measured from it were off:
    Luo–Rudy 1991 at 500 ms, V(0) -83.853 mV, the file's initial value, against -83.734 mV at t = 1000 ms of the
    continuous run; Cai(0) 0.2 against 0.183 µM). The native integrators agree to round-off, CVODES (its own steps
    in each run) to its tolerances (measured: V within 0.08 mV over the beat, APD90 0.03 ms)."""
    if integrator == "cvode":
        require_cvodes()
    require_gcc()
    a, ja = _paced(tmp_path, "pre", 1, 2, integrator, dt)
    b, jb = _paced(tmp_path, "all", 3, 0, integrator, dt)
    ta, xa = _trace(a)
    tb, xb = _trace(b)
    last = tb >= 1000.0 - 1e-9
    np.testing.assert_allclose(tb[last] - 1000.0, ta, atol=1e-9)
    for name in xa:                  # the first sample: every state as the continuous run has it at t = 1000 ms
        assert xa[name][0] == pytest.approx(xb[name][last][0], rel=first, abs=1e-300), name
    assert np.max(np.abs(xa["V"] - xb["V"][last])) <= trace_mv
    ra, rb = json.loads(ja.read_text())["beats"][0], json.loads(jb.read_text())["beats"][2]
    assert ra["V_rest"] == pytest.approx(rb["V_rest"], abs=1e-2 if integrator == "cvode" else 1e-9)
    for col in ("V_peak", "APD50", "APD90"):
        assert ra[col] == pytest.approx(rb[col], abs=marker), (col, ra[col], rb[col])


# -- a blow-up: its own message, exit status 3, the trace kept and marked; what it says of the time step ------------
def test_blow_up_is_its_own_error_with_the_trace_kept(tmp_path):
    """TT06 with Forward Euler at 0.5 ms leaves m's range at the first step: exit 3 with the blow-up's own line
    (it was reported as 'cannot write cell.h5 (…)' and the file's 'error' overwritten with 'stopped: cannot
    write'), the trace kept up to there, the file's 'error' the blow-up; the line says the step is beyond m's
    stability limit (dt·|∂f/∂m| = 470 at the last state in range) and what lifts it."""
    out = tmp_path / "cell.h5"
    proc = run_cli(["cell", "--model", "tt06", "--dt", "0.5", "--record-every", "0.5", "--period", "100",
                    "--output", out])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip() and not ln.startswith("cardiosim: warning:")]
    assert proc.returncode == 3 and len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("cardiosim: error: tt06: cell 0, state m = ") and "cannot write" not in line, line
    assert "beyond the stability limit of state m" in line and "time step is too large" in line, line
    assert "--integrator rush-larsen" in line and str(out) in line, line
    with h5py.File(out) as f:
        err = f.attrs["error"]
        assert err.startswith("tt06: cell 0, state m = ") and "time step is too large" in err, err
        assert f["trace/t"].shape[0] >= 1 and f["trace/V"].shape == f["trace/t"].shape


def test_blow_up_of_a_step_above_a_stability_limit_says_so(tmp_path):
    """Bondarenko with Forward Euler at 1 µs: NaN at 3.32 ms, in the calcium release, after the RyR state P_O1
    swung up and down at every step (dt·|∂f/∂P_O1| = 2.9 where that began): the time step is too large there."""
    require_gcc()
    with pytest.raises(SimulationError) as e:
        run_cell("bondarenko", None, {}, -80.0, 0.5, 100.0, 1, 1e-3, 0.05, tmp_path / "c.h5")
    msg = str(e.value)
    assert "state P_O1" in msg and "swung up and down" in msg and "the time step is too large there" in msg, msg
    assert "probably not the cause" not in msg and "if a smaller dt moves" not in msg, msg


def test_blow_up_that_is_not_the_step_says_so(tmp_path):
    """Luo–Rudy 1991 with a background current that is NaN above 30 mV (a log of a negative number, times
    1e-30): NaN in the upstroke at 0.825 ms with Forward Euler at 5 µs, a step far inside every limit. The line
    says that no state swung and none was beyond its limit, so the step is probably not the cause; it used to
    say 'the time step is probably too large, try a smaller dt'."""
    require_gcc()
    text = LR91.read_text()
    old = "            <ci>i_b</ci>\n            <apply>\n               <times/>\n               <ci>g_b</ci>"
    assert text.count(old) == 1
    nan_above_30 = ('<apply><plus/><cn cellml:units="dimensionless">1</cn><apply><times/>'
                    '<cn cellml:units="dimensionless">1e-30</cn><apply><ln/><apply><divide/><apply><minus/>'
                    '<cn cellml:units="millivolt">30</cn><ci>V</ci></apply><cn cellml:units="millivolt">30</cn>'
                    '</apply></apply></apply></apply>')
    model = tmp_path / "lr91_nan_above_30.cellml"
    model.write_text(text.replace(old, old.replace("<ci>g_b</ci>", nan_above_30 + "\n               <ci>g_b</ci>")))
    with pytest.raises(SimulationError) as e:
        run_cell(str(model), None, {}, -80.0, 0.5, 500.0, 1, 0.005, 0.05, tmp_path / "c.h5")
    msg = str(e.value)
    assert "state V = nan mV is not finite" in msg and "the time step is probably not the cause" in msg, msg
    assert "too large" not in msg and "swung up and down at every step" not in msg, msg
    with h5py.File(tmp_path / "c.h5") as f:
        assert f.attrs["error"] in msg and 0.7 < f["trace/t"][-1] < 0.9


# -- restitution: an S2 that does not capture is no capture; S1's APD90 is that of the last S1 beat -----------------
def test_restitution_no_capture_and_the_s1_beat(tmp_path):
    """TT06 (Rush–Larsen, 20 µs) paced once at 1000 ms, S2 at 600, 300 and 260 ms: the S2s at 300 and 260 ms fall
    within the S1 beat's action potential (APD90 307.9 ms) and do not capture (V rises 50 mV, the pulse's own
    52 mV, against the S1 beat's 126 mV): APD90_S2 NaN with a reason (it was 41.2 and 29.7 ms, the S1's own
    repolarisation measured from the S2 onset). APD90_S1 is the last S1 beat's, uncut by the S2 (it was NaN at
    CI < APD90), the same in every row and equal to the APD90 of the same beat paced on its own."""
    require_gcc()
    rows, t, v = restitution("tt06", None, {}, -52.0, 1.0, 1000.0, 1, [600.0, 300.0, 260.0], 0.02,
                             "rush-larsen", 0.1)
    by = {r["CI"]: r for r in rows}
    assert by[600.0]["captured"] == 1.0 and by[600.0]["reason"] == "" and 280 < by[600.0]["APD90_S2"] < 300
    for ci in (300.0, 260.0):
        assert by[ci]["captured"] == 0.0 and np.isnan(by[ci]["APD90_S2"]), by[ci]
        assert by[ci]["reason"].startswith("no capture: "), by[ci]
    _, js = _paced(tmp_path, "s1", 1, 1, "rush-larsen", 0.02, model="tt06", record_every=0.1)
    beat = json.loads(js.read_text())["beats"][0]
    for r in rows:
        assert r["APD90_S1"] == pytest.approx(beat["APD90"], abs=1e-9), (r, beat["APD90"])
        assert r["DI"] == pytest.approx(r["CI"] - r["APD90_S1"])


# -- dV/dt max only where the sampling resolves it ------------------------------------------------------------------
def test_dvdt_max_at_coarse_record_times_is_marked_and_warned(tmp_path, capfd):
    """CVODES gives dV/dt at the record times only: every 1 ms, Luo–Rudy 1991's upstroke (under 1 ms) falls
    between two records and dVdt_max is the stimulus's own 80 mV/ms at the onset (measured 79.997 against 411.6
    over Forward Euler's steps). One warning line, and the beats marked in the JSON and the HDF5
    (dVdt_max_unresolved, beside dVdt_max_sampling); at 0.05 ms no mark and no warning. Forward Euler's dV/dt max
    is over every step: no mark at 1 ms either."""
    require_cvodes()
    require_gcc()
    runs = {}
    for name, integrator, dt, every in (("coarse", "cvode", 0.05, 1.0), ("fine", "cvode", 0.05, 0.05),
                                        ("fe", "forward-euler", 0.005, 1.0)):
        capfd.readouterr()
        h5, js = _paced(tmp_path, name, 2, 0, integrator, dt, record_every=every)
        warned = [ln for ln in capfd.readouterr().err.splitlines() if "dVdt_max" in ln]
        runs[name] = (json.loads(js.read_text()), h5, warned)
    doc, h5, warned = runs["coarse"]
    assert len(warned) == 1 and warned[0].startswith("cardiosim: warning: dVdt_max of 2 of the 2 beats"), warned
    assert doc["dVdt_max_unresolved"] == [1, 2] and "record times" in doc["dVdt_max_sampling"]
    assert doc["beats"][1]["dVdt_max"] == pytest.approx(80.0, abs=0.1)        # the stimulus's, not the upstroke's
    with h5py.File(h5) as f:
        assert json.loads(f["biomarkers"].attrs["dVdt_max_unresolved"]) == [1, 2]
        assert "record times" in f["biomarkers"].attrs["dVdt_max_sampling"]
    for name in ("fine", "fe"):
        doc, h5, warned = runs[name]
        assert doc["dVdt_max_unresolved"] == [] and not warned, (name, warned)
        assert doc["beats"][1]["dVdt_max"] > 300.0, name
    assert "steps of 0.005 ms" in runs["fe"][0]["dVdt_max_sampling"]

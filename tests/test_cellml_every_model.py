"""Every CellML model runs, those with Hodgkin–Huxley-shaped states that are not probabilities (Shannon 2004, Davies
2012) among them, against Myokit's CVODES."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import ROOT, require_cvodes, require_gcc

pytest.importorskip("myokit")

from cardiosim import cells  # noqa: E402
from cardiosim.bench import cellml as bench  # noqa: E402

MODELS = ROOT / "models"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_gate_range_only_for_probabilities():
    """Shannon's f (f∞ above 1 everywhere) and Davies's dp (starts at 9) are gates for Rush–Larsen but not
    probabilities: no [0, 1] check. Their ordinary gates (m, h) keep it."""
    sh = cells.model_class(str(MODELS / "shannon_wang_puglisi_weber_bers_2004.cellml"))
    st = {s.name: s for s in sh.states}
    assert st["f"].upper == float("inf") and [x.name for x in sh.states].index("f") in sh.gates
    assert st["m"].upper == pytest.approx(1.0) and st["h"].lower == pytest.approx(0.0, abs=1e-8)
    dv = cells.model_class(str(MODELS / "davies_isap_2012.cellml"))
    assert {s.name: s for s in dv.states}["dp"].upper == float("inf")


@pytest.mark.parametrize("name, v_rms, fe_dt", [("shannon_wang_puglisi_weber_bers_2004", 0.05, 0.005),
                                                ("davies_isap_2012", 0.05, 0.005)])
def test_beat_against_cvodes(name, v_rms, fe_dt):
    """One paced beat (native C, Forward Euler 1 µs) against CVODES: V RMS and APD90 (measured: Shannon
    0.0095 mV, APD90 210.10 / 210.10 ms; Davies 0.012 mV, 318.77 / 318.75 ms); the largest stable step."""
    require_cvodes()
    require_gcc()
    row = bench.conformance(MODELS / f"{name}.cellml", beats=1)
    assert row["v_rms"] < v_rms, row
    assert abs(row["apd90"] - row["apd90_cvodes"]) < 0.005 * row["apd90_cvodes"], row
    assert row["fe_max_dt"] >= fe_dt, row


def _finite_difference_diagonal(model, y, i_stim):
    """∂f_i/∂y_i by central differences of the NumPy right-hand side."""
    n = y.shape[0]
    a = np.empty(n)
    for i in range(n):
        h = 1e-6 * max(abs(y[i, 0]), 1e-3)
        up, dn = y.copy(), y.copy()
        up[i] += h
        dn[i] -= h
        fu, fd = np.empty_like(y), np.empty_like(y)
        model.rhs(0.0, up, i_stim, fu)
        model.rhs(0.0, dn, i_stim, fd)
        a[i] = (fu[i, 0] - fd[i, 0]) / (2 * h)
    return a


@pytest.mark.parametrize("name", ["shannon_wang_puglisi_weber_bers_2004", "ten_tusscher_model_2006_epi",
                                  "dokos_model_1996"])
def test_grl1_step_is_the_linearised_solution(name):
    """The generated GRL1 step (NumPy and C): each gate exactly as Rush–Larsen, every other state
    y + f·(e^(a·dt) − 1)/a with a = ∂f/∂y, the symbolic diagonal Jacobian checked against finite differences."""
    require_gcc()
    from cardiosim.reaction.ode.native import NativeModel
    from cardiosim.cells.stimulus import Protocol
    model = cells.model_class(str(MODELS / f"{name}.cellml"))()
    y = model.initial_state(1)
    y[0] = -20.0                                           # mid-upstroke: every current is moving
    dt, i_stim = 0.05, -2.0
    f = np.empty_like(y)
    model.rhs(0.0, y, i_stim, f)
    a = _finite_difference_diagonal(model, y, i_stim)
    grl, rl = y.copy(), y.copy()
    model.grl1(grl, 0.0, dt, i_stim)
    model.rush_larsen(rl, 0.0, dt, i_stim)
    for i in range(model.n_states):
        if i in model.gates:
            assert grl[i, 0] == rl[i, 0]
        else:
            h = a[i] * dt
            expect = y[i, 0] + f[i, 0] * (np.expm1(h) / a[i] if abs(h) > 1e-8 else dt)
            step = abs(expect - y[i, 0])
            assert abs(grl[i, 0] - expect) <= 1e-5 * step + 1e-14 * abs(y[i, 0]), model.states[i].name
    nat = NativeModel(model, integrator="grl1")
    c = np.ascontiguousarray(y)
    nat.advance(c, 0.0, dt, 1, nat.stimulus([Protocol(0.0, 1.0, 0.0, 1)], [i_stim], 1), check_range=False)
    np.testing.assert_allclose(c, grl, rtol=1e-12, atol=1e-300)


def test_shannon_grl1_at_a_tissue_step():
    """Shannon 2004 with GRL1 at 0.01 ms (10x the Forward-Euler step that matches CVODES): APD90 within 2.5 %
    (measured 214.16 / 210.10 ms; 0.005 ms: 211.0)."""
    require_cvodes()
    require_gcc()
    path = MODELS / "shannon_wang_puglisi_weber_bers_2004.cellml"
    ref = bench._apd90(*bench._cvodes(path))
    beat = bench._beat(cells.model_class(str(path))(), "grl1", 0.01)
    assert beat is not None and abs(bench._apd90(*beat) - ref) < 0.025 * ref


def test_pacemaker_without_a_stimulus_against_cvodes():
    """Dokos 1996 (sino-atrial node, no stimulus variable in the file): it beats by itself, without any stimulus,
    as under CVODES (no protocol): V over 1 s, Forward Euler 1 µs."""
    require_cvodes()
    require_gcc()
    from cardiosim.cells import cellml
    from cardiosim.reaction.ode.native import NativeModel
    path = MODELS / "dokos_model_1996.cellml"
    model = cells.model_class(str(path))()
    nat = NativeModel(model)
    y = np.ascontiguousarray(model.initial_state(1))
    none = nat.stimulus([], None, 1)
    v = [y[0, 0]]
    for i in range(1000):
        nat.advance(y, i * 1.0, 1e-3, 1000, none)
        v.append(y[0, 0])
    v = np.array(v)
    myokit = cellml.myokit_cvodes()
    s = myokit.Simulation(cellml.load_myokit(path))
    s.set_tolerance(1e-8, 1e-8)
    vname = model.states[0].name
    d = s.run(1000.5, log=[f"{cellml.load_myokit(path).label('membrane_potential').qname()}"],
              log_times=np.arange(1001) * 1.0)
    ref = np.asarray(next(iter(d.values())))
    crossings = np.sum((v[:-1] < 0.0) & (v[1:] >= 0.0))
    assert crossings >= 2, (vname, crossings)                      # spontaneous beats
    assert np.sqrt(np.mean((v - ref) ** 2)) < 1.0


def test_equations_that_use_the_time():
    """Li 2010 (its SR fluxes switch to a caffeine protocol after its pre-pulses): the time is a state from 0 ms;
    one paced beat against CVODES (the later beats' stiffness: the test below, and the table over BEATS beats)."""
    require_cvodes()
    require_gcc()
    cls = cells.model_class(str(MODELS / "li_mouse_2010.cellml"))
    assert cls.states[-1].name == "cardiosim.time" and cls.states[-1].initial == 0.0
    row = bench.conformance(MODELS / "li_mouse_2010.cellml", beats=1)
    assert row["v_rms"] < 0.5, row
    assert abs(row["apd90"] - row["apd90_cvodes"]) < 0.01 * row["apd90_cvodes"], row


@pytest.mark.parametrize("name", ["livshitz_rudy_2007", "lindblad_model_1996"])
def test_steep_switches_stay_finite_in_c(name):
    """Smoothed switches (Livshitz–Rudy's exp(−(V + 40)/0.024 mV), Lindblad's τ_s1 with exp((V + 32.8)/0.1 mV))
    overflow to inf a few mV from the switch. Written as the model has them they still give finite values there
    (1 − 1/inf = 1); put over one denominator they gave inf/inf = NaN and -0 for Lindblad's s2 rate, so Forward
    Euler failed in the upstroke (generator 5). The C right-hand side equals the NumPy twin's over V = −150 … +60 mV,
    the other states at their initial values."""
    require_gcc()
    from cardiosim.reaction.ode.native import NativeModel
    m = cells.model_class(str(MODELS / f"{name}.cellml"))()
    nat = NativeModel(m)
    y0 = m.initial_state(1)[:, 0]
    for v in np.arange(-150.0, 60.5, 0.5):
        y = y0.copy()
        y[0] = v
        d_np = np.empty((len(y), 1))
        with np.errstate(all="ignore"):
            m.rhs(0.0, y[:, None], 0.0, d_np)
        d_c = nat.rhs(y, 0.0)
        ok = np.isfinite(d_np[:, 0])
        assert np.all(np.isfinite(d_c[ok])), (v, [s.name for s, f in zip(m.states, d_c) if not np.isfinite(f)])
        assert np.allclose(d_c[ok], d_np[ok, 0], rtol=1e-8, atol=1e-12), v


def _li_state_before(beat: int):
    """Li 2010's state at the onset of ``beat`` (1-based) of the conformance protocol (bench: a pulse every BEAT
    ms from the file's initial state), by CVODES."""
    from cardiosim.cells import cellml
    path = MODELS / "li_mouse_2010.cellml"
    myokit = cellml.myokit_cvodes()
    m = cellml.load_myokit(path)
    p = myokit.Protocol()
    for b in range(beat):
        p.schedule(bench.AMPLITUDE, b * bench.BEAT, bench.DURATION)
    s = myokit.Simulation(m, p)
    s.set_tolerance(1e-8, 1e-8)
    s.set_max_step_size(bench.DURATION / 4)
    s.pre((beat - 1) * bench.BEAT)
    t = np.arange(0.0, 15.0 + 1e-9, 0.5)
    d = s.run(15.25, log=[m.label("membrane_potential").qname()], log_times=t)
    return np.array(s.default_state()), np.asarray(next(iter(d.values())))


def test_li_release_of_a_later_beat_needs_a_tenth_of_the_first_beats_step():
    """Li 2010 from its initial state: the first beat's calcium release (Cass 32 µM) passes Forward Euler and
    Rush–Larsen at 2e-4 ms and GRL1 at 2e-3 ms, the fifth's (Cass 68 µM) none of them: the RyR state P_O1, whose own
    rate grows as Cass⁴, swings up and down and blows up (what `cardiosim cell` reported as a NaN at 1004.6 ms: no
    singularity, and the time state and the caffeine switch play no part, prepulses_number being 1e10). Measured:
    the second beat passes Forward Euler at 2e-5 ms, the fifth does not; at 1e-5 ms Forward Euler and Rush–Larsen
    pass the fifth beat's release and follow CVODES (V within 0.5 mV over its 15 ms), GRL1 at 5e-4 ms. What the
    conformance table over BEATS beats shows and its one-beat form did not."""
    require_cvodes()
    require_gcc()
    from cardiosim.reaction.ode.native import NativeModel
    from cardiosim.cells.stimulus import Protocol
    from cardiosim.runtime.errors import SimulationError
    model = cells.model_class(str(MODELS / "li_mouse_2010.cellml"))()
    y5, v_ref = _li_state_before(5)

    def release(integrator, dt):
        nat = NativeModel(model, integrator=integrator)
        y = np.ascontiguousarray(y5.reshape(-1, 1).copy())
        stim = nat.stimulus([Protocol(0.0, bench.DURATION, 0.0, 1)], [bench.AMPLITUDE], 1)
        k = int(round(0.5 / dt))
        v = [y[0, 0]]
        for i in range(30):
            nat.advance(y, i * k * dt, dt, k, stim)
            v.append(y[0, 0])
        return np.array(v)
    for integrator in ("forward-euler", "rush-larsen"):
        with pytest.raises(SimulationError):
            release(integrator, 2e-4)
        v = release(integrator, 1e-5)
        assert np.max(np.abs(v - v_ref)) < 0.5, (integrator, np.max(np.abs(v - v_ref)))
    with pytest.raises(SimulationError):             # the first beat's GRL1 step
        release("grl1", 2e-3)
    assert np.max(np.abs(release("grl1", 5e-4) - v_ref)) < 0.5

"""Purkinje–myocardial junctions (cardiosim.purkinje.coupling) against an independent reduced model: a Purkinje cell
and a myocyte joined by R, C_p dV_p/dt = −A_p I_ion − (V_p − V_m)/R and C_m dV_m/dt = −A_m I_ion + (V_p − V_m)/R,
integrated directly (RK4, one system, no splitting) at a small step. The coupling code runs the same two cells
lumped: an isopotential cable of two nodes (membrane A_p) with its terminal joined to a one-node tissue (A_m), the
junction, the cable and the tissue's cells each a split step. Compared: the anterograde delay (Purkinje stimulated),
retrograde activation (the myocyte stimulated), block above a resistance, and charge conservation; then a cable's
end coupled to a 1 cm tissue over several nodes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cardiosim.cells.stimulus import Protocol, TissueStimuli
from cardiosim.purkinje import cable, coupling
from cardiosim.purkinje.network import Network
from cardiosim.reaction.ode.numpy_backend import NumpyBackend

AP = 1.885e-4              # cm²: the Purkinje cell's membrane (a 30 µm-radius cylinder, 0.01 cm long)
AM = 20 * AP               # the myocyte side: a sink 20 times larger
STIM = -100.0              # µA/cm², 2 ms
ELL = 0.01


def direct(mp, mm, R, stimulate: str, T: float, dt: float = 0.01, thr: float = 0.0):
    """Activation times (Purkinje, myocyte) of the two coupled cells for every R (vectorised over R), RK4."""
    R = np.asarray(R, float)
    yp, ym = mp.initial_state(len(R)), mm.initial_state(len(R))
    dp, dm = np.empty_like(yp), np.empty_like(ym)
    n_p = len(yp)

    def pulse(t, who):
        return STIM if who == stimulate and 0.0 <= t < 2.0 else 0.0

    def f(t, y):
        mp.rhs(t, y[:n_p], pulse(t, "purkinje"), dp)
        mm.rhs(t, y[n_p:], pulse(t, "myocyte"), dm)
        current = (y[0] - y[n_p]) / R                       # µA, Purkinje -> myocyte
        dp[0] -= current / AP                               # Cm = 1 µF/cm²
        dm[0] += current / AM
        return np.concatenate([dp, dm])

    y = np.concatenate([yp, ym])
    act = np.full((2, len(R)), np.nan)
    for s in range(round(T / dt)):
        t = s * dt
        k1 = f(t, y)
        k2 = f(t + dt / 2, y + dt / 2 * k1)
        k3 = f(t + dt / 2, y + dt / 2 * k2)
        k4 = f(t + dt, y + dt * k3)
        new = y + dt / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        for i, row in enumerate((0, n_p)):
            up = np.isnan(act[i]) & (new[row] >= thr) & (y[row] < thr)
            act[i, up] = t + dt * (thr - y[row, up]) / (new[row, up] - y[row, up])
        y = new
    return act


def lumped(mp, mm, R, stimulate: str, T: float, dt: float = 0.01, check: bool = False):
    """The same through the coupling code: (Purkinje activation, myocyte activation, the charge's drift: with
    ``check``, which also checks each step's current against (V_p − V_m)/R)."""
    net = Network([[0, 0, 0], [ELL, 0, 0]], [[0, 1]], 0)
    c = cable.Cable(net, mp, sigma=1e4, dt=dt, radius=AP / (2 * math.pi * ELL),
                    stimulus=cable.Stimulus(current_density=STIM, radius=1.0) if stimulate == "purkinje" else None)
    assert c.area.sum() == pytest.approx(AP)
    ym = mm.initial_state(1)
    stim = (TissueStimuli([Protocol(0.0, 2.0)], np.array([[STIM]]), ["m"]) if stimulate == "myocyte"
            else TissueStimuli([], np.zeros((0, 1)), []))
    myocyte = NumpyBackend(mm, ym, np.zeros((1, 3)))
    j = coupling.Junctions([1], [[ELL, 0, 0]], [[ELL, 0, 0]], 1e-3, R, c.C[1], [AM], [1.0], dt)
    assert j.n == 1 and not len(j.uncoupled)
    act, drift = np.nan, 0.0
    for s in range(round(T / dt)):
        t = s * dt
        v0 = ym[0, 0]
        if check:
            q = c.C[1] * c.V[1] + AM * ym[0, 0]
            i = j.step(c.V, ym[0])
            drift = max(drift, abs(c.C[1] * c.V[1] + AM * ym[0, 0] - q))
            assert i[0] == pytest.approx((c.V[1] - ym[0, 0]) / R)
        else:
            j.step(c.V, ym[0])
        c.step(t)
        myocyte.advance(t, dt, 1, stim)
        if np.isnan(act) and ym[0, 0] >= 0.0 > v0:
            act = t + dt * (0.0 - v0) / (ym[0, 0] - v0)
    return np.nanmin(c.activation) if np.isfinite(c.activation).any() else np.nan, act, drift


@pytest.fixture(scope="module")
def ms():
    """Mitchell-Schaeffer with a short action potential (τ_close 15 ms): a junction that does not excite the
    myocyte before the Purkinje cell repolarises (below −70 mV at 43 ms) blocks it for good: the runs' 60 ms
    decide."""
    return cable.make_model("mitchell-schaeffer", parameters={"tau_close": 15.0})


def test_anterograde_delay_and_retrograde_activation_match_the_two_cell_model(ms):
    rs = [1e4, 3e4, 1e5]
    ante = direct(ms, ms, rs, "purkinje", 25.0)
    retro = direct(ms, ms, rs, "myocyte", 12.0)
    for k, R in enumerate(rs[:2]):
        p, m, drift = lumped(ms, ms, R, "purkinje", 25.0, check=True)
        assert drift < 1e-12                                   # the junction moves charge, creates none
        delay, want = m - p, ante[1, k] - ante[0, k]
        assert want > 4.0                                      # ms: a real delay, growing with R
        assert delay == pytest.approx(want, rel=0.01), (R, delay, want)
    for k, R in enumerate(rs):
        p, m, _ = lumped(ms, ms, R, "myocyte", 12.0)
        assert p - m == pytest.approx(retro[0, k] - retro[1, k], rel=0.02), R
    assert ante[1, 1] - ante[0, 1] > ante[1, 0] - ante[0, 0] and np.all(np.diff(retro[0] - retro[1]) > 0)


def test_block_above_a_resistance_and_only_anterograde(ms):
    # the two-cell model's threshold: the largest R on a fine grid at which the myocyte still activates
    rs = np.geomspace(4e4, 7e4, 13)
    ante = direct(ms, ms, rs, "purkinje", 60.0)
    ok = np.isfinite(ante[1])
    assert ok[0] and not ok[-1] and np.all(np.diff(ok.astype(int)) <= 0)
    threshold = rs[ok].max()
    for factor, activates in ((0.9, True), (1.1, False)):
        _, m, _ = lumped(ms, ms, threshold * factor, "purkinje", 60.0)
        assert np.isfinite(m) == activates, (threshold, factor, m)
    # retrograde: the large myocyte drives the small Purkinje cell well beyond the anterograde threshold
    p, m, _ = lumped(ms, ms, 3 * threshold, "myocyte", 30.0)
    assert np.isfinite(p) and np.isfinite(m)


def test_a_cable_end_drives_a_tissue_through_several_nodes_and_back(ms):
    """A 0.5 cm Purkinje cable whose end joins a 0.5 cm, 1D tissue (a strand of 1e-4 cm² section) at x = 0.5 cm: the
    junction spreads over the tissue nodes within 0.055 cm; the wave crosses it with a delay that grows with R, is
    blocked anterogradely at a large R, and at that R still crosses retrogradely (from the tissue's far end)."""
    fibre = cable.straight(0.5, 0.01)
    section, chi = 1e-4, 1400.0

    def run(R, stimulate, T):
        c = cable.Cable(fibre, ms, dt=0.01, stimulus=cable.Stimulus(current_density=STIM, radius=0.05)
                        if stimulate == "purkinje" else None)
        # the tissue: the cable's discretisation is the tissue's 1D monodomain (test_purkinje_cable.py)
        slab = cable.straight(0.5, 0.01, start=(0.5, 0.0, 0.0))
        t = cable.Cable(slab, ms, sigma=1.36, dt=0.01, chi=chi, radius=math.sqrt(section / math.pi))
        if stimulate == "myocyte":        # the tissue's far end
            far = np.where(slab.points[:, 0] >= 0.95, STIM, 0.0)
            t.stimuli = TissueStimuli([Protocol(0.0, 2.0)], far[None, :], ["far"])
        vol = t.volume
        j = coupling.Junctions(fibre.terminals, fibre.points[fibre.terminals], slab.points, 0.055, R,
                               c.C[fibre.terminals], coupling.tissue_capacitance(vol, 1.0, chi), vol, 0.01)
        assert j.n == 1 and list(j.tissue_nodes) == [0, 1, 2, 3, 4, 5]      # x = 0.50 ... 0.55
        assert j.W.sum() == pytest.approx(1.0) and j.W[0, 0] == pytest.approx(j.W[0, 1] / 2)   # by volume
        for s in range(round(T / 0.01)):
            j.step(c.V, t.V)
            c.step(s * 0.01)
            t.step(s * 0.01)
        return c.activation, t.activation

    delays = []
    for R in (100.0, 1000.0):
        pa, ta = run(R, "purkinje", 25.0)
        assert np.isfinite(pa).all() and np.isfinite(ta[:25]).all(), R
        delays.append(ta[0] - pa[-1])
    assert 0 < delays[0] < 0.1 < 0.5 < delays[1] < 2.0, delays           # ms
    pa, ta = run(1e4, "purkinje", 25.0)
    assert np.isfinite(pa).all() and np.isnan(ta).all()                # blocked at the junction
    pa, ta = run(1e4, "myocyte", 40.0)
    assert np.isfinite(ta).all() and np.isfinite(pa).all()             # retrograde at the same R
    assert pa.min() > ta[0] + 5.0                                      # a long retrograde delay
    pa, ta = run(1000.0, "myocyte", 40.0)
    assert ta[0] < pa[-1] < pa[0]                                      # terminal first, then back to the root


def test_the_schur_complement_step_is_the_whole_systems_backward_euler():
    """Junctions whose tissue nodes overlap (several terminals share nodes): the step, solved on the terminals by
    the Schur complement, equals (C/Δt + L_J) V' = (C/Δt) V solved whole, and conserves charge."""
    from scipy import sparse
    from scipy.sparse.linalg import spsolve
    rng = np.random.default_rng(3)
    tissue = rng.random((400, 3))
    terminals = np.arange(12)
    tpoints = rng.random((12, 3))
    vol = rng.random(400) + 0.5
    Ct = coupling.tissue_capacitance(vol, 1.0, 1400.0)
    j = coupling.Junctions(terminals, tpoints, tissue, 0.25, rng.random(12) + 0.5, rng.random(12) + 0.1, Ct, vol, 0.02)
    assert j.n == 12 and (j.W != 0).sum(axis=0).max() > 1          # some tissue nodes belong to several junctions
    vp, vm = rng.random(12) * 100 - 80, rng.random(400) * 100 - 80
    whole = spsolve((sparse.diags(j.C / j.dt) + j.L).tocsc(), j.C / j.dt * np.r_[vp, vm[j.tissue_nodes]])
    charge = j.C @ np.r_[vp, vm[j.tissue_nodes]]
    j.step(vp, vm)
    assert np.allclose(np.r_[vp, vm[j.tissue_nodes]], whole, rtol=0, atol=1e-10)
    assert j.C @ np.r_[vp, vm[j.tissue_nodes]] == pytest.approx(charge, rel=1e-12)


def test_the_device_kernels_arrays_give_the_same_step():
    """Junctions.device_arrays, applied as kernels/resident.cu's cs_pmj_* kernels apply them (here in NumPy, row by
    row), give the host's step: the new potentials, the tissue side's V̄_m before the step and the currents."""
    rng = np.random.default_rng(5)
    tissue = rng.random((300, 3))
    vol = rng.random(300) + 0.5
    j = coupling.Junctions(np.arange(10), rng.random((10, 3)), tissue, 0.25, rng.random(10) + 0.5,
                           rng.random(10) + 0.1, coupling.tissue_capacitance(vol, 1.0, 1400.0), vol, 0.02)
    a = j.device_arrays()
    vp, vm = rng.random(10) * 100 - 80, rng.random(300) * 100 - 80
    vt = vm[j.tissue_nodes].copy()
    rows = [slice(a["ptr"][i], a["ptr"][i + 1]) for i in range(j.n)]
    vbar = np.array([a["w"][r] @ vt[a["col"][r]] for r in rows])
    rhs = a["cp"] * vp[j.terminals] + np.array([a["g1"][r] @ vt[a["col"][r]] for r in rows])
    newp = a["sinv"] @ rhs
    per_node = [slice(a["ptr2"][k], a["ptr2"][k + 1]) for k in range(len(vt))]
    newt = np.array([a["a"][k] * vt[k] + a["g2"][r] @ newp[a["col2"][r]] for k, r in enumerate(per_node)])
    current = np.array([(newp[i] - a["w"][r] @ newt[a["col"][r]]) / a["resistance"][i] for i, r in enumerate(rows)])
    assert np.allclose(vbar, j.tissue_potential(vm), rtol=0, atol=1e-12)
    host = j.step(vp, vm)
    assert np.allclose(newp, vp[j.terminals], rtol=0, atol=1e-10)
    assert np.allclose(newt, vm[j.tissue_nodes], rtol=0, atol=1e-10)
    assert np.allclose(current, host, rtol=1e-9, atol=1e-15)

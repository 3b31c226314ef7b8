"""The Purkinje cable (cardiosim.purkinje.cable): on a straight cable it is the tissue's 1D monodomain node for node
(a cardiosim run with the same cell model, conductivity, χ, Cm, stimulus and steps gives the same activation times);
its conduction velocity converges as the spacing is halved; charge is conserved at branch points (Kirchhoff); the
velocity grows as √radius (cable theory); the default cell model is Aslanidi 2009's Purkinje cell."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cardiosim import api
from cardiosim.purkinje import cable
from cardiosim.purkinje.network import Network

MS = dict(current_density=-100.0, duration=2.0)      # a Mitchell-Schaeffer stimulus that starts a wave at once


def tissue_activation(tmp_path, model: str, h: float, length: float, duration: float, dt: float, stim: dict,
                      sigma: float, chi: float, integrator="forward-euler", time_scheme="backward-euler",
                      splitting="godunov", k=1):
    """A cardiosim 1D monodomain run's activation map: σ_i = σ_e = 2σ along and across (σ_m = σ), the stimulus a box
    on x <= stim['radius']."""
    cfg = {"simulation": {"equations": "monodomain", "duration": duration, "dt": dt, "progress_interval": 0,
                          "time_scheme": time_scheme, "splitting": splitting, "ode_substeps": k},
           "grid": {"size": [length], "spacing": h},
           "tissue": {"sigma_il": 2 * sigma, "sigma_el": 2 * sigma, "sigma_it": 2 * sigma, "sigma_et": 2 * sigma,
                      "chi": chi, "Cm": 1.0},
           "cell": {"model": model, "integrator": integrator, "backend": "numpy"},
           "stimulus": [{"shape": "box", "lower": [0.0], "upper": [stim["radius"]], "duration": stim["duration"],
                         "current_density": stim["current_density"]}],
           "output": {"interval": duration}}
    done = api.run(api.config(cfg, name=f"tissue-{h}"), output=tmp_path / f"tissue-{h}-{time_scheme}.h5")
    with done.results() as r:
        return r.map("activation_time")


def cable_activation(model, h, length, duration, dt, stim, **kw):
    c = cable.Cable(cable.straight(length, h), model, dt=dt, stimulus=cable.Stimulus(**stim), **kw)
    c.run(duration)
    return c


@pytest.mark.parametrize("time_scheme, splitting", [("backward-euler", "godunov"), ("crank-nicolson", "strang")])
def test_a_straight_cable_is_the_tissues_1d_monodomain(petsc, tmp_path, time_scheme, splitting):
    stim = dict(MS, radius=0.105)
    act = tissue_activation(tmp_path, "mitchell-schaeffer", 0.02, 1.0, 12.0, 0.02, stim, sigma=cable.SIGMA,
                            chi=2 / cable.RADIUS, time_scheme=time_scheme, splitting=splitting, k=2)
    c = cable_activation(cable.make_model("mitchell-schaeffer"), 0.02, 1.0, 12.0, 0.02, stim,
                         time_scheme=time_scheme, splitting=splitting, ode_substeps=2)
    assert np.isfinite(act).all() and np.isfinite(c.activation).all()
    np.testing.assert_allclose(c.activation, act, rtol=0, atol=1e-9)


def test_conduction_velocity_converges_with_the_spacing():
    m = cable.make_model("mitchell-schaeffer")
    cv = []
    for h in (0.04, 0.02, 0.01):
        c = cable_activation(m, h, 2.0, 14.0, 0.005, dict(MS, radius=0.1))
        cv.append(cable.conduction_velocity(c, round(0.5 / h), round(1.5 / h)))
    diffs = np.abs(np.diff(cv))
    assert diffs[1] < 0.5 * diffs[0], cv
    assert diffs[1] < 0.01 * cv[-1], cv


def test_branch_points_conserve_charge_and_split_the_wave_evenly():
    # a Y: a trunk and two equal daughters at ±40°
    trunk = np.linspace([0, 0, 0], [1.0, 0, 0], 51)
    ang = math.radians(40)
    d1 = trunk[-1] + np.linspace(0, 1.0, 51)[1:, None] * [math.cos(ang), math.sin(ang), 0]
    d2 = trunk[-1] + np.linspace(0, 1.0, 51)[1:, None] * [math.cos(ang), -math.sin(ang), 0]
    pts = np.concatenate([trunk, d1, d2])
    e = [(i, i + 1) for i in range(50)] + [(50, 51)] + [(51 + i, 52 + i) for i in range(49)] + \
        [(50, 101)] + [(101 + i, 102 + i) for i in range(49)]
    net = Network(pts, e, 0)
    assert net.is_tree() and sorted(net.terminals) == [100, 150]
    m = cable.make_model("mitchell-schaeffer")
    c = cable.Cable(net, m, dt=0.01, stimulus=cable.Stimulus(radius=0.1, **MS))
    # diffusion alone conserves the charge Σ C_i V_i (Kirchhoff at the branch point: L's columns sum to zero)
    rng = np.random.default_rng(0)
    c.V[:] = rng.normal(-80, 10, net.n_nodes)
    q = c.C @ c.V
    c.diffuse()
    assert c.C @ c.V == pytest.approx(q, rel=1e-12)
    c = cable.Cable(net, m, dt=0.01, stimulus=cable.Stimulus(radius=0.1, **MS))
    c.run(20.0)
    assert np.isfinite(c.activation).all()
    assert c.activation[100] == pytest.approx(c.activation[150], abs=1e-9)
    assert c.activation[100] > c.activation[50] > c.activation[25]


def test_velocity_grows_as_the_square_root_of_the_radius():
    # cable theory: with the membrane on the cylinder, D = σ r / (2 Cm), so four times the radius is the same cable
    # at twice the length scale; on grids of the same nodes per length, twice the velocity to round-off
    m = cable.make_model("mitchell-schaeffer")
    cv = {}
    for r, scale in ((0.002, 1.0), (0.008, 2.0)):
        h = 0.005 * scale
        c = cable_activation(m, h, 1.0 * scale, 16.0, 0.005, dict(MS, radius=0.05 * scale + 1e-9), radius=r)
        cv[r] = cable.conduction_velocity(c, round(0.25 * scale / h), round(0.75 * scale / h))
    assert cv[0.008] / cv[0.002] == pytest.approx(2.0, rel=1e-9)


def test_a_bundle_of_fibres_conducts_as_one_with_more_charge():
    m = cable.make_model("mitchell-schaeffer")
    one = cable_activation(m, 0.02, 1.0, 12.0, 0.02, dict(MS, radius=0.105))
    many = cable_activation(m, 0.02, 1.0, 12.0, 0.02, dict(MS, radius=0.105), fibres=100.0)
    np.testing.assert_allclose(many.activation, one.activation, rtol=0, atol=1e-9)
    np.testing.assert_allclose(many.C, 100.0 * one.C, rtol=1e-14)


def test_the_default_cell_model_is_a_purkinje_cell_and_conducts():
    m = cable.make_model()
    assert cable.DEFAULT_MODEL.name == "aslanidi_Purkinje_model_2009.cellml" and m.n_states == 30
    c = cable_activation(m, 0.02, 0.6, 6.0, 0.01, dict(radius=0.1), integrator="rush-larsen")
    assert np.isfinite(c.activation).all()
    v = cable.conduction_velocity(c, 10, 25)
    assert 0.1 < v < 0.4          # cm/ms: a Purkinje fibre's 1-4 m/s


@pytest.mark.slow
def test_purkinje_cell_cable_converges_and_matches_the_tissue(petsc, tmp_path):
    """Aslanidi 2009 (the default): CV at 0.04, 0.02, 0.01 cm, and the tissue at 0.02 cm."""
    m = cable.make_model()
    stim = dict(radius=0.105)
    cv = []
    for h in (0.04, 0.02, 0.01):
        c = cable_activation(m, h, 2.0, 12.0, 0.01, stim, integrator="rush-larsen")
        cv.append(cable.conduction_velocity(c, round(0.5 / h), round(1.5 / h)))
        if h == 0.02:
            act = tissue_activation(tmp_path, str(cable.DEFAULT_MODEL), h, 2.0, 12.0, 0.01,
                                    dict(stim, current_density=-100.0, duration=2.0), sigma=cable.SIGMA,
                                    chi=2 / cable.RADIUS, integrator="rush-larsen")
            tissue_cv = 1.0 / (act[75] - act[25])
            assert tissue_cv == pytest.approx(cv[-1], rel=1e-9)
    diffs = np.abs(np.diff(cv))
    assert diffs[1] < 0.5 * diffs[0], cv
    assert 0.15 < cv[-1] < 0.25, cv


def test_the_tree_solve_is_the_sparse_direct_solve():
    """Hines's O(n) elimination (cable.TreeSolve, kernels/tree_solve.c) on a random tree numbered in no particular
    order gives what SuperLU gives for the same matrix; a network with a loop is solved by SuperLU."""
    from scipy import sparse
    from scipy.sparse.linalg import spsolve
    rng = np.random.default_rng(7)
    n = 3000
    parent = np.array([0] + [rng.integers(max(0, i - 40), i) for i in range(1, n)])
    scramble = rng.permutation(n)
    edges = scramble[np.stack([parent[1:], np.arange(1, n)], axis=1)]
    net = Network(rng.random((n, 3)), edges, int(scramble[0]))
    g, c = rng.random(n - 1) + 0.5, rng.random(n) + 0.1
    L = net.adjacency(g)
    A = (sparse.diags(c + np.asarray(L.sum(axis=1)).ravel()) - L).tocsc()
    b = rng.random(n)
    x = cable.TreeSolve(net, A.diagonal(), -g).solve(b)
    assert np.allclose(x, spsolve(A, b), rtol=1e-12, atol=0)
    ring = Network(np.array([[0, 0, 0], [0.01, 0, 0], [0, 0.01, 0]], float), np.array([[0, 1], [1, 2], [2, 0]]), 0)
    assert not isinstance(cable.Cable(ring, cable.make_model("mitchell-schaeffer"))._lhs, cable.TreeSolve)
    tree = cable.straight(0.05, 0.01)
    assert isinstance(cable.Cable(tree, cable.make_model("mitchell-schaeffer"))._lhs, cable.TreeSolve)

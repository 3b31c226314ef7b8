"""cardiosim.analysis.arrhythmia against fields whose answers are known: spirals turning rigidly about a tip that
stays put or moves on a circle (tests/synthetic.py), and pure sinusoids."""

import numpy as np
import pytest

from cardiosim.analysis import arrhythmia as A
from synthetic import spiral, to_mv

H = 0.05                                   # cm
X = Y = np.arange(41) * H                  # a 2 x 2 cm sheet
OMEGA = 2 * np.pi / 100.0                  # rad/ms: 10 Hz
CENTRE = (1.013, 0.987)                    # cm, inside a plaquette (not on a node or an edge)


def circle(radius, period, centre=CENTRE):
    """A tip moving counter-clockwise on a circle of ``radius`` cm once every ``period`` ms."""
    return lambda t: (centre[0] + radius * np.cos(2 * np.pi * t / period),
                      centre[1] + radius * np.sin(2 * np.pi * t / period))


def fixed(centre):
    return lambda t: (np.full_like(t, centre[0]), np.full_like(t, centre[1]))


def distances(found, truth):
    """Per frame: the number of tips found and the distance (cm) of the nearest to the true tip."""
    counts = np.array([len(d) for d in found])
    near = np.array([np.min(np.hypot(d[:, 0] - x0, d[:, 1] - y0)) if len(d) else np.inf
                     for d, x0, y0 in zip(found, *truth)])
    return counts, near


def test_the_tip_of_the_true_phase_is_found_in_its_plaquette_over_a_whole_turn_of_its_circle():
    t = np.arange(0.0, 500.0, 2.0)                          # the tip goes once round its circle
    tip = circle(0.3, 500.0)
    ph = A.wrap(spiral(X, Y, t, tip, OMEGA))
    found = [A.tips(p, X, Y) for p in ph]
    counts, near = distances(found, tip(t))
    assert (counts == 1).all()
    assert near.max() <= H / np.sqrt(2) + 1e-12              # the plaquette's centre: within half its diagonal
    assert all(d[0, 2] == 1 for d in found)                 # counter-clockwise increasing phase: charge +1
    tracks = A.link_tips(t, found, max_distance=3 * H)
    assert len(tracks) == 1 and len(tracks[0].t) == len(t) and tracks[0].charge == 1
    assert tracks[0].lifetime == t[-1] - t[0]
    # the mirror image turns the other way
    mirror = A.wrap(spiral(X, Y, t[:5], tip, OMEGA, sign=-1))
    assert [A.tips(p, X, Y)[:, 2].tolist() for p in mirror] == [[-1.0]] * 5


def test_the_hilbert_phase_of_vm_finds_a_moving_tip_within_one_spacing_over_a_whole_turn():
    t = np.arange(0.0, 1000.0, 2.0)                         # ten turns of the spiral, one of the tip's circle
    tip = circle(0.2, 1000.0)
    vm = to_mv(spiral(X, Y, t, tip, OMEGA))
    ph = A.phase(vm)
    found = [A.tips(p, X, Y) for p in ph]
    counts, near = distances(found, tip(t))
    assert (counts == 1).all()
    assert near.max() <= H
    tracks = A.link_tips(t, found, max_distance=3 * H)
    assert len(tracks) == 1 and len(tracks[0].t) == len(t)


def test_a_shifted_spiral_shifts_its_tip_and_keeps_its_dominant_frequency():
    t = np.arange(0.0, 1000.0, 2.0)
    shift = np.array([0.3, -0.25])
    results = []
    for centre in (np.array(CENTRE), np.array(CENTRE) + shift):
        vm = to_mv(spiral(X, Y, t, fixed(centre), OMEGA))
        ph = A.phase(vm)
        found = [A.tips(p, X, Y) for p in ph]
        counts, near = distances(found, fixed(centre)(t))
        assert (counts == 1).all() and near.max() <= H / np.sqrt(2) + 1e-12
        df, resolution = A.dominant_frequency(t, vm)
        assert resolution == pytest.approx(1.0)                         # 1000 / (500 x 2 ms) Hz
        assert np.abs(df - 10.0).max() <= resolution                    # omega / 2 pi at every node
        results.append(np.mean([d[0, :2] for d in found], axis=0))
    assert np.abs(results[1] - results[0] - shift).max() <= H


def test_dominant_frequency_off_the_bins_is_within_one_bin():
    t = np.arange(0.0, 1500.0, 1.0)
    f = 7.37                                                  # Hz, between bins of 2/3 Hz
    v = np.cos(2 * np.pi * f * t / 1000.0)[:, None] * np.ones((1, 3))
    df, resolution = A.dominant_frequency(t, v)
    assert resolution == pytest.approx(1000.0 / 1500.0)
    assert np.abs(df - f).max() <= resolution
    fine, same = A.dominant_frequency(t, v, pad=8)            # the same spectrum sampled 8 times more finely
    assert same == resolution and np.abs(fine - f).max() <= resolution / 8
    with pytest.raises(ValueError, match="evenly spaced"):
        A.dominant_frequency(np.r_[t[:-1], t[-1] + 0.5], v)


def test_activations_and_cycle_length_of_a_sinusoid():
    t = np.arange(0.0, 1000.0, 2.0)
    psi = np.array([0.0, 1.0, 2.5])                           # three nodes, shifted in phase
    v = to_mv(OMEGA * t[:, None] - psi[None])                 # Vm = -30 mV where cos = 0
    act = A.activations(t, v, threshold=-30.0)
    # upward through -30 mV where the phase is -pi/2 (mod 2 pi): t = (psi - pi/2 + 2 pi k) / omega
    for n in range(3):
        want = (psi[n] - np.pi / 2 + 2 * np.pi * np.arange(12)) / OMEGA
        want = want[(want > t[0]) & (want < t[-1])]
        got = act[:, n][np.isfinite(act[:, n])]
        np.testing.assert_allclose(got, want, atol=0.05)
    np.testing.assert_allclose(A.cycle_length(act), 100.0, atol=1e-9)
    last = A.activations(t, v, threshold=-30.0, last=3)
    assert last.shape == (3, 3)
    np.testing.assert_array_equal(last[:, 0], act[np.isfinite(act[:, 0]), 0][-3:])


def test_phase_of_a_sinusoid_is_its_argument():
    t = np.arange(0.0, 400.0, 1.0)                            # four whole periods
    v = -40.0 + 50.0 * np.cos(OMEGA * t)
    want = A.wrap(OMEGA * t)
    np.testing.assert_allclose(A.wrap(A.phase(v) - want), 0.0, atol=1e-9)
    # a record of 3.7 periods: about 1 rad off at its ends, within 0.2 rad a quarter period in
    err = np.abs(A.wrap(A.phase(v[:370]) - want[:370]))
    assert err.max() > 0.9 and err[A.trusted(370, 100.0)].max() < 0.2
    assert A.trusted(370, 100.0) == slice(25, 345)
    emb = A.phase(v, "embedding", delay=25)                   # a quarter period
    assert np.isnan(emb[:25]).all()
    np.testing.assert_allclose(A.wrap(emb[25:] - want[25:]), 0.0, atol=1e-9)
    with pytest.raises(ValueError, match="delay"):
        A.phase(v, "embedding")


def test_charges_need_every_corner():
    ph = A.wrap(spiral(X[:6], Y[:6], [0.0], fixed((0.13, 0.12)), OMEGA))[0]
    assert A.charges(ph).sum() == 1
    ph[2, 2] = np.nan                                         # a corner of the tip's plaquette
    assert A.charges(ph).sum() == 0


def test_uniform_leading_times():
    assert A.uniform([0, 5, 10, 15, 17]) == 4
    assert A.uniform([0, 5, 10]) == 3
    assert A.uniform([0, 5, 11, 16]) == 2

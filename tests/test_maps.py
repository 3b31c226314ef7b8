"""Activation-time and APD maps (cardiosim.analysis.maps): against the CVODE reference beats, against the batch
biomarkers of cardiosim.analysis.biomarkers, in tissue against the probe traces, and saved/restored through state()."""

from pathlib import Path

import numpy as np
import pytest

from cardiosim.analysis.maps import ActivationMap, APDMap
from cardiosim.analysis.biomarkers import beat_biomarkers
from conftest import REFERENCE, run_cli


def feed(t, v, level, threshold=0.0, nodes=1):
    """Run the accumulators over a trace, as the time loop does (one update per sample interval)."""
    v = np.asarray(v, dtype=float)
    v0 = np.full(nodes, v[0])
    act = ActivationMap(v0, threshold)
    apd = APDMap(act, v0, level)
    for i in range(1, len(t)):
        vi = np.full(nodes, v[i])
        act.update(t[i - 1], t[i], vi)
        apd.update(t[i - 1], t[i], vi)
    return act, apd


def test_apd_of_a_trapezoid():
    """A trace whose crossings are known by hand: rest −80, up to +20 at t = 1..2 ms, plateau to 10 ms,
    linear fall back to −80 at 30 ms. Activation (0 mV) at 1.8 ms; the 90 % level is −70 mV, reached at
    10 + 90/100·20 = 28 ms: APD90 = 26.2 ms; APD50 (level −30 mV) at 20 ms: 18.2 ms."""
    t = np.array([0.0, 1.0, 2.0, 10.0, 30.0, 40.0])
    v = np.array([-80.0, -80.0, 20.0, 20.0, -80.0, -80.0])
    tf = np.linspace(0, 40, 4001)
    vf = np.interp(tf, t, v)                       # sampled every 0.01 ms: still exact (piecewise linear)
    for level, repol in ((90, 28.0), (50, 20.0)):
        act, apd = feed(tf, vf, level)
        assert act.time[0] == pytest.approx(1.8, abs=1e-9)
        assert apd.repolarisation[0] == pytest.approx(repol, abs=1e-9)
        assert apd.apd[0] == pytest.approx(repol - 1.8, abs=1e-9)


def test_no_repolarisation_is_nan_and_no_activation_is_nan():
    t = np.linspace(0, 10, 101)
    act, apd = feed(t, np.where(t > 2, 10.0, -80.0), 90)      # activates, never repolarises
    assert np.isfinite(act.time[0]) and np.isnan(apd.apd[0])
    act, apd = feed(t, np.full_like(t, -80.0), 90)            # never activates
    assert np.isnan(act.time[0]) and np.isnan(apd.apd[0])


@pytest.mark.parametrize("level,expected", [(25, 3.31), (50, 5.13), (75, 14.28), (90, 22.79)])
def test_bondarenko_reference_apd(level, expected):
    """CVODE reference, Bondarenko apical beat 1 (spec.md §6): APDx from the stimulus onset at t = 0. Our map
    measures from activation; activation + APD is the time of repolarisation, which the table gives."""
    d = np.loadtxt(REFERENCE / "bondarenko2004" / "trace_apical_1Hz_beat1.csv", delimiter=",", skiprows=1)
    act, apd = feed(d[:, 0], d[:, 1], level)
    print(f"APD{level}: repolarised at {apd.repolarisation[0]:.4f} ms (reference {expected}), "
          f"activation {act.time[0]:.4f} ms, APD from activation {apd.apd[0]:.4f} ms")
    assert act.time[0] + apd.apd[0] == pytest.approx(expected, abs=0.006)   # the table's rounding


@pytest.mark.parametrize("level,expected", [(25, 202.744), (50, 261.584), (75, 281.769), (90, 290.165)])
def test_tt06_reference_apd(level, expected):
    """CVODE reference, TT06 epi beat 1 (tt06/README.md): APDx from the time of dV/dt max (0.90 ms)."""
    d = np.loadtxt(REFERENCE / "tt06" / "trace_epi_1Hz_beat1.csv", delimiter=",", skiprows=1)
    act, apd = feed(d[:, 0], d[:, 1], level)
    from_dvdt_max = apd.repolarisation[0] - 0.90
    print(f"APD{level} from dV/dt max: {from_dvdt_max:.4f} ms (reference {expected})")
    assert from_dvdt_max == pytest.approx(expected, abs=0.02)   # the trace's 0.05 ms sampling


@pytest.mark.parametrize("level", [25, 50, 75, 90])
def test_same_as_batch_biomarkers(level):
    """The step-by-step map and the batch biomarkers find the same crossing, to round-off."""
    d = np.loadtxt(REFERENCE / "tt06" / "trace_epi_1Hz_beat1.csv", delimiter=",", skiprows=1)
    t, v = d[:, 0], d[:, 1]
    _, apd = feed(t, v, level)
    b = beat_biomarkers(t, v, [0.0])[0]                       # origin: the stimulus onset at t = 0
    assert apd.repolarisation[0] == pytest.approx(b[f"APD{level}"], abs=1e-9)


def test_state_round_trip_continues_bit_identically():
    """Stop half-way, save state(), restore into fresh accumulators, continue: the same arrays bit for bit."""
    d = np.loadtxt(REFERENCE / "bondarenko2004" / "trace_apical_1Hz_beat1.csv", delimiter=",", skiprows=1)
    t = d[:, 0]
    rng = np.random.default_rng(1)
    shift = rng.uniform(0, 5, 6)                              # six nodes, each a shifted copy of the beat
    v = np.array([np.interp(t - s, t, d[:, 1]) for s in shift]).T   # (samples, nodes)
    whole_a = ActivationMap(v[0].copy(), 0.0)
    whole_p = APDMap(whole_a, v[0].copy(), 90)
    half = 300                                                # 15 ms: some nodes have activated, none repolarised
    parts = [ActivationMap(v[0].copy(), 0.0)]
    parts.append(APDMap(parts[0], v[0].copy(), 90))
    for i in range(1, len(t)):
        for a, p in ((whole_a, whole_p), tuple(parts)):
            a.update(t[i - 1], t[i], v[i])
            p.update(t[i - 1], t[i], v[i])
        if i == half:
            saved = {"activation": parts[0].state(), "apd": parts[1].state()}
            assert all(isinstance(x, np.ndarray) for s in saved.values() for x in s.values())
            fresh_a = ActivationMap(np.zeros(6), 0.0)
            fresh_p = APDMap(fresh_a, np.zeros(6), 90)
            fresh_a.load_state(saved["activation"])
            fresh_p.load_state(saved["apd"])
            parts = [fresh_a, fresh_p]
    assert np.isfinite(whole_p.apd).all()
    for a, b in ((whole_a, parts[0]), (whole_p, parts[1])):
        for name, arr in a.state().items():
            np.testing.assert_array_equal(arr, b.state()[name], err_msg=name)


def test_load_state_rejects_a_wrong_shape():
    a = ActivationMap(np.zeros(4), 0.0)
    with pytest.raises(ValueError, match="time"):
        a.load_state({"time": np.zeros(5), "prev": np.zeros(5)})


@pytest.mark.mpi
@pytest.mark.slow
def test_tissue_apd_map_matches_probe_traces(tmp_path):
    """On 2 ranks: the APD75 map at the probe nodes equals APD75 computed afterwards from the probe traces
    (recorded every PDE step) by the batch biomarkers: same samples, same definition."""
    import h5py
    from cardiosim.analysis.maps import activation_time
    out = tmp_path / "apd.h5"
    run_cli(["run", Path(__file__).parent / "configs" / "sheet.toml", "--quiet", "--output", out,
             "--set", "simulation.duration=100.0", "--set", "simulation.dt=0.05", "--set", "grid.spacing=0.04",
             "--set", "cell.parameters={tau_close=15.0}", "--set", "output.activation_threshold=-40.0",
             "--set", "output.apd_level=75.0", "--set", "output.interval=10.0"],
            np=2, cwd=tmp_path, check=True, timeout=300)
    with h5py.File(out) as f:
        apd = f["maps/apd"][:]
        assert f["maps/apd"].attrs["level"] == 75.0
        h = f["grid"].attrs["spacing"]
        t = f["probes/time"][:]
        for name in ("near", "middle", "far"):
            node = np.round(f[f"probes/{name}"].attrs["node_position"] / h).astype(int)
            v = f[f"probes/{name}/Vm"][:]
            expected = beat_biomarkers(t, v, [0.0])[0]["APD75"] - activation_time(t, v, -40.0)
            got = apd[node[1], node[0]]
            print(f"{name}: APD75 map {got:.6f} ms, from the probe trace {expected:.6f} ms")
            assert got == pytest.approx(expected, abs=1e-9)
        assert np.isfinite(apd).all()
        assert 20.0 < apd.mean() < 60.0

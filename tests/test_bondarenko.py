"""Bondarenko 2004: NumPy reference vs C kernel, native driver vs CVODE reference (spec.md §6), Forward-Euler limits.

Reference data: tests/data/reference/bondarenko2004.
Run with ``python3 -m pytest tests/test_bondarenko.py -q -s`` to see the biomarker tables.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import numpy as np
import pytest

from cardiosim.analysis.biomarkers import format_table
from cardiosim.cells import make
from cardiosim.cells.bondarenko import ALPHA_N_LIM, DERIVED_ORDER, PARAMETER_ORDER
from cardiosim.runtime.errors import SimulationError
from cardiosim.reaction.ode import native
from cardiosim.reaction.ode.native import NativeModel
from cardiosim.single_cell.pacing import run_cell
from cardiosim.cells.stimulus import Protocol
from conftest import REFERENCE

ROOT = Path(__file__).resolve().parents[1]
REF = REFERENCE / "bondarenko2004"
DT = 1e-4
PACE = Protocol(start=0.0, duration=0.5, period=1000.0, count=0)

def ap_states(variant):
    """States of one cell along beat 1 (from the native driver), plus one with V = -26.5 mV exactly (alpha_n)."""
    m = make("bondarenko", variant)
    nm = NativeModel(m)
    y = m.initial_state(1)
    out, t = [], 0.0
    for tt in (0.0, 0.2, 0.6, 1.0, 1.3, 1.6, 2.0, 3.0, 4.0, 6.0, 10.0, 15.0, 25.0, 40.0, 80.0, 200.0):
        k = int(round((tt - t) / DT))
        if k:
            nm.advance(y, t, DT, k, [PACE], [-80.0])
        t = tt
        out.append(y[:, 0].copy())
    guard = out[7].copy()
    guard[0] = -26.5
    out.append(guard)
    return m, nm, np.array(out).T.copy()


# --------------------------------------------------------------------------------------------------------------
def test_header_matches_python_order():
    """BP_* and BS_* enums of kernels/bondarenko.h are the Python parameter/state orders."""
    text = (native.kernel_dir() / "bondarenko.h").read_text()
    def enum(prefix):          # the names of the enum that ends with <prefix>COUNT_, comments stripped
        body = re.search(r"enum \{([^}]*?)\b" + prefix + r"COUNT_", text).group(1)
        return re.findall(r"\b" + prefix + r"(\w+),", re.sub(r"/\*.*?\*/", "", body, flags=re.S))

    bp = enum("BP_")
    assert bp == list(PARAMETER_ORDER) + list(DERIVED_ORDER)
    bs = enum("BS_")
    assert tuple(bs) == make("bondarenko").state_names
    assert re.search(r"#define BONDARENKO_N_PARAMS (\d+)", text).group(1) == str(len(bp))
    assert re.search(r"#define BONDARENKO_N_BASE_PARAMS (\d+)", text).group(1) == str(len(PARAMETER_ORDER))
    m = make("bondarenko", "septal", {"g_Kr": 0.1})
    v = m.parameter_vector()
    assert v.size == len(bp) and v[PARAMETER_ORDER.index("g_Kto_f")] == 0.0798
    assert v[PARAMETER_ORDER.index("g_Kr")] == 0.1


@pytest.mark.parametrize("variant", ["apical", "septal"])
def test_rhs_numpy_equals_c(variant):
    m, nm, Y = ap_states(variant)
    D = np.empty_like(Y)
    m.rhs(0.0, Y, 0.0, D)
    DC = np.array([nm.rhs(Y[:, j]) for j in range(Y.shape[1])]).T
    assert np.isfinite(D).all() and np.isfinite(DC).all()
    # Relative 1e-12, plus 1e-13 of the derivative's scale along the AP: at rest some derivatives are sums of
    # terms that cancel to ~1e-8 of their size, where one ulp of an exp (NumPy's vs libm's) shows relatively.
    scale = np.abs(D).max(axis=1, keepdims=True)
    err = np.abs(D - DC)
    assert (err <= 1e-12 * np.abs(D) + 1e-13 * scale).all(), (err / (np.abs(D) + scale)).max()
    # with a stimulus current
    m.rhs(0.0, Y[:, :1], -80.0, D[:, :1])
    assert abs(nm.rhs(Y[:, 0], -80.0)[0] - D[0, 0]) <= 1e-12 * abs(D[0, 0])


def test_alpha_n_guard_is_smooth():
    """With nKs = 0, dnKs/dt = alpha_n: finite at V = -26.5 mV and accurate around it, in NumPy and in C."""
    m = make("bondarenko")
    nm = NativeModel(m)
    x = np.array([0.0, 1e-12, -1e-9, 5e-7, -9.99e-7, 1e-6, -1.0001e-6, 3e-6, -1e-4, 1e-3])
    Y = m.initial_state(x.size)
    Y[0] = -26.5 + x
    Y[m.state_index("nKs")] = 0.0
    D = np.empty_like(Y)
    m.rhs(0.0, Y, 0.0, D)
    a = 0.128 * (Y[0] + 26.5)                      # the x the model sees (after rounding V)
    exact = ALPHA_N_LIM * (1.0 + a / 2.0 + a * a / 12.0 - a ** 4 / 720.0)   # series of a/(1 - e^-a)
    got_py = D[m.state_index("nKs")]
    got_c = np.array([nm.rhs(Y[:, j])[m.state_index("nKs")] for j in range(x.size)])
    assert np.allclose(got_py, exact, rtol=1e-12, atol=0) and np.allclose(got_c, exact, rtol=1e-12, atol=0)


# --------------------------------------------------------------------------------------------------------------
def test_beat1_apical_matches_cvode(tmp_path):
    t0 = time.perf_counter()
    rows = run_cell("bondarenko", "apical", {}, amplitude=-80.0, duration=0.5, period=1000.0, beats=1, dt=DT,
                    record_every=0.05, h5_path=tmp_path / "cell.h5", json_path=tmp_path / "cell.json")
    wall = time.perf_counter() - t0
    print(f"\nBondarenko apical, 1 Hz, beat 1, dt = {DT} ms, native driver: {wall:.2f} s wall")
    print(format_table(rows))
    b = rows[0]
    # spec.md §6 (CVODE): V_rest -82.42, V_peak 33.02, dV/dt_max 156 V/s, APD 3.31/5.13/14.28/22.79 ms,
    # Cai 0.115 -> 0.641 uM at 15.7 ms.
    assert b["V_rest"] == pytest.approx(-82.42, abs=0.01)
    assert b["V_peak"] == pytest.approx(33.02, abs=0.5)
    assert b["dVdt_max"] == pytest.approx(156.0, rel=0.01)
    for key, ref in (("APD25", 3.31), ("APD50", 5.13), ("APD75", 14.28), ("APD90", 22.79)):
        assert b[key] == pytest.approx(ref, rel=0.01), key
    assert b["Cai_rest"] == pytest.approx(0.115, rel=0.01)
    assert b["Cai_peak"] == pytest.approx(0.641, rel=0.02)
    assert b["Cai_time_to_peak"] == pytest.approx(15.7, rel=0.01)

    import h5py
    ref = np.loadtxt(REF / "trace_apical_1Hz_beat1.csv", delimiter=",", skiprows=1)
    with h5py.File(tmp_path / "cell.h5", "r") as f:
        t = f["trace/t"][:]
        assert f["trace/V"].attrs["unit"] == "mV" and f["biomarkers"].shape == (1,)
        traces = {n: f[f"trace/{n}"][:] for n in ("V", "Cai", "Cass", "CaJSR")}
    assert ref[:, 0].max() <= t[-1]
    dv = np.interp(ref[:, 0], t, traces["V"]) - ref[:, 1]
    rms = float(np.sqrt(np.mean(dv ** 2)))
    print(f"V vs CVODE over 0..{ref[-1, 0]:g} ms: RMS {rms:.4f} mV, max {np.abs(dv).max():.4f} mV")
    assert rms < 1.0
    for j, n in ((2, "Cai"), (3, "Cass"), (4, "CaJSR")):       # relative to each trace's peak
        d = np.abs(np.interp(ref[:, 0], t, traces[n]) - ref[:, j]).max() / np.abs(ref[:, j]).max()
        assert d < 0.01, n
    doc = json.loads((tmp_path / "cell.json").read_text())
    assert doc["beats"][0]["APD90"] == pytest.approx(b["APD90"]) and doc["units"]["APD90"] == "ms"


@pytest.mark.parametrize("variant", ["apical", "septal"])
@pytest.mark.slow
def test_ten_beats(variant, tmp_path):
    """Ten 1 Hz beats at dt = 1e-4 ms run without a bad state, and every beat is an action potential."""
    t0 = time.perf_counter()
    rows = run_cell("bondarenko", variant, None, -80.0, 0.5, 1000.0, 10, DT, 0.05, tmp_path / "ten.h5")
    print(f"\nBondarenko {variant}, 10 beats at 1 Hz, dt = {DT} ms: {time.perf_counter() - t0:.1f} s wall")
    print(format_table(rows))
    assert [r["beat"] for r in rows] == list(range(1, 11))
    for r in rows:
        assert 20.0 < r["V_peak"] < 45.0 and r["dVdt_max"] > 100.0
        assert 5.0 < r["APD90"] < 60.0 and -84.0 < r["V_rest"] < -80.0


@pytest.mark.slow
def test_numpy_reference_equals_native():
    """5 ms through the upstroke, 3 cells, two pulse trains (the timing rule on both sides): NumPy == C."""
    m = make("bondarenko", "septal")
    nm = NativeModel(m)
    protos = [Protocol(start=0.5, duration=0.5, period=2.0, count=2), Protocol(start=0.7, duration=0.3)]
    amps = np.array([[-80.0, -40.0, -120.0], [0.0, -60.0, 10.0]])
    y_py = m.initial_state(3)
    y_c = y_py.copy()
    k = 50_000
    work = np.empty_like(y_py)
    for s in range(k):
        t = 0.0 + s * DT
        i_stim = sum((amps[q] for q, p in enumerate(protos) if p.active(t)), np.zeros(3))
        m.forward_euler(y_py, t, DT, i_stim, work)
    nm.advance(y_c, 0.0, DT, k, protos, amps)
    assert (y_c[0] > 0.0).all()                     # all three fired
    # Per state: probabilities near 0 are compared to the size of that state, not to themselves, and not to less
    # than 1e-4 of their chain's total (1): C2 (~1e-8 here) is the difference of rate terms of size ~1e-2, whose
    # round-off (NumPy's exp against libm's, ~1e-16 absolute per step) it collects; the divisions shared by two
    # denominators (kernels/bondarenko.h) moved it from below 1e-13 to 4e-9 of C2's size, 7e-17 absolute.
    scale = np.abs(y_c).max(axis=1, keepdims=True)
    probability = np.array([s.unit == "1" for s in m.states])[:, None]
    scale = np.where(probability, np.maximum(scale, 1e-4), scale)
    err = np.abs(y_py - y_c) / scale
    assert (err <= 1e-10).all(), err.max()


@pytest.mark.parametrize("dt", [1e-3, 5e-3])
def test_too_large_dt_is_reported(dt, tmp_path):
    """dt = 1e-3 ms blows up (NaN a few ms after the stimulus); 5e-3 ms leaves the admissible range (Cass < 0)."""
    m = make("bondarenko")
    nm = NativeModel(m)
    y = m.initial_state(2)
    k = int(round(0.05 / dt))
    with pytest.raises(SimulationError) as e:
        for i in range(200):
            nm.advance(y, i * k * dt, dt, k, [PACE], [[-80.0, 0.0]])
    msg = str(e.value)
    assert re.search(r"cell 0, state \w+ = \S+ \S+ (is not finite|is outside its range .*) at t = [\d.]+ ms", msg), msg
    assert "smaller dt" in msg
    # and through run_cell: the error propagates, the file keeps the trace up to it
    with pytest.raises(SimulationError):
        run_cell("bondarenko", "apical", {}, -80.0, 0.5, 1000.0, 1, dt, 0.05, tmp_path / "bad.h5")
    import h5py
    with h5py.File(tmp_path / "bad.h5", "r") as f:
        assert "error" in f.attrs and 0 < f["trace/t"].shape[0] < 200
        assert np.isfinite(f["trace/V"][:]).all()


@pytest.mark.parametrize("kwargs, match", [
    ({"dt": 0.0}, "dt must be a positive"),
    ({"dt": -1e-4}, "dt must be a positive"),
    ({"record_every": 0.00015}, "whole multiple of dt"),
    ({"beats": 0}, "beats must be a positive integer"),
    ({"period": 0.1}, "must not exceed period"),
    ({"amplitude": float("nan")}, "amplitude must be finite"),
    ({"variant": "basal"}, "not a variant"),
    ({"overrides": {"g_Xyz": 1.0}}, "no parameter 'g_Xyz'"),
])
def test_run_cell_bad_arguments(kwargs, match, tmp_path):
    args = dict(model_name="bondarenko", variant="apical", overrides={}, amplitude=-80.0, duration=0.5,
                period=1000.0, beats=1, dt=DT, record_every=0.05, h5_path=tmp_path / "x.h5")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        run_cell(**args)
    assert not (tmp_path / "x.h5").exists()


def test_native_build_is_cached_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path))
    p1 = native.build("bondarenko")
    mtime = p1.stat().st_mtime_ns
    p2 = native.build("bondarenko")
    assert p1 == p2 and p2.stat().st_mtime_ns == mtime and p1.parent == tmp_path / "native"
    assert not list(p1.parent.glob("*.tmp"))

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

from cardiosim.single_cell.pacing import run_cell  # noqa: E402

MODELS = ROOT / "models"
LR91 = MODELS / "luo_rudy_1991.cellml"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _paced(tmp_path, name, beats, prepace, integrator, dt, model=LR91, record_every=0.5, **kw):
    """run_cell in this process (the compiled kernels and Myokit shared between runs): (h5, json) paths."""
    out, js = tmp_path / f"{name}.h5", tmp_path / f"{name}.json"
    run_cell(str(model), None, {}, -80.0, 0.5, 500.0, beats, dt, record_every, out, js, integrator=integrator,
             prepace=prepace, **kw)
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

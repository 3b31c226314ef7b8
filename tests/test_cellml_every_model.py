"""Every CellML model runs (issue 26, part 2): the models that stopped at once before (Shannon 2004, Davies 2012:
Hodgkin–Huxley-shaped states that are not probabilities), against Myokit's CVODES."""

from __future__ import annotations

import pytest

from conftest import ROOT, require_cvodes, require_gcc

pytest.importorskip("myokit")

from cardiosim import cells                                       # noqa: E402
from cardiosim.bench import cellml as bench                       # noqa: E402

MODELS = ROOT / "tests" / "data" / "cellml"


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
    """One paced beat (native C, Forward Euler 1 µs) against CVODES: V RMS and APD90 (measured 2026-11-26: Shannon
    0.0095 mV, APD90 210.10 / 210.10 ms; Davies 0.012 mV, 318.77 / 318.75 ms); the largest stable step."""
    require_cvodes()
    require_gcc()
    row = bench.conformance(MODELS / f"{name}.cellml")
    assert row["v_rms"] < v_rms, row
    assert abs(row["apd90"] - row["apd90_cvodes"]) < 0.005 * row["apd90_cvodes"], row
    assert row["fe_max_dt"] >= fe_dt, row

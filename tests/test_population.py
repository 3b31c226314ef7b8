"""Cell populations (`cardiosim cell --population`, cardiosim/population.py): every cell its own parameters in the
native driver, each cell equal to the single cell with those parameters, the calibration filter, the table input,
the outputs and their bad-input lines."""

from __future__ import annotations

import csv

import h5py
import numpy as np
import pytest

from conftest import ROOT, require_gcc, run_cli

pytest.importorskip("myokit")

from cardiosim import cells                                      # noqa: E402
from cardiosim.population import run_population, sample_factors  # noqa: E402
from cardiosim.single_cell import run_cell                       # noqa: E402

LR91 = ROOT / "models" / "luo_rudy_1991.cellml"
PROTOCOL = dict(amplitude=-80.0, duration=0.5, period=500.0, dt=0.01, integrator="grl1")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def test_each_cell_is_the_single_cell_with_its_parameters(tmp_path):
    """Four cells with sampled g_Na and g_K_max factors, paced together with per-cell parameter vectors: each one's
    APD90 and V_peak equal those of `run_cell` with that cell's parameters (the same C step; round-off)."""
    require_gcc()
    f = sample_factors({"g_Na": ("uniform", 0.6, 1.4), "g_K_max": ("lognormal", 0.3)}, 4, seed=3)
    r = run_population(str(LR91), None, {}, f, beats=1, prepace=1, record_every=0.5, keep={"APD90": (250, 330)},
                       h5_path=tmp_path / "pop.h5", csv_path=tmp_path / "pop.csv", **PROTOCOL)
    bio = r["biomarkers"]
    assert r["n"] == 4 and r["failed"] == 0
    base = cells.model_class(str(LR91)).parameters
    for c in range(4):
        over = {k: base[k].value * f[k][c] for k in f}
        rows = run_cell(str(LR91), None, over, beats=2, record_every=0.5, h5_path=tmp_path / f"one{c}.h5",
                        **PROTOCOL)
        assert bio["APD90"][c] == pytest.approx(rows[1]["APD90"], rel=1e-9)
        assert bio["V_peak"][c] == pytest.approx(rows[1]["V_peak"], rel=1e-9)
    assert list(bio["kept"]) == [int(250 <= a <= 330) for a in bio["APD90"]]
    assert len(set(np.round(bio["APD90"], 3))) == 4                  # the parameters differ, so do the cells
    with open(tmp_path / "pop.csv") as fh:
        table = list(csv.DictReader(fh))
    assert [int(t["kept"]) for t in table] == list(bio["kept"])
    with h5py.File(tmp_path / "pop.h5") as h:
        np.testing.assert_array_equal(h["population/factors/g_Na"][:], f["g_Na"])
        assert h["trace/V"].shape == (4, 1001)


def test_population_from_a_table_by_the_cli(tmp_path):
    require_gcc()
    (tmp_path / "f.csv").write_text("g_Na,P_si\n1.0,1.0\n0.5,1.5\n")
    out, table = tmp_path / "p.h5", tmp_path / "p.csv"
    proc = run_cli(["cell", "--model", LR91, "--population-table", tmp_path / "f.csv", "--integrator", "grl1",
                    "--dt", "0.01", "--record-every", "0.5", "--period", "500", "--output", out, "--csv", table],
                   check=True)
    assert "population of 2 cells" in proc.stdout + proc.stderr
    with open(table) as fh:
        rows = list(csv.DictReader(fh))
    assert float(rows[1]["V_peak"]) < float(rows[0]["V_peak"])      # half the sodium conductance: a lower peak
    again = run_cli(["cell", "--model", LR91, "--population-table", tmp_path / "f.csv", "--output", out, "--csv",
                     table])
    assert again.returncode == 2 and "exists" in again.stderr


@pytest.mark.parametrize("args,words", [
    (["--population", "4"], ["--sample"]),
    (["--population", "4", "--sample", "g_Na=normal:1"], ["--sample", "uniform"]),
    (["--population", "4", "--sample", "g_Nope=uniform:0.5:1.5"], ["g_Nope", "allowed"]),
    (["--population", "4", "--sample", "g_Na=uniform:0.5:1.5", "--keep", "APD90"], ["--keep", "LO:HI"]),
    (["--population", "4", "--sample", "g_Na=uniform:0.5:1.5", "--keep", "QT=1:2"], ["--keep QT", "biomarker"]),
])
def test_bad_input(tmp_path, args, words):
    out = tmp_path / "p.h5"
    proc = run_cli(["cell", "--model", LR91, *args, "--output", out])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()

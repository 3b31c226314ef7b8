"""Cell populations (`cardiosim cell --population`, cardiosim/single_cell/population.py): every cell its own parameters in the
native driver, each cell equal to the single cell with those parameters, the calibration filter, the table input,
the outputs and their bad-input lines."""

from __future__ import annotations

import csv
import re

import h5py
import numpy as np
import pytest

from conftest import ROOT, require_gcc, run_cli

pytest.importorskip("myokit")

from cardiosim import cells  # noqa: E402
from cardiosim.single_cell.population import run_population, sample_factors  # noqa: E402
from cardiosim.single_cell.pacing import run_cell  # noqa: E402

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
    (["--population", "4", "--sample", "g_Na=uniform:0.5:1.5", "--integrator", "cvode"], ["cvode", "grl1"]),
])
def test_bad_input(tmp_path, args, words):
    out = tmp_path / "p.h5"
    proc = run_cli(["cell", "--model", LR91, *args, "--output", out])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


def test_gpu_host_twin_equals_the_cpu_population(tmp_path):
    """The GPU population's host twin (backend native-cells: the per-cell header, the varied parameters and the
    constants computed from them read per cell as CS_CELL_PARAM(j), everything else a literal, compiled as C) against
    the CPU population (every cell its whole parameter vector): the same numbers, bit for bit, for three models,
    biomarkers and the recorded beat."""
    require_gcc()
    cases = [(LR91, {"g_Na": ("uniform", 0.6, 1.4), "g_K_max": ("lognormal", 0.3)}),
             (ROOT / "models" / "ten_tusscher_model_2006_epi.cellml", {"g_Kr": ("uniform", 0.5, 1.5),
                                                                      "g_CaL": ("lognormal", 0.2)}),
             (ROOT / "models" / "ohara_rudy_2011_endo.cellml", {"GKr_b": ("uniform", 0.5, 1.5)})]
    for path, spec in cases:
        f = sample_factors(spec, 3, seed=5)
        out = {}
        for backend in ("native", "native-cells"):
            r = run_population(str(path), None, {}, f, beats=1, prepace=0, record_every=1.0, keep={},
                               h5_path=tmp_path / f"{path.stem}-{backend}.h5", backend=backend,
                               **{**PROTOCOL, "period": 400.0})
            with h5py.File(tmp_path / f"{path.stem}-{backend}.h5") as h:
                out[backend] = (r["biomarkers"], h["trace/V"][:])
        (a, va), (b, vb) = out["native"], out["native-cells"]
        assert np.isfinite(a["APD90"]).sum() >= 2 and np.nanmax(a["V_peak"]) > 0.0, path.stem   # they fired
        for col in ("APD90", "APD50", "V_rest", "V_peak", "dVdt_max"):
            np.testing.assert_array_equal(a[col], b[col], err_msg=f"{path.stem} {col}")
        np.testing.assert_array_equal(va, vb)


def test_gpu_population_refuses_what_it_cannot_do(tmp_path):
    """--backend cuda: a hand-written model (its parameters in constant memory) or a machine without a usable GPU is
    one line, exit 2, nothing written; --backend without --population is one line too."""
    out = tmp_path / "p.h5"
    for args, words in ((["--model", LR91], ["--backend cuda", "GPU"]),
                        (["--model", "tt06"], ["tt06", "generated"])):
        proc = run_cli(["cell", *args, "--population", "4", "--sample", "g_Kr=uniform:0.5:1.5" if "tt06" in args
                        else "g_Na=uniform:0.5:1.5", "--backend", "cuda", "--output", out])
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        if "tt06" not in args and proc.returncode == 0:
            pytest.skip("this machine has a GPU: the refusal is for machines without one")
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert any(w in lines[0] for w in words), lines[0]
        assert not out.exists()
    proc = run_cli(["cell", "--model", LR91, "--backend", "cuda", "--output", out])
    assert proc.returncode == 2 and "--population" in proc.stderr and not out.exists()


def test_per_cell_fused_kernel_source_compiles(tmp_path):
    """The exact CUDA source and options of the GPU population (kernel_source(per_cell=True): kernels/fused.cu with
    CS_CELL_PARAMS and the per-cell header) through the host's C++ compiler with CUDA's keywords stubbed out (as
    tests/test_cellml.py does for the plain kernel): the wiring without a GPU; the plain header (which reads no
    CS_CELL_PARAM) in the per-cell kernel, and the per-cell header without CS_CELL_PARAMS, do not compile."""
    import shutil
    import subprocess
    from test_cellml import _CUDA_STUBS
    from cardiosim.cells.cellml import per_cell_header
    from cardiosim.runtime.compile import kernel_dir
    from cardiosim.reaction.ode import kernel_variants
    from cardiosim.reaction.ode.cuda_backend import kernel_source
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    model = cells.model_class(str(ROOT / "models" / "ohara_rudy_2011_endo.cellml"))()
    model.keep_at_run_time(["GKr_b"])
    folder, slots = per_cell_header(model)
    assert len(slots) >= 2                                    # GKr_b and what is computed from it
    text = (folder / f"{model.kernel_name}.h").read_text()
    assert "CS_CELL_PARAM(" in text and not re.search(r"(?<!&)CS_PARAM\(\d+\)", text)
    src, opts = kernel_source(model, model.parameter_vector(), kernel_variants.get("fused", model.kernel_name),
                              "grl1", per_cell=True)
    cu = tmp_path / "fused_host.cpp"
    cu.write_text(_CUDA_STUBS + src)

    def compile_(folder, *extra):
        return subprocess.run([cxx, "-std=c++14", "-fsyntax-only", f"-I{folder}", f"-I{kernel_dir()}", *opts, *extra,
                               str(cu)], capture_output=True, text=True)
    ok = compile_(folder)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert compile_(folder, "-UCS_CELL_PARAMS", "-DCS_CELL_PARAMS=0").returncode != 0

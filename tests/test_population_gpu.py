"""Populations on the GPU (`cardiosim cell --population N --backend cuda`, cardiosim/single_cell/population.py): every cell its
own values of the varied parameters from device memory (kernels/fused.cu with CS_CELL_PARAMS), the rest literals.
Run on a GPU node:

    CARDIOSIM_REQUIRE=gpu python3 -m pytest -q -s -m gpu tests/test_population_gpu.py

- for three generated models, the GPU population equals the CPU population (the native driver, each cell its whole
  parameter vector; tests/test_population.py checks that the GPU's own header compiled as C gives the CPU's numbers
  bit for bit) to round-off: biomarkers of every cell and the recorded beat (fmad off; exp/log of CUDA and glibc
  differ by an ulp);
- a cell that goes bad on the GPU is marked failed, the others go on as on the CPU.
"""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from conftest import ROOT, require_gpu

pytest.importorskip("myokit")
pytestmark = pytest.mark.gpu

from cardiosim.single_cell.population import run_population, sample_factors  # noqa: E402

MODELS = ROOT / "models"
CASES = {"luo_rudy_1991": {"g_Na": ("uniform", 0.6, 1.4), "g_K_max": ("lognormal", 0.3)},
         "ten_tusscher_model_2006_epi": {"g_Kr": ("uniform", 0.5, 1.5), "g_CaL": ("lognormal", 0.2)},
         "ohara_rudy_2011_endo": {"GKr_b": ("uniform", 0.5, 1.5), "GNa": ("uniform", 0.8, 1.2)}}
PROTOCOL = dict(amplitude=-80.0, duration=0.5, period=400.0, dt=0.01, integrator="grl1", record_every=0.5)


@pytest.fixture(scope="module")
def gpu():
    require_gpu()
    import pycuda.driver as cuda
    print(f"\nGPU: {cuda.Device(0).name()}")
    return cuda


def _run(tmp_path, name, backend, n=64, **kw):
    f = sample_factors(CASES[name], n, seed=7)
    h5 = tmp_path / f"{name}-{backend}.h5"
    r = run_population(str(MODELS / f"{name}.cellml"), None, {}, f, beats=1, prepace=1, keep={}, h5_path=h5,
                       backend=backend, **{**PROTOCOL, **kw})
    with h5py.File(h5) as h:
        return r, h["trace/V"][:]


@pytest.mark.parametrize("name", list(CASES))
def test_gpu_population_equals_cpu_population(gpu, tmp_path, name):
    cpu, v_cpu = _run(tmp_path, name, "native")
    gpu_, v_gpu = _run(tmp_path, name, "cuda", fmad=False)
    a, b = cpu["biomarkers"], gpu_["biomarkers"]
    assert cpu["failed"] == gpu_["failed"] == 0
    assert np.isfinite(a["APD90"]).sum() > 32                        # most cells fired and repolarised
    np.testing.assert_array_equal(np.isnan(a["APD90"]), np.isnan(b["APD90"]))
    for col, tol in (("APD90", 1e-8), ("APD50", 1e-8), ("V_rest", 1e-10), ("V_peak", 1e-8), ("dVdt_max", 1e-8)):
        ok = np.isfinite(a[col])
        rel = np.abs(a[col][ok] - b[col][ok]) / np.maximum(np.abs(a[col][ok]), 1.0)
        print(f"{name} {col}: largest relative difference GPU - CPU {rel.max():.2e}")
        assert rel.max() < tol, (name, col, rel.max())
    assert np.nanmax(np.abs(v_gpu - v_cpu)) < 1e-6                   # mV, every cell, every 0.5 ms of the beat


def test_a_bad_cell_on_the_gpu_is_marked_and_the_rest_go_on(gpu, tmp_path):
    """Luo-Rudy 1991 with g_Na × 200 in one cell: Forward Euler at 0.01 ms blows up there (on the CPU too); the
    other cells equal their CPU twins."""
    name = "luo_rudy_1991"
    f = {"g_Na": np.array([1.0, 200.0, 1.0]), "g_K_max": np.array([1.0, 1.0, 1.2])}
    out = {}
    for backend in ("native", "cuda"):
        r = run_population(str(MODELS / f"{name}.cellml"), None, {}, f, beats=1, prepace=0, keep={},
                           h5_path=tmp_path / f"bad-{backend}.h5", backend=backend,
                           **{**PROTOCOL, "integrator": "forward-euler", "record_every": 0.5})
        out[backend] = r
    assert list(out["native"]["biomarkers"]["failed"]) == [0, 1, 0]
    assert list(out["cuda"]["biomarkers"]["failed"]) == [0, 1, 0]
    good = out["native"]["biomarkers"]["failed"] == 0
    np.testing.assert_allclose(out["cuda"]["biomarkers"]["APD90"][good], out["native"]["biomarkers"]["APD90"][good],
                               rtol=1e-6)

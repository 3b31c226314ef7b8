"""Tissue runs with the cells on the GPU (cell.backend = cuda) give the native CPU kernel's numbers."""

import h5py
import numpy as np
import pytest

from conftest import run_cli

pytestmark = pytest.mark.gpu

CABLE = """
[simulation]
equations = "bidomain"
duration = 6.0
dt = 0.02
ode_substeps = 10
progress_interval = 0
[grid]
size = [0.4, 0.1]
spacing = 0.01
[cell]
model = "tt06"
backend = "{backend}"
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.03, 0.1]
duration = 1.0
current_density = -52.0
[output]
interval = 1.0
"""


def test_cuda_cells_equal_native_cells_in_tissue(tmp_path):
    cuda = pytest.importorskip("pycuda.driver")
    try:
        cuda.init()
        assert cuda.Device.count() > 0
    except Exception:
        pytest.skip("no GPU visible")
    out = {}
    for backend in ("native", "cuda"):
        cfg = tmp_path / f"{backend}.toml"
        cfg.write_text(CABLE.format(backend=backend))
        out[backend] = tmp_path / f"{backend}.h5"
        run_cli(["run", cfg, "--quiet", "--output", out[backend]], check=True)
    with h5py.File(out["native"]) as a, h5py.File(out["cuda"]) as b:
        assert "cuda" in b.attrs["layout"]
        for field in ("Vm", "phi_e"):
            d = np.abs(a["fields"][field][:] - b["fields"][field][:]).max()
            print(f"\nTT06 sheet, {field}: max |native - cuda| = {d:.3e} mV")
            assert d < 1e-6        # FMA and 1-ulp exp/log differences, amplified through the upstroke
        assert b["fields/Vm"][-1].max() > 0.0

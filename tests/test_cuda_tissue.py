"""Tissue runs with the cells on the GPU (cell.backend = cuda) give the native CPU kernel's numbers."""

import h5py
import numpy as np
import pytest

from conftest import require_gpu, run_cli

pytestmark = pytest.mark.gpu

CABLE = """
[simulation]
equations = "bidomain"
duration = 6.0
dt = 0.02
ode_substeps = {k}
progress_interval = 0
[grid]
size = [0.4, 0.1]
spacing = 0.01
[cell]
model = "{model}"
backend = "{backend}"
integrator = "{integrator}"
kernel = "{kernel}"
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.03, 0.1]
duration = 1.0
current_density = {amp}
[output]
interval = 1.0
"""


def _run(tmp_path, name, **kw):
    kw = {"model": "tt06", "integrator": "forward-euler", "kernel": "fused", "k": 10, "amp": -52.0, **kw}
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(CABLE.format(**kw))
    out = tmp_path / f"{name}.h5"
    run_cli(["run", cfg, "--quiet", "--output", out], check=True)
    return h5py.File(out)


@pytest.mark.parametrize("integrator, k", [("forward-euler", 10), ("rush-larsen", 1)])
def test_cuda_cells_equal_native_cells_in_tissue(tmp_path, integrator, k):
    require_gpu()
    a = _run(tmp_path, "native", backend="native", integrator=integrator, k=k)
    b = _run(tmp_path, "cuda", backend="cuda", integrator=integrator, k=k)
    assert "cuda" in b.attrs["layout"]
    for field in ("Vm", "phi_e"):
        d = np.abs(a["fields"][field][:] - b["fields"][field][:]).max()
        print(f"\nTT06 sheet, {integrator}, dt_ode {0.02 / k:g} ms, {field}: max |native - cuda| = {d:.3e} mV")
        assert d < 1e-6        # FMA and 1-ulp exp/log differences, amplified through the upstroke
    assert b["fields/Vm"][-1].max() > 0.0


def test_seed_variant_in_tissue_equals_fused(tmp_path):
    """cell.kernel = original (one launch per substep, auxiliary array, ...) in a Bondarenko bidomain sheet: the same
    Vm as the fused kernel."""
    require_gpu()
    kw = dict(model="bondarenko", backend="cuda", k=200, amp=-80.0)      # dt_ode 1e-4 ms
    a = _run(tmp_path, "fused", **kw)
    b = _run(tmp_path, "original", kernel="original", **kw)
    d = np.abs(a["fields/Vm"][:] - b["fields/Vm"][:]).max()
    print(f"\nBondarenko sheet on the GPU: max |fused - original| Vm = {d:.3e} mV")
    assert d < 1e-9
    assert a["fields/Vm"][-1].max() > 0.0

"""The microscopic model on the GPU placements. Run on a GPU node:

    python3 -m pytest -q -s -m gpu tests/test_microscopic_gpu.py

- grouped (cuda cells) and resident (the PDE too: aijcusparse face matrices assembled by COO, CUDA vectors) equal
  the cpu placement with native cells within the solver tolerance — Vm, the activation map — Bondarenko,
  monodomain and the bidomain variant, on the default brick-wall layout with noise, dropout and fibrosis;
- the preconditioners on the GPU: CG iterations and time per step of the parabolic and elliptic solves are
  printed (resident), for docs/user/microscopic.md §5.
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from conftest import require_gpu, run_cli

pytestmark = pytest.mark.gpu

TIGHT = ["-parabolic_ksp_rtol", "1e-13"]
CONFIG = """
[simulation]
equations = "{equations}"
duration = 3.0
dt = 0.01
ode_substeps = 100
time_scheme = "backward-euler"
progress_interval = 0
[grid]
size = [0.0512, 0.0256]
spacing = 0.0008
[tissue]
model = "microscopic"
[tissue.microscopic]
junction.noise_cv = 0.2
junction.dropout = 0.05
fibrosis.fraction = 0.05
seed = 5
[cell]
model = "bondarenko"
variant = "apical"
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.0096, 0.0256]
duration = 1.0
current_density = -200.0
[output]
interval = 0.5
"""


def _run(tmp_path, equations, placement, backend):
    cfg = tmp_path / f"{equations}.toml"
    cfg.write_text(CONFIG.format(equations=equations))
    out = tmp_path / f"{equations}-{placement}.h5"
    extra = TIGHT + (["-elliptic_ksp_rtol", "1e-13"] if equations == "bidomain" else [])
    run_cli(["run", cfg, "--output", out, "--set", f'cell.placement="{placement}"', "--set",
             f'cell.backend="{backend}"', "--", *extra], check=True)
    with h5py.File(out) as f:
        return f["fields/Vm"][()], f["maps/activation_time"][()], json.loads(out.with_suffix(".json").read_text())


@pytest.mark.parametrize("equations", ["monodomain", "bidomain"])
def test_gpu_placements_equal_cpu(tmp_path, equations):
    require_gpu()
    v0, t0, _ = _run(tmp_path, equations, "cpu", "native")
    assert np.isfinite(t0).any()
    for placement in ("grouped", "resident"):
        v, t, summary = _run(tmp_path, equations, placement, "cuda")
        print(f"{equations} {placement}: max |ΔVm| = {np.max(np.abs(v - v0)):.3g} mV, iterations "
              f"{summary['iterations']}, timing {json.dumps({k: v['max'] for k, v in summary['timing_s'].items()})}")
        assert np.max(np.abs(v - v0)) < 1e-6
        assert np.array_equal(np.isnan(t), np.isnan(t0)) and np.nanmax(np.abs(t - t0)) < 1e-6

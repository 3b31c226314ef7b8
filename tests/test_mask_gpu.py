"""Anatomy on the GPU: a masked grid with a cell region and a pseudo-ECG, with the cells on a GPU in
every placement. Run on a GPU node:

    python3 -m pytest -q -s -m gpu tests/test_mask_gpu.py

The anatomy of tests/test_mask.py (TT06 bidomain; tissue in the left 15 of 33 node columns, so that on two ranks
the second has no cell; label 2 with other I_to and I_Ks; two probes; three electrodes, a lead as a difference and one as a weighted sum), 6 ms:

- grouped (2 ranks, one GPU owner), per-rank (2 ranks, one context each) and resident (1 rank, and 2 ranks sharing
  the GPU) equal the cpu placement with native cells within the solver tolerance: Vm, φe, the activation map,
  the probes and the ECG;
- the resident run with mask, cell region, probes and ECG copies nothing between host and GPU inside the steps
  (PETSc's counters over the stage "cardiosim: steps").
"""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from conftest import require_gpu, run_cli
from test_mask import anatomy, anatomy_results, assert_anatomy_agrees

pytestmark = pytest.mark.gpu

TIGHT = ["-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"]
LAYOUTS = {
    "grouped, 2 ranks": (2, ['cell.placement="grouped"', 'cell.backend="cuda"']),
    "per-rank, 2 ranks": (2, ['cell.placement="per-rank"', 'cell.backend="cuda"']),
    "resident, 1 rank": (1, ['cell.placement="resident"', 'cell.backend="cuda"']),
    "resident, 2 ranks": (2, ['cell.placement="resident"', 'cell.backend="cuda"', "cell.share_gpu=true"]),
}


@pytest.fixture(scope="module")
def n_gpus():
    return require_gpu()


def run(tmp_path, cfg, tag, sets, np_=1, petsc=()):
    out = tmp_path / f"{tag.replace(' ', '').replace(',', '-')}.h5"
    args = ["run", cfg, "--output", out, "--overwrite"]
    for s in sets:
        args += ["--set", s]
    run_cli([*args, "--", *TIGHT, *petsc], np=np_, check=True, timeout=900)
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory, n_gpus):
    d = tmp_path_factory.mktemp("anatomy")
    cfg = anatomy(d)
    return d, cfg, anatomy_results(run(d, cfg, "cpu", ['cell.placement="cpu"', 'cell.backend="native"']))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_anatomy_on_the_gpu_equals_cpu(reference, n_gpus, layout):
    d, cfg, cpu = reference
    np_, sets = LAYOUTS[layout]
    out = run(d, cfg, layout, sets, np_)
    with h5py.File(out) as f:
        lay = json.loads(f.attrs["layout"])
    assert lay["ode_backend"] == "cuda" and lay["placement"] == layout.split(",")[0]
    assert np.isfinite(cpu["activation"]).any()     # the tissue fired
    print(f"\n{layout} on {n_gpus} GPU(s):")
    # FMA contraction and 1-ulp exp/log in the GPU kernel, and two solvers each converged to 1e-13 relative
    # (tests/test_resident_gpu.py: the same bound)
    assert_anatomy_agrees(cpu, anatomy_results(out), 1e-6, layout)


def test_resident_anatomy_copies_nothing_per_step(reference, n_gpus):
    d, cfg, _ = reference
    log = d / "log.txt"
    out = run(d, cfg, "resident-logged", LAYOUTS["resident, 1 rank"][1], petsc=["-log_view", f":{log}"])
    s = json.loads(out.with_suffix(".json").read_text())
    copies = s["petsc_log"]
    print(f"\nPETSc's counters over the steps (mask, cell region, probes, ECG): {copies}")
    assert copies["steps"] == s["steps"]
    assert copies["cpu_to_gpu_copies"] == 0 and copies["gpu_to_cpu_copies"] == 0

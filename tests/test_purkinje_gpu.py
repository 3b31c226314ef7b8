"""[purkinje] with the tissue's cells on the GPU: the grouped and per-rank placements (the network and its cells stay
on rank 0's CPU; the PMJs read the tissue Vm from each rank's host array, where both placements leave it every
step) against the cpu placement with the native kernel, on 1 and 2 ranks. Run on a GPU node:

    python3 -m pytest -q -s -m gpu tests/test_purkinje_gpu.py

The strand and cable of tests/test_purkinje_paths.py, with TT06 (Rush-Larsen) as the tissue's cell model."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require_gpu
from test_purkinje_paths import MS, TIGHT, agree, config, fibre, run, write_config  # noqa: F401 (fibre: fixture)

pytestmark = [pytest.mark.gpu, pytest.mark.mpi]


def tt06(**extra) -> dict:
    return {"model": "tt06", "integrator": "rush-larsen", "parameters": {}, **extra}


@pytest.mark.parametrize("np_", [1, 2])
def test_gpu_placements_with_a_network_equal_cpu(tmp_path, fibre, np_):
    require_gpu()
    runs = {}
    for name, cell in (("cpu", tt06(backend="native", placement="cpu")),
                       ("grouped", tt06(backend="cuda", placement="grouped")),
                       ("per-rank", tt06(backend="cuda", placement="per-rank"))):
        cfg = write_config(tmp_path / f"{name}.toml", config(fibre, cell=cell))
        runs[name] = run(cfg, tmp_path / f"{name}.h5", *TIGHT, np=np_)
    assert np.isfinite(runs["cpu"]["purkinje/activation_time"]).any()
    for name in ("grouped", "per-rank"):
        # FMA and 1-ulp exp/log differences of the GPU's TT06 through the upstroke (tests/test_placement_gpu.py)
        agree(runs["cpu"], runs[name], 1e-6)
    agree(runs["grouped"], runs["per-rank"], 0.0)

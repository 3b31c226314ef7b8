"""[purkinje] with the tissue's cells on the GPU: the grouped, per-rank and resident placements (the network and its
cells stay on rank 0's CPU; the PMJs read the tissue Vm from each rank's host array, where grouped and per-rank
leave it every step, or gather it on the GPU, resident) against the cpu placement with the native kernel, on 1 and
2 ranks (2 resident ranks share one GPU where there is one). Run on a GPU node:

    python3 -m pytest -q -s -m gpu tests/test_purkinje_gpu.py

The forked network over the 2D sheet of tests/test_purkinje_paths.py (its two PMJs, the central one over both
ranks' nodes on two ranks), with TT06 (Rush-Larsen) as the tissue's cell model."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import require_gpu
from test_purkinje_paths import (TIGHT, agree, forked, restarted_equals_full, run,  # noqa: F401 (forked)
                                 sheet_config, write_config)

pytestmark = [pytest.mark.gpu, pytest.mark.mpi]


def tt06(**extra) -> dict:
    return {"model": "tt06", "integrator": "rush-larsen", "parameters": {}, **extra}


@pytest.mark.parametrize("np_", [1, 2])
def test_gpu_placements_with_a_network_equal_cpu(tmp_path, forked, np_):
    n_gpus = require_gpu()
    runs = {}
    share = {"share_gpu": True} if np_ > n_gpus else {}
    for name, cell in (("cpu", tt06(backend="native", placement="cpu")),
                       ("grouped", tt06(backend="cuda", placement="grouped")),
                       ("per-rank", tt06(backend="cuda", placement="per-rank")),
                       ("resident", tt06(backend="cuda", placement="resident", **share))):
        cfg = write_config(tmp_path / f"{name}.toml", sheet_config(forked, cell=cell))
        runs[name] = run(cfg, tmp_path / f"{name}.h5", *TIGHT, np=np_)
    assert np.isfinite(runs["cpu"]["purkinje/activation_time"]).any()
    assert np.isfinite(runs["resident"]["purkinje/pmj_tissue_activation_time"]).all()
    for name in ("grouped", "per-rank", "resident"):
        # FMA and 1-ulp exp/log differences of the GPU's TT06 through the upstroke (tests/test_placement_gpu.py);
        # resident: PETSc's CUDA solves besides
        agree(runs["cpu"], runs[name], 1e-6)
    agree(runs["grouped"], runs["per-rank"], 0.0)


def gpu_network(data: dict) -> dict:
    """``data`` with TT06 cells (a model with a kernel) in the network too: on the GPU in the resident placement."""
    data["purkinje"].update(model="tt06", parameters={}, integrator="rush-larsen")
    return data


@pytest.mark.parametrize("network", ["numpy", "gpu"])
def test_resident_restart_with_a_network_is_bit_identical(tmp_path, forked, network):
    """The resident placement's checkpoint at 7.5 ms restarted to the end: the same bits as the uninterrupted run
    (the network's arrays included), its cells on the host (NumPy) or on the GPU (TT06)."""
    require_gpu()
    data = sheet_config(forked, cell=tt06(backend="cuda", placement="resident"))
    full, _ = restarted_equals_full(tmp_path, gpu_network(data) if network == "gpu" else data, 1)
    assert np.isfinite(full["purkinje/activation_time"]).all()


def test_network_cells_on_the_gpu_equal_native(tmp_path, forked):
    """The network's TT06 cells by the fused CUDA kernel (resident) against the native kernel (cpu placement): the
    network's activation and the tissue's within the GPU's round-off."""
    require_gpu()
    runs = {}
    for name, cell in (("cpu", tt06(backend="native", placement="cpu")),
                       ("resident", tt06(backend="cuda", placement="resident"))):
        cfg = write_config(tmp_path / f"{name}.toml", gpu_network(sheet_config(forked, cell=cell)))
        runs[name] = run(cfg, tmp_path / f"{name}.h5", *TIGHT)
    assert np.isfinite(runs["cpu"]["purkinje/activation_time"]).all()
    agree(runs["cpu"], runs["resident"], 1e-6)

"""`cardiosim bench table41` (cardiosim/bench/table41.py) on a CPU: the seed's scenario shrunk to 11 x 11 nodes and
2 steps, cpu and grouped placements with the native C kernel; an unknown CUDA kernel variant is reported, not
fatal. The full 625 x 625 run is for a GPU node (docs/performance.md)."""

import json
import subprocess
import sys

import pytest

from cardiosim import config
from cardiosim.bench.table41 import CONFIG


def test_seed_config_is_the_seed_experiment():
    cfg = config.load(CONFIG)
    n = [round(L / h) + 1 for L, h in zip(cfg.grid.size, cfg.grid.spacing)]
    assert n == [625, 625] and cfg.grid.spacing == [0.0008, 0.0008]          # 8 µm, 390,625 cells
    s = cfg.simulation
    assert (s.equations, s.dt, round(s.duration / s.dt), s.dt / s.ode_substeps) == ("bidomain", 0.01, 10, 1e-4)
    assert (cfg.tissue.chi, cfg.tissue.Cm, cfg.cell.model) == (1400.0, 1.0, "bondarenko")


def bench(tmp_path, *args):
    out = tmp_path / "t41.json"
    page = tmp_path / "bench.md"
    proc = subprocess.run([sys.executable, "-m", "cardiosim", "bench", "table41", "--ranks", "2", "--grid", "11",
                           "--steps", "2", "--json", str(out), "--write", str(page), *args],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())["results"], page.read_text()


@pytest.mark.mpi
def test_table41_on_cpu(tmp_path):
    results, page = bench(tmp_path, "--placements", "cpu", "grouped", "--backend", "native", "--tissues",
                          "homogenised")
    assert [(r["placement"], r["exchange"]) for r in results] == [("cpu", "-"), ("grouped", "vm"),
                                                                  ("grouped", "full")]
    for r in results:
        assert r["grid"] == [11, 11] and r["steps"] == 2 and r["ranks"] == 2 and r["gpus"] == 0
        assert r["ode_ms"] > 0 and r["pde_ms"] > 0 and r["total_ms"] >= r["ode_ms"]
        assert r["cell_steps_per_s"] > 0
    assert results[0]["exchange_ms"] == 0.0 and results[1]["exchange_ms"] > 0.0
    assert results[1]["groups"] == 1
    assert "| native (CPU) | grouped | full | 2 | 0 |" in page and "PDE 1599.62" in page


def test_microscopic_twin_is_the_seed_experiment():
    from cardiosim.bench.table41 import CONFIGS
    from cardiosim.domain.grid import node_counts
    cfg = config.load(CONFIGS["microscopic"])
    assert node_counts(cfg).tolist() == [625, 625] and cfg.grid.spacing == [0.0008, 0.0008]   # 390,625 volumes
    m, s = cfg.tissue.microscopic, cfg.simulation
    assert (m.sigma_c, m.G_p, m.G_i, m.G_c) == (0.4, 0.5, 0.33, 0.062)                        # µS/µm, µS
    assert (s.dt, round(s.duration / s.dt), s.dt / s.ode_substeps, s.time_scheme) == (0.01, 10, 1e-4,
                                                                                       "backward-euler")
    assert (cfg.tissue.chi, cfg.tissue.Cm, cfg.cell.model) == (1400.0, 1.0, "bondarenko")


@pytest.mark.mpi
def test_table41_runs_both_twins(tmp_path):
    results, page = bench(tmp_path, "--placements", "cpu", "--backend", "native")
    assert [r["tissue"] for r in results] == ["homogenised", "microscopic"]
    assert [r["grid"] for r in results] == [[11, 11], [11, 11]]
    for r in results:
        assert r["pde_ms"] > 0 and r["ode_ms"] > 0 and r["iterations"]["parabolic"] >= 1
    assert "| microscopic | bidomain | native (CPU) | cpu |" in page


@pytest.mark.mpi
def test_unknown_kernel_variant_is_reported(tmp_path):
    results, page = bench(tmp_path, "--placements", "grouped", "--backend", "cuda", "--variants", "no-such-kernel",
                          "--exchange", "vm", "--tissues", "homogenised")
    assert len(results) == 1 and "cell.kernel" in results[0]["unavailable"]
    assert "not available" in page

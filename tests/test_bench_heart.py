"""cardiosim bench heart on the CPU at coarse grids: the whole command (geometry, run, the figures it reports) on
the cpu placement, which CI can run; on a GPU node the same command with its default grids and placement gives
benchmarks/heart.json's figures."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli

pytestmark = pytest.mark.mpi


def bench(tmp_path, *args) -> list[dict]:
    out = tmp_path / "heart.json"
    run_cli(["bench", "heart", "--placement", "cpu", "--duration", "0.1", "--json", out, *args], check=True)
    return json.loads(out.read_text())["results"]


def test_human_heart_case_reports_preparation_setup_and_steps(tmp_path):
    (r,) = bench(tmp_path, "--cases", "human-0.25", "--spacing", "0.15")
    assert r["case"] == "human-1.5" and r["spacing_cm"] == 0.15          # named for the spacing it ran, in mm
    assert r["steps"] == 4 and r["dt_ms"] == 0.025 and r["ode_substeps"] == 2      # run/human-biv.toml's step
    assert 0 < r["tissue_nodes"] < r["grid_nodes"]
    assert r["preparation_s"] > 0 and 0.05 < r["preparation_peak_gib"] < 20
    assert r["setup_s"] > 0 and r["ms_per_step"] > 0
    ph = r["phases_ms_per_step"]
    assert ph["reaction"] > 0 and ph["parabolic"] > 0 and ph["purkinje"] == 0
    assert sum(ph.values()) <= r["ms_per_step"] * 1.0001
    # the beat from preparation + set-up + 40,000 steps at the measured cost, said to be an estimate
    assert r["beat_is"] == "estimate from 0.1 ms"
    assert r["snapshot_s"] > 0          # the two snapshots (t = 0, the end), outside the steps' figures
    assert r["beat_s"] == pytest.approx(r["preparation_s"] + r["setup_s"] + 40000 * r["ms_per_step"] / 1e3
                                        + 2 * r["snapshot_s"])


@pytest.mark.slow
def test_builtin_biv_with_a_network_reports_its_share(tmp_path):
    (r,) = bench(tmp_path, "--cases", "biv-0.25", "--spacing", "0.1", "--purkinje")
    assert r["case"] == "biv-1 purkinje"
    assert r["phases_ms_per_step"]["purkinje"] > 0
    assert r["purkinje"]["pmjs"] > 10


@pytest.mark.slow
def test_the_networks_share_is_the_difference_of_runs_without_and_with_it(tmp_path):
    (r,) = bench(tmp_path, "--cases", "biv-0.25", "--spacing", "0.1", "--network-share", "1")
    n = r["network_share"]
    assert r["case"] == "biv-1 purkinje" and r["purkinje"]["pmjs"] > 0 and n["pairs"] == 1
    assert n["with_ms_per_step"] == [r["ms_per_step"]]
    assert n["added_ms_per_step"] == pytest.approx(n["with_ms_per_step"][0] - n["without_ms_per_step"][0])
    assert n["share"] == pytest.approx(n["added_ms_per_step"] / r["ms_per_step"])


def test_a_geometry_made_in_one_job_is_run_in_another(tmp_path):
    """--prepare-only DIR keeps each case's geometry and its figures; --prepared DIR runs on them, the figures
    carried over (a machine whose jobs cannot hold both)."""
    geo, made = tmp_path / "geo", tmp_path / "made.json"
    run_cli(["bench", "heart", "--cases", "human-0.25", "--spacing", "0.15", "--prepare-only", geo, "--json", made],
            check=True)
    (g,) = json.loads(made.read_text())["results"]
    assert (geo / "human-1.5.h5").is_file() and g["preparation_s"] > 0 and "ms_per_step" not in g
    (r,) = bench(tmp_path, "--cases", "human-0.25", "--spacing", "0.15", "--prepared", geo)
    assert r["preparation_s"] == g["preparation_s"] and r["ms_per_step"] > 0 and (geo / "human-1.5.h5").is_file()
    proc = run_cli(["bench", "heart", "--cases", "biv-0.25", "--prepared", geo])
    assert proc.returncode == 2 and "has no biv-0.25.h5 and biv-0.25.json" in proc.stderr
    assert "Traceback" not in proc.stderr

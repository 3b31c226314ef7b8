"""Whole runs on 4 GPUs (resident placement, one rank per GPU, cardiosim's stencil solvers split over the ranks,
halos through CUDA IPC): equal to the cpu placement within the solver tolerance (Bondarenko bidomain in 3D, and the
masked anatomy with its ECG), and a checkpoint written on 4 GPUs resumed on 2 equals the run on 2 throughout. Run on
a node with 4 GPUs (the 2-GPU cases are tests/test_multigpu_runs_gpu.py):

    python3 -m pytest -q -s -m gpu tests/test_four_gpus_gpu.py
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from conftest import needs, require_gpu, run_cli
from test_mask import anatomy, anatomy_results, assert_anatomy_agrees
from test_multigpu_runs_gpu import assert_close, layout_options
from test_resident_gpu import CPU, RESIDENT, contents, run, tight, write_config

pytestmark = [pytest.mark.gpu, pytest.mark.mpi]


@pytest.fixture(scope="module", autouse=True)
def four_gpus():
    n = require_gpu()
    needs("multigpu", n >= 4, "4 GPUs")


@pytest.mark.parametrize("model, equations, geometry", [("bondarenko", "bidomain", "3D"), ("tt06", "bidomain", "2D")])
def test_four_gpus_equal_cpu(tmp_path, model, equations, geometry):
    cfg = write_config(tmp_path, model, equations, geometry)
    cpu, _ = run(tmp_path, cfg, "cpu", CPU, 1)
    four, stdout = run(tmp_path, cfg, "four", RESIDENT, 4, petsc=layout_options(cfg, "ranks-ipc"))
    a, b = contents(cpu), contents(four)
    assert b["layout"]["mpi_ranks"] == 4 and len(set(b["layout"]["gpus"])) == 4
    assert "split over 4 ranks" in stdout and "ipc" in stdout
    assert_close(a, b, f"{model} {equations} {geometry} on 4 GPUs against cpu")


def test_masked_anatomy_on_four_gpus_equals_cpu(tmp_path):
    cfg = anatomy(tmp_path)
    ref = anatomy_results(run(tmp_path, cfg, "cpu", CPU, 1)[0])
    got = anatomy_results(run(tmp_path, cfg, "four", RESIDENT, 4, petsc=layout_options(cfg, "ranks-ipc"))[0])
    assert_anatomy_agrees(got, ref, 1e-6, "4 GPUs vs cpu")


def test_checkpoint_of_four_gpus_resumes_on_two(tmp_path):
    """4 ms on 4 GPUs with a checkpoint at 2 ms, resumed on 2 GPUs, against 4 ms on 2 GPUs throughout."""
    cfg = write_config(tmp_path, "tt06", "bidomain", "2D")
    ck = ["checkpoint.interval=2.0"]
    petsc = layout_options(cfg, "ranks-ipc")
    two, _ = run(tmp_path, cfg, "two", RESIDENT + ck, 2, petsc=petsc)
    four, _ = run(tmp_path, cfg, "four", RESIDENT + ck, 4, petsc=petsc)
    part = tmp_path / "four-then-two.h5"
    shutil.copy(four, part)
    shutil.copy(tmp_path / "four.ckpt.h5", tmp_path / "four-then-two.ckpt.h5")
    args = ["run", cfg, "--output", part, "--quiet", "--restart", tmp_path / "four-then-two.ckpt.h5"]
    for s in RESIDENT:
        args += ["--set", s]
    run_cli([*args, "--", *tight(cfg), *petsc], np=2, check=True, timeout=900)
    assert_close(contents(two), contents(part), "checkpoint of 4 GPUs at 2 ms resumed on 2, against 2 throughout")

"""Whole runs on 2 GPUs (resident placement, one rank per GPU) with cardiosim's stencil solvers over the ranks:
equal to the cpu placement within the solver tolerance in every layout and transport — the grid split over the
GPUs (halos through CUDA IPC, and host-staged MPI as across nodes) and the whole solve on rank 0's GPU — for TT06
and Bondarenko, monodomain and bidomain, 2D and 3D, and the masked anatomy; a restart on 2 GPUs is bit-identical,
and a checkpoint moves from 2 GPUs to 1 and back within the tolerance. Run on a node with 2 GPUs:

    python3 -m pytest -q -s -m gpu tests/test_multigpu_runs_gpu.py
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from conftest import needs, require_gpu, run_cli
from test_mask import anatomy, anatomy_results, assert_anatomy_agrees
from test_resident_gpu import CPU, RESIDENT, contents, run, tight, write_config

pytestmark = [pytest.mark.gpu, pytest.mark.mpi]


def layout_options(cfg, layout: str) -> list[str]:
    """PETSc options of a layout for each solver of the config: the parabolic one is CG + Jacobi here (no
    hierarchy); the elliptic multigrid agglomerates late on these small grids, so that levels are split over the
    ranks."""
    kinds = {"ranks-ipc": ("ranks", "ipc"), "ranks-host": ("ranks", "mpi-host"), "root": ("root", "auto")}
    where, transport = kinds[layout]
    out = ["-parabolic_smg_layout", where, "-parabolic_smg_transport", transport]
    if 'equations = "bidomain"' in cfg.read_text():
        out += ["-elliptic_smg_layout", where, "-elliptic_smg_transport", transport, "-elliptic_smg_agglomerate", "64"]
    return out


@pytest.fixture(scope="module", autouse=True)
def two_gpus():
    n = require_gpu()
    needs("multigpu", n >= 2, "2 GPUs")


def assert_close(a: dict, b: dict, what: str, tol: float = 1e-6) -> None:
    print(f"\n{what}:")
    for key in a:
        if key == "layout":
            continue
        x, y = a[key], b[key]
        assert np.array_equal(np.isnan(x), np.isnan(y)), key
        d = float(np.nanmax(np.abs(x - y))) if np.isfinite(x).any() else 0.0
        print(f"  {key:<22} max difference {d:.3g}")
        assert d < tol, key


@pytest.mark.parametrize("model, equations, geometry", [("tt06", "bidomain", "2D"), ("bondarenko", "monodomain", "3D"),
                                                        ("tt06", "bidomain", "3D")])
@pytest.mark.parametrize("layout", ["ranks-ipc", "ranks-host", "root"])
def test_two_gpus_equal_cpu(tmp_path, model, equations, geometry, layout):
    cfg = write_config(tmp_path, model, equations, geometry)
    cpu, _ = run(tmp_path, cfg, "cpu", CPU, 1)
    two, stdout = run(tmp_path, cfg, "two", RESIDENT, 2, petsc=layout_options(cfg, layout))
    a, b = contents(cpu), contents(two)
    assert b["layout"]["mpi_ranks"] == 2 and len(b["layout"]["gpus"]) >= 2
    assert a["Vm"][-1].max() > 0.0 or np.nanmax(a["activation"]) > 0.0
    assert ("ipc" if layout == "ranks-ipc" else "mpi-host" if layout == "ranks-host" else "rank 0") in stdout
    assert_close(a, b, f"{model} {equations} {geometry} on 2 GPUs ({layout}) against cpu")


@pytest.mark.parametrize("balance", ["box", "tissue"])
def test_masked_anatomy_on_two_gpus_equals_cpu(tmp_path, balance):
    """The masked anatomy split over 2 GPUs (IPC), by PETSc's even split of the box (auto's choice for the resident
    placement) and by tissue nodes (grid.balance = "tissue": uneven boxes for the stencil solvers' seam)."""
    cfg = anatomy(tmp_path)
    ref = anatomy_results(run(tmp_path, cfg, "cpu", CPU, 1)[0])
    sets = RESIDENT + [f'grid.balance="{balance}"']
    got = anatomy_results(run(tmp_path, cfg, "two", sets, 2, petsc=layout_options(cfg, "ranks-ipc"))[0])
    assert_anatomy_agrees(got, ref, 1e-6, f"2 GPUs ({balance} split) vs cpu")


@pytest.fixture(scope="module")
def restarts(tmp_path_factory):
    """Uninterrupted runs on 2 GPUs (the grid split over them, IPC) and on 1 (4 ms, checkpoint at 2 ms); each
    checkpoint resumed on 2 GPUs and on 1."""
    d = tmp_path_factory.mktemp("multigpu-restart")
    cfg = write_config(d, "tt06", "bidomain", "2D")
    ck = ["checkpoint.interval=2.0"]
    gpus = {"two": 2, "one": 1}
    petsc = {"two": layout_options(cfg, "ranks-ipc"), "one": []}
    out = {}
    for name, np_ in gpus.items():
        path, _ = run(d, cfg, name, RESIDENT + ck, np_, petsc=petsc[name])
        out[name] = path
        for other, onp in gpus.items():
            part = d / f"{name}-then-{other}.h5"
            shutil.copy(path, part)
            shutil.copy(d / f"{name}.ckpt.h5", d / f"{name}-then-{other}.ckpt.h5")
            args = ["run", cfg, "--output", part, "--quiet", "--restart", d / f"{name}-then-{other}.ckpt.h5"]
            for s in RESIDENT:
                args += ["--set", s]
            run_cli([*args, "--", *tight(cfg), *petsc[other]], np=onp, check=True, timeout=900)
            out[f"{name}-then-{other}"] = part
    return out


def test_restart_on_two_gpus_is_bit_identical(restarts):
    a, b = contents(restarts["two"]), contents(restarts["two-then-two"])
    for key in a:
        if key != "layout":
            assert np.array_equal(a[key], b[key], equal_nan=True), key


@pytest.mark.parametrize("first, then", [("two", "one"), ("one", "two")])
def test_checkpoint_moves_between_two_gpus_and_one(restarts, first, then):
    assert_close(contents(restarts[then]), contents(restarts[f"{first}-then-{then}"]),
                 f"checkpoint of {first} GPU(s) at 2 ms resumed on {then}, against {then} throughout")

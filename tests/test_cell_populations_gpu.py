"""Several cell models per run on the GPU (cardiosim.reaction.multimodel). Run on a GPU node:

    python3 -m pytest -q -s -m gpu tests/test_cell_populations_gpu.py

A bidomain sheet of TT06 (left half, built-in kernel) and Beeler-Reuter 1977 (right half, generated from
models/beeler_reuter_model_1977.cellml), stimulated at both ends, 3 ms:

- grouped (1 and 2 ranks), per-rank and resident (1 rank, and 2 ranks sharing the GPU) equal the cpu placement with
  native cells within the solver tolerance (each population compiles and runs its own kernel on the one GPU);
- a resident run restarted from its checkpoint equals the uninterrupted resident run bit for bit (both
  populations downloaded into the checkpoint, uploaded again).
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import require_gpu, run_cli
from test_cell_populations import RIGHT, SHEET, datasets

pytestmark = pytest.mark.gpu

BR = Path(__file__).resolve().parents[1] / "models" / "beeler_reuter_model_1977.cellml"
TIGHT = ["-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"]
LAYOUTS = {
    "grouped, 1 rank": (1, ['cell.placement="grouped"', 'cell.backend="cuda"']),
    "grouped, 2 ranks": (2, ['cell.placement="grouped"', 'cell.backend="cuda"']),
    "per-rank, 2 ranks": (2, ['cell.placement="per-rank"', 'cell.backend="cuda"']),
    "resident, 1 rank": (1, ['cell.placement="resident"', 'cell.backend="cuda"']),
    "resident, 2 ranks": (2, ['cell.placement="resident"', 'cell.backend="cuda"', "cell.share_gpu=true"]),
}


def config(d: Path) -> Path:
    cfg = d / "two-models.toml"
    cfg.write_text(SHEET.format(model="tt06", regions=RIGHT.format(model=BR), duration=3.0, output="")
                   .replace('equations = "monodomain"', 'equations = "bidomain"')
                   .replace('backend = "numpy"', 'backend = "native"'))
    return cfg


def run(d, cfg, tag, sets, np_=1, extra=()):
    out = d / f"{tag.replace(' ', '').replace(',', '-')}.h5"
    args = ["run", cfg, "--output", out, "--quiet", *(extra or ["--overwrite"])]
    for s in sets:
        args += ["--set", s]
    run_cli([*args, "--", *TIGHT], np=np_, check=True, timeout=900)
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    require_gpu()
    d = tmp_path_factory.mktemp("populations")
    cfg = config(d)
    return d, cfg, datasets(run(d, cfg, "cpu", ['cell.placement="cpu"']))


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_two_models_on_the_gpu_equal_cpu(reference, layout):
    d, cfg, cpu = reference
    np_, sets = LAYOUTS[layout]
    gpu = datasets(run(d, cfg, layout, sets, np_))
    assert cpu["probes/left/Vm"].max() > 10.0 and cpu["probes/right/Vm"].max() > -20.0   # both fired
    for name in ("fields/Vm", "fields/phi_e", "probes/left/Vm", "probes/right/Vm", "maps/activation_time"):
        if name in cpu:
            err = np.nanmax(np.abs(cpu[name] - gpu[name]))
            print(f"{layout}: {name} max |gpu - cpu| = {err:.3g}")
            assert err < 1e-6, (layout, name, err)


def test_resident_restart_of_two_models_is_bit_identical(reference):
    d, cfg, _ = reference
    sets = LAYOUTS["resident, 1 rank"][1]
    full = run(d, cfg, "resident-full", sets)
    part = run(d, cfg, "resident-part", [*sets, "simulation.duration=2.0", "checkpoint.interval=1.0"])
    ckpt = part.with_suffix(".ckpt.h5")
    with h5py.File(ckpt) as c:
        assert c["populations/1"].attrs["model"] == str(BR)
    run(d, cfg, "resident-part", sets, extra=["--restart", ckpt])
    a, b = datasets(full), datasets(part)
    for name in a:
        if not name.startswith("timing"):
            assert np.array_equal(a[name], b[name], equal_nan=True), name

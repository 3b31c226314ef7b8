"""Files written by earlier versions stay readable (tests/data/legacy/README.md): inspect, plot and a restart from
an old checkpoint, which must continue exactly where the old run went on."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import ROOT, run_cli

LEGACY = sorted(p for p in (ROOT / "tests" / "data" / "legacy").iterdir() if p.is_dir())


def test_there_are_legacy_files():
    assert LEGACY, "tests/data/legacy holds no version folder"


@pytest.mark.parametrize("folder", LEGACY, ids=[p.name for p in LEGACY])
def test_inspect_reads_old_output(folder):
    proc = run_cli(["inspect", folder / "sheet.h5"])
    assert proc.returncode == 0, proc.stderr
    assert "finished" in proc.stdout and "snapshots: 5" in proc.stdout
    proc = run_cli(["inspect", folder / "sheet.h5", "--config"])
    assert proc.returncode == 0 and "[simulation]" in proc.stdout, proc.stderr


@pytest.mark.parametrize("folder", LEGACY, ids=[p.name for p in LEGACY])
def test_plot_draws_old_output(tmp_path, folder):
    proc = run_cli(["plot", folder / "sheet.h5", "--times", "1", "4", "--out", tmp_path])
    assert proc.returncode == 0, proc.stderr
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert "sheet_Vm.png" in pngs and "sheet_probes.png" in pngs, pngs


@pytest.mark.mpi
@pytest.mark.parametrize("folder", LEGACY, ids=[p.name for p in LEGACY])
def test_restart_from_old_checkpoint(tmp_path, folder):
    """The old checkpoint (t = 2 ms) resumed by today's code, appending to a copy of the old output: the second half
    is written again and equals the old run's (2 ranks, as it was run; the same numbers today, but a later change of
    round-off is allowed up to a small fraction of the solver tolerance's effect)."""
    for name in ("sheet.toml", "sheet.h5", "sheet.ckpt.h5"):
        shutil.copy(folder / name, tmp_path / name)
    with h5py.File(tmp_path / "sheet.h5", "r+") as f:
        old = f["fields/Vm"][:].copy()
        f["fields/Vm"][3:] = 0.0              # what the restart must write again
    proc = run_cli(["run", "sheet.toml", "--output", "sheet.h5", "--restart", "sheet.ckpt.h5", "--quiet"],
                   cwd=tmp_path, np=2)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with h5py.File(tmp_path / "sheet.h5") as f:
        new = f["fields/Vm"][:]
        assert f["fields/time"][-1] == 4.0
    assert np.array_equal(new[:3], old[:3])
    d = float(np.abs(new[3:] - old[3:]).max())
    print(f"\n{folder.name}: max |restarted - old run| after t = 2 ms: {d:.3g} mV")
    assert d < 1e-7


@pytest.mark.parametrize("folder", LEGACY, ids=[p.name for p in LEGACY])
@pytest.mark.parametrize("addition,words", [
    ('[ecg]\n[[ecg.electrodes]]\nname = "far"\nposition = [2.0, 0.2]\n', ["ecg.electrodes[0]", "written for another"]),
    ("", ["grid.origin", "written for another"]),
])
def test_restart_from_old_checkpoint_refuses_new_settings(tmp_path, folder, addition, words):
    """An old checkpoint knows nothing of [[ecg.electrodes]] or grid.origin: it ran without them, so adding them
    on a restart is a change of config, refused in one line (not an internal error)."""
    from test_bad_input import assert_one_line
    for name in ("sheet.toml", "sheet.h5", "sheet.ckpt.h5"):
        shutil.copy(folder / name, tmp_path / name)
    text = (tmp_path / "sheet.toml").read_text()
    text = text + addition if addition else text.replace("spacing = 0.05", "spacing = 0.05\norigin = [-0.05, 0.0]")
    (tmp_path / "sheet.toml").write_text(text)
    proc = run_cli(["run", "sheet.toml", "--output", "sheet.h5", "--restart", "sheet.ckpt.h5", "--quiet"],
                   cwd=tmp_path)
    assert_one_line(proc, "new setting", words)

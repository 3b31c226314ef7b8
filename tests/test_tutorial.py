"""The heart tutorial (docs/user/tutorial.md) as its reader runs it: the LV from `cardiosim geometry lv`, its labels, the
run of run/lv-ecg.toml at 1 mm with physiological conductivities (the wave must cross the heart: --strict passes
the end-of-run checks), a physiological QRS, and the figures. The tutorial's commands, not a copy of them: the
command lines are read from the tutorial's own code blocks."""

from __future__ import annotations

import re
import shlex
import shutil

import h5py
import numpy as np
import pytest

from conftest import ROOT, run_cli

TUTORIAL = ROOT / "docs" / "user" / "tutorial.md"


def commands(section: str) -> list[list[str]]:
    """The command lines of the tutorial's ```sh (or ```sh slow) block that follows the heading ``section``."""
    text = TUTORIAL.read_text()
    start = text.index(section)
    block = re.search(r"```sh(?: slow)?\n(.*?)```", text[start:], re.S).group(1)
    lines = [ln.split("#", 1)[0].strip() for ln in block.replace("\\\n", " ").splitlines()]
    return [shlex.split(ln) for ln in lines if ln]


def run_step(argv, cwd):
    assert argv[0] == "cardiosim", argv
    return run_cli(argv[1:], cwd=cwd, timeout=900)


@pytest.mark.slow
def test_the_tutorial_runs_and_the_lv_conducts_with_a_physiological_qrs(tmp_path):
    (tmp_path / "run").mkdir()
    shutil.copy(ROOT / "run" / "lv-ecg.toml", tmp_path / "run" / "lv-ecg.toml")
    steps = commands("## 1. The anatomy") + commands("## 2. The run") + commands("## 3. What it did")
    assert [s[:2] for s in steps[:2]] == [["cardiosim", "geometry"], ["cardiosim", "run"]], steps
    for argv in steps:
        argv = [a.replace("docs/tutorial", "figures") for a in argv]
        proc = run_step(argv, tmp_path)
        assert proc.returncode == 0, f"{argv}: {proc.stdout}\n{proc.stderr}"
        if argv[:2] == ["cardiosim", "geometry"]:
            # the [grid] lines the geometry prints are the config's: the two stay in step
            cfg = (ROOT / "run" / "lv-ecg.toml").read_text()
            for key in ("size", "spacing", "origin"):
                printed = re.search(rf"^{key} = (.*)$", proc.stdout, re.M).group(1)
                assert re.search(rf"^{key} = {re.escape(printed)}\s", cfg, re.M), (key, printed)
        if argv[:2] == ["cardiosim", "run"]:
            assert "--strict" in argv and "warning" not in proc.stderr, proc.stderr
    out = tmp_path / "out" / "lv-ecg.h5"
    with h5py.File(out) as f:
        act, tissue = f["maps/activation_time"][()], f["maps/tissue"][()] > 0
        apd = f["maps/apd"][()]
        assert f.attrs["warnings"] == "[]"
    assert np.isfinite(act[tissue]).all()                        # the wave crossed the whole heart
    qrs = np.ptp(act[tissue])
    assert 10.0 < qrs < 120.0, qrs                              # physiological: narrower than a bundle-branch block
    assert np.isfinite(apd[tissue]).all()                        # every node repolarised within the run
    for name in ("Vm", "probes", "ecg", "activation", "apd"):
        assert (tmp_path / "figures" / f"lv-ecg_{name}.png").stat().st_size > 10_000, name

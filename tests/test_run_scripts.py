"""The job scripts in run/: valid bash, calling only what the CLI has; and the requeue script's logic run for real
with stand-ins for srun (mpirun) and scontrol (no SLURM here)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import ROOT, mpirun, require_mpirun, run_cli

SCRIPTS = sorted((ROOT / "run" / "slurm").glob("*.sbatch"))
CONFIG = Path(__file__).parent / "configs" / "sheet.toml"


def test_scripts_exist():
    names = {p.name for p in SCRIPTS}
    assert {"one-node.sbatch", "multi-node.sbatch", "gpu.sbatch", "requeue.sbatch", "multi-node-resident.sbatch"} <= names
    assert (ROOT / "run" / "mpirun-examples.md").is_file()


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_script_is_valid_bash(script):
    proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def _cardiosim_calls(text: str) -> list[list[str]]:
    """The `cardiosim run ...` command lines of a script (continuation lines joined), as argument lists."""
    joined = re.sub(r"\\\n\s*", " ", text)
    calls = []
    for line in joined.splitlines():
        line = line.split("#", 1)[0] if not line.lstrip().startswith("#") else ""
        if "cardiosim run" in line and not line.lstrip().startswith("echo"):
            words = shlex.split(line.split("cardiosim run", 1)[1].split("&")[0])
            calls.append(words)
    return calls


def _documented_calls() -> list[list[str]]:
    md = (ROOT / "run" / "mpirun-examples.md").read_text()
    return [shlex.split(ln.split("cardiosim run", 1)[1].split("#")[0]) for ln in md.splitlines()
            if "cardiosim run" in ln and not ln.startswith(("|", "`cardiosim run`"))]


def test_scripts_use_existing_options_and_keys():
    """Every option given to `cardiosim run` exists, and every --set names a valid key with a valid value."""
    from cardiosim import config
    from cardiosim.cli import _parser
    run = _parser()._subparsers._group_actions[0].choices["run"]
    options = {s for a in run._actions for s in a.option_strings}
    calls = [c for s in SCRIPTS for c in _cardiosim_calls(s.read_text())] + _documented_calls()
    assert len(calls) >= 10
    demo = (ROOT / "run" / "demo.toml").read_text()
    for words in calls:
        ours = words[: words.index("--")] if "--" in words else words
        sets = [ours[i + 1] for i, w in enumerate(ours) if w == "--set"]
        for w in ours:
            if w.startswith("--"):
                assert w in options, f"{w} in {words}"
        config.loads(demo, [s.replace('"$', "") for s in sets if "$" not in s])   # raises on a bad key or value


def test_stopped_status_matches():
    from cardiosim.checkpoint import STOPPED
    text = (ROOT / "run" / "slurm" / "requeue.sbatch").read_text()
    assert f"STOPPED={STOPPED}" in text


@pytest.mark.mpi
def test_requeue_script_resumes(tmp_path):
    """requeue.sbatch with srun = mpirun -n 2 and a recording scontrol: SIGUSR1 to the batch shell (as SLURM's
    --signal=B:USR1 sends it) -> checkpoint, exit 75, `scontrol requeue`; the requeued run resumes from the
    checkpoint and the output equals an uninterrupted run's, bit for bit."""
    launcher = require_mpirun()
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "srun").write_text(f'#!/bin/bash\nwhile [[ $1 == -* ]]; do shift; done\nexec {launcher} -n 2 "$@"\n')
    (bin_ / "scontrol").write_text(f'#!/bin/bash\necho "$@" >> {tmp_path}/scontrol.log\n')
    (bin_ / "cardiosim").write_text(f'#!/bin/bash\nexec {sys.executable} -m cardiosim "$@"\n')
    for p in bin_.iterdir():
        p.chmod(0o755)
    cfg = tmp_path / "sheet.toml"
    cfg.write_text(CONFIG.read_text().replace("duration = 40.0", "duration = 10.0"))
    env = dict(os.environ, PATH=f"{bin_}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               CONFIG=str(cfg), OUT=str(tmp_path / "out.h5"), SLURM_JOB_ID="4242", SLURM_RESTART_COUNT="0",
               PYTHONUNBUFFERED="1")
    script = ROOT / "run" / "slurm" / "requeue.sbatch"
    out = tmp_path / "out.h5"

    first = subprocess.Popen(["bash", str(script)], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and first.poll() is None:
        try:
            with h5py.File(out, "r", locking=False) as f:
                if np.isfinite(f["fields/time"][:]).sum() >= 2:     # complete snapshots (preallocated datasets)
                    break
        except (OSError, KeyError):
            pass
        time.sleep(0.1)
    first.send_signal(signal.SIGUSR1)
    log1, _ = first.communicate(timeout=300)
    print(log1)
    assert first.returncode == 75, log1
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]
    assert "asking cardiosim for a checkpoint" in log1 and "checkpoint written at t = " in log1

    env["SLURM_RESTART_COUNT"] = "1"
    second = subprocess.run(["bash", str(script)], env=env, cwd=tmp_path, capture_output=True, text=True,
                            timeout=300)
    print(second.stdout, second.stderr)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"--restart {tmp_path}/out.ckpt.h5" in second.stdout
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]   # not requeued again

    ref = tmp_path / "ref.h5"
    run_cli(["run", cfg, "--output", ref, "--quiet"], np=2, check=True)
    with h5py.File(ref) as a, h5py.File(out) as b:
        for name in ("fields/Vm", "fields/phi_e", "probes/middle/Vm", "maps/activation_time"):
            assert np.array_equal(a[name][()], b[name][()], equal_nan=True), name

"""The job scripts in run/: valid bash, calling only what the CLI has; each one submitted in a dry run (stand-ins for
sbatch, srun, module and a venv record what the script does: the launcher's command line, the modules, the venv); and
the requeue script's logic run for real with stand-ins for srun (mpirun) and scontrol (no SLURM here)."""

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
    from cardiosim.cli import parser
    run = parser()._subparsers._group_actions[0].choices["run"]
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
    from cardiosim.output.checkpoint import STOPPED
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
               PYTHONUNBUFFERED="1", VENV="")
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
    assert f"--restart {tmp_path}/out.job4242.ckpt.h5" in second.stdout
    assert (tmp_path / "scontrol.log").read_text().split() == ["requeue", "4242"]   # not requeued again

    ref = tmp_path / "ref.h5"
    run_cli(["run", cfg, "--output", ref, "--quiet"], np=2, check=True)
    with h5py.File(ref) as a, h5py.File(out) as b:
        for name in ("fields/Vm", "fields/phi_e", "probes/middle/Vm", "maps/activation_time"):
            assert np.array_equal(a[name][()], b[name][()], equal_nan=True), name


# --- dry runs: sbatch, srun, module and scontrol stood in for, each recording its command line ---------------------

def _stand_ins(tmp_path: Path) -> tuple[Path, Path]:
    """A bin/ of recording stand-ins and a venv whose activate records that it was sourced; (bin, venv)."""
    bin_, venv = tmp_path / "bin", tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    bin_.mkdir(exist_ok=True)
    log = tmp_path / "calls.log"
    record = f'{{ printf "%s" "$(basename "$0")"; printf " %q" "$@"; echo; }} >> {log}\n'
    # sbatch: record, then run the script as a batch job would (a bash shell, in the submit folder, with SLURM's
    # variables). srun, module, scontrol: record only.
    (bin_ / "sbatch").write_text("#!/bin/bash\n" + record + 'exec bash "${@: -1}"\n')
    for name in ("srun", "module", "scontrol"):
        (bin_ / name).write_text("#!/bin/bash\n" + record)
    for p in bin_.iterdir():
        p.chmod(0o755)
    (venv / "bin" / "activate").write_text(f"echo activate {venv} >> {log}\n")
    return bin_, venv


def _calls(tmp_path: Path) -> list[list[str]]:
    log = tmp_path / "calls.log"
    return [shlex.split(ln) for ln in log.read_text().splitlines()] if log.exists() else []


def _submit(tmp_path, script: Path, cwd: Path, **env):
    bin_, venv = _stand_ins(tmp_path)
    full = dict(os.environ, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}", VENV=str(venv), SLURM_JOB_ID="777",
                SLURM_SUBMIT_DIR=str(cwd))
    full.update(env)
    for name in ("CONFIG", "OUT", "RESUME", "MODULES", "SRUN_MPI", "LAUNCH", "SLURM_RESTART_COUNT"):
        if name not in env:
            full.pop(name, None)
    proc = subprocess.run([str(bin_ / "sbatch"), str(script)], cwd=cwd, env=full, capture_output=True, text=True,
                          timeout=60)
    return proc, _calls(tmp_path)


def _sbatch_option(script: Path, name: str) -> str | None:
    found = re.search(rf"^#SBATCH --{name}=(\S+)", script.read_text(), re.M)
    return found.group(1) if found else None


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_dry_run(script, tmp_path):
    """Each script as shipped: the venv activated, `srun --mpi=pmix --kill-on-bad-exit=1 cardiosim run CONFIG ...`
    once, with a config that exists and takes the script's --set options; on GPUs the resident placement with a
    model that has a CUDA kernel and one rank per GPU."""
    from cardiosim import cells, config
    cwd = ROOT if script.name != "requeue.sbatch" else tmp_path
    env = {"CONFIG": str(ROOT / "run" / "demo.toml")} if script.name == "requeue.sbatch" else {}
    proc, calls = _submit(tmp_path, script, cwd, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    names = [c[0] for c in calls]
    assert names[:2] == ["sbatch", "activate"] and names.count("srun") == 1 and "module" not in names, calls
    srun = next(c for c in calls if c[0] == "srun")
    assert srun[1:5] == ["--mpi=pmix", "--kill-on-bad-exit=1", "cardiosim", "run"], srun
    words = srun[5:]
    ours = words[: words.index("--")] if "--" in words else words
    cfg_path = (cwd / ours[0]).resolve()
    assert cfg_path.is_file(), cfg_path
    sets = [ours[i + 1] for i, w in enumerate(ours) if w == "--set"]
    cfg = config.load(str(cfg_path), sets)                      # raises on a bad key or value
    if _sbatch_option(script, "gpus-per-node"):
        assert cfg.cell.placement == "resident" and cfg.cell.backend == "cuda"
        assert cells.model_class(cfg.cell.model).kernel_name, f"{cfg.cell.model} has no CUDA kernel"
        assert _sbatch_option(script, "gpus-per-node") == _sbatch_option(script, "ntasks-per-node")
        assert "-dm_vec_type" not in words         # the resident placement chooses PETSc's GPU types itself


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_dry_run_with_this_clusters_settings(script, tmp_path):
    """MODULES loaded before the venv, SRUN_MPI reaches srun, LAUNCH replaces the launcher."""
    cwd = tmp_path
    env = {"CONFIG": str(ROOT / "run" / "demo.toml"), "MODULES": "openmpi/4.1.6 cuda/13.0", "SRUN_MPI": "pmi2"}
    proc, calls = _submit(tmp_path, script, cwd, **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [c[0] for c in calls][:3] == ["sbatch", "module", "activate"], calls
    assert calls[1][1:] == ["load", "openmpi/4.1.6", "cuda/13.0"]
    assert next(c for c in calls if c[0] == "srun")[1] == "--mpi=pmi2"
    (tmp_path / "calls.log").unlink()
    proc, calls = _submit(tmp_path, script, cwd, CONFIG=env["CONFIG"], LAUNCH="srun -n 3")
    assert next(c for c in calls if c[0] == "srun")[1:5] == ["-n", "3", "cardiosim", "run"], calls


@pytest.mark.parametrize("script", SCRIPTS, ids=[p.name for p in SCRIPTS])
def test_dry_run_without_a_venv(script, tmp_path):
    proc, calls = _submit(tmp_path, script, tmp_path, VENV=str(tmp_path / "nowhere"),
                          CONFIG=str(ROOT / "run" / "demo.toml"))
    assert proc.returncode == 2 and "srun" not in [c[0] for c in calls]
    assert proc.stderr.strip().splitlines() == [f"cardiosim: no venv at {tmp_path / 'nowhere'}: run make setup in "
                                                f"the checkout first, or set VENV"]


def _requeue_start(tmp_path, **env) -> list[str]:
    """The `cardiosim run` options requeue.sbatch chooses (its srun command line after the config)."""
    proc, calls = _submit(tmp_path, ROOT / "run" / "slurm" / "requeue.sbatch", tmp_path,
                          CONFIG=str(ROOT / "run" / "demo.toml"), **env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (tmp_path / "calls.log").unlink()
    return next(c for c in calls if c[0] == "srun")[6:]


def test_requeue_resumes_only_its_own_chain(tmp_path):
    """A checkpoint an earlier submission left (job 111) is never resumed by a new chain (job 777): it starts afresh
    and, since the output exists, without --overwrite (cardiosim refuses to replace it). Requeued, job 777 resumes
    its own checkpoint; RESUME names an earlier chain's on purpose."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "demo.job111.ckpt.h5").write_bytes(b"stale")
    (out / "demo.h5").write_bytes(b"earlier output")
    first = _requeue_start(tmp_path, SLURM_RESTART_COUNT="0")
    assert "--restart" not in first and "--overwrite" not in first, first
    assert first[:4] == ["--output", "out/demo.h5", "--set", 'checkpoint.path="out/demo.job777.ckpt.h5"'], first
    # requeued after a failure before any checkpoint: its own output of the first attempt, started afresh
    assert _requeue_start(tmp_path, SLURM_RESTART_COUNT="1")[-1] == "--overwrite"
    (out / "demo.job777.ckpt.h5").write_bytes(b"ours")
    assert _requeue_start(tmp_path, SLURM_RESTART_COUNT="1")[-2:] == ["--restart", "out/demo.job777.ckpt.h5"]
    (out / "demo.job777.ckpt.h5").unlink()
    resume = _requeue_start(tmp_path, SLURM_RESTART_COUNT="0", RESUME="out/demo.job111.ckpt.h5")
    assert resume[-2:] == ["--restart", "out/demo.job111.ckpt.h5"], resume

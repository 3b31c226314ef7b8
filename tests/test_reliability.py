"""Nothing lost, nothing silently changed: real concurrent runs on one output, real signals on real runs,
kills at the worst moment, `cardiosim cell` on every model, what `--help` says.

(The one-line bad-input cases of the same kind are rows of the tables in tests/test_bad_input.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import mpirun, run_cli
from test_bad_input import assert_one_line, checksums

CONFIG = Path(__file__).parent / "configs" / "sheet.toml"
STOPPED = 75


def start(args, np_: int = 2, cwd=None) -> subprocess.Popen:
    """``cardiosim ARGS`` in the background (under mpirun when np_ > 1), in its own process group."""
    cmd = [sys.executable, "-m", "cardiosim", *map(str, args)]
    if np_ > 1:
        launcher = mpirun()
        if launcher is None:
            pytest.skip("no mpirun available")
        cmd = [launcher, "-n", str(np_), *cmd]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd,
                            start_new_session=True)


def wait_for(condition, proc, timeout=120.0, poll=0.005) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended first ({proc.returncode}): {proc.communicate()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("timed out")
        time.sleep(poll)


def snapshots(path: Path) -> int:
    try:
        with h5py.File(path, "r", locking=False) as f:
            return int(np.isfinite(f["fields/time"][:]).sum())
    except (OSError, KeyError):
        return 0


# -- class 1: two runs, one output --------------------------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.slow
def test_second_run_on_a_file_in_use_is_refused(tmp_path):
    """A run (2 ranks) writes out.h5; a second run on the same output with --overwrite is refused in one line
    (exit 2) while the first goes on; the first ends normally with a whole, readable file."""
    out = tmp_path / "out.h5"
    first = start(["run", CONFIG, "--quiet", "--output", out, "--set", "simulation.duration=8.0"], cwd=tmp_path)
    wait_for(lambda: snapshots(out) >= 1, first)
    second = run_cli(["run", CONFIG, "--quiet", "--output", out, "--overwrite", "--set", "simulation.duration=2.0"],
                     cwd=tmp_path, timeout=120)
    assert first.poll() is None, "the first run must still be running for this test to mean anything"
    assert_one_line(second, "second run", [str(out), "in use by another run", "pid"])
    stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stdout + stderr
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "finished" and f["fields/time"][-1] == 8.0
        assert np.isfinite(f["fields/Vm"][:]).all()
    proc = run_cli(["inspect", out])
    assert proc.returncode == 0 and "finished" in proc.stdout, proc.stderr
    assert not (tmp_path / ".out.h5.lock").exists()     # released at the end


def test_lock_is_taken_again_after_a_killed_run(tmp_path):
    """A run killed with SIGKILL leaves its lock file, but no lock: the next run with --overwrite goes ahead."""
    out = tmp_path / "out.h5"
    first = start(["run", CONFIG, "--quiet", "--output", out, "--set", "simulation.duration=20.0"], np_=1,
                  cwd=tmp_path)
    wait_for(lambda: snapshots(out) >= 1, first)
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate()
    assert (tmp_path / ".out.h5.lock").exists()
    run_cli(["run", CONFIG, "--quiet", "--output", out, "--overwrite", "--set", "simulation.duration=0.2"],
            cwd=tmp_path, check=True)
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "finished"


# -- class 3: signals ---------------------------------------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.slow
def test_sigint_is_a_checkpoint_and_exit_75(tmp_path):
    """Ctrl-C (SIGINT to mpirun, which forwards it to the ranks): a checkpoint, exit 75, one line on stdout, nothing on
    stderr; the restart finishes the run."""
    out = tmp_path / "out.h5"
    args = ["run", CONFIG, "--quiet", "--output", out, "--set", "simulation.duration=8.0"]
    proc = start(args, cwd=tmp_path)
    wait_for(lambda: snapshots(out) >= 2, proc)
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == STOPPED, stdout + stderr
    # MPICH's mpiexec says itself that it passes the Ctrl-C on (two lines of its own, "[mpiexec@host] ...").
    ours = [ln for ln in stdout.splitlines() if ln.strip() and not ln.startswith("[mpiexec@")]
    assert stderr.strip() == "" and len(ours) == 1 and "checkpoint written at t = " in ours[0], stdout
    with h5py.File(out, "r") as f:      # a clean stop, said as such (inspect: "stopped cleanly at a checkpoint")
        assert f.attrs["status"] == "stopped" and f.attrs["stopped_by"] == "checkpoint"
    run_cli([*args, "--restart", tmp_path / "out.ckpt.h5"], np=2, check=True, cwd=tmp_path)
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "finished" and f["fields/time"][-1] == 8.0 and "stopped_by" not in f.attrs


@pytest.mark.mpi
def test_sigterm_during_set_up_is_a_clean_stop(tmp_path):
    """SIGTERM while the run is being set up (PETSc initialised, the output claimed, the grid not yet made): no
    PETSc signal dump; the run stops after its first step with a checkpoint and exit 75, and goes on from it."""
    out = tmp_path / "out.h5"
    args = ["run", CONFIG, "--quiet", "--output", out, "--set", "simulation.duration=2.0"]
    proc = start(args, cwd=tmp_path)
    wait_for(lambda: (tmp_path / ".out.h5.lock").exists(), proc, poll=0.001)
    os.kill(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    print(stdout, stderr)
    assert proc.returncode == STOPPED, stdout + stderr
    assert stderr.strip() == "" and "PETSC" not in stdout.upper()
    with h5py.File(tmp_path / "out.ckpt.h5") as c:
        assert int(c.attrs["step"]) == 1
    run_cli([*args, "--restart", tmp_path / "out.ckpt.h5"], np=2, check=True, cwd=tmp_path)


@pytest.mark.mpi
@pytest.mark.slow
def test_second_sigterm_during_the_checkpoint_keeps_exit_75(tmp_path):
    """Two SIGTERMs, the second while the first one's checkpoint is being written: still exit 75, one line."""
    out = tmp_path / "out.h5"
    proc = start(["run", CONFIG, "--quiet", "--output", out, "--set", "simulation.duration=8.0"], cwd=tmp_path)
    wait_for(lambda: snapshots(out) >= 2, proc)
    os.kill(proc.pid, signal.SIGTERM)
    wait_for(lambda: (tmp_path / "out.ckpt.h5.tmp").exists() or (tmp_path / "out.ckpt.h5").exists(), proc,
             timeout=60, poll=0.0005)
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == STOPPED, stdout + stderr
    assert stderr.strip() == "" and "checkpoint written at t = " in stdout


def test_sigint_without_checkpoints_is_one_line_exit_130(tmp_path):
    """checkpoint.on_signal = false: Ctrl-C ends the run with one line and exit status 130 (no traceback, no
    "internal error"); the output keeps what was written, marked stopped."""
    out = tmp_path / "out.h5"
    proc = start(["run", CONFIG, "--quiet", "--output", out, "--set", "simulation.duration=20.0",
                  "--set", "checkpoint.on_signal=false"], np_=1, cwd=tmp_path)
    wait_for(lambda: snapshots(out) >= 2, proc)
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert proc.returncode == 130 and lines == ["cardiosim: error: interrupted (SIGINT)"], stdout + stderr
    assert not (tmp_path / "out.ckpt.h5").exists()
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "stopped" and f["fields/time"].shape[0] >= 2


def test_kill_right_after_the_output_is_made_leaves_no_unreadable_file(tmp_path):
    """SIGKILL the moment the new output file appears (under its temporary name): the earlier file that --overwrite
    would have replaced is still there, byte for byte, and readable."""
    out = tmp_path / "out.h5"
    run_cli(["run", CONFIG, "--quiet", "--output", out, "--set", "simulation.duration=0.2"], cwd=tmp_path, check=True)
    before = checksums(tmp_path)
    proc = start(["run", CONFIG, "--quiet", "--output", out, "--overwrite", "--set", "simulation.duration=4.0"],
                 np_=1, cwd=tmp_path)
    wait_for(lambda: (tmp_path / ".out.h5.part").exists(), proc, poll=0.0005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate()
    after = checksums(tmp_path)
    assert after["out.h5"] == before["out.h5"]
    with h5py.File(out, "r") as f:
        assert f.attrs["status"] == "finished"


def test_kill_at_any_moment_of_set_up_leaves_a_readable_file(tmp_path):
    """SIGKILL at a spread of moments after the start of a fresh run: out.h5 is either absent or opens."""
    for delay in (0.3, 0.6, 0.9, 1.2, 1.5):
        out = tmp_path / f"out{delay}.h5"
        proc = start(["run", CONFIG, "--quiet", "--output", out, "--set", "simulation.duration=4.0"], np_=1,
                     cwd=tmp_path)
        time.sleep(delay)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        if out.exists():
            with h5py.File(out, "r", locking=False) as f:
                assert "fields" in f


def test_sigterm_in_a_step_of_many_substeps_stops_soon(tmp_path):
    """ode_substeps = 200000: one PDE step takes seconds. A SIGTERM in the middle of the first step stops the run
    within a chunk of substeps, not at the step's end; the checkpoint is the step's start (t = 0), and a restart
    from it finishes the run."""
    cfg = tmp_path / "case.toml"
    cfg.write_text(CONFIG.read_text().replace("ode_substeps = 1", "ode_substeps = 200000")
                   .replace("duration = 40.0", "duration = 0.04").replace("interval = 2.0", "interval = 0.02"))
    out = tmp_path / "out.h5"
    proc = start(["run", cfg, "--quiet", "--output", out], np_=1, cwd=tmp_path)
    wait_for(lambda: snapshots(out) >= 1, proc)
    time.sleep(0.5)
    sent = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    reacted = time.monotonic() - sent
    print(f"stopped {reacted:.2f} s after the signal")
    assert proc.returncode == STOPPED, stdout + stderr
    assert "checkpoint written at t = 0 ms" in stdout and stderr.strip() == ""
    assert reacted < 2.0
    with h5py.File(tmp_path / "out.ckpt.h5") as c:
        assert int(c.attrs["step"]) == 0


# -- class 8: cardiosim cell --------------------------------------------------------------------------------------
@pytest.mark.parametrize("model,extra", [
    ("mitchell-schaeffer", ["--dt", "0.02", "--period", "300"]),
    ("pathmanathan-gray", ["--dt", "0.001", "--amplitude", "0", "--period", "1", "--param", "Cm=2",
                           "--param", "chi=3"]),
])
def test_cell_runs_every_listed_model(tmp_path, model, extra):
    """`cardiosim cell --list` offers every model, and `cell` runs each (NumPy where there is no C kernel)."""
    listed = run_cli(["cell", "--list"], check=True).stdout
    assert model in listed
    out = tmp_path / "cell.h5"
    run_cli(["cell", "--model", model, "--output", out, "--record-every", "0.02", *extra], check=True)
    with h5py.File(out, "r") as f:
        V = f["trace/V"][:]
        assert np.isfinite(V).all() and len(V) > 10 and "error" not in f.attrs
        if model == "mitchell-schaeffer":
            assert V.max() > 0.0                      # an action potential
        else:
            assert json.loads(f.attrs["overrides"]) == {"Cm": 2.0, "chi": 3.0}


def test_cell_blow_up_is_a_simulation_error(tmp_path):
    """TT06 with dt = 0.5 ms blows up: exit 3 (the run went wrong, not the input), one line naming the state (after
    the set-up's warning that the step is above m's stability limit); the file keeps the trace up to there, marked;
    no JSON."""
    out, js = tmp_path / "cell.h5", tmp_path / "cell.json"
    proc = run_cli(["cell", "--model", "tt06", "--dt", "0.5", "--record-every", "0.5", "--period", "100",
                    "--output", out, "--json", js])
    warned, lines = [], []
    for ln in proc.stderr.splitlines():
        if ln.strip():
            (warned if ln.startswith("cardiosim: warning:") and "stability limit" in ln else lines).append(ln)
    assert proc.returncode == 3 and len(warned) == 1 and len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr and "time step" in lines[0] and str(out) in lines[0]
    assert not js.exists()
    with h5py.File(out, "r") as f:
        assert "error" in f.attrs


@pytest.mark.parametrize("args,words", [
    (["--param", "tau_in=nan"], ["--param tau_in=nan", "finite"]),
    (["--param", "tau_in=inf"], ["finite"]),
    (["--json", "OUT"], ["--json", "also --output"]),
])
def test_cell_bad_input_more(tmp_path, args, words):
    out = tmp_path / "cell.h5"
    args = [str(out) if a == "OUT" else a for a in args]
    before = checksums(tmp_path)
    proc = run_cli(["cell", "--model", "mitchell-schaeffer", "--output", out, *args])
    assert_one_line(proc, " ".join(args), words)
    assert checksums(tmp_path) == before


def test_cell_help_shows_defaults():
    text = run_cli(["cell", "--help"], check=True).stdout
    assert "(default: bondarenko)" in text and "(default: 0.0001)" in text and "(default: out/cell.h5)" in text


# -- class 10: what a new user sees -------------------------------------------------------------------------------
def test_help_texts():
    run = run_cli(["run", "--help"], check=True).stdout
    assert "-- PETSc options" in run and "75" in run
    cfg = run_cli(["config", "--help"], check=True).stdout
    assert "check CONFIG" in cfg


def test_end_of_run_names_every_file_and_iterations_have_units(tmp_path):
    out = tmp_path / "out.h5"
    proc = run_cli(["run", CONFIG, "--output", out, "--set", "simulation.duration=0.2"], cwd=tmp_path, check=True)
    last = proc.stdout.strip().splitlines()[-1]
    assert str(out) in last and str(tmp_path / "out.json") in last and str(tmp_path / "out.xdmf") in last
    with h5py.File(out, "r") as f:
        for name in ("parabolic_iterations", "elliptic_iterations"):
            assert f["solver"][name].attrs["units"] == "1"


def test_kernels_json_is_not_replaced(tmp_path):
    """`cardiosim kernels --json FILE` obeys the rule of every file written (refused before nvcc is needed)."""
    js = tmp_path / "k.json"
    js.write_text("precious")
    before = checksums(tmp_path)
    proc = run_cli(["kernels", "--json", js], cwd=tmp_path)
    assert_one_line(proc, "kernels --json", ["--json", "k.json exists", "--overwrite"])
    assert checksums(tmp_path) == before

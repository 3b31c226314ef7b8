"""Checkpoint and restart (docs/user/checkpoints.md).

- A 2-rank run stopped by a real SIGTERM sent to mpirun, then restarted on 2 ranks, writes an output file whose
  every dataset is bit-identical to an uninterrupted run's; restarted on 1 rank it agrees to round-off.
- A run can be lengthened from a checkpoint of a finished run.
- A full disk while writing a checkpoint: one line, the previous checkpoint and the output survive.
- A blow-up after a checkpoint: exit 3, the message names the checkpoint, which is kept and usable.
(The restart cases of the bad-input table are in tests/test_bad_input.py.)
"""

from __future__ import annotations

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

from conftest import mount_tmpfs, mpirun, require_gpu, require_mpirun, run_cli

CONFIG = Path(__file__).parent / "configs" / "sheet.toml"
# Tight solver tolerances, so that runs on 1 and 2 ranks can be compared to round-off (tests/test_parallel.py).
TIGHT = ["--", "-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"]
STOPPED = 75


def datasets(path) -> dict:
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def snapshots(path) -> int:
    """Snapshots written so far, read while the run writes the file (hence no HDF5 file lock)."""
    try:
        with h5py.File(path, "r", locking=False) as f:
            return int(np.isfinite(f["fields/time"][:]).sum())   # complete ones: the datasets are preallocated
    except (OSError, KeyError):
        return 0


def run_and_signal(args, out: Path, sig, after_snapshots: int, np_: int = 2, timeout=300):
    """Start ``cardiosim ARGS`` under mpirun, send ``sig`` to the mpirun process once the output holds
    ``after_snapshots`` snapshots, wait; returns (exit status, stdout, stderr)."""
    launcher = require_mpirun()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.Popen([launcher, "-n", str(np_), sys.executable, "-m", "cardiosim", *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=out.parent)
    deadline = time.monotonic() + timeout
    while snapshots(out) < after_snapshots and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=timeout)
    return proc.returncode, stdout, stderr


@pytest.fixture(scope="module")
def stopped_and_restarted(tmp_path_factory):
    """An uninterrupted 2-rank run; the same run stopped by SIGTERM to mpirun and restarted on 2 ranks; the stopped
    run restarted on 1 rank instead."""
    d = tmp_path_factory.mktemp("restart")
    common = ["--quiet", "--set", "simulation.duration=10.0"]
    full, part = d / "full.h5", d / "part.h5"
    run_cli(["run", CONFIG, "--output", full, *common, *TIGHT], np=2, check=True)
    rc, stdout, stderr = run_and_signal(["run", CONFIG, "--output", part, *common, *TIGHT], part,
                                        signal.SIGTERM, after_snapshots=2)
    assert rc == STOPPED, stdout + stderr
    ckpt = d / "part.ckpt.h5"
    with h5py.File(ckpt) as c:
        t_stop = float(c.attrs["t"])
    copy, copy_ckpt = d / "one.h5", d / "one.ckpt.h5"
    shutil.copy(part, copy)
    shutil.copy(ckpt, copy_ckpt)
    run_cli(["run", CONFIG, "--output", part, *common, "--restart", ckpt, *TIGHT], np=2, check=True)
    run_cli(["run", CONFIG, "--output", copy, *common, "--restart", copy_ckpt, *TIGHT], np=1, check=True)
    return {"full": full, "two": part, "one": copy, "t_stop": t_stop, "stdout": stdout, "stderr": stderr,
            "ckpt": ckpt}


@pytest.mark.mpi
def test_sigterm_stops_with_one_line(stopped_and_restarted):
    r = stopped_and_restarted
    print(f"\nstopped at t = {r['t_stop']} ms of 10 ms: {r['stdout'].strip()}")
    assert 2.0 <= r["t_stop"] < 10.0
    assert r["stderr"].strip() == ""
    line = r["stdout"].strip()
    assert line.count("\n") == 0
    assert f"checkpoint written at t = {r['t_stop']:g} ms" in line
    assert f"--restart {r['ckpt']}" in line


@pytest.mark.mpi
def test_restart_on_two_ranks_is_bit_identical(stopped_and_restarted):
    r = stopped_and_restarted
    full, two = datasets(r["full"]), datasets(r["two"])
    assert sorted(full) == sorted(two)
    for name in full:
        assert full[name].shape == two[name].shape, name
        assert np.array_equal(full[name], two[name], equal_nan=True), name
    assert full["fields/Vm"].shape[0] == 6 and full["fields/Vm"][-1].max() > 0.0   # the wave is there
    with h5py.File(r["two"]) as f:
        assert '"mpi_ranks": 2' in f.attrs["restarts"]


@pytest.mark.mpi
def test_restart_on_one_rank_agrees(stopped_and_restarted):
    """From the 2-rank checkpoint on 1 rank: the data up to the checkpoint are the stopped run's, bit for bit;
    after it, the preconditioners differ with the rank count, so the runs agree to round-off (amplified a little
    by the wavefront), not bitwise."""
    r = stopped_and_restarted
    full, one = datasets(r["full"]), datasets(r["one"])
    assert sorted(full) == sorted(one)
    n_before = int(np.sum(full["fields/time"] <= r["t_stop"]))
    print(f"\nrestart on 1 rank at t = {r['t_stop']} ms      max |difference|   relative")
    for name in full:
        if name.startswith(("fields/", "probes/", "maps/")):
            a, b = full[name], one[name]
            assert np.array_equal(np.isnan(a), np.isnan(b)), name
            if np.isnan(a).all():          # e.g. no node repolarised yet: the APD map is all NaN in both
                continue
            scale = np.nanmax(np.abs(a)) if name != "fields/time" else 1.0
            d = float(np.nanmax(np.abs(a - b)))
            print(f"  {name:<32}{d:12.3e}{d / scale:12.3e}")
            assert d <= 1e-10 * scale, name
    assert np.array_equal(full["fields/Vm"][:n_before], one["fields/Vm"][:n_before])


def _rank_pids(launcher_pid: int) -> list[int]:
    """The cardiosim processes started by an mpirun (its descendants, from /proc)."""
    parent = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                parent[int(d.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, todo = [], [launcher_pid]
    while todo:
        p = todo.pop()
        kids = [c for c, pp in parent.items() if pp == p]
        todo += kids
        for c in kids:
            try:
                if b"cardiosim" in (Path("/proc") / str(c) / "cmdline").read_bytes():
                    found.append(c)
            except OSError:
                pass
    return found


@pytest.mark.mpi
@pytest.mark.slow
def test_sigusr1_to_one_rank_stops_all(tmp_path):
    """SLURM's --signal without B: reaches every task, but one rank's flag is enough: the ranks agree in the step's
    collective, write one checkpoint of the same step and all exit with 75."""
    launcher = require_mpirun()
    out = tmp_path / "out.h5"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.Popen([launcher, "-n", "2", sys.executable, "-m", "cardiosim", "run", str(CONFIG), "--quiet",
                             "--output", str(out), "--set", "simulation.duration=10.0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    while snapshots(out) < 2 and proc.poll() is None:
        time.sleep(0.1)
    ranks = _rank_pids(proc.pid)
    assert len(ranks) == 2, ranks
    os.kill(max(ranks), signal.SIGUSR1)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == STOPPED, stdout + stderr
    with h5py.File(tmp_path / "out.ckpt.h5") as c, h5py.File(out) as f:
        t = float(c.attrs["t"])
        assert f"checkpoint written at t = {t:g} ms" in stdout
        assert f["probes/time"][-1] == t   # the output stops where the checkpoint is


@pytest.mark.mpi
@pytest.mark.slow
def test_wall_interval_checkpoints(tmp_path):
    """checkpoint.wall_interval: rank 0's clock decides, every rank follows (2 ranks); here every step, so the last
    checkpoint is one step before the end."""
    out = tmp_path / "out.h5"
    run_cli(["run", CONFIG, "--output", out, "--quiet", "--set", "simulation.duration=0.2",
             "--set", "checkpoint.wall_interval=1e-6"], np=2, check=True)
    with h5py.File(tmp_path / "out.ckpt.h5") as c:
        assert int(c.attrs["step"]) == 9 and c.attrs["mpi_ranks"] == 2


@pytest.mark.slow
def test_lengthen_a_finished_run(tmp_path):
    """A checkpoint of a finished run, restarted with a longer duration, gives the longer run (1 rank, bitwise);
    the finished file's maps and iteration counts are written anew."""
    short, long_ = tmp_path / "short.h5", tmp_path / "long.h5"
    run_cli(["run", CONFIG, "--output", long_, "--quiet", "--set", "simulation.duration=6.0"], check=True)
    run_cli(["run", CONFIG, "--output", short, "--quiet", "--set", "simulation.duration=4.0",
             "--set", "checkpoint.interval=3.0"], check=True)
    run_cli(["run", CONFIG, "--output", short, "--quiet", "--set", "simulation.duration=6.0",
             "--restart", tmp_path / "short.ckpt.h5"], check=True)
    a, b = datasets(long_), datasets(short)
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name], equal_nan=True), name


TT06_CABLE = """
[simulation]
duration = 6.0
dt = 0.02
ode_substeps = 10
progress_interval = 0
[grid]
size = [0.4, 0.1]
spacing = 0.01
[cell]
model = "tt06"
backend = "{backend}"
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.03, 0.1]
duration = 1.0
current_density = -52.0
[[probe]]
name = "end"
position = [0.4, 0.05]
[output]
interval = 1.0
"""


@pytest.mark.parametrize("backend", ["native", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_compiled_cells_restart_bit_identical(tmp_path, backend):
    """The compiled backends keep the cell states themselves (the CUDA one on the GPU): a checkpoint takes all 19
    TT06 states from them, a restart puts them back; the output equals an uninterrupted run's bit for bit."""
    if backend == "cuda":
        require_gpu()
    cfg = tmp_path / "cable.toml"
    cfg.write_text(TT06_CABLE.format(backend=backend))
    full, part = tmp_path / "full.h5", tmp_path / "part.h5"
    run_cli(["run", cfg, "--quiet", "--output", full], check=True)
    run_cli(["run", cfg, "--quiet", "--output", part, "--set", "simulation.duration=4.0",
             "--set", "checkpoint.interval=2.5"], check=True)
    with h5py.File(tmp_path / "part.ckpt.h5") as c:
        assert float(c.attrs["t"]) == 2.5 and c["states"].shape[0] == 19
        assert len(set(np.round(c["states"][:, 5, 20], 12))) > 10   # real states, not one row copied
    run_cli(["run", cfg, "--quiet", "--output", part, "--restart", tmp_path / "part.ckpt.h5"], check=True)
    a, b = datasets(full), datasets(part)
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name], equal_nan=True), name
    assert a["fields/Vm"][-1].max() > 0.0


@pytest.mark.mpi
def test_full_disk_keeps_previous_checkpoint_and_output(tmp_path):
    """The checkpoint directory is a small file system that holds one checkpoint but not a second beside it: the
    second write fails (ENOSPC, a real full disk); the run stops with one line; the first checkpoint is whole and
    a restart from it finishes the run, identical to an uninterrupted one."""
    disk = tmp_path / "small"
    mount_tmpfs(disk, "200k")   # one checkpoint of the sheet is ~126 kB: one fits, two do not
    try:
        out, ref = tmp_path / "out.h5", tmp_path / "ref.h5"
        ckpt = disk / "run.ckpt.h5"
        args = ["run", CONFIG, "--output", out, "--quiet", "--set", "simulation.duration=4.0",
                "--set", "checkpoint.interval=1.0", "--set", f'checkpoint.path="{ckpt}"']
        proc = run_cli(args, np=2, timeout=300)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        print(lines)
        assert proc.returncode == 3, proc.stderr
        assert len(lines) == 1 and "checkpoint: cannot write" in lines[0] and "No space left on device" in lines[0]
        assert f"the last checkpoint, t = 1 ms, is kept in {ckpt}" in lines[0] and "Traceback" not in proc.stderr
        assert sorted(p.name for p in disk.iterdir()) == ["run.ckpt.h5"]   # no .tmp left behind
        with h5py.File(ckpt) as c:
            assert float(c.attrs["t"]) == 1.0
        with h5py.File(out) as f:
            assert f["fields/time"][-1] == 2.0   # the output keeps what it wrote
        ckpt_copy = tmp_path / "first.ckpt.h5"
        shutil.copy(ckpt, ckpt_copy)
        run_cli(["run", CONFIG, "--output", out, "--quiet", "--set", "simulation.duration=4.0",
                 "--restart", ckpt_copy, "--set", f'checkpoint.path="{tmp_path / "new.ckpt.h5"}"'], np=2, check=True)
        run_cli(["run", CONFIG, "--output", ref, "--quiet", "--set", "simulation.duration=4.0"], np=2, check=True)
        a, b = datasets(ref), datasets(out)
        for name in a:
            assert np.array_equal(a[name], b[name], equal_nan=True), name
    finally:
        subprocess.run(["umount", str(disk)], check=False)


@pytest.mark.mpi
def test_blow_up_keeps_last_checkpoint(tmp_path):
    """A second, absurd stimulus at t = 3 ms makes the cells leave their range: exit 3, one line with the time,
    the place and the last checkpoint, which is kept and can be restarted from."""
    text = CONFIG.read_text() + ('\n[[stimulus]]\nname = "absurd"\nshape = "box"\nlower = [0.5, 0.2]\n'
                                 'upper = [0.6, 0.3]\nstart = 3.0\nduration = 1.0\ncurrent_density = -1e7\n')
    cfg = tmp_path / "blowup.toml"
    cfg.write_text(text)
    out = tmp_path / "out.h5"
    proc = run_cli(["run", cfg, "--output", out, "--quiet", "--set", "simulation.duration=6.0",
                    "--set", "checkpoint.interval=1.0"], np=2, timeout=300)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    print(lines)
    assert proc.returncode == 3, proc.stderr
    assert len(lines) == 1 and "cell state" in lines[0] and "t = 3.02 ms" in lines[0]
    ckpt = tmp_path / "out.ckpt.h5"
    assert f"the last checkpoint, t = 3 ms, is kept in {ckpt}" in lines[0]
    with h5py.File(ckpt) as c:
        assert float(c.attrs["t"]) == 3.0
        assert np.all(np.isfinite(c["states"][:]))


@pytest.mark.mpi
@pytest.mark.parametrize("before,after", [("cpu", "grouped"), ("grouped", "cpu")])
def test_restart_may_move_the_cells(tmp_path, before, after):
    """A job moved between partitions resumes with another placement: the checkpoint holds the same states whoever
    integrates them. On the same 2 ranks cpu and grouped placements give the same numbers bit for bit
    (tests/test_placement.py), so the resumed run must equal the uninterrupted one bit for bit."""
    common = ["--quiet", "--set", "simulation.duration=6.0", "--set", "checkpoint.interval=4.0", *TIGHT]
    full = tmp_path / "full.h5"
    run_cli(["run", CONFIG, "--output", full, "--set", f'cell.placement="{before}"', *common], np=2, check=True)
    with h5py.File(tmp_path / "full.ckpt.h5") as c:
        assert float(c.attrs["t"]) == 4.0
    moved, moved_ckpt = tmp_path / "moved.h5", tmp_path / "moved.ckpt.h5"
    shutil.copy(full, moved)
    shutil.copy(tmp_path / "full.ckpt.h5", moved_ckpt)
    with h5py.File(moved, "r+") as f:          # what the resumed run writes must come from the resumed run
        f["fields/Vm"][-1] = 0.0
    proc = run_cli(["run", CONFIG, "--output", moved, "--restart", moved_ckpt, "--set", f'cell.placement="{after}"',
                    *common], np=2, check=True)
    a, b = datasets(full), datasets(moved)
    for name in a:
        if name.startswith(("fields/", "probes/", "maps/")):
            assert np.array_equal(a[name], b[name], equal_nan=True), name
    assert a["fields/Vm"][-1].max() > 0.0
    with h5py.File(moved) as f:
        assert f'"placement": "{after}"' in f.attrs["restarts"], proc.stdout

"""`cardiosim sweep` under the failures of tests/test_reliability.py's kind: real signals on a real sweep (to its
process group, as Ctrl-C sends them, and to the sweep alone), the same command again after a stop, two sweeps on one
folder, absurd plans, and the table on a full disk."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import time
from pathlib import Path

import h5py
import pytest

from conftest import mount_tmpfs, run_cli
from test_bad_input import assert_one_line, checksums
from test_reliability import STOPPED, snapshots, start, wait_for

CONFIG = Path(__file__).parent / "configs" / "sheet.toml"


def rows(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def no_run_left(out: Path) -> None:
    """Every run the sweep started has ended: no run's lock file is left in OUT (a run holds its lock, and removes
    it, for its whole life), and no process of this test's runs is alive."""
    assert not list(out.glob(".run-*.lock")), sorted(p.name for p in out.iterdir())
    alive = subprocess.run(["pgrep", "-f", "--", f"--output {out}/run-"], capture_output=True, text=True).stdout
    assert alive.strip() == "", alive


# -- a stop: the runs going stop at a checkpoint, no other starts, the table says so, exit 75 ------------------------
@pytest.mark.slow
def test_ctrl_c_stops_the_sweep_and_the_same_command_goes_on(tmp_path):
    """SIGINT to the sweep's process group (Ctrl-C): run 0 stops at a checkpoint, runs 1 and 2 do not start, the
    table says "stopped" and "not started", exit 75, no run left behind. The same command again restarts run 0
    from its checkpoint and runs the others (each said in a line); once more, and every run is skipped."""
    out = tmp_path / "sw"
    args = ["sweep", CONFIG, "--vary", "simulation.duration=6,0.4,0.4", "--out", out]
    proc = start(args, np_=1, cwd=tmp_path)
    wait_for(lambda: snapshots(out / "run-000.h5") >= 1, proc)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == STOPPED, stdout + stderr
    assert stderr.strip() == "" and "PETSC" not in stdout.upper(), stdout + stderr
    assert "SIGINT: passed on to run 0" in stdout and "stopped by SIGINT" in stdout
    assert [r["status"] for r in rows(out / "sweep.csv")] == ["stopped", "not started", "not started"]
    no_run_left(out)
    with h5py.File(out / "run-000.h5") as f:
        assert f.attrs["status"] == "stopped" and f.attrs["stopped_by"] == "checkpoint"
    assert not (out / "run-001.h5").exists() and not (out / ".sweep.lock").exists()

    again = run_cli(args, cwd=tmp_path, timeout=300)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "run 0 (simulation.duration=6): stopped at t = " in again.stdout
    assert f"restarts from its checkpoint {out}/run-000.ckpt.h5" in again.stdout
    assert [r["status"] for r in rows(out / "sweep.csv")] == ["finished"] * 3
    with h5py.File(out / "run-000.h5") as f:
        assert f.attrs["status"] == "finished" and f["fields/time"][-1] == 6.0

    once_more = run_cli(args, cwd=tmp_path, timeout=300)
    assert once_more.returncode == 0, once_more.stderr
    assert once_more.stdout.count("finished by an earlier sweep, skipped") == 3, once_more.stdout


@pytest.mark.slow
@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
def test_sigterm_to_the_sweep_alone_is_a_clean_stop(tmp_path, ranks):
    """SIGTERM to the sweep's process alone (a batch system's): no PETSc signal dump, no MPI_Abort; it is passed on
    to the run going (on 1 rank, or under mpirun on 2), which writes its checkpoint; the table is written, exit 75,
    and no run outlives the sweep."""
    out = tmp_path / "sw"
    proc = start(["sweep", CONFIG, "--vary", "simulation.duration=6,0.4", "--out", out, "--np", ranks], np_=1,
                 cwd=tmp_path)
    wait_for(lambda: snapshots(out / "run-000.h5") >= 1, proc)
    os.kill(proc.pid, signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == STOPPED, stdout + stderr
    assert stderr.strip() == "" and "PETSC" not in stdout.upper() and "MPI_Abort" not in stdout, stdout + stderr
    assert [r["status"] for r in rows(out / "sweep.csv")] == ["stopped", "not started"]
    assert (out / "run-000.ckpt.h5").exists()
    no_run_left(out)


def test_stop_during_the_checks_runs_nothing(tmp_path):
    """A stop before the first run (while the configs are checked): exit 75, one line, nothing run or written."""
    out = tmp_path / "sw"
    proc = start(["sweep", CONFIG, "--vary", "simulation.duration=0.2", "--out", out], np_=1, cwd=tmp_path)
    wait_for(lambda: (out / ".sweep.lock").exists(), proc, poll=0.001)
    os.kill(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == STOPPED, stdout + stderr
    assert "stopped before the first run; nothing run" in stdout and stderr.strip() == ""
    assert not out.exists()


# -- one sweep at a time into a folder -------------------------------------------------------------------------------
def test_second_sweep_into_the_same_folder_is_refused(tmp_path):
    """A sweep holds OUT/.sweep.lock: a second sweep into the same --out is refused in one line naming the lock
    file and the first sweep's pid, while the first goes on and finishes."""
    out = tmp_path / "sw"
    args = ["sweep", CONFIG, "--vary", "simulation.duration=2,0.2", "--out", out, "--quiet"]
    first = start(args, np_=1, cwd=tmp_path)
    wait_for(lambda: (out / ".sweep.lock").exists(), first)
    second = run_cli(args, cwd=tmp_path, timeout=120)
    assert first.poll() is None, "the first sweep must still be running for this test to mean anything"
    assert_one_line(second, "second sweep", ["--out", "in use by another sweep", f"pid {first.pid}",
                                             str(out / ".sweep.lock")])
    stdout, stderr = first.communicate(timeout=300)
    assert first.returncode == 0, stdout + stderr
    assert not (out / ".sweep.lock").exists()


def test_stale_sweep_lock_is_taken_over_with_a_note(tmp_path):
    """A lock file left by a sweep that died (SIGKILL: its flock went with it, the file stayed): the next sweep
    takes it over and says so in one line."""
    out = tmp_path / "sw"
    out.mkdir()
    (out / ".sweep.lock").write_text("pid 999999 on nowhere")
    proc = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=0.2", "--out", out, "--collect-only"],
                   cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr          # the run is missing: the table says so
    assert "note: took over the lock file" in proc.stdout and "pid 999999 on nowhere" in proc.stdout
    assert not (out / ".sweep.lock").exists()


# -- checks up front: the plan's size, what the runs can have, the estimate ------------------------------------------
def test_absurd_plan_is_refused_at_once(tmp_path):
    """--vary KEY=1:10000000:1 (ten million runs): one line naming the count and --max-runs, at once (before: a
    minute and more than a GB making the runs' options, then their configs, one by one); --max-runs raises it."""
    out = tmp_path / "sw"
    began = time.monotonic()
    proc = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=1:10000000:1", "--out", out], cwd=tmp_path)
    assert_one_line(proc, "10^7 runs", ["10000000 runs planned", "more than --max-runs 1000", "--max-runs 10000000"])
    assert time.monotonic() - began < 30 and not out.exists()
    small = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=1:3:1", "--out", out, "--max-runs", "2"],
                    cwd=tmp_path)
    assert_one_line(small, "3 runs", ["3 runs planned", "more than --max-runs 2"])
    slurm = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=1:1500:1", "--out", out, "--max-runs", "1500",
                     "--slurm"], cwd=tmp_path)
    assert slurm.returncode == 0 and "(1500 runs)" in slurm.stdout, slurm.stderr


def test_collect_quantity_the_runs_cannot_have_is_refused_before_any_run(tmp_path):
    out = tmp_path / "sw"
    proc = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=0.2,0.4", "--out", out, "--collect",
                    "probe.centre.apd.1"], cwd=tmp_path)
    assert_one_line(proc, "no such probe", ["--collect probe.centre.apd.1", "no probe centre", "near, middle, far"])
    assert not out.exists()


def test_the_plan_line_gives_runs_disk_and_time(tmp_path):
    """Before the first run: the count, the disk from the output settings and the time, unknown at first, then
    from the pace of a run finished in the folder."""
    out = tmp_path / "sw"
    first = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=0.2", "--out", out], cwd=tmp_path, check=True)
    plan = [ln for ln in first.stdout.splitlines() if ln.startswith("sweep: ")]
    assert len(plan) == 1 and "sweep: 1 runs; their outputs need about " in plan[0] and "MB of disk" in plan[0]
    assert "time unknown" in plan[0]
    again = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=0.2,0.4", "--out", out], cwd=tmp_path,
                    check=True)
    plan = [ln for ln in again.stdout.splitlines() if ln.startswith("sweep: ")]
    assert "sweep: 2 runs (1 to run, 1 finished before)" in plan[0] and "at the pace of the runs finished before" \
        in plan[0], again.stdout
    assert "run 0 (simulation.duration=0.2): finished by an earlier sweep, skipped" in again.stdout


def test_a_run_of_other_settings_in_the_folder_is_refused(tmp_path):
    """OUT/run-000.h5 of other --vary values (another sweep's): not skipped as if it were this run's, but one
    line, as before; --overwrite replaces it."""
    out = tmp_path / "sw"
    run_cli(["sweep", CONFIG, "--vary", "simulation.duration=0.2", "--out", out, "--quiet"], cwd=tmp_path, check=True)
    before = checksums(out)
    proc = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=0.4", "--out", out], cwd=tmp_path)
    assert_one_line(proc, "other run", ["run-000.h5 exists", "other --set options", "--overwrite"])
    assert checksums(out) == before


# -- one-line errors, nothing half-written -------------------------------------------------------------------------
def test_collect_only_on_a_missing_folder_is_one_line(tmp_path):
    """Before: a FileNotFoundError traceback from writing the table's temporary file."""
    proc = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=0.2", "--out", tmp_path / "nowhere",
                    "--collect-only"], cwd=tmp_path)
    assert_one_line(proc, "collect-only", ["--out", "nowhere", "no such folder", "--collect-only"])
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("suffix", [".csv", ".h5"])
def test_table_on_a_full_disk_is_one_line(tmp_path, suffix):
    """--table on a full disk: one line, exit 3, no table and no .part left (before: an OSError traceback and the
    temporary file left behind)."""
    out = tmp_path / "sw"
    run_cli(["sweep", CONFIG, "--vary", "simulation.duration=0.2", "--out", out, "--quiet"], cwd=tmp_path, check=True)
    disk = tmp_path / "small"
    mount_tmpfs(disk, "16k")
    try:
        try:
            with open(disk / "other-job.bin", "wb") as f:
                f.write(b"\0" * (64 << 10))
        except OSError:
            pass                                          # the disk is full now
        proc = run_cli(["sweep", CONFIG, "--vary", "simulation.duration=0.2", "--out", out, "--collect-only",
                        "--table", disk / f"t{suffix}"], cwd=tmp_path)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 3 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
        assert "--table: cannot write" in lines[0] and "No space left on device" in lines[0]
        assert [p.name for p in disk.iterdir()] == ["other-job.bin"]
    finally:
        subprocess.run(["umount", str(disk)], check=False)

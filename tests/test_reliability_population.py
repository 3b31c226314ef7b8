"""`cardiosim cell --population` and `--restitution` under the failures of tests/test_reliability_files.py's kind:
full disks (a real small tmpfs), tables with blank lines, missing or a directory, a population too large for the
memory, and the progress of a long population."""

from __future__ import annotations

import subprocess
import time

import h5py
import numpy as np
import pytest

from conftest import mount_tmpfs, require_gcc, run_cli
from test_bad_input import assert_one_line, checksums

TT06 = ["--model", "tt06", "--integrator", "rush-larsen", "--dt", "0.01", "--period", "400", "--record-every",
        "0.5"]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


@pytest.fixture
def small(tmp_path):
    """A 16 KB file system: a real full disk."""
    disk = tmp_path / "small"
    mount_tmpfs(disk, "16k")
    yield disk
    subprocess.run(["umount", str(disk)], check=False)


def one_line_exit_3(proc, words) -> None:
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3 and len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"


# -- full disks: one line, exit 3, no file left (the file is made in memory and written whole) ------------------------
@pytest.mark.parametrize("what", ["--population", "--restitution"])
def test_population_and_restitution_on_a_full_disk(small, what):
    """Before: h5py's 'Exception ignored' tracebacks, a segmentation fault (exit 139) and a file HDF5 cannot open."""
    require_gcc()
    mode = (["--population", "3", "--sample", "g_Kr=uniform:0.5:1.5"] if what == "--population"
            else ["--restitution", "400,300", "--prepace", "1"])
    proc = run_cli(["cell", *TT06, *mode, "--output", small / "p.h5"])
    one_line_exit_3(proc, ["--output", "cannot write", "p.h5", "No space left on device", "nothing written there"])
    assert list(small.iterdir()) == []


def test_population_csv_on_a_full_disk_leaves_no_part(tmp_path, small):
    require_gcc()
    try:
        with open(small / "other-job.bin", "wb") as f:      # another job has taken the space
            f.write(b"\0" * (64 << 10))
    except OSError:
        pass
    proc = run_cli(["cell", *TT06, "--population", "3", "--sample", "g_Kr=uniform:0.5:1.5", "--output",
                    tmp_path / "p.h5", "--csv", small / "p.csv"])
    one_line_exit_3(proc, ["--csv", "cannot write", "p.csv", "No space left on device"])
    assert [p.name for p in small.iterdir()] == ["other-job.bin"]
    with h5py.File(tmp_path / "p.h5") as f:            # the HDF5 file, written before, is whole
        assert f["trace/V"].shape == (3, 801)


# -- --population-table ----------------------------------------------------------------------------------------------
def test_population_table_with_a_trailing_blank_line_is_read(tmp_path):
    """Before: "every row must be numbers" for a valid table whose last line is blank (as editors leave it)."""
    require_gcc()
    (tmp_path / "f.csv").write_text("g_Kr,g_Ks\n1.0,1.0\n0.5,1.5\n\n")
    out = tmp_path / "p.h5"
    proc = run_cli(["cell", *TT06, "--period", "300", "--population-table", tmp_path / "f.csv", "--output", out])
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out) as f:
        np.testing.assert_array_equal(f["population/factors/g_Ks"][:], [1.0, 1.5])


@pytest.mark.parametrize("case", ["missing", "a directory"])
def test_population_table_missing_or_a_directory_is_one_line(tmp_path, case):
    """Before: a FileNotFoundError or IsADirectoryError traceback."""
    table = tmp_path / "f.csv"
    if case == "a directory":
        table.mkdir()
    before = checksums(tmp_path)
    proc = run_cli(["cell", *TT06, "--population-table", table, "--output", tmp_path / "p.h5"])
    assert_one_line(proc, case, ["--population-table", "f.csv", "no such CSV table" if case == "missing"
                                 else "is a directory"])
    assert checksums(tmp_path) == before and not (tmp_path / "p.h5").exists()


# -- a population too large, and a long one ----------------------------------------------------------------------------
def test_population_too_large_for_the_memory_is_refused_at_once(tmp_path):
    """--population 1000000000: refused before a factor is drawn, one line naming --population and the memory
    available (before: no estimate, minutes of drawing factors, then killed)."""
    began = time.monotonic()
    proc = run_cli(["cell", *TT06, "--population", "1000000000", "--sample", "g_Kr=uniform:0.5:1.5", "--output",
                    tmp_path / "p.h5"])
    assert_one_line(proc, "population", ["--population 1000000000", "GB of memory", "GB are available",
                                         "fewer cells"])
    assert time.monotonic() - began < 60 and list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_long_population_shows_its_progress(tmp_path):
    """A population that takes many seconds says up front how much work and memory it is, then where it is, its
    rate and the time left every few seconds (before: nothing until the end), then the timing line."""
    require_gcc()
    proc = run_cli(["cell", "--model", "tt06", "--integrator", "rush-larsen", "--dt", "0.01", "--period", "1000",
                    "--record-every", "0.5", "--population", "60", "--prepace", "1", "--sample",
                    "g_Kr=uniform:0.5:1.5", "--output", tmp_path / "p.h5"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("population: 60 cells, 2 beats each (1.2e+07 cell-steps), about ")
    ticks = [ln for ln in lines if ln.startswith("population: 60 cells at beat ")]
    assert ticks and all("cell-steps/s | ETA " in ln for ln in ticks), proc.stdout
    assert any(ln.startswith("population of 60 cells, 2 beats each") and " s (" in ln for ln in lines)


def test_a_beat_in_chunks_is_the_beat_in_one_call(tmp_path, monkeypatch):
    """The progress advances a beat in chunks: the same numbers, bit for bit, as the beat in one call of the driver
    (the stimulus inside the first chunk; the states' ranges checked at the beat's end), with cells that fail."""
    require_gcc()
    from cardiosim.single_cell import population
    f = population.sample_factors({"g_Na": ("uniform", 0.1, 8.0), "g_K1": ("uniform", 0.0, 3.0)}, 12, seed=2)
    kw = dict(amplitude=-60.0, duration=1.0, keep={}, dt=0.0045, integrator="forward-euler", period=60.0, beats=1,
              prepace=2, record_every=0.45)
    out, calls = {}, []
    made = population._CpuCells.__init__

    def whole_beats(self, *a, **k):
        made(self, *a, **k)
        self.chunked = False
    with monkeypatch.context() as m:
        m.setattr(population._CpuCells, "__init__", whole_beats)
        out["one call"] = population.run_population("tt06", None, {}, f, h5_path=tmp_path / "a.h5", **kw)

    class Slow:            # every chunk seems to take a second: the smallest chunks, the most of them
        t = 0.0

        @classmethod
        def perf_counter(cls):
            cls.t += 1.0
            return cls.t
    monkeypatch.setattr(population, "time", Slow)
    out["chunks"] = population.run_population("tt06", None, {}, f, h5_path=tmp_path / "b.h5",
                                              ticks=lambda done, total: calls.append(done), **kw)
    assert len(calls) > 2 * 20 and 1 <= out["chunks"]["failed"] < 12     # many chunks a beat; some cells failed
    assert out["chunks"]["biomarkers"].tobytes() == out["one call"]["biomarkers"].tobytes()
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        assert a["trace/V"][:].tobytes() == b["trace/V"][:].tobytes()

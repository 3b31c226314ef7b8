"""Nothing lost, nothing silent, for files and resources: inputs named as outputs, --overwrite of files cardiosim did
not write, the resident placement without a GPU, two runs on one checkpoint, `cardiosim geometry`'s files, the
generated-code cache, malformed arrays, file-size limits and full disks, PETSc options, and more cases of
tests/test_reliability.py's kind. Each failure case is a test here; every refusal is one line (assert_one_line)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import mount_tmpfs, run_cli
from test_bad_input import SHEET, assert_one_line, checksums, edit
from test_reliability import snapshots, start, wait_for

SHAPE = (21, 51)      # the sheet's nodes, (ny, nx)


def sheet(d: Path, text: str = SHEET, name: str = "case.toml") -> Path:
    cfg = d / name
    cfg.write_text(text)
    return cfg


def geometry_like(path: Path) -> Path:
    """An HDF5 file as `cardiosim geometry` writes it, on the sheet's grid (labels and fibres everywhere)."""
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "cardiosim-geometry-1"
        f["labels"] = np.ones(SHAPE, dtype=np.int32)
        f["fibres"] = np.tile([1.0, 0.0], SHAPE + (1,))
    return path


def limited(fsize: int | None = None, address_space: int | None = None):
    """A preexec_fn setting RLIMIT_FSIZE (ulimit -f, bytes) and RLIMIT_AS (ulimit -v) in the child, as batch systems
    do."""
    def apply():
        if fsize is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if address_space is not None:
            resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    return apply


def cli(args, cwd=None, preexec_fn=None, env=None, timeout=300):
    """``cardiosim ARGS`` with limits set in the child (run_cli cannot pass a preexec_fn)."""
    full_env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    full_env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full_env.get('PATH', '')}"
    return subprocess.run([sys.executable, "-m", "cardiosim", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=full_env, preexec_fn=preexec_fn)


# -- 1. inputs named as outputs; --overwrite replaces only cardiosim's own files -------------------------------------
@pytest.mark.parametrize("key,name,target", [
    ("label_file", "g.h5", ["--output", "g.h5"]),                         # the plainest case
    ("fibre_file", "g.h5", ["--output", "g.h5"]),
    ("label_file", "g.h5", ["--output", "r.h5", "--set", 'checkpoint.path="g.h5"']),
    ("conductivity_file", "c.npy", ["--output", "c.npy"]),
])
def test_an_input_named_as_an_output_is_refused(tmp_path, key, name, target):
    if name.endswith(".h5"):
        geometry_like(tmp_path / name)
    else:
        np.save(tmp_path / name, np.ones(SHAPE))
    sheet(tmp_path, edit("[tissue]", f'[tissue]\n{key} = "{name}"'))
    before = checksums(tmp_path)
    proc = run_cli(["run", "case.toml", *target, "--overwrite"], cwd=tmp_path)
    assert_one_line(proc, key, [name, f"tissue.{key}", "which this command reads"])
    assert checksums(tmp_path) == before


def test_microscopic_layout_named_as_the_output_is_refused(tmp_path):
    cfg = sheet(tmp_path, (Path(__file__).parent / "configs" / "sheet.toml").read_text())
    layout = tmp_path / "layout.npz"
    np.savez(layout, cell_id=np.zeros((5, 10), dtype=np.int64))
    before = checksums(tmp_path)
    proc = run_cli(["run", cfg, "--output", layout, "--overwrite", "--set", 'tissue.model="microscopic"',
                    "--set", f'tissue.microscopic.layout_file="{layout}"'], cwd=tmp_path)
    assert_one_line(proc, "layout", ["layout.npz", "tissue.microscopic.layout_file", "which this command reads"])
    assert checksums(tmp_path) == before


@pytest.mark.parametrize("name,content", [
    ("out.h5", "foreign-h5"),         # an HDF5 file of someone else's
    ("out.json", '{"precious": true}\n'),
    ("out.xdmf", "<xml>not ours</xml>\n"),
    ("out.ckpt.h5", "not a checkpoint\n"),
])
def test_overwrite_replaces_only_cardiosims_own_files(tmp_path, name, content):
    sheet(tmp_path)
    if content == "foreign-h5":
        with h5py.File(tmp_path / name, "w") as f:
            f["data"] = [1.0, 2.0]
    else:
        (tmp_path / name).write_text(content)
    before = checksums(tmp_path)
    proc = run_cli(["run", "case.toml", "--output", "out.h5", "--overwrite", "--set", "simulation.duration=0.1"],
                   cwd=tmp_path)
    assert_one_line(proc, name, [name, "exists and is not", "--overwrite replaces only"])
    assert checksums(tmp_path) == before


def test_overwrite_replaces_an_earlier_result(tmp_path):
    """The other side: every file of an earlier run (output, sidecar, summary, checkpoint) is recognised."""
    sheet(tmp_path)
    args = ["run", "case.toml", "--output", "out.h5", "--quiet", "--set", "simulation.duration=0.2",
            "--set", "checkpoint.interval=0.1"]
    run_cli(args, cwd=tmp_path, check=True)
    assert {"out.h5", "out.xdmf", "out.json", "out.ckpt.h5"} <= {p.name for p in tmp_path.iterdir()}
    run_cli([*args, "--overwrite"], cwd=tmp_path, check=True)


def test_cell_and_geometry_and_plot_overwrite_only_their_own(tmp_path):
    """`cell --output`, `geometry --out` and `plot`'s PNGs: an existing file that is not that command's own is
    refused even with --overwrite; the command's own earlier file is replaced."""
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f["x"] = [1]
    before = checksums(tmp_path)
    proc = run_cli(["cell", "--model", "mitchell-schaeffer", "--dt", "0.02", "--output", foreign, "--overwrite"])
    assert_one_line(proc, "cell", ["--output", "foreign.h5", "not the HDF5 file of a cardiosim cell run"])
    proc = run_cli(["geometry", "lv", "--spacing", "0.2", "--out", foreign, "--overwrite"])
    assert_one_line(proc, "geometry", ["--out", "foreign.h5", "not a cardiosim geometry file"])
    assert checksums(tmp_path) == before
    geo = tmp_path / "geo.h5"
    run_cli(["geometry", "lv", "--spacing", "0.1", "--out", geo], check=True)      # 0.2: no element in its wall
    run_cli(["geometry", "lv", "--spacing", "0.1", "--out", geo, "--overwrite"], check=True)


def test_cellml_model_named_as_the_cell_output_is_refused(tmp_path):
    model = tmp_path / "m.cellml"
    model.write_text("<model/>\n")
    before = checksums(tmp_path)
    proc = run_cli(["cell", "--model", model, "--output", model, "--overwrite"])
    assert_one_line(proc, "cellml", ["--output", "m.cellml", "is --model, which this command reads"])
    assert checksums(tmp_path) == before


def test_mesh_named_as_the_geometry_output_is_refused(tmp_path):
    mesh = tmp_path / "heart.h5"
    mesh.write_bytes(b"a mesh of the user's, in whatever format")
    before = checksums(tmp_path)
    proc = run_cli(["geometry", mesh, "--spacing", "0.1", "--out", mesh, "--overwrite"])
    assert_one_line(proc, "mesh", ["--out", "heart.h5", "is the mesh, which this command reads"])
    assert checksums(tmp_path) == before


def test_plot_does_not_replace_a_file_it_did_not_draw(tmp_path):
    r = tmp_path / "r.h5"
    sheet(tmp_path, edit('equations = "bidomain"', 'equations = "monodomain"'))
    run_cli(["run", "case.toml", "--quiet", "--output", r, "--set", "simulation.duration=1.0"], cwd=tmp_path,
            check=True)
    (tmp_path / "r_Vm.png").write_bytes(b"\x89PNG\r\n\x1a\n my holiday picture")
    before = checksums(tmp_path)
    proc = run_cli(["plot", r, "--overwrite"], cwd=tmp_path)
    assert_one_line(proc, "png", ["r_Vm.png", "not a PNG drawn by cardiosim plot"])
    assert checksums(tmp_path) == before


# -- 2. the resident placement without a GPU: one line, before anything is set up, on 1 and 2 ranks -----------------
@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
def test_resident_without_a_gpu_is_one_line(tmp_path, petsc, ranks):
    from cardiosim.reaction.placement import _resident_missing
    if not _resident_missing():
        pytest.skip("this machine can hold the resident placement (the GPU tests cover it)")
    sheet(tmp_path)
    proc = run_cli(["run", "case.toml", "--output", "r.h5", "--set", 'cell.placement="resident"'], np=ranks,
                   cwd=tmp_path, timeout=120)
    assert_one_line(proc, "resident", ["cell.placement", "'resident'", "CUDA GPU", "cell.placement = 'cpu'"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.toml"]     # no output, no lock, nothing


# -- 3. two runs on one checkpoint path ------------------------------------------------------------------------------
def test_second_run_on_a_checkpoint_in_use_is_refused_at_its_start(tmp_path):
    """Two runs with different outputs and one checkpoint.path: the second is refused at once, in one line naming
    the checkpoint (not at its first checkpoint with an errno); the lock goes with the first run."""
    sheet(tmp_path)
    shared = ["--set", 'checkpoint.path="shared.ckpt.h5"', "--set", "checkpoint.interval=1.0"]
    first = start(["run", "case.toml", "--quiet", "--output", "a.h5", *shared, "--set", "simulation.duration=40.0"],
                  np_=1, cwd=tmp_path)
    wait_for(lambda: snapshots(tmp_path / "a.h5") >= 1, first)
    second = run_cli(["run", "case.toml", "--quiet", "--output", "b.h5", *shared, "--overwrite"], cwd=tmp_path)
    assert first.poll() is None, "the first run must still be running for this test to mean anything"
    assert_one_line(second, "second run", ["checkpoint.path", "shared.ckpt.h5", "in use by another run", "pid"])
    assert not (tmp_path / "b.h5").exists()
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate()


def test_checkpoint_lock_is_released_at_the_end(tmp_path):
    sheet(tmp_path)
    run_cli(["run", "case.toml", "--quiet", "--output", "a.h5", "--set", "simulation.duration=0.2",
             "--set", "checkpoint.interval=0.1"], cwd=tmp_path, check=True)
    assert (tmp_path / "a.ckpt.h5").exists()
    assert not list(tmp_path.glob(".*.lock"))


# -- 4. cardiosim geometry -------------------------------------------------------------------------------------------
def _pts(d: Path, text: str) -> Path:
    (d / "m.pts").write_text(text)
    (d / "m.elem").write_text("1\nTt 0 1 2 3 1\n")
    return d / "m.elem"


@pytest.mark.parametrize("case,make,words", [
    ("NaN in .pts", lambda d: _pts(d, "4\n0 0 0\n1000 0 0\nnan 1000 0\n0 0 1000\n"),
     ["m.elem", "not a finite number"]),
    ("2-column .pts", lambda d: _pts(d, "4\n0 0\n1000 0\n0 1000\n0 0\n"), ["m.pts", "2 numbers", "3 (x y z)"]),
    ("empty .elem", lambda d: (_pts(d, "4\n0 0 0\n1000 0 0\n0 1000 0\n0 0 1000\n"),
                               (d / "m.elem").write_text("0\n"))[0], ["m.elem", "holds no element"]),
    ("empty .pts", lambda d: _pts(d, "0\n"), ["m.pts", "holds no data"]),
    ("mesh is a directory", lambda d: (d / "dir.vtu").mkdir() or d / "dir.vtu", ["dir.vtu", "is a directory"]),
])
def test_bad_geometry_files_are_one_line(tmp_path, case, make, words):
    source = make(tmp_path)
    proc = run_cli(["geometry", source, "--spacing", "0.01", "--out", tmp_path / "geo.h5"])
    assert_one_line(proc, case, words)
    assert not (tmp_path / "geo.h5").exists()


def _a_file(d: Path) -> Path:
    (d / "f").write_text("x")
    return d / "f"


@pytest.mark.parametrize("case,out,words", [
    ("--out is a directory", lambda d: (d / "dir.h5").mkdir() or d / "dir.h5", ["--out", "dir.h5", "is a directory"]),
    ("--out under a file", lambda d: _a_file(d) / "geo.h5",
     ["--out", "cannot write in", "not a writable directory"]),
    ("--out name too long", lambda d: d / ("x" * 300 + ".h5"), ["--out", "File name too long"]),
    ("--out path of 5000 characters", lambda d: d / ("abcd/" * 1000) / "geo.h5", ["--out", "File name too long"]),
])
def test_bad_geometry_out_is_one_line(tmp_path, case, out, words):
    target = out(tmp_path)
    before = checksums(tmp_path)
    proc = run_cli(["geometry", "lv", "--spacing", "0.2", "--out", target])
    assert_one_line(proc, case, words)
    assert checksums(tmp_path) == before


def test_geometry_on_a_read_only_file_system(tmp_path):
    disk = tmp_path / "ro"
    mount_tmpfs(disk, "1m")
    try:
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True, capture_output=True)
        proc = run_cli(["geometry", "lv", "--spacing", "0.2", "--out", disk / "geo.h5"])
        assert_one_line(proc, "read-only", ["--out", "cannot write in", "not a writable directory"])
    finally:
        subprocess.run(["umount", str(disk)], check=False)


@pytest.mark.parametrize("how", ["file-size limit", "full disk"])
def test_geometry_write_failure_is_one_line_and_leaves_nothing(tmp_path, how):
    """A write that fails (ulimit -f, a full disk): one line, exit 3, no file, no stale .part. (Under a file-size
    limit too small for MPI's start-up, the built-in anatomies are refused before their fibres' solver starts it,
    cardiosim.domain.fibres.check_file_limit, in the same words; the full disk fails in the write itself.)"""
    where, preexec = tmp_path, None
    if how == "full disk":
        where = tmp_path / "small"
        mount_tmpfs(where, "64k")
    else:
        preexec = limited(fsize=32 * 1024)
    try:
        proc = cli(["geometry", "lv", "--spacing", "0.05", "--out", where / "geo.h5"], preexec_fn=preexec)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 3 and len(lines) == 1, proc.stderr
        assert "--out" in lines[0] and "cannot write" in lines[0] and "nothing written" in lines[0]
        assert list(where.iterdir()) == []
    finally:
        if how == "full disk":
            subprocess.run(["umount", str(where)], check=False)


def test_geometry_too_fine_for_the_memory_is_refused_at_once(tmp_path):
    """`geometry lv --spacing 0.005` (8.4e7 grid nodes, their fibres about 20 GB): refused up front against what
    the process can get (here an address-space limit of 3 GB, as a batch system sets), not a MemoryError after
    minutes; by the grid's estimate or, where the grid fits, by the fibres'."""
    import time
    began = time.monotonic()
    proc = cli(["geometry", "lv", "--spacing", "0.005", "--out", tmp_path / "lv.h5"],
               preexec_fn=limited(address_space=3 << 30))
    assert_one_line(proc, "memory", ["--spacing 0.005", "need about", "GB of memory", "coarser"])
    assert time.monotonic() - began < 30
    assert list(tmp_path.iterdir()) == []


# -- 5. the generated-code cache -------------------------------------------------------------------------------------
def test_unwritable_cache_falls_back_with_one_warning(tmp_path):
    """CARDIOSIM_CACHE that cannot be made (/sys, a read-only home): `cardiosim cell` with a native kernel still
    runs, with one line of warning, and blames nothing on its output file."""
    out = tmp_path / "cell.h5"
    proc = run_cli(["cell", "--model", "tt06", "--period", "10", "--duration", "1", "--record-every", "0.1",
                    "--output", out], env={"CARDIOSIM_CACHE": "/sys/cardiosim-cache"})
    assert proc.returncode == 0, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "warning" in lines[0] and "private temporary cache" in lines[0], lines
    with h5py.File(out) as f:
        assert "error" not in f.attrs and f["trace/V"].shape[0] > 10


def test_truncated_cache_entry_is_made_again(tmp_path, monkeypatch):
    from cardiosim.runtime import compile as cc
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path))
    builds = []

    def build(tmp):
        builds.append(tmp)
        Path(tmp).write_bytes(b"compiled code " * 100)
    out = cc.cache_dir("native") / "entry.so"
    assert cc.cached_file(out, build) == out and len(builds) == 1
    assert cc.cached_file(out, build) == out and len(builds) == 1          # intact: used as it is
    out.write_bytes(out.read_bytes()[:50])                                  # cut short (a node died while writing)
    assert cc.cached_file(out, build) == out and len(builds) == 2
    assert out.read_bytes() == b"compiled code " * 100
    folder = cc.cached_folder("model", "cellml", lambda d: (d / "a.txt").write_text("generated"))
    (folder / "a.txt").write_text("gener")                                  # damaged
    again = cc.cached_folder("model", "cellml", lambda d: (d / "a.txt").write_text("generated"))
    assert again == folder and (folder / "a.txt").read_text() == "generated"


def test_read_only_cache_is_used_where_complete(tmp_path, monkeypatch):
    """A cache on a read-only file system: its intact entries are used; a missing one is made in the private
    temporary cache."""
    from cardiosim.runtime import compile as cc
    disk = tmp_path / "cache"
    mount_tmpfs(disk, "1m")
    try:
        monkeypatch.setenv("CARDIOSIM_CACHE", str(disk))
        monkeypatch.setattr(cc, "_FALLBACK", {})
        monkeypatch.setattr(cc, "_PRIVATE", [])
        made = cc.cached_file(cc.cache_dir("native") / "old.so", lambda t: Path(t).write_bytes(b"old"))
        subprocess.run(["mount", "-o", "remount,ro", str(disk)], check=True, capture_output=True)
        calls = []
        out = cc.cache_dir("native") / "old.so"
        assert cc.cached_file(out, lambda t: calls.append(t)) == made and calls == []
        new = cc.cached_file(cc.cache_dir("native") / "new.so", lambda t: Path(t).write_bytes(b"new"))
        assert new.read_bytes() == b"new" and disk not in new.parents
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# -- 6. malformed arrays ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case,key,array,words", [
    ("labels of strings", "label_file", np.full(SHAPE, "a"), ["tissue.label_file", "a.npy", "holds strings"]),
    ("complex labels", "label_file", np.ones(SHAPE) * (1 + 1j), ["tissue.label_file", "complex numbers"]),
    ("complex conductivities", "conductivity_file", np.ones(SHAPE) * (1 + 2j),
     ["tissue.conductivity_file", "complex numbers"]),
    ("labels as objects", "label_file", np.full(SHAPE, None, dtype=object), ["tissue.label_file", "a.npy"]),
])
def test_malformed_per_point_arrays_are_one_line(tmp_path, case, key, array, words):
    np.save(tmp_path / "a.npy", array, allow_pickle=True)
    sheet(tmp_path, edit("[tissue]", f'[tissue]\n{key} = "a.npy"'))
    proc = run_cli(["run", "case.toml", "--output", "out.h5"], cwd=tmp_path)
    assert_one_line(proc, case, words)
    assert not (tmp_path / "out.h5").exists()


def _layout(d: Path) -> Path:
    p = d / "layout.npz"
    np.savez_compressed(p, cell_id=np.arange(125 * 50, dtype=np.int64).reshape(50, 125) // 12)
    return p


def _cut(p: Path) -> None:
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _damage(p: Path) -> None:
    data = bytearray(p.read_bytes())
    for i in range(60, 90):
        data[i] ^= 0x5A
    p.write_bytes(bytes(data))


@pytest.mark.parametrize("case,spoil,words", [
    ("cut .npz", _cut, ["layout.npz", "cannot read", "as a .npz archive"]),
    ("damaged .npz", _damage, ["layout.npz", "cannot read", "as a .npz archive"]),
    ("pickled .npz", lambda p: np.savez(p, cell_id=np.full((50, 125), None, dtype=object)),
     ["layout.npz", "cannot read"]),
    (".npy, not .npz", lambda p: np.save(p.with_suffix(".npy"), np.zeros((50, 125))) or
     p.write_bytes(p.with_suffix(".npy").read_bytes()), ["layout.npz", "not a .npz archive"]),
])
def test_cut_or_damaged_layout_is_one_line(tmp_path, case, spoil, words):
    p = _layout(tmp_path)
    spoil(p)
    cfg = Path(__file__).parent / "configs" / "sheet.toml"
    proc = run_cli(["run", cfg, "--output", tmp_path / "out.h5", "--set", 'tissue.model="microscopic"',
                    "--set", "grid.spacing=0.008", "--set", f'tissue.microscopic.layout_file="{p}"'], cwd=tmp_path)
    assert_one_line(proc, case, ["tissue.microscopic.layout_file", *words])
    assert not (tmp_path / "out.h5").exists()


# -- 7. file-size limits and full disks ------------------------------------------------------------------------------
# MPICH's UCX start-up needs to write files of a few MB itself: below about 8 MB of `ulimit -f` no MPI program starts
# on this machine (an MPI error before cardiosim runs). The limit tested, `ulimit -f 8192`, is 8 MiB.
ULIMIT_F = 8192 * 1024


def test_output_beyond_the_file_size_limit_is_refused_up_front(tmp_path):
    sheet(tmp_path)
    proc = cli(["run", "case.toml", "--output", "out.h5", "--set", "output.interval=0.02"], cwd=tmp_path,
               preexec_fn=limited(fsize=ULIMIT_F))
    assert_one_line(proc, "ulimit -f", ["output.path", "ulimit -f", "MB"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.toml"]


def test_checkpoint_beyond_the_file_size_limit_is_a_clean_stop(tmp_path):
    """The output fits under ulimit -f, the checkpoint (120 701 nodes, about 12 MB) does not: exit 3 and one line,
    no SIGXFSZ, no segfault; the output is marked stopped and keeps its snapshot; no .tmp, .part or lock is left."""
    sheet(tmp_path)
    proc = cli(["run", "case.toml", "--quiet", "--output", "out.h5", "--set", "grid.size=[2.0, 1.5]",
                "--set", "grid.spacing=0.005", "--set", "simulation.duration=0.04", "--set", "output.interval=0.04",
                "--set", "checkpoint.interval=0.02"], cwd=tmp_path, preexec_fn=limited(fsize=ULIMIT_F))
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3 and len(lines) == 1, proc.stderr
    assert "checkpoint: cannot write" in lines[0] and "File too large" in lines[0]
    with h5py.File(tmp_path / "out.h5") as f:
        assert f.attrs["status"] == "stopped" and f["fields/time"].shape[0] >= 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.toml", "out.h5", "out.xdmf"]


def test_full_disk_mid_run_marks_the_file_stopped(tmp_path):
    """A disk that fills up while the run writes snapshots (its datasets are sparse: blocks are taken as they are
    written, so the check at the start passes): one line, exit 3, the file's status `stopped` (not `running`), no
    segfault, nothing else left on the disk."""
    disk = tmp_path / "small"
    mount_tmpfs(disk, "2m")
    try:
        filler = disk / "other-job.bin"      # another job takes the space once the run has started
        cfg = sheet(tmp_path)
        proc = start(["run", cfg, "--quiet", "--output", disk / "out.h5", "--set", "simulation.duration=40.0"],
                     np_=1, cwd=tmp_path)
        wait_for(lambda: snapshots(disk / "out.h5") >= 2, proc)
        try:
            with open(filler, "wb") as f:
                f.write(b"\0" * (2 << 20))
        except OSError:
            pass                              # the disk is full now
        stdout, stderr = proc.communicate(timeout=120)
        lines = [ln for ln in stderr.splitlines() if ln.strip()]
        assert proc.returncode == 3 and len(lines) == 1, stdout + stderr
        assert "No space left on device" in lines[0] and "output: cannot write" in lines[0]
        with h5py.File(disk / "out.h5") as f:
            assert f.attrs["status"] == "stopped"
            assert np.isfinite(f["fields/time"][:]).sum() >= 2
        assert sorted(p.name for p in disk.iterdir()) == ["other-job.bin", "out.h5", "out.xdmf"]
    finally:
        subprocess.run(["umount", str(disk)], check=False)


def test_cell_beyond_the_file_size_limit_is_refused_up_front(tmp_path):
    proc = cli(["cell", "--model", "mitchell-schaeffer", "--dt", "0.01", "--record-every", "0.01", "--period",
                "3000", "--output", tmp_path / "cell.h5"], preexec_fn=limited(fsize=ULIMIT_F))
    assert_one_line(proc, "cell ulimit -f", ["3e+05 samples", "ulimit -f", "--record-every"])
    assert list(tmp_path.iterdir()) == []


def test_cell_on_a_full_disk_is_one_line(tmp_path):
    """The trace's first block takes whole chunks (32 KB per state), more than the 64 KB disk holds, though the
    samples alone would fit: the write fails mid-run; one line, exit 3, no traceback or segfault, no JSON."""
    disk = tmp_path / "small"
    mount_tmpfs(disk, "64k")
    try:
        proc = cli(["cell", "--model", "mitchell-schaeffer", "--dt", "0.02", "--record-every", "0.02",
                    "--period", "20", "--duration", "1", "--output", disk / "cell.h5", "--json", disk / "c.json"])
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 3 and len(lines) == 1, proc.stderr
        assert "cannot write" in lines[0] and "cell.h5" in lines[0] and "No space left" in lines[0]
        assert "Traceback" not in proc.stderr
        assert not (disk / "c.json").exists() and not list(disk.glob(".*.part"))
    finally:
        subprocess.run(["umount", str(disk)], check=False)


# -- 8. PETSc options ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("options,words", [
    (["-elliptic_ksp_max_it"], ["-elliptic_ksp_max_it", "needs a value"]),
    (["-elliptic_ksp_max_it", "-parabolic_ksp_rtol", "1e-8"], ["-elliptic_ksp_max_it", "needs a value"]),
    (["stray"], ["'stray'", "belongs to no option"]),
    (["-elliptic_ksp_rtol", "1e-8", "stray"], ["'stray'", "belongs to no option"]),
])
def test_malformed_petsc_options_are_one_line(tmp_path, options, words):
    sheet(tmp_path)
    proc = run_cli(["run", "case.toml", "--output", "out.h5", "--", *options], cwd=tmp_path)
    assert_one_line(proc, " ".join(options), ["PETSc option", *words])
    assert not (tmp_path / "out.h5").exists()


def test_petsc_option_syntax_accepts_what_petsc_accepts():
    from cardiosim.runtime.petsc import check_syntax
    check_syntax(["-elliptic_ksp_monitor", "-log_view", "-parabolic_ksp_rtol", "1e-8", "-x_shift", "-1.5",
                  "-elliptic_pc_type", "gamg", "-elliptic_ksp_converged_reason"])


@pytest.mark.parametrize("command", [["model", "info", "x.cellml"], ["inspect", "x.h5"], ["plot", "x.h5"],
                                     ["geometry", "lv", "--spacing", "0.2", "--out", "g.h5"]])
def test_commands_without_petsc_refuse_petsc_options(tmp_path, command):
    proc = run_cli([*command, "--", "-log_view"], cwd=tmp_path)
    assert_one_line(proc, command[0], [f"cardiosim {command[0]}", "takes no PETSc options", "-log_view"])
    assert list(tmp_path.iterdir()) == []


# -- 9. the earlier cases --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args,words", [
    (["run", "CFG", "--output", "a" * 5000 + ".h5"], ["output.path", "File name too long"]),
    (["run", "CFG", "--output", "abcd/" * 1000 + "x.h5"], ["output.path", "File name too long"]),
    (["run", "abcd/" * 1000 + "x.toml"], ["File name too long"]),
    (["cell", "--model", "mitchell-schaeffer", "--output", "a" * 5000 + ".h5"], ["--output", "File name too long"]),
    (["plot", "x.h5", "--out", "abcd/" * 1000], ["--out", "File name too long"]),
])
def test_a_5000_character_path_is_one_line(tmp_path, args, words):
    cfg = sheet(tmp_path)
    proc = run_cli([cfg if a == "CFG" else a for a in args], cwd=tmp_path)
    assert_one_line(proc, "long path", words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["case.toml"]


def test_cell_of_a_million_beats_is_refused_up_front(tmp_path):
    import time
    began = time.monotonic()
    proc = run_cli(["cell", "--model", "bondarenko", "--beats", "1000000", "--output", tmp_path / "c.h5"])
    assert_one_line(proc, "beats", ["--beats 1000000", "samples", "GB of memory", "--record-every"])
    assert time.monotonic() - began < 30 and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case,text,extra,words", [
    ("initial state out of range", SHEET, ["--set", "cell.initial.h=2.0"],
     ["cell.initial.h", "2 1 is outside the range", "mitchell-schaeffer"]),
    ("config is a directory", None, ["run", "DIR"], ["cfgdir", "is a directory"]),
    ("checkpoint is a directory", SHEET, ["--restart", "cfgdir"], ["--restart", "cfgdir", "is a directory"]),
    ("label file is a directory", edit("[tissue]", '[tissue]\nlabel_file = "cfgdir"'), [],
     ["tissue.label_file", "is a directory"]),
    ("cell region with no node", edit('model = "mitchell-schaeffer"', 'model = "mitchell-schaeffer"\n'
                                      '[[cell.regions]]\nshape = "box"\nlower = [0.005, 0.0]\nupper = [0.015, 0.1]\n'
                                      'parameters = { tau_in = 0.4 }'),
     [], ["cell.regions[0]", "no grid node"]),
    ("ode_substeps without bound", SHEET, ["--set", "simulation.ode_substeps=1000000000000"],
     ["simulation.ode_substeps", "<= 1000000"]),
])
def test_earlier_cases_are_one_line(tmp_path, case, text, extra, words):
    (tmp_path / "cfgdir").mkdir()
    if text is not None:
        sheet(tmp_path, text)
    args = (["run" if a == "run" else str(tmp_path / "cfgdir") if a == "DIR" else a for a in extra]
            if extra[:1] == ["run"] else ["run", "case.toml", "--output", "out.h5", *extra])
    proc = run_cli(args, cwd=tmp_path)
    assert_one_line(proc, case, words)
    assert not (tmp_path / "out.h5").exists()

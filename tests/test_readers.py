"""Readers give only what was written: a killed run's snapshots past the last one written, and mesh element tags the
labels cannot hold, are refused in one line naming the file, not read as zeros or wrapped."""

from __future__ import annotations

import shutil

import h5py
import numpy as np
import pytest

from conftest import ROOT, run_cli

from cardiosim.output.results import Results
from cardiosim.runtime.errors import UserError

LEGACY = sorted(p for p in (ROOT / "tests" / "data" / "legacy").iterdir() if p.is_dir())


def _killed(tmp_path, written: int):
    """A copy of a finished run's file as a kill leaves it: the snapshots from ``written`` on never written (their
    time NaN, their fields the zeros of the preallocated datasets)."""
    path = tmp_path / "killed.h5"
    shutil.copy(LEGACY[-1] / "sheet.h5", path)
    with h5py.File(path, "r+") as f:
        f["fields/time"][written:] = np.nan
        for name in f["fields"]:
            if name != "time":
                f["fields"][name][written:] = 0.0
        return path, f["fields/Vm"].shape[0]


def test_snapshots_past_the_last_written_are_refused(tmp_path):
    """A killed run's file: field(name, i) for i at or beyond the snapshots written is one UserError naming the
    file, the index and the snapshots there are (it returned the all-zero rows of the preallocated dataset, or
    h5py's own error past its planned length); a negative index counts from the last written."""
    path, planned = _killed(tmp_path, 3)
    with Results(path) as r:
        assert r.n_snapshots == 3 and planned == 5
        last = r.field("Vm", 2)
        assert np.any(last != 0.0)
        np.testing.assert_array_equal(r.field("Vm", -1), last)
        for i in (3, planned - 1, r.n_snapshots + 5, -4):
            with pytest.raises(UserError) as e:
                r.field("Vm", i)
            msg = str(e.value)
            assert str(path) in msg and f"snapshot {i} of Vm does not exist" in msg, msg
            assert "0 to 2 (t = " in msg and "2 of the 5 planned were never written" in msg, msg


def test_maps_probes_and_ecg_never_written_are_refused(tmp_path):
    """A map, a probe or an ECG trace the run did not write is one UserError naming it, the file and what it has
    (it was h5py's KeyError); a run still going (or killed) is told to have its maps only at the end."""
    path, _ = _killed(tmp_path, 3)
    with Results(path) as r:
        for call, words in ((lambda: r.map("apd_50"), ["map apd_50: not in", "maps in the file: "]),
                            (lambda: r.map_attrs("cv"), ["map cv: not in"]),
                            (lambda: r.probe("nowhere"), ["probe nowhere: not in", "probes in the file: "]),
                            (lambda: r.ecg_trace("V1"), ["ECG trace V1: not in", "ECG traces in the file: none"])):
            with pytest.raises(UserError) as e:
                call()
            assert all(w in str(e.value) for w in words) and str(path) in str(e.value), str(e.value)
    with h5py.File(path, "r+") as f:
        f.attrs["status"] = "running"
        del f["maps"]
    with Results(path) as r:
        with pytest.raises(UserError, match=r"maps in the file: none \(maps are written when the run ends\)"):
            r.map("activation_time")


def _tet(path, tag):
    """One regular tetrahedron in a cube of 1 cm, element tag ``tag`` (its dtype as given)."""
    import meshio
    pts = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]], dtype=float)
    meshio.write(path, meshio.Mesh(pts, [("tetra", np.array([[0, 1, 2, 3]]))],
                                   cell_data={"fibres": [np.array([[1.0, 0.0, 0.0]])], "tag": [np.array([tag])]}))
    return path


@pytest.mark.parametrize("tag, words", [
    (2 ** 32 + 1, ["the tag 4294967297", "does not fit in the labels"]),       # became label 1
    (2 ** 31, ["the tag 2147483648", "does not fit in the labels"]),           # became -2147483648: 'tags >= 1'
    (2.5, ["the tag 2.5", "not a whole number"]),                              # became label 2
])
def test_mesh_tags_that_do_not_fit_the_labels_are_refused(tmp_path, tag, words):
    """`cardiosim geometry mesh.vtu`: an element tag that does not fit in the labels (int32) or is not a whole
    number is exit 2, one line naming the file, the tag and the range allowed; 2^31 - 1 is still a label."""
    pytest.importorskip("meshio")
    mesh = _tet(tmp_path / "mesh.vtu", np.int64(tag) if isinstance(tag, int) else tag)
    out = tmp_path / "geo.h5"
    proc = run_cli(["geometry", mesh, "--spacing", "0.1", "--out", out])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for w in [str(mesh), "allowed: whole numbers from 1 to 2147483647", *words]:
        assert w in lines[0], (w, lines[0])
    assert not out.exists()
    ok = _tet(tmp_path / "top.vtu", np.int64(2 ** 31 - 1))
    proc = run_cli(["geometry", ok, "--spacing", "0.1", "--out", out])
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out) as f:
        labels = f["labels"][:]
        assert set(np.unique(labels)) == {0, 2 ** 31 - 1}

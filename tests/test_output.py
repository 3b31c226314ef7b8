"""The result file (docs/user/output-format.md): every dataset and attribute opens and holds what it should, the XDMF
sidecar parses and points at datasets that exist (and VTK's XDMF reader, ParaView's, reads the same numbers),
and a run killed with SIGKILL leaves a file that opens with the snapshots written before the kill."""

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import ROOT, needs, run_cli

SHEET = Path(__file__).parent / "configs" / "sheet.toml"

CABLE = (Path(__file__).parent / "configs" / "cable.toml").read_text()
SLAB = (Path(__file__).parent / "configs" / "slab.toml").read_text()


@pytest.fixture(scope="module")
def sheet_file(tmp_path_factory):
    """The sheet on 2 ranks, 6 ms, a snapshot every 2 ms (written by gathering to rank 0)."""
    d = tmp_path_factory.mktemp("sheet")
    out = d / "sheet.h5"
    run_cli(["run", SHEET, "--quiet", "--output", out, "--set", "simulation.duration=6.0"], np=2, cwd=d,
            check=True, timeout=300)
    return out


def _run(tmp_path, text, name, np_=1):
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(text)
    out = tmp_path / f"{name}.h5"
    run_cli(["run", cfg, "--quiet", "--output", out], np=np_, cwd=tmp_path, check=True, timeout=300)
    return out


def read_everything(path) -> dict:
    """Open every group, dataset and attribute (reading each dataset whole); return {path: shape}."""
    seen = {}
    with h5py.File(path, "r") as f:
        for k, v in f.attrs.items():
            assert v is not None, k

        def visit(name, obj):
            for k in obj.attrs:
                assert obj.attrs[k] is not None, f"{name}@{k}"
            if isinstance(obj, h5py.Dataset):
                data = obj[()]
                seen[f"/{name}"] = np.shape(data)
                assert "units" in obj.attrs or name.startswith("solver/"), f"/{name} has no units attribute"
        f.visititems(visit)
    return seen


@pytest.mark.mpi
def test_every_dataset_and_attribute(sheet_file):
    seen = read_everything(sheet_file)
    n_steps, n_snap, shape = 300, 4, (21, 51)               # 6 ms / 0.02 ms; t = 0, 2, 4, 6; (ny, nx)
    expected = {
        "/grid/x": (51,), "/grid/y": (21,),
        "/fields/time": (n_snap,), "/fields/Vm": (n_snap, *shape), "/fields/phi_e": (n_snap, *shape),
        "/probes/time": (n_steps + 1,),
        **{f"/probes/{p}/{f}": (n_steps + 1,) for p in ("near", "middle", "far") for f in ("Vm", "phi_e")},
        "/solver/parabolic_iterations": (n_steps,), "/solver/elliptic_iterations": (n_steps + 1,),
        "/maps/activation_time": shape, "/maps/apd": shape,
    }
    assert seen == expected
    with h5py.File(sheet_file) as f:
        a = f.attrs
        assert a["format"] == "cardiosim-2" and a["status"] == "finished"
        assert a["config"] == SHEET.read_text() and a["config_name"] == "sheet"
        assert a["equations"] == "bidomain" and a["cell_model"] == "mitchell-schaeffer"
        assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", a["git_hash"])
        assert a["cardiosim_version"]
        units = json.loads(a["units"])
        assert units["Vm"] == "mV" and units["time"] == "ms" and units["x"] == "cm"
        layout = json.loads(a["layout"])
        assert layout["mpi_ranks"] == 2 and len(layout["hosts"]) == 2 and layout["gpus"] == [None, None]
        assert a["simulated_ms"] == pytest.approx(6.0)
        g = f["grid"].attrs
        assert g["dim"] == 2 and list(g["shape"]) == [51, 21] and np.allclose(g["spacing"], 0.02)
        np.testing.assert_allclose(f["fields/time"][:], [0.0, 2.0, 4.0, 6.0])
        np.testing.assert_allclose(f["probes/time"][:], np.arange(n_steps + 1) * 0.02, atol=1e-12)
        for p in ("near", "middle", "far"):
            pos = f[f"probes/{p}"].attrs["node_position"]
            v = f[f"probes/{p}/Vm"][:]
            # the trace at a snapshot time is the snapshot at the probe's node
            node = np.round(pos / 0.02).astype(int)
            np.testing.assert_array_equal(v[::100], f["fields/Vm"][:, node[1], node[0]])
        assert np.isfinite(f["fields/Vm"][:]).all()
        timing = f["timing"].attrs
        for phase in ("reaction", "parabolic", "elliptic", "io", "other", "total"):
            assert timing[phase] >= timing[f"{phase}_mean"] >= 0.0
        assert f["maps/activation_time"].attrs["threshold"] == 0.0
        assert f["maps/apd"].attrs["level"] == 90.0
        assert np.isnan(f["maps/apd"][:]).all()            # 6 ms: nothing has repolarised yet


def test_git_hash(tmp_path):
    from cardiosim.output.writer import git_hash
    h = git_hash()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode == 0:
        assert h.split("-")[0] == head.stdout.strip()
    assert git_hash(tmp_path) == "unknown"                  # not a checkout
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "__init__.py").write_text("")
    assert git_hash(tmp_path) == "unknown"                  # a checkout, but the package is not in it
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", "-C", str(tmp_path), "add", "__init__.py"], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "commit", "-qm", "x"], check=True, env=env)
    committed = git_hash(tmp_path)
    assert re.fullmatch(r"[0-9a-f]{40}", committed)
    (tmp_path / "__init__.py").write_text("changed")
    assert git_hash(tmp_path) == committed + "-dirty"


# -- XDMF --------------------------------------------------------------------------------------------------------
def check_xdmf(h5_path) -> list[float]:
    """Parse the sidecar; every HDF DataItem names this file, a dataset that exists and its shape; hyperslabs
    stay inside it; the times are the file's snapshot times. Returns the times."""
    xml = Path(h5_path).with_suffix(".xdmf")
    root = ET.parse(xml).getroot()
    assert root.tag == "Xdmf"
    grids = root.findall("./Domain/Grid/Grid")
    times = [float(g.find("Time").get("Value")) for g in grids]
    with h5py.File(h5_path, "r") as f:
        nat = tuple(int(n) for n in f["grid"].attrs["shape"][::-1])
        mesh = (1,) * (3 - len(nat)) + nat
        np.testing.assert_array_equal(times, f["fields/time"][: len(times)])
        for g in grids:
            topo = g.find("Topology")
            assert topo.get("TopologyType") == "3DCoRectMesh"
            assert tuple(map(int, topo.get("Dimensions").split())) == mesh
            spacing = [float(v) for v in g.findall("Geometry/DataItem")[1].text.split()]
            np.testing.assert_allclose(spacing[3 - len(nat):], f["grid"].attrs["spacing"][::-1])
            for att in g.findall("Attribute"):
                slab = att.find("DataItem")
                assert slab.get("ItemType") == "HyperSlab"
                assert tuple(map(int, slab.get("Dimensions").split())) == mesh
                sel, heavy = slab.findall("DataItem")
                name, path = heavy.text.strip().split(":")
                assert name == Path(h5_path).name
                assert path in f, path
                shape = tuple(map(int, heavy.get("Dimensions").split()))
                assert shape == f[path].shape
                start, stride, count = np.array(sel.text.split(), dtype=int).reshape(3, len(shape))
                assert (start + count <= np.array(shape)).all() and int(np.prod(count)) == int(np.prod(mesh))
    return times


def vtk_read(h5_path, time_value, name):
    """The node data ``name`` at ``time_value`` as VTK's XDMF reader (ParaView's) sees it, and its geometry."""
    try:
        import vtkmodules.vtkIOXdmf2 as xdmf2
    except ImportError as e:
        needs("vtk", False, str(e))
    from vtkmodules.util.numpy_support import vtk_to_numpy
    r = xdmf2.vtkXdmfReader()
    r.SetFileName(str(Path(h5_path).with_suffix(".xdmf")))
    r.UpdateInformation()
    r.UpdateTimeStep(time_value)
    img = r.GetOutputDataObject(0)
    return vtk_to_numpy(img.GetPointData().GetArray(name)), img.GetDimensions(), img.GetSpacing()


@pytest.mark.mpi
def test_xdmf_2d(sheet_file):
    times = check_xdmf(sheet_file)
    assert times == [0.0, 2.0, 4.0, 6.0]


@pytest.mark.mpi
@pytest.mark.parametrize("kind", ["1d", "3d"])
def test_xdmf_1d_and_3d(tmp_path, kind):
    out = _run(tmp_path, CABLE if kind == "1d" else SLAB, kind)
    times = check_xdmf(out)
    assert len(times) == 5
    with h5py.File(out) as f:
        k = 2
        vm = f["fields/Vm"][k]
        data, dims, spacing = vtk_read(out, times[k], "Vm")
        np.testing.assert_array_equal(data, vm.ravel())
        assert dims == tuple(int(n) for n in f["grid"].attrs["shape"]) + (1,) * (3 - f["grid"].attrs["dim"])
        np.testing.assert_allclose(spacing[: f["grid"].attrs["dim"]], f["grid"].attrs["spacing"])
        act, _, _ = vtk_read(out, times[k], "activation_time")
        np.testing.assert_array_equal(act, f["maps/activation_time"][:].ravel())


@pytest.mark.mpi
def test_vtk_reads_the_2d_sheet(sheet_file):
    """x stays x in ParaView: a 2D grid is one node thick in z (not in the y-z plane)."""
    with h5py.File(sheet_file) as f:
        for k, t in enumerate(f["fields/time"][:]):
            phi, dims, spacing = vtk_read(sheet_file, t, "phi_e")
            np.testing.assert_array_equal(phi, f["fields/phi_e"][k].ravel())
    assert dims == (51, 21, 1)
    np.testing.assert_allclose(spacing[:2], [0.02, 0.02])


# -- a run killed with SIGKILL -----------------------------------------------------------------------------------
def _snapshots_in_xdmf(path: Path) -> int:
    try:
        return path.read_text().count("<Time ")
    except OSError:
        return 0


@pytest.mark.parametrize("when", ["after 2 snapshots", "while writing every step"])
def test_sigkill_leaves_a_readable_file(tmp_path, when):
    """Start a run, wait until its XDMF lists >= 2 snapshots (or a random moment later), kill -9, open the
    file: it opens with plain h5py, and its complete snapshots and probe samples are exactly those of the same
    run left to finish (so nothing half-written is taken as complete)."""
    every_step = when == "while writing every step"
    args = ["--quiet", "--set", "simulation.duration=20.0",
            "--set", f"output.interval={0.02 if every_step else 0.4}"]
    ref = tmp_path / "ref.h5"
    run_cli(["run", SHEET, "--output", ref, *args], cwd=tmp_path, check=True, timeout=300)
    out = tmp_path / "killed.h5"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.Popen([sys.executable, "-m", "cardiosim", "run", str(SHEET), "--output", str(out), *args],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 240
        while _snapshots_in_xdmf(out.with_suffix(".xdmf")) < 2:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.02)
        if every_step:
            time.sleep(np.random.default_rng().uniform(0.0, 0.5))
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    listed = _snapshots_in_xdmf(out.with_suffix(".xdmf"))
    from cardiosim.output.results import Results
    with h5py.File(out, "r") as f, h5py.File(ref, "r") as g:
        assert f.attrs["status"] == "running"               # no end record: the run was killed
        t = f["fields/time"][:]
        n = int(np.isfinite(t).sum())
        assert np.isfinite(t[:n]).all() and np.isnan(t[n:]).all()   # complete entries first, then NaN
        print(f"\nkilled {when}: {n} of {len(t)} snapshots complete, {listed} in the XDMF")
        assert 2 <= listed <= n < g["fields/time"].shape[0]
        for name in ("Vm", "phi_e"):
            np.testing.assert_array_equal(f["fields"][name][:n], g["fields"][name][:n])
        pt = f["probes/time"][:]
        m = int(np.isfinite(pt).sum())
        assert m >= n                                         # probe samples up to the last snapshot at least
        np.testing.assert_array_equal(pt[:m], g["probes/time"][:m])
        for p in ("near", "middle", "far"):
            np.testing.assert_array_equal(f[f"probes/{p}/Vm"][:m], g[f"probes/{p}/Vm"][:m])
    check_xdmf(out)
    with Results(out) as r:
        assert r.n_snapshots == n and r.status == "running"


def test_stopped_run_is_trimmed(tmp_path):
    """A run stopped by an error (cells blow up) keeps what it wrote, trimmed to it, status 'stopped'."""
    out = tmp_path / "bad.h5"
    cfg = tmp_path / "sheet.toml"     # the pulse a whole number of the large steps
    cfg.write_text(Path(SHEET).read_text().replace("duration = 1.0", "duration = 2.0"))
    proc = run_cli(["run", cfg, "--output", out, "--quiet", "--set", "simulation.dt=2.0",
                    "--set", "output.interval=2.0"], cwd=tmp_path)
    assert proc.returncode == 3
    read_everything(out)
    with h5py.File(out) as f:
        assert f.attrs["status"] == "stopped"
        n = f["fields/time"].shape[0]
        assert n >= 1 and np.isfinite(f["fields/time"][:]).all() and f["fields/Vm"].shape[0] == n
        assert np.isfinite(f["probes/time"][:]).all()
    assert len(check_xdmf(out)) == n


@pytest.mark.mpi
def test_too_small_disk_is_refused_before_the_run(tmp_path):
    """The output's datasets are laid out at full length: a file system that cannot hold them is refused at the
    start, on every rank, with one line and exit 2, and nothing is written there."""
    import subprocess
    from conftest import mount_tmpfs
    disk = tmp_path / "small"
    mount_tmpfs(disk, "96k")
    try:
        cfg = Path(__file__).parent / "configs" / "sheet.toml"
        proc = run_cli(["run", cfg, "--output", disk / "run.h5", "--quiet", "--set", "simulation.duration=10.0",
                        "--set", "output.interval=0.1"], np=2, timeout=300)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        print(lines)
        assert proc.returncode == 2, proc.stderr
        assert len(lines) == 1 and "MB free; this run's output needs about" in lines[0]
        assert list(disk.iterdir()) == []
    finally:
        subprocess.run(["umount", str(disk)], check=False)

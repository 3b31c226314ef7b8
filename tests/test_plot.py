"""``cardiosim inspect`` and ``cardiosim plot``: the report states what the file holds, the PNGs exist and the
figures drawn into them hold the file's data (captured as they are saved), and neither command needs MPI/PETSc."""

import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import run_cli

CONFIGS = Path(__file__).parent / "configs"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A 2D sheet that activates and repolarises (short APD), a 1D cable and a 3D slab, 1 rank each."""
    d = tmp_path_factory.mktemp("runs")
    out = {}
    for name, cfg, extra in (
            ("sheet", "sheet.toml", ["--set", "simulation.duration=90.0", "--set", "simulation.dt=0.05",
                                     "--set", "grid.spacing=0.04", "--set", "cell.parameters={tau_close=10.0}",
                                     "--set", "output.interval=5.0", "--set", "output.activation_threshold=-40.0"]),
            ("cable", "cable.toml", []), ("slab", "slab.toml", [])):
        out[name] = d / f"{name}.h5"
        run_cli(["run", CONFIGS / cfg, "--quiet", "--output", out[name], *extra], cwd=d, check=True, timeout=300)
    return out


def test_inspect_report(runs):
    proc = run_cli(["inspect", runs["sheet"]], check=True)
    text = proc.stdout
    print(text)
    with h5py.File(runs["sheet"]) as f:
        act = f["maps/activation_time"][:]
        apd = f["maps/apd"][:]
        vm = f["fields/Vm"][:]
    assert "cardiosim-2, finished" in text
    assert "config: sheet (bidomain, mitchell-schaeffer)" in text
    assert "grid: 2D, 26 x 11 = 286 nodes, spacing 0.04 x 0.04 cm, size 1 x 0.4 cm" in text
    assert "snapshots: 19, t = 0 to 90 ms, every 5 ms" in text
    assert re.search(rf"Vm\s+{vm.min():.4g} to\s+{vm.max():.4g} mV", text)
    assert "phi_e" in text and "probes: 3, 1801 samples" in text
    for name in ("near", "middle", "far"):
        assert re.search(rf"{name}\s+at \(.*\) cm: Vm .* activation [0-9.]+ ms", text)
    n_act = int(np.isfinite(act).sum())
    assert (f"activation (first crossing of -40 mV): {n_act} of 286 nodes activated ({100 * n_act / 286:.1f} %); "
            f"min {np.nanmin(act):.4g}, mean {np.nanmean(act):.4g}, max {np.nanmax(act):.4g} ms") in text
    assert f"APD90 (first beat): {int(np.isfinite(apd).sum())} of 286 nodes repolarised" in text
    assert f"mean {np.nanmean(apd):.4g}" in text
    assert "iterations per step: elliptic mean" in text
    for phase in ("reaction", "parabolic", "elliptic", "io", "other", "total"):
        assert re.search(rf"^\s+{phase}\s+[0-9.]+\s+[0-9.]+\s+[0-9.]+%$", text, re.M), phase
    # --config: the config as it ran, the file with the run's --set applied (and named in comments first)
    cfg = run_cli(["inspect", runs["sheet"], "--config"], check=True).stdout
    assert cfg.startswith("# the config as it ran: the file with these --set applied\n# --set simulation.duration=90.0")
    from cardiosim.config import apply_overrides, tomllib
    with h5py.File(runs["sheet"]) as f:
        assert f.attrs["config"] == (CONFIGS / "sheet.toml").read_text()      # the file's own text is kept too
        sets = __import__("json").loads(f.attrs["overrides"])
    want = tomllib.loads((CONFIGS / "sheet.toml").read_text())
    apply_overrides(want, sets)
    assert tomllib.loads(cfg) == want


def test_inspect_and_plot_import_neither_mpi_nor_petsc(runs, tmp_path):
    code = (f"import sys; from cardiosim.cli import main; "
            f"assert main(['inspect', {str(runs['sheet'])!r}]) == 0; "
            f"assert main(['plot', {str(runs['sheet'])!r}, '--out', {str(tmp_path)!r}]) == 0; "
            f"bad = [m for m in ('mpi4py', 'petsc4py') if m in sys.modules]; assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


@pytest.fixture
def captured(monkeypatch):
    """Every figure saved by cardiosim.output.plot, by file name, kept open for inspection."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    figs = {}
    save = Figure.savefig

    def keep(self, path, *a, **k):
        figs[Path(path).name] = self
        return save(self, path, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    monkeypatch.setattr(plt, "close", lambda fig=None: None)
    yield figs
    matplotlib.pyplot.close("all")


def _plot(path, out, *extra):
    from cardiosim.cli import main
    return main(["plot", str(path), "--out", str(out), *extra])


def _is_png(p: Path):
    data = p.read_bytes()
    return data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000


def test_plot_2d(runs, tmp_path, captured, capsys):
    assert _plot(runs["sheet"], tmp_path, "--times", "10", "21", "40", "--isochrones", "5") == 0
    printed = capsys.readouterr().out.split()
    names = ["sheet_Vm.png", "sheet_probes.png", "sheet_activation.png", "sheet_apd.png"]
    assert printed == [str(tmp_path / n) for n in names]
    assert all(_is_png(tmp_path / n) for n in names)
    with h5py.File(runs["sheet"]) as f:
        times = f["fields/time"][:]
        vm = f["fields/Vm"][:]
        act = f["maps/activation_time"][:]
        apd = f["maps/apd"][:]
        probes = {p: f[f"probes/{p}/Vm"][:] for p in ("near", "middle", "far")}
    # Vm at the nearest snapshots to 10, 21 (-> 20) and 40 ms, one panel each, one colour scale, x right, y up
    panels = [ax for ax in captured["sheet_Vm.png"].axes if ax.images]
    assert [ax.get_title() for ax in panels] == ["t = 10 ms", "t = 20 ms", "t = 40 ms"]
    for ax, t in zip(panels, (10, 20, 40)):
        im = ax.images[0]
        np.testing.assert_array_equal(im.get_array(), vm[list(times).index(t)])
        assert im.get_extent() == [0.0, 1.0, 0.0, 0.4] and im.origin == "lower"
        assert im.get_clim() == panels[0].images[0].get_clim()
    # probes: one line per probe, the whole trace
    ax_vm = captured["sheet_probes.png"].axes[0]
    for line, (name, v) in zip(ax_vm.lines, probes.items()):
        assert line.get_label().startswith(name)
        np.testing.assert_array_equal(line.get_ydata(), v)
    # activation map with isochrones every 5 ms
    ax = captured["sheet_activation.png"].axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), act)
    levels = ax.collections[0].levels if ax.collections else None
    assert levels is not None and np.allclose(np.diff(levels), 5.0)
    assert levels[0] >= np.nanmin(act) and levels[-1] <= np.nanmax(act)
    assert "isochrones every 5 ms" in ax.get_title()
    ax = captured["sheet_apd.png"].axes[0]
    np.testing.assert_array_equal(np.ma.filled(ax.images[0].get_array(), np.nan), apd)
    assert "APD90" in ax.get_title()


def test_plot_3d_takes_the_mid_slice(runs, tmp_path, captured):
    assert _plot(runs["slab"], tmp_path, "--field", "phi_e") == 0
    with h5py.File(runs["slab"]) as f:
        phi = f["fields/phi_e"][:]
        act = f["maps/activation_time"][:]
        z = f["grid/z"][:]
    k = phi.shape[1] // 2
    panels = [ax for ax in captured["slab_phi_e.png"].axes if ax.images]
    with h5py.File(runs["slab"]) as f:
        times = f["fields/time"][:]
    # default: four snapshots over the wave's passage (from before the first activation to after the last), or over
    # the run where that passage spans fewer than four snapshots
    first = times[times <= np.nanmin(act)][-1]
    after = times[times >= np.nanmax(act)]
    last = after[0] if after.size else times[-1]
    window = times[(times >= first) & (times <= last)]
    shown = window if window.size >= 4 else times
    want = [shown[i] for i in np.linspace(0, shown.size - 1, 4).round().astype(int)]
    # 3D: a row per view, by default the mid-z slice (a short-axis section) and the mid-y slice (a long-axis one)
    with h5py.File(runs["slab"]) as f:
        y = f["grid/y"][:]
    j = phi.shape[2] // 2
    assert len(panels) == 8
    assert [ax.get_title() for ax in panels[:4]] == [f"t = {t:g} ms (mid slice z = {z[k]:g} cm)" for t in want]
    assert [ax.get_title() for ax in panels[4:]] == [f"t = {t:g} ms (mid slice y = {y[j]:g} cm)" for t in want]
    np.testing.assert_array_equal(panels[3].images[0].get_array(), phi[-1, k])
    np.testing.assert_array_equal(panels[-1].images[0].get_array(), phi[-1, :, j, :])
    assert panels[-1].get_ylabel() == "z (cm)"
    ax_z, ax_y = captured["slab_activation.png"].axes[:2]
    np.testing.assert_array_equal(np.ma.filled(ax_z.images[0].get_array(), np.nan), act[k])
    np.testing.assert_array_equal(np.ma.filled(ax_y.images[0].get_array(), np.nan), act[:, j, :])
    assert "mid slice z" in ax_z.get_title() and "mid slice y" in ax_y.get_title()


def test_plot_3d_with_no_activation_in_a_slice(runs, tmp_path, captured):
    """A 3D activation map whose mid-z slice has no activated node plots without a traceback."""
    src = runs["slab"]
    f3 = tmp_path / "hollow.h5"
    f3.write_bytes(src.read_bytes())
    with h5py.File(f3, "r+") as f:
        act = f["maps/activation_time"][:]
        act[act.shape[0] // 2] = np.nan
        f["maps/activation_time"][...] = act
    assert _plot(f3, tmp_path / "p", "--view", "z", "x", "--format", "svg") == 0
    ax_z = captured["hollow_activation.svg"].axes[0]
    assert "no node of this slice has a value" in " ".join(ax_z.get_title().split())    # (the title is wrapped)
    assert (tmp_path / "p" / "hollow_activation.svg").read_bytes().lstrip().startswith(b"<?xml")


def test_plot_formats_colours_and_labels(runs, tmp_path, captured):
    assert _plot(runs["sheet"], tmp_path, "--format", "pdf", "--dpi", "72") == 0
    pdf = tmp_path / "sheet_Vm.pdf"
    assert pdf.read_bytes().startswith(b"%PDF")
    panel = [ax for ax in captured["sheet_Vm.pdf"].axes if ax.images][0]
    assert panel.images[0].get_clim() == (-90.0, 40.0)           # the physiological range, not the data's
    assert captured["sheet_Vm.pdf"]._suptitle.get_text() == "sheet: $V_m$"   # the config's name, not the file's
    # a second plot is refused, --overwrite replaces (recognised as cardiosim's by its content)
    from cardiosim.cli import main
    assert main(["plot", str(runs["sheet"]), "--out", str(tmp_path), "--format", "pdf"]) == 2
    assert _plot(runs["sheet"], tmp_path, "--format", "pdf", "--overwrite") == 0
    # a probe on the axis: its label says 0, not -2.22045e-16
    from cardiosim.output.plot import coordinate
    assert coordinate(-2.220446049250313e-16) == "0" and coordinate(0.35) == "0.35"
    labels = [ln.get_label() for ln in captured["sheet_probes.pdf"].axes[0].lines]
    assert labels[0] == "near (0.32, 0) cm"
    # the probes are marked on the maps
    ax = captured["sheet_activation.pdf"].axes[0]
    assert any(t.get_text() == "far" for t in ax.texts)
    assert _plot(runs["sheet"], tmp_path, "--view", "x") == 2     # --view is for 3D


def test_plot_1d_draws_curves(runs, tmp_path, captured):
    assert _plot(runs["cable"], tmp_path, "--times", "0", "3", "6") == 0
    with h5py.File(runs["cable"]) as f:
        vm = f["fields/Vm"][:]
        x = f["grid/x"][:]
        act = f["maps/activation_time"][:]
    ax = captured["cable_Vm.png"].axes[0]
    assert [ln.get_label() for ln in ax.lines] == ["t = 0 ms", "t = 3 ms", "t = 6 ms"]
    np.testing.assert_array_equal(ax.lines[1].get_xdata(), x)
    np.testing.assert_array_equal(ax.lines[2].get_ydata(), vm[-1])
    np.testing.assert_array_equal(captured["cable_activation.png"].axes[0].lines[0].get_ydata(), act)
    assert not (tmp_path / "cable_apd.png").exists()        # nothing repolarised in 6 ms: no empty map


def test_nice_isochrone_step():
    from cardiosim.output.plot import nice_step
    assert nice_step(78.0) == 10.0
    assert nice_step(40.0) == 5.0
    assert nice_step(3.0) == 0.2
    assert nice_step(0.0) == 1.0


def test_vtu_export(runs, tmp_path):
    """--vtu: the snapshots at --times as VTK unstructured grids (meshio): every node a point, quads between them,
    the fields and maps as point data, in natural order (x fastest)."""
    import meshio
    assert _plot(runs["sheet"], tmp_path, "--times", "20", "--vtu") == 0
    with h5py.File(runs["sheet"]) as f:
        i = list(f["fields/time"][:]).index(20.0)
        vm, act = f["fields/Vm"][i], f["maps/activation_time"][:]
        x, y = f["grid/x"][:], f["grid/y"][:]
    m = meshio.read(tmp_path / f"sheet_{i:04d}.vtu")
    assert m.cells[0].type == "quad" and m.cells[0].data.shape == ((len(x) - 1) * (len(y) - 1), 4)
    np.testing.assert_array_equal(m.point_data["Vm"], vm.ravel())
    np.testing.assert_array_equal(m.point_data["map_activation_time"], act.ravel())
    np.testing.assert_array_equal(m.points[len(x) + 2], [x[2], y[1], 0.0])
    q = m.cells[0].data[0]                                    # the first quad, counter-clockwise from (x0, y0)
    np.testing.assert_array_equal(m.points[q][:, :2], [[x[0], y[0]], [x[1], y[0]], [x[1], y[1]], [x[0], y[1]]])

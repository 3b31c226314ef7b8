"""The figures of ``cardiosim plot``, every kind, drawn from small result files made here (the layout of
docs/user/output-format.md, written with h5py: no run, no MPI), checked for their layout, not their pixels: legends
lie outside the traces, colour bars are as tall as their panels, every axis with ticks has a label with a unit,
label maps are drawn with a discrete colour map, the probe names are outlined, titles say what is shown."""

from __future__ import annotations

import json
import re

import h5py
import numpy as np
import pytest

from cardiosim.analysis.twelve_lead import ELECTRODES, TRACES

CONFIG = """[simulation]
duration = 40.0

[[stimulus]]
name = "S1"
shape = "box"
lower = [0.0, 0.0, 0.0]
upper = [0.1, 1.0, 1.0]
"""


def run_file(path, dim: int = 2, ecg: str = "electrodes", tissue: bool = False, microscopic: bool = False,
             purkinje: bool = False):
    """A finished run's file of ``dim`` dimensions: a plane wave along x (activation 10 ms/cm from x = 0, APD
    100 ms), Vm and phi_e snapshots every 5 ms, two probes, maps; ``ecg``: "electrodes" (two electrodes),
    "leads" (and a lead), "twelve" (the standard 12 leads too) or None; ``tissue``: a /maps/tissue label map (a
    disc of tissue); ``microscopic``: a /tissue myocyte layout; ``purkinje``: a /purkinje network (a branched line
    along x activating at 5 ms/cm from 2 ms, one branch not activated)."""
    h = 0.05
    shape = {1: (41,), 2: (21, 41), 3: (9, 11, 21)}[dim]          # [z, y,] x
    axes = [np.arange(n) * h for n in reversed(shape)]              # x first
    grids = np.meshgrid(*reversed(axes), indexing="ij")             # [z, y,] x order
    x = grids[-1]
    act = 10.0 * x
    times = np.arange(0.0, 45.0, 5.0)
    vm = np.where((times[:, None] >= act.ravel()[None]), 20.0, -85.0).reshape(len(times), *shape)
    pt = np.arange(0.0, 40.05, 0.1)
    with h5py.File(path, "w") as f:
        f.attrs.update(format="cardiosim-2", status="finished", config=CONFIG, config_effective=CONFIG,
                       config_name="wave", equations="bidomain", cell_model="mitchell-schaeffer",
                       overrides="[]", units=json.dumps({"Vm": "mV"}), cardiosim_version="test")
        g = f.create_group("grid")
        g.attrs.update(dim=dim, shape=list(reversed(shape)), spacing=[h] * dim,
                       size=[h * (n - 1) for n in reversed(shape)], stencil="box")
        for name, a in zip("xyz", axes):
            g.create_dataset(name, data=a).attrs["units"] = "cm"
        f.create_dataset("fields/time", data=times).attrs["units"] = "ms"
        f.create_dataset("fields/Vm", data=vm).attrs["units"] = "mV"
        f.create_dataset("fields/phi_e", data=np.gradient(vm, axis=-1)).attrs["units"] = "mV"
        f.create_dataset("probes/time", data=pt).attrs["units"] = "ms"
        for name, at in (("near", 0.2), ("far", 1.95)):
            p = f.create_group(f"probes/{name}")
            p.attrs["position"] = p.attrs["node_position"] = [at] + [0.2] * (dim - 1)
            p.create_dataset("Vm", data=np.where(pt >= 10 * at, 20.0, -85.0))
            p.create_dataset("phi_e", data=np.exp(-(pt - 10 * at) ** 2))
        if ecg:
            e = f.create_group("ecg")
            e.attrs.update(bath_conductivity=2.0, sheet_thickness=0.1)
            names = ["e1", "e2"] if ecg != "twelve" else list(ELECTRODES)
            for k, name in enumerate(names):
                e.create_dataset(name, data=np.sin(pt / (5.0 + k))).attrs["position"] = [3.0 + k, 0.5, 2.0][:dim]
            if ecg in ("leads", "twelve"):
                e.create_dataset("lead_1", data=np.cos(pt / 4.0)).attrs["lead"] = f"{names[1]} - {names[0]}"
            if ecg == "twelve":
                for k, name in enumerate(TRACES):
                    e.create_dataset(name, data=np.sin(pt / (3.0 + k))).attrs["lead"] = "a weighted sum of them"
        m = f.create_group("maps")
        m.create_dataset("activation_time", data=act).attrs.update(units="ms", threshold=0.0)
        m.create_dataset("apd", data=100.0 + 2.0 * x).attrs.update(units="ms", level=90.0)
        if tissue:
            centre = [a[len(a) // 2] for a in axes]
            r2 = sum((gr - c) ** 2 for gr, c in zip(reversed(grids), centre))
            m.create_dataset("tissue", data=(r2 <= 0.6 ** 2).astype(np.int8)).attrs["units"] = "1"
        if purkinje:
            p = f.create_group("purkinje")
            xs = np.linspace(0.0, 1.5, 16)
            pts = np.stack([xs, np.full(16, 0.2), np.full(16, 0.2)], axis=1)
            pts = np.concatenate([pts, [[0.8, 0.6, 0.3], [0.9, 0.8, 0.3]]])           # a branch off node 8
            edges = np.concatenate([np.stack([np.arange(15), np.arange(1, 16)], axis=1), [[8, 16], [16, 17]]])
            act = np.concatenate([2.0 + 5.0 * xs, [6.5, np.nan]])
            p.create_dataset("points", data=pts).attrs["units"] = "cm"
            p.create_dataset("edges", data=edges)
            p.create_dataset("activation_time", data=act).attrs["units"] = "ms"
        if microscopic:
            t = f.create_group("tissue")
            cid = (x // 0.3).astype(np.int64) + 100 * (grids[-2] // 0.2 if dim > 1 else 0).astype(np.int64)
            t.create_dataset("cell_id", data=cid)
            t.create_dataset("non_conducting", data=(cid == cid.max()).astype(np.int8))
            for a in "xyz"[:dim]:
                t.create_dataset(f"face_type_{a}", data=np.full(shape, 2, np.int8))
                t.create_dataset(f"face_g_{a}", data=np.ones(shape))
    return path


@pytest.fixture
def captured(monkeypatch):
    """Every figure cardiosim plot saves, by file name, kept open for inspection."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure
    figs = {}
    save = Figure.savefig

    def keep(self, path, *a, **k):
        figs[str(path).rsplit("/", 1)[-1]] = self
        return save(self, path, *a, **k)

    monkeypatch.setattr(Figure, "savefig", keep)
    monkeypatch.setattr(plt, "close", lambda fig=None: None)
    yield figs
    plt.close("all")


def plot(path, out, *extra) -> int:
    from cardiosim.cli import main
    return main(["plot", str(path), "--out", str(out), *extra])


# -- the layout checks -------------------------------------------------------------------------------------------
UNIT = re.compile(r"\((.+)\)\s*$")


def _all_axes(fig):
    """The figure's axes and their insets."""
    return [a for ax in fig.axes for a in (ax, *ax.child_axes)]


def _colorbars(fig):
    return [ax for ax in _all_axes(fig) if getattr(ax, "_colorbar", None) is not None]


def _panels(fig):
    """The axes that are not colour bars."""
    bars = _colorbars(fig)
    return [ax for ax in _all_axes(fig) if all(ax is not b for b in bars) and ax.get_visible()]


def _panel_of(fig, bar):
    """The panel a colour bar belongs to: the one it is an inset of, else the nearest one on its left."""
    for ax in fig.axes:
        if bar in ax.child_axes:
            return ax
    b = bar.get_window_extent()
    left = [ax for ax in _panels(fig) if ax.images and ax.get_window_extent().x1 <= b.x0 + 1]
    return min(left, key=lambda ax: b.x0 - ax.get_window_extent().x1)


def check_layout(fig) -> None:
    """Legends outside every trace, colour bars as tall as their panels (5 %), a unit on every labelled axis."""
    fig.canvas.draw()
    trace_axes = [ax for ax in _panels(fig) if ax.lines or ax.containers]      # curves, histograms
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        box = legend.get_window_extent()
        for other in trace_axes:
            assert not box.overlaps(other.get_window_extent()), (fig.get_suptitle(), ax.get_title())
    for bar in _colorbars(fig):
        hb, hp = bar.get_window_extent().height, _panel_of(fig, bar).get_window_extent().height
        assert abs(hb - hp) <= 0.05 * hp, (fig.get_suptitle(), hb, hp)
        assert UNIT.search(bar.get_ylabel()), bar.get_ylabel()
    for ax in _panels(fig):
        for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
            shown = [t for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]
            if shown:
                assert UNIT.search(label), (ax.get_title(), label)


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_every_figure_of_a_run(tmp_path, captured, dim):
    path = run_file(tmp_path / f"wave{dim}.h5", dim=dim, ecg="leads", tissue=dim > 1)
    assert plot(path, tmp_path / "fig", "--beats") == 0
    names = {f"wave{dim}_{k}.png" for k in ("Vm", "probes", "ecg", "activation", "apd", "beats")}
    if dim > 1:
        names.add(f"wave{dim}_tissue.png")
    assert names <= set(captured), sorted(captured)
    for name, fig in captured.items():
        check_layout(fig)
    assert plot(path, tmp_path / "phi", "--field", "phi_e") == 0
    check_layout(captured[f"wave{dim}_phi_e.png"])


def test_ecg_names_its_electrodes_and_leads(tmp_path, captured):
    path = run_file(tmp_path / "e.h5", ecg="electrodes")
    assert plot(path, tmp_path) == 0
    fig = captured["e_ecg.png"]
    check_layout(fig)
    assert [ln.get_label() for ln in fig.axes[0].lines] == ["e1", "e2"]      # names, not coordinates
    assert "pseudo-ECG" not in fig.get_suptitle() and "electrodes" in fig.get_suptitle()
    path = run_file(tmp_path / "l.h5", ecg="leads")
    assert plot(path, tmp_path) == 0
    fig = captured["l_ecg.png"]
    assert [ln.get_label() for ln in fig.axes[1].lines] == ["lead_1 = e2 - e1"]
    assert "pseudo-ECG" in fig.get_suptitle() and "pseudo-ECG" not in fig.axes[0].get_title()


def test_twelve_leads(tmp_path, captured):
    path = run_file(tmp_path / "t.h5", ecg="twelve")
    assert plot(path, tmp_path) == 0
    check_layout(captured["t_ecg12.png"])
    check_layout(captured["t_ecg.png"])          # the electrodes, without the 12 leads
    assert sorted(ln.get_label() for ln in captured["t_ecg.png"].axes[0].lines) == sorted(ELECTRODES)


@pytest.mark.parametrize("dim", [1, 2, 3])
def test_purkinje_network_over_the_tissue(tmp_path, captured, dim):
    """A run with /purkinje: <stem>_purkinje.png, the network's edges and the tissue's activation on one colour
    scale (ms) from the earliest of either to the latest; the edge that did not activate is grey."""
    from matplotlib.collections import LineCollection
    path = run_file(tmp_path / f"p{dim}.h5", dim=dim, tissue=dim > 1, purkinje=True)
    assert plot(path, tmp_path) == 0
    fig = captured[f"p{dim}_purkinje.png"]
    check_layout(fig)
    assert "1 of 17 network edges not activated" in fig.axes[0].get_title()
    if dim == 1:
        assert [ln.get_label() for ln in fig.axes[0].lines] == ["tissue", "network nodes"]
        return
    assert len(_panels(fig)) == (2 if dim == 3 else 1)              # the default views z and y
    with h5py.File(path) as f:
        tissue = np.where(f["maps/tissue"][...] > 0, f["maps/activation_time"][...], np.nan)
    lo, hi = min(2.0, float(np.nanmin(tissue))), float(np.nanmax(tissue))   # the network's first, the tissue's last
    for ax in _panels(fig):
        assert ax.images[0].get_clim() == pytest.approx((lo, hi))
        lines = [c for c in ax.collections if isinstance(c, LineCollection)]
        coloured = [c for c in lines if c.get_array() is not None]
        assert len(coloured) == 1 and coloured[0].get_clim() == pytest.approx((lo, hi))
        assert len(coloured[0].get_segments()) == 16 and len(lines) == 2      # and the grey one
    assert _colorbars(fig)[0].get_ylabel() == "activation time (ms)"
    path = run_file(tmp_path / f"none{dim}.h5", dim=dim)
    assert plot(path, tmp_path) == 0 and f"none{dim}_purkinje.png" not in captured


def test_label_maps_are_discrete(tmp_path, captured):
    from matplotlib.colors import BoundaryNorm, ListedColormap
    path = run_file(tmp_path / "m.h5", tissue=True)
    assert plot(path, tmp_path) == 0
    fig = captured["m_tissue.png"]
    check_layout(fig)
    im = fig.axes[0].images[0]
    assert isinstance(im.cmap, ListedColormap) and im.cmap.N == 2 and isinstance(im.norm, BoundaryNorm)
    bar = _colorbars(fig)[0]
    assert [t.get_text() for t in bar.get_yticklabels()] == ["outside", "tissue"]
    # a quantity keeps its continuous scale
    assert not isinstance(captured["m_activation.png"].axes[0].images[0].norm, BoundaryNorm)


def test_maps_say_which_beat_and_outline_the_probe_names(tmp_path, captured):
    path = run_file(tmp_path / "b.h5")
    assert plot(path, tmp_path) == 0
    for kind in ("activation", "apd"):
        ax = captured[f"b_{kind}.png"].axes[0]
        assert "first beat" in ax.get_title()
        names = [t for t in ax.texts if t.get_text() in ("near", "far")]
        assert len(names) == 2 and all(t.get_path_effects() for t in names)
        box = ax.get_window_extent()
        for t in names:          # inside the map, the far one (near the right edge) too
            e = t.get_window_extent()
            assert box.x0 <= e.x0 and e.x1 <= box.x1 and box.y0 <= e.y0 and e.y1 <= box.y1, t.get_text()


def test_microscopic_layout(tmp_path, captured):
    path = run_file(tmp_path / "micro.h5", microscopic=True)
    assert plot(path, tmp_path) == 0
    fig = captured["micro_layout.png"]
    check_layout(fig)
    ax = fig.axes[0]
    assert not ax.get_legend().get_window_extent().overlaps(ax.get_window_extent())     # beside the map


def test_arrhythmia_figures(tmp_path, captured):
    """--phase, --tips, --dominant-frequency on a rotating spiral (tests/synthetic.py)."""
    from synthetic import spiral, to_mv, write_result
    h = 0.05
    x = y = np.arange(41) * h
    t = np.arange(0.0, 200.0, 5.0)
    ph = spiral(x, y, t, lambda s: (np.full_like(s, 1.0), np.full_like(s, 1.0)), 2 * np.pi / 100)
    path = write_result(tmp_path / "spiral.h5", t, to_mv(ph), h, name="spiral")
    assert plot(path, tmp_path, "--phase", "--tips", "--dominant-frequency", "--times", "50", "100") == 0
    for name in ("spiral_phase.png", "spiral_tips.png", "spiral_dominant_frequency.png"):
        check_layout(captured[name])

"""``cardiosim plot``: figures of a result file (matplotlib, Agg backend; no MPI, no PETSc).

Written beside the file (or into ``--out``), named ``<stem>_<what>.png`` (``--format svg|pdf``, ``--dpi``, 150 by
default), titled with the run's config name; probes (white dots) and box or sphere stimuli (dashed red) are marked
on the maps. Colour scales: Vm -90 to 40 mV (widened where the data leave it; ``--range`` sets one), φe symmetric at
its 99th percentile, maps over their values:

* ``<stem>_<field>.png``: the field (Vm or φe) at the chosen snapshot times, one panel each, one colour scale;
  2D as a map, 3D as middle slices (``--view z y x``; default z and y: with a heart's long axis along z, as
  ``cardiosim geometry lv`` makes it, a short-axis and a long-axis section; a row per view), 1D as curves over x.
* ``<stem>_probes.png``: Vm (and φe) of every probe against time, every PDE step.
* ``<stem>_ecg.png``: the pseudo-ECG (/ecg): electrode potentials, and the leads in a panel of their own.
* ``<stem>_ecg12.png``: where the run has the standard 12 leads (ecg.twelve_lead), them in the printed layout
  (I aVR V1 V4 / II aVL V2 V5 / III aVF V3 V6), one scale for all; they are left out of ``<stem>_ecg.png``.
* ``<stem>_tissue.png``: with tissue.label_file, which nodes are tissue (the /maps/tissue map).
* ``<stem>_activation.png``: the activation-time map with isochrones (contour lines every N ms); 3D: a panel per
  view; 1D: activation time against x.
* ``<stem>_apd.png``: the APD map, where some node repolarised (otherwise a line says why there is none).
* ``<stem>_purkinje.png``: where the run has a Purkinje network (/purkinje), its edges coloured by their activation
  time over the tissue's activation map, one colour scale (ms); 3D: a panel per view, the tissue's earliest
  activation along each line of sight; grey: edges not activated.
* ``<stem>_beats.png`` (``--beats``): activation and APD of every beat (up to four), from the snapshots.
* ``<stem>_NNNN.vtu`` (``--vtu``): snapshot NNNN at each chosen time as a VTK unstructured grid (meshio), its fields
  and the maps as point data, for pipelines that read VTU rather than the XDMF sidecar.
* ``<stem>_layout.png``: the microscopic model's myocyte layout (/tissue): myocytes in alternating shades,
  non-conducting ones dark, and every face between two myocytes drawn in the colour of its junction type.

An existing figure is replaced only with ``--overwrite`` (and only one that cardiosim plot drew); every name is
checked before the first file is written.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cardiosim.runtime.errors import UserError, io_reason
from cardiosim.output.results import Results, coordinate
from cardiosim.analysis.twelve_lead import LAYOUT, TRACES
from cardiosim.runtime.files import Target, check_name, check_writes

LABELS = {"Vm": "$V_m$", "phi_e": r"$\varphi_e$", "activation_time": "activation time", "apd": "APD"}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UserError("cardiosim plot: needs matplotlib (pip install 'cardiosim[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


# The planes a 3D result is drawn in: the middle plane normal to each axis. "z" is the x-y plane (a short-axis
# section of a heart whose long axis is z, as cardiosim geometry lv makes it), "y" and "x" contain z (long axis).
VIEWS = ("z", "y", "x")
DEFAULT_VIEWS = ("z", "y")


@dataclass
class Plane:
    """A 2D picture of a node array: the values (rows: the vertical axis), their extent (cm), the axes' names and
    coordinates, and a note for the title."""
    values: np.ndarray
    extent: tuple
    labels: tuple[str, str]
    coords: tuple[np.ndarray, np.ndarray]
    note: str
    normal: int | None = None        # which axis the plane is normal to (0 x, 1 y, 2 z); None in 2D
    at: float | None = None          # its position on that axis (cm)


def planes(r: Results, a: np.ndarray, views=DEFAULT_VIEWS) -> list[Plane]:
    """A node array ([nz,] ny, nx) as 2D pictures: itself in 2D; in 3D the middle plane normal to each of ``views``
    (see VIEWS)."""
    x, y = r.axes[0], r.axes[1]
    if r.dim != 3:
        return [Plane(a, (x[0], x[-1], y[0], y[-1]), ("x", "y"), (x, y), "")]
    z = r.axes[2]
    out = []
    for v in views:
        if v == "z":
            k = a.shape[0] // 2
            out.append(Plane(a[k], (x[0], x[-1], y[0], y[-1]), ("x", "y"), (x, y), f" (mid slice z = {z[k]:g} cm)",
                             2, float(z[k])))
        elif v == "y":
            j = a.shape[1] // 2
            out.append(Plane(a[:, j, :], (x[0], x[-1], z[0], z[-1]), ("x", "z"), (x, z),
                             f" (mid slice y = {y[j]:g} cm)", 1, float(y[j])))
        else:
            i = a.shape[2] // 2
            out.append(Plane(a[:, :, i], (y[0], y[-1], z[0], z[-1]), ("y", "z"), (y, z),
                             f" (mid slice x = {x[i]:g} cm)", 0, float(x[i])))
    return out


def colour_range(name: str, values: list[np.ndarray], given=None) -> tuple[float, float, str]:
    """(vmin, vmax, colour map) of a field: ``given`` where the user gave one; Vm a fixed physiological range
    (-90 to 40 mV, widened where the data leave it), so that a resting tissue is one colour and not noise stretched
    over the whole map; φe symmetric about 0 at the 99th percentile of |φe| (a few large values near a stimulus do
    not wash out the rest)."""
    finite = np.concatenate([v[np.isfinite(v)].ravel() for v in values]) if values else np.zeros(0)
    if name == "phi_e":
        hi = float(np.percentile(np.abs(finite), 99)) if finite.size else 1.0
        hi = hi or 1.0
        lo, hi = (-hi, hi) if given is None else given
        return lo, hi, "RdBu_r"
    if given is not None:
        return given[0], given[1], "viridis"
    if name == "Vm":
        lo, hi = -90.0, 40.0
        if finite.size:
            lo, hi = min(lo, float(finite.min())), max(hi, float(finite.max()))
        return lo, hi, "viridis"
    if not finite.size:
        return 0.0, 1.0, "viridis"
    lo, hi = float(finite.min()), float(finite.max())
    return lo, (hi if hi > lo else lo + 1.0), "viridis"


def nice_step(span: float, lines: int = 10) -> float:
    """A round isochrone spacing (1, 2 or 5 × 10^k ms) giving about ``lines`` lines over ``span`` ms."""
    if not span > 0:
        return 1.0
    raw = span / lines
    k = 10.0 ** np.floor(np.log10(raw))
    return float(min((m * k for m in (1, 2, 5, 10)), key=lambda s: abs(s - raw)))


def _map_axes(ax, p: Plane, title):
    ax.set_xlabel(f"{p.labels[0]} (cm)")
    ax.set_ylabel(f"{p.labels[1]} (cm)")
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=10)


def colorbar(fig, im, ax, label: str):
    """A colour bar beside ``ax``, as tall as the map in it: an inset in the axes' own coordinates, which follow
    the map's aspect (``shrink``/``fraction`` size a bar by the grid cell, which an equal-aspect map does not fill,
    so the bar stood above and below it)."""
    return fig.colorbar(im, cax=ax.inset_axes([1.04, 0.0, 0.05, 1.0]), label=label)


def legend_outside(ax, **kw):
    """The legend to the right of ``ax``, outside its traces (inside, it hid the curves it names)."""
    return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8, **kw)


# Names of the values of label maps (a node's class, not a quantity): drawn with one colour per value.
LABEL_NAMES = {"tissue": {0: "outside", 1: "tissue"}}
MAX_LABELS = 12


def label_codes(name: str, a: np.ndarray) -> list[int] | None:
    """The values of a label map (``tissue``, or any map of at most MAX_LABELS whole numbers), sorted; None where
    ``a`` is a quantity (a continuous colour scale)."""
    ok = a[np.isfinite(a)]
    if name in ("activation_time", "apd") or not ok.size or np.any(ok != np.round(ok)):
        return None
    codes = sorted(int(v) for v in np.unique(ok))
    if name in LABEL_NAMES:
        codes = sorted(set(codes) | set(LABEL_NAMES[name]))
    return codes if len(codes) <= MAX_LABELS else None


def discrete(plt, codes: list[int]):
    """(colour map, norm) with one colour per code, the boundaries half-way between codes."""
    # matplotlib is optional (cardiosim[plot]): loaded when a figure is drawn
    from matplotlib.colors import BoundaryNorm, ListedColormap
    colours = ["0.85", "tab:red"] if len(codes) == 2 else plt.get_cmap("tab10" if len(codes) <= 10 else "tab20").colors
    cmap = ListedColormap(list(colours)[:len(codes)]).with_extremes(bad="white")
    edges = [codes[0] - 0.5] + [0.5 * (a + b) for a, b in zip(codes[:-1], codes[1:])] + [codes[-1] + 0.5]
    return cmap, BoundaryNorm(edges, len(codes))


def name_of(r: Results) -> str:
    """What a figure is titled by: the run's config name (the file's name where it has none)."""
    return r.attr("config_name") or r.path.stem


def marks(r: Results) -> tuple[dict, list]:
    """What is marked on the maps: {probe: node position (cm)} and the stimuli of the run's config as
    (name, shape, lower/centre, upper/radius)."""
    probes = {n: np.asarray(r.probe(n)["node_position"], dtype=float) for n in r.probes}
    stimuli = []
    try:
        for i, st in enumerate(r.config_data().get("stimulus", [])):
            name = st.get("name") or f"stimulus[{i}]"
            if st.get("shape") == "box" and "lower" in st and "upper" in st:
                stimuli.append((name, "box", np.asarray(st["lower"], float), np.asarray(st["upper"], float)))
            elif st.get("shape") == "sphere" and "center" in st:
                stimuli.append((name, "sphere", np.asarray(st["center"], float), float(st.get("radius", 0.0))))
    except Exception:              # a config text that does not read: the pictures are drawn without the stimuli
        stimuli = []
    return probes, stimuli


def _draw_marks(ax, r: Results, p: Plane, found) -> None:
    """Probes (white dots, named) and stimuli (dashed outlines) in the plane of ``p`` (3D: those within half a
    spacing of it, stimuli where they cut it)."""
    # matplotlib is optional (cardiosim[plot]): loaded when a figure is drawn
    from matplotlib.patches import Circle, Rectangle
    from matplotlib.patheffects import withStroke
    # white names with a black outline: readable on the light and the dark ends of a (diverging) map
    outline = [withStroke(linewidth=2.0, foreground="black")]
    probes, stimuli = found
    axes_in = [0, 1] if p.normal is None else [d for d in range(3) if d != p.normal]
    tol = 0.5 * r.spacing[p.normal] if p.normal is not None else None
    for name, pos in probes.items():
        if len(pos) < 2 or (p.normal is not None and abs(pos[p.normal] - p.at) > tol):
            continue
        ax.plot([pos[axes_in[0]]], [pos[axes_in[1]]], "o", color="white", markeredgecolor="black", markersize=4)
        # the name on the map's side of the dot: near the right or top edge it went over the edge (and the bar)
        right = pos[axes_in[0]] > p.extent[0] + 0.75 * (p.extent[1] - p.extent[0])
        top = pos[axes_in[1]] > p.extent[2] + 0.85 * (p.extent[3] - p.extent[2])
        ax.annotate(name, (pos[axes_in[0]], pos[axes_in[1]]), xytext=(-3 if right else 3, -3 if top else 3),
                    textcoords="offset points", ha="right" if right else "left", va="top" if top else "bottom",
                    fontsize=7, color="white", path_effects=outline)
    for name, shape, a, b in stimuli:
        if len(a) != r.dim or r.dim < 2:
            continue
        if shape == "box":
            if p.normal is not None and not a[p.normal] - tol <= p.at <= b[p.normal] + tol:
                continue
            lo, hi = a[axes_in], b[axes_in]
            ax.add_patch(Rectangle(lo, *(hi - lo), fill=False, ls="--", lw=0.8, ec="red"))
        else:
            d = 0.0 if p.normal is None else abs(a[p.normal] - p.at)
            if d > b:
                continue
            ax.add_patch(Circle(a[axes_in], np.sqrt(b * b - d * d), fill=False, ls="--", lw=0.8, ec="red"))


def field_times(r: Results, times) -> list[int]:
    """Snapshot indices for the requested times, in order, no repeats. Default: four spread over the wave's
    passage (first to last activation, where the run has an activation map), else over the run."""
    if r.n_snapshots == 0:
        raise UserError(f"{r.path}: holds no complete snapshot to plot")
    if times:
        return sorted(set(r.snapshot_index(t) for t in times))
    lo, hi = 0, r.n_snapshots - 1
    if "activation_time" in r.maps:
        act = r.map("activation_time")
        act = act[np.isfinite(act)]
        if act.size:
            # From the last snapshot before the first activation to the first one after the last: the wave's passage.
            a = int(np.searchsorted(r.times, act.min(), side="right")) - 1
            b = int(np.searchsorted(r.times, act.max(), side="left"))
            a, b = max(a, 0), min(b, r.n_snapshots - 1)
            if b - a + 1 >= 4:
                lo, hi = a, b
    n = min(4, hi - lo + 1)
    return sorted(set(int(i) for i in np.linspace(lo, hi, n).round()))


@dataclass
class Style:
    """How the figures are written: file format (png, svg, pdf), resolution, the 3D views, a colour range for the
    field."""
    format: str = "png"
    dpi: int = 150
    views: tuple = DEFAULT_VIEWS
    vrange: tuple | None = None


def _save(fig, path: Path, style: Style) -> Path:
    fig.savefig(path, dpi=style.dpi)
    return path


def plot_field(plt, r: Results, name: str, idx: list[int], path: Path, style: Style = Style()) -> Path:
    unit = r.f["fields"][name].attrs.get("units", "mV")
    data = [r.field(name, i) for i in idx]
    label = f"{LABELS.get(name, name)} ({unit})"
    if r.dim == 1:
        fig, ax = plt.subplots(figsize=(7, 4))
        for i, a in zip(idx, data):
            ax.plot(r.axes[0], a, label=f"t = {r.times[i]:g} ms")
        ax.set_xlabel("x (cm)")
        ax.set_ylabel(label)
        legend_outside(ax)
        ax.set_title(f"{name_of(r)}: {LABELS.get(name, name)}", fontsize=10)
    else:
        pics = [planes(r, a, style.views) for a in data]          # [time][view]
        lo, hi, cmap = colour_range(name, [p.values for row in pics for p in row], style.vrange)
        found = marks(r)
        n_t, n_v = len(pics), len(pics[0])
        if n_v > 1:                                                # 3D: a row per view, a column per time
            rows, cols = n_v, n_t
        else:                                                      # one picture per time, four to a row
            cols = min(n_t, 4)
            rows = -(-n_t // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 1.2, 3.4 * rows), squeeze=False,
                                 constrained_layout=True)
        if n_v > 1:
            cells = [(axes[v, t], idx[t], pics[t][v]) for v in range(n_v) for t in range(n_t)]
        else:
            cells = list(zip(axes.flat, idx, (row[0] for row in pics)))
        for ax in axes.flat[len(cells):]:
            ax.set_visible(False)
        for ax, i, p in cells:
            im = ax.imshow(p.values, origin="lower", extent=p.extent, vmin=lo, vmax=hi, cmap=cmap,
                           interpolation="nearest")
            _draw_marks(ax, r, p, found)
            _map_axes(ax, p, f"t = {r.times[i]:g} ms{p.note}")
        for row in axes:                  # one scale: a bar beside the last panel of each row
            shown = [ax for ax in row if ax.get_visible()]
            colorbar(fig, shown[-1].images[0], shown[-1], label)
        fig.suptitle(f"{name_of(r)}: {LABELS.get(name, name)}", fontsize=11)
    _save(fig, path, style)
    plt.close(fig)
    return path


def plot_probes(plt, r: Results, path: Path, style: Style = Style()) -> Path | None:
    if not r.probes or r.n_samples == 0:
        return None
    fields = [f for f in ("Vm", "phi_e") if all(f in r.f["probes"][p] for p in r.probes)]
    fig, axes = plt.subplots(len(fields), 1, figsize=(7, 2.8 * len(fields) + 0.6), sharex=True, squeeze=False,
                             constrained_layout=True)
    for ax, fld in zip(axes[:, 0], fields):
        for name in r.probes:
            p = r.probe(name)
            pos = ", ".join(coordinate(x) for x in p["node_position"])
            ax.plot(r.probe_times, p[fld], label=f"{name} ({pos}) cm", lw=1.2)
        ax.set_ylabel(f"{LABELS[fld]} (mV)")
        ax.grid(alpha=0.3)
    legend_outside(axes[0, 0])
    axes[-1, 0].set_xlabel("t (ms)")
    axes[0, 0].set_title(f"{name_of(r)}: probes, every PDE step", fontsize=10)
    _save(fig, path, style)
    plt.close(fig)
    return path


def has_twelve_leads(r: Results) -> bool:
    return all(n in r.ecg and "lead" in r.f["ecg"][n].attrs for n in TRACES)


def plot_ecg(plt, r: Results, path: Path, style: Style = Style()) -> Path:
    """The pseudo-ECG: electrodes in one panel, leads (if any) in another (the standard 12 and Wilson's terminal
    not: plot_ecg12)."""
    twelve = set(TRACES) if has_twelve_leads(r) else set()
    leads = [n for n in r.ecg if "lead" in r.f["ecg"][n].attrs and n not in twelve]
    groups = [g for g in ([n for n in r.ecg if n not in leads and n not in twelve], leads) if g]
    fig, axes = plt.subplots(len(groups), 1, figsize=(7, 2.8 * len(groups) + 0.6), sharex=True, squeeze=False,
                             constrained_layout=True)
    for ax, names in zip(axes[:, 0], groups):
        for name in names:
            lead = r.f["ecg"][name].attrs.get("lead")
            # the electrode's or the lead's name (its position or definition is in cardiosim inspect); a short
            # definition beside a lead's name
            label = f"{name} = {lead}" if lead is not None and len(str(lead)) <= 20 else name
            ax.plot(r.probe_times, r.ecg_trace(name), label=label, lw=1.2)
        ax.set_ylabel("lead (mV)" if names is leads else r"$\varphi$ at the electrode (mV)")
        ax.set_title("leads (pseudo-ECG)" if names is leads else "electrode potentials (infinite bath)", fontsize=9)
        ax.grid(alpha=0.3)
        legend_outside(ax, ncol=1 if len(names) <= 12 else 2)
    axes[-1, 0].set_xlabel("t (ms)")
    fig.suptitle(f"{name_of(r)}: " + ("pseudo-ECG" if leads else "extracellular potentials at the electrodes")
                 + ", every PDE step", fontsize=10)
    _save(fig, path, style)
    plt.close(fig)
    return path


def plot_ecg12(plt, r: Results, path: Path, style: Style = Style()) -> Path:
    """The standard 12 leads in the printed layout (three rows of four), one voltage scale for all, as on paper."""
    traces = {n: r.ecg_trace(n) for row in LAYOUT for n in row}
    top = max(float(np.nanmax(np.abs(t))) if len(t) and np.isfinite(t).any() else 0.0 for t in traces.values())
    top = 1.1 * top or 1.0
    fig, axes = plt.subplots(len(LAYOUT), len(LAYOUT[0]), figsize=(11, 6.5), sharex=True, sharey=True,
                             squeeze=False, constrained_layout=True)
    for row, names in zip(axes, LAYOUT):
        for ax, name in zip(row, names):
            ax.plot(r.probe_times, traces[name], lw=1.0, color="k")
            ax.set_ylim(-top, top)
            ax.grid(alpha=0.3)
            ax.text(0.02, 0.9, name, transform=ax.transAxes, fontsize=10, fontweight="bold", va="top")
    for ax in axes[-1]:
        ax.set_xlabel("t (ms)")
    for ax in axes[:, 0]:
        ax.set_ylabel("lead (mV)")
    fig.suptitle(f"{name_of(r)}: 12-lead pseudo-ECG (infinite bath, electrodes of ecg.twelve_lead)", fontsize=10)
    _save(fig, path, style)
    plt.close(fig)
    return path


def plot_map(plt, r: Results, name: str, path: Path, isochrones: float | None = None,
             style: Style = Style()) -> Path | None:
    """A map (activation time with isochrones, or APD); None where no node has a value. 3D: a panel per view."""
    a = r.map(name)
    if not np.isfinite(a).any():
        return None
    if "tissue" in r.maps and name != "tissue":
        a = np.where(r.map("tissue") > 0, a, np.nan)          # outside the tissue: blank, not a value
    attrs = r.map_attrs(name)
    unit = attrs.get("units", "ms")
    if name == "activation_time":
        title = f"activation time, first beat (first crossing of {float(attrs.get('threshold', 0.0)):g} mV)"
    elif name == "apd":
        title = f"APD{float(attrs.get('level', 90.0)):g}, first beat"
    elif name == "tissue":
        title = "tissue nodes (tissue.label_file)"
    else:
        title = name
    codes = label_codes(name, a)
    if r.dim == 1:
        fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
        ax.plot(r.axes[0], a, ".-")
        ax.set_xlabel("x (cm)")
        ax.set_ylabel(f"{LABELS.get(name, name)} ({unit})")
        ax.grid(alpha=0.3)
        ax.set_title(f"{name_of(r)}: {title}", fontsize=10)
    else:
        pics = planes(r, a, style.views)
        inside = planes(r, r.map("tissue") > 0, style.views) if "tissue" in r.maps else None
        found = marks(r)
        fig, axes = plt.subplots(1, len(pics), figsize=(6.4 * len(pics), 5.2), squeeze=False,
                                 constrained_layout=True)
        cmap = "plasma" if name == "activation_time" else "magma"
        finite = a[np.isfinite(a)]
        lo, hi = float(finite.min()), float(finite.max())      # one scale for every view: the whole map's
        scale = dict(vmin=lo, vmax=hi if hi > lo else lo + 1.0)
        if codes is not None:                                   # a label map: a colour per value, not a scale
            cmap, norm = discrete(plt, codes)
            scale = dict(norm=norm)
        step = None
        if name == "activation_time":
            step = isochrones or nice_step(hi - lo)
        for n, (ax, p) in enumerate(zip(axes[0], pics)):
            im = ax.imshow(p.values, origin="lower", extent=p.extent, cmap=cmap, interpolation="nearest", **scale)
            head = ""
            ok = p.values[np.isfinite(p.values)]
            if step is not None and ok.size:
                levels = np.arange(np.ceil(ok.min() / step) * step, ok.max() + 1e-9, step)
                if len(levels) and min(p.values.shape) > 1:
                    cs = ax.contour(*p.coords, p.values, levels=levels, colors="white", linewidths=0.8)
                    ax.clabel(cs, fontsize=7, fmt="%g")
                head += f"; isochrones every {step:g} ms"
            missing = np.isnan(p.values) if inside is None else np.isnan(p.values) & inside[n].values
            if not ok.size:
                head += "; no node of this slice has a value"
            elif missing.any() and name in ("activation_time", "apd"):
                head += "; white: not activated" if name == "activation_time" else "; white: not repolarised by the end"
            _draw_marks(ax, r, p, found)
            # The run's name and the slice, what the map is, and the rest each on a line of their own (wrapped):
            # one line of all this is wider than the map (and than its neighbour's in 3D).
            import textwrap
            _map_axes(ax, p, f"{name_of(r)}{p.note}\n{title}" + (f"\n{textwrap.fill(head[2:], 66)}" if head else ""))
        bar = colorbar(fig, im, axes[0, -1], f"{LABELS.get(name, name)} ({unit})")
        if codes is not None:
            names = LABEL_NAMES.get(name, {})
            bar.set_ticks(codes)
            bar.set_ticklabels([names.get(c, str(c)) for c in codes])
            bar.ax.minorticks_off()
            bar.set_label(f"{LABELS.get(name, name)} (label)")
    _save(fig, path, style)
    plt.close(fig)
    return path


def projection(r: Results, a: np.ndarray, view: str) -> Plane:
    """A 3D node array seen along the axis ``view`` names (VIEWS): at each line of sight its least value (of an
    activation map, the earliest along it: what a network on the endocardium is drawn over)."""
    x, y, z = r.axes[0], r.axes[1], r.axes[2]
    axis, (u, v), (cu, cv) = {"z": (0, "xy", (x, y)), "y": (1, "xz", (x, z)), "x": (2, "yz", (y, z))}[view]
    with warnings.catch_warnings():               # an all-NaN line of sight is blank, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        values = np.nanmin(a, axis=axis)
    return Plane(values, (cu[0], cu[-1], cv[0], cv[-1]), (u, v), (cu, cv), f" (projection along {view})",
                 2 - axis)


def purkinje_network(r: Results) -> dict | None:
    """The network of a run with [purkinje] (/purkinje: points (n, 3) cm, edges, activation_time ms); None
    without one."""
    g = r.f.get("purkinje")
    if g is None or not all(k in g for k in ("points", "edges", "activation_time")):
        return None
    return {k: g[k][...] for k in ("points", "edges", "activation_time")}


def plot_purkinje(plt, r: Results, path: Path, style: Style = Style()) -> Path:
    """The network's edges coloured by their activation time over the tissue's activation map, one colour scale
    (ms): 3D a panel per view, the tissue's earliest activation along each line of sight (the network lies on the
    endocardium, inside the wall: a slice would cut it); 2D the map; 1D activation time against x, both."""
    from matplotlib.collections import LineCollection     # matplotlib where a figure is drawn (_pyplot)
    import matplotlib.patheffects as pe
    net = purkinje_network(r)
    pts, edges, act = net["points"], net["edges"], net["activation_time"]
    tissue = r.map("activation_time") if "activation_time" in r.maps else None
    if tissue is not None and "tissue" in r.maps:
        tissue = np.where(r.map("tissue") > 0, tissue, np.nan)
    both = np.concatenate([act[np.isfinite(act)], [] if tissue is None else tissue[np.isfinite(tissue)]])
    lo, hi = (float(both.min()), float(both.max())) if both.size else (0.0, 1.0)
    hi = hi if hi > lo else lo + 1.0
    edge_t = act[edges].mean(axis=1)                   # NaN where either end did not activate
    late = np.isnan(edge_t)
    cmap = plt.get_cmap("plasma")
    title = "Purkinje network and tissue: activation time, one scale"
    if late.any():
        title += f"\n{int(late.sum())} of {len(edges)} network edges not activated (grey)"
    if r.dim == 1:
        fig, ax = plt.subplots(figsize=(8, 4), constrained_layout=True)
        if tissue is not None:
            ax.plot(r.axes[0], tissue, "-", color="0.3", label="tissue")
        ax.plot(pts[:, 0], act, ".", color=cmap(0.6), ms=3, label="network nodes")
        ax.set_xlabel("x (cm)")
        ax.set_ylabel("activation time (ms)")
        ax.grid(alpha=0.3)
        legend_outside(ax)
        ax.set_title(f"{name_of(r)}: {title}", fontsize=10)
        _save(fig, path, style)
        plt.close(fig)
        return path
    views = style.views if r.dim == 3 else (None,)
    fig, axes = plt.subplots(1, len(views), figsize=(6.4 * len(views), 5.6), squeeze=False, constrained_layout=True)
    for ax, view in zip(axes[0], views):
        if r.dim == 3:
            p = projection(r, tissue if tissue is not None else np.full(r.shape[::-1], np.nan), view)
            cols = [i for i in range(3) if i != p.normal]
        else:
            p = planes(r, tissue if tissue is not None else np.full(r.shape[::-1], np.nan))[0]
            cols = [0, 1]
        im = ax.imshow(p.values, origin="lower", extent=p.extent, cmap=cmap, vmin=lo, vmax=hi, alpha=0.55,
                       interpolation="nearest")
        seg = pts[edges][:, :, cols]
        done = LineCollection(seg[~late], array=edge_t[~late], cmap=cmap, linewidths=1.6,
                              path_effects=[pe.Stroke(linewidth=2.6, foreground="black"), pe.Normal()])
        done.set_clim(lo, hi)
        ax.add_collection(done)
        if late.any():
            ax.add_collection(LineCollection(seg[late], colors="0.6", linewidths=1.0))
        _map_axes(ax, p, f"{name_of(r)}{p.note}\n{title}")
    colorbar(fig, im, axes[0, -1], "activation time (ms)")
    _save(fig, path, style)
    plt.close(fig)
    return path


def plot_beats(plt, r: Results, path: Path, style: Style = Style(), most: int = 4) -> Path | None:
    """Activation (top row) and APD (bottom row) of every beat, from the snapshots (Results.beat_maps: as fine as
    output.interval), a column per beat (the first ``most``); 3D: the first view. None where no node beat."""
    b = r.beat_maps(max_beats=most)
    n = b["activation"].shape[0]
    if n == 0:
        return None
    thr, level = r._levels()
    every = float(np.diff(r.times[:2])[0]) if r.n_snapshots > 1 else 0.0
    if r.dim == 1:
        fig, axes = plt.subplots(2, 1, figsize=(7, 6), sharex=True, squeeze=False, constrained_layout=True)
        for k in range(n):
            axes[0, 0].plot(r.axes[0], b["activation"][k], ".-", label=f"beat {k + 1}")
            axes[1, 0].plot(r.axes[0], b["apd"][k], ".-", label=f"beat {k + 1}")
        axes[0, 0].set_ylabel("activation (ms)")
        axes[1, 0].set_ylabel(f"APD{level:g} (ms)")
        axes[1, 0].set_xlabel("x (cm)")
        legend_outside(axes[0, 0])
    else:
        fig, axes = plt.subplots(2, n, figsize=(4.2 * n + 1.2, 7.0), squeeze=False, constrained_layout=True)
        for row, (name, cmap, what) in enumerate((("activation", "plasma", "activation (ms)"),
                                                  ("apd", "magma", f"APD{level:g} (ms)"))):
            for k in range(n):
                p = planes(r, b[name][k], style.views[:1])[0]
                im = axes[row, k].imshow(p.values, origin="lower", extent=p.extent, cmap=cmap,
                                         interpolation="nearest")
                _map_axes(axes[row, k], p, f"beat {k + 1}: {what}{p.note}")
                colorbar(fig, im, axes[row, k], what)
    fig.suptitle(f"{name_of(r)}: every beat, from the snapshots (every {every:g} ms; threshold {thr:g} mV)",
                 fontsize=11)
    _save(fig, path, style)
    plt.close(fig)
    return path


def write_vtu(r: Results, i: int, path: Path) -> Path:
    """Snapshot ``i`` as a VTK unstructured grid (meshio), for pipelines that read VTU rather than XDMF: every node
    a point (cm; x, y, z), the elements (lines, quads, hexahedra) whose corners are all tissue, and as point data
    every field at that time and every map."""
    import meshio
    shape = tuple(len(a) for a in reversed(r.axes))                     # (z,) (y,) x
    grids = np.meshgrid(*r.axes, indexing="ij")                         # x first
    points = np.zeros((int(np.prod(shape)), 3))
    for d, g in enumerate(grids):
        points[:, d] = g.transpose(*reversed(range(r.dim))).ravel()      # natural order: x fastest
    index = np.arange(points.shape[0]).reshape(shape)
    # an element by its lowest corner; VTK's corner order for quads and hexahedra
    corners = {1: [(0,)], 2: [(0, 0), (0, 1), (1, 1), (1, 0)],
               3: [(0, 0, 0), (0, 0, 1), (0, 1, 1), (0, 1, 0), (1, 0, 0), (1, 0, 1), (1, 1, 1), (1, 1, 0)]}[r.dim]
    if r.dim == 1:
        corners = [(0,), (1,)]
    cells = np.stack([index[tuple(slice(c, n - 1 + c) for c, n in zip(corner, shape))].ravel()
                      for corner in corners], axis=1)
    if "tissue" in r.maps:
        inside = (r.map("tissue") > 0).ravel()
        cells = cells[inside[cells].all(axis=1)]
    data = {name: np.asarray(r.field(name, i), dtype=float).ravel() for name in r.fields}
    data.update({f"map_{name}": np.asarray(r.map(name), dtype=float).ravel() for name in r.maps})
    kind = {1: "line", 2: "quad", 3: "hexahedron"}[r.dim]
    meshio.write(path, meshio.Mesh(points, [(kind, cells)], point_data=data), file_format="vtu")
    return path


# Colours of the junction faces in the layout picture, by face type code (cardiosim.tissue.microscopic.FACE_TYPES).
JUNCTION_COLOURS = {2: ("tab:red", "plicate (G_p)"), 3: ("tab:orange", "interplicate (G_i)"),
                    4: ("tab:blue", "combined (G_c)"), 5: ("0.6", "no junction"),
                    6: ("black", "non-conducting cell")}


def plot_layout(plt, r: Results, path: Path, style: Style = Style()) -> Path:
    """The myocyte layout: volumes shaded by myocyte, junction faces as coloured segments (2D; 3D: mid-z plane;
    1D: a one-row strip)."""
    t = r.f["tissue"]
    cid, dead = t["cell_id"][()], t["non_conducting"][()].astype(bool)
    kinds = [t[f"face_type_{a}"][()] for a in "xyz"[: r.dim]]
    if r.dim == 1:
        cid, dead, kinds = cid[None], dead[None], [kinds[0][None], np.full((1, cid.size), 0, np.int8)]
    elif r.dim == 3:
        k = cid.shape[0] // 2
        cid, dead, kinds = cid[k], dead[k], [kinds[0][k], kinds[1][k]]
    # Neighbouring myocytes in different shades: a checkerboard of (row, column) parity is not available from
    # ids alone, so shade by id modulo a few levels.
    shade = (cid % 4).astype(float)
    shade[dead] = np.nan
    h = r.spacing
    hy = h[1] if r.dim > 1 else h[0]
    ny, nx = cid.shape
    fig, ax = plt.subplots(figsize=(min(12, 2 + 10 * nx / max(nx, ny)), min(9, 2 + 7 * ny / max(nx, ny))),
                           constrained_layout=True)
    cmap = plt.get_cmap("Pastel2").copy()
    cmap.set_bad("0.25")
    ax.imshow(shade, origin="lower", extent=(0, nx * h[0], 0, ny * hy), cmap=cmap, interpolation="nearest",
              vmin=0, vmax=7)
    from matplotlib.collections import LineCollection
    # Only faces between two myocytes (a non-conducting myocyte's inner faces are not drawn).
    between_x = np.zeros(cid.shape, bool)
    between_x[:, :-1] = cid[:, 1:] != cid[:, :-1]
    between_y = np.zeros(cid.shape, bool)
    between_y[:-1] = cid[1:] != cid[:-1]
    kinds = [np.where(between_x, kinds[0], 0), np.where(between_y, kinds[1], 0)]
    handles = []
    for code, (colour, label) in JUNCTION_COLOURS.items():
        segs = []
        jj, ii = np.nonzero(kinds[0] == code)                       # x faces: vertical segments at x = (i+1) h
        segs += [((x, y), (x, y + hy)) for x, y in zip((ii + 1) * h[0], jj * hy)]
        jj, ii = np.nonzero(kinds[1] == code)                       # y faces: horizontal segments
        segs += [((x, y), (x + h[0], y)) for x, y in zip(ii * h[0], (jj + 1) * hy)]
        if segs:
            ax.add_collection(LineCollection(segs, colors=colour, linewidths=1.2 if nx * ny < 20000 else 0.4))
            handles.append(plt.Line2D([], [], color=colour, label=label))
    ax.set_xlim(0, nx * h[0])
    ax.set_ylim(0, ny * hy)
    ax.set_aspect("equal")
    ax.set_xlabel("x (cm)")
    ax.set_ylabel("y (cm)" if r.dim > 1 else "")
    if r.dim == 1:
        ax.set_yticks([])
    if handles:
        # a strip is too thin to hold the legend: it goes below the axis there
        where = dict(loc="upper center", bbox_to_anchor=(0.5, -2.2), ncol=len(handles)) if ny == 1 else \
            dict(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)    # beside the map, not on it
        ax.legend(handles=handles, fontsize=7, framealpha=0.8, **where)
    note = " (mid z plane)" if r.dim == 3 else ""
    ax.set_title(f"{r.path.name}: myocyte layout{note}, {int(np.unique(cid[~dead]).size)} myocytes", fontsize=10)
    _save(fig, path, style)
    plt.close(fig)
    return path


MAX_ISOCHRONES = 200    # more lines than this are a black smear, and contouring them takes minutes


def _check_isochrones(r: Results, spacing: float | None) -> None:
    if spacing is None or "activation_time" not in r.maps:
        return
    a = r.map("activation_time")
    ok = a[np.isfinite(a)]
    span = float(ok.max() - ok.min()) if ok.size else 0.0
    if span / spacing > MAX_ISOCHRONES:
        raise UserError(f"--isochrones {spacing:g}: gives {span / spacing:.3g} lines over the {span:g} ms of "
                        f"activation; at most {MAX_ISOCHRONES} are drawn, so use a spacing >= "
                        f"{span / MAX_ISOCHRONES:.3g} ms")


def _writable_dir(out: Path) -> None:
    import os
    parent = out
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
        raise UserError(f"--out {out}: cannot write in {parent} (not a writable directory)")


def plot_main(args, extras=None) -> int:
    """``cardiosim plot``. ``extras(r, args, out, stem, style, idx)``: more files to write, as [(kind, path,
    draw(plt, path))], checked with the others before any is written (cardiosim.output.movie.extras)."""
    if args.isochrones is not None and not args.isochrones > 0:
        raise UserError(f"--isochrones {args.isochrones:g}: must be > 0 (ms)")
    if not 10 <= args.dpi <= 1200:
        raise UserError(f"--dpi {args.dpi}: must be 10 to 1200")
    if args.range is not None and not args.range[0] < args.range[1]:
        raise UserError(f"--range {args.range[0]:g} {args.range[1]:g}: the first must be below the second")
    style = Style(format=args.format, dpi=args.dpi, views=tuple(dict.fromkeys(args.view or DEFAULT_VIEWS)),
                  vrange=tuple(args.range) if args.range else None)
    out = Path(args.out) if args.out else None
    if out is not None:
        check_name("--out", out)
    if out is not None and out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    with Results(args.file) as r:
        r.check_field(args.field)
        if args.view and r.dim != 3:
            raise UserError(f"--view: for 3D results only; {r.path} is {r.dim}D")
        idx = field_times(r, args.times)          # every check before anything is written
        _check_isochrones(r, args.isochrones)
        out = out or r.path.parent
        _writable_dir(out)
        stem, ext = r.path.stem, style.format
        # What will be drawn, named up front so that every name is checked before the first file is written.
        plan = [("field", args.field, out / f"{stem}_{args.field}.{ext}")]
        if r.probes and r.n_samples:
            plan.append(("probes", None, out / f"{stem}_probes.{ext}"))
        if r.ecg and r.n_samples:
            plan.append(("ecg", None, out / f"{stem}_ecg.{ext}"))
            if has_twelve_leads(r):
                plan.append(("ecg12", None, out / f"{stem}_ecg12.{ext}"))
        if "tissue" in r.f:
            plan.append(("layout", None, out / f"{stem}_layout.{ext}"))
        if purkinje_network(r) is not None:
            plan.append(("purkinje", None, out / f"{stem}_purkinje.{ext}"))
        if args.beats:
            plan.append(("beats", None, out / f"{stem}_beats.{ext}"))
        if args.vtu:
            plan += [("vtu", i, out / f"{stem}_{i:04d}.vtu") for i in idx]
        skipped = []
        for name in r.maps:
            if np.isfinite(r.map(name)).any():
                plan.append(("map", name, out / f"{stem}_{name.replace('_time', '')}.{ext}"))
            else:
                skipped.append(f"{name}: no node has a value (" + ("none activated" if name == "activation_time"
                               else "none repolarised by the end of the run; run longer") + ")")
        more = extras(r, args, out, stem, style, idx) if extras else []
        kind = "png" if ext == "png" else "figure"
        check_writes([Target("--out", p, "vtu" if what == "vtu" else kind) for what, _, p in plan]
                     + [Target("--out", p, k) for k, p, _ in more], {"the result file": r.path}, args.overwrite)
        plt = _pyplot()
        written = []
        try:
            out.mkdir(parents=True, exist_ok=True)
            for kind, name, p in plan:
                if kind == "field":
                    written.append(plot_field(plt, r, name, idx, p, style))
                elif kind == "probes":
                    written.append(plot_probes(plt, r, p, style))
                elif kind == "ecg":
                    written.append(plot_ecg(plt, r, p, style))
                elif kind == "ecg12":
                    written.append(plot_ecg12(plt, r, p, style))
                elif kind == "layout":
                    written.append(plot_layout(plt, r, p, style))
                elif kind == "vtu":
                    written.append(write_vtu(r, name, p))
                elif kind == "beats":
                    written.append(plot_beats(plt, r, p, style))
                elif kind == "purkinje":
                    written.append(plot_purkinje(plt, r, p, style))
                else:
                    written.append(plot_map(plt, r, name, p, args.isochrones, style))
            for _, p, draw in more:
                written.append(draw(plt, p))
        except OSError as e:
            where = e.filename or out
            raise UserError(f"--out {out}: cannot write {where} ({io_reason(e)}); "
                            f"{len(written)} figure(s) written before") from None
    for p in written:
        if p is not None:
            print(p)
    for why in skipped:
        print(f"no picture of {why}")
    return 0

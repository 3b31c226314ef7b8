"""Arrhythmia figures of a result file (``cardiosim plot --phase / --tips / --dominant-frequency``) and the same
analysis as arrays for Python (cardiosim.analysis.arrhythmia on a file's snapshots).

The snapshots of a field are read whole (memory: snapshots × nodes × 8 B; 3D: one plane, the first of
``--view``), the evenly spaced ones only (a run's last snapshot, at its end, may come sooner). Nodes whose field
varies by less than a tenth of the field's whole range over the run (tissue at rest, outside the tissue) have no
phase, so that noise there is not taken for singularities.

* ``<stem>_phase.png``: the Hilbert phase at the chosen snapshot times, the phase singularities marked (white
  circles: charge +1, black triangles: -1).
* ``<stem>_tips.png`` and ``<stem>_tips.csv``: the tips of every snapshot linked into tracks (a tip continues the
  nearest track of the same charge within :func:`max_step`), drawn coloured by time; the table has one row per
  detection: ``track,t_ms,x_cm,y_cm,charge``.
* ``<stem>_dominant_frequency.png``: the dominant frequency of each node (Hz; the resolution, one frequency bin, in
  the title) and its cycle length (ms: the median interval between its activations at the run's threshold).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cardiosim.analysis import arrhythmia
from cardiosim.output.plot import LABELS, Plane, Style, colorbar, name_of, planes
from cardiosim.output.results import Results
from cardiosim.runtime.errors import UserError
from cardiosim.runtime.files import whole
from cardiosim.runtime.resources import check_fits

MIN_SNAPSHOTS = 8           # evenly spaced snapshots a phase or a spectrum needs
WORK = 6                    # arrays of the snapshots' size an analysis holds at once (values, centred, analytic x 2,
                            # phase, a mask)
QUIET = 0.1                 # a node varying by less than this share of the field's range has no phase
TIP_SPEED = 0.05            # cm/ms: the fastest a tip is followed (0.5 m/s, about a plane wave's speed)
CSV_HEADER = "track,t_ms,x_cm,y_cm,charge"
PAD = 8                     # the spectra zero-padded to 8 times their length: the peak placed to an eighth of a bin


@dataclass
class Series:
    """A field's evenly spaced snapshots in one plane: times (ms), values (time, rows, columns) and the plane
    (cardiosim.output.plot.Plane: extent, axes, coordinates, note) of the first snapshot."""
    t: np.ndarray
    values: np.ndarray
    plane: Plane


def window_of(r: Results, window=None, what: str = "--phase") -> slice:
    """The evenly spaced snapshots within ``window`` (start, end ms; None: all of them), at least MIN_SNAPSHOTS of
    them, as a slice of the snapshot indices; ``what``: the option named in a refusal."""
    n = arrhythmia.uniform(r.times)
    lo, hi = 0, n
    if window is not None:
        start, end = window
        if not start < end:
            raise UserError(f"--window {start:g} {end:g}: the start must be before the end (ms)")
        tol = 1e-9 * max(1.0, abs(float(r.times[-1]))) if n else 0.0
        lo = int(np.searchsorted(r.times[:n], start - tol, side="left"))
        hi = int(np.searchsorted(r.times[:n], end + tol, side="right"))
    if hi - lo < MIN_SNAPSHOTS:
        within = f" within --window {window[0]:g} {window[1]:g} ms" if window is not None else ""
        more = "a longer window or a smaller output.interval" if window is not None else "a smaller output.interval"
        raise UserError(f"{what}: needs at least {MIN_SNAPSHOTS} evenly spaced snapshots{within}; {r.path} has "
                        f"{max(hi - lo, 0)} ({more} gives more)")
    return slice(lo, hi)


def check(r: Results, field: str, views, what: str, window=None) -> slice:
    """Every check of an analysis before anything is read or written: the field, the snapshots (window_of), and
    the memory it will hold (the whole record for the phase: it is taken over all of it). The window's slice."""
    r.check_field(field)
    w = window_of(r, window, what)
    n = arrhythmia.uniform(r.times) if what in ("--phase", "--tips") else w.stop - w.start
    shape = r.f["fields"][field].shape[1:]
    drop = {"z": 0, "y": 1, "x": 2}[tuple(views)[0]] if r.dim == 3 else None       # the plane's normal, 3D
    plane_nodes = int(np.prod([k for d, k in enumerate(shape) if d != drop]))
    check_fits(WORK * n * plane_nodes * 8.0, f"{what}: {n} snapshots of {plane_nodes} nodes",
               "analyse fewer snapshots (--window) or a plane of fewer nodes")
    return w


def series(r: Results, field: str = "Vm", views=("z",), what: str = "--phase", window=None) -> Series:
    """The field over the evenly spaced snapshots within ``window`` (start, end ms; None: all): 2D whole, 3D in the
    middle plane of the first of ``views``; 1D as rows of one. ``what``: the option named in a refusal."""
    w = check(r, field, views, what, window)
    ds = r.f["fields"][field]
    if r.dim == 1:
        x = r.axes[0]
        plane = Plane(ds[0][None], (x[0], x[-1], 0, 0), ("x", ""), (x, np.zeros(1)), "")
        return Series(r.times[w], ds[w][:, None, :], plane)
    plane = planes(r, ds[0], tuple(views)[:1])[0]
    if r.dim == 2:
        values = ds[w]
    else:
        k = {2: ds.shape[1] // 2, 1: ds.shape[2] // 2, 0: ds.shape[3] // 2}[plane.normal]
        values = {2: lambda: ds[w, k], 1: lambda: ds[w, :, k, :], 0: lambda: ds[w, :, :, k]}[plane.normal]()
    return Series(r.times[w], np.asarray(values, dtype=float), plane)


def phase_of(s: Series) -> np.ndarray:
    """The Hilbert phase of a series (radians), NaN at nodes that hardly vary (QUIET)."""
    v = s.values
    with np.errstate(invalid="ignore"):
        swing = np.nanmax(v, axis=0) - np.nanmin(v, axis=0)
    finite = swing[np.isfinite(swing)]
    quiet = ~(swing >= QUIET * (finite.max() if finite.size else 0.0)) | ~(swing > 0)
    ph = arrhythmia.phase(np.where(quiet[None], np.nan, v))
    ph[:, quiet] = np.nan
    return ph


def phases(r: Results, field: str = "Vm", views=("z",), what: str = "--phase", window=None):
    """(the series within ``window``, its phase, the snapshots they are): the phase of the whole record (the evenly
    spaced snapshots) cut to the window, since a Hilbert transform of the window alone is wrong near its ends, and
    without a quarter of the dominant cycle at either end of the record (cardiosim.analysis.arrhythmia.trusted)."""
    w = window_of(r, window, what)
    full = series(r, field, views, what)
    df, _ = arrhythmia.dominant_frequency(full.t, full.values, pad=PAD)
    ok = df[np.isfinite(df)]
    period = 1000.0 / float(np.median(ok)) / float(full.t[1] - full.t[0]) if ok.size else np.nan   # samples
    edge = arrhythmia.trusted(len(full.t), period)
    w = slice(max(w.start, edge.start), min(w.stop, edge.stop))
    if w.stop - w.start < MIN_SNAPSHOTS:
        have = max(w.stop - w.start, 0)
        raise UserError(f"{what}: needs at least {MIN_SNAPSHOTS} evenly spaced snapshots away from the record's "
                        f"ends (a quarter of a cycle at either end is left out); {r.path} has {have} there")
    return Series(full.t[w], full.values[w], full.plane), phase_of(full)[w], w


def max_step(s: Series) -> float:
    """How far (cm) a tip may move between two snapshots and still be the same tip: TIP_SPEED over the
    snapshots' spacing, at least three node spacings."""
    (xs, ys) = s.plane.coords
    h = max(float(np.diff(xs[:2])[0]) if len(xs) > 1 else 0.0, float(np.diff(ys[:2])[0]) if len(ys) > 1 else 0.0)
    dt = float(s.t[1] - s.t[0])
    return max(3 * h, TIP_SPEED * dt)


def tracks(r: Results, field: str = "Vm", views=("z",), max_distance: float | None = None, max_gap: int = 1,
           window=None):
    """The tips of every evenly spaced snapshot (within ``window``), linked (cardiosim.analysis.arrhythmia.link_tips):
    (tracks, the series they come from, the detections of each snapshot, the phase)."""
    s, ph, _ = phases(r, field, views, "--tips", window)
    x, y = s.plane.coords
    found = [arrhythmia.tips(p, x, y) for p in ph]
    linked = arrhythmia.link_tips(s.t, found, max_step(s) if max_distance is None else max_distance, max_gap)
    return linked, s, found, ph


def dominant_frequency(r: Results, field: str = "Vm", views=("z",), band=(0.5, 50.0), window=None):
    """(dominant frequency (Hz) per node of the plane, the bin width (Hz), cycle length (ms) per node, the
    series), over the snapshots within ``window``."""
    s = series(r, field, views, "--dominant-frequency", window)
    df, resolution = arrhythmia.dominant_frequency(s.t, s.values, band, pad=PAD)
    threshold = r._levels()[0] if field == "Vm" else float(np.nanmean(s.values))
    cl = arrhythmia.cycle_length(arrhythmia.activations(s.t, s.values, threshold))
    return df, resolution, cl, s


# -- figures ---------------------------------------------------------------------------------------------------
def _tip_marks(ax, det: np.ndarray) -> None:
    for q, marker, colour in ((1, "o", "white"), (-1, "^", "black")):
        sel = det[det[:, 2] == q]
        if len(sel):
            ax.plot(sel[:, 0], sel[:, 1], marker, ms=6, mfc=colour, mec="red", mew=1.2, ls="none")


def _axes(ax, p: Plane, title: str) -> None:
    ax.set_xlabel(f"{p.labels[0]} (cm)")
    ax.set_ylabel(f"{p.labels[1]} (cm)")
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=9)


def plot_phase(plt, r: Results, idx: list[int], path: Path, style: Style = Style(), field: str = "Vm",
               window=None) -> Path:
    """The phase at snapshots ``idx`` (those among the evenly spaced ones within ``window``; none of them: the
    middle one), singularities marked."""
    s, ph, w = phases(r, field, style.views, "--phase", window)
    x, y = s.plane.coords
    idx = [i - w.start for i in idx if w.start <= i < w.stop] or [len(s.t) // 2]
    cols = min(len(idx), 4)
    rows = -(-len(idx) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 1.2, 3.6 * rows + 0.8), squeeze=False,
                             constrained_layout=True)
    for ax in axes.flat[len(idx):]:
        ax.set_visible(False)
    for ax, i in zip(axes.flat, idx):
        im = ax.imshow(ph[i], origin="lower", extent=s.plane.extent, cmap="twilight", vmin=-np.pi, vmax=np.pi,
                       interpolation="nearest")
        det = arrhythmia.tips(ph[i], x, y)
        _tip_marks(ax, det)
        _axes(ax, s.plane, f"t = {s.t[i]:g} ms{s.plane.note}\n{len(det)} phase singularit"
                           + ("y" if len(det) == 1 else "ies"))
    for row in axes:                      # one scale: a bar beside the last panel of each row, as tall as it
        shown = [ax for ax in row if ax.get_visible()]
        if shown:
            colorbar(fig, im, shown[-1], "phase (rad)").set_ticks([-np.pi, 0, np.pi], labels=["-π", "0", "π"])
    fig.suptitle(f"{name_of(r)}: phase of {LABELS.get(field, field)} (Hilbert transform of the signal minus its "
                 f"mean, {s.t[0]:g} to {s.t[-1]:g} ms); ○ charge +1, △ -1", fontsize=10)
    fig.savefig(path, dpi=style.dpi)
    plt.close(fig)
    return path


def tips_table(found_tracks) -> str:
    """The tracks as CSV text: one row per detection (track number, t ms, x cm, y cm, charge)."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    out.write(CSV_HEADER + "\n")
    for n, tr in enumerate(found_tracks):
        for t, x, y in zip(tr.t, tr.x, tr.y):
            w.writerow([n, f"{t:.6g}", f"{x:.6g}", f"{y:.6g}", tr.charge])
    return out.getvalue()


def write_tips(r: Results, path: Path, field: str = "Vm", views=("z",), window=None) -> Path:
    """The tip tracks as a CSV table (:func:`tips_table`), whole or not at all."""
    with whole(path, "--tips") as tmp:
        tmp.write_text(tips_table(tracks(r, field, views, window=window)[0]))
    return path


def _draw_tracks(plt, ax, s: Series, ph: np.ndarray, lasting, norm) -> None:
    from matplotlib.collections import LineCollection
    ax.imshow(ph[-1], origin="lower", extent=s.plane.extent, cmap="twilight", vmin=-np.pi, vmax=np.pi,
              interpolation="nearest", alpha=0.35)
    for tr in lasting:
        pts = np.column_stack([tr.x, tr.y])
        lc = LineCollection(np.stack([pts[:-1], pts[1:]], axis=1), cmap="plasma", norm=norm, linewidths=1.8)
        lc.set_array(0.5 * (tr.t[:-1] + tr.t[1:]))
        ax.add_collection(lc)
        ax.plot(tr.x[:1], tr.y[:1], "o" if tr.charge > 0 else "^", ms=5, mfc="white", mec="black")


def plot_tips(plt, r: Results, path: Path, style: Style = Style(), field: str = "Vm", window=None) -> Path:
    """The tip tracks (seen in more than one snapshot) over the plane, coloured by time, on the phase of the last
    snapshot; beside it the same zoomed on the tracks, the nodes' spacing as a grid."""
    found_tracks, s, _, ph = tracks(r, field, style.views, window=window)
    lasting = [tr for tr in found_tracks if len(tr.t) > 1]
    fig, axes = plt.subplots(1, 2, figsize=(11.5, 5.4), constrained_layout=True)
    norm = plt.Normalize(float(s.t[0]), float(s.t[-1]))
    (xs, ys), (x0, x1, y0, y1) = s.plane.coords, s.plane.extent
    h = float(xs[1] - xs[0])
    for ax in axes:
        _draw_tracks(plt, ax, s, ph, lasting, norm)
    axes[1].set_xticks(xs, minor=True)                 # (setting ticks widens the limits: before the limits)
    axes[1].set_yticks(ys, minor=True)
    axes[1].grid(which="minor", color="0.6", lw=0.3)
    for ax in axes:
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
    if lasting:
        px, py = np.concatenate([tr.x for tr in lasting]), np.concatenate([tr.y for tr in lasting])
        half = max(px.max() - px.min(), py.max() - py.min(), 10 * h) / 2 + 2 * h
        cx, cy = (px.max() + px.min()) / 2, (py.max() + py.min()) / 2
        axes[1].set_xlim(cx - half, cx + half)
        axes[1].set_ylim(cy - half, cy + half)
        axes[0].add_patch(plt.Rectangle((cx - half, cy - half), 2 * half, 2 * half, fill=False, ec="black", lw=0.8))
    colorbar(fig, plt.cm.ScalarMappable(norm=norm, cmap="plasma"), axes[1], "t (ms)")
    longest = max((tr.lifetime for tr in found_tracks), default=0.0)
    _axes(axes[0], s.plane, f"{len(found_tracks)} track(s), {len(lasting)} seen in more than one snapshot, the "
                            f"longest {longest:g} ms")
    _axes(axes[1], s.plane, "zoomed on the tracks; grid: the nodes")
    fig.suptitle(f"{name_of(r)}: tips of the phase singularities{s.plane.note}, {s.t[0]:g} to {s.t[-1]:g} ms, "
                 f"every {s.t[1] - s.t[0]:g} ms (start: ○ +1, △ -1)", fontsize=10)
    fig.savefig(path, dpi=style.dpi)
    plt.close(fig)
    return path


def plot_dominant_frequency(plt, r: Results, path: Path, style: Style = Style(), field: str = "Vm",
                            window=None) -> Path:
    """The dominant-frequency map and the cycle-length map side by side (1D: curves over x)."""
    df, resolution, cl, s = dominant_frequency(r, field, style.views, window=window)
    ok = np.isfinite(df)
    med = float(np.median(df[ok])) if ok.any() else np.nan
    cls = cl[np.isfinite(cl)]
    med_cl = float(np.median(cls)) if cls.size else np.nan
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.6), squeeze=False, constrained_layout=True)
    for ax, a, what, cmap in ((axes[0, 0], df, "dominant frequency (Hz)", "viridis"),
                              (axes[0, 1], cl, "cycle length (ms)", "cividis")):
        if r.dim == 1:
            ax.plot(s.plane.coords[0], a[0], ".-")
            ax.set_xlabel("x (cm)")
            ax.set_ylabel(what)
            ax.grid(alpha=0.3)
            ax.set_title(what, fontsize=9)
        else:
            im = ax.imshow(a, origin="lower", extent=s.plane.extent, cmap=cmap, interpolation="nearest")
            colorbar(fig, im, ax, what)
            _axes(ax, s.plane, f"{what}{s.plane.note}")
    fig.suptitle(f"{name_of(r)}: {LABELS.get(field, field)} from {s.t[0]:g} to {s.t[-1]:g} ms ({len(s.t)} "
                 f"snapshots), median dominant frequency {med:.3g} Hz\n(frequency bins {resolution:.3g} Hz wide, the "
                 f"peak placed to 1/{PAD} bin by zero padding); median cycle length {med_cl:.4g} ms",
                 fontsize=10)
    fig.savefig(path, dpi=style.dpi)
    plt.close(fig)
    return path

"""``cardiosim plot`` of a file of ``cardiosim cell`` (cardiosim.output.cell_results; matplotlib, no MPI, no
PETSc), beside the file or into ``--out``, named ``<stem>_<what>.png`` (``--format``, ``--dpi``):

* a paced trace: ``<stem>_trace.png``, V against time and, below it, each ``--trace`` name (a state or a recorded
  intermediate; default Cai where the model has it), a panel each, in its unit.
* a restitution: ``<stem>_restitution.png``, APD90 of S2 against the diastolic interval and against the coupling
  interval, the S2 pulses that did not capture marked on the axis; ``<stem>_restitution_traces.png``, V of each
  S1–S2 pair.
* a population: ``<stem>_population.png``, a histogram per biomarker of the cells kept by the calibration filter
  (--keep) and of those it rejected, stacked, its ranges shaded; ``<stem>_population_traces.png``, the recorded beat
  of every cell, kept ones in colour, rejected ones grey.
* a concentration-response series: ``<stem>_concentration.png``, each biomarker of the last beat against the
  concentration; ``<stem>_concentration_traces.png``, the last beat at each concentration.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cardiosim.output.cell_results import POPULATION, RESTITUTION, SERIES, TRACE, WHAT, CellFile
from cardiosim.output.plot import Style, _pyplot, _save, _writable_dir, colorbar, legend_outside
from cardiosim.runtime.errors import UserError, io_reason
from cardiosim.runtime.files import Target, check_name, check_writes

CALCIUM = ("Cai", "Ca_i", "cai", "Ca_in")       # what a model's cytosolic calcium is called, by default drawn
MOST_TRACES = 200                              # lines of each kind drawn in a population's traces (a sample)


def _title(c: CellFile, what: str) -> str:
    return f"{c.model}: {what}"


def _beats_figure(plt, c: CellFile):
    """The file's table (rows, units), its recorded beats (t, v) and one wide axes to draw them on (fig, ax)."""
    rows, units = c.table()
    t, v = c.traces()
    fig, ax = plt.subplots(figsize=(8.5, 4.2), constrained_layout=True)
    return rows, units, t, v, fig, ax


def _finish(plt, fig, c: CellFile, what: str, path: Path, style: Style, over=None) -> Path:
    """The figure titled with the model and ``what`` (over the whole figure, or over its one axes ``over``), saved
    and closed."""
    (over.set_title if over is not None else fig.suptitle)(_title(c, what), fontsize=10)
    _save(fig, path, style)
    plt.close(fig)
    return path


def plot_trace(plt, c: CellFile, names: list[str], path: Path, style: Style) -> Path:
    """V against time, then each of ``names`` below it (shared time axis)."""
    shown = [c.names()[0], *names]
    fig, axes = plt.subplots(len(shown), 1, figsize=(8, 2.4 * len(shown) + 0.8), sharex=True, squeeze=False,
                             constrained_layout=True)
    for ax, name in zip(axes[:, 0], shown):
        t, v, unit = c.series(name)
        ax.plot(t, v, lw=1.2, color="k" if name == shown[0] else None)
        ax.set_ylabel(f"{name} ({unit.split(' (')[0] or '1'})")
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("t (ms)")
    a = c.attrs
    what = (f"{a.get('beats', '?')} beat(s) every {a['period']:g} ms, {a.get('integrator', '?')} at dt {a['dt']:g} ms"
            + (", stopped early" if a.get("error") else ""))
    return _finish(plt, fig, c, what, path, style)


def _family(plt, fig, ax, t, rows, values, what: str, unit: str) -> None:
    """One trace per row, coloured by its value (a colour scale); a legend where there are at most 12."""
    cmap = plt.get_cmap("viridis")
    order = np.argsort(values)
    span = (float(np.min(values)), float(np.max(values)))
    for k, i in enumerate(order):
        share = 0.5 if span[1] == span[0] else (values[i] - span[0]) / (span[1] - span[0])
        ax.plot(t, rows[i], lw=1.0, color=cmap(0.9 * share), label=f"{what} = {values[i]:g}")
    if len(values) <= 12:
        legend_outside(ax, title=f"{what} ({unit})")
    else:
        from matplotlib.cm import ScalarMappable   # matplotlib is optional: loaded when a figure is drawn
        from matplotlib.colors import Normalize
        bar = ScalarMappable(Normalize(span[0], span[1] + (span[1] == span[0])), cmap)
        colorbar(fig, bar, ax, f"{what} ({unit})")


def plot_restitution(plt, c: CellFile, path: Path, style: Style) -> Path:
    """APD90 of S2 against DI and against CI; an S2 that did not capture is an x on the horizontal axis."""
    rows, _ = c.table()
    ok = rows["captured"] > 0
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True, squeeze=False, constrained_layout=True)
    for ax, x, name in zip(axes[0], ("DI", "CI"), ("diastolic interval DI", "coupling interval CI")):
        order = np.argsort(rows[x][ok])
        ax.plot(rows[x][ok][order], rows["APD90_S2"][ok][order], "o-", color="tab:blue", label="APD90 of S2")
        ax.axhline(rows["APD90_S1"][0], ls="--", lw=0.8, color="0.4", label="APD90 of the last S1")
        if (~ok).any():
            ax.plot(rows[x][~ok], np.full((~ok).sum(), 0.02), "x", color="tab:red", transform=ax.get_xaxis_transform(),
                    clip_on=False, label="S2 not captured")
        ax.set_xlabel(f"{name} (ms)")
        ax.grid(alpha=0.3)
    axes[0, 0].set_ylabel("APD90 (ms)")
    legend_outside(axes[0, 1])
    what = (f"S1-S2 restitution, S1 every {c.attrs['period']:g} ms after {c.attrs['prepace']} S1 beats; "
            f"{int(ok.sum())} of {len(rows)} S2 captured")
    return _finish(plt, fig, c, what, path, style)


def plot_family(plt, c: CellFile, path: Path, style: Style) -> Path:
    """V of each coupling interval (restitution) or concentration (series), coloured by it."""
    rows, units, t, v, fig, ax = _beats_figure(plt, c)
    if c.kind == RESTITUTION:
        _family(plt, fig, ax, t, v, rows["CI"], "CI", "ms")
        ax.set_xlabel("t (ms, from the last S1 onset)")
        what = "V of each S1-S2 pair"
    else:
        _family(plt, fig, ax, t, v, rows["concentration"], "C", units.get("concentration", ""))
        ax.set_xlabel("t (ms, from the last beat's onset)")
        what = "the last beat at each concentration"
    ax.set_ylabel("V (mV)")
    ax.grid(alpha=0.3)
    return _finish(plt, fig, c, what, path, style, over=ax)


BIOMARKERS = ("APD90", "APD50", "V_rest", "V_peak", "dVdt_max", "Cai_peak")


def _grid(plt, n: int, width: float = 3.6):
    cols = min(n, 3)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols + 1.6, 3.0 * rows + 0.6), squeeze=False,
                             constrained_layout=True)
    for ax in axes.flat[n:]:
        ax.set_visible(False)
    return fig, axes.flat[:n]


def plot_population(plt, c: CellFile, path: Path, style: Style) -> Path:
    """A histogram per biomarker: the kept cells and those the filter rejected, stacked; the filter's ranges
    shaded."""
    rows, units = c.table()
    failed, kept = rows["failed"] > 0, rows["kept"] > 0
    rejected = ~kept & ~failed
    keep = c.keep()
    cols = [b for b in BIOMARKERS if b in rows.dtype.names]
    fig, axes = _grid(plt, len(cols))
    for ax, col in zip(axes, cols):
        a = rows[col]
        good = np.isfinite(a) & ~failed
        edges = np.histogram_bin_edges(a[good], bins=min(30, max(5, int(np.sqrt(good.sum()))))) if good.any() \
            else np.linspace(0.0, 1.0, 6)
        if col in keep:                  # the filter's bounds are edges: no bin holds kept and rejected cells
            lo, hi = keep[col]
            edges = np.unique(np.concatenate([edges, [b for b in (lo, hi) if edges[0] < b < edges[-1]]]))
        ax.hist([a[kept & good], a[rejected & good]], bins=edges, stacked=True, color=["tab:blue", "0.65"],
                label=["kept", "rejected by the filter"])
        if col in keep:
            ax.axvspan(*keep[col], color="tab:green", alpha=0.15, label="filter range (--keep)")
        ax.set_xlabel(f"{col} ({units.get(col, '')})")
        ax.set_ylabel("cells (count)")
        ax.grid(alpha=0.3)
    named = {}                           # every panel's entries once (the filter's range is in some only)
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            named.setdefault(label, h)
    legend_outside(axes[min(2, len(axes) - 1)], handles=list(named.values()), labels=list(named))
    rule = ", ".join(f"{k} {lo:g}-{hi:g}" for k, (lo, hi) in keep.items()) or "no filter"
    what = (f"{len(rows)} cells: {int(kept.sum())} kept, {int(rejected.sum())} rejected ({rule}), "
            f"{int(failed.sum())} failed; the last beat")
    return _finish(plt, fig, c, what, path, style)


def plot_population_traces(plt, c: CellFile, path: Path, style: Style) -> Path:
    """The recorded beat of every cell (at most MOST_TRACES of each kind): kept in colour, rejected grey."""
    rows, _, t, v, fig, ax = _beats_figure(plt, c)
    kept, rejected = rows["kept"] > 0, (rows["kept"] == 0) & (rows["failed"] == 0)
    handles = []
    for which, colour, name in ((rejected, "0.65", "rejected"), (kept, "tab:blue", "kept")):
        cells = np.flatnonzero(which)[:MOST_TRACES]
        for i in cells:
            ax.plot(t, v[i], lw=0.6, alpha=0.6, color=colour)
        more = f", {MOST_TRACES} drawn" if which.sum() > MOST_TRACES else ""
        handles.append(plt.Line2D([], [], color=colour, label=f"{name} ({int(which.sum())}{more})"))
    ax.set_xlabel("t (ms, from the last beat's onset)")
    ax.set_ylabel("V (mV)")
    ax.grid(alpha=0.3)
    legend_outside(ax, handles=handles)
    what = f"the last beat of every cell; {int((rows['failed'] > 0).sum())} failed (not drawn)"
    return _finish(plt, fig, c, what, path, style, over=ax)


def _concentration_axis(ax, x: np.ndarray) -> None:
    """A log scale where the concentrations span a decade or more (symlog where 0 is one of them)."""
    pos = x[x > 0]
    if pos.size >= 2 and pos.max() >= 10 * pos.min():
        if (x == 0).any():
            ax.set_xscale("symlog", linthresh=float(pos.min()))
        else:
            ax.set_xscale("log")


def plot_series(plt, c: CellFile, path: Path, style: Style) -> Path:
    """Each biomarker of the last beat against the concentration."""
    rows, units = c.table()
    x = rows["concentration"]
    cols = [b for b in BIOMARKERS if b in rows.dtype.names]
    fig, axes = _grid(plt, len(cols))
    for ax, col in zip(axes, cols):
        ax.plot(x, rows[col], "o-", color="tab:blue")
        _concentration_axis(ax, x)
        ax.set_xlabel(f"concentration ({units.get('concentration', '')})")
        ax.set_ylabel(f"{col} ({units.get(col, '')})")
        ax.grid(alpha=0.3)
    blocks = ", ".join(f"{k} (IC50 {ic:g}, Hill {h:g})" for k, (ic, h) in c.blocks().items())
    return _finish(plt, fig, c, f"the last beat against the drug concentration; block of {blocks}", path, style)


# The figures of each kind: (name in the file's name, draw(plt, c, path, style)).
FIGURES = {RESTITUTION: (("restitution", plot_restitution), ("restitution_traces", plot_family)),
           POPULATION: (("population", plot_population), ("population_traces", plot_population_traces)),
           SERIES: (("concentration", plot_series), ("concentration_traces", plot_family))}
# cardiosim plot's options for tissue runs, and their values when not given
RUN_ONLY = {"times": None, "isochrones": None, "view": None, "range": None, "beats": False, "vtu": False,
            "movie": False, "every": None, "frame_interval": None, "movie_format": None, "phase": False,
            "tips": False, "dominant_frequency": False, "window": None, "fps": 10.0}


def _check_options(args, c: CellFile) -> None:
    """A tissue run's options, and --trace but for a paced trace, are refused in one line."""
    given = [k for k, unset in RUN_ONLY.items() if getattr(args, k, unset) not in (unset, [])]
    if getattr(args, "field", "Vm") != "Vm":
        given.insert(0, "field")
    if given:
        raise UserError(f"--{given[0].replace('_', '-')}: for the result files of cardiosim run; {c.path} is "
                        f"{WHAT[c.kind]} of cardiosim cell")
    if getattr(args, "trace", None) and c.kind != TRACE:
        raise UserError(f"--trace: for a paced single-cell trace; {c.path} is {WHAT[c.kind]}")
    if not 10 <= args.dpi <= 1200:
        raise UserError(f"--dpi {args.dpi}: must be 10 to 1200")


def _plan(c: CellFile, args, out: Path, style: Style) -> tuple[list, list[str]]:
    """[(path, draw(plt, path))] of the figures of ``c``, and the lines saying what is not drawn and why."""
    stem, ext = c.path.stem, style.format
    if c.kind == TRACE:
        if c.n_samples() == 0:
            raise UserError(f"{c.path}: holds no trace sample (the run stopped before the first was written"
                            + (f": {c.attrs['error']}" if c.attrs.get("error") else "") + ")")
        names = list(dict.fromkeys(args.trace or [n for n in CALCIUM if n in c.names()][:1]))
        for n in names:
            c.series(n)                          # a name not recorded: one line, before anything is drawn
        return [(out / f"{stem}_trace.{ext}", lambda plt, p: plot_trace(plt, c, names, p, style))], []
    plan, skipped = [], []
    rows, _ = c.table()
    for what, draw in FIGURES[c.kind]:
        if c.kind == POPULATION and not (rows["failed"] == 0).any():
            skipped.append(f"no picture of {what.replace('_', ' ')}: every cell failed")
            continue
        plan.append((out / f"{stem}_{what}.{ext}", lambda plt, p, draw=draw: draw(plt, c, p, style)))
    return plan, skipped


def plot_cell_main(args) -> int:
    """``cardiosim plot FILE`` where FILE is a file of cardiosim cell: its figures, every name checked before the
    first is written."""
    style = Style(format=args.format, dpi=args.dpi)
    with CellFile(args.file) as c:
        _check_options(args, c)
        out = Path(args.out) if args.out else c.path.parent
        check_name("--out", out)
        if out.exists() and not out.is_dir():
            raise UserError(f"--out {out}: exists and is not a directory")
        _writable_dir(out)
        plan, skipped = _plan(c, args, out, style)
        kind = "png" if style.format == "png" else "figure"
        check_writes([Target("--out", p, kind) for p, _ in plan], {"the result file": c.path}, args.overwrite)
        plt = _pyplot()
        written = []
        try:
            out.mkdir(parents=True, exist_ok=True)
            for p, draw in plan:
                written.append(draw(plt, p))
        except OSError as e:
            raise UserError(f"--out {out}: cannot write {e.filename or out} ({io_reason(e)}); {len(written)} "
                            f"figure(s) written before") from None
    for p in written:
        print(p)
    for why in skipped:
        print(why)
    return 0

"""``cardiosim plot``: PNGs of a result file (matplotlib, Agg backend; no MPI, no PETSc).

Written beside the file (or into ``--out``), named ``<stem>_<what>.png``:

* ``<stem>_<field>.png``: the field (Vm or φe) at the chosen snapshot times, one panel each, one colour scale;
  2D as a map, 3D as the mid-z slice (said in the title), 1D as curves over x.
* ``<stem>_probes.png``: Vm (and φe) of every probe against time, every PDE step.
* ``<stem>_ecg.png``: the pseudo-ECG (/ecg): electrode potentials, and the leads in a panel of their own.
* ``<stem>_tissue.png``: with tissue.label_file, which nodes are tissue (the /maps/tissue map).
* ``<stem>_activation.png``: the activation-time map with isochrones (contour lines every N ms); 3D: mid-z
  slice; 1D: activation time against x.
* ``<stem>_apd.png``: the APD map, where some node repolarised (otherwise a line says why there is none).
* ``<stem>_layout.png``: the microscopic model's myocyte layout (/tissue): myocytes in alternating shades,
  non-conducting ones dark, and every face between two myocytes drawn in the colour of its junction type.

An existing PNG is replaced only with ``--overwrite``; every name is checked before the first file is written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import UserError
from .results import Results

LABELS = {"Vm": "$V_m$", "phi_e": r"$\varphi_e$", "activation_time": "activation time", "apd": "APD"}


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UserError("cardiosim plot: needs matplotlib (pip install 'cardiosim[plot]')") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plane(r: Results, a: np.ndarray) -> tuple[np.ndarray, str]:
    """A node array ([nz,] ny, nx) as a 2D (ny, nx) picture: the middle z plane in 3D; and its title note."""
    if r.dim == 3:
        k = a.shape[0] // 2
        return a[k], f" (mid slice z = {r.axes[2][k]:g} cm)"
    return a, ""


def nice_step(span: float, lines: int = 10) -> float:
    """A round isochrone spacing (1, 2 or 5 × 10^k ms) giving about ``lines`` lines over ``span`` ms."""
    if not span > 0:
        return 1.0
    raw = span / lines
    k = 10.0 ** np.floor(np.log10(raw))
    return float(min((m * k for m in (1, 2, 5, 10)), key=lambda s: abs(s - raw)))


def _extent(r: Results):
    x, y = r.axes[0], r.axes[1]
    return (x[0], x[-1], y[0], y[-1])


def _map_axes(ax, r, title):
    ax.set_xlabel("x (cm)")
    ax.set_ylabel("y (cm)")
    ax.set_aspect("equal")
    ax.set_title(title, fontsize=10)


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


def plot_field(plt, r: Results, name: str, idx: list[int], path: Path) -> Path:
    unit = r.f["fields"][name].attrs.get("units", "mV")
    data = [r.field(name, i) for i in idx]
    label = f"{LABELS.get(name, name)} ({unit})"
    if r.dim == 1:
        fig, ax = plt.subplots(figsize=(7, 4))
        for i, a in zip(idx, data):
            ax.plot(r.axes[0], a, label=f"t = {r.times[i]:g} ms")
        ax.set_xlabel("x (cm)")
        ax.set_ylabel(label)
        ax.legend(fontsize=8)
        ax.set_title(f"{r.path.name}: {LABELS.get(name, name)}", fontsize=10)
    else:
        pics = [plane(r, a) for a in data]
        lo = min(float(np.nanmin(p)) for p, _ in pics)
        hi = max(float(np.nanmax(p)) for p, _ in pics)
        cmap = "viridis"
        if name == "phi_e":   # a signed potential: a diverging map, white at 0
            cmap, hi = "RdBu_r", max(abs(lo), abs(hi)) or 1.0
            lo = -hi
        n = len(pics)
        cols = min(n, 4)
        rows = -(-n // cols)
        fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 1.2, 3.4 * rows), squeeze=False,
                                 constrained_layout=True)
        for ax in axes.flat[n:]:
            ax.set_visible(False)
        for ax, i, (p, note) in zip(axes.flat, idx, pics):
            im = ax.imshow(p, origin="lower", extent=_extent(r), vmin=lo, vmax=hi, cmap=cmap,
                           interpolation="nearest")
            _map_axes(ax, r, f"t = {r.times[i]:g} ms{note}")
        fig.colorbar(im, ax=axes, label=label, shrink=0.9)
        fig.suptitle(f"{r.path.name}: {LABELS.get(name, name)}", fontsize=11)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_probes(plt, r: Results, path: Path) -> Path | None:
    if not r.probes or r.n_samples == 0:
        return None
    fields = [f for f in ("Vm", "phi_e") if all(f in r.f["probes"][p] for p in r.probes)]
    fig, axes = plt.subplots(len(fields), 1, figsize=(7, 2.8 * len(fields) + 0.6), sharex=True, squeeze=False,
                             constrained_layout=True)
    for ax, fld in zip(axes[:, 0], fields):
        for name in r.probes:
            p = r.probe(name)
            pos = ", ".join(f"{x:g}" for x in p["node_position"])
            ax.plot(r.probe_times, p[fld], label=f"{name} ({pos}) cm", lw=1.2)
        ax.set_ylabel(f"{LABELS[fld]} (mV)")
        ax.grid(alpha=0.3)
    axes[0, 0].legend(fontsize=8)
    axes[-1, 0].set_xlabel("t (ms)")
    axes[0, 0].set_title(f"{r.path.name}: probes, every PDE step", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_ecg(plt, r: Results, path: Path) -> Path:
    """The pseudo-ECG: electrodes in one panel, leads (if any) in another."""
    leads = [n for n in r.ecg if "lead" in r.f["ecg"][n].attrs]
    groups = [g for g in ([n for n in r.ecg if n not in leads], leads) if g]
    fig, axes = plt.subplots(len(groups), 1, figsize=(7, 2.8 * len(groups) + 0.6), sharex=True, squeeze=False,
                             constrained_layout=True)
    for ax, names in zip(axes[:, 0], groups):
        for name in names:
            attrs = r.f["ecg"][name].attrs
            label = (f"{name} ({attrs['lead']})" if "lead" in attrs else
                     f"{name} ({', '.join(f'{x:g}' for x in attrs['position'])}) cm")
            ax.plot(r.probe_times, r.ecg_trace(name), label=label, lw=1.2)
        ax.set_ylabel("lead (mV)" if names is leads else "φ electrode (mV)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[-1, 0].set_xlabel("t (ms)")
    axes[0, 0].set_title(f"{r.path.name}: pseudo-ECG, every PDE step", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_map(plt, r: Results, name: str, path: Path, isochrones: float | None = None) -> Path | None:
    """A map (activation time with isochrones, or APD); None where no node has a value."""
    a = r.map(name)
    if not np.isfinite(a).any():
        return None
    attrs = r.map_attrs(name)
    unit = attrs.get("units", "ms")
    if name == "activation_time":
        title = f"activation time (first crossing of {float(attrs.get('threshold', 0.0)):g} mV)"
    elif name == "apd":
        title = f"APD{float(attrs.get('level', 90.0)):g}, first beat"
    else:
        title = name
    if r.dim == 1:
        fig, ax = plt.subplots(figsize=(7, 4), constrained_layout=True)
        ax.plot(r.axes[0], a, ".-")
        ax.set_xlabel("x (cm)")
        ax.set_ylabel(f"{LABELS.get(name, name)} ({unit})")
        ax.grid(alpha=0.3)
        ax.set_title(f"{r.path.name}: {title}", fontsize=10)
    else:
        p, note = plane(r, a)
        fig, ax = plt.subplots(figsize=(6.4, 5.2), constrained_layout=True)
        cmap = "plasma" if name == "activation_time" else "magma"
        im = ax.imshow(p, origin="lower", extent=_extent(r), cmap=cmap, interpolation="nearest")
        fig.colorbar(im, ax=ax, label=f"{LABELS.get(name, name)} ({unit})", shrink=0.9)
        if name == "activation_time":
            ok = p[np.isfinite(p)]
            step = isochrones or nice_step(float(ok.max() - ok.min()))
            levels = np.arange(np.ceil(ok.min() / step) * step, ok.max() + 1e-9, step)
            if len(levels) and min(p.shape) > 1:
                cs = ax.contour(r.axes[0], r.axes[1], p, levels=levels, colors="white", linewidths=0.8)
                ax.clabel(cs, fontsize=7, fmt="%g")
            title += f", isochrones every {step:g} ms"
        if np.isnan(p).any():
            title += "; white: not activated" if name == "activation_time" else "; white: not repolarised by the end"
        # The file name on a line of its own: one line of all this is wider than the map.
        _map_axes(ax, r, f"{r.path.name}{note}\n{title}")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# Colours of the junction faces in the layout picture, by face type code (cardiosim.microscopic.FACE_TYPES).
JUNCTION_COLOURS = {2: ("tab:red", "plicate (G_p)"), 3: ("tab:orange", "interplicate (G_i)"),
                    4: ("tab:blue", "combined (G_c)"), 5: ("0.6", "no junction"),
                    6: ("black", "non-conducting cell")}


def plot_layout(plt, r: Results, path: Path) -> Path:
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
            dict(loc="upper right")
        ax.legend(handles=handles, fontsize=7, framealpha=0.8, **where)
    note = " (mid z plane)" if r.dim == 3 else ""
    ax.set_title(f"{r.path.name}: myocyte layout{note}, {int(np.unique(cid[~dead]).size)} myocytes", fontsize=10)
    fig.savefig(path, dpi=110)
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


def plot_main(args) -> int:
    if args.isochrones is not None and not args.isochrones > 0:
        raise UserError(f"--isochrones {args.isochrones:g}: must be > 0 (ms)")
    from .files import Target, check_name, check_writes
    out = Path(args.out) if args.out else None
    if out is not None:
        check_name("--out", out)
    if out is not None and out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: exists and is not a directory")
    with Results(args.file) as r:
        r.check_field(args.field)
        idx = field_times(r, args.times)          # every check before anything is written
        _check_isochrones(r, args.isochrones)
        out = out or r.path.parent
        _writable_dir(out)
        stem = r.path.stem
        # What will be drawn, named up front so that every name is checked before the first file is written.
        plan = [("field", args.field, out / f"{stem}_{args.field}.png")]
        if r.probes and r.n_samples:
            plan.append(("probes", None, out / f"{stem}_probes.png"))
        if r.ecg and r.n_samples:
            plan.append(("ecg", None, out / f"{stem}_ecg.png"))
        if "tissue" in r.f:
            plan.append(("layout", None, out / f"{stem}_layout.png"))
        skipped = []
        for name in r.maps:
            if np.isfinite(r.map(name)).any():
                plan.append(("map", name, out / f"{stem}_{name.replace('_time', '')}.png"))
            else:
                skipped.append(f"{name}: no node has a value (" + ("none activated" if name == "activation_time"
                               else "none repolarised by the end of the run; run longer") + ")")
        check_writes([Target("--out", p, "png") for _, _, p in plan], {"the result file": r.path}, args.overwrite)
        plt = _pyplot()
        written = []
        try:
            out.mkdir(parents=True, exist_ok=True)
            for kind, name, p in plan:
                if kind == "field":
                    written.append(plot_field(plt, r, name, idx, p))
                elif kind == "probes":
                    written.append(plot_probes(plt, r, p))
                elif kind == "ecg":
                    written.append(plot_ecg(plt, r, p))
                elif kind == "layout":
                    written.append(plot_layout(plt, r, p))
                else:
                    written.append(plot_map(plt, r, name, p, args.isochrones))
        except OSError as e:
            from .errors import io_reason
            where = e.filename or out
            raise UserError(f"--out {out}: cannot write {where} ({io_reason(e)}); "
                            f"{len(written)} PNG(s) written before") from None
    for p in written:
        if p is not None:
            print(p)
    for why in skipped:
        print(f"no picture of {why}")
    return 0

"""The figure of a sweep's table (``cardiosim sweep --plot Q --against KEY``, ``api.sweep(...).plot(Q, KEY)``): the
collected quantity Q against KEY, a varied key (or a collected quantity: a restitution curve against the
diastolic interval), a line for every combination of the other varied keys, named in a legend outside the axes.
The axes carry the units of the quantities and of the keys (the config schema's); a run without a value of Q (NaN:
it failed, or the quantity is not in it) leaves its point out. Written whole or not at all
(cardiosim.runtime.files.whole); no MPI, no PETSc.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cardiosim.output.plot import _pyplot, legend_outside
from cardiosim.runtime.files import whole


def label(name: str, unit: str) -> str:
    """An axis label: the name and its unit in parentheses ("1": dimensionless); the bare name where the unit is
    not known (a model parameter's, in the model's own units)."""
    return f"{name} ({unit})" if unit else name


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _text(v) -> str:
    return f"{v:g}" if isinstance(v, float) else ("true" if v is True else "false" if v is False else str(v))


def series(rows: list[dict], quantity: str, against: str, others: list[str]) -> list[tuple[tuple, list, list]]:
    """[(the values of ``others``, x, y)] for each combination of the ``others`` keys' values, in the order the
    table first has them; x sorted where it is a number."""
    groups: dict[tuple, list[tuple]] = {}
    for r in rows:
        groups.setdefault(tuple(r[k] for k in others), []).append((r[against], r[quantity]))
    out = []
    for key, pts in groups.items():
        if all(is_number(x) for x, _ in pts):
            pts = sorted(pts, key=lambda p: p[0])
        out.append((key, [x for x, _ in pts], [float(y) for _, y in pts]))
    return out


def plot_sweep(rows: list[dict], quantity: str, against: str, path: Path, units: dict, others: list[str],
               title: str, dpi: int = 150) -> Path | None:
    """Draw ``quantity`` against ``against`` (a line per combination of ``others``) into ``path`` (PNG, written
    whole); ``units``: {column: unit}. None (and nothing written) where no run has a finite value of it to draw."""
    lines = series(rows, quantity, against, others)
    numeric = all(is_number(x) for _, xs, _ in lines for x in xs)
    categories = [] if numeric else list(dict.fromkeys(_text(x) for _, xs, _ in lines for x in xs))
    drawn = []
    for key, xs, ys in lines:
        x = np.array([float(v) for v in xs]) if numeric else np.array([categories.index(_text(v)) for v in xs], float)
        y = np.array(ys)
        ok = np.isfinite(y) & np.isfinite(x)
        name = ", ".join(f"{k} = {_text(v)}" + (f" {units[k]}" if units.get(k) not in ("", "1", None) else "")
                         for k, v in zip(others, key))
        drawn.append((x[ok], y[ok], name))
    if not any(x.size for x, _, _ in drawn):
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2), constrained_layout=True)
    for x, y, name in drawn:
        ax.plot(x, y, "o-", ms=4, lw=1.2, label=name or None)
    if not numeric:
        ax.set_xticks(range(len(categories)), categories)
    ax.set_xlabel(label(against, units.get(against, "")))
    ax.set_ylabel(label(quantity, units.get(quantity, "")))
    ax.grid(alpha=0.3)
    if others:
        legend_outside(ax)
    ax.set_title(f"{title}: {quantity} against {against}", fontsize=10)
    try:
        with whole(path, "--plot") as tmp:
            fig.savefig(tmp, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return path

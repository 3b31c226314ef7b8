"""Wall-clock accounting by category (reaction, exchange, parabolic, elliptic, I/O, other) and the final table.

Phases nest: a phase opened inside another (the exchange of cell data inside the reaction step) pauses the outer
one, so every second is counted once, in the innermost phase. PDE = parabolic + elliptic; ODE = reaction;
exchange = moving cell data between a group's ranks and its owner (grouped placement; zero otherwise).
"""

from __future__ import annotations

import time
from contextlib import contextmanager

CATEGORIES = ("reaction", "exchange", "parabolic", "elliptic", "io")


class Timers:
    def __init__(self):
        self.t0 = time.perf_counter()
        self.total = {c: 0.0 for c in CATEGORIES}
        self._open: list[list] = []          # [category, start] of the open phases, innermost last

    @contextmanager
    def __call__(self, category: str):
        now = time.perf_counter()
        if self._open:                       # pause the enclosing phase
            outer = self._open[-1]
            self.total[outer[0]] += now - outer[1]
        self._open.append([category, now])
        try:
            yield
        finally:
            now = time.perf_counter()
            cat, start = self._open.pop()
            self.total[cat] += now - start
            if self._open:
                self._open[-1][1] = now      # resume it

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def summary(self, comm) -> dict:
        """Per category: the mean and the max over ranks (s); 'other' is wall time not in any category."""
        wall = self.elapsed()
        local = dict(self.total, other=wall - sum(self.total.values()), total=wall)
        all_ranks = comm.allgather(local)
        out = {}
        for k in local:
            vals = [r[k] for r in all_ranks]
            out[k] = {"mean": sum(vals) / len(vals), "max": max(vals)}
        return out


def table(summary: dict) -> str:
    total = summary["total"]["max"] or 1.0
    lines = [f"{'phase':<11}{'mean (s)':>11}{'max (s)':>11}{'share':>8}"]
    for k in (*CATEGORIES, "other", "total"):
        v = summary[k]
        lines.append(f"{k:<11}{v['mean']:>11.3f}{v['max']:>11.3f}{100 * v['max'] / total:>7.1f}%")
    return "\n".join(lines)

"""Wall-clock accounting by category (reaction, exchange, purkinje, parabolic, elliptic, I/O, other) and the final
table.

Phases nest: a phase opened inside another (the exchange of cell data inside the reaction step) pauses the outer
one, so every second is counted once, in the innermost phase. PDE = parabolic + elliptic; ODE = reaction;
exchange = moving cell data between a group's ranks and its owner (grouped placement; zero otherwise); purkinje =
the conduction system's step (its junctions, cells and cable; a row of the table only in runs with a network).

With ``petsc_events`` every phase is also a PETSc log event ("cardiosim:reaction", ...; inclusive, as PETSc's
events are), and :class:`PetscEvents` puts the stepping loop in a stage of its own, so that ``-log_view`` shows
flops, messages and host<->GPU copies per phase and per step.
"""

from __future__ import annotations

import time
from contextlib import contextmanager

CATEGORIES = ("reaction", "exchange", "purkinje", "parabolic", "elliptic", "io")
OPTIONAL = ("purkinje",)    # rows of the table only where they took time


class PetscEvents:
    """PETSc log events for the phases, and the stage "cardiosim: steps" with the event "cardiosim:step" around
    each PDE step (with its probe samples; snapshots and checkpoints stay outside)."""

    def __init__(self):
        from petsc4py import PETSc
        self.stage = PETSc.Log.Stage("cardiosim: steps")
        self.step = PETSc.Log.Event("cardiosim:step")
        self.phase = {c: PETSc.Log.Event(f"cardiosim:{c}") for c in CATEGORIES}

    @contextmanager
    def steps(self):
        self.stage.push()
        self.step.begin()
        try:
            yield
        finally:
            self.step.end()
            self.stage.pop()

    def copies(self, comm) -> dict | None:
        """Host<->GPU copies PETSc counted in the steps (max over ranks), or None where PETSc was not logging
        (-log_view and the like turn it on)."""
        info = self.step.getPerfInfo(self.stage.id)
        steps = int(info.get("count", 0))
        if steps == 0:
            return None
        keys = ("CpuToGpuCount", "GpuToCpuCount", "CpuToGpuSize", "GpuToCpuSize")
        mine = [float(info.get(k, 0.0)) for k in keys]
        worst = [max(v) for v in zip(*comm.allgather(mine))]
        return {"steps": steps, "cpu_to_gpu_copies": int(worst[0]), "gpu_to_cpu_copies": int(worst[1]),
                "cpu_to_gpu_bytes": worst[2], "gpu_to_cpu_bytes": worst[3]}


class Timers:
    def __init__(self, petsc_events: bool = False):
        self.t0 = time.perf_counter()
        self.total = {c: 0.0 for c in CATEGORIES}
        self._open: list[list] = []          # [category, start] of the open phases, innermost last
        self.events = PetscEvents() if petsc_events else None

    @contextmanager
    def __call__(self, category: str):
        event = self.events.phase[category] if self.events else None
        if event:
            event.begin()
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
            if event:
                event.end()

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
        v = summary.get(k) if k in OPTIONAL else summary[k]     # an older run's summary has no optional rows
        if k in OPTIONAL and not (v and v["max"]):
            continue
        lines.append(f"{k:<11}{v['mean']:>11.3f}{v['max']:>11.3f}{100 * v['max'] / total:>7.1f}%")
    return "\n".join(lines)

"""Where a tissue run's reaction time goes on the GPU (cell.placement = "resident"), against the cell kernel alone.

    python3 tools/gpu/reaction_profile.py CONFIG [--set KEY=VALUE ...] [--steps 100] [--json FILE]

The run's Simulation is built in this process (no output file), a few PDE steps warm it up, then, each over
``--steps`` repetitions with the device synchronised before and after (wall-clock ms per repetition):

- ``step``: whole PDE steps (Simulation.step);
- ``reaction``: the reaction step alone (Reaction.advance: every piece's Vm gather, kernel, error-flag read, scatter);
- per piece (a cell region, or the masked grid's tissue): its fused kernel alone, timed by CUDA events, with the
  error-flag read left out (``kernel``), and its Vm gather and scatter alone (``gather_scatter``);
- the same model's kernel in a fresh backend on as many cells, at rest and in the piece's current states, at the
  run's substep (``fresh_rest``, ``fresh_states``) and at 100 substeps per launch as cardiosim bench kernels times it
  (``fresh_rest_k100``, per substep): what the kernel costs without the run around it.

Each figure is also given per cell-step (ns). ptxas's registers and local memory (spills) are printed per piece.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import petsc4py

petsc4py.init([sys.argv[0]])        # before PETSc is imported (the run's PETSc options: none here)

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from cardiosim.config import load  # noqa: E402
from cardiosim.reaction.ode.cuda_backend import CudaBackend  # noqa: E402
from cardiosim.reaction.ode.protocol import Pieces  # noqa: E402
from cardiosim.simulation.loop import Simulation  # noqa: E402


def resident_pieces(reaction) -> list:
    """Every ResidentBackend of the run, with its piece's size."""
    out = []
    for mc in reaction.model_cells:
        b = mc.backend
        out.extend(p for p, _ in b.pieces) if isinstance(b, Pieces) else out.append(b)
    return [b for b in out if getattr(b, "name", "") == "resident" and b.n]


def wall(cuda, fn, n: int) -> float:
    """ms per call of fn, n calls, the device synchronised around them."""
    cuda.Context.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    cuda.Context.synchronize()
    return (time.perf_counter() - t0) / n * 1e3


def events(gpu, fn, n: int) -> float:
    """ms per call of fn by CUDA events (fn launches on the legacy default stream)."""
    cuda = gpu.cuda
    gpu._push()
    try:
        fn()
        start, end = cuda.Event(), cuda.Event()
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return end.time_since(start) / n
    finally:
        gpu._pop()


def piece_figures(b, V, t: float, dt: float, k: int, n: int) -> dict:
    """The kernel of ResidentBackend ``b`` alone, its Vm traffic (to and from the run's Vec ``V``) alone, and a
    fresh backend of its model."""
    gpu = b.gpu
    row = {"cells": b.n, **gpu.registers()}
    row["kernel"] = events(gpu, lambda: gpu.advance(t, dt / k, k, b.stimulus, check=False), n)
    ptr = V.getCUDAHandle("rw")
    try:
        row["gather_scatter"] = events(gpu, lambda: (b._vm_row(int(ptr), True), b._vm_row(int(ptr), False)), n)
    finally:
        V.restoreCUDAHandle(ptr, "rw")
    states = gpu.from_device()
    rest = np.repeat(np.asarray(gpu.model.initial_state(1, None))[:, :1], b.n, axis=1)
    for name, y, kk, reps in (("fresh_rest", rest, k, n), ("fresh_states", states, k, n),
                              ("fresh_rest_k100", rest, 100, max(n // 20, 3))):
        fresh = CudaBackend(gpu.model, y, device=b.device, variant=gpu.variant.name, integrator=gpu.integrator)
        try:
            stim = fresh.stimulus()
            row[name] = events(fresh, lambda: fresh.advance(t, dt / k, kk, stim, check=False), reps) / (kk / k)
        finally:
            fresh.close()
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("config")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warm", type=int, default=10)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    cfg = load(args.config, [*args.set, "cell.placement=\"resident\""])
    sim = Simulation(cfg, write_output=False)
    pieces = resident_pieces(sim.reaction)
    if not pieces:
        raise SystemExit("no resident cells in this run")
    cuda = pieces[0].cuda
    for _ in range(args.warm):
        sim.step()
    k, dt, n = cfg.simulation.ode_substeps, sim.dt, args.steps
    cells = sum(b.n for b in pieces)
    out = {"config": args.config, "overrides": args.set, "cells": cells, "dt_ms": dt, "ode_substeps": k,
           "pieces": len(pieces), "gpu": pieces[0].gpu.device.name()}
    gpu = pieces[0].gpu
    gpu._push()
    try:
        out["step"] = wall(cuda, sim.step, n)
        out["reaction"] = wall(cuda, lambda: sim.reaction.advance(sim.V, sim.t, dt, k), n)
        out["per_piece"] = [piece_figures(b, sim.V, sim.t, dt, k, n) for b in pieces]
    finally:
        gpu._pop()
    for key in ("step", "reaction"):
        out[key + "_ns_per_cell_step"] = out[key] * 1e6 / (cells * k)
    for row in out["per_piece"]:
        for key in ("kernel", "gather_scatter", "fresh_rest", "fresh_states", "fresh_rest_k100"):
            row[key + "_ns_per_cell_step"] = row[key] * 1e6 / (row["cells"] * k)
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

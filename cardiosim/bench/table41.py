"""The seed's Table 4.1 (docs/dev/design.md §9): run/seed-table41.toml — 625 x 625 bidomain sheet, Bondarenko cells, 10 PDE
steps of 0.01 ms with 100 ODE substeps — and its microscopic twin run/seed-table41-microscopic.toml (the seed
lineage's own model: 8 µm volumes, myocytes, gap junctions; docs/user/microscopic.md), for every kernel variant and
placement; PDE, ODE, exchange and total time per run, as the seed printed them, with the ranks and GPUs used.
``--tissues`` picks the twins (default both, back to back).

    cardiosim bench table41 --ranks 16 [--variants fused original ...] [--placements grouped per-rank cpu]
        [--exchange vm full] [--json benchmarks/raw/table41.json] [-- PETSc options]
    cardiosim bench table41 --ranks 2 --placements cpu grouped --backend native --grid 41 --steps 2   # on a CPU

Each case runs in its own ``mpirun``. Variants apply to the CUDA placements (grouped, per-rank with --backend
cuda); a variant this build does not know is reported as unavailable, not fatal. The cpu placement integrates with
the native C kernel. Setup (kernel compilation, the first elliptic solve with the multigrid set-up) is not timed,
the steps are: PDE = parabolic + elliptic, ODE = reaction (the host <-> GPU copies of Vm included), exchange = the
MPI gather and scatter of cell data between a group's ranks and its owner (times: max over ranks), Total = the
stepping loop's wall time.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

from cardiosim.bench.launch import machine, publish
from cardiosim.runtime.mpi import mpirun_command
from cardiosim.runtime.errors import SimulationError, UserError

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "run" / "seed-table41.toml"
CONFIGS = {"homogenised": CONFIG, "microscopic": ROOT / "run" / "seed-table41-microscopic.toml"}
VARIANTS = ("original", "lean-registers", "no-aux", "constant-memory", "all", "fused")
PLACEMENTS = ("grouped", "per-rank", "cpu", "resident")   # resident: one rank per GPU (--ranks 1 on one GPU)
SPACING = 0.0008                                    # cm, the seed's 8 µm (grid.spacing of the config)
# As printed in the seed (16 CPU ranks + 4 GPUs; docs/dev/design.md §9). The units are not printed there; ms fits the
# problem size (10 bidomain steps of 390,625 nodes on 16 CPU ranks ≈ 1.6 s).
SEED = {"original": (1599.62, 1170.57, 2776.17), "all": (1579.91, 1141.78, 2732.12)}


def single(spec: dict) -> dict:
    """One case in this MPI job (started by run_case): set up, then time the steps."""
    import petsc4py
    petsc4py.init([sys.argv[0], "-options_left", "0", *spec["petsc"]])
    # after petsc4py.init: these import MPI and PETSc, which must start with the options above
    from mpi4py import MPI
    from cardiosim import config
    from cardiosim.runtime import log
    from cardiosim.simulation.loop import Simulation
    comm = MPI.COMM_WORLD
    try:
        cfg = config.load(spec["config"], spec["set"])
        sim = Simulation(cfg, write_output=False)
    except (UserError, SimulationError) as e:   # e.g. an unknown kernel variant: reported, not fatal
        log.error(str(e))
        if comm.rank == 0:
            print("UNAVAILABLE " + json.dumps(str(e)), flush=True)
        return {}
    sim.tissue.solve_phi(sim.V, sim.phi, 0.0)      # solver set-up (multigrid hierarchy), not timed
    for k in sim.timers.total:
        sim.timers.total[k] = 0.0
    comm.Barrier()
    t0 = time.perf_counter()
    while sim.step_index < sim.n_steps:
        sim.step()
    loop = time.perf_counter() - t0
    per_rank = comm.gather(dict(sim.timers.total, loop=loop), root=0)
    lay = sim.layout
    out = {}
    if comm.rank == 0:
        pde = max(r["parabolic"] + r["elliptic"] for r in per_rank)
        ode = max(r["reaction"] for r in per_rank)
        gpus = sorted({(g["node"], g["cells_on"]) for g in lay["groups"] if g["cells_on"] != "CPU"})
        n_cells, k, steps = sim.grid.n_nodes, cfg.simulation.ode_substeps, sim.n_steps
        out = {"tissue": "microscopic" if cfg.tissue.model == "microscopic" else "homogenised",
               "equations": cfg.simulation.equations,
               "placement": lay["placement"], "exchange": lay["exchange"], "backend": lay["ode_backend"],
               "variant": cfg.cell.kernel if lay["ode_backend"] == "cuda" else None,
               "ranks": comm.size, "gpus": len(gpus), "groups": len(lay["groups"]),
               "grid": [int(n) for n in sim.grid.n], "cells": n_cells, "steps": steps, "ode_substeps": k,
               "pde_ms": 1e3 * pde, "ode_ms": 1e3 * ode,
               "parabolic_ms": 1e3 * max(r["parabolic"] for r in per_rank),
               "elliptic_ms": 1e3 * max(r["elliptic"] for r in per_rank), "setup_s": sim.setup_time,
               "solvers": {s.name: s.describe() for s in sim.tissue.solvers()},
               "exchange_ms": 1e3 * max(r["exchange"] for r in per_rank),
               "total_ms": 1e3 * max(r["loop"] for r in per_rank),
               "cell_steps_per_s": n_cells * steps * k / ode if ode > 0 else None,
               "iterations": {s: sum(v) / len(v) for s, v in sim.tissue.iterations().items() if v},
               "layout": lay}
        print("RESULT " + json.dumps(out), flush=True)
    return out


def cases(placements, variants, exchanges, backend, tissues=("homogenised",)) -> list[dict]:
    """(tissue, placement, exchange, backend, variant) of every run; the twins back to back for each case."""
    out = []
    for p in placements:
        be = "native" if p == "cpu" else backend
        exs = exchanges if p == "grouped" else ["vm"]
        vs = variants if be == "cuda" else [None]
        out += [{"tissue": t, "placement": p, "exchange": e, "backend": be, "variant": v}
                for e in exs for v in vs for t in tissues]
    return out


def run_case(case: dict, ranks: int, steps: int, grid: int | None, overrides, petsc_args, groups_per_node: int):
    sets = [f'cell.placement="{case["placement"]}"', f'cell.backend="{case["backend"]}"',
            f'cell.exchange="{case["exchange"]}"', f"cell.groups_per_node={groups_per_node}",
            f"simulation.duration={steps * 0.01!r}", "simulation.progress_interval=0.0"]
    if case["variant"]:
        sets.append(f'cell.kernel="{case["variant"]}"')
    tissue = case.get("tissue", "homogenised")
    if grid:
        # the homogenised twin's grid is vertex-centred (n = L/h + 1), the microscopic one cell-centred (n = L/h)
        L = round((grid - (1 if tissue == "homogenised" else 0)) * SPACING, 10)
        sets += [f"grid.size=[{L!r}, {L!r}]"]
    spec = {"config": str(CONFIGS[tissue]), "set": [*sets, *overrides], "petsc": list(petsc_args)}
    cmd = mpirun_command(ranks) + [sys.executable, "-m", "cardiosim.bench.table41", "--single", json.dumps(spec)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
        if line.startswith("UNAVAILABLE "):
            return dict(case, ranks=ranks, unavailable=json.loads(line[12:]))
    raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")


def _ms(v):
    return f"{v:.2f}" if v is not None else "—"


def markdown(label: str, results: list[dict], meta: dict) -> str:
    ok = [r for r in results if "unavailable" not in r]
    size = f"{ok[0]['grid'][0]} × {ok[0]['grid'][1]}, {ok[0]['steps']} steps" if ok else ""
    lines = [f"### Table 4.1 scenario: {label}", "",
             f"{meta['date']} · {meta['machine']['cpu']} ({meta['machine']['cores']} cores) · GPU: "
             f"{meta['machine']['gpu']} · `{meta['command']}`", "",
             f"run/seed-table41.toml (homogenised) and run/seed-table41-microscopic.toml ({size}; Bondarenko, dt 0.01 "
             "ms, 100 ODE substeps). Times in ms: "
             "PDE = parabolic + elliptic, ODE = reaction, exchange = cell data to/from the group's owner (max over "
             "ranks); Total = the stepping loop. Set-up (kernel compilation, multigrid set-up) not included.", "",
             "| tissue | equations | kernel | placement | exchange | ranks | GPUs | PDE | ODE | exchange | Total | "
             "iterations per step | cell-steps/s (ODE) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        kernel = r.get("variant") or f"{r['backend']} (CPU)"
        if "unavailable" in r:
            lines.append(f"| {r.get('tissue', 'homogenised')} | — | {kernel} | {r['placement']} | {r['exchange']} | "
                         f"{r['ranks']} | — | — | — | — | — | — | not available: {r['unavailable']} |")
            continue
        ex = r["exchange"] if r["placement"] == "grouped" else "—"
        cs = f"{r['cell_steps_per_s']:.3g}" if r["cell_steps_per_s"] else "—"
        its = ", ".join(f"{k} {v:.1f}" for k, v in r.get("iterations", {}).items()) or "—"
        lines.append(f"| {r.get('tissue', 'homogenised')} | {r.get('equations', '—')} | {kernel} | {r['placement']} | "
                     f"{ex} | {r['ranks']} | {r['gpus']} | {_ms(r['pde_ms'])} | {_ms(r['ode_ms'])} | "
                     f"{_ms(r['exchange_ms'])} | {_ms(r['total_ms'])} | {its} | {cs} |")
    lines += ["", "The seed (16 CPU ranks + 4 GPUs, 625 × 625, 10 steps), as printed: "
              + "; ".join(f"{v}: PDE {p} / ODE {o} / Total {t}" for v, (p, o, t) in SEED.items()) + ".", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    petsc_args = argv[argv.index("--") + 1:] if "--" in argv else []
    ours = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="cardiosim bench table41", description=__doc__.split("\n")[0])
    p.add_argument("--ranks", type=int, default=16, help="MPI ranks (the seed: 16)")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), metavar="KERNEL",
                   help=f"CUDA kernel variants (cell.kernel; default {' '.join(VARIANTS)})")
    p.add_argument("--placements", nargs="+", default=list(PLACEMENTS[:3]), choices=PLACEMENTS)
    p.add_argument("--exchange", nargs="+", default=["vm", "full"], choices=("vm", "full"),
                   help="what the grouped placement moves each step")
    p.add_argument("--backend", default="cuda", choices=("cuda", "native", "numpy"),
                   help="integrator of the grouped/per-rank placements (native or numpy: grouped on a CPU)")
    p.add_argument("--groups-per-node", type=int, default=1, help="grouped with a CPU integrator: groups per node")
    p.add_argument("--tissues", nargs="+", default=list(CONFIGS), choices=tuple(CONFIGS),
                   help="the homogenised twin (run/seed-table41.toml), the microscopic one "
                        "(run/seed-table41-microscopic.toml), or both (default)")
    p.add_argument("--steps", type=int, default=10, help="PDE steps (the seed: 10)")
    p.add_argument("--grid", type=int, help="nodes per side at the seed's 8 µm (default 625: the seed's sheet)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="extra config override")
    p.add_argument("--label", default="")
    p.add_argument("--write", help="markdown page to update (the table replaces its own section)")
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--single", help=argparse.SUPPRESS)
    args = p.parse_args(ours)
    if args.single:
        single(json.loads(args.single))
        return 0
    if args.backend != "cuda" and "per-rank" in args.placements:
        p.error("per-rank needs --backend cuda")
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(),
            "command": "cardiosim bench table41 " + " ".join(argv)}
    label = args.label or f"{meta['machine']['host']}, {args.ranks} ranks"
    results = []
    for case in cases(args.placements, args.variants, args.exchange, args.backend, args.tissues):
        r = run_case(case, args.ranks, args.steps, args.grid, args.set, petsc_args, args.groups_per_node)
        results.append(r)
        what = (f"{case['tissue']:<12} {case['variant'] or case['backend']:<16} {case['placement']:<9} "
                f"{case['exchange']:<5}")
        if "unavailable" in r:
            print(f"{what} not available: {r['unavailable']}", flush=True)
        else:
            print(f"{what} PDE {r['pde_ms']:10.2f}  ODE {r['ode_ms']:10.2f}  exchange {r['exchange_ms']:8.2f}  "
                  f"Total {r['total_ms']:10.2f} ms  ({r['ranks']} ranks, {r['gpus']} GPUs)", flush=True)
    publish(markdown(label, results, meta), meta, results, args.json, args.write, "table41:" + label)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Tissue inside the box: what a masked grid costs per step against the unmasked box of the same size.

Two anatomies, bidomain, Mitchell–Schaeffer cells (``--model``), a wave started at one end: a disc filling a square sheet (2D)
and the idealised LV of ``cardiosim geometry lv`` (3D, its fibres). Each is run three ways: masked (tissue.label_file)
with the systems solved on the tissue nodes only (``tissue.solve_on = "tissue"``, the default on the CPU: PETSc
submatrices, GAMG for the elliptic system), masked with the systems solved on the whole box (``solve_on = "box"``: the
nodes outside as rows of their own, cardiosim/domain/mask.py; the resident placement's way), and as the whole box without
a mask; the box solves with the elliptic preconditioner of the default (geometric multigrid, PCMG) and with GAMG.
``--steps`` PDE steps after one warm-up step, times the max over ranks.

    cardiosim bench mask --ranks 2 --json benchmarks/raw/mask.json
    cardiosim bench mask --ranks 1 --placement resident --model tt06 --ode-substeps 10 --current-density -52 --lv-spacing 0.05 0.025 --no-gamg \
        --json benchmarks/raw/mask-resident.json                                            # on a GPU node

Each case runs in its own ``mpirun``. A masked grid has cells at its tissue nodes only; the table shows the
solvers' cost and the reaction's apart. ``--rounds N`` runs every case N times, the grids alternating, and ends
with the masked grid's step against the whole box's (default solvers) per round and of the medians: on a GPU a
single round of 20 steps varies by several per cent from one run to the next (docs/performance.md).

The cells' integrator (``--integrator``) is Rush–Larsen by default for a model with gates (TT06), Forward Euler
otherwise (Mitchell–Schaeffer). Forward Euler on TT06 at 0.002 ms (10 substeps of 0.02 ms) is unstable wherever Vm
is below −85.54 mV, 0.31 mV under rest: the m gate's τ_m is 1.06 µs at rest and falls under dt/2 = 1 µs there
(:func:`cell_integrator`). The box stencil is not monotone for the intracellular anisotropy (σ_il/σ_it = 9.2): next
to the stimulus, at the LV's apex, a node dips to −88.8 mV before the wave reaches it, and Forward Euler turns
that dip into a non-finite cell (the LV at 0.025 cm: docs/decisions/0040-bench-mask-tt06-rush-larsen.md).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import tempfile
from pathlib import Path

import numpy as np

from cardiosim.bench.launch import machine, petsc_args, publish, report, run_single, timed_steps
from cardiosim.runtime.mpi import mpirun_command
from cardiosim import cells
from cardiosim.domain.anatomy import built_in

RUN = """
[simulation]
equations = "bidomain"
duration = {duration!r}
dt = 0.02
ode_substeps = {substeps}
progress_interval = 0
[grid]
size = {size}
spacing = {h!r}
origin = {origin}
[tissue]
{tissue}
[cell]
model = "{model}"
{cell}
[[stimulus]]
shape = "sphere"
center = {centre}
radius = {radius!r}
duration = 1.0
current_density = {stim!r}
"""


def anatomy(name: str, folder: Path, masked: bool, lv_spacing: float = 0.05) -> dict:
    """The config pieces of one anatomy: grid, tissue keys (the label image only where ``masked``), stimulus;
    ``lv_spacing`` (cm) the idealised LV's grid spacing."""
    if name == "disc":
        n, h = 257, 0.01
        y, x = np.mgrid[0:n, 0:n] * h
        c, r = (n - 1) * h / 2, (n - 1) * h / 2 - 2 * h
        np.save(folder / "disc.npy", (np.hypot(x - c, y - c) <= r).astype(np.int8))
        return dict(size=[(n - 1) * h] * 2, h=h, origin=[0.0, 0.0],
                    tissue=f'label_file = "{folder / "disc.npy"}"' if masked else "",
                    centre=[c, 2 * h + 0.1], radius=0.1)
    h = lv_spacing
    box, fields = built_in("lv", h, log=lambda line: None)
    np.save(folder / "lv_labels.npy", fields["labels"])
    fib = fields["fibres"]
    # the whole box needs a fibre at every node (the geometry gives none outside the tissue, and none at the few
    # tissue nodes that are in no tissue element)
    fib[~(fields["labels"] > 0) | (np.linalg.norm(fib, axis=-1) == 0)] = (1.0, 0.0, 0.0)
    np.save(folder / "lv_fibres.npy", fib)
    tissue = f'fibre_file = "{folder / "lv_fibres.npy"}"'
    if masked:
        tissue += f'\nlabel_file = "{folder / "lv_labels.npy"}"'
    return dict(size=box.size.round(10).tolist(), h=h, origin=box.origin.round(10).tolist(), tissue=tissue,
                centre=[0.0, 0.0, -2.0], radius=0.25)


GRIDS = {"tissue": "masked, solved on the tissue", "masked": "masked, solved on the box", "box": "whole box"}


def cell_integrator(model: str, chosen: str | None = None) -> str:
    """The cells' integrator: ``chosen``, else Rush–Larsen for a model with Hodgkin–Huxley gates written for it
    (tt06, CellML models), Forward Euler for the others. Not Forward Euler for TT06: its m gate's τ_m is 1.06 µs
    at rest (−85.23 mV) and 1.00 µs at −85.54 mV, so that Forward Euler at the benchmarks' 0.002 ms (dt/τ_m > 2)
    is unstable wherever Vm is 0.31 mV below rest, and the box stencil's undershoot next to the stimulus goes
    further than that (3.6 mV at the LV's apex at 0.025 cm); Rush–Larsen updates the gates exactly for frozen V."""
    if chosen:
        return chosen
    return "rush-larsen" if hasattr(cells.model_class(model), "rush_larsen") else "forward-euler"


def cell_keys(model: str, placement: str, integrator: str | None = None) -> str:
    """The [cell] keys after the model's: the integrator (:func:`cell_integrator`) and, off the CPU, the placement
    with the CUDA backend."""
    keys = f'integrator = "{cell_integrator(model, integrator)}"'
    return keys if placement == "cpu" else keys + f'\nplacement = "{placement}"\nbackend = "cuda"'


def single(name: str, grid: str, args) -> dict:
    """One case in this process (under the mpirun of :func:`run_case`); ``args`` the command line's."""
    import petsc4py
    petsc4py.init(sys.argv[:1] + petsc_args())
    # after petsc4py.init: these import MPI and PETSc, which must start with the options above
    from cardiosim import config
    from cardiosim.simulation.loop import Simulation
    steps, placement, lv_spacing = args.steps, args.placement, args.lv_spacing[0]
    with tempfile.TemporaryDirectory() as tmp:
        cell = cell_keys(args.model, placement, args.integrator)
        pieces = anatomy(name, Path(tmp), grid != "box", lv_spacing)
        if grid != "box":
            pieces["tissue"] += f'\nsolve_on = "{"tissue" if grid == "tissue" else "box"}"'
        cfg = config.loads(RUN.format(duration=0.02 * (steps + 1), model=args.model, cell=cell,
                                      substeps=args.ode_substeps, stim=args.current_density, **pieces),
                           name=f"mask-{name}")
        sim = Simulation(cfg, write_output=False)
        wall, tm, its = timed_steps(sim)
        mask = sim.grid.mask
        out = {"anatomy": name if name == "disc" else f"lv {lv_spacing:g} cm", "grid": grid,
               "nodes": sim.grid.n_nodes, "ranks": sim.comm.size, "model": args.model, "placement": placement,
               "integrator": cfg.cell.integrator,
               "tissue_nodes": mask.n_tissue if mask else sim.grid.n_nodes, "steps": steps,
               "elliptic_solver": sim.tissue.elliptic.describe(),
               **{f"{k}_ms": 1e3 * tm[k]["max"] / steps for k in ("reaction", "parabolic", "elliptic")},
               **{f"{k}_its": sum(its[k]) / steps for k in ("parabolic", "elliptic")},
               "step_ms": 1e3 * wall / steps}
    return report(sim, out)


def run_case(name, grid, args, lv_spacing, petsc_args):
    cmd = mpirun_command(args.ranks) + [sys.executable, "-m", "cardiosim.bench.mask", "--single", name,
                                        "--grid", grid, "--steps", str(args.steps), "--model",
                                        args.model, "--placement", args.placement, "--lv-spacing", str(lv_spacing),
                                        "--ode-substeps", str(args.ode_substeps), "--current-density",
                                        str(args.current_density),
                                        "--integrator", cell_integrator(args.model, args.integrator), "--", *petsc_args]
    return run_single(cmd)


def markdown(results, meta) -> str:
    r0 = results[0]
    lines = ["### Tissue inside the box: masked against the whole box"
             + ("" if r0["placement"] == "cpu" else f", {r0['placement']} on the GPU"), "",
             f"{meta['date']} · {meta['machine']['cpu']} ({meta['machine']['cores']} cores) · GPU: "
             f"{meta['machine']['gpu']} · `{meta['command']}`", "",
             f"Bidomain, {r0['model']} cells ({r0['placement']} placement, {r0.get('integrator', 'forward-euler')}), "
             "dt 0.02 ms, times per PDE step (max over "
             "ranks) after a warm-up step. A masked grid has cells at its tissue nodes only; its systems are solved "
             "on the tissue nodes (tissue.solve_on = \"tissue\", the CPU placements) or on every node of the box."
             + (" The limits of docs/dev/design.md §8 are the GPU kernel's and do not apply to this CPU run."
                if r0["placement"] == "cpu" else ""), "",
             "| anatomy | grid | ranks | tissue nodes | elliptic | parabolic ms (its) | elliptic ms (its) | "
             "reaction ms | step ms |", "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        grid = GRIDS[r["grid"]]
        lines.append(f"| {r['anatomy']} | {grid}, {r['nodes']:,} nodes | {r['ranks']} | {r['tissue_nodes']:,} | "
                     f"{r['elliptic_solver']} | {r['parabolic_ms']:.2f} ({r['parabolic_its']:.1f}) | "
                     f"{r['elliptic_ms']:.2f} ({r['elliptic_its']:.1f}) | {r['reaction_ms']:.2f} | "
                     f"{r['step_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def masked_over_box(results) -> list[str]:
    """Per anatomy, the masked grid's step (solved on the box, the GPU's way) over the whole box's, both with the
    default solvers: per round, and the ratio of the medians."""
    lines = []
    for anatomy in dict.fromkeys(r["anatomy"] for r in results):
        step = {g: {r["round"]: r["step_ms"] for r in results
                    if r["anatomy"] == anatomy and r["grid"] == g and not r["options"]} for g in ("masked", "box")}
        rounds = sorted(set(step["masked"]) & set(step["box"]))
        if not rounds:
            continue
        masked, box = (float(np.median([step[g][k] for k in rounds])) for g in ("masked", "box"))
        per = ", ".join(f"{step['masked'][k] / step['box'][k]:.3f}" for k in rounds)
        lines.append(f"{anatomy}: masked / whole box, step: medians {masked:.2f} / {box:.2f} ms = "
                     f"**{masked / box:.3f}** over {len(rounds)} round(s) (per round: {per})")
    return lines


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ours = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="cardiosim bench mask", description=__doc__.split("\n")[0])
    p.add_argument("--anatomies", nargs="+", default=["disc", "lv"], choices=["disc", "lv"])
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--model", default="mitchell-schaeffer", help="cell model (resident: one with a C kernel, tt06)")
    p.add_argument("--placement", default="cpu", choices=["cpu", "resident"], help="resident: one rank per GPU")
    p.add_argument("--lv-spacing", type=float, nargs="+", default=[0.05], help="the idealised LV's spacings (cm)")
    p.add_argument("--ode-substeps", type=int, default=1, help="ODE substeps per 0.02 ms step (tt06: 10)")
    p.add_argument("--current-density", type=float, default=-150.0,
                   help="the stimulus (uA/cm^2; tt06: -52, as its tests)")
    p.add_argument("--integrator", choices=["forward-euler", "rush-larsen", "grl1"],
                   help="cell.integrator (default: rush-larsen for a model with gates, tt06; else forward-euler)")
    p.add_argument("--no-gamg", action="store_true", help="the default elliptic preconditioner only")
    p.add_argument("--rounds", type=int, default=1, help="runs of every case, the grids alternating")
    p.add_argument("--write", help="markdown page to update (the table replaces its own section)")
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--single", help=argparse.SUPPRESS)
    p.add_argument("--grid", choices=list(GRIDS), default="box", help=argparse.SUPPRESS)
    args = p.parse_args(ours)
    if args.single:
        single(args.single, args.grid, args)
        return 0
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(),
            "command": "cardiosim bench mask " + " ".join(argv)}
    results = []
    cases = [(name, h) for name in args.anatomies for h in (args.lv_spacing if name == "lv" else [0.0])]
    if args.rounds < 1:
        p.error(f"--rounds {args.rounds}: at least 1")
    for (name, h), rnd in ((c, k) for c in cases for k in range(1, args.rounds + 1)):
        # the resident placement solves on the box whatever solve_on says: no tissue-only row there
        for grid in ("tissue", "masked", "box") if args.placement == "cpu" else ("masked", "box"):
            gamg = [] if args.no_gamg or grid == "tissue" else [["-elliptic_pc_type", "gamg"]]    # tissue: GAMG
            for extra in ([], *gamg):
                r = run_case(name, grid, args, h, extra)
                r.update(round=rnd, options=" ".join(extra))
                results.append(r)
                print(f"{r['anatomy']:5} {grid:6} {r['elliptic_solver']:8} step "
                      f"{r['step_ms']:8.2f} ms (parabolic {r['parabolic_ms']:.2f}, elliptic {r['elliptic_ms']:.2f} ms "
                      f"/ {r['elliptic_its']:.1f} its, reaction {r['reaction_ms']:.2f})", flush=True)
    key = "mask" if args.placement == "cpu" else f"mask:{args.placement}"
    publish(markdown(results, meta) + "\n" + "\n".join(masked_over_box(results)) + "\n", meta, results, args.json,
            args.write, key)
    return 0

if __name__ == "__main__":
    sys.exit(main())

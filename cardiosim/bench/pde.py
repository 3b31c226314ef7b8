"""PDE-step benchmark: time and Krylov iterations per step of the parabolic and elliptic solves, against unknowns.

A 2D bidomain sheet with fibres at 30° (box stencil, the harder case), Mitchell–Schaeffer cells and a wave
started at the left edge, on n × n nodes for n in --sizes; ``--steps`` PDE steps after one warm-up step.

    python -m cardiosim.bench.pde --ranks 1 2 --json benchmarks/raw/pde.json
    python -m cardiosim.bench.pde --ranks 16 --label "H100 node, 16 CPU ranks" --json benchmarks/raw/pde-16.json
    python -m cardiosim.bench.pde --ranks 1 --label "H100, PETSc CUDA" --json benchmarks/raw/pde-cuda.json \\
        -- -dm_vec_type cuda -dm_mat_type aijcusparse -parabolic_pc_type jacobi
    python -m cardiosim.bench.pde --ranks 1 --placement resident --model tt06 --label "H100, resident" ...

--placement resident needs a model with a GPU kernel: --model tt06 (Rush-Larsen, one substep per PDE step, so that
the step is the PDE's; Mitchell–Schaeffer has no C kernel).

Each (size, ranks) case runs in its own ``mpirun`` so that ranks and PETSc options are exactly as given.
Results go to a JSON file (--json) and, with --write, to a markdown section of a page, replaced on re-run (keyed by
--label).
"""

from __future__ import annotations

import argparse
import datetime
import sys

from cardiosim.bench.launch import machine, petsc_args, publish, report, run_single, timed_steps
from cardiosim.runtime.mpi import mpirun_command

SHEET = """
[simulation]
equations = "bidomain"
duration = {duration!r}
dt = 0.02
ode_substeps = 1
progress_interval = 0
[grid]
size = [{L!r}, {L!r}]
spacing = 0.01
[tissue]
fibre_angle = 30.0
[cell]
model = "{model}"
placement = "{placement}"
{cell_extra}
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.03, {L!r}]
duration = 1.0
current_density = {amp!r}
"""
MODELS = {"mitchell-schaeffer": dict(amp=-30.0, cell_extra=""),
          "tt06": dict(amp=-52.0, cell_extra='integrator = "rush-larsen"')}

# Reference points from docs/dev/design.md §3/§4 (H100 machine), quoted beside our numbers.
DESIGN_REFERENCE = ("docs/dev/design.md §3/§4 (H100): 1025² Poisson, CG+PCMG on GPU 6 its / 11.8 ms; PETSc CUDA CG+GAMG "
                    "1024² 15 ms vs 296 ms on 16 CPU ranks.")


def single(n: int, steps: int, placement: str = "auto", model: str = "mitchell-schaeffer") -> dict:
    """Run one case in this (MPI) process group; returns per-step timings on rank 0."""
    import petsc4py
    petsc4py.init(sys.argv[:1] + petsc_args())
    # after petsc4py.init: these import MPI and PETSc, which must start with the options above
    from cardiosim import config
    from cardiosim.simulation.loop import Simulation
    from cardiosim.solvers.stencil_matrix import type_name
    L = (n - 1) * 0.01
    cfg = config.loads(SHEET.format(L=L, duration=0.02 * (steps + 1), placement=placement, model=model,
                                    **MODELS[model]), name=f"bench-{n}")
    sim = Simulation(cfg, write_output=False)
    wall, tm, its = timed_steps(sim)
    out = {
        "n": n, "unknowns": n * n, "ranks": sim.comm.size, "steps": steps,
        "vec_type": sim.V.getType(), "mat_type": type_name(sim.tissue.Ki),
        "parabolic": {"ms_per_step": 1e3 * tm["parabolic"]["max"] / steps,
                      "iterations": sum(its["parabolic"]) / steps, "solver": sim.tissue.parabolic.describe()},
        "elliptic": {"ms_per_step": 1e3 * tm["elliptic"]["max"] / steps,
                     "iterations": sum(its["elliptic"]) / steps, "solver": sim.tissue.elliptic.describe()},
        "reaction_ms_per_step": 1e3 * tm["reaction"]["max"] / steps,
        "io_ms_per_step": 1e3 * tm["io"]["max"] / steps,
        "placement": sim.layout["placement"], "model": model, "setup_s": sim.setup_time,
        "step_ms": 1e3 * wall / steps,
        "unknowns_per_s": 2 * n * n / (wall / steps),   # Vm and φe per step
    }
    return report(sim, out)


def run_case(n, ranks, steps, petsc_args, placement="auto", model="mitchell-schaeffer"):
    cmd = mpirun_command(ranks) + [sys.executable, "-m", "cardiosim.bench.pde", "--single", str(n),
                                   "--steps", str(steps), "--placement", placement, "--model", model,
                                   "--", *petsc_args]
    return run_single(cmd)


def markdown(label, results, meta) -> str:
    lines = [f"### PDE step: {label}", "",
             f"{meta['date']} · {meta['machine']['cpu']} ({meta['machine']['cores']} cores) · GPU: "
             f"{meta['machine']['gpu']} · `{meta['command']}`", "",
             f"2D bidomain, fibres at 30° (box stencil), {results[0].get('model', 'mitchell-schaeffer')}, "
             f"placement {results[0].get('placement', 'cpu')}, dt 0.02 ms, "
             f"{results[0]['steps']} steps after a warm-up; times are the max over ranks.", "",
             "| unknowns (n²) | ranks | vec / mat | parabolic ms/step | its | elliptic ms/step | its | "
             "reaction + io ms/step | step ms | unknowns/s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['unknowns']:,} ({r['n']}²) | {r['ranks']} | {r['vec_type']} / {r['mat_type']} | "
                     f"{r['parabolic']['ms_per_step']:.2f} | {r['parabolic']['iterations']:.1f} | "
                     f"{r['elliptic']['ms_per_step']:.2f} | {r['elliptic']['iterations']:.1f} | "
                     f"{r['reaction_ms_per_step'] + r.get('io_ms_per_step', 0.0):.2f} | "
                     f"{r['step_ms']:.2f} | {r['unknowns_per_s']:.3g} |")
    lines += ["", f"Solvers: parabolic {results[0]['parabolic']['solver']}, elliptic "
                  f"{results[0]['elliptic']['solver']}. Reference: {DESIGN_REFERENCE}", ""]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    ours = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="python -m cardiosim.bench.pde", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[101, 201, 401, 1025], help="n of the n×n grids")
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--label", default="")
    p.add_argument("--write", help="markdown page to update (the table replaces its own section)")
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--placement", default="auto", help="cell.placement (resident: PDE and cells on the GPU)")
    p.add_argument("--model", default="mitchell-schaeffer", choices=sorted(MODELS))
    p.add_argument("--single", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(ours)
    if args.single:
        single(args.single, args.steps, args.placement, args.model)
        return 0
    extra = petsc_args()
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(),
            "command": "python -m cardiosim.bench.pde " + " ".join(argv)}
    label = args.label or f"{meta['machine']['host']}, ranks {' '.join(map(str, args.ranks))}"
    results = []
    for n in args.sizes:
        for ranks in args.ranks:
            r = run_case(n, ranks, args.steps, extra, args.placement, args.model)
            results.append(r)
            print(f"{r['unknowns']:>9} unknowns, {ranks:>2} ranks: parabolic {r['parabolic']['ms_per_step']:8.2f} ms "
                  f"({r['parabolic']['iterations']:.1f} its), elliptic {r['elliptic']['ms_per_step']:8.2f} ms "
                  f"({r['elliptic']['iterations']:.1f} its), step {r['step_ms']:8.2f} ms", flush=True)
    publish(markdown(label, results, meta), meta, results, args.json, args.write, "pde:" + label)
    return 0


if __name__ == "__main__":
    sys.exit(main())

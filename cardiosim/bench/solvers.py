"""Solver-choice benchmark: iterations, ms and J per solve of the bidomain's two systems for each linear
solver choice, on the resident placement's GPU matrices.

Problems: the 2D bidomain sheet of cardiosim.bench.pde at 1025² (0.01 cm, fibres at 30°, box stencil) and the Table
4.1 sheet (run/seed-table41.toml: 625², 8 µm, fibres along x, star stencil). Choices, per system:
  default      the resident placement's (StencilCG + Jacobi or StencilMG; cardiosim.solvers.linear)
  pcmg         PETSc CG + PCMG (the several-rank GPU settings: Galerkin, Chebyshev/Jacobi smoothers)
  smg-gj       StencilCG + StencilMG with the Gauss–Jordan coarsest inverse (on the device)
  cicc-aij     PETSc CG + coloured ICC(0) (cardiosim.solvers.coloured_icc), products in aijcusparse
  cicc-sell    the same with products in sellcuda (sliced ELLPACK, pJDS's successor)
Each solve: the same right-hand side b = A·x for a smooth x (sin in x and y, mV), from a zero initial guess, the
defaults' tolerances (rtol 1e-10, atol 1e-12); each solver set up (and solved once) before timing. Timing and
energy over repeats of at least --seconds of wall time (NVML's counter updates about every 100 ms: 2 s keep its
step under ~5 %); J per solve = board-energy difference / solves, "n/a" without NVML. A choice whose first solve
takes more than --max-solve-s seconds is skipped (said in the table).

    python -m cardiosim.bench.solvers --json benchmarks/raw/solvers.json                    # GPU node, ~3 min
    python -m cardiosim.bench.solvers --cpu --n 65 --table41-n 41 --seconds 0.2            # host build, a check
"""

from __future__ import annotations

import argparse
import datetime
import math
import sys
import time
from pathlib import Path

import numpy as np

from cardiosim.bench.launch import machine, publish
from cardiosim.bench import pde
from cardiosim.runtime import energy

TABLE41 = Path(__file__).resolve().parents[2] / "run" / "seed-table41.toml"
CHOICES = ("default", "pcmg", "smg-gj", "cicc-aij", "cicc-sell")
CICC = {"ksp_type": "cg", "pc_type": "python", "pc_python_type": "cardiosim.solvers.coloured_icc.ColouredICC"}


def choice_options(choice: str, system: str, grid) -> dict | None:
    """PETSc options (without prefix) of a choice, over the system's default tolerances; None: the default."""
    # lazy: it imports PETSc, which main starts first (petsc4py.init, with the benchmark's options)
    from cardiosim.solvers import linear as ls
    base = dict(ls.PARABOLIC_DEFAULTS if system == "parabolic" else ls.ELLIPTIC_DEFAULTS)
    base = {k: v for k, v in base.items() if not k.startswith("sub_") and k != "pc_type"}
    if choice == "default":
        return None
    if choice == "pcmg":
        return {**base, "ksp_type": "cg", **pcmg(grid)}
    if choice == "smg-gj":
        return {**base, **ls.STENCIL_CG, **ls.STENCIL_MG, "smg_coarse_solve": "gauss-jordan"}
    if choice == "cicc-aij":
        return {**base, **CICC}
    if choice == "cicc-sell":
        return {**base, **CICC, "cicc_mat_type": "sell"}
    raise ValueError(choice)


def pcmg(grid) -> dict:
    """The several-rank GPU PCMG settings (cardiosim.solvers.linear.gpu_elliptic_defaults), or the CPU's."""
    from petsc4py import PETSc

    # lazy: it imports PETSc, which main starts first (petsc4py.init, with the benchmark's options)
    from cardiosim.solvers import linear as ls
    opts = PETSc.Options()
    opts["elliptic_pc_type"] = "mg"          # as if the user had chosen PCMG: the several-rank branch
    try:
        pc = ls.gpu_elliptic_defaults(grid) if grid.gpu else ls.elliptic_pc_defaults(grid)
    finally:
        del opts["elliptic_pc_type"]
    return pc


def problems(args) -> dict:
    # lazy: cardiosim.config imports mpi4py (through cardiosim.reaction), which this module does not
    from cardiosim import config
    placement = "cpu" if args.cpu else "resident"
    L = (args.n - 1) * 0.01
    sheet = pde.SHEET.format(L=L, duration=0.04, placement=placement, model="tt06", **pde.MODELS["tt06"])
    over = [f'cell.placement="{placement}"', f'cell.backend="{"native" if args.cpu else "cuda"}"']
    if args.table41_n:
        L41 = round((args.table41_n - 1) * 0.0008, 10)
        over.append(f"grid.size=[{L41!r}, {L41!r}]")
    out = {}
    if "sheet" in args.problems:
        out[f"2D bidomain {args.n}² (0.01 cm, fibres 30°, box)"] = config.loads(sheet, over[1:2], name="bench-sheet")
    if "table41" in args.problems:
        out[f"Table 4.1 sheet {args.table41_n or 625}² (8 µm, star)"] = config.load(TABLE41, over)
    return out


def smooth_rhs(A, grid):
    """b = A·x, x = sin(πx/Lx)·sin(πy/Ly)·100 mV: consistent for the singular system, every mode of the solver
    present, and no accidental head start from a random vector's high frequencies."""
    x, b = A.createVecs()
    c = grid.coords()
    L = np.maximum(grid.size, 1e-12)
    x.setArray(100.0 * np.sin(np.pi * c[:, 0] / L[0]) * np.sin(np.pi * c[:, 1] / L[1]))
    A.mult(x, b)
    x.destroy()
    return b


def measure(solver, b, meter, seconds: float, max_solve_s: float) -> dict:
    x = b.duplicate()
    x.set(0.0)
    t0 = time.perf_counter()
    solver.run(b, x)                                # warm-up (first-solve set-up) and the iteration count
    first = time.perf_counter() - t0
    reason = solver.ksp.getConvergedReason()
    out = {"iterations": solver.ksp.getIterationNumber(), "reason": reason, "first_solve_s": first}
    if first > max_solve_s:
        out["skipped"] = f"first solve {first:.1f} s > {max_solve_s:g} s"
        return out
    reps = max(3, math.ceil(seconds / max(first, 1e-6)))
    e0, t0 = meter.read(), time.perf_counter()
    done = 0
    while done < reps or time.perf_counter() - t0 < seconds:
        x.set(0.0)
        solver.run(b, x)
        done += 1
    wall = time.perf_counter() - t0
    e1 = meter.read()
    out.update(solves=done, ms_per_solve=1e3 * wall / done,
               j_per_solve=None if e0 is None else (e1 - e0) / done,
               mean_power_w=None if e0 is None else (e1 - e0) / wall)
    out["x"] = x
    return out


def run_problem(label, cfg, args, meter) -> list[dict]:
    from petsc4py import PETSc

    # lazy: these import PETSc, which main starts first (petsc4py.init, with the benchmark's options)
    from cardiosim.domain.grid import Grid
    from cardiosim.solvers.linear import LinearSolver
    from cardiosim.solvers.stencil_matrix import type_name
    from cardiosim.tissue import make
    grid = Grid(cfg, PETSc.COMM_SELF)
    cross = grid.has_cross_terms(grid.fibres(cfg.tissue, grid.owned))      # as Simulation chooses it
    stencil = cfg.grid.stencil if cfg.grid.stencil != "auto" else ("box" if cross else "star")
    t0 = time.perf_counter()
    tis = make(grid, cfg, stencil)
    print(f"\n{label}: {'x'.join(map(str, grid.da.getSizes()))} nodes, {stencil} stencil, matrices "
          f"{type_name(tis.Ki)}, tissue set-up {time.perf_counter() - t0:.1f} s", flush=True)
    rows = []
    for system in ("parabolic", "elliptic"):
        default = getattr(tis, system)
        A = default.A
        b = smooth_rhs(A, grid)
        ref = None
        for choice in args.choices:
            opts = choice_options(choice, system, grid)
            print(f"  {system:<9} {choice:<10} ...", end="\r", flush=True)    # where a slow choice is, while it runs
            t0 = time.perf_counter()
            try:
                solver = default if opts is None else LinearSolver(system, A, grid=grid, defaults=opts)
            except Exception as e:          # an option PETSc refuses: a row that says why, not a lost table
                rows.append({"problem": label, "system": system, "choice": choice, "skipped": str(e)[:120]})
                print(f"  {system:<9} {choice:<10} set-up failed: {e}", flush=True)
                continue
            setup = time.perf_counter() - t0
            r = measure(solver, b, meter, args.seconds, args.max_solve_s)
            x = r.pop("x", None)
            if x is not None:
                xa = x.getArray(readonly=True).copy()
                if system == "elliptic":
                    xa -= xa.mean()
                if ref is None:
                    ref = xa
                r["max_rel_diff_vs_first"] = float(np.abs(xa - ref).max() / np.abs(ref).max())
                x.destroy()
            r.update(problem=label, system=system, choice=choice, solver=solver.describe(), setup_s=setup,
                     nodes=int(A.getSize()[0]), mat_type=type_name(solver.ksp.getOperators()[0]))
            rows.append(r)
            print(f"  {system:<9} {choice:<10} {r['solver']:<22} {r['iterations']:5d} its  " +
                  (r.get("skipped") or f"{r['ms_per_solve']:9.3f} ms  {_j(r.get('j_per_solve')):>9} J  "
                                        f"({r['solves']} solves)  set-up {setup:.2f} s  "
                                        f"diff {r['max_rel_diff_vs_first']:.1e}"), flush=True)
            if solver is not default:
                solver.destroy()
        b.destroy()
    return rows


def _j(v) -> str:
    return "n/a" if v is None else f"{v:.4g}"


def markdown(rows, meta, args) -> str:
    lines = [f"### Solver choices: {meta['label']}", "",
             f"{meta['date']} · GPU: {meta['machine']['gpu']} · `{meta['command']}`", "",
             "One solve of each system: b = A·x for a smooth x, zero initial guess, rtol 1e-10 / atol 1e-12; each "
             f"solver set up and solved once before timing; ms and J per solve over ≥ {args.seconds:g} s of "
             "repeats; J = NVML board energy (idle power included) / solves. \"diff\": max |x − x_default| / "
             "max |x_default| (φe with zero mean).", "",
             "| problem | system | choice | solver | mat type | its | ms/solve | J/solve | set-up s | diff |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "ms_per_solve" not in r:
            lines.append(f"| {r['problem']} | {r['system']} | {r['choice']} | {r.get('solver', '')} | "
                         f"{r.get('mat_type', '')} | {r.get('iterations', '')} | skipped: {r['skipped']} | | | |")
            continue
        lines.append(f"| {r['problem']} | {r['system']} | {r['choice']} | {r['solver']} | {r['mat_type']} | "
                     f"{r['iterations']} | {r['ms_per_solve']:.3f} | {_j(r['j_per_solve'])} | {r['setup_s']:.2f} | "
                     f"{r['max_rel_diff_vs_first']:.1e} |")
    return "\n".join(lines + [""])


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m cardiosim.bench.solvers", description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=1025, help="nodes per side of the 0.01 cm sheet")
    p.add_argument("--table41-n", type=int, default=0, help="nodes per side of the Table 4.1 sheet (0: its 625)")
    p.add_argument("--problems", nargs="+", default=["sheet", "table41"], choices=["sheet", "table41"])
    p.add_argument("--choices", nargs="+", default=list(CHOICES), choices=CHOICES)
    p.add_argument("--seconds", type=float, default=2.0, help="least wall time of the timed repeats per choice")
    p.add_argument("--max-solve-s", type=float, default=5.0, help="skip a choice whose first solve takes longer")
    p.add_argument("--cpu", action="store_true", help="host matrices and the host builds (no GPU: a check)")
    p.add_argument("--label", default="")
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--write", help="markdown page to update (the table replaces its own section)")
    args = p.parse_args(argv)
    import petsc4py
    petsc4py.init(sys.argv[:1])
    meter = energy.Meter([] if args.cpu else [energy.bus_id(0)])
    if not meter.available:
        print(f"energy: n/a ({meter.why})")
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(),
            "command": "python -m cardiosim.bench.solvers " + " ".join(argv)}
    meta["label"] = args.label or f"{meta['machine']['gpu'] if not args.cpu else 'host'}, 1 rank"
    t0 = time.perf_counter()
    rows = []
    for label, cfg in problems(args).items():
        rows += run_problem(label, cfg, args, meter)
    meta["total_s"] = time.perf_counter() - t0
    print(f"\ntotal {meta['total_s']:.0f} s\n")
    publish(markdown(rows, meta, args), meta, rows, args.json, args.write, "solvers:" + meta["label"])
    return 0


if __name__ == "__main__":
    sys.exit(main())

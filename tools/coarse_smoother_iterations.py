"""Iteration counts of cardiosim's CG + multigrid (host build) with multicolour SOR on every level against Jacobi
from level 0 or 1 (smg_jacobi_from, smg_jacobi_omega; docs/decisions/0043-jacobi-on-the-coarse-levels-on-gpus.md): Table
4.1's bidomain sheet (run/seed-table41.toml) and the idealised LV (masked; 0.05 cm unless a spacing is given), both
systems, one solve each of the tissue's own matrix with a zero first guess, coarsest level up to 2048 nodes (the GPU
runs' limit). Iterations are what the host can say; the time is the GPU's (`cardiosim bench table41`,
`cardiosim bench mask --placement resident`).

    .venv/bin/python tools/coarse_smoother_iterations.py [t41] [lv [0.025]]
"""
import sys
import tempfile
from pathlib import Path

import numpy as np
import petsc4py

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))   # this checkout's cardiosim

# SOR everywhere, then Jacobi from level 0 or 1 at three dampings
VARIANTS = [("sor", {})] + [(f"jac{f} w{w}", {"smg_jacobi_from": str(f), "smg_jacobi_omega": str(w)})
                            for f in (0, 1) for w in (0.7, 0.8, 0.9)]


def run(label, cfg, stencil, names):
    """One line per system: the hierarchy and each variant's iteration count."""
    from petsc4py import PETSc

    from cardiosim.domain.grid import Grid
    from cardiosim.solvers import krylov, multigrid
    from cardiosim.tissue import make as make_tissue
    for name in names:
        out = []
        for vname, extra in VARIANTS:
            o = PETSc.Options()
            mine = {"ksp_type": "python", "ksp_python_type": krylov.PYTHON_TYPE, "pc_type": "python",
                    "pc_python_type": multigrid.PYTHON_TYPE, "smg_coarse_max": "2048", **extra}
            for k, v in mine.items():
                o[f"{name}_{k}"] = v
            try:
                grid = Grid(cfg, PETSc.COMM_SELF)
                s = getattr(make_tissue(grid, cfg, stencil), name)
            finally:
                for k in mine:
                    del o[f"{name}_{k}"]
            x_true, b = s.A.createVecs()
            x = x_true.duplicate()
            xyz = grid.coords()
            inside = ~grid.mask.outside() if grid.mask is not None else np.ones(grid.n_nodes, bool)
            noise = 0.1 * np.random.default_rng(1).standard_normal(len(xyz))
            x_true.setArray(np.where(inside, np.sin(300.0 * xyz[:, 0]) * np.cos(200.0 * xyz[:, 1]) + noise, 0.0))
            s.A.mult(x_true, b)
            s.ksp.setInitialGuessNonzero(False)
            s.ksp.solve(b, x)
            out.append(f"{vname}: {s.ksp.getIterationNumber()}"
                       + ("" if s.ksp.getConvergedReason() > 0 else " (diverged)"))
            sizes = s.ksp.getPC().getPythonContext().hierarchy.sizes
        print(label, name, "levels", " > ".join("x".join(map(str, n[:grid.dim])) for n in sizes), "|",
              " | ".join(out), flush=True)


def main(args):
    petsc4py.init(["-no_signal_handler"])
    from cardiosim import config
    which = args or ["t41", "lv"]
    if "t41" in which:
        run("t41", config.loads((ROOT / "run" / "seed-table41.toml").read_text()), "box", ["elliptic", "parabolic"])
    if "lv" in which:
        from cardiosim.bench.mask import RUN, anatomy
        spacing = float(args[-1]) if args and args[-1][0] == "0" else 0.05
        with tempfile.TemporaryDirectory() as tmp:
            pieces = anatomy("lv", Path(tmp), True, spacing)
            pieces["tissue"] += '\nsolve_on = "box"'
            cfg = config.loads(RUN.format(duration=0.04, model="mitchell-schaeffer", cell="", substeps=1, stim=-50.0,
                                          **pieces))
            run("lv", cfg, "star", ["elliptic", "parabolic"])


if __name__ == "__main__":
    main(sys.argv[1:])

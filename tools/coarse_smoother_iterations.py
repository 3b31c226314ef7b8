"""Iteration counts of cardiosim's CG + multigrid (host build) with multicolour SOR on every level against Jacobi
from level 0 or 1 (smg_jacobi_from, smg_jacobi_omega; docs/decisions.md, "Jacobi on the coarse levels"): Table
4.1's bidomain sheet (run/seed-table41.toml) and the idealised LV (masked; 0.05 cm unless a spacing is given), both
systems, one solve each of the tissue's own matrix with a zero first guess, coarsest level up to 2048 nodes (the GPU
runs' limit). Iterations are what the host can say; the time is the GPU's (tools/gpu/coarse-jacobi-ab.sh).

    .venv/bin/python tools/coarse_smoother_iterations.py [t41] [lv [0.025]]
"""
import sys, tempfile
from pathlib import Path
import numpy as np
import petsc4py
petsc4py.init(["-no_signal_handler"])
from petsc4py import PETSc
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cardiosim import config
from cardiosim.grid import Grid
from cardiosim.tissue import make as make_tissue
from cardiosim.solvers import krylov, multigrid

def run(label, cfg, stencil, variants, names):
    for name in names:
        out = []
        for vname, extra in variants:
            o = PETSc.Options()
            mine = {"ksp_type": "python", "ksp_python_type": krylov.PYTHON_TYPE, "pc_type": "python",
                    "pc_python_type": multigrid.PYTHON_TYPE, "smg_coarse_max": "2048", **extra}
            for k, v in mine.items():
                o[f"{name}_{k}"] = v
            try:
                grid = Grid(cfg, PETSc.COMM_SELF)
                tis = make_tissue(grid, cfg, stencil)
                s = getattr(tis, name)
                x_true, b = s.A.createVecs()
                x = x_true.duplicate()
                xyz = grid.coords()
                inside = ~grid.mask.outside() if grid.mask is not None else np.ones(grid.n_nodes, bool)
                smooth = np.sin(300.0 * xyz[:, 0]) * np.cos(200.0 * xyz[:, 1]) + np.random.default_rng(1).standard_normal(len(xyz)) * 0.1
                x_true.setArray(np.where(inside, smooth, 0.0))
                s.A.mult(x_true, b)
                s.ksp.setInitialGuessNonzero(False)
                s.ksp.solve(b, x)
                its = s.ksp.getIterationNumber()
                mg = s.ksp.getPC().getPythonContext()
                out.append(f"{vname}: {its}" + ("" if s.ksp.getConvergedReason() > 0 else " (diverged)"))
            finally:
                for k in mine:
                    del o[f"{name}_{k}"]
        print(label, name, "levels", " > ".join("x".join(map(str, n[:grid.dim])) for n in mg.hierarchy.sizes), "|",
              " | ".join(out), flush=True)

V = [("sor", {})] + [(f"jac{f} w{w}", {"smg_jacobi_from": str(f), "smg_jacobi_omega": str(w)})
                      for f in (0, 1) for w in (0.7, 0.8, 0.9)]
which = sys.argv[1:] or ["t41", "lv"]
if "t41" in which:
    text = (Path(__file__).resolve().parent.parent / "run" / "seed-table41.toml").read_text()
    cfg = config.loads(text)
    run("t41", cfg, "box", V, ["elliptic", "parabolic"])
if "lv" in which:
    from cardiosim.bench.mask import RUN, anatomy
    with tempfile.TemporaryDirectory() as tmp:
        pieces = anatomy("lv", Path(tmp), True, float(sys.argv[-1]) if sys.argv[-1][0] == "0" else 0.05)
        pieces["tissue"] += '\nsolve_on = "box"'
        cfg = config.loads(RUN.format(duration=0.04, model="mitchell-schaeffer", cell="", substeps=1, stim=-50.0, **pieces))
        run("lv", cfg, "star", V, ["elliptic", "parabolic"])

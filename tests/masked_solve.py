"""One solve of a masked grid's tissue system (tissue.label_file: a ring in 2D, an idealised LV-like shell in 3D)
with cardiosim's stencil solvers on every rank of MPI_COMM_WORLD, with the active-node loops (smg_active true) and
without (false: every node of the box), then with them on rank 0 alone (COMM_SELF). Prints one JSON line on rank 0:
iteration counts, converged reasons, the largest differences between the solutions, each level's active share.
Run by tests/test_masked_mg.py (host build), under mpirun for several ranks:

    mpirun -n 2 python tests/masked_solve.py --dim 3 --h 0.1 --system elliptic --pc mg --layout ranks

The right-hand side is A x_true with x_true zero outside the tissue for the elliptic system (the tissue model's
right-hand side is zero there) and the first guess equal to x_true outside for the parabolic one (the model's
V* = V there): the initial residual is zero outside, where the active solve equals the box solve. ``--outside``
starts from a guess that is not (the box solve then carries the outside residual through its iterations; the
active one solves those rows at once: the same solution, to the tolerance)."""

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]   # this checkout's cardiosim

CONFIG = """
[simulation]
equations = "bidomain"
duration = 1.0
dt = 0.02
[grid]
size = {size}
spacing = {h}
stencil = "{stencil}"
[tissue]
fibre_angle = 30.0
sigma_il = 1.74
sigma_it = 0.19
sigma_el = 6.2
sigma_et = 2.4
label_file = "{labels}"
[cell]
model = "mitchell-schaeffer"
"""


def labels(dim: int, h: float) -> tuple[list[float], np.ndarray]:
    """(the box's size in cm, the label image (z, y, x) or (y, x)): 2D a ring with a notch (one piece, not
    symmetric), 3D a truncated ellipsoidal shell (the idealised LV's shape: endocardium 0.7 x 1.7, epicardium
    1.0 x 2.0 cm, cut at z = 0.5 above the centre) in a box one node wider than it."""
    if dim == 2:
        size = [1.2, 1.0]
        n = [int(round(s / h)) + 1 for s in size]
        y, x = np.meshgrid(np.arange(n[1]) * h, np.arange(n[0]) * h, indexing="ij")
        r = np.hypot(x - 0.6, y - 0.5)
        lab = (r < 0.45) & (r > 0.25) & ~((x > 0.6) & (np.abs(y - 0.5) < 0.06))
        return size, lab.astype(np.int16)
    lo, hi = np.array([-1.0 - h, -1.0 - h, -2.0 - h]), np.array([1.0 + h, 1.0 + h, 0.5 + h])
    size = list(hi - lo)
    n = [int(round(s / h)) + 1 for s in size]
    size = [(m - 1) * h for m in n]
    z, y, x = np.meshgrid(*(lo[d] + np.arange(n[d]) * h for d in (2, 1, 0)), indexing="ij")
    inside = lambda a, c: (x / a) ** 2 + (y / a) ** 2 + (z / c) ** 2 <= 1.0 + 1e-9
    lab = inside(1.0, 2.0) & ~inside(0.7, 1.7) & (z <= 0.5 + 1e-9)
    return size, lab.astype(np.int16)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dim", type=int, choices=(2, 3), required=True)
    p.add_argument("--h", type=float, required=True)
    p.add_argument("--system", choices=("parabolic", "elliptic"), required=True)
    p.add_argument("--pc", choices=("none", "jacobi", "mg", "petsc-cg-mg"), required=True)
    p.add_argument("--layout", choices=("ranks", "root"), default="ranks")
    p.add_argument("--agglomerate", type=int, default=64)
    p.add_argument("--halo", choices=("colour", "sweep"), default="sweep")
    p.add_argument("--omega", type=float, default=1.0)
    p.add_argument("--outside", action="store_true", help="a first guess with a residual outside the tissue")
    p.add_argument("--placement", choices=("cpu", "resident"), default="cpu",
                   help="resident: GPU matrices, the GPU build (one GPU per rank)")
    p.add_argument("--transport", choices=("auto", "mpi-host", "ipc"), default="auto")
    p.add_argument("--jacobi-from", type=int, default=-1, help="smg_jacobi_from (-1: SOR on every level)")
    p.add_argument("--finest-sweeps", type=int, default=0, help="smg_finest_sweeps (0: smg_sweeps)")
    args = p.parse_args()

    from ranks_solve import start_petsc
    world = start_petsc(args.placement)
    from petsc4py import PETSc

    from cardiosim import config
    from cardiosim.domain.grid import Grid
    from cardiosim.solvers import krylov, multigrid
    from cardiosim.tissue import make as make_tissue
    from cardiosim.tissue.equations import balance_levels

    size, lab = labels(args.dim, args.h)
    path = None
    if world.rank == 0:
        path = str(Path(tempfile.mkdtemp()) / "labels.npy")
        np.save(path, lab)
    path = world.bcast(path)
    stencil = "box" if args.dim == 2 else "star"
    text = CONFIG.format(size=size, h=args.h, stencil=stencil, labels=path)
    if args.placement == "resident":
        text = text.replace('model = "mitchell-schaeffer"', 'model = "tt06"\nplacement = "resident"\nbackend = "cuda"')
    cfg = config.loads(text)
    name = args.system
    opts = {"ksp_type": "python", "ksp_python_type": krylov.PYTHON_TYPE, "ksp_rtol": "1e-10",
            "smg_layout": args.layout, "smg_agglomerate": str(args.agglomerate), "smg_halo": args.halo,
            "smg_omega": str(args.omega), "smg_transport": args.transport}
    # only where asked: on GPU matrices the solvers' own defaults (Jacobi on a masked grid) are what is tested
    if args.jacobi_from >= 0:
        opts["smg_jacobi_from"] = str(args.jacobi_from)
    if args.finest_sweeps:
        opts["smg_finest_sweeps"] = str(args.finest_sweeps)
    if args.pc in ("mg", "petsc-cg-mg"):
        opts.update({"pc_type": "python", "pc_python_type": multigrid.PYTHON_TYPE})
    else:
        opts["pc_type"] = args.pc
    if args.pc == "petsc-cg-mg":
        opts["ksp_type"] = "cg"

    def solve(comm, active: bool):
        o = PETSc.Options()
        mine = dict(opts, smg_active=str(active).lower())
        for k, v in mine.items():
            o[f"{name}_{k}"] = v
        try:
            grid = Grid(cfg, comm, balance_levels)
            tis = make_tissue(grid, cfg, stencil)
        finally:
            for k in mine:
                del o[f"{name}_{k}"]
        s = getattr(tis, name)
        xyz = grid.coords()
        inside = ~grid.mask.outside()
        x_true, b = s.A.createVecs()
        x = x_true.duplicate()
        smooth = np.sin(3.0 * xyz[:, 0]) * np.cos(2.0 * xyz[:, 1]) + xyz[:, -1]
        guess = 0.1 * xyz[:, 0]
        if name == "elliptic":
            x_true.setArray(np.where(inside, smooth, 0.0))
            x.setArray(np.where(inside | args.outside, guess, 0.0))
        else:
            x_true.setArray(smooth - 80.0)
            x.setArray(np.where(inside, guess, smooth - 80.0 + (0.5 if args.outside else 0.0)))
        s.A.mult(x_true, b)
        s.ksp.solve(b, x)
        nat = grid.da.createNaturalVec()
        grid.da.globalToNatural(x, nat)
        scatter, whole = PETSc.Scatter.toZero(nat)
        scatter.scatter(nat, whole)
        out = whole.getArray(readonly=True).copy() if comm.getRank() == 0 else None
        ctx = s.ksp.getPythonContext() if s.ksp.getType() == "python" else s.ksp.getPC().getPythonContext()
        v = ctx.vcycle
        share = list(v.active_share) + (list(v.tail.active_share) if v.tail is not None else [])
        tissue = grid.mask.tissue.ravel()
        return s.ksp.getIterationNumber(), int(s.ksp.getConvergedReason()), out, share, tissue

    its_on, reason_on, x_on, share, tissue = solve(PETSc.COMM_WORLD, True)
    its_off, reason_off, x_off, _, _ = solve(PETSc.COMM_WORLD, False)
    if world.rank == 0:
        its_1, reason_1, x_1, share_1, _ = solve(PETSc.COMM_SELF, True)
        scale = np.abs(x_off).max()
        rel = lambda a, b: float(np.abs(a - b).max() / scale)
        if name == "elliptic":                 # one piece: defined up to a constant on the tissue
            x_1 = x_1 - x_1[tissue].mean() + x_on[tissue].mean()
        print(json.dumps({"ranks": world.size, "its_on": its_on, "its_off": its_off, "its_1": its_1,
                          "reason_on": reason_on, "reason_off": reason_off, "reason_1": reason_1,
                          "on_off": rel(x_on, x_off), "on_off_tissue": rel(x_on[tissue], x_off[tissue]),
                          "vs_1": rel(x_on, x_1), "share": share, "share_1": share_1,
                          "tissue_share": float(tissue.mean())}), flush=True)


if __name__ == "__main__":
    main()

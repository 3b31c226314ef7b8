"""One solve of a tissue system with cardiosim's stencil solvers on every rank of MPI_COMM_WORLD, then the same solve
on one rank (rank 0, COMM_SELF), compared: iteration counts, converged reasons and the solutions. Prints one JSON
line on rank 0. Run under mpirun by tests/test_solvers_ranks.py (host build, CI) and tests/test_solvers_ranks_gpu.py
(GPU build, one GPU per rank):

    mpirun -n 2 python tests/ranks_solve.py --size 0.5 0.3 --h 0.01 --system elliptic --pc mg [--placement resident]
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import petsc4py

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]   # this checkout's cardiosim


def start_petsc(placement: str):
    """petsc4py started for this placement (resident: each rank's GPU); MPI_COMM_WORLD."""
    from mpi4py import MPI
    init = ["-no_signal_handler"]
    if placement == "resident":
        from cardiosim.reaction.placement import petsc_device_options
        init += petsc_device_options(MPI.COMM_WORLD)
    petsc4py.init(init)
    return MPI.COMM_WORLD


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=float, nargs="+", required=True, help="domain extent per dimension (cm)")
    p.add_argument("--h", type=float, required=True, help="grid spacing (cm)")
    p.add_argument("--system", choices=("parabolic", "elliptic"), required=True)
    p.add_argument("--pc", choices=("none", "jacobi", "mg"), required=True)
    p.add_argument("--stencil", choices=("box", "star"), default="box")
    p.add_argument("--fibre", type=float, default=30.0, help="fibre angle (degrees)")
    p.add_argument("--layout", choices=("ranks", "root"), default="ranks")
    p.add_argument("--agglomerate", type=int, default=64, help="nodes per rank below which a level goes to rank 0")
    p.add_argument("--placement", choices=("cpu", "resident"), default="cpu")
    p.add_argument("--transport", choices=("auto", "mpi-host", "ipc"), default="auto")
    p.add_argument("--halo", choices=("colour", "sweep"), default="colour")
    p.add_argument("--graphs", choices=("on", "off"), default="on", help="the V-cycle as a CUDA graph (GPU build)")
    p.add_argument("--jacobi-from", type=int, default=-1, help="smg_jacobi_from: Jacobi on the levels from this one")
    p.add_argument("--finest-sweeps", type=int, default=0, help="smg_finest_sweeps: level 0's sweeps (0: smg_sweeps)")
    p.add_argument("--ksp", choices=("stencil", "petsc"), default="stencil",
                   help="the Krylov method on several ranks: cardiosim's CG or PETSc's KSPCG (with our PC)")
    args = p.parse_args()

    world = start_petsc(args.placement)
    from petsc4py import PETSc

    from cardiosim.solvers import krylov, multigrid
    from test_multigrid import SHEET
    from cardiosim import config
    from cardiosim.domain.grid import Grid
    from cardiosim.tissue import make as make_tissue

    name = args.system
    opts = {"ksp_type": "python", "ksp_python_type": krylov.PYTHON_TYPE, "ksp_rtol": "1e-10",
            "smg_layout": args.layout, "smg_agglomerate": str(args.agglomerate), "smg_transport": args.transport,
            "smg_halo": args.halo, "smg_graphs": str(args.graphs == "on").lower()}
    if args.jacobi_from >= 0:
        opts["smg_jacobi_from"] = str(args.jacobi_from)
    if args.finest_sweeps:
        opts["smg_finest_sweeps"] = str(args.finest_sweeps)
    opts.update({"pc_type": args.pc} if args.pc != "mg" else
                {"pc_type": "python", "pc_python_type": multigrid.PYTHON_TYPE})
    text = SHEET.format(size=list(args.size), h=args.h).replace("fibre_angle = 30.0", f"fibre_angle = {args.fibre}")
    text = text.replace('stencil = "box"', f'stencil = "{args.stencil}"')
    if args.placement == "resident":
        text = text.replace('model = "mitchell-schaeffer"', 'model = "tt06"\nplacement = "resident"\nbackend = "cuda"')
    cfg = config.loads(text)

    def solve(comm, ksp_type=None):
        o = PETSc.Options()
        mine = dict(opts, **({"ksp_type": ksp_type} if ksp_type else {}))
        for k, v in mine.items():
            o[f"{name}_{k}"] = v
        try:
            grid = Grid(cfg, comm)
            tis = make_tissue(grid, cfg, args.stencil)
        finally:
            for k in mine:
                del o[f"{name}_{k}"]
        s = getattr(tis, name)
        # b = A x_true (consistent for the singular elliptic system); a nonzero first guess, as the time loop's
        xyz = grid.coords()
        x_true, b, x = s.A.createVecs()[0], s.A.createVecs()[1], s.A.createVecs()[0]
        x_true.setArray(np.sin(3.0 * xyz[:, 0]) * np.cos(2.0 * xyz[:, 1]) + xyz[:, -1])
        s.A.mult(x_true, b)
        x.setArray(0.1 * xyz[:, 0])
        s.ksp.solve(b, x)
        nat = grid.da.createNaturalVec()
        grid.da.globalToNatural(x, nat)
        scatter, whole = PETSc.Scatter.toZero(nat)
        scatter.scatter(nat, whole)
        out = whole.getArray(readonly=True).copy() if comm.getRank() == 0 else None
        ctx = s.ksp.getPythonContext() if s.ksp.getType() == "python" else None
        stats = ctx.vcycle.stats() if ctx is not None and ctx.vcycle is not None else {}
        return (s.ksp.getIterationNumber(), int(s.ksp.getConvergedReason()), s.ksp.getResidualNorm(), out,
                getattr(ctx, "why", ""), stats, grid.da.getProcSizes())

    its, reason, rnorm, xs, why, stats, procs = solve(PETSc.COMM_WORLD,
                                                      "cg" if args.ksp == "petsc" else None)
    if world.rank == 0:
        its1, reason1, rnorm1, x1, _, _, _ = solve(PETSc.COMM_SELF)
        if name == "elliptic":                         # defined up to a constant
            xs, x1 = xs - xs.mean(), x1 - x1.mean()
        diff = float(np.abs(xs - x1).max() / np.abs(x1).max())
        print(json.dumps({"ranks": world.size, "procs": list(procs), "its": its, "reason": reason, "rnorm": rnorm,
                          "its_1": its1, "reason_1": reason1, "rnorm_1": rnorm1, "max_rel_diff": diff, "why": why,
                          "exchanges": stats.get("exchanges", 0), "gathers": stats.get("gathers", 0),
                          "bytes": stats.get("bytes", 0), "host_bytes": stats.get("host_bytes", 0)}), flush=True)


if __name__ == "__main__":
    main()

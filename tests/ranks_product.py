"""The stencil library's matrix product through its seam (cardiosim.solvers.multigrid.StencilProduct) against
PETSc's MatMult, for a tissue model's intracellular stiffness K_i, on every rank of MPI_COMM_WORLD. Prints one JSON
line on rank 0. Run under mpirun by tests/test_solvers_ranks.py (host build) and tests/test_solvers_ranks_gpu.py
(GPU build, resident placement):

    mpirun -n 2 python tests/ranks_product.py --size 0.5 0.3 --h 0.01 [--stencil star] [--placement resident]
"""

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]   # this checkout's cardiosim


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=float, nargs="+", required=True, help="domain extent per dimension (cm)")
    p.add_argument("--h", type=float, required=True, help="grid spacing (cm)")
    p.add_argument("--stencil", choices=("box", "star"), default="box")
    p.add_argument("--placement", choices=("cpu", "resident"), default="cpu")
    p.add_argument("--transport", choices=("auto", "mpi-host", "ipc"), default="auto")
    args = p.parse_args()

    from ranks_solve import start_petsc
    world = start_petsc(args.placement)

    from petsc4py import PETSc

    from cardiosim import config
    from cardiosim.grid import Grid
    from cardiosim.solvers import multigrid
    from cardiosim.tissue import make as make_tissue
    from test_multigrid import SHEET

    text = SHEET.format(size=list(args.size), h=args.h).replace('stencil = "box"', f'stencil = "{args.stencil}"')
    if args.placement == "resident":
        text = text.replace('model = "mitchell-schaeffer"', 'model = "tt06"\nplacement = "resident"\nbackend = "cuda"')
    cfg = config.loads(text)
    grid = Grid(cfg, PETSc.COMM_WORLD)
    tis = make_tissue(grid, cfg, args.stencil)
    K = tis.intracellular()
    x, y, want = K.createVecs()[0], K.createVecs()[1], K.createVecs()[1]
    xyz = grid.coords()
    x.setArray(np.sin(3.0 * xyz[:, 0]) * np.cos(2.0 * xyz[:, 1]) + xyz[:, -1] ** 2)
    K.mult(x, want)
    product = multigrid.StencilProduct(K, grid.da, args.transport)
    product.mult(x, y)
    stats = product.ops.stats()
    y.axpy(-1.0, want)
    diff, scale = y.norm(3), want.norm(3)      # max norms (collective)
    product.destroy()
    if world.rank == 0:
        print(json.dumps({"ranks": world.size, "procs": list(grid.da.getProcSizes()), "max_rel_diff": diff / scale,
                          "exchanges": stats["exchanges"], "host_bytes": stats["host_bytes"],
                          "transport": product.ops.transport}), flush=True)


if __name__ == "__main__":
    main()

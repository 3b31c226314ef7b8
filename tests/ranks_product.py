"""The stencil library's matrix product through its seam (cardiosim.solvers.multigrid.StencilProduct) against
PETSc's MatMult, for a tissue model's intracellular stiffness K_i, on every rank of MPI_COMM_WORLD; and its
right-hand side in one pass (StencilProduct.combine: α d∘x − K_i(βx + γw), with every term and with K_i's product
alone) and its removal of means (StencilProduct.deflate) against PETSc's product and vector operations. Prints one JSON
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
    from cardiosim.domain.grid import Grid
    from cardiosim.solvers import multigrid
    from cardiosim.tissue import make as make_tissue
    from test_multigrid import SHEET

    text = SHEET.format(size=list(args.size), h=args.h).replace('stencil = "box"', f'stencil = "{args.stencil}"')
    if args.placement == "resident":
        text = text.replace('model = "mitchell-schaeffer"', 'model = "tt06"\nplacement = "resident"\nbackend = "cuda"')
    cfg = config.loads(text)
    grid = Grid(cfg, PETSc.COMM_WORLD)
    tis = make_tissue(grid, cfg, args.stencil)
    K = tis.Ki                 # the bidomain's intracellular stiffness
    x, y, want = K.createVecs()[0], K.createVecs()[1], K.createVecs()[1]
    xyz = grid.coords()
    x.setArray(np.sin(3.0 * xyz[:, 0]) * np.cos(2.0 * xyz[:, 1]) + xyz[:, -1] ** 2)
    K.mult(x, want)
    product = multigrid.StencilProduct(K, grid.da, args.transport)
    product.mult(x, y)
    y.axpy(-1.0, want)
    diff, scale = y.norm(3), want.norm(3)      # max norms (collective)
    w, d = x.duplicate(), x.duplicate()
    w.setArray(np.cos(5.0 * xyz[:, 0]) + xyz[:, 1])
    d.setArray(1.0 + xyz[:, 0] ** 2)
    combined = []
    for alpha, beta, gamma, with_w in ((0.7, 0.5, 1.0, True), (0.0, 1.0, 0.0, False)):
        u = x.copy()
        u.scale(beta)
        if with_w:
            u.axpy(gamma, w)
        K.mult(u, want)
        want.scale(-1.0)
        if alpha:
            dx = d.copy()
            dx.pointwiseMult(dx, x)
            want.axpy(alpha, dx)
        product.combine(x, w if with_w else None, d if alpha else None, alpha, beta, gamma, y)
        y.axpy(-1.0, want)
        combined.append(y.norm(3) / want.norm(3))
    # deflate: v = m∘v − (w·v) 1 − (d·v) w, the sums on the device, against PETSc's VecDot and VecAXPY
    m = x.duplicate()
    m.setArray((xyz[:, 0] < 0.3).astype(float))
    want = x.copy()
    want.pointwiseMult(want, m)
    want.shift(-x.dot(w))
    want.axpy(-x.dot(d), w)
    v = x.copy()
    product.deflate(v, [(w, None), (d, w)], m)
    v.axpy(-1.0, want)
    deflated = v.norm(3) / want.norm(3)
    stats = product.ops.stats()
    product.destroy()
    if world.rank == 0:
        print(json.dumps({"ranks": world.size, "procs": list(grid.da.getProcSizes()), "max_rel_diff": diff / scale,
                          "combine_max_rel_diff": combined, "deflate_max_rel_diff": deflated,
                          "exchanges": stats["exchanges"], "host_bytes": stats["host_bytes"],
                          "transport": product.ops.transport}), flush=True)


if __name__ == "__main__":
    main()

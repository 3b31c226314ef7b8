"""The communication seam's latency per transport (cardiosim.solvers.comm), measured on the machine it will run
on: microseconds per halo exchange of a grid's finest level, and per gather + scatter of a whole level through rank
0 (the "root" layout's cost per solve, and agglomeration's per V-cycle), for 2D sheets whose faces are a few kB.
Run with one rank per GPU:

    mpirun -n 2 python -m cardiosim.bench.halo [--sizes 513 2049] [--transports mpi-host ipc] [--reps 200]

The halo is exchanged in the elliptic system's multigrid layout (the grid split over the ranks); the gather is of
the whole grid (the "root" layout). Prints one line per case on rank 0, and JSON with --json.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m cardiosim.bench.halo", description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[513, 2049], help="n of the n x n sheets")
    p.add_argument("--transports", nargs="+", default=["mpi-host", "ipc"])
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--json", help="write the results here too")
    args = p.parse_args(argv)

    # MPI and PETSc start here, with the GPU options (petsc4py.init), not at the module's import
    import petsc4py
    from mpi4py import MPI
    from cardiosim.reaction.placement import petsc_device_options
    petsc4py.init([sys.argv[0], *petsc_device_options(MPI.COMM_WORLD)])
    # after petsc4py.init: these import PETSc, which must start with the options above
    from petsc4py import PETSc
    from cardiosim import config
    from cardiosim.domain.grid import Grid
    from cardiosim.solvers import multigrid
    from cardiosim.tissue import make as make_tissue

    comm = MPI.COMM_WORLD
    out = []
    for n in args.sizes:
        h = 0.01
        cfg = config.loads(f"""
[simulation]
equations = "bidomain"
duration = 1.0
dt = 0.01
[grid]
size = [{(n - 1) * h!r}, {(n - 1) * h!r}]
spacing = {h}
[cell]
model = "tt06"
placement = "resident"
backend = "cuda"
""")
        grid = Grid(cfg, PETSc.COMM_WORLD)
        A = make_tissue(grid, cfg, "box").elliptic.A
        for transport in args.transports:
            for layout in ("ranks", "root"):
                # level 0 only (Jacobi's hierarchy): split over the ranks, or whole on rank 0 (gathered)
                hier = multigrid.RankHierarchy(A, grid.da, coarse_max=None, root_only=layout == "root")
                vc = multigrid.VCycle(hier, gpu=True, transport=transport)
                halo, gather = vc.time_seam(args.reps)
                vc.destroy()
                r = {"n": n, "ranks": comm.size, "transport": transport, "layout": layout, "face_kB": 8 * n / 1024}
                r.update({"gather_scatter_us": 1e6 * gather} if layout == "root" else {"halo_us": 1e6 * halo})
                out.append(r)
                if comm.rank == 0:
                    print(json.dumps(r), flush=True)
    if comm.rank == 0 and args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

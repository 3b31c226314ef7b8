"""The decomposition of a masked grid (grid.balance, cardiosim.domain.balance) on every rank of MPI_COMM_WORLD: the tissue
nodes per rank of the box split and of the balanced one, the boxes, PETSc's coarsening of the balanced boxes against
cardiosim.domain.balance.coarsened, and an unmasked grid's decomposition with either balance (PETSc's, untouched). Prints one
JSON line on rank 0. Run under mpirun by tests/test_balance.py:

    mpirun -n 2 python tests/ranks_balance.py --labels LV.h5 --size 2.4 2.4 2.8 --h 0.05 [--equations bidomain]
"""

import argparse
import json
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).parent), str(Path(__file__).parent.parent)]   # this checkout's cardiosim

SHEET = """
[simulation]
equations = "{equations}"
duration = 1.0
dt = 0.1
[grid]
size = {size}
spacing = {h}
balance = "{balance}"
[tissue]
{tissue}
[cell]
model = "mitchell-schaeffer"
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--labels", required=True, help="a label file (.npy or a cardiosim geometry file)")
    p.add_argument("--size", type=float, nargs="+", required=True)
    p.add_argument("--h", type=float, required=True)
    p.add_argument("--equations", default="monodomain")
    p.add_argument("--coarsen", type=int, default=3, help="coarsenings of the balanced DMDA to compare")
    args = p.parse_args()
    from ranks_solve import start_petsc
    world = start_petsc("cpu")
    from petsc4py import PETSc

    from cardiosim.domain import balance
    from cardiosim import config
    from cardiosim.domain.grid import Grid
    from cardiosim.tissue.equations import balance_levels

    def grid(bal, masked=True):
        text = SHEET.format(equations=args.equations, size=list(args.size), h=args.h, balance=bal,
                            tissue=f'label_file = "{args.labels}"' if masked else "")
        return Grid(config.loads(text), PETSc.COMM_WORLD, balance_levels)

    out = {"ranks": world.size}
    for bal in ("box", "tissue"):
        g = grid(bal)
        out[bal] = {"tissue": g.tissue_per_rank(), "procs": [int(v) for v in g.da.getProcSizes()],
                    "ranges": [[int(v) for v in r] for r in g.da.getOwnershipRanges()], "balance": g.balance,
                    "owned": world.allgather(int((~g.mask.outside()).sum()))}
        if bal == "tissue":
            out["describe"] = g.describe_balance()
            # PETSc's own coarsening of the balanced boxes (PCMG's hierarchy) against cardiosim.domain.balance.coarsened
            da, ours = g.da, [list(r) for r in out[bal]["ranges"]]
            petsc, mine = [], []
            for _ in range(args.coarsen):
                da = da.coarsen()
                ours = [balance.coarsened(r) for r in ours]
                petsc.append([[int(v) for v in r] for r in da.getOwnershipRanges()])
                mine.append(ours)
            out["coarsened"] = {"petsc": petsc, "ours": mine}
        g.da.destroy()
    plain = {}
    for bal in ("box", "tissue"):
        g = grid(bal, masked=False)
        plain[bal] = [[int(v) for v in r] for r in g.da.getOwnershipRanges()]
        g.da.destroy()
    ref = PETSc.DMDA().create(dim=len(args.size), sizes=[int(round(s / args.h)) + 1 for s in args.size],
                              stencil_width=1, stencil_type=PETSc.DMDA.StencilType.BOX, comm=PETSc.COMM_WORLD)
    plain["petsc"] = [[int(v) for v in r] for r in ref.getOwnershipRanges()]
    out["unmasked"] = plain
    if world.rank == 0:
        print(json.dumps(out))


if __name__ == "__main__":
    main()

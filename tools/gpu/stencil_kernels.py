"""The stencil library's kernels on the idealised LV's masked elliptic system, one V-cycle and one matrix product
each way (the tissue's nodes, then every node of the box: smg_active true and false), launched one by one (no CUDA
graphs): the process to run under Nsight Compute, so that each kernel's time, bandwidth, occupancy and stalls can
be read per level and per visit (tools/gpu/issue27-ncu.sh). The masked GPU runs' smoother: Jacobi on every level,
level 0 swept ``--finest-sweeps`` times (2, cardiosim.solvers.linear.GPU_MASKED_FINEST_SWEEPS).

    python3 tools/gpu/stencil_kernels.py [--lv-spacing 0.025] [--finest-sweeps 2] [--host]

``--host`` runs the same on the host build (a check of this script where there is no GPU).
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import petsc4py

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lv-spacing", type=float, default=0.025, help="cm")
    p.add_argument("--finest-sweeps", type=int, default=2)
    p.add_argument("--host", action="store_true", help="the host build (no GPU)")
    args = p.parse_args()
    petsc4py.init(["-no_signal_handler"])
    from petsc4py import PETSc

    from cardiosim import config
    from cardiosim.bench.mask import RUN, anatomy
    from cardiosim.domain.grid import Grid
    from cardiosim.simulation.loop import choose_stencil
    from cardiosim.solvers import multigrid
    from cardiosim.tissue.equations import make as make_tissue

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        pieces = anatomy("lv", Path(tmp), True, args.lv_spacing)
        pieces["tissue"] += '\nsolve_on = "box"'
        cfg = config.loads(RUN.format(duration=0.04, model="mitchell-schaeffer", cell="", substeps=1, stim=-50.0,
                                      **pieces))
        grid = Grid(cfg, PETSc.COMM_SELF)
        tis = make_tissue(grid, cfg, choose_stencil(cfg, grid, "auto"))
    A = tis.elliptic.A
    hier = multigrid.Hierarchy(A, grid.da.getSizes(), coarse_max=2048, singular=True)
    print(f"LV {args.lv_spacing:g} cm: levels {hier.sizes}, active "
          f"{[int(hier.owned_active(l).sum()) for l in range(hier.levels)]}; set-up {time.perf_counter() - t0:.1f} s",
          flush=True)
    n = int(np.prod(hier.sizes[0]))
    b = np.where(hier.owned_active(0), np.random.default_rng(0).standard_normal(n), 0.0)
    if args.host:
        x = np.empty(n)
        for active in (True, False):
            vc = multigrid.VCycle(hier, gpu=False, active=active, jacobi_from=0, finest_sweeps=args.finest_sweeps)
            vc.apply(b.ctypes.data, x.ctypes.data)
            vc.matvec(x.ctypes.data, b.ctypes.data)
            vc.destroy()
        print("host build: done")
        return
    import pycuda.driver as cuda
    cuda.init()
    ctx = cuda.Device(0).retain_primary_context()
    ctx.push()
    try:
        db, dx = cuda.to_device(b), cuda.mem_alloc(n * 8)
        for active in (True, False):            # tissue's visit first, then the box's: the order of the profile
            vc = multigrid.VCycle(hier, gpu=True, graphs=False, active=active, jacobi_from=0,
                                  finest_sweeps=args.finest_sweeps)
            vc.apply(int(db), int(dx))
            vc.matvec(int(dx), int(db))
            ctx.synchronize()
            vc.destroy()
        print("GPU build: done")
    finally:
        ctx.pop()


if __name__ == "__main__":
    main()

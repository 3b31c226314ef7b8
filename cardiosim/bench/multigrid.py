"""The multigrid V-cycle alone (cardiosim.solvers.multigrid on the GPU): ms per V-cycle, where inside it the time goes (per
level and phase), and the bandwidth limit of the same V-cycle from the measured device-to-device copy bandwidth.

    python -m cardiosim.bench.multigrid --grid 1025 1025 [--grid 625 625 --spacing 0.0008] [--sweeps 1 2]

The matrix is the bidomain elliptic operator of cardiosim.bench.pde's sheet (box stencil, fibres at 30°), assembled
on the host; the hierarchy is built as the resident placement builds it.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from cardiosim.runtime.gpu import PrimaryContext

SHEET = """
[simulation]
equations = "bidomain"
duration = 0.02
dt = 0.02
[grid]
size = {size}
spacing = {h!r}
stencil = "box"
[tissue]
fibre_angle = 30.0
[cell]
model = "mitchell-schaeffer"
"""
PHASES = ("pre-smooth", "residual+restrict", "prolong", "post-smooth")


def bytes_per_vcycle(h, sweeps: int) -> float:
    """What one V-cycle must move at least: per level and SOR sweep the stencil, x read and written and b read;
    the residual the same once; restriction and prolongation a fine and a coarse vector each; the dense coarse
    matrix once."""
    total = 0.0
    for l, sizes in enumerate(h.sizes[:-1]):
        n = float(np.prod(sizes))
        ns = h.stencils[l].shape[0]
        total += (2 * sweeps + 1) * n * 8 * (ns + 3) + 4 * n * 8
    n = float(np.prod(h.sizes[-1]))
    return total + 8 * n * n


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m cardiosim.bench.multigrid", description=__doc__.split("\n")[0])
    p.add_argument("--grid", type=int, nargs="+", action="append", help="nodes per dimension (repeatable)")
    p.add_argument("--spacing", type=float, default=0.01, help="cm")
    p.add_argument("--sweeps", type=int, nargs="+", default=[1])
    p.add_argument("--omega", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=50)
    p.add_argument("--no-graphs", action="store_true", help="launch every kernel from the host (no CUDA graph)")
    args = p.parse_args(argv)
    import petsc4py
    petsc4py.init(sys.argv[:1])
    from petsc4py import PETSc

    import pycuda.driver as cuda

    # after petsc4py.init: these import PETSc, which must start with the options above
    from cardiosim import config
    from cardiosim.solvers import multigrid
    from cardiosim.domain.grid import Grid
    from cardiosim.tissue import make
    ctx = PrimaryContext(0)
    ctx.push()
    try:
        big = cuda.mem_alloc(1 << 30)
        other = cuda.mem_alloc(1 << 30)
        cuda.memcpy_dtod(other, big, 1 << 30)
        ctx.synchronize()
        t = time.perf_counter()
        for _ in range(10):
            cuda.memcpy_dtod(other, big, 1 << 30)
        ctx.synchronize()
        bw = 2 * 10 * (1 << 30) / (time.perf_counter() - t)     # read + write
        big.free()
        other.free()
        print(f"device-to-device copy bandwidth: {bw / 1e12:.2f} TB/s (read + write)")
        for dims in args.grid or [[1025, 1025]]:
            size = [round((n - 1) * args.spacing, 10) for n in dims]
            cfg = config.loads(SHEET.format(size=size, h=args.spacing))
            grid = Grid(cfg, PETSc.COMM_SELF)
            A = make(grid, cfg, "box").elliptic.A
            t0 = time.perf_counter()
            h = multigrid.Hierarchy(A, grid.da.getSizes(), singular=True)
            setup = time.perf_counter() - t0
            N = A.getSize()[0]
            db = cuda.to_device(np.random.default_rng(0).standard_normal(N))
            dx = cuda.mem_alloc(N * 8)
            # the coarsest (pseudo-)inverse: eigendecomposition on the host against Gauss–Jordan on the device
            t0 = time.perf_counter()
            G_eig = multigrid.Hierarchy.eig_inverse(h.coarse_matrix, h.singular)
            t_eig = time.perf_counter() - t0
            t0 = time.perf_counter()
            gj = multigrid.VCycle(h, gpu=True, coarse="gauss-jordan")
            ctx.synchronize()
            t_gj = time.perf_counter() - t0
            G_gj = gj.coarse_inverse()
            gj.destroy()
            print(f"  coarsest {h.coarse_matrix.shape[0]} nodes: inverse by eigendecomposition on the host "
                  f"{1e3 * t_eig:.1f} ms; loading the V-cycle with Gauss–Jordan on the device {1e3 * t_gj:.1f} ms; "
                  f"max |GJ - eig| / max |eig| = {np.abs(G_gj - G_eig).max() / np.abs(G_eig).max():.1e}")
            for sweeps in args.sweeps:
                vc = multigrid.VCycle(h, gpu=True, omega=args.omega, sweeps=sweeps, graphs=not args.no_graphs)
                for _ in range(3):
                    vc.apply(int(db), int(dx))
                ctx.synchronize()
                t = time.perf_counter()
                for _ in range(args.repeat):
                    vc.apply(int(db), int(dx))
                ctx.synchronize()
                ms = 1e3 * (time.perf_counter() - t) / args.repeat
                prof = np.mean([vc.profile(int(db), int(dx), h.levels) for _ in range(5)], axis=0)
                vc.destroy()
                limit = 1e3 * bytes_per_vcycle(h, sweeps) / bw
                print(f"\n{'x'.join(map(str, dims))} ({N:,} nodes), {h.levels} levels "
                      f"({' > '.join('x'.join(map(str, s[:h.dim])) for s in h.sizes)}), hierarchy set-up "
                      f"{setup:.2f} s on the host, {sweeps} sweep(s), CUDA graphs {'off' if args.no_graphs else 'on'}: "
                      f"{ms:.3f} ms per V-cycle back to back; "
                      f"bandwidth limit {limit:.3f} ms ({100 * limit / ms:.0f} %)")
                print(f"  {'level':>5} {'nodes':>10} " + " ".join(f"{p:>18}" for p in PHASES) +
                      "  (ms, profiled: kernels launched one by one, events between phases)")
                for l in range(h.levels - 1):
                    print(f"  {l:>5} {int(np.prod(h.sizes[l])):>10} " + " ".join(f"{v:18.4f}" for v in prof[l]))
                print(f"  {'coarse':>5} {int(np.prod(h.sizes[-1])):>10} {prof[-1, 0]:18.4f}")
            db.free()
            dx.free()
            A.destroy()
    finally:
        ctx.pop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

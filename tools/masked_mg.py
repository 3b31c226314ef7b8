"""Tissue-only loops measured: cardiosim's stencil solvers (StencilCG + StencilMG, kernels/stencil_mg.cpp) on the
idealised LV's masked elliptic (and parabolic) system, with the loops over each level's active nodes (smg_active
true) and over the whole box (false). Prints, per spacing: each level's size and active share, ms per solve and
iterations on the host build, ms per V-cycle and per level (smg_apply_timed's phases), and the largest difference
between the two solutions. With ``--gpu`` the same hierarchy is also loaded into the CUDA build and its V-cycle
timed there (back to back as a solve runs it, and profiled per level: where a masked V-cycle's time goes on the
device). One rank;
the whole step's A/B on a GPU is ``cardiosim bench mask --placement resident ...`` with ``PETSC_OPTIONS=
"-elliptic_smg_active false -parabolic_smg_active false"``.

    .venv/bin/python tools/masked_mg.py --lv-spacing 0.05 0.025 --solves 5 --vcycles 20 [--gpu]

``--coarse-max`` (default 2048, the GPU runs' limit: cardiosim.solvers.linear.GPU_STENCIL_MG) bounds the coarsest
level; ``--jacobi-from`` (default 1, the GPU runs' default there) smooths that level and coarser by Jacobi instead of
multicolour SOR, in the host build and the CUDA build alike (-1: SOR on every level); ``--finest-sweeps`` sweeps
level 0 that many times (the masked GPU runs' default: 2, cardiosim.solvers.linear.GPU_MASKED_FINEST_SWEEPS).
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import petsc4py

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lv-spacing", type=float, nargs="+", default=[0.05])
    p.add_argument("--solves", type=int, default=5)
    p.add_argument("--vcycles", type=int, default=20)
    p.add_argument("--systems", nargs="+", default=["elliptic", "parabolic"])
    p.add_argument("--gpu", action="store_true", help="also time the V-cycle in the CUDA build (device 0)")
    p.add_argument("--coarse-max", type=int, default=2048, help="smg_coarse_max (nodes of the coarsest level)")
    p.add_argument("--jacobi-from", type=int, default=1, help="smg_jacobi_from (-1: SOR on every level)")
    p.add_argument("--finest-sweeps", type=int, default=0, help="smg_finest_sweeps (0: smg_sweeps, one)")
    p.add_argument("--stencil", choices=("auto", "star", "box"), default="auto",
                   help="the operator's stencil (auto: the run's choice, box for the LV's fibres)")
    args = p.parse_args()
    petsc4py.init(["-no_signal_handler"])
    from petsc4py import PETSc

    from cardiosim import config
    from cardiosim.bench.mask import RUN, anatomy
    from cardiosim.domain.grid import Grid
    from cardiosim.simulation.loop import choose_stencil
    from cardiosim.solvers import krylov, multigrid
    from cardiosim.tissue import make as make_tissue

    for h in args.lv_spacing:
        with tempfile.TemporaryDirectory() as tmp:
            pieces = anatomy("lv", Path(tmp), True, h)
            pieces["tissue"] += '\nsolve_on = "box"'
            cfg = config.loads(RUN.format(duration=0.04, model="mitchell-schaeffer", cell="", substeps=1, stim=-50.0,
                                          **pieces))
            for name in args.systems:
                res, built = {}, {}
                for active in (True, False):
                    o = PETSc.Options()
                    mine = {"ksp_type": "python", "ksp_python_type": krylov.PYTHON_TYPE, "pc_type": "python",
                            "pc_python_type": multigrid.PYTHON_TYPE, "smg_active": str(active).lower(),
                            "smg_coarse_max": str(args.coarse_max), "smg_jacobi_from": str(args.jacobi_from),
                            "smg_finest_sweeps": str(args.finest_sweeps)}
                    for k, v in mine.items():
                        o[f"{name}_{k}"] = v
                    t0 = time.perf_counter()
                    try:
                        grid = Grid(cfg, PETSc.COMM_SELF)
                        # the stencil a run of this anatomy takes: the LV's rule-based fibres leave the axes, so
                        # "box" (27 points); a 7-point operator would time another solver
                        stencil = choose_stencil(cfg, grid, args.stencil)
                        tis = make_tissue(grid, cfg, stencil)
                        s = getattr(tis, name)
                        x_true, b = s.A.createVecs()
                        x = x_true.duplicate()
                        xyz = grid.coords()
                        inside = ~grid.mask.outside()
                        smooth = np.sin(3.0 * xyz[:, 0]) * np.cos(2.0 * xyz[:, 1]) + xyz[:, 2]
                        x_true.setArray(np.where(inside, smooth, 0.0) if name == "elliptic" else smooth - 80.0)
                        s.A.mult(x_true, b)
                        s.ksp.setInitialGuessNonzero(False)
                        s.ksp.solve(b, x)                        # set-up and a warm solve
                    finally:
                        for k in mine:
                            del o[f"{name}_{k}"]
                    built[active] = (tis, s, b, x, time.perf_counter() - t0)
                # alternating, the fastest of each: this machine is shared, and the load comes and goes
                ts, prof = {a: [] for a in built}, {a: [] for a in built}
                for _ in range(args.solves):
                    for active, (tis, s, b, x, _) in built.items():
                        x.set(0.0)
                        t0 = time.perf_counter()
                        s.ksp.solve(b, x)
                        ts[active].append(time.perf_counter() - t0)
                        mg = s.ksp.getPC().getPythonContext()
                        y = x.duplicate()
                        bb, yy = b.getArray(readonly=True), y.getArray()
                        for _ in range(args.vcycles):
                            prof[active].append(mg.vcycle.profile(bb.ctypes.data, yy.ctypes.data,
                                                                  mg.hierarchy.levels))
                for active, (tis, s, b, x, setup) in built.items():
                    mg = s.ksp.getPC().getPythonContext()
                    v, hier = mg.vcycle, mg.hierarchy
                    p = np.array(prof[active])
                    res[active] = dict(ms=1e3 * min(ts[active]), its=s.ksp.getIterationNumber(),
                                       x=x.getArray(readonly=True).copy(), vms=p.sum(axis=(1, 2)).min(),
                                       levels=p.sum(axis=2).min(axis=0), share=v.active_share, sizes=hier.sizes,
                                       setup=setup)
                on, off = res[True], res[False]
                print(f"\nLV {h:g} cm, {name} ({stencil} stencil): box {grid.n_nodes} nodes, tissue {grid.mask.n_tissue} "
                      f"({100 * grid.mask.n_tissue / grid.n_nodes:.1f} %); set-up {on['setup']:.1f} s / {off['setup']:.1f} s")
                print(f"  per solve: active {on['ms']:.1f} ms ({on['its']} its), box {off['ms']:.1f} ms ({off['its']} its)"
                      f" -> {on['ms'] / off['ms']:.2f}x;  max |x_on - x_off| / max |x| = "
                      f"{np.abs(on['x'] - off['x']).max() / np.abs(off['x']).max():.2g}")
                print(f"  per V-cycle: active {on['vms']:.2f} ms, box {off['vms']:.2f} ms -> {on['vms'] / off['vms']:.2f}x")
                for l, (n, a, ta, tb) in enumerate(zip(on["sizes"], on["share"], on["levels"], off["levels"])):
                    print(f"    level {l}: {'x'.join(map(str, n))} active {100 * a:5.1f} %   {ta:7.3f} ms  box {tb:7.3f} ms"
                          f"  ({ta / tb if tb else 0:.2f}x)")
                if args.gpu:
                    gpu_vcycles(built[True][1].ksp.getPC().getPythonContext().hierarchy, args.vcycles,
                                built[True][2].getArray(readonly=True).copy(), built[True][1].ksp.getTolerances(),
                                args.jacobi_from, args.finest_sweeps)


def gpu_vcycles(hier, reps: int, b_host: np.ndarray, tolerances, jacobi_from: int = -1, finest_sweeps: int = 0) -> None:
    """The hierarchy's V-cycle in the CUDA build, active lists on and off: ms per V-cycle back to back (CUDA graph,
    as a solve runs it) and per level and phase (profiled: events between phases, so launch gaps show); then CG
    with it on the system's right-hand side ``b_host`` (zero first guess, the solver's ``tolerances``), timed in C
    alone: what a solve costs without the run's PETSc and Python around it."""
    import pycuda.driver as cuda

    from cardiosim.solvers import multigrid
    cuda.init()
    ctx = cuda.Device(0).retain_primary_context()
    ctx.push()
    try:
        n = int(np.prod(hier.sizes[0]))
        db = cuda.to_device(np.random.default_rng(0).standard_normal(n))
        dx = cuda.mem_alloc(n * 8)
        dbs = cuda.to_device(np.ascontiguousarray(b_host, dtype=np.float64))
        rtol, atol, dtol, maxit = tolerances
        out, cg = {}, {}
        for active in (True, False):
            vc = multigrid.VCycle(hier, gpu=True, active=active, jacobi_from=jacobi_from, finest_sweeps=finest_sweeps)
            for _ in range(3):
                vc.apply(int(db), int(dx))
            ctx.synchronize()
            t = time.perf_counter()
            for _ in range(reps):
                vc.apply(int(db), int(dx))
            ctx.synchronize()
            ms = 1e3 * (time.perf_counter() - t) / reps
            prof = np.min([vc.profile(int(db), int(dx), hier.levels) for _ in range(5)], axis=0)
            out[active] = (ms, prof)
            times = []
            for _ in range(4):                  # the first compiles nothing but warms the CG's graph and buffers
                ctx.synchronize()
                t = time.perf_counter()
                its, _, reason = vc.cg(2, int(dbs), int(dx), rtol, atol, dtol, maxit, True)
                ctx.synchronize()
                times.append(1e3 * (time.perf_counter() - t))
            cg[active] = (min(times[1:]), its, reason)
            vc.destroy()
        (on, pon), (off, poff) = out[True], out[False]
        print(f"  GPU V-cycle back to back: active {on:.3f} ms, box {off:.3f} ms -> {on / off:.2f}x; profiled "
              f"(per phase: pre-smooth, residual+restrict, prolong, post-smooth; coarse solve last), active / box ms:")
        for l in range(hier.levels):
            print(f"    level {l}: " + "  ".join(f"{a:.4f}/{b:.4f}" for a, b in zip(pon[l], poff[l]))
                  + f"  sum {pon[l].sum():.4f}/{poff[l].sum():.4f}")
        for active, (ms, its, reason) in cg.items():
            print(f"  GPU CG + V-cycle in C, zero first guess, rtol {rtol:g}: {'active' if active else 'box'} "
                  f"{ms:.3f} ms, {its} its (reason {reason}), {ms / max(its, 1):.3f} ms per iteration "
                  f"(V-cycle {out[active][0]:.3f})")
        db.free()
        dx.free()
        dbs.free()
    finally:
        ctx.pop()


if __name__ == "__main__":
    main()

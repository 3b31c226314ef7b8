"""Launch shapes (threads per block) against time and energy per call, as in the seed's power study (Shirazi et al.):
the fused cell kernel (Bondarenko, 2²⁰ cells, 100 Forward-Euler substeps per launch) and the Gauss–Jordan inversion
of a coarsest multigrid operator (kernels/stencil_mg.cpp). One GPU; energy from NVML's board counter, so each shape
runs for at least --seconds of wall time and J per call is the counter's difference over the calls (idle draw
included: the board's, not the kernel's alone).

    python -m cardiosim.bench.shapes [--blocks 64 128 256 512 1024] [--seconds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from cardiosim.runtime.gpu import PrimaryContext
from cardiosim.bench.multigrid import SHEET
from cardiosim.runtime import energy


def measure(call, sync, meter, seconds: float) -> dict:
    call()
    sync()                                   # warm-up: module load, first-touch
    e0, t0, calls = meter.read(), time.perf_counter(), 0
    while True:
        call()
        calls += 1
        if calls % 4 == 0:
            sync()
            if time.perf_counter() - t0 >= seconds:
                break
    sync()
    wall = time.perf_counter() - t0
    e1 = meter.read()
    out = {"calls": calls, "ms_per_call": 1e3 * wall / calls}
    if e0 is not None and e1 is not None:
        out.update(j_per_call=(e1 - e0) / calls, mean_power_w=(e1 - e0) / wall)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(prog="python -m cardiosim.bench.shapes", description=__doc__.split("\n")[0])
    p.add_argument("--blocks", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    p.add_argument("--seconds", type=float, default=3.0, help="wall time per shape (NVML updates every ~100 ms)")
    p.add_argument("--json")
    args = p.parse_args(argv)
    import petsc4py
    petsc4py.init(sys.argv[:1])
    from petsc4py import PETSc

    # after petsc4py.init: these import MPI and PETSc, which must start with the options above
    from cardiosim import cells, config
    from cardiosim.solvers import multigrid
    from cardiosim.domain.grid import Grid
    from cardiosim.reaction.ode.cuda_backend import CudaBackend
    from cardiosim.tissue import make

    meter = energy.Meter([energy.bus_id(0)])
    print(f"energy: {'NVML board counter' if meter.available else meter.why}")
    rows = []
    model = cells.make("bondarenko")
    y = model.initial_state(1 << 20)
    name = "fused cell kernel (Bondarenko, 2^20 cells, k = 100)"
    for b in args.blocks:
        with CudaBackend(model, y, block=b) as be:
            regs = be.registers()["num_regs"]
            if regs * b > 65536:              # a block's registers must fit in one SM's 64k
                rows.append({"kernel": name, "block": b,
                             "note": f"not launchable: {regs} registers x {b} threads > 65536"})
                continue
            r = measure(lambda: be.advance(0.0, 1e-4, 100, check=False), be.synchronize, meter, args.seconds)
        rows.append({"kernel": name, "block": b, **r})
        print(rows[-1], flush=True)

    ctx = PrimaryContext(0)
    ctx.push()
    try:
        cfg = config.loads(SHEET.format(size=[0.4992, 0.4992], h=0.0008))
        grid = Grid(cfg, PETSc.COMM_SELF)
        h = multigrid.Hierarchy(make(grid, cfg, "box").elliptic.A, grid.da.getSizes(), singular=True)
        vc = multigrid.VCycle(h, gpu=True)
        n = h.coarse_matrix.shape[0]
        for b in args.blocks:
            vc.lib.smg_set_block(b)
            r = measure(lambda: vc.lib.smg_coarse_gauss_jordan(vc.handle, h.coarse_matrix.ctypes.data, 1),
                        ctx.synchronize, meter, args.seconds)
            rows.append({"kernel": f"Gauss-Jordan pseudo-inverse ({n} x {n}, 625² elliptic coarsest)", "block": b,
                         **r})
            print(rows[-1], flush=True)
        vc.lib.smg_set_block(256)
        vc.destroy()
    finally:
        ctx.pop()

    print("\n| kernel | threads per block | ms per call | J per call | mean board power (W) |\n|---|---|---|---|---|")
    for r in rows:
        if "note" in r:
            print(f"| {r['kernel']} | {r['block']} | — | — | {r['note']} |")
            continue
        j = f"{r['j_per_call']:.3g}" if "j_per_call" in r else "n/a"
        w = f"{r['mean_power_w']:.0f}" if "mean_power_w" in r else "n/a"
        print(f"| {r['kernel']} | {r['block']} | {r['ms_per_call']:.3f} | {j} | {w} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

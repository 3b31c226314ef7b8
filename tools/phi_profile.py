"""Where a resident masked LV's elliptic and parabolic phases spend their time, cardiosim's CG and what is around
it.
The bench's LV (cardiosim.bench.mask: masked, solved on the box's stencils with active lists; then the whole box),
20 steps after two, each piece of Tissue.solve_phi (and the parabolic phase) timed between device
synchronisations, which adds a little to each. On a GPU node:

    python3 tools/phi_profile.py 0.025 resident        # spacing in cm, placement ("cpu" runs it on the host)
"""
import ctypes
import ctypes.util
import sys
import tempfile
import time
from pathlib import Path

import petsc4py

petsc4py.init(sys.argv[:1])
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cardiosim import config  # noqa: E402
from cardiosim.bench.mask import RUN, anatomy, cell_keys  # noqa: E402
from cardiosim.simulation.loop import Simulation  # noqa: E402

SPACING = float(sys.argv[1]) if len(sys.argv) > 1 else 0.025
PLACEMENT = sys.argv[2] if len(sys.argv) > 2 else "resident"
try:
    cudart = ctypes.CDLL(ctypes.util.find_library("cudart") or "libcudart.so")
except OSError:                                   # the CPU machine: a dry run of the script
    cudart = None


def sync():
    if cudart is not None:
        cudart.cudaDeviceSynchronize()


for grid in ("masked", "box"):
    with tempfile.TemporaryDirectory() as tmp:
        pieces = anatomy("lv", Path(tmp), grid != "box", SPACING)
        if grid != "box":
            pieces["tissue"] += '\nsolve_on = "box"'
        cfg = config.loads(RUN.format(duration=0.02 * 22, model="tt06", cell=cell_keys("tt06", PLACEMENT, "rush-larsen"),
                                      substeps=10, stim=-52.0, **pieces), name="p")
        sim = Simulation(cfg, write_output=False)
        tis = sim.tissue
        T: dict = {}

        def timed(name, f):
            def g(*a, **k):
                sync()
                t = time.perf_counter()
                r = f(*a, **k)
                sync()
                T[name] = T.get(name, 0.0) + time.perf_counter() - t
                return r
            return g
        for name, solver in (("elliptic", tis.elliptic), ("parabolic", tis.parabolic)):
            if solver.ksp.getType() == "python":
                ctx = solver.ksp.getPythonContext()
                ctx.solve = timed(f"  {name}: StencilCG.solve (addresses + CG in C)", ctx.solve)
                ctx.vcycle.cg = timed(f"    {name}: VCycle.cg (C)", ctx.vcycle.cg)
            solver.run = timed(f" {name}: LinearSolver.run (KSPSolve)", solver.run)
        tis._rhs = timed(" right-hand sides (_rhs: αM V − K(βV + φe), both phases)", tis._rhs)
        tis._zero_means = timed(" elliptic: φe's means removed (_zero_means)", tis._zero_means)
        tis.solve_phi = timed("solve_phi (elliptic phase)", tis.solve_phi)
        tis.diffuse = timed("diffuse (parabolic phase)", tis.diffuse)
        sim.step()
        sim.step()
        T.clear()
        its0 = len(tis.elliptic.iterations)
        n = 0
        while sim.step_index < sim.n_steps:
            sim.step()
            n += 1
        its = tis.elliptic.iterations[its0:]
        print(f"\n{grid}: {sim.grid.n_nodes} box nodes, {n} steps, elliptic {sum(its) / len(its):.2f} its per solve"
              f", pieces {None if tis.pieces is None else len(tis.pieces)}; ms per step:")
        for k, v in T.items():
            print(f"  {k:45s} {1e3 * v / n:8.3f}")

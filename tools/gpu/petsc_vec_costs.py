"""What PETSc's CUDA vector operations cost per call on this GPU, host latency included, on vectors of the LV's
box (831,705 entries at 0.025 cm): the operations the tissue models issued around the stencil solvers, and what
KSPSolve adds for a matrix with a null space (it projects a copy of the right-hand side: VecDuplicate, VecCopy, the
removal, VecDestroy). Each case: the device synchronised, then REPS calls, then synchronised again; µs per call.
Issue 27's question, which fixed costs of a step are PETSc's: docs/benchmarks.md, "Session 22"; what was done about
them: docs/decisions.md, "A step's fixed costs on the device". On a host without CUDA PETSc it runs on host vectors.

    python3 tools/gpu/petsc_vec_costs.py [n]
"""
import ctypes
import ctypes.util
import sys
import time

import petsc4py

petsc4py.init(sys.argv[:1])
from petsc4py import PETSc  # noqa: E402

GPU = PETSc.Sys.hasExternalPackage("cuda")          # the CPU machine: a dry run on host vectors

N = int(sys.argv[1]) if len(sys.argv) > 1 else 831705
REPS = 200
cudart = ctypes.CDLL(ctypes.util.find_library("cudart") or "libcudart.so") if GPU else None


def sync():
    if cudart is not None:
        cudart.cudaDeviceSynchronize()


def vec(value):
    v = PETSc.Vec().create()
    v.setSizes(N)
    v.setType("cuda" if GPU else "seq")
    v.set(value)
    return v


def cost(name, f):
    f()
    sync()
    t = time.perf_counter()
    for _ in range(REPS):
        f()
    sync()
    print(f"  {1e6 * (time.perf_counter() - t) / REPS:8.1f} us  {name}")


x, y, w = vec(1.0), vec(2.0), vec(0.5)
n1 = vec(1.0)
n1.normalize()
print(f"{N} entries, type {x.getType()}")
cost("VecAXPY", lambda: y.axpy(1e-9, x))
cost("VecScale", lambda: y.scale(1.0000001))     # not 1: PETSc skips that
cost("VecPointwiseMult", lambda: y.pointwiseMult(w, x))
cost("VecShift", lambda: y.shift(1e-12))         # not 0: PETSc skips that
cost("VecDot (to the host)", lambda: y.dot(x))
cost("VecSum (to the host)", lambda: y.sum())
cost("VecDuplicate + VecCopy + VecDestroy", lambda: y.copy().destroy())

A = PETSc.Mat().create()
A.setSizes([N, N])
A.setType("aijcusparse" if GPU else "aij")
A.setPreallocationNNZ(1)
A.setDiagonal(vec(2.0))
A.assemble()
A.setOption(PETSc.Mat.Option.SYMMETRIC, True)


class Nothing:
    def solve(self, ksp, b, x):
        ksp.setIterationNumber(1)
        ksp.setConvergedReason(PETSc.KSP.ConvergedReason.CONVERGED_RTOL)


ksp = PETSc.KSP().create()
ksp.setType("python")
ksp.setPythonContext(Nothing())
ksp.setOperators(A)
ksp.getPC().setType("none")
ksp.setInitialGuessNonzero(True)
ksp.setUp()
for label, ns in (("no null space", None),
                  ("the constants", PETSc.NullSpace().create(constant=True)),
                  ("one vector", PETSc.NullSpace().create(constant=False, vectors=[n1]))):
    if ns is not None:
        A.setNullSpace(ns)
        cost(f"MatNullSpaceRemove, {label}", lambda: ns.remove(y))
    cost(f"KSPSolve of a solver that does nothing, {label}", lambda: ksp.solve(y, x))

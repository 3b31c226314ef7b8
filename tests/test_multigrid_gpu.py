"""The GPU build of cardiosim's multigrid V-cycle (kernels/stencil_mg.cpp under nvcc) against the host build on the
same hierarchy and the same right-hand side (tests/test_multigrid.py checks the host build against the V-cycle's
definition). Run on a GPU node: python3 -m pytest -q -s -m gpu tests/test_multigrid_gpu.py

The resident placement's runs with this preconditioner (its default on one rank) are compared with the cpu
placement in tests/test_resident_gpu.py."""

import numpy as np
import pytest

from cardiosim.solvers import multigrid

from conftest import require_gcc, require_gpu
from test_multigrid import tissue

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("size,h,omega,sweeps", [((0.5, 0.3), 0.01, 1.0, 1), ((0.2, 0.12, 0.1), 0.01, 1.2, 2),
                                                 ((1.0, 1.0), 0.004, 1.0, 1)])
def test_gpu_vcycle_equals_host_vcycle(size, h, omega, sweeps):
    require_gpu()
    require_gcc()
    import pycuda.driver as cuda
    cuda.init()
    ctx = cuda.Device(0).retain_primary_context()
    ctx.push()
    try:
        grid, tis = tissue(size, h)
        A = tis.elliptic.A
        hier = multigrid.Hierarchy(A, grid.da.getSizes(), singular=True)
        N = A.getSize()[0]
        b = np.random.default_rng(7).standard_normal(N)
        host = np.empty(N)
        cpu = multigrid.VCycle(hier, gpu=False, omega=omega, sweeps=sweeps)
        cpu.apply(b.ctypes.data, host.ctypes.data)
        cpu.destroy()
        gpu = multigrid.VCycle(hier, gpu=True, omega=omega, sweeps=sweeps)
        db, dx = cuda.to_device(b), cuda.mem_alloc(N * 8)
        gpu.apply(int(db), int(dx))
        dev = cuda.from_device(dx, (N,), np.float64)
        ctx.synchronize()
        gpu.destroy()
        err = np.abs(dev - host).max() / np.abs(host).max()
        print(f"\n{'x'.join(map(str, grid.da.getSizes()))}: {hier.levels} levels, max |GPU - host| / max |host| = "
              f"{err:.2e}")
        assert err < 1e-11           # FMA contraction on the GPU: round-off only
    finally:
        ctx.pop()


@pytest.mark.parametrize("size,h,fibre", [((0.5, 0.3), 0.01, 30.0), ((0.2, 0.12, 0.1), 0.01, 0.0)])
@pytest.mark.parametrize("name,pc", [("parabolic", {"pc_type": "jacobi"}),
                                     ("elliptic", {"pc_type": "python", "pc_python_type": multigrid.PYTHON_TYPE})])
def test_gpu_stencil_cg_equals_petsc_cg_on_gpu_matrices(size, h, fibre, name, pc):
    """StencilCG on cuSPARSE matrices and CUDA vectors (the resident placement's) against PETSc's KSPCG on the
    same: the same iterations and solution (tests/test_krylov.py does this on the host)."""
    require_gpu()
    from test_krylov import test_stencil_cg_equals_petsc_cg
    test_stencil_cg_equals_petsc_cg(size, h, fibre, name, pc, placement="resident")

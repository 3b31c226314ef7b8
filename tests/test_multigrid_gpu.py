"""The GPU build of cardiosim's multigrid V-cycle (kernels/stencil_mg.cpp under nvcc) against the host build on the
same hierarchy and the same right-hand side (tests/test_multigrid.py checks the host build against the V-cycle's
definition). Run on a GPU node: python3 -m pytest -q -s -m gpu tests/test_multigrid_gpu.py

The resident placement's runs with this preconditioner (its default on one rank) are compared with the cpu
placement in tests/test_resident_gpu.py."""

import numpy as np
import pytest

from cardiosim.solvers import multigrid

from conftest import require_gcc, require_gpu
from test_krylov import MASKED_GPU_MG
from test_multigrid import tissue

pytestmark = pytest.mark.gpu


@pytest.fixture
def cuda_context():
    """Device 0's primary context (the one PETSc's CUDA objects share), current for the test."""
    require_gpu()
    require_gcc()
    import pycuda.driver as cuda
    cuda.init()
    ctx = cuda.Device(0).retain_primary_context()
    ctx.push()
    yield ctx
    ctx.pop()


@pytest.mark.parametrize("size,h,omega,sweeps", [((0.5, 0.3), 0.01, 1.0, 1), ((0.2, 0.12, 0.1), 0.01, 1.2, 2),
                                                 ((1.0, 1.0), 0.004, 1.0, 1)])
def test_gpu_vcycle_equals_host_vcycle(cuda_context, size, h, omega, sweeps):
    import pycuda.driver as cuda
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
    cuda_context.synchronize()
    gpu.destroy()
    err = np.abs(dev - host).max() / np.abs(host).max()
    print(f"\n{'x'.join(map(str, grid.da.getSizes()))}: {hier.levels} levels, max |GPU - host| / max |host| = "
          f"{err:.2e}")
    assert err < 1e-11           # FMA contraction on the GPU: round-off only


@pytest.mark.parametrize("size,h,sweeps", [((0.5, 0.3), 0.01, 1), ((0.2, 0.12, 0.1), 0.01, 2), ((1.0, 1.0), 0.004, 1)])
def test_gpu_vcycle_with_jacobi_coarse_levels_equals_host(cuda_context, size, h, sweeps):
    """smg_jacobi_from 1 (the coarse levels smoothed by Jacobi) on the GPU against the host build: round-off only;
    and the GPU's Jacobi V-cycle differs from its SOR one (the weights reached the device)."""
    grid, tis = tissue(size, h)
    hier = multigrid.Hierarchy(tis.elliptic.A, grid.da.getSizes(), coarse_max=64, singular=True)
    host, got = jacobi_vcycles(cuda_context, hier, sweeps, {1: 0, -1: 0})
    scale = np.abs(host).max()
    err = np.abs(got[1] - host).max() / scale
    print(f"\n{'x'.join(map(str, grid.da.getSizes()))}: {hier.levels} levels, Jacobi from level 1: "
          f"|GPU - host| / max |host| = {err:.2e}; |Jacobi - SOR| = {np.abs(got[1] - got[-1]).max() / scale:.2e}")
    assert hier.levels >= 3
    assert err < 1e-11
    assert np.abs(got[1] - got[-1]).max() > 1e-6 * scale


def jacobi_vcycles(cuda_context, hier, sweeps, variants, jf_host=1, finest_host=0):
    """The host build's V-cycle (Jacobi from ``jf_host``, ``finest_host`` sweeps on level 0) of a random b, and the
    GPU build's for each {jacobi_from: finest_sweeps} of ``variants``, each applied twice (the second through the
    CUDA graph the first captured)."""
    import pycuda.driver as cuda
    N = int(np.prod(hier.sizes[0]))
    b = np.random.default_rng(5).standard_normal(N)
    host = np.empty(N)
    cpu = multigrid.VCycle(hier, gpu=False, sweeps=sweeps, jacobi_from=jf_host, finest_sweeps=finest_host)
    cpu.apply(b.ctypes.data, host.ctypes.data)
    cpu.destroy()
    db, dx = cuda.to_device(b), cuda.mem_alloc(N * 8)
    got = {}
    for jf, finest in variants.items():
        gpu = multigrid.VCycle(hier, gpu=True, sweeps=sweeps, jacobi_from=jf, finest_sweeps=finest)
        for _ in range(2):
            gpu.apply(int(db), int(dx))
        got[jf] = cuda.from_device(dx, (N,), np.float64)
        cuda_context.synchronize()
        gpu.destroy()
    return host, got


@pytest.mark.parametrize("size,h,finest", [((0.2, 0.12, 0.1), 0.01, 2), ((0.5, 0.3), 0.01, 3)])
def test_gpu_vcycle_with_jacobi_finest_sweeps_equals_host(cuda_context, size, h, finest):
    """Jacobi on every level with level 0 swept ``finest`` times (a masked grid's GPU default: 2), each sweep fused
    with its residual, on the GPU against the host build: round-off only; and not the one-sweep V-cycle."""
    grid, tis = tissue(size, h)
    hier = multigrid.Hierarchy(tis.elliptic.A, grid.da.getSizes(), coarse_max=64, singular=True)
    host, got = jacobi_vcycles(cuda_context, hier, 1, {0: finest}, jf_host=0, finest_host=finest)
    _, once = jacobi_vcycles(cuda_context, hier, 1, {0: 0}, jf_host=0)
    scale = np.abs(host).max()
    err = np.abs(got[0] - host).max() / scale
    print(f"\n{'x'.join(map(str, grid.da.getSizes()))}: level 0 swept {finest} times, |GPU - host| / max |host| = "
          f"{err:.2e}")
    assert hier.levels >= 3
    assert err < 1e-11
    assert np.abs(got[0] - once[0]).max() > 1e-6 * scale


@pytest.mark.parametrize("size,h,fibre", [((0.5, 0.3), 0.01, 30.0), ((0.2, 0.12, 0.1), 0.01, 0.0)])
@pytest.mark.parametrize("name,pc", [("parabolic", {"pc_type": "jacobi"}),
                                     ("elliptic", {"pc_type": "python", "pc_python_type": multigrid.PYTHON_TYPE}),
                                     ("elliptic", MASKED_GPU_MG)],
                         ids=["parabolic-jacobi", "elliptic-mg", "elliptic-mg-jacobi0"])
def test_gpu_stencil_cg_equals_petsc_cg_on_gpu_matrices(size, h, fibre, name, pc):
    """StencilCG on cuSPARSE matrices and CUDA vectors (the resident placement's) against PETSc's KSPCG on the
    same: the same iterations and solution (tests/test_krylov.py does this on the host)."""
    require_gpu()
    from test_krylov import test_stencil_cg_equals_petsc_cg
    test_stencil_cg_equals_petsc_cg(size, h, fibre, name, pc, placement="resident")


@pytest.mark.parametrize("precond", [0, 1, 2], ids=["none", "jacobi", "vcycle"])
def test_gpu_cg_device_loop_equals_host_loop(cuda_context, precond):
    """One-rank GPU CG through CUDA graphs, whose iterations after the first are a device loop (a conditional graph
    node; the stopping test a kernel), against the same CG without graphs (the host's loop: a launch and a wait per
    iteration): the same iterations, reason, norm and solution bit for bit, for a converged solve from zero and
    from a guess and for one stopped by the iteration limit."""
    import pycuda.driver as cuda
    grid, tis = tissue((0.2, 0.12, 0.1), 0.01, 30.0)
    A = tis.elliptic.A
    hier = multigrid.Hierarchy(A, grid.da.getSizes(), singular=True)
    N = A.getSize()[0]
    rng = np.random.default_rng(11)
    b = rng.standard_normal(N)
    b -= b.mean()                                   # in the range of the singular operator
    guess = rng.standard_normal(N)
    cases = [(500, True), (3, True), (500, False)]  # (maxit, zero initial guess)
    got = {}
    for graphs in (True, False):
        vc = multigrid.VCycle(hier, gpu=True, graphs=graphs)
        db = cuda.to_device(b)
        got[graphs] = []
        for maxit, zero in cases:
            dx = cuda.to_device(np.zeros(N) if zero else guess)
            its, rnorm, reason = vc.cg(precond, int(db), int(dx), 1e-8, 1e-50, 1e5, maxit, zero)
            got[graphs].append((its, rnorm, reason, cuda.from_device(dx, (N,), np.float64)))
        cuda_context.synchronize()
        vc.destroy()
    for (maxit, zero), on, off in zip(cases, got[True], got[False]):
        print(f"\nprecond {precond}, maxit {maxit}, zero guess {zero}: graphs {on[:3]}, host loop {off[:3]}")
        assert on[:3] == off[:3]
        assert np.array_equal(on[3], off[3])
    assert got[True][0][2] == 2 and got[True][0][0] > 3     # converged (rtol) in more than the limit below
    assert got[True][1][2] == -3 and got[True][1][0] == 3   # stopped by maxit
    assert got[True][2][2] == 2

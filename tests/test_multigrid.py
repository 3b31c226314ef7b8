"""cardiosim's own geometric multigrid (cardiosim.solvers.multigrid, kernels/stencil_mg.cpp), host build: the transfers, the
Galerkin hierarchy, the compiled V-cycle against a dense NumPy V-cycle written from the definition, its symmetry,
and CG with it on the tissue solver's own matrices (2D box stencil with rotated fibres, 3D), against the defaults.
The GPU build is compared with this one in tests/test_resident_gpu.py."""

import numpy as np
import pytest
from petsc4py import PETSc

from cardiosim import config
from cardiosim.solvers import linear, multigrid
from cardiosim.domain.grid import Grid
from cardiosim.tissue import make as make_tissue

from conftest import require_gcc

SHEET = """
[simulation]
equations = "bidomain"
duration = 1.0
dt = 0.02
[grid]
size = {size}
spacing = {h}
stencil = "box"
[tissue]
fibre_angle = 30.0
sigma_il = 1.74
sigma_it = 0.19
sigma_el = 6.2
sigma_et = 2.4
[cell]
model = "mitchell-schaeffer"
"""


@pytest.fixture(scope="module", autouse=True)
def _compiler():
    require_gcc()


def tissue(size, h, fibre=30.0, placement="cpu"):
    """Grid and tissue model of a small sheet or slab; placement "resident" gives GPU matrices (a GPU node)."""
    text = SHEET.format(size=list(size), h=h).replace("fibre_angle = 30.0", f"fibre_angle = {fibre}")
    if placement == "resident":
        text = text.replace('model = "mitchell-schaeffer"', 'model = "tt06"\nplacement = "resident"\nbackend = "cuda"')
    cfg = config.loads(text)
    grid = Grid(cfg, PETSc.COMM_SELF)
    return grid, make_tissue(grid, cfg, "box")


def dense(A):
    indptr, cols, vals = A.getValuesCSR()
    n = A.getSize()[0]
    D = np.zeros((n, n))
    D[np.repeat(np.arange(n), np.diff(indptr)), cols] = vals
    return D


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 8, 9, 40])
def test_transfer_interpolates_linear_functions_and_restriction_is_its_transpose(n):
    t = multigrid.transfer_1d(n)
    pos = t["pos"]
    P = np.zeros((n, len(pos)))
    P[np.arange(n), t["c0"]] += t["w0"]
    P[np.arange(n), t["c1"]] += t["w1"]
    assert np.allclose(P @ np.ones(len(pos)), 1.0)
    assert np.allclose(P @ pos.astype(float), np.arange(n))          # linear functions exactly
    for c, p in enumerate(pos):                                       # Pᵀ's row c as the kernel reads it
        row = np.zeros(n)
        row[p] = 1.0
        if p > 0:
            row[p - 1] += t["wl"][c]
        if p < n - 1:
            row[p + 1] += t["wr"][c]
        assert np.allclose(row, P[:, c])


def test_hierarchy_is_galerkin():
    grid, tis = tissue((0.16, 0.12), 0.02)                   # 9 x 7 nodes: one odd-sized coarsening per level
    A = tis.elliptic.A
    h = multigrid.Hierarchy(A, grid.da.getSizes(), coarse_max=4, singular=True)
    assert h.levels >= 3
    Af = dense(A)
    for l, tables in enumerate(h.transfers):
        P1 = []
        for t in tables[:2]:
            n = len(t["c0"])
            P = np.zeros((n, len(t["pos"])))
            P[np.arange(n), t["c0"]] += t["w0"]
            P[np.arange(n), t["c1"]] += t["w1"]
            P1.append(P)
        P = np.kron(P1[1], P1[0])
        Af = P.T @ Af @ P
        S = h.stencils[l + 1]
        nx, ny, _ = h.sizes[l + 1]
        for r in range(nx * ny):
            i, j = r % nx, r // nx
            for s in range(9):
                ii, jj = i + s % 3 - 1, j + s // 3 - 1
                want = Af[r, ii + nx * jj] if 0 <= ii < nx and 0 <= jj < ny else 0.0
                assert S[s, r] == pytest.approx(want, abs=1e-12 * np.abs(Af).max())
    # the pseudo-inverse of the coarsest operator
    G = h.coarse_inverse
    assert np.allclose(Af @ G @ Af, Af, atol=1e-10 * np.abs(Af).max())


def reference_vcycle(h, b, omega=1.0, sweeps=1, jacobi_from=-1, jacobi_omega=0.8, finest_sweeps=0):
    """The V-cycle of kernels/stencil_mg.cpp from its definition, with dense matrices (levels from ``jacobi_from``
    smoothed by weighted Jacobi, multigrid.jacobi_weights; level 0 ``finest_sweeps`` times where nonzero)."""
    dim = h.dim
    mats, Ps = [], []
    for l, sizes in enumerate(h.sizes):
        N = int(np.prod(sizes))
        A = np.zeros((N, N))
        S = h.stencils[l]
        nx, ny, nz = sizes
        for r in range(N):
            i, j, k = r % nx, (r // nx) % ny, r // (nx * ny)
            for s in range(S.shape[0]):
                di, dj, dk = s % 3 - 1, (s // 3) % 3 - 1, (s // 9 - 1 if dim == 3 else 0)
                ii, jj, kk = i + di, j + dj, k + dk
                if 0 <= ii < nx and 0 <= jj < ny and 0 <= kk < nz:
                    A[r, ii + nx * (jj + ny * kk)] = S[s, r]
        mats.append(A)
    for tables in h.transfers:
        P = np.ones((1, 1))
        for t in tables:
            n = len(t["c0"])
            Pd = np.zeros((n, len(t["pos"])))
            Pd[np.arange(n), t["c0"]] += t["w0"]
            Pd[np.arange(n), t["c1"]] += t["w1"]
            P = np.kron(Pd, P)
        Ps.append(P)

    def colour_of(sizes):
        nx, ny, _ = sizes
        r = np.arange(int(np.prod(sizes)))
        return (r % nx) % 2 + 2 * (((r // nx) % ny) % 2) + 4 * ((r // (nx * ny)) % 2)

    def sweep(A, x, b, sizes, order):
        col = colour_of(sizes)
        for c in order:
            idx = np.flatnonzero(col == c)
            x_old = x.copy()
            for r in idx:                       # one colour: no two of its nodes couple, so Jacobi within it
                x[r] = x_old[r] + omega * ((b[r] - A[r] @ x_old + A[r, r] * x_old[r]) / A[r, r] - x_old[r])
        return x

    def smooth(l, A, x, b, order):
        if 0 <= jacobi_from <= l:
            return x + multigrid.jacobi_weights(h.stencils[l], jacobi_omega) * (b - A @ x)
        return sweep(A, x, b, h.sizes[l], order)

    def cycle(l, b):
        if l == h.levels - 1:
            return h.coarse_inverse @ b
        A, P = mats[l], Ps[l]
        colours = 2 ** dim
        x = np.zeros_like(b)
        nu = finest_sweeps if l == 0 and finest_sweeps else sweeps
        for _ in range(nu):
            x = smooth(l, A, x, b, range(colours))
        x = x + P @ cycle(l + 1, P.T @ (b - A @ x))
        for _ in range(nu):
            x = smooth(l, A, x, b, reversed(range(colours)))
        return x

    return cycle(0, b), mats[0]


@pytest.mark.parametrize("size,h,omega,sweeps", [((0.16, 0.12), 0.02, 1.0, 1), ((0.1, 0.08, 0.06), 0.02, 1.3, 2)])
def test_compiled_vcycle_equals_its_definition_and_is_symmetric(size, h, omega, sweeps):
    grid, tis = tissue(size, h)
    A = tis.elliptic.A
    hier = multigrid.Hierarchy(A, grid.da.getSizes(), coarse_max=8, singular=True)
    vc = multigrid.VCycle(hier, gpu=False, omega=omega, sweeps=sweeps)
    N = A.getSize()[0]
    rng = np.random.default_rng(1)
    b = rng.standard_normal(N)
    x = np.empty(N)
    vc.apply(b.ctypes.data, x.ctypes.data)
    want, _ = reference_vcycle(hier, b, omega, sweeps)
    assert np.allclose(x, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    M = np.empty((N, N))
    e = np.zeros(N)
    for k in range(N):
        e[:] = 0.0
        e[k] = 1.0
        col = np.empty(N)
        vc.apply(e.ctypes.data, col.ctypes.data)
        M[:, k] = col
    vc.destroy()
    assert np.allclose(M, M.T, atol=1e-12 * np.abs(M).max())
    # positive (semi-)definite on the complement of the constants: a valid CG preconditioner
    Q = np.eye(N) - 1.0 / N
    lam = np.linalg.eigvalsh(Q @ M @ Q)
    assert lam.min() > -1e-10 * lam.max()


@pytest.mark.parametrize("size,h,sweeps,finest", [((0.16, 0.12), 0.02, 1, 0), ((0.1, 0.08, 0.06), 0.02, 1, 0),
                                                 ((0.1, 0.08, 0.06), 0.02, 2, 0), ((0.1, 0.08, 0.06), 0.02, 1, 2),
                                                 ((0.16, 0.12), 0.02, 2, 3)])
def test_jacobi_vcycle_equals_its_definition(size, h, sweeps, finest):
    """Jacobi on every level (the GPU's default on a masked grid): the compiled V-cycle runs its fused loops (the
    first sweep with the residual after it; after the correction each sweep with the residual before it, from one
    vector into another, the last into the level's result), with one sweep per level or several, and level 0's
    count apart (``finest``); each is the weighted-Jacobi V-cycle of its definition."""
    grid, tis = tissue(size, h)
    hier = multigrid.Hierarchy(tis.elliptic.A, grid.da.getSizes(), coarse_max=8, singular=True)
    assert hier.levels >= 3
    vc = multigrid.VCycle(hier, gpu=False, sweeps=sweeps, jacobi_from=0, finest_sweeps=finest)
    b = np.random.default_rng(2).standard_normal(tis.elliptic.A.getSize()[0])
    x = np.empty_like(b)
    vc.apply(b.ctypes.data, x.ctypes.data)
    vc.destroy()
    want, _ = reference_vcycle(hier, b, sweeps=sweeps, jacobi_from=0, finest_sweeps=finest)
    assert np.allclose(x, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())


def solve(ksp_solver, b):
    x = b.duplicate()
    x.set(0.0)
    ksp_solver.ksp.solve(b, x)
    assert ksp_solver.ksp.getConvergedReason() > 0
    return x, ksp_solver.ksp.getIterationNumber()


@pytest.mark.parametrize("size,h", [((0.5, 0.3), 0.01), ((0.2, 0.12, 0.1), 0.01)])
def test_cg_with_stencil_mg_solves_the_tissue_systems(size, h):
    """CG + this multigrid on the bidomain's two systems (2D: 51 x 31 box stencil, fibres at 30°; 3D: 21 x 13 x 11)
    reaches the same solution as the defaults (PCMG / block Jacobi) to solver tolerance, in few iterations."""
    opts = PETSc.Options()
    grid, ref = tissue(size, h)
    rng = np.random.default_rng(3)
    for name in ("parabolic", "elliptic"):
        s = getattr(ref, name)
        xs = s.A.createVecs()[0]
        xs.setArray(rng.standard_normal(xs.getSize()))
        b = s.A.createVecs()[1]
        s.A.mult(xs, b)
        x_ref, its_ref = solve(s, b)
        opts[f"{name}_pc_type"] = "python"
        opts[f"{name}_pc_python_type"] = multigrid.PYTHON_TYPE
        try:
            _, tis = tissue(size, h)
        finally:
            del opts[f"{name}_pc_type"]
            del opts[f"{name}_pc_python_type"]
        t = getattr(tis, name)
        assert t.ksp.getPC().getType() == "python"
        x, its = solve(t, b)
        if name == "elliptic":             # defined up to a constant
            x.shift(-x.sum() / x.getSize())
            x_ref.shift(-x_ref.sum() / x_ref.getSize())
        err = np.abs(x.getArray() - x_ref.getArray()).max() / np.abs(x_ref.getArray()).max()
        print(f"{name:<10} default {s.describe()} {its_ref:3d} its   stencil MG {its:3d} its   "
              f"max rel. difference {err:.1e}")
        assert err < 1e-7
        assert its <= its_ref + 2


@pytest.mark.parametrize("system", ["elliptic", "parabolic"])
def test_gauss_jordan_coarse_inverse_equals_the_pseudo_inverse(system):
    """Gauss–Jordan (pinned node, projected) in the compiled code = the eigendecomposition's (pseudo-)inverse."""
    grid, tis = tissue((0.5, 0.3), 0.01)
    A = getattr(tis, system).A
    singular = system == "elliptic"
    h = multigrid.Hierarchy(A, grid.da.getSizes(), coarse_max=300, singular=singular)
    vc = multigrid.VCycle(h, gpu=False, coarse="gauss-jordan")
    G = vc.coarse_inverse()
    vc.destroy()
    ref = h.coarse_inverse
    err = np.abs(G - ref).max() / np.abs(ref).max()
    print(f"\n{system}: coarsest {G.shape[0]} nodes, max |GJ - eig| / max |eig| = {err:.1e}")
    assert err < 1e-10
    with pytest.raises(ValueError, match="smg_coarse_solve"):
        multigrid.VCycle(h, gpu=False, coarse="lu")


def test_the_gpu_defaults_coarse_limit_reaches_the_hierarchy():
    """The GPU runs' multigrid stops coarsening at GPU_STENCIL_MG's smg_coarse_max (cardiosim.solvers.linear: coarse
    levels cost the GPU launch latency), not at the solver's own 1024: the option by the name StencilMG reads, applied
    through the defaults mechanism the runs use. 65 x 65 nodes: 33 x 33 = 1089 is the coarsest under the GPU's
    limit, 17 x 17 under 1024."""
    from cardiosim.runtime import petsc as petsc_options
    from cardiosim.solvers import linear
    coarsest = {}
    for label, defaults in (("gpu", linear.GPU_STENCIL_MG), ("solver", linear.STENCIL_MG)):
        with petsc_options.inserted("elliptic_", {**linear.STENCIL_CG, **defaults}):
            _, tis = tissue((0.64, 0.64), 0.01)
        mg = tis.elliptic.ksp.getPC().getPythonContext()
        assert int(np.prod(mg.hierarchy.sizes[-1])) <= mg.coarse_max
        coarsest[label] = tuple(mg.hierarchy.sizes[-1][:2])
    assert coarsest == {"gpu": (33, 33), "solver": (17, 17)}


@pytest.mark.parametrize("size,h", [((0.5, 0.3), 0.01), ((0.2, 0.12, 0.1), 0.01)])
def test_jacobi_weights_keep_the_smoother_convergent(size, h):
    """smg_jacobi_from (the coarse levels smoothed by Jacobi: two loops per sweep on the GPU instead of 2^d): the
    weights make 2 W^-1 - A positive definite on every level they apply to (the smoother converges in A's norm),
    through the cap on rows with a large off-diagonal sum, which the 2D sheet's rotated box stencil has; and CG with
    that V-cycle takes about the SOR V-cycle's iterations on the elliptic system."""
    from cardiosim.solvers import galerkin
    grid, tis = tissue(size, h)
    A = tis.elliptic.A
    hier = multigrid.Hierarchy(A, grid.da.getSizes(), coarse_max=16, singular=True)
    capped = 0
    for l in range(1, hier.levels - 1):
        S = hier.stencils[l]
        w = multigrid.jacobi_weights(S, 0.8)
        capped += int(np.sum(w < 0.8 / S[S.shape[0] // 2] * (1 - 1e-12)))
        D = galerkin.dense(galerkin.Stencil.of(_rows_27(hier, l)), hier.sizes[l])
        assert np.linalg.eigvalsh(2.0 * np.diag(1.0 / w) - D).min() > 0.0
    if len(size) == 2:
        assert capped > 0                         # the cap is in force somewhere on the rotated sheet
    its = {}
    for jf in (-1, 1):
        opts = PETSc.Options()
        opts["elliptic_pc_type"] = "python"
        opts["elliptic_pc_python_type"] = multigrid.PYTHON_TYPE
        opts["elliptic_smg_jacobi_from"] = str(jf)
        try:
            _, t = tissue(size, h)
        finally:
            for k in ("pc_type", "pc_python_type", "smg_jacobi_from"):
                del opts[f"elliptic_{k}"]
        b = t.elliptic.A.createVecs()[1]
        xs = b.duplicate()
        xs.setArray(np.random.default_rng(3).standard_normal(xs.getSize()))
        t.elliptic.A.mult(xs, b)
        _, its[jf] = solve(t.elliptic, b)
    assert its[1] <= its[-1] + 2, its


@pytest.mark.parametrize("size,h,sweeps", [((0.16, 0.12), 0.02, 1), ((0.1, 0.08, 0.06), 0.02, 2)])
def test_vcycle_with_jacobi_coarse_levels_is_symmetric_positive(size, h, sweeps):
    """Jacobi before and after each coarse correction is the same symmetric smoother: the V-cycle stays a
    symmetric positive semi-definite operator (a valid CG preconditioner), and differs from the SOR V-cycle."""
    grid, tis = tissue(size, h)
    A = tis.elliptic.A
    hier = multigrid.Hierarchy(A, grid.da.getSizes(), coarse_max=8, singular=True)
    assert hier.levels >= 3
    N = A.getSize()[0]
    Ms = {}
    for jf in (-1, 0, 1):          # 0: the finest level too (the GPU's default on a masked grid)
        vc = multigrid.VCycle(hier, gpu=False, sweeps=sweeps, jacobi_from=jf)
        M = np.empty((N, N))
        e, col = np.zeros(N), np.empty(N)
        for k in range(N):
            e[:] = 0.0
            e[k] = 1.0
            vc.apply(e.ctypes.data, col.ctypes.data)
            M[:, k] = col
        vc.destroy()
        Ms[jf] = M
    for jf in (0, 1):
        M = Ms[jf]
        assert np.allclose(M, M.T, atol=1e-12 * np.abs(M).max())
        Q = np.eye(N) - 1.0 / N
        lam = np.linalg.eigvalsh(Q @ M @ Q)
        assert lam.min() > -1e-10 * lam.max()
        assert np.abs(M - Ms[-1]).max() > 1e-6 * np.abs(M).max()
    assert np.abs(Ms[0] - Ms[1]).max() > 1e-6 * np.abs(Ms[1]).max()


def test_gpu_elliptic_jacobi_on_every_level_of_a_masked_grid():
    """The GPU's elliptic multigrid smooths levels 1 and coarser by Jacobi, and the finest level too where the grid
    is masked (cardiosim.solvers.linear.GPU_MASKED_JACOBI_FROM: its SOR colours are launches over few nodes), swept
    twice there (GPU_MASKED_FINEST_SWEEPS); a box keeps one SOR sweep on its finest level."""
    from types import SimpleNamespace
    box, masked = (linear.gpu_elliptic_defaults(SimpleNamespace(mask=m)) for m in (None, object()))
    assert box["smg_jacobi_from"] == "1" and "smg_finest_sweeps" not in box
    assert masked["smg_jacobi_from"] == "0" and masked["smg_finest_sweeps"] == "2"


def _rows_27(h, l):
    """Level l's stencil rows as 27 codes (2D: the z = 0 layer's 9 in the middle)."""
    S = h.stencils[l]
    if h.dim == 3:
        return S
    out = np.zeros((27, S.shape[1]))
    out[9:18] = S
    return out

"""The multigrid set-up's stencil arithmetic (cardiosim.solvers.galerkin, kernels/stencil_setup.c): a matrix read
into a stencil, and the Galerkin coarse stencil PᵀAP formed one dimension at a time, against PETSc's MatPtAP of
the same matrices (random non-symmetric 3^d-point stencils, odd and even sizes, 2D and 3D, a grid of one node
along a dimension), and on a rank's box with its ghost layer against the whole grid's."""

import numpy as np
import pytest
from petsc4py import PETSc

from cardiosim.solvers import galerkin
from cardiosim.solvers.comm import Boxes
from cardiosim.solvers.multigrid import transfer_1d

from conftest import require_gcc


@pytest.fixture(scope="module", autouse=True)
def _compiler():
    require_gcc()


def random_matrix(sizes, seed=0):
    """A random matrix coupling each node to its 3^d in-grid neighbours (natural order), as PETSc AIJ and dense."""
    rng = np.random.default_rng(seed)
    n = int(np.prod(sizes))
    A = stencil_matrix(rng.standard_normal((27, n)), sizes)
    M = PETSc.Mat().createAIJ(size=(n, n), comm=PETSc.COMM_SELF)
    M.setUp()
    rows, cols = np.nonzero(A)
    for r in range(n):
        c = cols[rows == r]
        M.setValues(r, c.astype(PETSc.IntType), A[r, c])
    M.assemble()
    return M, A


def prolongation(tables, sizes):
    P = np.ones((1, 1))
    for t in tables:
        n = len(t["c0"])
        Pd = np.zeros((n, len(t["pos"])))
        Pd[np.arange(n), t["c0"]] += t["w0"]
        Pd[np.arange(n), t["c1"]] += t["w1"]
        P = np.kron(Pd, P)
    M = PETSc.Mat().createDense(size=P.shape, array=P, comm=PETSc.COMM_SELF)
    return M.convert("aij"), P


def stencil_matrix(S, sizes):
    """The matrix of a stencil (not symmetrised; entries towards nodes outside the grid left out)."""
    nx, ny, nz = sizes
    n = nx * ny * nz
    t = np.arange(n)
    i, j, k = t % nx, (t // nx) % ny, t // (nx * ny)
    A = np.zeros((n, n))
    for s in range(27):
        di, dj, dk = s % 3 - 1, (s // 3) % 3 - 1, s // 9 - 1
        ok = (i + di >= 0) & (i + di < nx) & (j + dj >= 0) & (j + dj < ny) & (k + dk >= 0) & (k + dk < nz)
        A[t[ok], (t + di + nx * (dj + ny * dk))[ok]] = S[s, ok]
    return A


@pytest.mark.parametrize("sizes", [(5, 4, 3), (7, 5, 6), (8, 9, 1), (4, 1, 1), (9, 2, 5)])
def test_stencil_galerkin_equals_petsc_ptap(sizes):
    M, A = random_matrix(sizes)
    S = galerkin.from_csr(M.getValuesCSR(), Boxes.whole(sizes), 0)
    assert np.array_equal(stencil_matrix(S.S, sizes), A)
    tables = [transfer_1d(n) for n in sizes]
    coarse = tuple(len(t["pos"]) for t in tables)
    Sc = galerkin.coarsen(S, (0, 0, 0), sizes, tables, (0, 0, 0), coarse)
    P, _ = prolongation(tables, sizes)
    ref = M.ptap(P)
    indptr, cols, vals = ref.getValuesCSR()
    want = np.zeros(ref.getSize())
    want[np.repeat(np.arange(len(indptr) - 1), np.diff(indptr)), cols] = vals
    got = stencil_matrix(Sc.S, coarse)
    assert np.abs(got - want).max() <= 1e-13 * np.abs(want).max()


def test_a_box_with_its_ghost_layer_gives_the_whole_grids_rows():
    """Coarsening a sub-box (with one fine ghost layer around it) gives exactly the whole grid's coarse rows there:
    what each rank of a split level does (cardiosim.solvers.multigrid.RankHierarchy)."""
    sizes = (13, 10, 9)
    M, _ = random_matrix(sizes, seed=1)
    S = galerkin.from_csr(M.getValuesCSR(), Boxes.whole(sizes), 0)
    tables = [transfer_1d(n) for n in sizes]
    coarse = tuple(len(t["pos"]) for t in tables)
    whole = galerkin.coarsen(S, (0, 0, 0), sizes, tables, (0, 0, 0), coarse)
    cstart, csize = np.array([2, 1, 0]), np.array([3, 3, 5])          # a coarse box
    pos = [t["pos"] for t in tables]
    lo = [max(pos[d][cstart[d]] - 1, 0) for d in range(3)]
    hi = [min(pos[d][cstart[d] + csize[d] - 1] + 2, sizes[d]) for d in range(3)]
    nat = np.arange(int(np.prod(sizes))).reshape(sizes[::-1])
    part = nat[lo[2]:hi[2], lo[1]:hi[1], lo[0]:hi[0]].ravel()
    sub = galerkin.coarsen(galerkin.Stencil(np.ascontiguousarray(S.S[:, part]), S.codes), lo, [h - l for h, l in zip(hi, lo)], tables, cstart,
                           csize)
    cnat = np.arange(int(np.prod(coarse))).reshape(coarse[::-1])
    cpart = cnat[cstart[2]:cstart[2] + csize[2], cstart[1]:cstart[1] + csize[1], cstart[0]:cstart[0] + csize[0]]
    # the same terms in the same order for every node, whatever the box: equal bit for bit (a split level's rows
    # equal one rank's)
    assert np.array_equal(sub.S, whole.S[:, cpart.ravel()])


def test_far_couplings_are_refused():
    n = 6
    M = PETSc.Mat().createAIJ(size=(n, n), comm=PETSc.COMM_SELF)
    M.setUp()
    M.setValue(0, 0, 1.0)
    M.setValue(0, 2, 1.0)           # two steps along x
    M.assemble()
    with pytest.raises(ValueError, match="more than one grid step"):
        galerkin.from_csr(M.getValuesCSR(), Boxes.whole((6, 1, 1)), 0)

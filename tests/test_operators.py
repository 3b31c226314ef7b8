"""The stiffness matrices (cardiosim.tissue.operators.Assembler) against a dense matrix summed element by element in NumPy
on the whole grid: box and star stencils, 2D and 3D, anisotropic tensors that differ from node to node, on 1 rank
and on 2 and 3 ranks (each rank builds its rows from the elements around them; nothing is exchanged); the rows'
own product (RowsOperator) against the matrix's; the rows computed in slabs on several threads equal one call's,
bit for bit."""

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import require_mpirun

SCRIPT = textwrap.dedent('''
    import itertools, sys
    import numpy as np
    import petsc4py
    petsc4py.init(sys.argv[:1])
    from petsc4py import PETSc
    from mpi4py import MPI
    from cardiosim import config
    from cardiosim.domain.grid import Grid
    from cardiosim.tissue.operators import Assembler, NodeConductivity, RowsOperator, _unit_element_matrices

    def node_tensors(n, dim, seed=3):
        """A transversely isotropic tensor per node of the whole grid (natural order), mS/cm: random unit fibres
        f, σ_l, σ_t and scale s; σ = s (σ_t I + (σ_l − σ_t) f fᵀ). Returns σ and its NodeConductivity pieces."""
        rng = np.random.default_rng(seed)
        N = int(np.prod(n))
        f = rng.normal(size=(N, dim))
        f /= np.linalg.norm(f, axis=1)[:, None]
        sl, st, s = rng.uniform(1.0, 3.0, N), rng.uniform(0.1, 0.9, N), rng.uniform(0.5, 1.5, N)
        T = s[:, None, None] * (st[:, None, None] * np.eye(dim) + (sl - st)[:, None, None] * f[:, :, None] * f[:, None, :])
        return T, (sl, st, s, f)

    def reference(n, h, dim, T, lumped):
        """K summed over every element of the whole grid, dense, natural order."""
        E = _unit_element_matrices(h, lumped)
        N = int(np.prod(n))
        K = np.zeros((N, N))
        strides = np.cumprod([1] + [int(v) for v in n[:-1]])
        for lower in itertools.product(*[range(int(v) - 1) for v in n]):
            corners = [sum((lower[d] + ((a >> d) & 1)) * strides[d] for d in range(dim)) for a in range(2 ** dim)]
            s = T[corners].mean(axis=0)
            if lumped:
                s = np.diag(np.diag(s))
            K[np.ix_(corners, corners)] += np.einsum("pq,pqab->ab", s, E)
        return K

    size, spacing, stencil, compact = eval(sys.argv[1]), eval(sys.argv[2]), sys.argv[3], sys.argv[4] == "compact"
    cfg = config.loads(f"""
    [simulation]
    equations = "monodomain"
    duration = 1.0
    dt = 0.05
    [grid]
    size = {list(size)}
    spacing = {spacing}
    [cell]
    model = "mitchell-schaeffer"
    """, name="operators")
    comm = MPI.COMM_WORLD
    grid = Grid(cfg, PETSc.COMM_WORLD)
    dim = grid.dim
    T, (sl, st, s, f) = node_tensors(grid.n, dim)
    a = Assembler(grid, stencil, compact=compact)
    g = grid.natural_index(grid.ghosted)
    values = a.values(NodeConductivity(sl[g], st[g], s[g], f[g]))
    # the rows cut into z slabs, computed on several threads at once: the same bits as one call
    for threads in (1, 2, 5):
        a.threads = threads
        assert np.array_equal(a.values(NodeConductivity(sl[g], st[g], s[g], f[g])), values), threads
    A = a.matrix(values)
    # the rows' own product (no matrix) equals the matrix's, on any split
    xs = [grid.vec() for _ in range(3)]
    for i, x in enumerate(xs):
        x.getArray()[:] = np.random.default_rng(5 + i).normal(size=int(np.prod(grid.n)))[grid.natural_index()]
    zs = [grid.vec() for _ in xs]
    RowsOperator(a, values).products(xs, zs)
    for x, z in zip(xs, zs):
        y = grid.vec()
        A.mult(x, y)
        z.axpy(-1.0, y)
        assert z.norm(PETSc.NormType.INFINITY) <= 1e-13 * y.norm(PETSc.NormType.INFINITY), z.norm()
    # each row's columns strictly increasing (PETSc's CSR order; across rank boundaries not the neighbour order)
    ip, ix, take = a.csr_pattern()
    assert ip[0] == 0 and ip[-1] == len(ix) == len(take)
    assert all(np.all(np.diff(ix[ip[i]:ip[i + 1]]) > 0) for i in range(len(ip) - 1))
    # this rank's rows, dense, columns in natural order
    nat_of_petsc = np.concatenate(comm.allgather(grid.natural_index()))
    r0, r1 = A.getOwnershipRange()
    N = A.getSize()[0]
    rows = np.zeros((r1 - r0, N))
    for i in range(r0, r1):
        cols, vals = A.getRow(i)
        rows[i - r0, nat_of_petsc[cols]] = vals
    parts = comm.gather((grid.natural_index(), rows), root=0)
    nz = A.getInfo()["nz_used"]                 # summed over the ranks
    A.destroy()                                 # collectively, before rank 0 works alone
    grid.da.destroy()
    if comm.rank == 0:
        K = np.zeros((N, N))
        for nat, r in parts:
            K[nat] = r
        ref = reference(grid.n, grid.h, dim, T, stencil == "star")
        err = np.abs(K - ref).max() / np.abs(ref).max()
        print(f"{stencil}{' compact' if compact else ''} {tuple(int(v) for v in grid.n)} on {comm.size} rank(s): "
              f"max relative difference {err:.2e}")
        assert err < 1e-13, err
        assert np.abs(K - K.T).max() < 1e-12 * np.abs(ref).max()
        # the pattern: every in-grid neighbour of the 3^d box (zeros included), or the star's 2d + 1 if compact
        n = [int(v) for v in grid.n]
        N = int(np.prod(n))
        expected = (N + sum(2 * (v - 1) * N // v for v in n) if stencil == "star" and compact
                    else np.prod([3 * v - 2 for v in n]))
        assert nz == expected, (nz, expected)
''')

CASES = [("(0.6, 0.4)", "0.05", "box", "-"), ("(0.6, 0.4)", "0.05", "star", "-"),
         ("(0.3, 0.2, 0.2)", "0.05", "box", "-"), ("(0.3, 0.2, 0.2)", "[0.05, 0.05, 0.1]", "star", "-"),
         ("(0.6, 0.4)", "0.05", "star", "compact"), ("(0.3, 0.2, 0.2)", "[0.05, 0.05, 0.1]", "star", "compact")]


def _run(tmp_path, case, ranks):
    script = tmp_path / "operators_check.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, str(script), *case]
    if ranks > 1:
        cmd = [require_mpirun(), "-n", str(ranks), *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    print(proc.stdout.strip())


@pytest.mark.parametrize("case", CASES, ids=["2D-box", "2D-star", "3D-box", "3D-star", "2D-star-compact",
                                             "3D-star-compact"])
def test_matrix_equals_dense_element_sum(tmp_path, case):
    _run(tmp_path, case, 1)


@pytest.mark.parametrize("ranks", [2, 3])
@pytest.mark.parametrize("case", [CASES[0], CASES[5]], ids=["2D-box", "3D-star-compact"])
def test_matrix_on_several_ranks_equals_dense_element_sum(tmp_path, case, ranks):
    _run(tmp_path, case, ranks)

"""cardiosim's stencil solvers on 2 GPUs, one rank each (the resident placement's matrices and vectors: cuSPARSE,
CUDA), against the same solve on one GPU: the same converged reason, iteration counts within one, solutions within
the solver tolerance, for the host-staged transport (the one the node's MPI allows: it is not CUDA-aware). Then
whole runs: a bidomain TT06 sheet and a monodomain slab on 2 GPUs against 1 GPU and the cpu placement. Run on a
node with 2 GPUs (CARDIOSIM_REQUIRE=multigpu turns the skip on fewer into a failure):

    python3 -m pytest -q -s -m gpu tests/test_solvers_ranks_gpu.py
"""

import pytest

from conftest import needs, require_gpu
from test_solvers_ranks import SHEET_2D, SLAB_3D, agree, ranks_solve

pytestmark = [pytest.mark.gpu, pytest.mark.mpi]


@pytest.fixture(scope="module", autouse=True)
def two_gpus():
    needs("multigpu", require_gpu() >= 2, "2 GPUs")


@pytest.mark.parametrize("grid", [SHEET_2D, SLAB_3D], ids=["2d-box", "3d-star"])
@pytest.mark.parametrize("system,pc", [("parabolic", "jacobi"), ("elliptic", "mg")])
@pytest.mark.parametrize("layout", ["ranks", "root"])
def test_two_gpus_equal_one(grid, system, pc, layout):
    r = ranks_solve(2, [*grid, "--system", system, "--pc", pc, "--layout", layout, "--agglomerate", "64",
                        "--placement", "resident"])
    agree(r)
    if layout == "ranks":
        assert r["exchanges"] > 0
    else:
        assert r["exchanges"] == 0 and r["its"] == r["its_1"]

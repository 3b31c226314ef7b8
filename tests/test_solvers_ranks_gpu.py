"""cardiosim's stencil solvers on 2 GPUs, one rank each (the resident placement's matrices and vectors: cuSPARSE,
CUDA), against the same solve on one GPU: the same converged reason, iteration counts within one, solutions within
the solver tolerance, for both transports (host-staged MPI; CUDA IPC, with no byte through host memory) and both
layouts (the grid split over the GPUs; the whole solve on rank 0's GPU). Run on a node with 2 GPUs (CARDIOSIM_REQUIRE=multigpu turns the skip on fewer into a failure):

    python3 -m pytest -q -s -m gpu tests/test_solvers_ranks_gpu.py
"""

import pytest

from conftest import needs, require_gpu
from test_solvers_ranks import PRODUCT, SHEET_2D, SLAB_3D, agree, ranks_solve

pytestmark = [pytest.mark.gpu, pytest.mark.mpi]


@pytest.fixture(scope="module", autouse=True)
def two_gpus():
    needs("multigpu", require_gpu() >= 2, "2 GPUs")


@pytest.mark.parametrize("grid", [SHEET_2D, SLAB_3D], ids=["2d-box", "3d-star"])
@pytest.mark.parametrize("system,pc", [("parabolic", "jacobi"), ("elliptic", "mg")])
@pytest.mark.parametrize("layout", ["ranks", "root"])
@pytest.mark.parametrize("transport", ["mpi-host", "ipc"])
def test_two_gpus_equal_one(grid, system, pc, layout, transport):
    r = ranks_solve(2, [*grid, "--system", system, "--pc", pc, "--layout", layout, "--agglomerate", "64",
                        "--placement", "resident", "--transport", transport])
    agree(r)
    if layout == "ranks":
        assert r["exchanges"] > 0
    else:
        assert r["exchanges"] == 0 and r["its"] == r["its_1"]
    assert r["bytes"] > 0
    if transport == "ipc":
        assert r["host_bytes"] == 0           # device to device: nothing through host memory
    else:
        assert r["host_bytes"] > 0


@pytest.mark.parametrize("grid", [SHEET_2D, SLAB_3D], ids=["2d-box", "3d-star"])
def test_four_ranks_on_two_gpus_graphs_equal_launches(grid):
    """The IPC seam split in two dimensions at once (edges and corners pass through two phases), 4 ranks sharing 2
    GPUs, with each rank's V-cycle one CUDA graph (exchanges, gathers and scatters ordered on the device inside it)
    and with every kernel launched from the host: both equal one rank's solve, and each other bit for bit."""
    base = [*grid, "--system", "elliptic", "--pc", "mg", "--layout", "ranks", "--agglomerate", "16",
            "--placement", "resident", "--transport", "ipc"]
    graphs = ranks_solve(4, base)
    launches = ranks_solve(4, [*base, "--graphs", "off"])
    assert sum(p > 1 for p in graphs["procs"]) == 2
    for r in (graphs, launches):
        agree(r)
        assert r["host_bytes"] == 0 and r["gathers"] > 0
    assert graphs["its"] == launches["its"] and graphs["rnorm"] == launches["rnorm"]
    assert graphs["exchanges"] == launches["exchanges"] > 0


@pytest.mark.parametrize("grid", [SHEET_2D[:-2], SLAB_3D[:-2]], ids=["2d-box", "3d-star"])
@pytest.mark.parametrize("transport", ["mpi-host", "ipc"])
def test_stencil_product_on_two_gpus_equals_matmult(grid, transport):
    """The right-hand sides' product on 2 GPUs (cuSPARSE K_i) equals PETSc's MatMult to round-off, and so does a
    whole right-hand side in one pass (StencilProduct.combine); by IPC nothing passes through host memory."""
    r = ranks_solve(2, [*grid, "--placement", "resident", "--transport", transport], script=PRODUCT)
    assert r["max_rel_diff"] < 1e-13 and r["exchanges"] == 3 and r["transport"] == transport
    assert max(r["combine_max_rel_diff"]) < 1e-13 and r["deflate_max_rel_diff"] < 1e-13
    assert (r["host_bytes"] == 0) == (transport == "ipc")

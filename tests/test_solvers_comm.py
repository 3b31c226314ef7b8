"""The decomposition behind the stencil solvers on several ranks (cardiosim.solvers.comm), on one process: a level's
boxes, PETSc's rank-by-rank numbering and back, the coarse boxes, and the choices of layout and transport."""

import numpy as np
import pytest
from mpi4py import MPI

from cardiosim.solvers import comm
from cardiosim.solvers.multigrid import transfer_1d

# 10 x 7 nodes over a 3 x 2 process grid: boxes of unequal sizes, odd origins
BOXES = comm.Boxes(n=(10, 7, 1), P=(3, 2, 1), sizes=(np.array([4, 3, 3]), np.array([4, 3]), np.array([1])))


def test_petsc_numbering_round_trips_and_covers_every_node_once():
    total = 10 * 7
    assert BOXES.offsets()[-1] == total
    ijk = BOXES.coords(np.arange(total))
    assert np.array_equal(BOXES.index(ijk), np.arange(total))
    assert sorted(BOXES.natural(ijk)) == list(range(total))          # a permutation of the natural order


def test_petsc_numbers_each_rank_box_in_turn_x_fastest():
    start, size = BOXES.box(4)                                      # px = 1, py = 1
    assert list(start) == [4, 4, 0] and list(size) == [3, 3, 1]
    first = BOXES.offsets()[4]
    assert list(BOXES.coords([first, first + 1, first + 3])[:, :2].ravel()) == [4, 4, 5, 4, 4, 5]


def test_coarse_boxes_keep_the_coarse_points_inside_each_fine_box():
    pos = [transfer_1d(n)["pos"] for n in BOXES.n]
    coarse = BOXES.coarsen(pos)
    assert coarse.n == (6, 4, 1)                                     # even indices and the last
    for d in range(2):
        fine_edges = np.concatenate([[0], np.cumsum(BOXES.sizes[d])])
        for q, (a, b) in enumerate(zip(fine_edges[:-1], fine_edges[1:])):
            inside = np.flatnonzero((pos[d] >= a) & (pos[d] < b))
            assert coarse.sizes[d][q] == len(inside)
    assert coarse.smallest(2) >= 1


def test_all_boxes_is_every_rank_box():
    starts, sizes = BOXES.all_boxes()
    for r in range(BOXES.nranks):
        s, n = BOXES.box(r)
        assert list(starts[r]) == list(s) and list(sizes[r]) == list(n)


def test_layout_splits_big_grids_and_gathers_small_ones():
    assert comm.layout("auto", 10 ** 7, 2)[0] == "ranks"
    assert comm.layout("auto", 390_625, 2)[0] == "root"          # Table 4.1's sheet on 2 GPUs: root was faster
    assert comm.layout("auto", 2 * 781_456, 2)[0] == "ranks"      # 884² per GPU: the split was faster
    assert comm.layout("root", 10 ** 7, 2)[0] == "root"
    assert comm.layout("auto", 10, 1) == ("ranks", "")
    with pytest.raises(ValueError, match="smg_layout"):
        comm.layout("everywhere", 10, 2)


def test_transport_auto_is_host_staged_without_a_gpu_and_ipc_needs_one():
    assert comm.transport("auto", False, MPI.COMM_SELF) == "mpi-host"
    assert comm.transport("auto", True, MPI.COMM_SELF) == "ipc"      # one rank: one node
    with pytest.raises(ValueError, match="ipc"):
        comm.transport("ipc", False, MPI.COMM_SELF)
    with pytest.raises(ValueError, match="allowed"):
        comm.transport("carrier-pigeon", True, MPI.COMM_SELF)

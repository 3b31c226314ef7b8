"""The tissue-only stencil solves (tests/test_masked_mg.py) in the GPU build (the resident placement's matrices):
with the active-node lists (smg_active true) and over the whole box (false), the same iterations and the same
solution to round-off (the GPU's reductions over a list add in another order than over the box), on one GPU and
on two (both transports, both layouts). Run on a GPU node (2 GPUs for the second test):

    python3 -m pytest -q -s -m gpu tests/test_masked_mg_gpu.py
"""

import pytest

from conftest import needs, require_gpu
from test_masked_mg import RING, SHELL, solve

pytestmark = [pytest.mark.gpu]
RESIDENT = ["--placement", "resident"]


def same_as_box_gpu(r: dict) -> None:
    assert r["reason_on"] == r["reason_off"] and r["reason_on"] > 0
    assert r["its_on"] == r["its_off"]
    assert r["on_off"] < 1e-10
    assert r["share"][0] < 0.5


@pytest.fixture(scope="module", autouse=True)
def gpu():
    require_gpu()


@pytest.mark.parametrize("grid", [RING, SHELL], ids=["2d-ring", "3d-shell"])
@pytest.mark.parametrize("system,pc", [("elliptic", "mg"), ("parabolic", "mg"), ("parabolic", "jacobi")])
def test_active_solve_equals_the_box_on_one_gpu(grid, system, pc):
    same_as_box_gpu(solve(1, [*grid, "--system", system, "--pc", pc, *RESIDENT]))


@pytest.mark.mpi
@pytest.mark.parametrize("layout", ["ranks", "root"])
@pytest.mark.parametrize("transport", ["mpi-host", "ipc"])
def test_active_solve_equals_the_box_on_two_gpus(layout, transport):
    needs("multigpu", require_gpu() >= 2, "2 GPUs")
    r = solve(2, [*SHELL, "--system", "elliptic", "--pc", "mg", "--layout", layout, "--transport", transport,
                  "--halo", "colour", *RESIDENT])
    same_as_box_gpu(r)
    assert r["vs_1"] < 1e-7

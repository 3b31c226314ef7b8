"""The built-in anatomies made slab by slab and on the tissue nodes only (cardiosim/domain/anatomy.py,
cardiosim/domain/fibres.py) against the code they replaced (tests/geometry_reference.py: whole-box arrays, scipy's
fancy indexing and dilation): every dataset the same, bit for bit; and the pieces that replaced scipy's calls
against those calls."""

from __future__ import annotations

import h5py
import numpy as np
import pytest
import scipy.sparse as sp
from scipy import ndimage

import geometry_reference as reference
from cardiosim.domain import anatomy, fibres


@pytest.mark.parametrize("name,h", [("lv", 0.1), ("biv", 0.1), ("lv", 0.05), ("biv", 0.05)])
def test_built_in_anatomy_equals_the_previous_code(name, h, monkeypatch):
    """Labels, surfaces, coordinates, fibres, sheets and normals identical (dtype, shape, every value; NaN where
    NaN) to what the whole-box code made; the slabs and frame chunks made small, so that there are many."""
    monkeypatch.setattr(anatomy, "SLAB_NODES", 5000)
    monkeypatch.setattr(fibres, "FRAME_CHUNK", 1000)
    box, new = anatomy.built_in(name, h, log=lambda line: None)
    old_box, old = reference.built_in(name, h)
    assert np.array_equal(box.n, old_box.n) and np.array_equal(box.origin, old_box.origin)
    assert sorted(new) == sorted(old)
    for k in old:
        assert new[k].dtype == old[k].dtype and new[k].shape == old[k].shape, k
        assert np.array_equal(new[k], old[k], equal_nan=True), k


def test_streamed_fields_write_the_same_datasets(tmp_path, monkeypatch):
    """A field written a slab of z-planes at a time (fibres.Scattered) gives the dataset, and its chunks, of the
    whole array written at once."""
    monkeypatch.setattr(anatomy, "SLAB_NODES", 3000)
    box, sparse = anatomy.built_in("biv", 0.1, log=lambda line: None, dense=False)
    dense = {k: v.dense() if isinstance(v, fibres.Scattered) else v for k, v in sparse.items()}
    anatomy.write(tmp_path / "a.h5", box, sparse, "idealised BiV")
    anatomy.write(tmp_path / "b.h5", box, dense, "idealised BiV")
    with h5py.File(tmp_path / "a.h5") as a, h5py.File(tmp_path / "b.h5") as b:
        assert sorted(a) == sorted(b)
        for k in a:
            assert a[k].chunks == b[k].chunks and a[k].dtype == b[k].dtype, k
            assert np.array_equal(a[k][()], b[k][()], equal_nan=True), k


def test_free_block_equals_scipy_indexing():
    """fibres._free_block(A, free) is A[free][:, free]: the same CSR arrays."""
    rng = np.random.default_rng(1)
    A = sp.random(300, 300, density=0.05, random_state=2, format="csr")
    A = (A + A.T).tocsr()
    A.sort_indices()
    free = rng.random(300) < 0.7
    got, want = fibres._free_block(A, free), A[free][:, free].tocsr()
    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
    assert np.array_equal(got.data, want.data)


def test_dilation_by_the_cube_equals_scipy():
    rng = np.random.default_rng(3)
    mask = rng.random((9, 11, 13)) < 0.03
    want = ndimage.binary_dilation(mask, structure=np.ones((3, 3, 3), dtype=bool))
    assert np.array_equal(anatomy._dilate(mask), want)


def test_laplacian_equals_the_previous_assembly():
    """The Laplacian written straight into CSR equals the coordinate-list assembly: indptr, indices, data."""
    box, fields = anatomy.idealised_biv(0.1)
    elements, nodes = fibres.tissue_nodes(fields["labels"])
    got, want = fibres.laplacian(elements, nodes, box.h), reference.laplacian(elements, nodes, box.h)
    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
    assert np.array_equal(got.data, want.data)


def test_multigrid_path_equals_the_factor_path_within_tolerance(monkeypatch):
    """ψ and lv_rv by CG + GAMG (on the 7-point Laplacian, fibres._face_laplacian: what a grid of more than
    fibres.GAMG_ROWS free nodes takes; forced here with GAMG_ROWS = 0) against CG + ICC(0) on the BiV at 0.05 cm:
    both to the solves' tolerance of the same problem,
    so the coordinates agree within 1e-8 and the fibres, sheets and normals within 1e-3 degrees (measured: 5.4e-10
    and 5e-5 degrees)."""
    _, icc = anatomy.built_in("biv", 0.05, log=lambda line: None)
    monkeypatch.setattr(fibres, "GAMG_ROWS", 0)
    _, gamg = anatomy.built_in("biv", 0.05, log=lambda line: None)
    for k in ("labels", "surfaces"):
        assert np.array_equal(icc[k], gamg[k])
    for k in ("transmural", "apex_base", "lv_rv"):
        assert np.array_equal(np.isnan(icc[k]), np.isnan(gamg[k])) and np.nanmax(abs(icc[k] - gamg[k])) < 1e-8, k
    tissue = np.isfinite(icc["transmural"])
    for k in ("fibres", "sheets", "normals"):
        dot = np.clip(abs(np.sum(icc[k][tissue] * gamg[k][tissue], axis=1)), 0.0, 1.0)
        assert np.degrees(np.arccos(dot)).max() < 1e-3, k

"""Tissue inside the box: a label image on the vertex-centred grid (``tissue.label_file``) says which nodes are
tissue; the surface of the tissue is no-flux.

The rule is the one of the codes that run anatomies on structured grids (MonoAlg3D, Cardioid): a Q1 element takes
part only where all its 2^d corners are tissue, so every coupling to a node outside is dropped and the natural
(zero-flux) boundary condition of the weak form holds on the staircase surface. A node is tissue where it is a
corner of at least one such element (a labelled node without one is isolated: it is dropped and counted). Its
lumped mass is its share of those elements' volume, which for a full box is the usual lumped mass.

Nodes outside keep a row of their own in the matrices (a small diagonal in the elliptic system, so φe = 0 there;
a mass of 1/α in the parabolic one, so their Vm stays as it is), have no cells (cardiosim.reaction integrates the
tissue nodes only) and are never stimulated (docs/decisions/0028-tissue-inside-the-box.md).

The elliptic system's null space is one constant per connected piece of tissue (pieces that share no element),
found with ``scipy.ndimage.label``. The label image is read whole on every rank (it is one value per node of the
box); the parts a rank needs are cut from it.
"""

from __future__ import annotations

import itertools

import numpy as np
from petsc4py import PETSc

from cardiosim.runtime.errors import UserError


class TissueMask:
    """Tissue nodes, elements and connected pieces of a grid, from a per-node label image (0: no tissue)."""

    def __init__(self, grid, path: str):
        key = "tissue.label_file"
        labels = grid.whole_field(path, key)                               # every node, natural order
        if np.any(labels < 0) or np.any(labels != np.round(labels)):
            raise UserError(f"{key}: {path} must hold whole numbers >= 0 (0: no tissue, > 0: tissue label)")
        shape = tuple(int(v) for v in reversed(grid.n))                   # (nz, ny, nx)
        labelled = labels.reshape(shape) > 0
        dim = grid.dim
        # An element (indexed by its lowest corner) is tissue where all its corners are.
        elements = np.ones(tuple(s - 1 for s in shape), dtype=bool)
        for off in itertools.product((0, 1), repeat=dim):
            elements &= labelled[tuple(slice(o, o + s - 1) for o, s in zip(off, shape))]
        if not elements.any():
            raise UserError(f"{key}: {path} leaves no tissue: no element of the grid has all its {2 ** dim} "
                            f"corners labelled > 0")
        # Per node, how many tissue elements it is a corner of (its lumped mass is that many 2^-d element volumes).
        count = np.zeros(shape, dtype=np.int32)
        for off in itertools.product((0, 1), repeat=dim):
            count[tuple(slice(o, o + s - 1) for o, s in zip(off, shape))] += elements
        self.node_elements = count
        self.tissue = count > 0
        self.dropped = int(np.count_nonzero(labelled & ~self.tissue))    # labelled, but in no tissue element
        from scipy import ndimage
        pieces, self.n_pieces = ndimage.label(elements, structure=np.ones((3,) * dim, dtype=bool))
        # A node takes the piece of any of its tissue elements (elements that share a node are one piece).
        self.piece = np.zeros(shape, dtype=np.int32)
        for off in itertools.product((0, 1), repeat=dim):
            view = self.piece[tuple(slice(o, o + s - 1) for o, s in zip(off, shape))]
            np.maximum(view, pieces, out=view)
        self.n_tissue = int(np.count_nonzero(self.tissue))
        self.labels = np.where(self.tissue, labels.reshape(shape), 0).astype(np.int64)
        self.present = {int(v) for v in np.unique(self.labels) if v > 0}
        self.grid = grid

    def _owned(self, arr: np.ndarray, ranges=None) -> np.ndarray:
        """``arr`` (z, y, x) over the grid's owned range (or ``ranges``), flat in PETSc local order."""
        ranges = ranges or self.grid.owned
        return np.ascontiguousarray(arr[tuple(slice(a, b) for a, b in reversed(ranges))]).ravel()

    def outside(self) -> np.ndarray:
        """Owned nodes that are not tissue (bool, PETSc local order)."""
        return ~self._owned(self.tissue)

    def ghosted_tissue(self) -> np.ndarray:
        """Tissue flag of the nodes of the ghosted range, flat in PETSc local (ghosted) order."""
        return self._owned(self.tissue, self.grid.ghosted)

    def mass(self) -> PETSc.Vec:
        """Lumped mass (cm^d per node): each tissue element's volume shared equally among its corners."""
        M = self.grid.vec()
        volume = float(np.prod(self.grid.h))
        M.getArray()[:] = self._owned(self.node_elements) * (volume / 2 ** self.grid.dim)
        return M

    def indicator(self, piece: int | None = None) -> PETSc.Vec:
        """1 on the tissue nodes (of one connected piece, 1..n_pieces), 0 elsewhere."""
        v = self.grid.vec()
        sel = self.tissue if piece is None else self.piece == piece
        v.getArray()[:] = self._owned(sel).astype(float)
        return v

    def label_at(self, pts: np.ndarray) -> np.ndarray:
        """The label of the nodes at ``pts`` (n, dim) cm (grid nodes: the region rule of cardiosim.domain.grid)."""
        return self.labels[self.grid.nearest_nodes(pts)]

    def describe(self) -> str:
        out = f"{self.n_tissue} of {self.grid.n_nodes} nodes tissue, {self.n_pieces} connected piece(s)"
        return out + (f"; {self.dropped} labelled node(s) in no tissue element left out" if self.dropped else "")

"""The anatomy and rule-based fibres as cardiosim made them before they were made slab by slab and on the
tissue nodes only (cardiosim/domain/anatomy.py and fibres.py as of commit 09440c8, whole-box arrays, scipy's
fancy indexing and binary dilation, the free block factorised once per solve): the reference that
tests/test_geometry_scale.py compares the present code with, dataset by dataset. Not used by cardiosim."""

from __future__ import annotations

import itertools

import numpy as np

from cardiosim.domain.anatomy import BIV_RV_ENDO, BIV_RV_EPI, LV_BASE_Z, LV_ENDO, LV_EPI, Box
from cardiosim.domain.fibres import HELIX, RTOL, SHEET, SURFACES
from cardiosim.runtime.errors import SimulationError, UserError

# -- tissue nodes and the Q1 Laplacian on them ----------------------------------------------------------------------
def tissue_nodes(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(elements, nodes) of a (nz, ny, nx) label image: an element (indexed by its lowest corner) is tissue where
    its eight corners are labelled, a node where it is a corner of a tissue element (cardiosim.domain.mask's rule)."""
    labelled = labels > 0
    shape = labelled.shape
    elements = np.ones(tuple(s - 1 for s in shape), dtype=bool)
    for off in itertools.product((0, 1), repeat=3):
        elements &= labelled[tuple(slice(o, o + s - 1) for o, s in zip(off, shape))]
    nodes = np.zeros(shape, dtype=bool)
    for off in itertools.product((0, 1), repeat=3):
        nodes[tuple(slice(o, o + s - 1) for o, s in zip(off, shape))] |= elements
    return elements, nodes


def _q1_stiffness(h: float) -> np.ndarray:
    """The Q1 Laplacian of a cube of side h, 8 × 8, corners numbered by their offsets (z, y, x) in {0, 1}³: the
    tensor product of the 1D stiffness and mass matrices (exact; scales as h^(3−2))."""
    k1 = np.array([[1.0, -1.0], [-1.0, 1.0]])
    m1 = np.array([[1.0, 0.5], [0.5, 1.0]]) / 3.0
    corners = list(itertools.product((0, 1), repeat=3))
    K = np.zeros((8, 8))
    for i, a in enumerate(corners):
        for j, b in enumerate(corners):
            K[i, j] = sum(k1[a[d], b[d]] * np.prod([m1[a[e], b[e]] for e in range(3) if e != d]) for d in range(3))
    return K * h


def laplacian(elements: np.ndarray, nodes: np.ndarray, h: float):
    """The Q1 stiffness matrix on the tissue nodes (scipy CSR, rows in the order of ``np.flatnonzero(nodes)``),
    built one neighbour offset at a time so that no per-element array of 64 entries is ever made."""
    import scipy.sparse as sp
    shape = nodes.shape
    number = np.full(shape, -1, dtype=np.int64)
    number[nodes] = np.arange(int(nodes.sum()))
    K = _q1_stiffness(h)
    corners = list(itertools.product((0, 1), repeat=3))
    rows, cols, vals = [], [], []
    for off in itertools.product((-1, 0, 1), repeat=3):
        # value at node n of the coupling (n, n + off): the sum over the elements holding both
        v = np.zeros(shape)
        for i, a in enumerate(corners):
            b = tuple(x + o for x, o in zip(a, off))
            if not all(c in (0, 1) for c in b) or K[i, corners.index(b)] == 0.0:
                continue
            # the element with lowest corner e holds node e + a and e + b: node n = e + a
            v[tuple(slice(x, x + s - 1) for x, s in zip(a, shape))] += K[i, corners.index(b)] * elements
        nz = np.flatnonzero(v)
        if not len(nz):
            continue
        idx = np.unravel_index(nz, shape)
        other = tuple(i + o for i, o in zip(idx, off))
        rows.append(number[idx])
        cols.append(number[other])
        vals.append(v[idx])
    n = int(nodes.sum())
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(n, n))


def solve_laplace(A, fixed: np.ndarray, values: np.ndarray, what: str) -> np.ndarray:
    """u on the tissue nodes with A u = 0 at the free nodes and u = ``values`` at the ``fixed`` ones (bool, per
    row of A): the free block solved with PETSc's CG + ICC(0) (the Dirichlet nodes eliminated, so it is SPD)."""
    from scipy.sparse.csgraph import connected_components
    free = ~fixed
    u = np.where(fixed, values, 0.0)
    if not free.any():
        return u
    n_pieces, piece = connected_components(A, directed=False)
    touched = np.zeros(n_pieces, dtype=bool)
    touched[piece[fixed]] = True
    if not touched.all():
        sizes = np.bincount(piece, minlength=n_pieces)[~touched]
        raise UserError(f"{what}: {len(sizes)} piece(s) of tissue ({int(sizes.sum())} nodes) touch none of the "
                        f"surfaces it is fixed on; label their surfaces or leave such pieces out of the anatomy")
    Aff = A[free][:, free].tocsr()
    b = -(A[free][:, fixed] @ u[fixed])
    from petsc4py import PETSc
    M = PETSc.Mat().createAIJ(size=Aff.shape, csr=(Aff.indptr.astype(PETSc.IntType),
                                                   Aff.indices.astype(PETSc.IntType), Aff.data),
                              comm=PETSc.COMM_SELF)
    M.assemble()
    ksp = PETSc.KSP().create(comm=PETSc.COMM_SELF)
    ksp.setOperators(M)
    ksp.setType("cg")
    ksp.getPC().setType("icc")
    ksp.setTolerances(rtol=RTOL, atol=0.0, max_it=2000)
    x, rhs = M.createVecs()
    rhs.getArray()[:] = b
    ksp.solve(rhs, x)
    if ksp.getConvergedReason() <= 0:
        raise SimulationError(f"{what}: the Laplace solve did not converge ({ksp.getIterationNumber()} CG "
                              f"iterations, reason {ksp.getConvergedReason()})")
    u[free] = x.getArray()
    for o in (ksp, M, x, rhs):
        o.destroy()
    return u


# -- gradients and frames ---------------------------------------------------------------------------------------------
def gradient(field: np.ndarray, elements: np.ndarray, nodes: np.ndarray, h: float) -> np.ndarray:
    """∇field at the tissue nodes, (n, 3) in x, y, z: the mean over a node's tissue elements of the Q1 gradient at
    each element's centre (the mean of its four edge differences along each axis). Only tissue values enter, so
    a node on the staircase surface gets a gradient as good as inside (one-sided differences along the grid's
    axes were off by tens of degrees there)."""
    f = np.where(nodes, field, 0.0)
    shape = nodes.shape
    total = np.zeros(shape + (3,))
    count = np.zeros(shape)
    grad = np.zeros(elements.shape + (3,))
    corners = list(itertools.product((0, 1), repeat=3))               # (z, y, x) offsets
    for c in corners:
        v = f[tuple(slice(o, o + s - 1) for o, s in zip(c, shape))]
        for axis in range(3):                                         # array axis z, y, x -> component x, y, z
            grad[..., 2 - axis] += (1 if c[axis] else -1) * v
    grad *= elements[..., None] / (4 * h)
    for c in corners:
        sl = tuple(slice(o, o + s - 1) for o, s in zip(c, shape))
        total[sl] += grad
        count[sl] += elements
    return total[nodes] / np.maximum(count[nodes], 1)[:, None]


def _unit(v: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=1, keepdims=True)
    return np.where(n > 1e-12, v / np.maximum(n, 1e-300), fallback)


def _perpendicular(v: np.ndarray) -> np.ndarray:
    """A unit vector perpendicular to each (unit) row of v."""
    axis = np.eye(3)[np.argmin(np.abs(v), axis=1)]
    p = axis - np.sum(axis * v, axis=1, keepdims=True) * v
    return p / np.linalg.norm(p, axis=1, keepdims=True)


def oriented(longitudinal: np.ndarray, transmural: np.ndarray, helix: np.ndarray, sheet: np.ndarray):
    """(fibre, sheet, normal), each (n, 3), of the frame of a transmural and a longitudinal direction (Bayer's
    axis(): e2 the transmural, e1 the longitudinal made perpendicular to it, e0 = e1 × e2) turned by the helix
    angle about e2 and the sheet angle about the fibre (radians)."""
    e2 = _unit(transmural, np.array([0.0, 0.0, 1.0]))
    e1 = longitudinal - np.sum(longitudinal * e2, axis=1, keepdims=True) * e2
    e1 = _unit(e1, _perpendicular(e2))
    e0 = np.cross(e1, e2)
    ca, sa = np.cos(helix)[:, None], np.sin(helix)[:, None]
    f = ca * e0 + sa * e1
    t = -sa * e0 + ca * e1                     # in the wall, perpendicular to the fibre
    cb, sb = np.cos(sheet)[:, None], np.sin(sheet)[:, None]
    s = cb * e2 + sb * t
    return f, s, np.cross(f, s)


def _mix(a: np.ndarray, b: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Directions (f and −f alike) a and b mixed with weight w on b."""
    sign = np.where(np.sum(a * b, axis=1) < 0, -1.0, 1.0)[:, None]
    return (1 - w)[:, None] * a + w[:, None] * sign * b


# -- the whole computation --------------------------------------------------------------------------------------------
def long_axis(points: np.ndarray, surfaces: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(apex point, unit axis apex → base, its length) from the surfaces: the base plane fitted to the base
    nodes (its normal: their covariance's smallest eigenvector), the apex the epicardial node farthest from it."""
    base = points[(surfaces & SURFACES["base"]) > 0]
    epi = points[(surfaces & SURFACES["epi"]) > 0]
    centre = base.mean(axis=0)
    _, vecs = np.linalg.eigh(np.cov((base - centre).T))
    normal = vecs[:, 0]
    depth = (epi - centre) @ normal
    if np.median(depth) > 0:                   # the normal points out of the base, away from the heart
        normal, depth = -normal, -depth
    apex = epi[np.argmin(depth)]
    length = float((centre - apex) @ normal)
    return apex, normal, length


def compute(labels: np.ndarray, surfaces: np.ndarray, h: float, origin, helix=HELIX, sheet=SHEET,
            log=print) -> dict:
    """The coordinates and the fibres, sheets and normals on the grid (natural order, (nz, ny, nx[, 3]); NaN / 0
    outside the tissue). ``helix``, ``sheet``: (endo, epi) in degrees."""
    import time
    elements, nodes = tissue_nodes(labels)
    if not elements.any():
        raise UserError(f"spacing {h:g} cm: no grid element lies wholly in the tissue (its walls are too thin for "
                        f"that spacing), so there is nothing to make fibres on; choose a finer --spacing")
    surf = np.where(nodes, surfaces, 0)[nodes].astype(np.int64)
    present = {k for k, bit in SURFACES.items() if np.any(surf & bit)}
    need = {"base", "lv_endo", "epi"}
    if not need <= present:
        raise UserError(f"surfaces: the anatomy's tissue nodes have no {', '.join(sorted(need - present))} surface "
                        f"(found: {', '.join(sorted(present)) or 'none'}); rule-based fibres need base, lv_endo "
                        f"and epi (and rv_endo for both ventricles)")
    biv = "rv_endo" in present
    is_ = {k: (surf & bit) > 0 for k, bit in SURFACES.items()}
    start = time.perf_counter()
    A = laplacian(elements, nodes, h)
    zz, yy, xx = np.nonzero(nodes)
    points = np.asarray(origin, dtype=float) + h * np.stack([xx, yy, zz], axis=1)
    apex, axis, length = long_axis(points, surf)

    def solve(one, zero, what):
        fixed = np.zeros(len(surf), dtype=bool)
        for k in one + zero:
            fixed |= is_[k]
        values = np.zeros(len(surf))
        for k in one:
            values[is_[k]] = 1.0
        for k in zero:      # a node on both (a wall one or two nodes thick): the endocardium, 0, wins
            values[is_[k]] = 0.0
        return solve_laplace(A, fixed, values, what)

    u = solve(["epi", "rv_endo"] if biv else ["epi"], ["lv_endo"], "the LV wall's depth")
    # ψ: 0 at the apex node, 1 at the base (Bayer), for the longitudinal direction only
    apex_node = np.zeros(len(surf), dtype=bool)
    apex_node[np.argmin(np.sum((points - apex) ** 2, axis=1))] = True
    fixed = is_["base"] | apex_node
    psi = solve_laplace(A, fixed, np.where(is_["base"], 1.0, 0.0), "apex-to-base Laplace solution")
    grad_psi = gradient(_grid(psi, nodes), elements, nodes, h)
    # where ∇ψ vanishes (at the apex node), the long axis
    grad_psi = _unit(grad_psi, axis)
    rad = np.deg2rad
    gu = gradient(_grid(u, nodes), elements, nodes, h)
    f, s, _ = oriented(grad_psi, gu, rad(helix[0] + u * (helix[1] - helix[0])),
                       rad(sheet[0] + u * (sheet[1] - sheet[0])))
    out = {"transmural": u, "apex_base": np.clip((points - apex) @ axis / length, 0.0, 1.0)}
    if biv:
        v = solve(["epi", "lv_endo"], ["rv_endo"], "the RV wall's depth")
        gu2 = np.sum(gu ** 2, axis=1)
        gv = gradient(_grid(v, nodes), elements, nodes, h)
        gv2 = np.sum(gv ** 2, axis=1)
        w = np.where(gu2 + gv2 > 0, gv2 / np.maximum(gu2 + gv2, 1e-300), 0.5)
        f_rv, s_rv, _ = oriented(grad_psi, gv, rad(helix[0] + v * (helix[1] - helix[0])),
                                 rad(sheet[0] + v * (sheet[1] - sheet[0])))
        f = _unit(_mix(f, f_rv, w), f)
        s = _mix(s, s_rv, w)
        s = _unit(s - np.sum(s * f, axis=1, keepdims=True) * f, _perpendicular(f))
        out["lv_rv"] = solve(["rv_endo"], ["lv_endo"], "LV-RV coordinate")
        out["transmural"] = np.minimum(u, v)
    n = np.cross(f, s)
    log(f"rule-based fibres: {len(surf)} tissue nodes, {'both ventricles' if biv else 'one ventricle'}, "
        f"helix {helix[0]:g}° → {helix[1]:g}°, sheet {sheet[0]:g}° → {sheet[1]:g}°, "
        f"{time.perf_counter() - start:.1f} s")
    # the solves' values lie within RTOL of [0, 1]; the file's are in it
    fields = {k: _grid(np.clip(c, 0.0, 1.0), nodes, np.nan) for k, c in out.items()}
    for name, vec in (("fibres", f), ("sheets", s), ("normals", n)):
        fields[name] = _grid(vec, nodes, 0.0)
    return fields


def _grid(values: np.ndarray, nodes: np.ndarray, outside=0.0) -> np.ndarray:
    """Per-tissue-node values onto the whole grid."""
    full = np.full(nodes.shape + values.shape[1:], outside, dtype=float)
    full[nodes] = values
    return full


# -- the idealised ventricles ------------------------------------------------------------------------------------------
# Nodes on an ellipsoid's surface count as inside it whatever the round-off of their coordinates: without the
# margin, mirror images of a node on the endocardium fell on either side (the built-in LV was not symmetric).
ON_SURFACE = 1e-9


def _ellipsoid(p: np.ndarray, centre, semi) -> np.ndarray:
    """Where the points (…, 3) lie inside (or on, to ON_SURFACE) the axis-aligned ellipsoid."""
    return sum(((p[..., d] - centre[d]) / semi[d]) ** 2 for d in range(3)) <= 1.0 + ON_SURFACE


def _analytic(box: Box, tissue: np.ndarray, outside_code: np.ndarray, labels: np.ndarray) -> dict:
    """Labels and surfaces of an analytic anatomy: ``outside_code`` says, for every node that is not tissue, which
    surface it lies beyond (cardiosim.domain.fibres.SURFACES); a tissue node on the surface takes the code of its
    neighbours beyond it (:func:`surface_labels`)."""
    labels = np.where(tissue, labels, 0).astype(np.int32)
    _, nodes = tissue_nodes(labels)
    # a node inside the shape but in no tissue element (a corner of the staircase) lies beyond no surface
    return {"labels": labels, "surfaces": surface_labels(nodes, np.where(tissue, 0, outside_code))}


def surface_labels(nodes: np.ndarray, outside_code: np.ndarray) -> np.ndarray:
    """The ``surfaces`` image: each tissue node with non-tissue nodes among its 26 neighbours is on the surfaces
    they lie beyond (the bits of their codes, cardiosim.domain.fibres.SURFACES: the base's rim is on the base and on the
    wall's surface)."""
    from scipy import ndimage
    surf = np.zeros(nodes.shape, dtype=np.int8)
    cube = np.ones((3, 3, 3), dtype=bool)
    for code in SURFACES.values():
        beyond = ~nodes & (outside_code == code)
        if beyond.any():
            surf[nodes & ndimage.binary_dilation(beyond, structure=cube)] |= code
    return surf


def idealised_lv(h: float, margin: int = 1) -> tuple[Box, dict]:
    """The LV's labels (1) and surfaces; its coordinates and fibres come from cardiosim.domain.fibres."""
    box = Box((-LV_EPI[0], -LV_EPI[0], -LV_EPI[1]), (LV_EPI[0], LV_EPI[0], LV_BASE_Z), h, margin)
    p = box.points()
    below = p[..., 2] <= LV_BASE_Z + 1e-12
    endo = _ellipsoid(p, (0, 0, 0), (LV_ENDO[0], LV_ENDO[0], LV_ENDO[1]))
    epi = _ellipsoid(p, (0, 0, 0), (LV_EPI[0], LV_EPI[0], LV_EPI[1]))
    tissue = epi & ~endo & below
    code = np.select([~below, endo], [SURFACES["base"], SURFACES["lv_endo"]], SURFACES["epi"]).astype(np.int8)
    return box, _analytic(box, tissue, code, np.ones(tissue.shape, dtype=np.int32))


def idealised_biv(h: float, margin: int = 1) -> tuple[Box, dict]:
    """Both ventricles: the LV above, and the RV's cavity (inside BIV_RV_ENDO, outside the LV's epicardium) in a
    shell (BIV_RV_EPI) wrapped round the LV's +x side, cut at the same base. Labels: 1 inside the LV's
    epicardium (its free wall and the septum), 2 the RV's free wall."""
    (rc, r_endo), (_, r_epi) = BIV_RV_ENDO, BIV_RV_EPI
    lo = np.minimum((-LV_EPI[0], -LV_EPI[0], -LV_EPI[1]), np.subtract(rc, r_epi))
    hi = np.maximum((LV_EPI[0], LV_EPI[0], LV_BASE_Z), np.minimum(np.add(rc, r_epi), (np.inf, np.inf, LV_BASE_Z)))
    box = Box(lo, hi, h, margin)
    p = box.points()
    below = p[..., 2] <= LV_BASE_Z + 1e-12
    lv_endo = _ellipsoid(p, (0, 0, 0), (LV_ENDO[0], LV_ENDO[0], LV_ENDO[1]))
    lv_epi = _ellipsoid(p, (0, 0, 0), (LV_EPI[0], LV_EPI[0], LV_EPI[1]))
    rv_cavity = _ellipsoid(p, rc, r_endo) & ~lv_epi
    rv_epi = _ellipsoid(p, rc, r_epi)
    tissue = (lv_epi | rv_epi) & ~lv_endo & ~rv_cavity & below
    code = np.select([~below, lv_endo, rv_cavity], [SURFACES["base"], SURFACES["lv_endo"], SURFACES["rv_endo"]],
                     SURFACES["epi"]).astype(np.int8)
    return box, _analytic(box, tissue, code, np.where(lv_epi, 1, 2))




def built_in(name: str, h: float) -> tuple[Box, dict]:
    """What cardiosim.domain.anatomy.built_in(name, h) gave: the idealised LV or BiV with its rule-based fibres."""
    box, fields = (idealised_lv if name == "lv" else idealised_biv)(h)
    fields.update(compute(fields["labels"], fields["surfaces"], box.h, box.origin, log=lambda line: None))
    return box, fields

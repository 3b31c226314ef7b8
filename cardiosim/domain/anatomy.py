"""Anatomy onto the grid, once: ``cardiosim geometry lv|biv|MESH --spacing CM --out GEO.h5`` (and
``cardiosim geometry fibres GEO.h5 --out OUT.h5``: rule-based fibres for a file with labelled surfaces,
cardiosim/domain/fibres.py).

A run reads the result through ``tissue.label_file`` and ``tissue.fibre_file`` (both naming GEO.h5: its datasets
``labels`` and ``fibres``) with the ``[grid]`` the command prints; ``[[cell.regions]]`` (and stimuli, conductivity
regions) with ``shape = "coordinate"`` read its coordinates. GEO.h5 holds, in natural order [z, y, x]:

    labels      int32        0 outside, the mesh's element tag (>= 1; 1 where the mesh has none), 1 (lv), or 1 for
                             the LV and septum and 2 for the RV's free wall (biv)
    surfaces    int8         lv, biv, a mesh with tagged surface triangles: the surfaces a tissue node lies on, as
                             bits (cardiosim.domain.fibres.SURFACES: 1 base, 2 LV endocardium, 4 RV endocardium, 8
                             epicardium); 0 elsewhere
    fibres      (…, 3)       unit fibre directions at tissue nodes, 0 outside (where the source has fibres, or from
                             the rule: lv, biv, geometry fibres)
    sheets, normals (…, 3)   from the rule: the sheet direction and fibre × sheet
    transmural  float        from the rule: 0 at the endocardia to 1 at the epicardium, NaN outside
    apex_base   float        from the rule: 0 at the apex to 1 at the base, NaN outside
    lv_rv       float        from the rule, with both ventricles: 0 at the LV endocardium to 1 at the RV's

and the attributes ``spacing``, ``size`` (cm, x first), ``shape`` (nodes, x first), ``origin`` (cm: where grid node 0
sits in the source's coordinates: the config's ``grid.origin``, so that stimuli, probes and electrodes are given in
the source's own coordinates) and ``source``.

Sources:

* ``lv``: an idealised left ventricle, the truncated ellipsoidal shell of the cardiac mechanics benchmark (Land et
  al. 2015): endocardium semi-axes 0.7 cm (short) and 1.7 cm (long), epicardium 1.0 and 2.0 cm, the long axis
  along z with the apex at −z, cut at z = 0.5 cm (the base). Fibres from the rule (cardiosim.domain.fibres; by default
  helix +60° at the endocardium to −60° at the epicardium, linear in the transmural coordinate).
* ``biv``: both ventricles, cardiosim's own: the LV above, and an RV whose cavity is the inside of an ellipsoid
  (BIV_RV_ENDO) outside the LV's epicardium, in a shell 0.3 cm thick (BIV_RV_EPI) wrapped round the LV's +x side
  and cut at the same base (docs/decisions/0036-biventricular-anatomy-and-rule-based-fibres.md says why not a mesh of
  cardiac-geometries-core). Fibres from the
  rule.
* ``lv``, ``biv`` with ``--size human``: the same shapes at an adult's dimensions (:data:`HUMAN`: 9 cm from the base
  plane to the apex, the LV wall 1 cm, the RV wall 0.4 cm; the normal values of Lang et al. 2015, cited there).

The built-in anatomies are made a slab of z-planes at a time (SLAB_NODES grid nodes), their coordinates and fibres
on the tissue nodes only (cardiosim.domain.fibres.Tissue) and written a slab at a time (fibres.Scattered), so that
no float array of the whole box is made: memory grows with the box as about GRID_BYTES and with the tissue as
about fibres.TISSUE_BYTES per node.
* a tetrahedral mesh: VTU, VTK or Gmsh through meshio (element tags from cell data ``gmsh:physical``, ``tag``,
  ``region`` or ``elemTag``; fibres from cell or point data ``fibres``/``fibers``/``fiber``/``fibre``), or openCARP
  text files (``NAME.elem`` with ``NAME.pts`` beside it and ``NAME.lon`` where present; coordinates in µm).
  A grid node takes the tag of the element that contains it (barycentric coordinates); fibres are interpolated
  from the mesh nodes, element fibres being first averaged to the nodes (the principal direction of the mean of
  f fᵀ over the elements around a node: fibres are directions, f and −f alike): nodal fibres interpolate within
  about 1° where per-element fibres are several degrees off (in a trial: 0.9° against 7.7°).
  Labelled surfaces: a Gmsh file's physical surface groups named as cardiac-geometries-core names them (BASE, ENDO
  or ENDO_LV, ENDO_RV, EPI; Base, Endocardium, ... alike), or, in a file without names (VTU, VTK), triangle tags
  that are the surface bits themselves; each grid node just outside the tissue takes the surface of the nearest
  boundary triangle (none for an untagged one). Such a file gets its fibres from ``cardiosim geometry fibres``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cardiosim import __version__
from cardiosim.domain import fibres
from cardiosim.domain.fibres import ANGLE_OPTIONS, SURFACES, tissue_nodes
from cardiosim.runtime.errors import SimulationError, UserError, io_reason
from cardiosim.runtime.files import Target, check_input, check_writes
from cardiosim.runtime.resources import check_fits

# The idealised LV (cm): semi-axes (short, long) of the endocardium and epicardium, the base plane, helix angles (deg)
LV_ENDO = (0.7, 1.7)
LV_EPI = (1.0, 2.0)
LV_BASE_Z = 0.5
# The idealised BiV's right ventricle (cm): (centre, semi-axes x, y, z) of its endocardium and epicardium; its
# cavity is the inside of the endocardium outside the LV's epicardium (so the septum is the LV's wall), its free
# wall 0.3 cm thick, its apex 0.5 cm above the LV's.
BIV_RV_ENDO = ((0.4, 0.0, 0.0), (1.1, 1.3, 1.5))
BIV_RV_EPI = ((0.4, 0.0, 0.0), (1.4, 1.6, 1.8))

UNITS = {"um": 1e-4, "mm": 0.1, "cm": 1.0}
TAG_NAMES = ("gmsh:physical", "tag", "region", "elemTag", "medit:ref")
FIBRE_NAMES = ("fibres", "fibers", "fiber", "fibre")


# -- the grid around a bounding box ----------------------------------------------------------------------------------
# Cells per dimension are made a multiple of this (empty nodes added at the upper side), so that the grid coarsens
# three times and the elliptic solve gets its geometric multigrid (cardiosim.solvers.linear.mg_levels; a grid that
# does not halve falls back to GAMG, 2-4 times slower per solve:
# docs/decisions/0003-elliptic-cg-multigrid-pseudo-inverse.md).
CELL_MULTIPLE = 8
MAX_NODES = 2e8
# Peak bytes while a built-in anatomy is made: per grid node, its labels, surfaces and their masks (GRID_BYTES; the
# rule adds fibres.TISSUE_BYTES per tissue node, checked once the tissue is known); reading a geometry file for
# ``geometry fibres``, its datasets (FILE_BYTES: labels, surfaces and, where it has them, coordinates and fibres).
# A mesh 28 per grid node (labels, fibres) and about 190 per candidate node of a chunk of elements (the nodes in the
# elements' bounding boxes), measured with tracemalloc.
GRID_BYTES = 32
FILE_BYTES = 110
MESH_BYTES_PER_NODE = 28
MESH_BYTES_PER_CANDIDATE = 200


class Box:
    """The grid nodes around a bounding box (cm): at least ``margin`` empty nodes on every side, spacing h."""

    def __init__(self, lo, hi, h: float, margin: int):
        lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
        self.h = h
        self.origin = lo - margin * h
        cells = np.ceil((hi - self.origin) / h - 1e-9).astype(int) + margin
        self.n = -(-cells // CELL_MULTIPLE) * CELL_MULTIPLE + 1                        # nodes, x first
        self.size = (self.n - 1) * h
        if np.prod(self.n.astype(float)) > MAX_NODES:                      # before any array of the grid is made
            raise UserError(f"--spacing {h:g}: {np.prod(self.n.astype(float)):.3g} grid nodes (more than "
                            f"{MAX_NODES:.0e}); choose a coarser spacing (or check --units)")

    @classmethod
    def of(cls, attrs: dict) -> "Box":
        """The box a geometry file was written on (its attributes)."""
        box = cls.__new__(cls)
        box.h = float(attrs["spacing"])
        box.origin = np.asarray(attrs["origin"], dtype=float)
        box.n = np.asarray(attrs["shape"], dtype=np.int64)
        box.size = np.asarray(attrs["size"], dtype=float)
        return box

    @property
    def n_nodes(self) -> int:
        return int(np.prod(self.n.astype(np.int64)))

    def check_memory(self, need: float) -> None:
        """Refuse at once what could not be made: ``need`` bytes against what this process can still get (a
        MemoryError after minutes of work otherwise)."""
        check_fits(need, f"--spacing {self.h:g}: {self.n_nodes:.4g} grid nodes", "choose a coarser spacing")

    def axes(self) -> list[np.ndarray]:
        return [self.origin[d] + np.arange(self.n[d]) * self.h for d in range(3)]

    def points(self) -> np.ndarray:
        """Every node's coordinates (cm, source frame), (nz, ny, nx, 3)."""
        x, y, z = self.axes()
        zz, yy, xx = np.meshgrid(z, y, x, indexing="ij")
        return np.stack([xx, yy, zz], axis=-1)


# -- the built-in ventricles -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ventricles:
    """The built-in ventricles' dimensions (cm), the long axis along z with the apex at −z, cut at the base plane
    z = ``base_z``: the LV is the shell between two ellipsoids of revolution about z (``lv_endo``, ``lv_epi``:
    semi-axes (short, long)); the RV's cavity is the inside of an axis-aligned ellipsoid (``rv_centre``,
    ``rv_endo``: semi-axes x, y, z) outside the LV's epicardium, in a shell (``rv_epi``) wrapped round the LV's +x
    side (so that the septum is the LV's wall)."""

    lv_endo: tuple[float, float]
    lv_epi: tuple[float, float]
    base_z: float
    rv_centre: tuple[float, float, float]
    rv_endo: tuple[float, float, float]
    rv_epi: tuple[float, float, float]


#: The idealised ventricles (the constants above): the LV of Land et al. 2015's benchmark, 2.5 cm from base to apex.
IDEALISED = Ventricles(LV_ENDO, LV_EPI, LV_BASE_Z, BIV_RV_ENDO[0], BIV_RV_ENDO[1], BIV_RV_EPI[1])
#: Human-size ventricles (``--size human``): an adult's at end-diastole, the normal values of Lang et al. 2015
#: (Recommendations for cardiac chamber quantification by echocardiography in adults, J Am Soc Echocardiogr 28:
#: 1-39), the shapes those of the idealised ones. LV: the cavity 5.0 cm across at its widest (LV end-diastolic
#: diameter, men 4.2-5.8 cm) and 8.0 cm long, 111 mL (end-diastolic volume, men 62-150 mL); the wall 1.0 cm (the
#: septum and posterior wall, men 0.6-1.0 cm), so 9.0 cm from the base plane to the epicardial apex. RV: the
#: wall 0.4 cm (normal below 0.5 cm); in the four-chamber plane (y = 0) its cavity, from the septum to the free
#: wall, is 3.25 cm across in its basal third (basal diameter 2.5-4.1 cm, mean 3.3), 2.9 cm midway to its apex
#: (mid diameter 1.9-3.5 cm, mean 2.7) and 7.0 cm long from the base plane (longitudinal diameter 5.9-8.3 cm,
#: mean 7.1); its apex 1.6 cm above the LV's. tests/test_human_biv.py measures them on the generated grid.
HUMAN = Ventricles((2.5, 7.0), (3.5, 8.0), 1.0, (2.5, 0.0, 0.0), (4.25, 4.5, 6.0), (4.65, 4.9, 6.4))
SIZES = {"idealised": IDEALISED, "human": HUMAN}

# Nodes on an ellipsoid's surface count as inside it whatever the round-off of their coordinates: without the
# margin, mirror images of a node on the endocardium fell on either side (the built-in LV was not symmetric).
ON_SURFACE = 1e-9
# Grid nodes per slab of z-planes while a built-in anatomy is made: its float temporaries are a slab's, not the box's.
SLAB_NODES = 1 << 22


def _ellipsoid(p, centre, semi) -> np.ndarray:
    """Where the points lie inside (or on, to ON_SURFACE) the axis-aligned ellipsoid: ``p`` their x, y, z, arrays
    that broadcast (a slab's axes: the same sums, term by term, as over the points themselves)."""
    return sum(((p[d] - centre[d]) / semi[d]) ** 2 for d in range(3)) <= 1.0 + ON_SURFACE


def _slabs(box: Box):
    """(z-planes, their (x, y, z) as broadcasting axes) of the box, SLAB_NODES at a time."""
    x, y, z = box.axes()
    step = max(1, SLAB_NODES // int(box.n[0] * box.n[1]))
    for k in range(0, int(box.n[2]), step):
        sl = slice(k, min(k + step, int(box.n[2])))
        yield sl, (x[None, None, :], y[None, :, None], z[sl, None, None])


def _shape_slab(size: Ventricles, p, biv: bool) -> tuple[np.ndarray, np.ndarray]:
    """One slab's labels (int32: 1 the LV and septum, 2 the RV's free wall, 0 outside) and, at the nodes outside
    the tissue, the code of the surface they lie beyond (int8, cardiosim.domain.fibres.SURFACES; 0 in the tissue)."""
    below = p[2] <= size.base_z + 1e-12
    lv_endo = _ellipsoid(p, (0, 0, 0), (size.lv_endo[0], size.lv_endo[0], size.lv_endo[1]))
    lv_epi = _ellipsoid(p, (0, 0, 0), (size.lv_epi[0], size.lv_epi[0], size.lv_epi[1]))
    code = np.where(lv_endo, np.int8(SURFACES["lv_endo"]), np.int8(SURFACES["epi"]))
    if biv:
        rv_cavity = _ellipsoid(p, size.rv_centre, size.rv_endo) & ~lv_epi
        rv_epi = _ellipsoid(p, size.rv_centre, size.rv_epi)
        tissue = (lv_epi | rv_epi) & ~lv_endo & ~rv_cavity & below
        code = np.where(rv_cavity & ~lv_endo, np.int8(SURFACES["rv_endo"]), code)
        labels = np.where(tissue, np.where(lv_epi, 1, 2), 0).astype(np.int32)
    else:
        tissue = lv_epi & ~lv_endo & below
        labels = tissue.astype(np.int32)
    code = np.where(below, code, np.int8(SURFACES["base"]))
    return labels, np.where(tissue, np.int8(0), code)


def built_in_box(size: Ventricles, h: float, margin: int = 1, biv: bool = True) -> Box:
    """The grid round the built-in ventricles (their bounding box), before any array of it is made."""
    lv_lo, lv_hi = (-size.lv_epi[0], -size.lv_epi[0], -size.lv_epi[1]), (size.lv_epi[0], size.lv_epi[0], size.base_z)
    lo, hi = np.asarray(lv_lo, dtype=float), np.asarray(lv_hi, dtype=float)
    if biv:
        lo = np.minimum(lo, np.subtract(size.rv_centre, size.rv_epi))
        hi = np.maximum(hi, np.minimum(np.add(size.rv_centre, size.rv_epi), (np.inf, np.inf, size.base_z)))
    return Box(lo, hi, h, margin)


def _built_in_shape(size: Ventricles, h: float, margin: int, biv: bool) -> tuple[Box, dict]:
    """Labels and surfaces of the built-in ventricles, made a slab of z-planes at a time."""
    box = built_in_box(size, h, margin, biv)
    box.check_memory(GRID_BYTES * box.n_nodes)
    shape = tuple(int(v) for v in reversed(box.n))
    labels = np.empty(shape, dtype=np.int32)
    outside = np.empty(shape, dtype=np.int8)
    for sl, p in _slabs(box):
        labels[sl], outside[sl] = _shape_slab(size, p, biv)
    _, nodes = tissue_nodes(labels)
    # a node inside the shape but in no tissue element (a corner of the staircase) lies beyond no surface
    return box, {"labels": labels, "surfaces": surface_labels(nodes, outside)}


def _dilate(mask: np.ndarray) -> np.ndarray:
    """Binary dilation by the 3 × 3 × 3 cube (nothing beyond the box): one pass of three along each axis, the
    cube being their product."""
    out = mask.copy()
    for axis in range(3):
        lo = [slice(None)] * 3
        hi = [slice(None)] * 3
        lo[axis], hi[axis] = slice(None, -1), slice(1, None)
        prev = out.copy()
        out[tuple(hi)] |= prev[tuple(lo)]
        out[tuple(lo)] |= prev[tuple(hi)]
    return out


def surface_labels(nodes: np.ndarray, outside_code: np.ndarray) -> np.ndarray:
    """The ``surfaces`` image: each tissue node with non-tissue nodes among its 26 neighbours is on the surfaces
    they lie beyond (the bits of their codes, cardiosim.domain.fibres.SURFACES: the base's rim is on the base and on the
    wall's surface)."""
    surf = np.zeros(nodes.shape, dtype=np.int8)
    for code in SURFACES.values():
        beyond = ~nodes & (outside_code == code)
        if beyond.any():
            surf[nodes & _dilate(beyond)] |= code
    return surf


def idealised_lv(h: float, margin: int = 1, size: Ventricles = IDEALISED) -> tuple[Box, dict]:
    """The LV's labels (1) and surfaces; its coordinates and fibres come from cardiosim.domain.fibres."""
    return _built_in_shape(size, h, margin, biv=False)


def idealised_biv(h: float, margin: int = 1, size: Ventricles = IDEALISED) -> tuple[Box, dict]:
    """Both ventricles: the LV above, and the RV's cavity (inside its endocardium, outside the LV's epicardium) in
    a shell wrapped round the LV's +x side, cut at the same base (:class:`Ventricles`). Labels: 1 inside the LV's
    epicardium (its free wall and the septum), 2 the RV's free wall."""
    return _built_in_shape(size, h, margin, biv=True)


# -- tetrahedral meshes ------------------------------------------------------------------------------------------------
#: The labels' dtype (the ``labels`` dataset, module docstring): an element tag becomes a label, so it must fit.
LABEL_DTYPE = np.int32


def _tags(tags, source) -> np.ndarray:
    """The element tags as int64, refused (UserError naming the file, the tag and the allowed range) where one is not
    a whole number or does not fit in LABEL_DTYPE: a cast would wrap it silently (2^32 + 1 became label 1). Tags
    below 1 are Mesh's own check."""
    raw = np.asarray(tags).reshape(-1)
    hi = int(np.iinfo(LABEL_DTYPE).max)
    allowed = f"allowed: whole numbers from 1 to {hi} (the labels are {np.dtype(LABEL_DTYPE).name})"
    if raw.dtype.kind not in "iub":
        try:
            f = raw.astype(float)
        except (TypeError, ValueError):
            raise UserError(f"{source}: element tags must be numbers; {allowed}") from None
        bad = ~np.isfinite(f) | (f != np.round(f))
        if bad.any():
            i = int(np.argmax(bad))
            raise UserError(f"{source}: element {i} has the tag {raw[i].item()!r}, not a whole number; {allowed}")
        raw = f
    over = raw > hi
    if over.any():
        i = int(np.argmax(over))
        raise UserError(f"{source}: element {i} has the tag {int(raw[i])}, which does not fit in the labels; "
                        f"{allowed}")
    return raw.astype(np.int64)


class Mesh:
    """Points (cm), tetrahedra, a tag per element and fibres per element or per point (or none)."""

    def __init__(self, points, tets, tags=None, element_fibres=None, point_fibres=None, source=""):
        self.points = np.asarray(points, dtype=float)
        self.tets = np.asarray(tets, dtype=np.int64)
        self.tags = np.ones(len(self.tets), dtype=np.int64) if tags is None else _tags(tags, source)
        self.source = source
        if self.points.ndim != 2 or self.points.shape[1] != 3:
            raise UserError(f"{source}: points must have 3 coordinates (x y z); got "
                            f"{self.points.shape[1] if self.points.ndim == 2 else self.points.ndim} per point")
        bad = ~np.isfinite(self.points).all(axis=1)
        if bad.any():
            raise UserError(f"{source}: {int(bad.sum())} point(s) with a coordinate that is not a finite number "
                            f"(NaN or inf), the first number {int(np.argmax(bad))}")
        if self.tets.ndim != 2 or self.tets.shape[1] != 4:
            raise UserError(f"{source}: a tetrahedron has 4 points; the elements have "
                            f"{self.tets.shape[1] if self.tets.ndim == 2 else 0}")
        if len(self.tets) == 0:
            raise UserError(f"{source}: the mesh has no tetrahedra")
        if self.tets.min() < 0 or self.tets.max() >= len(self.points):
            raise UserError(f"{source}: an element names a point the mesh does not have")
        if self.tags.min() < 1:
            raise UserError(f"{source}: element tags must be >= 1 (they become labels; 0 is 'no tissue'); "
                            f"found {int(self.tags.min())}")
        self.surfaces = None     # (centroids, codes) of its labelled surface triangles (read_mesh)
        self.point_fibres = None
        if element_fibres is not None:
            self.point_fibres = _nodal_fibres(len(self.points), self.tets, _unit(element_fibres, source))
        elif point_fibres is not None:
            self.point_fibres = _unit(point_fibres, source)


def _unit(f, source: str) -> np.ndarray:
    f = np.asarray(f, dtype=float)[:, :3]
    n = np.linalg.norm(f, axis=1)
    if np.any(n < 1e-12) or not np.all(np.isfinite(n)):
        raise UserError(f"{source}: {int(np.sum(~(n >= 1e-12)))} fibre vector(s) of zero length (or not finite)")
    return f / n[:, None]


def _nodal_fibres(n_points: int, tets: np.ndarray, fe: np.ndarray) -> np.ndarray:
    """Element fibres averaged to the points: the principal eigenvector of Σ f fᵀ over the elements around each."""
    T = np.zeros((n_points, 3, 3))
    ff = fe[:, :, None] * fe[:, None, :]
    for k in range(4):
        np.add.at(T, tets[:, k], ff)
    _, vecs = np.linalg.eigh(T)
    return vecs[:, :, -1]


HEART_CM = 30.0   # cm: no heart (nor a torso around one) is larger; a mesh in mm read as cm is 10× too large


def check_extent(mesh: Mesh, units: str | None, default: str) -> None:
    """A mesh read in its format's default units that is larger than any heart: one line naming --units, before a
    grid of millions of empty nodes is made (a mesh in mm read as cm took 39 s and 7.6 M nodes). Small meshes are
    not refused: a tissue sample of a millimetre is a model too."""
    if units is not None or not len(mesh.points):
        return
    extent = float((mesh.points.max(axis=0) - mesh.points.min(axis=0)).max())
    if extent <= HEART_CM:
        return
    raw = extent / UNITS[default]                                       # the extent in the file's own numbers
    fits = [u for u in ("mm", "um") if raw * UNITS[u] <= HEART_CM]
    raise UserError(f"{mesh.source}: the mesh is {extent:.3g} cm across when read in {default} (this format's "
                    f"default), larger than any heart ({HEART_CM:g} cm): give its units with --units "
                    f"{fits[0] if fits else 'um'} (allowed: um, mm, cm)")


def read_mesh(path: Path, units: str | None) -> Mesh:
    """The mesh of ``path`` in cm (``units``: its coordinates' units; default um for openCARP files, cm otherwise);
    a size no heart has, read in the default units, is a mistake said in one line (check_extent)."""
    check_input(None, path)
    mesh = _read_mesh(path, units)
    check_extent(mesh, units, "um" if path.suffix == ".elem" else "cm")
    return mesh


def _read_mesh(path: Path, units: str | None) -> Mesh:
    if path.suffix == ".elem":
        return _read_opencarp(path, UNITS[units or "um"])
    try:
        import meshio
    except ImportError:                                                # pragma: no cover - a dependency
        raise UserError("cardiosim geometry: reading meshes needs meshio (pip install meshio)") from None
    try:
        m = meshio.read(path)
    except Exception as e:                                             # meshio raises many kinds
        raise UserError(f"{path}: meshio cannot read it: {str(e).splitlines()[0] if str(e) else type(e).__name__}") \
            from None
    blocks = [i for i, c in enumerate(m.cells) if c.type == "tetra"]
    if not blocks:
        raise UserError(f"{path}: the mesh has no tetrahedra (cell types: "
                        f"{', '.join(sorted({c.type for c in m.cells})) or 'none'})")
    tets = np.concatenate([m.cells[i].data for i in blocks])

    def cell_field(names):
        for name in names:
            if name in m.cell_data:
                return np.concatenate([np.asarray(m.cell_data[name][i]) for i in blocks])
        return None
    tags = cell_field(TAG_NAMES)
    fe = cell_field(FIBRE_NAMES)
    fp = next((m.point_data[n] for n in FIBRE_NAMES if n in m.point_data), None)
    scale = UNITS[units or "cm"]
    mesh = Mesh(m.points[:, :3] * scale, tets, None if tags is None else tags.reshape(-1), fe, fp, source=str(path))
    mesh.surfaces = _surface_triangles(m, tets, scale)
    return mesh


def surface_code(name: str) -> int | None:
    """The surface code (cardiosim.domain.fibres.SURFACES) of a gmsh physical group's name: cardiac-geometries-core's
    BASE, ENDO (an LV), ENDO_LV, ENDO_RV, EPI, and the like (Base, Endocardium, lv_endo, ...); None for others."""
    n = name.lower()
    if "base" in n:
        return SURFACES["base"]
    if "epi" in n:
        return SURFACES["epi"]
    if "endo" in n:
        return SURFACES["rv_endo"] if "rv" in n else SURFACES["lv_endo"]
    return None


def _surface_triangles(m, tets: np.ndarray, scale: float):
    """(centroids (cm), surface codes) of the mesh's boundary triangles, or None where none is tagged: the codes of
    gmsh physical groups named as :func:`surface_code` reads them, or, where the file names none (VTU, VTK),
    triangle tags that are the codes themselves (1 base, 2 LV endocardium, 4 RV endocardium, 8 epicardium); 0 for
    the boundary's untagged faces, so that a grid node beyond one is on no labelled surface."""
    blocks = [i for i, c in enumerate(m.cells) if c.type == "triangle"]
    name = next((n for n in TAG_NAMES if n in m.cell_data), None)
    if not blocks or name is None:
        return None
    tri = np.concatenate([m.cells[i].data for i in blocks])
    tags = np.concatenate([np.asarray(m.cell_data[name][i]).reshape(-1) for i in blocks]).astype(np.int64)
    named = {int(v[0]): n for n, v in getattr(m, "field_data", {}).items() if len(v) > 1 and int(v[1]) == 2}
    if named:
        codes = np.array([surface_code(named.get(int(t), "")) or 0 for t in tags])
    else:
        codes = np.where(np.isin(tags, list(SURFACES.values())), tags, 0)
    keep = codes > 0
    if not keep.any():
        return None
    tri, codes = np.sort(tri[keep], axis=1), codes[keep]
    faces = np.sort(np.concatenate([tets[:, [1, 2, 3]], tets[:, [0, 2, 3]], tets[:, [0, 1, 3]], tets[:, [0, 1, 2]]]),
                    axis=1)
    faces, count = np.unique(faces, axis=0, return_counts=True)
    boundary = faces[count == 1]                                     # faces of one tetrahedron only
    tagged = {tuple(t) for t in tri.tolist()}
    untagged = boundary[[tuple(f) not in tagged for f in boundary.tolist()]]
    tri = np.concatenate([tri, untagged])
    codes = np.concatenate([codes, np.zeros(len(untagged), dtype=np.int64)])
    return m.points[tri, :3].mean(axis=1) * scale, codes


def _read_opencarp(path: Path, scale: float) -> Mesh:
    """openCARP's text mesh: NAME.pts (count, then x y z per line, µm), NAME.elem (count, then 'Tt a b c d tag'),
    NAME.lon (1 or 2, then a fibre (and sheet) direction per element)."""
    pts_path, lon_path = path.with_suffix(".pts"), path.with_suffix(".lon")
    check_input(None, pts_path, "file (the openCARP points beside the .elem)")
    pts = _read_numbers(pts_path, "x y z per point, in µm")
    if pts.shape[1] != 3:
        raise UserError(f"{pts_path}: {pts.shape[1]} numbers on a point line; openCARP points have 3 (x y z)")
    try:
        lines = path.read_text().split("\n")[1:]
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot be read ({e})") from None
    rows = [ln.split() for ln in lines if ln.strip()]
    if not rows:
        raise UserError(f"{path}: holds no element (after the count line, one 'Tt a b c d tag' per element)")
    kinds = {r[0] for r in rows}
    if kinds - {"Tt"}:
        raise UserError(f"{path}: only tetrahedra (Tt) are read; found {', '.join(sorted(kinds - {'Tt'}))}")
    try:
        data = np.array([[int(v) for v in r[1:6]] for r in rows], dtype=np.int64)
    except ValueError as e:
        raise UserError(f"{path}: an element line is not 'Tt a b c d tag': {e}") from None
    fe = None
    if lon_path.is_file():
        lon = _read_numbers(lon_path, "a count line, then 3 or 6 numbers per element")
        if lon.shape[1] not in (3, 6):
            raise UserError(f"{lon_path}: {lon.shape[1]} numbers on a fibre line; openCARP fibres have 3 (or 6 "
                            f"with the sheet direction)")
        if len(lon) != len(data):
            raise UserError(f"{lon_path}: {len(lon)} fibre lines for {len(data)} elements")
        fe = lon[:, :3]
    tags = data[:, 4] if data.shape[1] > 4 else None
    return Mesh(pts[:, :3] * scale, data[:, :4], tags, fe, source=str(path))


def _read_numbers(path: Path, layout: str) -> np.ndarray:
    """An openCARP text file's table of numbers (its first line, a count, skipped), one line of error otherwise."""
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")          # "input contained no data": said below, as what it means
            table = np.loadtxt(path, skiprows=1, ndmin=2)
    except (OSError, ValueError, UnicodeDecodeError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"{path}: not an openCARP file ({layout}): {reason}") from None
    if table.size == 0:
        raise UserError(f"{path}: holds no data after its count line ({layout})")
    return table


def _check_voxelise_memory(box: Box, mesh: Mesh, chunk: int) -> None:
    """The memory voxelise needs, from the elements' bounding boxes (cheap: a few numbers per element)."""
    X = mesh.points[mesh.tets]
    lo = np.ceil((X.min(axis=1) - box.origin) / box.h - 1e-9)
    hi = np.floor((X.max(axis=1) - box.origin) / box.h + 1e-9)
    counts = np.maximum(hi - lo + 1, 0).prod(axis=1)
    per_chunk = max((counts[i:i + chunk].sum() for i in range(0, len(counts), chunk)), default=0.0)
    box.check_memory(MESH_BYTES_PER_NODE * box.n_nodes + MESH_BYTES_PER_CANDIDATE * per_chunk)


def voxelise(mesh: Mesh, h: float, margin: int = 1, chunk: int = 200_000) -> tuple[Box, dict]:
    """The mesh's tags and fibres at the grid nodes inside it."""
    box = Box(mesh.points.min(axis=0), mesh.points.max(axis=0), h, margin)
    n = box.n
    _check_voxelise_memory(box, mesh, chunk)
    labels = np.zeros(tuple(reversed(n)), dtype=np.int32)
    fibres = np.zeros(tuple(reversed(n)) + (3,)) if mesh.point_fibres is not None else None
    X = mesh.points[mesh.tets]                                        # (m, 4, 3)
    D = np.transpose(X[:, 1:] - X[:, :1], (0, 2, 1))                  # columns: edges from vertex 0
    ok = np.abs(np.linalg.det(D)) > 1e-30 * h ** 3
    inv = np.zeros_like(D)
    inv[ok] = np.linalg.inv(D[ok])
    lo = np.ceil((X.min(axis=1) - box.origin) / h - 1e-9).astype(np.int64)
    hi = np.floor((X.max(axis=1) - box.origin) / h + 1e-9).astype(np.int64)
    ext = np.maximum(hi - lo + 1, 0) * ok[:, None]
    counts = ext.prod(axis=1)
    eps = 1e-9
    for start in range(0, len(counts), chunk):
        sl = slice(start, start + chunk)
        c = counts[sl]
        tet = np.repeat(np.arange(start, start + len(c)), c)
        if len(tet) == 0:
            continue
        k = np.arange(len(tet)) - np.repeat(np.cumsum(c) - c, c)      # candidate number within its element
        e = ext[tet]
        idx = lo[tet] + np.stack([k % e[:, 0], (k // e[:, 0]) % e[:, 1], k // (e[:, 0] * e[:, 1])], axis=1)
        p = box.origin + idx * h
        lam = np.einsum("mij,mj->mi", inv[tet], p - X[tet, 0])
        bary = np.concatenate([1.0 - lam.sum(axis=1, keepdims=True), lam], axis=1)
        hit = np.all(bary >= -eps, axis=1)
        tet, idx, bary = tet[hit], idx[hit], bary[hit]
        labels[idx[:, 2], idx[:, 1], idx[:, 0]] = mesh.tags[tet]
        if fibres is not None:
            fv = mesh.point_fibres[mesh.tets[tet]]                    # (q, 4, 3)
            sign = np.where(np.einsum("qkj,qj->qk", fv, fv[:, 0]) < 0, -1.0, 1.0)
            f = np.einsum("qk,qkj->qj", bary * sign, fv)
            fibres[idx[:, 2], idx[:, 1], idx[:, 0]] = f / np.maximum(np.linalg.norm(f, axis=1, keepdims=True), 1e-300)
    if not labels.any():
        raise UserError(f"{mesh.source}: no grid node at spacing {h:g} cm lies inside the mesh (is --units right? "
                        f"the mesh spans {np.ptp(mesh.points, axis=0).round(6).tolist()} cm)")
    out = {"labels": labels}
    if fibres is not None:
        out["fibres"] = fibres
    if mesh.surfaces is not None:
        out["surfaces"] = _mesh_surfaces(box, labels, *mesh.surfaces)
    return box, out


def _mesh_surfaces(box: Box, labels: np.ndarray, centroids: np.ndarray, codes: np.ndarray) -> np.ndarray:
    """The surfaces image of a voxelised mesh: each node outside the tissue next to it takes the code of the
    nearest boundary triangle (its centroid; 0 for an untagged one), and the tissue nodes beside it that code
    (:func:`surface_labels`)."""
    from scipy import ndimage
    from scipy.spatial import cKDTree
    _, nodes = tissue_nodes(labels)
    near = ndimage.binary_dilation(nodes, structure=np.ones((3, 3, 3), dtype=bool)) & ~nodes
    z, y, x = np.nonzero(near)
    pts = box.origin + box.h * np.stack([x, y, z], axis=1)
    _, nearest = cKDTree(centroids).query(pts)
    outside = np.zeros(labels.shape, dtype=np.int8)
    outside[near] = codes[nearest]
    return surface_labels(nodes, outside)


# -- the command -------------------------------------------------------------------------------------------------------
FORMAT = "cardiosim-geometry-1"     # how --overwrite recognises a file of this command (cardiosim.runtime.files)


def write(path: Path, box: Box, fields: dict, source: str, fibre_rule=None) -> None:
    """GEO.h5, made in memory (HDF5 on a BytesIO: the arrays are in memory already, and compressed the file is
    smaller than they are), then written under a temporary name and renamed into place once whole: a failed write
    (a full disk, a file-size limit) is an ordinary OSError, leaves no file, and an earlier one (--overwrite) as it
    was. (HDF5 writing to the disk itself fails in the middle of its own caches, and then crashes at exit.)"""
    import io
    import h5py
    image = io.BytesIO()
    with h5py.File(image, "w") as f:
        f.attrs["format"] = FORMAT
        f.attrs["cardiosim_version"] = __version__
        f.attrs["source"] = source
        f.attrs["spacing"] = box.h
        f.attrs["size"] = box.size
        f.attrs["shape"] = box.n
        f.attrs["origin"] = box.origin
        f.attrs["units"] = "cm"
        if fibre_rule is not None:      # cardiosim.domain.fibres: (helix, sheet), each (endo, epi), degrees
            f.attrs["helix_angles_deg"], f.attrs["sheet_angles_deg"] = fibre_rule
        for name, arr in fields.items():
            if isinstance(arr, fibres.Scattered):
                ds = f.create_dataset(name, shape=arr.shape, dtype=arr.dtype, compression="gzip",
                                      compression_opts=1, shuffle=True)
                _write_slabs(ds, arr)
            else:
                ds = f.create_dataset(name, data=arr, compression="gzip", compression_opts=1, shuffle=True)
            ds.attrs["units"] = "1"
    tmp = path.with_name(f".{path.name}.part")
    try:
        with open(tmp, "wb") as out:
            out.write(image.getbuffer())
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise SimulationError(f"--out {path}: cannot write ({io_reason(e)}); nothing written") from None


def _write_slabs(ds, field) -> None:
    """A :class:`cardiosim.domain.fibres.Scattered` field into its dataset, whole chunks of z-planes at a time
    (about SLAB_NODES nodes): the chunks, so the compressed bytes, are those of the whole array written at once."""
    planes = ds.chunks[0] * max(1, SLAB_NODES // (ds.chunks[0] * int(np.prod(ds.shape[1:]))))
    for k in range(0, ds.shape[0], planes):
        k1 = min(k + planes, ds.shape[0])
        ds[k:k1] = field.slab(k, k1)


def config_lines(path: Path, box: Box) -> str:
    size = ", ".join(f"{s:.10g}" for s in box.size)
    origin = ", ".join(f"{s:.10g}" for s in box.origin)
    path = path.resolve()      # a relative path in a config is taken relative to the config's folder
    return (f"[grid]\nsize = [{size}]\nspacing = {box.h:.10g}\norigin = [{origin}]\n[tissue]\n"
            f"label_file = \"{path}\"\nfibre_file = \"{path}\"\n")


def mesh_files(source: Path) -> dict:
    """{how the user calls it: path} of the files a mesh source is read from (an openCARP mesh is three)."""
    if source.suffix == ".elem":
        return {"the mesh": source, "the mesh's points (.pts)": source.with_suffix(".pts"),
                "the mesh's fibres (.lon)": source.with_suffix(".lon")}
    return {"the mesh": source}


def check_out(out: Path) -> None:
    if out.suffix not in (".h5", ".hdf5"):
        raise UserError(f"--out {out}: must end in .h5 (an HDF5 file)")


def make_folder(out: Path) -> None:
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise SimulationError(f"--out {out}: cannot make its folder ({io_reason(e)}); nothing written") from None


BUILT_IN = {"lv": ("idealised LV", idealised_lv), "biv": ("idealised BiV", idealised_biv)}


def built_in(name: str, h: float, margin: int = 1, rule=None, log=print, size: str = "idealised",
             dense: bool = True) -> tuple[Box, dict]:
    """The built-in anatomy ``name`` (lv, biv) of ``size`` (SIZES) at spacing h (cm): labels, surfaces, and the
    coordinates, fibres, sheets and normals of cardiosim.domain.fibres (``rule``: (helix, sheet) angles, each
    (endo, epi) degrees; ``dense=False``: those as cardiosim.domain.fibres.Scattered, for :func:`write`)."""
    rule = rule or (fibres.HELIX, fibres.SHEET)
    box, fields = BUILT_IN[name][1](h, margin, SIZES[size])
    fields.update(fibres.compute(fields["labels"], fields["surfaces"], box.h, box.origin, *rule, log=log,
                                 dense=dense))
    return box, fields


def main_fibres(args: argparse.Namespace) -> int:
    """``cardiosim geometry fibres GEO.h5 --out OUT.h5``: GEO.h5's datasets with the coordinates, fibres, sheets
    and normals (re)made from its labels and surfaces."""
    import h5py
    if not args.file:
        raise UserError("cardiosim geometry fibres: give the geometry file (cardiosim geometry fibres GEO.h5 "
                        "--out OUT.h5)")
    for name in ("spacing", "units", "size"):
        if getattr(args, name, None) is not None:
            raise UserError(f"--{name}: not used by cardiosim geometry fibres (the grid is the geometry file's)")
    src, out = Path(args.file), Path(args.out)
    helix, sheet = fibres.angles(args)
    check_input(None, src)
    check_out(out)
    fibres.check_file_limit(out)
    try:
        with h5py.File(src, "r") as f:
            shape = f["labels"].shape if isinstance(f.get("labels"), h5py.Dataset) else ()
    except OSError as e:
        raise UserError(f"{src}: cannot be read as HDF5 ({e})") from None
    if shape:                        # before the arrays are read: what the rule needs, against what is free
        check_fits((FILE_BYTES + GRID_BYTES) * float(np.prod(shape)), f"{src}: {np.prod(shape):.4g} grid nodes",
                   "make it on a host with more memory")
    check_writes([Target("--out", out, "geometry")], {"the geometry file": src}, args.overwrite)
    try:
        with h5py.File(src, "r") as f:
            missing = [k for k in ("labels", "surfaces") if not isinstance(f.get(k), h5py.Dataset)]
            if missing:
                raise UserError(f"{src}: has no {' or '.join(missing)} dataset (it holds: {', '.join(f) or 'nothing'})"
                                f"; cardiosim geometry lv|biv|MESH writes them (a mesh: from its tagged surfaces)")
            data = {k: f[k][()] for k in f if isinstance(f[k], h5py.Dataset)}
            attrs = dict(f.attrs)
    except OSError as e:
        raise UserError(f"{src}: cannot be read as HDF5 ({e})") from None
    for k in ("spacing", "origin"):
        if k not in attrs:
            raise UserError(f"{src}: has no '{k}' attribute; is it a file of cardiosim geometry?")
    labels, surfaces = data["labels"], data["surfaces"]
    if labels.ndim != 3 or surfaces.shape != labels.shape:
        raise UserError(f"{src}: labels {labels.shape} and surfaces {surfaces.shape} must be one 3D grid")
    fields = fibres.compute(labels, surfaces, float(attrs["spacing"]), attrs["origin"], helix, sheet, dense=False)
    data.update(fields)
    box = Box.of(attrs)
    make_folder(out)
    write(out, box, data, str(attrs.get("source", src)), fibre_rule=(helix, sheet))
    print(f"wrote {out}: {', '.join(sorted(fields))}")
    return 0


def main(args: argparse.Namespace) -> int:
    if args.source == "fibres":
        return main_fibres(args)
    if args.file:
        raise UserError(f"cardiosim geometry {args.source}: takes one source; '{args.file}' is one too many "
                        f"(only 'cardiosim geometry fibres GEO.h5' names a second file)")
    if args.spacing is None:
        raise UserError(f"cardiosim geometry {args.source}: --spacing is needed (the grid spacing, cm)")
    out = Path(args.out)
    check_out(out)
    if not (args.spacing > 0 and math.isfinite(args.spacing)):
        raise UserError(f"--spacing: must be a positive length in cm; got {args.spacing}")
    if args.margin < 0:
        raise UserError(f"--margin: must be 0 or more grid nodes; got {args.margin}")
    is_built_in = args.source in BUILT_IN
    if is_built_in:
        rule = fibres.angles(args)
        fibres.check_file_limit(out)
    check_writes([Target("--out", out, "geometry")], {} if is_built_in else mesh_files(Path(args.source)),
                 args.overwrite)
    size = getattr(args, "size", None) or "idealised"
    if is_built_in:
        source = BUILT_IN[args.source][0]
        if size != "idealised":
            source = source.replace("idealised", f"{size}-size")
        box, fields = built_in(args.source, args.spacing, args.margin, rule, size=size, dense=False)
    else:
        rule = None
        if getattr(args, "size", None) is not None:
            raise UserError("--size: for lv and biv (the built-in ventricles); a mesh has its own size")
        given = [n for n in ANGLE_OPTIONS if getattr(args, n, None) is not None]
        if given:
            raise UserError(f"--{given[0].replace('_', '-')}: for lv, biv and geometry fibres; a mesh keeps its own "
                            f"fibres (cardiosim geometry fibres OUT.h5 makes rule-based ones from its surfaces)")
        mesh = read_mesh(Path(args.source), args.units)
        box, fields = voxelise(mesh, args.spacing, args.margin)
        source = str(args.source)
    make_folder(out)
    write(out, box, fields, source, fibre_rule=rule)
    tissue = int(np.count_nonzero(fields["labels"]))
    hint = ""
    if "fibres" not in fields:
        hint = (" (the mesh has no fibres: no fibre_file; its labelled surfaces give rule-based ones: cardiosim "
                "geometry fibres)" if "surfaces" in fields else " (the source has no fibres: no fibre_file)")
    print(f"wrote {out}: {' x '.join(map(str, box.n))} nodes at {args.spacing:g} cm, {tissue} in tissue{hint}"
          + "; for a run's config (in the source's coordinates, cm):")
    lines = config_lines(out, box)
    print(lines if "fibres" in fields else lines.replace(f'fibre_file = "{out.resolve()}"\n', ""), end="")
    return 0

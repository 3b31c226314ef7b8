"""Purkinje networks grown on endocardial surfaces: a fractal tree in the manner of Ijiri et al. 2008 and Sahli
Costabal et al. 2016 (J Biomech 49:2455), on a point cloud rather than a triangulation.

The conduction system (:func:`conduction_system`): the His bundle, a straight segment of ``his_length`` from the root
towards the apex, inside the septum; the left and right bundle branches, each a bridge from the His bundle's end to
the nearest point of its ventricle's endocardium, then ``bundle_length`` down the septal surface towards the apex;
fascicles from each bundle's end (``lv_fascicles``, ``rv_fascicles``: their angles from the bundle's direction, e.g.
the left anterior and posterior fascicles), ``fascicle_length`` each; and from each fascicle's end a fractal tree.
``block`` (``"lbb"``, ``"rbb"``) cuts a bundle branch where it leaves the His bundle (a bundle-branch block; that
ventricle is activated through the myocardium from the other side). Its part is grown all the same, so that the
rest of the network is node for node the unblocked network's; with ``block_distal = "drop"`` it and all it feeds
are then left out, with ``"retrograde"`` they are kept, detached at the cut (no junction there), and activated
backwards from the myocardium through their PMJs.

A branch grows in steps of ``segment`` (cm) along the surface: each step goes along the current direction, is
projected onto the surface's tangent plane at the nearest point of the cloud (normals by local principal components)
and the direction follows the surface. A branch stops where it leaves the surface (no point of the cloud within the
cloud's own spacing: past the base, an edge of the surface) or where its next point comes within ``spacing`` of a
node of another branch (not its parent, nor a sibling, nor near its own start), so that terminals end up about
``spacing`` apart; ``repulsion`` turns a direction away from the nearest node of another branch within 2·spacing. A
branch that grows its whole length (``branch_length`` ± ``length_jitter``) splits into two, at ±``branch_angle``
(± ``angle_jitter``) about the surface normal, up to ``generations`` splits. Terminals (PMJ candidates) are the leaves.
The random numbers come from ``numpy.random.default_rng(seed)`` in a fixed order: one seed, one network.

:func:`biv_surfaces` gives the clouds of cardiosim's built-in BiV (cardiosim.domain.anatomy.idealised_biv: the tissue
nodes on the LV and RV endocardium, away from the base) and a root at the top of the septum between them;
:func:`geometry_surfaces` those of a geometry file (``cardiosim geometry``), in the coordinates of a run on it.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from dataclasses import dataclass

import numpy as np

from cardiosim.domain import anatomy
from cardiosim.domain.fibres import SURFACES
from cardiosim.purkinje.network import Network, NetworkError

# The "part" of each node (Network.data["part"])
PARTS = {"his": 1, "lbb": 2, "rbb": 3, "lv_fascicle": 4, "rv_fascicle": 5, "lv_tree": 6, "rv_tree": 7}
BLOCKS = ("lbb", "rbb")      # the bundle branches GrowParameters.block can cut
BLOCK_DISTAL = ("drop", "retrograde")   # what becomes of a cut branch's distal network


@dataclass(frozen=True)
class GrowParameters:
    """Lengths in cm, angles in degrees."""
    segment: float = 0.02              # step of growth: the spacing of nodes along a branch
    his_length: float = 0.3
    bundle_length: float = 0.8         # each bundle branch down the septum
    fascicle_length: float = 0.6
    lv_fascicles: tuple = (-55.0, 55.0)   # angles from the left bundle's direction (anterior, posterior)
    rv_fascicles: tuple = (-40.0, 40.0)
    branch_length: float = 0.3
    branch_angle: float = 30.0         # each child from its parent's direction
    length_jitter: float = 0.2         # fraction of branch_length, uniform
    angle_jitter: float = 10.0         # degrees, uniform
    generations: int = 12
    spacing: float = 0.1               # no branch comes closer than this to another: the terminals' spacing
    repulsion: float = 0.2
    apex_direction: tuple = (0.0, 0.0, -1.0)
    seed: int = 0
    block: tuple = ()                  # bundle branches cut where they leave the His bundle: "lbb", "rbb"
    block_distal: str = "drop"         # the cut branch and all it feeds: left out, or kept ("retrograde")

    def check(self) -> None:
        for name in ("segment", "his_length", "bundle_length", "fascicle_length", "branch_length", "spacing"):
            if not getattr(self, name) > 0:
                raise NetworkError(f"purkinje growth: {name} must be > 0 cm (got {getattr(self, name)})")
        if self.spacing < self.segment:
            raise NetworkError(f"purkinje growth: spacing ({self.spacing} cm) must be at least segment "
                               f"({self.segment} cm)")
        if not 0 <= self.length_jitter < 1:
            raise NetworkError("purkinje growth: length_jitter must be in [0, 1)")
        if self.generations < 0:
            raise NetworkError("purkinje growth: generations must be >= 0")
        if not np.linalg.norm(self.apex_direction) > 0:
            raise NetworkError("purkinje growth: apex_direction must not be zero")
        unknown = [b for b in self.block if b not in BLOCKS]
        if unknown:
            raise NetworkError(f"purkinje growth: block {', '.join(map(str, unknown))} is no bundle branch; "
                               f"allowed: {', '.join(BLOCKS)}")
        if self.block_distal not in BLOCK_DISTAL:
            raise NetworkError(f"purkinje growth: block_distal '{self.block_distal}' is not one of "
                               f"{', '.join(BLOCK_DISTAL)}")
        if set(self.block) >= set(BLOCKS):
            raise NetworkError("purkinje growth: block both bundle branches and the His bundle reaches no "
                               "ventricle; block one of lbb, rbb")


class Surface:
    """A point cloud (n, 3) cm standing for a surface: its nearest-neighbour spacing, a unit normal and the centroid
    of the ``k`` nearest points at each point."""

    def __init__(self, points, k: int = 16):
        from scipy.spatial import cKDTree
        self.points = np.asarray(points, dtype=float).reshape(-1, 3)
        if len(self.points) < k:
            raise NetworkError(f"purkinje growth: a surface of {len(self.points)} points (fewer than {k})")
        self.tree = cKDTree(self.points)
        dist, idx = self.tree.query(self.points, k)
        self.h = float(np.median(dist[:, 1]))
        nb = self.points[idx]
        self.centroid = nb.mean(axis=1)
        x = nb - self.centroid[:, None, :]
        _, vecs = np.linalg.eigh(np.einsum("nki,nkj->nij", x, x))
        self.normal = vecs[:, :, 0]

    def project(self, q) -> tuple[np.ndarray, np.ndarray, float]:
        """q on the tangent plane at its nearest point; that plane's normal; the distance from there to that
        point (cm)."""
        _, j = self.tree.query(q)
        n = self.normal[j]
        p = q - np.dot(q - self.centroid[j], n) * n
        return p, n, float(np.linalg.norm(p - self.points[j]))

    def nearest(self, q) -> np.ndarray:
        return self.points[self.tree.query(q)[1]]


def _unit(v):
    n = np.linalg.norm(v)
    return v / n if n > 0 else v


def _tangent(d, n):
    return _unit(d - np.dot(d, n) * n)


def _rotate(d, n, degrees):
    a = math.radians(degrees)
    return _unit(d * math.cos(a) + np.cross(n, d) * math.sin(a) + n * np.dot(n, d) * (1 - math.cos(a)))


class _Tree:
    """The nodes so far (arrays grown by doubling), with a hash grid (cells of ``cell`` cm) for the collision test."""

    def __init__(self, cell: float):
        self.cell = cell
        self.n = 0
        self.points = np.zeros((1024, 3))
        self.branch = np.zeros(1024, dtype=np.int64)
        self.part = np.zeros(1024, dtype=np.int64)
        self.edges: list = []
        self.grid: dict = {}

    def add(self, p, parent, branch, part) -> int:
        i = self.n
        if i == len(self.points):
            self.points = np.concatenate([self.points, np.zeros_like(self.points)])
            self.branch = np.concatenate([self.branch, np.zeros_like(self.branch)])
            self.part = np.concatenate([self.part, np.zeros_like(self.part)])
        self.points[i], self.branch[i], self.part[i] = p, branch, part
        self.n += 1
        if parent is not None:
            self.edges.append((parent, i))
        self.grid.setdefault(self._key(p), []).append(i)
        return i

    def _key(self, p):
        return tuple(int(math.floor(x / self.cell)) for x in p)

    def near(self, q, radius) -> np.ndarray:
        """Indices of the nodes within ``radius`` (≤ cell) of q."""
        cx, cy, cz = self._key(q)
        found = [self.grid.get((cx + dx, cy + dy, cz + dz)) for dx in (-1, 0, 1) for dy in (-1, 0, 1)
                 for dz in (-1, 0, 1)]
        idx = np.fromiter((i for f in found if f for i in f), dtype=np.int64)
        if not len(idx):
            return idx
        return idx[np.linalg.norm(self.points[idx] - q, axis=1) < radius]


class _Grower:
    def __init__(self, params: GrowParameters):
        params.check()
        self.p = params
        self.rng = np.random.default_rng(params.seed)
        self.tree = _Tree(cell=2 * params.spacing)
        self.n_branches = 0
        self.stops = Counter()           # why branches stopped short
        self.start_of = np.full(1024, -1, dtype=np.int64)     # branch -> the node it starts from

    def new_branch(self) -> int:
        self.n_branches += 1
        if self.n_branches == len(self.start_of):
            self.start_of = np.concatenate([self.start_of, np.full(len(self.start_of), -1, dtype=np.int64)])
        return self.n_branches

    def straight(self, start: int, end_point, part: int) -> int:
        """A straight chain of nodes from node ``start`` to ``end_point`` (inside the wall: not on a surface)."""
        t = self.tree
        a = t.points[start].copy()
        k = max(1, math.ceil(np.linalg.norm(end_point - a) / self.p.segment - 1e-9))
        b = self.new_branch()
        prev = start
        for s in range(1, k + 1):
            prev = t.add(a + (end_point - a) * s / k, prev, b, part)
        return prev

    def branch(self, surface: Surface, start: int, direction, length: float, part: int):
        """One branch along the surface from node ``start``: (its last node, its direction there, whether it grew its
        whole length)."""
        p, t = self.p, self.tree
        b = self.new_branch()
        self.start_of[b] = start
        origin = t.points[start].copy()
        parent = t.branch[start]

        def others(idx):  # nodes of other branches: not this one, its parent, a sibling (the same start), near start
            bi = t.branch[idx]
            keep = ((bi != b) & (bi != parent) & (self.start_of[bi] != start)
                    & (np.linalg.norm(t.points[idx] - origin, axis=1) >= p.spacing))
            return idx[keep]
        q0 = origin
        _, n, _ = surface.project(q0)
        d = _tangent(np.asarray(direction, dtype=float), n)
        prev = start
        steps = max(1, round(length / p.segment))
        for _ in range(steps):
            q, n, off = surface.project(q0 + p.segment * d)
            if off > surface.h:                               # left the surface
                self.stops["left the surface"] += 1
                return prev, d, False
            if len(others(t.near(q, p.spacing))):             # another branch within spacing
                self.stops["another branch"] += 1
                return prev, d, False
            step = q - q0
            if not 0.25 * p.segment < np.linalg.norm(step) < 2 * p.segment:   # stuck, or a jump across a fold
                self.stops["stuck"] += 1
                return prev, d, False
            d = _tangent(step, n)
            if p.repulsion:
                idx = others(t.near(q, 2 * p.spacing))
                if len(idx):
                    j = idx[np.argmin(np.linalg.norm(t.points[idx] - q, axis=1))]
                    d = _tangent(d + p.repulsion * _unit(q - t.points[j]), n)
            prev = t.add(q, prev, b, part)
            q0 = q
        self.stops["grown"] += 1
        return prev, d, True

    def fractal(self, surface: Surface, start: int, direction, part: int) -> None:
        """A fractal tree from node ``start``: two children at ±branch_angle, breadth first."""
        p = self.p
        queue = deque()
        _, n, _ = surface.project(self.tree.points[start])
        d0 = _tangent(np.asarray(direction, float), n)
        for sign in (-1.0, 1.0):
            queue.append((start, _rotate(d0, n, sign * self._angle()), self._length(), 1))
        while queue:
            node, d, length, gen = queue.popleft()
            end, d_end, whole = self.branch(surface, node, d, length, part)
            if not whole or gen >= p.generations or end == node:
                continue
            _, n, _ = surface.project(self.tree.points[end])
            for sign in (-1.0, 1.0):
                queue.append((end, _rotate(d_end, n, sign * self._angle()), self._length(), gen + 1))

    def _angle(self) -> float:
        return self.p.branch_angle + self.p.angle_jitter * self.rng.uniform(-1.0, 1.0)

    def _length(self) -> float:
        return self.p.branch_length * (1.0 + self.p.length_jitter * self.rng.uniform(-1.0, 1.0))

    def network(self, root: int, name: str, cut=(), keep_distal: bool = False) -> Network:
        """The nodes grown, without those beyond the edges ``cut`` ((parent, child) pairs): a cut branch and
        everything grown from it; with ``keep_distal`` they stay, without the cut edges (the cut's child no
        junction)."""
        t = self.tree
        edges = np.array(t.edges, dtype=np.int64).reshape(-1, 2)
        points, part = t.points[:t.n].copy(), t.part[:t.n].copy()
        if cut and keep_distal:
            edges = edges[~np.isin(edges[:, 1], [c for _, c in cut])]
            net = Network(points, edges, root, name=name, data={"part": part}, detached=True)
            net.pmj[[c for _, c in cut]] = False
            return net
        if cut:
            from scipy.sparse import coo_matrix, csgraph
            keep_edge = ~np.isin(edges[:, 1], [c for _, c in cut])
            e = edges[keep_edge]
            g = coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(t.n, t.n))
            _, label = csgraph.connected_components(g, directed=False)
            keep = label == label[root]
            new = np.cumsum(keep) - 1
            edges = new[e[keep[e[:, 0]] & keep[e[:, 1]]]]
            points, part, root = points[keep], part[keep], int(new[root])
        return Network(points, edges, root, name=name, data={"part": part})


def fractal_tree(points, start, direction, params: GrowParameters | None = None) -> Network:
    """A fractal tree alone on one surface (a point cloud, cm) from the point nearest ``start`` (the root),
    first along ``direction``."""
    params = params or GrowParameters()
    g = _Grower(params)
    surface = Surface(points)
    root = g.tree.add(surface.project(surface.nearest(np.asarray(start, float)))[0], None, g.new_branch(),
                      PARTS["lv_tree"])
    g.fractal(surface, root, direction, PARTS["lv_tree"])
    return g.network(root, "fractal tree").check()


def conduction_system(lv_points, rv_points, root, params: GrowParameters | None = None) -> Network:
    """The His bundle from ``root`` (cm, in the septum), the bundle branches, fascicles and fractal trees on the LV
    and RV endocardial point clouds (the module's docstring)."""
    params = params or GrowParameters()
    g = _Grower(params)
    apex = _unit(np.asarray(params.apex_direction, dtype=float))
    surfaces = {"lv": Surface(lv_points), "rv": Surface(rv_points)}
    r = g.tree.add(np.asarray(root, dtype=float), None, g.new_branch(), PARTS["his"])
    his_end = g.straight(r, np.asarray(root, float) + params.his_length * apex, PARTS["his"])
    cut = []
    for side, bundle, fasc, tree, angles in (("lv", "lbb", "lv_fascicle", "lv_tree", params.lv_fascicles),
                                             ("rv", "rbb", "rv_fascicle", "rv_tree", params.rv_fascicles)):
        s = surfaces[side]
        landing = s.project(s.nearest(g.tree.points[his_end]))[0]
        if bundle in params.block:       # grown all the same, so that the other side is the unblocked one's
            cut.append((his_end, g.tree.n))
        start = g.straight(his_end, landing, PARTS[bundle])
        end, d, _ = g.branch(s, start, apex, params.bundle_length, PARTS[bundle])
        _, n, _ = s.project(g.tree.points[end])
        for angle in angles:
            f_end, f_d, _ = g.branch(s, end, _rotate(d, n, angle), params.fascicle_length, PARTS[fasc])
            if f_end != end:
                g.fractal(s, f_end, f_d, PARTS[tree])
    return g.network(r, "conduction system", cut, params.block_distal == "retrograde").check()


def endocardia(points, surfaces, apex_direction=(0.0, 0.0, -1.0), base_margin: float = 0.1):
    """(LV endocardium, RV endocardium) point clouds of a geometry's labelled surfaces
    (cardiosim.domain.fibres.SURFACES; ``points`` (…, 3) cm and ``surfaces`` (…) alike): the nodes on each
    endocardium, not on the base and more than ``base_margin`` (cm) below it (along ``apex_direction``; the base's
    highest node)."""
    pts = np.asarray(points, dtype=float).reshape(-1, 3)
    surf = np.asarray(surfaces).reshape(-1)
    apex = _unit(np.asarray(apex_direction, dtype=float))
    base = (surf & SURFACES["base"]) > 0
    if not base.any():
        raise NetworkError("purkinje growth: the geometry has no base surface")
    height = -(pts @ apex)
    below = height < height[base].max() - base_margin
    lv = pts[((surf & SURFACES["lv_endo"]) > 0) & ~base & below]
    rv = pts[((surf & SURFACES["rv_endo"]) > 0) & ~base & below]
    if len(lv) < 16:
        raise NetworkError("purkinje growth: the geometry has no LV endocardium to grow on")
    return lv, rv


def septal_root(lv, rv, apex_direction=(0.0, 0.0, -1.0), depth: float = 0.1, h: float | None = None):
    """The His bundle's origin: half-way across the septum, ``depth`` (cm) below the top of the endocardial clouds:
    the LV endocardium's point of that band nearest the RV cavity's centre there, and the RV endocardium's point
    nearest it."""
    lv, rv = np.asarray(lv, float), np.asarray(rv, float)
    apex = _unit(np.asarray(apex_direction, dtype=float))
    h = h or Surface(lv).h
    height_lv, height_rv = -(lv @ apex), -(rv @ apex)
    level = max(height_lv.max(), height_rv.max()) - depth
    band_lv = lv[np.abs(height_lv - level) < 1.5 * h]
    band_rv = rv[np.abs(height_rv - level) < 1.5 * h]
    if not len(band_lv) or not len(band_rv):
        raise NetworkError("purkinje growth: no septum found (give purkinje.root)")
    a = band_lv[np.argmin(np.linalg.norm(band_lv - band_rv.mean(axis=0), axis=1))]
    b = rv[np.argmin(np.linalg.norm(rv - a, axis=1))]
    return 0.5 * (a + b)


def biv_surfaces(h: float = 0.05, base_margin: float = 0.1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(LV endocardium, RV endocardium, root) of cardiosim's built-in BiV at grid spacing h (cm)
    (cardiosim.domain.anatomy.idealised_biv; :func:`endocardia`, :func:`septal_root`)."""
    box, fields = anatomy.idealised_biv(h)
    lv, rv = endocardia(box.points(), fields["surfaces"], base_margin=base_margin)
    return lv, rv, septal_root(lv, rv, h=h)


def geometry_surfaces(path, apex_direction=(0.0, 0.0, -1.0), base_margin: float = 0.1):
    """(LV endocardium, RV endocardium, grid spacing) of a geometry file of ``cardiosim geometry`` (its ``surfaces``,
    ``spacing`` and ``origin``: the coordinates of the run that reads it as tissue.label_file)."""
    import h5py        # h5py only where a geometry file is read
    try:
        with h5py.File(path, "r") as f:
            if "surfaces" not in f:
                raise NetworkError(f"{path}: has no labelled surfaces (cardiosim geometry lv|biv|MESH writes them)")
            surf = f["surfaces"][...]
            h = float(f.attrs["spacing"])
            origin = np.asarray(f.attrs["origin"], dtype=float)
    except (OSError, KeyError) as e:
        raise NetworkError(f"{path}: not a geometry file of cardiosim geometry ({e})") from None
    nz, ny, nx = surf.shape
    z, y, x = np.meshgrid(*(origin[d] + np.arange(n) * h for d, n in ((2, nz), (1, ny), (0, nx))), indexing="ij")
    lv, rv = endocardia(np.stack([x, y, z], axis=-1), surf, apex_direction, base_margin)
    return lv, rv, h


def grow_biv(h: float = 0.05, params: GrowParameters | None = None) -> Network:
    """The conduction system on the built-in BiV at grid spacing h (cm)."""
    lv, rv, root = biv_surfaces(h)
    return conduction_system(lv, rv, root, params)


__all__ = ["GrowParameters", "Surface", "PARTS", "BLOCKS", "BLOCK_DISTAL", "fractal_tree", "conduction_system",
           "endocardia", "septal_root", "biv_surfaces", "geometry_surfaces", "grow_biv"]

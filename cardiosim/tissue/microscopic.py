"""The seed lineage's microscopic tissue model (de Barros et al. 2012): myocytes resolved by volumes, gap junctions
as lumped conductances of single faces. docs/user/microscopic.md has the equations, the face table and the checks.

The grid is cell-centred (cardiosim.domain.grid, ``cell_centred``): every DMDA node is one whole volume h_x × h_y × d
(d: ``depth`` in 1D/2D; h_z in 3D). Every volume belongs to one myocyte. A face between two volumes conducts

    cytoplasm      g = σ_c · area / distance               (both volumes in one myocyte)
    junction       g = G_p, G_i or G_c (µS), or 0           (two myocytes; "series": 1/g = 1/G + 1/g_cytoplasm)
    boundary       g = 0                                    (zero flux through the sheet's outer faces)

and the diffusion operator is the face Laplacian K (diagonal Σ_f g_f, off-diagonals −g_f): a 3/5/7-point star with
per-face conductances, symmetric, an M-matrix, assembled through COO like cardiosim.tissue.operators. In cardiosim's units
a row is divided by the extents the grid does not resolve (d and, in 1D, the strip's width h_x), so that the mass
is the resolved volume (cm^dim) and a face's coefficient is g/(those extents): σ_f = 10·g[µS]/d[µm] mS/cm in 2D.

Layouts are generated from closed-form rules on global indices, and every random choice is a counter-based hash of
(seed, what is drawn, global index): the layout of any box of nodes is computed without the others, and is the
same on any number of ranks.
"""

from __future__ import annotations

import numpy as np
from petsc4py import PETSc

from cardiosim.runtime.errors import UserError
from cardiosim.solvers.linear import (
    ELLIPTIC_DEFAULTS,
    LinearSolver,
    elliptic_pc_defaults,
    gpu_elliptic_defaults,
    sync_host,
)
from cardiosim.tissue.equations import Bidomain, Monodomain
from cardiosim.tissue.operators import MatrixOperator

# Face types (stored in the output as /tissue/face_type_<axis>).
BOUNDARY, CYTOPLASM, PLICATE, INTERPLICATE, COMBINED, NO_JUNCTION, NON_CONDUCTING = range(7)
FACE_TYPES = {BOUNDARY: "boundary", CYTOPLASM: "cytoplasm", PLICATE: "plicate (G_p)",
              INTERPLICATE: "interplicate (G_i)", COMBINED: "combined (G_c)", NO_JUNCTION: "no junction",
              NON_CONDUCTING: "touches a non-conducting cell"}
_JUNCTION_CODE = {"p": PLICATE, "i": INTERPLICATE, "c": COMBINED, "none": NO_JUNCTION}

# Streams of the counter-based generator: one per kind of draw, so that no two draws share a counter.
_ROW_SHIFT, _FIBROSIS, _DROPOUT, _NOISE_A, _NOISE_B = 1, 2, 3, 4, 5
_MASK64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 whose outputs pass as independent uniform bits."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def uniform(seed: int, stream: int, index) -> np.ndarray:
    """Uniform numbers in [0, 1), one per global ``index``: a pure function of (seed, stream, index)."""
    idx = np.asarray(index, dtype=np.int64).astype(np.uint64)
    with np.errstate(over="ignore"):
        key = _mix(np.uint64(seed) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(stream))
        h = _mix(idx * np.uint64(0xD1B54A32D192ED03) ^ key)
    return (h >> np.uint64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)


def lognormal_factor(seed: int, stream: int, index, cv: float) -> np.ndarray:
    """A log-normal factor with mean 1 and coefficient of variation ``cv`` per index (Box–Muller)."""
    if cv <= 0:
        return np.ones(np.shape(index))
    u1 = uniform(seed, _NOISE_A + 2 * stream, index)
    u2 = uniform(seed, _NOISE_B + 2 * stream, index)
    z = np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2.0 * np.pi * u2)
    s2 = np.log1p(cv * cv)
    return np.exp(np.sqrt(s2) * z - 0.5 * s2)


class Layout:
    """The myocyte layout on the global grid of ``n`` volumes (x first): which myocyte each volume belongs to, and
    each face's type and conductance (µS), for any box of volumes.

    Generated (docs/user/microscopic.md §Layout): row r of myocytes = ⌊j / cell_width⌋ (in 3D rows are stacked in z too),
    its shift s_r = r·row_offset mod cell_length (or drawn), position in the myocyte p = (i + s_r) mod cell_length,
    column ⌊(i + s_r) / cell_length⌋. Or read from ``layout_file`` (a .npz with cell_id, optionally face_x/face_y).
    """

    def __init__(self, cfg, n, h_cm):
        """``h_cm``: the volume size per dimension (cm), grid.spacing as configured: equal spacings give
        bit-equal extents, so that a face of σ_c·d and a junction G = σ_c·d are the same number."""
        self.m = m = cfg.tissue.microscopic
        self.n = [int(v) for v in n]
        self.dim = len(self.n)
        self.nl, self.nw = m.cell_length, m.cell_width
        self.offset = m.cell_length // 2 if m.row_offset < 0 else m.row_offset
        self.rows_y = -(-self.n[1] // self.nw) if self.dim > 1 else 1
        self.cols = (self.n[0] + self.nl - 1) // self.nl + 1
        # Volume extents (µm) in x, y, z: a 1D strip is one square volume wide, a 1D/2D sheet d deep.
        h_um = [float(v) * 1e4 for v in h_cm]
        self.extent = [h_um[0], h_um[1] if self.dim > 1 else h_um[0], h_um[2] if self.dim > 2 else m.depth]
        self.file = _read_layout_file(m.layout_file, self.n) if m.layout_file else None

    # -- myocytes ----------------------------------------------------------------------------------------------
    def _indices(self, ranges):
        """Global index arrays (x, y, z) of the volumes in ``ranges``, each shaped like the box (z, y, x order)."""
        ax = [np.arange(a, b, dtype=np.int64) for a, b in ranges] + [np.zeros(1, np.int64)] * (3 - len(ranges))
        z, y, x = np.meshgrid(ax[2], ax[1], ax[0], indexing="ij")
        shape = tuple(b - a for a, b in reversed(ranges))
        return [v.reshape(shape) for v in (x, y, z)]

    def cells(self, ranges):
        """(cell id, disc-zone mask, non-conducting mask) of the volumes in ``ranges``; arrays (z, y, x)."""
        if self.file is not None:
            return self._file_cells(ranges)
        x, y, z = self._indices(ranges)
        m = self.m
        row = y // self.nw + self.rows_y * (z // self.nw)
        if m.random_offset:
            shift = np.floor(uniform(m.seed, _ROW_SHIFT, row) * self.nl).astype(np.int64)
        else:
            shift = (row * self.offset) % self.nl
        p = (x + shift) % self.nl
        cid = row * self.cols + (x + shift) // self.nl
        dz = m.disc_zone
        disc = (p < dz) | (p >= self.nl - dz)
        dead = (uniform(m.seed, _FIBROSIS, cid) < m.fibrosis.fraction) if m.fibrosis.fraction > 0 \
            else np.zeros(cid.shape, bool)
        return cid, disc, dead

    def _file_cells(self, ranges):
        cid_all, _ = self.file
        dz = self.m.disc_zone
        lo = [a for a, _ in ranges]
        sl = tuple(slice(a, b) for a, b in reversed(ranges))
        cid = cid_all[sl]
        # A volume is in the disc zone if a volume of another myocyte lies within dz along x (not the sheet edge).
        rows = cid_all[tuple(slice(a, b) for a, b in reversed(ranges[1:]))] if self.dim > 1 else cid_all
        rows = rows.reshape(cid.shape[:-1] + (self.n[0],))
        disc_full = np.zeros(rows.shape, bool)
        for s in range(1, dz + 1):
            diff = rows[..., s:] != rows[..., :-s]
            disc_full[..., s:] |= diff
            disc_full[..., :-s] |= diff
        disc = disc_full[..., lo[0]:ranges[0][1]]
        return cid, disc, cid < 0

    # -- faces -------------------------------------------------------------------------------------------------
    def junction_g(self, code: np.ndarray, g_cyto: float) -> np.ndarray:
        """Conductance (µS) of faces of the given junction types."""
        m = self.m
        G = np.zeros(code.shape)
        for c, v in ((PLICATE, m.G_p), (INTERPLICATE, m.G_i), (COMBINED, m.G_c)):
            G[code == c] = v
        if m.junction_treatment == "series":
            # half a volume of cytoplasm (g = 2 g_cyto) on either side, in series with the junction
            G = np.divide(1.0, 1.0 / np.where(G > 0, G, np.inf) + 1.0 / g_cyto, out=np.zeros_like(G),
                          where=G > 0)
        return G

    def cytoplasm_g(self, axis: int) -> float:
        """σ_c · face area / distance (µS) for a face normal to ``axis``."""
        e = self.extent
        area = np.prod([e[b] for b in range(3) if b != axis])
        return self.m.sigma_c * area / e[axis]

    def faces(self, ranges):
        """Per axis: (type, g in µS) of the face on the + side of each volume in ``ranges`` (z, y, x arrays; the
        last volume along the axis has a boundary face)."""
        ext = [(a, min(b + 1, n)) for (a, b), n in zip(ranges, self.n)]
        cid, disc, dead = self.cells(ext)
        box = tuple(slice(0, b - a) for a, b in reversed(ranges))
        x, y, z = self._indices(ranges)
        natural = x + self.n[0] * (y + (self.n[1] if self.dim > 1 else 1) * z)
        out = []
        m = self.m
        for axis in range(self.dim):
            ax = self.dim - 1 - axis                  # array axis of this grid axis
            up = [slice(0, b - a) for a, b in reversed(ranges)]
            up[ax] = slice(1, ranges[axis][1] - ranges[axis][0] + 1)
            up = tuple(up)
            kind = np.full(tuple(b - a for a, b in reversed(ranges)), BOUNDARY, dtype=np.int8)
            inside = (np.arange(ranges[axis][0], ranges[axis][1]) < self.n[axis] - 1)
            shp = [1] * 3
            shp[2 - axis] = -1
            inside = np.broadcast_to(inside.reshape(shp[3 - self.dim:]), kind.shape)
            c0, c1 = cid[box], _take(cid, up, kind.shape)
            same = inside & (c0 == c1)
            if self.file is not None and self.file[1][axis] is not None:
                given = self.file[1][axis][tuple(slice(a, b) for a, b in reversed(ranges))]
                kind = np.where(inside, given, BOUNDARY).astype(np.int8)
            else:
                if axis == 0:
                    junction = _JUNCTION_CODE[m.junction.end]
                else:
                    d = disc[box] | _take(disc, up, kind.shape)
                    junction = np.where(d, _JUNCTION_CODE[m.junction.lateral_disc],
                                        _JUNCTION_CODE[m.junction.lateral])
                kind = np.where(same, CYTOPLASM, np.where(inside, junction, BOUNDARY)).astype(np.int8)
                is_j = (kind != CYTOPLASM) & (kind != BOUNDARY) & (kind != NO_JUNCTION)
                if m.junction.dropout > 0:
                    drop = uniform(m.seed, _DROPOUT + 10 * axis, natural) < m.junction.dropout
                    kind[is_j & drop] = NO_JUNCTION
            g_c = self.cytoplasm_g(axis)
            g = np.where(kind == CYTOPLASM, g_c, self.junction_g(kind, g_c))
            if m.regions:
                g = g * self._region_factors(kind, axis, x, y, z)
            if m.junction.noise_cv > 0:
                f = lognormal_factor(m.seed, axis, natural, m.junction.noise_cv)
                g = np.where((kind >= PLICATE) & (kind <= COMBINED), g * f, g)
            off = inside & (dead[box] | _take(dead, up, kind.shape))
            kind[off] = NON_CONDUCTING
            g[off] = 0.0
            g[kind == BOUNDARY] = 0.0
            out.append((kind, g))
        return out

    def _region_factors(self, kind, axis, x, y, z) -> np.ndarray:
        """Product of the regions' factors on each face's junction type, by the face centre (cm)."""
        h = [e * 1e-4 for e in self.extent]
        centre = [(v + 0.5) * h[d] for d, v in enumerate((x, y, z)[: self.dim])]
        centre[axis] = centre[axis] + 0.5 * h[axis]
        pts = np.stack([c.ravel() for c in centre], axis=1)
        f = np.ones(kind.size)
        k = kind.ravel()
        tol = 1e-9 * max(h)
        for r in self.m.regions:
            if r.shape == "box":
                inside = np.all((pts >= np.asarray(r.lower) - tol) & (pts <= np.asarray(r.upper) + tol), axis=1)
            else:
                inside = np.sum((pts - np.asarray(r.center)) ** 2, axis=1) <= (r.radius + tol) ** 2
            for code, factor in ((PLICATE, r.scale_p), (INTERPLICATE, r.scale_i), (COMBINED, r.scale_c)):
                f[inside & (k == code)] *= factor
        return f.reshape(kind.shape)

    def coefficient_scale(self) -> float:
        """Factor from a face's g (µS) to its matrix coefficient in cardiosim's units (mS/cm^(3−dim)): µS → mS,
        divided by the extents (cm) the grid does not resolve."""
        missing = np.prod([self.extent[a] * 1e-4 for a in range(self.dim, 3)]) if self.dim < 3 else 1.0
        return 1e-3 / missing


def _take(arr, sl, shape):
    """arr[sl] padded with its last layer up to ``shape`` (the + neighbour of the last volume is absent)."""
    v = arr[sl]
    if v.shape == shape:
        return v
    pad = [(0, s - t) for s, t in zip(shape, v.shape)]
    return np.pad(v, pad, mode="edge")


def _read_layout_file(path: str, n) -> tuple:
    where = "tissue.microscopic.layout_file"
    if str(path).endswith(".h5"):
        data = _layout_from_output(path, where)
    else:
        data = _read_npz(path, where)
    shape = tuple(int(v) for v in reversed(n))
    if "cell_id" not in data:
        raise UserError(f"{where}: {path} has no array 'cell_id'; it holds {', '.join(data) or 'nothing'}")
    cid = data["cell_id"]
    if cid.shape != shape:
        raise UserError(f"{where}: cell_id in {path} has shape {cid.shape}; the grid needs {shape} "
                        f"(one entry per volume, x fastest: grid.size / grid.spacing per dimension)")
    if not np.issubdtype(cid.dtype, np.integer):
        raise UserError(f"{where}: cell_id in {path} must hold integers; got {cid.dtype}")
    for name in ("face_x", "face_y", "face_z"):
        if name in data and not np.issubdtype(data[name].dtype, np.integer):
            raise UserError(f"{where}: {name} in {path} must hold integer face type codes; got {data[name].dtype}")
    faces = []
    for axis, name in enumerate(("face_x", "face_y", "face_z")[: len(n)]):
        f = data.get(name)
        if f is not None:
            if f.shape != shape:
                raise UserError(f"{where}: {name} in {path} has shape {f.shape}; the grid needs {shape}")
            bad = ~np.isin(f, list(FACE_TYPES))
            if bad.any():
                raise UserError(f"{where}: {name} in {path} holds codes other than {sorted(FACE_TYPES)} "
                                f"(docs/user/microscopic.md)")
        faces.append(f)
    return cid.astype(np.int64), faces


def _read_npz(path: str, where: str) -> dict:
    """Every array of a .npz archive, read whole now: an archive that was cut short or damaged (a zip that does not
    open, a member whose checksum or compression fails) or that holds pickled objects is one line naming it."""
    import zipfile
    import zlib
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.ndarray):           # a .npy: one array, no names
            raise UserError(f"{where}: {path} is one .npy array, not a .npz archive of named arrays (cell_id, "
                            f"face_x, ...: numpy.savez)")
        with loaded as f:
            return {k: f[k] for k in f.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise UserError(f"{where}: cannot read {path} as a .npz archive (cut short or damaged?): {reason}") \
            from None


def _layout_from_output(path: str, where: str) -> dict:
    """The layout of an earlier run (its /tissue group): cell ids (non-conducting ones made negative) and the face
    types; conductances are recomputed from this run's G_p, G_i, G_c (noise and dropout drawn anew)."""
    import h5py
    try:
        with h5py.File(path, "r", locking=False) as f:
            t = f["tissue"]
            cid = t["cell_id"][()].astype(np.int64)
            dead = t["non_conducting"][()].astype(bool)
            data = {"cell_id": np.where(dead, -1 - cid, cid)}
            for a in "xyz":
                if f"face_type_{a}" in t:
                    k = t[f"face_type_{a}"][()]
                    # a face touching a non-conducting myocyte is found again from the negative ids
                    data[f"face_{a}"] = np.where(k == NON_CONDUCTING, NO_JUNCTION, k)
    except (OSError, KeyError, ValueError, TypeError) as e:
        raise UserError(f"{where}: cannot read a layout (/tissue) from {path}: {e}") from None
    return data


# ------------------------------------------------------------------------------------------------------------------
# The operator
# ------------------------------------------------------------------------------------------------------------------
class FaceOperator:
    """Face Laplacians on this rank's volumes, assembled through COO (host and GPU matrix types alike).

    A rank assembles the faces on the + side of the volumes it owns; their upper volume lies at most one node
    away, in the ghosted range. ``coefficients`` are per axis, (z, y, x) arrays over the owned volumes.
    """

    def __init__(self, grid):
        self.grid = grid
        dim = grid.dim
        gx = [a for a, _ in grid.ghosted]
        gshape = [b - a for a, b in grid.ghosted]
        idx = [np.arange(a, b) for a, b in grid.owned]
        mesh = np.meshgrid(*reversed(idx), indexing="ij")
        node = [m.ravel() for m in reversed(mesh)]                   # x, y, z of owned volumes

        def local(offsets):
            li = np.zeros_like(node[0])
            stride = 1
            for d in range(dim):
                li += (node[d] + offsets[d] - gx[d]) * stride
                stride *= gshape[d]
            return li

        lgmap = grid.da.getLGMap()
        self.lower = lgmap.apply(local([0] * dim).astype(np.int32))
        self.upper, self.inside = [], []
        for axis in range(dim):
            off = [0] * dim
            off[axis] = 1
            inside = node[axis] < int(grid.n[axis]) - 1
            li = local(off)
            li[~inside] = 0                                           # not used: those faces are left out
            self.upper.append(lgmap.apply(li.astype(np.int32))[inside])
            self.inside.append(inside)
        rows = [self.lower]                                           # the diagonal of every row, present once
        cols = [self.lower]
        for axis in range(dim):
            a, b = self.lower[self.inside[axis]], self.upper[axis]
            rows += [a, b, a, b]
            cols += [a, b, b, a]
        self.rows = np.concatenate(rows).astype(PETSc.IntType)
        self.cols = np.concatenate(cols).astype(PETSc.IntType)

    def values(self, coefficients) -> np.ndarray:
        vals = [np.zeros(len(self.lower))]
        for axis, c in enumerate(coefficients):
            g = np.asarray(c).ravel()[self.inside[axis]]
            vals += [g, g, -g, -g]
        return np.concatenate(vals)

    def matrix(self, values) -> PETSc.Mat:
        A = self.grid.matrix()
        A.setOption(PETSc.Mat.Option.NEW_NONZERO_ALLOCATION_ERR, False)
        A.setPreallocationCOO(self.rows.copy(), self.cols.copy())   # PETSc may reorder them in place
        A.setValuesCOO(np.asarray(values, dtype=PETSc.ScalarType), addv=PETSc.InsertMode.INSERT_VALUES)
        A.setOption(PETSc.Mat.Option.SYMMETRIC, True)
        sync_host(A)
        return A


def cell_mass(grid) -> PETSc.Vec:
    """Every volume is whole: M = Π_d h_d (cm^dim) at every node, the boundary ones included."""
    M = grid.vec()
    M.set(float(np.prod(grid.h)))
    return M


def extracellular_coefficients(cfg, grid, layout: Layout):
    """Uniform extracellular faces (bidomain): σ_e along x (fibres) and across, as coefficients per axis; the
    faces of non-conducting cells keep them, the sheet's outer faces have none."""
    t = cfg.tissue
    out = []
    for axis in range(grid.dim):
        sigma = t.sigma_el if axis == 0 else t.sigma_et           # mS/cm
        area = np.prod([grid.h[b] for b in range(grid.dim) if b != axis])
        c = np.full(grid.local_shape, sigma * area / grid.h[axis])
        last = np.arange(*grid.owned[axis]) == int(grid.n[axis]) - 1
        shp = [1] * grid.dim
        shp[grid.dim - 1 - axis] = -1
        c[np.broadcast_to(last.reshape(shp), c.shape)] = 0.0
        out.append(c)
    return out


# ------------------------------------------------------------------------------------------------------------------
# The tissue equations on it (the same steps as cardiosim.tissue.equations; only the matrices and the mass differ)
# ------------------------------------------------------------------------------------------------------------------
def _setup(model, grid, cfg) -> None:
    """What cardiosim.tissue.equations.TissueModel.__init__ sets (its methods are reused through Monodomain and Bidomain),
    for the microscopic matrices and mass."""
    if not grid.cell_centred:
        raise UserError("tissue.model: the microscopic model needs the cell-centred grid")
    model.common(grid, cfg, cell_mass(grid))
    model.layout = Layout(cfg, grid.n, cfg.grid.spacing)
    model.faces = model.layout.faces(grid.owned)
    scale = model.layout.coefficient_scale()
    model.coefficients = [g * scale for _, g in model.faces]
    model.operator = FaceOperator(grid)
    _, _, dead = model.layout.cells(grid.owned)
    # Non-conducting volumes are never stimulated (cardiosim.cells.stimulus reads this): isolated, they stay at rest.
    grid.unexcitable = dead.ravel().copy() if dead.any() else None


def make(grid, cfg):
    class MicroscopicMonodomain(Monodomain):
        """Monodomain on the face Laplacian: (αM + θK) V' = αM V* − (1−θ) K V*, K of the intracellular faces
        (the 2012 model: no extracellular resistance)."""

        def __init__(self, grid, cfg):
            _setup(self, grid, cfg)
            self.K = self.operator.matrix(self.operator.values(self.coefficients))
            self.parabolic = _solver("parabolic", self._parabolic_matrix(self.K),
                                     self._parabolic_defaults(_diagonal(self.K)), grid=grid)

        def intracellular(self):
            return MatrixOperator(self.K)

    class MicroscopicBidomain(Bidomain):
        """Bidomain variant: intracellular faces from the layout, uniform extracellular faces (σ_e)."""

        def __init__(self, grid, cfg):
            _setup(self, grid, cfg)
            op = self.operator
            vi = op.values(self.coefficients)
            ve = op.values(extracellular_coefficients(cfg, grid, self.layout))
            self.Ki = op.matrix(vi)
            self.parabolic = _solver("parabolic", self._parabolic_matrix(self.Ki),
                                     self._parabolic_defaults(_diagonal(self.Ki)), grid=grid)
            pc = gpu_elliptic_defaults(grid) if grid.gpu else elliptic_pc_defaults(grid)
            self.elliptic = _solver("elliptic", op.matrix(vi + ve), {**ELLIPTIC_DEFAULTS, **pc}, grid=grid,
                                    nullspace=True)
            self.volume = self.M.sum()

    cls = MicroscopicBidomain if cfg.simulation.equations == "bidomain" else MicroscopicMonodomain
    return cls(grid, cfg)


def _diagonal(K) -> np.ndarray:
    """K's diagonal on this rank's nodes, as an array."""
    d = K.getDiagonal()
    out = d.getArray(readonly=True).copy()
    d.destroy()
    return out


def _solver(name, A, defaults, **kw):
    """The DMDA goes with every solver (grid=…), so that -parabolic_pc_type mg finds its hierarchy too."""
    return LinearSolver(name, A, defaults=defaults, **kw)


def global_layout(cfg, grid) -> dict:
    """The whole layout as natural-order arrays (z, y, x), for the output file (any rank; no communication)."""
    lay = Layout(cfg, grid.n, cfg.grid.spacing)
    full = [(0, int(n)) for n in grid.n]
    cid, _, dead = lay.cells(full)
    out = {"cell_id": cid, "non_conducting": dead.astype(np.int8)}
    for axis, (kind, g) in zip("xyz", lay.faces(full)):
        out[f"face_type_{axis}"] = kind
        out[f"face_g_{axis}"] = g
    return out


def output_attrs(cfg) -> dict:
    """What /tissue's attributes say: the face-type codes and the parameters that made the layout."""
    import json
    m = cfg.tissue.microscopic
    return {"model": "microscopic", "face_types": json.dumps({str(k): v for k, v in FACE_TYPES.items()}),
            "sigma_c_uS_per_um": m.sigma_c, "G_p_uS": m.G_p, "G_i_uS": m.G_i, "G_c_uS": m.G_c,
            "depth_um": m.depth, "junction_treatment": m.junction_treatment,
            "description": "cell_id: myocyte of each volume; face_type_<a>/face_g_<a>: type code and conductance "
                           "(uS) of the face on the + side of each volume along axis a (the last one: boundary)"}

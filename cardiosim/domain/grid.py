"""The tissue grid: a PETSc DMDA of nodes, their coordinates, fibres and conductivity tensors.

Nodes sit on the tissue boundary and inside it (vertex-centred): n_d = L_d / h_d + 1 per dimension. Each rank owns
a box of nodes (PETSc's decomposition); numpy arrays of owned-node data are shaped (nz, ny, nx) in C order, which is
PETSc's local ordering (x fastest), so ``array.ravel()`` lines up with the local part of a global Vec.

Conductivity tensors are transversely isotropic about the fibre direction f:
    σ = σ_t I + (σ_l − σ_t) f fᵀ      (mS/cm)
scaled per node by the product of the region factors and the per-point file factor (heterogeneity, scar).
"""

from __future__ import annotations

import numpy as np
from petsc4py import PETSc

from cardiosim.domain import balance
from cardiosim.domain.mask import TissueMask
from cardiosim.runtime.errors import UserError
from cardiosim.runtime.mpi import root_then_all


class Grid:
    def __init__(self, cfg, comm=None, balance_levels=None):
        """``balance_levels(cfg, grid, procs)``: the multigrid levels a tissue-balanced split (grid.balance) must keep
        on the process grid ``procs`` (cardiosim.tissue.equations.balance_levels); without it, one."""
        comm = comm or PETSc.COMM_WORLD
        g = cfg.grid
        self.dim = dim = cfg.dim
        self.size = np.array(g.size, dtype=float)                       # cm
        # The microscopic model's grid is cell-centred: one whole volume per node, node i at (i + ½)·h.
        self.cell_centred = cfg.tissue.model == "microscopic"
        self.n = node_counts(cfg)
        self.h = self.size / (self.n - (0 if self.cell_centred else 1))   # cm, exact divisors of the size
        # cm, position of node 0: grid.origin, and half a volume in on the cell-centred grid
        self.offset = (np.array(g.origin, dtype=float) if g.origin else np.zeros(dim)) + (
            0.5 * self.h if self.cell_centred else 0.0)
        self.unexcitable = None   # owned nodes never stimulated (non-tissue nodes; the microscopic model's
                                  # non-conducting cells)
        self.n_nodes = int(np.prod(self.n))
        self._fibres_held = None  # (key, fibres) of the last fibres() call
        # The resident placement keeps the PDE on the GPU: CUDA vectors (no -dm_vec_type flag needed; the options
        # database still wins, e.g. to compare with host types).
        self.gpu = getattr(cfg.cell, "placement", "") == "resident"
        self.mask = None          # tissue inside the box (cardiosim.domain.mask), from tissue.label_file
        if getattr(cfg.tissue, "label_file", ""):
            self.mask = TissueMask(self, cfg.tissue.label_file)     # read whole: needs no decomposition
            self.mask_file = cfg.tissue.label_file
        # grid.balance: PETSc's even split of the box, or the cuts moved to balance the tissue (cardiosim.domain.balance)
        self.balance, self.box_split = "box", None
        ownership = None
        if self.mask is not None and comm.getSize() > 1 and balances_tissue(cfg, self):
            self.balance = "tissue"
            ownership, self.box_split = self._tissue_ownership(cfg, comm, balance_levels)
        self.da = self._dmda(comm, ownership)
        self.owned = [tuple(r) for r in self.da.getRanges()]              # per dim (start, stop), x first
        self.ghosted = [tuple(r) for r in self.da.getGhostRanges()]
        self.local_shape = tuple(b - a for a, b in reversed(self.owned))  # (nz, ny, nx) of owned nodes
        self.ghost_shape = tuple(b - a for a, b in reversed(self.ghosted))
        self.n_local = int(np.prod(self.local_shape))
        if self.mask is not None:
            self.unexcitable = self.mask.outside()
            regions = [(f"tissue.regions[{i}]", r) for i, r in enumerate(cfg.tissue.regions)]
            regions += [(f"stimulus[{i}]", r) for i, r in enumerate(cfg.stimulus)]
            regions += [(f"cell.regions[{i}]", r) for i, r in enumerate(getattr(cfg.cell, "regions", ()))]
            for where, r in regions:
                if r.shape == "label" and r.label not in self.mask.present:
                    raise UserError(f"{where}.label: no tissue node has label {r.label} in "
                                    f"{cfg.tissue.label_file}; labels present: "
                                    f"{', '.join(map(str, sorted(self.mask.present)))}")

    def _dmda(self, comm, ownership=None, proc_sizes=None) -> PETSc.DMDA:
        """The grid's DMDA: PETSc's decomposition, or the process grid ``proc_sizes`` with the node counts per
        process column ``ownership`` (x first)."""
        dim = self.dim
        extra = {} if ownership is None else {"proc_sizes": tuple(proc_sizes or self._procs),
                                              "ownership_ranges": ownership}
        da = PETSc.DMDA().create(dim=dim, sizes=tuple(int(v) for v in self.n), dof=1, stencil_width=1,
                                 stencil_type=PETSc.DMDA.StencilType.BOX,
                                 boundary_type=(PETSc.DM.BoundaryType.NONE,) * dim, comm=comm,
                                 setup=False, **extra)
        if self.gpu:
            da.setVecType(PETSc.Vec.Type.CUDA)
            da.setMatType(PETSc.Mat.Type.AIJCUSPARSE)
        da.setFromOptions()  # -dm_vec_type / -dm_mat_type (e.g. cuda, aijcusparse)
        da.setUp()
        return da

    def _tissue_ownership(self, cfg, comm, balance_levels=None):
        """(node counts per process column balancing the tissue, those of PETSc's even split), x first: PETSc's
        process grid for the box (a DMDA of the box made and dropped to learn it, -da_processors_* applying)."""
        even = self._dmda(comm)
        self._procs = tuple(int(v) for v in even.getProcSizes())
        box = [tuple(int(v) for v in r) for r in even.getOwnershipRanges()]
        even.destroy()
        levels = balance_levels(cfg, self, self._procs) if balance_levels else 1
        # one rank balances, every rank takes its answer (the same boxes for sure)
        ranges = root_then_all(comm.tompi4py(), lambda: balance.split(self.mask.tissue, self._procs, box, levels))
        return ranges, box

    def tissue_per_rank(self, ranges=None) -> list[int]:
        """Tissue nodes of each rank's box (rank order) under ``ranges`` (node counts per process column, x first;
        default: this grid's decomposition)."""
        ranges = ranges or [tuple(int(v) for v in r) for r in self.da.getOwnershipRanges()]
        return [int(v) for v in balance.loads(self.mask.tissue.astype(np.int64), ranges)]

    def describe_balance(self) -> str:
        """e.g. "tissue per rank 12,854 / 13,202 (grid.balance: tissue; the box split: 11,654 / 14,402)"."""
        def counts(ranges=None):
            return " / ".join(f"{v:,}" for v in self.tissue_per_rank(ranges))
        out = f"tissue per rank {counts()} (grid.balance: {self.balance}"
        return out + (f"; the even box split: {counts(self.box_split)})" if self.box_split else ")")

    # -- index helpers -----------------------------------------------------------------------------------------
    def axes(self, ranges) -> list[np.ndarray]:
        """Node coordinates (cm) along each dimension over ``ranges`` (x first)."""
        return [np.arange(a, b) * self.h[d] + self.offset[d] for d, (a, b) in enumerate(ranges)]

    def coords(self, ranges=None) -> np.ndarray:
        """Coordinates (cm) of the nodes in ``ranges`` (default: owned), shape (n, dim), PETSc local order."""
        ax = self.axes(ranges or self.owned)
        mesh = np.meshgrid(*reversed(ax), indexing="ij")                 # z, y, x
        return np.stack([m.ravel() for m in reversed(mesh)], axis=1)

    def natural_index(self, ranges=None) -> np.ndarray:
        """Natural (x-fastest, whole-grid) index of the nodes in ``ranges``, PETSc local order."""
        idx = [np.arange(a, b) for a, b in (ranges or self.owned)]
        mesh = np.meshgrid(*reversed(idx), indexing="ij")
        nat = np.zeros(mesh[0].shape, dtype=np.int64)
        stride = 1
        for d, m in enumerate(reversed(mesh)):
            nat += m * stride
            stride *= int(self.n[d])
        return nat.ravel()

    def nearest_node(self, point) -> tuple[int, ...]:
        return tuple(int(np.clip(round((x - o) / h), 0, n - 1))
                     for x, o, h, n in zip(point, self.offset, self.h, self.n))

    def node_position(self, node) -> np.ndarray:
        """Coordinates (cm) of a node given by its indices."""
        return np.asarray(node) * self.h[:len(node)] + self.offset[:len(node)]

    def owns(self, node) -> bool:
        return all(a <= i < b for i, (a, b) in zip(node, self.owned))

    def local_offset(self, node) -> int:
        """Position of an owned node in the local part of a global Vec."""
        off, stride = 0, 1
        for i, (a, b) in zip(node, self.owned):
            off += (i - a) * stride
            stride *= b - a
        return off

    def in_region(self, region, pts: np.ndarray) -> np.ndarray:
        """Mask of the points (n, dim) inside a box or sphere region (boundary included)."""
        tol = 1e-9 * float(self.size.max())
        if region.shape == "label":
            return self.mask.label_at(pts) == region.label
        if region.shape == "coordinate":                  # NaN outside the tissue: never inside
            v = self.coordinate_at(region.coordinate, pts)
            return (v >= region.range[0]) & (v <= region.range[1])
        if region.shape == "box":
            lo, hi = np.asarray(region.lower), np.asarray(region.upper)
            return np.all((pts >= lo - tol) & (pts <= hi + tol), axis=1)
        c = np.asarray(region.center)
        return np.sum((pts - c) ** 2, axis=1) <= (region.radius + tol) ** 2

    def coordinate_at(self, name: str, pts: np.ndarray) -> np.ndarray:
        """A ventricular coordinate of tissue.label_file (a geometry file: cardiosim.domain.fibres) at the nodes at
        ``pts`` (n, dim) cm, the nearest node as for labels; read whole once per coordinate."""
        cache = self.__dict__.setdefault("_coordinates", {})
        if name not in cache:
            arr = np.asarray(_h5_field(self.mask_file, name), dtype=float)
            if arr.size != self.n_nodes:
                raise UserError(f"tissue.label_file: {self.mask_file}'s {name} has shape {arr.shape}; expected one "
                                f"value per grid node, {tuple(int(v) for v in reversed(self.n))}")
            cache[name] = arr.reshape(tuple(int(v) for v in reversed(self.n)))
        return cache[name][self.nearest_nodes(pts)]

    def nearest_nodes(self, pts: np.ndarray) -> tuple:
        """:meth:`nearest_node` of each point of ``pts`` (n, dim) cm, as index arrays in z, y, x order (for
        natural-order arrays of the whole grid)."""
        idx = [np.clip(np.rint((pts[:, d] - self.offset[d]) / self.h[d]).astype(np.int64), 0, int(self.n[d]) - 1)
               for d in range(self.dim)]
        return tuple(reversed(idx))

    # -- per-node fields ---------------------------------------------------------------------------------------
    def _point_file(self, path: str, key: str, trailing: tuple, ranges) -> np.ndarray:
        """Read a per-point field (.npy, or the dataset of an HDF5 file of ``cardiosim geometry`` named for
        ``key``) and return the rows for ``ranges`` in PETSc local order."""
        if str(path).endswith((".h5", ".hdf5")):
            arr = _h5_field(path, key)
        else:
            try:
                arr = np.load(path, mmap_mode="r")
            except (OSError, ValueError) as e:
                raise UserError(f"{key}: cannot read {path} as a .npy array: {e}") from None
        full = tuple(int(v) for v in reversed(self.n)) + trailing
        flat = (self.n_nodes,) + trailing
        if arr.shape == full:
            arr = arr.reshape(flat)
        if arr.shape != flat:
            raise UserError(f"{key}: {path} has shape {arr.shape}; expected {full} or {flat} "
                            f"(x fastest, one entry per node)")
        out = np.asarray(arr[self.natural_index(ranges)], dtype=float)
        if not np.all(np.isfinite(out)):
            raise UserError(f"{key}: {path} holds non-finite values")
        return out

    def whole_field(self, path: str, key: str) -> np.ndarray:
        """A per-point .npy field over every node of the grid (natural order), read on this rank."""
        return self._point_file(path, key, (), [(0, int(n)) for n in self.n])

    def fibres(self, tissue, ranges) -> np.ndarray:
        """Unit fibre directions (n, dim) at the nodes of ``ranges``, read-only. The last call's are kept: the run's
        set-up asks for the same ones twice on one rank (the stencil's choice, the conductivities), and a fibre
        file of a heart's box is its largest read (human BiV at 0.5 mm: 1.7 s)."""
        key = (tissue.fibre_file, tissue.fibre_angle, tuple((int(a), int(b)) for a, b in ranges))
        if self._fibres_held is not None and self._fibres_held[0] == key:
            return self._fibres_held[1]
        f = self._fibres(tissue, ranges)
        f.flags.writeable = False
        self._fibres_held = (key, f)
        return f

    def _fibres(self, tissue, ranges) -> np.ndarray:
        n = int(np.prod([b - a for a, b in ranges]))
        if tissue.fibre_file:
            f = self._point_file(tissue.fibre_file, "tissue.fibre_file", (self.dim,), ranges)
            norm = np.linalg.norm(f, axis=1)
            short = norm < 1e-12
            if self.mask is not None:        # outside the tissue a fibre is never used (cardiosim geometry: 0)
                outside = ~self.mask.tissue[tuple(slice(a, b) for a, b in reversed(ranges))].ravel()
                f[short & outside, 0], norm[short & outside] = 1.0, 1.0
                short &= ~outside
            if np.any(short):
                raise UserError(f"tissue.fibre_file: {tissue.fibre_file} has zero-length fibre vectors"
                                + (" at tissue nodes" if self.mask is not None else ""))
            return f / norm[:, None]
        a = np.deg2rad(tissue.fibre_angle)
        f = np.zeros((n, self.dim))
        f[:, 0] = np.cos(a)
        if self.dim > 1:
            f[:, 1] = np.sin(a)
        return f

    def scale_factors(self, tissue, ranges) -> tuple[np.ndarray, np.ndarray]:
        """Per-node factors on σi and σe from regions and the conductivity file."""
        pts = self.coords(ranges)
        si = np.ones(len(pts))
        se = np.ones(len(pts))
        if tissue.conductivity_file:
            s = self._point_file(tissue.conductivity_file, "tissue.conductivity_file", (), ranges)
            if np.any(s < 0):
                raise UserError(f"tissue.conductivity_file: {tissue.conductivity_file} holds negative factors")
            si *= s
            se *= s
        for r in tissue.regions:
            m = self.in_region(r, pts)
            si[m] *= r.scale_intra
            se[m] *= r.scale_extra
        return si, se

    def has_cross_terms(self, fibres) -> bool:
        """True if some fibre is not along an axis (then σ has off-diagonal entries)."""
        big = np.abs(fibres) > 1e-12
        local = bool(np.any(big.sum(axis=1) > 1))
        return bool(self.da.comm.tompi4py().allreduce(local, op=_mpi_lor()))

    # -- vectors -----------------------------------------------------------------------------------------------
    def vec(self) -> PETSc.Vec:
        return self.da.createGlobalVec()

    def matrix(self) -> PETSc.Mat:
        """An empty matrix of the grid's layout and type (its rows this rank's nodes, PETSc's numbering; the DMDA's
        local-to-global map), for the caller to preallocate. Not ``da.createMat()``: that fills the box stencil's
        whole pattern with zeros, which the CSR preallocation then replaces: 0.86 s of a 1.0 s matrix at 80³ on two
        cores, so about 17 s of the 10^7-node slab's two matrices."""
        A = PETSc.Mat().create(comm=self.da.getComm())
        A.setSizes(((self.n_local, int(np.prod(self.n))), (self.n_local, int(np.prod(self.n)))))
        default = PETSc.Mat.Type.AIJCUSPARSE if self.gpu else PETSc.Mat.Type.AIJ
        A.setType(PETSc.Options().getString("dm_mat_type", default))
        A.setLGMap(self.da.getLGMap())
        return A

    @staticmethod
    def to_device(v: PETSc.Vec) -> None:
        """Make a GPU Vec's device copy current now (set-up), not at its first use inside the stepping loop."""
        h = v.getCUDAHandle("r")
        v.restoreCUDAHandle(h, "r")


# The dataset of a ``cardiosim geometry`` file that each per-point key reads
H5_DATASETS = {"tissue.label_file": "labels", "tissue.fibre_file": "fibres", "tissue.conductivity_file": "conductivity"}


def _h5_field(path: str, key: str) -> np.ndarray:
    import h5py
    name = H5_DATASETS.get(key, key)
    try:
        with h5py.File(path, "r") as f:
            if not isinstance(f.get(name), h5py.Dataset):
                raise UserError(f"{key}: {path} has no dataset '{name}' (it holds: {', '.join(f) or 'nothing'})")
            return f[name][()]
    except OSError as e:
        raise UserError(f"{key}: cannot read {path} as HDF5: {e}") from None


def balances_tissue(cfg, grid) -> bool:
    """Whether a masked grid's decomposition balances its tissue (grid.balance): auto does, except for the resident
    placement, whose linear systems are solved on the whole box on the GPUs
    (docs/decisions/0030-decomposition-balanced-by-tissue.md)."""
    choice = getattr(cfg.grid, "balance", "box")
    return choice == "tissue" or (choice == "auto" and not grid.gpu)


def node_counts(cfg) -> np.ndarray:
    """Nodes per dimension (x first): size/spacing + 1 on the vertex-centred grid, size/spacing volumes on the
    microscopic model's cell-centred one."""
    extra = 0 if cfg.tissue.model == "microscopic" else 1
    return np.array([int(round(L / h)) + extra for L, h in zip(cfg.grid.size, cfg.grid.spacing)])


def _mpi_lor():
    from mpi4py import MPI
    return MPI.LOR

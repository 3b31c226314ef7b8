"""Geometric multigrid for the grid's matrices, as a PETSc preconditioner: the resident placement's default, on one
GPU or several (docs/decisions/0017-own-stencil-cg-and-multigrid.md,
docs/decisions/0018-stencil-solvers-on-several-ranks.md).

Why not PETSc's PCMG there: on the GPU its V-cycle is a few hundred PETSc operations per CG iteration, each with
~15 µs of host latency, so the elliptic solve costs 26–44 ms per step at 1025² where the bytes moved need ~6 ms
(docs/decisions/0017-own-stencil-cg-and-multigrid.md). Here the whole V-cycle is one C call (kernels/stencil_mg.cpp)
that issues a few dozen
kernels; on the CPU the same source, built with g++, runs the same arithmetic in loops (CI tests it there, and the
GPU tests compare the two).

The hierarchy is built once, on the host, from the matrix A's stencil (the stencil matrix of
cardiosim.solvers.stencil_matrix, or the rows of any assembled matrix that couple each grid node to its 3^d
neighbours at most: the box and star stencils, microscopic per-face conductances):
  coarse points   per dimension the even indices and the last one (any size coarsens; the last coarse interval
                  may be one fine interval), until at most ``coarse_max`` nodes are left or nothing coarsens;
  transfers       P = ⊗_d P_d (linear interpolation per dimension), R = Pᵀ;
  coarse matrices Galerkin products PᵀAP, formed on the stencils dimension by dimension (cardiosim.solvers.galerkin);
  coarsest solve  the dense inverse — the pseudo-inverse where A has a null space (the elliptic system: its
                  constant null space is also PᵀAP's, since P reproduces constants).
Smoother: multicolour SOR, one forward sweep before and one backward sweep after the coarse correction (``sweeps``
each), relaxation factor ``omega``: a symmetric V-cycle, as CG needs.

Masked grids (tissue in a box, cardiosim.domain.mask): the rows outside the tissue couple to nothing, and the loops visit
each level's active nodes only (docs/decisions/0031-tissue-only-stencil-solves.md): level 0's are the rows that
couple to another node (galerkin.coupled), a coarser level's those whose restriction support holds an active finer
node (:func:`coarse_active`), and the coarse operators' couplings that touch an inactive node are lumped onto the
diagonals (galerkin.lump), so an inactive row is a diagonal alone on every level and every skipped value is the
zero the box computes. Level 0's inactive rows are solved on their own (x = b / d) where a result leaves.

Options, under the solver's prefix (e.g. ``-elliptic_``): ``smg_omega`` (default 1.0), ``smg_sweeps`` (1),
``smg_finest_sweeps`` (level 0's, where they differ: 0, the default, is smg_sweeps),
``smg_coarse_max`` (1024 nodes), ``smg_graphs`` (true: the GPU build applies the V-cycle as a CUDA graph, and on
one rank runs a whole CG solve as one, its iterations a device loop),
``smg_coarse_solve`` (eig: the coarsest inverse from an eigendecomposition on the host; gauss-jordan: by
Gauss–Jordan elimination on the device), ``smg_active`` (true: on a masked grid the active nodes only; false: every
node of the box, the same values, for comparisons). Select it with ``-elliptic_pc_type python -elliptic_pc_python_type
cardiosim.solvers.multigrid.StencilMG`` (the resident placement does so).

Several ranks (:class:`RankHierarchy`): every level is split into the DMDA's boxes, coarsened with the grid, with
halo exchanges in the V-cycle, down to a level of fewer than ``smg_agglomerate`` nodes per rank (default
AGGLOMERATE), which is gathered onto rank 0 and solved there by the serial hierarchy of it. Options:
``smg_layout`` (auto | ranks | root: split, or the whole solve on rank 0; auto by size), ``smg_transport``
(auto | ipc | mpi-host), ``smg_halo`` (sweep, the default: one exchange per sweep, the hybrid smoother; colour:
one per colour, exactly the serial smoother),
``smg_agglomerate``. cardiosim.solvers.comm holds the decomposition and the choices.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from petsc4py import PETSc

from cardiosim.runtime.compile import compile_once, compiler_version, files_digest, kernel_dir, library_path
from cardiosim.runtime.gpu import current_arch
from cardiosim.solvers import comm, galerkin, nullspace
from cardiosim.solvers.comm import Boxes
from cardiosim.solvers.linear import on_device, sync_host

# the solvers here work on the whole grid of a DMDA; a masked grid's systems on its tissue rows have none
NO_GRID_HINT = " (cardiosim's stencil solvers need the whole grid: for a masked grid, tissue.solve_on = \"box\")"


def grid_dm(dm, who: str):
    """``dm`` (a KSP's or PC's DM) where it is a DMDA; else ValueError naming ``who``. A solver without a DM gives a
    null handle, which must not be asked its type (that crashed)."""
    if dm is None or not dm.handle or dm.getType() != PETSc.DM.Type.DA:
        raise ValueError(f"{who}: the solver has no DMDA grid" + NO_GRID_HINT)
    return dm

SOURCE = "stencil_mg.cpp"
COARSE_SOLVES = ("eig", "gauss-jordan")
HALOS = ("sweep", "colour")     # several ranks: the smoother's ghosts refreshed per sweep (default) or colour (exact)
PYTHON_TYPE = "cardiosim.solvers.multigrid.StencilMG"


# --- the hierarchy (host, NumPy + PETSc) -----------------------------------------------------------------------

def coarse_points(n: int) -> np.ndarray:
    """Fine indices kept on the coarser grid: the even ones and the last; a dimension of 1 or 2 nodes stays."""
    if n <= 2:
        return np.arange(n)
    pos = np.arange(0, n, 2)
    return pos if pos[-1] == n - 1 else np.append(pos, n - 1)


def transfer_1d(n: int) -> dict[str, np.ndarray]:
    """Linear interpolation from ``coarse_points(n)`` to 0..n-1, as the tables kernels/stencil_mg.cpp reads:
    prolongation per fine index (c0, w0, c1, w1), restriction per coarse index (pos, wl, wr)."""
    pos = coarse_points(n)
    i = np.arange(n)
    c0 = np.searchsorted(pos, i, side="right") - 1              # the coarse point at or left of i
    on = pos[c0] == i
    c1 = np.where(on, c0, np.minimum(c0 + 1, len(pos) - 1))
    gap = (pos[c1] - pos[c0]).astype(float)
    w1 = np.where(on, 0.0, (i - pos[c0]) / np.where(on, 1.0, gap))
    w0 = 1.0 - w1
    # Pᵀ: the fine neighbours of a coarse point that interpolate from it (never another coarse point: gaps ≤ 2)
    P = np.zeros((n, len(pos)))
    P[i, c0] += w0
    P[i, c1] += w1
    fine_only = np.ones(n, dtype=bool)
    fine_only[pos] = False
    wl = np.array([P[p - 1, c] if p > 0 and fine_only[p - 1] else 0.0 for c, p in enumerate(pos)])
    wr = np.array([P[p + 1, c] if p < n - 1 and fine_only[p + 1] else 0.0 for c, p in enumerate(pos)])
    return {"c0": c0.astype(np.int32), "c1": c1.astype(np.int32), "w0": w0, "w1": w1,
            "pos": pos.astype(np.int32), "wl": wl, "wr": wr}


def coarse_active(active: np.ndarray, tables: list[dict]) -> np.ndarray:
    """The active nodes of the next coarser level: those whose restriction support (the fine nodes that interpolate
    from them) holds an active node of ``active`` (a whole level, (z, y, x)). Per dimension, since the support is
    the product of the 1D ones: the coarse point itself and a fine neighbour where the table weighs it."""
    out = active
    for d, t in enumerate(tables):
        axis, pos = 2 - d, t["pos"]
        n = out.shape[axis]
        shape = [1, 1, 1]
        shape[axis] = len(pos)
        new = np.take(out, pos, axis=axis)
        new |= np.take(out, np.maximum(pos - 1, 0), axis=axis) & (t["wl"] != 0).reshape(shape)
        new |= np.take(out, np.minimum(pos + 1, n - 1), axis=axis) & (t["wr"] != 0).reshape(shape)
        out = new
    return out


class Hierarchy:
    """Levels (sizes, stencils), per-level transfer tables and the coarsest dense (pseudo-)inverse of matrix A on a
    grid of sizes ``dims`` (x[, y[, z]]), all on the host."""

    why = ""            # one rank: no layout to explain (RankHierarchy says where it solves and why)

    def __init__(self, A: PETSc.Mat, dims, coarse_max: int | None = 1024, singular: int = 0):
        """``coarse_max`` None: the fine level only (no coarse levels, no inverse: for Jacobi-preconditioned CG)."""
        sizes = tuple(int(n) for n in dims) + (1,) * (3 - len(dims))
        whole = Boxes.whole(sizes)
        self._build(galerkin.of_matrix(A, whole, 0), len(dims), sizes, coarse_max, singular)

    @classmethod
    def of_stencil(cls, S: galerkin.Stencil, dims, coarse_max: int | None, singular: int,
                   active: np.ndarray | None = None) -> "Hierarchy":
        """The hierarchy of a level given as its stencil on the whole grid (cardiosim.solvers.galerkin): the top
        level a RankHierarchy gathered onto rank 0, with that level's active nodes (None: none inactive)."""
        h = cls.__new__(cls)
        h._build(S, len(dims), tuple(int(n) for n in dims) + (1,) * (3 - len(dims)), coarse_max, singular,
                 active if active is not None else np.ones(tuple(int(n) for n in dims)[::-1], dtype=bool))
        return h

    def _build(self, S: galerkin.Stencil, dim: int, sizes: tuple, coarse_max: int | None, singular: int,
               active: np.ndarray | None = None) -> None:
        """``active``: level 0's active nodes, (z, y, x); None: its rows that couple to another node."""
        self.dim = dim
        self.sizes = [sizes]
        self.stencils, self.codes = [], []      # per level: the rows in the V-cycle's codes, the codes it reads
        self._add(S)
        self.transfers: list[list[dict]] = []
        if active is None:
            active = galerkin.coupled(S).reshape(sizes[::-1])
            if galerkin.reaches_inactive(S, active, (0, 0, 0), sizes):
                active = np.ones_like(active)
        # per level the active nodes ((z, y, x), natural order), or None where every node is active
        self.active = None if active.all() else [active]
        while coarse_max is not None and np.prod(self.sizes[-1]) > coarse_max:
            fine = self.sizes[-1]
            tables = [transfer_1d(n) for n in fine]
            coarse = tuple(len(t["pos"]) for t in tables)
            if coarse == fine:
                break
            S = galerkin.coarsen(S, (0, 0, 0), fine, tables, (0, 0, 0), coarse)
            if self.active is not None:
                self.active.append(coarse_active(self.active[-1], tables))
                S = galerkin.lump(S, self.active[-1], (0, 0, 0), coarse)
            self.transfers.append(tables)
            self.sizes.append(coarse)
            self._add(S)
        self.singular = singular
        self.coarse_matrix = None if coarse_max is None else galerkin.dense(S, self.sizes[-1])
        self._inverse = None

    def _add(self, S: galerkin.Stencil) -> None:
        rows, codes = galerkin.planar(S, self.dim)
        self.stencils.append(rows)
        self.codes.append(codes)

    @property
    def starts(self) -> list[tuple[int, int, int]]:
        """Each level's first owned node: one rank owns every level whole."""
        return [(0, 0, 0)] * self.levels

    def owned_active(self, l: int) -> np.ndarray:
        """Level l's active flags of the nodes this rank owns, in their order (x fastest)."""
        return self.active[l].ravel()

    @property
    def coarse_inverse(self) -> np.ndarray | None:
        """The coarsest operator's (pseudo-)inverse from its eigendecomposition on the host (computed when first
        asked: the Gauss–Jordan alternative computes it on the device instead)."""
        if self._inverse is None and self.coarse_matrix is not None:
            self._inverse = self.eig_inverse(self.coarse_matrix, self.singular)
        return self._inverse

    def coarse_system(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """The coarsest operator the V-cycle's dense solve inverts, and the nodes it covers (None: all of them). On
        a masked grid those are the coarsest level's active nodes alone: an inactive node's row is a diagonal alone
        whose right-hand side stays zero, so leaving it out changes no value, and the dense product shrinks with the
        tissue (the LV at 0.025 cm: 57 % of 2,016 nodes, a third of the bytes)."""
        if self.coarse_matrix is None or self.active is None:
            return self.coarse_matrix, None
        keep = np.flatnonzero(self.owned_active(self.levels - 1)).astype(np.int32)
        return np.ascontiguousarray(self.coarse_matrix[np.ix_(keep, keep)]), keep

    @staticmethod
    def eig_inverse(dense: np.ndarray, singular: int) -> np.ndarray:
        """The inverse of ``dense``; where ``singular`` (the fine operator's null-space dimension, or True for the
        constants alone), the pseudo-inverse without its ``singular`` smallest eigenvalues and any below 1e-10 of
        the largest. Counted, not only cut off: on a masked grid the coarse operator's modes of the fine null
        space (a constant per piece of tissue) are not null but ~1e-6 of the largest, from the outside rows'
        diagonal the lumping moves onto the tissue's border (OUTSIDE_DIAGONAL, cardiosim.tissue.equations), and
        inverted they made the V-cycle amplify a piece's constant 2.6e5-fold: CG's round-off there then grew
        until it stopped as indefinite (a 2D ring, the masked bidomain's elliptic system)."""
        lam, V = np.linalg.eigh(dense)             # ascending
        if singular:
            keep = lam > 1e-10 * lam.max()
            keep[:int(singular)] = False
            lam, V = lam[keep], V[:, keep]
        elif lam.min() <= 0:
            raise ValueError("multigrid: the coarsest operator is not positive definite")
        return np.ascontiguousarray((V / lam) @ V.T)

    @property
    def levels(self) -> int:
        return len(self.sizes)


def _lor():
    from mpi4py import MPI
    return MPI.LOR


AGGLOMERATE = 500_000   # nodes per rank below which a level goes to rank 0: its ~19 exchanges per V-cycle (~20 µs each
                        # by IPC) would cost more than the half of its sweeps they save
                        # (docs/decisions/0018-stencil-solvers-on-several-ranks.md)


class RankHierarchy:
    """The levels of a matrix on a DMDA split over several ranks: each rank's box of every level (the DMDA's boxes,
    coarsened with the grid: cardiosim.solvers.comm.Boxes), its stencil and transfer tables, down to the top level
    that is gathered onto rank 0, where a serial :class:`Hierarchy` of it (``tail``) continues the V-cycle.

    Coarse operators are Galerkin products PᵀAP formed on each rank's stencils with one ghost layer of the
    neighbours' rows (cardiosim.solvers.galerkin). A level becomes the top when a rank's box would get thinner than
    2 nodes, when it has fewer than ``agglomerate`` nodes per rank, or when it has at most ``coarse_max`` nodes.
    ``root_only``: level 0 is the top (the whole solve on rank 0). ``coarse_max`` None: level 0 only and no tail
    unless ``root_only`` (Jacobi-preconditioned CG). ``why``: the layout's reason, for the run header
    (cardiosim.solvers.comm.layout)."""

    def __init__(self, A: PETSc.Mat, da, coarse_max: int | None = 1024, singular: int = 0,
                 agglomerate: int = AGGLOMERATE, root_only: bool = False, why: str = ""):
        self.comm = A.getComm()
        self.why = why
        rank = self.comm.getRank()
        self.dim = da.getDim()
        self.singular = singular
        self.root_only = root_only
        self.gathers = coarse_max is not None or root_only      # a top level that rank 0 solves
        self.coarse_matrix = None
        boxes = Boxes.of_dmda(da)
        S = galerkin.of_matrix(A, boxes, rank)
        self.boxes, self.sizes, self.starts, self.stencils, self.codes, self.transfers = [], [], [], [], [], []
        # the active nodes of each level, whole on every rank ((z, y, x); None: all active): the rows that couple
        # to another node on level 0, coarsened by the restriction's support (a byte per node, as the label image
        # the mask came from; what a rank needs of them, its box and one ghost layer, is cut from it)
        active = self._whole_level(galerkin.coupled(S), boxes)
        start, size = boxes.box(rank)
        bad = galerkin.reaches_inactive(S, active, start, size)
        self.active = None if self.comm.tompi4py().allreduce(bad or active.all(), op=_lor()) else [active]
        while True:
            start, size = boxes.box(rank)
            self.boxes.append(boxes)
            self.sizes.append(tuple(int(v) for v in size))
            self.starts.append(tuple(int(v) for v in start))
            rows, codes = galerkin.planar(S, self.dim)
            self.stencils.append(rows)
            self.codes.append(codes)
            total = int(np.prod(boxes.n))
            if (root_only or coarse_max is None or total <= coarse_max or boxes.smallest(self.dim) < 2
                    or total < agglomerate * boxes.nranks):
                break
            tables = [transfer_1d(n) for n in boxes.n]
            coarse = boxes.coarsen([t["pos"] for t in tables])
            if coarse.n == boxes.n:
                break
            cstart, csize = coarse.box(rank)
            Sg, gstart, gsize = galerkin.ghosted(S, boxes, rank, self.comm, self.dim)
            S = galerkin.coarsen(Sg, gstart, gsize, tables, cstart, csize)
            del Sg
            if self.active is not None:
                self.active.append(coarse_active(self.active[-1], tables))
                S = galerkin.lump(S, self.active[-1], cstart, csize)
            self.transfers.append([self._local_tables(tables[d], start[d], size[d], cstart[d], csize[d])
                                   for d in range(3)])
            boxes = coarse
        self.tail = self._gather_top(S, boxes, rank, coarse_max, singular, root_only)

    @staticmethod
    def _local_tables(t: dict, fs: int, fn: int, cs: int, cn: int) -> dict:
        """A dimension's transfer tables in this rank's coordinates (-1 and n: the ghost layers)."""
        return {"c0": (t["c0"][fs:fs + fn] - cs).astype(np.int32), "c1": (t["c1"][fs:fs + fn] - cs).astype(np.int32),
                "w0": t["w0"][fs:fs + fn], "w1": t["w1"][fs:fs + fn],
                "pos": (t["pos"][cs:cs + cn] - fs).astype(np.int32), "wl": t["wl"][cs:cs + cn],
                "wr": t["wr"][cs:cs + cn]}

    def _gather_top(self, S, boxes, rank, coarse_max, singular, root_only):
        """Rank 0: the serial hierarchy of the top level (its stencil gathered in natural order); elsewhere None."""
        if coarse_max is None and not root_only:
            return None
        parts = self.comm.tompi4py().gather(S.S, root=0)
        if rank != 0:
            return None
        whole = np.zeros((galerkin.NCODES, int(np.prod(boxes.n))))
        nat = np.arange(int(np.prod(boxes.n))).reshape(tuple(boxes.n[::-1]))
        for r, part in enumerate(parts):
            (i0, j0, k0), (ni, nj, nk) = boxes.box(r)
            whole[:, nat[k0:k0 + nk, j0:j0 + nj, i0:i0 + ni].ravel()] = part
        return Hierarchy.of_stencil(galerkin.Stencil.of(whole), boxes.n[:self.dim], coarse_max, singular,
                                    None if self.active is None else self.active[len(self.sizes) - 1])

    def _whole_level(self, local: np.ndarray, boxes: Boxes) -> np.ndarray:
        """Every rank's flags of its box of ``boxes`` (flat, x fastest) as the whole level, (z, y, x), on every
        rank."""
        out = np.zeros(tuple(boxes.n[::-1]), dtype=bool)
        for r, part in enumerate(self.comm.tompi4py().allgather(local)):
            (i0, j0, k0), (ni, nj, nk) = boxes.box(r)
            out[k0:k0 + nk, j0:j0 + nj, i0:i0 + ni] = part.reshape(nk, nj, ni)
        return out

    def owned_active(self, l: int) -> np.ndarray:
        """Level l's active flags of the nodes this rank owns, in their order (x fastest)."""
        (i0, j0, k0), (ni, nj, nk) = self.starts[l], self.sizes[l]
        return self.active[l][k0:k0 + nk, j0:j0 + nj, i0:i0 + ni].ravel()

    @property
    def levels(self) -> int:
        return len(self.sizes)

    def describe(self) -> str:
        """e.g. "2 ranks: 2 levels 626x313 > 313x157, then on rank 0: 8 levels 157x79 > ... > 5x3"."""
        own = " > ".join("x".join(map(str, b.n[:self.dim])) for b in self.boxes)
        tail = "" if self.tail is None else (" > ".join("x".join(map(str, s[:self.dim])) for s in self.tail.sizes))
        return (f"{self.boxes[0].nranks} ranks: {self.levels} level(s) {own}"
                + (f"; rank 0 alone: {self.tail.levels} level(s) {tail}" if self.tail is not None else ""))


# --- the compiled V-cycle ----------------------------------------------------------------------------------------

def _mpicc_candidates() -> list[str]:
    """Where the compiler wrapper of mpi4py's MPI may be: $MPICC (what tools/bootstrap.sh built mpi4py with),
    mpi4py's own record of it, the one beside this Python (MPICH from PyPI in .venv), the one on PATH."""
    out = [os.environ.get("MPICC", "")]
    try:
        import mpi4py
        out.append(mpi4py.get_config().get("mpicc", ""))
    except ImportError:
        pass
    out += [str(Path(sys.executable).parent / "mpicc"), "mpicc"]
    return [c for c in out if c]


def mpi_flags(for_nvcc: bool) -> list[str]:
    """The include and link flags of the MPI that mpi4py uses (its mpicc's ``-show``, MPICH, or ``--showme``, Open
    MPI), for the stencil library, which calls MPI itself (the halo exchange, cardiosim.solvers.comm). nvcc takes
    linker flags as -Xlinker."""
    out = ""
    for mpicc in _mpicc_candidates():
        for flag in ("-show", "--showme"):
            try:
                out = subprocess.run([mpicc, flag], capture_output=True, text=True, check=True).stdout
                break
            except (OSError, subprocess.CalledProcessError):
                continue
        if out:
            break
    if not out:
        raise RuntimeError(f"multigrid: no MPI compiler wrapper answers -show/--showme (tried "
                           f"{', '.join(_mpicc_candidates())}); set MPICC to the mpicc of mpi4py's MPI")
    flags = []
    for tok in out.split()[1:]:
        if tok.startswith(("-I", "-L", "-l")):
            flags.append(tok)
        elif tok.startswith("-Wl,") and for_nvcc:
            flags.append("-Xlinker=" + tok[4:])
        elif tok.startswith("-Wl,") or tok == "-pthread":
            flags.append(tok)
    return flags


def source_files(src: Path) -> list[Path]:
    """``src`` and every file it includes with ``#include "..."`` (beside the including file; recursively, each once,
    in the order found): the sources of its translation unit, kernels/stencil_mg.cpp's fragments in
    kernels/stencil_mg/. The one list of them: the build hash covers these (:func:`source_digest`)."""
    files = [src]
    for f in files:                                       # grows while it is read
        for line in f.read_text().splitlines():
            words = line.split('"')
            if len(words) >= 3 and "".join(words[0].split()) == "#include":
                inc = f.parent / words[1]
                if inc not in files:
                    files.append(inc)
    return files


def source_digest(src: Path) -> str:
    """SHA-256 of every file of ``src``'s translation unit (:func:`source_files`), each by its path relative to
    src's folder and its text: the sources' part of the compiled library's cache key."""
    return files_digest(source_files(src), src.parent)


def _build(gpu: bool) -> Path:
    """kernels/stencil_mg.cpp as a shared library (g++ for the host, nvcc for the GPU) linked to mpi4py's MPI,
    compiled once per machine into the cache (cardiosim.runtime.compile's rule)."""
    src = kernel_dir() / SOURCE
    if gpu:
        arch = current_arch()
        cmd = ["nvcc", "-x", "cu", "-O3", "-std=c++17", "--extended-lambda", f"-arch={arch}", "-shared",
               "-Xcompiler", "-fPIC", "-cudart", "shared"]
        version = ["nvcc", "--version"]
    else:
        cxx = os.environ.get("CXX", "g++")
        cmd = [cxx, "-x", "c++", "-O2", "-std=c++14", "-shared", "-fPIC"]
        version = [cxx, "--version"]
    v = compiler_version(version, f"multigrid: the compiler '{version[0]}'")
    mpi = mpi_flags(gpu)
    out = library_path(f"stencil_mg_{'cuda' if gpu else 'cpu'}", [source_digest(src), *cmd, *mpi, v])
    return compile_once(out, lambda tmp: [*cmd, str(src), "-o", tmp, *mpi], f"multigrid: compiling {SOURCE}")


_libs: dict[bool, ctypes.CDLL] = {}


def library(gpu: bool) -> ctypes.CDLL:
    if gpu not in _libs:
        importlib.import_module("mpi4py.MPI")    # MPI loaded and initialised before the library that calls it
        lib = ctypes.CDLL(str(_build(gpu)))
        p, i, d = ctypes.c_void_p, ctypes.c_int, ctypes.c_double
        lib.smg_create.argtypes, lib.smg_create.restype = [i, i, d, i], p
        lib.smg_level.argtypes, lib.smg_level.restype = [p, i, p, p, i, p, p], i
        lib.smg_comm.argtypes, lib.smg_comm.restype = [p, i, p, p, p, p, p, i, i, i], i
        lib.smg_stats.argtypes, lib.smg_stats.restype = [p, p], None
        lib.smg_time_seam.argtypes, lib.smg_time_seam.restype = [p, i, p], i
        lib.smg_halo_per_sweep.argtypes, lib.smg_halo_per_sweep.restype = [p, i], None
        lib.smg_cg.argtypes = [p, i, p, p, d, d, d, i, i, ctypes.POINTER(i), ctypes.POINTER(d), ctypes.POINTER(i)]
        lib.smg_cg.restype = i
        lib.smg_transfer.argtypes, lib.smg_transfer.restype = [p, i, i, i, i, p, p, p, p, p, p, p], i
        lib.smg_coarse.argtypes, lib.smg_coarse.restype = [p, p], i
        lib.smg_coarse_list.argtypes, lib.smg_coarse_list.restype = [p, ctypes.c_long, p], i
        lib.smg_coarse_gauss_jordan.argtypes, lib.smg_coarse_gauss_jordan.restype = [p, p, i], i
        lib.smg_coarse_get.argtypes, lib.smg_coarse_get.restype = [p, p], i
        lib.smg_apply.argtypes, lib.smg_apply.restype = [p, p, p], i
        lib.smg_active.argtypes, lib.smg_active.restype = [p, i, ctypes.c_long, p, ctypes.c_long, p], i
        lib.smg_matvec.argtypes, lib.smg_matvec.restype = [p, p, p], i
        lib.smg_combine.argtypes, lib.smg_combine.restype = [p, p, p, p, d, d, d, p], i
        lib.smg_deflate.argtypes, lib.smg_deflate.restype = [p, p, p, i, p, p, p, p, p, p, p], i
        lib.smg_apply_timed.argtypes, lib.smg_apply_timed.restype = [p, p, p, p], i
        lib.smg_destroy.argtypes, lib.smg_destroy.restype = [p], None
        lib.smg_use_graphs.argtypes, lib.smg_use_graphs.restype = [p, i], None
        lib.smg_jacobi.argtypes, lib.smg_jacobi.restype = [p, i, p], i
        lib.smg_sweeps.argtypes, lib.smg_sweeps.restype = [p, i, i], i
        lib.smg_set_block.argtypes, lib.smg_set_block.restype = [i], i
        _libs[gpu] = lib
    return _libs[gpu]


def jacobi_weights(S: np.ndarray, omega: float) -> np.ndarray:
    """Jacobi's weight per row of the stencil rows S (points x owned nodes): omega / a_ii, capped at
    1.9 / sum_j |a_ij| where a row's off-diagonal sum is large (rotated anisotropic stencils). The cap makes 2 W^-1 - A
    diagonally dominant, hence positive definite: the smoother converges in A's norm and the V-cycle stays a
    symmetric positive definite preconditioner for any operator (the reasoning of l1-Jacobi, hypre's BoomerAMG).

    A row that couples to nothing (a masked grid's node outside the tissue, on any level) gets 1 / a_ii: one sweep
    solves it, as SOR's does, so that a V-cycle visiting every node of the box (smg_active false) leaves those
    nodes what the tissue's visit leaves them, b / a_ii, and the two give the same iterates. (2 W^-1 - A stays
    positive there: 2 a_ii - a_ii.)"""
    diag = S[S.shape[0] // 2]
    l1 = np.abs(S).sum(axis=0)
    alone = l1 == np.abs(diag)
    with np.errstate(divide="ignore"):
        w = np.where(alone, 1.0 / diag, np.minimum(omega / diag, 1.9 / l1))
    return np.ascontiguousarray(np.where(l1 > 0, w, 0.0))


class VCycle:
    """A :class:`Hierarchy` (one rank) or :class:`RankHierarchy` (several) loaded into the compiled V-cycle, on the
    GPU (``gpu``) or the host. On several ranks rank 0 also holds the V-cycle of the serial tail (``tail``)."""

    def __init__(self, h: Hierarchy | RankHierarchy, gpu: bool, omega: float = 1.0, sweeps: int = 1,
                 graphs: bool = True, coarse: str = "eig", transport: str = "auto", halo: str = "sweep",
                 active: bool = True, jacobi_from: int = -1, jacobi_omega: float = 0.8, finest_sweeps: int = 0):
        """``coarse``: how the coarsest level's (pseudo-)inverse is computed: "eig" (eigendecomposition on the host)
        or "gauss-jordan" (Gauss–Jordan elimination in this build: on the device for the GPU). ``active``: where
        the hierarchy has inactive nodes (a masked grid), the loops visit each level's active nodes only (False:
        every node of the box, the same values). ``jacobi_from``: levels from this index (of the whole hierarchy)
        to the coarsest's parent are smoothed by Jacobi (:func:`jacobi_weights`, damping ``jacobi_omega``) instead
        of multicolour SOR (-1: none). ``finest_sweeps``: level 0's sweeps where they differ from ``sweeps``
        (0: the same)."""
        if coarse not in COARSE_SOLVES:
            raise ValueError(f"multigrid: smg_coarse_solve = '{coarse}'; allowed: {', '.join(COARSE_SOLVES)}")
        if not 0.0 < omega < 2.0:
            raise ValueError(f"multigrid: smg_omega = {omega} is outside (0, 2)")
        if sweeps < 1:
            raise ValueError(f"multigrid: smg_sweeps = {sweeps} must be at least 1")
        if finest_sweeps < 0:
            raise ValueError(f"multigrid: smg_finest_sweeps = {finest_sweeps} must be at least 1 (0: smg_sweeps)")
        if not jacobi_omega > 0.0:
            raise ValueError(f"multigrid: smg_jacobi_omega = {jacobi_omega} must be positive (the weights are capped "
                             f"where the operator needs less)")
        if halo not in HALOS:
            raise ValueError(f"multigrid: smg_halo = '{halo}'; allowed: {', '.join(HALOS)}")
        self.lib = library(gpu)
        self.gpu = gpu
        self.handle = None
        self.tail = None
        if isinstance(h, RankHierarchy) and h.tail is not None:
            # the tail's level 0 is the distributed hierarchy's top level
            tail_from = -1 if jacobi_from < 0 else max(0, jacobi_from - (h.levels - 1))
            self.tail = VCycle(h.tail, gpu, omega, sweeps, graphs, coarse, active=active, jacobi_from=tail_from,
                               jacobi_omega=jacobi_omega)
        self.handle = self.lib.smg_create(h.dim, h.levels, omega, sweeps)
        if not self.handle:
            raise RuntimeError("multigrid: smg_create failed")
        self.lib.smg_use_graphs(self.handle, int(graphs))
        err = self.lib.smg_sweeps(self.handle, 0, finest_sweeps) if finest_sweeps else 0
        for l, (sizes, start, S, codes) in enumerate(zip(h.sizes, h.starts, h.stencils, h.codes)):
            # only the stencil points the matrix uses (a star stencil: 5 of 9, 7 of 27): fewer bytes per sweep
            codes = np.union1d(codes, [S.shape[0] // 2]).astype(np.int32)          # and the centre, always
            if len(codes) < S.shape[0] or not S.flags["C_CONTIGUOUS"]:
                S = np.ascontiguousarray(S[codes])       # (every row: S as it is, not a copy of the box's stencil)
            n, o = np.array(sizes, dtype=np.int32), np.array(start, dtype=np.int32)
            err |= self.lib.smg_level(self.handle, l, n.ctypes.data, o.ctypes.data, len(codes), codes.ctypes.data,
                                      S.ctypes.data)
        # the share of each level's nodes (this rank's) that the loops visit
        self.active_share = [1.0] * h.levels
        if active and h.active is not None:
            for l in range(h.levels):
                flags = h.owned_active(l)
                act = np.flatnonzero(flags).astype(np.int32)
                out = np.flatnonzero(~flags).astype(np.int32)
                err |= self.lib.smg_active(self.handle, l, len(act), act.ctypes.data, len(out), out.ctypes.data)
                self.active_share[l] = len(act) / max(len(flags), 1)
        if jacobi_from >= 0:
            for l in range(jacobi_from, h.levels - 1):
                w = jacobi_weights(h.stencils[l], jacobi_omega)
                err |= self.lib.smg_jacobi(self.handle, l, w.ctypes.data)
        for l, tables in enumerate(h.transfers):
            for d, t in enumerate(tables):
                a = {k: np.ascontiguousarray(v) for k, v in t.items()}
                err |= self.lib.smg_transfer(self.handle, l, d, len(a["c0"]), len(a["pos"]),
                                             *(a[k].ctypes.data for k in ("c0", "c1", "w0", "w1", "pos", "wl", "wr")))
        coarse_system, keep = h.coarse_system() if isinstance(h, Hierarchy) else (None, None)
        if keep is not None:
            err |= self.lib.smg_coarse_list(self.handle, len(keep), keep.ctypes.data)
        if coarse_system is not None and coarse == "gauss-jordan":
            err |= self.lib.smg_coarse_gauss_jordan(self.handle, coarse_system.ctypes.data, int(h.singular))
        elif coarse_system is not None:
            G = np.ascontiguousarray(h.coarse_inverse if coarse_system is h.coarse_matrix else
                                     Hierarchy.eig_inverse(coarse_system, h.singular))
            err |= self.lib.smg_coarse(self.handle, G.ctypes.data)
        self.coarse_size = None if coarse_system is None else coarse_system.shape[0]
        self.ranks, self.transport = 1, None
        if isinstance(h, RankHierarchy):
            self.transport = comm.transport(transport, gpu, h.comm.tompi4py())
            top = h.boxes[-1]
            starts, sizes = top.all_boxes()
            P, n = np.array(top.P, dtype=np.int32), np.array(top.n, dtype=np.int32)
            err |= self.lib.smg_comm(self.handle, comm.fortran_handle(h.comm), P.ctypes.data, starts.ctypes.data,
                                     sizes.ctypes.data, n.ctypes.data, self.tail.handle if self.tail else None,
                                     int(h.root_only), int(h.gathers), int(self.transport == "ipc"))
            self.lib.smg_halo_per_sweep(self.handle, int(halo == "sweep"))
            self.ranks = top.nranks
        if err:
            self.destroy()
            raise RuntimeError("multigrid: out of memory (or a copy failed) while loading the hierarchy")

    def apply(self, b: int, x: int) -> None:
        """x = M b on raw addresses (device pointers for the GPU build)."""
        if self.lib.smg_apply(self.handle, b, x):
            raise RuntimeError("multigrid: a kernel launch failed")

    def matvec(self, x: int, y: int) -> None:
        """y = A x on raw addresses, A level 0's stencil (x's halo through the seam)."""
        if self.lib.smg_matvec(self.handle, x, y):
            raise RuntimeError("multigrid: a kernel launch or the halo exchange failed in a matrix product")

    def combine(self, x: int, w: int | None, d: int | None, alpha: float, beta: float, gamma: float, y: int) -> None:
        """y = alpha d∘x − A(beta x + gamma w) on raw addresses in one pass (w, d: None where unused)."""
        if self.lib.smg_combine(self.handle, x, w, d, alpha, beta, gamma, y):
            raise RuntimeError("multigrid: a kernel launch or the halo exchange failed in a matrix product")

    def deflate(self, v: int, w: list[int], u: list[int | None], m: int | None, out: int | None = None) -> None:
        """out = m∘v − Σ_j (w_j·v) u_j on raw addresses (out None: v itself; u_j None: the constants; m None: 1),
        up to 3 pairs, the sums on the device (smg_deflate)."""
        k = len(w)
        if not 1 <= k <= 3 or len(u) != k:
            raise ValueError("multigrid: deflate takes 1 to 3 pairs")
        pad = [None] * (3 - k)
        if self.lib.smg_deflate(self.handle, v, v if out is None else out, k, *w, *pad, *u, *pad, m):
            raise RuntimeError("multigrid: a kernel launch or reduction failed in deflate")

    def cg(self, precond: int, b: int, x: int, rtol: float, atol: float, dtol: float, maxit: int,
           zero_guess: bool) -> tuple[int, float, int]:
        """Preconditioned CG on level 0's matrix (kernels/stencil_mg.cpp smg_cg; precond 0 none, 1 Jacobi, 2 this
        V-cycle): (iterations, residual norm, PETSc's converged reason)."""
        its, rnorm, reason = ctypes.c_int(), ctypes.c_double(), ctypes.c_int()
        if self.lib.smg_cg(self.handle, precond, b, x, rtol, atol, dtol, maxit, int(zero_guess), ctypes.byref(its),
                           ctypes.byref(rnorm), ctypes.byref(reason)):
            raise RuntimeError("multigrid: a kernel launch or copy failed in CG")
        return its.value, rnorm.value, reason.value

    def coarse_inverse(self) -> np.ndarray:
        """The coarsest inverse as this V-cycle holds it (copied to the host)."""
        G = np.empty((self.coarse_size, self.coarse_size))
        if self.lib.smg_coarse_get(self.handle, G.ctypes.data):
            raise RuntimeError("multigrid: copying the coarse inverse failed")
        return G

    def profile(self, b: int, x: int, levels: int) -> np.ndarray:
        """x = M b, timed: ms[l, p] for level l's pre-smoothing, residual + restriction, prolongation,
        post-smoothing; ms[-1, 0] the coarsest solve. Synchronises: for benchmarks, not for solves."""
        ms = np.zeros(4 * levels)
        if self.lib.smg_apply_timed(self.handle, b, x, ms.ctypes.data):
            raise RuntimeError("multigrid: a kernel launch failed")
        return ms.reshape(levels, 4)

    def stats(self) -> dict:
        """What the communication seam did since the last call, on this rank (counters reset)."""
        out = np.zeros(6)
        self.lib.smg_stats(self.handle, out.ctypes.data)
        return {"exchanges": int(out[0]), "exchange_s": out[1], "gathers": int(out[2]), "gather_s": out[3],
                "bytes": int(out[4]), "host_bytes": int(out[5])}

    def time_seam(self, reps: int) -> tuple[float, float]:
        """Seconds per halo exchange of level 0 and per gather + scatter of the top level (collective; for
        cardiosim.bench.halo)."""
        out = np.zeros(2)
        if self.lib.smg_time_seam(self.handle, reps, out.ctypes.data):
            raise RuntimeError("multigrid: the seam failed while being timed")
        return float(out[0]), float(out[1])

    def destroy(self) -> None:
        if self.handle:
            self.lib.smg_destroy(self.handle)
            self.handle = None
        if self.tail is not None:            # after the handle: the distributed V-cycle points to it
            self.tail.destroy()
            self.tail = None


# --- the PETSc preconditioner ------------------------------------------------------------------------------------

@contextmanager
def addresses(gpu: bool, *vecs):
    """Raw addresses of PETSc vectors' data, for (Vec, mode) pairs (mode "r", "w" or "rw"): device memory
    (``getCUDAHandle``, no copies) for the GPU build, the host arrays otherwise."""
    if not gpu:
        yield [v.getArray(readonly=mode == "r").ctypes.data for v, mode in vecs]
        return
    handles = []
    try:
        for v, mode in vecs:
            handles.append(v.getCUDAHandle(mode))
        yield [int(h) for h in handles]
    finally:
        for (v, mode), h in zip(vecs, handles):
            v.restoreCUDAHandle(h, mode)


def hierarchy_for(A: PETSc.Mat, dm, coarse_max: int | None, singular: int, layout: str = "auto",
                  agglomerate: int = AGGLOMERATE) -> Hierarchy | RankHierarchy:
    """The hierarchy of A on the DMDA ``dm``: serial on one rank; on several split over the ranks or, by
    cardiosim.solvers.comm.layout, gathered onto rank 0 (its ``why`` says which and why)."""
    rows, nodes = A.getSize()[0], int(np.prod(dm.getSizes()))
    if rows != nodes:                   # the C code reads every node's row: a submatrix would be read out of bounds
        raise ValueError(f"multigrid: the matrix has {rows} rows and the grid {nodes} nodes" + NO_GRID_HINT)
    if A.getComm().getSize() == 1:
        return Hierarchy(A, dm.getSizes(), coarse_max, singular)
    where, why = comm.layout(layout, nodes, A.getComm().getSize())
    return RankHierarchy(A, dm, coarse_max, singular, agglomerate, root_only=where == "root", why=why)


def deflate(ops: VCycle, v: PETSc.Vec, pairs: list, m: PETSc.Vec | None = None,
            out: PETSc.Vec | None = None) -> None:
    """out = m∘v − Σ (w·v) u for the (w, u) ``pairs`` of Vecs (out None: v itself; u None: the constants; m None: 1,
    and m must be 1 wherever a w is not 0), through ``ops`` (a VCycle on their grid): the sums on the device, three
    pairs per pass (pieces of tissue are disjoint: pass after pass is the same as all at once)."""
    dst = v if out is None else out
    for first in range(0, len(pairs), 3):
        chunk = pairs[first:first + 3]
        src = v if first == 0 else dst
        mask = m if first == 0 else None
        reads = {}                                   # each Vec's address once, however often it appears
        for r in [src] + [w for w, _ in chunk] + [u for _, u in chunk] + [mask]:
            if r is not None and r.handle != dst.handle:
                reads.setdefault(r.handle, r)
        with addresses(ops.gpu, (dst, "rw" if src.handle == dst.handle else "w"),
                       *((r, "r") for r in reads.values())) as ptrs:
            at = dict(zip(reads, ptrs[1:]))
            at[dst.handle] = ptrs[0]
            ops.deflate(at[src.handle], [at[w.handle] for w, _ in chunk],
                        [None if u is None else at[u.handle] for _, u in chunk],
                        None if mask is None else at[mask.handle], out=ptrs[0])


class StencilProduct:
    """y = A x for a matrix on a DMDA, through the stencil library and its seam: on the GPU with the IPC transport
    no host copy and no PETSc VecScatter (whose halo goes through host memory where MPI is not CUDA-aware). The
    tissue models' right-hand sides use it wherever the stencil solvers run (cardiosim.tissue.equations.TissueModel._product).
    A's stencil is read once here (the one attached to it, else its rows); a later change of A's values is not seen
    (the tissue matrices do not change)."""

    def __init__(self, A: PETSc.Mat, dm, transport: str = "auto"):
        sync_host(A)
        self.gpu = on_device(A)
        self.ops = VCycle(hierarchy_for(A, grid_dm(dm, "stencil product"), None, False, "ranks"), self.gpu,
                          transport=transport)

    def mult(self, x: PETSc.Vec, y: PETSc.Vec) -> None:
        with addresses(self.gpu, (x, "r"), (y, "w")) as (xp, yp):
            self.ops.matvec(xp, yp)

    def combine(self, x: PETSc.Vec, w: PETSc.Vec | None, d: PETSc.Vec | None, alpha: float, beta: float,
                gamma: float, y: PETSc.Vec) -> None:
        """y = alpha d∘x − A(beta x + gamma w), one pass (w, d: None where unused)."""
        vecs = [(v, "r") for v in (x, w, d) if v is not None] + [(y, "w")]
        with addresses(self.gpu, *vecs) as ptrs:
            it = iter(ptrs)
            xp, wp, dp = next(it), next(it) if w is not None else None, next(it) if d is not None else None
            self.ops.combine(xp, wp, dp, alpha, beta, gamma, next(it))

    def deflate(self, v: PETSc.Vec, pairs: list, m: PETSc.Vec | None = None) -> None:
        """v = m∘v − Σ (w·v) u in place: :func:`deflate`."""
        deflate(self.ops, v, pairs, m)

    def destroy(self) -> None:
        self.ops.destroy()


class StencilMG:
    """PC type python context: the V-cycle on the PC's operator, on the grid of the PC's DM (a DMDA).

    GPU or host follows the matrix (cardiosim.solvers.linear.on_device): a cuSPARSE matrix or a stencil matrix of
    CUDA vectors (the resident placement) runs the GPU build on the vectors' device memory (``getCUDAHandle``: no
    host copies), any other the host build on the arrays."""

    def __init__(self):
        self.omega, self.sweeps, self.coarse_max, self.graphs, self.coarse = 1.0, 1, 1024, True, "eig"
        self.layout, self.agglomerate, self.transport, self.halo, self.why = "auto", AGGLOMERATE, "auto", "sweep", ""
        self.active, self.jacobi_from, self.jacobi_omega, self.finest_sweeps = True, -1, 0.8, 0
        self.vcycle: VCycle | None = None
        self.hierarchy: Hierarchy | RankHierarchy | None = None

    # -smg_<option> (PETSc options database, under the PC's prefix): (attribute, option, petsc4py getter)
    OPTIONS = (("omega", "omega", "getReal"), ("sweeps", "sweeps", "getInt"), ("coarse_max", "coarse_max", "getInt"),
               ("graphs", "graphs", "getBool"), ("coarse", "coarse_solve", "getString"),
               ("layout", "layout", "getString"), ("agglomerate", "agglomerate", "getInt"),
               ("transport", "transport", "getString"), ("halo", "halo", "getString"),
               ("active", "active", "getBool"), ("jacobi_from", "jacobi_from", "getInt"),
               ("jacobi_omega", "jacobi_omega", "getReal"), ("finest_sweeps", "finest_sweeps", "getInt"))

    def setFromOptions(self, pc):
        opts = PETSc.Options(pc.getOptionsPrefix() or "")
        for attr, option, getter in self.OPTIONS:
            setattr(self, attr, getattr(opts, getter)(f"smg_{option}", getattr(self, attr)))

    def setUp(self, pc):
        A, _ = pc.getOperators()
        dm = grid_dm(pc.getDM(), "multigrid")
        sync_host(A)                                # host values of a COO-assembled cuSPARSE matrix (PETSc defect)
        ns = nullspace.of(A)
        # any null space (the constants, or one constant per piece of masked tissue) makes the coarsest operator
        # singular or nearly so: its pseudo-inverse without as many modes (Hierarchy.eig_inverse), not an inverse
        # that divides by round-off
        singular = 0 if ns is None else 1 if ns is True else len(ns)
        if singular and self.coarse == "gauss-jordan" and ns is not True:
            raise ValueError("multigrid: smg_coarse_solve gauss-jordan handles the constant null space only; "
                             "masked tissue (one constant per piece) needs eig")
        self.destroy(pc)
        comm.check(self.layout, self.transport)
        self.hierarchy = hierarchy_for(A, dm, self.coarse_max, singular, self.layout, self.agglomerate)
        self.vcycle = VCycle(self.hierarchy, on_device(A), self.omega, self.sweeps,
                             self.graphs, self.coarse, self.transport, self.halo, self.active, self.jacobi_from,
                             self.jacobi_omega, self.finest_sweeps)
        self.why = ", ".join(w for w in (self.hierarchy.why, self.vcycle.transport,
                                         "halo per sweep" if self.halo == "sweep" and self.vcycle.ranks > 1 else "")
                             if w)

    def apply(self, pc, x, y):
        with addresses(self.vcycle.gpu, (x, "r"), (y, "w")) as (xp, yp):
            self.vcycle.apply(xp, yp)

    def view(self, pc, viewer):
        h = self.hierarchy
        if h is None:
            return
        if isinstance(h, RankHierarchy):
            viewer.printfASCII(f"  cardiosim stencil multigrid ({'GPU' if self.vcycle.gpu else 'host'}), "
                               f"{h.describe()} ({self.why})\n")
            return
        viewer.printfASCII(f"  cardiosim stencil multigrid ({'GPU' if self.vcycle.gpu else 'host'}): {h.levels} "
                           f"levels {' > '.join('x'.join(map(str, s[:h.dim])) for s in h.sizes)}, multicolour "
                           f"SOR omega {self.omega}"
                           + (f" (Jacobi from level {self.jacobi_from}, omega {self.jacobi_omega} capped)"
                              if 0 <= self.jacobi_from < h.levels - 1 else "")
                           + f", {self.sweeps} sweep(s)"
                           + (f" ({self.finest_sweeps} on level 0)" if self.finest_sweeps else "")
                           + ", dense coarse inverse\n")
        if h.active is not None:
            shares = " > ".join(f"{100 * a:.0f}%" for a in self.vcycle.active_share)
            viewer.printfASCII(f"  active nodes per level: {shares}" + ("" if self.active else " (smg_active "
                               "false: every node visited)") + "\n")

    def destroy(self, pc):
        if self.vcycle is not None:
            self.vcycle.destroy()
            self.vcycle = None

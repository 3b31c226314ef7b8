"""Geometric multigrid for the grid's matrices, as a PETSc preconditioner: the resident placement's default on one
GPU (docs/decisions.md, "Our own GPU multigrid").

Why not PETSc's PCMG there: on the GPU its V-cycle is a few hundred PETSc operations per CG iteration, each with
~15 µs of host latency, so the elliptic solve cost 26–44 ms per step at 1025² where the bytes moved need ~6 ms
(docs/benchmarks.md). Here the whole V-cycle is one C call (kernels/stencil_mg.cpp) that issues a few dozen
kernels; on the CPU the same source, built with g++, runs the same arithmetic in loops (CI tests it there, and the
GPU tests compare the two).

The hierarchy is built once, on the host, from the assembled matrix A (any matrix whose rows couple each grid node
to its 3^d neighbours at most: the box and star stencils, microscopic per-face conductances):
  coarse points   per dimension the even indices and the last one (any size coarsens; the last coarse interval
                  may be one fine interval), until at most ``coarse_max`` nodes are left or nothing coarsens;
  transfers       P = ⊗_d P_d (linear interpolation per dimension), R = Pᵀ;
  coarse matrices Galerkin products PᵀAP, by PETSc (MatPtAP on host matrices);
  coarsest solve  the dense inverse — the pseudo-inverse where A has a null space (the elliptic system: its
                  constant null space is also PᵀAP's, since P reproduces constants).
Smoother: multicolour SOR, one forward sweep before and one backward sweep after the coarse correction (``sweeps``
each), relaxation factor ``omega``: a symmetric V-cycle, as CG needs.

Options, under the solver's prefix (e.g. ``-elliptic_``): ``smg_omega`` (default 1.0), ``smg_sweeps`` (1),
``smg_coarse_max`` (1024 nodes), ``smg_graphs`` (true: the GPU build applies the V-cycle as a CUDA graph),
``smg_coarse_solve`` (eig: the coarsest inverse from an eigendecomposition on the host; gauss-jordan: by
Gauss–Jordan elimination on the device). Select it with ``-elliptic_pc_type python -elliptic_pc_python_type
cardiosim.solvers.multigrid.StencilMG`` (the resident placement does so on one rank).

One MPI rank only: the levels are the whole grid. Several ranks keep PETSc's PCMG (cardiosim.solvers.linear).
"""

from __future__ import annotations

import ctypes
import hashlib
import itertools
import os
import subprocess
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from petsc4py import PETSc

from ..compile import cache_dir, compile_once, kernel_dir
from ..gpu import current_arch

SOURCE = "stencil_mg.cpp"
COARSE_SOLVES = ("eig", "gauss-jordan")
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


def stencil(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, dims: tuple[int, int, int], dim: int) -> np.ndarray:
    """S[s, node] from the matrix entries (row, col, value) of a grid with sizes ``dims`` (x, y, z; natural order),
    s = (di+1) + 3(dj+1) + 9(dk+1) the neighbour's offset. Refuses entries beyond the 3^d neighbours."""
    nx, ny, _ = dims
    N = int(np.prod(dims))
    if min(dims[:dim]) >= 3:
        # Each neighbour's index offset col - row = di + nx (dj + ny dk) is distinct: decode it (no divisions)
        codes = np.arange(27 if dim == 3 else 9)
        di, dj, dk = codes % 3 - 1, (codes // 3) % 3 - 1, (codes // 9 - 1 if dim == 3 else 0 * codes)
        offsets = di + nx * (dj + ny * dk)
        order = np.argsort(offsets)
        d = cols - rows
        at = np.minimum(np.searchsorted(offsets[order], d), len(order) - 1)
        if not np.array_equal(offsets[order][at], d):
            raise ValueError("multigrid: the matrix couples nodes more than one grid step apart")
        S = np.zeros((len(codes), N))
        S[codes[order][at], rows] = vals
        return S

    def ijk(r):
        return r % nx, (r // nx) % ny, r // (nx * ny)

    ri, rj, rk = ijk(rows)
    ci, cj, ck = ijk(cols)
    di, dj, dk = ci - ri, cj - rj, ck - rk
    if max(np.abs(di).max(initial=0), np.abs(dj).max(initial=0), np.abs(dk).max(initial=0)) > 1:
        raise ValueError("multigrid: the matrix couples nodes more than one grid step apart")
    s = (di + 1) + 3 * (dj + 1) + (9 * (dk + 1) if dim == 3 else 0)
    S = np.zeros((27 if dim == 3 else 9, N))
    S[s, rows] = vals             # a CSR matrix has one entry per (row, column): no sums needed (np.add.at is slow)
    return S


def _triplets(csr) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(row, column, value) of each entry of a CSR matrix (indptr, columns, values)."""
    indptr, cols, vals = csr
    rows = np.repeat(np.arange(len(indptr) - 1), np.diff(indptr))
    return rows, cols.astype(np.int64), vals


def _csr(A: PETSc.Mat) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return _triplets(A.getValuesCSR())


def prolongation(tables: list[dict], fine: tuple, coarse: tuple) -> PETSc.Mat:
    """P = P_z ⊗ P_y ⊗ P_x as a host AIJ matrix (fine nodes × coarse nodes)."""
    nf, nc = int(np.prod(fine)), int(np.prod(coarse))
    rows, cols, vals = [], [], []
    fine_index = np.arange(nf).reshape(fine[::-1])
    for pick in itertools.product((0, 1), repeat=3):              # (x, y, z): c0/w0 or c1/w1 per dimension
        c = [tables[d]["c1" if pick[d] else "c0"] for d in range(3)]
        w = [tables[d]["w1" if pick[d] else "w0"] for d in range(3)]
        W = w[2][:, None, None] * w[1][None, :, None] * w[0][None, None, :]
        C = c[0][None, None, :] + coarse[0] * (c[1][None, :, None] + coarse[1] * c[2][:, None, None])
        keep = W != 0
        rows.append(fine_index[keep])
        cols.append(C[keep])
        vals.append(W[keep])
    rows, cols, vals = (np.concatenate(a) for a in (rows, cols, vals))
    order = np.lexsort((cols, rows))
    rows, cols, vals = rows[order], cols[order], vals[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=nf))]).astype(PETSc.IntType)
    return PETSc.Mat().createAIJ(size=(nf, nc), csr=(indptr, cols.astype(PETSc.IntType), vals),
                                 comm=PETSc.COMM_SELF)


class Hierarchy:
    """Levels (sizes, stencils), per-level transfer tables and the coarsest dense (pseudo-)inverse of matrix A on a
    grid of sizes ``dims`` (x[, y[, z]]), all on the host."""

    def __init__(self, A: PETSc.Mat, dims, coarse_max: int | None = 1024, singular: bool = False):
        """``coarse_max`` None: the fine level only (no coarse levels, no inverse: for Jacobi-preconditioned CG)."""
        self.dim = len(dims)
        sizes = tuple(int(n) for n in dims) + (1,) * (3 - len(dims))
        csr = A.getValuesCSR()
        rows, cols, vals = _triplets(csr)
        if len(rows) and rows.max() >= np.prod(sizes):
            raise ValueError("multigrid: the matrix is larger than the grid")
        self.sizes = [sizes]
        self.stencils = [stencil(rows, cols, vals, sizes, self.dim)]
        self.transfers: list[list[dict]] = []
        mats = [] if coarse_max is None else [
            PETSc.Mat().createAIJ(size=A.getSize(), csr=csr, comm=PETSc.COMM_SELF)]
        while coarse_max is not None and np.prod(self.sizes[-1]) > coarse_max:
            fine = self.sizes[-1]
            tables = [transfer_1d(n) for n in fine]
            coarse = tuple(len(t["pos"]) for t in tables)
            if coarse == fine:
                break
            P = prolongation(tables, fine, coarse)
            Ac = mats[-1].ptap(P)
            P.destroy()
            self.transfers.append(tables)
            self.sizes.append(coarse)
            self.stencils.append(stencil(*_csr(Ac), coarse, self.dim))
            mats.append(Ac)
        self.singular = singular
        self.coarse_matrix = None if coarse_max is None else self._dense(mats[-1])
        self._inverse = None
        for M in mats:
            M.destroy()

    @property
    def coarse_inverse(self) -> np.ndarray | None:
        """The coarsest operator's (pseudo-)inverse from its eigendecomposition on the host (computed when first
        asked: the Gauss–Jordan alternative computes it on the device instead)."""
        if self._inverse is None and self.coarse_matrix is not None:
            self._inverse = self.eig_inverse(self.coarse_matrix, self.singular)
        return self._inverse

    @staticmethod
    def _dense(Ac: PETSc.Mat) -> np.ndarray:
        rows, cols, vals = _csr(Ac)
        n = Ac.getSize()[0]
        dense = np.zeros((n, n))
        dense[rows, cols] = vals
        return np.ascontiguousarray(0.5 * (dense + dense.T))   # symmetric by construction, up to round-off

    @staticmethod
    def eig_inverse(dense: np.ndarray, singular: bool) -> np.ndarray:
        lam, V = np.linalg.eigh(dense)
        if singular:                               # the pseudo-inverse: leave out the (constant) null space
            keep = lam > 1e-10 * lam.max()
            lam, V = lam[keep], V[:, keep]
        elif lam.min() <= 0:
            raise ValueError("multigrid: the coarsest operator is not positive definite")
        return np.ascontiguousarray((V / lam) @ V.T)

    @property
    def levels(self) -> int:
        return len(self.sizes)


# --- the compiled V-cycle ----------------------------------------------------------------------------------------

def _build(gpu: bool) -> Path:
    """kernels/stencil_mg.cpp as a shared library (g++ for the host, nvcc for the GPU), compiled once per machine
    into the cache: hashed name, written to a temporary file and renamed under a lock, as the cell kernels are."""
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
    try:
        v = subprocess.run(version, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"multigrid: the compiler '{version[0]}' does not run ({e})") from e
    h = hashlib.sha256("\0".join([src.read_text(), *cmd, v]).encode()).hexdigest()[:20]
    out = cache_dir("native") / f"stencil_mg_{'cuda' if gpu else 'cpu'}_{h}.so"
    return compile_once(out, lambda tmp: [*cmd, str(src), "-o", tmp], f"multigrid: compiling {SOURCE}")


_libs: dict[bool, ctypes.CDLL] = {}


def library(gpu: bool) -> ctypes.CDLL:
    if gpu not in _libs:
        lib = ctypes.CDLL(str(_build(gpu)))
        p, i, d = ctypes.c_void_p, ctypes.c_int, ctypes.c_double
        lib.smg_create.argtypes, lib.smg_create.restype = [i, i, d, i], p
        lib.smg_level.argtypes, lib.smg_level.restype = [p, i, p, i, p, p], i
        lib.smg_cg.argtypes = [p, i, p, p, d, d, d, i, i, ctypes.POINTER(i), ctypes.POINTER(d), ctypes.POINTER(i)]
        lib.smg_cg.restype = i
        lib.smg_transfer.argtypes, lib.smg_transfer.restype = [p, i, i, i, i, p, p, p, p, p, p, p], i
        lib.smg_coarse.argtypes, lib.smg_coarse.restype = [p, p], i
        lib.smg_coarse_gauss_jordan.argtypes, lib.smg_coarse_gauss_jordan.restype = [p, p, i], i
        lib.smg_coarse_get.argtypes, lib.smg_coarse_get.restype = [p, p], i
        lib.smg_apply.argtypes, lib.smg_apply.restype = [p, p, p], i
        lib.smg_apply_timed.argtypes, lib.smg_apply_timed.restype = [p, p, p, p], i
        lib.smg_destroy.argtypes, lib.smg_destroy.restype = [p], None
        lib.smg_use_graphs.argtypes, lib.smg_use_graphs.restype = [p, i], None
        lib.smg_set_block.argtypes, lib.smg_set_block.restype = [i], i
        _libs[gpu] = lib
    return _libs[gpu]


class VCycle:
    """A :class:`Hierarchy` loaded into the compiled V-cycle, on the GPU (``gpu``) or the host."""

    def __init__(self, h: Hierarchy, gpu: bool, omega: float = 1.0, sweeps: int = 1, graphs: bool = True,
                 coarse: str = "eig"):
        """``coarse``: how the coarsest level's (pseudo-)inverse is computed: "eig" (eigendecomposition on the host)
        or "gauss-jordan" (Gauss–Jordan elimination in this build: on the device for the GPU)."""
        if coarse not in COARSE_SOLVES:
            raise ValueError(f"multigrid: smg_coarse_solve = '{coarse}'; allowed: {', '.join(COARSE_SOLVES)}")
        if not 0.0 < omega < 2.0:
            raise ValueError(f"multigrid: smg_omega = {omega} is outside (0, 2)")
        if sweeps < 1:
            raise ValueError(f"multigrid: smg_sweeps = {sweeps} must be at least 1")
        self.lib = library(gpu)
        self.gpu = gpu
        self.handle = self.lib.smg_create(h.dim, h.levels, omega, sweeps)
        if not self.handle:
            raise RuntimeError("multigrid: smg_create failed")
        self.lib.smg_use_graphs(self.handle, int(graphs))
        err = 0
        for l, (sizes, S) in enumerate(zip(h.sizes, h.stencils)):
            # only the stencil points the matrix uses (a star stencil: 5 of 9, 7 of 27): fewer bytes per sweep
            centre = S.shape[0] // 2
            codes = np.flatnonzero(np.any(S != 0, axis=1) | (np.arange(S.shape[0]) == centre)).astype(np.int32)
            S = np.ascontiguousarray(S[codes])
            n = np.array(sizes, dtype=np.int32)
            err |= self.lib.smg_level(self.handle, l, n.ctypes.data, len(codes), codes.ctypes.data, S.ctypes.data)
        for l, tables in enumerate(h.transfers):
            for d, t in enumerate(tables):
                a = {k: np.ascontiguousarray(v) for k, v in t.items()}
                err |= self.lib.smg_transfer(self.handle, l, d, len(a["c0"]), len(a["pos"]),
                                             *(a[k].ctypes.data for k in ("c0", "c1", "w0", "w1", "pos", "wl", "wr")))
        if h.coarse_matrix is not None and coarse == "gauss-jordan":
            err |= self.lib.smg_coarse_gauss_jordan(self.handle, h.coarse_matrix.ctypes.data, int(h.singular))
        elif h.coarse_matrix is not None:
            G = np.ascontiguousarray(h.coarse_inverse)
            err |= self.lib.smg_coarse(self.handle, G.ctypes.data)
        self.coarse_size = None if h.coarse_matrix is None else h.coarse_matrix.shape[0]
        if err:
            self.destroy()
            raise RuntimeError("multigrid: out of memory (or a copy failed) while loading the hierarchy")

    def apply(self, b: int, x: int) -> None:
        """x = M b on raw addresses (device pointers for the GPU build)."""
        if self.lib.smg_apply(self.handle, b, x):
            raise RuntimeError("multigrid: a kernel launch failed")

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

    def destroy(self) -> None:
        if self.handle:
            self.lib.smg_destroy(self.handle)
            self.handle = None


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


class StencilMG:
    """PC type python context: the V-cycle on the PC's operator, on the grid of the PC's DM (a DMDA).

    GPU or host follows the matrix: a cuSPARSE matrix (the resident placement) runs the GPU build on the vectors'
    device memory (``getCUDAHandle``: no host copies), any other the host build on the arrays."""

    def __init__(self):
        self.omega, self.sweeps, self.coarse_max, self.graphs, self.coarse = 1.0, 1, 1024, True, "eig"
        self.vcycle: VCycle | None = None
        self.hierarchy: Hierarchy | None = None

    def setFromOptions(self, pc):
        opts = PETSc.Options(pc.getOptionsPrefix() or "")
        self.omega = opts.getReal("smg_omega", self.omega)
        self.sweeps = opts.getInt("smg_sweeps", self.sweeps)
        self.coarse_max = opts.getInt("smg_coarse_max", self.coarse_max)
        self.graphs = opts.getBool("smg_graphs", self.graphs)
        self.coarse = opts.getString("smg_coarse_solve", self.coarse)

    def setUp(self, pc):
        A, _ = pc.getOperators()
        if A.getComm().getSize() > 1:
            raise ValueError("multigrid: cardiosim.solvers.multigrid.StencilMG runs on one rank; use -pc_type mg")
        dm = pc.getDM()
        if dm is None or dm.getType() != PETSc.DM.Type.DA:
            raise ValueError("multigrid: the solver has no DMDA grid")
        from ..operators import sync_host
        sync_host(A)                                # host values of a COO-assembled cuSPARSE matrix (PETSc defect)
        ns = A.getNullSpace()
        singular = bool(ns and ns.handle and ns.hasConstant())
        self.destroy(pc)
        self.hierarchy = Hierarchy(A, dm.getSizes(), self.coarse_max, singular)
        self.vcycle = VCycle(self.hierarchy, "cusparse" in A.getType().lower(), self.omega, self.sweeps,
                             self.graphs, self.coarse)

    def apply(self, pc, x, y):
        with addresses(self.vcycle.gpu, (x, "r"), (y, "w")) as (xp, yp):
            self.vcycle.apply(xp, yp)

    def view(self, pc, viewer):
        h = self.hierarchy
        if h is None:
            return
        viewer.printfASCII(f"  cardiosim stencil multigrid ({'GPU' if self.vcycle.gpu else 'host'}): {h.levels} "
                           f"levels {' > '.join('x'.join(map(str, s[:h.dim])) for s in h.sizes)}, multicolour "
                           f"SOR omega {self.omega}, {self.sweeps} sweep(s), dense coarse inverse\n")

    def destroy(self, pc):
        if self.vcycle is not None:
            self.vcycle.destroy()
            self.vcycle = None

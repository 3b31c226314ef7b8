"""The domain decomposition of a masked grid balanced by tissue nodes (``grid.balance``, docs/decisions.md).

PETSc's DMDA splits the box evenly, whatever is inside it: the idealised LV at 0.05 cm on 2 ranks split along z
gives one rank 11,054 tissue nodes and the other 15,002. Cells live only at tissue nodes (and, with tissue-only
solves, so do the linear systems' rows), so the work follows the tissue. Here the DMDA keeps PETSc's process grid
(m x n x p, as PETSc chooses it for the box) and the cuts between process columns move so that the ranks' tissue
counts are as even as the tensor-product boxes allow:

  one dimension   the cuts that minimise the largest rank's count (bisection on that count, each part taken as
                  wide as it may be), or the cuts nearest the even shares of the tissue along that axis, whichever
                  leaves the counts closer together;
  several         the same per dimension with the other dimensions' cuts fixed (each box count a vector over the
                  other dimensions' columns), a few rounds over the dimensions: the largest count never grows.

Every box keeps a minimum width per dimension (``min_width``): at least 2 nodes (one coarsening of cardiosim's own
multigrid, cardiosim.solvers.multigrid.RankHierarchy; PETSc's stencil width 1), and where PETSc's geometric
multigrid may run on the box (cardiosim.solvers.linear.mg_levels) 2^L + 1 nodes for the L levels that the even split
allows, so that every rank keeps at least two coarsest nodes per dimension: mg_levels checks the actual boxes
through :func:`coarsened` (PETSc's DMDACoarsenOwnershipRanges rule) and takes fewer levels where they do not.
"""

from __future__ import annotations

import numpy as np

BALANCES = ("auto", "tissue", "box")


def loads(weights: np.ndarray, ranges: list) -> np.ndarray:
    """Tissue count of each rank's box, rank order (x fastest, PETSc's): ``weights`` (z, y, x) over the whole grid,
    ``ranges`` per dimension (x first) the owned node counts of each process column."""
    w = weights
    dim = len(ranges)
    for d in range(dim):
        axis = w.ndim - 1 - d
        edges = np.concatenate([[0], np.cumsum(ranges[d])[:-1]]).astype(np.int64)
        w = np.add.reduceat(w, edges, axis=axis)
    return np.asarray(w).ravel()


def _profile(weights: np.ndarray, ranges: list, d: int) -> np.ndarray:
    """(n_d, columns): tissue count of each slice along dimension d in each column of the other dimensions' cuts."""
    dim = len(ranges)
    w = weights
    for e in range(dim):
        if e != d:
            edges = np.concatenate([[0], np.cumsum(ranges[e])[:-1]]).astype(np.int64)
            w = np.add.reduceat(w, edges, axis=w.ndim - 1 - e)
    w = np.moveaxis(w, w.ndim - 1 - d, 0)
    return w.reshape(w.shape[0], -1).astype(np.int64)


def _greedy(cum: np.ndarray, parts: int, width: int, bound: int) -> list[int] | None:
    """Widths of ``parts`` parts of the slices whose cumulative counts are ``cum`` (n + 1, columns), each at least
    ``width`` slices and at most ``bound`` in every column, each taken as wide as it may be; None if impossible."""
    n = cum.shape[0] - 1
    out, start = [], 0
    for j in range(parts):
        left = parts - j - 1
        if j == parts - 1:
            end = n
        else:
            hi = n - left * width                   # leave room for the others
            ok = np.all(cum[start + width:hi + 1] - cum[start] <= bound, axis=1)
            if not ok.size or not ok[0]:
                return None
            end = start + width + int(np.argmin(ok) if not ok.all() else ok.size) - 1
        if end - start < width or np.any(cum[end] - cum[start] > bound):
            return None
        out.append(end - start)
        start = end
    return out


def _nearest(cum: np.ndarray, parts: int, width: int) -> list[int] | None:
    """Widths whose cuts lie nearest the even shares of the total count (a single column's profile only)."""
    n = cum.shape[0] - 1
    total = cum[-1].sum()
    c = cum.sum(axis=1)
    cuts, prev = [0], 0
    for j in range(1, parts):
        lo, hi = prev + width, n - (parts - j) * width
        if lo > hi:
            return None
        target = total * j / parts
        cand = np.arange(lo, hi + 1)
        prev = int(cand[np.argmin(np.abs(c[cand] - target))])
        cuts.append(prev)
    cuts.append(n)
    widths = list(np.diff(cuts).astype(int))
    return widths if min(widths) >= width else None


def _split_dim(profile: np.ndarray, parts: int, width: int) -> list[int]:
    """The widths along one dimension minimising the largest box count (then its spread)."""
    n = profile.shape[0]
    cum = np.concatenate([np.zeros((1, profile.shape[1]), np.int64), np.cumsum(profile, axis=0)])
    lo, hi = 0, int(cum[-1].max())
    while lo < hi:                                   # the smallest feasible largest count
        mid = (lo + hi) // 2
        if _greedy(cum, parts, width, mid) is None:
            lo = mid + 1
        else:
            hi = mid
    cands = [_greedy(cum, parts, width, lo)]
    cands.append(_nearest(cum, parts, width))
    even = [n // parts + (1 if j < n % parts else 0) for j in range(parts)]   # PETSc's own split
    cands.append(even)

    def score(widths):
        edges = np.concatenate([[0], np.cumsum(widths)])
        box = cum[edges[1:]] - cum[edges[:-1]]
        return (int(box.max()), int(box.max() - box.min()))
    return min((c for c in cands if c is not None and min(c) >= width), key=score)


def split(weights: np.ndarray, procs, min_width) -> list[tuple[int, ...]]:
    """Owned node counts per process column, per dimension (x first), for the process grid ``procs`` (x first),
    balancing the count of ``weights`` (z, y, x; e.g. 1 at tissue nodes) over the boxes; every count at least
    ``min_width[d]``."""
    weights = np.asarray(weights, dtype=np.int64)
    dim = weights.ndim
    n = [weights.shape[dim - 1 - d] for d in range(dim)]
    procs = [int(p) for p in procs][:dim]
    if any(p * w > m for p, w, m in zip(procs, min_width, n)):
        raise ValueError(f"cannot split {n} nodes into {procs} boxes of at least {list(min_width)} nodes")
    ranges = [[m // p + (1 if j < m % p else 0) for j in range(p)] for m, p in zip(n, procs)]
    best = int(loads(weights, ranges).max())
    for _ in range(4):                               # rounds over the dimensions
        for d in range(dim):
            if procs[d] > 1:
                ranges[d] = _split_dim(_profile(weights, ranges, d), procs[d], int(min_width[d]))
        now = int(loads(weights, ranges).max())
        if now >= best and _ > 0:
            break
        best = min(best, now)
    return [tuple(int(v) for v in r) for r in ranges]


def coarsened(fine: list[int]) -> list[int]:
    """The node counts per process column of the next coarser DMDA (coarsening factor 2, not periodic, stencil width
    1), by the rule of PETSc's DMCoarsen for a DMDA (DMDACoarsenOwnershipRanges): near-even coarse columns, each
    boundary within one node of its fine boundary's half. A count below 1 means PETSc would refuse."""
    m = len(fine)
    remaining = 1 + (sum(fine) - 1) // 2
    out, startc, startf = [], 0, 0
    for i in range(m):
        want = -(-remaining // (m - i))
        if i < m - 1:
            nextf = startf + fine[i]
            while nextf // 2 < startc + want - 1:
                want -= 1
            while nextf // 2 > startc + want:
                want += 1
        out.append(want)
        startc += want
        startf += fine[i]
        remaining -= want
    return out

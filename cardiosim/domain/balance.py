"""The domain decomposition of a masked grid balanced by tissue nodes (``grid.balance``,
docs/decisions/0030-decomposition-balanced-by-tissue.md).

PETSc's DMDA splits the box evenly, whatever is inside it: the idealised LV at 0.05 cm on 2 ranks split along z
gives one rank 11,641 tissue nodes and the other 14,384. Cells live only at tissue nodes (and, with tissue-only
solves, so do the linear systems' rows), so the work follows the tissue. Here the DMDA keeps PETSc's process grid
(m x n x p, as PETSc chooses it for the box) and the cuts between process columns move so that the ranks' tissue
counts are as even as the tensor-product boxes allow:

  one dimension   the cuts that minimise the largest rank's count (bisection on that count, each part taken as
                  wide as it may be), or the cuts nearest the even shares of the tissue along that axis, whichever
                  leaves the counts closer together;
  several         the same per dimension with the other dimensions' cuts fixed (each box count a vector over the
                  other dimensions' columns), a few rounds over the dimensions: the largest count never grows.

Every box is at least 2 nodes wide (one coarsening of cardiosim's own multigrid,
cardiosim.solvers.multigrid.RankHierarchy, which stops splitting levels at a box thinner than 2; PETSc's stencil
width is 1). Where PETSc's geometric multigrid may run on the box (the elliptic system of a bidomain run solved on
the box: cardiosim.solvers.linear.mg_levels), every box also stays at least 2 nodes wide through the coarsenings of
the levels that the even split allows, by PETSc's rule for coarsening a DMDA's boxes (:func:`coarsened`): the
minimum width of a dimension grows until it does, and a dimension that cannot keeps the even split. mg_levels
checks the boxes it is given the same way (at least 1 node, what PETSc needs) and takes fewer levels where they do
not fit.
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


def _split_dim(profile: np.ndarray, parts: int, width: int, even: list[int]) -> list[int]:
    """The widths along one dimension minimising the largest box count (then its spread)."""
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
    cands.append(even)                               # PETSc's own split

    def score(widths):
        edges = np.concatenate([[0], np.cumsum(widths)])
        box = cum[edges[1:]] - cum[edges[:-1]]
        return (int(box.max()), int(box.max() - box.min()))
    return min((c for c in cands if c is not None and min(c) >= width), key=score)


def split(weights: np.ndarray, procs, box: list, levels: int = 1) -> list[tuple[int, ...]]:
    """Owned node counts per process column, per dimension (x first), for the process grid ``procs`` (x first),
    balancing the count of ``weights`` (z, y, x; e.g. 1 at tissue nodes) over the boxes. ``box``: PETSc's even
    split (the counts per column, x first). Every box is at least 2 nodes wide (fewer only where the even split is)
    and stays at least 2 wide through ``levels`` - 1 coarsenings of PETSc's geometric multigrid (:func:`keeps`); a
    dimension where no balanced split does keeps the even one."""
    weights = np.asarray(weights, dtype=np.int32 if np.size(weights) < 2 ** 31 else np.int64)   # sums fit
    dim = weights.ndim
    procs = [int(p) for p in procs][:dim]
    box = [[int(v) for v in r] for r in box]
    width = [min(2, min(r)) for r in box]
    fixed = [p == 1 for p in procs]
    while True:
        ranges = _split(weights, procs, box, width, fixed)
        bad = [d for d in range(dim) if not fixed[d] and not keeps(ranges[d], levels, 2)]
        if not bad:
            return [tuple(int(v) for v in r) for r in ranges]
        for d in bad:
            width[d] += 1
            fixed[d] = width[d] >= min(box[d])          # as narrow as the even split: take it


def _split(weights, procs, box, width, fixed) -> list[list[int]]:
    """:func:`split` for given minimum widths, the ``fixed`` dimensions keeping their even split: rounds of the best
    cuts per dimension with the others' fixed, while the largest box count falls."""
    ranges = [list(r) for r in box]
    best = int(loads(weights, ranges).max())
    for _ in range(8):
        for d in range(len(ranges)):
            if not fixed[d]:
                ranges[d] = _split_dim(_profile(weights, ranges, d), procs[d], width[d], box[d])
        now = int(loads(weights, ranges).max())
        if now >= best and _ > 0:
            break
        best = min(best, now)
    return ranges


def keeps(ranges: list[int], levels: int, least: int) -> bool:
    """Whether columns of ``ranges`` nodes stay at least ``least`` nodes wide through ``levels`` - 1 coarsenings
    (:func:`coarsened`)."""
    r = list(ranges)
    for _ in range(levels):
        if min(r) < least:
            return False
        r = coarsened(r)
    return True


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

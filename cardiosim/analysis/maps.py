"""Quantities derived from traces: activation times, action-potential durations and conduction velocity.

Activation time: the first upward crossing of a threshold (default 0 mV, as in the Niederer benchmark),
linearly interpolated between samples; NaN where the trace never crosses.

The per-node maps (:class:`ActivationMap`, :class:`APDMap`) are accumulated step by step during the run. Their
whole state is a few plain arrays of this rank's nodes: ``state()`` returns them, ``load_state()`` puts them back
(checkpoints), so that a resumed run continues exactly where it stopped.

On the CPU placements the maps are updated on the host every step (the "io" phase; the resident placement does it on
the device, cardiosim/reaction/ode/resident.py): a few NumPy compare passes over the nodes into preallocated bool arrays
select the nodes that cross something, and only those are computed on. A plain C loop over the nodes (gcc -O2,
ctypes) was tried and was 3x slower than this on 58,176 nodes (its data-dependent branches do not vectorise).
"""

from __future__ import annotations

import numpy as np


def activation_time(t: np.ndarray, v: np.ndarray, threshold: float = 0.0) -> float:
    """First upward crossing of ``threshold`` by the trace v(t), interpolated; NaN if none (ms, like t)."""
    v = np.asarray(v)
    above = v >= threshold
    if not above.any():
        return float("nan")
    i = int(np.argmax(above))
    if i == 0:
        return float(t[0])
    v0, v1 = v[i - 1], v[i]
    return float(t[i - 1] + (threshold - v0) / (v1 - v0) * (t[i] - t[i - 1]))


def conduction_velocity(x0: float, t0: float, x1: float, t1: float) -> float:
    """Speed between two activation points, in the units given (cm/ms ×10 = m/s)."""
    return abs(x1 - x0) / (t1 - t0)


class _Accumulator:
    """Plain named arrays, saved and restored whole (``_arrays`` names them). Checkpoints save a run's accumulators
    through :meth:`state`/:meth:`load_state`: per-node arrays over this rank's owned nodes (PETSc local order),
    stored in natural order, so a restart may use another number of ranks."""
    _arrays: tuple[str, ...] = ()

    def state(self) -> dict[str, np.ndarray]:
        """Copies of the arrays that make up the accumulator's state (this rank's nodes)."""
        return {name: getattr(self, name).copy() for name in self._arrays}

    def load_state(self, state: dict) -> None:
        """Restore what :meth:`state` returned (same nodes, same shapes)."""
        for name in self._arrays:
            mine = getattr(self, name)
            value = np.asarray(state[name], dtype=mine.dtype)
            if value.shape != mine.shape:
                raise ValueError(f"{type(self).__name__}.load_state: '{name}' has shape {value.shape}, "
                                 f"expected {mine.shape}")
            mine[...] = value


class ActivationMap(_Accumulator):
    """Per-node activation time, updated every PDE step: the first upward crossing of ``threshold`` (mV),
    linearly interpolated within the step; NaN until the node activates. A node above threshold at t = 0
    counts as activated at 0."""
    _arrays = ("time", "prev")

    def __init__(self, v0: np.ndarray, threshold: float):
        self.threshold = threshold
        self.time = np.where(v0 >= threshold, 0.0, np.nan)
        self.prev = v0.copy()
        self._derive()

    def _derive(self) -> None:
        # Derived from the saved arrays (not saved themselves): activated (time not NaN), and a bool
        # scratch buffer, so that a step allocates nothing of the size of the grid.
        self.activated = ~np.isnan(self.time)
        self.waiting = self.activated.size - int(np.count_nonzero(self.activated))   # nodes not yet activated
        self._mask = np.empty(self.time.shape, dtype=bool)

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self._derive()

    def update(self, t0: float, t1: float, v: np.ndarray) -> None:
        # The "io" phase of the CPU placements: two cheap passes over the nodes (v >= threshold, and
        # not yet activated), then the crossing test and the interpolation on the few nodes that pass them only.
        # Same arithmetic, element by element, as over all nodes: the same bits.
        thr, prev = self.threshold, self.prev
        if self.waiting == 0:                          # every node has activated: nothing left to find
            prev[:] = v
            return
        mask = self._mask
        np.greater_equal(v, thr, out=mask)
        np.greater(mask, self.activated, out=mask)     # bools: above threshold and not yet activated
        idx = np.flatnonzero(mask)
        if idx.size:
            p, vi = prev[idx], v[idx]
            up = p < thr
            if not up.all():
                idx, p, vi = idx[up], p[up], vi[up]
            frac = (thr - p) / (vi - p)
            self.time[idx] = t0 + frac * (t1 - t0)
            self.activated[idx] = True
            self.waiting -= idx.size
        prev[:] = v


class APDMap(_Accumulator):
    """Per-node action-potential duration of the first beat at ``level`` % repolarisation (APD90 by default).

    The beat starts at the node's activation time (``activation``, an :class:`ActivationMap`: the upward crossing
    of its threshold) and ends when V first falls below V_rest + (1 − level/100)·(V_peak − V_rest) after the
    peak: V_rest is the node's V at t = 0, V_peak the largest V sampled since activation. The crossing is
    linearly interpolated within the PDE step. This is the level of :mod:`cardiosim.analysis.biomarkers` (and of the
    Bondarenko and TT06 references); only the origin differs: the local activation time instead of the stimulus
    onset, which is what a tissue map needs. NaN until the node has repolarised.
    Call :meth:`update` after ``activation.update`` of the same step."""
    _arrays = ("v_rest", "v_peak", "repolarisation", "prev")

    def __init__(self, activation: ActivationMap, v0: np.ndarray, level: float):
        self.activation = activation
        self.level = level
        self.v_rest = v0.copy()
        self.v_peak = np.full(v0.shape, -np.inf)
        self.repolarisation = np.full(v0.shape, np.nan)
        self.prev = v0.copy()
        self._derive()

    def _derive(self) -> None:
        # Derived from the saved arrays (not saved themselves): repolarised (not NaN), the repolarisation level
        # of each node (mV), which changes only where V_peak does, and bool scratch buffers.
        self.repolarised = ~np.isnan(self.repolarisation)
        self._fraction = 1.0 - self.level / 100.0
        self._level = self.v_rest + self._fraction * (self.v_peak - self.v_rest)
        self._beating = np.empty(self.v_rest.shape, dtype=bool)
        self._mask = np.empty(self.v_rest.shape, dtype=bool)

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        self._derive()

    def update(self, t0: float, t1: float, v: np.ndarray) -> None:
        # The "io" phase of the CPU placements: a few compare passes over the nodes into preallocated
        # bools; V_peak, the level and the interpolation are then computed on the nodes that the compares select
        # only (those whose V rises above V_peak, those below their level): the same arithmetic, element by
        # element, as over all nodes, so the same bits.
        if self._fraction != 1.0 - self.level / 100.0:
            self._derive()                             # the level was changed since: every node's level with it
        beating, mask, v_peak, level, prev = self._beating, self._mask, self.v_peak, self._level, self.prev
        np.greater(self.activation.activated, self.repolarised, out=beating)   # bools: activated, not repolarised
        # V_peak = np.maximum(V_peak, V) where beating, on the nodes where it may write something else than V_peak:
        # not (V < V_peak) includes a NaN V and a tie (np.maximum returns its second operand: -0.0 for 0.0)
        np.less(v, v_peak, out=mask)
        np.greater(beating, mask, out=mask)
        idx = np.flatnonzero(mask)
        if idx.size:
            vp = np.maximum(v_peak[idx], v[idx])
            v_peak[idx] = vp
            vr = self.v_rest[idx]
            level[idx] = vr + self._fraction * (vp - vr)
        np.less(v, level, out=mask)
        mask &= beating
        idx = np.flatnonzero(mask)
        if idx.size:
            p, lv = prev[idx], level[idx]
            down = p >= lv
            if down.any():
                idx, p, lv = idx[down], p[down], lv[down]
                frac = (lv - p) / (v[idx] - p)
                self.repolarisation[idx] = t0 + frac * (t1 - t0)
                self.repolarised[idx] = True
        prev[:] = v

    @property
    def apd(self) -> np.ndarray:
        """Repolarisation minus activation time (ms); NaN where either is missing."""
        return self.repolarisation - self.activation.time


class HostMaps:
    """The activation and APD maps of a run updated together from the PETSc Vec of Vm (its host array); the
    resident placement's cardiosim.analysis.device.DeviceMaps has the same interface on the device."""

    def __init__(self, activation: ActivationMap, apd: APDMap):
        self.activation, self.apd = activation, apd

    def update(self, t0: float, t1: float, V) -> None:
        v = V.getArray(readonly=True)
        self.activation.update(t0, t1, v)
        self.apd.update(t0, t1, v)

    def download(self) -> None:   # the arrays are on the host already
        pass


def sample(field: np.ndarray, spacing, point) -> float:
    """Multilinear interpolation of a nodal field (natural shape [z,] [y,] x) at ``point`` (cm, x first).
    NaN if any contributing node is NaN."""
    idx, weights = [], []
    for d, x in enumerate(point):
        n = field.shape[field.ndim - 1 - d]
        s = min(max(x / spacing[d], 0.0), n - 1.0)
        i0 = min(int(np.floor(s)), n - 2) if n > 1 else 0
        f = s - i0
        idx.append((i0, min(i0 + 1, n - 1)))
        weights.append((1.0 - f, f))
    total = 0.0
    for corner in np.ndindex(*(2,) * len(point)):
        w = np.prod([weights[d][c] for d, c in enumerate(corner)])
        if w == 0.0:
            continue
        node = tuple(idx[d][c] for d, c in reversed(list(enumerate(corner))))
        total += w * field[node]
    return float(total)


def ecg_features(r) -> dict:
    """QRS and QT of a run (ms) from its maps, the usual proxies in simulation studies: QRS = total activation time
    (last minus first activation of the tissue), QT = last repolarisation (activation + APD) minus first activation.
    ``r``: a cardiosim.output.results.Results; {} where it has no activation map."""
    if "activation_time" not in r.maps:
        return {}
    act = r.map("activation_time")
    if "tissue" in r.maps:
        act = np.where(r.map("tissue") > 0, act, np.nan)
    if not np.isfinite(act).any():
        return {}
    t0 = float(np.nanmin(act))
    out = {"QRS": float(np.nanmax(act)) - t0, "QT": None}
    if "apd" in r.maps:
        rep = act + r.map("apd")
        # QT only where every activated node repolarised: otherwise the last repolarisation is not in the run
        if np.isfinite(rep).any() and np.array_equal(np.isfinite(rep), np.isfinite(act)):
            out["QT"] = float(np.nanmax(rep)) - t0
    return out


def beats(t, v, threshold: float = 0.0, level: float = 90.0, max_beats: int = 100) -> dict:
    """Every beat of traces ``v`` (shape (n_times,) or (n_times, n_nodes), mV) sampled at ``t`` (ms): per beat and
    node, the activation time (upward crossing of ``threshold``, interpolated), the APD at ``level`` % repolarisation
    and the peak. The beat's baseline is the lowest V since the previous beat's repolarisation (the first beat: since
    t[0]), so that a premature beat (S2) is measured from the diastolic potential it starts from; repolarisation is
    the first fall below baseline + (1 − level/100)·(V_peak − baseline) after the upstroke, interpolated. A beat that
    has not repolarised by the end has APD NaN. Returns {"activation", "apd", "v_peak", "v_base": arrays (beats,
    [nodes]) with NaN past a node's last beat, "count": beats per node}; the same definitions as the run's first-
    beat maps (ActivationMap, APDMap) except the baseline (there V at t = 0).

    On snapshots (``Results.beat_maps``) the times are the snapshot times: a map per beat, as good as
    output.interval; on probe traces (every PDE step) as good as the run's own maps."""
    t = np.asarray(t, dtype=float)
    v = np.asarray(v, dtype=float)
    one = v.ndim == 1
    v = v.reshape(len(t), -1)
    n = v.shape[1]
    frac = 1.0 - level / 100.0
    out = {k: np.full((max_beats, n), np.nan) for k in ("activation", "apd", "v_peak", "v_base")}
    count = np.zeros(n, dtype=int)
    in_beat = np.zeros(n, dtype=bool)
    base = v[0].copy()
    peak = np.full(n, -np.inf)
    rows = np.arange(n)
    for i in range(1, len(t)):
        p, c = v[i - 1], v[i]
        dt = t[i] - t[i - 1]
        waiting = ~in_beat & (count < max_beats)
        up = waiting & (p < threshold) & (c >= threshold)
        base = np.where(waiting & ~up, np.minimum(base, c), base)
        if up.any():
            k = count[up]
            out["activation"][k, rows[up]] = t[i - 1] + (threshold - p[up]) / (c[up] - p[up]) * dt
            out["v_base"][k, rows[up]] = base[up]
            in_beat |= up
            peak[up] = -np.inf
        peak = np.where(in_beat, np.maximum(peak, c), peak)
        lvl = base + frac * (peak - base)
        down = in_beat & (c < lvl) & (p >= lvl) & ~up
        if down.any():
            k, idx = count[down], rows[down]
            rep = t[i - 1] + (lvl[down] - p[down]) / (c[down] - p[down]) * dt
            out["apd"][k, idx] = rep - out["activation"][k, idx]
            out["v_peak"][k, idx] = peak[down]
            count[down] += 1
            in_beat[down] = False
            base[down] = c[down]
    last = in_beat                                  # a beat still going at the end: peak so far, no APD
    out["v_peak"][count[last], rows[last]] = peak[last]
    count = count + last
    used = max(int(count.max()) if n else 0, 0)
    result = {k: a[:used] for k, a in out.items()}
    result["count"] = count
    if one:
        result = {k: (a[:, 0] if k != "count" else int(a[0])) for k, a in result.items()}
    return result


def cv_map(activation: np.ndarray, spacing) -> np.ndarray:
    """Local conduction velocity (m/s) from an activation map (ms, natural shape ([nz,] [ny,] nx)) on a grid of
    ``spacing`` (cm, x first): 1/|∇T|, the gradient by central differences (one-sided at edges and next to NaN).
    NaN where T or a neighbour is missing, and where |∇T| is 0 (the stimulus region activates at once)."""
    a = np.asarray(activation, dtype=float)
    h = list(spacing)[: a.ndim][::-1]                    # per array axis: z, y, x
    grads = np.gradient(a, *h) if a.ndim > 1 else [np.gradient(a, h[0])]
    mag = np.sqrt(sum(g * g for g in grads))
    with np.errstate(divide="ignore", invalid="ignore"):
        cv = np.where(mag > 0, 10.0 / mag, np.nan)        # cm/ms -> m/s
    return cv


def cv_along(activation: np.ndarray, spacing, start, end, origin=None, samples: int = 50) -> float:
    """Conduction velocity (m/s) along the straight line from ``start`` to ``end`` (cm, x first): the inverse slope
    of a least-squares line through activation time against distance, sampled at ``samples`` points
    (multilinear); points where activation is missing are left out; NaN with fewer than 3."""
    start, end = np.asarray(start, float), np.asarray(end, float)
    o = np.zeros(len(start)) if origin is None else np.asarray(origin, float)
    s = np.linspace(0.0, 1.0, samples)
    length = float(np.linalg.norm(end - start))
    ts = np.array([sample(activation, spacing, start - o + f * (end - start)) for f in s])
    ok = np.isfinite(ts)
    if ok.sum() < 3 or length == 0:
        return float("nan")
    slope = np.polyfit(s[ok] * length, ts[ok], 1)[0]     # ms/cm
    return float(10.0 / slope) if slope > 0 else float("nan")


def cv_beats(first: np.ndarray, second: np.ndarray, distance: float) -> np.ndarray:
    """Conduction velocity (m/s) of each beat between two points ``distance`` cm apart, from their beats'
    activation times (ms; ``first``: the point the wave reaches first). Beat k of ``first`` is paired with the
    first activation of ``second`` after it and before beat k + 1 of ``first``: a beat blocked between the points,
    or one that reaches ``second`` only after the next one started, is NaN, and it does not shift the beats after
    it. The speed is ``distance`` over the time between the pair, the mean along the straight line between them
    (a curved path is longer)."""
    a = np.asarray(first, dtype=float)
    b = np.asarray(second, dtype=float)
    b = b[np.isfinite(b)]
    cv = np.full(a.shape, np.nan)
    for k, t in enumerate(a):
        if not np.isfinite(t):
            continue
        nxt = a[k + 1] if k + 1 < len(a) and np.isfinite(a[k + 1]) else np.inf
        after = b[(b > t) & (b < nxt)]
        if after.size and distance > 0:
            cv[k] = 10.0 * distance / (after[0] - t)       # cm/ms -> m/s
    return cv

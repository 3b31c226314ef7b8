"""Arrhythmia analysis of node traces: activations of every beat, phase maps, phase singularities, spiral-tip
trajectories, dominant frequency and cycle length (NumPy and SciPy only).

Traces are arrays whose first axis is time (``v[k, ...]``: the nodes at ``t[k]``, ms; Vm in mV), as a run's
snapshots are (``/fields/Vm``, shape (n_snapshots, [n_z,] [n_y,] n_x)). Snapshot times must be evenly spaced for
the phase and the spectrum (:func:`uniform` finds the evenly spaced leading ones: a run's last snapshot, at its
end, may come sooner).

* **Phase** (:func:`phase`): the argument of the analytic signal of V minus its mean over time at each node
  (Hilbert transform, Bray & Wikswo 2002), or the angle in the delay plane (V(t - τ) against V(t), both minus the
  mean: Gray et al. 1998). Both increase by 2π per cycle: a node whose V is cos(ωt) has phase ωt (wrapped to
  [-π, π)). The Hilbert transform treats the record as periodic: its phase is off by up to about 1 rad at the
  record's ends, and trusted a quarter of a period in (:func:`trusted`); the delay phase has no value (NaN) for the
  first τ.
* **Phase singularities** (:func:`charges`): the topological charge of each 2 × 2 plaquette of nodes, the sum of
  the wrapped phase differences around it (counter-clockwise: x, then y) over 2π, +1 or -1 where a spiral's tip
  is inside the plaquette, 0 elsewhere (and where a corner has no phase). The tip is placed at the plaquette's
  centre: within h/√2 of the true singularity.
* **Tip trajectories** (:func:`link_tips`): detections of successive frames joined into tracks, each detection to
  the nearest one of the same charge in the previous frames (an optimal assignment, SciPy's
  ``linear_sum_assignment``) within a distance.
* **Dominant frequency** (:func:`dominant_frequency`): the frequency of the largest peak of each node's power
  spectrum (Hann window, V minus its mean, optionally zero-padded) within a band; its resolution is one frequency
  bin, 1/(n Δt).
* **Activations** (:func:`activations`) and **cycle length** (:func:`cycle_length`): every upward crossing of a
  threshold per node (interpolated), and the median interval between them.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment
from scipy.signal import hilbert

TWO_PI = 2.0 * np.pi
EDGE = 0.25         # periods at each end of a record whose Hilbert phase is not to be trusted


def uniform(t, rtol: float = 1e-6) -> int:
    """How many leading times of ``t`` (ms) are evenly spaced (at least 2 where there are 2): a run's snapshots are
    taken every output.interval and once more at its end, which may come sooner."""
    t = np.asarray(t, dtype=float)
    if t.size < 3:
        return int(t.size)
    d = np.diff(t)
    ok = np.abs(d - d[0]) <= rtol * abs(d[0])
    return int(t.size if ok.all() else np.argmin(ok) + 1)


def trusted(n: int, period: float) -> slice:
    """The samples of a record of ``n`` whose Hilbert phase is to be trusted: all but the first and the last EDGE
    of a ``period`` (in samples; at least one sample)."""
    k = max(1, int(np.ceil(EDGE * period))) if np.isfinite(period) else 1
    return slice(k, max(k, n - k))


def wrap(a):
    """Angles wrapped to [-π, π)."""
    return (np.asarray(a) + np.pi) % TWO_PI - np.pi


# -- activations and cycle length -------------------------------------------------------------------------------
def activations(t, v, threshold: float = 0.0, last: int | None = None) -> np.ndarray:
    """Every upward crossing of ``threshold`` (mV) by each node's trace, linearly interpolated (ms): an array
    (beats, *nodes) with NaN past a node's last activation, the earliest first. ``last``: keep only each node's
    last ``last`` activations (still the earliest of them first)."""
    t = np.asarray(t, dtype=float)
    v = np.asarray(v, dtype=float)
    shape = v.shape[1:]
    v = v.reshape(len(t), -1)
    up = (v[:-1] < threshold) & (v[1:] >= threshold)
    count = up.sum(axis=0)
    most = int(count.max()) if count.size else 0
    out = np.full((most, v.shape[1]), np.nan)
    k, node = np.nonzero(up)                                  # in time order within each node, after the sort
    order = np.lexsort((k, node))
    k, node = k[order], node[order]
    frac = (threshold - v[k, node]) / (v[k + 1, node] - v[k, node])
    times = t[k] + frac * (t[k + 1] - t[k])
    start = np.concatenate([[0], np.cumsum(count)[:-1]])
    beat = np.arange(k.size) - start[node]
    if last is not None:
        beat = beat - np.maximum(count[node] - last, 0)
        keep = beat >= 0
        node, beat, times = node[keep], beat[keep], times[keep]
        out = out[: min(most, last)]
    out[beat, node] = times
    return out.reshape(out.shape[0], *shape)


def cycle_length(act: np.ndarray) -> np.ndarray:
    """Each node's cycle length (ms): the median interval between its successive activations (an array of
    :func:`activations`); NaN with fewer than two."""
    d = np.diff(np.asarray(act, dtype=float), axis=0)
    if d.shape[0] == 0:
        return np.full(d.shape[1:], np.nan)
    with warnings.catch_warnings():            # a node with fewer than two: NaN says it, not a warning
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(d, axis=0)


# -- phase -----------------------------------------------------------------------------------------------------
def phase(v, method: str = "hilbert", delay: int | None = None) -> np.ndarray:
    """The phase of each node's trace (radians in [-π, π); time the first axis), from V minus its mean over time:
    ``"hilbert"``, the argument of the analytic signal; ``"embedding"``, atan2(V(t - τ), V(t)) with τ ``delay``
    samples (NaN for the first τ). NaN where a node has no value (outside the tissue). The Hilbert transform treats
    the record as periodic: exact for a record of whole periods, otherwise off by up to about 1 rad at its ends, and
    by less than 0.2 rad from a quarter of a period in (:func:`trusted`)."""
    v = np.asarray(v, dtype=float)
    centred = v - np.mean(v, axis=0, keepdims=True)
    if method == "hilbert":
        bad = ~np.isfinite(centred)
        ph = np.angle(hilbert(np.where(bad, 0.0, centred), axis=0))
        ph[np.broadcast_to(bad.any(axis=0, keepdims=True), ph.shape)] = np.nan
        return wrap(ph)
    if method == "embedding":
        if delay is None or not 0 < int(delay) < v.shape[0]:
            raise ValueError(f"phase: the embedding's delay must be 1 to {v.shape[0] - 1} samples, not {delay}")
        d = int(delay)
        ph = np.full(v.shape, np.nan)
        ph[d:] = np.arctan2(centred[:-d], centred[d:])
        return wrap(ph)
    raise ValueError(f"phase: method {method!r}; allowed: hilbert, embedding")


# -- phase singularities and tips -------------------------------------------------------------------------------
def charges(ph: np.ndarray) -> np.ndarray:
    """Topological charge of every 2 × 2 plaquette of a phase field (..., n_y, n_x): an integer array (..., n_y - 1,
    n_x - 1), +1 where the phase increases by 2π counter-clockwise (x to the right, y up) around the plaquette, -1
    the other way, 0 elsewhere and where a corner has no phase."""
    p = np.asarray(ph, dtype=float)
    a, b, c, d = p[..., :-1, :-1], p[..., :-1, 1:], p[..., 1:, 1:], p[..., 1:, :-1]   # counter-clockwise corners
    total = wrap(b - a) + wrap(c - b) + wrap(d - c) + wrap(a - d)
    q = np.rint(total / TWO_PI)
    return np.where(np.isfinite(q), q, 0).astype(np.int8)


def tips(ph: np.ndarray, x, y) -> np.ndarray:
    """The phase singularities of one 2D phase field (n_y, n_x) on node coordinates ``x``, ``y`` (cm): an array
    (n, 3) of x (cm), y (cm) and charge, at the centres of the plaquettes of non-zero charge."""
    q = charges(ph)
    j, i = np.nonzero(q)
    x, y = np.asarray(x, float), np.asarray(y, float)
    return np.column_stack([(x[i] + x[i + 1]) / 2, (y[j] + y[j + 1]) / 2, q[j, i].astype(float)])


@dataclass
class Track:
    """One tip followed over frames: its times (ms), positions (cm) and charge."""
    t: np.ndarray
    x: np.ndarray
    y: np.ndarray
    charge: int

    @property
    def lifetime(self) -> float:
        """Time from its first to its last detection (ms)."""
        return float(self.t[-1] - self.t[0])


def link_tips(times, found: list[np.ndarray], max_distance: float, max_gap: int = 1) -> list[Track]:
    """Tracks of tips from the detections of successive frames (``found[k]``: :func:`tips` at ``times[k]``, ms): a
    detection continues the track of the same charge whose last detection is nearest, within ``max_distance`` cm
    and at most ``max_gap`` frames without one since (the assignment that minimises the total distance); any
    other starts a new track. The tracks in the order they start."""
    tracks: list[dict] = []
    for k, (t, det) in enumerate(zip(times, found)):
        det = np.asarray(det, dtype=float).reshape(-1, 3)
        alive = [n for n, tr in enumerate(tracks) if k - tr["frame"] <= max_gap + 1]
        taken = np.zeros(len(det), dtype=bool)
        if alive and len(det):
            last = np.array([[tracks[n]["x"][-1], tracks[n]["y"][-1], tracks[n]["charge"]] for n in alive])
            dist = np.hypot(last[:, None, 0] - det[None, :, 0], last[:, None, 1] - det[None, :, 1])
            allowed = (dist <= max_distance) & (last[:, None, 2] == det[None, :, 2])
            cost = np.where(allowed, dist, 1e6 + max_distance)
            rows, cols = linear_sum_assignment(cost)
            for r_, c_ in zip(rows, cols):
                if allowed[r_, c_]:
                    tr = tracks[alive[r_]]
                    tr["t"].append(t), tr["x"].append(det[c_, 0]), tr["y"].append(det[c_, 1])
                    tr["frame"] = k
                    taken[c_] = True
        for c_ in np.flatnonzero(~taken):
            tracks.append({"t": [t], "x": [det[c_, 0]], "y": [det[c_, 1]], "charge": int(det[c_, 2]), "frame": k})
    return [Track(np.array(tr["t"]), np.array(tr["x"]), np.array(tr["y"]), tr["charge"]) for tr in tracks]


# -- spectra ---------------------------------------------------------------------------------------------------
def dominant_frequency(t, v, band=(0.5, 50.0), pad: int = 1) -> tuple[np.ndarray, float]:
    """The dominant frequency of each node's trace (Hz; time in ms, evenly spaced): the frequency of the largest
    peak of its power spectrum (V minus its mean, Hann window) within ``band`` (Hz), and the spectrum's bin width
    (Hz: 1000 / (n Δt)), which is the result's resolution. ``pad``: the trace zero-padded to ``pad`` times its
    length, which samples the same spectrum ``pad`` times more finely (the peak is placed better between bins; two
    peaks closer than a bin are not told apart). NaN where a node has no value or no power in the band."""
    t = np.asarray(t, dtype=float)
    v = np.asarray(v, dtype=float)
    n = len(t)
    if n < 4 or uniform(t) != n:
        raise ValueError("dominant_frequency: needs at least 4 evenly spaced times")
    dt = (t[-1] - t[0]) / (n - 1)                       # ms
    freq = np.fft.rfftfreq(n * int(pad), d=dt / 1000.0)            # Hz
    inside = (freq >= band[0]) & (freq <= band[1])
    if not inside.any():
        raise ValueError(f"dominant_frequency: no frequency bin in {band[0]:g} to {band[1]:g} Hz (bins every "
                         f"{freq[1]:g} Hz up to {freq[-1]:g} Hz)")
    flat = v.reshape(n, -1)
    df = np.full(flat.shape[1], np.nan)
    window = np.hanning(n)[:, None]
    # nodes a chunk at a time: the padded spectra of all nodes at once would take pad x 16 B per sample and node
    chunk = max(1, (1 << 27) // (n * int(pad) * 16))
    for lo in range(0, flat.shape[1], chunk):
        part = flat[:, lo: lo + chunk]
        centred = np.nan_to_num(part - part.mean(axis=0, keepdims=True))
        power = np.abs(np.fft.rfft(centred * window, n=n * int(pad), axis=0))[inside] ** 2
        ok = np.isfinite(part).all(axis=0) & (power.max(axis=0) > 0)
        df[lo: lo + chunk] = np.where(ok, freq[inside][np.argmax(power, axis=0)], np.nan)
    return df.reshape(v.shape[1:]), float(freq[1] * int(pad))

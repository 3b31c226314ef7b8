"""Populations of cells: one model, every cell its own parameter scale factors, paced together; biomarkers per cell
and calibration filters.

    run_population("models/ohara_rudy_2011_endo.cellml", None, {}, {"GKr_b": ("lognormal", 0.2)}, n=1000, seed=1,
                   amplitude=-80, duration=0.5, period=1000, beats=1, prepace=20, dt=0.01, integrator="grl1",
                   record_every=0.5, keep={"APD90": (200, 350)}, h5_path="pop.h5", csv_path="pop.csv")

Factors: ``uniform`` between two bounds, ``lognormal`` with median 1 and the given σ of ln(factor), or a table
(CSV, one column per parameter, one row per cell). The cells are integrated together by the native C driver, each
with its own parameter vector (kernels/cpu_driver.c, ``p_stride``); a CellML model's header is specialised with the
varied parameters read at run time. On a GPU (``backend="cuda"``, CellML models) the fused kernel reads the varied
parameters, and the constants computed from them, per cell from device memory; every other one is a literal
(cardiosim.cells.cellml.per_cell_header; ``backend="native-cells"`` runs that same header on the CPU, the host twin
the tests compare). The last beat is recorded (every ``record_every`` ms, V only) and measured per cell
(cardiosim.analysis.biomarkers, APDs from the stimulus onset); a cell whose state goes bad is marked, not fatal.
"""

from __future__ import annotations

import csv
import json
import math
import re
import time
from typing import Mapping

import numpy as np

from cardiosim import __version__, cells
from cardiosim.analysis.biomarkers import UNITS, beat_biomarkers
from cardiosim.runtime.errors import SimulationError
from cardiosim.runtime.files import check_input, whole, write_h5
from cardiosim.runtime.resources import available_memory
from cardiosim.runtime.gpu import cuda_driver
from cardiosim.cells.stimulus import Protocol
from cardiosim.cells.cellml import per_cell_header
from cardiosim.single_cell.pacing import warn_unstable_step

DISTRIBUTIONS = ("uniform", "lognormal")


def parse_sample(text: str) -> tuple[str, tuple]:
    """``NAME=uniform:LO:HI`` or ``NAME=lognormal:SIGMA`` -> (NAME, (kind, numbers...)); ValueError (one line)."""
    name, sep, spec = text.partition("=")
    kind, *nums = spec.split(":")
    try:
        values = tuple(float(x) for x in nums)
    except ValueError:
        values = ()
    ok = (sep and name.strip() and ((kind == "uniform" and len(values) == 2 and 0 <= values[0] <= values[1])
                                    or (kind == "lognormal" and len(values) == 1 and values[0] >= 0))
          and all(math.isfinite(v) for v in values))
    if not ok:
        raise ValueError(f"--sample {text}: expected NAME=uniform:LO:HI (0 <= LO <= HI) or NAME=lognormal:SIGMA")
    return name.strip(), (kind, *values)


def sample_factors(spec: Mapping[str, tuple], n: int, seed: int) -> dict[str, np.ndarray]:
    """Scale factors per cell, reproducible from ``seed`` (NumPy's default generator, parameters in sorted order)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in sorted(spec):
        kind, *v = spec[name]
        out[name] = rng.uniform(v[0], v[1], n) if kind == "uniform" else np.exp(rng.normal(0.0, v[0], n))
    return out


def table_factors(path) -> dict[str, np.ndarray]:
    """Scale factors from a CSV table: a header of parameter names, one row of factors per cell (blank lines, such
    as the one an editor leaves at the end, are no rows). A table that is missing, a directory or unreadable is
    one line (UserError, cardiosim.runtime.files.check_input)."""
    check_input("--population-table", path, "CSV table")
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.reader(f) if any(c.strip() for c in r)]
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise ValueError(f"--population-table {path}: cannot be read as a CSV table ({e})") from None
    if len(rows) < 2:
        raise ValueError(f"--population-table {path}: needs a header of parameter names and at least one row")
    try:
        data = np.array([[float(x) for x in r] for r in rows[1:]], dtype=np.float64)
    except ValueError:
        raise ValueError(f"--population-table {path}: every row must be numbers (scale factors)") from None
    if data.shape[1] != len(rows[0]) or not np.all(np.isfinite(data)) or np.any(data < 0):
        raise ValueError(f"--population-table {path}: one finite factor >= 0 per column in every row")
    return {name.strip(): data[:, i] for i, name in enumerate(rows[0])}


BACKENDS = ("native", "native-cells", "cuda")


def run_population(model_name: str, variant: str | None, overrides: Mapping[str, float] | None,
                   factors: Mapping[str, np.ndarray], amplitude: float, duration: float, period: float, beats: int,
                   prepace: int, dt: float, integrator: str, record_every: float, keep: Mapping[str, tuple],
                   h5_path, csv_path=None, progress=None, backend: str = "native", fmad: bool = True,
                   ticks=None) -> dict:
    """Pace the population; write /population to ``h5_path`` (factors, biomarkers of the last beat, kept) and the
    same as CSV; return {"n", "kept", "failed", "biomarkers" (structured array), "backend"}. ``keep``: biomarker ->
    (lo, hi), the calibration filter (a cell is kept where every listed biomarker lies in its range).

    ``backend``: "native" (the C driver, every cell its whole parameter vector; any model with a C kernel),
    "cuda" (one GPU: the fused kernel with the varied parameters per cell in device memory, generated models),
    "native-cells" (the GPU's per-cell header compiled as C: its host twin, for the tests). ``fmad``: the GPU's
    fused multiply-adds (False: closer to the CPU, for the tests). ``progress(beat, beats)`` after every beat but
    the recorded one; ``ticks(done, total)`` every half second or so of work, in substeps of every cell (the cells
    go together: done / total of each of them). A file that cannot be written is one line (SimulationError) and
    leaves nothing there (cardiosim.runtime.files.write_h5)."""
    cls = cells.model_class(model_name)
    model = cls(variant=variant, overrides=dict(overrides or {}))
    unknown = [k for k in factors if k not in model.p]
    if unknown:
        raise ValueError(f"population: {model.name} has no parameter {', '.join(unknown)}; "
                         f"allowed: {', '.join(sorted(model.p))}")
    for k in keep:
        if k not in UNITS:
            raise ValueError(f"--keep {k}: not a biomarker; allowed: {', '.join(UNITS)}")
    if backend not in BACKENDS:
        raise ValueError(f"population: backend {backend!r}; allowed: {', '.join(BACKENDS)}")
    if integrator not in ("forward-euler", "rush-larsen", "grl1"):
        raise ValueError(f"population: --integrator {integrator}; a population runs forward-euler, rush-larsen or "
                         f"grl1 (cvode paces one cell at a time)")
    if not model.kernel_name:
        raise ValueError(f"population: {model.name} has no C kernel (populations run in the native driver)")
    # the base model's limits, once: the sampled factors scale conductances, which leave the gates' τ as they are
    warn_unstable_step(model, integrator, dt)
    if backend != "native" and not hasattr(model, "keep_at_run_time"):
        raise ValueError(f"population: {model.name} is hand-written; populations on the GPU need a generated model "
                         f"(a CellML file, e.g. models/ten_tusscher_model_2006_epi.cellml)")
    if backend == "cuda":
        _gpu_visible()
    n = len(next(iter(factors.values())))
    _check_memory(model, n, len(factors), period, record_every)
    if hasattr(model, "keep_at_run_time"):
        model.keep_at_run_time(factors)
        params = model.population_vectors(factors)
    else:                                  # a hand-written model: its derived constants per cell, in Python
        rows = []
        for c in range(n):
            m = cls(variant=variant, overrides={**(overrides or {}), **{k: model.p[k] * f[c]
                                                                         for k, f in factors.items()}})
            rows.append(m.parameter_vector())
        params = np.ascontiguousarray(np.array(rows))
    k = int(round(record_every / dt))
    if k < 1 or abs(k * dt - record_every) > 1e-9 * record_every:
        raise ValueError(f"record_every ({record_every:g} ms) must be a whole multiple of dt ({dt:g} ms)")
    steps = int(round(period / dt))
    pulse = [Protocol(0.0, duration, 0.0, 1)]
    if backend == "cuda":
        cells_ = _GpuCells(model, params, pulse, amplitude, dt, integrator, fmad)
    else:
        cells_ = _CpuCells(model, params, pulse, amplitude, dt, integrator, per_cell=backend == "native-cells")

    n_rec = int(round(period / record_every))
    t = np.arange(n_rec + 1) * record_every
    V = np.full((n_rec + 1, n), np.nan)
    dvdt = np.full((n_rec, n), np.nan)
    total, done = (prepace + beats - 1) * steps + n_rec * k, 0      # substeps of every cell
    # A beat in chunks of about half a second of work, so that ``ticks`` hears often (a beat of many cells takes
    # minutes): the first chunk takes the stimulus whole, so that the later ones start where it is off either way,
    # and the states' ranges are checked at the beat's end: the same numbers as the beat in one call.
    lead = min(steps, int(math.ceil(duration / dt)) + 2)
    chunk = lead
    try:
        for b in range(prepace + beats - 1):
            s = 0
            while s < steps:
                kk = steps if not cells_.chunked else min(steps - s, lead if s == 0 else chunk)
                began = time.perf_counter()
                cells_.advance(s * dt, kk, last=s + kk == steps)
                chunk = max(lead, min(steps, int(kk * 0.5 / max(time.perf_counter() - began, 1e-3))))
                s += kk
                done += kk
                if ticks:
                    ticks(done, total)
            if progress:
                progress(b + 1, prepace + beats)
        V[0] = cells_.voltage()
        for i in range(n_rec):
            dvdt[i] = cells_.advance(i * k * dt, k, track=True)
            V[i + 1] = cells_.voltage()
            done += k
            if ticks:
                ticks(done, total)
    finally:
        cells_.close()
    failed = cells_.failed
    cols = ["APD90", "APD50", "V_rest", "V_peak", "dVdt_max"]
    bio = np.zeros(n, dtype=[("cell", "i8")] + [(c, "f8") for c in cols] + [("failed", "i1"), ("kept", "i1")])
    bio["cell"] = np.arange(n)
    for col in cols:
        bio[col] = np.nan
    bio["failed"] = failed
    for c in range(n):
        if failed[c]:
            continue
        r = beat_biomarkers(t, V[:, c], [0.0], apd_origin="stimulus", dvdt=dvdt[:, c], t_dvdt=t[:-1])
        if r:
            for col in cols:
                bio[col][c] = r[0][col]
    kept = ~failed
    for name, (lo, hi) in keep.items():
        col = bio[name] if name in cols else np.full(n, np.nan)
        kept &= (col >= lo) & (col <= hi)
    bio["kept"] = kept

    def fill(f):
        f.attrs.update({"model": model.name, "variant": model.variant or "", "overrides": json.dumps(dict(
            overrides or {})), "amplitude": amplitude, "duration": duration, "period": period, "beats": beats,
            "prepace": prepace, "dt": dt, "integrator": integrator, "record_every": record_every,
            "keep": json.dumps({k: list(v) for k, v in keep.items()}), "cardiosim_version": __version__,
            "protocol": "population", "backend": backend})
        g = f.create_group("population")
        for name, fac in factors.items():
            g.create_dataset(f"factors/{name}", data=np.asarray(fac, dtype=np.float64)).attrs["unit"] = "1"
        ds = g.create_dataset("biomarkers", data=bio)
        ds.attrs["units"] = json.dumps({c: UNITS[c] for c in cols})
        f.create_dataset("trace/t", data=t).attrs["unit"] = "ms"
        f.create_dataset("trace/V", data=V.T, chunks=(min(n, 256), V.shape[0])).attrs["unit"] = \
            "mV (one row per cell, the last beat)"
    write_h5(h5_path, "--output", fill)      # whole or not at all: a full disk is one line, and no file is left
    if csv_path is not None:
        with whole(csv_path, "--csv") as part, open(part, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["cell", *factors, *cols, "failed", "kept"])
            for c in range(n):
                w.writerow([c, *(f"{factors[k][c]:.10g}" for k in factors),
                            *(f"{bio[col][c]:.10g}" for col in cols), int(failed[c]), int(kept[c])])
    return {"n": n, "kept": int(kept.sum()), "failed": int(failed.sum()), "biomarkers": bio, "backend": backend}


def memory_need(model, n: int, n_factors: int, period: float, record_every: float) -> tuple[int, int]:
    """(bytes, bytes a cell) a population of ``n`` cells of ``model`` (an instance) needs, about: the recorded beat
    (V every ``record_every`` ms, dV/dt, the copy written out and the file's image), the states (and the copy a
    call starts from), the parameters (a row per cell, the copy of the living cells' and, for a hand-written model,
    the rows it is made from), the factors and the biomarkers."""
    n_rec = int(round(period / record_every))
    params = len(model.parameter_vector())
    per_cell = 8 * (4 * (n_rec + 1) + 3 * model.n_states + 3 * params + n_factors + 1 + 16) + 128
    return n * per_cell, per_cell


def check_memory(model_name: str, variant: str | None, overrides, n: int, n_factors: int, period: float,
                 record_every: float) -> tuple[int, int]:
    """ValueError (one line naming --population and the memory available) where ``n`` cells cannot fit, before
    anything is drawn or allocated; else :func:`memory_need`."""
    model = cells.model_class(model_name)(variant=variant, overrides=dict(overrides or {}))
    return _check_memory(model, n, n_factors, period, record_every)


def _check_memory(model, n, n_factors, period, record_every):
    need, per_cell = memory_need(model, n, n_factors, period, record_every)
    have = available_memory()
    if have is not None and need > have:
        raise ValueError(f"--population {n}: about {need / 1e9:.3g} GB of memory ({per_cell / 1e3:.3g} KB a cell: "
                         f"its recorded beat every --record-every {record_every:g} ms, its states and parameters), "
                         f"and {have / 1e9:.3g} GB are available; fewer cells, a larger --record-every, or a host "
                         f"with more memory")
    return need, per_cell


def _gpu_visible() -> None:
    """ValueError (one line) where this process cannot use a GPU: before anything is computed or written."""
    try:
        n = cuda_driver().Device.count()
    except Exception as e:                       # RuntimeError (no PyCUDA), pycuda's own (no driver)
        raise ValueError(f"--backend cuda: no GPU to run on: {str(e).splitlines()[0][:200]}") from None
    if n == 0:
        raise ValueError("--backend cuda: no GPU visible (CUDA sees 0 devices)")


class _CpuCells:
    """The population in the native C driver, one core: every cell its whole parameter vector, or (``per_cell``)
    the GPU's per-cell header compiled as C with the varied parameters' slots per cell. A cell that goes bad is
    marked failed and left out from then on (the driver stops at the first bad cell: the call is done again
    without it, from where every cell was)."""

    def __init__(self, model, params, pulse, amplitude, dt, integrator, per_cell=False):
        # lazy: cardiosim.reaction imports mpi4py, which this module does not
        from cardiosim.reaction.ode.native import NativeModel
        self.native = NativeModel(model, integrator=integrator, per_cell=per_cell)
        # per cell: a row per cell (the driver's p_stride), or the (n_slots, n_cells) slots of the per-cell header
        self.params = params if not per_cell else np.ascontiguousarray(params[:, self.native.slots].T)
        self.per_cell = per_cell
        self.pulse, self.amplitude, self.dt = pulse, amplitude, dt
        self.y = np.ascontiguousarray(model.initial_state(params.shape[0]))
        self.failed = np.zeros(params.shape[0], dtype=bool)
        self.made: dict = {}       # the living cells' stimulus and parameters, made again only when a cell fails
        self.chunked = True        # a beat may be advanced in several calls (run_population's progress)

    def _inputs(self, alive):
        if self.made.get("n") != alive.size:                       # cells only ever leave: the count says it
            p = self.params[:, alive] if self.per_cell else self.params[alive]
            self.made.update(n=alive.size, stimulus=self.native.stimulus(self.pulse, [self.amplitude], alive.size),
                             params=np.ascontiguousarray(p))
        return self.made["stimulus"], self.made["params"]

    def advance(self, t0, kk, track=False, last=True):
        """Every living cell kk steps from t0; with ``track``, the largest dV/dt per cell (NaN where failed).
        ``last``: the states' ranges checked at the end (False: a beat's chunk before its last one; non-finite
        states are checked at every step either way)."""
        out = np.full(self.failed.size, np.nan)
        alive = np.flatnonzero(~self.failed)
        while alive.size:
            ys = np.ascontiguousarray(self.y[:, alive])     # a copy: a failed try is done again from these states
            stimulus, cell_params = self._inputs(alive)
            try:
                r = self.native.advance(ys, t0, self.dt, kk, stimulus, check_range=last, track_dvdt=track,
                                        params=cell_params)
            except SimulationError as e:
                bad = re.search(r"cell (\d+),", str(e))                  # the driver names the cell
                if bad is None:
                    raise
                self.failed[alive[int(bad.group(1))]] = True
                alive = np.flatnonzero(~self.failed)
                continue
            self.y[:, alive] = ys
            if track:
                out[alive] = r[0]
            break
        return out

    def voltage(self):
        return np.where(self.failed, np.nan, self.y[0])

    def close(self):
        pass


class _GpuCells:
    """The population on one GPU (cardiosim.reaction.ode.cuda_backend with per-cell parameters): the states stay
    on the device; one launch per call. A cell that goes bad stops there (the kernel flags it; the other cells go
    on, as on the CPU): after a flagged launch every cell's state is checked on the host, the bad ones are marked
    failed and set back to the initial state, so that they trip no later check."""

    def __init__(self, model, params, pulse, amplitude, dt, integrator, fmad):
        # lazy: cardiosim.reaction imports mpi4py, which this module does not
        from cardiosim.reaction.ode.cuda_backend import CudaBackend
        slots = per_cell_header(model)[1]
        n = params.shape[0]
        self.y0 = np.ascontiguousarray(model.initial_state(n))
        self.gpu = CudaBackend(model, self.y0, integrator=integrator, fmad=fmad,
                               cell_params=np.ascontiguousarray(params[:, slots].T))
        self.stim = self.gpu.stimulus(pulse, [amplitude])
        self.lower = np.array([s.lower for s in model.states])[:, None]
        self.upper = np.array([s.upper for s in model.states])[:, None]
        self.dt = dt
        self.failed = np.zeros(n, dtype=bool)
        self.v = np.empty(n)
        self.chunked = False       # a beat in one launch, checked at its end (as the kernel's flag is read)

    def advance(self, t0, kk, track=False, last=True):
        r = self.gpu.advance(t0, self.dt, kk, self.stim, check_range=True, track_dvdt=track, check=False)
        try:
            self.gpu.check(t0, self.dt)
        except SimulationError:
            y = self.gpu.from_device()
            with np.errstate(invalid="ignore"):
                bad = ~np.all(np.isfinite(y) & (y >= self.lower) & (y <= self.upper), axis=0) & ~self.failed
            self.failed |= bad
            y[:, bad] = self.y0[:, bad]
            self.gpu.to_device(y)
        if not track:
            return None
        return np.where(self.failed, np.nan, r[0])

    def voltage(self):
        self.gpu.get_row(0, self.v)
        return np.where(self.failed, np.nan, self.v)

    def close(self):
        """Free the device memory and release the context."""
        self.gpu.close()

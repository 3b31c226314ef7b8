"""Single-cell runs: pace one cell with a pulse train, integrate it (INTEGRATORS: Forward Euler, Rush–Larsen or GRL1
in the model's native C driver, Forward Euler in NumPy for models without a C kernel: Mitchell–Schaeffer,
Pathmanathan–Gray; or CVODES through Myokit for CellML models), write the trace and per-beat biomarkers.

    run_cell("bondarenko", "apical", {}, amplitude=-80, duration=0.5, period=1000, beats=10, dt=1e-4,
             record_every=0.05, h5_path="cell.h5", json_path="cell.json")

The first stimulus starts at t = 0; beat b (1-based) starts at (b − 1)·period.

HDF5 layout (h5py; units in each dataset's ``unit`` attribute):

    /                 attrs: model, variant, overrides (JSON), amplitude (pA/pF), duration, period (ms), beats,
                      dt (ms), record_every (ms), state_names, cardiosim_version; ``error`` if the run stopped early
    /trace/t          (n,) ms, the record times 0, record_every, 2·record_every, ...
    /trace/<state>    (n,) each state of the model at those times (e.g. /trace/V in mV, /trace/Cai in µM)
    /dvdt/max         (n − 1,) mV/ms, the largest dV/dt over the substeps of each record interval (CVODES: dV/dt
                      at the interval's end)
    /dvdt/t           (n − 1,) ms, the time that largest dV/dt was evaluated at (resolution dt)
    /biomarkers       table, one row per complete beat, columns as cardiosim.analysis.biomarkers.UNITS
                      (attribute ``units``: JSON {column: unit}); APDs measured from the stimulus onset;
                      ``dVdt_max_sampling`` says how dVdt_max was sampled, ``dVdt_max_unresolved`` (JSON list) the
                      beats whose upstroke that sampling does not resolve (UPSTROKE_SAMPLES)

The trace is written in blocks as the run goes, so a run stopped by an error or a kill still leaves a readable file
up to the last block. The JSON file (optional) holds the run's settings and the same biomarkers
({"model": ..., "units": {...}, "beats": [{...}, ...], "dVdt_max_sampling": ..., "dVdt_max_unresolved": [...]},
NaN written as null).
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

from cardiosim import __version__, cells
from cardiosim.analysis.biomarkers import UNITS, beat_biomarkers
from cardiosim.runtime.errors import SimulationError, io_reason, quiet_h5py_unraisable
from cardiosim.cells.stimulus import Protocol
from cardiosim.cells import cellml, stability
from cardiosim.runtime.resources import check_fits, file_size_limit

_BLOCK = 4096          # records buffered between HDF5 writes


def _check(ok: bool, msg: str) -> None:
    if not ok:
        raise ValueError(msg)


def _positive(name: str, value, unit: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number ({unit}), got {value!r}") from None
    _check(math.isfinite(v) and v > 0.0, f"{name} must be a positive number of {unit}, got {value!r}")
    return v


def _validate(amplitude, duration, period, beats, dt, record_every, h5_path, json_path):
    try:
        amplitude = float(amplitude)
    except (TypeError, ValueError):
        raise ValueError(f"amplitude must be a number (pA/pF), got {amplitude!r}") from None
    _check(math.isfinite(amplitude), f"amplitude must be finite (pA/pF), got {amplitude!r}")
    duration = _positive("duration", duration, "ms")
    period = _positive("period", period, "ms")
    _check(duration <= period, f"duration ({duration:g} ms) must not exceed period ({period:g} ms)")
    _check(isinstance(beats, (int, np.integer)) and not isinstance(beats, bool) and beats >= 1,
           f"beats must be a positive integer, got {beats!r}")
    dt = _positive("dt", dt, "ms")
    record_every = _positive("record_every", record_every, "ms")
    k = round(record_every / dt)
    _check(k >= 1 and abs(k * dt - record_every) <= 1e-9 * record_every,
           f"record_every ({record_every:g} ms) must be a whole multiple of dt ({dt:g} ms)")
    for name, path in (("h5_path", h5_path), ("json_path", json_path)):
        if path is not None:
            parent = Path(path).expanduser().resolve().parent
            _check(parent.is_dir(), f"{name}: the folder {parent} does not exist")
    return amplitude, duration, period, int(beats), dt, record_every, int(k)


# Bytes per recorded sample held in memory: the time, V, Cai and the two dV/dt arrays, and the copies the
# biomarkers make of the trace (measured: under 8 arrays of float64).
_MEMORY_PER_SAMPLE = 8 * 8
# Bytes per sample on disk, per state (float64), besides the time and the two dV/dt arrays.
_DISK_PER_STATE = 8


def _check_sizes(beats, period, record_every, h5_path, n_states: int) -> None:
    """Refuse, before anything is allocated or written, a trace the memory or the disk cannot hold (a
    MemoryError, or a disk filled halfway through a long run, otherwise)."""
    import shutil
    samples = beats * period / record_every + 1
    what = (f"--beats {beats} of --period {period:g} ms recorded every {record_every:g} ms: {samples:.4g} samples "
            f"of the trace")
    check_fits(_MEMORY_PER_SAMPLE * samples, what, "record less often (--record-every) or pace fewer beats")
    need = 8 * (n_states + 3) * samples
    limit = file_size_limit()
    if limit is not None and need > limit:
        raise ValueError(f"{what} need at least {need / 1e6:.3g} MB in {h5_path}, more than this process may "
                         f"write to one file (ulimit -f: {limit / 1e6:.3g} MB); record less often (--record-every) "
                         f"or pace fewer beats")
    try:
        free = shutil.disk_usage(Path(h5_path).expanduser().resolve().parent).free
    except OSError:
        return
    if need > free:
        raise ValueError(f"{what} need at least {need / 1e9:.3g} GB on disk, and {free / 1e9:.3g} GB are free "
                         f"there; record less often (--record-every) or pace fewer beats")


def _json_value(v):
    if isinstance(v, float) and not math.isfinite(v):
        return None
    return v


# Tissue constants for the models that read them (Pathmanathan–Gray): the config's defaults ([tissue] Cm, chi),
# overridable like parameters.
TISSUE_DEFAULTS = {"Cm": 1.0, "chi": 1400.0}


class _NumpyCell:
    """The native driver's ``advance`` for a model without a C kernel: Forward Euler in NumPy, the stimulus and
    dV/dt evaluated at every substep, the states checked (finite, in range; finite only with ``check_range=False``)
    at every substep."""

    def __init__(self, model):
        self.model = model

    def stimulus(self, protocols, amps, n_cells):
        return list(zip(protocols, amps))

    def advance(self, y, t0, dt, k, stim, track_dvdt=False, check_range=True):
        m = self.model
        work = np.empty_like(y)
        dmax, tmax = np.full(y.shape[1], -np.inf), np.zeros(y.shape[1])
        for s in range(k):
            t = t0 + s * dt
            i_stim = sum((a for p, a in stim if p.active(t)), 0.0)
            m.rhs(t, y, i_stim, work)
            better = work[0] > dmax
            dmax[better], tmax[better] = work[0][better], t
            y += dt * work
            bad = m.find_bad_state(y) if check_range else next(((i, 0) for i in range(len(y))
                                                                 if not np.all(np.isfinite(y[i]))), None)
            if bad is not None:
                st, c = m.states[bad[0]], bad[1]
                what = "is not finite" if not np.isfinite(y[bad]) else f"left its range [{st.lower:g}, {st.upper:g}]"
                raise SimulationError(f"{m.name}: cell {c}, state {st.name} = {y[bad]:.6g} {st.unit} {what} at "
                                      f"t = {t + dt:.6g} ms (Forward Euler, dt = {dt:g} ms){stability.STEP_HINT}")
        return (dmax, tmax) if track_dvdt else None


INTEGRATORS = ("forward-euler", "rush-larsen", "grl1", "cvode")


class _CvodeCell:
    """Myokit's CVODES simulation of a CellML model behind the native driver's ``advance``: the independent,
    adaptive integrator (what Myokit's users run), for long pre-pacing and as a reference. The pulse train is
    Myokit's (``blocktrain``: the same times as cardiosim's Protocol). Myokit is asked for one beat of records at a
    time and ``advance`` serves them; the dV/dt column is dV/dt at the record times (CVODES takes its own steps)."""

    def __init__(self, model, amplitude, duration, period, record_every):
        myokit = cellml.myokit_cvodes()
        m = cellml.load_myokit(model.source)
        for name, value in model.p.items():                    # the run's parameters, by their user names
            if value != model.parameters[name].value:
                var = m.get(name) if "." in name else next(x for x in m.variables(deep=True) if x.name() == name)
                var.set_rhs(myokit.Number(value))
        self.names = [x.qname() for x in m.states()]
        self.dvdt = f"dot({m.label('membrane_potential').qname()})"
        self.sim = myokit.Simulation(m, myokit.pacing.blocktrain(period, duration, level=amplitude, limit=0))
        self.period, self.record_every = period, record_every
        self.t_next, self.rows, self.at = 0.0, None, 0

    def stimulus(self, protocols, amps, n_cells):
        return None

    def prepace(self, beats: int) -> None:
        """``beats`` beats without records; the recorded beats start at t = 0 again (Simulation.pre)."""
        if beats:
            self.sim.pre(beats * self.period)

    def advance(self, y, t0, dt, k, stim, track_dvdt=False):
        if self.rows is None or self.at >= len(self.rows[0]):
            n = max(1, int(round(self.period / self.record_every)))
            times = self.t_next + self.record_every * np.arange(1, n + 1)
            try:
                d = self.sim.run(times[-1] + 0.5 * self.record_every - self.sim.time(), log=self.names + [self.dvdt],
                                 log_times=times)
            except Exception as e:                            # myokit.SimulationError: CVODES gave up
                raise SimulationError(f"CVODES (Myokit): {str(e).strip().splitlines()[0]}") from None
            self.rows = [np.asarray(d[x]) for x in self.names + [self.dvdt]]
            self.t_next, self.at = times[-1], 0
        y[:, 0] = [r[self.at] for r in self.rows[:-1]]
        dv = self.rows[-1][self.at]
        self.at += 1
        return (np.array([dv]), np.array([t0 + k * dt])) if track_dvdt else None


def warn_unstable_step(model, integrator: str, dt: float) -> None:
    """Warn (one line, cardiosim.runtime.log) where ``dt`` (ms) is above a stability limit of ``integrator`` for ``model``
    (cardiosim.cells.stability), in the command line's words; a tissue run says it in the config's
    (cardiosim.reaction.Reaction)."""
    # lazy: cardiosim.runtime.log imports mpi4py, which this module does not
    from cardiosim.runtime import log
    msg = stability.step_warning(model, integrator, dt, option="--integrator {}", step_is="--dt",
                                 smaller=lambda d: f"--dt {d:g}")
    if msg:
        log.warning(msg)


def _stepper(model, integrator: str, amplitude, duration, period, record_every, dt: float):
    """What advances the cell: the native driver (forward-euler, rush-larsen, grl1), NumPy Forward Euler for a
    model without a C kernel, or CVODES through Myokit (CellML models). Warns where ``dt`` (ms) is beyond a
    stability limit of the integrator, before any step is taken."""
    _check(integrator in INTEGRATORS, f"integrator must be one of {', '.join(INTEGRATORS)}, got {integrator!r}")
    warn_unstable_step(model, integrator, dt)
    if integrator == "cvode":
        _check(cellml.is_cellml(getattr(model, "source", "")),
               f"integrator cvode: runs CellML models (through Myokit); {model.name} is a built-in model")
        return _CvodeCell(model, amplitude, duration, period, record_every)
    if not model.kernel_name:
        _check(integrator == "forward-euler", f"integrator {integrator}: {model.name} has Forward Euler only")
        return _NumpyCell(model)
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.ode.native import NativeModel
    try:
        return NativeModel(model, integrator=integrator)
    except RuntimeError as e:
        if "step" in str(e):                                 # the header has no such step
            raise ValueError(f"integrator {integrator}: {model.name} has none (forward-euler"
                             f"{', rush-larsen' if hasattr(model, 'rush_larsen') else ''} only)") from None
        raise


def scaled(model_name: str, variant: str | None, overrides: Mapping[str, float], scale: Mapping[str, float]) -> dict:
    """``overrides`` with each parameter of ``scale`` multiplied by its factor (from its value in the variant, or in
    ``overrides`` where given there): parameter scale factors, drug block (:func:`block_factor`)."""
    out = dict(overrides)
    if not scale:
        return out
    base = cells.make(model_name, variant, {k: v for k, v in overrides.items() if k not in TISSUE_DEFAULTS},
                      tissue={k: overrides.get(k, v) for k, v in TISSUE_DEFAULTS.items()})
    for name, f in scale.items():
        _check(math.isfinite(float(f)) and float(f) >= 0.0, f"--scale {name}={f}: a factor must be finite and >= 0")
        if name not in base.p:
            raise cells.CellModelError(f"--scale {name}: {base.name} has no parameter '{name}'; allowed: "
                                       f"{', '.join(sorted(base.p))}")
        out[name] = base.p[name] * float(f)
    return out


def block_factor(concentration: float, ic50: float, hill: float = 1.0) -> float:
    """The conductance left by a drug at ``concentration`` with ``ic50`` (same unit) and Hill coefficient ``hill``:
    1 / (1 + (C/IC50)^h) (simple pore block)."""
    _check(ic50 > 0 and hill > 0 and concentration >= 0, "drug block: IC50 and Hill must be > 0, the concentration "
                                                          ">= 0")
    return 1.0 / (1.0 + (concentration / ic50) ** hill)


def run_cell(model_name: str, variant: str | None, overrides: Mapping[str, float] | None, amplitude: float,
             duration: float, period: float, beats: int, dt: float, record_every: float, h5_path,
             json_path=None, progress=None, integrator: str = "forward-euler", prepace: int = 0,
             trace: tuple = ()) -> list[dict]:
    """Pace one cell and record it; returns the per-beat biomarkers (also written to HDF5 and JSON).

    amplitude in pA/pF (negative depolarises), duration and period in ms, dt (the integrator's step; CVODES chooses
    its own) and record_every (a whole multiple of dt) in ms. ``integrator``: one of INTEGRATORS. ``prepace``: beats
    paced first and not recorded (the recorded beats start from the state they reach). ``trace``: intermediates
    (currents, fluxes: ``cardiosim model info`` names them) recorded besides the states, CellML models only.
    The last sample of the trace is the paced state a tissue run can start from (``cell.initial_state``).
    Raises ValueError with a one-line message for bad arguments (before any file is
    touched) and SimulationError if a state goes bad (the file keeps what was computed, marked with ``error``; no
    biomarkers). ``progress(t_ms, total_ms)``, if given, is called every record interval.
    """
    run = _prepare(model_name, variant, overrides, amplitude, duration, period, beats, dt, record_every, h5_path,
                   json_path, integrator, prepace, trace)
    import h5py                                             # here, so the rest of cardiosim imports without it
    native = _stepper(run.model, integrator, run.amplitude, run.duration, run.period, run.record_every, run.dt)
    y = np.ascontiguousarray(run.model.initial_state(1))
    _prepace(native, y, run, progress)
    samples = _Samples(run.model, run.n_rec)
    no_json = "; no JSON written" if json_path else ""
    try:
        # No chunk cache: a write that fails (a full disk) fails at once and leaves no dirty chunk behind, which
        # HDF5 would try to write again at every flush and crash on at exit (cardiosim.output.writer does the same).
        with h5py.File(h5_path, "w", rdcc_nbytes=0) as f:
            try:
                out = _TraceFile(f, run, samples, h5py.string_dtype())
                n_done, error = _pace(run, native, y, samples, out, progress)
                out.flush()
                if error is not None:   # a trace that blew up has no beats to measure
                    raise SimulationError(f"{error}; {h5_path} keeps the trace up to t = {samples.t[n_done]:g} ms "
                                          f"(attribute 'error'){no_json}") from None
                if run.trace:
                    out.add_intermediates(run)
                rows, units = _biomarkers(run, samples, n_done)
                dvdt = _dvdt_sampling(run, samples, rows, n_done)
                if rows:
                    out.add_biomarkers(rows, units, dvdt)
            except SimulationError:    # the blow-up, raised above: the file's 'error' is its message already
                raise
            except (OSError, RuntimeError) as e:       # a full disk, a file-size limit: say so in the file if it can
                _mark(f, "error", f"stopped: cannot write ({io_reason(e)})")
                raise
    except SimulationError:            # (a RuntimeError too) the blow-up's own message, not a write failure's
        raise
    except (OSError, RuntimeError) as e:
        quiet_h5py_unraisable()
        raise SimulationError(f"cannot write {h5_path} ({io_reason(e)}); it keeps the trace written before"
                              f"{no_json}") from None
    if json_path is not None:
        _write_json(Path(json_path), run, rows, units, dvdt)
    return rows


@dataclass(frozen=True)
class _Run:
    """What run_cell runs, validated: the model, the pulse train (amplitude in pA/pF, times in ms) and the
    recording (``k`` steps of dt per record interval)."""
    model: object
    model_overrides: dict        # the parameters and tissue constants given, as the outputs store them
    integrator: str
    amplitude: float
    duration: float
    period: float
    beats: int
    dt: float
    record_every: float
    k: int
    prepace: int
    trace: tuple                 # intermediates recorded besides the states
    protocol: Protocol           # the recorded beats' pulse train, from t = 0

    @property
    def n_rec(self) -> int:
        """Record intervals of the recorded beats (n_rec + 1 samples)."""
        return int(round(self.beats * self.period / self.record_every))


def _prepare(model_name, variant, overrides, amplitude, duration, period, beats, dt, record_every, h5_path,
             json_path, integrator, prepace, trace) -> _Run:
    """run_cell's arguments checked (ValueError, one line, before any file is touched) and its model built."""
    amplitude, duration, period, beats, dt, record_every, k = _validate(
        amplitude, duration, period, beats, dt, record_every, h5_path, json_path)
    overrides = dict(overrides or {})
    for name, v in overrides.items():
        _check(math.isfinite(float(v)), f"--param {name}={v}: must be a finite number")
    cls = cells.model_class(model_name)                      # CellModelError (a ValueError) for bad names
    tissue = {name: float(overrides.pop(name, v)) for name, v in TISSUE_DEFAULTS.items() if name in cls.needs_tissue}
    model = cells.make(model_name, variant, overrides, tissue=tissue)
    _check(isinstance(prepace, (int, np.integer)) and not isinstance(prepace, bool) and prepace >= 0,
           f"prepace must be a whole number of beats >= 0, got {prepace!r}")
    trace = tuple(trace)
    if trace:
        _check(hasattr(model, "values"), f"--trace: records intermediates of CellML models; {model.name} is "
                                         f"built in (its states are all in the trace already)")
        known = model.values(model.initial_state(1), 0.0)
        for name in trace:
            _check(name in known, f"--trace {name}: {model.name} has no variable '{name}' (cardiosim model info "
                                  f"lists them)")
    _check_sizes(beats, period, record_every, h5_path, model.n_states + len(trace))
    return _Run(model=model, model_overrides={name: float(v) for name, v in {**overrides, **tissue}.items()},
                integrator=integrator, amplitude=amplitude, duration=duration, period=period, beats=beats, dt=dt,
                record_every=record_every, k=k, prepace=prepace, trace=trace,
                protocol=Protocol(start=0.0, duration=duration, period=period, count=beats))


def _prepace(native, y, run: _Run, progress) -> None:
    """``run.prepace`` beats of the same pulse train, not recorded: ``y`` becomes the state the recorded beats start
    from (at t = 0 again)."""
    if run.prepace and isinstance(native, _CvodeCell):
        native.prepace(run.prepace)
        y[:, 0] = native.sim.state()   # the t = 0 sample is the paced state (CVODES holds it; y is still unpaced)
    elif run.prepace:                  # one call per beat: the same pulse train, then the recorded beats from t = 0
        pre = native.stimulus([Protocol(start=0.0, duration=run.duration, period=run.period, count=1)],
                              [run.amplitude], 1)
        steps = int(round(run.period / run.dt))
        for b in range(run.prepace):
            native.advance(y, 0.0, run.dt, steps, pre)
            if progress:
                progress(-(run.prepace - b - 1) * run.period, run.beats * run.period)


class _Samples:
    """The recorded trace kept in memory for the biomarkers: the time, V and Cai (where the model has it) of every
    record, and the largest dV/dt of every record interval with the time it was evaluated at."""

    def __init__(self, model, n_rec: int):
        names = model.state_names
        self.iCa = names.index("Cai") if "Cai" in names else None
        self.t = np.empty(n_rec + 1)
        self.V = np.empty(n_rec + 1)
        self.Ca = np.empty(n_rec + 1) if self.iCa is not None else None
        self.dv_max = np.empty(n_rec)
        self.dv_t = np.empty(n_rec)

    def take(self, i: int, t: float, y) -> None:
        """Record ``i`` at time ``t`` (ms) of the one cell's state ``y`` (states x 1; V is state 0)."""
        self.t[i] = t
        self.V[i] = y[0, 0]
        if self.iCa is not None:
            self.Ca[i] = y[self.iCa, 0]


def _pace(run: _Run, native, y, samples: _Samples, out: "_TraceFile", progress):
    """The recorded beats: ``run.n_rec`` record intervals of ``run.k`` steps, every record kept in ``samples`` and
    appended to ``out``. Returns (intervals done, the SimulationError that stopped the run or None); that error is
    also the file's ``error`` attribute."""
    k, dt = run.k, run.dt

    def keep(i):
        samples.take(i, i * k * dt, y)
        out.append(y)

    keep(0)
    n_done = 0
    error = None
    stim = native.stimulus([run.protocol], [run.amplitude], 1)
    # the states at the last record times, enough of them for _REPLAY steps: what a blow-up is replayed from
    history = deque(maxlen=-(-_REPLAY // k) + 1)
    try:
        for i in range(run.n_rec):
            history.append((i, y.copy()))
            dmax, tmax = native.advance(y, i * k * dt, dt, k, stim, track_dvdt=True)
            samples.dv_max[i], samples.dv_t[i] = dmax[0], tmax[0]
            n_done = i + 1
            keep(i + 1)
            if progress:
                progress((i + 1) * k * dt, run.n_rec * k * dt)
    except SimulationError as e:
        error = SimulationError(_blow_up_cause(run, native, stim, history, str(e)))
        out.f.attrs["error"] = str(error)
    return n_done, error


_REPLAY = 64       # steps looked at beyond the last records before a blow-up, to tell what caused it
_SWINGS = 4        # increments of alternating sign in a row, up to the blow-up: a step above a stability limit
_TAIL = 16         # steps before the blow-up within which such a run must end (in the last few the overflow of
                   # one state drives the others every which way)


def _blow_up_cause(run: _Run, native, stim, history, message: str) -> str:
    """``message`` (an integrator's, ending with the unmeasured stability.STEP_HINT) with what the steps before the
    blow-up say of its cause instead. They are replayed one at a time from the last records kept (``history``: (i,
    state at record i)), without the range check, to the first state that is not finite or outside its range. A
    step above a state's stability limit makes that state swing up and down at every step (an explicit update
    y <- y + dt·f with dt·|∂f/∂y| > 1 overshoots, and above 2 the swings grow without bound), which the equations'
    own solution does not do at that resolution. Where a state swung so for _SWINGS increments in a row (each
    above round-off) ending within _TAIL steps of the blow-up, the time step is too large there, and dt·|∂f/∂y|
    where the swinging began (central differences of the model's NumPy equations) says by how much. A blow-up too violent to swing first
    shows dt·|∂f/∂y| above 2 at the last state in range, for a state the integrator steps explicitly
    (cardiosim.cells.stability.checked_states): the same verdict. Where neither holds, the step is not what
    the blow-up shows (an expression undefined at the state reached, the equations themselves driving a state out
    of its range), and the message says that a smaller step alone is unlikely to cure it. A state that left its
    range is followed for _SWINGS steps more (or to the first state that is not finite)."""
    model, dt, k = run.model, run.dt, run.k
    base = message[:-len(stability.STEP_HINT)] if message.endswith(stability.STEP_HINT) else message
    if not history:
        return message
    i0, y0 = history[0]
    y = np.ascontiguousarray(y0.copy())
    ys = [y[:, 0].copy()]
    lower = np.array([st.lower for st in model.states])
    upper = np.array([st.upper for st in model.states])
    out_at = None                        # the first replayed state outside its range: a few steps more after it
    try:
        for j in range(len(history) * k + _REPLAY):
            native.advance(y, (i0 * k + j) * dt, dt, 1, stim, check_range=False)
            ys.append(y[:, 0].copy())
            if out_at is None and not (np.all(ys[-1] >= lower) and np.all(ys[-1] <= upper)):
                out_at = len(ys)
            if out_at is not None and len(ys) > out_at + _SWINGS:
                break
    except SimulationError:              # not finite: that state is not kept
        pass
    ys = np.array(ys)
    d = np.diff(ys, axis=0)
    floor = 1e-10 * (np.abs(ys[:-1]) + 1e-300)
    # a swing: an increment above round-off whose sign is not its predecessor's
    swing = (d[1:] * d[:-1] < 0) & (np.abs(d[1:]) > floor[1:]) & (np.abs(d[:-1]) > floor[:-1])
    swung = []                           # (state, where its swinging began, dt·|∂f/∂y| there)
    for s in range(model.n_states):
        n, best = 0, None                 # the longest run of swings in a row that ends within _TAIL of the end
        for j in range(len(swing)):
            n = n + 1 if swing[j, s] else 0
            if n and j >= len(swing) - _TAIL and (best is None or n > best[1]):
                best = (j, n)
        if best is not None and best[1] + 1 >= _SWINGS:
            start = best[0] + 1 - best[1]    # the state the first of those swings left from
            t = (i0 * k + start) * dt
            jac = _own_derivatives(model, ys[start], [s], run.amplitude if run.protocol.active(t) else 0.0)[0]
            swung.append((s, start, -jac * dt if math.isfinite(jac) and jac < 0 else 0.0))
    fixes = []
    if swung:
        # the state whose own decay is the stiffest where it began to swing; the others swing with it
        s, start, h = max(swung, key=lambda x: (x[2], -x[1]))
        first = min(x[1] for x in swung)
        name = model.states[s].name
        others = len(swung) - 1
        what = (f"state {name}{f' (and {others} more)' if others else ''} swung up and down at every step from "
                f"t = {(i0 * k + first) * dt:.6g} ms on, ")
        what += (f"dt·|∂f/∂{name}| = {h:.3g} where it began (an explicit update overshoots above 1 and grows "
                 f"without bound above 2)" if h > 1.0 else
                 f"a mode that couples states (none of them has its own dt·|∂f/∂y| above 1 where it began; "
                 f"dt·|∂f/∂{name}| = {h:.3g})")
    else:
        # Too violent to swing before it (a state's limit far below the step): dt·|∂f/∂y| above 2 at the last
        # state in range, for the states the integrator steps explicitly (cardiosim.cells.stability).
        last = len(ys) - 1 if out_at is None else out_at - 2
        idx = stability.checked_states(model, run.integrator)
        t = (i0 * k + last) * dt
        jac = _own_derivatives(model, ys[last], idx, run.amplitude if run.protocol.active(t) else 0.0)
        h = np.where(np.isfinite(jac) & (jac < 0), -jac * dt, 0.0)
        if not idx or h.max() <= 2.0:
            return (f"{base}; no state swung up and down from step to step up to it, as one does where the step "
                    f"is above its stability limit, and none is beyond that limit at t = {t:.6g} ms: the time "
                    f"step is probably not the cause (an expression undefined at the state reached?), and a "
                    f"smaller dt alone is unlikely to cure it"
                    + ("; --integrator cvode runs the same equations with its own steps"
                       if cellml.is_cellml(getattr(model, "source", "")) else ""))
        s = idx[int(np.argmax(h))]
        name = model.states[s].name
        what = (f"the step is beyond the stability limit of state {name} at t = {t:.6g} ms (dt·|∂f/∂{name}| = "
                f"{h.max():.3g}; an explicit update grows without bound above 2)")
    if run.integrator == "forward-euler" and s in getattr(model, "gates", ()) and hasattr(model, "rush_larsen"):
        fixes.append("--integrator rush-larsen (the gates exactly)")
    if run.integrator != "grl1" and hasattr(model, "grl1"):
        fixes.append("--integrator grl1 (each state's own linearisation exactly)")
    fixes.append("a smaller --dt (such a limit moves with the state: check the result at half the step)")
    return f"{base}; {what}: the time step is too large there; use " + ", or ".join(fixes)


def _own_derivatives(model, y, idx, i_stim: float) -> np.ndarray:
    """∂f_s/∂y_s (1/ms) of the states ``idx`` at the state ``y`` (one cell), by central differences of the model's
    NumPy equations (one call, two columns per state)."""
    idx = list(idx)
    y = np.asarray(y, dtype=float)
    if not idx:
        return np.empty(0)
    h = 1e-6 * np.abs(y[idx]) + 1e-9
    col = np.repeat(y[:, None], 2 * len(idx), axis=1)
    for j, s in enumerate(idx):
        col[s, 2 * j] += h[j]
        col[s, 2 * j + 1] -= h[j]
    f = np.empty_like(col)
    with np.errstate(all="ignore"):
        model.rhs(0.0, col, i_stim, f)
    return np.array([(f[s, 2 * j] - f[s, 2 * j + 1]) / (2 * h[j]) for j, s in enumerate(idx)])


def _biomarkers(run: _Run, samples: _Samples, n_done: int) -> tuple[list[dict], dict]:
    """(rows, {column: unit}): the biomarkers of the complete beats of the first ``n_done`` record intervals (a
    beat is complete when the next onset, or the end, was reached)."""
    onsets = run.protocol.onsets(run.beats * run.period)
    n_s = n_done + 1
    t_end = samples.t[n_done]
    ends = [onsets[b + 1] if b + 1 < len(onsets) else run.beats * run.period for b in range(len(onsets))]
    complete = [o for o, end in zip(onsets, ends) if end <= t_end + 0.5 * run.record_every]
    rows = beat_biomarkers(samples.t[:n_s], samples.V[:n_s], complete,
                           None if samples.Ca is None else samples.Ca[:n_s], apd_origin="stimulus",
                           dvdt=samples.dv_max[:n_done], t_dvdt=samples.dv_t[:n_done])
    ca_unit = _ca_unit(run.model)
    return rows, {**UNITS, "Cai_rest": ca_unit, "Cai_peak": ca_unit}


#: Records of V within the upstroke (10 to 90 % of V_rest → V_peak) below which dV/dt at the record times does not
#: resolve its largest value. CVODES gives dV/dt only at the record times; with 3 samples inside the upstroke the
#: largest of them is within about a third of the upstroke of its peak (an upstroke's dV/dt is a hump over it),
#: with fewer the largest sample can be the stimulus's own dV/dt at its onset (80 mV/ms for -80 µA/µF at rest). The
#: fixed-step integrators give the largest dV/dt over every step (resolution dt), whatever the record interval.
UPSTROKE_SAMPLES = 3


def _dvdt_sampling(run: _Run, samples: _Samples, rows: list[dict], n_done: int) -> tuple[str, list[int]]:
    """(how dVdt_max was sampled, in words; the beats whose upstroke spans fewer than UPSTROKE_SAMPLES records,
    where that sampling is the record times). Warns (one line) where there are such beats."""
    if run.integrator != "cvode":
        return f"the largest dV/dt over the steps of {run.dt:g} ms", []
    how = f"dV/dt at the record times, every {run.record_every:g} ms (CVODES)"
    t, v = samples.t[:n_done + 1], samples.V[:n_done + 1]
    coarse = []
    for r in rows:
        a = r["V_peak"] - r["V_rest"]
        if not a > 10.0:                  # no action potential: no upstroke to resolve
            continue
        up = (t >= r["t_start"]) & (t <= r["t_start"] + r["t_peak"])
        inside = (v[up] > r["V_rest"] + 0.1 * a) & (v[up] < r["V_rest"] + 0.9 * a)
        if np.count_nonzero(inside) < UPSTROKE_SAMPLES:
            coarse.append(int(r["beat"]))
    if coarse:
        # lazy: cardiosim.runtime.log imports mpi4py, which this module does not
        from cardiosim.runtime import log
        which = f"beat {coarse[0]}" if len(coarse) == 1 else f"{len(coarse)} of the {len(rows)} beats"
        log.warning(f"dVdt_max of {which} is dV/dt at the record times (--integrator cvode, --record-every "
                    f"{run.record_every:g} ms), and the upstroke spans fewer than {UPSTROKE_SAMPLES} of them: too "
                    f"coarse to resolve its largest value (marked dVdt_max_unresolved in the outputs); record more "
                    f"often, or use a fixed-step integrator, whose dV/dt max is over every step")
    return how, coarse


class _TraceFile:
    """The run's HDF5 file (layout: the module docstring): the settings, then the trace in blocks of _BLOCK records
    as the run goes (a run stopped early leaves a readable file up to the last block), then the intermediates and
    the biomarkers. Its errors are the h5py calls' own (OSError, RuntimeError)."""

    def __init__(self, f, run: _Run, samples: _Samples, string_dtype):
        self.f, self.model, self.samples = f, run.model, samples
        model = run.model
        f.attrs.update({
            "model": model.name, "variant": model.variant or "", "overrides": json.dumps(run.model_overrides),
            "amplitude": run.amplitude, "duration": run.duration, "period": run.period, "beats": run.beats,
            "dt": run.dt, "record_every": run.record_every, "cardiosim_version": __version__,
            "integrator": run.integrator, "prepace": int(run.prepace),
            "state_names": np.array(model.state_names, dtype=string_dtype),
        })
        self.group = f.create_group("trace")
        self.dsets = {"t": _growing(self.group, "t", "ms")}
        for st in model.states:
            self.dsets[st.name] = _growing(self.group, st.name, st.unit)
        gd = f.create_group("dvdt")
        self.d_max = _growing(gd, "max", "mV/ms")
        self.d_t = _growing(gd, "t", "ms")
        self.buf = np.empty((model.n_states, _BLOCK))
        self.n_buf = 0
        self.written = 0              # samples written to /trace

    def append(self, y) -> None:
        """One record of the state ``y`` (its time is already in the samples); written when a block is full."""
        self.buf[:, self.n_buf] = y[:, 0]
        self.n_buf += 1
        if self.n_buf == _BLOCK:
            self.flush()

    def flush(self) -> None:
        """Write the buffered records, with the samples' times and one dV/dt sample per completed interval."""
        n_buf, written, s = self.n_buf, self.written, self.samples
        if not n_buf:
            return
        for i, st in enumerate(self.model.states):
            ds = self.dsets[st.name]
            ds.resize((written + n_buf,))
            ds[written:] = self.buf[i, :n_buf]
        self.dsets["t"].resize((written + n_buf,))
        self.dsets["t"][written:] = s.t[written:written + n_buf]
        n_dv = max(written + n_buf - 1, 0)          # one dV/dt sample per completed interval
        for ds, src in ((self.d_max, s.dv_max), (self.d_t, s.dv_t)):
            old = ds.shape[0]
            ds.resize((n_dv,))
            ds[old:] = src[old:n_dv]
        self.written += n_buf
        self.n_buf = 0
        self.f.flush()

    def add_intermediates(self, run: _Run) -> None:
        """/trace/<name> of every intermediate of ``run.trace``, from the recorded states, by the NumPy twin."""
        model = self.model
        ys = np.vstack([self.dsets[st.name][:] for st in model.states])
        ts = self.dsets["t"][:]
        i_stim = np.where([run.protocol.active(t) for t in ts], run.amplitude, 0.0)
        vals = model.values(ys, i_stim)
        units = model.intermediate_units() if hasattr(model, "intermediate_units") else {}
        for name in run.trace:
            ds = self.group.create_dataset(name, data=np.asarray(vals[name], dtype="f8"))
            ds.attrs["unit"] = units.get(name, "")

    def add_biomarkers(self, rows: list[dict], units: dict, dvdt: tuple[str, list[int]]) -> None:
        """/biomarkers: one row per beat, its columns' units in the attribute ``units``; how dVdt_max was sampled
        and the beats whose upstroke that does not resolve (:func:`_dvdt_sampling`) in ``dVdt_max_sampling`` and
        ``dVdt_max_unresolved`` (JSON list of beat numbers)."""
        cols = list(rows[0])
        table = np.array([tuple(r[c] for c in cols) for r in rows],
                         dtype=[(c, "i8" if c == "beat" else "f8") for c in cols])
        ds = self.f.create_dataset("biomarkers", data=table)
        ds.attrs["units"] = json.dumps({c: units[c] for c in cols})
        ds.attrs["apd_origin"] = "stimulus"
        ds.attrs["dVdt_max_sampling"] = dvdt[0]
        ds.attrs["dVdt_max_unresolved"] = json.dumps(dvdt[1])


def _growing(group, name: str, unit: str):
    """A float64 dataset of ``group`` that starts empty and grows by whole blocks."""
    ds = group.create_dataset(name, (0,), maxshape=(None,), dtype="f8", chunks=(_BLOCK,))
    ds.attrs["unit"] = unit
    return ds


def _write_json(path: Path, run: _Run, rows: list[dict], units: dict, dvdt: tuple[str, list[int]]) -> None:
    """The JSON file: the run's settings and the biomarkers (NaN as null), with how dVdt_max was sampled and the
    beats whose upstroke that does not resolve (:func:`_dvdt_sampling`)."""
    model = run.model
    doc = {
        "model": model.name, "variant": model.variant, "overrides": run.model_overrides,
        "protocol": {"amplitude": run.amplitude, "duration": run.duration, "period": run.period,
                     "beats": run.beats, "start": 0.0},
        "dt": run.dt, "record_every": run.record_every, "apd_origin": "stimulus",
        "units": {c: units[c] for c in (rows[0] if rows else UNITS)},
        "beats": [{c: _json_value(v) for c, v in r.items()} for r in rows],
        "dVdt_max_sampling": dvdt[0], "dVdt_max_unresolved": dvdt[1],
        "error": None,               # a run that stopped early raised before: it writes no JSON
        "cardiosim_version": __version__,
    }
    _write_text(path, json.dumps(doc, indent=2) + "\n")


def _mark(f, name: str, value: str) -> None:
    """Set an attribute of a file whose writes are failing, if it still can be (it says why the trace ends)."""
    try:
        f.attrs[name] = value
    except (OSError, RuntimeError):
        pass


def _write_text(path: Path, text: str) -> None:
    """Write ``text`` whole or not at all (a temporary file renamed into place); a failure is one line."""
    tmp = path.with_name(f".{path.name}.part")
    try:
        tmp.write_text(text)
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise SimulationError(f"cannot write {path} ({io_reason(e)}); nothing written there") from None


def _ca_unit(model) -> str:
    if "Cai" in model.state_names:
        return model.states[model.state_index("Cai")].unit
    return "-"


def restitution(model_name: str, variant: str | None, overrides: Mapping[str, float] | None, amplitude: float,
                duration: float, period: float, prepace: int, intervals, dt: float, integrator: str = "rush-larsen",
                record_every: float = 0.1) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """The S1–S2 restitution protocol: ``prepace`` S1 beats every ``period`` ms (not recorded), then, from that
    paced state, for each coupling interval CI of ``intervals`` (ms): one more S1 at t = 0 and an S2 at t = CI.
    Returns (rows, t, V): one row per CI with CI, APD90 of the S1 and of the S2 beat (from their stimulus onsets),
    the diastolic interval DI = CI − APD90(S1), V_peak of the S2 beat (the largest V from its onset on),
    ``captured`` (1 or 0) and ``reason`` (why not, else ""); t (ms) and V (mV, one row per CI) are the recorded
    traces, to CI + period.

    APD90(S1) is that of the last S1 beat, the one at t = 0, paced on its own for a whole period: with an S2 inside
    its action potential (CI < APD90) the S2's trace cuts it short. An S2 captures where its response is an action
    potential: V rises from its value at the S2 onset by at least CAPTURE_RISE of the S1 beat's amplitude
    (V_peak − V_rest) to a peak above CAPTURE_PEAK mV (or, for a model whose S1 peak stays below that, above the
    S1 beat's midpoint). Otherwise (refractory: a graded response, or the S1's own repolarisation measured from
    the S2 onset) APD90_S2 is NaN and ``reason`` says which test failed. A pulse that alone moves V by that much
    (|amplitude|·duration, mV for a current per capacitance) defeats the test: a warning says so."""
    overrides = dict(overrides or {})
    cls = cells.model_class(model_name)
    tissue = {k: float(overrides.pop(k, v)) for k, v in TISSUE_DEFAULTS.items() if k in cls.needs_tissue}
    model = cells.make(model_name, variant, overrides, tissue=tissue)
    intervals = [float(ci) for ci in intervals]
    _check(intervals and all(math.isfinite(ci) and ci > duration for ci in intervals),
           f"restitution: every coupling interval must exceed the pulse ({duration:g} ms); got {intervals}")
    _check(isinstance(prepace, (int, np.integer)) and prepace >= 1, "restitution: --prepace N >= 1 S1 beats")
    dt = _positive("dt", dt, "ms")
    k = round(record_every / dt)
    _check(k >= 1 and abs(k * dt - record_every) <= 1e-9 * record_every,
           f"record_every ({record_every:g} ms) must be a whole multiple of dt ({dt:g} ms)")
    y0 = np.ascontiguousarray(model.initial_state(1))
    if integrator == "cvode":
        import myokit
        cv = _stepper(model, "cvode", amplitude, duration, period, record_every, dt)
        cv.prepace(prepace)
    else:
        step = _stepper(model, integrator, amplitude, duration, period, record_every, dt)
        s1 = step.stimulus([Protocol(0.0, duration, 0.0, 1)], [amplitude], 1)
        for _ in range(prepace):
            step.advance(y0, 0.0, dt, int(round(period / dt)), s1)
    span = max(intervals) + period
    n = int(round(span / record_every))
    t = np.arange(n + 1) * record_every

    def paced(onsets, n_rec):
        """V every record_every ms for n_rec records from the paced state, a pulse at each of ``onsets``."""
        if integrator == "cvode":
            p = myokit.Protocol()
            for on in onsets:
                p.schedule(amplitude, on, duration)
            cv.sim.reset()
            cv.sim.set_protocol(p)
            d = cv.sim.run(n_rec * record_every + 0.5 * record_every, log=[cv.names[0]], log_times=t[:n_rec + 1])
            return np.asarray(d[cv.names[0]])
        y = y0.copy()
        stim = step.stimulus([Protocol(on, duration, 0.0, 1) for on in onsets], [amplitude] * len(onsets), 1)
        v = np.empty(n_rec + 1)
        v[0] = y[0, 0]
        for i in range(n_rec):
            step.advance(y, i * k * dt, dt, k, stim)
            v[i + 1] = y[0, 0]
        return v

    n1 = int(round(period / record_every))        # the last S1 beat on its own: its APD90 uncut by an S2
    s1 = beat_biomarkers(t[:n1 + 1], paced([0.0], n1), [0.0], apd_origin="stimulus")[0]
    a1 = s1["V_peak"] - s1["V_rest"]
    peak_needed = min(CAPTURE_PEAK, s1["V_rest"] + 0.5 * a1)
    if abs(amplitude) * duration >= CAPTURE_RISE * a1:
        # lazy: cardiosim.runtime.log imports mpi4py, which this module does not
        from cardiosim.runtime import log
        log.warning(f"restitution: the S2 pulse alone moves V by up to {abs(amplitude) * duration:.3g} mV "
                    f"(|amplitude|·duration), at least {CAPTURE_RISE:g} of the S1 beat's {a1:.3g} mV: the test "
                    f"for capture cannot tell a refractory response from an action potential; use a shorter or "
                    f"weaker pulse")
    rows, traces = [], []
    for ci in intervals:
        v = paced([0.0, ci], n)
        s2 = beat_biomarkers(t, v, [0.0, ci], apd_origin="stimulus")[1]
        rise = s2["V_peak"] - s2["V_rest"]
        reason = ""
        if s2["V_peak"] < peak_needed:
            reason = f"no capture: V_peak {s2['V_peak']:.1f} mV, below {peak_needed:.3g} mV"
        elif rise < CAPTURE_RISE * a1:
            reason = (f"no capture: V rises {rise:.1f} mV from the S2 onset, under {CAPTURE_RISE:g} of the S1 "
                      f"beat's {a1:.1f} mV")
        rows.append({"CI": ci, "DI": ci - s1["APD90"], "APD90_S2": float("nan") if reason else s2["APD90"],
                     "APD90_S1": s1["APD90"], "V_peak_S2": s2["V_peak"], "captured": 0.0 if reason else 1.0,
                     "reason": reason})
        traces.append(v)
    return rows, t, np.array(traces)


CAPTURE_RISE = 0.5     # an S2 response is an action potential where V rises by this share of the S1 amplitude
CAPTURE_PEAK = 0.0     # ... to a peak above this (mV; the S1 midpoint for a model whose S1 peak stays below it)

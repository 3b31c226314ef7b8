"""Single-cell runs: pace one cell with a pulse train, integrate it with Forward Euler (the model's native C driver,
or NumPy for models without a C kernel: Mitchell–Schaeffer, Pathmanathan–Gray), write the trace and per-beat
biomarkers.

    run_cell("bondarenko", "apical", {}, amplitude=-80, duration=0.5, period=1000, beats=10, dt=1e-4,
             record_every=0.05, h5_path="cell.h5", json_path="cell.json")

The first stimulus starts at t = 0; beat b (1-based) starts at (b − 1)·period.

HDF5 layout (h5py; units in each dataset's ``unit`` attribute):

    /                 attrs: model, variant, overrides (JSON), amplitude (pA/pF), duration, period (ms), beats,
                      dt (ms), record_every (ms), state_names, cardiosim_version; ``error`` if the run stopped early
    /trace/t          (n,) ms, the record times 0, record_every, 2·record_every, ...
    /trace/<state>    (n,) each state of the model at those times (e.g. /trace/V in mV, /trace/Cai in µM)
    /dvdt/max         (n − 1,) mV/ms, the largest dV/dt over the substeps of each record interval
    /dvdt/t           (n − 1,) ms, the time that largest dV/dt was evaluated at (resolution dt)
    /biomarkers       table, one row per complete beat, columns as cardiosim.analysis.biomarkers.UNITS
                      (attribute ``units``: JSON {column: unit}); APDs measured from the stimulus onset

The trace is written in blocks as the run goes, so a run stopped by an error or a kill still leaves a readable file
up to the last block. The JSON file (optional) holds the run's settings and the same biomarkers
({"model": ..., "units": {...}, "beats": [{...}, ...]}, NaN written as null).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping

import numpy as np

from cardiosim import __version__, cells
from cardiosim.analysis.biomarkers import UNITS, beat_biomarkers
from cardiosim.runtime.errors import SimulationError, io_reason, quiet_h5py_unraisable
from cardiosim.cells.stimulus import Protocol

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
    from cardiosim.runtime.resources import check_fits
    samples = beats * period / record_every + 1
    what = (f"--beats {beats} of --period {period:g} ms recorded every {record_every:g} ms: {samples:.4g} samples "
            f"of the trace")
    check_fits(_MEMORY_PER_SAMPLE * samples, what, "record less often (--record-every) or pace fewer beats")
    from cardiosim.runtime.resources import file_size_limit
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
    dV/dt evaluated at every substep, the states checked (finite, in range) at every substep."""

    def __init__(self, model):
        self.model = model

    def stimulus(self, protocols, amps, n_cells):
        return list(zip(protocols, amps))

    def advance(self, y, t0, dt, k, stim, track_dvdt=False):
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
            bad = m.find_bad_state(y)
            if bad is not None:
                st, c = m.states[bad[0]], bad[1]
                what = "is not finite" if not np.isfinite(y[bad]) else f"left its range [{st.lower:g}, {st.upper:g}]"
                raise SimulationError(f"{m.name}: cell {c}, state {st.name} = {y[bad]:.6g} {st.unit} {what} at "
                                      f"t = {t + dt:.6g} ms (Forward Euler, dt = {dt:g} ms); the time step is "
                                      f"probably too large, try a smaller dt")
        return (dmax, tmax) if track_dvdt else None


INTEGRATORS = ("forward-euler", "rush-larsen", "grl1", "cvode")


class _CvodeCell:
    """Myokit's CVODES simulation of a CellML model behind the native driver's ``advance``: the independent,
    adaptive integrator (what Myokit's users run), for long pre-pacing and as a reference. The pulse train is
    Myokit's (``blocktrain``: the same times as cardiosim's Protocol). Myokit is asked for one beat of records at a
    time and ``advance`` serves them; the dV/dt column is dV/dt at the record times (CVODES takes its own steps)."""

    def __init__(self, model, amplitude, duration, period, record_every):
        from cardiosim.cells import cellml
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
    from cardiosim.runtime import log
    from cardiosim.cells import stability
    msg = stability.step_warning(model, integrator, dt, option="--integrator {}", step_is="--dt",
                                 smaller=lambda d: f"--dt {d:g}")
    if msg:
        log.warning(msg)


def _stepper(model, integrator: str, amplitude, duration, period, record_every, dt: float):
    """What advances the cell: the native driver (forward-euler, rush-larsen, grl1), NumPy Forward Euler for a
    model without a C kernel, or CVODES through Myokit (CellML models). Warns where ``dt`` (ms) is beyond a
    stability limit of the integrator, before any step is taken."""
    from cardiosim.cells import cellml
    _check(integrator in INTEGRATORS, f"integrator must be one of {', '.join(INTEGRATORS)}, got {integrator!r}")
    warn_unstable_step(model, integrator, dt)
    if integrator == "cvode":
        _check(cellml.is_cellml(getattr(model, "source", "")),
               f"integrator cvode: runs CellML models (through Myokit); {model.name} is a built-in model")
        return _CvodeCell(model, amplitude, duration, period, record_every)
    if not model.kernel_name:
        _check(integrator == "forward-euler", f"integrator {integrator}: {model.name} has Forward Euler only")
        return _NumpyCell(model)
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
    amplitude, duration, period, beats, dt, record_every, k = _validate(
        amplitude, duration, period, beats, dt, record_every, h5_path, json_path)
    overrides = dict(overrides or {})
    for name, v in overrides.items():
        _check(math.isfinite(float(v)), f"--param {name}={v}: must be a finite number")
    cls = cells.model_class(model_name)                      # CellModelError (a ValueError) for bad names
    tissue = {k: float(overrides.pop(k, v)) for k, v in TISSUE_DEFAULTS.items() if k in cls.needs_tissue}
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
    model_overrides = {k: float(v) for k, v in {**overrides, **tissue}.items()}
    import h5py                                             # here, so the rest of cardiosim imports without it
    native = _stepper(model, integrator, amplitude, duration, period, record_every, dt)
    protocol = Protocol(start=0.0, duration=duration, period=period, count=beats)
    onsets = protocol.onsets(beats * period)
    y = np.ascontiguousarray(model.initial_state(1))
    if prepace and isinstance(native, _CvodeCell):
        native.prepace(prepace)
    elif prepace:                      # one call per beat: the same pulse train, then the recorded beats from t = 0
        pre = native.stimulus([Protocol(start=0.0, duration=duration, period=period, count=1)], [amplitude], 1)
        steps = int(round(period / dt))
        for b in range(prepace):
            native.advance(y, 0.0, dt, steps, pre)
            if progress:
                progress(-(prepace - b - 1) * period, beats * period)
    n_rec = int(round(beats * period / record_every))       # record intervals; n_rec + 1 samples
    names = model.state_names
    iV = 0
    iCa = names.index("Cai") if "Cai" in names else None

    t_all = np.empty(n_rec + 1)
    V_all = np.empty(n_rec + 1)
    Ca_all = np.empty(n_rec + 1) if iCa is not None else None
    dv_max = np.empty(n_rec)
    dv_t = np.empty(n_rec)

    try:
        # No chunk cache: a write that fails (a full disk) fails at once and leaves no dirty chunk behind, which
        # HDF5 would try to write again at every flush and crash on at exit (cardiosim.output.writer does the same).
        with h5py.File(h5_path, "w", rdcc_nbytes=0) as f:
            try:
                f.attrs.update({
                    "model": model.name, "variant": model.variant or "", "overrides": json.dumps(model_overrides),
                    "amplitude": amplitude, "duration": duration, "period": period, "beats": beats, "dt": dt,
                    "record_every": record_every, "cardiosim_version": __version__, "integrator": integrator,
                    "prepace": int(prepace),
                    "state_names": np.array(names, dtype=h5py.string_dtype()),
                })
                g = f.create_group("trace")
                dsets = {"t": g.create_dataset("t", (0,), maxshape=(None,), dtype="f8", chunks=(_BLOCK,))}
                dsets["t"].attrs["unit"] = "ms"
                for st in model.states:
                    dsets[st.name] = g.create_dataset(st.name, (0,), maxshape=(None,), dtype="f8", chunks=(_BLOCK,))
                    dsets[st.name].attrs["unit"] = st.unit
                gd = f.create_group("dvdt")
                d_max = gd.create_dataset("max", (0,), maxshape=(None,), dtype="f8", chunks=(_BLOCK,))
                d_max.attrs["unit"] = "mV/ms"
                d_t = gd.create_dataset("t", (0,), maxshape=(None,), dtype="f8", chunks=(_BLOCK,))
                d_t.attrs["unit"] = "ms"

                buf = np.empty((model.n_states, _BLOCK))
                n_buf = 0
                written = 0              # samples written to /trace

                def flush():
                    nonlocal n_buf, written
                    if n_buf:
                        for s, st in enumerate(model.states):
                            ds = dsets[st.name]
                            ds.resize((written + n_buf,))
                            ds[written:] = buf[s, :n_buf]
                        dsets["t"].resize((written + n_buf,))
                        dsets["t"][written:] = t_all[written:written + n_buf]
                        n_dv = max(written + n_buf - 1, 0)          # one dV/dt sample per completed interval
                        for ds, src in ((d_max, dv_max), (d_t, dv_t)):
                            old = ds.shape[0]
                            ds.resize((n_dv,))
                            ds[old:] = src[old:n_dv]
                        written += n_buf
                        n_buf = 0
                        f.flush()

                def record(i):
                    nonlocal n_buf
                    t_all[i] = i * k * dt
                    V_all[i] = y[iV, 0]
                    if iCa is not None:
                        Ca_all[i] = y[iCa, 0]
                    buf[:, n_buf] = y[:, 0]
                    n_buf += 1
                    if n_buf == _BLOCK:
                        flush()

                record(0)
                n_done = 0
                error = None
                stim = native.stimulus([protocol], [amplitude], 1)
                try:
                    for i in range(n_rec):
                        dmax, tmax = native.advance(y, i * k * dt, dt, k, stim, track_dvdt=True)
                        dv_max[i], dv_t[i] = dmax[0], tmax[0]
                        n_done = i + 1
                        record(i + 1)
                        if progress:
                            progress((i + 1) * k * dt, n_rec * k * dt)
                except SimulationError as e:
                    error = e
                    f.attrs["error"] = str(e)
                flush()
                if error is not None:   # a trace that blew up has no beats to measure
                    raise SimulationError(f"{error}; {h5_path} keeps the trace up to t = {t_all[n_done]:g} ms "
                                          f"(attribute 'error'){'; no JSON written' if json_path else ''}") from None

                if trace:                    # intermediates from the recorded states, by the NumPy twin
                    ys = np.vstack([dsets[st.name][:] for st in model.states])
                    ts = dsets["t"][:]
                    i_stim = np.where([protocol.active(t) for t in ts], amplitude, 0.0)
                    vals = model.values(ys, i_stim)
                    units = model.intermediate_units() if hasattr(model, "intermediate_units") else {}
                    for name in trace:
                        ds = g.create_dataset(name, data=np.asarray(vals[name], dtype="f8"))
                        ds.attrs["unit"] = units.get(name, "")
                # Biomarkers of the complete beats only (a beat is complete when the next onset, or the end, was
                # reached).
                n_s = n_done + 1
                t_end = t_all[n_done]
                ends = [onsets[b + 1] if b + 1 < len(onsets) else beats * period for b in range(len(onsets))]
                complete = [o for o, end in zip(onsets, ends) if end <= t_end + 0.5 * record_every]
                rows = beat_biomarkers(t_all[:n_s], V_all[:n_s], complete, None if Ca_all is None else Ca_all[:n_s],
                                       apd_origin="stimulus", dvdt=dv_max[:n_done], t_dvdt=dv_t[:n_done])
                units = {**UNITS, "Cai_rest": _ca_unit(model), "Cai_peak": _ca_unit(model)}
                if rows:
                    cols = list(rows[0])
                    table = np.array([tuple(r[c] for c in cols) for r in rows],
                                     dtype=[(c, "i8" if c == "beat" else "f8") for c in cols])
                    ds = f.create_dataset("biomarkers", data=table)
                    ds.attrs["units"] = json.dumps({c: units[c] for c in cols})
                    ds.attrs["apd_origin"] = "stimulus"
            except (OSError, RuntimeError) as e:       # a full disk, a file-size limit: say so in the file if it can
                _mark(f, "error", f"stopped: cannot write ({io_reason(e)})")
                raise
    except (OSError, RuntimeError) as e:
        quiet_h5py_unraisable()
        raise SimulationError(f"cannot write {h5_path} ({io_reason(e)}); it keeps the trace written before"
                              f"{'; no JSON written' if json_path else ''}") from None

    if json_path is not None:
        doc = {
            "model": model.name, "variant": model.variant, "overrides": model_overrides,
            "protocol": {"amplitude": amplitude, "duration": duration, "period": period, "beats": beats,
                         "start": 0.0},
            "dt": dt, "record_every": record_every, "apd_origin": "stimulus",
            "units": {c: units[c] for c in (rows[0] if rows else UNITS)},
            "beats": [{c: _json_value(v) for c, v in r.items()} for r in rows],
            "error": None if error is None else str(error),
            "cardiosim_version": __version__,
        }
        _write_text(Path(json_path), json.dumps(doc, indent=2) + "\n")
    return rows


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
    the diastolic interval DI = CI − APD90(S1) and V_peak of the S2 beat (an S2 that does not excite has a few ms of
    APD90: refractory); t (ms) and V (mV, one row per CI) are the recorded traces, to CI + period."""
    from cardiosim.analysis.biomarkers import beat_biomarkers
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
    rows, traces = [], []
    for ci in intervals:
        if integrator == "cvode":
            p = myokit.Protocol()
            p.schedule(amplitude, 0.0, duration)
            p.schedule(amplitude, ci, duration)
            cv.sim.reset()
            cv.sim.set_protocol(p)
            vname = cv.names[0]
            d = cv.sim.run(span + 0.5 * record_every, log=[vname], log_times=t)
            v = np.asarray(d[vname])
        else:
            y = y0.copy()
            stim = step.stimulus([Protocol(0.0, duration, 0.0, 1), Protocol(ci, duration, 0.0, 1)],
                                 [amplitude, amplitude], 1)
            v = np.empty(n + 1)
            v[0] = y[0, 0]
            for i in range(n):
                step.advance(y, i * k * dt, dt, k, stim)
                v[i + 1] = y[0, 0]
        b = beat_biomarkers(t, v, [0.0, ci], apd_origin="stimulus")
        s1, s2 = b[0], b[1]
        rows.append({"CI": ci, "DI": ci - s1["APD90"], "APD90_S2": s2["APD90"], "APD90_S1": s1["APD90"],
                     "V_peak_S2": s2["V_peak"]})
        traces.append(v)
    return rows, t, np.array(traces)

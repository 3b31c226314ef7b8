"""Reading a run's HDF5 file (docs/user/output-format.md), and ``cardiosim inspect``.

:class:`Results` opens a file written by :mod:`cardiosim.output.writer` and gives its complete entries only: a run that
was killed leaves its datasets at their planned length, and an entry (snapshot or probe sample) is complete when
its time is finite. It needs h5py and NumPy only (no MPI, no PETSc), opens files that a run is still writing
(without HDF5 file locking), and turns every problem with the file into one :class:`UserError` line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from cardiosim.runtime.errors import UserError
from cardiosim.analysis.checks import DEFAULTS, Limits, from_results
from cardiosim.analysis.maps import activation_time, beats, cv_along, cv_beats, cv_map, ecg_features
from cardiosim.runtime.timing import table
from cardiosim.output.cell_results import CellFile, cell_kind, describe_cell

FORMATS = ("cardiosim-1", "cardiosim-2")


def complete(times) -> int:
    """How many leading entries of ``times`` are finite (= complete)."""
    finite = np.isfinite(np.asarray(times, dtype=float))
    return int(finite.size if finite.all() else np.argmin(finite))


class Results:
    def __init__(self, path):
        import h5py
        self.path = path = Path(path)
        if not path.exists():
            raise UserError(f"{path}: no such file")
        if path.is_dir():
            raise UserError(f"{path}: is a directory, not a cardiosim result file")
        try:
            is_hdf5 = h5py.is_hdf5(str(path))
        except OSError as e:
            raise UserError(f"{path}: cannot be read ({e.strerror or e})") from None
        if not is_hdf5:
            raise UserError(f"{path}: not an HDF5 file (expected the .h5 file of a cardiosim run)")
        try:
            self.f = f = h5py.File(path, "r", locking=False)
        except OSError as e:
            raise UserError(f"{path}: cannot be opened as HDF5 ({e})") from None
        fmt = f.attrs.get("format")
        fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
        if fmt not in FORMATS or "grid" not in f or "fields" not in f:
            f.close()
            what = f"format attribute {fmt!r}" if fmt is not None else "no format attribute"
            raise UserError(f"{path}: not a cardiosim run file ({what}; expected one of {', '.join(FORMATS)}) "
                            f"nor a file of cardiosim cell")
        g = f["grid"].attrs
        self.dim = int(g["dim"])
        self.shape = tuple(int(n) for n in g["shape"])          # x first
        self.spacing = tuple(float(h) for h in g["spacing"])     # cm
        self.size = tuple(float(s) for s in g["size"])
        self.axes = [f["grid"][a][:] for a in "xyz"[: self.dim]]
        t = f["fields/time"][:]
        self.n_snapshots = complete(t)
        self.times = t[: self.n_snapshots]
        # Vm and phi_e first, then the cell states of output.states, in the file's order
        self.fields = [n for n in ("Vm", "phi_e") if n in f["fields"]] + [
            n for n in f["fields"] if n not in ("Vm", "phi_e", "time")]
        pt = f["probes/time"][:] if "probes/time" in f else np.empty(0)
        self.n_samples = complete(pt)
        self.probe_times = pt[: self.n_samples]
        self.probes = [n for n in f["probes"] if n != "time"] if "probes" in f else []
        self.ecg = list(f["ecg"]) if "ecg" in f else []   # pseudo-ECG traces, sampled at probe_times
        self.maps = sorted(f["maps"]) if "maps" in f else []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        self.f.close()

    # -- metadata ------------------------------------------------------------------------------------------------
    def attr(self, name: str, default=None):
        v = self.f.attrs.get(name, default)
        return v.decode() if isinstance(v, bytes) else v

    @property
    def status(self) -> str:
        """finished | stopped (an error ended it) | running (still running, or killed)."""
        return self.attr("status", "finished")   # cardiosim-1 files had no status

    @property
    def stopped_by(self) -> str | None:
        """For a stopped run: "checkpoint" (a clean stop on a signal, resumable), "error", or None where the file
        predates the attribute."""
        return self.attr("stopped_by")

    @property
    def warnings(self) -> list[str] | None:
        """The end-of-run checks' lines the run stored (cardiosim/analysis/checks.py); None where it did not finish or
        predates them."""
        w = self.attr("warnings")
        return None if w is None else json.loads(w)

    @property
    def overrides(self) -> list[str]:
        """The --set options of the run (empty where none, or the file predates them)."""
        return json.loads(self.attr("overrides", "[]"))

    def config_text(self) -> str:
        """The config that ran: the file's text with every --set applied (TOML)."""
        return self.attr("config_effective") or self.attr("config", "")

    def config_data(self) -> dict:
        """The config that ran, as TOML data ({} where it does not read)."""
        try:
            import tomllib
        except ModuleNotFoundError:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            return tomllib.loads(self.config_text())
        except tomllib.TOMLDecodeError:
            return {}

    def checks_limits(self):
        """The run's [checks] limits (cardiosim.analysis.checks.Limits), the defaults where the file has none."""
        try:
            given = self.config_data().get("checks", {})
            return Limits(**{k: float(v) for k, v in given.items() if k in DEFAULTS})
        except (TypeError, ValueError, AttributeError):
            return Limits()

    @property
    def layout(self) -> dict:
        return json.loads(self.attr("layout", "{}"))

    @property
    def units(self) -> dict:
        return json.loads(self.attr("units", "{}"))

    def timing(self) -> dict | None:
        """{phase: {"mean": s, "max": s}} as in cardiosim.runtime.timing, or None if the run did not finish."""
        if "timing" not in self.f:
            return None
        a = self.f["timing"].attrs
        return {k: {"max": float(a[k]), "mean": float(a.get(f"{k}_mean", a[k]))}
                for k in a if not k.endswith("_mean") and k != "units"}

    # -- data ----------------------------------------------------------------------------------------------------
    def check_field(self, name: str) -> None:
        if name not in self.fields:
            have = ", ".join(self.fields) or "none"
            why = " (a monodomain run has no phi_e)" if name == "phi_e" and self.attr("equations") == "monodomain" \
                else ""
            raise UserError(f"--field {name}: not in {self.path}{why}; fields in the file: {have}")

    def field(self, name: str, i: int) -> np.ndarray:
        """Snapshot i of a field, shape ([nz,] [ny,] nx): one of the n_snapshots complete ones (a negative i counts
        from the last of them). A killed run's datasets keep their planned length, filled with zeros past what was
        written: an index there is refused (UserError), not read."""
        self.check_field(name)
        n = self.n_snapshots
        try:
            j = int(i)
        except (TypeError, ValueError):
            raise UserError(f"{self.path}: snapshot index {i!r} is not a whole number") from None
        if not -n <= j < n:
            planned = self.f["fields"][name].shape[0]
            have = f"0 to {n - 1} (t = {self.times[0]:g} to {self.times[-1]:g} ms)" if n else "none"
            more = f"; the other {planned - n} of the {planned} planned were never written" if planned > n else ""
            raise UserError(f"{self.path}: snapshot {j} of {name} does not exist; the snapshots written are {have}"
                            f"{more}")
        return self.f["fields"][name][j % n]

    def snapshot_index(self, t: float) -> int:
        """The snapshot nearest to time t (ms); t must lie within the snapshots' range."""
        if self.n_snapshots == 0:
            raise UserError(f"{self.path}: holds no complete snapshot")
        lo, hi = float(self.times[0]), float(self.times[-1])
        tol = 1e-9 * max(1.0, abs(hi))
        if not lo - tol <= t <= hi + tol:
            raise UserError(f"--times {t:g}: outside the snapshots of {self.path}, which cover {lo:g} to {hi:g} ms")
        return int(np.argmin(np.abs(self.times - t)))

    def field_range(self, name: str) -> tuple[float, float]:
        """(min, max) over all complete snapshots, read one snapshot at a time."""
        lo, hi = np.inf, -np.inf
        ds = self.f["fields"][name]
        for i in range(self.n_snapshots):
            a = ds[i]
            lo, hi = min(lo, float(np.nanmin(a))), max(hi, float(np.nanmax(a)))
        return lo, hi

    def probe(self, name: str) -> dict:
        """{"position": cm, "node_position": cm, <field>: trace} of one probe (complete samples)."""
        self._written("probe", name, self.probes)
        g = self.f["probes"][name]
        out = {"position": np.asarray(g.attrs["position"]), "node_position": np.asarray(g.attrs["node_position"])}
        for fld in g:
            out[fld] = g[fld][: self.n_samples]
        return out

    def ecg_trace(self, name: str) -> np.ndarray:
        """One pseudo-ECG trace (mV, an electrode's or a lead's) at probe_times (complete samples)."""
        self._written("ECG trace", name, self.ecg)
        return self.f["ecg"][name][: self.n_samples]

    def map(self, name: str) -> np.ndarray:
        """/maps/<name> as an array ([nz,] [ny,] nx); NaN where it has no value."""
        self._written("map", name, self.maps)
        return self.f["maps"][name][:]

    def _written(self, what: str, name: str, names: list[str]) -> None:
        """A UserError (one line) for a name the run never wrote (h5py's KeyError otherwise): a run still going has
        no maps yet, a monodomain run no phi_e, a run without [ecg] no traces."""
        if name not in names:
            raise UserError(f"{what} {name}: not in {self.path}; {what}s in the file: {', '.join(names) or 'none'}"
                            + (" (maps are written when the run ends)" if what == "map" and self.status != "finished"
                               else ""))

    # -- analysis (cardiosim/analysis/maps.py) ------------------------------------------------------------------------
    def _levels(self) -> tuple[float, float]:
        thr = float(self.map_attrs("activation_time").get("threshold", 0.0)) if "activation_time" in self.maps \
            else 0.0
        level = float(self.map_attrs("apd").get("level", 90.0)) if "apd" in self.maps else 90.0
        return thr, level

    def beats(self, probe: str, field: str = "Vm") -> dict:
        """Every beat at a probe (every PDE step): activation (ms), APD (ms), V_peak and baseline (mV) per beat, at
        the run's activation threshold and APD level (cardiosim.analysis.maps.beats)."""
        if probe not in self.probes:
            raise UserError(f"probe {probe}: not in {self.path}; probes: {', '.join(self.probes) or 'none'}")
        thr, level = self._levels()
        return beats(self.probe_times, self.probe(probe)[field], thr, level)

    def beat_maps(self, field: str = "Vm", max_beats: int = 20) -> dict:
        """Activation and APD maps of every beat, from the snapshots (as fine as output.interval; the run's own
        /maps are of the first beat at every step): {"activation", "apd", "v_peak", "v_base": (beats, [nz,] [ny,]
        nx), "count": beats per node}. Reads every snapshot: memory n_snapshots x nodes x 8 B."""
        self.check_field(field)
        thr, level = self._levels()
        data = self.f["fields"][field][: self.n_snapshots]
        b = beats(self.times, data.reshape(self.n_snapshots, -1), thr, level, max_beats)
        shape = data.shape[1:]
        return {k: (a.reshape(-1, *shape) if k != "count" else a.reshape(shape)) for k, a in b.items()}

    def cv_map(self, activation: np.ndarray | None = None) -> np.ndarray:
        """Local conduction velocity (m/s) from the activation map (or ``activation``, e.g. one beat of
        beat_maps): 1/|grad T| (cardiosim.analysis.maps.cv_map)."""
        return cv_map(self.map("activation_time") if activation is None else activation, self.spacing)

    def cv_along(self, start, end, activation: np.ndarray | None = None) -> float:
        """Conduction velocity (m/s) along the line from ``start`` to ``end`` (cm, the grid's coordinates)."""
        origin = [a[0] for a in self.axes]
        return cv_along(self.map("activation_time") if activation is None else activation, self.spacing, start, end,
                        origin)

    def cv_beats(self, first: str, second: str) -> np.ndarray:
        """Conduction velocity (m/s) of every beat at probe ``first`` on its way to probe ``second`` (the one the
        wave reaches later): the distance between their nodes over the time between the beat's activations there,
        every PDE step (cardiosim.analysis.maps.cv_beats); NaN for a beat that does not reach ``second``."""
        a, b = self.beats(first), self.beats(second)
        distance = float(np.linalg.norm(self.probe(second)["node_position"] - self.probe(first)["node_position"]))
        return cv_beats(np.atleast_1d(a["activation"]), np.atleast_1d(b["activation"]), distance)

    def map_attrs(self, name: str) -> dict:
        self._written("map", name, self.maps)
        return dict(self.f["maps"][name].attrs)


# ----------------------------------------------------------------------------------------------------------------
# cardiosim inspect
# ----------------------------------------------------------------------------------------------------------------
def coordinate(x: float) -> str:
    """A coordinate for a label: round-off (-2.22e-16) shown as 0, four significant digits."""
    x = float(x)
    return f"{0.0 if abs(x) < 1e-9 else x:.4g}"


def _fmt(values, unit="") -> str:
    return " x ".join(f"{v:g}" for v in values) + (f" {unit}" if unit else "")


def _spacing_of(t) -> str:
    if len(t) < 2:
        return ""
    d = np.diff(t)
    return f", every {d[0]:g} ms" if np.allclose(d[:-1], d[0]) else ""


def describe(r: Results) -> str:
    """The report of ``cardiosim inspect``."""
    lines = []
    status = r.status
    stopped = {"checkpoint": "stopped cleanly at a checkpoint (a signal: SIGTERM, SIGUSR1 or Ctrl-C); resume it "
                             "with cardiosim run CONFIG --restart CHECKPOINT",
               "error": "stopped early by an error (what was written before is kept)"
               }.get(r.stopped_by, "stopped early, by an error or at a checkpoint (what was written before is kept)")
    ended = {"finished": "finished", "stopped": stopped,
             "running": "still running, or killed (no end record): complete entries only"}.get(status, status)
    lines.append(f"{r.path}: {r.attr('format')}, {ended}")
    lines.append(f"  written by cardiosim {r.attr('cardiosim_version', '?')} (git {r.attr('git_hash', 'unknown')})"
                 + (f" on {r.attr('created')}" if r.attr("created") else ""))
    lines.append(f"config: {r.attr('config_name', '?')} ({r.attr('equations', '?')}, {r.attr('cell_model', '?')}); "
                 f"`cardiosim inspect --config` prints it" + (f"; --set {' --set '.join(r.overrides)}"
                                                              if r.overrides else ""))
    lay = r.layout
    if lay:
        hosts = lay.get("hosts") or []
        gpus = [g for g in lay.get("gpus") or [] if g is not None]
        where = f" on {len(set(hosts))} host(s) ({', '.join(sorted(set(hosts)))})" if hosts else ""
        gpu = (f"; GPU of each rank: {', '.join(map(str, lay['gpus']))}" if gpus else "")
        lines.append(f"layout: {lay.get('mpi_ranks', '?')} MPI rank(s){where}, DMDA "
                     f"{_fmt(lay.get('dmda_procs', []))}; cells: {lay.get('ode_backend', '?')}{gpu}")
    stencil = r.f["grid"].attrs.get("stencil", "?")
    lines.append(f"grid: {r.dim}D, {_fmt(r.shape)} = {int(np.prod(r.shape))} nodes, spacing {_fmt(r.spacing, 'cm')}, "
                 f"size {_fmt(r.size, 'cm')}, {stencil} stencil")
    planned = r.f["fields/time"].shape[0]
    if r.n_snapshots:
        lines.append(f"snapshots: {r.n_snapshots}" + (f" of {planned} planned" if planned != r.n_snapshots else "")
                     + f", t = {r.times[0]:g} to {r.times[-1]:g} ms{_spacing_of(r.times)}")
    else:
        lines.append(f"snapshots: none complete (of {planned} planned)")
    for name in r.fields:
        unit = r.f["fields"][name].attrs.get("units", "")
        if r.n_snapshots:
            lo, hi = r.field_range(name)
            models = r.f["fields"][name].attrs.get("cell_models")      # a cell state of a run of several models
            whose = f" (of {', '.join(Path(m).name for m in json.loads(models))})" if models else ""
            lines.append(f"  {name:<8} {lo:10.4g} to {hi:10.4g} {unit}{whose}")
    if r.probes:
        pt = r.probe_times
        span = f", t = {pt[0]:g} to {pt[-1]:g} ms{_spacing_of(pt[:3])}" if len(pt) else ""
        lines.append(f"probes: {len(r.probes)}, {r.n_samples} samples{span}")
        thr = float(r.map_attrs("activation_time").get("threshold", 0.0)) if "activation_time" in r.maps else 0.0
        for name in r.probes:
            p = r.probe(name)
            parts = [f"{fld} {np.nanmin(p[fld]):.4g} to {np.nanmax(p[fld]):.4g} mV"
                     for fld in ("Vm", "phi_e") if fld in p and len(p[fld])]
            if "Vm" in p and len(p["Vm"]):
                at = activation_time(r.probe_times, p["Vm"], thr)
                parts.append(f"activation {at:.4g} ms" if np.isfinite(at) else "not activated")
                b = r.beats(name)
                if b["count"] > 1:     # every beat: activation and APD (cardiosim.analysis.maps.beats)
                    level = r._levels()[1]
                    parts.append(f"{b['count']} beats at " + ", ".join(f"{a:.4g}" for a in b["activation"])
                                 + f" ms, APD{level:g} " + ", ".join(f"{a:.4g}" for a in b["apd"]) + " ms")
            lines.append(f"  {name:<12} at ({', '.join(coordinate(x) for x in p['node_position'])}) cm: "
                         + ", ".join(parts))
    if r.ecg:
        lines.append(f"pseudo-ECG: {len(r.ecg)} traces, {r.n_samples} samples (bath "
                     f"{float(r.f['ecg'].attrs['bath_conductivity']):g} mS/cm)")
        for name in r.ecg:
            tr, attrs = r.ecg_trace(name), r.f["ecg"][name].attrs
            where = (f"lead {attrs['lead']}" if "lead" in attrs else
                     f"at ({', '.join(coordinate(x) for x in attrs['position'])}) cm")
            span = f"{np.nanmin(tr):.4g} to {np.nanmax(tr):.4g} mV" if len(tr) else "no samples"
            lines.append(f"  {name:<12} {where}: {span}")
    if not r.maps:
        lines.append("maps: none (written when the run ends)")
    # Shares are of the tissue's nodes (tissue.label_file), not of the box around it.
    inside = r.map("tissue") > 0 if "tissue" in r.maps else None
    of = "tissue nodes" if inside is not None else "nodes"
    for name in r.maps:
        a = r.map(name)
        attrs = r.map_attrs(name)
        if inside is not None and name != "tissue":
            a = a[inside]
        ok = np.isfinite(a)
        n, total = int(ok.sum()), a.size
        if name == "activation_time":
            head = f"activation (first crossing of {float(attrs.get('threshold', np.nan)):g} mV)"
            what = "activated"
        elif name == "apd":
            head = f"APD{float(attrs.get('level', np.nan)):g} (first beat)"
            what = "repolarised"
        elif name == "tissue":
            lines.append(f"tissue: {int(np.sum(a > 0))} of {total} nodes ({100 * np.sum(a > 0) / total:.1f} %; "
                         f"tissue.label_file)")
            continue
        else:
            head, what = name, "with a value"
        line = f"{head}: {n} of {total} {of} {what} ({100 * n / total:.1f} %)"
        if n:
            v = a[ok]
            line += (f"; min {v.min():.4g}, mean {v.mean():.4g}, max {v.max():.4g} ms")
            if name == "activation_time":
                line += f"; total activation time {v.max() - v.min():.4g} ms"
        lines.append(line)
        if name == "activation_time" and n:
            cv = cv_map(r.map(name), r.spacing)
            cv = cv[inside] if inside is not None else cv
            # local velocities: where the front passes, not inside a stimulus (where |grad T| is 0: NaN)
            ok = np.isfinite(cv)
            if ok.any():
                q = np.percentile(cv[ok], [10, 50, 90])
                lines.append(f"conduction velocity (1/|grad T|, m/s): median {q[1]:.3g}, 10-90 % {q[0]:.3g} to "
                             f"{q[2]:.3g}")
    if r.ecg and "activation_time" in r.maps:
        feats = ecg_features(r)
        if feats:
            lines.append("ECG features (from the maps): " + ", ".join(
                f"{k} {v:.4g} ms" for k, v in feats.items() if v is not None and np.isfinite(v)))
    found = r.warnings
    if found is None and r.status == "finished":
        found = from_results(r)
    if found is not None:
        lines.append("checks: " + ("nothing implausible found" if not found else f"{len(found)} warning(s)"))
        lines.extend(f"  warning: {w}" for w in found)
    if "solver" in r.f and len(r.f["solver"]):
        parts = []
        for name in sorted(r.f["solver"]):
            its = r.f["solver"][name][:]
            if its.size:
                parts.append(f"{name.replace('_iterations', '')} mean {its.mean():.1f}, max {its.max()}")
        lines.append("iterations per step: " + "; ".join(parts))
    timing = r.timing()
    if timing and "total" in timing:
        rate = ""
        if r.attr("simulated_ms") is not None:
            rate = f"; {float(r.attr('simulated_ms')):g} ms simulated in {float(r.attr('wall_s')):.4g} s wall"
        lines.append(f"timing (s, mean and max over ranks){rate}:")
        lines.extend("  " + ln for ln in table(timing).splitlines())
    else:
        lines.append("timing: not recorded (written when the run ends)")
    return "\n".join(lines)


def inspect_main(args) -> int:
    if cell_kind(args.file) is not None:             # a file of cardiosim cell: a report of its own
        if args.config:
            raise UserError(f"--config: {args.file} is a file of cardiosim cell, which has no config; cardiosim "
                            f"inspect FILE lists its settings")
        with CellFile(args.file) as c:
            print(describe_cell(c))
        return 0
    with Results(args.file) as r:
        if args.config:
            sets = "".join(f"# --set {o}\n" for o in r.overrides)
            print((f"# the config as it ran: the file with these --set applied\n{sets}" if sets else "")
                  + r.config_text())
        else:
            print(describe(r))
    return 0

"""Validation, in two phases. ``build``: each key against its own declaration (cardiosim.config.schema: type,
bounds, choices, length), while the TOML data is turned into sections. ``validate``: what no single key's
declaration can say (the keys against each other, the cell models, the files the keys name). Both raise
ConfigError at the first mistake, naming the key by its dotted path.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import typing

from cardiosim import cells
from cardiosim.analysis import twelve_lead
from cardiosim.cells import paced_state
from cardiosim.cells.stimulus import ode_step
from cardiosim.config.schema import (COORDINATES, H5_DATASETS, Config, ConfigError, Electrode, Lead, Region,
                                     describe_type, format_value, is_section, keys_of)
from cardiosim.purkinje import grow
from cardiosim.reaction.ode import kernel_variants
from cardiosim.runtime import files


# --------------------------------------------------------------------------------------------------------------
# Building sections from TOML data: each key against its declaration
# --------------------------------------------------------------------------------------------------------------
def _check_number(path, v, meta, unit):
    u = f" ({unit})" if unit else ""
    for op, name, ok in (("gt", ">", lambda a, b: a > b), ("ge", ">=", lambda a, b: a >= b),
                         ("lt", "<", lambda a, b: a < b), ("le", "<=", lambda a, b: a <= b)):
        bound = meta.get(op)
        if bound is not None and not ok(v, bound):
            raise ConfigError(f"{path}: must be {name} {bound}{u}; got {format_value(v)}")
    if isinstance(v, float) and not math.isfinite(v):
        raise ConfigError(f"{path}: must be a finite number{u}; got {v}")


def _convert(path, value, tp, meta):
    """Check ``value`` (from TOML) against type ``tp``; return it converted."""
    unit = meta.get("unit", "")
    origin = typing.get_origin(tp)
    if is_section(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: must be a table; got {format_value(value)}")
        return build(tp, value, path)
    if origin is list:
        (inner,) = typing.get_args(tp)
        if inner is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value]  # one number where a vector is allowed: the same in every dimension
        if not isinstance(value, list):
            raise ConfigError(f"{path}: must be {describe_type(tp)}; got {format_value(value)}")
        lo, hi = meta.get("length") or (0, math.inf)
        if not lo <= len(value) <= hi:
            raise ConfigError(f"{path}: must have {lo} to {hi} entries; got {len(value)}")
        return [_convert(f"{path}[{i}]", v, inner, {} if is_section(inner) else meta)
                for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: must be a table of name = number; got {format_value(value)}")
        return {k: _convert(f"{path}.{k}", v, float, {}) for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: must be a number{f' ({unit})' if unit else ''}; got {format_value(value)}")
        value = float(value)
        _check_number(path, value, meta, unit)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: must be an integer; got {format_value(value)}")
        _check_number(path, value, meta, unit)
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: must be a string; got {format_value(value)}")
        choices = meta.get("choices")
        if choices and value not in choices:
            raise ConfigError(f"{path}: '{value}' is not allowed; allowed: {', '.join(choices)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: must be true or false; got {format_value(value)}")
        return value
    raise TypeError(f"unsupported config type {tp}")  # pragma: no cover - a schema bug, not a user mistake


def build(cls, data: dict, path: str):
    known = {f.name for f, _ in keys_of(cls)}
    for name in data:
        if name not in known:
            where = f"{path}.{name}" if path else name
            hint = _closest(name, known)
            raise ConfigError(f"{where}: unknown key{f' (did you mean {hint}?)' if hint else ''}; "
                              f"allowed in {path or 'the top level'}: {', '.join(sorted(known))}")
    kwargs = {}
    for f, tp in keys_of(cls):
        where = f"{path}.{f.name}" if path else f.name
        if f.name in data:
            value = data[f.name]
            if value is None:
                kwargs[f.name] = None
            else:
                meta = dict(f.metadata)
                if typing.get_origin(tp) is list and meta.get("choices"):
                    for i, v in enumerate(value if isinstance(value, list) else [value]):
                        if v not in meta["choices"]:
                            raise ConfigError(f"{where}[{i}]: '{v}' is not allowed; "
                                              f"allowed: {', '.join(meta['choices'])}")
                kwargs[f.name] = _convert(where, value, tp, meta)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing; {f.metadata.get('doc', '')}"
                              f"{' (' + f.metadata['unit'] + ')' if f.metadata.get('unit') else ''}")
    return cls(**kwargs)


def _closest(name, candidates):
    m = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return m[0] if m else None


# --------------------------------------------------------------------------------------------------------------
# Cross-key checks: what no single key's declaration can say
# --------------------------------------------------------------------------------------------------------------
def _check_coordinate_region(path: str, r: Region, label_file: str):
    """A region by a ventricular coordinate: the label file is a geometry file that has that coordinate."""
    if not label_file:
        raise ConfigError(f"{path}.shape: 'coordinate' needs tissue.label_file to be a cardiosim geometry file with "
                          f"ventricular coordinates (cardiosim geometry lv|biv, or geometry fibres); use 'box' or "
                          f"'sphere'")
    if r.coordinate is None:
        raise ConfigError(f"{path}.coordinate: missing; one of {', '.join(COORDINATES)}")
    if r.range is None:
        raise ConfigError(f"{path}.range: missing; [lower, upper] of the coordinate (e.g. [0.0, 0.3])")
    lo, hi = r.range
    if not lo <= hi:
        raise ConfigError(f"{path}.range: lower must be <= upper; got [{lo}, {hi}]")
    for name in ("lower", "upper", "center", "radius", "label"):
        if getattr(r, name) is not None:
            raise ConfigError(f"{path}.{name}: not used by a coordinate region; give coordinate and range only")
    if not str(label_file).endswith((".h5", ".hdf5")):
        raise ConfigError(f"{path}.coordinate: tissue.label_file {label_file} is not a geometry file (.h5); "
                          f"coordinates come from cardiosim geometry lv|biv or geometry fibres")
    files.check_array_file(f"{path}.coordinate", label_file, r.coordinate)


def _check_region(path: str, r: Region, dim: int, label_file: str = ""):
    """``label_file``: the run's label image (tissue.label_file; empty: none); shape = 'label' and 'coordinate'
    need one."""
    def vec(name):
        v = getattr(r, name)
        if v is None:
            raise ConfigError(f"{path}.{name}: missing; a {r.shape} needs it ({dim} numbers, cm)")
        if len(v) != dim:
            raise ConfigError(f"{path}.{name}: must have {dim} entries (one per grid dimension); got {len(v)}")
        return v

    if r.shape == "coordinate":
        _check_coordinate_region(path, r, label_file)
        return
    for name in ("coordinate", "range"):
        if getattr(r, name) is not None:
            raise ConfigError(f"{path}.{name}: only for shape = 'coordinate'")
    if r.shape == "label":
        if not label_file:
            raise ConfigError(f"{path}.shape: 'label' needs a label image (tissue.label_file); use 'box' or 'sphere'")
        if r.label is None:
            raise ConfigError(f"{path}.label: missing; a label region needs the label value (a whole number >= 1)")
        for name in ("lower", "upper", "center", "radius"):
            if getattr(r, name) is not None:
                raise ConfigError(f"{path}.{name}: not used by a label region; give label only")
        return
    if r.label is not None:
        raise ConfigError(f"{path}.label: only for shape = 'label'")
    if r.shape == "box":
        lo, hi = vec("lower"), vec("upper")
        for i, (a, b) in enumerate(zip(lo, hi)):
            if not a <= b:
                raise ConfigError(f"{path}.upper[{i}]: must be >= lower[{i}] = {a} (cm); got {b}")
        for name in ("center", "radius"):
            if getattr(r, name) is not None:
                raise ConfigError(f"{path}.{name}: not used by a box; use lower and upper")
    else:
        vec("center")
        if r.radius is None:
            raise ConfigError(f"{path}.radius: missing; a sphere needs it (cm, > 0)")
        for name in ("lower", "upper"):
            if getattr(r, name) is not None:
                raise ConfigError(f"{path}.{name}: not used by a sphere; use center and radius")



def _check_microscopic(cfg) -> None:
    """What the microscopic model needs of the other sections (docs/user/microscopic.md)."""
    m = cfg.tissue.microscopic
    if cfg.grid.stencil == "box":
        raise ConfigError("grid.stencil: the microscopic model has its own 3/5/7-point face stencil; use 'auto' "
                          "or 'star'")
    t = cfg.tissue
    if cfg.grid.origin and any(cfg.grid.origin):
        raise ConfigError("grid.origin: the microscopic model's layout and regions start at 0; leave origin out")
    if t.fibre_angle != 0.0 or t.fibre_file or t.conductivity_file or t.regions or t.label_file:
        raise ConfigError("tissue: the microscopic model takes its conductances from the myocyte layout "
                          "([tissue.microscopic]); fibre_angle, fibre_file, conductivity_file, label_file and "
                          "regions are for tissue.model = 'homogeneous'")
    for i, r in enumerate(m.regions):
        _check_region(f"tissue.microscopic.regions[{i}]", r, cfg.dim)
    if m.row_offset >= m.cell_length:
        raise ConfigError(f"tissue.microscopic.row_offset: must be -1 (cell_length / 2) or 0 ... cell_length - 1 "
                          f"= {m.cell_length - 1} volumes; got {m.row_offset}")
    if 2 * m.disc_zone > m.cell_length and m.cell_length > 1:
        raise ConfigError(f"tissue.microscopic.disc_zone: must be <= cell_length / 2 = {m.cell_length / 2:g} "
                          f"volumes; got {m.disc_zone}")
    if m.layout_file:
        files.check_input("tissue.microscopic.layout_file", m.layout_file,
                          hint=_relative_hint(cfg, "tissue.microscopic.layout_file"))
        if m.fibrosis.fraction or m.random_offset:
            raise ConfigError("tissue.microscopic.layout_file: a layout read from a file sets the myocytes; "
                              "fibrosis.fraction and random_offset are for generated layouts (mark "
                              "non-conducting cells with cell_id < 0 in the file)")


def _check_ecg(cfg) -> None:
    e = cfg.ecg
    if e.twelve_lead:
        _add_twelve_leads(cfg)
    if e.leads and not e.electrodes:
        raise ConfigError("ecg.leads: a lead is a difference of two electrodes; give [[ecg.electrodes]] too")
    names = set()
    for kind, items in (("electrodes", e.electrodes), ("leads", e.leads)):
        for i, x in enumerate(items):
            where = f"ecg.{kind}[{i}]"
            _check_probe_name(f"{where}.name", x.name)
            if x.name in names:
                raise ConfigError(f"{where}.name: '{x.name}' is used twice; electrode and lead names must be unique")
            names.add(x.name)
            if kind == "electrodes" and len(x.position) < cfg.dim:
                raise ConfigError(f"{where}.position: must have {cfg.dim} to 3 entries; got {len(x.position)}")
    electrodes = {x.name for x in e.electrodes}
    for i, lead in enumerate(e.leads):
        where = f"ecg.leads[{i}]"
        if bool(lead.weights) == bool(lead.plus or lead.minus):
            raise ConfigError(f"{where}: give either plus and minus (electrode names) or weights "
                              f"({{electrode = weight, ...}}), not {'both' if lead.weights else 'neither'}")
        named = ([(f"{where}.{k}", getattr(lead, k)) for k in ("plus", "minus")] if not lead.weights else
                 [(f"{where}.weights.{n}", n) for n in lead.weights])
        for key_, name in named:
            if name not in electrodes:
                raise ConfigError(f"{key_}: no electrode '{name}'; electrodes: {', '.join(sorted(electrodes))}")


def _add_twelve_leads(cfg) -> None:
    """ecg.twelve_lead: the standard electrodes (lv, biv) and leads added to the config's (cardiosim.analysis.twelve_lead).
    Idempotent: a config validated again finds them already there."""
    e, mode = cfg.ecg, cfg.ecg.twelve_lead
    electrodes = {x.name: x for x in e.electrodes}
    if mode in twelve_lead.FRAMES:
        if cfg.dim != 3:
            raise ConfigError(f"ecg.twelve_lead: '{mode}' places electrodes round the 3D anatomy of cardiosim "
                              f"geometry {mode}; this grid is {cfg.dim}D (use 'electrodes' with your own)")
        for name, pos in twelve_lead.positions(mode).items():
            if name not in electrodes:
                e.electrodes.append(Electrode(name=name, position=pos))
            elif list(electrodes[name].position) != pos:
                raise ConfigError(f"ecg.twelve_lead: '{mode}' places the electrode {name}, and [[ecg.electrodes]] "
                                  f"has one of that name; rename yours or use twelve_lead = 'electrodes'")
    else:
        missing = [n for n in twelve_lead.ELECTRODES if n not in electrodes]
        if missing:
            raise ConfigError(f"ecg.twelve_lead: 'electrodes' needs [[ecg.electrodes]] named "
                              f"{', '.join(twelve_lead.ELECTRODES)}; missing: {', '.join(missing)}")
    leads = {x.name: x for x in e.leads}
    for name, w in twelve_lead.weights().items():
        if name not in leads:
            pair = sorted(w, key=lambda k: -w[k]) if sorted(w.values()) == [-1.0, 1.0] else None   # I, II, III
            e.leads.append(Lead(name=name, plus=pair[0], minus=pair[1]) if pair else Lead(name=name, weights=w))
        elif leads[name].combination() != w:
            raise ConfigError(f"ecg.twelve_lead: adds the lead {name}, and [[ecg.leads]] has one of that name; "
                              f"rename yours")


PROBE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# Names /probes/<name> may not take: the probes' time axis, and what HDF5 reads as a path.
RESERVED_PROBE_NAMES = ("time", ".", "..")


def _check_probe_name(where: str, name: str) -> None:
    if not PROBE_NAME.fullmatch(name) or name in RESERVED_PROBE_NAMES:
        raise ConfigError(f"{where}: {name!r} is not allowed; a probe name is a non-empty run of letters, digits, "
                          f"'_', '-' and '.', other than {', '.join(repr(n) for n in RESERVED_PROBE_NAMES)}")


def _whole_steps(where: str, value: float, step: float, what: str) -> None:
    n = value / step
    if round(n) < 1 or abs(n - round(n)) > 1e-9 * max(1.0, n):
        raise ConfigError(f"{where}: {value:g} ms is not a whole number of steps of {what} = {step:g} ms "
                          f"(it would become {max(1, round(n)) * step:g} ms); use a multiple of {step:g} ms")



def validate(cfg: Config) -> Config:
    """Check what no single key's declaration can say; ConfigError at the first mistake. The checks run in a fixed
    order (``check_all`` takes out the key a mistake names and validates again). Completes the config where keys
    follow from others: grid.spacing one per dimension, the 12-lead electrodes and leads added, phi_e left out of a
    monodomain run's output.fields. Returns ``cfg``."""
    _check_grid(cfg)
    _check_times(cfg)
    _check_files_and_regions(cfg)
    _check_stimuli(cfg)
    _check_probes(cfg)
    _check_ecg(cfg)
    _check_output_fields(cfg)
    _check_cells(cfg)
    _check_purkinje(cfg)
    return cfg


def _check_grid(cfg) -> None:
    """grid.spacing against grid.size (one number becomes one per dimension) and grid.origin's length."""
    dim, g = cfg.dim, cfg.grid
    if len(g.spacing) == 1:
        g.spacing = g.spacing * dim
    if len(g.spacing) != dim:
        raise ConfigError(f"grid.spacing: must have 1 or {dim} entries (grid.size has {dim}); got {len(g.spacing)}")
    for i, (L, h) in enumerate(zip(g.size, g.spacing)):
        n = L / h
        if h > L:
            raise ConfigError(f"grid.spacing[{i}]: must be <= grid.size[{i}] = {L} cm; got {h}")
        if abs(n - round(n)) > 1e-6 * max(1.0, n):
            raise ConfigError(f"grid.spacing[{i}]: size/spacing = {L}/{h} = {n:.6g} is not a whole number "
                              f"of cells; choose a spacing that divides {L} cm")
    if g.origin and len(g.origin) != dim:
        raise ConfigError(f"grid.origin: must have {dim} entries (grid.size has {dim}); got {len(g.origin)}")


def _check_times(cfg) -> None:
    """simulation.dt against the duration; the output and checkpoint intervals in whole PDE steps."""
    s, ck = cfg.simulation, cfg.checkpoint
    if s.dt > s.duration:
        raise ConfigError(f"simulation.dt: must be <= simulation.duration = {s.duration} ms; got {s.dt}")
    if 0 < ck.interval < s.dt:
        raise ConfigError(f"checkpoint.interval: must be 0 (none) or >= simulation.dt = {s.dt} ms; got {ck.interval}")
    # Times the run can only honour in whole steps are refused, not rounded: a rounded value is a silently
    # different run.
    _whole_steps("output.interval", cfg.output.interval, s.dt, "simulation.dt")
    if ck.interval > 0:
        _whole_steps("checkpoint.interval", ck.interval, s.dt, "simulation.dt")


def _check_files_and_regions(cfg) -> None:
    """The tissue's input files, the tissue and cell regions, and the microscopic model's needs."""
    t = cfg.tissue
    for k, dataset in H5_DATASETS.items():
        v = getattr(t, k)
        if v:
            files.check_array_file(f"tissue.{k}", v, dataset, hint=_relative_hint(cfg, f"tissue.{k}"))
    for i, r in enumerate(t.regions):
        _check_region(f"tissue.regions[{i}]", r, cfg.dim, label_file=t.label_file)
    for i, r in enumerate(cfg.cell.regions):
        _check_region(f"cell.regions[{i}]", r, cfg.dim, label_file=t.label_file)
    if t.model == "microscopic":
        _check_microscopic(cfg)


def _check_stimuli(cfg) -> None:
    """Each [[stimulus]]: its region, one current, and its times in whole ODE steps."""
    # The stimulus is sampled once per ODE substep: a pulse that is not a whole number of substeps would be
    # applied for more (or less) time than asked, i.e. another charge.
    ode_dt, what = ode_step(cfg.simulation)
    for i, st in enumerate(cfg.stimulus):
        path = f"stimulus[{i}]"
        _check_region(path, st, cfg.dim, label_file=cfg.tissue.label_file)
        given = [k for k in ("current_density", "current_per_volume") if getattr(st, k) is not None]
        if len(given) != 1:
            raise ConfigError(f"{path}: give exactly one of current_density (uA/cm^2) and current_per_volume "
                              f"(uA/cm^3); got {len(given)}")
        if st.period and st.period < st.duration:
            raise ConfigError(f"{path}.period: must be 0 (single pulse) or >= duration = {st.duration} ms; "
                              f"got {st.period}")
        for k in ("start", "duration", "period"):
            v = getattr(st, k)
            if v or k == "duration":
                _whole_steps(f"{path}.{k}", v, ode_dt, what)


def _check_probes(cfg) -> None:
    """Each [[probe]]: inside the box, a valid name, no name twice."""
    dim, g = cfg.dim, cfg.grid
    origin = g.origin or [0.0] * dim
    names = set()
    for i, p in enumerate(cfg.probe):
        if len(p.position) != dim:
            raise ConfigError(f"probe[{i}].position: must have {dim} entries; got {len(p.position)}")
        for d, (x, o, L) in enumerate(zip(p.position, origin, g.size)):
            if not o <= x <= o + L:
                raise ConfigError(f"probe[{i}].position[{d}]: must lie in [{o:g}, {o + L}] cm; got {x}")
        _check_probe_name(f"probe[{i}].name", p.name)
        if p.name in names:
            raise ConfigError(f"probe[{i}].name: '{p.name}' is used twice; probe names must be unique")
        names.add(p.name)


def _check_output_fields(cfg) -> None:
    """output.fields: each once; phi_e left out of a monodomain run (it has no φe)."""
    seen = set()
    for i, f in enumerate(cfg.output.fields):
        if f in seen:
            raise ConfigError(f"output.fields[{i}]: '{f}' is listed twice; list each field once")
        seen.add(f)
    if "phi_e" in cfg.output.fields and cfg.simulation.equations == "monodomain":
        cfg.output.fields = [f for f in cfg.output.fields if f != "phi_e"]


# --------------------------------------------------------------------------------------------------------------
# The cell models: what the keys of [cell] and output.states ask of them
# --------------------------------------------------------------------------------------------------------------
def _check_cells(cfg) -> None:
    cls, classes = _model_classes(cfg)
    _check_integrator(cfg, classes)
    _check_kernel(cfg, cls)
    if cfg.cell.regions:
        _check_region_models(cfg, cls)
    _check_scale(cfg, cls)
    _check_output_states(cfg, cls, classes)
    _check_initial_state(cfg, cls)
    _check_initial(cfg, cls)


def _model_classes(cfg):
    """(cell.model's class, {model: class} of every model of the run: cell.model and the regions' own)."""
    try:
        cls = cells.model_class(cfg.cell.model)   # the model registry knows which names exist
    except cells.CellModelError as e:
        msg = str(e)
        if not msg.startswith("cell.model"):
            msg = f"cell.model: {msg}" + _relative_hint(cfg, "cell.model") * ("no such" in msg)
        raise ConfigError(msg) from None
    classes = {cfg.cell.model: cls}
    for i, r in enumerate(cfg.cell.regions):
        if cfg.cell.model_of(r) not in classes:
            classes[cfg.cell.model_of(r)] = _region_model_class(cfg, i)
    return cls, classes


def _check_integrator(cfg, classes: dict) -> None:
    """cell.integrator: every model of the run has the method."""
    for name, model_cls in classes.items():
        if cfg.cell.integrator == "rush-larsen" and not hasattr(model_cls, "rush_larsen"):
            raise ConfigError(f"cell.integrator: 'rush-larsen' needs a model with Hodgkin-Huxley gates written for it "
                              f"(tt06, CellML models); {name} has none, use 'forward-euler'")
        if cfg.cell.integrator == "grl1" and not hasattr(model_cls, "grl1"):
            raise ConfigError(f"cell.integrator: 'grl1' is generated for CellML models; {name} is built in, "
                              f"use 'forward-euler'{' or rush-larsen' if hasattr(model_cls, 'rush_larsen') else ''}")


def _check_kernel(cfg, cls) -> None:
    """cell.kernel: a variant other than the default exists for the model and integrates by Forward Euler."""
    if cfg.cell.kernel == kernel_variants.DEFAULT:
        return
    try:
        kernel_variants.get(cfg.cell.kernel, cls.kernel_name)
    except ValueError as e:
        raise ConfigError(f"cell.kernel: {e}") from None
    if cfg.cell.integrator != "forward-euler":
        raise ConfigError(f"cell.kernel: the seed's variant '{cfg.cell.kernel}' is Forward Euler only; "
                          f"use 'fused' with cell.integrator = '{cfg.cell.integrator}'")


def _check_region_models(cfg, cls) -> None:
    """With cell.regions: cell's and each region's variant and parameter names, by building the model; the
    messages name cell or the region."""
    c, tissue = cfg.cell, {"Cm": cfg.tissue.Cm, "chi": cfg.tissue.chi}
    try:
        cls(variant=c.variant or None, overrides=c.parameters, tissue=tissue)
    except cells.CellModelError as e:
        raise ConfigError(str(e)) from None
    for i, r in enumerate(c.regions):
        own = c.model_of(r) != c.model        # another model: the region's variant and parameters only
        try:
            region_cls = _region_model_class(cfg, i) if own else cls
            region_cls(variant=r.variant or (None if own else c.variant or None),
                       overrides=r.parameters if own else {**c.parameters, **r.parameters}, tissue=tissue)
        except cells.CellModelError as e:
            raise ConfigError(str(e).replace("cell.", f"cell.regions[{i}].", 1)) from None


def _check_scale(cfg, cls) -> None:
    """cell.scale: parameters of cell.model, factors finite and >= 0."""
    for k, f in cfg.cell.scale.items():
        if k not in cls.parameters:
            raise ConfigError(f"cell.scale.{k}: {cfg.cell.model} has no parameter '{k}'; allowed: "
                              f"{', '.join(sorted(cls.parameters))}")
        if not (math.isfinite(f) and f >= 0.0):
            raise ConfigError(f"cell.scale.{k}: a scale factor must be a finite number >= 0, got {f}")


def _check_output_states(cfg, cls, classes: dict) -> None:
    """output.states: states or intermediates of the model (of the models: ``_check_states_of_models``), not Vm,
    each once."""
    states = {st.name: st for st in cls.states}
    # intermediates (currents, fluxes) of CellML models may be recorded too (computed from the states)
    inter = cls.intermediates() if hasattr(cls, "intermediates") else {}
    if len(classes) > 1:
        _check_states_of_models(cfg, classes)
        return
    for i, name in enumerate(cfg.output.states):
        if (name not in states and name not in inter) or name == cls.states[0].name or name in cfg.output.states[:i]:
            why = ("is the membrane potential: it is the field Vm" if name == cls.states[0].name else
                   "is listed twice" if name in states or name in inter else
                   f"is neither a state nor an intermediate of {cfg.cell.model}" if inter else
                   f"is not a state of {cfg.cell.model}")
            raise ConfigError(f"output.states[{i}]: '{name}' {why}; states: "
                              f"{', '.join(st.name for st in cls.states[1:])}"
                              + (f"; intermediates: see cardiosim model info {cfg.cell.model}" if inter else
                                 " (intermediates can be recorded for CellML models)"))


def _check_initial_state(cfg, cls) -> None:
    """cell.initial_state: a cell file of this model whose states lie in their ranges."""
    if not cfg.cell.initial_state:
        return
    states = {st.name: st for st in cls.states}
    files.check_input("cell.initial_state", cfg.cell.initial_state, "cell file",
                      hint=_relative_hint(cfg, "cell.initial_state"))
    try:
        paced = paced_state.read(cfg.cell.initial_state, cfg.cell.model, list(states))
    except cells.CellModelError as e:
        raise ConfigError(str(e)) from None
    for k, v in paced.items():
        if not states[k].lower <= v <= states[k].upper:
            raise ConfigError(f"cell.initial_state: {k} = {v:g} {states[k].unit} in {cfg.cell.initial_state} "
                              f"is outside the state's range [{states[k].lower:g}, {states[k].upper:g}]")


def _check_initial(cfg, cls) -> None:
    """cell.initial: states of cell.model, inside their ranges."""
    states = {st.name: st for st in cls.states}
    for k, v in cfg.cell.initial.items():
        if k not in states:
            raise ConfigError(f"cell.initial.{k}: {cfg.cell.model} has no state '{k}'; "
                              f"allowed: {', '.join(st.name for st in cls.states)}")
        # The run checks every state against this range after each step; a start outside it would be reported
        # as a blow-up of the first step (blaming the time step), not as what it is.
        st = states[k]
        if not st.lower <= v <= st.upper:
            raise ConfigError(f"cell.initial.{k}: {v:g} {st.unit} is outside the range of the state "
                              f"[{st.lower:g}, {st.upper:g}] {st.unit} that {cfg.cell.model} allows")


def _check_states_of_models(cfg, classes: dict) -> None:
    """output.states in a run of several cell models: each name a state or intermediate of at least one of them
    (recorded at that model's cells, NaN at the others), in one unit wherever it occurs, not Vm, not twice."""
    units = {}
    for model, c in classes.items():
        inter = c.intermediates() if hasattr(c, "intermediates") else {}
        for st in c.states[1:]:
            units.setdefault(st.name, {})[model] = st.unit
        for n, u in inter.items():
            units.setdefault(n, {}).setdefault(model, u)
    vm = {c.states[0].name for c in classes.values()}
    for i, name in enumerate(cfg.output.states):
        if name in vm or name in cfg.output.states[:i] or name not in units:
            why = ("is the membrane potential: it is the field Vm" if name in vm else
                   "is listed twice" if name in units else
                   f"is neither a state nor an intermediate of any of this run's models ({', '.join(classes)})")
            raise ConfigError(f"output.states[{i}]: '{name}' {why}; see cardiosim model info MODEL for each "
                              f"model's states and intermediates")
        if len(set(units[name].values())) > 1:
            raise ConfigError(f"output.states[{i}]: '{name}' has different units in this run's models ("
                              + ", ".join(f"{u} in {m}" for m, u in units[name].items())
                              + "); one field holds one unit: leave it out")


def _check_purkinje(cfg) -> None:
    """[purkinje]: a network file or grow (not both, and one of them where the section says anything); what the
    conduction system is wired for: the homogeneous tissue model; the grown network's geometry file; root a
    point."""
    p = cfg.purkinje
    if not p.enabled:
        if p != type(p)():
            raise ConfigError("purkinje: give purkinje.network (a file) or purkinje.grow = true; without either the "
                              "section has no network")
        return
    if p.network and p.grow:
        raise ConfigError("purkinje.grow: give purkinje.network or purkinje.grow = true, not both")
    if p.root and len(p.root) != 3:
        raise ConfigError(f"purkinje.root: a point (x, y, z) in cm; got {len(p.root)} numbers")
    if set(p.tree.block) >= set(grow.BLOCKS):
        raise ConfigError("purkinje.tree.block: both bundle branches cut leave the His bundle reaching no ventricle; "
                          "block one of " + ", ".join(grow.BLOCKS))
    if p.tree.block and not p.grow:
        raise ConfigError("purkinje.tree.block: cuts a grown network's bundle branch; this run reads "
                          "purkinje.network (give purkinje.grow = true, or cut the branch in the file)")
    if p.network:
        files.check_input("purkinje.network", p.network, "network file", hint=_relative_hint(cfg, "purkinje.network"))
    elif not cfg.tissue.label_file.endswith((".h5", ".hdf5")):
        raise ConfigError("purkinje.grow: grows on the endocardia of tissue.label_file, a geometry file of cardiosim "
                          "geometry (.h5); this run has " + (f"'{cfg.tissue.label_file}'" if cfg.tissue.label_file
                                                              else "none"))
    if cfg.tissue.model != "homogeneous":
        raise ConfigError("purkinje: needs tissue.model = \"homogeneous\"")
    if p.model:
        try:
            cells.model_class(p.model)
        except cells.CellModelError as e:
            msg = str(e).replace("cell.model: ", "")
            raise ConfigError(f"purkinje.model: {msg}"
                              + _relative_hint(cfg, "purkinje.model") * ("no such" in msg)) from None


def _region_model_class(cfg, i: int):
    """The class of cell.regions[i].model; ConfigError naming the key where it is no model."""
    name = cfg.cell.regions[i].model
    try:
        return cells.model_class(name)
    except cells.CellModelError as e:
        msg = str(e).replace("cell.model: ", "")
        raise ConfigError(f"cell.regions[{i}].model: {msg}"
                          + _relative_hint(cfg, f"cell.regions[{i}].model") * ("no such" in msg)) from None


def _relative_hint(cfg, key: str) -> str:
    return (" (a relative path in a config file is relative to the config file's folder)"
            if key in cfg.resolved else "")

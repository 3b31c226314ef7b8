"""Cell models generated from CellML files with Myokit: a C header for the native and CUDA backends and a NumPy twin.

    cls = cellml.model_class("ohara_rudy_2011_endo.cellml")     # a CellModel subclass, like the hand-written ones
    m = cls(overrides={"GNa": 60.0})

Myokit reads the file (``myokit.formats.cellml``), converts time to ms and the membrane potential to mV, and writes
every expression (``AnsiCExpressionWriter``, ``NumPyExpressionWriter``, in cardiosim/cells/cellml_codegen.py);
``myokit.lib.hh`` finds the Hodgkin–Huxley gates that the Rush–Larsen step advances exactly. What this module adds:

* **The stimulus.** The variable annotated ``oxmeta:membrane_stimulus_current`` (or named i_stim, I_stim, ...) gets
  the equation ``i_model = factor·i_stim`` with i_stim cardiosim's stimulus in µA/µF (negative depolarises);
  ``factor`` converts units (A/F, or a current or current density times the model's capacitance). The result is
  checked: dV/dt must change by exactly −1 mV/ms per µA/µF (a model with the opposite sign convention is flipped).
  The model's own pulse-train constants become unused and are dropped.
* **Parameters.** Every literal constant is a parameter, overridable by name (its short name where that is unique,
  else ``component.name``), in the model's own units. Constants computed from them are computed in Python and
  appended to the parameter vector (as the hand models' derived constants), so the kernels do no parameter-only work.
* **Removable singularities.** A quotient of the form (V − V0)·g/(exp(a(V − V0)) − 1) is 0/0 at V = V0. Where the
  denominator of a V-dependent quotient changes sign at a V at which the numerator vanishes too, the equation is
  replaced within 1e-5 mV of that V by the straight line through its values at the two edges (the remedy of
  Chaste's code generator; cardiosim/cells/singularities.py). The points are found at the default parameters.

Generated sources are cached per machine (``$CARDIOSIM_CACHE/cellml``, keyed by the file's bytes, the generator's
version and sources and Myokit's version), written to a temporary folder and renamed into place with a checksum of
each file (cardiosim.runtime.compile.cached_folder): MPI ranks that start together never read a half-written file, a
damaged entry is generated again, and a read-only cache is used where its entry is whole.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import warnings
from pathlib import Path

import numpy as np

from cardiosim.cells import cellml_codegen, cse, singularities
from cardiosim.cells.base import CellModel, CellModelError, Parameter, State
from cardiosim.runtime.compile import cached_folder, intact_folder, key_digest, lookup_dirs

MODELS = Path(__file__).resolve().parents[2] / "models"     # the CellML models shipped with cardiosim
GENERATOR_VERSION = "7"      # shown in the outputs; the cache key also has the generator's sources (_digest)
_GATE_TOL = 1e-9                 # as tt06.py: a gate may land a few ulp outside [0, 1]
_STIM_NAMES = ("i_stim", "I_stim", "i_Stim", "I_Stim", "istim", "Istim", "IStim", "i_st", "I_st")
_V_NAMES = ("V", "Vm", "v", "vm", "E", "V_m")


def _myokit():
    try:
        import myokit
        import myokit.formats
    except ImportError as e:                                         # pragma: no cover - a dependency
        raise CellModelError(f"CellML models need Myokit (pip install myokit): {e}") from None
    return myokit


def myokit_cvodes():
    """Myokit, told where the Sundials of this environment are, for its CVODES simulation (the independent
    integrator of the tests and ``cardiosim bench cellml``): ``$CARDIOSIM_SUNDIALS`` (a prefix with include/ and
    lib/ or lib64/) or the headers set-up unpacks into the virtual environment (``sys.prefix/sundials``:
    tools/bootstrap.sh says why not Debian's libsundials-dev); Myokit's own search paths besides."""
    import sys
    myokit = _myokit()
    for prefix in (os.environ.get("CARDIOSIM_SUNDIALS"), os.path.join(sys.prefix, "sundials")):
        if prefix and os.path.isdir(os.path.join(prefix, "include")):
            for paths, sub in ((myokit.SUNDIALS_INC, "include"), (myokit.SUNDIALS_LIB, "lib"),
                               (myokit.SUNDIALS_LIB, "lib64")):
                if os.path.join(prefix, sub) not in paths:
                    paths.append(os.path.join(prefix, sub))
    return myokit


# -- reading and preparing the Myokit model ---------------------------------------------------------------------------
def load_myokit(path, patches=None) -> "myokit.Model":
    """The CellML file as a Myokit model prepared for generation: time in ms, V in mV and first, the stimulus bound
    to the input ``pace`` (= i_stim in µA/µF), unused variables removed. ``patches``: {"component.variable": new
    right-hand side in Myokit syntax, in the file's own units}, applied first (a per-model fix, e.g. a singularity
    the automatic guard misses, or a documented departure from the file). Raises CellModelError (one line)."""
    myokit = _myokit()
    path = Path(path)
    if not path.is_file():
        raise CellModelError(f"{path}: no such CellML file")
    importer = myokit.formats.importer("cellml")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = importer.model(str(path))
    except Exception as e:                                           # myokit.formats.cellml.CellMLImporterError, ...
        raise CellModelError(f"{path}: not a CellML model Myokit can read: {_first_line(e)}") from None
    for qname, text in sorted((patches or {}).items()):
        try:
            var = m.get(qname)
            var.set_rhs(myokit.parse_expression(text, context=var.parent()))
        except Exception as e:
            raise CellModelError(f"{path}: patch of {qname}: {_first_line(e)}") from None
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):   # overflow in an unused branch, etc.
            warnings.simplefilter("ignore")
            _prepare(m, path)
    except CellModelError:
        raise
    except Exception as e:                                           # Myokit's own checks (units, cycles, ...)
        raise CellModelError(f"{path}: {_first_line(e)}") from None
    return m


def _first_line(e) -> str:
    text = str(e).strip()
    return (text.splitlines()[0] if text else type(e).__name__)[:300]


def _annotated(m, term, ids=None):
    """The variable annotated with the oxmeta ``term`` (RDF, as Myokit reads it; else, in ``ids`` from
    :func:`_cmeta_ids`, an older file's cmeta:id)."""
    for v in m.variables(deep=True):
        if v.meta.get("oxmeta") == term:
            return v
    where = (ids or {}).get(term)
    if where and where[0] in m and where[1] in m.get(where[0]):
        return m.get(where[0]).get(where[1])
    return None


def _cmeta_ids(path) -> dict:
    """cmeta:id -> (component, variable) of a CellML file: older Chaste files name V and the stimulus only so."""
    import xml.etree.ElementTree as ET
    ids: dict = {}
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return ids
    for comp in root.iter():
        if not comp.tag.endswith("}component"):
            continue
        for var in comp:
            if var.tag.endswith("}variable"):
                for k, val in var.attrib.items():
                    if k.endswith("}id") and val not in ids:
                        ids[val] = (comp.get("name"), var.get("name"))
    return ids


def membrane_potential(m, path="model", ids=None):
    v = _annotated(m, "membrane_voltage", ids)
    if v is None:
        for name in _V_NAMES:                 # in order: "V" before a gate called "v"
            cands = [x for x in m.states() if x.name() == name]
            if len(cands) == 1:
                v = cands[0]
                break
    if v is None or not v.is_state():
        raise CellModelError(f"{path}: no membrane potential (no state annotated oxmeta:membrane_voltage or "
                             f"named {'/'.join(_V_NAMES)})")
    return v


def _prepare(m, path):
    myokit = _myokit()
    ids = _cmeta_ids(path)
    m.remove_derivative_references()
    t = m.time()
    if t is None:
        raise CellModelError(f"{path}: no time variable")
    v = membrane_potential(m, path, ids)
    try:
        t.convert_unit("ms")
        v.convert_unit("mV")
    except myokit.IncompatibleUnitError as e:
        raise CellModelError(f"{path}: cannot convert {v.qname()} to mV / time to ms: {_first_line(e)}") from None
    order = [v] + [s for s in m.states() if s is not v]
    m.reorder_state(order)
    v.set_label("membrane_potential")

    stim = _annotated(m, "membrane_stimulus_current", ids)
    if stim is None:
        for name in _STIM_NAMES:
            cands = [x for x in m.variables(deep=True) if x.name() == name]
            if len(cands) == 1:
                stim = cands[0]
                break
    if stim is not None and stim.is_state():
        raise CellModelError(f"{path}: stimulus variable {stim.qname()} is a state; cannot bind cardiosim's stimulus")
    comp = m.add_component_allow_renaming("cardiosim")
    i_stim = comp.add_variable("i_stim")
    i_stim.set_unit(myokit.parse_unit("A/F"))
    i_stim.set_rhs(0)
    i_stim.set_binding("pace")
    if stim is None:
        # A model without a stimulus variable (the sino-atrial and other spontaneously active models): the stimulus
        # goes straight into dV/dt, which is in mV/ms = A/F, so dV/dt changes by -1 mV/ms per µA/µF as everywhere
        # else. Such a model runs without a stimulus as well.
        v.set_rhs(myokit.Minus(v.rhs(), myokit.Name(i_stim)))
        note = "the model has no stimulus variable: cardiosim's stimulus is subtracted from dV/dt"
    else:
        stim.set_rhs(_stimulus_expression(m, stim, i_stim, path, ids))
        for child in list(stim.variables()):          # a nested pulse-train definition goes with the old equation
            stim.remove_variable(child, recursive=True)
        note = ""
    _remove_unused(m)
    if stim is not None:        # (not `stim or v`: a Myokit variable without child variables is falsy)
        note = _fix_stimulus_sign(m, stim, path)
    if list(t.refs_by()):
        # Equations that use the time itself (Li 2010: a caffeine protocol after its pre-pulses) get it as a state,
        # dt/dt = 1 from 0 ms at the start of a run: every backend and integrator advances it (exactly but for
        # round-off), and a checkpoint keeps it, with no time argument in the kernels.
        users = ", ".join(sorted(x.qname() for x in t.refs_by()))
        clock = comp.add_variable_allow_renaming("time")
        clock.set_unit(t.unit())
        clock.promote(0.0)
        clock.set_rhs(myokit.Number(1, myokit.units.dimensionless))
        for x in list(t.refs_by()):
            x.set_rhs(x.rhs().clone(subst={myokit.Name(t): myokit.Name(clock)}))
        note = "; ".join(x for x in (note, f"the time its equations use ({users}) is the state {clock.qname()}, "
                                           f"from 0 ms at the start of the run") if x)
    m.meta["cardiosim_stimulus_note"] = note


def _stimulus_expression(m, stim, i_stim, path, ids):
    """i_model = factor · i_stim [· C_m] in the stimulus variable's own units."""
    myokit = _myokit()
    A_per_F = myokit.parse_unit("A/F")
    unit = stim.unit()
    name = myokit.Name(i_stim)
    if unit is None or unit == myokit.units.dimensionless:
        return name
    try:
        return myokit.Multiply(myokit.Number(myokit.Unit.conversion_factor(A_per_F, unit).value()), name)
    except myokit.IncompatibleUnitError:
        pass
    cm = _annotated(m, "membrane_capacitance", ids)
    if cm is None:
        cands = [x for x in m.variables(deep=True) if x.name() in ("Cm", "C_m", "Cap", "C", "cm", "Acap")]
        cm = cands[0] if cands else None
    if cm is not None and cm.unit() is not None:
        try:
            f = myokit.Unit.conversion_factor(A_per_F * cm.unit(), unit).value()
            return myokit.Multiply(myokit.Multiply(myokit.Number(f), name), myokit.Name(cm))
        except myokit.IncompatibleUnitError:
            pass
    raise CellModelError(f"{path}: stimulus variable {stim.qname()} is in {unit}, which is neither a current per "
                         f"capacitance nor, with a capacitance variable, a current or current density")


def _fix_stimulus_sign(m, stim, path):
    """dV/dt must change by -1 mV/ms per µA/µF of i_stim (the ionic sign convention); flip a model written the
    other way, refuse one where it does not. ``stim``: the variable whose equation holds i_stim."""
    myokit = _myokit()
    d0 = m.evaluate_derivatives(inputs={"pace": 0.0}, ignore_errors=True)[0]
    d1 = m.evaluate_derivatives(inputs={"pace": 1.0}, ignore_errors=True)[0]
    s = d1 - d0
    if abs(s + 1.0) < 1e-6:
        return ""
    if not (math.isfinite(s) and s != 0.0):
        raise CellModelError(f"{path}: stimulus variable {stim.qname()}: dV/dt changes by {s:.6g} mV/ms per µA/µF "
                             f"of stimulus; cannot bind it")
    # The opposite sign convention, or units that do not say what the equations do (a current in pA/pF divided
    # by a capacitance in pF): scale so that the stimulus does what cardiosim promises, and say so.
    stim.set_rhs(myokit.Multiply(myokit.Number(-1.0 / s), stim.rhs()))
    return f"stimulus scaled by {-1.0 / s:.6g} (dV/dt changed by {s:.6g} mV/ms per µA/µF as written)"


def _remove_unused(m):
    while True:
        unused = [x for x in m.variables(deep=True)
                  if not x.is_state() and not list(x.refs_by()) and x.binding() is None and x.label() is None
                  and x is not m.time() and not list(x.variables())]
        if not unused:
            return
        for x in unused:
            x.parent().remove_variable(x)


def generate(path, patches=None, cse: bool = True, numpy_like_c: bool = False) -> dict:
    """Everything the model classes and kernels need, as plain data (JSON-able) and source texts:
    {"states", "parameters", "derived", "gates", "singularities", "c_header", "numpy_source", ...}. ``cse``,
    ``numpy_like_c``: as for cellml_codegen.write (other than the defaults only to compare forms: ``cardiosim bench
    cell-steps``, the tests)."""
    myokit = _myokit()
    path = Path(path)
    m = load_myokit(path, patches)
    v = m.label("membrane_potential")
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        singular = singularities.guard(m, v)
    kname = "cellml_" + _digest(path, patches)[:16]
    g = cellml_codegen.write(m, kname, path.name, GENERATOR_VERSION, cse=cse, numpy_like_c=numpy_like_c)
    names, gates = g["names"], g["gates"]
    i_stim = m.binding("pace")

    def unit(x):
        u = x.unit()
        return "" if u is None else str(u).strip("[]")

    return {
        "file": path.name, "source": str(path.resolve()), "model_name": m.name(), "kernel_name": kname,
        "generator": GENERATOR_VERSION, "myokit": myokit.__version__,
        "states": [{"name": names.user[s], "initial": s.initial_value(True), "unit": unit(s),
                    "gate": s in gates} for s in g["states"]],
        "parameters": [{"name": names.user[x], "value": x.eval(), "unit": unit(x)} for x in g["literals"]],
        "derived": [names.user[x] for x in g["derived"]],
        "derived_uses": _literal_uses(g["literals"], g["derived"]),
        "intermediate_units": {names.user[x]: unit(x) for x in m.variables(deep=True)
                               if not x.is_state() and not x.is_constant() and x.binding() is None},
        "gates": [names.user[s] for s in g["states"] if s in gates],
        "stimulus": ", ".join(names.user[x] for x in i_stim.refs_by()),
        "stimulus_note": m.meta.get("cardiosim_stimulus_note", ""),
        "singularities": [[q, v0] for q, v0 in singular],
        "c_header": g["c_header"], "numpy_source": g["numpy_source"],
    }


def _literal_uses(literals, derived) -> list[list[int]]:
    """For each derived constant, the indices (into ``literals``) of the literal constants it is computed from."""
    index = {x: i for i, x in enumerate(literals)}
    memo: dict = {}

    def uses(x) -> set:
        if x not in memo:
            out: set = set()
            for y in x.refs_to():
                out |= {index[y]} if y in index else uses(y)
            memo[x] = out
        return memo[x]
    return [sorted(uses(x)) for x in derived]


def _digest(path: Path, patches=None) -> str:
    """The cache key: the file's bytes, the patches, the generator (its version and its sources: an edit to them
    cannot leave stale generated code behind) and Myokit's version."""
    myokit = _myokit()
    h = hashlib.sha256(path.read_bytes())
    if patches:
        h.update(json.dumps(sorted(patches.items())).encode())
    for src in (__file__, cellml_codegen.__file__, singularities.__file__, cse.__file__):
        h.update(Path(src).read_bytes())
    h.update(f"\0generator {GENERATOR_VERSION}\0myokit {myokit.__version__}".encode())
    return h.hexdigest()


# -- the per-machine cache ------------------------------------------------------------------------------------------
def generated(path, patches=None) -> tuple[dict, Path]:
    """(generate(path) without the sources, the cache folder holding ``<kernel_name>.h`` and ``numpy_rhs.py``);
    generated on first use, and again where the cached copy was cut short or damaged (cardiosim.runtime.compile)."""
    path = Path(path)
    if not path.is_file():
        raise CellModelError(f"{path}: no such CellML file" if not path.is_dir() else
                             f"{path}: is a directory, not a CellML file")

    def build(tmp: Path) -> None:
        g = generate(path, patches)
        (tmp / f"{g['kernel_name']}.h").write_text(g.pop("c_header"))
        (tmp / "numpy_rhs.py").write_text(g.pop("numpy_source"))
        (tmp / "model.json").write_text(json.dumps(g, indent=1))
    d = cached_folder(_digest(path, patches)[:32], "cellml", build)
    return json.loads((d / "model.json").read_text()), d


_CLASSES: dict[str, type] = {}


def model_class(path, patches=None) -> type[CellModel]:
    """The CellModel subclass of a CellML file (generated, or from the cache); ``patches`` as for
    :func:`load_myokit`."""
    path = Path(path)
    key = (str(path.resolve()) if path.is_file() else str(path)) + json.dumps(sorted((patches or {}).items()))
    if key not in _CLASSES:
        meta, d = generated(path, patches)
        ns: dict = {}
        src = d / "numpy_rhs.py"
        exec(compile(src.read_text(), str(src), "exec"), ns)
        _CLASSES[key] = _make_class(meta, d, ns["derived"], ns["step"], path)
        _CLASSES[key]._values_fn = staticmethod(ns["values"])
    return _CLASSES[key]


def _make_class(meta, d, derived_fn, step_fn, path):
    states = []
    probability = _probability_gates(meta, step_fn, derived_fn)
    for i, s in enumerate(meta["states"]):
        if i == 0:
            states.append(State(s["name"], s["initial"], "mV", "membrane potential", -300.0, 300.0))
        elif i in probability:
            states.append(State(s["name"], s["initial"], s["unit"], "gate", -_GATE_TOL, 1.0 + _GATE_TOL))
        elif s["gate"]:
            states.append(State(s["name"], s["initial"], s["unit"], "gate (not a probability: its steady state "
                                                                     "leaves [0, 1])"))
        else:
            states.append(State(s["name"], s["initial"], s["unit"]))
    params = {p["name"]: Parameter(p["value"], p["unit"]) for p in meta["parameters"]}
    attrs = {
        "name": path.stem, "source": str(path), "states": tuple(states), "parameters": params,
        "DERIVED_USES": tuple(tuple(u) for u in meta.get("derived_uses", [])),
        "INTERMEDIATE_UNITS": dict(meta.get("intermediate_units", {})),
        "kernel_name": meta["kernel_name"], "kernel_header_dir": d,
        "PARAMETER_ORDER": tuple(params), "DERIVED_ORDER": tuple(meta["derived"]),
        "gates": tuple(i for i, s in enumerate(meta["states"]) if s["gate"]),
        "singularities": tuple(tuple(x) for x in meta["singularities"]),
        "_derived_fn": staticmethod(derived_fn), "_step_fn": staticmethod(step_fn),
    }
    cls_name = "CellML_" + re.sub(r"\W", "_", path.stem)
    return type(cls_name, (GeneratedCellModel,), attrs)


def _probability_gates(meta, step_fn, derived_fn) -> set:
    """The gates that are probabilities: initial value and steady state x∞(V) in [0, 1] for V from -150 to 100 mV
    (at the default parameters). Only those get the range check [0, 1]: some files' Hodgkin–Huxley-shaped states are
    not probabilities (Shannon 2004's f, whose f∞ = 1/(1 + e^((V+35.06)/3.6)) + 0.6/(1 + e^((50−V)/20)) is above 1
    everywhere; Davies 2012's dp, which starts at 9), and checking them against [0, 1] stopped those models at once.
    x∞ is read from the Rush–Larsen step itself: out = x∞ + (x − x∞)·e^(−dt/τ) is x∞ for a step far beyond τ."""
    n = len(meta["states"])
    v = np.linspace(-150.0, 100.0, 501)
    y = np.repeat(np.array([s["initial"] for s in meta["states"]], dtype=np.float64)[:, None], v.size, axis=1)
    y[0] = v
    c = np.array([p["value"] for p in meta["parameters"]] + [0.0] * len(meta["derived"]), dtype=np.float64)
    out = np.empty_like(y)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        derived_fn(c)
        step_fn(y, 0.0, c, out, 1e9, True)
    keep = set()
    for i in range(1, n):
        s = meta["states"][i]
        inf = out[i]
        if (s["gate"] and -_GATE_TOL <= s["initial"] <= 1.0 + _GATE_TOL and np.all(np.isfinite(inf))
                and inf.min() >= -_GATE_TOL and inf.max() <= 1.0 + _GATE_TOL):
            keep.add(i)
    return keep


class GeneratedCellModel(CellModel):
    """Base of the classes :func:`model_class` makes; the NumPy right-hand side is the generated ``numpy_rhs.py``."""

    source = ""
    gates: tuple[int, ...] = ()
    singularities: tuple = ()
    kernel_header_dir: Path | None = None

    DERIVED_USES: tuple = ()
    runtime: frozenset = frozenset()

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.kernel_header_dir = specialised(self)

    def keep_at_run_time(self, names) -> None:
        """Read these parameters at run time even where they have the file's value (a population varies them per
        cell): the header is specialised again without folding them."""
        self.runtime = frozenset(names)
        self.kernel_header_dir = specialised(self)

    def population_vectors(self, factors: dict) -> np.ndarray:
        """(n_cells, n_params) parameter vectors, one per cell: this instance's, each parameter of ``factors`` (name
        -> array of n_cells factors) scaled, the derived constants computed per cell (the generated ``derived``
        works element-wise)."""
        n = len(next(iter(factors.values())))
        c = np.repeat(self.parameter_vector()[:, None], n, axis=1)
        for name, f in factors.items():
            c[self.PARAMETER_ORDER.index(name)] *= np.asarray(f, dtype=np.float64)
        with np.errstate(all="ignore"):
            self._derived_fn(c)
        return np.ascontiguousarray(c.T)

    def kept_parameters(self) -> set[int]:
        """Indices into parameter_vector() that the kernels read at run time: the parameters this instance sets to
        another value than the file's, and the derived constants computed from them. The rest are folded into
        the C code as literals (:func:`specialised`)."""
        keep = {i for i, k in enumerate(self.PARAMETER_ORDER)
                if self.p[k] != self.parameters[k].value or k in self.runtime}
        n = len(self.PARAMETER_ORDER)
        keep |= {n + j for j, uses in enumerate(self.DERIVED_USES) if keep.intersection(uses)}
        return keep

    def parameter_vector(self) -> np.ndarray:
        c = np.array([self.p[k] for k in self.PARAMETER_ORDER] + [0.0] * len(self.DERIVED_ORDER), dtype=np.float64)
        with np.errstate(all="ignore"):
            self._derived_fn(c)
        return c

    def derived_values(self) -> dict:
        c = self.parameter_vector()
        return dict(zip(self.DERIVED_ORDER, c[len(self.PARAMETER_ORDER):]))

    def _vector(self):
        key = tuple(self.p.values())
        if getattr(self, "_c_key", None) != key:
            self._c, self._c_key = self.parameter_vector(), key
        return self._c

    def rhs(self, t, y, i_stim, dydt):
        with np.errstate(all="ignore"):       # numpy.select evaluates both branches of a piecewise
            self._step_fn(y, i_stim, self._vector(), dydt, 0.0, False)

    def rush_larsen(self, y, t, dt, i_stim, work=None):
        """One Rush–Larsen step of ``dt`` ms in place: the gates of ``self.gates`` exactly for frozen V, the
        other states by Forward Euler (as ``<kernel_name>_rush_larsen`` in the generated header)."""
        out = np.empty_like(y) if work is None else work
        with np.errstate(all="ignore"):
            self._step_fn(y, i_stim, self._vector(), out, dt, 1)
        y[...] = out

    def values(self, y, i_stim) -> dict:
        """{name: array} of every state and intermediate (currents, fluxes, ...; the names of ``cardiosim model info``
        and of the file) at the states ``y`` (n_states, n), with the stimulus ``i_stim`` (µA/µF, one per column or
        one for all)."""
        with np.errstate(all="ignore"):
            out = self._values_fn(y, i_stim, self._vector())
        return {k: np.broadcast_to(v, y.shape[1:]) for k, v in out.items()}

    def intermediate_units(self) -> dict:
        return type(self).intermediates()

    @classmethod
    def intermediates(cls) -> dict:
        """{name: unit} of the model's intermediates (currents, fluxes, ...: what :meth:`values` gives besides the
        states)."""
        return dict(cls.INTERMEDIATE_UNITS)

    def grl1(self, y, t, dt, i_stim, work=None):
        """One GRL1 step of ``dt`` ms in place (Sundnes et al. 2009): the gates as in :meth:`rush_larsen`, every other
        state y_i by the exact solution of its equation linearised in y_i alone, y_i + f_i·(e^(a_i·dt) − 1)/a_i with
        a_i = ∂f_i/∂y_i (as ``<kernel_name>_grl1`` in the generated header)."""
        out = np.empty_like(y) if work is None else work
        with np.errstate(all="ignore"):
            self._step_fn(y, i_stim, self._vector(), out, dt, 2)
        y[...] = out


_PARAM = re.compile(r"(?<!&)CS_PARAM\((\d+)\)")     # not &CS_PARAM(0): the vector itself, passed on


def specialised(model) -> Path:
    """The folder of ``model``'s C header specialised to its run: every parameter it does not set to another value
    (and every derived constant computed from those only) written into the code as a literal, so that the compiler
    folds them (a constant-memory read less per use on the GPU, products and quotients of constants computed once at
    compile time). The header keeps the parameter vector's layout, so the backends pass the same vector. Cached per
    machine, keyed by the model and the set of names it overrides (not their values: one compiled kernel serves every
    value of them)."""
    base = Path(type(model).kernel_header_dir)
    keep = model.kept_parameters()
    names = list(model.PARAMETER_ORDER)
    key = key_digest([model.kernel_name, json.dumps([names[i] for i in sorted(keep) if i < len(names)]),
                      (base / f"{model.kernel_name}.h").read_text()])[:32]

    def build(tmp: Path) -> None:
        text = (base / f"{model.kernel_name}.h").read_text()
        (tmp / f"{model.kernel_name}.h").write_text(fold_constants(model, text))
    return cached_folder("spec_" + key, "cellml", build)


def per_cell_header(model) -> tuple[Path, list[int]]:
    """(folder, slots): ``model``'s C header for a population whose cells each have their own values of the
    parameters the model keeps at run time (:meth:`GeneratedCellModel.keep_at_run_time`), and the indices into
    parameter_vector() of those values. Everything else is folded as in :func:`specialised`; the kept parameter
    ``slots[j]`` is read as ``CS_CELL_PARAM(j)``, which the includer defines: slot j of this cell, from a
    per-cell array (kernels/cpu_driver.c and kernels/fused.cu with CS_CELL_PARAMS). The same text is compiled as C
    on the host and as CUDA on the GPU, so a CPU population through it is the GPU population's host twin."""
    base = Path(type(model).kernel_header_dir)
    c = model.parameter_vector()
    slots = sorted(model.kept_parameters() | {i for i, v in enumerate(c) if not math.isfinite(v)})
    slot = {i: j for j, i in enumerate(slots)}
    key = key_digest([model.kernel_name, "cells", json.dumps(slots),
                      (base / f"{model.kernel_name}.h").read_text()])[:32]

    def value(m) -> str:
        i = int(m.group(1))
        return f"CS_CELL_PARAM({slot[i]})" if i in slot else f"({float(c[i])!r})"

    def build(tmp: Path) -> None:
        text = (base / f"{model.kernel_name}.h").read_text()
        (tmp / f"{model.kernel_name}.h").write_text(_PARAM.sub(value, text))
    return cached_folder("cells_" + key, "cellml", build), slots


def fold_constants(model, text: str) -> str:
    """The generated header ``text`` with every parameter that ``model`` does not keep at run time
    (:meth:`GeneratedCellModel.kept_parameters`) written as its value."""
    keep = model.kept_parameters()
    c = model.parameter_vector()

    def literal(m) -> str:
        i = int(m.group(1))
        return m.group(0) if i in keep or not math.isfinite(c[i]) else f"({float(c[i])!r})"
    return _PARAM.sub(literal, text)


def shipped() -> list[dict]:
    """The CellML models shipped in :data:`MODELS`, each {"path", "meta"}: ``meta`` the generated model's
    model.json where this file, as it is, has been generated on this machine already (the cache is keyed by the
    file's bytes, so another copy's entries never stand for it), else None (generated on first use)."""
    rows = []
    for path in sorted(MODELS.glob("*.cellml")):
        key = _digest(path)[:32]
        meta = None
        for d in lookup_dirs("cellml"):
            if intact_folder(d / key):
                try:
                    meta = json.loads((d / key / "model.json").read_text())
                except (OSError, ValueError):
                    meta = None
                break
        rows.append({"path": path, "meta": meta})
    return rows


def describe(cls) -> str:
    """The text of ``cardiosim model info``."""
    meta = json.loads((Path(cls.kernel_header_dir) / "model.json").read_text())
    lines = [f"{meta['file']}: CellML model '{meta['model_name']}', generated by cardiosim (generator "
             f"{meta['generator']}, Myokit {meta['myokit']}) into {cls.kernel_header_dir}",
             f"stimulus: cardiosim's i_stim (µA/µF, negative depolarises) drives {meta['stimulus']}"
             + (f"; {meta['stimulus_note']}" if meta.get("stimulus_note") else ""),
             "", f"states ({len(cls.states)}; Rush-Larsen gates marked *):"]
    for i, st in enumerate(cls.states):
        lines.append(f"  {'*' if i in cls.gates else ' '} {st.name:<28} {st.initial:< 22.15g} {st.unit}")
    lines += ["", f"gates ({len(cls.gates)}): {', '.join(cls.states[i].name for i in cls.gates) or 'none'}", "",
              f"parameters ({len(cls.parameters)}; override by name in cell.parameters or --param):"]
    for name, p in cls.parameters.items():
        lines.append(f"    {name:<40} {p.value:< 22.15g} {p.unit}")
    lines += ["", f"removable singularities guarded ({len(cls.singularities)}): "
              + (", ".join(f"{q} at V = {v0:.6g} mV" for q, v0 in cls.singularities) or "none")]
    return "\n".join(lines) + "\n"


def is_cellml(name: str) -> bool:
    return str(name).lower().endswith(".cellml")

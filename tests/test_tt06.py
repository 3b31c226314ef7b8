"""ten Tusscher–Panfilov 2006 epicardial cell: NumPy reference (cardiosim/cells/tt06.py) and C kernel (kernels/tt06.h).

What is checked, against what:
  * the NumPy right-hand side against the CellML file itself (a small MathML evaluator below reads the ground-truth
    file and evaluates every derivative), at random states over the whole voltage range;
  * the C right-hand side and the C Rush–Larsen step against the NumPy ones, at states along an action potential;
  * single-cell beats against the CVODE reference of reference/tt06/README.md: Forward Euler (C, through
    cardiosim.reaction.ode.native) at dt = 0.001 and 0.002 ms, Rush–Larsen (NumPy, and C through a test shim) at 0.01 and
    0.05 ms; biomarkers of beat 1 and the V trace (trace_epi_1Hz_beat1.csv);
  * Forward Euler at dt = 0.003 ms (beyond the m gate's stability limit) is caught by find_bad_state.

The reference data are in tests/data/reference/tt06.
The C parts need gcc (skipped without it, failed where CARDIOSIM_REQUIRE names gcc). Whole file: ~30 s on one core (the NumPy Rush–Larsen beats dominate).

Biomarkers: cardiosim.analysis.biomarkers.beat_biomarkers with the README's conventions (see beat_biomarkers below).
"""

from __future__ import annotations

import ctypes
import math
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from cardiosim.analysis import biomarkers
from cardiosim.cells import make
from cardiosim.cells.tt06 import DERIVED_ORDER, TenTusscher2006Epi
from cardiosim.cells.stimulus import Protocol
from conftest import REFERENCE, require_gcc

ROOT = Path(__file__).resolve().parents[1]
REF_DIR = REFERENCE / "tt06"
HEADER = ROOT / "kernels" / "tt06.h"

# The reference beat (README.md): Niederer initial state at t = 0, -52 pA/pF for 1 ms at t = 0 of each 1000 ms beat.
STIM = Protocol(start=0.0, duration=1.0, period=1000.0, count=0)
STIM_AMP = -52.0
T_BEAT = 500.0  # ms simulated (the reference trace covers 0-500 ms)

# CVODE reference, beat 1 (README.md table). dVdt_max includes the stimulus; APDs from the time of max dV/dt.
REFERENCE_BEAT1 = {"V_rest": -85.230, "V_peak": 37.210, "dVdt_max": 369.12, "APD25": 202.744, "APD50": 261.584,
                   "APD75": 281.769, "APD90": 290.165, "Cai_peak": 9.6193e-4}


# ---------------------------------------------------------------------------------------------------------------------
# biomarkers (README.md definitions, computed by cardiosim.analysis.biomarkers)
# ---------------------------------------------------------------------------------------------------------------------
def beat_biomarkers(t, V, Cai=None):
    """Biomarkers of beat 1 (stimulus at t = 0) with the README's conventions: APD from the time of max dV/dt, and
    dV/dt as forward differences (V[k+1] - V[k])/(t[k+1] - t[k]) stamped at t[k] (for Forward Euler sampled every
    step this is exactly the right-hand side, stimulus included)."""
    t, V = np.asarray(t, float), np.asarray(V, float)
    (b,) = biomarkers.beat_biomarkers(t, V, [0.0], Cai=Cai, apd_origin="dvdt_max",
                                      dvdt=np.diff(V) / np.diff(t), t_dvdt=t[:-1])
    return b


def biomarker_table(rows):
    """rows: list of (label, biomarker dict). Returns a printable table with the reference first."""
    keys = ("V_rest", "V_peak", "dVdt_max", "APD25", "APD50", "APD75", "APD90", "Cai_peak")
    lines = [f"{'':28s}" + "".join(f"{k:>11s}" for k in keys)]
    for label, b in [("CVODE reference (README)", REFERENCE_BEAT1)] + rows:
        lines.append(f"{label:28s}" + "".join(
            f"{b[k]:11.4e}" if k == "Cai_peak" else f"{b[k]:11.3f}" for k in keys))
    return "\n".join(lines)


def check_biomarkers(b, keys=("V_rest", "dVdt_max", "APD25", "APD50", "APD75", "APD90", "Cai_peak")):
    """V_peak within 0.5 mV, the others within 1 % of the CVODE reference."""
    assert abs(b["V_peak"] - REFERENCE_BEAT1["V_peak"]) < 0.5, f"V_peak {b['V_peak']:.3f} mV"
    for k in keys:
        ref = REFERENCE_BEAT1[k]
        assert abs(b[k] - ref) <= 0.01 * abs(ref), f"{k}: {b[k]:.6g} vs reference {ref:.6g}"


def reference_trace():
    data = np.loadtxt(REF_DIR / "trace_epi_1Hz_beat1.csv", delimiter=",", skiprows=1)
    return data[:, 0], data[:, 1], data[:, 2]


def n_stim_steps(dt):
    """Number of leading steps t_k = k*dt at which the stimulus is on, by the project's timing rule
    (cardiosim.cells.stimulus.Protocol.active), for beat 1."""
    k = 0
    while STIM.active(k * dt):
        k += 1
    return k


# ---------------------------------------------------------------------------------------------------------------------
# fixtures: model, C shim, native driver
# ---------------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model():
    return make("tt06")


SHIM_SRC = r"""
#include "tt06.h"

void shim_rhs(const double *y, double *dydt, double i_stim, const double *p) { tt06_rhs(y, dydt, i_stim, p); }
void shim_rl_step(double *y, double dt, double i_stim, const double *p) { tt06_rush_larsen(y, dt, i_stim, p); }

/* n Rush-Larsen steps from t = 0, stimulus amp during the first n_stim steps. V and Ca_i after every step go to
 * v_out[k+1], ca_out[k+1] (index 0: the initial values); ymin/ymax: the range of every state over the run.
 * Returns the index of the first step whose result is not finite, or -1. */
long shim_rl_run(double *y, double dt, long n, double amp, long n_stim, const double *p,
                 double *v_out, double *ca_out, double *ymin, double *ymax)
{
    v_out[0] = y[TS_V];
    ca_out[0] = y[TS_Ca_i];
    for (int s = 0; s < TT06_N_STATES; ++s)
        ymin[s] = ymax[s] = y[s];
    for (long k = 0; k < n; ++k) {
        tt06_rush_larsen(y, dt, k < n_stim ? amp : 0.0, p);
        v_out[k + 1] = y[TS_V];
        ca_out[k + 1] = y[TS_Ca_i];
        for (int s = 0; s < TT06_N_STATES; ++s) {
            if (!isfinite(y[s]))
                return k;
            ymin[s] = y[s] < ymin[s] ? y[s] : ymin[s];
            ymax[s] = y[s] > ymax[s] ? y[s] : ymax[s];
        }
    }
    return -1;
}
"""

_D = ctypes.POINTER(ctypes.c_double)


def _ptr(a):
    assert a.dtype == np.float64 and a.flags.c_contiguous
    return a.ctypes.data_as(_D)


class Shim:
    """kernels/tt06.h compiled with a tiny C shim (host conventions: CS_PARAM(i) = p[i])."""

    def __init__(self, so, model):
        self.lib = lib = ctypes.CDLL(str(so))
        lib.shim_rhs.argtypes = [_D, _D, ctypes.c_double, _D]
        lib.shim_rl_step.argtypes = [_D, ctypes.c_double, ctypes.c_double, _D]
        lib.shim_rl_run.argtypes = [_D, ctypes.c_double, ctypes.c_long, ctypes.c_double, ctypes.c_long, _D,
                                    _D, _D, _D, _D]
        lib.shim_rl_run.restype = ctypes.c_long
        self.p = np.ascontiguousarray(model.parameter_vector())

    def rhs(self, y, i_stim):
        """y: (19, n) -> dy/dt (19, n), one C call per column."""
        out = np.empty_like(y)
        for c in range(y.shape[1]):
            yc = np.ascontiguousarray(y[:, c])
            dc = np.empty(19)
            self.lib.shim_rhs(_ptr(yc), _ptr(dc), float(np.broadcast_to(i_stim, y.shape[1:])[c]), _ptr(self.p))
            out[:, c] = dc
        return out

    def rl_step(self, y, dt, i_stim):
        out = np.empty_like(y)
        for c in range(y.shape[1]):
            yc = np.ascontiguousarray(y[:, c])
            self.lib.shim_rl_step(_ptr(yc), dt, float(np.broadcast_to(i_stim, y.shape[1:])[c]), _ptr(self.p))
            out[:, c] = yc
        return out

    def rl_run(self, y0, dt, t_end):
        n = int(round(t_end / dt))
        y = np.ascontiguousarray(y0, dtype=np.float64).copy()
        v, ca = np.empty(n + 1), np.empty(n + 1)
        ymin, ymax = np.empty(19), np.empty(19)
        bad = self.lib.shim_rl_run(_ptr(y), dt, n, STIM_AMP, n_stim_steps(dt), _ptr(self.p), _ptr(v), _ptr(ca),
                                   _ptr(ymin), _ptr(ymax))
        return np.arange(n + 1) * dt, v, ca, y, ymin, ymax, bad


@pytest.fixture(scope="module")
def shim_build(tmp_path_factory):
    cc = require_gcc()
    d = tmp_path_factory.mktemp("tt06_shim")
    (d / "shim.c").write_text(SHIM_SRC)
    so = d / "shim.so"
    cmd = [cc, "-O2", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-shared", "-fPIC", f"-I{HEADER.parent}",
           str(d / "shim.c"), "-o", str(so), "-lm"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"
    return so, r.stderr


@pytest.fixture(scope="module")
def shim(shim_build, model):
    return Shim(shim_build[0], model)


@pytest.fixture(scope="module")
def native(model):
    require_gcc()
    from cardiosim.reaction.ode.native import NativeModel
    return NativeModel(model)


@pytest.fixture(scope="module")
def ap_states(model):
    """States along one action potential (NumPy Rush–Larsen, dt = 0.05 ms, every 0.25 ms over 0-500 ms, plus the
    first 5 ms every step), and a few hand-made edge states (V exactly at the I_CaL and h/j singular points)."""
    dt = 0.05
    y = model.initial_state(1)
    keep = []
    for k in range(int(T_BEAT / dt)):
        t = k * dt
        if k % 5 == 0 or t < 5.0:
            keep.append(y[:, 0].copy())
        model.rush_larsen(y, t, dt, STIM_AMP if STIM.active(t) else 0.0)
    S = np.array(keep).T
    edge = np.repeat(S[:, [60]], 6, axis=1)  # a plateau state, V replaced:
    edge[0] = [15.0, 15.0 + 1e-9, 15.0 - 1e-7, 15.0005, -40.0, -40.0 - 1e-12]
    return np.ascontiguousarray(np.hstack([S, edge]))


# ---------------------------------------------------------------------------------------------------------------------
# interface and layout
# ---------------------------------------------------------------------------------------------------------------------
def test_states_parameters_and_c_layout(model):
    """State order of spec.md §1, initial state = Niederer (verification.md §3), the C enums = the Python orders."""
    assert model.name == "tt06" and model.n_states == 19
    assert model.state_names == ("V", "Xr1", "Xr2", "Xs", "m", "h", "j", "d", "f", "f2", "fCass", "s", "r",
                                 "Ca_i", "R_prime", "Ca_SR", "Ca_ss", "Na_i", "K_i")
    niederer = [-85.23, 0.00621, 0.4712, 0.0095, 0.00172, 0.7444, 0.7045, 3.373e-5, 0.7888, 0.9755, 0.9953,
                0.999998, 2.42e-8, 1.26e-4, 0.9073, 3.64, 3.6e-4, 8.604, 136.89]
    assert np.array_equal(model.initial_state(3)[:, 2], niederer)
    assert model.find_bad_state(model.initial_state(2)) is None
    for name, par in model.parameters.items():
        assert par.unit, f"parameter {name} has no unit"
    assert tuple(model.state_names[k] for k in model.gates) == (
        "Xr1", "Xr2", "Xs", "m", "h", "j", "d", "f", "f2", "fCass", "s", "r")

    text = HEADER.read_text()
    enums = re.findall(r"enum\s*\{(.*?)\};", text, re.S)
    names = lambda body, prefix: [w[len(prefix):] for w in re.findall(r"\b(%s\w+)" % prefix, re.sub(
        r"/\*.*?\*/", "", body, flags=re.S)) if not w.endswith("COUNT_")]
    tp = next(names(e, "TP_") for e in enums if "TP_R" in e)
    ts = next(names(e, "TS_") for e in enums if "TS_V" in e)
    assert tp == list(model.PARAMETER_ORDER) + list(DERIVED_ORDER)
    assert ts == list(model.state_names)
    define = lambda n: int(re.search(r"#define\s+%s\s+(\d+)" % n, text).group(1))
    assert define("TT06_N_STATES") == 19
    assert define("TT06_N_PARAMS") == len(tp) == model.parameter_vector().size
    assert define("TT06_N_BASE_PARAMS") == len(model.PARAMETER_ORDER)


def test_parameter_vector_applies_overrides():
    base = TenTusscher2006Epi()
    m = TenTusscher2006Epi(overrides={"g_to": 0.073, "K_o": 8.0})
    order = list(m.PARAMETER_ORDER) + list(DERIVED_ORDER)
    v0, v = base.parameter_vector(), m.parameter_vector()
    assert v.dtype == np.float64
    assert v[order.index("g_to")] == 0.073 and v[order.index("K_o")] == 8.0
    assert v[order.index("sqrt_Ko")] == pytest.approx(math.sqrt(8.0 / 5.4), rel=1e-15)   # derived: recomputed
    assert v[order.index("log_Ko")] == pytest.approx(math.log(8.0), rel=1e-15)
    assert v0[order.index("c_NaK")] == pytest.approx(1.1688550e-4, rel=1e-7)              # spec.md §2: c_V
    assert v0[order.index("gCaL_2F")] == pytest.approx(7.6802332, rel=1e-7)               # spec.md §3: 2F·G_CaL
    with pytest.raises(ValueError):
        TenTusscher2006Epi(variant="septal")
    endo = TenTusscher2006Epi(variant="endo").parameter_vector()
    assert endo[order.index("g_to")] == 0.073 and endo[order.index("s_endo")] == 1.0


def test_rhs_vectorised_over_cells(model, ap_states):
    """One call over many different cells = one call per cell; i_stim per cell."""
    S = ap_states[:, ::37]
    istim = np.where(np.arange(S.shape[1]) % 2, STIM_AMP, 0.0)
    d_all = np.empty_like(S)
    model.rhs(0.0, S, istim, d_all)
    for c in range(S.shape[1]):
        d1 = np.empty((19, 1))
        model.rhs(0.0, S[:, [c]], istim[c], d1)
        assert np.array_equal(d1[:, 0], d_all[:, c])


# ---------------------------------------------------------------------------------------------------------------------
# the NumPy rhs against the CellML file itself
# ---------------------------------------------------------------------------------------------------------------------
_M = "{http://www.w3.org/1998/Math/MathML}"
_C = "{http://www.cellml.org/cellml/1.0#}"


class CellMLModel:
    """Just enough of CellML 1.0 to evaluate this file's derivatives: components, variables with initial values,
    connections (no unit conversions occur in it), MathML apply/ci/cn/piecewise and the operators it uses."""

    def __init__(self, path):
        root = ET.parse(path).getroot()
        self.init, self.eqs, self.odes, parent = {}, {}, {}, {}
        for comp in root.iter(_C + "component"):
            cn = comp.get("name")
            for v in comp.findall(_C + "variable"):
                parent[(cn, v.get("name"))] = (cn, v.get("name"))
                if v.get("initial_value") is not None:
                    self.init[(cn, v.get("name"))] = float(v.get("initial_value"))
            for ap in (a for m in comp.findall(_M + "math") for a in m.findall(_M + "apply")):
                _, lhs, rhs = list(ap)
                if lhs.tag == _M + "ci":
                    self.eqs[(cn, lhs.text.strip())] = (cn, rhs)
                else:                                   # <apply><diff/><bvar>time</bvar><ci>x</ci></apply>
                    self.odes[(cn, lhs[2].text.strip())] = (cn, rhs)

        def find(k):
            while parent[k] != k:
                k = parent[k]
            return k
        for con in root.iter(_C + "connection"):
            mc = con.find(_C + "map_components")
            for mv in con.findall(_C + "map_variables"):
                a = find((mc.get("component_1"), mv.get("variable_1")))
                b = find((mc.get("component_2"), mv.get("variable_2")))
                parent[a] = b
        groups = {}
        for k in parent:
            groups.setdefault(find(k), []).append(k)
        self.canon = {}
        for members in groups.values():
            src = next((m for m in members if m in self.init or m in self.eqs), members[0])
            self.canon.update({m: src for m in members})
        self.by_name = {name: key for key in self.odes for name in [key[1]]}

    def derivatives(self, state, i_stim):
        """state: {CellML state name: value}; the stimulus i_Stim is replaced by ``i_stim``."""
        vals = {self.canon[self.by_name[n]]: v for n, v in state.items()}
        vals[self.canon[("membrane", "i_Stim")]] = i_stim

        def get(key):
            key = self.canon[key]
            if key not in vals:
                vals[key] = ev(*self.eqs[key]) if key in self.eqs else self.init[key]
            return vals[key]

        def ev(cn, e):
            tag = e.tag[len(_M):]
            if tag == "ci":
                return get((cn, e.text.strip()))
            if tag == "cn":
                parts = [s.strip() for s in e.itertext()]
                return float(parts[0]) * 10.0 ** float(parts[1]) if e.get("type") == "e-notation" else float(parts[0])
            if tag == "piecewise":
                for piece in e.findall(_M + "piece"):
                    if ev(cn, piece[1]):
                        return ev(cn, piece[0])
                return ev(cn, e.find(_M + "otherwise")[0])
            op, *args = list(e)
            op = op.tag[len(_M):]
            a = [ev(cn, x) for x in args if x.tag not in (_M + "bvar", _M + "degree")]
            ops = {"plus": lambda: sum(a), "minus": lambda: a[0] - a[1] if len(a) == 2 else -a[0],
                   "times": lambda: math.prod(a), "divide": lambda: a[0] / a[1], "power": lambda: a[0] ** a[1],
                   "exp": lambda: math.exp(a[0]), "ln": lambda: math.log(a[0]), "root": lambda: math.sqrt(a[0]),
                   "floor": lambda: math.floor(a[0]), "lt": lambda: a[0] < a[1], "leq": lambda: a[0] <= a[1],
                   "gt": lambda: a[0] > a[1], "geq": lambda: a[0] >= a[1], "and": lambda: all(a),
                   "or": lambda: any(a)}
            return ops[op]()

        return {n: ev(*self.odes[k]) for n, k in self.by_name.items()}


def test_numpy_rhs_matches_cellml(model):
    """Every derivative equals the CellML's to round-off, at random states spanning V = -90..60 mV (including the
    h/j branch point), with and without stimulus. Exception by design: within 15 ± 0.001 mV the CellML uses a flat
    plateau for I_CaL's GHK factor, this code the exact function (spec.md §5.1); there the tolerance is 1e-4."""
    cm = CellMLModel(REF_DIR / "ten_tusscher_model_2006_epi.cellml")
    assert set(cm.by_name) == set(model.state_names)
    rng = np.random.default_rng(2006)
    y0 = model.initial_state(1)[:, 0]
    Vs = np.concatenate([np.linspace(-90.0, 60.0, 76), [-40.0, -40.0 - 1e-9, 14.9989, 15.0011, 15.0, 15.0004]])
    worst = np.zeros(19)
    for V in Vs:
        y = y0 * (1.0 + 0.3 * rng.uniform(-1.0, 1.0, 19))
        y[1:13] = rng.uniform(0.0, 1.0, 12)
        y[14] = rng.uniform(0.0, 1.0)
        y[0] = V
        i_stim = STIM_AMP if rng.uniform() < 0.5 else 0.0
        d = np.empty((19, 1))
        model.rhs(0.0, y[:, None], i_stim, d)
        ref = cm.derivatives(dict(zip(model.state_names, y)), i_stim)
        ref = np.array([ref[n] for n in model.state_names])
        rel = np.abs(d[:, 0] - ref) / np.abs(ref)
        tol = 1e-4 if abs(V - 15.0) <= 0.001 else 1e-11
        assert np.all(rel <= tol), f"V = {V}: {dict(zip(model.state_names, rel))}"
        if abs(V - 15.0) > 0.001:
            worst = np.maximum(worst, rel)
    print("max relative difference NumPy vs CellML per state:", np.array2string(worst, precision=1))


# ---------------------------------------------------------------------------------------------------------------------
# the C kernel against the NumPy reference
# ---------------------------------------------------------------------------------------------------------------------
def test_header_compiles_cleanly(shim_build):
    """-Wall -Wextra -pedantic, C99: no warnings."""
    assert shim_build[1].strip() == "", shim_build[1]


@pytest.mark.parametrize("i_stim", [0.0, STIM_AMP])
def test_c_rhs_matches_numpy(model, shim, ap_states, i_stim):
    """dy/dt of kernels/tt06.h = NumPy's, to round-off, at ~2100 states along an AP and at the singular points.

    Measure: for each state, the largest difference over all sample states divided by the largest |dy/dt| of that
    state over them (pointwise relative errors are meaningless where dy/dt ~ 0 is itself a difference of nearly
    equal terms, e.g. the m gate at equilibrium); and pointwise relative wherever |dy/dt| is at least 1e-3 of that
    range. The C code is written differently (shared exponentials, rates instead of time constants), so round-off
    differs; the agreement bounds that and nothing else."""
    S = ap_states
    d_np = np.empty_like(S)
    model.rhs(0.0, S, i_stim, d_np)
    d_c = shim.rhs(S, i_stim)
    scale = np.abs(d_np).max(axis=1)
    err_range = np.abs(d_c - d_np).max(axis=1) / scale
    big = np.abs(d_np) >= 1e-3 * scale[:, None]
    err_point = np.where(big, np.abs(d_c - d_np) / np.where(big, np.abs(d_np), 1.0), 0.0).max(axis=1)
    table = "\n".join(f"  {n:8s} {a:9.1e} {b:9.1e}" for n, a, b in zip(model.state_names, err_range, err_point))
    print(f"C vs NumPy rhs, i_stim = {i_stim}: state, error/range, pointwise relative (|dy/dt| >= 1e-3 range)\n"
          + table)
    # measured with gcc 12 / glibc: error/range <= 2.3e-15, pointwise <= 1.1e-12 (m and Xr2 near equilibrium,
    # where x_inf - x cancels; 1e-3 of the range times round-off 1e-15 gives 1e-12)
    assert np.all(err_range < 1e-13), table
    assert np.all(err_point < 1e-11), table


def test_native_driver_runs_the_same_rhs(shim, native, ap_states):
    """cardiosim.reaction.ode.native (kernels/cpu_driver.c with tt06.h) evaluates exactly the function the shim does."""
    for c in range(0, ap_states.shape[1], 97):
        y = ap_states[:, [c]]
        assert np.array_equal(native.rhs(y[:, 0], STIM_AMP), shim.rhs(y, STIM_AMP)[:, 0])


def test_c_rush_larsen_step_matches_numpy(model, shim, ap_states):
    for dt in (0.01, 0.05, 1.0):
        y_np = ap_states.copy()
        model.rush_larsen(y_np, 0.0, dt, STIM_AMP)
        y_c = shim.rl_step(ap_states, dt, STIM_AMP)
        rel = np.abs(y_c - y_np) / np.maximum(np.abs(y_np), 1e-300)
        assert rel.max() < 1e-12, (dt, dict(zip(model.state_names, rel.max(axis=1))))


def test_rush_larsen_rule(model, ap_states):
    """Gates get the exact exponential update for frozen (x_inf, tau); the others one Forward-Euler step."""
    dt = 0.05
    y = ap_states[:, ::50].copy()
    dydt = np.empty_like(y)
    gates = model._evaluate(y, STIM_AMP, dydt)
    y_rl = y.copy()
    model.rush_larsen(y_rl, 0.0, dt, STIM_AMP)
    for k, (inf, tau) in zip(model.gates, gates):
        assert np.allclose(y_rl[k], inf + (y[k] - inf) * np.exp(-dt / tau), rtol=1e-15, atol=0.0)
    for k in set(range(19)) - set(model.gates):
        assert np.array_equal(y_rl[k], y[k] + dt * dydt[k])
    # consistency of the two uses of (x_inf, tau): dx/dt = (x_inf - x)/tau
    for k, (inf, tau) in zip(model.gates, gates):
        assert np.allclose(dydt[k], (inf - y[k]) / tau, rtol=1e-14, atol=0.0)


def test_numpy_and_native_forward_euler_agree(model, native):
    """3 ms through the upstroke at dt = 0.001 ms: the NumPy FE and the C driver's FE stay together to round-off
    (the upstroke amplifies differences, hence 1e-9 rather than 1e-15)."""
    dt, n = 0.001, 3000
    y_np = model.initial_state(1)
    y_c = np.ascontiguousarray(model.initial_state(1))
    work = np.empty_like(y_np)
    for k in range(n):
        model.forward_euler(y_np, k * dt, dt, STIM_AMP if STIM.active(k * dt) else 0.0, work)
    native.advance(y_c, 0.0, dt, n, [STIM], [STIM_AMP])
    assert y_np[0, 0] > 20.0  # past the upstroke
    rel = np.abs(y_c - y_np) / np.abs(y_np)
    assert rel.max() < 1e-9, dict(zip(model.state_names, rel[:, 0]))


# ---------------------------------------------------------------------------------------------------------------------
# single-cell beats against the CVODE reference
# ---------------------------------------------------------------------------------------------------------------------
def native_fe_beat(model, native, dt):
    """Beat 1 with the C Forward-Euler driver: V every step over the first 20 ms (upstroke), then every 0.05 ms."""
    y = np.ascontiguousarray(model.initial_state(1))
    ts, Vs, Cas = [0.0], [y[0, 0]], [y[13, 0]]
    k_fine = int(round(20.0 / dt))
    for k in range(k_fine):
        native.advance(y, k * dt, dt, 1, [STIM], [STIM_AMP])
        ts.append((k + 1) * dt)
        Vs.append(y[0, 0])
        Cas.append(y[13, 0])
    per = int(round(0.05 / dt))
    k = k_fine
    while k * dt < T_BEAT - 1e-9:
        native.advance(y, k * dt, dt, per, [STIM], [STIM_AMP])
        k += per
        ts.append(k * dt)
        Vs.append(y[0, 0])
        Cas.append(y[13, 0])
    assert model.find_bad_state(y) is None
    return np.array(ts), np.array(Vs), np.array(Cas)


def rms_vs_trace(t, V):
    t_ref, V_ref, _ = reference_trace()
    return float(np.sqrt(np.mean((np.interp(t_ref, t, V) - V_ref) ** 2)))


@pytest.mark.parametrize("dt", [0.001, 0.002])
def test_forward_euler_beat_matches_cvode(model, native, dt, capsys):
    """Forward Euler on all 19 states (the C kernel via cardiosim.reaction.ode.native), beat 1: biomarkers within 1 % of
    CVODE (V_peak within 0.5 mV); V within 0.1 mV RMS of the reference trace over 0-500 ms (measured: 0.007 mV at
    dt = 0.001, 0.013 mV at 0.002; APD90 290.157 / 290.150 ms against 290.165)."""
    t, V, Ca = native_fe_beat(model, native, dt)
    b = beat_biomarkers(t, V, Ca)
    rms = rms_vs_trace(t, V)
    with capsys.disabled():
        print(f"\n{biomarker_table([(f'Forward Euler dt={dt}', b)])}\n  V RMS vs CVODE trace: {rms:.3f} mV; "
              f"max dV/dt at t = {b['t_dVdt_max']:.3f} ms (reference 0.90)")
    check_biomarkers(b)
    assert rms < 0.1


@pytest.mark.parametrize("dt", [0.01, 0.05])
@pytest.mark.slow
def test_rush_larsen_beat_numpy(model, shim, dt, capsys):
    """NumPy Rush–Larsen, beat 1: stable (every state finite and in range at every step) and APD90 within 1 % of
    CVODE (README: RL keeps APD90 within 1 % up to dt ~ 0.2 ms, the upstroke degrades early: V_peak +1 mV at 0.01,
    +5.8 mV at 0.05), V within 1 mV RMS of the reference trace (measured 0.10 / 0.49 mV). The C Rush–Larsen gives
    the same trajectory."""
    n = int(round(T_BEAT / dt))
    y = model.initial_state(1)
    work = np.empty_like(y)
    V, Ca = np.empty(n + 1), np.empty(n + 1)
    V[0], Ca[0] = y[0, 0], y[13, 0]
    for k in range(n):
        t = k * dt
        model.rush_larsen(y, t, dt, STIM_AMP if STIM.active(t) else 0.0, work)
        V[k + 1], Ca[k + 1] = y[0, 0], y[13, 0]
        if k % 10 == 0:
            assert model.find_bad_state(y) is None, f"bad state at t = {t + dt} ms"
    assert model.find_bad_state(y) is None
    t = np.arange(n + 1) * dt
    b = beat_biomarkers(t, V, Ca)
    rms = rms_vs_trace(t, V)
    with capsys.disabled():
        print(f"\n{biomarker_table([(f'Rush-Larsen dt={dt} (NumPy)', b)])}\n  V RMS vs CVODE trace: {rms:.3f} mV")
    assert abs(b["APD90"] - REFERENCE_BEAT1["APD90"]) <= 0.01 * REFERENCE_BEAT1["APD90"], b["APD90"]
    assert rms < 1.0

    # the C kernel's Rush–Larsen, same steps and stimulus: the same beat (differences start at round-off)
    _, V_c, _, y_c, _, _, bad = shim.rl_run(model.initial_state(1)[:, 0], dt, T_BEAT)
    assert bad == -1
    assert np.max(np.abs(V_c - V)) < 1e-6
    assert np.allclose(y_c, y[:, 0], rtol=1e-9, atol=0.0)


@pytest.mark.parametrize("dt", [0.1, 0.2, 0.5, 1.0])
def test_rush_larsen_large_steps_stay_stable(model, shim, dt):
    """README: RL is stable at any step tried (up to 1 ms). Checked with the C kernel: every state finite and in
    its admissible range throughout the beat, and the cell repolarises. APD90 (measured): -0.37 % at 0.1 ms,
    -1.02 % at 0.2 ms, -2.9 % at 0.5 ms, -5.1 % at 1 ms; the upstroke is badly off beyond 0.05 ms (V_peak 50 mV at
    0.1 ms, 233 mV at 1 ms)."""
    t, V, Ca, y, ymin, ymax, bad = shim.rl_run(model.initial_state(1)[:, 0], dt, T_BEAT)
    assert bad == -1
    assert model.find_bad_state(np.vstack([ymin, ymax]).T) is None
    assert V.max() > 0.0 and V[-1] < -80.0
    tol = {0.1: 0.01, 0.2: 0.015, 0.5: 0.04, 1.0: 0.07}[dt]
    apd90 = beat_biomarkers(t, V, Ca)["APD90"]
    assert abs(apd90 - REFERENCE_BEAT1["APD90"]) <= tol * REFERENCE_BEAT1["APD90"], apd90


# ---------------------------------------------------------------------------------------------------------------------
# too large a Forward-Euler step is detected
# ---------------------------------------------------------------------------------------------------------------------
def test_forward_euler_too_large_step_is_detected(model, native):
    """dt = 0.003 ms > 2·tau_m (tau_m ~ 1 µs at -85 mV). During the upstroke and plateau tau_m is longer and nothing
    shows; once the cell has repolarised (README: "m leaves [0, 1] in diastole") the m gate oscillates with growing
    amplitude (x1.9 per step) and leaves [0, 1]. find_bad_state names it, before anything becomes non-finite.

    The beat is run in C (cardiosim.reaction.ode.native, range check off) in chunks of 10 steps, find_bad_state after each;
    then the NumPy Forward Euler is restarted 5 ms before that point and must find it too, checking every step.
    Finally the native driver's own range check stops the run with a SimulationError naming m."""
    from cardiosim.runtime.errors import SimulationError
    dt, chunk = 0.003, 10
    y = np.ascontiguousarray(model.initial_state(1))
    history = {}
    found, k = None, 0
    while k * dt < 1000.0 and found is None:
        if k % 1000 == 0:                            # every 3 ms
            history[k] = y.copy()
        native.advance(y, k * dt, dt, chunk, [STIM], [STIM_AMP], check_range=False)  # raises if non-finite
        k += chunk
        found = model.find_bad_state(y)
    assert found is not None, "Forward Euler at dt = 0.003 ms was not caught"
    assert model.state_names[found[0]] == "m"
    t_bad = k * dt
    assert 250.0 < t_bad < 400.0, t_bad              # after repolarisation (APD90 ~ 290 ms)

    k0 = max(kk for kk in history if kk * dt <= t_bad - 5.0)
    y = history[k0].copy()
    assert model.find_bad_state(y) is None
    work = np.empty_like(y)
    found_np = None
    for kk in range(k0, k0 + 10000):
        model.forward_euler(y, kk * dt, dt, STIM_AMP if STIM.active(kk * dt) else 0.0, work)
        found_np = model.find_bad_state(y)
        if found_np is not None:
            break
    assert found_np is not None and model.state_names[found_np[0]] == "m"
    assert np.all(np.isfinite(y))
    print(f"FE dt=0.003: m = {y[4, 0]:.3g} out of range at t = {(kk + 1) * dt:.3f} ms (NumPy), "
          f"{t_bad:.2f} ms (C, checked every {chunk} steps)")

    y = np.ascontiguousarray(model.initial_state(1))
    with pytest.raises(SimulationError, match="state m"):
        for k in range(0, 400000, 100):
            native.advance(y, k * dt, dt, 100, [STIM], [STIM_AMP])

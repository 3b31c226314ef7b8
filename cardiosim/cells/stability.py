"""A set-up warning where an explicit cell step is beyond a state's stability limit.

Why: Forward Euler on dy_i/dt = f_i(y) is unstable, for the state's own decay, where the step dt exceeds 2/|J_ii|,
J_ii = ∂f_i/∂y_i < 0. TT06's m gate has τ_m ≈ 1 µs at rest, so an ODE step of 0.002 ms runs for hours and then
turns into NaN the first time V dips a fraction of a mV below rest (the idealised LV at 0.025 cm did exactly that:
docs/decisions/0041-stability-warning-at-set-up.md). This module says so in one line at set-up, before the
compute is spent. It is a warning, not an error: the estimate is of the diagonal only, at states the run may never
visit, and the user may know better.

How: J_ii is estimated by central differences of the model's NumPy right-hand side (every cell model has one:
built in or generated from CellML) at the model's initial state, with the membrane potential swept over the range
a cell visits (:data:`V_BELOW_INITIAL` below its initial value, normally its resting potential, to :data:`V_TOP`)
and every other state at its initial value. All states and all potentials go through one call of ``rhs``, with
one column per (state, ±step, V): about 12,000 columns for a 41-state model. Measured (median of 7, a shared
2-core machine): TT06 10 ms, Bondarenko 14 ms, O'Hara–Rudy (CellML) 35 ms.

What is checked:

* forward-euler: every state but the membrane potential;
* rush-larsen: the states that are not gates (``model.gates``): the gates are advanced exactly for frozen V, so
  their τ does not limit the step (TT06's concentrations and R', the Markov states of a CellML model);
* grl1, cvode: nothing: GRL1 integrates every state's own linearisation exactly (the diagonal J_ii is what it
  uses), CVODES chooses its own step.

What it does not see: stiffness that comes with states far from their initial values. Bondarenko's RyR state
P_O1 has 2/|J_ii| = 0.0002 ms during the beat's calcium release (t ≈ 4.5 ms, Cass high), where Forward Euler at
0.0002 ms indeed fails; at the initial state it is far from limiting, and this check says 0.039 ms (state C_Na2,
at the top of the sweep). Finding that would mean integrating a beat at set-up (a minute in NumPy for Bondarenko),
so it is not done: no warning is no proof of stability. For TT06 and O'Hara–Rudy the limits along a beat (Rush–Larsen at 0.01 ms, J_ii every 0.05 ms)
are those of the same gates as here, and above the sweep's (TT06: m, 0.0024 ms at rest; O'Hara–Rudy: h_f,
0.0251 ms at the AP's peak).

The membrane potential is left out: its step is bounded by the tissue (diffusion, the PDE's time scheme) and by
resolving the upstroke, which the reaction's ∂f_V/∂V alone does not tell.

Nothing is cached: the estimate is cheap, and a cache would have to know every parameter override.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: The sweep starts this many mV below the model's initial membrane potential. A paced cell undershoots its initial
#: (resting) potential by little after a beat (measured over one beat at 1 Hz: TT06 0.26 mV, O'Hara–Rudy endo
#: 1.0 mV), and tissue on a star stencil (an M-matrix) not below what its cells do. 1 mV is the allowance: the
#: stiffest gates' rates grow exponentially as V falls (TT06's τ_m ∝ e^(V/5 mV): 2τ_m is 0.0021 ms at rest, 0.0017
#: ms 1 mV below), so the check flags 0.002 ms (the step that stopped the idealised LV, whose box stencil pulled a
#: node 1.75 mV below rest, and the Niederer runs at dt 0.01 and 0.05 ms, which step the cells at 0.002 ms too) and
#: not the Niederer dt 0.005 ms runs' 0.00167 ms (4 % inside the limit, which their star stencil keeps). A larger
#: allowance (3 mV: 0.0012 ms) flagged those; a fixed bottom such as -100 mV would flag every step anybody uses
#: (τ_m of TT06 is 0.06 µs there).
V_BELOW_INITIAL = 1.0
#: The top of the sweep, mV: above the peaks of the usual ventricular action potentials (TT06 +40 mV; O'Hara–Rudy
#: +51.4 mV paced with -80 µA/µF for 0.5 ms, where its h_f gate's limit is 0.0251 ms, 0.021 ms at the top).
V_TOP = 55.0
#: The sweep's spacing, mV: the steepest limits (the fast Na gates) change by under 25 % per mV, and their minimum is
#: at an end of the sweep, both of which are on the grid.
V_STEP = 1.0

#: What a blow-up's message says of the time step where nothing has been measured (the integrators' own messages):
#: a step above a state's stability limit is one cause, an expression undefined at the state reached another, and
#: only a run at a smaller step tells them apart. ``cardiosim cell`` replaces it by what it measured
#: (cardiosim.single_cell.pacing).
STEP_HINT = "; if a smaller dt moves or removes this, the time step is too large"


@dataclass(frozen=True)
class Limit:
    """The smallest Forward-Euler limit of a model: 2/|J_ii| (ms) of state ``state`` at membrane potential ``v``
    (mV), the other states at their initial values."""
    state: str
    dt: float
    v: float


def _sweep(model) -> np.ndarray:
    """The membrane potentials (mV) the limits are estimated at; the initial one only for a model whose V is not in
    mV (Pathmanathan–Gray's manufactured solution is dimensionless: no physiological range to sweep)."""
    v0 = float(model.initial_state(1)[0, 0])
    if model.states[0].unit != "mV":
        return np.array([v0])
    bottom = v0 - V_BELOW_INITIAL
    return np.append(np.arange(bottom, V_TOP, V_STEP), V_TOP) if bottom < V_TOP else np.array([bottom])


def diagonal_jacobian(model, states, v: np.ndarray) -> np.ndarray:
    """J_ii = ∂f_i/∂y_i (1/ms) of the listed ``states`` (indices, not 0: V is swept, not perturbed) at the model's
    initial state with V = each of ``v`` (mV); shape (len(states), len(v)), NaN where the right-hand side is not
    finite. Central differences, one call of the model's vectorised ``rhs`` (no stimulus)."""
    y0 = model.initial_state(1)[:, 0]
    idx = np.asarray(states, dtype=np.int64)
    m, nv = len(idx), len(v)
    # The step: relative to the value, with a floor for states that start at (or near) 0, small enough that a
    # concentration stays positive (they appear in logarithms) and the truncation error is nil, large enough that
    # rounding (~1e-16·|f_i|/h) is far below the |J_ii| that matter here (> 100 /ms). Ten times larger or smaller
    # steps move no J_ii above 1 /ms of Bondarenko or O'Hara–Rudy by more than 1e-6 of itself (measured).
    h = 1e-6 * np.abs(y0[idx]) + 1e-9
    y = np.repeat(y0[:, None], 2 * m * nv, axis=1).reshape(len(y0), 2, m, nv)
    y[0] = v
    for k, i in enumerate(idx):
        y[i, 0, k] += h[k]
        y[i, 1, k] -= h[k]
    y = y.reshape(len(y0), -1)
    f = np.empty_like(y)
    with np.errstate(all="ignore"):
        model.rhs(0.0, y, 0.0, f)
        f = f.reshape(len(y0), 2, m, nv)
        J = (f[idx, 0, np.arange(m)] - f[idx, 1, np.arange(m)]) / (2 * h[:, None])
    J[~np.isfinite(J)] = np.nan
    return J


def checked_states(model, integrator: str) -> list[int]:
    """The states whose Forward-Euler limit bounds ``integrator``'s step (module docstring): indices into
    model.states; empty where the integrator has no such limit."""
    if integrator == "forward-euler":
        return list(range(1, model.n_states))
    if integrator == "rush-larsen":
        gates = set(getattr(model, "gates", ()))
        return [i for i in range(1, model.n_states) if i not in gates]
    return []


def smallest_limit(model, integrator: str = "forward-euler") -> Limit | None:
    """The smallest 2/|J_ii| (ms) over the states ``integrator`` steps by Forward Euler and the swept membrane
    potentials, or None where no such state decays (J_ii ≥ 0 or none checked)."""
    idx = checked_states(model, integrator)
    if not idx:
        return None
    v = _sweep(model)
    J = diagonal_jacobian(model, idx, v)
    with np.errstate(divide="ignore"):
        lim = np.where(J < 0, 2.0 / np.abs(np.where(J < 0, J, 1.0)), np.inf)    # NaN compares False: no limit
    k, j = np.unravel_index(np.argmin(lim), lim.shape)
    if not math.isfinite(lim[k, j]):
        return None
    return Limit(model.states[idx[k]].name, float(lim[k, j]), float(v[j]))


def _floor2(x: float) -> float:
    """``x`` rounded down to two significant digits (a step to suggest must not land above the limit)."""
    e = math.floor(math.log10(x)) - 1
    return math.floor(x / 10 ** e) * 10 ** e


def step_warning(model, integrator: str, dt: float, *, option: str, step_is: str, smaller) -> str | None:
    """One line (or None) saying that the ODE step ``dt`` (ms) of ``integrator`` is above the smallest stability
    limit of ``model`` (:func:`smallest_limit`). How the user sets things differs between a config and the command
    line, so the caller says it: ``option`` formats an integrator's name as set ('cell.integrator = "{}"'),
    ``step_is`` names the step ("the ODE step simulation.dt / simulation.ode_substeps ="), and ``smaller(dt)``
    says how to get a step of at most ``dt`` ms, the limit rounded down to two digits ("--dt 0.0011")."""
    lim = smallest_limit(model, integrator)
    if lim is None or dt <= lim.dt:
        return None
    gate = model.state_index(lim.state) in getattr(model, "gates", ())
    # What would lift this limit: Rush-Larsen where the state is a gate, GRL1 (CellML models) for any state.
    others = [name for name, attr, lifts in (("rush-larsen", "rush_larsen", gate), ("grl1", "grl1", True))
              if name != integrator and hasattr(model, attr) and lifts]
    fix = "".join(option.format(o) + ", or " for o in others)
    return (f"{option.format(integrator)} with {step_is} {dt:g} ms is above the stability limit of state "
            f"{lim.state} of {model.name} (2/|∂f/∂{lim.state}| = {lim.dt:.3g} ms at V = {lim.v:.4g} mV, the least "
            f"over V from {V_BELOW_INITIAL:g} mV below the initial V to {V_TOP:g} mV): the run may end in NaN; use "
            f"{fix}{smaller(_floor2(lim.dt))}")

"""The interface every cell model implements.

A cell model is a system of ODEs dy/dt = f(t, y, I_stim) for one cell, evaluated vectorised over many cells.
States are stored as a structure of arrays: ``y[s, c]`` is state ``s`` of cell ``c``, always float64. State 0
is the transmembrane potential V in mV; the time unit is ms.

The stimulus current ``i_stim`` is given per unit membrane capacitance, in µA/µF (= pA/pF), with the sign
convention of ionic currents: a **negative** value depolarises. The tissue layer converts from µA/cm² or µA/cm³.

Parameters are plain floats with units, overridable by name (``cell.parameters`` in a config). A model may
define variants (e.g. Bondarenko's apical and septal cells) that are named parameter sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import numpy as np

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from cardiosim.runtime.errors import UserError


class CellModelError(UserError):
    """A user-facing problem with a cell model's name, variant or parameters."""


@dataclass(frozen=True)
class Parameter:
    value: float
    unit: str
    doc: str = ""


@dataclass(frozen=True)
class State:
    name: str
    initial: float
    unit: str
    doc: str = ""
    # Physically admissible range; leaving it stops the run with the state named (gates in [0, 1], ...).
    lower: float = -np.inf
    upper: float = np.inf


TABLES = Path(__file__).resolve().parent / "tables"


def read_table(name: str) -> tuple[tuple[State, ...], dict[str, Parameter]]:
    """A hand-written model's states and parameters, in its kernel's order, from ``cells/tables/<name>.toml``: each
    state with its unit and admissible range, or a kind (``[kinds.<kind>]``) that gives them; each parameter as
    value, unit and doc. Data, not code: the tables are read once, at import."""
    data = tomllib.loads((TABLES / f"{name}.toml").read_text(encoding="utf-8"))
    kinds = data.get("kinds", {})
    states = tuple(State(s["name"], s["initial"], doc=s["doc"],
                         **{k: kinds[s["kind"]][k] if "kind" in s else s[k] for k in ("unit", "lower", "upper")})
                   for s in data["states"])
    parameters = {n: Parameter(p["value"], p["unit"], p["doc"]) for n, p in data["parameters"].items()}
    return states, parameters


class CellModel:
    """Base class. Subclasses set the class attributes and implement :meth:`rhs`.

    Class attributes:
      name          registry name used in configs (``cell.model``)
      states        tuple of :class:`State`, states[0] is V (mV)
      parameters    dict name -> :class:`Parameter` (defaults)
      variants      dict variant name -> {parameter: value}; ``default_variant`` names the one used by default
      needs_tissue  names of tissue constants the model reads (``"Cm"`` in µF/cm², ``"chi"`` in cm⁻¹)
    """

    name: str = ""
    states: tuple[State, ...] = ()
    parameters: Mapping[str, Parameter] = {}
    variants: Mapping[str, Mapping[str, float]] = {}
    default_variant: str | None = None
    needs_tissue: tuple[str, ...] = ()
    #: ``kernels/<kernel_name>.h`` holds the model's C right-hand side (native and CUDA backends); None: NumPy only.
    kernel_name: str | None = None
    #: The parameter vector the C code reads as CS_PARAM(i): these parameters, then these derived constants.
    PARAMETER_ORDER: tuple[str, ...] = ()
    DERIVED_ORDER: tuple[str, ...] = ()

    @staticmethod
    def derived_constants(p: Mapping[str, float]) -> dict:
        """Parameter-only constants precomputed for the kernels (R·T/F, 1/τ, ...), by name."""
        return {}

    def parameter_vector(self) -> np.ndarray:
        """float64: the parameters (variant and overrides applied) in PARAMETER_ORDER, then the derived constants in
        DERIVED_ORDER; what the kernels read as CS_PARAM(i). Upload it whole."""
        d = self.derived_constants(self.p)
        return np.array([self.p[k] for k in self.PARAMETER_ORDER] + [d[k] for k in self.DERIVED_ORDER],
                        dtype=np.float64)

    def __init__(self, variant: str | None = None, overrides: Mapping[str, float] | None = None,
                 tissue: Mapping[str, float] | None = None):
        variant = variant or self.default_variant
        if self.variants:
            if variant not in self.variants:
                raise CellModelError(
                    f"cell.variant: '{variant}' is not a variant of {self.name}; allowed: {', '.join(self.variants)}")
        elif variant is not None:
            raise CellModelError(f"cell.variant: {self.name} has no variants (got '{variant}')")
        self.variant = variant
        p = {k: v.value for k, v in self.parameters.items()}
        if variant is not None:
            p.update(self.variants[variant])
        for k, v in (overrides or {}).items():
            if k not in p:
                raise CellModelError(
                    f"cell.parameters.{k}: {self.name} has no parameter '{k}'; "
                    f"allowed: {', '.join(sorted(p))}")
            p[k] = float(v)
        for k in self.needs_tissue:
            if tissue is None or k not in tissue:
                raise CellModelError(f"cell model {self.name} needs the tissue constant '{k}'")
            p[k] = float(tissue[k])
        self.p = p

    # -- shape -------------------------------------------------------------------------------------------------
    @property
    def n_states(self) -> int:
        return len(self.states)

    @property
    def state_names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.states)

    def state_index(self, name: str) -> int:
        return self.state_names.index(name)

    def initial_state(self, n_cells: int, coords: np.ndarray | None = None) -> np.ndarray:
        """Initial states, shape (n_states, n_cells). ``coords`` (n_cells, dim) in cm, for models whose initial
        state depends on position (manufactured solutions); most ignore it."""
        y0 = np.array([s.initial for s in self.states], dtype=np.float64)
        return np.repeat(y0[:, None], n_cells, axis=1)

    # -- dynamics ----------------------------------------------------------------------------------------------
    def rhs(self, t: float, y: np.ndarray, i_stim: np.ndarray | float, dydt: np.ndarray) -> None:
        """Write dy/dt (per ms) into ``dydt`` (same shape as ``y``). ``i_stim`` in µA/µF, negative depolarises."""
        raise NotImplementedError

    def forward_euler(self, y: np.ndarray, t: float, dt: float, i_stim, work: np.ndarray | None = None) -> None:
        """One Forward-Euler step of ``dt`` ms in place."""
        dydt = np.empty_like(y) if work is None else work
        self.rhs(t, y, i_stim, dydt)
        y += dt * dydt

    # -- checking ----------------------------------------------------------------------------------------------
    def find_bad_state(self, y: np.ndarray) -> tuple[int, int] | None:
        """(state index, cell index) of the first non-finite or out-of-range state, or None."""
        for s, st in enumerate(self.states):
            row = y[s]
            bad = ~np.isfinite(row)
            if st.lower > -np.inf:
                bad |= row < st.lower
            if st.upper < np.inf:
                bad |= row > st.upper
            if bad.any():
                return s, int(np.argmax(bad))
        return None

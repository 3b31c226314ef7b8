"""The 4-state cell model of the Pathmanathan & Gray 2014 manufactured solutions (reference/verification.md §1).

Int J Numer Meth Biomed Eng 30:525–544. Dimensionless; with σ = diag(1.1, 1.2, 0.3)/π², Cm = 2, χ = 3 on [0,1]^d:
    w = u1 + u3 − V
    du1/dt = w² u2² + w u2² (V − u3)/2,   du2/dt = −w u2³,   du3/dt = 0
    I_ion  = −Cm w u2² (V − u3)/2 + β (V − u3)/χ,          Cm dV/dt = −I_ion − Cm·I_stim
with β = c (monodomain) or c(1 − k) (bidomain), c = −1.1, −5.9, −8.6 in 1D, 2D, 3D and k = 1/√2. The exact
solution is V = √(1+t)·F(x), u1 = G(x)(1+t) + V, u2 = 1/(√G (1+t)), u3 = 0, so the initial state depends on
position: :meth:`initial_state` takes node coordinates.
"""

import numpy as np

from cardiosim.cells.base import CellModel, Parameter, State


def F(coords: np.ndarray) -> np.ndarray:
    """cos(πx)·cos(2πy)·cos(3πz), for as many coordinates as given."""
    out = np.ones(len(coords))
    for d in range(coords.shape[1]):
        out *= np.cos((d + 1) * np.pi * coords[:, d])
    return out


def G(coords: np.ndarray) -> np.ndarray:
    """1 + x, 1 + x y², 1 + x y² z³."""
    prod = np.ones(len(coords))
    for d in range(coords.shape[1]):
        prod *= coords[:, d] ** (d + 1)
    return 1.0 + prod


def exact(coords: np.ndarray, t: float) -> dict:
    """The manufactured solution at time t: V, u1, u2, u3 and φe/(−k) is V (bidomain: φe = −V/√2)."""
    f, g = F(coords), G(coords)
    V = np.sqrt(1.0 + t) * f
    return {"V": V, "u1": g * (1.0 + t) + V, "u2": 1.0 / (np.sqrt(g) * (1.0 + t)), "u3": np.zeros_like(V)}


class PathmanathanGray(CellModel):
    name = "pathmanathan-gray"
    states = (
        State("V", 1.0, "1", "transmembrane potential (dimensionless)"),
        State("u1", 2.0, "1"),
        State("u2", 1.0, "1"),
        State("u3", 0.0, "1"),
    )
    parameters = {
        "beta": Parameter(-1.1, "1", "β: c (monodomain) or c(1 − k) (bidomain); c = −1.1, −5.9, −8.6 in 1D/2D/3D"),
    }
    needs_tissue = ("Cm", "chi")

    def initial_state(self, n_cells, coords=None):
        if coords is None:
            return super().initial_state(n_cells)
        e = exact(coords, 0.0)
        return np.stack([e["V"], e["u1"], e["u2"], e["u3"]])

    def rhs(self, t, y, i_stim, dydt):
        V, u1, u2, u3 = y
        w = u1 + u3 - V
        u2sq = u2 * u2
        half = 0.5 * w * u2sq * (V - u3)
        dydt[1] = w * w * u2sq + half
        dydt[2] = -w * u2sq * u2
        dydt[3] = 0.0
        dydt[0] = half - self.p["beta"] * (V - u3) / (self.p["chi"] * self.p["Cm"]) - i_stim

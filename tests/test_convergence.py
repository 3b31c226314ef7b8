"""Manufactured solutions of Pathmanathan & Gray 2014 (reference/verification.md §1), mono- and bidomain, 1D/2D.

h = 0.1/2^N, dt = 10 h² (splitting and time errors are O(dt) = O(h²)), T = 1. The error of V (and φe) in
L∞(0,T; L2) must fall as h²: an observed order ≥ 1.8 over each of three refinements.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

S1, S2 = 1.1 / math.pi**2, 1.2 / math.pi**2
K = 1.0 / math.sqrt(2.0)
C = {1: -1.1, 2: -5.9}
LEVELS = (0, 1, 2, 3)


def mms_config(dim: int, equations: str, level: int, scheme: str = "backward-euler", stencil: str = "auto"):
    from cardiosim import config
    h = 0.1 / 2**level
    dt = 10 * h * h
    if equations == "bidomain":
        si = (S1, S2)
        se = tuple(s * (1 - K) / K for s in si)
        beta = C[dim] * (1 - K)
    else:  # σm = σi σe / (σi + σe) = s with σi = σe = 2s
        si = se = (2 * S1, 2 * S2)
        beta = C[dim]
    text = f"""
[simulation]
equations = "{equations}"
duration = 1.0
dt = {dt!r}
time_scheme = "{scheme}"
progress_interval = 0
[grid]
size = {[1.0] * dim}
spacing = {h!r}
stencil = "{stencil}"
[tissue]
chi = 3.0
Cm = 2.0
sigma_il = {si[0]!r}
sigma_it = {si[1]!r}
sigma_el = {se[0]!r}
sigma_et = {se[1]!r}
[cell]
model = "pathmanathan-gray"
parameters = {{ beta = {beta!r} }}
"""
    return config.loads(text, name=f"mms-{dim}d-{equations}-{level}")


def mms_errors(cfg):
    """Max over time steps of the mass-weighted L2 errors of V and (mean-free) φe."""
    from cardiosim.cells.pathmanathan_gray import exact
    from cardiosim.simulation.loop import Simulation
    sim = Simulation(cfg, write_output=False)
    coords = sim.grid.coords()
    M = sim.tissue.M.getArray()
    comm = sim.comm
    vol = comm.allreduce(M.sum())
    err = {"V": 0.0, "phi_e": 0.0}

    def l2(e):
        return math.sqrt(comm.allreduce(float(np.sum(M * e * e))))

    def record(s):
        V_ex = exact(coords, s.t)["V"]
        err["V"] = max(err["V"], l2(s.V.getArray() - V_ex))
        if cfg.simulation.equations == "bidomain":
            phi_ex = -K * V_ex
            phi_ex = phi_ex - comm.allreduce(float(np.sum(M * phi_ex))) / vol
            err["phi_e"] = max(err["phi_e"], l2(s.phi.getArray() - phi_ex))

    sim.run(on_step=record)
    return err


@pytest.mark.parametrize("dim,equations,stencil,scheme", [
    (1, "monodomain", "auto", "backward-euler"),
    (2, "monodomain", "auto", "backward-euler"),
    (1, "bidomain", "auto", "backward-euler"),
    (2, "bidomain", "auto", "backward-euler"),
    (2, "bidomain", "box", "crank-nicolson"),   # the full-tensor stencil and the other time scheme
])
def test_manufactured_solution_second_order(petsc, dim, equations, stencil, scheme):
    fields = ["V", "phi_e"] if equations == "bidomain" else ["V"]
    rows = []
    for level in LEVELS:
        e = mms_errors(mms_config(dim, equations, level, scheme, stencil))
        rows.append((0.1 / 2**level, e))
    print(f"\n{dim}D {equations}, {stencil} stencil, {scheme}: L∞(L2) errors and observed orders")
    print(f"{'h':>10} " + " ".join(f"{f + ' error':>14} {'order':>6}" for f in fields))
    orders = {f: [] for f in fields}
    for i, (h, e) in enumerate(rows):
        cells = []
        for f in fields:
            if i:
                p = math.log2(rows[i - 1][1][f] / e[f])
                orders[f].append(p)
                cells.append(f"{e[f]:14.4e} {p:6.2f}")
            else:
                cells.append(f"{e[f]:14.4e} {'':>6}")
        print(f"{h:10.5f} " + " ".join(cells))
    for f in fields:
        assert all(p >= 1.8 for p in orders[f]), f"{f}: observed orders {orders[f]}"

"""Pseudo-ECG: the potential of the tissue's currents at electrodes in an infinite homogeneous bath (Gima–Rudy),

    φ(x) = 1/(4π σ_b) ∫ ∇·(σ_i ∇Vm)(y) / |x − y| dy            mV, with σ in mS/cm, lengths in cm,

the form MonoAlg3D, Cardioid, openCARP and Chaste compute. The source density is taken from the solver's own
intracellular stiffness matrix: with M du/dt = −K u the weak form of du/dt = ∇·(σ∇u) (cardiosim/tissue/operators.py),
(∇·σ_i∇Vm) at node j times its volume is −(K_i Vm)_j. That is the operator with the tissue surface's no-flux
condition built in (cardiosim/domain/mask.py drops every coupling across it); a naive gradient across the surface is
not (35–52 % off in a trial). So, per electrode e,

    φ_e = −1/(4π σ_b) Σ_j (K_i Vm)_j · t / |x_e − x_j|

with t the sheet's thickness in 2D (the cable's cross-section t² in 1D; 1 in 3D): the 2D and 1D equations are
per unit thickness. As w_e·(K_i Vm) = (K_iᵀ w_e)·Vm, with w_e the electrode's weights −t/(4π σ_b |x_e − x_j|), the
weights K_iᵀ w_e are formed once at set-up and a PDE step costs one multi-dot product with Vm (one reduction), not
a matrix–vector product over the grid besides (on a GPU heart that product was most of the per-step output's
cost). The sums are the same to round-off.
"""

from __future__ import annotations

import math

import numpy as np

from cardiosim.runtime.errors import UserError


def sheet_thickness(cfg, grid) -> float:
    """The sheet's thickness (cm) a 2D (1D) ECG takes: ecg.sheet_thickness, or one grid spacing."""
    return cfg.ecg.sheet_thickness or float(grid.h[0])


class PseudoEcg:
    """Electrode potentials and leads (mV) of Vm through the intracellular stiffness ``Ki``'s products (a tissue
    model's ``intracellular()``: cardiosim.tissue.operators.RowsOperator or MatrixOperator), used at set-up only."""

    def __init__(self, cfg, grid, Ki):
        e = cfg.ecg
        self.names = [x.name for x in e.electrodes]
        # the leads as a matrix over the electrodes: trace = W φ
        self.lead_weights = np.zeros((len(e.leads), len(self.names)))
        for i, lead in enumerate(e.leads):
            for name, w in lead.combination().items():
                self.lead_weights[i, self.names.index(name)] += w
        scale = sheet_thickness(cfg, grid) ** (3 - grid.dim) / (4.0 * math.pi * e.bath_conductivity)
        tissue = np.ones(grid.n_local, dtype=bool) if grid.mask is None else ~grid.mask.outside()
        # w_e is zero outside the tissue: the distances at its nodes only (a heart fills 10-20 % of its box)
        pts = np.zeros((int(tissue.sum()), 3))
        pts[:, :grid.dim] = grid.coords()[tissue]
        comm = grid.da.comm.tompi4py()
        from mpi4py import MPI
        ws = []                               # w_e of each electrode e
        for i, x in enumerate(e.electrodes):
            pos = np.zeros(3)
            pos[:len(x.position)] = x.position
            r = np.linalg.norm(pts - pos, axis=1)
            nearest = comm.allreduce(float(r.min()) if len(r) else math.inf, op=MPI.MIN)
            if nearest < float(grid.h.min()):
                raise UserError(f"ecg.electrodes[{i}].position: '{x.name}' at {list(x.position)} cm is inside the "
                                f"tissue ({nearest:.4g} cm from a tissue node); an electrode must be at least one "
                                f"grid spacing ({float(grid.h.min()):g} cm) from every tissue node")
            w = grid.vec()
            w.set(0.0)
            w.getArray()[tissue] = -scale / np.maximum(r, 1e-300)
            ws.append(w)
        self.weights = [grid.vec() for _ in ws]       # K_iᵀ w_e = K_i w_e (K_i is symmetric)
        Ki.products(ws, self.weights)
        for w in ws:
            w.destroy()

    def __call__(self, V) -> list[float]:
        """Every trace's value (mV) for the transmembrane potential ``V`` (collective)."""
        if not self.weights:
            return []
        return self.traces(np.array(V.mDot(self.weights))).tolist()

    def traces(self, phi: np.ndarray) -> np.ndarray:
        """The electrodes' potentials ``phi`` (..., electrodes) followed by the leads (..., electrodes + leads)."""
        return np.concatenate([phi, phi @ self.lead_weights.T], axis=-1)

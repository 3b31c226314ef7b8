"""Purkinje–myocardial junctions (PMJs): each terminal of the network coupled to the tissue nodes within ``radius``
(cm) of it through a resistance R (kΩ).

The current through a junction, from the Purkinje terminal into the tissue, is

    I = (V_p − V̄_m) / R            µA = mV / kΩ;  V̄_m = Σ_k w_k V_k, the tissue's potential at the junction

with w_k the tissue nodes' shares of the junction (their volumes', normalised to 1); node k receives w_k·I. It is
a resistance R/w_k from the terminal to each node (the conductances w_k/R, mS, in parallel: 1/R in all). The current
leaves the terminal's membrane capacitance C_p and enters the nodes' C_k = Cm·χ·volume_k (µF) on the tissue side, so
charge is conserved. A step of the junctions over Δt is backward Euler on their own system alone,

    (C/Δt + L_J) V' = (C/Δt) V     over the terminals and the tissue nodes coupled to them (L_J: the w_k/R)

one small sparse system, factorised once: stable for any R and Δt (a terminal's own time constant R·C_p is often far
below Δt), the currents of the step being I = L_J V'. It is a split step of its own, beside the cable's and the
tissue's. A terminal with no tissue node within the radius is not coupled (:attr:`Junctions.uncoupled`).
"""

from __future__ import annotations

import numpy as np

from cardiosim.runtime.errors import UserError


class Junctions:
    """The PMJs between a network's ``terminals`` (node indices into the cable) and tissue nodes.

    ``terminal_points`` (p, 3) cm; ``tissue_points`` (n_t, 3) cm, the tissue's nodes (``tissue`` (n_t,) bool: which
    are tissue, default all); ``radius`` cm; ``resistance`` kΩ (a number or one per terminal); ``purkinje_capacitance``
    (µF, one per terminal); ``tissue_capacitance`` (µF, per tissue node) and ``tissue_volume`` (cm³, per tissue
    node: the weights); ``dt`` ms."""

    def __init__(self, terminals, terminal_points, tissue_points, radius: float, resistance, purkinje_capacitance,
                 tissue_capacitance, tissue_volume, dt: float, tissue=None):
        from scipy import sparse
        from scipy.sparse.linalg import splu
        from scipy.spatial import cKDTree
        if not radius > 0:
            raise UserError(f"purkinje PMJ radius {radius} cm must be > 0")
        terminals = np.asarray(terminals, dtype=np.int64)
        pts = np.asarray(terminal_points, dtype=float).reshape(-1, 3)
        R = np.broadcast_to(np.asarray(resistance, dtype=float), terminals.shape).copy()
        if not np.all(R > 0):
            raise UserError("purkinje PMJ resistance must be > 0 kΩ")
        tpts = np.asarray(tissue_points, dtype=float)
        tpts = np.pad(tpts, ((0, 0), (0, 3 - tpts.shape[1]))) if tpts.shape[1] < 3 else tpts
        vol = np.asarray(tissue_volume, dtype=float)
        ok = np.ones(len(tpts), bool) if tissue is None else np.asarray(tissue, bool)
        ok &= vol > 0
        index = np.flatnonzero(ok)
        tree = cKDTree(tpts[index])
        found = tree.query_ball_point(pts, radius) if len(index) else [[] for _ in pts]
        rows, cols, weights, coupled = [], [], [], []
        for j, near in enumerate(found):
            if not near:
                continue
            nodes = index[np.sort(np.asarray(near, dtype=np.int64))]
            w = vol[nodes] / vol[nodes].sum()
            rows.append(np.full(len(nodes), len(coupled)))
            cols.append(nodes)
            weights.append(w)
            coupled.append(j)
        coupled = np.asarray(coupled, dtype=np.int64)
        self.uncoupled = np.setdiff1d(np.arange(len(terminals)), coupled)     # indices into ``terminals``
        self.terminals = terminals[coupled]                                     # the cable's nodes
        self.resistance = R[coupled]                                            # kΩ
        self.dt = float(dt)
        p = len(coupled)
        rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        cols = np.concatenate(cols) if cols else np.zeros(0, np.int64)
        weights = np.concatenate(weights) if weights else np.zeros(0)
        # W (p, n_t): each junction's weights over the tissue nodes; the tissue nodes of any junction, locally
        self.tissue_nodes, local = np.unique(cols, return_inverse=True)
        q = len(self.tissue_nodes)
        self.W = sparse.csr_matrix((weights, (rows, local)), shape=(p, q))
        g = sparse.diags(1.0 / self.resistance) @ self.W                        # (p, q) mS: w_k / R
        # L_J over [terminals, tissue nodes]: a star per junction
        gp = np.asarray(g.sum(axis=1)).ravel()
        gt = np.asarray(g.sum(axis=0)).ravel()
        L = sparse.bmat([[sparse.diags(gp), -g], [-g.T, sparse.diags(gt)]], format="csc")
        Cp = np.broadcast_to(np.asarray(purkinje_capacitance, float), terminals.shape)[coupled]
        Ct = np.asarray(tissue_capacitance, float)[self.tissue_nodes]
        self.C = np.concatenate([Cp, Ct])
        if not np.all(self.C > 0):
            raise UserError("purkinje PMJ: every coupled node needs a capacitance > 0")
        self.L = L
        self._lhs = splu((sparse.diags(self.C / self.dt) + L).tocsc()) if p else None
        self.current = np.zeros(p)               # µA of the last step, Purkinje -> tissue, per junction

    @property
    def n(self) -> int:
        return len(self.terminals)

    def tissue_potential(self, vm: np.ndarray) -> np.ndarray:
        """V̄_m (mV) at each junction."""
        return self.W @ vm[self.tissue_nodes]

    def step(self, vp: np.ndarray, vm: np.ndarray) -> np.ndarray:
        """One backward-Euler step of dt of the junctions alone: ``vp`` (the cable's V) and ``vm`` (the tissue's)
        changed in place at the coupled nodes. Returns the junctions' currents (µA, Purkinje -> tissue)."""
        if not self.n:
            return self.current
        p = self.n
        v = np.concatenate([vp[self.terminals], vm[self.tissue_nodes]])
        new = self._lhs.solve(self.C / self.dt * v)
        vp[self.terminals] = new[:p]
        vm[self.tissue_nodes] = new[p:]
        self.current = (new[:p] - self.W @ new[p:]) / self.resistance
        return self.current


def tissue_capacitance(volume, Cm: float, chi: float) -> np.ndarray:
    """µF per tissue node: Cm (µF/cm²) · χ (cm⁻¹) · volume (cm³)."""
    return Cm * chi * np.asarray(volume, dtype=float)


__all__ = ["Junctions", "tissue_capacitance"]

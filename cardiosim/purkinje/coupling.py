"""Purkinje–myocardial junctions (PMJs): each terminal of the network coupled to the tissue nodes within ``radius``
(cm) of it through a resistance R (kΩ).

The current through a junction, from the Purkinje terminal into the tissue, is

    I = (V_p − V̄_m) / R            µA = mV / kΩ;  V̄_m = Σ_k w_k V_k, the tissue's potential at the junction

with w_k the tissue nodes' shares of the junction (their volumes', normalised to 1); node k receives w_k·I. It is
a resistance R/w_k from the terminal to each node (the conductances w_k/R, mS, in parallel: 1/R in all). The current
leaves the terminal's membrane capacitance C_p and enters the nodes' C_k = Cm·χ·volume_k (µF) on the tissue side, so
charge is conserved. A step of the junctions over Δt is backward Euler on their own system alone,

    (C/Δt + L_J) V' = (C/Δt) V     over the terminals and the tissue nodes coupled to them (L_J: the w_k/R)

one small sparse system: stable for any R and Δt (a terminal's own time constant R·C_p is often far below Δt), the
currents of the step being I = L_J V'. Its tissue block is diagonal, so it is solved on the terminals alone, by the
Schur complement S = D_p − G D_t⁻¹ Gᵀ (p × p, factorised once; G: the w_k/R, D: the diagonal blocks), the tissue
nodes then one division each. It is a split step of its own, beside the cable's and the tissue's. A terminal with no tissue node within the radius is not coupled (:attr:`Junctions.uncoupled`).
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
        # The step's terms, all but the Schur solve formed here: rhs_p = (C_p/Δt) V_p + G₁ V_t and, after the solve,
        # V_t' = a V_t + G₂ V_p' (G₁ = G D_t⁻¹ C_t/Δt, G₂ = D_t⁻¹ Gᵀ, a = (C_t/Δt) / D_t)
        d_t = Ct / self.dt + gt
        self._cp = Cp / self.dt
        self._a = Ct / self.dt / d_t
        self._g1 = (g @ sparse.diags(Ct / self.dt / d_t)).tocsr()
        self._g2 = (sparse.diags(1.0 / d_t) @ g.T).tocsr()
        self._g2.sort_indices()
        self._schur_matrix = sparse.diags(Cp / self.dt + gp) - g @ sparse.diags(1.0 / d_t) @ g.T
        self._schur = splu(self._schur_matrix.tocsc()) if p else None
        self._new = (np.zeros(p), np.zeros(q))     # the last exchange's V_p', V_t'
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
        self.exchange(vp, vm)
        return self.currents()

    def exchange(self, vp: np.ndarray, vm: np.ndarray) -> None:
        """:meth:`step` without its currents (:meth:`currents` gives them after): what the tissue waits for."""
        if not self.n:
            return
        vt = vm[self.tissue_nodes]
        new_p = self._schur.solve(self._cp * vp[self.terminals] + self._g1 @ vt)
        new_t = self._a * vt + self._g2 @ new_p
        vp[self.terminals] = new_p
        vm[self.tissue_nodes] = new_t
        self._new = (new_p, new_t)

    def device_arrays(self) -> dict:
        """The exchange as kernels/resident.cu's cs_pmj_* kernels take it (cardiosim.purkinje.device): W's CSR rows
        (``ptr``, ``col``: indices into the tissue nodes, ``w``) with G₁'s values on the same pattern (``g1``), the
        Schur complement's inverse (``sinv``, p × p, dense), Gᵀ's CSR rows per tissue node (``ptr2``, ``col2``:
        junctions, ``g2``) and ``cp``, ``a``, ``resistance``."""
        W = self.W.tocsr()
        W.sort_indices()
        rows = np.repeat(np.arange(self.n), np.diff(W.indptr))
        g1 = W.data / self.resistance[rows] * self._a[W.indices]        # G₁ on W's pattern, for one index walk
        g2 = self._g2
        return {"ptr": W.indptr.astype(np.int32), "col": W.indices.astype(np.int64), "w": W.data.copy(), "g1": g1,
                "sinv": np.linalg.inv(self._schur_matrix.toarray()), "ptr2": g2.indptr.astype(np.int32),
                "col2": g2.indices.astype(np.int32), "g2": g2.data.copy(), "cp": self._cp.copy(),
                "a": self._a.copy(), "resistance": self.resistance.copy()}

    def currents(self) -> np.ndarray:
        """The last exchange's currents (µA, Purkinje -> tissue, per junction), into :attr:`current`."""
        if self.n:
            new_p, new_t = self._new
            self.current[:] = (new_p - self.W @ new_t) / self.resistance
        return self.current


def tissue_capacitance(volume, Cm: float, chi: float) -> np.ndarray:
    """µF per tissue node: Cm (µF/cm²) · χ (cm⁻¹) · volume (cm³)."""
    return Cm * chi * np.asarray(volume, dtype=float)


__all__ = ["Junctions", "tissue_capacitance"]

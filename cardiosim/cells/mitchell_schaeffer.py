"""Mitchell & Schaeffer 2003, a two-variable excitable membrane, rescaled to mV.

Bull Math Biol 65:767–793. The model's dimensionless potential v ∈ [0, 1] maps to V = V_min + (V_max − V_min)·v:
    dv/dt = h v² (1 − v) / τ_in − v / τ_out − I_stim / (V_max − V_min)
    dh/dt = (1 − h) / τ_open   if v < v_gate,     −h / τ_close   otherwise
Cheap, robust and with a realistic action-potential shape: the demo model. Forward Euler is stable for
Δt_o ≲ τ_in / 4.
"""

import numpy as np

from cardiosim.cells.base import CellModel, Parameter, State


class MitchellSchaeffer(CellModel):
    name = "mitchell-schaeffer"
    states = (
        State("V", -85.0, "mV", "transmembrane potential", -300.0, 300.0),
        State("h", 1.0, "1", "inactivation gate", -1e-9, 1.0 + 1e-9),
    )
    parameters = {
        "tau_in": Parameter(0.3, "ms", "inward (depolarising) current time constant"),
        "tau_out": Parameter(6.0, "ms", "outward (repolarising) current time constant"),
        "tau_open": Parameter(120.0, "ms", "gate recovery time constant"),
        "tau_close": Parameter(150.0, "ms", "gate closing time constant"),
        "v_gate": Parameter(0.13, "1", "gate threshold on the dimensionless potential"),
        "V_min": Parameter(-85.0, "mV", "resting potential (v = 0)"),
        "V_max": Parameter(15.0, "mV", "potential at v = 1"),
    }

    def rhs(self, t, y, i_stim, dydt):
        p = self.p
        amp = p["V_max"] - p["V_min"]
        v = (y[0] - p["V_min"]) / amp
        h = y[1]
        dydt[0] = amp * (h * v * v * (1.0 - v) / p["tau_in"] - v / p["tau_out"]) - i_stim
        dydt[1] = np.where(v < p["v_gate"], (1.0 - h) / p["tau_open"], -h / p["tau_close"])

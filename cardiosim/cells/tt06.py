"""ten Tusscher & Panfilov 2006, human ventricular epicardial cell (19 states) — the NumPy reference.

K. H. W. J. ten Tusscher, A. V. Panfilov, "Alternans and spiral breakup in a human ventricular tissue model",
Am J Physiol Heart Circ Physiol 291: H1088–H1100 (2006). The cell model of the Niederer et al. 2011 N-version
tissue benchmark.

Ground truth: ``reference/tt06/ten_tusscher_model_2006_epi.cellml`` (Chaste/cellml); ``reference/tt06/spec.md``
restates it (state order §1, parameters §2, equations §3, singular points §5). Every equation below follows the
CellML literally except where a comment says why it was rearranged (only ever algebraically identical forms, chosen
to avoid 0/0 or a division by a concentration that may reach 0).

Units: time ms, V mV, concentrations mM, currents pA/pF (= µA/µF), conductances nS/pF. ``i_stim`` is in pA/pF,
negative depolarising; as in the CellML it enters dV/dt **and** dK_i/dt (the stimulus current is carried by K⁺).

The plain-C twin of this module is ``kernels/tt06.h`` (one right-hand side shared by the CPU driver and the CUDA
kernels); it takes its parameters as ``parameter_vector()``: the model parameters in ``PARAMETER_ORDER``, then the
constants derived from them in ``DERIVED_ORDER``. This module is written close to the CellML for reading; the C is
rearranged for speed (shared exponentials, fewer divisions). Keep the two in step: tests/test_tt06.py checks that
they agree to round-off along an action potential, and this module against the CellML itself.

Time steps (README.md of the reference): plain Forward Euler is stable only for dt ≤ 0.002 ms (the m gate,
τ_m ≈ 1 µs at rest); :meth:`TenTusscher2006Epi.rush_larsen` (exponential update of the 12 gates) is stable at any
step tried, and keeps APD90 within 1 % of the CVODE reference up to dt ≈ 0.2 ms.
"""

from __future__ import annotations

import numpy as np

from cardiosim.cells.base import CellModel, read_table

# The states (spec.md §1's order, kernels/tt06.h's TS_*) and the parameters (the TP_* enum's order), with their
# units, admissible ranges (CellModel.find_bad_state) and docs: data, in cells/tables/tt06.toml.
_STATES, _PARAMETERS = read_table("tt06")


# Constants derived from the parameters, appended to the parameter vector of kernels/tt06.h (enum TP_<name> after
# the model parameters) so that the kernel does no parameter-only divisions, logarithms or square roots per step.
# Formulas in derived_constants(); they are recomputed from the parameters every time the vector is built, so they
# can never disagree with an override. Never fill these slots by hand.
DERIVED_ORDER: tuple[str, ...] = (
    "RTF",        # R*T/F (mV)
    "FRT",        # F/(R*T) (1/mV)
    "sqrt_Ko",    # sqrt(K_o/5.4): the K_o scaling of g_K1 and g_Kr
    "log_Nao",    # ln(Na_o), for E_Na
    "log_Ko",     # ln(K_o), for E_K
    "log_Kso",    # ln(K_o + P_kna*Na_o), for E_Ks
    "log_Cao",    # ln(Ca_o), for E_Ca
    "hj_frac",    # perc_reduced_inact_for_IpNa/100
    "gCaL_2F",    # 2*F*g_CaL: I_CaL = gCaL_2F*d*f*f2*fCass*B(z)*(0.25*Ca_ss*e^z - Ca_o)
    "NaK_c",      # P_NaK*K_o/(K_o + K_mk)
    "NaCa_c",     # K_NaCa/((Km_Nai^3 + Na_o^3)*(Km_Ca + Ca_o))
    "NaCa_out",   # alpha*Na_o^3
    "gamma_FRT",  # gamma*F/(R*T)
    "K_up2",      # K_up^2
    "EC2",        # EC^2
    "d_sr",       # max_sr - min_sr
    "BK_c",       # Buf_c*K_buf_c
    "BK_sr",      # Buf_sr*K_buf_sr
    "BK_ss",      # Buf_ss*K_buf_ss
    "c_NaK",      # conc_clamp*Cm/(V_c*F): pA/pF -> mM/ms for Na_i and K_i
    "c_Cai",      # Cm/(2*V_c*F): pA/pF of Ca2+ -> mM/ms in the cytosol
    "c_Cass",     # Cm/(2*V_ss*F): the same in the subspace
    "r_sr_c",     # V_sr/V_c
    "r_sr_ss",    # V_sr/V_ss
    "r_c_ss",     # V_c/V_ss
)


def derived_constants(p) -> dict[str, float]:
    """The constants of :data:`DERIVED_ORDER` from a parameter dict (``model.p``)."""
    RTF = p["R"] * p["T"] / p["F"]
    return {
        "RTF": RTF,
        "FRT": p["F"] / (p["R"] * p["T"]),
        "sqrt_Ko": float(np.sqrt(p["K_o"] / 5.4)),
        "log_Nao": float(np.log(p["Na_o"])),
        "log_Ko": float(np.log(p["K_o"])),
        "log_Kso": float(np.log(p["K_o"] + p["P_kna"] * p["Na_o"])),
        "log_Cao": float(np.log(p["Ca_o"])),
        "hj_frac": p["perc_reduced_inact_for_IpNa"] / 100.0,
        "gCaL_2F": 2.0 * p["F"] * p["g_CaL"],
        "NaK_c": p["P_NaK"] * p["K_o"] / (p["K_o"] + p["K_mk"]),
        "NaCa_c": p["K_NaCa"] / ((p["Km_Nai"] ** 3 + p["Na_o"] ** 3) * (p["Km_Ca"] + p["Ca_o"])),
        "NaCa_out": p["alpha"] * p["Na_o"] ** 3,
        "gamma_FRT": p["gamma"] * p["F"] / (p["R"] * p["T"]),
        "K_up2": p["K_up"] ** 2,
        "EC2": p["EC"] ** 2,
        "d_sr": p["max_sr"] - p["min_sr"],
        "BK_c": p["Buf_c"] * p["K_buf_c"],
        "BK_sr": p["Buf_sr"] * p["K_buf_sr"],
        "BK_ss": p["Buf_ss"] * p["K_buf_ss"],
        "c_NaK": p["conc_clamp"] * p["Cm"] / (p["V_c"] * p["F"]),
        "c_Cai": p["Cm"] / (2.0 * p["V_c"] * p["F"]),
        "c_Cass": p["Cm"] / (2.0 * p["V_ss"] * p["F"]),
        "r_sr_c": p["V_sr"] / p["V_c"],
        "r_sr_ss": p["V_sr"] / p["V_ss"],
        "r_c_ss": p["V_c"] / p["V_ss"],
    }


class TenTusscher2006Epi(CellModel):
    """ten Tusscher–Panfilov 2006: epicardial (default), endocardial and M cells (``variants``: G_to, G_Ks and the
    s gate, spec.md §4). Initial state = CellML = Niederer 2011 benchmark (the same for every cell type, as in the
    CellML files).

    Beyond :class:`CellModel` this class provides

    * ``gates`` — indices of the 12 Hodgkin–Huxley-type gating variables that :meth:`rush_larsen` updates
      exponentially;
    * :meth:`rush_larsen` — one Rush–Larsen step in place;
    * ``PARAMETER_ORDER`` / :meth:`parameter_vector` — the parameter layout of ``kernels/tt06.h``.
    """

    name = "tt06"

    states = _STATES      # cells/tables/tt06.toml; kernels/tt06.h's enum TS_* mirrors the order (tested)

    # Gating variables updated by the exact exponential formula in rush_larsen(): Xr1 Xr2 Xs m h j d f f2 fCass s r.
    # R' (index 14) is deliberately not among them, see rush_larsen().
    gates = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)
    _not_gates = (0, 13, 14, 15, 16, 17, 18)  # V, Ca_i, R', Ca_SR, Ca_ss, Na_i, K_i: Forward Euler in rush_larsen()

    parameters = dict(_PARAMETERS)       # cells/tables/tt06.toml (names: the CellML's)

    # ten Tusscher & Panfilov 2006 (Table 1 and the I_to equations of its appendix): the three cell types differ in
    # G_to, G_Ks and the s gate; epi is the default (as the CellML files ten_tusscher_model_2006_{epi,endo,M}).
    variants = {"epi": {"g_to": 0.294, "g_Ks": 0.392, "s_endo": 0.0},
                "endo": {"g_to": 0.073, "g_Ks": 0.392, "s_endo": 1.0},
                "M": {"g_to": 0.294, "g_Ks": 0.098, "s_endo": 0.0}}
    default_variant = "epi"

    #: Model parameters in the order of kernels/tt06.h's enum (TP_R .. TP_conc_clamp, TT06_N_BASE_PARAMS of them).
    PARAMETER_ORDER = tuple(parameters)
    #: Derived constants that follow them in the vector (TP_RTF .. TP_r_c_ss); see derived_constants().
    DERIVED_ORDER = DERIVED_ORDER
    derived_constants = staticmethod(derived_constants)

    #: For cardiosim.reaction.ode.native (and the CUDA loader): kernels/tt06.h, tt06_rhs, TT06_N_STATES, TT06_N_PARAMS.
    kernel_name = "tt06"

    # -- the model ---------------------------------------------------------------------------------------------
    def _evaluate(self, y, i_stim, dydt):
        """Write dy/dt of all 19 states into ``dydt`` and return ``(x_inf, tau)`` for each gate of ``self.gates``
        (in that order; arrays in 1 and ms), so that rhs() and rush_larsen() share one copy of the equations."""
        p = self.p
        (V, Xr1, Xr2, Xs, m, h, j, d, f, f2, fCass, s, r,
         Ca_i, R_prime, Ca_SR, Ca_ss, Na_i, K_i) = y

        RTF = p["R"] * p["T"] / p["F"]           # mV
        FRT = 1.0 / RTF                          # 1/mV
        K_o, Na_o, Ca_o = p["K_o"], p["Na_o"], p["Ca_o"]

        # reversal potentials (mV)
        E_Na = RTF * np.log(Na_o / Na_i)
        E_K = RTF * np.log(K_o / K_i)
        E_Ks = RTF * np.log((K_o + p["P_kna"] * Na_o) / (K_i + p["P_kna"] * Na_i))
        E_Ca = 0.5 * RTF * np.log(Ca_o / Ca_i)

        # I_K1 (time-independent)
        u = V - E_K
        alpha_K1 = 0.1 / (1.0 + np.exp(0.06 * (u - 200.0)))
        beta_K1 = (3.0 * np.exp(0.0002 * (u + 100.0)) + np.exp(0.1 * (u - 10.0))) / (1.0 + np.exp(-0.5 * u))
        xK1_inf = alpha_K1 / (alpha_K1 + beta_K1)
        i_K1 = p["g_K1"] * np.sqrt(K_o / 5.4) * xK1_inf * u

        # I_Kr
        i_Kr = p["g_Kr"] * np.sqrt(K_o / 5.4) * Xr1 * Xr2 * (V - E_K)
        xr1_inf = 1.0 / (1.0 + np.exp((-26.0 - V) / 7.0))
        tau_xr1 = (450.0 / (1.0 + np.exp((-45.0 - V) / 10.0))) * (6.0 / (1.0 + np.exp((V + 30.0) / 11.5)))
        xr2_inf = 1.0 / (1.0 + np.exp((V + 88.0) / 24.0))
        tau_xr2 = (3.0 / (1.0 + np.exp((-60.0 - V) / 20.0))) * (1.12 / (1.0 + np.exp((V - 60.0) / 20.0)))

        # I_Ks
        i_Ks = p["g_Ks"] * Xs * Xs * (V - E_Ks)
        xs_inf = 1.0 / (1.0 + np.exp((-5.0 - V) / 14.0))
        tau_xs = (1400.0 / np.sqrt(1.0 + np.exp((5.0 - V) / 6.0))) * (1.0 / (1.0 + np.exp((V - 35.0) / 15.0))) + 80.0

        # I_Na
        i_Na = p["g_Na"] * m * m * m * h * j * (V - E_Na)
        m_inf = 1.0 / (1.0 + np.exp((-56.86 - V) / 9.03)) ** 2
        alpha_m = 1.0 / (1.0 + np.exp((-60.0 - V) / 5.0))
        beta_m = 0.1 / (1.0 + np.exp((V + 35.0) / 5.0)) + 0.1 / (1.0 + np.exp((V - 50.0) / 200.0))
        tau_m = alpha_m * beta_m
        # h and j: the Chaste generalisation with shift_INa_inact and perc_reduced_inact_for_IpNa (both 0 by
        # default). Their rates are piecewise and discontinuous at V = -40 mV + shift (spec.md §5.2); the first
        # branch is taken for V < -40 + shift strictly, exactly as in the CellML. Both branches are evaluated
        # (vectorised) and np.where picks one; an overflow in the unused branch is harmless.
        Vs = V - p["shift_INa_inact"]
        frac = p["perc_reduced_inact_for_IpNa"] / 100.0
        hj_inf = (1.0 - frac) / (1.0 + np.exp((Vs + 71.55) / 7.43)) ** 2 + frac
        low = V < -40.0 + p["shift_INa_inact"]
        alpha_h = np.where(low, 0.057 * np.exp(-(Vs + 80.0) / 6.8), 0.0)
        beta_h = np.where(low, 2.7 * np.exp(0.079 * Vs) + 310000.0 * np.exp(0.3485 * Vs),
                          0.77 / (0.13 * (1.0 + np.exp((Vs + 10.66) / -11.1))))
        tau_h = 1.0 / (alpha_h + beta_h)
        alpha_j = np.where(low, (-25428.0 * np.exp(0.2444 * Vs) - 6.948e-6 * np.exp(-0.04391 * Vs)) * (V + 37.78)
                           / (1.0 + np.exp(0.311 * (Vs + 79.23))), 0.0)
        beta_j = np.where(low, 0.02424 * np.exp(-0.01052 * Vs) / (1.0 + np.exp(-0.1378 * (Vs + 40.14))),
                          0.6 * np.exp(0.057 * Vs) / (1.0 + np.exp(-0.1 * (Vs + 32.0))))
        tau_j = 1.0 / (alpha_j + beta_j)

        # background currents
        i_b_Na = p["g_bna"] * (V - E_Na)
        i_b_Ca = p["g_bca"] * (V - E_Ca)

        # I_CaL. The CellML's GHK factor (V-15)(0.25 Ca_ss e^z - Ca_o)/(e^z - 1), z = 2(V-15)F/(RT), is 0/0 at
        # V = 15 mV (spec.md §5.1). With V-15 = z/(2·FRT) it becomes (1/(2·FRT))·B(z)·(0.25 Ca_ss e^z - Ca_o), where
        # B(z) = z/(e^z - 1) = z/expm1(z) is smooth, accurate to round-off for every z != 0 (expm1 has no
        # cancellation), and 1 - z/2 + z²/12 for |z| < 1e-6 (error < 1e-25). So
        #   i_CaL = g_CaL·d·f·f2·fCass·4F²/(RT) · GHK = 2F·g_CaL·d·f·f2·fCass · B(z)·(0.25 Ca_ss e^z - Ca_o).
        # Identical to the CellML outside 15 ± 0.001 mV. Inside that window the CellML (Chaste 2013 patch) uses a
        # constant plateau, the mean of the GHK factor at the window's edges, whereas this is the exact function:
        # they differ by up to ~4e-5 relative at the window's edges (the factor's slope is ~0.04/mV) and by ~5e-10 at
        # V = 15; no biomarker can see it (spec.md §5.1 allows either).
        z = 2.0 * FRT * (V - 15.0)
        small = np.abs(z) < 1e-6
        z_safe = np.where(small, 1.0, z)
        em1 = np.expm1(z)
        bern = np.where(small, 1.0 - z * (0.5 - z / 12.0), z_safe / np.where(small, 1.0, em1))
        i_CaL = (2.0 * p["F"] * p["g_CaL"]) * d * f * f2 * fCass * bern * (0.25 * Ca_ss * (em1 + 1.0) - Ca_o)
        d_inf = 1.0 / (1.0 + np.exp((-8.0 - V) / 7.5))
        alpha_d = 1.4 / (1.0 + np.exp((-35.0 - V) / 13.0)) + 0.25
        beta_d = 1.4 / (1.0 + np.exp((V + 5.0) / 5.0))
        gamma_d = 1.0 / (1.0 + np.exp((50.0 - V) / 20.0))
        tau_d = alpha_d * beta_d + gamma_d
        f_inf = 1.0 / (1.0 + np.exp((V + 20.0) / 7.0))
        tau_f = (1102.5 * np.exp(-(V + 27.0) ** 2 / 225.0) + 200.0 / (1.0 + np.exp((13.0 - V) / 10.0))
                 + 180.0 / (1.0 + np.exp((V + 30.0) / 10.0)) + 20.0)
        f2_inf = 0.67 / (1.0 + np.exp((V + 35.0) / 7.0)) + 0.33
        tau_f2 = (562.0 * np.exp(-(V + 27.0) ** 2 / 240.0) + 31.0 / (1.0 + np.exp((25.0 - V) / 10.0))
                  + 80.0 / (1.0 + np.exp((V + 30.0) / 10.0)))
        cass_sq = (Ca_ss / 0.05) ** 2
        fCass_inf = 0.6 / (1.0 + cass_sq) + 0.4
        tau_fCass = 80.0 / (1.0 + cass_sq) + 2.0

        # I_to (the s gate of the cell type: s_endo)
        i_to = p["g_to"] * r * s * (V - E_K)
        if p["s_endo"]:
            s_inf = 1.0 / (1.0 + np.exp((V + 28.0) / 5.0))
            tau_s = 1000.0 * np.exp(-(V + 67.0) ** 2 / 1000.0) + 8.0
        else:
            s_inf = 1.0 / (1.0 + np.exp((V + 20.0) / 5.0))
            tau_s = 85.0 * np.exp(-(V + 45.0) ** 2 / 320.0) + 5.0 / (1.0 + np.exp((V - 20.0) / 5.0)) + 3.0
        r_inf = 1.0 / (1.0 + np.exp((20.0 - V) / 6.0))
        tau_r = 9.5 * np.exp(-(V + 40.0) ** 2 / 1800.0) + 0.8

        # pumps and exchanger
        i_NaK = (p["P_NaK"] * K_o / (K_o + p["K_mk"]) * Na_i / (Na_i + p["K_mNa"])
                 / (1.0 + 0.1245 * np.exp(-0.1 * V * FRT) + 0.0353 * np.exp(-V * FRT)))
        g = p["gamma"]
        e_out = np.exp((g - 1.0) * V * FRT)
        i_NaCa = (p["K_NaCa"] * (np.exp(g * V * FRT) * Na_i ** 3 * Ca_o - e_out * Na_o ** 3 * Ca_i * p["alpha"])
                  / ((p["Km_Nai"] ** 3 + Na_o ** 3) * (p["Km_Ca"] + Ca_o) * (1.0 + p["K_sat"] * e_out)))
        i_p_Ca = p["g_pCa"] * Ca_i / (Ca_i + p["K_pCa"])
        i_p_K = p["g_pK"] * (V - E_K) / (1.0 + np.exp((25.0 - V) / 5.98))

        # membrane potential
        dydt[0] = -(i_K1 + i_to + i_Kr + i_Ks + i_CaL + i_NaK + i_Na + i_b_Na + i_NaCa + i_b_Ca + i_p_K + i_p_Ca
                    + i_stim)

        # calcium handling. Two terms are rearranged (algebraically identical) so that a concentration of 0 gives
        # a finite value instead of 0·inf: the CellML's i_up = Vmax_up/(1 + K_up²/Ca_i²) and
        # k_casr = max_sr - (max_sr - min_sr)/(1 + (EC/Ca_SR)²). A non-positive Ca_i still gives NaN through
        # E_Ca = ln(Ca_o/Ca_i): that is the integrator's error to report (find_bad_state), not to hide here.
        ci2 = Ca_i * Ca_i
        i_up = p["Vmax_up"] * ci2 / (ci2 + p["K_up"] ** 2)
        i_leak = p["V_leak"] * (Ca_SR - Ca_i)
        i_xfer = p["V_xfer"] * (Ca_ss - Ca_i)
        csr2 = Ca_SR * Ca_SR
        kcasr = p["max_sr"] - (p["max_sr"] - p["min_sr"]) * csr2 / (csr2 + p["EC"] ** 2)
        k1 = p["k1_prime"] / kcasr
        k2 = p["k2_prime"] * kcasr
        css2 = Ca_ss * Ca_ss
        O = k1 * css2 * R_prime / (p["k3"] + k1 * css2)
        i_rel = p["V_rel"] * O * (Ca_SR - Ca_ss)
        Ca_i_bufc = 1.0 / (1.0 + p["Buf_c"] * p["K_buf_c"] / (Ca_i + p["K_buf_c"]) ** 2)
        Ca_sr_bufsr = 1.0 / (1.0 + p["Buf_sr"] * p["K_buf_sr"] / (Ca_SR + p["K_buf_sr"]) ** 2)
        Ca_ss_bufss = 1.0 / (1.0 + p["Buf_ss"] * p["K_buf_ss"] / (Ca_ss + p["K_buf_ss"]) ** 2)
        Cm, V_c, V_sr, V_ss, F = p["Cm"], p["V_c"], p["V_sr"], p["V_ss"], p["F"]

        dydt[13] = Ca_i_bufc * ((i_leak - i_up) * V_sr / V_c + i_xfer
                                - (i_b_Ca + i_p_Ca - 2.0 * i_NaCa) * Cm / (2.0 * V_c * F))
        dydt[14] = -k2 * Ca_ss * R_prime + p["k4"] * (1.0 - R_prime)
        dydt[15] = Ca_sr_bufsr * (i_up - (i_rel + i_leak))
        dydt[16] = Ca_ss_bufss * (-i_CaL * Cm / (2.0 * V_ss * F) + i_rel * V_sr / V_ss - i_xfer * V_c / V_ss)
        cc = p["conc_clamp"]
        dydt[17] = -cc * (i_Na + i_b_Na + 3.0 * i_NaK + 3.0 * i_NaCa) * Cm / (V_c * F)
        dydt[18] = -cc * (i_K1 + i_to + i_Kr + i_Ks + i_p_K + i_stim - 2.0 * i_NaK) * Cm / (V_c * F)

        # gates, in the order of self.gates: dx/dt = (x_inf - x)/tau_x
        gates = ((xr1_inf, tau_xr1), (xr2_inf, tau_xr2), (xs_inf, tau_xs), (m_inf, tau_m), (hj_inf, tau_h),
                 (hj_inf, tau_j), (d_inf, tau_d), (f_inf, tau_f), (f2_inf, tau_f2), (fCass_inf, tau_fCass),
                 (s_inf, tau_s), (r_inf, tau_r))
        for k, (inf, tau) in zip(self.gates, gates):
            dydt[k] = (inf - y[k]) / tau
        return gates

    def rhs(self, t, y, i_stim, dydt):
        """dy/dt (per ms) of all 19 states into ``dydt``; ``y`` and ``dydt`` have shape (19, n_cells), ``i_stim`` in
        pA/pF (scalar or per cell), negative depolarising. ``t`` is unused (the model is autonomous).

        Floating-point warnings are silenced: a state driven out of range by a too-large step shows up as inf/NaN
        in the result and is reported by :meth:`find_bad_state`, with the cell and variable named."""
        with np.errstate(all="ignore"):
            self._evaluate(y, i_stim, dydt)

    def rush_larsen(self, y, t, dt, i_stim, work=None):
        """One Rush–Larsen step of ``dt`` ms in place.

        The 12 gating variables of ``self.gates`` are advanced exactly for frozen V (and frozen Ca_ss for fCass):
        x ← x_inf + (x − x_inf)·exp(−dt/τ_x), with x_inf and τ_x in the CellML's own forms (the α/β-defined h and j
        through τ = 1/(α + β), the others through their τ formulas). All other states (V, the concentrations and
        R') take a Forward-Euler step with the derivatives at the old state.

        Two states are not plain voltage gates:

        * fCass is written in the CellML in pure inf/τ form, but x_inf and τ depend on Ca_ss, not V. Freezing Ca_ss
          over the step is the same approximation as freezing V for the others, so it is updated exponentially.
        * R' is not of the inf/τ form as written (dR'/dt = −k2·Ca_ss·R' + k4·(1 − R')). It is linear in R', so it
          could be rewritten as R'_inf = k4/(k2·Ca_ss + k4), τ = 1/(k2·Ca_ss + k4) and updated exponentially, but
          it is not stiff (τ ≥ 8.8 ms over a beat), so it takes a Forward-Euler step like the concentrations.

        This is the split of the original authors' C code (TP06: exponential update of the 12 gates including
        fCass, ``sRR += HT*dRR`` for R') and the one behind the reference accuracy figures (README.md: "Rush–Larsen
        for the 12 gating variables").

        ``work`` is an optional scratch array shaped like ``y`` (it receives dy/dt).
        """
        dydt = np.empty_like(y) if work is None else work
        with np.errstate(all="ignore"):
            gates = self._evaluate(y, i_stim, dydt)
            # Every derivative and every (x_inf, tau) was computed from the old state above, so the rows can be
            # overwritten in any order.
            for k in self._not_gates:
                y[k] += dt * dydt[k]
            for k, (inf, tau) in zip(self.gates, gates):
                y[k] = inf + (y[k] - inf) * np.exp(-dt / tau)

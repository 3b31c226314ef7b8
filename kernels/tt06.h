/*
 * kernels/tt06.h — ten Tusscher & Panfilov 2006 epicardial cell (19 states): right-hand side and one Rush–Larsen
 * step, in plain C99, shared by the CPU driver (host) and the CUDA kernels (device).
 *
 * Ground truth: tests/data/reference/tt06/ten_tusscher_model_2006_epi.cellml (restated in its spec.md).
 * NumPy twin:   cardiosim/cells/tt06.py (TenTusscher2006Epi). tests/test_tt06.py checks that both agree to
 *               round-off along an action potential; change them together.
 *
 * Units: time ms, V mV, concentrations mM, currents pA/pF (= µA/µF). i_stim in pA/pF, NEGATIVE depolarising; as in
 * the CellML it enters dV/dt and dK_i/dt.
 *
 * Conventions (common to all cardiosim kernels/ *.h):
 *   CS_PARAM(i)   how a parameter is read. Host default (p[(i)]), with `const double *p` an argument;
 *                 device: e.g. (c_params[(i)]) for a __constant__ double c_params[TT06_N_PARAMS].
 *                 CS_PARAM(0) must be an lvalue (see tt06_step_ below).
 *   CS_FN         function qualifiers. Host default `static inline`; device `__device__ __forceinline__`.
 *   CS_PARAM_ARG  the parameter argument of the entry points. Host default `, const double *p`; device empty.
 *   Parameter layout: enum TP_* below; the vector is TenTusscher2006Epi(...).parameter_vector() (overrides applied):
 *   the model parameters, then constants derived from them. States in the order of spec.md §1 (enum TS_*).
 *
 * Entry points:
 *   tt06_rhs(y, dydt, i_stim [, p])          dy/dt of all 19 states (per ms).
 *   tt06_rush_larsen(y, dt, i_stim [, p])    one Rush–Larsen step of dt ms, in place: the 12 gates Xr1 Xr2 Xs m h j
 *                                            d f f2 fCass s r exactly, x <- x_inf + (x - x_inf)·exp(-dt/tau_x);
 *                                            V, Ca_i, R', Ca_SR, Ca_ss, Na_i, K_i by Forward Euler. Same rule as
 *                                            TenTusscher2006Epi.rush_larsen (see there for fCass and R').
 *   Forward Euler is y += dt·dydt with tt06_rhs; it is stable only for dt <= 0.002 ms (m gate, tau_m ~ 1 µs).
 *
 * How the body is written (performance: the FP64 instruction count is what limits the GPU kernel):
 *   - Exponentials of V with related scales are shared: one exp(V/20) gives exp(±V/20), exp(±V/10), exp(±V/5) by
 *     squaring and one division; one exp(V/7) serves three gates; one exp(-V/6) two; exp(-phi·V) of I_NaK is
 *     exp(-0.1·phi·V)^10 and also gives the exchanger's exp((gamma-1)·phi·V). A shifted exponential
 *     exp((V + c)/k) is written exp(c/k)·exp(V/k) with exp(c/k) one of the literals TT06_E_* below.
 *     Count per call: 22 exp + 1 expm1 of V-dependent arguments, plus 3 (V >= -40 mV) or 8 (V < -40 mV) in the
 *     h/j rates, 4 log, 1 sqrt; tt06_rush_larsen adds one exp per gate (12).
 *   - Time constants are used as rates 1/tau; where tau is a product of sigmoids the rate needs no division.
 *   - Ratios of ratios are put over one denominator (x_K1inf, O, buffers, I_NaK).
 *   - Integer powers are products; reversal potentials use ln(c_o) - ln(c_i), with ln(c_o) parameter-only.
 *   - Parameter-only expressions are not computed here at all: they come precomputed in the parameter vector
 *     (TP_RTF .. TP_r_c_ss, computed in Python), so even a one-substep-per-launch kernel does none of them.
 *   These rearrangements are algebraically exact; they change results only at round-off level (checked against the
 *   NumPy reference in tests/test_tt06.py).
 *
 * Singular points (spec.md §5): I_CaL's 0/0 at V = 15 mV is removed exactly (z/expm1(z), series for |z| < 1e-6);
 * h and j take the first branch for V < -40 mV + shift strictly, as the CellML; SERCA uptake and k_casr are written
 * without dividing by Ca_i or Ca_SR. A non-positive Ca_i still gives NaN via E_Ca: the caller's range check reports it.
 */
#ifndef CARDIOSIM_TT06_H
#define CARDIOSIM_TT06_H

#ifndef __CUDACC__
#include <math.h>
#endif

#ifndef CS_FN
#define CS_FN static inline
#endif
#ifndef CS_PARAM_ARG
#define CS_PARAM_ARG , const double *p
#endif
#ifndef CS_PARAM
#define CS_PARAM(i) (p[(i)])
#endif

#define TT06_N_STATES 19
#define TT06_N_BASE_PARAMS 53 /* model parameters; the rest of the vector is derived constants */
#define TT06_N_PARAMS 78

/* Parameter indices: the order of TenTusscher2006Epi.parameter_vector() in cardiosim/cells/tt06.py, i.e. the model
 * parameters (PARAMETER_ORDER; units there) followed by constants derived from them in Python (DERIVED_ORDER,
 * formulas in derived_constants()), so that no parameter-only division, log or sqrt is done per step.
 * Never fill the derived slots by hand: they must stay consistent with the parameters. */
enum {
    TP_R, TP_T, TP_F, TP_Cm, TP_V_c, TP_V_sr, TP_V_ss,
    TP_K_o, TP_Na_o, TP_Ca_o,
    TP_g_Na, TP_g_K1, TP_g_to, TP_g_Kr, TP_g_Ks, TP_P_kna, TP_g_CaL, TP_g_bna, TP_g_bca, TP_g_pCa, TP_K_pCa,
    TP_g_pK, TP_P_NaK, TP_K_mk, TP_K_mNa, TP_K_NaCa, TP_K_sat, TP_alpha, TP_gamma, TP_Km_Ca, TP_Km_Nai,
    TP_k1_prime, TP_k2_prime, TP_k3, TP_k4, TP_EC, TP_max_sr, TP_min_sr, TP_V_rel, TP_V_xfer, TP_K_up, TP_V_leak,
    TP_Vmax_up,
    TP_Buf_c, TP_K_buf_c, TP_Buf_sr, TP_K_buf_sr, TP_Buf_ss, TP_K_buf_ss,
    TP_shift_INa_inact, TP_perc_reduced_inact_for_IpNa, TP_conc_clamp, TP_s_endo,
    /* derived */
    TP_RTF, TP_FRT, TP_sqrt_Ko, TP_log_Nao, TP_log_Ko, TP_log_Kso, TP_log_Cao, TP_hj_frac, TP_gCaL_2F, TP_NaK_c,
    TP_NaCa_c, TP_NaCa_out, TP_gamma_FRT, TP_K_up2, TP_EC2, TP_d_sr, TP_BK_c, TP_BK_sr, TP_BK_ss, TP_c_NaK,
    TP_c_Cai, TP_c_Cass, TP_r_sr_c, TP_r_sr_ss, TP_r_c_ss,
    TP_COUNT_
};
/* Compile-time checks that the enum and the #defines agree. */
typedef char tt06_param_count_check_[(TP_COUNT_ == TT06_N_PARAMS && TP_RTF == TT06_N_BASE_PARAMS) ? 1 : -1];

/* State indices (spec.md §1). */
enum {
    TS_V, TS_Xr1, TS_Xr2, TS_Xs, TS_m, TS_h, TS_j, TS_d, TS_f, TS_f2, TS_fCass, TS_s, TS_r,
    TS_Ca_i, TS_R_prime, TS_Ca_SR, TS_Ca_ss, TS_Na_i, TS_K_i
};

/* exp(c) literals for the shifted exponentials (correctly rounded to double). */
#define TT06_E_M26_7  0.0243728440732796     /* exp(-26/7)  */
#define TT06_E_20_7   17.41170806332765      /* exp(20/7)   */
#define TT06_E_5      148.4131591025766      /* exp(5)      */
#define TT06_E_M4_5   0.011108996538242306   /* exp(-4.5)   */
#define TT06_E_M3     0.049787068367863944   /* exp(-3)     */
#define TT06_E_5_6    2.300975890892825      /* exp(5/6)    */
#define TT06_E_5_6_ENDO 270.42640742615254   /* exp(28/5) = exp(5.6): the endocardial s_inf */
#define TT06_E_10_3   28.03162489452614      /* exp(10/3)   */
#define TT06_E_M12    6.14421235332821e-06   /* exp(-12)    */
#define TT06_E_7      1096.6331584284585     /* exp(7)      */
#define TT06_E_1      2.718281828459045      /* exp(1)      */
#define TT06_E_2_5    12.182493960703473     /* exp(2.5)    */
#define TT06_E_1_3    3.6692966676192444     /* exp(1.3)    */
#define TT06_E_3      20.085536923187668     /* exp(3)      */
#define TT06_E_4      54.598150033144236     /* exp(4)      */
#define TT06_E_M4     0.01831563888873418    /* exp(-4)     */
#define TT06_E_M1     0.36787944117144233    /* exp(-1)     */

/*
 * The one body behind both entry points. rl == 0: out = dy/dt. rl == 1: out = the state after one Rush–Larsen step
 * of dt (out may be y itself: every state is read before anything is written). `rl` is a literal at both call sites,
 * so after inlining the unused branch disappears.
 *
 * The parameter pointer is an explicit last argument named p, so that the host's CS_PARAM(i) = (p[(i)]) resolves
 * to it; the entry points pass &CS_PARAM(0), which is their own p on the host. On the device CS_PARAM reads the
 * __constant__ array directly and this argument is unused (and removed when inlined).
 */
CS_FN void tt06_step_(const double *y, double *out, double i_stim, double dt, int rl, const double *p)
{
    (void)p;

    /* ---- parameters (derived constants: see DERIVED_ORDER in cardiosim/cells/tt06.py) -------------------------- */
    const double RTF = CS_PARAM(TP_RTF), FRT = CS_PARAM(TP_FRT);
    const double Ca_o = CS_PARAM(TP_Ca_o), P_kna = CS_PARAM(TP_P_kna), sqrt_Ko = CS_PARAM(TP_sqrt_Ko);
    const double shift = CS_PARAM(TP_shift_INa_inact), frac = CS_PARAM(TP_hj_frac);

    /* ---- state ---------------------------------------------------------------------------------------------- */
    const double V = y[TS_V], Xr1 = y[TS_Xr1], Xr2 = y[TS_Xr2], Xs = y[TS_Xs], m = y[TS_m], h = y[TS_h];
    const double j = y[TS_j], d = y[TS_d], f = y[TS_f], f2 = y[TS_f2], fCass = y[TS_fCass], s = y[TS_s];
    const double r = y[TS_r], Ca_i = y[TS_Ca_i], R_prime = y[TS_R_prime], Ca_SR = y[TS_Ca_SR];
    const double Ca_ss = y[TS_Ca_ss], Na_i = y[TS_Na_i], K_i = y[TS_K_i];

    /* ---- shared exponentials of V --------------------------------------------------------------------------- */
    const double E20 = exp(0.05 * V), iE20 = 1.0 / E20;  /* exp(±V/20) */
    const double E10 = E20 * E20, iE10 = iE20 * iE20;     /* exp(±V/10) */
    const double E5 = E10 * E10, iE5 = iE10 * iE10;       /* exp(±V/5)  */
    const double E7 = exp(V * (1.0 / 7.0)), iE7 = 1.0 / E7;
    const double iE6 = exp(V * (-1.0 / 6.0));
    const double c30 = 1.0 / (1.0 + TT06_E_3 * E10);      /* 1/(1 + exp((V+30)/10)), in tau_f and tau_f2 */

    /* ---- reversal potentials (mV) --------------------------------------------------------------------------- */
    const double E_Na = RTF * (CS_PARAM(TP_log_Nao) - log(Na_i));
    const double E_K = RTF * (CS_PARAM(TP_log_Ko) - log(K_i));
    const double E_Ks = RTF * (CS_PARAM(TP_log_Kso) - log(K_i + P_kna * Na_i));
    const double E_Ca = 0.5 * RTF * (CS_PARAM(TP_log_Cao) - log(Ca_i));

    /* ---- I_K1: x_K1inf = a/(a + b) with a = 0.1/A, b = Bn/Bd  =>  0.1·Bd/(0.1·Bd + A·Bn) --------------------- */
    const double u = V - E_K;
    const double eu = exp(0.1 * u);
    const double eu2 = eu * eu;
    const double A_K1 = 1.0 + exp(0.06 * u - 12.0);
    const double Bn_K1 = 3.0 * exp(0.0002 * u + 0.02) + TT06_E_M1 * eu;
    const double Bd_K1 = 1.0 + 1.0 / (eu2 * eu2 * eu);  /* 1 + exp(-0.5 u) */
    const double i_K1 = CS_PARAM(TP_g_K1) * sqrt_Ko * (0.1 * Bd_K1 / (0.1 * Bd_K1 + A_K1 * Bn_K1)) * u;

    /* ---- I_Kr ----------------------------------------------------------------------------------------------- */
    const double i_Kr = CS_PARAM(TP_g_Kr) * sqrt_Ko * Xr1 * Xr2 * (V - E_K);
    const double xr1_inf = 1.0 / (1.0 + TT06_E_M26_7 * iE7);
    /* tau = 450/(1 + e^((-45-V)/10)) · 6/(1 + e^((V+30)/11.5)) */
    const double xr1_rate = (1.0 + TT06_E_M4_5 * iE10) * (1.0 + exp(V * (1.0 / 11.5) + 30.0 / 11.5))
                            * (1.0 / 2700.0);
    const double xr2_inf = 1.0 / (1.0 + exp(V * (1.0 / 24.0) + 88.0 / 24.0));
    /* tau = 3/(1 + e^((-60-V)/20)) · 1.12/(1 + e^((V-60)/20)) */
    const double xr2_rate = (1.0 + TT06_E_M3 * iE20) * (1.0 + TT06_E_M3 * E20) * (1.0 / 3.36);

    /* ---- I_Ks ----------------------------------------------------------------------------------------------- */
    const double i_Ks = CS_PARAM(TP_g_Ks) * Xs * Xs * (V - E_Ks);
    const double xs_inf = 1.0 / (1.0 + exp(V * (-1.0 / 14.0) - 5.0 / 14.0));
    /* tau = 1400/sqrt(1 + e^((5-V)/6)) · 1/(1 + e^((V-35)/15)) + 80 */
    const double xs_den = sqrt(1.0 + TT06_E_5_6 * iE6) * (1.0 + exp(V * (1.0 / 15.0) - 35.0 / 15.0));
    const double xs_rate = xs_den / (1400.0 + 80.0 * xs_den);

    /* ---- I_Na ----------------------------------------------------------------------------------------------- */
    const double i_Na = CS_PARAM(TP_g_Na) * m * m * m * h * j * (V - E_Na);
    const double m_s = 1.0 / (1.0 + exp(V * (-1.0 / 9.03) - 56.86 / 9.03));
    const double m_inf = m_s * m_s;
    /* tau_m = alpha_m·beta_m, alpha_m = 1/(1+a), beta_m = 0.1/(1+b) + 0.1/(1+c)
     *   =>  1/tau_m = 10(1+a)(1+b)(1+c)/(2+b+c) */
    const double m_a = TT06_E_M12 * iE5, m_b = TT06_E_7 * E5, m_c = exp(V * (1.0 / 200.0) - 0.25);
    const double m_rate = 10.0 * (1.0 + m_a) * (1.0 + m_b) * (1.0 + m_c) / (2.0 + m_b + m_c);
    /* h and j (Chaste generalisation: shift, non-inactivating fraction). The rates are discontinuous at
     * V = -40 mV + shift (spec.md §5.2); the first branch for V < -40 + shift strictly, as in the CellML. */
    const double Vs = V - shift;
    const double hj_s = 1.0 / (1.0 + exp(Vs * (1.0 / 7.43) + 71.55 / 7.43));
    const double hj_inf = (1.0 - frac) * hj_s * hj_s + frac;
    double h_rate, j_rate;                                 /* alpha + beta = 1/tau, per ms */
    if (V < -40.0 + shift) {
        const double e3 = 1.0 + exp(0.311 * (Vs + 79.23));
        const double e5 = 1.0 + exp(-0.1378 * (Vs + 40.14));
        h_rate = 0.057 * exp(-(Vs + 80.0) * (1.0 / 6.8)) + 2.7 * exp(0.079 * Vs) + 310000.0 * exp(0.3485 * Vs);
        /* alpha_j = N1/e3, beta_j = N2/e5 */
        const double N1 = (-25428.0 * exp(0.2444 * Vs) - 6.948e-6 * exp(-0.04391 * Vs)) * (V + 37.78);
        const double N2 = 0.02424 * exp(-0.01052 * Vs);
        j_rate = (N1 * e5 + N2 * e3) / (e3 * e5);
    } else {
        h_rate = (0.77 / 0.13) / (1.0 + exp(Vs * (-1.0 / 11.1) - 10.66 / 11.1));
        j_rate = 0.6 * exp(0.057 * Vs) / (1.0 + exp(-0.1 * (Vs + 32.0)));
    }

    /* ---- background currents -------------------------------------------------------------------------------- */
    const double i_b_Na = CS_PARAM(TP_g_bna) * (V - E_Na);
    const double i_b_Ca = CS_PARAM(TP_g_bca) * (V - E_Ca);

    /* ---- I_CaL = 2F·g_CaL·d·f·f2·fCass·B(z)·(0.25 Ca_ss e^z - Ca_o), z = 2(V-15)F/RT, B(z) = z/(e^z - 1): the
     * CellML's GHK form without its 0/0 at V = 15 mV (see cardiosim/cells/tt06.py) ------------------------------ */
    const double z = 2.0 * FRT * (V - 15.0);
    const double em1 = expm1(z);
    const double B = (fabs(z) < 1e-6) ? 1.0 - z * (0.5 - z * (1.0 / 12.0)) : z / em1;
    const double i_CaL = CS_PARAM(TP_gCaL_2F) * d * f * f2 * fCass * B * (0.25 * Ca_ss * (em1 + 1.0) - Ca_o);
    const double d_inf = 1.0 / (1.0 + exp(V * (-1.0 / 7.5) - 8.0 / 7.5));
    const double alpha_d = 1.4 / (1.0 + exp(V * (-1.0 / 13.0) - 35.0 / 13.0)) + 0.25;
    const double beta_d = 1.4 / (1.0 + TT06_E_1 * E5);
    const double gamma_d = 1.0 / (1.0 + TT06_E_2_5 * iE20);
    const double d_rate = 1.0 / (alpha_d * beta_d + gamma_d);
    const double v27 = (V + 27.0) * (V + 27.0);
    const double f_inf = 1.0 / (1.0 + TT06_E_20_7 * E7);
    const double f_rate = 1.0 / (1102.5 * exp(v27 * (-1.0 / 225.0)) + 200.0 / (1.0 + TT06_E_1_3 * iE10)
                                 + 180.0 * c30 + 20.0);
    const double f2_inf = 0.67 / (1.0 + TT06_E_5 * E7) + 0.33;
    const double f2_rate = 1.0 / (562.0 * exp(v27 * (-1.0 / 240.0)) + 31.0 / (1.0 + TT06_E_2_5 * iE10) + 80.0 * c30);
    const double q_ss = 1.0 / (1.0 + 400.0 * Ca_ss * Ca_ss);         /* 1/(1 + (Ca_ss/0.05)^2) */
    const double fCass_inf = 0.6 * q_ss + 0.4;
    const double fCass_rate = 1.0 / (80.0 * q_ss + 2.0);

    /* ---- I_to (the cell type's s gate: TP_s_endo; one value for all threads, so no divergence) ---------------- */
    const double i_to = CS_PARAM(TP_g_to) * r * s * (V - E_K);
    const int endo = CS_PARAM(TP_s_endo) != 0.0;
    const double s_inf = 1.0 / (1.0 + (endo ? TT06_E_5_6_ENDO : TT06_E_4) * E5);
    const double s_rate = endo ? 1.0 / (1000.0 * exp((V + 67.0) * (V + 67.0) * (-1.0 / 1000.0)) + 8.0)
                               : 1.0 / (85.0 * exp((V + 45.0) * (V + 45.0) * (-1.0 / 320.0))
                                        + 5.0 / (1.0 + TT06_E_M4 * E5) + 3.0);
    const double r_inf = 1.0 / (1.0 + TT06_E_10_3 * iE6);
    const double r_rate = 1.0 / (9.5 * exp((V + 40.0) * (V + 40.0) * (-1.0 / 1800.0)) + 0.8);

    /* ---- pumps and exchanger -------------------------------------------------------------------------------- */
    const double e1 = exp(-0.1 * FRT * V);                 /* exp(-0.1 phi V) */
    const double e2 = e1 * e1, e4 = e2 * e2;
    const double e10 = e4 * e4 * e2;                        /* exp(-phi V) */
    const double i_NaK = CS_PARAM(TP_NaK_c) * Na_i
                         / ((Na_i + CS_PARAM(TP_K_mNa)) * (1.0 + 0.1245 * e1 + 0.0353 * e10));
    const double eg = exp(CS_PARAM(TP_gamma_FRT) * V);     /* exp(gamma phi V) */
    const double eg1 = eg * e10;                            /* exp((gamma - 1) phi V) */
    const double i_NaCa = CS_PARAM(TP_NaCa_c)
                          * (eg * Na_i * Na_i * Na_i * Ca_o - eg1 * CS_PARAM(TP_NaCa_out) * Ca_i)
                          / (1.0 + CS_PARAM(TP_K_sat) * eg1);
    const double i_p_Ca = CS_PARAM(TP_g_pCa) * Ca_i / (Ca_i + CS_PARAM(TP_K_pCa));
    const double i_p_K = CS_PARAM(TP_g_pK) * (V - E_K) / (1.0 + exp(V * (-1.0 / 5.98) + 25.0 / 5.98));

    /* ---- calcium handling (no division by Ca_i or Ca_SR, see the header comment) ------------------------------ */
    const double ci2 = Ca_i * Ca_i;
    const double i_up = CS_PARAM(TP_Vmax_up) * ci2 / (ci2 + CS_PARAM(TP_K_up2));
    const double i_leak = CS_PARAM(TP_V_leak) * (Ca_SR - Ca_i);
    const double i_xfer = CS_PARAM(TP_V_xfer) * (Ca_ss - Ca_i);
    const double csr2 = Ca_SR * Ca_SR;
    const double kcasr = CS_PARAM(TP_max_sr) - CS_PARAM(TP_d_sr) * csr2 / (csr2 + CS_PARAM(TP_EC2));
    const double css2 = Ca_ss * Ca_ss;
    /* O = k1 css2 R'/(k3 + k1 css2) with k1 = k1'/kcasr */
    const double k1c = CS_PARAM(TP_k1_prime) * css2;
    const double O = k1c * R_prime / (CS_PARAM(TP_k3) * kcasr + k1c);
    const double i_rel = CS_PARAM(TP_V_rel) * O * (Ca_SR - Ca_ss);
    const double bc = (Ca_i + CS_PARAM(TP_K_buf_c)) * (Ca_i + CS_PARAM(TP_K_buf_c));
    const double bsr = (Ca_SR + CS_PARAM(TP_K_buf_sr)) * (Ca_SR + CS_PARAM(TP_K_buf_sr));
    const double bss = (Ca_ss + CS_PARAM(TP_K_buf_ss)) * (Ca_ss + CS_PARAM(TP_K_buf_ss));

    /* ---- derivatives of the non-gate states ----------------------------------------------------------------- */
    const double dV = -(i_K1 + i_to + i_Kr + i_Ks + i_CaL + i_NaK + i_Na + i_b_Na + i_NaCa + i_b_Ca + i_p_K + i_p_Ca
                        + i_stim);
    const double dCa_i = bc / (bc + CS_PARAM(TP_BK_c))
                         * ((i_leak - i_up) * CS_PARAM(TP_r_sr_c) + i_xfer
                            - (i_b_Ca + i_p_Ca - 2.0 * i_NaCa) * CS_PARAM(TP_c_Cai));
    const double dR_prime = -CS_PARAM(TP_k2_prime) * kcasr * Ca_ss * R_prime + CS_PARAM(TP_k4) * (1.0 - R_prime);
    const double dCa_SR = bsr / (bsr + CS_PARAM(TP_BK_sr)) * (i_up - (i_rel + i_leak));
    const double dCa_ss = bss / (bss + CS_PARAM(TP_BK_ss))
                          * (-i_CaL * CS_PARAM(TP_c_Cass) + i_rel * CS_PARAM(TP_r_sr_ss)
                             - i_xfer * CS_PARAM(TP_r_c_ss));
    const double dNa_i = -(i_Na + i_b_Na + 3.0 * i_NaK + 3.0 * i_NaCa) * CS_PARAM(TP_c_NaK);
    const double dK_i = -(i_K1 + i_to + i_Kr + i_Ks + i_p_K + i_stim - 2.0 * i_NaK) * CS_PARAM(TP_c_NaK);

    /* The 12 Hodgkin-Huxley gates, each (state, value, steady state, rate in 1/ms), written once for both
     * branches below: Rush-Larsen's exact step for frozen V, or the derivative. */
#define TT06_GATES(G) \
    G(TS_Xr1, Xr1, xr1_inf, xr1_rate) G(TS_Xr2, Xr2, xr2_inf, xr2_rate) G(TS_Xs, Xs, xs_inf, xs_rate) \
    G(TS_m, m, m_inf, m_rate) G(TS_h, h, hj_inf, h_rate) G(TS_j, j, hj_inf, j_rate) \
    G(TS_d, d, d_inf, d_rate) G(TS_f, f, f_inf, f_rate) G(TS_f2, f2, f2_inf, f2_rate) \
    G(TS_fCass, fCass, fCass_inf, fCass_rate) G(TS_s, s, s_inf, s_rate) G(TS_r, r, r_inf, r_rate)
    /* ---- write ---------------------------------------------------------------------------------------------- */
    if (rl) {
        out[TS_V] = V + dt * dV;
        out[TS_Ca_i] = Ca_i + dt * dCa_i;
        out[TS_R_prime] = R_prime + dt * dR_prime;
        out[TS_Ca_SR] = Ca_SR + dt * dCa_SR;
        out[TS_Ca_ss] = Ca_ss + dt * dCa_ss;
        out[TS_Na_i] = Na_i + dt * dNa_i;
        out[TS_K_i] = K_i + dt * dK_i;
#define TT06_RL_(k, x, inf, rate) out[k] = (inf) + ((x) - (inf)) * exp(-dt * (rate));
        TT06_GATES(TT06_RL_)
#undef TT06_RL_
    } else {
        out[TS_V] = dV;
#define TT06_RATE_(k, x, inf, rate) out[k] = (inf - x) * rate;   /* names only: no parentheses needed */
        TT06_GATES(TT06_RATE_)
#undef TT06_RATE_
        out[TS_Ca_i] = dCa_i;
        out[TS_R_prime] = dR_prime;
        out[TS_Ca_SR] = dCa_SR;
        out[TS_Ca_ss] = dCa_ss;
        out[TS_Na_i] = dNa_i;
        out[TS_K_i] = dK_i;
    }
#undef TT06_GATES
}

/* dy/dt of all 19 states (per ms) at y; i_stim in pA/pF, negative depolarising. */
CS_FN void tt06_rhs(const double *y, double *dydt, double i_stim CS_PARAM_ARG)
{
    tt06_step_(y, dydt, i_stim, 0.0, 0, &CS_PARAM(0));
}

/* One Rush–Larsen step of dt ms, in place (rule: see the top of this file). */
CS_FN void tt06_rush_larsen(double *y, double dt, double i_stim CS_PARAM_ARG)
{
    tt06_step_(y, y, i_stim, dt, 1, &CS_PARAM(0));
}

#endif /* CARDIOSIM_TT06_H */

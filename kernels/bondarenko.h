/* Bondarenko et al. 2004 mouse ventricular myocyte (41 states): the right-hand side in plain C99.
 *
 * Shared by the host (kernels/cpu_driver.c) and the device (CUDA kernels). The equations are those of
 * cardiosim/cells/bondarenko.py, the NumPy reference, written with the same operations in the same order so that
 * the two agree to a few ulp (tests/test_bondarenko.py). Change one, change the other. Ground truth is the CellML in
 * tests/data/reference/bondarenko2004/ (restated in its spec.md); deliberate deviations: [D2] Kpcb in the I1->C4
 * term of dI1/dt, and the 0/0 of alpha_n (I_Ks) at V = -26.5 mV evaluated as k*x/(-expm1(-a*x)) with a series for
 * |x| < 1e-6 mV.
 *
 * Units: t ms, V mV, concentrations uM, currents pA/pF, rates 1/ms. dydt is per ms.
 *
 * Conventions for the file that includes this one:
 *   CS_FN         function qualifiers. Host default: static inline. Device: __device__ __forceinline__.
 *   CS_PARAM(i)   how parameter i is read. Host default: (p[i]) with `const double *p` a function argument.
 *                 Device: e.g. (c_params[i]) for a __constant__ double c_params[BONDARENKO_N_PARAMS].
 *   CS_PARAM_ARG  the extra argument that brings the parameters in. Host default: , const double *p.
 *                 Device: define it empty.
 *   CS_DERIV_T    the type of dydt. Default: double *. The seed's kernel variants
 *                 (cardiosim/reaction/ode/kernel_variants.py) pass an object whose operator[] addresses a derivative
 *                 vector in global memory.
 * The parameter vector is Bondarenko.parameter_vector() in Python: the model parameters (BP_Acap .. BP_shift_INa_inact,
 * spec.md section 3, in cardiosim.cells.bondarenko.PARAMETER_ORDER) followed by parameter-only constants derived from
 * them in Python (BP_RTF .. BP_pryr_k, DERIVED_ORDER), so that no parameter-only arithmetic is done per step.
 * Never fill the derived slots by hand: they must stay consistent with the parameters.
 *
 * Performance notes (docs/dev/design.md §8): 33 exp, 4 log, 1 expm1, 1 sqrt, no pow for the default n = 4, m = 3
 * (the test on CS_PARAM(BP_n) is uniform across a warp); shifted exponentials that differ by a constant factor are
 * computed once (beta_Na11/12/13, alpha_i/beta_i of I_Kto,f, the NCX/NaK exponentials); divisions by constants
 * are multiplications by folded reciprocals; two divisions by different denominators share one, by their product
 * (a/b, c/d as a*(d*r), c*(b*r) with r = 1/(b*d): alpha/gamma of I_CaL, the aNa1x, the I_Kto,f and I_Kto,s rates,
 * I_K1 with tau of aKss), and the buffer factors 1/(1 + k/t^2) are t^2/(t^2 + k). An FP64 division or reciprocal
 * is ~20 SASS instructions on sm_90 (a reciprocal estimate, Newton steps, a slow-path test and call), and the fused
 * kernel is bound by the instructions it issues: 4695 -> 4354 per step (docs/decisions/
 * 0049-fewer-divisions-in-the-bondarenko-kernel.md). Every denominator is positive; over V in [-200, 200] mV their products
 * stay within ~2e-4 .. 5e18.
 */

/* Part 1: sizes, indices, literal constants. No code; safe to include anywhere, any number of times. */
#ifndef CARDIOSIM_BONDARENKO_DECLS
#define CARDIOSIM_BONDARENKO_DECLS

#define BONDARENKO_N_STATES 41
#define BONDARENKO_N_BASE_PARAMS 69 /* model parameters; the rest of the vector is derived constants */
#define BONDARENKO_N_PARAMS 96

/* Parameter indices: the order of Bondarenko.parameter_vector() (PARAMETER_ORDER + DERIVED_ORDER). */
enum {
    BP_Acap, BP_Cm, BP_Vmyo, BP_VJSR, BP_VNSR, BP_Vss, BP_R, BP_T, BP_F, BP_Ko, BP_Nao, BP_Cao,
    BP_CMDN_tot, BP_Km_CMDN, BP_CSQN_tot, BP_Km_CSQN, BP_LTRPN_tot, BP_HTRPN_tot, BP_k_plus_ltrpn,
    BP_k_minus_ltrpn, BP_k_plus_htrpn, BP_k_minus_htrpn, BP_v1, BP_v2, BP_v3, BP_Km_up, BP_tau_tr,
    BP_tau_xfer, BP_k_plus_a, BP_k_minus_a, BP_k_plus_b, BP_k_minus_b, BP_k_plus_c, BP_k_minus_c,
    BP_n, BP_m, BP_g_CaL, BP_E_CaL, BP_Kpc_max, BP_Kpc_half, BP_Kpcb, BP_i_CaL_max, BP_i_pCa_max,
    BP_Km_pCa, BP_k_NaCa, BP_K_mNa, BP_K_mCa, BP_k_sat, BP_eta, BP_g_Cab, BP_g_Na, BP_g_Nab,
    BP_i_NaK_max, BP_Km_Nai, BP_Km_Ko, BP_g_Kto_f, BP_g_Kto_s, BP_g_Kur, BP_g_Kss, BP_g_Ks, BP_g_Kr,
    BP_kf, BP_kb, BP_g_K1, BP_g_ClCa, BP_Km_Cl, BP_E_Cl, BP_conc_clamp, BP_shift_INa_inact,
    /* derived (see DERIVED_ORDER in cardiosim/cells/bondarenko.py for the formulas) */
    BP_RTF, BP_FRT, BP_RT2F, BP_log_Cao, BP_log_Ko, BP_log_Na_out, BP_log_Kr_out, BP_f_cai, BP_f_cass,
    BP_f_myo, BP_r_jsr_ss, BP_r_myo_ss, BP_r_myo_nsr, BP_r_jsr_nsr, BP_inv_tau_tr, BP_inv_tau_xfer,
    BP_cmdn_k, BP_csqn_k, BP_Km_up2, BP_Km_pCa2, BP_naca_k, BP_naca_nao3, BP_eta_FRT, BP_nak_sigma,
    BP_nak_k, BP_k1_g, BP_pryr_k,
    BP_COUNT_ /* == BONDARENKO_N_PARAMS */
};

/* State indices (spec.md section 2). */
enum {
    BS_V, BS_Cai, BS_Cass, BS_CaJSR, BS_CaNSR, BS_P_RyR, BS_LTRPN_Ca, BS_HTRPN_Ca, BS_P_O1, BS_P_O2, BS_P_C2,
    BS_O, BS_C2, BS_C3, BS_C4, BS_I1, BS_I2, BS_I3, BS_Nai, BS_C_Na2, BS_C_Na1, BS_O_Na, BS_IF_Na, BS_I1_Na,
    BS_I2_Na, BS_IC_Na2, BS_IC_Na3, BS_Ki, BS_ato_f, BS_ito_f, BS_ato_s, BS_ito_s, BS_nKs, BS_aur, BS_iur,
    BS_aKss, BS_iKss, BS_C_K2, BS_C_K1, BS_O_K, BS_I_K,
    BS_COUNT_ /* == BONDARENKO_N_STATES */
};

/* Literal constants (same digits as in bondarenko.py). */
#define BNA12_K 0.2558580466131638       /* 0.2*exp(5/20.3) */
#define BNA13_K 0.3600483700918714       /* 0.22*exp(10/20.3) */
#define AI_TOF_K 0.0026465796256258034   /* 0.000152*exp(20/7) */
#define ALPHA_N_LIM 3.7604140624999995e-05 /* 4.81333e-6/0.128: alpha_n at V = -26.5 mV */
#define ALPHA_N_EPS 1e-6                 /* mV */

#endif /* CARDIOSIM_BONDARENKO_DECLS */

/* Part 2: the right-hand side. Skipped while BONDARENKO_DECLS_ONLY is defined, so that a CUDA file can take the
 * sizes first, declare its parameter array, then include again for the code:
 *     #define BONDARENKO_DECLS_ONLY
 *     #include "bondarenko.h"
 *     #undef BONDARENKO_DECLS_ONLY
 *     __constant__ double c_params[BONDARENKO_N_PARAMS];
 *     #define CS_FN __device__ __forceinline__
 *     #define CS_PARAM(i) (c_params[i])
 *     #define CS_PARAM_ARG
 *     #include "bondarenko.h"
 */
#if !defined(BONDARENKO_DECLS_ONLY) && !defined(CARDIOSIM_BONDARENKO_RHS)
#define CARDIOSIM_BONDARENKO_RHS

#include <math.h>

#ifndef CS_FN
#define CS_FN static inline
#endif
#ifndef CS_PARAM
#define CS_PARAM(i) (p[i])
#endif
#ifndef CS_PARAM_ARG
#define CS_PARAM_ARG , const double *p
#endif
#ifndef CS_DERIV_T
#define CS_DERIV_T double * /* anything indexable as dydt[i] = ...: the seed's kernel variants pass a global row */
#endif

/* dydt = f(y) for one cell; i_stim in pA/pF, negative depolarises, enters dV/dt only. */
CS_FN void bondarenko_rhs(const double *y, CS_DERIV_T dydt, double i_stim CS_PARAM_ARG)
{
    const double V = y[0], Cai = y[1], Cass = y[2], CaJSR = y[3], CaNSR = y[4], P_RyR = y[5];
    const double LTRPN_Ca = y[6], HTRPN_Ca = y[7], P_O1 = y[8], P_O2 = y[9], P_C2 = y[10];
    const double O = y[11], C2 = y[12], C3 = y[13], C4 = y[14], I1 = y[15], I2 = y[16], I3 = y[17];
    const double Nai = y[18], Ki = y[27];

    /* --- reversal potentials (mV) */
    const double E_Na = CS_PARAM(BP_RTF) * (CS_PARAM(BP_log_Na_out) - log(0.9 * Nai + 0.1 * Ki));
    const double E_K = CS_PARAM(BP_RTF) * (CS_PARAM(BP_log_Ko) - log(Ki));
    const double E_CaN = CS_PARAM(BP_RT2F) * (CS_PARAM(BP_log_Cao) - log(Cai));
    const double E_Kr = CS_PARAM(BP_RTF) * (CS_PARAM(BP_log_Kr_out) - log(0.98 * Ki + 0.02 * Nai));

    /* --- L-type Ca2+ channel (Markov; C1 is the closure) */
    double i_CaL;
    {
        const double vp12 = V + 12.0;
        const double ea = exp(vp12 * 0.1);
        const double vp40 = V + 40.0;
        const double vp20 = V + 20.0;
        const double d_al = 1.0 + 0.12 * ea;
        const double d_ga = CS_PARAM(BP_Kpc_half) + Cass;
        const double r_ag = 1.0 / (d_al * d_ga);
        const double alpha = 0.4 * ea * (1.0 + 0.7 * exp(vp40 * vp40 * -0.1) - 0.75 * exp(vp20 * vp20 * -0.0025))
                             * (d_ga * r_ag);
        const double beta = 0.05 * exp(vp12 * (-1.0 / 13.0));
        const double gamma = CS_PARAM(BP_Kpc_max) * Cass * (d_al * r_ag);
        const double vp145 = V + 14.5;
        const double Kpcf = 13.0 * (1.0 - exp(vp145 * vp145 * -0.01));
        const double Kpcb = CS_PARAM(BP_Kpcb);
        const double C1 = 1.0 - (O + C2 + C3 + C4 + I1 + I2 + I3);
        const double b4 = 4.0 * beta;
        i_CaL = CS_PARAM(BP_g_CaL) * O * (V - CS_PARAM(BP_E_CaL));
        dydt[11] = (alpha * C4 + Kpcb * I1 + 0.001 * (alpha * I2 - Kpcf * O)) - (b4 * O + gamma * O);
        dydt[12] = (4.0 * alpha * C1 + 2.0 * beta * C3) - (beta * C2 + 3.0 * alpha * C2);
        dydt[13] = (3.0 * alpha * C2 + 3.0 * beta * C4) - (2.0 * beta * C3 + 2.0 * alpha * C3);
        dydt[14] = (2.0 * alpha * C3 + b4 * O + 0.01 * (b4 * Kpcb * I1 - alpha * gamma * C4)
                    + 0.002 * (b4 * I2 - Kpcf * C4) + b4 * Kpcb * I3)
                   - (3.0 * beta * C4 + alpha * C4 + gamma * Kpcf * C4);
        /* [D2]: Kpcb (the CellML has Kpcf) in the last term: the reverse of C4's 0.01*4*Kpcb*beta*I1. */
        dydt[15] = (gamma * O + 0.001 * (alpha * I3 - Kpcf * I1) + 0.01 * (alpha * gamma * C4 - b4 * Kpcb * I1))
                   - Kpcb * I1;
        dydt[16] = (0.001 * (Kpcf * O - alpha * I2) + Kpcb * I3 + 0.002 * (Kpcf * C4 - b4 * I2)) - gamma * I2;
        dydt[17] = (0.001 * (Kpcf * I1 - alpha * I3) + gamma * I2 + gamma * Kpcf * C4) - (b4 * Kpcb * I3 + Kpcb * I3);
    }

    /* --- RyR (Markov; P_C1 is the closure) and its modulation factor */
    {
        const double c2 = Cass * Cass;
        /* n = 4, m = 3 by default: products, not pow (the branch is uniform across cells). */
        const double cass_n = CS_PARAM(BP_n) == 4.0 ? c2 * c2 : pow(Cass, CS_PARAM(BP_n));
        const double cass_m = CS_PARAM(BP_m) == 3.0 ? c2 * Cass : pow(Cass, CS_PARAM(BP_m));
        const double P_C1 = 1.0 - (P_C2 + P_O1 + P_O2);
        const double kb_O1 = CS_PARAM(BP_k_plus_b) * cass_m * P_O1;
        dydt[8] = (CS_PARAM(BP_k_plus_a) * cass_n * P_C1 + CS_PARAM(BP_k_minus_b) * P_O2
                   + CS_PARAM(BP_k_minus_c) * P_C2)
                  - (CS_PARAM(BP_k_minus_a) * P_O1 + kb_O1 + CS_PARAM(BP_k_plus_c) * P_O1);
        dydt[9] = kb_O1 - CS_PARAM(BP_k_minus_b) * P_O2;
        dydt[10] = CS_PARAM(BP_k_plus_c) * P_O1 - CS_PARAM(BP_k_minus_c) * P_C2;
        const double vm5 = V - 5.0;
        dydt[5] = -0.04 * P_RyR - CS_PARAM(BP_pryr_k) * i_CaL * exp(vm5 * vm5 * (-1.0 / 648.0));
    }

    /* --- other Ca2+ and Cl- currents */
    const double cai2 = Cai * Cai;
    const double i_pCa = CS_PARAM(BP_i_pCa_max) * cai2 / (CS_PARAM(BP_Km_pCa2) + cai2);
    const double e_mV = exp(V * -CS_PARAM(BP_FRT));      /* exp(-VF/RT), shared by I_NaCa and I_NaK */
    double i_NaCa;
    {
        const double e_eta = exp(V * CS_PARAM(BP_eta_FRT)); /* exp(eta*VF/RT) */
        const double e_eta1 = e_eta * e_mV;                 /* exp((eta-1)*VF/RT) */
        const double nai3 = Nai * Nai * Nai;
        i_NaCa = CS_PARAM(BP_naca_k) / (1.0 + CS_PARAM(BP_k_sat) * e_eta1)
                 * (e_eta * nai3 * CS_PARAM(BP_Cao) - e_eta1 * CS_PARAM(BP_naca_nao3) * Cai);
    }
    const double i_Cab = CS_PARAM(BP_g_Cab) * (V - E_CaN);
    const double d_ClCa = (1.0 + exp((V - 46.7) * (-1.0 / 7.8))) * (Cai + CS_PARAM(BP_Km_Cl)); /* O_ClCa = 0.2/(1+e) */
    const double i_ClCa = CS_PARAM(BP_g_ClCa) * 0.2 * Cai / d_ClCa * (V - CS_PARAM(BP_E_Cl));

    /* --- fast Na+ channel (Markov; C_Na3 is the closure) */
    double i_Na, i_Nab;
    {
        const double C_Na2 = y[19], C_Na1 = y[20], O_Na = y[21], IF_Na = y[22], I1_Na = y[23], I2_Na = y[24];
        const double IC_Na2 = y[25], IC_Na3 = y[26];
        const double xa = V + 2.5;
        const double e150 = exp(xa * (-1.0 / 150.0));
        const double d11 = 0.1027 * exp(xa * (-1.0 / 17.0)) + 0.2 * e150;
        const double d12 = 0.1027 * exp(xa * (-1.0 / 15.0)) + 0.23 * e150;
        const double d13 = 0.1027 * exp(xa * (-1.0 / 12.0)) + 0.25 * e150;
        const double d1112 = d11 * d12;
        const double r_a1 = 3.802 / (d1112 * d13);
        const double aNa11 = (d12 * d13) * r_a1;
        const double aNa12 = (d11 * d13) * r_a1;
        const double aNa13 = d1112 * r_a1;
        const double e203 = exp(xa * (-1.0 / 20.3));
        const double bNa11 = 0.1917 * e203;
        const double bNa12 = BNA12_K * e203;
        const double bNa13 = BNA13_K * e203;
        const double vp7 = V + 7.0;
        const double aNa3 = 7e-7 * exp(vp7 * (-1.0 / 7.7));
        const double bNa3 = 0.0084 + 2e-5 * vp7;
        const double aNa2 = 1.0 / (0.188495 * exp((vp7 - CS_PARAM(BP_shift_INa_inact)) * (-1.0 / 16.6)) + 0.393956);
        const double bNa2 = aNa13 * aNa2 * aNa3 / (bNa13 * bNa3);
        const double aNa4 = aNa2 * 0.001;
        const double bNa4 = aNa3;
        const double aNa5 = aNa2 * (1.0 / 95000.0);
        const double bNa5 = aNa3 * 0.02;
        const double C_Na3 = 1.0 - (O_Na + C_Na1 + C_Na2 + IF_Na + I1_Na + I2_Na + IC_Na2 + IC_Na3);
        dydt[19] = (aNa11 * C_Na3 + bNa12 * C_Na1 + aNa3 * IC_Na2) - (bNa11 + aNa12 + bNa3) * C_Na2;
        dydt[20] = (aNa12 * C_Na2 + bNa13 * O_Na + aNa3 * IF_Na) - (bNa12 + aNa13 + bNa3) * C_Na1;
        dydt[21] = (aNa13 * C_Na1 + bNa2 * IF_Na) - (bNa13 + aNa2) * O_Na;
        dydt[22] = (aNa2 * O_Na + bNa3 * C_Na1 + bNa4 * I1_Na + aNa12 * IC_Na2) - (bNa2 + aNa3 + aNa4 + bNa12) * IF_Na;
        dydt[23] = (aNa4 * IF_Na + bNa5 * I2_Na) - (bNa4 + aNa5) * I1_Na;
        dydt[24] = aNa5 * I1_Na - bNa5 * I2_Na;
        dydt[25] = (aNa11 * IC_Na3 + bNa12 * IF_Na + bNa3 * C_Na2) - (bNa11 + aNa12 + aNa3) * IC_Na2;
        dydt[26] = (bNa11 * IC_Na2 + bNa3 * C_Na3) - (aNa11 + aNa3) * IC_Na3;
        i_Na = CS_PARAM(BP_g_Na) * O_Na * (V - E_Na);
        i_Nab = CS_PARAM(BP_g_Nab) * (V - E_Na);
    }

    /* --- Na+/K+ pump */
    double i_NaK;
    {
        const double d_NaK = 1.0 + 0.1245 * exp(V * (-0.1 * CS_PARAM(BP_FRT))) + CS_PARAM(BP_nak_sigma) * e_mV;
        const double r = CS_PARAM(BP_Km_Nai) / Nai;
        i_NaK = CS_PARAM(BP_nak_k) / (d_NaK * (1.0 + r * sqrt(r)));   /* (Km_Nai/Nai)^1.5 */
    }

    /* --- K+ currents */
    const double vmEK = V - E_K;
    double i_Kto_f, i_Kto_s, i_K1, i_Ks, i_Kur, i_Kss, i_Kr;
    {
        const double ato_f = y[28], ito_f = y[29], ato_s = y[30], ito_s = y[31], nKs = y[32];
        const double aur = y[33], iur = y[34], aKss = y[35], iKss = y[36];
        const double vp30 = V + 30.0;
        dydt[28] = (0.18064 * exp(0.03577 * vp30)) * (1.0 - ato_f) - (0.3956 * exp(-0.06237 * vp30)) * ato_f;
        /* alpha_i, beta_i of I_Kto,f from one exponential: exp(-(V+13.5)/7) = exp(20/7)*e33, and
           0.00095*E/(0.051335*E + 1) with E = 1/e33 is 0.00095/(0.051335 + e33). */
        const double e33 = exp((V + 33.5) * (-1.0 / 7.0));
        const double d_ai = 0.0067083 * e33 + 1.0;                        /* [D1]: 0.0067083 as in the CellML */
        const double d_bi = 0.051335 + e33;
        const double r_i = 1.0 / (d_ai * d_bi);
        const double alpha_i = AI_TOF_K * e33 * (d_bi * r_i);
        const double beta_i = 0.00095 * (d_ai * r_i);
        dydt[29] = alpha_i * (1.0 - ito_f) - beta_i * ito_f;
        const double ato3 = ato_f * ato_f * ato_f;
        i_Kto_f = CS_PARAM(BP_g_Kto_f) * ato3 * ito_f * vmEK;

        const double d_ass = 1.0 + exp((V + 22.5) * (-1.0 / 7.7));
        const double d_iss = 1.0 + exp((V + 45.2) * (1.0 / 5.7));
        const double r_ai = 1.0 / (d_ass * d_iss);
        const double ass = d_iss * r_ai;
        const double iss = d_ass * r_ai;
        const double d31 = 270.0 + 1050.0 * iss;
        const double d34 = 1200.0 - 170.0 * iss;
        const double r_3134 = 1.0 / (d31 * d34);
        const double inv_tau_a = 1.0 / (0.493 * exp(-0.0629 * V) + 2.058);   /* tau_ta_s = tau_aur */
        dydt[30] = (ass - ato_s) * inv_tau_a;
        dydt[31] = (iss - ito_s) * (d34 * r_3134);
        i_Kto_s = CS_PARAM(BP_g_Kto_s) * ato_s * ito_s * vmEK;

        const double d_K1 = 1.0 + exp(0.0896 * vmEK);
        const double d35 = 39.3 * exp(-0.0862 * V) + 13.17;
        const double r_K1 = 1.0 / (d_K1 * d35);
        i_K1 = CS_PARAM(BP_k1_g) * vmEK * (d35 * r_K1);

        /* alpha_n = 4.81333e-6*x/(1 - exp(-0.128x)) is 0/0 at x = 0: expm1 keeps it accurate for small x, the
           series (k/a)(1 + a*x/2) covers |x| < 1e-6 (error < 1e-15 relative). */
        const double x = V + 26.5;
        double alpha_n;
        if (fabs(x) < ALPHA_N_EPS)
            alpha_n = ALPHA_N_LIM * (1.0 + 0.064 * x);
        else
            alpha_n = 4.81333e-6 * x / -expm1(-0.128 * x);
        const double beta_n = 9.53333e-5 * exp(-0.038 * x);
        dydt[32] = alpha_n * (1.0 - nKs) - beta_n * nKs;
        i_Ks = CS_PARAM(BP_g_Ks) * nKs * nKs * vmEK;

        dydt[33] = (ass - aur) * inv_tau_a;
        dydt[34] = (iss - iur) * (d31 * r_3134);
        i_Kur = CS_PARAM(BP_g_Kur) * aur * iur * vmEK;

        dydt[35] = (ass - aKss) * (d_K1 * r_K1);
        dydt[36] = 0.0;
        i_Kss = CS_PARAM(BP_g_Kss) * aKss * iKss * vmEK;
    }
    {
        const double C_K2 = y[37], C_K1 = y[38], O_K = y[39], I_K = y[40];
        const double a_a0 = 0.022348 * exp(0.01176 * V);
        const double b_a0 = 0.047002 * exp(-0.0631 * V);
        const double a_a1 = 0.013733 * exp(0.038198 * V);
        const double b_a1 = 6.89e-5 * exp(-0.04178 * V);
        const double vp5 = V + 5.0;
        const double a_iK = 0.090821 * exp(0.023391 * vp5);
        const double b_iK = 0.006497 * exp(-0.03268 * vp5);
        const double C_K0 = 1.0 - (C_K1 + C_K2 + O_K + I_K);
        dydt[37] = (CS_PARAM(BP_kf) * C_K1 + b_a1 * O_K) - (CS_PARAM(BP_kb) + a_a1) * C_K2;
        dydt[38] = (a_a0 * C_K0 + CS_PARAM(BP_kb) * C_K2) - (b_a0 + CS_PARAM(BP_kf)) * C_K1;
        dydt[39] = (a_a1 * C_K2 + b_iK * I_K) - (b_a1 + a_iK) * O_K;
        dydt[40] = a_iK * O_K - b_iK * I_K;
        i_Kr = CS_PARAM(BP_g_Kr) * O_K * (V - E_Kr);
    }

    /* --- Ca2+ fluxes (uM/ms) and concentrations */
    {
        const double J_rel = CS_PARAM(BP_v1) * (P_O1 + P_O2) * (CaJSR - Cass) * P_RyR;
        const double J_tr = (CaNSR - CaJSR) * CS_PARAM(BP_inv_tau_tr);
        const double J_xfer = (Cass - Cai) * CS_PARAM(BP_inv_tau_xfer);
        const double J_leak = CS_PARAM(BP_v2) * (CaNSR - Cai);
        const double J_up = CS_PARAM(BP_v3) * cai2 / (CS_PARAM(BP_Km_up2) + cai2);
        const double dLTRPN = CS_PARAM(BP_k_plus_ltrpn) * Cai * (CS_PARAM(BP_LTRPN_tot) - LTRPN_Ca)
                              - CS_PARAM(BP_k_minus_ltrpn) * LTRPN_Ca;
        const double dHTRPN = CS_PARAM(BP_k_plus_htrpn) * Cai * (CS_PARAM(BP_HTRPN_tot) - HTRPN_Ca)
                              - CS_PARAM(BP_k_minus_htrpn) * HTRPN_Ca;
        dydt[6] = dLTRPN;
        dydt[7] = dHTRPN;
        const double J_trpn = dHTRPN + dLTRPN;
        const double t1 = CS_PARAM(BP_Km_CMDN) + Cai;
        const double t1s = t1 * t1;
        const double Bi = t1s / (t1s + CS_PARAM(BP_cmdn_k));
        const double t2 = CS_PARAM(BP_Km_CMDN) + Cass;
        const double t2s = t2 * t2;
        const double Bss = t2s / (t2s + CS_PARAM(BP_cmdn_k));
        const double t3 = CS_PARAM(BP_Km_CSQN) + CaJSR;
        const double t3s = t3 * t3;
        const double BJSR = t3s / (t3s + CS_PARAM(BP_csqn_k));
        dydt[1] = Bi * ((J_leak + J_xfer) - (J_up + J_trpn + (i_Cab + i_pCa - 2.0 * i_NaCa) * CS_PARAM(BP_f_cai)));
        dydt[2] = Bss * (J_rel * CS_PARAM(BP_r_jsr_ss) - (J_xfer * CS_PARAM(BP_r_myo_ss) + i_CaL * CS_PARAM(BP_f_cass)));
        dydt[3] = BJSR * (J_tr - J_rel);
        dydt[4] = (J_up - J_leak) * CS_PARAM(BP_r_myo_nsr) - J_tr * CS_PARAM(BP_r_jsr_nsr);
    }

    dydt[18] = -(i_Na + i_Nab + 3.0 * i_NaK + 3.0 * i_NaCa) * CS_PARAM(BP_f_myo);
    dydt[27] = -((i_Kto_f + i_Kto_s + i_K1 + i_Ks + i_Kss + i_Kur + i_Kr) - 2.0 * i_NaK) * CS_PARAM(BP_f_myo);

    dydt[0] = -(i_CaL + i_pCa + i_NaCa + i_Cab + i_Na + i_Nab + i_NaK + i_Kto_f + i_Kto_s + i_K1 + i_Ks
                + i_Kur + i_Kss + i_Kr + i_ClCa + i_stim);
}

#endif /* CARDIOSIM_BONDARENKO_RHS */

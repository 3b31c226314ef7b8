/* Forward-Euler CPU driver, generic over cell models; loaded from Python with ctypes
 * (cardiosim/reaction/ode/native.py).
 *
 * Build (native.py does it, into a cache directory):
 *   gcc -O2 -std=c99 -shared -fPIC -I kernels -DMODEL_HEADER='"bondarenko.h"' -DMODEL_RHS=bondarenko_rhs
 *       -DMODEL_N_STATES=BONDARENKO_N_STATES -DMODEL_N_PARAMS=BONDARENKO_N_PARAMS cpu_driver.c -o X.so -lm
 * -DMODEL_STEP_RL=tt06_rush_larsen replaces each Forward-Euler substep by the model's Rush-Larsen step (or any other
 * step of the model with that signature: a generated model's <name>_grl1).
 * Any model header following the conventions of kernels/bondarenko.h (CS_FN, CS_PARAM, CS_PARAM_ARG; a function
 * <name>_rhs(y, dydt, i_stim, p); <NAME>_N_STATES, <NAME>_N_PARAMS) plugs in the same way.
 *
 * Layout: y is a structure of arrays, y[s*n_cells + c] = state s of cell c (the same as the NumPy y[s, c]).
 * Stimulus: n_protocols pulse trains, proto[4*p .. 4*p+3] = start, duration, period, count (ms, ms, ms, count;
 * count 0 = unlimited, period 0 = one pulse), and amp[p*n_cells + c] the current of protocol p at cell c (pA/pF,
 * negative depolarises). The timing rule is cardiosim.cells.stimulus.Protocol.active, literally.
 */
#include <math.h>
#include <stddef.h>

#define CS_FN static inline
#define CS_PARAM(i) (p[i])
#define CS_PARAM_ARG , const double *p

#ifdef CS_CELL_PARAMS
/* A population's per-cell parameters (-DCS_CELL_PARAMS, with the header of cardiosim.cells.cellml.per_cell_header,
 * the one the GPU compiles too): the header reads slot j of its cell as CS_CELL_PARAM(j); cs_advance is called with
 * p_all = a (n_slots, n_cells) array and p_stride = 1, so a cell's p points at its column, and
 * cs_set_cell_pitch(n_cells) has said how far apart the slots are. */
static long cs_cell_pitch;
void cs_set_cell_pitch(long n) { cs_cell_pitch = n; }
#define CS_CELL_PARAM(j) (p[(size_t)(j) * (size_t)cs_cell_pitch])
#endif

#ifndef MODEL_HEADER
#error "define MODEL_HEADER, MODEL_RHS, MODEL_N_STATES and MODEL_N_PARAMS"
#endif
#include MODEL_HEADER

#define NS MODEL_N_STATES

int cs_n_states(void) { return MODEL_N_STATES; }
int cs_n_params(void) { return MODEL_N_PARAMS; }

/* cardiosim.cells.stimulus.Protocol.active(t), operation for operation. */
static int protocol_active(const double *pr, double t)
{
    const double start = pr[0], duration = pr[1], period = pr[2], count = pr[3];
    if (t < start)
        return 0;
    const double n = period > 0.0 ? floor((t - start) / period) : 0.0;
    if (count != 0.0 && n >= count)
        return 0;
    return (t - start) - n * period < duration;
}

/* After a substep: the largest dV/dt so far and its time; whether the cell's states are all finite still (one
 * sum: a NaN or inf anywhere makes it non-finite). The states are summed in order, as the GPU kernel does. */
static int substep_ok(const double *ys, double dvdt, double t, double *dmax, double *tmax)
{
    double sum = 0.0;
    for (int s = 0; s < NS; ++s)
        sum += ys[s];
    if (dvdt > *dmax) {
        *dmax = dvdt;
        *tmax = t;
    }
    return isfinite(sum);
}

/* One right-hand side, for testing the C against the NumPy reference: y, dydt are NS-element arrays. */
void cs_rhs(const double *y, double *dydt, double i_stim, const double *p)
{
    MODEL_RHS(y, dydt, i_stim, p);
}

/* k Forward-Euler substeps of dt ms from t0 for every cell, in place: y <- y + dt*f(t0 + s*dt, y), s = 0..k-1.
 *
 * Checks: after every substep, that the cell's states are finite (one sum per substep: a NaN or inf anywhere
 * makes it non-finite); after the last substep, that each state lies in [lower[s], upper[s]] (lower/upper may be
 * NULL: no range check). On the first failure the cell is stored back as it is, *bad_cell, *bad_state and *bad_t
 * (the time the bad value belongs to, ms) are set, and the function returns 1 (non-finite) or 2 (out of range);
 * cells after it are not advanced. Returns 0 on success.
 *
 * p_all, p_stride: the parameter vector(s): cell c reads p_all[c*p_stride ...] (p_stride 0: all cells the same).
 * dvdt_max, t_dvdt_max (n_cells each, may be NULL): on return the largest dV/dt (mV/ms) seen at the substeps of
 * this call and the time it was evaluated at; for upstroke velocities at the resolution of dt.
 */
int cs_advance(double *y, long n_cells, double t0, double dt, int k, int n_protocols, const double *proto,
               const double *amp, const double *p_all, long p_stride, const double *lower, const double *upper,
               long *bad_cell, int *bad_state, double *bad_t, double *dvdt_max, double *t_dvdt_max)
{
    for (long c = 0; c < n_cells; ++c) {
        /* p_stride 0: one parameter vector for every cell; else cell c's own at p_all + c*p_stride (a population) */
        const double *p = p_all + (size_t)c * (size_t)p_stride;
        double ys[NS], f[NS];
        for (int s = 0; s < NS; ++s)
            ys[s] = y[(size_t)s * n_cells + c];
        double dmax = -INFINITY, tmax = t0;
        int status = 0, which = -1;
        double tbad = t0;
        for (int j = 0; j < k; ++j) {
            const double t = t0 + j * dt;
            double i_stim = 0.0;
            for (int q = 0; q < n_protocols; ++q)
                if (protocol_active(proto + 4 * q, t))
                    i_stim += amp[(size_t)q * n_cells + c];
#ifdef MODEL_STEP_RL
            /* the model's Rush-Larsen step: gates exactly for frozen V, the rest by Forward Euler */
            const double v_old = ys[0];
            MODEL_STEP_RL(ys, dt, i_stim, p);
            (void)f;
            const double dvdt = (ys[0] - v_old) / dt;
#else
            MODEL_RHS(ys, f, i_stim, p);
            const double dvdt = f[0];
            for (int s = 0; s < NS; ++s)
                ys[s] += dt * f[s];
#endif
            if (!substep_ok(ys, dvdt, t, &dmax, &tmax)) {
                status = 1;
                tbad = t0 + (j + 1) * dt;
                break;
            }
        }
        if (status == 0 && lower && upper) {
            for (int s = 0; s < NS; ++s)
                if (!(ys[s] >= lower[s] && ys[s] <= upper[s])) {
                    status = 2;
                    which = s;
                    tbad = t0 + k * dt;
                    break;
                }
        }
        if (status == 1)
            for (int s = 0; s < NS; ++s)
                if (!isfinite(ys[s])) {
                    which = s;
                    break;
                }
        for (int s = 0; s < NS; ++s)
            y[(size_t)s * n_cells + c] = ys[s];
        if (dvdt_max) {
            dvdt_max[c] = dmax;
            t_dvdt_max[c] = tmax;
        }
        if (status) {
            *bad_cell = c;
            *bad_state = which < 0 ? 0 : which;
            *bad_t = tbad;
            return status;
        }
    }
    return 0;
}

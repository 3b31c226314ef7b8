/* Fused Forward-Euler kernel for any cell model with a C right-hand side in kernels/<model>.h (docs/dev/design.md §5).
 *
 * One thread per cell; the cell's state is loaded once into a local array (registers: every index is a compile-time
 * constant after unrolling), advanced k substeps, and written straight back: one global read and one global write
 * per state per launch, whatever k. Double precision throughout.
 *
 * Compile-time selection of the model (cardiosim/reaction/ode/cuda_backend.py passes these):
 *   -DCS_MODEL=bondarenko     kernels/bondarenko.h, bondarenko_rhs
 *   -DCS_MODEL_UP=BONDARENKO  BONDARENKO_N_STATES / BONDARENKO_N_PARAMS, checked against the two below
 *   -DCS_N_STATES=41 -DCS_N_PARAMS=96   sizes as numbers (the parameter array is declared before the header)
 *   -DCS_MAX_PROTOCOLS=16     optional: room for pulse trains in constant memory
 *   -DCS_AUX=0|1, -DCS_PARAMS_INITIALISED=0|1   the seed's kernel variants
 *                             (cardiosim/reaction/ode/kernel_variants.py, which also swaps the model header for its
 *                             one-local-per-intermediate form where asked)
 *   -DCS_CELL_PARAMS=1        a population (cardiosim/single_cell/population.py): the header is a generated model's
 *                             per-cell form (cardiosim.cells.cellml.per_cell_header), reading slot j of its cell as
 *                             CS_CELL_PARAM(j) from cell_params[j*c_cell_pitch + c], the kernel's last argument;
 *                             every other parameter is a literal in the header. kernels/cpu_driver.c compiles the
 *                             same header as C with the same macro: the host twin.
 *
 * Constant memory, uploaded by the host (module.get_global + memcpy_htod): c_params (model.parameter_vector(),
 * once per context), c_lower/c_upper (admissible ranges, once), c_proto (start, duration, period, count per
 * protocol; when the protocols change).
 *
 * Layout: y[s*pitch + c] = state s of cell c; pitch in elements (a pitched allocation, one row per state).
 * Stimulus: amp[p*n_cells + c] in pA/pF (negative depolarises); the timing rule is
 * cardiosim.cells.stimulus.Protocol.active (= protocol_active in kernels/cpu_driver.c), operation for operation, with
 * the time t0 + j*dt and the products in the rule rounded explicitly (__dmul_rn/__dadd_rn) so that FMA contraction
 * cannot move a pulse edge by a substep.
 *
 * Errors: after every substep the sum of the cell's states must be finite; after the last substep (check_range != 0)
 * every state must lie in [c_lower, c_upper]. A bad cell stops where it is and is stored back as it is; the first
 * thread to claim bad[0] (atomicCAS 0 -> status, 1 = non-finite, 2 = out of range) writes bad[1] = cell,
 * bad[2] = state, bad[3] = substep count j (the bad value belongs to t0 + j*dt). Unlike the CPU driver, the other
 * cells are still advanced (threads do not wait for each other).
 */

#define CS_STR2(x) #x
#define CS_STR(x) CS_STR2(x)
#define CS_CAT2(a, b) a##b
#define CS_CAT(a, b) CS_CAT2(a, b)

#if !defined(CS_MODEL) || !defined(CS_MODEL_UP) || !defined(CS_N_STATES) || !defined(CS_N_PARAMS)
#error "define CS_MODEL, CS_MODEL_UP, CS_N_STATES and CS_N_PARAMS (cardiosim/reaction/ode/cuda_backend.py does)"
#endif
#ifndef CS_MAX_PROTOCOLS
#define CS_MAX_PROTOCOLS 16
#endif

#ifndef CS_AUX
#define CS_AUX 0
#endif
#ifndef CS_PARAMS_INITIALISED
#define CS_PARAMS_INITIALISED 0
#endif
#ifndef CS_RUSH_LARSEN
#define CS_RUSH_LARSEN 0 /* 1: <model><CS_STEP>(y, dt, i_stim) does each substep instead of Forward Euler */
#endif
#ifndef CS_STEP
#define CS_STEP _rush_larsen /* or _grl1 (a generated model's GRL1 step) */
#endif

__constant__ double c_lower[CS_N_STATES];
__constant__ double c_upper[CS_N_STATES];
__constant__ double c_proto[4 * CS_MAX_PROTOCOLS];

#ifndef CS_CELL_PARAMS
#define CS_CELL_PARAMS 0
#endif

#if CS_CELL_PARAMS
/* Per-cell parameters: the header's entry points take the cell's column of cell_params as their p (the host's
 * convention), and its kept parameters are CS_CELL_PARAM(j); no parameter is left in constant memory. */
__constant__ long long c_cell_pitch;
#define CS_PARAM(i) (p[i])
#define CS_PARAM_ARG , const double *p
#define CS_CELL_PARAM(j) (p[(long long)(j) * c_cell_pitch])
#define CS_CELL_ARG , cell_params + c
#elif CS_PARAMS_INITIALISED
/* The seed's original form: one initialised __constant__ double c_<index name> per parameter, generated from the
 * parameter vector and prepended to this file (constant_declarations in cardiosim/reaction/ode/kernel_variants.py). */
#define CS_PARAM(i) (c_##i)
#else
__constant__ double c_params[CS_N_PARAMS];
#define CS_PARAM(i) (c_params[i])
#endif

#if CS_AUX
/* The seed's auxiliary derivative vector: row s of a global array pitched like the state. Volatile, so that every
 * derivative is stored and loaded again as the seed's kernel did (the compiler would otherwise forward the stores). */
struct cs_aux_row {
    volatile double *p;
    long long pitch;
    __device__ __forceinline__ volatile double &operator[](int s) const { return p[(long long)s * pitch]; }
};
#define CS_DERIV_T cs_aux_row
#endif

#define CS_FN __device__ __forceinline__
#if !CS_CELL_PARAMS
#define CS_PARAM_ARG
#define CS_CELL_ARG
#endif
#include CS_STR(CS_MODEL.h)

#define CS_RHS CS_CAT(CS_MODEL, _rhs)
static_assert(CS_N_STATES == CS_CAT(CS_MODEL_UP, _N_STATES), "CS_N_STATES does not match the model header");
static_assert(CS_N_PARAMS == CS_CAT(CS_MODEL_UP, _N_PARAMS), "CS_N_PARAMS does not match the model header");

#define NS CS_N_STATES

/* cardiosim.cells.stimulus.Protocol.active(t), operation for operation (see protocol_active in cpu_driver.c). */
__device__ __forceinline__ bool cs_active(int q, double t)
{
    const double start = c_proto[4 * q], duration = c_proto[4 * q + 1];
    const double period = c_proto[4 * q + 2], count = c_proto[4 * q + 3];
    if (t < start)
        return false;
    const double n = period > 0.0 ? floor((t - start) / period) : 0.0;
    if (count != 0.0 && n >= count)
        return false;
    return __dsub_rn(t - start, __dmul_rn(n, period)) < duration;
}

/* k Forward-Euler substeps of dt ms from t0 for every cell, in place: y <- y + dt*f(t0 + j*dt, y), j = 0..k-1
 * (or k Rush-Larsen steps, CS_RUSH_LARSEN). dvdt_max / t_dvdt_max (n_cells each) may be null: else the largest
 * dV/dt over the substeps and its time.
 * aux: the auxiliary derivative array (pitched like y) of the CS_AUX variants; unused otherwise (may be null).
 * cell_params (CS_CELL_PARAMS only): the population's per-cell parameters, slot j of cell c at j*c_cell_pitch + c. */
extern "C" __global__ void cs_fused_euler(double *__restrict__ y, long long pitch, int n_cells, double t0, double dt,
                                          int k, int n_protocols, const double *__restrict__ amp, int check_range,
                                          int *bad, double *__restrict__ dvdt_max, double *__restrict__ t_dvdt_max,
                                          double *aux
#if CS_CELL_PARAMS
                                          , const double *__restrict__ cell_params
#endif
                                          )
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n_cells)
        return;

    double ys[NS];
#if CS_AUX
    const cs_aux_row f = {aux + c, pitch};
#elif !CS_RUSH_LARSEN
    double f[NS];
#endif
    (void)aux;
#pragma unroll
    for (int s = 0; s < NS; ++s)
        ys[s] = y[(long long)s * pitch + c];

    double dmax = -INFINITY, tmax = t0;
    int status = 0, which = -1, jbad = 0;
    for (int j = 0; j < k; ++j) {
        const double t = __dadd_rn(t0, __dmul_rn((double)j, dt));
        double i_stim = 0.0;
        for (int q = 0; q < n_protocols; ++q)
            if (cs_active(q, t))
                i_stim += amp[(long long)q * n_cells + c];
#if CS_RUSH_LARSEN
        /* the model's own step: gates exactly for frozen V, the rest by Forward Euler (kernels/<model>.h) */
        const double v_old = ys[0];
        CS_CAT(CS_MODEL, CS_STEP)(ys, dt, i_stim CS_CELL_ARG);
        const double dvdt = (ys[0] - v_old) / dt;
        double sum = 0.0;
#pragma unroll
        for (int s = 0; s < NS; ++s)
            sum += ys[s];
#else
        CS_RHS(ys, f, i_stim CS_CELL_ARG);
        const double dvdt = f[0];
        double sum = 0.0;
#pragma unroll
        for (int s = 0; s < NS; ++s) {
            ys[s] += dt * f[s];
            sum += ys[s];
        }
#endif
        if (dvdt > dmax) {
            dmax = dvdt;
            tmax = t;
        }
        if (!isfinite(sum)) {
            status = 1;
            jbad = j + 1;
            break;
        }
    }
    if (status == 0 && check_range) {
#pragma unroll
        for (int s = 0; s < NS; ++s)
            if (which < 0 && !(ys[s] >= c_lower[s] && ys[s] <= c_upper[s]))
                which = s;
        if (which >= 0) {
            status = 2;
            jbad = k;
        }
    }
    if (status == 1) {
#pragma unroll
        for (int s = 0; s < NS; ++s)
            if (which < 0 && !isfinite(ys[s]))
                which = s;
    }

#pragma unroll
    for (int s = 0; s < NS; ++s)
        y[(long long)s * pitch + c] = ys[s];
    if (dvdt_max) {
        dvdt_max[c] = dmax;
        t_dvdt_max[c] = tmax;
    }
    if (status && atomicCAS(bad, 0, status) == 0) {
        bad[1] = c;
        bad[2] = which < 0 ? 0 : which;
        bad[3] = jbad;
    }
}

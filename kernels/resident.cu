/* Per-step analysis on the device for the resident placement (cardiosim/reaction/ode/resident.py).
 *
 * cs_maps: the activation-time and APD maps of cardiosim/analysis/maps.py (ActivationMap.update, then APDMap.update),
 * operation for operation; compiled with --fmad=false so that the interpolated times are the same bits as NumPy's.
 * cs_probe_gather: out[j] = v[idx[j]], the probe samples of one field at one step, into the device sample buffer;
 * also Vm of the tissue nodes of a masked grid into the cells' state row.
 * cs_scatter_at: v[idx[j]] = in[j], the cells' Vm back to the tissue nodes.
 * cs_ecg_partial: out[e] = sum_i w[e][i] s[i], this rank's share of each pseudo-ECG electrode
 * (cardiosim/analysis/ecg.py), one block per electrode, summed in a fixed order (the same bits every run); the ranks'
 * shares are added on the host when the samples are flushed.
 */

extern "C" __global__ void cs_maps(const double *__restrict__ v, int n, double t0, double t1, double threshold,
                                   double level_fraction, double *act_time, double *act_prev, const double *v_rest,
                                   double *v_peak, double *repol, double *apd_prev)
{
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= n)
        return;
    const double vc = v[c];
    /* ActivationMap.update: the first upward crossing of the threshold, interpolated within the step */
    const double pa = act_prev[c];
    double at = act_time[c];
    if (isnan(at) && pa < threshold && vc >= threshold) {
        const double frac = (threshold - pa) / (vc - pa);
        at = t0 + frac * (t1 - t0);
        act_time[c] = at;
    }
    act_prev[c] = vc;
    /* APDMap.update: V_peak since activation; the first fall below the level after it */
    double r = repol[c];
    const bool beating = !isnan(at) && isnan(r);
    double vp = v_peak[c];
    if (beating && vc > vp)
        vp = vc;
    v_peak[c] = vp;
    const double vr = v_rest[c];
    const double level = vr + level_fraction * (vp - vr);
    const double pp = apd_prev[c];
    if (beating && pp >= level && vc < level) {
        const double frac = (level - pp) / (vc - pp);
        repol[c] = t0 + frac * (t1 - t0);
    }
    apd_prev[c] = vc;
}

extern "C" __global__ void cs_probe_gather(const double *__restrict__ v, const long long *__restrict__ idx, int m,
                                           double *__restrict__ out)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < m)
        out[j] = v[idx[j]];
}

extern "C" __global__ void cs_scatter_at(const double *__restrict__ in, const long long *__restrict__ idx, int m,
                                         double *__restrict__ v)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < m)
        v[idx[j]] = in[j];
}

#define ECG_BLOCK 256
extern "C" __global__ void cs_ecg_partial(const double *__restrict__ s, const double *__restrict__ w, int n,
                                          double *__restrict__ out)
{
    __shared__ double part[ECG_BLOCK];
    const double *we = w + (long long)blockIdx.x * n;
    double acc = 0.0;
    for (int i = threadIdx.x; i < n; i += ECG_BLOCK)
        acc += we[i] * s[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int half = ECG_BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[blockIdx.x] = part[0];
}

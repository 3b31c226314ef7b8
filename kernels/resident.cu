/* Per-step analysis on the device for the resident placement (cardiosim/ode/resident.py).
 *
 * cs_maps: the activation-time and APD maps of cardiosim/analysis.py (ActivationMap.update, then APDMap.update),
 * operation for operation; compiled with --fmad=false so that the interpolated times are the same bits as NumPy's.
 * cs_probe_gather: out[j] = v[idx[j]], the probe samples of one field at one step, into the device sample buffer.
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

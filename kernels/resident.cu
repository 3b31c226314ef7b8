/* Per-step analysis on the device for the resident placement (cardiosim/reaction/ode/resident.py).
 *
 * cs_maps: the activation-time and APD maps of cardiosim/analysis/maps.py (ActivationMap.update, then APDMap.update),
 * operation for operation; compiled with --fmad=false so that the interpolated times are the same bits as NumPy's.
 * cs_probe_gather: out[j] = v[idx[j]], the probe samples of one field at one step, into the device sample buffer;
 * also Vm of the tissue nodes of a masked grid into the cells' state row.
 * cs_scatter_at: v[idx[j]] = in[j], the cells' Vm back to the tissue nodes.
 * cs_ecg_partial, cs_ecg_finish: out[e] = sum_i w[e][i] s[i], this rank's share of each pseudo-ECG electrode
 * (cardiosim/analysis/ecg.py), in two stages: gridDim.x blocks per electrode each sum a strided part of the nodes
 * into partial[e][b], then one block per electrode sums its partials. The order of every sum is fixed by n and the
 * grid (the same bits every run); the ranks' shares are added on the host when the samples are flushed. One block
 * per electrode, as before, kept 9 of an H200's 132 multiprocessors busy, each thread walking n/256 nodes one load
 * after another: about 1 ms a step for the BiV's 1.7 million nodes and 12 leads.
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
/* The block's sum of acc (every thread's), in thread 0; a fixed tree. */
__device__ double cs_block_sum(double acc)
{
    __shared__ double part[ECG_BLOCK];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int half = ECG_BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            part[threadIdx.x] += part[threadIdx.x + half];
        __syncthreads();
    }
    return part[0];
}

/* Block (b, e): the nodes b*ECG_BLOCK + threadIdx.x + j*gridDim.x*ECG_BLOCK of electrode e (blockIdx.y), into
 * partial[e * gridDim.x + b]. */
extern "C" __global__ void cs_ecg_partial(const double *__restrict__ s, const double *__restrict__ w, int n,
                                          double *__restrict__ partial)
{
    const double *we = w + (long long)blockIdx.y * n;
    const long long stride = (long long)gridDim.x * ECG_BLOCK;
    double acc = 0.0;
    for (long long i = (long long)blockIdx.x * ECG_BLOCK + threadIdx.x; i < n; i += stride)
        acc += we[i] * s[i];
    acc = cs_block_sum(acc);
    if (threadIdx.x == 0)
        partial[(long long)blockIdx.y * gridDim.x + blockIdx.x] = acc;
}

/* Block e: out[e] = the sum of electrode e's m partials. */
extern "C" __global__ void cs_ecg_finish(const double *__restrict__ partial, int m, double *__restrict__ out)
{
    const double *pe = partial + (long long)blockIdx.x * m;
    double acc = 0.0;
    for (int i = threadIdx.x; i < m; i += ECG_BLOCK)
        acc += pe[i];
    acc = cs_block_sum(acc);
    if (threadIdx.x == 0)
        out[blockIdx.x] = acc;
}

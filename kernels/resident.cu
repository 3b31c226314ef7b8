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

/* The Purkinje-myocardial junctions' backward-Euler step on the device (cardiosim/purkinje/device.py; the same
 * step as cardiosim/purkinje/coupling.py's on the host): per junction j, with its tissue nodes k (CSR rows of W and
 * G1, column indices into the tissue Vec) and its terminal term[j] in the network's Vm row vp,
 *   cs_pmj_rhs:     vbar[j] = sum_k W[j,k] vm[k];  rhs[j] = cp[j] vp[term[j]] + sum_k G1[j,k] vm[k]
 *   cs_pmj_solve:   vp'[term[j]] = newp[j] = sum_i Sinv[j,i] rhs[i]        (the Schur complement's inverse, dense)
 *   cs_pmj_tissue:  vm'[k] = a[k] vm[k] + sum_j G2[k,j] newp[j]           (one thread per tissue node)
 *   cs_pmj_current: current[j] = (newp[j] - sum_k W[j,k] vm'[k]) / R[j]
 * launched one after another on one stream. */
extern "C" __global__ void cs_pmj_rhs(int p, const int *__restrict__ ptr, const long long *__restrict__ col,
                                      const double *__restrict__ w, const double *__restrict__ g1,
                                      const double *__restrict__ cp, const long long *__restrict__ term,
                                      const double *__restrict__ vp, const double *__restrict__ vm,
                                      double *__restrict__ rhs, double *__restrict__ vbar)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= p)
        return;
    double sw = 0.0, sg = 0.0;
    for (int e = ptr[j]; e < ptr[j + 1]; ++e) {
        const double v = vm[col[e]];
        sw += w[e] * v;
        sg += g1[e] * v;
    }
    vbar[j] = sw;
    rhs[j] = cp[j] * vp[term[j]] + sg;
}

extern "C" __global__ void cs_pmj_solve(int p, const double *__restrict__ sinv, const double *__restrict__ rhs,
                                        double *__restrict__ newp, const long long *__restrict__ term,
                                        double *__restrict__ vp)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= p)
        return;
    const double *row = sinv + (size_t)j * p;
    double s = 0.0;
    for (int i = 0; i < p; ++i)
        s += row[i] * rhs[i];
    newp[j] = s;
    vp[term[j]] = s;
}

extern "C" __global__ void cs_pmj_tissue(int q, const int *__restrict__ ptr, const int *__restrict__ col,
                                         const double *__restrict__ g2, const double *__restrict__ a,
                                         const long long *__restrict__ node, const double *__restrict__ newp,
                                         double *__restrict__ vm)
{
    const int k = blockIdx.x * blockDim.x + threadIdx.x;
    if (k >= q)
        return;
    double s = 0.0;
    for (int e = ptr[k]; e < ptr[k + 1]; ++e)
        s += g2[e] * newp[col[e]];
    vm[node[k]] = a[k] * vm[node[k]] + s;
}

extern "C" __global__ void cs_pmj_current(int p, const int *__restrict__ ptr, const long long *__restrict__ col,
                                          const double *__restrict__ w, const double *__restrict__ r,
                                          const double *__restrict__ newp, const double *__restrict__ vm,
                                          double *__restrict__ current)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= p)
        return;
    double s = 0.0;
    for (int e = ptr[j]; e < ptr[j + 1]; ++e)
        s += w[e] * vm[col[e]];
    current[j] = (newp[j] - s) / r[j];
}

/* A geometric multigrid V-cycle for a matrix on a structured grid (cardiosim.multigrid), one source, two builds:
 *
 *   g++ -x c++ -O2 -shared -fPIC                          every loop runs on the host (CI; the GPU build's reference)
 *   nvcc -x cu --extended-lambda -shared -cudart shared   every loop is a kernel on the legacy default stream, the
 *                                                         stream PETSc's CUDA vectors use: a call needs no
 *                                                         synchronisation with PETSc's own operations
 *
 * Why our own and not PETSc's PCMG on the GPU: PCMG's V-cycle is ~280 PETSc operations per CG iteration on a
 * 10-level hierarchy, each ~15 µs of host latency on an H100 (docs/benchmarks.md): latency, not bandwidth, set the
 * elliptic solve's cost. Here a V-cycle is a few dozen kernel launches issued from C.
 *
 * Each level holds its operator as stencil coefficients S[s*size + node], s over the 3^d neighbours
 * (s = (di+1) + 3(dj+1) + 9(dk+1)), zero where a neighbour is outside the grid; the host computes them once (the
 * coarse ones as Galerkin products PᵀAP). Smoother: multicolour SOR with 2^d colours by index parity, so no two
 * neighbours share a colour and each colour is one parallel loop: the CPU and GPU builds do the same arithmetic.
 * A forward sweep before and a backward sweep after the coarse correction, with R = Pᵀ and an exact (pseudo-)inverse
 * on the coarsest level, make the V-cycle a symmetric operator: a valid preconditioner for CG. The coarsest level is
 * a dense matrix (that inverse) times a vector.
 *
 * Grid index of node (i, j, k): i + nx (j + ny k); 2D grids have nz = 1.
 */
#include <stdlib.h>
#include <string.h>

#define MAX_LEVELS 32

#ifdef __CUDACC__
#include <cuda_runtime.h>
#define LOOP [=] __host__ __device__
template <class F> __global__ void each_kernel(long n, F f) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) f(i);
}
template <class F> void each(long n, F f) {
    if (n > 0) each_kernel<<<(unsigned)((n + 255) / 256), 256>>>(n, f);
}
static void *mem_alloc(size_t bytes) { void *p = 0; return cudaMalloc(&p, bytes) == cudaSuccess ? p : 0; }
static void mem_free(void *p) { if (p) cudaFree(p); }
static int mem_put(void *dst, const void *src, size_t bytes) {
    return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess;
}
static void mem_zero(double *p, long n) { cudaMemsetAsync(p, 0, n * sizeof(double), 0); }
static int launch_error(void) { return cudaGetLastError() != cudaSuccess; }

/* y = G x for the dense coarsest-level matrix: one warp per row (coalesced reads of G's rows). */
__global__ void gemv_kernel(long n, const double *G, const double *x, double *y) {
    long row = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (row >= n) return;
    double acc = 0.0;
    for (long c = lane; c < n; c += 32) acc += G[row * n + c] * x[c];
    for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[row] = acc;
}
static void gemv(long n, const double *G, const double *x, double *y) {
    gemv_kernel<<<(unsigned)((n * 32 + 255) / 256), 256>>>(n, G, x, y);
}
/* Phase timers for smg_apply_timed (a profile; smg_apply itself never synchronises). */
struct Clock {
    cudaEvent_t ev[4 * MAX_LEVELS + 2];
    int n = 0;
    Clock() { for (auto &e : ev) cudaEventCreate(&e); }
    ~Clock() { for (auto &e : ev) cudaEventDestroy(e); }
    void mark() { cudaEventRecord(ev[n++], 0); }
    double ms(int a, int b) { float t = 0; cudaEventElapsedTime(&t, ev[a], ev[b]); return t; }
    void finish() { cudaEventSynchronize(ev[n - 1]); }
};
#else
#include <chrono>
struct Clock {
    std::chrono::steady_clock::time_point ev[4 * MAX_LEVELS + 2];
    int n = 0;
    void mark() { ev[n++] = std::chrono::steady_clock::now(); }
    double ms(int a, int b) { return std::chrono::duration<double, std::milli>(ev[b] - ev[a]).count(); }
    void finish() {}
};
#define LOOP [=]
template <class F> void each(long n, F f) {
    for (long i = 0; i < n; ++i) f(i);
}
static void *mem_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }
static void mem_free(void *p) { free(p); }
static int mem_put(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); return 0; }
static void mem_zero(double *p, long n) { memset(p, 0, n * sizeof(double)); }
static int launch_error(void) { return 0; }
static void gemv(long n, const double *G, const double *x, double *y) {
    for (long r = 0; r < n; ++r) {
        double acc = 0.0;
        for (long c = 0; c < n; ++c) acc += G[r * n + c] * x[c];
        y[r] = acc;
    }
}
#endif

/* One dimension of the transfer from a level to the next coarser one (1D linear interpolation P).
 * Prolongation, per fine index i:  x_f[i] += w0[i] x_c[c0[i]] + w1[i] x_c[c1[i]].
 * Restriction (Pᵀ), per coarse index c: r_c[c] = r_f[pos[c]] + wl[c] r_f[pos[c]-1] + wr[c] r_f[pos[c]+1]
 * (a weight is zero where that fine node is absent or is itself a coarse node). */
struct Dim {
    int *c0, *c1, *pos;
    double *w0, *w1, *wl, *wr;
};

struct Level {
    int n[3];
    long size;
    int ns;                 /* 9 (2D) or 27 (3D) stencil points */
    double *S, *x, *b, *r;  /* level 0's x and b are the caller's vectors */
    Dim t[3];               /* transfer to the next coarser level (not on the coarsest) */
};

struct MG {
    int dim, nlev, nu;
    double omega;
    Level lev[MAX_LEVELS];
    double *G;              /* the coarsest level's dense (pseudo-)inverse, row-major */
    int err;
};

static double *alloc_doubles(MG *mg, long n) {
    double *p = (double *)mem_alloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!p) mg->err = 1;
    return p;
}

template <class T> static T *upload(MG *mg, const T *src, long n) {
    T *p = (T *)mem_alloc((size_t)(n > 0 ? n : 1) * sizeof(T));
    if (!p || mem_put(p, src, (size_t)n * sizeof(T))) mg->err = 1;
    return p;
}

namespace smg {  /* named (not static): nvcc's extended lambdas need enclosing functions with an address */

/* One multicolour SOR pass over the nodes of one colour (bit d of `colour`: parity of the index in dimension d). */
void sweep_colour(const Level &L, int colour, double omega) {
    const int nx = L.n[0], ny = L.n[1], nz = L.n[2], ns = L.ns;
    const int cx = colour & 1, cy = (colour >> 1) & 1, cz = (colour >> 2) & 1;
    const int hx = (nx - cx + 1) / 2, hy = (ny - cy + 1) / 2, hz = (nz - cz + 1) / 2;
    if (hx <= 0 || hy <= 0 || hz <= 0) return;
    const long N = L.size;
    const double *S = L.S, *b = L.b;
    double *x = L.x;
    each((long)hx * hy * hz, LOOP(long t) {
        const int i = 2 * (int)(t % hx) + cx;
        const long q = t / hx;
        const int j = 2 * (int)(q % hy) + cy, k = 2 * (int)(q / hy) + cz;
        const long r = i + (long)nx * (j + (long)ny * k);
        double acc = b[r], diag = 1.0;
        for (int s = 0; s < ns; ++s) {
            const int di = s % 3 - 1, dj = (s / 3) % 3 - 1, dk = ns == 27 ? s / 9 - 1 : 0;
            const double a = S[s * N + r];
            if (di == 0 && dj == 0 && dk == 0) { diag = a; continue; }
            const int ii = i + di, jj = j + dj, kk = k + dk;
            if (ii < 0 || ii >= nx || jj < 0 || jj >= ny || kk < 0 || kk >= nz) continue;
            acc -= a * x[ii + (long)nx * (jj + (long)ny * kk)];
        }
        x[r] += omega * (acc / diag - x[r]);
    });
}

void residual(const Level &L) {
    const int nx = L.n[0], ny = L.n[1], nz = L.n[2], ns = L.ns;
    const long N = L.size;
    const double *S = L.S, *b = L.b, *x = L.x;
    double *res = L.r;
    each(N, LOOP(long r) {
        const int i = (int)(r % nx);
        const long q = r / nx;
        const int j = (int)(q % ny), k = (int)(q / ny);
        double acc = b[r];
        for (int s = 0; s < ns; ++s) {
            const int di = s % 3 - 1, dj = (s / 3) % 3 - 1, dk = ns == 27 ? s / 9 - 1 : 0;
            const int ii = i + di, jj = j + dj, kk = k + dk;
            if (ii < 0 || ii >= nx || jj < 0 || jj >= ny || kk < 0 || kk >= nz) continue;
            acc -= S[s * N + r] * x[ii + (long)nx * (jj + (long)ny * kk)];
        }
        res[r] = acc;
    });
}

/* b_coarse = Pᵀ r_fine */
void restrict_residual(const Level &F, const Level &C) {
    const int fx = F.n[0], fy = F.n[1], mx = C.n[0], my = C.n[1];
    const Dim X = F.t[0], Y = F.t[1], Z = F.t[2];
    const double *r = F.r;
    double *bc = C.b;
    each(C.size, LOOP(long rc) {
        const int I = (int)(rc % mx);
        const long q = rc / mx;
        const int J = (int)(q % my), K = (int)(q / my);
        double acc = 0.0;
        for (int a = -1; a <= 1; ++a) {
            const double wz = a == 0 ? 1.0 : (a < 0 ? Z.wl[K] : Z.wr[K]);
            if (wz == 0.0) continue;
            const long k = Z.pos[K] + a;
            for (int bb = -1; bb <= 1; ++bb) {
                const double wy = bb == 0 ? 1.0 : (bb < 0 ? Y.wl[J] : Y.wr[J]);
                if (wy == 0.0) continue;
                const long j = Y.pos[J] + bb;
                for (int c = -1; c <= 1; ++c) {
                    const double wx = c == 0 ? 1.0 : (c < 0 ? X.wl[I] : X.wr[I]);
                    if (wx == 0.0) continue;
                    acc += wz * wy * wx * r[(X.pos[I] + c) + fx * (j + fy * k)];
                }
            }
        }
        bc[rc] = acc;
    });
}

/* x_fine += P x_coarse */
void prolong_add(const Level &F, const Level &C) {
    const int fx = F.n[0], fy = F.n[1], mx = C.n[0], my = C.n[1];
    const Dim X = F.t[0], Y = F.t[1], Z = F.t[2];
    const double *xc = C.x;
    double *x = F.x;
    each(F.size, LOOP(long r) {
        const int i = (int)(r % fx);
        const long q = r / fx;
        const int j = (int)(q % fy), k = (int)(q / fy);
        double acc = 0.0;
        for (int a = 0; a < 2; ++a) {
            const double wz = a ? Z.w1[k] : Z.w0[k];
            if (wz == 0.0) continue;
            const long K = a ? Z.c1[k] : Z.c0[k];
            for (int bb = 0; bb < 2; ++bb) {
                const double wy = bb ? Y.w1[j] : Y.w0[j];
                if (wy == 0.0) continue;
                const long J = bb ? Y.c1[j] : Y.c0[j];
                for (int c = 0; c < 2; ++c) {
                    const double wx = c ? X.w1[i] : X.w0[i];
                    if (wx == 0.0) continue;
                    acc += wz * wy * wx * xc[(c ? X.c1[i] : X.c0[i]) + mx * (J + my * K)];
                }
            }
        }
        x[r] += acc;
    });
}

}  /* namespace smg */

using namespace smg;

extern "C" {

/* A hierarchy of `nlev` levels for a `dim`-dimensional grid; `nu` SOR sweeps before and after each coarse
 * correction with relaxation factor `omega` (0 < omega < 2). */
MG *smg_create(int dim, int nlev, double omega, int nu) {
    if (dim < 1 || dim > 3 || nlev < 1 || nlev > MAX_LEVELS) return 0;
    MG *mg = (MG *)calloc(1, sizeof(MG));
    if (!mg) return 0;
    mg->dim = dim;
    mg->nlev = nlev;
    mg->omega = omega;
    mg->nu = nu;
    return mg;
}

/* Level l: grid sizes n[3] (n[2] = 1 in 2D) and its stencil S (ns x size, host memory). */
int smg_level(MG *mg, int l, const int *n, const double *S) {
    Level &L = mg->lev[l];
    for (int d = 0; d < 3; ++d) L.n[d] = n[d];
    L.size = (long)n[0] * n[1] * n[2];
    L.ns = mg->dim == 3 ? 27 : 9;
    L.S = upload(mg, S, L.ns * L.size);
    L.r = alloc_doubles(mg, L.size);
    if (l > 0) {
        L.x = alloc_doubles(mg, L.size);
        L.b = alloc_doubles(mg, L.size);
    }
    return mg->err;
}

/* Dimension d of the transfer from level l to level l + 1: prolongation tables over the fine sizes (nf entries),
 * restriction tables over the coarse sizes (nc entries). */
int smg_transfer(MG *mg, int l, int d, int nf, int nc, const int *c0, const int *c1, const double *w0,
                 const double *w1, const int *pos, const double *wl, const double *wr) {
    Dim &D = mg->lev[l].t[d];
    D.c0 = upload(mg, c0, nf);
    D.c1 = upload(mg, c1, nf);
    D.w0 = upload(mg, w0, nf);
    D.w1 = upload(mg, w1, nf);
    D.pos = upload(mg, pos, nc);
    D.wl = upload(mg, wl, nc);
    D.wr = upload(mg, wr, nc);
    return mg->err;
}

/* The coarsest level's dense (pseudo-)inverse, row-major, host memory. */
int smg_coarse(MG *mg, const double *G) {
    const long n = mg->lev[mg->nlev - 1].size;
    mg->G = upload(mg, G, n * n);
    return mg->err;
}

/* x = M b, M the V-cycle (x is overwritten; b and x are device pointers in the GPU build). Asynchronous on the GPU:
 * the result is ordered before any later work on the default stream. Returns non-zero on a launch error. */
static int vcycle(MG *mg, const double *b, double *x, Clock *clock) {
    Level *L = mg->lev;
    const int top = mg->nlev - 1, colours = 1 << mg->dim;
    L[0].b = (double *)b;
    L[0].x = x;
    if (clock) clock->mark();
    for (int l = 0; l < top; ++l) {
        mem_zero(L[l].x, L[l].size);
        for (int it = 0; it < mg->nu; ++it)
            for (int c = 0; c < colours; ++c) sweep_colour(L[l], c, mg->omega);
        if (clock) clock->mark();
        residual(L[l]);
        restrict_residual(L[l], L[l + 1]);
        if (clock) clock->mark();
    }
    gemv(L[top].size, mg->G, L[top].b, L[top].x);
    if (clock) clock->mark();
    for (int l = top - 1; l >= 0; --l) {
        prolong_add(L[l], L[l + 1]);
        if (clock) clock->mark();
        for (int it = 0; it < mg->nu; ++it)
            for (int c = colours - 1; c >= 0; --c) sweep_colour(L[l], c, mg->omega);
        if (clock) clock->mark();
    }
    return launch_error();
}

int smg_apply(MG *mg, const double *b, double *x) { return vcycle(mg, b, x, 0); }

/* smg_apply with a profile: ms[4 l + p] for level l's phases p = pre-smoothing, residual and restriction,
 * prolongation, post-smoothing; ms[4 (nlev - 1)] the coarsest solve. Synchronises (GPU: events). */
int smg_apply_timed(MG *mg, const double *b, double *x, double *ms) {
    Clock clock;
    const int top = mg->nlev - 1;
    int err = vcycle(mg, b, x, &clock);
    clock.finish();
    int e = 0;
    for (int l = 0; l < top; ++l, e += 2) {
        ms[4 * l] = clock.ms(e, e + 1);
        ms[4 * l + 1] = clock.ms(e + 1, e + 2);
    }
    ms[4 * top] = clock.ms(e, e + 1);
    ++e;
    for (int l = top - 1; l >= 0; --l, e += 2) {
        ms[4 * l + 2] = clock.ms(e, e + 1);
        ms[4 * l + 3] = clock.ms(e + 1, e + 2);
    }
    return err;
}

void smg_destroy(MG *mg) {
    if (!mg) return;
    for (int l = 0; l < mg->nlev; ++l) {
        Level &L = mg->lev[l];
        mem_free(L.S);
        mem_free(L.r);
        if (l > 0) {
            mem_free(L.x);
            mem_free(L.b);
        }
        for (int d = 0; d < 3; ++d) {
            Dim &D = L.t[d];
            mem_free(D.c0); mem_free(D.c1); mem_free(D.w0); mem_free(D.w1);
            mem_free(D.pos); mem_free(D.wl); mem_free(D.wr);
        }
    }
    mem_free(mg->G);
    free(mg);
}

}  /* extern "C" */

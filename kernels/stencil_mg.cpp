/* A geometric multigrid V-cycle for a matrix on a structured grid (cardiosim.solvers.multigrid), one source, two builds:
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
#include <math.h>
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
/* Where launches go: the legacy default stream (ordered with PETSc's operations), or the stream a CUDA graph of
 * the V-cycle is being captured on. */
static cudaStream_t stream_now = 0;
static int block_size = 256;        /* threads per block of the parallel loops (smg_set_block: the launch-shape study) */
template <class F> void each(long n, F f) {
    if (n > 0) each_kernel<<<(unsigned)((n + block_size - 1) / block_size), block_size, 0, stream_now>>>(n, f);
}
static void *mem_alloc(size_t bytes) { void *p = 0; return cudaMalloc(&p, bytes) == cudaSuccess ? p : 0; }
static void mem_free(void *p) { if (p) cudaFree(p); }
static int mem_put(void *dst, const void *src, size_t bytes) {
    return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess;
}
static void mem_zero(double *p, long n) { cudaMemsetAsync(p, 0, n * sizeof(double), stream_now); }
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
    gemv_kernel<<<(unsigned)((n * 32 + 255) / 256), 256, 0, stream_now>>>(n, G, x, y);
}

/* Sums over nodes, deterministic (fixed grid, fixed order: the same bits every run, as restarts need): f(i, acc)
 * adds node i's terms to acc[0..2]; each block's sums go to `partial`, one block adds those into out[o0..o2]
 * (an index < 0: not wanted). Results stay on the device. */
#define RED_BLOCKS 264
template <class F> __global__ void reduce_kernel(long n, F f, double *partial) {
    __shared__ double sh[3][256];
    double acc[3] = {0.0, 0.0, 0.0};
    for (long i = (long)blockIdx.x * 256 + threadIdx.x; i < n; i += (long)gridDim.x * 256) f(i, acc);
    for (int k = 0; k < 3; ++k) sh[k][threadIdx.x] = acc[k];
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h)
            for (int k = 0; k < 3; ++k) sh[k][threadIdx.x] += sh[k][threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        for (int k = 0; k < 3; ++k) partial[k * gridDim.x + blockIdx.x] = sh[k][0];
}
__global__ void finish_kernel(int nb, const double *partial, double *out, int o0, int o1, int o2) {
    __shared__ double sh[3][256];
    for (int k = 0; k < 3; ++k) {
        double a = 0.0;
        for (int b = threadIdx.x; b < nb; b += 256) a += partial[k * nb + b];
        sh[k][threadIdx.x] = a;
    }
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h)
            for (int k = 0; k < 3; ++k) sh[k][threadIdx.x] += sh[k][threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        if (o0 >= 0) out[o0] = sh[0][0];
        if (o1 >= 0) out[o1] = sh[1][0];
        if (o2 >= 0) out[o2] = sh[2][0];
    }
}
template <class F> void reduce(long n, F f, double *partial, double *out, int o0, int o1, int o2) {
    reduce_kernel<<<RED_BLOCKS, 256, 0, stream_now>>>(n, f, partial);
    finish_kernel<<<1, 256, 0, stream_now>>>(RED_BLOCKS, partial, out, o0, o1, o2);
}
/* Scalars to the host: waits for the work before it (the one synchronisation per CG iteration). */
static int get_scalars(double *host, const double *dev, int n) {
    return cudaMemcpy(host, dev, n * sizeof(double), cudaMemcpyDeviceToHost) != cudaSuccess;
}
static void copy_vec(double *dst, const double *src, long n) {
    cudaMemcpyAsync(dst, src, n * sizeof(double), cudaMemcpyDeviceToDevice, stream_now);
}
#define RED_PARTIAL (3 * RED_BLOCKS)
#define HD __host__ __device__
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
template <class F> void reduce(long n, F f, double *, double *out, int o0, int o1, int o2) {
    double acc[3] = {0.0, 0.0, 0.0};
    for (long i = 0; i < n; ++i) f(i, acc);
    if (o0 >= 0) out[o0] = acc[0];
    if (o1 >= 0) out[o1] = acc[1];
    if (o2 >= 0) out[o2] = acc[2];
}
static int get_scalars(double *host, const double *dev, int n) { memcpy(host, dev, n * sizeof(double)); return 0; }
static void copy_vec(double *dst, const double *src, long n) { memcpy(dst, src, n * sizeof(double)); }
#define RED_PARTIAL 1
#define HD
#endif

/* One dimension of the transfer from a level to the next coarser one (1D linear interpolation P).
 * Prolongation, per fine index i:  x_f[i] += w0[i] x_c[c0[i]] + w1[i] x_c[c1[i]].
 * Restriction (Pᵀ), per coarse index c: r_c[c] = r_f[pos[c]] + wl[c] r_f[pos[c]-1] + wr[c] r_f[pos[c]+1]
 * (a weight is zero where that fine node is absent or is itself a coarse node). */
struct Dim {
    int *c0, *c1, *pos;
    double *w0, *w1, *wl, *wr;
};

/* The stencil points a level's matrix uses (those with a nonzero anywhere: 5 of 9 for a star stencil), and their
 * offsets; S holds one row of coefficients per point. Passed to kernels by value (parameter space). */
struct Stencil {
    int na, centre;
    signed char di[27], dj[27], dk[27];
};

struct Level {
    int n[3];
    long size;
    Stencil st;
    double *S, *x, *b, *r;  /* level 0's x and b are the caller's vectors */
    Dim t[3];               /* transfer to the next coarser level (not on the coarsest) */
};

/* Σ over the off-diagonal points of row r (node i, j, k) of S x. */
HD inline double offdiag(const Stencil &st, const double *S, long N, const double *x, int i, int j, int k, int nx,
                         int ny, int nz, long r) {
    double acc = 0.0;
    for (int a = 0; a < st.na; ++a) {
        if (a == st.centre) continue;
        const int ii = i + st.di[a], jj = j + st.dj[a], kk = k + st.dk[a];
        if (ii < 0 || ii >= nx || jj < 0 || jj >= ny || kk < 0 || kk >= nz) continue;
        acc += S[a * N + r] * x[ii + (long)nx * (jj + (long)ny * kk)];
    }
    return acc;
}

/* Conjugate gradients' work vectors and scalars (level 0's size). sc: device scalars, see smg_cg. */
struct CGWork {
    double *r, *z, *p, *q, *partial, *sc;
};

#ifdef __CUDACC__
/* The V-cycle as a CUDA graph, one per (b, x) pair: a Krylov solver applies the preconditioner to the same two
 * work vectors every iteration, so a handful of graphs serve a run. One graph launch replaces ~12 kernel launches
 * per level, whose host-side cost (~5 µs each) otherwise sets the time of the coarse levels. */
#define MAX_GRAPHS 8
struct Graph {
    const double *b;
    double *x;
    cudaGraphExec_t exec;
};
#endif

struct MG {
    int dim, nlev, nu;
    double omega;
    Level lev[MAX_LEVELS];
    double *G;              /* the coarsest level's dense (pseudo-)inverse, row-major */
    int err;
    int graphs;             /* apply through CUDA graphs (GPU build; default on) */
    CGWork cg;              /* allocated at the first smg_cg */
#ifdef __CUDACC__
    Graph graph[MAX_GRAPHS];
    int n_graphs, next_graph;
    cudaStream_t capture;
#endif
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
    const int nx = L.n[0], ny = L.n[1], nz = L.n[2];
    const int cx = colour & 1, cy = (colour >> 1) & 1, cz = (colour >> 2) & 1;
    const int hx = (nx - cx + 1) / 2, hy = (ny - cy + 1) / 2, hz = (nz - cz + 1) / 2;
    if (hx <= 0 || hy <= 0 || hz <= 0) return;
    const long N = L.size;
    const Stencil st = L.st;
    const double *S = L.S, *b = L.b;
    double *x = L.x;
    each((long)hx * hy * hz, LOOP(long t) {
        const int i = 2 * (int)(t % hx) + cx;
        const long q = t / hx;
        const int j = 2 * (int)(q % hy) + cy, k = 2 * (int)(q / hy) + cz;
        const long r = i + (long)nx * (j + (long)ny * k);
        const double rest = b[r] - offdiag(st, S, N, x, i, j, k, nx, ny, nz, r);
        x[r] += omega * (rest / S[st.centre * N + r] - x[r]);
    });
}

void residual(const Level &L) {
    const int nx = L.n[0], ny = L.n[1], nz = L.n[2];
    const long N = L.size;
    const Stencil st = L.st;
    const double *S = L.S, *b = L.b, *x = L.x;
    double *res = L.r;
    each(N, LOOP(long r) {
        const int i = (int)(r % nx);
        const long q = r / nx;
        const int j = (int)(q % ny), k = (int)(q / ny);
        res[r] = b[r] - S[st.centre * N + r] * x[r] - offdiag(st, S, N, x, i, j, k, nx, ny, nz, r);
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
    mg->graphs = 1;
    return mg;
}

/* Level l: grid sizes n[3] (n[2] = 1 in 2D), the `na` stencil points it uses as codes
 * s = (di+1) + 3(dj+1) + 9(dk+1), and their coefficients S (na x size, host memory). */
int smg_level(MG *mg, int l, const int *n, int na, const int *codes, const double *S) {
    Level &L = mg->lev[l];
    for (int d = 0; d < 3; ++d) L.n[d] = n[d];
    L.size = (long)n[0] * n[1] * n[2];
    if (na < 1 || na > 27) return mg->err = 1;
    L.st.na = na;
    L.st.centre = -1;
    for (int a = 0; a < na; ++a) {
        L.st.di[a] = (signed char)(codes[a] % 3 - 1);
        L.st.dj[a] = (signed char)((codes[a] / 3) % 3 - 1);
        L.st.dk[a] = (signed char)(codes[a] / 9 - 1);
        if (codes[a] == 13 || (mg->dim < 3 && codes[a] == 4)) L.st.centre = a;
    }
    if (mg->dim < 3)
        for (int a = 0; a < na; ++a) L.st.dk[a] = 0;
    if (L.st.centre < 0) return mg->err = 1;    /* no diagonal */
    L.S = upload(mg, S, (long)na * L.size);
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

/* The coarsest level's (pseudo-)inverse by Gauss–Jordan elimination on the device (the seed's GPU technique,
 * Shirazi et al.), from its dense matrix A (row-major, host memory). No pivoting: the matrix is symmetric positive
 * definite — for a singular operator (`singular`: constant null space) after pinning node 0 (row and column 0
 * replaced by e0, and the inverse's (0, 0) entry then zeroed), whose inverse B gives the pseudo-inverse
 * G = Q B Q, Q = I - 11ᵀ/n (B b solves A x = b for b ⊥ 1 with x0 = 0; Q makes it the minimum-norm solution and
 * maps any b into the range first). Per pivot column k three
 * parallel loops: save column k (the multipliers), scale row k, eliminate column k from every other row. */
int smg_coarse_gauss_jordan(MG *mg, const double *A, int singular) {
    const long n = mg->lev[mg->nlev - 1].size, m = 2 * n;
    double *a = upload(mg, A, n * n), *W = alloc_doubles(mg, n * m), *col = alloc_doubles(mg, n);
    double *G = alloc_doubles(mg, n * n), *rs = alloc_doubles(mg, n), *cs = alloc_doubles(mg, n);
    if (mg->err) return mg->err;
    each(n * m, LOOP(long t) {
        const long i = t / m, j = t % m;
        double v = j < n ? a[i * n + j] : (j - n == i ? 1.0 : 0.0);
        if (singular && j < n && (i == 0 || j == 0)) v = i == j ? 1.0 : 0.0;
        W[t] = v;
    });
    for (long k = 0; k < n; ++k) {
        each(n, LOOP(long i) { col[i] = W[i * m + k]; });
        each(m, LOOP(long j) { W[k * m + j] /= col[k]; });
        each(n * m, LOOP(long t) {
            const long i = t / m;
            if (i != k) W[t] -= col[i] * W[k * m + t % m];
        });
    }
    /* singular: the pinned node's own entry goes, so that B b has x0 = 0 (B = [0 0; 0 A11⁻¹]) */
    each(n * n, LOOP(long t) { G[t] = singular && t == 0 ? 0.0 : W[(t / n) * m + n + t % n]; });
    if (singular) {
        each(n, LOOP(long i) {
            double r = 0.0, c = 0.0;
            for (long j = 0; j < n; ++j) {
                r += G[i * n + j];
                c += G[j * n + i];
            }
            rs[i] = r;
            cs[i] = c;
        });
        each(n * n, LOOP(long t) {
            const long i = t / n, j = t % n;
            double s = 0.0;
            for (long l = 0; l < n; ++l) s += rs[l];       /* the same total in every thread: no reduction needed */
            G[t] += -rs[i] / n - cs[j] / n + s / ((double)n * n);
        });
    }
    mem_free(mg->G);
    mg->G = G;
    mem_free(a);
    mem_free(W);
    mem_free(col);
    mem_free(rs);
    mem_free(cs);
    return mg->err | launch_error();
}

/* Copy the coarsest inverse to the host (n x n, row-major): to compare the ways of computing it. */
int smg_coarse_get(MG *mg, double *G) {
    const long n = mg->lev[mg->nlev - 1].size;
#ifdef __CUDACC__
    return cudaMemcpy(G, mg->G, n * n * sizeof(double), cudaMemcpyDeviceToHost) != cudaSuccess;
#else
    memcpy(G, mg->G, n * n * sizeof(double));
    return 0;
#endif
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

#ifdef __CUDACC__
static cudaGraphExec_t captured(MG *mg, const double *b, double *x) {
    for (int g = 0; g < mg->n_graphs; ++g)
        if (mg->graph[g].b == b && mg->graph[g].x == x) return mg->graph[g].exec;
    if (!mg->capture && cudaStreamCreateWithFlags(&mg->capture, cudaStreamNonBlocking) != cudaSuccess) return 0;
    cudaGraph_t graph = 0;
    stream_now = mg->capture;
    int err = cudaStreamBeginCapture(mg->capture, cudaStreamCaptureModeThreadLocal) != cudaSuccess;
    if (!err) err = vcycle(mg, b, x, 0);
    err |= cudaStreamEndCapture(mg->capture, &graph) != cudaSuccess;
    stream_now = 0;
    cudaGraphExec_t exec = 0;
    if (!err && graph) err = cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess;
    if (graph) cudaGraphDestroy(graph);
    if (err) return 0;
    Graph &slot = mg->graph[mg->next_graph];
    if (mg->next_graph < mg->n_graphs) cudaGraphExecDestroy(slot.exec);
    else mg->n_graphs++;
    slot.b = b;
    slot.x = x;
    slot.exec = exec;
    mg->next_graph = (mg->next_graph + 1) % MAX_GRAPHS;
    return exec;
}
#endif

int smg_apply(MG *mg, const double *b, double *x) {
#ifdef __CUDACC__
    if (mg->graphs) {
        cudaGraphExec_t exec = captured(mg, b, x);
        return !exec || cudaGraphLaunch(exec, 0) != cudaSuccess;
    }
#endif
    return vcycle(mg, b, x, 0);
}

/* PETSc's KSPConvergedReason values that smg_cg can return */
enum { CONVERGED_RTOL = 2, CONVERGED_ATOL = 3, DIVERGED_ITS = -3, DIVERGED_DTOL = -4, DIVERGED_INDEFINITE_PC = -8,
       DIVERGED_NANORINF = -9, DIVERGED_INDEFINITE_MAT = -10 };

static int cg_work(MG *mg) {
    CGWork &w = mg->cg;
    if (w.sc) return mg->err;
    const long n = mg->lev[0].size;
    w.r = alloc_doubles(mg, n);
    w.z = alloc_doubles(mg, n);
    w.p = alloc_doubles(mg, n);
    w.q = alloc_doubles(mg, n);
    w.partial = alloc_doubles(mg, RED_PARTIAL);
    w.sc = alloc_doubles(mg, 8);
    return mg->err;
}

/* Preconditioned conjugate gradients on level 0's matrix, as PETSc's KSPCG with its default convergence test
 * (preconditioned residual norm; with a nonzero initial guess relative to ‖B b‖, as KSPConvergedDefault does), so
 * iteration counts match PETSc's: the iteration runs on the device, and one synchronisation per iteration brings
 * the scalars to the host for the test. precond: 0 none, 1 Jacobi (the stencil's diagonal), 2 the V-cycle.
 * Device scalars sc: 0 pᵀAp, 1 and 2 zᵀr (this and the last iteration, alternating), 3 zᵀz, 5 ‖B b‖².
 * Returns non-zero on a device error; the outcome is in *its, *rnorm, *reason. */
int smg_cg(MG *mg, int precond, const double *b, double *x, double rtol, double atol, double dtol, int maxit,
           int zero_guess, int *its, double *rnorm, int *reason) {
    if (cg_work(mg)) return 1;
    const Level &L = mg->lev[0];
    const int nx = L.n[0], ny = L.n[1], nz = L.n[2];
    const long N = L.size;
    const Stencil st = L.st;
    const double *S = L.S;
    CGWork w = mg->cg;
    double *r = w.r, *z = w.z, *p = w.p, *q = w.q, *sc = w.sc;
    const int jacobi = precond == 1;
    double h[8];
    *its = 0;
    *reason = 0;
    if (zero_guess) mem_zero(x, N);
    /* r = b - A x, z = B r, and ‖B b‖ (Jacobi: all in one pass) */
    reduce(N, LOOP(long i, double *acc) {
        const int ii = (int)(i % nx);
        const long qq = i / nx;
        const int jj = (int)(qq % ny), kk = (int)(qq / ny);
        const double d = S[st.centre * N + i];
        const double ri = b[i] - d * x[i] - offdiag(st, S, N, x, ii, jj, kk, nx, ny, nz, i);
        r[i] = ri;
        const double zi = jacobi ? ri / d : ri, bi = jacobi ? b[i] / d : b[i];
        z[i] = zi;
        acc[0] += zi * zi;
        acc[1] += zi * ri;
        acc[2] += bi * bi;
    }, w.partial, sc, 3, 1, 5);
    if (precond == 2) {
        if (smg_apply(mg, b, z)) return 1;
        reduce(N, LOOP(long i, double *acc) { acc[0] += z[i] * z[i]; }, w.partial, sc, 5, -1, -1);
        if (smg_apply(mg, r, z)) return 1;
        reduce(N, LOOP(long i, double *acc) { acc[0] += z[i] * z[i]; acc[1] += z[i] * r[i]; }, w.partial, sc, 3, 1,
               -1);
    }
    if (get_scalars(h, sc, 6)) return 1;
    const double rnorm0 = zero_guess ? sqrt(h[3]) : sqrt(h[5]);
    const double ttol = fmax(rtol * rnorm0, atol);
    double rn = sqrt(h[3]);
    int cur = 1, nxt = 2;
    copy_vec(p, z, N);
    for (int k = 0;; ++k) {
        *rnorm = rn;
        if (rn != rn || isinf(rn)) { *reason = DIVERGED_NANORINF; break; }
        if (rn <= ttol) { *reason = rn < atol ? CONVERGED_ATOL : CONVERGED_RTOL; break; }
        if (dtol > 0 && k > 0 && rn >= dtol * rnorm0) { *reason = DIVERGED_DTOL; break; }
        if (k >= maxit) { *reason = DIVERGED_ITS; break; }
        if (k > 0) {
            const int c = cur, n2 = nxt;
            each(N, LOOP(long i) { p[i] = z[i] + sc[n2] / sc[c] * p[i]; });
            cur = nxt;
            nxt = 3 - nxt;
        }
        /* q = A p, pᵀq */
        reduce(N, LOOP(long i, double *acc) {
            const int ii = (int)(i % nx);
            const long qq = i / nx;
            const int jj = (int)(qq % ny), kk = (int)(qq / ny);
            const double qi = S[st.centre * N + i] * p[i] + offdiag(st, S, N, p, ii, jj, kk, nx, ny, nz, i);
            q[i] = qi;
            acc[0] += p[i] * qi;
        }, w.partial, sc, 0, -1, -1);
        const int c = cur;
        if (precond == 2) {
            each(N, LOOP(long i) {
                const double a = sc[c] / sc[0];
                x[i] += a * p[i];
                r[i] -= a * q[i];
            });
            if (smg_apply(mg, r, z)) return 1;
            reduce(N, LOOP(long i, double *acc) { acc[0] += z[i] * z[i]; acc[1] += z[i] * r[i]; }, w.partial, sc,
                   3, nxt, -1);
        } else {
            reduce(N, LOOP(long i, double *acc) {
                const double a = sc[c] / sc[0];
                x[i] += a * p[i];
                const double ri = r[i] - a * q[i];
                r[i] = ri;
                const double zi = jacobi ? ri / S[st.centre * N + i] : ri;
                z[i] = zi;
                acc[0] += zi * zi;
                acc[1] += zi * ri;
            }, w.partial, sc, 3, nxt, -1);
        }
        if (get_scalars(h, sc, 6)) return 1;
        *its = k + 1;
        if (h[0] <= 0.0) { *reason = DIVERGED_INDEFINITE_MAT; break; }
        if (h[nxt] < 0.0) { *reason = DIVERGED_INDEFINITE_PC; break; }
        rn = sqrt(h[3]);
    }
    return launch_error();
}

/* Threads per block of the parallel loops (GPU build; 32..1024, default 256); returns the value in force. For the
 * launch-shape study (cardiosim.bench.shapes); graphs captured before keep the shape they were captured with. */
int smg_set_block(int threads) {
#ifdef __CUDACC__
    if (threads >= 32 && threads <= 1024 && threads % 32 == 0) block_size = threads;
    return block_size;
#else
    return threads;
#endif
}

/* Graphs on (1, the default) or off (0: every kernel launched from the host each time; for comparisons). */
void smg_use_graphs(MG *mg, int on) { mg->graphs = on; }

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
    mem_free(mg->cg.r); mem_free(mg->cg.z); mem_free(mg->cg.p); mem_free(mg->cg.q);
    mem_free(mg->cg.partial); mem_free(mg->cg.sc);
#ifdef __CUDACC__
    for (int g = 0; g < mg->n_graphs; ++g) cudaGraphExecDestroy(mg->graph[g].exec);
    if (mg->capture) cudaStreamDestroy(mg->capture);
#endif
    free(mg);
}

}  /* extern "C" */

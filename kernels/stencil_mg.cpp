/* Geometric multigrid and conjugate gradients for a matrix on a structured grid (cardiosim.solvers), on one MPI rank
 * or on several, one source, two builds:
 *
 *   mpicxx-flags g++ -x c++ -O2 -shared -fPIC             every loop runs on the host (CI; the GPU build's reference)
 *   nvcc -x cu --extended-lambda -shared -cudart shared   every loop is a kernel on the legacy default stream, the
 *                                                         stream PETSc's CUDA vectors use: a call needs no
 *                                                         synchronisation with PETSc's own operations
 *
 * Why our own and not PETSc's PCMG/KSPCG on the GPU: their V-cycle and CG iteration are a few hundred PETSc
 * operations per iteration, each ~15 µs of host latency on an H100 (docs/benchmarks.md): latency, not bandwidth, set
 * the cost. Here a V-cycle is a few dozen kernel launches issued from C, and a CG iteration has one host
 * synchronisation.
 *
 * Each rank holds its part of every level as a box of owned nodes with one layer of ghost nodes around it (in the
 * dimensions the grid has): vectors are stored ghosted, the operator as stencil coefficients S[s*size + t] over the
 * owned nodes t, s over the 3^d neighbours ((di+1) + 3(dj+1) + 9(dk+1)), zero where a neighbour is outside the grid.
 * Ghosts on the grid's boundary stay zero, so a stencil product needs no bounds test. One rank's box is the whole
 * grid (the serial solver: the same arithmetic in the same order as before ghosts existed).
 *
 * The communication seam (one place, below "the seam"): halo exchange of one level's vector (dimension by
 * dimension, so edges and corners arrive too), the global sum of a CG iteration's scalars (one MPI_Allreduce), and
 * gather/scatter of one level onto rank 0 for the coarse levels (agglomeration: a V-cycle of a serial hierarchy on
 * rank 0, built by the host code from the gathered coarse operator). Transports: host-staged MPI (pack on the device,
 * copy only the packed faces, MPI, copy back, unpack; the CPU build does the same without copies), or CUDA IPC
 * between the ranks of a node, ordered on the device alone (flags raised by the writing kernel in the reader's
 * memory: see "The CUDA IPC transport" below), which lets the V-cycle over the ranks be one CUDA graph.
 *
 * Smoother: multicolour SOR with 2^d colours by index parity, so no two neighbours share a colour and each colour is
 * one parallel loop; on several ranks the ghosts are exchanged after each colour, so the sweep is the serial one.
 * A forward sweep before and a backward sweep after the coarse correction, with R = Pᵀ and an exact (pseudo-)inverse
 * on the coarsest level, make the V-cycle a symmetric operator: a valid preconditioner for CG.
 *
 * Masked grids (tissue in a box): the layout, the halo and the transfers stay the box's, and every per-node loop
 * visits a level's active nodes only, through a list ("Active nodes" below; smg_active).
 *
 * Grid index of owned node (i, j, k): i + nx (j + ny k); 2D grids have nz = 1.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
/* the C API only: Open MPI's and MPICH's headers otherwise pull in the C++ bindings, which -lmpi does not link */
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <chrono>

#define MAX_LEVELS 32

/* The owned nodes a parallel loop visits: 0 .. n-1 (list null: a whole box, or any index range), or list[0 .. n-1]
 * (a level's active nodes on a masked grid: "Active nodes" below). The loop body gets the node's own index either
 * way, so one body serves both. */
struct Nodes {
    const int *list;
    long n;
};
#ifdef __CUDACC__
#define NODE_AT __host__ __device__     /* HD, defined further down with the rest of the build's choices */
#else
#define NODE_AT
#endif
NODE_AT inline long node_at(const Nodes &s, long i) { return s.list ? s.list[i] : i; }
static inline Nodes range(long n) { return Nodes{0, n}; }

#ifdef __CUDACC__
#include <cuda_runtime.h>
#define LOOP [=] __host__ __device__
template <class F> __global__ void each_kernel(Nodes s, F f) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < s.n) f(node_at(s, i));
}
/* Where launches go: the legacy default stream (ordered with PETSc's operations), or the stream a CUDA graph of
 * the V-cycle is being captured on. */
static cudaStream_t stream_now = 0;
static int block_size = 256;        /* threads per block of the parallel loops (smg_set_block: the launch-shape study) */
template <class F> void each(Nodes s, F f) {
    if (s.n > 0)
        each_kernel<<<(unsigned)((s.n + block_size - 1) / block_size), block_size, 0, stream_now>>>(s, f);
}
template <class F> void each(long n, F f) { each(range(n), f); }
static void *mem_alloc(size_t bytes) { void *p = 0; return cudaMalloc(&p, bytes) == cudaSuccess ? p : 0; }
static void mem_free(void *p) { if (p) cudaFree(p); }
static void *host_alloc(size_t bytes) { void *p = 0; return cudaMallocHost(&p, bytes ? bytes : 1) == cudaSuccess ? p : 0; }
static void host_free(void *p) { if (p) cudaFreeHost(p); }
static int mem_put(void *dst, const void *src, size_t bytes) {
    return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice) != cudaSuccess;
}
/* device to host; waits for the work before it on the default stream */
static int mem_get(void *dst, const void *src, size_t bytes) {
    return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost) != cudaSuccess;
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
 * adds node i's terms to acc[0..2]; each block's sums go to `partial`, and the last block to finish adds those into
 * out[o0..o2] (an index < 0: not wanted), in the order a kernel of its own did before (the same bits): a second,
 * one-block kernel cost a launch per reduction, two per CG iteration, at a size (the masked LV) where a step is
 * mostly such fixed costs (docs/decisions.md, "A step's fixed costs on the device"). Results stay on the device.
 * 1024 blocks (about a full GPU: 8 per SM of an H100): f is often a 27-point product (CG's q = A p), whose loads
 * only many resident warps hide; 264 blocks left a thread a dozen nodes of a million-node box in turn. `partial`
 * holds RED_PARTIAL doubles: the blocks' sums, then the finished-block counter (zero between reductions: the last
 * block resets it, alloc_partial zeroes it). */
#define RED_BLOCKS 1024
template <class F>
__global__ void reduce_kernel(Nodes s, F f, double *partial, double *out, int o0, int o1, int o2) {
    __shared__ double sh[3][256];
    __shared__ bool last;
    double acc[3] = {0.0, 0.0, 0.0};
    for (long i = (long)blockIdx.x * 256 + threadIdx.x; i < s.n; i += (long)gridDim.x * 256) f(node_at(s, i), acc);
    for (int k = 0; k < 3; ++k) sh[k][threadIdx.x] = acc[k];
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h)
            for (int k = 0; k < 3; ++k) sh[k][threadIdx.x] += sh[k][threadIdx.x + h];
        __syncthreads();
    }
    const int nb = gridDim.x;
    unsigned int *done = (unsigned int *)(partial + 3 * nb);
    if (threadIdx.x == 0) {
        for (int k = 0; k < 3; ++k) partial[k * nb + blockIdx.x] = sh[k][0];
        __threadfence();                        /* this block's sums visible before it counts itself done */
        last = atomicAdd(done, 1u) == (unsigned)nb - 1;
    }
    __syncthreads();
    if (!last) return;
    for (int k = 0; k < 3; ++k) {               /* the last block: every block's sums, in a fixed order */
        double a = 0.0;
        for (int b = threadIdx.x; b < nb; b += 256) a += __ldcg(partial + k * nb + b);
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
        *done = 0;
    }
}
template <class F> void reduce(Nodes s, F f, double *partial, double *out, int o0, int o1, int o2) {
    reduce_kernel<<<RED_BLOCKS, 256, 0, stream_now>>>(s, f, partial, out, o0, o1, o2);
}
/* Scalars to the host: waits for the work before it (the one synchronisation per CG iteration). */
static int get_scalars(double *host, const double *dev, int n) {
    return cudaMemcpy(host, dev, n * sizeof(double), cudaMemcpyDeviceToHost) != cudaSuccess;
}
#define RED_PARTIAL (3 * RED_BLOCKS + 1)
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
struct Clock {
    std::chrono::steady_clock::time_point ev[4 * MAX_LEVELS + 2];
    int n = 0;
    void mark() { ev[n++] = std::chrono::steady_clock::now(); }
    double ms(int a, int b) { return std::chrono::duration<double, std::milli>(ev[b] - ev[a]).count(); }
    void finish() {}
};
#define LOOP [=]
template <class F> void each(Nodes s, F f) {
    for (long i = 0; i < s.n; ++i) f(node_at(s, i));
}
template <class F> void each(long n, F f) { each(range(n), f); }
static void *mem_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }
static void mem_free(void *p) { free(p); }
static void *host_alloc(size_t bytes) { return malloc(bytes ? bytes : 1); }
static void host_free(void *p) { free(p); }
static int mem_put(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); return 0; }
static int mem_get(void *dst, const void *src, size_t bytes) { memcpy(dst, src, bytes); return 0; }
static void mem_zero(double *p, long n) { memset(p, 0, n * sizeof(double)); }
static int launch_error(void) { return 0; }
static void gemv(long n, const double *G, const double *x, double *y) {
    for (long r = 0; r < n; ++r) {
        double acc = 0.0;
        for (long c = 0; c < n; ++c) acc += G[r * n + c] * x[c];
        y[r] = acc;
    }
}
/* in list order: over a level's active nodes (ascending) the same sum, bit for bit, as over the whole box whose
 * other nodes add zeros */
template <class F> void reduce(Nodes s, F f, double *, double *out, int o0, int o1, int o2) {
    double acc[3] = {0.0, 0.0, 0.0};
    for (long i = 0; i < s.n; ++i) f(node_at(s, i), acc);
    if (o0 >= 0) out[o0] = acc[0];
    if (o1 >= 0) out[o1] = acc[1];
    if (o2 >= 0) out[o2] = acc[2];
}
static int get_scalars(double *host, const double *dev, int n) { memcpy(host, dev, n * sizeof(double)); return 0; }
#define RED_PARTIAL 1
#define HD
#endif

static double seconds(void) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/* A rank's part of one level: owned sizes n, ghost widths w (1 in the grid's dimensions, else 0) and the ghosted
 * sizes g = n + 2w. Passed to kernels by value. */
struct Box {
    int n[3], w[3], g[3];
    long size, gsize;   /* owned and ghosted node counts */
};
/* the ghosted index of owned coordinates (i, j, k); -1 and n[d] are the ghost layers */
HD inline long gix(const Box &B, int i, int j, int k) {
    return (i + B.w[0]) + (long)B.g[0] * ((j + B.w[1]) + (long)B.g[1] * (k + B.w[2]));
}

/* One dimension of the transfer from a level to the next coarser one (1D linear interpolation P), in this rank's
 * local coordinates (a coarse index of -1 or nc, a fine one of -1 or nf, is a ghost).
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

/* Active nodes (a masked grid: tissue in a box; smg_active, docs/decisions.md "Tissue-only stencil solves"). Level 0's
 * inactive nodes are the rows that couple to nothing (a diagonal alone: outside the tissue); a coarser level's
 * active nodes are those whose restriction support holds an active finer node, and the host has lumped every
 * coupling of the coarse operator that touches an inactive node into the diagonals (cardiosim.solvers.multigrid),
 * so an inactive node's row is a diagonal alone on every level. Then, wherever the input is zero on level 0's
 * inactive nodes, every vector of the V-cycle and of CG stays exactly zero on every level's inactive nodes: their
 * right-hand sides are restrictions of zeros, their rows read nothing, and no active node reads them with a
 * nonzero weight (an active fine node interpolates from active coarse nodes only). So the loops visit the active
 * nodes only and give the box's values there, the same arithmetic per node; level 0's inactive rows are solved
 * on their own (x = b / diagonal) where a result leaves for the caller. Buffers are allocated zero and never
 * written at inactive nodes, but for the top level's x (the coarse solve writes it whole; no active node reads
 * its inactive entries with a nonzero weight). */
struct Active {
    int *act;               /* active owned nodes, ascending (null: the whole box) */
    long nact;
    int *by_colour;         /* the same grouped by smoother colour, ascending within each: colour c is
                             * by_colour[cstart[c] .. cstart[c + 1]) */
    long cstart[9];
    int *out;               /* the inactive owned nodes, ascending (level 0's: solved on their own) */
    long nout;
};

struct Level {
    Box B;
    int par[3];             /* parity of the global index of this rank's first owned node, per dimension */
    Stencil st;
    double *S, *x, *b, *r;  /* x, b, r ghosted; level 0's x and b are the caller's (internal, ghosted) vectors */
    Dim t[3];               /* transfer to the next coarser level (not on the coarsest) */
    double *jw;             /* Jacobi weights per owned node (smg_jacobi; null: the level is smoothed by SOR) */
    Active a;
};

/* the owned nodes a loop over level L visits: its active ones, or the whole box */
static inline Nodes nodes(const Level &L) { return L.a.act ? Nodes{L.a.act, L.a.nact} : range(L.B.size); }
/* level L's inactive nodes (none without a list) */
static inline Nodes outside(const Level &L) { return Nodes{L.a.out, L.a.act ? L.a.nout : 0}; }

/* Σ over the off-diagonal points of row t (owned node i, j, k) of S times each neighbour's value, `value(n)` for
 * the neighbour's ghosted index n.
 *
 * On the GPU a 3D stencil of all 27 points (the box stencil: fibres off the axes) takes a loop of its own, unrolled,
 * whose offsets are constants (two strides), and the whole row is loaded before the first product: a masked level
 * 0 is under one wave of threads, with no other warps to hide a wait, so the loads in flight per thread set its
 * time (56-64 registers instead of 32). The general loop's bound and offsets are run-time values. The same terms in
 * the same order: the same sum. Measured (docs/decisions.md, "Level 0 swept twice on a masked grid; the 27-point
 * loop unrolled", "The CG loop on the device; a row's loads first"): unrolled, the LV's whole box 11 % faster per
 * step and its masked grid 2 %; the loads first, on an H200, the masked step 10 % and the box 6 %. */
template <class V>
HD inline double offdiag_of(const Stencil &st, const double *S, const Box &B, int i, int j, int k, long t, V value) {
    double acc = 0.0;
#ifdef __CUDA_ARCH__
    if (st.na == 27) {
        const long g = gix(B, i, j, k), sy = B.g[0], sz = (long)B.g[0] * B.g[1];
        double c[27], v[27];
#pragma unroll
        for (int a = 0; a < 27; ++a)
            if (a != 13) {
                c[a] = __ldg(S + a * B.size + t);
                v[a] = value(g + (a % 3 - 1) + sy * ((a / 3) % 3 - 1) + sz * (a / 9 - 1));
            }
#pragma unroll
        for (int a = 0; a < 27; ++a)
            if (a != 13) acc += c[a] * v[a];
        return acc;
    }
#endif
    for (int a = 0; a < st.na; ++a) {
        if (a == st.centre) continue;
        acc += S[a * B.size + t] * value(gix(B, i + st.di[a], j + st.dj[a], k + st.dk[a]));
    }
    return acc;
}

/* the neighbour values offdiag_of reads: a ghosted vector's, or the first Jacobi sweep's W b formed where read */
struct Entries {
    const double *x;
    HD double operator()(long n) const { return x[n]; }
};
struct WeightedEntries {
    const double *w, *x;
    HD double operator()(long n) const { return w[n] * x[n]; }
};

/* Σ over the off-diagonal points of row t (owned node i, j, k) of S x, x ghosted. */
HD inline double offdiag(const Stencil &st, const double *S, const Box &B, const double *x, int i, int j, int k,
                         long t) {
    return offdiag_of(st, S, B, i, j, k, t, Entries{x});
}

/* owned index t -> coordinates */
HD inline void coords(const Box &B, long t, int &i, int &j, int &k) {
    i = (int)(t % B.n[0]);
    const long q = t / B.n[0];
    j = (int)(q % B.n[1]);
    k = (int)(q / B.n[1]);
}

/* PETSc's KSPConvergedReason values that smg_cg can return */
enum { CONVERGED_RTOL = 2, CONVERGED_ATOL = 3, DIVERGED_ITS = -3, DIVERGED_DTOL = -4, DIVERGED_INDEFINITE_PC = -8,
       DIVERGED_NANORINF = -9, DIVERGED_INDEFINITE_MAT = -10 };

/* The stopping test of KSPConvergedDefault (and KSPCG's divergence checks), shared by every CG form, on the host
 * or (cg_graph) on the device: 1 to stop (*reason set), 0 to go on. */
HD inline int cg_stop(double rn, double rnorm0, double ttol, double atol, double dtol, int k, int maxit,
                      int *reason) {
    if (rn != rn || isinf(rn)) { *reason = DIVERGED_NANORINF; return 1; }
    if (rn <= ttol) { *reason = rn < atol ? CONVERGED_ATOL : CONVERGED_RTOL; return 1; }
    if (dtol > 0 && k > 0 && rn >= dtol * rnorm0) { *reason = DIVERGED_DTOL; return 1; }
    if (k >= maxit) { *reason = DIVERGED_ITS; return 1; }
    return 0;
}

/* A one-rank CG solve's stopping test where it runs on the device (cg_graph): what the host sets before the solve
 * (the tolerances: atol, dtol, rtol, maxit), what the test of the initial guess sets (rnorm0, ttol) and what the
 * loop leaves for the host (iterations, reason, the last norm tested). */
struct LoopState {
    double rnorm0, ttol, atol, dtol, rnorm, rtol;
    int maxit, its, reason;
};

/* Conjugate gradients' work vectors (level 0's ghosted size) and scalars. sc: device scalars, see smg_cg. */
struct CGWork {
    double *x, *r, *z, *p, *q, *s, *partial, *sc;
    LoopState *loop, *loop_host;    /* device, and pinned host memory for its transfers */
};

/* Several ranks: the communicator, where this rank sits, and the buffers of the seam. */
struct Comm {
    MPI_Comm comm;
    int rank, size, P[3], me[3], nbr[3][2];   /* nbr: the rank on the low / high side in each dimension, or -1 */
    double *dev_send, *dev_recv, *host_send, *host_recv;
    long face;                                /* capacity of each of the four buffers per side (doubles) */
    /* the distributed top level on rank 0 (agglomeration): every rank's box there, and rank 0's serial tail */
    int *box_start, *box_size;                /* [size][3] each */
    int *counts, *displs;
    long total;                               /* the top level's global node count */
    int global_n[3];
    double *host_all, *host_nat, *dev_nat_b, *dev_nat_x, *host_box, *dev_box;
    /* the CUDA IPC transport (ranks of one node): each rank's halo receive buffers and rank 0's gather buffer,
     * opened in the others' address spaces, written directly by their kernels */
    int ipc;
    double *nbr_recv[3][2];                   /* the neighbours' receive buffers (opened IPC handles) */
    double *dev_all, *root_all;               /* rank 0's buffer of every rank's box (two slots), its address here */
    unsigned long long *ctrl;                 /* this rank's control words (after its receive slots) */
    unsigned long long *root_ctrl;            /* rank 0's gather flags (one per rank), here */
    unsigned long long **dev_sflags;          /* rank 0: every rank's scatter flag (device array of addresses) */
    double **opened_extra;                    /* rank 0: receive buffers of non-neighbours it opened (to close) */
    long *dev_map;                            /* rank 0: the natural index of each entry of dev_all */
    /* statistics: halo exchanges, gathers */
    long n_exchange, n_gather, bytes, host_bytes;   /* bytes: between ranks; host_bytes: through host memory */
    double t_exchange, t_gather;
};

#ifdef __CUDACC__
/* The V-cycle as a CUDA graph, one per (b, x) pair: a Krylov solver applies the preconditioner to the same two
 * work vectors every iteration, so a handful of graphs serve a run. One graph launch replaces ~12 kernel launches
 * per level, whose host-side cost (~5 µs each) otherwise sets the time of the coarse levels. On several ranks only
 * with the IPC transport, whose exchanges, gathers and scatters are device work; host staging is host work, which
 * a graph cannot hold. */
#define MAX_GRAPHS 8
struct Graph {
    const double *b;
    double *x;
    cudaGraphExec_t exec;
    long n_exchange, n_gather, bytes;       /* what one launch moves (the seam's statistics) */
};
#define MAX_SOLVES 4
struct SolveGraph {
    const double *b;
    double *xo;
    int precond, zero_guess;
    cudaGraphExec_t exec;
};
#endif

struct MG {
    int dim, nlev;
    int nu[MAX_LEVELS];     /* smoothing sweeps before and after the coarse correction, per level (smg_sweeps) */
    double omega;
    Level lev[MAX_LEVELS];
    double *G;              /* the coarsest level's dense (pseudo-)inverse, row-major (one rank) */
    int *clist;             /* the coarsest level's nodes that G covers (smg_coarse_list; null: all) */
    long nclist;
    double *cb, *cx;        /* the coarsest level's b and x, contiguous (one rank) */
    double *in_b, *in_x;    /* level 0's ghosted b and x for smg_apply on owned-layout vectors */
    double *x0;             /* level 0's working x where Jacobi smooths it (its sweeps write the result elsewhere:
                             * vcycle); allocated by smg_jacobi */
    int err;
    int graphs;             /* apply through CUDA graphs (GPU build, one rank; default on) */
    CGWork cg;              /* allocated at the first smg_cg */
    double *dsc, *dpartial; /* smg_deflate's sums and its reduction's partial sums (allocated at its first call) */
    Comm *c;                /* several ranks; null on one */
    struct MG *tail;        /* rank 0: the serial hierarchy below the top level (several ranks) */
    int root_only;          /* several ranks: the whole solve on rank 0 (the tail is the whole grid) */
    int per_sweep;          /* several ranks: ghosts exchanged once per sweep, not per colour (hybrid smoother) */
#ifdef __CUDACC__
    Graph graph[MAX_GRAPHS];
    int n_graphs, next_graph;
    SolveGraph solves[MAX_SOLVES];         /* one-rank CG solves, each one graph (cg_graph) */
    int n_solves, next_solve;
    cudaStream_t capture;
#endif
};

static double *alloc_doubles(MG *mg, long n) {
    double *p = (double *)mem_alloc((size_t)(n > 0 ? n : 1) * sizeof(double));
    if (!p) mg->err = 1;
    return p;
}

/* a ghosted vector, zero (its boundary ghosts stay zero) */
static double *alloc_ghosted(MG *mg, const Box &B) {
    double *p = alloc_doubles(mg, B.gsize);
    if (p) {
        mem_zero(p, B.gsize);
        if (launch_error()) mg->err = 1;
    }
    return p;
}

/* a reduction's partial sums (RED_PARTIAL doubles), zero: the GPU's finished-block counter starts at zero */
static double *alloc_partial(MG *mg) {
    double *p = alloc_doubles(mg, RED_PARTIAL);
    if (p) {
        mem_zero(p, RED_PARTIAL);
        if (launch_error()) mg->err = 1;
    }
    return p;
}

template <class T> static T *upload(MG *mg, const T *src, long n) {
    T *p = (T *)mem_alloc((size_t)(n > 0 ? n : 1) * sizeof(T));
    if (!p || mem_put(p, src, (size_t)n * sizeof(T))) mg->err = 1;
    return p;
}

namespace smg {  /* named (not static): nvcc's extended lambdas need enclosing functions with an address */

/* dst (owned layout) = src (ghosted), or the reverse, at the nodes `on` (a level's active nodes, or all) */
void to_owned(const Box &B, const double *src, double *dst, Nodes on) {
    each(on, LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        dst[t] = src[gix(B, i, j, k)];
    });
}
void from_owned(const Box &B, const double *src, double *dst, Nodes on) {
    each(on, LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        dst[gix(B, i, j, k)] = src[t];
    });
}

/* dst[i] = src at the i-th node of `on` (src ghosted), or the reverse: the coarsest level's vectors as the dense
 * solve's contiguous ones, over the level's active nodes (a masked grid's, whose inactive nodes the dense
 * (pseudo-)inverse leaves out: their right-hand sides are zero, and so are their solutions) or all of them */
void to_list(const Box &B, const double *src, double *dst, Nodes on) {
    each(on.n, LOOP(long i) {
        int a, b, c;
        coords(B, node_at(on, i), a, b, c);
        dst[i] = src[gix(B, a, b, c)];
    });
}
void from_list(const Box &B, const double *src, double *dst, Nodes on) {
    each(on.n, LOOP(long i) {
        int a, b, c;
        coords(B, node_at(on, i), a, b, c);
        dst[gix(B, a, b, c)] = src[i];
    });
}

/* x = G b at the nodes of `on` of the coarsest level (b, x ghosted), G over those nodes in their order: on the GPU
 * one kernel where to_list, gemv and from_list were three, each block gathering b's entries into shared memory,
 * then one warp per row as gemv_kernel (the same sum, so the same bits), each row's result written to its node.
 * The coarsest solve is tiny and runs in every V-cycle, so its launches, not its bytes, were its cost (issue 27). */
#ifdef __CUDACC__
#define GATHER_GEMV_MAX 6144            /* entries of b in 48 KiB of shared memory; larger: the three kernels */
__global__ void gather_gemv_kernel(Box B, Nodes on, const double *G, const double *b, double *x) {
    extern __shared__ double xs[];
    const long n = on.n;
    for (long c = threadIdx.x; c < n; c += blockDim.x) {
        int i, j, k;
        coords(B, node_at(on, c), i, j, k);
        xs[c] = b[gix(B, i, j, k)];
    }
    __syncthreads();
    const long row = ((long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    const int lane = threadIdx.x % 32;
    if (row >= n) return;
    double acc = 0.0;
    for (long c = lane; c < n; c += 32) acc += G[row * n + c] * xs[c];
    for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) {
        int i, j, k;
        coords(B, node_at(on, row), i, j, k);
        x[gix(B, i, j, k)] = acc;
    }
}
#endif
void coarse_gemv(const Box &B, Nodes on, const double *G, const double *b, double *x, double *cb, double *cx) {
#ifdef __CUDACC__
    if (on.n <= GATHER_GEMV_MAX) {
        if (on.n > 0)
            gather_gemv_kernel<<<(unsigned)((on.n * 32 + 255) / 256), 256, on.n * sizeof(double), stream_now>>>(
                B, on, G, b, x);
        return;
    }
#endif
    to_list(B, b, cb, on);
    gemv(on.n, G, cb, cx);
    from_list(B, cx, x, on);
}

/* Pack (unpack) the slab lo[e] <= coordinate < lo[e] + ext[e] of a ghosted vector into (from) buf. */
void pack(const Box &B, const double *v, double *buf, const int *lo_, const int *ext_, int unpack) {
    const int lo0 = lo_[0], lo1 = lo_[1], lo2 = lo_[2], e0 = ext_[0], e1 = ext_[1];
    const long n = (long)ext_[0] * ext_[1] * ext_[2];
    double *vv = (double *)v;
    each(n, LOOP(long t) {
        const int i = lo0 + (int)(t % e0);
        const long q = t / e0;
        const int j = lo1 + (int)(q % e1), k = lo2 + (int)(q / e1);
        const long g = gix(B, i, j, k);
        if (unpack) vv[g] = buf[t];
        else buf[t] = vv[g];
    });
}

/* One multicolour SOR pass over the nodes of one colour (bit d of `colour`: parity of the global index in dimension
 * d; L.par: the parity of this rank's box origin, so that every rank sweeps the serial sweep's colours). */
HD inline void sor_node(const Stencil &st, const double *S, const Box &B, const double *b, double *x, int i, int j,
                        int k, long r, double omega) {
    const long g = gix(B, i, j, k);
    const double rest = b[g] - offdiag(st, S, B, x, i, j, k, r);
    x[g] += omega * (rest / S[st.centre * B.size + r] - x[g]);
}
void sweep_colour(const Level &L, int colour, double omega) {
    const Box B = L.B;
    const Stencil st = L.st;
    const double *S = L.S, *b = L.b;
    double *x = L.x;
    if (L.a.act) {
        each(Nodes{L.a.by_colour + L.a.cstart[colour], L.a.cstart[colour + 1] - L.a.cstart[colour]}, LOOP(long r) {
            int i, j, k;
            coords(B, r, i, j, k);
            sor_node(st, S, B, b, x, i, j, k, r, omega);
        });
        return;
    }
    const int nx = B.n[0], ny = B.n[1], nz = B.n[2];
    const int cx = (colour & 1) ^ L.par[0], cy = ((colour >> 1) & 1) ^ L.par[1], cz = ((colour >> 2) & 1) ^ L.par[2];
    const int hx = (nx - cx + 1) / 2, hy = (ny - cy + 1) / 2, hz = (nz - cz + 1) / 2;
    if (hx <= 0 || hy <= 0 || hz <= 0) return;
    each((long)hx * hy * hz, LOOP(long t) {
        const int i = 2 * (int)(t % hx) + cx;
        const long q = t / hx;
        const int j = 2 * (int)(q % hy) + cy, k = 2 * (int)(q / hy) + cz;
        sor_node(st, S, B, b, x, i, j, k, i + (long)nx * (j + (long)ny * k), omega);
    });
}

/* A Jacobi sweep on level L with the per-node weights L.jw (ghosted; the smoother from smg_jacobi: two loops per
 * sweep, not one per colour): x += W r with r = b - A x from residual(), or the first sweep from x = 0, x = W b
 * (`first`: no residual, and no zeroing before it). */
void jacobi_sweep(const Level &L, int first) {
    const Box B = L.B;
    const double *w = L.jw, *v = first ? L.b : L.r;
    double *x = L.x;
    each(nodes(L), LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        x[g] = (first ? 0.0 : x[g]) + w[g] * v[g];
    });
}

/* One Jacobi sweep from x = 0 and the residual after it in one loop, where a level's smoothing is that one sweep:
 * x = W b and r = b - A W b, each neighbour's (W b) formed where it is read (the same products as x's, so the same
 * values as jacobi_sweep then residual). One rank only: a neighbour's weight across a rank boundary is not here. */
void jacobi_first_residual(const Level &L) {
    const Box B = L.B;
    const Stencil st = L.st;
    const double *S = L.S, *b = L.b, *w = L.jw;
    double *x = L.x, *res = L.r;
    each(nodes(L), LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        const double xg = w[g] * b[g];
        x[g] = xg;
        res[g] = b[g] - S[st.centre * B.size + t] * xg - offdiag_of(st, S, B, i, j, k, t, WeightedEntries{w, b});
    });
}

/* One Jacobi sweep after the coarse correction, from one vector into another: out = x + W (b - A x) (x's ghosts
 * current), the residual and the update of residual() then jacobi_sweep in one loop, the same arithmetic. */
void jacobi_into(const Level &L, const double *x, double *out) {
    const Box B = L.B;
    const Stencil st = L.st;
    const double *S = L.S, *b = L.b, *w = L.jw;
    each(nodes(L), LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        const double r = b[g] - S[st.centre * B.size + t] * x[g] - offdiag(st, S, B, x, i, j, k, t);
        out[g] = x[g] + w[g] * r;
    });
}

/* Where CG wants sums of the V-cycle's result z = out and its input r = L.b right after it (zᵀz and zᵀr into
 * sc[o0], sc[o1]): the V-cycle's last sweep on level 0, when a Jacobi sweep on one rank, computes them too
 * (jacobi_into_sums), so that CG's pass of its own over z and r, and its launch, go (issue 27: a masked grid's
 * level 0 is smoothed by Jacobi). */
struct Sums {
    double *partial, *sc;
    int o0, o1;
};

/* jacobi_into, and the sums of `sums` of its result over the level's nodes: the same sweep, and the sums CG's own
 * pass would give (the same reduction over the same nodes), so the same bits */
void jacobi_into_sums(const Level &L, const double *x, double *out, const Sums &sums) {
    const Box B = L.B;
    const Stencil st = L.st;
    const double *S = L.S, *b = L.b, *w = L.jw;
    reduce(nodes(L), LOOP(long t, double *acc) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        const double r = b[g] - S[st.centre * B.size + t] * x[g] - offdiag(st, S, B, x, i, j, k, t);
        const double z = x[g] + w[g] * r;
        out[g] = z;
        acc[0] += z * z;
        acc[1] += z * b[g];
    }, sums.partial, sums.sc, sums.o0, sums.o1, -1);
}

void residual(const Level &L) {
    const Box B = L.B;
    const Stencil st = L.st;
    const double *S = L.S, *b = L.b, *x = L.x;
    double *res = L.r;
    each(nodes(L), LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        res[g] = b[g] - S[st.centre * B.size + t] * x[g] - offdiag(st, S, B, x, i, j, k, t);
    });
}

/* Zero level L's ghosted vector v before a V-cycle writes it: the whole of it, or (active nodes) the active nodes
 * and, on several ranks (c), the ghost faces that exchanges fill (the smoother's first colour reads them as zero)
 * — the inactive nodes are zero already, and so are the ghosts beyond the grid. */
void clear(const Level &L, double *v, const Comm *c) {
    const Box B = L.B;
    if (!L.a.act) {
        mem_zero(v, B.gsize);
        return;
    }
    each(nodes(L), LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        v[gix(B, i, j, k)] = 0.0;
    });
    if (!c) return;
    for (int d = 0; d < 3; ++d) {
        if (!B.w[d]) continue;
        int lo[3], ext[3];
        for (int e = 0; e < 3; ++e) {
            lo[e] = -B.w[e];
            ext[e] = B.g[e];
        }
        ext[d] = 1;
        for (int s = 0; s < 2; ++s) {
            if (c->nbr[d][s] < 0) continue;
            lo[d] = s ? B.n[d] : -1;
            const int lo0 = lo[0], lo1 = lo[1], lo2 = lo[2], e0 = ext[0], e1 = ext[1];
            each((long)ext[0] * ext[1] * ext[2], LOOP(long t) {
                const long q = t / e0;
                v[gix(B, lo0 + (int)(t % e0), lo1 + (int)(q % e1), lo2 + (int)(q / e1))] = 0.0;
            });
        }
    }
}

/* x = b / diagonal at level L's inactive nodes, on owned-layout vectors: level 0's rows that couple to nothing,
 * solved on their own (the box V-cycle's smoother gives the same with omega = 1, to round-off) */
void solve_outside(const Level &L, const double *b, double *x) {
    const double *S = L.S;
    const long D = (long)L.st.centre * L.B.size;
    each(outside(L), LOOP(long t) { x[t] = b[t] / S[D + t]; });
}

/* The start of a CG solve on a level 0 with inactive nodes: their rows (a diagonal alone) solved into the result
 * xo (owned layout) now, which CG then never touches there, and their part of ‖B b‖² (B: the preconditioner, which
 * solves those rows exactly too; none: the identity) into sc[slot] — the stopping test of a nonzero initial guess
 * is relative to ‖B b‖ over every row, as the box solve's. sc[slot] = 0 without inactive nodes. */
void start_outside(const Level &L, int precond, const double *b, double *xo, double *partial, double *sc, int slot) {
    const double *S = L.S;
    const long D = (long)L.st.centre * L.B.size;
    reduce(outside(L), LOOP(long t, double *acc) {
        const double v = b[t] / S[D + t], bb = precond ? v : b[t];
        xo[t] = v;
        acc[0] += bb * bb;
    }, partial, sc, slot, -1, -1);
}

/* b_coarse = Pᵀ r_fine */
void restrict_residual(const Level &F, const Level &C) {
    const Box FB = F.B, CB = C.B;
    const Dim X = F.t[0], Y = F.t[1], Z = F.t[2];
    const double *r = F.r;
    double *bc = C.b;
    each(nodes(C), LOOP(long rc) {
        int I, J, K;
        coords(CB, rc, I, J, K);
        double acc = 0.0;
        for (int a = -1; a <= 1; ++a) {
            const double wz = a == 0 ? 1.0 : (a < 0 ? Z.wl[K] : Z.wr[K]);
            if (wz == 0.0) continue;
            const int k = Z.pos[K] + a;
            for (int bb = -1; bb <= 1; ++bb) {
                const double wy = bb == 0 ? 1.0 : (bb < 0 ? Y.wl[J] : Y.wr[J]);
                if (wy == 0.0) continue;
                const int j = Y.pos[J] + bb;
                for (int c = -1; c <= 1; ++c) {
                    const double wx = c == 0 ? 1.0 : (c < 0 ? X.wl[I] : X.wr[I]);
                    if (wx == 0.0) continue;
                    acc += wz * wy * wx * r[gix(FB, X.pos[I] + c, j, k)];
                }
            }
        }
        bc[gix(CB, I, J, K)] = acc;
    });
}

/* x_fine += P xc, xc the coarse level's result (ghosted) */
void prolong_add(const Level &F, const Level &C, const double *xc) {
    const Box FB = F.B, CB = C.B;
    const Dim X = F.t[0], Y = F.t[1], Z = F.t[2];
    double *x = F.x;
    each(nodes(F), LOOP(long t) {
        int i, j, k;
        coords(FB, t, i, j, k);
        double acc = 0.0;
        for (int a = 0; a < 2; ++a) {
            const double wz = a ? Z.w1[k] : Z.w0[k];
            if (wz == 0.0) continue;
            const int K = a ? Z.c1[k] : Z.c0[k];
            for (int bb = 0; bb < 2; ++bb) {
                const double wy = bb ? Y.w1[j] : Y.w0[j];
                if (wy == 0.0) continue;
                const int J = bb ? Y.c1[j] : Y.c0[j];
                for (int c = 0; c < 2; ++c) {
                    const double wx = c ? X.w1[i] : X.w0[i];
                    if (wx == 0.0) continue;
                    acc += wz * wy * wx * xc[gix(CB, c ? X.c1[i] : X.c0[i], J, K)];
                }
            }
        }
        x[gix(FB, i, j, k)] += acc;
    });
}

}  /* namespace smg */

using namespace smg;

/* --- the seam: halo exchange, reductions, gather/scatter onto rank 0 ------------------------------------------- */

/* Fill the ghost layers of level l's vector v from the neighbours' owned nodes: one phase per dimension, each
 * sending the slab next to each face (with the ghosts of the dimensions before it, so edges and corners arrive),
 * packed on the device, staged through host memory. No-op on one rank. */
static int exchange_staged(MG *mg, int l, double *v) {
    Comm *c = mg->c;
    const double t0 = seconds();
    const Box &B = mg->lev[l].B;
    int err = 0;
    for (int d = 0; d < mg->dim && !err; ++d) {
        if (c->nbr[d][0] < 0 && c->nbr[d][1] < 0) continue;
        int lo[3], ext[3];
        for (int e = 0; e < 3; ++e) {
            lo[e] = e < d ? -B.w[e] : 0;
            ext[e] = e < d ? B.g[e] : B.n[e];
        }
        ext[d] = 1;
        const long m = (long)ext[0] * ext[1] * ext[2];
        if (m > c->face) return 1;
        for (int s = 0; s < 2; ++s)
            if (c->nbr[d][s] >= 0) {
                lo[d] = s ? B.n[d] - 1 : 0;
                pack(B, v, c->dev_send + s * c->face, lo, ext, 0);
            }
#ifdef __CUDACC__
        err |= mem_get(c->host_send, c->dev_send, (size_t)(c->face + m) * sizeof(double));
#endif
        MPI_Request req[4];
        int nreq = 0;
        for (int s = 0; s < 2; ++s)
            if (c->nbr[d][s] >= 0) {
                /* tag: the direction of travel (0 towards higher coordinates), so both faces of a pair match */
                err |= MPI_Irecv(c->host_recv + s * c->face, (int)m, MPI_DOUBLE, c->nbr[d][s], 1 - s, c->comm,
                                 &req[nreq++]) != MPI_SUCCESS;
                err |= MPI_Isend(c->host_send + s * c->face, (int)m, MPI_DOUBLE, c->nbr[d][s], s, c->comm,
                                 &req[nreq++]) != MPI_SUCCESS;
            }
        err |= MPI_Waitall(nreq, req, MPI_STATUSES_IGNORE) != MPI_SUCCESS;
#ifdef __CUDACC__
        err |= mem_put(c->dev_recv, c->host_recv, (size_t)(c->face + m) * sizeof(double));
#endif
        for (int s = 0; s < 2; ++s)
            if (c->nbr[d][s] >= 0) {
                lo[d] = s ? B.n[d] : -1;
                pack(B, v, c->dev_recv + s * c->face, lo, ext, 1);
            }
        c->bytes += 2 * m * (long)sizeof(double) * ((c->nbr[d][0] >= 0) + (c->nbr[d][1] >= 0));
#ifdef __CUDACC__
        c->host_bytes += 2 * (c->face + m) * (long)sizeof(double);
#endif
    }
    c->n_exchange++;
    c->t_exchange += seconds() - t0;
    return err | launch_error();
}

#ifdef __CUDACC__
/* The CUDA IPC transport, ordered on the device alone: a kernel that writes into another rank's memory raises a flag
 * there when done (its last block, after every block has fenced its writes system-wide), and the kernel that reads
 * waits for the flag. The host only queues launches, so it runs on ahead while the GPUs talk, and a V-cycle over
 * the ranks can be one CUDA graph; the one host synchronisation left is the CG iteration's reduction.
 *
 * Where side s of dimension d of exchange parity p lands in a receive buffer: 12 slots of c->face doubles (a
 * neighbour in another dimension may write its slot while this rank still unpacks the last one, and a neighbour
 * may be one exchange ahead: it packs exchange k + 2 into the slot of k only after this rank has flagged k + 1,
 * which it does after unpacking k). After the slots, this rank's control words (zeroed at the start): */
enum {
    C_SEQ = 6,      /* 0..5: "written" flags, (d, s) -> 2d + s, set by the neighbour on side s of dimension d to the
                     * number of the exchange it delivered; C_SEQ: halo exchanges finished here */
    C_GSEQ,         /* gathers sent */
    C_SSEQ,         /* scatters received */
    C_RSEQ,         /* rank 0: scatters sent */
    C_SFLAG,        /* set by rank 0 to the number of the scatter it has made ready (polled here, not over the link) */
    C_DONE0,        /* finished-block counters of the writing and of the reading kernels (one kernel at a time each) */
    C_DONE1,
    IPC_CTRL = 16
};
static long slot(const Comm *c, long p, int d, int s) { return ((p * 3 + d) * 2 + s) * c->face; }
static unsigned long long *ipc_ctrl(double *recv, long face) { return (unsigned long long *)(recv + 12 * face); }
static unsigned grid_for(long n) { return (unsigned)(n < 1024L * 256 ? (n + 255) / 256 : 1024); }

__device__ inline unsigned long long vload(const unsigned long long *p) { return *(volatile const unsigned long long *)p; }
__device__ inline void spin_until(const unsigned long long *p, unsigned long long v) { while (vload(p) < v) {} }
/* true in the grid's last block to get here, once every block's writes are visible system-wide; all threads call */
__device__ inline bool last_block(unsigned long long *ctrl, int counter) {
    __shared__ bool last;
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned int *done = (unsigned int *)(ctrl + counter);
        last = atomicAdd(done, 1u) == gridDim.x - 1;
        if (last) *done = 0;
    }
    __syncthreads();
    return last;
}
__device__ inline void raise_flag(unsigned long long *flag, unsigned long long value) {
    __threadfence_system();
    *(volatile unsigned long long *)flag = value;
}

/* One side of a dimension's exchange: the slab lo .. lo + ext of the ghosted vector and the slot of parity 0 it
 * goes to (pack) or comes from (unpack); m = 0 where that side has no neighbour. */
struct Face {
    double *buf;
    int lo[3], ext[3];
    long m;
};
HD inline long face_gix(const Box &B, const Face &f, long t) {
    const int i = f.lo[0] + (int)(t % f.ext[0]);
    const long q = t / f.ext[0];
    return gix(B, i, f.lo[1] + (int)(q % f.ext[1]), f.lo[2] + (int)(q / f.ext[1]));
}

/* Both faces of one dimension packed straight into the neighbours' receive slots, then their flags raised. */
__global__ void pack_signal_kernel(Box B, const double *v, Face f0, Face f1, unsigned long long *flag0,
                                   unsigned long long *flag1, unsigned long long *ctrl, long face) {
    const unsigned long long seq = vload(ctrl + C_SEQ) + 1;
    const long off = (long)(seq & 1) * 6 * face, n = f0.m + f1.m;
    for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (long)gridDim.x * blockDim.x) {
        if (t < f0.m) f0.buf[off + t] = v[face_gix(B, f0, t)];
        else f1.buf[off + t - f0.m] = v[face_gix(B, f1, t - f0.m)];
    }
    if (last_block(ctrl, C_DONE0) && threadIdx.x == 0) {
        if (flag0) raise_flag(flag0, seq);
        if (flag1) raise_flag(flag1, seq);
    }
}

/* Every block waits until both neighbours have flagged this exchange, then the faces go into the ghost layers (read
 * past L1: the bytes came from another GPU). The exchange's last kernel counts it finished. */
__global__ void wait_unpack_kernel(Box B, double *v, Face f0, Face f1, unsigned long long *ctrl, int d, long face,
                                   int final) {
    const unsigned long long seq = vload(ctrl + C_SEQ) + 1;
    const long off = (long)(seq & 1) * 6 * face, n = f0.m + f1.m;
    if (threadIdx.x == 0) {
        if (f0.m) spin_until(ctrl + 2 * d, seq);
        if (f1.m) spin_until(ctrl + 2 * d + 1, seq);
        __threadfence_system();
    }
    __syncthreads();
    for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (long)gridDim.x * blockDim.x) {
        if (t < f0.m) v[face_gix(B, f0, t)] = __ldcg(f0.buf + off + t);
        else v[face_gix(B, f1, t - f0.m)] = __ldcg(f1.buf + off + t - f0.m);
    }
    if (final && last_block(ctrl, C_DONE1) && threadIdx.x == 0) ctrl[C_SEQ] = seq;
}

/* This rank's box of the top level (ghosted or not) into its part of rank 0's gather buffer, then rank 0's flag for
 * this rank raised. */
__global__ void gather_put_kernel(Box B, const double *v, int ghosted, double *dst, const double *v2, double *dst2,
                                  unsigned long long *ctrl, unsigned long long *flag) {
    for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < B.size; t += (long)gridDim.x * blockDim.x) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long at = ghosted ? gix(B, i, j, k) : t;
        dst[t] = v[at];
        if (v2) dst2[t] = v2[at];
    }
    if (last_block(ctrl, C_DONE0) && threadIdx.x == 0) {
        const unsigned long long g = ctrl[C_GSEQ] + 1;
        ctrl[C_GSEQ] = g;
        raise_flag(flag, g);
    }
}
/* rank 0: once every rank has flagged this gather, the boxes into natural order */
__global__ void gather_arrange_kernel(long n, const long *map, const double *all, double *nat, const double *all2,
                                      double *nat2, const unsigned long long *ctrl, const unsigned long long *flags,
                                      int size) {
    if (threadIdx.x == 0) {
        const unsigned long long g = vload(ctrl + C_GSEQ);
        for (int r = 0; r < size; ++r) spin_until(flags + r, g);
        __threadfence_system();
    }
    __syncthreads();
    for (long q = (long)blockIdx.x * blockDim.x + threadIdx.x; q < n; q += (long)gridDim.x * blockDim.x) {
        nat[map[q]] = __ldcg(all + q);
        if (nat2) nat2[map[q]] = __ldcg(all2 + q);
    }
}
/* rank 0: natural order back into the boxes, then every rank's scatter flag raised in that rank's memory (each
 * rank polls its own memory: a thousand blocks polling rank 0's over the link would slow rank 0 down) */
__global__ void scatter_arrange_kernel(long n, const long *map, double *all, const double *nat,
                                       unsigned long long *ctrl, unsigned long long *const *flags, int size) {
    for (long q = (long)blockIdx.x * blockDim.x + threadIdx.x; q < n; q += (long)gridDim.x * blockDim.x)
        all[q] = nat[map[q]];
    if (last_block(ctrl, C_DONE0) && threadIdx.x == 0) {
        const unsigned long long s = ctrl[C_RSEQ] + 1;
        ctrl[C_RSEQ] = s;
        __threadfence_system();
        for (int r = 0; r < size; ++r) *(volatile unsigned long long *)flags[r] = s;
    }
}
/* every rank: once rank 0 has flagged this scatter, its part into the box (ghosted or not) */
__global__ void scatter_get_kernel(Box B, const double *src, double *v, int ghosted, unsigned long long *ctrl) {
    const unsigned long long s = vload(ctrl + C_SSEQ) + 1;
    if (threadIdx.x == 0) {
        spin_until(ctrl + C_SFLAG, s);
        __threadfence_system();
    }
    __syncthreads();
    for (long t = (long)blockIdx.x * blockDim.x + threadIdx.x; t < B.size; t += (long)gridDim.x * blockDim.x) {
        const double val = __ldcg(src + t);
        if (ghosted) {
            int i, j, k;
            coords(B, t, i, j, k);
            v[gix(B, i, j, k)] = val;
        } else {
            v[t] = val;
        }
    }
    if (last_block(ctrl, C_DONE1) && threadIdx.x == 0) ctrl[C_SSEQ] = s;
}

/* The halo exchange through CUDA IPC: per dimension one kernel packs both faces into the neighbours' receive slots
 * and raises their flags, one waits for this rank's flags and unpacks. */
static int exchange_ipc(MG *mg, int l, double *v) {
    Comm *c = mg->c;
    const double t0 = seconds();
    const Box &B = mg->lev[l].B;
    int final = -1;
    for (int d = 0; d < mg->dim; ++d)
        if (c->nbr[d][0] >= 0 || c->nbr[d][1] >= 0) final = d;
    for (int d = 0; d <= final; ++d) {
        if (c->nbr[d][0] < 0 && c->nbr[d][1] < 0) continue;
        Face out[2], in[2];
        unsigned long long *theirs[2] = {0, 0};
        for (int s = 0; s < 2; ++s) {
            for (int e = 0; e < 3; ++e) {
                out[s].lo[e] = in[s].lo[e] = e < d ? -B.w[e] : 0;
                out[s].ext[e] = in[s].ext[e] = e < d ? B.g[e] : B.n[e];
            }
            out[s].ext[d] = in[s].ext[d] = 1;
            out[s].lo[d] = s ? B.n[d] - 1 : 0;
            in[s].lo[d] = s ? B.n[d] : -1;
            const long m = (long)out[s].ext[0] * out[s].ext[1] * out[s].ext[2];
            if (m > c->face) return 1;
            const int has = c->nbr[d][s] >= 0;
            out[s].m = in[s].m = has ? m : 0;
            out[s].buf = has ? c->nbr_recv[d][s] + slot(c, 0, d, 1 - s) : 0;
            in[s].buf = c->dev_recv + slot(c, 0, d, s);
            if (has) theirs[s] = ipc_ctrl(c->nbr_recv[d][s], c->face) + 2 * d + (1 - s);
            c->bytes += out[s].m * (long)sizeof(double);
        }
        const unsigned blocks = grid_for(out[0].m + out[1].m);
        pack_signal_kernel<<<blocks, 256, 0, stream_now>>>(B, v, out[0], out[1], theirs[0], theirs[1], c->ctrl,
                                                           c->face);
        wait_unpack_kernel<<<blocks, 256, 0, stream_now>>>(B, v, in[0], in[1], c->ctrl, d, c->face, d == final);
    }
    c->n_exchange++;
    c->t_exchange += seconds() - t0;
    return launch_error();
}
#endif

/* Fill the ghost layers of level l's vector v from the neighbours' owned nodes, by the transport in force. No-op
 * on one rank. */
static int exchange(MG *mg, int l, double *v) {
    if (!mg->c) return 0;
#ifdef __CUDACC__
    if (mg->c->ipc) return exchange_ipc(mg, l, v);
#endif
    return exchange_staged(mg, l, v);
}

/* The global sums of n host scalars (no-op on one rank). */
static int allreduce(MG *mg, double *h, int n) {
    if (!mg->c) return 0;
    return MPI_Allreduce(MPI_IN_PLACE, h, n, MPI_DOUBLE, MPI_SUM, mg->c->comm) != MPI_SUCCESS;
}

/* The top level's vector v (ghosted when `ghosted`, else owned layout) from every rank into the whole grid in
 * natural order, in rank 0's device buffer dst; with v2, a second vector into dst2 in the same pass (the root
 * layout's b and x: one flag, and no host barrier between two gathers). Host staging: through pinned host
 * buffers and MPI_Gatherv. IPC: each rank's kernel writes its box into rank 0's buffer directly and flags it,
 * rank 0's kernel waits for every flag and rearranges (device work only). Rank 0 must have read its buffer before
 * the ranks write it again: the next scatter orders that. */
static int gather_root(MG *mg, const double *v, int ghosted, double *dst, const double *v2 = 0, double *dst2 = 0) {
    Comm *c = mg->c;
    const double t0 = seconds();
    const Box &B = mg->lev[mg->nlev - 1].B;
    int err = 0;
#ifdef __CUDACC__
    if (c->ipc) {
        double *slot = c->root_all + c->displs[c->rank];
        gather_put_kernel<<<grid_for(B.size), 256, 0, stream_now>>>(B, v, ghosted, slot, v2, slot + c->total,
                                                                     c->ctrl, c->root_ctrl + c->rank);
        if (c->rank == 0)
            gather_arrange_kernel<<<grid_for(c->total), 256, 0, stream_now>>>(c->total, c->dev_map, c->dev_all, dst,
                                                                               c->dev_all + c->total, v2 ? dst2 : 0,
                                                                               c->ctrl, c->root_ctrl, c->size);
        c->n_gather++;
        c->bytes += B.size * (long)sizeof(double);
        c->t_gather += seconds() - t0;
        return err | launch_error();
    }
#endif
    if (v2) return gather_root(mg, v, ghosted, dst) | gather_root(mg, v2, ghosted, dst2);
    const double *owned = v;
    if (ghosted) {
        to_owned(B, v, c->dev_box, range(B.size));
        owned = c->dev_box;
    }
#ifdef __CUDACC__
    err |= mem_get(c->host_box, owned, (size_t)B.size * sizeof(double));
    owned = c->host_box;
    c->host_bytes += B.size * (long)sizeof(double) + (c->rank == 0 ? c->total * (long)sizeof(double) : 0);
#endif
    err |= MPI_Gatherv(owned, (int)B.size, MPI_DOUBLE, c->host_all, c->counts, c->displs, MPI_DOUBLE, 0, c->comm)
           != MPI_SUCCESS;
    if (c->rank == 0) {
        for (int p = 0; p < c->size; ++p) {
            const int *s = c->box_start + 3 * p, *n = c->box_size + 3 * p;
            const double *src = c->host_all + c->displs[p];
            for (int k = 0; k < n[2]; ++k)
                for (int j = 0; j < n[1]; ++j)
                    memcpy(c->host_nat + s[0] + (long)c->global_n[0] * ((s[1] + j) + (long)c->global_n[1] * (s[2] + k)),
                           src + (long)n[0] * (j + (long)n[1] * k), (size_t)n[0] * sizeof(double));
        }
        err |= mem_put(dst, c->host_nat, (size_t)c->total * sizeof(double));
    }
    c->n_gather++;
    c->bytes += B.size * (long)sizeof(double);
    c->t_gather += seconds() - t0;
    return err;
}

/* The reverse of gather_root: rank 0's device buffer src (natural order) into every rank's part of the top
 * level's v. */
static int scatter_root(MG *mg, const double *src, double *v, int ghosted) {
    Comm *c = mg->c;
    const double t0 = seconds();
    const Box &B = mg->lev[mg->nlev - 1].B;
    int err = 0;
#ifdef __CUDACC__
    if (c->ipc) {
        if (c->rank == 0)
            scatter_arrange_kernel<<<grid_for(c->total), 256, 0, stream_now>>>(c->total, c->dev_map, c->dev_all, src,
                                                                                c->ctrl, c->dev_sflags, c->size);
        scatter_get_kernel<<<grid_for(B.size), 256, 0, stream_now>>>(B, c->root_all + c->displs[c->rank], v,
                                                                      ghosted, c->ctrl);
        c->n_gather++;
        c->bytes += B.size * (long)sizeof(double);
        c->t_gather += seconds() - t0;
        return err | launch_error();
    }
#endif
    if (c->rank == 0) {
        err |= mem_get(c->host_nat, src, (size_t)c->total * sizeof(double));
        for (int p = 0; p < c->size; ++p) {
            const int *s = c->box_start + 3 * p, *n = c->box_size + 3 * p;
            double *dst = c->host_all + c->displs[p];
            for (int k = 0; k < n[2]; ++k)
                for (int j = 0; j < n[1]; ++j)
                    memcpy(dst + (long)n[0] * (j + (long)n[1] * k),
                           c->host_nat + s[0] + (long)c->global_n[0] * ((s[1] + j) + (long)c->global_n[1] * (s[2] + k)),
                           (size_t)n[0] * sizeof(double));
        }
    }
    err |= MPI_Scatterv(c->host_all, c->counts, c->displs, MPI_DOUBLE, c->host_box, (int)B.size, MPI_DOUBLE, 0,
                        c->comm) != MPI_SUCCESS;
    double *owned = ghosted ? c->dev_box : v;
    err |= mem_put(owned, c->host_box, (size_t)B.size * sizeof(double));
#ifdef __CUDACC__
    c->host_bytes += B.size * (long)sizeof(double) + (c->rank == 0 ? c->total * (long)sizeof(double) : 0);
#endif
    if (ghosted) from_owned(B, c->dev_box, v, range(B.size));
    c->n_gather++;
    c->bytes += B.size * (long)sizeof(double);
    c->t_gather += seconds() - t0;
    return err | launch_error();
}

extern "C" int smg_apply(MG *mg, const double *b, double *x);
extern "C" int smg_cg(MG *mg, int precond, const double *b, double *x, double rtol, double atol, double dtol,
                      int maxit, int zero_guess, int *its, double *rnorm, int *reason);

/* The coarsest level's nodes that its dense solve covers, in order: smg_coarse_list's, or all of them */
static Nodes coarse_nodes(const MG *mg) {
    return mg->clist ? Nodes{mg->clist, mg->nclist} : range(mg->lev[mg->nlev - 1].B.size);
}

/* x = M b at the distributed top level: b gathered onto rank 0, one V-cycle of the serial tail there (or its dense
 * inverse), x scattered back with its ghosts. */
static int coarse_on_root(MG *mg, const double *b, double *x) {
    Comm *c = mg->c;
    int err = gather_root(mg, b, 1, c->dev_nat_b);
    if (c->rank == 0) err |= smg_apply(mg->tail, c->dev_nat_b, c->dev_nat_x);
    err |= scatter_root(mg, c->dev_nat_x, x, 1);
    return err | exchange(mg, mg->nlev - 1, x);
}

/* x = M b, M the V-cycle, on level 0's ghosted vectors (x is overwritten). Asynchronous on one GPU: the result is
 * ordered before any later work on the default stream. On several ranks the ghosts are exchanged wherever a loop
 * reads a neighbour that the last loop changed: before each colour but the first (x starts at zero; per_sweep:
 * before each sweep but the first), before the residual, before the restriction, and after each level's
 * correction. Returns non-zero on an error.
 *
 * A level smoothed by Jacobi (the GPU's default) fuses each sweep with a residual: before the coarse correction
 * the first sweep (from x = 0) and the residual after it are one loop (one rank), and after it each sweep is one
 * loop from one vector into another, alternating between the level's x and its r (free after the restriction),
 * the last into the level's result `out` (level 0's: the caller's x, its working vector then mg->x0). On the GPU
 * the coarse levels cost launches more than bytes, and a fused sweep saves one of them. */
static int vcycle(MG *mg, const double *b, double *x, Clock *clock, const Sums *sums = 0) {
    Level *L = mg->lev;
    const int top = mg->nlev - 1, colours = 1 << mg->dim;
    int err = 0;
    double *out[MAX_LEVELS];
    L[0].b = (double *)b;
    L[0].x = top > 0 && L[0].jw ? mg->x0 : x;
    for (int l = 0; l <= top; ++l)
        out[l] = l == 0 ? x : l < top && L[l].jw && mg->nu[l] % 2 ? L[l].r : L[l].x;
    if (clock) clock->mark();
    for (int l = 0; l < top; ++l) {
        const int nu = mg->nu[l];
        if (L[l].jw) {
            /* Jacobi from x = 0: the first sweep needs no zeroing (it writes every node a loop visits; the rest
             * stay zero, or are ghosts an exchange fills before they are read) */
            if (!mg->c) {
                jacobi_first_residual(L[l]);
            } else {
                jacobi_sweep(L[l], 1);
                err |= exchange(mg, l, L[l].x);
                residual(L[l]);
            }
            for (int it = 1; it < nu; ++it) {
                jacobi_sweep(L[l], 0);
                err |= exchange(mg, l, L[l].x);
                residual(L[l]);
            }
            if (clock) clock->mark();
        } else {
            clear(L[l], L[l].x, mg->c);
            for (int it = 0; it < nu; ++it)
                for (int c = 0; c < colours; ++c) {
                    if (it + c > 0 && (!mg->per_sweep || c == 0)) err |= exchange(mg, l, L[l].x);
                    sweep_colour(L[l], c, mg->omega);
                }
            if (clock) clock->mark();
            err |= exchange(mg, l, L[l].x);
            residual(L[l]);
        }
        err |= exchange(mg, l, L[l].r);
        restrict_residual(L[l], L[l + 1]);
        if (clock) clock->mark();
    }
    if (mg->c) {
        err |= coarse_on_root(mg, L[top].b, L[top].x);
    } else {
        coarse_gemv(L[top].B, coarse_nodes(mg), mg->G, L[top].b, L[top].x, mg->cb, mg->cx);
    }
    if (clock) clock->mark();
    for (int l = top - 1; l >= 0; --l) {
        const int nu = mg->nu[l];
        prolong_add(L[l], L[l + 1], out[l + 1]);
        if (clock) clock->mark();
        if (L[l].jw) {
            double *src = L[l].x;
            for (int it = 0; it < nu; ++it) {
                double *dst = it == nu - 1 ? out[l] : src == L[l].r ? L[l].x : L[l].r;
                err |= exchange(mg, l, src);
                if (sums && l == 0 && it == nu - 1) jacobi_into_sums(L[l], src, dst, *sums);
                else jacobi_into(L[l], src, dst);
                src = dst;
            }
        } else {
            for (int it = 0; it < nu; ++it)
                for (int c = colours - 1; c >= 0; --c) {
                    if (!mg->per_sweep || c == colours - 1) err |= exchange(mg, l, L[l].x);
                    sweep_colour(L[l], c, mg->omega);
                }
        }
        if (l > 0) err |= exchange(mg, l, out[l]);
        if (clock) clock->mark();
    }
    return err | launch_error();
}

#ifdef __CUDACC__
/* The work `enqueue()` issues (returning non-zero on an error), captured on mg's capture stream as one CUDA graph
 * and instantiated; 0 on an error. */
template <class F> static cudaGraph_t captured_graph(MG *mg, F enqueue) {
    if (!mg->capture && cudaStreamCreateWithFlags(&mg->capture, cudaStreamNonBlocking) != cudaSuccess) return 0;
    cudaGraph_t graph = 0;
    stream_now = mg->capture;
    int err = cudaStreamBeginCapture(mg->capture, cudaStreamCaptureModeThreadLocal) != cudaSuccess;
    if (!err) err = enqueue();
    err |= cudaStreamEndCapture(mg->capture, &graph) != cudaSuccess;
    stream_now = 0;
    if (err && graph) {
        cudaGraphDestroy(graph);
        graph = 0;
    }
    return graph;
}
template <class F> static cudaGraphExec_t capture(MG *mg, F enqueue) {
    cudaGraph_t graph = captured_graph(mg, enqueue);
    cudaGraphExec_t exec = 0;
    const int err = !graph || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess;
    if (graph) cudaGraphDestroy(graph);
    return err ? 0 : exec;
}

static Graph *captured(MG *mg, const double *b, double *x) {
    for (int g = 0; g < mg->n_graphs; ++g)
        if (mg->graph[g].b == b && mg->graph[g].x == x) return &mg->graph[g];
    Comm *c = mg->c;
    const long ne = c ? c->n_exchange : 0, ng = c ? c->n_gather : 0, nb = c ? c->bytes : 0;
    const cudaGraphExec_t exec = capture(mg, [&] { return vcycle(mg, b, x, 0); });
    Graph made = {b, x, exec, 0, 0, 0};
    if (c) {        /* counted per launch, not at capture */
        made.n_exchange = c->n_exchange - ne;
        made.n_gather = c->n_gather - ng;
        made.bytes = c->bytes - nb;
        c->n_exchange = ne;
        c->n_gather = ng;
        c->bytes = nb;
    }
    if (!exec) return 0;
    Graph &g = mg->graph[mg->next_graph];
    if (mg->next_graph < mg->n_graphs) cudaGraphExecDestroy(g.exec);
    else mg->n_graphs++;
    g = made;
    mg->next_graph = (mg->next_graph + 1) % MAX_GRAPHS;
    return &g;
}
#endif

/* the V-cycle on level 0's ghosted vectors, through a CUDA graph where it can be one (not while another V-cycle is
 * being captured: rank 0's serial tail inside the distributed one) */
static int vcycle_g(MG *mg, const double *b, double *x) {
#ifdef __CUDACC__
    if (mg->graphs && (!mg->c || mg->c->ipc) && !stream_now) {
        Graph *g = captured(mg, b, x);
        if (!g) return 1;
        if (Comm *c = mg->c) {
            c->n_exchange += g->n_exchange;
            c->n_gather += g->n_gather;
            c->bytes += g->bytes;
        }
        return cudaGraphLaunch(g->exec, 0) != cudaSuccess;
    }
#endif
    return vcycle(mg, b, x, 0);
}

/* Whether vcycle() computes CG's sums of its result in its last sweep (Sums): one rank, level 0 smoothed by Jacobi
 * after a coarse correction */
static int sums_in_vcycle(const MG *mg) {
    return !mg->c && mg->nlev > 1 && mg->lev[0].jw && mg->nu[0] >= 1;
}

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
    for (int l = 0; l < MAX_LEVELS; ++l) mg->nu[l] = nu;
    mg->graphs = 1;
    return mg;
}

/* Level l: this rank's owned sizes n[3] (n[2] = 1 in 2D) starting at global index start[3], the `na` stencil points
 * it uses as codes s = (di+1) + 3(dj+1) + 9(dk+1), and their coefficients S (na x owned size, host memory). */
int smg_level(MG *mg, int l, const int *n, const int *start, int na, const int *codes, const double *S) {
    Level &L = mg->lev[l];
    Box &B = L.B;
    for (int d = 0; d < 3; ++d) {
        B.n[d] = n[d];
        B.w[d] = d < mg->dim ? 1 : 0;
        B.g[d] = n[d] + 2 * B.w[d];
        L.par[d] = start[d] & 1;
    }
    B.size = (long)n[0] * n[1] * n[2];
    B.gsize = (long)B.g[0] * B.g[1] * B.g[2];
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
    L.S = upload(mg, S, (long)na * B.size);
    L.r = alloc_ghosted(mg, B);
    if (l > 0) {
        L.x = alloc_ghosted(mg, B);
        L.b = alloc_ghosted(mg, B);
    } else {
        mg->in_b = alloc_ghosted(mg, B);
        mg->in_x = alloc_ghosted(mg, B);
    }
    return mg->err;
}

/* Level l's active owned nodes (nact, ascending) and inactive ones (nout, ascending; level 0's are solved on their
 * own), host memory; after smg_level. The caller's promise, which makes skipping the others exact (see "Active
 * nodes"): on level 0 an inactive node's row and column hold its diagonal alone; on a coarser level the active
 * nodes hold every node whose restriction support has an active finer node, and an inactive node's row and
 * column hold its diagonal alone. */
int smg_active(MG *mg, int l, long nact, const int *act, long nout, const int *out) {
    Level &L = mg->lev[l];
    const Box &B = L.B;
    if (nact + nout != B.size) return mg->err = 1;
    const int colours = 1 << mg->dim;
    long count[9] = {0};
    const size_t bytes = (size_t)(nact > 0 ? nact : 1) * sizeof(int);
    int *col = (int *)malloc(bytes), *by = (int *)malloc(bytes);
    if (!col || !by) {
        free(col);
        free(by);
        return mg->err = 1;
    }
    for (long a = 0; a < nact; ++a) {           /* the smoother's colour of each (sweep_colour's rule) */
        int i, j, k;
        coords(B, act[a], i, j, k);
        col[a] = ((i & 1) ^ L.par[0]) | (((j & 1) ^ L.par[1]) << 1) | (((k & 1) ^ L.par[2]) << 2);
        if (col[a] >= colours) col[a] = 0;      /* unreachable: par and k are 0 beyond the grid's dimensions */
        count[col[a] + 1]++;
    }
    for (int c = 0; c < colours; ++c) count[c + 1] += count[c];
    for (int c = 0; c <= colours; ++c) L.a.cstart[c] = count[c];
    for (long a = 0; a < nact; ++a) by[count[col[a]]++] = act[a];
    L.a.act = upload(mg, act, nact);
    L.a.nact = nact;
    L.a.by_colour = upload(mg, by, nact);
    L.a.out = upload(mg, out, nout);
    L.a.nout = nout;
    free(col);
    free(by);
    return mg->err;
}

/* Dimension d of the transfer from level l to level l + 1, in this rank's local coordinates: prolongation tables
 * over the owned fine indices (nf entries), restriction tables over the owned coarse indices (nc entries). */
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

static void coarse_vectors(MG *mg) {
    const long n = mg->lev[mg->nlev - 1].B.size;
    if (!mg->cb) mg->cb = alloc_doubles(mg, n);
    if (!mg->cx) mg->cx = alloc_doubles(mg, n);
}

/* The coarsest level's dense solve over the n nodes of `list` (ascending owned indices, host memory) instead of
 * all of them: a masked grid's active nodes there (whether or not the loops visit active nodes alone, so that both
 * give the same values). An inactive node's row is a diagonal alone whose right-hand side stays zero: leaving it
 * out changes no value, and the dense product shrinks with the tissue. Before smg_coarse or
 * smg_coarse_gauss_jordan, whose matrices are then over these nodes. */
int smg_coarse_list(MG *mg, long n, const int *list) {
    if (n < 1 || n > mg->lev[mg->nlev - 1].B.size) return mg->err = 1;
    mem_free(mg->clist);
    mg->clist = upload(mg, list, n);
    mg->nclist = n;
    return mg->err;
}

/* The coarsest level's dense (pseudo-)inverse over coarse_nodes (in their order), row-major, host memory. */
int smg_coarse(MG *mg, const double *G) {
    const long n = coarse_nodes(mg).n;
    mg->G = upload(mg, G, n * n);
    coarse_vectors(mg);
    return mg->err;
}

/* The coarsest level's (pseudo-)inverse by Gauss–Jordan elimination on the device (the seed's GPU technique,
 * Shirazi et al.), from its dense matrix A over coarse_nodes (row-major, host memory). No pivoting: the matrix is
 * symmetric positive definite — for a singular operator (`singular`: constant null space) after pinning node 0
 * (row and column 0 replaced by e0, and the inverse's (0, 0) entry then zeroed), whose inverse B gives the
 * pseudo-inverse G = Q B Q, Q = I - 11ᵀ/n (B b solves A x = b for b ⊥ 1 with x0 = 0; Q makes it the minimum-norm
 * solution and maps any b into the range first). Per pivot column k three parallel loops: save column k (the
 * multipliers), scale row k, eliminate column k from every other row. */
int smg_coarse_gauss_jordan(MG *mg, const double *A, int singular) {
    const long n = coarse_nodes(mg).n, m = 2 * n;
    coarse_vectors(mg);
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
    const long n = coarse_nodes(mg).n;
    return mem_get(G, mg->G, n * n * sizeof(double));
}

/* Several ranks: the communicator (Fortran handle, duplicated here), the process grid P[3] (PETSc DMDA's: rank =
 * px + Px (py + Py pz)), and every rank's box at the top level (start and size, [size][3] each) with the top
 * level's global sizes. `tail`: on rank 0 the serial hierarchy that solves the top level (level 0 = the whole top
 * level, natural order), elsewhere null. `root_only`: CG runs on rank 0 alone on the whole grid (the top level is
 * level 0). `gathers`: the top level is gathered onto rank 0 (not so for Jacobi-preconditioned CG over the ranks:
 * no buffers for it then). Collective. */
int smg_comm(MG *mg, int fcomm, const int *P, const int *box_start, const int *box_size, const int *global_n,
             MG *tail, int root_only, int gathers, int ipc) {
    Comm *c = (Comm *)calloc(1, sizeof(Comm));
    if (!c) return mg->err = 1;
    mg->c = c;
    mg->tail = tail;
    mg->root_only = root_only;
    if (MPI_Comm_dup(MPI_Comm_f2c((MPI_Fint)fcomm), &c->comm) != MPI_SUCCESS) return mg->err = 1;
    MPI_Comm_rank(c->comm, &c->rank);
    MPI_Comm_size(c->comm, &c->size);
#ifdef __CUDACC__
    c->ipc = ipc;
#else
    c->ipc = 0;              /* host memory: nothing to map */
    (void)ipc;
#endif
    for (int d = 0; d < 3; ++d) c->P[d] = P[d];
    c->me[0] = c->rank % P[0];
    c->me[1] = (c->rank / P[0]) % P[1];
    c->me[2] = c->rank / (P[0] * P[1]);
    for (int d = 0; d < 3; ++d)
        for (int s = 0; s < 2; ++s) {
            int q[3] = {c->me[0], c->me[1], c->me[2]};
            q[d] += s ? 1 : -1;
            c->nbr[d][s] = q[d] < 0 || q[d] >= P[d] ? -1 : q[0] + P[0] * (q[1] + P[1] * q[2]);
        }
    /* face buffers: the largest slab of level 0 (with the ghosts of the dimensions before it), the same on every
     * rank (IPC: a rank writes into its neighbours' buffers at offsets of this size) */
    const Box &B = mg->lev[0].B;
    long face = 1;
    for (int d = 0; d < mg->dim; ++d) {
        long m = 1;
        for (int e = 0; e < 3; ++e) m *= e == d ? 1 : (e < d ? B.g[e] : B.n[e]);
        if (m > face) face = m;
    }
    MPI_Allreduce(MPI_IN_PLACE, &face, 1, MPI_LONG, MPI_MAX, c->comm);
    c->face = face;
    const long nslots = c->ipc ? 12 : 2;
    c->dev_send = alloc_doubles(mg, 2 * face);
#ifdef __CUDACC__
    c->dev_recv = alloc_doubles(mg, nslots * face + (c->ipc ? IPC_CTRL : 0));
    if (c->ipc && c->dev_recv) {
        c->ctrl = ipc_ctrl(c->dev_recv, face);
        if (cudaMemset(c->ctrl, 0, IPC_CTRL * sizeof(double)) != cudaSuccess) mg->err = 1;
    }
#else
    c->dev_recv = alloc_doubles(mg, nslots * face);
#endif
#ifdef __CUDACC__
    c->host_send = (double *)host_alloc(2 * face * sizeof(double));
    c->host_recv = (double *)host_alloc(2 * face * sizeof(double));
    if (!c->host_send || !c->host_recv) mg->err = 1;
#else
    c->host_send = c->dev_send;
    c->host_recv = c->dev_recv;
#endif
    c->box_start = (int *)malloc(3 * c->size * sizeof(int));
    c->box_size = (int *)malloc(3 * c->size * sizeof(int));
    c->counts = (int *)malloc(c->size * sizeof(int));
    c->displs = (int *)malloc(c->size * sizeof(int));
    if (!c->box_start || !c->box_size || !c->counts || !c->displs) return mg->err = 1;
    memcpy(c->box_start, box_start, 3 * c->size * sizeof(int));
    memcpy(c->box_size, box_size, 3 * c->size * sizeof(int));
    long total = 0;
    for (int p = 0; p < c->size; ++p) {
        c->counts[p] = box_size[3 * p] * box_size[3 * p + 1] * box_size[3 * p + 2];
        c->displs[p] = (int)total;
        total += c->counts[p];
    }
    c->total = total;
    for (int d = 0; d < 3; ++d) c->global_n[d] = global_n[d];
    if (gathers) {
        const long own = mg->lev[mg->nlev - 1].B.size;
        c->dev_box = alloc_doubles(mg, own);
        c->host_box = (double *)host_alloc(own * sizeof(double));
        if (!c->host_box) mg->err = 1;
        if (c->rank == 0) {
            c->host_all = (double *)host_alloc(total * sizeof(double));
            c->host_nat = (double *)host_alloc(total * sizeof(double));
            c->dev_nat_b = alloc_doubles(mg, total);
            c->dev_nat_x = alloc_doubles(mg, total);
            if (!c->host_all || !c->host_nat || !tail) mg->err = 1;
        }
    }
#ifdef __CUDACC__
    if (c->ipc) {
        /* every rank's receive buffer (and rank 0's gather buffer) as an IPC handle; open the neighbours' */
        cudaDeviceSynchronize();     /* the flags are zero before any neighbour can write them */
        cudaIpcMemHandle_t mine, *all = (cudaIpcMemHandle_t *)malloc(c->size * sizeof(cudaIpcMemHandle_t));
        memset(&mine, 0, sizeof(mine));
        if (!all || (c->dev_recv && cudaIpcGetMemHandle(&mine, c->dev_recv) != cudaSuccess)) mg->err = 1;
        MPI_Allgather(&mine, sizeof(mine), MPI_BYTE, all, sizeof(mine), MPI_BYTE, c->comm);
        void *opened[6] = {0};
        int opened_rank[6], n_opened = 0;
        for (int d = 0; d < 3; ++d)
            for (int s = 0; s < 2; ++s) {
                const int r = c->nbr[d][s];
                if (r < 0) continue;
                void *ptr = 0;
                for (int o = 0; o < n_opened; ++o)
                    if (opened_rank[o] == r) ptr = opened[o];
                if (!ptr && cudaIpcOpenMemHandle(&ptr, all[r], cudaIpcMemLazyEnablePeerAccess) == cudaSuccess) {
                    opened[n_opened] = ptr;
                    opened_rank[n_opened++] = r;
                }
                if (!ptr) mg->err = 1;
                c->nbr_recv[d][s] = (double *)ptr;
            }
        if (gathers && c->rank == 0) {
            /* rank 0 raises every rank's scatter flag: each rank's control words, opened here */
            unsigned long long **flags = (unsigned long long **)calloc(c->size, sizeof(*flags));
            c->opened_extra = (double **)calloc(c->size, sizeof(double *));
            if (!flags || !c->opened_extra) mg->err = 1;
            for (int r = 0; r < c->size && !mg->err; ++r) {
                void *ptr = r == 0 ? (void *)c->dev_recv : 0;
                for (int o = 0; o < n_opened && !ptr; ++o)
                    if (opened_rank[o] == r) ptr = opened[o];
                if (!ptr && cudaIpcOpenMemHandle(&ptr, all[r], cudaIpcMemLazyEnablePeerAccess) == cudaSuccess)
                    c->opened_extra[r] = (double *)ptr;
                if (!ptr) mg->err = 1;
                else flags[r] = ipc_ctrl((double *)ptr, face) + C_SFLAG;
            }
            if (!mg->err) c->dev_sflags = upload(mg, flags, c->size);
            free(flags);
        }
        free(all);
        if (gathers) {
            cudaIpcMemHandle_t root;
            memset(&root, 0, sizeof(root));
            if (c->rank == 0) {
                /* two slots of the whole grid (a paired gather's two vectors), then the gather flags */
                c->dev_all = alloc_doubles(mg, 2 * total + c->size);
                if (c->dev_all && cudaMemset(c->dev_all + 2 * total, 0, c->size * sizeof(double)) != cudaSuccess)
                    mg->err = 1;
                cudaDeviceSynchronize();
                c->dev_map = (long *)mem_alloc(total * sizeof(long));
                long *map = (long *)malloc(total * sizeof(long));
                if (!c->dev_map || !map) mg->err = 1;
                else {
                    for (int p = 0; p < c->size; ++p) {
                        const int *s0 = c->box_start + 3 * p, *n = c->box_size + 3 * p;
                        long q = c->displs[p];
                        for (int k = 0; k < n[2]; ++k)
                            for (int j = 0; j < n[1]; ++j)
                                for (int i = 0; i < n[0]; ++i)
                                    map[q++] = (s0[0] + i) + (long)global_n[0] * ((s0[1] + j) +
                                                                                  (long)global_n[1] * (s0[2] + k));
                    }
                    if (mem_put(c->dev_map, map, total * sizeof(long))) mg->err = 1;
                }
                free(map);
                if (c->dev_all && cudaIpcGetMemHandle(&root, c->dev_all) != cudaSuccess) mg->err = 1;
                c->root_all = c->dev_all;
            }
            MPI_Bcast(&root, sizeof(root), MPI_BYTE, 0, c->comm);
            if (c->rank != 0) {
                void *ptr = 0;
                if (cudaIpcOpenMemHandle(&ptr, root, cudaIpcMemLazyEnablePeerAccess) != cudaSuccess) mg->err = 1;
                c->root_all = (double *)ptr;
            }
            if (c->root_all) c->root_ctrl = (unsigned long long *)(c->root_all + 2 * total);
        }
    }
#endif
    /* graphs need a seam that is device work alone: the IPC transport's */
    if (!c->ipc) mg->graphs = 0;
    /* every rank learns whether any failed: none goes on to wait for a rank that gave up */
    MPI_Allreduce(MPI_IN_PLACE, &mg->err, 1, MPI_INT, MPI_MAX, c->comm);
    return mg->err;
}

/* x = M b on raw addresses of owned-layout vectors (device pointers for the GPU build). Asynchronous on one GPU. */
int smg_apply(MG *mg, const double *b, double *x) {
    const Level &L = mg->lev[0];
    from_owned(L.B, b, mg->in_b, nodes(L));
    int err = vcycle_g(mg, mg->in_b, mg->in_x);
    to_owned(L.B, mg->in_x, x, nodes(L));
    solve_outside(L, b, x);
    return err | launch_error();
}

/* y = A x on raw addresses of owned-layout vectors, A level 0's stencil (x's ghosts exchanged first): a matrix
 * product through the seam, for the right-hand sides of the resident placement (no PETSc VecScatter, no host copy
 * with the IPC transport). Asynchronous on the GPU. */
int smg_matvec(MG *mg, const double *x, double *y) {
    const Level &L = mg->lev[0];
    const Box B = L.B;
    const Stencil st = L.st;
    const double *S = L.S;
    double *u = mg->in_x;
    from_owned(B, x, u, nodes(L));
    int err = exchange(mg, 0, u);
    each(nodes(L), LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        y[t] = S[st.centre * B.size + t] * u[gix(B, i, j, k)] + offdiag(st, S, B, u, i, j, k, t);
    });
    each(outside(L), LOOP(long t) { y[t] = S[st.centre * B.size + t] * x[t]; });     /* the rows of a diagonal */
    return err | launch_error();
}

/* y = α d∘x − A(βx + γw) on level 0: a tissue model's right-hand side in one product (cardiosim.tissue: αM V − K_i
 * ((1−θ)V + φe) for the parabolic system, −K_i V for the elliptic one), where PETSc's vector operations cost a
 * launch and its host latency each. d and w may be null (α or γ unused). u = βx + γw is formed at the nodes a loop
 * visits only, as from_owned does: elsewhere level 0's ghosted work vector stays zero. */
int smg_combine(MG *mg, const double *x, const double *w, const double *d, double alpha, double beta, double gamma,
                double *y) {
    const Level &L = mg->lev[0];
    const Box B = L.B;
    const Stencil st = L.st;
    const double *S = L.S;
    double *u = mg->in_x;
    each(nodes(L), LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        u[gix(B, i, j, k)] = w ? beta * x[t] + gamma * w[t] : beta * x[t];
    });
    int err = exchange(mg, 0, u);
    each(nodes(L), LOOP(long t) {
        int i, j, k;
        coords(B, t, i, j, k);
        const double au = S[st.centre * B.size + t] * u[gix(B, i, j, k)] + offdiag(st, S, B, u, i, j, k, t);
        y[t] = d ? alpha * d[t] * x[t] - au : -au;
    });
    each(outside(L), LOOP(long t) {                                  /* the rows of a diagonal */
        const double ut = w ? beta * x[t] + gamma * w[t] : beta * x[t];
        const double au = S[st.centre * B.size + t] * ut;
        y[t] = d ? alpha * d[t] * x[t] - au : -au;
    });
    return err | launch_error();
}

/* out = m∘v − Σ_j (w_j·v) u_j over level 0's owned entries (out may be v), for k = 1..3 pairs (u_j null: the
 * constants; m null: 1): a solution's mean removed, or a right-hand side's part in a null space, with the sums on the
 * device (no wait for the host, as PETSc's VecDot and VecAXPY would; on several ranks one MPI_Allreduce of the k
 * sums). The sums are of v before m applies, so m must be 1 wherever a w_j is not 0. */
int smg_deflate(MG *mg, const double *v, double *out, int k, const double *w0, const double *w1, const double *w2,
                const double *u0, const double *u1, const double *u2, const double *m) {
    const long n = mg->lev[0].B.size;
    if (k < 1 || k > 3 || !w0 || (k > 1 && !w1) || (k > 2 && !w2)) return 1;
    if (!mg->dsc) {
        mg->dsc = alloc_doubles(mg, 3);
        mg->dpartial = alloc_partial(mg);
        if (mg->err) return 1;
    }
    double *s = mg->dsc;
    const int k1 = k > 1, k2 = k > 2;
    reduce(range(n), LOOP(long t, double *acc) {
        const double vt = v[t];
        acc[0] += w0[t] * vt;
        if (k1) acc[1] += w1[t] * vt;
        if (k2) acc[2] += w2[t] * vt;
    }, mg->dpartial, s, 0, k1 ? 1 : -1, k2 ? 2 : -1);
    if (mg->c) {
        double h[3] = {0.0, 0.0, 0.0};
        if (get_scalars(h, s, k) || allreduce(mg, h, k) || mem_put(s, h, (size_t)k * sizeof(double))) return 1;
    }
    each(n, LOOP(long t) {
        double vt = m ? m[t] * v[t] : v[t];
        vt -= s[0] * (u0 ? u0[t] : 1.0);
        if (k1) vt -= s[1] * (u1 ? u1[t] : 1.0);
        if (k2) vt -= s[2] * (u2 ? u2[t] : 1.0);
        out[t] = vt;
    });
    return launch_error();
}

static int cg_work(MG *mg) {
    CGWork &w = mg->cg;
    if (w.sc) return mg->err;
    const Box &B = mg->lev[0].B;
    w.x = alloc_ghosted(mg, B);
    w.r = alloc_ghosted(mg, B);
    w.z = alloc_ghosted(mg, B);
    w.p = alloc_ghosted(mg, B);
    w.q = alloc_ghosted(mg, B);
    w.s = alloc_ghosted(mg, B);
    w.partial = alloc_partial(mg);
    w.sc = alloc_doubles(mg, 8);
    w.loop = (LoopState *)mem_alloc(sizeof(LoopState));
    w.loop_host = (LoopState *)host_alloc(sizeof(LoopState));
    if (!w.loop || !w.loop_host) mg->err = 1;
    return mg->err;
}

}  /* extern "C" */

namespace smg {

/* w = A u (u's ghosts exchanged first) and the global sums h = (uᵀr, uᵀw, uᵀu, h[3]): Chronopoulos–Gear's one
 * reduction per iteration (h[3], ‖B b‖² at the start, rides along). */
int cg_product(MG *mg, double *u, const double *r, double *wv, double *h) {
    const Level &L = mg->lev[0];
    const Box B = L.B;
    const long N = B.size;
    const Stencil st = L.st;
    const double *S = L.S;
    const Nodes on = nodes(L);
    int err = exchange(mg, 0, u);
    reduce(on, LOOP(long t, double *acc) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        const double wi = S[st.centre * N + t] * u[g] + offdiag(st, S, B, u, i, j, k, t);
        wv[g] = wi;
        acc[0] += u[g] * r[g];
        acc[1] += u[g] * wi;
        acc[2] += u[g] * u[g];
    }, mg->cg.partial, mg->cg.sc, 0, 1, 2);
    err |= get_scalars(h, mg->cg.sc, 5);
    h[3] += h[4];           /* ‖B b‖²'s part from level 0's inactive rows (start_outside) */
    return err | allreduce(mg, h, 4);
}

/* z = B r (the V-cycle) and zᵀz, zᵀr into sc[o0], sc[o1], for one-rank CG: the sums from the V-cycle's last sweep
 * where it can give them (sums_in_vcycle: the V-cycle's own kernels, enqueued here, in the graph being captured
 * or, without graphs, as launches), else the V-cycle and a pass of its own. */
int z_sums(MG *mg, const double *r, double *z, int o0, int o1) {
    if (sums_in_vcycle(mg)) {
        const Sums sums = {mg->cg.partial, mg->cg.sc, o0, o1};
        return vcycle(mg, r, z, 0, &sums);
    }
    const Level &L = mg->lev[0];
    const Box B = L.B;
    if (vcycle_g(mg, r, z)) return 1;
    reduce(nodes(L), LOOP(long t, double *acc) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        acc[0] += z[g] * z[g];
        acc[1] += z[g] * r[g];
    }, mg->cg.partial, mg->cg.sc, o0, o1, -1);
    return launch_error();
}

/* The device work of one iteration of cg_one_rank (all of it but the stopping test): p = z + β p with β = sc[cur] /
 * sc[3 - cur] (this and the last zᵀr; the first iteration's p = z, enqueue_start sets p = 0), q = A p and pᵀq, x +=
 * α p and r -= α q with α = sc[cur] / pᵀq, z = B r, and zᵀz and the new zᵀr into sc[3] and sc[3 - cur]. Every
 * scalar is read on the device, so the work depends only on (precond, cur), and a CUDA graph captures it once
 * (solve_graph: the loop's body, cur = 1, the test swapping the two zᵀr). */
int enqueue_iteration(MG *mg, int precond, int cur) {
    const Level &L = mg->lev[0];
    const Box B = L.B;
    const long N = B.size;
    const Stencil st = L.st;
    const double *S = L.S;
    const Nodes on = nodes(L);
    CGWork w = mg->cg;
    double *x = w.x, *r = w.r, *z = w.z, *p = w.p, *q = w.q, *sc = w.sc;
    const int jacobi = precond == 1, c = cur, nxt = 3 - cur;
    if (L.a.act)
        each(on, LOOP(long t) {
            int i, j, k;
            coords(B, t, i, j, k);
            const long g = gix(B, i, j, k);
            p[g] = z[g] + sc[c] / sc[nxt] * p[g];
        });
    else
        each(B.gsize, LOOP(long g) { p[g] = z[g] + sc[c] / sc[nxt] * p[g]; });
    /* q = A p, pᵀq */
    reduce(on, LOOP(long t, double *acc) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        const double qi = S[st.centre * N + t] * p[g] + offdiag(st, S, B, p, i, j, k, t);
        q[g] = qi;
        acc[0] += p[g] * qi;
    }, w.partial, sc, 0, -1, -1);
    if (precond == 2) {
        each(on, LOOP(long t) {
            int i, j, k;
            coords(B, t, i, j, k);
            const long g = gix(B, i, j, k);
            const double a = sc[c] / sc[0];
            x[g] += a * p[g];
            r[g] -= a * q[g];
        });
        if (z_sums(mg, r, z, 3, nxt)) return 1;
    } else {
        reduce(on, LOOP(long t, double *acc) {
            int i, j, k;
            coords(B, t, i, j, k);
            const long g = gix(B, i, j, k);
            const double a = sc[c] / sc[0];
            x[g] += a * p[g];
            const double ri = r[g] - a * q[g];
            r[g] = ri;
            const double zi = jacobi ? ri / S[st.centre * N + t] : ri;
            z[g] = zi;
            acc[0] += zi * zi;
            acc[1] += zi * ri;
        }, w.partial, sc, 3, nxt, -1);
    }
    return launch_error();
}

#ifdef __CUDACC__
/* The host loop's test after an iteration (cg_one_rank), on the device: sc[0] = pᵀAp, sc[2] = the new zᵀr, sc[3]
 * = zᵀz; then the two zᵀr swapped, so that every iteration of the loop reads this one's from sc[1] and the last
 * from sc[2] (an iteration with cur = 1: one graph serves them all). The loop goes on while `go` is 1. */
__global__ void cg_test_kernel(double *sc, LoopState *s, cudaGraphConditionalHandle go) {
    const int k = ++s->its;
    int stop = 1;
    if (sc[0] <= 0.0) s->reason = DIVERGED_INDEFINITE_MAT;
    else if (sc[2] < 0.0 && sqrt(sc[3]) > s->ttol) s->reason = DIVERGED_INDEFINITE_PC;
    else {
        s->rnorm = sqrt(sc[3]);
        stop = cg_stop(s->rnorm, s->rnorm0, s->ttol, s->atol, s->dtol, k, s->maxit, &s->reason);
    }
    const double last = sc[1];
    sc[1] = sc[2];
    sc[2] = last;
    cudaGraphSetConditional(go, !stop);
}

int enqueue_start(MG *mg, int precond, const double *b, double *xo, int zero_guess);

/* The test of a one-rank CG solve's initial guess, on the device (solve_graph): rnorm0 and the tolerance from the
 * start's sums as cg_one_rank's host loop computes them (sc: 3 zᵀz, 5 and 6 ‖B b‖²'s parts), into the loop's state,
 * and `go` to 1 unless the guess already passes. */
__global__ void cg_start_kernel(const double *sc, LoopState *s, cudaGraphConditionalHandle go, int zero_guess) {
    const double rnorm0 = zero_guess ? sqrt(sc[3]) : sqrt(sc[5] + sc[6]);
    s->rnorm0 = rnorm0;
    s->ttol = fmax(s->rtol * rnorm0, s->atol);
    s->rnorm = sqrt(sc[3]);
    s->its = 0;
    s->reason = 0;
    const int stop = cg_stop(s->rnorm, rnorm0, s->ttol, s->atol, s->dtol, 0, s->maxit, &s->reason);
    cudaGraphSetConditional(go, !stop);
}

/* A whole one-rank CG solve of b into xo as one CUDA graph: the start (enqueue_start), the test of the initial guess
 * (cg_start_kernel), then while the test says go on an iteration (cur = 1) and its test (cg_test_kernel), then the
 * result to xo. The host sets the tolerances in the loop's state before a launch and reads the outcome after it:
 * one wait per solve, and no launch from the host between the start and the loop, where the device idled before
 * (the start's sums went to the host to set the tolerance). */
static cudaGraphExec_t solve_graph(MG *mg, int precond, const double *b, double *xo, int zero_guess) {
    if (!mg->capture && cudaStreamCreateWithFlags(&mg->capture, cudaStreamNonBlocking) != cudaSuccess) return 0;
    const Level &L = mg->lev[0];
    const Box B = L.B;
    const Nodes on = nodes(L);
    double *x = mg->cg.x, *sc = mg->cg.sc;
    LoopState *s = mg->cg.loop;
    cudaGraph_t start = captured_graph(mg, [&] { return enqueue_start(mg, precond, b, xo, zero_guess); });
    cudaGraph_t end = captured_graph(mg, [&] { to_owned(B, x, xo, on); return launch_error(); });
    cudaGraph_t graph = 0;
    cudaGraphConditionalHandle go;
    cudaGraphNode_t n_start = 0, n_test = 0, n_loop = 0, n_end = 0;
    int err = !start || !end || cudaGraphCreate(&graph, 0) != cudaSuccess;
    if (!err)
        err = cudaGraphConditionalHandleCreate(&go, graph, 0, cudaGraphCondAssignDefault) != cudaSuccess ||
              cudaGraphAddChildGraphNode(&n_start, graph, 0, 0, start) != cudaSuccess;
    int zg = zero_guess;
    void *args[] = {&sc, &s, &go, &zg};
    cudaKernelNodeParams test = {};
    test.func = (void *)cg_start_kernel;
    test.gridDim = dim3(1);
    test.blockDim = dim3(1);
    test.kernelParams = args;
    if (!err) err = cudaGraphAddKernelNode(&n_test, graph, &n_start, 1, &test) != cudaSuccess;
    cudaGraphNodeParams params = {};
    params.type = cudaGraphNodeTypeConditional;
    if (!err) {
        params.conditional.handle = go;
        params.conditional.type = cudaGraphCondTypeWhile;
        params.conditional.size = 1;
        err = cudaGraphAddNode(&n_loop, graph, &n_test, 0, 1, &params) != cudaSuccess;
    }
    if (!err) {
        stream_now = mg->capture;
        err = cudaStreamBeginCaptureToGraph(mg->capture, params.conditional.phGraph_out[0], 0, 0, 0,
                                            cudaStreamCaptureModeThreadLocal) != cudaSuccess;
        if (!err) {
            err = enqueue_iteration(mg, precond, 1);
            cg_test_kernel<<<1, 1, 0, stream_now>>>(sc, s, go);
            cudaGraph_t body = 0;
            err |= cudaStreamEndCapture(mg->capture, &body) != cudaSuccess;
        }
        stream_now = 0;
    }
    if (!err) err = cudaGraphAddChildGraphNode(&n_end, graph, &n_loop, 1, end) != cudaSuccess;
    cudaGraphExec_t exec = 0;
    if (!err) err = cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess;
    for (cudaGraph_t g : {graph, start, end})
        if (g) cudaGraphDestroy(g);
    return err ? 0 : exec;
}

/* cg_one_rank as device work alone: solve_graph's graph for these vectors (captured at the first solve with them,
 * kept for the next: the time loop solves into the same vectors every step), the tolerances sent before it, one
 * transfer of the outcome after it. The host loop waits for every iteration's scalars and then launches the next,
 * and the device idles meanwhile: with a dozen iterations a solve and two solves a step that idle time is a
 * measurable part of a small (masked) grid's step. The same kernels in the same order: the same iterates. */
static int cg_graph(MG *mg, int precond, const double *b, double *xo, double rtol, double atol, double dtol,
                    int maxit, int zero_guess, int *its, double *rnorm, int *reason) {
    SolveGraph *g = 0;
    for (int i = 0; i < mg->n_solves && !g; ++i) {
        SolveGraph &c = mg->solves[i];
        if (c.b == b && c.xo == xo && c.precond == precond && c.zero_guess == zero_guess) g = &c;
    }
    if (!g) {
        const cudaGraphExec_t exec = solve_graph(mg, precond, b, xo, zero_guess);
        if (!exec) return 1;
        g = &mg->solves[mg->next_solve];
        if (mg->next_solve < mg->n_solves) cudaGraphExecDestroy(g->exec);
        else mg->n_solves++;
        *g = SolveGraph{b, xo, precond, zero_guess, exec};
        mg->next_solve = (mg->next_solve + 1) % MAX_SOLVES;
    }
    LoopState *h = mg->cg.loop_host;
    *h = LoopState{0.0, 0.0, atol, dtol, 0.0, rtol, maxit, 0, 0};
    if (cudaMemcpyAsync(mg->cg.loop, h, sizeof *h, cudaMemcpyHostToDevice, 0) != cudaSuccess ||
        cudaGraphLaunch(g->exec, 0) != cudaSuccess || mem_get(h, mg->cg.loop, sizeof *h))
        return 1;
    *its = h->its;
    *rnorm = h->rnorm;
    *reason = h->reason;
    return launch_error();
}
#endif

/* The work of a one-rank CG solve before its first iteration: x from the guess (zero_guess: zero), level 0's
 * inactive rows solved into xo, r = b − A x, z = B r, p = 0 and sc[2] = 1 (the first iteration's p = z + (sc[1] /
 * sc[2]) p is then z, so that every iteration is the same work), and the sums the test of the guess needs: sc[3]
 * zᵀz, sc[1] zᵀr, sc[5] and sc[6] ‖B b‖²'s parts (the active rows' and the inactive rows'). */
int enqueue_start(MG *mg, int precond, const double *b, double *xo, int zero_guess) {
    const Level &L = mg->lev[0];
    const Box B = L.B;
    const long N = B.size;
    const Stencil st = L.st;
    const double *S = L.S;
    const Nodes on = nodes(L);
    CGWork w = mg->cg;
    double *x = w.x, *r = w.r, *z = w.z, *p = w.p, *q = w.q, *sc = w.sc;
    const int jacobi = precond == 1;
    if (zero_guess) mem_zero(x, B.gsize);
    else from_owned(B, xo, x, on);
    start_outside(L, precond, b, xo, w.partial, sc, 6);
    /* r = b - A x, z = B r, and ‖B b‖ (Jacobi: all in one pass) */
    reduce(on, LOOP(long t, double *acc) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        const double d = S[st.centre * N + t];
        const double ri = b[t] - d * x[g] - offdiag(st, S, B, x, i, j, k, t);
        r[g] = ri;
        const double zi = jacobi ? ri / d : ri, bi = jacobi ? b[t] / d : b[t];
        z[g] = zi;
        acc[0] += zi * zi;
        acc[1] += zi * ri;
        acc[2] += bi * bi;
    }, w.partial, sc, 3, 1, 5);
    if (precond == 2) {
        from_owned(B, b, q, on);        /* q: free until the first product */
        if (vcycle_g(mg, q, z)) return 1;
        reduce(on, LOOP(long t, double *acc) {
            int i, j, k;
            coords(B, t, i, j, k);
            const long g = gix(B, i, j, k);
            acc[0] += z[g] * z[g];
        }, w.partial, sc, 5, -1, -1);
        if (z_sums(mg, r, z, 3, 1)) return 1;
    }
    mem_zero(p, B.gsize);
    each(1, LOOP(long) { sc[2] = 1.0; });
    return launch_error();
}

/* One rank: preconditioned CG on level 0's matrix, as PETSc's KSPCG with its default convergence test
 * (preconditioned residual norm; with a nonzero initial guess relative to ‖B b‖, as KSPConvergedDefault does), so
 * iteration counts match PETSc's: the iteration runs on the device; through CUDA graphs (the GPU's default) the
 * whole solve is one graph with the tests on the device too (cg_graph), and the host waits once per solve;
 * otherwise one synchronisation after the start and one per iteration bring the scalars to the host for the test.
 * precond: 0 none, 1 Jacobi (the stencil's diagonal), 2 the V-cycle.
 * Device scalars sc: 0 pᵀAp, 1 and 2 zᵀr (this and the last iteration, alternating), 3 zᵀz, 5 and 6 ‖B b‖². */
int cg_one_rank(MG *mg, int precond, const double *b, double *xo, double rtol, double atol, double dtol,
                       int maxit, int zero_guess, int *its, double *rnorm, int *reason) {
    const Level &L = mg->lev[0];
    const Nodes on = nodes(L);
    double h[8];
    *its = 0;
    *reason = 0;
#ifdef __CUDACC__
    if (mg->graphs && !stream_now)
        return cg_graph(mg, precond, b, xo, rtol, atol, dtol, maxit, zero_guess, its, rnorm, reason);
#endif
    if (enqueue_start(mg, precond, b, xo, zero_guess) || get_scalars(h, mg->cg.sc, 7)) return 1;
    const double rnorm0 = zero_guess ? sqrt(h[3]) : sqrt(h[5] + h[6]);
    const double ttol = fmax(rtol * rnorm0, atol);
    double rn = sqrt(h[3]);
    int cur = 1;
    for (int k = 0;; ++k) {
        *rnorm = rn;
        if (cg_stop(rn, rnorm0, ttol, atol, dtol, k, maxit, reason)) break;
        if (k > 0) cur = 3 - cur;
        if (enqueue_iteration(mg, precond, cur)) return 1;
        if (get_scalars(h, mg->cg.sc, 6)) return 1;
        const int nxt = 3 - cur;
        *its = k + 1;
        if (h[0] <= 0.0) { *reason = DIVERGED_INDEFINITE_MAT; break; }
        rn = sqrt(h[3]);
        /* KSPCG's order: the convergence test first, then the sign of zᵀr (round-off once an exact coarse solve
         * has converged) */
        if (h[nxt] < 0.0 && rn > ttol) { *reason = DIVERGED_INDEFINITE_PC; break; }
    }
    to_owned(L.B, mg->cg.x, xo, on);
    return launch_error();
}

/* Several ranks: the same preconditioned CG in the Chronopoulos–Gear form, whose two inner products of an
 * iteration (and the norm of the stopping test) come from one pass after the matrix product, so one MPI_Allreduce
 * per iteration carries all of them (standard CG needs two). The same iterates in exact arithmetic; the scalars
 * live on the host, the vectors' ghosts are exchanged before each product with A. */
int cg_ranks(MG *mg, int precond, const double *b, double *xo, double rtol, double atol, double dtol,
                    int maxit, int zero_guess, int *its, double *rnorm, int *reason) {
    const Level &L = mg->lev[0];
    const Box B = L.B;
    const long N = B.size;
    const Stencil st = L.st;
    const double *S = L.S;
    const Nodes on = nodes(L);
    CGWork w = mg->cg;
    double *x = w.x, *r = w.r, *u = w.z, *p = w.p, *wv = w.q, *s = w.s, *sc = w.sc;
    const int jacobi = precond == 1;
    double h[6];
    int err = 0;
    *its = 0;
    *reason = 0;
    if (zero_guess) mem_zero(x, B.gsize);
    else from_owned(B, xo, x, on);
    start_outside(L, precond, b, xo, w.partial, sc, 4);
    mem_zero(p, B.gsize);
    mem_zero(s, B.gsize);
    err |= exchange(mg, 0, x);
    /* r = b - A x, u = B r, ‖B b‖² */
    reduce(on, LOOP(long t, double *acc) {
        int i, j, k;
        coords(B, t, i, j, k);
        const long g = gix(B, i, j, k);
        const double d = S[st.centre * N + t];
        const double ri = b[t] - d * x[g] - offdiag(st, S, B, x, i, j, k, t);
        r[g] = ri;
        u[g] = jacobi ? ri / d : ri;
        const double bi = jacobi ? b[t] / d : b[t];
        acc[0] += bi * bi;
    }, w.partial, sc, 3, -1, -1);
    if (precond == 2) {
        from_owned(B, b, wv, on);
        err |= vcycle_g(mg, wv, u);
        reduce(on, LOOP(long t, double *acc) {
            int i, j, k;
            coords(B, t, i, j, k);
            const long g = gix(B, i, j, k);
            acc[0] += u[g] * u[g];
        }, w.partial, sc, 3, -1, -1);
        err |= vcycle_g(mg, r, u);
    }
    err |= cg_product(mg, u, r, wv, h);
    if (err) return 1;
    const double rnorm0 = zero_guess ? sqrt(h[2]) : sqrt(h[3]);
    const double ttol = fmax(rtol * rnorm0, atol);
    double gamma = h[0], delta = h[1], rn = sqrt(h[2]), alpha = 0.0, gamma_old = 0.0;
    for (int k = 0;; ++k) {
        *rnorm = rn;
        if (cg_stop(rn, rnorm0, ttol, atol, dtol, k, maxit, reason)) break;
        const double beta = k > 0 ? gamma / gamma_old : 0.0;
        const double ptap = k > 0 ? delta - beta * gamma / alpha : delta;   /* = pᵀAp of this iteration */
        if (ptap <= 0.0) { *reason = DIVERGED_INDEFINITE_MAT; break; }
        if (gamma < 0.0) { *reason = DIVERGED_INDEFINITE_PC; break; }
        alpha = gamma / ptap;
        const double a = alpha, be = beta;
        each(on, LOOP(long t) {
            int i, j, k;
            coords(B, t, i, j, k);
            const long g = gix(B, i, j, k);
            p[g] = u[g] + be * p[g];
            s[g] = wv[g] + be * s[g];
            x[g] += a * p[g];
            const double ri = r[g] - a * s[g];
            r[g] = ri;
            if (jacobi) u[g] = ri / S[st.centre * N + t];
            else if (precond == 0) u[g] = ri;
        });
        if (precond == 2) err |= vcycle_g(mg, r, u);
        gamma_old = gamma;
        err |= cg_product(mg, u, r, wv, h);
        if (err) return 1;
        *its = k + 1;
        gamma = h[0];
        delta = h[1];
        rn = sqrt(h[2]);
    }
    to_owned(B, x, xo, on);
    return err | launch_error();
}

}  /* namespace smg */

extern "C" {

/* Several ranks, the whole solve on rank 0: b and x gathered there, CG of the serial hierarchy, x scattered back
 * and the outcome broadcast. */
static int cg_on_root(MG *mg, int precond, const double *b, double *xo, double rtol, double atol, double dtol,
                      int maxit, int zero_guess, int *its, double *rnorm, int *reason) {
    Comm *c = mg->c;
    int err = 0;
    double out[3] = {0.0, 0.0, 0.0};
    if (zero_guess) err |= gather_root(mg, b, 0, c->dev_nat_b);
    else err |= gather_root(mg, b, 0, c->dev_nat_b, xo, c->dev_nat_x);
    if (c->rank == 0) {
        err |= smg_cg(mg->tail, precond, c->dev_nat_b, c->dev_nat_x, rtol, atol, dtol, maxit, zero_guess, its, rnorm,
                      reason);
        out[0] = *its;
        out[1] = *rnorm;
        out[2] = *reason;
    }
    err |= MPI_Bcast(out, 3, MPI_DOUBLE, 0, c->comm) != MPI_SUCCESS;
    *its = (int)out[0];
    *rnorm = out[1];
    *reason = (int)out[2];
    err |= scatter_root(mg, c->dev_nat_x, xo, 0);
    return err;
}

/* Preconditioned CG on level 0's matrix (b and x: this rank's owned-layout vectors); the outcome in *its, *rnorm,
 * *reason (PETSc's). Returns non-zero on a device or communication error. */
int smg_cg(MG *mg, int precond, const double *b, double *x, double rtol, double atol, double dtol, int maxit,
           int zero_guess, int *its, double *rnorm, int *reason) {
    if (mg->c && mg->root_only)
        return cg_on_root(mg, precond, b, x, rtol, atol, dtol, maxit, zero_guess, its, rnorm, reason);
    if (cg_work(mg)) return 1;
    if (mg->c) return cg_ranks(mg, precond, b, x, rtol, atol, dtol, maxit, zero_guess, its, rnorm, reason);
    return cg_one_rank(mg, precond, b, x, rtol, atol, dtol, maxit, zero_guess, its, rnorm, reason);
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

/* Several ranks: the smoother's ghosts exchanged after every colour (0, the default: every rank sweeps exactly the
 * serial sweep) or once per sweep (1: within a sweep a rank sees its neighbours' values of the sweep's start — the
 * hybrid, processor-block symmetric smoother of hypre's BoomerAMG; a symmetric V-cycle still, 4 exchanges per level
 * instead of 2^(d+1) + 2, a few more iterations). */
void smg_halo_per_sweep(MG *mg, int on) { mg->per_sweep = on; }

/* Graphs on (1, the default) or off (0: every kernel launched from the host each time; for comparisons). */
void smg_use_graphs(MG *mg, int on) { mg->graphs = on; }

/* Level l's smoothing sweeps before and after the coarse correction (smg_create's `nu` until set here). */
int smg_sweeps(MG *mg, int l, int nu) {
    if (l < 0 || l >= mg->nlev || nu < 1) return 1;
    mg->nu[l] = nu;
    return 0;
}

/* Level l smoothed by Jacobi with the weights w (one per owned node, host memory; cardiosim.solvers.multigrid
 * chooses them) instead of multicolour SOR: on the GPU two loops per sweep instead of 2^d. */
int smg_jacobi(MG *mg, int l, const double *w) {
    Level &L = mg->lev[l];
    const Box &B = L.B;
    double *wg = (double *)calloc((size_t)B.gsize, sizeof(double));      /* ghosted, ghosts zero */
    if (!wg) return mg->err = 1;
    for (long t = 0; t < B.size; ++t) {
        int i, j, k;
        coords(B, t, i, j, k);
        wg[gix(B, i, j, k)] = w[t];
    }
    mem_free(L.jw);
    L.jw = upload(mg, wg, B.gsize);
    free(wg);
    if (l == 0 && !mg->x0) mg->x0 = alloc_ghosted(mg, B);      /* the V-cycle's working x (vcycle) */
    return mg->err;
}

/* smg_apply with a profile: ms[4 l + p] for level l's phases p = pre-smoothing, residual and restriction,
 * prolongation, post-smoothing; ms[4 (nlev - 1)] the coarsest solve. Synchronises (GPU: events). */
int smg_apply_timed(MG *mg, const double *b, double *x, double *ms) {
    Clock clock;
    const int top = mg->nlev - 1;
    const Level &L = mg->lev[0];
    from_owned(L.B, b, mg->in_b, nodes(L));
    int err = vcycle(mg, mg->in_b, mg->in_x, &clock);
    to_owned(L.B, mg->in_x, x, nodes(L));
    solve_outside(L, b, x);
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

/* What the seam did since the last call: out = halo exchanges, seconds in them, gathers/scatters, seconds in
 * them, bytes moved between ranks, bytes copied between device and host for it (this rank). Counters reset. */
void smg_stats(MG *mg, double *out) {
    for (int i = 0; i < 6; ++i) out[i] = 0.0;
    Comm *c = mg->c;
    if (!c) return;
    out[0] = (double)c->n_exchange;
    out[1] = c->t_exchange;
    out[2] = (double)c->n_gather;
    out[3] = c->t_gather;
    out[4] = (double)c->bytes;
    out[5] = (double)c->host_bytes;
    c->n_exchange = c->n_gather = c->bytes = c->host_bytes = 0;
    c->t_exchange = c->t_gather = 0.0;
}

/* The seam's latency, for the transport study (cardiosim.bench.halo): seconds per halo exchange of level 0's
 * vector (out[0]) and per gather + scatter of the top level through rank 0 (out[1]; 0 where nothing is gathered),
 * averaged over `reps`, after a barrier. Collective. */
int smg_time_seam(MG *mg, int reps, double *out) {
    Comm *c = mg->c;
    out[0] = out[1] = 0.0;
    if (!c) return 0;
    int err = 0;
    MPI_Barrier(c->comm);
    double t0 = seconds();
    for (int r = 0; r < reps; ++r) err |= exchange(mg, 0, mg->in_x);
#ifdef __CUDACC__
    err |= cudaStreamSynchronize(0) != cudaSuccess;     /* the IPC transport only queues work */
#endif
    MPI_Barrier(c->comm);
    out[0] = (seconds() - t0) / reps;
    if (c->host_box) {      /* allocated where the top level is gathered */
        Level &T = mg->lev[mg->nlev - 1];
        double *v = mg->nlev > 1 ? T.x : mg->in_x;
        MPI_Barrier(c->comm);
        t0 = seconds();
        for (int r = 0; r < reps; ++r) {
            err |= gather_root(mg, v, 1, c->dev_nat_b);
            err |= scatter_root(mg, c->dev_nat_b, v, 1);
        }
#ifdef __CUDACC__
        err |= cudaStreamSynchronize(0) != cudaSuccess;
#endif
        MPI_Barrier(c->comm);
        out[1] = (seconds() - t0) / reps;
    }
    return err;
}

void smg_destroy(MG *mg) {
    if (!mg) return;
    for (int l = 0; l < mg->nlev; ++l) {
        Level &L = mg->lev[l];
        mem_free(L.S);
        mem_free(L.r);
        mem_free(L.jw);
        mem_free(L.a.act);
        mem_free(L.a.by_colour);
        mem_free(L.a.out);
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
    mem_free(mg->clist);
    mem_free(mg->cb); mem_free(mg->cx); mem_free(mg->in_b); mem_free(mg->in_x); mem_free(mg->x0);
    mem_free(mg->cg.x); mem_free(mg->cg.r); mem_free(mg->cg.z); mem_free(mg->cg.p); mem_free(mg->cg.q);
    mem_free(mg->cg.s); mem_free(mg->cg.partial); mem_free(mg->cg.sc);
    mem_free(mg->cg.loop); host_free(mg->cg.loop_host);
    mem_free(mg->dsc); mem_free(mg->dpartial);
    if (Comm *c = mg->c) {
#ifdef __CUDACC__
        void *closed[6];
        int n_closed = 0;
        for (int d = 0; d < 3; ++d)
            for (int s = 0; s < 2; ++s) {
                void *ptr = c->nbr_recv[d][s];
                int seen = !ptr;
                for (int o = 0; o < n_closed; ++o) seen |= closed[o] == ptr;
                if (!seen) {
                    cudaIpcCloseMemHandle(ptr);
                    closed[n_closed++] = ptr;
                }
            }
        if (c->rank != 0 && c->root_all) cudaIpcCloseMemHandle(c->root_all);
        if (c->opened_extra) {
            for (int r = 0; r < c->size; ++r)
                if (c->opened_extra[r]) cudaIpcCloseMemHandle(c->opened_extra[r]);
            free(c->opened_extra);
        }
        mem_free(c->dev_sflags);
        mem_free(c->dev_all);
        mem_free(c->dev_map);
#endif
        mem_free(c->dev_send); mem_free(c->dev_recv); mem_free(c->dev_box);
        mem_free(c->dev_nat_b); mem_free(c->dev_nat_x);
#ifdef __CUDACC__
        host_free(c->host_send); host_free(c->host_recv);
#endif
        host_free(c->host_box); host_free(c->host_all); host_free(c->host_nat);
        free(c->box_start); free(c->box_size); free(c->counts); free(c->displs);
        int finalized = 0;
        MPI_Finalized(&finalized);
        if (!finalized) MPI_Comm_free(&c->comm);
        free(c);
    }
#ifdef __CUDACC__
    for (int g = 0; g < mg->n_graphs; ++g) cudaGraphExecDestroy(mg->graph[g].exec);
    for (int g = 0; g < mg->n_solves; ++g) cudaGraphExecDestroy(mg->solves[g].exec);
    if (mg->capture) cudaStreamDestroy(mg->capture);
#endif
    free(mg);
}

}  /* extern "C" */

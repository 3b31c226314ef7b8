/* The multigrid hierarchy's set-up on the host: a matrix's rows as stencils, and Galerkin coarse stencils PᵀAP
 * computed on the stencils themselves (cardiosim/solvers/galerkin.py).
 *
 * Why here and not PETSc's MatPtAP: with P the tensor product of 1D linear interpolations, PᵀAP can be formed one
 * dimension at a time on the stencils, at most 27 x 4 multiply-adds per node and dimension, where MatPtAP builds P
 * as a matrix and forms a general sparse triple product (docs/decisions/0002-assembly-own-rows-as-csr.md: the 216³ slab's set-up 97.6 s before, 39.9 s after, with the stiffness rows below).
 *
 * A stencil S holds, for each node t of a box (x fastest) and each neighbour code s = (dx+1) + 3(dy+1) + 9(dz+1),
 * the matrix entry coupling t to that neighbour: S[s * n + t] (a 2D grid is a 3D grid of one z layer). Every
 * coordinate here is a global grid coordinate; a box is its start[3] and size[3].
 *
 * Built with the system C compiler under cardiosim.runtime.compile's cache rule; plain C99, no dependencies. */
#include <stdint.h>
#include <stdlib.h>

#define NCODES 27

/* S (27 x nrows, zeroed by the caller) from the CSR rows of rank ``own``'s box, and used[27] (zeroed by the caller)
 * set where a code has a non-zero entry. Columns are PETSc global indices:
 * the ranks' boxes in turn, each in natural order; offsets[nranks + 1] is each rank's first index, bstart and bsize
 * [nranks][3] their boxes. Columns are int32 or int64 (idx64). Returns 0; 1 for an entry coupling nodes more than
 * one grid step apart; 2 for a column outside the grid. */
int sst_from_csr(long nrows, const int64_t *indptr, const void *cols, int idx64, const double *vals, int nranks,
                 const int64_t *offsets, const int64_t *bstart, const int64_t *bsize, int own, double *S, int *used)
{
    const int64_t *os = bstart + 3 * own, *on = bsize + 3 * own;
    int err = 0;
    for (long r = 0; r < nrows; ++r) {
        long ri = os[0] + r % on[0], rj = os[1] + (r / on[0]) % on[1], rk = os[2] + r / (on[0] * on[1]);
        for (int64_t e = indptr[r]; e < indptr[r + 1]; ++e) {
            int64_t g = idx64 ? ((const int64_t *)cols)[e] : (int64_t)((const int32_t *)cols)[e];
            int lo = 0, hi = nranks;                    /* the rank whose range holds g: offsets[lo] <= g < [lo+1] */
            if (g < 0 || g >= offsets[nranks]) {
                err = err > 2 ? err : 2;
                continue;
            }
            while (hi - lo > 1) {
                int mid = (lo + hi) / 2;
                if (offsets[mid] <= g) lo = mid; else hi = mid;
            }
            int64_t loc = g - offsets[lo];
            const int64_t *qs = bstart + 3 * lo, *qn = bsize + 3 * lo;
            long di = qs[0] + loc % qn[0] - ri, dj = qs[1] + (loc / qn[0]) % qn[1] - rj,
                 dk = qs[2] + loc / (qn[0] * qn[1]) - rk;
            if (di < -1 || di > 1 || dj < -1 || dj > 1 || dk < -1 || dk > 1) {
                err = err > 1 ? err : 1;
                continue;
            }
            int code = (di + 1) + 3 * (dj + 1) + 9 * (dk + 1);
            S[code * nrows + r] = vals[e];
            used[code] |= vals[e] != 0.0;
        }
    }
    return err;
}

/* One dimension of PᵀAP: the stencil Sin on box (in_start, in_size), whose rows are fine along dimension d, becomes
 * Sout (27 x its nodes) on the same box except along d, where it is the coarse range [cstart, cstart + csize).
 * P_d interpolates fine index i from coarse c0[i] (weight w0[i]) and c1[i] (w1[i]; 0 on a coarse point); its
 * transpose takes coarse index I from fine pos[I] (weight 1) and its neighbours pos[I] -1 and +1 (wl[I], wr[I]; 0
 * where that neighbour is a coarse point too). The tables cover the nf fine indices of the whole grid. Only Sin's
 * rows ``codes`` (ncodes) are read (the others are zero) and only Sout's rows ``ocodes`` (nocodes: the input codes
 * with every offset along d) are written (the others stay as the caller left them: zero). Every fine row with a
 * parent in the coarse range must be in the input box (one ghost layer around a rank's fine box). Each output row
 * is summed whole, then stored once (a gather: the scattered form wrote 27 rows apart for every term). Returns 0;
 * 1 if two parents were more than one coarse step apart or a needed fine row is outside the input box; 2 if out of
 * memory. */
int sst_coarsen(int d, const int64_t *in_start, const int64_t *in_size, int ncodes, const int *codes,
                const double *Sin, long cstart, long csize, long nf, const int *c0, const int *c1,
                const double *w0, const double *w1, const int *pos, const double *wl, const double *wr,
                int nocodes, const int *ocodes, double *Sout)
{
    int64_t out_size[3] = {in_size[0], in_size[1], in_size[2]};
    out_size[d] = csize;
    long nin = (long)(in_size[0] * in_size[1] * in_size[2]);
    long nout = (long)(out_size[0] * out_size[1] * out_size[2]);
    const int stride_d = d == 0 ? 1 : (d == 1 ? 3 : 9);       /* a code's step per offset along d */
    int off_d[NCODES], base[NCODES];                           /* offset along d; the code with offset -1 along d */
    const double *row[NCODES];
    for (int q = 0; q < ncodes; ++q) {
        off_d[q] = (codes[q] / stride_d) % 3 - 1;
        base[q] = codes[q] - (off_d[q] + 1) * stride_d;
        row[q] = Sin + (long)codes[q] * nin;
    }
    const long nx = in_size[0], plane = in_size[0] * in_size[1];
    /* The terms of each coarse index's rows (fine index along d, input code, output code, weight) do not depend on
     * the other two coordinates: listed once per coarse index, in the order f, then q, then the w0 term before the
     * w1 term (every node's terms are added in this order on any box, so a rank's rows equal one rank's bit for bit) */
    long nt_max = csize * 3 * ncodes * 2;
    long *t_at = malloc(sizeof(long) * (csize + 1)), *t_li = malloc(sizeof(long) * (nt_max ? nt_max : 1));
    int *t_q = malloc(sizeof(int) * (nt_max ? nt_max : 1)), *t_code = malloc(sizeof(int) * (nt_max ? nt_max : 1));
    double *t_w = malloc(sizeof(double) * (nt_max ? nt_max : 1));
    int err = 0;
    if (!t_at || !t_li || !t_q || !t_code || !t_w) {
        err = 2;
        goto done;
    }
    long nt = 0;
    for (long c = 0; c < csize; ++c) {
        long I = cstart + c;
        t_at[c] = nt;
        for (int f = -1; f <= 1; ++f) {
            double wf = f == 0 ? 1.0 : (f < 0 ? wl[I] : wr[I]);
            if (wf == 0.0)
                continue;
            long i = pos[I] + f, li = i - in_start[d];
            if (li < 0 || li >= in_size[d]) {
                err = 1;
                continue;
            }
            for (int q = 0; q < ncodes; ++q) {
                long j = i + off_d[q];
                if (j < 0 || j >= nf)
                    continue;
                long s0 = c0[j] - I, s1 = c1[j] - I;
                if (s0 < -1 || s0 > 1 || s1 < -1 || s1 > 1) {
                    err = 1;
                    continue;
                }
                t_li[nt] = li, t_q[nt] = q, t_code[nt] = base[q] + (int)(s0 + 1) * stride_d, t_w[nt++] = wf * w0[j];
                if (w1[j] != 0.0)                                   /* w1 = 0 on a coarse point */
                    t_li[nt] = li, t_q[nt] = q, t_code[nt] = base[q] + (int)(s1 + 1) * stride_d, t_w[nt++] = wf * w1[j];
            }
        }
    }
    t_at[csize] = nt;
    if (d == 0) {
        /* along x, the contiguous dimension: each output node's terms gathered, summed whole, stored once */
        for (long z = 0; z < out_size[2]; ++z)
            for (long y = 0; y < out_size[1]; ++y) {
                long t0 = nx * y + plane * z, o0 = out_size[0] * (y + out_size[1] * z);
                for (long c = 0; c < csize; ++c) {
                    double acc[NCODES] = {0};
                    for (long k = t_at[c]; k < t_at[c + 1]; ++k)
                        acc[t_code[k]] += t_w[k] * row[t_q[k]][t0 + t_li[k]];
                    for (int k = 0; k < nocodes; ++k)
                        Sout[(long)ocodes[k] * nout + o0 + c] = acc[ocodes[k]];
                }
            }
    } else {
        /* along y or z: every node of an x line has the same coarse index, so each term is one weight times a
         * whole input line, added to a whole output line (Sout zero as the caller left it): streamed and vectorised,
         * where the per-node form spent its time on index arithmetic (5 s of the 216³ slab's set-up) */
        const int e = d == 1 ? 2 : 1;                           /* the other dimension besides x */
        for (long a = 0; a < out_size[e]; ++a)
            for (long c = 0; c < csize; ++c) {
                long oy = d == 1 ? c : a, oz = d == 1 ? a : c;
                double *out_line = Sout + out_size[0] * (oy + out_size[1] * oz);
                for (long k = t_at[c]; k < t_at[c + 1]; ++k) {
                    long li = t_li[k];
                    const double *src = row[t_q[k]] + (d == 1 ? nx * li + plane * a : nx * a + plane * li);
                    double *dst = out_line + (long)t_code[k] * nout, w = t_w[k];
                    for (long x = 0; x < nx; ++x)
                        dst[x] += w * src[x];
                }
            }
    }
done:
    free(t_at); free(t_li); free(t_q); free(t_code); free(t_w);
    return err;
}

/* The rows of the stiffness matrix K = Σ_e Σ_pq σ_e[p,q] E[p,q,a,b] on Q1 elements (cardiosim/tissue/operators.py),
 * as a stencil S (3^dim x owned nodes, zeroed by the caller; code Σ_d (o_d + 1) 3^d of the neighbour offset o,
 * x first). Elements are given by their lowest corner, the box (el_start, el_size); node data cover the ghosted box
 * (g_start, g_size), rows the owned box (o_start, o_size). An element's tensor is the mean of its corners' tensors
 * σ = scale (σ_t I + (σ_l − σ_t) f fᵀ) (f the unit fibre, dim entries per node; sl and st per node, or one value
 * when their stride is 0); an element with a corner outside the tissue (tissue[node] == 0; tissue NULL: all
 * tissue) conducts nothing. E[((p * dim + q) * nb + a) * nb + b], corners a = ix + 2 iy + 4 iz.
 * Only the rows of the owned nodes whose z lies in [row_z0, row_z1) are written (the whole owned range, or a slab of
 * it: calls for disjoint slabs may run at once, each given the elements touching its slab); each entry still sums its
 * elements in their (z, y, x) order, so the rows are the same bits however they are split. Returns 0; 2 if out of
 * memory. */
int sst_stiffness(int dim, const int64_t *el_start, const int64_t *el_size, const int64_t *g_start,
                  const int64_t *g_size, const int64_t *o_start, const int64_t *o_size, long row_z0, long row_z1,
                  const double *fib, const double *scale, const double *sl, int sl_stride, const double *st,
                  int st_stride, const unsigned char *tissue, const double *E, double *S)
{
    int nb = 1 << dim;
    long n_owned = (long)(o_size[0] * o_size[1] * o_size[2]);
    long corner_shift[8];                  /* ghosted-box index offset of each corner from the lowest one */
    long corner_row[8];                    /* owned-box row offset of each corner from the lowest one */
    /* Only the (pair of corners, tensor entry) terms whose E is non-zero, and only the tensor entries some term
     * reads: the star stencil (lumped, no cross terms) has 48 terms of 3 entries where the box pattern of all
     * 64 pairs and 9 entries would be 576 (the stiffness rows were 10 s of the 216³ slab's set-up that way). */
    int term_pq[64 * 9], term_code[64 * 9], term_a[64 * 9], nterms = 0;
    double term_E[64 * 9];
    int need[9] = {0};
    for (int a = 0; a < nb; ++a) {
        int oa[3] = {a & 1, (a >> 1) & 1, (a >> 2) & 1};
        corner_shift[a] = oa[0] + g_size[0] * (oa[1] + g_size[1] * oa[2]);
        corner_row[a] = oa[0] + o_size[0] * (oa[1] + o_size[1] * oa[2]);
        for (int b = 0; b < nb; ++b) {
            int ob[3] = {b & 1, (b >> 1) & 1, (b >> 2) & 1};
            int k = 0, w = 1;
            for (int d = 0; d < dim; ++d, w *= 3)
                k += (ob[d] - oa[d] + 1) * w;
            for (int pq = 0; pq < dim * dim; ++pq) {
                double v = E[(pq * nb + a) * nb + b];
                if (v == 0.0)
                    continue;
                term_pq[nterms] = pq;
                term_code[nterms] = k;
                term_a[nterms] = a;
                term_E[nterms++] = v / nb;        /* the element's tensor: the mean of its corners' */
                need[pq] = 1;
            }
        }
    }
    int npq = 0, pqs[9];
    for (int pq = 0; pq < dim * dim; ++pq)
        if (need[pq])
            pqs[npq++] = pq;
    /* Each node's tensor entries, computed once for a z plane of the ghosted box and kept while the elements of two
     * planes read them (two slots, by the plane's parity): each node belongs to 2^dim elements, whose corner loop
     * recomputed them (the same expression, summed in the same corner order: the same bits). */
    long gplane = g_size[0] * g_size[1];
    double *T = malloc(sizeof(double) * 2 * (npq ? npq : 1) * gplane);
    if (!T)
        return 2;
    long loaded[2] = {-1, -1};
    for (long ez = 0; ez < el_size[2]; ++ez) {
        long lz0 = el_start[2] + ez - g_start[2];
        for (long lz = lz0; lz <= lz0 + (dim == 3); ++lz) {
            double *Tp = T + (lz & 1) * npq * gplane;
            if (loaded[lz & 1] == lz)
                continue;
            loaded[lz & 1] = lz;
            for (long m = 0; m < gplane; ++m) {
                long n = lz * gplane + m;
                double s = scale[n], lt = st[n * st_stride], dl = sl[n * sl_stride] - lt;
                const double *f = fib + n * dim;
                for (int i = 0; i < npq; ++i) {
                    int p = pqs[i] / dim, q = pqs[i] % dim;
                    Tp[i * gplane + m] = s * ((p == q ? lt : 0.0) + dl * f[p] * f[q]);
                }
            }
        }
        for (long ey = 0; ey < el_size[1]; ++ey)
            for (long ex = 0; ex < el_size[0]; ++ex) {
                long e[3] = {el_start[0] + ex, el_start[1] + ey, el_start[2] + ez};
                long base = (e[0] - g_start[0]) + g_size[0] * ((e[1] - g_start[1]) + g_size[1] * (e[2] - g_start[2]));
                double sig[9] = {0};
                int inside = 1;
                for (int c = 0; c < nb; ++c) {
                    long n = base + corner_shift[c];
                    if (tissue && !tissue[n]) {
                        inside = 0;
                        break;
                    }
                    long lz = lz0 + ((c >> 2) & 1);
                    const double *Tp = T + (lz & 1) * npq * gplane + (n - lz * gplane);
                    for (int i = 0; i < npq; ++i)
                        sig[pqs[i]] += Tp[i * gplane];
                }
                if (!inside)
                    continue;
                /* which corners are owned rows (all of them inside a rank's box): all, away from the box's faces */
                int owned = (1 << nb) - 1;
                if (!(e[0] >= o_start[0] && e[0] + 1 < o_start[0] + o_size[0] && e[1] >= o_start[1]
                      && e[1] + (dim > 1) < o_start[1] + o_size[1] && e[2] >= row_z0
                      && e[2] + (dim > 2) < row_z1)) {
                    owned = 0;
                    for (int c = 0; c < nb; ++c) {
                        long node[3] = {e[0] + (c & 1), e[1] + ((c >> 1) & 1), e[2] + ((c >> 2) & 1)};
                        int in = node[2] >= row_z0 && node[2] < row_z1;
                        for (int d = 0; d < 2; ++d)
                            in &= node[d] >= o_start[d] && node[d] < o_start[d] + o_size[d];
                        owned |= in << c;
                    }
                }
                long row0 = (e[0] - o_start[0]) + o_size[0] * ((e[1] - o_start[1]) + o_size[1] * (e[2] - o_start[2]));
                for (int i = 0; i < nterms; ++i) {
                    int a = term_a[i];
                    if (!((owned >> a) & 1))
                        continue;
                    S[(long)term_code[i] * n_owned + row0 + corner_row[a]] += sig[term_pq[i]] * term_E[i];
                }
            }
    }
    free(T);
    return 0;
}

/* Each code's neighbour offset (x first; a code k = Σ_d (o_d + 1) 3^d over dim dimensions) and its index offset in
 * a box of size g_size: codes[j] for j < ncodes, or the codes 0 .. ncodes - 1 where codes is NULL. */
static void code_offsets(int dim, int ncodes, const int *codes, const int64_t *g_size, int off[][3], long *shift)
{
    for (int j = 0; j < ncodes; ++j) {
        int k = codes ? codes[j] : j;
        for (int d = 0; d < 3; ++d) {
            off[j][d] = d < dim ? k % 3 - 1 : 0;
            k /= 3;
        }
        shift[j] = off[j][0] + g_size[0] * (off[j][1] + g_size[1] * off[j][2]);
    }
}

/* The CSR pattern of the owned rows (cardiosim.tissue.operators.Assembler): row t (owned box (o_start, o_size),
 * x fastest) couples to its neighbour of each code in codes[ncodes] (code k = Σ_d (o_d + 1) 3^d over the grid's dim
 * dimensions) that lies inside the grid (n[3]); its column is g2g[that neighbour's index in the ghosted box
 * (g_start, g_size)], PETSc's global index. Each row's columns are sorted (PETSc wants them so; the neighbour order
 * is sorted on one rank, not across rank boundaries). Written: indptr[n_owned + 1], and per entry indices[e] (the
 * column) and take[e] = code * n_owned + t, the entry's place in the rows' (3^dim, n_owned) array, from which
 * Assembler.matrix gathers the values. indptr, indices and g2g are int32 or int64 (idx64), take int32 or int64
 * (take64); indices and take have room for n_owned * ncodes entries. Returns the number of entries. In Python this
 * was 2.9 s of the 216³ slab's set-up on one GPU (NumPy passes over the whole (codes, rows) table, and a sort on
 * several ranks). */
long sst_connectivity(int dim, const int64_t *n, const int64_t *o_start, const int64_t *o_size,
                      const int64_t *g_start, const int64_t *g_size, int ncodes, const int *codes, const void *g2g,
                      int idx64, void *indptr, void *indices, void *take, int take64)
{
    long n_owned = (long)(o_size[0] * o_size[1] * o_size[2]);
    int off[NCODES][3];
    long shift[NCODES];                     /* ghosted-box index offset of each code's neighbour */
    code_offsets(dim, ncodes, codes, g_size, off, shift);
    long e = 0;
    if (idx64) ((int64_t *)indptr)[0] = 0; else ((int32_t *)indptr)[0] = 0;
    for (long z = 0; z < o_size[2]; ++z)
        for (long y = 0; y < o_size[1]; ++y)
            for (long x = 0; x < o_size[0]; ++x) {
                long t = x + o_size[0] * (y + o_size[1] * z);
                long gx = o_start[0] + x, gy = o_start[1] + y, gz = o_start[2] + z;
                long base = (gx - g_start[0]) + g_size[0] * ((gy - g_start[1]) + g_size[1] * (gz - g_start[2]));
                int64_t col[NCODES];
                long place[NCODES];
                int m = 0;
                for (int j = 0; j < ncodes; ++j) {
                    long ix = gx + off[j][0], iy = gy + off[j][1], iz = gz + off[j][2];
                    if (ix < 0 || ix >= n[0] || iy < 0 || iy >= n[1] || iz < 0 || iz >= n[2])
                        continue;
                    long li = base + shift[j];
                    int64_t c = idx64 ? ((const int64_t *)g2g)[li] : (int64_t)((const int32_t *)g2g)[li];
                    long p = (long)codes[j] * n_owned + t;
                    int i = m++;
                    while (i > 0 && col[i - 1] > c) {       /* insertion: already in order on one rank */
                        col[i] = col[i - 1];
                        place[i] = place[i - 1];
                        --i;
                    }
                    col[i] = c;
                    place[i] = p;
                }
                for (int i = 0; i < m; ++i, ++e) {
                    if (idx64) ((int64_t *)indices)[e] = col[i]; else ((int32_t *)indices)[e] = (int32_t)col[i];
                    if (take64) ((int64_t *)take)[e] = place[i]; else ((int32_t *)take)[e] = (int32_t)place[i];
                }
                if (idx64) ((int64_t *)indptr)[t + 1] = e; else ((int32_t *)indptr)[t + 1] = (int32_t)e;
            }
    return e;
}

/* vals[e] = S[take[e]] for the nnz entries of sst_connectivity's take (int32 or int64: take64): a matrix's CSR
 * values gathered from its (3^dim, n_owned) rows. NumPy's take of the same indices took seven times as long (8 M rows
 * of 27: 5.6 s against 0.8 s on one core), most of it in allocating its result. */
void sst_gather(long nnz, const void *take, int take64, const double *S, double *vals)
{
    if (take64)
        for (long e = 0; e < nnz; ++e)
            vals[e] = S[((const int64_t *)take)[e]];
    else
        for (long e = 0; e < nnz; ++e)
            vals[e] = S[((const int32_t *)take)[e]];
}

/* y_v = K x_v for nvec vectors at once (x: nvec x the ghosted box (g_start, g_size), every neighbour of an owned
 * node inside the grid n[3] being in it; y: nvec x the owned rows), K given as its rows S (3^dim x n_owned, as
 * sst_stiffness writes them), read once for all the vectors. Each row is summed in code order, its zero entries
 * skipped (most of a heart's box): the same bits whatever the ranks' split. For products where no assembled matrix
 * is wanted (the pseudo-ECG's electrode weights at set-up, cardiosim/analysis/ecg.py). */
void sst_apply(int dim, const int64_t *n, const int64_t *o_start, const int64_t *o_size, const int64_t *g_start,
               const int64_t *g_size, long nvec, const double *S, const double *x, double *y)
{
    enum { CHUNK = 16 };                    /* vectors summed together: their sums stay in registers */
    long n_owned = (long)(o_size[0] * o_size[1] * o_size[2]);
    long n_ghosted = (long)(g_size[0] * g_size[1] * g_size[2]);
    int ncodes = 1;
    for (int d = 0; d < dim; ++d)
        ncodes *= 3;
    int off[NCODES][3];
    long shift[NCODES];
    code_offsets(dim, ncodes, NULL, g_size, off, shift);
    for (long v0 = 0; v0 < nvec; v0 += CHUNK) {
        int nv = (int)(nvec - v0 < CHUNK ? nvec - v0 : CHUNK);
        const double *xv = x + v0 * n_ghosted;
        double *yv = y + v0 * n_owned;
        for (long z = 0; z < o_size[2]; ++z)
            for (long yy = 0; yy < o_size[1]; ++yy)
                for (long xx = 0; xx < o_size[0]; ++xx) {
                    long t = xx + o_size[0] * (yy + o_size[1] * z);
                    long gx = o_start[0] + xx, gy = o_start[1] + yy, gz = o_start[2] + z;
                    long base = (gx - g_start[0]) + g_size[0] * ((gy - g_start[1]) + g_size[1] * (gz - g_start[2]));
                    double acc[CHUNK] = {0};
                    for (int k = 0; k < ncodes; ++k) {
                        double a = S[(long)k * n_owned + t];
                        if (a == 0.0)
                            continue;           /* also every neighbour outside the grid (sst_stiffness) */
                        long ix = gx + off[k][0], iy = gy + off[k][1], iz = gz + off[k][2];
                        if (ix < 0 || ix >= n[0] || iy < 0 || iy >= n[1] || iz < 0 || iz >= n[2])
                            continue;
                        const double *xk = xv + base + shift[k];
                        for (int v = 0; v < nv; ++v)
                            acc[v] += a * xk[v * n_ghosted];
                    }
                    for (int v = 0; v < nv; ++v)
                        yv[v * n_owned + t] = acc[v];
                }
    }
}

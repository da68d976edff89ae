/*
 * The CPU driver's f32 GEMM: C = alpha op(A) op(B) + beta C, row-major, computed by libxsmm's
 * JIT batch-reduce kernels under Strata's own blocking and packing (decision 0034).
 *
 * Kernel sets: drivers/cpu/gemm_sets.c compiles them once, when the driver prepares, so a
 * call looks nothing up.
 *
 * Blocking. In libxsmm's column-major terms the row-major C[m x n] is C'[n x m] = op(B)'
 * op(A)'. For each chunk of KC along k, op(B)' is packed as panels of BM columns of C
 * ([kc][BM]; a last panel that BM columns would leave mostly empty as 32, 16 or 8, so that
 * a C of 196 or 288 columns multiplies 200 or 288, not 256 or 320: decision 0052) and
 * op(A)' as blocks of rows of C ([kc / KB][rows][KB]; BN rows, then a tail of
 * 16, 8, 4, 2, 1 rows), zero-padded to whole KB. A kernel sums one chunk's products for a
 * tile into scratch, each element one chain of fused multiply-adds in k order (the same on
 * every instruction set), and the tile is added into C: c = alpha t + beta c for the first
 * chunk, c + alpha t for the next ones. An element's bits therefore depend on k and its own
 * row and column only, not on m, n, where its tile falls or the instruction set: every set,
 * the scalar one included, gives the same bits (the scalar set ends a chunk whose kc is not a
 * multiple of KB with t + 0, the padding's fma(0, 0, t): -0 becomes +0). Rows of C are
 * packed MC at a time (op(B)' packed once for up to MC rows), op(B)' one panel at a time just
 * before its tiles, so that the packed rows stay in L2; a narrow C (fewer than BM columns)
 * runs as its transpose (narrow()). Decision 0043.
 *
 * In place (decision 0122). A row-major op(A) (k contiguous) whose leading dimension was
 * declared beforehand (strata__sgemm_direct_prepare(): a Linear's widths) is not packed: the
 * set's in-place kernels read its rows where they lie, KB products a block, when every panel
 * is BM wide and k a multiple of KB. A Linear's forward C = X W' with few rows against a wide
 * layer (a ddp device's share of the batch) runs as C' = W X' into the op(A)' area the
 * in-place kernels leave free, W read in place, and C' is transposed into C: X and C move
 * instead of W. The same chains and updates either way: the same bits.
 *
 * Packing buffers: one fixed-size buffer per device (strata__sgemm_scratch_bytes()), carved
 * from the runtime's plan and registered by the device's thread at warm-up; this file maps
 * nothing. A registration is valid until the runtime forgets the buffer at teardown (a
 * generation number per registration, checked at each call), so a thread never packs into a
 * torn-down runtime's memory. A thread with no valid buffer runs the scalar set: the same
 * bits, slower.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "strata/status.h"
#include "arch/simd.h"
#include "arch/transpose.h"
#include "base/base.h"
#include "drivers/cpu/gemm.h"
#include "drivers/cpu/gemm_sets.h"

#define BM STRATA__SGEMM_BM
#define BN STRATA__SGEMM_BN
#define KB STRATA__SGEMM_KB /* k per batch-reduce block */
#define KC STRATA__SGEMM_KC /* k per chunk: the products an element sums before C is updated */
#ifndef NC
#define NC 64 /* columns of C packed at a time */
#endif
#ifndef MC
#define MC 512 /* rows of C packed at a time */
#endif
#define NROWS STRATA__SGEMM_NROWS
#define NWIDTH STRATA__SGEMM_NWIDTH
#define NTAIL STRATA__SGEMM_NTAIL
#define LDT_MAX STRATA__SGEMM_LDT_MAX
#define SLOT_FLOATS ((size_t)KC * (NC + MC) + (size_t)LDT_MAX * BN)
#define SLOT_BYTES (SLOT_FLOATS * sizeof(float))
#define MAX_BUFS 256 /* buffers registered at once, all runtimes together */

typedef strata__sgemm_kernel kernel_fn;
typedef struct strata__sgemm_kset kset_t;

/* ---- packing buffers (the plan's, registered per thread) ---- */

/* A registered buffer: its address and the generation its threads hold (0: free). */
static struct {
        void *buf;
        _Atomic uint64_t gen;
} bufs[MAX_BUFS];
static uint64_t last_gen; /* under reg_lock */
static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local float *mine;
static _Thread_local int mine_i;
static _Thread_local uint64_t mine_gen;

/* The calling thread's buffer while its registration holds, else NULL. */
static float *claim(void)
{
        if (mine && atomic_load_explicit(&bufs[mine_i].gen, memory_order_acquire) == mine_gen)
                return mine;
        return NULL;
}

/* ---- packing ---- */

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/*
 * dst[j * ld + i] = src[i * ls + j] for i < rows, j < cols: all of it in 16 x 16 blocks where
 * the CPU has AVX-512 (decision 0107), else 8 x 8 ones with AVX2, the rest one at a time.
 */
static void transpose(const float *src, size_t ls, int rows, int cols, float *dst, size_t ld)
{
        int i0 = 0;

#if defined(__x86_64__)
        if (strata__sgemm_cpu.avx2) /* t16 is set only where avx2 is */
                i0 = strata__sgemm_cpu.t16 ? strata__transpose16_all(src, ls, rows, cols, dst, ld)
                              : strata__transpose8_all(src, ls, rows, cols, dst, ld);
#endif
        for (int i = i0; i < rows; i++)
                for (int j = 0; j < cols; j++)
                        dst[j * ld + i] = src[i * ls + j];
}

/*
 * The plain copies of packing, one call per panel or block: dst row i (of @p w floats,
 * @p ld apart) = src row i (@p ls apart), i < @p rows. AVX2 moves where the CPU has them
 * (a memcpy per row of 64 to 256 bytes costs more than the copy: its start is slow).
 */
#if defined(__x86_64__)
__attribute__((target("avx2"))) static void copy_rows_avx2(float *dst, size_t ld,
                                                           const float *src, size_t ls,
                                                           int rows, int w)
{
        for (int r = 0; r < rows; r++, dst += ld, src += ls) {
                int i = 0;

                if (w == KB) { /* pack_a()'s blocks: a row in two moves, no loop */
                        _mm256_storeu_ps(dst, _mm256_loadu_ps(src));
                        _mm256_storeu_ps(dst + 8, _mm256_loadu_ps(src + 8));
                        continue;
                }
                for (; i + 16 <= w; i += 16) {
                        _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
                        _mm256_storeu_ps(dst + i + 8, _mm256_loadu_ps(src + i + 8));
                }
                for (; i + 8 <= w; i += 8)
                        _mm256_storeu_ps(dst + i, _mm256_loadu_ps(src + i));
                if (i < w) /* the last w % 8: nothing past w read or written (0101) */
                        strata__transpose8_copy_few(dst + i, src + i, w - i);
        }
}
#endif

static void copy_rows(float *dst, size_t ld, const float *src, size_t ls, int rows, int w)
{
#if defined(__x86_64__)
        if (strata__sgemm_cpu.avx2) {
                copy_rows_avx2(dst, ld, src, ls, rows, w);
                return;
        }
#endif
        for (int r = 0; r < rows; r++)
                memcpy(dst + (size_t)r * ld, src + (size_t)r * ls, sizeof(float) * (size_t)w);
}

/*
 * The width a panel of @p w <= BM columns is packed and multiplied at: BM, or for the last
 * panel of a C whose columns do not fill it the narrowest of 32, 16, 8 that holds them (so a
 * C of 196 columns computes 200, not 256). Its kernel's index into *@p which.
 */
static int panel_width(int w, int *which)
{
        int i = 0;

        while (i + 1 < NWIDTH && (BM >> (i + 1)) >= w)
                i++;
        if (which)
                *which = i;
        return BM >> i;
}

/*
 * op(B)' for columns [n0, n0 + nc) of C and k [k0, k0 + kc): panels of BM columns, each
 * [kcp][BM], zero past n and past kc.
 */
static void pack_b(float *dst, const struct strata__sgemm *g, int n0, int nc, int k0, int kc,
                   int kcp)
{
        for (int p = 0; p < nc; p += BM) {
                float *d = dst + (size_t)p * kcp;
                int w = nc - p < BM ? nc - p : BM, wp = panel_width(w, NULL), z = w < wp ? 0 : kc;

                if (z < kcp) /* the zeros: rows past kc (a narrow panel's: all), not the rest */
                        memset(d + (size_t)z * wp, 0, sizeof(float) * (size_t)wp * (kcp - z));
                if (!g->tb) /* B is k x n: a row of it is a row of the panel */
                        copy_rows(d, (size_t)wp, g->b + (size_t)k0 * g->ldb + n0 + p,
                                  (size_t)g->ldb, kc, w);
                else        /* B is n x k */
                        transpose(g->b + (size_t)(n0 + p) * g->ldb + k0, (size_t)g->ldb, w, kc,
                                  d, (size_t)wp);
        }
}

/* The rows of the next block of @p rem rows: BN, else the largest power of two. */
static int block_rows(int rem, int *which)
{
        int i = 0;

        while (strata__sgemm_tile_rows[i] > rem)
                i++;
        *which = i;
        return strata__sgemm_tile_rows[i];
}

/*
 * op(A)' for rows [m0, m0 + mc) of C and k [k0, k0 + kc): per block of rows (block_rows()),
 * [kcp / KB][rows][KB], zero past kc.
 */
static void pack_a(float *dst, const struct strata__sgemm *g, int m0, int mc, int k0, int kc,
                   int kcp)
{
        int w, bt;

        for (int r = 0; r < mc; r += bt) {
                float *d = dst + (size_t)r * kcp;

                bt = block_rows(mc - r, &w);
                if (kc < kcp) /* the last block of KB, partly copied; the others are whole */
                        memset(d + (size_t)(kc / KB * KB) * bt, 0, sizeof(float) * bt * KB);
                for (int q = 0; q < kc; q += KB) {
                        int kb = kc - q < KB ? kc - q : KB;
                        float *o = d + (size_t)q * bt;

                        if (g->ta) /* A is k x m */
                                transpose(g->a + (size_t)(k0 + q) * g->lda + m0 + r,
                                          (size_t)g->lda, kb, bt, o, KB);
                        else
                                copy_rows(o, KB, g->a + (size_t)(m0 + r) * g->lda + k0 + q,
                                          (size_t)g->lda, bt, kb);
                }
        }
}

/*
 * One element of C from its tile value @p t, @p mode 0: c + alpha t (after k's first chunk),
 * 1: alpha t (the first, beta 0: c unread), 2: alpha t + beta c (the first); ISO C, no
 * contraction: every clone rounds the same. @p z is -0 (t + z is t, whatever t is) or, after
 * a tail kernel, +0: the padding's fma(0, 0, t) that the tail did not run (-0 becomes +0).
 */
static inline float updated(int mode, const float *c, float t, float z, float alpha,
                            float beta)
{
        t = t + z;
        return mode == 0 ? *c + alpha * t : mode == 1 ? alpha * t : alpha * t + beta * *c;
}

/*
 * C (w columns, @p rows rows) from the tile t (column-major, ldt); @p first: k's first chunk,
 * @p z: updated()'s. restrict and, for a whole panel, a constant width: loops with no alias
 * test or peeled edge.
 */
STRATA_SIMD static void combine(float *restrict c, int ldc, const float *restrict t, int ldt,
                                int w, int rows, float z, float alpha, float beta, int first)
{
        int mode = !first ? 0 : beta == 0.0f ? 1 : 2;

        for (int j = 0; j < rows; j++, c += ldc, t += ldt)
                if (w == BM)
                        for (int i = 0; i < BM; i++)
                                c[i] = updated(mode, c + i, t[i], z, alpha, beta);
                else
                        for (int i = 0; i < w; i++)
                                c[i] = updated(mode, c + i, t[i], z, alpha, beta);
}

/*
 * The same for a tile of C's transpose (gemm_packed()'s narrow form): the tile's column i is
 * C's row i, its row j C's column j. The same expressions: the same bits.
 */
STRATA_SIMD static void combine_t(float *restrict c, int ldc, const float *restrict t, int ldt,
                                  int w, int rows, float z, float alpha, float beta, int first)
{
        int mode = !first ? 0 : beta == 0.0f ? 1 : 2;

        for (int i = 0; i < w; i++, c += ldc)
                for (int j = 0; j < rows; j++)
                        c[j] = updated(mode, c + j, t[i + (size_t)j * ldt], z, alpha, beta);
}

/* k == 0: C = beta C (beta 0: zeros). */
static void scale_only(const struct strata__sgemm *g)
{
        for (int i = 0; i < g->m; i++) {
                float *cr = g->c + (size_t)i * g->ldc;

                for (int j = 0; j < g->n; j++)
                        cr[j] = g->beta == 0.0f ? 0.0f : g->beta * cr[j];
        }
}

/*
 * The tiles of one packed chunk of @p kc products: for each panel of columns, each block of
 * rows. @p ct: @p g is C's transpose (g->c is C's own storage, g->ldc its rows'). Where kc is
 * over KB and its last block holds at most NTAIL products, that block runs as a tail kernel
 * of just those (the chains the same, the padding's +0 added in combine()): decision 0119.
 * The rows of C a tile updates are prefetched for writing (`prefetchw`, a hint NOP where a CPU
 * lacks it): a line another core holds, such as a ddp gradient the peer read in the last
 * reduce-scatter, is taken from it while the kernel sums (decision 0121). @p bp: op(A)'
 * packed, a block of rows @p bst = kcp floats after the last, or with @p dk (the set's kernels
 * that read A in place: every panel BM wide, kc a multiple of KB) A's own rows, @p bst = lda.
 */
#if defined(__x86_64__)
__attribute__((target("prfchw")))
#endif
static void chunk_tiles(const kset_t *s, const struct strata__sgemm *g, const float *ap,
                        const float *bp, size_t bst, const kernel_fn *dk, float *tile, int m0,
                        int mc, int n0, int nc, int kc, int first, int ct)
{
        int kcp = (kc + KB - 1) / KB * KB, t = kc % KB, tails = kc > KB && t && t <= NTAIL;
        unsigned long long count = (unsigned long long)(kcp / KB), whole = count - 1, one = 1;
        int w, wp, bt, which, wi;

        for (int p = 0; p < nc; p += BM) {
                w = nc - p < BM ? nc - p : BM;
                wp = panel_width(w, &wi);
                for (int r = 0; r < mc; r += bt) {
                        float *c = ct ? g->c + (size_t)(n0 + p) * g->ldc + m0 + r
                                      : g->c + (size_t)(m0 + r) * g->ldc + n0 + p;

                        bt = block_rows(mc - r, &which);
                        /* C's rows of the tile towards L2 while the kernel sums */
                        for (int j = 0, nj = ct ? w : bt, ni = ct ? bt : w; j < nj; j++)
                                for (int i = 0; i < BM && i < ni; i += 16) /* unrolled */
                                        __builtin_prefetch(c + (size_t)j * g->ldc + i, 1, 2);
                        kernel_fn tk = tails ? s->tail[wi][which][t - 1] : NULL;
                        kernel_fn k = dk ? dk[which] : s->k[wi][which];
                        const float *pa = ap + (size_t)p * kcp, *pb = bp + (size_t)r * bst;
                        float z = tk ? 0.0f : -0.0f;

                        if (tk) {
                                s->k[wi][which](pa, pb, tile, &whole);
                                tk(pa + whole * KB * wp, pb + whole * KB * bt, tile, &one);
                        } else {
                                k(pa, pb, tile, &count);
                        }
                        if (ct)
                                combine_t(c, g->ldc, tile, s->ldt, w, bt, z, g->alpha, g->beta,
                                          first);
                        else
                                combine(c, g->ldc, tile, s->ldt, w, bt, z, g->alpha, g->beta,
                                        first);
                }
        }
}

/*
 * A narrow C (fewer than BM columns, more rows) leaves most of each panel of BM columns
 * empty: such a call computes C' = op(B)' op(A)' instead (op(A)'s rows become the panels'
 * columns), writing each tile into C transposed. An element is still the chain of products
 * op(A)[i][k] op(B)[k][j] in k order (a product's bits do not depend on its operands'
 * order), updated as before: the same bits.
 */
static int narrow(const struct strata__sgemm *g)
{
        return g->n < BM && (size_t)(g->m + BM - 1) / BM * BM * (size_t)g->n <
                                    (size_t)BM * (size_t)g->m;
}

/* Columns of a packed chunk of op(B)' (pack_b()'s panels of at most BM, NC columns a chunk). */
#define NCP ((NC + BM - 1) / BM * BM)

/* The columns pack_b() lays out for @p n columns of C: whole chunks, then the last's panels. */
static size_t packed_width(int n)
{
        int last = n - (n - 1) / NC * NC, p = (last - 1) / BM * BM;

        return (size_t)((n - 1) / NC) * NCP + (size_t)p + (size_t)panel_width(last - p, NULL);
}

/*
 * gemm_packed() over @p pb, op(B)' packed whole by strata__sgemm_pack_b(): each (k0, n0)
 * chunk is what pack_b() writes for it, at k0 * packed_width(n) + n0 / NC * NCP * kcp.
 */
static size_t prepacked(int n, int n0, int k0, int kcp)
{
        return (size_t)k0 * packed_width(n) + (size_t)(n0 / NC) * NCP * kcp;
}

/*
 * The blocked loops over @p g (C's transpose when @p ct): @p pb, op(B)' packed beforehand
 * (strata__sgemm_pack_b()), or NULL: packed here; @p dk: A read in place (chunk_tiles()), or
 * NULL: packed here.
 */
static void gemm_loops(const kset_t *s, const struct strata__sgemm *g, float *slot,
                       const float *pb, const kernel_fn *dk, int ct)
{
        float *ap = slot, *bp = ap + (size_t)KC * NC, *tile = bp + (size_t)KC * MC;

        for (int m0 = 0; m0 < g->m; m0 += MC) {
                int mc = g->m - m0 < MC ? g->m - m0 : MC;

                for (int k0 = 0; k0 < g->k; k0 += KC) {
                        int kc = g->k - k0 < KC ? g->k - k0 : KC;
                        int kcp = (kc + KB - 1) / KB * KB;
                        const float *bq = dk ? g->a + (size_t)m0 * g->lda + k0 : bp;

                        if (!dk)
                                pack_a(bp, g, m0, mc, k0, kc, kcp);
                        for (int n0 = 0; n0 < g->n; n0 += NC) {
                                int nc = g->n - n0 < NC ? g->n - n0 : NC;

                                if (!pb)
                                        pack_b(ap, g, n0, nc, k0, kc, kcp);
                                chunk_tiles(s, g, pb ? pb + prepacked(g->n, n0, k0, kcp) : ap,
                                            bq, dk ? (size_t)g->lda : (size_t)kcp, dk, tile,
                                            m0, mc, n0, nc, kc, k0 == 0, ct);
                        }
                }
        }
}

/* The set's kernels that read @p g's A in place, where they apply (decision 0122), else NULL. */
static const kernel_fn *in_place(const kset_t *s, const struct strata__sgemm *g)
{
        if (g->ta || g->k % KB || g->n % BM)
                return NULL;
        return strata__sgemm_direct(s, g->lda);
}

/*
 * The kernels that read B in place where C = A B' (A m x k, B n x k: a Linear's forward) runs
 * as C' = B A' into the packing buffer, then transposed into C (out_t()), else NULL: with B
 * read in place, what moves is A (packed transposed), C' (out) and, for beta != 0, C (in)
 * instead of B (packed transposed). Taken where that is under half of B: a ddp device's few
 * rows against a wide layer (decision 0122).
 */
static const kernel_fn *out_transposed(const kset_t *s, const struct strata__sgemm *g,
                                       const float *pb)
{
        size_t mn = (size_t)g->m * (size_t)g->n, moved;

        if (pb || g->ta || !g->tb || g->m % BM || g->k % KB || mn > (size_t)KC * MC)
                return NULL;
        moved = (g->beta != 0.0f ? 2 : 1) * mn + (size_t)g->m * (size_t)g->k;
        return 2 * moved < (size_t)g->n * (size_t)g->k ? strata__sgemm_direct(s, g->ldb) : NULL;
}

/*
 * out_transposed()'s form, with its kernels @p dk: C' (n x m) in the buffer's op(A)' area,
 * which in-place kernels leave unused; each element's chain and updates are C's own (C's
 * values copied in for beta != 0, the result copied out): the same bits.
 */
static void out_t(const kset_t *s, const struct strata__sgemm *g, float *slot,
                  const kernel_fn *dk)
{
        float *ct = slot + (size_t)KC * NC;
        struct strata__sgemm t = { .ta = 0, .tb = 1, .m = g->n, .n = g->m, .k = g->k,
                                   .alpha = g->alpha, .beta = g->beta, .a = g->b,
                                   .lda = g->ldb, .b = g->a, .ldb = g->lda, .c = ct,
                                   .ldc = g->m };

        if (g->beta != 0.0f)
                transpose(g->c, (size_t)g->ldc, g->m, g->n, ct, (size_t)g->m);
        gemm_loops(s, &t, slot, NULL, dk, 0);
        transpose(ct, (size_t)g->m, g->n, g->m, g->c, (size_t)g->ldc);
}

/* @p pb: op(B)' packed beforehand (strata__sgemm_pack_b()), or NULL: packed here. */
static void gemm_packed(const kset_t *s, const struct strata__sgemm *g0, float *slot,
                        const float *pb)
{
        int ct = narrow(g0);
        struct strata__sgemm t = { .ta = !g0->tb, .tb = !g0->ta, .m = g0->n, .n = g0->m,
                                   .k = g0->k, .alpha = g0->alpha, .beta = g0->beta,
                                   .a = g0->b, .lda = g0->ldb, .b = g0->a, .ldb = g0->lda,
                                   .c = g0->c, .ldc = g0->ldc };
        const struct strata__sgemm *g = ct ? &t : g0;
        const kernel_fn *dk = ct ? NULL : out_transposed(s, g0, pb);

        if (dk)
                out_t(s, g0, slot, dk);
        else
                gemm_loops(s, g, slot, pb, in_place(s, g), ct);
}

/* The scalar set: the same chains and updates, one element at a time. */
static void gemm_scalar(const struct strata__sgemm *g)
{
        for (int i = 0; i < g->m; i++)
                for (int j = 0; j < g->n; j++) {
                        float *c = g->c + (size_t)i * g->ldc + j;

                        for (int k0 = 0; k0 < g->k; k0 += KC) {
                                int kc = g->k - k0 < KC ? g->k - k0 : KC;
                                float t = 0.0f;

                                for (int kk = k0; kk < k0 + kc; kk++) {
                                        float a = g->ta ? g->a[(size_t)kk * g->lda + i]
                                                        : g->a[(size_t)i * g->lda + kk];
                                        float b = g->tb ? g->b[(size_t)j * g->ldb + kk]
                                                        : g->b[(size_t)kk * g->ldb + j];

                                        t = fmaf(a, b, t);
                                }
                                if (kc % KB) /* libxsmm's zero padding: fma(0, 0, t) */
                                        t = t + 0.0f;
                                if (k0)
                                        *c = *c + g->alpha * t;
                                else if (g->beta == 0.0f)
                                        *c = g->alpha * t;
                                else
                                        *c = g->alpha * t + g->beta * *c;
                        }
                }
}

void strata__sgemm(enum strata_kernels set, const struct strata__sgemm *g)
{
        strata__sgemm_pb(set, g, NULL);
}

void strata__sgemm_pb(enum strata_kernels set, const struct strata__sgemm *g, const float *pb)
{
        const kset_t *s = strata__sgemm_kset(set);
        float *slot;

        if (g->m <= 0 || g->n <= 0)
                return;
        if (g->k <= 0) {
                scale_only(g);
                return;
        }
        if (set == STRATA_KERNELS_SCALAR || !s->k[0][0] || !(slot = claim())) {
                gemm_scalar(g);
                return;
        }
        gemm_packed(s, g, slot, g->tb && !narrow(g) ? pb : NULL);
}

size_t strata__sgemm_pack_b_floats(int n, int k)
{
        if (n <= 0 || k <= 0)
                return 0;
        return packed_width(n) * ((size_t)k / KC * KC + (size_t)(k % KC + KB - 1) / KB * KB);
}

void strata__sgemm_pack_b(const float *b, int ldb, int n, int k, float *dst)
{
        struct strata__sgemm g = { .tb = 1, .n = n, .k = k, .b = b, .ldb = ldb };

        strata__sgemm_compile(); /* the CPU's features: the same values either way, faster */
        for (int k0 = 0; k0 < k; k0 += KC) {
                int kc = k - k0 < KC ? k - k0 : KC, kcp = (kc + KB - 1) / KB * KB;

                for (int n0 = 0; n0 < n; n0 += NC)
                        pack_b(dst + prepacked(n, n0, k0, kcp), &g, n0,
                               n - n0 < NC ? n - n0 : NC, k0, kc, kcp);
        }
}

void strata__sgemm_use(void *buf)
{
        int i, fresh = -1;

        mine = NULL;
        if (!buf)
                return;
        pthread_mutex_lock(&reg_lock);
        for (i = 0; i < MAX_BUFS && bufs[i].buf != buf; i++)
                if (fresh < 0 && !bufs[i].buf)
                        fresh = i;
        if (i == MAX_BUFS && fresh >= 0) { /* a new buffer: a new generation */
                i = fresh;
                bufs[i].buf = buf;
                atomic_store_explicit(&bufs[i].gen, ++last_gen, memory_order_release);
        }
        if (i < MAX_BUFS) { /* else none free: this thread runs the scalar set */
                mine = buf;
                mine_i = i;
                mine_gen = atomic_load_explicit(&bufs[i].gen, memory_order_relaxed);
        }
        pthread_mutex_unlock(&reg_lock);
}

void strata__sgemm_forget(void *buf)
{
        if (!buf)
                return;
        pthread_mutex_lock(&reg_lock);
        for (int i = 0; i < MAX_BUFS; i++)
                if (bufs[i].buf == buf) {
                        atomic_store_explicit(&bufs[i].gen, 0, memory_order_release);
                        bufs[i].buf = NULL;
                }
        pthread_mutex_unlock(&reg_lock);
}

float *strata__sgemm_buffer(size_t *floats)
{
        *floats = SLOT_FLOATS;
        return claim();
}

/* Whole pages: the plan's page-aligned parts after it keep their padding. */
size_t strata__sgemm_scratch_bytes(void)
{
        return (SLOT_BYTES + 4095) / 4096 * 4096;
}

/*
 * A convolution's small products (nn/conv_parts.h), not through strata_gemm(): a reduction of a few
 * terms (K = 9 for a one-channel 3 x 3 kernel) pads to the GEMM's blocks of 16 and pays its
 * packing for nothing. Each element is the chain the GEMM's contract computes
 * (drivers/cpu/gemm.c, its scalar set): t = 0, t = fmaf(a, b, t) in reduction order, in chunks
 * of KC terms, the first chunk's t stored (beta 0) or added (beta 1), the next ones added. ISO
 * C with explicit fmaf, and where two rows run at a time in AVX2 the FMA intrinsic
 * lane by lane (decision 0115): every clone and every kernel set gives the same bits as the
 * GEMM. fp32 only (mixed precision rounds the operands first: strata_gemm() keeps those). The
 * same chains run on a sample's columns or, on the direct path, on the shifted views of its
 * padded copy.
 */
#include <math.h>
#include <string.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "strata/nn.h"
#include "arch/simd.h"
#include "nn/conv_parts.h"

#define GEMM_KC 256 /* the GEMM's chunk along k (drivers/cpu/gemm.c KC) */
#define LANES 32    /* output positions a direct product keeps in flight */
#define TAIL_LANES 8 /* then, of the positions left, 8 at a time (784 = 24 x 32 + 2 x 8) */

#if defined(__x86_64__)
/*
 * Rows @p r0 and @p r1 of a, positions [0, the last whole LANES): each output's chain as
 * row_from() runs it (lane q: t = fmaf(w_r, b[r][q], t), r in order, then t + bias), two rows
 * at once so that eight accumulators are in flight and each b vector is loaded once for both:
 * GCC keeps the generic form's arrays on the stack. Returns the first position left.
 */
__attribute__((target("avx2,fma"))) static int pair_avx2(const float *r0, const float *r1,
                                                         size_t ar, int nr, const float *b,
                                                         int p, const float *bias, float *o0,
                                                         float *o1)
{
        int q0 = 0;

        for (; q0 + LANES <= p; q0 += LANES) {
                __m256 t[8];

                for (int j = 0; j < 8; j++)
                        t[j] = _mm256_setzero_ps();
                for (int r = 0; r < nr; r++) {
                        const float *br = b + (size_t)r * p + q0;
                        __m256 w0 = _mm256_broadcast_ss(r0 + (size_t)r * ar);
                        __m256 w1 = _mm256_broadcast_ss(r1 + (size_t)r * ar);

                        for (int j = 0; j < 4; j++) {
                                __m256 x = _mm256_loadu_ps(br + 8 * j);

                                t[j] = _mm256_fmadd_ps(w0, x, t[j]);
                                t[4 + j] = _mm256_fmadd_ps(w1, x, t[4 + j]);
                        }
                }
                for (int j = 0; j < 4; j++) {
                        if (bias) {
                                t[j] = _mm256_add_ps(t[j], _mm256_set1_ps(bias[0]));
                                t[4 + j] = _mm256_add_ps(t[4 + j], _mm256_set1_ps(bias[1]));
                        }
                        _mm256_storeu_ps(o0 + q0 + 8 * j, t[j]);
                        _mm256_storeu_ps(o1 + q0 + 8 * j, t[4 + j]);
                }
        }
        return q0;
}
#endif

/* Row @p i's positions from @p q0 on: the chains of strata__conv_small_product(). */
STRATA_SIMD static void row_from(const float *a, size_t ai, size_t ar, int i, int nr,
                                 const float *b, int p, const float *bias, float *out, int q0)
{
        const float *ra = a + (size_t)i * ai;
        float *o = out + (size_t)i * p, bi = bias ? bias[i] : 0.0f;

        for (; q0 + LANES <= p; q0 += LANES) {
                float t[LANES] = { 0.0f };

                for (int r = 0; r < nr; r++) {
                        const float *br = b + (size_t)r * p + q0;
                        float w = ra[(size_t)r * ar];

                        for (int j = 0; j < LANES; j++)
                                t[j] = fmaf(w, br[j], t[j]);
                }
                for (int j = 0; j < LANES; j++)
                        o[q0 + j] = bias ? t[j] + bi : t[j];
        }
        for (; q0 + TAIL_LANES <= p; q0 += TAIL_LANES) { /* the same chains, fewer */
                float t[TAIL_LANES] = { 0.0f };

                for (int r = 0; r < nr; r++) {
                        const float *br = b + (size_t)r * p + q0;
                        float w = ra[(size_t)r * ar];

                        for (int j = 0; j < TAIL_LANES; j++)
                                t[j] = fmaf(w, br[j], t[j]);
                }
                for (int j = 0; j < TAIL_LANES; j++)
                        o[q0 + j] = bias ? t[j] + bi : t[j];
        }
        for (int q = q0; q < p; q++) {
                float t = 0.0f;

                for (int r = 0; r < nr; r++)
                        t = fmaf(ra[(size_t)r * ar], b[(size_t)r * p + q], t);
                o[q] = bias ? t + bi : t;
        }
}

/*
 * out[i][q] = sum_r a[i ai + r ar] b[r][q] (+ bias[i]), i < @p ni, q < @p p, r < @p nr
 * (<= STRATA__CONV_SMALL_K, one chunk): the forward product (a = W) and the column gradient
 * (a = W^T). Two rows at a time in pair_avx2() where it runs, the rest row by row.
 */
void strata__conv_small_product(const float *a, size_t ai, size_t ar, int ni, int nr,
                                const float *b, int p, const float *bias, float *out)
{
        int i = 0;

#if defined(__x86_64__)
        /* where the clones run AVX2, as measured (decision 0115); AVX-512 keeps its clone */
        int two = !strcmp(strata__simd_isa(), "avx2");

        for (; two && i + 2 <= ni; i += 2) {
                int q0 = pair_avx2(a + (size_t)i * ai, a + (size_t)(i + 1) * ai, ar, nr, b, p,
                                   bias ? bias + i : NULL, out + (size_t)i * p,
                                   out + (size_t)(i + 1) * p);

                row_from(a, ai, ar, i, nr, b, p, bias, out, q0);
                row_from(a, ai, ar, i + 1, nr, b, p, bias, out, q0);
        }
#endif
        for (; i < ni; i++)
                row_from(a, ai, ar, i, nr, b, p, bias, out, 0);
}

/*
 * One chunk [q0, q1) of @p G weight-gradient chains side by side: t[j] = sum_q d[q] c_j[q],
 * c_j = cols row k0 + j, in q order, each its own chain (no lanes cross: the same bits on every
 * clone). @p G is a constant per instance, so the chains stay in registers; rows past @p n
 * re-read row k0 and are dropped (a group is padded rather than split into a serial tail).
 */
#define WGRAD_GROUP(G)                                                                           \
        STRATA_SIMD static void wgrad_chunk_##G(const float *d, const float *cols, size_t p,   \
                                               int k0, int n, int q0, int q1, float *t)       \
        {                                                                                      \
                const float *c[G];                                                             \
                float s[G] = { 0.0f };                                                         \
                                                                                               \
                for (int j = 0; j < G; j++)                                                    \
                        c[j] = cols + (size_t)(j < n ? k0 + j : k0) * p;                       \
                for (int q = q0; q < q1; q++)                                                  \
                        for (int j = 0; j < G; j++)                                            \
                                s[j] = fmaf(d[q], c[j][q], s[j]);                              \
                for (int j = 0; j < n; j++)                                                    \
                        t[j] = s[j];                                                           \
        }
WGRAD_GROUP(4)
WGRAD_GROUP(8)
WGRAD_GROUP(12)
WGRAD_GROUP(16)

/*
 * dW[o][k] = (@p fresh ? 0 : dW[o][k]) + sum_q dy[o][q] cols[k][q], the GEMM's chains over q
 * in chunks of GEMM_KC, each chunk's sum added in chunk order; up to 16 rows of K at a time.
 */
void strata__conv_small_wgrad(const float *dy, const float *cols, int co, int kk, int p,
                              int fresh, float *dw)
{
        float t[16];

        for (int o = 0; o < co; o++) {
                const float *d = dy + (size_t)o * p;
                float *g = dw + (size_t)o * kk;

                for (int q0 = 0; q0 < p; q0 += GEMM_KC) {
                        int q1 = p - q0 < GEMM_KC ? p : q0 + GEMM_KC;

                        for (int k0 = 0; k0 < kk; k0 += 16) {
                                int n = kk - k0 < 16 ? kk - k0 : 16;

                                if (n <= 4)
                                        wgrad_chunk_4(d, cols, (size_t)p, k0, n, q0, q1, t);
                                else if (n <= 8)
                                        wgrad_chunk_8(d, cols, (size_t)p, k0, n, q0, q1, t);
                                else if (n <= 12)
                                        wgrad_chunk_12(d, cols, (size_t)p, k0, n, q0, q1, t);
                                else
                                        wgrad_chunk_16(d, cols, (size_t)p, k0, n, q0, q1, t);
                                for (int j = 0; j < n; j++)
                                        g[k0 + j] = q0 == 0 && fresh ? t[j] : g[k0 + j] + t[j];
                        }
                }
        }
}

/*
 * GCC's unroll-and-jam (-O3) fuses pairs of the forward's r loop into one loop over q that it
 * then leaves scalar: off for that function (the chains are the same either way).
 */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_JAM __attribute__((optimize("no-loop-unroll-and-jam")))
#else
#define NO_JAM
#endif

/*
 * strata__conv_small_product()'s forward on the views: y[o][q] = sum_r W[o][r] xp[tap_r + q's]
 * (+ b), each output's chain t = 0, t = fmaf(W[o][r], x, t) in r order kept in y itself, a
 * line at a time.
 */
NO_JAM STRATA_SIMD void strata__conv_direct_forward(const struct strata__conv_geom *g,
                                                    const struct strata__conv_pad *pd,
                                                    const float *restrict w,
                                                    const float *restrict bias,
                                                    const float *restrict xp, float *restrict y)
{
        size_t off[STRATA__CONV_SMALL_K];
        int kk = (int)g->kk, ow = g->out[2];

        for (int r = 0; r < kk; r++)
                off[r] = strata__conv_tap_at(g, pd, (size_t)r);
        for (int o = 0; o < g->cout; o++) {
                const float *ra = w + (size_t)o * kk;

                for (int od = 0; od < g->out[0]; od++)
                        for (int oh = 0; oh < g->out[1]; oh++, y += ow) {
                                const float *xl = xp + strata__conv_line_at(pd, od, oh);

                                for (int q = 0; q < ow; q++)
                                        y[q] = 0.0f;
                                for (int r = 0; r < kk; r++) {
                                        const float *br = xl + off[r];
                                        float wr = ra[r];

                                        for (int q = 0; q < ow; q++)
                                                y[q] = fmaf(wr, br[q], y[q]);
                                }
                                for (int q = 0; q < ow && bias; q++)
                                        y[q] = y[q] + bias[o];
                        }
        }
}

/*
 * wgrad_chunk_G's chains on the views: positions [q0, q1) a line at a time, each chain
 * t[j] = sum_q d[q] xp[off[j] + q's] in q order; chains past @p n re-read the first.
 */
#define DIRECT_WGRAD(G)                                                                            \
        STRATA_SIMD static void direct_wgrad_##G(const struct strata__conv_geom *g,                \
                                                const struct strata__conv_pad *pd,                 \
                                                const float *d, const float *xp,                   \
                                                const size_t *off, int n, int q0, int q1,          \
                                                float *t)                                          \
        {                                                                                          \
                const float *c[G];                                                                 \
                float s[G] = { 0.0f };                                                             \
                int ow = g->out[2], q = q0;                                                        \
                                                                                                   \
                while (q < q1) {                                                                   \
                        int line = q / ow, w = q % ow, m = ow - w < q1 - q ? ow - w : q1 - q;      \
                        const float *xl = xp + strata__conv_line_at(pd, line / g->out[1],          \
                                                                    line % g->out[1]) + w;         \
                        const float *dq = d + q;                                                   \
                                                                                                   \
                        for (int j = 0; j < G; j++)                                                \
                                c[j] = xl + off[j < n ? j : 0];                                    \
                        for (int i = 0; i < m; i++)                                                \
                                for (int j = 0; j < G; j++)                                        \
                                        s[j] = fmaf(dq[i], c[j][i], s[j]);                         \
                        q += m;                                                                    \
                }                                                                                  \
                for (int j = 0; j < n; j++)                                                        \
                        t[j] = s[j];                                                               \
        }
DIRECT_WGRAD(4)
DIRECT_WGRAD(8)
DIRECT_WGRAD(9)
DIRECT_WGRAD(12)
DIRECT_WGRAD(16)

/* strata__conv_small_wgrad() on the views of sample copy @p xp: the same chains, chunks, order. */
void strata__conv_direct_wgrad(const struct strata__conv_geom *g,
                               const struct strata__conv_pad *pd, const float *dy,
                               const float *xp, int fresh, float *dw)
{
        int p = (int)g->out_sp, kk = (int)g->kk;
        size_t off[STRATA__CONV_SMALL_K];
        float t[16];

        for (int r = 0; r < kk; r++)
                off[r] = strata__conv_tap_at(g, pd, (size_t)r);
        for (int o = 0; o < g->cout; o++) {
                const float *d = dy + (size_t)o * p;
                float *gw = dw + (size_t)o * kk;

                for (int q0 = 0; q0 < p; q0 += GEMM_KC) {
                        int q1 = p - q0 < GEMM_KC ? p : q0 + GEMM_KC;

                        for (int k0 = 0; k0 < kk; k0 += 16) {
                                int n = kk - k0 < 16 ? kk - k0 : 16;
                                const size_t *ok = off + k0;

                                if (n <= 4)
                                        direct_wgrad_4(g, pd, d, xp, ok, n, q0, q1, t);
                                else if (n <= 8)
                                        direct_wgrad_8(g, pd, d, xp, ok, n, q0, q1, t);
                                else if (n <= 9)
                                        direct_wgrad_9(g, pd, d, xp, ok, n, q0, q1, t);
                                else if (n <= 12)
                                        direct_wgrad_12(g, pd, d, xp, ok, n, q0, q1, t);
                                else
                                        direct_wgrad_16(g, pd, d, xp, ok, n, q0, q1, t);
                                for (int j = 0; j < n; j++)
                                        gw[k0 + j] = q0 == 0 && fresh ? t[j] : gw[k0 + j] + t[j];
                        }
                }
        }
}


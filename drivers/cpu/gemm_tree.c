/*
 * The CPU driver's chunk tree in one GEMM (decision 0095): invariant mode's weight gradient
 * over one device's chunks, C = the fixed tree over the chunks' products A_j^T B_j (struct
 * strata_gemm_tree), made one tile of C at a time. In a tile, each chunk's chain of products
 * runs in registers (from zero, in k order, rounded into the chunk's value every
 * STRATA__SGEMM_KC products as strata__sgemm() rounds into C), the chunk's value goes onto
 * the top partial sum (t + c, beta 1) or becomes a new one, the top is added into the one
 * below it where the tree says (below + top, the add kernel's sum of two), the partial sums
 * wait in a few tiles of the packing buffer, and the last value is stored into C once. Each
 * element sees the operations the per-chunk GEMMs and the tree's additions make, on the same
 * values in the same order, so it has their bits; they wrote the whole C once per chunk and
 * read it back for each addition.
 *
 * Packing, in the calling thread's GEMM buffer (drivers/cpu/gemm.c): A's columns (C's rows)
 * MR at a time, a k row's MR values side by side, for a block of C's rows that keeps A in
 * the L2 (A_BYTES) and fits the buffer; then B one panel of NR columns at a time (zero past
 * n), so that a tile reads both in order.
 * The AVX-512 tiles are 12 x 32, the AVX2 ones 6 x 16. The scalar set, a CPU without AVX2 and
 * a thread without a buffer walk the tree one element at a time with fmaf: the same bits.
 */
#include <math.h>
#include <string.h>

#include "strata/device.h"
#include "strata/status.h"
#include "base/base.h"
#include "drivers/cpu/gemm.h"

#define KC STRATA__SGEMM_KC
#define KB STRATA__SGEMM_KB
#define LEAVES_MAX 256
/*
 * A block of C's rows packs A_BYTES of A, so that it stays in the L2 while every panel of B
 * passes over it (the wide model's 2048 rows of 64 k rows, 512 KiB, streamed from the L3 once
 * per panel ran the tiles at 27 GFLOP/s on a first-generation Zen, 128 KiB blocks at 35:
 * decision 0118); but no fewer than A_ROWS_MIN rows unless the buffer holds fewer, since each
 * block packs B again from its strided rows in memory, which at 60 rows a block (512 k rows)
 * cost more than the L3 did. The blocks of a call are then made as even as the tiles allow.
 */
#define A_BYTES ((size_t)128 * 1024)
#define A_ROWS_MIN ((size_t)252)
/* Tiles ahead of the one running whose lines of C are asked for (fetch_c()). */
#define C_AHEAD 2

/* ---- the tree ---- */

/* Whether @p g is a tree this file makes (shapes, rows, one entry left); its most entries. */
static int check(const struct strata_gemm_tree *g, int *depth)
{
        int top = 0, most = 0;

        if (g->m < 0 || g->n < 0 || g->lda < g->m || g->ldb < g->n || g->ldc < g->n)
                return strata__fail(STRATA_EINVAL, "gemm_tree: C %d x %d with leading "
                                    "dimensions %d, %d, %d", g->m, g->n, g->lda, g->ldb, g->ldc);
        if (g->leaves < 1 || g->leaves > LEAVES_MAX || !g->lo || !g->op)
                return strata__fail(STRATA_EINVAL, "gemm_tree: %d chunks (1 to %d, with their "
                                    "rows and operations)", g->leaves, LEAVES_MAX);
        if (g->m && g->n && (!g->c || (g->lo[g->leaves] > g->lo[0] && (!g->a || !g->b))))
                return strata__fail(STRATA_EINVAL, "gemm_tree: a NULL matrix");
        for (int j = 0; j < g->leaves; j++) {
                int adds = g->op[j] >> 1;

                if (g->lo[j] < 0 || g->lo[j + 1] < g->lo[j])
                        return strata__fail(STRATA_EINVAL, "gemm_tree: chunk %d's rows [%d, %d)",
                                            j, g->lo[j], g->lo[j + 1]);
                if (!(g->op[j] & STRATA_TREE_ONTO))
                        top++;
                else if (!top)
                        return strata__fail(STRATA_EINVAL, "gemm_tree: chunk %d onto no sum", j);
                most = top > most ? top : most;
                if (adds >= top)
                        return strata__fail(STRATA_EINVAL, "gemm_tree: chunk %d: %d additions "
                                            "over %d sums", j, adds, top);
                top -= adds;
        }
        if (top != 1)
                return strata__fail(STRATA_EINVAL, "gemm_tree: the tree leaves %d sums, not one",
                                    top);
        *depth = most;
        return STRATA_OK;
}

/* ---- one element at a time ---- */

/* Chunk @p j's value for C's element (@p i, @p l), onto @p c or not: strata__sgemm()'s. */
static float leaf(const struct strata_gemm_tree *g, int j, int i, int l, int onto, float c)
{
        int lo = g->lo[j], hi = g->lo[j + 1];
        float v = onto ? c : 0.0f; /* no rows: C = beta C */

        for (int k0 = lo; k0 < hi; k0 += KC) {
                int k1 = hi - k0 < KC ? hi : k0 + KC;
                float t = 0.0f;

                for (int q = k0; q < k1; q++)
                        t = fmaf(g->a[(size_t)q * g->lda + i], g->b[(size_t)q * g->ldb + l], t);
                if ((k1 - k0) % KB) /* strata__sgemm()'s zero padding: fma(0, 0, t) */
                        t = t + 0.0f;
                v = k0 > lo ? v + t : onto ? t + c : t;
        }
        return v;
}

static void walk_scalar(const struct strata_gemm_tree *g)
{
        float st[LEAVES_MAX];

        for (int i = 0; i < g->m; i++)
                for (int l = 0; l < g->n; l++) {
                        int top = 0;

                        for (int j = 0; j < g->leaves; j++) {
                                if (g->op[j] & STRATA_TREE_ONTO)
                                        st[top - 1] = leaf(g, j, i, l, 1, st[top - 1]);
                                else
                                        st[top++] = leaf(g, j, i, l, 0, 0.0f);
                                for (int a = g->op[j] >> 1; a > 0; a--, top--)
                                        st[top - 2] = st[top - 2] + st[top - 1];
                        }
                        g->c[(size_t)i * g->ldc + l] = st[0];
                }
}

/* ---- tiles ---- */

/* The tree as a tile walks it: rows relative to the first chunk's. */
struct prog {
        int leaves;
        int simple; /* every chunk has 1 to KC rows: one chain each, no pieces */
        const int *lo;
        const unsigned char *op;
};

#if defined(__x86_64__)
#include <immintrin.h>

/* Loops over a tile's rows and vectors, unrolled whole: acc's indices constant, in registers. */
#define ROWS(i) _Pragma("GCC unroll 16") for (int i = 0; i < mr; i++)
#define VECS(v) _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++)

/*
 * One tile of @p mr rows (a constant once inlined) and NR = 2 VL columns, @p w of them C's:
 * the chunks' chains in acc, the partial sums in @p st (MR x NR floats each), C stored once.
 */
#define TREE_TILE(NAME, TGT, V, VL, MR, ZERO, LOAD, STORE, BCAST, FMA, ADD)                    \
        __attribute__((target(TGT), always_inline)) static inline void NAME##_body(            \
                const int mr, const int simple, const struct prog *p, const float *ap,         \
                const float *bp, float *st, float *c, int ldc, int w)                          \
        {                                                                                      \
                V acc[MR][2];                                                                  \
                float *e = st;                                                                 \
                int top = 0;                                                                   \
                                                                                               \
                ROWS(i) /* (leaves >= 1: for the compiler) */                                  \
                        acc[i][0] = acc[i][1] = ZERO();                                        \
                for (int j = 0; j < p->leaves; j++) {                                          \
                        int r0 = p->lo[j], r1 = p->lo[j + 1];                                  \
                        int onto = p->op[j] & STRATA_TREE_ONTO;                                \
                                                                                               \
                        e = st + (size_t)(onto ? top - 1 : top++) * MR * 2 * VL;               \
                        if (!simple && r0 == r1) /* no rows: C = beta C */                     \
                                ROWS(i)                                                        \
                                        VECS(v)                                                \
                                                acc[i][v] = onto ? LOAD(e + i * 2 * VL +       \
                                                                        v * VL)                \
                                                                 : ZERO();                     \
                        for (int k0 = r0; simple ? k0 == r0 : k0 < r1; k0 += KC) {             \
                                int k1 = simple || r1 - k0 < KC ? r1 : k0 + KC;                \
                                                                                               \
                                ROWS(i)                                                        \
                                        acc[i][0] = acc[i][1] = ZERO();                        \
                                _Pragma("GCC unroll 4") for (int r = k0; r < k1; r++) {       \
                                        V b0 = LOAD(bp + (size_t)r * 2 * VL);                  \
                                        V b1 = LOAD(bp + (size_t)r * 2 * VL + VL);             \
                                                                                               \
                                        ROWS(i) {                                              \
                                                V a = BCAST(ap + (size_t)r * MR + i);          \
                                                                                               \
                                                acc[i][0] = FMA(a, b0, acc[i][0]);             \
                                                acc[i][1] = FMA(a, b1, acc[i][1]);             \
                                        }                                                      \
                                }                                                              \
                                if ((k1 - k0) % KB) /* the GEMM's zero padding: -0 to +0 */    \
                                        ROWS(i)                                                \
                                                VECS(v)                                        \
                                                        acc[i][v] = ADD(acc[i][v], ZERO());    \
                                ROWS(i) /* c + t; onto: t + c */                               \
                                        VECS(v)                                                \
                                                if (!simple && k0 > r0)                        \
                                                        acc[i][v] = ADD(                       \
                                                                LOAD(e + i * 2 * VL + v * VL), \
                                                                acc[i][v]);                    \
                                                else if (onto)                                 \
                                                        acc[i][v] = ADD(                       \
                                                                acc[i][v],                     \
                                                                LOAD(e + i * 2 * VL + v * VL)); \
                                if (!simple && k1 < r1) /* more rows */                        \
                                        ROWS(i)                                                \
                                                VECS(v)                                        \
                                                        STORE(e + i * 2 * VL + v * VL,         \
                                                              acc[i][v]);                      \
                        }                                                                      \
                        for (int a = p->op[j] >> 1; a > 0; a--) { /* below + top */            \
                                e = st + (size_t)(--top - 1) * MR * 2 * VL;                    \
                                ROWS(i)                                                        \
                                        VECS(v)                                                \
                                                acc[i][v] = ADD(LOAD(e + i * 2 * VL + v * VL), \
                                                                acc[i][v]);                    \
                        }                                                                      \
                        if (j + 1 < p->leaves || w < 2 * VL)                                   \
                                ROWS(i)                                                        \
                                        VECS(v)                                                \
                                                STORE(e + i * 2 * VL + v * VL, acc[i][v]);     \
                }                                                                              \
                ROWS(i) /* the one sum left: into C */                                       \
                        if (w < 2 * VL)                                                        \
                                memcpy(c + (size_t)i * ldc, e + i * 2 * VL,                    \
                                       sizeof(float) * (size_t)w);                             \
                        else                                                                   \
                                VECS(v)                                                        \
                                        STORE(c + (size_t)i * ldc + v * VL, acc[i][v]);        \
        }

static inline __m256 bcast256(const float *p) __attribute__((target("avx2,fma"), always_inline));
static inline __m256 bcast256(const float *p)
{
        return _mm256_broadcast_ss(p);
}

static inline __m512 bcast512(const float *p) __attribute__((target("avx512f"), always_inline));
static inline __m512 bcast512(const float *p)
{
        return _mm512_set1_ps(*p);
}

TREE_TILE(avx2, "avx2,fma", __m256, 8, 6, _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps,
          bcast256, _mm256_fmadd_ps, _mm256_add_ps)
TREE_TILE(avx512, "avx512f,avx2,fma", __m512, 16, 12, _mm512_setzero_ps, _mm512_loadu_ps,
          _mm512_storeu_ps, bcast512, _mm512_fmadd_ps, _mm512_add_ps)

#define TILE_ARGS const struct prog *p, const float *ap, const float *bp, float *st, float *c, \
                  int ldc, int w
#define TILE_CASE(NAME, R)                                                                      \
        case R:                                                                                \
                if (p->simple)                                                                 \
                        NAME##_body(R, 1, p, ap, bp, st, c, ldc, w);                           \
                else                                                                           \
                        NAME##_body(R, 0, p, ap, bp, st, c, ldc, w);                           \
                break;

__attribute__((target("avx2,fma"))) static void tile_avx2(int mr, TILE_ARGS)
{
        switch (mr) {
        TILE_CASE(avx2, 1) TILE_CASE(avx2, 2) TILE_CASE(avx2, 3) TILE_CASE(avx2, 4)
        TILE_CASE(avx2, 5) TILE_CASE(avx2, 6)
        default: break;
        }
}

__attribute__((target("avx512f,avx2,fma"))) static void tile_avx512(int mr, TILE_ARGS)
{
        switch (mr) {
        TILE_CASE(avx512, 1) TILE_CASE(avx512, 2) TILE_CASE(avx512, 3) TILE_CASE(avx512, 4)
        TILE_CASE(avx512, 5) TILE_CASE(avx512, 6) TILE_CASE(avx512, 7) TILE_CASE(avx512, 8)
        TILE_CASE(avx512, 9) TILE_CASE(avx512, 10) TILE_CASE(avx512, 11)
        TILE_CASE(avx512, 12)
        default: break;
        }
}
#endif /* __x86_64__ */

/* A tile size and its kernel. */
struct isa {
        int mr, nr;
        void (*tile)(int mr, const struct prog *p, const float *ap, const float *bp, float *st,
                     float *c, int ldc, int w);
};

/*
 * A's columns [m0, m0 + mc) (C's rows) over @p k rows from @p r0: blocks of @p mr columns,
 * each [k][mr], zero past m.
 */
static void pack_a(const struct strata_gemm_tree *g, int r0, int k, int m0, int mc, int mr,
                   float *dst)
{
        for (int i0 = m0; i0 < m0 + mc; i0 += mr) {
                int w = g->m - i0 < mr ? g->m - i0 : mr;

                for (int r = 0; r < k; r++, dst += mr) {
                        memcpy(dst, g->a + (size_t)(r0 + r) * g->lda + i0, sizeof(float) * w);
                        for (int q = w; q < mr; q++)
                                dst[q] = 0.0f;
                }
        }
}

/* B's columns [l0, l0 + nr) over @p k rows from @p r0: [k][nr], zero past n. */
static void pack_b(const struct strata_gemm_tree *g, int r0, int k, int l0, int nr, float *dst)
{
        int w = g->n - l0 < nr ? g->n - l0 : nr;

        for (int r = 0; r < k; r++, dst += nr) {
                memcpy(dst, g->b + (size_t)(r0 + r) * g->ldb + l0, sizeof(float) * w);
                for (int q = w; q < nr; q++)
                        dst[q] = 0.0f;
        }
}

/*
 * Asks for the lines of C's tile at row @p i0 (rows before @p end), column @p l0, @p w wide,
 * to be written: C_AHEAD tiles before it, so that its one store of each row (a line per row,
 * the rows kilobytes apart) does not wait for the line to come from memory.
 */
static void fetch_c(const struct strata_gemm_tree *g, int i0, int end, int l0, int mr, int w)
{
        for (int r = i0; r < i0 + mr && r < end; r++) {
                const float *q = g->c + (size_t)r * (size_t)g->ldc + l0;

                __builtin_prefetch(q, 1, 3);
                __builtin_prefetch(q + w - 1, 1, 3);
        }
}

/*
 * The tiles of @p g with @p s in @p buf (@p floats): per block of C's rows (A_BYTES of A),
 * per panel of NR columns, per tile of MR rows. STRATA_ENOTSUP where the chunks' rows do not
 * fit.
 */
static int tiles(const struct strata_gemm_tree *g, const struct isa *s, int depth, float *buf,
                 size_t floats)
{
        int lo[LEAVES_MAX + 1], r0 = g->lo[0], k = g->lo[g->leaves] - r0, kk = k ? k : 1;
        size_t tile = (size_t)s->mr * (size_t)s->nr, fixed = (size_t)depth * tile +
                                                              (size_t)kk * (size_t)s->nr;
        struct prog p = { g->leaves, 1, lo, g->op };
        float *st = buf, *bp = st + (size_t)depth * tile, *ap = bp + (size_t)kk * s->nr;
        size_t mc, rows;

        if (fixed + (size_t)kk * s->mr > floats)
                return STRATA_ENOTSUP;
        mc = (floats - fixed) / (size_t)kk / (size_t)s->mr * (size_t)s->mr;
        rows = A_BYTES / sizeof(float) / (size_t)kk / (size_t)s->mr * (size_t)s->mr;
        if (rows < A_ROWS_MIN)
                rows = (A_ROWS_MIN + (size_t)s->mr - 1) / (size_t)s->mr * (size_t)s->mr;
        if (mc > rows)
                mc = rows;
        if (mc < (size_t)g->m) { /* blocks as even as the tiles allow: none of a few rows */
                size_t nb = ((size_t)g->m + mc - 1) / mc;

                mc = (((size_t)g->m + nb - 1) / nb + (size_t)s->mr - 1) / (size_t)s->mr *
                     (size_t)s->mr;
        } else {
                mc = (size_t)g->m;
        }
        for (int j = 0; j <= g->leaves; j++)
                lo[j] = g->lo[j] - r0;
        for (int j = 0; j < g->leaves; j++)
                p.simple &= lo[j + 1] > lo[j] && lo[j + 1] - lo[j] <= KC;
        for (int m0 = 0; m0 < g->m; m0 += (int)mc) {
                int mcur = g->m - m0 < (int)mc ? g->m - m0 : (int)mc;

                pack_a(g, r0, k, m0, mcur, s->mr, ap);
                for (int l0 = 0; l0 < g->n; l0 += s->nr) {
                        pack_b(g, r0, k, l0, s->nr, bp);
                        int w = g->n - l0 < s->nr ? g->n - l0 : s->nr;

                        for (int i0 = m0; i0 < m0 + mcur; i0 += s->mr) {
                                fetch_c(g, i0 + C_AHEAD * s->mr, m0 + mcur, l0, s->mr, w);
                                s->tile(g->m - i0 < s->mr ? g->m - i0 : s->mr, &p,
                                        ap + (size_t)(i0 - m0) * (size_t)k, bp, st,
                                        g->c + (size_t)i0 * g->ldc + l0, g->ldc, w);
                        }
                }
        }
        return STRATA_OK;
}

/* The tiles a call with @p set makes here: AVX-512, AVX2, or none (the scalar walk). */
static const struct isa *pick(enum strata_kernels set)
{
#if defined(__x86_64__)
        static const struct isa avx2 = { 6, 16, tile_avx2 }, avx512 = { 12, 32, tile_avx512 };

        __builtin_cpu_init();
        if (set == STRATA_KERNELS_SCALAR ||
            !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
                return NULL;
        if (set != STRATA_KERNELS_PORTABLE && __builtin_cpu_supports("avx512f"))
                return &avx512;
        return &avx2;
#else
        (void)set;
        return NULL;
#endif
}

int strata__sgemm_tree(enum strata_kernels set, const struct strata_gemm_tree *g)
{
        const struct isa *s;
        size_t floats = 0;
        float *buf;
        int depth = 0;

        STRATA_TRY(check(g, &depth));
        if (!g->m || !g->n)
                return STRATA_OK;
        s = pick(set);
        buf = s ? strata__sgemm_buffer(&floats) : NULL;
        if (buf)
                return tiles(g, s, depth, buf, floats);
        walk_scalar(g);
        return STRATA_OK;
}

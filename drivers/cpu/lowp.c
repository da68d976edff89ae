/*
 * The CPU driver's mixed-precision GEMM: C = alpha op(A) op(B) + beta C with A and B rounded
 * to bf16 or f16 (round to nearest even) and the products accumulated in f32.
 *
 * bf16 has three paths with one numerics contract (operands rounded to bf16, products summed in
 * f32, alpha, beta and a bf16 C's bias applied to the finished sum as combine() does); which
 * one runs is decided once per process from CPUID (decisions 0038, 0049), amx first, then
 * avx512_bf16, then fma:
 *
 * - bf16:avx512_bf16, where the CPU has AVX512_BF16: libxsmm's batch-reduce kernel
 *   (vdpbf16ps), JIT-compiled once at prepare for one block shape, so a call allocates
 *   nothing and looks nothing up (decision 0013: oneDNN's matmul allocates on every execute).
 *   In libxsmm's column-major terms the row-major C[m x n] is C'[n x m] = op(B)' op(A)'; the
 *   operands are rounded into the scratch as panels of fixed blocks (A' in libxsmm's VNNI
 *   pairs along k, B' plain), zero-padded to whole blocks, so one kernel with constant leading
 *   dimensions serves every shape. Each tile of C' is computed into a scratch tile and
 *   combined into C with alpha and beta. vdpbf16ps reads bf16 subnormals as zero and flushes
 *   subnormal results.
 * - bf16:fma, everywhere else (AVX2+FMA, or the scalar set's fmaf chains): the operands are
 *   rounded to bf16 values held in f32 (a bf16-stored operand is widened exactly) and
 *   multiplied by the f32 GEMM (gemm.c), whose products of two bf16 values are exact in f32
 *   and are summed by fused multiply-adds in k order. The sums go to C (f32 C, beta 0) or to
 *   an f32 scratch of at most LP_ROWS rows (a row's bits do not depend on the call's rows) and
 *   through combine(). Subnormals are kept (IEEE).
 *
 * - bf16:amx, where the CPU has AMX-BF16 and AMX-TILE and the kernel grants this process the
 *   tile data (arch_prctl, asked once at detect; decision 0049): the same panels as
 *   bf16:avx512_bf16, read by TDPBF16PS tiles of our own (libxsmm 1.17 cannot target AMX),
 *   preferred to bf16:avx512_bf16. An A tile is 16 rows of op(A)'s panel (32 k each, stride
 *   KB), a B tile 16 VNNI pairs of k of 16 columns of op(B) (stride BM pairs); a 64 x 32 block
 *   of C is two halves of 2 x 2 C tiles summed over all of kp, stored to the f32 scratch tile
 *   and combined as the other paths do. TDPBF16PS reads bf16 subnormals as zero and flushes
 *   subnormal results. Under STRATA_TESTING the same code can run its tile operations through
 *   a scalar emulator (strata__cpu_lp_force_amx), so any CPU tests its addresses and loops.
 *
 * The three paths do not give the same bits: they group and order the products' sums
 * differently (on random operands a third to a half of C's elements differ between
 * bf16:avx512_bf16, bf16:fma and bf16:amx's emulator), and a sum of negative products that
 * underflow ends at -0 or +0 as each path's padding of k says (16 for bf16:fma, KB here).
 * Which runs is the CPU's, not the kernel set's: bf16:fma always runs the native set's f32
 * GEMM, so within a CPU every kernel set gets the same bf16 bits.
 *
 * gemm_lp_io reads operands already stored in bf16 as they are and can round C to bf16 (with
 * a bias added first): bf16-mixed keeps the activations between Linear and ReLU in bf16.
 *
 * f16: no f16 GEMM instructions are used (AVX512_FP16 is rare), so operands are rounded to
 * f16 values held in f32 and multiplied by the f32 GEMM (gemm.c): f16's numerics (range,
 * rounding, overflow to infinity that loss scaling handles), f32's speed.
 */
#include <pthread.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <libxsmm.h>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

#include "strata/status.h"
#include "arch/amx.h"
#include "arch/half.h"
#include "arch/reduce.h"
#include "arch/simd.h"
#include "base/base.h"
#include "drivers/drivers.h"
#include "drivers/cpu/gemm.h"
#include "drivers/cpu/lowp.h"

/* The panels' blocks (drivers/cpu/lowp.h). */
#define BM STRATA__LP_BM
#define BN STRATA__LP_BN
#define KB STRATA__LP_KB
/*
 * bf16:fma: rows of C per f32 scratch block. A multiple of gemm.c's row blocking (MC, 256),
 * so the f32 GEMM packs op(B) no more often than one call over all rows would.
 */
#define LP_ROWS 256
/*
 * Row blocks of C (BN rows each) per sweep over op(B)'s panels: their op(A) panels (at most
 * JG * BN * kp bf16, 1 MiB at k = 2048) stay in L2 while op(B)'s stream past them, so op(B)
 * comes from memory m / (JG * BN) times rather than m / BN. Each block's sums do not depend
 * on the order the blocks are computed in.
 */
#define JG 4

static libxsmm_bsmmfunction_reducebatch_strd kernel;
enum lp_path { LP_FMA, LP_DPBF16, LP_AMX };
static enum lp_path path; /* which bf16 path runs: set once by detect() */
static int use_f16c;   /* f16 rounding by F16C: set once by detect() */

static size_t round_up(size_t x, size_t b)
{
        return (x + b - 1) / b * b;
}

/*
 * The operands are logical R x K matrices S over p: S(i, kk) = p[i * ld + kk], or, when
 * transposed (t), p[kk * ld + i], stored as f32 or bf16 (pt). Each packer converts runs of
 * the source (contiguous rows or columns) to bf16 and places them; what lies past R or K is
 * zeroed (only that: the panels are not cleared first).
 */

/* Elements [off, off + n) of p, stored as @p pt, into row as bf16: rounded, or copied. */
static void load_bf16(uint16_t *row, const void *p, enum strata_dtype pt, size_t off, size_t n)
{
        if (pt == STRATA_BF16)
                memcpy(row, (const uint16_t *)p + off, n * sizeof(uint16_t));
        else
                strata__to_bf16(row, (const float *)p + off, n);
}

/*
 * A' panels: for each block of BM rows, every pair of k as [BM][2] bf16 (libxsmm's VNNI
 * layout for A: a panel is [kp / 2][BM][2]; element (i, kk) at ((i / BM) * BM * (kp / 2) +
 * (kk / 2) * BM + i % BM) * 2 + (kk & 1)). The pairs are written whole, in the panel's order
 * (a pair a 32-bit store; a block's pairs are contiguous): through @p stage (STAGE halves),
 * BM rows of S by STAGE / BM of k, or two columns of S by STAGE / 2 of their rows.
 */
#define STAGE (BM * BN * 2) /* halves: the f32 tile, free while the operands are packed */
static void pack_vnni(uint16_t *dst, const void *p, enum strata_dtype pt, int t, int ld,
                      size_t r, size_t k, size_t rp, size_t kp, uint16_t *stage)
{
        uint32_t *d32 = (uint32_t *)(void *)dst, v; /* one VNNI pair */
        size_t k2n = (k + 1) / 2; /* pairs written: an odd k's last one has a zero half */

        /*
         * Zero what is not written below: pairs from k2n on (they meet op(A)'s columns past
         * k), and rows past r in the last block (their sums are dropped by combine(): zeroed
         * so that no block computes on stale bits).
         */
        for (size_t i0 = 0; i0 < rp; i0 += BM)
                memset(d32 + i0 * (kp / 2) + k2n * BM, 0, sizeof(v) * (kp / 2 - k2n) * BM);
        for (size_t q = 0; r % BM && q < k2n; q++)
                memset(d32 + (r - r % BM) * (kp / 2) + q * BM + r % BM, 0,
                       sizeof(v) * (BM - r % BM));
        if (!t) { /* rows of S are contiguous: BM of them by kc of k, then their pairs */
                enum { KC = STAGE / BM };

                for (size_t i0 = 0; i0 < r; i0 += BM)
                        for (size_t k0 = 0; k0 < k; k0 += KC) {
                                size_t ni = r - i0 < BM ? r - i0 : BM;
                                size_t nk = k - k0 < KC ? k - k0 : KC;
                                uint32_t *o = d32 + i0 * (kp / 2) + (k0 / 2) * BM;

                                for (size_t i = 0; i < ni; i++) {
                                        load_bf16(stage + i * KC, p, pt,
                                                  (i0 + i) * (size_t)ld + k0, nk);
                                        if (nk & 1) /* k odd: the last pair's second is 0 */
                                                stage[i * KC + nk] = 0;
                                }
                                for (size_t k2 = 0; k2 < (nk + 1) / 2; k2++)
                                        for (size_t i = 0; i < ni; i++) {
                                                memcpy(&v, &stage[i * KC + 2 * k2], 4);
                                                o[k2 * BM + i] = v;
                                        }
                        }
                return;
        }
        for (size_t kk = 0; kk < k; kk += 2) /* columns of S are contiguous: two at a time */
                for (size_t c0 = 0; c0 < r; c0 += STAGE / 2) {
                        size_t nc = r - c0 < STAGE / 2 ? r - c0 : STAGE / 2;
                        uint16_t *hi = stage + STAGE / 2;

                        load_bf16(stage, p, pt, kk * (size_t)ld + c0, nc);
                        if (kk + 1 < k)
                                load_bf16(hi, p, pt, (kk + 1) * (size_t)ld + c0, nc);
                        else
                                memset(hi, 0, sizeof(uint16_t) * nc);
                        for (size_t i0 = c0; i0 < c0 + nc; i0 += BM) { /* c0: whole blocks */
                                size_t e = c0 + nc - i0 < BM ? c0 + nc : i0 + BM;
                                uint32_t *o = d32 + i0 * (kp / 2) + (kk / 2) * BM;

                                for (size_t i = i0; i < e; i++)
                                        o[i - i0] = (uint32_t)stage[i - c0] |
                                                    (uint32_t)hi[i - c0] << 16;
                        }
                }
}

/*
 * B' panels: for each block of BN rows of S, every k-block as BN runs of KB bf16 (element
 * (j, kk) at (j / BN) * BN * kp + (kk / KB) * KB * BN + (j % BN) * KB + kk % KB). @p row:
 * max(R, K) halves; @p stage: STAGE halves (KB x BN).
 */
static void pack_plain(uint16_t *dst, const void *p, enum strata_dtype pt, int t, int ld,
                       size_t r, size_t k, size_t rp, size_t kp, uint16_t *row, uint16_t *stage)
{
        /* zero what is not written below: past k (in the last k-block), rows past r */
        for (size_t j = 0; k % KB && j < rp; j++)
                memset(dst + (j - j % BN) * kp + (k - k % KB) * BN + (j % BN) * KB + k % KB, 0,
                       sizeof(uint16_t) * (KB - k % KB));
        for (size_t kb = 0; r % BN && kb < kp; kb += KB)
                memset(dst + (r - r % BN) * kp + kb * BN + (r % BN) * KB, 0,
                       sizeof(uint16_t) * (BN - r % BN) * KB);
        if (!t) {
                for (size_t j = 0; j < r; j++) {
                        uint16_t *o = dst + (j / BN) * BN * kp + j % BN * KB;

                        load_bf16(row, p, pt, j * (size_t)ld, k);
                        for (size_t k0 = 0; k0 < k; k0 += KB)
                                memcpy(o + k0 * BN, row + k0,
                                       sizeof(uint16_t) * (k - k0 < KB ? k - k0 : KB));
                }
                return;
        }
        for (size_t k0 = 0; k0 < k; k0 += KB) /* columns: a KB x BN piece, transposed */
                for (size_t j0 = 0; j0 < r; j0 += BN) {
                        size_t nj = r - j0 < BN ? r - j0 : BN, nk = k - k0 < KB ? k - k0 : KB;
                        uint16_t *o = dst + j0 * kp + k0 * BN; /* the block's [BN][KB] */

                        for (size_t kk = 0; kk < nk; kk++)
                                load_bf16(stage + kk * BN, p, pt, (k0 + kk) * (size_t)ld + j0,
                                          nj);
                        for (size_t j = 0; j < nj; j++)
                                for (size_t kk = 0; kk < nk; kk++)
                                        o[j * KB + kk] = stage[kk * BN + j];
                }
}

/*
 * c[j][i0 + i] = alpha * tile + beta * c for the valid part of one tile (row j of the tile at
 * tile + j * ldt); a bf16 C gets alpha * tile + bias, rounded (the tile serves as the f32 row).
 * Both bf16 paths finish their sums here, so they apply alpha, beta and the bias alike.
 */
static void combine(const struct strata_gemm_io *g, float *tile, size_t ldt, size_t i0,
                    size_t j0, size_t ni, size_t nj)
{
        float alpha = g->alpha, beta = g->beta;

        for (size_t j = 0; j < nj; j++) {
                size_t at = (j0 + j) * (size_t)g->ldc + i0;
                float *tr = tile + j * ldt, *row;

                if (g->ct == STRATA_BF16) {
                        for (size_t i = 0; i < ni; i++)
                                tr[i] = g->bias ? alpha * tr[i] + g->bias[i0 + i] : alpha * tr[i];
                        strata__to_bf16((uint16_t *)g->c + at, tr, ni);
                        continue;
                }
                row = (float *)g->c + at;
                if (beta == 0.0f)
                        for (size_t i = 0; i < ni; i++)
                                row[i] = alpha * tr[i];
                else
                        for (size_t i = 0; i < ni; i++)
                                row[i] = alpha * tr[i] + beta * row[i];
        }
}

#ifdef STRATA_TESTING
static int emulate; /* strata__cpu_lp_force_amx(STRATA__AMX_EMULATED) */
#else
static const int emulate = 0;
#endif

/*
 * bf16:avx512_bf16 and bf16:amx: both operands packed as bf16 panels, then per block of C
 * libxsmm's vdpbf16ps kernel or the AMX tiles.
 */
static void gemm_packed(const struct strata_gemm_io *g, void *scratch)
{
        int m = g->m, n = g->n, k = g->k;
        size_t mp = round_up((size_t)n, BM), np = round_up((size_t)m, BN);
        size_t kp = round_up((size_t)k, KB);
        uint16_t *ap = scratch, *bp = ap + mp * kp;
        float *tile = (float *)(void *)(bp + np * kp);
        uint16_t *row = (uint16_t *)(void *)(tile + BM * BN);
        unsigned long long count = kp / KB;
        int amx = path == LP_AMX && k > 0 && !emulate;

        /* A' = op(B)' (n x k), B' = op(A)' (k x m): both read as R x K matrices. */
        pack_vnni(ap, g->b, g->bt, !g->tb, g->ldb, (size_t)n, (size_t)k, mp, kp,
                  (uint16_t *)(void *)tile);
        pack_plain(bp, g->a, g->at, g->ta, g->lda, (size_t)m, (size_t)k, np, kp, row,
                   (uint16_t *)(void *)tile);
#if defined(__x86_64__)
        if (amx)
                strata__cpu_amx_begin();
#endif
        for (size_t jg = 0; jg < np; jg += JG * BN)
                for (size_t i0 = 0; i0 < mp; i0 += BM)
                        for (size_t j0 = jg; j0 < np && j0 < jg + JG * BN; j0 += BN) {
                                size_t ni = (size_t)n - i0 < BM ? (size_t)n - i0 : BM;
                                size_t nj = (size_t)m - j0 < BN ? (size_t)m - j0 : BN;

                                if (k == 0)
                                        memset(tile, 0, sizeof(float) * BM * BN);
#if defined(__x86_64__)
                                else if (amx)
                                        strata__cpu_amx_block(bp + j0 * kp, ap + i0 * kp,
                                                              tile, kp);
#endif
#ifdef STRATA_TESTING
                                else if (path == LP_AMX)
                                        strata__cpu_amx_block_emulated(bp + j0 * kp,
                                                                       ap + i0 * kp, tile,
                                                                       kp);
#endif
                                else
                                        kernel((const libxsmm_bfloat16 *)(ap + i0 * kp),
                                               (const libxsmm_bfloat16 *)(bp + j0 * kp), tile,
                                               &count);
                                combine(g, tile, BM, i0, j0, ni, nj);
                        }
#if defined(__x86_64__)
        if (amx)
                strata__cpu_amx_end();
#endif
}

/*
 * dst[i] = src[i] rounded to bf16 and held in f32: strata__to_bf16's values (nearest even, NaN
 * kept quiet, overflow to infinity) with the low 16 bits cleared. Integer operations only.
 */
STRATA_SIMD static void round_bf16(float *restrict dst, const float *restrict src, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                uint32_t u;

                memcpy(&u, &src[i], 4);
                u = (u & 0x7fffffffu) > 0x7f800000u ? u | 0x400000u
                                                    : u + 0x7fffu + ((u >> 16) & 1u);
                u &= 0xffff0000u;
                memcpy(&dst[i], &u, 4);
        }
}

/*
 * @p rows runs of @p cols elements of p (stride ld, stored as pt) into dst, packed, as bf16
 * values held in f32: a bf16 operand widened exactly, an f32 one rounded.
 */
static void widen_bf16(float *dst, const void *p, enum strata_dtype pt, int ld, size_t rows,
                       size_t cols)
{
        for (size_t i = 0; i < rows; i++)
                if (pt == STRATA_BF16)
                        strata__from_bf16(dst + i * cols, (const uint16_t *)p + i * (size_t)ld,
                                          cols);
                else
                        round_bf16(dst + i * cols, (const float *)p + i * (size_t)ld, cols);
}

/* x[i] = alpha x[i]: combine()'s f32 row for beta 0, with the sum already in place. */
STRATA_SIMD static void scale_row(float *x, float alpha, size_t n)
{
        for (size_t i = 0; i < n; i++)
                x[i] = alpha * x[i];
}

/*
 * bf16:fma: op(A) and op(B) as bf16 values in f32 (each as stored, the f32 GEMM applies the
 * transposes), their products summed by the f32 GEMM with alpha 1 and beta 0, so that
 * combine() applies alpha, beta and the bias to the finished sums as gemm_packed does. An f32
 * C with beta 0 takes the sums directly (alpha then scales them in place: combine's values).
 */
static void gemm_bf16_fma(const struct strata_gemm_io *g, void *scratch)
{
        size_t m = (size_t)g->m, n = (size_t)g->n, k = (size_t)g->k;
        size_t ar = g->ta ? k : m, ac = g->ta ? m : k, br = g->tb ? n : k, bc = g->tb ? k : n;
        float *a = scratch, *b = a + ar * ac, *sums = b + br * bc;
        int lda = ac > 0 ? (int)ac : 1, ldb = bc > 0 ? (int)bc : 1;

        widen_bf16(a, g->a, g->at, g->lda, ar, ac);
        widen_bf16(b, g->b, g->bt, g->ldb, br, bc);
        if (g->ct == STRATA_F32 && g->beta == 0.0f) {
                strata__sgemm(STRATA_KERNELS_NATIVE,
                              &(struct strata__sgemm){ g->ta, g->tb, g->m, g->n, g->k, 1.0f,
                                                       0.0f, a, lda, b, ldb, g->c, g->ldc });
                if (g->alpha != 1.0f)
                        for (size_t i = 0; i < m; i++)
                                scale_row((float *)g->c + i * (size_t)g->ldc, g->alpha, n);
                return;
        }
        for (size_t i0 = 0; i0 < m; i0 += LP_ROWS) {
                size_t rows = m - i0 < LP_ROWS ? m - i0 : LP_ROWS;

                strata__sgemm(STRATA_KERNELS_NATIVE,
                              &(struct strata__sgemm){ g->ta, g->tb, (int)rows, g->n, g->k,
                                                       1.0f, 0.0f, g->ta ? a + i0 : a + i0 * ac,
                                                       lda, b, ldb, sums, g->n });
                combine(g, sums, n, 0, i0, n, rows);
        }
}

/* dst[i] = src[i] rounded to the nearest f16 value (F16C when the CPU has it). */
#if defined(__x86_64__)
__attribute__((target("avx,f16c"))) static void round_f16_hw(float *dst, const float *src,
                                                             size_t n)
{
        size_t i = 0;

        for (; i + 8 <= n; i += 8)
                _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm256_cvtps_ph(
                                                  _mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT)));
        for (; i < n; i++)
                dst[i] = strata__f16_to_f32(strata__f32_to_f16(src[i]));
}
#endif

static void round_f16(float *dst, const float *src, size_t n)
{
#if defined(__x86_64__)
        if (use_f16c) {
                round_f16_hw(dst, src, n);
                return;
        }
#endif
        for (size_t i = 0; i < n; i++)
                dst[i] = strata__f16_to_f32(strata__f32_to_f16(src[i]));
}

/* f16: op(A) and op(B) rounded to f16 values, row-major in the scratch, then the f32 GEMM. */
static void gemm_f16(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc, void *scratch)
{
        size_t ar_rows = ta ? (size_t)k : (size_t)m, ar_cols = ta ? (size_t)m : (size_t)k;
        size_t br_rows = tb ? (size_t)n : (size_t)k, br_cols = tb ? (size_t)k : (size_t)n;
        float *ar = scratch, *br = ar + ar_rows * ar_cols;

        /* The operands as stored, rounded; the GEMM then applies the transposes. */
        for (size_t i = 0; i < ar_rows; i++)
                round_f16(ar + i * ar_cols, a + i * (size_t)lda, ar_cols);
        for (size_t i = 0; i < br_rows; i++)
                round_f16(br + i * br_cols, b + i * (size_t)ldb, br_cols);
        strata__sgemm(STRATA_KERNELS_NATIVE,
                      &(struct strata__sgemm){ ta, tb, m, n, k, alpha, beta, ar,
                                               ar_cols > 0 ? (int)ar_cols : 1, br,
                                               br_cols > 0 ? (int)br_cols : 1, c, ldc });
}

/* bf16 storage comes with bf16 products only (the runtime never asks for f16 storage). */
void strata__cpu_gemm_lp_io(const struct strata_gemm_io *g, void *scratch)
{
        if (g->m <= 0 || g->n <= 0)
                return;
        if (g->dt == STRATA_BF16 && path != LP_FMA)
                gemm_packed(g, scratch);
        else if (g->dt == STRATA_BF16)
                gemm_bf16_fma(g, scratch);
        else
                gemm_f16(g->ta, g->tb, g->m, g->n, g->k, g->alpha, g->a, g->lda, g->b, g->ldb,
                         g->beta, g->c, g->ldc, scratch);
}

void strata__cpu_gemm_lp(enum strata_dtype dt, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc, void *scratch)
{
        strata__cpu_gemm_lp_io(&(struct strata_gemm_io){ .dt = dt, .ta = ta, .tb = tb, .m = m,
                                                         .n = n, .k = k, .alpha = alpha,
                                                         .beta = beta, .a = a, .lda = lda,
                                                         .b = b, .ldb = ldb, .c = c,
                                                         .ldc = ldc },
                               scratch);
}

/* ---- which path runs: CPUID once per process (it traps to the hypervisor in a VM) ---- */

/* CPUID.(7, 1):EAX bit 5. */
static int have_avx512_bf16(void)
{
#if defined(__x86_64__)
        unsigned a, b, c, d;

        return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5));
#else
        return 0;
#endif
}

/* CPUID.1:ECX bit 29 (clang 14's __builtin_cpu_supports does not know "f16c"). */
static int have_f16c(void)
{
#if defined(__x86_64__)
        unsigned a, b, c, d;

        return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
#else
        return 0;
#endif
}

/*
 * CPUID.(7, 0):EDX bits 22 (AMX-BF16) and 24 (AMX-TILE), and the kernel's grant of the tile
 * data to this process (Linux 5.16+: arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA),
 * process-wide, asked once): without the grant the first tile instruction faults.
 */
static int have_amx(void)
{
#if defined(__x86_64__)
        unsigned a, b, c, d;

        return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) && (d & (1u << 24));
#else
        return 0;
#endif
}

/*
 * bf16:amx is opt-in (STRATA_AMX=1 in the environment) until it has been measured on an AMX
 * CPU (decision 0049): its tile code is checked by emulation only. Until then the tile data
 * is not even asked for, since the grant enlarges every signal frame of the host process.
 */
static int amx_opted_in(void)
{
        const char *v = getenv("STRATA_AMX");

        return v && !strcmp(v, "1");
}

/* What the CPU has (cpu_amx_hw), what may run (cpu_amx: asked for and granted): detect(). */
static int cpu_amx_hw, cpu_amx, cpu_dpbf16;

#ifdef STRATA_TESTING
static int forced_fma; /* strata__cpu_lp_force_fma() */
static int forced_amx; /* strata__cpu_lp_force_amx() */
#else
static const int forced_fma = 0, forced_amx = 0;
#endif

/* amx, else avx512_bf16, else fma; as the tests force it. */
static void choose_path(void)
{
        if (forced_fma)
                path = LP_FMA;
        else if (forced_amx == 2 || (forced_amx != 1 && cpu_amx))
                path = LP_AMX;
        else
                path = cpu_dpbf16 ? LP_DPBF16 : LP_FMA;
}

static void detect_features(void)
{
        use_f16c = have_f16c();
        cpu_dpbf16 = have_avx512_bf16();
        cpu_amx_hw = have_amx();
        cpu_amx = cpu_amx_hw && amx_opted_in() && strata__amx_request();
        choose_path();
}

static void detect(void)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;

        pthread_once(&once, detect_features);
}

#ifdef STRATA_TESTING
void strata__cpu_lp_force_fma(int on)
{
        detect();
        forced_fma = on;
        choose_path();
}

void strata__cpu_lp_force_amx(enum strata__lp_amx how)
{
        detect();
        forced_amx = (int)how;
        emulate = how == STRATA__AMX_EMULATED;
        if (how == STRATA__AMX_ON && cpu_amx_hw && !cpu_amx)
                cpu_amx = strata__amx_request();
        if (how == STRATA__AMX_CPU)
                cpu_amx = cpu_amx_hw && amx_opted_in() && cpu_amx;
        choose_path();
}
#endif

size_t strata__cpu_gemm_lp_bytes(enum strata_dtype dt, size_t elems, size_t dim)
{
        detect();
        if (dt == STRATA_F16)
                return elems * sizeof(float);
        /* bf16:fma: both operands in f32, then the f32 sums of at most LP_ROWS rows of C. */
        if (path == LP_FMA)
                return sizeof(float) * (elems + (dim < LP_ROWS ? dim : LP_ROWS) * dim);
        /*
         * Padded operands: (n + BM)(k + KB) + (m + BN)(k + KB) with m, n, k <= dim and
         * (m + n) k <= elems, then the tile (bf16:avx512_bf16 and bf16:amx alike).
         */
        return sizeof(uint16_t) * (elems + (2 * KB + BM + BN) * dim + (BM + BN) * KB) +
               sizeof(float) * BM * BN + sizeof(uint16_t) * (dim + KB) + 64;
}

/*
 * libxsmm's one kernel, compiled once per process (runtimes may set up on several threads),
 * after the f32 sets: those move libxsmm's global target and put it back. Compiled where the
 * CPU has AVX512_BF16 even when a test forces bf16:fma.
 */
static void compile_kernel(void)
{
        libxsmm_blasint lda = BM, ldb = KB, ldc = BM;
        float alpha = 1.0f, beta = 0.0f;
        int flags = LIBXSMM_GEMM_FLAG_VNNI_A, prefetch = LIBXSMM_PREFETCH_NONE;

        (void)strata__sgemm_name(STRATA_KERNELS_NATIVE);
        if (!have_avx512_bf16())
                return;
        libxsmm_init();
        kernel = libxsmm_bsmmdispatch_reducebatch_strd(BM, BN, KB, (libxsmm_blasint)(KB * BM * 2),
                                                       (libxsmm_blasint)(KB * BN * 2), &lda,
                                                       &ldb, &ldc, &alpha, &beta, &flags,
                                                       &prefetch);
}

/* bf16:fma needs nothing compiled here: the f32 sets are the driver's prepare's. */
int strata__cpu_prepare_lp(enum strata_dtype dt)
{
        static pthread_once_t once = PTHREAD_ONCE_INIT;

        detect();
        if (dt == STRATA_F16)
                return STRATA_OK;
        if (dt != STRATA_BF16)
                return strata__fail(STRATA_EINVAL, "cpu: no mixed-precision GEMM for dtype %d",
                                    (int)dt);
        if (path != LP_DPBF16) /* bf16:amx's tiles are ours: nothing to compile */
                return STRATA_OK;
        pthread_once(&once, compile_kernel);
        if (!kernel)
                return strata__fail(STRATA_ENOTSUP, "cpu: libxsmm generated no bf16 kernel for "
                                    "this CPU (%s)", libxsmm_get_target_arch());
        return STRATA_OK;
}

const char *strata__cpu_lp_name(void)
{
        detect();
        return path == LP_AMX ? "bf16:amx" : path == LP_DPBF16 ? "bf16:avx512_bf16" : "bf16:fma";
}

/*
 * Reduction kernels. Work goes in blocks that stay in L1: the sources of a block are combined
 * into an accumulator (vectorised loops, one clone per ISA chosen at load by CPUID), then the
 * accumulator is stored to every destination, with streaming stores for large messages so
 * that writes do not first read the destination lines.
 */
#include <string.h>

#include "arch/half.h"
#include "arch/reduce.h"
#include "arch/simd.h"

#define BLOCK 2048 /* elements per block: 8 KiB of f32 */

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* ---- accumulate one source block into acc ---- */

#define COMBINE(T, NAME)                                                                        \
        STRATA_SIMD static void NAME(T *restrict acc, const T *restrict s, size_t n, int op)   \
        {                                                                                      \
                if (op == STRATA__MAX) {                                                       \
                        for (size_t i = 0; i < n; i++)                                         \
                                acc[i] = s[i] > acc[i] ? s[i] : acc[i];                        \
                } else if (op == STRATA__MIN) {                                                \
                        for (size_t i = 0; i < n; i++)                                         \
                                acc[i] = s[i] < acc[i] ? s[i] : acc[i];                        \
                } else {                                                                       \
                        for (size_t i = 0; i < n; i++)                                         \
                                acc[i] += s[i];                                                \
                }                                                                              \
        }

COMBINE(float, combine_f32)
COMBINE(double, combine_f64)
COMBINE(int32_t, combine_i32)
COMBINE(int64_t, combine_i64)

STRATA_SIMD void strata__from_bf16(float *restrict dst, const uint16_t *restrict src, size_t n)
{
        for (size_t i = 0; i < n; i++)
                dst[i] = strata__bf16_to_f32(src[i]);
}

/* Branch-free so that it vectorises; the same values as strata__f32_to_bf16. */
STRATA_SIMD void strata__to_bf16(uint16_t *restrict dst, const float *restrict src, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                uint32_t u;

                memcpy(&u, &src[i], 4);
                dst[i] = (u & 0x7fffffffu) > 0x7f800000u
                                 ? (uint16_t)((u >> 16) | 0x40u)
                                 : (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        }
}

/*
 * An element is NaN or infinite when its exponent bits are all ones: adding one to the
 * exponent field then carries into bit 31. Integer operations only, so the loop vectorises
 * without reassociating floating-point sums; one pass, no early exit (a branch per block
 * would cost more than the few bytes it saves on the rare bad case).
 */
STRATA_SIMD int strata__nonfinite(const float *restrict x, size_t n)
{
        uint32_t acc = 0;

        for (size_t i = 0; i < n; i++) {
                uint32_t u;

                memcpy(&u, &x[i], 4);
                acc |= (u & 0x7f800000u) + 0x00800000u;
        }
        return (acc & 0x80000000u) != 0;
}

static void widen_f16(float *restrict acc, const uint16_t *restrict s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                acc[i] = strata__f16_to_f32(s[i]);
}

/* ---- stores ---- */

static int use_avx512 = -1;

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static void stream512(void *dst, const void *src, size_t n)
{
        char *d = dst;
        const char *s = src;
        size_t i = 0;

        for (; i + 64 <= n; i += 64)
                _mm512_stream_si512((__m512i *)(d + i), _mm512_loadu_si512(s + i));
        memcpy(d + i, s + i, n - i);
}

__attribute__((target("avx"))) static void stream256(void *dst, const void *src, size_t n)
{
        char *d = dst;
        const char *s = src;
        size_t i = 0;

        for (; i + 32 <= n; i += 32)
                _mm256_stream_si256((__m256i *)(d + i), _mm256_loadu_si256((const void *)(s + i)));
        memcpy(d + i, s + i, n - i);
}
#endif

const char *strata__reduce_isa(void)
{
        if (use_avx512 < 0) {
                __builtin_cpu_init();
                use_avx512 = __builtin_cpu_supports("avx512f") ? 1 : 0;
        }
        return use_avx512 ? "avx512" : "avx";
}

/* Store n bytes; streaming only when the destination is 64-byte aligned. */
static void store(void *dst, const void *src, size_t n, int nt)
{
#if defined(__x86_64__)
        if (nt && ((uintptr_t)dst & 63) == 0) {
                if (use_avx512 < 0)
                        (void)strata__reduce_isa();
                if (use_avx512)
                        stream512(dst, src, n);
                else
                        stream256(dst, src, n);
                return;
        }
#else
        (void)nt;
#endif
        memcpy(dst, src, n);
}

void strata__store_fence(void)
{
#if defined(__x86_64__)
        _mm_sfence();
#endif
}

void strata__copy_many(void *const *dst, int ndst, const void *src, size_t lo, size_t hi, int nt)
{
        for (int d = 0; d < ndst; d++)
                if ((const char *)dst[d] + lo != (const char *)src + lo)
                        store((char *)dst[d] + lo, (const char *)src + lo, hi - lo, nt);
}

/* Streaming keeps alignment only if the block offset is aligned: blocks are 64-byte multiples. */
#define REDUCE_NATIVE(T, COMB, SCALE_T)                                                        \
        do {                                                                                   \
                _Alignas(64) T acc[BLOCK];                                                     \
                for (size_t b = lo; b < hi; b += BLOCK) {                                      \
                        size_t n = hi - b < BLOCK ? hi - b : BLOCK;                            \
                        memcpy(acc, (const T *)src[0] + b, n * sizeof(T));                     \
                        for (int r = 1; r < nsrc; r++)                                         \
                                COMB(acc, (const T *)src[r] + b, n, op == STRATA__MEAN ? 0 : op); \
                        if (op == STRATA__MEAN)                                                \
                                for (size_t i = 0; i < n; i++)                                 \
                                        acc[i] = (T)(acc[i] / (SCALE_T)nsrc);                  \
                        for (int d = 0; d < ndst; d++)                                         \
                                store((T *)dst[d] + b, acc, n * sizeof(T), nt);                \
                }                                                                              \
        } while (0)

static void reduce_half(int bf, int op, void *const *dst, int ndst, const void *const *src,
                        int nsrc, size_t lo, size_t hi, int nt)
{
        _Alignas(64) float acc[BLOCK], tmp[BLOCK];
        _Alignas(64) uint16_t out[BLOCK];

        for (size_t b = lo; b < hi; b += BLOCK) {
                size_t n = hi - b < BLOCK ? hi - b : BLOCK;

                for (int r = 0; r < nsrc; r++) {
                        const uint16_t *s = (const uint16_t *)src[r] + b;

                        if (bf)
                                strata__from_bf16(r ? tmp : acc, s, n);
                        else
                                widen_f16(r ? tmp : acc, s, n);
                        if (r)
                                combine_f32(acc, tmp, n, op == STRATA__MEAN ? 0 : op);
                }
                if (op == STRATA__MEAN)
                        for (size_t i = 0; i < n; i++)
                                acc[i] /= (float)nsrc;
                if (bf)
                        strata__to_bf16(out, acc, n);
                else
                        for (size_t i = 0; i < n; i++)
                                out[i] = strata__f32_to_f16(acc[i]);
                for (int d = 0; d < ndst; d++)
                        store((uint16_t *)dst[d] + b, out, n * 2, nt);
        }
}

/* The common latency case in one pass: two f32 sources summed into one or two places. */
STRATA_SIMD static void sum2_f32(float *d0, float *d1, const float *a, const float *b, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                float v = a[i] + b[i];

                d0[i] = v;
                d1[i] = v;
        }
}

/* The same into one place (a reduce-scatter's piece): one store an element, not two. */
STRATA_SIMD static void sum2_to1_f32(float *d, const float *a, const float *b, size_t n)
{
        for (size_t i = 0; i < n; i++)
                d[i] = a[i] + b[i];
}

/*
 * sum2_to1_f32, and whether a sum stored is NaN or infinite: the split step's check of its
 * part in the sum's pass (decision 0104). A value is not finite when its bits without the sign
 * are those of infinity or above, so the largest of them tells (an unsigned maximum: one
 * integer operation more than the sum, where strata__nonfinite()'s carry takes two).
 */
STRATA_SIMD static int sum2_to1_check_f32(float *d, const float *a, const float *b, size_t n)
{
        uint32_t most = 0;

        for (size_t i = 0; i < n; i++) {
                float v = a[i] + b[i];
                uint32_t u;

                d[i] = v;
                memcpy(&u, &v, 4);
                u &= 0x7fffffffu;
                most = u > most ? u : most;
        }
        return most >= 0x7f800000u;
}

/*
 * The pairwise tree over the sources, a block at a time: a stack of partial sums, each the
 * tree of 2^k consecutive leaves; a new leaf is pushed, then equal-sized neighbours are added
 * (left + right) while they exist, and what remains is added from the right at the end. For
 * 2^k leaves that is the balanced tree; otherwise its largest power of two first. With
 * @p pairs, the leaves are those of recursive halving over nsrc = 2^k + r sources: the first
 * r pairs (s0 + s1), (s2 + s3), ... then the remaining sources, 2^k leaves in all (the
 * order of drivers/net/net.c's schedule across processes). With @p mean, the sum is divided by
 * nsrc as REDUCE_NATIVE's mean is.
 */
#define TREE_BLOCK 256
#define TREE_DEPTH 14 /* log2 of the most sources, plus one */
#define REDUCE_TREE(T, COMB)                                                                   \
        do {                                                                                   \
                _Alignas(64) T st[TREE_DEPTH][TREE_BLOCK];                                     \
                int size[TREE_DEPTH], r = 0, q = nsrc;                                         \
                while (pairs && (q & (q - 1)))                                                 \
                        q &= q - 1;                                                            \
                r = nsrc - q;                                                                  \
                for (size_t b = lo; b < hi; b += TREE_BLOCK) {                                 \
                        size_t n = hi - b < TREE_BLOCK ? hi - b : TREE_BLOCK;                  \
                        int top = 0;                                                           \
                        for (int l = 0; l < nsrc - r; l++) {                                   \
                                int s = l < r ? 2 * l : l + r;                                 \
                                memcpy(st[top], (const T *)src[s] + b, n * sizeof(T));         \
                                if (l < r)                                                     \
                                        COMB(st[top], (const T *)src[s + 1] + b, n, 0);        \
                                size[top++] = 1;                                               \
                                while (top > 1 && size[top - 1] == size[top - 2]) {            \
                                        COMB(st[top - 2], st[top - 1], n, 0);                  \
                                        size[top - 2] *= 2;                                    \
                                        top--;                                                 \
                                }                                                              \
                        }                                                                      \
                        for (; top > 1; top--)                                                 \
                                COMB(st[top - 2], st[top - 1], n, 0);                          \
                        for (size_t i = 0; mean && i < n; i++)                                 \
                                st[0][i] = (T)(st[0][i] / (T)nsrc);                            \
                        for (int d = 0; d < ndst; d++)                                         \
                                store((T *)dst[d] + b, st[0], n * sizeof(T), nt);              \
                }                                                                              \
        } while (0)

static void reduce_tree(enum strata_dtype dt, int pairs, int mean, void *const *dst, int ndst,
                        const void *const *src, int nsrc, size_t lo, size_t hi, int nt)
{
        if (dt == STRATA_F64)
                REDUCE_TREE(double, combine_f64);
        else
                REDUCE_TREE(float, combine_f32);
}

void strata__reduce_many(enum strata_dtype dt, int op, void *const *dst, int ndst,
                         const void *const *src, int nsrc, size_t lo, size_t hi, int nt)
{
        if (hi <= lo)
                return;
        if ((op == STRATA__SUM_TREE || op == STRATA__SUM_HALVING || op == STRATA__MEAN_HALVING) &&
            nsrc > 2 && (dt == STRATA_F32 || dt == STRATA_F64)) {
                reduce_tree(dt, op != STRATA__SUM_TREE, op == STRATA__MEAN_HALVING, dst, ndst,
                            src, nsrc, lo, hi, nt);
                return;
        }
        /* Two sources, or integers: the sum in order is the tree. */
        if (op == STRATA__SUM_TREE || op == STRATA__SUM_HALVING)
                op = STRATA__SUM;
        else if (op == STRATA__MEAN_HALVING)
                op = STRATA__MEAN;
        if (dt == STRATA_F32 && op == STRATA__SUM && nsrc == 2 && ndst <= 2 && !nt) {
                /* Each element is read from both sources before it is written: aliasing holds. */
                if (ndst == 1)
                        sum2_to1_f32((float *)dst[0] + lo, (const float *)src[0] + lo,
                                     (const float *)src[1] + lo, hi - lo);
                else
                        sum2_f32((float *)dst[0] + lo, (float *)dst[ndst - 1] + lo,
                         (const float *)src[0] + lo, (const float *)src[1] + lo, hi - lo);
                return;
        }
        switch (dt) {
        case STRATA_F32:
                REDUCE_NATIVE(float, combine_f32, float);
                break;
        case STRATA_F64:
                REDUCE_NATIVE(double, combine_f64, double);
                break;
        case STRATA_I32:
                REDUCE_NATIVE(int32_t, combine_i32, int32_t);
                break;
        case STRATA_I64:
                REDUCE_NATIVE(int64_t, combine_i64, int64_t);
                break;
        case STRATA_BF16:
                reduce_half(1, op, dst, ndst, src, nsrc, lo, hi, nt);
                break;
        case STRATA_F16:
                reduce_half(0, op, dst, ndst, src, nsrc, lo, hi, nt);
                break;
        default:
                break;
        }
}

int strata__reduce_many_check(enum strata_dtype dt, int op, void *dst, const void *const *src,
                              int nsrc, size_t lo, size_t hi, int nt)
{
        void *d[1] = { dst };

        if (dt != STRATA_F32)
                return -1;
        if (hi <= lo)
                return 0;
        if ((op == STRATA__SUM || op == STRATA__SUM_TREE || op == STRATA__SUM_HALVING) &&
            nsrc == 2 && !nt) /* strata__reduce_many()'s sum2_to1_f32, the same bits */
                return sum2_to1_check_f32((float *)dst + lo, (const float *)src[0] + lo,
                                          (const float *)src[1] + lo, hi - lo);
        strata__reduce_many(dt, op, d, 1, src, nsrc, lo, hi, nt);
        return strata__nonfinite((const float *)dst + lo, hi - lo);
}

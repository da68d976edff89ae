/*
 * MaxPool 2 x 2's forward picks in AVX2 (nn/pool2x2.c): each output the first maximum of its
 * window in scan order, a NaN winning (PyTorch's `val > max || isnan(val)`), and its index,
 * eight outputs at a time with no intermediate buffer. The C form picks each input row's
 * pairs into a stack buffer (values and indices), then the output row between two of them:
 * four stores an output before its own two, on a CPU that stores 128 bits a cycle. Selection
 * by comparison masks only, no arithmetic on the values: the same bits as the C form.
 */
#ifndef STRATA_ARCH_PICK_H
#define STRATA_ARCH_PICK_H

#if defined(__x86_64__)
#include <stdint.h>
#include <immintrin.h>

/* b where b > a or b is a NaN, else a: all-ones lanes where b is taken. */
__attribute__((target("avx2"))) static inline __m256 strata__pick_mask(__m256 a, __m256 b)
{
        return _mm256_or_ps(_mm256_cmp_ps(b, a, _CMP_GT_OQ), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
}

/*
 * Outputs e0 .. e0 + 7 of one output row: the windows' top inputs at @p x + 2 e, their
 * bottom ones @p w floats further; values into @p y + e0, argmaxes into @p arg + e0 (an
 * index @p i0 at x[0], + 1 along a row, + w down). Reads x[2 e0 .. 2 e0 + 15] of both rows
 * and writes eight of each output: the caller makes sure both lie inside its buffers. Call
 * only where the CPU has AVX2.
 */
__attribute__((target("avx2"))) static inline void
strata__pick2x2_8(const float *x, int w, int32_t i0, int e0, float *y, int32_t *arg)
{
        /* the deinterleaved lanes hold the outputs 0, 1, 4, 5, 2, 3, 6, 7: so do the indices */
        const __m256i at = _mm256_setr_epi32(0, 2, 8, 10, 4, 6, 12, 14);
        const float *t = x + 2 * e0, *b = t + w;
        __m256 t0 = _mm256_loadu_ps(t), t1 = _mm256_loadu_ps(t + 8);
        __m256 b0 = _mm256_loadu_ps(b), b1 = _mm256_loadu_ps(b + 8);
        __m256 te = _mm256_shuffle_ps(t0, t1, 0x88), to = _mm256_shuffle_ps(t0, t1, 0xdd);
        __m256 be = _mm256_shuffle_ps(b0, b1, 0x88), bo = _mm256_shuffle_ps(b0, b1, 0xdd);
        __m256 mt = strata__pick_mask(te, to), mb = strata__pick_mask(be, bo);
        __m256 ht = _mm256_blendv_ps(te, to, mt), hb = _mm256_blendv_ps(be, bo, mb);
        __m256i base = _mm256_add_epi32(_mm256_set1_epi32(i0 + 2 * e0), at);
        /* an all-ones lane is -1: subtracting it adds the odd input's 1 */
        __m256i it = _mm256_sub_epi32(base, _mm256_castps_si256(mt));
        __m256i ib = _mm256_sub_epi32(_mm256_add_epi32(base, _mm256_set1_epi32(w)),
                                      _mm256_castps_si256(mb));
        __m256 m = strata__pick_mask(ht, hb);
        __m256 v = _mm256_blendv_ps(ht, hb, m);
        __m256 a = _mm256_blendv_ps(_mm256_castsi256_ps(it), _mm256_castsi256_ps(ib), m);

        /* 64-bit pairs (0, 1), (4, 5), (2, 3), (6, 7) back into order */
        _mm256_storeu_ps(y + e0, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(v),
                                                                         0xd8)));
        _mm256_storeu_ps((float *)(void *)(arg + e0),
                         _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(a), 0xd8)));
}
#endif

#endif /* STRATA_ARCH_PICK_H */

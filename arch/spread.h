/*
 * A 2 x 2 window's gradient spread over its four inputs (MaxPool 2 x 2's backward, nn/pool2x2.c):
 * each input takes the output's value or +0 by a comparison's mask, never by a branch on the
 * data (which of the four is the argmax is as good as random: a branch on it mispredicts about
 * every other output). Data movement and selection only: the same bits on every path.
 */
#ifndef STRATA_ARCH_SPREAD_H
#define STRATA_ARCH_SPREAD_H

#if defined(__x86_64__)
#include <stdint.h>
#include <immintrin.h>

/*
 * For e < @p ow: with t = ar[e] - (i0 + 2 e), r0[2 e + s] = v if t == s, r1[2 e + s] = v if
 * t == w + s, else +0 (s = 0, 1), v = 0 + d[e], or +0 where @p gate (not NULL) has
 * gate[e] > 0 false; 16 outputs at a time, the last ones masked (nothing read or written
 * past the row). Call only where the CPU has AVX-512F.
 */
__attribute__((target("avx512f"))) static inline void
strata__spread2x2_row512(int ow, int w, const float *d, const float *gate, const int32_t *ar,
                         int32_t i0, float *r0, float *r1)
{
        const __m512i two_e = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8,
                                               6, 4, 2, 0);
        /* two vectors interleaved: lanes 0..7 of each (lo), then 8..15 (hi) */
        const __m512i lo = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1,
                                            16, 0);
        const __m512i hi = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10,
                                            25, 9, 24, 8);
        const __m512i one = _mm512_set1_epi32(1), wi = _mm512_set1_epi32(w);
        const __m512i w1 = _mm512_set1_epi32(w + 1), zero = _mm512_setzero_si512();

        for (int e = 0; e < ow; e += 16) {
                int n = ow - e < 16 ? ow - e : 16;
                __mmask16 m = (__mmask16)((1u << n) - 1u);
                __mmask16 ml = n >= 8 ? 0xffff : (__mmask16)((1u << 2 * n) - 1u);
                __m512 v = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(m, d + e));

                if (gate) /* gate > 0, false for a NaN */
                        v = _mm512_maskz_mov_ps(
                                _mm512_cmp_ps_mask(_mm512_maskz_loadu_ps(m, gate + e),
                                                   _mm512_setzero_ps(), _CMP_GT_OQ),
                                v);
                __m512i t = _mm512_sub_epi32(_mm512_maskz_loadu_epi32(m, ar + e),
                                             _mm512_add_epi32(_mm512_set1_epi32(i0 + 2 * e),
                                                              two_e));
                __m512 a0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(t, zero), v);
                __m512 a1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(t, one), v);
                __m512 b0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(t, wi), v);
                __m512 b1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(t, w1), v);

                _mm512_mask_storeu_ps(r0 + 2 * e, ml, _mm512_permutex2var_ps(a0, lo, a1));
                _mm512_mask_storeu_ps(r1 + 2 * e, ml, _mm512_permutex2var_ps(b0, lo, b1));
                if (n > 8) { /* the second half of the outputs' 2 n inputs */
                        __mmask16 mh = (__mmask16)((1u << (2 * n - 16)) - 1u);

                        _mm512_mask_storeu_ps(r0 + 2 * e + 16, mh,
                                              _mm512_permutex2var_ps(a0, hi, a1));
                        _mm512_mask_storeu_ps(r1 + 2 * e + 16, mh,
                                              _mm512_permutex2var_ps(b0, hi, b1));
                }
        }
}

/* dst[2 i] = x0[i], dst[2 i + 1] = x1[i], i < 8: a row's inputs from its two columns' values. */
__attribute__((target("avx2"), always_inline)) static inline void
strata__spread2x2_pairs256(float *dst, __m256 x0, __m256 x1)
{
        /* unpack gives outputs 0, 1, 4, 5 (lo) and 2, 3, 6, 7 (hi) */
        __m256 lo = _mm256_unpacklo_ps(x0, x1), hi = _mm256_unpackhi_ps(x0, x1);

        _mm256_storeu_ps(dst, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(dst + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
}

/*
 * strata__spread2x2_row512()'s rows with AVX2, 8 outputs at a time, whole vectors only (Zen's
 * masked stores are microcoded: they cost more than the C loop): the last block reads the
 * values of up to 7 outputs past the row, @p d, @p gate and @p ar alike, and writes their
 * inputs past r0's and r1's row. The blocks run last first, so what r0's last block writes
 * past it lands on r1's first 16 inputs before r1's first block writes them; what r1's writes
 * past it lands on the rows after, which the caller writes after this row. Call only where the
 * CPU has AVX2 and the buffers hold those outputs' values and inputs.
 */
__attribute__((target("avx2"))) static inline void
strata__spread2x2_row256(int ow, int w, const float *d, const float *gate, const int32_t *ar,
                         int32_t i0, float *r0, float *r1)
{
        const __m256i two_e = _mm256_set_epi32(14, 12, 10, 8, 6, 4, 2, 0);
        const __m256i one = _mm256_set1_epi32(1), wi = _mm256_set1_epi32(w);
        const __m256i w1 = _mm256_set1_epi32(w + 1), zero = _mm256_setzero_si256();

        for (int e = (ow - 1) / 8 * 8; e >= 0; e -= 8) {
                __m256 v = _mm256_add_ps(_mm256_setzero_ps(), _mm256_loadu_ps(d + e));

                if (gate) /* gate > 0, false for a NaN */
                        v = _mm256_and_ps(v, _mm256_cmp_ps(_mm256_loadu_ps(gate + e),
                                                           _mm256_setzero_ps(), _CMP_GT_OQ));
                __m256i t = _mm256_sub_epi32(_mm256_loadu_si256((const __m256i *)(ar + e)),
                                             _mm256_add_epi32(_mm256_set1_epi32(i0 + 2 * e),
                                                              two_e));
                __m256 a0 = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpeq_epi32(t, zero)));
                __m256 a1 = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpeq_epi32(t, one)));
                __m256 b0 = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpeq_epi32(t, wi)));
                __m256 b1 = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_cmpeq_epi32(t, w1)));
                strata__spread2x2_pairs256(r0 + 2 * e, a0, a1);
                strata__spread2x2_pairs256(r1 + 2 * e, b0, b1);
        }
}
#endif

#endif /* STRATA_ARCH_SPREAD_H */

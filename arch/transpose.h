/*
 * One 8 x 8 block of floats transposed with AVX2 (the GEMM's packing, the convolutions'
 * col2im strips): data movement only, so the same bits on every path that uses it.
 */
#ifndef STRATA_ARCH_TRANSPOSE_H
#define STRATA_ARCH_TRANSPOSE_H

#if defined(__x86_64__)
#include <stddef.h>
#include <immintrin.h>

/*
 * dst[j * ld + i] = src[i * ls + j] for i, j < 8, rows i >= @p n read as zeros (n <= 8; a
 * constant 8 compiles to the plain block). Call only where the CPU has AVX2.
 */
__attribute__((target("avx2"), always_inline)) static inline void
strata__transpose8(const float *src, size_t ls, int n, float *dst, size_t ld)
{
        __m256 r[8], t[8], u[8];

        for (int i = 0; i < 8; i++)
                r[i] = i < n ? _mm256_loadu_ps(src + (size_t)i * ls) : _mm256_setzero_ps();
        for (int i = 0; i < 8; i += 2) {
                t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int i = 0; i < 8; i += 4) {
                u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
                u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
                u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
                u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        for (int i = 0; i < 4; i++) {
                _mm256_storeu_ps(dst + (size_t)i * ld,
                                 _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
                _mm256_storeu_ps(dst + (size_t)(i + 4) * ld,
                                 _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
        }
}

/*
 * dst[j * ld + i] = src[i * ls + j] for i < 8, j < @p w (w <= 8): the last columns of a
 * block, read with masked loads (nothing past column w is touched), transposed as above,
 * w rows of 8 stored. Call only where the CPU has AVX2.
 */
__attribute__((target("avx2"), always_inline)) static inline void
strata__transpose8_cols(const float *src, size_t ls, int w, float *dst, size_t ld)
{
        __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(w),
                                          _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        float in[64], out[64];

        for (int i = 0; i < 8; i++)
                _mm256_storeu_ps(in + 8 * i, _mm256_maskload_ps(src + (size_t)i * ls, mask));
        strata__transpose8(in, 8, 8, out, 8);
        for (int j = 0; j < w; j++)
                _mm256_storeu_ps(dst + (size_t)j * ld, _mm256_loadu_ps(out + 8 * j));
}
#endif

#endif /* STRATA_ARCH_TRANSPOSE_H */

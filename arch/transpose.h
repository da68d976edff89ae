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
#endif

#endif /* STRATA_ARCH_TRANSPOSE_H */

/*
 * Blocks of floats transposed: 8 x 8 with AVX2 (the GEMM's packing, the convolutions' col2im
 * strips), 16 x 16 with AVX-512 (the GEMM's packing where the CPU has it): data movement
 * only, so the same bits on every path that uses it.
 */
#ifndef STRATA_ARCH_TRANSPOSE_H
#define STRATA_ARCH_TRANSPOSE_H

#if defined(__x86_64__)
#include <stddef.h>
#include <string.h>
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
 * dst[i] = src[i] for i < @p w < 8, in at most three moves (4, 2 and 1 floats): nothing past
 * w read or written, and no masked move, which the first Zen generation splits into many micro-ops
 * (half the time of the packing's copies of the cart-pole's 4- and 5-wide rows).
 */
static inline __attribute__((always_inline)) void strata__transpose8_copy_few(float *dst,
                                                                             const float *src,
                                                                             int w)
{
        int i = 0;

        if (w & 4) {
                memcpy(dst, src, 4 * sizeof(float));
                i = 4;
        }
        if (w & 2) {
                memcpy(dst + i, src + i, 2 * sizeof(float));
                i += 2;
        }
        if (w & 1)
                memcpy(dst + i, src + i, sizeof(float));
}

/*
 * dst[j * ld + i] = src[i * ls + j] for i < 8, j < @p w (w < 8): the last columns of a block,
 * read row by row (strata__transpose8_copy_few(): nothing past column w is touched) into a
 * zeroed block, transposed as above, w rows of 8 stored. Call only where the CPU has AVX2.
 */
__attribute__((target("avx2"), always_inline)) static inline void
strata__transpose8_cols(const float *src, size_t ls, int w, float *dst, size_t ld)
{
        float in[64], out[64];

        for (int i = 0; i < 8; i++) {
                _mm256_storeu_ps(in + 8 * i, _mm256_setzero_ps());
                strata__transpose8_copy_few(in + 8 * i, src + (size_t)i * ls, w);
        }
        strata__transpose8(in, 8, 8, out, 8);
        for (int j = 0; j < w; j++)
                _mm256_storeu_ps(dst + (size_t)j * ld, _mm256_loadu_ps(out + 8 * j));
}

/*
 * dst[j * ld + i] = src[i * ls + j] for i < @p rows, j < @p cols, in strata__transpose8()
 * blocks: per 8 rows the whole blocks, then the last w < 8 columns (strata__transpose8_cols()).
 * Returns the rows done (rows & ~7): the caller moves the last ones. Call only where the CPU
 * has AVX2.
 */
__attribute__((target("avx2"))) static inline int
strata__transpose8_all(const float *src, size_t ls, int rows, int cols, float *dst, size_t ld)
{
        for (int i0 = 0, j0; i0 + 8 <= rows; i0 += 8) {
                for (j0 = 0; j0 + 8 <= cols; j0 += 8)
                        strata__transpose8(src + (size_t)i0 * ls + j0, ls, 8,
                                           dst + (size_t)j0 * ld + i0, ld);
                if (j0 < cols)
                        strata__transpose8_cols(src + (size_t)i0 * ls + j0, ls, cols - j0,
                                                dst + (size_t)j0 * ld + i0, ld);
        }
        return rows & ~7;
}

/*
 * dst[j * ld + i] = src[i * ls + j] for i < @p n, j < @p w (n, w <= 16): one 16 x 16 block
 * with AVX-512 (decision 0107). Rows past n and columns past w are neither read nor written:
 * w rows of dst, each one store of n floats (a whole 64-byte line where n is 16 and dst is
 * aligned, masked where n < 16). Constant n and w of 16 compile to the plain block. Call only
 * where the CPU has AVX-512F.
 */
__attribute__((target("avx512f"), always_inline)) static inline void
strata__transpose16(const float *src, size_t ls, int n, int w, float *dst, size_t ld)
{
        __mmask16 cm = (__mmask16)((1u << w) - 1), rm = (__mmask16)((1u << n) - 1);
        __m512 r[16], t[16];

        /*
         * The rows' addresses from src and dst here: hoisted out of a caller's loop, the 32 of
         * them would not fit in registers (GCC spilled them, and some of r with them).
         */
        __asm__("" : "+r"(src), "+r"(dst));
#pragma GCC unroll 16
        for (int i = 0; i < 16; i++)
                r[i] = i >= n ? _mm512_setzero_ps()
                       : w == 16 ? _mm512_loadu_ps(src + (size_t)i * ls)
                                 : _mm512_maskz_loadu_ps(cm, src + (size_t)i * ls);
        for (int i = 0; i < 16; i += 2) { /* per 128-bit lane, as strata__transpose8() */
                t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
                t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
        }
        for (int i = 0; i < 16; i += 4) { /* lane k of r[i + c]: column 4k + c, rows i..i+3 */
                r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
                r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
                r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
                r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
        }
        for (int c = 0; c < 4; c++) { /* lanes 0, 2 and 1, 3 of r[c], r[4 + c]; r[8 + c], ... */
                t[c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0x88);
                t[4 + c] = _mm512_shuffle_f32x4(r[c], r[4 + c], 0xdd);
                t[8 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0x88);
                t[12 + c] = _mm512_shuffle_f32x4(r[8 + c], r[12 + c], 0xdd);
        }
        for (int c = 0; c < 4; c++) { /* r[j]: column j of the block, its 16 rows in order */
                r[c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0x88);
                r[8 + c] = _mm512_shuffle_f32x4(t[c], t[8 + c], 0xdd);
                r[4 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0x88);
                r[12 + c] = _mm512_shuffle_f32x4(t[4 + c], t[12 + c], 0xdd);
        }
#pragma GCC unroll 16
        for (int j = 0; j < 16; j++)
                if (j < w && n == 16)
                        _mm512_storeu_ps(dst + (size_t)j * ld, r[j]);
                else if (j < w)
                        _mm512_mask_storeu_ps(dst + (size_t)j * ld, rm, r[j]);
}

/*
 * dst[j * ld + i] = src[i * ls + j] for i < @p rows, j < @p cols, all of it in blocks of
 * strata__transpose16(): whole ones, then the last columns' and the last rows' masked. Returns
 * the rows done: all of them. Call only where the CPU has AVX-512F.
 */
__attribute__((target("avx512f"))) static inline int
strata__transpose16_all(const float *src, size_t ls, int rows, int cols, float *dst, size_t ld)
{
        for (int i0 = 0, j0; i0 < rows; i0 += 16) {
                const float *s = src + (size_t)i0 * ls;
                int n = rows - i0 < 16 ? rows - i0 : 16;

                for (j0 = 0; j0 + 16 <= cols && n == 16; j0 += 16)
                        strata__transpose16(s + j0, ls, 16, 16, dst + (size_t)j0 * ld + i0, ld);
                for (; j0 + 16 <= cols; j0 += 16)
                        strata__transpose16(s + j0, ls, n, 16, dst + (size_t)j0 * ld + i0, ld);
                if (j0 < cols)
                        strata__transpose16(s + j0, ls, n, cols - j0, dst + (size_t)j0 * ld + i0,
                                            ld);
        }
        return rows;
}
#endif

#endif /* STRATA_ARCH_TRANSPOSE_H */

/* The core's f32 FMA peak, measured (tools/peak.h). */
#include "tools/peak.h"
#include "tools/timing.h"

#if defined(__x86_64__)
#include <immintrin.h>

#define R12(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define ITERS 1000000L

/* Twelve independent accumulators in registers, timed over ITERS rounds. */
__attribute__((target("avx2,fma"))) double strata_tool_peak_avx2_on(double (*clock)(void))
{
        __m256 x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(0.9999999f);
        float sink = 0.0f, b[8];
        double t0;
#define D2(i) __m256 a##i = _mm256_set1_ps((float)(i));
#define S2(i) a##i = _mm256_fmadd_ps(a##i, x, y);
#define U2(i) _mm256_storeu_ps(b, a##i), sink += b[0];
        R12(D2)
        t0 = clock();
        for (long it = 0; it < ITERS; it++) {
                R12(S2)
                __asm__ volatile("" ::: "memory");
        }
        t0 = clock() - t0;
        R12(U2)
        return sink == 1.0f ? 0.0 : ITERS * 12.0 * 16 / t0 * 1e-9;
}

/* Sixteen 16-wide accumulators (AVX-512 has 32 registers), timed over ITERS rounds. */
__attribute__((target("avx512f"))) double strata_tool_peak_avx512_on(double (*clock)(void))
{
        __m512 x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(0.9999999f);
        float sink = 0.0f;
        double t0;
#define R16(X) R12(X) X(12) X(13) X(14) X(15)
#define D5(i) __m512 a##i = _mm512_set1_ps((float)(i));
#define S5(i) a##i = _mm512_fmadd_ps(a##i, x, y);
#define U5(i) sink += _mm512_reduce_add_ps(a##i);
        R16(D5)
        t0 = clock();
        for (long it = 0; it < ITERS; it++) {
                R16(S5)
                __asm__ volatile("" ::: "memory");
        }
        t0 = clock() - t0;
        R16(U5)
        return sink == 1.0f ? 0.0 : ITERS * 16.0 * 32 / t0 * 1e-9;
}
#else
double strata_tool_peak_avx512_on(double (*clock)(void))
{
        (void)clock;
        return 0.0;
}

double strata_tool_peak_avx2_on(double (*clock)(void))
{
        (void)clock;
        return 0.0;
}
#endif

double strata_tool_peak_avx2(void)
{
        return strata_tool_peak_avx2_on(strata_tool_now);
}

/*
 * The exact GELU's erff and expf, vectorised with libm's bits (decision 0088).
 *
 * The exact GELU and its gradient call erff and expf once per element. The libm this library
 * runs on (glibc 2.36, Debian 12) computes them as follows:
 * - erff: fdlibm's float code (sysdeps/ieee754/flt-32/s_erff.c), one build for every x86-64,
 *   without fused multiply-adds: by |x|, x + efx x below 2^-28, a rational function of x^2
 *   below 0.84375, erx + P(s)/Q(s) with s = |x| - 1 below 1.25, 1 - exp(-z^2 - 0.5625)
 *   exp((z - |x|)(z + |x|) + R(s)/S(s)) / |x| below 6 (s = 1/x^2, z = |x| cut to 12 mantissa
 *   bits, two sets of R and S either side of 1/0.35), +-1 above;
 * - expf (sysdeps/ieee754/flt-32/e_expf.c) in double, k = round(x 32/ln 2) through a shift,
 *   2^(k/32) from a 32-entry table, a cubic in the remainder; two builds, chosen at load by
 *   CPUID: with fused multiply-adds (five of them) where the CPU has FMA and AVX2, without
 *   them elsewhere. erff calls the same expf.
 * Below, each of them is written again as straight-line code: every interval's value is
 * computed (in blocks of 32 elements, the intervals the block reaches) and the element's is
 * selected, with the same float and double operations in the same order as glibc (no
 * contraction: ISO C; fma() exactly where glibc's FMA build has one), so the loops
 * vectorise (STRATA_SIMD) and every element has libm's bits. That is the FMA build's expf, so
 * the replica runs only where glibc runs that build (AVX2 and FMA), and only under glibc 2.36
 * (strata__simd_libm_replica(), arch/cpu.c); elsewhere the loops call libm.
 * tools/strata-check-erff.c compares both functions with libm on all 2^32 inputs.
 */
#include <math.h>
#include <stdint.h>

#include "arch/bits.h"
#include "arch/simd.h"
#include "drivers/formulas.h"
#include "drivers/cpu/erff.h"

/* clang contracts a * b + c by default; glibc's erff has no fused operation (GCC: ISO C is off). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

/* Every helper inlined into the loops, so that each loop is one straight body to vectorise. */
#define INLINE __attribute__((always_inline))

/*
 * Lane masks and selects in integers: the compiler would turn a chain of ?: back into
 * branches by interval (which do not vectorise), and its booleans into byte vectors.
 */
static inline INLINE uint32_t below(uint32_t a, uint32_t k) /* all ones if a < k (both < 2^31) */
{
        return (uint32_t)((int32_t)(a - k) >> 31);
}

static inline INLINE float pick(uint32_t m, float a, float b) /* a where m is all ones, else b */
{
        return strata__from_bits_f((strata__bits_f(a) & m) | (strata__bits_f(b) & ~m));
}

/* expf: 2^(i/32) as bits, less i << 47 (glibc's __exp2f_data.tab). */
static const uint64_t exp_tab[32] = {
        0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51,
        0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1,
        0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d,
        0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585,
        0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13,
        0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d,
        0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069,
        0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540,
};

#define EXP_INVLN2N 0x1.71547652b82fep+5 /* 32 / ln 2 */
#define EXP_SHIFT 0x1.8p+52              /* 1.5 2^52: rounds to an integer in the low bits */
#define EXP_C0 0x1.c6af84b912394p-20     /* the cubic in r = x 32/ln 2 - k */
#define EXP_C1 0x1.ebfce50fac4f3p-13
#define EXP_C2 0x1.62e42ff0c52d6p-6

/* expf(x) for |x| < 88, glibc's FMA build. */
static inline INLINE float expf_core(float x)
{
        double xd = x;
        double kd = fma(EXP_INVLN2N, xd, EXP_SHIFT);
        uint64_t ki = strata__bits_d(kd);
        double r, s, z, y;

        kd -= EXP_SHIFT;
        r = fma(EXP_INVLN2N, xd, -kd);
        s = strata__from_bits_d(exp_tab[ki % 32] + (ki << 47));
        z = fma(EXP_C0, r, EXP_C1);
        y = fma(EXP_C2, r, 1.0);
        y = fma(z, r * r, y);
        return (float)(y * s);
}

/*
 * expf(x) for every x: from |x| >= 88 on, glibc's cases (0 at -inf, x + x for NaN and +inf,
 * its overflow's inf, its underflow's 0 and, between the two underflow bounds, its
 * "may underflow" value 0x1.4p-75f squared, 2^-149), else the core.
 */
static inline INLINE float expf_replica(float x)
{
        uint32_t u = strata__bits_f(x), ix = u & 0x7fffffff, neg = (uint32_t)((int32_t)u >> 31);
        float v = expf_core(x), y;

        y = pick(neg & below(strata__bits_f(0x1.9d1d9ep6f), ix), 0x1p-149f, v);
        y = pick(neg & below(strata__bits_f(0x1.9fe368p6f), ix), 0.0f, y);
        y = pick(~neg & below(strata__bits_f(0x1.62e42ep6f), ix), INFINITY, y);
        y = pick(~below(ix, 0x7f800000), x + x, y);
        y = pick(neg & ~below(ix, 0x7f800000) & below(ix, 0x7f800001), 0.0f, y);
        return pick(below(ix, 0x42b00000), v, y);
}

/* erff's constants (glibc's s_erff.c, the same floats in hexadecimal). */
#define ERX 0x1.b0ac16p-1f /* erf(1) cut to float */
#define EFX 0x1.06eba8p-3f /* 2/sqrt(pi) - 1 */
#define TINY 1e-30f
#define PP0 0x1.06eba8p-3f
#define PP1 -0x1.4cd7d6p-2f
#define PP2 -0x1.d2a51ep-6f
#define PP3 -0x1.7a2912p-8f
#define PP4 -0x1.8ead62p-16f
#define QQ1 0x1.97779cp-2f
#define QQ2 0x1.0a54c6p-4f
#define QQ3 0x1.4d022cp-8f
#define QQ4 0x1.15dc92p-13f
#define QQ5 -0x1.09c434p-18f
#define PA0 -0x1.359b8cp-9f
#define PA1 0x1.a8d00ap-2f
#define PA2 -0x1.7d241p-2f
#define PA3 0x1.45fca8p-2f
#define PA4 -0x1.c63984p-4f
#define PA5 0x1.22a366p-5f
#define PA6 -0x1.1bf38p-9f
#define QA1 0x1.b3e662p-4f
#define QA2 0x1.14af0ap-1f
#define QA3 0x1.2635cep-4f
#define QA4 0x1.02660ep-3f
#define QA5 0x1.bedc26p-7f
#define QA6 0x1.88b546p-7f

/* erfc on [1.25, 1/0.35) (ra, sa) and [1/0.35, 6) (rb, sb). */
#define RA0 -0x1.434126p-7f
#define RA1 -0x1.63416ep-1f
#define RA2 -0x1.51e044p+3f
#define RA3 -0x1.f300aep+5f
#define RA4 -0x1.44cb18p+7f
#define RA5 -0x1.7135cep+7f
#define RA6 -0x1.452656p+6f
#define RA7 -0x1.3a0efcp+3f
#define SA1 0x1.3a6b9cp+4f
#define SA2 0x1.1350c6p+7f
#define SA3 0x1.b290dep+8f
#define SA4 0x1.42b192p+9f
#define SA5 0x1.ad0216p+8f
#define SA6 0x1.b28a3ep+6f
#define SA7 0x1.a47ef8p+2f
#define SA8 -0x1.eeff2ep-5f
#define RB0 -0x1.434124p-7f
#define RB1 -0x1.993ba8p-1f
#define RB2 -0x1.1c2096p+4f
#define RB3 -0x1.4145d4p+7f
#define RB4 -0x1.3ec882p+9f
#define RB5 -0x1.004616p+10f
#define RB6 -0x1.e384eap+8f
#define SB1 0x1.e568b2p+4f
#define SB2 0x1.45cae2p+8f
#define SB3 0x1.802eb2p+10f
#define SB4 0x1.8ffb76p+11f
#define SB5 0x1.3f219cp+11f
#define SB6 0x1.da874ep+8f
#define SB7 -0x1.670e24p+4f

/*
 * erff for 1.25 <= |x| < 6, from a = |x| and its bits ia. The second set's missing top terms
 * are 0: rb6 + s 0 is rb6 and sb7 + s 0 is sb7 (s > 0), so one Horner chain serves both.
 */
static inline INLINE float erff_tail(float a, uint32_t ia, uint32_t neg)
{
        float s = 1.0f / (a * a);
        uint32_t hi = ~below(ia, 0x4036db6e);
        float r, q, z, e;

        r = pick(hi, RB0, RA0) +
            s * (pick(hi, RB1, RA1) +
                 s * (pick(hi, RB2, RA2) +
                      s * (pick(hi, RB3, RA3) +
                           s * (pick(hi, RB4, RA4) +
                                s * (pick(hi, RB5, RA5) +
                                     s * (pick(hi, RB6, RA6) + s * pick(hi, 0.0f, RA7)))))));
        q = 1.0f +
            s * (pick(hi, SB1, SA1) +
                 s * (pick(hi, SB2, SA2) +
                      s * (pick(hi, SB3, SA3) +
                           s * (pick(hi, SB4, SA4) +
                                s * (pick(hi, SB5, SA5) +
                                     s * (pick(hi, SB6, SA6) +
                                          s * (pick(hi, SB7, SA7) +
                                               s * pick(hi, 0.0f, SA8))))))));
        z = strata__from_bits_f(ia & 0xfffff000u);
        e = expf_core(-z * z - 0.5625f) * expf_core((z - a) * (z + a) + r / q) / a;
        r = e - 1.0f;
        q = 1.0f - e;
        return pick(neg, r, q);
}

/* erff(x): every interval's value, the element's selected by |x|'s bits. */
/*
 * Which intervals a block of elements reaches (by its largest |x|): below 0.84375 (SMALL), below
 * 1.25 (MID), else all (TAIL). A block computes only the values its elements can pick; an
 * element's bits are the same in any block (the same operations pick the same value).
 */
enum { SMALL, MID, TAIL };

static inline INLINE float erff_replica(float x, int parts)
{
        uint32_t hx = strata__bits_f(x), ix = hx & 0x7fffffff, neg = (uint32_t)((int32_t)hx >> 31);
        float a = strata__from_bits_f(ix);
        float z = x * x, sm = a - 1.0f;
        float r, s, p, q, y, small, mid, tail, tiny, lin, one;

        r = PP0 + z * (PP1 + z * (PP2 + z * (PP3 + z * PP4)));
        s = 1.0f + z * (QQ1 + z * (QQ2 + z * (QQ3 + z * (QQ4 + z * QQ5))));
        small = x + x * (r / s);
        mid = small;
        if (parts >= MID) {
                p = PA0 +
                    sm * (PA1 + sm * (PA2 + sm * (PA3 + sm * (PA4 + sm * (PA5 + sm * PA6)))));
                q = 1.0f +
                    sm * (QA1 + sm * (QA2 + sm * (QA3 + sm * (QA4 + sm * (QA5 + sm * QA6)))));
                p = p / q;
                q = -ERX - p;
                p = ERX + p;
                mid = pick(neg, q, p);
        }
        tail = parts >= TAIL ? erff_tail(a, ix, neg) : mid;
        tiny = 0.0625f * (16.0f * x + (16.0f * EFX) * x);
        lin = x + EFX * x;
        one = pick(neg, TINY - 1.0f, 1.0f - TINY);
        /* glibc's (1 - 2 sign) + 1/x past 6: +-1 at +-inf (one), x quieted at a NaN (x + x) */
        y = pick(below(0x7f800000, ix), x + x, one);
        y = pick(below(ix, 0x40c00000), tail, y);
        y = pick(below(ix, 0x3fa00000), mid, y);
        y = pick(below(ix, 0x3f580000), small, y);
        y = pick(below(ix, 0x31800000), lin, y);
        return pick(below(ix, 0x04000000), tiny, y);
}

/* The intervals a block of @p m erff arguments reaches (x, or GELU's x / sqrt 2 with @p gelu). */
static inline INLINE int parts_of(const float *x, size_t m, int gelu)
{
        uint32_t top = 0;

        for (size_t j = 0; j < m; j++) {
                uint32_t ix = strata__bits_f(gelu ? strata__gelu_erf_arg(x[j]) : x[j]) & 0x7fffffff;

                top = ix > top ? ix : top;
        }
        return top < 0x3f580000 ? SMALL : top < 0x3fa00000 ? MID : TAIL;
}

static inline INLINE void erff_block(const float *x, float *y, size_t m, int parts)
{
        for (size_t j = 0; j < m; j++)
                y[j] = erff_replica(x[j], parts);
}

static inline INLINE void gelu_block(const float *x, float *y, size_t m, int parts)
{
        for (size_t j = 0; j < m; j++)
                y[j] = strata__gelu_from(x[j], erff_replica(strata__gelu_erf_arg(x[j]), parts));
}

static inline INLINE void gelu_backward_block(const float *x, const float *dy, float *dx,
                                              size_t m, int parts)
{
        for (size_t j = 0; j < m; j++)
                dx[j] = strata__gelu_grad_from(x[j],
                                               erff_replica(strata__gelu_erf_arg(x[j]), parts),
                                               expf_replica(strata__gelu_exp_arg(x[j])), dy[j]);
}

/*
 * Blocks of 32: in the FNO example 98% of GELU's inputs are below 0.84375 and 2% of the
 * blocks of 16 reach erff's tail (its two expf are most of the work).
 */
#define BLOCK 32

STRATA_SIMD static void erff_loop(const float *x, float *y, size_t n)
{
        for (size_t i = 0, m; i < n; i += BLOCK) {
                m = n - i < BLOCK ? n - i : BLOCK;
                switch (parts_of(x + i, m, 0)) {
                case SMALL: erff_block(x + i, y + i, m, SMALL); break;
                case MID: erff_block(x + i, y + i, m, MID); break;
                default: erff_block(x + i, y + i, m, TAIL); break;
                }
        }
}

STRATA_SIMD static void expf_loop(const float *x, float *y, size_t n)
{
        for (size_t i = 0; i < n; i++)
                y[i] = expf_replica(x[i]);
}

STRATA_SIMD static void gelu_loop(const float *x, float *y, size_t n)
{
        for (size_t i = 0, m; i < n; i += BLOCK) {
                m = n - i < BLOCK ? n - i : BLOCK;
                switch (parts_of(x + i, m, 1)) {
                case SMALL: gelu_block(x + i, y + i, m, SMALL); break;
                case MID: gelu_block(x + i, y + i, m, MID); break;
                default: gelu_block(x + i, y + i, m, TAIL); break;
                }
        }
}

STRATA_SIMD static void gelu_backward_loop(const float *x, const float *dy, float *dx, size_t n)
{
        for (size_t i = 0, m; i < n; i += BLOCK) {
                m = n - i < BLOCK ? n - i : BLOCK;
                switch (parts_of(x + i, m, 1)) {
                case SMALL: gelu_backward_block(x + i, dy + i, dx + i, m, SMALL); break;
                case MID: gelu_backward_block(x + i, dy + i, dx + i, m, MID); break;
                default: gelu_backward_block(x + i, dy + i, dx + i, m, TAIL); break;
                }
        }
}

const char *strata__cpu_erff_path(void)
{
        return strata__simd_libm_replica() ? "replica" : "libm";
}

void strata__cpu_erff_replica(const float *x, float *y, size_t n)
{
        erff_loop(x, y, n);
}

void strata__cpu_expf_replica(const float *x, float *y, size_t n)
{
        expf_loop(x, y, n);
}

void strata__cpu_erff(const float *x, float *y, size_t n)
{
        if (strata__simd_libm_replica()) {
                erff_loop(x, y, n);
                return;
        }
        for (size_t i = 0; i < n; i++)
                y[i] = erff(x[i]);
}

void strata__cpu_expf(const float *x, float *y, size_t n)
{
        if (strata__simd_libm_replica()) {
                expf_loop(x, y, n);
                return;
        }
        for (size_t i = 0; i < n; i++)
                y[i] = expf(x[i]);
}

void strata__cpu_gelu(const float *x, float *y, size_t n)
{
        if (strata__simd_libm_replica()) {
                gelu_loop(x, y, n);
                return;
        }
        for (size_t i = 0; i < n; i++)
                y[i] = strata__act(STRATA_ACT_GELU, 0.0f, x[i]);
}

void strata__cpu_gelu_backward(const float *x, const float *dy, float *dx, size_t n)
{
        if (strata__simd_libm_replica()) {
                gelu_backward_loop(x, dy, dx, n);
                return;
        }
        for (size_t i = 0; i < n; i++)
                dx[i] = strata__act_grad(STRATA_ACT_GELU, 0.0f, x[i], 0.0f, dy[i]);
}

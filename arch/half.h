/*
 * bf16 and IEEE binary16 <-> binary32 (internal): exact widening, round-to-nearest-even
 * narrowing with NaN kept quiet and overflow to infinity. The collectives' half-precision
 * reductions and the mixed-precision GEMMs' operand packing share them.
 */
#ifndef STRATA_ARCH_HALF_H
#define STRATA_ARCH_HALF_H

#include <stdint.h>
#include <string.h>

static inline float strata__bf16_to_f32(uint16_t h)
{
        uint32_t u = (uint32_t)h << 16;
        float f;

        memcpy(&f, &u, 4);
        return f;
}

static inline uint16_t strata__f32_to_bf16(float f)
{
        uint32_t u;

        memcpy(&u, &f, 4);
        if ((u & 0x7fffffffu) > 0x7f800000u)
                return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
        u += 0x7fffu + ((u >> 16) & 1u);            /* round to nearest even */
        return (uint16_t)(u >> 16);
}

/* IEEE binary16 <-> binary32, exact widening and round-to-nearest-even narrowing. */
static inline float strata__f16_to_f32(uint16_t h)
{
        uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
        uint32_t u;
        float f;

        if (exp == 0x1f) {
                u = sign | 0x7f800000u | (man << 13); /* inf / NaN */
        } else if (exp != 0) {
                u = sign | ((exp + 112u) << 23) | (man << 13);
        } else if (man == 0) {
                u = sign;
        } else { /* subnormal: value = man * 2^-24 */
                f = (float)man * (1.0f / 16777216.0f);
                memcpy(&u, &f, 4);
                u |= sign;
        }
        memcpy(&f, &u, 4);
        return f;
}

static inline uint16_t strata__f32_to_f16(float f)
{
        uint32_t u, sign, man;
        int32_t exp;

        memcpy(&u, &f, 4);
        sign = (u >> 16) & 0x8000u;
        exp = (int32_t)((u >> 23) & 0xffu) - 127 + 15;
        man = u & 0x7fffffu;
        if (((u >> 23) & 0xffu) == 0xffu) /* inf / NaN */
                return (uint16_t)(sign | 0x7c00u | (man ? 0x200u : 0u));
        if (exp >= 0x1f)
                return (uint16_t)(sign | 0x7c00u); /* overflow to inf */
        if (exp <= 0) {                              /* subnormal or zero */
                uint32_t m, shift, r, half;

                if (exp < -10)
                        return (uint16_t)sign;
                m = man | 0x800000u;
                shift = (uint32_t)(14 - exp);
                r = m >> shift;
                half = 1u << (shift - 1);
                if ((m & ((1u << shift) - 1)) > half || ((m & ((1u << shift) - 1)) == half && (r & 1u)))
                        r++;
                return (uint16_t)(sign | r);
        }
        {
                uint32_t r = ((uint32_t)exp << 10) | (man >> 13), rest = man & 0x1fffu;

                if (rest > 0x1000u || (rest == 0x1000u && (r & 1u)))
                        r++; /* may carry into the exponent: that is the correct rounding */
                return (uint16_t)(sign | r);
        }
}

#endif /* STRATA_ARCH_HALF_H */

/*
 * A float's or a double's bits and back (internal), inlined wherever they are called so that
 * a loop using them stays one straight body the compiler vectorises: the vector replicas of
 * libm's functions (arch/expd.c, drivers/cpu/erff.c) work on their operands' bits.
 */
#ifndef STRATA_ARCH_BITS_H
#define STRATA_ARCH_BITS_H

#include <stdint.h>
#include <string.h>

/** The bits of @p f. */
static inline __attribute__((always_inline)) uint32_t strata__bits_f(float f)
{
        uint32_t u;

        memcpy(&u, &f, sizeof(u));
        return u;
}

/** The float of bits @p u. */
static inline __attribute__((always_inline)) float strata__from_bits_f(uint32_t u)
{
        float f;

        memcpy(&f, &u, sizeof(f));
        return f;
}

/** The bits of @p d. */
static inline __attribute__((always_inline)) uint64_t strata__bits_d(double d)
{
        uint64_t u;

        memcpy(&u, &d, sizeof(u));
        return u;
}

/** The double of bits @p u. */
static inline __attribute__((always_inline)) double strata__from_bits_d(uint64_t u)
{
        double d;

        memcpy(&d, &u, sizeof(d));
        return d;
}

#endif /* STRATA_ARCH_BITS_H */

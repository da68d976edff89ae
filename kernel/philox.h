/*
 * Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11): a
 * counter-based generator. The value at (key, counter) does not depend on what was drawn
 * before or on which thread draws it, so random streams are reproducible under any schedule.
 */
#ifndef STRATA_KERNEL_PHILOX_H
#define STRATA_KERNEL_PHILOX_H

#include <stdint.h>

/* The same generator on the host and in CUDA kernels, so both draw the same streams. */
#ifdef __CUDACC__
#define STRATA__HD __host__ __device__
#else
#define STRATA__HD
#endif

struct strata__philox4 {
        uint32_t v[4];
};

STRATA__HD static inline struct strata__philox4 strata__philox(uint64_t key, uint64_t ctr_hi,
                                                    uint64_t ctr_lo)
{
        uint32_t c0 = (uint32_t)ctr_lo, c1 = (uint32_t)(ctr_lo >> 32);
        uint32_t c2 = (uint32_t)ctr_hi, c3 = (uint32_t)(ctr_hi >> 32);
        uint32_t k0 = (uint32_t)key, k1 = (uint32_t)(key >> 32);
        struct strata__philox4 r;

        for (int i = 0; i < 10; i++) {
                uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
                uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;

                c1 = (uint32_t)p1;
                c3 = (uint32_t)p0;
                c0 = n0;
                c2 = n2;
                k0 += 0x9E3779B9u;
                k1 += 0xBB67AE85u;
        }
        r.v[0] = c0;
        r.v[1] = c1;
        r.v[2] = c2;
        r.v[3] = c3;
        return r;
}

/** Uniform float in [0, 1) from 24 random bits. */
STRATA__HD static inline float strata__u01(uint32_t x)
{
        return (float)(x >> 8) * (1.0f / 16777216.0f);
}

/** The i-th uniform in [0, 1) of stream (key, stream). */
STRATA__HD static inline float strata__uniform_at(uint64_t key, uint64_t stream, uint64_t i)
{
        struct strata__philox4 r = strata__philox(key, stream, i >> 2);

        return strata__u01(r.v[i & 3]);
}

#endif /* STRATA_KERNEL_PHILOX_H */

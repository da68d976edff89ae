/*
 * Parameter initialisation shared by the built-in modules (internal): PyTorch's uniform
 * defaults drawn from the run seed's counter-based stream, one stream per (layer, tensor), so
 * a value depends on the seed, the layer and its index only.
 */
#ifndef STRATA_NN_INIT_H
#define STRATA_NN_INIT_H

#include <stddef.h>
#include <stdint.h>

#include "kernel/philox.h"

/** The stream of tensor @p which of layer @p layer. */
#define STRATA__INIT_STREAM(layer, which)                                                      \
        (((uint64_t)1 << 62) | ((uint64_t)(layer) << 8) | (which))

/** p[i] uniform in [-bound, bound), the i-th value of (seed, stream). */
static inline void strata__uniform_fill(float *p, size_t n, float bound, uint64_t seed,
                                        uint64_t stream)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (2.0f * strata__uniform_at(seed, stream, i) - 1.0f) * bound;
}

#endif /* STRATA_NN_INIT_H */

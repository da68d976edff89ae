/*
 * The convolutions' internals that a tool measures as the module runs them.
 */
#ifndef STRATA_NN_CONV_H
#define STRATA_NN_CONV_H

#include <stddef.h>

/**
 * Whether a convolution's GEMM whose result is an [@p m x @p n] matrix runs as its transpose
 * (the orientation whose last panel of columns is less empty; with @p plain, the forward's
 * rule, only where that saves more than an eighth of the tiles). Either way the same bits.
 */
int strata__conv_transposed(size_t m, size_t n, int plain);

#endif

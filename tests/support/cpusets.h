/* The CPU driver's kernel sets as the GEMM tests call them, and their operands. */
#ifndef STRATA_TESTS_CPUSETS_H
#define STRATA_TESTS_CPUSETS_H

#include <stddef.h>

#include "strata/strata.h"

/**
 * The kernel table of the CPU driver's @p set, prepared, this thread's packing buffer
 * registered (@p with_buffer; else none: the scalar walk); NULL where @p set cannot run here.
 */
const struct strata_kernel_ops *cpusets_kernels(enum strata_kernels set, int with_buffer);

/** @p n floats (malloc'd, asserted) drawn in [-0.5, 0.5) from the seed @p s. */
float *cpusets_filled(size_t n, unsigned s);

/** The same draw into @p p. */
void cpusets_fill(float *p, size_t n, unsigned s);

#endif /* STRATA_TESTS_CPUSETS_H */

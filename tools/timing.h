/* Clock, sorting and operand helpers shared by the tools' measurements. */
#ifndef STRATA_TOOLS_TIMING_H
#define STRATA_TOOLS_TIMING_H

#include <stddef.h>

/** @brief Monotonic time in seconds. */
double strata_tool_now(void);

/**
 * @brief The calling thread's CPU time in seconds: what it ran, not counting turns it waited
 *        on a core other processes share.
 */
double strata_tool_cpu_now(void);

/**
 * @brief The process's CPU time in seconds, every thread's: a step's work on its device
 *        threads and the caller's wait, not counting turns they waited on a core.
 */
double strata_tool_process_cpu_now(void);

/** @brief qsort comparator for doubles, ascending (medians). */
int strata_tool_cmp_double(const void *a, const void *b);

/** @brief The median of @p n values (upper middle for even n), sorting them; 0 when n is 0. */
double strata_tool_median(double *v, size_t n);

/**
 * @brief @p n floats in [-0.5, 0.5) from a linear congruential sequence of @p seed, on the
 *        heap (the caller frees them); NULL when out of memory. Benchmarks' operands.
 */
float *strata_tool_filled(size_t n, unsigned seed);

#endif

/* Clock and sorting helpers shared by the tools' measurements. */
#ifndef STRATA_TOOLS_TIMING_H
#define STRATA_TOOLS_TIMING_H

#include <stddef.h>

/** @brief Monotonic time in seconds. */
double strata_tool_now(void);

/** @brief qsort comparator for doubles, ascending (medians). */
int strata_tool_cmp_double(const void *a, const void *b);

/** @brief The median of @p n values (upper middle for even n), sorting them; 0 when n is 0. */
double strata_tool_median(double *v, size_t n);

#endif

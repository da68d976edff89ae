/* Clock and sorting helpers shared by the tools' measurements. */
#ifndef STRATA_TOOLS_TIMING_H
#define STRATA_TOOLS_TIMING_H

/** @brief Monotonic time in seconds. */
double strata_tool_now(void);

/** @brief qsort comparator for doubles, ascending (medians). */
int strata_tool_cmp_double(const void *a, const void *b);

#endif

/* Counting the process's heap calls (malloc family) over a window, for the no-heap promise. */
#ifndef STRATA_TOOLS_HEAPCOUNT_H
#define STRATA_TOOLS_HEAPCOUNT_H

/** @brief Start counting heap calls (from any thread). */
void strata_heapcount_start(void);
/** @brief Stop counting; returns the calls seen since start, or -1 when counting is not
 *         available in this build (sanitizers own malloc). With STRATA_HEAPCOUNT_WHO=1 in
 *         the environment, the call chains of the first 4096 calls go to stderr first. */
long strata_heapcount_stop(void);

#endif

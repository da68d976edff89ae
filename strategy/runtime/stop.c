/*
 * The stop request (strata_request_stop()): one flag for the process, set from signal
 * handlers, read between steps (strategy/runtime/api.c) and, in a job of several processes,
 * carried to the others on the step's exchange (the runtime's job, strategy/process/job.c).
 * Each strata_clear_stop() also counts one more clear, so that a job's copy of the stop its
 * processes agreed on before the clear is known to be stale (strata__stop_clears()).
 * Alone in its file, below both.
 */
#include <stdatomic.h>

#include "strata/runtime.h"
#include "strategy/job.h"

static atomic_int stop_flag;
static atomic_uint clears; /* strata_clear_stop() calls so far */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the stop flag must be lock-free (signal handlers)");

void strata_request_stop(void)
{
        atomic_store_explicit(&stop_flag, 1, memory_order_relaxed);
}

int strata_stop_requested(void)
{
        return atomic_load_explicit(&stop_flag, memory_order_relaxed);
}

void strata_clear_stop(void)
{
        atomic_fetch_add_explicit(&clears, 1u, memory_order_relaxed);
        atomic_store_explicit(&stop_flag, 0, memory_order_relaxed);
}

unsigned strata__stop_clears(void)
{
        return atomic_load_explicit(&clears, memory_order_relaxed);
}

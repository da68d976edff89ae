/* What the comm drivers need from the worker pool beyond the public API (internal). */
#ifndef STRATA_KERNEL_WORKERS_INTERNAL_H
#define STRATA_KERNEL_WORKERS_INTERNAL_H

#include "strata/workers.h"

/** Non-zero once a device failed or a wait timed out in the current command. */
int strata__workers_aborted(struct strata_workers *w);

/**
 * Runs that ended in failure so far. A failed run can leave ranks at different points of a
 * collective; a communicator that sees a new epoch restarts its sequence numbers above every
 * old one. Changes only between runs.
 */
unsigned strata__workers_epoch(const struct strata_workers *w);

/** The pool's bound on every wait, in seconds. */
double strata__workers_timeout(const struct strata_workers *w);

/** Non-zero when devices share cores: waiters should yield instead of spinning. */
int strata__workers_oversubscribed(const struct strata_workers *w);

#endif /* STRATA_KERNEL_WORKERS_INTERNAL_H */

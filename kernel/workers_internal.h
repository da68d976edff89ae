/* What the comm drivers need from the worker pool beyond the public API (internal). */
#ifndef STRATA_KERNEL_WORKERS_INTERNAL_H
#define STRATA_KERNEL_WORKERS_INTERNAL_H

#include "strata/workers.h"

/** Non-zero once a device failed or a wait timed out in the current command. */
int strata__workers_aborted(struct strata_workers *w);

/** The pool's bound on every wait, in seconds. */
double strata__workers_timeout(const struct strata_workers *w);

/** Non-zero when devices share cores: waiters should yield instead of spinning. */
int strata__workers_oversubscribed(const struct strata_workers *w);

#endif /* STRATA_KERNEL_WORKERS_INTERNAL_H */

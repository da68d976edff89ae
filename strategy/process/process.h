/*
 * The processes of a job (internal to strategy/): strata_spawn() and launcher detection
 * (launch.c). The job tables that join, count and leave them are job.c's (strategy/job.h);
 * the configuration fingerprint the processes compare is fingerprint.c.
 */
#ifndef STRATA_STRATEGY_PROCESS_PROCESS_H
#define STRATA_STRATEGY_PROCESS_PROCESS_H

#include "strategy/job.h"
#include "strategy/multi.h"

/** In a process strata_spawn() started: its region, rank and size (region NULL elsewhere). */
const struct strata__shm_spawn_where *strata__spawned(void);

#endif /* STRATA_STRATEGY_PROCESS_PROCESS_H */

/*
 * A communicator among the devices of one worker pool (internal to the library): the pool is
 * its failure domain. What the multi-device strategies, the tools and the tests build on.
 */
#ifndef STRATA_DRIVERS_COMM_WORKERS_H
#define STRATA_DRIVERS_COMM_WORKERS_H

#include "strata/comm.h"
#include "kernel/workers.h"

/**
 * @brief A communicator among the devices of worker pool @p w (one process, rank = device),
 *        with the pool as its failure domain, over @p dev's memory (NULL: host memory).
 */
int strata__comm_init_workers(struct strata_comm **c, struct strata_arena *a,
                             struct strata__workers *w, const struct strata_device_ops *dev);

#endif /* STRATA_DRIVERS_COMM_WORKERS_H */

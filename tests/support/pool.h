/* A worker pool and communicator over a mapped arena, for the kernel and driver tests. */
#ifndef STRATA_TESTS_POOL_H
#define STRATA_TESTS_POOL_H

#include "strata/strata.h"
#include "drivers/comm_workers.h"

struct pool {
        struct strata_arena arena;   /* the pool, its communicator, room for a second one */
        struct strata_arena scratch; /* test buffers: pool_alloc(), pool_reset() */
        struct strata__workers *w;
        struct strata_comm *c;
        int n;
};

/** Start @p n devices (timeout @p timeout_s, 0 = default) with a communicator. */
void pool_start(struct pool *p, int n, double timeout_s);
/** Stop and release. */
void pool_stop(struct pool *p);
/** Buffer from the scratch arena. */
void *pool_alloc(struct pool *p, size_t bytes);
/** Forget every scratch buffer. */
void pool_reset(struct pool *p);

#endif

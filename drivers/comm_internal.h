/* The communicator's shared state (internal to drivers/). */
#ifndef STRATA_DRIVERS_COMM_INTERNAL_H
#define STRATA_DRIVERS_COMM_INTERNAL_H

#include <stdatomic.h>

#include "strata/comm.h"

#define STRATA__COMM_MAX 64

/* What each rank published for the current collective, one cache line or more each. */
struct strata__comm_slot {
        _Alignas(64) struct strata_coll op;
        int status;
        atomic_uint ready; /* sequence published: on the descriptor's line, read together */
};

/* Messages up to this size synchronise with sequence flags instead of the pool barrier. */
#define STRATA__COMM_SMALL (64 * 1024)

/* Per rank, on its own cache line: the sequence it has finished. */
struct strata__comm_flags {
        _Alignas(64) atomic_uint done;
        _Alignas(64) unsigned seq; /* collectives this rank has started (private to the rank) */
};

struct strata_comm {
        const struct strata_comm_ops *ops;
        struct strata_workers *w;
        int n;
        int inject_rank, inject_point, inject_status;
        double timeout_s;
        unsigned yield_after; /* spins before yielding the core (few when oversubscribed) */
        const struct strata_device_ops *dev; /* device memory (not host-visible), or NULL */
        struct strata__comm_slot slot[STRATA__COMM_MAX];
        struct strata__comm_flags flag[STRATA__COMM_MAX];
};

extern const struct strata_comm_ops strata__shm_comm;

/* The data movement of a collective, on host memory or through the device driver. */
void strata__comm_reduce(const struct strata_comm *c, const struct strata_coll *op,
                         void *const *dst, int ndst, const void *const *src, int nsrc, size_t lo,
                         size_t hi, int nt);
void strata__comm_copy(const struct strata_comm *c, void *const *dst, int ndst, const void *src,
                       size_t lo, size_t hi, int nt);

#endif /* STRATA_DRIVERS_COMM_INTERNAL_H */

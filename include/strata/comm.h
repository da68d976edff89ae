/*
 * Collectives among the devices of a worker pool.
 *
 * Every device (rank) calls the same collective from its work function with its own buffers
 * (SPMD, as with MPI or NCCL). Arguments are checked in one place; the ranks then agree on
 * them, so when any rank passes a bad argument every rank returns STRATA_EINVAL and nothing is
 * written. Reductions combine values in rank order for every element: the same inputs give
 * bitwise the same outputs on every run, whatever the timing.
 *
 * A comm driver is a `static const struct strata_comm_ops`; the built-in `shm` driver serves
 * devices that share one address space (threads of one process).
 */
#ifndef STRATA_COMM_H
#define STRATA_COMM_H

#include <stddef.h>

#include "strata/arena.h"
#include "strata/tensor.h"
#include "strata/workers.h"

/** Reduction operators. Integer mean truncates toward zero. */
enum strata_reduce_op {
        STRATA_OP_SUM = 0,
        STRATA_OP_MEAN,
        STRATA_OP_MAX,
        STRATA_OP_MIN,
        STRATA_OP_COUNT
};

/** Collective kinds. */
enum strata_coll_kind {
        STRATA_COLL_BARRIER = 0,
        STRATA_COLL_BROADCAST,
        STRATA_COLL_REDUCE,
        STRATA_COLL_ALL_REDUCE,
        STRATA_COLL_ALL_GATHER,
        STRATA_COLL_REDUCE_SCATTER,
        STRATA_COLL_GATHER,
        STRATA_COLL_SCATTER,
        STRATA_COLL_COUNT
};

/**
 * One collective call of one rank. Counts are per rank: all_gather/gather send @c count and
 * receive count * ranks; reduce_scatter/scatter send count * ranks and receive @c count.
 * broadcast uses @c recv as its buffer on every rank. In place: send == recv for all_reduce
 * and reduce; send == recv + rank * count for all_gather and gather.
 */
struct strata_coll {
        enum strata_coll_kind kind;
        const void *send;
        void *recv;
        size_t count;
        enum strata_dtype dtype;
        enum strata_reduce_op op;
        int root;
};

struct strata_comm;

/** A comm driver: one function per collective kind, called after the common checks. */
struct strata_comm_ops {
        const char *name;
        int (*probe)(const char **why);
        int (*run[STRATA_COLL_COUNT])(struct strata_comm *c, int rank,
                                      const struct strata_coll *op);
};

/**
 * @brief Bytes strata_comm_init() takes from its arena for @p ranks ranks (the communicator
 *        and its small-message mailboxes, two of 256 bytes per rank).
 */
int strata_comm_plan(int ranks, size_t *bytes);

/**
 * @brief A communicator over the devices of @p w, using the shared-memory driver.
 * @retval STRATA_OK, STRATA_EINVAL, STRATA_ENOMEM.
 */
int strata_comm_init(struct strata_comm **c, struct strata_arena *a, struct strata_workers *w);

struct strata_device_ops;

/**
 * @brief A communicator whose buffers live in the memory of device driver @p dev (one logical
 *        device per worker), for drivers the host cannot address. The same protocol as
 *        strata_comm_init(), but every rank first waits for its device's queued work (so its
 *        inputs are complete), the data moves with the driver's reduce_many/copy_many, and
 *        every rank waits for its device again before reporting done. Only f32 with sum or
 *        mean is supported (STRATA_ENOTSUP otherwise). A host-visible @p dev (or NULL) gives
 *        a plain host communicator.
 * @retval STRATA_OK, STRATA_EINVAL (driver lacks reduce_many/copy_many), STRATA_ENOMEM.
 */
int strata_comm_init_device(struct strata_comm **c, struct strata_arena *a,
                            struct strata_workers *w, const struct strata_device_ops *dev);

/**
 * @brief Run one collective for @p rank (the single choke point every collective goes through).
 * @retval STRATA_OK; STRATA_EINVAL (this or another rank passed bad arguments; nothing
 *         written); STRATA_EOVERFLOW (count * element size overflows); STRATA_EABORTED or
 *         STRATA_ETIMEDOUT when a device failed or a wait timed out.
 */
int strata_comm_run(struct strata_comm *c, int rank, const struct strata_coll *op);

/** @brief Barrier: returns once every rank has entered it (one meeting of per-rank flags). */
int strata_comm_barrier(struct strata_comm *c, int rank);
/** @brief Broadcast @p count elements of @p buf from @p root. */
int strata_comm_broadcast(struct strata_comm *c, int rank, void *buf, size_t count,
                          enum strata_dtype dt, int root);
/** @brief Reduce into @p recv of @p root (recv may be NULL on other ranks). */
int strata_comm_reduce(struct strata_comm *c, int rank, const void *send, void *recv,
                       size_t count, enum strata_dtype dt, enum strata_reduce_op op, int root);
/**
 * @brief All-reduce; send == recv for in place. Up to 256 bytes per rank on host memory the
 *        inputs go through per-rank mailboxes and the call needs one meeting instead of two;
 *        the result is bitwise the same either way (ranks combined in rank order).
 */
int strata_comm_all_reduce(struct strata_comm *c, int rank, const void *send, void *recv,
                           size_t count, enum strata_dtype dt, enum strata_reduce_op op);
/** @brief All-gather: recv holds count * ranks elements, rank r's at r * count. */
int strata_comm_all_gather(struct strata_comm *c, int rank, const void *send, void *recv,
                           size_t count, enum strata_dtype dt);
/** @brief Reduce-scatter: send holds count * ranks; rank r receives the reduced r-th block. */
int strata_comm_reduce_scatter(struct strata_comm *c, int rank, const void *send, void *recv,
                               size_t count, enum strata_dtype dt, enum strata_reduce_op op);
/** @brief Gather to @p root (recv may be NULL on other ranks). */
int strata_comm_gather(struct strata_comm *c, int rank, const void *send, void *recv,
                       size_t count, enum strata_dtype dt, int root);
/** @brief Scatter from @p root (send may be NULL on other ranks). */
int strata_comm_scatter(struct strata_comm *c, int rank, const void *send, void *recv,
                        size_t count, enum strata_dtype dt, int root);
/**
 * @brief Agree on a boolean: *out = all ranks' flags true (@p all) or any true (!@p all).
 */
int strata_comm_reduce_boolean(struct strata_comm *c, int rank, int flag, int all, int *out);

/**
 * @brief Tests: make @p rank fail with @p status when it reaches step @p point (0-based) of
 *        the next collectives; rank -1 disables. Points: 0 after the arguments are published,
 *        1 after the ranks agreed, 2 after the data moved.
 */
void strata_comm_inject(struct strata_comm *c, int rank, int point, int status);

#endif /* STRATA_COMM_H */

/*
 * Collectives among ranks: a communicator and the one protocol every collective follows.
 *
 * A communicator knows its ranks by number only: the world size, and the ranks this process
 * serves (local ranks 0..local_size-1, global rank = rank0 + local rank). It does not know
 * what drives a rank (a pinned worker thread today); it learns of failures through a failure
 * domain (struct strata_group). Every rank calls the same collective with its own buffers
 * (SPMD, as with MPI or NCCL). Arguments are checked in one place; the ranks then agree on
 * them, so when any rank passes a bad argument every rank returns STRATA_EINVAL and nothing is
 * written. Reductions combine values in global rank order for every element: the same inputs
 * give bitwise the same outputs on every run, however the ranks are spread.
 *
 * The protocol (checks, agreement, eager small messages, sequence numbers) is separate from
 * the transport that moves the data, a private `const` ops table chosen at init from the
 * transports that accept the configuration (today `shm`: ranks that share one address space).
 */
#ifndef STRATA_COMM_H
#define STRATA_COMM_H

#include <stddef.h>

#include "strata/arena.h"
#include "strata/tensor.h"
#include "strata/group.h"

#ifdef __cplusplus
extern "C" {
#endif

struct strata_device_ops;
struct strata_net;

/**
 * Reduction operators. Integer mean truncates toward zero. STRATA_OP_SUM (and MEAN) of f32
 * and f64 add the ranks in an order fixed by the world size W alone: up to 4 ranks in rank
 * order ((r0 + r1) + r2 ...); from 5, in the order of recursive halving (W = 2^k + r: the
 * first r pairs (r0 + r1), ..., then the balanced pairwise tree over the 2^k partial sums;
 * docs/decisions/0035), so that a schedule across processes has log W depth; bf16 and f16
 * accumulate in f32 in rank order. STRATA_OP_SUM_TREE adds them pairwise over rank indices,
 * ((r0 + r1) + (r2 + r3)) for four (for a count not a power of two: the largest power of two
 * first, the rest as its own tree), so a sum over 2^k ranks is the top of one balanced tree
 * (invariant mode); f32, f64 and integers only.
 */
enum strata_reduce_op {
        STRATA_OP_SUM = 0,
        STRATA_OP_MEAN,
        STRATA_OP_MAX,
        STRATA_OP_MIN,
        STRATA_OP_SUM_TREE,
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

/** What a communicator is made of. Start from STRATA_COMM_CONFIG_INIT. */
struct strata_comm_config {
        int world_size;   /**< ranks in the communicator, every process counted */
        int rank0;        /**< global rank of this process's local rank 0 */
        int local_size;   /**< ranks this process serves (1..STRATA_MAX_DEVICES) */
        /** The failure domain of the local ranks (required): aborts, timeouts. */
        const struct strata_group *group;
        /**
         * The memory the buffers live in: NULL or a driver without reserve() for host
         * memory; a driver that reserves its own device memory for that. Then every rank first
         * waits for its device's queued work (its inputs are complete), the data moves with
         * the driver's reduce_many/copy_many, every rank waits for its device again before
         * reporting done, and only f32 sum and mean are supported (STRATA_ENOTSUP otherwise).
         */
        const struct strata_device_ops *dev;
        /**
         * The link to the other processes when world_size > local_size (made by the mpi and
         * spawn strategies; NULL otherwise). Every process must serve the same number of
         * ranks, and rank0 = process rank x local_size.
         */
        struct strata_net *net;
};

#define STRATA_COMM_CONFIG_INIT { 1, 0, 1, NULL, NULL, NULL }

/**
 * @brief Bytes strata_comm_init() takes from its arena for @p local_size local ranks (the
 *        communicator and its small-message mailboxes, two of 256 bytes per rank).
 */
int strata_comm_plan(int local_size, size_t *bytes);

/**
 * @brief Bytes strata_comm_init() takes from its arena for @p cfg: strata_comm_plan()'s, and
 *        when the ranks span processes two staging blocks of 1 MiB + 64 bytes per process
 *        (one receives the next exchange while the other is read) and one for its own.
 */
int strata_comm_plan_config(const struct strata_comm_config *cfg, size_t *bytes);

/**
 * @brief A communicator for @p cfg, on the first transport that accepts it.
 * @retval STRATA_OK; STRATA_EINVAL (a field out of range, no group, a device driver without
 *         reduce_many/copy_many); STRATA_ENOTSUP (no transport spans the configuration, e.g.
 *         ranks in several processes); STRATA_ENOMEM (arena).
 */
int strata_comm_init(struct strata_comm **c, struct strata_arena *a,
                     const struct strata_comm_config *cfg);

/** @brief Ranks in the communicator, every process counted (0 for NULL). */
int strata_comm_world_size(const struct strata_comm *c);

/** @brief Ranks this process serves (0 for NULL). */
int strata_comm_local_size(const struct strata_comm *c);

/** @brief Global rank of local rank @p local (-1 when out of range). */
int strata_comm_rank(const struct strata_comm *c, int local);

/** @brief Name of the transport the communicator runs on ("shm"). */
const char *strata_comm_transport(const struct strata_comm *c);

/**
 * @brief The elements [*lo, *hi) of a reduction of @p count elements of @p es bytes whose
 *        result local rank @p local computes (the transport's split; the whole range when it
 *        does not split), so a caller can go on with data already in that rank's cache.
 */
void strata_comm_slice(const struct strata_comm *c, size_t count, size_t es, int local,
                       size_t *lo, size_t *hi);

/**
 * @brief Run one collective for local rank @p rank (the single choke point every collective
 *        goes through). The rank arguments of the calls below are local ranks too.
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

#ifdef __cplusplus
}
#endif

#endif /* STRATA_COMM_H */

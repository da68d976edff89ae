/* The communicator's shared state and the transport interface (internal to drivers/). */
#ifndef STRATA_DRIVERS_COMM_INTERNAL_H
#define STRATA_DRIVERS_COMM_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "strata/comm.h"
#include "base/faults.h"

/*
 * What a rank published for one collective, on one cache line with its sequence flag so a peer
 * reads both together. Each rank has two, used by sequence parity: a rank that has left an
 * eager collective may publish its next one while slower peers still read this one.
 */
struct strata__comm_slot {
        _Alignas(64) struct strata_coll op;
        int status;
        _Atomic uint64_t ready; /* sequence published */
};

/*
 * Eager path: an all_reduce of at most this many bytes per rank (host memory) copies its input
 * into the rank's mailbox before the one meeting, and every rank then reduces all mailboxes
 * itself, so nobody reads a peer's own buffer and no second meeting is needed.
 */
#define STRATA__COMM_EAGER ((size_t)256)

/*
 * Per rank, on its own cache line: the sequence it has finished, and how many peers sleep on
 * this rank's flags (its done and its slots' ready): the rank wakes them after each store.
 */
struct strata__comm_flags {
        _Alignas(64) _Atomic uint64_t done;
        atomic_uint sleepers;
        _Alignas(64) uint64_t seq; /* collectives this rank has started (private to the rank) */
        unsigned epoch;            /* the group's failure epoch that seq counts in */
        /*
         * The checked reduce-scatter over blocks and all-reduce (comm_blocks.h, decisions 0104
         * and 0110), private to the rank like seq: check asks the move to check what it sums,
         * which sets checked (it did) and nonfinite (a value it stored is not); span counts the
         * spans of the checked calls since the last take, missed that one went unchecked.
         */
        size_t span;
        unsigned char check, checked, nonfinite, missed;
};

struct strata_comm;

/*
 * A transport: how the data of an agreed collective moves between the ranks (NCCL's
 * transports: each an ops table, the first whose probe accepts a configuration is used).
 * run[kind] moves local rank @p rank's share of the data after every rank has published its
 * descriptor and all agreed; reductions must combine ranks in global rank order.
 */
struct strata__transport {
        const char *name;
        /* Non-zero when the transport can serve @p cfg; @p why gets a reason otherwise. */
        int (*probe)(const struct strata_comm_config *cfg, const char **why);
        /*
         * Optional: bytes of the transport's own state for a communicator of @p cfg, planned
         * whatever transport is picked (0: it would not serve @p cfg); init() gets them.
         */
        size_t (*state_bytes)(const struct strata_comm_config *cfg);
        /* Optional: check @p cfg and set up the state at @p mem (c->tp_state). */
        int (*init)(struct strata_comm *c, const struct strata_comm_config *cfg, void *mem);
        /*
         * Every collective, on every local rank, after the local agreement whatever its
         * @p status (a transport across processes must tell the others of it): move local
         * rank @p rank's share of the data; reductions combine ranks in global rank order.
         */
        int (*move)(struct strata_comm *c, int rank, const struct strata_coll *op, int status);
        /*
         * Optional: what local rank @p rank returns after the second meeting, given its own
         * @p rc; a transport whose move ran on one local rank for all (across processes) tells
         * the others there how it ended, e.g. that another process refused the arguments.
         */
        int (*settle)(struct strata_comm *c, int rank, int rc);
        /* Non-zero: a barrier or small all_reduce may end at the first meeting (mailboxes). */
        int eager;
        /*
         * Non-zero: local rank 0's move waits for other processes, bounded by the timeout; the
         * other local ranks then wait twice the timeout at the second meeting, so that the
         * error reported names the process that did not arrive, not local rank 0.
         */
        int remote;
        /* The part [lo, hi) of a reduction's result that local rank @p rank computes. */
        void (*slice)(size_t count, size_t es, int n, int rank, size_t *lo, size_t *hi);
};

struct strata_comm {
        const struct strata__transport *tp;
        struct strata_group group;
        int n;                /* local ranks */
        int world, rank0;     /* global view */
        struct strata__faults *faults; /* a test's injected failure (base/faults.h), or NULL */
        unsigned yield_after; /* spins before yielding the core (few when oversubscribed) */
        const struct strata_device_ops *dev; /* a driver with memory of its own, or NULL */
        unsigned char *mail;  /* n ranks x 2 parities x STRATA__COMM_EAGER bytes */
        void *tp_state;       /* the transport's own state (state_bytes), or NULL */
        struct strata__comm_slot slot[STRATA_MAX_DEVICES][2];
        struct strata__comm_flags flag[STRATA_MAX_DEVICES];
};

/* What rank @p r published for the collective that @p rank is running now. */
static inline const struct strata_coll *strata__comm_peer(const struct strata_comm *c, int rank,
                                                           int r)
{
        return &c->slot[r][c->flag[rank].seq & 1].op;
}

/*
 * Collectives over blocks (internal; docs/decisions/0045): a span [lo, lo + count) of a vector
 * cut in blocks of @c block elements, block g owned by global rank g (the ZeRO shards). Rank
 * g's piece of the span is its block's part of it, elements [a_g, e_g) of the span (empty
 * when the block misses it); the pieces lie in rank order, one after the other.
 *
 * - STRATA__COLL_RS_BLOCKS: every rank sends the whole span (count elements); rank g receives
 *   the sum of its piece (e_g - a_g elements). In place: recv == send + a_g. Each element is
 *   summed in the world's order, as strata_comm_reduce sums it, so one call gives the bits of
 *   one reduce per piece.
 * - STRATA__COLL_AG_BLOCKS: rank g sends its piece (e_g - a_g elements); every rank receives
 *   the whole span. In place: send == recv + a_g.
 *
 * The geometry travels in the rank's mailbox of the call's parity (the eager path's, unused by
 * these kinds), so struct strata_coll stays one cache line with its flag.
 */
enum {
        STRATA__COLL_RS_BLOCKS = STRATA_COLL_COUNT,
        STRATA__COLL_AG_BLOCKS,
        STRATA__COLL_KINDS
};

struct strata__blocks {
        size_t lo, block;
};

static inline int strata__coll_blocks(int kind)
{
        return kind == STRATA__COLL_RS_BLOCKS || kind == STRATA__COLL_AG_BLOCKS;
}

/* The geometry local rank @p r published for the call local rank @p rank is running now. */
static inline const struct strata__blocks *strata__comm_blocks(const struct strata_comm *c,
                                                               int rank, int r)
{
        return (const struct strata__blocks *)(const void *)(c->mail +
                ((size_t)r * 2 + (size_t)(c->flag[rank].seq & 1)) * STRATA__COMM_EAGER);
}

/* Global rank @p g's piece [*a, *e) of a span of @p count elements (span coordinates). */
static inline void strata__blocks_piece(const struct strata__blocks *b, size_t count, int g,
                                        size_t *a, size_t *e)
{
        size_t x = (size_t)g * b->block, y = x + b->block, hi = b->lo + count;

        x = x < b->lo ? b->lo : x > hi ? hi : x;
        y = y < b->lo ? b->lo : y > hi ? hi : y;
        *a = x - b->lo;
        *e = y - b->lo;
}

/* The first global rank whose piece holds span element @p i (i < count). */
static inline int strata__blocks_owner(const struct strata__blocks *b, size_t i)
{
        return (int)((b->lo + i) / b->block);
}

/*
 * drivers/comm.c: run a collective over blocks for local rank @p rank (the choke point's
 * checks, agreement and meetings, as strata_comm_run()).
 */
int strata__comm_run_blocks(struct strata_comm *c, int rank, const struct strata_coll *op,
                            const struct strata__blocks *geo);

/*
 * drivers/comm_move.c: the kernel operator that sums @p op of @p dt over a world of @p world
 * ranks in the order that world size fixes (include/strata/comm.h, docs/decisions/0035): f32/f64
 * sums and means of STRATA__HALVING_FROM ranks or more in the order of recursive halving;
 * everything else as asked.
 */
#define STRATA__HALVING_FROM 5

int strata__comm_world_op(int op, enum strata_dtype dt, int world);

/* drivers/registry.c: the first transport whose probe accepts @p cfg (NULL: *why says why). */
const struct strata__transport *strata__transport_pick(const struct strata_comm_config *cfg,
                                                       const char **why);

/* drivers/registry.c: the most state any transport would take for @p cfg (the plan's part). */
size_t strata__transport_state_bytes(const struct strata_comm_config *cfg);

/* drivers/comm_move.c: the data movement of a collective, on host memory or through the
 * device driver. */
void strata__comm_reduce(const struct strata_comm *c, const struct strata_coll *op,
                         void *const *dst, int ndst, const void *const *src, int nsrc, size_t lo,
                         size_t hi, int nt);
void strata__comm_copy(const struct strata_comm *c, void *const *dst, int ndst, const void *src,
                       size_t lo, size_t hi, int nt);
/*
 * strata__comm_reduce() into the one @p dst, for local rank @p rank's part of a checked
 * reduce-scatter over blocks: also records in its flags whether a value stored is not finite
 * (strata__reduce_many_check()), or that it could not check (device memory, not f32).
 */
void strata__comm_reduce_check(struct strata_comm *c, int rank, const struct strata_coll *op,
                               void *dst, const void *const *src, int nsrc, size_t lo, size_t hi,
                               int nt);

#ifdef STRATA_TESTING
/**
 * Tests only: make @p rank fail with @p status when it reaches step @p point (0-based) of the
 * next collectives; rank -1 disables. Points: 0 after the arguments are published, 1 after
 * the ranks agreed, 2 after the data moved.
 */
void strata__comm_inject(struct strata_comm *c, int rank, int point, int status);
#endif

#endif /* STRATA_DRIVERS_COMM_INTERNAL_H */

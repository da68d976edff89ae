/*
 * The net transport's parts (internal to drivers/net/): its state, the header every step
 * carries, the messages of one step, and what each file offers the others. Bottom to top, each
 * file using only those before it:
 *
 * - step.c: one step over the link (strata__net_step), and the direct exchange of one step
 *   with every other process, whose headers every process checks;
 * - direct.c: the direct schedules, for 2 to 4 processes;
 * - butterfly.c: the butterfly every collective of 5 processes or more starts with, and the
 *   schedules that follow it;
 * - blocks.c: collectives over blocks (docs/decisions/0045), direct and over the butterfly;
 * - net.c: the transport (its table, state and warm-up), the native reductions, and which
 *   schedule each collective takes.
 */
#ifndef STRATA_DRIVERS_NET_NET_INTERNAL_H
#define STRATA_DRIVERS_NET_NET_INTERNAL_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "strata/comm.h"
#include "drivers/comm_internal.h"
#include "drivers/net.h"

/* The transport's own state, in the first two cache lines of its memory; the staging follows. */
struct strata__net_state {
        struct strata_net *net;
        unsigned char *link;  /* STRATA__NET_STAGE bytes: the link's */
        unsigned char *pack;  /* STRATA__NET_DATA: this process's local ranks' data, packed */
        unsigned char *in;    /* IN_BYTES (net.c): messages received */
        unsigned char *acc;   /* STRATA__NET_DATA: partial sums, a region per local rank */
        unsigned char *res;   /* STRATA__NET_DATA: a round's result */
        uint64_t seq;         /* steps so far */
        uint64_t msgs, bytes; /* messages and data bytes sent so far */
        int result[2]; /* local rank 0's move, by the collective's parity, for the others */
        /*
         * The flags a step's exchanges carry in the top bits of each header's seq (decision
         * 0108): this process's, ORed in by its devices; every peer's that a direct exchange
         * brought (local rank 0's); direct exchanges since the last of this process's ORs;
         * the ORs since the flags were set.
         */
        _Atomic uint32_t carry;
        uint32_t carry_in;
        _Atomic uint32_t carried, ors;
};

/* The bits of a header's seq that count steps; the 16 above carry the flags (decision 0108). */
#define STRATA__NET_SEQ_BITS 48
#define STRATA__NET_SEQ_MASK (((uint64_t)1 << STRATA__NET_SEQ_BITS) - 1)

static inline struct strata__net_state *strata__net_st(const struct strata_comm *c)
{
        return c->tp_state;
}

/* The arguments every process must agree on, at the start of each block. */
struct strata__net_head {
        uint64_t seq;   /* steps so far: messages from another call are refused (48 bits) */
        uint64_t count;
        int32_t kind, dtype, op, root, status, ranks;
        int32_t bad;    /* butterfly: a refusal seen so far (STRATA_EINVAL), else 0 */
        int32_t who;    /* ...by or between which process */
        uint64_t lo, block; /* a collective over blocks: its geometry (else 0) */
};
_Static_assert(sizeof(struct strata__net_head) <= STRATA__NET_HEAD,
               "the block header is 64 bytes");

/* Elements of each of @p ways pieces of one exchange's data, whole cache lines each so slices
 * stay aligned. */
static inline size_t strata__net_per_share(size_t es, size_t ways)
{
        size_t per = STRATA__NET_DATA / ways / 64 * 64 / es;

        return per ? per : 1;
}

/* Elements of each rank in one exchange: the block's data split among the local ranks. */
static inline size_t strata__net_per_round(const struct strata_comm *c, size_t es)
{
        return strata__net_per_share(es, (size_t)c->n);
}

/* ---- step.c: the step primitive ---- */

/* The messages of one step. */
struct strata__net_msgs {
        struct strata__net_msg s[STRATA__NET_MSGS], r[STRATA__NET_MSGS];
        int ns, nr;
};

static inline void strata__net_to(struct strata__net_msgs *x, int peer, const void *data,
                                  size_t bytes)
{
        x->s[x->ns++] = (struct strata__net_msg){ .peer = peer, .data = data, .bytes = bytes };
}

static inline void strata__net_from(struct strata__net_msgs *x, int peer, void *into,
                                    size_t bytes)
{
        x->r[x->nr++] = (struct strata__net_msg){ .peer = peer, .into = into, .bytes = bytes };
}

/* One step of this call with header @p h (its seq the step's number); counts what it sent. */
int strata__net_step(struct strata_comm *c, struct strata__net_head *h,
                     struct strata__net_msgs *x);

/* Whether header @p o, from another process, agrees with this call's @p h. */
int strata__net_agrees(const struct strata__net_head *h, const struct strata__net_head *o);

/*
 * One direct step of this call: header @p h, and out[p] (len[p] bytes) to each other process
 * p; in[p] then points at what process p sent this one. Checks every header: every process
 * sees every other's, so all reach the same verdict.
 */
int strata__net_exchange_to(struct strata_comm *c, struct strata__net_head *h,
                            const void *const *out, const size_t *len, const unsigned char **in);

/* The same @p bytes of @p mine to every process; in[rank] is @p mine. */
int strata__net_exchange(struct strata_comm *c, struct strata__net_head *h, const void *mine,
                         size_t bytes, const unsigned char **in);

/* ---- direct.c: 2 to 4 processes, after the local agreement ---- */

/* all_reduce and reduce, every rank's slice of each round to every process. */
int strata__net_reduce_rounds(struct strata_comm *c, const struct strata_coll *op,
                              struct strata__net_head *h);
/* Large all-reduces, each process reducing its part of each round. */
int strata__net_split_rounds(struct strata_comm *c, const struct strata_coll *op,
                             struct strata__net_head *h);
/* broadcast, all_gather and gather. */
int strata__net_copy_rounds(struct strata_comm *c, const struct strata_coll *op,
                            struct strata__net_head *h);
/* reduce_scatter. */
int strata__net_rs_rounds(struct strata_comm *c, const struct strata_coll *op,
                          struct strata__net_head *h);
/* scatter. */
int strata__net_scatter_rounds(struct strata_comm *c, const struct strata_coll *op,
                               struct strata__net_head *h);

/* ---- butterfly.c: 5 processes or more ---- */

/* The world as recursive halving sees it: W = q + r ranks, q = 2^k. */
struct strata__net_world {
        int W, q, r, k;
        int n, g0, me; /* local ranks, the first's global rank, this process */
        size_t lane;   /* bytes of acc and in per local rank */
};

struct strata__net_world strata__net_world_of(const struct strata_comm *c);

/* Virtual rank of global rank @p g (-1: the odd rank of one of the first r pairs), and back. */
static inline int strata__net_vrank(const struct strata__net_world *w, int g)
{
        if (g >= 2 * w->r)
                return g - w->r;
        return g & 1 ? -1 : g / 2;
}

static inline int strata__net_grank(const struct strata__net_world *w, int v)
{
        return v < w->r ? 2 * v : v + w->r;
}

static inline int strata__net_is_local(const struct strata__net_world *w, int g)
{
        return g >= w->g0 && g < w->g0 + w->n;
}

/* A reduction riding on a schedule: elements [0, m) from each local rank's @p src. */
struct strata__net_red {
        enum strata_dtype dt;
        int cop; /* how two partial sums combine */
        size_t es, m;
        const unsigned char *src[STRATA_MAX_DEVICES];
        const unsigned char *cur[STRATA_MAX_DEVICES]; /* each virtual rank's partial sums */
};

/* A butterfly step's messages: local rank @p l sends @p bytes of @p data to global rank @p g
 * (when in another process) and receives up to its lane from it. */
void strata__net_swap(struct strata__net_msgs *x, const struct strata__net_world *w,
                      struct strata__net_state *s, int l, int g, const void *data, size_t bytes,
                      int *rix);

/* dst[0..nd) over [a, b) = lower + upper, pointers at element 0 of the round. */
void strata__net_combine(const struct strata__net_red *d, unsigned char *const *dst, int nd,
                         const unsigned char *lower, const unsigned char *upper, size_t a,
                         size_t b);

/* The first r pairs fold: each odd rank's data to its even one, which sums (even + odd). */
int strata__net_pre_step(struct strata_comm *c, struct strata__net_head *h,
                         const struct strata__net_world *w, struct strata__net_red *d);

/*
 * The butterfly every collective of 5 processes or more starts with; with @p d, a small
 * reduction rides on it and *sum points at its result. The verdict is the same everywhere.
 */
int strata__net_butterfly(struct strata_comm *c, struct strata__net_head *h,
                          struct strata__net_red *d, const unsigned char **sum);

/* A large reduction's round; the sum in res (or where the post step left it: *sum). */
int strata__net_tree_round(struct strata_comm *c, struct strata__net_head *h,
                           struct strata__net_red *d, const unsigned char **sum);

/* Whether the butterfly can sum @p op in the world's order. */
int strata__net_tree_op(const struct strata_coll *op, int world);

void strata__net_red_init(struct strata__net_red *d, const struct strata_comm *c,
                          const struct strata_coll *op);

/* Elements [0, m) of @p sum into @p out: copied, or divided by the world for a mean. */
void strata__net_deliver(const struct strata_coll *op, int world, void *out, const void *sum,
                         size_t m);

/* A reduction's result for elements [lo, lo + m): every local rank's, or the root's. */
void strata__net_finish(struct strata_comm *c, const struct strata_coll *op,
                        const unsigned char *sum, size_t lo, size_t m);

/* After the butterfly agreed: all_reduce and reduce; reduce_scatter; broadcast; scatter;
 * all_gather and gather. */
int strata__net_tree_reduce(struct strata_comm *c, const struct strata_coll *op,
                            struct strata__net_head *h);
int strata__net_tree_reduce_scatter(struct strata_comm *c, const struct strata_coll *op,
                                    struct strata__net_head *h);
int strata__net_tree_broadcast(struct strata_comm *c, const struct strata_coll *op,
                               struct strata__net_head *h);
int strata__net_tree_scatter(struct strata_comm *c, const struct strata_coll *op,
                             struct strata__net_head *h);
int strata__net_tree_gather(struct strata_comm *c, const struct strata_coll *op,
                            struct strata__net_head *h);

/* ---- blocks.c: collectives over blocks ---- */

/* Direct (2 to 4 processes): the reduce-scatter and the all-gather over blocks. */
int strata__net_rsb_direct(struct strata_comm *c, const struct strata_coll *op,
                           struct strata__net_head *h);
int strata__net_agb_direct(struct strata_comm *c, const struct strata_coll *op,
                           struct strata__net_head *h);

/* After the butterfly agreed (5 processes or more): the same two. */
int strata__net_tree_rs_blocks(struct strata_comm *c, const struct strata_coll *op,
                               struct strata__net_head *h);
int strata__net_tree_ag_blocks(struct strata_comm *c, const struct strata_coll *op,
                               struct strata__net_head *h);

#endif /* STRATA_DRIVERS_NET_NET_INTERNAL_H */

/*
 * The `net` transport: a communicator whose ranks live in several processes, joined by a link
 * (drivers/net.h). Inside a process the ranks meet as always (drivers/comm.c); then local rank
 * 0 alone talks to the other processes, on behalf of all its local ranks, while they wait at
 * the protocol's second meeting.
 *
 * Two families of schedules, both made of link steps (step.c; docs/decisions/0035): direct, for
 * 2 to 4 processes, one step reaching every peer (direct.c); the butterfly, from 5 processes,
 * schedules of depth log P (butterfly.c); and for collectives over blocks, one of each
 * (blocks.c). This file is the transport: its table and state, the native reductions, and the
 * choice of schedule for each collective (net_move). drivers/net/link.h lists the
 * parts, bottom to top.
 *
 * Reductions combine every element in the order the world size fixes (strata__comm_world_op):
 * for f32/f64 sums of 5 ranks or more, recursive halving's; otherwise rank order. Both
 * schedules give the bits of one process's shm transport, whatever the split (P=1,D=8; P=2,D=4;
 * P=8,D=1 alike). Processes that disagree, or one whose ranks passed bad arguments, make every
 * rank return STRATA_EINVAL with nothing written (the local ranks that waited learn local rank
 * 0's result after the second meeting, net_settle()).
 *
 * Self-contained behind the transport table: its state (the link, the staging, the step count)
 * lives in memory the communicator plans for it (state_bytes, init), the same for any number
 * of processes; its move runs for every collective, so the protocol layer has no mode for
 * processes; it declines the eager path, since the other processes must be met in every
 * collective.
 */
#include <stdint.h>
#include <string.h>

#include "strata/device.h"
#include "strata/status.h"
#include "arch/reduce.h"
#include "base/base.h"
#include "drivers/net/link.h"

/* Where messages land: a direct step receives up to STRATA__NET_DATA from each of 3 peers. */
#define IN_BYTES ((size_t)(STRATA__NET_DIRECT - 1) * STRATA__NET_DATA)

/* The transport's own state, in the first two cache lines of its memory; the staging follows. */
#define STATE 128
_Static_assert(sizeof(struct strata__net_state) <= STATE, "the state is two cache lines");

static int net_probe(const struct strata_comm_config *cfg, const char **why)
{
        if (cfg->net && cfg->world_size > cfg->local_size)
                return 1;
        if (why && cfg->world_size > cfg->local_size)
                *why = "ranks in several processes need a link (strategy mpi or spawn)";
        return 0;
}

/*
 * A communicator spanning processes: the state, then the link's staging, the packed data, the
 * landing area, the partial sums and the result; the same for any number of processes.
 */
static size_t net_state_bytes(const struct strata_comm_config *cfg)
{
        return cfg->world_size > cfg->local_size
                       ? STATE + STRATA__NET_STAGE + 3 * STRATA__NET_DATA + IN_BYTES
                       : 0;
}

static int net_init(struct strata_comm *c, const struct strata_comm_config *cfg, void *mem)
{
        struct strata__net_state *s = mem;

        if (cfg->net->size != cfg->world_size / cfg->local_size ||
            cfg->net->rank != cfg->rank0 / cfg->local_size)
                return strata__fail(STRATA_EINVAL, "comm init: the link joins %d processes "
                                                   "(this one %d), the configuration %d",
                                    cfg->net->size, cfg->net->rank,
                                    cfg->world_size / cfg->local_size);
        if (c->dev)
                return strata__fail(STRATA_ENOTSUP, "comm init: %s memory across processes",
                                    c->dev->name);
        *s = (struct strata__net_state){ .net = cfg->net, .link = (unsigned char *)mem + STATE };
        s->pack = s->link + STRATA__NET_STAGE;
        s->in = s->pack + STRATA__NET_DATA;
        s->acc = s->in + IN_BYTES;
        s->res = s->acc + STRATA__NET_DATA;
        return STRATA_OK;
}

/* All-reduces from this size on are split among the processes (two exchanges, half the bytes). */
#define SPLIT_MIN ((size_t)64 << 10)

/*
 * Native reductions (MPI_Allreduce): local ranks in order, then the link's own algorithm. The
 * arguments are agreed within each process only (no exchange of headers: this mode is for
 * speed); across processes the link's own checks apply.
 */
static int reduce_native(struct strata_comm *c, const struct strata_coll *op)
{
        size_t es = strata_dtype_size(op->dtype), per = STRATA__NET_DATA / es;
        const void *src[STRATA_MAX_DEVICES];
        void *dst[STRATA_MAX_DEVICES];
        struct strata_net *net = strata__net_st(c)->net;
        unsigned char *acc = strata__net_st(c)->pack;

        if (c->n == 1) { /* in the rank's own buffer, 1 MiB at a time (faster than at once) */
                const struct strata_coll *o = strata__comm_peer(c, 0, 0);
                unsigned char *buf = o->recv;

                if (o->send != o->recv)
                        memcpy(buf, o->send, op->count * es);
                for (size_t lo = 0; lo < op->count; lo += per)
                        STRATA_TRY(net->ops->native_all_reduce(
                                net, buf + lo * es, op->count - lo < per ? op->count - lo : per,
                                op->dtype, op->op, c->group.timeout_s));
                return STRATA_OK;
        }
        for (int r = 0; r < c->n; r++) {
                src[r] = strata__comm_peer(c, 0, r)->send;
                dst[r] = strata__comm_peer(c, 0, r)->recv;
        }
        for (size_t lo = 0; lo < op->count; lo += per) {
                size_t hi = op->count - lo < per ? op->count : lo + per;
                void *one[1] = { acc - lo * es };

                strata__reduce_many(op->dtype, (int)op->op, one, 1, src, c->n, lo, hi, 0);
                STRATA_TRY(net->ops->native_all_reduce(net, acc, hi - lo, op->dtype, op->op,
                                                       c->group.timeout_s));
                strata__copy_many(dst, c->n, acc - lo * es, lo * es, hi * es, 0);
        }
        return STRATA_OK;
}

/* Small reductions ride on the butterfly (recursive doubling) up to this many bytes. */
#define TREE_SMALL ((size_t)32 << 10)

/* Every collective of 5 processes or more: the butterfly, then the kind's schedule. */
static int tree_move(struct strata_comm *c, const struct strata_coll *op,
                     struct strata__net_head *h)
{
        size_t es = strata_dtype_size(op->dtype);
        int reduction = op->kind == STRATA_COLL_ALL_REDUCE || op->kind == STRATA_COLL_REDUCE;
        int ok = h->status == STRATA_OK && op->kind != STRATA_COLL_BARRIER && op->count;
        int small = ok && reduction && strata__net_tree_op(op, c->world) &&
                    op->count * es <= TREE_SMALL && op->count * es <= strata__net_world_of(c).lane;
        const unsigned char *sum;
        struct strata__net_red d;

        if (h->status != STRATA_OK) {
                h->bad = h->status;
                h->who = strata__net_st(c)->net->rank;
        }
        if (small) {
                strata__net_red_init(&d, c, op);
                d.m = op->count;
                for (int r = 0; r < c->n; r++)
                        d.src[r] = strata__comm_peer(c, 0, r)->send;
        }
        STRATA_TRY(strata__net_butterfly(c, h, small ? &d : NULL, &sum));
        if (small)
                strata__net_finish(c, op, sum, 0, op->count);
        if (small || !ok)
                return STRATA_OK;
        if ((reduction || op->kind == STRATA_COLL_REDUCE_SCATTER ||
             (int)op->kind == STRATA__COLL_RS_BLOCKS) && !strata__net_tree_op(op, c->world))
                return strata__fail(STRATA_ENOTSUP, "net: %s reductions across more than %d "
                                    "processes (docs/decisions/0035)",
                                    op->op == STRATA_OP_SUM_TREE ? "pairwise-tree"
                                                                 : "half-precision",
                                    STRATA__NET_DIRECT);
        switch ((int)op->kind) {
        case STRATA__COLL_RS_BLOCKS:
                return strata__net_tree_rs_blocks(c, op, h);
        case STRATA__COLL_AG_BLOCKS:
                return strata__net_tree_ag_blocks(c, op, h);
        case STRATA_COLL_ALL_REDUCE:
        case STRATA_COLL_REDUCE:
                return strata__net_tree_reduce(c, op, h);
        case STRATA_COLL_REDUCE_SCATTER:
                return strata__net_tree_reduce_scatter(c, op, h);
        case STRATA_COLL_BROADCAST:
                return strata__net_tree_broadcast(c, op, h);
        case STRATA_COLL_SCATTER:
                return strata__net_tree_scatter(c, op, h);
        default:
                return strata__net_tree_gather(c, op, h);
        }
}

/*
 * Every collective of a communicator that spans processes, on every local rank, after the
 * local agreement (@p status). Local rank 0 does the exchanges for all; the others' buffers are
 * read and written through the descriptors they published, and they wait at the second meeting.
 */
static int net_move(struct strata_comm *c, int rank, const struct strata_coll *op, int status)
{
        struct strata__net_head h = { .seq = 0, .count = op->count, .kind = (int32_t)op->kind,
                                      .dtype = (int32_t)op->dtype, .op = (int32_t)op->op,
                                      .root = (int32_t)op->root, .status = (int32_t)status,
                                      .ranks = (int32_t)c->n };
        const unsigned char *data[STRATA__NET_DIRECT];
        int rc;

        if (rank != 0)
                return status;
        if (strata__coll_blocks((int)op->kind)) {
                h.lo = strata__comm_blocks(c, 0, 0)->lo;
                h.block = strata__comm_blocks(c, 0, 0)->block;
        }
        if (status == STRATA_OK && op->kind == STRATA_COLL_ALL_REDUCE &&
            strata__net_st(c)->net->native && strata__net_st(c)->net->ops->native_all_reduce &&
            op->op != STRATA_OP_MEAN && op->op != STRATA_OP_SUM_TREE && op->dtype != STRATA_BF16 &&
            op->dtype != STRATA_F16)
                rc = reduce_native(c, op);
        else if (strata__net_st(c)->net->size > STRATA__NET_DIRECT)
                rc = tree_move(c, op, &h);
        else if (status != STRATA_OK || op->kind == STRATA_COLL_BARRIER || !op->count)
                rc = strata__net_exchange(c, &h, NULL, 0, data);
        else if (op->kind == STRATA_COLL_ALL_REDUCE &&
                 op->count * strata_dtype_size(op->dtype) >= SPLIT_MIN)
                rc = strata__net_split_rounds(c, op, &h);
        else if (op->kind == STRATA_COLL_ALL_REDUCE || op->kind == STRATA_COLL_REDUCE)
                rc = strata__net_reduce_rounds(c, op, &h);
        else if ((int)op->kind == STRATA__COLL_RS_BLOCKS)
                rc = strata__net_rsb_direct(c, op, &h);
        else if ((int)op->kind == STRATA__COLL_AG_BLOCKS)
                rc = strata__net_agb_direct(c, op, &h);
        else if (op->kind == STRATA_COLL_REDUCE_SCATTER)
                rc = strata__net_rs_rounds(c, op, &h);
        else if (op->kind == STRATA_COLL_SCATTER)
                rc = strata__net_scatter_rounds(c, op, &h);
        else
                rc = strata__net_copy_rounds(c, op, &h);
        if (status != STRATA_OK)
                return status;
        if (rc == STRATA_ETIMEDOUT || rc == STRATA_EABORTED || rc == STRATA_EFORMAT ||
            rc == STRATA_ESYS)
                return c->group.fail(c->group.h, rank, rc); /* releases the local ranks */
        strata__net_st(c)->result[c->flag[0].seq & 1] = rc; /* read after the second meeting */
        return rc;
}

/*
 * The other local ranks left net_move() before local rank 0 met the other processes: after
 * the second meeting they return what it found (another process's refusal) too.
 */
static int net_settle(struct strata_comm *c, int rank, int rc)
{
        int moved = strata__net_st(c)->result[c->flag[rank].seq & 1];

        if (rank == 0 || rc != STRATA_OK || moved == STRATA_OK)
                return rc;
        return strata__fail(moved, "rank %d: another process refused the collective (%s)",
                            c->rank0 + rank, strata_strerror(moved));
}

int strata__net_warm_up(struct strata_comm *c, int rounds)
{
        const unsigned char *in[STRATA__NET_DIRECT], *sum;
        struct strata__net_head h = { .kind = STRATA_COLL_BARRIER };
        struct strata__net_red d = { .dt = STRATA_F32, .cop = STRATA__SUM, .es = 4 };

        if (!c || !c->tp_state || c->tp->move != net_move)
                return STRATA_OK; /* not across processes: nothing to warm */
        memset(strata__net_st(c)->pack, 0, STRATA__NET_DATA);
        d.m = strata__net_world_of(c).lane / 4;
        for (int r = 0; r < c->n; r++)
                d.src[r] = strata__net_st(c)->pack;
        for (int i = 0; i < rounds; i++) {
                if (strata__net_st(c)->net->size <= STRATA__NET_DIRECT)
                        STRATA_TRY(strata__net_exchange(c, &h, strata__net_st(c)->pack,
                                                        STRATA__NET_DATA, in));
                else
                        STRATA_TRY(strata__net_butterfly(c, &h, &d, &sum));
        }
        if (strata__net_st(c)->net->ops->warm)
                return strata__net_st(c)->net->ops->warm(strata__net_st(c)->net,
                                                         strata__net_st(c)->link,
                                                         c->group.timeout_s);
        return STRATA_OK;
}

/* The net transport's state of @p c, or NULL where @p c does not span processes. */
static struct strata__net_state *net_of(const struct strata_comm *c)
{
        return c && c->tp_state && c->tp->move == net_move ? strata__net_st(c) : NULL;
}

void strata__net_carry_set(struct strata_comm *c, uint32_t bits)
{
        struct strata__net_state *s = net_of(c);

        if (!s)
                return;
        atomic_store_explicit(&s->carry, bits, memory_order_relaxed);
        s->carry_in = 0;
        atomic_store_explicit(&s->carried, 0, memory_order_relaxed);
        atomic_store_explicit(&s->ors, 0, memory_order_relaxed);
}

void strata__net_carry(struct strata_comm *c, uint32_t bits)
{
        struct strata__net_state *s = net_of(c);

        if (!s)
                return;
        atomic_fetch_or_explicit(&s->carry, bits, memory_order_relaxed);
        atomic_store_explicit(&s->carried, 0, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->ors, 1, memory_order_relaxed);
}

int strata__net_carry_take(struct strata_comm *c, uint32_t *bits)
{
        struct strata__net_state *s = net_of(c);
        int carried;

        if (!s)
                return 0;
        carried = atomic_load_explicit(&s->carried, memory_order_relaxed) != 0 &&
                  atomic_load_explicit(&s->ors, memory_order_relaxed) >= (uint32_t)c->n;
        *bits = s->carry_in | atomic_load_explicit(&s->carry, memory_order_relaxed);
        strata__net_carry_set(c, 0);
        return carried;
}

void strata__net_counts(const struct strata_comm *c, uint64_t *msgs, uint64_t *bytes)
{
        const struct strata__net_state *s = net_of(c);

        *msgs = s ? s->msgs : 0;
        *bytes = s ? s->bytes : 0;
}

const struct strata__transport strata__net_transport = {
        .name = "net",
        .probe = net_probe,
        .state_bytes = net_state_bytes,
        .init = net_init,
        .move = net_move,
        .settle = net_settle,
        .remote = 1,
};

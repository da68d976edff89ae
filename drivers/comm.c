/*
 * The communicator and the one choke point every collective goes through: check the
 * arguments, publish them, agree across ranks, let the driver move the data, fence, barrier.
 */
#include <stdatomic.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "strata/comm.h"
#include "strata/device.h"
#include "strata/status.h"
#include "arch/arch.h"
#include "arch/reduce.h"
#include "drivers/comm_internal.h"
#include "kernel/internal.h"
#include "kernel/workers_internal.h"

int strata_comm_plan(int ranks, size_t *bytes)
{
        if (ranks < 1 || ranks > STRATA__COMM_MAX || !bytes)
                return strata__fail(STRATA_EINVAL, "comm plan: %d ranks (1..%d)", ranks,
                                    STRATA__COMM_MAX);
        *bytes = sizeof(struct strata_comm) + 64;
        return STRATA_OK;
}

int strata_comm_init(struct strata_comm **out, struct strata_arena *a, struct strata_workers *w)
{
        return strata_comm_init_device(out, a, w, NULL);
}

int strata_comm_init_device(struct strata_comm **out, struct strata_arena *a,
                            struct strata_workers *w, const struct strata_device_ops *dev)
{
        struct strata_comm *c;
        const char *why = NULL;
        size_t bytes;
        void *p;

        if (!out || !a || !w)
                return strata__fail(STRATA_EINVAL, "comm init: NULL argument");
        if (dev && !dev->host_visible && (!dev->reduce_many || !dev->copy_many))
                return strata__fail(STRATA_EINVAL, "comm init: driver %s has no reduce_many/"
                                                   "copy_many for its memory", dev->name);
        STRATA_TRY(strata_comm_plan(strata_workers_count(w), &bytes));
        if (!strata__shm_comm.probe(&why))
                return strata__fail(STRATA_ENODEV, "comm %s: %s", strata__shm_comm.name,
                                    why ? why : "probe failed");
        STRATA_TRY(strata_arena_alloc(a, sizeof(*c), 64, &p));
        c = p;
        memset(c, 0, sizeof(*c));
        c->ops = &strata__shm_comm;
        c->w = w;
        c->n = strata_workers_count(w);
        c->inject_rank = -1;
        c->timeout_s = strata__workers_timeout(w);
        c->yield_after = strata__workers_oversubscribed(w) ? 16 : 2048;
        c->dev = dev && !dev->host_visible ? dev : NULL;
        (void)strata__reduce_isa();
        *out = c;
        return STRATA_OK;
}

void strata_comm_inject(struct strata_comm *c, int rank, int point, int status)
{
        if (!c)
                return;
        c->inject_rank = rank;
        c->inject_point = point;
        c->inject_status = status;
}

static int injected(struct strata_comm *c, int rank, int point)
{
        if (c->inject_rank == rank && c->inject_point == point)
                return strata_workers_fail(c->w, rank,
                                           strata__fail(c->inject_status,
                                                        "rank %d: injected failure at point %d",
                                                        rank, point));
        return STRATA_OK;
}

/* Elements each rank sends and receives for a kind. */
static void extents(const struct strata_coll *op, int n, size_t *ns, size_t *nr)
{
        size_t k = op->count, all = op->count * (size_t)n;

        switch (op->kind) {
        case STRATA_COLL_ALL_GATHER:
        case STRATA_COLL_GATHER:
                *ns = k, *nr = all;
                break;
        case STRATA_COLL_REDUCE_SCATTER:
        case STRATA_COLL_SCATTER:
                *ns = all, *nr = k;
                break;
        case STRATA_COLL_BARRIER:
                *ns = *nr = 0;
                break;
        default:
                *ns = *nr = k;
        }
}

static int overlaps(const void *a, size_t na, const void *b, size_t nb)
{
        const char *x = a, *y = b;

        return na && nb && x < y + nb && y < x + na;
}

void strata__comm_reduce(const struct strata_comm *c, const struct strata_coll *op,
                         void *const *dst, int ndst, const void *const *src, int nsrc, size_t lo,
                         size_t hi, int nt)
{
        if (c->dev)
                c->dev->reduce_many((float *const *)dst, ndst, (const float *const *)src, nsrc,
                                    lo, hi, op->op == STRATA_OP_MEAN);
        else
                strata__reduce_many(op->dtype, op->op, dst, ndst, src, nsrc, lo, hi, nt);
}

void strata__comm_copy(const struct strata_comm *c, void *const *dst, int ndst, const void *src,
                       size_t lo, size_t hi, int nt)
{
        if (c->dev)
                c->dev->copy_many(dst, ndst, src, lo, hi);
        else
                strata__copy_many(dst, ndst, src, lo, hi, nt);
}

/* What a device communicator cannot do (its kernels are f32 sum/mean). */
static int device_check(const struct strata_comm *c, const struct strata_coll *op)
{
        if (!c->dev || op->kind == STRATA_COLL_BARRIER || (unsigned)op->kind >= STRATA_COLL_COUNT)
                return STRATA_OK;
        if (op->dtype != STRATA_F32 || (op->op != STRATA_OP_SUM && op->op != STRATA_OP_MEAN))
                return strata__fail(STRATA_ENOTSUP, "comm on %s memory: only f32 sum/mean "
                                                    "(dtype %d, op %d)", c->dev->name,
                                    (int)op->dtype, (int)op->op);
        return STRATA_OK;
}

/* All argument checks of all collectives, for one rank. */
static int check(const struct strata_coll *op, int rank, int n)
{
        size_t es = strata_dtype_size(op->dtype), ns, nr, bytes;
        int rooted = op->kind == STRATA_COLL_BROADCAST || op->kind == STRATA_COLL_REDUCE ||
                     op->kind == STRATA_COLL_GATHER || op->kind == STRATA_COLL_SCATTER;
        int needs_send, needs_recv;

        if ((unsigned)op->kind >= STRATA_COLL_COUNT)
                return strata__fail(STRATA_EINVAL, "collective kind %d unknown", (int)op->kind);
        if (op->kind == STRATA_COLL_BARRIER)
                return STRATA_OK;
        if (!es)
                return strata__fail(STRATA_EINVAL, "dtype %d unknown", (int)op->dtype);
        if ((unsigned)op->op >= STRATA_OP_COUNT)
                return strata__fail(STRATA_EINVAL, "reduction op %d unknown", (int)op->op);
        if (rooted && (op->root < 0 || op->root >= n))
                return strata__fail(STRATA_EINVAL, "root %d not in [0, %d)", op->root, n);
        if (strata__mul_size(op->count, (size_t)n, &bytes) || strata__mul_size(bytes, es, &bytes))
                return strata__fail(STRATA_EOVERFLOW, "count %zu x %d ranks x %zu bytes overflows",
                                    op->count, n, es);
        extents(op, n, &ns, &nr);
        needs_send = op->kind != STRATA_COLL_BROADCAST &&
                     !(op->kind == STRATA_COLL_SCATTER && rank != op->root);
        needs_recv = !((op->kind == STRATA_COLL_REDUCE || op->kind == STRATA_COLL_GATHER) &&
                       rank != op->root);
        if (op->count && needs_send && !op->send)
                return strata__fail(STRATA_EINVAL, "rank %d: send buffer is NULL", rank);
        if (op->count && needs_recv && !op->recv)
                return strata__fail(STRATA_EINVAL, "rank %d: receive buffer is NULL", rank);
        if (needs_send && needs_recv && op->send != op->recv) {
                int in_place = (op->kind == STRATA_COLL_ALL_GATHER ||
                                op->kind == STRATA_COLL_GATHER) &&
                               (const char *)op->send ==
                                       (const char *)op->recv + (size_t)rank * op->count * es;

                if (!in_place && overlaps(op->send, ns * es, op->recv, nr * es))
                        return strata__fail(STRATA_EINVAL,
                                            "rank %d: send and receive buffers overlap", rank);
        }
        if (op->send == op->recv && op->count &&
            (op->kind == STRATA_COLL_REDUCE_SCATTER || op->kind == STRATA_COLL_SCATTER))
                return strata__fail(STRATA_EINVAL, "rank %d: %s cannot run in place", rank,
                                    op->kind == STRATA_COLL_SCATTER ? "scatter"
                                                                    : "reduce_scatter");
        return STRATA_OK;
}

static int agree(struct strata_comm *c, int rank)
{
        const struct strata_coll *me = &c->slot[rank].op;

        if (c->slot[rank].status != STRATA_OK)
                return c->slot[rank].status; /* this rank's own message was set by check() */
        for (int r = 0; r < c->n; r++)
                if (c->slot[r].status != STRATA_OK)
                        return strata__fail(STRATA_EINVAL, "rank %d passed bad arguments", r);
        for (int r = 0; r < c->n; r++) {
                const struct strata_coll *o = &c->slot[r].op;

                if (o->kind != me->kind || o->count != me->count || o->dtype != me->dtype ||
                    o->op != me->op || o->root != me->root)
                        return strata__fail(STRATA_EINVAL,
                                            "ranks %d and %d disagree on the collective", rank, r);
        }
        return STRATA_OK;
}

static double now_s(void)
{
        struct timespec t;

        clock_gettime(CLOCK_MONOTONIC, &t);
        return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Spin until every rank's flag reaches @p seq; bounded by the abort flag and the timeout. */
static int wait_flags(struct strata_comm *c, int rank, int ready, unsigned seq)
{
        double deadline = 0.0;

        for (int r = 0; r < c->n; r++) {
                atomic_uint *f = ready ? &c->slot[r].ready : &c->flag[r].done;
                unsigned spins = 0;

                while ((int)(atomic_load_explicit(f, memory_order_acquire) - seq) < 0) {
                        if (strata__workers_aborted(c->w))
                                return STRATA_EABORTED;
                        if (++spins > c->yield_after)
                                sched_yield(); /* the peer may be waiting for this core */
                        else
                                strata__pause();
                        if (spins % 1024 == 0) {
                                if (deadline == 0.0)
                                        deadline = now_s() + c->timeout_s;
                                else if (now_s() > deadline)
                                        return strata_workers_fail(
                                                c->w, rank,
                                                strata__fail(STRATA_ETIMEDOUT,
                                                             "rank %d waited %.3g s for rank %d",
                                                             rank, c->timeout_s, r));
                        }
                }
        }
        return STRATA_OK;
}

/*
 * Every collective: publish the descriptor with this rank's sequence number (one cache line),
 * wait for every rank's, agree, move this rank's share of the data, fence, publish "done",
 * wait for every rank's "done". Both synchronisations are per-rank flags: each rank writes only
 * its own line. The protocol never depends on a rank's own arguments, so ranks that disagree
 * still meet at the same points and all return the error.
 */
int strata_comm_run(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        unsigned seq;
        int rc;

        if (!c || !op || rank < 0 || rank >= (c ? c->n : 0))
                return strata__fail(STRATA_EINVAL, "comm run: NULL argument or rank out of range");
        /* Device memory: this rank's inputs are complete once its queued work is. */
        if (c->dev && c->dev->sync && (rc = c->dev->sync()) != STRATA_OK)
                return strata_workers_fail(c->w, rank, rc);
        seq = ++c->flag[rank].seq;
        c->slot[rank].op = *op;
        c->slot[rank].status = check(op, rank, c->n);
        if (c->slot[rank].status == STRATA_OK)
                c->slot[rank].status = device_check(c, op);
        atomic_store_explicit(&c->slot[rank].ready, seq, memory_order_release);
        STRATA_TRY(injected(c, rank, 0));
        STRATA_TRY(wait_flags(c, rank, 1, seq));
        rc = agree(c, rank);
        if (rc == STRATA_OK)
                rc = injected(c, rank, 1);
        if (rc == STRATA_OK && op->kind != STRATA_COLL_BARRIER && op->count)
                rc = c->ops->run[op->kind](c, rank, op);
        strata__store_fence();
        if (rc == STRATA_OK && c->dev && c->dev->sync && (rc = c->dev->sync()) != STRATA_OK)
                return strata_workers_fail(c->w, rank, rc); /* this rank's writes failed */
        if (rc == STRATA_OK)
                rc = injected(c, rank, 2);
        if (rc != STRATA_OK && rc != STRATA_EINVAL && rc != STRATA_EOVERFLOW &&
            rc != STRATA_ENOTSUP)
                return rc; /* a failure: the pool's abort flag releases the others */
        atomic_store_explicit(&c->flag[rank].done, seq, memory_order_release);
        STRATA_TRY(wait_flags(c, rank, 0, seq));
        return rc;
}

int strata_comm_barrier(struct strata_comm *c, int rank)
{
        struct strata_coll op = { .kind = STRATA_COLL_BARRIER };

        return strata_comm_run(c, rank, &op);
}

int strata_comm_broadcast(struct strata_comm *c, int rank, void *buf, size_t count,
                          enum strata_dtype dt, int root)
{
        struct strata_coll op = { .kind = STRATA_COLL_BROADCAST, .send = buf, .recv = buf,
                                  .count = count, .dtype = dt, .root = root };

        return strata_comm_run(c, rank, &op);
}

int strata_comm_reduce(struct strata_comm *c, int rank, const void *send, void *recv,
                       size_t count, enum strata_dtype dt, enum strata_reduce_op o, int root)
{
        struct strata_coll op = { .kind = STRATA_COLL_REDUCE, .send = send, .recv = recv,
                                  .count = count, .dtype = dt, .op = o, .root = root };

        return strata_comm_run(c, rank, &op);
}

int strata_comm_all_reduce(struct strata_comm *c, int rank, const void *send, void *recv,
                           size_t count, enum strata_dtype dt, enum strata_reduce_op o)
{
        struct strata_coll op = { .kind = STRATA_COLL_ALL_REDUCE, .send = send, .recv = recv,
                                  .count = count, .dtype = dt, .op = o };

        return strata_comm_run(c, rank, &op);
}

int strata_comm_all_gather(struct strata_comm *c, int rank, const void *send, void *recv,
                           size_t count, enum strata_dtype dt)
{
        struct strata_coll op = { .kind = STRATA_COLL_ALL_GATHER, .send = send, .recv = recv,
                                  .count = count, .dtype = dt };

        return strata_comm_run(c, rank, &op);
}

int strata_comm_reduce_scatter(struct strata_comm *c, int rank, const void *send, void *recv,
                               size_t count, enum strata_dtype dt, enum strata_reduce_op o)
{
        struct strata_coll op = { .kind = STRATA_COLL_REDUCE_SCATTER, .send = send, .recv = recv,
                                  .count = count, .dtype = dt, .op = o };

        return strata_comm_run(c, rank, &op);
}

int strata_comm_gather(struct strata_comm *c, int rank, const void *send, void *recv,
                       size_t count, enum strata_dtype dt, int root)
{
        struct strata_coll op = { .kind = STRATA_COLL_GATHER, .send = send, .recv = recv,
                                  .count = count, .dtype = dt, .root = root };

        return strata_comm_run(c, rank, &op);
}

int strata_comm_scatter(struct strata_comm *c, int rank, const void *send, void *recv,
                        size_t count, enum strata_dtype dt, int root)
{
        struct strata_coll op = { .kind = STRATA_COLL_SCATTER, .send = send, .recv = recv,
                                  .count = count, .dtype = dt, .root = root };

        return strata_comm_run(c, rank, &op);
}

int strata_comm_reduce_boolean(struct strata_comm *c, int rank, int flag, int all, int *out)
{
        int32_t v = flag ? 1 : 0, r;

        if (!out)
                return strata__fail(STRATA_EINVAL, "reduce_boolean: out is NULL");
        STRATA_TRY(strata_comm_all_reduce(c, rank, &v, &r, 1, STRATA_I32,
                                          all ? STRATA_OP_MIN : STRATA_OP_MAX));
        *out = r != 0;
        return STRATA_OK;
}

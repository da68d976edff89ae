/*
 * The communicator and the one choke point every collective goes through: check the
 * arguments, publish them, agree across ranks, let the driver move the data, fence, barrier.
 */
#include <stdatomic.h>
#include <string.h>

#include "strata/comm.h"
#include "strata/device.h"
#include "strata/status.h"
#include "base/base.h"
#include "base/faults.h"
#include "kernel/trace.h"
#include "arch/reduce.h"
#include "drivers/comm_blocks.h"
#include "drivers/comm_internal.h"
#include "drivers/comm_workers.h"
#include "kernel/wait.h"

/* Every mailbox starts on its own cache line: no two ranks write one line. */
_Static_assert(STRATA__COMM_EAGER % 64 == 0, "eager mailboxes must be whole cache lines");

/* The communicator, rounded to a cache line: its eager mailboxes follow in the same block. */
#define COMM_HEAD ((sizeof(struct strata_comm) + 63) / 64 * 64)

static size_t comm_bytes(int ranks)
{
        return COMM_HEAD + (size_t)ranks * 2 * STRATA__COMM_EAGER;
}

int strata_comm_plan(int local_size, size_t *bytes)
{
        if (local_size < 1 || local_size > STRATA_MAX_DEVICES || !bytes)
                return strata__fail(STRATA_EINVAL, "comm plan: %d ranks (1..%d)", local_size,
                                    STRATA_MAX_DEVICES);
        *bytes = comm_bytes(local_size) + 64;
        return STRATA_OK;
}

static int check_sizes(const struct strata_comm_config *cfg);

int strata_comm_plan_config(const struct strata_comm_config *cfg, size_t *bytes)
{
        if (!cfg || !bytes)
                return strata__fail(STRATA_EINVAL, "comm plan: NULL argument");
        STRATA_TRY(check_sizes(cfg));
        STRATA_TRY(strata_comm_plan(cfg->local_size, bytes));
        *bytes += strata__transport_state_bytes(cfg);
        return STRATA_OK;
}

/* The ranks: how many, where this process's start, how processes divide them. */
static int check_sizes(const struct strata_comm_config *cfg)
{
        if (cfg->local_size < 1 || cfg->local_size > STRATA_MAX_DEVICES)
                return strata__fail(STRATA_EINVAL, "comm init: %d local ranks (1..%d)",
                                    cfg->local_size, STRATA_MAX_DEVICES);
        if (cfg->rank0 < 0 || cfg->world_size < 1 || cfg->rank0 > cfg->world_size - cfg->local_size)
                return strata__fail(STRATA_EINVAL, "comm init: local ranks %d..%d outside a world "
                                                   "of %d", cfg->rank0,
                                    cfg->rank0 + cfg->local_size - 1, cfg->world_size);
        if (cfg->world_size > cfg->local_size &&
            (cfg->world_size % cfg->local_size || cfg->rank0 % cfg->local_size))
                return strata__fail(STRATA_EINVAL, "comm init: a world of %d ranks in processes "
                                                   "of %d each (rank0 a multiple)",
                                    cfg->world_size, cfg->local_size);
        return STRATA_OK;
}

static int check_config(const struct strata_comm_config *cfg)
{
        const struct strata_device_ops *dev = cfg->dev;

        STRATA_TRY(check_sizes(cfg));
        if (!cfg->group || !cfg->group->aborted || !cfg->group->fail || !cfg->group->epoch)
                return strata__fail(STRATA_EINVAL, "comm init: no failure domain (group)");
        if (dev && dev->reserve && (!dev->reduce_many || !dev->copy_many))
                return strata__fail(STRATA_EINVAL, "comm init: driver %s has no reduce_many/"
                                                   "copy_many for its memory", dev->name);
        return STRATA_OK;
}

int strata_comm_init(struct strata_comm **out, struct strata_arena *a,
                     const struct strata_comm_config *cfg)
{
        const struct strata__transport *tp;
        struct strata_comm *c;
        const char *why = NULL;
        void *p;

        if (!out || !a || !cfg)
                return strata__fail(STRATA_EINVAL, "comm init: NULL argument");
        STRATA_TRY(check_config(cfg));
        tp = strata__transport_pick(cfg, &why);
        if (!tp)
                return strata__fail(STRATA_ENOTSUP, "comm init: no transport for %d local of %d "
                                                    "ranks: %s", cfg->local_size,
                                    cfg->world_size, why ? why : "none accepts");
        STRATA_TRY(strata_arena_alloc(a, comm_bytes(cfg->local_size), 64, &p));
        c = p;
        memset(c, 0, sizeof(*c));
        c->mail = (unsigned char *)p + COMM_HEAD;
        c->tp = tp;
        c->group = *cfg->group;
        c->n = cfg->local_size;
        c->world = cfg->world_size;
        c->rank0 = cfg->rank0;
        c->yield_after = c->group.oversubscribed ? 16 : 2048;
        c->dev = cfg->dev && cfg->dev->reserve ? cfg->dev : NULL; /* its own memory */
        if (tp->state_bytes && tp->state_bytes(cfg)) {
                STRATA_TRY(strata_arena_alloc(a, tp->state_bytes(cfg), 64, &p));
                c->tp_state = p;
        }
        if (tp->init)
                STRATA_TRY(tp->init(c, cfg, c->tp_state));
        (void)strata__reduce_isa();
        *out = c;
        return STRATA_OK;
}

int strata__comm_init_workers(struct strata_comm **out, struct strata_arena *a,
                             struct strata__workers *w, const struct strata_device_ops *dev)
{
        struct strata_comm_config cfg = STRATA_COMM_CONFIG_INIT;
        struct strata_group g;

        if (!w)
                return strata__fail(STRATA_EINVAL, "comm init: worker pool is NULL");
        strata__workers_group(w, &g);
        cfg.world_size = cfg.local_size = strata__workers_count(w);
        cfg.group = &g;
        cfg.dev = dev;
        return strata_comm_init(out, a, &cfg);
}

int strata_comm_world_size(const struct strata_comm *c)
{
        return c ? c->world : 0;
}

int strata_comm_local_size(const struct strata_comm *c)
{
        return c ? c->n : 0;
}

int strata_comm_rank(const struct strata_comm *c, int local)
{
        return c && local >= 0 && local < c->n ? c->rank0 + local : -1;
}

const char *strata_comm_transport(const struct strata_comm *c)
{
        return c ? c->tp->name : "?";
}

void strata_comm_slice(const struct strata_comm *c, size_t count, size_t es, int local,
                       size_t *lo, size_t *hi)
{
        if (c->tp->slice) {
                c->tp->slice(count, es, c->n, local, lo, hi);
                return;
        }
        *lo = 0;
        *hi = count;
}

#ifdef STRATA_TESTING
void strata__comm_inject(struct strata_comm *c, int rank, int point, int status)
{
        if (!c)
                return;
        if (!c->faults)
                c->faults = strata__faults_take();
        c->faults->who = rank;
        c->faults->point = point;
        c->faults->status = status;
}
#endif

/* A test's failure at step @p point of a collective fails the group (nothing in production). */
static int injected(struct strata_comm *c, int rank, int point)
{
        int rc = STRATA__FAULT(c->faults, rank, point, "rank", "at point ", NULL);

        return rc == STRATA_OK ? STRATA_OK : c->group.fail(c->group.h, rank, rc);
}

/* Elements each rank (global rank @p rank) sends and receives for a kind. */
static void extents(const struct strata_coll *op, const struct strata__blocks *geo, int rank,
                    int n, size_t *ns, size_t *nr)
{
        size_t k = op->count, all = op->count * (size_t)n, a, e;

        switch ((int)op->kind) {
        case STRATA__COLL_RS_BLOCKS:
        case STRATA__COLL_AG_BLOCKS:
                strata__blocks_piece(geo, k, rank, &a, &e);
                *ns = (int)op->kind == STRATA__COLL_RS_BLOCKS ? k : e - a;
                *nr = (int)op->kind == STRATA__COLL_RS_BLOCKS ? e - a : k;
                break;
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

/* What a device communicator cannot do (its kernels are f32 sum/mean). */
static int device_check(const struct strata_comm *c, const struct strata_coll *op)
{
        if (!c->dev || op->kind == STRATA_COLL_BARRIER || (unsigned)op->kind >= STRATA__COLL_KINDS)
                return STRATA_OK;
        if ((int)op->kind == STRATA__COLL_AG_BLOCKS)
                return STRATA_OK; /* a copy */
        if (op->dtype != STRATA_F32 || (op->op != STRATA_OP_SUM && op->op != STRATA_OP_MEAN))
                return strata__fail(STRATA_ENOTSUP, "comm on %s memory: only f32 sum/mean "
                                                    "(dtype %d, op %d)", c->dev->name,
                                    (int)op->dtype, (int)op->op);
        return STRATA_OK;
}

/* A collective over blocks: its geometry, and its in-place forms (comm_internal.h). */
static int check_blocks(const struct strata_coll *op, const struct strata__blocks *geo,
                        int rank, int world)
{
        size_t es = strata_dtype_size(op->dtype), end, a, e, blocks;
        int rs = (int)op->kind == STRATA__COLL_RS_BLOCKS;

        if (!geo->block)
                return strata__fail(STRATA_EINVAL, "collective over blocks: block of 0 elements");
        if (strata__mul_size(geo->block, (size_t)world, &blocks) ||
            geo->lo > SIZE_MAX - op->count || (end = geo->lo + op->count) > blocks)
                return strata__fail(STRATA_EINVAL, "collective over blocks: span [%zu, +%zu) "
                                    "past %d blocks of %zu", geo->lo, op->count, world,
                                    geo->block);
        if (strata__mul_size(op->count, es, &end))
                return strata__fail(STRATA_EOVERFLOW, "count %zu x %zu bytes overflows",
                                    op->count, es);
        strata__blocks_piece(geo, op->count, rank, &a, &e);
        if ((rs ? op->count : e - a) && !op->send)
                return strata__fail(STRATA_EINVAL, "rank %d: send buffer is NULL", rank);
        if ((rs ? e - a : op->count) && !op->recv)
                return strata__fail(STRATA_EINVAL, "rank %d: receive buffer is NULL", rank);
        if (!op->send || !op->recv)
                return STRATA_OK; /* the side that is NULL is empty (checked above) */
        if (rs ? (const char *)op->recv == (const char *)op->send + a * es
               : (const char *)op->send == (const char *)op->recv + a * es)
                return STRATA_OK; /* in place */
        if (overlaps(op->send, (rs ? op->count : e - a) * es, op->recv,
                     (rs ? e - a : op->count) * es))
                return strata__fail(STRATA_EINVAL, "rank %d: send and receive buffers overlap "
                                    "(in place: the piece's own place)", rank);
        return STRATA_OK;
}

/* All argument checks of all collectives, for one rank (@p geo: a collective over blocks). */
static int check(const struct strata_coll *op, const struct strata__blocks *geo, int rank,
                 int world)
{
        size_t es = strata_dtype_size(op->dtype), ns, nr, bytes;
        int rooted = op->kind == STRATA_COLL_BROADCAST || op->kind == STRATA_COLL_REDUCE ||
                     op->kind == STRATA_COLL_GATHER || op->kind == STRATA_COLL_SCATTER;
        int needs_send, needs_recv;

        if ((unsigned)op->kind >= STRATA__COLL_KINDS ||
            (strata__coll_blocks((int)op->kind) != (geo != NULL)))
                return strata__fail(STRATA_EINVAL, "collective kind %d unknown", (int)op->kind);
        if (op->kind == STRATA_COLL_BARRIER)
                return STRATA_OK;
        if (!es)
                return strata__fail(STRATA_EINVAL, "dtype %d unknown", (int)op->dtype);
        if ((unsigned)op->op >= STRATA_OP_COUNT)
                return strata__fail(STRATA_EINVAL, "reduction op %d unknown", (int)op->op);
        if (op->op == STRATA_OP_SUM_TREE &&
            (op->dtype == STRATA_BF16 || op->dtype == STRATA_F16))
                return strata__fail(STRATA_EINVAL, "the pairwise-tree sum takes f32, f64 or "
                                                   "integers, not dtype %d", (int)op->dtype);
        if (geo)
                return check_blocks(op, geo, rank, world);
        if (rooted && (op->root < 0 || op->root >= world))
                return strata__fail(STRATA_EINVAL, "root %d not in [0, %d)", op->root, world);
        if (strata__mul_size(op->count, (size_t)world, &bytes) ||
            strata__mul_size(bytes, es, &bytes))
                return strata__fail(STRATA_EOVERFLOW, "count %zu x %d ranks x %zu bytes overflows",
                                    op->count, world, es);
        extents(op, geo, rank, world, &ns, &nr);
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

static int agree(struct strata_comm *c, int rank, int p)
{
        const struct strata_coll *me = &c->slot[rank][p].op;

        if (c->slot[rank][p].status != STRATA_OK)
                return c->slot[rank][p].status; /* this rank's own message was set by check() */
        for (int r = 0; r < c->n; r++)
                if (c->slot[r][p].status != STRATA_OK)
                        return strata__fail(STRATA_EINVAL, "rank %d passed bad arguments", r);
        for (int r = 0; r < c->n; r++) {
                const struct strata_coll *o = &c->slot[r][p].op;

                if (o->kind != me->kind || o->count != me->count || o->dtype != me->dtype ||
                    o->op != me->op || o->root != me->root ||
                    (strata__coll_blocks((int)me->kind) &&
                     memcmp(strata__comm_blocks(c, rank, r), strata__comm_blocks(c, rank, rank),
                            sizeof(struct strata__blocks))))
                        return strata__fail(STRATA_EINVAL,
                                            "ranks %d and %d disagree on the collective", rank, r);
        }
        return STRATA_OK;
}

/* Trace spans: each collective, and the waits inside it. */
static const struct strata__span span_coll[STRATA__COLL_KINDS] = {
        [STRATA_COLL_BARRIER] = { "barrier", "comm", "count", 0 },
        [STRATA_COLL_BROADCAST] = { "broadcast", "comm", "count", 0 },
        [STRATA_COLL_REDUCE] = { "reduce", "comm", "count", 0 },
        [STRATA_COLL_ALL_REDUCE] = { "all_reduce", "comm", "count", 0 },
        [STRATA_COLL_ALL_GATHER] = { "all_gather", "comm", "count", 0 },
        [STRATA_COLL_REDUCE_SCATTER] = { "reduce_scatter", "comm", "count", 0 },
        [STRATA_COLL_GATHER] = { "gather", "comm", "count", 0 },
        [STRATA_COLL_SCATTER] = { "scatter", "comm", "count", 0 },
        [STRATA__COLL_RS_BLOCKS] = { "reduce_scatter_blocks", "comm", "count", 0 },
        [STRATA__COLL_AG_BLOCKS] = { "all_gather_blocks", "comm", "count", 0 },
};
static const struct strata__span span_wait = { "wait", "sync", "for_rank", 0 };

static struct strata__track *track(const struct strata_comm *c, int rank)
{
        return c->group.tracks ? (struct strata__track *)c->group.tracks + rank : NULL;
}

/* Once per wait that passed the group's stall bound: the ranks not yet at @p seq. */
static void stall(const struct strata_comm *c, int rank, int ready, uint64_t seq, double waited)
{
        int late[STRATA_MAX_DEVICES], n = 0;
        unsigned kind = (unsigned)c->slot[rank][seq & 1].op.kind;
        const char *what = kind < STRATA__COLL_KINDS ? span_coll[kind].name : "a collective";

        for (int r = 0; r < c->n; r++) {
                const _Atomic uint64_t *f = ready ? &c->slot[r][seq & 1].ready : &c->flag[r].done;

                if ((int64_t)(atomic_load_explicit(f, memory_order_acquire) - seq) < 0)
                        late[n++] = r;
        }
        strata__track_stall(c->group.tracks, rank, what, waited, late, n);
}

/* Who waits at which meeting, for the stall report. */
struct waiter {
        const struct strata_comm *c;
        int rank, ready;
        uint64_t seq;
};

static void report_stall(void *arg, double waited_s)
{
        const struct waiter *me = arg;

        stall(me->c, me->rank, me->ready, me->seq, waited_s);
}

static int arrived(const _Atomic uint64_t *f, uint64_t seq)
{
        return (int64_t)(atomic_load_explicit(f, memory_order_acquire) - seq) >= 0;
}

/*
 * Wait until every rank's flag reaches @p seq; bounded by the failure domain and the timeout,
 * one deadline for all ranks. The domain is asked every 16 rounds, not every round: it is a
 * call through the group's table, and on every round it delayed noticing the flag (4 KiB
 * all_reduce 0.76 against 0.67 us). A late rank is first spun for inline (the usual wait of a
 * meeting, on the critical path of every collective: through strata__wait() alone the 4 KiB
 * all_reduce took 0.73 against 0.63 us); the wait is described only when that is not enough.
 */
#define FIRST_SPINS 64u
/* A sleep on a peer's flag: the peer wakes it; a missed wake (decision 0075) costs this much. */
#define SLEEP_NS 1000000L

static int wait_flags(struct strata_comm *c, int rank, int ready, uint64_t seq)
{
        unsigned first = c->yield_after < FIRST_SPINS ? c->yield_after : FIRST_SPINS;
        struct waiter me = { c, rank, ready, seq };
        /* Behind a move that waits for other processes, local waits outlast the link's. */
        double bound = c->group.timeout_s * (!ready && c->tp->remote && rank ? 2.0 : 1.0);
        struct strata__wait w;
        struct strata__track *t = NULL;
        uint64_t t0 = 0;
        int first_late = -1, described = 0, rc = STRATA_OK;

        for (int r = 0; r < c->n && rc == STRATA_OK; r++) {
                const _Atomic uint64_t *f = ready ? &c->slot[r][seq & 1].ready : &c->flag[r].done;

                if (arrived(f, seq))
                        continue;
                if (first_late < 0) {
                        first_late = r;
                        t = track(c, rank);
                        t0 = strata__track_begin(t, &span_wait, NULL);
                }
                if (strata__spin_until(f, seq, first))
                        continue;
                if (!described) {
                        w = (struct strata__wait){
                                .target = seq, .aborted = c->group.aborted,
                                .aborted_arg = c->group.h, .timeout_s = bound,
                                .stall_s = c->group.tracks ? c->group.stall_s : 0.0,
                                .stall = report_stall, .stall_arg = &me, .slice_ns = SLEEP_NS,
                                .spins = c->yield_after - first, .clock_every = 1024 };
                        described = 1;
                }
                w.counter = f;
                w.sleepers = &c->flag[r].sleepers;
                rc = strata__wait(&w);
                if (rc == STRATA_ETIMEDOUT)
                        rc = c->group.fail(c->group.h, rank,
                                           strata__fail(STRATA_ETIMEDOUT,
                                                        "rank %d waited %.3g s for rank %d",
                                                        rank, bound, r));
        }
        if (first_late >= 0)
                strata__track_end(t, t0, first_late);
        return rc;
}

/* Collectives that finish in one meeting: no data, or data small enough for the mailboxes. */
static int eager(const struct strata_comm *c, const struct strata_coll *op)
{
        if (!c->tp->eager)
                return 0; /* e.g. the other processes are met in every collective */
        if (op->kind == STRATA_COLL_BARRIER)
                return 1;
        return !c->dev && op->kind == STRATA_COLL_ALL_REDUCE &&
               op->count <= STRATA__COMM_EAGER / strata_dtype_size(op->dtype);
}

static void *mailbox(const struct strata_comm *c, int rank, int p)
{
        return c->mail + ((size_t)rank * 2 + (size_t)p) * STRATA__COMM_EAGER;
}

/* Every rank reduces all inputs in rank order, the same order as the sliced path. */
static void eager_all_reduce(struct strata_comm *c, int rank, int p, const struct strata_coll *op)
{
        const void *src[STRATA_MAX_DEVICES];
        void *dst[1] = { op->recv };

        for (int r = 0; r < c->n; r++)
                src[r] = r == rank ? op->send : mailbox(c, r, p);
        strata__comm_reduce(c, op, dst, 1, src, c->n, 0, op->count, 0);
}

/*
 * Every collective: publish the descriptor with this rank's sequence number (one cache line),
 * wait for every rank's, agree, move this rank's share of the data, fence, publish "done",
 * wait for every rank's "done". Both synchronisations are per-rank flags: each rank writes only
 * its own line. The protocol never depends on a rank's own arguments, so ranks that disagree
 * still meet at the same points and all return the error.
 *
 * Eager collectives (barrier, small all_reduce) skip the second meeting: inputs were copied
 * into mailboxes before the first, so no rank reads a peer's own buffers. Whether a call is
 * eager is decided after agreement, from arguments every rank then shares. Descriptors and
 * mailboxes alternate by sequence parity: a rank can start its next collective while peers
 * still read this one, but not the one after, since that needs every peer at the next meeting.
 */
static int run(struct strata_comm *c, int rank, const struct strata_coll *op,
               const struct strata__blocks *geo)
{
        struct strata__comm_flags *me;
        struct strata__comm_slot *s;
        unsigned epoch;
        uint64_t seq;
        int rc, p, quick;

        /* Device memory: this rank's inputs are complete once its queued work is. */
        if (c->dev && c->dev->sync && (rc = c->dev->sync()) != STRATA_OK)
                return c->group.fail(c->group.h, rank, rc);
        me = &c->flag[rank];
        epoch = c->group.epoch(c->group.h);
        if (me->epoch != epoch) { /* a failed run: restart above every sequence used so far */
                me->epoch = epoch;
                me->seq = (uint64_t)epoch << 40;
        }
        seq = ++me->seq;
        p = (int)(seq & 1);
        s = &c->slot[rank][p];
        s->op = *op;
        if (geo) /* read by the peers after the first meeting (comm_internal.h) */
                memcpy(mailbox(c, rank, p), geo, sizeof(*geo));
        s->status = check(op, geo, c->rank0 + rank, c->world);
        if (s->status == STRATA_OK)
                s->status = device_check(c, op);
        quick = s->status == STRATA_OK && eager(c, op);
        if (quick && op->kind != STRATA_COLL_BARRIER && op->count)
                memcpy(mailbox(c, rank, p), op->send, op->count * strata_dtype_size(op->dtype));
        atomic_store_explicit(&s->ready, seq, memory_order_release);
        strata__wake_counter(&s->ready, &me->sleepers);
        STRATA_TRY(injected(c, rank, 0));
        STRATA_TRY(wait_flags(c, rank, 1, seq));
        rc = agree(c, rank, p);
        if (rc == STRATA_OK)
                rc = injected(c, rank, 1);
        if (rc == STRATA_OK && quick) { /* agreement made every rank's call eager */
                if (op->kind == STRATA_COLL_ALL_REDUCE && op->count)
                        eager_all_reduce(c, rank, p, op);
                return injected(c, rank, 2);
        }
        rc = c->tp->move(c, rank, op, rc);
        strata__store_fence();
        if (rc == STRATA_OK && c->dev && c->dev->sync && (rc = c->dev->sync()) != STRATA_OK)
                return c->group.fail(c->group.h, rank, rc); /* this rank's writes failed */
        if (rc == STRATA_OK)
                rc = injected(c, rank, 2);
        if (rc != STRATA_OK && rc != STRATA_EINVAL && rc != STRATA_EOVERFLOW &&
            rc != STRATA_ENOTSUP)
                return rc; /* a failure: the pool's abort flag releases the others */
        atomic_store_explicit(&me->done, seq, memory_order_release);
        strata__wake_counter(&me->done, &me->sleepers);
        STRATA_TRY(wait_flags(c, rank, 0, seq));
        return c->tp->settle ? c->tp->settle(c, rank, rc) : rc;
}

int strata_comm_run(struct strata_comm *c, int rank, const struct strata_coll *op)
{
        struct strata__track *t;
        uint64_t t0;
        int rc;

        if (!c || !op || rank < 0 || rank >= (c ? c->n : 0))
                return strata__fail(STRATA_EINVAL, "comm run: NULL argument or rank out of range");
        if ((unsigned)op->kind >= STRATA_COLL_COUNT)
                return run(c, rank, op, NULL); /* the agreement reports it to every rank */
        t = track(c, rank);
        t0 = strata__track_begin(t, &span_coll[op->kind], NULL);
        rc = run(c, rank, op, NULL);
        strata__track_end(t, t0, (int64_t)op->count);
        return rc;
}

int strata__comm_run_blocks(struct strata_comm *c, int rank, const struct strata_coll *op,
                            const struct strata__blocks *geo)
{
        struct strata__track *t;
        uint64_t t0;
        int rc;

        if (!c || !op || !geo || rank < 0 || rank >= (c ? c->n : 0))
                return strata__fail(STRATA_EINVAL, "comm run: NULL argument or rank out of range");
        if (!strata__coll_blocks((int)op->kind))
                return run(c, rank, op, NULL); /* refused by every rank's check */
        t = track(c, rank);
        t0 = strata__track_begin(t, &span_coll[op->kind], NULL);
        rc = run(c, rank, op, geo);
        strata__track_end(t, t0, (int64_t)op->count);
        return rc;
}

int strata__comm_reduce_scatter_blocks(struct strata_comm *c, int rank, const void *send,
                                       void *recv, size_t count, size_t lo, size_t block,
                                       enum strata_dtype dt, enum strata_reduce_op o)
{
        struct strata_coll op = { .kind = (enum strata_coll_kind)STRATA__COLL_RS_BLOCKS,
                                  .send = send, .recv = recv, .count = count, .dtype = dt,
                                  .op = o };
        struct strata__blocks geo = { lo, block };

        return strata__comm_run_blocks(c, rank, &op, &geo);
}

int strata__comm_all_gather_blocks(struct strata_comm *c, int rank, const void *send,
                                   void *recv, size_t count, size_t lo, size_t block,
                                   enum strata_dtype dt)
{
        struct strata_coll op = { .kind = (enum strata_coll_kind)STRATA__COLL_AG_BLOCKS,
                                  .send = send, .recv = recv, .count = count, .dtype = dt };
        struct strata__blocks geo = { lo, block };

        return strata__comm_run_blocks(c, rank, &op, &geo);
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

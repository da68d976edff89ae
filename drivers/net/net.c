/*
 * The `net` transport: a communicator whose ranks live in several processes, joined by a link
 * (drivers/net.h). Inside a process the ranks meet as always (drivers/comm.c); then local rank
 * 0 alone talks to the other processes, on behalf of all its local ranks, while they wait at
 * the protocol's second meeting.
 *
 * Two families of schedules, both made of link steps (docs/decisions/0035):
 *
 * - Direct, for 2 to 4 processes (one step reaches every peer): a small reduction's step
 *   carries every local rank's slice to every process, which reduces the slices of all ranks
 *   itself; from 64 KiB each process receives only its part, reduces it and sends the result
 *   back (split_rounds); reduce_scatter, scatter, broadcast, all_gather likewise. Each step
 *   starts with a header holding the call's arguments, seen by every process.
 *
 * - Butterfly, from 5 processes: every collective starts with the steps of recursive doubling
 *   over the world's W = 2^k + r ranks (virtual ranks: the first r pairs of ranks fold into
 *   one first), whose headers spread the arguments and every refusal to every process in
 *   k + 2 steps; a small reduction's data rides on them (recursive doubling). A large one then
 *   runs recursive halving (a reduce-scatter, log W steps) and doubling (an all-gather) per
 *   round; broadcast and scatter follow a binomial tree, all_gather and gather Bruck's
 *   dissemination. Local ranks are virtual ranks of their own: a step between two ranks of one
 *   process is a local sum, and only the others become messages, so a process sends at most
 *   one message per local rank per step.
 *
 * Reductions combine every element in the order the world size fixes (strata__world_op):
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
#include "drivers/comm_blocks.h"
#include "drivers/comm_internal.h"
#include "drivers/net.h"

/* Processes up to which the direct schedules are used. */
#define DIRECT_MAX STRATA__NET_DIRECT

/* Where messages land: a direct step receives up to STRATA__NET_DATA from each of 3 peers. */
#define IN_BYTES ((size_t)(DIRECT_MAX - 1) * STRATA__NET_DATA)

/* The transport's own state, in the first two cache lines of its memory; the staging follows. */
#define STATE 128

struct net_state {
        struct strata_net *net;
        unsigned char *link;  /* STRATA__NET_STAGE bytes: the link's */
        unsigned char *pack;  /* STRATA__NET_DATA: this process's local ranks' data, packed */
        unsigned char *in;    /* IN_BYTES: messages received */
        unsigned char *acc;   /* STRATA__NET_DATA: partial sums, a region per local rank */
        unsigned char *res;   /* STRATA__NET_DATA: a round's result */
        uint64_t seq;         /* steps so far */
        uint64_t msgs, bytes; /* messages and data bytes sent so far */
        int result[2]; /* local rank 0's move, by the collective's parity, for the others */
};
_Static_assert(sizeof(struct net_state) <= STATE, "the state is two cache lines");

static struct net_state *st(const struct strata_comm *c)
{
        return c->tp_state;
}

/* The arguments every process must agree on, at the start of each block. */
struct head {
        uint64_t seq;   /* steps so far: messages from another call are refused */
        uint64_t count;
        int32_t kind, dtype, op, root, status, ranks;
        int32_t bad;    /* butterfly: a refusal seen so far (STRATA_EINVAL), else 0 */
        int32_t who;    /* ...by or between which process */
        uint64_t lo, block; /* a collective over blocks: its geometry (else 0) */
};
_Static_assert(sizeof(struct head) <= STRATA__NET_HEAD, "the block header is 64 bytes");

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
        struct net_state *s = mem;

        if (cfg->net->size != cfg->world_size / cfg->local_size ||
            cfg->net->rank != cfg->rank0 / cfg->local_size)
                return strata__fail(STRATA_EINVAL, "comm init: the link joins %d processes "
                                                   "(this one %d), the configuration %d",
                                    cfg->net->size, cfg->net->rank,
                                    cfg->world_size / cfg->local_size);
        if (c->dev)
                return strata__fail(STRATA_ENOTSUP, "comm init: %s memory across processes",
                                    c->dev->name);
        *s = (struct net_state){ .net = cfg->net, .link = (unsigned char *)mem + STATE };
        s->pack = s->link + STRATA__NET_STAGE;
        s->in = s->pack + STRATA__NET_DATA;
        s->acc = s->in + IN_BYTES;
        s->res = s->acc + STRATA__NET_DATA;
        return STRATA_OK;
}

/* Elements of each of @p ways pieces of one exchange's data, whole cache lines each so slices
 * stay aligned. */
static size_t per_share(size_t es, size_t ways)
{
        size_t per = STRATA__NET_DATA / ways / 64 * 64 / es;

        return per ? per : 1;
}

/* Elements of each rank in one exchange: the block's data split among the local ranks. */
static size_t per_round(const struct strata_comm *c, size_t es)
{
        return per_share(es, (size_t)c->n);
}

/* The messages of one step. */
struct step {
        struct strata__net_msg s[STRATA__NET_MSGS], r[STRATA__NET_MSGS];
        int ns, nr;
};

static void to(struct step *x, int peer, const void *data, size_t bytes)
{
        x->s[x->ns++] = (struct strata__net_msg){ .peer = peer, .data = data, .bytes = bytes };
}

static void from(struct step *x, int peer, void *into, size_t bytes)
{
        x->r[x->nr++] = (struct strata__net_msg){ .peer = peer, .into = into, .bytes = bytes };
}

/* One step of this call with header @p h (its seq the step's number); counts what it sent. */
static int net_step(struct strata_comm *c, struct head *h, struct step *x)
{
        _Alignas(64) unsigned char head[STRATA__NET_HEAD] = { 0 };
        struct net_state *s = st(c);
        int rc;

        h->seq = ++s->seq;
        memcpy(head, h, sizeof(*h)); /* the link sends STRATA__NET_HEAD bytes */
        rc = s->net->ops->step(s->net, head, x->s, x->ns, x->r, x->nr, s->link,
                               c->group.timeout_s);
        s->msgs += (uint64_t)x->ns;
        for (int i = 0; i < x->ns; i++)
                s->bytes += x->s[i].bytes;
        if (rc != STRATA_OK)
                return rc;
        for (int i = 0; i < x->nr; i++) {
                struct head o;

                memcpy(&o, x->r[i].head, sizeof(o));
                if (o.seq != h->seq)
                        return strata__fail(STRATA_EFORMAT, "net: process %d is at step %llu, "
                                            "this one at %llu", x->r[i].peer,
                                            (unsigned long long)o.seq,
                                            (unsigned long long)h->seq);
        }
        return STRATA_OK;
}

/* Whether header @p o, from process @p p, agrees with this call's @p h. */
static int agrees(const struct head *h, const struct head *o)
{
        return o->kind == h->kind && o->count == h->count && o->dtype == h->dtype &&
               o->op == h->op && o->root == h->root && o->ranks == h->ranks &&
               o->lo == h->lo && o->block == h->block;
}

/*
 * One direct step of this call: header @p h, and out[p] (len[p] bytes) to each other process
 * p; in[p] then points at what process p sent this one. Checks every header: every process
 * sees every other's, so all reach the same verdict.
 */
static int exchange_to(struct strata_comm *c, struct head *h, const void *const *out,
                       const size_t *len, const unsigned char **in)
{
        struct strata_net *net = st(c)->net;
        struct step x = { .ns = 0 };

        for (int p = 0, j = 0; p < net->size; p++) {
                if (p == net->rank)
                        continue;
                to(&x, p, out[p], len[p]);
                from(&x, p, st(c)->in + (size_t)j++ * STRATA__NET_DATA, STRATA__NET_DATA);
        }
        STRATA_TRY(net_step(c, h, &x));
        for (int i = 0; i < x.nr; i++) {
                int p = x.r[i].peer;
                struct head o;

                in[p] = x.r[i].data;
                memcpy(&o, x.r[i].head, sizeof(o));
                if (o.status != STRATA_OK && h->status == STRATA_OK)
                        return strata__fail(STRATA_EINVAL, "process %d passed bad arguments", p);
                if (h->status != STRATA_OK)
                        continue;
                if (!agrees(h, &o))
                        return strata__fail(STRATA_EINVAL, "processes %d and %d disagree on the "
                                            "collective", net->rank, p);
        }
        return h->status;
}

/* The same @p bytes of @p mine to every process; in[rank] is @p mine. */
static int exchange(struct strata_comm *c, struct head *h, const void *mine, size_t bytes,
                    const unsigned char **in)
{
        const void *out[DIRECT_MAX];
        size_t len[DIRECT_MAX];

        for (int p = 0; p < st(c)->net->size; p++) {
                out[p] = mine;
                len[p] = bytes;
        }
        in[st(c)->net->rank] = mine;
        return exchange_to(c, h, out, len, in);
}

/*
 * This process's data for bytes [off, off + bytes) of every local rank's buffer, one after the
 * other: straight from the buffer when there is one rank, else gathered into the staging block.
 */
static const void *local_data(struct strata_comm *c, size_t off, size_t bytes)
{
        unsigned char *pack = st(c)->pack;

        for (int r = 0; r < c->n; r++) {
                const unsigned char *send =
                        (const unsigned char *)strata__comm_peer(c, 0, r)->send + off;

                if (c->n == 1)
                        return send;
                memcpy(pack + (size_t)r * bytes, send, bytes);
        }
        return pack;
}

/* Reduction rounds: each round exchanges every rank's slice [lo, hi) and reduces it. */
static int reduce_rounds(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = per_round(c, es);
        int n = c->n, P = st(c)->net->size, root_local = op->root - c->rank0;
        int o = strata__world_op(op->op, op->dtype, c->world);
        void *dst[STRATA_MAX_DEVICES];
        const void *src[STRATA_MAX_DEVICES * DIRECT_MAX];
        const unsigned char *data[DIRECT_MAX];
        int nd = 0;

        for (int r = 0; r < n; r++)
                if (op->kind == STRATA_COLL_ALL_REDUCE || r == root_local)
                        dst[nd++] = strata__comm_peer(c, 0, r)->recv;
        for (size_t lo = 0;; lo += per) {
                size_t hi = op->count - lo < per ? op->count : lo + per, bytes = (hi - lo) * es;

                STRATA_TRY(exchange(c, h, local_data(c, lo * es, bytes), bytes * (size_t)n,
                                    data));
                /* Global rank order: process 0's ranks, then process 1's, ... Pointers are
                 * offset by lo so the kernel indexes every source by element number. */
                for (int p = 0; p < P; p++)
                        for (int r = 0; r < n; r++)
                                src[p * n + r] = data[p] + (size_t)r * bytes - lo * es;
                if (nd) /* a reduce whose root is in another process: nothing to write here */
                        strata__reduce_many(op->dtype, o, dst, nd, src, P * n, lo, hi, 0);
                if (hi >= op->count)
                        return STRATA_OK;
        }
}

/* All-reduces from this size on are split among the processes (two exchanges, half the bytes). */
#define SPLIT_MIN ((size_t)64 << 10)

/* Process @p q's part [*a, *b) of elements [lo, hi): cache-line boundaries, as shm's slices. */
static void part(size_t lo, size_t hi, size_t es, int procs, int q, size_t *a, size_t *b)
{
        size_t line = 64 / es ? 64 / es : 1, n = hi - lo;
        size_t x = lo + n * (size_t)q / (size_t)procs, y = lo + n * (size_t)(q + 1) / (size_t)procs;

        x = (x + line - 1) / line * line;
        y = q == procs - 1 ? hi : (y + line - 1) / line * line;
        *a = x < hi ? x : hi;
        *b = y < hi ? y : hi;
}

/*
 * Large all-reduces, per round: every process p owns a part of the elements; each sends every
 * other process its local ranks' slices of that process's part (a reduce-scatter), reduces its
 * own part from every rank of every process in global rank order (so the bits are those of the
 * unsplit path), and sends the result to every process (an all-gather). Each process moves
 * (P-1)/P of the data each way instead of all of it to every peer.
 */
static int split_rounds(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = per_round(c, es);
        int n = c->n, P = st(c)->net->size, me = st(c)->net->rank;
        int o = strata__world_op(op->op, op->dtype, c->world);
        void *dst[STRATA_MAX_DEVICES];
        const void *src[STRATA_MAX_DEVICES * DIRECT_MAX], *out[DIRECT_MAX];
        const unsigned char *in[DIRECT_MAX];
        size_t len[DIRECT_MAX], a[DIRECT_MAX], b[DIRECT_MAX];
        unsigned char *pack = st(c)->pack;

        for (int r = 0; r < n; r++)
                dst[r] = strata__comm_peer(c, 0, r)->recv;
        for (size_t lo = 0;; lo += per) {
                size_t hi = op->count - lo < per ? op->count : lo + per;

                /* Reduce-scatter: process q gets every local rank's slice of its part; with
                 * several local ranks they are packed part by part, rank by rank. */
                for (int q = 0; q < P; q++) {
                        part(lo, hi, es, P, q, &a[q], &b[q]);
                        len[q] = (b[q] - a[q]) * es * (size_t)n;
                        if (n == 1) {
                                out[q] = (const unsigned char *)strata__comm_peer(c, 0, 0)->send +
                                         a[q] * es;
                                continue;
                        }
                        out[q] = pack + (a[q] - lo) * es * (size_t)n;
                        for (int r = 0; r < n; r++)
                                memcpy(pack + ((a[q] - lo) * (size_t)n +
                                               (size_t)r * (b[q] - a[q])) * es,
                                       (const unsigned char *)strata__comm_peer(c, 0, r)->send +
                                               a[q] * es,
                                       (b[q] - a[q]) * es);
                }
                in[me] = out[me];
                STRATA_TRY(exchange_to(c, h, out, len, in));
                for (int p = 0; p < P; p++)
                        for (int r = 0; r < n; r++)
                                src[p * n + r] = in[p] + (size_t)r * (b[me] - a[me]) * es -
                                                 a[me] * es;
                strata__reduce_many(op->dtype, o, dst, n, src, P * n, a[me], b[me], 0);
                /* All-gather: this process's part of the result to every other. */
                STRATA_TRY(exchange(c, h, (const unsigned char *)dst[0] + a[me] * es,
                                    (b[me] - a[me]) * es, in));
                for (int q = 0; q < P; q++)
                        for (int r = 0; q != me && r < n; r++)
                                memcpy((unsigned char *)dst[r] + a[q] * es, in[q],
                                       (b[q] - a[q]) * es);
                if (hi >= op->count)
                        return STRATA_OK;
        }
}

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
        struct strata_net *net = st(c)->net;
        unsigned char *acc = st(c)->pack;

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

/* broadcast (the root's process sends) and all_gather / gather (every process sends). */
static int copy_rounds(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = per_round(c, es);
        int n = c->n, P = st(c)->net->size, bcast = op->kind == STRATA_COLL_BROADCAST;
        int root_proc = op->root / n, root_local = op->root - c->rank0;
        const unsigned char *data[DIRECT_MAX];

        for (size_t lo = 0;; lo += per) {
                size_t hi = op->count - lo < per ? op->count : lo + per, bytes = (hi - lo) * es;
                const void *mine = NULL;
                size_t len = 0;

                if (!bcast) {
                        mine = local_data(c, lo * es, bytes);
                        len = bytes * (size_t)n;
                } else if (st(c)->net->rank == root_proc) {
                        mine = (const unsigned char *)strata__comm_peer(c, 0, root_local)->recv +
                               lo * es;
                        len = bytes;
                }
                STRATA_TRY(exchange(c, h, mine, len, data));
                for (int r = 0; r < n; r++) {
                        unsigned char *recv = strata__comm_peer(c, 0, r)->recv;

                        if (bcast) {
                                if (st(c)->net->rank != root_proc || r != root_local)
                                        memcpy(recv + lo * es, data[root_proc], bytes);
                                continue;
                        }
                        if (op->kind == STRATA_COLL_GATHER && c->rank0 + r != op->root)
                                continue;
                        for (int p = 0; p < P; p++)
                                for (int q = 0; q < n; q++)
                                        memmove(recv + ((size_t)(p * n + q) * op->count + lo) * es,
                                                data[p] + (size_t)q * bytes, bytes);
                }
                if (hi >= op->count)
                        return STRATA_OK;
        }
}

/*
 * reduce_scatter and scatter deal in regions: process q's ranks receive the blocks of global
 * ranks q * n .. q * n + n - 1, elements [q * n * count, (q + 1) * n * count) of every send
 * buffer. A round carries elements [lo, hi) of a region; local rank @p r's block of them is
 * [*a, *b) (empty when *a == *b).
 */
static void block_part(size_t lo, size_t hi, size_t count, int r, size_t *a, size_t *b)
{
        size_t x = count * (size_t)r, y = x + count;

        *a = x > lo ? x : lo;
        *b = y < hi ? y : hi;
        if (*a > *b)
                *a = *b;
}

/*
 * What this process sends in a reduce_scatter round: to every other process q, each local
 * rank's elements [lo, hi) of q's region; with several local ranks they are packed process by
 * process, rank by rank.
 */
static void rs_pack(struct strata_comm *c, const struct strata_coll *op, size_t lo, size_t hi,
                    const void **out, size_t *len)
{
        size_t es = strata_dtype_size(op->dtype), region = op->count * (size_t)c->n;
        size_t bytes = (hi - lo) * es;
        int n = c->n, me = st(c)->net->rank;
        unsigned char *pack = st(c)->pack;

        for (int q = 0, j = 0; q < st(c)->net->size; q++) {
                size_t from = ((size_t)q * region + lo) * es;

                out[q] = NULL;
                len[q] = q == me ? 0 : bytes * (size_t)n;
                if (q == me)
                        continue;
                if (n == 1) {
                        out[q] = (const unsigned char *)strata__comm_peer(c, 0, 0)->send + from;
                        continue;
                }
                out[q] = pack + (size_t)j * len[q];
                for (int r = 0; r < n; r++)
                        memcpy(pack + ((size_t)j * (size_t)n + (size_t)r) * bytes,
                               (const unsigned char *)strata__comm_peer(c, 0, r)->send + from,
                               bytes);
                j++;
        }
}

/*
 * Local rank @p r's part of a reduce_scatter round: its elements of [lo, hi) reduced from every
 * rank of every process in global rank order (this process's straight from the send buffers),
 * so the bits are those of one process's reduce_scatter.
 */
static void rs_reduce(struct strata_comm *c, const struct strata_coll *op,
                      const unsigned char *const *in, size_t lo, size_t hi, int r)
{
        size_t es = strata_dtype_size(op->dtype), region = op->count * (size_t)c->n, a, b;
        int n = c->n, P = st(c)->net->size, me = st(c)->net->rank;
        const void *src[STRATA_MAX_DEVICES * DIRECT_MAX];
        void *dst[1];

        block_part(lo, hi, op->count, r, &a, &b);
        if (a == b)
                return;
        dst[0] = (unsigned char *)strata__comm_peer(c, 0, r)->recv +
                 (a - op->count * (size_t)r) * es;
        for (int p = 0; p < P; p++)
                for (int s = 0; s < n; s++)
                        src[p * n + s] = p == me
                                ? (const unsigned char *)strata__comm_peer(c, 0, s)->send +
                                          ((size_t)me * region + a) * es
                                : in[p] + ((size_t)s * (hi - lo) + a - lo) * es;
        strata__reduce_many(op->dtype, strata__world_op(op->op, op->dtype, c->world), dst, 1, src,
                            P * n, 0, b - a, 0);
}

/*
 * reduce_scatter: each round, every process sends every other its local ranks' elements of
 * that process's region, and reduces its own region's round from what came in. In all, each
 * process sends each other n x n x count elements (its n ranks' copies of the other's n
 * blocks) and receives as many: only the blocks its ranks receive, never the whole buffers.
 */
static int rs_rounds(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        int P = st(c)->net->size;
        size_t region = op->count * (size_t)c->n;
        size_t per = per_share(strata_dtype_size(op->dtype), (size_t)(P - 1) * (size_t)c->n);
        const void *out[DIRECT_MAX];
        const unsigned char *in[DIRECT_MAX];
        size_t len[DIRECT_MAX];

        for (size_t lo = 0;; lo += per) {
                size_t hi = region - lo < per ? region : lo + per;

                rs_pack(c, op, lo, hi, out, len);
                STRATA_TRY(exchange_to(c, h, out, len, in));
                for (int r = 0; r < c->n; r++)
                        rs_reduce(c, op, in, lo, hi, r);
                if (hi >= region)
                        return STRATA_OK;
        }
}

/* Elements [lo, hi) of this process's region, from @p from, into its local ranks' blocks. */
static void spread(struct strata_comm *c, const struct strata_coll *op, const unsigned char *from,
                   size_t lo, size_t hi)
{
        size_t es = strata_dtype_size(op->dtype), a, b;

        for (int r = 0; r < c->n; r++) {
                block_part(lo, hi, op->count, r, &a, &b);
                if (a < b)
                        memcpy((unsigned char *)strata__comm_peer(c, 0, r)->recv +
                                       (a - op->count * (size_t)r) * es,
                               from + (a - lo) * es, (b - a) * es);
        }
}

/*
 * scatter: each round, the root's process sends every other process elements [lo, hi) of that
 * process's region of the root's buffer (n x count elements to each in all, what its ranks
 * receive); the others send nothing. The root's own process copies its region locally.
 */
static int scatter_rounds(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype), region = op->count * (size_t)c->n;
        int P = st(c)->net->size, me = st(c)->net->rank, root_proc = op->root / c->n;
        size_t per = per_share(es, (size_t)(P - 1));
        const unsigned char *send =
                me == root_proc ? strata__comm_peer(c, 0, op->root - c->rank0)->send : NULL;
        const void *out[DIRECT_MAX];
        const unsigned char *in[DIRECT_MAX];
        size_t len[DIRECT_MAX];

        for (size_t lo = 0;; lo += per) {
                size_t hi = region - lo < per ? region : lo + per;

                for (int q = 0; q < P; q++) {
                        out[q] = send ? send + ((size_t)q * region + lo) * es : NULL;
                        len[q] = send && q != me ? (hi - lo) * es : 0;
                }
                STRATA_TRY(exchange_to(c, h, out, len, in));
                spread(c, op, send ? send + ((size_t)me * region + lo) * es : in[root_proc], lo,
                       hi);
                if (hi >= region)
                        return STRATA_OK;
        }
}

/* ---- Collectives over blocks (comm_internal.h; docs/decisions/0045) ---- */

/* A call over blocks: its geometry, and this process's view of the span. */
struct span {
        const struct strata__blocks *geo;
        size_t count, es;
};

static struct span span_of(const struct strata_comm *c, const struct strata_coll *op)
{
        return (struct span){ strata__comm_blocks(c, 0, 0), op->count,
                              strata_dtype_size(op->dtype) };
}

/* [*a, *e) narrowed to [x, y) (empty, *a == *e, when they miss). */
static void clip(size_t x, size_t y, size_t *a, size_t *e)
{
        *a = *a > x ? *a : x;
        *e = *e < y ? *e : y;
        if (*a > *e)
                *a = *e;
}

/* Global rank @p g's piece of the span, whole (*pa: where it starts) and within [x, y). */
static void piece_in(const struct span *sp, int g, size_t x, size_t y, size_t *pa, size_t *a,
                     size_t *e)
{
        strata__blocks_piece(sp->geo, sp->count, g, pa, e);
        *a = *pa;
        clip(x, y, a, e);
}

/* Process @p q's region (its ranks' pieces, one after the other) within [x, y). */
static void region(const struct strata_comm *c, const struct span *sp, int q, size_t x,
                   size_t y, size_t *a, size_t *e)
{
        size_t t;

        strata__blocks_piece(sp->geo, sp->count, q * c->n, a, &t);
        strata__blocks_piece(sp->geo, sp->count, q * c->n + c->n - 1, &t, e);
        clip(x, y, a, e);
}

/* Local rank @p r's buffers, indexed by span element (a piece's buffer moved back by its start). */
static unsigned char *recv_at(const struct strata_comm *c, const struct span *sp, int r)
{
        const struct strata_coll *o = strata__comm_peer(c, 0, r);
        size_t pa, e;

        if (o->kind == (enum strata_coll_kind)STRATA__COLL_AG_BLOCKS || !o->recv)
                return o->recv; /* NULL: an empty piece, never written */
        strata__blocks_piece(sp->geo, sp->count, c->rank0 + r, &pa, &e);
        return (unsigned char *)o->recv - pa * sp->es;
}

static const unsigned char *send_at(const struct strata_comm *c, const struct span *sp, int r)
{
        const struct strata_coll *o = strata__comm_peer(c, 0, r);
        size_t pa, e;

        if (o->kind == (enum strata_coll_kind)STRATA__COLL_RS_BLOCKS || !o->send)
                return o->send; /* NULL: an empty piece, never read */
        strata__blocks_piece(sp->geo, sp->count, c->rank0 + r, &pa, &e);
        return (const unsigned char *)o->send - pa * sp->es;
}

/*
 * Direct reduce-scatter over blocks, per round [x, y) of the span: each process sends every
 * other its local ranks' elements of that process's region, and sums its own ranks' pieces
 * from every rank in global rank order (the world's order): (P-1)/P of the data each way.
 */
static int rsb_direct(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        struct span sp = span_of(c, op);
        size_t es = sp.es, per = per_round(c, es), a[DIRECT_MAX], e[DIRECT_MAX], len[DIRECT_MAX];
        int n = c->n, P = st(c)->net->size, me = st(c)->net->rank;
        int o = strata__world_op(op->op, op->dtype, c->world);
        const void *out[DIRECT_MAX], *src[STRATA_MAX_DEVICES * DIRECT_MAX];
        const unsigned char *in[DIRECT_MAX];
        unsigned char *pack = st(c)->pack;

        for (size_t x = 0;; x += per) {
                size_t y = op->count - x < per ? op->count : x + per;

                for (int q = 0; q < P; q++) {
                        size_t m;

                        region(c, &sp, q, x, y, &a[q], &e[q]);
                        m = e[q] - a[q];
                        len[q] = q == me ? 0 : m * es * (size_t)n;
                        out[q] = n == 1 ? send_at(c, &sp, 0) + a[q] * es
                                        : pack + (a[q] - x) * es * (size_t)n;
                        for (int r = 0; n > 1 && q != me && r < n; r++)
                                memcpy(pack + ((a[q] - x) * (size_t)n + (size_t)r * m) * es,
                                       send_at(c, &sp, r) + a[q] * es, m * es);
                }
                in[me] = NULL;
                STRATA_TRY(exchange_to(c, h, out, len, in));
                for (int r = 0; r < n; r++) {
                        size_t pa, ra, re, m = e[me] - a[me];
                        void *dst[1];

                        piece_in(&sp, c->rank0 + r, x, y, &pa, &ra, &re);
                        if (ra == re)
                                continue;
                        dst[0] = recv_at(c, &sp, r) + ra * es;
                        for (int p = 0; p < P; p++)
                                for (int q = 0; q < n; q++)
                                        src[p * n + q] = p == me
                                                ? send_at(c, &sp, q) + ra * es
                                                : in[p] + ((size_t)q * m + ra - a[me]) * es;
                        strata__reduce_many(op->dtype, o, dst, 1, src, P * n, 0, re - ra, 0);
                }
                if (y >= op->count)
                        return STRATA_OK;
        }
}

/* Direct all-gather over blocks, per round: this process's region to every process. */
static int agb_direct(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        struct span sp = span_of(c, op);
        size_t es = sp.es, per = STRATA__NET_DATA / es;
        int n = c->n, P = st(c)->net->size, me = st(c)->net->rank;
        const unsigned char *data[DIRECT_MAX];
        unsigned char *pack = st(c)->pack;

        for (size_t x = 0;; x += per) {
                size_t y = op->count - x < per ? op->count : x + per, ma, me_e;
                const void *mine;

                region(c, &sp, me, x, y, &ma, &me_e);
                mine = me_e > ma ? send_at(c, &sp, 0) + ma * es : NULL;
                for (int r = 0; n > 1 && r < n; r++) {
                        size_t pa, ra, re;

                        piece_in(&sp, c->rank0 + r, x, y, &pa, &ra, &re);
                        if (re > ra)
                                memcpy(pack + (ra - ma) * es, send_at(c, &sp, r) + ra * es,
                                       (re - ra) * es);
                        mine = pack;
                }
                STRATA_TRY(exchange(c, h, mine, (me_e - ma) * es, data));
                for (int r = 0; r < n; r++)
                        for (int p = 0; p < P; p++) {
                                size_t pa, pe;

                                region(c, &sp, p, x, y, &pa, &pe);
                                if (pe > pa)
                                        memmove(recv_at(c, &sp, r) + pa * es, data[p],
                                                (pe - pa) * es);
                        }
                if (y >= op->count)
                        return STRATA_OK;
        }
}

/* ---- Butterfly schedules, from 5 processes ---- */

/* The world as recursive halving sees it: W = q + r ranks, q = 2^k. */
struct world {
        int W, q, r, k;
        int n, g0, me; /* local ranks, the first's global rank, this process */
        size_t lane;   /* bytes of acc and in per local rank */
};

static struct world world_of(const struct strata_comm *c)
{
        struct world w = { .W = c->world, .q = 1, .n = c->n, .g0 = c->rank0,
                           .me = st(c)->net->rank };

        while (w.q * 2 <= w.W) {
                w.q *= 2;
                w.k++;
        }
        w.r = w.W - w.q;
        w.lane = STRATA__NET_DATA / (size_t)w.n / 64 * 64;
        return w;
}

/* Virtual rank of global rank @p g (-1: the odd rank of one of the first r pairs), and back. */
static int vrank(const struct world *w, int g)
{
        if (g >= 2 * w->r)
                return g - w->r;
        return g & 1 ? -1 : g / 2;
}

static int grank(const struct world *w, int v)
{
        return v < w->r ? 2 * v : v + w->r;
}

static int is_local(const struct world *w, int g)
{
        return g >= w->g0 && g < w->g0 + w->n;
}

/* A butterfly step's messages: local rank @p l sends @p bytes of @p data to global rank @p g
 * (when in another process) and receives up to its lane from it. */
static void swap(struct step *x, const struct world *w, struct net_state *s, int l, int g,
                 const void *data, size_t bytes, int *rix)
{
        if (is_local(w, g))
                return;
        to(x, g / w->n, data, bytes);
        rix[l] = x->nr;
        from(x, g / w->n, s->in + (size_t)l * w->lane, w->lane);
}

/* Spread what the received headers say into @p h: the first refusal seen, and by whom. */
static void hear(struct head *h, const struct step *x)
{
        for (int i = 0; i < x->nr && !h->bad; i++) {
                struct head o;

                memcpy(&o, x->r[i].head, sizeof(o));
                if (o.bad) {
                        h->bad = o.bad;
                        h->who = o.who;
                } else if (o.status != STRATA_OK || !agrees(h, &o)) {
                        h->bad = STRATA_EINVAL;
                        h->who = x->r[i].peer;
                }
        }
}

/* A reduction riding on a schedule: elements [0, m) from each local rank's @p src. */
struct red {
        enum strata_dtype dt;
        int cop; /* how two partial sums combine */
        size_t es, m;
        const unsigned char *src[STRATA_MAX_DEVICES];
        const unsigned char *cur[STRATA_MAX_DEVICES]; /* each virtual rank's partial sums */
};

/* dst[0..nd) over [a, b) = lower + upper, pointers at element 0 of the round. */
static void combine(const struct red *d, unsigned char *const *dst, int nd,
                    const unsigned char *lower, const unsigned char *upper, size_t a, size_t b)
{
        const void *src[2] = { lower, upper };

        strata__reduce_many(d->dt, d->cop, (void *const *)dst, nd, src, 2, a, b, 0);
}

/*
 * The first r pairs fold: each odd rank's data to its even one, which sums (even + odd).
 * Without pairs (r 0) nothing moves: each rank's own data is its sum so far.
 */
static int pre_step(struct strata_comm *c, struct head *h, const struct world *w, struct red *d)
{
        struct net_state *s = st(c);
        struct step x = { .ns = 0 };
        int rix[STRATA_MAX_DEVICES];
        size_t bytes = d ? d->m * d->es : 0;

        if (!w->r) {
                for (int l = 0; d && l < w->n; l++)
                        d->cur[l] = d->src[l];
                return STRATA_OK;
        }
        for (int l = 0; l < w->n; l++) {
                int g = w->g0 + l;

                if (d)
                        d->cur[l] = vrank(w, g) < 0 ? NULL : d->src[l];
                if (g < 2 * w->r)
                        swap(&x, w, s, l, g ^ 1, d ? d->src[l] : NULL, g & 1 ? bytes : 0, rix);
        }
        STRATA_TRY(net_step(c, h, &x));
        hear(h, &x);
        for (int l = 0; d && l < w->n; l++) {
                int g = w->g0 + l;
                unsigned char *acc = s->acc + (size_t)l * w->lane;

                if (g >= 2 * w->r || g & 1)
                        continue;
                combine(d, &acc, 1, d->src[l],
                        is_local(w, g + 1) ? d->src[l + 1] : x.r[rix[l]].data, 0, d->m);
                d->cur[l] = acc;
        }
        return STRATA_OK;
}

/* The even rank of each first pair sends the result (@p m elements of @p sum) to the odd one;
 * a process whose ranks are all such odd ones gets it in @p *sum. Nothing without pairs. */
static int post_step(struct strata_comm *c, struct head *h, const struct world *w,
                     const struct red *d, const unsigned char **sum)
{
        struct net_state *s = st(c);
        struct step x = { .ns = 0 };
        int rix[STRATA_MAX_DEVICES] = { -1 };
        size_t bytes = d ? d->m * d->es : 0;

        if (!w->r)
                return STRATA_OK;
        for (int l = 0; l < w->n; l++) {
                int g = w->g0 + l;

                rix[l] = -1;
                if (g < 2 * w->r)
                        swap(&x, w, s, l, g ^ 1, *sum, g & 1 ? 0 : bytes, rix);
        }
        STRATA_TRY(net_step(c, h, &x));
        hear(h, &x);
        for (int l = 0; l < w->n && !*sum; l++)
                if (rix[l] >= 0 && (w->g0 + l) & 1)
                        *sum = x.r[rix[l]].data;
        return STRATA_OK;
}

/*
 * Recursive doubling over the virtual ranks: at distance 1, 2, ..., q/2 each virtual rank
 * swaps its partial sums with its partner and both keep (lower + upper). With @p d NULL, the
 * headers alone. A pair in one process is a local sum, done once into both partials.
 */
static int doubling(struct strata_comm *c, struct head *h, const struct world *w, struct red *d)
{
        struct net_state *s = st(c);

        for (int dist = 1; dist < w->q; dist *= 2) {
                struct step x = { .ns = 0 };
                int rix[STRATA_MAX_DEVICES];

                for (int l = 0; l < w->n; l++) {
                        int v = vrank(w, w->g0 + l);

                        if (v >= 0)
                                swap(&x, w, s, l, grank(w, v ^ dist), d ? d->cur[l] : NULL,
                                     d ? d->m * d->es : 0, rix);
                }
                STRATA_TRY(net_step(c, h, &x));
                hear(h, &x);
                for (int l = 0; d && l < w->n; l++) {
                        int v = vrank(w, w->g0 + l), gu, lu;
                        unsigned char *acc[2];
                        const unsigned char *other;

                        if (v < 0)
                                continue;
                        gu = grank(w, v ^ dist);
                        lu = gu - w->g0;
                        acc[0] = s->acc + (size_t)l * w->lane;
                        if (is_local(w, gu)) {
                                if (v & dist)
                                        continue; /* done by the lower one */
                                acc[1] = s->acc + (size_t)lu * w->lane;
                                combine(d, acc, 2, d->cur[l], d->cur[lu], 0, d->m);
                                d->cur[l] = acc[0];
                                d->cur[lu] = acc[1];
                                continue;
                        }
                        other = x.r[rix[l]].data;
                        combine(d, acc, 1, v & dist ? other : d->cur[l],
                                v & dist ? d->cur[l] : other, 0, d->m);
                        d->cur[l] = acc[0];
                }
        }
        return STRATA_OK;
}

/*
 * The butterfly every collective of 5 processes or more starts with: the pairs fold, doubling,
 * the pairs unfold; k + 2 steps (k without pairs). Its headers bring every process's
 * arguments and refusals to every process; with @p d, a small reduction rides on it and
 * *sum points at its result. The verdict is the same everywhere.
 */
static int butterfly(struct strata_comm *c, struct head *h, struct red *d,
                     const unsigned char **sum)
{
        struct world w = world_of(c);

        *sum = NULL;
        STRATA_TRY(pre_step(c, h, &w, d));
        STRATA_TRY(doubling(c, h, &w, d));
        for (int l = 0; d && l < w.n && !*sum; l++)
                *sum = d->cur[l];
        STRATA_TRY(post_step(c, h, &w, d, sum));
        if (!h->bad)
                return STRATA_OK;
        if (h->status != STRATA_OK)
                return h->status;
        return strata__fail(STRATA_EINVAL, "process %d passed bad arguments, or processes "
                            "disagree on the collective", h->who);
}

/* Virtual rank @p v's segment of [0, m) before halving step @p j: halved j times. */
static void segment(const struct red *d, int v, int j, size_t *a, size_t *b)
{
        size_t line = 64 / d->es ? 64 / d->es : 1;

        *a = 0;
        *b = d->m;
        for (int i = 0; i < j; i++) {
                size_t mid = *a + ((*b - *a) / 2 + line - 1) / line * line;

                if (mid > *b)
                        mid = *b;
                if (v >> i & 1)
                        *a = mid;
                else
                        *b = mid;
        }
}

/*
 * Recursive halving (a reduce-scatter): at distance 1, 2, ..., q/2 each virtual rank sends
 * its partner the half of its segment the partner keeps and sums the half it keeps (lower +
 * upper); at the end virtual rank v holds the sum of its segment, copied into res.
 */
static int halving(struct strata_comm *c, struct head *h, const struct world *w, struct red *d)
{
        struct net_state *s = st(c);

        for (int j = 0; j < w->k; j++) {
                struct step x = { .ns = 0 };
                int rix[STRATA_MAX_DEVICES], dist = 1 << j;

                for (int l = 0; l < w->n; l++) {
                        int v = vrank(w, w->g0 + l);
                        size_t a, b;

                        if (v < 0)
                                continue;
                        segment(d, v ^ dist, j + 1, &a, &b); /* what the partner keeps */
                        swap(&x, w, s, l, grank(w, v ^ dist), d->cur[l] + a * d->es,
                             (b - a) * d->es, rix);
                }
                STRATA_TRY(net_step(c, h, &x));
                for (int l = 0; l < w->n; l++) {
                        int v = vrank(w, w->g0 + l), gu;
                        unsigned char *acc = s->acc + (size_t)l * w->lane;
                        const unsigned char *other;
                        size_t a, b;

                        if (v < 0)
                                continue;
                        gu = grank(w, v ^ dist);
                        segment(d, v, j + 1, &a, &b);
                        other = is_local(w, gu) ? d->cur[gu - w->g0]
                                                : (const unsigned char *)x.r[rix[l]].data - a * d->es;
                        combine(d, &acc, 1, v & dist ? other : d->cur[l],
                                v & dist ? d->cur[l] : other, a, b);
                }
                for (int l = 0; l < w->n; l++)
                        if (vrank(w, w->g0 + l) >= 0)
                                d->cur[l] = s->acc + (size_t)l * w->lane;
        }
        for (int l = 0; l < w->n; l++) {
                int v = vrank(w, w->g0 + l);
                size_t a, b;

                if (v < 0)
                        continue;
                segment(d, v, w->k, &a, &b);
                memcpy(s->res + a * d->es, d->cur[l] + a * d->es, (b - a) * d->es);
        }
        return STRATA_OK;
}

/* Recursive doubling of segments (an all-gather) into res: at distance q/2, ..., 1. */
static int gathering(struct strata_comm *c, struct head *h, const struct world *w,
                     const struct red *d)
{
        struct net_state *s = st(c);

        for (int j = w->k - 1; j >= 0; j--) {
                struct step x = { .ns = 0 };
                int dist = 1 << j;

                for (int l = 0; l < w->n; l++) {
                        int v = vrank(w, w->g0 + l), gu;
                        size_t a, b, pa, pb;

                        if (v < 0 || is_local(w, (gu = grank(w, v ^ dist))))
                                continue;
                        segment(d, v, j + 1, &a, &b);
                        segment(d, v ^ dist, j + 1, &pa, &pb);
                        to(&x, gu / w->n, s->res + a * d->es, (b - a) * d->es);
                        from(&x, gu / w->n, s->res + pa * d->es, (pb - pa) * d->es);
                }
                STRATA_TRY(net_step(c, h, &x));
                for (int i = 0; i < x.nr; i++)
                        if (x.r[i].data != x.r[i].into)
                                memcpy(x.r[i].into, x.r[i].data, x.r[i].bytes);
        }
        return STRATA_OK;
}

/* A large reduction's round: the pairs fold, halving, gathering, the pairs unfold; the sum in
 * res (or where the post step left it: *sum). */
static int tree_round(struct strata_comm *c, struct head *h, struct red *d,
                      const unsigned char **sum)
{
        struct world w = world_of(c);

        STRATA_TRY(pre_step(c, h, &w, d));
        STRATA_TRY(halving(c, h, &w, d));
        STRATA_TRY(gathering(c, h, &w, d));
        *sum = NULL;
        for (int l = 0; l < w.n && !*sum; l++)
                if (vrank(&w, w.g0 + l) >= 0)
                        *sum = st(c)->res;
        STRATA_TRY(post_step(c, h, &w, d, sum));
        return STRATA_OK;
}

/* Whether the butterfly can sum @p op in the world's order: not half precision (summed in
 * f32 in rank order), and the pairwise tree only where it is halving's (2^k ranks). */
static int tree_op(const struct strata_coll *op, int world)
{
        if (op->dtype == STRATA_BF16 || op->dtype == STRATA_F16)
                return 0;
        return op->op != STRATA_OP_SUM_TREE || !(world & (world - 1)) ||
               op->dtype == STRATA_I32 || op->dtype == STRATA_I64;
}

static void red_init(struct red *d, const struct strata_comm *c, const struct strata_coll *op)
{
        d->dt = op->dtype;
        d->es = strata_dtype_size(op->dtype);
        d->cop = op->op == STRATA_OP_MEAN || op->op == STRATA_OP_SUM_TREE ? STRATA__SUM
                                                                           : (int)op->op;
        (void)c;
}

/* Elements [0, m) of @p sum into @p to: copied, or divided by the world for a mean (as the
 * kernels' mean divides the sum). */
#define MEAN_OF(T)                                                                             \
        do {                                                                                   \
                for (size_t i = 0; i < m; i++)                                                 \
                        ((T *)out)[i] = (T)(((const T *)sum)[i] / (T)world);                   \
        } while (0)

static void deliver(const struct strata_coll *op, int world, void *out, const void *sum,
                    size_t m)
{
        if (op->op != STRATA_OP_MEAN) {
                if (out != sum)
                        memcpy(out, sum, m * strata_dtype_size(op->dtype));
        } else if (op->dtype == STRATA_F32) {
                MEAN_OF(float);
        } else if (op->dtype == STRATA_F64) {
                MEAN_OF(double);
        } else if (op->dtype == STRATA_I32) {
                MEAN_OF(int32_t);
        } else {
                MEAN_OF(int64_t);
        }
}

/* A reduction's result for elements [lo, lo + m): every local rank's, or the root's. */
static void finish(struct strata_comm *c, const struct strata_coll *op, const unsigned char *sum,
                   size_t lo, size_t m)
{
        size_t es = strata_dtype_size(op->dtype);

        for (int r = 0; r < c->n; r++)
                if (op->kind == STRATA_COLL_ALL_REDUCE || c->rank0 + r == op->root)
                        deliver(op, c->world, (unsigned char *)strata__comm_peer(c, 0, r)->recv +
                                                      lo * es, sum, m);
}

/* Elements per round of a large reduction: every local rank's partial sums in its lane. */
static size_t tree_per(const struct strata_comm *c, size_t es)
{
        return world_of(c).lane / es;
}

/* all_reduce and reduce, round by round after the butterfly agreed. */
static int tree_reduce(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = tree_per(c, es);
        struct red d;
        const unsigned char *sum;

        red_init(&d, c, op);
        for (size_t lo = 0; lo < op->count; lo += per) {
                d.m = op->count - lo < per ? op->count - lo : per;
                for (int r = 0; r < c->n; r++)
                        d.src[r] = (const unsigned char *)strata__comm_peer(c, 0, r)->send +
                                   lo * es;
                STRATA_TRY(tree_round(c, h, &d, &sum));
                finish(c, op, sum, lo, d.m);
        }
        return STRATA_OK;
}

/* reduce_scatter: the whole buffer reduced round by round, each local rank keeping its block. */
static int tree_reduce_scatter(struct strata_comm *c, const struct strata_coll *op,
                               struct head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = tree_per(c, es);
        size_t all = op->count * (size_t)c->world;
        struct red d;
        const unsigned char *sum;

        red_init(&d, c, op);
        for (size_t lo = 0; lo < all; lo += per) {
                d.m = all - lo < per ? all - lo : per;
                for (int r = 0; r < c->n; r++)
                        d.src[r] = (const unsigned char *)strata__comm_peer(c, 0, r)->send +
                                   lo * es;
                STRATA_TRY(tree_round(c, h, &d, &sum));
                for (int r = 0; r < c->n; r++) {
                        size_t x = op->count * (size_t)(c->rank0 + r), y = x + op->count;
                        size_t a = x > lo ? x : lo, b = y < lo + d.m ? y : lo + d.m;

                        if (a < b)
                                deliver(op, c->world,
                                        (unsigned char *)strata__comm_peer(c, 0, r)->recv +
                                                (a - x) * es,
                                        sum + (a - lo) * es, b - a);
                }
        }
        return STRATA_OK;
}

/*
 * A binomial tree from process @p root: @p bytes at @p buf (the root's data; elsewhere where
 * it lands) reach every process in ceil(log2 P) steps.
 */
static int binomial(struct strata_comm *c, struct head *h, int root, unsigned char *buf,
                    const unsigned char *from_root, size_t bytes)
{
        int P = st(c)->net->size, me = st(c)->net->rank, rel = (me - root + P) % P;

        for (int mask = 1; mask < P; mask *= 2) {
                struct step x = { .ns = 0 };

                if (rel < mask && rel + mask < P)
                        to(&x, (rel + mask + root) % P, rel ? buf : from_root, bytes);
                else if (rel >= mask && rel < 2 * mask)
                        from(&x, (rel - mask + root) % P, buf, bytes);
                STRATA_TRY(net_step(c, h, &x));
                if (x.nr && x.r[0].data != buf)
                        memcpy(buf, x.r[0].data, x.r[0].bytes);
        }
        return STRATA_OK;
}

/* broadcast: the root's buffer, a round of at most STRATA__NET_DATA at a time. */
static int tree_broadcast(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = STRATA__NET_DATA / es;
        int root_proc = op->root / c->n, mine = st(c)->net->rank == root_proc;
        unsigned char *root_buf = mine ? strata__comm_peer(c, 0, op->root - c->rank0)->recv
                                       : NULL;

        for (size_t lo = 0; lo < op->count; lo += per) {
                size_t m = op->count - lo < per ? op->count - lo : per;
                unsigned char *buf = mine ? root_buf + lo * es : st(c)->res;

                STRATA_TRY(binomial(c, h, root_proc, buf, buf, m * es));
                for (int r = 0; r < c->n; r++) {
                        unsigned char *recv = strata__comm_peer(c, 0, r)->recv;

                        if (recv + lo * es != buf)
                                memcpy(recv + lo * es, buf, m * es);
                }
        }
        return STRATA_OK;
}

/* scatter: the root's whole send buffer through the tree, round by round; each process keeps
 * its ranks' blocks. */
static int tree_scatter(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = STRATA__NET_DATA / es;
        size_t all = op->count * (size_t)c->world;
        int root_proc = op->root / c->n, mine = st(c)->net->rank == root_proc;
        const unsigned char *send =
                mine ? strata__comm_peer(c, 0, op->root - c->rank0)->send : NULL;

        for (size_t lo = 0; lo < all; lo += per) {
                size_t m = all - lo < per ? all - lo : per;

                STRATA_TRY(binomial(c, h, root_proc, st(c)->res, send ? send + lo * es : NULL,
                                    m * es));
                for (int r = 0; r < c->n; r++) {
                        size_t x = op->count * (size_t)(c->rank0 + r), y = x + op->count;
                        size_t a = x > lo ? x : lo, b = y < lo + m ? y : lo + m;
                        const unsigned char *got = send ? send + a * es
                                                        : st(c)->res + (a - lo) * es;

                        if (a < b)
                                memcpy((unsigned char *)strata__comm_peer(c, 0, r)->recv +
                                               (a - x) * es,
                                       got, (b - a) * es);
                }
        }
        return STRATA_OK;
}

/*
 * all_gather and gather: Bruck's dissemination over processes, a round of every rank's
 * elements [lo, hi) at a time. res holds blocks rotated (position j: process me + j), so each
 * step sends one contiguous piece; at the end they are unpacked into every local rank's
 * receive buffer (gather: the root's only).
 */
static int tree_gather(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype);
        size_t per = STRATA__NET_DATA / ((size_t)c->world * es);
        int P = st(c)->net->size, me = st(c)->net->rank, n = c->n;
        unsigned char *res = st(c)->res;

        per = per ? per : 1;
        for (size_t lo = 0; lo < op->count; lo += per) {
                size_t m = op->count - lo < per ? op->count - lo : per, blk = (size_t)n * m * es;

                for (int r = 0; r < n; r++)
                        memcpy(res + (size_t)r * m * es,
                               (const unsigned char *)strata__comm_peer(c, 0, r)->send + lo * es,
                               m * es);
                for (int dist = 1; dist < P; dist *= 2) {
                        struct step x = { .ns = 0 };
                        size_t cnt = (size_t)(dist < P - dist ? dist : P - dist);

                        to(&x, (me - dist + P) % P, res, cnt * blk);
                        from(&x, (me + dist) % P, res + (size_t)dist * blk, cnt * blk);
                        STRATA_TRY(net_step(c, h, &x));
                        if (x.r[0].data != x.r[0].into)
                                memcpy(x.r[0].into, x.r[0].data, x.r[0].bytes);
                }
                for (int r = 0; r < n; r++) {
                        unsigned char *recv = strata__comm_peer(c, 0, r)->recv;

                        if (op->kind == STRATA_COLL_GATHER && c->rank0 + r != op->root)
                                continue;
                        for (int j = 0; j < P; j++)
                                for (int q = 0, p = (me + j) % P; q < n; q++)
                                        memcpy(recv + ((size_t)(p * n + q) * op->count + lo) * es,
                                               res + (size_t)j * blk + (size_t)q * m * es,
                                               m * es);
                }
        }
        return STRATA_OK;
}

/*
 * A reduce-scatter over blocks as recursive halving whose segments are the owners' pieces:
 * each round's span, after the pairs fold, is laid out with virtual rank u's pieces at
 * position bitrev(u) (u's global ranks' pieces, a pair's two), so the ranks that keep a
 * half after step j (those equal to v in bits 0..j) hold one contiguous run of positions and
 * the halves are the pieces they own. Each element is combined as halving combines it (lower +
 * upper, distance 1 first), so its bits are the world's order whatever the cut; virtual rank
 * v ends with its own pieces alone: about (p-1)/p of the data each way, k (+2) steps a round.
 */
static int bitrev(int v, int k)
{
        int x = 0;

        for (int i = 0; i < k; i++)
                x |= (v >> i & 1) << (k - 1 - i);
        return x;
}

/* Virtual rank @p u's elements of round [x, y), relative to x: its global ranks' pieces. */
static void vpiece(const struct world *w, const struct span *sp, size_t x, size_t y, int u,
                   size_t *a, size_t *e)
{
        int g = grank(w, u);
        size_t t;

        strata__blocks_piece(sp->geo, sp->count, g, a, &t);
        strata__blocks_piece(sp->geo, sp->count, u < w->r ? g + 1 : g, &t, e);
        clip(x, y, a, e);
        *a -= x;
        *e -= x;
}

/* In the permuted round: the elements of the virtual ranks equal to @p v in bits 0..j-1. */
static void vsegment(const struct world *w, const struct span *sp, size_t x, size_t y, int v,
                     int j, size_t *a, size_t *e)
{
        int start = bitrev(v & ((1 << j) - 1), j) << (w->k - j), end = start + (1 << (w->k - j));

        *a = *e = 0;
        for (int p = 0; p < end; p++) {
                size_t ua, ue;

                vpiece(w, sp, x, y, bitrev(p, w->k), &ua, &ue);
                if (p < start)
                        *a += ue - ua;
                *e += ue - ua;
        }
}

/* rsb's halving steps: as halving(), the segments the owners' pieces (vsegment). */
static int rsb_halving(struct strata_comm *c, struct head *h, const struct world *w,
                       const struct span *sp, struct red *d, size_t x, size_t y)
{
        struct net_state *s = st(c);
        size_t es = sp->es;

        for (int j = 0; j < w->k; j++) {
                struct step xs = { .ns = 0 };
                int rix[STRATA_MAX_DEVICES], dist = 1 << j;

                for (int l = 0; l < w->n; l++) {
                        int v = vrank(w, w->g0 + l);
                        size_t a, b;

                        if (v < 0)
                                continue;
                        vsegment(w, sp, x, y, v ^ dist, j + 1, &a, &b); /* the partner's */
                        swap(&xs, w, s, l, grank(w, v ^ dist), d->cur[l] + a * es, (b - a) * es,
                             rix);
                }
                STRATA_TRY(net_step(c, h, &xs));
                for (int l = 0; l < w->n; l++) {
                        int v = vrank(w, w->g0 + l), gu;
                        unsigned char *acc = s->acc + (size_t)l * w->lane;
                        const unsigned char *other;
                        size_t a, b;

                        if (v < 0)
                                continue;
                        gu = grank(w, v ^ dist);
                        vsegment(w, sp, x, y, v, j + 1, &a, &b);
                        other = is_local(w, gu) ? d->cur[gu - w->g0]
                                                : (const unsigned char *)xs.r[rix[l]].data - a * es;
                        combine(d, &acc, 1, v & dist ? other : d->cur[l],
                                v & dist ? d->cur[l] : other, a, b);
                }
                for (int l = 0; l < w->n; l++)
                        if (vrank(w, w->g0 + l) >= 0)
                                d->cur[l] = s->acc + (size_t)l * w->lane;
        }
        return STRATA_OK;
}

/* Each virtual rank's sum into its ranks' receive buffers; the odd rank of a pair in another
 * process gets its piece in one step (taken by every process when there are pairs). */
static int rsb_deliver(struct strata_comm *c, struct head *h, const struct world *w,
                       const struct span *sp, const struct strata_coll *op, size_t x, size_t y)
{
        struct net_state *s = st(c);
        struct step xs = { .ns = 0 };
        int rix[STRATA_MAX_DEVICES];
        size_t es = sp->es, pa, ra, re, a2, ra2, re2;

        for (int l = 0; l < w->n; l++) {
                int g = w->g0 + l, v = vrank(w, g);
                const unsigned char *sum;
                size_t A, B;

                rix[l] = -1;
                if (v < 0) {
                        if (!is_local(w, g - 1)) {
                                rix[l] = xs.nr;
                                from(&xs, (g - 1) / w->n, s->in + (size_t)l * w->lane, w->lane);
                        }
                        continue;
                }
                vsegment(w, sp, x, y, v, w->k, &A, &B);
                sum = s->acc + (size_t)l * w->lane + A * es;
                piece_in(sp, g, x, y, &pa, &ra, &re);
                if (re > ra)
                        deliver(op, c->world, recv_at(c, sp, l) + ra * es, sum, re - ra);
                if (g >= 2 * w->r)
                        continue;
                piece_in(sp, g + 1, x, y, &a2, &ra2, &re2);
                if (is_local(w, g + 1) && re2 > ra2)
                        deliver(op, c->world, recv_at(c, sp, l + 1) + ra2 * es,
                                sum + (re - ra) * es, re2 - ra2);
                else if (!is_local(w, g + 1))
                        to(&xs, (g + 1) / w->n, sum + (re - ra) * es, (re2 - ra2) * es);
        }
        if (w->r)
                STRATA_TRY(net_step(c, h, &xs));
        for (int l = 0; l < w->n; l++) {
                if (rix[l] < 0)
                        continue;
                piece_in(sp, w->g0 + l, x, y, &pa, &ra, &re);
                if (re > ra)
                        deliver(op, c->world, recv_at(c, sp, l) + ra * es, xs.r[rix[l]].data,
                                re - ra);
        }
        return STRATA_OK;
}

/*
 * Bytes on the critical path of a round's halving over the pieces (the largest segment any
 * rank keeps, step by step, and an odd rank's piece sent after): where one owner's piece holds
 * most of a round, every step moves nearly all of it (log2 P times the round), and a balanced
 * halving and doubling (2 x the round, then each owner keeps its part) moves less.
 */
static size_t rsb_cost(const struct world *w, const struct span *sp, size_t x, size_t y)
{
        size_t cost = 0, odd = 0, a, e;

        for (int j = 0; j < w->k; j++) {
                size_t kept = 0;

                for (int cl = 0; cl < 2 << j; cl++) {
                        size_t seg = 0;

                        for (int u = cl; u < w->q; u += 2 << j) {
                                vpiece(w, sp, x, y, u, &a, &e);
                                seg += e - a;
                        }
                        kept = seg > kept ? seg : kept;
                }
                cost += kept;
        }
        for (int u = 0; u < w->r; u++) { /* the unfold step: the largest odd piece */
                size_t pa;

                piece_in(sp, 2 * u + 1, x, y, &pa, &a, &e);
                odd = e - a > odd ? e - a : odd;
        }
        return cost + odd;
}

/* A round as a balanced all-reduce (tree_round), each local rank keeping its piece. */
static int rsb_whole(struct strata_comm *c, const struct strata_coll *op, struct head *h,
                     const struct span *sp, struct red *d, size_t x, size_t y)
{
        const unsigned char *sum;

        STRATA_TRY(tree_round(c, h, d, &sum));
        for (int l = 0; l < c->n; l++) {
                size_t pa, ra, re;

                piece_in(sp, c->rank0 + l, x, y, &pa, &ra, &re);
                if (re > ra)
                        deliver(op, c->world, recv_at(c, sp, l) + ra * sp->es,
                                sum + (ra - x) * sp->es, re - ra);
        }
        return STRATA_OK;
}

static int tree_rs_blocks(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        struct world w = world_of(c);
        struct net_state *s = st(c);
        struct span sp = span_of(c, op);
        size_t es = sp.es, per = w.lane / es;
        struct red d;

        red_init(&d, c, op);
        for (size_t x = 0; x < op->count; x += per) {
                size_t y = op->count - x < per ? op->count : x + per;

                d.m = y - x;
                for (int l = 0; l < w.n; l++)
                        d.src[l] = send_at(c, &sp, l) + x * es;
                if (rsb_cost(&w, &sp, x, y) > 2 * d.m) {
                        STRATA_TRY(rsb_whole(c, op, h, &sp, &d, x, y));
                        continue;
                }
                STRATA_TRY(pre_step(c, h, &w, &d));
                for (int l = 0; l < w.n; l++) { /* positions bitrev(u) */
                        unsigned char *lane = s->res + (size_t)l * w.lane;
                        size_t off = 0;

                        if (vrank(&w, w.g0 + l) < 0)
                                continue;
                        for (int p = 0; p < w.q; p++) {
                                size_t ua, ue;

                                vpiece(&w, &sp, x, y, bitrev(p, w.k), &ua, &ue);
                                memcpy(lane + off * es, d.cur[l] + ua * es, (ue - ua) * es);
                                off += ue - ua;
                        }
                        d.cur[l] = lane;
                }
                STRATA_TRY(rsb_halving(c, h, &w, &sp, &d, x, y));
                STRATA_TRY(rsb_deliver(c, h, &w, &sp, op, x, y));
        }
        return STRATA_OK;
}

/* Elements of the regions of processes me, me + 1, ..., me + j - 1 within [x, y). */
static size_t rot_off(const struct strata_comm *c, const struct span *sp, size_t x, size_t y,
                      int j)
{
        int P = st(c)->net->size, me = st(c)->net->rank;
        size_t off = 0, a, e;

        for (int i = 0; i < j; i++) {
                region(c, sp, (me + i) % P, x, y, &a, &e);
                off += e - a;
        }
        return off;
}

/*
 * An all-gather over blocks: Bruck's dissemination of the processes' regions, a round of the
 * span at a time, kept rotated in res (position j: process me + j) so each step sends one
 * contiguous run; ceil(log2 P) steps a round, each process receiving the span once.
 */
static int tree_ag_blocks(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        struct span sp = span_of(c, op);
        size_t es = sp.es, per = STRATA__NET_DATA / es;
        int P = st(c)->net->size, me = st(c)->net->rank, n = c->n;
        unsigned char *res = st(c)->res;

        for (size_t x = 0; x < op->count; x += per) {
                size_t y = op->count - x < per ? op->count : x + per, ma, mend, off = 0;

                region(c, &sp, me, x, y, &ma, &mend);
                for (int r = 0; r < n; r++) {
                        size_t pa, ra, re;

                        piece_in(&sp, c->rank0 + r, x, y, &pa, &ra, &re);
                        if (re > ra)
                                memcpy(res + (ra - ma) * es, send_at(c, &sp, r) + ra * es,
                                       (re - ra) * es);
                }
                for (int dist = 1; dist < P; dist *= 2) {
                        struct step xs = { .ns = 0 };
                        int cnt = dist < P - dist ? dist : P - dist;
                        size_t at = rot_off(c, &sp, x, y, dist);

                        to(&xs, (me - dist + P) % P, res, rot_off(c, &sp, x, y, cnt) * es);
                        from(&xs, (me + dist) % P, res + at * es,
                             (rot_off(c, &sp, x, y, dist + cnt) - at) * es);
                        STRATA_TRY(net_step(c, h, &xs));
                        if (xs.r[0].data != xs.r[0].into)
                                memcpy(xs.r[0].into, xs.r[0].data, xs.r[0].bytes);
                }
                for (int j = 0; j < P; j++) {
                        size_t pa, pe;

                        region(c, &sp, (me + j) % P, x, y, &pa, &pe);
                        for (int r = 0; r < n && pe > pa; r++)
                                memmove(recv_at(c, &sp, r) + pa * es, res + off * es,
                                        (pe - pa) * es);
                        off += pe - pa;
                }
        }
        return STRATA_OK;
}

/* Small reductions ride on the butterfly (recursive doubling) up to this many bytes. */
#define TREE_SMALL ((size_t)32 << 10)

/* Every collective of 5 processes or more: the butterfly, then the kind's schedule. */
static int tree_move(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype);
        int reduction = op->kind == STRATA_COLL_ALL_REDUCE || op->kind == STRATA_COLL_REDUCE;
        int ok = h->status == STRATA_OK && op->kind != STRATA_COLL_BARRIER && op->count;
        int small = ok && reduction && tree_op(op, c->world) &&
                    op->count * es <= TREE_SMALL && op->count * es <= world_of(c).lane;
        const unsigned char *sum;
        struct red d;

        if (h->status != STRATA_OK) {
                h->bad = h->status;
                h->who = st(c)->net->rank;
        }
        if (small) {
                red_init(&d, c, op);
                d.m = op->count;
                for (int r = 0; r < c->n; r++)
                        d.src[r] = strata__comm_peer(c, 0, r)->send;
        }
        STRATA_TRY(butterfly(c, h, small ? &d : NULL, &sum));
        if (small)
                finish(c, op, sum, 0, op->count);
        if (small || !ok)
                return STRATA_OK;
        if ((reduction || op->kind == STRATA_COLL_REDUCE_SCATTER ||
             (int)op->kind == STRATA__COLL_RS_BLOCKS) && !tree_op(op, c->world))
                return strata__fail(STRATA_ENOTSUP, "net: %s reductions across more than %d "
                                    "processes (docs/decisions/0035)",
                                    op->op == STRATA_OP_SUM_TREE ? "pairwise-tree" : "half-precision",
                                    DIRECT_MAX);
        switch ((int)op->kind) {
        case STRATA__COLL_RS_BLOCKS:
                return tree_rs_blocks(c, op, h);
        case STRATA__COLL_AG_BLOCKS:
                return tree_ag_blocks(c, op, h);
        case STRATA_COLL_ALL_REDUCE:
        case STRATA_COLL_REDUCE:
                return tree_reduce(c, op, h);
        case STRATA_COLL_REDUCE_SCATTER:
                return tree_reduce_scatter(c, op, h);
        case STRATA_COLL_BROADCAST:
                return tree_broadcast(c, op, h);
        case STRATA_COLL_SCATTER:
                return tree_scatter(c, op, h);
        default:
                return tree_gather(c, op, h);
        }
}

/*
 * Every collective of a communicator that spans processes, on every local rank, after the
 * local agreement (@p status). Local rank 0 does the exchanges for all; the others' buffers are
 * read and written through the descriptors they published, and they wait at the second meeting.
 */
static int net_move(struct strata_comm *c, int rank, const struct strata_coll *op, int status)
{
        struct head h = { .seq = 0, .count = op->count, .kind = (int32_t)op->kind,
                          .dtype = (int32_t)op->dtype, .op = (int32_t)op->op,
                          .root = (int32_t)op->root, .status = (int32_t)status,
                          .ranks = (int32_t)c->n };
        const unsigned char *data[DIRECT_MAX];
        int rc;

        if (rank != 0)
                return status;
        if (strata__coll_blocks((int)op->kind)) {
                h.lo = strata__comm_blocks(c, 0, 0)->lo;
                h.block = strata__comm_blocks(c, 0, 0)->block;
        }
        if (status == STRATA_OK && op->kind == STRATA_COLL_ALL_REDUCE && st(c)->net->native &&
            st(c)->net->ops->native_all_reduce && op->op != STRATA_OP_MEAN &&
            op->op != STRATA_OP_SUM_TREE && op->dtype != STRATA_BF16 && op->dtype != STRATA_F16)
                rc = reduce_native(c, op);
        else if (st(c)->net->size > DIRECT_MAX)
                rc = tree_move(c, op, &h);
        else if (status != STRATA_OK || op->kind == STRATA_COLL_BARRIER || !op->count)
                rc = exchange(c, &h, NULL, 0, data);
        else if (op->kind == STRATA_COLL_ALL_REDUCE &&
                 op->count * strata_dtype_size(op->dtype) >= SPLIT_MIN)
                rc = split_rounds(c, op, &h);
        else if (op->kind == STRATA_COLL_ALL_REDUCE || op->kind == STRATA_COLL_REDUCE)
                rc = reduce_rounds(c, op, &h);
        else if ((int)op->kind == STRATA__COLL_RS_BLOCKS)
                rc = rsb_direct(c, op, &h);
        else if ((int)op->kind == STRATA__COLL_AG_BLOCKS)
                rc = agb_direct(c, op, &h);
        else if (op->kind == STRATA_COLL_REDUCE_SCATTER)
                rc = rs_rounds(c, op, &h);
        else if (op->kind == STRATA_COLL_SCATTER)
                rc = scatter_rounds(c, op, &h);
        else
                rc = copy_rounds(c, op, &h);
        if (status != STRATA_OK)
                return status;
        if (rc == STRATA_ETIMEDOUT || rc == STRATA_EABORTED || rc == STRATA_EFORMAT ||
            rc == STRATA_ESYS)
                return c->group.fail(c->group.h, rank, rc); /* releases the local ranks */
        st(c)->result[c->flag[0].seq & 1] = rc; /* read after the second meeting */
        return rc;
}

/*
 * The other local ranks left net_move() before local rank 0 met the other processes: after
 * the second meeting they return what it found (another process's refusal) too.
 */
static int net_settle(struct strata_comm *c, int rank, int rc)
{
        int moved = st(c)->result[c->flag[rank].seq & 1];

        if (rank == 0 || rc != STRATA_OK || moved == STRATA_OK)
                return rc;
        return strata__fail(moved, "rank %d: another process refused the collective (%s)",
                            c->rank0 + rank, strata_strerror(moved));
}

int strata__net_warm_up(struct strata_comm *c, int rounds)
{
        const unsigned char *in[DIRECT_MAX], *sum;
        struct head h = { .kind = STRATA_COLL_BARRIER };
        struct red d = { .dt = STRATA_F32, .cop = STRATA__SUM, .es = 4 };

        if (!c || !c->tp_state || c->tp->move != net_move)
                return STRATA_OK; /* not across processes: nothing to warm */
        memset(st(c)->pack, 0, STRATA__NET_DATA);
        d.m = world_of(c).lane / 4;
        for (int r = 0; r < c->n; r++)
                d.src[r] = st(c)->pack;
        for (int i = 0; i < rounds; i++) {
                if (st(c)->net->size <= DIRECT_MAX)
                        STRATA_TRY(exchange(c, &h, st(c)->pack, STRATA__NET_DATA, in));
                else
                        STRATA_TRY(butterfly(c, &h, &d, &sum));
        }
        if (st(c)->net->ops->warm)
                return st(c)->net->ops->warm(st(c)->net, st(c)->link, c->group.timeout_s);
        return STRATA_OK;
}

void strata__net_counts(const struct strata_comm *c, uint64_t *msgs, uint64_t *bytes)
{
        int net = c && c->tp_state && c->tp->move == net_move;

        *msgs = net ? st(c)->msgs : 0;
        *bytes = net ? st(c)->bytes : 0;
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

/*
 * The `net` transport: a communicator whose ranks live in several processes, joined by a link
 * (drivers/net.h). Inside a process the ranks meet as always (drivers/comm.c); then local rank
 * 0 alone talks to the other processes, on behalf of all its local ranks, while they wait at
 * the protocol's second meeting.
 *
 * Every collective is a series of exchanges of at most 1 MiB of data per process. A small
 * reduction's exchange carries every local rank's slice of the same elements to every
 * process, and each then reduces the slices of all ranks of all processes itself; from 64 KiB
 * each process receives only its part of the elements, reduces it and sends the result back
 * (split_rounds). A reduce_scatter's exchanges carry to each process only the blocks its ranks
 * receive, from every rank of every other process (n x n x count elements from each), and it
 * reduces them itself; a scatter's carry from the root's process to each other only its ranks'
 * blocks. Every element is combined in global rank order by the kernel of one process's shm
 * transport, whatever the split into processes (P=1,D=4; P=2,D=2; P=4,D=1 give bitwise the
 * same sums). Each exchange starts with a header holding the call's arguments, so processes
 * that disagree, or one whose ranks passed bad arguments, make every rank return
 * STRATA_EINVAL (the protocol's agreement, extended across processes: the local ranks that
 * waited learn local rank 0's result after the second meeting, net_settle()).
 *
 * Self-contained behind the transport table: its state (the link, the staging, the exchange
 * count) lives in memory the communicator plans for it (state_bytes, init), and its move
 * runs for every collective, so the protocol layer has no mode for processes; it declines
 * the eager path, since the other processes must be met in every collective.
 */
#include <stdint.h>
#include <string.h>

#include "strata/device.h"
#include "strata/status.h"
#include "arch/reduce.h"
#include "drivers/comm_internal.h"
#include "drivers/net.h"

/*
 * The transport's own state, in the first cache line of its memory: the link, and the
 * staging that follows (this process's block, then every process's, twice).
 */
struct net_state {
        struct strata_net *net;
        unsigned char *stage;
        uint64_t seq; /* exchanges so far */
        int result[2]; /* local rank 0's move, by the collective's parity, for the others */
};
_Static_assert(sizeof(struct net_state) <= 64, "the state is one cache line");

static struct net_state *st(const struct strata_comm *c)
{
        return c->tp_state;
}

/* The arguments every process must agree on, at the start of each block. */
struct head {
        uint64_t seq;   /* exchanges so far: blocks from another call are refused */
        uint64_t count;
        int32_t kind, dtype, op, root, status, ranks;
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

/* A communicator spanning processes: the state's line, then the staging. */
static size_t net_state_bytes(const struct strata_comm_config *cfg)
{
        int procs = cfg->world_size / cfg->local_size;

        return cfg->world_size > cfg->local_size
                       ? 64 + (size_t)(2 * procs + 1) * STRATA__NET_BLOCK
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
        *s = (struct net_state){ .net = cfg->net, .stage = (unsigned char *)mem + 64 };
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

/*
 * One exchange of this call: header @p h, and out[p] (len[p] bytes) to each process p; in[p]
 * then points at what process p sent this one. Checks every header.
 */
static int exchange_to(struct strata_comm *c, const struct head *h, const void *const *out,
                       const size_t *len, const unsigned char **in)
{
        struct strata_net *net = st(c)->net;
        unsigned char *stage = st(c)->stage;
        const void *heads[STRATA__NET_MAX], *got[STRATA__NET_MAX];
        size_t sizes[STRATA__NET_MAX];
        int rc;

        memcpy(stage, h, sizeof(*h));
        rc = net->ops->exchange(net, stage, out, len, stage + STRATA__NET_BLOCK, heads, got,
                                sizes, c->group.timeout_s);
        if (rc != STRATA_OK)
                return rc;
        for (int p = 0; p < net->size; p++) {
                struct head o;

                if (p == net->rank)
                        continue;
                in[p] = got[p];
                memcpy(&o, heads[p], sizeof(o));
                if (o.seq != h->seq)
                        return strata__fail(STRATA_EFORMAT, "net: process %d is at collective "
                                            "%llu, this one at %llu", p,
                                            (unsigned long long)o.seq,
                                            (unsigned long long)h->seq);
                if (o.status != STRATA_OK && h->status == STRATA_OK)
                        return strata__fail(STRATA_EINVAL, "process %d passed bad arguments", p);
                if (h->status != STRATA_OK)
                        continue;
                if (o.kind != h->kind || o.count != h->count || o.dtype != h->dtype ||
                    o.op != h->op || o.root != h->root || o.ranks != h->ranks)
                        return strata__fail(STRATA_EINVAL, "processes %d and %d disagree on the "
                                            "collective", net->rank, p);
        }
        return h->status;
}

/* The same @p bytes of @p mine to every process; in[rank] is @p mine. */
static int exchange(struct strata_comm *c, const struct head *h, const void *mine, size_t bytes,
                    const unsigned char **in)
{
        const void *out[STRATA__NET_MAX];
        size_t len[STRATA__NET_MAX];

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
        unsigned char *to = st(c)->stage + STRATA__NET_HEAD;

        for (int r = 0; r < c->n; r++) {
                const unsigned char *from =
                        (const unsigned char *)strata__comm_peer(c, 0, r)->send + off;

                if (c->n == 1)
                        return from;
                memcpy(to + (size_t)r * bytes, from, bytes);
        }
        return to;
}

/* Reduction rounds: each round exchanges every rank's slice [lo, hi) and reduces it. */
static int reduce_rounds(struct strata_comm *c, const struct strata_coll *op, struct head *h)
{
        size_t es = strata_dtype_size(op->dtype), per = per_round(c, es);
        int n = c->n, P = st(c)->net->size, root_local = op->root - c->rank0;
        void *dst[STRATA_MAX_DEVICES];
        const void *src[STRATA_MAX_DEVICES * STRATA__NET_MAX];
        const unsigned char *data[STRATA__NET_MAX];
        int nd = 0;

        for (int r = 0; r < n; r++)
                if (op->kind == STRATA_COLL_ALL_REDUCE || r == root_local)
                        dst[nd++] = strata__comm_peer(c, 0, r)->recv;
        for (size_t lo = 0;; lo += per) {
                size_t hi = op->count - lo < per ? op->count : lo + per, bytes = (hi - lo) * es;

                STRATA_TRY(exchange(c, h, local_data(c, lo * es, bytes), bytes * (size_t)n,
                                    data));
                h->seq = ++st(c)->seq;
                /* Global rank order: process 0's ranks, then process 1's, ... Pointers are
                 * offset by lo so the kernel indexes every source by element number. */
                for (int p = 0; p < P; p++)
                        for (int r = 0; r < n; r++)
                                src[p * n + r] = data[p] + (size_t)r * bytes - lo * es;
                if (nd) /* a reduce whose root is in another process: nothing to write here */
                        strata__reduce_many(op->dtype, (int)op->op, dst, nd, src, P * n, lo,
                                            hi, 0);
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
        void *dst[STRATA_MAX_DEVICES];
        const void *src[STRATA_MAX_DEVICES * STRATA__NET_MAX], *out[STRATA__NET_MAX];
        const unsigned char *in[STRATA__NET_MAX];
        size_t len[STRATA__NET_MAX], a[STRATA__NET_MAX], b[STRATA__NET_MAX];
        unsigned char *pack = st(c)->stage + STRATA__NET_HEAD;

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
                h->seq = ++st(c)->seq;
                for (int p = 0; p < P; p++)
                        for (int r = 0; r < n; r++)
                                src[p * n + r] = in[p] + (size_t)r * (b[me] - a[me]) * es -
                                                 a[me] * es;
                strata__reduce_many(op->dtype, (int)op->op, dst, n, src, P * n, a[me], b[me], 0);
                /* All-gather: this process's part of the result to every other. */
                STRATA_TRY(exchange(c, h, (const unsigned char *)dst[0] + a[me] * es,
                                    (b[me] - a[me]) * es, in));
                h->seq = ++st(c)->seq;
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
        unsigned char *acc = st(c)->stage + STRATA__NET_HEAD;

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
        const unsigned char *data[STRATA__NET_MAX];

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
                h->seq = ++st(c)->seq;
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
        unsigned char *pack = st(c)->stage + STRATA__NET_HEAD;

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
        const void *src[STRATA_MAX_DEVICES * STRATA__NET_MAX];
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
        strata__reduce_many(op->dtype, (int)op->op, dst, 1, src, P * n, 0, b - a, 0);
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
        const void *out[STRATA__NET_MAX];
        const unsigned char *in[STRATA__NET_MAX];
        size_t len[STRATA__NET_MAX];

        for (size_t lo = 0;; lo += per) {
                size_t hi = region - lo < per ? region : lo + per;

                rs_pack(c, op, lo, hi, out, len);
                STRATA_TRY(exchange_to(c, h, out, len, in));
                h->seq = ++st(c)->seq;
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
        const void *out[STRATA__NET_MAX];
        const unsigned char *in[STRATA__NET_MAX];
        size_t len[STRATA__NET_MAX];

        for (size_t lo = 0;; lo += per) {
                size_t hi = region - lo < per ? region : lo + per;

                for (int q = 0; q < P; q++) {
                        out[q] = send ? send + ((size_t)q * region + lo) * es : NULL;
                        len[q] = send && q != me ? (hi - lo) * es : 0;
                }
                STRATA_TRY(exchange_to(c, h, out, len, in));
                h->seq = ++st(c)->seq;
                spread(c, op, send ? send + ((size_t)me * region + lo) * es : in[root_proc], lo,
                       hi);
                if (hi >= region)
                        return STRATA_OK;
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
        const unsigned char *data[STRATA__NET_MAX];
        int rc;

        if (rank != 0)
                return status;
        h.seq = ++st(c)->seq;
        if (status != STRATA_OK || op->kind == STRATA_COLL_BARRIER || !op->count)
                rc = exchange(c, &h, NULL, 0, data);
        else if (op->kind == STRATA_COLL_ALL_REDUCE && st(c)->net->native &&
                 st(c)->net->ops->native_all_reduce && op->op != STRATA_OP_MEAN &&
                 op->op != STRATA_OP_SUM_TREE &&
                 op->dtype != STRATA_BF16 && op->dtype != STRATA_F16)
                rc = reduce_native(c, op);
        else if (op->kind == STRATA_COLL_ALL_REDUCE &&
                 op->count * strata_dtype_size(op->dtype) >= SPLIT_MIN)
                rc = split_rounds(c, op, &h);
        else if (op->kind == STRATA_COLL_ALL_REDUCE || op->kind == STRATA_COLL_REDUCE)
                rc = reduce_rounds(c, op, &h);
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
        const unsigned char *in[STRATA__NET_MAX];
        struct head h = { .seq = 0 };

        if (!c || !c->tp_state || c->tp->move != net_move)
                return STRATA_OK; /* not across processes: nothing to warm */
        memset(st(c)->stage, 0, STRATA__NET_BLOCK);
        for (int i = 0; i < rounds; i++) {
                h.seq = ++st(c)->seq;
                STRATA_TRY(exchange(c, &h, st(c)->stage + STRATA__NET_HEAD, STRATA__NET_DATA, in));
        }
        return STRATA_OK;
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
